//! GPU detection: NVIDIA GPUs through NVML (loaded at run time by `nvml-wrapper`), then
//! every OpenCL platform (`opencl`), the choice of usable devices (`use_all_gpus`,
//! `ignore_*_dev`), the aggregated `<coproc_cuda>` description, per-project exclusions
//! (`exclude_gpu`) and user-defined `<coproc>` entries.
//!
//! A missing library or a driver that does not initialise gives zero GPUs, one log line and
//! a status that tells the caller to try again later; it is never an error.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use ferrite_proto::host::{Coprocs, NvidiaCoproc, OpenclCpuProp, OtherCoproc, PciInfo};
use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use ferrite_proto::host::{GpuScan, LibraryAnswer, NvmlDevice, ScannedOpenclGpu};

use crate::opencl::{self, OpenclChoice, OpenclDevice, OpenclScan, OpenclStatus, ScannedDevice};

/// Environment variable naming the NVML library to load instead of the system's.
pub const NVML_LIBRARY_ENV: &str = "FERRITE_NVML_LIBRARY";

/// Library names tried when no path is configured (the `.so.1` name is the one drivers
/// install; the unversioned one comes with development packages).
const DEFAULT_NVML_NAMES: &[&str] = &["libnvidia-ml.so.1", "libnvidia-ml.so"];

/// The `cc_config.xml` options that affect GPU detection and use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuConfig {
    /// `<no_gpus>`: do not detect or use any GPU.
    pub no_gpus: bool,
    /// `<ignore_nvidia_dev>` (alias `ignore_cuda_dev`): device numbers never used.
    pub ignore_nvidia_dev: Vec<u32>,
    /// `<ignore_ati_dev>`: AMD device numbers never used.
    pub ignore_ati_dev: Vec<u32>,
    /// `<ignore_intel_dev>`: Intel GPU device numbers never used.
    pub ignore_intel_dev: Vec<u32>,
    /// `<no_opencl>`: do not look for OpenCL platforms.
    pub no_opencl: bool,
    /// `<use_all_gpus>`: use every device, not only those as capable as the best one.
    pub use_all_gpus: bool,
    /// User-defined `<coproc>` entries, reported as they are.
    pub user_coprocs: Vec<UserCoproc>,
}

/// A user-defined coprocessor from `cc_config.xml`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserCoproc {
    /// `<type>`: the resource name projects use.
    pub rsc_type: String,
    /// `<count>`: instances (defaults to 1 in the official client).
    pub count: u32,
    /// `<peak_flops>` of one instance.
    pub peak_flops: f64,
    /// `<device_nums>`: instance numbers given to apps, when set.
    pub device_nums: Vec<u32>,
}

/// One `<exclude_gpu>` entry: a project (and optionally app, type, device) that must not use
/// a GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExcludeGpu {
    /// `<url>` of the project.
    pub url: String,
    /// `<device_num>`; `None` excludes all devices of the type.
    pub device_num: Option<u32>,
    /// `<type>` (`NVIDIA`, …); `None` means every type.
    pub rsc_type: Option<String>,
    /// `<app>` short name; `None` means every app of the project.
    pub app: Option<String>,
}

/// Whether a detected device is given to apps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuUse {
    /// Counted in `<coproc_cuda>` and scheduled.
    Used,
    /// Less capable than the best device (and `use_all_gpus` is off).
    Unused,
    /// Listed in `ignore_nvidia_dev`.
    Ignored,
}

/// Everything detected about one NVIDIA device. Keeps what `<coproc_cuda>` cannot carry per
/// device (driver string, core count) for the log and `--detect_gpus`.
#[derive(Debug, Clone, PartialEq)]
pub struct NvidiaDevice {
    /// NVML index, which is the device number apps receive.
    pub device_num: u32,
    /// Marketing name.
    pub name: String,
    /// Total device memory, bytes.
    pub total_mem: u64,
    /// Free device memory at detection, bytes (`available_ram`).
    pub available_ram: u64,
    /// Compute capability, major.
    pub major: i32,
    /// Compute capability, minor.
    pub minor: i32,
    /// Display driver version as the driver prints it (`535.54.03`).
    pub driver_version: String,
    /// The same, as BOINC encodes it: major × 100 + min(minor, 99).
    pub drv_version: i32,
    /// CUDA driver API version (12020 = 12.2).
    pub cuda_version: i32,
    /// CUDA cores, when the driver reports them.
    pub cuda_cores: Option<u32>,
    /// Streaming multiprocessors: cores ÷ cores per multiprocessor.
    pub multi_processor_count: i32,
    /// Maximum SM clock, kHz (CUDA's `clockRate` unit).
    pub clock_rate_khz: i32,
    /// Peak single-precision FLOPS, computed as the official client does.
    pub peak_flops: f64,
    /// PCI location.
    pub pci: PciInfo,
    /// Whether the device is used.
    pub usage: GpuUse,
    /// NVML's UUID (`GPU-…`), empty when the driver does not say.
    pub uuid: String,
}

/// Outcome of talking to NVML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NvmlStatus {
    /// NVML answered (possibly with zero devices).
    Ready,
    /// `no_gpus` is set: nothing was probed.
    Disabled,
    /// The library could not be loaded (no driver installed, or not yet).
    LibraryMissing(String),
    /// The library loaded but initialisation failed (driver not loaded yet, permissions…).
    InitFailed(String),
    /// The detection child process crashed, hung or answered nothing readable.
    DetectionFailed(String),
}

/// What a GPU probe found.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuProbe {
    /// How NVML answered.
    pub status: NvmlStatus,
    /// Every NVIDIA device, used or not.
    pub nvidia: Vec<NvidiaDevice>,
    /// The `<coprocs>` block for the state file, scheduler requests and GUI RPC.
    pub coprocs: Coprocs,
    /// Problems worth a log line (a device that could not be queried, …).
    pub warnings: Vec<String>,
    /// What OpenCL found.
    pub opencl: OpenclFound,
}

/// One instance of a GPU type as apps are told about it: the device number and the index
/// within its OpenCL platform (`gpu_device_num`, `gpu_opencl_dev_index` in `init_data.xml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuInstance {
    /// The device number.
    pub device_num: u32,
    /// The device's index among its OpenCL platform's GPUs (the device number when OpenCL
    /// does not see it).
    pub opencl_device_index: u32,
}

/// The OpenCL part of a GPU probe.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenclFound {
    /// How the OpenCL library answered.
    pub status: OpenclStatus,
    /// Each platform's CPU device (`<opencl_cpu_prop>`).
    pub cpus: Vec<OpenclCpuProp>,
    /// GPUs of the known vendors, numbered and marked used or not.
    pub devices: Vec<OpenclDevice>,
    /// The OpenCL library's problems and notes, one log line each.
    pub warnings: Vec<String>,
}

impl OpenclFound {
    fn disabled() -> Self {
        OpenclFound {
            status: OpenclStatus::Disabled,
            cpus: Vec::new(),
            devices: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

impl GpuProbe {
    /// True when probing again later may find GPUs that are not visible now (library or
    /// driver missing at boot). The daemon re-probes on a timer until this is false.
    pub fn should_retry(&self) -> bool {
        matches!(
            self.status,
            NvmlStatus::LibraryMissing(_) | NvmlStatus::InitFailed(_)
        )
    }

    /// Why no NVIDIA GPU was probed, as one log line (`None` when NVML answered). A daemon
    /// that probes again logs it only when it changes.
    pub fn note(&self) -> Option<String> {
        match &self.status {
            NvmlStatus::Ready => None,
            NvmlStatus::Disabled => {
                Some("GPU detection disabled by cc_config.xml <no_gpus>".into())
            }
            NvmlStatus::LibraryMissing(e) => {
                Some(format!("No NVIDIA GPU: NVML library not available ({e})"))
            }
            NvmlStatus::InitFailed(e) => {
                Some(format!("No NVIDIA GPU: NVML did not initialise ({e})"))
            }
            NvmlStatus::DetectionFailed(e) => Some(format!("GPU detection failed: {e}")),
        }
    }

    /// The used devices of each GPU type (`NVIDIA`, `ATI`, `intel_gpu`), in instance order:
    /// the scheduler's instance `i` of a type is entry `i`.
    pub fn instances(&self) -> BTreeMap<String, Vec<GpuInstance>> {
        use crate::opencl::OpenclVendor;
        let mut out = BTreeMap::new();
        let opencl_of = |vendor: OpenclVendor| {
            self.opencl
                .devices
                .iter()
                .filter(move |d| d.vendor == vendor && d.usage == GpuUse::Used)
                .map(|d| GpuInstance {
                    device_num: d.device_num,
                    opencl_device_index: d.opencl_device_index,
                })
        };
        let cuda: Vec<GpuInstance> = self
            .nvidia
            .iter()
            .filter(|d| d.usage == GpuUse::Used)
            .map(|d| GpuInstance {
                device_num: d.device_num,
                opencl_device_index: self
                    .opencl
                    .devices
                    .iter()
                    .find(|o| o.vendor == OpenclVendor::Nvidia && o.device_num == d.device_num)
                    .map_or(d.device_num, |o| o.opencl_device_index),
            })
            .collect();
        let nvidia = if cuda.is_empty() {
            opencl_of(OpenclVendor::Nvidia).collect()
        } else {
            cuda
        };
        for (name, list) in [
            ("NVIDIA", nvidia),
            ("ATI", opencl_of(OpenclVendor::Amd).collect()),
            ("intel_gpu", opencl_of(OpenclVendor::Intel).collect()),
        ] {
            if !list.is_empty() {
                out.insert(name.to_owned(), list);
            }
        }
        out
    }

    /// The `<opencl_cpu_prop>` texts for `HostInfo::opencl_cpu_props`.
    pub fn opencl_cpu_props(&self) -> Vec<String> {
        self.opencl.cpus.iter().map(OpenclCpuProp::to_xml).collect()
    }

    /// GPUs usable by apps, all types (`n_usable_coprocs`).
    pub fn usable_count(&self) -> u32 {
        self.coprocs.nvidia.as_ref().map_or(0, |n| n.count)
            + self.coprocs.other.iter().map(|o| o.count).sum::<u32>()
    }
}

/// Cores per multiprocessor and FLOPs per core per clock by compute capability, as the
/// official client's table has them (`lib/coproc.cpp`).
pub fn cores_and_flops_per_clock(major: i32, minor: i32) -> (u32, u32) {
    match (major, minor) {
        (1, _) => (8, 3),
        (2, 0) => (32, 2),
        (2, _) => (48, 2),
        (3, _) => (192, 2),
        (5, _) => (128, 2),
        (6, 0) => (64, 2),
        (6, _) => (128, 2),
        (7, _) => (64, 2),
        (8, 0) => (64, 2),
        (8, _) => (128, 2),
        _ => (128, 2),
    }
}

/// Peak FLOPS: clock (kHz) × 1000 × multiprocessors × cores per multiprocessor × FLOPs per
/// clock.
pub fn peak_flops(major: i32, minor: i32, clock_rate_khz: i32, multi_processor_count: i32) -> f64 {
    let (cores, per_clock) = cores_and_flops_per_clock(major, minor);
    1000.0
        * f64::from(clock_rate_khz)
        * f64::from(multi_processor_count)
        * f64::from(cores)
        * f64::from(per_clock)
}

/// BOINC's integer encoding of a driver version string: `535.54.03` → 53554.
pub fn encode_driver_version(v: &str) -> i32 {
    let mut it = v.split('.');
    let major: i32 = it.next().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
    let minor: i32 = it.next().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
    major * 100 + minor.min(99)
}

/// Orders two devices by capability as the official client does: compute capability, then
/// CUDA version, then free memory (loosely: within −30 %/+40 % counts as equal), then speed.
fn compare(a: &NvidiaDevice, b: &NvidiaDevice, loose: bool) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    let by_version = (a.major, a.minor, a.cuda_version).cmp(&(b.major, b.minor, b.cuda_version));
    if by_version != Equal {
        return by_version;
    }
    let (ra, rb) = (a.available_ram as f64, b.available_ram as f64);
    if loose {
        return if ra > 1.4 * rb {
            Greater
        } else if ra < 0.7 * rb {
            Less
        } else {
            Equal
        };
    }
    ra.partial_cmp(&rb)
        .filter(|o| *o != Equal)
        .or_else(|| a.peak_flops.partial_cmp(&b.peak_flops))
        .unwrap_or(Equal)
}

/// Marks each device used, unused or ignored and returns the index of the most capable
/// non-ignored one.
pub fn choose_devices(
    devices: &mut [NvidiaDevice],
    use_all: bool,
    ignore: &[u32],
) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, d) in devices.iter().enumerate() {
        if ignore.contains(&d.device_num) {
            continue;
        }
        if best.is_none_or(|b| compare(d, &devices[b], false).is_gt()) {
            best = Some(i);
        }
    }
    let best_dev = best.map(|b| devices[b].clone());
    for d in devices.iter_mut() {
        d.usage = if ignore.contains(&d.device_num) {
            GpuUse::Ignored
        } else if let Some(bd) = &best_dev {
            if use_all || compare(d, bd, true).is_eq() {
                GpuUse::Used
            } else {
                GpuUse::Unused
            }
        } else {
            GpuUse::Ignored
        };
    }
    best
}

/// The properties `<coproc_cuda>` carries that NVML cannot report: they are fixed by the
/// compute capability (CUDA programming guide, "technical specifications").
fn fill_cuda_limits(c: &mut NvidiaCoproc) {
    let modern = c.major >= 2;
    c.warp_size = 32;
    c.max_threads_per_block = if modern { 1024 } else { 512 };
    c.max_threads_dim = if modern {
        [1024, 1024, 64]
    } else {
        [512, 512, 64]
    };
    c.max_grid_size = if c.major >= 3 {
        [2_147_483_647, 65535, 65535]
    } else {
        [65535, 65535, 1]
    };
    c.shared_mem_per_block = if modern { 49152.0 } else { 16384.0 };
    c.regs_per_block = match c.major {
        1 => 16384,
        2 => 32768,
        _ => 65536,
    };
    c.total_const_mem = 65536.0;
    c.texture_alignment = if modern { 512.0 } else { 256.0 };
    c.mem_pitch = 2_147_483_647.0;
    c.device_overlap = true;
}

/// Builds the `<coprocs>` block from classified devices and the user-defined coprocessors.
pub fn aggregate(devices: &[NvidiaDevice], best: Option<usize>, user: &[UserCoproc]) -> Coprocs {
    let nvidia = best.and_then(|b| devices.get(b)).map(|bd| {
        let used: Vec<&NvidiaDevice> = devices.iter().filter(|d| d.usage == GpuUse::Used).collect();
        let mut c = NvidiaCoproc {
            count: used.len() as u32,
            name: bd.name.clone(),
            available_ram: bd.available_ram as f64,
            have_cuda: true,
            have_opencl: false,
            peak_flops: bd.peak_flops,
            cuda_version: bd.cuda_version,
            drv_version: bd.drv_version,
            total_global_mem: bd.total_mem as f64,
            clock_rate: bd.clock_rate_khz,
            major: bd.major,
            minor: bd.minor,
            multi_processor_count: bd.multi_processor_count,
            pci_infos: used.iter().map(|d| d.pci.clone()).collect(),
            ..NvidiaCoproc::default()
        };
        fill_cuda_limits(&mut c);
        c
    });
    let other = user.iter().map(user_coproc_to_other).collect();
    Coprocs { nvidia, other }
}

fn user_coproc_to_other(u: &UserCoproc) -> OtherCoproc {
    let count = u.count.max(1);
    // The children of `<coproc>`, one per line, as the proto writer expects them.
    let mut children = vec![
        format!("<type>{}</type>", ferrite_proto::xml::escape(&u.rsc_type)),
        format!("<count>{count}</count>"),
        format!("<peak_flops>{:.6}</peak_flops>", u.peak_flops),
    ];
    if !u.device_nums.is_empty() {
        let nums: Vec<String> = u.device_nums.iter().map(u32::to_string).collect();
        children.push(format!("<device_nums>{}</device_nums>", nums.join(" ")));
    }
    OtherCoproc {
        element: "coproc".to_owned(),
        rsc_type: u.rsc_type.clone(),
        count,
        peak_flops: u.peak_flops,
        request: None,
        raw: children.join("\n"),
    }
}

/// The device numbers of `rsc_type` that a project's app may use, after `<exclude_gpu>`
/// entries. `used` lists the devices in use for that type.
pub fn usable_devices_for(
    project_url: &str,
    app: Option<&str>,
    rsc_type: &str,
    used: &[u32],
    exclusions: &[ExcludeGpu],
) -> Vec<u32> {
    let norm = |u: &str| u.trim_end_matches('/').to_ascii_lowercase();
    let url = norm(project_url);
    used.iter()
        .copied()
        .filter(|&dev| {
            !exclusions.iter().any(|e| {
                norm(&e.url) == url
                    && e.device_num.is_none_or(|d| d == dev)
                    && e.rsc_type
                        .as_deref()
                        .is_none_or(|t| t.eq_ignore_ascii_case(rsc_type))
                    && e.app.as_deref().is_none_or(|a| Some(a) == app)
            })
        })
        .collect()
}

/// Loads NVML from `explicit`, else from `$FERRITE_NVML_LIBRARY`, else from the system.
pub(crate) fn open_nvml(explicit: Option<&Path>) -> Result<Nvml, NvmlError> {
    let env_path = std::env::var_os(NVML_LIBRARY_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let chosen = explicit.map(Path::to_path_buf).or(env_path);
    if let Some(p) = chosen {
        return Nvml::builder().lib_path(p.as_os_str()).init();
    }
    let mut last = None;
    for name in DEFAULT_NVML_NAMES {
        match Nvml::builder().lib_path(OsStr::new(name)).init() {
            Ok(n) => return Ok(n),
            Err(e @ NvmlError::LibloadingError(_)) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or(NvmlError::LibraryNotFound))
}

fn query_device(
    dev: &Device<'_>,
    index: u32,
    driver_version: &str,
    cuda_version: i32,
    warnings: &mut Vec<String>,
) -> Result<NvidiaDevice, NvmlError> {
    let name = dev.name()?;
    let mem = dev.memory_info()?;
    let cc = dev.cuda_compute_capability()?;
    let clock_mhz = dev
        .max_clock_info(Clock::SM)
        .or_else(|_| dev.max_clock_info(Clock::Graphics))
        .unwrap_or_else(|e| {
            warnings.push(format!("NVIDIA GPU {index}: no clock rate ({e})"));
            0
        });
    let cuda_cores = match dev.num_cores() {
        Ok(c) => Some(c),
        Err(e) => {
            warnings.push(format!(
                "NVIDIA GPU {index}: driver does not report core count ({e}); peak FLOPS unknown"
            ));
            None
        }
    };
    let (per_sm, _) = cores_and_flops_per_clock(cc.major, cc.minor);
    let multi_processor_count = cuda_cores.map_or(0, |c| (c / per_sm) as i32);
    let clock_rate_khz = i32::try_from(clock_mhz.saturating_mul(1000)).unwrap_or(i32::MAX);
    let pci = match dev.pci_info() {
        Ok(p) => PciInfo {
            bus_id: p.bus as i32,
            device_id: p.device as i32,
            domain_id: p.domain as i32,
        },
        Err(e) => {
            warnings.push(format!("NVIDIA GPU {index}: no PCI info ({e})"));
            PciInfo::default()
        }
    };
    let uuid = dev.uuid().unwrap_or_default();
    Ok(NvidiaDevice {
        uuid,
        device_num: index,
        name,
        total_mem: mem.total,
        available_ram: mem.free,
        major: cc.major,
        minor: cc.minor,
        driver_version: driver_version.to_owned(),
        drv_version: encode_driver_version(driver_version),
        cuda_version,
        cuda_cores,
        multi_processor_count,
        clock_rate_khz,
        peak_flops: peak_flops(cc.major, cc.minor, clock_rate_khz, multi_processor_count),
        pci,
        usage: GpuUse::Unused,
    })
}

/// Probes NVIDIA GPUs through NVML, then OpenCL (which adds `have_opencl`, AMD and Intel
/// GPUs and the OpenCL CPU platforms), in this process. Never fails: problems become
/// statuses and warnings. The daemon does not call it: it runs [`scan_gpus`] in a child
/// process (`gpu_child`) and gives its answer to [`probe_from_scan`].
pub fn probe_gpus(
    config: &GpuConfig,
    nvml_library: Option<&Path>,
    opencl_library: Option<&Path>,
) -> GpuProbe {
    if config.no_gpus {
        return disabled_probe(config);
    }
    probe_from_scan(
        config,
        scan_gpus(config.no_opencl, nvml_library, opencl_library),
    )
}

/// The probe when `no_gpus` is set: nothing asked, only the user-defined coprocessors.
pub(crate) fn disabled_probe(config: &GpuConfig) -> GpuProbe {
    GpuProbe {
        status: NvmlStatus::Disabled,
        nvidia: Vec::new(),
        coprocs: aggregate(&[], None, &config.user_coprocs),
        warnings: Vec::new(),
        opencl: OpenclFound::disabled(),
    }
}

/// Asks the drivers (NVML, then every OpenCL platform unless `no_opencl`) what they see,
/// choosing nothing: the part of GPU detection that loads driver code, run in the GPU
/// detection child process.
pub fn scan_gpus(
    no_opencl: bool,
    nvml_library: Option<&Path>,
    opencl_library: Option<&Path>,
) -> GpuScan {
    let (status, devices, nvml_warnings) = probe_nvml(nvml_library);
    let nvml = match status {
        NvmlStatus::Ready => LibraryAnswer::Ready,
        NvmlStatus::Disabled => LibraryAnswer::Disabled,
        NvmlStatus::LibraryMissing(e) => LibraryAnswer::LibraryMissing(e),
        NvmlStatus::InitFailed(e) | NvmlStatus::DetectionFailed(e) => LibraryAnswer::InitFailed(e),
    };
    let nvidia = devices
        .into_iter()
        .map(|d| NvmlDevice {
            device_num: d.device_num,
            name: d.name,
            total_mem: d.total_mem,
            available_ram: d.available_ram,
            major: d.major,
            minor: d.minor,
            driver_version: d.driver_version,
            cuda_version: d.cuda_version,
            cuda_cores: d.cuda_cores,
            multi_processor_count: d.multi_processor_count,
            clock_rate_khz: d.clock_rate_khz,
            pci: d.pci,
            uuid: d.uuid,
        })
        .collect();
    let mut out = GpuScan {
        nvml,
        nvidia,
        nvml_warnings,
        opencl: LibraryAnswer::Disabled,
        ..GpuScan::default()
    };
    if !no_opencl {
        let scan = opencl::scan(opencl_library);
        out.opencl = match scan.status {
            OpenclStatus::Ready => LibraryAnswer::Ready,
            OpenclStatus::Disabled => LibraryAnswer::Disabled,
            OpenclStatus::LibraryMissing(e) => LibraryAnswer::LibraryMissing(e),
            OpenclStatus::NoPlatforms => LibraryAnswer::NoPlatforms,
            OpenclStatus::DetectionFailed(e) => LibraryAnswer::InitFailed(e),
        };
        out.opencl_cpus = scan.cpus;
        out.opencl_gpus = scan
            .gpus
            .into_iter()
            .map(|g| ScannedOpenclGpu {
                platform_index: g.platform_index,
                opencl_device_index: g.opencl_device_index,
                prop: g.prop,
            })
            .collect();
        out.opencl_warnings = scan.warnings;
    }
    out
}

/// Turns what the drivers said ([`scan_gpus`], in this process or a child) into the probe:
/// the devices used, the `<coprocs>` block, the OpenCL GPUs matched with NVML's. Pure but
/// for its log lines.
pub fn probe_from_scan(config: &GpuConfig, scan: GpuScan) -> GpuProbe {
    if config.no_gpus {
        return disabled_probe(config);
    }
    let status = match scan.nvml {
        LibraryAnswer::Ready => NvmlStatus::Ready,
        LibraryAnswer::Disabled => NvmlStatus::Disabled,
        LibraryAnswer::LibraryMissing(e) => NvmlStatus::LibraryMissing(e),
        LibraryAnswer::InitFailed(e) => NvmlStatus::InitFailed(e),
        LibraryAnswer::NoPlatforms => NvmlStatus::InitFailed("no device".into()),
    };
    let mut devices: Vec<NvidiaDevice> = scan
        .nvidia
        .into_iter()
        .map(|d| NvidiaDevice {
            peak_flops: peak_flops(d.major, d.minor, d.clock_rate_khz, d.multi_processor_count),
            drv_version: encode_driver_version(&d.driver_version),
            device_num: d.device_num,
            name: d.name,
            total_mem: d.total_mem,
            available_ram: d.available_ram,
            major: d.major,
            minor: d.minor,
            driver_version: d.driver_version,
            cuda_version: d.cuda_version,
            cuda_cores: d.cuda_cores,
            multi_processor_count: d.multi_processor_count,
            clock_rate_khz: d.clock_rate_khz,
            pci: d.pci,
            usage: GpuUse::Unused,
            uuid: d.uuid,
        })
        .collect();
    let warnings = scan.nvml_warnings;
    if status == NvmlStatus::Ready {
        for w in &warnings {
            tracing::warn!("{w}");
        }
        if devices.is_empty() {
            tracing::info!("NVML is present but reports no NVIDIA GPU");
        }
    }
    let best = choose_devices(&mut devices, config.use_all_gpus, &config.ignore_nvidia_dev);
    let mut coprocs = aggregate(&devices, best, &config.user_coprocs);
    let opencl = if config.no_opencl {
        tracing::info!("OpenCL detection disabled by cc_config.xml <no_opencl>");
        OpenclFound::disabled()
    } else {
        let scan = OpenclScan {
            status: match scan.opencl {
                LibraryAnswer::Ready => OpenclStatus::Ready,
                LibraryAnswer::Disabled => OpenclStatus::Disabled,
                LibraryAnswer::LibraryMissing(e) => OpenclStatus::LibraryMissing(e),
                LibraryAnswer::NoPlatforms => OpenclStatus::NoPlatforms,
                LibraryAnswer::InitFailed(e) => OpenclStatus::DetectionFailed(e),
            },
            cpus: scan.opencl_cpus,
            gpus: scan
                .opencl_gpus
                .into_iter()
                .map(|g| ScannedDevice {
                    platform_index: g.platform_index,
                    opencl_device_index: g.opencl_device_index,
                    prop: g.prop,
                })
                .collect(),
            warnings: scan.opencl_warnings,
        };
        let mut ow = scan.warnings.clone();
        let mut devs = opencl::classify(&scan, &devices, &mut ow);
        opencl::merge_into(
            &mut coprocs,
            best.map(|b| devices[b].device_num),
            &mut devs,
            OpenclChoice {
                use_all: config.use_all_gpus,
                ignore_nvidia: &config.ignore_nvidia_dev,
                ignore_ati: &config.ignore_ati_dev,
                ignore_intel: &config.ignore_intel_dev,
            },
        );
        match &scan.status {
            OpenclStatus::LibraryMissing(e) => tracing::info!("No OpenCL library ({e})"),
            OpenclStatus::NoPlatforms => tracing::info!("OpenCL library reports no platform"),
            _ => {}
        }
        OpenclFound {
            status: scan.status,
            cpus: scan.cpus,
            devices: devs,
            warnings: ow,
        }
    };
    GpuProbe {
        status,
        nvidia: devices,
        coprocs,
        warnings,
        opencl,
    }
}

/// The probe when the detection child failed (crashed, hung, answered nothing readable):
/// no GPU, only the user-defined coprocessors, and `why` as the status of both libraries.
pub fn failed_probe(config: &GpuConfig, why: &str) -> GpuProbe {
    GpuProbe {
        status: NvmlStatus::DetectionFailed(why.to_owned()),
        nvidia: Vec::new(),
        coprocs: aggregate(&[], None, &config.user_coprocs),
        warnings: Vec::new(),
        opencl: OpenclFound {
            status: OpenclStatus::DetectionFailed(why.to_owned()),
            cpus: Vec::new(),
            devices: Vec::new(),
            warnings: Vec::new(),
        },
    }
}

/// Asks NVML for every NVIDIA device.
fn probe_nvml(nvml_library: Option<&Path>) -> (NvmlStatus, Vec<NvidiaDevice>, Vec<String>) {
    let nvml = match open_nvml(nvml_library) {
        Ok(n) => n,
        Err(NvmlError::LibloadingError(e)) => {
            return (
                NvmlStatus::LibraryMissing(e.to_string()),
                Vec::new(),
                Vec::new(),
            );
        }
        Err(e) => {
            return (
                NvmlStatus::InitFailed(e.to_string()),
                Vec::new(),
                Vec::new(),
            );
        }
    };
    let mut warnings = Vec::new();
    let driver_version = nvml.sys_driver_version().unwrap_or_else(|e| {
        warnings.push(format!("NVIDIA driver version unknown ({e})"));
        String::new()
    });
    let cuda_version = nvml.sys_cuda_driver_version().unwrap_or_else(|e| {
        warnings.push(format!("CUDA driver version unknown ({e})"));
        0
    });
    let count = match nvml.device_count() {
        Ok(c) => c,
        Err(e) => {
            warnings.push(format!("NVML device count failed ({e})"));
            0
        }
    };
    let mut devices = Vec::new();
    for i in 0..count {
        let r = nvml
            .device_by_index(i)
            .and_then(|d| query_device(&d, i, &driver_version, cuda_version, &mut warnings));
        match r {
            Ok(d) => devices.push(d),
            Err(e) => warnings.push(format!("NVIDIA GPU {i} could not be queried ({e})")),
        }
    }
    (NvmlStatus::Ready, devices, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(num: u32, major: i32, minor: i32, ram: u64, flops: f64) -> NvidiaDevice {
        NvidiaDevice {
            device_num: num,
            name: format!("GPU {num}"),
            total_mem: ram,
            available_ram: ram,
            major,
            minor,
            driver_version: "535.54.03".into(),
            drv_version: 53554,
            cuda_version: 12020,
            cuda_cores: None,
            multi_processor_count: 1,
            clock_rate_khz: 1,
            peak_flops: flops,
            pci: PciInfo::default(),
            usage: GpuUse::Unused,
            uuid: String::new(),
        }
    }

    #[test]
    fn peak_flops_table_matches_the_official_client() {
        // RTX 3080: cc 8.6, 68 SMs, 1710 MHz → 1.71e6 kHz × 1000 × 68 × 128 × 2.
        assert_eq!(
            peak_flops(8, 6, 1_710_000, 68),
            1_710_000.0 * 1000.0 * 68.0 * 256.0
        );
        assert_eq!(cores_and_flops_per_clock(1, 3), (8, 3));
        assert_eq!(cores_and_flops_per_clock(2, 0), (32, 2));
        assert_eq!(cores_and_flops_per_clock(2, 1), (48, 2));
        assert_eq!(cores_and_flops_per_clock(3, 5), (192, 2));
        assert_eq!(cores_and_flops_per_clock(6, 0), (64, 2));
        assert_eq!(cores_and_flops_per_clock(6, 1), (128, 2));
        assert_eq!(cores_and_flops_per_clock(7, 5), (64, 2));
        assert_eq!(cores_and_flops_per_clock(8, 0), (64, 2));
        assert_eq!(cores_and_flops_per_clock(9, 0), (128, 2));
    }

    #[test]
    fn driver_version_encoding_caps_the_minor() {
        assert_eq!(encode_driver_version("535.54.03"), 53554);
        assert_eq!(encode_driver_version("470.199.02"), 47099);
        assert_eq!(encode_driver_version("garbage"), 0);
    }

    #[test]
    fn only_devices_like_the_best_are_used_unless_use_all() {
        let mut d = vec![
            dev(0, 7, 5, 6 << 30, 1e12),
            dev(1, 8, 6, 10 << 30, 3e13),
            dev(2, 8, 6, 10 << 30, 3e13),
        ];
        let best = choose_devices(&mut d, false, &[]);
        assert_eq!(best, Some(1));
        assert_eq!(
            d.iter().map(|x| x.usage).collect::<Vec<_>>(),
            [GpuUse::Unused, GpuUse::Used, GpuUse::Used]
        );
        let best = choose_devices(&mut d, true, &[1]);
        assert_eq!(best, Some(2));
        assert_eq!(
            d.iter().map(|x| x.usage).collect::<Vec<_>>(),
            [GpuUse::Used, GpuUse::Ignored, GpuUse::Used]
        );
        let c = aggregate(&d, best, &[]);
        let n = c.nvidia.expect("nvidia");
        assert_eq!(n.count, 2);
        assert_eq!(n.name, "GPU 2");
        assert_eq!(n.major, 8);
    }

    #[test]
    fn loose_comparison_tolerates_small_memory_differences() {
        let mut d = vec![
            dev(0, 8, 6, 10 << 30, 3e13),
            dev(1, 8, 6, 8 << 30, 2e13),
            dev(2, 8, 6, 4 << 30, 2e13),
        ];
        choose_devices(&mut d, false, &[]);
        assert_eq!(
            d.iter().map(|x| x.usage).collect::<Vec<_>>(),
            [GpuUse::Used, GpuUse::Used, GpuUse::Unused]
        );
    }

    #[test]
    fn all_ignored_means_no_nvidia_block() {
        let mut d = vec![dev(0, 8, 6, 1 << 30, 1.0)];
        let best = choose_devices(&mut d, false, &[0]);
        assert_eq!(best, None);
        assert_eq!(d[0].usage, GpuUse::Ignored);
        assert_eq!(aggregate(&d, best, &[]).nvidia, None);
    }

    #[test]
    fn exclude_gpu_by_project_app_type_and_device() {
        let ex = vec![
            ExcludeGpu {
                url: "https://a.example/proj/".into(),
                device_num: Some(1),
                rsc_type: None,
                app: None,
            },
            ExcludeGpu {
                url: "https://b.example/".into(),
                device_num: None,
                rsc_type: Some("NVIDIA".into()),
                app: Some("x".into()),
            },
        ];
        assert_eq!(
            usable_devices_for("https://a.example/proj", None, "NVIDIA", &[0, 1], &ex),
            vec![0]
        );
        assert_eq!(
            usable_devices_for("https://b.example/", Some("x"), "NVIDIA", &[0, 1], &ex),
            Vec::<u32>::new()
        );
        assert_eq!(
            usable_devices_for("https://b.example/", Some("y"), "NVIDIA", &[0, 1], &ex),
            vec![0, 1]
        );
        assert_eq!(
            usable_devices_for("https://b.example/", Some("x"), "ATI", &[0], &ex),
            vec![0]
        );
        assert_eq!(
            usable_devices_for("https://c.example/", None, "NVIDIA", &[0, 1], &ex),
            vec![0, 1]
        );
    }

    #[test]
    fn user_coprocs_become_coproc_elements() {
        let c = aggregate(
            &[],
            None,
            &[UserCoproc {
                rsc_type: "miner_asic".into(),
                count: 2,
                peak_flops: 1e10,
                device_nums: vec![0, 1],
            }],
        );
        assert_eq!(c.other.len(), 1);
        let o = &c.other[0];
        assert_eq!(
            (
                o.element.as_str(),
                o.rsc_type.as_str(),
                o.count,
                o.peak_flops
            ),
            ("coproc", "miner_asic", 2, 1e10)
        );
        assert!(o.raw.contains("<type>miner_asic</type>"), "{}", o.raw);
        assert!(
            o.raw.contains("<device_nums>0 1</device_nums>"),
            "{}",
            o.raw
        );
    }
}
