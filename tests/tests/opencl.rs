//! OpenCL in the host description: on a machine with PoCL (a real OpenCL platform on the
//! CPU, Debian's `pocl-opencl-icd` with the ICD loader `ocl-icd-libopencl1`), `ferrited`
//! reports the same `<opencl_cpu_prop>` as Debian's official client in its raw
//! `get_host_info` reply, and the official `boinccmd` reads that reply.

use std::fs;
use std::path::Path;
use std::time::Duration;

use ferrite_e2e::{boinccmd, free_port, gui_rpc, peer_or_skip, skip, OfficialClient, Proc};
use ferrite_proto::host::OpenclCpuProp;

const PASSWORD: &str = "opencl-test";

/// The `<opencl_cpu_prop>` blocks of a raw `get_host_info` reply.
fn cpu_props(reply: &str) -> Vec<OpenclCpuProp> {
    reply
        .split("<opencl_cpu_prop>")
        .skip(1)
        .filter_map(|rest| rest.split("</opencl_cpu_prop>").next())
        .map(|inner| {
            OpenclCpuProp::parse(&format!("<opencl_cpu_prop>{inner}</opencl_cpu_prop>"))
                .unwrap_or_else(|e| panic!("bad opencl_cpu_prop ({e}):\n{inner}"))
        })
        .collect()
}

fn pocl(props: &[OpenclCpuProp], who: &str, reply: &str) -> OpenclCpuProp {
    props
        .iter()
        .find(|p| p.platform_vendor == "The pocl project")
        .cloned()
        .unwrap_or_else(|| panic!("{who} lists no PoCL CPU platform:\n{reply}"))
}

#[test]
fn ferrite_reports_the_opencl_cpu_platform_like_the_official_client() {
    let test = "ferrite_reports_the_opencl_cpu_platform_like_the_official_client";
    if !peer_or_skip(test, &["boinc", "boinccmd"]) {
        return;
    }
    if !Path::new("/etc/OpenCL/vendors/pocl.icd").exists() {
        skip(
            test,
            "PoCL is not installed (apt-get install pocl-opencl-icd ocl-icd-libopencl1)",
        );
        return;
    }

    // The official client, detecting GPUs and OpenCL on its own data directory.
    let official_dir = tempfile::tempdir().expect("tempdir");
    fs::write(official_dir.path().join("gui_rpc_auth.cfg"), PASSWORD).expect("write");
    let client = OfficialClient::start_detecting_gpus(official_dir.path());
    let official_reply = client.gui_rpc("<get_host_info/>\n");
    let log = client.quit();
    let official = pocl(
        &cpu_props(&official_reply),
        "the official client",
        &official_reply,
    );
    assert!(log.contains("OpenCL CPU:"), "{log}");

    // Ferrite on another data directory.
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("gui_rpc_auth.cfg"), PASSWORD).expect("write");
    let port = free_port();
    let d = dir.path().to_str().expect("utf-8 path");
    let mut p = Proc::ferrited(&[
        "--dir",
        d,
        "--gui_rpc_port",
        &port.to_string(),
        "--skip_cpu_benchmarks",
    ]);
    p.wait_for("GUI RPC listening on TCP", Duration::from_secs(30));
    let reply = gui_rpc(port, Some(PASSWORD), "<get_host_info/>\n");
    let ours = pocl(&cpu_props(&reply), "ferrited", &reply);
    assert_eq!(
        ours, official,
        "ferrited:\n{reply}\nofficial:\n{official_reply}"
    );
    // Where the official client puts it: inside <host_info>, after <coprocs>.
    let at = |s: &str| {
        reply
            .find(s)
            .unwrap_or_else(|| panic!("{s} missing:\n{reply}"))
    };
    assert!(at("</coprocs>") < at("<opencl_cpu_prop>"));
    assert!(at("</opencl_cpu_prop>") < at("</host_info>"));

    // The official boinccmd reads Ferrite's reply (it prints no OpenCL fields itself).
    let out = boinccmd(port, Some(PASSWORD), &["--get_host_info"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("#CPUS:"), "{}", out.stdout);
    assert!(
        p.output().contains("OpenCL CPU: "),
        "ferrited logs the platform:\n{}",
        p.output()
    );
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(30)).success(), "{}", p.output());
}
