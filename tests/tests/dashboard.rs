//! The web dashboard in a real browser: Debian's headless Chromium, driven through
//! `chromedriver`, loads the dashboard of a `ferrited` running the test project's work, sees
//! the task table and the history plots, signs in with the GUI RPC password and suspends a
//! running task, stops new work for the project, suspends computing for an hour, turns the
//! network off and aborts a task after its confirmation; GUI RPC then reports each change. Screenshots are kept under
//! `target/dashboard-screenshots/`; the page weight and the daemon's memory with and without
//! the dashboard open are printed.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferrite_e2e::testproject::{client_dir, client_dir_in, Server, ShellApp, KEY};
use ferrite_e2e::webdriver::Browser;
use ferrite_e2e::{free_port, gui_rpc, peer_or_skip, workspace_root, Proc};

const T: Duration = Duration::from_secs(60);

fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let dir = target.join("dashboard-screenshots");
    fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

/// Resident memory of a process, bytes (`VmRSS`).
fn rss(pid: i32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// A job log with two weeks of finished jobs, as a client that has run a while has.
fn seed_history(dir: &Path, url: &str, now: u64) {
    let mut log = String::new();
    for day in 1..14u64 {
        for k in 0..(day % 5 + 1) {
            let t = now - day * 86400 + k * 600;
            log.push_str(&format!(
                "{t} ue 3600.000000 ct {:.6} fe 100000000 nm seeded_{day}_{k} et {:.6} es 0\n",
                1800.0 + 300.0 * k as f64,
                2000.0 + 300.0 * k as f64
            ));
        }
    }
    let esc = ferrite_proto::account::escape_project_url(url);
    fs::write(dir.join(format!("job_log_{esc}.txt")), log).expect("job log");
}

#[test]
fn the_dashboard_shows_the_work_and_its_actions_go_through_gui_rpc() {
    if !peer_or_skip(
        "the_dashboard_shows_the_work_and_its_actions_go_through_gui_rpc",
        &["chromium", "chromedriver"],
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    // `alpha` jobs finish at once (job log, credit, transfers); `beta` jobs run for minutes.
    let server = Server::start_apps(
        tmp.path(),
        &[
            ShellApp {
                name: "alpha",
                word: "hello",
                prelude: "",
            },
            ShellApp {
                name: "beta",
                word: "goodbye",
                prelude: "sleep 600\n",
            },
        ],
        &["--jobs", "8"],
    );
    let dir = client_dir(tmp.path(), "");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    seed_history(&dir, &server.url, now);
    let (gui, web) = (free_port(), free_port());
    let (gui_s, web_s) = (gui.to_string(), web.to_string());
    let d = dir.to_str().expect("utf-8");
    let mut client = Proc::ferrited(&[
        "--dir",
        d,
        "--gui_rpc_port",
        &gui_s,
        "--metrics_port",
        &web_s,
        "--skip_cpu_benchmarks",
        "--no_gpus",
        "--attach_project",
        &server.url,
        KEY,
    ]);
    // GUI RPC listens once the main loop has started: wait for the listener itself.
    client.wait_for("GUI RPC listening on TCP", T);
    // Wait until a beta task runs, as GUI RPC says.
    let t0 = Instant::now();
    while !gui_rpc(gui, Some("pw"), "<get_results/>\n").contains("<active_task_state>1<") {
        assert!(t0.elapsed() < T, "no task ran:\n{}", client.output());
        std::thread::sleep(Duration::from_millis(300));
    }
    let rss_before = rss(client.pid());

    let shots = screenshot_dir();
    let browser = Browser::start(1280, 1700);
    browser.goto(&format!("http://127.0.0.1:{web}/"));
    browser.wait_for(
        "a running task in the table",
        "return document.body.dataset.loaded === 'now' && \
         !!document.querySelector('#tasks tr[data-state=\"running\"]')",
        T,
    );
    // The now-view: projects, run modes, the reasons for idle resources.
    let project_rows = browser
        .execute("return document.querySelectorAll('#projects tbody tr[data-project]').length");
    assert_eq!(project_rows, 1, "one project");
    let modes = browser.execute("return document.querySelectorAll('#modes tr[data-mode]').length");
    assert_eq!(modes, 3, "CPU, GPU and network modes");
    let idle = browser.execute("return document.getElementById('idle').innerText");
    assert!(!idle.as_str().unwrap_or("").is_empty(), "{idle}");

    // The history plots: bars of tasks done per day from the job log, with the project named.
    browser.wait_for(
        "the history plots",
        "return document.body.dataset.history === 'loaded' && \
         document.querySelectorAll('#chart-tasks rect.bar').length > 0",
        T,
    );
    let bars = browser.execute("return document.querySelectorAll('#chart-tasks rect.bar').length");
    assert!(
        bars.as_u64().unwrap_or(0) >= 10,
        "a bar per day of seeded history: {bars}"
    );
    let titles = browser.execute(
        "return Array.from(document.querySelectorAll('#chart-tasks rect.bar title')).map(t => t.textContent).join('\\n')",
    );
    assert!(titles.as_str().unwrap_or("").contains("tasks"), "{titles}");
    for chart in ["chart-cpu", "chart-elapsed", "chart-credit", "chart-bytes"] {
        let svg = browser.execute(&format!(
            "return !!document.querySelector('#{chart} svg.chart')"
        ));
        assert_eq!(svg, true, "{chart} drawn");
    }
    browser.screenshot(&shots.join("dashboard.png"));

    // Suspend the running task: the first try asks for the password (actions need it).
    let name = browser
        .execute("return document.querySelector('#tasks tr[data-state=\"running\"]').dataset.task")
        .as_str()
        .expect("task name")
        .to_owned();
    let row = format!("#tasks tr[data-task=\"{name}\"] button.act-suspend");
    click_retrying(&browser, &row);
    browser.wait_for(
        "the sign-in form",
        "return !document.getElementById('login').hidden",
        T,
    );
    assert!(
        !gui_rpc(gui, Some("pw"), "<get_results/>\n").contains("<suspended_via_gui/>"),
        "nothing suspended without the password"
    );
    browser.type_into("#secret", "pw");
    click_retrying(&browser, "#login button[type=submit]");
    click_retrying(&browser, &row);
    browser.wait_for(
        "the task shown suspended",
        &format!(
            "const r = document.querySelector('#tasks tr[data-task=\"{name}\"]'); \
             return !!r && r.dataset.state === 'suspended'"
        ),
        T,
    );
    // GUI RPC agrees: the dashboard went through the same calls.
    let results = gui_rpc(gui, Some("pw"), "<get_results/>\n");
    let block = results
        .split("<result>")
        .find(|r| r.contains(&format!("<name>{name}</name>")))
        .expect("the task over GUI RPC");
    assert!(block.contains("<suspended_via_gui/>"), "{block}");
    browser.screenshot(&shots.join("dashboard-suspended.png"));

    // No new tasks for the project, through its button.
    click_retrying(&browser, "#projects tr[data-project] button.act-nomore");
    wait_rpc(gui, "<get_project_status/>\n", "<dont_request_more_work/>");
    // Computing suspended for an hour through the run-mode row.
    browser.wait_for(
        "the run-mode row",
        "return !!document.querySelector('#modes tr[data-mode=\"set_run_mode\"] select')",
        T,
    );
    browser.select("#modes tr[data-mode=\"set_run_mode\"] select.mode", "never");
    browser.select(
        "#modes tr[data-mode=\"set_run_mode\"] select.duration",
        "3600",
    );
    click_retrying(&browser, "#modes tr[data-mode=\"set_run_mode\"] button");
    let cc = wait_rpc(gui, "<get_cc_status/>\n", "<task_mode>3</task_mode>");
    let delay: f64 = cc
        .split("<task_mode_delay>")
        .nth(1)
        .and_then(|r| r.split('<').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!((3000.0..=3600.0).contains(&delay), "for an hour: {cc}");
    assert!(
        cc.contains("<task_mode_perm>2</task_mode_perm>"),
        "then auto again: {cc}"
    );
    // Network off (until changed), so that the aborted task is not reported and gone
    // before it is looked at.
    browser.select(
        "#modes tr[data-mode=\"set_network_mode\"] select.mode",
        "never",
    );
    click_retrying(&browser, "#modes tr[data-mode=\"set_network_mode\"] button");
    wait_rpc(gui, "<get_cc_status/>\n", "<network_mode>3</network_mode>");
    // Abort a task: only after the confirmation.
    let victim = browser
        .execute("const b = document.querySelector('#tasks tr button.act-abort'); return b ? b.closest('tr').dataset.task : null")
        .as_str()
        .expect("a task to abort")
        .to_owned();
    let abort = format!("#tasks tr[data-task=\"{victim}\"] button.act-abort");
    click_retrying(&browser, &abort);
    let t0 = Instant::now();
    while !browser.accept_dialog() {
        assert!(t0.elapsed() < T, "no confirmation asked");
        std::thread::sleep(Duration::from_millis(100));
    }
    browser.wait_for(
        "the task shown aborted",
        &format!(
            "const r = document.querySelector('#tasks tr[data-task=\"{victim}\"]'); \
             return !!r && r.dataset.state === 'aborted'"
        ),
        T,
    );
    // As BOINC Manager shows it: a task whose computing is over (uploading, aborted, in
    // error) is at 100 %.
    let shown = browser.execute(&format!(
        "return document.querySelector('#tasks tr[data-task=\"{victim}\"] progress').value"
    ));
    assert_eq!(
        shown.as_f64(),
        Some(1.0),
        "the aborted task's progress: {shown}"
    );
    let results = gui_rpc(gui, Some("pw"), "<get_results/>\n");
    let block = results
        .split("<result>")
        .find(|r| r.contains(&format!("<name>{victim}</name>")))
        .expect("the aborted task over GUI RPC");
    assert!(block.contains("<state>6</state>"), "aborted: {block}");
    // Suspend everything at the running tasks' next checkpoints: the page asks with Ferrite's
    // <ferrite_at_checkpoint/>.
    click_retrying(&browser, "#suspend-at-checkpoint");
    client.wait_for(
        "run mode set to never (running tasks that checkpoint are suspended at their next \
         checkpoint)",
        T,
    );

    // Figures: what the page weighs, and the daemon's memory with it open.
    let weight = browser.execute(
        "const nav = performance.getEntriesByType('navigation')[0]; \
         const res = performance.getEntriesByType('resource').filter(r => r.initiatorType !== 'fetch' && r.initiatorType !== 'xmlhttprequest'); \
         return [nav.transferSize, nav.decodedBodySize].concat(res.map(r => [r.name, r.transferSize, r.decodedBodySize]))",
    );
    std::thread::sleep(Duration::from_secs(10));
    let rss_open = rss(client.pid());
    eprintln!("dashboard page weight (navigation transfer, body; then each asset): {weight}");
    eprintln!(
        "ferrited RSS: {:.1} MiB before the dashboard, {:.1} MiB with it open (polling every 2 s)",
        rss_before as f64 / 1048576.0,
        rss_open as f64 / 1048576.0
    );
    drop(browser);
    client.signal(libc::SIGTERM);
    assert!(client.wait(T).success(), "{}", client.output());
}

/// The preferences of Ferrite's own that the dashboard shows: the checkpoint grace time of
/// `cc_config.xml` under the suspend buttons, and the temperature limits with their sensors'
/// readings among the reasons.
#[test]
fn the_dashboard_shows_the_checkpoint_grace_and_the_temperature_limits() {
    if !peer_or_skip(
        "the_dashboard_shows_the_checkpoint_grace_and_the_temperature_limits",
        &["chromium", "chromedriver"],
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = client_dir_in(
        &tmp.path().join("client"),
        "<ferrite_checkpoint_grace>150</ferrite_checkpoint_grace>",
        "<ferrite_cpu_temp_limit>80</ferrite_cpu_temp_limit>",
    );
    let sys = tmp.path().join("sys");
    let hw = sys.join("class/hwmon/hwmon0");
    fs::create_dir_all(&hw).expect("hwmon");
    fs::write(hw.join("name"), "coretemp\n").expect("name");
    fs::write(hw.join("temp1_label"), "Package id 0\n").expect("label");
    fs::write(hw.join("temp1_input"), "61000\n").expect("input");
    let (gui, web) = (free_port(), free_port());
    let mut cmd = Proc::ferrited_command(&dir, gui, None);
    cmd.args(["--metrics_port", &web.to_string()])
        .arg("--no_gpus")
        .env("FERRITE_SYS_ROOT", &sys);
    let mut client = Proc::spawn(cmd);
    client.wait_for("GUI RPC listening on TCP", T);

    let browser = Browser::start(1280, 900);
    browser.goto(&format!("http://127.0.0.1:{web}/"));
    browser.wait_for(
        "the grace time and the limits shown",
        "return document.body.dataset.loaded === 'now' && \
         document.getElementById('checkpoint-grace').dataset.secs === '150' && \
         !!document.querySelector('#idle li[data-thermal]') && \
         document.querySelector('#idle li[data-thermal]').innerText.includes('now 61')",
        T,
    );
    let grace = browser.execute("return document.getElementById('checkpoint-grace').innerText");
    let grace = grace.as_str().unwrap_or_default();
    assert!(grace.contains("ferrite_checkpoint_grace"), "{grace}");
    assert!(grace.contains("00:02:30"), "{grace}");
    let limits =
        browser.execute("return document.querySelector('#idle li[data-thermal]').innerText");
    let limits = limits.as_str().unwrap_or_default();
    assert!(limits.contains("CPU 80 °C (now 61 °C)"), "{limits}");
    assert!(limits.contains("not acting"), "{limits}");

    // Turned off in cc_config.xml and read again: the page says so.
    fs::write(
        dir.join("cc_config.xml"),
        "<cc_config>\n<options>\n<ncpus>4</ncpus>\n\
         <ferrite_checkpoint_grace>0</ferrite_checkpoint_grace>\n</options>\n</cc_config>\n",
    )
    .expect("cc_config");
    let r = gui_rpc(gui, Some("pw"), "<read_cc_config/>\n");
    assert!(r.contains("<success/>"), "{r}");
    browser.wait_for(
        "the grace time shown off",
        "return document.getElementById('checkpoint-grace').dataset.secs === '0'",
        T,
    );
    let grace = browser.execute("return document.getElementById('checkpoint-grace').innerText");
    assert!(
        grace.as_str().unwrap_or_default().contains("off"),
        "{grace}"
    );
    browser.screenshot(&screenshot_dir().join("dashboard-prefs.png"));
    drop(browser);
    client.signal(libc::SIGTERM);
    assert!(client.wait(T).success(), "{}", client.output());
}

/// Asks GUI RPC `op` until the reply contains `needle`; the reply.
fn wait_rpc(port: u16, op: &str, needle: &str) -> String {
    let t0 = Instant::now();
    loop {
        let r = gui_rpc(port, Some("pw"), op);
        if r.contains(needle) {
            return r;
        }
        assert!(t0.elapsed() < T, "{op} never said {needle}: {r}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Clicks `css`, again while the table is being redrawn (every 2 s) under the pointer.
fn click_retrying(browser: &Browser, css: &str) {
    let t0 = Instant::now();
    loop {
        match browser.click(css) {
            Ok(()) => return,
            Err(e) if t0.elapsed() > Duration::from_secs(20) => panic!("click {css}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}
