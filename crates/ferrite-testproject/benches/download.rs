//! Download throughput of the test project's download area (what the client's download
//! bench measures against): a file (1 GiB, or `FERRITE_BENCH_SIZE` bytes with an optional
//! K/M/G binary suffix) streamed whole, then its second half by Range. Prints MB/s and the
//! server process's peak RSS.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Instant;

use clap::Parser as _;
use ferrite_testproject::{Args, Server};

fn fetch(url: &str, path: &str, range: Option<&str>) -> u64 {
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect(host).expect("connect");
    let mut req = format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if let Some(r) = range {
        req.push_str(&format!("Range: bytes={r}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = s.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    total
}

fn peak_rss_kb() -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM"))
        .map(|l| l.trim_start_matches("VmHWM:").trim().to_owned())
        .unwrap_or_else(|| "?".into())
}

/// `FERRITE_BENCH_SIZE`, default 1 GiB.
fn size() -> u64 {
    let Ok(v) = std::env::var("FERRITE_BENCH_SIZE") else {
        return 1 << 30;
    };
    let v = v.trim().to_ascii_uppercase();
    let (num, shift) = match v.strip_suffix('G') {
        Some(n) => (n, 30),
        None => match v.strip_suffix('M') {
            Some(n) => (n, 20),
            None => v.strip_suffix('K').map_or((v.as_str(), 0), |n| (n, 10)),
        },
    };
    let n: u64 = num
        .trim()
        .parse()
        .expect("FERRITE_BENCH_SIZE: a size such as 1G or 256M");
    n << shift
}

fn main() {
    let size = size();
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("download")).expect("mkdir");
    let big = data.join("download").join("big.bin");
    std::fs::File::create(&big)
        .and_then(|f| f.set_len(size))
        .expect("sparse file");
    let app = dir.path().join("a.sh");
    std::fs::write(&app, "#!/bin/sh\n").expect("app");
    let server = Server::start(Args::parse_from([
        "bench",
        "--data",
        data.to_str().expect("utf8"),
        "--app",
        &format!("d={}", app.display()),
        "--jobs",
        "1",
    ]))
    .expect("server");
    for (label, range) in [
        ("whole file", None),
        ("Range 2nd half", Some(format!("{}-", size / 2))),
    ] {
        for _ in 0..2 {
            let t = Instant::now();
            let n = fetch(server.url(), "download/big.bin", range.as_deref());
            let secs = t.elapsed().as_secs_f64();
            println!(
                "download {label}: {n} bytes in {secs:.2} s = {:.0} MB/s",
                n as f64 / secs / 1e6
            );
        }
    }
    println!(
        "peak RSS (server and client in one process): {}",
        peak_rss_kb()
    );
}
