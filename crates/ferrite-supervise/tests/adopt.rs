//! Taking over an app another supervisor started (a daemon killed with SIGKILL leaves its
//! apps running): its end is seen without a wait status and judged by the files it left.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use ferrite_supervise::procinfo::ProcStat;
use ferrite_supervise::{ExitOutcome, Slot, Task, TaskConfig};

/// A slot with a plain shell app (no BOINC API) running `script`.
fn shell_task(dd: &DataDir, script: &str) -> (Slot, TaskConfig) {
    let slot = dd.slots.allocate().unwrap();
    let prog = slot.dir().join("app.sh");
    std::fs::write(&prog, format!("#!/bin/sh\n{script}")).unwrap();
    make_executable(&prog);
    let mut cfg = config_for(&slot, "adopt", &[]);
    cfg.program = prog;
    cfg.uses_api = false;
    (slot, cfg)
}

/// Starts the app, then lets its supervisor go as a killed daemon would (the app runs on);
/// returns its PID and start time.
fn start_and_abandon(cfg: &TaskConfig) -> (i32, u64) {
    let task = Task::start(cfg.clone(), Instant::now()).unwrap();
    let pid = task.pid();
    let rec = task.abandon();
    assert_eq!(rec.pid, Some(pid));
    (pid, rec.pid_starttime)
}

/// Reaps our child `pid` once it is gone (the tests start the apps themselves).
fn reap(pid: i32) {
    // SAFETY: waitpid on our own child with a local status.
    unsafe {
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
    }
}

#[test]
fn an_app_taken_over_is_watched_to_its_end_and_judged_by_its_finish_file() {
    let dd = DataDir::new();
    let (slot, cfg) = shell_task(
        &dd,
        "sleep 1\necho run >> runs\necho 0 > boinc_finish_called\nexit 0\n",
    );
    let (pid, starttime) = start_and_abandon(&cfg);
    let mut task = Task::adopt(cfg, Some((pid, starttime)), Instant::now()).unwrap();
    assert!(task.is_adopted());
    assert_eq!(task.pid(), pid);
    let (exit, _) = run(&mut task, Duration::from_secs(30));
    let exit = exit.expect("the adopted app's end was not seen");
    assert!(
        matches!(exit.outcome, ExitOutcome::Finished(ref f) if f.status == 0),
        "{exit:?}"
    );
    // It ran once: taking over started nothing.
    assert_eq!(
        std::fs::read_to_string(slot.dir().join("runs")).unwrap(),
        "run\n"
    );
    assert!(task.record().pid.is_none());
    reap(pid);
}

#[test]
fn an_app_that_ended_unseen_is_finished_with_a_finish_file_and_restarts_without_one() {
    let dd = DataDir::new();
    let (slot, cfg) = shell_task(&dd, "exit 0\n");

    // No process and no finish file: the task restarts from its checkpoint.
    let mut task = Task::adopt(cfg.clone(), None, Instant::now()).unwrap();
    let (exit, _) = run(&mut task, Duration::from_secs(10));
    let exit = exit.expect("an app already gone is seen at the first poll");
    assert_eq!(exit.outcome, ExitOutcome::ExitedWithoutFinishing);
    assert!(exit.outcome.will_restart());

    // The finish file's status is the task's.
    std::fs::write(slot.dir().join("boinc_finish_called"), "0\n").unwrap();
    let mut task = Task::adopt(cfg.clone(), None, Instant::now()).unwrap();
    let (exit, _) = run(&mut task, Duration::from_secs(10));
    assert!(
        matches!(exit.unwrap().outcome, ExitOutcome::Finished(_)),
        "a finish file with status 0"
    );
    std::fs::write(slot.dir().join("boinc_finish_called"), "5\n").unwrap();
    let mut task = Task::adopt(cfg, None, Instant::now()).unwrap();
    let (exit, _) = run(&mut task, Duration::from_secs(10));
    assert_eq!(exit.unwrap().outcome, ExitOutcome::ExitedWithError(5));
}

#[test]
fn an_adopted_app_is_quit_through_its_group() {
    let dd = DataDir::new();
    let (_slot, cfg) = shell_task(&dd, "while :; do sleep 0.1; done\n");
    let (pid, starttime) = start_and_abandon(&cfg);
    let mut task = Task::adopt(cfg, Some((pid, starttime)), Instant::now()).unwrap();
    task.quit(Instant::now());
    let (exit, _) = run(&mut task, Duration::from_secs(30));
    assert_eq!(exit.expect("the quit app ended").outcome, ExitOutcome::Quit);
    reap(pid);
    assert!(ProcStat::read(pid).is_none(), "the app is gone");
}
