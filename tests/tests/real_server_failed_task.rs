//! A failed task as BOINC's own project server (the kit, see `ferrite_e2e::boinc_server`)
//! records it: the `result.stderr_out` column holds what the official client puts there, the
//! client version, then in CDATA the `<message>` line of the failure and the app's
//! `<stderr_txt>`.

use std::path::Path;
use std::time::Duration;

use ferrite_e2e::boinc_server::{BoincServer, ServerOptions};
use ferrite_e2e::{boinccmd, free_port, Proc};

const LIMIT: Duration = Duration::from_secs(300);

/// `ferrited` on a fresh data directory `dir`, attached from the command line, with GUI RPC
/// on `port` (password `pw`).
fn ferrited_attached(dir: &Path, port: u16, server: &BoincServer) -> Proc {
    std::fs::create_dir_all(dir).expect("mkdir");
    std::fs::write(dir.join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    let d = dir.to_str().expect("utf-8");
    let port = port.to_string();
    let mut p = Proc::ferrited(&[
        "--dir",
        d,
        "--gui_rpc_port",
        &port,
        "--skip_cpu_benchmarks",
        "--attach_project",
        server.url(),
        server.account_key(),
    ]);
    p.wait_for("entering main loop", Duration::from_secs(60));
    p
}

/// Text from MariaDB's `hex()`.
fn unhex(s: &str) -> String {
    let bytes: Vec<u8> = (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn a_failed_task_reaches_the_server_with_the_official_message() {
    if !ferrite_e2e::peer_or_skip(
        "a_failed_task_reaches_the_server_with_the_official_message",
        &["boinccmd"],
    ) {
        return;
    }
    let opts = ServerOptions {
        jobs: 0,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("failed_task_message", &opts) else {
        return;
    };
    // One job of the stock app told to exit(-10) part way (its `-early_exit` option).
    let name = server.add_job_with_command_line("early_exit_job", "-cpu_time 1 -early_exit");
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let client = ferrited_attached(&dir.path().join("client"), port, &server);
    let over = |s: &BoincServer| {
        s.query(&format!(
            "select exit_status, hex(stderr_out) from result \
             where name like '{name}%' and server_state = 5 and outcome = 3"
        ))
    };
    let mut last_update = std::time::Instant::now();
    server.wait_until(
        "the failed result to be reported",
        LIMIT,
        |s| {
            if last_update.elapsed() > Duration::from_secs(10) {
                let _ = boinccmd(port, Some("pw"), &["--project", s.url(), "update"]);
                last_update = std::time::Instant::now();
            }
            !over(s).is_empty()
        },
        || {
            format!(
                "{}\n--- ferrited ---\n{}",
                server.scheduler_log(),
                client.output()
            )
        },
    );
    let row = over(&server).remove(0);
    // exit(-10): status 246.
    assert_eq!(row[0], "246", "{row:?}");
    let stderr_out = unhex(&row[1]);
    let version = ferrite_proto::version::PROTOCOL_VERSION.to_string();
    assert!(
        stderr_out.contains(&format!(
            "<core_client_version>{version}</core_client_version>\n<![CDATA[\n<message>\n\
             process exited with code 246 (0xf6, -10)</message>\n<stderr_txt>\n"
        )),
        "{stderr_out}"
    );
    assert!(stderr_out.contains("</stderr_txt>\n]]>"), "{stderr_out}");
}
