//! A crash soak: `ferrited` works through the loopback test project's short jobs while it is
//! killed with SIGKILL at random moments and restarted on the same data directory. Every job
//! must still be reported exactly once with the right output, and nothing may be left behind:
//! no orphaned app process, no temporary file, a state file that loads.
//!
//! A kill between the server handling a scheduler request and `ferrited` saving its reply
//! loses the reply: the tasks it brought are sent again by the server (it resends results
//! the request no longer lists, as BOINC servers do), and results it acknowledged are
//! reported again (acknowledged and not counted again; such re-reports are told apart from
//! real duplicates below).
//!
//! A kill costs no finished work: an app that finished while `ferrited` was down is reported,
//! one that still runs is taken over, so the apps run at most 1.05 times per result (each run
//! appends a line to a side file).
//!
//! `FERRITE_SOAK_KILLS` sets the number of kills (default 30, under a minute);
//! `FERRITE_SOAK_JOBS` the number of jobs (default: enough that every kill comes before the
//! last job is reported); `FERRITE_SOAK_SEED` the seed of the kill timing. The long soak:
//! `FERRITE_SOAK_KILLS=200 cargo test -p ferrite-e2e --test soak -- --nocapture`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferrite_e2e::free_port;
use ferrite_e2e::testproject::{client_dir, start_client, status, Server, ShellApp};
use ferrite_proto::client_state::ClientState;

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

/// A number from the environment, decimal or `0x` hexadecimal (as the seed is printed).
fn env_num(name: &str, default: u64) -> u64 {
    let Ok(v) = std::env::var(name) else {
        return default;
    };
    let v = v.trim();
    let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    parsed.unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}"))
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

/// The results held ready to report by the state file the next run loads: the first that
/// parses of `client_state_next.xml` (a save killed before its renames), `client_state.xml`
/// and `client_state_prev.xml`, the daemon's own order.
fn ready_to_report(dir: &Path) -> Vec<String> {
    let Some(state) = [
        "client_state_next.xml",
        "client_state.xml",
        "client_state_prev.xml",
    ]
    .iter()
    .find_map(|name| {
        let text = fs::read_to_string(dir.join(name)).ok()?;
        ClientState::parse(&text, name).ok()
    }) else {
        return Vec::new();
    };
    state
        .value
        .projects
        .iter()
        .flat_map(|p| p.results.iter())
        .filter(|r| r.ready_to_report)
        .map(|r| r.name.clone())
        .collect()
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
fn ferrited_killed_at_random_moments_still_reports_every_job_exactly_once() {
    let kills_budget = env_num("FERRITE_SOAK_KILLS", 30);
    let jobs = env_num("FERRITE_SOAK_JOBS", (kills_budget * 5).max(50));
    let seed = env_num("FERRITE_SOAK_SEED", 0x5eed_f3e1_7e00_0009).max(1);
    println!("soak: seed {seed:#x}, kill budget {kills_budget}, jobs {jobs}");
    let mut rng = XorShift(seed);
    let t0 = Instant::now();

    let tmp = tempfile::tempdir().expect("tmp");
    // Two plain apps that work a little: a kill often finds one running. Each run is a line
    // in `runs.log`.
    let runs_log = tmp.path().join("runs.log");
    let alpha = format!("echo run >> '{}'\nsleep 0.3\n", runs_log.display());
    let beta = format!("echo run >> '{}'\nsleep 0.8\n", runs_log.display());
    let jobs_arg = jobs.to_string();
    let server = Server::start_apps(
        tmp.path(),
        &[
            ShellApp {
                name: "alpha",
                word: "hello",
                prelude: &alpha,
            },
            ShellApp {
                name: "beta",
                word: "goodbye",
                prelude: &beta,
            },
        ],
        &["--jobs", &jobs_arg],
    );
    let dir = client_dir(
        tmp.path(),
        // The apps count their runs in a file outside their slot and project, which a
        // confined app cannot write (confinement is tested in confine.rs).
        "<ferrite_confine_apps>0</ferrite_confine_apps>",
    );
    let port = free_port();
    let reported = |s: &serde_json::Value| s["results_reported"].as_u64().unwrap_or(0);

    let mut client = start_client(&dir, port, Some(&server.url));
    let mut kills = 0u64;
    let mut logs = Vec::new();
    let mut restarts: Vec<Duration> = Vec::new();
    let mut reportable_at_restart: HashMap<String, u64> = HashMap::new();
    while kills < kills_budget {
        std::thread::sleep(Duration::from_millis(rng.between(50, 1500)));
        if reported(&status(&server.url)) >= jobs {
            break;
        }
        client.signal(libc::SIGKILL);
        client.wait(Duration::from_secs(10));
        kills += 1;
        logs.push(client.output());
        // What the next run starts from: a result it holds ready to report may have been
        // reported in an exchange whose reply the kill lost, and is then reported again.
        for name in ready_to_report(&dir) {
            *reportable_at_restart.entry(name).or_insert(0) += 1;
        }
        let t = Instant::now();
        client = start_client(&dir, port, None);
        restarts.push(t.elapsed());
    }
    let kill_phase = t0.elapsed();
    restarts.sort();
    println!(
        "soak: restarts took {:?} median, {:?} at most",
        restarts
            .get(restarts.len() / 2)
            .copied()
            .unwrap_or_default(),
        restarts.last().copied().unwrap_or_default()
    );

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

    // A report repeated because its acknowledgement was lost to a kill is BOINC's protocol at
    // work (the server acknowledges it again and does not count it); each one needs a restart
    // that loaded the result still ready to report. Reports beyond that are duplicates.
    let repeated = s["duplicate_reports"].as_u64().unwrap_or(u64::MAX);
    let mut duplicates = 0u64;
    for r in s["results"].as_array().into_iter().flatten() {
        let extra = r["reports"].as_u64().unwrap_or(0).saturating_sub(1);
        let name = r["name"].as_str().unwrap_or_default();
        let explained = reportable_at_restart.get(name).copied().unwrap_or(0);
        duplicates += extra.saturating_sub(explained);
    }
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
    let app_runs = fs::read_to_string(&runs_log).map_or(0, |t| t.lines().count()) as u64;
    let runs_per_result = app_runs as f64 / jobs as f64;
    println!("soak: app runs {app_runs} for {jobs} results: {runs_per_result:.3} per result");
    println!(
        "soak: kills {kills}, jobs {jobs}, reported {}, duplicates {duplicates}, losses {losses}, \
         reports repeated after a lost acknowledgement {}, \
         kill phase {kill_phase:.1?}, total {elapsed:.1?}, uploads {}, lost results {} \
         (resent {}, reissued {}), unknown reports {}, seed {seed:#x}",
        reported(&s),
        repeated - duplicates,
        s["uploads_received"],
        s["lost_results"],
        s["results_resent"],
        s["lost_results_reissued"],
        s["unknown_reports"],
    );

    // Evidence for any job reported more often than lost acknowledgements explain: what each
    // ferrited run said of it.
    for r in &results {
        let name = r["name"].as_str().unwrap_or_default();
        let explained = reportable_at_restart.get(name).copied().unwrap_or(0);
        if r["reports"].as_u64().unwrap_or(0) > explained + 1 {
            println!(
                "soak: {name} reported {} times, {explained} restarts held it ready to report; \
                 the runs that mention it:",
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
    if kills != kills_budget {
        failures.push(format!(
            "only {kills} of {kills_budget} kills before every job was reported: \
             raise FERRITE_SOAK_JOBS"
        ));
    }
    if duplicates != 0 {
        failures.push(format!(
            "{duplicates} duplicate reports (beyond the {} repeated after a lost acknowledgement)",
            repeated - duplicates
        ));
    }
    if reported(&s) != jobs || results.len() as u64 != jobs {
        failures.push(format!("{} of {jobs} jobs reported", reported(&s)));
    }
    if app_runs < jobs {
        failures.push(format!(
            "{app_runs} app runs counted for {jobs} results: every result needs a run, so the \
             runs file is not being written"
        ));
    }
    if runs_per_result > 1.05 {
        failures.push(format!(
            "{app_runs} app runs for {jobs} results ({runs_per_result:.3} per result, at most 1.05)"
        ));
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

    if ferrite_e2e::peer_or_skip(
        "ferrited_killed_at_random_moments_still_reports_every_job_exactly_once \
         (the official client loads the final state)",
        &["boinc", "boinccmd"],
    ) {
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

/// A daemon killed between starting an app and recording it leaves the app running with no
/// record of it. The next daemon must end it before it hands the slot to another task: here a
/// stray app keeps writing the other app's text into `slots/0/out`, and the job that gets
/// slot 0 must still upload its own output (the 200-kill soak once uploaded an `alpha` job
/// with `beta`'s output this way).
#[test]
fn an_app_left_running_without_a_record_is_ended_before_its_slot_is_reused() {
    use std::os::unix::process::CommandExt as _;

    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start_apps(
        tmp.path(),
        &[ShellApp {
            name: "alpha",
            word: "hello",
            prelude: "sleep 0.5\n",
        }],
        &["--jobs", "1"],
    );
    let dir = client_dir(tmp.path(), "");
    let slot = dir.join("slots").join("0");
    fs::create_dir_all(&slot).expect("slot");
    let mut stray = std::process::Command::new("sh")
        .args([
            "-c",
            "while :; do echo 'goodbye world' > out 2>/dev/null; sleep 0.05; done",
        ])
        .current_dir(&slot)
        .process_group(0)
        .spawn()
        .expect("the stray app");

    let client = start_client(&dir, free_port(), Some(&server.url));
    let s = server.wait_until(&client, Duration::from_secs(60), "the job reported", |s| {
        s["results_reported"].as_u64() == Some(1)
    });
    let gone = stray.try_wait().expect("wait");
    if gone.is_none() {
        let _ = stray.kill();
    }
    let _ = stray.wait();
    let name = s["results"][0]["name"]
        .as_str()
        .expect("a result")
        .to_owned();
    let out = fs::read_to_string(
        server
            .data
            .join("results")
            .join(&name)
            .join(format!("{name}_out")),
    )
    .unwrap_or_default();
    let log = client.output();
    assert_eq!(out, "hello world\n", "{name}'s uploaded output\n{log}");
    assert!(gone.is_some(), "the stray app still ran\n{log}");
    assert!(
        log.contains("an unrecorded app in slot 0"),
        "the log says which app was ended\n{log}"
    );
}
