//! The project loop: when and whom to ask, master-page fetches, scheduler RPCs, applying
//! replies, reporting, and the clean-up that follows the server's acknowledgements.
//!
//! It follows the official client's scheduler poll (reference `scheduler-rpc.md` §2): one
//! scheduler operation at a time client-wide; first a pending master fetch, then a project
//! with an RPC pending (user update, first contact, the server's `next_rpc_delay`), then
//! trickle-ups, then results due for reporting, then the work fetch chosen by the scheduling
//! core. Requests made for another reason carry the work the core would ask of that project
//! (piggybacking). The HTTP exchange runs as a tokio task; the main loop gets it back as
//! [`Event::Project`] and applies it with [`ferrite_project::reply::apply_reply`].
//!
//! Unlike the official client, RPC backoffs (`min_rpc_time`, `nrpc_failures`, per-resource
//! work-fetch backoffs) are restored at start-up, so a restart does not hammer a server that
//! asked to be left alone.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use ferrite_net::{boinc_user_agent, HttpClient, HttpConfig, ProxyConfig, ProxyServer};
use ferrite_project::reply::{
    apply_reply, ApplyOptions, ApplyOutcome, Event as ReplyEvent, ObjectKind, RefusalReason,
    EXIT_ABORTED_BY_PROJECT,
};
use ferrite_project::request::{build_request, note_rpc_started, RequestInput, RscWork};
use ferrite_project::verify::BoincCrypt;
use ferrite_proto::account::{account_file_name, escape_project_url, AccountFile};
use ferrite_proto::client_state::{
    ClientState, Project, ResultState, RpcReason, RscBackoff, TaskResult,
};
use ferrite_proto::sched_reply::{ReplyMessage, SchedulerReply};
use ferrite_sched::{CoprocKind, Jitter, ResourceId, SplitMix64, World};
use tracing::{error, info, warn};

use crate::config::{self, write_atomic, GLOBAL_PREFS};
use crate::transfers::ERR_BAD_FILENAME;
use crate::tuning::Tuning;
use crate::{Daemon, Event};

/// `ERR_NO_APP_VERSION`: no usable (signed, supported) app version for a job.
pub const ERR_NO_APP_VERSION: i32 = -195;
/// `ERR_RSA_FAILED`: a signature does not verify.
pub const ERR_RSA_FAILED: i32 = -120;

/// `ERR_ATTACH_FAIL_DOWNLOAD`: the master page could not be fetched while attaching.
pub const ERR_ATTACH_FAIL_DOWNLOAD: i32 = -210;
/// `ERR_ATTACH_FAIL_INIT`: the first scheduler RPC of an attach failed.
pub const ERR_ATTACH_FAIL_INIT: i32 = -209;

/// How long a project that is uploading is not asked for work, so the report can ride on
/// the same RPC (`WF_UPLOAD_DEFER_INTERVAL`), seconds.
const REPORT_CHECK_PERIOD: f64 = 60.0;
/// How often the loop looks for something to do without being woken, seconds
/// (`SCHEDULER_RPC_POLL_PERIOD`).
const POLL_PERIOD: f64 = 5.0;

/// What the spawned HTTP exchange brings back.
#[derive(Debug)]
pub enum OpDone {
    /// A master page (its text, or why not).
    Master {
        /// Project master URL.
        project: String,
        /// The page, or the error.
        result: Result<String, String>,
    },
    /// A scheduler RPC.
    Scheduler {
        /// Project master URL.
        project: String,
        /// Why it was made.
        reason: RpcReason,
        /// The work request that rode on it.
        sent: Option<ferrite_sched::WorkRequest>,
        /// The reply text, or the error of the last URL tried.
        result: Result<String, String>,
    },
}

/// `ERR_RSC_LIMIT_EXCEEDED`: a job needs more disk than the preferences allow.
pub const ERR_RSC_LIMIT_EXCEEDED: i32 = -221;

/// `ERR_IN_PROGRESS`: the answer of a poll while the operation runs.
pub const ERR_IN_PROGRESS: i32 = -204;

/// The web RPCs of the attach wizard, each with its own poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebRpcKind {
    /// `lookup_account.php`.
    LookupAccount = 0,
    /// `create_account.php`.
    CreateAccount = 1,
    /// `get_project_config.php`.
    ProjectConfig = 2,
}

/// Where a web RPC is.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum WebRpcState {
    /// None started.
    #[default]
    Idle,
    /// Under way.
    Pending,
    /// The project's reply text.
    Done(String),
    /// The transfer failed with this BOINC error code.
    Failed(i32),
}

/// The attach started through GUI RPC, for `project_attach_poll`.
#[derive(Debug, Clone, PartialEq)]
pub enum AttachProgress {
    /// Master page and first RPC not done yet.
    InProgress(String),
    /// Done: 0, or a BOINC error code with messages.
    Done {
        /// Project URL.
        url: String,
        /// 0 or an error code.
        error_num: i32,
        /// What went wrong.
        messages: Vec<String>,
    },
}

/// The loop's own state (the rest is in the client state).
#[derive(Debug)]
pub struct ProjectLoop {
    /// The HTTP client, built from cc_config at first use and after a reload.
    http: Option<HttpClient>,
    /// Chosen once, to spread hosts over a project's scheduler URLs.
    url_random: f64,
    /// Backoff jitter.
    jitter: SplitMix64,
    /// The scheduler operation in flight (one at a time), by project URL.
    busy: Option<String>,
    /// Next time to look for something to do.
    next_poll: f64,
    /// Last time results were checked for reporting.
    last_report_check: f64,
    /// Tasks ready to report at the last look.
    last_ready: usize,
    /// The state's persisted backoffs were given to the scheduling core.
    backoffs_loaded: bool,
    /// The core's work request of the current pass predates the saved backoffs: skip it.
    fetch_after_next_pass: bool,
    /// The GUI attach in progress or last finished.
    pub attach: Option<AttachProgress>,
    /// Scheduler RPCs and failures per project since start-up, for the metrics.
    rpc_counts: BTreeMap<String, (u64, u64)>,
    /// Tasks acknowledged in the last hour, oldest first (`get_old_results`).
    pub old_results: std::collections::VecDeque<OldResult>,
    /// The attach wizard's web RPCs, by [`WebRpcKind`].
    pub web: [WebRpcState; 3],
    /// The data directory could take nothing more at the last look (see
    /// [`Daemon::storage_blocks_work`]).
    storage_full: bool,
    /// Retry figures (the official defaults unless the command line changed them).
    pub tuning: Tuning,
}

impl Default for ProjectLoop {
    fn default() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id());
        let mut jitter = SplitMix64::new(seed);
        ProjectLoop {
            http: None,
            url_random: jitter.next_unit(),
            jitter,
            busy: None,
            next_poll: 0.0,
            last_report_check: 0.0,
            last_ready: 0,
            backoffs_loaded: false,
            fetch_after_next_pass: false,
            attach: None,
            web: Default::default(),
            rpc_counts: BTreeMap::new(),
            old_results: std::collections::VecDeque::new(),
            storage_full: false,
            tuning: Tuning::default(),
        }
    }
}

impl ProjectLoop {
    /// The HTTP client must be rebuilt (configuration reloaded).
    pub fn reset_http(&mut self) {
        self.http = None;
    }

    /// Scheduler RPCs and failures per project, for the metrics.
    pub fn rpc_counters(&self) -> Vec<crate::metrics::ProjectRpcCounters> {
        self.rpc_counts
            .iter()
            .map(
                |(url, (rpcs, failures))| crate::metrics::ProjectRpcCounters {
                    url: url.clone(),
                    rpcs: *rpcs,
                    failures: *failures,
                },
            )
            .collect()
    }

    /// The HTTP client, once built.
    pub fn http(&self) -> Option<HttpClient> {
        self.http.clone()
    }

    /// A web RPC ended.
    pub fn web_rpc_done(&mut self, kind: WebRpcKind, result: Result<String, i32>) {
        self.web[kind as usize] = match result {
            Ok(text) => WebRpcState::Done(text),
            Err(code) => WebRpcState::Failed(code),
        };
    }

    /// Look for work at the next turn.
    pub fn poll_soon(&mut self) {
        self.next_poll = 0.0;
    }

    /// A scheduler operation is under way with `url`.
    pub fn busy_with(&self, url: &str) -> bool {
        self.busy.as_deref() == Some(url)
    }
}

impl Daemon {
    /// Resets a project: its tasks are aborted and forgotten, its files deleted, its apps
    /// dropped; the account stays and the server is asked for new work.
    pub(crate) fn reset_project(&mut self, url: &str, t: f64) {
        let names: Vec<String> = self
            .state
            .project(url)
            .map(|p| p.results.iter().map(|r| r.name.clone()).collect())
            .unwrap_or_default();
        for r in &names {
            self.tasks.abort(url, r, crate::rpc::EXIT_ABORTED_VIA_GUI);
        }
        self.state
            .active_tasks
            .retain(|a| a.project_master_url != url);
        let mut anonymous = false;
        if let Some(ps) = self.state.project_mut(url) {
            ps.results.clear();
            ps.workunits.clear();
            // As the official client: an anonymous project keeps the volunteer's apps, app
            // versions and files (app_info.xml), and its directory is not cleaned out.
            anonymous = ps.project.anonymous_platform;
            if anonymous {
                ps.files.retain(ferrite_project::anonymous::is_local_file);
            } else {
                ps.app_versions.clear();
                ps.apps.clear();
                ps.files.clear();
            }
            ps.project.code_sign_key = None;
            ps.project.sched_rpc_pending = Some(RpcReason::UserReq);
            ps.project.min_rpc_time = 0.0;
            ps.project.nrpc_failures = 0;
            ps.project.rsc_backoff.clear();
        }
        let pdir = config::project_dir(&self.dir, url);
        let entries = fs::read_dir(&pdir).ok().filter(|_| !anonymous);
        if let Some(entries) = entries {
            for e in entries.flatten() {
                // The project's app_config.xml is the volunteer's, not the project's.
                if e.file_name() == std::ffi::OsStr::new(config::APP_CONFIG) {
                    continue;
                }
                let path = e.path();
                let _ = if path.is_dir() {
                    fs::remove_dir_all(&path)
                } else {
                    fs::remove_file(&path)
                };
            }
        }
        self.projects.poll_soon();
        self.save.mark_dirty(t);
    }
}

/// `backoff(n, MIN, MAX) = min(MIN * 2^n, MAX) * (0.5 + 0.5 U)`.
fn backoff(n: i32, min: f64, max: f64, u: f64) -> f64 {
    let exp = min * 2f64.powi(n.clamp(0, 30));
    exp.min(max) * (0.5 + 0.5 * u)
}

/// BOINC's name for a resource of the core's world.
pub(crate) fn resource_name(world: &World, r: ResourceId) -> String {
    if r.index() == 0 {
        return "CPU".to_owned();
    }
    match world.host.coprocs.get(r.index() - 1).map(|c| &c.kind) {
        Some(CoprocKind::Nvidia) => "NVIDIA",
        Some(CoprocKind::Amd) => "ATI",
        Some(CoprocKind::IntelGpu) => "intel_gpu",
        Some(CoprocKind::AppleGpu) => "apple_gpu",
        Some(CoprocKind::Other(name)) => return name.clone(),
        None => "unknown",
    }
    .to_owned()
}

/// The project-crate form of the core's work request.
fn to_request_work(
    world: &World,
    w: &ferrite_sched::WorkRequest,
) -> ferrite_project::request::WorkRequest {
    let mut out = ferrite_project::request::WorkRequest {
        work_req_seconds: w.work_req_seconds,
        ..Default::default()
    };
    for rr in &w.resources {
        let work = RscWork {
            req_secs: rr.req_secs,
            req_instances: rr.req_instances,
            estimated_delay: rr.estimated_delay,
        };
        if rr.resource.index() == 0 {
            out.cpu = work;
        } else {
            out.gpus.push((resource_name(world, rr.resource), work));
        }
    }
    out
}

/// The official client's RPC backoff after a failure (reference §7.1), with the figures of
/// `--sched_retry_delay_min/max`, `--retry_cap` and `--master_fetch_*`.
fn rpc_backoff(p: &mut Project, now: f64, u: f64, k: &Tuning) {
    if p.master_fetch_failures >= k.master_fetch_retry_cap {
        p.master_url_fetch_pending = true;
        p.min_rpc_time = p.min_rpc_time.max(now + k.master_fetch_interval);
        return;
    }
    if p.nrpc_failures >= k.master_fetch_period {
        p.master_url_fetch_pending = true;
        p.nrpc_failures = 0;
        p.min_rpc_time = 0.0;
        p.master_fetch_failures += 1;
    }
    p.nrpc_failures += 1;
    let d = backoff(
        p.nrpc_failures.min(k.retry_cap),
        k.sched_retry_delay_min,
        k.sched_retry_delay_max,
        u,
    );
    p.min_rpc_time = p.min_rpc_time.max(now + d);
}

/// Whether the work request the core chose may go to `p` at `t`. The core applies the RPC
/// backoff itself (its copy follows the state's) and ends one that failures caused early
/// while an instance idles, so only a server's `request_delay` and a pending master-page
/// fetch (which goes first) hold the request back here; and a project suspended by the user.
fn may_fetch_from(p: &Project, t: f64) -> bool {
    let backed_off = p.min_rpc_time > t && (p.nrpc_failures == 0 || p.master_url_fetch_pending);
    !backed_off && !p.suspended_via_gui
}

/// Why a result was refused, as a BOINC error code.
fn refusal_code(r: &RefusalReason) -> i32 {
    match r {
        RefusalReason::BadName(_) | RefusalReason::BadReference { .. } => ERR_BAD_FILENAME,
        RefusalReason::KeyBadSignature | RefusalReason::KeyWithoutSignature => ERR_RSA_FAILED,
        _ => ERR_NO_APP_VERSION,
    }
}

/// The code and text of what a refusal comes from: a result refused because its workunit
/// was refused because an input file had a hostile name is reported as a bad file name.
fn root_refusal(
    all: &[ferrite_project::reply::Refusal],
    reason: &RefusalReason,
    depth: usize,
) -> (i32, String) {
    let cause = match reason {
        RefusalReason::UnknownWorkunit(n) => Some((ObjectKind::Workunit, n)),
        RefusalReason::UnknownFile(n) => Some((ObjectKind::File, n)),
        _ => None,
    };
    if depth < 4 {
        if let Some((kind, name)) = cause {
            if let Some(r) = all.iter().find(|r| r.kind == kind && &r.name == name) {
                let (code, why) = root_refusal(all, &r.reason, depth + 1);
                return (code, format!("{reason}: {why}"));
            }
        }
    }
    (refusal_code(reason), reason.to_string())
}

/// How the client names itself to projects (`<client_brand>`, the User-Agent's last part):
/// `client_brand.txt` in the data directory when a distributor put one there, as the official
/// client reads it, else Ferrite and its version.
pub(crate) fn client_brand(dir: &Path) -> String {
    fs::read_to_string(dir.join("client_brand.txt"))
        .ok()
        .and_then(|s| s.lines().next().map(|l| l.trim().to_owned()))
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| ferrite_proto::version::BRAND.to_owned())
}

/// Builds the HTTP client for the daemon's configuration.
fn http_client(
    state: &ClientState,
    cc: &ferrite_proto::cc_config::CcOptions,
    brand: &str,
) -> Option<HttpClient> {
    let ua = boinc_user_agent(&state.platform_name, state.core_client_version, Some(brand));
    let mut cfg = HttpConfig::new(ua);
    if cc.http_transfer_timeout > 0 {
        cfg.read_timeout = std::time::Duration::from_secs(cc.http_transfer_timeout as u64);
    }
    cfg.low_speed_bps = f64::from(cc.http_transfer_timeout_bps.max(0));
    let proxy = config::working_proxy(state, cc);
    if let Err(e) = config::gui_proxy(state) {
        warn!("the proxy set through the GUI is unusable: {e}");
    }
    if let Some(p) = &proxy {
        let server = |host: &str, port: i32, user: &str, pw: &str| ProxyServer {
            host: host.to_owned(),
            port: u16::try_from(port).unwrap_or(80),
            user: (!user.is_empty()).then(|| user.to_owned()),
            password: (!user.is_empty()).then(|| pw.to_owned()),
        };
        cfg.proxy = ProxyConfig {
            http: (p.use_http_proxy && !p.http_server_name.is_empty()).then(|| {
                server(
                    &p.http_server_name,
                    p.http_server_port,
                    if p.use_http_auth {
                        &p.http_user_name
                    } else {
                        ""
                    },
                    &p.http_user_passwd,
                )
            }),
            socks: (p.use_socks_proxy && !p.socks_server_name.is_empty()).then(|| {
                server(
                    &p.socks_server_name,
                    p.socks_server_port,
                    &p.socks5_user_name,
                    &p.socks5_user_passwd,
                )
            }),
            no_proxy: p
                .no_proxy
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        };
    }
    match HttpClient::new(cfg) {
        Ok(c) => Some(c),
        Err(e) => {
            error!("cannot set up HTTP: {e}; projects will not be contacted");
            None
        }
    }
}

/// Disk space figures for requests and for refusing jobs that cannot fit, bytes.
#[derive(Debug, Clone, Default)]
pub(crate) struct DiskFigures {
    /// What BOINC may use in all, from the three disk preferences.
    pub allowed: f64,
    /// What BOINC's files use now (present files of every project, by the state).
    pub used_total: f64,
    /// The same per project.
    pub used: BTreeMap<String, f64>,
}

/// Free bytes under which the data directory's file system counts as full: no work is asked
/// for, since neither its files nor the state could be written.
const DISK_FULL_FREE_BYTES: f64 = 1024.0 * 1024.0;

/// Total and free bytes of the file system holding `path`.
pub(crate) fn volume_space(path: &Path) -> Option<(f64, f64)> {
    let s = nix::sys::statvfs::statvfs(path).ok()?;
    let frag = s.fragment_size() as f64;
    Some((s.blocks() as f64 * frag, s.blocks_available() as f64 * frag))
}

pub(crate) fn disk_figures(
    dir: &Path,
    state: &ClientState,
    prefs: &ferrite_proto::prefs::GlobalPrefs,
) -> DiskFigures {
    let mut used = BTreeMap::new();
    for ps in &state.projects {
        let bytes: f64 = ps
            .files
            .iter()
            .filter(|f| f.status == 1)
            .map(|f| f.nbytes.max(0.0))
            .sum();
        used.insert(ps.project.master_url.clone(), bytes);
    }
    let used_total: f64 = used.values().sum();
    let (total, free) = volume_space(dir).unwrap_or((0.0, 0.0));
    let p = ferrite_sched::Prefs {
        disk_max_used_gb: prefs.disk_max_used_gb,
        disk_max_used_pct: prefs.disk_max_used_pct,
        disk_min_free_gb: prefs.disk_min_free_gb,
        ..ferrite_sched::Prefs::default()
    };
    let (allowed, _) = ferrite_sched::disk::allowed(&p, total, free, used_total);
    DiskFigures {
        allowed,
        used_total,
        used,
    }
}

/// The account key of `url`, from its account file.
fn authenticator(dir: &Path, url: &str) -> Option<String> {
    config::read_account(dir, url)
        .map(|a| a.authenticator)
        .filter(|a| !a.trim().is_empty())
}

/// A task the server acknowledged, shown by `get_old_results` for an hour.
#[derive(Debug, Clone, PartialEq)]
pub struct OldResult {
    /// Project master URL.
    pub project_url: String,
    /// Result name.
    pub result_name: String,
    /// App name.
    pub app_name: String,
    /// Exit status.
    pub exit_status: i32,
    /// Final elapsed time, seconds.
    pub elapsed_time: f64,
    /// Final CPU time, seconds.
    pub cpu_time: f64,
    /// When it completed.
    pub completed_time: f64,
    /// When it was acknowledged (the entry's age).
    pub create_time: f64,
}

/// How long acknowledged tasks stay in `get_old_results`, seconds.
const OLD_RESULT_KEEP: f64 = 3600.0;

/// `get_old_results` in the official layout.
pub fn old_results_xml(old: &std::collections::VecDeque<OldResult>) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("<old_results>\n");
    for o in old {
        let _ = write!(
            out,
            "    <old_result>\n         <project_url>{}</project_url>\n         <result_name>{}</result_name>\n         <app_name>{}</app_name>\n         <exit_status>{}</exit_status>\n         <elapsed_time>{:.6}</elapsed_time>\n         <cpu_time>{:.6}</cpu_time>\n         <completed_time>{:.6}</completed_time>\n         <create_time>{:.6}</create_time>\n    </old_result>\n",
            quick_escape(&o.project_url),
            quick_escape(&o.result_name),
            quick_escape(&o.app_name),
            o.exit_status,
            o.elapsed_time,
            o.cpu_time,
            o.completed_time,
            o.create_time
        );
    }
    out.push_str("</old_results>\n");
    out
}

/// What the poll decided to do.
enum Action {
    Master(String),
    Rpc {
        url: String,
        reason: RpcReason,
        work: Option<ferrite_sched::WorkRequest>,
    },
}

impl Daemon {
    /// Network activity is allowed now (network mode).
    /// Network activity is allowed now: the network mode, and in "according to
    /// preferences" mode the preferences' daily network time window.
    pub(crate) fn network_allowed(&self, t: f64) -> bool {
        use ferrite_proto::client_state::RunMode;
        match crate::rpc::current_mode(&self.state, &self.rpc, crate::rpc::ModeKind::Network, t) {
            RunMode::Always => true,
            RunMode::Never => false,
            RunMode::Auto => {
                let (hour, weekday) = ferrite_proto::prefs::local_hour_and_weekday(
                    t,
                    i64::from(self.state.host_info.timezone),
                );
                !self.config.prefs.prefs.net_suspended_at(hour, weekday)
            }
        }
    }

    /// The HTTP client that scheduler RPCs and transfers share, built from cc_config at first
    /// use (none when the configuration gives none); at the first turn the saved backoffs
    /// are given to the scheduling core.
    pub(crate) fn project_http(&mut self, t: f64) -> Option<HttpClient> {
        if self.projects.http.is_none() {
            let brand = client_brand(&self.dir);
            self.projects.http = http_client(&self.state, &self.config.cc.options, &brand);
        }
        let http = self.projects.http.clone()?;
        if !self.projects.backoffs_loaded {
            self.projects.backoffs_loaded = true;
            self.load_backoffs(t);
            // The last pass chose its request without the saved backoffs: none is sent
            // before a pass that knows them.
            self.projects.fetch_after_next_pass = true;
            self.tasks.request_pass(t);
        }
        Some(http)
    }

    /// One turn of the project loop (after the transfers' turn): clean-up of what servers
    /// acknowledged, then at most one scheduler operation.
    pub(crate) fn tick_projects(&mut self, http: &HttpClient, t: f64) {
        let net = self.network_allowed(t);
        self.collect_garbage(t);
        if !net || self.projects.busy.is_some() || t < self.projects.next_poll {
            return;
        }
        self.projects.next_poll = t + POLL_PERIOD;
        let Some(action) = self.choose_action(t) else {
            return;
        };
        self.start_action(action, http, t);
    }

    /// Gives the persisted backoffs to the scheduling core.
    fn load_backoffs(&mut self, now: f64) {
        let Some(world) = self.tasks.last_pass().map(|(_, w)| w.clone()) else {
            self.projects.backoffs_loaded = false;
            return;
        };
        let ids = self.tasks.ids().projects.clone();
        let sched = self.tasks.scheduler_mut();
        for (i, url) in ids.iter().enumerate() {
            let Some(ps) = self.state.project(url) else {
                continue;
            };
            let Some(fs) = sched.fetch_state.get_mut(i) else {
                continue;
            };
            fs.min_rpc_time = ps.project.min_rpc_time;
            fs.restore_failures(u32::try_from(ps.project.nrpc_failures).unwrap_or(0), now);
            for b in &ps.project.rsc_backoff {
                for r in 0..fs.backoff_until.len() {
                    let rid = ResourceId(r as u8);
                    if resource_name(&world, rid) == b.name {
                        fs.backoff_until[r] = b.backoff_time;
                        if let Some(x) = fs.backoff_interval.get_mut(r) {
                            *x = b.backoff_interval;
                        }
                    }
                }
            }
        }
    }

    /// Copies the core's view of a project's backoffs into the state (so they are saved).
    fn store_backoffs(&mut self, url: &str) {
        let Some((_, world)) = self.tasks.last_pass() else {
            return;
        };
        let world = world.clone();
        let Some(i) = self.tasks.ids().projects.iter().position(|u| u == url) else {
            return;
        };
        let Some(fs) = self.tasks.scheduler_mut().fetch_state.get(i).cloned() else {
            return;
        };
        let Some(ps) = self.state.project_mut(url) else {
            return;
        };
        ps.project.rsc_backoff = (0..fs.backoff_until.len())
            .filter(|&r| fs.backoff_until[r] > 0.0)
            .map(|r| RscBackoff {
                name: resource_name(&world, ResourceId(r as u8)),
                backoff_time: fs.backoff_until[r],
                backoff_interval: fs.backoff_interval.get(r).copied().unwrap_or(0.0),
            })
            .collect();
    }

    /// The scheduler poll's order of checks (reference §2).
    fn choose_action(&mut self, t: f64) -> Option<Action> {
        if self.benchmarks_running {
            return None;
        }
        // 1. Master fetches.
        for ps in &self.state.projects {
            let p = &ps.project;
            if p.suspended_via_gui || p.min_rpc_time > t {
                continue;
            }
            if p.master_url_fetch_pending || p.scheduler_urls.is_empty() {
                return Some(Action::Master(p.master_url.clone()));
            }
        }
        // 2. Pending RPCs; the server's next_rpc_time sets one.
        for ps in &mut self.state.projects {
            let p = &mut ps.project;
            if p.sched_rpc_pending.is_none()
                && p.next_rpc_time > 0.0
                && p.next_rpc_time <= t
                && !(p.dont_request_more_work && ps.results.is_empty())
            {
                p.sched_rpc_pending = Some(RpcReason::ProjectReq);
            }
        }
        for ps in &self.state.projects {
            let p = &ps.project;
            let Some(reason) = p.sched_rpc_pending else {
                continue;
            };
            let honours_backoff = reason != RpcReason::UserReq;
            let honours_suspend = !matches!(
                reason,
                RpcReason::UserReq | RpcReason::Init | RpcReason::AcctMgrReq
            );
            if (honours_backoff && p.min_rpc_time > t) || (honours_suspend && p.suspended_via_gui) {
                continue;
            }
            let url = p.master_url.clone();
            let work = if reason == RpcReason::Init {
                self.initial_request(&url)
            } else {
                self.piggyback(&url, t)
            };
            return Some(Action::Rpc { url, reason, work });
        }
        // 3. Trickle-ups.
        for ps in &self.state.projects {
            let p = &ps.project;
            if p.trickle_up_pending && p.min_rpc_time <= t && !p.suspended_via_gui {
                let url = p.master_url.clone();
                let work = self.piggyback(&url, t);
                return Some(Action::Rpc {
                    url,
                    reason: RpcReason::TrickleUp,
                    work,
                });
            }
        }
        let (out, _) = self.tasks.last_pass()?;
        // 4. Reports, as the core's rules say (checked at most once a minute, or when a
        //    report is due immediately).
        let ids = self.tasks.ids().projects.clone();
        let due: Vec<String> = out
            .reports
            .iter()
            .filter_map(|r| ids.get(r.project.index()).cloned())
            .collect();
        let fetch = out.fetch.request.clone();
        let world = self.tasks.last_pass().map(|(_, w)| w.clone())?;
        // A task that became ready to report since the last look is a reason to look now.
        let ready: usize = out.reports.iter().map(|r| r.jobs.len()).sum();
        let newly_ready = ready > self.projects.last_ready;
        self.projects.last_ready = ready;
        if !due.is_empty()
            && (t - self.projects.last_report_check >= REPORT_CHECK_PERIOD
                || newly_ready
                || self.config.cc.options.report_results_immediately)
        {
            self.projects.last_report_check = t;
            for url in due {
                let ok = self.state.project(&url).is_some_and(|ps| {
                    ps.project.min_rpc_time <= t && !ps.project.suspended_via_gui
                });
                if ok {
                    let work = self.piggyback(&url, t);
                    return Some(Action::Rpc {
                        url,
                        reason: RpcReason::ResultsDue,
                        work,
                    });
                }
            }
        }
        // 5. Work fetch, as the core chose, unless nothing more can be stored.
        if self.storage_blocks_work() {
            return None;
        }
        if std::mem::take(&mut self.projects.fetch_after_next_pass) {
            return None;
        }
        let req = fetch?;
        let url = ids.get(req.project.index())?.clone();
        let ps = self.state.project(&url)?;
        if !may_fetch_from(&ps.project, t) {
            return None;
        }
        let _ = world;
        Some(Action::Rpc {
            url,
            reason: RpcReason::NeedWork,
            work: Some(req),
        })
    }

    /// Whether the data directory can take nothing more: its file system is (almost) full, or
    /// the state cannot be saved (disk full, read-only). No work is asked for then. Says so
    /// when it starts and when it ends.
    fn storage_blocks_work(&mut self) -> bool {
        let free = volume_space(&self.dir).map(|(_, free)| free);
        let unsaved = self.save.failures() > 0;
        let full = unsaved || free.is_some_and(|f| f < DISK_FULL_FREE_BYTES);
        if full != self.projects.storage_full {
            self.projects.storage_full = full;
            if full {
                let why = if unsaved {
                    "the state file cannot be saved (disk full or read-only)".to_owned()
                } else {
                    format!(
                        "the disk holding the data directory is full ({:.0} bytes free)",
                        free.unwrap_or(0.0)
                    )
                };
                warn!("not asking for work: {why}");
            } else {
                info!("disk space is available again; asking for work as usual");
            }
        }
        full
    }

    /// The work the core would ask of `url` on an RPC made for another reason.
    /// The first request after attaching asks for one second per resource, as the core's
    /// fetch decision says for a project whose initial RPC is pending (the official client's
    /// `set_initial_work_request`); the buffer is filled at the next RPC, once the project's
    /// apps are known.
    /// Nothing is asked for while no more can be stored (a full disk).
    fn initial_request(&mut self, url: &str) -> Option<ferrite_sched::WorkRequest> {
        if self.storage_blocks_work() {
            return None;
        }
        let (out, _) = self.tasks.last_pass()?;
        let req = out.fetch.request.as_ref()?;
        let ids = &self.tasks.ids().projects;
        (req.reason == ferrite_sched::RpcReason::Init
            && ids.get(req.project.index()).is_some_and(|u| u == url))
        .then(|| req.clone())
    }

    fn piggyback(&mut self, url: &str, t: f64) -> Option<ferrite_sched::WorkRequest> {
        if self.storage_blocks_work() {
            return None;
        }
        let (out, world) = self.tasks.last_pass()?;
        let (sim, world) = (out.sim.clone(), world.clone());
        let pid = self.tasks.ids().projects.iter().position(|u| u == url)?;
        self.tasks
            .scheduler_mut()
            .piggyback(&world, t, &sim, ferrite_sched::ProjectId(pid as u32))
    }

    fn start_action(&mut self, action: Action, http: &HttpClient, t: f64) {
        let events = self.events.clone();
        match action {
            Action::Master(url) => {
                info!(project = %url, "fetching the master page");
                self.projects.busy = Some(url.clone());
                let http = http.clone();
                tokio::spawn(async move {
                    let result = http.get_text(&url).await.map_err(|e| e.to_string());
                    let _ = events
                        .send(Event::Project(OpDone::Master {
                            project: url,
                            result,
                        }))
                        .await;
                });
            }
            Action::Rpc { url, reason, work } => {
                let Some(key) = authenticator(&self.dir, &url) else {
                    warn!(project = %url, "no account key (account file missing or empty); not contacting it");
                    if let Some(ps) = self.state.project_mut(&url) {
                        ps.project.sched_rpc_pending = None;
                        let k = self.projects.tuning;
                        rpc_backoff(&mut ps.project, t, self.projects.jitter.next_unit(), &k);
                    }
                    return;
                };
                self.update_disk_usages();
                let world = self.tasks.last_pass().map(|(_, w)| w.clone());
                let input = self.request_input(&url, key, work.as_ref(), world.as_ref(), t);
                let req = match build_request(&self.state, &input) {
                    Ok(r) => r,
                    Err(e) => {
                        error!("{e}");
                        return;
                    }
                };
                let xml = req.to_xml();
                let esc = escape_project_url(&url);
                let _ = fs::write(self.dir.join(format!("sched_request_{esc}.xml")), &xml);
                let Some(ps) = self.state.project_mut(&url) else {
                    return;
                };
                let urls: Vec<String> = (0..ps.project.scheduler_urls.len())
                    .filter_map(|i| {
                        ferrite_project::master::scheduler_url(
                            &ps.project,
                            i,
                            self.projects.url_random,
                        )
                        .map(str::to_owned)
                    })
                    .collect();
                note_rpc_started(&mut ps.project);
                let name = if ps.project.project_name.is_empty() {
                    url.clone()
                } else {
                    ps.project.project_name.clone()
                };
                let asked = work
                    .as_ref()
                    .map(|w| {
                        w.resources
                            .iter()
                            .map(|r| {
                                format!(
                                    "{}: {:.0} s",
                                    world
                                        .as_ref()
                                        .map_or("CPU".to_owned(), |w| resource_name(w, r.resource)),
                                    r.req_secs
                                )
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .filter(|s| !s.is_empty());
                let reported = req.results.len();
                info!(
                    project = %name,
                    "Sending scheduler request: {}.{}{}",
                    reason.description(),
                    if reported > 0 { format!(" Reporting {reported} completed tasks.") } else { String::new() },
                    asked.map_or_else(|| " Not requesting tasks.".to_owned(), |a| format!(" Requesting new tasks ({a})."))
                );
                self.save.mark_dirty(t);
                self.projects.busy = Some(url.clone());
                let http = http.clone();
                tokio::spawn(async move {
                    let mut result = Err("no scheduler URL".to_owned());
                    for u in urls {
                        result = http
                            .post_scheduler(&u, xml.clone())
                            .await
                            .map_err(|e| format!("{u}: {e}"));
                        if result.is_ok() {
                            break;
                        }
                    }
                    let _ = events
                        .send(Event::Project(OpDone::Scheduler {
                            project: url,
                            reason,
                            sent: work,
                            result,
                        }))
                        .await;
                });
            }
        }
    }

    fn request_input(
        &self,
        url: &str,
        key: String,
        work: Option<&ferrite_sched::WorkRequest>,
        world: Option<&World>,
        t: f64,
    ) -> RequestInput {
        let total_share: f64 = self
            .state
            .projects
            .iter()
            .map(|p| p.project.resource_share.max(0.0))
            .sum();
        let share = self
            .state
            .project(url)
            .map_or(0.0, |p| p.project.resource_share.max(0.0));
        let frac = if total_share > 0.0 {
            share / total_share
        } else {
            1.0
        };
        let cc = &self.config.cc.options;
        let coprocs = &self.state.host_info.coprocs;
        RequestInput {
            master_url: url.to_owned(),
            authenticator: key,
            work: match (work, world) {
                (Some(w), Some(world)) => to_request_work(world, w),
                _ => Default::default(),
            },
            working_global_prefs: Some(self.config.prefs.prefs.to_xml()),
            now: t,
            resource_share_fraction: frac,
            rrs_fraction: frac,
            prrs_fraction: frac,
            disk_usage: (!cc.no_disk_usage).then(|| {
                let d = disk_figures(&self.dir, &self.state, &self.config.prefs.prefs);
                ferrite_proto::sched_request::DiskUsage {
                    d_boinc_used_total: d.used_total,
                    d_boinc_used_project: d.used.get(url).copied().unwrap_or(0.0),
                    d_project_share: d.allowed * frac,
                }
            }),
            coprocs: (coprocs.ndevs() > 0).then(|| coprocs.clone()),
            max_tasks_reported: usize::try_from(cc.max_tasks_reported).unwrap_or(0),
            allow_multiple_clients: cc.allow_multiple_clients,
            dont_use_docker: cc.dont_use_docker,
            include_net_info: !cc.suppress_net_info,
            no_alt_platforms: cc.no_alt_platform,
            client_brand: Some(client_brand(&self.dir)),
            time_stats: Some(self.time_session.request_form(&self.state.time_stats, t)),
            user_keywords: self.acct_mgr.keywords_xml(),
            job_log: self
                .state
                .project(url)
                .filter(|p| p.project.send_job_log != 0)
                .and_then(|p| {
                    crate::history::job_log_since(
                        &crate::history::job_log_path(&self.dir, url),
                        f64::from(p.project.send_job_log),
                    )
                }),
            daily_xfer_history: (self.config.prefs.prefs.daily_xfer_period_days > 0).then(|| {
                self.xfer_history.scheduler_request_xml(
                    t,
                    self.state.host_info.timezone,
                    self.config.prefs.prefs.daily_xfer_period_days,
                )
            }),
            ..RequestInput::default()
        }
    }

    /// A scheduler operation ended.
    pub(crate) fn project_op_done(&mut self, done: OpDone, t: f64) {
        self.projects.busy = None;
        self.projects.next_poll = 0.0;
        match done {
            OpDone::Master { project, result } => self.master_done(&project, result, t),
            OpDone::Scheduler {
                project,
                reason,
                sent,
                result,
            } => {
                let c = self.projects.rpc_counts.entry(project.clone()).or_default();
                c.0 += 1;
                self.scheduler_done(&project, reason, sent, result, t)
            }
        }
        // What a reply brought (new tasks, acknowledgements, a host id) exists nowhere else:
        // save it now rather than within the second, so a crash cannot lose it.
        self.save.mark_dirty(t);
        self.save_if_due(t, true);
    }

    fn master_done(&mut self, url: &str, result: Result<String, String>, t: f64) {
        let u = self.projects.jitter.next_unit();
        let esc = escape_project_url(url);
        let Some(ps) = self.state.project_mut(url) else {
            return;
        };
        let page = result.and_then(|text| {
            let _ = fs::write(self.dir.join(format!("master_{esc}.xml")), &text);
            ferrite_project::master::parse_master_page(&text).map_err(|e| e.to_string())
        });
        match page {
            Ok(page) => {
                ferrite_project::master::apply_master_page(&mut ps.project, &page);
                info!(
                    project = %url,
                    "master page: {} scheduler URL(s)",
                    ps.project.scheduler_urls.len()
                );
            }
            Err(e) => {
                info!(project = %url, "master page fetch failed: {e}");
                ferrite_project::master::master_fetch_failed(&mut ps.project);
                rpc_backoff(&mut ps.project, t, u, &self.projects.tuning);
                self.attach_failed(
                    url,
                    ERR_ATTACH_FAIL_DOWNLOAD,
                    format!("master page fetch failed: {e}"),
                );
            }
        }
    }

    /// The first contact of a GUI attach failed: the poll reports it, and, as with the
    /// official client, the project stays attached and is tried again after the usual
    /// back-off (a server that is down now may be up later; detaching gives up).
    pub(crate) fn attach_failed(&mut self, url: &str, error_num: i32, message: String) {
        if let Some(AttachProgress::InProgress(u)) = &self.projects.attach {
            if u == url {
                warn!(
                    project = %url,
                    "attach: {message}; the project stays attached and will be tried again"
                );
                self.projects.attach = Some(AttachProgress::Done {
                    url: url.to_owned(),
                    error_num,
                    messages: vec![format!(
                        "{message}; the project stays attached and will be tried again"
                    )],
                });
            }
        }
    }

    fn pid_of(&self, url: &str) -> Option<ferrite_sched::ProjectId> {
        self.tasks
            .ids()
            .projects
            .iter()
            .position(|u| u == url)
            .map(|i| ferrite_sched::ProjectId(i as u32))
    }

    fn scheduler_done(
        &mut self,
        url: &str,
        reason: RpcReason,
        sent: Option<ferrite_sched::WorkRequest>,
        result: Result<String, String>,
        t: f64,
    ) {
        let esc = escape_project_url(url);
        let parsed = result.and_then(|text| {
            let _ = fs::write(self.dir.join(format!("sched_reply_{esc}.xml")), &text);
            SchedulerReply::parse(&text, "scheduler reply")
                .map(|p| p.value)
                .map_err(|e| format!("unusable reply: {e}"))
        });
        let reply = match parsed {
            Ok(r) => r,
            Err(e) => return self.rpc_failed(url, reason, &e, t),
        };
        let opts = ApplyOptions {
            unsigned_apps_ok: self.config.cc.options.unsigned_apps_ok,
            gpu_types: self.gpu_types(),
            current_prefs_mod_time: self.config.prefs.prefs.mod_time,
            prefs_from_account_manager: self
                .acct_mgr
                .owns_prefs(&self.config.prefs.prefs.source_project),
        };
        let outcome = match apply_reply(&mut self.state, url, &reply, t, &opts, &BoincCrypt) {
            Ok(o) => o,
            Err(e) => {
                warn!("{e}");
                return;
            }
        };
        // As the official client: the reply's messages (even "Project is temporarily shut
        // down for maintenance") and the delay asked for, before anything else.
        let got_notice = self.show_reply_messages(url, &outcome.messages, reply.request_delay);
        if outcome.project_down {
            return self.rpc_failed(url, reason, "the project is down", t);
        }
        let request_delay = reply.request_delay.unwrap_or(0.0);
        self.apply_outcome(url, &outcome, sent.is_some() && !got_notice, t);
        self.record_statistics(url, t);
        self.refuse_jobs_too_big(url, &outcome, t);
        // The core: backoffs cleared for resources that got jobs, set for those that did not.
        if let (Some(pid), Some((_, world))) = (self.pid_of(url), self.tasks.last_pass()) {
            let world = world.clone();
            let nr = world.host.coprocs.len() + 1;
            let mut got = vec![0u32; nr];
            for (name, n) in &outcome.tasks_added {
                for (r, slot) in got.iter_mut().enumerate() {
                    if resource_name(&world, ResourceId(r as u8)) == *name {
                        *slot += n;
                    }
                }
            }
            if let Some(w) = &sent {
                self.tasks.scheduler_mut().note_work_requested(w);
            }
            let sent = sent.filter(|_| {
                matches!(
                    reason,
                    RpcReason::NeedWork | RpcReason::ResultsDue | RpcReason::TrickleUp
                ) && !outcome.too_recent
            });
            let mut jitter = self.projects.jitter.clone();
            self.tasks.scheduler_mut().handle_rpc_succeeded(
                t,
                pid,
                sent.as_ref(),
                &got,
                request_delay,
                &mut jitter,
            );
            self.projects.jitter = jitter;
            if reason == RpcReason::UserReq {
                self.tasks.scheduler_mut().handle_user_update(pid);
            }
            self.store_backoffs(url);
        }
        if let Some(AttachProgress::InProgress(u)) = &self.projects.attach {
            if u == url {
                let failed = outcome
                    .messages
                    .iter()
                    .find(|m| m.priority.eq_ignore_ascii_case("high") || m.priority == "notice");
                self.projects.attach = Some(AttachProgress::Done {
                    url: url.to_owned(),
                    error_num: 0,
                    messages: failed.map(|m| vec![m.text.clone()]).unwrap_or_default(),
                });
            }
        }
        self.tick_soon = true;
    }

    /// After a scheduler reply, as the official client: today's credit totals go into
    /// `statistics_<project>.xml` (today's record replaced, a new day appended, records older
    /// than cc_config `save_stats_days` dropped), which GUIs draw as graphs.
    fn record_statistics(&self, url: &str, t: f64) {
        use ferrite_proto::statistics::{DailyStatistics, ProjectStatistics};
        let Some(ps) = self.state.project(url) else {
            return;
        };
        let p = &ps.project;
        let path = self
            .dir
            .join(format!("statistics_{}.xml", escape_project_url(url)));
        let mut stats = fs::read_to_string(&path)
            .ok()
            .and_then(|text| ProjectStatistics::parse(&text, "statistics").ok())
            .map(|parsed| parsed.value)
            .unwrap_or_else(|| ProjectStatistics {
                master_url: p.master_url.clone(),
                daily: Vec::new(),
            });
        stats.record(
            DailyStatistics {
                // The day starts at midnight UTC, as in the official client.
                day: t - t.rem_euclid(86_400.0),
                user_total_credit: p.user_total_credit,
                user_expavg_credit: p.user_expavg_credit,
                host_total_credit: p.host_total_credit,
                host_expavg_credit: p.host_expavg_credit,
            },
            self.config.cc.options.save_stats_days,
        );
        if let Err(e) = crate::config::write_atomic(&path, &stats.to_xml()) {
            warn!("cannot write {}: {e}", path.display());
        }
    }

    fn gpu_types(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self
            .state
            .host_info
            .coprocs
            .nvidia
            .as_ref()
            .is_some_and(|n| n.count > 0)
        {
            v.push("NVIDIA".to_owned());
        }
        for o in &self.state.host_info.coprocs.other {
            if o.count > 0 && matches!(o.element.as_str(), "coproc_ati" | "coproc_intel_gpu") {
                v.push(o.rsc_type.clone());
            }
        }
        v
    }

    fn rpc_failed(&mut self, url: &str, reason: RpcReason, why: &str, t: f64) {
        self.projects
            .rpc_counts
            .entry(url.to_owned())
            .or_default()
            .1 += 1;
        let u = self.projects.jitter.next_unit();
        let k = self.projects.tuning;
        if let Some(ps) = self.state.project_mut(url) {
            let p = &mut ps.project;
            p.scheduler_rpc_in_progress = false;
            if !matches!(reason, RpcReason::Init | RpcReason::AcctMgrReq) {
                p.sched_rpc_pending = None;
            }
            rpc_backoff(p, t, u, &k);
            info!(
                project = %url,
                "Scheduler request failed: {why}; next attempt in {:.0} s ({} failures in a row)",
                (p.min_rpc_time - t).max(0.0),
                p.nrpc_failures
            );
        }
        if let Some(pid) = self.pid_of(url) {
            let mut jitter = self.projects.jitter.clone();
            self.tasks
                .scheduler_mut()
                .handle_rpc_failed(t, pid, &mut jitter);
            self.projects.jitter = jitter;
            // The state's backoff is the one that counts (and is saved).
            let min = self
                .state
                .project(url)
                .map_or(0.0, |p| p.project.min_rpc_time);
            if let Some(fs) = self.tasks.scheduler_mut().fetch_state.get_mut(pid.index()) {
                fs.min_rpc_time = min;
            }
        }
        if reason == RpcReason::Init {
            self.attach_failed(
                url,
                ERR_ATTACH_FAIL_INIT,
                format!("scheduler request failed: {why}"),
            );
        }
    }

    /// The project's name for messages, else its URL.
    fn display_name(&self, url: &str) -> String {
        self.state
            .project(url)
            .map(|p| p.project.project_name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| url.to_owned())
    }

    /// Shows the messages of a scheduler reply, and the delay it asks for, under the
    /// project's name. As the official client: `notice` messages are scheduler notices (and
    /// user alerts in the event log), every other priority an ordinary line. Returns whether
    /// one was a notice.
    fn show_reply_messages(
        &self,
        url: &str,
        messages: &[ReplyMessage],
        delay: Option<f64>,
    ) -> bool {
        let name = self.display_name(url);
        let mut got_notice = false;
        for m in messages {
            if m.is_notice() {
                got_notice = true;
                warn!(
                    target: crate::rpc::messages::NOTICE_TARGET,
                    project = %name,
                    category = "scheduler",
                    "{}",
                    m.text.trim()
                );
            } else if m.priority.eq_ignore_ascii_case("high") {
                warn!(project = %name, "{}", m.text.trim());
            } else {
                info!(project = %name, "{}", m.text.trim());
            }
        }
        if let Some(d) = delay.filter(|d| *d > 0.0) {
            info!(project = %name, "Project requested delay of {d:.0} seconds");
        }
        got_notice
    }

    /// Acts on what applying a reply produced; `withdraw_notices`: a work request whose
    /// reply had no notice withdraws the project's scheduler notices.
    fn apply_outcome(&mut self, url: &str, out: &ApplyOutcome, withdraw_notices: bool, t: f64) {
        let name = self.display_name(url);
        if withdraw_notices {
            crate::rpc::messages::MessageLog::global().remove_notices(&name, "scheduler");
        }
        if let Some(feeds) = &out.rss_feeds {
            self.project_feeds(url, &name, feeds);
        }
        let added: u32 = out.tasks_added.values().sum();
        let acked = out
            .events
            .iter()
            .filter(|e| matches!(e, ReplyEvent::Acked(_)))
            .count();
        info!(
            project = %name,
            "Scheduler request completed: got {added} new tasks{}",
            if acked > 0 { format!(", {acked} reports acknowledged") } else { String::new() }
        );
        if let Some(gp) = &out.global_prefs {
            let text = format!(
                "<global_preferences>\n<source_project>{}</source_project>\n{}\n</global_preferences>\n",
                gp.source_project,
                gp.body.trim()
            );
            match write_atomic(&self.dir.join(GLOBAL_PREFS), &text) {
                Ok(()) => {
                    info!(project = %name, "new global preferences");
                    self.reload();
                }
                Err(e) => error!("cannot write {GLOBAL_PREFS}: {e}"),
            }
        }
        if out.project_prefs.is_some() || out.gui_urls.is_some() {
            self.update_account_file(url, out);
            let venue = self
                .state
                .project(url)
                .map(|p| p.project.host_venue.clone())
                .unwrap_or_default();
            if let Some(no_rsc) = crate::config::account_no_rsc(&self.dir, url, &venue) {
                self.config.no_rsc_prefs.insert(url.to_owned(), no_rsc);
            }
        }
        for e in &out.events {
            match e {
                ReplyEvent::AbortRunning(r) => {
                    warn!(project = %name, "task {r} aborted by the project");
                    self.tasks.abort(url, r, EXIT_ABORTED_BY_PROJECT);
                    if let Some(res) = self.state.project_mut(url).and_then(|p| p.result_mut(r)) {
                        if res.state < ResultState::ComputeError {
                            res.state = ResultState::Aborted;
                            res.exit_status = EXIT_ABORTED_BY_PROJECT;
                            res.ready_to_report = true;
                            res.completed_time = t;
                        }
                    }
                    self.state
                        .active_tasks
                        .retain(|a| !(a.project_master_url == url && a.result_name == *r));
                }
                ReplyEvent::FileError { file, message, .. } => {
                    warn!(project = %name, "file {file}: {message}");
                }
                ReplyEvent::MasterUrlChanged(c) => {
                    warn!(project = %name, "the server gives another master URL: {c:?}");
                }
                ReplyEvent::TaskMissingCoproc { name: r, resource } => {
                    warn!(project = %name, "task {r} needs a {resource} GPU this host lacks");
                }
                ReplyEvent::CodeSignKeyAccepted => {
                    info!(project = %name, "code-signing key stored");
                }
                ReplyEvent::CodeSignKeyChanged => {
                    info!(project = %name, "code-signing key changed (signed by the old key)");
                }
                _ => {}
            }
        }
        // Refused jobs are errored and reported, never written.
        let refused: Vec<(String, String, i32)> = out
            .refusals
            .iter()
            .filter(|r| r.kind == ObjectKind::Result)
            .map(|r| {
                let (code, why) = root_refusal(&out.refusals, &r.reason, 0);
                (r.name.clone(), why, code)
            })
            .collect();
        for r in &out.refusals {
            warn!(project = %name, "refused {:?} {:?}: {}", r.kind, r.name, r.reason);
        }
        if let Some(ps) = self.state.project_mut(url) {
            for (rname, why, code) in refused {
                if ps.result(&rname).is_some() {
                    continue;
                }
                ps.results.push(TaskResult {
                    name: rname,
                    state: ResultState::ComputeError,
                    exit_status: code,
                    ready_to_report: true,
                    received_time: t,
                    completed_time: t,
                    report_deadline: t,
                    stderr_out: format!(
                        "<message>\nrefused by the client: {}\n</message>",
                        quick_escape(&why)
                    ),
                    ..TaskResult::default()
                });
            }
        }
    }

    /// New jobs whose missing input files alone exceed the disk space BOINC may still use
    /// are errored and reported rather than downloaded.
    fn refuse_jobs_too_big(&mut self, url: &str, out: &ApplyOutcome, t: f64) {
        let added: Vec<&str> = out
            .events
            .iter()
            .filter_map(|e| match e {
                ReplyEvent::TaskAdded { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        if added.is_empty() {
            return;
        }
        let d = disk_figures(&self.dir, &self.state, &self.config.prefs.prefs);
        let room = (d.allowed - d.used_total).max(0.0);
        let Some(ps) = self.state.project_mut(url) else {
            return;
        };
        for name in added {
            let Some(r) = ps.result(name) else { continue };
            let Some(wu) = ps.workunit(&r.wu_name) else {
                continue;
            };
            let need: f64 = wu
                .input_files
                .iter()
                .filter_map(|fr| ps.file(&fr.file_name))
                .filter(|f| f.status == 0)
                .map(|f| f.nbytes.max(0.0))
                .sum();
            if need <= room {
                continue;
            }
            let msg = format!(
                "its input files need {:.1} MB; the disk preferences leave BOINC {:.1} MB",
                need / 1e6,
                room / 1e6
            );
            warn!(project = %url, "task {name} not run: {msg}");
            if let Some(r) = ps.result_mut(name) {
                r.state = ResultState::ComputeError;
                r.exit_status = ERR_RSC_LIMIT_EXCEEDED;
                r.ready_to_report = true;
                r.completed_time = t;
                r.stderr_out = format!("<message>\n{}\n</message>", quick_escape(&msg));
            }
        }
    }

    fn update_account_file(&mut self, url: &str, out: &ApplyOutcome) {
        let path = self.dir.join(account_file_name(url));
        let Ok(text) = fs::read_to_string(&path) else {
            return;
        };
        let Ok(parsed) = AccountFile::parse(&text, &account_file_name(url)) else {
            return;
        };
        let mut acct = parsed.value;
        if let Some(p) = &out.project_prefs {
            acct.project_prefs = p.clone();
        }
        if let Some(g) = &out.gui_urls {
            acct.gui_urls = Some(g.clone());
        }
        if let Some(ps) = self.state.project(url) {
            if !ps.project.project_name.is_empty() {
                acct.project_name = ps.project.project_name.clone();
            }
        }
        if let Err(e) = write_atomic(&path, &acct.to_xml()) {
            error!("cannot write {}: {e}", path.display());
        }
    }

    /// Removes what the server acknowledged: results, then workunits without results, then
    /// files nothing refers to (deleted from disk unless sticky); detaches projects marked
    /// "detach when done" once they have no task left.
    fn collect_garbage(&mut self, t: f64) {
        let mut changed = false;
        let mut detach = Vec::new();
        let mut old: Vec<(String, String, TaskResult)> = Vec::new();
        for ps in &mut self.state.projects {
            let url = ps.project.master_url.clone();
            let before = ps.results.len();
            let mut gone = Vec::new();
            ps.results.retain(|r| {
                let keep = !(r.got_server_ack && r.ready_to_report);
                if !keep {
                    gone.push(r.clone());
                }
                keep
            });
            old.extend(gone.into_iter().map(|r| {
                let app = ps
                    .workunit(&r.wu_name)
                    .map(|w| w.app_name.clone())
                    .unwrap_or_default();
                (url.clone(), app, r)
            }));
            if ps.results.len() != before {
                changed = true;
                let live: std::collections::HashSet<&str> =
                    ps.results.iter().map(|r| r.wu_name.as_str()).collect();
                ps.workunits.retain(|w| live.contains(w.name.as_str()));
                let mut used: BTreeMap<&str, ()> = BTreeMap::new();
                for w in &ps.workunits {
                    for f in &w.input_files {
                        used.insert(&f.file_name, ());
                    }
                }
                for r in &ps.results {
                    for f in &r.output_files {
                        used.insert(&f.file_name, ());
                    }
                }
                for v in &ps.app_versions {
                    for f in &v.file_refs {
                        used.insert(&f.file_name, ());
                    }
                }
                let pdir = config::project_dir(&self.dir, &url);
                let mut unused = Vec::new();
                // An anonymous project's own files (app_info.xml) are the volunteer's: kept.
                let anonymous = ps.project.anonymous_platform;
                ps.files.retain(|f| {
                    let keep = used.contains_key(f.name.as_str())
                        || f.sticky
                        || f.is_user_file
                        || (anonymous && ferrite_project::anonymous::is_local_file(f));
                    if !keep {
                        unused.push(f.name.clone());
                    }
                    keep
                });
                for f in unused {
                    if ferrite_project::names::check_file_name(&f).is_ok() {
                        let _ = fs::remove_file(pdir.join(&f));
                    }
                }
            }
            if ps.project.detach_when_done && ps.results.is_empty() {
                detach.push(url);
            }
        }
        while self
            .projects
            .old_results
            .front()
            .is_some_and(|o| o.create_time < t - OLD_RESULT_KEEP)
        {
            self.projects.old_results.pop_front();
        }
        for (url, app_name, r) in old {
            info!(project = %url, "task {} acknowledged by the server; removed", r.name);
            self.projects.old_results.push_back(OldResult {
                project_url: url,
                result_name: r.name.clone(),
                app_name,
                exit_status: r.exit_status,
                elapsed_time: r.final_elapsed_time,
                cpu_time: r.final_cpu_time,
                completed_time: r.completed_time,
                create_time: t,
            });
        }
        for url in detach {
            match config::detach_project(&self.dir, &mut self.state, &url) {
                Ok(_) => info!(project = %url, "detached: its tasks are done"),
                Err(e) => error!("detaching from {url}: {e}"),
            }
            changed = true;
        }
        if changed {
            self.save.mark_dirty(t);
        }
    }
}

fn quick_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_saturates() {
        assert_eq!(backoff(1, 60.0, 14400.0, 1.0), 120.0);
        assert_eq!(backoff(10, 60.0, 14400.0, 1.0), 14400.0);
        assert_eq!(backoff(3, 60.0, 14400.0, 0.0), 240.0);
    }

    #[test]
    fn rpc_failures_back_off_then_refetch_the_master_page() {
        let k = Tuning::default();
        let mut p = Project::default();
        rpc_backoff(&mut p, 1000.0, 1.0, &k);
        assert_eq!(p.nrpc_failures, 1);
        assert_eq!(p.min_rpc_time, 1120.0);
        p.nrpc_failures = k.master_fetch_period;
        rpc_backoff(&mut p, 2000.0, 1.0, &k);
        assert!(p.master_url_fetch_pending);
        assert_eq!(p.nrpc_failures, 1);
        assert_eq!(p.master_fetch_failures, 1);
        p.master_fetch_failures = k.master_fetch_retry_cap;
        rpc_backoff(&mut p, 3000.0, 1.0, &k);
        assert_eq!(p.min_rpc_time, 3000.0 + 86400.0);
    }

    #[test]
    fn a_chosen_request_waits_only_for_a_server_delay_or_a_master_fetch() {
        let mut p = Project::default();
        assert!(may_fetch_from(&p, 1000.0));
        // Backed off after failures: the core decided to try again (an instance idles).
        p.nrpc_failures = 3;
        p.min_rpc_time = 5000.0;
        assert!(may_fetch_from(&p, 1000.0));
        // ...but not before the master page is fetched again.
        p.master_url_fetch_pending = true;
        assert!(!may_fetch_from(&p, 1000.0));
        assert!(may_fetch_from(&p, 5000.0));
        // A server's request_delay holds.
        p.master_url_fetch_pending = false;
        p.nrpc_failures = 0;
        assert!(!may_fetch_from(&p, 1000.0));
        p.min_rpc_time = 0.0;
        p.suspended_via_gui = true;
        assert!(!may_fetch_from(&p, 1000.0));
    }

    #[test]
    fn command_line_figures_change_the_rpc_backoff() {
        let o = crate::cli::Options::try_parse_args([
            "ferrited",
            "--sched_retry_delay_min",
            "10",
            "--sched_retry_delay_max",
            "15",
            "--master_fetch_period",
            "2",
            "--master_fetch_retry_cap",
            "1",
            "--master_fetch_interval",
            "500",
        ])
        .expect("parses");
        let k = Tuning::from_options(&o);
        let mut p = Project::default();
        rpc_backoff(&mut p, 1000.0, 1.0, &k);
        assert_eq!(p.min_rpc_time, 1015.0, "min 10 doubled, capped at 15");
        rpc_backoff(&mut p, 2000.0, 1.0, &k);
        assert!(!p.master_url_fetch_pending);
        rpc_backoff(&mut p, 3000.0, 1.0, &k);
        assert!(
            p.master_url_fetch_pending,
            "master page again after 2 failures"
        );
        assert_eq!(p.master_fetch_failures, 1);
        rpc_backoff(&mut p, 4000.0, 1.0, &k);
        assert_eq!(p.min_rpc_time, 4500.0, "then --master_fetch_interval");
    }

    #[test]
    fn refusals_map_to_official_codes() {
        use ferrite_project::names::NameError;
        let bad = RefusalReason::BadName(NameError::DotDot);
        assert_eq!(refusal_code(&bad), ERR_BAD_FILENAME);
        assert_eq!(
            refusal_code(&RefusalReason::NoAppVersion),
            ERR_NO_APP_VERSION
        );
    }
}
