//! The GUI RPC server: TCP and Unix-socket listeners, one task per connection, and the
//! channel through which authorized requests reach the daemon.
//!
//! The server answers by itself everything that does not depend on the daemon's state
//! (authentication, framing, gating, unknown ops, `exchange_versions`). Every other request
//! becomes a [`Call`] sent over an `mpsc` channel; the daemon answers through the call's
//! `oneshot` sender with a reply body. A slow or silent client only ever blocks its own task.
//!
//! HTTP mode (the official client's `POST` with CORS `*`) is not served: a connection that
//! starts like an HTTP request gets `403` and is closed, so browsers cannot drive the daemon.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, UnixListener};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::access::{self, RemotePolicy};
use crate::auth::{self, Password};
use crate::framing::{FrameBuffer, MAX_REQUEST_BYTES};
use crate::reply::{self, Body};
use crate::request::Request;
use crate::session::{Action, ServerVersion, Session};

/// The official GUI RPC port.
pub const DEFAULT_PORT: u16 = 31416;

/// The Unix socket's default file name in the data directory.
pub const DEFAULT_SOCKET_NAME: &str = "boinc_socket";

/// How the TCP listener is set up.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Port to listen on; 0 picks a free one (see [`GuiRpcServer::tcp_addr`]).
    pub port: u16,
    /// Accept non-loopback peers (`<allow_remote_gui_rpc>`). Even then, if
    /// `remote_hosts_file` exists, only the hosts it lists are accepted.
    pub allow_remote: bool,
    /// `remote_hosts.cfg`, reread on every remote connection.
    pub remote_hosts_file: Option<PathBuf>,
    /// Address to bind; by default 127.0.0.1, or 0.0.0.0 when remote access is allowed.
    pub bind_ip: Option<IpAddr>,
    /// Keep retrying the bind this long (the official client retries for 30 s at boot, when
    /// the port may still be held by a previous instance).
    pub bind_retry_for: Duration,
}

impl TcpConfig {
    /// Loopback-only listener on `port`.
    pub fn local(port: u16) -> Self {
        Self {
            port,
            allow_remote: false,
            remote_hosts_file: None,
            bind_ip: None,
            bind_retry_for: Duration::ZERO,
        }
    }

    fn bind_addr(&self) -> SocketAddr {
        let ip = self.bind_ip.unwrap_or(if self.allow_remote {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        });
        SocketAddr::new(ip, self.port)
    }
}

impl Default for TcpConfig {
    fn default() -> Self {
        Self::local(DEFAULT_PORT)
    }
}

/// How the Unix-domain listener is set up.
#[derive(Debug, Clone)]
pub struct UnixConfig {
    /// Socket path (a stale socket there is replaced; any other file is an error).
    pub path: PathBuf,
    /// File mode of the socket: who may connect is decided by these permissions.
    pub mode: u32,
}

impl UnixConfig {
    /// `boinc_socket` in `data_dir`, usable by the owner and the group.
    pub fn in_data_dir(data_dir: &Path) -> Self {
        Self {
            path: data_dir.join(DEFAULT_SOCKET_NAME),
            mode: 0o660,
        }
    }
}

/// Everything the server needs to start.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// TCP listener, if any.
    pub tcp: Option<TcpConfig>,
    /// Unix-socket listener, if any.
    pub unix: Option<UnixConfig>,
    /// The GUI RPC password (see [`auth::load_or_create_password`]).
    pub password: Password,
    /// Version reported by `exchange_versions`.
    pub version: ServerVersion,
    /// Request size cap, terminator included.
    pub max_request_bytes: usize,
    /// Connections served at once. Bounds the memory a local process can pin with open
    /// connections (each may buffer up to the request cap); at the limit, the connection that
    /// has sent nothing for the longest is closed to let a new client in, so idle
    /// connections cannot lock clients out.
    pub max_connections: usize,
}

/// Default for [`ServerConfig::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

impl ServerConfig {
    /// TCP on the official port, loopback only, no Unix socket.
    pub fn new(password: Password) -> Self {
        Self {
            tcp: Some(TcpConfig::default()),
            unix: None,
            password,
            version: ServerVersion::default(),
            max_request_bytes: MAX_REQUEST_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Where a request came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerTransport {
    /// A TCP peer.
    Tcp(SocketAddr),
    /// A Unix-socket peer with its kernel-reported credentials.
    Unix {
        /// User id of the connecting process.
        uid: u32,
        /// Group id of the connecting process.
        gid: u32,
        /// Process id, when the kernel reports one.
        pid: Option<i32>,
    },
}

/// Facts about the connection a request came on.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    /// Unique per server: the daemon keys per-connection state on it (notice refresh flag,
    /// pending lookup/attach polls).
    pub connection_id: u64,
    /// Transport and address or credentials.
    pub transport: PeerTransport,
    /// Loopback or Unix socket.
    pub is_local: bool,
    /// The connection has authenticated (or no password is set).
    pub authorized: bool,
    /// The GUI's name from `exchange_versions`, if it sent one.
    pub client_name: Option<String>,
    /// Cancelled when the connection ends, so the daemon can drop per-connection state
    /// kept under `connection_id` (await it, or check `is_cancelled()` when pruning).
    pub closed: CancellationToken,
}

/// One request for the daemon. Answer it by sending the reply body (e.g.
/// [`reply::SUCCESS`], [`reply::error`], or a `<cc_status>` document) through `reply`;
/// the server frames it. Dropping `reply` answers `<error>request not handled</error>`.
#[derive(Debug)]
pub struct Call {
    /// The authorized, parsed request.
    pub request: Request,
    /// Who sent it.
    pub peer: PeerInfo,
    /// Where the reply body goes.
    pub reply: oneshot::Sender<Body>,
}

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The TCP listener could not be set up (the cause is part of the message, as the
    /// official client's "bind failed (98)" is).
    #[error("cannot listen on {addr}: {cause}")]
    TcpBind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        cause: io::Error,
    },
    /// The Unix socket could not be set up.
    #[error("cannot listen on Unix socket {path}: {cause}")]
    UnixBind {
        /// The path.
        path: PathBuf,
        /// The cause.
        cause: io::Error,
    },
    /// Something that is not a socket sits at the socket path.
    #[error("{path} exists and is not a socket")]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// Neither listener was configured.
    #[error("no GUI RPC listener configured")]
    NoListener,
}

/// State shared by all connection tasks.
#[derive(Debug)]
struct Shared {
    /// See [`ServerConfig::password`].
    password: Password,
    /// See [`ServerConfig::version`].
    version: ServerVersion,
    /// See [`ServerConfig::max_request_bytes`].
    max_request_bytes: usize,
    /// One permit per open connection (see [`ServerConfig::max_connections`]).
    connection_slots: Arc<Semaphore>,
    /// Open connections by id: when each last sent a request, and how to close it. When the
    /// server is full, the one quiet the longest is closed so a new client always gets in.
    open: Mutex<std::collections::HashMap<u64, (Instant, CancellationToken)>>,
    /// Where calls go.
    calls: mpsc::Sender<Call>,
    /// Next connection id.
    next_id: AtomicU64,
    /// Last time a refused peer was logged (at most one line per 10 minutes, as officially).
    last_refusal_log: Mutex<Option<Instant>>,
    /// Connections closed because the server was full, logged one line per burst.
    evictions: Mutex<crate::evictions::EvictionBursts>,
    /// The TCP settings, for the remote access check.
    tcp: Option<TcpConfig>,
}

/// A running GUI RPC server.
#[derive(Debug)]
pub struct GuiRpcServer {
    /// Bound TCP address, if listening on TCP.
    tcp_addr: Option<SocketAddr>,
    /// Unix socket path, if listening on one (removed on shutdown).
    unix_path: Option<PathBuf>,
    /// Tracks the listener and connection tasks.
    tracker: TaskTracker,
    /// Stops everything; a child of the token given to `start`.
    token: CancellationToken,
}

impl GuiRpcServer {
    /// Binds the configured listeners and starts serving. Cancelling `shutdown` (or calling
    /// [`GuiRpcServer::shutdown`]) stops accepting and closes every connection; then
    /// [`GuiRpcServer::wait`] returns once all tasks have ended.
    ///
    /// A listener that cannot be set up is reported at once, with its cause, and the other
    /// one serves alone; an error is returned only when none can serve. A TCP port in use
    /// with [`TcpConfig::bind_retry_for`] set is tried again every second in the background
    /// meanwhile ([`GuiRpcServer::tcp_addr`] is `None` until it is bound).
    pub async fn start(
        config: ServerConfig,
        calls: mpsc::Sender<Call>,
        shutdown: CancellationToken,
    ) -> Result<GuiRpcServer, ServerError> {
        if config.tcp.is_none() && config.unix.is_none() {
            return Err(ServerError::NoListener);
        }
        if config.tcp.as_ref().is_some_and(|t| t.allow_remote) && !config.password.is_required() {
            tracing::warn!(
                "remote GUI RPC is allowed but no password is set: remote hosts get full control"
            );
        }
        let token = shutdown.child_token();
        let tracker = TaskTracker::new();
        let unix_result = config.unix.as_ref().map(bind_unix);
        let tcp_result = config
            .tcp
            .as_ref()
            .map(|tcp| try_bind_tcp(tcp.bind_addr()).map_err(|cause| (tcp, cause)));
        let unix_ok = matches!(unix_result, Some(Ok(_)));
        let mut retry_tcp = None;
        let tcp_listener = match tcp_result {
            Some(Ok(l)) => Some(l),
            Some(Err((tcp, cause))) => {
                let e = ServerError::TcpBind {
                    addr: tcp.bind_addr(),
                    cause,
                };
                if !tcp.bind_retry_for.is_zero() {
                    tracing::error!(
                        "GUI RPC: {e}; trying again every second for {} s{}",
                        tcp.bind_retry_for.as_secs(),
                        if unix_ok {
                            "; the Unix socket serves meanwhile"
                        } else {
                            ""
                        }
                    );
                    retry_tcp = Some(tcp.clone());
                } else if unix_ok {
                    tracing::error!("GUI RPC: {e}; serving on the Unix socket only");
                } else {
                    return Err(e);
                }
                None
            }
            None => None,
        };
        let unix_listener = match unix_result {
            Some(Ok(l)) => Some(l),
            Some(Err(e)) => {
                if tcp_listener.is_none() && retry_tcp.is_none() {
                    return Err(e);
                }
                tracing::error!("GUI RPC: {e}; serving on TCP only");
                None
            }
            None => None,
        };
        let shared = Arc::new(Shared {
            password: config.password,
            version: config.version,
            max_request_bytes: config.max_request_bytes,
            connection_slots: Arc::new(Semaphore::new(config.max_connections)),
            open: Mutex::new(std::collections::HashMap::new()),
            calls,
            next_id: AtomicU64::new(1),
            last_refusal_log: Mutex::new(None),
            evictions: Mutex::new(crate::evictions::EvictionBursts::default()),
            tcp: config.tcp,
        });
        let tcp_addr = match tcp_listener {
            Some(listener) => {
                let addr = listener
                    .local_addr()
                    .map_err(|cause| ServerError::TcpBind {
                        addr: shared.tcp.as_ref().map_or_else(
                            || SocketAddr::from(([127, 0, 0, 1], 0)),
                            TcpConfig::bind_addr,
                        ),
                        cause,
                    })?;
                tracing::info!(%addr, "GUI RPC listening on TCP");
                tracker.spawn(accept_tcp(
                    listener,
                    shared.clone(),
                    tracker.clone(),
                    token.clone(),
                ));
                Some(addr)
            }
            None => None,
        };
        if let Some(tcp) = retry_tcp {
            tracker.spawn(retry_bind_tcp(
                tcp,
                shared.clone(),
                tracker.clone(),
                token.clone(),
            ));
        }
        let unix_path = match unix_listener {
            Some(listener) => {
                let path = config.unix.map(|u| u.path).unwrap_or_default();
                tracing::info!(path = %path.display(), "GUI RPC listening on a Unix socket");
                tracker.spawn(accept_unix(
                    listener,
                    shared,
                    tracker.clone(),
                    token.clone(),
                ));
                Some(path)
            }
            None => None,
        };
        Ok(GuiRpcServer {
            tcp_addr,
            unix_path,
            tracker,
            token,
        })
    }

    /// The bound TCP address (with the real port when 0 was asked for).
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_addr
    }

    /// The Unix socket path.
    pub fn unix_path(&self) -> Option<&Path> {
        self.unix_path.as_deref()
    }

    /// Asks the server to stop (same as cancelling the token given to `start`).
    pub fn shutdown(&self) {
        self.token.cancel();
    }

    /// Waits until the server has stopped (after a shutdown) and removes the Unix socket.
    pub async fn wait(self) {
        self.token.cancelled().await;
        self.tracker.close();
        self.tracker.wait().await;
        if let Some(path) = &self.unix_path {
            if let Err(e) = std::fs::remove_file(path) {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::warn!(path = %path.display(), error = %e, "cannot remove GUI RPC socket");
                }
            }
        }
    }
}

/// Tries the TCP port again every second until it binds (then serves it), the retry period
/// ends (then says so) or the server stops.
async fn retry_bind_tcp(
    config: TcpConfig,
    shared: Arc<Shared>,
    tracker: TaskTracker,
    token: CancellationToken,
) {
    let addr = config.bind_addr();
    let deadline = Instant::now() + config.bind_retry_for;
    loop {
        tokio::select! {
            () = token.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        match try_bind_tcp(addr) {
            Ok(listener) => {
                let addr = listener.local_addr().unwrap_or(addr);
                tracing::info!(%addr, "GUI RPC listening on TCP");
                accept_tcp(listener, shared, tracker, token).await;
                return;
            }
            Err(cause) if Instant::now() >= deadline => {
                let e = ServerError::TcpBind { addr, cause };
                tracing::error!(
                    "GUI RPC: {e}; gave up after {} s: no GUI RPC on TCP until restarted",
                    config.bind_retry_for.as_secs()
                );
                return;
            }
            Err(_) => {}
        }
    }
}

fn try_bind_tcp(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(999)
}

fn bind_unix(config: &UnixConfig) -> Result<UnixListener, ServerError> {
    let path = &config.path;
    let err = |cause| ServerError::UnixBind {
        path: path.clone(),
        cause,
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path).map_err(err)?,
        Ok(_) => return Err(ServerError::NotASocket { path: path.clone() }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    // Bind under a random name, set the mode, then move it into place: nobody can connect
    // while the socket still has the umask's permissions.
    let dir = path.parent().unwrap_or(Path::new("."));
    let staging = dir.join(format!(
        ".{}.{}",
        DEFAULT_SOCKET_NAME,
        auth::random_password()
    ));
    let listener = UnixListener::bind(&staging).map_err(err)?;
    let placed = std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(config.mode))
        .and_then(|()| std::fs::rename(&staging, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&staging);
        return Err(err(e));
    }
    Ok(listener)
}

async fn accept_tcp(
    listener: TcpListener,
    shared: Arc<Shared>,
    tracker: TaskTracker,
    token: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            () = token.cancelled() => return,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((stream, addr)) => {
                let shared = shared.clone();
                let token = token.clone();
                tracker.spawn(async move {
                    let Some(_slot) = acquire_slot(&shared).await else {
                        return;
                    };
                    let allowed = match &shared.tcp {
                        Some(tcp) => tcp_peer_allowed(tcp, addr.ip()).await,
                        None => false,
                    };
                    if !allowed {
                        log_refusal(&shared, addr);
                        return;
                    }
                    let _ = stream.set_nodelay(true);
                    let is_local = access::is_local(addr.ip());
                    serve(stream, PeerTransport::Tcp(addr), is_local, shared, token).await;
                });
            }
            Err(e) => {
                // Out of file descriptors and similar: back off instead of spinning.
                tracing::warn!(error = %e, "GUI RPC accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// The access decision made for every accepted TCP peer: loopback always; others only with
/// `allow_remote`, and then only those in `remote_hosts_file` when that file exists (an
/// unreadable file admits no remote host).
pub async fn tcp_peer_allowed(tcp: &TcpConfig, ip: IpAddr) -> bool {
    if access::is_local(ip) {
        return true;
    }
    if !tcp.allow_remote {
        return false;
    }
    let listed = match &tcp.remote_hosts_file {
        Some(path) => match access::load_allowed_hosts(path).await {
            Ok(list) => list,
            Err(e) => {
                // A file we cannot read must not open the door to everyone.
                tracing::warn!(path = %path.display(), error = %e, "cannot read remote_hosts.cfg");
                Some(Vec::new())
            }
        },
        None => None,
    };
    match listed {
        Some(list) => access::peer_allowed(ip, &RemotePolicy::Listed, &list),
        None => access::peer_allowed(ip, &RemotePolicy::AnyHost, &[]),
    }
}

/// A connection slot. When the server is full, the connection that has been quiet the
/// longest is closed to make room, so idle connections can never lock clients out; `None`
/// only if no slot frees up within a second.
async fn acquire_slot(shared: &Shared) -> Option<OwnedSemaphorePermit> {
    if let Ok(slot) = shared.connection_slots.clone().try_acquire_owned() {
        return Some(slot);
    }
    // Taken out of the table at once, so concurrent newcomers each pick a different one.
    let victim = shared.open.lock().ok().and_then(|mut open| {
        let id = open
            .iter()
            .min_by_key(|(_, (last, _))| *last)
            .map(|(id, _)| *id)?;
        open.remove(&id).map(|(_, evict)| (id, evict))
    });
    match victim {
        Some((id, evict)) => {
            let line = shared
                .evictions
                .lock()
                .ok()
                .and_then(|mut b| b.note(Instant::now()));
            if let Some(line) = line {
                tracing::info!(connection_id = id, "{line}");
            }
            evict.cancel();
        }
        None => tracing::warn!("too many GUI RPC connections; none can be closed"),
    }
    let wait = shared.connection_slots.clone().acquire_owned();
    tokio::time::timeout(Duration::from_secs(1), wait)
        .await
        .ok()?
        .ok()
}

/// Forgets a connection in [`Shared::open`] when its task ends, however it ends.
struct Registered<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Registered<'_> {
    fn touch(&self) {
        if let Ok(mut open) = self.shared.open.lock() {
            if let Some(entry) = open.get_mut(&self.id) {
                entry.0 = Instant::now();
            }
        }
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if let Ok(mut open) = self.shared.open.lock() {
            open.remove(&self.id);
        }
    }
}

fn log_refusal(shared: &Shared, addr: SocketAddr) {
    let Ok(mut last) = shared.last_refusal_log.lock() else {
        return;
    };
    let now = Instant::now();
    if last.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(600)) {
        *last = Some(now);
        tracing::warn!(peer = %addr, "GUI RPC request from non-allowed address refused");
    }
}

async fn accept_unix(
    listener: UnixListener,
    shared: Arc<Shared>,
    tracker: TaskTracker,
    token: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            () = token.cancelled() => return,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((stream, _)) => {
                let transport = match stream.peer_cred() {
                    Ok(cred) => PeerTransport::Unix {
                        uid: cred.uid(),
                        gid: cred.gid(),
                        pid: cred.pid(),
                    },
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read GUI RPC peer credentials; refusing");
                        continue;
                    }
                };
                if let PeerTransport::Unix { uid, gid, pid } = &transport {
                    tracing::info!(uid, gid, pid, "GUI RPC connection on the Unix socket");
                }
                let (shared, token) = (shared.clone(), token.clone());
                tracker.spawn(async move {
                    let Some(_slot) = acquire_slot(&shared).await else {
                        return;
                    };
                    serve(stream, transport, true, shared, token).await;
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "GUI RPC accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Methods that mark a connection as HTTP.
const HTTP_METHODS: &[&[u8]] = &[
    b"GET ",
    b"POST ",
    b"OPTIONS ",
    b"HEAD ",
    b"PUT ",
    b"DELETE ",
    b"PATCH ",
];

const HTTP_REFUSAL: &[u8] =
    b"HTTP/1.0 403 Forbidden\r\nServer: Ferrite\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

/// Serves one connection until the peer leaves, breaks a rule, or the server stops.
async fn serve<S>(
    mut stream: S,
    transport: PeerTransport,
    is_local: bool,
    shared: Arc<Shared>,
    token: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let connection_id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let evict = CancellationToken::new();
    if let Ok(mut open) = shared.open.lock() {
        open.insert(connection_id, (Instant::now(), evict.clone()));
    }
    let registered = Registered {
        shared: &shared,
        id: connection_id,
    };
    let closed = CancellationToken::new();
    let _cancel_on_return = closed.clone().drop_guard();
    let mut session = Session::new(shared.password.clone(), is_local, shared.version);
    let mut frames = FrameBuffer::new(shared.max_request_bytes);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        loop {
            let request = match frames.next_request() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(connection_id, error = %e, "closing GUI RPC connection");
                    return;
                }
            };
            registered.touch();
            let text = String::from_utf8_lossy(&request);
            let (body, close) = match session.handle(&text, auth::random_nonce) {
                Action::Reply { body, close } => (Body::from(body), close),
                Action::Dispatch(request) => {
                    let peer = PeerInfo {
                        connection_id,
                        transport: transport.clone(),
                        is_local,
                        authorized: session.is_authorized(),
                        client_name: session.client_name().map(str::to_owned),
                        closed: closed.clone(),
                    };
                    match dispatch(&shared.calls, request, peer, &token).await {
                        Some(body) => (body, false),
                        None => return,
                    }
                }
            };
            let written = tokio::select! {
                biased;
                r = write_framed(&mut stream, &body) => r,
                () = token.cancelled() => return,
            };
            if written.is_err() {
                return;
            }
            if close {
                let _ = stream.shutdown().await;
                return;
            }
        }
        if frames.len() >= 3 && HTTP_METHODS.iter().any(|m| frames.peek().starts_with(m)) {
            tracing::info!(connection_id, "refusing HTTP on the GUI RPC port");
            let _ = stream.write_all(HTTP_REFUSAL).await;
            let _ = stream.shutdown().await;
            return;
        }
        let n = tokio::select! {
            () = token.cancelled() => return,
            () = evict.cancelled() => return,
            r = stream.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
        };
        frames.push(&buf[..n]);
    }
}

/// Pieces handed to one vectored write at most (Linux takes up to 1,024).
const MAX_SLICES: usize = 512;

/// Writes `body` framed as a reply, without copying it into a framed buffer first (a
/// `get_state` body of a large state is megabytes, in thousands of pieces): the opening
/// line, the body's pieces and the closing line with its 0x03 go out in vectored writes.
async fn write_framed<S>(stream: &mut S, body: &Body) -> io::Result<()>
where
    S: AsyncWrite + Unpin,
{
    const OPEN: &[u8] = reply::REPLY_OPEN.as_bytes();
    const CLOSE: &[u8] = b"</boinc_gui_rpc_reply>\n\x03";
    debug_assert_eq!(&CLOSE[..CLOSE.len() - 1], reply::REPLY_CLOSE.as_bytes());
    let pieces = body.parts();
    // The piece the next write starts in (0: the opening line, 1..=n: the body's pieces,
    // n + 1: the closing line) and how much of it is written already.
    let piece = |i: usize| -> &[u8] {
        match i {
            0 => OPEN,
            i if i <= pieces.len() => &pieces[i - 1],
            _ => CLOSE,
        }
    };
    let last = pieces.len() + 1;
    let (mut at, mut skip) = (0usize, 0usize);
    while at <= last {
        let mut slices = Vec::with_capacity(MAX_SLICES.min(last + 1 - at));
        slices.push(io::IoSlice::new(&piece(at)[skip..]));
        slices.extend(
            (at + 1..=last)
                .take(MAX_SLICES - 1)
                .map(|i| io::IoSlice::new(piece(i))),
        );
        let mut n = stream.write_vectored(&slices).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        // Move past what was written.
        while n > 0 && at <= last {
            let left = piece(at).len() - skip;
            if n >= left {
                n -= left;
                at += 1;
                skip = 0;
            } else {
                skip += n;
                n = 0;
            }
        }
    }
    stream.flush().await
}

/// Sends a call to the daemon and waits for its answer; `None` when the server is stopping.
async fn dispatch(
    calls: &mpsc::Sender<Call>,
    request: Request,
    peer: PeerInfo,
    token: &CancellationToken,
) -> Option<Body> {
    let (reply_tx, reply_rx) = oneshot::channel();
    let call = Call {
        request,
        peer,
        reply: reply_tx,
    };
    let sent = tokio::select! {
        biased;
        r = calls.send(call) => r,
        () = token.cancelled() => return None,
    };
    if sent.is_err() {
        return Some(reply::error("client is shutting down").into());
    }
    tokio::select! {
        // A reply sent just before shutdown (e.g. to `quit`) still goes out.
        biased;
        r = reply_rx => Some(r.unwrap_or_else(|_| reply::error("request not handled").into())),
        () = token.cancelled() => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A peer that takes at most a few bytes per write (a different amount each time),
    /// across as many of the write's slices as those bytes reach.
    struct Trickle {
        got: Vec<u8>,
        writes: usize,
        most_slices: usize,
    }

    impl Trickle {
        fn room(&self) -> usize {
            [1, 7, 64, 3, 900, 4096][self.writes % 6]
        }
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.room());
            self.writes += 1;
            self.got.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let mut room = self.room();
            self.writes += 1;
            self.most_slices = self.most_slices.max(bufs.len());
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(room);
                self.got.extend_from_slice(&b[..take]);
                n += take;
                room -= take;
                if room == 0 {
                    break;
                }
            }
            Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_body_of_many_pieces_goes_out_whole_through_short_writes() {
        let shared = Bytes::from_static(b"<result>\n    <name>r</name>\n</result>\n");
        let mut body = Body::new();
        let mut want = reply::REPLY_OPEN.as_bytes().to_vec();
        for i in 0..1500 {
            let own = Bytes::from(format!("<n>{i}</n>\n"));
            want.extend_from_slice(&own);
            want.extend_from_slice(&shared);
            body.push(own);
            body.push(shared.clone());
        }
        want.extend_from_slice(reply::REPLY_CLOSE.as_bytes());
        want.push(crate::framing::TERMINATOR);
        let mut peer = Trickle {
            got: Vec::new(),
            writes: 0,
            most_slices: 0,
        };
        write_framed(&mut peer, &body).await.unwrap();
        assert_eq!(peer.got, want);
        assert!(peer.most_slices <= MAX_SLICES, "{}", peer.most_slices);
        assert!(peer.most_slices > 1, "vectored writes");
        // An empty body is the two lines.
        let mut peer = Trickle {
            got: Vec::new(),
            writes: 0,
            most_slices: 0,
        };
        write_framed(&mut peer, &Body::new()).await.unwrap();
        assert_eq!(peer.got, reply::frame(""));
    }
}
