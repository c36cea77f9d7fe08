//! AMD and Intel GPUs end to end: `ferrited` finds fake AMD (two GPUs) and Intel (one GPU)
//! OpenCL drivers through the system's ICD loader, asks the test project for work for the
//! `ATI` and `intel_gpu` resources, and runs each job on a device of the right type, telling
//! the app its device and OpenCL index in `init_data.xml`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ferrite_e2e::testproject::{self, client_dir, set_executable, walk, Server};
use ferrite_e2e::{free_port, Proc};

/// Builds `ferrite-hostinfo`'s fake AMD and Intel ICDs into `dir` and returns the folder
/// of their `.icd` files (for `OCL_ICD_VENDORS`).
fn fake_icds(dir: &Path) -> PathBuf {
    let src =
        ferrite_e2e::workspace_root().join("crates/ferrite-hostinfo/tests/fake_opencl/fake_icd.c");
    let vendors = dir.join("vendors");
    fs::create_dir_all(&vendors).expect("mkdir");
    for (name, def) in [("amd", "-DFAKE_AMD"), ("intel", "-DFAKE_INTEL")] {
        let lib = dir.join(format!("libfake{name}.so"));
        let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".to_owned()))
            .args(["-shared", "-fPIC", "-O1", def, "-o"])
            .arg(&lib)
            .arg(&src)
            .status()
            .expect("run the C compiler");
        assert!(status.success(), "compiling the fake {name} ICD failed");
        fs::write(
            vendors.join(format!("{name}.icd")),
            format!("{}\n", lib.display()),
        )
        .expect("icd");
    }
    vendors
}

/// An app that uploads what `init_data.xml` told it about its GPU, one `name=value` a line.
fn gpu_report_app(dir: &Path) -> PathBuf {
    let path = dir.join("gpu_report.sh");
    fs::write(
        &path,
        "#!/bin/sh\n\
         for t in gpu_type gpu_device_num gpu_opencl_dev_index; do\n\
           v=$(sed -n \"s:.*<$t>\\(.*\\)</$t>.*:\\1:p\" init_data.xml)\n\
           echo \"$t=$v\" >> out\n\
         done\n\
         sleep 1\n\
         echo 0 > boinc_finish_called\nexit 0\n",
    )
    .expect("app");
    set_executable(&path);
    path
}

#[test]
fn fake_amd_and_intel_gpus_get_their_work_and_run_it_on_their_devices() {
    let tmp = tempfile::tempdir().expect("tmp");
    let vendors = fake_icds(tmp.path());
    let app = gpu_report_app(tmp.path());
    let server = Server::start_raw(
        tmp.path(),
        &tmp.path().join("server"),
        &[
            "--app",
            &format!("amdapp={},opencl_ati_101,0.2", app.display()),
            "--app",
            &format!("intelapp={},opencl_intel_gpu_102,0.2", app.display()),
            "--jobs",
            "4",
        ],
    );
    let dir = client_dir(tmp.path(), "<use_all_gpus>1</use_all_gpus>");
    let port = free_port();
    let d = dir.to_str().expect("utf-8");
    let port_s = port.to_string();
    let mut cmd = Command::new(ferrite_e2e::bin("ferrited"));
    cmd.args([
        "--dir",
        d,
        "--gui_rpc_port",
        &port_s,
        "--skip_cpu_benchmarks",
    ])
    .args(["--attach_project", &server.url, testproject::KEY])
    .env("OCL_ICD_VENDORS", &vendors)
    .env(
        "FERRITE_NVML_LIBRARY",
        tmp.path().join("no-libnvidia-ml.so"),
    )
    .env("RUST_LOG", "info")
    .env("NO_COLOR", "1");
    let mut client = Proc::spawn(cmd);
    client.wait_for("entering main loop", Duration::from_secs(30));
    testproject::nudge_until_reported(
        &server,
        &client,
        port,
        (4, Duration::from_secs(120)),
        "the AMD and Intel jobs",
        true,
    );
    let mut reports: Vec<String> = walk(&server.data.join("results"))
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| fs::read_to_string(p).unwrap_or_default())
        .collect();
    reports.sort();
    let ati: Vec<&String> = reports
        .iter()
        .filter(|r| r.contains("gpu_type=ATI"))
        .collect();
    let intel: Vec<&String> = reports
        .iter()
        .filter(|r| r.contains("gpu_type=intel_gpu"))
        .collect();
    assert_eq!(
        (ati.len(), intel.len()),
        (2, 2),
        "{reports:?}\n{}",
        client.output()
    );
    for r in &intel {
        assert!(
            r.contains("gpu_device_num=0\n") && r.contains("gpu_opencl_dev_index=0\n"),
            "{r}"
        );
    }
    for r in &ati {
        // Two AMD GPUs: device n is the platform's OpenCL device n.
        let dev = r
            .lines()
            .find_map(|l| l.strip_prefix("gpu_device_num="))
            .unwrap_or("");
        assert!(dev == "0" || dev == "1", "{r}");
        assert!(r.contains(&format!("gpu_opencl_dev_index={dev}\n")), "{r}");
    }
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
}
