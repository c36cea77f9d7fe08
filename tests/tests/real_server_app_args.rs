//! A job's command line from BOINC's own project server (the kit, see
//! `ferrite_e2e::boinc_server`) as the stock app's running process sees it: quoted arguments
//! whole, as the official client passes them.

use std::fs;
use std::path::Path;
use std::time::Duration;

use ferrite_e2e::boinc_server::{BoincServer, ServerOptions};
use ferrite_e2e::inspect::{slot_processes, wait_until};
use ferrite_e2e::{free_port, Proc};

/// The arguments (after the program) of the `upper_case` app running in a slot of `dir`.
fn app_args(dir: &Path) -> Option<Vec<String>> {
    slot_processes(dir).into_iter().find_map(|(pid, _, _)| {
        let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let mut argv: Vec<String> = raw
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if argv.last().is_some_and(String::is_empty) {
            argv.pop();
        }
        argv.first()?
            .contains("upper_case")
            .then(|| argv[1..].to_vec())
    })
}

#[test]
fn the_jobs_command_line_reaches_the_app_with_quoted_arguments_whole() {
    let opts = ServerOptions {
        jobs: 0,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("app_args", &opts) else {
        return;
    };
    server.add_job_with_command_line(
        "quoted_args",
        // (BOINC's create_work cannot store a single quote.)
        "-cpu_time 120 \"two words\"  \"and three  more\"",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let client_dir = dir.path().join("client");
    fs::create_dir_all(&client_dir).expect("mkdir");
    let port = free_port().to_string();
    let mut client = Proc::ferrited(&[
        "--dir",
        client_dir.to_str().expect("utf-8"),
        "--gui_rpc_port",
        &port,
        "--skip_cpu_benchmarks",
        "--attach_project",
        server.url(),
        server.account_key(),
    ]);
    client.wait_for("entering main loop", Duration::from_secs(60));
    let mut args = None;
    wait_until("the app runs in a slot", Duration::from_secs(180), || {
        args = app_args(&client_dir);
        args.is_some()
    });
    assert_eq!(
        args.unwrap_or_default(),
        ["-cpu_time", "120", "two words", "and three  more"],
        "{}",
        client.output()
    );
}
