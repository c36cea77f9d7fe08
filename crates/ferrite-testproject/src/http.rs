//! HTTP on loopback: routing, downloads streamed from disk with Range support, BOINC's upload
//! handler protocol, `/status`, `/fault`, the faults that act at the HTTP level, the random
//! fault storm and the count of every request.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io::SeekFrom;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, BodyStream, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncSeekExt as _, AsyncWriteExt as _};
use tokio_util::io::ReaderStream;

use crate::config::is_safe_name;
use crate::fault::{Fault, FaultSpec, Seen, Storm, StormFault, StormSpec, Traffic};
use crate::project::{Project, Source};
use ferrite_proto::crypt::{md5_hex, PrivateKey};
use ferrite_proto::sched_reply::SchedulerReply;

/// What the HTTP layer keeps besides the project: the storm, the count of requests and the
/// altered bytes of the `tampered-app` fault.
#[derive(Debug)]
struct Shared {
    /// When serving started (traffic times count from here).
    start: Instant,
    /// The storm, while one blows.
    storm: Mutex<Option<Storm>>,
    /// Every request.
    traffic: Mutex<Traffic>,
    /// Download name → altered bytes served instead.
    tampered: Mutex<HashMap<String, Bytes>>,
    /// The account manager under `/am/`.
    am: crate::acct_mgr::AccountManager,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Rolls the storm for one request to `endpoint` and records the request.
    fn request(&self, endpoint: &'static str, target: &str) -> Option<StormFault> {
        let fault = lock(&self.storm).as_mut().and_then(Storm::roll);
        if let Some(f) = fault {
            tracing::info!(endpoint, target, fault = f.name(), "storm");
        }
        lock(&self.traffic).record(Seen {
            t: self.start.elapsed().as_secs_f64(),
            endpoint,
            target: target.to_owned(),
            outcome: fault.map_or("ok", StormFault::name),
        });
        fault
    }
}

/// The storm's `reset`: the connection is closed without an answer.
#[derive(Debug)]
struct Reset;

impl std::fmt::Display for Reset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection reset by the storm")
    }
}

impl std::error::Error for Reset {}

/// What a storm fault does before the request is handled: `Err` = answer this now, `Ok(true)`
/// = handle it, then cut the body.
async fn before(fault: Option<StormFault>) -> Result<bool, Result<Response<Body>, Reset>> {
    match fault {
        None => Ok(false),
        Some(StormFault::Error) => Err(Ok(status_only(StatusCode::INTERNAL_SERVER_ERROR))),
        Some(StormFault::Reset) => Err(Err(Reset)),
        Some(StormFault::Slow(ms)) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(false)
        }
        Some(StormFault::Partial) => Ok(true),
    }
}

/// `resp` with only the first half of its body sent (its full length announced), then the
/// connection closed.
fn cut(resp: Response<Body>) -> Response<Body> {
    let announced = resp
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let (mut parts, body) = resp.into_parts();
    let len = announced
        .or_else(|| hyper::body::Body::size_hint(&body).exact())
        .unwrap_or(0);
    if let Ok(v) = len.to_string().parse() {
        parts.headers.insert(hyper::header::CONTENT_LENGTH, v);
    }
    let keep = len / 2;
    let stream = futures_util::stream::unfold(
        (BodyStream::new(body), keep, false),
        |(mut st, left, done)| async move {
            if done {
                return None;
            }
            if left == 0 {
                let e = std::io::Error::other("storm: partial body");
                return Some((Err(e), (st, 0, true)));
            }
            match st.next().await {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(d) => {
                        let n = d.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                        let d = d.slice(..n);
                        Some((Ok(Frame::data(d)), (st, left - n as u64, false)))
                    }
                    Err(f) => Some((Ok(f), (st, left, false))),
                },
                Some(Err(e)) => Some((Err(e), (st, 0, true))),
                None => None,
            }
        },
    );
    Response::from_parts(parts, StreamBody::new(stream).boxed_unsync())
}

/// Which endpoint a request is for (for the count and the storm); `None` for `/status` and
/// `/fault`, which the storm spares and the count ignores.
fn endpoint(method: &Method, path: &str) -> Option<&'static str> {
    match (method, path) {
        (&Method::GET, "/" | "/index.html" | "/index.php") => Some("master"),
        (
            &Method::GET,
            "/get_project_config.php" | "/lookup_account.php" | "/create_account.php",
        ) => Some("web_rpc"),
        (&Method::POST, "/cgi") => Some("scheduler"),
        (&Method::POST, "/am/rpc.php") => Some("acct_mgr"),
        (&Method::GET | &Method::HEAD, p) if p.starts_with("/download/") => Some("download"),
        (&Method::POST, "/cgi-bin/file_upload_handler") => Some("upload"),
        (_, "/status" | "/fault") => None,
        _ => Some("other"),
    }
}

/// Response body: in-memory text or a streamed file.
type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// How long the `*-timeout`/`*-stall` faults hold a connection.
const STALL: Duration = Duration::from_secs(600);
/// Largest scheduler request or upload header accepted.
const MAX_REQUEST: usize = 64 << 20;
/// Largest upload header.
const MAX_UPLOAD_HEADER: usize = 64 << 10;

fn text(status: StatusCode, ctype: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(
        Full::new(body.into())
            .map_err(|e: Infallible| match e {})
            .boxed_unsync(),
    );
    *r.status_mut() = status;
    if let Ok(v) = ctype.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

fn xml(body: impl Into<Bytes>) -> Response<Body> {
    text(StatusCode::OK, "text/xml", body)
}

fn status_only(status: StatusCode) -> Response<Body> {
    text(status, "text/plain", status.as_str().to_owned())
}

/// Decodes `%XX` and `+` in a query component.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query(req: &Request<Incoming>) -> HashMap<String, String> {
    req.uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (unescape(k), unescape(v))
        })
        .collect()
}

/// Serves `project` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    project: Arc<Project>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let shared = Arc::new(Shared {
        start: Instant::now(),
        storm: Mutex::new(None),
        traffic: Mutex::new(Traffic::default()),
        tampered: Mutex::new(HashMap::new()),
        am: crate::acct_mgr::AccountManager::new(project.data_dir().to_path_buf()),
    });
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = &mut shutdown => return,
        };
        let (stream, _) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let project = project.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let project = project.clone();
                let shared = shared.clone();
                async move { route(project, shared, req).await }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await
            {
                tracing::debug!("connection: {e}");
            }
        });
    }
}

async fn route(
    project: Arc<Project>,
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Reset> {
    let path = req.uri().path().to_owned();
    tracing::debug!(method = %req.method(), %path, "request");
    let ep = endpoint(req.method(), &path);
    // Uploads meet the storm once their file name is known.
    let partial = match ep {
        Some("upload") | None => false,
        Some(ep) => {
            let target = path.strip_prefix("/download/").unwrap_or_default();
            match before(shared.request(ep, target)).await {
                Ok(p) => p,
                Err(answer) => return answer,
            }
        }
    };
    let resp = match (req.method().clone(), path.as_str()) {
        (Method::GET, "/" | "/index.html" | "/index.php") => {
            if project.take_fault(Fault::Master500) {
                return Ok(status_only(StatusCode::INTERNAL_SERVER_ERROR));
            }
            text(StatusCode::OK, "text/html", project.master_page())
        }
        (Method::GET, "/get_project_config.php") => xml(project.project_config()),
        (Method::GET, "/notices.rss") => {
            text(StatusCode::OK, "application/rss+xml", project.news_feed())
        }
        (Method::GET, "/project_list.php") => xml(project.project_list()),
        (Method::GET, "/lookup_account.php") => xml(project.lookup_account(&query(&req))),
        (Method::GET, "/create_account.php") => xml(project.create_account(&query(&req))),
        (Method::POST, "/cgi") if partial => {
            // The request is not handled (no job is lost): a reply cut in the middle.
            xml(CUT_REPLY)
        }
        (Method::POST, "/cgi") => scheduler(project, &shared, req).await,
        (Method::GET | Method::HEAD, p) if p.starts_with("/download/") => {
            download(project, &shared, &req, &p["/download/".len()..]).await
        }
        (Method::POST, "/cgi-bin/file_upload_handler") => {
            return upload(project, &shared, req).await
        }
        (Method::GET, "/am/" | "/am/index.php") => text(
            StatusCode::OK,
            "text/html",
            crate::acct_mgr::AccountManager::master_page(),
        ),
        (Method::GET, "/am/get_project_config.php") => xml(
            crate::acct_mgr::AccountManager::project_config(&format!("{}am/", project.base_url())),
        ),
        (Method::POST, "/am/rpc.php") => match body_text(req).await {
            Some(b) => xml(shared.am.rpc(&b)),
            None => status_only(StatusCode::PAYLOAD_TOO_LARGE),
        },
        (Method::POST, "/am/policy") => {
            let login = query(&req).get("login").cloned();
            match body_text(req).await {
                Some(b) => match shared.am.set_policy(login.as_deref(), &b) {
                    Ok(()) => text(StatusCode::OK, "text/plain", "policy set\n"),
                    Err(e) => text(StatusCode::BAD_REQUEST, "text/plain", e),
                },
                None => status_only(StatusCode::PAYLOAD_TOO_LARGE),
            }
        }
        (Method::GET, "/am/status") => text(
            StatusCode::OK,
            "application/json",
            shared.am.status_json().to_string(),
        ),
        (Method::GET, "/status") => status(&project, &shared),
        (Method::POST, "/fault") => fault(&project, &shared, req).await,
        _ => status_only(StatusCode::NOT_FOUND),
    };
    Ok(if partial { cut(resp) } else { resp })
}

/// A request body as text (`None` when too large or not UTF-8).
async fn body_text(req: Request<Incoming>) -> Option<String> {
    let b = Limited::new(req.into_body(), MAX_REQUEST)
        .collect()
        .await
        .ok()?
        .to_bytes();
    String::from_utf8(b.to_vec()).ok()
}

/// A scheduler reply the storm cuts in half.
const CUT_REPLY: &str = "<scheduler_reply>\n<scheduler_version>803</scheduler_version>\n\
    <request_delay>1</request_delay>\n<message priority=\"low\">the rest of this reply is \
    lost</message>\n</scheduler_reply>\n";

/// The reply of a BOINC scheduler whose project is stopped (`bin/stop` leaves a `stop_sched`
/// file): a message, the project's `maintenance_delay` (an hour by default) and
/// `<project_is_down/>`, nothing else.
const DOWN_REPLY: &str = "<scheduler_reply>\n    <message priority=\"low\">Project is temporarily \
    shut down for maintenance</message>\n    <request_delay>3600</request_delay>\n    \
    <project_is_down/>\n</scheduler_reply>\n";

/// `/status`: the project's counters, the traffic and the storm.
fn status(project: &Project, shared: &Shared) -> Response<Body> {
    let mut v: serde_json::Value =
        serde_json::from_str(&project.status_json()).unwrap_or_else(|_| serde_json::json!({}));
    if let Some(o) = v.as_object_mut() {
        o.insert("traffic".into(), lock(&shared.traffic).to_json());
        let storm = lock(&shared.storm)
            .as_ref()
            .map(|s| serde_json::json!({"rate": s.spec().rate, "seed": s.spec().seed}));
        o.insert("storm".into(), storm.unwrap_or(serde_json::Value::Null));
    }
    text(StatusCode::OK, "application/json", v.to_string())
}

/// `POST /fault`: a fault to arm, or the storm to start or stop.
async fn fault(project: &Project, shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    let body = match Limited::new(req.into_body(), 4096).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return status_only(StatusCode::BAD_REQUEST),
    };
    let body = String::from_utf8_lossy(&body).into_owned();
    match StormSpec::parse(&body) {
        Some(Ok(spec)) => {
            *lock(&shared.storm) = spec.map(Storm::new);
            let what = match spec {
                Some(s) => format!("storm at rate {} (seed {})\n", s.rate, s.seed),
                None => "storm off\n".to_owned(),
            };
            return text(StatusCode::OK, "text/plain", what);
        }
        Some(Err(e)) => return text(StatusCode::BAD_REQUEST, "text/plain", e),
        None => {}
    }
    match FaultSpec::parse(&body) {
        Ok(spec) => {
            project.arm_fault(spec);
            text(
                StatusCode::OK,
                "text/plain",
                format!("armed {}\n", spec.fault),
            )
        }
        Err(e) => text(StatusCode::BAD_REQUEST, "text/plain", e),
    }
}

/// The `key-change*` and `tampered-app` faults, applied to a reply's text.
fn rewrite_reply(project: &Project, shared: &Shared, reply: String) -> String {
    let key_change = project.take_fault(Fault::KeyChange);
    let self_signed = !key_change && project.take_fault(Fault::KeyChangeSelfSigned);
    let tamper = project.take_fault(Fault::TamperedApp);
    if !(key_change || self_signed || tamper) {
        return reply;
    }
    let Ok(parsed) = SchedulerReply::parse(&reply, "scheduler_reply") else {
        return reply;
    };
    let mut r = parsed.value;
    if key_change || self_signed {
        let key = project.public_key_text().trim().to_owned();
        r.code_sign_key_signature = None;
        if self_signed {
            let private = std::fs::read_to_string(project.data_dir().join("code_sign_private"))
                .ok()
                .and_then(|t| PrivateKey::parse(&t).ok());
            r.code_sign_key_signature = private.and_then(|k| k.sign(key.as_bytes()).ok());
        }
        r.code_sign_key = Some(key);
    }
    if tamper {
        for f in r
            .file_infos
            .iter_mut()
            .filter(|f| f.file_signature.is_some())
        {
            let Some(Source::File(path)) = project.download(&f.name) else {
                continue;
            };
            let Ok(original) = std::fs::read(&path) else {
                continue;
            };
            // The altered app leaves a mark and an output of its own.
            let (first, rest) = match original.iter().position(|&b| b == b'\n') {
                Some(i) if original.starts_with(b"#!") => original.split_at(i + 1),
                _ => (&original[..0], &original[..]),
            };
            let mut altered = first.to_vec();
            altered.extend_from_slice(
                b"touch tampered_app_ran\necho tampered > out\necho 0 > boinc_finish_called\nexit 0\n",
            );
            altered.extend_from_slice(rest);
            f.md5_cksum = md5_hex(&altered);
            f.nbytes = altered.len() as f64;
            lock(&shared.tampered).insert(f.name.clone(), Bytes::from(altered));
        }
    }
    r.to_xml()
}

async fn scheduler(
    project: Arc<Project>,
    shared: &Shared,
    req: Request<Incoming>,
) -> Response<Body> {
    let body = match Limited::new(req.into_body(), MAX_REQUEST).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return status_only(StatusCode::PAYLOAD_TOO_LARGE),
    };
    if project.take_fault(Fault::Sched500) {
        return status_only(StatusCode::INTERNAL_SERVER_ERROR);
    }
    if project.take_fault(Fault::SchedTimeout) {
        tokio::time::sleep(STALL).await;
        return status_only(StatusCode::GATEWAY_TIMEOUT);
    }
    if project.take_fault(Fault::SchedMalformed) {
        return xml("<scheduler_reply>\n<request_delay>1</request_delay>\n<app><name>x</nam></app>\n<<<\n</scheduler_reply>\n");
    }
    if project.take_fault(Fault::SchedDown) {
        return xml(DOWN_REPLY);
    }
    let truncate = project.take_fault(Fault::SchedTruncated);
    let text_in = String::from_utf8_lossy(&body).into_owned();
    let p = project.clone();
    let reply = match tokio::task::spawn_blocking(move || p.scheduler(&text_in)).await {
        Ok(r) => r,
        Err(_) => return status_only(StatusCode::INTERNAL_SERVER_ERROR),
    };
    if truncate {
        let mut cut = reply.len() / 2;
        while !reply.is_char_boundary(cut) {
            cut -= 1;
        }
        return xml(reply[..cut].to_owned());
    }
    xml(rewrite_reply(&project, shared, reply))
}

/// Parses `Range: bytes=…` against a length: `Ok(None)` = whole file, `Err` = unsatisfiable.
fn parse_range(h: Option<&str>, len: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(h) = h else { return Ok(None) };
    let Some(spec) = h.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None); // several ranges: send the whole file
    }
    let Some((a, b)) = spec.split_once('-') else {
        return Ok(None);
    };
    let (a, b) = (a.trim(), b.trim());
    let (start, end) = if a.is_empty() {
        let n: u64 = b.parse().map_err(|_| ())?;
        if n == 0 {
            return Err(());
        }
        (len.saturating_sub(n), len.saturating_sub(1))
    } else {
        let s: u64 = a.parse().map_err(|_| ())?;
        let e: u64 = if b.is_empty() {
            len.saturating_sub(1)
        } else {
            b.parse::<u64>().map_err(|_| ())?.min(len.saturating_sub(1))
        };
        (s, e)
    };
    if len == 0 || start >= len || start > end {
        return Err(());
    }
    Ok(Some((start, end)))
}

async fn download(
    project: Arc<Project>,
    shared: &Shared,
    req: &Request<Incoming>,
    name: &str,
) -> Response<Body> {
    if project.take_fault(Fault::Download500) {
        return status_only(StatusCode::INTERNAL_SERVER_ERROR);
    }
    if let Some(bytes) = lock(&shared.tampered).get(name).cloned() {
        let len = bytes.len();
        let mut r = text(StatusCode::OK, "application/octet-stream", bytes);
        if let Ok(v) = len.to_string().parse() {
            r.headers_mut().insert(hyper::header::CONTENT_LENGTH, v);
        }
        return r;
    }
    let Some(source) = project.download(name) else {
        return status_only(StatusCode::NOT_FOUND);
    };
    let (file, len) = match &source {
        Source::Zeros(n) => (None, *n),
        Source::File(p) => match open(p).await {
            Ok((f, n)) => (Some(f), n),
            Err(_) => return status_only(StatusCode::NOT_FOUND),
        },
    };
    let range = req
        .headers()
        .get(hyper::header::RANGE)
        .and_then(|v| v.to_str().ok());
    let (start, end, partial) = match parse_range(range, len) {
        Ok(None) => (0, len.saturating_sub(1), false),
        Ok(Some((s, e))) => (s, e, true),
        Err(()) => {
            let mut r = status_only(StatusCode::RANGE_NOT_SATISFIABLE);
            if let Ok(v) = format!("bytes */{len}").parse() {
                r.headers_mut().insert(hyper::header::CONTENT_RANGE, v);
            }
            return r;
        }
    };
    let count = if len == 0 { 0 } else { end - start + 1 };
    let reader: Box<dyn AsyncRead + Send + Unpin> = match file {
        None => Box::new(tokio::io::repeat(0)),
        Some(mut f) => {
            if f.seek(SeekFrom::Start(start)).await.is_err() {
                return status_only(StatusCode::INTERNAL_SERVER_ERROR);
            }
            Box::new(f)
        }
    };
    let stall = project.take_fault(Fault::DownloadStall);
    let sent = if stall { count / 2 } else { count };
    let stream =
        ReaderStream::with_capacity(reader.take(sent), 256 << 10).map(|r| r.map(Frame::data));
    let body: Body = if stall {
        let tail = futures_util::stream::once(async {
            tokio::time::sleep(STALL).await;
            Err::<Frame<Bytes>, _>(std::io::Error::other("stalled download"))
        });
        StreamBody::new(stream.chain(tail)).boxed_unsync()
    } else {
        StreamBody::new(stream).boxed_unsync()
    };
    let mut r = Response::new(if req.method() == Method::HEAD {
        Full::new(Bytes::new())
            .map_err(|e: Infallible| match e {})
            .boxed_unsync()
    } else {
        body
    });
    let h = r.headers_mut();
    let mut put = |k: hyper::header::HeaderName, v: String| {
        if let Ok(v) = v.parse() {
            h.insert(k, v);
        }
    };
    put(hyper::header::CONTENT_LENGTH, count.to_string());
    put(
        hyper::header::CONTENT_TYPE,
        "application/octet-stream".into(),
    );
    put(hyper::header::ACCEPT_RANGES, "bytes".into());
    if partial {
        put(
            hyper::header::CONTENT_RANGE,
            format!("bytes {start}-{end}/{len}"),
        );
        *r.status_mut() = StatusCode::PARTIAL_CONTENT;
    }
    r
}

async fn open(p: &PathBuf) -> std::io::Result<(tokio::fs::File, u64)> {
    let f = tokio::fs::File::open(p).await?;
    let n = f.metadata().await?.len();
    Ok((f, n))
}

fn upload_reply(status: i32, file_size: Option<u64>, message: Option<&str>) -> Response<Body> {
    let mut s = format!("<data_server_reply>\n    <status>{status}</status>\n");
    if let Some(n) = file_size {
        s.push_str(&format!("    <file_size>{n}</file_size>\n"));
    }
    if let Some(m) = message {
        s.push_str(&format!("    <message>{m}</message>\n"));
    }
    s.push_str("</data_server_reply>\n");
    xml(s)
}

/// The text of the first `<tag>…</tag>` in `h`.
fn tag<'a>(h: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let s = h.find(&open)? + open.len();
    let e = h[s..].find(&close)? + s;
    Some(h[s..e].trim())
}

/// The upload handler, with the storm applied once the file name is known (a `partial`
/// fault cuts the reply after the upload was handled).
async fn upload(
    project: Arc<Project>,
    shared: &Shared,
    req: Request<Incoming>,
) -> Result<Response<Body>, Reset> {
    if project.take_fault(Fault::Upload500) {
        shared.request("upload", "");
        return Ok(status_only(StatusCode::INTERNAL_SERVER_ERROR));
    }
    if project.take_fault(Fault::UploadTransient) {
        shared.request("upload", "");
        return Ok(upload_reply(1, None, Some("injected transient error")));
    }
    if project.take_fault(Fault::UploadPermanent) {
        shared.request("upload", "");
        return Ok(upload_reply(-1, None, Some("injected permanent error")));
    }
    let mut body = req.into_body();
    let mut partial = false;
    let reply = upload_body(&project, shared, &mut body, &mut partial).await?;
    Ok(if partial { cut(reply) } else { reply })
}

async fn upload_body(
    project: &Arc<Project>,
    shared: &Shared,
    body: &mut Incoming,
    partial: &mut bool,
) -> Result<Response<Body>, Reset> {
    let mut buf: Vec<u8> = Vec::new();
    let mut ended = false;
    let data_at = loop {
        if let Some(i) = find(&buf, b"<data>") {
            break Some(i);
        }
        if ended || buf.len() > MAX_UPLOAD_HEADER {
            break None;
        }
        match body.frame().await {
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    buf.extend_from_slice(&d);
                }
            }
            Some(Err(_)) => return Ok(upload_reply(1, None, Some("error reading request"))),
            None => ended = true,
        }
    };
    let header_end = data_at.unwrap_or(buf.len().min(MAX_UPLOAD_HEADER));
    let header = String::from_utf8_lossy(&buf[..header_end]).into_owned();

    if let Some(name) = tag(&header, "get_file_size") {
        let name = name.to_owned();
        let Some(result) = check_name(project, &name) else {
            return Ok(upload_reply(-1, None, Some("bad file name")));
        };
        match before(shared.request("upload", &name)).await {
            Ok(p) => *partial = p,
            Err(answer) => return answer,
        }
        let path = result_dir(project, &result).join(&name);
        let size = tokio::fs::metadata(&path)
            .await
            .map(|m| m.len())
            .unwrap_or(0);
        return Ok(upload_reply(0, Some(size), None));
    }
    let Some(data_at) = data_at else {
        return Ok(upload_reply(-1, None, Some("missing <data> tag")));
    };
    let Some(name) = tag(&header, "name").map(str::to_owned) else {
        return Ok(upload_reply(-1, None, Some("missing file name")));
    };
    let Some(result) = check_name(project, &name) else {
        return Ok(upload_reply(-1, None, Some("bad file name")));
    };
    match before(shared.request("upload", &name)).await {
        Ok(p) => *partial = p,
        Err(answer) => return answer,
    }
    let num = |t: &str| tag(&header, t).and_then(|v| v.parse::<f64>().ok());
    let (Some(max_nbytes), Some(nbytes)) = (num("max_nbytes"), num("nbytes")) else {
        return Ok(upload_reply(-1, None, Some("missing nbytes or max_nbytes")));
    };
    let offset = num("offset").unwrap_or(0.0);
    let Some(sig) = tag(&header, "xml_signature") else {
        return Ok(upload_reply(-1, None, Some("missing signature")));
    };
    if !project.check_upload_cert(&name, max_nbytes, sig) {
        return Ok(upload_reply(-1, None, Some("invalid signature")));
    }
    if nbytes > max_nbytes || nbytes < 0.0 || offset < 0.0 {
        return Ok(upload_reply(-1, None, Some("file size too big")));
    }
    let (nbytes, offset) = (nbytes as u64, offset as u64);
    let dir = result_dir(project, &result);
    if tokio::fs::create_dir_all(&dir).await.is_err() {
        return Ok(upload_reply(1, None, Some("can't create directory")));
    }
    let path = dir.join(&name);
    let have = tokio::fs::metadata(&path)
        .await
        .map(|m| m.len())
        .unwrap_or(0);
    if offset >= nbytes && have >= nbytes {
        project.upload_done(&result, &name);
        return Ok(upload_reply(0, None, None));
    }
    if offset > have {
        return Ok(upload_reply(
            1,
            None,
            Some("offset beyond the data received"),
        ));
    }
    let file = tokio::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .await;
    let mut file = match file {
        Ok(f) => f,
        Err(_) => return Ok(upload_reply(1, None, Some("can't open file"))),
    };
    if file.set_len(offset).await.is_err() || file.seek(SeekFrom::Start(offset)).await.is_err() {
        return Ok(upload_reply(1, None, Some("can't write file")));
    }
    let mut rest = &buf[data_at + "<data>".len()..];
    if rest.first() == Some(&b'\n') {
        rest = &rest[1..];
    }
    let mut left = nbytes - offset;
    let first = within(rest, &mut left);
    if file.write_all(first).await.is_err() {
        return Ok(upload_reply(1, None, Some("write failed")));
    }
    while left > 0 && !ended {
        match body.frame().await {
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    let chunk = within(&d, &mut left);
                    if file.write_all(chunk).await.is_err() {
                        return Ok(upload_reply(1, None, Some("write failed")));
                    }
                }
            }
            Some(Err(_)) | None => break,
        }
    }
    if file.flush().await.is_err() {
        return Ok(upload_reply(1, None, Some("write failed")));
    }
    if left > 0 {
        return Ok(upload_reply(1, None, Some("short read")));
    }
    project.upload_done(&result, &name);
    Ok(upload_reply(0, None, None))
}

/// The part of `chunk` that fits in the `left` bytes still expected; counts it off.
fn within<'a>(chunk: &'a [u8], left: &mut u64) -> &'a [u8] {
    let n = chunk
        .len()
        .min(usize::try_from(*left).unwrap_or(usize::MAX));
    *left -= n as u64;
    &chunk[..n]
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The result an upload name belongs to, if the name is acceptable.
fn check_name(project: &Project, name: &str) -> Option<String> {
    if !is_safe_name(name) {
        return None;
    }
    project.result_of_output(name)
}

fn result_dir(project: &Project, result: &str) -> PathBuf {
    project.data_dir().join("results").join(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range(None, 10), Ok(None));
        assert_eq!(parse_range(Some("bytes=2-4"), 10), Ok(Some((2, 4))));
        assert_eq!(parse_range(Some("bytes=5-"), 10), Ok(Some((5, 9))));
        assert_eq!(parse_range(Some("bytes=-3"), 10), Ok(Some((7, 9))));
        assert_eq!(parse_range(Some("bytes=8-100"), 10), Ok(Some((8, 9))));
        assert_eq!(parse_range(Some("bytes=10-"), 10), Err(()));
        assert_eq!(parse_range(Some("bytes=x-"), 10), Err(()));
    }

    #[test]
    fn unescapes_query() {
        assert_eq!(unescape("a%2Eb%5Fc+d"), "a.b_c d");
        assert_eq!(unescape("100%"), "100%");
        assert_eq!(unescape("%zz"), "%zz");
    }
}
