//! Network faults: the test project's storm (seeded random HTTP 500s, connection resets, slow
//! answers and partial bodies on every endpoint) and a server that fails every request. The
//! server counts every request; the client must not storm it back (scheduler RPCs and
//! transfers back off after each failure as the official client's rules say), and once the
//! faults stop every job completes and is reported exactly once.

use std::collections::HashMap;
use std::fs;
use std::time::{Duration, Instant};

use ferrite_e2e::free_port;
use ferrite_e2e::testproject::{
    arm, client_dir, nudge_until_reported, start_client, status, Server,
};

/// One request from the server's traffic log.
#[derive(Debug, Clone)]
struct Req {
    t: f64,
    endpoint: String,
    target: String,
    outcome: String,
}

fn traffic(s: &serde_json::Value) -> Vec<Req> {
    s["traffic"]["log"]
        .as_array()
        .expect("traffic log")
        .iter()
        .map(|r| Req {
            t: r["t"].as_f64().unwrap_or(0.0),
            endpoint: r["endpoint"].as_str().unwrap_or_default().to_owned(),
            target: r["target"].as_str().unwrap_or_default().to_owned(),
            outcome: r["outcome"].as_str().unwrap_or_default().to_owned(),
        })
        .collect()
}

fn failed(r: &Req) -> bool {
    matches!(r.outcome.as_str(), "error" | "reset" | "partial")
}

/// Retries that came too soon: after a failed request to an endpoint and target, the next
/// request to the same endpoint and target before `until` (the end of the unattended part of
/// the run) and less than `min_gap` seconds later. Uploads are two requests per attempt (size
/// query, then data), so a failed size query may be followed by nothing, and a failed data
/// request by nothing, within the backoff.
fn early_retries(log: &[Req], until: f64, min_gap: f64) -> Vec<String> {
    let mut last_fail: HashMap<(String, String), f64> = HashMap::new();
    let mut bad = Vec::new();
    for r in log.iter().filter(|r| r.t <= until) {
        let key = (r.endpoint.clone(), r.target.clone());
        if let Some(&t) = last_fail.get(&key) {
            if r.t - t < min_gap {
                bad.push(format!(
                    "{} {:?} again {:.1} s after a failure",
                    r.endpoint,
                    r.target,
                    r.t - t
                ));
            }
        }
        if failed(r) {
            last_fail.insert(key, r.t);
        } else {
            last_fail.remove(&key);
        }
    }
    bad
}

#[test]
fn a_storm_of_faults_is_not_answered_with_a_storm_and_every_job_is_reported_once() {
    const JOBS: i64 = 8;
    const STORM: Duration = Duration::from_secs(15);
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", &JOBS.to_string()]);
    arm(&server.url, "storm:0.35:20261123");
    let dir = client_dir(
        tmp.path(),
        "<http_transfer_timeout>10</http_transfer_timeout>",
    );
    let port = free_port();
    let client = start_client(&dir, port, Some(&server.url));
    let t_start = Instant::now();
    std::thread::sleep(STORM.saturating_sub(t_start.elapsed()));
    let during = status(&server.url);
    arm(&server.url, "storm:off");
    let storm_end = during["traffic"]["log"]
        .as_array()
        .and_then(|l| l.last())
        .and_then(|r| r["t"].as_f64())
        .unwrap_or(0.0);

    // The faults hit, of several kinds.
    let log = traffic(&during);
    let faults: Vec<&Req> = log.iter().filter(|r| r.outcome != "ok").collect();
    let kinds: std::collections::BTreeSet<&str> =
        faults.iter().map(|r| r.outcome.as_str()).collect();
    let hit: std::collections::BTreeSet<&str> =
        faults.iter().map(|r| r.endpoint.as_str()).collect();
    assert!(
        faults.len() >= 3 && kinds.len() >= 2 && hit.len() >= 2,
        "the storm blew: {faults:?}\n{}",
        client.output()
    );

    // No storm back: after a failure, the same request waits for its backoff (scheduler RPCs
    // at least 30 s, the shortest official RPC backoff being 60·(0.5..1); transfers at least
    // 60 s, the shortest per-file backoff being 120·(0.5..1)), which a 15 s storm never
    // reaches.
    let early = early_retries(&log, storm_end, 30.0);
    assert!(
        early.is_empty(),
        "retried without backing off: {early:?}\nlog: {log:?}\n{}",
        client.output()
    );
    let ep = &during["traffic"]["endpoints"];
    eprintln!(
        "storm: {} requests, {} faults ({kinds:?}) in {storm_end:.1} s; per endpoint: {ep}",
        log.len(),
        faults.len()
    );
    let per_min = |e: &str| ep[e]["max_per_minute"].as_u64().unwrap_or(0);
    assert!(
        per_min("scheduler") <= 10,
        "scheduler RPCs per minute: {}",
        ep
    );
    assert!(per_min("master") <= 3, "master fetches per minute: {ep}");
    // Two app files and one input per job; each at most once more after a partial body.
    assert!(
        per_min("download") <= 2 * (2 + JOBS as u64),
        "downloads per minute: {ep}"
    );
    // Size query and data per output, each at most once more.
    assert!(
        per_min("upload") <= 4 * JOBS as u64,
        "uploads per minute: {ep}"
    );

    // The faults stop; the volunteer retries; everything completes, reported once.
    let s = nudge_until_reported(
        &server,
        &client,
        port,
        (JOBS, Duration::from_secs(60)),
        "after the storm",
        true,
    );
    assert_eq!(s["duplicate_reports"], 0, "{s}");
    assert_eq!(s["uploads_received"], JOBS, "{s}");
    for r in s["results"].as_array().expect("results") {
        assert_eq!(r["reports"], 1, "reported exactly once: {r}");
        assert_eq!(r["exit_status"], 0, "{r}");
        let name = r["name"].as_str().expect("name");
        let out = server
            .data
            .join("results")
            .join(name)
            .join(format!("{name}_out"));
        let text = fs::read_to_string(&out).expect("output stored");
        let want = if name.starts_with("alpha") {
            "hello world\n"
        } else {
            "goodbye world\n"
        };
        assert_eq!(text, want, "{name}: the output arrived whole");
    }
    assert_eq!(s["hosts"], 1, "one host record: {s}");
    eprintln!(
        "after the storm: {} reported, {} uploads, whole run per endpoint: {}",
        s["results_reported"], s["uploads_received"], s["traffic"]["endpoints"]
    );
    let log = client.output();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn a_server_failing_every_request_is_not_hammered() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "2"]);
    arm(&server.url, "storm:1:7");
    let dir = client_dir(
        tmp.path(),
        "<http_transfer_timeout>10</http_transfer_timeout>",
    );
    let port = free_port();
    let client = start_client(&dir, port, Some(&server.url));
    std::thread::sleep(Duration::from_secs(20));
    let s = status(&server.url);
    let log = traffic(&s);
    // Attach: the master page (and, once it is read, one scheduler RPC); then backoff.
    assert!(
        !log.is_empty() && log.len() <= 4,
        "requests to a failing server in 20 s: {log:?}\n{}",
        client.output()
    );
    assert!(log.iter().all(|r| r.outcome != "ok"), "{log:?}");
    let out = client.output();
    assert!(
        out.contains("next attempt in") || out.contains("master page fetch failed"),
        "the client says it backs off:\n{out}"
    );
    // The server comes back; the volunteer's Update brings the jobs.
    arm(&server.url, "storm:off");
    let s = nudge_until_reported(
        &server,
        &client,
        port,
        (2, Duration::from_secs(60)),
        "after the server came back",
        true,
    );
    assert_eq!(s["duplicate_reports"], 0);
}
