//! CPU throttling (`cpu_usage_limit`): `ferrited` runs a CPU-bound app (a busy shell loop in
//! place of the `02_tasks_running` fixture's app, and the spinning BOINC API test app) and,
//! with a limit of 30 % in `global_prefs_override.xml`, holds its CPU time well below the wall
//! time and says which mechanism it uses; a task the user suspends stays stopped and is
//! throttled again once resumed. With 100 % the app is never held. Without a cgroup, two apps
//! at 50 % take turns: one runs while the other is stopped.
//!
//! Besides CPU time (which other programs on a busy machine also lower), the tests read how
//! long the app was runnable at all (`/proc/PID/schedstat`: time on a CPU plus time waiting for
//! one): a stopped process accrues neither, so under the duty cycle that share is near the
//! limit whatever the machine's load, and without throttling it is near 100 %.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use ferrite_e2e::inspect::{
    make_writable, refit_file, slot_processes, stat_fields, state_letter, wait_until,
};
use ferrite_e2e::{boinc_test_app, fixture_data_dir, free_port, gui_rpc, install_program, Proc};

const URL: &str = "http://127.0.0.1:18080/";
const PROJECT: &str = "projects/127.0.0.1_18080";
const WINDOW: Duration = Duration::from_secs(6);

/// The fixture with its app replaced by an endless busy loop (the state file made to describe
/// it, or the start-up check would fetch the fixture's app again), only `wu_long_0` runnable (`wu_abort_0` is
/// suspended by the user), and `cpu_usage_limit`.
fn data_dir(limit: u32) -> tempfile::TempDir {
    data_dir_with(limit, 1)
}

/// [`data_dir`] with `ncpus` CPUs; with 2, both of the fixture's tasks run.
fn data_dir_with(limit: u32, ncpus: u32) -> tempfile::TempDir {
    let d = fixture_data_dir("02_tasks_running");
    make_writable(d.path());
    if ncpus < 2 {
        let state_file = d.path().join("client_state.xml");
        let state = fs::read_to_string(&state_file).expect("state");
        let state = state.replacen(
            "<name>wu_abort_0</name>",
            "<name>wu_abort_0</name>\n    <suspended_via_gui/>",
            1,
        );
        fs::write(&state_file, state).expect("state");
    }
    let app = d.path().join(PROJECT).join("fixture_app_2.00.sh");
    fs::write(
        &app,
        "#!/bin/sh\necho \"busy app starting in $(basename \"$PWD\")\" >&2\n\
         i=0\nwhile :; do i=$((i+1)); done\n",
    )
    .expect("app");
    fs::set_permissions(&app, fs::Permissions::from_mode(0o755)).expect("chmod");
    refit_file(d.path(), PROJECT, "fixture_app_2.00.sh");
    fs::write(
        d.path().join("cc_config.xml"),
        format!("<cc_config>\n<options>\n<ncpus>{ncpus}</ncpus>\n</options>\n</cc_config>\n"),
    )
    .expect("cc_config");
    fs::write(
        d.path().join("global_prefs_override.xml"),
        format!(
            "<global_preferences>\n<cpu_usage_limit>{limit}</cpu_usage_limit>\n\
             <suspend_cpu_usage>0</suspend_cpu_usage>\n<run_if_user_active>1</run_if_user_active>\n\
             <max_ncpus_pct>100</max_ncpus_pct>\n</global_preferences>\n"
        ),
    )
    .expect("prefs");
    d
}

fn start(dir: &Path, port: u16) -> Proc {
    let mut p = Proc::ferrited(&[
        "--dir",
        dir.to_str().expect("utf-8"),
        "--gui_rpc_port",
        &port.to_string(),
        "--skip_cpu_benchmarks",
        "--no_gpus",
    ]);
    p.wait_for("GUI RPC listening on TCP", Duration::from_secs(30));
    p
}

/// (CPU seconds, runnable seconds: on a CPU or waiting for one) of `pid` so far.
fn usage(pid: i32) -> (f64, f64) {
    let f = stat_fields(pid).expect("app alive");
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let ticks: f64 = f[11].parse::<f64>().expect("utime") + f[12].parse::<f64>().expect("stime");
    let sched = fs::read_to_string(format!("/proc/{pid}/schedstat")).expect("schedstat");
    let ns: Vec<f64> = sched
        .split_whitespace()
        .take(2)
        .map(|x| x.parse().expect("schedstat number"))
        .collect();
    (ticks / hz, (ns[0] + ns[1]) / 1e9)
}

/// The one app process, once it runs.
fn the_app(dir: &Path) -> i32 {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if let [(pid, _, _)] = slot_processes(dir)[..] {
            return pid;
        }
        thread::sleep(Duration::from_millis(100));
    }
    panic!("no single app process: {:?}", slot_processes(dir));
}

/// Measures `pid` over `d`: (CPU share, runnable share, share of samples in state T).
fn measure(pid: i32, d: Duration) -> (f64, f64, f64) {
    let (cpu0, run0) = usage(pid);
    let t0 = Instant::now();
    let (mut samples, mut stopped) = (0u32, 0u32);
    while t0.elapsed() < d {
        samples += 1;
        if state_letter(pid) == Some('T') {
            stopped += 1;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let (cpu1, run1) = usage(pid);
    let wall = t0.elapsed().as_secs_f64();
    (
        (cpu1 - cpu0) / wall,
        (run1 - run0) / wall,
        f64::from(stopped) / f64::from(samples),
    )
}

/// Collects state letters of `pid` over `d`.
fn states_over(pid: i32, d: Duration) -> Vec<char> {
    let t0 = Instant::now();
    let mut seen = Vec::new();
    while t0.elapsed() < d {
        seen.extend(state_letter(pid));
        thread::sleep(Duration::from_millis(20));
    }
    seen
}

fn result_op(port: u16, op: &str, name: &str) {
    result_op_at(port, URL, op, name);
}

fn result_op_at(port: u16, url: &str, op: &str, name: &str) {
    let r = gui_rpc(
        port,
        Some("testpw"),
        &format!("<{op}>\n<project_url>{url}</project_url>\n<name>{name}</name>\n</{op}>\n"),
    );
    assert!(r.contains("<success/>"), "{op}: {r}");
}

#[test]
fn a_limit_of_30_percent_holds_a_busy_app_well_below_the_wall_time() {
    let d = data_dir(30);
    let port = free_port();
    let mut p = start(d.path(), port);
    p.wait_for("CPU throttling at 30%", Duration::from_secs(30));
    let pid = the_app(d.path());
    let out = p.output();
    let cgroup = out.contains("with cgroup v2");
    assert!(
        cgroup || out.contains("by stopping apps in turn (SIGSTOP/SIGCONT)"),
        "the log names the mechanism:\n{out}"
    );
    assert!(
        out.matches("CPU throttling at").count() == 1,
        "the mechanism is logged once:\n{out}"
    );
    // Let the first cycles pass, then measure.
    thread::sleep(Duration::from_secs(1));
    let (cpu, runnable, stopped) = measure(pid, WINDOW);
    eprintln!(
        "limit 30%: CPU {:.0}% of the wall time, runnable {:.0}%, stopped in {:.0}% of samples",
        cpu * 100.0,
        runnable * 100.0,
        stopped * 100.0
    );
    assert!(cpu < 0.6, "CPU share {cpu:.2} with a 30% limit");
    assert!(cpu > 0.0, "the app still runs");
    if !cgroup {
        // Stopped about 70 % of the time, whatever else the machine does.
        assert!(
            (0.15..=0.5).contains(&runnable),
            "runnable share {runnable:.2} with a 30% duty cycle"
        );
        assert!(
            (0.45..=0.9).contains(&stopped),
            "stopped share {stopped:.2} with a 30% duty cycle"
        );
    }

    // A task the user suspends stays stopped; once resumed it is throttled again.
    let name = "wu_long_0";
    result_op(port, "suspend_result", name);
    wait_until(
        "the suspended task stopped",
        Duration::from_secs(10),
        || state_letter(pid) == Some('T'),
    );
    let seen = states_over(pid, Duration::from_secs(3));
    assert!(
        !seen.is_empty() && seen.iter().all(|s| *s == 'T'),
        "a suspended task stays stopped: {seen:?}"
    );
    result_op(port, "resume_result", name);
    wait_until(
        "the resumed task continued",
        Duration::from_secs(10),
        || state_letter(pid).is_some_and(|s| s != 'T'),
    );
    let (_, runnable, _) = measure(pid, Duration::from_secs(3));
    assert!(
        runnable > 0.05,
        "the resumed task runs again: {runnable:.2}"
    );
    if !cgroup {
        assert!(runnable < 0.6, "and is throttled again: {runnable:.2}");
    }

    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(40)).success(), "{}", p.output());
    assert!(
        slot_processes(d.path()).is_empty(),
        "no app outlives the daemon (a stopped one included)"
    );
}

#[test]
fn without_a_cgroup_two_apps_at_50_percent_take_turns_instead_of_stopping_together() {
    let d = data_dir_with(50, 2);
    // No cgroup v2 tree where the daemon looks: it stops the apps itself.
    let no_cgroup = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut cmd = Proc::ferrited_command(d.path(), port, None);
    cmd.arg("--no_gpus")
        .env("FERRITE_CGROUP_ROOT", no_cgroup.path());
    let mut p = Proc::spawn(cmd);
    p.wait_for(
        "CPU throttling at 50% by stopping apps in turn",
        Duration::from_secs(30),
    );
    // Let the first turns pass (and each app's start-up subshell end), then sample both
    // apps' states and how long each was runnable.
    thread::sleep(Duration::from_secs(2));
    let start = Instant::now();
    let pids = loop {
        let procs = slot_processes(d.path());
        if let [(a, _, wa), (b, _, wb)] = &procs[..] {
            if wa != wb {
                break [*a, *b];
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "two app processes in two slots: {procs:?}\n{}",
            p.output()
        );
        thread::sleep(Duration::from_millis(100));
    };
    let before = pids.map(usage);
    let t0 = Instant::now();
    let (mut samples, mut both_stopped, mut both_running) = (0u32, 0u32, 0u32);
    while t0.elapsed() < WINDOW {
        let stopped = pids.map(|pid| state_letter(pid) == Some('T'));
        samples += 1;
        match stopped {
            [true, true] => both_stopped += 1,
            [false, false] => both_running += 1,
            _ => {}
        }
        thread::sleep(Duration::from_millis(20));
    }
    let wall = t0.elapsed().as_secs_f64();
    let after = pids.map(usage);
    let runnable: Vec<f64> = (0..2).map(|i| (after[i].1 - before[i].1) / wall).collect();
    let both_stopped = f64::from(both_stopped) / f64::from(samples);
    let both_running = f64::from(both_running) / f64::from(samples);
    eprintln!(
        "two apps at 50%: runnable {:.0}% and {:.0}%; both stopped in {:.0}% of samples, both \
         running in {:.0}%",
        runnable[0] * 100.0,
        runnable[1] * 100.0,
        both_stopped * 100.0,
        both_running * 100.0
    );
    // One runs while the other is stopped (the duty cycle would stop both half the time).
    assert!(
        both_stopped < 0.2,
        "both stopped in {both_stopped:.2} of samples"
    );
    assert!(
        both_running < 0.2,
        "both running in {both_running:.2} of samples"
    );
    for r in &runnable {
        assert!(
            (0.25..=0.75).contains(r),
            "runnable share {r:.2} at 50%: {runnable:?}"
        );
    }
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(40)).success(), "{}", p.output());
    assert!(
        slot_processes(d.path()).is_empty(),
        "no app outlives the daemon (a stopped one included)"
    );
}

#[test]
fn a_limit_of_100_percent_never_holds_the_app() {
    let d = data_dir(100);
    let mut p = start(d.path(), free_port());
    p.wait_for("starting task", Duration::from_secs(30));
    let pid = the_app(d.path());
    thread::sleep(Duration::from_secs(1));
    let (cpu, runnable, stopped) = measure(pid, WINDOW);
    eprintln!(
        "limit 100%: CPU {:.0}% of the wall time, runnable {:.0}%, stopped in {:.0}% of samples",
        cpu * 100.0,
        runnable * 100.0,
        stopped * 100.0
    );
    assert_eq!(stopped, 0.0, "never stopped");
    assert!(runnable > 0.9, "runnable all the time: {runnable:.2}");
    assert!(cpu > 0.0);
    let out = p.output();
    assert!(!out.contains("CPU throttling"), "{out}");
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(40)).success(), "{}", p.output());
}

/// A data directory whose one project runs the C++ BOINC API test app spinning forever
/// (`--spin --forever`) as its only task, with `cpu_usage_limit` 30 %.
fn api_data_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path();
    let url = "http://127.0.0.1:1/throttle/";
    let pdir = dir
        .join("projects")
        .join(ferrite_proto::account::escape_project_url(url));
    fs::create_dir_all(&pdir).expect("project dir");
    let app = boinc_test_app(Path::new(env!("CARGO_TARGET_TMPDIR")));
    install_program(&app, &pdir.join("test_app"));
    fs::write(pdir.join("spin_in"), "1000\n").expect("input");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let state = format!(
        "<client_state>\n<project>\n<master_url>{url}</master_url>\n\
         <project_name>Throttle</project_name>\n<resource_share>100</resource_share>\n\
         <dont_request_more_work/>\n</project>\n<app>\n<name>test_app</name>\n</app>\n\
         <file>\n<name>test_app</name>\n<status>1</status>\n<executable/>\n</file>\n\
         <file>\n<name>spin_in</name>\n<status>1</status>\n</file>\n\
         <file>\n<name>spin_0_out</name>\n<max_nbytes>100000</max_nbytes>\n<status>0</status>\n\
         <upload_url>{url}upload</upload_url>\n</file>\n\
         <app_version>\n<app_name>test_app</app_name>\n<version_num>100</version_num>\n\
         <platform>x86_64-pc-linux-gnu</platform>\n<avg_ncpus>1</avg_ncpus>\n<flops>1e9</flops>\n\
         <api_version>7.20.0</api_version>\n<file_ref>\n<file_name>test_app</file_name>\n\
         <main_program/>\n</file_ref>\n</app_version>\n\
         <workunit>\n<name>spin</name>\n<app_name>test_app</app_name>\n<version_num>100</version_num>\n\
         <rsc_fpops_est>1e10</rsc_fpops_est>\n<rsc_fpops_bound>1e13</rsc_fpops_bound>\n\
         <rsc_memory_bound>1e8</rsc_memory_bound>\n<rsc_disk_bound>1e9</rsc_disk_bound>\n\
         <command_line>--spin --forever</command_line>\n\
         <file_ref>\n<file_name>spin_in</file_name>\n<open_name>in</open_name>\n</file_ref>\n\
         </workunit>\n<result>\n<name>spin_0</name>\n<wu_name>spin</wu_name>\n<state>2</state>\n\
         <platform>x86_64-pc-linux-gnu</platform>\n<version_num>100</version_num>\n\
         <report_deadline>{:.0}</report_deadline>\n<received_time>{now:.0}</received_time>\n\
         <file_ref>\n<file_name>spin_0_out</file_name>\n<open_name>out</open_name>\n</file_ref>\n\
         </result>\n<platform_name>x86_64-pc-linux-gnu</platform_name>\n\
         <core_client_major_version>7</core_client_major_version>\n\
         <core_client_minor_version>20</core_client_minor_version>\n\
         <core_client_release>5</core_client_release>\n<user_run_request>2</user_run_request>\n\
         <user_gpu_request>2</user_gpu_request>\n<user_network_request>3</user_network_request>\n\
         </client_state>\n",
        now + 7.0 * 86400.0
    );
    fs::write(dir.join("client_state.xml"), state).expect("state");
    fs::write(dir.join("gui_rpc_auth.cfg"), "testpw\n").expect("password");
    fs::write(
        dir.join("cc_config.xml"),
        "<cc_config>\n<options>\n<ncpus>1</ncpus>\n</options>\n</cc_config>\n",
    )
    .expect("cc_config");
    fs::write(
        dir.join("global_prefs_override.xml"),
        "<global_preferences>\n<cpu_usage_limit>30</cpu_usage_limit>\n\
         <suspend_cpu_usage>0</suspend_cpu_usage>\n<run_if_user_active>1</run_if_user_active>\n\
         <leave_apps_in_memory>1</leave_apps_in_memory>\n</global_preferences>\n",
    )
    .expect("prefs");
    d
}

#[test]
fn a_throttled_boinc_api_app_suspended_by_the_user_uses_no_cpu_until_resumed() {
    if !ferrite_e2e::boinc_api_or_skip(
        "a_throttled_boinc_api_app_suspended_by_the_user_uses_no_cpu_until_resumed",
    ) {
        return;
    }
    let d = api_data_dir();
    let port = free_port();
    let mut p = start(d.path(), port);
    p.wait_for("CPU throttling at 30%", Duration::from_secs(30));
    let pid = the_app(d.path());
    let cgroup = p.output().contains("with cgroup v2");
    thread::sleep(Duration::from_secs(1));
    let (cpu, runnable, _) = measure(pid, WINDOW);
    eprintln!(
        "API app, limit 30%: CPU {:.0}% of the wall time, runnable {:.0}%",
        cpu * 100.0,
        runnable * 100.0
    );
    assert!(cpu < 0.6, "CPU share {cpu:.2} with a 30% limit");
    if !cgroup {
        assert!(
            (0.15..=0.5).contains(&runnable),
            "runnable share {runnable:.2} with a 30% duty cycle"
        );
    }
    // Suspended by the user while the throttle holds it (the app cannot read its
    // `<suspend/>` then), the app does not compute: the throttle does not continue it.
    let t0 = Instant::now();
    while !cgroup && state_letter(pid) != Some('T') && t0.elapsed() < Duration::from_secs(3) {
        thread::sleep(Duration::from_millis(10));
    }
    result_op_at(
        port,
        "http://127.0.0.1:1/throttle/",
        "suspend_result",
        "spin_0",
    );
    // Once the app has acted on <suspend/> (half a second without computing), measure.
    wait_until(
        "the suspended app stops computing",
        Duration::from_secs(20),
        || measure(pid, Duration::from_millis(500)).0 < 0.03,
    );
    let (cpu, _, _) = measure(pid, Duration::from_secs(4));
    assert!(cpu < 0.03, "a suspended app computes: CPU share {cpu:.3}");
    // Resumed, it computes again (the throttle continues what it stopped), throttled.
    result_op_at(
        port,
        "http://127.0.0.1:1/throttle/",
        "resume_result",
        "spin_0",
    );
    // Once it computes again, measure how much.
    wait_until("the resumed app computes", Duration::from_secs(20), || {
        measure(pid, Duration::from_millis(500)).0 > 0.0
    });
    let (cpu, runnable, _) = measure(pid, Duration::from_secs(4));
    eprintln!(
        "API app resumed: CPU {:.0}% of the wall time, runnable {:.0}%",
        cpu * 100.0,
        runnable * 100.0
    );
    assert!(cpu > 0.0, "the resumed app computes");
    if !cgroup {
        assert!(
            (0.1..=0.6).contains(&runnable),
            "the resumed app is throttled: {runnable:.2}"
        );
    }
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(40)).success(), "{}", p.output());
    assert!(
        slot_processes(d.path()).is_empty(),
        "no app outlives the daemon"
    );
}
