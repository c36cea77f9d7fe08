//! What the official client makes of the devices OpenCL lists (`correlate_opencl`,
//! `find_best_opencls`, `merge_opencl` in `client/gpu_opencl.cpp`): device numbers, NVML
//! matching, peak FLOPS, the choice of used devices and the coproc elements. Pure code.

use ferrite_proto::host::{
    Coprocs, NvidiaCoproc, OpenclDeviceProp, OpenclGpu, OpenclGpuKind, PciInfo,
};

use super::{OpenclDevice, OpenclScan, OpenclVendor};
use crate::gpu::{cores_and_flops_per_clock, GpuUse, NvidiaDevice};

/// Peak FLOPS outside (0, 1e15] are replaced by 100 GFLOPS, as the official client does.
const GPU_MAX_PEAK_FLOPS: f64 = 1e15;
const GPU_DEFAULT_PEAK_FLOPS: f64 = 100e9;

fn sane_peak_flops(x: f64, source: &str, warnings: &mut Vec<String>) -> f64 {
    if x <= 0.0 || x > GPU_MAX_PEAK_FLOPS {
        warnings.push(format!(
            "{source} reported bad peak FLOPS {x}; using {GPU_DEFAULT_PEAK_FLOPS}"
        ));
        return GPU_DEFAULT_PEAK_FLOPS;
    }
    x
}

/// Peak FLOPS of an NVIDIA GPU known only through OpenCL.
pub fn nvidia_opencl_peak_flops(p: &OpenclDeviceProp) -> f64 {
    let mhz = f64::from(p.max_clock_frequency) * 1e6;
    let units = f64::from(p.max_compute_units);
    if p.nv_compute_capability_major != 0 {
        let (cores, per_clock) = cores_and_flops_per_clock(
            p.nv_compute_capability_major as i32,
            p.nv_compute_capability_minor as i32,
        );
        units * f64::from(cores) * f64::from(per_clock) * mhz
    } else {
        units * 48.0 * 2.0 * mhz
    }
}

/// Peak FLOPS of an AMD GPU known only through OpenCL.
pub fn amd_opencl_peak_flops(p: &OpenclDeviceProp) -> f64 {
    let mhz = f64::from(p.max_clock_frequency) * 1e6;
    let units = f64::from(p.max_compute_units);
    if p.amd_simd_per_compute_unit != 0 {
        units
            * f64::from(p.amd_simd_per_compute_unit)
            * f64::from(p.amd_simd_width)
            * f64::from(p.amd_simd_instruction_width)
            * 2.0
            * mhz
    } else {
        units * 16.0 * 5.0 * mhz
    }
}

/// Peak FLOPS of an Intel GPU: compute units × 8 × clock.
pub fn intel_opencl_peak_flops(p: &OpenclDeviceProp) -> f64 {
    f64::from(p.max_compute_units) * 8.0 * f64::from(p.max_clock_frequency) * 1e6
}

/// Numbers the scanned GPUs as the official client does: NVIDIA ones matched by name, in
/// order, to NVML's devices (`nvml`), the others by position among their vendor's devices.
/// Devices of other vendors are dropped with a warning.
pub fn classify(
    scan: &OpenclScan,
    nvml: &[NvidiaDevice],
    warnings: &mut Vec<String>,
) -> Vec<OpenclDevice> {
    let mut out: Vec<OpenclDevice> = Vec::new();
    let mut platform = None;
    let mut cuda_index = 0usize;
    for s in &scan.gpus {
        if platform != Some(s.platform_index) {
            platform = Some(s.platform_index);
            cuda_index = 0;
        }
        let vendor = OpenclVendor::of(&s.prop.vendor);
        let count_of = |v: OpenclVendor| out.iter().filter(|d| d.vendor == v).count() as u32;
        let prop = s.prop.clone();
        let global = prop.global_mem_size as f64;
        let dev = match vendor {
            OpenclVendor::Nvidia => {
                let matched = nvml[cuda_index.min(nvml.len())..]
                    .iter()
                    .position(|n| n.name == prop.name)
                    .map(|off| cuda_index + off);
                let (device_num, peak, ram) = match matched {
                    Some(i) => {
                        cuda_index = i + 1;
                        (
                            nvml[i].device_num,
                            nvml[i].peak_flops,
                            nvml[i].available_ram as f64,
                        )
                    }
                    None => {
                        if !nvml.is_empty() {
                            warnings.push(format!(
                                "OpenCL NVIDIA index #{} does not match any CUDA device",
                                s.opencl_device_index
                            ));
                        }
                        let peak = sane_peak_flops(
                            nvidia_opencl_peak_flops(&prop),
                            "NVIDIA OpenCL",
                            warnings,
                        );
                        (count_of(OpenclVendor::Nvidia), peak, global)
                    }
                };
                OpenclDevice {
                    vendor,
                    device_num,
                    opencl_device_index: s.opencl_device_index,
                    peak_flops: peak,
                    available_ram: ram,
                    usage: GpuUse::Unused,
                    prop,
                }
            }
            OpenclVendor::Amd | OpenclVendor::Intel => {
                let peak = if vendor == OpenclVendor::Amd {
                    sane_peak_flops(amd_opencl_peak_flops(&prop), "AMD OpenCL", warnings)
                } else {
                    sane_peak_flops(intel_opencl_peak_flops(&prop), "Intel OpenCL", warnings)
                };
                OpenclDevice {
                    vendor,
                    device_num: count_of(vendor),
                    opencl_device_index: s.opencl_device_index,
                    peak_flops: peak,
                    available_ram: global,
                    usage: GpuUse::Unused,
                    prop,
                }
            }
            OpenclVendor::Other => {
                warnings.push(format!(
                    "OpenCL device {} of vendor {} is not used",
                    prop.name, prop.vendor
                ));
                continue;
            }
        };
        out.push(dev);
    }
    out
}

/// The official `opencl_compare`: device version, then memory (loosely: within −30 %/+40 %
/// counts as equal), then speed.
fn compare(a: &OpenclDevice, b: &OpenclDevice, loose: bool) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    let v = a
        .prop
        .device_version_int()
        .cmp(&b.prop.device_version_int());
    if v != Equal {
        return v;
    }
    let (ma, mb) = (a.prop.global_mem_size as f64, b.prop.global_mem_size as f64);
    if loose {
        return if ma > 1.4 * mb {
            Greater
        } else if ma < 0.7 * mb {
            Less
        } else {
            Equal
        };
    }
    ma.partial_cmp(&mb)
        .filter(|o| *o != Equal)
        .or_else(|| a.peak_flops.partial_cmp(&b.peak_flops))
        .unwrap_or(Equal)
}

/// Marks one vendor's devices used, unused or ignored (`find_best_opencls`) and returns the
/// best one's index in `devices`.
pub fn choose(
    devices: &mut [OpenclDevice],
    vendor: OpenclVendor,
    use_all: bool,
    ignore: &[u32],
) -> Option<usize> {
    let mut best: Option<usize> = None;
    for i in 0..devices.len() {
        let d = &devices[i];
        if d.vendor != vendor || ignore.contains(&d.device_num) {
            continue;
        }
        if best.is_none_or(|b| compare(d, &devices[b], false).is_gt()) {
            best = Some(i);
        }
    }
    let best_dev = best.map(|b| devices[b].clone());
    for d in devices.iter_mut().filter(|d| d.vendor == vendor) {
        d.usage = if ignore.contains(&d.device_num) {
            GpuUse::Ignored
        } else if best_dev
            .as_ref()
            .is_some_and(|b| use_all || compare(d, b, true).is_eq())
        {
            GpuUse::Used
        } else {
            GpuUse::Unused
        };
    }
    best
}

/// The options that decide which OpenCL GPUs are used.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenclChoice<'a> {
    /// `<use_all_gpus>`.
    pub use_all: bool,
    /// `<ignore_nvidia_dev>`.
    pub ignore_nvidia: &'a [u32],
    /// `<ignore_ati_dev>`.
    pub ignore_ati: &'a [u32],
    /// `<ignore_intel_dev>`.
    pub ignore_intel: &'a [u32],
}

/// Adds what OpenCL found to `coprocs` (`correlate_opencl`): `have_opencl` and the
/// `<coproc_opencl>` block for NVIDIA GPUs CUDA already describes (or a `<coproc_cuda>` from
/// OpenCL alone when NVML saw none), and `<coproc_ati>` / `<coproc_intel_gpu>` elements.
/// `cuda_best` is the device number of the GPU `<coproc_cuda>` describes, if any. Marks
/// each device's usage in `devices`.
pub fn merge_into(
    coprocs: &mut Coprocs,
    cuda_best: Option<u32>,
    devices: &mut [OpenclDevice],
    choice: OpenclChoice<'_>,
) {
    let has_nvidia = devices.iter().any(|d| d.vendor == OpenclVendor::Nvidia);
    if has_nvidia {
        match (coprocs.nvidia.as_mut(), cuda_best) {
            (Some(cuda), Some(best_num)) if cuda.have_cuda => {
                // merge_opencl: the CUDA description stays; OpenCL adds its block.
                let mut have = None;
                for d in devices
                    .iter_mut()
                    .filter(|d| d.vendor == OpenclVendor::Nvidia)
                {
                    d.usage = if choice.ignore_nvidia.contains(&d.device_num) {
                        GpuUse::Ignored
                    } else {
                        GpuUse::Unused
                    };
                    if d.usage != GpuUse::Ignored && d.device_num == best_num && have.is_none() {
                        have = Some(d.prop.clone());
                    }
                }
                if let Some(prop) = have {
                    cuda.have_opencl = true;
                    cuda.extra
                        .retain(|e| !e.trim_start().starts_with("<coproc_opencl>"));
                    cuda.extra.push(prop.to_xml("coproc_opencl"));
                }
            }
            _ => {
                let best = choose(
                    devices,
                    OpenclVendor::Nvidia,
                    choice.use_all,
                    choice.ignore_nvidia,
                );
                if let Some(b) = best {
                    let bd = &devices[b];
                    let count = devices
                        .iter()
                        .filter(|d| d.vendor == OpenclVendor::Nvidia && d.usage == GpuUse::Used)
                        .count() as u32;
                    let p = &bd.prop;
                    coprocs.nvidia = Some(NvidiaCoproc {
                        count,
                        name: p.name.clone(),
                        available_ram: p.global_mem_size as f64,
                        have_cuda: false,
                        have_opencl: true,
                        peak_flops: bd.peak_flops,
                        total_global_mem: p.global_mem_size as f64,
                        clock_rate: i32::try_from(u64::from(p.max_clock_frequency) * 1000)
                            .unwrap_or(i32::MAX),
                        major: p.nv_compute_capability_major as i32,
                        minor: p.nv_compute_capability_minor as i32,
                        pci_infos: vec![PciInfo::default(); count as usize],
                        extra: vec![p.to_xml("coproc_opencl")],
                        ..NvidiaCoproc::default()
                    });
                }
            }
        }
    }
    for (vendor, kind, ignore) in [
        (OpenclVendor::Amd, OpenclGpuKind::Amd, choice.ignore_ati),
        (
            OpenclVendor::Intel,
            OpenclGpuKind::Intel,
            choice.ignore_intel,
        ),
    ] {
        let Some(b) = choose(devices, vendor, choice.use_all, ignore) else {
            continue;
        };
        let count = devices
            .iter()
            .filter(|d| d.vendor == vendor && d.usage == GpuUse::Used)
            .count() as u32;
        let bd = &devices[b];
        let gpu = OpenclGpu {
            kind,
            count,
            peak_flops: bd.peak_flops,
            available_ram: bd.prop.global_mem_size as f64,
            prop: bd.prop.clone(),
        };
        coprocs.other.retain(|o| o.rsc_type != kind.rsc_type());
        coprocs.other.insert(0, gpu.to_coproc());
    }
    // AMD before Intel, as the official client writes them.
    coprocs.other.sort_by_key(|o| match o.element.as_str() {
        "coproc_ati" => 0,
        "coproc_intel_gpu" => 1,
        _ => 2,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opencl::{OpenclStatus, ScannedDevice};

    fn prop(name: &str, vendor: &str, version: &str, mem: u64) -> OpenclDeviceProp {
        OpenclDeviceProp {
            name: name.into(),
            vendor: vendor.into(),
            opencl_device_version: version.into(),
            global_mem_size: mem,
            max_compute_units: 10,
            max_clock_frequency: 1000,
            ..OpenclDeviceProp::default()
        }
    }

    fn scan_of(devs: Vec<(u32, OpenclDeviceProp)>) -> OpenclScan {
        let mut idx = std::collections::HashMap::new();
        OpenclScan {
            status: OpenclStatus::Ready,
            cpus: Vec::new(),
            gpus: devs
                .into_iter()
                .map(|(platform_index, prop)| {
                    let i = idx.entry(platform_index).or_insert(0u32);
                    let d = ScannedDevice {
                        platform_index,
                        opencl_device_index: *i,
                        prop,
                    };
                    *i += 1;
                    d
                })
                .collect(),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn vendors_are_classified_in_the_official_order() {
        assert_eq!(OpenclVendor::of("NVIDIA Corporation"), OpenclVendor::Nvidia);
        assert_eq!(
            OpenclVendor::of("Advanced Micro Devices, Inc."),
            OpenclVendor::Amd
        );
        assert_eq!(OpenclVendor::of("AMD"), OpenclVendor::Amd);
        assert_eq!(
            OpenclVendor::of("Intel(R) Corporation"),
            OpenclVendor::Intel
        );
        assert_eq!(OpenclVendor::of("ARM"), OpenclVendor::Other);
    }

    #[test]
    fn peak_flops_formulas_match_the_official_client() {
        let mut p = prop("x", "AMD", "OpenCL 2.0", 1);
        assert_eq!(amd_opencl_peak_flops(&p), 10.0 * 16.0 * 5.0 * 1e9);
        p.amd_simd_per_compute_unit = 2;
        p.amd_simd_width = 32;
        p.amd_simd_instruction_width = 1;
        assert_eq!(amd_opencl_peak_flops(&p), 10.0 * 2.0 * 32.0 * 2.0 * 1e9);
        assert_eq!(intel_opencl_peak_flops(&p), 10.0 * 8.0 * 1e9);
        assert_eq!(nvidia_opencl_peak_flops(&p), 10.0 * 96.0 * 1e9);
        p.nv_compute_capability_major = 8;
        p.nv_compute_capability_minor = 6;
        assert_eq!(nvidia_opencl_peak_flops(&p), 10.0 * 128.0 * 2.0 * 1e9);
        let mut w = Vec::new();
        assert_eq!(sane_peak_flops(0.0, "x", &mut w), 100e9);
        assert_eq!(sane_peak_flops(2e15, "x", &mut w), 100e9);
        assert_eq!(w.len(), 2);
    }

    #[test]
    fn amd_and_intel_devices_are_numbered_per_vendor_and_the_best_counted() {
        let scan = scan_of(vec![
            (
                0,
                prop(
                    "Radeon A",
                    "Advanced Micro Devices, Inc.",
                    "OpenCL 2.0 AMD-APP",
                    8 << 30,
                ),
            ),
            (
                0,
                prop(
                    "Radeon B",
                    "Advanced Micro Devices, Inc.",
                    "OpenCL 2.0 AMD-APP",
                    16 << 30,
                ),
            ),
            (
                0,
                prop(
                    "Radeon C",
                    "Advanced Micro Devices, Inc.",
                    "OpenCL 1.2 AMD-APP",
                    32 << 30,
                ),
            ),
            (
                1,
                prop(
                    "Intel UHD",
                    "Intel(R) Corporation",
                    "OpenCL 3.0 NEO",
                    2 << 30,
                ),
            ),
        ]);
        let mut w = Vec::new();
        let mut devs = classify(&scan, &[], &mut w);
        assert_eq!(
            devs.iter()
                .map(|d| (d.device_num, d.opencl_device_index))
                .collect::<Vec<_>>(),
            [(0, 0), (1, 1), (2, 2), (0, 0)]
        );
        let mut c = Coprocs::default();
        merge_into(&mut c, None, &mut devs, OpenclChoice::default());
        assert_eq!(
            devs.iter().map(|d| d.usage).collect::<Vec<_>>(),
            // B is best (2.0, most memory); A has half of B's memory: not loosely equal;
            // C's OpenCL version is lower.
            [GpuUse::Unused, GpuUse::Used, GpuUse::Unused, GpuUse::Used]
        );
        assert_eq!(c.other.len(), 2);
        assert_eq!(c.other[0].element, "coproc_ati");
        assert_eq!(c.other[0].count, 1);
        assert!(c.other[0].raw.contains("<name>Radeon B</name>"));
        assert_eq!(c.other[1].element, "coproc_intel_gpu");

        let mut c = Coprocs::default();
        merge_into(
            &mut c,
            None,
            &mut devs,
            OpenclChoice {
                use_all: true,
                ignore_ati: &[1],
                ..OpenclChoice::default()
            },
        );
        assert_eq!(
            devs.iter().map(|d| d.usage).collect::<Vec<_>>(),
            [GpuUse::Used, GpuUse::Ignored, GpuUse::Used, GpuUse::Used]
        );
        assert_eq!(c.other[0].count, 2);
        assert!(c.other[0].raw.contains("<name>Radeon A</name>"));
    }

    #[test]
    fn nvidia_opencl_devices_match_nvml_by_name_and_add_the_opencl_block() {
        let nv = |num: u32, name: &str| NvidiaDevice {
            device_num: num,
            name: name.into(),
            total_mem: 1 << 30,
            available_ram: 1 << 29,
            major: 8,
            minor: 6,
            driver_version: String::new(),
            drv_version: 0,
            cuda_version: 12020,
            cuda_cores: None,
            multi_processor_count: 1,
            clock_rate_khz: 1,
            peak_flops: 5e12,
            pci: PciInfo::default(),
            usage: GpuUse::Used,
            uuid: String::new(),
        };
        let nvml = [nv(0, "GeForce A"), nv(1, "GeForce B")];
        let scan = scan_of(vec![(
            0,
            prop(
                "GeForce B",
                "NVIDIA Corporation",
                "OpenCL 3.0 CUDA",
                1 << 30,
            ),
        )]);
        let mut w = Vec::new();
        let mut devs = classify(&scan, &nvml, &mut w);
        assert_eq!(devs[0].device_num, 1, "matched by name, skipping A");
        assert_eq!(devs[0].peak_flops, 5e12);
        let mut c = Coprocs {
            nvidia: Some(NvidiaCoproc {
                count: 2,
                have_cuda: true,
                ..NvidiaCoproc::default()
            }),
            other: Vec::new(),
        };
        merge_into(&mut c, Some(1), &mut devs, OpenclChoice::default());
        let n = c.nvidia.expect("cuda");
        assert!(n.have_cuda && n.have_opencl);
        assert_eq!(n.count, 2);
        assert!(
            n.extra[0].contains("<name>GeForce B</name>"),
            "{:?}",
            n.extra
        );

        // The best CUDA device has no OpenCL twin: no have_opencl.
        let mut c = Coprocs {
            nvidia: Some(NvidiaCoproc {
                have_cuda: true,
                ..NvidiaCoproc::default()
            }),
            other: Vec::new(),
        };
        merge_into(&mut c, Some(0), &mut devs, OpenclChoice::default());
        assert!(!c.nvidia.expect("cuda").have_opencl);

        // Without NVML, OpenCL alone describes the GPU.
        let mut devs = classify(&scan, &[], &mut w);
        let mut c = Coprocs::default();
        merge_into(&mut c, None, &mut devs, OpenclChoice::default());
        let n = c.nvidia.expect("from OpenCL");
        assert!(!n.have_cuda && n.have_opencl);
        assert_eq!((n.count, n.name.as_str()), (1, "GeForce B"));
        assert_eq!(n.clock_rate, 1_000_000);
    }
}
