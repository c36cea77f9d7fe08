//! GUI RPC authentication: the password file, nonces and the nonce hash.
//!
//! The password is the first line of `gui_rpc_auth.cfg` in the data directory, whitespace
//! stripped. A missing file is created with a random 32-hex-digit password (mode 0640); an
//! empty one turns authentication off. The challenge is `auth1` → nonce, `auth2` →
//! `md5(nonce + password)` in lowercase hex. The official client uses the current time as the
//! nonce; ours is random (from the OS generator) but still looks like a decimal number, which
//! is all clients expect.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use md5::{Digest, Md5};
use rand::rngs::OsRng;
use rand::RngCore;

/// The password file's name in the data directory.
pub const PASSWORD_FILE: &str = "gui_rpc_auth.cfg";

/// Mode of a newly created password file: the owner writes, the `boinc` group may read it so
/// that local GUIs run by group members can authenticate.
pub const PASSWORD_FILE_MODE: u32 = 0o640;

/// The GUI RPC password in force.
#[derive(Clone, PartialEq, Eq)]
pub enum Password {
    /// The password file is empty: every connection is authorized.
    Disabled,
    /// Connections must authenticate with this password for protected ops.
    Required(String),
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Password::Disabled => f.write_str("Password::Disabled"),
            Password::Required(_) => f.write_str("Password::Required(..)"),
        }
    }
}

impl Password {
    /// The password from a file's text: its first line with whitespace stripped.
    pub fn from_file_text(text: &str) -> Password {
        let first = text.lines().next().unwrap_or("").trim();
        if first.is_empty() {
            Password::Disabled
        } else {
            Password::Required(first.to_owned())
        }
    }

    /// Whether connections start unauthenticated.
    pub fn is_required(&self) -> bool {
        matches!(self, Password::Required(_))
    }

    /// The text hashed after the nonce (empty when disabled).
    pub fn as_str(&self) -> &str {
        match self {
            Password::Disabled => "",
            Password::Required(p) => p,
        }
    }
}

/// What happened while loading the password.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PasswordSource {
    /// Read from an existing file.
    Existing,
    /// The file was missing and has been created with a random password.
    Created,
    /// The file exists but is empty: authentication is off (the daemon should warn).
    EmptyFile,
}

/// Errors reading or creating the password file.
#[derive(Debug, thiserror::Error)]
pub enum PasswordFileError {
    /// The file exists but could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The file was missing and could not be created.
    #[error("cannot create {path}")]
    Create {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// Reads `gui_rpc_auth.cfg` from `data_dir`, creating it with a random password if missing.
pub fn load_or_create_password(
    data_dir: &Path,
) -> Result<(Password, PasswordSource), PasswordFileError> {
    let path = data_dir.join(PASSWORD_FILE);
    match fs::read(&path) {
        Ok(bytes) => {
            let password = Password::from_file_text(&String::from_utf8_lossy(&bytes));
            let source = if password.is_required() {
                PasswordSource::Existing
            } else {
                tracing::warn!(
                    path = %path.display(),
                    "GUI RPC password file is empty: GUI RPC authentication is disabled"
                );
                PasswordSource::EmptyFile
            };
            Ok((password, source))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let password = random_password();
            write_new_password_file(&path, &password).map_err(|source| {
                PasswordFileError::Create {
                    path: path.clone(),
                    source,
                }
            })?;
            tracing::info!(path = %path.display(), "created a GUI RPC password file");
            Ok((Password::Required(password), PasswordSource::Created))
        }
        Err(source) => Err(PasswordFileError::Read { path, source }),
    }
}

fn write_new_password_file(path: &Path, password: &str) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(PASSWORD_FILE_MODE)
        .open(path)?;
    // The umask may have taken bits away; the mode is part of the contract.
    file.set_permissions(fs::Permissions::from_mode(PASSWORD_FILE_MODE))?;
    file.write_all(password.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

/// 32 lowercase hex digits (128 bits) from the OS random generator.
pub fn random_password() -> String {
    let mut bytes = [0u8; 16];
    OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// A fresh, unpredictable nonce formatted like the official `%f` time stamp
/// (`digits.digits`), carrying 96 random bits.
pub fn random_nonce() -> String {
    let mut bytes = [0u8; 12];
    OsRng.fill_bytes(&mut bytes);
    let mut whole = [0u8; 8];
    whole.copy_from_slice(&bytes[..8]);
    let mut frac = [0u8; 4];
    frac.copy_from_slice(&bytes[8..]);
    // 64 bits before the point; 32 bits after it, printed as a zero-padded decimal fraction.
    format!(
        "{}.{:010}",
        u64::from_le_bytes(whole),
        u32::from_le_bytes(frac)
    )
}

/// `md5(nonce + password)` in lowercase hex, what `auth2` must carry.
pub fn nonce_hash(nonce: &str, password: &str) -> String {
    let mut md5 = Md5::new();
    md5.update(nonce.as_bytes());
    md5.update(password.as_bytes());
    hex::encode(md5.finalize())
}

/// Compares a received hash with the expected one without an early exit.
pub(crate) fn hashes_match(received: &str, expected: &str) -> bool {
    let (a, b) = (received.as_bytes(), expected.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_matches_the_official_transcript() {
        // multiple_requests_one_connection: nonce 1795333021.122344, password "testpw".
        assert_eq!(
            nonce_hash("1795333021.122344", "testpw"),
            "dc615b67e42f537e0266fb8f8c7b8a28"
        );
    }

    #[test]
    fn nonces_are_decimal_and_differ() {
        let a = random_nonce();
        let b = random_nonce();
        assert_ne!(a, b);
        let (whole, frac) = a.split_once('.').unwrap_or(("", ""));
        assert!(
            !whole.is_empty() && whole.bytes().all(|c| c.is_ascii_digit()),
            "{a}"
        );
        assert!(
            frac.len() == 10 && frac.bytes().all(|c| c.is_ascii_digit()),
            "{a}"
        );
        assert!(a.parse::<f64>().is_ok());
    }

    #[test]
    fn first_line_trimmed() {
        assert_eq!(
            Password::from_file_text("  secret \nsecond\n"),
            Password::Required("secret".into())
        );
        assert_eq!(Password::from_file_text("\n"), Password::Disabled);
        assert_eq!(Password::from_file_text(""), Password::Disabled);
    }

    #[test]
    fn constant_time_compare() {
        assert!(hashes_match("abc", "abc"));
        assert!(!hashes_match("abd", "abc"));
        assert!(!hashes_match("ab", "abc"));
    }
}
