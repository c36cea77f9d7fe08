//! Suspending at the next checkpoint, with the real BOINC API test app (checkpointing after
//! every step of a few seconds of spinning): a suspension that can wait (the time-of-day
//! window) lets the running task go on until it checkpoints again, then suspends it and logs
//! the CPU time kept; an urgent one (the user's run mode "never") suspends it at once, unless
//! the GUI asked it to wait (Ferrite's `<ferrite_at_checkpoint/>`). A GPU task (the same app
//! on the fake NVML library's GPU) held for the GPU temperature limit waits the same way.

use std::time::Duration;

use ferrite_e2e::free_port;
use ferrite_e2e::inspect::wait_until;

mod api_app;
use api_app::*;

/// Seconds of spinning between two checkpoints of the app.
const STEP_MS: u32 = 6000;

/// The task's last checkpoint as `get_results` shows it (0 before the first).
fn checkpoint_cpu(port: u16, name: &str) -> f64 {
    tag(&gui_result(port, name), "checkpoint_cpu_time")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The daemon running one long task, right after the task reported a checkpoint (so the next
/// one is a whole step away); returns the daemon, its port and that checkpoint.
fn running_after_a_checkpoint(job: &Job, d: &tempfile::TempDir) -> (ferrite_e2e::Proc, u16, f64) {
    let port = free_port();
    let mut p = start(d.path(), port);
    let cp = after_a_checkpoint(job, &mut p, port);
    (p, port, cp)
}

/// Waits until the daemon `p` runs `job` and the task has just reported a checkpoint; returns
/// that checkpoint.
fn after_a_checkpoint(job: &Job, p: &mut ferrite_e2e::Proc, port: u16) -> f64 {
    let name = job.result();
    p.wait_for(&format!("starting task {name}"), Duration::from_secs(30));
    let mut first = 0.0;
    wait_until("a first checkpoint", Duration::from_secs(60), || {
        first = checkpoint_cpu(port, &name);
        first > 0.0
    });
    let mut cp = first;
    wait_until("a fresh checkpoint", Duration::from_secs(60), || {
        cp = checkpoint_cpu(port, &name);
        cp > first
    });
    cp
}

#[test]
fn a_time_of_day_suspension_waits_for_the_tasks_next_checkpoint() {
    if !ferrite_e2e::boinc_api_or_skip(
        "a_time_of_day_suspension_waits_for_the_tasks_next_checkpoint",
    ) {
        return;
    }
    let job = Job::new("wu_grace", 100, &format!("--spin --step-ms {STEP_MS}"));
    let d = data_dir(std::slice::from_ref(&job), &prefs(true, ""));
    let (mut p, port, cp) = running_after_a_checkpoint(&job, &d);
    let pid = app_pid(port, "wu_grace_0").expect("the app runs");

    // A window from 24 to 0 suspends computing all day: a reason that can wait.
    set_prefs(
        port,
        d.path(),
        &prefs(
            true,
            "<start_hour>24</start_hour>\n<end_hour>0</end_hour>\n",
        ),
    );
    p.wait_for(
        "Suspending computation - time of day",
        Duration::from_secs(20),
    );
    p.wait_for(
        "task wu_grace_0 runs on to its next checkpoint (at most 300 s)",
        Duration::from_secs(10),
    );
    // Meanwhile the GUIs show it running and `ferrite explain` says why, unless the
    // checkpoint came already.
    let explain = gui(port, "<ferrite_explain/>\n");
    let waiting = explain.contains("suspending at checkpoint");
    assert!(
        waiting || p.output().contains("suspended at checkpoint"),
        "{explain}"
    );
    if waiting {
        assert_eq!(
            tag(&gui_result(port, "wu_grace_0"), "active_task_state"),
            Some("1")
        );
    }

    p.wait_for(
        "task wu_grace_0: suspended at checkpoint; ",
        Duration::from_secs(60),
    );
    let out = p.output();
    let line = out
        .lines()
        .find(|l| l.contains("suspended at checkpoint; "))
        .expect("the line");
    assert!(line.contains(" s of CPU time kept"), "{line}");
    // It ran on to a checkpoint later than the one it had when computing was suspended,
    // then it was suspended (kept in memory).
    let mut r = String::new();
    wait_until(
        "the GUI shows it suspended",
        Duration::from_secs(20),
        || {
            r = gui_result(port, "wu_grace_0");
            tag(&r, "active_task_state") == Some("9")
        },
    );
    assert!(num(&r, "checkpoint_cpu_time") > cp, "{r}");
    assert!(alive(pid), "kept in memory");
    let mut last = cpu_secs(pid);
    wait_until("the app stops computing", Duration::from_secs(20), || {
        std::thread::sleep(Duration::from_millis(500));
        let now = cpu_secs(pid);
        let still = now - last < 0.02;
        last = now;
        still
    });
    stop(&mut p, d.path());
}

#[test]
fn the_users_suspension_is_urgent_and_suspends_at_once() {
    if !ferrite_e2e::boinc_api_or_skip("the_users_suspension_is_urgent_and_suspends_at_once") {
        return;
    }
    let job = Job::new("wu_now", 100, &format!("--spin --step-ms {STEP_MS}"));
    let d = data_dir(std::slice::from_ref(&job), &prefs(true, ""));
    let (mut p, port, cp) = running_after_a_checkpoint(&job, &d);

    let r = gui(
        port,
        "<set_run_mode>\n<never/>\n<duration>0</duration>\n</set_run_mode>\n",
    );
    assert!(r.contains("<success/>"), "{r}");
    p.wait_for("suspending task wu_now_0", Duration::from_secs(20));
    // Suspended before its next checkpoint: it did not run on.
    let r = gui_result(port, "wu_now_0");
    assert_eq!(tag(&r, "active_task_state"), Some("9"), "{r}");
    assert_eq!(num(&r, "checkpoint_cpu_time"), cp, "{r}");
    let out = p.output();
    assert!(!out.contains("runs on to its next checkpoint"), "{out}");
    assert!(!out.contains("suspended at checkpoint"), "{out}");
    stop(&mut p, d.path());
}

#[test]
fn the_users_suspension_at_checkpoint_waits_for_the_tasks_next_checkpoint() {
    if !ferrite_e2e::boinc_api_or_skip(
        "the_users_suspension_at_checkpoint_waits_for_the_tasks_next_checkpoint",
    ) {
        return;
    }
    let job = Job::new("wu_user", 100, &format!("--spin --step-ms {STEP_MS}"));
    let d = data_dir(std::slice::from_ref(&job), &prefs(true, ""));
    let (mut p, port, cp) = running_after_a_checkpoint(&job, &d);

    let r = gui(
        port,
        "<set_run_mode>\n<never/>\n<duration>0</duration>\n<ferrite_at_checkpoint/>\n\
         </set_run_mode>\n",
    );
    assert!(r.contains("<success/>"), "{r}");
    p.wait_for(
        "task wu_user_0 runs on to its next checkpoint (at most 300 s)",
        Duration::from_secs(20),
    );
    p.wait_for(
        "task wu_user_0: suspended at checkpoint; ",
        Duration::from_secs(60),
    );
    // It ran on past the checkpoint it had when the user suspended computing, then it was
    // suspended.
    let mut r = String::new();
    wait_until(
        "the GUI shows it suspended",
        Duration::from_secs(20),
        || {
            r = gui_result(port, "wu_user_0");
            tag(&r, "active_task_state") == Some("9")
        },
    );
    assert!(num(&r, "checkpoint_cpu_time") > cp, "{r}");
    let cc = gui(port, "<get_cc_status/>\n");
    assert!(
        cc.contains("<task_suspend_reason>4</task_suspend_reason>"),
        "{cc}"
    );
    stop(&mut p, d.path());
}

#[test]
fn a_hot_gpu_lets_its_task_run_on_to_its_next_checkpoint() {
    if !ferrite_e2e::boinc_api_or_skip("a_hot_gpu_lets_its_task_run_on_to_its_next_checkpoint") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let nvml = ferrite_e2e::fake_nvml(tmp.path());
    // The fake NVML reads every GPU's temperature from this file; no sysfs sensor is seen.
    let temp = tmp.path().join("gpu_temp");
    std::fs::write(&temp, "60\n").expect("temperature");
    let sys = tmp.path().join("sys");
    std::fs::create_dir_all(&sys).expect("sys");
    let job = Job::new("wu_gpu", 100, &format!("--spin --step-ms {STEP_MS}"));
    let d = data_dir_with_version(
        std::slice::from_ref(&job),
        &prefs(
            true,
            "<run_gpu_if_user_active>1</run_gpu_if_user_active>\n\
             <ferrite_gpu_temp_limit>80</ferrite_gpu_temp_limit>\n",
        ),
        "<coproc>\n<type>NVIDIA</type>\n<count>1</count>\n</coproc>\n",
    );
    let port = free_port();
    let mut p = start_gpus(
        d.path(),
        port,
        true,
        &[
            ("FERRITE_NVML_LIBRARY", &nvml),
            ("FAKE_NVML_TEMP_FILE", &temp),
            ("FERRITE_SYS_ROOT", &sys),
        ],
    );
    let cp = after_a_checkpoint(&job, &mut p, port);
    assert!(
        p.output()
            .contains("GPU temperature limit 80 °C: reading sensor NVIDIA GPU"),
        "{}",
        p.output()
    );

    std::fs::write(&temp, "95\n").expect("temperature");
    p.wait_for(
        "Suspending GPU computation - CPU throttled",
        Duration::from_secs(20),
    );
    p.wait_for(
        "task wu_gpu_0 runs on to its next checkpoint (at most 300 s)",
        Duration::from_secs(10),
    );
    let cc = gui(port, "<get_cc_status/>\n");
    assert!(
        cc.contains("<gpu_suspend_reason>64</gpu_suspend_reason>"),
        "{cc}"
    );
    let explain = gui(port, "<ferrite_explain/>\n");
    assert!(
        explain.contains("suspending at checkpoint: GPU computing is suspended")
            || p.output().contains("suspended at checkpoint"),
        "{explain}"
    );
    // It checkpoints again (past the checkpoint it had when the GPU got hot), then it leaves
    // the GPU.
    p.wait_for(
        "task wu_gpu_0: suspended at checkpoint; ",
        Duration::from_secs(60),
    );
    p.wait_for(
        "removing task wu_gpu_0 from memory",
        Duration::from_secs(10),
    );
    let out = p.output();
    assert!(
        !out.contains("preempting task wu_gpu_0"),
        "quit at once:\n{out}"
    );
    wait_until("the app exits", Duration::from_secs(20), || {
        app_pid(port, "wu_gpu_0").is_none()
    });
    // Cooled under the limit's band: GPU computing resumes.
    std::fs::write(&temp, "60\n").expect("temperature");
    p.wait_for("Resuming GPU computation", Duration::from_secs(20));
    stop(&mut p, d.path());
    // The checkpoint it left with is later than the one it had when the GPU got hot.
    let st = state(d.path());
    assert!(num(&st, "checkpoint_cpu_time") > cp, "{st}");
}
