//! A fleet on one machine: 20 `ferrited` instances (own data directories and GUI RPC ports)
//! managed by one test account manager with a short sync period. The manager attaches the
//! project to all, changes its resource share, suspends it on half, then detaches it; every
//! instance must follow within two sync periods. The measured request rates are printed
//! (over four periods, or `FERRITE_FLEET_WINDOW_SECS` seconds).

use std::time::{Duration, Instant};

use ferrite_e2e::testproject::{client_dir_in, http, start_client, status, Server, KEY};
use ferrite_e2e::{boinccmd, ferrite_bounded, free_port, gui_rpc, Proc};

const HOSTS: usize = 20;
/// The manager's `repeat_sec`.
const PERIOD: f64 = 5.0;

fn set_policy(server: &Server, login: Option<&str>, reply: &str) {
    let path = login.map_or_else(
        || "am/policy".to_owned(),
        |l| format!("am/policy?login={l}"),
    );
    let r = http(&server.url, "POST", &path, reply);
    assert!(r.starts_with("policy set"), "{r}");
}

fn reply(server: &Server, extra: &str) -> String {
    format!(
        "<acct_mgr_reply>\n<repeat_sec>{PERIOD}</repeat_sec>\n<account>\n<url>{}</url>\n<authenticator>{KEY}</authenticator>\n{extra}\n</account>\n</acct_mgr_reply>\n",
        server.url
    )
}

fn am_requests_total(server: &Server) -> u64 {
    let s: serde_json::Value =
        serde_json::from_str(&http(&server.url, "GET", "am/status", "")).expect("json");
    s["requests"].as_object().map_or(0, |m| {
        m.values().filter_map(serde_json::Value::as_u64).sum()
    })
}

fn sched_requests_total(server: &Server) -> u64 {
    status(&server.url)["traffic"]["endpoints"]["scheduler"]["requests"]
        .as_u64()
        .unwrap_or(0)
}

struct Host {
    port: u16,
    proc: Proc,
}

/// Waits until `ok(project status)` holds on every host; returns the seconds it took.
/// Panics (with the first laggard's status and log) after two sync periods and a margin for
/// the reply to be carried out.
fn converge(hosts: &[Host], what: &str, ok: impl Fn(usize, &str) -> bool) -> f64 {
    let t0 = Instant::now();
    let limit = Duration::from_secs_f64(2.0 * PERIOD + 3.0);
    loop {
        let lagging = hosts.iter().enumerate().find(|(i, h)| {
            let s = gui_rpc(h.port, Some("pw"), "<get_project_status/>\n");
            !ok(*i, &s)
        });
        match lagging {
            None => return t0.elapsed().as_secs_f64(),
            Some((i, h)) => assert!(
                t0.elapsed() < limit,
                "{what}: host {i} not there within {limit:?}\n{}\n--- ferrited ---\n{}",
                gui_rpc(h.port, Some("pw"), "<get_project_status/>\n"),
                h.proc.output()
            ),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn twenty_hosts_follow_one_account_manager_within_two_sync_periods() {
    if !ferrite_e2e::peer_or_skip(
        "twenty_hosts_follow_one_account_manager_within_two_sync_periods",
        &["boinccmd"],
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "0"]);
    let am_url = format!("{}am/", server.url);
    set_policy(&server, None, &reply(&server, ""));

    let hosts: Vec<Host> = (0..HOSTS)
        .map(|i| {
            let dir = client_dir_in(&tmp.path().join(format!("host{i:02}")), "", "");
            let port = free_port();
            let proc = start_client(&dir, port, None);
            Host { port, proc }
        })
        .collect();
    for (i, h) in hosts.iter().enumerate() {
        let login = format!("host{i:02}");
        let out = boinccmd(
            h.port,
            Some("pw"),
            &["--acct_mgr", "attach", &am_url, &login, "secret"],
        );
        assert_eq!(out.code, 0, "{}", out.stdout);
    }
    let url = server.url.clone();
    let attached = move |_: usize, s: &str| {
        s.contains(&format!("<master_url>{url}</master_url>"))
            && s.contains("<attached_via_acct_mgr/>")
    };
    let t_attach = converge(&hosts, "attached", &attached);

    // Steady state: once every host has made its first scheduler request, count the
    // manager's and the project's requests over a window.
    let t0 = Instant::now();
    while sched_requests_total(&server) < HOSTS as u64 {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "first scheduler requests"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(2));
    // FERRITE_FLEET_WINDOW_SECS lengthens the measurement (four periods by default).
    let window = std::env::var("FERRITE_FLEET_WINDOW_SECS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|w| *w > 0.0)
        .unwrap_or(4.0 * PERIOD);
    let (am0, sched0) = (am_requests_total(&server), sched_requests_total(&server));
    std::thread::sleep(Duration::from_secs_f64(window));
    let (am1, sched1) = (am_requests_total(&server), sched_requests_total(&server));
    let per_host_day = |n: u64| n as f64 / HOSTS as f64 * 86400.0 / window;
    let am_rate = per_host_day(am1 - am0);
    let sched_rate = per_host_day(sched1 - sched0);
    assert!(am1 > am0, "periodic syncs happen");

    set_policy(
        &server,
        None,
        &reply(&server, "<resource_share>77</resource_share>"),
    );
    let t_share = converge(&hosts, "resource share 77", |_, s| {
        s.contains("<resource_share>77.000000</resource_share>")
    });

    for i in 0..HOSTS / 2 {
        set_policy(
            &server,
            Some(&format!("host{i:02}")),
            &reply(
                &server,
                "<resource_share>77</resource_share>\n<suspend>1</suspend>",
            ),
        );
    }
    let t_suspend = converge(&hosts, "suspended on half", |i, s| {
        s.contains("<suspended_via_gui/>") == (i < HOSTS / 2)
    });

    // One table across the fleet (plus a host that is not there) with `ferrite --hosts`.
    let mut list = String::from("# the fleet\n");
    for h in &hosts {
        list.push_str(&format!("127.0.0.1:{} pw\n", h.port));
    }
    let dead = free_port();
    list.push_str(&format!("127.0.0.1:{dead}\n"));
    let file = tmp.path().join("hosts.txt");
    std::fs::write(&file, list).expect("hosts file");
    let file = file.to_str().expect("utf-8");
    let out = ferrite_bounded(
        tmp.path(),
        &["--hosts", file, "status"],
        Duration::from_secs(60),
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    println!("{}", out.stdout);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines.len(),
        HOSTS + 2,
        "header, the fleet, the missing host"
    );
    assert!(lines[0].starts_with("HOST") && lines[0].contains("PROJECTS"));
    for (i, h) in hosts.iter().enumerate() {
        let row = lines[i + 1];
        assert!(
            row.starts_with(&format!("127.0.0.1:{} ", h.port)) && row.contains(" ok "),
            "{row}"
        );
    }
    assert!(
        lines[HOSTS + 1].contains("cannot connect"),
        "{}",
        out.stdout
    );
    let out = ferrite_bounded(
        tmp.path(),
        &["--hosts", file, "--json", "tasks"],
        Duration::from_secs(60),
    );
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(v["errors"].as_array().map(Vec::len), Some(1), "{v}");

    let detach = reply(&server, "<detach>1</detach>");
    set_policy(&server, None, &detach);
    for i in 0..HOSTS / 2 {
        set_policy(&server, Some(&format!("host{i:02}")), &detach);
    }
    let url = server.url.clone();
    let t_detach = converge(&hosts, "detached", |_, s| {
        !s.contains(&format!("<master_url>{url}</master_url>"))
    });

    println!(
        "fleet of {HOSTS} ferrited, repeat_sec {PERIOD}: converged after attach {t_attach:.1} s, \
         share {t_share:.1} s, suspend {t_suspend:.1} s, detach {t_detach:.1} s"
    );
    println!(
        "steady state over {window:.0} s: {am_rate:.0} account-manager requests and \
         {sched_rate:.0} scheduler requests per host per day (repeat_sec {PERIOD})"
    );
}
