//! `ferrited` runs a real BOINC API app: the C++ test app of `ferrite-supervise`
//! (`crates/ferrite-supervise/tests/apps/test_app.cpp`, linked against Debian's
//! libboinc-app-dev) is a project's app version, each workunit's `<command_line>` picks its
//! behaviour, and the daemon is driven through GUI RPC on a loopback port: runs to completion,
//! suspend and resume, preemption and restart from a checkpoint, crashes, temporary exits, the
//! elapsed-time and slot-disk limits, a forked child, a SIGKILLed daemon and the RAM limit.
//!
//! Network activity is off in every data directory (`<user_network_request>` never), so
//! finished results wait for upload and nothing leaves the machine.

use std::fs;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use ferrite_e2e::inspect::{slot_processes, wait_until};
use ferrite_e2e::{bin, free_port, Proc};

mod api_app;
use api_app::*;

#[test]
fn a_task_runs_to_completion_with_its_output_and_cpu_time() {
    if !ferrite_e2e::boinc_api_or_skip("a_task_runs_to_completion_with_its_output_and_cpu_time") {
        return;
    }
    let job = Job::new("wu_done", 5, "--spin --step-ms 200");
    let d = data_dir(std::slice::from_ref(&job), &prefs(false, ""));
    let mut p = start(d.path(), free_port());
    p.wait_for("task wu_done_0 finished", Duration::from_secs(60));
    stop(&mut p, d.path());

    let s = state(d.path());
    let r = result_block(&s, "wu_done_0");
    assert_eq!(tag(&r, "state"), Some("4"), "files uploading: {r}");
    assert_eq!(tag(&r, "exit_status"), Some("0"), "{r}");
    // Five steps of 0.2 CPU seconds each (the app measures its own CPU clock).
    let cpu = num(&r, "final_cpu_time");
    assert!((0.9..30.0).contains(&cpu), "final_cpu_time {cpu}: {r}");
    assert!(num(&r, "final_elapsed_time") >= 0.9, "{r}");
    assert!(r.contains("starting fresh, 5 steps"), "stderr kept: {r}");
    assert!(r.contains("finished"), "{r}");
    let out = fs::read_to_string(project_dir(d.path()).join("wu_done_0_out")).expect("output");
    assert_eq!(out, "done 5 steps\n");
    let file = s
        .split("<file>")
        .find(|f| f.contains("<name>wu_done_0_out</name>"))
        .expect("output file entry");
    assert_eq!(num(file, "nbytes"), out.len() as f64, "{file}");
    assert!(
        !s.contains("<result_name>wu_done_0</result_name>"),
        "no active task left: {s}"
    );
    let slot = d.path().join("slots/0");
    assert!(
        !slot.exists() || fs::read_dir(&slot).expect("slot").count() == 0,
        "the slot is emptied"
    );
}

#[test]
fn a_suspended_task_uses_no_cpu_and_continues_when_resumed() {
    if !ferrite_e2e::boinc_api_or_skip("a_suspended_task_uses_no_cpu_and_continues_when_resumed") {
        return;
    }
    let job = Job::new("wu_susp", 300, "--spin --step-ms 100");
    let d = data_dir(std::slice::from_ref(&job), &prefs(true, ""));
    let port = free_port();
    let mut p = start(d.path(), port);
    p.wait_for("starting task wu_susp_0", Duration::from_secs(30));
    let mut pid = None;
    wait_until("the app has a pid", Duration::from_secs(20), || {
        pid = app_pid(port, "wu_susp_0");
        pid.is_some()
    });
    let pid = pid.expect("pid");
    let c = wait_cpu_advance(pid, cpu_secs(pid), 0.3, Duration::from_secs(20));

    result_op(port, "suspend_result", "wu_susp_0");
    wait_until(
        "the GUI shows it suspended",
        Duration::from_secs(20),
        || gui_result(port, "wu_susp_0").contains("<active_task_state>9</active_task_state>"),
    );
    // Once the app's API has acted on <suspend/> (its CPU time stands still over half a
    // second), measure.
    let mut last = cpu_secs(pid);
    wait_until("the app stops computing", Duration::from_secs(20), || {
        thread::sleep(Duration::from_millis(500));
        let now = cpu_secs(pid);
        let still = now - last < 0.02;
        last = now;
        still
    });
    let c0 = cpu_secs(pid);
    thread::sleep(Duration::from_secs(3));
    let c1 = cpu_secs(pid);
    assert!(alive(pid), "the app stays in memory (leave_apps_in_memory)");
    assert!(
        c1 - c0 < 0.1,
        "CPU time went on while suspended: {c0} -> {c1} (was {c} before)"
    );
    assert_eq!(app_pid(port, "wu_susp_0"), Some(pid), "same process");

    result_op(port, "resume_result", "wu_susp_0");
    wait_cpu_advance(pid, c1, 0.3, Duration::from_secs(20));
    assert!(gui_result(port, "wu_susp_0").contains("<active_task_state>1</active_task_state>"));
    stop(&mut p, d.path());
}

#[test]
fn a_suspended_task_leaves_memory_and_restarts_from_its_checkpoint() {
    if !ferrite_e2e::boinc_api_or_skip(
        "a_suspended_task_leaves_memory_and_restarts_from_its_checkpoint",
    ) {
        return;
    }
    let job = Job::new("wu_ckpt", 40, "--spin --step-ms 100");
    let d = data_dir(std::slice::from_ref(&job), &prefs(false, ""));
    let port = free_port();
    let mut p = start(d.path(), port);
    p.wait_for("starting task wu_ckpt_0", Duration::from_secs(30));
    let mut pid = None;
    wait_until("a few checkpoints", Duration::from_secs(30), || {
        let r = gui_result(port, "wu_ckpt_0");
        pid = tag(&r, "pid").and_then(|p| p.parse().ok());
        tag(&r, "fraction_done")
            .and_then(|f| f.parse::<f64>().ok())
            .is_some_and(|f| f >= 0.1)
            && tag(&r, "checkpoint_cpu_time")
                .and_then(|f| f.parse::<f64>().ok())
                .is_some_and(|f| f > 0.0)
    });
    let pid: i32 = pid.expect("pid");

    result_op(port, "suspend_result", "wu_ckpt_0");
    wait_until("the app has quit", Duration::from_secs(20), || !alive(pid));
    assert!(slot_processes(d.path()).is_empty());
    p.wait_for("preempting task wu_ckpt_0", Duration::from_secs(5));
    // The GUI shows the task without a process, at its checkpoint.
    let mut r = String::new();
    wait_until("the GUI shows no process", Duration::from_secs(10), || {
        r = gui_result(port, "wu_ckpt_0");
        tag(&r, "active_task_state") == Some("0")
    });
    assert!(r.contains("<suspended_via_gui/>"), "{r}");
    let frac = num(&r, "fraction_done");
    assert!(frac >= 0.1, "checkpointed progress is kept: {r}");
    // It stays out while suspended: looked at after 2 s here, and proven from the app's
    // stderr at the end.
    thread::sleep(Duration::from_secs(2));
    assert!(
        slot_processes(d.path()).is_empty(),
        "not restarted while suspended"
    );

    result_op(port, "resume_result", "wu_ckpt_0");
    wait_until("the app runs again", Duration::from_secs(20), || {
        app_pid(port, "wu_ckpt_0").is_some_and(|p| p != pid)
    });
    // Progress does not start over.
    let r = gui_result(port, "wu_ckpt_0");
    assert!(num(&r, "fraction_done") >= frac - 1e-6, "{r}");
    p.wait_for("task wu_ckpt_0 finished", Duration::from_secs(60));
    assert!(p.output().contains("resuming from"), "{}", p.output());
    stop(&mut p, d.path());

    let s = state(d.path());
    let r = result_block(&s, "wu_ckpt_0");
    assert_eq!(tag(&r, "state"), Some("4"), "{r}");
    assert_eq!(r.matches("starting fresh").count(), 1, "{r}");
    // The app ran twice in all: no run while it was suspended (that would have left a second
    // "resuming from checkpoint" line in its stderr).
    assert_eq!(
        r.matches("resuming from checkpoint").count(),
        1,
        "one restart, at the resume: {r}"
    );
    let step = resumed_step(&r).unwrap_or_else(|| panic!("the app restarted from scratch: {r}"));
    assert!(step >= 4, "resumed at step {step}: {r}");
    // The CPU time of both episodes counts: the second spun (40 - step) tenths of a second,
    // the first up to its last checkpoint the daemon heard of (the API reports checkpoints
    // once a second, so that can be short of the step it resumed at); the redone steps are
    // never counted twice (4 s of spinning in all).
    let second = f64::from(40 - step) * 0.1;
    let cpu = num(&r, "final_cpu_time");
    assert!(
        cpu > second + 0.05 && cpu <= 4.0 + 0.5,
        "cpu {cpu}, second episode {second}: {r}"
    );
}

#[test]
fn a_crash_is_a_computation_error_with_the_apps_stderr() {
    if !ferrite_e2e::boinc_api_or_skip("a_crash_is_a_computation_error_with_the_apps_stderr") {
        return;
    }
    let job = Job::new("wu_crash", 10, "--crash --step-ms 100");
    let d = data_dir(std::slice::from_ref(&job), &prefs(false, ""));
    let mut p = start(d.path(), free_port());
    p.wait_for(
        "task wu_crash_0 ended with a computation error",
        Duration::from_secs(60),
    );
    stop(&mut p, d.path());
    let s = state(d.path());
    let r = result_block(&s, "wu_crash_0");
    assert_eq!(tag(&r, "state"), Some("3"), "compute error: {r}");
    assert_ne!(tag(&r, "exit_status"), Some("0"), "{r}");
    assert!(r.contains("<ready_to_report/>"), "{r}");
    let stderr = &r[r.find("<stderr_out>").expect("stderr_out")..];
    assert!(stderr.contains("<stderr_txt>"), "{r}");
    assert!(stderr.contains("starting fresh, 10 steps"), "{r}");
    assert!(stderr.contains("about to crash"), "{r}");
    assert!(!s.contains("<result_name>wu_crash_0</result_name>"), "{s}");
}

#[test]
fn a_temporary_exit_is_retried_later_and_the_task_finishes() {
    if !ferrite_e2e::boinc_api_or_skip("a_temporary_exit_is_retried_later_and_the_task_finishes") {
        return;
    }
    let job = Job::new(
        "wu_temp",
        5,
        "--temp-exit-once --temp-exit-secs 3 --step-ms 100",
    );
    let d = data_dir(std::slice::from_ref(&job), &prefs(false, ""));
    let port = free_port();
    let mut p = start(d.path(), port);
    p.wait_for("task wu_temp_0 exited temporarily", Duration::from_secs(30));
    let exited_at = Instant::now();
    // Not an error: the result is still to be computed, waiting without a process.
    let r = gui_result(port, "wu_temp_0");
    assert_eq!(tag(&r, "state"), Some("2"), "{r}");
    assert!(
        p.output().contains("waiting for test resource"),
        "{}",
        p.output()
    );
    wait_until("the app is gone", Duration::from_secs(10), || {
        slot_processes(d.path()).is_empty()
    });
    p.wait_for("task wu_temp_0 finished", Duration::from_secs(60));
    assert!(
        exited_at.elapsed() >= Duration::from_secs(2),
        "restarted before the delay the app asked for"
    );
    assert_eq!(count(&p, "starting task wu_temp_0"), 2, "{}", p.output());
    stop(&mut p, d.path());
    let s = state(d.path());
    let r = result_block(&s, "wu_temp_0");
    assert_eq!(tag(&r, "state"), Some("4"), "{r}");
    assert_eq!(tag(&r, "exit_status"), Some("0"), "{r}");
    assert_eq!(resumed_step(&r), Some(1), "{r}");
}

#[test]
fn the_elapsed_time_limit_aborts_the_task_with_197() {
    if !ferrite_e2e::boinc_api_or_skip("the_elapsed_time_limit_aborts_the_task_with_197") {
        return;
    }
    // 120 s allowed (rsc_fpops_bound / flops, BOINC's floor), 116 s already used in
    // earlier episodes.
    let mut job = Job::new("wu_time", 1000, "--step-ms 100");
    job.fpops_bound = 120.0 * FLOPS;
    job.resumed_elapsed = Some(116.0);
    let d = data_dir(std::slice::from_ref(&job), &prefs(false, ""));
    let mut p = start(d.path(), free_port());
    p.wait_for("starting task wu_time_0", Duration::from_secs(30));
    let started = Instant::now();
    p.wait_for("exceeded elapsed time limit 120", Duration::from_secs(30));
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{}",
        p.output()
    );
    wait_until("the app is gone", Duration::from_secs(20), || {
        slot_processes(d.path()).is_empty()
    });
    stop(&mut p, d.path());
    let s = state(d.path());
    let r = result_block(&s, "wu_time_0");
    assert_eq!(tag(&r, "state"), Some("6"), "aborted: {r}");
    assert_eq!(tag(&r, "exit_status"), Some("197"), "{r}");
    assert!(r.contains("<ready_to_report/>"), "{r}");
    let elapsed = num(&r, "final_elapsed_time");
    assert!((120.0..140.0).contains(&elapsed), "{r}");
}

#[test]
fn the_slot_disk_limit_aborts_the_task_with_196() {
    if !ferrite_e2e::boinc_api_or_skip("the_slot_disk_limit_aborts_the_task_with_196") {
        return;
    }
    let mut job = Job::new("wu_disk", 300, "--fill 30 --step-ms 100");
    job.disk_bound = 10e6;
    let d = data_dir(std::slice::from_ref(&job), &prefs(false, ""));
    let mut p = start(d.path(), free_port());
    p.wait_for("Disk usage limit exceeded", Duration::from_secs(30));
    wait_until("the app is gone", Duration::from_secs(20), || {
        slot_processes(d.path()).is_empty()
    });
    stop(&mut p, d.path());
    let s = state(d.path());
    let r = result_block(&s, "wu_disk_0");
    assert_eq!(tag(&r, "state"), Some("6"), "aborted: {r}");
    assert_eq!(tag(&r, "exit_status"), Some("196"), "{r}");
    assert!(r.contains("wrote 30 MB into the slot"), "{r}");
    // The slot (and the 30 MB in it) is cleaned.
    assert!(!d.path().join("slots/0/filler.dat").exists());
}

#[test]
fn a_forked_child_is_stopped_on_suspend_and_killed_on_abort() {
    if !ferrite_e2e::boinc_api_or_skip("a_forked_child_is_stopped_on_suspend_and_killed_on_abort") {
        return;
    }
    let job = Job::new("wu_fork", 600, "--fork --step-ms 100");
    let d = data_dir(std::slice::from_ref(&job), &prefs(true, ""));
    let port = free_port();
    let mut p = start(d.path(), port);
    let dir = d.path().to_path_buf();
    let mut procs = Vec::new();
    wait_until("the app and its child run", Duration::from_secs(30), || {
        procs = slot_processes(&dir);
        procs.len() >= 2
    });
    let pids: Vec<i32> = procs.iter().map(|(p, _, _)| *p).collect();
    let main = app_pid(port, "wu_fork_0").expect("pid");
    assert!(pids.contains(&main), "{pids:?} {main}");

    result_op(port, "suspend_result", "wu_fork_0");
    // The child ignores <suspend/> and spins: the whole group is stopped.
    wait_until(
        "every process of the slot is stopped",
        Duration::from_secs(30),
        || {
            let now = slot_processes(&dir);
            now.len() >= 2 && now.iter().all(|(_, st, _)| *st == 'T')
        },
    );
    let cpu0: f64 = pids.iter().map(|p| cpu_secs(*p)).sum();
    thread::sleep(Duration::from_secs(2));
    let cpu1: f64 = pids.iter().map(|p| cpu_secs(*p)).sum();
    assert!(
        cpu1 - cpu0 < 0.05,
        "stopped processes used CPU: {cpu0} -> {cpu1}"
    );

    result_op(port, "abort_result", "wu_fork_0");
    wait_until(
        "no process of the slot survives",
        Duration::from_secs(30),
        || slot_processes(&dir).is_empty() && pids.iter().all(|p| !alive(*p)),
    );
    p.wait_for("task wu_fork_0 aborted by user", Duration::from_secs(5));
    let r = gui_result(port, "wu_fork_0");
    assert_eq!(tag(&r, "state"), Some("6"), "{r}");
    assert_eq!(tag(&r, "exit_status"), Some("203"), "{r}");
    stop(&mut p, d.path());
}

#[test]
fn after_a_sigkill_the_api_app_is_taken_over_or_continues_from_its_checkpoint() {
    if !ferrite_e2e::boinc_api_or_skip(
        "after_a_sigkill_the_api_app_is_taken_over_or_continues_from_its_checkpoint",
    ) {
        return;
    }
    let job = Job::new("wu_kill", 40, "--spin --step-ms 100");
    let d = data_dir(std::slice::from_ref(&job), &prefs(false, ""));
    let mut p = start(d.path(), free_port());
    p.wait_for("starting task wu_kill_0", Duration::from_secs(30));
    let records = d.path().join("ferrite_tasks.json");
    wait_until("a checkpoint is recorded", Duration::from_secs(30), || {
        let Ok(text) = fs::read_to_string(&records) else {
            return false;
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        v.as_array().is_some_and(|a| {
            a.iter().any(|r| {
                r["result_name"] == "wu_kill_0"
                    && r["checkpoint_cpu_time"].as_f64().is_some_and(|c| c > 0.3)
            })
        })
    });
    p.signal(libc::SIGKILL);
    let _ = p.wait(Duration::from_secs(10));
    let orphans: Vec<i32> = slot_processes(d.path())
        .iter()
        .map(|(p, _, _)| *p)
        .collect();
    assert!(!orphans.is_empty(), "the app outlives a SIGKILLed daemon");

    // The app is taken over where it runs. The BOINC API ends an app within 10 s of seeing
    // the client PID it started with gone; if it does so before it finishes, the task
    // restarts from its checkpoint, never from scratch.
    let mut p = start(d.path(), free_port());
    p.wait_for("task wu_kill_0 finished", Duration::from_secs(60));
    let out = p.output();
    assert!(
        out.contains("taking over task wu_kill_0 in slot")
            || out.contains("task wu_kill_0: its app finished while no client ran"),
        "{out}"
    );
    stop(&mut p, d.path());
    for pid in &orphans {
        assert!(!alive(*pid), "orphan {pid} still runs");
    }
    let s = state(d.path());
    let r = result_block(&s, "wu_kill_0");
    assert_eq!(tag(&r, "state"), Some("4"), "{r}");
    if let Some(line) = out.lines().find(|l| l.contains("starting task wu_kill_0")) {
        assert!(line.contains("resuming from"), "{line}");
        let step = resumed_step(&r).unwrap_or_else(|| panic!("restarted from scratch: {r}"));
        assert!(step >= 3, "resumed at step {step}: {r}");
    }
    let out = fs::read_to_string(project_dir(d.path()).join("wu_kill_0_out")).expect("output");
    assert_eq!(out, "done 40 steps\n");
}

/// Megabytes of RAM of this machine.
fn ram_mb() -> u64 {
    fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(8192, |kb| kb / 1024)
}

/// Preferences with RAM limits of `busy` % (someone uses the computer) and `idle` %.
fn ram_prefs(busy: u32, idle: u32) -> String {
    prefs(
        false,
        &format!(
            "<ram_max_used_busy_pct>{busy}</ram_max_used_busy_pct>\n\
             <ram_max_used_idle_pct>{idle}</ram_max_used_idle_pct>\n\
             <idle_time_to_run>30</idle_time_to_run>\n"
        ),
    )
}

/// A host where someone uses the computer (a terminal touched just now), for
/// `FERRITE_DEV_ROOT`: the in-use RAM limit applies.
fn busy_host() -> tempfile::TempDir {
    let host = tempfile::tempdir().expect("tmp");
    fs::write(host.path().join("tty1"), "").expect("tty");
    host
}

#[test]
fn over_the_ram_limit_a_task_without_a_checkpoint_is_kept_in_memory_not_restarted() {
    if !ferrite_e2e::boinc_api_or_skip(
        "over_the_ram_limit_a_task_without_a_checkpoint_is_kept_in_memory_not_restarted",
    ) {
        return;
    }
    // As above, but the big task never checkpoints: quitting it would throw its work away,
    // so it is suspended in memory and continues, same process, when RAM is allowed again.
    let host = busy_host();
    let big_mb = ram_mb() / 50 + 50;
    let big = Job::new(
        "wu_big",
        15,
        &format!("--alloc {big_mb} --step-ms 200 --no-checkpoint"),
    );
    let d = data_dir(&[big], &ram_prefs(1, 90));
    let port = free_port();
    let mut p = start_with(d.path(), port, &[("FERRITE_DEV_ROOT", host.path())]);
    p.wait_for("starting task wu_big_0", Duration::from_secs(30));
    p.wait_for(
        "suspending task wu_big_0 (its working set exceeds the RAM limit; it has no checkpoint",
        Duration::from_secs(30),
    );
    let pid = app_pid(port, "wu_big_0").expect("the task keeps its process");
    // A few scheduling passes run under the RAM limit (time passing is what this is about);
    // the absence of a preemption is checked once the limit is lifted, below.
    thread::sleep(Duration::from_secs(3));
    assert_eq!(app_pid(port, "wu_big_0"), Some(pid), "{}", p.output());
    assert!(alive(pid), "the app is still in memory");

    set_prefs(port, d.path(), &ram_prefs(90, 90));
    p.wait_for("resuming task wu_big_0", Duration::from_secs(30));
    // Everything the daemon decided while RAM was short is logged before this resume: it
    // never quit the task to make room.
    assert_eq!(count(&p, "preempting task wu_big_0"), 0, "{}", p.output());
    p.wait_for("task wu_big_0 finished", Duration::from_secs(60));
    assert_eq!(count(&p, "starting task wu_big_0"), 1, "{}", p.output());
    stop(&mut p, d.path());
    let r = result_block(&state(d.path()), "wu_big_0");
    assert_eq!(tag(&r, "state"), Some("4"), "{r}");
    // One episode from the first step: the app never started again.
    assert!(r.contains("starting fresh"), "{r}");
    assert!(!r.contains("resuming from checkpoint"), "{r}");
}

#[test]
fn a_task_too_large_for_any_ram_limit_is_aborted_with_198() {
    if !ferrite_e2e::boinc_api_or_skip("a_task_too_large_for_any_ram_limit_is_aborted_with_198") {
        return;
    }
    // Both RAM limits are 1 % and the task needs 2 %: it could never run.
    let host = busy_host();
    let big_mb = ram_mb() / 50 + 50;
    let big = Job::new("wu_big", 40, &format!("--alloc {big_mb} --step-ms 200"));
    let d = data_dir(&[big], &ram_prefs(1, 1));
    let port = free_port();
    let mut p = start_with(d.path(), port, &[("FERRITE_DEV_ROOT", host.path())]);
    p.wait_for("starting task wu_big_0", Duration::from_secs(30));
    p.wait_for(
        "task wu_big_0: resident set size > client RAM limit",
        Duration::from_secs(30),
    );
    p.wait_for("task wu_big_0 aborted", Duration::from_secs(30));
    wait_until("the app has ended", Duration::from_secs(20), || {
        app_pid(port, "wu_big_0").is_none()
    });
    stop(&mut p, d.path());
    let r = result_block(&state(d.path()), "wu_big_0");
    assert_eq!(tag(&r, "state"), Some("6"), "aborted: {r}");
    assert_eq!(tag(&r, "exit_status"), Some("198"), "{r}");
    assert_eq!(count(&p, "starting task wu_big_0"), 1, "{}", p.output());
}

#[test]
fn over_the_ram_limit_the_largest_task_is_preempted_and_the_other_runs() {
    if !ferrite_e2e::boinc_api_or_skip(
        "over_the_ram_limit_the_largest_task_is_preempted_and_the_other_runs",
    ) {
        return;
    }
    // Someone uses the computer (a terminal touched just now): the busy limit applies. The
    // big task allocates 2 % of RAM. Once it has checkpointed, the busy limit drops to 1 %
    // (more than the task's working set, far less than the idle limit, so it is preempted
    // rather than aborted; with a checkpoint to restart from, it leaves memory).
    let host = busy_host();
    let big_mb = ram_mb() / 50 + 50;
    let small = Job::new("wu_small", 40, "--step-ms 200");
    let big = Job::new("wu_big", 30, &format!("--alloc {big_mb} --step-ms 200"));
    let d = data_dir(&[small, big], &ram_prefs(90, 90));
    let port = free_port();
    let mut p = start_with(d.path(), port, &[("FERRITE_DEV_ROOT", host.path())]);
    p.wait_for("starting task wu_small_0", Duration::from_secs(30));
    p.wait_for("starting task wu_big_0", Duration::from_secs(30));
    wait_until(
        "the big task has checkpointed",
        Duration::from_secs(30),
        || {
            tag(&gui_result(port, "wu_big_0"), "checkpoint_cpu_time")
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(|c| c > 0.0)
        },
    );
    set_prefs(port, d.path(), &ram_prefs(1, 90));
    p.wait_for(
        "preempting task wu_big_0 (its working set exceeds the RAM limit",
        Duration::from_secs(30),
    );
    wait_until(
        "the big task has left memory",
        Duration::from_secs(20),
        || app_pid(port, "wu_big_0").is_none(),
    );
    // Why, as the GUI can ask.
    let explain = gui(port, "<ferrite_explain/>\n");
    let big_task = explain
        .split("<task>")
        .find(|t| t.contains("<name>wu_big_0</name>"))
        .unwrap_or_else(|| panic!("{explain}"));
    // Which limit holds it back, with the figures: what it needs (its measured working set)
    // against what is left under the 1 % busy limit.
    let why = big_task
        .split("waiting for memory: needs ")
        .nth(1)
        .unwrap_or_else(|| panic!("{big_task}"));
    let (need, rest) = why
        .split_once(" MB, ")
        .unwrap_or_else(|| panic!("{big_task}"));
    let (left, rest) = rest
        .split_once(" MB left under ")
        .unwrap_or_else(|| panic!("{big_task}"));
    assert!(rest.starts_with("ram_max_used_busy_pct 1 %"), "{big_task}");
    let need: u64 = need.parse().unwrap_or_else(|_| panic!("{big_task}"));
    let left: u64 = left.parse().unwrap_or_else(|_| panic!("{big_task}"));
    assert!(need > left, "{big_task}");
    let small_task = explain
        .split("<task>")
        .find(|t| t.contains("<name>wu_small_0</name>"))
        .unwrap_or_else(|| panic!("{explain}"));
    assert!(
        small_task.contains("<decision>run</decision>"),
        "{small_task}"
    );
    // The small one runs on; the big one stays out (it would not fit any better now).
    // Proven at a later event: once the small one has finished (RAM still short), it had run
    // in one process from start to end and the big one had not been started again meanwhile.
    assert!(app_pid(port, "wu_small_0").is_some(), "the small task runs");
    p.wait_for("task wu_small_0 finished", Duration::from_secs(60));
    assert_eq!(count(&p, "starting task wu_small_0"), 1, "{}", p.output());
    assert_eq!(count(&p, "starting task wu_big_0"), 1, "{}", p.output());
    assert!(app_pid(port, "wu_big_0").is_none(), "{}", p.output());

    // More RAM allowed: the big task comes back and completes.
    set_prefs(port, d.path(), &ram_prefs(90, 90));
    p.wait_for("task wu_big_0 finished", Duration::from_secs(60));
    stop(&mut p, d.path());
    let s = state(d.path());
    for name in ["wu_small_0", "wu_big_0"] {
        let r = result_block(&s, name);
        assert_eq!(tag(&r, "state"), Some("4"), "{r}");
    }
}

#[test]
fn gpu_tasks_run_on_the_devices_the_scheduler_assigned_them() {
    if !ferrite_e2e::boinc_api_or_skip("gpu_tasks_run_on_the_devices_the_scheduler_assigned_them") {
        return;
    }
    let libdir = tempfile::tempdir().expect("tmp");
    let nvml = ferrite_e2e::fake_nvml(libdir.path());
    let jobs = [
        Job::new("wu_gpu_a", 200, "--step-ms 200"),
        Job::new("wu_gpu_b", 200, "--step-ms 200"),
    ];
    let d = data_dir(&jobs, &prefs(false, ""));
    // The app version becomes a CUDA one: a tenth of a CPU and one NVIDIA GPU per task.
    let path = d.path().join("client_state.xml");
    let s = fs::read_to_string(&path).expect("state");
    let s = s.replacen(
        "<avg_ncpus>1</avg_ncpus>",
        "<avg_ncpus>0.1</avg_ncpus>\n<plan_class>cuda</plan_class>\n\
         <coproc>\n<type>NVIDIA</type>\n<count>1</count>\n</coproc>",
        1,
    );
    let s = s.replace(
        "<version_num>100</version_num>\n<wu_name>",
        "<version_num>100</version_num>\n<plan_class>cuda</plan_class>\n<wu_name>",
    );
    fs::write(&path, s).expect("state");
    // The fake's two GPUs are different models: use both.
    fs::write(
        d.path().join("cc_config.xml"),
        "<cc_config>\n<log_flags>\n<task>1</task>\n</log_flags>\n\
         <options>\n<use_all_gpus>1</use_all_gpus>\n</options>\n</cc_config>\n",
    )
    .expect("cc_config");
    let port = free_port();
    let mut cmd = Command::new(bin("ferrited"));
    cmd.args(["--dir", d.path().to_str().expect("utf-8")])
        .args(["--gui_rpc_port", &port.to_string(), "--skip_cpu_benchmarks"])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .env("FERRITE_NVML_LIBRARY", &nvml);
    let mut p = Proc::spawn(cmd);
    p.wait_for("GUI RPC listening on TCP", Duration::from_secs(30));
    p.wait_for("starting task wu_gpu_a_0", Duration::from_secs(30));
    p.wait_for("starting task wu_gpu_b_0", Duration::from_secs(30));
    // Each slot's init_data.xml names its own device.
    let mut devices = Vec::new();
    for slot in fs::read_dir(d.path().join("slots"))
        .expect("slots")
        .flatten()
    {
        let Ok(init) = fs::read_to_string(slot.path().join("init_data.xml")) else {
            continue;
        };
        assert_eq!(tag(&init, "gpu_type"), Some("NVIDIA"), "{init}");
        assert_eq!(num(&init, "gpu_usage"), 1.0, "{init}");
        devices.push(num(&init, "gpu_device_num") as i32);
    }
    devices.sort_unstable();
    assert_eq!(
        devices,
        vec![0, 1],
        "{}\n{}\n{}",
        p.output(),
        gui(port, "<ferrite_explain/>\n"),
        gui(port, "<get_host_info/>\n")
    );
    // Both run at once, one task per GPU; a third would have to wait for a free GPU.
    assert!(app_pid(port, "wu_gpu_a_0").is_some() && app_pid(port, "wu_gpu_b_0").is_some());
    assert!(p.output().contains("2 NVIDIA GPUs"), "{}", p.output());
    stop(&mut p, d.path());
}

#[test]
fn init_data_gives_the_app_its_account_key_preferences_proxy_and_computation_deadline() {
    if !ferrite_e2e::boinc_api_or_skip(
        "init_data_gives_the_app_its_account_key_preferences_proxy_and_computation_deadline",
    ) {
        return;
    }
    let job = Job::new("wu_init", 100, "--step-ms 200");
    let d = data_dir(
        std::slice::from_ref(&job),
        &prefs(false, "<work_buf_min_days>0.5</work_buf_min_days>\n"),
    );
    fs::write(
        d.path()
            .join(ferrite_proto::account::account_file_name(URL)),
        format!(
            "<account>\n<master_url>{URL}</master_url>\n<authenticator>key_123</authenticator>\n\
             <project_preferences>\n<colour>blue</colour>\n</project_preferences>\n</account>\n"
        ),
    )
    .expect("account file");
    // A proxy in cc_config.xml (nothing is contacted: the network is off).
    fs::write(
        d.path().join("cc_config.xml"),
        "<cc_config>\n<log_flags>\n<task>1</task>\n</log_flags>\n<options>\n\
         <no_info_fetch>1</no_info_fetch>\n<proxy_info>\n<use_http_proxy/>\n\
         <http_server_name>127.0.0.1</http_server_name>\n<http_server_port>1</http_server_port>\n\
         </proxy_info>\n</options>\n</cc_config>\n",
    )
    .expect("cc_config");
    let deadline = num(
        &result_block(&state(d.path()), "wu_init_0"),
        "report_deadline",
    );
    let mut p = start(d.path(), free_port());
    p.wait_for("starting task wu_init_0", Duration::from_secs(30));
    let init = fs::read_to_string(d.path().join("slots/0/init_data.xml")).expect("init_data");
    stop(&mut p, d.path());
    assert_eq!(tag(&init, "authenticator"), Some("key_123"), "{init}");
    assert!(init.contains("<colour>blue</colour>"), "{init}");
    let proxy = init.split("<proxy_info>").nth(1).expect("proxy_info");
    assert!(proxy.contains("<use_http_proxy/>"), "{init}");
    assert_eq!(tag(proxy, "http_server_name"), Some("127.0.0.1"), "{init}");
    // The report deadline less work_buf_min (half a day).
    assert_eq!(
        num(&init, "computation_deadline"),
        deadline - 43_200.0,
        "{init}"
    );
}

#[test]
fn a_running_tasks_time_left_follows_the_fraction_done_it_reports() {
    if !ferrite_e2e::boinc_api_or_skip(
        "a_running_tasks_time_left_follows_the_fraction_done_it_reports",
    ) {
        return;
    }
    // No checkpoints: only the app's live reports tell how far it is.
    let job = Job::new("wu_est", 100, "--step-ms 200 --no-checkpoint");
    let d = data_dir(std::slice::from_ref(&job), &prefs(false, ""));
    let port = free_port();
    let mut p = start(d.path(), port);
    let start = Instant::now();
    let r = loop {
        let r = gui_result(port, "wu_est_0");
        if tag(&r, "fraction_done").is_some() && num(&r, "fraction_done") >= 0.3 {
            break r;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{r}\n{}",
            p.output()
        );
        thread::sleep(Duration::from_millis(100));
    };
    stop(&mut p, d.path());
    let (f, e) = (num(&r, "fraction_done"), num(&r, "elapsed_time"));
    let left = num(&r, "estimated_cpu_time_remaining");
    // The official estimate: the fraction-done one (e / f) and the static one (1e10 FLOPs
    // at 1e9 FLOPS: 10 s, or the elapsed time once past it) weighted by the fraction done.
    let stat = 10.0_f64.max(e);
    let expected = if e > 10.0 {
        e / f - e
    } else {
        f * (e / f) + (1.0 - f) * stat - e
    };
    assert!(
        (left - expected).abs() < 0.01,
        "time left {left}, expected {expected} (fraction {f}, elapsed {e}): {r}"
    );
    // Not the static estimate less the (never checkpointed) elapsed time: 10 s.
    assert!(left < 9.0, "time left {left}: {r}");
}
