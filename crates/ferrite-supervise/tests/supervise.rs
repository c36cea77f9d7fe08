//! Integration tests of the supervision layer: real slots, the real BOINC API (a C++ app linked
//! against libboinc-app-dev) and a plain shell app without the API.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use ferrite_supervise::msg::{AppStatus, Heartbeat};
use ferrite_supervise::procinfo::{sample_tree, ProcStat};
use ferrite_supervise::shmem::{self, Channel, SHMEM_SIZE};
use ferrite_supervise::{
    end_orphans, find_orphans, slot, Checkpoint, ExitOutcome, FileRole, LimitExceeded, LinkMode,
    Priority, SlotError, SlotFile, Task, TaskEvent, TaskRecord, TaskStateFile,
};

const FIXTURE_MMAP: &[u8] = include_bytes!("fixtures/boinc_mmap_file");
const FIXTURE_SHELL_APP: &[u8] = include_bytes!("fixtures/fixture_app_2.00.sh");
const FIXTURE_SOFT_LINK: &str = include_str!("fixtures/soft_link_fixture_app");

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn alive(pid: i32) -> bool {
    ProcStat::read(pid).is_some_and(|s| !s.is_dead())
}

// ---------------------------------------------------------------- channel fixture

#[test]
fn official_mmap_file_decodes_and_reencodes_byte_for_byte() {
    assert_eq!(FIXTURE_MMAP.len(), SHMEM_SIZE);
    let mut buf = FIXTURE_MMAP.to_vec();
    assert!(shmem::is_full(&buf, Channel::Heartbeat));
    for ch in [
        Channel::ProcessControlRequest,
        Channel::ProcessControlReply,
        Channel::GraphicsRequest,
        Channel::GraphicsReply,
        Channel::AppStatus,
        Channel::TrickleUp,
        Channel::TrickleDown,
    ] {
        assert!(!shmem::is_full(&buf, ch), "{ch:?} unexpectedly full");
    }
    let text = shmem::take(&mut buf, Channel::Heartbeat).unwrap();
    let hb = Heartbeat::decode(&text).unwrap();
    assert_eq!(hb.wss, 0.0);
    assert_eq!(hb.max_wss, 2.274886e10);
    assert!(!hb.network_suspended);
    // Rebuild the official client's segment from our encoder: identical bytes.
    let mut ours = vec![0u8; SHMEM_SIZE];
    assert!(shmem::put(
        &mut ours,
        Channel::Heartbeat,
        &hb.encode(),
        false
    ));
    assert_eq!(ours, FIXTURE_MMAP);
}

#[test]
fn status_message_in_a_segment_round_trips() {
    let mut buf = FIXTURE_MMAP.to_vec();
    let st = AppStatus {
        current_cpu_time: 12.5,
        checkpoint_cpu_time: 10.0,
        fraction_done: Some(0.25),
        want_network: true,
        ..AppStatus::default()
    };
    assert!(shmem::put(
        &mut buf,
        Channel::AppStatus,
        &st.encode(),
        false
    ));
    assert_eq!(
        AppStatus::decode(&shmem::take(&mut buf, Channel::AppStatus).unwrap()),
        st
    );
    // The heartbeat beside it is untouched.
    assert!(shmem::is_full(&buf, Channel::Heartbeat));
}

// ---------------------------------------------------------------- slots

#[test]
fn slots_are_allocated_lowest_first_cleaned_and_never_shared() {
    let dd = DataDir::new();
    dd.project_file("fixture_app_2.00.sh", FIXTURE_SHELL_APP);
    dd.project_file("wu_in", b"120\n");
    let s0 = dd.slots.allocate().unwrap();
    let s1 = dd.slots.allocate().unwrap();
    assert_eq!((s0.number(), s1.number()), (0, 1));
    assert!(matches!(dd.slots.claim(1), Err(SlotError::InUse(1))));

    let files = vec![
        SlotFile {
            open_name: "fixture_app_2.00.sh".into(),
            project_dir: PROJECT.into(),
            file_name: "fixture_app_2.00.sh".into(),
            mode: LinkMode::SoftLinkFile,
            role: FileRole::Input,
        },
        SlotFile {
            open_name: "in".into(),
            project_dir: PROJECT.into(),
            file_name: "wu_in".into(),
            mode: LinkMode::Copy,
            role: FileRole::Input,
        },
        SlotFile {
            open_name: "in_link".into(),
            project_dir: PROJECT.into(),
            file_name: "wu_in".into(),
            mode: LinkMode::Symlink,
            role: FileRole::Input,
        },
        SlotFile {
            open_name: "out".into(),
            project_dir: PROJECT.into(),
            file_name: "wu_out".into(),
            mode: LinkMode::Copy,
            role: FileRole::Output,
        },
    ];
    s0.setup(&files, "<app_init_data>\n</app_init_data>\n")
        .unwrap();
    let d = s0.dir();
    // The soft-link file is byte-identical to the official client's.
    assert_eq!(
        std::fs::read_to_string(d.join("fixture_app_2.00.sh")).unwrap(),
        FIXTURE_SOFT_LINK
    );
    assert_eq!(std::fs::read(d.join("in")).unwrap(), b"120\n");
    assert_eq!(std::fs::read(d.join("in_link")).unwrap(), b"120\n");
    assert!(d.join("in_link").symlink_metadata().unwrap().is_symlink());
    assert!(!d.join("out").exists());
    assert_eq!(
        std::fs::read_to_string(d.join("init_data.xml")).unwrap(),
        "<app_init_data>\n</app_init_data>\n"
    );
    assert!(d.join("stderr.txt").exists());
    assert!(s0.is_setup_complete());

    // Copy-mode outputs move to the project directory when the task ends.
    std::fs::write(d.join("out"), b"result").unwrap();
    s0.move_copied_outputs(&files).unwrap();
    assert_eq!(
        std::fs::read(dd.project_dir().join("wu_out")).unwrap(),
        b"result"
    );

    // Releasing empties the slot; the next allocation reuses number 0, clean.
    std::fs::write(d.join("leftover"), b"x").unwrap();
    std::fs::create_dir(d.join("subdir")).unwrap();
    let dir0 = d.to_path_buf();
    dd.slots.release(s0).unwrap();
    assert_eq!(std::fs::read_dir(&dir0).unwrap().count(), 0);
    std::fs::write(dir0.join("stale"), b"x").unwrap();
    let again = dd.slots.allocate().unwrap();
    assert_eq!(again.number(), 0);
    assert_eq!(std::fs::read_dir(again.dir()).unwrap().count(), 0);
    // A parked slot keeps its contents and can be claimed back.
    std::fs::write(again.dir().join("ckpt"), b"5").unwrap();
    dd.slots.park(again);
    let claimed = dd.slots.claim(0).unwrap();
    assert_eq!(std::fs::read(claimed.dir().join("ckpt")).unwrap(), b"5");
}

#[test]
fn a_setup_cut_short_mid_copy_leaves_no_partial_input() {
    // The daemon was killed while copying a copy-mode input into a claimed slot: the setup
    // marker is missing, and a partial copy lies under the temporary name. The next setup
    // (entries that exist are kept) puts the whole file in place.
    let dd = DataDir::new();
    dd.project_file("wu_in", b"world\n");
    let slot = dd.slots.allocate().unwrap();
    std::fs::write(slot.dir().join("in.ferrite-copy"), b"").unwrap();
    let files = vec![SlotFile {
        open_name: "in".into(),
        project_dir: PROJECT.into(),
        file_name: "wu_in".into(),
        mode: LinkMode::Copy,
        role: FileRole::Input,
    }];
    slot.setup(&files, "<app_init_data>\n</app_init_data>\n")
        .unwrap();
    assert_eq!(std::fs::read(slot.dir().join("in")).unwrap(), b"world\n");
    assert!(!slot.dir().join("in.ferrite-copy").exists());
}

#[test]
fn hostile_names_from_the_server_are_refused_before_anything_is_written() {
    let dd = DataDir::new();
    let slot = dd.slots.allocate().unwrap();
    for (open, dir, file) in [
        ("../../evil", PROJECT, "f"),
        ("/etc/passwd", PROJECT, "f"),
        ("ok", "..", "f"),
        ("ok", PROJECT, "../../../etc/shadow"),
        ("a/b", PROJECT, "f"),
    ] {
        let files = vec![SlotFile {
            open_name: open.into(),
            project_dir: dir.into(),
            file_name: file.into(),
            mode: LinkMode::SoftLinkFile,
            role: FileRole::Input,
        }];
        let err = slot.setup(&files, "<app_init_data/>").unwrap_err();
        assert!(matches!(err, SlotError::UnsafeName(_)), "{err}");
    }
    assert_eq!(std::fs::read_dir(slot.dir()).unwrap().count(), 0);
    assert!(!dd.tmp.path().join("evil").exists());
}

// ---------------------------------------------------------------- API app

#[test]
fn api_app_runs_to_completion() {
    let dd = DataDir::new();
    // Long enough steps for the API's one-second timer to pass on the trickle-up notice.
    let (slot, cfg) = api_task(&dd, "complete", 5, &["--step-ms", "300", "--trickle"]);
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    let (exit, events) = run(&mut task, secs(30.0));
    let exit = exit.expect("task did not exit");
    match &exit.outcome {
        ExitOutcome::Finished(f) => assert_eq!(f.status, 0),
        other => panic!("not finished: {other:?}\n{}", exit.stderr),
    }
    assert!(!exit.outcome.will_restart());
    assert_eq!(
        std::fs::read_to_string(dd.project_dir().join("complete_out")).unwrap(),
        "done 5 steps\n"
    );
    assert_eq!(exit.usage.fraction_done, 1.0);
    assert!(exit.usage.elapsed_time > 0.3, "{:?}", exit.usage);
    assert!(exit.usage.peak_working_set > 0);
    assert!(exit.stderr.contains("finished"), "{}", exit.stderr);
    // The trickle-up file was moved into the project directory.
    let trickle = events.iter().find_map(|e| match e {
        TaskEvent::TrickleUp(p) => Some(p.clone()),
        _ => None,
    });
    let listing: Vec<_> = std::fs::read_dir(slot.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let trickle = trickle.unwrap_or_else(|| panic!("no trickle-up event: {events:?} {listing:?}"));
    let text = std::fs::read_to_string(&trickle).unwrap();
    assert!(text.contains("<variety>test</variety>") && text.contains("<value>42</value>"));
    assert!(!slot.dir().join("trickle_up.xml").exists());
    // No process of the task is left.
    assert!(!alive(task.pid()));
    assert!(task.record().pid.is_none());
}

#[test]
fn suspend_stops_cpu_and_resume_restarts_it() {
    let dd = DataDir::new();
    let (_slot, cfg) = api_task(&dd, "suspend", 1, &["--forever", "--spin"]);
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    idle(&mut task, secs(1.5));
    let pid = task.pid();
    let running = sample_tree(pid, &[]).cpu_time;
    assert!(running > 0.1, "app did not compute: {running}");
    task.suspend(Instant::now());
    idle(&mut task, secs(1.0));
    let c1 = sample_tree(pid, &[]).cpu_time;
    let events = idle(&mut task, secs(1.5));
    let c2 = sample_tree(pid, &[]).cpu_time;
    assert!(c2 - c1 < 0.1, "CPU advanced while suspended: {c1} -> {c2}");
    // The API obeyed: no SIGSTOP was needed.
    assert!(!task.is_stopped_by_signal());
    assert!(!events.contains(&TaskEvent::StoppedBySignal));
    let elapsed_suspended = task.usage().elapsed_time;
    task.resume(Instant::now());
    // Computing again: its CPU time grows (at the pace a loaded machine gives it).
    let deadline = Instant::now() + secs(30.0);
    let mut c3 = c2;
    while c3 - c2 <= 0.2 && Instant::now() < deadline {
        idle(&mut task, secs(0.5));
        c3 = sample_tree(pid, &[]).cpu_time;
    }
    assert!(c3 - c2 > 0.2, "CPU did not resume: {c2} -> {c3}");
    idle(&mut task, secs(1.0));
    assert!(task.usage().elapsed_time > elapsed_suspended + 1.0);
    task.abort(203, Instant::now());
    let (exit, _) = run(&mut task, secs(15.0));
    assert_eq!(exit.unwrap().outcome, ExitOutcome::Aborted(203));
}

#[test]
fn quit_at_a_checkpoint_then_restart_resumes_from_it() {
    let dd = DataDir::new();
    let (slot, cfg) = api_task(&dd, "restart", 40, &["--spin", "--step-ms", "50"]);
    let mut task = Task::start(cfg.clone(), Instant::now()).unwrap();
    let (exit, _) = run_until(
        &mut task,
        secs(30.0),
        |e| matches!(e, TaskEvent::Checkpoint(c) if c.cpu_time > 0.2),
    );
    assert!(exit.is_none(), "finished before a checkpoint");
    task.quit(Instant::now());
    let (exit, _) = run(&mut task, secs(15.0));
    let exit = exit.expect("did not quit");
    assert_eq!(exit.outcome, ExitOutcome::Quit);
    assert!(exit.outcome.will_restart());
    let record: TaskRecord = task.record();
    assert!(record.checkpoint_cpu_time > 0.2);
    // The official client's per-slot checkpoint file agrees with the record.
    let state = TaskStateFile::read(slot.dir(), "http://127.0.0.1:18080/", "restart_0").unwrap();
    assert_eq!(
        state.checkpoint_cpu_time,
        (record.checkpoint_cpu_time * 1e6).round() / 1e6
    );
    assert!(record.checkpoint_elapsed_time > 0.0);
    // The record survives a round trip through the daemon's persistence.
    let json = serde_json::to_string(&record).unwrap();
    let record: TaskRecord = serde_json::from_str(&json).unwrap();
    let done_steps: u32 = std::fs::read_to_string(slot.dir().join("ckpt"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!((1..40).contains(&done_steps));

    // A new episode in the same slot, resumed from the record.
    let resume = record.checkpoint();
    slot.write_init_data(&init_data(slot.number(), resume))
        .unwrap();
    let mut cfg2 = cfg;
    cfg2.resume_from = resume;
    let mut task = Task::start(cfg2, Instant::now()).unwrap();
    let (exit, _) = run(&mut task, secs(40.0));
    let exit = exit.expect("restart did not finish");
    assert!(matches!(exit.outcome, ExitOutcome::Finished(_)), "{exit:?}");
    assert!(
        exit.stderr
            .contains(&format!("resuming from checkpoint at step {done_steps}")),
        "{}",
        exit.stderr
    );
    assert!(exit.usage.cpu_time >= resume.cpu_time);
    assert!(exit.usage.elapsed_time >= resume.elapsed_time);
    assert_eq!(
        std::fs::read_to_string(dd.project_dir().join("restart_out")).unwrap(),
        "done 40 steps\n"
    );
}

#[test]
fn crash_is_classified_and_stderr_captured() {
    let dd = DataDir::new();
    let (_slot, cfg) = api_task(&dd, "crash", 10, &["--crash"]);
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    let (exit, _) = run(&mut task, secs(30.0));
    let exit = exit.unwrap();
    assert!(
        matches!(
            exit.outcome,
            ExitOutcome::Crashed {
                exit_code: Some(193),
                ..
            } | ExitOutcome::Crashed {
                signal: Some(libc::SIGSEGV),
                ..
            }
        ),
        "{:?}",
        exit.outcome
    );
    assert!(!exit.outcome.will_restart());
    assert!(exit.stderr.contains("about to crash"), "{}", exit.stderr);
}

#[test]
fn temporary_exit_returns_reason_and_delay() {
    let dd = DataDir::new();
    let (_slot, cfg) = api_task(&dd, "temp", 10, &["--temp-exit"]);
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    let (exit, _) = run(&mut task, secs(30.0));
    match exit.unwrap().outcome {
        ExitOutcome::TemporaryExit(t) => {
            assert_eq!(t.delay, 77.0);
            assert_eq!(t.reason, "waiting for test resource");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn elapsed_time_limit_aborts_with_197() {
    let dd = DataDir::new();
    let (_slot, mut cfg) = api_task(&dd, "timelimit", 1, &["--forever"]);
    cfg.limits.max_elapsed = Some(1.5);
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    let (exit, events) = run(&mut task, secs(20.0));
    let exit = exit.unwrap();
    assert_eq!(exit.outcome, ExitOutcome::Aborted(197));
    assert_eq!(exit.outcome.exit_status(), 197);
    assert!(matches!(
        exit.limit,
        Some(LimitExceeded::ElapsedTime { .. })
    ));
    assert!(events
        .iter()
        .any(|e| matches!(e, TaskEvent::LimitExceeded(l) if l.exit_code() == 197)));
    assert!(exit.usage.elapsed_time >= 1.5);
}

#[test]
fn slot_disk_limit_aborts_with_196() {
    let dd = DataDir::new();
    let (_slot, mut cfg) = api_task(&dd, "disk", 1, &["--forever", "--fill", "4"]);
    cfg.limits.disk_bound = Some(1 << 20);
    cfg.limits.disk_check_interval = Duration::from_millis(200);
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    let (exit, _) = run(&mut task, secs(20.0));
    let exit = exit.unwrap();
    assert_eq!(exit.outcome, ExitOutcome::Aborted(196));
    match exit.limit {
        Some(LimitExceeded::Disk { usage, bound }) => {
            assert_eq!(bound, 1 << 20);
            assert!(usage > bound);
        }
        other => panic!("{other:?}"),
    }
    assert!(exit.usage.peak_disk_usage >= 4 << 20);
}

#[test]
fn working_set_of_a_memory_hog_is_reported() {
    let dd = DataDir::new();
    let (_slot, cfg) = api_task(&dd, "mem", 1, &["--forever", "--alloc", "96"]);
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    let deadline = Instant::now() + secs(15.0);
    while task.usage().working_set < 90 << 20 && Instant::now() < deadline {
        idle(&mut task, secs(0.2));
    }
    assert!(task.usage().working_set >= 90 << 20, "{:?}", task.usage());
    assert!(task.usage().peak_working_set >= task.usage().working_set);
    // The virtual size (the GUI's swap size) holds at least what is resident.
    assert!(
        task.usage().swap_size >= task.usage().working_set,
        "{:?}",
        task.usage()
    );
    task.abort(198, Instant::now());
    let (exit, _) = run(&mut task, secs(15.0));
    let exit = exit.unwrap();
    assert_eq!(exit.outcome, ExitOutcome::Aborted(198));
    assert!(exit.usage.peak_working_set >= 90 << 20);
}

#[test]
fn forked_child_is_stopped_and_killed_with_the_app() {
    let dd = DataDir::new();
    let (slot, cfg) = api_task(&dd, "fork", 1, &["--forever", "--fork"]);
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    let pid = task.pid();
    let deadline = Instant::now() + secs(10.0);
    let child = loop {
        idle(&mut task, secs(0.2));
        let members = sample_tree(pid, &[]).members;
        if let Some(c) = members.iter().find(|m| m.pid != pid) {
            break c.pid;
        }
        assert!(Instant::now() < deadline, "child never appeared");
    };
    assert_eq!(ProcStat::read(child).unwrap().pgrp, pid);
    // The API suspends the worker only; the spinning child makes the supervisor stop the group.
    task.suspend(Instant::now());
    // Once the spinning child's CPU time is seen to grow (however slowly a loaded machine
    // lets it), the group is stopped.
    let deadline = Instant::now() + secs(30.0);
    let mut events = Vec::new();
    while !events.contains(&TaskEvent::StoppedBySignal) && Instant::now() < deadline {
        events.extend(idle(&mut task, secs(0.5)));
    }
    assert!(events.contains(&TaskEvent::StoppedBySignal), "{events:?}");
    assert_eq!(ProcStat::read(child).unwrap().state, 'T');
    let c1 = sample_tree(pid, &[]).cpu_time;
    idle(&mut task, secs(0.6));
    assert!(sample_tree(pid, &[]).cpu_time - c1 < 0.05);
    task.abort(203, Instant::now());
    let (exit, _) = run(&mut task, secs(15.0));
    assert_eq!(exit.unwrap().outcome, ExitOutcome::Aborted(203));
    let gone_deadline = Instant::now() + secs(5.0);
    while alive(child) && Instant::now() < gone_deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(child), "child {child} survived");
    assert!(std::fs::read_to_string(slot.dir().join("stderr.txt"))
        .unwrap()
        .contains("spinning"));
}

#[test]
fn app_ignoring_quit_gets_sigterm_then_sigkill() {
    // A shell app that traps SIGTERM and marks itself as using the API, so <quit/> goes unread.
    let dd = DataDir::new();
    let prog = dd.project_program(
        "stubborn.sh",
        b"#!/bin/sh\ntrap 'echo got TERM >&2' TERM\nwhile :; do sleep 0.1; done\n",
    );
    let slot = dd.slots.allocate().unwrap();
    slot.setup(&[], &init_data(slot.number(), Checkpoint::default()))
        .unwrap();
    let mut cfg = config_for(&slot, "stubborn", &[]);
    cfg.program = prog;
    cfg.timing.quit_timeout = Duration::from_millis(500);
    cfg.timing.term_grace = Duration::from_millis(700);
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    idle(&mut task, secs(0.5));
    let started = Instant::now();
    task.quit(started);
    let (exit, _) = run(&mut task, secs(10.0));
    let exit = exit.unwrap();
    assert_eq!(exit.outcome, ExitOutcome::Quit);
    assert!(started.elapsed() >= Duration::from_millis(1200));
    assert!(exit.stderr.contains("got TERM"), "{}", exit.stderr);
    assert!(!alive(task.pid()));
}

// ---------------------------------------------------------------- app without the API

fn shell_task(
    dd: &DataDir,
    seconds: u32,
) -> (ferrite_supervise::Slot, ferrite_supervise::TaskConfig) {
    dd.project_program("fixture_app_2.00.sh", FIXTURE_SHELL_APP);
    dd.project_file("wu_in", format!("{seconds}\n").as_bytes());
    let slot = dd.slots.allocate().unwrap();
    let files = vec![
        SlotFile {
            open_name: "fixture_app_2.00.sh".into(),
            project_dir: PROJECT.into(),
            file_name: "fixture_app_2.00.sh".into(),
            mode: LinkMode::SoftLinkFile,
            role: FileRole::Input,
        },
        SlotFile {
            open_name: "in".into(),
            project_dir: PROJECT.into(),
            file_name: "wu_in".into(),
            mode: LinkMode::Copy,
            role: FileRole::Input,
        },
    ];
    slot.setup(&files, &init_data(slot.number(), Checkpoint::default()))
        .unwrap();
    let mut cfg = config_for(&slot, "shell", &["--fixture-arg", "1"]);
    cfg.program = format!("../../projects/{PROJECT}/fixture_app_2.00.sh").into();
    cfg.uses_api = false;
    (slot, cfg)
}

#[test]
fn shell_app_without_api_is_suspended_by_signals_and_finishes() {
    let dd = DataDir::new();
    let (slot, cfg) = shell_task(&dd, 2);
    let started = Instant::now();
    let mut task = Task::start(cfg, started).unwrap();
    idle(&mut task, secs(0.5));
    let stopped_at = Instant::now();
    task.suspend(stopped_at);
    assert!(task.is_stopped_by_signal());
    idle(&mut task, secs(0.3));
    let pid = task.pid();
    assert_eq!(ProcStat::read(pid).unwrap().state, 'T');
    let members = sample_tree(pid, &[]);
    assert!(members.all_stopped, "{members:?}");
    idle(&mut task, secs(2.0));
    // Stopped for 2 s of a 2 s job: it cannot have finished.
    assert!(alive(pid));
    let resumed_at = Instant::now();
    task.resume(resumed_at);
    assert!(!task.is_stopped_by_signal());
    let (exit, _) = run(&mut task, secs(20.0));
    let ended = Instant::now();
    let exit = exit.unwrap();
    assert!(matches!(exit.outcome, ExitOutcome::Finished(_)), "{exit:?}");
    assert_eq!(
        std::fs::read_to_string(slot.dir().join("out")).unwrap(),
        "hello from the fixture app, slept 2 s\n"
    );
    assert!(
        exit.stderr
            .contains("fixture app starting in 0, args: --fixture-arg 1"),
        "{}",
        exit.stderr
    );
    // Time stopped does not count as elapsed: the elapsed time is at most the task's life
    // as this test saw it less the span it was stopped (counting that span would exceed
    // it by 2.3 s, however slow the machine).
    assert!(exit.usage.elapsed_time >= 0.9, "{:?}", exit.usage);
    let life = ended.duration_since(started).as_secs_f64();
    let stopped = resumed_at.duration_since(stopped_at).as_secs_f64();
    assert!(stopped >= 2.3, "stopped for {stopped} s");
    assert!(
        exit.usage.elapsed_time <= life - stopped + 1e-3,
        "elapsed {} s in a life of {life} s stopped for {stopped} s: {:?}",
        exit.usage.elapsed_time,
        exit.usage
    );
}

#[test]
fn shell_app_quit_uses_sigterm() {
    let dd = DataDir::new();
    let (_slot, cfg) = shell_task(&dd, 30);
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    idle(&mut task, secs(0.3));
    task.suspend(Instant::now());
    task.quit(Instant::now());
    let (exit, _) = run(&mut task, secs(10.0));
    assert_eq!(exit.unwrap().outcome, ExitOutcome::Quit);
}

// ---------------------------------------------------------------- channels with a fake app

/// Reads a channel of a live `boinc_mmap_file` and clears its flag, as an app would.
fn app_take(mmap: &Path, ch: Channel) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(mmap)
        .unwrap();
    let mut buf = vec![0u8; SHMEM_SIZE];
    f.read_exact_at(&mut buf, 0).unwrap();
    let msg = shmem::take(&mut buf, ch)?;
    f.write_all_at(&[0], ch.offset() as u64).unwrap();
    Some(msg)
}

/// Writes a message into a channel as an app would (payload first, then the flag).
fn app_put(mmap: &Path, ch: Channel, msg: &str) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(mmap).unwrap();
    let mut payload = msg.as_bytes().to_vec();
    payload.push(0);
    f.write_all_at(&payload, ch.offset() as u64 + 1).unwrap();
    f.write_all_at(&[1], ch.offset() as u64).unwrap();
}

/// A task whose "app" is `sleep`, marked as using the API, so the test plays the app's side.
fn fake_api_task(
    dd: &DataDir,
    name: &str,
) -> (ferrite_supervise::Slot, ferrite_supervise::TaskConfig) {
    let slot = dd.slots.allocate().unwrap();
    slot.setup(&[], &init_data(slot.number(), Checkpoint::default()))
        .unwrap();
    let mut cfg = config_for(&slot, name, &["30"]);
    cfg.program = "/bin/sleep".into();
    cfg.timing.quit_timeout = Duration::from_millis(500);
    (slot, cfg)
}

#[test]
fn channels_carry_heartbeats_status_graphics_trickles_and_queued_control() {
    let dd = DataDir::new();
    let (slot, cfg) = fake_api_task(&dd, "fake");
    let mmap = slot.dir().join("boinc_mmap_file");
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    // A heartbeat is there from the start.
    let hb = Heartbeat::decode(&app_take(&mmap, Channel::Heartbeat).unwrap()).unwrap();
    assert_eq!(hb.max_wss, 4e9);
    assert!(!hb.network_suspended);
    task.set_network_suspended(true);
    idle(&mut task, secs(0.5));
    let hb = Heartbeat::decode(&app_take(&mmap, Channel::Heartbeat).unwrap()).unwrap();
    assert!(hb.network_suspended);

    // Status from the app.
    let st = AppStatus {
        current_cpu_time: 3.0,
        checkpoint_cpu_time: 2.0,
        fraction_done: Some(0.5),
        wss: Some(123_456_789.0),
        want_network: true,
        ..AppStatus::default()
    };
    app_put(&mmap, Channel::AppStatus, &st.encode());
    app_put(
        &mmap,
        Channel::GraphicsReply,
        "<web_graphics_url>http://127.0.0.1:1/g</web_graphics_url>",
    );
    let events = idle(&mut task, secs(0.5));
    assert!(events.contains(&TaskEvent::WantNetwork(true)), "{events:?}");
    assert!(events.iter().any(
        |e| matches!(e, TaskEvent::Checkpoint(c) if c.cpu_time == 2.0 && c.fraction_done == 0.5)
    ));
    let u = task.usage();
    assert!(u.cpu_time >= 3.0);
    assert_eq!(u.fraction_done, 0.5);
    assert_eq!(u.working_set, 123_456_789);
    assert!(u.want_network);
    assert_eq!(
        task.graphics().web_graphics_url.as_deref(),
        Some("http://127.0.0.1:1/g")
    );
    assert_eq!(task.record().checkpoint_cpu_time, 2.0);

    // Trickle-down notice.
    assert!(task.notify_trickle_down());
    assert_eq!(
        app_take(&mmap, Channel::TrickleDown).as_deref(),
        Some("<have_trickle_down/>\n")
    );

    // Control messages wait for the channel in order; suspend + resume do not cancel once sent.
    let now = Instant::now();
    task.suspend(now);
    task.resume(now);
    task.suspend(now); // cancels the queued resume
    task.resume(now);
    task.quit(now);
    assert_eq!(
        app_take(&mmap, Channel::ProcessControlRequest).as_deref(),
        Some("<suspend/>")
    );
    idle(&mut task, secs(0.1));
    assert_eq!(
        app_take(&mmap, Channel::ProcessControlRequest).as_deref(),
        Some("<resume/>")
    );
    idle(&mut task, secs(0.1));
    assert_eq!(
        app_take(&mmap, Channel::ProcessControlRequest).as_deref(),
        Some("<quit/>")
    );
    // `sleep` does not obey: SIGTERM follows after the quit timeout.
    let (exit, _) = run(&mut task, secs(10.0));
    assert_eq!(exit.unwrap().outcome, ExitOutcome::Quit);
}

#[test]
fn app_not_reading_control_messages_is_killed_as_hung() {
    let dd = DataDir::new();
    let (_slot, mut cfg) = fake_api_task(&dd, "hung");
    cfg.timing.message_block_timeout = Duration::from_millis(800);
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    task.suspend(Instant::now());
    task.reread_app_info(Instant::now()); // stays queued behind the unread suspend
    let (exit, events) = run(&mut task, secs(10.0));
    assert!(events.contains(&TaskEvent::Hung), "{events:?}");
    let exit = exit.unwrap();
    assert_eq!(exit.outcome, ExitOutcome::Quit);
    assert!(exit.outcome.will_restart());
}

#[test]
fn process_lingering_after_finish_file_is_aborted_with_194() {
    let dd = DataDir::new();
    let (slot, mut cfg) = fake_api_task(&dd, "linger");
    cfg.timing.finish_file_timeout = Duration::from_millis(700);
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    std::fs::write(slot.dir().join("boinc_finish_called"), "0\n").unwrap();
    let (exit, _) = run(&mut task, secs(10.0));
    assert_eq!(exit.unwrap().outcome, ExitOutcome::Aborted(194));
}

// ---------------------------------------------------------------- process state

fn read_status_field(pid: i32, field: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn apps_get_own_session_idle_priority_and_clean_signal_state() {
    // Make the parent's state hostile: SIGALRM blocked in this thread.
    // SAFETY: plain libc calls on this test thread's own signal mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGALRM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let dd = DataDir::new();
    for (priority, nice, policy) in [
        (Priority::CpuJob, 19, libc::SCHED_IDLE as u32),
        (Priority::HighPriorityJob, 10, 0),
        // cc_config process_priority levels 1 (low) and 0 (lowest).
        (Priority::Nice(10), 10, 0),
        (Priority::Nice(19), 19, libc::SCHED_IDLE as u32),
    ] {
        let slot = dd.slots.allocate().unwrap();
        slot.setup(&[], "<app_init_data/>").unwrap();
        let mut cfg = config_for(&slot, "prio", &["5"]);
        cfg.program = "/bin/sleep".into();
        cfg.uses_api = false;
        cfg.priority = priority;
        let mut task = Task::start(cfg, Instant::now()).unwrap();
        let pid = task.pid();
        let st = ProcStat::read(pid).unwrap();
        assert_eq!((st.pgrp, st.session), (pid, pid));
        assert_eq!(st.nice, nice);
        assert_eq!(st.policy, policy);
        assert_eq!(read_status_field(pid, "SigBlk:"), "0000000000000000");
        assert_eq!(read_status_field(pid, "SigIgn:"), "0000000000000000");
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        let env = String::from_utf8_lossy(&env);
        assert!(env.contains(&format!("LD_LIBRARY_PATH=../../projects/{PROJECT}:.:../..")));
        assert_eq!(
            std::fs::canonicalize(format!("/proc/{pid}/cwd")).unwrap(),
            std::fs::canonicalize(slot.dir()).unwrap()
        );
        task.kill(Instant::now());
        let (exit, _) = run(&mut task, secs(5.0));
        assert_eq!(exit.unwrap().outcome, ExitOutcome::Quit);
    }
}

#[test]
fn dropping_a_task_kills_its_tree() {
    let dd = DataDir::new();
    let (_slot, cfg) = api_task(&dd, "drop", 1, &["--forever", "--fork"]);
    let task = Task::start(cfg, Instant::now()).unwrap();
    let pid = task.pid();
    // Once the app has forked its child.
    let deadline = Instant::now() + secs(10.0);
    let members: Vec<i32> = loop {
        let members: Vec<i32> = sample_tree(pid, &[])
            .members
            .iter()
            .map(|m| m.pid)
            .collect();
        if members.len() >= 2 || Instant::now() >= deadline {
            break members;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(members.len() >= 2, "{members:?}");
    drop(task);
    let deadline = Instant::now() + secs(5.0);
    while members.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for p in members {
        assert!(!alive(p), "{p} survived its task");
    }
}

#[test]
fn exec_failure_is_reported_at_start() {
    let dd = DataDir::new();
    let slot = dd.slots.allocate().unwrap();
    slot.setup(&[], "<app_init_data/>").unwrap();
    let mut cfg = config_for(&slot, "noexec", &[]);
    cfg.program = "../../projects/missing_program".into();
    let err = Task::start(cfg, Instant::now()).unwrap_err();
    assert!(
        matches!(err, ferrite_supervise::StartError::Spawn(_)),
        "{err}"
    );
}

// ---------------------------------------------------------------- orphans

#[test]
fn orphan_from_a_previous_daemon_is_found_by_pid_and_ended() {
    let dd = DataDir::new();
    let (slot, cfg) = api_task(&dd, "orphan", 1, &["--forever"]);
    let task = Task::start(cfg, Instant::now()).unwrap();
    // Once the app runs (the forked child has become it: its command line is the app's).
    let deadline = Instant::now() + secs(10.0);
    while !std::fs::read(format!("/proc/{}/cmdline", task.pid()))
        .is_ok_and(|c| c.windows(9).any(|w| w == b"--forever"))
    {
        assert!(Instant::now() < deadline, "the app never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The "previous daemon" goes away without stopping its app.
    let record = task.abandon();
    let pid = record.pid.unwrap();
    assert!(alive(pid));

    // Records that do not match the live process are never taken for it.
    let mut wrong_slot = record.clone();
    wrong_slot.slot_dir = dd.tmp.path().to_path_buf();
    let mut wrong_start = record.clone();
    wrong_start.pid_starttime += 1;
    assert!(find_orphans(&[wrong_slot, wrong_start]).is_empty());

    let orphans = find_orphans(std::slice::from_ref(&record));
    assert_eq!(orphans.len(), 1);
    assert_eq!((orphans[0].pid, orphans[0].pgid), (pid, pid));
    end_orphans(&orphans, secs(3.0)).unwrap();
    // It was our child here, so reap it to see how it ended.
    let mut status = 0;
    // SAFETY: waiting for our own child.
    let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(rc, pid);
    assert!(libc::WIFSIGNALED(status));
    assert!(find_orphans(&[record]).is_empty());
    assert!(Path::new(slot.dir()).exists());
}

#[test]
fn orphaned_group_members_are_found_after_their_leader_died() {
    let dd = DataDir::new();
    let (_slot, cfg) = api_task(&dd, "orphan_group", 1, &["--forever", "--fork"]);
    let task = Task::start(cfg, Instant::now()).unwrap();
    let pid = task.pid();
    let deadline = Instant::now() + secs(10.0);
    let child = loop {
        std::thread::sleep(Duration::from_millis(100));
        let members = sample_tree(pid, &[]).members;
        if let Some(c) = members.iter().find(|m| m.pid != pid) {
            break c.pid;
        }
        assert!(Instant::now() < deadline, "child never appeared");
    };
    let record = task.abandon();
    // The old app's main process dies; its forked child lives on in the group.
    // SAFETY: signalling and reaping our own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
    }
    assert!(alive(child));
    let orphans = find_orphans(std::slice::from_ref(&record));
    assert_eq!(orphans.len(), 1, "{orphans:?}");
    assert_eq!((orphans[0].pid, orphans[0].pgid), (child, pid));
    end_orphans(&orphans, secs(3.0)).unwrap();
    let gone = Instant::now() + secs(5.0);
    while alive(child) && Instant::now() < gone {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(child), "orphaned child {child} survived");
}

#[test]
fn a_task_reports_the_head_or_the_tail_of_a_long_stderr_as_configured() {
    // An app writing 90 KiB to stderr: a first line, then filler, then a last line.
    let dd = DataDir::new();
    let prog = dd.project_program(
        "chatty.sh",
        b"#!/bin/sh\necho FIRST-LINE >&2\ni=0\nwhile [ $i -lt 1500 ]; do \
echo 'filler filler filler filler filler filler filler filler filler' >&2; \
i=$((i+1)); done\necho LAST-LINE >&2\nexit 0\n",
    );
    for head in [false, true] {
        let slot = dd.slots.allocate().unwrap();
        slot.setup(&[], &init_data(slot.number(), Checkpoint::default()))
            .unwrap();
        let mut cfg = config_for(&slot, "chatty", &[]);
        cfg.program = prog.clone();
        cfg.uses_api = false;
        cfg.stderr_head = head;
        let mut task = Task::start(cfg, Instant::now()).unwrap();
        let (exit, _) = run(&mut task, secs(20.0));
        let exit = exit.unwrap();
        assert_eq!(exit.stderr.len(), 63 * 1024, "head {head}");
        assert_eq!(exit.stderr.contains("FIRST-LINE"), head, "head {head}");
        assert_eq!(exit.stderr.contains("LAST-LINE"), !head, "head {head}");
        dd.slots.release(slot).unwrap();
    }
}

#[test]
fn stderr_keeps_the_last_63_kib() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stderr.txt");
    let mut text = "A".repeat(10_000);
    text.push_str(&"B".repeat(70 * 1024));
    std::fs::write(&path, &text).unwrap();
    let tail = slot::read_stderr_file(&path, false).unwrap();
    assert_eq!(tail.len(), 63 * 1024);
    assert!(tail.chars().all(|c| c == 'B'));
    let head = slot::read_stderr_file(&path, true).unwrap();
    assert!(head.starts_with("AAAA"));
}
