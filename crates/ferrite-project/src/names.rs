//! Safety of the names a project server sends: physical file names (joined to the project
//! directory), open names (joined to a slot directory), and the names of apps, workunits
//! and results (used in file names such as `trickle_up_<result>_<time>`).
//!
//! The checks are pure and stricter than BOINC's own (which only refuses `..` and `%`): a
//! name must be one plain path component. Whether an existing path escapes through a
//! symbolic link is a file-system question; [`stays_inside`] answers it once the daemon
//! has canonicalised the path.

use std::path::{Component, Path};

/// Longest name accepted, in bytes (a file-name component on common file systems).
pub const MAX_NAME_LEN: usize = 255;

/// Why a name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Empty (or only white space).
    #[error("empty name")]
    Empty,
    /// Longer than [`MAX_NAME_LEN`] bytes.
    #[error("name of {len} bytes is longer than {MAX_NAME_LEN}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// Starts with `/` (or a drive-like `X:`).
    #[error("absolute path")]
    Absolute,
    /// `.` or `..`, or contains `..`.
    #[error("refers to a parent or current directory")]
    DotDot,
    /// Contains `/`.
    #[error("contains a path separator")]
    Separator,
    /// Contains `\`.
    #[error("contains a backslash")]
    Backslash,
    /// Contains a NUL byte.
    #[error("contains a NUL byte")]
    Nul,
    /// Contains another control character.
    #[error("contains control character {0:#04x}")]
    Control(u32),
    /// Contains `%` (BOINC refuses it: escaped URLs use it in file names).
    #[error("contains '%'")]
    Percent,
    /// Leading or trailing white space (a different file than it looks).
    #[error("leading or trailing white space")]
    Whitespace,
}

/// Checks a physical file name (a `<file_info>` name; lives in the project directory).
pub fn check_file_name(name: &str) -> Result<(), NameError> {
    check_component(name)?;
    if name.contains('%') {
        return Err(NameError::Percent);
    }
    Ok(())
}

/// Checks an open name (the name an app opens a file by, in its slot directory).
pub fn check_open_name(name: &str) -> Result<(), NameError> {
    check_component(name)
}

/// Checks the name of an app, workunit or result.
pub fn check_object_name(name: &str) -> Result<(), NameError> {
    check_component(name)
}

fn check_component(name: &str) -> Result<(), NameError> {
    // Most names (every one a project sends, in practice) are letters, digits, `_`, `-`
    // and single dots: one look at each byte passes them; anything else goes through the
    // checks one by one, which also say what is wrong.
    if plain_component(name) {
        return Ok(());
    }
    check_each(name)
}

/// Every check of a name, one by one, the first failing one said.
fn check_each(name: &str) -> Result<(), NameError> {
    if name.trim().is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong { len: name.len() });
    }
    if name.contains('\0') {
        return Err(NameError::Nul);
    }
    if name.starts_with('/') || name.as_bytes().get(1) == Some(&b':') {
        return Err(NameError::Absolute);
    }
    if name == "." || name.contains("..") {
        return Err(NameError::DotDot);
    }
    if name.contains('/') {
        return Err(NameError::Separator);
    }
    if name.contains('\\') {
        return Err(NameError::Backslash);
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(NameError::Control(u32::from(c)));
    }
    if name.trim() != name {
        return Err(NameError::Whitespace);
    }
    Ok(())
}

/// Whether `name` is a non-empty, not too long name of ASCII letters, digits, `_`, `-` and
/// dots, with no two dots in a row and not `.` alone: a name every check passes.
fn plain_component(name: &str) -> bool {
    if name.is_empty() || name.len() > MAX_NAME_LEN || name == "." {
        return false;
    }
    let mut last = 0u8;
    name.bytes().all(|b| {
        let ok = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && last != b'.');
        last = b;
        ok
    })
}

/// Whether `candidate` (already canonicalised by the caller: symbolic links resolved) lies
/// inside `dir` (canonicalised too). Both must be absolute; any `..` or `.` left in either
/// makes the answer `false`.
pub fn stays_inside(dir: &Path, candidate: &Path) -> bool {
    let clean = |p: &Path| {
        p.is_absolute()
            && p.components().all(|c| {
                matches!(
                    c,
                    Component::RootDir | Component::Prefix(_) | Component::Normal(_)
                )
            })
    };
    clean(dir) && clean(candidate) && candidate.starts_with(dir) && candidate != dir
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The one-look path for plain names answers as the checks one by one do, for
        /// names made mostly of what plain names hold and for any string.
        #[test]
        fn plain_names_pass_as_every_check_passes_them(
            near in "[a-zA-Z0-9_.\\-]{0,300}|[a-z0-9_.:/ \\t\u{85}\u{a0}\u{0}-]{0,8}",
            any in any::<String>(),
        ) {
            for name in [&near, &any] {
                prop_assert_eq!(check_component(name), check_each(name), "{:?}", name);
            }
        }
    }

    #[test]
    fn ordinary_names_pass() {
        for n in [
            "upper_case_1.0_x86_64-pc-linux-gnu",
            "uc_wu_9_0_r488497178_0",
            "in",
            "h1_0450.00_O3aC01Cl1In0.dat",
            "a b",
            "é.txt",
        ] {
            assert_eq!(check_file_name(n), Ok(()), "{n}");
            assert_eq!(check_open_name(n), Ok(()), "{n}");
        }
    }

    #[test]
    fn hostile_names_are_refused_with_their_reason() {
        let long = "x".repeat(MAX_NAME_LEN + 1);
        let cases: &[(&str, NameError)] = &[
            ("", NameError::Empty),
            ("  ", NameError::Empty),
            ("../x", NameError::DotDot),
            ("..", NameError::DotDot),
            (".", NameError::DotDot),
            ("a..b", NameError::DotDot),
            ("/etc/passwd", NameError::Absolute),
            ("C:evil", NameError::Absolute),
            ("a/b", NameError::Separator),
            ("a\\b", NameError::Backslash),
            ("a\0b", NameError::Nul),
            ("a\nb", NameError::Control(10)),
            ("a\u{7f}", NameError::Control(0x7f)),
            (" a", NameError::Whitespace),
            (
                &long,
                NameError::TooLong {
                    len: MAX_NAME_LEN + 1,
                },
            ),
        ];
        for (n, e) in cases {
            assert_eq!(check_file_name(n).as_ref(), Err(e), "{n:?}");
            assert_eq!(check_open_name(n).as_ref(), Err(e), "{n:?}");
        }
        assert_eq!(check_file_name("a%2Fb"), Err(NameError::Percent));
        assert_eq!(check_open_name("a%2Fb"), Ok(()));
        assert_eq!(check_file_name(&"x".repeat(MAX_NAME_LEN)), Ok(()));
    }

    #[test]
    fn inside_checks() {
        let d = Path::new("/data/projects/p");
        assert!(stays_inside(d, Path::new("/data/projects/p/f")));
        assert!(stays_inside(d, Path::new("/data/projects/p/sub/f")));
        assert!(!stays_inside(d, Path::new("/data/projects/p")));
        assert!(!stays_inside(d, Path::new("/data/projects/pq/f")));
        assert!(!stays_inside(d, Path::new("/etc/passwd")));
        assert!(!stays_inside(d, Path::new("/data/projects/p/../q")));
        assert!(!stays_inside(d, Path::new("relative/f")));
    }

    proptest! {
        #[test]
        fn accepted_names_are_one_normal_component(s in "\\PC{0,40}|[a-z./\\\\%\0]{0,10}") {
            if check_file_name(&s).is_ok() {
                let comps: Vec<_> = Path::new(&s).components().collect();
                prop_assert_eq!(comps.len(), 1);
                prop_assert!(matches!(comps[0], Component::Normal(_)));
                prop_assert!(stays_inside(Path::new("/d"), &Path::new("/d").join(&s)));
            }
        }
    }
}
