//! Ferrite against BOINC's own project server (BOINC server 8.3, the kit that
//! `BOINC_SERVER_KIT` names; see `ferrite_e2e::boinc_server`). The server is the judge: every
//! test reads its database and logs, not Ferrite's view of what happened.

use std::path::Path;
use std::time::{Duration, Instant};

use ferrite_e2e::boinc_server::{BoincServer, ServerOptions};
use ferrite_e2e::{free_port, Proc};

/// How long 20 two-second jobs may take on a loaded 2-core machine, benchmarks and
/// downloads included.
const JOBS_LIMIT: Duration = Duration::from_secs(420);

/// `ferrited` on a fresh data directory `dir`, attached from the command line as a new
/// volunteer would, with GUI RPC on `port` (password `pw`).
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
        "--attach_project",
        server.url(),
        server.account_key(),
    ]);
    p.wait_for("entering main loop", Duration::from_secs(60));
    p
}

/// Waits until `n` results are valid (pressing "Update" after 10 s without progress) and
/// their workunits assimilated.
fn run_until_valid(server: &BoincServer, client: &Proc, port: u16, n: u32) {
    let t0 = Instant::now();
    let context = || format!("--- ferrited ---\n{}", client.output());
    server.wait_valid_with_client(n, (JOBS_LIMIT, Duration::from_secs(10)), client, port);
    server.wait_until(
        &format!("{n} workunits assimilated"),
        Duration::from_secs(60),
        |s| s.assimilated_workunits() >= n,
        context,
    );
    eprintln!(
        "{n} results valid after {:.0} s",
        t0.elapsed().as_secs_f64()
    );
}

/// No result of the server failed: each is over and valid, or not yet sent.
fn assert_no_failed_result(server: &BoincServer, client: &Proc) {
    let bad = server.query(
        "select name, server_state, outcome, validate_state, exit_status from result \
         where outcome <> 0 and not (outcome = 1 and validate_state = 1)",
    );
    assert!(
        bad.is_empty(),
        "results failed on the server: {bad:?}\n--- ferrited ---\n{}",
        client.output()
    );
}

fn stock_jobs_run_to_valid(test: &str, upload_certs: bool) {
    let opts = ServerOptions {
        upload_certs,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up(test, &opts) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let client = ferrited_attached(&dir.path().join("client"), port, &server);
    run_until_valid(&server, &client, port, opts.jobs);
    assert_no_failed_result(&server, &client);
    // The kit's BOINC-API app ran confined (Landlock) where the kernel has it.
    ferrite_e2e::assert_apps_ran_confined(&client.output());

    // The server saw Ferrite's protocol version, never 0.0.0.
    let log = server.scheduler_log();
    let ours = ferrite_proto::version::PROTOCOL_VERSION.to_string();
    assert!(
        log.contains(&format!("] client {ours}")),
        "the scheduler log names no client {ours}:\n{log}"
    );
    assert!(!log.contains("client 0.0.0"), "{log}");
    // Every upload was accepted by the handler.
    let fuh = server.log("file_upload_handler.log");
    assert!(!fuh.contains("[CRITICAL]"), "{fuh}");
}

#[test]
fn stock_project_jobs_run_to_valid_from_a_fresh_data_dir() {
    if !ferrite_e2e::peer_or_skip(
        "stock_project_jobs_run_to_valid_from_a_fresh_data_dir",
        &["boinccmd"],
    ) {
        return;
    }
    stock_jobs_run_to_valid(
        "stock_project_jobs_run_to_valid_from_a_fresh_data_dir",
        false,
    );
}

#[test]
fn jobs_with_upload_certificates_run_to_valid() {
    if !ferrite_e2e::peer_or_skip("jobs_with_upload_certificates_run_to_valid", &["boinccmd"]) {
        return;
    }
    stock_jobs_run_to_valid("jobs_with_upload_certificates_run_to_valid", true);
}
