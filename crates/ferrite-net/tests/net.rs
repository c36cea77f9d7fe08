//! ferrite-net against the loopback project server `ferrite-testproject` (in-process) and,
//! where a misbehaving server is needed, a tiny raw HTTP server in this file.
#![allow(clippy::unwrap_used)]

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser as _;
use ferrite_net::{
    CancellationToken, DownloadError, DownloadTarget, ExpectedFile, HttpClient, HttpConfig,
    NetError, UploadError, UploadJob,
};
use ferrite_proto::client_state::ClientVersion;
use ferrite_proto::sched_reply::SchedulerReply;
use ferrite_testproject::{Args, Server};

/// A test's deadline against a hang (never a measure of speed): far beyond any timeout the
/// client under test is given.
const HANG: Duration = Duration::from_secs(60);

const KEY: &str = "0123456789abcdef0123456789abcdef";
const UA: &str = "BOINC client (x86_64-pc-linux-gnu 7.20.5)";
const REQUEST: &str = include_str!("fixtures/sched_request_capture1.xml");

struct Fixture {
    server: Server,
    dir: tempfile::TempDir,
}

impl Fixture {
    fn url(&self) -> &str {
        self.server.url()
    }
    /// Puts a file in the server's download area; returns its URL.
    fn serve(&self, name: &str, data: &[u8]) -> String {
        let d = self.server.project().data_dir().join("download");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(name), data).unwrap();
        format!("{}download/{name}", self.url())
    }
    fn target(&self, name: &str) -> DownloadTarget {
        DownloadTarget {
            partial: self.dir.path().join("client").join(format!("{name}.part")),
            dest: self.dir.path().join("client").join("project").join(name),
        }
    }
    /// Arms a fault through the server's HTTP API.
    async fn fault(&self, client: &HttpClient, spec: &str) {
        let r = client
            .post_scheduler(&format!("{}fault", self.url()), spec.to_owned())
            .await
            .unwrap();
        assert!(r.contains("armed"), "{r}");
    }
}

fn start(extra: &[&str]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("client")).unwrap();
    let app = dir.path().join("app.sh");
    std::fs::write(&app, "#!/bin/sh\ncat in > out\n").unwrap();
    let data = dir.path().join("data");
    let app_arg = format!("demo={}", app.display());
    let mut argv = vec![
        "ferrite-testproject",
        "--data",
        data.to_str().unwrap(),
        "--app",
        &app_arg,
        "--account-key",
        KEY,
        // Uploads here are checked with certificates, as a project that makes them does.
        "--upload-certs",
    ];
    argv.extend_from_slice(extra);
    let server = Server::start(Args::parse_from(argv)).unwrap();
    Fixture { server, dir }
}

fn config() -> HttpConfig {
    let mut c = HttpConfig::new(UA);
    c.connect_timeout = Duration::from_secs(5);
    c.read_timeout = Duration::from_secs(20);
    c
}

fn client() -> HttpClient {
    HttpClient::new(config()).unwrap()
}

fn client_with_read_timeout(t: Duration) -> HttpClient {
    let mut c = config();
    c.read_timeout = t;
    HttpClient::new(c).unwrap()
}

/// Bytes that are not all alike, so an offset mistake changes the MD5.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn md5(data: &[u8]) -> String {
    ferrite_proto::crypt::md5_hex(data)
}

fn expected(data: &[u8]) -> ExpectedFile {
    ExpectedFile {
        nbytes: Some(data.len() as u64),
        md5: Some(md5(data)),
        max_nbytes: None,
        gzip: false,
        gzipped_nbytes: None,
    }
}

fn no_progress(_: u64) {}

fn version() -> ClientVersion {
    ClientVersion {
        major: 7,
        minor: 20,
        release: 5,
    }
}

async fn rpc(client: &HttpClient, f: &Fixture) -> SchedulerReply {
    let text = client
        .post_scheduler(&format!("{}cgi", f.url()), REQUEST.to_owned())
        .await
        .unwrap();
    SchedulerReply::parse(&text, "reply").unwrap().value
}

/// A raw HTTP server for misbehaviours the project server does not have: answers each of
/// the first `n` connections with `answer(request head and body)` and records the
/// requests. The thread ends after `n` connections.
fn raw_server(
    n: usize,
    answer: impl Fn(&str) -> Vec<u8> + Send + 'static,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for _ in 0..n {
            let Ok((mut s, _)) = l.accept() else { return };
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            // Head, then the body announced by Content-Length.
            while let Ok(k) = s.read(&mut chunk) {
                if k == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..k]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some(h) = text.find("\r\n\r\n") {
                    let len = text[..h]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if buf.len() >= h + 4 + len {
                        break;
                    }
                }
            }
            let req = String::from_utf8_lossy(&buf).to_string();
            let reply = answer(&req);
            log.lock().unwrap().push(req);
            let _ = s.write_all(&reply);
        }
    });
    (url, seen)
}

fn http_response(status: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    let mut r = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for h in headers {
        r.push_str(h);
        r.push_str("\r\n");
    }
    r.push_str("\r\n");
    let mut r = r.into_bytes();
    r.extend_from_slice(body);
    r
}

#[tokio::test]
async fn scheduler_rpc_round_trip_with_the_captured_request() {
    let f = start(&["--jobs", "3"]);
    let c = client();
    let reply = rpc(&c, &f).await;
    assert_eq!(reply.results.len(), 1, "1 s of work asked: one job");
    assert!(reply.hostid.is_some());
    assert!(reply.code_sign_key.is_some());
    // The web RPCs of attaching.
    let cfg = c.get_project_config(f.url()).await.unwrap();
    assert_eq!(cfg.name, "Ferrite Test Project");
    let master = c.get_text(f.url()).await.unwrap();
    assert!(master.contains("<scheduler>"));
}

#[tokio::test]
async fn scheduler_request_carries_the_official_headers() {
    let (url, seen) = raw_server(1, |_| {
        http_response(
            "200 OK",
            &["Content-Length: 37"],
            b"<scheduler_reply></scheduler_reply>\n\n",
        )
    });
    let text = client()
        .post_scheduler(&format!("{url}cgi"), REQUEST.to_owned())
        .await
        .unwrap();
    assert!(text.starts_with("<scheduler_reply>"));
    let req = seen.lock().unwrap()[0].clone();
    let head = req.split("\r\n\r\n").next().unwrap().to_ascii_lowercase();
    assert!(head.starts_with("post /cgi http/1.1\r\n"), "{head}");
    assert!(head.contains(&format!("\r\nuser-agent: {}\r\n", UA.to_ascii_lowercase())));
    assert!(head.contains("\r\ncontent-type: application/x-www-form-urlencoded\r\n"));
    assert!(head.contains("\r\naccept-encoding: gzip"));
    assert!(req.ends_with(REQUEST), "the body is sent as is");
}

#[tokio::test]
async fn oversized_or_undecodable_texts_are_refused() {
    let f = start(&["--jobs", "3"]);
    let mut cfg = config();
    cfg.max_text_bytes = 200;
    let small = HttpClient::new(cfg).unwrap();
    let e = small
        .post_scheduler(&format!("{}cgi", f.url()), REQUEST.to_owned())
        .await
        .unwrap_err();
    assert!(matches!(e, NetError::TooLarge { limit: 200, .. }), "{e:?}");
    // Not UTF-8, and no Content-Length (the cap applies while reading).
    let (url, _) = raw_server(2, |_| http_response("200 OK", &[], &[0xff, 0xfe, b'x']));
    let e = client().get_text(&url).await.unwrap_err();
    assert!(matches!(e, NetError::NotUtf8 { .. }), "{e:?}");
    let e = small.get_text(&url).await;
    assert!(e.is_err());
    let (url, _) = raw_server(1, |_| http_response("200 OK", &[], &vec![b'a'; 5000]));
    let e = small.get_text(&url).await.unwrap_err();
    assert!(matches!(e, NetError::TooLarge { .. }), "{e:?}");
}

#[tokio::test]
async fn redirects_only_to_http() {
    // Not followed: the 3xx is the final answer, a permanent error as in BOINC.
    let (url, _) = raw_server(1, |_| {
        http_response(
            "302 Found",
            &["Location: file:///etc/passwd", "Content-Length: 0"],
            b"",
        )
    });
    let e = client().get_text(&url).await.unwrap_err();
    assert!(matches!(e, NetError::Status { status: 302, .. }), "{e:?}");
    assert!(e.is_permanent());
    // An http redirect is followed.
    let (url, seen) = raw_server(2, |req| {
        if req.starts_with("GET /moved ") {
            http_response("200 OK", &["Content-Length: 5"], b"there")
        } else {
            http_response("301 Moved", &["Location: /moved", "Content-Length: 0"], b"")
        }
    });
    assert_eq!(client().get_text(&url).await.unwrap(), "there");
    assert_eq!(seen.lock().unwrap().len(), 2);
}

/// A server that redirects `/r0` to `/r1` and so on, and answers `/r{hops}` itself.
fn redirect_chain(hops: usize) -> (String, Arc<Mutex<Vec<String>>>) {
    let (base, seen) = raw_server(hops + 1, move |req| {
        let n: usize = req
            .strip_prefix("GET /r")
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if n >= hops {
            http_response("200 OK", &["Content-Length: 4"], b"done")
        } else {
            let to = format!("Location: /r{}", n + 1);
            http_response("302 Found", &[to.as_str(), "Content-Length: 0"], b"")
        }
    });
    (format!("{base}r0"), seen)
}

#[tokio::test]
async fn fifty_redirects_are_followed_and_the_fifty_first_is_refused_by_name() {
    let (url, seen) = redirect_chain(50);
    assert_eq!(client().get_text(&url).await.unwrap(), "done");
    assert_eq!(seen.lock().unwrap().len(), 51);
    let (url, seen) = redirect_chain(51);
    let e = client().get_text(&url).await.unwrap_err();
    assert!(matches!(e, NetError::Redirect { .. }), "{e:?}");
    assert!(e.to_string().contains("too many redirects (50)"), "{e}");
    assert!(!e.is_permanent());
    assert_eq!(seen.lock().unwrap().len(), 51);
}

#[tokio::test]
async fn download_checks_md5_and_renames_into_place() {
    let f = start(&[]);
    let data = pattern(3 << 20);
    let url = f.serve("big_in", &data);
    let t = f.target("big_in");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let progress = move |n: u64| s.lock().unwrap().push(n);
    let o = client()
        .download(
            std::slice::from_ref(&url),
            &t,
            &expected(&data),
            &progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(o.url.as_deref(), Some(url.as_str()));
    assert_eq!(
        (o.nbytes, o.resumed_from, o.received),
        (3 << 20, 0, 3 << 20)
    );
    assert_eq!(o.md5, md5(&data));
    assert_eq!(std::fs::read(&t.dest).unwrap(), data);
    assert!(!t.partial.exists());
    let p = seen.lock().unwrap();
    assert!(p.windows(2).all(|w| w[0] < w[1]), "progress grows");
    assert_eq!(p.last(), Some(&(3 << 20)));
}

#[tokio::test]
async fn stalled_download_is_cut_off_then_resumed_with_range() {
    let f = start(&[]);
    let data = pattern(2 << 20);
    let url = f.serve("stall_in", &data);
    let t = f.target("stall_in");
    let c = client_with_read_timeout(Duration::from_millis(800));
    f.fault(&c, "download-stall").await;
    // Cut off by the 0.8 s read timeout, not after the stall's 10 min (HANG is the test's
    // deadline against a hang).
    let e = tokio::time::timeout(
        HANG,
        c.download(
            std::slice::from_ref(&url),
            &t,
            &expected(&data),
            &no_progress,
            &CancellationToken::new(),
        ),
    )
    .await
    .expect("cut off, not after the stall's 10 min")
    .unwrap_err();
    assert!(
        matches!(e, DownloadError::Net(NetError::Timeout { .. })),
        "{e:?}"
    );
    assert!(!e.is_permanent());
    let have = std::fs::metadata(&t.partial).unwrap().len();
    assert_eq!(have, 1 << 20, "the half that arrived is kept");
    assert!(!t.dest.exists());
    // Cut it shorter still, as after a crash; resume.
    let f2 = std::fs::OpenOptions::new()
        .write(true)
        .open(&t.partial)
        .unwrap();
    f2.set_len(300_000).unwrap();
    let o = c
        .download(
            &[url],
            &t,
            &expected(&data),
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    // The server answered 206 with only the rest.
    assert_eq!(o.resumed_from, 300_000);
    assert_eq!(o.received, (2 << 20) - 300_000);
    assert_eq!(std::fs::read(&t.dest).unwrap(), data);
}

#[tokio::test]
async fn a_server_ignoring_range_restarts_the_file() {
    let data = pattern(100_000);
    let body = data.clone();
    let (url, seen) = raw_server(1, move |_| {
        http_response(
            "200 OK",
            &[&format!("Content-Length: {}", body.len())],
            &body,
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let t = DownloadTarget {
        partial: dir.path().join("f.part"),
        dest: dir.path().join("f"),
    };
    // A partial file whose bytes are wrong: it must not survive the restart.
    std::fs::write(&t.partial, vec![0u8; 40_000]).unwrap();
    let o = client()
        .download(
            &[format!("{url}f")],
            &t,
            &expected(&data),
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!((o.resumed_from, o.received), (0, 100_000));
    assert_eq!(std::fs::read(&t.dest).unwrap(), data);
    let req = seen.lock().unwrap()[0].to_ascii_lowercase();
    assert!(req.contains("\r\nrange: bytes=40000-\r\n"), "{req}");
    assert!(req.contains("\r\naccept-encoding: identity\r\n"), "{req}");
}

#[tokio::test]
async fn wrong_md5_fault_leaves_no_file() {
    let f = start(&["--jobs", "3"]);
    let c = client();
    f.fault(&c, "wrong-md5").await;
    let reply = rpc(&c, &f).await;
    let input = reply
        .file_infos
        .iter()
        .find(|fi| fi.name.ends_with("_in"))
        .expect("an input file");
    let t = f.target(&input.name);
    let e = c
        .download(
            &input.download_urls,
            &t,
            &ExpectedFile {
                nbytes: Some(input.nbytes as u64),
                md5: Some(input.md5_cksum.clone()),
                max_nbytes: None,
                gzip: false,
                gzipped_nbytes: None,
            },
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, DownloadError::Md5Mismatch { .. }), "{e:?}");
    assert_eq!(e.boinc_code(), -119);
    assert!(e.is_permanent());
    assert!(!t.dest.exists() && !t.partial.exists());
}

#[tokio::test]
async fn http_500_is_a_typed_transient_error_and_the_next_url_is_tried() {
    let f = start(&[]);
    let data = pattern(10_000);
    let url = f.serve("x_in", &data);
    let c = client();
    let t = f.target("x_in");
    f.fault(&c, "download-500").await;
    let e = c
        .download(
            std::slice::from_ref(&url),
            &t,
            &expected(&data),
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, DownloadError::Net(NetError::Status { status: 500, .. })),
        "{e:?}"
    );
    assert_eq!(e.boinc_code(), -184);
    assert!(!e.is_permanent());
    // Two URLs: the first fails, the second serves the file.
    f.fault(&c, "download-500").await;
    let second = url.replace("127.0.0.1", "localhost");
    let o = c
        .download(
            &[url, second.clone()],
            &t,
            &expected(&data),
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(o.url, Some(second));
    // A 404 is permanent for a download.
    let e = c
        .download(
            &[format!("{}download/nothing_here", f.url())],
            &f.target("n"),
            &ExpectedFile::default(),
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(e.is_permanent() && e.boinc_code() == -224, "{e:?}");
}

#[tokio::test]
async fn scheduler_that_never_answers_is_cut_off() {
    let f = start(&[]);
    let c = client_with_read_timeout(Duration::from_secs(1));
    f.fault(&c, "sched-timeout").await;
    // The test's deadline against a hang, not a speed: the client gives up after its 1 s
    // read timeout, and the error says it was a timeout.
    let e = tokio::time::timeout(
        HANG,
        c.post_scheduler(&format!("{}cgi", f.url()), REQUEST.to_owned()),
    )
    .await
    .expect("the client gives up on a silent scheduler")
    .unwrap_err();
    assert!(matches!(e, NetError::Timeout { .. }), "{e:?}");
    assert_eq!(e.boinc_code(), -182);
}

#[tokio::test]
async fn oversized_download_is_cut_off_early() {
    let f = start(&[]);
    // A 1 GiB sparse file for a 1 KiB entry: refused on its Content-Length.
    let d = f.server.project().data_dir().join("download");
    std::fs::create_dir_all(&d).unwrap();
    let big = std::fs::File::create(d.join("huge_in")).unwrap();
    big.set_len(1 << 30).unwrap();
    let t = f.target("huge_in");
    let small = ExpectedFile {
        nbytes: Some(1024),
        md5: None,
        max_nbytes: None,
        gzip: false,
        gzipped_nbytes: None,
    };
    let e = client()
        .download(
            &[format!("{}download/huge_in", f.url())],
            &t,
            &small,
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, DownloadError::TooBig { limit: 1024, .. }),
        "{e:?}"
    );
    assert_eq!(e.boinc_code(), -131);
    // Refused on its Content-Length, before the body: not one byte was written.
    assert!(file_len(&t.partial) == 0 && !t.dest.exists());
    // No Content-Length: cut off while streaming; the episode's bytes are dropped.
    let (url, _) = raw_server(1, |_| http_response("200 OK", &[], &vec![7u8; 4 << 20]));
    let e = client()
        .download(
            &[url],
            &t,
            &ExpectedFile {
                nbytes: None,
                md5: None,
                max_nbytes: Some(10_000),
                gzip: false,
                gzipped_nbytes: None,
            },
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, DownloadError::TooBig { limit: 10_000, .. }),
        "{e:?}"
    );
    assert_eq!(file_len(&t.partial), 0);
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

#[tokio::test]
async fn cancelling_keeps_a_resumable_partial_file() {
    let f = start(&[]);
    let data = pattern(1 << 20);
    let url = f.serve("c_in", &data);
    let t = f.target("c_in");
    let c = client();
    f.fault(&c, "download-stall").await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        trigger.cancel();
    });
    let e = c
        .download(
            std::slice::from_ref(&url),
            &t,
            &expected(&data),
            &no_progress,
            &cancel,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, DownloadError::Cancelled), "{e:?}");
    assert_eq!(file_len(&t.partial), 512 << 10);
    let o = c
        .download(
            &[url],
            &t,
            &expected(&data),
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(o.resumed_from, 512 << 10);
    assert_eq!(std::fs::read(&t.dest).unwrap(), data);
}

/// Gets a job; returns its output file's entry and upload URL.
async fn output_file(c: &HttpClient, f: &Fixture) -> ferrite_proto::client_state::FileInfo {
    let reply = rpc(c, f).await;
    let out = reply
        .file_infos
        .iter()
        .find(|fi| fi.name.ends_with("_out"))
        .expect("an output file")
        .clone();
    assert!(!out.upload_urls.is_empty() && out.xml_signature.is_some());
    out
}

fn server_copy(f: &Fixture, name: &str) -> PathBuf {
    let result = name.strip_suffix("_out").unwrap();
    f.server.results_dir().join(result).join(name)
}

#[tokio::test]
async fn upload_resumes_from_what_the_server_has() {
    let f = start(&["--jobs", "3"]);
    let c = client();
    let out = output_file(&c, &f).await;
    let data = pattern(20_000);
    let path = f.dir.path().join("client").join(&out.name);
    std::fs::write(&path, &data).unwrap();
    // The server already has a prefix from an earlier attempt.
    let on_server = server_copy(&f, &out.name);
    std::fs::create_dir_all(on_server.parent().unwrap()).unwrap();
    std::fs::write(&on_server, &data[..5000]).unwrap();
    let job = UploadJob {
        file: out.clone(),
        path,
        nbytes: data.len() as u64,
        md5: md5(&data),
        version: version(),
        known_offset: None,
    };
    let last = Arc::new(Mutex::new(0u64));
    let l = last.clone();
    let progress = move |n: u64| *l.lock().unwrap() = n;
    let o = c
        .upload(
            &out.upload_urls[0],
            &job,
            &progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        (o.from_offset, o.sent, o.already_complete),
        (5000, 15_000, false)
    );
    assert_eq!(*last.lock().unwrap(), 20_000);
    assert_eq!(std::fs::read(&on_server).unwrap(), data);
    let status = c.get_text(&format!("{}status", f.url())).await.unwrap();
    assert!(status.contains("\"uploads_received\":1"), "{status}");
    // Again: the size query says the server has it all; nothing is sent.
    let o = c
        .upload(
            &out.upload_urls[0],
            &job,
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(o.already_complete && o.sent == 0);
}

#[tokio::test]
async fn upload_handler_errors_are_typed() {
    let f = start(&["--jobs", "3"]);
    let c = client();
    let out = output_file(&c, &f).await;
    let data = pattern(100);
    let path = f.dir.path().join("client").join(&out.name);
    std::fs::write(&path, &data).unwrap();
    let mut job = UploadJob {
        file: out.clone(),
        path,
        nbytes: 100,
        md5: md5(&data),
        version: version(),
        known_offset: None,
    };
    let url = &out.upload_urls[0];
    let none = CancellationToken::new();
    f.fault(&c, "upload-transient").await;
    let e = c.upload(url, &job, &no_progress, &none).await.unwrap_err();
    assert!(matches!(e, UploadError::Transient { .. }), "{e:?}");
    assert_eq!((e.boinc_code(), e.is_permanent()), (-127, false));
    f.fault(&c, "upload-permanent").await;
    let e = c.upload(url, &job, &no_progress, &none).await.unwrap_err();
    assert!(matches!(e, UploadError::Permanent { .. }), "{e:?}");
    assert_eq!((e.boinc_code(), e.is_permanent()), (-128, true));
    f.fault(&c, "upload-500").await;
    let e = c.upload(url, &job, &no_progress, &none).await.unwrap_err();
    assert!(
        matches!(e, UploadError::Net(NetError::Status { status: 500, .. })),
        "{e:?}"
    );
    assert!(!e.is_permanent());
    // A small file goes from offset 0 without a size query, and arrives whole.
    let o = c.upload(url, &job, &no_progress, &none).await.unwrap();
    assert_eq!((o.from_offset, o.sent), (0, 100));
    assert_eq!(std::fs::read(server_copy(&f, &out.name)).unwrap(), data);
    // A corrupted certificate is refused for good.
    let mut sig = job.file.xml_signature.clone().unwrap();
    sig.replace_range(0..1, if sig.starts_with('0') { "1" } else { "0" });
    job.file.xml_signature = Some(sig);
    let e = c.upload(url, &job, &no_progress, &none).await.unwrap_err();
    assert!(e.is_permanent(), "{e:?}");
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[tokio::test]
async fn gzip_downloads_are_decompressed_and_checked_uncompressed() {
    let f = start(&[]);
    let data = pattern(300_000);
    let gz = gzip(&data);
    let url = f.serve("z_in.gz", &gz);
    let t = f.target("z_in");
    let want = ExpectedFile {
        nbytes: Some(data.len() as u64),
        md5: Some(md5(&data)),
        max_nbytes: None,
        gzip: true,
        gzipped_nbytes: Some(gz.len() as u64),
    };
    let c = client();
    let none = CancellationToken::new();
    let o = c
        .download(std::slice::from_ref(&url), &t, &want, &no_progress, &none)
        .await
        .unwrap();
    assert_eq!((o.nbytes, o.received), (300_000, gz.len() as u64));
    assert_eq!(o.md5, md5(&data));
    assert_eq!(std::fs::read(&t.dest).unwrap(), data);
    assert!(!t.partial.exists());
    let leftovers: Vec<_> = std::fs::read_dir(t.dest.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    // The MD5 is that of the uncompressed bytes: the gzip file's own MD5 is refused.
    std::fs::remove_file(&t.dest).unwrap();
    let wrong = ExpectedFile {
        md5: Some(md5(&gz)),
        ..want.clone()
    };
    let e = c
        .download(std::slice::from_ref(&url), &t, &wrong, &no_progress, &none)
        .await
        .unwrap_err();
    assert!(matches!(e, DownloadError::Md5Mismatch { .. }), "{e:?}");
    assert!(!t.dest.exists() && !t.partial.exists());
    // Not gzip at all.
    let junk = pattern(1000);
    let url = f.serve("junk.gz", &junk);
    let e = c
        .download(
            &[url],
            &t,
            &ExpectedFile {
                gzipped_nbytes: Some(1000),
                ..want
            },
            &no_progress,
            &none,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, DownloadError::BadGzip { .. }), "{e:?}");
    assert!(e.is_permanent() && !t.dest.exists() && !t.partial.exists());
}

#[tokio::test]
async fn a_few_bytes_that_do_not_complete_the_file_are_dropped() {
    // Answers the Range with 206 and 100 bytes, then ends: likely not the file.
    let (url, _) = raw_server(1, |_| {
        http_response(
            "206 Partial Content",
            &[
                "Content-Range: bytes 40000-99999/100000",
                "Content-Length: 100",
            ],
            &[1u8; 100],
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let t = DownloadTarget {
        partial: dir.path().join("f.part"),
        dest: dir.path().join("f"),
    };
    std::fs::write(&t.partial, vec![0u8; 40_000]).unwrap();
    let data = pattern(100_000);
    let e = client()
        .download(
            &[url],
            &t,
            &expected(&data),
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, DownloadError::Incomplete { got: 40_100, .. }),
        "{e:?}"
    );
    assert_eq!(file_len(&t.partial), 40_000);
}

#[tokio::test]
async fn download_bandwidth_limit_is_honoured() {
    let f = start(&[]);
    let data = pattern(300_000);
    let url = f.serve("slow_in", &data);
    let c = client();
    // 100 kB/s: 300 kB cannot take less than about 2 s (the bucket starts empty and
    // holds at most one second's worth).
    c.set_bandwidth_limits(100_000, 0);
    let began = Instant::now();
    let o = c
        .download(
            &[url],
            &f.target("slow_in"),
            &expected(&data),
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(o.nbytes, 300_000);
    assert!(
        began.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        began.elapsed()
    );
}

#[tokio::test]
async fn upload_request_has_a_length_and_the_bytes_follow_the_header() {
    let (url, seen) = raw_server(1, |_| {
        let body = "<data_server_reply>\n    <status>0</status>\n</data_server_reply>\n";
        http_response(
            "200 OK",
            &[&format!("Content-Length: {}", body.len())],
            body.as_bytes(),
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r_0_out");
    // ASCII, so the recorded request text keeps every byte.
    let data: Vec<u8> = (0..3000u32).map(|i| b'a' + (i % 26) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let job = UploadJob {
        file: ferrite_proto::client_state::FileInfo {
            name: "r_0_out".into(),
            max_nbytes: 100_000.0,
            xml_signature: Some("abcd\n.\n".into()),
            ..Default::default()
        },
        path,
        nbytes: 3000,
        md5: md5(&data),
        version: version(),
        known_offset: Some(1000),
    };
    let o = client()
        .upload(
            &format!("{url}cgi-bin/file_upload_handler"),
            &job,
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!((o.from_offset, o.sent), (1000, 2000));
    let req = seen.lock().unwrap()[0].clone();
    let (head, body) = req.split_once("\r\n\r\n").unwrap();
    let head = head.to_ascii_lowercase();
    assert!(!head.contains("transfer-encoding"), "{head}");
    assert!(
        head.contains(&format!("\r\ncontent-length: {}\r\n", body.len())),
        "{head}"
    );
    assert!(body.starts_with("<data_server_request>\n"));
    assert!(body.contains("<name>r_0_out</name>\n<xml_signature>\nabcd\n.</xml_signature>\n"));
    assert!(body.contains("<offset>1000</offset>\n<data>\n"));
    let raw = req.as_bytes();
    assert_eq!(&raw[raw.len() - 2000..], &data[1000..]);
}

#[tokio::test]
async fn slow_transfers_longer_than_the_read_timeout_complete() {
    let f = start(&["--jobs", "3"]);
    // Idle timeout 1 s; each transfer takes about 3 s but never stalls.
    let c = client_with_read_timeout(Duration::from_secs(1));
    let out = output_file(&c, &f).await;
    let data = pattern(300_000);
    let path = f.dir.path().join("client").join(&out.name);
    std::fs::write(&path, &data).unwrap();
    c.set_bandwidth_limits(0, 100_000);
    let job = UploadJob {
        file: out.clone(),
        path,
        nbytes: data.len() as u64,
        md5: md5(&data),
        version: version(),
        known_offset: Some(0),
    };
    let o = c
        .upload(
            &out.upload_urls[0],
            &job,
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(o.sent, 300_000);
    assert_eq!(std::fs::read(server_copy(&f, &out.name)).unwrap(), data);
    // The same for a download slowed by the limit.
    c.set_bandwidth_limits(100_000, 0);
    let url = f.serve("slow_in", &data);
    let o = c
        .download(
            &[url],
            &f.target("slow_in"),
            &expected(&data),
            &no_progress,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(o.nbytes, 300_000);
}

#[tokio::test]
async fn an_upload_handler_that_never_answers_is_cut_off() {
    let (url, _) = raw_server(1, |_| {
        std::thread::sleep(Duration::from_secs(20));
        Vec::new()
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r_0_out");
    std::fs::write(&path, pattern(100_000)).unwrap();
    let job = UploadJob {
        file: ferrite_proto::client_state::FileInfo {
            name: "r_0_out".into(),
            max_nbytes: 1e6,
            xml_signature: Some("ab\n.\n".into()),
            ..Default::default()
        },
        path,
        nbytes: 100_000,
        md5: "0".repeat(32),
        version: version(),
        known_offset: Some(0),
    };
    // The test's deadline against a hang, not a speed: the client gives up after its 1 s
    // read timeout, and the error says it was a timeout.
    let e = tokio::time::timeout(
        HANG,
        client_with_read_timeout(Duration::from_secs(1)).upload(
            &url,
            &job,
            &no_progress,
            &CancellationToken::new(),
        ),
    )
    .await
    .expect("the client gives up on a silent upload handler")
    .unwrap_err();
    assert!(
        matches!(e, UploadError::Net(NetError::Timeout { .. })),
        "{e:?}"
    );
}

/// A server that answers one GET for `data` by sending `chunk` bytes every `every`.
fn trickle_server(data: Vec<u8>, chunk: usize, every: Duration) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/trickle_in", l.local_addr().unwrap());
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 4096];
        let mut head = Vec::new();
        while !String::from_utf8_lossy(&head).contains("\r\n\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(k) => head.extend_from_slice(&buf[..k]),
            }
        }
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            data.len()
        );
        for piece in data.chunks(chunk) {
            if s.write_all(piece).and_then(|()| s.flush()).is_err() {
                return; // the client gave up
            }
            std::thread::sleep(every);
        }
    });
    url
}

/// Downloads `url` (expected to be `data`) into `t`, without progress or cancellation.
async fn get(
    c: &HttpClient,
    url: String,
    t: &DownloadTarget,
    data: &[u8],
) -> Result<ferrite_net::download::DownloadOutcome, DownloadError> {
    c.download(
        &[url],
        t,
        &expected(data),
        &no_progress,
        &CancellationToken::new(),
    )
    .await
}

#[tokio::test]
async fn a_download_trickling_below_the_low_speed_limit_is_given_up() {
    let dir = tempfile::tempdir().unwrap();
    let t = DownloadTarget {
        partial: dir.path().join("trickle_in.part"),
        dest: dir.path().join("trickle_in"),
    };
    // 1000 B/s at least over 2 s windows (http_transfer_timeout_bps 1000, timeout 2 s); the
    // server sends 200 bytes every 0.4 s (500 B/s): never idle for 2 s, always too slow.
    let mut cfg = config();
    cfg.read_timeout = Duration::from_secs(2);
    cfg.low_speed_bps = 1000.0;
    let c = HttpClient::new(cfg.clone()).unwrap();
    let data = pattern(20_000);
    let url = trickle_server(data.clone(), 200, Duration::from_millis(400));
    let began = Instant::now();
    let e = get(&c, url, &t, &data).await.unwrap_err();
    let took = began.elapsed();
    match &e {
        DownloadError::Net(NetError::TooSlow {
            min_bps, secs, bps, ..
        }) => {
            assert_eq!((*min_bps, *secs), (1000.0, 2), "{e}");
            assert!(*bps < 1000.0, "{e}");
        }
        other => panic!("given up as too slow, not {other:?}"),
    }
    assert!(
        e.to_string().contains("slower than 1000 B/s for 2 s"),
        "{e}"
    );
    assert!(!e.is_permanent(), "retried later like a timeout");
    // Not before one whole window was measured, and long before the trickle would have
    // ended (it sends the file in 40 s): what arrived is kept for the retry to resume from,
    // and it is not the whole file.
    assert!(took >= Duration::from_secs(2), "after one window: {took:?}");
    let kept = std::fs::metadata(&t.partial).unwrap().len();
    assert!(
        kept > 0 && kept < data.len() as u64,
        "kept {kept} of {} bytes",
        data.len()
    );

    // 2000 bytes every 0.4 s (5000 B/s) is above the limit: it completes.
    let c = HttpClient::new(cfg).unwrap();
    let data = pattern(30_000);
    let url = trickle_server(data.clone(), 2000, Duration::from_millis(400));
    let t = DownloadTarget {
        partial: dir.path().join("steady_in.part"),
        dest: dir.path().join("steady_in"),
    };
    let o = get(&c, url, &t, &data).await.unwrap();
    assert_eq!(o.nbytes, 30_000);
    assert_eq!(std::fs::read(&t.dest).unwrap(), data);
}

#[tokio::test]
async fn text_exchanges_are_counted_for_the_daily_transfer_history() {
    let f = start(&["--jobs", "1"]);
    let c = client();
    assert_eq!(c.take_text_bytes(), (0, 0));
    // A clone shares the count.
    let text = c
        .clone()
        .post_scheduler(&format!("{}cgi", f.url()), REQUEST.to_owned())
        .await
        .unwrap();
    let (down, up) = c.take_text_bytes();
    assert_eq!(up, REQUEST.len() as u64);
    assert_eq!(down, text.len() as u64);
    assert_eq!(c.take_text_bytes(), (0, 0), "taken once");
    let cfg = c
        .get_text(&ferrite_project::attach::get_project_config_url(f.url()))
        .await
        .unwrap();
    assert_eq!(c.take_text_bytes(), (cfg.len() as u64, 0));
}
