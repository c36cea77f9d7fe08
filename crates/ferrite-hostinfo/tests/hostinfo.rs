//! Integration tests of ferrite-hostinfo: `/proc/cpuinfo` and cgroup fixtures, a fake NVML
//! library describing two GPUs (compiled here with the system's C compiler), missing and
//! failing NVML, user activity and battery fixture trees.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use ferrite_hostinfo::cgroup::{read_cgroup_limits, CgroupLimits};
use ferrite_hostinfo::cpuinfo::{parse_cpuinfo, CpuArch};
use ferrite_hostinfo::{
    apply_gpu_probe, detect_gpus_report, idle_time, on_battery, GpuConfig, GpuUse, HostDetector,
    HostProbeConfig, IdleProbe, NvmlStatus, SystemRoots, UserCoproc,
};
use ferrite_proto::host::PciInfo;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn read_fixture(rel: &str) -> String {
    std::fs::read_to_string(fixture(rel)).expect("fixture")
}

// ---------------------------------------------------------------- /proc/cpuinfo

#[test]
fn cpuinfo_x86_64_amd_epyc() {
    let info = parse_cpuinfo(&read_fixture("cpuinfo/x86_64-amd-epyc.txt"), CpuArch::X86);
    assert_eq!(info.vendor, "AuthenticAMD");
    assert_eq!(info.model, "AMD EPYC [Family 26 Model 2 Stepping 1]");
    assert_eq!(info.cache_bytes, Some(1024.0 * 1024.0));
    assert!(
        info.features.starts_with("fpu vme de pse tsc msr"),
        "{}",
        info.features
    );
    assert!(info.features.contains(" avx512f "));
    assert!(info.features.ends_with("avx512_vp2intersect"));
    assert_eq!(info.hardware, None);
}

#[test]
fn cpuinfo_aarch64_raspberry_pi_uses_board_name_and_arm_ids() {
    let info = parse_cpuinfo(
        &read_fixture("cpuinfo/aarch64-raspberry-pi-4.txt"),
        CpuArch::Arm,
    );
    assert_eq!(info.vendor, "ARM");
    assert_eq!(
        info.model,
        "BCM2835 [Impl 0x41 Arch 8 Variant 0x0 Part 0xd08 Rev 3]"
    );
    assert_eq!(info.features, "fp asimd evtstrm crc32 cpuid");
    assert_eq!(info.cache_bytes, None);
    assert_eq!(info.hardware.as_deref(), Some("BCM2835"));
}

#[test]
fn cpuinfo_aarch64_server_without_model_name() {
    let info = parse_cpuinfo(&read_fixture("cpuinfo/aarch64-graviton2.txt"), CpuArch::Arm);
    assert_eq!(info.vendor, "ARM");
    assert_eq!(
        info.model,
        "[Impl 0x41 Arch 8 Variant 0x3 Part 0xd0c Rev 1]"
    );
    assert!(info.features.starts_with("fp asimd evtstrm aes pmull"));
    assert!(info.features.ends_with("asimddp ssbs"));
    assert_eq!(info.hardware, None);
}

// What the official client reports for these files, from `parse_cpuinfo_linux` in
// client/hostinfo_unix.cpp built for ARM: vendor "ARM"; the first `model name`, `Processor`
// or `Hardware` line as the model, followed by "[Impl .. Arch .. Variant .. Part .. Rev ..]"
// from the first CPU's identification lines; `Features` verbatim (the trailing space the
// 32-bit kernel prints stripped); each `Hardware` line into `product_name`. Two differences,
// both deliberate: a model with no name has no leading space here (the official client writes
// " [Impl ...]"), and a board without a `Hardware` line (a Raspberry Pi 5) gets its `Model`
// line as `product_name`, where the official client leaves it empty.

#[test]
fn cpuinfo_raspberry_pi_5_cortex_a76_without_hardware_line() {
    let info = parse_cpuinfo(
        &read_fixture("cpuinfo/aarch64-raspberry-pi-5.txt"),
        CpuArch::Arm,
    );
    assert_eq!(info.vendor, "ARM");
    // Cortex-A76 is ARM's part 0xd0b; no name line, so the identification alone.
    assert_eq!(
        info.model,
        "[Impl 0x41 Arch 8 Variant 0x4 Part 0xd0b Rev 1]"
    );
    assert_eq!(
        info.features,
        "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc \
         dcpop asimddp"
    );
    assert_eq!(info.hardware, None);
    assert_eq!(
        info.board_model.as_deref(),
        Some("Raspberry Pi 5 Model B Rev 1.0")
    );
    assert_eq!(info.cache_bytes, None);
}

#[test]
fn cpuinfo_raspberry_pi_4_cortex_a72_names_its_board() {
    let info = parse_cpuinfo(
        &read_fixture("cpuinfo/aarch64-raspberry-pi-4.txt"),
        CpuArch::Arm,
    );
    assert_eq!(
        info.board_model.as_deref(),
        Some("Raspberry Pi 4 Model B Rev 1.1")
    );
    // Cortex-A72 (part 0xd08) on a 64-bit kernel: AdvSIMD is "asimd", not "neon".
    let flags: Vec<&str> = info.features.split(' ').collect();
    assert!(flags.contains(&"asimd") && !flags.contains(&"neon"));
}

#[test]
fn cpuinfo_32_bit_raspberry_pi_os_has_neon_vfpv4_and_the_v7_name() {
    let info = parse_cpuinfo(
        &read_fixture("cpuinfo/armv7l-raspberry-pi-os-32bit.txt"),
        CpuArch::Arm,
    );
    assert_eq!(info.vendor, "ARM");
    assert_eq!(
        info.model,
        "ARMv7 Processor rev 3 (v7l) [Impl 0x41 Arch 7 Variant 0x0 Part 0xd08 Rev 3]"
    );
    // The flags plan classes test (neon, vfpv4) as the kernel lists them, the trailing space
    // gone, so " neon " (how the official benchmark looks for NEON) is found with the
    // separators a project's regular expression expects.
    assert_eq!(
        info.features,
        "half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva idivt vfpd32 lpae evtstrm crc32"
    );
    assert!(format!(" {} ", info.features).contains(" neon "));
    assert!(format!(" {} ", info.features).contains(" vfpv4 "));
    assert_eq!(info.hardware.as_deref(), Some("BCM2711"));
    assert_eq!(
        info.board_model.as_deref(),
        Some("Raspberry Pi 4 Model B Rev 1.4")
    );
}

#[test]
fn cpuinfo_every_hardware_line_goes_into_the_product_name() {
    let text = "processor\t: 0\nFeatures\t: fp\nHardware\t: SoC A\nHardware\t: Board B\n";
    let info = parse_cpuinfo(text, CpuArch::Arm);
    assert_eq!(info.hardware.as_deref(), Some("SoC A Board B"));
    // Not an ARM file: `Hardware` and `Model` mean nothing there.
    let x86 = parse_cpuinfo(text, CpuArch::X86);
    assert_eq!((x86.hardware, x86.board_model), (None, None));
}

#[test]
fn detect_host_names_a_raspberry_pi_5_and_lists_the_platforms() {
    let data = tempfile::tempdir().expect("tempdir");
    let fx = fixture("raspberry-pi-5");
    let mut cfg = HostProbeConfig::new(data.path());
    cfg.roots = SystemRoots {
        proc_root: fx.join("proc"),
        cgroup_root: fx.join("cgroup"),
        sys_root: fx.join("sys"),
        ..SystemRoots::default()
    };
    cfg.gpu.no_gpus = true;
    let det = HostDetector::new(cfg);
    let found = det.detect_host();
    let h = &found.host;
    // No `Hardware` line and no DMI: the board's own name (the cpuinfo `Model` line on an ARM
    // build, /proc/device-tree/model on others, which do not read ARM keys).
    assert_eq!(
        h.product_name.as_deref(),
        Some("Raspberry Pi 5 Model B Rev 1.0")
    );
    if cfg!(any(target_arch = "arm", target_arch = "aarch64")) {
        assert_eq!(h.p_vendor, "ARM");
        assert_eq!(h.p_model, "[Impl 0x41 Arch 8 Variant 0x4 Part 0xd0b Rev 1]");
        assert!(h.p_features.starts_with("fp asimd"), "{}", h.p_features);
    }
    assert_eq!(found.details.platforms, det.platforms());
    let report = detect_gpus_report(&found, &det.probe_gpus());
    assert!(
        report.contains("Product name: Raspberry Pi 5 Model B Rev 1.0\n"),
        "{report}"
    );
    assert!(
        report.contains(&format!("Platforms: {}\n", det.platforms().join(" "))),
        "{report}"
    );
}

// ---------------------------------------------------------------- cgroups

#[test]
fn cgroup_v2_nested_limits_take_the_tightest() {
    let l = read_cgroup_limits(&fixture("cgroup-v2/proc"), &fixture("cgroup-v2/cgroup"));
    assert_eq!(
        l,
        CgroupLimits {
            cpu_quota: Some(2.5),
            memory_limit: Some(8 << 30)
        }
    );
}

#[test]
fn cgroup_v1_container_paths_fall_back_to_the_mount_root() {
    let l = read_cgroup_limits(&fixture("cgroup-v1/proc"), &fixture("cgroup-v1/cgroup"));
    assert_eq!(
        l,
        CgroupLimits {
            cpu_quota: Some(1.5),
            memory_limit: Some(2 << 30)
        }
    );
}

#[test]
fn no_cgroup_file_means_no_limits() {
    let t = tempfile::tempdir().expect("tempdir");
    assert_eq!(
        read_cgroup_limits(t.path(), t.path()),
        CgroupLimits::default()
    );
}

fn fixture_roots(name: &str) -> SystemRoots {
    SystemRoots {
        proc_root: fixture(&format!("{name}/proc")),
        cgroup_root: fixture(&format!("{name}/cgroup")),
        ..SystemRoots::default()
    }
}

#[test]
fn detect_host_honours_cgroup_limits_and_reads_the_given_cpuinfo() {
    let data = tempfile::tempdir().expect("tempdir");
    let mut cfg = HostProbeConfig::new(data.path());
    cfg.roots = fixture_roots("cgroup-v2");
    let found = HostDetector::new(cfg).detect_host();
    let h = &found.host;
    assert!(
        h.p_ncpus >= 1 && h.p_ncpus <= 2,
        "quota 2.5 CPUs: {}",
        h.p_ncpus
    );
    assert_eq!(found.details.cpu_quota, Some(2.5));
    assert!(
        h.m_nbytes > 0.0 && h.m_nbytes <= (8u64 << 30) as f64,
        "{}",
        h.m_nbytes
    );
    assert_eq!(found.details.memory_limit, Some(8 << 30));
    if cfg!(any(target_arch = "x86", target_arch = "x86_64")) {
        assert_eq!(h.p_vendor, "AuthenticAMD");
        assert_eq!(h.p_model, "AMD EPYC [Family 26 Model 2 Stepping 1]");
        assert_eq!(h.m_cache, 1024.0 * 1024.0);
    }
}

#[test]
fn detect_host_on_this_machine() {
    let data = tempfile::tempdir().expect("tempdir");
    let det = HostDetector::new(HostProbeConfig::new(data.path()));
    let found = det.detect_host();
    let h = &found.host;
    assert!(found.warnings.is_empty(), "{:?}", found.warnings);
    assert!(h.p_ncpus >= 1);
    assert!(h.m_nbytes > 0.0);
    assert!(h.d_total > 0.0 && h.d_free > 0.0 && h.d_free <= h.d_total);
    assert!(h.os_name.starts_with("Linux"), "{}", h.os_name);
    assert!(h.os_version.contains('['), "{}", h.os_version);
    assert!(!h.p_vendor.is_empty() && !h.p_model.is_empty());
    assert!(h.timezone.abs() <= 14 * 3600);
    assert!(!h.domain_name.is_empty());
    let platforms = det.platforms();
    if cfg!(target_arch = "x86_64") {
        assert_eq!(platforms[0], "x86_64-pc-linux-gnu");
    }
    if cfg!(target_arch = "aarch64") {
        assert_eq!(platforms[0], "aarch64-unknown-linux-gnu");
        let arm32 = ferrite_hostinfo::os::arm32_runs();
        assert_eq!(
            platforms.get(1).map(String::as_str),
            arm32.then_some("arm-unknown-linux-gnueabihf")
        );
    }
    if cfg!(target_arch = "arm") {
        assert_eq!(platforms, ["arm-unknown-linux-gnueabihf"]);
    }
}

#[test]
fn missing_data_dir_is_measured_on_its_ancestor_and_a_bad_one_is_a_warning() {
    // Not made yet (before the first start): its disk is the one it will be made on.
    let det = HostDetector::new(HostProbeConfig::new("/nonexistent/ferrite-data"));
    let found = det.detect_host();
    assert!(found.host.d_total > 0.0, "{:?}", found.host);
    assert!(
        !found.warnings.iter().any(|w| w.contains("ferrite-data")),
        "{:?}",
        found.warnings
    );
    // Under a plain file it can never be made: a warning, not a failure.
    let file = tempfile::NamedTempFile::new().expect("temp file");
    let bad = file.path().join("ferrite-data");
    let det = HostDetector::new(HostProbeConfig::new(&bad));
    let found = det.detect_host();
    assert_eq!(found.host.d_total, 0.0);
    assert!(
        found
            .warnings
            .iter()
            .any(|w| w.contains(&bad.display().to_string())),
        "{:?}",
        found.warnings
    );
}

// ---------------------------------------------------------------- fake NVML

struct FakeLibs {
    _dir: tempfile::TempDir,
    good: PathBuf,
    failing: PathBuf,
}

/// Compiles `tests/fake_nvml/fake_nvml.c` twice: a working library and one whose
/// initialisation fails.
fn fake_libs() -> &'static FakeLibs {
    static LIBS: OnceLock<FakeLibs> = OnceLock::new();
    LIBS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_nvml/fake_nvml.c");
        let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
        let build = |out: &Path, extra: &[&str]| {
            let status = std::process::Command::new(&compiler)
                .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror"])
                .args(extra)
                .arg("-o")
                .arg(out)
                .arg(&src)
                .status()
                .expect("run the C compiler");
            assert!(status.success(), "compiling the fake NVML library failed");
        };
        let good = dir.path().join("libnvidia-ml-fake.so");
        let failing = dir.path().join("libnvidia-ml-failing.so");
        build(&good, &[]);
        build(&failing, &["-DFAKE_INIT_FAILS"]);
        FakeLibs {
            _dir: dir,
            good,
            failing,
        }
    })
}

fn probe_with(lib: &Path, gpu: GpuConfig) -> ferrite_hostinfo::GpuProbe {
    let mut cfg = HostProbeConfig::new("/tmp");
    cfg.nvml_library = Some(lib.to_path_buf());
    cfg.gpu = gpu;
    HostDetector::new(cfg).probe_gpus()
}

#[test]
fn fake_nvml_two_gpus_every_field() {
    let p = probe_with(&fake_libs().good, GpuConfig::default());
    assert_eq!(p.status, NvmlStatus::Ready);
    assert!(!p.should_retry());
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!(p.nvidia.len(), 2);

    let a = &p.nvidia[0];
    assert_eq!(a.device_num, 0);
    assert_eq!(a.name, "NVIDIA GeForce RTX 3080");
    assert_eq!(a.total_mem, 10_737_418_240);
    assert_eq!(a.available_ram, 10_200_547_328);
    assert_eq!((a.major, a.minor), (8, 6));
    assert_eq!(a.driver_version, "535.54.03");
    assert_eq!(a.drv_version, 53554);
    assert_eq!(a.cuda_version, 12020);
    assert_eq!(a.cuda_cores, Some(8704));
    assert_eq!(a.multi_processor_count, 68);
    assert_eq!(a.clock_rate_khz, 1_710_000);
    assert_eq!(a.peak_flops, 1_710_000.0 * 1000.0 * 68.0 * 128.0 * 2.0);
    assert_eq!(
        a.pci,
        PciInfo {
            bus_id: 1,
            device_id: 0,
            domain_id: 0
        }
    );
    assert_eq!(a.usage, GpuUse::Used);
    assert_eq!(a.uuid, "GPU-fa4e0000-0000-0000-0000-000000000000");

    let b = &p.nvidia[1];
    assert_eq!(b.uuid, "GPU-fa4e0001-0000-0000-0000-000000000001");
    assert_eq!(b.device_num, 1);
    assert_eq!(b.name, "NVIDIA GeForce GTX 1660");
    assert_eq!(b.total_mem, 6_442_450_944);
    assert_eq!(b.available_ram, 6_228_541_440);
    assert_eq!((b.major, b.minor), (7, 5));
    assert_eq!(b.cuda_cores, Some(1408));
    assert_eq!(b.multi_processor_count, 22);
    assert_eq!(b.clock_rate_khz, 1_785_000);
    assert_eq!(b.peak_flops, 1_785_000.0 * 1000.0 * 22.0 * 64.0 * 2.0);
    assert_eq!(
        b.pci,
        PciInfo {
            bus_id: 2,
            device_id: 0,
            domain_id: 0
        }
    );
    // Lower compute capability than the best device: not used by default.
    assert_eq!(b.usage, GpuUse::Unused);

    let c = p.coprocs.nvidia.as_ref().expect("coproc_cuda");
    assert_eq!(c.count, 1);
    assert_eq!(c.name, "NVIDIA GeForce RTX 3080");
    assert_eq!(c.available_ram, 10_200_547_328.0);
    assert!(c.have_cuda);
    assert!(!c.have_opencl);
    assert_eq!(c.peak_flops, a.peak_flops);
    assert_eq!(c.cuda_version, 12020);
    assert_eq!(c.drv_version, 53554);
    assert_eq!(c.total_global_mem, 10_737_418_240.0);
    assert_eq!(c.clock_rate, 1_710_000);
    assert_eq!((c.major, c.minor), (8, 6));
    assert_eq!(c.multi_processor_count, 68);
    assert_eq!(c.warp_size, 32);
    assert_eq!(c.max_threads_per_block, 1024);
    assert_eq!(c.max_threads_dim, [1024, 1024, 64]);
    assert_eq!(c.max_grid_size, [2_147_483_647, 65535, 65535]);
    assert_eq!(c.shared_mem_per_block, 49152.0);
    assert_eq!(c.regs_per_block, 65536);
    assert_eq!(c.total_const_mem, 65536.0);
    assert_eq!(
        c.pci_infos,
        vec![PciInfo {
            bus_id: 1,
            device_id: 0,
            domain_id: 0
        }]
    );
    assert!(p.coprocs.other.is_empty());
    assert_eq!(p.usable_count(), 1);

    let mut host = ferrite_proto::host::HostInfo::default();
    apply_gpu_probe(&mut host, &p);
    assert_eq!(host.n_usable_coprocs, 1);
    assert_eq!(host.coprocs, p.coprocs);
}

#[test]
fn fake_nvml_use_all_gpus_and_ignore() {
    let all = probe_with(
        &fake_libs().good,
        GpuConfig {
            use_all_gpus: true,
            ..GpuConfig::default()
        },
    );
    let c = all.coprocs.nvidia.as_ref().expect("coproc_cuda");
    assert_eq!(c.count, 2);
    assert_eq!(c.name, "NVIDIA GeForce RTX 3080");
    assert_eq!(c.pci_infos.len(), 2);

    let ignored = probe_with(
        &fake_libs().good,
        GpuConfig {
            ignore_nvidia_dev: vec![0],
            user_coprocs: vec![UserCoproc {
                rsc_type: "fpga".into(),
                count: 1,
                peak_flops: 5e11,
                device_nums: vec![],
            }],
            ..GpuConfig::default()
        },
    );
    assert_eq!(ignored.nvidia[0].usage, GpuUse::Ignored);
    assert_eq!(ignored.nvidia[1].usage, GpuUse::Used);
    let c = ignored.coprocs.nvidia.as_ref().expect("coproc_cuda");
    assert_eq!(
        (c.count, c.name.as_str(), c.major),
        (1, "NVIDIA GeForce GTX 1660", 7)
    );
    assert_eq!(ignored.coprocs.other.len(), 1);
    assert_eq!(ignored.usable_count(), 2);
}

#[test]
fn fake_nvml_report_lists_both_gpus() {
    let p = probe_with(&fake_libs().good, GpuConfig::default());
    let data = tempfile::tempdir().expect("tempdir");
    let found = HostDetector::new(HostProbeConfig::new(data.path())).detect_host();
    let text = detect_gpus_report(&found, &p);
    assert!(text.contains("Processor: "), "{text}");
    assert!(text.contains("Memory: "), "{text}");
    assert!(
        text.contains("CUDA: NVIDIA GPU 0: NVIDIA GeForce RTX 3080 (driver version 535.54.03, CUDA version 12.2, compute capability 8.6, 10240MB, 9728MB available, 29768 GFLOPS peak)"),
        "{text}"
    );
    assert!(
        text.contains("CUDA (not used): NVIDIA GPU 1: NVIDIA GeForce GTX 1660"),
        "{text}"
    );
}

#[test]
fn missing_nvml_library_gives_zero_gpus_and_retry() {
    let p = probe_with(
        Path::new("/nonexistent/libnvidia-ml.so.1"),
        GpuConfig::default(),
    );
    assert!(
        matches!(p.status, NvmlStatus::LibraryMissing(_)),
        "{:?}",
        p.status
    );
    assert!(p.should_retry());
    assert!(p.nvidia.is_empty());
    assert_eq!(p.coprocs.nvidia, None);
    assert_eq!(p.usable_count(), 0);
}

#[test]
fn failing_nvml_init_gives_zero_gpus_and_retry() {
    let p = probe_with(&fake_libs().failing, GpuConfig::default());
    assert!(
        matches!(p.status, NvmlStatus::InitFailed(_)),
        "{:?}",
        p.status
    );
    assert!(p.should_retry());
    assert!(p.nvidia.is_empty());
    assert_eq!(p.coprocs.nvidia, None);
}

#[test]
fn no_gpus_option_skips_nvml_entirely() {
    let p = probe_with(
        &fake_libs().good,
        GpuConfig {
            no_gpus: true,
            ..GpuConfig::default()
        },
    );
    assert_eq!(p.status, NvmlStatus::Disabled);
    assert!(!p.should_retry());
    assert!(p.nvidia.is_empty());
}

#[test]
fn nvml_library_from_environment_variable() {
    // Only this test sets the variable; every other probe passes an explicit path, which
    // takes precedence over it.
    std::env::set_var(ferrite_hostinfo::NVML_LIBRARY_ENV, &fake_libs().good);
    let p = HostDetector::new(HostProbeConfig::new("/tmp")).probe_gpus();
    std::env::remove_var(ferrite_hostinfo::NVML_LIBRARY_ENV);
    assert_eq!(p.status, NvmlStatus::Ready);
    assert_eq!(p.nvidia.len(), 2);
}

#[test]
fn system_without_driver_gives_zero_gpus() {
    // A host without the NVIDIA driver: its NVML library cannot be loaded (a path that does
    // not exist, so the test means the same on a host that has a driver).
    let mut cfg = HostProbeConfig::new("/tmp");
    cfg.nvml_library = Some(PathBuf::from("/nonexistent/driver/libnvidia-ml.so.1"));
    let p = HostDetector::new(cfg).probe_gpus();
    assert!(p.nvidia.is_empty());
    assert!(p.should_retry());
}

// ---------------------------------------------------------------- activity and power

fn touch(path: &Path, when: SystemTime) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    let f = std::fs::File::create(path).expect("create");
    f.set_times(
        std::fs::FileTimes::new()
            .set_accessed(when)
            .set_modified(when),
    )
    .expect("set times");
}

#[test]
fn idle_time_from_input_devices_and_terminals() {
    let t = tempfile::tempdir().expect("tempdir");
    let dev = t.path();
    let now = SystemTime::now();
    let probe = IdleProbe {
        dev_root: dev.to_path_buf(),
        shm_root: dev.join("shm"),
        ignore_tty: vec!["/dev/pts/7".into()],
    };
    assert_eq!(idle_time(&probe, now), None, "no devices: unknown");

    touch(&dev.join("input/event0"), now - Duration::from_secs(600));
    touch(&dev.join("input/mice"), now - Duration::from_secs(900));
    touch(&dev.join("tty1"), now - Duration::from_secs(3600));
    let idle = idle_time(&probe, now).expect("idle");
    assert_eq!(idle.as_secs(), 600);

    // Serial lines, ignored terminals and unrelated files do not count as user input.
    touch(&dev.join("ttyS0"), now - Duration::from_secs(5));
    touch(&dev.join("pts/7"), now - Duration::from_secs(5));
    touch(&dev.join("null"), now - Duration::from_secs(1));
    assert_eq!(idle_time(&probe, now).expect("idle").as_secs(), 600);

    touch(&dev.join("pts/3"), now - Duration::from_secs(30));
    assert_eq!(idle_time(&probe, now).expect("idle").as_secs(), 30);
}

fn unix(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64
}

fn write_idle_detect(shm: &Path, updated: i64, last_input: i64) {
    std::fs::create_dir_all(shm).expect("mkdir");
    let mut b = updated.to_ne_bytes().to_vec();
    b.extend_from_slice(&last_input.to_ne_bytes());
    std::fs::write(shm.join("idle_detect_shmem"), b).expect("write");
}

#[test]
fn idle_detect_helper_segment_wins_when_fresh() {
    let t = tempfile::tempdir().expect("tempdir");
    let dev = t.path();
    let shm = dev.join("shm");
    let now = SystemTime::now();
    let probe = IdleProbe {
        dev_root: dev.to_path_buf(),
        shm_root: shm.clone(),
        ignore_tty: vec![],
    };
    touch(&dev.join("input/event3"), now - Duration::from_secs(50));
    // Fresh segment: the helper saw input 1200 s ago (a Wayland session, say).
    write_idle_detect(&shm, unix(now) - 5, unix(now) - 1200);
    assert_eq!(idle_time(&probe, now).expect("idle").as_secs(), 1200);
    // Stale segment (helper stopped 2 minutes ago): fall back to devices.
    write_idle_detect(&shm, unix(now) - 120, unix(now) - 1200);
    assert_eq!(idle_time(&probe, now).expect("idle").as_secs(), 50);
    // Truncated segment: ignored.
    std::fs::write(shm.join("idle_detect_shmem"), [0u8; 9]).expect("write");
    assert_eq!(idle_time(&probe, now).expect("idle").as_secs(), 50);
}

fn supply(root: &Path, name: &str, files: &[(&str, &str)]) {
    let dir = root.join("class/power_supply").join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (f, v) in files {
        std::fs::write(dir.join(f), format!("{v}\n")).expect("write");
    }
}

#[test]
fn on_battery_from_power_supply_tree() {
    let t = tempfile::tempdir().expect("tempdir");
    let sys = t.path();
    assert!(!on_battery(sys), "no power_supply directory: a desktop");
    supply(sys, "AC", &[("type", "Mains"), ("online", "0")]);
    supply(
        sys,
        "BAT0",
        &[("type", "Battery"), ("status", "Discharging")],
    );
    supply(
        sys,
        "hidpp_battery_0",
        &[
            ("type", "Battery"),
            ("scope", "Device"),
            ("status", "Discharging"),
        ],
    );
    assert!(on_battery(sys));
    supply(sys, "AC", &[("online", "1")]);
    assert!(!on_battery(sys), "mains online");
    supply(sys, "AC", &[("online", "0")]);
    supply(sys, "BAT0", &[("status", "Charging")]);
    assert!(!on_battery(sys), "charging");
}

#[test]
fn peripheral_battery_alone_is_not_on_battery() {
    let t = tempfile::tempdir().expect("tempdir");
    supply(
        t.path(),
        "hidpp_battery_0",
        &[
            ("type", "Battery"),
            ("scope", "Device"),
            ("status", "Discharging"),
        ],
    );
    assert!(!on_battery(t.path()));
}

// ---------------------------------------------------------------- benchmarks

#[test]
#[ignore = "takes about 8 seconds; run with --ignored to see this machine's figures (the \
            cpu_vs_official bench compares them with the official client's)"]
fn benchmark_figures_for_this_machine() {
    let ncpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let r = ferrite_hostinfo::run_benchmarks(ncpus, Duration::from_secs(8));
    println!(
        "threads {} fpops {:.3e} iops {:.3e} membw {:.3e} B/s elapsed {:?}",
        r.threads, r.p_fpops, r.p_iops, r.p_membw, r.elapsed
    );
    for v in [r.p_fpops, r.p_iops, r.p_membw] {
        assert!(v.is_finite() && v > 1e7, "{r:?}");
    }
}

// ---------------------------------------------------------------- host_cpid

#[test]
fn host_cpid_from_first_real_mac_and_data_dir() {
    let t = tempfile::tempdir().expect("tempdir");
    let net = t.path().join("class/net");
    for (name, addr) in [
        ("lo", "00:00:00:00:00:00"),
        ("dummy0", "00:00:00:00:00:00"),
        ("eth0", "52:54:00:AB:CD:EF"),
        ("wlan0", "11:22:33:44:55:66"),
    ] {
        std::fs::create_dir_all(net.join(name)).expect("mkdir");
        std::fs::write(net.join(name).join("address"), format!("{addr}\n")).expect("write");
    }
    assert_eq!(
        ferrite_hostinfo::mac_address(t.path()).as_deref(),
        Some("52:54:00:ab:cd:ef")
    );
    let a = ferrite_hostinfo::generate_host_cpid(t.path(), Path::new("/var/lib/boinc"));
    let b = ferrite_hostinfo::generate_host_cpid(t.path(), Path::new("/var/lib/boinc2"));
    // MD5 of "52:54:00:ab:cd:ef/var/lib/boinc".
    assert_eq!(
        a,
        ferrite_hostinfo::host_cpid_from("52:54:00:ab:cd:ef", Path::new("/var/lib/boinc"))
    );
    assert_eq!(a.len(), 32);
    assert_ne!(a, b);
    assert_eq!(
        ferrite_hostinfo::host_cpid_from("", Path::new("")),
        "d41d8cd98f00b204e9800998ecf8427e"
    );
}

#[test]
fn host_cpid_without_mac_is_random_hex() {
    let t = tempfile::tempdir().expect("tempdir");
    let a = ferrite_hostinfo::generate_host_cpid(t.path(), Path::new("/d"));
    let b = ferrite_hostinfo::generate_host_cpid(t.path(), Path::new("/d"));
    assert_eq!(a.len(), 32);
    assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, b);
}
