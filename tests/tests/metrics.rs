//! The metrics endpoint of a running `ferrited`: scraped over loopback with a plain HTTP/1.0
//! request, the text must parse as OpenMetrics (asked for as Prometheus asks), pass
//! `promtool check metrics` in the classic text format, and its task counts must match the
//! data directory the daemon runs on.

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use ferrite_e2e::{fixture_data_dir, free_port, peer_or_skip, Proc};
use ferrite_proto::client_state::{ClientState, ResultState};

const T: Duration = Duration::from_secs(30);

/// What Prometheus sends in `Accept`.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,\
    application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// `GET path` over HTTP/1.0; `(head, body)`, or `None` while nothing listens.
fn get(port: u16, path: &str) -> Option<(String, String)> {
    get_accepting(port, path, None)
}

/// `GET path` with an `Accept` header.
fn get_accepting(port: u16, path: &str, accept: Option<&str>) -> Option<(String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    s.write_all(format!("GET {path} HTTP/1.0\r\n{accept}\r\n").as_bytes())
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    Some((head.to_owned(), body.to_owned()))
}

/// One sample: family-less name, labels, value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: HashMap<String, String>,
    value: f64,
}

/// Parses OpenMetrics text strictly enough to catch what a scraper would reject: every
/// sample belongs to the family declared (`# TYPE`) just before it, with `# HELP` once per
/// family, counters' samples end in `_total`, no family twice, `# EOF` last and only once,
/// label values are quoted and escaped.
fn parse_openmetrics(text: &str) -> Vec<Sample> {
    assert!(text.ends_with("# EOF\n"), "no final # EOF:\n{text}");
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.pop(), Some("# EOF"));
    let mut types: HashMap<String, String> = HashMap::new();
    let mut helps: HashMap<String, usize> = HashMap::new();
    let mut current: Option<String> = None;
    let mut samples = Vec::new();
    for l in lines {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(
                ["gauge", "counter"].contains(&kind),
                "unexpected type in {l}"
            );
            assert!(
                types.insert(name.to_owned(), kind.to_owned()).is_none(),
                "family {name} declared twice"
            );
            current = Some(name.to_owned());
        } else if let Some(rest) = l.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP name text");
            assert_eq!(Some(name), current.as_deref(), "HELP outside its family");
            assert!(!help.is_empty());
            *helps.entry(name.to_owned()).or_default() += 1;
        } else if let Some(rest) = l.strip_prefix("# UNIT ") {
            let (name, unit) = rest.split_once(' ').expect("UNIT name unit");
            assert!(name.ends_with(&format!("_{unit}")), "{l}");
        } else {
            assert!(!l.starts_with('#'), "unknown comment {l}");
            let family = current.as_deref().expect("sample before any # TYPE");
            samples.push(parse_sample(l, family, &types[family]));
        }
    }
    for (name, n) in &helps {
        assert_eq!(*n, 1, "HELP of {name} {n} times");
    }
    assert_eq!(helps.len(), types.len(), "a family without HELP");
    samples
}

fn parse_sample(line: &str, family: &str, kind: &str) -> Sample {
    let name_end = line.find(['{', ' ']).expect("sample name");
    let name = &line[..name_end];
    match kind {
        "counter" => assert_eq!(name, format!("{family}_total"), "{line}"),
        _ => assert_eq!(name, family, "{line}"),
    }
    let mut labels = HashMap::new();
    let mut rest = &line[name_end..];
    if let Some(r) = rest.strip_prefix('{') {
        let mut chars = r.char_indices();
        let mut key = String::new();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '}' => {
                    end = Some(i);
                    break;
                }
                ',' => {}
                '=' => {
                    assert_eq!(chars.next().map(|x| x.1), Some('"'), "{line}");
                    let mut value = String::new();
                    loop {
                        match chars.next().map(|x| x.1) {
                            Some('"') => break,
                            Some('\\') => match chars.next().map(|x| x.1) {
                                Some('n') => value.push('\n'),
                                Some(c @ ('\\' | '"')) => value.push(c),
                                other => panic!("bad escape {other:?} in {line}"),
                            },
                            Some(c) => value.push(c),
                            None => panic!("unterminated label in {line}"),
                        }
                    }
                    assert!(
                        labels.insert(std::mem::take(&mut key), value).is_none(),
                        "label twice in {line}"
                    );
                }
                c => key.push(c),
            }
        }
        let end = end.expect("closing brace");
        rest = &r[end + 1..];
    }
    let v = rest.strip_prefix(' ').expect("space before value");
    let value = match v {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
    };
    Sample {
        name: name.to_owned(),
        labels,
        value,
    }
}

/// `boinc_tasks` summed over projects, by state.
fn tasks_by_state(samples: &[Sample]) -> HashMap<String, f64> {
    let mut by = HashMap::new();
    for s in samples.iter().filter(|s| s.name == "boinc_tasks") {
        *by.entry(s.labels["state"].clone()).or_insert(0.0) += s.value;
    }
    by
}

fn load(dir: &Path) -> ClientState {
    let text = fs::read_to_string(dir.join("client_state.xml")).expect("read state");
    ClientState::parse(&text, "client_state.xml")
        .expect("parse state")
        .value
}

/// Scrapes until `done` accepts the samples; panics with the last text after `T`.
fn scrape_until(p: &Proc, port: u16, done: impl Fn(&[Sample]) -> bool) -> (String, Vec<Sample>) {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < T {
        if let Some((head, body)) = get_accepting(port, "/metrics", Some(PROMETHEUS_ACCEPT)) {
            if head.starts_with("HTTP/1.") && head.contains(" 200 OK") {
                assert!(
                    head.to_ascii_lowercase().contains(
                        "content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"
                    ),
                    "{head}"
                );
                let samples = parse_openmetrics(&body);
                if done(&samples) {
                    return (body, samples);
                }
                last = body;
            }
        }
        thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "metrics never as expected; last text:\n{last}\ndaemon output:\n{}",
        p.output()
    );
}

/// Checks the scrape of a daemon running `02_tasks_running`.
/// `test` names the test for a skipped promtool check.
fn check_tasks_running(test: &str, p: &Proc, port: u16, fixture: &ClientState) {
    let results: Vec<_> = fixture.projects.iter().flat_map(|p| &p.results).collect();
    let to_report = results.iter().filter(|r| r.ready_to_report).count() as f64;
    let runnable = results
        .iter()
        .filter(|r| r.state == ResultState::FilesDownloaded && !r.ready_to_report)
        .count() as f64;
    assert_eq!((results.len(), to_report, runnable), (3, 1.0, 2.0));

    // The daemon restarts the fixture's tasks (they sleep 120 s and 300 s): wait until at
    // least one runs, then every task must be in exactly one of the expected states.
    let (text, samples) = scrape_until(p, port, |s| {
        tasks_by_state(s).get("running").copied().unwrap_or(0.0) >= 1.0
    });
    let by = tasks_by_state(&samples);
    let total: f64 = by.values().sum();
    assert_eq!(total, results.len() as f64, "{text}");
    assert_eq!(by.get("ready_to_report"), Some(&to_report), "{text}");
    assert_eq!(by["running"] + by["ready"], runnable, "{text}");
    for s in ["downloading", "uploading", "error", "aborted", "reported"] {
        assert_eq!(by.get(s), Some(&0.0), "{s}: {text}");
    }
    let url = &fixture.projects[0].project.master_url;
    assert!(
        samples
            .iter()
            .filter(|s| s.name == "boinc_tasks")
            .all(|s| &s.labels["url"] == url && s.labels.contains_key("project")),
        "{text}"
    );
    // The daemon's own figures are there and plausible.
    let one = |name: &str| {
        samples
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.value)
            .unwrap_or_else(|| panic!("no {name}:\n{text}"))
    };
    assert!(one("process_resident_memory_bytes") > 1e6, "{text}");
    assert!(one("process_cpu_seconds_total") >= 0.0, "{text}");
    assert!(one("boinc_cpus_busy") >= 1.0, "{text}");
    assert!(one("boinc_disk_allowed_bytes") > 0.0, "{text}");
    for family in [
        "boinc_transfer_bytes_total",
        "boinc_project_scheduler_rpcs_total",
        "boinc_project_scheduler_rpc_failures_total",
        "boinc_project_rpc_backoff_seconds",
        "boinc_work_buffer_seconds",
        "boinc_disk_usage_bytes",
    ] {
        assert!(
            samples.iter().any(|s| s.name == family),
            "no {family}:\n{text}"
        );
    }
    // A scraper that does not ask for OpenMetrics gets the classic text format, which
    // Prometheus's own checker reads.
    let (head, classic) = get(port, "/metrics").expect("reply");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    promtool_accepts(test, &classic);
    // The same server gives the dashboard at / and nothing elsewhere.
    let (head, body) = get(port, "/").expect("reply");
    assert!(head.contains(" 200 OK"), "{head}");
    assert!(body.contains("<title>Ferrite</title>"), "{body}");
    let (head, _) = get(port, "/other").expect("reply");
    assert!(head.contains(" 404 "), "{head}");
}

/// Prometheus's own checker (`promtool check metrics`, Debian package `prometheus`) reads
/// the text without complaint: neither a parse error nor a lint problem. Without promtool
/// this check (only) is skipped, as [`peer_or_skip`] says.
fn promtool_accepts(test: &str, text: &str) {
    if !peer_or_skip(&format!("{test} (promtool check metrics)"), &["promtool"]) {
        return;
    }
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("feed promtool");
    let out = child.wait_with_output().expect("promtool ends");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}\n{text}"
    );
}

#[test]
fn metrics_port_flag_serves_task_counts_of_the_data_dir() {
    let dir = fixture_data_dir("02_tasks_running");
    let fixture = load(dir.path());
    let port = free_port();
    let d = dir.path().to_str().expect("utf-8 path");
    let port_arg = port.to_string();
    let mut p = Proc::ferrited(&[
        "--dir",
        d,
        "--skip_cpu_benchmarks",
        "--no_gpus",
        "--metrics_port",
        &port_arg,
    ]);
    p.wait_for("entering main loop", T);
    check_tasks_running(
        "metrics_port_flag_serves_task_counts_of_the_data_dir",
        &p,
        port,
        &fixture,
    );
    p.signal(libc::SIGTERM);
    assert!(p.wait(T).success(), "{}", p.output());
    assert!(
        get(port, "/metrics").is_none(),
        "the endpoint stops with the daemon"
    );
}

#[test]
fn cc_config_option_turns_metrics_on() {
    let dir = fixture_data_dir("02_tasks_running");
    let fixture = load(dir.path());
    let port = free_port();
    let cc = dir.path().join("cc_config.xml");
    let text = fs::read_to_string(&cc).expect("read cc_config");
    let text = text.replace(
        "<options>",
        &format!("<options>\n    <ferrite_metrics_port>{port}</ferrite_metrics_port>"),
    );
    fs::write(&cc, text).expect("write cc_config");
    let d = dir.path().to_str().expect("utf-8 path");
    let mut p = Proc::ferrited(&["--dir", d, "--skip_cpu_benchmarks", "--no_gpus"]);
    p.wait_for("entering main loop", T);
    check_tasks_running("cc_config_option_turns_metrics_on", &p, port, &fixture);
    p.signal(libc::SIGTERM);
    assert!(p.wait(T).success(), "{}", p.output());
}

#[test]
fn a_remote_bind_without_a_secret_is_refused_and_a_token_file_is_the_secret() {
    // An empty GUI RPC password and no token file: no server anywhere but loopback. The
    // address is a documentation one, never bound: the refusal comes first.
    let dir = fixture_data_dir("02_tasks_running");
    fs::write(dir.path().join("gui_rpc_auth.cfg"), "").expect("empty password");
    let port = free_port();
    let port_arg = port.to_string();
    let d = dir.path().to_str().expect("utf-8 path");
    let mut p = Proc::ferrited(&[
        "--dir",
        d,
        "--skip_cpu_benchmarks",
        "--no_gpus",
        "--metrics_port",
        &port_arg,
        "--metrics_bind",
        "192.0.2.1",
    ]);
    p.wait_for("needs a GUI RPC password or a token file", T);
    p.signal(libc::SIGTERM);
    assert!(p.wait(T).success(), "{}", p.output());

    // With a token file, on loopback: reads are open, and an action needs the token.
    let token = dir.path().join("metrics.token");
    fs::write(&token, "t0ken\n").expect("token");
    let mut p = Proc::ferrited(&[
        "--dir",
        d,
        "--skip_cpu_benchmarks",
        "--no_gpus",
        "--metrics_port",
        &port_arg,
        "--metrics_token_file",
        token.to_str().expect("utf-8"),
    ]);
    p.wait_for("entering main loop", T);
    let t0 = Instant::now();
    while get(port, "/metrics").is_none() {
        assert!(t0.elapsed() < T, "{}", p.output());
        thread::sleep(Duration::from_millis(100));
    }
    let post = |auth: &str| {
        let body = "<boinc_gui_rpc_request><set_run_mode><never/><duration>0</duration></set_run_mode></boinc_gui_rpc_request>";
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        s.write_all(
            format!(
                "POST /api/rpc HTTP/1.0\r\nHost: 127.0.0.1\r\nX-Ferrite-Dashboard: 1\r\n{auth}\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    };
    let refused = post("");
    assert!(refused.contains(" 401 "), "{refused}");
    let wrong = post("Authorization: Bearer pw\r\n");
    assert!(wrong.contains(" 401 "), "{wrong}");
    let done = post("Authorization: Bearer t0ken\r\n");
    assert!(done.contains("<success/>"), "{done}");
    p.signal(libc::SIGTERM);
    assert!(p.wait(T).success(), "{}", p.output());
    let state = load(dir.path());
    assert_eq!(
        state.user_run_request,
        ferrite_proto::client_state::RunMode::Never,
        "the action went through the GUI RPC handler and was saved"
    );
}

/// 1,000 connections to the metrics server (its limit is 64), half silent and half stuck
/// in the middle of a request head: while they are all held, a scrape and the dashboard
/// are still served.
#[test]
fn a_scrape_and_the_dashboard_get_through_a_thousand_idle_connections() {
    ferrite_e2e::raise_nofile(1500);
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let d = dir.path().to_str().expect("utf-8 path");
    let port_arg = port.to_string();
    let mut p = Proc::ferrited(&[
        "--dir",
        d,
        "--skip_cpu_benchmarks",
        "--no_gpus",
        "--metrics_port",
        &port_arg,
    ]);
    p.wait_for("entering main loop", T);
    let start = Instant::now();
    while get(port, "/metrics").is_none_or(|(head, _)| !head.contains(" 200 ")) {
        assert!(start.elapsed() < T, "no metrics: {}", p.output());
        thread::sleep(Duration::from_millis(50));
    }
    let mut flood = Vec::new();
    for i in 0..1000 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        if i % 2 == 1 {
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        }
        flood.push(s);
    }
    let (head, body) = get(port, "/metrics").expect("a scrape during the flood");
    assert!(head.contains(" 200 "), "{head}");
    assert!(body.contains("boinc_tasks"), "{body}");
    let (head, _) = get(port, "/").expect("the dashboard during the flood");
    assert!(head.contains(" 200 "), "{head}");
    drop(flood);
    p.signal(libc::SIGTERM);
    assert!(p.wait(T).success(), "{}", p.output());
}
