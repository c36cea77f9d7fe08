//! `ferrite demo`: the README's first command runs Ferrite's whole job on loopback and leaves
//! nothing running.

use std::process::Command;
use std::time::Duration;

use ferrite_e2e::{bin, run_bounded};

fn running(name: &str, dir: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd);
        cmd.contains(name) && cmd.contains(dir)
    })
}

#[test]
fn demo_downloads_runs_uploads_and_reports_then_stops_everything() {
    // The demo finds its two companions next to itself.
    bin("ferrited");
    bin("ferrite-testproject");
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("demo");
    let d = data.to_str().expect("utf-8");
    for round in 0..2 {
        let mut cmd = Command::new(bin("ferrite"));
        cmd.args(["demo", "--jobs", "4", "--timeout", "80", "--data", d]);
        let (out, took) = run_bounded(cmd, Duration::from_secs(120));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "round {round}: {stdout}\n{stderr}\n--- ferrited log ---\n{}",
            std::fs::read_to_string(data.join("ferrited.log")).unwrap_or_default()
        );
        assert!(stdout.contains("Done: 4 tasks reported"), "{stdout}");
        assert!(stdout.contains("uploads received 4"), "{stdout}");
        // Progress went through the states (plain lines without a terminal).
        assert!(stdout.contains("reported 4/4"), "{stdout}");
        println!("round {round}: the demo took {took:?}");
        assert!(!running("ferrited", d), "ferrited left running");
        assert!(
            !running("ferrite-testproject", d),
            "the project server left running"
        );
    }
    // A directory the demo did not make is never wiped.
    let precious = tmp.path().join("precious");
    std::fs::create_dir_all(&precious).expect("mkdir");
    std::fs::write(precious.join("keep"), "x").expect("write");
    let mut cmd = Command::new(bin("ferrite"));
    cmd.args(["demo", "--data", precious.to_str().expect("utf-8")]);
    let (out, _) = run_bounded(cmd, Duration::from_secs(30));
    assert!(!out.status.success());
    assert!(precious.join("keep").exists());
}
