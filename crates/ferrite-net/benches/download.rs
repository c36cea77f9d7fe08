//! Download throughput over loopback: a 1 GiB file served by `ferrite-testproject` (in a
//! child process, so its CPU time is not counted here), fetched with
//! `HttpClient::download` (written to disk and MD5-hashed) and with `curl -o /dev/null`,
//! alternately, twice each. Prints MB/s (10⁶ bytes), this process's CPU seconds per GiB,
//! and the ratio to curl. Run with `cargo bench -p ferrite-net`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser as _;
use ferrite_net::{CancellationToken, DownloadTarget, ExpectedFile, HttpClient, HttpConfig};
use md5::{Digest as _, Md5};

const SIZE: u64 = 1 << 30;
const CHILD_ENV: &str = "FERRITE_NET_BENCH_SERVER_DATA";

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// MB/s of MD5 over 256 MiB in memory: the ceiling of a verifying download.
fn md5_speed() -> f64 {
    let block = vec![0x5au8; 1 << 20];
    let mut h = Md5::new();
    let began = Instant::now();
    for _ in 0..256 {
        h.update(&block);
    }
    std::hint::black_box(h.finalize());
    (256u64 << 20) as f64 / 1e6 / began.elapsed().as_secs_f64()
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

fn main() {
    if let Ok(data) = std::env::var(CHILD_ENV) {
        serve(&data);
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("download")).unwrap();
    // A 1 GiB patterned file (1 MiB block repeated, each block stamped with its index).
    let mut hasher = Md5::new();
    {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(data.join("download").join("big_in")).unwrap(),
        );
        let mut block: Vec<u8> = (0..1 << 20)
            .map(|i: u32| (i * 31 + i / 977) as u8)
            .collect();
        for i in 0..(SIZE >> 20) {
            block[..8].copy_from_slice(&i.to_le_bytes());
            hasher.update(&block);
            f.write_all(&block).unwrap();
        }
        f.flush().unwrap();
    }
    let md5 = hex::encode(hasher.finalize());

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
    let target = DownloadTarget {
        partial: dir.path().join("big_in.part"),
        dest: dir.path().join("big_in"),
    };
    let expected = ExpectedFile {
        nbytes: Some(SIZE),
        md5: Some(md5),
        max_nbytes: None,
        gzip: false,
        gzipped_nbytes: None,
    };
    let mb = SIZE as f64 / 1e6;
    let gib = SIZE as f64 / (1u64 << 30) as f64;
    let md5_only = md5_speed();
    println!("MD5 alone (md-5 crate, in memory, one core): {md5_only:.1} MB/s");
    let curl = |out: &Path| -> Option<f64> {
        let began = Instant::now();
        let ok = Command::new("curl")
            .args(["-s", "--fail", "-o"])
            .arg(out)
            .arg(&url)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| mb / began.elapsed().as_secs_f64())
    };
    let (mut best_ours, mut best_null, mut best_file) = (0f64, 0f64, 0f64);
    for round in 1..=2 {
        if let Some(r) = curl(Path::new("/dev/null")) {
            best_null = best_null.max(r);
            println!("round {round}: curl -o /dev/null      {r:8.1} MB/s");
        }
        let curl_file = dir.path().join("curl_out");
        if let Some(r) = curl(&curl_file) {
            best_file = best_file.max(r);
            println!("round {round}: curl -o FILE           {r:8.1} MB/s");
        }
        let _ = std::fs::remove_file(&curl_file);

        let _ = std::fs::remove_file(&target.dest);
        let cpu0 = cpu_seconds();
        let began = Instant::now();
        let outcome = rt
            .block_on(client.download(
                std::slice::from_ref(&url),
                &target,
                &expected,
                &|_| {},
                &CancellationToken::new(),
            ))
            .expect("download");
        let secs = began.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu0;
        assert_eq!(outcome.nbytes, SIZE);
        let r = mb / secs;
        best_ours = best_ours.max(r);
        println!(
            "round {round}: ferrite-net download  {r:8.1} MB/s, CPU {:.2} s per GiB (file written and MD5-verified)",
            cpu / gib
        );
    }
    let pct = |a: f64, b: f64| if b > 0.0 { 100.0 * a / b } else { 0.0 };
    println!(
        "best: ferrite-net {best_ours:.1} MB/s = {:.0}% of curl -o /dev/null ({best_null:.1}), {:.0}% of curl -o FILE ({best_file:.1}), {:.0}% of MD5 alone",
        pct(best_ours, best_null),
        pct(best_ours, best_file),
        pct(best_ours, md5_only)
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
