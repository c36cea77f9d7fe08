//! A data directory that lost files while `ferrited` was down (a crash, a copy that left
//! things out): files of the projects' apps and unfinished tasks that are missing are
//! downloaded again and the tasks run to completion; only a task whose file cannot come
//! back fails, with its reason. And a data directory whose every state file is damaged
//! keeps the projects of its account files attached, says the tasks were lost, and gets
//! work again; so does a data directory that has only account files.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferrite_e2e::inspect::load_state;
use ferrite_e2e::testproject::{
    client_dir, nudge_until_reported, reported, start_client, status, Server, KEY,
};
use ferrite_e2e::{boinccmd, free_port, Proc};
use ferrite_proto::account::{account_file_name, escape_project_url, AccountFile};
use ferrite_proto::client_state::ResultState;

const T: Duration = Duration::from_secs(90);

/// The test project with `jobs` jobs whose apps sleep 3 s, and `ferrited` attached to it,
/// stopped (SIGTERM) while the first tasks run: nothing computed yet, everything downloaded.
fn stopped_while_running(base: &Path, jobs: u32) -> (Server, PathBuf, u16) {
    let jobs = jobs.to_string();
    let server = Server::start_with(base, &["--jobs", &jobs], "sleep 3\n");
    let dir = client_dir(base, "");
    let port = free_port();
    let mut client = start_client(&dir, port, Some(&server.url));
    client.wait_for("starting task", T);
    // Once every job's input (one each, `<app>_wu_<n>_in`) is downloaded, and every download
    // started by then (the apps' files among them) has finished too.
    let want: usize = jobs.parse().expect("jobs");
    ferrite_e2e::inspect::wait_until("every job's input and app downloaded", T, || {
        let log = client.output();
        let named = |what: &str| -> std::collections::BTreeSet<String> {
            log.lines()
                .filter_map(|l| l.split(what).nth(1))
                .filter_map(|rest| rest.split_whitespace().next())
                .map(str::to_owned)
                .collect()
        };
        let (started, finished) = (
            named("Started download of "),
            named("Finished download of "),
        );
        finished.iter().filter(|n| n.contains("_wu_")).count() >= want
            && started.is_subset(&finished)
    });
    stop(&mut client);
    let s = status(&server.url);
    assert_eq!(s["results_reported"], 0, "nothing finished yet: {s}");
    (server, dir, port)
}

fn stop(client: &mut Proc) {
    client.signal(libc::SIGTERM);
    assert!(client.wait(T).success(), "{}", client.output());
}

/// The project's directory in data directory `dir`.
fn project_dir(dir: &Path, server: &Server) -> PathBuf {
    dir.join("projects").join(escape_project_url(&server.url))
}

/// How many times the server was asked for file `name`.
fn downloads_of(s: &serde_json::Value, name: &str) -> usize {
    s["traffic"]["log"]
        .as_array()
        .expect("traffic log")
        .iter()
        .filter(|e| e["endpoint"] == "download" && e["target"].as_str() == Some(name))
        .count()
}

/// Waits until every one of the server's `jobs` results is reported; returns the status.
fn wait_all_reported(server: &Server, client: &Proc, jobs: usize) -> serde_json::Value {
    server.wait_until(client, T, "every job reported", |s| {
        reported(s).len() == jobs
    })
}

/// Each reported result with exit status 0 uploaded its own, whole output.
fn assert_outputs(server: &Server, s: &serde_json::Value) {
    for (name, code) in reported(s) {
        if code != 0 {
            continue;
        }
        let out = server
            .data
            .join("results")
            .join(&name)
            .join(format!("{name}_out"));
        let text = fs::read_to_string(&out).expect("output stored");
        let want = if name.starts_with("alpha") {
            "hello world\n"
        } else {
            "goodbye world\n"
        };
        assert_eq!(text, want, "{name}");
    }
}

/// `boinccmd` lists the server's project as attached to the client on GUI RPC `port`, and the
/// client gets work from it and returns it done.
fn assert_attached_and_working(server: &Server, client: &Proc, port: u16) {
    let out = boinccmd(port, Some("pw"), &["--get_project_status"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains(&format!("master URL: {}", server.url)),
        "attached: {}",
        out.stdout
    );
    let s = server.wait_until(client, T, "work from the project", |s| {
        s["results_reported"].as_i64().unwrap_or(0) > 0
    });
    assert!(
        reported(&s).iter().all(|(_, code)| *code == 0),
        "{s}\n{}",
        client.output()
    );
    assert_outputs(server, &s);
}

#[test]
fn a_lost_project_directory_is_downloaded_again_and_every_task_completes() {
    let base = tempfile::tempdir().expect("tmp");
    let (server, dir, port) = stopped_while_running(base.path(), 4);
    let pdir = project_dir(&dir, &server);
    let state = load_state(&dir, "client_state.xml");
    let ps = &state.projects[0];
    assert_eq!(ps.results.len(), 4, "four tasks were in hand");
    let files: Vec<String> = ps.files.iter().map(|f| f.name.clone()).collect();
    let before = status(&server.url);
    fs::remove_dir_all(&pdir).expect("remove the project directory");

    let client = start_client(&dir, port, None);
    let s = wait_all_reported(&server, &client, 4);
    let log = client.output();
    assert!(
        log.contains("is missing; its files are downloaded again"),
        "{log}"
    );
    assert!(log.contains("waits for"), "{log}");
    assert!(
        !log.contains("; retrying in "),
        "no start attempt on missing files: {log}"
    );
    for (name, code) in reported(&s) {
        assert_eq!(code, 0, "{name} succeeded\n{log}");
    }
    assert_outputs(&server, &s);
    // Every file the tasks needed was fetched once more, and only once more.
    for name in files.iter().filter(|n| !n.ends_with("_out")) {
        assert!(
            log.contains(&format!("file {name}: missing; it is downloaded again")),
            "{name}: {log}"
        );
        assert_eq!(
            downloads_of(&s, name),
            downloads_of(&before, name) + 1,
            "{name} downloaded again once"
        );
    }
    assert_eq!(s["duplicate_reports"], 0, "{s}");
}

#[test]
fn a_single_lost_or_damaged_file_is_fetched_again_and_the_others_are_kept() {
    let base = tempfile::tempdir().expect("tmp");
    let (server, dir, port) = stopped_while_running(base.path(), 4);
    let pdir = project_dir(&dir, &server);
    let state = load_state(&dir, "client_state.xml");
    let ps = &state.projects[0];
    let inputs: Vec<String> = ps
        .workunits
        .iter()
        .flat_map(|w| w.input_files.iter().map(|f| f.file_name.clone()))
        .collect();
    assert!(inputs.len() >= 2, "{inputs:?}");
    let app_file = ps.app_versions[0].file_refs[0].file_name.clone();
    let before = status(&server.url);
    // One input gone, one cut short, the app file altered with its size kept.
    fs::remove_file(pdir.join(&inputs[0])).expect("remove");
    fs::write(pdir.join(&inputs[1]), "w").expect("cut short");
    let app = fs::read(pdir.join(&app_file)).expect("app");
    let mut altered = app.clone();
    if let Some(b) = altered.last_mut() {
        *b ^= 0x20;
    }
    fs::write(pdir.join(&app_file), &altered).expect("alter");

    let client = start_client(&dir, port, None);
    let s = wait_all_reported(&server, &client, 4);
    let log = client.output();
    assert!(
        log.contains(&format!(
            "file {}: missing; it is downloaded again",
            inputs[0]
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "file {}: wrong size: expected 6 bytes, got 1; it is downloaded again",
            inputs[1]
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!("file {app_file}: wrong MD5")),
        "{log}"
    );
    for (name, code) in reported(&s) {
        assert_eq!(code, 0, "{name} succeeded\n{log}");
    }
    assert_outputs(&server, &s);
    for name in &inputs {
        let again = usize::from(name == &inputs[0] || name == &inputs[1]);
        assert_eq!(
            downloads_of(&s, name),
            downloads_of(&before, name) + again,
            "{name}"
        );
    }
    assert_eq!(
        downloads_of(&s, &app_file),
        downloads_of(&before, &app_file) + 1
    );
    assert_eq!(
        fs::read(pdir.join(&app_file)).expect("app"),
        app,
        "the app's own bytes are back"
    );
}

#[test]
fn a_file_that_cannot_be_fetched_fails_only_its_task() {
    let base = tempfile::tempdir().expect("tmp");
    let (server, dir, port) = stopped_while_running(base.path(), 4);
    let pdir = project_dir(&dir, &server);
    let state = load_state(&dir, "client_state.xml");
    let ps = &state.projects[0];
    let wu = &ps.workunits[0];
    let input = wu.input_files[0].file_name.clone();
    let doomed = ps
        .results
        .iter()
        .find(|r| r.wu_name == wu.name)
        .expect("its result")
        .name
        .clone();
    // The input is gone, and (as in a state file written by a client that had its own copy)
    // the state names no URL to fetch it from.
    fs::remove_file(pdir.join(&input)).expect("remove");
    let text = fs::read_to_string(dir.join("client_state.xml")).expect("state");
    let url_line = format!(
        "<download_url>{}download/{input}</download_url>",
        server.url
    );
    assert!(text.contains(&url_line), "{url_line} in\n{text}");
    fs::write(dir.join("client_state.xml"), text.replace(&url_line, "")).expect("edit");

    let client = start_client(&dir, port, None);
    let s = wait_all_reported(&server, &client, 4);
    let log = client.output();
    assert!(
        log.contains(&format!(
            "file {input}: missing; it cannot be downloaded again"
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!("task {doomed} fails (-186)")),
        "{log}"
    );
    for (name, code) in reported(&s) {
        if name == doomed {
            assert_eq!(code, -186, "{name}: ERR_RESULT_DOWNLOAD\n{log}");
        } else {
            assert_eq!(code, 0, "{name} succeeded\n{log}");
        }
    }
    assert_outputs(&server, &s);
    assert_eq!(downloads_of(&s, &input), 1, "never asked for again");
}

#[test]
fn damaged_state_files_keep_the_projects_of_the_account_files_attached() {
    if !ferrite_e2e::peer_or_skip(
        "damaged_state_files_keep_the_projects_of_the_account_files_attached",
        &["boinccmd"],
    ) {
        return;
    }
    let base = tempfile::tempdir().expect("tmp");
    let (server, dir, port) = stopped_while_running(base.path(), 4);
    let sent = status(&server.url)["results_sent"].as_i64().unwrap_or(0);
    assert!(sent > 0);
    for name in [
        "client_state.xml",
        "client_state_prev.xml",
        "client_state_next.xml",
    ] {
        fs::write(dir.join(name), "<client_state>\n<project>\n<master_url>").expect("damage");
    }

    // Started as it was the first time, with `--attach_project`: the project is already
    // attached again, from its account file.
    let client = start_client(&dir, port, Some(&server.url));
    let log = client.output();
    assert!(log.contains("no usable state file"), "{log}");
    assert!(log.contains("already attached"), "{log}");
    assert!(
        log.contains("Every task of the lost state file was lost"),
        "{log}"
    );
    assert!(
        log.contains("kept attached from its account file; its tasks were lost"),
        "{log}"
    );
    // It gets work again: the server sends tasks and they come back done.
    assert_attached_and_working(&server, &client, port);
}

#[test]
fn account_files_alone_attach_their_projects() {
    if !ferrite_e2e::peer_or_skip("account_files_alone_attach_their_projects", &["boinccmd"]) {
        return;
    }
    let base = tempfile::tempdir().expect("tmp");
    let server = Server::start_with(base.path(), &["--jobs", "2"], "sleep 1\n");
    // A data directory with nothing but an account file, as a volunteer brings it from
    // another host.
    let dir = client_dir(base.path(), "");
    let account = AccountFile {
        master_url: server.url.clone(),
        authenticator: KEY.to_owned(),
        ..AccountFile::default()
    };
    fs::write(dir.join(account_file_name(&server.url)), account.to_xml()).expect("account");
    assert!(!dir.join("client_state.xml").exists());

    let port = free_port();
    let mut client = start_client(&dir, port, None);
    client.wait_for("attached from its account file", T);
    let log = client.output();
    assert!(!log.contains("no usable state file"), "{log}");
    assert_attached_and_working(&server, &client, port);
}

#[test]
fn an_input_lost_while_the_daemon_runs_is_fetched_again_before_its_task_starts() {
    let base = tempfile::tempdir().expect("tmp");
    // Six jobs on four CPUs: two wait while four run.
    let server = Server::start_with(base.path(), &["--jobs", "6"], "sleep 3\n");
    let dir = client_dir(base.path(), "");
    let port = free_port();
    let client = start_client(&dir, port, Some(&server.url));
    let pdir = project_dir(&dir, &server);
    let names: Vec<String> = server
        .wait_until(&client, T, "six tasks sent", |s| s["results_sent"] == 6)["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect();
    let input_of = |r: &str| format!("{}_in", r.rsplit_once('_').map_or(r, |(wu, _)| wu));
    let started = |log: &str, r: &str| log.contains(&format!("starting task {r} "));
    ferrite_e2e::inspect::wait_until("four tasks run, all inputs in", T, || {
        let log = client.output();
        names.iter().filter(|r| started(&log, r)).count() == 4
            && names
                .iter()
                .all(|r| log.contains(&format!("Finished download of {}", input_of(r))))
    });
    let log = client.output();
    let waiting: Vec<&String> = names.iter().filter(|r| !started(&log, r)).collect();
    assert_eq!(waiting.len(), 2, "{log}");
    for r in &waiting {
        fs::remove_file(pdir.join(input_of(r))).expect("remove a waiting task's input");
    }

    let s = wait_all_reported(&server, &client, 6);
    let log = client.output();
    // The first of them to be started finds its input gone; the project's files are checked
    // and both inputs fetched again.
    assert!(
        waiting.iter().any(|r| log.contains(&format!(
            "cannot start task {r}: file {} is missing; checking the project's files",
            input_of(r)
        ))),
        "{log}"
    );
    for r in &waiting {
        let input = input_of(r);
        assert!(
            log.contains(&format!("file {input}: missing; it is downloaded again")),
            "{log}"
        );
        assert_eq!(downloads_of(&s, &input), 2, "{input}");
    }
    for (name, code) in reported(&s) {
        assert_eq!(code, 0, "{name} succeeded\n{log}");
    }
    assert_outputs(&server, &s);
}

#[test]
fn an_output_lost_before_its_upload_fails_only_its_task() {
    let base = tempfile::tempdir().expect("tmp");
    // The first upload fails, so its output waits for a retry when the client stops.
    let server = Server::start(base.path(), &["--jobs", "2", "--fault", "upload-500:1"]);
    let dir = client_dir(base.path(), "");
    let port = free_port();
    let mut client = start_client(&dir, port, Some(&server.url));
    server.wait_until(&client, T, "an upload refused", |s| {
        s["faults_armed"]["upload-500"].as_i64().unwrap_or(0) == 0
    });
    stop(&mut client);
    let state = load_state(&dir, "client_state.xml");
    let ps = &state.projects[0];
    let lost = ps
        .results
        .iter()
        .find(|r| {
            r.state == ResultState::FilesUploading
                && r.output_files
                    .iter()
                    .any(|o| ps.file(&o.file_name).is_some_and(|f| !f.uploaded))
        })
        .map(|r| r.name.clone())
        .expect("a task waiting to upload");
    let lost = &lost;
    let out = format!("{lost}_out");
    fs::remove_file(project_dir(&dir, &server).join(&out)).expect("remove an output");

    let client = start_client(&dir, port, None);
    let s = nudge_until_reported(&server, &client, port, (2, T), "both reported", false);
    let log = client.output();
    assert!(
        log.contains(&format!(
            "file {out}: missing; it cannot be downloaded again"
        )),
        "{log}"
    );
    assert!(log.contains(&format!("task {lost} fails (-187)")), "{log}");
    for (name, code) in reported(&s) {
        let want = if &name == lost { -187 } else { 0 };
        assert_eq!(code, want, "{name}\n{log}");
    }
    assert_outputs(&server, &s);
}
