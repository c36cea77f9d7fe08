//! The daemon's one HTTP server (axum on hyper): `/metrics` (OpenMetrics text from
//! [`crate::metrics`] to scrapers that ask for it, as Prometheus does; the classic text
//! format to the others), the dashboard's static files ([`assets`]) and its API ([`api`]), which
//! passes GUI RPC requests into the main loop exactly as the GUI RPC server does.
//!
//! Off unless the operator gives a port; on loopback unless the operator names another
//! address, and then only with a secret ([`guard`]). The server never touches the state: it
//! hands out the latest metrics text from a watch channel and forwards calls.

mod api;
mod assets;
pub mod guard;
mod slots;
mod start;

pub use api::{UsageHistory, UsageSample};
pub use start::{start_for_loop, Started, USAGE_EVERY_SECS, USAGE_SAMPLES};

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Extension;
use axum::Router;
use ferrite_gui_rpc::Call;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tower::ServiceExt as _;
use tracing::{debug, warn};

use crate::metrics;
use guard::{Access, Facts, Policy};

/// How the server protects itself from slow, large or numerous requests.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A request's head must arrive within this time (also the idle time of a kept-alive
    /// connection).
    pub header_timeout: Duration,
    /// The longest a connection is kept, however busy.
    pub connection_lifetime: Duration,
    /// Request heads larger than this are refused (431); at least 8 KiB.
    pub max_head: usize,
    /// Request bodies larger than this are refused (413).
    pub max_body: usize,
    /// Connections held at once. At the limit a newcomer takes the place of the connection
    /// quiet the longest (one that sent nothing yet, or nothing since its last reply); when
    /// every one is serving a request, the newcomer is closed.
    pub max_connections: usize,
    /// A peer holding this many connections makes room for a new one by closing its own
    /// quiet ones, not other peers'.
    pub max_per_peer: usize,
    /// How long an API call waits for the main loop's answer.
    pub call_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(2),
            connection_lifetime: Duration::from_secs(120),
            max_head: 8 * 1024,
            max_body: 64 * 1024,
            max_connections: 64,
            max_per_peer: 16,
            call_timeout: Duration::from_secs(30),
        }
    }
}

/// What the server serves from.
#[derive(Debug)]
pub struct Sources {
    /// The latest OpenMetrics text (empty until the first render).
    pub metrics: watch::Receiver<String>,
    /// Where API calls go (the main loop answers them); `None` serves no API.
    pub calls: Option<mpsc::Sender<Call>>,
    /// The data directory (the job logs the history view reads).
    pub data_dir: Option<std::path::PathBuf>,
    /// The client's own CPU and memory over time.
    pub usage: Option<UsageHistory>,
}

/// Shared by every handler.
#[derive(Debug, Clone)]
struct App {
    policy: Arc<Policy>,
    metrics: watch::Receiver<String>,
    calls: Option<mpsc::Sender<Call>>,
    data_dir: Option<Arc<std::path::Path>>,
    usage: Option<UsageHistory>,
    limits: Limits,
}

/// The peer of a connection, put into each of its requests.
#[derive(Debug, Clone, Copy)]
struct Peer(SocketAddr);

/// The running server.
#[derive(Debug)]
pub struct WebServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl WebServer {
    /// Binds `addr` and serves. A non-loopback `addr` needs a secret (`InvalidInput` without
    /// one): the token file's content or the GUI RPC password.
    pub async fn start(
        addr: SocketAddr,
        secret: Option<String>,
        sources: Sources,
        limits: Limits,
    ) -> io::Result<WebServer> {
        let policy = Policy::new(addr.ip().is_loopback(), secret);
        Self::start_with_policy(addr, policy, sources, limits).await
    }

    async fn start_with_policy(
        addr: SocketAddr,
        policy: Policy,
        sources: Sources,
        limits: Limits,
    ) -> io::Result<WebServer> {
        if !policy.may_listen() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{addr} is not a loopback address: serving there needs a GUI RPC password \
                     or a token file"
                ),
            ));
        }
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let app = App {
            policy: Arc::new(policy),
            metrics: sources.metrics,
            calls: sources.calls,
            data_dir: sources.data_dir.map(Arc::from),
            usage: sources.usage,
            limits,
        };
        let task = tokio::spawn(serve(listener, router(app), limits));
        Ok(WebServer { addr, task })
    }

    /// The address bound (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and drops every open connection.
    pub async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

fn router(app: App) -> Router {
    let max_body = app.limits.max_body;
    Router::new()
        .route("/metrics", get(metrics))
        .route("/", get(assets::index))
        .route("/assets/{name}", get(assets::file))
        .route("/api/rpc", post(api::rpc))
        .route("/api/history", get(api::history))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(axum::middleware::map_response(common_headers))
        .with_state(app)
}

/// Headers on every reply: nothing cached, no sniffing, never framed by another page.
async fn common_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

/// Decides a request from `peer` (`None` for static files, which no peer changes) with the
/// policy; the refusal as a reply (`None`: go ahead).
fn gate(app: &App, access: Access, peer: Option<Peer>, headers: &HeaderMap) -> Option<Response> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let facts = Facts {
        host: text("host"),
        origin: text("origin"),
        authorization: text("authorization"),
        api_header: text(guard::API_HEADER).is_some_and(|v| !v.is_empty()),
        local_peer: peer.is_some_and(|p| ferrite_gui_rpc::access::is_local(p.0.ip())),
    };
    app.policy.check(access, &facts).err().map(|refusal| {
        debug!("http: refused ({refusal})");
        let status = match refusal {
            guard::Refusal::Unauthorized => StatusCode::UNAUTHORIZED,
            _ => StatusCode::FORBIDDEN,
        };
        let mut r = (status, format!("{refusal}\n")).into_response();
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"ferrite\""),
            );
        }
        r
    })
}

async fn metrics(
    State(app): State<App>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = gate(&app, Access::Scrape, Some(peer), &headers) {
        return r;
    }
    let body = app.metrics.borrow().clone();
    if body.is_empty() {
        return (StatusCode::SERVICE_UNAVAILABLE, "metrics not ready yet\n").into_response();
    }
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    if metrics::wants_openmetrics(accept) {
        ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], body).into_response()
    } else {
        let text = metrics::to_prometheus_text(&body);
        ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE_TEXT)], text).into_response()
    }
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found\n").into_response()
}

/// Accepts connections until aborted; each is served by its own task, which dies with this
/// one (the `JoinSet` aborts them when dropped). At the connection limit a newcomer takes
/// the place of a quiet connection ([`slots::Table::evict_for`]).
async fn serve(listener: TcpListener, router: Router, limits: Limits) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let table = slots::Table::default();
    let mut conns = JoinSet::new();
    let mut burst = RefusalBurst::default();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let permit = match Arc::clone(&slots).try_acquire_owned() {
                        Ok(p) => p,
                        Err(_) => {
                            if !table.evict_for(peer.ip(), limits.max_per_peer) {
                                burst.note(peer, "every connection is serving a request");
                                continue;
                            }
                            // The closed connection's task gives its slot back at once.
                            let wait = Arc::clone(&slots).acquire_owned();
                            match tokio::time::timeout(Duration::from_secs(1), wait).await {
                                Ok(Ok(p)) => p,
                                _ => {
                                    burst.note(peer, "no slot freed up");
                                    continue;
                                }
                            }
                        }
                    };
                    let (id, close) = table.add(peer.ip(), std::time::Instant::now());
                    let router = router.clone();
                    let marks = table.clone();
                    let service = hyper::service::service_fn(
                        move |mut req: hyper::Request<hyper::body::Incoming>| {
                            req.extensions_mut().insert(Peer(peer));
                            marks.begin(id);
                            let marks = marks.clone();
                            let call = router.clone().oneshot(req);
                            async move {
                                let r = call.await;
                                marks.end(id, std::time::Instant::now());
                                r
                            }
                        },
                    );
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(limits.header_timeout)
                        .max_buf_size(limits.max_head.max(8192))
                        .serve_connection(TokioIo::new(stream), service);
                    let table = table.clone();
                    conns.spawn(async move {
                        let _permit = permit;
                        tokio::select! {
                            r = tokio::time::timeout(limits.connection_lifetime, conn) => match r {
                                Ok(Err(e)) => debug!("http: connection from {peer}: {e}"),
                                Err(_) => debug!("http: connection from {peer} held too long"),
                                Ok(Ok(())) => {}
                            },
                            () = close.cancelled() => {
                                debug!("http: closed a quiet connection from {peer} for a newcomer");
                            }
                        }
                        table.remove(id);
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    warn!("http: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// Newcomers refused because no connection could make room: one log line per burst.
#[derive(Debug, Default)]
struct RefusalBurst {
    last: Option<std::time::Instant>,
}

impl RefusalBurst {
    fn note(&mut self, peer: SocketAddr, why: &str) {
        let now = std::time::Instant::now();
        let quiet = self
            .last
            .is_none_or(|l| now.saturating_duration_since(l) >= Duration::from_secs(10));
        self.last = Some(now);
        if quiet {
            warn!("http: too many connections ({why}); refusing {peer} and others for a while");
        }
    }
}

#[cfg(test)]
mod tests;
