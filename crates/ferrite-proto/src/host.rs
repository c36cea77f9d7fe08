//! `<host_info>` and `<coprocs>`: what the client says about the machine, in the state file,
//! the scheduler request, `init_data.xml` and GUI RPC replies.
//!
//! The host-detection crate fills these; this module reads and writes them.

use crate::xml::{Num, Tag, XmlError, XmlReader, XmlWriter};

pub mod gpu_scan;
pub mod opencl;

pub use gpu_scan::{GpuScan, LibraryAnswer, NvmlDevice, ScannedOpenclGpu};
pub use opencl::{OpenclCpuProp, OpenclDeviceProp, OpenclGpu, OpenclGpuKind};

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
    /// docker-compose/podman-compose version and type (1 docker, 2 podman), when installed.
    pub docker_compose: Option<(String, u32)>,
    /// `<opencl_cpu_prop>` blocks (one per OpenCL platform offering the CPU), kept as text:
    /// detection writes them with [`OpenclCpuProp::to_xml`]; only the server looks inside.
    pub opencl_cpu_props: Vec<String>,
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
    /// Work asked of this resource: present only in (and written only to) scheduler requests.
    pub request: Option<RscRequest>,
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
    /// Work asked of this resource: present only in (and written only to) scheduler requests.
    pub request: Option<RscRequest>,
    /// The element's children as read (minus any request fields), written back verbatim
    /// inside `<element>`.
    pub raw: String,
}

/// The work a scheduler request asks of one resource, written inside that resource's coproc
/// block (`req_secs`, `req_instances`, `estimated_delay`; `lib/coproc.cpp`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RscRequest {
    /// Instance-seconds of work wanted.
    pub req_secs: f64,
    /// Idle instances to fill.
    pub req_instances: f64,
    /// Seconds until an instance of this resource would be free (the client's busy-time
    /// estimate); BOINC writes -1 when unknown.
    pub estimated_delay: f64,
}

impl RscRequest {
    fn write(&self, w: &mut XmlWriter) {
        w.f64("req_secs", self.req_secs)
            .f64("req_instances", self.req_instances)
            .f64("estimated_delay", self.estimated_delay);
    }

    /// Reads one request field into `self`; false if `tag` is not one.
    fn read_field<'a>(&mut self, r: &mut XmlReader<'a>, tag: &Tag<'a>) -> Result<bool, XmlError> {
        let slot = match tag.name() {
            "req_secs" => &mut self.req_secs,
            "req_instances" => &mut self.req_instances,
            "estimated_delay" => &mut self.estimated_delay,
            _ => return Ok(false),
        };
        if let Some(v) = r.num::<f64>(tag)? {
            *slot = v;
        }
        Ok(true)
    }
}

/// Which parts of `<host_info>` to write: the state file, GUI RPC and `init_data.xml` carry
/// everything; a scheduler request has no `<coprocs>` (it sends them separately, with work
/// requests) and omits the network identity when `cc_config` says `suppress_net_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostInfoForm {
    /// Write `domain_name` and `ip_addr`.
    pub net_info: bool,
    /// Write the `<coprocs>` block (state-file form, with PCI locations).
    pub coprocs: bool,
}

impl HostInfoForm {
    /// `client_state.xml`, `init_data.xml`, GUI RPC replies.
    pub const STATE_FILE: Self = Self {
        net_info: true,
        coprocs: true,
    };
    /// A scheduler request (net info included).
    pub const SCHEDULER_REQUEST: Self = Self {
        net_info: true,
        coprocs: false,
    };
}

impl HostInfo {
    /// Reads a `<host_info>` element whose start tag is `tag`.
    ///
    /// Every field is read (the daemon decides which ones to trust over fresh detection);
    /// negative benchmark figures are made positive with a warning, as BOINC does.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<HostInfo, XmlError> {
        let mut h = HostInfo::default();
        if tag.is_empty() {
            return Ok(h);
        }
        let mut docker_version = None;
        let mut docker_type = 0u32;
        let mut compose_version = None;
        let mut compose_type = 0u32;
        while let Some(t) = r.next_child()? {
            match t.name() {
                "timezone" => h.timezone = r.num_or(&t, 0)?,
                "domain_name" => h.domain_name = r.string(&t)?,
                "ip_addr" => h.ip_addr = r.string(&t)?,
                "host_cpid" => h.host_cpid = r.string(&t)?,
                "p_ncpus" => h.p_ncpus = r.num_clamped(&t, 0, 1 << 16)?.unwrap_or(0),
                "p_vendor" => h.p_vendor = r.string(&t)?,
                "p_model" => h.p_model = r.string(&t)?,
                "p_features" => h.p_features = r.string(&t)?,
                "p_fpops" => h.p_fpops = non_negative(r, &t)?,
                "p_iops" => h.p_iops = non_negative(r, &t)?,
                "p_membw" => h.p_membw = non_negative(r, &t)?,
                "p_calculated" => h.p_calculated = r.num_or(&t, 0.0)?,
                "p_vm_extensions_disabled" => h.p_vm_extensions_disabled = r.flag(&t)?,
                "m_nbytes" => h.m_nbytes = r.num_or(&t, 0.0)?,
                "m_cache" => h.m_cache = r.num_or(&t, 0.0)?,
                "m_swap" => h.m_swap = r.num_or(&t, 0.0)?,
                "d_total" => h.d_total = r.num_or(&t, 0.0)?,
                "d_free" => h.d_free = r.num_or(&t, 0.0)?,
                "os_name" => h.os_name = r.string(&t)?,
                "os_version" => h.os_version = r.string(&t)?,
                "n_usable_coprocs" => h.n_usable_coprocs = r.num_or(&t, 0)?,
                "wsl_available" => h.wsl_available = r.flag(&t)?,
                "product_name" => h.product_name = Some(r.string(&t)?),
                "mac_address" => h.mac_address = Some(r.string(&t)?),
                "virtualbox_version" => h.virtualbox_version = Some(r.string(&t)?),
                "docker_version" => docker_version = Some(r.string(&t)?),
                "docker_type" => docker_type = r.num_or(&t, 0)?,
                "docker_compose_version" => compose_version = Some(r.string(&t)?),
                "docker_compose_type" => compose_type = r.num_or(&t, 0)?,
                "coprocs" => h.coprocs = Coprocs::read(r, &t)?,
                "opencl_cpu_prop" => h.opencl_cpu_props.push(r.raw(&t)?.to_owned()),
                _ => h.extra.extend(r.keep_unknown(&t, "host_info")?),
            }
        }
        h.docker = docker_version
            .filter(|v| !v.is_empty())
            .map(|v| (v, docker_type));
        h.docker_compose = compose_version
            .filter(|v| !v.is_empty())
            .map(|v| (v, compose_type));
        Ok(h)
    }

    /// Writes `<host_info>` in the official order, in the given form.
    pub fn write(&self, w: &mut XmlWriter, form: HostInfoForm) {
        self.write_fields(w, form);
        w.close("host_info");
    }

    /// Writes `<host_info>` for a GUI RPC `get_host_info` reply: the state-file form, then
    /// Ferrite's `<ferrite_confinement>` sentence (whether apps run confined on this host;
    /// the official Manager skips an element it does not know).
    pub fn write_gui_rpc(&self, w: &mut XmlWriter, confinement: &str) {
        self.write_fields(w, HostInfoForm::STATE_FILE);
        w.text("ferrite_confinement", confinement);
        w.close("host_info");
    }

    fn write_fields(&self, w: &mut XmlWriter, form: HostInfoForm) {
        w.open("host_info");
        w.num("timezone", self.timezone);
        if form.net_info {
            w.text("domain_name", &self.domain_name)
                .text("ip_addr", &self.ip_addr);
        }
        w.text("host_cpid", &self.host_cpid)
            .num("p_ncpus", self.p_ncpus)
            .text("p_vendor", &self.p_vendor)
            .text("p_model", &self.p_model)
            .text("p_features", &self.p_features)
            .f64("p_fpops", self.p_fpops)
            .f64("p_iops", self.p_iops)
            .f64("p_membw", self.p_membw)
            .f64("p_calculated", self.p_calculated)
            .bool01("p_vm_extensions_disabled", self.p_vm_extensions_disabled)
            .f64("m_nbytes", self.m_nbytes)
            .f64("m_cache", self.m_cache)
            .f64("m_swap", self.m_swap)
            .f64("d_total", self.d_total)
            .f64("d_free", self.d_free)
            .text("os_name", &self.os_name)
            .text("os_version", &self.os_version)
            .num("n_usable_coprocs", self.n_usable_coprocs)
            .bool01("wsl_available", self.wsl_available);
        if let Some((v, t)) = &self.docker {
            w.text("docker_version", v).num("docker_type", t);
        }
        if let Some((v, t)) = &self.docker_compose {
            w.text("docker_compose_version", v)
                .num("docker_compose_type", t);
        }
        w.opt_text("product_name", self.product_name.as_deref())
            .opt_text("mac_address", self.mac_address.as_deref())
            .opt_text("virtualbox_version", self.virtualbox_version.as_deref());
        if form.coprocs {
            self.coprocs.write(w, None);
        }
        for p in &self.opencl_cpu_props {
            w.raw(p);
        }
        for e in &self.extra {
            w.raw(e);
        }
    }
}

fn non_negative<'a>(r: &mut XmlReader<'a>, t: &Tag<'a>) -> Result<f64, XmlError> {
    let v = r.num_or(t, 0.0)?;
    if v < 0.0 {
        r.warn(t, format!("negative value {v}; made positive"));
        return Ok(-v);
    }
    Ok(v)
}

impl Coprocs {
    /// The resource type name BOINC uses in XML for NVIDIA GPUs.
    pub const NVIDIA: &'static str = "NVIDIA";

    /// Reads a `<coprocs>` element; request fields, if any, are kept on each coprocessor.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Coprocs, XmlError> {
        let mut c = Coprocs::default();
        if tag.is_empty() {
            return Ok(c);
        }
        while let Some(t) = r.next_child()? {
            match t.name() {
                "coproc_cuda" => c.nvidia = Some(NvidiaCoproc::read(r, &t)?),
                "coproc_ati" | "coproc_intel_gpu" | "coproc_apple_gpu" | "coproc" => {
                    c.other.push(OtherCoproc::read(r, &t)?)
                }
                _ => r.unknown(&t, "coprocs")?,
            }
        }
        Ok(c)
    }

    /// Whether there is no coprocessor at all.
    pub fn is_empty(&self) -> bool {
        self.nvidia.is_none() && self.other.is_empty()
    }

    /// Number of usable devices of all types.
    pub fn ndevs(&self) -> u32 {
        self.nvidia.as_ref().map_or(0, |n| n.count)
            + self.other.iter().map(|o| o.count).sum::<u32>()
    }

    /// Writes `<coprocs>`. `requests` is `None` for the state-file form (with PCI locations,
    /// without request fields); `Some(f)` for a scheduler request, where `f(rsc_type)` gives
    /// the work asked of each resource (`NVIDIA`, `ATI`, `intel_gpu`, …).
    pub fn write(&self, w: &mut XmlWriter, requests: Option<&dyn Fn(&str) -> RscRequest>) {
        w.open("coprocs");
        if let Some(n) = &self.nvidia {
            n.write(w, requests.map(|f| f(Self::NVIDIA)));
        }
        for o in &self.other {
            o.write(w, requests.map(|f| f(&o.rsc_type)));
        }
        w.close("coprocs");
    }

    /// Writes `<coprocs>` for a scheduler request using the request stored on each
    /// coprocessor (zero when none): what a parsed request writes back.
    pub fn write_stored_requests(&self, w: &mut XmlWriter) {
        let nv = self.nvidia.as_ref().and_then(|n| n.request);
        let f = |rsc: &str| -> RscRequest {
            if rsc == Self::NVIDIA {
                return nv.unwrap_or_default();
            }
            self.other
                .iter()
                .find(|o| o.rsc_type == rsc)
                .and_then(|o| o.request)
                .unwrap_or_default()
        };
        self.write(w, Some(&f));
    }
}

impl NvidiaCoproc {
    /// Reads a `<coproc_cuda>` element.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<NvidiaCoproc, XmlError> {
        let mut n = NvidiaCoproc::default();
        if tag.is_empty() {
            return Ok(n);
        }
        let mut req = RscRequest::default();
        let mut has_req = false;
        while let Some(t) = r.next_child()? {
            if req.read_field(r, &t)? {
                has_req = true;
                continue;
            }
            match t.name() {
                "count" => n.count = r.num_clamped(&t, 0, 1 << 10)?.unwrap_or(0),
                "name" => n.name = r.string(&t)?,
                "available_ram" => n.available_ram = r.num_or(&t, 0.0)?,
                "have_cuda" => n.have_cuda = r.flag(&t)?,
                "have_opencl" => n.have_opencl = r.flag(&t)?,
                "peak_flops" => n.peak_flops = r.num_or(&t, 0.0)?,
                "cudaVersion" => n.cuda_version = r.num_or(&t, 0)?,
                "drvVersion" => n.drv_version = r.num_or(&t, 0)?,
                "totalGlobalMem" => n.total_global_mem = r.num_or(&t, 0.0)?,
                "sharedMemPerBlock" => n.shared_mem_per_block = r.num_or(&t, 0.0)?,
                "regsPerBlock" => n.regs_per_block = r.num_or(&t, 0)?,
                "warpSize" => n.warp_size = r.num_or(&t, 0)?,
                "memPitch" => n.mem_pitch = r.num_or(&t, 0.0)?,
                "maxThreadsPerBlock" => n.max_threads_per_block = r.num_or(&t, 0)?,
                "maxThreadsDim" => n.max_threads_dim = triple(&r.string(&t)?),
                "maxGridSize" => n.max_grid_size = triple(&r.string(&t)?),
                "clockRate" => n.clock_rate = r.num_or(&t, 0)?,
                "totalConstMem" => n.total_const_mem = r.num_or(&t, 0.0)?,
                "major" => n.major = r.num_or(&t, 0)?,
                "minor" => n.minor = r.num_or(&t, 0)?,
                "textureAlignment" => n.texture_alignment = r.num_or(&t, 0.0)?,
                "deviceOverlap" => n.device_overlap = r.flag(&t)?,
                "multiProcessorCount" => n.multi_processor_count = r.num_or(&t, 0)?,
                "pci_info" => n.pci_infos.push(PciInfo::read(r, &t)?),
                // OpenCL properties: only the server looks inside; keep them as written.
                "coproc_opencl" => n.extra.push(r.raw(&t)?.to_owned()),
                _ => n.extra.extend(r.keep_unknown(&t, "coproc_cuda")?),
            }
        }
        if has_req {
            n.request = Some(req);
        }
        if n.available_ram == 0.0 {
            n.available_ram = n.total_global_mem;
        }
        Ok(n)
    }

    /// Writes `<coproc_cuda>`: with `request` the scheduler-request form (request fields, no
    /// PCI locations), without it the state-file form.
    pub fn write(&self, w: &mut XmlWriter, request: Option<RscRequest>) {
        w.open("coproc_cuda")
            .num("count", self.count)
            .text("name", &self.name)
            .f64("available_ram", self.available_ram)
            .bool01("have_cuda", self.have_cuda)
            .bool01("have_opencl", self.have_opencl);
        if let Some(req) = request {
            req.write(w);
        }
        let d = self.max_threads_dim;
        let g = self.max_grid_size;
        w.f64("peak_flops", self.peak_flops)
            .num("cudaVersion", self.cuda_version)
            .num("drvVersion", self.drv_version)
            .f64("totalGlobalMem", self.total_global_mem)
            .f64("sharedMemPerBlock", self.shared_mem_per_block)
            .num("regsPerBlock", self.regs_per_block)
            .num("warpSize", self.warp_size)
            .f64("memPitch", self.mem_pitch)
            .num("maxThreadsPerBlock", self.max_threads_per_block)
            .text("maxThreadsDim", &format!("{} {} {}", d[0], d[1], d[2]))
            .text("maxGridSize", &format!("{} {} {}", g[0], g[1], g[2]))
            .num("clockRate", self.clock_rate)
            .f64("totalConstMem", self.total_const_mem)
            .num("major", self.major)
            .num("minor", self.minor)
            .f64("textureAlignment", self.texture_alignment)
            .bool01("deviceOverlap", self.device_overlap)
            .num("multiProcessorCount", self.multi_processor_count);
        for e in &self.extra {
            w.raw(e);
        }
        if request.is_none() {
            for p in &self.pci_infos {
                p.write(w);
            }
        }
        w.close("coproc_cuda");
    }
}

/// Parses BOINC's `"a b c"` triples; missing or bad parts are 0, as `atoi` gives.
fn triple(s: &str) -> [i32; 3] {
    let mut out = [0; 3];
    for (slot, part) in out.iter_mut().zip(s.split_whitespace()) {
        *slot = part.parse().unwrap_or(0);
    }
    out
}

impl PciInfo {
    /// Reads a `<pci_info>` element.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<PciInfo, XmlError> {
        let mut p = PciInfo::default();
        if tag.is_empty() {
            return Ok(p);
        }
        while let Some(t) = r.next_child()? {
            match t.name() {
                "bus_id" => p.bus_id = r.num_or(&t, 0)?,
                "device_id" => p.device_id = r.num_or(&t, 0)?,
                "domain_id" => p.domain_id = r.num_or(&t, 0)?,
                _ => r.unknown(&t, "pci_info")?,
            }
        }
        Ok(p)
    }

    /// Writes `<pci_info>`.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("pci_info")
            .num("bus_id", self.bus_id)
            .num("device_id", self.device_id)
            .num("domain_id", self.domain_id)
            .close("pci_info");
    }
}

impl OtherCoproc {
    /// Reads `<coproc_ati>`, `<coproc_intel_gpu>`, `<coproc_apple_gpu>` or `<coproc>`,
    /// keeping its children verbatim (minus request fields, which go to `request`).
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<OtherCoproc, XmlError> {
        let element = tag.name().to_owned();
        let mut o = OtherCoproc {
            rsc_type: match element.as_str() {
                "coproc_ati" => "ATI".into(),
                "coproc_intel_gpu" => "intel_gpu".into(),
                "coproc_apple_gpu" => "apple_gpu".into(),
                _ => String::new(),
            },
            element,
            ..OtherCoproc::default()
        };
        if tag.is_empty() {
            return Ok(o);
        }
        let mut req = RscRequest::default();
        let mut has_req = false;
        let mut kept: Vec<&str> = Vec::new();
        while let Some(t) = r.next_child()? {
            if req.read_field(r, &t)? {
                has_req = true;
                continue;
            }
            let raw = r.raw(&t)?;
            kept.push(raw);
            let value = || leaf_value(raw, t.name());
            match t.name() {
                "type" if o.element == "coproc" => o.rsc_type = value(),
                "count" => {
                    let v = value();
                    match u32::parse_lenient(&v) {
                        Some(n) => o.count = n,
                        None => r.warn(&t, format!("'{v}' is not an integer; ignored")),
                    }
                }
                "peak_flops" => {
                    let v = value();
                    match f64::parse_lenient(&v) {
                        Some(n) => o.peak_flops = n,
                        None => r.warn(&t, format!("'{v}' is not a number; ignored")),
                    }
                }
                _ => {}
            }
        }
        if has_req {
            o.request = Some(req);
        }
        o.raw = kept.join("\n");
        Ok(o)
    }

    /// Writes the element back: its kept children, plus request fields when `request` is
    /// given (scheduler-request form).
    pub fn write(&self, w: &mut XmlWriter, request: Option<RscRequest>) {
        w.open(&self.element);
        for line in self.raw.lines() {
            w.raw(line);
        }
        if let Some(req) = request {
            req.write(w);
        }
        w.close(&self.element);
    }
}

/// The text of a leaf element given its source (`<name>text</name>`), unescaped and trimmed.
fn leaf_value(raw: &str, name: &str) -> String {
    let mut sub = XmlReader::new(raw, "coproc");
    match sub.root(name) {
        Ok(t) => sub.string(&t).unwrap_or_default(),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = r#"<host_info>
    <timezone>3600</timezone>
    <domain_name>host.example</domain_name>
    <ip_addr>127.0.0.1</ip_addr>
    <host_cpid>cafe0000000000000000000000000009</host_cpid>
    <p_ncpus>2</p_ncpus>
    <p_vendor>GenuineIntel</p_vendor>
    <p_model>Intel(R) Xeon(R) &amp; Co</p_model>
    <p_features>fpu vme</p_features>
    <p_fpops>-4987202545.333757</p_fpops>
    <p_iops>84945538465.577927</p_iops>
    <p_membw>1000000000.000000</p_membw>
    <p_calculated>1795333510.738071</p_calculated>
    <p_vm_extensions_disabled>0</p_vm_extensions_disabled>
    <m_nbytes>25276510208.000000</m_nbytes>
    <m_cache>314572800.000000</m_cache>
    <m_swap>0.000000</m_swap>
    <d_total>270553174016.000000</d_total>
    <d_free>82917818368.000000</d_free>
    <os_name>Linux Debian</os_name>
    <os_version>Debian GNU/Linux 12 (bookworm)</os_version>
    <n_usable_coprocs>3</n_usable_coprocs>
    <wsl_available>0</wsl_available>
    <docker_version>24.0.5</docker_version>
    <docker_type>2</docker_type>
    <product_name>Box</product_name>
    <coprocs>
<coproc_cuda>
   <count>2</count>
   <name>NVIDIA GeForce RTX 3080</name>
   <available_ram>10000000000.000000</available_ram>
   <have_cuda>1</have_cuda>
   <have_opencl>1</have_opencl>
   <peak_flops>29000000000000.000000</peak_flops>
   <cudaVersion>12020</cudaVersion>
   <drvVersion>53554</drvVersion>
   <totalGlobalMem>10736893952.000000</totalGlobalMem>
   <sharedMemPerBlock>49152.000000</sharedMemPerBlock>
   <regsPerBlock>65536</regsPerBlock>
   <warpSize>32</warpSize>
   <memPitch>2147483647.000000</memPitch>
   <maxThreadsPerBlock>1024</maxThreadsPerBlock>
   <maxThreadsDim>1024 1024 64</maxThreadsDim>
   <maxGridSize>2147483647 65535 65535</maxGridSize>
   <clockRate>1710000</clockRate>
   <totalConstMem>65536.000000</totalConstMem>
   <major>8</major>
   <minor>6</minor>
   <textureAlignment>512.000000</textureAlignment>
   <deviceOverlap>1</deviceOverlap>
   <multiProcessorCount>68</multiProcessorCount>
<coproc_opencl>
   <name>NVIDIA GeForce RTX 3080</name>
</coproc_opencl>
<pci_info>
   <bus_id>1</bus_id>
   <device_id>0</device_id>
   <domain_id>0</domain_id>
</pci_info>
<pci_info>
   <bus_id>2</bus_id>
   <device_id>0</device_id>
   <domain_id>0</domain_id>
</pci_info>
</coproc_cuda>
<coproc_ati>
   <count>1</count>
   <name>Radeon</name>
   <peak_flops>1000.5</peak_flops>
</coproc_ati>
    </coprocs>
    <future_thing>x</future_thing>
</host_info>
"#;

    fn parse(src: &str) -> (HostInfo, Vec<crate::xml::Warning>) {
        let mut r = XmlReader::new(src, "h.xml");
        let t = r.root("host_info").expect("root");
        let h = HostInfo::read(&mut r, &t).expect("reads");
        (h, r.finish().expect("finish"))
    }

    #[test]
    fn reads_all_fields_and_coprocs() {
        let (h, warns) = parse(HOST);
        assert_eq!(h.timezone, 3600);
        assert_eq!(h.p_model, "Intel(R) Xeon(R) & Co");
        assert_eq!(h.p_fpops, 4987202545.333757, "negative made positive");
        assert_eq!(h.docker, Some(("24.0.5".into(), 2)));
        assert_eq!(h.product_name.as_deref(), Some("Box"));
        let n = h.coprocs.nvidia.as_ref().expect("nvidia");
        assert_eq!(n.count, 2);
        assert_eq!(n.max_threads_dim, [1024, 1024, 64]);
        assert_eq!(n.max_grid_size, [2147483647, 65535, 65535]);
        assert_eq!(n.pci_infos.len(), 2);
        assert_eq!(n.pci_infos[1].bus_id, 2);
        assert_eq!(n.extra.len(), 1, "coproc_opencl kept");
        assert_eq!(h.coprocs.other[0].rsc_type, "ATI");
        assert_eq!(h.coprocs.other[0].count, 1);
        assert_eq!(h.coprocs.other[0].peak_flops, 1000.5);
        assert_eq!(h.coprocs.ndevs(), 3);
        assert_eq!(h.extra, ["<future_thing>x</future_thing>"]);
        let msgs: Vec<_> = warns.iter().map(|w| w.element.as_str()).collect();
        assert_eq!(msgs, ["p_fpops", "future_thing"]);
    }

    #[test]
    fn state_form_round_trips() {
        let (h, _) = parse(HOST);
        let mut w = XmlWriter::new();
        h.write(&mut w, HostInfoForm::STATE_FILE);
        let out = w.finish();
        assert!(out.contains("<pci_info>"));
        assert!(!out.contains("req_secs"));
        let (h2, _) = parse(&out);
        assert_eq!(h, h2);
    }

    #[test]
    fn the_gui_rpc_form_adds_the_confinement_sentence_last() {
        let (h, _) = parse(HOST);
        let mut w = XmlWriter::new();
        h.write_gui_rpc(&mut w, "apps run unconfined: this kernel has no <Landlock>");
        let out = w.finish();
        let line = "<ferrite_confinement>apps run unconfined: this kernel has no \
                    &lt;Landlock&gt;</ferrite_confinement>\n</host_info>";
        assert!(out.ends_with(&format!("{line}\n")), "{out}");
        let (h2, _) = parse(&out);
        assert_eq!(h2.coprocs, h.coprocs);
        assert_eq!(h2.p_model, h.p_model);
        assert!(h2.extra.iter().any(|e| e.contains("ferrite_confinement")));
    }

    #[test]
    fn scheduler_forms_omit_coprocs_and_carry_requests() {
        let (h, _) = parse(HOST);
        let mut w = XmlWriter::new();
        h.write(
            &mut w,
            HostInfoForm {
                net_info: false,
                coprocs: false,
            },
        );
        let out = w.finish();
        assert!(!out.contains("<coprocs>"));
        assert!(!out.contains("domain_name"));
        assert!(out.contains("<host_cpid>"));

        let mut w = XmlWriter::new();
        let req = |rsc: &str| RscRequest {
            req_secs: if rsc == "NVIDIA" { 3600.0 } else { 5.0 },
            req_instances: 1.0,
            estimated_delay: 0.0,
        };
        h.coprocs.write(&mut w, Some(&req));
        let out = w.finish();
        assert!(!out.contains("<pci_info>"), "{out}");
        let mut r = XmlReader::new(&out, "c.xml");
        let t = r.root("coprocs").expect("root");
        let c = Coprocs::read(&mut r, &t).expect("reads");
        assert_eq!(
            c.nvidia
                .as_ref()
                .and_then(|n| n.request)
                .map(|q| q.req_secs),
            Some(3600.0)
        );
        assert_eq!(c.other[0].request.map(|q| q.req_secs), Some(5.0));
        assert_eq!(
            c.other[0].raw, h.coprocs.other[0].raw,
            "request fields are not kept twice"
        );
        // Writing the parsed request back gives the same text.
        let mut w2 = XmlWriter::new();
        c.write_stored_requests(&mut w2);
        assert_eq!(w2.finish(), out);
    }
}
