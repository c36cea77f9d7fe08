//! BOINC Manager (Debian's `boinc-manager`) in a virtual X session, connected to `ferrited`
//! through a recording GUI RPC proxy: its Notices, Projects, Tasks, Transfers, Statistics and
//! Disk views, the Event Log and the Add Project wizard (with the project list the test
//! project serves) are each shown, checked through what the Manager asked for and through
//! the screen, and kept as PNG screenshots under `target/manager-screenshots/`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use ferrite_e2e::testproject::{client_dir, Server, ShellApp, KEY};
use ferrite_e2e::x11::{x_tools_installed, Image, RecordingProxy, Xvfb};
use ferrite_e2e::{bin, free_port, workspace_root, Proc};

const PW: &str = "pw";

fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let dir = target.join("manager-screenshots");
    fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

fn manager_installed() -> bool {
    Command::new("sh")
        .args(["-c", "command -v boincmgr"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// ferrited on `dir`, fetching the project list from the test project.
fn ferrited(dir: &Path, port: u16, server: &Server, attach: bool) -> Proc {
    let mut cmd = Command::new(bin("ferrited"));
    cmd.arg("--dir").arg(dir).args([
        "--gui_rpc_port",
        &port.to_string(),
        "--skip_cpu_benchmarks",
        "--no_gpus",
    ]);
    if attach {
        cmd.args(["--attach_project", &server.url, KEY]);
    }
    cmd.env("RUST_LOG", "info").env("NO_COLOR", "1").env(
        "FERRITE_PROJECT_LIST_URL",
        format!("{}project_list.php", server.url),
    );
    let mut p = Proc::spawn(cmd);
    p.wait_for("GUI RPC listening on TCP", Duration::from_secs(60));
    p
}

/// The Manager, started in data directory `dir` with its own `home` (advanced view, no
/// client of its own), connected to `port`.
fn manager(x: &Xvfb, dir: &Path, home: &Path, port: u16) -> Proc {
    fs::create_dir_all(home).expect("home");
    fs::write(
        home.join(".BOINC Manager"),
        "GUISelection=1\nCurrentPageV2=0\nRunDaemon=0\n",
    )
    .expect("manager config");
    let mut cmd = Command::new("boincmgr");
    cmd.args([
        "--namehost=127.0.0.1",
        &format!("--gui_rpc_port={port}"),
        &format!("--password={PW}"),
    ])
    .current_dir(dir)
    .env("DISPLAY", &x.display)
    .env("HOME", home)
    .env("LANG", "C")
    .env("LC_ALL", "C");
    Proc::spawn(cmd)
}

/// Waits for a window whose name matches `name` (a regular expression) and `keep`; its id.
fn wait_window(
    x: &Xvfb,
    name: &str,
    keep: impl Fn(&str) -> bool,
    mgr: &Proc,
    limit: Duration,
) -> String {
    let t0 = Instant::now();
    loop {
        if let Some(id) = x
            .windows(name)
            .into_iter()
            .find(|id| keep(&x.window_name(id)))
        {
            return id;
        }
        assert!(
            t0.elapsed() < limit,
            "no window {name:?} within {limit:?}; Manager output:\n{}",
            mgr.output()
        );
        thread::sleep(Duration::from_millis(300));
    }
}

/// Takes a screenshot once the screen has stopped changing (two shots a second apart that
/// match, at most 15 s), writes it as `name.png` and returns it.
fn settled_shot(x: &Xvfb, name: &str) -> (Image, PathBuf) {
    let mut last = x.screenshot();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(15) {
        thread::sleep(Duration::from_millis(1000));
        let now = x.screenshot();
        let same = now == last;
        last = now;
        if same {
            break;
        }
    }
    let path = screenshot_dir().join(format!("{name}.png"));
    last.write_png(&path).expect("write png");
    println!("screenshot: {}", path.display());
    (last, path)
}

/// Xvfb has no window manager, and a new dialog may stay unpainted (black) until it is moved
/// so that it juts out of the main window: move it between two such places until its
/// rectangle on the screen shows a drawing (more than a few colours), at most 60 s.
fn wait_painted(x: &Xvfb, id: &str, what: &str) {
    let t0 = Instant::now();
    let mut flip = false;
    loop {
        let (px, py) = if flip { (320, 220) } else { (300, 200) };
        flip = !flip;
        let _ = x.xdotool(&["windowmove", id, &px.to_string(), &py.to_string()]);
        thread::sleep(Duration::from_millis(1500));
        let img = x.screenshot();
        if let Some((wx, wy, w, h)) = x.geometry(id) {
            if img.distinct_colours_in(wx, wy, w, h) > 16 {
                return;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{what}: its window stayed blank"
        );
    }
}

#[test]
fn boinc_manager_shows_every_view_of_ferrited() {
    if !(manager_installed() && x_tools_installed()) {
        eprintln!(
            "skipped: boinc-manager, xvfb, xdotool or x11-apps is not installed (see .ci/run)"
        );
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    // Long tasks: they are still running while the Manager looks.
    let server = Server::start_apps(
        tmp.path(),
        &[ShellApp {
            name: "alpha",
            word: "hello",
            prelude: "sleep 600\n",
        }],
        &["--jobs", "3"],
    );
    let dir = client_dir(tmp.path(), "");
    let port = free_port();
    let client = ferrited(&dir, port, &server, true);
    let proxy = RecordingProxy::start(port);
    // Tasks are there before the Manager comes.
    let t0 = Instant::now();
    while !fs::read_to_string(dir.join("client_state.xml")).is_ok_and(|s| s.contains("<result>")) {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no tasks:\n{}",
            client.output()
        );
        thread::sleep(Duration::from_millis(500));
    }

    let x = Xvfb::start();
    let mgr = manager(&x, &dir, &tmp.path().join("home"), proxy.port);
    let main = wait_window(
        &x,
        "^BOINC Manager",
        |n| !n.contains("Event Log"),
        &mgr,
        Duration::from_secs(120),
    );
    assert!(
        proxy.wait_for(0, "<get_state", Duration::from_secs(120)),
        "the Manager never asked for the state; requests: {:?}",
        proxy.requests()
    );

    // (view, its accelerator, the request that view makes)
    let views = [
        ("notices", "ctrl+shift+n", "<get_notices"),
        ("projects", "ctrl+shift+p", "<get_project_status"),
        ("tasks", "ctrl+shift+t", "<get_results"),
        ("transfers", "ctrl+shift+x", "<get_file_transfers"),
        ("statistics", "ctrl+shift+s", "<get_statistics"),
        ("disk", "ctrl+shift+d", "<get_disk_usage"),
    ];
    let mut shots: Vec<(&str, Image)> = Vec::new();
    for (name, key, request) in views {
        let before = proxy.requests().len();
        let _ = x.xdotool(&["windowfocus", "--sync", &main]);
        assert!(
            x.xdotool(&["key", "--window", &main, key]).is_some(),
            "xdotool could not send {key}"
        );
        assert!(
            proxy.wait_for(before, request, Duration::from_secs(90)),
            "{name}: the Manager did not ask for {request}; requests since: {:?}\n--- ferrited ---\n{}",
            &proxy.requests()[before..],
            client.output()
        );
        let (img, _) = settled_shot(&x, name);
        assert!(
            img.distinct_colours() > 16,
            "{name}: the screen is (nearly) blank"
        );
        shots.push((name, img));
    }
    for (i, (a, ia)) in shots.iter().enumerate() {
        for (b, ib) in &shots[i + 1..] {
            assert!(
                ia.difference(ib) > 0.002,
                "the {a} and {b} views look the same"
            );
        }
    }

    // The Event Log: its own window, filled from get_messages.
    let before = proxy.requests().len();
    let _ = x.xdotool(&["windowfocus", "--sync", &main]);
    let _ = x.xdotool(&["key", "--window", &main, "ctrl+shift+e"]);
    let log_window = wait_window(&x, "Event Log$", |_| true, &mgr, Duration::from_secs(60));
    assert!(
        proxy.wait_for(before, "<get_messages", Duration::from_secs(60)),
        "the Event Log did not ask for messages"
    );
    wait_painted(&x, &log_window, "the Event Log");
    let (img, _) = settled_shot(&x, "event_log");
    assert!(img.difference(&shots[0].1) > 0.01, "no Event Log on screen");
    drop(mgr);

    // The Add Project wizard: a Manager connected to a client with no project opens it, and
    // it lists the projects the client serves (here fetched from the test project).
    let dir2 = client_dir(&tmp.path().join("fresh"), "");
    let port2 = free_port();
    let fresh = ferrited(&dir2, port2, &server, false);
    let t0 = Instant::now();
    while !dir2.join("all_projects_list.xml").exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no project list fetched:\n{}",
            fresh.output()
        );
        thread::sleep(Duration::from_millis(300));
    }
    let proxy2 = RecordingProxy::start(port2);
    let mgr2 = manager(&x, &dir2, &tmp.path().join("home2"), proxy2.port);
    assert!(
        proxy2.wait_for(0, "<get_all_projects_list", Duration::from_secs(120)),
        "the wizard never asked for the project list; requests: {:?}\n{}",
        proxy2.requests(),
        mgr2.output()
    );
    let wizard = wait_window(
        &x,
        "^BOINC Manager$",
        |_| true,
        &mgr2,
        Duration::from_secs(60),
    );
    wait_painted(&x, &wizard, "the Add Project wizard");
    settled_shot(&x, "add_project_wizard");

    let log: String = proxy
        .requests()
        .iter()
        .chain(proxy2.requests().iter())
        .map(|r| format!("{}\n", r.trim()))
        .collect();
    let requests = screenshot_dir().join("gui_rpc_requests.txt");
    fs::write(&requests, &log).expect("write requests");
    println!("GUI RPC requests: {}", requests.display());
    drop(mgr2);
    drop(x);
}
