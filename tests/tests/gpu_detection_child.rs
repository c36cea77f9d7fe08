//! GPU detection runs in a child process: OpenCL drivers that crash (SIGSEGV when asked for
//! their platforms), hang (never answer) or leak (touch 512 MiB) are loaded there, never in
//! `ferrited`, which keeps running, says what happened in its log, and answers GUI RPC.
//! The drivers are `ferrite-hostinfo`'s fake ICD built with `-DFAKE_CRASH`, `-DFAKE_HANG`
//! or `-DFAKE_LEAK`, found through the system's ICD loader (`OCL_ICD_VENDORS`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ferrite_e2e::{free_port, Proc};

/// Builds the fake AMD driver with `variant` (`-DFAKE_CRASH`, …) into `dir` and returns
/// the folder of its `.icd` file.
fn broken_icd(dir: &Path, variant: &str) -> PathBuf {
    let src =
        ferrite_e2e::workspace_root().join("crates/ferrite-hostinfo/tests/fake_opencl/fake_icd.c");
    let vendors = dir.join("vendors");
    fs::create_dir_all(&vendors).expect("mkdir");
    let lib = dir.join("libfakebroken.so");
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".to_owned()))
        .args(["-shared", "-fPIC", "-O1", "-DFAKE_AMD", variant, "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .expect("run the C compiler");
    assert!(status.success(), "compiling the fake ICD {variant} failed");
    fs::write(vendors.join("broken.icd"), format!("{}\n", lib.display())).expect("icd");
    vendors
}

fn loader_or_skip(test: &str) -> bool {
    let present = [
        "/usr/lib/x86_64-linux-gnu/libOpenCL.so.1",
        "/usr/lib/aarch64-linux-gnu/libOpenCL.so.1",
        "/usr/lib/libOpenCL.so.1",
    ]
    .iter()
    .any(|p| Path::new(p).exists());
    if !present {
        ferrite_e2e::skip(
            test,
            "the OpenCL ICD loader is not installed (apt-get install ocl-icd-libopencl1)",
        );
    }
    present
}

/// `ferrited` on a new data directory with only the driver in `vendors` installed.
fn start(tmp: &Path, vendors: &Path, port: u16, timeout_s: &str) -> Proc {
    let dir = tmp.join("client");
    fs::create_dir_all(&dir).expect("client dir");
    let mut cmd = Proc::ferrited_command(&dir, port, None);
    cmd.env("OCL_ICD_VENDORS", vendors)
        .env("FERRITE_NVML_LIBRARY", tmp.join("no-libnvidia-ml.so"))
        .env("FERRITE_GPU_SCAN_TIMEOUT", timeout_s);
    Proc::spawn(cmd)
}

/// The daemon is alive and answers a GUI RPC call.
fn answers(client: &mut Proc, port: u16) {
    assert!(!client.has_exited(), "{}", client.output());
    let reply = ferrite_e2e::gui_rpc(port, None, "<get_host_info/>");
    assert!(reply.contains("<host_info>"), "{reply}");
}

fn status_kb(pid: i32, field: &str) -> u64 {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("field")
}

fn maps(pid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default()
}

#[test]
fn a_driver_that_crashes_leaves_the_daemon_running_and_is_logged() {
    if !loader_or_skip("a_driver_that_crashes_leaves_the_daemon_running_and_is_logged") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let vendors = broken_icd(tmp.path(), "-DFAKE_CRASH");
    let port = free_port();
    let mut client = start(tmp.path(), &vendors, port, "60");
    client.wait_for("entering main loop", Duration::from_secs(60));
    let out = client.output();
    assert!(
        out.contains("GPU detection failed: process was terminated by signal 11"),
        "{out}"
    );
    answers(&mut client, port);
    assert!(
        !maps(client.pid()).contains("libfakebroken"),
        "the driver must not be loaded into the daemon"
    );
    client.signal(libc::SIGTERM);
    assert!(client.wait(Duration::from_secs(30)).success());
}

#[test]
fn a_driver_that_hangs_is_killed_after_the_time_limit() {
    if !loader_or_skip("a_driver_that_hangs_is_killed_after_the_time_limit") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let vendors = broken_icd(tmp.path(), "-DFAKE_HANG");
    let port = free_port();
    let mut client = start(tmp.path(), &vendors, port, "2");
    client.wait_for("entering main loop", Duration::from_secs(60));
    let out = client.output();
    assert!(
        out.contains("GPU detection failed: process did not finish in 2 s and was killed"),
        "{out}"
    );
    answers(&mut client, port);
    // The killed child is gone: no process is left in its process group or as our child.
    let children = fs::read_to_string(format!("/proc/{0}/task/{0}/children", client.pid()))
        .unwrap_or_default();
    assert!(
        children.trim().is_empty(),
        "a detection child is left: {children}"
    );
    client.signal(libc::SIGTERM);
    assert!(client.wait(Duration::from_secs(30)).success());
}

#[test]
fn a_driver_that_leaks_does_not_grow_the_daemon() {
    if !loader_or_skip("a_driver_that_leaks_does_not_grow_the_daemon") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let vendors = broken_icd(tmp.path(), "-DFAKE_LEAK");
    let port = free_port();
    let mut client = start(tmp.path(), &vendors, port, "60");
    client.wait_for("entering main loop", Duration::from_secs(60));
    // The leaking driver still answered: its two AMD GPUs were found.
    let out = client.output();
    assert!(out.contains("AMD Radeon RX 6800"), "{out}");
    answers(&mut client, port);
    // The driver touched 512 MiB in the child; the daemon's peak stays far below that.
    let hwm = status_kb(client.pid(), "VmHWM:");
    assert!(hwm < 256 << 10, "ferrited's VmHWM {hwm} kB");
    assert!(!maps(client.pid()).contains("libfakebroken"));
    client.signal(libc::SIGTERM);
    assert!(client.wait(Duration::from_secs(30)).success());
}
