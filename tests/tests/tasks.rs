//! `ferrited` runs tasks: the two runnable tasks of the `02_tasks_running` fixture (a non-API
//! shell-script app that sleeps N seconds, N read from its input) are run to completion,
//! suspended and resumed through GUI RPC, stopped on SIGTERM without leaving a process, and
//! recovered after the daemon is killed.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use ferrite_e2e::{fixture_data_dir, free_port, gui_rpc, Proc};

const URL: &str = "http://127.0.0.1:18080/";
const PROJECT: &str = "projects/127.0.0.1_18080";

/// Makes everything in the copied fixture writable (the fixture files are read-only).
fn make_writable(dir: &Path) {
    for e in fs::read_dir(dir).expect("read dir") {
        let p = e.expect("entry").path();
        let mut perm = fs::metadata(&p).expect("stat").permissions();
        perm.set_mode(perm.mode() | 0o200);
        fs::set_permissions(&p, perm).expect("chmod");
        if p.is_dir() {
            make_writable(&p);
        }
    }
}

/// Sets how many seconds the app of `wu` (`long` or `abort`) sleeps, in the project input and
/// in the copy already in its slot.
fn set_duration(dir: &Path, wu: &str, slot: u32, secs: u32) {
    fs::write(
        dir.join(PROJECT).join(format!("wu_{wu}_in")),
        format!("{secs}\n"),
    )
    .expect("in");
    fs::write(dir.join(format!("slots/{slot}/in")), format!("{secs}\n")).expect("slot in");
}

/// The fixture with task durations `long_secs` (wu_long_0, slot 0) and `abort_secs`
/// (wu_abort_0, slot 1).
fn data_dir(long_secs: u32, abort_secs: u32) -> tempfile::TempDir {
    let d = fixture_data_dir("02_tasks_running");
    make_writable(d.path());
    set_duration(d.path(), "long", 0, long_secs);
    set_duration(d.path(), "abort", 1, abort_secs);
    d
}

fn start(dir: &Path, port: u16) -> Proc {
    let d = dir.to_str().expect("utf-8");
    let port = port.to_string();
    let mut p = Proc::ferrited(&[
        "--dir",
        d,
        "--gui_rpc_port",
        &port,
        "--skip_cpu_benchmarks",
        "--no_gpus",
    ]);
    p.wait_for("GUI RPC listening on TCP", Duration::from_secs(30));
    p
}

/// The `<result>` block of `name` in a state file.
fn result_block(state: &str, name: &str) -> String {
    let start = state
        .find(&format!("<name>{name}</name>"))
        .unwrap_or_else(|| panic!("no result {name}"));
    let end = state[start..].find("</result>").expect("end of result") + start;
    state[start..end].to_owned()
}

fn state(dir: &Path) -> String {
    fs::read_to_string(dir.join("client_state.xml")).expect("state file")
}

/// Processes whose working directory is inside `dir/slots`, with their /proc state letter.
fn slot_processes(dir: &Path) -> Vec<(i32, char, PathBuf)> {
    let slots = fs::canonicalize(dir.join("slots")).expect("slots dir");
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cwd) = fs::read_link(e.path().join("cwd")) else {
            continue;
        };
        if !cwd.starts_with(&slots) {
            continue;
        }
        let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // The state letter follows the command name in parentheses.
        let st = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].trim_start().chars().next())
            .unwrap_or('?');
        if st != 'Z' {
            out.push((pid, st, cwd));
        }
    }
    out
}

fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if cond() {
            return;
        }
        thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting until {what}");
}

fn assert_uploading(dir: &Path, result: &str, out_file: &str) {
    let s = state(dir);
    let r = result_block(&s, result);
    assert!(r.contains("<state>4</state>"), "{r}");
    assert!(r.contains("<exit_status>0</exit_status>"), "{r}");
    assert!(r.contains("fixture app done"), "stderr kept: {r}");
    let out = fs::read_to_string(dir.join(PROJECT).join(out_file)).expect("output file");
    assert!(out.starts_with("hello from the fixture app"), "{out}");
}

#[test]
fn runnable_tasks_run_to_completion_and_wait_for_upload() {
    let d = data_dir(2, 3);
    let mut p = start(d.path(), free_port());
    p.wait_for("task wu_long_0 finished", Duration::from_secs(60));
    p.wait_for("task wu_abort_0 finished", Duration::from_secs(60));
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(30)).success(), "{}", p.output());
    assert_uploading(d.path(), "wu_long_0", "wu_long_0_out");
    assert_uploading(d.path(), "wu_abort_0", "wu_abort_0_out");
    let s = state(d.path());
    assert!(
        !s.contains("<active_task>"),
        "no task left with a slot: {s}"
    );
    // Slots are emptied once their tasks end.
    for n in 0..2 {
        let slot = d.path().join(format!("slots/{n}"));
        assert_eq!(fs::read_dir(&slot).expect("slot").count(), 0, "slot {n}");
    }
}

#[test]
fn gui_rpc_suspend_stops_the_process_and_resume_continues_it() {
    let d = data_dir(6, 300);
    let port = free_port();
    let mut p = start(d.path(), port);
    p.wait_for("starting task wu_abort_0", Duration::from_secs(30));
    let dir = d.path().to_path_buf();
    let slot1 = fs::canonicalize(dir.join("slots/1")).expect("slot 1");
    let in_slot1 = |st: char| {
        let procs = slot_processes(&dir);
        let mine: Vec<_> = procs.iter().filter(|(_, _, c)| *c == slot1).collect();
        !mine.is_empty()
            && mine
                .iter()
                .all(|(_, s, _)| *s == st || (st == 'S' && *s == 'R'))
    };
    wait_until("wu_abort_0 runs", Duration::from_secs(20), || in_slot1('S'));
    let r = gui_rpc(
        port,
        Some("testpw"),
        &format!("<suspend_result>\n<project_url>{URL}</project_url>\n<name>wu_abort_0</name>\n</suspend_result>\n"),
    );
    assert!(r.contains("<success/>"), "{r}");
    wait_until("wu_abort_0 is stopped (T)", Duration::from_secs(20), || {
        in_slot1('T')
    });
    // The GUI sees it suspended, with its process.
    let tasks = gui_rpc(port, Some("testpw"), "<get_results/>\n");
    let block = result_block(&tasks, "wu_abort_0");
    assert!(
        block.contains("<active_task_state>9</active_task_state>"),
        "{block}"
    );
    let r = gui_rpc(
        port,
        Some("testpw"),
        &format!("<resume_result>\n<project_url>{URL}</project_url>\n<name>wu_abort_0</name>\n</resume_result>\n"),
    );
    assert!(r.contains("<success/>"), "{r}");
    wait_until("wu_abort_0 runs again", Duration::from_secs(20), || {
        in_slot1('S')
    });
    // The other task is unaffected and completes.
    p.wait_for("task wu_long_0 finished", Duration::from_secs(60));
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(30)).success(), "{}", p.output());
}

#[test]
fn sigterm_leaves_no_app_behind_and_a_restart_completes_the_task() {
    let d = data_dir(1, 8);
    let port = free_port();
    let mut p = start(d.path(), port);
    p.wait_for("starting task wu_abort_0", Duration::from_secs(30));
    wait_until("an app runs", Duration::from_secs(20), || {
        !slot_processes(d.path()).is_empty()
    });
    thread::sleep(Duration::from_secs(2));
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(40)).success(), "{}", p.output());
    assert!(
        slot_processes(d.path()).is_empty(),
        "apps outlived the daemon: {:?}",
        slot_processes(d.path())
    );
    let s = state(d.path());
    assert!(result_block(&s, "wu_abort_0").contains("<state>2</state>"));
    assert!(
        s.contains("<result_name>wu_abort_0</result_name>"),
        "still owns its slot"
    );

    let mut p = start(d.path(), free_port());
    p.wait_for("task wu_abort_0 finished", Duration::from_secs(60));
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(30)).success(), "{}", p.output());
    assert_uploading(d.path(), "wu_abort_0", "wu_abort_0_out");
}

#[test]
fn after_the_daemon_is_killed_the_orphan_is_ended_and_the_task_completes() {
    let d = data_dir(1, 300);
    let mut p = start(d.path(), free_port());
    p.wait_for("starting task wu_abort_0", Duration::from_secs(30));
    let slot1 = fs::canonicalize(d.path().join("slots/1")).expect("slot 1");
    wait_until("wu_abort_0 runs", Duration::from_secs(20), || {
        slot_processes(d.path()).iter().any(|(_, _, c)| *c == slot1)
    });
    // Wait for the records file to name the running app, then kill the daemon outright.
    wait_until(
        "the task record is written",
        Duration::from_secs(20),
        || {
            fs::read_to_string(d.path().join("ferrite_tasks.json"))
                .is_ok_and(|t| t.contains("wu_abort_0"))
        },
    );
    p.signal(libc::SIGKILL);
    let _ = p.wait(Duration::from_secs(10));
    let orphans: Vec<i32> = slot_processes(d.path())
        .iter()
        .filter(|(_, _, c)| *c == slot1)
        .map(|(pid, _, _)| *pid)
        .collect();
    assert!(!orphans.is_empty(), "the app outlives a SIGKILLed daemon");

    // Shorten the job so that the restarted task completes quickly.
    set_duration(d.path(), "abort", 1, 2);
    let mut p = start(d.path(), free_port());
    p.wait_for("left running by a previous client", Duration::from_secs(30));
    for pid in &orphans {
        assert!(
            !Path::new(&format!("/proc/{pid}/cwd")).exists()
                || fs::read_link(format!("/proc/{pid}/cwd")).map_or(true, |c| c != slot1),
            "orphan {pid} still runs"
        );
    }
    p.wait_for("task wu_abort_0 finished", Duration::from_secs(60));
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(30)).success(), "{}", p.output());
    assert_uploading(d.path(), "wu_abort_0", "wu_abort_0_out");
}

#[test]
fn run_mode_never_stops_every_app_and_always_lets_them_continue() {
    let d = data_dir(300, 300);
    let port = free_port();
    let mut p = start(d.path(), port);
    p.wait_for("starting task wu_long_0", Duration::from_secs(30));
    p.wait_for("starting task wu_abort_0", Duration::from_secs(30));
    let dir = d.path().to_path_buf();
    let all = |st: char| {
        let procs = slot_processes(&dir);
        procs.len() >= 2
            && procs
                .iter()
                .all(|(_, s, _)| *s == st || (st == 'S' && *s == 'R'))
    };
    wait_until("both apps run", Duration::from_secs(20), || all('S'));
    let r = gui_rpc(
        port,
        Some("testpw"),
        "<set_run_mode>\n<never/>\n<duration>0</duration>\n</set_run_mode>\n",
    );
    assert!(r.contains("<success/>"), "{r}");
    wait_until("every app is stopped (T)", Duration::from_secs(20), || {
        all('T')
    });
    let r = gui_rpc(
        port,
        Some("testpw"),
        "<set_run_mode>\n<always/>\n<duration>0</duration>\n</set_run_mode>\n",
    );
    assert!(r.contains("<success/>"), "{r}");
    wait_until("both apps run again", Duration::from_secs(20), || all('S'));
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(40)).success(), "{}", p.output());
    assert!(
        slot_processes(d.path()).is_empty(),
        "no app outlives the daemon"
    );
}
