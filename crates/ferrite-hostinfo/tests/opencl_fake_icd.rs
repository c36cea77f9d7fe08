//! OpenCL detection through the system's ICD loader (`ocl-icd-libopencl1`) with fake AMD and
//! Intel drivers built from `tests/fake_opencl/fake_icd.c` and registered through
//! `OCL_ICD_VENDORS`. One test per binary: the loader reads that variable once per process.

use std::path::{Path, PathBuf};

use ferrite_hostinfo::{
    GpuConfig, GpuUse, HostDetector, HostProbeConfig, OpenclStatus, OpenclVendor,
};
use ferrite_proto::host::{HostInfo, HostInfoForm, OpenclDeviceProp};
use ferrite_proto::xml::{XmlReader, XmlWriter};

/// Builds the fake AMD and Intel drivers into `dir` and writes one `.icd` file for each into
/// `dir/vendors`.
fn build_fake_icds(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_opencl/fake_icd.c");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let vendors = dir.join("vendors");
    std::fs::create_dir_all(&vendors).expect("mkdir");
    for (name, def) in [("amd", "-DFAKE_AMD"), ("intel", "-DFAKE_INTEL")] {
        let lib = dir.join(format!("libfake{name}.so"));
        let status = std::process::Command::new(&compiler)
            .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", def, "-o"])
            .arg(&lib)
            .arg(&src)
            .status()
            .expect("run the C compiler");
        assert!(status.success(), "compiling the fake {name} ICD failed");
        std::fs::write(
            vendors.join(format!("{name}.icd")),
            format!("{}\n", lib.display()),
        )
        .expect("write icd");
    }
    vendors
}

fn loader_installed() -> bool {
    [
        "/usr/lib/x86_64-linux-gnu/libOpenCL.so.1",
        "/usr/lib/aarch64-linux-gnu/libOpenCL.so.1",
        "/usr/lib/libOpenCL.so.1",
    ]
    .iter()
    .any(|p| Path::new(p).exists())
}

/// The end-to-end tests' rule for a missing peer (`ferrite_e2e::skip`, which this crate's
/// tests cannot use): when `present` is false, test `test` is skipped with a
/// `SKIPPED <test>: <why>` line (appended to `FERRITE_SKIPPED_LOG` when set, where
/// `tests/run.sh` collects them), and under CI, which installs every peer, it fails instead.
fn present_or_skip(test: &str, present: bool, why: &str) -> bool {
    if present {
        return true;
    }
    let line = format!("SKIPPED {test}: {why}");
    assert!(
        !std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false"),
        "{line}; CI must run this test"
    );
    eprintln!("{line}");
    if let Some(log) = std::env::var_os("FERRITE_SKIPPED_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
    false
}

fn probe(gpu: GpuConfig) -> ferrite_hostinfo::GpuProbe {
    let mut cfg = HostProbeConfig::new("/tmp");
    cfg.nvml_library = Some(PathBuf::from("/nonexistent/libnvidia-ml.so.1"));
    cfg.gpu = gpu;
    HostDetector::new(cfg).probe_gpus()
}

#[test]
fn fake_amd_and_intel_gpus_are_reported_as_the_official_client_does() {
    if !present_or_skip(
        "fake_amd_and_intel_gpus_are_reported_as_the_official_client_does",
        loader_installed(),
        "the OpenCL ICD loader is not installed (apt-get install ocl-icd-libopencl1)",
    ) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let vendors = build_fake_icds(dir.path());
    std::env::set_var("OCL_ICD_VENDORS", &vendors);

    let p = probe(GpuConfig::default());
    assert_eq!(p.opencl.status, OpenclStatus::Ready, "{:?}", p.opencl);
    assert!(p.opencl.cpus.is_empty(), "the fakes offer no CPU device");
    let devs = &p.opencl.devices;
    let summary: Vec<_> = devs
        .iter()
        .map(|d| {
            (
                d.vendor,
                d.device_num,
                d.opencl_device_index,
                d.prop.name.as_str(),
                d.usage,
            )
        })
        .collect();
    // ocl-icd orders platforms by .icd file name: amd, then intel.
    assert_eq!(
        summary,
        [
            (OpenclVendor::Amd, 0, 0, "AMD Radeon RX 6800", GpuUse::Used),
            (
                OpenclVendor::Amd,
                1,
                1,
                "AMD Radeon RX 6800 XT",
                GpuUse::Used
            ),
            (
                OpenclVendor::Intel,
                0,
                0,
                "Intel(R) UHD Graphics 630",
                GpuUse::Used
            ),
        ]
    );
    let xt = &devs[1];
    assert_eq!(xt.prop.vendor, "Advanced Micro Devices, Inc.");
    assert_eq!(xt.prop.vendor_id, 0x1002);
    assert_eq!(
        (
            xt.prop.amd_simd_per_compute_unit,
            xt.prop.amd_simd_width,
            xt.prop.amd_simd_instruction_width
        ),
        (2, 32, 1)
    );
    assert_eq!(
        xt.prop.half_fp_config, 0,
        "CL_INVALID_VALUE means unsupported"
    );
    assert_eq!(xt.prop.double_fp_config, 0x3f);
    assert_eq!(
        xt.prop.opencl_platform_version,
        "OpenCL 2.1 AMD-APP (3444.0)"
    );
    // 72 CUs × 2 SIMDs × 32 wide × 1 × 2 × 2250 MHz.
    assert_eq!(xt.peak_flops, 72.0 * 2.0 * 32.0 * 2.0 * 2250e6);
    // 24 CUs × 8 × 1150 MHz.
    assert_eq!(devs[2].peak_flops, 24.0 * 8.0 * 1150e6);

    // The host description, written and read back as a GUI or a server would.
    let mut host = HostInfo::default();
    ferrite_hostinfo::apply_gpu_probe(&mut host, &p);
    assert_eq!(host.n_usable_coprocs, 3);
    let mut w = XmlWriter::new();
    host.write(&mut w, HostInfoForm::STATE_FILE);
    let text = w.finish();
    let mut r = XmlReader::new(&text, "host_info");
    let t = r.root("host_info").expect("root");
    let back = HostInfo::read(&mut r, &t).expect("reads");
    let ati = back
        .coprocs
        .other
        .iter()
        .find(|o| o.element == "coproc_ati")
        .expect("coproc_ati");
    assert_eq!((ati.rsc_type.as_str(), ati.count), ("ATI", 2));
    assert_eq!(
        ati.peak_flops, xt.peak_flops,
        "the best device describes the type"
    );
    for needle in [
        "<name>AMD Radeon RX 6800 XT</name>",
        "<have_cal>0</have_cal>",
        "<have_opencl>1</have_opencl>",
        "<localRAM>16368</localRAM>",
        "<engineClock>2250</engineClock>",
        "<amd_simd_width>32</amd_simd_width>",
    ] {
        assert!(ati.raw.contains(needle), "{needle} missing:\n{}", ati.raw);
    }
    // The OpenCL block carries the best device's properties, exactly.
    let inner = ati
        .raw
        .split("<coproc_opencl>")
        .nth(1)
        .and_then(|b| b.split("</coproc_opencl>").next())
        .expect("coproc_opencl");
    let block = format!("<coproc_opencl>{inner}</coproc_opencl>");
    let mut r = XmlReader::new(&block, "coproc_opencl");
    let t = r.root("coproc_opencl").expect("root");
    assert_eq!(OpenclDeviceProp::read(&mut r, &t).expect("reads"), xt.prop);
    let intel = back
        .coprocs
        .other
        .iter()
        .find(|o| o.element == "coproc_intel_gpu")
        .expect("coproc_intel_gpu");
    assert_eq!((intel.rsc_type.as_str(), intel.count), ("intel_gpu", 1));
    assert!(
        intel.raw.contains("<name>Intel(R) UHD Graphics 630</name>"),
        "{}",
        intel.raw
    );
    assert!(!intel.raw.contains("have_cal"), "{}", intel.raw);

    // ignore_ati_dev and no_opencl.
    let p = probe(GpuConfig {
        ignore_ati_dev: vec![1],
        ignore_intel_dev: vec![0],
        ..GpuConfig::default()
    });
    let usage: Vec<_> = p.opencl.devices.iter().map(|d| d.usage).collect();
    assert_eq!(usage, [GpuUse::Used, GpuUse::Ignored, GpuUse::Ignored]);
    assert_eq!(p.coprocs.other.len(), 1, "{:?}", p.coprocs.other);
    assert_eq!(p.coprocs.other[0].count, 1);
    assert!(p.coprocs.other[0]
        .raw
        .contains("<name>AMD Radeon RX 6800</name>"));

    let p = probe(GpuConfig {
        no_opencl: true,
        ..GpuConfig::default()
    });
    assert_eq!(p.opencl.status, OpenclStatus::Disabled);
    assert!(p.coprocs.other.is_empty());
}
