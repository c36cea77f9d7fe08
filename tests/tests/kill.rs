//! A kill costs no finished work: `ferrited` killed with SIGKILL while its apps run, and
//! started again, reports a result whose app finished meanwhile without running it again,
//! and takes over an app that still runs instead of ending it and starting it over, also
//! when the kill came before its process was recorded.
//!
//! Each app run appends a line to a side file, so the runs are counted.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferrite_e2e::free_port;
use ferrite_e2e::testproject::{client_dir, start_client, Server, ShellApp};

/// The lines of the runs file (one per app run).
fn runs(path: &Path) -> usize {
    fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// Polls `cond` every 50 ms until it holds; panics with `what` after `limit`.
fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether any process works in a slot of `dir`.
fn app_running(dir: &Path) -> bool {
    let slots = fs::canonicalize(dir.join("slots")).unwrap_or_else(|_| dir.join("slots"));
    fs::read_dir("/proc").expect("/proc").flatten().any(|e| {
        fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(&slots))
            && fs::read_to_string(e.path().join("stat")).is_ok_and(|s| {
                !s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
    })
}

/// A finish file in any slot of `dir`.
fn finish_file(dir: &Path) -> Option<PathBuf> {
    fs::read_dir(dir.join("slots"))
        .ok()?
        .flatten()
        .map(|e| e.path().join("boinc_finish_called"))
        .find(|p| p.exists())
}

/// The apps of these tests count their runs in a file outside their slot and project, which a
/// confined app cannot write: they run unconfined (confinement has its own tests, `confine.rs`
/// and the real-server tests).
const UNCONFINED: &str = "<ferrite_confine_apps>0</ferrite_confine_apps>";

/// One job whose app runs `secs` seconds and counts its runs in `tmp/runs.log`.
fn one_job(tmp: &Path, secs: &str) -> (Server, PathBuf) {
    let runs = tmp.join("runs.log");
    let prelude = format!("echo run >> '{}'\nsleep {secs}\n", runs.display());
    let server = Server::start_apps(
        tmp,
        &[ShellApp {
            name: "alpha",
            word: "hello",
            prelude: &prelude,
        }],
        &["--jobs", "1"],
    );
    (server, runs)
}

fn uploaded(server: &Server, s: &serde_json::Value) -> String {
    let name = s["results"][0]["name"].as_str().expect("a result");
    fs::read_to_string(
        server
            .data
            .join("results")
            .join(name)
            .join(format!("{name}_out")),
    )
    .unwrap_or_default()
}

/// Starts ferrited again on `dir` until the server has the job's report, checks that the app
/// ran once in all and its result is good, and returns the second run's log.
fn restart_until_reported(
    server: &Server,
    dir: &Path,
    port: u16,
    runs_log: &Path,
    first: &str,
) -> String {
    let client = start_client(dir, port, None);
    let s = server.wait_until(&client, Duration::from_secs(60), "the job reported", |s| {
        s["results_reported"].as_u64() == Some(1)
    });
    let log = client.output();
    assert_eq!(
        runs(runs_log),
        1,
        "the app ran again\n--- first ---\n{first}\n--- second ---\n{log}"
    );
    assert_eq!(s["results"][0]["exit_status"], 0, "{s}");
    assert_eq!(uploaded(server, &s), "hello world\n", "{log}");
    log
}

#[test]
fn an_app_that_finishes_while_ferrited_is_down_is_reported_without_a_second_run() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (server, runs_log) = one_job(tmp.path(), "1.5");
    let dir = client_dir(tmp.path(), UNCONFINED);
    let port = free_port();
    let mut client = start_client(&dir, port, Some(&server.url));
    wait_for(Duration::from_secs(60), "the app started", || {
        runs(&runs_log) == 1
    });
    client.signal(libc::SIGKILL);
    client.wait(Duration::from_secs(10));
    let first = client.output();
    // The app goes on without a client and finishes: boinc_finish_called, outputs in place.
    wait_for(Duration::from_secs(30), "the app finished", || {
        finish_file(&dir).is_some() && !app_running(&dir)
    });

    let log = restart_until_reported(&server, &dir, port, &runs_log, &first);
    assert!(
        log.contains("its app finished while no client ran"),
        "the log says the finish was found\n{log}"
    );
}

#[test]
fn an_app_still_running_after_a_kill_is_taken_over_not_started_again() {
    taken_over_after_a_kill(false);
}

/// A task is recorded as starting before its app is spawned, and its PID once it runs: a kill
/// in between leaves a record without a PID, and the app leading a group in that task's slot
/// is taken over all the same (here the record's PID is removed after the kill, as such a kill
/// would have left it).
#[test]
fn an_app_whose_pid_was_not_yet_recorded_is_taken_over_not_started_again() {
    taken_over_after_a_kill(true);
}

fn taken_over_after_a_kill(unrecorded_pid: bool) {
    let tmp = tempfile::tempdir().expect("tmp");
    let (server, runs_log) = one_job(tmp.path(), "4");
    let dir = client_dir(tmp.path(), UNCONFINED);
    let port = free_port();
    let mut client = start_client(&dir, port, Some(&server.url));
    wait_for(Duration::from_secs(60), "the app started", || {
        runs(&runs_log) == 1
    });
    // Its task record is written as it starts; give the app's start a moment to be recorded.
    wait_for(Duration::from_secs(10), "the task record", || {
        fs::read_to_string(dir.join("ferrite_tasks.json"))
            .is_ok_and(|t| t.contains("\"pid\": ") && !t.contains("\"pid\": null"))
    });
    client.signal(libc::SIGKILL);
    client.wait(Duration::from_secs(10));
    let first = client.output();
    assert!(app_running(&dir), "the app outlives its client\n{first}");
    if unrecorded_pid {
        let path = dir.join("ferrite_tasks.json");
        let text = fs::read_to_string(&path).expect("the task records");
        let mut records: serde_json::Value = serde_json::from_str(&text).expect("json");
        for r in records.as_array_mut().expect("a list of records") {
            r["pid"] = serde_json::Value::Null;
            r["pid_starttime"] = 0.into();
        }
        fs::write(&path, records.to_string()).expect("write the records");
    }

    let log = restart_until_reported(&server, &dir, port, &runs_log, &first);
    assert!(
        log.contains("taking over task") && log.contains("left running by a previous client"),
        "the log says the app was taken over\n{log}"
    );
    assert!(!app_running(&dir), "no app is left");
}
