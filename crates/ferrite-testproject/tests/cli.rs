//! The command line as a contract: the URL line, `--help`, refusal of bad options.

mod common;

use std::process::Command;

use common::{get_json, start_binary, Killer};
use ferrite_testproject::fault::Fault;

#[test]
fn port_zero_prints_the_url_and_serves_status() {
    let dir = tempfile::tempdir().expect("tmp");
    let app = dir.path().join("a.sh");
    std::fs::write(&app, "#!/bin/sh\n").expect("app");
    let data = dir.path().join("data");
    let (child, url) = start_binary(&[
        "--data",
        data.to_str().expect("utf8"),
        "--app",
        &format!("x={},mt,2", app.display()),
        "--jobs",
        "5",
    ]);
    let _k = Killer(child);
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with('/'),
        "{url}"
    );
    let s = get_json(&url, "status");
    for k in [
        "jobs_made",
        "results_sent",
        "uploads_received",
        "results_reported",
        "duplicate_reports",
    ] {
        assert!(s[k].is_u64(), "{k} in {s}");
    }
    assert_eq!(s["jobs_made"], 5);
    assert!(
        data.join("state.json").is_file(),
        "state mirrored to --data"
    );
    assert!(data.join("code_sign_public").is_file());
}

#[test]
fn help_documents_every_fault_and_bad_options_are_refused() {
    let bin = env!("CARGO_BIN_EXE_ferrite-testproject");
    let out = Command::new(bin).arg("--help").output().expect("run");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for f in Fault::ALL {
        assert!(help.contains(f.name()), "{f} in --help");
    }
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().to_str().expect("utf8");
    for bad in [
        vec!["--app", "noequals"],
        vec!["--fault", "nope"],
        vec!["--app", "x=/nonexistent/file"],
    ] {
        let out = Command::new(bin)
            .args(["--port", "0", "--data", data])
            .args(&bad)
            .output()
            .expect("run");
        assert!(!out.status.success(), "{bad:?} refused");
    }
}
