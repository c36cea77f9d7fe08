//! Notices as the official client makes them: the same notices as Debian's `boinc` on the
//! same data directory; project news from the RSS feed a scheduler reply names, fetched and
//! cached under `notices/`; scheduler `notice` messages as project notices; one alert at
//! most for `boinccmd --project_attach`; the project list fetched from the configured URL
//! (a bundled one before that); and no secret in any notice, message or log line.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use ferrite_e2e::testproject::{client_dir, Server, KEY};
use ferrite_e2e::{
    bin, boinccmd, copy_dir, fixtures, free_port, gui_rpc, peer_or_skip, OfficialClient, Proc,
};

/// The (category, project name) of each notice in a `get_notices` reply, in order.
fn kinds(xml: &str) -> Vec<(String, String)> {
    xml.split("<notice>")
        .skip(1)
        .map(|n| {
            let field = |tag: &str| {
                n.split(&format!("<{tag}>"))
                    .nth(1)
                    .and_then(|t| t.split(&format!("</{tag}>")).next())
                    .unwrap_or("")
                    .trim()
                    .to_owned()
            };
            (field("category"), field("project_name"))
        })
        .collect()
}

/// How many notices `boinccmd --get_notices 0` printed (one `N: (date) text` line each).
fn boinccmd_notice_count(stdout: &str) -> usize {
    stdout
        .lines()
        .filter(|l| {
            l.split_once(": (")
                .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .count()
}

/// A copy of fixture data directory `name` in `dst`; `oddities` adds what Ferrite's readers
/// warn about and the official client takes silently: an unknown option in cc_config.xml,
/// an unknown project field and a `<file_xfer>` in the state file.
fn data_dir_copy(name: &str, dst: &Path, oddities: bool) {
    copy_dir(&fixtures().join("data_dir").join(name), dst).expect("copy fixture");
    if !oddities {
        return;
    }
    let cc = dst.join("cc_config.xml");
    let text = fs::read_to_string(&cc).expect("cc_config");
    fs::write(
        &cc,
        text.replace(
            "</options>",
            "    <no_such_option>1</no_such_option>\n  </options>",
        ),
    )
    .expect("write cc_config");
    let st = dst.join("client_state.xml");
    let text = fs::read_to_string(&st).expect("state");
    let text = text
        .replacen(
            "<project>",
            "<project>\n    <some_future_field>1</some_future_field>",
            1,
        )
        .replacen(
            "</file>",
            "    <file_xfer>\n        <bytes_xferred>0</bytes_xferred>\n    </file_xfer>\n</file>",
            1,
        );
    fs::write(&st, text).expect("write state");
}

#[test]
fn get_notices_matches_the_official_client_on_real_data_dirs() {
    if !peer_or_skip(
        "get_notices_matches_the_official_client_on_real_data_dirs",
        &["boinc", "boinccmd"],
    ) {
        return;
    }
    for (name, oddities) in [
        ("01_after_attach", false),
        ("03_after_work", false),
        ("03_after_work", true),
        ("8x_layout", true),
    ] {
        let official_dir = tempfile::tempdir().expect("tempdir");
        data_dir_copy(name, official_dir.path(), oddities);
        let password = fs::read_to_string(official_dir.path().join("gui_rpc_auth.cfg"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        let official = OfficialClient::start(official_dir.path());
        // Both clients try their project (unreachable) once at start: give it the same time.
        thread::sleep(Duration::from_secs(3));
        let (ok, official_out) = official.boinccmd(&["--get_notices", "0"]);
        assert!(ok, "boinccmd against the official client failed");
        // boinccmd prints no categories: the kinds come from the raw reply.
        let official_xml = gui_rpc(
            official.port(),
            Some(&password),
            "<get_notices>\n<seqno>0</seqno>\n</get_notices>\n",
        );
        let official_log = official.quit();
        let official_count = boinccmd_notice_count(&official_out);
        assert_eq!(official_count, kinds(&official_xml).len(), "{official_xml}");

        let ours_dir = tempfile::tempdir().expect("tempdir");
        data_dir_copy(name, ours_dir.path(), oddities);
        let port = free_port();
        let d = ours_dir.path().to_str().expect("utf-8");
        let mut p = Proc::ferrited(&[
            "--dir",
            d,
            "--gui_rpc_port",
            &port.to_string(),
            "--skip_cpu_benchmarks",
            "--no_gpus",
        ]);
        p.wait_for("GUI RPC listening on TCP", Duration::from_secs(30));
        let pw = Some(password.as_str());
        let _ = boinccmd(port, pw, &["--set_run_mode", "never"]);
        let _ = boinccmd(port, pw, &["--set_network_mode", "never"]);
        thread::sleep(Duration::from_secs(3));
        let ours = boinccmd(port, pw, &["--get_notices", "0"]);
        assert_eq!(ours.code, 0, "{}", ours.stderr);
        let ours_xml = gui_rpc(
            port,
            pw,
            "<get_notices>\n<seqno>0</seqno>\n</get_notices>\n",
        );
        let _ = boinccmd(port, pw, &["--quit"]);
        let _ = p.wait(Duration::from_secs(30));

        assert_eq!(
            boinccmd_notice_count(&ours.stdout),
            official_count,
            "{name} (oddities: {oddities}): Ferrite's notices:\n{}\nthe official client's:\n{}\n\
             --- ferrited ---\n{}\n--- official ---\n{official_log}",
            ours.stdout,
            official_out,
            p.output()
        );
        assert_eq!(kinds(&ours_xml), kinds(&official_xml), "{ours_xml}");
        if oddities {
            // Ferrite logged what it kept or ignored, as lines, not as notices.
            assert!(
                p.output().contains("no_such_option") && p.output().contains("file_xfer"),
                "{}",
                p.output()
            );
        }
    }
}

/// ferrited on `dir` with GUI RPC on `port`, fetching the project list from `list_url`.
fn ferrited_env(dir: &Path, port: u16, list_url: &str, extra: &[&str]) -> Proc {
    let mut cmd = Command::new(bin("ferrited"));
    cmd.arg("--dir")
        .arg(dir)
        .args([
            "--gui_rpc_port",
            &port.to_string(),
            "--skip_cpu_benchmarks",
            "--no_gpus",
        ])
        .args(extra)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .env("FERRITE_PROJECT_LIST_URL", list_url);
    let mut p = Proc::spawn(cmd);
    p.wait_for("GUI RPC listening on TCP", Duration::from_secs(30));
    p
}

/// Polls `get_notices` until `want` holds; panics with the log after `limit`.
fn wait_notices(
    port: u16,
    pw: &str,
    p: &Proc,
    limit: Duration,
    want: impl Fn(&str) -> bool,
) -> String {
    let t0 = Instant::now();
    loop {
        let xml = gui_rpc(
            port,
            Some(pw),
            "<get_notices>\n<seqno>0</seqno>\n</get_notices>\n",
        );
        if want(&xml) {
            return xml;
        }
        assert!(
            t0.elapsed() < limit,
            "notices not as expected within {limit:?}:\n{xml}\n--- ferrited ---\n{}",
            p.output()
        );
        thread::sleep(Duration::from_millis(300));
    }
}

const GUI_PASSWORD: &str = "gui-secret-7f3a9c";
const EMAIL: &str = "volunteer@example.com";
const ACCOUNT_PASSWORD: &str = "account-secret-51d2";

#[test]
fn project_news_scheduler_notices_project_list_and_no_secret_anywhere() {
    if !ferrite_e2e::peer_or_skip(
        "project_news_scheduler_notices_project_list_and_no_secret_anywhere",
        &["boinccmd"],
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start(tmp.path(), &["--jobs", "1"]);
    let dir = client_dir(tmp.path(), "");
    fs::write(dir.join("gui_rpc_auth.cfg"), format!("{GUI_PASSWORD}\n")).expect("password");
    let port = free_port();
    let list_url = format!("{}project_list.php", server.url);
    let mut p = ferrited_env(&dir, port, &list_url, &[]);
    let pw = GUI_PASSWORD;

    // A fresh install serves the bundled list until its fetch (from the test project) lands.
    let list = gui_rpc(port, Some(pw), "<get_all_projects_list/>\n");
    assert!(list.contains("<projects>"), "{list}");
    let t0 = Instant::now();
    loop {
        let list = gui_rpc(port, Some(pw), "<get_all_projects_list/>\n");
        if list.contains("Second Test Project") {
            assert!(
                list.contains(&format!("<url>{}</url>", server.url)),
                "{list}"
            );
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the project list was not fetched:\n{list}\n{}",
            p.output()
        );
        thread::sleep(Duration::from_millis(300));
    }
    assert!(dir.join("all_projects_list.xml").exists());
    assert!(!dir.join("all_projects_list_temp.xml").exists());

    // Attach through boinccmd: at most one alert, and each one a client notice.
    let attach = boinccmd(port, Some(pw), &["--project_attach", &server.url, KEY]);
    assert_eq!(attach.code, 0, "{}", attach.stderr);
    let alerts: Vec<&str> = attach
        .stderr
        .split("Alert from client: ")
        .skip(1)
        .map(|a| a.lines().next().unwrap_or("").trim())
        .collect();
    assert!(alerts.len() <= 1, "alerts: {alerts:?}");

    // The scheduler reply names the feed; its items become project notices.
    let xml = wait_notices(port, pw, &p, Duration::from_secs(90), |x| {
        x.contains("Welcome to") && x.contains("New work available")
    });
    for a in &alerts {
        assert!(xml.contains(a), "alert {a:?} is not a notice:\n{xml}");
    }
    let news: Vec<_> = kinds(&xml)
        .into_iter()
        .filter(|(c, n)| c.is_empty() && n == "Ferrite Test Project")
        .collect();
    assert_eq!(news.len(), 2, "{xml}");
    assert!(
        xml.contains("<title>Welcome to Ferrite Test Project</title>"),
        "{xml}"
    );
    assert!(xml.contains("forum_thread.php?id=1"), "{xml}");
    let esc = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .replace([':', '/'], "_");
    assert!(dir.join("notices/feeds.xml").exists());
    assert!(dir.join(format!("notices/feeds_{esc}.xml")).exists());
    let cached = dir.join(format!("notices/{esc}_notices.rss.xml"));
    assert!(
        fs::read_to_string(&cached).is_ok_and(|t| t.contains("<rss")),
        "no cached feed at {}",
        cached.display()
    );
    let status = ferrite_e2e::testproject::status(&server.url);
    assert_eq!(status["feed_fetches"], 1, "{status}");
    assert_eq!(status["project_list_fetches"], 1, "{status}");

    // Attach-wizard web RPCs with an email and password: one to the project, one to an
    // unreachable URL whose failure is logged.
    for url in [server.url.as_str(), "http://127.0.0.1:9/"] {
        let out = boinccmd(
            port,
            Some(pw),
            &["--lookup_account", url, EMAIL, ACCOUNT_PASSWORD],
        );
        assert!(out.code == 0 || !out.stderr.is_empty() || !out.stdout.is_empty());
    }
    // The unreachable URL's failure is logged before the scan below looks for secrets.
    p.wait_for("web RPC", Duration::from_secs(30));

    // No secret in the notices, the event log or ferrited's own log.
    let passwd_hash = ferrite_proto::crypt::md5_hex(
        format!("{ACCOUNT_PASSWORD}{}", EMAIL.to_lowercase()).as_bytes(),
    );
    let notices = gui_rpc(
        port,
        Some(pw),
        "<get_notices>\n<seqno>0</seqno>\n</get_notices>\n",
    );
    let messages = gui_rpc(
        port,
        Some(pw),
        "<get_messages>\n<seqno>0</seqno>\n</get_messages>\n",
    );
    let log = p.output();
    assert!(
        log.contains("web RPC") || messages.contains("web RPC"),
        "the failed lookup was not logged, so the scan below would prove nothing:\n{log}"
    );
    for (what, text) in [
        ("notices", &notices),
        ("messages", &messages),
        ("log", &log),
    ] {
        for secret in [KEY, passwd_hash.as_str(), GUI_PASSWORD, ACCOUNT_PASSWORD] {
            assert!(
                !text.contains(secret),
                "{what} contain the secret {secret}:\n{text}"
            );
        }
    }
    let _ = boinccmd(port, Some(pw), &["--quit"]);
}

#[test]
fn a_scheduler_notice_message_is_a_project_notice_not_a_client_alert() {
    if !ferrite_e2e::peer_or_skip(
        "a_scheduler_notice_message_is_a_project_notice_not_a_client_alert",
        &["boinccmd"],
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start(tmp.path(), &["--jobs", "1"]);
    let dir = client_dir(tmp.path(), "<no_info_fetch>1</no_info_fetch>");
    let port = free_port();
    // A wrong account key: the project answers with a `notice` message.
    let p = ferrited_env(
        &dir,
        port,
        &format!("{}project_list.php", server.url),
        &[
            "--attach_project",
            &server.url,
            "fedcba9876543210fedcba9876543210",
        ],
    );
    let xml = wait_notices(port, "pw", &p, Duration::from_secs(90), |x| {
        x.contains("Invalid or missing account key")
    });
    assert_eq!(
        kinds(&xml),
        [("scheduler".to_owned(), "Ferrite Test Project".to_owned())],
        "{xml}"
    );
    let messages = gui_rpc(
        port,
        Some("pw"),
        "<get_messages>\n<seqno>0</seqno>\n</get_messages>\n",
    );
    assert!(
        messages.contains("Message from server: Invalid or missing account key"),
        "{messages}"
    );
    // The project's message is not a client alert: boinccmd shows no "Alert from client".
    let attach_like = boinccmd(port, Some("pw"), &["--get_messages", "0"]);
    assert!(!attach_like.stderr.contains("Alert from client"));
    // With no_info_fetch the project list is not fetched: the bundled one is served.
    let list = gui_rpc(port, Some("pw"), "<get_all_projects_list/>\n");
    assert!(
        list.contains("Einstein@Home") && list.contains("Rosetta@home"),
        "{list}"
    );
    let status = ferrite_e2e::testproject::status(&server.url);
    assert_eq!(status["project_list_fetches"], 0, "{status}");
    let _ = boinccmd(port, Some("pw"), &["--quit"]);
}

#[test]
fn no_info_fetch_fetches_no_project_news() {
    if !ferrite_e2e::peer_or_skip("no_info_fetch_fetches_no_project_news", &["boinccmd"]) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start(tmp.path(), &["--jobs", "1"]);
    let dir = client_dir(tmp.path(), "");
    let port = free_port();
    let p = ferrited_env(
        &dir,
        port,
        &format!("{}project_list.php", server.url),
        &["--no_info_fetch", "--attach_project", &server.url, KEY],
    );
    // The first reply names the news feed; the job's report is a second RPC, well after
    // the feed would have been fetched.
    let t0 = Instant::now();
    loop {
        let status = ferrite_e2e::testproject::status(&server.url);
        if status["scheduler_rpcs"].as_u64().unwrap_or(0) >= 2 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "no report within 300 s: {status}\n{}",
            p.output()
        );
        thread::sleep(Duration::from_millis(300));
    }
    let esc = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .replace([':', '/'], "_");
    assert!(
        dir.join(format!("notices/feeds_{esc}.xml")).exists(),
        "the reply's feeds are kept"
    );
    let status = ferrite_e2e::testproject::status(&server.url);
    assert_eq!(status["feed_fetches"], 0, "{status}");
    assert_eq!(status["project_list_fetches"], 0, "{status}");
    let _ = boinccmd(port, Some("pw"), &["--quit"]);
}
