//! `ferrited` runs tasks: the two runnable tasks of the `02_tasks_running` fixture (a non-API
//! shell-script app that sleeps N seconds, N read from its input) are run to completion,
//! suspended and resumed through GUI RPC, stopped on SIGTERM without leaving a process, and
//! recovered after the daemon is killed.

use std::fs;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use ferrite_e2e::inspect::{make_writable, refit_file, slot_processes, wait_until};
use ferrite_e2e::{ferrited_with_gui_rpc as start, fixture_data_dir, free_port, gui_rpc, Proc};

const URL: &str = "http://127.0.0.1:18080/";
const PROJECT: &str = "projects/127.0.0.1_18080";

/// Sets how many seconds the app of `wu` (`long` or `abort`) sleeps, in the project input and
/// in the copy already in its slot.
fn set_duration(dir: &Path, wu: &str, slot: u32, secs: u32) {
    fs::write(
        dir.join(PROJECT).join(format!("wu_{wu}_in")),
        format!("{secs}\n"),
    )
    .expect("in");
    refit_file(dir, PROJECT, &format!("wu_{wu}_in"));
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
fn after_the_daemon_is_killed_its_app_is_taken_over_and_the_task_completes_without_a_second_run() {
    let d = data_dir(1, 6);
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

    // The app is taken over where it runs (or, should it end before the restart, its finish
    // file is found): it is not started again.
    let mut p = start(d.path(), free_port());
    p.wait_for("task wu_abort_0 finished", Duration::from_secs(60));
    let out = p.output();
    assert!(
        out.contains("taking over task wu_abort_0")
            || out.contains("task wu_abort_0: its app finished while no client ran"),
        "{out}"
    );
    assert!(
        !out.contains("starting task wu_abort_0"),
        "started again: {out}"
    );
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

/// `task_suspend_reason` from `get_cc_status`.
fn task_suspend_reason(port: u16) -> i32 {
    let r = gui_rpc(port, Some("testpw"), "<get_cc_status/>\n");
    r.split("<task_suspend_reason>")
        .nth(1)
        .and_then(|x| x.split('<').next())
        .and_then(|x| x.trim().parse().ok())
        .unwrap_or_else(|| panic!("no task_suspend_reason in {r}"))
}

fn set_times(p: &Path, t: std::time::SystemTime) {
    let f = fs::File::options().write(true).open(p).expect("open");
    f.set_times(fs::FileTimes::new().set_accessed(t).set_modified(t))
        .expect("set times");
}

#[test]
fn battery_user_input_other_programs_load_and_exclusive_apps_suspend_computing() {
    let d = data_dir(300, 300);
    let dir = d.path().to_path_buf();
    // The host as the daemon will see it: power supplies, a terminal, /proc.
    let host = tempfile::tempdir().expect("tmp");
    let ps = host.path().join("sys/class/power_supply");
    for (name, kind) in [("AC", "Mains"), ("BAT0", "Battery")] {
        fs::create_dir_all(ps.join(name)).expect("mkdir");
        fs::write(ps.join(name).join("type"), format!("{kind}\n")).expect("type");
    }
    fs::write(ps.join("AC/online"), "1\n").expect("online");
    fs::write(ps.join("BAT0/status"), "Charging\n").expect("status");
    let dev = host.path().join("dev");
    fs::create_dir_all(&dev).expect("mkdir");
    let tty = dev.join("tty1");
    fs::write(&tty, "").expect("tty");
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    set_times(&tty, long_ago);
    let proc_root = host.path().join("proc");
    fs::create_dir_all(&proc_root).expect("mkdir");
    fs::write(proc_root.join("stat"), "cpu  0 0 0 0 0 0 0 0\n").expect("stat");
    fs::write(
        dir.join("global_prefs_override.xml"),
        "<global_preferences>\n<run_on_batteries>0</run_on_batteries>\n\
         <run_if_user_active>0</run_if_user_active>\n<idle_time_to_run>3</idle_time_to_run>\n\
         <suspend_cpu_usage>50</suspend_cpu_usage>\n<max_ncpus_pct>100</max_ncpus_pct>\n\
         </global_preferences>\n",
    )
    .expect("prefs");
    fs::write(
        dir.join("cc_config.xml"),
        "<cc_config>\n<options>\n<exclusive_app>fakegame</exclusive_app>\n</options>\n</cc_config>\n",
    )
    .expect("cc_config");

    let port = free_port();
    let port_s = port.to_string();
    let mut cmd = std::process::Command::new(ferrite_e2e::bin("ferrited"));
    cmd.args([
        "--dir",
        dir.to_str().expect("utf-8"),
        "--gui_rpc_port",
        &port_s,
    ])
    .args(["--skip_cpu_benchmarks", "--no_gpus"])
    .env("RUST_LOG", "info")
    .env("NO_COLOR", "1")
    // The host's logind (if any) would tell the user's activity instead of FERRITE_DEV_ROOT.
    .env("DBUS_SYSTEM_BUS_ADDRESS", ferrite_e2e::NO_SYSTEM_BUS)
    .env("FERRITE_SYS_ROOT", host.path().join("sys"))
    .env("FERRITE_DEV_ROOT", &dev)
    .env("FERRITE_PROC_ROOT", &proc_root);
    let mut p = Proc::spawn(cmd);
    p.wait_for("GUI RPC listening on TCP", Duration::from_secs(30));
    let all = |st: char| {
        let procs = slot_processes(&dir);
        procs.len() >= 2
            && procs
                .iter()
                .all(|(_, s, _)| *s == st || (st == 'S' && *s == 'R'))
    };
    wait_until("both apps run", Duration::from_secs(30), || all('S'));
    assert_eq!(task_suspend_reason(port), 0);

    // On battery: suspended (the fixture app never checkpoints, so it stays in memory).
    fs::write(ps.join("AC/online"), "0\n").expect("online");
    fs::write(ps.join("BAT0/status"), "Discharging\n").expect("status");
    wait_until("apps stopped on battery", Duration::from_secs(20), || {
        all('T')
    });
    assert_eq!(task_suspend_reason(port), 1);
    p.wait_for(
        "Suspending computation - on batteries",
        Duration::from_secs(5),
    );
    // `ferrite explain` says so before the tasks' own decisions.
    let explain = ferrite_e2e::ferrite_bounded(
        &dir,
        &["--host", &format!("127.0.0.1:{port}"), "explain"],
        Duration::from_secs(30),
    );
    assert!(
        explain
            .stdout
            .starts_with("Computing is suspended: on batteries (reason 1)"),
        "{}{}",
        explain.stdout,
        explain.stderr
    );
    fs::write(ps.join("AC/online"), "1\n").expect("online");
    wait_until("apps run on mains", Duration::from_secs(20), || all('S'));
    assert_eq!(task_suspend_reason(port), 0);

    // Someone types: run_if_user_active is off.
    set_times(&tty, std::time::SystemTime::now());
    wait_until(
        "apps stopped while the user is active",
        Duration::from_secs(20),
        || all('T'),
    );
    assert_eq!(task_suspend_reason(port), 2);
    set_times(&tty, long_ago);
    wait_until(
        "apps run when the user left",
        Duration::from_secs(20),
        || all('S'),
    );

    // Other programs keep both CPUs busy: over suspend_cpu_usage (50 %).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (stop, stat) = (stop.clone(), proc_root.join("stat"));
        thread::spawn(move || {
            let start = Instant::now();
            while !stop.load(std::sync::atomic::Ordering::Relaxed)
                && start.elapsed() < Duration::from_secs(90)
            {
                let busy = (start.elapsed().as_secs_f64() * 200.0) as u64;
                let _ = fs::write(&stat, format!("cpu  {busy} 0 0 0 0 0 0 0\n"));
                thread::sleep(Duration::from_millis(200));
            }
        })
    };
    wait_until(
        "apps stopped while the CPU is busy",
        Duration::from_secs(40),
        || all('T') && task_suspend_reason(port) == 1024,
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    load.join().expect("load thread");

    // An exclusive app starts: it wins over the CPU-usage hold.
    fs::create_dir_all(proc_root.join("4242")).expect("mkdir");
    fs::write(proc_root.join("4242/comm"), "fakegame\n").expect("comm");
    wait_until("exclusive app seen", Duration::from_secs(30), || {
        task_suspend_reason(port) == 512
    });
    assert!(all('T'));
    p.wait_for(
        "Suspending computation - an exclusive app is running",
        Duration::from_secs(5),
    );
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(40)).success(), "{}", p.output());
    assert!(
        slot_processes(&dir).is_empty(),
        "no app outlives the daemon"
    );
}

/// Adds `option` inside `<options>` of the fixture's `cc_config.xml`.
fn add_cc_option(dir: &Path, option: &str) {
    let path = dir.join("cc_config.xml");
    let cc = fs::read_to_string(&path).expect("cc_config");
    fs::write(
        &path,
        cc.replacen("<options>", &format!("<options>\n{option}"), 1),
    )
    .expect("cc_config");
}

/// The nice value and scheduling policy of `pid` (fields 19 and 41 of its stat line).
/// Nice value and scheduling policy of `pid`; `None` when it is gone, or not an app yet: a
/// process forked by `ferrited` sits in its slot directory before it sets its priority and
/// calls exec, so only a process running another program than `ferrited` counts.
fn nice_and_policy(pid: i32) -> Option<(i64, u32)> {
    let exe = fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    if exe.file_name().is_some_and(|n| n == "ferrited") {
        return None;
    }
    let f = ferrite_e2e::inspect::stat_fields(pid)?;
    // After the command name: state is field 3, nice 19, policy 41.
    Some((f.get(19 - 3)?.parse().ok()?, f.get(41 - 3)?.parse().ok()?))
}

#[test]
fn apps_run_at_idle_priority_unless_cc_config_sets_process_priority() {
    for (option, want) in [
        ("", (19, libc::SCHED_IDLE as u32)),
        (
            "<process_priority>1</process_priority>",
            (10, libc::SCHED_OTHER as u32),
        ),
        (
            "<process_priority>2</process_priority>",
            (0, libc::SCHED_OTHER as u32),
        ),
    ] {
        let d = data_dir(30, 30);
        add_cc_option(d.path(), option);
        let mut p = start(d.path(), free_port());
        p.wait_for("starting task wu_long_0", Duration::from_secs(30));
        let mut seen = Vec::new();
        wait_until("the apps run", Duration::from_secs(20), || {
            seen = slot_processes(d.path())
                .iter()
                .filter_map(|(pid, _, _)| nice_and_policy(*pid))
                .collect();
            !seen.is_empty()
        });
        assert!(
            seen.iter().all(|s| *s == want),
            "{option:?}: (nice, policy) of the apps {seen:?}, want {want:?}\n{}",
            p.output()
        );
        p.signal(libc::SIGTERM);
        assert!(p.wait(Duration::from_secs(30)).success(), "{}", p.output());
    }
}

/// Moves `result`'s report deadline to `days` before now in the state file of `dir`.
fn set_overdue(dir: &Path, result: &str, days: f64) {
    let path = dir.join("client_state.xml");
    let s = fs::read_to_string(&path).expect("state");
    let at = s
        .find(&format!("<name>{result}</name>"))
        .expect("the result");
    let start = at + s[at..].find("<report_deadline>").expect("deadline");
    let end = start + s[start..].find("</report_deadline>").expect("end");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let new = format!(
        "{}<report_deadline>{:.6}{}",
        &s[..start],
        now - days * 86400.0,
        &s[end..]
    );
    fs::write(&path, new).expect("state");
}

#[test]
fn an_overdue_task_is_named_and_aborted_past_max_overdue_days() {
    // Without max_overdue_days: named in the log, left to run.
    let d = data_dir(2, 30);
    set_overdue(d.path(), "wu_long_0", 3.0);
    let mut p = start(d.path(), free_port());
    p.wait_for(
        "Task wu_long_0 is 3.00 days overdue; you may not get credit for it.",
        Duration::from_secs(30),
    );
    p.wait_for("task wu_long_0 finished", Duration::from_secs(60));
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(30)).success(), "{}", p.output());

    // With max_overdue_days 1: aborted with 209; the task within its deadline runs on.
    let d = data_dir(30, 2);
    set_overdue(d.path(), "wu_long_0", 3.0);
    add_cc_option(d.path(), "<max_overdue_days>1</max_overdue_days>");
    let mut p = start(d.path(), free_port());
    p.wait_for(
        "Task wu_long_0 is 3.00 days overdue; aborting it.",
        Duration::from_secs(30),
    );
    p.wait_for("task wu_abort_0 finished", Duration::from_secs(60));
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(30)).success(), "{}", p.output());
    let s = state(d.path());
    let r = result_block(&s, "wu_long_0");
    assert!(r.contains("<state>6</state>"), "aborted: {r}");
    assert!(r.contains("<exit_status>209</exit_status>"), "{r}");
    assert!(
        !s.contains("<result_name>wu_long_0</result_name>"),
        "no active task left for it: {s}"
    );
    assert!(
        slot_processes(d.path()).is_empty(),
        "{:?}",
        slot_processes(d.path())
    );
}

/// Detaching the project through GUI RPC while one task's app runs and the other's is
/// stopped (suspended through GUI RPC): as with the official client, no process of either
/// app is left (the stopped one included), their slots are emptied, and `ferrited` goes on.
#[test]
fn detaching_a_project_ends_its_apps_even_a_stopped_one() {
    let op = "project_detach";
    let d = data_dir(300, 300);
    let port = free_port();
    let mut p = start(d.path(), port);
    let dir = d.path().to_path_buf();
    wait_until("both apps run", Duration::from_secs(30), || {
        slot_processes(&dir).len() >= 2
    });
    let r = gui_rpc(
        port,
        Some("testpw"),
        &format!("<suspend_result>\n<project_url>{URL}</project_url>\n<name>wu_abort_0</name>\n</suspend_result>\n"),
    );
    assert!(r.contains("<success/>"), "{r}");
    wait_until("one app is stopped (T)", Duration::from_secs(20), || {
        slot_processes(&dir).iter().any(|(_, st, _)| *st == 'T')
    });
    let r = gui_rpc(
        port,
        Some("testpw"),
        &format!("<{op}>\n<project_url>{URL}</project_url>\n</{op}>\n"),
    );
    assert!(r.contains("<success/>"), "{r}");
    wait_until(
        &format!("no app process is left after {op}"),
        Duration::from_secs(20),
        || slot_processes(&dir).is_empty(),
    );
    for n in 0..2 {
        let slot = dir.join(format!("slots/{n}"));
        let left = fs::read_dir(&slot).map_or(0, |e| e.count());
        assert_eq!(left, 0, "slot {n} is emptied");
    }
    // The daemon is still there and answers.
    let state = gui_rpc(port, Some("testpw"), "<get_results/>\n");
    assert!(!state.contains("<active_task>"), "{state}");
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(30)).success(), "{}", p.output());
}
