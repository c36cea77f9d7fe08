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
