//! Account managers (BAM!, Science United, boinchub): the manager in use (read from and
//! written to `acct_mgr_url.xml` and `acct_mgr_login.xml` as the official client does), the
//! periodic and GUI-requested syncs (request posted to `<manager URL>rpc.php`, reply carried
//! out through `ferrite_project::acct_mgr::plan_sync`), and the GUI RPC calls
//! `acct_mgr_rpc`, `acct_mgr_rpc_poll` and `acct_mgr_info`.
//!
//! [`AcctMgr`] decides (when to sync, what to send, what a reply means) and changes the
//! state, the account files and its own two files it is handed; `daemon/acct_mgr.rs` is the
//! glue that posts the request and hands a reply's outcome to the tasks and the feeds.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::Path;

use ferrite_gui_rpc::reply;
use ferrite_project::acct_mgr::{
    plan_sync, use_am_prefs, NoteLevel, ProjectChanges, ProjectView, ShareChange, SyncClock,
    SyncPlan,
};
use ferrite_project::verify::BoincCrypt;
use ferrite_proto::account::{account_file_name, canonicalize_master_url, AccountFile};
use ferrite_proto::acct_mgr::{
    password_hash, AcctMgrLoginFile, AcctMgrUrlFile, AmCredentials, AmProject, AmReply, AmRequest,
    ACCT_MGR_LOGIN_FILE, ACCT_MGR_REPLY_FILE, ACCT_MGR_URL_FILE,
};
use ferrite_proto::client_state::{
    ActiveTask, ClientState, ProjectLookup, ResultState, RpcReason, RunMode, TimeStats,
};
use tracing::{error, info, warn};

use crate::config;
use crate::messages::NOTICE_TARGET;
use crate::projects::ERR_IN_PROGRESS;

/// `ERR_INVALID_URL`.
const ERR_INVALID_URL: i32 = -189;
/// `gui_rpc_auth.cfg`.
const GUI_RPC_PASSWD_FILE: &str = "gui_rpc_auth.cfg";

/// Which manager and account a sync is for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Target {
    /// Manager URL (empty: leave the manager).
    pub url: String,
    /// Login name.
    pub login: String,
    /// Password hash.
    pub password_hash: String,
    /// Account key at the manager.
    pub authenticator: String,
}

impl Target {
    fn credentials(&self) -> AmCredentials {
        if self.authenticator.is_empty() {
            AmCredentials::Login {
                name: self.login.clone(),
                password_hash: self.password_hash.clone(),
            }
        } else {
            AmCredentials::Authenticator(self.authenticator.clone())
        }
    }
}

/// The account manager in use, the sync clock and the last GUI-visible outcome.
#[derive(Debug, Default)]
pub struct AcctMgr {
    /// `acct_mgr_url.xml` (empty URL: no manager).
    pub url_file: AcctMgrUrlFile,
    /// `acct_mgr_login.xml`.
    pub login: AcctMgrLoginFile,
    /// When to sync next.
    pub clock: SyncClock,
    /// Send the tasks in progress (`send_tasks_active`).
    pub send_tasks_active: bool,
    /// Send every task (`send_tasks_all`).
    pub send_tasks_all: bool,
    /// The manager refused the password on a periodic sync (`get_cc_status`).
    pub password_error: bool,
    /// What `acct_mgr_rpc_poll` answers: error number and message.
    pub op_error: (i32, String),
    /// The sync in flight, if any, and whether a GUI asked for it.
    in_flight: Option<(Target, bool)>,
    /// Syncs started since start-up (for figures).
    pub syncs: u64,
    /// Next look at starvation (dynamic managers, once a minute).
    next_starve_check: f64,
}

impl AcctMgr {
    /// Reads the two files of `dir` (absent files: no manager).
    pub fn load(dir: &Path) -> Self {
        let mut am = Self::default();
        match fs::read_to_string(dir.join(ACCT_MGR_URL_FILE)) {
            Ok(text) => match AcctMgrUrlFile::parse(&text) {
                Ok(p) => am.url_file = p.value,
                Err(e) => warn!("{ACCT_MGR_URL_FILE} not used: {e}"),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => warn!("cannot read {ACCT_MGR_URL_FILE}: {e}"),
        }
        match fs::read_to_string(dir.join(ACCT_MGR_LOGIN_FILE)) {
            Ok(text) => match AcctMgrLoginFile::parse(&text) {
                Ok(p) => am.login = p.value,
                Err(e) => warn!("{ACCT_MGR_LOGIN_FILE} not used: {e}"),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => warn!("cannot read {ACCT_MGR_LOGIN_FILE}: {e}"),
        }
        am.clock.next_rpc_time = am.login.next_rpc_time;
        am
    }

    /// A manager is configured with credentials (`ACCT_MGR_INFO::using_am`).
    pub fn using_am(&self) -> bool {
        !self.url_file.url.is_empty() && self.login.has_credentials()
    }

    /// The manager and account in use.
    pub fn current(&self) -> Target {
        Target {
            url: self.url_file.url.clone(),
            login: self.login.login.clone(),
            password_hash: self.login.password_hash.clone(),
            authenticator: self.login.authenticator.clone(),
        }
    }

    /// `same_am`: the same URL and the same account key, or the same name and hash.
    fn same_am(&self, t: &Target) -> bool {
        if t.url != self.url_file.url {
            return false;
        }
        if t.authenticator == self.login.authenticator {
            return true;
        }
        t.login == self.login.login && t.password_hash == self.login.password_hash
    }

    /// A sync is in flight.
    pub fn busy(&self) -> bool {
        self.in_flight.is_some()
    }

    /// The keyword element for scheduler requests, while a manager is in use.
    pub fn keywords_xml(&self) -> Option<String> {
        (self.using_am() && !self.login.user_keywords.is_empty())
            .then(|| self.login.user_keywords.to_xml())
    }

    /// Global preferences whose source is this manager: scheduler replies do not replace
    /// them.
    pub fn owns_prefs(&self, source_project: &str) -> bool {
        self.using_am()
            && !source_project.is_empty()
            && canonicalize_master_url(source_project)
                == canonicalize_master_url(&self.url_file.url)
    }

    /// The `acct_mgr_info` reply, in the official layout.
    pub fn info_xml(&self) -> String {
        let mut s = format!(
            "<acct_mgr_info>\n   <acct_mgr_url>{}</acct_mgr_url>\n   <acct_mgr_name>{}</acct_mgr_name>\n",
            ferrite_proto::xml::escape(&self.url_file.url),
            ferrite_proto::xml::escape(&self.url_file.name)
        );
        if !self.login.login.is_empty() || !self.login.authenticator.is_empty() {
            s.push_str("   <have_credentials/>\n");
        }
        if self.url_file.cookie_required {
            s.push_str(&format!(
                "   <cookie_required/>\n   <cookie_failure_url>{}</cookie_failure_url>\n",
                ferrite_proto::xml::escape(&self.url_file.cookie_failure_url)
            ));
        }
        s.push_str("</acct_mgr_info>\n");
        s
    }

    /// The `acct_mgr_rpc_poll` reply.
    pub fn poll_xml(&self) -> String {
        let mut s = String::from("<acct_mgr_rpc_reply>\n");
        if !self.op_error.1.is_empty() {
            s.push_str(&format!(
                "    <message>{}</message>\n",
                ferrite_proto::xml::escape(&self.op_error.1)
            ));
        }
        s.push_str(&format!(
            "    <error_num>{}</error_num>\n</acct_mgr_rpc_reply>\n",
            self.op_error.0
        ));
        s
    }

    /// Writes both files (each only when it has something to say), as after every sync.
    fn write_files(&mut self, dir: &Path) {
        self.login.next_rpc_time = self.clock.next_rpc_time;
        if !self.url_file.url.is_empty() {
            if let Err(e) =
                config::write_atomic(&dir.join(ACCT_MGR_URL_FILE), &self.url_file.to_xml())
            {
                warn!(target: NOTICE_TARGET, "Can't write to {ACCT_MGR_URL_FILE}: {e}");
            }
        }
        if self.login.has_credentials() || !self.login.login.is_empty() {
            if let Err(e) =
                config::write_atomic(&dir.join(ACCT_MGR_LOGIN_FILE), &self.login.to_xml())
            {
                warn!(target: NOTICE_TARGET, "Can't write to {ACCT_MGR_LOGIN_FILE}: {e}");
            }
        }
    }
}

/// What a sync that was asked for comes to ([`AcctMgr::begin`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Begin {
    /// Nothing to send (the URL was not valid, or there is no manager to leave); the
    /// outcome is in `op_error`.
    Nothing,
    /// Leave the manager in use ([`AcctMgr::leave`]).
    Leave,
    /// Send a request for this manager and account.
    Send(Target),
}

/// What a sync request says besides the manager's own fields.
#[derive(Debug)]
pub struct RequestInputs<'a> {
    /// The client's state (host, projects, tasks, figures).
    pub state: &'a ClientState,
    /// The data directory (account files, `gui_rpc_auth.cfg`, `global_prefs.xml`).
    pub dir: &'a Path,
    /// The GUI RPC port.
    pub gui_rpc_port: u16,
    /// The preferences in force, as XML.
    pub working_global_prefs: String,
    /// Network figures may be sent (no `suppress_net_info`).
    pub net_info: bool,
    /// The time statistics as requests report them.
    pub time_stats: TimeStats,
    /// The tasks' `<result>` elements, when the manager asks for them.
    pub results: Option<String>,
}

impl AcctMgr {
    /// Start-up: the manager of `dir`'s files; without `acct_mgr_url.xml` no project of
    /// `state` counts as the manager's (so the user can detach them), as officially.
    pub fn start(dir: &Path, state: &mut ClientState) -> Self {
        let am = Self::load(dir);
        if am.url_file.url.is_empty() {
            for ps in &mut state.projects {
                ps.project.attached_via_acct_mgr = false;
            }
        }
        if am.using_am() {
            info!("Using account manager {}", am.url_file.name);
            if !am.login.user_name.is_empty() {
                info!("Account manager login: {}", am.login.user_name);
            }
        }
        am
    }

    /// The only source whose feeds are fetched: a manager that sent `no_project_notices`
    /// (as the official client's feed list).
    pub fn feed_filter(&self) -> Option<String> {
        (self.using_am() && self.login.no_project_notices).then(|| self.url_file.url.clone())
    }

    /// Once a turn of the loop: the sync to start at `t`, if any. A periodic sync when one
    /// is due; for a dynamic manager, once a minute, a sync asking for other projects when
    /// the computer has lacked work (`idle`, asked only then) for 10 minutes (then backing
    /// off, doubling up to a day).
    pub fn tick(&mut self, t: f64, idle: impl FnOnce() -> bool) -> Option<Target> {
        if !self.using_am() || self.busy() {
            return None;
        }
        if self.clock.due(t) {
            self.clock.started(t);
            return Some(self.current());
        }
        if !self.login.dynamic || t < self.next_starve_check {
            return None;
        }
        self.next_starve_check = t + 60.0;
        if self.clock.starved(t, idle()) {
            info!(
                "Some devices idle - requesting new projects from {}",
                self.url_file.name
            );
            return Some(self.current());
        }
        None
    }

    /// `acct_mgr_rpc`: the manager and account to sync with: the caller's login, or the
    /// current one (`use_config_file`); `Err` holds the GUI RPC error reply.
    pub fn gui_target(
        &self,
        url: Option<String>,
        name: Option<String>,
        password: Option<String>,
        use_config_file: bool,
    ) -> Result<Target, String> {
        let target = if use_config_file {
            if !self.using_am() {
                error!("Not using account manager");
                return Err(reply::error("bad arg"));
            }
            self.current()
        } else {
            let (Some(url), Some(name), Some(password)) = (url, name, password) else {
                return Err(reply::error("bad arg"));
            };
            Target {
                url,
                password_hash: password_hash(&name, &password),
                login: name,
                authenticator: String::new(),
            }
        };
        if self.using_am() && !target.url.is_empty() && !self.same_am(&target) {
            return Err(reply::error("attached to a different AM - detach first"));
        }
        Ok(target)
    }

    /// A sync with `target` was asked for (`ACCT_MGR_OP::do_rpc`); an empty URL leaves the
    /// manager.
    pub fn begin(&mut self, mut target: Target) -> Begin {
        self.op_error = (ERR_IN_PROGRESS, String::new());
        if target.url.trim().is_empty() {
            let leave = !self.url_file.url.is_empty();
            self.op_error = (0, String::new());
            return if leave { Begin::Leave } else { Begin::Nothing };
        }
        target.url = canonicalize_master_url(target.url.trim());
        if !valid_master_url(&target.url) {
            self.op_error = (ERR_INVALID_URL, String::new());
            return Begin::Nothing;
        }
        Begin::Send(target)
    }

    /// The sync cannot be sent: no HTTP client.
    pub fn no_http(&mut self, t: f64) {
        self.op_error = (-113, "HTTP is not available".to_owned());
        self.clock.failed(t, jitter());
    }

    /// Whether the manager wants the tasks sent, and then only the active ones.
    pub fn tasks_wanted(&self) -> Option<bool> {
        (self.send_tasks_active || self.send_tasks_all).then_some(!self.send_tasks_all)
    }

    /// The request for a sync with `target`.
    pub fn request(&self, target: &Target, i: RequestInputs<'_>) -> AmRequest {
        let s = i.state;
        let v = s.core_client_version;
        let gui_rpc = self.url_file.send_gui_rpc_info.then(|| {
            let pw = fs::read_to_string(i.dir.join(GUI_RPC_PASSWD_FILE))
                .ok()
                .map(|t| t.lines().next().unwrap_or("").trim().to_owned());
            (i.gui_rpc_port, pw)
        });
        let flops = s.host_info.p_fpops.max(1.0);
        // Looked up through indexes: a sync stays linear in the number of tasks.
        let mut active: std::collections::HashMap<(&str, &str), &ActiveTask> =
            std::collections::HashMap::with_capacity(s.active_tasks.len());
        for a in &s.active_tasks {
            active
                .entry((a.project_master_url.as_str(), a.result_name.as_str()))
                .or_insert(a);
        }
        let projects = s
            .projects
            .iter()
            .map(|ps| {
                let p = &ps.project;
                let look = ProjectLookup::new(ps);
                let (mut not_started, mut in_progress) = (0.0, 0.0);
                for r in ps
                    .results
                    .iter()
                    .filter(|r| r.state < ResultState::ComputeError)
                {
                    let est = look.workunit(&r.wu_name).map_or(0.0, |w| w.rsc_fpops_est) / flops;
                    match active.get(&(p.master_url.as_str(), r.name.as_str())) {
                        Some(a) => in_progress += est * (1.0 - a.checkpoint_fraction_done),
                        None => not_started += est,
                    }
                }
                AmProject {
                    url: p.master_url.clone(),
                    project_name: p.project_name.clone(),
                    suspended_via_gui: p.suspended_via_gui,
                    hostid: p.hostid,
                    not_started_dur: not_started,
                    in_progress_dur: in_progress,
                    attached_via_acct_mgr: p.attached_via_acct_mgr,
                    dont_request_more_work: p.dont_request_more_work,
                    detach_when_done: p.detach_when_done,
                    ended: p.ended,
                    resource_share: p.resource_share,
                    disk_usage: p.disk_usage,
                    disk_share: p.disk_share,
                    dynamic: self
                        .login
                        .dynamic
                        .then(|| ferrite_proto::acct_mgr::AmProjectWork {
                            nrpc_failures: p.nrpc_failures,
                            cpu_ec: p.cpu_ec,
                            cpu_time: p.cpu_time,
                            gpu_ec: p.gpu_ec,
                            gpu_time: p.gpu_time,
                            njobs_success: p.njobs_success,
                            njobs_error: p.njobs_error,
                            sched_req_no_work: Vec::new(),
                        }),
                    account_key: p
                        .attached_via_acct_mgr
                        .then(|| account_key(i.dir, &p.master_url)),
                }
            })
            .collect();
        AmRequest {
            credentials: Some(target.credentials()),
            host_cpid: s.host_info.host_cpid.clone(),
            domain_name: s.host_info.domain_name.clone(),
            client_version: format!("{}.{}.{}", v.major, v.minor, v.release),
            run_mode: match s.user_run_request {
                RunMode::Always => "always",
                RunMode::Auto => "auto",
                RunMode::Never => "never",
            }
            .to_owned(),
            platform_name: s.platform_name.clone(),
            alt_platforms: s.alt_platforms.clone(),
            previous_host_cpid: self.login.previous_host_cpid.clone(),
            gui_rpc,
            projects,
            working_global_prefs: i.working_global_prefs,
            global_prefs_file: fs::read_to_string(i.dir.join(config::GLOBAL_PREFS)).ok(),
            host_info: s.host_info.clone(),
            net_info: i.net_info,
            opaque: self.login.opaque.clone(),
            time_stats: i.time_stats,
            net_stats: s.net_stats.clone(),
            results: i.results,
        }
    }

    /// The request was sent; its reply is awaited.
    pub fn sent(&mut self, target: Target, via_gui: bool) {
        self.in_flight = Some((target, via_gui));
        self.syncs += 1;
    }

    /// The sync in flight ended: its manager and account, and whether a GUI asked for it.
    pub fn take_in_flight(&mut self) -> Option<(Target, bool)> {
        self.in_flight.take()
    }

    /// A sync failed at `t` (`code`, `text`): said, shown to `acct_mgr_rpc_poll`, retried
    /// later.
    pub fn failed(&mut self, code: i32, text: String, t: f64) {
        info!("[{}] {text}", self.url_file.name);
        self.op_error = (code, text);
        self.clock.failed(t, jitter());
    }

    /// What to do with a sync's reply (`plan_sync` over `state`'s projects), its notes
    /// logged; a plan that did not succeed retries later.
    pub fn plan(
        &mut self,
        state: &ClientState,
        dir: &Path,
        reply: &AmReply,
        via_gui: bool,
        t: f64,
    ) -> SyncPlan {
        let views: Vec<ProjectView> = state
            .projects
            .iter()
            .map(|ps| ProjectView {
                url: ps.project.master_url.clone(),
                authenticator: account_key(dir, &ps.project.master_url),
                attached_via_acct_mgr: ps.project.attached_via_acct_mgr,
                detach_when_done: ps.project.detach_when_done,
                ntasks: ps.results.len(),
                has_am_share: ps.project.ams_resource_share_new.is_some(),
            })
            .collect();
        let plan = plan_sync(
            &views,
            reply,
            &self.url_file.signing_key,
            via_gui,
            &BoincCrypt,
        );
        self.password_error = plan.password_error;
        self.op_error = (reply.error_num, reply.error.clone());
        self.log_plan_notes(&plan);
        if !plan.succeeded() {
            self.clock.failed(t, jitter());
        }
        plan
    }

    fn log_plan_notes(&self, plan: &SyncPlan) {
        let am = self.url_file.name.as_str();
        for n in &plan.notes {
            let project = n.project.as_deref().unwrap_or(am);
            match n.level {
                NoteLevel::Info => info!(project = %project, "{}", n.text),
                NoteLevel::Alert => warn!(target: NOTICE_TARGET, project = %project, "{}", n.text),
                NoteLevel::Error => error!(project = %project, "{}", n.text),
            }
        }
    }

    /// A reply with a good signing key: `target` and the reply's account become the
    /// manager in use.
    pub fn adopt(&mut self, target: &Target, reply: &AmReply) {
        if !reply.name.is_empty() {
            self.url_file.name = reply.name.clone();
        }
        self.url_file.signing_key = reply.signing_key.clone();
        if !reply.opaque.is_empty() {
            self.login.opaque = reply.opaque.clone();
        }
        self.url_file.url = target.url.clone();
        self.login.login = target.login.clone();
        self.login.password_hash = target.password_hash.clone();
        self.login.authenticator = target.authenticator.clone();
        if !reply.authenticator.is_empty() {
            // The manager's account key replaces the name and password.
            self.login.authenticator = reply.authenticator.clone();
        }
        self.login.no_project_notices = reply.no_project_notices;
        self.login.dynamic = reply.dynamic;
        self.send_tasks_active = reply.send_tasks_active;
        self.send_tasks_all = reply.send_tasks_all;
    }

    /// A sync succeeded at `t` on host `host_cpid`: the account's names, the next sync and
    /// the keywords are kept, and both files written to `dir`.
    pub fn synced(&mut self, reply: &AmReply, host_cpid: &str, dir: &Path, t: f64) {
        self.login.user_name = reply.user_name.clone();
        self.login.team_name = reply.team_name.clone();
        self.login.previous_host_cpid = host_cpid.to_owned();
        self.clock.succeeded(t, reply.repeat_sec);
        self.login.user_keywords = reply.user_keywords.clone();
        self.write_files(dir);
    }

    /// Leaves the manager: forget it, delete its files in `dir`; `state`'s projects stay
    /// attached but are the user's again (share from the account file, no manager
    /// exclusions). Returns the manager's URL.
    pub fn leave(&mut self, dir: &Path, state: &mut ClientState) -> String {
        info!("Removing account manager info");
        let am_url = self.url_file.url.clone();
        *self = AcctMgr::default();
        for f in [ACCT_MGR_URL_FILE, ACCT_MGR_LOGIN_FILE] {
            match fs::remove_file(dir.join(f)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => warn!("cannot delete {f}: {e}"),
                _ => {}
            }
        }
        let shares: Vec<(String, f64)> = state
            .projects
            .iter()
            .filter(|ps| ps.project.ams_resource_share_new.is_some())
            .map(|ps| {
                let u = ps.project.master_url.clone();
                let s = account_share(dir, &u).unwrap_or(100.0);
                (u, s)
            })
            .collect();
        for ps in &mut state.projects {
            let p = &mut ps.project;
            p.attached_via_acct_mgr = false;
            p.no_rsc_ams.clear();
            if p.ams_resource_share_new.take().is_some() {
                if let Some((_, s)) = shares.iter().find(|(u, _)| *u == p.master_url) {
                    p.resource_share = *s;
                }
            }
        }
        am_url
    }
}

/// Reads a sync's outcome: the reply text (kept in `acct_mgr_reply.xml` in `dir`) parsed,
/// or (BOINC error code, text).
pub fn read_reply(
    dir: &Path,
    result: Result<String, (i32, String)>,
) -> Result<AmReply, (i32, String)> {
    match result {
        Ok(text) => {
            let _ = fs::write(dir.join(ACCT_MGR_REPLY_FILE), &text);
            match AmReply::parse(&text) {
                Ok(r) => Ok(r.value),
                Err(e) => Err((-112, format!("AM reply parse error: {e}"))),
            }
        }
        Err((code, e)) => Err((code, format!("AM RPC HTTP failure: {e}"))),
    }
}

/// The manager attaches `state` to project `url` (account files in `dir`), as its project:
/// with its resource exclusions, work requests and suspension.
pub fn attach(
    dir: &Path,
    state: &mut ClientState,
    url: &str,
    authenticator: &str,
    no_rsc: Vec<String>,
    dont_request_more_work: Option<bool>,
    suspend: bool,
) {
    if let Err(e) = config::attach_project(dir, state, url, authenticator) {
        error!("Failed to add project: {url}: {e:#}");
        return;
    }
    let canonical = canonicalize_master_url(url);
    if let Some(ps) = state.project_mut(&canonical) {
        let p = &mut ps.project;
        p.attached_via_acct_mgr = true;
        p.no_rsc_ams = no_rsc;
        if let Some(v) = dont_request_more_work {
            p.dont_request_more_work = v;
        }
        if suspend {
            p.suspended_via_gui = true;
        }
    }
}

/// The manager changes project `url` of `state` (account files in `dir`). Returns the
/// project's master URL and its tasks not yet started, when the manager asks to abort them.
pub fn change(
    dir: &Path,
    state: &mut ClientState,
    url: &str,
    c: ProjectChanges,
) -> Option<(String, Vec<String>)> {
    if let Some(key) = &c.authenticator {
        if let Err(e) = set_account_key(dir, url, key) {
            error!("cannot write the new account key of {url}: {e}");
        }
    }
    let restore = matches!(c.resource_share, ShareChange::Restore).then(|| account_share(dir, url));
    let ps = state.project_mut(url)?;
    let p = &mut ps.project;
    p.attached_via_acct_mgr = true;
    p.dont_request_more_work = c.dont_request_more_work;
    p.detach_when_done = c.detach_when_done;
    if c.update {
        p.sched_rpc_pending = Some(RpcReason::AcctMgrReq);
        p.min_rpc_time = 0.0;
    }
    match c.resource_share {
        ShareChange::Set(s) => {
            p.ams_resource_share_new = Some(s);
            p.resource_share = s;
        }
        ShareChange::Restore => {
            p.ams_resource_share_new = None;
            p.resource_share = restore.flatten().unwrap_or(100.0);
        }
        ShareChange::Keep => {}
    }
    if let Some(s) = c.suspend {
        p.suspended_via_gui = s;
    }
    p.no_rsc_ams = c.no_rsc;
    if !c.abort_not_started {
        return None;
    }
    let master = p.master_url.clone();
    let started: HashSet<&str> = state
        .active_tasks
        .iter()
        .filter(|a| a.project_master_url == master)
        .map(|a| a.result_name.as_str())
        .collect();
    let names: Vec<String> = state
        .project(&master)
        .map(|ps| {
            ps.results
                .iter()
                .filter(|r| {
                    r.state < ResultState::ComputeError && !started.contains(r.name.as_str())
                })
                .map(|r| r.name.clone())
                .collect()
        })
        .unwrap_or_default();
    Some((master, names))
}

/// The manager's global preferences, when newer than `prefs_mod_time` (or the manager is
/// dynamic), become `global_prefs.xml` in `dir` with the manager as their source; a new
/// host venue goes into `state` too. Returns whether the preferences must be read again.
pub fn adopt_prefs(
    dir: &Path,
    state: &mut ClientState,
    prefs_mod_time: f64,
    reply: &AmReply,
    am_url: &str,
) -> bool {
    let mut reload = false;
    if !reply.host_venue.is_empty() && reply.host_venue != state.host_venue {
        state.host_venue = reply.host_venue.clone();
        reload = true;
    }
    if let Some(inner) = &reply.global_preferences {
        let am_mod_time = mod_time(inner);
        if use_am_prefs(reply.dynamic, am_mod_time, prefs_mod_time) {
            let text = format!(
                "<global_preferences>\n<source_project>{am_url}</source_project>\n<source_scheduler>{am_url}</source_scheduler>\n{}\n</global_preferences>\n",
                inner.trim()
            );
            match config::write_atomic(&dir.join(config::GLOBAL_PREFS), &text) {
                Ok(()) => reload = true,
                Err(e) => error!("Can't save global prefs: {e}"),
            }
        }
    }
    reload
}

/// The share in the project's account file (its preferences), if readable.
fn account_share(dir: &Path, url: &str) -> Option<f64> {
    let account = config::read_account(dir, url)?;
    Some(account.prefs("").resource_share.unwrap_or(100.0))
}

/// The project's account key (empty when its account file cannot be read).
pub(crate) fn account_key(dir: &Path, url: &str) -> String {
    config::read_account(dir, url).map_or_else(String::new, |a| a.authenticator)
}

/// Replaces the account key in the project's account file.
fn set_account_key(dir: &Path, url: &str, key: &str) -> io::Result<()> {
    let mut account = config::read_account(dir, url).unwrap_or_else(|| AccountFile {
        master_url: url.to_owned(),
        ..AccountFile::default()
    });
    account.authenticator = key.to_owned();
    config::write_atomic(&dir.join(account_file_name(url)), &account.to_xml())
}

/// `<mod_time>` of a preferences text (0 when absent).
fn mod_time(prefs_inner: &str) -> f64 {
    let Some(i) = prefs_inner.find("<mod_time>") else {
        return 0.0;
    };
    let rest = &prefs_inner[i + "<mod_time>".len()..];
    rest.split('<')
        .next()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The official `valid_master_url`: `http://` or `https://`, a `.` after the scheme (not
/// first), a `/` later (not right after that dot), a final `/`.
pub fn valid_master_url(url: &str) -> bool {
    let rest = if let Some(r) = url.strip_prefix("http://") {
        r
    } else if let Some(r) = url.strip_prefix("https://") {
        r
    } else {
        return false;
    };
    let Some(dot) = rest.find('.') else {
        return false;
    };
    if dot == 0 {
        return false;
    }
    let Some(slash) = rest[dot..].find('/').map(|i| i + dot) else {
        return false;
    };
    slash != dot + 1 && url.ends_with('/')
}

/// A number in [0, 1) for the retry jitter (the clock's sub-second part is random enough
/// to spread hosts apart).
fn jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    f64::from(nanos % 1_000_000) / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_urls_as_the_official_client_accepts_them() {
        assert!(valid_master_url("http://127.0.0.1/x/"));
        assert!(valid_master_url("https://bam.boincstats.com/"));
        assert!(!valid_master_url("http://localhost/"));
        assert!(!valid_master_url("ftp://a.b/"));
        assert!(!valid_master_url("http://a.b"));
        assert!(!valid_master_url("http://.ab/"));
        assert!(!valid_master_url("http://a./"));
    }

    #[test]
    fn info_and_poll_replies_in_the_official_layout() {
        let mut am = AcctMgr::default();
        assert_eq!(
            am.info_xml(),
            "<acct_mgr_info>\n   <acct_mgr_url></acct_mgr_url>\n   <acct_mgr_name></acct_mgr_name>\n</acct_mgr_info>\n"
        );
        am.url_file.url = "http://am.example/".into();
        am.url_file.name = "AM".into();
        am.login.login = "a".into();
        assert!(am
            .info_xml()
            .contains("   <acct_mgr_name>AM</acct_mgr_name>\n   <have_credentials/>\n"));
        am.op_error = (-204, String::new());
        assert_eq!(
            am.poll_xml(),
            "<acct_mgr_rpc_reply>\n    <error_num>-204</error_num>\n</acct_mgr_rpc_reply>\n"
        );
        am.op_error = (0, "closed".into());
        assert!(am.poll_xml().contains("<message>closed</message>"));
    }

    /// A manager in use (an account key), its next periodic sync at `next`.
    fn in_use(next: f64) -> AcctMgr {
        let mut am = AcctMgr::default();
        am.url_file.url = "http://am.example/".into();
        am.login.authenticator = "k".into();
        am.clock.next_rpc_time = next;
        am
    }

    #[test]
    fn syncs_start_on_the_clock_and_when_a_dynamic_managers_host_starves() {
        let mut none = AcctMgr::default();
        assert_eq!(none.tick(100.0, || true), None, "no manager");
        let mut am = in_use(50.0);
        let target = am.current();
        assert_eq!(am.tick(100.0, || true), Some(target.clone()), "due");
        assert!(
            am.clock.next_rpc_time > 100.0,
            "the next periodic sync moves on"
        );
        assert_eq!(am.tick(101.0, || true), None, "not a dynamic manager");
        am.login.dynamic = true;
        assert_eq!(am.tick(101.0, || true), None, "idle from now on");
        assert_eq!(
            am.tick(130.0, || panic!("looked again")),
            None,
            "once a minute"
        );
        assert_eq!(
            am.tick(161.0, || true),
            None,
            "idle for less than 10 minutes"
        );
        assert_eq!(am.tick(702.0, || true), Some(target.clone()), "starved");
        am.sent(target, false);
        assert_eq!(am.tick(1e9, || true), None, "one sync at a time");
    }

    #[test]
    fn a_sync_asked_for_is_sent_leaves_or_is_refused() {
        let mut am = AcctMgr::default();
        assert_eq!(am.begin(Target::default()), Begin::Nothing);
        assert_eq!(am.op_error, (0, String::new()));
        let bad = Target {
            url: "http://localhost/".into(),
            ..Target::default()
        };
        assert_eq!(am.begin(bad), Begin::Nothing);
        assert_eq!(am.op_error.0, ERR_INVALID_URL);
        let good = Target {
            url: " http://am.example ".into(),
            ..Target::default()
        };
        let Begin::Send(sent) = am.begin(good) else {
            panic!("a valid URL is sent");
        };
        assert_eq!(sent.url, canonicalize_master_url("http://am.example"));
        assert_eq!(am.op_error, (ERR_IN_PROGRESS, String::new()));
        let mut am = in_use(0.0);
        assert_eq!(am.begin(Target::default()), Begin::Leave);
    }

    #[test]
    fn gui_requests_name_a_manager_or_are_refused() {
        let none = AcctMgr::default();
        let bad_arg = Err(reply::error("bad arg"));
        assert_eq!(none.gui_target(None, None, None, true), bad_arg);
        assert_eq!(
            none.gui_target(Some("u".into()), None, None, false),
            bad_arg
        );
        let am = in_use(0.0);
        assert_eq!(am.gui_target(None, None, None, true), Ok(am.current()));
        assert_eq!(
            am.gui_target(
                Some("http://other.example/".into()),
                Some("n".into()),
                Some("p".into()),
                false
            ),
            Err(reply::error("attached to a different AM - detach first"))
        );
        let leave = am
            .gui_target(
                Some(String::new()),
                Some(String::new()),
                Some(String::new()),
                false,
            )
            .expect("leaving is always allowed");
        assert!(leave.url.is_empty());
    }

    #[test]
    fn mod_time_of_prefs() {
        assert_eq!(mod_time("\n<mod_time>12.5</mod_time>\n"), 12.5);
        assert_eq!(mod_time("<x/>"), 0.0);
    }
}
