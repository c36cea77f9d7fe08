//! The short-task run shared by the `tasks` and `footprint_vs_official` benches: 32 short
//! tasks of the real BOINC-API test app (`crates/ferrite-supervise/tests/apps/test_app.cpp`,
//! built with g++ against Debian's libboinc-app-dev), four at a time (`cc_config.xml`
//! `<ncpus>4</ncpus>`), run by the `ferrited` binary on a fresh data directory with one
//! project and network activity off.
// Each bench that includes this module reads only some of its figures.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Tasks, and how many run at once.
pub const TASKS: usize = 32;
pub const NCPUS: usize = 4;
/// Each task sleeps `STEPS` steps of `STEP_MS` milliseconds (checkpointing after each).
pub const STEPS: u32 = 20;
pub const STEP_MS: u32 = 100;
/// What a data directory holds: `tasks` tasks of the test app with `command_line`, `ncpus`
/// of them at a time.
#[derive(Debug, Clone, Copy)]
struct Plan {
    tasks: usize,
    ncpus: usize,
    command_line: &'static str,
}

/// The short tasks.
const SHORT: Plan = Plan {
    tasks: TASKS,
    ncpus: NCPUS,
    command_line: "--step-ms 100",
};

/// 1,000 tasks whose apps never end (sleeping steps of a second, no checkpoints), two at a
/// time: a client computing with a full queue.
const BUSY: Plan = Plan {
    tasks: 1000,
    ncpus: 2,
    command_line: "--forever --step-ms 1000",
};

/// Give up after this long.
const TIMEOUT: Duration = Duration::from_secs(300);

const URL: &str = "http://127.0.0.1:18080/";
const PROJECT_DIR: &str = "projects/127.0.0.1_18080";
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/data_dir/02_tasks_running"
);
const APP_SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../ferrite-supervise/tests/apps/test_app.cpp"
);

/// The directory holding `boinc_api.h`, found through `dpkg -L libboinc-app-dev`.
fn boinc_include_dir() -> PathBuf {
    let listed = Command::new("dpkg")
        .args(["-L", "libboinc-app-dev"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut headers: Vec<&str> = listed
        .lines()
        .filter(|l| l.ends_with("/boinc_api.h"))
        .collect();
    headers.sort_by_key(|l| l.len());
    headers
        .first()
        .and_then(|h| Path::new(h).parent())
        .map_or_else(|| PathBuf::from("/usr/include/boinc"), Path::to_path_buf)
}

/// Builds the C++ test app (as the supervisor's tests do) and returns its path.
pub fn build_test_app() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ferrite-daemon-bench-apps");
    fs::create_dir_all(&dir).expect("app dir");
    let out = dir.join("test_app");
    let tmp = dir.join(format!("test_app.{}", std::process::id()));
    let status = Command::new("g++")
        .arg("-O1")
        .arg("-I")
        .arg(boinc_include_dir())
        .arg("-o")
        .arg(&tmp)
        .arg(APP_SOURCE)
        .args(["-lboinc_api", "-lboinc", "-lpthread"])
        .status()
        .expect("g++ must be installed (with libboinc-app-dev)");
    assert!(status.success(), "building the BOINC test app failed");
    fs::rename(&tmp, &out).expect("rename app");
    out
}

/// `client_state.xml`: the fixture's project, an app whose main program is the test app,
/// and `TASKS` workunits with one result each, all downloaded. Network activity is off
/// (`user_network_request` 3), so finished tasks wait for upload and nothing else runs.
fn client_state(now: f64, plan: Plan) -> String {
    let fixture =
        fs::read_to_string(Path::new(FIXTURE).join("client_state.xml")).expect("fixture state");
    let start = fixture.find("<project>").expect("fixture project");
    let end = fixture.find("</project>").expect("fixture project end") + "</project>".len();
    let project = &fixture[start..end];
    let mut s = String::from("<client_state>\n");
    s.push_str(project);
    s.push_str(
        "\n<app>\n    <name>test_app</name>\n    <user_friendly_name>Test App</user_friendly_name>\n\
         </app>\n<file>\n    <name>test_app</name>\n    <nbytes>0</nbytes>\n    <status>1</status>\n\
         \x20   <executable/>\n</file>\n",
    );
    for i in 0..plan.tasks {
        s.push_str(&format!(
            "<file>\n    <name>wu_{i}_in</name>\n    <nbytes>3</nbytes>\n    <status>1</status>\n</file>\n\
             <file>\n    <name>wu_{i}_0_out</name>\n    <max_nbytes>100000</max_nbytes>\n    <status>0</status>\n\
             \x20   <upload_url>{URL}cgi-bin/file_upload_handler</upload_url>\n</file>\n"
        ));
    }
    s.push_str(
        "<app_version>\n    <app_name>test_app</app_name>\n    <version_num>100</version_num>\n\
         \x20   <platform>x86_64-pc-linux-gnu</platform>\n    <avg_ncpus>1</avg_ncpus>\n\
         \x20   <flops>1000000000</flops>\n    <api_version>7.20.0</api_version>\n\
         \x20   <file_ref>\n        <file_name>test_app</file_name>\n        <main_program/>\n\
         \x20   </file_ref>\n</app_version>\n",
    );
    let deadline = now + 7.0 * 86400.0;
    let command_line = plan.command_line;
    for i in 0..plan.tasks {
        s.push_str(&format!(
            "<workunit>\n    <name>wu_{i}</name>\n    <app_name>test_app</app_name>\n\
             \x20   <version_num>100</version_num>\n    <rsc_fpops_est>2e9</rsc_fpops_est>\n\
             \x20   <rsc_fpops_bound>1e12</rsc_fpops_bound>\n    <rsc_memory_bound>1e8</rsc_memory_bound>\n\
             \x20   <rsc_disk_bound>1e8</rsc_disk_bound>\n    <command_line>{command_line}</command_line>\n\
             \x20   <file_ref>\n        <file_name>wu_{i}_in</file_name>\n        <open_name>in</open_name>\n\
             \x20   </file_ref>\n</workunit>\n\
             <result>\n    <name>wu_{i}_0</name>\n    <wu_name>wu_{i}</wu_name>\n    <state>2</state>\n\
             \x20   <platform>x86_64-pc-linux-gnu</platform>\n    <version_num>100</version_num>\n\
             \x20   <report_deadline>{deadline:.0}</report_deadline>\n    <received_time>{now:.0}</received_time>\n\
             \x20   <file_ref>\n        <file_name>wu_{i}_0_out</file_name>\n        <open_name>out</open_name>\n\
             \x20   </file_ref>\n</result>\n"
        ));
    }
    s.push_str(
        "<platform_name>x86_64-pc-linux-gnu</platform_name>\n\
         <core_client_major_version>7</core_client_major_version>\n\
         <core_client_minor_version>20</core_client_minor_version>\n\
         <core_client_release>5</core_client_release>\n\
         <user_run_request>2</user_run_request>\n<user_gpu_request>2</user_gpu_request>\n\
         <user_network_request>3</user_network_request>\n</client_state>\n",
    );
    s
}

/// A data directory with the state, the app and the inputs in place.
fn data_dir(app: &Path, plan: Plan) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path();
    let pdir = dir.join(PROJECT_DIR);
    fs::create_dir_all(&pdir).expect("project dir");
    fs::copy(app, pdir.join("test_app")).expect("install app");
    for i in 0..plan.tasks {
        fs::write(pdir.join(format!("wu_{i}_in")), format!("{STEPS}\n")).expect("input");
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    fs::write(dir.join("client_state.xml"), client_state(now, plan)).expect("state");
    fs::copy(
        Path::new(FIXTURE).join("account_127.0.0.1_18080.xml"),
        dir.join("account_127.0.0.1_18080.xml"),
    )
    .expect("account file");
    fs::write(dir.join("gui_rpc_auth.cfg"), "benchpw\n").expect("password");
    fs::write(
        dir.join("cc_config.xml"),
        format!(
            "<cc_config>\n<options>\n<ncpus>{}</ncpus>\n</options>\n</cc_config>\n",
            plan.ncpus
        ),
    )
    .expect("cc_config");
    // Nothing on the host may suspend computing while the bench runs.
    fs::write(
        dir.join("global_prefs_override.xml"),
        "<global_preferences>\n<run_if_user_active>1</run_if_user_active>\n\
         <suspend_cpu_usage>0</suspend_cpu_usage>\n<max_ncpus_pct>100</max_ncpus_pct>\n\
         <run_on_batteries>1</run_on_batteries>\n</global_preferences>\n",
    )
    .expect("prefs");
    d
}

/// CPU seconds (user + system, all threads) of process `pid`.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the command name (which ends with the last ')'): state is field 3, so
    // utime (14) and stime (15) are at indexes 11 and 12.
    let rest = &stat[stat.rfind(')').expect("stat format") + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().expect("utime") + f[12].parse::<f64>().expect("stime");
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks / hz
}

/// CPU seconds of process `pid`'s live threads, in nanoseconds' resolution
/// (`/proc/PID/task/*/schedstat`), for windows too short for clock ticks.
pub fn cpu_precise(pid: u32) -> f64 {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .sum::<f64>()
        / 1e9
}

/// A `/proc/PID/status` field in kB.
pub fn status_kb(pid: u32, field: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim_start_matches(':').split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("status field")
}

/// Results of the state file in each state (index = BOINC result state).
fn result_states(dir: &Path) -> [usize; 8] {
    let mut n = [0usize; 8];
    // The file is replaced by rename, so a read sees one complete generation.
    let Ok(s) = fs::read_to_string(dir.join("client_state.xml")) else {
        return n;
    };
    for block in s.split("<result>").skip(1) {
        let st = block
            .split("<state>")
            .nth(1)
            .and_then(|x| x.split('<').next())
            .and_then(|x| x.trim().parse::<usize>().ok())
            .unwrap_or(0);
        n[st.min(7)] += 1;
    }
    n
}

struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Daemon {
    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// What one run of the short tasks measured.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// Tasks that ended with outputs ready for upload, and computation errors.
    pub finished: usize,
    pub errors: usize,
    /// From launching `ferrited` until the first task started, and until all were done.
    pub first_start: Duration,
    pub wall: Duration,
    /// `ferrited`'s CPU seconds in all, and until its main loop ran.
    pub cpu: f64,
    pub startup_cpu: f64,
    /// `VmHWM` and `VmRSS` at the end, kB.
    pub hwm_kb: u64,
    pub rss_kb: u64,
    /// Where the wall time went, from the log.
    pub phases: Phases,
}

/// Medians of a task's phases as seen in the client's log (20 ms resolution): from its
/// start to its end (the app's start-up, its work, the BOINC API's `boinc_finish` wait, the
/// client's exit handling), and from a task's end to the start of the next one. For Ferrite,
/// which logs when a task is finishing (its app called `boinc_finish` and uses no CPU), also
/// from a task's start to that line (start-up, work, detection), from that line to its end
/// (the API's wait and the exit handling) and from that line to the start of the task that
/// takes its CPU.
#[derive(Debug, Clone, Copy, Default)]
pub struct Phases {
    pub run: Duration,
    pub gap: Duration,
    pub to_finishing: Option<Duration>,
    pub finish_wait: Option<Duration>,
    pub reuse: Option<Duration>,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// Task `i`'s successor on its CPU starts `starts[i + NCPUS]`: the median of those starts
/// after `marks[i]` (0 when it started before).
fn after(starts: &[Duration], marks: &[Duration]) -> Duration {
    median(
        (NCPUS..starts.len())
            .filter_map(|i| Some(starts[i].saturating_sub(*marks.get(i - NCPUS)?)))
            .collect(),
    )
}

/// The median of `to[i] - from[i]`.
fn between(from: &[Duration], to: &[Duration]) -> Duration {
    median(
        (0..from.len().min(to.len()))
            .map(|i| to[i].saturating_sub(from[i]))
            .collect(),
    )
}

impl Phases {
    fn of(starts: &[Duration], ends: &[Duration], finishing: &[Duration]) -> Phases {
        // Tasks start in waves of NCPUS: task i ends before task i + NCPUS starts.
        let seen = !finishing.is_empty();
        Phases {
            run: between(starts, ends),
            gap: after(starts, ends),
            to_finishing: seen.then(|| between(starts, finishing)),
            finish_wait: seen.then(|| between(finishing, ends)),
            reuse: seen.then(|| after(starts, finishing)),
        }
    }

    /// One line for the benches' output.
    pub fn describe(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut s = format!(
            "start to end {:.0} ms, an end to the next start {:.0} ms",
            ms(self.run),
            ms(self.gap)
        );
        if let (Some(a), Some(b), Some(c)) = (self.to_finishing, self.finish_wait, self.reuse) {
            s.push_str(&format!(
                "; start to 'finishing' {:.0} ms, 'finishing' to end {:.0} ms, 'finishing' to \
                 the next start {:.0} ms",
                ms(a),
                ms(b),
                ms(c)
            ));
        }
        s
    }
}

/// The wall time the tasks would take with no overhead at all.
pub fn ideal() -> Duration {
    Duration::from_millis(u64::from(STEPS * STEP_MS) * (TASKS / NCPUS) as u64)
}

/// The client that runs the tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runner<'a> {
    /// `ferrited` at this path.
    Ferrite(&'a str),
    /// The official client (`boinc` on the `PATH`).
    Official,
}

impl Runner<'_> {
    /// Log lines that mark the main loop's start, a task's start, a task's success and a
    /// task whose CPU is free because it only waits to exit.
    fn markers(
        self,
    ) -> (
        &'static str,
        &'static str,
        &'static str,
        Option<&'static str>,
    ) {
        match self {
            Runner::Ferrite(_) => (
                "entering main loop",
                "starting task",
                "finished; outputs ready for upload",
                Some("is finishing ("),
            ),
            Runner::Official => (
                "Initialization completed",
                "Starting task",
                "Computation for task",
                None,
            ),
        }
    }
}

/// Starts `runner` on data directory `dir` on a free loopback port, logging to
/// `dir/ferrited.log`.
fn spawn_client(runner: Runner<'_>, dir: &Path) -> Daemon {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let log = dir.join("ferrited.log");
    let file = fs::File::create(&log).expect("log file");
    let mut cmd = match runner {
        Runner::Ferrite(path) => Command::new(path),
        Runner::Official => {
            let mut c = Command::new("boinc");
            c.arg("--no_info_fetch").current_dir(dir);
            c
        }
    };
    let child = cmd
        .arg("--dir")
        .arg(dir)
        .args(["--gui_rpc_port", &port.to_string()])
        .args(["--skip_cpu_benchmarks", "--no_gpus"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::from(file.try_clone().expect("log file")))
        .stderr(Stdio::from(file))
        .spawn()
        .expect("start the client");
    Daemon { child, log }
}

/// The client's own CPU seconds (not its apps') over `window`, while it computes two tasks
/// of a queue of 1,000 whose apps never end, measured once both run and `settle` has passed.
pub fn busy_cpu(runner: Runner<'_>, app: &Path, settle: Duration, window: Duration) -> f64 {
    let (_, started, _, _) = runner.markers();
    let d = data_dir(app, BUSY);
    let daemon = spawn_client(runner, d.path());
    let pid = daemon.child.id();
    let wall = Instant::now();
    while daemon.log_text().matches(started).count() < BUSY.ncpus {
        assert!(
            wall.elapsed() < TIMEOUT,
            "the client started fewer than {} tasks; log:\n{}",
            BUSY.ncpus,
            daemon.log_text()
        );
        thread::sleep(Duration::from_millis(100));
    }
    thread::sleep(settle);
    let before = cpu_precise(pid);
    thread::sleep(window);
    let cpu = cpu_precise(pid) - before;
    stop_client(daemon);
    cpu
}

/// Asks the client to quit (SIGTERM, which also ends its apps) and waits up to 30 s.
fn stop_client(mut daemon: Daemon) {
    let pid = daemon.child.id();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        if let Ok(Some(_)) = daemon.child.try_wait() {
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Runs the tasks through `ferrited` (path) with the test app built by `build_test_app`.
pub fn run(ferrited: &str, app: &Path) -> Outcome {
    run_with(Runner::Ferrite(ferrited), app)
}

/// Runs the tasks through `runner` with the test app built by `build_test_app`.
pub fn run_with(runner: Runner<'_>, app: &Path) -> Outcome {
    let (main_loop, started, succeeded, finishing) = runner.markers();
    let d = data_dir(app, SHORT);
    let dir = d.path();
    let wall = Instant::now();
    let mut daemon = spawn_client(runner, dir);
    let pid = daemon.child.id();

    // Start-up cost: until the main loop runs.
    let mut startup_cpu = None;
    let mut first_start = None;
    let mut done = 0;
    // Each task's start and end as first seen in the log (read every 20 ms).
    let mut starts: Vec<Duration> = Vec::new();
    let mut ends: Vec<Duration> = Vec::new();
    let mut finishes: Vec<Duration> = Vec::new();
    while wall.elapsed() < TIMEOUT {
        if let Ok(Some(status)) = daemon.child.try_wait() {
            panic!("the client exited ({status}):\n{}", daemon.log_text());
        }
        let text = daemon.log_text();
        let seen = wall.elapsed();
        let (s, e) = (
            text.matches(started).count(),
            text.matches(succeeded).count(),
        );
        starts.resize(s.max(starts.len()), seen);
        ends.resize(e.max(ends.len()), seen);
        let f = finishing.map_or(0, |m| text.matches(m).count());
        finishes.resize(f.max(finishes.len()), seen);
        if startup_cpu.is_none() && text.contains(main_loop) {
            startup_cpu = Some(cpu_seconds(pid));
        }
        if first_start.is_none() && text.contains(started) {
            first_start = Some(wall.elapsed());
        }
        // The log says when a task ends; the state file (saved at most once a second) also
        // counts the tasks that failed.
        let states = result_states(dir);
        done = states[3..]
            .iter()
            .sum::<usize>()
            .max(text.matches(succeeded).count());
        if done >= TASKS {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let elapsed = wall.elapsed();
    let cpu = cpu_seconds(pid);
    let hwm_kb = status_kb(pid, "VmHWM");
    let rss_kb = status_kb(pid, "VmRSS");
    let text = daemon.log_text();
    assert!(
        done >= TASKS,
        "only {done} of {TASKS} tasks done after {TIMEOUT:?}; log:\n{text}"
    );
    let finished = text.matches(succeeded).count();
    // FERRITE_BENCH_LOG=PATH keeps the client's log of the run at PATH (`ferrited`'s), or at
    // PATH.official (the official client's); the last run of each.
    if let Some(keep) = std::env::var_os("FERRITE_BENCH_LOG") {
        let mut keep = PathBuf::from(keep).into_os_string();
        if runner == Runner::Official {
            keep.push(".official");
        }
        let _ = fs::write(keep, &text);
    }
    let errors = result_states(dir)[3];
    stop_client(daemon);
    Outcome {
        phases: Phases::of(&starts, &ends, &finishes),
        finished,
        errors,
        first_start: first_start.unwrap_or_default(),
        wall: elapsed,
        cpu,
        startup_cpu: startup_cpu.unwrap_or(0.0),
        hwm_kb,
        rss_kb,
    }
}
