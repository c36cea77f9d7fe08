//! GUI RPC end to end: the official `boinccmd` and raw requests against `ferrited` on a copy
//! of the reference data directory, compared with the official client's captured replies.

use std::fs;
use std::path::Path;
use std::time::Duration;

use ferrite_e2e::{
    boinccmd, element_names, ferrited_with_gui_rpc, first_element, fixture_data_dir, fixtures,
    free_port, gui_rpc, transcript_replies, CmdOutput,
};
use ferrite_proto::client_state::{ClientState, ResultState, RunMode};

const URL: &str = "http://127.0.0.1:18080/";
const PW: Option<&str> = Some("testpw");
const T: Duration = Duration::from_secs(30);

fn official(name: &str) -> String {
    fs::read_to_string(fixtures().join("gui_rpc").join(name)).expect("transcript")
}

/// boinccmd's stdout as recorded in a transcript.
fn official_stdout(name: &str) -> String {
    let t = official(name);
    let mut out = String::new();
    let mut on = false;
    for line in t.lines() {
        if line == "# boinccmd stdout:" {
            on = true;
            continue;
        }
        if line.starts_with("# boinccmd ") {
            on = false;
        }
        if on {
            if let Some(l) = line.strip_prefix("#   ") {
                out.push_str(l);
                out.push('\n');
            } else if line == "#" {
                out.push('\n');
            }
        }
    }
    out
}

/// The last reply body of a transcript (the answer to the op after authentication).
fn official_reply(name: &str) -> String {
    transcript_replies(&official(name)).pop().expect("a reply")
}

fn ok(out: &CmdOutput) -> &str {
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    &out.stdout
}

/// The block of boinccmd's `--get_tasks` output for task `name`.
fn task_block<'a>(tasks: &'a str, name: &str) -> &'a str {
    let start = tasks
        .find(&format!("   name: {name}\n"))
        .unwrap_or_else(|| panic!("{name} missing from:\n{tasks}"));
    let rest = &tasks[start..];
    let end = rest
        .find(") -----------")
        .map_or(rest.len(), |i| rest[..i].rfind('\n').map_or(i, |n| n + 1));
    &rest[..end]
}

fn load(dir: &Path) -> ClientState {
    let text = fs::read_to_string(dir.join("client_state.xml")).expect("state");
    ClientState::parse(&text, "client_state.xml")
        .expect("parses")
        .value
}

#[test]
fn boinccmd_reads_state_tasks_projects_and_status() {
    if !ferrite_e2e::peer_or_skip(
        "boinccmd_reads_state_tasks_projects_and_status",
        &["boinccmd"],
    ) {
        return;
    }
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let _d = ferrited_with_gui_rpc(dir.path(), port);

    let state = boinccmd(port, PW, &["--get_state"]);
    let s = ok(&state);
    for needle in [
        "name: Fixture Project",
        &format!("master URL: {URL}"),
        "user_name: fixture_user",
        "name: fixture_app",
        "name: wu_short",
        "name: wu_short_0",
        "name: wu_abort_0",
        "name: wu_long_0",
    ] {
        assert!(s.contains(needle), "{needle:?} missing:\n{s}");
    }

    // Tasks: the finished one is printed exactly as the official client's; the saved-running
    // ones are downloaded and (Ferrite runs them as soon as it starts) have an app process or
    // are about to get one.
    let tasks = boinccmd(port, None, &["--get_tasks"]);
    let t = ok(&tasks);
    let off = official_stdout("get_tasks_running.txt");
    assert_eq!(task_block(t, "wu_short_0"), task_block(&off, "wu_short_0"));
    for name in ["wu_abort_0", "wu_long_0"] {
        let ours = task_block(t, name);
        let theirs = task_block(&off, name);
        for line in theirs.lines().take(7) {
            assert!(ours.contains(line), "{line:?} missing from:\n{ours}");
        }
        assert!(ours.contains("state: downloaded"), "{ours}");
        assert!(
            ours.contains("scheduler state: scheduled") && ours.contains("EXECUTING")
                || ours.contains("scheduler state: preempted")
                    && ours.contains("active_task_state: UNINITIALIZED"),
            "{ours}"
        );
    }

    let projects = boinccmd(port, None, &["--get_project_status"]);
    let p = ok(&projects);
    let off = official_stdout("get_project_status_attached.txt");
    for line in off.lines().take(19) {
        // The project loop has tried the fixture's (absent) server by now.
        if line.contains("nrpc_failures") || line.contains("master fetch failures") {
            continue;
        }
        assert!(p.contains(line), "{line:?} missing from:\n{p}");
    }

    // Modes are all "according to prefs" in the fixture: the output is the official one.
    let cc = boinccmd(port, None, &["--get_cc_status"]);
    // "online" for 10 s after any HTTP exchange (here the project loop's tries of the absent
    // server), as in the official client, whose capture was made when it had none.
    let ours = ok(&cc).replace(
        "network connection status: online",
        "network connection status: don't need connection",
    );
    assert_eq!(ours, official_stdout("get_cc_status.txt"));

    let xfers = boinccmd(port, None, &["--get_file_transfers"]);
    assert_eq!(ok(&xfers).trim(), "======== File transfers ========");

    let disk = boinccmd(port, None, &["--get_disk_usage"]);
    let d = ok(&disk);
    assert!(d.contains("======== Disk usage ========"), "{d}");
    assert!(d.contains(&format!("master URL: {URL}")), "{d}");

    let host = boinccmd(port, None, &["--get_host_info"]);
    let h = ok(&host);
    assert!(h.contains("  #CPUS: "), "{h}");
    assert!(h.contains("OS name: Linux"), "{h}");
    assert!(h.contains("CPU FP OPS: "), "{h}");

    let simple = boinccmd(port, None, &["--get_simple_gui_info"]);
    let sg = ok(&simple);
    assert!(sg.contains("name: Fixture Project"), "{sg}");
    assert!(sg.contains("name: wu_abort_0"), "{sg}");
    assert!(
        !sg.contains("name: wu_short_0"),
        "only tasks with a process record: {sg}"
    );

    // The daemon's own log lines are the event log.
    let msgs = boinccmd(port, None, &["--get_messages"]);
    let m = ok(&msgs);
    assert!(m.contains("entering main loop"), "{m}");
    assert!(m.contains("state: 1 project, 3 tasks"), "{m}");
    let count = boinccmd(port, None, &["--get_message_count"]);
    let c = ok(&count);
    let n: u64 = c
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{c}"));
    assert!(n >= 5, "{c}");

    // Notices need authentication; there are none on a clean start.
    let notices = boinccmd(port, PW, &["--get_notices"]);
    ok(&notices);
    // (boinccmd itself ignores the refusal and prints nothing.)
    let refused = gui_rpc(
        port,
        None,
        "<get_notices>\n<seqno>0</seqno>\n</get_notices>\n",
    );
    assert!(refused.contains("<unauthorized/>"), "{refused}");
    let public = gui_rpc(
        port,
        None,
        "<get_notices_public>\n<seqno>0</seqno>\n</get_notices_public>\n",
    );
    assert!(public.contains("<notices>\n</notices>"), "{public}");
}

/// The `<msg>` elements of a `get_messages` reply as (project, body).
fn messages(reply: &str) -> Vec<(String, String)> {
    reply
        .split("<msg>")
        .skip(1)
        .map(|m| {
            let project = m
                .split("<project>")
                .nth(1)
                .and_then(|p| p.split("</project>").next())
                .unwrap_or_default();
            let body = m
                .split("<![CDATA[")
                .nth(1)
                .and_then(|b| b.split("]]>").next())
                .unwrap_or_default();
            (project.to_owned(), body.trim().to_owned())
        })
        .collect()
}

#[test]
fn event_log_lines_about_a_project_carry_its_name() {
    if !ferrite_e2e::peer_or_skip(
        "event_log_lines_about_a_project_carry_its_name",
        &["boinccmd"],
    ) {
        return;
    }
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let mut d = ferrited_with_gui_rpc(dir.path(), port);
    // The tasks of the state start again: their lines name the project as the official
    // client's do (the Manager's "show only this project" filter keys on it).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let started = loop {
        let reply = gui_rpc(
            port,
            None,
            "<get_messages>\n<seqno>0</seqno>\n</get_messages>\n",
        );
        let found: Vec<(String, String)> = messages(&reply)
            .into_iter()
            .filter(|(_, b)| b.starts_with("starting task "))
            .collect();
        if !found.is_empty() || std::time::Instant::now() > deadline {
            break found;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(!started.is_empty(), "no task started: {}", d.output());
    for (project, body) in &started {
        assert_eq!(project, "Fixture Project", "{body}");
    }
    ok(&boinccmd(port, PW, &["--quit"]));
    let status = d.wait(T);
    assert!(status.success(), "{}", d.output());
}

#[test]
fn boinccmd_control_ops_change_the_state_and_it_is_saved() {
    if !ferrite_e2e::peer_or_skip(
        "boinccmd_control_ops_change_the_state_and_it_is_saved",
        &["boinccmd"],
    ) {
        return;
    }
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let mut d = ferrited_with_gui_rpc(dir.path(), port);

    ok(&boinccmd(port, PW, &["--set_run_mode", "never"]));
    ok(&boinccmd(port, PW, &["--set_gpu_mode", "always", "3600"]));
    ok(&boinccmd(port, PW, &["--set_network_mode", "never"]));
    let cc = boinccmd(port, None, &["--get_cc_status"]);
    let c = ok(&cc);
    let cpu = &c[c.find("CPU status").expect("cpu")..c.find("GPU status").expect("gpu")];
    assert!(cpu.contains("suspended: user request"), "{c}");
    assert!(cpu.contains("current mode: never"), "{c}");
    assert!(cpu.contains("perm mode: never"), "{c}");
    let gpu = &c[c.find("GPU status").expect("gpu")..c.find("Network status").expect("net")];
    assert!(gpu.contains("current mode: always"), "{c}");
    assert!(gpu.contains("perm mode: according to prefs"), "{c}");
    assert!(!gpu.contains("perm becomes current in 0 sec"), "{c}");
    let net = &c[c.find("Network status").expect("net")..];
    assert!(net.contains("current mode: never"), "{c}");

    ok(&boinccmd(port, PW, &["--project", URL, "suspend"]));
    let p = boinccmd(port, None, &["--get_project_status"]);
    assert!(ok(&p).contains("suspended via GUI: yes"), "{}", p.stdout);
    ok(&boinccmd(port, PW, &["--project", URL, "resume"]));
    let p = boinccmd(port, None, &["--get_project_status"]);
    assert!(ok(&p).contains("suspended via GUI: no"), "{}", p.stdout);
    ok(&boinccmd(port, PW, &["--project", URL, "nomorework"]));
    let p = boinccmd(port, None, &["--get_project_status"]);
    assert!(
        ok(&p).contains("don't request more work: yes"),
        "{}",
        p.stdout
    );

    ok(&boinccmd(
        port,
        PW,
        &["--task", URL, "wu_long_0", "suspend"],
    ));
    let t = boinccmd(port, None, &["--get_tasks"]);
    assert!(
        task_block(ok(&t), "wu_long_0").contains("suspended via GUI: yes"),
        "{}",
        t.stdout
    );
    ok(&boinccmd(port, PW, &["--task", URL, "wu_long_0", "resume"]));
    let t = boinccmd(port, None, &["--get_tasks"]);
    assert!(
        !task_block(ok(&t), "wu_long_0").contains("suspended via GUI: yes"),
        "{}",
        t.stdout
    );
    ok(&boinccmd(port, PW, &["--task", URL, "wu_abort_0", "abort"]));
    let t = boinccmd(port, None, &["--get_tasks"]);
    let b = task_block(ok(&t), "wu_abort_0");
    assert!(b.contains("state: aborted"), "{b}");
    assert!(b.contains("exit_status: 203"), "{b}");
    assert!(b.contains("ready to report: yes"), "{b}");

    // Errors as the official client words them.
    let e = boinccmd(port, PW, &["--task", URL, "no_such_task", "suspend"]);
    assert_ne!(e.code, 0);
    assert!(e.stderr.contains("no such result"), "{e:?}");
    let e = boinccmd(
        port,
        PW,
        &["--project", "http://nowhere.example/", "suspend"],
    );
    assert_ne!(e.code, 0);
    assert!(e.stderr.contains("No such project"), "{e:?}");
    // "Update" asks for a scheduler RPC (the fixture's server is not there: it fails and
    // backs off, which the project tests cover).
    let e = boinccmd(port, PW, &["--project", URL, "update"]);
    assert_eq!(e.code, 0, "{e:?}");
    let e = boinccmd(port, PW, &["--file_transfer", URL, "no_such_file", "retry"]);
    assert_ne!(e.code, 0);
    assert!(e.stderr.contains("No such file"), "{e:?}");

    let msgs = boinccmd(port, None, &["--get_messages"]);
    assert!(
        ok(&msgs).contains("task wu_abort_0 aborted by user"),
        "{}",
        msgs.stdout
    );

    ok(&boinccmd(port, PW, &["--quit"]));
    let status = d.wait(T);
    assert!(status.success(), "{}", d.output());
    assert!(
        d.output().contains("shutting down (GUI RPC quit)"),
        "{}",
        d.output()
    );

    let s = load(dir.path());
    assert_eq!(s.user_run_request, RunMode::Never);
    assert_eq!(
        s.user_gpu_request,
        RunMode::Auto,
        "a temporary mode is not saved"
    );
    assert_eq!(s.user_network_request, RunMode::Never);
    let p = &s.projects[0];
    assert!(!p.project.suspended_via_gui);
    assert!(p.project.dont_request_more_work);
    let aborted = p.result("wu_abort_0").expect("result kept");
    assert_eq!(aborted.state, ResultState::Aborted);
    assert_eq!(aborted.exit_status, 203);
    assert!(!p.result("wu_long_0").expect("kept").suspended_via_gui);
    assert!(s.active_task(URL, "wu_abort_0").is_none());
    assert!(s.active_task(URL, "wu_long_0").is_some());
}

#[test]
fn passwords_are_checked_like_the_official_client() {
    if !ferrite_e2e::peer_or_skip(
        "passwords_are_checked_like_the_official_client",
        &["boinccmd"],
    ) {
        return;
    }
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let mut d = ferrited_with_gui_rpc(dir.path(), port);

    let wrong = boinccmd(port, Some("nope"), &["--get_state"]);
    assert_eq!(wrong.code, 1, "{wrong:?}");
    assert!(
        wrong.stderr.contains("Authorization failure: -155"),
        "{wrong:?}"
    );

    // Read-only ops need no password on a local connection; control ops do.
    assert_eq!(boinccmd(port, None, &["--get_state"]).code, 0);
    for args in [
        &["--quit"][..],
        &["--set_run_mode", "never"],
        &["--read_cc_config"],
        &["--read_global_prefs_override"],
        &["--task", URL, "wu_long_0", "abort"],
        &["--project", URL, "suspend"],
    ] {
        let out = boinccmd(port, None, args);
        assert_eq!(out.code, 101, "{args:?}: {out:?}");
        assert!(
            out.stderr
                .contains("Operation failed: authentication error"),
            "{args:?}: {out:?}"
        );
    }
    let cc = boinccmd(port, None, &["--get_cc_status"]);
    assert!(ok(&cc).contains("current mode: according to prefs"));
    // Nothing was changed, and the daemon still runs.
    let t = boinccmd(port, None, &["--get_tasks"]);
    assert!(task_block(ok(&t), "wu_long_0").contains("state: downloaded"));

    // The reread ops work with the password and reread the files.
    fs::write(
        dir.path().join("global_prefs_override.xml"),
        "<global_preferences>\n<max_ncpus_pct>50</max_ncpus_pct>\n</global_preferences>\n",
    )
    .expect("write override");
    let r = boinccmd(port, PW, &["--read_global_prefs_override"]);
    ok(&r);
    let working = gui_rpc(port, PW, "<get_global_prefs_working/>\n");
    assert!(
        working.contains("<max_ncpus_pct>50.000000</max_ncpus_pct>"),
        "{working}"
    );
    let r = boinccmd(port, PW, &["--read_cc_config"]);
    assert!(ok(&r).contains("retval 0"), "{r:?}");
    d.wait_for("re-reading configuration files", T);
}

/// Names of the children of the first `tag` element in `xml`.
fn child_names(xml: &str, tag: &str) -> Vec<String> {
    let el = first_element(xml, tag).unwrap_or_else(|| panic!("no <{tag}> in:\n{xml}"));
    let mut names = element_names(el);
    names.remove(0);
    names
}

/// Whether `a` lists the names common to both in the same order as `b`.
fn same_relative_order(a: &[String], b: &[String]) -> bool {
    let common_a: Vec<&String> = a.iter().filter(|n| b.contains(n)).collect();
    let common_b: Vec<&String> = b.iter().filter(|n| a.contains(n)).collect();
    common_a == common_b
}

#[test]
fn big_replies_have_the_official_element_names_and_order() {
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let _d = ferrited_with_gui_rpc(dir.path(), port);

    let ours = gui_rpc(port, None, "<get_state/>\n");
    let theirs = official_reply("get_state_running.txt");
    // The same project record (the fixture is that client's state). The daemon may be
    // reporting the fixture's finished task right now: the official client then adds
    // `scheduler_rpc_in_progress` too, and the capture was taken between RPCs.
    let mut ours_project = child_names(&ours, "project");
    ours_project.retain(|n| n != "scheduler_rpc_in_progress");
    assert_eq!(ours_project, child_names(&theirs, "project"));
    // A finished result and one with a process record.
    let result_of = |xml: &str, name: &str| -> Vec<String> {
        let i = xml
            .find(&format!("<name>{name}</name>\n    <wu_name>"))
            .expect("result");
        let start = xml[..i].rfind("<result>").expect("result start");
        child_names(&xml[start..], "result")
    };
    for name in ["wu_short_0", "wu_abort_0", "wu_long_0"] {
        assert_eq!(result_of(&ours, name), result_of(&theirs, name), "{name}");
    }
    // Top level: everything but host-dependent details, in order.
    let top = |xml: &str| -> Vec<String> {
        let body = first_element(xml, "client_state").expect("client_state");
        let mut names = Vec::new();
        let mut depth = 0usize;
        for line in body.lines().skip(1) {
            let l = line.trim_start();
            if depth == 0 && l.starts_with('<') && !l.starts_with("</") {
                let n = &l[1..l.find(['>', '/', ' ']).unwrap_or(l.len())];
                names.push(n.to_owned());
            }
            let opens = l.starts_with('<')
                && !l.starts_with("</")
                && !l.contains("</")
                && !l.ends_with("/>");
            if opens {
                depth += 1;
            } else if l.starts_with("</") {
                depth = depth.saturating_sub(1);
            }
        }
        // How many platforms a host runs depends on it (a 32-bit loader adds i686).
        names.dedup_by(|a, b| a == b && a == "platform");
        names
    };
    assert_eq!(top(&ours), top(&theirs));
    // host_info: the fields both write, in the same order.
    let (h1, h2) = (
        child_names(&ours, "host_info"),
        child_names(&theirs, "host_info"),
    );
    assert!(same_relative_order(&h1, &h2), "{h1:?}\n{h2:?}");
    for must in [
        "timezone",
        "host_cpid",
        "p_ncpus",
        "m_nbytes",
        "os_name",
        "coprocs",
    ] {
        assert!(h1.iter().any(|n| n == must), "{must} missing: {h1:?}");
    }

    let cc = gui_rpc(port, None, "<get_cc_status/>\n");
    assert_eq!(
        child_names(&cc, "cc_status"),
        child_names(&official_reply("get_cc_status.txt"), "cc_status")
    );
    assert_eq!(
        // Online for 10 s after an HTTP exchange (see above).
        first_element(&cc, "cc_status").map(|e| e.replace(
            "<network_status>0</network_status>",
            "<network_status>2</network_status>"
        )),
        first_element(&official_reply("get_cc_status.txt"), "cc_status").map(str::to_owned),
        "same values too: the fixture's modes are all auto"
    );

    let ps = gui_rpc(port, None, "<get_project_status/>\n");
    assert_eq!(
        child_names(&ps, "project"),
        child_names(&theirs, "project"),
        "get_project_status writes the same <project> as get_state"
    );

    let results = gui_rpc(
        port,
        None,
        "<get_results>\n<active_only>1</active_only>\n</get_results>\n",
    );
    let names: Vec<&str> = results
        .match_indices("<result>\n    <name>")
        .map(|(i, _)| {
            let s = &results[i + "<result>\n    <name>".len()..];
            &s[..s.find('<').unwrap_or(0)]
        })
        .collect();
    assert_eq!(names, ["wu_abort_0", "wu_long_0"], "active-task order");

    let simple = gui_rpc(port, None, "<get_simple_gui_info/>\n");
    let theirs_simple = official_reply("get_simple_gui_info_running.txt");
    let shape = |xml: &str| -> Vec<String> {
        element_names(xml)
            .into_iter()
            .filter(|n| n == "project" || n == "result" || n == "simple_gui_info")
            .collect()
    };
    assert_eq!(shape(&simple), shape(&theirs_simple));

    let disk = gui_rpc(port, None, "<get_disk_usage/>\n");
    assert_eq!(
        element_names(&disk),
        element_names(&official_reply("get_disk_usage_attached.txt"))
    );

    let msgs = gui_rpc(
        port,
        None,
        "<get_messages>\n<seqno>0</seqno>\n</get_messages>\n",
    );
    let first_msg = first_element(&msgs, "msg").expect("a message");
    let theirs_msg = official_reply("get_messages.txt");
    assert_eq!(
        element_names(first_msg),
        element_names(first_element(&theirs_msg, "msg").expect("msg"))
    );
}

/// Runs `ferrite` with `args` in `cwd`; returns (exit code, stdout, stderr).
fn ferrite(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(ferrite_e2e::bin("ferrite"))
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("run ferrite");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn ferrite_cli_reads_and_controls_ferrited() {
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let mut d = ferrited_with_gui_rpc(dir.path(), port);
    let host = format!("127.0.0.1:{port}");
    let empty = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("utf-8");
    // Run from an empty directory: only read-only commands work without a password.
    let run = |args: &[&str]| {
        let mut all = vec!["--host", host.as_str()];
        all.extend_from_slice(args);
        ferrite(empty.path(), &all)
    };
    let with_dir = |args: &[&str]| {
        let mut all = vec!["--host", host.as_str(), "--dir", data];
        all.extend_from_slice(args);
        ferrite(empty.path(), &all)
    };

    let (code, out, err) = run(&["status"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("computing  auto"), "{out}");
    assert!(out.contains("projects   1"), "{out}");
    assert!(out.contains("tasks      3"), "{out}");

    let (code, out, err) = run(&["tasks"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("TASK "), "{out}");
    let short = out
        .lines()
        .find(|l| l.starts_with("wu_short_0"))
        .expect("row");
    assert!(short.contains("ready to report"), "{out}");
    let (_, out, _) = run(&["--json", "tasks", "--active"]);
    let names: Vec<String> = json(&out)
        .as_array()
        .expect("array")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(names, ["wu_abort_0", "wu_long_0"]);

    let (code, out, _) = run(&["projects"]);
    assert_eq!(code, 0);
    assert!(out.contains("Fixture Project"), "{out}");
    assert!(out.contains(URL), "{out}");
    let (code, out, _) = run(&["messages"]);
    assert_eq!(code, 0);
    assert!(out.contains("[---] entering main loop"), "{out}");

    // Control needs the password: refused without it, found through --dir or ./.
    let (code, _, err) = run(&["mode", "run", "never", "--for", "60"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("authentication error"), "{err}");
    let (code, _, err) = with_dir(&["mode", "run", "never", "--for", "60"]);
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = run(&["--json", "status"]);
    let s = json(&out);
    assert_eq!(s["modes"]["cpu"]["current"], "never");
    assert_eq!(s["modes"]["cpu"]["permanent"], "auto");
    assert_eq!(s["modes"]["cpu"]["suspend_reason"], "user request");
    let delay = s["modes"]["cpu"]["delay"].as_f64().expect("delay");
    assert!(delay > 30.0 && delay <= 60.0, "{delay}");
    let (code, _, err) = ferrite(dir.path(), &["--host", &host, "mode", "network", "never"]);
    assert_eq!(code, 0, "password from ./gui_rpc_auth.cfg: {err}");

    let (code, _, err) = with_dir(&["task", URL, "wu_long_0", "suspend"]);
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = run(&["--json", "tasks"]);
    let tasks = json(&out);
    let long = tasks
        .as_array()
        .expect("array")
        .iter()
        .find(|t| t["name"] == "wu_long_0")
        .expect("task");
    assert_eq!(long["status"], "suspended");
    assert_eq!(long["suspended_via_gui"], true);

    let (code, _, err) = with_dir(&["project", URL, "nomorework"]);
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = run(&["projects"]);
    assert!(out.contains("no new tasks"), "{out}");
    let (code, _, err) = with_dir(&["project", URL, "update"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = with_dir(&["task", URL, "nope", "abort"]);
    assert_eq!(code, 1);
    assert!(err.contains("no such result"), "{err}");

    let (code, out, err) = with_dir(&["--json", "config", "reload"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["ok"], true);
    d.wait_for("re-reading configuration files", T);

    let (code, _, err) = with_dir(&["quit"]);
    assert_eq!(code, 0, "{err}");
    assert!(d.wait(T).success(), "{}", d.output());
    let s = load(dir.path());
    assert_eq!(
        s.user_run_request,
        RunMode::Auto,
        "the 60 s mode is not saved"
    );
    assert_eq!(s.user_network_request, RunMode::Never);
    assert!(s.projects[0].project.dont_request_more_work);
}

#[test]
fn configuration_files_are_written_read_and_applied_through_gui_rpc() {
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let mut d = ferrited_with_gui_rpc(dir.path(), port);

    // Preferences override: written, merged at once, read back; empty deletes it.
    let r = gui_rpc(
        port,
        PW,
        "<set_global_prefs_override>\n<global_preferences>\n<cpu_usage_limit>40</cpu_usage_limit>\n\
         </global_preferences>\n</set_global_prefs_override>\n",
    );
    assert!(r.contains("<success/>"), "{r}");
    let file = fs::read_to_string(dir.path().join("global_prefs_override.xml")).expect("file");
    assert!(
        file.contains("<cpu_usage_limit>40</cpu_usage_limit>"),
        "{file}"
    );
    let w = gui_rpc(port, PW, "<get_global_prefs_working/>\n");
    assert!(
        w.contains("<cpu_usage_limit>40.000000</cpu_usage_limit>"),
        "{w}"
    );
    let o = gui_rpc(port, PW, "<get_global_prefs_override/>\n");
    assert!(o.contains("<cpu_usage_limit>40</cpu_usage_limit>"), "{o}");
    let r = gui_rpc(
        port,
        PW,
        "<set_global_prefs_override>\n</set_global_prefs_override>\n",
    );
    assert!(r.contains("<success/>"), "{r}");
    assert!(!dir.path().join("global_prefs_override.xml").exists());
    let o = gui_rpc(port, PW, "<get_global_prefs_override/>\n");
    assert!(o.contains("<error>no prefs override file</error>"), "{o}");

    // cc_config.xml: written and reloaded; read back as written.
    let r = gui_rpc(
        port,
        PW,
        "<set_cc_config>\n<cc_config>\n<options>\n<max_event_log_lines>500</max_event_log_lines>\n\
         </options>\n</cc_config>\n</set_cc_config>\n",
    );
    assert!(r.contains("<success/>"), "{r}");
    let cc = gui_rpc(port, PW, "<get_cc_config/>\n");
    assert!(
        cc.contains("<max_event_log_lines>500</max_event_log_lines>"),
        "{cc}"
    );
    let st = gui_rpc(port, None, "<get_cc_status/>\n");
    assert!(
        st.contains("<max_event_log_lines>500</max_event_log_lines>"),
        "{st}"
    );
    d.wait_for("cc_config.xml changed through GUI RPC", T);

    // app_config.xml of a project.
    let a = gui_rpc(
        port,
        PW,
        &format!("<get_app_config>\n<url>{URL}</url>\n</get_app_config>\n"),
    );
    assert!(a.contains("<error>app_config.xml not found</error>"), "{a}");
    let r = gui_rpc(
        port,
        PW,
        &format!(
            "<set_app_config>\n<url>{URL}</url>\n<app_config>\n<project_max_concurrent>1</project_max_concurrent>\n\
             </app_config>\n</set_app_config>\n"
        ),
    );
    assert!(r.contains("<success/>"), "{r}");
    let a = gui_rpc(
        port,
        PW,
        &format!("<get_app_config>\n<url>{URL}</url>\n</get_app_config>\n"),
    );
    assert!(
        a.contains("<project_max_concurrent>1</project_max_concurrent>"),
        "{a}"
    );
    let a = gui_rpc(
        port,
        PW,
        "<get_app_config>\n<url>http://nowhere/</url>\n</get_app_config>\n",
    );
    assert!(a.contains("<error>no such project</error>"), "{a}");

    // The attach family starts its work and answers success; its polls say "in progress"
    // (-204) or the transfer's error, never a made-up account. Loopback only: port 9 has no
    // server.
    for (op, poll) in [
        (
            "<lookup_account>\n<url>http://127.0.0.1:9/</url>\n<email_addr>a@b</email_addr>\n<passwd_hash>x</passwd_hash>\n</lookup_account>\n",
            "<lookup_account_poll/>\n",
        ),
        (
            "<get_project_config>\n<url>http://127.0.0.1:9/</url>\n</get_project_config>\n",
            "<get_project_config_poll/>\n",
        ),
    ] {
        let r = gui_rpc(port, PW, op);
        assert!(r.contains("<success/>"), "{op}: {r}");
        let r = gui_rpc(port, PW, poll);
        assert!(
            r.contains("<error_num>-") && !r.contains("authenticator"),
            "{poll}: {r}"
        );
    }
    // An account manager that is not there: the sync starts, its poll says how it went.
    let r = gui_rpc(
        port,
        PW,
        "<acct_mgr_rpc>\n<url>http://127.0.0.1:9/</url>\n<name>n</name>\n<password>p</password>\n</acct_mgr_rpc>\n",
    );
    assert!(r.contains("<success/>"), "{r}");
    let r = gui_rpc(port, PW, "<acct_mgr_rpc_poll/>\n");
    assert!(
        r.contains("<acct_mgr_rpc_reply>\n") && r.contains("<error_num>-"),
        "{r}"
    );
    // Missing arguments answer BOINC's error.
    let r = gui_rpc(port, PW, "<acct_mgr_rpc>\n<url>x</url>\n</acct_mgr_rpc>\n");
    assert!(r.contains("<error>bad arg</error>"), "{r}");
    let r = gui_rpc(
        port,
        PW,
        &format!(
            "<project_attach>\n<project_url>{URL}</project_url>\n<authenticator>k</authenticator>\n</project_attach>\n"
        ),
    );
    assert!(
        r.contains("<error>Already attached to project</error>"),
        "{r}"
    );

    // Simple local settings.
    for (op, expect) in [
        ("<network_available/>\n", "<success/>"),
        (
            "<get_proxy_settings/>\n",
            "<http_server_port>80</http_server_port>",
        ),
        ("<acct_mgr_info/>\n", "<acct_mgr_url></acct_mgr_url>"),
        ("<get_newer_version/>\n", "<newer_version></newer_version>"),
        (
            "<get_file_transfers/>\n",
            "<file_transfers>\n</file_transfers>",
        ),
        ("<get_old_results/>\n", "<old_results>\n</old_results>"),
        ("<get_daily_xfer_history/>\n", "<when>20779</when>"),
        // No list fetched yet (the fixture sets no_info_fetch): the bundled one.
        (
            "<get_all_projects_list/>\n",
            "<boinc_gui_rpc_reply>\n<projects>\n<project>",
        ),
    ] {
        let r = gui_rpc(port, PW, op);
        assert!(r.contains(expect), "{op}: {r}");
    }
    let stats = gui_rpc(port, None, "<get_statistics/>\n");
    assert!(
        stats.contains(&format!(
            "<project_statistics>\n    <master_url>{URL}</master_url>"
        )),
        "{stats}"
    );
}

#[test]
fn unix_socket_only_and_empty_password_file() {
    let dir = fixture_data_dir("02_tasks_running");
    fs::write(dir.path().join("gui_rpc_auth.cfg"), "").expect("empty password");
    let d = dir.path().to_str().expect("utf-8");
    let mut p = ferrite_e2e::Proc::ferrited(&[
        "--dir",
        d,
        "--gui_rpc_unix_domain",
        "--skip_cpu_benchmarks",
        "--no_gpus",
    ]);
    p.wait_for("GUI RPC listening on a Unix socket", T);
    assert!(
        !p.output().contains("GUI RPC listening on TCP"),
        "{}",
        p.output()
    );
    let socket = dir.path().join("boinc_socket");
    let sock = socket.to_str().expect("utf-8");
    let empty = tempfile::tempdir().expect("tempdir");
    // No password needed for control ops; the warning about it is in the event log.
    let (code, _, err) = ferrite(empty.path(), &["--unix", sock, "mode", "gpu", "never"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = ferrite(empty.path(), &["--unix", sock, "--json", "status"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["modes"]["gpu"]["current"], "never");
    let (code, out, _) = ferrite(empty.path(), &["--unix", sock, "messages"]);
    assert_eq!(code, 0);
    assert!(out.contains("authentication is disabled"), "{out}");
    let (code, _, err) = ferrite(empty.path(), &["--unix", sock, "quit"]);
    assert_eq!(code, 0, "{err}");
    assert!(p.wait(T).success(), "{}", p.output());
    assert!(!socket.exists(), "the socket is removed on exit");
}

#[test]
fn screensaver_tasks_and_newer_version_answer_as_the_official_client() {
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let _d = ferrited_with_gui_rpc(dir.path(), port);

    // Ferrite starts the fixture's saved-running tasks at once: asked until one runs.
    let theirs = official_reply("get_screensaver_tasks_running_raw.txt");
    let t0 = std::time::Instant::now();
    let ours = loop {
        let x = gui_rpc(port, None, "<get_screensaver_tasks/>\n");
        if x.contains("<scheduler_state>2</scheduler_state>") {
            break x;
        }
        assert!(t0.elapsed() < T, "no running task listed:\n{x}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let head = "<handle_get_screensaver_tasks>\n    <suspend_reason>0</suspend_reason>\n<result>\n";
    assert!(ours.contains(head), "{ours}");
    assert!(theirs.contains(head), "{theirs}");
    assert!(ours
        .trim_end()
        .ends_with("</result>\n</handle_get_screensaver_tasks>\n</boinc_gui_rpc_reply>"));
    // Each result as the official client writes it; the finished task is not there.
    assert_eq!(child_names(&ours, "result"), child_names(&theirs, "result"));
    assert!(!ours.contains("<name>wu_short_0</name>"), "{ours}");

    let newer = gui_rpc(port, None, "<get_newer_version/>\n");
    assert_eq!(newer, official_reply("get_newer_version_raw.txt"));
}
