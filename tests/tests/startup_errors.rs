//! `ferrited` meeting what it cannot use at start-up: a GUI RPC port in use, a Unix socket
//! path that cannot be made, a data directory it cannot write. Each is said at once with its
//! cause, and what can still work does.

use std::fs;
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::Duration;

use ferrite_e2e::{bin, free_port, gui_rpc, run_bounded, Proc};

const T: Duration = Duration::from_secs(30);

#[test]
fn a_port_in_use_is_said_at_once_and_the_unix_socket_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = held.local_addr().expect("addr").port().to_string();
    let d = dir.path().to_str().expect("utf-8");
    let mut p = Proc::ferrited(&[
        "--dir",
        d,
        "--gui_rpc_port",
        &port,
        "--skip_cpu_benchmarks",
        "--no_gpus",
    ]);
    p.wait_for("GUI RPC listening on a Unix socket", T);
    let out = p.output();
    let said = format!("cannot listen on 127.0.0.1:{port}: Address already in use (os error 98)");
    assert!(out.contains(&said), "{out}");
    // Said before anything else was served, not after a retry period.
    assert!(
        out.find(&said) < out.find("GUI RPC listening on a Unix socket"),
        "{out}"
    );
    // The Unix socket answers while the port is still held.
    let sock = dir.path().join("boinc_socket");
    assert!(UnixStream::connect(&sock).is_ok());
    // And TCP comes up once the port is free.
    drop(held);
    p.wait_for("GUI RPC listening on TCP", T);
    let pw = fs::read_to_string(dir.path().join("gui_rpc_auth.cfg")).expect("password");
    let port: u16 = port.parse().expect("port");
    assert!(gui_rpc(port, Some(pw.trim()), "<get_cc_status/>\n").contains("<cc_status>"));
}

#[test]
fn a_socket_path_that_cannot_be_made_leaves_tcp_serving() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = base.path().join("d".repeat(110));
    fs::create_dir(&dir).expect("deep dir");
    let port = free_port();
    let mut p = ferrite_e2e::ferrited_with_gui_rpc(&dir, port);
    let out = p.output();
    assert!(out.contains("cannot listen on Unix socket"), "{out}");
    assert!(out.contains("serving on TCP only"), "{out}");
    let pw = fs::read_to_string(dir.join("gui_rpc_auth.cfg")).expect("password");
    assert!(gui_rpc(port, Some(pw.trim()), "<get_cc_status/>\n").contains("<cc_status>"));
    p.signal(libc::SIGTERM);
    assert!(p.wait(T).success(), "{}", p.output());
}

#[test]
fn a_data_dir_that_cannot_be_written_is_said_at_once_with_its_cause() {
    let base = tempfile::tempdir().expect("tempdir");
    // A file where a directory should be: nothing can be made under it, even by root.
    let file = base.path().join("not_a_dir");
    fs::write(&file, "x").expect("file");
    let mut cmd = Command::new(bin("ferrited"));
    cmd.arg("--dir").arg(file.join("data")).args([
        "--gui_rpc_port",
        &free_port().to_string(),
        "--no_gpus",
    ]);
    let (out, _) = run_bounded(cmd, T);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot create data directory"), "{err}");
    assert!(err.contains("Not a directory (os error 20)"), "{err}");

    // A read-only data directory: daemon.rs `unwritable_data_directory_is_a_clear_error`.
}
