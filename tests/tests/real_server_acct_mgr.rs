//! An account manager attaches `ferrited` to BOINC's own project server (the kit that
//! `BOINC_SERVER_KIT` names; see `ferrite_e2e::boinc_server`): the volunteer only joins the
//! manager with `boinccmd --acct_mgr attach`, and the project's jobs end VALID in the
//! server's database.

use std::time::Duration;

use ferrite_e2e::boinc_server::{BoincServer, ServerOptions};
use ferrite_e2e::testproject::{client_dir, http, start_client, Server};
use ferrite_e2e::{boinccmd, free_port, gui_rpc};

#[test]
fn an_account_manager_attaches_the_real_project_and_its_jobs_end_valid() {
    if !ferrite_e2e::peer_or_skip(
        "an_account_manager_attaches_the_real_project_and_its_jobs_end_valid",
        &["boinccmd"],
    ) {
        return;
    }
    let opts = ServerOptions {
        jobs: 2,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("real_server_acct_mgr", &opts) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tmp");
    // The test manager lives beside the loopback test project (which serves no jobs here).
    let am_host = Server::start(tmp.path(), &["--jobs", "0"]);
    let am_url = format!("{}am/", am_host.url);
    let policy = format!(
        "<acct_mgr_reply>\n<account>\n<url>{}</url>\n<authenticator>{}</authenticator>\n</account>\n</acct_mgr_reply>\n",
        server.url(),
        server.account_key()
    );
    let r = http(&am_host.url, "POST", "am/policy", &policy);
    assert!(r.starts_with("policy set"), "{r}");

    let dir = client_dir(tmp.path(), "");
    let port = free_port();
    let client = start_client(&dir, port, None);
    let out = boinccmd(
        port,
        Some("pw"),
        &["--acct_mgr", "attach", &am_url, "volunteer", "secret"],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let status = gui_rpc(port, Some("pw"), "<get_project_status/>\n");
    assert!(
        status.contains(&format!("<master_url>{}</master_url>", server.url()))
            && status.contains("<attached_via_acct_mgr/>"),
        "{status}\n--- ferrited ---\n{}",
        client.output()
    );
    server.wait_valid_with_client(
        opts.jobs,
        (Duration::from_secs(420), Duration::from_secs(10)),
        &client,
        port,
    );
}
