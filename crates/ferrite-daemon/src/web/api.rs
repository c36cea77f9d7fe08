//! The dashboard's API.
//!
//! - `POST /api/rpc`: the body is a GUI RPC request document (`<get_state/>`,
//!   `<set_run_mode><never/><duration>3600</duration></set_run_mode>`, …), parsed by
//!   `ferrite-gui-rpc`'s own parser and answered by the main loop through the same
//!   [`Call`] path as a GUI RPC connection, so the dashboard and every GUI see one
//!   implementation. The reply is the GUI RPC reply document (browsers read XML natively).
//! - `GET /api/history?urls=URL+URL`: the job logs of those projects (last 30 days) and the
//!   daemon's own CPU and memory samples, as JSON.

use std::collections::VecDeque;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use ferrite_gui_rpc::request::parse_request;
use ferrite_gui_rpc::{reply, Call, PeerInfo, PeerTransport};
use ferrite_proto::account::escape_project_url;
use ferrite_proto::job_log::JobLogRecord;
use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::guard::Access;
use super::{gate, App, Peer};

/// Connection ids of dashboard calls: far above the GUI RPC server's, which count from 1.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1 << 48);

/// How many days of job log the history gives.
pub const HISTORY_DAYS: f64 = 30.0;

/// At most this much of the end of each job log is read.
const JOB_LOG_TAIL: u64 = 4 << 20;

/// The name the dashboard's calls carry as their GUI's name.
const CLIENT_NAME: &str = "Ferrite dashboard";

pub(super) async fn rpc(
    State(app): State<App>,
    Extension(Peer(peer)): Extension<Peer>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let request = match parse_request(&body) {
        Ok(r) => r,
        Err(e) => return xml(StatusCode::BAD_REQUEST, &e.reply_body()),
    };
    let access = if request.info().auth_required {
        Access::ApiAct
    } else {
        Access::ApiRead
    };
    if let Some(r) = gate(&app, access, Some(Peer(peer)), &headers) {
        return r;
    }
    let Some(calls) = app.calls.clone() else {
        return (StatusCode::NOT_FOUND, "no API here\n").into_response();
    };
    let closed = CancellationToken::new();
    let (tx, rx) = oneshot::channel();
    let call = Call {
        request,
        peer: PeerInfo {
            connection_id: NEXT_CALL.fetch_add(1, Ordering::Relaxed),
            transport: PeerTransport::Tcp(peer),
            is_local: ferrite_gui_rpc::access::is_local(peer.ip()),
            authorized: true,
            client_name: Some(CLIENT_NAME.to_owned()),
            closed: closed.clone(),
        },
        reply: tx,
    };
    let answered = match calls.send(call).await {
        Ok(()) => tokio::time::timeout(app.limits.call_timeout, rx).await,
        Err(_) => {
            return (StatusCode::SERVICE_UNAVAILABLE, "the client is stopping\n").into_response()
        }
    };
    // Each call is its own "connection": let the main loop forget it.
    closed.cancel();
    match answered {
        Ok(Ok(body)) => xml(StatusCode::OK, &body.to_text()),
        Ok(Err(_)) => xml(StatusCode::OK, &reply::error("request not handled")),
        Err(_) => (StatusCode::GATEWAY_TIMEOUT, "the client did not answer\n").into_response(),
    }
}

/// A GUI RPC reply body as the reply document.
fn xml(status: StatusCode, body: &str) -> Response {
    let doc = format!("{}{body}{}", reply::REPLY_OPEN, reply::REPLY_CLOSE);
    (
        status,
        [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        doc,
    )
        .into_response()
}

/// `GET /api/history` query.
#[derive(Debug, serde::Deserialize)]
pub(super) struct HistoryQuery {
    /// Master URLs separated by spaces.
    #[serde(default)]
    urls: String,
}

pub(super) async fn history(
    State(app): State<App>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
    Query(q): Query<HistoryQuery>,
) -> Response {
    if let Some(r) = gate(&app, Access::ApiRead, Some(peer), &headers) {
        return r;
    }
    let now = crate::clock::now();
    let urls: Vec<String> = q
        .urls
        .split_whitespace()
        .take(256)
        .map(str::to_owned)
        .collect();
    let dir = app.data_dir.clone();
    let jobs = match dir {
        Some(dir) => tokio::task::spawn_blocking(move || {
            urls.iter()
                .map(|u| {
                    (
                        u.clone(),
                        recent_jobs(&dir, u, now - HISTORY_DAYS * 86400.0),
                    )
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default(),
        None => Vec::new(),
    };
    let mut job_logs = serde_json::Map::new();
    for (url, recs) in jobs {
        let rows: Vec<_> = recs
            .iter()
            .map(|r| json!([r.time, r.cpu_time, r.elapsed_time, r.name]))
            .collect();
        job_logs.insert(url, serde_json::Value::Array(rows));
    }
    let usage: Vec<_> = app
        .usage
        .as_ref()
        .map(|u| u.samples())
        .unwrap_or_default()
        .iter()
        .map(|s| json!([s.time, s.cpu_seconds, s.resident_bytes]))
        .collect();
    let body = json!({
        "now": now,
        "job_logs": job_logs,
        "usage": usage,
    });
    axum::Json(body).into_response()
}

/// The job log records of `url` since `since` (a missing or unreadable log is empty).
fn recent_jobs(dir: &Path, url: &str, since: f64) -> Vec<JobLogRecord> {
    let path = dir.join(format!("job_log_{}.txt", escape_project_url(url)));
    let Ok(mut f) = std::fs::File::open(&path) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut skip_partial = false;
    if len > JOB_LOG_TAIL {
        if f.seek(SeekFrom::Start(len - JOB_LOG_TAIL)).is_err() {
            return Vec::new();
        }
        skip_partial = true;
    }
    let mut bytes = Vec::new();
    if f.take(JOB_LOG_TAIL).read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if skip_partial {
        let cut = text.find('\n').map_or(text.len(), |i| i + 1);
        text.drain(..cut);
    }
    let (records, _bad) = JobLogRecord::parse_log(&text);
    records.into_iter().filter(|r| r.time >= since).collect()
}

/// One sample of the daemon's own resource use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UsageSample {
    /// Unix time.
    pub time: f64,
    /// CPU seconds used since the daemon started.
    pub cpu_seconds: f64,
    /// Resident set size, bytes.
    pub resident_bytes: f64,
}

/// The daemon's recent resource use: the main loop adds a sample now and then, the dashboard
/// reads them. Bounded: the oldest samples go first.
#[derive(Debug, Clone)]
pub struct UsageHistory {
    inner: Arc<Mutex<VecDeque<UsageSample>>>,
    cap: usize,
}

impl UsageHistory {
    /// An empty history keeping at most `cap` samples.
    pub fn new(cap: usize) -> UsageHistory {
        UsageHistory {
            inner: Arc::new(Mutex::new(VecDeque::new())),
            cap: cap.max(1),
        }
    }

    /// Adds a sample, dropping the oldest when full.
    pub fn push(&self, s: UsageSample) {
        if let Ok(mut q) = self.inner.lock() {
            while q.len() >= self.cap {
                q.pop_front();
            }
            q.push_back(s);
        }
    }

    /// The time of the newest sample.
    pub fn last_time(&self) -> Option<f64> {
        self.inner.lock().ok()?.back().map(|s| s.time)
    }

    /// All samples, oldest first.
    pub fn samples(&self) -> Vec<UsageSample> {
        self.inner
            .lock()
            .map(|q| q.iter().copied().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn usage_history_is_bounded_and_ordered() {
        let h = UsageHistory::new(3);
        for i in 0..5 {
            h.push(UsageSample {
                time: f64::from(i),
                cpu_seconds: 0.0,
                resident_bytes: 0.0,
            });
        }
        let times: Vec<f64> = h.samples().iter().map(|s| s.time).collect();
        assert_eq!(times, [2.0, 3.0, 4.0]);
        assert_eq!(h.last_time(), Some(4.0));
    }

    #[test]
    fn job_logs_are_read_from_their_tail_and_filtered_by_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = "http://127.0.0.1:1/proj/";
        let mut text = String::new();
        for t in [100, 200, 300] {
            text.push_str(&format!(
                "{t} ue 10.000000 ct 5.500000 fe 1000 nm r_{t} et 6.000000 es 0\n"
            ));
        }
        text.push_str("garbage\n");
        std::fs::write(
            dir.path()
                .join(format!("job_log_{}.txt", escape_project_url(url))),
            text,
        )
        .expect("write");
        let recs = recent_jobs(dir.path(), url, 150.0);
        let names: Vec<&str> = recs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["r_200", "r_300"]);
        assert_eq!(recs[0].cpu_time, 5.5);
        assert!(recent_jobs(dir.path(), "http://other/", 0.0).is_empty());
    }
}
