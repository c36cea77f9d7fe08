//! The project, data directory and GUI RPC helpers of the tests that run the real BOINC API
//! test app under `ferrited` (`apps.rs`, `checkpoint_grace.rs`): each test file uses a part.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use ferrite_e2e::inspect::{slot_processes, wait_until};
use ferrite_e2e::{bin, boinc_test_app, gui_rpc, install_program, Proc};

/// The project's master URL; nothing listens there and the network is off anyway.
pub const URL: &str = "http://127.0.0.1:1/apps/";
pub const PASSWORD: &str = "testpw";
/// The FLOPS of the app version: `rsc_fpops_bound / FLOPS` is the elapsed-time limit.
pub const FLOPS: f64 = 1e9;
pub const APP_FILE: &str = "boinc_test_app_1.00";

pub fn project_dir(dir: &Path) -> PathBuf {
    dir.join("projects")
        .join(ferrite_proto::account::escape_project_url(URL))
}

/// One workunit and its result `<name>_0`.
#[derive(Debug, Clone)]
pub struct Job {
    pub name: &'static str,
    /// The app's command line (`<command_line>` of the workunit).
    pub args: String,
    /// Steps the app does (its input `in`).
    pub steps: u32,
    pub fpops_bound: f64,
    pub disk_bound: f64,
    /// The task already ran this many seconds in earlier episodes (an active task in slot 0).
    pub resumed_elapsed: Option<f64>,
}

impl Job {
    pub fn new(name: &'static str, steps: u32, args: &str) -> Job {
        Job {
            name,
            args: args.to_owned(),
            steps,
            fpops_bound: 1e13,
            disk_bound: 1e9,
            resumed_elapsed: None,
        }
    }

    pub fn result(&self) -> String {
        format!("{}_0", self.name)
    }
}

/// Global preferences for `global_prefs_override.xml`: never suspended by the host's state,
/// apps kept in memory on suspension or not, plus `extra` elements.
pub fn prefs(leave_in_memory: bool, extra: &str) -> String {
    format!(
        "<global_preferences>\n<run_if_user_active>1</run_if_user_active>\n\
         <suspend_cpu_usage>0</suspend_cpu_usage>\n<max_ncpus_pct>100</max_ncpus_pct>\n\
         <cpu_usage_limit>100</cpu_usage_limit>\n<leave_apps_in_memory>{}</leave_apps_in_memory>\n\
         {extra}</global_preferences>\n",
        u8::from(leave_in_memory)
    )
}

pub fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A data directory whose one project has the test app as app version and `jobs` downloaded
/// and ready to run.
pub fn data_dir(jobs: &[Job], prefs: &str) -> tempfile::TempDir {
    data_dir_with_version(jobs, prefs, "")
}

/// As [`data_dir`], with `version_extra` (say a `<coproc>`) added to the app version.
pub fn data_dir_with_version(jobs: &[Job], prefs: &str, version_extra: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path();
    let pdir = project_dir(dir);
    fs::create_dir_all(&pdir).expect("project dir");
    fs::create_dir_all(dir.join("slots")).expect("slots dir");
    let app = boinc_test_app(Path::new(env!("CARGO_TARGET_TMPDIR")));
    install_program(&app, &pdir.join(APP_FILE));
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
         <api_version>7.20.0</api_version>\n{version_extra}\
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
pub fn start_with(dir: &Path, port: u16, env: &[(&str, &Path)]) -> Proc {
    start_gpus(dir, port, false, env)
}

/// As [`start_with`]; `gpus`: the daemon looks for GPUs (else `--no_gpus`).
pub fn start_gpus(dir: &Path, port: u16, gpus: bool, env: &[(&str, &Path)]) -> Proc {
    let mut cmd = Command::new(bin("ferrited"));
    cmd.args(["--dir", dir.to_str().expect("utf-8")])
        .args(["--gui_rpc_port", &port.to_string()])
        .arg("--skip_cpu_benchmarks");
    if !gpus {
        cmd.arg("--no_gpus");
    }
    cmd.env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        // The host's logind (if any) would tell the user's activity instead of
        // FERRITE_DEV_ROOT.
        .env("DBUS_SYSTEM_BUS_ADDRESS", ferrite_e2e::NO_SYSTEM_BUS);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut p = Proc::spawn(cmd);
    p.wait_for("GUI RPC listening on TCP", Duration::from_secs(30));
    p
}

pub fn start(dir: &Path, port: u16) -> Proc {
    start_with(dir, port, &[])
}

/// SIGTERM, and the daemon exits cleanly (its state saved, no app left).
pub fn stop(p: &mut Proc, dir: &Path) {
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(40)).success(), "{}", p.output());
    let left = slot_processes(dir);
    assert!(left.is_empty(), "apps outlived the daemon: {left:?}");
}

pub fn gui(port: u16, op: &str) -> String {
    gui_rpc(port, Some(PASSWORD), op)
}

pub fn result_op(port: u16, op: &str, result: &str) {
    let r = gui(
        port,
        &format!("<{op}>\n<project_url>{URL}</project_url>\n<name>{result}</name>\n</{op}>\n"),
    );
    assert!(r.contains("<success/>"), "{op}: {r}");
}

pub fn state(dir: &Path) -> String {
    fs::read_to_string(dir.join("client_state.xml")).expect("state file")
}

/// The `<result>` block of `name` in a state file or a `get_results` reply.
pub fn result_block(xml: &str, name: &str) -> String {
    let start = xml
        .find(&format!("<name>{name}</name>"))
        .unwrap_or_else(|| panic!("no result {name} in {xml}"));
    let end = xml[start..]
        .find("</result>")
        .map_or(xml.len(), |e| e + start);
    xml[start..end].to_owned()
}

/// The text of the first `<tag>` in `xml`.
pub fn tag<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let i = xml.find(&open)? + open.len();
    let len = xml[i..].find('<')?;
    Some(xml[i..i + len].trim())
}

pub fn num(xml: &str, name: &str) -> f64 {
    tag(xml, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number <{name}> in {xml}"))
}

/// The result as `get_results` shows it now.
pub fn gui_result(port: u16, name: &str) -> String {
    result_block(&gui(port, "<get_results/>\n"), name)
}

/// The PID of the result's app, from `get_results`.
pub fn app_pid(port: u16, name: &str) -> Option<i32> {
    let r = gui_result(port, name);
    tag(&r, "pid")
        .and_then(|p| p.parse().ok())
        .filter(|p| *p > 0)
}

/// The state letter and CPU seconds of a live (not zombie) process.
pub fn proc_stat(pid: i32) -> Option<(char, f64)> {
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

pub fn cpu_secs(pid: i32) -> f64 {
    proc_stat(pid).map_or(0.0, |(_, c)| c)
}

/// Waits until the app's CPU time grew by `by` seconds from `from`; returns the new figure.
pub fn wait_cpu_advance(pid: i32, from: f64, by: f64, timeout: Duration) -> f64 {
    let mut now = from;
    wait_until(&format!("app {pid} uses {by} s of CPU"), timeout, || {
        now = cpu_secs(pid);
        now >= from + by
    });
    now
}

/// How many times `needle` occurs in the daemon's output.
pub fn count(p: &Proc, needle: &str) -> usize {
    p.output().matches(needle).count()
}

/// The step the app says it resumed from (its stderr, kept in `<stderr_out>`), if it did.
pub fn resumed_step(stderr: &str) -> Option<u32> {
    stderr
        .split("resuming from checkpoint at step ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
}

pub fn alive(pid: i32) -> bool {
    proc_stat(pid).is_some()
}

/// Writes `global_prefs_override.xml` and has the daemon read it.
pub fn set_prefs(port: u16, dir: &Path, prefs: &str) {
    fs::write(dir.join("global_prefs_override.xml"), prefs).expect("prefs");
    let r = gui(port, "<read_global_prefs_override/>\n");
    assert!(r.contains("<success/>"), "{r}");
}
