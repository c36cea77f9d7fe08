//! `<host_info>` and `<coprocs>`: what the client says about the machine, in the state file,
//! the scheduler request, `init_data.xml` and GUI RPC replies.
//!
//! The host-detection crate fills these; this module reads and writes them.

/// The machine as BOINC describes it (`lib/hostinfo.cpp`). Field names follow the XML tags.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostInfo {
    /// Offset of local time from UTC, in seconds (east positive).
    pub timezone: i32,
    /// Host name (omitted from requests when `suppress_net_info` is set).
    pub domain_name: String,
    /// An IP address of the host (same rule as `domain_name`).
    pub ip_addr: String,
    /// The host's cross-project id: 32 hex digits, stable across restarts.
    pub host_cpid: String,
    /// Logical CPUs the client may use.
    pub p_ncpus: u32,
    /// CPU vendor string (`GenuineIntel`, `AuthenticAMD`, …).
    pub p_vendor: String,
    /// CPU model string, with family/model/stepping as the official client writes it.
    pub p_model: String,
    /// Space-separated CPU feature flags.
    pub p_features: String,
    /// Floating-point speed of one CPU, FLOPS (Whetstone-like benchmark).
    pub p_fpops: f64,
    /// Integer speed of one CPU, IOPS (Dhrystone-like benchmark).
    pub p_iops: f64,
    /// Memory bandwidth, bytes/s.
    pub p_membw: f64,
    /// When the benchmarks last ran (Unix time); 0 = never.
    pub p_calculated: f64,
    /// Hardware virtualisation present but disabled.
    pub p_vm_extensions_disabled: bool,
    /// Usable RAM, bytes.
    pub m_nbytes: f64,
    /// CPU cache size, bytes.
    pub m_cache: f64,
    /// Swap size, bytes.
    pub m_swap: f64,
    /// Size of the file system holding the data directory, bytes.
    pub d_total: f64,
    /// Free space on that file system, bytes.
    pub d_free: f64,
    /// Operating system name (`Linux Debian`, …).
    pub os_name: String,
    /// Operating system version (`Debian GNU/Linux 12 (bookworm) [6.1.0|libc 2.36]`).
    pub os_version: String,
    /// GPUs usable by BOINC apps (all types).
    pub n_usable_coprocs: u32,
    /// Windows Subsystem for Linux available (always false here, written for compatibility).
    pub wsl_available: bool,
    /// Hardware product name (DMI), when known.
    pub product_name: Option<String>,
    /// A MAC address, when reported.
    pub mac_address: Option<String>,
    /// VirtualBox version, when installed.
    pub virtualbox_version: Option<String>,
    /// Docker/Podman version and type (1 docker, 2 podman), when installed.
    pub docker: Option<(String, u32)>,
    /// GPUs and other coprocessors.
    pub coprocs: Coprocs,
    /// Elements we do not know, kept verbatim so that writing back loses nothing.
    pub extra: Vec<String>,
}

/// The `<coprocs>` block.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Coprocs {
    /// NVIDIA GPUs (`<coproc_cuda>`): BOINC describes all usable NVIDIA GPUs by the most
    /// capable one plus a count.
    pub nvidia: Option<NvidiaCoproc>,
    /// Other coprocessors (`<coproc_ati>`, `<coproc_intel_gpu>`, user-defined `<coproc>`),
    /// kept with their type and the figures scheduling needs.
    pub other: Vec<OtherCoproc>,
}

/// `<coproc_cuda>`: NVIDIA GPUs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NvidiaCoproc {
    /// Number of usable devices of this description.
    pub count: u32,
    /// Device name (`NVIDIA GeForce RTX 3080`).
    pub name: String,
    /// Free device memory at detection, bytes.
    pub available_ram: f64,
    /// CUDA is usable.
    pub have_cuda: bool,
    /// OpenCL is usable.
    pub have_opencl: bool,
    /// Peak FLOPS of one device, computed from cores per multiprocessor and clock.
    pub peak_flops: f64,
    /// CUDA driver API version (e.g. 12020 for 12.2).
    pub cuda_version: i32,
    /// Display driver version as BOINC encodes it (major*100 + minor, e.g. 53554).
    pub drv_version: i32,
    /// Total device memory, bytes.
    pub total_global_mem: f64,
    /// Shared memory per block, bytes.
    pub shared_mem_per_block: f64,
    /// Registers per block.
    pub regs_per_block: i32,
    /// Warp size.
    pub warp_size: i32,
    /// Maximum memory pitch, bytes.
    pub mem_pitch: f64,
    /// Maximum threads per block.
    pub max_threads_per_block: i32,
    /// Maximum block dimensions.
    pub max_threads_dim: [i32; 3],
    /// Maximum grid dimensions.
    pub max_grid_size: [i32; 3],
    /// Core clock, kHz.
    pub clock_rate: i32,
    /// Constant memory, bytes.
    pub total_const_mem: f64,
    /// Compute capability, major.
    pub major: i32,
    /// Compute capability, minor.
    pub minor: i32,
    /// Texture alignment, bytes.
    pub texture_alignment: f64,
    /// Can overlap copies and kernels.
    pub device_overlap: bool,
    /// Streaming multiprocessors.
    pub multi_processor_count: i32,
    /// PCI bus/device/domain of each device (state file only).
    pub pci_infos: Vec<PciInfo>,
    /// Elements we do not know (e.g. `<coproc_opencl>`), kept verbatim.
    pub extra: Vec<String>,
}

/// A device's PCI location (`<pci_info>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PciInfo {
    /// Bus number.
    pub bus_id: i32,
    /// Device number.
    pub device_id: i32,
    /// PCI domain.
    pub domain_id: i32,
}

/// A coprocessor other than NVIDIA's, by resource type name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OtherCoproc {
    /// The element it came from: `coproc_ati`, `coproc_intel_gpu`, `coproc_apple_gpu` or
    /// `coproc` (user-defined).
    pub element: String,
    /// Resource type name (`ATI`, `intel_gpu`, or the user-defined `<type>`).
    pub rsc_type: String,
    /// Number of instances.
    pub count: u32,
    /// Peak FLOPS of one instance.
    pub peak_flops: f64,
    /// The whole element as read, written back verbatim.
    pub raw: String,
}
