//! Test helpers: a tiny HTTP/1.1 client over loopback, starting the binary, killing children.
#![allow(dead_code)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use clap::Parser as _;
use ferrite_proto::sched_reply::SchedulerReply;
use ferrite_proto::sched_request::SchedulerRequest;
use ferrite_testproject::{Args, Server};

/// Kills (and reaps) a child process when dropped.
pub struct Killer(pub Child);

impl Drop for Killer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the `ferrite-testproject` binary on a free port; returns it and its URL (read from
/// the first line of its stdout, within 30 s).
pub fn start_binary(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrite-testproject"))
        .args(["--port", "0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ferrite-testproject");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(l) => l,
        Err(_) => {
            let _ = child.kill();
            panic!("no URL line within 30 s");
        }
    };
    let url = line
        .trim()
        .strip_prefix("ferrite-testproject listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (child, url)
}

/// An HTTP response.
#[derive(Debug)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Header lines, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl Resp {
    /// Body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `host:port` of a `http://host:port/` URL.
fn authority(url: &str) -> &str {
    url.trim_start_matches("http://").trim_end_matches('/')
}

/// Sends one request (`Connection: close`) and reads the whole reply, failing on a read
/// that takes longer than `timeout`.
pub fn request_timeout(
    method: &str,
    url: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> std::io::Result<Resp> {
    let host = authority(url);
    let mut s = TcpStream::connect(host)?;
    s.set_read_timeout(Some(timeout))?;
    let mut head = format!(
        "{method} /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no header end"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("bad status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Ok(Resp {
        status,
        headers,
        body,
    })
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&b[..eol]).trim(), 16).unwrap_or(0);
        if size == 0 || b.len() < eol + 2 + size {
            return out;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[(eol + 4 + size).min(b.len())..];
    }
}

/// Sends one request with a 30 s read timeout.
pub fn request(method: &str, url: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    request_timeout(method, url, path, headers, body, Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{method} /{path}: {e}"))
}

/// GET `path`.
pub fn get(url: &str, path: &str) -> Resp {
    request("GET", url, path, &[], b"")
}

/// POST `body` to `path`.
pub fn post(url: &str, path: &str, body: &[u8]) -> Resp {
    request("POST", url, path, &[("Content-Type", "text/xml")], body)
}

/// GET `path` and parse it as JSON.
pub fn get_json(url: &str, path: &str) -> serde_json::Value {
    let r = get(url, path);
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_slice(&r.body).expect("JSON")
}

pub const KEY: &str = "feedfacefeedfacefeedfacefeedface";

#[derive(Debug)]
pub struct Fixture {
    pub server: Server,
    pub dir: tempfile::TempDir,
}

/// Starts a server with an app `demo` (a shell script), an input, and `extra` options.
pub fn start(extra: &[&str]) -> Fixture {
    let dir = tempfile::tempdir().expect("tmp");
    let app = dir.path().join("app.sh");
    std::fs::write(&app, "#!/bin/sh\ncat in > out\n").expect("app");
    let input = dir.path().join("input.dat");
    std::fs::write(&input, b"0123456789abcdef").expect("input");
    let data = dir.path().join("data");
    let app_arg = format!("demo={}", app.display());
    let mut argv = vec![
        "ferrite-testproject",
        "--data",
        data.to_str().expect("utf8"),
        "--app",
        &app_arg,
        "--input",
        input.to_str().expect("utf8"),
        "--account-key",
        KEY,
    ];
    argv.extend_from_slice(extra);
    let server = Server::start(Args::parse_from(argv)).expect("server starts");
    Fixture { server, dir }
}

/// The official client's work-fetch request, pointed at this server.
pub fn work_request(cpu_secs: f64, instances: f64) -> SchedulerRequest {
    let text = include_str!("../fixtures/sched_request_02_work_fetch.xml");
    let mut r = SchedulerRequest::parse(text, "req").expect("parses").value;
    r.authenticator = KEY.into();
    r.hostid = 0;
    r.rpc_seqno = 0;
    // No CPID: each request without a host id is a new host (one with the CPID of a known
    // host would be that host again, and get back the tasks it does not list).
    r.host_info.host_cpid.clear();
    r.code_sign_key = None;
    r.work_req_seconds = cpu_secs;
    r.cpu_req_secs = cpu_secs;
    r.cpu_req_instances = instances;
    r
}

pub fn rpc(url: &str, req: &SchedulerRequest) -> SchedulerReply {
    let resp = post(url, "cgi", req.to_xml().as_bytes());
    assert_eq!(resp.status, 200);
    SchedulerReply::parse(&resp.text(), "reply")
        .unwrap_or_else(|e| panic!("reply parses: {e}\n{}", resp.text()))
        .value
}
