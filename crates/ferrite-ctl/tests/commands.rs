//! The `ferrite` commands over GUI RPC ops added after the first release — `transfers`,
//! `attach`, `detach`, `prefs get|set|limits`, `benchmark`, `messages --follow` — run end to end
//! against `ferrited` on a copy of the `02_tasks_running` data directory.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use ferrite_e2e::{ferrite_bounded, ferrited_with_gui_rpc, fixture_data_dir, free_port, CmdOutput};

const URL: &str = "http://127.0.0.1:18080/";
const T: Duration = Duration::from_secs(30);

/// A running daemon and the arguments that reach it with its password.
struct Client {
    _dir: tempfile::TempDir,
    data: String,
    host: String,
    cwd: tempfile::TempDir,
    daemon: ferrite_e2e::Proc,
}

impl Client {
    fn start() -> Client {
        let dir = fixture_data_dir("02_tasks_running");
        let port = free_port();
        let daemon = ferrited_with_gui_rpc(dir.path(), port);
        Client {
            data: dir.path().to_str().expect("utf-8").to_owned(),
            _dir: dir,
            host: format!("127.0.0.1:{port}"),
            cwd: tempfile::tempdir().expect("tempdir"),
            daemon,
        }
    }

    fn args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = vec!["--host", self.host.as_str(), "--dir", self.data.as_str()];
        all.extend_from_slice(args);
        all
    }

    fn run(&self, args: &[&str]) -> CmdOutput {
        ferrite_bounded(self.cwd.path(), &self.args(args), T)
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.code, 0,
            "ferrite {args:?}\nstdout:\n{}\nstderr:\n{}",
            out.stdout, out.stderr
        );
        out.stdout
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.ok(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    fn stop(mut self) {
        self.daemon.signal(libc::SIGTERM);
        let status = self.daemon.wait(T);
        assert!(status.success(), "{}", self.daemon.output());
    }
}

#[test]
fn transfers_lists_none_when_nothing_is_pending() {
    let c = Client::start();
    assert_eq!(c.json(&["transfers"]), serde_json::json!([]));
    let table = c.ok(&["transfers"]);
    assert_eq!(
        table.lines().collect::<Vec<_>>(),
        ["FILE  PROJECT  STATE  BYTES  DONE  SPEED  RETRIES"]
    );
    c.stop();
}

#[test]
fn attach_prints_the_clients_refusal_and_detach_removes_the_project() {
    let c = Client::start();
    let out = c.run(&["attach", URL, "0123456789abcdef"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stderr.contains("Already attached to project"),
        "{}",
        out.stderr
    );
    let out = c.run(&["attach", "http://127.0.0.1:1/other/", "0123456789abcdef"]);
    // Nothing listens there, but as with the official client the attach poll answers the
    // attach request itself (0): the master page fetch follows in the background, and the
    // project stays attached to be tried again later.
    assert_eq!(out.code, 0, "{}", out.stderr);
    let projects = c.run(&["projects"]);
    assert!(
        projects.stdout.contains("127.0.0.1:1/other"),
        "{}",
        projects.stdout
    );
    let out = c.run(&["attach", "http://127.0.0.1:1/other/", ""]);
    assert!(
        out.stderr.contains("Missing authenticator"),
        "{}",
        out.stderr
    );

    assert_eq!(c.json(&["projects"]).as_array().map(Vec::len), Some(2));
    assert_eq!(c.json(&["detach", URL]), serde_json::json!({ "ok": true }));
    let other = "http://127.0.0.1:1/other/";
    assert_eq!(
        c.json(&["detach", other]),
        serde_json::json!({ "ok": true })
    );
    assert_eq!(c.json(&["projects"]), serde_json::json!([]));
    assert_eq!(c.json(&["tasks"]), serde_json::json!([]));
    // Without the password a detach is refused.
    let no_pw = ferrite_bounded(c.cwd.path(), &["--host", &c.host, "detach", URL], T);
    assert_eq!(no_pw.code, 4, "{}", no_pw.stderr);
    c.stop();
}

#[test]
fn prefs_get_and_set_round_trip_through_the_override_file() {
    let c = Client::start();
    // The fixture's override file, as the client has it.
    let over = c.json(&["prefs", "get", "--override"]);
    assert_eq!(over["max_ncpus_pct"], "100.000000");
    assert_eq!(over["work_buf_min_days"], "0.010000");
    let text = c.ok(&["prefs", "get", "--override"]);
    assert!(text.starts_with("<global_preferences>"), "{text}");
    // The preferences in force include the override.
    let working = c.json(&["prefs", "get"]);
    let pct: f64 = working["max_ncpus_pct"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("max_ncpus_pct");
    assert_eq!(pct, 100.0);

    let file = c.cwd.path().join("prefs.xml");
    std::fs::write(
        &file,
        "<global_preferences>\n   <max_ncpus_pct>50.000000</max_ncpus_pct>\n   \
         <cpu_usage_limit>75.000000</cpu_usage_limit>\n</global_preferences>\n",
    )
    .expect("write prefs");
    let path = file.to_str().expect("utf-8");
    assert_eq!(
        c.json(&["prefs", "set", path]),
        serde_json::json!({ "ok": true })
    );
    let over = c.json(&["prefs", "get", "--override"]);
    assert_eq!(over["max_ncpus_pct"], "50.000000");
    assert_eq!(over["cpu_usage_limit"], "75.000000");
    let on_disk = std::fs::read_to_string(Path::new(&c.data).join("global_prefs_override.xml"))
        .expect("override file");
    assert!(
        on_disk.contains("<cpu_usage_limit>75.000000</cpu_usage_limit>"),
        "{on_disk}"
    );
    let working = c.json(&["prefs", "get"]);
    let num = |k: &str| -> f64 {
        working[k]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{k} in {working}"))
    };
    assert_eq!(num("max_ncpus_pct"), 50.0);
    assert_eq!(num("cpu_usage_limit"), 75.0);

    // Not a preferences document: refused before anything is sent.
    std::fs::write(&file, "<cc_config/>\n").expect("write");
    let out = c.run(&["prefs", "set", path]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no <global_preferences>"),
        "{}",
        out.stderr
    );
    assert_eq!(
        c.json(&["prefs", "get", "--override"])["cpu_usage_limit"],
        "75.000000"
    );
    c.stop();
}

#[test]
fn prefs_limits_sets_the_temperature_limits_and_keeps_the_override() {
    let c = Client::start();
    assert_eq!(
        c.json(&[
            "prefs",
            "limits",
            "--cpu-temp-limit",
            "80",
            "--gpu-temp-limit",
            "85"
        ]),
        serde_json::json!({ "ok": true })
    );
    let over = c.json(&["prefs", "get", "--override"]);
    assert_eq!(over["ferrite_cpu_temp_limit"], "80.000000");
    assert_eq!(over["ferrite_gpu_temp_limit"], "85.000000");
    // The fixture's own override values are still there.
    assert_eq!(over["max_ncpus_pct"], "100.000000");
    assert_eq!(over["work_buf_min_days"], "0.010000");
    // The client applied it.
    let working = c.json(&["prefs", "get"]);
    assert_eq!(working["ferrite_cpu_temp_limit"], "80.000000", "{working}");
    assert_eq!(working["ferrite_gpu_temp_limit"], "85.000000", "{working}");

    // One limit changed, the other kept; 0 turns a limit off.
    c.ok(&["prefs", "limits", "--cpu-temp-limit", "0"]);
    let over = c.json(&["prefs", "get", "--override"]);
    assert_eq!(over["ferrite_cpu_temp_limit"], "0.000000");
    assert_eq!(over["ferrite_gpu_temp_limit"], "85.000000");

    // Out of range or nothing to set: a usage error, nothing sent.
    assert_eq!(
        c.run(&["prefs", "limits", "--gpu-temp-limit", "400"]).code,
        2
    );
    assert_eq!(c.run(&["prefs", "limits"]).code, 2);
    assert_eq!(
        c.json(&["prefs", "get", "--override"])["ferrite_gpu_temp_limit"],
        "85.000000"
    );
    c.stop();
}

#[test]
fn benchmark_runs_and_messages_follow_shows_new_lines() {
    let c = Client::start();
    let before = c.json(&["messages"]);
    let last = before
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["seqno"].as_i64())
        .expect("some messages");

    // Follow from the last line, for a bounded time, while the benchmarks start.
    let since = last.to_string();
    let follow = Command::new(ferrite_e2e::bin("ferrite"))
        .current_dir(c.cwd.path())
        .args(c.args(&[
            "--json",
            "messages",
            "--since",
            &since,
            "--follow",
            "--max-seconds",
            "4",
            "--interval",
            "0.2",
        ]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ferrite");
    // No pause needed: --since shows every line after `last`, whenever it connects.
    assert_eq!(c.json(&["benchmark"]), serde_json::json!({ "ok": true }));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(follow.wait_with_output());
    });
    let out = rx
        .recv_timeout(T)
        .expect("messages --follow did not stop after --max-seconds")
        .expect("output");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        lines.iter().all(|m| m["seqno"].as_i64() > Some(last)),
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|m| m["body"].as_str().is_some_and(|b| b.contains("benchmark"))),
        "no benchmark line followed:\n{stdout}"
    );
    let seqnos: Vec<i64> = lines.iter().filter_map(|m| m["seqno"].as_i64()).collect();
    assert!(seqnos.windows(2).all(|w| w[0] < w[1]), "{seqnos:?}");
    c.stop();
}
