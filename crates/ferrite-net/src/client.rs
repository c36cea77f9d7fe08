//! The HTTP client: one `reqwest` client configured the way BOINC's client talks to
//! projects (user agent, connect and idle timeouts, proxies from cc_config, redirects to
//! http(s) only), the typed errors of one HTTP episode, and the text exchanges: GETs of
//! master pages and web RPCs, and the scheduler RPC POST.

use std::time::Duration;

use ferrite_proto::client_state::ClientVersion;
use futures_util::StreamExt as _;
use reqwest::header::{HeaderValue, ACCEPT_LANGUAGE, CONTENT_TYPE};

/// The content type the official client (curl with `POSTFIELDS`) gives scheduler RPCs and
/// upload-handler requests, as captured on the wire.
pub const SCHEDULER_CONTENT_TYPE: &str = "application/x-www-form-urlencoded";

/// BOINC's `ERR_HTTP_TRANSIENT`.
pub const ERR_HTTP_TRANSIENT: i32 = -184;
/// BOINC's `ERR_HTTP_PERMANENT`.
pub const ERR_HTTP_PERMANENT: i32 = -224;
/// BOINC's `ERR_CONNECT`.
pub const ERR_CONNECT: i32 = -107;
/// BOINC's `ERR_TIMEOUT`.
pub const ERR_TIMEOUT: i32 = -182;
/// BOINC's `ERR_FILE_TOO_BIG`.
pub const ERR_FILE_TOO_BIG: i32 = -131;

/// `BOINC client (<platform> <maj>.<min>.<rel>)`, plus ` (<brand>)` when branded.
pub fn boinc_user_agent(platform: &str, version: ClientVersion, brand: Option<&str>) -> String {
    let mut ua = format!(
        "BOINC client ({platform} {}.{}.{})",
        version.major, version.minor, version.release
    );
    if let Some(b) = brand.filter(|b| !b.is_empty()) {
        ua.push_str(&format!(" ({b})"));
    }
    ua
}

/// One proxy server from cc_config (`<proxy_info>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyServer {
    /// Host name or address (`http_server_name` / `socks_server_name`).
    pub host: String,
    /// Port (`http_server_port` / `socks_server_port`).
    pub port: u16,
    /// User name, when the proxy needs authentication.
    pub user: Option<String>,
    /// Password, with `user`.
    pub password: Option<String>,
}

/// Proxy settings from cc_config. Like BOINC, an HTTP proxy wins over a SOCKS one. With
/// neither, no proxy is used at all (environment variables are ignored, so the daemon's
/// behaviour depends only on its configuration).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyConfig {
    /// `use_http_proxy`: the HTTP proxy.
    pub http: Option<ProxyServer>,
    /// `use_socks_proxy`: the SOCKS5 proxy.
    pub socks: Option<ProxyServer>,
    /// `no_proxy`: hosts reached directly (comma-separated in cc_config).
    pub no_proxy: Vec<String>,
}

/// How the client talks HTTP.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The `User-Agent` header (see [`boinc_user_agent`]).
    pub user_agent: String,
    /// `Accept-Language`, when the user's language is known.
    pub accept_language: Option<String>,
    /// Giving up on establishing a connection (BOINC: 120 s).
    pub connect_timeout: Duration,
    /// Giving up when no byte arrives for this long, so a server that hangs is cut off
    /// (BOINC: `http_transfer_timeout`, 300 s).
    pub read_timeout: Duration,
    /// A file transfer slower than this many bytes a second on average over a whole
    /// `read_timeout` is given up (BOINC: `http_transfer_timeout_bps`, 10; 0 = never).
    pub low_speed_bps: f64,
    /// Largest scheduler reply or web RPC text accepted; bigger ones are refused with
    /// [`NetError::TooLarge`] before they are read whole.
    pub max_text_bytes: u64,
    /// Proxies.
    pub proxy: ProxyConfig,
}

impl HttpConfig {
    /// BOINC's defaults with the given user agent; the reply cap is 64 MiB.
    pub fn new(user_agent: impl Into<String>) -> HttpConfig {
        HttpConfig {
            user_agent: user_agent.into(),
            accept_language: None,
            connect_timeout: Duration::from_secs(120),
            read_timeout: Duration::from_secs(300),
            low_speed_bps: 10.0,
            max_text_bytes: 64 << 20,
            proxy: ProxyConfig::default(),
        }
    }
}

/// A failed HTTP episode.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The HTTP client could not be set up (bad proxy URL, TLS back end).
    #[error("setting up the HTTP client")]
    Build(#[source] reqwest::Error),
    /// The URL is not an http(s) URL.
    #[error("not an http(s) URL: {url}")]
    BadUrl {
        /// The URL.
        url: String,
    },
    /// No connection could be made.
    #[error("cannot connect to {url}")]
    Connect {
        /// The URL.
        url: String,
        /// What failed.
        #[source]
        source: reqwest::Error,
    },
    /// The server stopped answering for longer than the read timeout.
    #[error("timed out talking to {url}")]
    Timeout {
        /// The URL.
        url: String,
    },
    /// The transfer moved fewer bytes a second than `http_transfer_timeout_bps` over a whole
    /// `http_transfer_timeout`.
    #[error("transfer with {url} slower than {min_bps} B/s for {secs} s ({bps:.1} B/s)")]
    TooSlow {
        /// The URL.
        url: String,
        /// The limit, bytes a second.
        min_bps: f64,
        /// The window, seconds.
        secs: u64,
        /// The speed seen, bytes a second.
        bps: f64,
    },
    /// The server answered with a non-success status.
    #[error("HTTP status {status} from {url}")]
    Status {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// The reply is larger than allowed.
    #[error("reply from {url} is larger than {limit} bytes")]
    TooLarge {
        /// The URL.
        url: String,
        /// The limit.
        limit: u64,
    },
    /// The reply text is not UTF-8.
    #[error("reply from {url} is not UTF-8")]
    NotUtf8 {
        /// The URL.
        url: String,
    },
    /// A redirect that is not followed: the chain is longer than [`MAX_REDIRECTS`] hops.
    #[error("{reason}, starting at {url}")]
    Redirect {
        /// The URL first asked for.
        url: String,
        /// Why (`too many redirects (50)`).
        reason: String,
    },
    /// Any other failure during the exchange (reset connection, bad framing).
    #[error("HTTP exchange with {url} failed")]
    Transfer {
        /// The URL.
        url: String,
        /// What failed.
        #[source]
        source: reqwest::Error,
    },
}

impl NetError {
    /// The BOINC error code a file transfer or RPC records for this failure.
    pub fn boinc_code(&self) -> i32 {
        match self {
            NetError::Status { status, .. } if *status >= 500 => ERR_HTTP_TRANSIENT,
            NetError::Status { .. } => ERR_HTTP_PERMANENT,
            NetError::Connect { .. } => ERR_CONNECT,
            NetError::Timeout { .. } | NetError::TooSlow { .. } => ERR_TIMEOUT,
            NetError::TooLarge { .. } => ERR_FILE_TOO_BIG,
            NetError::BadUrl { .. } => ERR_HTTP_PERMANENT,
            NetError::Build(_)
            | NetError::NotUtf8 { .. }
            | NetError::Redirect { .. }
            | NetError::Transfer { .. } => ERR_HTTP_TRANSIENT,
        }
    }

    /// Whether BOINC counts it as permanent for a download (4xx and other non-5xx
    /// statuses, unusable URLs); everything else is worth retrying later.
    pub fn is_permanent(&self) -> bool {
        self.boinc_code() == ERR_HTTP_PERMANENT
    }

    pub(crate) fn from_reqwest(url: &str, e: reqwest::Error) -> NetError {
        let url = url.to_owned();
        if e.is_timeout() {
            NetError::Timeout { url }
        } else if e.is_connect() {
            NetError::Connect { url, source: e }
        } else if e.is_builder() {
            NetError::BadUrl { url }
        } else if e.is_redirect() {
            // The redirect policy's own words are the innermost cause.
            let mut reason = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                reason = c.to_string();
                cause = c.source();
            }
            NetError::Redirect { url, reason }
        } else {
            NetError::Transfer { url, source: e }
        }
    }
}

/// The shared HTTP client. Cheap to clone (one connection pool); give every task a clone.
#[derive(Debug, Clone)]
pub struct HttpClient {
    /// The configured reqwest client.
    pub(crate) inner: reqwest::Client,
    /// The same without reqwest's read timeout, for uploads.
    pub(crate) uploads: reqwest::Client,
    /// Download bandwidth limit, shared by every clone.
    pub(crate) down: std::sync::Arc<crate::throttle::Throttle>,
    /// Upload bandwidth limit, shared by every clone.
    pub(crate) up: std::sync::Arc<crate::throttle::Throttle>,
    /// The settings it was built with (timeouts and caps are applied per read).
    pub(crate) config: HttpConfig,
    /// Bytes of the texts exchanged (scheduler requests and replies, web pages), shared by
    /// every clone; file bodies are counted by their transfers.
    pub(crate) text_bytes: std::sync::Arc<TextBytes>,
}

/// Bytes sent and received in text exchanges since they were last taken.
#[derive(Debug, Default)]
pub(crate) struct TextBytes {
    down: std::sync::atomic::AtomicU64,
    up: std::sync::atomic::AtomicU64,
}

/// The proxy URL, credentials in its user part (reqwest reads them from there for both
/// HTTP basic auth and SOCKS5 auth).
fn proxy_url(scheme: &str, p: &ProxyServer) -> Option<reqwest::Url> {
    let mut u = reqwest::Url::parse(&format!("{scheme}://{}:{}", p.host, p.port)).ok()?;
    if let Some(user) = &p.user {
        u.set_username(user).ok()?;
        u.set_password(p.password.as_deref()).ok()?;
    }
    Some(u)
}

pub(crate) fn check_url(url: &str) -> Result<reqwest::Url, NetError> {
    match reqwest::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(u),
        _ => Err(NetError::BadUrl {
            url: url.to_owned(),
        }),
    }
}

/// Redirects followed in a row, as curl's and the official client's limit.
pub const MAX_REDIRECTS: usize = 50;

/// A reqwest client for `config`; `read_timeout` false for uploads, whose long request
/// bodies are watched by their own idle timer instead (reqwest's read timeout also runs
/// while a body is being sent, which would cut off slow but steady uploads).
fn build(config: &HttpConfig, read_timeout: bool) -> Result<reqwest::Client, NetError> {
    let redirects = reqwest::redirect::Policy::custom(|attempt| {
        // `previous` holds the URL first asked for and every redirect followed since.
        if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("too many redirects ({MAX_REDIRECTS})"))
        } else if !matches!(attempt.url().scheme(), "http" | "https") {
            attempt.error("redirect to a non-http(s) URL")
        } else {
            attempt.follow()
        }
    });
    let mut b = reqwest::Client::builder()
        .user_agent(config.user_agent.clone())
        .connect_timeout(config.connect_timeout)
        .redirect(redirects)
        .gzip(true)
        .no_proxy();
    let no_proxy = reqwest::NoProxy::from_string(&config.proxy.no_proxy.join(","));
    let chosen = match (&config.proxy.http, &config.proxy.socks) {
        (Some(p), _) => Some(("http", p)),
        (None, Some(p)) => Some(("socks5h", p)),
        (None, None) => None,
    };
    if let Some((scheme, p)) = chosen {
        let url = proxy_url(scheme, p).ok_or_else(|| NetError::BadUrl {
            url: format!("{scheme}://{}:{}", p.host, p.port),
        })?;
        let proxy = reqwest::Proxy::all(url).map_err(NetError::Build)?;
        b = b.proxy(proxy.no_proxy(no_proxy));
    }
    if let Some(lang) = &config.accept_language {
        if let Ok(v) = HeaderValue::from_str(lang) {
            let mut h = reqwest::header::HeaderMap::new();
            h.insert(ACCEPT_LANGUAGE, v);
            b = b.default_headers(h);
        }
    }
    if read_timeout {
        b = b.read_timeout(config.read_timeout);
    }
    b.build().map_err(NetError::Build)
}

impl HttpClient {
    /// Builds the client.
    pub fn new(config: HttpConfig) -> Result<HttpClient, NetError> {
        Ok(HttpClient {
            inner: build(&config, true)?,
            uploads: build(&config, false)?,
            down: Default::default(),
            up: Default::default(),
            config,
            text_bytes: Default::default(),
        })
    }

    /// Sets the bandwidth limits in bytes per second (prefs `max_bytes_sec_down` /
    /// `max_bytes_sec_up`; 0 = none). They apply to this client and all its clones, to
    /// transfers under way too, and cap the total of all transfers of a direction.
    pub fn set_bandwidth_limits(&self, down_bytes_sec: u64, up_bytes_sec: u64) {
        self.down.set_rate(down_bytes_sec);
        self.up.set_rate(up_bytes_sec);
    }

    /// The settings in force.
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// Sends a request, mapping failures and non-2xx statuses to [`NetError`].
    pub(crate) async fn send(
        &self,
        url: &str,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, NetError> {
        // reqwest's read timeout covers waiting for the headers; this bounds the whole
        // wait for them too.
        let wait = self.config.connect_timeout + self.config.read_timeout;
        self.send_within(url, req, Some(wait)).await
    }

    /// Sends a request, giving up after `wait` if given.
    pub(crate) async fn send_within(
        &self,
        url: &str,
        req: reqwest::RequestBuilder,
        wait: Option<Duration>,
    ) -> Result<reqwest::Response, NetError> {
        let sent = match wait {
            Some(w) => tokio::time::timeout(w, req.send()).await,
            None => Ok(req.send().await),
        };
        let resp = match sent {
            Ok(r) => r.map_err(|e| NetError::from_reqwest(url, e))?,
            Err(_) => {
                return Err(NetError::Timeout {
                    url: url.to_owned(),
                })
            }
        };
        let status = resp.status();
        if !status.is_success() {
            return Err(NetError::Status {
                url: url.to_owned(),
                status: status.as_u16(),
            });
        }
        Ok(resp)
    }

    /// Bytes (received, sent) in the text exchanges of this client and its clones since the
    /// last call: scheduler requests and replies, master pages, web RPCs, news feeds (the
    /// official client counts every HTTP body in its daily transfer history, not only the
    /// files').
    pub fn take_text_bytes(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering;
        (
            self.text_bytes.down.swap(0, Ordering::Relaxed),
            self.text_bytes.up.swap(0, Ordering::Relaxed),
        )
    }

    fn count_text(&self, down: usize, up: usize) {
        use std::sync::atomic::Ordering;
        let n = |x: usize| u64::try_from(x).unwrap_or(u64::MAX);
        self.text_bytes.down.fetch_add(n(down), Ordering::Relaxed);
        self.text_bytes.up.fetch_add(n(up), Ordering::Relaxed);
    }

    /// Reads a reply body as text, refusing more than `limit` bytes and bounding each
    /// wait for data by the read timeout.
    pub(crate) async fn read_text(
        &self,
        url: &str,
        resp: reqwest::Response,
        limit: u64,
    ) -> Result<String, NetError> {
        let too_large = || NetError::TooLarge {
            url: url.to_owned(),
            limit,
        };
        if resp.content_length().is_some_and(|n| n > limit) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        loop {
            let next = tokio::time::timeout(self.config.read_timeout, stream.next()).await;
            let chunk = match next {
                Err(_) => {
                    return Err(NetError::Timeout {
                        url: url.to_owned(),
                    })
                }
                Ok(None) => break,
                Ok(Some(c)) => c.map_err(|e| NetError::from_reqwest(url, e))?,
            };
            if body.len() as u64 + chunk.len() as u64 > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
            self.count_text(chunk.len(), 0);
        }
        String::from_utf8(body).map_err(|_| NetError::NotUtf8 {
            url: url.to_owned(),
        })
    }

    /// GETs a text: a master page, `get_project_config.php`, `lookup_account.php`,
    /// `create_account.php` (build those URLs with `ferrite_project::attach`).
    pub async fn get_text(&self, url: &str) -> Result<String, NetError> {
        check_url(url)?;
        let resp = self.send(url, self.inner.get(url)).await?;
        self.read_text(url, resp, self.config.max_text_bytes).await
    }

    /// A scheduler RPC: POSTs the `<scheduler_request>` text and returns the reply text
    /// (parse it with `ferrite_proto::sched_reply::SchedulerReply::parse`).
    pub async fn post_scheduler(&self, url: &str, request: String) -> Result<String, NetError> {
        check_url(url)?;
        self.count_text(0, request.len());
        let req = self
            .inner
            .post(url)
            .header(CONTENT_TYPE, SCHEDULER_CONTENT_TYPE)
            .body(request);
        let resp = self.send(url, req).await?;
        self.read_text(url, resp, self.config.max_text_bytes).await
    }

    /// `get_project_config.php` of a master URL, parsed.
    pub async fn get_project_config(
        &self,
        master_url: &str,
    ) -> Result<ferrite_project::attach::ProjectConfig, WebRpcFailure> {
        let text = self
            .get_text(&ferrite_project::attach::get_project_config_url(master_url))
            .await?;
        Ok(ferrite_project::attach::parse_project_config(&text)?)
    }

    /// A `lookup_account.php` or `create_account.php` URL (from `ferrite_project::attach`),
    /// fetched and parsed.
    pub async fn account_rpc(
        &self,
        url: &str,
    ) -> Result<ferrite_project::attach::AccountReply, WebRpcFailure> {
        let text = self.get_text(url).await?;
        Ok(ferrite_project::attach::parse_account_reply(&text)?)
    }
}

/// A web RPC that failed in transport or was answered with an error.
#[derive(Debug, thiserror::Error)]
pub enum WebRpcFailure {
    /// The HTTP exchange failed.
    #[error(transparent)]
    Net(#[from] NetError),
    /// The project answered with an error, or something unreadable.
    #[error(transparent)]
    Project(#[from] ferrite_project::attach::WebRpcError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_agent_matches_the_official_client() {
        let v = ClientVersion {
            major: 7,
            minor: 20,
            release: 5,
        };
        assert_eq!(
            boinc_user_agent("x86_64-pc-linux-gnu", v, None),
            "BOINC client (x86_64-pc-linux-gnu 7.20.5)"
        );
        assert_eq!(
            boinc_user_agent("x86_64-pc-linux-gnu", v, Some("Ferrite")),
            "BOINC client (x86_64-pc-linux-gnu 7.20.5) (Ferrite)"
        );
    }

    #[test]
    fn codes_follow_boinc() {
        let s = |status| NetError::Status {
            url: "u".into(),
            status,
        };
        assert_eq!(s(500).boinc_code(), ERR_HTTP_TRANSIENT);
        assert_eq!(s(503).boinc_code(), ERR_HTTP_TRANSIENT);
        assert_eq!(s(404).boinc_code(), ERR_HTTP_PERMANENT);
        assert!(s(404).is_permanent() && !s(502).is_permanent());
        assert_eq!(
            NetError::Timeout { url: "u".into() }.boinc_code(),
            ERR_TIMEOUT
        );
    }

    #[test]
    fn only_http_urls() {
        assert!(check_url("http://127.0.0.1/x").is_ok());
        assert!(check_url("https://example.invalid/").is_ok());
        assert!(matches!(
            check_url("file:///etc/passwd"),
            Err(NetError::BadUrl { .. })
        ));
        assert!(check_url("not a url").is_err());
    }

    #[test]
    fn proxies_build() {
        let mut c = HttpConfig::new("BOINC client (x 1.2.3)");
        c.proxy.socks = Some(ProxyServer {
            host: "127.0.0.1".into(),
            port: 1080,
            user: Some("u".into()),
            password: Some("p".into()),
        });
        c.proxy.no_proxy = vec!["localhost".into()];
        assert!(HttpClient::new(c.clone()).is_ok());
        c.proxy.http = Some(ProxyServer {
            host: "127.0.0.1".into(),
            port: 3128,
            user: None,
            password: None,
        });
        assert!(HttpClient::new(c).is_ok());
    }
}
