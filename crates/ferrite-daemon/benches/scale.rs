//! How the work per task grows with the number of tasks: each figure below is measured for
//! generated states and replies of 1,000, 10,000 and 100,000 tasks (one project; the store
//! bench's generator), and printed as milliseconds and as microseconds per task. With every
//! lookup by name going through an index the per-task figure stays flat; a scan per task
//! makes it grow tenfold with each row.
//! - load: `client_state.xml` parsed into the state;
//! - check: the start-up file check's decisions (`existence::check_files`, every file
//!   present with its size: nothing is read);
//! - reply: a scheduler reply with as many new tasks (a workunit, an input and an output file
//!   each) parsed and applied to that state (`apply_reply`);
//! - pass: the per-pass work on the state after the reply: the snapshot for the scheduling
//!   core (`snapshot::build_world`) and the results moved on after file changes
//!   (`transfers::update_results`);
//! - ready: `Daemon::start` on a data directory holding the state file (the project's files
//!   absent, so the check decides to fetch them all again);
//! - get_state: the GUI RPC `get_state` reply of that daemon.
//!
//! Then, per size, the table beside the official client: `ferrited` (this build's binary)
//! and, where Debian's `boinc` is installed, the official client, each started on its own
//! copy of the generated data directory (own loopback GUI RPC port; run modes `never` in the
//! state, so nothing runs or downloads), measured from outside:
//! - start: from launch until the GUI RPC answers an authorised call; the official client is
//!   waited for at most `FERRITE_SCALE_OFFICIAL_WAIT` seconds (default 300; ">300 s" then);
//! - get_state, get_results: the median of 3 calls (after one unmeasured);
//! - RSS: the peak resident memory (`VmHWM`) after those calls;
//! - apply and pass: Ferrite's in-process figures above ("reply", "pass").
//!
//! Run: `cargo bench -p ferrite-daemon --bench scale` (1,000, 10,000 and 100,000 tasks), or
//! with `FERRITE_SCALE_TASKS=1000,10000,100000,150000` for the sizes given;
//! `FERRITE_SCALE_OFFICIAL=0` leaves the official client out;
//! `FERRITE_SCALE_WRITE_DIR=DIR` only writes each size's data directory to `DIR/<tasks>`
//! (GUI RPC password `scalepw`), to run a client on it by hand under `perf`.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrite_daemon::cli::Options;
use ferrite_daemon::snapshot::{build_world, IdMap, SnapshotInputs};
use ferrite_daemon::{logging, Daemon};
use ferrite_gui_rpc::{GuiRpcClient, Request};
use ferrite_project::existence::{check_files, OnDisk};
use ferrite_project::reply::{apply_reply, ApplyOptions};
use ferrite_project::verify::BoincCrypt;
use ferrite_proto::client_state::{synthetic, synthetic_account, ClientState, RunMode};
use ferrite_proto::prefs::GlobalPrefs;
use ferrite_proto::sched_reply::SchedulerReply;

/// A scheduler reply from the generated project with `n` new tasks: per task an input file,
/// a workunit, an output file and a result, in the official layout.
fn reply_text(url: &str, app: &str, n: usize) -> String {
    let mut s = String::with_capacity(n * 900);
    s.push_str("<scheduler_reply>\n<scheduler_version>800</scheduler_version>\n");
    s.push_str("<request_delay>7</request_delay>\n");
    for t in 0..n {
        let wu = format!("new_wu_{t:08}");
        s.push_str(&format!(
            "<file_info>\n    <name>{wu}_in</name>\n    <url>{url}download/{wu}_in</url>\n    \
             <md5_cksum>{t:032x}</md5_cksum>\n    <nbytes>36</nbytes>\n</file_info>\n\
             <workunit>\n    <rsc_fpops_est>3600000000000</rsc_fpops_est>\n    \
             <name>{wu}</name>\n    <app_name>{app}</app_name>\n<file_ref>\n    \
             <file_name>{wu}_in</file_name>\n    <open_name>in</open_name>\n</file_ref>\n\
             </workunit>\n\
             <file_info>\n    <name>{wu}_0_out</name>\n    <url>{url}upload</url>\n    \
             <max_nbytes>100000</max_nbytes>\n</file_info>\n\
             <result>\n<report_deadline>1795937839</report_deadline>\n<wu_name>{wu}</wu_name>\n\
             <name>{wu}_0</name>\n<file_ref>\n    <file_name>{wu}_0_out</file_name>\n    \
             <open_name>out</open_name>\n</file_ref>\n<platform>x86_64-pc-linux-gnu</platform>\n\
             <version_num>100</version_num>\n<plan_class></plan_class>\n</result>\n"
        ));
    }
    s.push_str("</scheduler_reply>\n");
    s
}

fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed())
}

fn row(what: &str, n: usize, d: Duration) {
    let ms = d.as_secs_f64() * 1e3;
    let per = d.as_secs_f64() * 1e6 / n as f64;
    println!("{n:>8} tasks  {what:<10} {ms:10.1} ms  {per:8.2} us/task");
}

fn sizes() -> Vec<usize> {
    match std::env::var("FERRITE_SCALE_TASKS") {
        Ok(v) => v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => vec![1_000, 10_000, 100_000],
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let log = logging::init();
    log.set("error");
    let official = std::env::var("FERRITE_SCALE_OFFICIAL").map_or(true, |v| v != "0")
        && Command::new("boinc")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
    let wait = Duration::from_secs(
        std::env::var("FERRITE_SCALE_OFFICIAL_WAIT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(300),
    );
    if let Some(out) = std::env::var_os("FERRITE_SCALE_WRITE_DIR") {
        for n in sizes() {
            let (xml, urls) = state_xml(n);
            let dir = Path::new(&out).join(n.to_string());
            write_dir(&dir, &xml, &urls);
            println!("{n} tasks: {} (GUI RPC password {PASSWORD})", dir.display());
        }
        return;
    }
    let mut table = Vec::new();
    for n in sizes() {
        let (xml, urls, apply, pass) = measure(n, &log);
        let ferrite = outside(Who::Ferrite, &xml, &urls, Duration::from_secs(300));
        table.push(format!(
            "| {n} | Ferrite | {} | {:.0} ms | {:.0} ms | {} | {} | {} |",
            ferrite.start,
            apply.as_secs_f64() * 1e3,
            pass.as_secs_f64() * 1e3,
            ferrite.get_state,
            ferrite.get_results,
            ferrite.rss
        ));
        if official {
            let o = outside(Who::Official, &xml, &urls, wait);
            table.push(format!(
                "| {n} | official | {} | | | {} | {} | {} |",
                o.start, o.get_state, o.get_results, o.rss
            ));
        }
        println!();
    }
    println!("| tasks | client | start | apply | pass | get_state | get_results | peak RSS |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for line in table {
        println!("{line}");
    }
}

const PASSWORD: &str = "scalepw";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Who {
    Ferrite,
    Official,
}

/// One client's figures measured from outside, as table cells.
struct Outside {
    start: String,
    get_state: String,
    get_results: String,
    rss: String,
}

/// Kills the client when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// `Vm*` field `field` of `pid`'s status, in kB.
fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim_start_matches(':').split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn ms(d: Duration) -> String {
    if d >= Duration::from_secs(10) {
        format!("{:.0} s", d.as_secs_f64())
    } else {
        format!("{:.0} ms", d.as_secs_f64() * 1e3)
    }
}

/// Writes a data directory holding the state `xml` of `projects`, with the GUI RPC password
/// and an account file per project.
fn write_dir(dir: &Path, xml: &str, projects: &[String]) {
    std::fs::create_dir_all(dir).expect("data directory");
    std::fs::write(dir.join("client_state.xml"), xml).expect("state file");
    std::fs::write(dir.join("gui_rpc_auth.cfg"), PASSWORD).expect("password");
    // An account file per project: the official client drops a project without one (and
    // with it every task).
    for url in projects {
        let (name, acct) = synthetic_account(url);
        std::fs::write(dir.join(name), acct).expect("account");
    }
}

/// Starts `who` on a data directory of its own holding `xml`, and measures it (see the
/// module's text); a client not answering within `wait` is cut short.
fn outside(who: Who, xml: &str, projects: &[String], wait: Duration) -> Outside {
    let dir = tempfile::tempdir().expect("tempdir");
    write_dir(dir.path(), xml, projects);
    let port = free_port();
    let mut cmd = match who {
        Who::Ferrite => Command::new(env!("CARGO_BIN_EXE_ferrited")),
        Who::Official => {
            let mut c = Command::new("boinc");
            c.arg("--no_info_fetch");
            c
        }
    };
    cmd.arg("--dir")
        .arg(dir.path())
        .args(["--gui_rpc_port", &port.to_string()])
        .args(["--skip_cpu_benchmarks", "--no_gpus"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // The client dies with the bench, even one killed before its `Running` is dropped.
    // SAFETY: `prctl` is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let launched = Instant::now();
    let child = Running(cmd.spawn().expect("start the client"));
    let pid = child.0.id();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let conn = rt.block_on(async {
        loop {
            if let Ok(mut c) = GuiRpcClient::connect_tcp(("127.0.0.1", port)).await {
                c.set_timeout(wait);
                if c.authorize(PASSWORD).await.is_ok() {
                    return Some(c);
                }
            }
            if launched.elapsed() > wait {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let started = launched.elapsed();
    let Some(mut conn) = conn else {
        return Outside {
            start: format!(">{} s", wait.as_secs()),
            get_state: "-".into(),
            get_results: "-".into(),
            rss: format!(
                "{:.0} MB (not ready)",
                status_kb(pid, "VmHWM") as f64 / 1024.0
            ),
        };
    };
    let mut median = |r: &Request| {
        let mut times: Vec<Duration> = (0..4)
            .map(|_| {
                let t = Instant::now();
                let reply = rt.block_on(conn.call(r)).expect("call");
                black_box(reply.len());
                t.elapsed()
            })
            .skip(1)
            .collect();
        times.sort();
        ms(times[times.len() / 2])
    };
    let get_state = median(&Request::GetState);
    let get_results = median(&Request::GetResults { active_only: false });
    let rss = format!("{:.0} MB", status_kb(pid, "VmHWM") as f64 / 1024.0);
    drop(child);
    Outside {
        start: ms(started),
        get_state,
        get_results,
        rss,
    }
}

/// The generated state of `n` tasks as the state file's text, and its projects' URLs.
fn state_xml(n: usize) -> (String, Vec<String>) {
    let mut state = synthetic(1, n);
    // Nothing runs or downloads in the clients started on it.
    state.user_run_request = RunMode::Never;
    state.user_network_request = RunMode::Never;
    let urls = state
        .projects
        .iter()
        .map(|p| p.project.master_url.clone())
        .collect();
    (state.to_xml(), urls)
}

/// The in-process figures for `n` tasks; returns the state's text, its projects' URLs and
/// the apply and pass times.
fn measure(n: usize, log: &logging::LogHandle) -> (String, Vec<String>, Duration, Duration) {
    let (xml, urls) = state_xml(n);

    let (loaded, d) = time(|| {
        ClientState::parse(black_box(&xml), "client_state.xml")
            .expect("state parses")
            .value
    });
    row("load", n, d);

    let mut checked = loaded.clone();
    let (_, d) = time(|| {
        for ps in &mut checked.projects {
            let sizes: HashMap<String, u64> = ps
                .files
                .iter()
                .map(|f| (f.name.clone(), f.nbytes as u64))
                .collect();
            let mut look = |name: &str, _md5: bool| match sizes.get(name) {
                Some(len) => OnDisk::Present {
                    len: *len,
                    md5: None,
                },
                None => OnDisk::Missing,
            };
            black_box(check_files(ps, &mut look, true, 1.7e9));
        }
    });
    row("check", n, d);

    let url = loaded.projects[0].project.master_url.clone();
    let app = loaded.projects[0].apps[0].name.clone();
    let text = reply_text(&url, &app, n);
    let mut applied = loaded;
    let (_, d) = time(|| {
        let reply = SchedulerReply::parse(&text, "reply")
            .expect("reply parses")
            .value;
        let opts = ApplyOptions {
            unsigned_apps_ok: true,
            ..ApplyOptions::default()
        };
        let out =
            apply_reply(&mut applied, &url, &reply, 1.7e9, &opts, &BoincCrypt).expect("applied");
        assert_eq!(out.tasks_added.values().sum::<u32>() as usize, n);
    });
    row("reply", n, d);
    let apply = d;

    let prefs = GlobalPrefs::default();
    let app_configs = BTreeMap::new();
    let no_rsc = BTreeMap::new();
    let not_before = HashMap::new();
    let inputs = SnapshotInputs {
        prefs: &prefs,
        cc_ncpus: 0,
        user_active: false,
        gpu_suspended: false,
        app_configs: &app_configs,
        exclude_gpus: &[],
        no_rsc_prefs: &no_rsc,
        not_before: &not_before,
        now: 1.7e9,
    };
    let mut ids = IdMap::default();
    let (_, d) = time(|| {
        let world = build_world(&applied, &mut ids, &inputs, &|_, _| None);
        black_box(world);
        for ps in &mut applied.projects {
            black_box(ferrite_daemon::transfers::update_results(ps, 1.7e9));
        }
    });
    row("pass", 2 * n, d);
    let pass = d;

    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("client_state.xml"), &xml).expect("state file");
    std::fs::write(dir.path().join("gui_rpc_auth.cfg"), "pw\n").expect("password file");
    let opts = Options {
        dir: Some(dir.path().to_path_buf()),
        skip_cpu_benchmarks: true,
        no_gpus: true,
        ..Options::default()
    };
    let (daemon, d) = time(|| Daemon::start(opts, log.clone()).expect("daemon"));
    row("ready", n, d);
    let mut daemon = daemon;
    let (bytes, d) = time(|| daemon.gui_rpc_reply(Request::GetState).len());
    row("get_state", n, d);
    black_box(bytes);
    (xml, urls, apply, pass)
}
