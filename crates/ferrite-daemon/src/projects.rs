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

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;

use ferrite_net::{boinc_user_agent, HttpClient, HttpConfig, ProxyConfig, ProxyServer};
use ferrite_project::reply::{ObjectKind, Refusal, RefusalReason};
use ferrite_project::request::RscWork;
use ferrite_proto::client_state::{ClientState, Project, RpcReason};
use ferrite_proto::sched_reply::SchedulerReply;
use ferrite_sched::{CoprocKind, Jitter, ResourceId, SplitMix64, World};
use tracing::{error, warn};

use crate::config;
use crate::transfers::ERR_BAD_FILENAME;
use crate::tuning::Tuning;

pub(crate) mod applying;
pub(crate) mod disk;
pub(crate) mod garbage;
pub(crate) mod old_results;

pub(crate) use disk::{disk_figures, disk_shares, volume_space};
pub use old_results::{old_results_xml, OldResult};

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
pub(crate) const REPORT_CHECK_PERIOD: f64 = 60.0;
/// How often the loop looks for something to do without being woken, seconds
/// (`SCHEDULER_RPC_POLL_PERIOD`).
pub(crate) const POLL_PERIOD: f64 = 5.0;

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
        /// The reply, read off the main loop (its text is saved as `sched_reply_*.xml`
        /// there too), or the error of the last URL tried or of the reading.
        result: Result<Box<ReadReply>, String>,
        /// Each request the server answered: bytes posted and seconds taken (the official
        /// client counts every POST in its upload statistics, `net_stats`).
        posted: Vec<(f64, f64)>,
    },
}

/// A scheduler reply read off the main loop: the reply with its first
/// [`REPLY_BATCH`](applying::REPLY_BATCH) new tasks, and the rest of its tasks held back
/// (`ferrite_project::reply::split_tasks`), taken in a batch per turn of the loop.
#[derive(Debug)]
pub struct ReadReply {
    /// The reply, all but the held-back tasks.
    pub reply: SchedulerReply,
    /// The tasks held back, in the order they are applied.
    pub held_back: Vec<ferrite_project::reply::TaskBatch>,
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

/// The loop's own state (the rest is in the client state).
#[derive(Debug)]
pub struct ProjectLoop {
    /// The HTTP client, built from cc_config at first use and after a reload.
    pub(crate) http: Option<HttpClient>,
    /// Chosen once, to spread hosts over a project's scheduler URLs.
    pub(crate) url_random: f64,
    /// Backoff jitter.
    pub(crate) jitter: SplitMix64,
    /// The scheduler operation in flight (one at a time), by project URL; a reply still
    /// being taken in keeps its project's operation in flight.
    pub(crate) busy: Option<String>,
    /// A reply whose tasks are being taken in, a batch per turn of the loop.
    pub(crate) applying: Option<applying::Applying>,
    /// Next time to look for something to do.
    pub(crate) next_poll: f64,
    /// Last time results were checked for reporting.
    pub(crate) last_report_check: f64,
    /// Tasks ready to report at the last look.
    pub(crate) last_ready: usize,
    /// The state's persisted backoffs were given to the scheduling core.
    pub(crate) backoffs_loaded: bool,
    /// The core's work request of the current pass predates the saved backoffs: skip it.
    pub(crate) fetch_after_next_pass: bool,
    /// The project last attached through GUI RPC while its first contact (master page,
    /// first scheduler RPC) has not ended: a failure of that contact is logged as the
    /// attach's once. `project_attach_poll` does not wait for it (as in the official client,
    /// it answers the attach request's own result: 0).
    pub attach_pending: Option<String>,
    /// Scheduler RPCs and failures per project since start-up, for the metrics.
    pub(crate) rpc_counts: BTreeMap<String, (u64, u64)>,
    /// Tasks acknowledged in the last hour, oldest first (`get_old_results`).
    pub old_results: std::collections::VecDeque<OldResult>,
    /// When the clean-up after acknowledgements must walk every result.
    pub(crate) garbage: garbage::GarbageWatch,
    /// The attach wizard's web RPCs, by [`WebRpcKind`].
    pub web: [WebRpcState; 3],
    /// The data directory could take nothing more at the last look (see
    /// [`Daemon::storage_blocks_work`]).
    pub(crate) storage_full: bool,
    /// Retry figures (the official defaults unless the command line changed them).
    pub tuning: Tuning,
    /// Projects with trickle-up messages sent and not yet acknowledged.
    pub(crate) sent_trickles: crate::trickle::SentTrickles,
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
            applying: None,
            next_poll: 0.0,
            last_report_check: 0.0,
            last_ready: 0,
            backoffs_loaded: false,
            fetch_after_next_pass: false,
            attach_pending: None,
            web: Default::default(),
            rpc_counts: BTreeMap::new(),
            old_results: std::collections::VecDeque::new(),
            garbage: Default::default(),
            storage_full: false,
            tuning: Tuning::default(),
            sent_trickles: Default::default(),
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
    /// Whether a scheduler operation (master page or RPC) is under way.
    pub fn busy(&self) -> bool {
        self.busy.is_some()
    }

    pub fn busy_with(&self, url: &str) -> bool {
        self.busy.as_deref() == Some(url)
    }
}

/// `backoff(n, MIN, MAX) = min(MIN * 2^n, MAX) * (0.5 + 0.5 U)`.
pub(crate) fn backoff(n: i32, min: f64, max: f64, u: f64) -> f64 {
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
pub(crate) fn to_request_work(
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
pub(crate) fn rpc_backoff(p: &mut Project, now: f64, u: f64, k: &Tuning) {
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
pub(crate) fn may_fetch_from(p: &Project, t: f64) -> bool {
    let backed_off = p.min_rpc_time > t && (p.nrpc_failures == 0 || p.master_url_fetch_pending);
    !backed_off && !p.suspended_via_gui
}

/// Why a result was refused, as a BOINC error code.
pub(crate) fn refusal_code(r: &RefusalReason) -> i32 {
    match r {
        RefusalReason::BadName(_) | RefusalReason::BadReference { .. } => ERR_BAD_FILENAME,
        RefusalReason::KeyBadSignature | RefusalReason::KeyWithoutSignature => ERR_RSA_FAILED,
        _ => ERR_NO_APP_VERSION,
    }
}

/// A reply's refusals of workunits and files by name (the first of each name), so that each
/// refused result finds its cause without a scan of every refusal.
pub(crate) struct RefusalCauses<'a> {
    workunits: HashMap<&'a str, &'a Refusal>,
    files: HashMap<&'a str, &'a Refusal>,
}

impl<'a> RefusalCauses<'a> {
    pub(crate) fn new(all: &'a [Refusal]) -> Self {
        let mut causes = RefusalCauses {
            workunits: HashMap::new(),
            files: HashMap::new(),
        };
        for r in all {
            let map = match r.kind {
                ObjectKind::Workunit => &mut causes.workunits,
                ObjectKind::File => &mut causes.files,
                _ => continue,
            };
            map.entry(r.name.as_str()).or_insert(r);
        }
        causes
    }

    /// The refusal that `reason` comes from, if the reply refused it.
    pub(crate) fn cause(&self, reason: &RefusalReason) -> Option<&'a Refusal> {
        match reason {
            RefusalReason::UnknownWorkunit(n) => self.workunits.get(n.as_str()).copied(),
            RefusalReason::UnknownFile(n) => self.files.get(n.as_str()).copied(),
            _ => None,
        }
    }
}

/// The code and text of what a refusal comes from: a result refused because its workunit
/// was refused because an input file had a hostile name is reported as a bad file name.
pub(crate) fn root_refusal(
    causes: &RefusalCauses<'_>,
    reason: &RefusalReason,
    depth: usize,
) -> (i32, String) {
    if depth < 4 {
        if let Some(r) = causes.cause(reason) {
            let (code, why) = root_refusal(causes, &r.reason, depth + 1);
            return (code, format!("{reason}: {why}"));
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
pub(crate) fn http_client(
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

/// The account key of `url`, from its account file.
pub(crate) fn authenticator(dir: &Path, url: &str) -> Option<String> {
    config::read_account(dir, url)
        .map(|a| a.authenticator)
        .filter(|a| !a.trim().is_empty())
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
