//! Short tasks back to back: a real BOINC API app (the C++ test app of `ferrite-supervise`,
//! linked against Debian's libboinc-app-dev) that calls `boinc_finish` waits two seconds
//! before it exits; `ferrited` sees it finishing (the "called boinc_finish" line in its
//! `stderr.txt`, no CPU used) and starts the next task on its CPU at once, while the first
//! one exits and is handled as usual. A task that keeps using CPU through that wait keeps
//! its CPU.
//!
//! One CPU (`cc_config.xml` `<ncpus>1</ncpus>`), two tasks; network activity is off, so
//! finished results wait for upload.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use ferrite_e2e::inspect::slot_processes;
use ferrite_e2e::{bin, boinc_test_app, free_port, gui_rpc, install_program, Proc};

const URL: &str = "http://127.0.0.1:1/finishing/";
const PASSWORD: &str = "testpw";
const APP_FILE: &str = "boinc_test_app_1.00";

fn project_dir(dir: &Path) -> PathBuf {
    dir.join("projects")
        .join(ferrite_proto::account::escape_project_url(URL))
}

/// A data directory with one CPU and the workunits `(name, steps, command line)`, each with
/// its result `<name>_0`, downloaded and ready to run in this order.
fn data_dir(jobs: &[(&str, u32, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path();
    let pdir = project_dir(dir);
    fs::create_dir_all(&pdir).expect("project dir");
    let app = boinc_test_app(Path::new(env!("CARGO_TARGET_TMPDIR")));
    install_program(&app, &pdir.join(APP_FILE));
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let mut files = format!(
        "<file>\n<name>{APP_FILE}</name>\n<nbytes>0</nbytes>\n<status>1</status>\n<executable/>\n</file>\n"
    );
    let (mut wus, mut results) = (String::new(), String::new());
    for (i, (name, steps, args)) in jobs.iter().enumerate() {
        let steps = format!("{steps}\n");
        fs::write(pdir.join(format!("{name}_in")), &steps).expect("input");
        files.push_str(&format!(
            "<file>\n<name>{name}_in</name>\n<nbytes>{}</nbytes>\n<status>1</status>\n</file>\n\
             <file>\n<name>{name}_0_out</name>\n<max_nbytes>1000000</max_nbytes>\n<status>0</status>\n\
             <upload_url>{URL}upload</upload_url>\n</file>\n",
            steps.len()
        ));
        wus.push_str(&format!(
            "<workunit>\n<name>{name}</name>\n<app_name>test_app</app_name>\n<version_num>100</version_num>\n\
             <rsc_fpops_est>1e9</rsc_fpops_est>\n<rsc_fpops_bound>1e13</rsc_fpops_bound>\n\
             <rsc_memory_bound>1000000</rsc_memory_bound>\n<rsc_disk_bound>1e9</rsc_disk_bound>\n\
             <command_line>{args}</command_line>\n\
             <file_ref>\n<file_name>{name}_in</file_name>\n<open_name>in</open_name>\n</file_ref>\n\
             </workunit>\n"
        ));
        results.push_str(&format!(
            "<result>\n<name>{name}_0</name>\n<wu_name>{name}</wu_name>\n<state>2</state>\n\
             <platform>x86_64-pc-linux-gnu</platform>\n<version_num>100</version_num>\n\
             <report_deadline>{:.0}</report_deadline>\n<received_time>{:.0}</received_time>\n\
             <file_ref>\n<file_name>{name}_0_out</file_name>\n<open_name>out</open_name>\n</file_ref>\n\
             </result>\n",
            now + 7.0 * 86400.0,
            now - 600.0 + i as f64
        ));
    }
    let state = format!(
        "<client_state>\n<host_info>\n<p_ncpus>2</p_ncpus>\n<p_fpops>1e9</p_fpops>\n</host_info>\n\
         <project>\n<master_url>{URL}</master_url>\n<project_name>Finishing Test</project_name>\n\
         <hostid>1</hostid>\n<resource_share>100</resource_share>\n<dont_request_more_work/>\n</project>\n\
         <app>\n<name>test_app</name>\n</app>\n{files}\
         <app_version>\n<app_name>test_app</app_name>\n<version_num>100</version_num>\n\
         <platform>x86_64-pc-linux-gnu</platform>\n<avg_ncpus>1</avg_ncpus>\n<flops>1e9</flops>\n\
         <api_version>7.20.0</api_version>\n\
         <file_ref>\n<file_name>{APP_FILE}</file_name>\n<main_program/>\n</file_ref>\n</app_version>\n\
         {wus}{results}<platform_name>x86_64-pc-linux-gnu</platform_name>\n\
         <user_run_request>2</user_run_request>\n<user_gpu_request>2</user_gpu_request>\n\
         <user_network_request>3</user_network_request>\n</client_state>\n"
    );
    fs::write(dir.join("client_state.xml"), state).expect("state");
    fs::write(dir.join("gui_rpc_auth.cfg"), format!("{PASSWORD}\n")).expect("password");
    fs::write(
        dir.join("cc_config.xml"),
        "<cc_config>\n<options>\n<ncpus>1</ncpus>\n<no_info_fetch>1</no_info_fetch>\n</options>\n\
         </cc_config>\n",
    )
    .expect("cc_config");
    fs::write(
        dir.join("global_prefs_override.xml"),
        "<global_preferences>\n<run_if_user_active>1</run_if_user_active>\n\
         <suspend_cpu_usage>0</suspend_cpu_usage>\n<max_ncpus_pct>100</max_ncpus_pct>\n\
         <cpu_usage_limit>100</cpu_usage_limit>\n</global_preferences>\n",
    )
    .expect("prefs");
    d
}

fn start(dir: &Path, port: u16) -> Proc {
    let mut cmd = Command::new(bin("ferrited"));
    cmd.args(["--dir", dir.to_str().expect("utf-8")])
        .args(["--gui_rpc_port", &port.to_string()])
        .args(["--skip_cpu_benchmarks", "--no_gpus"])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1");
    let mut p = Proc::spawn(cmd);
    p.wait_for("GUI RPC listening on TCP", Duration::from_secs(30));
    p
}

/// SIGTERM, and the daemon exits cleanly with no app left.
fn stop(p: &mut Proc, dir: &Path) {
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(40)).success(), "{}", p.output());
    let left = slot_processes(dir);
    assert!(left.is_empty(), "apps outlived the daemon: {left:?}");
}

/// Where `needle` first occurs in the daemon's output.
fn at(out: &str, needle: &str) -> usize {
    out.find(needle)
        .unwrap_or_else(|| panic!("no {needle:?} in the output:\n{out}"))
}

/// The `<task>` block of `name` in a `ferrite_explain` reply.
fn explained<'a>(xml: &'a str, name: &str) -> &'a str {
    xml.split("<task>")
        .find(|t| t.contains(&format!("<name>{name}</name>")))
        .unwrap_or_else(|| panic!("no task {name} in {xml}"))
}

/// Both results wait for upload with exit status 0 in the saved state.
fn assert_both_done(dir: &Path) {
    let s = fs::read_to_string(dir.join("client_state.xml")).expect("state");
    for r in ["wu_a_0", "wu_b_0"] {
        let block = s
            .split("<result>")
            .find(|b| b.contains(&format!("<name>{r}</name>")))
            .unwrap_or_else(|| panic!("no result {r}"));
        assert!(block.contains("<state>4</state>"), "{r} uploading: {block}");
        assert!(
            block.contains("<exit_status>0</exit_status>"),
            "{r}: {block}"
        );
    }
    let out = fs::read_to_string(project_dir(dir).join("wu_a_0_out")).expect("output");
    assert_eq!(out, "done 3 steps\n");
}

#[test]
fn the_next_task_starts_while_a_finishing_one_exits() {
    if !ferrite_e2e::boinc_api_or_skip("the_next_task_starts_while_a_finishing_one_exits") {
        return;
    }
    let d = data_dir(&[("wu_a", 3, "--step-ms 100"), ("wu_b", 3, "--step-ms 100")]);
    let port = free_port();
    let mut p = start(d.path(), port);
    p.wait_for("task wu_a_0 is finishing", Duration::from_secs(60));
    // The core's view while A is in its final wait: A keeps its place without a CPU.
    let explain = gui_rpc(port, Some(PASSWORD), "<ferrite_explain/>\n");
    p.wait_for("task wu_b_0 finished", Duration::from_secs(60));
    stop(&mut p, d.path());

    let out = p.output();
    let finishing = at(&out, "task wu_a_0 is finishing");
    let b_starts = at(&out, "starting task wu_b_0");
    let a_ends = at(&out, "task wu_a_0 finished; outputs ready for upload");
    assert!(
        finishing < b_starts && b_starts < a_ends,
        "B must start after A is seen finishing and before A exits:\n{out}"
    );
    // The pass of the tick that marked A started B; the call was answered after it, while
    // A was still in its two-second wait.
    let a = explained(&explain, "wu_a_0");
    assert!(a.contains("<decision>run</decision>"), "{explain}");
    assert!(a.contains("Finishing:"), "{explain}");
    assert!(a.contains("CPUs are counted free"), "{explain}");
    let b = explained(&explain, "wu_b_0");
    assert!(b.contains("<decision>run</decision>"), "{explain}");
    assert!(explain.contains("<idle_cpus>0.00</idle_cpus>"), "{explain}");
    // Handled as any other exit: both results are done with their outputs.
    assert_both_done(d.path());
}

#[test]
fn a_task_that_uses_cpu_in_its_final_wait_keeps_its_cpu() {
    if !ferrite_e2e::boinc_api_or_skip("a_task_that_uses_cpu_in_its_final_wait_keeps_its_cpu") {
        return;
    }
    // A spins on another thread through boinc_finish's wait: B may only start once A exits.
    let d = data_dir(&[
        ("wu_a", 3, "--step-ms 100 --busy-finish"),
        ("wu_b", 3, "--step-ms 100"),
    ]);
    let mut p = start(d.path(), free_port());
    p.wait_for("task wu_b_0 finished", Duration::from_secs(60));
    stop(&mut p, d.path());

    let out = p.output();
    assert!(!out.contains("task wu_a_0 is finishing"), "{out}");
    let a_ends = at(&out, "task wu_a_0 finished; outputs ready for upload");
    let b_starts = at(&out, "starting task wu_b_0");
    assert!(a_ends < b_starts, "B must wait for A's exit:\n{out}");
    assert_both_done(d.path());
}
