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
//! Run: `cargo bench -p ferrite-daemon --bench scale` (all three sizes), or with
//! `FERRITE_SCALE_TASKS=1000,10000` for the sizes given.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::time::{Duration, Instant};

use ferrite_daemon::cli::Options;
use ferrite_daemon::snapshot::{build_world, IdMap, SnapshotInputs};
use ferrite_daemon::{logging, Daemon};
use ferrite_gui_rpc::Request;
use ferrite_project::existence::{check_files, OnDisk};
use ferrite_project::reply::{apply_reply, ApplyOptions};
use ferrite_project::verify::BoincCrypt;
use ferrite_proto::client_state::{synthetic, ClientState};
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
    for n in sizes() {
        measure(n, &log);
        println!();
    }
}

fn measure(n: usize, log: &logging::LogHandle) {
    let state = synthetic(1, n);
    let xml = state.to_xml();

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
}
