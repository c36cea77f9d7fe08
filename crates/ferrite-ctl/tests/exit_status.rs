//! How `ferrite` ends: quietly on a closed pipe, with a distinct exit status per kind of
//! failure, with the places it looked for a password when authentication fails; and the
//! reading commands against the official client.

use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use ferrite_e2e::{
    bin, ferrite_bounded, ferrited_with_gui_rpc, fixture_data_dir, free_port, peer_or_skip,
    run_bounded, OfficialClient,
};

const T: Duration = Duration::from_secs(60);

/// Runs `ferrite args` with its standard output a pipe whose reading end is already closed.
fn into_closed_pipe(cwd: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let (read, write): (OwnedFd, OwnedFd) = nix::unistd::pipe().expect("pipe");
    drop(read);
    let mut cmd = Command::new(bin("ferrite"));
    cmd.current_dir(cwd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped());
    let out = cmd
        .spawn()
        .expect("spawn")
        .wait_with_output()
        .expect("wait");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn exit_statuses_and_closed_pipes() {
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let mut daemon = ferrited_with_gui_rpc(dir.path(), port);
    let host = format!("127.0.0.1:{port}");
    let data = dir.path().to_str().expect("utf-8");
    let cwd = tempfile::tempdir().expect("tempdir");

    // A closed pipe: quiet, status 0, for every reading command.
    for cmd in [
        &["tasks"][..],
        &["projects"],
        &["status"],
        &["messages"],
        &["--json", "tasks"],
    ] {
        let mut args = vec!["--host", host.as_str()];
        args.extend_from_slice(cmd);
        let (code, err) = into_closed_pipe(cwd.path(), &args);
        assert_eq!(code, Some(0), "{cmd:?}: {err}");
        assert!(err.is_empty(), "{cmd:?}: {err}");
    }

    // Usage: 2 (clap's and ours).
    let out = ferrite_bounded(cwd.path(), &["--host", &host, "no-such-command"], T);
    assert_eq!(out.code, 2, "{out:?}");
    let out = ferrite_bounded(
        cwd.path(),
        &[
            "--host", &host, "--dir", data, "mode", "run", "never", "--for=-1",
        ],
        T,
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("--for takes"), "{out:?}");

    // Connection: 3.
    let closed = free_port();
    let out = ferrite_bounded(
        cwd.path(),
        &["--host", &format!("127.0.0.1:{closed}"), "status"],
        T,
    );
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("cannot connect"), "{out:?}");

    // Authentication: 4, saying where the password was looked for and how to give one.
    let out = ferrite_bounded(
        cwd.path(),
        &["--host", &host, "--passwd", "wrong", "quit"],
        T,
    );
    assert_eq!(out.code, 4, "{out:?}");
    assert!(out.stderr.contains("--passwd: given"), "{out:?}");
    let out = ferrite_bounded(cwd.path(), &["--host", &host, "mode", "run", "never"], T);
    assert_eq!(out.code, 4, "{out:?}");
    let looked = cwd.path().join("gui_rpc_auth.cfg");
    assert!(
        out.stderr
            .contains(&format!("{}: missing", looked.display())),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--passwd: not given"), "{}", out.stderr);
    assert!(
        out.stderr.contains("Give the password with --passwd"),
        "{}",
        out.stderr
    );

    // Refused by the client: 1.
    let out = ferrite_bounded(
        cwd.path(),
        &[
            "--host",
            &host,
            "--dir",
            data,
            "project",
            "http://127.0.0.1:1/none/",
            "update",
        ],
        T,
    );
    assert_eq!(out.code, 1, "{out:?}");

    // A project URL without its trailing slash (or with another case) finds the project,
    // as with the official client.
    for url in ["http://127.0.0.1:18080", "HTTP://127.0.0.1:18080/"] {
        let out = ferrite_bounded(
            cwd.path(),
            &["--host", &host, "--dir", data, "project", url, "nomorework"],
            T,
        );
        assert_eq!(out.code, 0, "{url}: {out:?}");
    }

    // --help documents the statuses.
    let mut help = Command::new(bin("ferrite"));
    help.arg("--help");
    let (out, _) = run_bounded(help, T);
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "0  success",
        "2  usage error",
        "3  cannot connect",
        "4  authentication",
    ] {
        assert!(text.contains(line), "{text}");
    }
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait(T).success(), "{}", daemon.output());
}

#[test]
fn reading_commands_work_against_the_official_client() {
    if !peer_or_skip(
        "reading_commands_work_against_the_official_client",
        &["boinc", "boinccmd"],
    ) {
        return;
    }
    let dir = fixture_data_dir("02_tasks_running");
    let client = OfficialClient::start(dir.path());
    let host = format!("127.0.0.1:{}", client.port());
    let data = dir.path().to_str().expect("utf-8");
    let cwd = tempfile::tempdir().expect("tempdir");
    let run = |args: &[&str]| {
        let mut all = vec!["--host", host.as_str(), "--dir", data];
        all.extend_from_slice(args);
        ferrite_bounded(cwd.path(), &all, T)
    };
    let status = run(&["status"]);
    assert_eq!(status.code, 0, "{status:?}");
    assert!(
        status
            .stdout
            .lines()
            .any(|l| l.split_whitespace().eq(["projects", "1"])),
        "{}",
        status.stdout
    );
    assert!(status.stdout.contains("tasks      3"), "{}", status.stdout);
    let projects = run(&["projects"]);
    assert_eq!(projects.code, 0, "{projects:?}");
    assert!(
        projects.stdout.contains("Fixture Project"),
        "{}",
        projects.stdout
    );
    let tasks = run(&["tasks"]);
    assert_eq!(tasks.code, 0, "{tasks:?}");
    assert!(tasks.stdout.contains("wu_long_0"), "{}", tasks.stdout);
    let json = run(&["--json", "tasks"]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(v.as_array().map(Vec::len), Some(3), "{v}");
    client.quit();
}
