//! Ferrite against a BOINC project server on loopback (`ferrite-testproject`): attach, work
//! fetch, downloads with verification, running, uploads and reports; and what each fault the
//! server can inject does to the client.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ferrite_e2e::testproject::{
    all_reported, client_dir, find_named, http, nudge_until_reported, reported, set_executable,
    start_client, status, Server, KEY,
};
use ferrite_e2e::{bin, boinccmd, free_port, gui_rpc, Proc};

#[test]
fn attached_ferrited_downloads_runs_uploads_and_reports_twenty_jobs_of_two_apps() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "20"]);
    let dir = client_dir(tmp.path(), "");
    let port = free_port();
    let client = start_client(&dir, port, Some(&server.url));

    let s = server.wait_until(&client, Duration::from_secs(150), "20 reports", |s| {
        s["results_reported"] == 20
    });
    // Acknowledged tasks leave the state and show in the last hour's old results.
    let t0 = Instant::now();
    let old = loop {
        let old = gui_rpc(port, Some("pw"), "<get_old_results/>\n");
        if old.matches("<old_result>").count() == 20 || t0.elapsed() > Duration::from_secs(20) {
            break old;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(old.matches("<old_result>").count(), 20, "{old}");
    assert_eq!(
        old.matches("<app_name>alpha</app_name>").count(),
        10,
        "{old}"
    );
    assert_eq!(
        old.matches("<exit_status>0</exit_status>").count(),
        20,
        "{old}"
    );
    assert_eq!(s["jobs_made"], 20);
    assert_eq!(s["results_sent"], 20);
    assert_eq!(s["uploads_received"], 20);
    assert_eq!(s["duplicate_reports"], 0);
    assert_eq!(s["hosts"], 1, "one host record: the host id is kept");
    let results = s["results"].as_array().expect("results");
    assert_eq!(results.len(), 20);
    let mut per_app = [0, 0];
    for r in results {
        assert_eq!(r["exit_status"], 0, "{r}");
        let name = r["name"].as_str().expect("name");
        let out = server
            .data
            .join("results")
            .join(name)
            .join(format!("{name}_out"));
        let text = fs::read_to_string(&out).expect("each output stored per result");
        if name.starts_with("alpha") {
            assert_eq!(text, "hello world\n", "{name}");
            per_app[0] += 1;
        } else {
            assert_eq!(text, "goodbye world\n", "{name}");
            per_app[1] += 1;
        }
    }
    assert_eq!(per_app, [10, 10], "both apps ran");
    // Each reply's credit totals went into today's statistics record, which GUIs draw: the
    // last reply acknowledged all 20 jobs (10 credits each).
    let stats = gui_rpc(port, Some("pw"), "<get_statistics/>\n");
    assert_eq!(stats.matches("<daily_statistics>").count(), 1, "{stats}");
    assert!(
        stats.contains("<user_total_credit>200.000000</user_total_credit>")
            && stats.contains("<host_total_credit>200.000000</host_total_credit>"),
        "{stats}"
    );
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    assert!(
        stats.contains(&format!("<day>{}.000000</day>", secs - secs % 86_400)),
        "today, from midnight UTC: {stats}"
    );
    // Each finished task has its line in the project's job log, as the official client
    // writes it (`<time> ue <est> ct <cpu> fe <fpops> nm <name> et <elapsed> es <status>`).
    let esc = ferrite_proto::account::escape_project_url(&server.url);
    let job_log = fs::read_to_string(dir.join(format!("job_log_{esc}.txt"))).expect("job log");
    let (records, bad) = ferrite_proto::job_log::JobLogRecord::parse_log(&job_log);
    assert!(bad.is_empty(), "{bad:?}");
    let mut logged: Vec<&str> = records.iter().map(|r| r.name.as_str()).collect();
    let mut expected: Vec<&str> = results.iter().filter_map(|r| r["name"].as_str()).collect();
    logged.sort_unstable();
    expected.sort_unstable();
    assert_eq!(logged, expected, "{job_log}");
    assert!(
        records.iter().all(|r| r.exit_status == 0
            && r.elapsed_time > 0.0
            && r.fpops_est > 0.0
            && (r.time - secs as f64).abs() < 600.0),
        "{job_log}"
    );
    // Today's transfers are counted in the daily history GUIs show.
    let xfer = gui_rpc(port, Some("pw"), "<get_daily_xfer_history/>\n");
    let history = ferrite_proto::job_log::DailyXferHistory::parse(
        &xfer[xfer.find("<daily_xfers>").expect("history")
            ..xfer.find("</boinc_gui_rpc_reply>").expect("end")],
        "reply",
    )
    .expect("parses")
    .value;
    assert_eq!(
        history.days.len(),
        1,
        "one day in a new data directory: {xfer}"
    );
    assert!(
        history.days[0].up > 0.0 && history.days[0].down > 0.0,
        "{xfer}"
    );
    // Scheduler requests and replies count too, as every HTTP body does in the official
    // client: the 20 outputs alone are 260 bytes, each request several kB.
    assert!(history.days[0].up > 4096.0, "{xfer}");
    // The app files were verified against the project's key before they ran.
    let log = client.output();
    assert!(log.contains("code-signing key stored"), "{log}");
    assert!(!log.contains("signature"), "no signature complaint:\n{log}");
}

/// A project with `jobs` jobs and fault `fault` armed from the start, a client attached to
/// it with `cc_options`; returns both and the client's GUI RPC port.
fn faulty(tmp: &Path, fault: &str, jobs: u32, cc_options: &str) -> (Server, Proc, u16) {
    let jobs = jobs.to_string();
    let server = Server::start(tmp, &["--jobs", &jobs, "--fault", fault]);
    let dir = client_dir(tmp, cc_options);
    let port = free_port();
    let client = start_client(&dir, port, Some(&server.url));
    (server, client, port)
}

/// Waits until the client's log says `needle`.
fn wait_log(client: &mut Proc, needle: &str) {
    client.wait_for(needle, Duration::from_secs(60));
}

/// When the daemon's one project may next ask its scheduler (`min_rpc_time` in its GUI RPC
/// project status, once it lists the project), and the time now, both in Unix seconds.
fn next_rpc_and_now(port: u16) -> (f64, f64) {
    let mut project = String::new();
    ferrite_e2e::inspect::wait_until(
        "the daemon lists the project",
        Duration::from_secs(30),
        || {
            project = gui_rpc(port, Some("pw"), "<get_project_status/>\n");
            project.contains("<min_rpc_time>")
        },
    );
    let next: f64 = project
        .split_once("<min_rpc_time>")
        .and_then(|(_, rest)| rest.split_once('<'))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("a number in min_rpc_time: {project}"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    (next, now)
}

/// `boinccmd` with the test password; must succeed.
fn cmd(port: u16, args: &[&str]) {
    let out = boinccmd(port, Some("pw"), args);
    assert_eq!(
        out.code, 0,
        "boinccmd {args:?}: {}{}",
        out.stdout, out.stderr
    );
}

#[test]
fn scheduler_errors_back_off_and_an_update_recovers() {
    if !ferrite_e2e::peer_or_skip(
        "scheduler_errors_back_off_and_an_update_recovers",
        &["boinccmd"],
    ) {
        return;
    }
    for fault in ["sched-500", "sched-truncated", "sched-malformed"] {
        let tmp = tempfile::tempdir().expect("tmp");
        let (server, mut client, port) = faulty(tmp.path(), fault, 2, "");
        wait_log(&mut client, "Scheduler request failed");
        assert!(
            client.output().contains("next attempt in"),
            "{fault}: {}",
            client.output()
        );
        // Backed off: the project's next RPC is set ahead of now, and the server has heard
        // nothing more.
        let before = status(&server.url)["scheduler_rpcs"].clone();
        let (next, now) = next_rpc_and_now(port);
        assert!(
            next > now,
            "{fault}: backed off (next RPC at {next}, now {now})"
        );
        assert_eq!(
            status(&server.url)["scheduler_rpcs"],
            before,
            "{fault}: backed off"
        );
        // The volunteer's "Update" goes through the backoff.
        cmd(port, &["--project", &server.url, "update"]);
        if fault == "sched-500" {
            // The server never handled the failed request: the jobs come now and complete.
            server.wait_until(&client, Duration::from_secs(60), fault, all_reported(2));
        } else {
            // The jobs went out in the unreadable reply; the client lists none of them, and
            // the next reply is applied normally.
            wait_log(&mut client, "Scheduler request completed");
            assert!(!client.output().contains("panicked"), "{}", client.output());
        }
    }
}

#[test]
fn a_project_down_for_maintenance_is_told_and_waited_for() {
    if !ferrite_e2e::peer_or_skip(
        "a_project_down_for_maintenance_is_told_and_waited_for",
        &["boinccmd"],
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let (server, mut client, port) = faulty(tmp.path(), "sched-down", 2, "");
    // The server's message reaches the volunteer, and its hour-long delay is kept.
    wait_log(
        &mut client,
        "Project is temporarily shut down for maintenance",
    );
    wait_log(&mut client, "Project requested delay of 3600 seconds");
    wait_log(&mut client, "next attempt in 3600 s");
    // The hour is kept: the next RPC is set at least most of an hour ahead, and the server
    // has heard nothing more.
    let before = status(&server.url)["scheduler_rpcs"].clone();
    let (next, now) = next_rpc_and_now(port);
    assert!(
        next > now + 3000.0,
        "the hour's delay is kept (next RPC at {next}, now {now})"
    );
    assert_eq!(status(&server.url)["scheduler_rpcs"], before, "backed off");
    // The project is back; "Update" goes through the delay.
    cmd(port, &["--project", &server.url, "update"]);
    server.wait_until(
        &client,
        Duration::from_secs(60),
        "after the maintenance",
        all_reported(2),
    );
}

#[test]
fn a_hanging_scheduler_is_cut_off_by_the_transfer_timeout() {
    if !ferrite_e2e::peer_or_skip(
        "a_hanging_scheduler_is_cut_off_by_the_transfer_timeout",
        &["boinccmd"],
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let (server, mut client, port) = faulty(
        tmp.path(),
        "sched-timeout",
        2,
        "<http_transfer_timeout>3</http_transfer_timeout>",
    );
    wait_log(&mut client, "Scheduler request failed");
    cmd(port, &["--project", &server.url, "update"]);
    server.wait_until(&client, Duration::from_secs(60), "after the timeout", |s| {
        s["results_reported"].as_i64() >= Some(1)
    });
}

#[test]
fn a_failed_master_fetch_is_retried() {
    if !ferrite_e2e::peer_or_skip("a_failed_master_fetch_is_retried", &["boinccmd"]) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let (server, mut client, port) = faulty(tmp.path(), "master-500", 2, "");
    wait_log(&mut client, "master page fetch failed");
    cmd(port, &["--project", &server.url, "update"]);
    server.wait_until(
        &client,
        Duration::from_secs(60),
        "master retried",
        all_reported(2),
    );
}

#[test]
fn failed_and_stalled_downloads_resume_and_the_jobs_complete() {
    for fault in ["download-500:2", "download-stall:1"] {
        let tmp = tempfile::tempdir().expect("tmp");
        let (server, mut client, port) = faulty(
            tmp.path(),
            fault,
            2,
            "<http_transfer_timeout>3</http_transfer_timeout>",
        );
        wait_log(&mut client, "download");
        let s = nudge_until_reported(
            &server,
            &client,
            port,
            (2, Duration::from_secs(90)),
            fault,
            false,
        );
        for (name, exit) in reported(&s) {
            assert_eq!(exit, 0, "{fault}: {name} succeeded after the retry");
        }
    }
}

#[test]
fn upload_errors_are_retried_or_reported_as_the_server_says() {
    for (fault, permanent) in [
        ("upload-500:1", false),
        ("upload-transient:1", false),
        ("upload-permanent:1", true),
    ] {
        let tmp = tempfile::tempdir().expect("tmp");
        let (server, client, port) = faulty(tmp.path(), fault, 2, "");
        let s = nudge_until_reported(
            &server,
            &client,
            port,
            (2, Duration::from_secs(90)),
            fault,
            false,
        );
        let failed = reported(&s).iter().filter(|(_, e)| *e != 0).count();
        if permanent {
            assert_eq!(
                failed, 1,
                "{fault}: the refused upload errors its task: {s}"
            );
        } else {
            assert_eq!(failed, 0, "{fault}: the upload was retried: {s}");
        }
        assert_eq!(s["duplicate_reports"], 0);
    }
}

#[test]
fn repeated_upload_failures_show_the_project_backoff_and_the_time_spent() {
    // Three outputs refused with HTTP 500: from the third failure the project's uploads back
    // off, and the Manager shows "Upload: pending (project backoff: …)".
    let tmp = tempfile::tempdir().expect("tmp");
    let (_server, _client, port) = faulty(tmp.path(), "upload-500:3", 3, "");
    let t0 = Instant::now();
    let xfers = loop {
        let x = gui_rpc(port, Some("pw"), "<get_file_transfers/>\n");
        if x.contains("<project_backoff>") || t0.elapsed() > Duration::from_secs(90) {
            break x;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let held: Vec<&str> = xfers
        .split("<file_transfer>")
        .skip(1)
        .filter(|t| t.contains("<project_backoff>"))
        .collect();
    assert!(!held.is_empty(), "no project backoff shown: {xfers}");
    let num = |e: &str, tag: &str| -> f64 {
        e.split(&format!("<{tag}>"))
            .nth(1)
            .and_then(|v| v.split('<').next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {tag}: {e}"))
    };
    for t in &held {
        assert!(t.contains("<is_upload>1</is_upload>"), "{t}");
        assert!(num(t, "project_backoff") > 0.0, "{t}");
    }
    // The failed attempts' time is kept (the Manager's elapsed column).
    assert!(
        held.iter()
            .any(|t| num(t, "num_retries") >= 1.0 && num(t, "time_so_far") > 0.0),
        "{xfers}"
    );
    // The project's properties: "File uploads deferred for".
    let state = gui_rpc(port, Some("pw"), "<get_project_status/>\n");
    assert!(state.contains("<upload_backoff>"), "{state}");
    assert!(!state.contains("<download_backoff>"), "{state}");
}

#[test]
fn bad_inputs_error_their_job_which_is_reported_while_the_others_complete() {
    // (fault, the official error code the bad job is reported with)
    for (fault, code, prefs) in [
        ("wrong-md5", None, ""),
        ("hostile-name", Some(-225), ""),
        (
            "huge-file",
            Some(-221),
            "<disk_max_used_gb>0.5</disk_max_used_gb>",
        ),
    ] {
        let tmp = tempfile::tempdir().expect("tmp");
        let server = Server::start(tmp.path(), &["--jobs", "3", "--fault", fault]);
        let dir = client_dir(tmp.path(), "");
        if !prefs.is_empty() {
            let p = dir.join("global_prefs_override.xml");
            let text = fs::read_to_string(&p).expect("prefs");
            fs::write(
                &p,
                text.replace(
                    "</global_preferences>",
                    &format!("{prefs}\n</global_preferences>"),
                ),
            )
            .expect("prefs");
        }
        let client = start_client(&dir, free_port(), Some(&server.url));
        let s = server.wait_until(&client, Duration::from_secs(90), fault, all_reported(3));
        let results = reported(&s);
        let bad: Vec<_> = results.iter().filter(|(_, e)| *e != 0).collect();
        assert_eq!(
            bad.len(),
            1,
            "{fault}: exactly the bad job fails: {s}\n{}",
            client.output()
        );
        if let Some(code) = code {
            assert_eq!(bad[0].1, code, "{fault}: {s}");
        }
        assert_eq!(s["uploads_received"], 2, "{fault}: the good jobs ran: {s}");
        // Nothing was written outside the data directory, and no 1 GiB file anywhere.
        assert!(!tmp.path().join("hostile_in").exists());
        assert!(!dir.join("hostile_in").exists());
        let big = walk_sizes(&dir).into_iter().max().unwrap_or(0);
        assert!(big < 100 << 20, "{fault}: a {big}-byte file was written");
    }
}

#[test]
fn a_bad_app_signature_means_nothing_runs_and_the_jobs_are_reported_as_errors() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "2", "--fault", "bad-signature"]);
    let dir = client_dir(tmp.path(), "");
    let client = start_client(&dir, free_port(), Some(&server.url));
    let s = server.wait_until(
        &client,
        Duration::from_secs(90),
        "errors reported",
        all_reported(2),
    );
    for (name, exit) in reported(&s) {
        assert_ne!(exit, 0, "{name} must not have run: {s}");
    }
    assert_eq!(s["uploads_received"], 0);
    let log = client.output();
    assert!(
        !log.contains("alpha done") && !log.contains("goodbye"),
        "{log}"
    );
    assert!(
        log.to_lowercase().contains("signature"),
        "the log says why:\n{log}"
    );
}

fn walk_sizes(dir: &Path) -> Vec<u64> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => out.extend(walk_sizes(&e.path())),
                Ok(t) if t.is_file() => out.push(e.metadata().map(|m| m.len()).unwrap_or(0)),
                _ => {}
            }
        }
    }
    out
}

#[test]
fn an_rpc_backoff_survives_a_daemon_restart() {
    if !ferrite_e2e::peer_or_skip("an_rpc_backoff_survives_a_daemon_restart", &["boinccmd"]) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let (server, mut client, port) = faulty(tmp.path(), "sched-500", 2, "");
    wait_log(&mut client, "next attempt in");
    client.signal(libc::SIGTERM);
    assert!(client.wait(Duration::from_secs(30)).success());
    let before = status(&server.url)["scheduler_rpcs"].clone();
    let dir = tmp.path().join("client");
    let client = start_client(&dir, port, None);
    // The restarted daemon loaded the backoff: its project's next RPC is still ahead of now,
    // and it has not asked the server meanwhile.
    let (next, now) = next_rpc_and_now(port);
    assert!(
        next > now,
        "the restarted daemon keeps the backoff (next RPC at {next}, now {now}):\n{}",
        client.output()
    );
    assert_eq!(
        status(&server.url)["scheduler_rpcs"],
        before,
        "the restarted daemon keeps the backoff:\n{}",
        client.output()
    );
    cmd(port, &["--project", &server.url, "update"]);
    server.wait_until(
        &client,
        Duration::from_secs(60),
        "after update",
        all_reported(2),
    );
}

/// Polls a GUI RPC `*_poll` until it stops answering "in progress" (-204).
fn poll_done(port: u16, poll: &str) -> String {
    let t0 = Instant::now();
    loop {
        let r = gui_rpc(port, Some("pw"), poll);
        if !r.contains("<error_num>-204</error_num>") {
            return r;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{poll} still in progress"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_attach_wizard_creates_an_account_then_attaches_with_its_key() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "2"]);
    let dir = client_dir(tmp.path(), "");
    let port = free_port();
    let client = start_client(&dir, port, None);
    let url = &server.url;

    // What BOINC Manager does: project config, account creation, attach, attach poll.
    let r = gui_rpc(
        port,
        Some("pw"),
        &format!("<get_project_config>\n<url>{url}</url>\n</get_project_config>\n"),
    );
    assert!(r.contains("<success/>"), "{r}");
    let cfg = poll_done(port, "<get_project_config_poll/>\n");
    assert!(
        cfg.contains("<project_config>") && cfg.contains("<name>"),
        "{cfg}"
    );
    let r = gui_rpc(
        port,
        Some("pw"),
        &format!(
            "<create_account>\n<url>{url}</url>\n<email_addr>v@example.org</email_addr>\n\
             <passwd_hash>0123456789abcdef0123456789abcdef</passwd_hash>\n\
             <user_name>volunteer</user_name>\n<team_name></team_name>\n</create_account>\n"
        ),
    );
    assert!(r.contains("<success/>"), "{r}");
    let acct = poll_done(port, "<create_account_poll/>\n");
    let key = acct
        .split("<authenticator>")
        .nth(1)
        .and_then(|x| x.split("</authenticator>").next())
        .unwrap_or_else(|| panic!("no account key in {acct}"))
        .to_owned();
    let r = gui_rpc(
        port,
        Some("pw"),
        &format!("<project_attach>\n<project_url>{url}</project_url>\n<authenticator>{key}</authenticator>\n<project_name></project_name>\n</project_attach>\n"),
    );
    assert!(r.contains("<success/>"), "{r}");
    let done = poll_done(port, "<project_attach_poll/>\n");
    assert!(done.contains("<error_num>0</error_num>"), "{done}");
    server.wait_until(
        &client,
        Duration::from_secs(90),
        "jobs after the wizard",
        all_reported(2),
    );
    let acct_file = fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("account_"))
        .expect("account file written");
    let text = fs::read_to_string(acct_file.path()).expect("read");
    assert!(text.contains(&key), "{text}");
}

#[test]
fn a_download_cut_by_a_daemon_restart_resumes_where_it_stopped() {
    let tmp = tempfile::tempdir().expect("tmp");
    // A 40 MB input, fetched at 4 MB/s: the daemon is stopped part-way.
    let big = tmp.path().join("big_input");
    fs::write(&big, vec![7u8; 40 << 20]).expect("input");
    let data = tmp.path().join("server");
    let app = tmp.path().join("app.sh");
    fs::write(
        &app,
        "#!/bin/sh\nwc -c < in > out\necho 0 > boinc_finish_called\nexit 0\n",
    )
    .expect("app");
    set_executable(&app);
    let mut cmd = Command::new(bin("ferrite-testproject"));
    cmd.args(["--port", "0", "--data"])
        .arg(&data)
        .args(["--app", &format!("wc={}", app.display()), "--input"])
        .arg(&big)
        .args(["--jobs", "1", "--fpops-est", "1e8"]);
    let server = Server::spawn(cmd, &data);
    let dir = client_dir(tmp.path(), "");
    let prefs = dir.join("global_prefs_override.xml");
    let slow = fs::read_to_string(&prefs).expect("prefs").replace(
        "</global_preferences>",
        "<max_bytes_sec_down>4000000</max_bytes_sec_down>\n</global_preferences>",
    );
    fs::write(&prefs, &slow).expect("prefs");
    let port = free_port();
    let mut client = start_client(&dir, port, Some(&server.url));
    client.wait_for("Started download of wc_wu_0_in", Duration::from_secs(30));
    // Stopped once a good part (4 MiB of 40, at 4 MB/s) is on disk.
    ferrite_e2e::inspect::wait_until(
        "4 MiB of the input on disk",
        Duration::from_secs(60),
        || {
            find_named(&dir, "wc_wu_0_in.part")
                .and_then(|p| fs::metadata(p).ok())
                .is_some_and(|m| m.len() > 4 << 20)
        },
    );
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
    let partial = find_named(&dir, "wc_wu_0_in.part").expect("the partial file is kept");
    let kept = fs::metadata(&partial).expect("partial").len();
    assert!(kept > 1 << 20 && kept < 40 << 20, "{kept} bytes kept");

    // Full speed now; the download continues from the partial file.
    fs::write(
        &prefs,
        slow.replace("<max_bytes_sec_down>4000000</max_bytes_sec_down>\n", ""),
    )
    .expect("prefs");
    let client = start_client(&dir, port, None);
    let s = server.wait_until(
        &client,
        Duration::from_secs(90),
        "resumed job",
        all_reported(1),
    );
    assert_eq!(reported(&s)[0].1, 0, "{s}");
    let log = client.output();
    let at: u64 = log
        .split("Finished download of wc_wu_0_in (resumed at byte ")
        .nth(1)
        .and_then(|x| x.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no resumed download in:\n{log}"));
    assert_eq!(at, kept, "resumed exactly where the partial file ended");
    let out = data.join("results").join("wc_wu_0_0").join("wc_wu_0_0_out");
    assert_eq!(
        fs::read_to_string(&out).expect("output").trim(),
        (40u64 << 20).to_string(),
        "the whole input arrived intact"
    );
}

/// `GET /metrics` from ferrited's loopback endpoint.
fn scrape(port: u16) -> String {
    let url = format!("http://127.0.0.1:{port}/");
    http(&url, "GET", "metrics", "")
}

#[test]
fn metrics_show_the_tasks_moving_through_their_states() {
    let tmp = tempfile::tempdir().expect("tmp");
    // Slow apps, so each state lasts long enough to be seen.
    let server = Server::start_with(tmp.path(), &["--jobs", "6"], "sleep 2\n");
    let dir = client_dir(tmp.path(), "");
    let metrics_port = free_port();
    let d = dir.to_str().expect("utf-8");
    let (gui, mp) = (free_port().to_string(), metrics_port.to_string());
    let mut client = Proc::ferrited(&[
        "--dir",
        d,
        "--gui_rpc_port",
        &gui,
        "--metrics_port",
        &mp,
        "--skip_cpu_benchmarks",
        "--no_gpus",
        "--attach_project",
        &server.url,
        KEY,
    ]);
    client.wait_for("entering main loop", Duration::from_secs(30));
    let mut seen = std::collections::BTreeSet::new();
    let t0 = Instant::now();
    let mut last = String::new();
    while t0.elapsed() < Duration::from_secs(90) {
        last = scrape(metrics_port);
        for line in last.lines().filter(|l| l.starts_with("boinc_tasks{")) {
            let value: f64 = line
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            if value > 0.0 {
                if let Some(state) = line
                    .split("state=\"")
                    .nth(1)
                    .and_then(|x| x.split('"').next())
                {
                    seen.insert(state.to_owned());
                }
            }
        }
        if status(&server.url)["results_reported"] == 6 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(status(&server.url)["results_reported"], 6, "{last}");
    // The jobs were seen running and then waiting for their report (or uploading), as they
    // moved through the client.
    assert!(seen.contains("running"), "states seen: {seen:?}\n{last}");
    assert!(
        seen.contains("ready_to_report") || seen.contains("uploading"),
        "states seen: {seen:?}\n{last}"
    );
    assert!(seen.len() >= 3, "states seen: {seen:?}");
    // The server counts the reports when it answers; the client counts the RPC once it has
    // taken in the reply: scrape until it shows (the attach's RPC and the reports').
    let rpcs_in = |text: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with("boinc_project_scheduler_rpcs_total{"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let t1 = Instant::now();
    while rpcs_in(&last) < 2.0 && t1.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
        last = scrape(metrics_port);
    }
    assert!(rpcs_in(&last) >= 2.0, "scheduler RPCs counted: {last}");
    // Asked without `Accept: application/openmetrics-text`: the classic text format.
    assert!(
        last.contains("# TYPE boinc_project_scheduler_rpcs_total counter")
            && !last.contains("# EOF"),
        "{last}"
    );
}

#[test]
fn an_app_file_changed_on_disk_is_fetched_and_verified_again_before_it_runs() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start_with(tmp.path(), &["--jobs", "8"], "sleep 1\n");
    let dir = client_dir(tmp.path(), "<ncpus>1</ncpus>");
    let mut client = start_client(&dir, free_port(), Some(&server.url));
    client.wait_for(
        "Finished download of alpha_1.00_alpha.sh",
        Duration::from_secs(60),
    );
    let app = find_named(&dir, "alpha_1.00_alpha.sh").expect("the app file is in the project");
    // Someone (or something) rewrites the signed executable.
    fs::write(
        &app,
        "#!/bin/sh\necho tampered > out\necho 0 > boinc_finish_called\n",
    )
    .expect("tamper");
    client.wait_for("changed on disk", Duration::from_secs(30));
    let s = server.wait_until(
        &client,
        Duration::from_secs(120),
        "all jobs",
        all_reported(8),
    );
    for (name, exit) in reported(&s) {
        assert_eq!(exit, 0, "{name}: {s}");
        let out = server
            .data
            .join("results")
            .join(&name)
            .join(format!("{name}_out"));
        let text = fs::read_to_string(&out).expect("output");
        assert_ne!(text.trim(), "tampered", "{name} ran the rewritten file");
    }
    let log = client.output();
    assert!(
        log.matches("Finished download of alpha_1.00_alpha.sh")
            .count()
            >= 2,
        "fetched again:\n{log}"
    );
}

#[test]
fn outside_the_network_hours_nothing_is_sent_and_the_gui_says_why() {
    // The preferences allow the network from two hours from now for one hour (UTC, the
    // machine's zone here): attaching waits, no request reaches the server.
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "1"]);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let offset = local_utc_offset();
    let hour = ((secs as i64 + offset).rem_euclid(86400) / 3600) as u32;
    let window = |start: u32, end: u32| {
        format!("<net_start_hour>{start}</net_start_hour>\n<net_end_hour>{end}</net_end_hour>")
    };
    let dir = ferrite_e2e::testproject::client_dir_in(
        &tmp.path().join("client"),
        "",
        &window((hour + 2) % 24, (hour + 3) % 24),
    );
    let port = free_port();
    let client = start_client(&dir, port, Some(&server.url));
    // Once the daemon has attached the project (waiting for its master page) and its GUI
    // says the network is off for the time of day, nothing may have reached the server.
    ferrite_e2e::inspect::wait_until(
        "the project attached and the network off for the time of day",
        Duration::from_secs(30),
        || {
            gui_rpc(port, Some("pw"), "<get_cc_status/>\n")
                .contains("<network_suspend_reason>8</network_suspend_reason>")
                && gui_rpc(port, Some("pw"), "<get_project_status/>\n")
                    .contains(&format!("<master_url>{}</master_url>", server.url))
        },
    );
    let s = status(&server.url);
    let requests: u64 = s["traffic"]["endpoints"]
        .as_object()
        .map(|e| e.values().filter_map(|v| v["requests"].as_u64()).sum())
        .unwrap_or(0);
    assert_eq!(
        requests,
        0,
        "nothing sent outside the hours: {s}\n{}",
        client.output()
    );
    let cc = gui_rpc(port, Some("pw"), "<get_cc_status/>\n");
    assert!(
        cc.contains("<network_suspend_reason>8</network_suspend_reason>"),
        "the GUI sees 'time of day': {cc}"
    );

    // Hours that include now (start = end: always): the job is fetched and reported.
    let prefs = dir.join("global_prefs_override.xml");
    let text = fs::read_to_string(&prefs).expect("prefs");
    fs::write(
        &prefs,
        text.replace(&window((hour + 2) % 24, (hour + 3) % 24), &window(0, 0)),
    )
    .expect("prefs");
    let r = gui_rpc(port, Some("pw"), "<read_global_prefs_override/>\n");
    assert!(r.contains("<success/>"), "{r}");
    server.wait_until(
        &client,
        Duration::from_secs(90),
        "the job reported",
        all_reported(1),
    );
    let cc = gui_rpc(port, Some("pw"), "<get_cc_status/>\n");
    assert!(
        cc.contains("<network_suspend_reason>0</network_suspend_reason>"),
        "{cc}"
    );
}

/// The local time zone's offset from UTC in seconds, as `date +%z` says.
fn local_utc_offset() -> i64 {
    let out = Command::new("date").arg("+%z").output().expect("date");
    let z = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let sign = if z.starts_with('-') { -1 } else { 1 };
    let digits = z.trim_start_matches(['+', '-']);
    let h: i64 = digits.get(0..2).and_then(|v| v.parse().ok()).unwrap_or(0);
    let m: i64 = digits.get(2..4).and_then(|v| v.parse().ok()).unwrap_or(0);
    sign * (h * 3600 + m * 60)
}
