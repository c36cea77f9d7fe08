//! OpenCL detection on a real platform: Debian's `pocl-opencl-icd` offers the CPU as an
//! OpenCL device through the ICD loader `ocl-icd-libopencl1` (both installed by `.ci/run`).

use std::path::{Path, PathBuf};

use ferrite_hostinfo::{GpuConfig, HostDetector, HostProbeConfig, OpenclStatus};

#[test]
fn pocl_cpu_platform_is_an_opencl_cpu_prop() {
    assert!(
        Path::new("/etc/OpenCL/vendors/pocl.icd").exists(),
        "PoCL is needed: install Debian's pocl-opencl-icd and ocl-icd-libopencl1 (see .ci/run)"
    );
    let mut cfg = HostProbeConfig::new("/tmp");
    cfg.nvml_library = Some(PathBuf::from("/nonexistent/libnvidia-ml.so.1"));
    let p = HostDetector::new(cfg.clone()).probe_gpus();
    assert_eq!(p.opencl.status, OpenclStatus::Ready, "{:?}", p.opencl);
    let cpu = p
        .opencl
        .cpus
        .iter()
        .find(|c| c.platform_vendor == "The pocl project")
        .unwrap_or_else(|| panic!("no PoCL CPU platform: {:?}", p.opencl));
    let d = &cpu.prop;
    assert!(!d.name.is_empty());
    assert!(d.available && d.endian_little);
    assert!(d.max_compute_units >= 1);
    assert!(d.global_mem_size > 0 && d.local_mem_size > 0);
    assert!(d.single_fp_config != 0);
    assert!(d.opencl_device_version.starts_with("OpenCL "), "{d:?}");
    assert!(d.opencl_platform_version.contains("PoCL"), "{d:?}");
    assert!(
        d.opencl_platform_version.len() <= 63,
        "cut as the official client does"
    );
    assert_eq!(p.usable_count(), 0, "a CPU platform is no GPU");
    let props = p.opencl_cpu_props();
    assert!(props
        .iter()
        .any(|x| x.contains("<platform_vendor>The pocl project</platform_vendor>")));

    // no_gpus turns OpenCL detection off too, as in the official client.
    cfg.gpu = GpuConfig {
        no_gpus: true,
        ..GpuConfig::default()
    };
    let p = HostDetector::new(cfg).probe_gpus();
    assert_eq!(p.opencl.status, OpenclStatus::Disabled);
    assert!(p.opencl.cpus.is_empty());
}
