//! The `ferrite-sim` binary as a shell user meets it.

use std::io::Read as _;
use std::process::{Command, Stdio};

#[test]
fn a_closed_output_pipe_ends_quietly() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sample_legacy");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrite-sim"))
        .args(["--json", "--duration", "3600", fixture])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ferrite-sim");
    // The reader goes away before the figures are written (`ferrite-sim ... | head -0`).
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    let status = child.wait().expect("wait");
    assert!(status.success(), "exit status {status}; stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}
