//! Attacks on Ferrite, end to end through `ferrited`: symlinks planted or made by an app that
//! would carry files into or out of a project directory, app files whose bytes or signing key
//! were tampered with, GUI RPC from a host that is not allowed and through the Unix socket by
//! a user without permission, and what a task's slot can reach.
//!
//! Hostile file names from the server, bad signatures, wrong passwords and control without a
//! password are tested in `project.rs`, `gui_rpc.rs` and the crates' own tests (see
//! docs/reliability.md for the list).

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ferrite_e2e::testproject;
use ferrite_e2e::testproject::{
    all_reported, client_dir, find_named, reported, set_executable, start_client, status, walk,
    Server, KEY,
};
use ferrite_e2e::{bin, boinccmd, free_port, run_bounded, Proc};
use ferrite_proto::account::escape_project_url;

const T: Duration = Duration::from_secs(30);

/// Everything the server stored from uploads, concatenated.
fn uploaded_bytes(server: &Server) -> String {
    walk(&server.data.join("results"))
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| fs::read_to_string(p).unwrap_or_default())
        .collect()
}

#[test]
fn an_output_symlinked_out_of_the_slot_is_never_uploaded() {
    let tmp = tempfile::tempdir().expect("tmp");
    let secret = tmp.path().join("secret.txt");
    fs::write(&secret, "the volunteer's secret\n").expect("secret");
    // An app that, instead of writing its output, links it to a file of the host.
    let app = tmp.path().join("thief.sh");
    fs::write(
        &app,
        format!(
            "#!/bin/sh\nln -s {} out\necho 0 > boinc_finish_called\nexit 0\n",
            secret.display()
        ),
    )
    .expect("app");
    set_executable(&app);
    let server = Server::start_raw(
        tmp.path(),
        &tmp.path().join("server"),
        &["--app", &format!("thief={}", app.display()), "--jobs", "2"],
    );
    let dir = client_dir(tmp.path(), "");
    let port = free_port();
    let client = start_client(&dir, port, Some(&server.url));
    let s = testproject::nudge_until_reported(
        &server,
        &client,
        port,
        (2, Duration::from_secs(60)),
        "the thief's jobs",
        true,
    );
    let got = uploaded_bytes(&server);
    assert!(
        !got.contains("secret"),
        "a file of the host was uploaded: {got:?}\n{}",
        client.output()
    );
    for (name, exit) in reported(&s) {
        assert_ne!(exit, 0, "{name}: its output was not a file of its own: {s}");
    }
    assert_eq!(
        fs::read_to_string(&secret).expect("secret"),
        "the volunteer's secret\n"
    );
    // No link out of the project directory is left behind in it.
    let project = dir.join("projects").join(escape_project_url(&server.url));
    for p in walk(&project) {
        assert!(
            !p.symlink_metadata()
                .map(|m| m.is_symlink())
                .unwrap_or(false),
            "{} is a symlink",
            p.display()
        );
    }
}

#[test]
fn links_planted_at_download_names_are_not_written_through() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "2"]);
    let dir = client_dir(tmp.path(), "");
    // Links where the next downloads will land (whoever could write the project directory
    // put them there), pointing at files of the host.
    let project = dir.join("projects").join(escape_project_url(&server.url));
    fs::create_dir_all(&project).expect("project dir");
    let victims: Vec<PathBuf> = (0..2)
        .map(|i| {
            let v = tmp.path().join(format!("victim{i}"));
            fs::write(&v, "precious\n").expect("victim");
            v
        })
        .collect();
    std::os::unix::fs::symlink(&victims[0], project.join("alpha_wu_0_in")).expect("link");
    std::os::unix::fs::symlink(&victims[1], project.join("beta_wu_1_in.part")).expect("link");
    let port = free_port();
    let client = start_client(&dir, port, Some(&server.url));
    server.wait_until(
        &client,
        Duration::from_secs(60),
        "both jobs",
        all_reported(2),
    );
    for v in &victims {
        assert_eq!(
            fs::read_to_string(v).expect("victim"),
            "precious\n",
            "{} was written through a link:\n{}",
            v.display(),
            client.output()
        );
    }
    assert!(!uploaded_bytes(&server).contains("precious"));
}

#[test]
fn an_app_whose_bytes_were_altered_in_transit_never_runs() {
    // A man in the middle changes the executable and the MD5 in the reply, but cannot sign.
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "2", "--fault", "tampered-app"]);
    let dir = client_dir(tmp.path(), "");
    let client = start_client(&dir, free_port(), Some(&server.url));
    let s = server.wait_until(&client, Duration::from_secs(60), "errors", all_reported(2));
    for (name, exit) in reported(&s) {
        assert_ne!(exit, 0, "{name} must not have run: {s}");
    }
    assert_eq!(s["uploads_received"], 0, "{s}");
    assert!(
        find_named(&dir, "tampered_app_ran").is_none(),
        "the altered app ran"
    );
    let log = client.output();
    assert!(
        log.to_lowercase().contains("signature"),
        "the log says why:\n{log}"
    );
    assert!(
        !log.contains("alpha done") && !log.contains("beta done"),
        "{log}"
    );
}

/// The project's public key as the client stored it (state file after a clean stop).
fn stored_key(dir: &Path) -> String {
    let text = fs::read_to_string(dir.join("client_state.xml")).expect("state");
    text.split("<code_sign_key>")
        .nth(1)
        .and_then(|x| x.split("</code_sign_key>").next())
        .unwrap_or_default()
        .trim()
        .to_owned()
}

#[test]
fn a_key_change_not_signed_by_the_old_key_is_refused_and_apps_signed_with_it_never_run() {
    if !ferrite_e2e::peer_or_skip(
        "a_key_change_not_signed_by_the_old_key_is_refused_and_apps_signed_with_it_never_run",
        &["boinccmd"],
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    // The genuine project: one job, its key trusted on first use.
    let alpha = testproject::app_script(tmp.path(), "alpha", "hello", "");
    let genuine = Server::start_raw(
        tmp.path(),
        &tmp.path().join("genuine"),
        &[
            "--app",
            &format!("alpha={}", alpha.display()),
            "--jobs",
            "1",
        ],
    );
    let url = genuine.url.clone();
    let port = genuine.port().to_string();
    let dir = client_dir(tmp.path(), "");
    let gui = free_port();
    let mut client = start_client(&dir, gui, Some(&url));
    genuine.wait_until(&client, T, "the genuine job", all_reported(1));
    let old_key = fs::read_to_string(genuine.data.join("code_sign_public")).expect("key");
    drop(genuine);

    // An impostor at the same URL with a key of its own, announcing it unsigned, then signed
    // by itself; its app is signed with its key.
    let gamma = testproject::app_script(tmp.path(), "gamma", "pwned", "touch gamma_ran\n");
    let impostor = Server::start_raw(
        tmp.path(),
        &tmp.path().join("impostor"),
        &[
            "--port",
            &port,
            "--app",
            &format!("gamma={}", gamma.display()),
            "--jobs",
            "2",
            "--fault",
            "key-change",
            "--fault",
            "key-change-self-signed",
        ],
    );
    assert_eq!(impostor.url, url);
    let s = testproject::nudge_until_reported(
        &impostor,
        &client,
        gui,
        (2, Duration::from_secs(60)),
        "the impostor's jobs",
        true,
    );
    for (name, exit) in reported(&s) {
        assert_ne!(exit, 0, "{name} must not have run: {s}");
    }
    assert_eq!(s["uploads_received"], 0, "{s}");
    assert!(
        find_named(&dir, "gamma_ran").is_none(),
        "the impostor's app ran"
    );
    // Both announcements were refused, each with its reason.
    let t0 = Instant::now();
    while status(&impostor.url)["faults_armed"]
        .as_object()
        .is_some_and(|f| !f.is_empty())
        && t0.elapsed() < T
    {
        let _ = boinccmd(gui, Some("pw"), &["--project", &url, "update"]);
        std::thread::sleep(Duration::from_secs(2));
    }
    client.wait_for("new code-signing key has no signature", T);
    client.wait_for("new code-signing key does not verify with the old key", T);
    client.signal(libc::SIGTERM);
    assert!(client.wait(T).success(), "{}", client.output());
    assert_eq!(
        stored_key(&dir),
        old_key.trim(),
        "the old key is kept:\n{}",
        client.output()
    );
    let impostor_key = fs::read_to_string(impostor.data.join("code_sign_public")).expect("key");
    assert_ne!(impostor_key.trim(), old_key.trim());
}

/// A Unix user without a password prompt: `nobody`'s uid and gid, or `None` when there is
/// no such user or the tests do not run as root.
fn nobody() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let out = Command::new("id").args(["-u", "nobody"]).output().ok()?;
    let uid = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    let out = Command::new("id").args(["-g", "nobody"]).output().ok()?;
    let gid = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    Some((uid, gid))
}

/// `ferrite ARGS` as `uid:gid` (through setpriv) in an empty directory: (exit code, output).
fn ferrite_as(ids: Option<(u32, u32)>, args: &[&str]) -> (i32, String) {
    let cwd = tempfile::tempdir().expect("cwd");
    fs::set_permissions(cwd.path(), fs::Permissions::from_mode(0o777)).expect("chmod");
    let mut cmd = match ids {
        Some((uid, gid)) => {
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={uid}"),
                &format!("--regid={gid}"),
                "--clear-groups",
            ])
            .arg(bin("ferrite"));
            c
        }
        None => Command::new(bin("ferrite")),
    };
    cmd.current_dir(cwd.path()).args(args);
    let (out, _) = run_bounded(cmd, T);
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn the_unix_socket_refuses_users_without_permission_and_control_without_the_password() {
    let test = "the_unix_socket_refuses_users_without_permission_and_control_without_the_password";
    if !ferrite_e2e::root_or_skip(test, "to run a client as another user") {
        return;
    }
    let Some(nobody) = nobody() else {
        ferrite_e2e::skip(test, "there is no `nobody` user to run a client as");
        return;
    };
    let base = tempfile::tempdir().expect("tmp");
    // Reachable by anyone up to the socket itself, so the socket's own mode decides.
    fs::set_permissions(base.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    let dir = ferrite_e2e::fixture_data_dir("02_tasks_running");
    let data = base.path().join("data");
    ferrite_e2e::copy_dir(dir.path(), &data).expect("copy");
    fs::set_permissions(&data, fs::Permissions::from_mode(0o755)).expect("chmod");
    let d = data.to_str().expect("utf-8");
    let mut p = Proc::ferrited(&[
        "--dir",
        d,
        "--gui_rpc_unix_domain",
        "--skip_cpu_benchmarks",
        "--no_gpus",
    ]);
    p.wait_for("GUI RPC listening on a Unix socket", T);
    let sock = data.join("boinc_socket");
    let s = sock.to_str().expect("utf-8");
    let meta = fs::symlink_metadata(&sock).expect("socket");
    assert_eq!(meta.permissions().mode() & 0o777, 0o660, "socket mode");

    // Another user, not in the socket's group: cannot even connect.
    let (code, out) = ferrite_as(Some(nobody), &["--unix", s, "status"]);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("ermission denied"),
        "refused for lack of permission: {out}"
    );
    let (code, out) = ferrite_as(
        Some(nobody),
        &["--unix", s, "--passwd", "x", "mode", "run", "never"],
    );
    assert_ne!(code, 0, "{out}");

    // In the socket's group: reads, but no control without the password, nor with a wrong one.
    std::os::unix::fs::chown(&sock, None, Some(nobody.1)).expect("chgrp");
    let (code, out) = ferrite_as(Some(nobody), &["--unix", s, "status"]);
    assert_eq!(code, 0, "status is readable locally: {out}");
    let (code, out) = ferrite_as(Some(nobody), &["--unix", s, "mode", "run", "never"]);
    assert_ne!(code, 0, "control without the password: {out}");
    let (code, out) = ferrite_as(
        Some(nobody),
        &["--unix", s, "--passwd", "wrong", "mode", "run", "never"],
    );
    assert_ne!(code, 0, "control with a wrong password: {out}");
    // Nothing changed; the owner with the password is obeyed.
    let password = fs::read_to_string(data.join("gui_rpc_auth.cfg"))
        .map(|t| t.lines().next().unwrap_or("").trim().to_owned())
        .unwrap_or_default();
    let (code, out) = ferrite_as(None, &["--unix", s, "--json", "status"]);
    assert_eq!(code, 0, "{out}");
    assert_ne!(
        json_mode(&out),
        "never",
        "a refused control changed nothing: {out}"
    );
    let (code, out) = ferrite_as(
        Some(nobody),
        &["--unix", s, "--passwd", &password, "mode", "run", "never"],
    );
    assert_eq!(code, 0, "with the password: {out}");
    let (_, out) = ferrite_as(None, &["--unix", s, "--json", "status"]);
    assert_eq!(json_mode(&out), "never", "{out}");
}

fn json_mode(out: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(out).unwrap_or_default();
    v["modes"]["cpu"]["current"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `boinccmd` inside the network namespace of process `pid`.
fn boinccmd_in_ns(pid: i32, host: &str, password: Option<&str>, args: &[&str]) -> (i32, String) {
    let cwd = tempfile::tempdir().expect("cwd");
    let mut cmd = Command::new("nsenter");
    cmd.current_dir(cwd.path())
        .arg(format!("--net=/proc/{pid}/ns/net"))
        .args(["boinccmd", "--host", host]);
    if let Some(p) = password {
        cmd.args(["--passwd", p]);
    }
    cmd.args(args);
    let (out, _) = run_bounded(cmd, T);
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn gui_rpc_from_a_host_not_in_remote_hosts_cfg_is_refused() {
    let test = "gui_rpc_from_a_host_not_in_remote_hosts_cfg_is_refused";
    if !ferrite_e2e::peer_or_skip(test, &["boinccmd", "unshare"]) {
        return;
    }
    // A private network namespace whose loopback device also carries 10.77.0.1: a peer at
    // that address is not local, and nothing leaves the machine.
    let probe = Command::new("unshare")
        .args(["-n", "true"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !probe {
        ferrite_e2e::skip(
            test,
            "cannot make a network namespace here (unshare -n needs root or user namespaces)",
        );
        return;
    }
    let dir = ferrite_e2e::fixture_data_dir("02_tasks_running");
    fs::write(dir.path().join("gui_rpc_auth.cfg"), "pw\n").expect("pw");
    fs::write(
        dir.path().join("remote_hosts.cfg"),
        "# the GUI host\n10.77.0.9\n",
    )
    .expect("hosts");
    let d = dir.path().to_str().expect("utf-8");
    let port = free_port().to_string();
    let mut cmd = Command::new("unshare");
    cmd.args([
        "-n",
        "sh",
        "-c",
        "ip link set lo up && ip addr add 10.77.0.1/8 dev lo && exec \"$0\" \"$@\"",
    ])
    .arg(bin("ferrited"))
    .args([
        "--dir",
        d,
        "--gui_rpc_port",
        &port,
        "--allow_remote_gui_rpc",
        "--skip_cpu_benchmarks",
        "--no_gpus",
    ])
    .env("RUST_LOG", "info")
    .env("NO_COLOR", "1");
    let mut p = Proc::spawn(cmd);
    p.wait_for("GUI RPC listening on TCP", T);
    let remote = format!("10.77.0.1:{port}");
    let local = format!("127.0.0.1:{port}");

    // Not listed: refused with or without the password, and nothing changes.
    for pw in [Some("pw"), None] {
        let (code, out) = boinccmd_in_ns(p.pid(), &remote, pw, &["--set_run_mode", "never"]);
        assert_ne!(code, 0, "unlisted host obeyed: {out}");
        let (code, out) = boinccmd_in_ns(p.pid(), &remote, pw, &["--get_cc_status"]);
        assert_ne!(code, 0, "unlisted host answered: {out}");
    }
    let (code, out) = boinccmd_in_ns(p.pid(), &local, None, &["--get_cc_status"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("according to prefs"), "{out}");

    // Listed (the file is read again for every connection): still no control without the
    // right password.
    fs::write(dir.path().join("remote_hosts.cfg"), "10.77.0.1\n").expect("hosts");
    let (code, out) = boinccmd_in_ns(p.pid(), &remote, None, &["--set_run_mode", "never"]);
    assert_ne!(code, 0, "remote control without a password: {out}");
    let (code, out) = boinccmd_in_ns(
        p.pid(),
        &remote,
        Some("wrong"),
        &["--set_run_mode", "never"],
    );
    assert_ne!(code, 0, "remote control with a wrong password: {out}");
    assert!(out.contains("Authorization failure"), "{out}");
    let (code, out) = boinccmd_in_ns(p.pid(), &local, None, &["--get_cc_status"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("according to prefs"), "nothing changed: {out}");
    // With the password, the listed host is obeyed.
    let (code, out) = boinccmd_in_ns(p.pid(), &remote, Some("pw"), &["--set_run_mode", "never"]);
    assert_eq!(code, 0, "{out}");
    let (_, out) = boinccmd_in_ns(p.pid(), &local, None, &["--get_cc_status"]);
    assert!(out.contains("current mode: never"), "{out}");
}

/// The soft-link (or symlink) target of slot entry `p`, if it is one.
fn link_target(p: &Path) -> Option<String> {
    let meta = p.symlink_metadata().ok()?;
    if meta.is_symlink() {
        return fs::read_link(p)
            .ok()
            .map(|t| t.to_string_lossy().into_owned());
    }
    if !meta.is_file() || meta.len() > 4096 {
        return None;
    }
    let text = fs::read_to_string(p).ok()?;
    text.trim()
        .strip_prefix("<soft_link>")
        .and_then(|t| t.strip_suffix("</soft_link>"))
        .map(str::to_owned)
}

#[test]
fn a_slot_links_only_into_its_own_project() {
    if !ferrite_e2e::peer_or_skip("a_slot_links_only_into_its_own_project", &["boinccmd"]) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let a_dir = tmp.path().join("a");
    let b_dir = tmp.path().join("b");
    fs::create_dir_all(&a_dir).expect("a");
    fs::create_dir_all(&b_dir).expect("b");
    // Apps that run long enough to be looked at.
    let a = Server::start_with(&a_dir, &["--jobs", "2", "--name", "A"], "sleep 6\n");
    let b = Server::start_with(&b_dir, &["--jobs", "2", "--name", "B"], "sleep 6\n");
    let dir = client_dir(tmp.path(), "");
    let gui = free_port();
    let client = start_client(&dir, gui, Some(&a.url));
    let out = boinccmd(gui, Some("pw"), &["--project_attach", &b.url, KEY]);
    assert_eq!(out.code, 0, "{out:?}");
    let names = [escape_project_url(&a.url), escape_project_url(&b.url)];
    // Wait until tasks of both projects are running, then look at every slot.
    let t0 = Instant::now();
    let mut checked = [0usize; 2];
    while t0.elapsed() < Duration::from_secs(40) && checked.contains(&0) {
        for slot in fs::read_dir(dir.join("slots"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let init = fs::read_to_string(slot.path().join("init_data.xml")).unwrap_or_default();
            let Some(own) = names.iter().position(|n| {
                init.contains(&format!("projects/{n}"))
                    || init.contains(&format!(
                        "<project_dir>{}",
                        dir.join("projects").join(n).display()
                    ))
            }) else {
                continue;
            };
            let other = &names[1 - own];
            let mut links = 0;
            for e in walk(&slot.path()) {
                let Some(target) = link_target(&e) else {
                    continue;
                };
                links += 1;
                let prefix = format!("../../projects/{}/", names[own]);
                assert!(
                    target.starts_with(&prefix) && !target[prefix.len()..].contains('/'),
                    "{} links to {target:?}, outside its project {}",
                    e.display(),
                    names[own]
                );
                assert!(
                    !target.contains(other.as_str()),
                    "{} reaches {other}",
                    e.display()
                );
            }
            // Nothing in the slot names the other project at all.
            for e in walk(&slot.path()) {
                let text = fs::read(&e).unwrap_or_default();
                assert!(
                    !String::from_utf8_lossy(&text).contains(other.as_str()),
                    "{} mentions the other project",
                    e.display()
                );
            }
            if links > 0 {
                checked[own] += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        checked.iter().all(|&n| n > 0),
        "slots of both projects seen with their links: {checked:?}\n{:?}\n{}",
        walk(&dir.join("slots")),
        client.output()
    );
    for (server, what) in [(&a, "A's jobs"), (&b, "B's jobs")] {
        let t0 = Instant::now();
        while status(&server.url)["results_reported"] != 2 {
            if t0.elapsed() > Duration::from_secs(60) {
                let msgs = boinccmd(gui, Some("pw"), &["--get_messages"]);
                let tasks = boinccmd(gui, Some("pw"), &["--get_tasks"]);
                let projects = boinccmd(gui, Some("pw"), &["--get_project_status"]);
                panic!(
                    "{what} not reported: {}\n{}\n{}\n{}",
                    status(&server.url),
                    projects.stdout,
                    tasks.stdout,
                    msgs.stdout
                );
            }
            let _ = boinccmd(gui, Some("pw"), &["--project", &server.url, "update"]);
            std::thread::sleep(Duration::from_secs(2));
        }
    }
}
