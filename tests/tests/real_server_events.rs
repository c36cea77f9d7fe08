//! What a real BOINC project server (BOINC server 8.3, the kit that `BOINC_SERVER_KIT` names;
//! see `ferrite_e2e::boinc_server`) does to a client beyond handing out jobs, and how Ferrite
//! answers: a job cancelled on the server, a new app version, an output over its size limit,
//! a project that goes down and comes back, the scheduler's messages and request delays,
//! results the client lost, a client version the project refuses, detach and re-attach, and
//! a project reset. The server is the judge: the tests read its database and logs.

use std::path::Path;
use std::time::{Duration, Instant};

use ferrite_e2e::boinc_server::{BoincServer, ServerOptions};
use ferrite_e2e::{boinccmd, free_port, Proc};

/// How long a handful of short jobs may take on a loaded 2-core machine, benchmarks and
/// downloads included.
const JOBS_LIMIT: Duration = Duration::from_secs(150);

/// Preferences that let tasks run on a busy, shared machine (the stock default suspends
/// computing while other programs use the CPU).
const PREFS: &str = "<global_preferences>\n<suspend_cpu_usage>0</suspend_cpu_usage>\n\
                     <run_if_user_active>1</run_if_user_active>\n</global_preferences>\n";

/// A volunteer's client on a data directory of its own, with GUI RPC on a free port.
struct Client {
    proc: Proc,
    dir: tempfile::TempDir,
    port: u16,
}

impl Client {
    /// `ferrited` on a fresh data directory, attached from the command line as a new
    /// volunteer would.
    fn attached(server: &BoincServer) -> Client {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        std::fs::write(dir.path().join("gui_rpc_auth.cfg"), "pw\n").expect("password");
        std::fs::write(dir.path().join("global_prefs_override.xml"), PREFS).expect("prefs");
        let proc = start(
            dir.path(),
            port,
            &["--attach_project", server.url(), server.account_key()],
        );
        Client { proc, dir, port }
    }

    /// Runs `boinccmd` against the client.
    fn cmd(&self, args: &[&str]) -> String {
        let out = boinccmd(self.port, Some("pw"), args);
        assert_eq!(out.code, 0, "boinccmd {args:?}: {}", out.stderr);
        out.stdout
    }

    /// "Update" on the project.
    fn update(&self, server: &BoincServer) {
        let _ = boinccmd(
            self.port,
            Some("pw"),
            &["--project", server.url(), "update"],
        );
    }

    /// Seconds until the project may next be asked (its `min_rpc_time` in GUI RPC, less now).
    fn next_rpc_in(&self) -> f64 {
        let status = ferrite_e2e::gui_rpc(self.port, Some("pw"), "<get_project_status/>\n");
        let next: f64 = status
            .split_once("<min_rpc_time>")
            .and_then(|(_, rest)| rest.split_once('<'))
            .and_then(|(n, _)| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("a number in min_rpc_time: {status}"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs_f64();
        next - now
    }

    /// The messages a GUI shows.
    fn messages(&self) -> String {
        boinccmd(self.port, Some("pw"), &["--get_messages", "0"]).stdout
    }

    /// Stops the daemon (SIGTERM) and waits for it.
    fn stop(&mut self) {
        self.proc.signal(libc::SIGTERM);
        let status = self.proc.wait(Duration::from_secs(60));
        assert!(
            status.success(),
            "ferrited exited with {status}:\n{}",
            self.proc.output()
        );
    }

    /// Starts the daemon again on the same data directory.
    fn restart(&mut self) {
        self.proc = start(self.dir.path(), self.port, &[]);
    }

    fn output(&self) -> String {
        self.proc.output()
    }
}

fn start(dir: &Path, port: u16, extra: &[&str]) -> Proc {
    let d = dir.to_str().expect("utf-8");
    let port = port.to_string();
    let mut args = vec!["--dir", d, "--gui_rpc_port", &port];
    args.extend_from_slice(extra);
    let mut p = Proc::ferrited(&args);
    p.wait_for("entering main loop", Duration::from_secs(60));
    p
}

/// Waits until `cond` holds, polling every half second; panics with `context` after `limit`.
fn wait(what: &str, limit: Duration, mut cond: impl FnMut() -> bool, context: impl Fn() -> String) {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!(
        "timed out after {limit:?} waiting for {what}\n{}",
        context()
    );
}

/// Waits until `n` results are valid, pressing "Update" after 30 s without progress.
fn run_until_valid(server: &BoincServer, client: &Client, n: u32) {
    server.wait_valid(
        n,
        (JOBS_LIMIT, Duration::from_secs(30)),
        |s| client.update(s),
        || format!("--- ferrited ---\n{}", client.output()),
    );
}

/// One number from the database.
fn count(server: &BoincServer, sql: &str) -> u32 {
    server
        .query(sql)
        .first()
        .and_then(|r| r.first())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// How many times the access log shows a download of `file`.
fn downloads_of(server: &BoincServer, file: &str) -> usize {
    server
        .access_log()
        .lines()
        .filter(|l| l.contains("GET ") && l.contains(&format!("/{file} ")))
        .count()
}

/// How many scheduler requests reached Apache.
fn scheduler_posts(server: &BoincServer) -> usize {
    server
        .access_log()
        .lines()
        .filter(|l| l.contains("POST /test_cgi/cgi "))
        .count()
}

/// The server's messages in a reply reach the volunteer, and the client keeps the
/// `<request_delay>` the server asks for (`min_sendwork_interval`): no request comes sooner.
#[test]
fn scheduler_messages_reach_the_user_and_request_delay_is_kept() {
    if !ferrite_e2e::peer_or_skip(
        "scheduler_messages_reach_the_user_and_request_delay_is_kept",
        &["boinccmd"],
    ) {
        return;
    }
    let opts = ServerOptions {
        jobs: 2,
        cpu_time: 1,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("scheduler_messages_and_request_delay", &opts) else {
        return;
    };
    // Each reply asks for max(1.01 × 40, 40 + 1) = 41 s between requests. The jobs take a
    // few seconds: a client that did not wait would report them (and ask for more) sooner.
    server.set_config("min_sendwork_interval", "40");
    let client = Client::attached(&server);
    wait(
        "a second scheduler request and the no-work message",
        JOBS_LIMIT,
        || {
            server.request_times().len() >= 2
                && client.messages().contains("Project has no tasks available")
        },
        || {
            format!(
                "{}\n--- ferrited ---\n{}",
                server.scheduler_log(),
                client.output()
            )
        },
    );
    let times = server.request_times();
    for w in times.windows(2) {
        assert!(
            w[1] - w[0] >= 41.0 - 0.05,
            "a request came {:.2} s after the previous one, sooner than the 41 s asked:\n{}",
            w[1] - w[0],
            server.scheduler_log()
        );
    }
    assert!(
        !server.scheduler_log().contains("last request too recent"),
        "{}",
        server.scheduler_log()
    );
    // The message is the project's, shown under its name, and so is the delay.
    let msgs = client.messages();
    assert!(
        msgs.contains("[Test@Kit] Project requested delay of 41 seconds"),
        "{msgs}"
    );
    assert!(
        msgs.lines()
            .any(|l| l.contains("[Test@Kit]") && l.contains("Project has no tasks available")),
        "{msgs}"
    );
}

/// A job cancelled on the server (`bin/cancel_jobs`) while it runs: the next scheduler reply
/// aborts the task, the client reports it aborted by the project, the server records it.
#[test]
fn a_job_cancelled_on_the_server_is_aborted_at_the_next_request() {
    if !ferrite_e2e::peer_or_skip(
        "a_job_cancelled_on_the_server_is_aborted_at_the_next_request",
        &["boinccmd"],
    ) {
        return;
    }
    let opts = ServerOptions {
        jobs: 1,
        cpu_time: 600,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("cancelled_job", &opts) else {
        return;
    };
    let client = Client::attached(&server);
    wait(
        "the task to run",
        JOBS_LIMIT,
        || {
            client
                .cmd(&["--get_tasks"])
                .contains("active_task_state: EXECUTING")
        },
        || client.output(),
    );
    let wu = server.query("select name from workunit");
    let wu = &wu[0][0];
    server.project_script(&format!("bin/cancel_jobs --name {wu}"));
    client.update(&server);
    // EXIT_ABORTED_BY_PROJECT is 202; the result is a client error, over.
    server.wait_until(
        "the aborted result to be reported",
        JOBS_LIMIT,
        |s| count(s, "select count(*) from result where server_state = 5 and outcome = 3 and exit_status = 202") == 1,
        || format!("{}\n--- ferrited ---\n{}", server.scheduler_log(), client.output()),
    );
    let tasks = client.cmd(&["--get_tasks"]);
    assert!(!tasks.contains("EXECUTING"), "{tasks}");
}

/// A new app version staged mid-run (`update_versions`): the client downloads it, checks its
/// signature, and the new tasks run it.
#[test]
fn a_new_app_version_is_fetched_verified_and_used() {
    if !ferrite_e2e::peer_or_skip(
        "a_new_app_version_is_fetched_verified_and_used",
        &["boinccmd"],
    ) {
        return;
    }
    let opts = ServerOptions {
        jobs: 1,
        cpu_time: 1,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("new_app_version", &opts) else {
        return;
    };
    let client = Client::attached(&server);
    run_until_valid(&server, &client, 1);
    server.add_app_version("1.01");
    let ids = server.query("select id from app_version where version_num = 101");
    assert_eq!(ids.len(), 1, "{ids:?}");
    let new_id = ids[0][0].clone();
    server.add_jobs(2);
    client.update(&server);
    run_until_valid(&server, &client, 3);
    assert_eq!(
        count(
            &server,
            &format!("select count(*) from result where app_version_id = {new_id} and validate_state = 1")
        ),
        2,
        "{:?}",
        server.query("select name, app_version_id, validate_state from result")
    );
    assert_eq!(
        downloads_of(&server, "upper_case_1.01_x86_64-pc-linux-gnu"),
        1
    );
    let out = client.output();
    assert!(!out.contains("signature"), "{out}");
}

/// An output larger than its `<max_nbytes>`: the task errors with `ERR_FILE_TOO_BIG`
/// (-131), nothing is uploaded, the server records a client error, and nothing loops.
#[test]
fn an_output_over_max_nbytes_errors_the_task_once() {
    if !ferrite_e2e::peer_or_skip(
        "an_output_over_max_nbytes_errors_the_task_once",
        &["boinccmd"],
    ) {
        return;
    }
    let opts = ServerOptions {
        jobs: 0,
        cpu_time: 1,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("output_over_max_nbytes", &opts) else {
        return;
    };
    let template = "<output_template>\n<file_info>\n<name><OUTFILE_0/></name>\n\
        <generated_locally/>\n<upload_when_present/>\n<max_nbytes>10</max_nbytes>\n\
        <url><UPLOAD_URL/></url>\n</file_info>\n<result>\n<file_ref>\n\
        <file_name><OUTFILE_0/></file_name>\n<open_name>out</open_name>\n</file_ref>\n\
        </result>\n</output_template>\n";
    server.add_job_with_result_template("tiny_out", template);
    let client = Client::attached(&server);
    let mut pressed = Instant::now();
    server.wait_until(
        "the result to be reported as a client error",
        JOBS_LIMIT,
        |s| {
            if pressed.elapsed() > Duration::from_secs(30) {
                client.update(s);
                pressed = Instant::now();
            }
            count(
                s,
                "select count(*) from result where server_state = 5 and outcome = 3",
            ) == 1
        },
        || {
            format!(
                "{}\n--- ferrited ---\n{}",
                server.scheduler_log(),
                client.output()
            )
        },
    );
    let r = server.query("select exit_status, xml_doc_out from result");
    assert_eq!(r[0][0], "-131", "{r:?}");
    // Nothing was sent to the upload handler, and one report was enough.
    let fuh = server.log("file_upload_handler.log");
    assert!(!fuh.contains("tiny_out"), "{fuh}");
    let out = client.output();
    assert_eq!(out.matches("is unusable").count(), 1, "{out}");
}

/// The project goes down (`bin/stop`: the scheduler answers "down for maintenance" with a
/// long delay): the client shows the message and waits; after `bin/start` an update runs
/// the jobs.
#[test]
fn a_project_down_for_maintenance_is_waited_for_then_used() {
    if !ferrite_e2e::peer_or_skip(
        "a_project_down_for_maintenance_is_waited_for_then_used",
        &["boinccmd"],
    ) {
        return;
    }
    let opts = ServerOptions {
        jobs: 2,
        cpu_time: 1,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("project_down", &opts) else {
        return;
    };
    server.stop_project();
    let client = Client::attached(&server);
    wait(
        "the maintenance message",
        JOBS_LIMIT,
        || {
            client
                .messages()
                .contains("Project is temporarily shut down for maintenance")
        },
        || {
            format!(
                "{}\n--- ferrited ---\n{}",
                server.access_log(),
                client.output()
            )
        },
    );
    let posts = scheduler_posts(&server);
    // The reply asked for an hour, and the client keeps it: its next request is most of an
    // hour away, and none has gone out since.
    let wait_s = client.next_rpc_in();
    assert!(
        wait_s > 3000.0,
        "next request in {wait_s} s:\n{}",
        client.output()
    );
    assert_eq!(
        scheduler_posts(&server),
        posts,
        "the client asked again while the project was down:\n{}",
        client.output()
    );
    server.start_project();
    client.update(&server);
    run_until_valid(&server, &client, 2);
}

/// A project that requires a newer client (`min_core_client_version`): the server's
/// "too old" notice reaches the user and the client stops asking.
#[test]
fn a_client_below_min_core_client_version_is_told_and_backs_off() {
    if !ferrite_e2e::peer_or_skip(
        "a_client_below_min_core_client_version_is_told_and_backs_off",
        &["boinccmd"],
    ) {
        return;
    }
    let opts = ServerOptions {
        jobs: 1,
        cpu_time: 1,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("min_core_client_version", &opts) else {
        return;
    };
    server.set_config("min_core_client_version", "90000");
    let client = Client::attached(&server);
    wait(
        "the server's refusal",
        JOBS_LIMIT,
        || server.scheduler_log().contains("Wrong client version"),
        || {
            format!(
                "{}\n--- ferrited ---\n{}",
                server.scheduler_log(),
                client.output()
            )
        },
    );
    wait(
        "the too-old message at the user",
        Duration::from_secs(30),
        || {
            client
                .messages()
                .contains("Your BOINC client software is too old")
        },
        || client.messages(),
    );
    // A notice, as the official client makes of a scheduler message of priority "notice".
    let notices = client.cmd(&["--get_notices", "0"]);
    assert!(
        notices.contains("Your BOINC client software is too old"),
        "{notices}"
    );
    std::thread::sleep(Duration::from_secs(20));
    let refusals = server
        .scheduler_log()
        .matches("Wrong client version")
        .count();
    assert_eq!(refusals, 1, "{}", server.scheduler_log());
    assert_eq!(
        count(
            &server,
            "select count(*) from result where server_state = 4"
        ),
        0
    );
}

/// Results the client lost (gone from its state) are sent again by a server with
/// `resend_lost_results`, and run to VALID.
#[test]
fn lost_results_are_resent_and_run_to_valid() {
    if !ferrite_e2e::peer_or_skip("lost_results_are_resent_and_run_to_valid", &["boinccmd"]) {
        return;
    }
    let opts = ServerOptions {
        jobs: 2,
        cpu_time: 1,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("resend_lost_results", &opts) else {
        return;
    };
    server.set_config("resend_lost_results", "1");
    server.set_config("debug_resend", "1");
    // Tasks cannot start until the test lets them: they are all lost before running.
    let mut client = Client::attached(&server);
    client.cmd(&["--set_run_mode", "never"]);
    wait(
        "two tasks on the client",
        JOBS_LIMIT,
        || {
            count(
                &server,
                "select count(*) from result where server_state = 4",
            ) == 2
        },
        || client.output(),
    );
    client.stop();
    let path = client.dir.path().join("client_state.xml");
    let text = std::fs::read_to_string(&path).expect("state");
    let mut state = ferrite_proto::client_state::ClientState::parse(&text, "client_state.xml")
        .expect("parse state")
        .value;
    let lost = state.projects[0].results.remove(0).name;
    std::fs::write(&path, state.to_xml()).expect("write state");
    client.restart();
    client.cmd(&["--set_run_mode", "always"]);
    client.update(&server);
    run_until_valid(&server, &client, 2);
    let log = server.scheduler_log();
    assert!(
        log.lines()
            .any(|l| l.contains("found lost [RESULT#") && l.ends_with(&format!(": {lost}"))),
        "the server did not resend {lost}:\n{log}"
    );
}

/// Detach, then attach again in the same run: the app is downloaded once per attach (not
/// taken for a changed file), and the jobs after the re-attach run to VALID.
#[test]
fn detach_and_reattach_in_one_run() {
    if !ferrite_e2e::peer_or_skip("detach_and_reattach_in_one_run", &["boinccmd"]) {
        return;
    }
    let opts = ServerOptions {
        jobs: 1,
        cpu_time: 1,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("detach_reattach", &opts) else {
        return;
    };
    let client = Client::attached(&server);
    run_until_valid(&server, &client, 1);
    client.cmd(&["--project", server.url(), "detach"]);
    wait(
        "the project to go",
        Duration::from_secs(30),
        || !client.cmd(&["--get_project_status"]).contains(server.url()),
        || client.output(),
    );
    server.add_jobs(2);
    client.cmd(&["--project_attach", server.url(), server.account_key()]);
    run_until_valid(&server, &client, 3);
    let out = client.output();
    assert!(!out.contains("changed on disk"), "{out}");
    assert_eq!(
        downloads_of(&server, "upper_case_1.00_x86_64-pc-linux-gnu"),
        2
    );
}

/// A project reset: the tasks and files go, the app comes again (once), and new jobs run to
/// VALID.
#[test]
fn project_reset_fetches_the_app_again_and_runs_new_jobs() {
    if !ferrite_e2e::peer_or_skip(
        "project_reset_fetches_the_app_again_and_runs_new_jobs",
        &["boinccmd"],
    ) {
        return;
    }
    let opts = ServerOptions {
        jobs: 1,
        cpu_time: 1,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("project_reset", &opts) else {
        return;
    };
    let client = Client::attached(&server);
    run_until_valid(&server, &client, 1);
    client.cmd(&["--project", server.url(), "reset"]);
    server.add_jobs(2);
    client.update(&server);
    run_until_valid(&server, &client, 3);
    let out = client.output();
    assert!(!out.contains("changed on disk"), "{out}");
    assert_eq!(
        downloads_of(&server, "upper_case_1.00_x86_64-pc-linux-gnu"),
        2
    );
}
