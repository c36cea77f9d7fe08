//! The opt-in metrics endpoint: the client's state rendered as OpenMetrics text (the format
//! Prometheus scrapes) and a tiny loopback-only HTTP server that serves it at `/metrics`.
//!
//! The main loop owns the state, so it renders the text itself ([`render`], cheap and pure
//! apart from reading `/proc/self`) and publishes it through a `tokio::sync::watch` channel;
//! the server ([`MetricsServer`]) only hands out the latest text and never touches the state.
//!
//! Metric names follow the existing BOINC exporters (`boinc_tasks`, `boinc_project_*`,
//! `boinc_host_*` credit gauges) and the Prometheus client libraries' `process_*` metrics.
//! One departure: task counts are the gauge `boinc_tasks{state=…}`, not a gauge called
//! `boinc_tasks_total`, because OpenMetrics keeps the `_total` suffix for counters.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ferrite_proto::client_state::{ActiveTask, ClientState, ProjectState, ResultState, TaskResult};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tracing::{debug, warn};

use crate::tasks::PROCESS_EXECUTING;

/// The media type of OpenMetrics text, as sent in `Content-Type`.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The task states `boinc_tasks` counts, each task in exactly one.
pub const TASK_STATES: [&str; 9] = [
    "downloading",
    "ready",
    "running",
    "suspended",
    "uploading",
    "ready_to_report",
    "reported",
    "error",
    "aborted",
];

/// Scheduler RPC counts for one project since the daemon started (the state file keeps only
/// the consecutive failures, so the daemon counts these itself).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectRpcCounters {
    /// The project's master URL, as in the state.
    pub url: String,
    /// Scheduler RPCs attempted.
    pub rpcs: u64,
    /// Of those, the ones that failed (no reply, or a reply that could not be used).
    pub failures: u64,
}

/// What the daemon knows that the metrics show; borrowed for one render.
#[derive(Debug, Clone)]
pub struct MetricsInput<'a> {
    /// The client state: projects with their results, active tasks, host info.
    pub state: &'a ClientState,
    /// CPU instances busy with running tasks (fractional for tasks that use less than one).
    pub busy_cpus: f64,
    /// GPU instances busy with running tasks.
    pub busy_gpus: f64,
    /// Saturated seconds of work queued per resource (`CPU`, `NVIDIA`, …), from the
    /// scheduling core's simulation: how long every instance stays busy without new work.
    pub work_buffer_secs: Vec<(String, f64)>,
    /// Scheduler RPC counters per project.
    pub rpc: &'a [ProjectRpcCounters],
    /// Bytes downloaded since the daemon started.
    pub transfer_bytes_down: u64,
    /// Bytes uploaded since the daemon started.
    pub transfer_bytes_up: u64,
    /// Bytes the client's files use (projects, slots, client files).
    pub disk_used: f64,
    /// Bytes the preferences allow the client to use (the binding limit).
    pub disk_allowed: f64,
}

/// Which of [`TASK_STATES`] a result is in. `active` is its active-task entry, if any.
///
/// Precedence: acknowledged results are `reported`; failed and aborted ones stay `error` or
/// `aborted` until then (even when ready to report); a done result is `ready_to_report`; a
/// runnable one is `running` when its process executes, `suspended` when the user suspended
/// it or its project, `ready` otherwise (waiting to run or preempted).
pub fn task_state(
    project: &ProjectState,
    result: &TaskResult,
    active: Option<&ActiveTask>,
) -> &'static str {
    if result.got_server_ack {
        return "reported";
    }
    match result.state {
        ResultState::ComputeError | ResultState::UploadFailed => "error",
        ResultState::Aborted => "aborted",
        _ if result.ready_to_report => "ready_to_report",
        ResultState::FilesUploaded => "ready_to_report",
        ResultState::FilesUploading => "uploading",
        ResultState::New | ResultState::FilesDownloading => "downloading",
        ResultState::FilesDownloaded => {
            if active.is_some_and(|a| a.active_task_state == PROCESS_EXECUTING) {
                "running"
            } else if result.suspended_via_gui || project.project.suspended_via_gui {
                "suspended"
            } else {
                "ready"
            }
        }
    }
}

/// The kind of a metric family.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Gauge,
    Counter,
}

/// OpenMetrics text under construction.
struct Text {
    out: String,
}

impl Text {
    /// Starts a family: `# TYPE`, `# UNIT` (when the name ends in a unit) and `# HELP`.
    fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind = match kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        };
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
        for unit in ["seconds", "bytes"] {
            if name.ends_with(&format!("_{unit}")) {
                let _ = writeln!(self.out, "# UNIT {name} {unit}");
            }
        }
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
    }

    /// One sample line: `name{labels} value`.
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        self.out.push(' ');
        self.out.push_str(&format_value(value));
        self.out.push('\n');
    }

    /// A counter sample (`name_total`); counters are whole numbers here.
    fn counter(&mut self, family: &str, labels: &[(&str, &str)], value: u64) {
        let _ = write!(self.out, "{family}_total");
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }
}

/// A label value as OpenMetrics wants it: `\`, `"` and newline escaped.
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// A HELP text: `\` and newline escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A number in OpenMetrics spelling (`NaN`, `+Inf`, `-Inf`, else Rust's shortest form).
fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v == f64::INFINITY {
        "+Inf".to_owned()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        format!("{v}")
    }
}

/// The `project` label: the project's name, or its URL before the name is known.
fn project_label(p: &ProjectState) -> &str {
    if p.project.project_name.is_empty() {
        &p.project.master_url
    } else {
        &p.project.project_name
    }
}

/// A per-project gauge's value, read from the project.
type ProjectFigure = fn(&ProjectState) -> f64;

/// Renders everything as OpenMetrics text, ending with `# EOF`. `now` is Unix time (for
/// backoffs, shown as seconds left).
pub fn render(input: &MetricsInput<'_>, now: f64) -> String {
    let state = input.state;
    let mut t = Text {
        out: String::with_capacity(4096),
    };
    let active: HashMap<(&str, &str), &ActiveTask> = state
        .active_tasks
        .iter()
        .map(|a| ((a.project_master_url.as_str(), a.result_name.as_str()), a))
        .collect();

    t.family(
        "boinc_tasks",
        Kind::Gauge,
        "Tasks by project and state (each task counted once).",
    );
    for p in &state.projects {
        let url = p.project.master_url.as_str();
        let mut counts = [0u64; TASK_STATES.len()];
        for r in &p.results {
            let s = task_state(p, r, active.get(&(url, r.name.as_str())).copied());
            if let Some(i) = TASK_STATES.iter().position(|x| *x == s) {
                counts[i] += 1;
            }
        }
        for (s, n) in TASK_STATES.iter().zip(counts) {
            t.sample(
                "boinc_tasks",
                &[("project", project_label(p)), ("url", url), ("state", s)],
                n as f64,
            );
        }
    }

    t.family(
        "boinc_cpus",
        Kind::Gauge,
        "Logical CPUs the client may use.",
    );
    t.sample("boinc_cpus", &[], f64::from(state.host_info.p_ncpus));
    t.family(
        "boinc_cpus_busy",
        Kind::Gauge,
        "CPU instances used by running tasks.",
    );
    t.sample("boinc_cpus_busy", &[], input.busy_cpus);
    t.family(
        "boinc_gpus_busy",
        Kind::Gauge,
        "GPU instances used by running tasks.",
    );
    t.sample("boinc_gpus_busy", &[], input.busy_gpus);

    t.family(
        "boinc_work_buffer_seconds",
        Kind::Gauge,
        "Seconds every instance of the resource stays busy with the work on hand.",
    );
    for (rsc, secs) in &input.work_buffer_secs {
        t.sample(
            "boinc_work_buffer_seconds",
            &[("resource", rsc.as_str())],
            *secs,
        );
    }

    t.family(
        "boinc_transfer_bytes",
        Kind::Counter,
        "Bytes transferred by file downloads and uploads since the client started.",
    );
    t.counter(
        "boinc_transfer_bytes",
        &[("direction", "download")],
        input.transfer_bytes_down,
    );
    t.counter(
        "boinc_transfer_bytes",
        &[("direction", "upload")],
        input.transfer_bytes_up,
    );

    // Projects for the RPC counters: those in the state, then any only the counters know
    // (detached since), so a counter never disappears while the daemon runs.
    let mut rpc_rows: Vec<(&str, &str, &ProjectRpcCounters)> = Vec::new();
    let zero = ProjectRpcCounters::default();
    let mut listed: HashSet<&str> = HashSet::new();
    for p in &state.projects {
        let url = p.project.master_url.as_str();
        let c = input.rpc.iter().find(|c| c.url == url).unwrap_or(&zero);
        rpc_rows.push((project_label(p), url, c));
        listed.insert(url);
    }
    for c in input.rpc {
        if listed.insert(c.url.as_str()) {
            rpc_rows.push((c.url.as_str(), c.url.as_str(), c));
        }
    }
    t.family(
        "boinc_project_scheduler_rpcs",
        Kind::Counter,
        "Scheduler RPCs made since the client started.",
    );
    for (name, url, c) in &rpc_rows {
        t.counter(
            "boinc_project_scheduler_rpcs",
            &[("project", name), ("url", url)],
            c.rpcs,
        );
    }
    t.family(
        "boinc_project_scheduler_rpc_failures",
        Kind::Counter,
        "Scheduler RPCs that failed since the client started.",
    );
    for (name, url, c) in &rpc_rows {
        t.counter(
            "boinc_project_scheduler_rpc_failures",
            &[("project", name), ("url", url)],
            c.failures,
        );
    }

    let per_project: [(&str, &str, ProjectFigure); 7] = [
        (
            "boinc_project_consecutive_rpc_failures",
            "Scheduler RPCs failed in a row (resets on success).",
            |p| f64::from(p.project.nrpc_failures),
        ),
        (
            "boinc_project_disk_usage_bytes",
            "Disk used by the project's files.",
            |p| p.project.disk_usage,
        ),
        (
            "boinc_project_total_credit",
            "Total credit of the account on the project.",
            |p| p.project.user_total_credit,
        ),
        (
            "boinc_project_avg_credit",
            "Recent average credit of the account on the project.",
            |p| p.project.user_expavg_credit,
        ),
        (
            "boinc_host_total_credit",
            "Total credit of this host on the project.",
            |p| p.project.host_total_credit,
        ),
        (
            "boinc_host_avg_credit",
            "Recent average credit of this host on the project.",
            |p| p.project.host_expavg_credit,
        ),
        (
            "boinc_project_suspended",
            "1 when the user suspended the project.",
            |p| f64::from(u8::from(p.project.suspended_via_gui)),
        ),
    ];
    for (name, help, value) in per_project {
        t.family(name, Kind::Gauge, help);
        for p in &state.projects {
            t.sample(
                name,
                &[
                    ("project", project_label(p)),
                    ("url", &p.project.master_url),
                ],
                value(p),
            );
        }
    }

    t.family(
        "boinc_project_rpc_backoff_seconds",
        Kind::Gauge,
        "Seconds until the next scheduler RPC is allowed (0 = none pending).",
    );
    for p in &state.projects {
        t.sample(
            "boinc_project_rpc_backoff_seconds",
            &[
                ("project", project_label(p)),
                ("url", &p.project.master_url),
            ],
            (p.project.min_rpc_time - now).max(0.0),
        );
    }
    t.family(
        "boinc_project_work_fetch_backoff_seconds",
        Kind::Gauge,
        "Seconds until the project may be asked for work for the resource again.",
    );
    for p in &state.projects {
        for b in &p.project.rsc_backoff {
            t.sample(
                "boinc_project_work_fetch_backoff_seconds",
                &[
                    ("project", project_label(p)),
                    ("url", &p.project.master_url),
                    ("resource", &b.name),
                ],
                (b.backoff_time - now).max(0.0),
            );
        }
    }

    t.family(
        "boinc_disk_usage_bytes",
        Kind::Gauge,
        "Disk used by the client and its projects.",
    );
    t.sample("boinc_disk_usage_bytes", &[], input.disk_used);
    t.family(
        "boinc_disk_allowed_bytes",
        Kind::Gauge,
        "Disk the preferences allow the client to use.",
    );
    t.sample("boinc_disk_allowed_bytes", &[], input.disk_allowed);

    if let Some(p) = ProcessStats::read() {
        t.family(
            "process_cpu_seconds",
            Kind::Counter,
            "CPU time used by the client process (user and system).",
        );
        let _ = writeln!(
            t.out,
            "process_cpu_seconds_total {}",
            format_value(p.cpu_seconds)
        );
        t.family(
            "process_resident_memory_bytes",
            Kind::Gauge,
            "Resident memory of the client process.",
        );
        t.sample("process_resident_memory_bytes", &[], p.resident_bytes);
        t.family(
            "process_virtual_memory_bytes",
            Kind::Gauge,
            "Virtual memory of the client process.",
        );
        t.sample("process_virtual_memory_bytes", &[], p.virtual_bytes);
        if let Some(start) = p.start_time {
            t.family(
                "process_start_time_seconds",
                Kind::Gauge,
                "When the client process started, Unix time.",
            );
            t.sample("process_start_time_seconds", &[], start);
        }
    }

    t.out.push_str("# EOF\n");
    t.out
}

/// The daemon's own resource use, from `/proc/self` (Linux).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    /// User plus system CPU time, seconds.
    pub cpu_seconds: f64,
    /// Resident set size, bytes.
    pub resident_bytes: f64,
    /// Virtual memory size, bytes.
    pub virtual_bytes: f64,
    /// Start time, Unix seconds (needs `btime` from `/proc/stat`).
    pub start_time: Option<f64>,
}

impl ProcessStats {
    /// Reads this process's figures; `None` where `/proc` is not there or not understood.
    pub fn read() -> Option<ProcessStats> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok();
        // SAFETY: sysconf only reads a configuration value; no pointers are involved.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        Self::parse(&stat, &statm, boot.as_deref(), ticks as f64, page as f64)
    }

    /// Parses `/proc/self/stat`, `/proc/self/statm` and (for `btime`) `/proc/stat`.
    fn parse(
        stat: &str,
        statm: &str,
        proc_stat: Option<&str>,
        ticks_per_sec: f64,
        page_size: f64,
    ) -> Option<ProcessStats> {
        if ticks_per_sec <= 0.0 || page_size <= 0.0 {
            return None;
        }
        // The command name is in parentheses and may hold spaces; fields follow the last ')'.
        let rest = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // `rest` starts at field 3 (state): utime is field 14, stime 15, starttime 22.
        let field = |n: usize| fields.get(n - 3).and_then(|s| s.parse::<f64>().ok());
        let cpu_seconds = (field(14)? + field(15)?) / ticks_per_sec;
        let mut m = statm.split_whitespace().map(|s| s.parse::<f64>().ok());
        let virtual_pages = m.next()??;
        let resident_pages = m.next()??;
        let btime = proc_stat.and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<f64>().ok())
        });
        let start_time = match (btime, field(22)) {
            (Some(b), Some(start)) => Some(b + start / ticks_per_sec),
            _ => None,
        };
        Some(ProcessStats {
            cpu_seconds,
            resident_bytes: resident_pages * page_size,
            virtual_bytes: virtual_pages * page_size,
            start_time,
        })
    }
}

/// How the server protects itself from slow, large or numerous requests.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// A connection must deliver its request and take the reply within this time.
    io_timeout: Duration,
    /// Request line and headers larger than this are refused (431).
    max_request: usize,
    /// Connections served at once; more are closed at once.
    max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            io_timeout: Duration::from_secs(5),
            max_request: 8 * 1024,
            max_connections: 64,
        }
    }
}

/// The metrics HTTP server: `GET /metrics` on a loopback address, from a watch channel.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl MetricsServer {
    /// Binds `addr` (loopback only; anything else is refused with `InvalidInput`, since the
    /// endpoint has no authentication) and serves the latest text of `text`.
    pub async fn start(
        addr: SocketAddr,
        text: watch::Receiver<String>,
    ) -> io::Result<MetricsServer> {
        Self::start_with(addr, text, Limits::default()).await
    }

    async fn start_with(
        addr: SocketAddr,
        text: watch::Receiver<String>,
        limits: Limits,
    ) -> io::Result<MetricsServer> {
        if !addr.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("metrics are served on loopback only, not on {addr}"),
            ));
        }
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(serve(listener, text, limits));
        Ok(MetricsServer { addr, task })
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

/// Accepts connections until aborted; each is served by its own task, which dies with this
/// one (the `JoinSet` aborts them when dropped).
async fn serve(listener: TcpListener, text: watch::Receiver<String>, limits: Limits) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                        debug!("metrics: too many connections; closing one from {peer}");
                        continue;
                    };
                    let text = text.clone();
                    conns.spawn(async move {
                        let _permit = permit;
                        let served = tokio::time::timeout(
                            limits.io_timeout,
                            handle(stream, text, limits.max_request),
                        )
                        .await;
                        match served {
                            Ok(Err(e)) => debug!("metrics: connection from {peer}: {e}"),
                            Err(_) => debug!("metrics: connection from {peer} timed out"),
                            Ok(Ok(())) => {}
                        }
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    warn!("metrics: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// Reads one request and answers it; the connection is closed after the reply.
async fn handle(
    mut stream: TcpStream,
    text: watch::Receiver<String>,
    max_request: usize,
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let head_end = loop {
        if let Some(end) = header_end(&buf) {
            break end;
        }
        if buf.len() > max_request {
            return reply(&mut stream, "431 Request Header Fields Too Large", "", b"").await;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    if head_end > max_request {
        return reply(&mut stream, "431 Request Header Fields Too Large", "", b"").await;
    }
    let head = String::from_utf8_lossy(&buf[..head_end]);
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next(), parts.next(), parts.next());
    let (Some(method), Some(target), Some(version)) = (method, target, version) else {
        return reply(&mut stream, "400 Bad Request", "", b"").await;
    };
    if !version.starts_with("HTTP/1.") {
        return reply(&mut stream, "400 Bad Request", "", b"").await;
    }
    let path = target.split('?').next().unwrap_or(target);
    if path != "/metrics" {
        return reply(&mut stream, "404 Not Found", "", b"not found\n").await;
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => {
            return reply(
                &mut stream,
                "405 Method Not Allowed",
                "Allow: GET, HEAD\r\n",
                b"",
            )
            .await
        }
    };
    let body = text.borrow().clone();
    if body.is_empty() {
        return reply(
            &mut stream,
            "503 Service Unavailable",
            "",
            b"metrics not ready yet\n",
        )
        .await;
    }
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    if !head_only {
        stream.write_all(body.as_bytes()).await?;
    }
    stream.shutdown().await
}

/// Where the request head ends (after the blank line), if it has.
fn header_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A short plain-text reply.
async fn reply(stream: &mut TcpStream, status: &str, extra: &str, body: &[u8]) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_proto::client_state::{Project, RscBackoff};

    fn result(name: &str, state: ResultState) -> TaskResult {
        TaskResult {
            name: name.to_owned(),
            wu_name: name.to_owned(),
            state,
            ..TaskResult::default()
        }
    }

    fn project(url: &str, name: &str) -> Project {
        Project {
            master_url: url.to_owned(),
            project_name: name.to_owned(),
            ..Project::default()
        }
    }

    /// Two projects: one with a task in every state, one (quoted name) with two.
    fn sample_state() -> ClientState {
        let mut a = ProjectState {
            project: project("http://a.example/", "Project A"),
            ..ProjectState::default()
        };
        a.project.min_rpc_time = 1_000_600.0;
        a.project.nrpc_failures = 2;
        a.project.rsc_backoff = vec![RscBackoff {
            name: "CPU".to_owned(),
            backoff_time: 1_000_030.0,
            backoff_interval: 60.0,
        }];
        a.results = vec![
            result("dl", ResultState::FilesDownloading),
            result("new", ResultState::New),
            result("run", ResultState::FilesDownloaded),
            result("wait", ResultState::FilesDownloaded),
            result("preempted", ResultState::FilesDownloaded),
            TaskResult {
                suspended_via_gui: true,
                ..result("susp", ResultState::FilesDownloaded)
            },
            result("up", ResultState::FilesUploading),
            TaskResult {
                ready_to_report: true,
                ..result("done", ResultState::FilesUploaded)
            },
            TaskResult {
                ready_to_report: true,
                got_server_ack: true,
                ..result("acked", ResultState::FilesUploaded)
            },
            TaskResult {
                ready_to_report: true,
                ..result("err", ResultState::ComputeError)
            },
            result("upfail", ResultState::UploadFailed),
            result("abort", ResultState::Aborted),
        ];
        let mut b = ProjectState {
            project: project("http://b.example/", "B"),
            ..ProjectState::default()
        };
        b.project.project_name = "The \"B\" \\ project\nnew".to_owned();
        b.project.suspended_via_gui = true;
        b.results = vec![
            result("b1", ResultState::FilesDownloaded),
            result("b2", ResultState::FilesDownloaded),
        ];
        let mut s = ClientState::default();
        s.host_info.p_ncpus = 4;
        s.projects = vec![a, b];
        s.active_tasks = vec![
            ActiveTask {
                project_master_url: "http://a.example/".to_owned(),
                result_name: "run".to_owned(),
                active_task_state: PROCESS_EXECUTING,
                ..ActiveTask::default()
            },
            ActiveTask {
                project_master_url: "http://a.example/".to_owned(),
                result_name: "preempted".to_owned(),
                active_task_state: crate::tasks::PROCESS_SUSPENDED,
                ..ActiveTask::default()
            },
            // Same result name, other project: must not make A's task run.
            ActiveTask {
                project_master_url: "http://b.example/".to_owned(),
                result_name: "b1".to_owned(),
                active_task_state: PROCESS_EXECUTING,
                ..ActiveTask::default()
            },
        ];
        s
    }

    fn input<'a>(state: &'a ClientState, rpc: &'a [ProjectRpcCounters]) -> MetricsInput<'a> {
        MetricsInput {
            state,
            busy_cpus: 1.5,
            busy_gpus: 0.0,
            work_buffer_secs: vec![("CPU".to_owned(), 3600.0), ("NVIDIA".to_owned(), 0.0)],
            rpc,
            transfer_bytes_down: 123_456,
            transfer_bytes_up: 789,
            disk_used: 1e9,
            disk_allowed: 5e9,
        }
    }

    /// The value of the sample line that starts with `prefix` (name and labels).
    fn value(text: &str, prefix: &str) -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(prefix) && l[prefix.len()..].starts_with(' '))
            .and_then(|l| l[prefix.len()..].trim().parse().ok())
    }

    #[test]
    fn counts_each_task_in_one_state() {
        let s = sample_state();
        let text = render(&input(&s, &[]), 1_000_000.0);
        let a = r#"project="Project A",url="http://a.example/",state="#;
        for (state, n) in [
            ("downloading", 2.0),
            ("running", 1.0),
            ("ready", 2.0),
            ("suspended", 1.0),
            ("uploading", 1.0),
            ("ready_to_report", 1.0),
            ("reported", 1.0),
            ("error", 2.0),
            ("aborted", 1.0),
        ] {
            let prefix = format!("boinc_tasks{{{a}\"{state}\"}}");
            assert_eq!(value(&text, &prefix), Some(n), "{state}\n{text}");
        }
        let total: f64 = text
            .lines()
            .filter(|l| l.starts_with("boinc_tasks{") && l.contains("a.example"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        assert_eq!(total, 12.0);
        // Project B is suspended: its executing task still counts as running, the other not.
        let b = r#"project="The \"B\" \\ project\nnew",url="http://b.example/",state="#;
        assert_eq!(
            value(&text, &format!("boinc_tasks{{{b}\"running\"}}")),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            value(&text, &format!("boinc_tasks{{{b}\"suspended\"}}")),
            Some(1.0),
            "{text}"
        );
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let s = sample_state();
        let text = render(&input(&s, &[]), 0.0);
        assert!(
            text.contains(r#"project="The \"B\" \\ project\nnew""#),
            "{text}"
        );
        // No raw newline inside any sample line: every line is a comment or `name… value`.
        for l in text.lines() {
            assert!(
                l.starts_with('#') || l.split(' ').count() >= 2,
                "bad line {l:?}"
            );
        }
    }

    #[test]
    fn families_are_typed_unique_and_eof_is_last() {
        let s = sample_state();
        let rpc = [ProjectRpcCounters {
            url: "http://gone.example/".to_owned(),
            rpcs: 3,
            failures: 1,
        }];
        let text = render(&input(&s, &rpc), 1_000_000.0);
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert_eq!(text.matches("# EOF").count(), 1);
        let mut types: HashMap<String, String> = HashMap::new();
        let mut helps: HashSet<String> = HashSet::new();
        let mut order: Vec<String> = Vec::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("name and type");
                assert!(
                    types.insert(name.to_owned(), kind.to_owned()).is_none(),
                    "family {name} twice"
                );
                order.push(name.to_owned());
            } else if let Some(rest) = l.strip_prefix("# HELP ") {
                let (name, _) = rest.split_once(' ').expect("name and help");
                assert!(helps.insert(name.to_owned()), "help {name} twice");
            } else if l.starts_with("# UNIT ") || l == "# EOF" {
            } else {
                // A sample belongs to the family declared last; counters end in `_total`.
                let name = l.split(['{', ' ']).next().expect("name");
                let family = order.last().expect("a family before samples");
                match types[family].as_str() {
                    "counter" => assert_eq!(name, format!("{family}_total"), "{l}"),
                    _ => assert_eq!(name, family, "{l}"),
                }
            }
        }
        assert_eq!(types.len(), helps.len());
        for (name, kind) in [
            ("boinc_tasks", "gauge"),
            ("boinc_transfer_bytes", "counter"),
            ("boinc_project_scheduler_rpcs", "counter"),
            ("boinc_project_rpc_backoff_seconds", "gauge"),
            ("process_cpu_seconds", "counter"),
            ("process_resident_memory_bytes", "gauge"),
        ] {
            assert_eq!(types.get(name).map(String::as_str), Some(kind), "{name}");
        }
        assert!(text.contains("# UNIT process_resident_memory_bytes bytes\n"));
        // Figures from the input and the state.
        assert_eq!(
            value(&text, "boinc_transfer_bytes_total{direction=\"download\"}"),
            Some(123_456.0)
        );
        assert_eq!(value(&text, "boinc_cpus_busy"), Some(1.5));
        assert_eq!(value(&text, "boinc_cpus"), Some(4.0));
        assert_eq!(
            value(&text, "boinc_work_buffer_seconds{resource=\"CPU\"}"),
            Some(3600.0)
        );
        assert_eq!(value(&text, "boinc_disk_allowed_bytes"), Some(5e9));
        let a = r#"{project="Project A",url="http://a.example/"}"#;
        assert_eq!(
            value(&text, &format!("boinc_project_rpc_backoff_seconds{a}")),
            Some(600.0)
        );
        assert_eq!(
            value(&text, &format!("boinc_project_consecutive_rpc_failures{a}")),
            Some(2.0)
        );
        assert_eq!(
            value(
                &text,
                r#"boinc_project_work_fetch_backoff_seconds{project="Project A",url="http://a.example/",resource="CPU"}"#
            ),
            Some(30.0)
        );
        // A project with no RPC yet shows 0; one only the counters know still shows.
        assert_eq!(
            value(&text, &format!("boinc_project_scheduler_rpcs_total{a}")),
            Some(0.0)
        );
        assert_eq!(
            value(
                &text,
                r#"boinc_project_scheduler_rpc_failures_total{project="http://gone.example/",url="http://gone.example/"}"#
            ),
            Some(1.0)
        );
        assert!(value(&text, "process_cpu_seconds_total").is_some_and(|v| v >= 0.0));
        assert!(value(&text, "process_resident_memory_bytes").is_some_and(|v| v > 0.0));
    }

    #[test]
    fn backoffs_in_the_past_are_zero() {
        let s = sample_state();
        let text = render(&input(&s, &[]), 2_000_000.0);
        assert_eq!(
            value(
                &text,
                r#"boinc_project_rpc_backoff_seconds{project="Project A",url="http://a.example/"}"#
            ),
            Some(0.0)
        );
    }

    #[test]
    fn values_use_openmetrics_spelling() {
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(3.0), "3");
        assert_eq!(format_value(0.25), "0.25");
    }

    #[test]
    fn proc_files_are_parsed() {
        // A command name with spaces and a parenthesis, as the kernel allows.
        let stat = "1234 (ferr ited) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 \
                    250 50 0 0 20 0 3 0 1000 12345678 900 18446744073709551615";
        let p = ProcessStats::parse(
            stat,
            "3000 900 100 1 0 50 0\n",
            Some("cpu 1\nbtime 1700000000\n"),
            100.0,
            4096.0,
        )
        .expect("parses");
        assert_eq!(p.cpu_seconds, 3.0);
        assert_eq!(p.resident_bytes, 900.0 * 4096.0);
        assert_eq!(p.virtual_bytes, 3000.0 * 4096.0);
        assert_eq!(p.start_time, Some(1_700_000_010.0));
        assert!(ProcessStats::parse("garbage", "1 2", None, 100.0, 4096.0).is_none());
        assert!(
            ProcessStats::read().is_some(),
            "/proc/self is readable here"
        );
    }

    async fn http(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(request).await.expect("send");
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.expect("read");
        String::from_utf8(out).expect("utf-8")
    }

    #[tokio::test]
    async fn serves_metrics_and_404_elsewhere() {
        let (tx, rx) = watch::channel(String::new());
        let server = MetricsServer::start("127.0.0.1:0".parse().expect("addr"), rx)
            .await
            .expect("starts");
        let addr = server.local_addr();
        assert_ne!(addr.port(), 0);

        let early = http(addr, b"GET /metrics HTTP/1.0\r\n\r\n").await;
        assert!(early.starts_with("HTTP/1.1 503 "), "{early}");

        tx.send_replace("# TYPE x gauge\nx 1\n# EOF\n".to_owned());
        let ok = http(addr, b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").await;
        let (head, body) = ok.split_once("\r\n\r\n").expect("head and body");
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert!(
            head.contains(&format!("Content-Type: {CONTENT_TYPE}")),
            "{head}"
        );
        assert!(head.contains("Content-Length: 25"), "{head}");
        assert_eq!(body, "# TYPE x gauge\nx 1\n# EOF\n");

        // The latest text is served; a query string is ignored.
        tx.send_replace("# TYPE x gauge\nx 2\n# EOF\n".to_owned());
        let newer = http(addr, b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(newer.ends_with("x 2\n# EOF\n"), "{newer}");

        let head_only = http(addr, b"HEAD /metrics HTTP/1.0\r\n\r\n").await;
        assert!(head_only.starts_with("HTTP/1.1 200 OK"), "{head_only}");
        assert!(head_only.ends_with("\r\n\r\n"), "{head_only}");

        let other = http(addr, b"GET /other HTTP/1.0\r\n\r\n").await;
        assert!(other.starts_with("HTTP/1.1 404 "), "{other}");
        let post = http(addr, b"POST /metrics HTTP/1.0\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
        let junk = http(addr, b"hello\r\n\r\n").await;
        assert!(junk.starts_with("HTTP/1.1 400 "), "{junk}");

        server.stop().await;
        assert!(TcpStream::connect(addr).await.is_err(), "closed after stop");
    }

    #[tokio::test]
    async fn refuses_non_loopback_addresses() {
        let (_tx, rx) = watch::channel(String::from("x"));
        for a in ["0.0.0.0:0", "192.0.2.1:0", "[::]:0"] {
            let err = MetricsServer::start(a.parse().expect("addr"), rx.clone())
                .await
                .expect_err(a);
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{a}");
        }
    }

    #[tokio::test]
    async fn oversized_and_idle_clients_do_not_block_others() {
        let (_tx, rx) = watch::channel(String::from("# EOF\n"));
        let limits = Limits {
            io_timeout: Duration::from_millis(300),
            max_request: 256,
            max_connections: 4,
        };
        let server = MetricsServer::start_with("127.0.0.1:0".parse().expect("addr"), rx, limits)
            .await
            .expect("starts");
        let addr = server.local_addr();

        let mut big = b"GET /metrics HTTP/1.0\r\nX: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', 1000));
        big.extend_from_slice(b"\r\n\r\n");
        let refused = http(addr, &big).await;
        assert!(refused.starts_with("HTTP/1.1 431 "), "{refused}");

        // Two silent clients hold connections; others are still served meanwhile.
        let mut idle1 = TcpStream::connect(addr).await.expect("connect");
        let _idle2 = TcpStream::connect(addr).await.expect("connect");
        for _ in 0..3 {
            let ok = http(addr, b"GET /metrics HTTP/1.0\r\n\r\n").await;
            assert!(ok.ends_with("# EOF\n"), "{ok}");
        }
        // The silent one is dropped after the timeout (EOF, no reply).
        let mut out = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(5), idle1.read_to_end(&mut out))
            .await
            .expect("closed by the server")
            .expect("read");
        assert_eq!(n, 0);
        server.stop().await;
    }
}
