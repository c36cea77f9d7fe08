//! Ferrite's scheduler requests beside the official client's, on the same real BOINC server
//! and the same host: the server keeps every request it gets (`<debug_req_reply_dir>`), and
//! the two clients' first request after attaching and first request reporting a result are
//! compared element by element. Every element one sends and the other does not must be listed
//! in docs/migrate.md ("What a project server sees"), with the reason; a listed difference
//! that no longer occurs fails the test too, so the list stays true.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferrite_e2e::boinc_server::{BoincServer, ServerOptions};
use ferrite_e2e::{boinccmd, free_port, peer_or_skip, OfficialClient, Proc};

/// Leaf paths below `<scheduler_request>` (`host_info/p_fpops`) with their first value.
/// GPU and OpenCL descriptions depend on the host's devices and are compared as one element.
fn leaves(xml: &str) -> BTreeMap<String, String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack: Vec<String> = Vec::new();
    let mut has_child: Vec<bool> = Vec::new();
    let mut text = String::new();
    let mut out = BTreeMap::new();
    let collapse = |stack: &[String]| -> Option<String> {
        let path = stack.get(1..)?.join("/");
        for deep in ["host_info/opencl_cpu_prop", "coprocs", "code_sign_key"] {
            if path.starts_with(deep) && path.len() > deep.len() {
                return None;
            }
        }
        Some(path)
    };
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                if let Some(h) = has_child.last_mut() {
                    *h = true;
                }
                stack.push(String::from_utf8_lossy(e.name().as_ref()).into_owned());
                has_child.push(false);
                text.clear();
            }
            Ok(Event::Empty(e)) => {
                if let Some(h) = has_child.last_mut() {
                    *h = true;
                }
                stack.push(String::from_utf8_lossy(e.name().as_ref()).into_owned());
                if let Some(p) = collapse(&stack) {
                    out.entry(p).or_insert_with(String::new);
                }
                stack.pop();
            }
            Ok(Event::Text(t)) => text.push_str(&String::from_utf8_lossy(&t)),
            Ok(Event::CData(t)) => text.push_str(&String::from_utf8_lossy(&t)),
            Ok(Event::End(_)) => {
                let leaf = !has_child.pop().unwrap_or(false);
                if leaf || stack.len() == 2 {
                    if let Some(p) = collapse(&stack) {
                        let v = if leaf {
                            text.trim().to_owned()
                        } else {
                            String::new()
                        };
                        out.entry(p).or_insert(v);
                    }
                }
                stack.pop();
                text.clear();
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("unreadable request: {e}\n{xml}"),
        }
    }
    out
}

/// The requests kept by the server, in arrival order, for the client of major version `major`.
fn requests_of(dir: &Path, major: &str) -> Vec<String> {
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with("_sched_request.xml"))
                .filter_map(|p| Some((fs::metadata(&p).ok()?.modified().ok()?, p)))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let tag = format!("<core_client_major_version>{major}</core_client_major_version>");
    files
        .into_iter()
        .filter_map(|(_, p)| fs::read_to_string(p).ok())
        .filter(|t| t.contains(&tag))
        .collect()
}

/// The first request after attaching (host id 0) and the first that reports a result whose
/// output was uploaded.
fn attach_and_report(reqs: &[String]) -> Option<(String, String)> {
    let attach = reqs.iter().find(|r| r.contains("<hostid>0</hostid>"))?;
    let report = reqs
        .iter()
        .find(|r| r.contains("<result>") && r.contains("<md5_cksum>"))?;
    Some((attach.clone(), report.clone()))
}

/// Presses "Update" every 15 s until `done`, at most `limit`.
fn nudge_until(port: u16, url: &str, limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    let mut last = Instant::now();
    while !done() {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        if last.elapsed() > Duration::from_secs(15) {
            let _ = boinccmd(port, Some("pw"), &["--project", url, "update"]);
            last = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The same preferences for both clients: work whatever the machine's load.
fn client_dir(dir: &Path) {
    fs::create_dir_all(dir).expect("mkdir");
    fs::write(dir.join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    fs::write(
        dir.join("global_prefs_override.xml"),
        "<global_preferences>\n<run_if_user_active>1</run_if_user_active>\n\
         <suspend_cpu_usage>0</suspend_cpu_usage>\n</global_preferences>\n",
    )
    .expect("prefs");
}

/// One documented difference: the element, and which client sends it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Difference {
    request: String,
    element: String,
    sent_by: String,
}

/// The table in docs/migrate.md: rows `| request | element | sent by | why |`.
fn documented() -> (BTreeSet<Difference>, BTreeSet<Difference>) {
    let text = fs::read_to_string(ferrite_e2e::workspace_root().join("docs/migrate.md"))
        .expect("docs/migrate.md");
    let section = text
        .split("## What a project server sees")
        .nth(1)
        .expect("docs/migrate.md has a section 'What a project server sees'");
    let section = section.split("\n## ").next().unwrap_or(section);
    let (mut all, mut host_dependent) = (BTreeSet::new(), BTreeSet::new());
    for line in section.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[1].starts_with('`') {
            continue;
        }
        let d = Difference {
            request: cells[0].to_owned(),
            element: cells[1].trim_matches('`').to_owned(),
            sent_by: cells[2].to_owned(),
        };
        if cells[3].contains("depends on the host") {
            host_dependent.insert(d.clone());
        }
        all.insert(d);
    }
    (all, host_dependent)
}

fn differences(
    request: &str,
    ours: &BTreeMap<String, String>,
    official: &BTreeMap<String, String>,
) -> BTreeSet<Difference> {
    let mut out = BTreeSet::new();
    for (side, a, b) in [("official", official, ours), ("Ferrite", ours, official)] {
        for k in a.keys().filter(|k| !b.contains_key(*k)) {
            out.insert(Difference {
                request: request.to_owned(),
                element: k.clone(),
                sent_by: side.to_owned(),
            });
        }
    }
    out
}

#[test]
fn scheduler_requests_match_the_official_clients() {
    let test = "scheduler_requests_match_the_official_clients";
    if !peer_or_skip(test, &["boinc", "boinccmd"]) {
        return;
    }
    let opts = ServerOptions {
        jobs: 4,
        // Long enough for a few samples of the app's memory.
        cpu_time: 3,
        upload_certs: false,
    };
    let Some(server) = BoincServer::up(test, &opts) else {
        return;
    };
    let kept = server.keep_scheduler_requests();
    let tmp = tempfile::tempdir().expect("tempdir");

    // The official client first.
    let off_dir = tmp.path().join("official");
    client_dir(&off_dir);
    let official = OfficialClient::start(&off_dir);
    let _ = official.boinccmd(&["--set_run_mode", "auto"]);
    let _ = official.boinccmd(&["--set_network_mode", "auto"]);
    let (ok, out) = official.boinccmd(&["--project_attach", server.url(), server.account_key()]);
    assert!(ok, "the official client did not attach: {out}");
    let off_port = official.port();
    nudge_until(
        off_port,
        server.url(),
        Duration::from_secs(300),
        "the official client's report",
        || attach_and_report(&requests_of(&kept, "7")).is_some(),
    );
    let official_out = official.quit();

    // Then Ferrite, on the same host, with the same preferences.
    server.add_jobs(4);
    let dir = tmp.path().join("ferrite");
    client_dir(&dir);
    let port = free_port();
    let mut client = Proc::ferrited(&[
        "--dir",
        dir.to_str().expect("utf-8"),
        "--gui_rpc_port",
        &port.to_string(),
        "--attach_project",
        server.url(),
        server.account_key(),
    ]);
    client.wait_for("entering main loop", Duration::from_secs(60));
    let major = ferrite_proto::version::PROTOCOL_VERSION.major.to_string();
    nudge_until(
        port,
        server.url(),
        Duration::from_secs(300),
        "Ferrite's report",
        || attach_and_report(&requests_of(&kept, &major)).is_some(),
    );
    drop(client);

    let (off_attach, off_report) = attach_and_report(&requests_of(&kept, "7")).expect("official");
    let (our_attach, our_report) = attach_and_report(&requests_of(&kept, &major)).expect("ours");
    // FERRITE_KEEP_REQUESTS=DIR keeps the four compared requests, to read them.
    if let Some(keep) = std::env::var_os("FERRITE_KEEP_REQUESTS") {
        let keep = PathBuf::from(keep);
        let _ = fs::create_dir_all(&keep);
        for (name, text) in [
            ("official_attach.xml", &off_attach),
            ("official_report.xml", &off_report),
            ("ferrite_attach.xml", &our_attach),
            ("ferrite_report.xml", &our_report),
        ] {
            let _ = fs::write(keep.join(name), text);
        }
    }
    let (oa, orr, fa, fr) = (
        leaves(&off_attach),
        leaves(&off_report),
        leaves(&our_attach),
        leaves(&our_report),
    );

    // Elements one client sends and the other does not: each documented, each still true.
    let mut found = differences("attach", &fa, &oa);
    found.extend(differences("report", &fr, &orr));
    let (documented, host_dependent) = documented();
    let undocumented: Vec<_> = found.difference(&documented).collect();
    let stale: Vec<_> = documented
        .difference(&found)
        .filter(|d| !host_dependent.contains(*d))
        .collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "docs/migrate.md 'What a project server sees' is out of date.\n\
         Differences not listed: {undocumented:#?}\nListed but not seen: {stale:#?}\n\
         --- official attach ---\n{off_attach}\n--- Ferrite attach ---\n{our_attach}\n\
         --- official report ---\n{off_report}\n--- Ferrite report ---\n{our_report}\n\
         --- official client ---\n{official_out}"
    );

    // Values that describe the host or the volunteer's settings are the same.
    for key in [
        "platform_name",
        "alt_platform/name",
        "host_info/domain_name",
        "host_info/ip_addr",
        "host_info/os_name",
        "host_info/os_version",
        "host_info/p_ncpus",
        "host_info/p_vendor",
        "host_info/p_model",
        "host_info/timezone",
        "host_info/m_nbytes",
        "time_stats/connected_frac",
    ] {
        for (what, ours, off) in [("attach", &fa, &oa), ("report", &fr, &orr)] {
            assert_eq!(ours.get(key), off.get(key), "{what} request: {key} differs");
        }
    }
    for (k, v) in oa
        .iter()
        .filter(|(k, _)| k.starts_with("working_global_preferences/"))
    {
        assert_eq!(fa.get(k), Some(v), "attach request: preference {k} differs");
    }
    // The first request asks for one second of CPU work, as the official client's.
    for key in ["work_req_seconds", "cpu_req_secs"] {
        assert_eq!(fa.get(key).map(String::as_str), Some("1.000000"), "{key}");
        assert_eq!(oa.get(key), fa.get(key), "{key}");
    }
    // A report describes the uploaded output and the host's real statistics.
    let num = |m: &BTreeMap<String, String>, k: &str| -> f64 {
        m.get(k).and_then(|v| v.parse().ok()).unwrap_or(0.0)
    };
    for (who, m) in [("official", &orr), ("Ferrite", &fr)] {
        for k in [
            "result/file_info/nbytes",
            "result/final_peak_swap_size",
            "time_stats/client_start_time",
            "time_stats/total_start_time",
            "net_stats/avg_down",
            "net_stats/bwdown",
            "host_info/p_calculated",
        ] {
            assert!(num(m, k) > 0.0, "{who}'s report: {k} is {:?}", m.get(k));
        }
        assert_eq!(
            m.get("result/file_info/md5_cksum").map(String::len),
            Some(32),
            "{who}'s report: output MD5"
        );
    }
    assert!(
        fr.get("result/stderr_out/core_client_version")
            .map(String::as_str)
            == Some(&ferrite_proto::version::PROTOCOL_VERSION.to_string()[..]),
        "{fr:?}"
    );
}
