//! `app_config.xml`'s `max_concurrent` end to end with two loopback test projects on four
//! CPUs: project X's only app may run one task at a time, so its work requests ask only for
//! what that one instance can run in the buffer (its queue stays bounded however often it is
//! contacted), and once project Y is attached its tasks run on the other three CPUs.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use ferrite_e2e::testproject::{self, app_script, client_dir, status, Server};
use ferrite_e2e::{bin, free_port, gui_rpc, try_gui_rpc, Proc};
use ferrite_proto::account::escape_project_url;

/// Estimated run time of every task at the client's 1e9 FLOPS (no benchmarks): 300 s.
const FPOPS_EST: &str = "3e11";

/// A test project in `dir/<name>` with one app `<name>app` whose tasks sleep far longer than
/// the test lasts, 40 jobs of [`FPOPS_EST`].
fn project(dir: &Path, name: &str) -> Server {
    let app = app_script(dir, &format!("{name}app"), name, "sleep 600\n");
    let input = dir.join("input.txt");
    if !input.exists() {
        fs::write(&input, "world\n").expect("input");
    }
    let data = dir.join(name);
    let mut cmd = Command::new(bin("ferrite-testproject"));
    cmd.arg("--data")
        .arg(&data)
        .arg("--input")
        .arg(&input)
        .args(["--fpops-est", FPOPS_EST, "--jobs", "40", "--port", "0"])
        .args(["--app", &format!("{name}app={}", app.display())]);
    Server::spawn(cmd, &data)
}

/// Tasks executing now, per project URL, as `get_results` shows them.
fn running(port: u16, url: &str) -> usize {
    gui_rpc(port, Some("pw"), "<get_results/>\n")
        .split("<result>")
        .filter(|r| r.contains(&format!("<project_url>{url}</project_url>")))
        .filter(|r| r.contains("<active_task_state>1</active_task_state>"))
        .count()
}

fn sent(server: &Server) -> i64 {
    status(&server.url)["results_sent"].as_i64().unwrap_or(-1)
}

/// Polls `done` every two seconds for at most two minutes.
fn wait_for(what: &str, client: &Proc, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "{what}: not within 2 min\n{}",
            client.output()
        );
        thread::sleep(Duration::from_secs(2));
    }
}

fn update(port: u16, url: &str) {
    let _ = try_gui_rpc(
        port,
        Some("pw"),
        &format!("<project_update>\n<project_url>{url}</project_url>\n</project_update>\n"),
    );
}

#[test]
fn a_max_concurrent_app_asks_for_one_instance_and_another_project_uses_the_other_cpus() {
    let tmp = tempfile::tempdir().expect("tmp");
    let x = project(tmp.path(), "x");
    let y = project(tmp.path(), "y");
    // Four CPUs, a buffer of 0.01 + 0.01 days (1728 s, about six of X's tasks for one CPU).
    let dir = client_dir(tmp.path(), "");
    let xdir = dir.join("projects").join(escape_project_url(&x.url));
    fs::create_dir_all(&xdir).expect("project dir");
    fs::write(
        xdir.join("app_config.xml"),
        "<app_config>\n<app>\n<name>xapp</name>\n<max_concurrent>1</max_concurrent>\n\
         </app>\n</app_config>\n",
    )
    .expect("app_config");
    let port = free_port();
    let mut cmd = Proc::ferrited_command(&dir, port, None);
    cmd.args(["--attach_project", &x.url, testproject::KEY]);
    let mut client = Proc::spawn(cmd);
    client.wait_for("entering main loop", Duration::from_secs(60));

    // X alone: one of its tasks runs, three CPUs idle. Contacted again and again, it is asked
    // only for what that one CPU runs in the buffer (its first task, then about 1728 s of
    // 300 s tasks), not for what four CPUs would (some 23 tasks).
    wait_for("one task of X runs", &client, || running(port, &x.url) == 1);
    let rpcs = || status(&x.url)["scheduler_rpcs"].as_i64().unwrap_or(0);
    let before = rpcs();
    wait_for("X contacted three more times", &client, || {
        update(port, &x.url);
        rpcs() >= before + 3
    });
    let sx = sent(&x);
    assert!(
        (2..=8).contains(&sx),
        "X sent {sx} tasks\n{}",
        client.output()
    );
    assert_eq!(running(port, &x.url), 1);

    // Y attached: its tasks take the three other CPUs; X's one keeps running.
    let r = gui_rpc(
        port,
        Some("pw"),
        &format!(
            "<project_attach>\n<project_url>{}</project_url>\n<authenticator>{}</authenticator>\n\
             <project_name></project_name>\n</project_attach>\n",
            y.url,
            testproject::KEY
        ),
    );
    assert!(r.contains("<success/>"), "{r}");
    wait_for("three tasks of Y run beside X's", &client, || {
        update(port, &y.url);
        let rx = running(port, &x.url);
        assert!(rx <= 1, "{rx} tasks of X run at once\n{}", client.output());
        rx == 1 && running(port, &y.url) == 3
    });
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
}
