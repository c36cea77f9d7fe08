//! Ferrite's CPU benchmarks beside the official BOINC client's on this machine.
//!
//! Each round runs Ferrite's benchmarks (`run_benchmarks`, as `ferrited` does) and the
//! official client's (`boinc` from `$PATH` on a fresh temporary data dir, a free loopback GUI
//! RPC port, `boinccmd --run_benchmarks`, then `boinccmd --quit`; the figures are read from
//! its `client_state.xml`), alternating which goes first, and prints both figures and the
//! ratios Ferrite/official; at the end, the median ratios. Without `boinc` and `boinccmd`
//! it prints Ferrite's figures and says why the comparison was skipped.
//!
//! `cargo bench -p ferrite-hostinfo --bench cpu_vs_official [-- --rounds N --secs S --cpus C]`
//! (defaults: 3 rounds, Ferrite given 8 s as `ferrited` gives it, every CPU; the official
//! client always takes about 32 s). The official client discards its benchmarks when one of
//! its processes gets under 2 s of CPU time in a 10 s phase; on a busy shared machine,
//! `--cpus 1` (both programs benchmark one CPU; the figures are per CPU either way) gives
//! its one process the CPU time it needs.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrite_proto::client_state::ClientState;

/// The GUI RPC password written into the official client's data dir.
const RPC_PASSWORD: &str = "ferrite-bench";

/// How long the official client may take to answer its first GUI RPC.
const RPC_START_LIMIT: Duration = Duration::from_secs(30);
/// How long its benchmarks may take (they take about 32 s).
const BENCH_LIMIT: Duration = Duration::from_secs(150);
/// How long after the benchmarks end it may take to write their figures to its state file.
const STATE_WRITE_LIMIT: Duration = Duration::from_secs(20);

/// Figures of one run: (p_fpops, p_iops) per CPU.
type Figures = (f64, f64);

fn main() {
    let mut rounds = 3usize;
    let mut secs = 8.0f64;
    let mut cpus: Option<u32> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => rounds = args.next().and_then(|v| v.parse().ok()).unwrap_or(rounds),
            "--secs" => secs = args.next().and_then(|v| v.parse().ok()).unwrap_or(secs),
            "--cpus" => cpus = args.next().and_then(|v| v.parse().ok()),
            _ => {} // cargo bench passes `--bench`
        }
    }
    let all_cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let ncpus = cpus.unwrap_or(all_cpus).clamp(1, all_cpus);
    // The official client's share of the CPUs, as a preference.
    let ncpus_pct = f64::from(ncpus) * 100.0 / f64::from(all_cpus);
    let official = match (find_in_path("boinc"), find_in_path("boinccmd")) {
        (Some(b), Some(c)) => Some((b, c)),
        _ => {
            println!(
                "official client: skipped (`boinc` and `boinccmd` not both in PATH; Debian: \
                 apt-get install boinc-client); printing Ferrite's figures only"
            );
            None
        }
    };
    println!(
        "benchmarking {ncpus} of {all_cpus} CPUs, {rounds} rounds, Ferrite given {secs} s per run"
    );

    let mut fp_ratios = Vec::new();
    let mut int_ratios = Vec::new();
    for round in 1..=rounds {
        let ferrite_first = round % 2 == 1;
        let mut theirs: Option<Figures> = None;
        if !ferrite_first {
            theirs = official
                .as_ref()
                .and_then(|(b, c)| run_official_logged(b, c, ncpus_pct));
        }
        let t = Instant::now();
        let r = ferrite_hostinfo::run_benchmarks(ncpus, Duration::from_secs_f64(secs));
        let ours = (r.p_fpops, r.p_iops);
        println!(
            "round {round}: Ferrite  p_fpops {:.4e} p_iops {:.4e} ({:.1} s, CPU share {:.2})",
            ours.0,
            ours.1,
            t.elapsed().as_secs_f64(),
            r.cpu_share
        );
        if ferrite_first {
            theirs = official
                .as_ref()
                .and_then(|(b, c)| run_official_logged(b, c, ncpus_pct));
        }
        if let Some(theirs) = theirs {
            let fp = ours.0 / theirs.0;
            let int = ours.1 / theirs.1;
            println!(
                "round {round}: official p_fpops {:.4e} p_iops {:.4e}; Ferrite/official: \
                 p_fpops {fp:.3}, p_iops {int:.3}",
                theirs.0, theirs.1
            );
            fp_ratios.push(fp);
            int_ratios.push(int);
        }
    }
    if !fp_ratios.is_empty() {
        println!(
            "median Ferrite/official over {} rounds: p_fpops {:.3} (runs {}), p_iops {:.3} (runs {})",
            fp_ratios.len(),
            median(&fp_ratios),
            list(&fp_ratios),
            median(&int_ratios),
            list(&int_ratios)
        );
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn list(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.3}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn run_official_logged(boinc: &Path, boinccmd: &Path, ncpus_pct: f64) -> Option<Figures> {
    let t = Instant::now();
    match run_official(boinc, boinccmd, ncpus_pct) {
        Ok(f) => {
            println!(
                "official client benchmarks took {:.1} s",
                t.elapsed().as_secs_f64()
            );
            Some(f)
        }
        Err(e) => {
            println!("official client: failed: {e}");
            None
        }
    }
}

/// The official client, stopped (killed if need be) when dropped.
struct Client(Child);

impl Drop for Client {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// A free TCP port on loopback (bound, then released for the client to take).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Runs the official client's benchmarks once on a fresh data dir, on `ncpus_pct` per cent
/// of the CPUs, and returns its figures.
fn run_official(boinc: &Path, boinccmd: &Path, ncpus_pct: f64) -> Result<Figures, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("temporary dir: {e}"))?;
    let d = dir.path();
    // Compute whatever the load (the default suspends computing, and with it the
    // benchmarks, when other programs use over 25% of the CPU).
    std::fs::write(
        d.join("global_prefs_override.xml"),
        format!(
            "<global_preferences>\n<run_on_batteries>1</run_on_batteries>\n\
             <run_if_user_active>1</run_if_user_active>\n\
             <suspend_cpu_usage>0</suspend_cpu_usage>\n<cpu_usage_limit>100</cpu_usage_limit>\n\
             <max_ncpus_pct>{ncpus_pct}</max_ncpus_pct>\n</global_preferences>\n"
        ),
    )
    .map_err(|e| format!("writing prefs: {e}"))?;
    std::fs::write(d.join("gui_rpc_auth.cfg"), RPC_PASSWORD)
        .map_err(|e| format!("writing gui_rpc_auth.cfg: {e}"))?;
    let port = free_port().map_err(|e| format!("free port: {e}"))?;
    let log = std::fs::File::create(d.join("stdout.txt")).map_err(|e| format!("log: {e}"))?;
    let err_log = log.try_clone().map_err(|e| format!("log: {e}"))?;
    let child = Command::new(boinc)
        .arg("--dir")
        .arg(d)
        .args(["--gui_rpc_port", &port.to_string()])
        .args(["--no_gpus", "--no_info_fetch", "--allow_multiple_clients"])
        .current_dir(d)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err_log)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", boinc.display()))?;
    let mut client = Client(child);
    let host = format!("127.0.0.1:{port}");
    let cmd = |op: &str| {
        Command::new(boinccmd)
            .args(["--host", &host, "--passwd", RPC_PASSWORD, op])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };

    let start = Instant::now();
    while !cmd("--run_benchmarks") {
        if start.elapsed() > RPC_START_LIMIT {
            return Err("no GUI RPC answer".into());
        }
        if let Ok(Some(s)) = client.0.try_wait() {
            return Err(format!("client exited: {s}"));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    // Wait for the benchmarks to end, then for the state file to carry their figures.
    let start = Instant::now();
    let mut ended: Option<Instant> = None;
    let figures = loop {
        if ended.is_none() {
            let mut text = String::new();
            if let Ok(mut f) = std::fs::File::open(d.join("stdout.txt")) {
                let _ = f.read_to_string(&mut text);
            }
            // It prints the results, or resumes computing without them (a benchmark process
            // that got under 2 s of CPU time in a 10 s phase makes it discard them).
            let after_start = text
                .find("Running CPU benchmarks")
                .map_or("", |i| &text[i..]);
            if after_start.contains("integer MIPS (Dhrystone)")
                || after_start.contains("Resuming computation")
            {
                ended = Some(Instant::now());
            }
        }
        if ended.is_some() {
            if let Some(f) = state_figures(d) {
                break f;
            }
        }
        if ended.is_some_and(|t| t.elapsed() > STATE_WRITE_LIMIT) {
            return Err(
                "it kept the default figures (1e9): a benchmark process got under 2 s of CPU \
                 time in a 10 s phase (the machine is too busy; try --cpus 1)"
                    .into(),
            );
        }
        if start.elapsed() > BENCH_LIMIT {
            return Err("benchmarks did not finish".into());
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let _ = cmd("--quit");
    let start = Instant::now();
    while !matches!(client.0.try_wait(), Ok(Some(_))) && start.elapsed() < RPC_START_LIMIT {
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(figures)
}

/// The benchmark figures in the client's `client_state.xml`, once they are not the defaults.
fn state_figures(dir: &Path) -> Option<Figures> {
    let text = std::fs::read_to_string(dir.join("client_state.xml")).ok()?;
    let h = ClientState::parse(&text, "client_state.xml")
        .ok()?
        .value
        .host_info;
    (h.p_fpops != 1e9 || h.p_iops != 1e9).then_some((h.p_fpops, h.p_iops))
}
