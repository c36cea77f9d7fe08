//! What an app sees and what its end leaves, as with the official client: the arguments of
//! the running process (the job's command line first, quoted arguments whole, then the
//! version's or `app_config.xml`'s), the fraction done GUI RPC shows of an app that reports
//! none, and the `<message>` a failed task's report carries in `<stderr_out>`.

use std::fs;
use std::path::Path;
use std::time::Duration;

use ferrite_e2e::inspect::{make_writable, refit_file, slot_processes, wait_until};
use ferrite_e2e::testproject::{client_dir, nudge_until_reported, start_client, Server, ShellApp};
use ferrite_e2e::{ferrited_with_gui_rpc, fixture_data_dir, free_port, gui_rpc};

const PROJECT: &str = "projects/127.0.0.1_18080";
const T: Duration = Duration::from_secs(60);

/// The `02_tasks_running` fixture (two tasks of a non-API shell app that sleeps N seconds,
/// N read from its input, resumed in slots 0 and 1) with both apps sleeping `secs`.
fn fixture(secs: u32) -> tempfile::TempDir {
    let d = fixture_data_dir("02_tasks_running");
    make_writable(d.path());
    for (wu, slot) in [("long", 0), ("abort", 1)] {
        let name = format!("wu_{wu}_in");
        fs::write(d.path().join(PROJECT).join(&name), format!("{secs}\n")).expect("in");
        refit_file(d.path(), PROJECT, &name);
        fs::write(
            d.path().join(format!("slots/{slot}/in")),
            format!("{secs}\n"),
        )
        .expect("slot in");
    }
    d
}

/// Replaces `from` with `to` in the fixture's state file (`count` times exactly).
fn edit_state(dir: &Path, from: &str, to: &str, count: usize) {
    let path = dir.join("client_state.xml");
    let text = fs::read_to_string(&path).expect("state");
    assert_eq!(text.matches(from).count(), count, "{from} in the fixture");
    fs::write(&path, text.replace(from, to)).expect("state");
}

/// The arguments (after the script) of the fixture app's shell in a slot.
fn app_args(dir: &Path) -> Option<Vec<String>> {
    slot_processes(dir).into_iter().find_map(|(pid, _, _)| {
        let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let argv: Vec<String> = raw
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let at = argv
            .iter()
            .position(|a| a.ends_with("fixture_app_2.00.sh"))?;
        // `/proc/PID/cmdline` ends with a NUL: drop the empty piece after it.
        let mut args = argv[at + 1..].to_vec();
        if args.last().is_some_and(String::is_empty) {
            args.pop();
        }
        Some(args)
    })
}

#[test]
fn the_app_gets_the_job_command_line_first_with_quoted_arguments_whole() {
    let d = fixture(600);
    edit_state(
        d.path(),
        "<command_line>\n--fixture-arg 1",
        "<command_line>\n-cpu_time 12 \"two words\"   'single  quoted'",
        3,
    );
    // The version's own arguments, which `app_config.xml` replaces.
    edit_state(
        d.path(),
        "<api_version>7.20.0</api_version>",
        "<api_version>7.20.0</api_version>\n    <cmdline>--nthreads 3</cmdline>",
        1,
    );
    fs::write(
        d.path().join(PROJECT).join("app_config.xml"),
        "<app_config>\n<app_version>\n<app_name>fixture_app</app_name>\n\
         <cmdline>--nthreads 2 \"x y\"</cmdline>\n</app_version>\n</app_config>\n",
    )
    .expect("app_config");
    let p = ferrited_with_gui_rpc(d.path(), free_port());
    let mut args = None;
    wait_until("an app runs in a slot", T, || {
        args = app_args(d.path());
        args.is_some()
    });
    assert_eq!(
        args.unwrap_or_default(),
        [
            "-cpu_time",
            "12",
            "two words",
            "single  quoted",
            "--nthreads",
            "2",
            "x y"
        ],
        "{}",
        p.output()
    );
}

#[test]
fn a_running_task_that_reports_no_progress_shows_a_guess_after_a_minute() {
    let d = fixture(600);
    // wu_abort_0 resumes after 120 s of elapsed time; its estimate is 1e10 FLOPs at 1e9
    // FLOPS, 10 s: 1 - exp(-12) is shown. The app itself reports nothing.
    edit_state(
        d.path(),
        "<result_name>wu_abort_0</result_name>\n    <active_task_state>1</active_task_state>\n    \
         <app_version_num>200</app_version_num>\n    <slot>1</slot>\n    \
         <checkpoint_cpu_time>0.000000</checkpoint_cpu_time>\n    \
         <checkpoint_elapsed_time>0.000000</checkpoint_elapsed_time>",
        "<result_name>wu_abort_0</result_name>\n    <active_task_state>1</active_task_state>\n    \
         <app_version_num>200</app_version_num>\n    <slot>1</slot>\n    \
         <checkpoint_cpu_time>0.000000</checkpoint_cpu_time>\n    \
         <checkpoint_elapsed_time>120.000000</checkpoint_elapsed_time>",
        1,
    );
    let port = free_port();
    let p = ferrited_with_gui_rpc(d.path(), port);
    let mut block = String::new();
    wait_until("wu_abort_0 runs", T, || {
        let r = gui_rpc(port, Some("testpw"), "<get_results/>\n");
        block = r
            .split("<result>")
            .find(|b| b.contains("<name>wu_abort_0</name>"))
            .unwrap_or_default()
            .to_owned();
        block.contains("<active_task_state>1</active_task_state>")
    });
    let fd: f64 = block
        .split("<fraction_done>")
        .nth(1)
        .and_then(|r| r.split('<').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no fraction done: {block}"));
    let expected = 1.0 - (-12.0f64).exp();
    assert!(
        fd >= expected - 1e-5 && fd < 1.0,
        "fraction done {fd}, about {expected}: {block}\n{}",
        p.output()
    );
}

#[test]
fn a_failed_task_reports_the_official_message_for_its_exit_code_and_signal() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start_apps(
        tmp.path(),
        &[
            ShellApp {
                name: "alpha",
                word: "hello",
                prelude: "echo about to fail >&2\nexit 3\n",
            },
            ShellApp {
                name: "beta",
                word: "goodbye",
                prelude: "echo about to crash >&2\nkill -SEGV $$\n",
            },
        ],
        &["--jobs", "2"],
    );
    let dir = client_dir(tmp.path(), "");
    let port = free_port();
    let client = start_client(&dir, port, Some(&server.url));
    let s = nudge_until_reported(
        &server,
        &client,
        port,
        (2, Duration::from_secs(120)),
        "both failed tasks reported",
        true,
    );
    let results = s["results"].as_array().expect("results");
    let stderr_of = |exit: i64| {
        results
            .iter()
            .find(|r| r["exit_status"].as_i64() == Some(exit))
            .and_then(|r| r["stderr_out"].as_str())
            .unwrap_or_else(|| panic!("no report with exit status {exit}: {s}"))
            .to_owned()
    };
    // As BOINC's report_result_error writes it: the reason, then the app's stderr.
    let exited = stderr_of(3);
    assert!(
        exited.starts_with(
            "<message>\nprocess exited with code 3 (0x3, -253)</message>\n\
             <stderr_txt>\nabout to fail\n"
        ),
        "{exited}"
    );
    let crashed = stderr_of(11);
    assert!(
        crashed.starts_with(
            "<message>\nprocess got signal 11</message>\n<stderr_txt>\nabout to crash\n"
        ),
        "{crashed}"
    );
}
