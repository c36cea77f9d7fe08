//! Host detection for Ferrite: what the `<host_info>` and `<coprocs>` blocks say about this
//! machine (CPUs, memory, disk, OS, NVIDIA GPUs, OpenCL platforms and GPUs, user-defined
//! coprocessors), the CPU
//! benchmarks, user activity and power state, CPU and GPU temperatures (`thermal`), and the
//! `--detect_gpus` report.
//!
//! The daemon owns *when* things run; this crate only answers. Typical use:
//!
//! ```no_run
//! use ferrite_hostinfo::{HostDetector, HostProbeConfig};
//! let det = HostDetector::new(HostProbeConfig::new("/var/lib/boinc"));
//! let mut found = det.detect_host();
//! let gpus = det.probe_gpus();
//! ferrite_hostinfo::apply_gpu_probe(&mut found.host, &gpus);
//! ```

pub mod activity;
pub mod bench;
pub mod cgroup;
pub mod cpuinfo;
pub mod docker;
pub mod docker_cleanup;
pub mod gpu;
pub mod gpu_child;
pub mod logind;
pub mod opencl;
pub mod os;
mod report;
pub mod thermal;
pub mod vbox;

#[cfg(test)]
mod test_support;

use std::path::{Path, PathBuf};

use ferrite_proto::host::HostInfo;

pub use activity::{
    candidate_devices, idle_from_devices, idle_from_idle_detect, idle_time, idle_time_of,
    on_battery, IdleProbe,
};
pub use bench::{benchmarks_due, run_benchmarks, BenchmarkResult};
pub use gpu::{
    ExcludeGpu, GpuConfig, GpuInstance, GpuProbe, GpuUse, NvidiaDevice, NvmlStatus, OpenclFound,
    UserCoproc, NVML_LIBRARY_ENV,
};
pub use opencl::{OpenclDevice, OpenclStatus, OpenclVendor, OPENCL_LIBRARY_ENV};
pub use os::Virtualization;
pub use report::{detect_gpus_report, opencl_lines};

/// File-system roots read by detection. Production uses the real ones; tests point them at
/// fixture trees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemRoots {
    /// `/`: container marker files, 32-bit loaders.
    pub root: PathBuf,
    /// `/proc`: `cpuinfo`, `self/cgroup`, PID 1's environment.
    pub proc_root: PathBuf,
    /// `/sys`: DMI, caches, power supplies.
    pub sys_root: PathBuf,
    /// `/sys/fs/cgroup`: cgroup limits.
    pub cgroup_root: PathBuf,
    /// `/etc`: `os-release`.
    pub etc_root: PathBuf,
}

impl Default for SystemRoots {
    fn default() -> Self {
        SystemRoots {
            root: PathBuf::from("/"),
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
            cgroup_root: PathBuf::from("/sys/fs/cgroup"),
            etc_root: PathBuf::from("/etc"),
        }
    }
}

/// What detection needs to know.
#[derive(Debug, Clone, PartialEq)]
pub struct HostProbeConfig {
    /// The BOINC data directory: `d_total`/`d_free` describe its file system.
    pub data_dir: PathBuf,
    /// NVML library to load; `None` means `$FERRITE_NVML_LIBRARY`, else the system's.
    pub nvml_library: Option<PathBuf>,
    /// OpenCL library (ICD loader) to load; `None` means `$FERRITE_OPENCL_LIBRARY`, else the
    /// system's `libOpenCL.so`.
    pub opencl_library: Option<PathBuf>,
    /// GPU options from `cc_config.xml`.
    pub gpu: GpuConfig,
    /// Where to read system information from.
    pub roots: SystemRoots,
}

impl HostProbeConfig {
    /// Defaults for a data directory: real system roots, no GPU options.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        HostProbeConfig {
            data_dir: data_dir.into(),
            nvml_library: None,
            opencl_library: None,
            gpu: GpuConfig::default(),
            roots: SystemRoots::default(),
        }
    }
}

/// What detection found beyond the `<host_info>` fields, for logs, `--detect_gpus` and the
/// daemon's decisions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostDetails {
    /// Online logical CPUs of the machine.
    pub online_cpus: u32,
    /// CPUs in the process's affinity mask.
    pub affinity_cpus: Option<u32>,
    /// cgroup CPU quota, in CPUs.
    pub cpu_quota: Option<f64>,
    /// Physical RAM, bytes.
    pub physical_memory: u64,
    /// cgroup memory limit, bytes.
    pub memory_limit: Option<u64>,
    /// Host name (also reported as `domain_name`).
    pub host_name: String,
    /// Virtual machine or container, when detected.
    pub virtualization: Option<Virtualization>,
    /// The platforms this host runs, primary first ([`HostDetector::platforms`]).
    pub platforms: Vec<String>,
}

/// The result of [`HostDetector::detect_host`].
#[derive(Debug, Clone, PartialEq)]
pub struct HostDetection {
    /// The `<host_info>` fields (benchmarks, `host_cpid` and coprocs are left to the caller).
    pub host: HostInfo,
    /// Extra facts.
    pub details: HostDetails,
    /// Things that could not be read, one log line each.
    pub warnings: Vec<String>,
}

/// Detects the host. Cheap to create; every call reads the system afresh.
#[derive(Debug, Clone)]
pub struct HostDetector {
    config: HostProbeConfig,
}

impl HostDetector {
    /// A detector with these options.
    pub fn new(config: HostProbeConfig) -> Self {
        HostDetector { config }
    }

    /// The options in use.
    pub fn config(&self) -> &HostProbeConfig {
        &self.config
    }

    /// CPUs, memory, disk, OS, names and time zone (no GPUs, no benchmarks).
    pub fn detect_host(&self) -> HostDetection {
        detect_host_impl(&self.config)
    }

    /// Probes NVIDIA GPUs and OpenCL platforms and adds user-defined coprocessors. Never
    /// fails.
    pub fn probe_gpus(&self) -> GpuProbe {
        gpu::probe_gpus(
            &self.config.gpu,
            self.config.nvml_library.as_deref(),
            self.config.opencl_library.as_deref(),
        )
    }

    /// [`probe_gpus`](Self::probe_gpus) in a child process: `exe` run with
    /// [`gpu_child::GPU_SCAN_ARG`] (the daemon's own binary), waited for at most `timeout`.
    /// Never fails: a child that crashes or hangs gives no GPU and a status that says why.
    pub fn probe_gpus_in_child(&self, exe: &Path, timeout: std::time::Duration) -> GpuProbe {
        gpu_child::probe_in_child(
            exe,
            &self.config.gpu,
            self.config.nvml_library.as_deref(),
            self.config.opencl_library.as_deref(),
            timeout,
        )
    }

    /// Platform names this host runs, primary first.
    pub fn platforms(&self) -> Vec<String> {
        native_platforms(&self.config.roots.root)
    }
}

/// The platforms of this build on this machine: the 32-bit ARM platform of an aarch64 build
/// only where the kernel runs 32-bit ARM programs.
fn native_platforms(root: &Path) -> Vec<String> {
    let machine = os::Machine::native();
    let arm32 = machine == os::Machine::Aarch64 && os::arm32_runs();
    os::platforms(machine, root, arm32)
}

/// The first network interface's MAC address (lowercase, colon-separated), skipping the
/// loopback and all-zero addresses. `sys_root` is normally `/sys`.
pub fn mac_address(sys_root: &Path) -> Option<String> {
    let mut names: Vec<_> = std::fs::read_dir(sys_root.join("class/net"))
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "lo")
        .collect();
    names.sort();
    names.into_iter().find_map(|n| {
        let a = std::fs::read_to_string(sys_root.join("class/net").join(n).join("address")).ok()?;
        let a = a.trim().to_ascii_lowercase();
        let zero = a.chars().all(|c| c == '0' || c == ':');
        (a.len() == 17 && !zero).then_some(a)
    })
}

/// `host_cpid` as the official client derives it: the MD5 (hex) of the MAC address followed
/// by the data directory, so that several clients on one host get different ids.
pub fn host_cpid_from(mac: &str, data_dir: &Path) -> String {
    use md5::{Digest, Md5};
    let mut h = Md5::new();
    h.update(mac.as_bytes());
    h.update(data_dir.as_os_str().as_encoded_bytes());
    format!("{:x}", h.finalize())
}

/// A new `host_cpid` for a host that has none: from the MAC address when there is one, else
/// 32 random hex digits.
pub fn generate_host_cpid(sys_root: &Path, data_dir: &Path) -> String {
    if let Some(mac) = mac_address(sys_root) {
        return host_cpid_from(&mac, data_dir);
    }
    let mut buf = [0u8; 16];
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n != buf.len() as isize {
        // No randomness available: fall back to the clock and process id, still unique enough
        // for an identifier that only needs to differ between hosts.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        return host_cpid_from(
            &format!("{}-{}", t.as_nanos(), std::process::id()),
            data_dir,
        );
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// Puts a GPU probe's `<coprocs>`, usable-GPU count and OpenCL CPU platforms into `host`.
pub fn apply_gpu_probe(host: &mut HostInfo, probe: &GpuProbe) {
    host.coprocs = probe.coprocs.clone();
    host.n_usable_coprocs = probe.usable_count();
    host.opencl_cpu_props = probe.opencl_cpu_props();
}

/// Size and free space of the file system holding `path` (free = available to unprivileged
/// users, as the official client reports). A path not made yet (a data directory before the
/// first start) is on the file system of its nearest existing ancestor.
pub fn filesystem_space(path: &Path) -> std::io::Result<(f64, f64)> {
    let mut at = path;
    loop {
        match statvfs_space(at) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                at = match at.parent() {
                    Some(p) if p.as_os_str().is_empty() => Path::new("."),
                    Some(p) => p,
                    None => return Err(e),
                };
            }
            other => return other,
        }
    }
}

fn statvfs_space(path: &Path) -> std::io::Result<(f64, f64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is a valid NUL-terminated path and `st` is writable plain data.
    let st = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        st
    };
    let frsize = st.f_frsize as f64;
    Ok((st.f_blocks as f64 * frsize, st.f_bavail as f64 * frsize))
}

/// Largest CPU cache of CPU 0 from sysfs, bytes (used when `/proc/cpuinfo` has no size).
fn sysfs_cache_bytes(sys_root: &Path) -> Option<f64> {
    let dir = sys_root.join("devices/system/cpu/cpu0/cache");
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("size")).ok())
        .filter_map(|s| {
            let s = s.trim();
            let (num, mult) = match s.strip_suffix('K') {
                Some(n) => (n, 1024.0),
                None => match s.strip_suffix('M') {
                    Some(n) => (n, 1024.0 * 1024.0),
                    None => (s, 1.0),
                },
            };
            num.parse::<f64>().ok().map(|n| n * mult)
        })
        .reduce(f64::max)
}

/// The address the host name resolves to (the resolver's first answer), as the official
/// client reports it: on most hosts the name maps to a loopback or LAN address in
/// `/etc/hosts`, not to the interface that reaches the project.
fn host_name_address(name: &str) -> Option<String> {
    use std::net::ToSocketAddrs as _;
    if name.is_empty() {
        return None;
    }
    (name, 0)
        .to_socket_addrs()
        .ok()?
        .next()
        .map(|a| a.ip().to_string())
}

/// The first non-loopback IPv4 address of an interface that is up (when the host name does
/// not resolve).
fn primary_ip_address() -> Option<String> {
    let mut found = None;
    // SAFETY: getifaddrs allocates a list we only read and then free exactly once.
    unsafe {
        let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
        if libc::getifaddrs(&mut ifap) != 0 {
            return None;
        }
        let mut cur = ifap;
        while !cur.is_null() {
            let ifa = &*cur;
            cur = ifa.ifa_next;
            if ifa.ifa_addr.is_null()
                || i32::from((*ifa.ifa_addr).sa_family) != libc::AF_INET
                || ifa.ifa_flags & (libc::IFF_LOOPBACK as u32) != 0
                || ifa.ifa_flags & (libc::IFF_UP as u32) == 0
            {
                continue;
            }
            let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
            found = Some(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).to_string());
            break;
        }
        libc::freeifaddrs(ifap);
    }
    found
}

fn detect_host_impl(cfg: &HostProbeConfig) -> HostDetection {
    let roots = &cfg.roots;
    let mut warnings = Vec::new();
    let mut host = HostInfo::default();
    let mut details = HostDetails::default();

    // CPU description.
    let cpu = match std::fs::read_to_string(roots.proc_root.join("cpuinfo")) {
        Ok(text) => cpuinfo::parse_cpuinfo(&text, cpuinfo::CpuArch::native()),
        Err(e) => {
            warnings.push(format!("can't read /proc/cpuinfo: {e}"));
            cpuinfo::CpuInfo {
                vendor: "unknown".into(),
                model: "unknown".into(),
                ..Default::default()
            }
        }
    };
    host.p_vendor = cpu.vendor.clone();
    host.p_model = cpu.model.clone();
    host.p_features = cpu.features.clone();
    host.m_cache = cpu
        .cache_bytes
        .or_else(|| sysfs_cache_bytes(&roots.sys_root))
        .unwrap_or(-1.0);

    // CPU count and memory, narrowed by cgroups and affinity.
    let limits = cgroup::read_cgroup_limits(&roots.proc_root, &roots.cgroup_root);
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    details.online_cpus = u32::try_from(online).unwrap_or(1).max(1);
    details.affinity_cpus = cgroup::affinity_cpu_count();
    details.cpu_quota = limits.cpu_quota;
    host.p_ncpus =
        cgroup::effective_ncpus(details.online_cpus, details.affinity_cpus, limits.cpu_quota);

    match sysinfo::System::new() {
        Ok(mut sys) => {
            sys.refresh_memory_specifics(
                sysinfo::MemoryRefreshKind::nothing().with_ram().with_swap(),
            );
            details.physical_memory = sys.total_memory();
            host.m_swap = sys.total_swap() as f64;
        }
        Err(e) => warnings.push(format!("can't read memory information: {e}")),
    }
    details.memory_limit = limits.memory_limit;
    host.m_nbytes = cgroup::effective_memory(details.physical_memory, limits.memory_limit) as f64;

    // Disk holding the data directory.
    match filesystem_space(&cfg.data_dir) {
        Ok((total, free)) => {
            host.d_total = total;
            host.d_free = free;
        }
        Err(e) => warnings.push(format!(
            "can't get file system size of {}: {e}",
            cfg.data_dir.display()
        )),
    }

    // OS.
    let kernel = sysinfo::System::kernel_version().unwrap_or_default();
    // As the official client: `lsb_release -a` first (on the real system only), then
    // os-release. They name Debian differently ("Debian" and "Debian GNU/Linux"), and
    // projects see the name in `os_name`.
    let lsb = (roots.etc_root == Path::new("/etc"))
        .then(os::lsb_release)
        .flatten();
    let release = lsb.or_else(|| {
        std::fs::read_to_string(roots.etc_root.join("os-release"))
            .ok()
            .or_else(|| std::fs::read_to_string(roots.root.join("usr/lib/os-release")).ok())
            .and_then(|t| os::parse_os_release(&t))
    });
    let (os_name, os_version) = os::compose_os(
        "Linux",
        &kernel,
        release.as_ref(),
        os::libc_version().as_deref(),
    );
    host.os_name = os_name;
    host.os_version = os_version;

    // Names, time zone, product, virtualisation.
    details.host_name = sysinfo::System::host_name().unwrap_or_default();
    host.domain_name = details.host_name.clone();
    host.ip_addr = host_name_address(&details.host_name)
        .or_else(primary_ip_address)
        .unwrap_or_default();
    host.timezone = os::timezone_offset();
    // The ARM `Hardware` line first, as the official client; then DMI, then the board's own
    // name (a Raspberry Pi 5's kernel prints no `Hardware` line, only its `Model`).
    host.product_name = cpu
        .hardware
        .clone()
        .or_else(|| os::dmi_product_name(&roots.sys_root))
        .or_else(|| cpu.board_model.clone())
        .or_else(|| os::device_tree_model(&roots.proc_root));
    details.platforms = native_platforms(&roots.root);
    details.virtualization = os::detect_virtualization(
        &roots.root,
        &roots.proc_root,
        &roots.sys_root,
        &host.p_features,
    );

    for w in &warnings {
        tracing::warn!("{w}");
    }
    HostDetection {
        host,
        details,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_not_made_yet_is_measured_on_its_nearest_existing_ancestor() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (total, _) = filesystem_space(dir.path()).expect("the temporary directory");
        assert!(total > 0.0);
        let later = dir.path().join("boinc").join("data");
        let (later_total, _) = filesystem_space(&later).expect("measured on its ancestor");
        assert_eq!(later_total, total);
        // A relative path with no existing part is measured where it would be made.
        let (here, _) = filesystem_space(Path::new("no-such-data-dir-here")).expect("here");
        assert_eq!(here, filesystem_space(Path::new(".")).expect(".").0);
    }
}
