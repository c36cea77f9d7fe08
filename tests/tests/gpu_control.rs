//! Per-GPU control for every project (Ferrite only), end to end with the fake NVML library's
//! two NVIDIA GPUs: GPU 1, excluded by its UUID in `ferrite_gpu_control.xml`, runs nothing
//! while GPU 0 runs every GPU job; the CPU, set to finish then stop on the command line,
//! is asked for no work, and `ferrite explain` says why.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferrite_e2e::testproject::{self, app_script, client_dir, set_executable, walk, Server};
use ferrite_e2e::{free_port, gui_rpc, Proc};

/// An app that uploads the device `init_data.xml` gave it.
fn gpu_report_app(dir: &Path) -> PathBuf {
    let path = dir.join("gpu_report.sh");
    fs::write(
        &path,
        "#!/bin/sh\n\
         v=$(sed -n 's:.*<gpu_device_num>\\(.*\\)</gpu_device_num>.*:\\1:p' init_data.xml)\n\
         echo \"gpu_device_num=$v\" > out\nsleep 1\n\
         echo 0 > boinc_finish_called\nexit 0\n",
    )
    .expect("app");
    set_executable(&path);
    path
}

#[test]
fn an_excluded_gpu_runs_nothing_and_a_stopped_cpu_gets_no_work() {
    let tmp = tempfile::tempdir().expect("tmp");
    let nvml = ferrite_e2e::fake_nvml(tmp.path());
    let gpu_app = gpu_report_app(tmp.path());
    let cpu_app = app_script(tmp.path(), "cpuapp", "cpu", "");
    let server = Server::start_raw(
        tmp.path(),
        &tmp.path().join("server"),
        &[
            "--app",
            &format!("gpuapp={},cuda,0.2", gpu_app.display()),
            "--app",
            &format!("cpuapp={}", cpu_app.display()),
            "--jobs",
            "6",
        ],
    );
    let dir = client_dir(tmp.path(), "<use_all_gpus>1</use_all_gpus>");
    fs::write(
        dir.join("ferrite_gpu_control.xml"),
        "<ferrite_gpu_control>\n\
         <exclude_gpu><uuid>GPU-fa4e0001-0000-0000-0000-000000000001</uuid></exclude_gpu>\n\
         </ferrite_gpu_control>\n",
    )
    .expect("control file");
    let port = free_port();
    let mut cmd = Proc::ferrited_command(&dir, port, None);
    cmd.args(["--finish_then_stop", "CPU"])
        .args(["--attach_project", &server.url, testproject::KEY])
        .env("FERRITE_NVML_LIBRARY", &nvml);
    let mut client = Proc::spawn(cmd);
    client.wait_for("entering main loop", Duration::from_secs(60));
    assert!(
        client.output().contains(
            "GPU control: NVIDIA 1 (GPU-fa4e0001-0000-0000-0000-000000000001) is not used by \
             any project"
        ),
        "{}",
        client.output()
    );
    // The three GPU jobs come and run, all on GPU 0.
    let status = testproject::nudge_until_reported(
        &server,
        &client,
        port,
        (3, Duration::from_secs(120)),
        "the GPU jobs",
        true,
    );
    let outputs: Vec<String> = walk(&server.data.join("results"))
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| fs::read_to_string(p).unwrap_or_default())
        .collect();
    assert_eq!(
        outputs,
        vec!["gpu_device_num=0\n".to_owned(); 3],
        "{}",
        client.output()
    );
    // No CPU job was ever sent: the CPU was asked for nothing.
    let sent_cpu = status["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["name"].as_str().is_some_and(|n| n.starts_with("cpuapp")))
        .filter(|r| r["status"].as_str() != Some("Unsent"))
        .count();
    assert_eq!(sent_cpu, 0, "{status}");
    let explain = gui_rpc(port, Some("pw"), "<ferrite_explain/>\n");
    let cpu_block = explain
        .split("<fetch>")
        .find(|b| b.contains("<resource>CPU</resource>"))
        .unwrap_or("");
    assert!(cpu_block.contains("FinishThenStop"), "{explain}");
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
}
