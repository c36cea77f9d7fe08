//! Download throughput over loopback, Ferrite against curl in the same run on the same file.
//!
//! `ferrite-testproject` serves one file (1 GiB by default) on 127.0.0.1 from a child
//! process (so the server's CPU time is not counted as Ferrite's). After one unmeasured
//! warm-up run of (a) and (b), each round runs, in a rotating order so that noise from the
//! rest of the machine falls on all of them alike:
//!
//! - (a) `HttpClient::download`: written to a file and MD5-verified (what the daemon does);
//! - (b) `curl -s -o FILE`: written to a file, not verified;
//! - (c) `curl -s -o FILE && md5sum FILE`: what a client that verifies would cost with curl;
//! - (ref) `curl -s -o /dev/null`: the loopback and server ceiling, for reference only.
//!
//! All files (served file and outputs) are in one directory: a fresh temporary directory
//! under `FERRITE_BENCH_DIR`, default `/dev/shm` (tmpfs, so disk write-back of earlier
//! rounds does not slow later ones) when it exists, else the system temporary directory.
//! Prints MB/s (10⁶ bytes per second), CPU seconds per GB (Ferrite: `getrusage` of this
//! process, which only hosts the client while downloading; curl and md5sum: `getrusage`
//! of the waited children; the server: its `/proc` counters), the ratios (a)/(b) and (a)/(c)
//! per round and of the best figures, and MD5 alone as the ceiling of a verifying download.
//!
//! Environment: `FERRITE_BENCH_SIZE` (bytes, with an optional K/M/G binary suffix; default
//! 1G), `FERRITE_BENCH_ROUNDS` (default 3), `FERRITE_BENCH_SECS` (no further round starts
//! when, at the pace of the last one, it would end later than this many seconds after the
//! first; default 120), `FERRITE_BENCH_DIR`. Run with
//! `cargo bench -p ferrite-net --bench download`; quick run:
//! `FERRITE_BENCH_SIZE=128M cargo bench -p ferrite-net --bench download`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser as _;
use ferrite_net::{CancellationToken, DownloadTarget, ExpectedFile, HttpClient, HttpConfig};
use md5::{Digest as _, Md5};

const CHILD_ENV: &str = "FERRITE_NET_BENCH_SERVER_DATA";

/// CPU seconds (user + system) and minor page faults of this process
/// (`RUSAGE_SELF`) or of its waited-for children (`RUSAGE_CHILDREN`).
fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid `who` and a valid pointer.
    unsafe { libc::getrusage(who, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(u.ru_utime) + t(u.ru_stime), u.ru_minflt as f64)
}

/// CPU seconds of another process, from `/proc/PID/stat` (0 when unreadable).
fn proc_cpu(pid: u32) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start at the state, field 3;
    // utime and stime are fields 14 and 15.
    let Some(rest) = s.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / hz.max(1.0)
}

fn env_size(name: &str, default: u64) -> u64 {
    let Ok(v) = std::env::var(name) else {
        return default;
    };
    let v = v.trim();
    let (num, mul) = match v.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&v[..v.len() - 1], 1u64 << 10),
        Some('M') => (&v[..v.len() - 1], 1 << 20),
        Some('G') => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .map(|n| n * mul)
        .filter(|n| *n > 0)
        .unwrap_or_else(|| panic!("{name}={v}: expected a size such as 1G, 256M or 1000000"))
}

/// MB/s of one core hashing 256 MiB in memory with `hash`.
fn md5_speed(hash: fn(&[u8], u32) -> [u8; 16]) -> f64 {
    let block: Vec<u8> = (0..1u32 << 20).map(|i| (i * 31 + i / 977) as u8).collect();
    let began = Instant::now();
    std::hint::black_box(hash(&block, 256));
    (256u64 << 20) as f64 / 1e6 / began.elapsed().as_secs_f64()
}

fn md5_crate(block: &[u8], times: u32) -> [u8; 16] {
    let mut h = Md5::new();
    for _ in 0..times {
        h.update(block);
    }
    h.finalize().into()
}

fn md5_ferrite(block: &[u8], times: u32) -> [u8; 16] {
    let mut h = ferrite_net::fast_md5::Md5::new();
    for _ in 0..times {
        h.update(block);
    }
    h.finalize()
}

/// Child mode: serve the project until stdin closes.
fn serve(data: &str) {
    let args = ferrite_testproject::Args::parse_from(["ferrite-testproject", "--data", data]);
    let server = ferrite_testproject::Server::start(args).expect("server");
    println!("{}", server.url());
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// Writes a patterned file of `size` bytes (1 MiB blocks, each stamped with its index);
/// returns its MD5.
fn make_file(path: &Path, size: u64) -> String {
    let mut hasher = Md5::new();
    let mut f = std::fs::File::create(path).unwrap();
    let mut block: Vec<u8> = (0..1u32 << 20).map(|i| (i * 31 + i / 977) as u8).collect();
    let mut left = size;
    let mut i = 0u64;
    while left > 0 {
        block[..8].copy_from_slice(&i.to_le_bytes());
        let n = left.min(block.len() as u64) as usize;
        hasher.update(&block[..n]);
        f.write_all(&block[..n]).unwrap();
        left -= n as u64;
        i += 1;
    }
    hex::encode(hasher.finalize())
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Method {
    Ferrite,
    CurlFile,
    CurlMd5sum,
    CurlNull,
}

impl Method {
    fn label(self) -> &'static str {
        match self {
            Method::Ferrite => "(a) ferrite-net download + MD5",
            Method::CurlFile => "(b) curl -o FILE",
            Method::CurlMd5sum => "(c) curl -o FILE && md5sum",
            Method::CurlNull => "(ref) curl -o /dev/null",
        }
    }
}

/// One timed run.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// MB/s.
    rate: f64,
    /// CPU seconds of the client (Ferrite, or curl plus md5sum) per GB.
    cpu_per_gb: f64,
    /// CPU seconds of the server per GB.
    server_per_gb: f64,
    /// Minor page faults of the client per GB (fresh memory costs CPU, more so in a VM).
    faults_per_gb: f64,
}

struct Bench {
    dir: PathBuf,
    url: String,
    size: u64,
    md5: String,
    server_pid: u32,
    rt: tokio::runtime::Runtime,
    client: HttpClient,
}

impl Bench {
    fn out(&self) -> PathBuf {
        self.dir.join("out")
    }

    fn curl(&self, out: &Path) {
        let ok = Command::new("curl")
            .args(["-s", "--fail", "-o"])
            .arg(out)
            .arg(&self.url)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "curl failed");
    }

    fn run(&self, m: Method) -> Run {
        let out = self.out();
        let _ = std::fs::remove_file(&out);
        let target = DownloadTarget {
            partial: self.dir.join("out.part"),
            dest: out.clone(),
        };
        let _ = std::fs::remove_file(&target.partial);
        let expected = ExpectedFile {
            nbytes: Some(self.size),
            md5: Some(self.md5.clone()),
            max_nbytes: None,
            gzip: false,
            gzipped_nbytes: None,
        };
        let (self0, kids0, server0) = (
            rusage(libc::RUSAGE_SELF),
            rusage(libc::RUSAGE_CHILDREN),
            proc_cpu(self.server_pid),
        );
        let began = Instant::now();
        match m {
            Method::Ferrite => {
                let outcome = self
                    .rt
                    .block_on(self.client.download(
                        std::slice::from_ref(&self.url),
                        &target,
                        &expected,
                        &|_| {},
                        &CancellationToken::new(),
                    ))
                    .expect("download");
                assert_eq!(outcome.nbytes, self.size);
            }
            Method::CurlFile => self.curl(&out),
            Method::CurlMd5sum => {
                self.curl(&out);
                let o = Command::new("md5sum").arg(&out).output().expect("md5sum");
                let text = String::from_utf8_lossy(&o.stdout);
                assert!(text.starts_with(&self.md5), "md5sum: {text}");
            }
            Method::CurlNull => self.curl(Path::new("/dev/null")),
        }
        let secs = began.elapsed().as_secs_f64();
        let (cpu, faults) = match m {
            Method::Ferrite => {
                let now = rusage(libc::RUSAGE_SELF);
                (now.0 - self0.0, now.1 - self0.1)
            }
            _ => {
                let now = rusage(libc::RUSAGE_CHILDREN);
                (now.0 - kids0.0, now.1 - kids0.1)
            }
        };
        let server = proc_cpu(self.server_pid) - server0;
        if m != Method::CurlNull {
            assert_eq!(
                std::fs::metadata(&out).map(|m| m.len()).ok(),
                Some(self.size)
            );
        }
        let _ = std::fs::remove_file(&out);
        let gb = self.size as f64 / 1e9;
        Run {
            rate: gb * 1e3 / secs,
            cpu_per_gb: cpu / gb,
            server_per_gb: server / gb,
            faults_per_gb: faults / gb,
        }
    }
}

fn main() {
    if let Ok(data) = std::env::var(CHILD_ENV) {
        serve(&data);
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let size = env_size("FERRITE_BENCH_SIZE", 1 << 30);
    let rounds = env_size("FERRITE_BENCH_ROUNDS", 3);
    let cap = Duration::from_secs(env_size("FERRITE_BENCH_SECS", 120));
    let base = std::env::var_os("FERRITE_BENCH_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            let shm = PathBuf::from("/dev/shm");
            shm.is_dir().then_some(shm)
        })
        .unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new()
        .prefix("ferrite-net-bench")
        .tempdir_in(&base)
        .unwrap();
    let dir = tmp.path().to_owned();
    let data = dir.join("data");
    std::fs::create_dir_all(data.join("download")).unwrap();
    let md5 = make_file(&data.join("download").join("big_in"), size);

    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, &data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = format!("{}download/big_in", url.trim());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client =
        HttpClient::new(HttpConfig::new("BOINC client (x86_64-pc-linux-gnu 7.20.5)")).unwrap();
    let bench = Bench {
        dir,
        url,
        size,
        md5,
        server_pid: child.id(),
        rt,
        client,
    };

    let fs = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(&bench.dir)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    println!(
        "file: {size} bytes served from and written to {} ({fs}); {} cores",
        bench.dir.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let crate_speed = md5_speed(md5_crate);
    let md5_only = md5_speed(md5_ferrite);
    println!(
        "MD5 alone, in memory, one core: ferrite_net::fast_md5 {md5_only:.0} MB/s, md-5 crate {crate_speed:.0} MB/s"
    );

    // One unmeasured run of each client first: the daemon is a long-lived process, so its
    // steady state (allocator arenas grown, connection pool warm) is what counts.
    for m in [Method::Ferrite, Method::CurlFile] {
        let r = bench.run(m);
        println!(
            "warm-up: {:<32} {:7.0} MB/s (not counted)",
            m.label(),
            r.rate
        );
    }

    let order = [
        Method::Ferrite,
        Method::CurlFile,
        Method::CurlMd5sum,
        Method::CurlNull,
    ];
    let mut results: Vec<(Method, Vec<Run>)> = order.iter().map(|m| (*m, Vec::new())).collect();
    let mut per_round: Vec<(f64, f64)> = Vec::new();
    let began = Instant::now();
    let mut round_time = Duration::ZERO;
    for round in 0..rounds {
        if round > 0 && began.elapsed() + round_time > cap {
            println!(
                "time cap of {} s reached after {round} rounds",
                cap.as_secs()
            );
            break;
        }
        let t = Instant::now();
        let mut rates = [0f64; 4];
        for k in 0..order.len() {
            let i = (k + round as usize) % order.len();
            let m = order[i];
            let r = bench.run(m);
            println!(
                "round {}: {:<32} {:7.0} MB/s  client CPU {:.2} s/GB, {:6.0} faults/GB  server CPU {:.2} s/GB",
                round + 1,
                m.label(),
                r.rate,
                r.cpu_per_gb,
                r.faults_per_gb,
                r.server_per_gb
            );
            rates[i] = r.rate;
            results[i].1.push(r);
        }
        per_round.push((rates[0] / rates[1], rates[0] / rates[2]));
        round_time = t.elapsed();
    }

    println!(
        "summary over {} rounds (best, median, spread):",
        per_round.len()
    );
    let mut best = [0f64; 4];
    for (i, (m, runs)) in results.iter().enumerate() {
        let mut rates: Vec<f64> = runs.iter().map(|r| r.rate).collect();
        rates.sort_by(f64::total_cmp);
        let cpu = runs
            .iter()
            .map(|r| r.cpu_per_gb)
            .fold(f64::INFINITY, f64::min);
        best[i] = rates.last().copied().unwrap_or(0.0);
        println!(
            "  {:<32} best {:7.0} MB/s  median {:7.0}  range {:.0}..{:.0}  client CPU {:.2} s/GB (least)",
            m.label(),
            best[i],
            rates.get(rates.len() / 2).copied().unwrap_or(0.0),
            rates.first().copied().unwrap_or(0.0),
            best[i],
            cpu
        );
    }
    let span = |f: fn(&(f64, f64)) -> f64| {
        let v: Vec<f64> = per_round.iter().map(f).collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        (100.0 * lo, 100.0 * hi)
    };
    let (ab_lo, ab_hi) = span(|r| r.0);
    let (ac_lo, ac_hi) = span(|r| r.1);
    println!(
        "(a)/(b): best/best {:.0}%, per round {ab_lo:.0}%..{ab_hi:.0}%",
        100.0 * best[0] / best[1]
    );
    println!(
        "(a)/(c): best/best {:.0}%, per round {ac_lo:.0}%..{ac_hi:.0}%",
        100.0 * best[0] / best[2]
    );
    println!(
        "(a)/MD5 alone: {:.0}% (a verifying download cannot beat one core's MD5)",
        100.0 * best[0] / md5_only
    );

    drop(child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}
