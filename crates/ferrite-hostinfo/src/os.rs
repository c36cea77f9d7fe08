//! Operating-system identity as BOINC reports it: `os_name` (`Linux` plus the distribution
//! name), `os_version` (distribution version with kernel and libc in brackets), platform
//! names, time zone, product name and whether we run in a virtual machine or container.
//! Roots (`/etc`, `/sys`, `/`) are parameters so tests use fixture trees.

use std::path::Path;

/// The fields of `os-release` the official client uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsRelease {
    /// `NAME`.
    pub name: String,
    /// `PRETTY_NAME`.
    pub pretty_name: String,
    /// `VERSION`.
    pub version: String,
    /// `VERSION_CODENAME` (or another `*CODENAME`).
    pub codename: String,
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    let v = v
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(v);
    // os-release allows shell escapes of `"`, `\`, `` ` `` and `$`.
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Parses an `os-release` file. Returns `None` when none of the keys is present.
pub fn parse_os_release(text: &str) -> Option<OsRelease> {
    let mut r = OsRelease::default();
    let mut found = false;
    for line in text.lines() {
        let Some((key, value)) = line.trim().split_once('=') else {
            continue;
        };
        let slot = match key {
            "NAME" => &mut r.name,
            "PRETTY_NAME" => &mut r.pretty_name,
            "VERSION" => &mut r.version,
            k if k.ends_with("CODENAME") => &mut r.codename,
            _ => continue,
        };
        *slot = unquote(value);
        found = true;
    }
    found.then_some(r)
}

/// Reads the output of `lsb_release -a`: `Distributor ID` as the name, `Description` as
/// the pretty name, `Release` and `Codename`.
pub fn parse_lsb_release(text: &str) -> Option<OsRelease> {
    let mut r = OsRelease::default();
    let mut found = false;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let slot = match key.trim() {
            "Distributor ID" => &mut r.name,
            "Description" => &mut r.pretty_name,
            "Release" => &mut r.version,
            "Codename" => &mut r.codename,
            _ => continue,
        };
        *slot = value.trim().to_owned();
        found = true;
    }
    found.then_some(r)
}

/// Runs `lsb_release -a` when it is installed (at most two seconds).
pub fn lsb_release() -> Option<OsRelease> {
    use std::process::{Command, Stdio};
    let mut child = Command::new("lsb_release")
        .arg("-a")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    parse_lsb_release(&out)
}

/// Composes `os_name` and `os_version` as the official Linux client does:
/// `Linux <NAME>` and `<PRETTY_NAME> [<kernel release>|libc <version>]`.
pub fn compose_os(
    sysname: &str,
    kernel_release: &str,
    release: Option<&OsRelease>,
    libc_version: Option<&str>,
) -> (String, String) {
    let mut os_name = sysname.to_owned();
    let mut version = kernel_release.to_owned();
    let mut extra = Vec::new();
    if let Some(r) = release {
        extra.push(kernel_release.to_owned());
        version = if !r.pretty_name.is_empty() {
            r.pretty_name.clone()
        } else {
            [&r.name, &r.version, &r.codename]
                .iter()
                .filter(|s| !s.is_empty())
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        };
        if !r.name.is_empty() {
            os_name = format!("{sysname} {}", r.name);
        }
    }
    if let Some(l) = libc_version {
        extra.push(format!("libc {l}"));
    }
    if !extra.is_empty() {
        version = format!("{version} [{}]", extra.join("|"));
    }
    (os_name, version)
}

#[cfg(test)]
mod lsb_tests {
    #[test]
    fn lsb_release_output_gives_the_distributor_as_name() {
        let r = super::parse_lsb_release(
            "Distributor ID:\tDebian\nDescription:\tDebian GNU/Linux 12 (bookworm)\n\
             Release:\t12\nCodename:\tbookworm\n",
        )
        .expect("parsed");
        assert_eq!(r.name, "Debian");
        assert_eq!(r.pretty_name, "Debian GNU/Linux 12 (bookworm)");
        let (name, version) = super::compose_os("Linux", "6.1", Some(&r), None);
        assert_eq!(name, "Linux Debian");
        assert_eq!(version, "Debian GNU/Linux 12 (bookworm) [6.1]");
        assert!(super::parse_lsb_release("No LSB modules are available.\n").is_none());
    }
}

/// The C library version, from glibc itself (no process is spawned).
pub fn libc_version() -> Option<String> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: glibc returns a pointer to a static NUL-terminated string.
        let p = unsafe { libc::gnu_get_libc_version() };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-null, static and NUL-terminated as documented.
        let s = unsafe { std::ffi::CStr::from_ptr(p) };
        Some(s.to_string_lossy().into_owned())
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

/// Offset of local time from UTC in seconds, east positive (`<timezone>`).
pub fn timezone_offset() -> i32 {
    // SAFETY: `time(NULL)` and `localtime_r` with valid pointers to local storage.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            return 0;
        }
        i32::try_from(tm.tm_gmtoff).unwrap_or(0)
    }
}

/// The machine architecture a platform list is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Machine {
    /// 64-bit x86.
    X86_64,
    /// 32-bit x86.
    X86,
    /// 64-bit ARM.
    Aarch64,
    /// 32-bit ARM with hard float.
    Arm,
    /// Anything else.
    Other,
}

impl Machine {
    /// The architecture this crate was compiled for.
    pub fn native() -> Self {
        if cfg!(target_arch = "x86_64") {
            Machine::X86_64
        } else if cfg!(target_arch = "x86") {
            Machine::X86
        } else if cfg!(target_arch = "aarch64") {
            Machine::Aarch64
        } else if cfg!(target_arch = "arm") {
            Machine::Arm
        } else {
            Machine::Other
        }
    }
}

/// 32-bit x86 program loaders; one of them present means i686 programs can run.
const I686_LOADERS: &[&str] = &[
    "lib/ld-linux.so.2",
    "lib32/ld-linux.so.2",
    "usr/lib32/ld-linux.so.2",
    "lib/i386-linux-gnu/ld-linux.so.2",
    "usr/lib/i386-linux-gnu/ld-linux.so.2",
];

/// Platform names in preference order: primary first. On x86_64 the 32-bit platform is added
/// only when a 32-bit loader exists under `root` (as the official client looks for 32-bit
/// libraries). On aarch64 the official client's builds (configured with
/// `--with-boinc-alt-platform=arm-unknown-linux-gnueabihf`) always add the 32-bit ARM
/// platform; Ferrite adds it when `arm32` says the CPU and kernel run 32-bit ARM programs
/// ([`arm32_runs`]), so that a host whose cores have no AArch32 (Neoverse V1, Cortex-X2 and
/// later, Apple silicon) is never sent apps it cannot start. A 32-bit ARM (armhf) host has
/// one platform, as the official armhf build.
pub fn platforms(machine: Machine, root: &Path, arm32: bool) -> Vec<String> {
    let v: &[&str] = match machine {
        Machine::X86_64 => {
            if I686_LOADERS.iter().any(|l| root.join(l).exists()) {
                &["x86_64-pc-linux-gnu", "i686-pc-linux-gnu"]
            } else {
                &["x86_64-pc-linux-gnu"]
            }
        }
        Machine::X86 => &["i686-pc-linux-gnu"],
        Machine::Aarch64 if arm32 => &["aarch64-unknown-linux-gnu", "arm-unknown-linux-gnueabihf"],
        Machine::Aarch64 => &["aarch64-unknown-linux-gnu"],
        Machine::Arm => &["arm-unknown-linux-gnueabihf"],
        Machine::Other => &[],
    };
    v.iter().map(|s| (*s).to_owned()).collect()
}

/// Whether this process's CPU and kernel run 32-bit ARM programs. On aarch64 Linux the kernel
/// accepts the `PER_LINUX32` personality only where 32-bit code can run at EL0
/// (`arch/arm64/kernel/sys.c`: every core has AArch32 and the kernel has `CONFIG_COMPAT`), so
/// the answer is that call's, and the personality is put back at once. A 32-bit ARM build
/// runs them by definition; other architectures do not.
pub fn arm32_runs() -> bool {
    if cfg!(target_arch = "arm") {
        return true;
    }
    if !cfg!(target_arch = "aarch64") {
        return false;
    }
    const PER_LINUX32: libc::c_ulong = 0x0008;
    const QUERY: libc::c_ulong = 0xffff_ffff;
    // SAFETY: personality only reads or sets this thread's execution domain; 0xffffffff
    // queries it without a change.
    let old = unsafe { libc::personality(QUERY) };
    if old == -1 {
        return false;
    }
    // SAFETY: as above; the previous persona is set back right after.
    let ok = unsafe { libc::personality(PER_LINUX32) } != -1;
    if ok {
        // SAFETY: as above; `old` is what the kernel returned, a valid persona.
        unsafe { libc::personality(old as libc::c_ulong) };
    }
    ok
}

/// The board's name from the device tree (`/proc/device-tree/model`, a NUL-terminated string
/// on ARM boards: "Raspberry Pi 5 Model B Rev 1.0"), when there is one.
pub fn device_tree_model(proc_root: &Path) -> Option<String> {
    let raw = std::fs::read(proc_root.join("device-tree/model")).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let name = text.trim_matches(|c: char| c == '\0' || c.is_whitespace());
    (!name.is_empty()).then(|| name.to_owned())
}

fn read_line(path: &Path) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_owned())
}

/// Placeholder strings firmware vendors leave in DMI tables.
const DMI_JUNK: &[&str] = &[
    "To Be Filled By O.E.M.",
    "System Product Name",
    "Default string",
    "Not Specified",
    "None",
];

/// The hardware product name from DMI (`/sys/class/dmi/id/product_name`), when meaningful.
pub fn dmi_product_name(sys_root: &Path) -> Option<String> {
    let name = read_line(&sys_root.join("class/dmi/id/product_name"))?;
    (!DMI_JUNK.iter().any(|j| j.eq_ignore_ascii_case(&name))).then_some(name)
}

/// How the host is virtualised, when it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Virtualization {
    /// Running inside a container (`docker`, `podman`, `lxc`, `kubernetes`, …).
    Container(String),
    /// Running in a virtual machine; the hypervisor's name when DMI tells it.
    VirtualMachine(String),
}

/// Detects a container (marker files, PID 1's environment and cgroup) or a virtual machine
/// (DMI vendor, the `hypervisor` CPU flag). The official Linux client reports only the CPU
/// flag (inside `p_features`); this is extra information for the log and the GUI.
pub fn detect_virtualization(
    root: &Path,
    proc_root: &Path,
    sys_root: &Path,
    cpu_features: &str,
) -> Option<Virtualization> {
    if root.join(".dockerenv").exists() {
        return Some(Virtualization::Container("docker".into()));
    }
    if root.join("run/.containerenv").exists() {
        return Some(Virtualization::Container("podman".into()));
    }
    if let Ok(env) = std::fs::read(proc_root.join("1/environ")) {
        for var in env.split(|&b| b == 0) {
            if let Some(v) = var.strip_prefix(b"container=") {
                return Some(Virtualization::Container(
                    String::from_utf8_lossy(v).into_owned(),
                ));
            }
        }
    }
    if let Ok(cg) = std::fs::read_to_string(proc_root.join("1/cgroup")) {
        for (needle, name) in [
            ("kubepods", "kubernetes"),
            ("docker", "docker"),
            ("lxc", "lxc"),
            ("libpod", "podman"),
        ] {
            if cg.contains(needle) {
                return Some(Virtualization::Container(name.into()));
            }
        }
    }
    let vendor = read_line(&sys_root.join("class/dmi/id/sys_vendor")).unwrap_or_default();
    let product = read_line(&sys_root.join("class/dmi/id/product_name")).unwrap_or_default();
    let known = [
        ("QEMU", "QEMU"),
        ("KVM", "KVM"),
        ("VMware", "VMware"),
        ("innotek", "VirtualBox"),
        ("VirtualBox", "VirtualBox"),
        ("Xen", "Xen"),
        ("Amazon EC2", "Amazon EC2"),
        ("Google Compute Engine", "Google Compute Engine"),
        ("Parallels", "Parallels"),
    ];
    for (needle, name) in known {
        if vendor.contains(needle) || product.contains(needle) {
            return Some(Virtualization::VirtualMachine(name.into()));
        }
    }
    if vendor == "Microsoft Corporation" && product.contains("Virtual Machine") {
        return Some(Virtualization::VirtualMachine("Hyper-V".into()));
    }
    if cpu_features.split_whitespace().any(|f| f == "hypervisor") {
        return Some(Virtualization::VirtualMachine("unknown hypervisor".into()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_version_has_kernel_and_libc_in_brackets() {
        let r = parse_os_release(
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"\nVERSION_CODENAME=bookworm\n",
        )
        .expect("os-release");
        let (name, version) = compose_os("Linux", "6.1.0-18-amd64", Some(&r), Some("2.36"));
        assert_eq!(name, "Linux Debian GNU/Linux");
        assert_eq!(
            version,
            "Debian GNU/Linux 12 (bookworm) [6.1.0-18-amd64|libc 2.36]"
        );
    }

    #[test]
    fn without_os_release_the_kernel_release_is_the_version() {
        let (name, version) = compose_os("Linux", "5.15.0", None, Some("2.35"));
        assert_eq!(name, "Linux");
        assert_eq!(version, "5.15.0 [libc 2.35]");
        let (_, version) = compose_os("Linux", "5.15.0", None, None);
        assert_eq!(version, "5.15.0");
    }

    #[test]
    fn os_release_without_pretty_name_joins_name_version_codename() {
        let r = parse_os_release("NAME='Foo OS'\nVERSION=3\nUBUNTU_CODENAME=jammy\nID=foo\n")
            .expect("parse");
        let (_, v) = compose_os("Linux", "6.0", Some(&r), None);
        assert_eq!(v, "Foo OS 3 jammy [6.0]");
        assert_eq!(parse_os_release("ID=foo\n"), None);
        assert_eq!(unquote(r#""a \"b\" c""#), "a \"b\" c");
    }

    #[test]
    fn platform_lists() {
        let empty = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            platforms(Machine::X86_64, empty.path(), false),
            vec!["x86_64-pc-linux-gnu"]
        );
        std::fs::create_dir_all(empty.path().join("lib32")).expect("mkdir");
        std::fs::write(empty.path().join("lib32/ld-linux.so.2"), b"").expect("write");
        assert_eq!(
            platforms(Machine::X86_64, empty.path(), false),
            vec!["x86_64-pc-linux-gnu", "i686-pc-linux-gnu"]
        );
        // aarch64: the 32-bit ARM platform where 32-bit ARM programs run, as the official
        // arm64 build's alternative platform.
        assert_eq!(
            platforms(Machine::Aarch64, empty.path(), true),
            vec!["aarch64-unknown-linux-gnu", "arm-unknown-linux-gnueabihf"]
        );
        assert_eq!(
            platforms(Machine::Aarch64, empty.path(), false),
            vec!["aarch64-unknown-linux-gnu"]
        );
        // armhf: one platform, whatever the flag says.
        for arm32 in [true, false] {
            assert_eq!(
                platforms(Machine::Arm, empty.path(), arm32),
                vec!["arm-unknown-linux-gnueabihf"]
            );
        }
    }

    #[test]
    fn arm32_answer_follows_the_build_architecture() {
        let runs = arm32_runs();
        if cfg!(target_arch = "arm") {
            assert!(runs);
        } else if !cfg!(target_arch = "aarch64") {
            assert!(!runs, "an x86 build never reports 32-bit ARM");
        }
        // The persona is put back: a second question gets the same answer.
        assert_eq!(arm32_runs(), runs);
        // SAFETY: a query only.
        let persona = unsafe { libc::personality(0xffff_ffff) };
        assert_eq!(
            persona & 0xff,
            0,
            "PER_LINUX, not PER_LINUX32, after the probe"
        );
    }

    #[test]
    fn device_tree_model_drops_the_terminating_nul() {
        let t = tempfile::tempdir().expect("tempdir");
        assert_eq!(device_tree_model(t.path()), None);
        std::fs::create_dir_all(t.path().join("device-tree")).expect("mkdir");
        std::fs::write(
            t.path().join("device-tree/model"),
            b"Raspberry Pi 5 Model B Rev 1.0\0",
        )
        .expect("write");
        assert_eq!(
            device_tree_model(t.path()).as_deref(),
            Some("Raspberry Pi 5 Model B Rev 1.0")
        );
        std::fs::write(t.path().join("device-tree/model"), b"\0").expect("write");
        assert_eq!(device_tree_model(t.path()), None);
    }

    #[test]
    fn virtualization_from_markers_and_dmi() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path().join("root");
        let proc_root = t.path().join("proc");
        let sys = t.path().join("sys");
        std::fs::create_dir_all(root.join("run")).expect("mkdir");
        std::fs::create_dir_all(proc_root.join("1")).expect("mkdir");
        std::fs::create_dir_all(sys.join("class/dmi/id")).expect("mkdir");
        assert_eq!(
            detect_virtualization(&root, &proc_root, &sys, "fpu sse"),
            None
        );
        assert_eq!(
            detect_virtualization(&root, &proc_root, &sys, "fpu hypervisor"),
            Some(Virtualization::VirtualMachine("unknown hypervisor".into()))
        );
        std::fs::write(sys.join("class/dmi/id/sys_vendor"), "QEMU\n").expect("write");
        assert_eq!(
            detect_virtualization(&root, &proc_root, &sys, "fpu"),
            Some(Virtualization::VirtualMachine("QEMU".into()))
        );
        std::fs::write(proc_root.join("1/environ"), b"PATH=/bin\0container=lxc\0").expect("write");
        assert_eq!(
            detect_virtualization(&root, &proc_root, &sys, "fpu"),
            Some(Virtualization::Container("lxc".into()))
        );
        std::fs::write(root.join("run/.containerenv"), b"").expect("write");
        assert_eq!(
            detect_virtualization(&root, &proc_root, &sys, "fpu"),
            Some(Virtualization::Container("podman".into()))
        );
    }
}
