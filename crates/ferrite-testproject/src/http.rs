//! HTTP on loopback: routing, downloads streamed from disk with Range support, BOINC's upload
//! handler protocol, `/status`, `/fault`, and the faults that act at the HTTP level.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io::SeekFrom;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncSeekExt as _, AsyncWriteExt as _};
use tokio_util::io::ReaderStream;

use crate::config::is_safe_name;
use crate::fault::{Fault, FaultSpec};
use crate::project::{Project, Source};

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
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let project = project.clone();
                async move { Ok::<_, Infallible>(route(project, req).await) }
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

async fn route(project: Arc<Project>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_owned();
    tracing::debug!(method = %req.method(), %path, "request");
    match (req.method().clone(), path.as_str()) {
        (Method::GET, "/" | "/index.html" | "/index.php") => {
            if project.take_fault(Fault::Master500) {
                return status_only(StatusCode::INTERNAL_SERVER_ERROR);
            }
            text(StatusCode::OK, "text/html", project.master_page())
        }
        (Method::GET, "/get_project_config.php") => xml(project.project_config()),
        (Method::GET, "/lookup_account.php") => xml(project.lookup_account(&query(&req))),
        (Method::GET, "/create_account.php") => xml(project.create_account(&query(&req))),
        (Method::POST, "/cgi") => scheduler(project, req).await,
        (Method::GET | Method::HEAD, p) if p.starts_with("/download/") => {
            download(project, &req, &p["/download/".len()..]).await
        }
        (Method::POST, "/cgi-bin/file_upload_handler") => upload(project, req).await,
        (Method::GET, "/status") => text(StatusCode::OK, "application/json", project.status_json()),
        (Method::POST, "/fault") => {
            let body = match Limited::new(req.into_body(), 4096).collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => return status_only(StatusCode::BAD_REQUEST),
            };
            match FaultSpec::parse(&String::from_utf8_lossy(&body)) {
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
        _ => status_only(StatusCode::NOT_FOUND),
    }
}

async fn scheduler(project: Arc<Project>, req: Request<Incoming>) -> Response<Body> {
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
    xml(reply)
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

async fn download(project: Arc<Project>, req: &Request<Incoming>, name: &str) -> Response<Body> {
    if project.take_fault(Fault::Download500) {
        return status_only(StatusCode::INTERNAL_SERVER_ERROR);
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

async fn upload(project: Arc<Project>, req: Request<Incoming>) -> Response<Body> {
    if project.take_fault(Fault::Upload500) {
        return status_only(StatusCode::INTERNAL_SERVER_ERROR);
    }
    if project.take_fault(Fault::UploadTransient) {
        return upload_reply(1, None, Some("injected transient error"));
    }
    if project.take_fault(Fault::UploadPermanent) {
        return upload_reply(-1, None, Some("injected permanent error"));
    }
    let mut body = req.into_body();
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
            Some(Err(_)) => return upload_reply(1, None, Some("error reading request")),
            None => ended = true,
        }
    };
    let header_end = data_at.unwrap_or(buf.len().min(MAX_UPLOAD_HEADER));
    let header = String::from_utf8_lossy(&buf[..header_end]).into_owned();

    if let Some(name) = tag(&header, "get_file_size") {
        let name = name.to_owned();
        let Some(result) = check_name(&project, &name) else {
            return upload_reply(-1, None, Some("bad file name"));
        };
        let path = result_dir(&project, &result).join(&name);
        let size = tokio::fs::metadata(&path)
            .await
            .map(|m| m.len())
            .unwrap_or(0);
        return upload_reply(0, Some(size), None);
    }
    let Some(data_at) = data_at else {
        return upload_reply(-1, None, Some("missing <data> tag"));
    };
    let Some(name) = tag(&header, "name").map(str::to_owned) else {
        return upload_reply(-1, None, Some("missing file name"));
    };
    let Some(result) = check_name(&project, &name) else {
        return upload_reply(-1, None, Some("bad file name"));
    };
    let num = |t: &str| tag(&header, t).and_then(|v| v.parse::<f64>().ok());
    let (Some(max_nbytes), Some(nbytes)) = (num("max_nbytes"), num("nbytes")) else {
        return upload_reply(-1, None, Some("missing nbytes or max_nbytes"));
    };
    let offset = num("offset").unwrap_or(0.0);
    let Some(sig) = tag(&header, "xml_signature") else {
        return upload_reply(-1, None, Some("missing signature"));
    };
    if !project.check_upload_cert(&name, max_nbytes, sig) {
        return upload_reply(-1, None, Some("invalid signature"));
    }
    if nbytes > max_nbytes || nbytes < 0.0 || offset < 0.0 {
        return upload_reply(-1, None, Some("file size too big"));
    }
    let (nbytes, offset) = (nbytes as u64, offset as u64);
    let dir = result_dir(&project, &result);
    if tokio::fs::create_dir_all(&dir).await.is_err() {
        return upload_reply(1, None, Some("can't create directory"));
    }
    let path = dir.join(&name);
    let have = tokio::fs::metadata(&path)
        .await
        .map(|m| m.len())
        .unwrap_or(0);
    if offset >= nbytes && have >= nbytes {
        project.upload_done(&result, &name);
        return upload_reply(0, None, None);
    }
    if offset > have {
        return upload_reply(1, None, Some("offset beyond the data received"));
    }
    let file = tokio::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .await;
    let mut file = match file {
        Ok(f) => f,
        Err(_) => return upload_reply(1, None, Some("can't open file")),
    };
    if file.set_len(offset).await.is_err() || file.seek(SeekFrom::Start(offset)).await.is_err() {
        return upload_reply(1, None, Some("can't write file"));
    }
    let mut rest = &buf[data_at + "<data>".len()..];
    if rest.first() == Some(&b'\n') {
        rest = &rest[1..];
    }
    let mut left = nbytes - offset;
    let first = within(rest, &mut left);
    if file.write_all(first).await.is_err() {
        return upload_reply(1, None, Some("write failed"));
    }
    while left > 0 && !ended {
        match body.frame().await {
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    let chunk = within(&d, &mut left);
                    if file.write_all(chunk).await.is_err() {
                        return upload_reply(1, None, Some("write failed"));
                    }
                }
            }
            Some(Err(_)) | None => break,
        }
    }
    if file.flush().await.is_err() {
        return upload_reply(1, None, Some("write failed"));
    }
    if left > 0 {
        return upload_reply(1, None, Some("short read"));
    }
    project.upload_done(&result, &name);
    upload_reply(0, None, None)
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
