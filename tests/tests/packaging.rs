//! Ferrite as a system service: the systemd unit verifies, the Debian package builds with
//! `cargo deb`, lists the right files, installs into a throwaway root with the right owners,
//! modes and links, purges cleanly, and `ferrited` runs under the unit's settings (user boinc,
//! nice 10, idle I/O, umask 0007) on a data directory laid out like the package's, and stops
//! cleanly on SIGTERM. The sd_notify wrapper's unit tests are compiled here too.
//!
//! The package is built from the debug binaries the test run already has (`cargo deb
//! --no-build --profile dev`): no release build. Installing uses `dpkg --root=DIR
//! --force-script-chrootless`, which runs the maintainer scripts on this system with
//! `DPKG_ROOT=DIR`; they write only under DIR (the boinc account is created there by
//! `systemd-sysusers --root`). That part needs root, as CI has.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ferrite_e2e::{bin, root_or_skip, run_bounded, skip, workspace_root, Proc};

const CONF_FILES: [&str; 3] = [
    "cc_config.xml",
    "global_prefs_override.xml",
    "remote_hosts.cfg",
];

/// Whether `cmd --version` runs; when it does not, test `test` is skipped outside CI (with a
/// message) and fails in CI, where `tests/run.sh` installs it.
fn tool_present(test: &str, cmd: &[&str], package: &str) -> bool {
    let ok = Command::new(cmd[0])
        .args(&cmd[1..])
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip(
            test,
            &format!("{} is not installed ({package})", cmd.join(" ")),
        );
    }
    ok
}

fn run(cmd: &mut Command) -> std::process::Output {
    let (out, _) = run_bounded(
        std::mem::replace(cmd, Command::new("true")),
        Duration::from_secs(180),
    );
    out
}

fn run_ok(cmd: &mut Command) -> String {
    let desc = format!("{cmd:?}");
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{desc} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn unit_source() -> String {
    fs::read_to_string(workspace_root().join("packaging/ferrite.service")).expect("unit file")
}

/// The `[Service]` (and other sections') settings as key → values, comments dropped.
fn unit_settings(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with('[') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            map.entry(k.trim().to_owned())
                .or_default()
                .push(v.trim().to_owned());
        }
    }
    map
}

/// Runs `systemd-analyze verify` on `unit` and returns its complaints about that unit
/// (it exits 0 on unknown keys and unparsable values, so its output is what counts).
fn verify_complaints(unit: &Path) -> (bool, Vec<String>) {
    let out = run(Command::new("systemd-analyze").arg("verify").arg(unit));
    let name = unit.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let complaints = text
        .lines()
        .filter(|l| l.contains(name))
        .map(str::to_owned)
        .collect();
    (out.status.success(), complaints)
}

/// A copy of the unit text with `ExecStart` running `ferrited` (verify needs an existing
/// executable) in `dir` under the unit's own file name.
fn unit_copy(text: &str, ferrited: &Path, dir: &Path) -> PathBuf {
    let copy = text.replace(
        "ExecStart=/usr/bin/ferrited",
        &format!("ExecStart={}", ferrited.display()),
    );
    assert_ne!(copy, text, "the unit's ExecStart is /usr/bin/ferrited");
    let path = dir.join("ferrite.service");
    fs::write(&path, copy).expect("write unit copy");
    path
}

#[test]
fn unit_has_the_service_settings() {
    let s = unit_settings(&unit_source());
    let one = |k: &str| -> &str {
        let v = s.get(k).unwrap_or_else(|| panic!("{k} is set"));
        assert_eq!(v.len(), 1, "{k} is set once");
        &v[0]
    };
    assert_eq!(one("Type"), "notify");
    assert_eq!(one("NotifyAccess"), "main");
    let watchdog: u64 = one("WatchdogSec").parse().expect("WatchdogSec in seconds");
    assert!(
        (30..=600).contains(&watchdog),
        "a watchdog of {watchdog} s suits a loop turning every second"
    );
    assert_eq!(one("Restart"), "on-failure");
    assert_eq!(one("KillMode"), "mixed");
    let stop: u64 = one("TimeoutStopSec").parse().expect("seconds");
    // Apps get 5 s to quit and 3 s after SIGTERM; transfers and the state save come after.
    assert!(
        stop >= 30,
        "TimeoutStopSec {stop} leaves the daemon time to stop its apps"
    );
    assert_eq!(one("User"), "boinc");
    assert_eq!(one("Group"), "boinc");
    assert_eq!(one("Nice"), "10");
    assert_eq!(one("IOSchedulingClass"), "idle");
    assert_eq!(one("ProtectSystem"), "strict");
    assert!(one("ReadWritePaths")
        .split_whitespace()
        .any(|p| p == "/var/lib/ferrite"));
    assert_eq!(one("ProtectHome"), "yes");
    assert_eq!(one("PrivateTmp"), "yes");
    assert_eq!(one("NoNewPrivileges"), "yes");
    assert_eq!(one("ExecStart"), "/usr/bin/ferrited --dir /var/lib/ferrite");
    assert_eq!(one("ExecReload"), "/bin/kill -HUP $MAINPID");
    assert_eq!(one("WantedBy"), "multi-user.target");
    // GPUs and 32-bit apps must keep working.
    for k in [
        "PrivateDevices",
        "SystemCallArchitectures",
        "MemoryDenyWriteExecute",
    ] {
        assert!(!s.contains_key(k), "{k} would break science apps");
    }
}

#[test]
fn unit_verifies_with_systemd_analyze() {
    if !tool_present(
        "unit_verifies_with_systemd_analyze",
        &["systemd-analyze"],
        "apt-get install systemd",
    ) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let text = unit_source();
    let unit = unit_copy(&text, &bin("ferrited"), dir.path());
    let (ok, complaints) = verify_complaints(&unit);
    assert!(ok && complaints.is_empty(), "verify: {complaints:#?}");

    // The check catches mistakes: a misspelt key and a bad value are reported.
    let bad = text
        .replace("KillMode=mixed", "KilMode=mixed")
        .replace("Nice=10", "Nice=ten");
    let bad_dir = tempfile::tempdir().expect("tempdir");
    let unit = unit_copy(&bad, &bin("ferrited"), bad_dir.path());
    let (_, complaints) = verify_complaints(&unit);
    assert!(
        complaints.iter().any(|l| l.contains("KilMode"))
            && complaints.iter().any(|l| l.contains("ten")),
        "verify should reject the broken copy: {complaints:#?}"
    );
}

/// The target directory holding the test's debug binaries (what `cargo deb` packages).
fn target_dir() -> PathBuf {
    let ferrited = bin("ferrited");
    let _ = bin("ferrite");
    ferrited
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .expect("target dir")
}

/// Builds the package from the debug binaries into `out`; returns the .deb's path.
fn build_deb(out: &Path) -> PathBuf {
    run_ok(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "deb",
                "-p",
                "ferrite-daemon",
                "--no-build",
                "--profile",
                "dev",
            ])
            .args(["--fast", "--quiet", "-o"])
            .arg(out)
            .env("CARGO_TARGET_DIR", target_dir())
            .current_dir(workspace_root()),
    );
    let debs: Vec<PathBuf> = fs::read_dir(out)
        .expect("out dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .collect();
    assert_eq!(debs.len(), 1, "one package: {debs:?}");
    debs[0].clone()
}

/// `(uid, gid)` of `name` in the passwd file of `root`.
fn account_in(root: &Path, name: &str) -> (u32, u32) {
    let passwd = fs::read_to_string(root.join("etc/passwd")).expect("passwd in the root");
    let line = passwd
        .lines()
        .find(|l| l.split(':').next() == Some(name))
        .unwrap_or_else(|| panic!("{name} in {passwd}"));
    let f: Vec<&str> = line.split(':').collect();
    assert_eq!(f[5], "/var/lib/ferrite", "home of {name}");
    (f[2].parse().expect("uid"), f[3].parse().expect("gid"))
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).expect("stat").permissions().mode() & 0o7777
}

#[test]
fn debian_package_builds_installs_runs_and_purges() {
    let test = "debian_package_builds_installs_runs_and_purges";
    if !tool_present(
        test,
        &["cargo", "deb"],
        "cargo install cargo-deb --version 3.8.0 --locked",
    ) || !tool_present(test, &["dpkg-deb"], "apt-get install dpkg")
    {
        return;
    }
    let work = tempfile::tempdir().expect("tempdir");
    let deb = build_deb(work.path());

    // Contents: both binaries, the unit, the sysusers file and the default configuration.
    let listing = run_ok(Command::new("dpkg-deb").arg("-c").arg(&deb));
    let entry = |path: &str| {
        listing
            .lines()
            .find(|l| l.ends_with(&format!(" .{path}")))
            .unwrap_or_else(|| panic!("{path} in the package:\n{listing}"))
            .to_owned()
    };
    // dpkg-deb prints owners by name or by number.
    let root_owned = |line: &str, perms: &str| {
        line.starts_with(&format!("{perms} root/root "))
            || line.starts_with(&format!("{perms} 0/0 "))
    };
    for b in ["/usr/bin/ferrited", "/usr/bin/ferrite"] {
        assert!(root_owned(&entry(b), "-rwxr-xr-x"), "{}", entry(b));
    }
    entry("/usr/lib/systemd/system/ferrite.service");
    entry("/usr/lib/sysusers.d/ferrite.conf");
    for f in CONF_FILES {
        let line = entry(&format!("/etc/ferrite/{f}"));
        assert!(root_owned(&line, "-rw-r--r--"), "{line}");
    }
    assert!(
        !listing.contains("gui_rpc_auth.cfg"),
        "the GUI RPC password is generated per machine, never shipped"
    );
    let fields = run_ok(Command::new("dpkg-deb").arg("-f").arg(&deb));
    assert!(fields.contains("Package: ferrite\n"), "{fields}");
    assert!(
        fields.contains("adduser"),
        "postinst uses adduser: {fields}"
    );
    let control = work.path().join("control");
    run_ok(Command::new("dpkg-deb").arg("-e").arg(&deb).arg(&control));
    let conffiles = fs::read_to_string(control.join("conffiles")).expect("conffiles");
    let mut listed: Vec<&str> = conffiles.lines().collect();
    listed.sort_unstable();
    let mut want: Vec<String> = CONF_FILES
        .iter()
        .map(|f| format!("/etc/ferrite/{f}"))
        .collect();
    want.sort_unstable();
    assert_eq!(listed, want);
    for script in ["postinst", "postrm"] {
        assert!(
            mode(&control.join(script)) & 0o111 != 0,
            "{script} is executable"
        );
    }

    if !root_or_skip(
        "debian_package_builds_installs_runs_and_purges (install into a throwaway root)",
        "to chown to boinc",
    ) {
        return;
    }
    // An empty dpkg database in a throwaway root.
    let root = work.path().join("root");
    fs::create_dir_all(root.join("var/lib/dpkg/info")).expect("mkdir");
    fs::create_dir_all(root.join("var/lib/dpkg/updates")).expect("mkdir");
    fs::write(root.join("var/lib/dpkg/status"), "").expect("status");
    let host_wants = Path::new("/etc/systemd/system/multi-user.target.wants/ferrite.service");
    let host_had_it = host_wants.exists();
    let dpkg = |args: &[&str]| {
        run_ok(
            Command::new("dpkg")
                .arg(format!("--root={}", root.display()))
                .args([
                    "--force-script-chrootless",
                    "--force-depends",
                    "--log=/dev/null",
                ])
                .args(args),
        )
    };
    dpkg(&["-i", deb.to_str().expect("utf-8 path")]);
    assert_eq!(
        host_wants.exists(),
        host_had_it,
        "the host's systemd is untouched"
    );

    let (uid, gid) = account_in(&root, "boinc");
    assert!(
        fs::read_to_string(root.join("etc/group"))
            .expect("group")
            .lines()
            .any(|l| l.starts_with(&format!("boinc:x:{gid}:"))),
        "group boinc"
    );
    let data = root.join("var/lib/ferrite");
    let md = fs::metadata(&data).expect("data dir");
    assert_eq!((md.uid(), md.gid(), mode(&data)), (uid, gid, 0o775));
    for f in CONF_FILES.iter().chain(&["gui_rpc_auth.cfg"]) {
        let link = data.join(f);
        assert_eq!(
            fs::read_link(&link).unwrap_or_else(|e| panic!("{f} is a link: {e}")),
            Path::new("/etc/ferrite").join(f)
        );
    }
    let etc = root.join("etc/ferrite");
    let stat = |f: &str| {
        let p = etc.join(f);
        let md = fs::metadata(&p).expect("stat");
        (md.uid(), md.gid(), mode(&p))
    };
    assert_eq!(stat("gui_rpc_auth.cfg"), (0, gid, 0o640));
    assert_eq!(stat("cc_config.xml"), (uid, gid, 0o664));
    assert_eq!(stat("global_prefs_override.xml"), (0, gid, 0o664));
    assert_eq!(stat("remote_hosts.cfg"), (0, gid, 0o644));
    let password = fs::read_to_string(etc.join("gui_rpc_auth.cfg")).expect("password");
    let password = password.trim();
    assert_eq!(password.len(), 32, "a random password: {password:?}");
    assert!(password.chars().all(|c| c.is_ascii_hexdigit()));
    for f in CONF_FILES {
        assert_eq!(
            fs::read(etc.join(f)).expect("installed"),
            fs::read(workspace_root().join("config").join(f)).expect("source"),
            "{f}"
        );
    }

    // The unit: installed as written, enabled in the root, and it verifies with ExecStart
    // pointing at the installed binary.
    let unit = root.join("usr/lib/systemd/system/ferrite.service");
    let installed_unit = fs::read_to_string(&unit).expect("unit installed");
    assert_eq!(installed_unit, unit_source());
    assert_eq!(
        fs::read_link(root.join("etc/systemd/system/multi-user.target.wants/ferrite.service"))
            .expect("enabled"),
        Path::new("/usr/lib/systemd/system/ferrite.service")
    );
    let installed_bin = root.join("usr/bin/ferrited");
    assert!(mode(&installed_bin) & 0o111 != 0);
    if tool_present(test, &["systemd-analyze"], "apt-get install systemd") {
        let dir = tempfile::tempdir().expect("tempdir");
        let (ok, complaints) =
            verify_complaints(&unit_copy(&installed_unit, &installed_bin, dir.path()));
        assert!(ok && complaints.is_empty(), "verify: {complaints:#?}");
    }

    // A second configure (an upgrade) keeps the password and the links.
    dpkg(&["--force-confnew", "-i", deb.to_str().expect("utf-8 path")]);
    assert_eq!(
        fs::read_to_string(etc.join("gui_rpc_auth.cfg"))
            .expect("password")
            .trim(),
        password
    );
    assert!(fs::read_link(data.join("gui_rpc_auth.cfg")).is_ok());

    run_installed_daemon_as_the_unit_would(&root, uid, gid);

    // Purge: data, configuration and unit gone; the account stays (boinc-client shares it).
    dpkg(&["--purge", "ferrite"]);
    assert!(!data.exists(), "purge removes /var/lib/ferrite");
    assert!(!etc.exists(), "purge removes /etc/ferrite");
    assert!(!unit.exists());
    assert!(!root.join("usr/bin/ferrited").exists());
    assert_eq!(account_in(&root, "boinc"), (uid, gid));
}

/// Runs the installed `ferrited` with the unit's user, nice level, I/O class and umask on a
/// data directory laid out as the package lays out /var/lib/ferrite (links to a copy of the
/// root's /etc/ferrite), checks it runs with those settings and stops cleanly on SIGTERM.
fn run_installed_daemon_as_the_unit_would(root: &Path, uid: u32, gid: u32) {
    let base = tempfile::tempdir().expect("tempdir");
    // The unprivileged user must be able to reach its directories.
    fs::set_permissions(base.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    let etc = base.path().join("etc");
    let data = base.path().join("data");
    fs::create_dir(&etc).expect("mkdir");
    fs::create_dir(&data).expect("mkdir");
    for entry in fs::read_dir(root.join("etc/ferrite")).expect("etc/ferrite") {
        let entry = entry.expect("entry");
        let to = etc.join(entry.file_name());
        fs::copy(entry.path(), &to).expect("copy");
        let md = entry.metadata().expect("stat");
        std::os::unix::fs::chown(&to, Some(md.uid()), Some(md.gid())).expect("chown");
        fs::set_permissions(&to, fs::Permissions::from_mode(md.mode() & 0o7777)).expect("chmod");
        std::os::unix::fs::symlink(&to, data.join(entry.file_name())).expect("link");
    }
    std::os::unix::fs::chown(&data, Some(uid), Some(gid)).expect("chown data");
    fs::set_permissions(&data, fs::Permissions::from_mode(0o775)).expect("chmod");

    // The demo's project on loopback (the server runs as root; only the client is confined).
    let demo = base.path().join("demo");
    fs::create_dir(&demo).expect("mkdir");
    let app = demo.join("demo.sh");
    fs::write(
        &app,
        "#!/bin/sh\nsleep 1\nwc -w < in > out\necho \"demo app done\" >&2\n\
         echo 0 > boinc_finish_called\nexit 0\n",
    )
    .expect("app");
    fs::set_permissions(&app, fs::Permissions::from_mode(0o755)).expect("chmod");
    let input = demo.join("input.txt");
    fs::write(&input, "Ferrite runs BOINC science apps as boinc.\n").expect("input");
    let mut server_cmd = Command::new(bin("ferrite-testproject"));
    server_cmd
        .args(["--port", "0", "--data"])
        .arg(demo.join("server"))
        .arg("--app")
        .arg(format!("demo={}", app.display()))
        .arg("--input")
        .arg(&input)
        .args(["--jobs", "3", "--fpops-est", "1e9"]);
    let mut server = Proc::spawn(server_cmd);
    server.wait_for("listening on http://", Duration::from_secs(30));
    let url = server
        .output()
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .expect("the server prints its URL")
        .to_owned();
    // Small buffers so that the three jobs come in one or two requests.
    fs::write(
        data.join("global_prefs.xml"),
        "<global_preferences>\n<suspend_cpu_usage>0</suspend_cpu_usage>\n\
         <work_buf_min_days>0.01</work_buf_min_days>\n\
         <work_buf_additional_days>0.01</work_buf_additional_days>\n</global_preferences>\n",
    )
    .expect("prefs");
    std::os::unix::fs::chown(data.join("global_prefs.xml"), Some(uid), Some(gid)).expect("chown");

    let port = ferrite_e2e::free_port().to_string();
    let mut cmd = Command::new("setpriv");
    cmd.args([
        &format!("--reuid={uid}"),
        &format!("--regid={gid}"),
        "--clear-groups",
        "--no-new-privs",
        "--",
        "ionice",
        "-c",
        "3",
        "nice",
        "-n",
        "10",
    ])
    .arg(root.join("usr/bin/ferrited"))
    .arg("--dir")
    .arg(&data)
    .args([
        "--gui_rpc_port",
        &port,
        "--skip_cpu_benchmarks",
        "--no_gpus",
        "--attach_project",
        &url,
        "0123456789abcdef0123456789abcdef",
    ])
    .current_dir(&data)
    .env("RUST_LOG", "info")
    .env("NO_COLOR", "1");
    // SAFETY: umask only changes this child's file-creation mask before exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::umask(0o007);
            Ok(())
        });
    }
    let mut daemon = Proc::spawn(cmd);
    daemon.wait_for("entering main loop", Duration::from_secs(60));

    let status = fs::read_to_string(format!("/proc/{}/status", daemon.pid())).expect("status");
    let ids = |key: &str| -> Vec<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .expect("field")
            .split_whitespace()
            .map(|n| n.parse().expect("id"))
            .collect()
    };
    assert_eq!(ids("Uid:"), vec![uid; 4], "runs as boinc");
    assert_eq!(ids("Gid:"), vec![gid; 4]);
    let stat = fs::read_to_string(format!("/proc/{}/stat", daemon.pid())).expect("stat");
    let after_name = stat.rsplit_once(") ").expect("stat format").1;
    let nice: i32 = after_name
        .split_whitespace()
        .nth(16)
        .expect("nice")
        .parse()
        .expect("n");
    // `nice -n 10` adds 10 to the niceness it inherits (the test run's own, which a
    // developer's `nice cargo test` raises), capped at 19.
    let expected = (own_nice() + 10).min(19);
    assert_eq!(
        nice, expected,
        "runs 10 above the nice level it was started from"
    );
    let exe = fs::read_link(format!("/proc/{}/exe", daemon.pid())).expect("exe");
    assert_eq!(exe, root.join("usr/bin/ferrited"));

    // The daemon works through the links: it answers GUI RPC with the packaged password.
    let password = fs::read_to_string(etc.join("gui_rpc_auth.cfg")).expect("password");
    let reply = ferrite_e2e::gui_rpc(
        port.parse().expect("port"),
        Some(password.trim()),
        "<get_cc_status/>",
    );
    assert!(reply.contains("<cc_status>"), "GUI RPC reply: {reply}");

    // It runs the demo's work as boinc: every job downloaded, run, uploaded and reported.
    let t0 = std::time::Instant::now();
    let mut apps_seen = Vec::new();
    loop {
        let st = http_get(&url, "status");
        apps_seen.extend(app_owners_and_nice(&data));
        if st.contains("\"results_reported\":3") {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the demo's jobs were not reported within 2 minutes\nstatus: {st}\n--- ferrited ---\n{}\n--- server ---\n{}",
            daemon.output(),
            server.output()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let st = http_get(&url, "status");
    assert_eq!(st.matches("\"exit_status\":0").count(), 3, "{st}");
    // Apps seen running ran as boinc at idle priority (nice 19 for CPU jobs).
    for (app_uid, app_nice) in &apps_seen {
        assert_eq!(
            (*app_uid, *app_nice),
            (uid, 19),
            "apps run as boinc at nice 19"
        );
    }
    println!("saw {} app samples running as boinc", apps_seen.len());

    daemon.signal(libc::SIGTERM);
    let exit = daemon.wait(Duration::from_secs(30));
    let output = daemon.output();
    assert!(exit.success(), "clean exit on SIGTERM ({exit}):\n{output}");
    assert!(output.contains("state saved; exiting"), "{output}");

    // What it wrote belongs to boinc, the links are still links, the password unchanged.
    let state = data.join("client_state.xml");
    let md = fs::metadata(&state).expect("client_state.xml written");
    assert_eq!((md.uid(), md.gid()), (uid, gid));
    assert_eq!(mode(&state) & 0o007, 0, "umask 0007 keeps others out");
    for f in CONF_FILES.iter().chain(&["gui_rpc_auth.cfg"]) {
        assert!(fs::read_link(data.join(f)).is_ok(), "{f} is still a link");
    }
    assert_eq!(
        fs::read_to_string(etc.join("gui_rpc_auth.cfg")).expect("password"),
        password
    );
}

/// One plain HTTP/1.0 GET on loopback; the body.
fn http_get(url: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let hostport = url.trim_start_matches("http://").trim_end_matches('/');
    let Ok(mut s) = std::net::TcpStream::connect(hostport) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = write!(s, "GET /{path} HTTP/1.0\r\nHost: {hostport}\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

/// This test process's niceness.
fn own_nice() -> i32 {
    let stat = fs::read_to_string("/proc/self/stat").expect("own stat");
    let after_name = stat.rsplit_once(") ").expect("stat format").1;
    after_name
        .split_whitespace()
        .nth(16)
        .and_then(|n| n.parse().ok())
        .expect("own nice")
}

/// (uid, nice) of each process whose working directory is in `data/slots`.
fn app_owners_and_nice(data: &Path) -> Vec<(u32, i32)> {
    let Ok(slots) = fs::canonicalize(data.join("slots")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").expect("/proc").flatten() {
        let p = e.path();
        if !fs::read_link(p.join("cwd")).is_ok_and(|c| c.starts_with(&slots)) {
            continue;
        }
        let (Ok(md), Ok(stat)) = (fs::metadata(&p), fs::read_to_string(p.join("stat"))) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        if let Some(nice) = rest.split_whitespace().nth(16).and_then(|n| n.parse().ok()) {
            out.push((md.uid(), nice));
        }
    }
    out
}
