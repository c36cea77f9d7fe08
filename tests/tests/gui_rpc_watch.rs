//! `ferrite tasks --watch` and `ferrite transfers --watch`: live progress from a running
//! ferrited, bounded by `--count` (off a terminal each refresh prints plain lines).

use std::time::Duration;

use ferrite_e2e::{ferrite_bounded, ferrited_with_gui_rpc, fixture_data_dir, free_port};

#[test]
fn tasks_watch_refreshes_count_times_and_stops() {
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let _d = ferrited_with_gui_rpc(dir.path(), port);
    let host = format!("127.0.0.1:{port}");
    let out = ferrite_bounded(
        dir.path(),
        &[
            "--host",
            &host,
            "tasks",
            "--watch",
            "--count",
            "3",
            "--interval",
            "0.2",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let refreshes: Vec<&str> = out.stdout.split("--\n").filter(|s| !s.is_empty()).collect();
    assert_eq!(refreshes.len(), 3, "{}", out.stdout);
    for r in &refreshes {
        assert!(
            r.contains("wu_short_0") && r.contains("wu_long_0"),
            "every refresh lists the tasks: {r}"
        );
        for line in r.lines() {
            let pct: f64 = line
                .split('%')
                .next()
                .and_then(|p| p.trim().parse().ok())
                .unwrap_or_else(|| panic!("no percentage: {line}"));
            assert!((0.0..=100.0).contains(&pct), "{line}");
        }
    }

    let out = ferrite_bounded(
        dir.path(),
        &[
            "--host",
            &host,
            "transfers",
            "--watch",
            "--count",
            "2",
            "--interval",
            "0.2",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.matches("--\n").count(), 2, "{}", out.stdout);
}

#[test]
fn count_without_watch_is_refused() {
    let dir = fixture_data_dir("02_tasks_running");
    let out = ferrite_bounded(
        dir.path(),
        &["--host", "127.0.0.1:9", "tasks", "--count", "2"],
        Duration::from_secs(30),
    );
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(out.stderr.contains("--watch"), "{}", out.stderr);
}
