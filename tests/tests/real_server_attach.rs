//! Attaching to BOINC's own project server (the kit that `BOINC_SERVER_KIT` names; see
//! `ferrite_e2e::boinc_server`) as a volunteer without an account key does: `ferrite attach`
//! with an e-mail address and password (the project's `lookup_account` web RPC), and with
//! `--create` (its `create_account`), each through the client's GUI RPC as BOINC Manager
//! does it. The server's database is the judge: the accounts it holds, the keys it issued,
//! and the results it received from each.

use std::path::Path;
use std::time::{Duration, Instant};

use ferrite_e2e::boinc_server::{BoincServer, ServerOptions};
use ferrite_e2e::{boinccmd, ferrite_bounded, free_port, gui_rpc, CmdOutput, Proc};

/// How long one two-second job may take from attach to VALID on a loaded machine.
const JOB_LIMIT: Duration = Duration::from_secs(300);

/// `ferrited` on a fresh data directory, attached to nothing, with GUI RPC on `port`
/// (password `pw`).
fn fresh_client(dir: &Path, port: u16) -> Proc {
    std::fs::create_dir_all(dir).expect("mkdir");
    std::fs::write(dir.join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    let port = port.to_string();
    let mut p = Proc::ferrited(&[
        "--dir",
        dir.to_str().expect("utf-8"),
        "--gui_rpc_port",
        &port,
        "--no_gpus",
    ]);
    p.wait_for("GUI RPC listening on TCP", Duration::from_secs(60));
    p
}

/// `ferrite attach URL args…` against the client on `port`.
fn ferrite_attach(port: u16, url: &str, args: &[&str]) -> CmdOutput {
    let cwd = tempfile::tempdir().expect("tempdir");
    let host = format!("127.0.0.1:{port}");
    let mut all = vec!["--host", &host, "--passwd", "pw", "attach", url];
    all.extend_from_slice(args);
    ferrite_bounded(cwd.path(), &all, Duration::from_secs(120))
}

/// Results of the account with `email` that the server holds as over, successful and valid.
fn valid_results_of(server: &BoincServer, email: &str) -> u32 {
    server
        .query(&format!(
            "select count(*) from result r join host h on r.hostid = h.id \
             join user u on h.userid = u.id where u.email_addr = '{email}' \
             and r.server_state = 5 and r.outcome = 1 and r.validate_state = 1"
        ))
        .first()
        .and_then(|r| r.first())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Waits until the account with `email` has a valid result; every 30 s without one the
/// volunteer presses "Update".
fn wait_for_a_valid_result(server: &BoincServer, client: &Proc, port: u16, email: &str) {
    let mut pressed = Instant::now();
    server.wait_until(
        &format!("a valid result from {email}"),
        JOB_LIMIT,
        |s| {
            if pressed.elapsed() > Duration::from_secs(30) {
                let _ = boinccmd(port, Some("pw"), &["--project", s.url(), "update"]);
                pressed = Instant::now();
            }
            valid_results_of(s, email) >= 1
        },
        || format!("--- ferrited ---\n{}", client.output()),
    );
}

/// The account key the client stored for `url` in `dir`.
fn stored_key(dir: &Path, url: &str) -> String {
    let name = ferrite_proto::account::account_file_name(url);
    let text = std::fs::read_to_string(dir.join(&name)).expect("account file");
    ferrite_proto::account::AccountFile::parse(&text, &name)
        .expect("account file parses")
        .value
        .authenticator
}

/// One value of the first `<project>` of a `get_project_status` reply.
fn project_value(status: &str, tag: &str) -> f64 {
    let open = format!("<{tag}>");
    status
        .find(&open)
        .map(|i| &status[i + open.len()..])
        .and_then(|v| v.split('<').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no <{tag}> in {status}"))
}

#[test]
fn attach_by_email_and_password_and_by_creating_an_account() {
    if !ferrite_e2e::peer_or_skip(
        "attach_by_email_and_password_and_by_creating_an_account",
        &["boinccmd"],
    ) {
        return;
    }
    let test = "attach_by_email_and_password_and_by_creating_an_account";
    let opts = ServerOptions {
        jobs: 2,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up(test, &opts) else {
        return;
    };
    let url = server.url().to_owned();
    let tmp = tempfile::tempdir().expect("tempdir");

    // The kit's account, by e-mail address and password.
    let email = server.var("BOINC_EMAIL").to_owned();
    let port = free_port();
    let dir = tmp.path().join("lookup");
    let client = fresh_client(&dir, port);
    let out = ferrite_attach(
        port,
        &url,
        &[
            "--email",
            &email,
            "--password",
            server.var("BOINC_PASSWORD"),
        ],
    );
    assert_eq!(out.code, 0, "{out:?}\n{}", client.output());
    assert_eq!(stored_key(&dir, &url), server.account_key());
    wait_for_a_valid_result(&server, &client, port, &email);
    // The project is attached under the name its configuration gives, and its counters
    // grew as the official client's do.
    let status = gui_rpc(port, Some("pw"), "<get_project_status/>\n");
    assert!(
        status.contains("<project_name>Test@Kit</project_name>"),
        "{status}"
    );
    assert!(project_value(&status, "njobs_success") >= 1.0, "{status}");
    assert_eq!(project_value(&status, "njobs_error"), 0.0, "{status}");
    assert!(project_value(&status, "elapsed_time") > 0.0, "{status}");
    assert!(project_value(&status, "disk_usage") > 0.0, "{status}");
    assert!(
        !client.output().contains("REPLACE WITH PROJECT NAME"),
        "{}",
        client.output()
    );

    // A wrong password is refused with the project's error, and nothing is attached.
    let port2 = free_port();
    let dir2 = tmp.path().join("create");
    let client2 = fresh_client(&dir2, port2);
    let wrong = ferrite_attach(port2, &url, &["--email", &email, "--password", "wrong-pw"]);
    assert_ne!(wrong.code, 0, "{wrong:?}");
    assert!(wrong.stderr.contains("-206"), "{wrong:?}");
    let projects = gui_rpc(port2, Some("pw"), "<get_project_status/>\n");
    assert!(!projects.contains("<master_url>"), "{projects}");

    // A new account, created through the client, then attached and given work. The first
    // client stops first: still attached and asking for work, it could take the new jobs.
    drop(client);
    server.add_jobs(2);
    let new_email = "newcomer@example.invalid";
    let out = ferrite_attach(
        port2,
        &url,
        &[
            "--email",
            new_email,
            "--password",
            "newcomer-pw",
            "--create",
            "--user-name",
            "Newcomer",
        ],
    );
    assert_eq!(out.code, 0, "{out:?}\n{}", client2.output());
    let users = server.query(&format!(
        "select name, authenticator, passwd_hash from user where email_addr = '{new_email}'"
    ));
    assert_eq!(users.len(), 1, "{users:?}");
    assert_eq!(users[0][0], "Newcomer");
    assert_eq!(
        users[0][1],
        stored_key(&dir2, &url),
        "the key the server issued"
    );
    wait_for_a_valid_result(&server, &client2, port2, new_email);
    // The address is taken now: creating it again with another password is refused.
    let again = ferrite_attach(
        port2,
        &url,
        &[
            "--email",
            new_email,
            "--password",
            "other-pw",
            "--create",
            "--user-name",
            "N",
        ],
    );
    assert_ne!(again.code, 0, "{again:?}");
    assert!(again.stderr.contains("creating the account"), "{again:?}");
    drop(client2);
}
