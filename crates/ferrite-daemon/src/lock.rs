//! The data-directory lock: one client per data directory.
//!
//! The lock is a POSIX record lock (`fcntl(F_SETLK)`) on the file `lockfile`, as the official
//! client takes it, so Ferrite and an official client running on the same directory exclude
//! each other. The holder's PID is asked of the kernel (`F_GETLK`), which is right even when
//! the file's contents are stale.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The lock file's name in the data directory (the official client's).
pub const LOCK_FILE: &str = "lockfile";

/// Why the data directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock.
    #[error("data directory {dir} is in use by another client (process {pid}); stop it first")]
    Held {
        /// The data directory.
        dir: PathBuf,
        /// The PID holding the lock.
        pid: i32,
    },
    /// The lock file could not be opened or locked.
    #[error("cannot create or lock {path} (the data directory must be writable by this user)")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// The held lock; released when dropped (or when the process ends, however it ends).
#[derive(Debug)]
pub struct DirLock {
    file: File,
    path: PathBuf,
}

impl DirLock {
    /// Locks data directory `dir`, writing our PID into the lock file.
    pub fn acquire(dir: &Path) -> Result<Self, LockError> {
        let path = dir.join(LOCK_FILE);
        let io_err = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err)?;
        let mut fl = whole_file_lock(libc::F_WRLCK);
        // SAFETY: fd is a valid open descriptor and fl a properly initialised flock.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &mut fl) };
        if rc != 0 {
            let err = io::Error::last_os_error();
            if matches!(err.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) {
                let pid = holder_pid(&file).unwrap_or(0);
                return Err(LockError::Held {
                    dir: dir.to_path_buf(),
                    pid,
                });
            }
            return Err(io_err(err));
        }
        file.set_len(0).map_err(io_err)?;
        writeln!(file, "{}", std::process::id()).map_err(io_err)?;
        Ok(Self { file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Closing the descriptor releases the record lock; truncate so no stale PID remains.
        let _ = self.file.set_len(0);
    }
}

fn whole_file_lock(kind: libc::c_int) -> libc::flock {
    // SAFETY: flock is a plain C struct for which all-zero is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = 0;
    fl.l_len = 0;
    fl
}

/// The PID of the process holding a conflicting lock on `file`, if any.
fn holder_pid(file: &File) -> Option<i32> {
    let mut fl = whole_file_lock(libc::F_WRLCK);
    // SAFETY: as above; F_GETLK only writes into fl.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut fl) };
    (rc == 0 && fl.l_type != libc::F_UNLCK as libc::c_short).then_some(fl.l_pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_file_holds_our_pid_and_is_cleared_on_release() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lock = DirLock::acquire(dir.path()).expect("lock");
        let pid_text = std::fs::read_to_string(lock.path()).expect("read");
        assert_eq!(pid_text.trim(), std::process::id().to_string());
        let path = lock.path().to_path_buf();
        drop(lock);
        assert_eq!(std::fs::read_to_string(path).expect("read"), "");
        // Record locks belong to the process: the conflict between two daemons is tested
        // end to end in tests/daemon.rs.
    }
}
