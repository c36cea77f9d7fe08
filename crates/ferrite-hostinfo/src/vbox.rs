//! VirtualBox detection as the official client does it on Linux
//! (`client/hostinfo_unix.cpp`, `get_virtualbox_version`): `VBoxManage --version` whose
//! first line starts with three numbers (`7.0.14r161095`) gives `<virtualbox_version>`, the
//! whole trimmed line. The official client looks only at `/usr/bin/VBoxManage` and
//! `/usr/local/bin/VBoxManage`; Ferrite then also looks along `PATH` (VirtualBox installed
//! under `/opt`, or a stand-in in the tests).
//!
//! The CPU's virtualisation extensions are the `vmx` (Intel) and `svm` (AMD) flags of
//! `p_features`; the kernel drops them when the firmware disables the extensions.
//! `<p_vm_extensions_disabled>` is set by the daemon when a VirtualBox app says the
//! extensions are disabled ([`VM_EXTENSIONS_DISABLED_MARK`] in its stderr).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the official client looks for `VBoxManage`, in order.
pub const OFFICIAL_LOCATIONS: [&str; 2] = ["/usr/bin/VBoxManage", "/usr/local/bin/VBoxManage"];

/// What `vboxwrapper` writes to stderr when the CPU's virtualisation extensions are off.
pub const VM_EXTENSIONS_DISABLED_MARK: &str = "ERR_CPU_VM_EXTENSIONS_DISABLED";

/// How long `VBoxManage --version` may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);

/// The version in `VBoxManage --version`'s output: its first line, trimmed, when it starts
/// with `N.N.N`.
pub fn parse_version(output: &str) -> Option<String> {
    let line = output.lines().next()?.trim();
    let mut parts = line.splitn(3, '.');
    let major = parts.next()?;
    let minor = parts.next()?;
    let rest = parts.next()?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let patch: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (digits(major) && digits(minor) && !patch.is_empty()).then(|| line.to_owned())
}

/// Whether the CPU flags `p_features` include virtualisation extensions (`vmx` or `svm`).
pub fn cpu_has_vm_extensions(p_features: &str) -> bool {
    p_features
        .split_whitespace()
        .any(|f| f == "vmx" || f == "svm")
}

/// The first of `candidates` that is an executable file and reports a version.
pub fn detect_with(candidates: &[PathBuf], timeout: Duration) -> Option<String> {
    candidates
        .iter()
        .filter(|p| is_executable(p))
        .find_map(|p| parse_version(&crate::docker::output_of(p, &["--version"], timeout)?))
}

/// The official locations, then `VBoxManage` in each directory of `path` (a `PATH` value).
pub fn candidates(path: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = OFFICIAL_LOCATIONS.iter().map(PathBuf::from).collect();
    if let Some(path) = path {
        for dir in std::env::split_paths(path) {
            let p = dir.join("VBoxManage");
            if dir.is_absolute() && !v.contains(&p) {
                v.push(p);
            }
        }
    }
    v
}

/// VirtualBox's version, when `VBoxManage` is installed.
pub fn detect() -> Option<String> {
    detect_with(
        &candidates(std::env::var_os("PATH").as_deref()),
        COMMAND_TIMEOUT,
    )
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_like_the_official_client() {
        assert_eq!(
            parse_version("7.0.14r161095\n").as_deref(),
            Some("7.0.14r161095")
        );
        assert_eq!(
            parse_version("  6.1.50_Debianr161033 \n").as_deref(),
            Some("6.1.50_Debianr161033")
        );
        assert_eq!(
            parse_version("WARNING: The vboxdrv kernel module is not loaded.\n7.0.14r1\n"),
            None,
            "only the first line counts"
        );
        assert_eq!(parse_version("7.0\n"), None);
        assert_eq!(parse_version(""), None);
    }

    #[test]
    fn vm_extensions_are_the_vmx_or_svm_flag() {
        assert!(cpu_has_vm_extensions("fpu vme vmx smx est"));
        assert!(cpu_has_vm_extensions("fpu svm"));
        assert!(!cpu_has_vm_extensions("fpu vme vmxx hypervisor"));
    }

    #[test]
    fn the_official_locations_come_first_then_path() {
        let c = candidates(Some(std::ffi::OsStr::new("/opt/vb/bin:relative:/usr/bin")));
        let c: Vec<&str> = c.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            c,
            [
                "/usr/bin/VBoxManage",
                "/usr/local/bin/VBoxManage",
                "/opt/vb/bin/VBoxManage"
            ]
        );
    }

    #[test]
    fn a_fake_vboxmanage_is_found_and_a_broken_one_skipped() {
        use std::os::unix::fs::PermissionsExt as _;
        let d = tempfile::tempdir().expect("tmp");
        let write = |name: &str, body: &str, executable: bool| {
            let dir = d.path().join(name);
            std::fs::create_dir_all(&dir).unwrap();
            let p = dir.join("VBoxManage");
            crate::test_support::write_script(&p, body);
            if !executable {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
            }
            p
        };
        let not_exec = write("a", "echo 7.1.0r1\n", false);
        let broken = write("b", "echo 'VBoxManage: error: no'\n", true);
        let good = write("c", "[ \"$1\" = --version ] && echo 7.0.14r161095\n", true);
        let t = Duration::from_secs(10);
        assert_eq!(
            detect_with(&[not_exec.clone(), broken.clone(), good], t).as_deref(),
            Some("7.0.14r161095")
        );
        assert_eq!(detect_with(&[not_exec, broken], t), None);
    }
}
