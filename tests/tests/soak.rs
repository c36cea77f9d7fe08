//! A crash soak: `ferrited` runs dozens of short jobs from the loopback test project while it
//! is killed with SIGKILL at random moments and restarted on the same data directory. Every
//! job must still be reported exactly once with the right output, and nothing may be left
//! behind: no orphaned app process, no temporary file, a state file that loads.
//!
//! `FERRITE_SOAK_KILLS` sets the number of kills (default 25); `FERRITE_SOAK_JOBS` the number
//! of jobs (default 30); `FERRITE_SOAK_SEED` the seed of the kill timing.
//!
//! Run on demand: `cargo test -p ferrite-e2e --test soak -- --ignored --nocapture`. It is not
//! in the default suite yet: a kill that lands between the server handling a scheduler request
//! and the client saving its reply still loses that reply (a duplicate report, or the tasks it
//! brought — the test project does not resend lost results), so the test can fail by timing.

use std::fs;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ferrite_e2e::{bin, free_port, Proc};
use ferrite_proto::client_state::ClientState;

const KEY: &str = "0123456789abcdef0123456789abcdef";

/// One HTTP/1.0 exchange with the test server (loopback only).
fn http(url: &str, path: &str) -> String {
    let hostport = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut s = TcpStream::connect(&hostport).expect("connect to the test server");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        s,
        "GET /{path} HTTP/1.0\r\nHost: {hostport}\r\nContent-Length: 0\r\n\r\n"
    )
    .expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

fn status(url: &str) -> serde_json::Value {
    serde_json::from_str(&http(url, "status")).expect("status is JSON")
}

/// The test server with two shell apps that take about half a second; killed when dropped.
struct Server {
    proc: Proc,
    url: String,
    data: PathBuf,
}

impl Server {
    fn start(dir: &Path, jobs: u32) -> Server {
        let data = dir.join("server");
        let input = dir.join("input.txt");
        fs::write(&input, "world\n").expect("input");
        let mut apps = Vec::new();
        for (name, word, secs) in [("alpha", "hello", "0.3"), ("beta", "goodbye", "0.8")] {
            let path = dir.join(format!("{name}.sh"));
            // A plain (non-API) app: works a little, writes its output, says it finished.
            fs::write(
                &path,
                format!(
                    "#!/bin/sh\nsleep {secs}\necho \"{word} $(cat in)\" > out\n\
                     echo {name} done >&2\necho 0 > boinc_finish_called\nexit 0\n"
                ),
            )
            .expect("app");
            set_executable(&path);
            apps.push(format!("{name}={}", path.display()));
        }
        let jobs = jobs.to_string();
        let mut cmd = Command::new(bin("ferrite-testproject"));
        cmd.args(["--port", "0", "--data"])
            .arg(&data)
            .args(["--app", &apps[0], "--app", &apps[1], "--input"])
            .arg(&input)
            .args(["--fpops-est", "1e8", "--jobs", &jobs]);
        let mut proc = Proc::spawn(cmd);
        proc.wait_for("listening on http://", Duration::from_secs(30));
        let out = proc.output();
        let url = out
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .expect("the server prints its URL")
            .to_owned();
        Server { proc, url, data }
    }
}

fn set_executable(p: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let mut perm = fs::metadata(p).expect("meta").permissions();
    perm.set_mode(0o755);
    fs::set_permissions(p, perm).expect("chmod");
}

/// A data directory for ferrited that runs whatever the machine's load.
fn client_dir(dir: &Path) -> PathBuf {
    let d = dir.join("client");
    fs::create_dir_all(&d).expect("mkdir");
    fs::write(
        d.join("cc_config.xml"),
        "<cc_config>\n<options>\n<ncpus>4</ncpus>\n</options>\n</cc_config>\n",
    )
    .expect("cc_config");
    fs::write(
        d.join("global_prefs_override.xml"),
        "<global_preferences>\n<run_if_user_active>1</run_if_user_active>\n\
         <suspend_cpu_usage>0</suspend_cpu_usage>\n<max_ncpus_pct>100</max_ncpus_pct>\n\
         <work_buf_min_days>0.01</work_buf_min_days>\n\
         <work_buf_additional_days>0.01</work_buf_additional_days>\n</global_preferences>\n",
    )
    .expect("prefs");
    fs::write(d.join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    d
}

/// Starts ferrited on `dir` and waits for its main loop.
fn start_client(dir: &Path, port: u16, attach: Option<&str>) -> Proc {
    let d = dir.to_str().expect("utf-8");
    let port = port.to_string();
    let mut args = vec![
        "--dir",
        d,
        "--gui_rpc_port",
        &port,
        "--skip_cpu_benchmarks",
        "--no_gpus",
    ];
    if let Some(url) = attach {
        args.extend(["--attach_project", url, KEY]);
    }
    let mut p = Proc::ferrited(&args);
    p.wait_for("entering main loop", Duration::from_secs(30));
    p
}

/// xorshift64*: reproducible kill timing from a printed seed, no dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform enough in `lo..=hi`.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Processes (other than ours) whose working directory is under `dir/slots` or whose command
/// line mentions `dir`.
fn processes_in(dir: &Path) -> Vec<String> {
    let me = std::process::id().to_string();
    let slots = dir.join("slots");
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").expect("/proc").flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == me {
            continue;
        }
        let cwd = fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        let cmdline = fs::read(entry.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        if cwd.starts_with(&slots) || cmdline.contains(&needle) {
            found.push(format!("pid {pid} cwd {} cmd {cmdline}", cwd.display()));
        }
    }
    found
}

/// Every file under `dir` whose name looks like a temporary or partial file.
fn leftovers(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".tmp")
                || name.ends_with(".part")
                || name.ends_with(".partial")
                || name == "client_state_next.xml"
                || name.starts_with(".tmp")
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
#[ignore = "on demand: a kill inside a scheduler exchange can still lose its reply (see the module text)"]
fn ferrited_killed_at_random_moments_still_reports_every_job_exactly_once() {
    let kills_budget = env_num("FERRITE_SOAK_KILLS", 25);
    let jobs = env_num("FERRITE_SOAK_JOBS", 30);
    let seed = env_num("FERRITE_SOAK_SEED", 0x5eed_f3e1_7e00_0009).max(1);
    println!("soak: seed {seed:#x}, kill budget {kills_budget}, jobs {jobs}");
    let mut rng = XorShift(seed);
    let t0 = Instant::now();

    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), u32::try_from(jobs).expect("jobs"));
    let dir = client_dir(tmp.path());
    let port = free_port();
    let reported = |s: &serde_json::Value| s["results_reported"].as_u64().unwrap_or(0);

    let mut client = start_client(&dir, port, Some(&server.url));
    let mut kills = 0u64;
    let mut logs = Vec::new();
    while kills < kills_budget {
        std::thread::sleep(Duration::from_millis(rng.between(50, 1500)));
        if reported(&status(&server.url)) >= jobs {
            break;
        }
        client.signal(libc::SIGKILL);
        client.wait(Duration::from_secs(10));
        kills += 1;
        logs.push(client.output());
        client = start_client(&dir, port, None);
    }
    let kill_phase = t0.elapsed();

    // Now let it finish without kills, within a bound.
    let limit = Duration::from_secs(60 + jobs * 3);
    let calm = Instant::now();
    let s = loop {
        let s = status(&server.url);
        if reported(&s) >= jobs {
            break s;
        }
        assert!(
            calm.elapsed() < limit,
            "not all jobs reported within {limit:?} after {kills} kills (seed {seed:#x})\n\
             server status: {s}\n--- last ferrited ---\n{}\n--- server ---\n{}",
            client.output(),
            server.proc.output()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let elapsed = t0.elapsed();

    // A clean stop, then look at what is left.
    client.signal(libc::SIGTERM);
    let exit = client.wait(Duration::from_secs(30));
    let last_log = client.output();
    std::thread::sleep(Duration::from_millis(500));

    let duplicates = s["duplicate_reports"].as_u64().unwrap_or(u64::MAX);
    let results = s["results"].as_array().expect("results").clone();
    let mut wrong = Vec::new();
    let mut good = 0u64;
    for r in &results {
        let name = r["name"].as_str().expect("name");
        let out = server
            .data
            .join("results")
            .join(name)
            .join(format!("{name}_out"));
        let want = if name.starts_with("alpha") {
            "hello world\n"
        } else {
            "goodbye world\n"
        };
        let text = fs::read_to_string(&out).unwrap_or_default();
        // A loss is a job not reported with the right output; a duplicate is counted apart.
        if r["exit_status"] == 0 && r["reports"].as_u64().unwrap_or(0) >= 1 && text == want {
            good += 1;
        } else {
            wrong.push(format!("{r} output {text:?}"));
        }
    }
    let losses = jobs.saturating_sub(good);
    println!(
        "soak: kills {kills}, jobs {jobs}, reported {}, duplicates {duplicates}, losses {losses}, \
         kill phase {kill_phase:.1?}, total {elapsed:.1?}, uploads {}",
        reported(&s),
        s["uploads_received"]
    );

    // Evidence for any job reported more than once: what each ferrited run said of it.
    for r in &results {
        if r["reports"].as_u64().unwrap_or(0) > 1 {
            let name = r["name"].as_str().unwrap_or_default();
            println!(
                "soak: {name} reported {} times; the runs that mention it:",
                r["reports"]
            );
            for (i, log) in logs.iter().chain([&last_log]).enumerate() {
                for line in log.lines().filter(|l| l.contains(name)) {
                    println!("  run {i}: {line}");
                }
            }
        }
    }
    let orphans = processes_in(&dir);
    let temps = leftovers(&dir);
    let state_text =
        fs::read_to_string(dir.join("client_state.xml")).expect("a state file after the stop");
    let parsed = ClientState::parse(&state_text, "client_state.xml");

    // Every check is made; the failures are listed together.
    let mut failures = Vec::new();
    if !exit.success() {
        failures.push(format!("ferrited did not stop cleanly: {exit}"));
    }
    if duplicates != 0 {
        failures.push(format!("{duplicates} duplicate reports"));
    }
    if reported(&s) != jobs || results.len() as u64 != jobs {
        failures.push(format!("{} of {jobs} jobs reported", reported(&s)));
    }
    if !wrong.is_empty() {
        failures.push(format!(
            "results with a wrong status or output:\n{wrong:#?}"
        ));
    }
    if !orphans.is_empty() {
        failures.push(format!("orphaned app processes: {orphans:#?}"));
    }
    if !temps.is_empty() {
        failures.push(format!("temporary files left: {temps:?}"));
    }
    match &parsed {
        Ok(p) if p.value.projects.len() == 1 => {}
        Ok(p) => failures.push(format!("{} projects in the state", p.value.projects.len())),
        Err(e) => failures.push(format!("the final state file does not parse: {e}")),
    }
    for (i, log) in logs.iter().chain([&last_log]).enumerate() {
        if log.contains("panicked") {
            failures.push(format!("ferrited run {i} panicked:\n{log}"));
        }
    }

    if ferrite_e2e::official_client_installed() {
        // The official client loads the final state (on a copy: it rewrites what it reads).
        let copy = tmp.path().join("official");
        ferrite_e2e::copy_dir(&dir, &copy).expect("copy the data directory");
        let oc = ferrite_e2e::OfficialClient::start(&copy);
        let (ok, projects) = oc.boinccmd(&["--get_project_status"]);
        let out = oc.quit();
        assert!(ok, "boinccmd: {projects}\n{out}");
        assert!(
            projects.contains(server.url.trim_end_matches('/')),
            "the official client knows the project: {projects}\n{out}"
        );
    }
    assert!(
        failures.is_empty(),
        "soak failures (seed {seed:#x}, {kills} kills):\n{}\nserver status: {s}",
        failures.join("\n")
    );
}
