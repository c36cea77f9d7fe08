//! ferrited under systemd's `Type=notify` protocol: READY once the main loop runs, STATUS
//! lines, WATCHDOG pings while it runs (at half the watchdog interval: the interval itself is
//! checked by `sdnotify`'s unit tests, not timed here), STOPPING on SIGTERM.

use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::time::{Duration, Instant};

use ferrite_e2e::{bin, fixture_data_dir, Proc};

#[test]
fn notifies_systemd_ready_status_watchdog_and_stopping() {
    let sock_dir = tempfile::tempdir().expect("tmp");
    let sock_path = sock_dir.path().join("notify");
    let sock = UnixDatagram::bind(&sock_path).expect("bind notify socket");
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let dir = fixture_data_dir("02_tasks_running");
    let mut cmd = Command::new(bin("ferrited"));
    cmd.args(["--dir"])
        .arg(dir.path())
        .args(["--skip_cpu_benchmarks", "--no_gpus", "--gui_rpc_port", "0"])
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "2000000")
        .env("RUST_LOG", "info");
    let mut p = Proc::spawn(cmd);

    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let mut receive_until = |want: &str, limit: Duration, seen: &mut Vec<String>| {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if let Ok(n) = sock.recv(&mut buf) {
                let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
                let hit = msg.lines().any(|l| l.starts_with(want));
                seen.push(msg);
                if hit {
                    return true;
                }
            }
        }
        false
    };
    assert!(
        receive_until("READY=1", Duration::from_secs(30), &mut seen),
        "no READY: {seen:?}\n{}",
        p.output()
    );
    assert!(
        seen.iter()
            .any(|m| m.contains("STATUS=") && m.contains("tasks")),
        "READY carries a status line: {seen:?}"
    );
    // Pings keep coming while it runs (30 s is each wait's deadline against a hang, far
    // beyond the 1 s pings of a 2 s watchdog).
    for _ in 0..2 {
        assert!(
            receive_until("WATCHDOG=1", Duration::from_secs(30), &mut seen),
            "no WATCHDOG ping: {seen:?}"
        );
    }
    p.signal(libc::SIGTERM);
    assert!(
        receive_until("STOPPING=1", Duration::from_secs(30), &mut seen),
        "no STOPPING: {seen:?}"
    );
    assert!(p.wait(Duration::from_secs(30)).success(), "{}", p.output());
}

/// A start-up that takes seconds (100,000 tasks to load and check) asks systemd for more
/// time (`EXTEND_TIMEOUT_USEC`) and feeds the watchdog as its phases end, before READY; then
/// a stop is heard as usual.
#[test]
fn a_long_start_up_extends_the_start_timeout_and_feeds_the_watchdog() {
    let sock_dir = tempfile::tempdir().expect("tmp");
    let sock_path = sock_dir.path().join("notify");
    let sock = UnixDatagram::bind(&sock_path).expect("bind notify socket");
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let dir = tempfile::tempdir().expect("tmp");
    let state = ferrite_proto::client_state::synthetic(1, 100_000);
    std::fs::write(dir.path().join("client_state.xml"), state.to_xml()).expect("state file");
    let mut cmd = Command::new(bin("ferrited"));
    cmd.args(["--dir"])
        .arg(dir.path())
        .args(["--skip_cpu_benchmarks", "--no_gpus", "--gui_rpc_port", "0"])
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "1000000")
        .env("RUST_LOG", "info");
    let mut p = Proc::spawn(cmd);
    let mut before_ready = Vec::new();
    let mut buf = [0u8; 4096];
    let t0 = Instant::now();
    // Bounded against a hang: a debug build loads 100,000 tasks in well under this.
    while t0.elapsed() < Duration::from_secs(300) {
        if let Ok(n) = sock.recv(&mut buf) {
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            let ready = msg.lines().any(|l| l == "READY=1");
            before_ready.push(msg);
            if ready {
                break;
            }
        }
        assert!(!p.has_exited(), "exited: {}", p.output());
    }
    let ready_at = before_ready.len() - 1;
    assert!(
        before_ready[ready_at].contains("READY=1"),
        "no READY: {before_ready:?}"
    );
    let start_up = &before_ready[..ready_at];
    assert!(
        start_up
            .iter()
            .any(|m| m.starts_with("EXTEND_TIMEOUT_USEC=60000000\nSTATUS=starting: ")),
        "no extension of the start timeout ({:?} to READY): {start_up:?}",
        t0.elapsed()
    );
    assert!(
        start_up.iter().any(|m| m == "WATCHDOG=1"),
        "no watchdog fed during the start-up: {start_up:?}"
    );
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(60)).success(), "{}", p.output());
}
