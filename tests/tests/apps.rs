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
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use ferrite_e2e::inspect::{slot_processes, wait_until};
use ferrite_e2e::{bin, boinc_test_app, free_port, gui_rpc, Proc};

/// The project's master URL; nothing listens there and the network is off anyway.
const URL: &str = "http://127.0.0.1:1/apps/";
const PASSWORD: &str = "testpw";
/// The FLOPS of the app version: `rsc_fpops_bound / FLOPS` is the elapsed-time limit.
const FLOPS: f64 = 1e9;
const APP_FILE: &str = "boinc_test_app_1.00";

fn project_dir(dir: &Path) -> PathBuf {
    dir.join("projects")
        .join(ferrite_proto::account::escape_project_url(URL))
}

/// One workunit and its result `<name>_0`.
#[derive(Debug, Clone)]
struct Job {
    name: &'static str,
    /// The app's command line (`<command_line>` of the workunit).
    args: String,
    /// Steps the app does (its input `in`).
    steps: u32,
    fpops_bound: f64,
    disk_bound: f64,
    /// The task already ran this many seconds in earlier episodes (an active task in slot 0).
    resumed_elapsed: Option<f64>,
}

impl Job {
    fn new(name: &'static str, steps: u32, args: &str) -> Job {
        Job {
            name,
            args: args.to_owned(),
            steps,
            fpops_bound: 1e13,
            disk_bound: 1e9,
            resumed_elapsed: None,
        }
    }

    fn result(&self) -> String {
        format!("{}_0", self.name)
    }
}

/// Global preferences for `global_prefs_override.xml`: never suspended by the host's state,
/// apps kept in memory on suspension or not, plus `extra` elements.
fn prefs(leave_in_memory: bool, extra: &str) -> String {
    format!(
        "<global_preferences>\n<run_if_user_active>1</run_if_user_active>\n\
         <suspend_cpu_usage>0</suspend_cpu_usage>\n<max_ncpus_pct>100</max_ncpus_pct>\n\
         <cpu_usage_limit>100</cpu_usage_limit>\n<leave_apps_in_memory>{}</leave_apps_in_memory>\n\
         {extra}</global_preferences>\n",
        u8::from(leave_in_memory)
    )
}

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A data directory whose one project has the test app as app version and `jobs` downloaded
/// and ready to run.
fn data_dir(jobs: &[Job], prefs: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path();
    let pdir = project_dir(dir);
    fs::create_dir_all(&pdir).expect("project dir");
    fs::create_dir_all(dir.join("slots")).expect("slots dir");
    let app = boinc_test_app(Path::new(env!("CARGO_TARGET_TMPDIR")));
    fs::copy(&app, pdir.join(APP_FILE)).expect("install app");
    let app_len = fs::metadata(pdir.join(APP_FILE)).expect("app").len();
    let now = now_secs();
    let mut files = format!(
        "<file>\n<name>{APP_FILE}</name>\n<nbytes>{app_len}</nbytes>\n<max_nbytes>0</max_nbytes>\n\
         <status>1</status>\n<executable/>\n</file>\n"
    );
    let (mut wus, mut results, mut active) = (String::new(), String::new(), String::new());
    for (i, j) in jobs.iter().enumerate() {
        let input = format!("{}_in", j.name);
        let output = format!("{}_out", j.result());
        let steps = format!("{}\n", j.steps);
        fs::write(pdir.join(&input), &steps).expect("input");
        files.push_str(&format!(
            "<file>\n<name>{input}</name>\n<nbytes>{}</nbytes>\n<max_nbytes>0</max_nbytes>\n\
             <status>1</status>\n</file>\n<file>\n<name>{output}</name>\n<nbytes>0</nbytes>\n\
             <max_nbytes>1000000</max_nbytes>\n<status>0</status>\n\
             <upload_url>{URL}upload</upload_url>\n</file>\n",
            steps.len()
        ));
        wus.push_str(&format!(
            "<workunit>\n<name>{}</name>\n<app_name>test_app</app_name>\n<version_num>100</version_num>\n\
             <rsc_fpops_est>1e10</rsc_fpops_est>\n<rsc_fpops_bound>{}</rsc_fpops_bound>\n\
             <rsc_memory_bound>1000000</rsc_memory_bound>\n<rsc_disk_bound>{}</rsc_disk_bound>\n\
             <command_line>\n{}\n</command_line>\n\
             <file_ref>\n<file_name>{input}</file_name>\n<open_name>in</open_name>\n</file_ref>\n\
             </workunit>\n",
            j.name, j.fpops_bound, j.disk_bound, j.args
        ));
        results.push_str(&format!(
            "<result>\n<name>{}</name>\n<final_cpu_time>0</final_cpu_time>\n\
             <final_elapsed_time>0</final_elapsed_time>\n<exit_status>0</exit_status>\n\
             <state>2</state>\n<platform>x86_64-pc-linux-gnu</platform>\n<version_num>100</version_num>\n\
             <wu_name>{}</wu_name>\n<report_deadline>{:.0}</report_deadline>\n\
             <received_time>{:.0}</received_time>\n\
             <file_ref>\n<file_name>{output}</file_name>\n<open_name>out</open_name>\n</file_ref>\n\
             </result>\n",
            j.result(),
            j.name,
            now + 7.0 * 86400.0,
            now - 60.0
        ));
        if let Some(e) = j.resumed_elapsed {
            fs::create_dir_all(dir.join(format!("slots/{i}"))).expect("slot");
            active.push_str(&format!(
                "<active_task>\n<project_master_url>{URL}</project_master_url>\n\
                 <result_name>{}</result_name>\n<active_task_state>0</active_task_state>\n\
                 <app_version_num>100</app_version_num>\n<slot>{i}</slot>\n\
                 <checkpoint_cpu_time>{e}</checkpoint_cpu_time>\n\
                 <checkpoint_elapsed_time>{e}</checkpoint_elapsed_time>\n\
                 <checkpoint_fraction_done>0.5</checkpoint_fraction_done>\n\
                 <checkpoint_fraction_done_elapsed_time>{e}</checkpoint_fraction_done_elapsed_time>\n\
                 </active_task>\n",
                j.result()
            ));
        }
    }
    let state = format!(
        "<client_state>\n<host_info>\n<p_ncpus>2</p_ncpus>\n<p_fpops>{FLOPS}</p_fpops>\n\
         <p_iops>{FLOPS}</p_iops>\n</host_info>\n\
         <project>\n<master_url>{URL}</master_url>\n<project_name>Apps Test Project</project_name>\n\
         <user_name>tester</user_name>\n<userid>1</userid>\n<hostid>1</hostid>\n\
         <resource_share>100</resource_share>\n<dont_request_more_work/>\n</project>\n\
         <app>\n<name>test_app</name>\n<user_friendly_name>Test App</user_friendly_name>\n</app>\n\
         {files}\
         <app_version>\n<app_name>test_app</app_name>\n<version_num>100</version_num>\n\
         <platform>x86_64-pc-linux-gnu</platform>\n<avg_ncpus>1</avg_ncpus>\n<flops>{FLOPS}</flops>\n\
         <api_version>7.20.0</api_version>\n\
         <file_ref>\n<file_name>{APP_FILE}</file_name>\n<main_program/>\n</file_ref>\n</app_version>\n\
         {wus}{results}<active_task_set>\n{active}</active_task_set>\n\
         <platform_name>x86_64-pc-linux-gnu</platform_name>\n\
         <core_client_major_version>7</core_client_major_version>\n\
         <core_client_minor_version>20</core_client_minor_version>\n\
         <core_client_release>5</core_client_release>\n\
         <user_run_request>2</user_run_request>\n<user_gpu_request>2</user_gpu_request>\n\
         <user_network_request>3</user_network_request>\n</client_state>\n"
    );
    fs::write(dir.join("client_state.xml"), state).expect("state");
    fs::write(dir.join("gui_rpc_auth.cfg"), format!("{PASSWORD}\n")).expect("password");
    fs::write(
        dir.join("cc_config.xml"),
        "<cc_config>\n<log_flags>\n<task>1</task>\n<cpu_sched>1</cpu_sched>\n</log_flags>\n\
         <options>\n<no_info_fetch>1</no_info_fetch>\n</options>\n</cc_config>\n",
    )
    .expect("cc_config");
    fs::write(dir.join("global_prefs_override.xml"), prefs).expect("prefs");
    d
}

/// `ferrited` on `dir` with GUI RPC on `port` and the extra environment `env`.
fn start_with(dir: &Path, port: u16, env: &[(&str, &Path)]) -> Proc {
    let mut cmd = Command::new(bin("ferrited"));
    cmd.args(["--dir", dir.to_str().expect("utf-8")])
        .args(["--gui_rpc_port", &port.to_string()])
        .args(["--skip_cpu_benchmarks", "--no_gpus"])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut p = Proc::spawn(cmd);
    p.wait_for("GUI RPC listening on TCP", Duration::from_secs(30));
    p
}

fn start(dir: &Path, port: u16) -> Proc {
    start_with(dir, port, &[])
}

/// SIGTERM, and the daemon exits cleanly (its state saved, no app left).
fn stop(p: &mut Proc, dir: &Path) {
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(40)).success(), "{}", p.output());
    let left = slot_processes(dir);
    assert!(left.is_empty(), "apps outlived the daemon: {left:?}");
}

fn gui(port: u16, op: &str) -> String {
    gui_rpc(port, Some(PASSWORD), op)
}

fn result_op(port: u16, op: &str, result: &str) {
    let r = gui(
        port,
        &format!("<{op}>\n<project_url>{URL}</project_url>\n<name>{result}</name>\n</{op}>\n"),
    );
    assert!(r.contains("<success/>"), "{op}: {r}");
}

fn state(dir: &Path) -> String {
    fs::read_to_string(dir.join("client_state.xml")).expect("state file")
}

/// The `<result>` block of `name` in a state file or a `get_results` reply.
fn result_block(xml: &str, name: &str) -> String {
    let start = xml
        .find(&format!("<name>{name}</name>"))
        .unwrap_or_else(|| panic!("no result {name} in {xml}"));
    let end = xml[start..]
        .find("</result>")
        .map_or(xml.len(), |e| e + start);
    xml[start..end].to_owned()
}

/// The text of the first `<tag>` in `xml`.
fn tag<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let i = xml.find(&open)? + open.len();
    let len = xml[i..].find('<')?;
    Some(xml[i..i + len].trim())
}

fn num(xml: &str, name: &str) -> f64 {
    tag(xml, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number <{name}> in {xml}"))
}

/// The result as `get_results` shows it now.
fn gui_result(port: u16, name: &str) -> String {
    result_block(&gui(port, "<get_results/>\n"), name)
}

/// The PID of the result's app, from `get_results`.
fn app_pid(port: u16, name: &str) -> Option<i32> {
    let r = gui_result(port, name);
    tag(&r, "pid")
        .and_then(|p| p.parse().ok())
        .filter(|p| *p > 0)
}

/// The state letter and CPU seconds of a live (not zombie) process.
fn proc_stat(pid: i32) -> Option<(char, f64)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let st = fields.first()?.chars().next()?;
    // After the command: state is field 3 of the line, utime 14 and stime 15.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (st != 'Z' && st != 'X').then_some((st, (utime + stime) / hz.max(1.0)))
}

fn cpu_secs(pid: i32) -> f64 {
    proc_stat(pid).map_or(0.0, |(_, c)| c)
}

/// Waits until the app's CPU time grew by `by` seconds from `from`; returns the new figure.
fn wait_cpu_advance(pid: i32, from: f64, by: f64, timeout: Duration) -> f64 {
    let mut now = from;
    wait_until(&format!("app {pid} uses {by} s of CPU"), timeout, || {
        now = cpu_secs(pid);
        now >= from + by
    });
    now
}

/// How many times `needle` occurs in the daemon's output.
fn count(p: &Proc, needle: &str) -> usize {
    p.output().matches(needle).count()
}

/// The step the app says it resumed from (its stderr, kept in `<stderr_out>`), if it did.
fn resumed_step(stderr: &str) -> Option<u32> {
    stderr
        .split("resuming from checkpoint at step ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
}

fn alive(pid: i32) -> bool {
    proc_stat(pid).is_some()
}

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

/// Writes `global_prefs_override.xml` and has the daemon read it.
fn set_prefs(port: u16, dir: &Path, prefs: &str) {
    fs::write(dir.join("global_prefs_override.xml"), prefs).expect("prefs");
    let r = gui(port, "<read_global_prefs_override/>\n");
    assert!(r.contains("<success/>"), "{r}");
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
    thread::sleep(Duration::from_secs(3));
    assert_eq!(app_pid(port, "wu_big_0"), Some(pid), "{}", p.output());
    assert!(alive(pid), "the app is still in memory");
    assert_eq!(count(&p, "preempting task wu_big_0"), 0, "{}", p.output());

    set_prefs(port, d.path(), &ram_prefs(90, 90));
    p.wait_for("resuming task wu_big_0", Duration::from_secs(30));
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
    let small_pid = app_pid(port, "wu_small_0").expect("the small task runs");
    thread::sleep(Duration::from_secs(3));
    assert_eq!(app_pid(port, "wu_small_0"), Some(small_pid));
    assert!(app_pid(port, "wu_big_0").is_none(), "{}", p.output());
    assert_eq!(count(&p, "starting task wu_big_0"), 1, "{}", p.output());
    p.wait_for("task wu_small_0 finished", Duration::from_secs(60));

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
