//! BOINC Manager (Debian's `boinc-manager`) in a virtual X session, connected to `ferrited`
//! through a recording GUI RPC proxy: its Notices, Projects, Tasks, Transfers, Statistics and
//! Disk views, the Event Log and the Add Project wizard (with the project list the test
//! project serves) are each shown, checked through what the Manager asked for and through
//! the screen, and kept as PNG screenshots under `target/manager-screenshots/`.
//!
//! Its "Use account manager" wizard is driven from the keyboard as a user would (XTEST key
//! presses: mnemonics such as alt+n for "Next >", typed text), each page waited for through
//! the Manager's accessibility tree (AT-SPI), against `ferrited` and then against the
//! official client: both must end attached to the test account manager and its project.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use ferrite_e2e::testproject::{client_dir, http, Server, ShellApp, KEY};
use ferrite_e2e::x11::{
    accessibility_installed, Accessibility, Image, RecordingProxy, Widget, Xvfb,
};
use ferrite_e2e::{
    bin, boinccmd, free_port, gui_rpc, peer_or_skip, skip, workspace_root, OfficialClient, Proc,
};

const PW: &str = "pw";

fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let dir = target.join("manager-screenshots");
    fs::create_dir_all(&dir).expect("screenshot dir");
    dir
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
    x.spawn_gui(|| manager_command(x, dir, home, port))
}

/// The command of [`manager`].
fn manager_command(x: &Xvfb, dir: &Path, home: &Path, port: u16) -> Command {
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
    cmd
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
    if !peer_or_skip(
        "boinc_manager_shows_every_view_of_ferrited",
        &["boincmgr", "Xvfb", "xdotool", "xwd"],
    ) {
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

/// The test account manager's name, as its project config and the project list give it.
const AM_NAME: &str = "Ferrite test AM";

/// The Manager's windows ("BOINC Manager…"), oldest first: the main window, created before
/// any wizard or dialog, comes first.
fn manager_windows(x: &Xvfb) -> Vec<String> {
    let mut ids = x.windows("^BOINC Manager");
    ids.sort_by_key(|id| id.parse::<u64>().unwrap_or(u64::MAX));
    ids
}

/// Waits until the Manager's widgets satisfy `done`, at most `limit`; the widgets then.
fn wait_widgets(
    x: &Xvfb,
    a11y: &Accessibility,
    mgr: &Proc,
    what: &str,
    limit: Duration,
    done: impl Fn(&[Widget]) -> bool,
) -> Vec<Widget> {
    let t0 = Instant::now();
    loop {
        let widgets = a11y.widgets(mgr.pid());
        if done(&widgets) {
            return widgets;
        }
        assert!(
            t0.elapsed() < limit,
            "{what}: not on screen within {limit:?}; showing:\n{}\n--- Manager ---\n{}\n{}",
            widgets
                .iter()
                .map(|w| format!("{w:?}\n"))
                .collect::<String>(),
            mgr.output(),
            x.describe()
        );
        thread::sleep(Duration::from_millis(300));
    }
}

fn shows_label(widgets: &[Widget], text: &str) -> bool {
    widgets.iter().any(|w| w.role == "label" && w.name == text)
}

fn shows_text(widgets: &[Widget], role: &str, text: &str) -> bool {
    widgets.iter().any(|w| w.role == role && w.text == text)
}

/// Presses `keys` (xdotool names) with the keyboard focus in window `id`. They go through
/// XTEST, as a keyboard's would: with no window manager, GTK ignores key events sent to a
/// window.
fn press(x: &Xvfb, id: &str, keys: &[&str]) {
    let _ = x.xdotool(&["windowfocus", "--sync", id]);
    for k in keys {
        assert!(x.xdotool(&["key", k]).is_some(), "xdotool key {k}");
    }
}

/// Types `text` with the keyboard focus in window `id`.
fn type_in(x: &Xvfb, id: &str, text: &str) {
    let _ = x.xdotool(&["windowfocus", "--sync", id]);
    assert!(
        x.xdotool(&["type", "--delay", "30", text]).is_some(),
        "xdotool type"
    );
}

/// Waits until window `id` is gone, at most `limit`.
fn wait_closed(x: &Xvfb, id: &str, what: &str, mgr: &Proc, limit: Duration) {
    let t0 = Instant::now();
    while x.windows(".").iter().any(|w| w == id) {
        assert!(
            t0.elapsed() < limit,
            "{what} stayed open; Manager output:\n{}",
            mgr.output()
        );
        thread::sleep(Duration::from_millis(200));
    }
}

/// A screenshot once two shots 300 ms apart match (at most 5 s: a text cursor blinks),
/// written as `name.png`.
fn page_shot(x: &Xvfb, name: &str) -> Image {
    let mut last = x.screenshot();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        thread::sleep(Duration::from_millis(300));
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
    last
}

/// Drives the Manager `mgr` (connected through `proxy`) as a user joining the account
/// manager at `am_url` as `login` (password `secret`): closes the Add Project wizard it opens
/// for a client with no project, opens Tools → "Use account manager", enters the URL, the
/// name and the password, and finishes. Each page is waited for through the accessibility
/// tree (its title on screen) and kept as a screenshot `acct_mgr_wizard_<tag>_<n>_<page>`.
/// Returns the GUI RPC requests the Manager made from the wizard's opening on.
fn use_account_manager(
    x: &Xvfb,
    a11y: &Accessibility,
    mgr: &Proc,
    proxy: &RecordingProxy,
    am_url: &str,
    login: &str,
    tag: &str,
) -> Vec<String> {
    let long = Duration::from_secs(120);
    // The Add Project wizard, opened by itself: Cancel, and Yes to "really cancel?".
    wait_widgets(x, a11y, mgr, "the Add Project wizard", long, |w| {
        shows_label(w, "Choose a project")
    });
    let t0 = Instant::now();
    let windows = loop {
        let w = manager_windows(x);
        if w.len() >= 2 {
            break w;
        }
        assert!(t0.elapsed() < long, "no wizard window: {w:?}");
        thread::sleep(Duration::from_millis(200));
    };
    let (main, add_project) = (windows[0].clone(), windows[windows.len() - 1].clone());
    press(x, &add_project, &["alt+c"]);
    let question = wait_window(x, "^Question$", |_| true, mgr, Duration::from_secs(30));
    press(x, &question, &["alt+y"]);
    wait_closed(x, &add_project, "the Add Project wizard", mgr, long);

    // Tools → "Use account manager...".
    let before = proxy.requests().len();
    press(x, &main, &["alt+t"]);
    wait_widgets(
        x,
        a11y,
        mgr,
        "the Tools menu",
        Duration::from_secs(30),
        |w| {
            w.iter()
                .any(|w| w.role == "menu item" && w.name == "Use account manager...")
        },
    );
    press(x, &main, &["u"]);
    let widgets = wait_widgets(x, a11y, mgr, "the account manager wizard", long, |w| {
        shows_label(w, "Choose an account manager")
    });
    assert!(
        widgets
            .iter()
            .any(|w| w.role == "table cell" && w.name == AM_NAME),
        "the project list's account manager is not offered: {widgets:?}"
    );
    assert!(
        proxy.wait_for(before, "<get_all_projects_list", Duration::from_secs(30)),
        "the wizard did not ask for the project list"
    );
    let t0 = Instant::now();
    let wizard = loop {
        if let Some(id) = manager_windows(x).into_iter().find(|id| *id != main) {
            break id;
        }
        assert!(t0.elapsed() < long, "no account manager wizard window");
        thread::sleep(Duration::from_millis(200));
    };
    wait_painted(x, &wizard, "the account manager wizard");

    // The URL, typed into its field (alt+u: "Account manager &URL:").
    press(x, &wizard, &["alt+u", "ctrl+a"]);
    type_in(x, &wizard, am_url);
    wait_widgets(
        x,
        a11y,
        mgr,
        "the typed URL",
        Duration::from_secs(30),
        |w| shows_text(w, "text", am_url),
    );
    let choose = page_shot(x, &format!("acct_mgr_wizard_{tag}_1_choose"));

    // Next: the Manager asks the client for the URL's project config, which says it is an
    // account manager by that name; then the account page.
    press(x, &wizard, &["alt+n"]);
    let title = format!("Identify your account at {AM_NAME}");
    wait_widgets(x, a11y, mgr, &title, long, |w| shows_label(w, &title));
    type_in(x, &wizard, login);
    press(x, &wizard, &["Tab"]);
    type_in(x, &wizard, "secret");
    wait_widgets(
        x,
        a11y,
        mgr,
        "the typed name",
        Duration::from_secs(30),
        |w| shows_text(w, "text", login),
    );
    let account = page_shot(x, &format!("acct_mgr_wizard_{tag}_2_account"));

    // Next: the client runs the account manager RPC; the Manager polls it to the end.
    press(x, &wizard, &["alt+n"]);
    wait_widgets(x, a11y, mgr, "the completion page", long, |w| {
        shows_label(w, "Now using account manager")
    });
    let done = page_shot(x, &format!("acct_mgr_wizard_{tag}_3_done"));
    for (a, b, what) in [
        (&choose, &account, "choose and account"),
        (&account, &done, "account and done"),
    ] {
        assert!(
            a.difference(b) > 0.002,
            "{tag}: the {what} pages look the same"
        );
    }
    press(x, &wizard, &["alt+f"]);
    wait_closed(x, &wizard, "the account manager wizard", mgr, long);
    proxy.requests()[before..].to_vec()
}

/// A GUI RPC request on one line, without its `<boinc_gui_rpc_request>` envelope.
fn one_line(request: &str) -> String {
    let inner = request
        .replace("<boinc_gui_rpc_request>", "")
        .replace("</boinc_gui_rpc_request>", "");
    let words: Vec<&str> = inner.split_whitespace().collect();
    format!("{}\n", words.join(" "))
}

/// Where the first request after `from` containing `needle` is.
fn find_request(requests: &[String], from: usize, needle: &str) -> Option<usize> {
    requests
        .iter()
        .skip(from)
        .position(|r| r.contains(needle))
        .map(|i| i + from)
}

/// The wizard's requests, in the order the Manager must make them: the URL's project config
/// (then polled), the account manager RPC with what was typed (then polled).
fn assert_wizard_requests(requests: &[String], am_url: &str, login: &str, who: &str) {
    let url = format!("<url>{am_url}</url>");
    let mut at = 0;
    for needle in [
        "<get_project_config>",
        "<get_project_config_poll",
        "<acct_mgr_rpc>",
        "<acct_mgr_rpc_poll",
    ] {
        at = find_request(requests, at, needle)
            .unwrap_or_else(|| panic!("{who}: no {needle} after request {at}: {requests:#?}"));
        if needle == "<get_project_config>" {
            assert!(requests[at].contains(&url), "{who}: {}", requests[at]);
        }
        if needle == "<acct_mgr_rpc>" {
            let r = &requests[at];
            assert!(
                r.contains(&url)
                    && r.contains(&format!("<name>{login}</name>"))
                    && r.contains("<password>secret</password>"),
                "{who}: {r}"
            );
        }
    }
}

/// The client on `port` is attached to the test account manager and, through it, to the
/// test project (waits for the attach at most 60 s).
fn assert_attached_through_am(port: u16, server: &Server, am_url: &str, who: &str) {
    let info = gui_rpc(port, Some(PW), "<acct_mgr_info/>\n");
    assert!(
        info.contains(&format!("<acct_mgr_url>{am_url}</acct_mgr_url>"))
            && info.contains(&format!("<acct_mgr_name>{AM_NAME}</acct_mgr_name>"))
            && info.contains("<have_credentials/>"),
        "{who}: {info}"
    );
    let t0 = Instant::now();
    loop {
        let status = gui_rpc(port, Some(PW), "<get_project_status/>\n");
        if status.contains(&format!("<master_url>{}</master_url>", server.url))
            && status.contains("<attached_via_acct_mgr/>")
        {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{who}: the manager's project is not attached: {status}"
        );
        thread::sleep(Duration::from_millis(300));
    }
}

fn am_requests(server: &Server, login: &str) -> u64 {
    let s: serde_json::Value =
        serde_json::from_str(&http(&server.url, "GET", "am/status", "")).expect("am status");
    s["requests"][login].as_u64().unwrap_or(0)
}

/// BOINC Manager's "Use account manager" wizard, driven by keyboard like a user, joins the
/// test account manager (offered by the project list the client serves) through `ferrited`,
/// and then the same steps through the official client: both end attached to the manager and
/// to the project it lists.
#[test]
fn boinc_manager_account_manager_wizard_joins_through_ferrited_as_through_the_official_client() {
    let test = "boinc_manager_account_manager_wizard_joins_through_ferrited_as_through_the_official_client";
    if !peer_or_skip(
        test,
        &[
            "boincmgr",
            "Xvfb",
            "xdotool",
            "xwd",
            "boinc",
            "boinccmd",
            "dbus-daemon",
        ],
    ) {
        return;
    }
    // The wizard is followed through its accessibility tree.
    if !accessibility_installed() {
        skip(
            test,
            "AT-SPI is not installed (apt-get install dbus-daemon at-spi2-core python3-pyatspi)",
        );
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start(tmp.path(), &["--jobs", "0"]);
    let am_url = format!("{}am/", server.url);
    let reply = format!(
        "<acct_mgr_reply>\n<repeat_sec>600</repeat_sec>\n<account>\n<url>{}</url>\n\
         <authenticator>{KEY}</authenticator>\n</account>\n</acct_mgr_reply>\n",
        server.url
    );
    let r = http(&server.url, "POST", "am/policy", &reply);
    assert!(r.starts_with("policy set"), "{r}");

    // Ferrite, with no project, serving the test project's list (which names the manager).
    let dir = client_dir(tmp.path(), "");
    let port = free_port();
    let client = ferrited(&dir, port, &server, false);
    let list = dir.join("all_projects_list.xml");
    let t0 = Instant::now();
    while !fs::read_to_string(&list).is_ok_and(|s| s.contains("<account_manager>")) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no project list fetched:\n{}",
            client.output()
        );
        thread::sleep(Duration::from_millis(300));
    }
    let proxy = RecordingProxy::start(port);
    let x = Xvfb::start();
    let a11y = Accessibility::start(&x, tmp.path());
    let mgr = x.spawn_gui(|| {
        let mut cmd = manager_command(&x, &dir, &tmp.path().join("home"), proxy.port);
        a11y.env(&mut cmd);
        cmd
    });
    let requests = use_account_manager(
        &x,
        &a11y,
        &mgr,
        &proxy,
        &am_url,
        "wizard-ferrite",
        "ferrite",
    );
    drop(mgr);
    assert_wizard_requests(&requests, &am_url, "wizard-ferrite", "Ferrite");
    assert_attached_through_am(port, &server, &am_url, "Ferrite");
    assert_eq!(am_requests(&server, "wizard-ferrite"), 1);

    // The official client, with the same project list, through the same steps.
    let odir = tmp.path().join("official");
    fs::create_dir_all(&odir).expect("mkdir");
    fs::write(odir.join("gui_rpc_auth.cfg"), format!("{PW}\n")).expect("password");
    fs::copy(&list, odir.join("all_projects_list.xml")).expect("project list");
    let official = OfficialClient::start(&odir);
    let _ = official.boinccmd(&["--set_network_mode", "always"]);
    let oproxy = RecordingProxy::start(official.port());
    let mgr = x.spawn_gui(|| {
        let mut cmd = manager_command(&x, &odir, &tmp.path().join("home2"), oproxy.port);
        a11y.env(&mut cmd);
        cmd
    });
    let orequests = use_account_manager(
        &x,
        &a11y,
        &mgr,
        &oproxy,
        &am_url,
        "wizard-official",
        "official",
    );
    drop(mgr);
    assert_wizard_requests(
        &orequests,
        &am_url,
        "wizard-official",
        "the official client",
    );
    assert_attached_through_am(official.port(), &server, &am_url, "the official client");
    assert_eq!(am_requests(&server, "wizard-official"), 1);
    let finfo = boinccmd(port, Some(PW), &["--acct_mgr", "info"]).stdout;
    let (_, oinfo) = official.boinccmd(&["--acct_mgr", "info"]);
    assert_eq!(finfo, oinfo, "Ferrite, then the official client");

    let log: String = [("ferrited", &requests), ("official client", &orequests)]
        .iter()
        .map(|(who, reqs)| {
            format!(
                "== {who}\n{}",
                reqs.iter().map(|r| one_line(r)).collect::<String>()
            )
        })
        .collect();
    let path = screenshot_dir().join("acct_mgr_wizard_requests.txt");
    fs::write(&path, log).expect("write requests");
    println!("GUI RPC requests of the wizard: {}", path.display());
    official.quit();
    drop(a11y);
    drop(x);
}
