//! Ferrite's footprint against the official client (Debian's `boinc`), side by side in one
//! run, each client on its own temporary data directory and loopback GUI RPC port. Every
//! round measures, for `ferrited` and for `boinc`:
//!
//! - start: from launch until the GUI RPC answers an authorised call, 1,000 tasks loaded,
//!   on a data directory new to the client, then again after it quit through GUI RPC
//!   (with what it wrote there, such as Ferrite's record of verified app files);
//! - RSS (`VmRSS`) and CPU (utime + stime) over an idle window (`FERRITE_BENCH_IDLE_SECS`,
//!   default 60) of a client with no project, and of a client holding 20 projects / 1,000
//!   tasks with computing and network suspended (run modes `never`); the four clients idle
//!   at the same time, so noise from the rest of the machine falls on all of them alike;
//! - RSS with GPU detection on (no `--no_gpus`) on a host with Debian's PoCL, fresh and
//!   with 1,000 tasks (`common/with_gpus.rs`; part `opencl`);
//! - the median time of 50 calls of `get_state`, `get_results`, `get_file_transfers` and
//!   `get_messages` (1,000 tasks), then the RSS right after that burst and 3 s later;
//!
//! and against another reference:
//!
//! - a download (`FERRITE_BENCH_DL_SIZE`, default 200M) from `ferrite-testproject` on
//!   127.0.0.1 by `ferrite_net::HttpClient` with MD5 verification, in a child process that
//!   runs a current-thread runtime as `ferrited` does, against `curl -s -o FILE`, and
//!   against `curl` followed by `md5sum FILE` (a verified download by other means); and that
//!   child's peak RSS (`VmHWM`, the goal is absolute);
//! - each client's own CPU over the idle window while it computes: 1,000 tasks of the
//!   BOINC-API test app queued, two running apps that never end (sleeping steps of a second),
//!   both clients at once (part of `tasks`);
//! - 32 tasks of 2 s of the BOINC-API test app, 4 at a time, through `ferrited` (as the
//!   `tasks` bench), against the ideal wall time (app work only), and the same tasks through
//!   the official client, side by side.
//!
//! It prints one row per figure: Ferrite's and the reference's medians and the ratio's
//! min/median/max over the rounds (`FERRITE_BENCH_ROUNDS`, default 3), with the goal.
//!
//! `FERRITE_BENCH_ONLY` (a comma-separated list of `clients`, `opencl`, `download`, `tasks`) runs only
//! those parts; `FERRITE_BENCH_ONLY=clients FERRITE_BENCH_ROUNDS=1 FERRITE_BENCH_IDLE_SECS=1`
//! measures the GUI RPC figures and memory in about 20 s. `FERRITE_BENCH_FERRITED=PATH`
//! measures that `ferrited` instead of the one built with the bench (a release build, with
//! the bench itself built in the quicker dev profile: `cargo bench --profile dev`). `FERRITE_BENCH_WRITE_DIR=DIR` only
//! writes the 1,000-task data directory (state, accounts, files; GUI RPC password `benchpw`)
//! to DIR, for running a client on it by hand (`perf`, `heaptrack`).
//!
//! The 1,000-task state is `synthetic(20, 1000)` with one task in ten still downloading its
//! inputs, and every file it says is present created (sparse) in the data directory, so both
//! clients list the same downloads in `get_file_transfers`.
//!
//! Run: `cargo bench -p ferrite-daemon --bench footprint_vs_official` (needs `boinc`, `curl`,
//! `g++` and `libboinc-app-dev`; `.ci/run` installs them). A quick run:
//! `FERRITE_BENCH_ROUNDS=1 FERRITE_BENCH_IDLE_SECS=10 cargo bench -p ferrite-daemon --bench
//! footprint_vs_official`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/row.rs"]
mod row;
#[path = "common/short_tasks.rs"]
mod short_tasks;
#[path = "common/with_gpus.rs"]
mod with_gpus;

use std::fs;
use std::io::{BufRead as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser as _;
use ferrite_gui_rpc::request::RunMode;
use ferrite_gui_rpc::{GuiRpcClient, Request};
use ferrite_net::{CancellationToken, DownloadTarget, ExpectedFile, HttpClient, HttpConfig};
use ferrite_proto::account::escape_project_url;
use ferrite_proto::client_state::{
    synthetic, synthetic_account, ClientState, ResultState, RunMode as StateMode,
};
use row::{median, Row};

const PASSWORD: &str = "benchpw";
const CALLS: usize = 50;
const SERVE_ENV: &str = "FERRITE_FOOTPRINT_SERVE";
const DOWNLOAD_ENV: &str = "FERRITE_FOOTPRINT_DOWNLOAD";
/// Only write the clients' 1,000-task data directory here and exit (for profiling by hand).
const WRITE_DIR_ENV: &str = "FERRITE_BENCH_WRITE_DIR";

fn env_num(name: &str, default: u64) -> u64 {
    let Ok(v) = std::env::var(name) else {
        return default;
    };
    let v = v.trim();
    let (digits, mult) = match v.chars().last() {
        Some('K' | 'k') => (&v[..v.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&v[..v.len() - 1], 1 << 20),
        Some('G' | 'g') => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    digits.parse::<u64>().map_or(default, |n| n * mult)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Kills the child when dropped; keeps its data directory alive as long as it runs.
struct Client {
    child: Child,
    port: u16,
    dir: Option<tempfile::TempDir>,
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Client {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Who {
    Ferrite,
    Official,
}

/// The bench's client state: 20 projects, 1,000 tasks, one in ten finished and ready to
/// report, one in ten still downloading its input files (none of them on disk yet, so each
/// client lists the same downloads in `get_file_transfers`, whatever its network mode), the
/// others late.
fn bench_state() -> ClientState {
    let mut state = synthetic(20, 1000);
    // The network suspended from the start (no client fetches anything). The tasks'
    // deadlines have passed, so both clients abort the tasks not started, each with a line
    // in the event log (a long `get_messages`), except those still downloading, due a month
    // ahead.
    state.user_network_request = StateMode::Never;
    let deadline = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(2e9, |d| d.as_secs_f64())
        + 30.0 * 86_400.0;
    // The files in the data directory are sparse (zeros): the programs' checksums say so,
    // as a client may check them at start-up.
    let mut zeros_md5 = std::collections::HashMap::new();
    for ps in &mut state.projects {
        for f in ps.files.iter_mut().filter(|f| f.executable) {
            f.md5_cksum = zeros_md5
                .entry(f.nbytes as usize)
                .or_insert_with_key(|n| ferrite_proto::crypt::md5_hex(&vec![0u8; *n]))
                .clone();
        }
        let downloading: Vec<String> = ps
            .results
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| i % 10 == 5)
            .map(|(_, r)| {
                r.state = ResultState::FilesDownloading;
                r.report_deadline = deadline.floor();
                r.wu_name.clone()
            })
            .collect();
        for wu in &downloading {
            let inputs: Vec<String> = ps
                .workunit(wu)
                .map(|w| w.input_files.iter().map(|f| f.file_name.clone()).collect())
                .unwrap_or_default();
            for name in inputs {
                if let Some(f) = ps.file_mut(&name) {
                    f.status = 0;
                }
            }
        }
    }
    state
}

/// Writes a data directory for `state` into `dir`: the GUI RPC password, the state, an
/// account file per project and every file the state says is present (sparse, of its size:
/// the clients check that the files they were told of exist, and fetch the missing ones).
fn write_data_dir(dir: &Path, state: Option<(&str, &ClientState)>) {
    fs::write(dir.join("gui_rpc_auth.cfg"), PASSWORD).expect("password");
    let Some((xml, state)) = state else {
        return;
    };
    fs::write(dir.join("client_state.xml"), xml).expect("state");
    for ps in &state.projects {
        let url = &ps.project.master_url;
        let (name, acct) = synthetic_account(url);
        fs::write(dir.join(name), acct).expect("account");
        let pdir = dir.join("projects").join(escape_project_url(url));
        fs::create_dir_all(&pdir).expect("project dir");
        for f in ps.files.iter().filter(|f| f.status == 1) {
            let file = fs::File::create(pdir.join(&f.name)).expect("file");
            file.set_len(f.nbytes as u64).expect("file size");
        }
    }
}

/// A data directory with the GUI RPC password and, when `state` is given, that state (see
/// [`write_data_dir`]).
fn data_dir(state: Option<(&str, &ClientState)>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write_data_dir(dir.path(), state);
    dir
}

/// The `ferrited` measured: `FERRITE_BENCH_FERRITED` when set (a release build measured by a
/// bench built quickly in another profile), else the one built with this bench.
fn ferrited() -> String {
    std::env::var("FERRITE_BENCH_FERRITED")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_ferrited").to_owned())
}

fn launch(who: Who, dir: tempfile::TempDir) -> Client {
    launch_with(who, dir, false)
}

/// [`launch`], with GPU detection on when `gpus` (else `--no_gpus`).
fn launch_with(who: Who, dir: tempfile::TempDir, gpus: bool) -> Client {
    let port = free_port();
    let mut cmd = match who {
        Who::Ferrite => Command::new(ferrited()),
        Who::Official => {
            let mut c = Command::new("boinc");
            c.arg("--no_info_fetch");
            c
        }
    };
    cmd.arg("--dir")
        .arg(dir.path())
        .args(["--gui_rpc_port", &port.to_string()])
        .arg("--skip_cpu_benchmarks")
        .args((!gpus).then_some("--no_gpus"))
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn().expect("start the client");
    Client {
        child,
        port,
        dir: Some(dir),
    }
}

/// Asks a client to quit through GUI RPC and waits (at most 60 s) for it to exit; returns
/// its data directory.
fn quit(mut c: Client, conn: &mut GuiRpcClient, rt: &tokio::runtime::Runtime) -> tempfile::TempDir {
    let _ = rt.block_on(conn.call(&Request::Quit));
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.child.try_wait().ok().flatten().is_none() {
        assert!(Instant::now() < deadline, "the client did not quit");
        std::thread::sleep(Duration::from_millis(10));
    }
    c.dir.take().expect("data directory")
}

/// Connects and authorises, retrying every 5 ms while the client starts (at most 60 s).
async fn connect(port: u16) -> GuiRpcClient {
    let start = Instant::now();
    loop {
        if let Ok(mut c) = GuiRpcClient::connect_tcp(("127.0.0.1", port)).await {
            c.set_timeout(Duration::from_secs(60));
            if c.authorize(PASSWORD).await.is_ok() {
                return c;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no GUI RPC on port {port}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Sets computing and network to `never` (each client, the same way).
async fn suspend_all(c: &mut GuiRpcClient) {
    for r in [
        Request::SetRunMode {
            mode: RunMode::Never,
            duration: 0.0,
            at_checkpoint: false,
        },
        Request::SetNetworkMode {
            mode: RunMode::Never,
            duration: 0.0,
        },
    ] {
        let reply = c.call(&r).await.expect("set mode");
        assert!(reply.contains("success"), "set mode: {reply}");
    }
}

/// Median time of `CALLS` calls of `r` on one connection (after one unmeasured call), and
/// the reply's size.
async fn median_call(c: &mut GuiRpcClient, r: &Request, must_hold: &str) -> (f64, usize) {
    let first = c.call(r).await.expect("call");
    assert!(
        first.contains(must_hold),
        "reply without {must_hold}: {}",
        &first[..first.len().min(300)]
    );
    // The timed calls read the reply's bytes as they come (no check that they are text, no
    // copy of the body out of the envelope): the figure is the client's time to answer.
    let wire = format!(
        "<boinc_gui_rpc_request>\n{}</boinc_gui_rpc_request>\n\u{3}",
        r.to_xml()
    );
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        let reply = c.exchange_bytes(wire.as_bytes()).await.expect("call");
        times.push(t.elapsed().as_secs_f64());
        std::hint::black_box(reply.len());
    }
    (median(&mut times), first.len())
}

/// What the resident memory of `pid` is: anonymous (heap, stacks), the program's own file
/// pages (its code and read-only data), shared libraries' pages; kB, from `/proc/PID/smaps`.
fn rss_parts(pid: u32) -> String {
    let exe = fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    let Ok(smaps) = fs::read_to_string(format!("/proc/{pid}/smaps")) else {
        return String::new();
    };
    let (mut anon, mut own, mut libs) = (0u64, 0u64, 0u64);
    let mut path = String::new();
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        let first = f.next().unwrap_or_default();
        if first.contains('-') && !first.ends_with(':') {
            path = line
                .split_whitespace()
                .nth(5)
                .unwrap_or_default()
                .to_owned();
        } else if first == "Rss:" {
            let kb: u64 = f.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            if path.is_empty() || path.starts_with('[') {
                anon += kb;
            } else if Path::new(&path) == exe {
                own += kb;
            } else {
                libs += kb;
            }
        }
    }
    format!(
        "anon {:.1} MB, own code {:.1} MB, libraries {:.1} MB",
        anon as f64 / 1024.0,
        own as f64 / 1024.0,
        libs as f64 / 1024.0
    )
}

/// `VmRSS` of `pid` in kB.
fn status_kb(pid: u32) -> f64 {
    short_tasks::status_kb(pid, "VmRSS") as f64
}

struct Rows {
    start: Row,
    restart: Row,
    rss_idle: Row,
    rss_burst: Row,
    rss_tasks: Row,
    rss_idle_pocl: Row,
    rss_tasks_pocl: Row,
    cpu_idle: Row,
    cpu_tasks: Row,
    cpu_busy: Row,
    get_state: Row,
    get_results: Row,
    get_transfers: Row,
    get_messages: Row,
    download: Row,
    download_md5sum: Row,
    download_rss: Row,
    short_tasks: Row,
    short_tasks_official: Row,
    /// The last round's reply sizes, Ferrite / official.
    reply_bytes: Vec<String>,
    /// The last round's short-task phases.
    phases: String,
    /// The last round's resident memory, by kind.
    rss_notes: Vec<String>,
}

/// The clients' part of a round: start, idle, GUI RPC burst.
fn clients_round(rows: &mut Rows, xml: &str, state: &ClientState, idle: Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // Start-up with 1,000 tasks, one client at a time, on a data directory new to the
    // client (again after it quit at the end of the round).
    let mut loaded = Vec::new();
    let mut starts = Vec::new();
    for who in [Who::Ferrite, Who::Official] {
        let dir = data_dir(Some((xml, state)));
        let t = Instant::now();
        let c = launch(who, dir);
        let mut conn = rt.block_on(connect(c.port));
        starts.push(t.elapsed().as_secs_f64());
        rt.block_on(suspend_all(&mut conn));
        loaded.push((c, conn, who));
    }
    rows.start.push(starts[0], starts[1]);
    let empty: Vec<Client> = [Who::Ferrite, Who::Official]
        .into_iter()
        .map(|who| {
            let c = launch(who, data_dir(None));
            drop(rt.block_on(connect(c.port)));
            c
        })
        .collect();
    // Let start-up work (state files, host detection) end before the idle window.
    std::thread::sleep(Duration::from_secs(5));
    let cpu0: Vec<f64> = empty
        .iter()
        .chain(loaded.iter().map(|(c, _, _)| c))
        .map(|c| short_tasks::cpu_precise(c.pid()))
        .collect();
    std::thread::sleep(idle);
    let cpu: Vec<f64> = empty
        .iter()
        .chain(loaded.iter().map(|(c, _, _)| c))
        .zip(&cpu0)
        .map(|(c, before)| short_tasks::cpu_precise(c.pid()) - before)
        .collect();
    rows.cpu_idle.push(cpu[0], cpu[1]);
    rows.cpu_tasks.push(cpu[2], cpu[3]);
    rows.rss_idle
        .push(status_kb(empty[0].pid()), status_kb(empty[1].pid()));
    rows.rss_notes = vec![
        format!("no project: Ferrite {}", rss_parts(empty[0].pid())),
        format!("no project: official {}", rss_parts(empty[1].pid())),
    ];
    drop(empty);

    let mut times = Vec::new();
    for (_, conn, _) in &mut loaded {
        times.push(rt.block_on(async {
            [
                median_call(conn, &Request::GetState, "<client_state>").await,
                median_call(
                    conn,
                    &Request::GetResults { active_only: false },
                    "<results>",
                )
                .await,
                median_call(conn, &Request::GetFileTransfers, "<file_transfers").await,
                median_call(
                    conn,
                    &Request::GetMessages {
                        seqno: 0,
                        translatable: false,
                    },
                    "<msgs>",
                )
                .await,
            ]
        }));
    }
    rows.get_state.push(times[0][0].0, times[1][0].0);
    rows.get_results.push(times[0][1].0, times[1][1].0);
    rows.get_transfers.push(times[0][2].0, times[1][2].0);
    rows.get_messages.push(times[0][3].0, times[1][3].0);
    rows.reply_bytes = [
        "get_state",
        "get_results",
        "get_file_transfers",
        "get_messages",
    ]
    .iter()
    .enumerate()
    .map(|(i, name)| format!("{name} {} / {}", times[0][i].1, times[1][i].1))
    .collect();
    rows.rss_burst
        .push(status_kb(loaded[0].0.pid()), status_kb(loaded[1].0.pid()));
    std::thread::sleep(Duration::from_secs(3));
    rows.rss_tasks
        .push(status_kb(loaded[0].0.pid()), status_kb(loaded[1].0.pid()));
    rows.rss_notes.push(format!(
        "1,000 tasks: Ferrite {}",
        rss_parts(loaded[0].0.pid())
    ));
    rows.rss_notes.push(format!(
        "1,000 tasks: official {}",
        rss_parts(loaded[1].0.pid())
    ));
    // Start-up again on the same data directory, after the client quit.
    let mut restarts = Vec::new();
    for (c, mut conn, who) in loaded {
        let dir = quit(c, &mut conn, &rt);
        let t = Instant::now();
        let c = launch(who, dir);
        drop(rt.block_on(connect(c.port)));
        restarts.push(t.elapsed().as_secs_f64());
    }
    rows.restart.push(restarts[0], restarts[1]);
}

/// Child mode: serve `ferrite-testproject` on DATA until stdin closes.
fn serve(data: &str) {
    let args = ferrite_testproject::Args::parse_from(["ferrite-testproject", "--data", data]);
    let server = ferrite_testproject::Server::start(args).expect("server");
    println!("{}", server.url());
    std::io::stdout().flush().expect("stdout");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// Child mode: `URL DEST SIZE MD5`: download with MD5 verification on a current-thread
/// runtime, with ferrited's allocator settings; prints the seconds it took and this process's `VmHWM` in kB.
fn download(spec: &str) {
    // The allocator as ferrited sets it up.
    ferrite_daemon::memory::configure_allocator();
    let mut it = spec.split('\t');
    let (url, dest, size, md5) = (
        it.next().expect("url").to_owned(),
        PathBuf::from(it.next().expect("dest")),
        it.next().expect("size").parse::<u64>().expect("size"),
        it.next().expect("md5").to_owned(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = HttpClient::new(HttpConfig::new("BOINC client (x86_64-pc-linux-gnu 7.20.5)"))
        .expect("client");
    let target = DownloadTarget {
        partial: dest.with_extension("part"),
        dest: dest.clone(),
    };
    let expected = ExpectedFile {
        nbytes: Some(size),
        md5: Some(md5),
        max_nbytes: None,
        gzip: false,
        gzipped_nbytes: None,
    };
    let t = Instant::now();
    let outcome = rt
        .block_on(client.download(
            std::slice::from_ref(&url),
            &target,
            &expected,
            &|_| {},
            &CancellationToken::new(),
        ))
        .expect("download");
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(outcome.nbytes, size);
    println!(
        "{secs} {}",
        short_tasks::status_kb(std::process::id(), "VmHWM")
    );
}

/// A patterned file of `size` bytes; returns its MD5 (from `md5sum`).
fn make_file(path: &Path, size: u64) -> String {
    let mut f = std::io::BufWriter::new(fs::File::create(path).expect("file"));
    let mut block: Vec<u8> = (0..1u32 << 20).map(|i| (i * 31 + i / 977) as u8).collect();
    let (mut left, mut i) = (size, 0u64);
    while left > 0 {
        block[..8].copy_from_slice(&i.to_le_bytes());
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n]).expect("write");
        left -= n as u64;
        i += 1;
    }
    f.flush().expect("flush");
    let out = Command::new("md5sum").arg(path).output().expect("md5sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("md5sum output")
        .to_owned()
}

struct DownloadBench {
    dir: tempfile::TempDir,
    server: Child,
    url: String,
    size: u64,
    md5: String,
}

impl Drop for DownloadBench {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

impl DownloadBench {
    fn start(size: u64) -> DownloadBench {
        let base = Some(PathBuf::from("/dev/shm"))
            .filter(|p| p.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix("ferrite-footprint")
            .tempdir_in(base)
            .expect("tempdir");
        let data = dir.path().join("data");
        fs::create_dir_all(data.join("download")).expect("download dir");
        let md5 = make_file(&data.join("download").join("big_in"), size);
        let mut server = Command::new(std::env::current_exe().expect("own path"))
            .env(SERVE_ENV, &data)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("server");
        let mut url = String::new();
        std::io::BufReader::new(server.stdout.take().expect("server stdout"))
            .read_line(&mut url)
            .expect("server url");
        DownloadBench {
            url: format!("{}download/big_in", url.trim()),
            dir,
            server,
            size,
            md5,
        }
    }

    /// Ferrite's seconds and peak RSS (kB), then curl's seconds, then the seconds of curl
    /// followed by `md5sum` of what it wrote.
    fn round(&self) -> (f64, f64, f64, f64) {
        let out = self.dir.path().join("out");
        let _ = fs::remove_file(&out);
        let o = Command::new(std::env::current_exe().expect("own path"))
            .env(
                DOWNLOAD_ENV,
                format!(
                    "{}\t{}\t{}\t{}",
                    self.url,
                    out.display(),
                    self.size,
                    self.md5
                ),
            )
            .stderr(Stdio::inherit())
            .output()
            .expect("download child");
        assert!(o.status.success(), "download child failed");
        let text = String::from_utf8_lossy(&o.stdout);
        let mut f = text.split_whitespace();
        let secs: f64 = f.next().and_then(|v| v.parse().ok()).expect("seconds");
        let hwm: f64 = f.next().and_then(|v| v.parse().ok()).expect("VmHWM");
        fs::remove_file(&out).expect("downloaded file");
        let t = Instant::now();
        let ok = Command::new("curl")
            .args(["-s", "--fail", "-o"])
            .arg(&out)
            .arg(&self.url)
            .status()
            .is_ok_and(|s| s.success());
        let curl = t.elapsed().as_secs_f64();
        assert!(ok, "curl failed");
        let _ = fs::remove_file(&out);
        let t = Instant::now();
        let hashed = Command::new("sh")
            .args([
                "-c",
                "curl -s --fail -o \"$1\" \"$2\" && md5sum \"$1\"",
                "sh",
            ])
            .arg(&out)
            .arg(&self.url)
            .output()
            .expect("curl and md5sum");
        let curl_md5 = t.elapsed().as_secs_f64();
        assert!(
            hashed.status.success()
                && String::from_utf8_lossy(&hashed.stdout).starts_with(&self.md5),
            "curl then md5sum failed"
        );
        let _ = fs::remove_file(&out);
        (secs, hwm, curl, curl_md5)
    }
}

fn has(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn main() {
    if let Ok(data) = std::env::var(SERVE_ENV) {
        serve(&data);
        return;
    }
    if let Ok(spec) = std::env::var(DOWNLOAD_ENV) {
        download(&spec);
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    for p in ["boinc", "curl", "g++"] {
        if !has(p) {
            println!("footprint_vs_official: `{p}` is not installed; nothing measured");
            return;
        }
    }
    let rounds = env_num("FERRITE_BENCH_ROUNDS", 3).max(1);
    let idle = Duration::from_secs(env_num("FERRITE_BENCH_IDLE_SECS", 60));
    let dl_size = env_num("FERRITE_BENCH_DL_SIZE", 200 << 20);
    let state = bench_state();
    let xml = state.to_xml();
    if let Ok(dir) = std::env::var(WRITE_DIR_ENV) {
        fs::create_dir_all(&dir).expect("data dir");
        write_data_dir(Path::new(&dir), Some((&xml, &state)));
        println!("wrote the 1,000-task data directory (password {PASSWORD}) to {dir}");
        return;
    }
    let only = std::env::var("FERRITE_BENCH_ONLY").unwrap_or_default();
    let part = |name: &str| only.is_empty() || only.split(',').any(|p| p == name);
    let app = part("tasks").then(short_tasks::build_test_app);
    let dl = part("download").then(|| {
        let dl = DownloadBench::start(dl_size);
        let _ = dl.round(); // warm-up: page cache, server, binaries
        dl
    });

    let idle_s = idle.as_secs();
    let mut rows = Rows {
        start: Row::new("start until GUI RPC answers, 1,000 tasks", "ms", 1e3, None),
        restart: Row::new(
            "the same after the client quit (its own files kept)",
            "ms",
            1e3,
            None,
        ),
        rss_idle: Row::new(
            "RSS after idle window, no project",
            "MB",
            1.0 / 1024.0,
            Some(0.33),
        ),
        rss_burst: Row::new(
            "RSS, 1,000 tasks, right after the GUI RPC burst",
            "MB",
            1.0 / 1024.0,
            Some(0.25),
        ),
        rss_tasks: Row::new(
            "RSS, 1,000 tasks, 3 s after the GUI RPC burst",
            "MB",
            1.0 / 1024.0,
            Some(0.25),
        ),
        rss_idle_pocl: Row::new(
            "RSS, GPU detection on, PoCL installed, no project",
            "MB",
            1.0 / 1024.0,
            Some(0.33),
        ),
        rss_tasks_pocl: Row::new(
            "RSS, GPU detection on, PoCL installed, 1,000 tasks",
            "MB",
            1.0 / 1024.0,
            Some(0.25),
        ),
        cpu_idle: Row::new("CPU over idle window, no project", "ms", 1e3, Some(1.0)),
        cpu_tasks: Row::new(
            "CPU over idle window, 1,000 tasks, computing suspended",
            "ms",
            1e3,
            Some(1.0),
        ),
        cpu_busy: Row::new(
            "CPU over idle window, 1,000 tasks, 2 apps computing",
            "ms",
            1e3,
            Some(1.0),
        ),
        get_state: Row::new(
            "get_state, 1,000 tasks (median call)",
            "ms",
            1e3,
            Some(0.33),
        ),
        get_results: Row::new(
            "get_results, 1,000 tasks (median call)",
            "ms",
            1e3,
            Some(0.33),
        ),
        get_transfers: Row::new(
            "get_file_transfers, 1,000 tasks (median call)",
            "ms",
            1e3,
            Some(0.33),
        ),
        get_messages: Row::new("get_messages seqno 0 (median call)", "ms", 1e3, Some(0.33)),
        download: Row::new(
            "download + MD5 (ferrite-net) vs curl -o, loopback",
            "s",
            1.0,
            Some(1.25),
        ),
        download_md5sum: Row::new(
            "the same vs curl -o, then md5sum of the file",
            "s",
            1.0,
            None,
        ),
        download_rss: Row {
            absolute: true,
            ..Row::new(
                "download peak RSS (VmHWM of the downloading process)",
                "MiB",
                1.0 / 1024.0,
                Some(16.0 * 1024.0),
            )
        },
        short_tasks: Row::new(
            "32 tasks of 2 s, 4 at a time: wall vs ideal",
            "s",
            1.0,
            Some(1.2),
        ),
        short_tasks_official: Row::new(
            "32 tasks of 2 s, 4 at a time: wall vs official client",
            "s",
            1.0,
            Some(1.0),
        ),
        reply_bytes: Vec::new(),
        phases: String::new(),
        rss_notes: Vec::new(),
    };
    for round in 1..=rounds {
        if part("clients") {
            eprintln!("round {round}/{rounds}: clients ({idle_s} s idle window)");
            clients_round(&mut rows, &xml, &state, idle);
        }
        if part("opencl") {
            if with_gpus::pocl_installed() {
                eprintln!("round {round}/{rounds}: GPU detection on, PoCL installed");
                with_gpus::round(
                    &mut rows.rss_idle_pocl,
                    &mut rows.rss_tasks_pocl,
                    &xml,
                    &state,
                    Duration::from_secs(5),
                );
            } else {
                eprintln!(
                    "PoCL is not installed ({}): no rows with it",
                    with_gpus::POCL_ICD
                );
            }
        }
        if let Some(dl) = &dl {
            eprintln!("round {round}/{rounds}: download");
            let (secs, hwm, curl, curl_md5) = dl.round();
            rows.download.push(secs, curl);
            rows.download_md5sum.push(secs, curl_md5);
            rows.download_rss.push(hwm, 0.0);
        }
        let Some(app) = &app else {
            continue;
        };
        eprintln!("round {round}/{rounds}: computing, 1,000 tasks");
        // Both clients at once, so noise from the rest of the machine falls on both alike.
        let settle = Duration::from_secs(5);
        let (ferrite, official) = std::thread::scope(|scope| {
            let f = scope.spawn(|| {
                short_tasks::busy_cpu(short_tasks::Runner::Ferrite(&ferrited()), app, settle, idle)
            });
            let o = short_tasks::busy_cpu(short_tasks::Runner::Official, app, settle, idle);
            (f.join().expect("Ferrite's run"), o)
        });
        rows.cpu_busy.push(ferrite, official);
        eprintln!("round {round}/{rounds}: short tasks");
        let o = short_tasks::run(&ferrited(), app);
        rows.short_tasks
            .push(o.wall.as_secs_f64(), short_tasks::ideal().as_secs_f64());
        let official = short_tasks::run_with(short_tasks::Runner::Official, app);
        rows.short_tasks_official
            .push(o.wall.as_secs_f64(), official.wall.as_secs_f64());
        rows.phases = format!(
            "short tasks, medians from the logs: Ferrite: {}\nshort tasks, medians from the \
             logs: official: {}",
            o.phases.describe(),
            official.phases.describe()
        );
    }
    let version = Command::new("boinc")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    println!(
        "Ferrite vs the official client {version}, {rounds} round(s), idle window {idle_s} s, \
         download {} MiB, {} cores",
        dl_size >> 20,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<58} {:>14} {:>14} {:>24}   goal (ratio median)",
        "figure", "Ferrite", "reference", "ratio min / med / max"
    );
    for row in [
        &rows.start,
        &rows.restart,
        &rows.rss_idle,
        &rows.rss_burst,
        &rows.rss_tasks,
        &rows.rss_idle_pocl,
        &rows.rss_tasks_pocl,
        &rows.cpu_idle,
        &rows.cpu_tasks,
        &rows.cpu_busy,
        &rows.get_state,
        &rows.get_results,
        &rows.get_transfers,
        &rows.get_messages,
        &rows.download,
        &rows.download_md5sum,
        &rows.download_rss,
        &rows.short_tasks,
        &rows.short_tasks_official,
    ] {
        row.print();
    }
    println!(
        "reply bytes, Ferrite / official: {}",
        rows.reply_bytes.join(", ")
    );
    println!("{}", rows.phases);
    for n in &rows.rss_notes {
        println!("RSS, {n}");
    }
    println!(
        "reference: the official client, except curl -o (then md5sum, in the row that says \
         so) for the download and the ideal wall time for the short tasks (8 waves of 2 s of app work; the BOINC API's boinc_finish \
         adds a 2 s wait of its own to every task, which no client can shorten; Ferrite starts \
         the next task during it, so only the last wave's wait adds to the wall time)"
    );
}
