//! The official BOINC client (Debian's `boinc-client`) against the `ferrite-testproject`
//! binary: attach, download the signed app, run the jobs, upload and report them.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{get_json, start_binary, Killer};

const KEY: &str = "0123456789abcdef0123456789abcdef";

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn boinccmd(port: u16, args: &[&str]) -> std::process::Output {
    Command::new("boinccmd")
        .args(["--host", &format!("127.0.0.1:{port}"), "--passwd", "pw"])
        .args(args)
        .output()
        .expect("boinccmd runs (install Debian's boinc-client)")
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
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

/// Whether `program` is a file on the PATH.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

#[test]
fn official_client_attaches_runs_uploads_and_reports() {
    if !present_or_skip(
        "official_client_attaches_runs_uploads_and_reports",
        on_path("boinc") && on_path("boinccmd"),
        "boinc, boinccmd not installed (apt-get install boinc-client)",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let app = tmp.path().join("app.sh");
    write(
        &app,
        "#!/bin/sh\n# a non-BOINC-API app: copy the input, then say it finished\n\
         echo \"hello $(cat in)\" > out\necho app done >&2\necho 0 > boinc_finish_called\nexit 0\n",
    );
    set_executable(&app);
    let input = tmp.path().join("input.txt");
    write(&input, "world\n");
    let data = tmp.path().join("data");
    let (server, url) = start_binary(&[
        "--data",
        data.to_str().expect("utf8"),
        "--app",
        &format!("demo={}", app.display()),
        "--input",
        input.to_str().expect("utf8"),
        "--jobs",
        "2",
        "--fpops-est",
        "1e9",
    ]);
    let _server = Killer(server);

    let dir = tmp.path().join("boinc");
    std::fs::create_dir_all(&dir).expect("mkdir");
    write(
        &dir.join("cc_config.xml"),
        "<cc_config>\n  <log_flags>\n    <task>1</task>\n    <file_xfer>1</file_xfer>\n    \
         <sched_ops>1</sched_ops>\n    <sched_op_debug>1</sched_op_debug>\n  </log_flags>\n  \
         <options>\n    <dont_contact_ref_site>1</dont_contact_ref_site>\n    \
         <no_info_fetch>1</no_info_fetch>\n  </options>\n</cc_config>\n",
    );
    // Run whatever the load of a shared test machine.
    write(
        &dir.join("global_prefs_override.xml"),
        "<global_preferences>\n<run_if_user_active>1</run_if_user_active>\n\
         <suspend_cpu_usage>0</suspend_cpu_usage>\n<max_ncpus_pct>100</max_ncpus_pct>\n\
         </global_preferences>\n",
    );
    write(&dir.join("gui_rpc_auth.cfg"), "pw\n");
    let port = free_port();
    let log = std::fs::File::create(tmp.path().join("boinc.log")).expect("log");
    let client: Child = Command::new("boinc")
        .args(["--dir", dir.to_str().expect("utf8")])
        .args(["--gui_rpc_port", &port.to_string()])
        .args(["--no_info_fetch", "--no_gpus"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("boinc runs (install Debian's boinc-client)");
    let mut client = Killer(client);

    // Wait for the GUI RPC port.
    let t0 = Instant::now();
    while !boinccmd(port, &["--get_cc_status"]).status.success() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "boinc did not start"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let out = boinccmd(port, &["--project_attach", &url, KEY]);
    assert!(out.status.success(), "attach: {out:?}");

    let t0 = Instant::now();
    let status = loop {
        let s = get_json(&url, "status");
        if s["results_reported"] == 2 {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(90) {
            let log = std::fs::read_to_string(tmp.path().join("boinc.log")).unwrap_or_default();
            panic!("not reported within 90 s: {s}\n--- boinc log ---\n{log}");
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(status["jobs_made"], 2);
    assert_eq!(status["results_sent"], 2);
    assert_eq!(status["uploads_received"], 2);
    assert_eq!(status["duplicate_reports"], 0);
    assert_eq!(
        status["hosts"], 1,
        "one host record: hostid kept by the client"
    );
    for r in status["results"].as_array().expect("results") {
        assert_eq!(r["exit_status"], 0, "{r}");
        let name = r["name"].as_str().expect("name");
        let out = data.join("results").join(name).join(format!("{name}_out"));
        let text = std::fs::read_to_string(&out).expect("output stored per result");
        assert_eq!(text, "hello world\n");
    }
    let log = std::fs::read_to_string(tmp.path().join("boinc.log")).unwrap_or_default();
    assert!(
        !log.contains("signature"),
        "the client accepted the signed app without complaint:\n{log}"
    );

    let _ = boinccmd(port, &["--quit"]);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(_)) = client.0.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn set_executable(p: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}
