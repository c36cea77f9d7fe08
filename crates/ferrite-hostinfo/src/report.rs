//! The text `ferrited --detect_gpus` prints: CPUs, memory and GPUs as detected, in the spirit
//! of the official client's start-up messages.

use std::fmt::Write;

use crate::{GpuProbe, GpuUse, HostDetection, NvmlStatus};

fn gib(bytes: f64) -> String {
    format!("{:.2} GB", bytes / (1024.0 * 1024.0 * 1024.0))
}

/// Builds the report for a host detection and a GPU probe.
pub fn detect_gpus_report(found: &HostDetection, gpus: &GpuProbe) -> String {
    let h = &found.host;
    let d = &found.details;
    let mut s = String::new();
    // Writing to a String cannot fail; the results are ignored on purpose.
    let _ = writeln!(s, "Processor: {} {} {}", h.p_ncpus, h.p_vendor, h.p_model);
    if h.p_ncpus != d.online_cpus {
        let _ = writeln!(
            s,
            "Usable CPUs: {} of {} online (affinity {:?}, cgroup quota {:?})",
            h.p_ncpus, d.online_cpus, d.affinity_cpus, d.cpu_quota
        );
    }
    let _ = writeln!(s, "Processor features: {}", h.p_features);
    if let Some(p) = h.product_name.as_deref().filter(|p| !p.is_empty()) {
        let _ = writeln!(s, "Product name: {p}");
    }
    if !d.platforms.is_empty() {
        let _ = writeln!(s, "Platforms: {}", d.platforms.join(" "));
    }
    let _ = writeln!(s, "OS: {}: {}", h.os_name, h.os_version);
    let _ = writeln!(
        s,
        "Memory: {} physical, {} virtual",
        gib(h.m_nbytes),
        gib(h.m_swap)
    );
    if let Some(l) = d.memory_limit {
        let _ = writeln!(s, "Memory limit (cgroup): {}", gib(l as f64));
    }
    let _ = writeln!(s, "Disk: {} total, {} free", gib(h.d_total), gib(h.d_free));
    if let Some(v) = &d.virtualization {
        let _ = writeln!(s, "Virtualization: {v:?}");
    }
    match &gpus.status {
        NvmlStatus::Ready => {}
        NvmlStatus::Disabled => {
            let _ = writeln!(s, "GPU detection disabled (no_gpus)");
        }
        NvmlStatus::LibraryMissing(e) => {
            let _ = writeln!(s, "No NVIDIA library found ({e})");
        }
        NvmlStatus::InitFailed(e) => {
            let _ = writeln!(s, "NVIDIA library present but not usable ({e})");
        }
        NvmlStatus::DetectionFailed(e) => {
            let _ = writeln!(s, "GPU detection failed: {e}");
        }
    }
    if gpus.coprocs.is_empty() {
        let _ = writeln!(s, "No usable GPUs found");
    }
    for g in &gpus.nvidia {
        let tag = match g.usage {
            GpuUse::Used => "CUDA",
            GpuUse::Unused => "CUDA (not used)",
            GpuUse::Ignored => "CUDA (ignored by config)",
        };
        let _ = writeln!(
            s,
            "{tag}: NVIDIA GPU {}: {} (driver version {}, CUDA version {}.{}, compute capability {}.{}, {}MB, {}MB available, {:.0} GFLOPS peak)",
            g.device_num,
            g.name,
            g.driver_version,
            g.cuda_version / 1000,
            (g.cuda_version % 1000) / 10,
            g.major,
            g.minor,
            g.total_mem / (1024 * 1024),
            g.available_ram / (1024 * 1024),
            g.peak_flops / 1e9
        );
    }
    for line in opencl_lines(gpus) {
        let _ = writeln!(s, "{line}");
    }
    for o in &gpus.coprocs.other {
        let _ = writeln!(
            s,
            "Coprocessor: {} (type {}, {} instances)",
            o.element, o.rsc_type, o.count
        );
    }
    for w in gpus.warnings.iter().chain(&gpus.opencl.warnings) {
        let _ = writeln!(s, "Warning: {w}");
    }
    s
}

/// One line per OpenCL GPU and CPU device found, as the detection report and the daemon's
/// start-up log show them.
pub fn opencl_lines(gpus: &GpuProbe) -> Vec<String> {
    let mut out = Vec::new();
    for d in &gpus.opencl.devices {
        let kind = match d.vendor {
            crate::OpenclVendor::Nvidia => "NVIDIA GPU",
            crate::OpenclVendor::Amd => "AMD/ATI GPU",
            _ => "Intel GPU",
        };
        let note = match d.usage {
            GpuUse::Used => "",
            GpuUse::Unused => " (not used)",
            GpuUse::Ignored => " (ignored by config)",
        };
        out.push(format!(
            "OpenCL: {kind} {}{note}: {} (driver version {}, device version {}, {:.2}GB, {:.0} GFLOPS peak)",
            d.device_num,
            d.prop.name,
            d.prop.opencl_driver_version,
            d.prop.opencl_device_version.trim_end(),
            d.prop.global_mem_size as f64 / 1e9,
            d.peak_flops / 1e9
        ));
    }
    for c in &gpus.opencl.cpus {
        out.push(format!(
            "OpenCL CPU: {} (OpenCL driver vendor: {}, driver version {}, device version {})",
            c.prop.name,
            c.platform_vendor,
            c.prop.opencl_driver_version,
            c.prop.opencl_device_version.trim_end()
        ));
    }
    out
}
