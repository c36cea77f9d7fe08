//! The metrics model: the client's state rendered as OpenMetrics text (the format Prometheus
//! scrapes), served at `/metrics` by the daemon's HTTP server ([`crate::web`]).
//!
//! The main loop owns the state, so it renders the text itself ([`render`], cheap and pure
//! apart from reading `/proc/self`) and publishes it through a `tokio::sync::watch` channel;
//! the server only hands out the latest text and never touches the state.
//!
//! Metric names follow the existing BOINC exporters (`boinc_tasks`, `boinc_project_*`,
//! `boinc_host_*` credit gauges) and the Prometheus client libraries' `process_*` metrics.
//! One departure: task counts are the gauge `boinc_tasks{state=…}`, not a gauge called
//! `boinc_tasks_total`, because OpenMetrics keeps the `_total` suffix for counters.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use ferrite_proto::client_state::{ActiveTask, ClientState, ProjectState, ResultState, TaskResult};

use crate::tasks::PROCESS_EXECUTING;

/// The media type of OpenMetrics text, as sent in `Content-Type`.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The media type of Prometheus's classic text format (version 0.0.4), served to scrapers
/// that do not ask for OpenMetrics.
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether an `Accept` header asks for OpenMetrics (Prometheus itself does).
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',').any(|part| {
            let mut params = part.split(';').map(str::trim);
            let mime = params.next().unwrap_or("");
            let q_zero = params.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f64>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            mime.eq_ignore_ascii_case("application/openmetrics-text") && !q_zero
        })
    })
}

/// The same figures in Prometheus's classic text format: a counter family is named with its
/// `_total` suffix, and the OpenMetrics-only lines (`# UNIT`, `# EOF`) go.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut counter: Option<&str> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            counter = (kind == "counter").then_some(name);
            if counter.is_some() {
                let _ = writeln!(out, "# TYPE {name}_total counter");
                continue;
            }
        } else if let (Some(rest), Some(name)) = (line.strip_prefix("# HELP "), counter) {
            if let Some(help) = rest.strip_prefix(name).and_then(|r| r.strip_prefix(' ')) {
                let _ = writeln!(out, "# HELP {name}_total {help}");
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

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
    p.project.name_or_url()
}

/// A per-project gauge's value, read from the project.
type ProjectFigure = fn(&ProjectState) -> f64;

/// Renders everything as OpenMetrics text, ending with `# EOF`. `now` is Unix time (for
/// backoffs, shown as seconds left).
pub fn render(input: &MetricsInput<'_>, now: f64) -> String {
    let mut t = Text {
        out: String::with_capacity(4096),
    };
    write_tasks(&mut t, input.state);
    write_resources(&mut t, input);
    write_transfers(&mut t, input);
    write_rpc_counters(&mut t, input);
    write_project_figures(&mut t, input.state, now);
    write_disk(&mut t, input);
    write_process(&mut t);
    t.out.push_str("# EOF\n");
    t.out
}

/// `boinc_tasks`: each project's tasks counted by state.
fn write_tasks(t: &mut Text, state: &ClientState) {
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
}

/// The CPUs, the CPU and GPU instances in use, and the work buffer per resource.
fn write_resources(t: &mut Text, input: &MetricsInput<'_>) {
    t.family(
        "boinc_cpus",
        Kind::Gauge,
        "Logical CPUs the client may use.",
    );
    t.sample("boinc_cpus", &[], f64::from(input.state.host_info.p_ncpus));
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
}

/// The bytes the file transfers moved since start-up.
fn write_transfers(t: &mut Text, input: &MetricsInput<'_>) {
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
}

/// The scheduler RPC counters of every project the state or the counters know.
fn write_rpc_counters(t: &mut Text, input: &MetricsInput<'_>) {
    let state = input.state;
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
}

/// Each project's gauges read from the state, and its backoffs as seconds left at `now`.
fn write_project_figures(t: &mut Text, state: &ClientState, now: f64) {
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
}

/// The disk the client uses and may use.
fn write_disk(t: &mut Text, input: &MetricsInput<'_>) {
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
}

/// The client process's own CPU time and memory, when `/proc` tells them.
fn write_process(t: &mut Text) {
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
    fn classic_text_names_counters_with_their_suffix_and_drops_openmetrics_lines() {
        let om = "# TYPE a_seconds gauge\n# UNIT a_seconds seconds\n# HELP a_seconds A.\n\
                  a_seconds 1\n# TYPE b counter\n# HELP b B things.\nb_total{x=\"1\"} 2\n# EOF\n";
        assert_eq!(
            to_prometheus_text(om),
            "# TYPE a_seconds gauge\n# HELP a_seconds A.\na_seconds 1\n\
             # TYPE b_total counter\n# HELP b_total B things.\nb_total{x=\"1\"} 2\n"
        );
    }

    #[test]
    fn openmetrics_is_served_to_who_asks_for_it() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                          version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(wants_openmetrics(Some(prometheus)));
        assert!(wants_openmetrics(Some("Application/OpenMetrics-Text")));
        assert!(!wants_openmetrics(Some("text/plain")));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(!wants_openmetrics(Some("application/openmetrics-text;q=0")));
        assert!(!wants_openmetrics(None));
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
}
