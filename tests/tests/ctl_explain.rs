//! `ferrite explain`: the scheduling core's reasons for each task and each fetch verdict,
//! read from a running ferrited over GUI RPC.

use std::path::Path;
use std::time::{Duration, Instant};

use ferrite_e2e::{ferrite_bounded, ferrited_with_gui_rpc, fixture_data_dir, free_port};

#[test]
fn explain_names_every_task_with_a_decision_and_every_fetch_verdict() {
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let _d = ferrited_with_gui_rpc(dir.path(), port);
    let host = format!("127.0.0.1:{port}");
    let t0 = Instant::now();
    let json = loop {
        let v = explain_json(dir.path(), &host);
        if v["tasks"].as_array().is_some_and(|t| !t.is_empty()) {
            break v;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no decisions: {v}");
        std::thread::sleep(Duration::from_millis(300));
    };
    let tasks = json["tasks"].as_array().expect("tasks");
    // The fixture's three tasks, each with a decision and a reason.
    for name in ["wu_short_0", "wu_long_0"] {
        let t = tasks
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {json}"));
        assert!(
            ["run", "wait", "preempt", "done", "abort"]
                .contains(&t["decision"].as_str().unwrap_or_default()),
            "{t}"
        );
        assert!(!t["reason"].as_str().unwrap_or_default().is_empty(), "{t}");
    }
    assert!(
        tasks.iter().any(|t| t["decision"] == "done"),
        "the finished task is done: {json}"
    );
    let fetch = json["fetch"].as_array().expect("fetch");
    assert!(
        fetch
            .iter()
            .all(|f| f["verdict"] == "request" || f["verdict"] == "blocked"),
        "{json}"
    );
    assert!(!fetch.is_empty(), "a verdict for work fetch: {json}");

    let table = ferrite_bounded(
        dir.path(),
        &["--host", &host, "explain"],
        Duration::from_secs(30),
    );
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(table.stdout.starts_with("TASK"), "{}", table.stdout);
    assert!(
        table.stdout.contains("RESOURCE")
            && (table.stdout.contains("request") || table.stdout.contains("blocked")),
        "{}",
        table.stdout
    );
    // Projects are named as in every other table: by name.
    assert!(table.stdout.contains("Fixture Project"), "{}", table.stdout);
    assert!(
        !table.stdout.contains("http://127.0.0.1:18080/"),
        "{}",
        table.stdout
    );
    // The fixture host has no GPU (ferrited runs with --no_gpus): said, not left out.
    assert!(
        table.stdout.contains("No GPU is in use"),
        "{}",
        table.stdout
    );
    let tasks = ferrite_bounded(
        dir.path(),
        &["--host", &host, "tasks"],
        Duration::from_secs(30),
    );
    assert_eq!(tasks.code, 0, "{}", tasks.stderr);
    assert!(tasks.stdout.contains("Fixture Project"), "{}", tasks.stdout);
    assert!(
        !tasks.stdout.contains("http://127.0.0.1:18080/"),
        "{}",
        tasks.stdout
    );
}

/// `ferrite --json explain` of the daemon at `host`, which must succeed.
fn explain_json(dir: &Path, host: &str) -> serde_json::Value {
    let out = ferrite_bounded(
        dir,
        &["--host", host, "--json", "explain"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).expect("JSON")
}

/// `ferrite explain`'s text once the daemon at `host` has made its first scheduling pass
/// (polled for 20 s at the most).
fn explain_after_the_first_pass(dir: &Path, host: &str) -> String {
    let t0 = Instant::now();
    loop {
        let out = ferrite_bounded(dir, &["--host", host, "explain"], Duration::from_secs(30));
        assert_eq!(out.code, 0, "{}", out.stderr);
        if !out.stdout.contains("has not run yet") {
            return out.stdout;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{}", out.stdout);
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn explain_without_a_project_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let _d = ferrited_with_gui_rpc(dir.path(), port);
    let host = format!("127.0.0.1:{port}");
    let out = explain_after_the_first_pass(dir.path(), &host);
    assert!(out.contains("No project is attached"), "{out}");
    assert!(out.contains("ferrite attach"), "{out}");
    assert!(!out.contains("TASK"), "bare headers: {out}");
}

/// The grace a running task gets to reach its checkpoint before a suspension that can wait
/// (cc_config `ferrite_checkpoint_grace`), which the dashboard shows under its suspend
/// buttons, is in `explain` too: in words and in its JSON.
#[test]
fn explain_says_how_long_a_task_may_run_on_to_its_checkpoint() {
    let dir = fixture_data_dir("02_tasks_running");
    std::fs::write(
        dir.path().join("cc_config.xml"),
        "<cc_config>\n<options>\n<no_info_fetch>1</no_info_fetch>\n\
         <ferrite_checkpoint_grace>90</ferrite_checkpoint_grace>\n</options>\n</cc_config>\n",
    )
    .expect("cc_config");
    let port = free_port();
    let _d = ferrited_with_gui_rpc(dir.path(), port);
    let host = format!("127.0.0.1:{port}");
    let table = explain_after_the_first_pass(dir.path(), &host);
    assert!(
        table.contains(
            "Suspending at checkpoint (cc_config ferrite_checkpoint_grace): when computing or \
             GPU computing is suspended for a reason that can wait, a running task that \
             checkpoints runs on for at most 1m 30s to its next checkpoint."
        ),
        "{table}"
    );
    let v = explain_json(dir.path(), &host);
    assert_eq!(v["checkpoint_grace"], 90.0, "{v}");
}
