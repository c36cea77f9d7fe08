//! Account managers: `boinccmd --acct_mgr attach|info|sync|detach` against `ferrited` and
//! the test account manager (`/am/` of `ferrite-testproject`), and the same replies given to
//! the official client, which must end in the same state.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use ferrite_e2e::testproject::{client_dir, http, start_client, Server, KEY};
use ferrite_e2e::{boinccmd, free_port, gui_rpc, peer_or_skip, GuiRpcSession, OfficialClient};
use ferrite_proto::acct_mgr::{password_hash, AcctMgrLoginFile, AcctMgrUrlFile};

/// Sets the test manager's reply for `login` (every login when `None`).
fn set_policy(server: &Server, login: Option<&str>, reply: &str) {
    let path = match login {
        Some(l) => format!("am/policy?login={l}"),
        None => "am/policy".to_owned(),
    };
    let r = http(&server.url, "POST", &path, reply);
    assert!(r.starts_with("policy set"), "{r}");
}

fn am_status(server: &Server) -> serde_json::Value {
    serde_json::from_str(&http(&server.url, "GET", "am/status", "")).expect("am status is JSON")
}

fn am_requests(server: &Server, login: &str) -> u64 {
    am_status(server)["requests"][login].as_u64().unwrap_or(0)
}

/// The reply attaching the test project, with `extra` elements in its `<account>` and
/// `top` elements at the top level.
fn attach_reply(server: &Server, extra: &str, top: &str) -> String {
    format!(
        "<acct_mgr_reply>\n<repeat_sec>600</repeat_sec>\n{top}\n<account>\n<url>{}</url>\n<authenticator>{KEY}</authenticator>\n{extra}\n</account>\n</acct_mgr_reply>\n",
        server.url
    )
}

/// Waits until `f()` holds, at most `limit`; panics with `what` and `log()`.
fn wait(limit: Duration, what: &str, log: impl Fn() -> String, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < limit,
            "{what}: not within {limit:?}\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `boinccmd --acct_mgr attach|sync` printed a poll that ended without an error.
fn assert_poll_ok(out: &str) {
    assert!(out.contains("polling for reply"), "{out}");
    for l in out.lines().filter(|l| l.starts_with("poll status:")) {
        assert!(l.contains("in progress"), "an error was polled: {out}");
    }
}

fn read_am_files(dir: &Path) -> (AcctMgrUrlFile, AcctMgrLoginFile) {
    let url = fs::read_to_string(dir.join("acct_mgr_url.xml")).expect("acct_mgr_url.xml");
    let login = fs::read_to_string(dir.join("acct_mgr_login.xml")).expect("acct_mgr_login.xml");
    (
        AcctMgrUrlFile::parse(&url).expect("url file").value,
        AcctMgrLoginFile::parse(&login).expect("login file").value,
    )
}

fn project_status(port: u16) -> String {
    gui_rpc(port, Some("pw"), "<get_project_status/>\n")
}

#[test]
fn boinccmd_joins_an_account_manager_that_attaches_the_project_and_runs_its_work() {
    if !ferrite_e2e::peer_or_skip(
        "boinccmd_joins_an_account_manager_that_attaches_the_project_and_runs_its_work",
        &["boinccmd"],
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "2"]);
    let am_url = format!("{}am/", server.url);
    set_policy(
        &server,
        None,
        &attach_reply(
            &server,
            "",
            "<message>Welcome</message>\n<user_keywords>\n<yes>12</yes>\n<no>7</no>\n</user_keywords>",
        ),
    );
    let dir = client_dir(tmp.path(), "");
    let port = free_port();
    let client = start_client(&dir, port, None);
    let log = || client.output();

    // A wrong password: the manager says so and nothing is stored.
    let out = boinccmd(
        port,
        Some("pw"),
        &["--acct_mgr", "attach", &am_url, "host1", "wrong"],
    );
    assert!(out.stdout.contains("poll status:"), "{}", out.stdout);
    assert!(!dir.join("acct_mgr_url.xml").exists());
    let notices = gui_rpc(
        port,
        Some("pw"),
        "<get_notices>\n<seqno>0</seqno>\n</get_notices>\n",
    );
    assert!(
        notices.contains("Message from account manager: Invalid password"),
        "{notices}"
    );

    let out = boinccmd(
        port,
        Some("pw"),
        &["--acct_mgr", "attach", &am_url, "host1", "secret"],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_poll_ok(&out.stdout);
    assert_eq!(am_requests(&server, "host1"), 1);

    // The files the official client writes, with what it writes in them.
    let (url_file, login_file) = read_am_files(&dir);
    assert_eq!(url_file.url, am_url);
    assert_eq!(url_file.name, "Ferrite test AM");
    assert!(url_file.signing_key.starts_with("1024\n"), "{url_file:?}");
    assert_eq!(login_file.login, "host1");
    assert_eq!(login_file.password_hash, password_hash("host1", "secret"));
    assert_eq!(login_file.user_keywords.yes, [12]);

    let info = boinccmd(port, Some("pw"), &["--acct_mgr", "info"]);
    assert_eq!(
        info.stdout,
        format!("Account manager info:\n   Name: Ferrite test AM\n   URL: {am_url}\n")
    );

    // The listed project is attached as the manager's, and its work runs to the end.
    let status = project_status(port);
    assert!(
        status.contains(&format!("<master_url>{}</master_url>", server.url)),
        "{status}"
    );
    assert!(status.contains("<attached_via_acct_mgr/>"), "{status}");
    server.wait_until(&client, Duration::from_secs(150), "2 reports", |s| {
        s["results_reported"] == 2
    });
    // The manager's keywords go into scheduler requests as the official client writes them.
    let esc = ferrite_proto::account::escape_project_url(&server.url);
    let req = fs::read_to_string(dir.join(format!("sched_request_{esc}.xml"))).expect("request");
    assert!(
        req.contains("<user_keywords>\n   <yes>12</yes>\n   <no>7</no>\n</user_keywords>"),
        "{req}"
    );
    // The user cannot detach it behind the manager's back.
    let r = gui_rpc(
        port,
        Some("pw"),
        &format!(
            "<project_detach>\n<project_url>{}</project_url>\n</project_detach>\n",
            server.url
        ),
    );
    assert!(r.contains("must detach using account manager"), "{r}");

    // A sync carries the manager's new settings: suspended, another share, CPU excluded.
    set_policy(
        &server,
        Some("host1"),
        &attach_reply(
            &server,
            "<suspend>1</suspend>\n<resource_share>42</resource_share>\n<no_rsc>CPU</no_rsc>",
            "<send_tasks_all/>\n<opaque>\n<fleet>7</fleet>\n</opaque>",
        ),
    );
    let out = boinccmd(port, Some("pw"), &["--acct_mgr", "sync"]);
    assert_poll_ok(&out.stdout);
    let status = project_status(port);
    assert!(status.contains("<suspended_via_gui/>"), "{status}");
    assert!(
        status.contains("<resource_share>42.000000</resource_share>"),
        "{status}"
    );
    // The next request tells the manager what it set.
    let out = boinccmd(port, Some("pw"), &["--acct_mgr", "sync"]);
    assert_poll_ok(&out.stdout);
    let last = &am_status(&server)["last"]["host1"]["projects"][0];
    assert_eq!(last["suspended_via_gui"], true, "{last}");
    assert_eq!(last["resource_share"], 42.0, "{last}");
    assert_eq!(last["account_key"], KEY, "{last}");
    // Asked for: the task list (the finished tasks are gone: an empty list), the opaque data.
    let host = &am_status(&server)["last"]["host1"];
    assert_eq!(host["results"], 0, "{host}");
    assert_eq!(host["opaque"], "<fleet>7</fleet>", "{host}");

    // Leaving the manager: its files go, the project stays and is the user's again.
    let out = boinccmd(port, Some("pw"), &["--acct_mgr", "detach"]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    wait(Duration::from_secs(10), "files deleted", log, || {
        !dir.join("acct_mgr_url.xml").exists() && !dir.join("acct_mgr_login.xml").exists()
    });
    let info = boinccmd(port, Some("pw"), &["--acct_mgr", "info"]);
    assert_eq!(info.stdout, "Account manager info:\n   Name: \n   URL: \n");
    let status = project_status(port);
    assert!(
        status.contains(&format!("<master_url>{}</master_url>", server.url)),
        "{status}"
    );
    assert!(!status.contains("<attached_via_acct_mgr/>"), "{status}");
}

/// The same manager replies to Ferrite and to the official client: both end in the same
/// state at each step.
#[test]
fn the_official_client_does_the_same_with_the_same_replies() {
    if !peer_or_skip(
        "the_official_client_does_the_same_with_the_same_replies",
        &["boinc", "boinccmd"],
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "4"]);
    let am_url = format!("{}am/", server.url);
    // A second project the manager lists with a signature that does not verify: neither
    // client may attach it.
    let forged = "<account>\n<url>http://127.0.0.2:9/forged/</url>\n<url_signature>\n0123abcd\n.\n</url_signature>\n<authenticator>k</authenticator>\n</account>";
    set_policy(&server, None, &attach_reply(&server, "", forged));

    let fdir = client_dir(tmp.path(), "");
    let fport = free_port();
    let ferrited = start_client(&fdir, fport, None);
    let odir = tmp.path().join("official");
    fs::create_dir_all(&odir).expect("mkdir");
    fs::write(odir.join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    let official = OfficialClient::start(&odir);
    let _ = official.boinccmd(&["--set_network_mode", "always"]);

    // A refused password: both polls end with the same words, and nothing is stored.
    let f = boinccmd(
        fport,
        Some("pw"),
        &["--acct_mgr", "attach", &am_url, "ferrite", "bad"],
    );
    let (_, o) = official.boinccmd(&["--acct_mgr", "attach", &am_url, "official", "bad"]);
    assert_eq!(
        f.stdout.lines().last(),
        o.lines().last(),
        "{}\n{o}",
        f.stdout
    );
    assert!(f.stdout.contains("poll status:"), "{}", f.stdout);
    assert!(!fdir.join("acct_mgr_url.xml").exists() && !odir.join("acct_mgr_url.xml").exists());

    // Attach: both store the same manager, account and key and attach the same project.
    let out = boinccmd(
        fport,
        Some("pw"),
        &["--acct_mgr", "attach", &am_url, "ferrite", "secret"],
    );
    assert_poll_ok(&out.stdout);
    let (ok, out) = official.boinccmd(&["--acct_mgr", "attach", &am_url, "official", "secret"]);
    assert!(ok, "{out}");
    assert_poll_ok(&out);
    wait(
        Duration::from_secs(30),
        "official client synced",
        || official.output(),
        || odir.join("acct_mgr_login.xml").exists(),
    );
    let (fu, fl) = read_am_files(&fdir);
    let (ou, ol) = read_am_files(&odir);
    assert_eq!(fu, ou, "acct_mgr_url.xml");
    assert_eq!(fl.password_hash, password_hash("ferrite", "secret"));
    assert_eq!(ol.password_hash, password_hash("official", "secret"));
    assert_eq!(
        (fl.no_project_notices, fl.dynamic, fl.opaque.as_str()),
        (ol.no_project_notices, ol.dynamic, ol.opaque.as_str())
    );
    let finfo = boinccmd(fport, Some("pw"), &["--acct_mgr", "info"]).stdout;
    let (_, oinfo) = official.boinccmd(&["--acct_mgr", "info"]);
    assert_eq!(finfo, oinfo);
    let same = |what: &str, check: &dyn Fn(&str) -> bool| {
        let f = project_status(fport);
        let o = official.gui_rpc("<get_project_status/>\n");
        assert!(check(&f), "{what}: Ferrite\n{f}");
        assert!(check(&o), "{what}: official client\n{o}");
    };
    let url = server.url.clone();
    same("attached as the manager's", &|s| {
        s.contains(&format!("<master_url>{url}</master_url>"))
            && s.contains("<attached_via_acct_mgr/>")
            && !s.contains("forged")
    });

    // Suspend, share and "no new tasks" through a sync.
    set_policy(
        &server,
        None,
        &attach_reply(
            &server,
            "<suspend>1</suspend>\n<resource_share>42</resource_share>\n<dont_request_more_work>1</dont_request_more_work>",
            "",
        ),
    );
    let out = boinccmd(fport, Some("pw"), &["--acct_mgr", "sync"]);
    assert_poll_ok(&out.stdout);
    let (_, out) = official.boinccmd(&["--acct_mgr", "sync"]);
    assert_poll_ok(&out);
    same("suspended with share 42 and no new tasks", &|s| {
        s.contains("<suspended_via_gui/>")
            && s.contains("<resource_share>42.000000</resource_share>")
            && s.contains("<dont_request_more_work/>")
    });

    // Resume; the share goes back to the account's.
    set_policy(
        &server,
        None,
        &attach_reply(&server, "<suspend>0</suspend>", ""),
    );
    let out = boinccmd(fport, Some("pw"), &["--acct_mgr", "sync"]);
    assert_poll_ok(&out.stdout);
    let (_, out) = official.boinccmd(&["--acct_mgr", "sync"]);
    assert_poll_ok(&out);
    same("resumed, share restored, work allowed", &|s| {
        !s.contains("<suspended_via_gui/>")
            && s.contains("<resource_share>100.000000</resource_share>")
            && !s.contains("<dont_request_more_work/>")
    });

    // Leaving: files gone, project kept, no longer the manager's.
    let _ = boinccmd(fport, Some("pw"), &["--acct_mgr", "detach"]);
    let _ = official.boinccmd(&["--acct_mgr", "detach"]);
    for d in [&fdir, &odir] {
        assert!(!d.join("acct_mgr_url.xml").exists(), "{}", d.display());
        assert!(!d.join("acct_mgr_login.xml").exists(), "{}", d.display());
    }
    same("kept, not the manager's", &|s| {
        s.contains(&format!("<master_url>{url}</master_url>"))
            && !s.contains("<attached_via_acct_mgr/>")
    });
    let finfo = boinccmd(fport, Some("pw"), &["--acct_mgr", "info"]).stdout;
    let (_, oinfo) = official.boinccmd(&["--acct_mgr", "info"]);
    assert_eq!(finfo, oinfo);
    drop(ferrited);
    official.quit();
}

/// A data directory the official client left while an account manager ran it keeps syncing
/// under Ferrite: same manager, same account, same host, on the stored schedule.
#[test]
fn a_host_taken_over_from_an_account_managed_official_client_keeps_syncing() {
    if !peer_or_skip(
        "a_host_taken_over_from_an_account_managed_official_client_keeps_syncing",
        &["boinc", "boinccmd"],
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "0"]);
    let am_url = format!("{}am/", server.url);
    let short = attach_reply(&server, "", "")
        .replace("<repeat_sec>600</repeat_sec>", "<repeat_sec>3</repeat_sec>");
    set_policy(&server, None, &short);
    let dir = tmp.path().join("host");
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(dir.join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    let official = OfficialClient::start(&dir);
    let _ = official.boinccmd(&["--set_network_mode", "always"]);
    let (ok, out) = official.boinccmd(&["--acct_mgr", "attach", &am_url, "farm1", "secret"]);
    assert!(ok, "{out}");
    assert_poll_ok(&out);
    let cpid = am_status(&server)["last"]["farm1"]["host_cpid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!cpid.is_empty());
    let (_, oinfo) = official.boinccmd(&["--acct_mgr", "info"]);
    official.quit();
    let before = am_requests(&server, "farm1");

    let port = free_port();
    let client = start_client(&dir, port, None);
    wait(
        Duration::from_secs(30),
        "a periodic sync from Ferrite",
        || client.output(),
        || am_requests(&server, "farm1") > before,
    );
    let s = am_status(&server);
    assert_eq!(
        s["last"]["farm1"]["host_cpid"],
        cpid.as_str(),
        "the same host"
    );
    assert_eq!(
        s["last"]["farm1"]["projects"][0]["attached_via_acct_mgr"], true,
        "{s}"
    );
    let finfo = boinccmd(port, Some("pw"), &["--acct_mgr", "info"]).stdout;
    assert_eq!(finfo, oinfo);
    let status = project_status(port);
    assert!(status.contains("<attached_via_acct_mgr/>"), "{status}");
    // Ferrite writes the files back in the layout the official client reads.
    let (u, l) = read_am_files(&dir);
    assert_eq!(u.url, am_url);
    assert_eq!(l.login, "farm1");
}

/// Polls `poll` until its `<error_num>` is not -204 (in progress); the last reply.
fn poll_until_done(session: &mut GuiRpcSession, poll: &str) -> String {
    let t0 = Instant::now();
    loop {
        let r = session.call(poll);
        if !r.contains("<error_num>-204</error_num>") {
            return r;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{poll}: still in progress"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The GUI RPC calls of BOINC Manager's "Use account manager" wizard on one connection
/// (project config of the URL, which says it is a manager; the manager RPC and its poll;
/// the manager's info), made to Ferrite and to the official client: the same answers.
#[test]
fn the_manager_wizard_calls_answer_as_the_official_client() {
    if !peer_or_skip(
        "the_manager_wizard_calls_answer_as_the_official_client",
        &["boinc", "boinccmd"],
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "0"]);
    let am_url = format!("{}am/", server.url);
    set_policy(&server, None, &attach_reply(&server, "", ""));
    let fdir = client_dir(tmp.path(), "");
    let fport = free_port();
    let _ferrited = start_client(&fdir, fport, None);
    let odir = tmp.path().join("official");
    fs::create_dir_all(&odir).expect("mkdir");
    fs::write(odir.join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    let official = OfficialClient::start(&odir);
    let _ = official.boinccmd(&["--set_network_mode", "always"]);

    let mut answers = Vec::new();
    for port in [fport, official.port()] {
        let mut s = GuiRpcSession::open(port, "pw");
        let r = s.call(&format!(
            "<get_project_config>\n<url>{am_url}</url>\n</get_project_config>\n"
        ));
        assert!(r.contains("<success/>"), "{r}");
        let config = poll_until_done(&mut s, "<get_project_config_poll/>\n");
        assert!(
            config.contains("<account_manager/>"),
            "port {port}: {config}"
        );
        let r = s.call(&format!(
            "<acct_mgr_rpc>\n<url>{am_url}</url>\n<name>wizard</name>\n<password>secret</password>\n</acct_mgr_rpc>\n"
        ));
        assert!(r.contains("<success/>"), "{r}");
        let poll = poll_until_done(&mut s, "<acct_mgr_rpc_poll/>\n");
        let info = s.call("<acct_mgr_info/>\n");
        answers.push((config, poll, info));
    }
    assert_eq!(answers[0], answers[1], "Ferrite, then the official client");
    assert!(
        answers[0].2.contains("<have_credentials/>"),
        "{:?}",
        answers[0]
    );
    official.quit();
}
