//! Confinement by kind of app and by kernel. An app posing as a Docker app (plan class
//! `docker`, C, `tests/apps/engine_client.c`) on a host whose engine is Docker (a stand-in
//! `docker` on the `PATH`, and a stand-in engine socket named by `DOCKER_HOST`) is confined
//! with the engine's socket added: it talks to the engine and still cannot read another
//! project's files or the GUI RPC password; `ferrite explain` says so for the task. On a
//! Podman host the same app runs unconfined, and `ferrite explain` says why. On a kernel
//! without Landlock (simulated with `FERRITE_SIMULATE_NO_LANDLOCK=1`) the client says once
//! in its log, and in `get_host_info`, that apps run unconfined.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrite_e2e::testproject::{self, client_dir_in, set_executable, walk, Server};
use ferrite_e2e::{build_c_app, ferrite_bounded, free_port, gui_rpc, landlock_or_skip, Proc};
use ferrite_supervise::confine;

const APP_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/apps/engine_client.c");

/// A stand-in container engine CLI `name` in `dir` that reports `version_line`, runs
/// hello-world and lists nothing.
fn fake_engine_cli(dir: &Path, name: &str, version_line: &str) {
    let p = dir.join(name);
    fs::write(
        &p,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n--version) echo '{version_line}';;\n\
             run) echo 'Hello from Docker!';;\nesac\nexit 0\n"
        ),
    )
    .expect("engine CLI");
    set_executable(&p);
}

/// A stand-in engine socket at `path` that answers "pong" to each connection, until the
/// returned flag is set (or 300 s have passed).
fn engine_socket(path: &Path) -> Arc<AtomicBool> {
    let listener = UnixListener::bind(path).expect("engine socket");
    listener.set_nonblocking(true).expect("nonblocking");
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        let t0 = Instant::now();
        while !flag.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(300) {
            match listener.accept() {
                Ok((mut s, _)) => {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut buf = [0u8; 16];
                    if s.read(&mut buf).is_ok_and(|n| n > 0) {
                        let _ = s.write_all(b"pong\n");
                    }
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    stop
}

/// Runs the app as a `docker` plan-class app under ferrited with `engine` (`docker` or
/// `podman`) as the host's container engine; returns its report and what `ferrite --json
/// explain` said of its confinement while it ran.
fn run_container_app(tmp: &Path, engine: &str) -> (BTreeMap<String, bool>, String) {
    let app = tmp.join("engine_client");
    build_c_app(Path::new(APP_SOURCE), &app);
    let server = Server::start_raw(
        tmp,
        &tmp.join("server"),
        &[
            "--app",
            &format!("dock={},docker", app.display()),
            "--jobs",
            "1",
        ],
    );
    let fake = tmp.join("bin");
    fs::create_dir_all(&fake).expect("bin");
    match engine {
        "docker" => fake_engine_cli(&fake, "docker", "Docker version 24.0.7, build afdd53b"),
        _ => fake_engine_cli(&fake, "podman", "podman version 4.3.1"),
    }
    let sock = tmp.join("engine.sock");
    let stop = engine_socket(&sock);

    let dir = client_dir_in(&tmp.join("client"), "", "");
    let other = dir.join("projects").join("other.example_p");
    fs::create_dir_all(&other).expect("other project");
    fs::write(other.join("their_file"), "not yours\n").expect("their file");
    let port = free_port();
    let mut cmd = Proc::ferrited_command(&dir, port, Some(&fake));
    cmd.env("DOCKER_HOST", format!("unix://{}", sock.display()))
        .args(["--attach_project", &server.url, testproject::KEY]);
    let mut client = Proc::spawn(cmd);
    client.wait_for("entering main loop", Duration::from_secs(60));

    // While the app waits for its `go`, its confinement as `ferrite explain` gives it.
    let host = format!("127.0.0.1:{port}");
    let t0 = Instant::now();
    let reason = loop {
        let out = ferrite_bounded(
            &dir,
            &["--host", &host, "--json", "explain"],
            Duration::from_secs(30),
        );
        let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
        if let Some(row) = v["confinement"].as_array().and_then(|rows| rows.first()) {
            break row["reason"].as_str().unwrap_or_default().to_owned();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the app never ran: {}\n{}",
            out.stdout,
            client.output()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    for slot in walk(&dir.join("slots")).into_iter().filter(|p| p.is_dir()) {
        let _ = fs::write(slot.join("go"), "");
    }
    testproject::nudge_until_reported(
        &server,
        &client,
        port,
        (1, Duration::from_secs(120)),
        "the Docker app",
        true,
    );
    stop.store(true, Ordering::Relaxed);
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
    (testproject::probe_report(&server), reason)
}

#[test]
fn a_docker_app_reaches_its_engine_socket_and_no_other_project() {
    let test = "a_docker_app_reaches_its_engine_socket_and_no_other_project";
    if !landlock_or_skip(test) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let (r, reason) = run_container_app(tmp.path(), "docker");
    assert!(
        reason.starts_with("confined: a Docker app") && reason.contains("Docker engine's socket"),
        "{reason}"
    );
    assert_eq!(r.get("reach_engine_socket"), Some(&true), "{r:?}");
    assert_eq!(r.get("read_own_input"), Some(&true), "{r:?}");
    assert_eq!(r.get("read_other_project"), Some(&false), "{r:?}");
    assert_eq!(r.get("read_gui_rpc_auth_cfg"), Some(&false), "{r:?}");
}

#[test]
fn a_podman_app_runs_unconfined_and_explain_says_why() {
    let test = "a_podman_app_runs_unconfined_and_explain_says_why";
    if !landlock_or_skip(test) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let (r, reason) = run_container_app(tmp.path(), "podman");
    assert!(
        reason.starts_with("unconfined: a Podman app") && reason.contains("no_new_privs"),
        "{reason}"
    );
    assert_eq!(r.get("read_other_project"), Some(&true), "{r:?}");
}

#[test]
fn a_kernel_without_landlock_is_said_once_in_the_log_and_in_get_host_info() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir: PathBuf = client_dir_in(tmp.path(), "", "");
    let port = free_port();
    let mut cmd = Proc::ferrited_command(&dir, port, None);
    cmd.env(confine::SIMULATE_NO_LANDLOCK_ENV, "1");
    let mut client = Proc::spawn(cmd);
    client.wait_for("entering main loop", Duration::from_secs(60));
    let sentence = "apps run unconfined: this kernel has no Landlock";
    let host = gui_rpc(port, Some("pw"), "<get_host_info/>\n");
    assert!(
        host.contains(&format!("<ferrite_confinement>{sentence}")),
        "{host}"
    );
    let explain = gui_rpc(port, Some("pw"), "<ferrite_explain/>\n");
    assert!(
        explain.contains(&format!("<confine_support>{sentence}")),
        "{explain}"
    );
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
    assert_eq!(
        client.output().matches(sentence).count(),
        1,
        "{}",
        client.output()
    );
}
