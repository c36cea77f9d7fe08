//! Apps confined with Landlock: a hostile app (C, `tests/apps/hostile.c`, built here) tries,
//! from its slot, every read, write, connect and signal an app should not be able to make,
//! and reports what succeeded in its output file. Under Ferrite nothing beyond its rights
//! succeeds; under the official client (Debian's `boinc` 7.20.5, on the same test project)
//! the same app shows what Ferrite prevents. Both tables are printed.

use std::collections::BTreeMap;
use std::fs;
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferrite_e2e::testproject::{self, client_dir_in, walk, Server};
use ferrite_e2e::{
    build_c_app, free_port, gui_rpc, landlock_or_skip, peer_or_skip, OfficialClient, Proc,
};

const HOSTILE_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/apps/hostile.c");

/// What the app must be able to do, confined or not.
const ALLOWED: &[&str] = &[
    "read_own_input",
    "write_own_slot",
    "list_own_project",
    "read_system_library",
];

/// Whether another copy of the app was running when it probed `/proc`: the two copies run
/// at once under Ferrite, so `read_other_app_environ` there means something.
const CONTEXT: &[&str] = &["other_app_running"];

/// What a confined app must not be able to do.
const DENIED: &[&str] = &[
    "read_gui_rpc_auth_cfg",
    "read_account_file",
    "read_client_state_xml",
    "list_data_directory",
    "write_data_directory",
    "read_other_project",
    "write_other_project",
    "list_other_slot",
    "read_etc_boinc_client",
    "read_etc_shadow",
    "list_home",
    "read_client_environ",
    "read_other_app_environ",
    "open_client_memory",
    "signal_client",
    "signal_init",
    "tcp_connect_project_server",
    "tcp_bind",
    "abstract_socket_outside",
];

fn build_hostile(dir: &Path) -> PathBuf {
    let out = dir.join("hostile");
    build_c_app(Path::new(HOSTILE_SOURCE), &out);
    out
}

/// A client data directory with the secrets a hostile app goes for and a second project's
/// directory beside the test project's.
fn data_dir(at: &Path, cc_options: &str) -> PathBuf {
    let dir = client_dir_in(at, cc_options, "");
    let other = dir.join("projects").join("other.example_p");
    fs::create_dir_all(&other).expect("other project");
    fs::write(other.join("their_file"), "not yours\n").expect("their file");
    dir
}

/// The hostile apps' uploaded outputs.
fn outputs(server: &Server) -> String {
    walk(&server.data.join("results"))
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| fs::read_to_string(p).unwrap_or_default())
        .collect()
}

fn table(title: &str, r: &BTreeMap<String, bool>) -> String {
    let mut s = format!("{title}\n");
    for probe in ALLOWED.iter().chain(DENIED).chain(CONTEXT) {
        let v = match r.get(*probe) {
            Some(true) => "yes",
            Some(false) => "no",
            None => "?",
        };
        s.push_str(&format!("  {probe:<28} {v}\n"));
    }
    s
}

/// An abstract Unix socket outside any app (as X11 and D-Bus sessions have), named after
/// the project server's port, which the app reads in its project's directory name.
fn abstract_listener(server: &Server) -> UnixListener {
    let name = format!("ferrite-confine-probe-{}", server.port());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract name");
    UnixListener::bind_addr(&addr).expect("abstract socket")
}

/// The test project with two jobs of the hostile app (they run at once).
fn hostile_server(tmp: &Path) -> Server {
    let app = build_hostile(tmp);
    Server::start_raw(
        tmp,
        &tmp.join("server"),
        &[
            "--app",
            &format!("hostile={}", app.display()),
            "--jobs",
            "2",
        ],
    )
}

/// Runs the hostile app under ferrited; returns its report.
fn under_ferrite(tmp: &Path, server: &Server, cc_options: &str) -> BTreeMap<String, bool> {
    let dir = data_dir(&tmp.join("ferrite"), cc_options);
    let port = free_port();
    let mut cmd = Proc::ferrited_command(&dir, port, None);
    cmd.args(["--attach_project", &server.url, testproject::KEY]);
    let mut client = Proc::spawn(cmd);
    client.wait_for("entering main loop", Duration::from_secs(60));
    testproject::nudge_until_reported(
        server,
        &client,
        port,
        (2, Duration::from_secs(120)),
        "the hostile app under Ferrite",
        true,
    );
    let explain = gui_rpc(port, Some("pw"), "<ferrite_explain/>\n");
    assert!(
        explain.contains("<confine_support>apps are confined with Landlock"),
        "{explain}"
    );
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
    assert!(!dir.join("planted_by_app.txt").exists() || cc_options.contains("confine"));
    testproject::probe_report(server)
}

#[test]
fn a_hostile_app_reaches_nothing_beyond_its_slot_and_project() {
    let test = "a_hostile_app_reaches_nothing_beyond_its_slot_and_project";
    if !landlock_or_skip(test) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let server = hostile_server(tmp.path());
    let _listener = abstract_listener(&server);
    let ours = under_ferrite(tmp.path(), &server, "");
    eprintln!("{}", table("hostile app under Ferrite:", &ours));
    for probe in ALLOWED {
        assert_eq!(ours.get(*probe), Some(&true), "{probe}: {ours:?}");
    }
    for probe in DENIED {
        assert_eq!(ours.get(*probe), Some(&false), "{probe}: {ours:?}");
    }
    assert_eq!(ours.get("other_app_running"), Some(&true), "{ours:?}");
    // Through the client, too, an app learns no secret but its own project's account key:
    // its init_data.xml holds that one authenticator, as with the official client.
    let keys: Vec<String> = outputs(&server)
        .lines()
        .filter_map(|l| l.strip_prefix("authenticator "))
        .map(str::to_owned)
        .collect();
    assert_eq!(keys, [testproject::KEY; 2], "{keys:?}");
}

/// With `<ferrite_confine_apps>0</ferrite_confine_apps>` the app runs as the official client
/// runs it: it reads the GUI RPC password.
#[test]
fn confinement_turned_off_in_cc_config_runs_the_app_unconfined() {
    let test = "confinement_turned_off_in_cc_config_runs_the_app_unconfined";
    if !landlock_or_skip(test) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let server = hostile_server(tmp.path());
    let ours = under_ferrite(
        tmp.path(),
        &server,
        "<ferrite_confine_apps>0</ferrite_confine_apps>",
    );
    assert_eq!(ours.get("read_gui_rpc_auth_cfg"), Some(&true), "{ours:?}");
    assert_eq!(ours.get("list_data_directory"), Some(&true), "{ours:?}");
    // The two copies ran at once, so the probe of the other slot means something above.
    assert_eq!(ours.get("list_other_slot"), Some(&true), "{ours:?}");
}

/// The same app under the official client, for comparison: what Ferrite prevents.
#[test]
fn the_official_client_lets_the_hostile_app_reach_what_ferrite_prevents() {
    let test = "the_official_client_lets_the_hostile_app_reach_what_ferrite_prevents";
    if !peer_or_skip(test, &["boinc", "boinccmd"]) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let server = hostile_server(tmp.path());
    let _listener = abstract_listener(&server);
    let dir = data_dir(&tmp.path().join("official"), "");
    let official = OfficialClient::start(&dir);
    let _ = official.boinccmd(&["--set_run_mode", "auto"]);
    let _ = official.boinccmd(&["--set_network_mode", "auto"]);
    let (ok, out) = official.boinccmd(&["--project_attach", &server.url, testproject::KEY]);
    assert!(ok, "the official client did not attach: {out}");
    let t0 = Instant::now();
    loop {
        let s = testproject::status(&server.url);
        if s["results_reported"].as_i64() == Some(2) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "not reported: {s}\n{}",
            official.output()
        );
        let _ = official.boinccmd(&["--project", &server.url, "update"]);
        std::thread::sleep(Duration::from_secs(3));
    }
    let _ = official.quit();
    let theirs = testproject::probe_report(&server);
    eprintln!(
        "{}",
        table("hostile app under the official client:", &theirs)
    );
    for probe in ALLOWED {
        assert_eq!(theirs.get(*probe), Some(&true), "{probe}: {theirs:?}");
    }
    // What Ferrite prevents and the official client does not (as root here, or the
    // volunteer's own user: either way the data directory is the app's).
    for probe in [
        "read_gui_rpc_auth_cfg",
        "read_account_file",
        "read_client_state_xml",
        "list_data_directory",
        "read_other_project",
        "read_client_environ",
        "signal_client",
    ] {
        assert_eq!(theirs.get(probe), Some(&true), "{probe}: {theirs:?}");
    }
}
