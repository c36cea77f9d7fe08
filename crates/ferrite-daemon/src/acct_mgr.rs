//! Account managers (BAM!, Science United, boinchub): the manager in use (read from and
//! written to `acct_mgr_url.xml` and `acct_mgr_login.xml` as the official client does), the
//! periodic and GUI-requested syncs (request posted to `<manager URL>rpc.php`, reply carried
//! out through `ferrite_project::acct_mgr::plan_sync`), and the GUI RPC calls
//! `acct_mgr_rpc`, `acct_mgr_rpc_poll` and `acct_mgr_info`.

use std::fs;
use std::io;
use std::path::Path;

use ferrite_gui_rpc::reply;
use ferrite_project::acct_mgr::{
    plan_sync, use_am_prefs, AmAction, NoteLevel, ProjectChanges, ProjectView, ShareChange,
    SyncClock, SyncPlan,
};
use ferrite_project::verify::BoincCrypt;
use ferrite_proto::account::{account_file_name, canonicalize_master_url, AccountFile};
use ferrite_proto::acct_mgr::{
    password_hash, AcctMgrLoginFile, AcctMgrUrlFile, AmCredentials, AmProject, AmReply, AmRequest,
    ACCT_MGR_LOGIN_FILE, ACCT_MGR_REPLY_FILE, ACCT_MGR_REQUEST_FILE, ACCT_MGR_URL_FILE,
};
use ferrite_proto::client_state::{ActiveTask, ProjectLookup, ResultState, RpcReason, RunMode};
use tracing::{error, info, warn};

use crate::config;
use crate::event::Event;
use crate::messages::NOTICE_TARGET;
use crate::projects::ERR_IN_PROGRESS;
use crate::tasks::EXIT_ABORTED_VIA_GUI;
use crate::Daemon;

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

impl Daemon {
    /// Start-up: without `acct_mgr_url.xml` no project counts as the manager's (so the user
    /// can detach them), as officially.
    pub(crate) fn init_acct_mgr(&mut self) {
        self.acct_mgr = AcctMgr::load(&self.dir);
        if self.acct_mgr.url_file.url.is_empty() {
            for ps in &mut self.state.projects {
                ps.project.attached_via_acct_mgr = false;
            }
        }
        self.update_feed_filter();
        if self.acct_mgr.using_am() {
            info!("Using account manager {}", self.acct_mgr.url_file.name);
            if !self.acct_mgr.login.user_name.is_empty() {
                info!("Account manager login: {}", self.acct_mgr.login.user_name);
            }
        }
    }

    /// Once a turn of the loop: a periodic sync when one is due; for a dynamic manager, once
    /// a minute, a sync asking for other projects when the computer has lacked work for 10
    /// minutes (then backing off, doubling up to a day). Lacking work here means computing
    /// is allowed and no project has a task left to run.
    pub(crate) fn tick_acct_mgr(&mut self, t: f64) {
        if !self.acct_mgr.using_am() || self.acct_mgr.busy() {
            return;
        }
        if self.acct_mgr.clock.due(t) {
            self.acct_mgr.clock.started(t);
            let target = self.acct_mgr.current();
            self.start_acct_mgr_rpc(target, false, t);
            return;
        }
        if !self.acct_mgr.login.dynamic || t < self.acct_mgr.next_starve_check {
            return;
        }
        self.acct_mgr.next_starve_check = t + 60.0;
        let idle = self.host.suspended.0.is_none()
            && !self.state.projects.iter().any(|p| {
                p.results
                    .iter()
                    .any(|r| r.state < ResultState::ComputeError)
            });
        if self.acct_mgr.clock.starved(t, idle) {
            info!(
                "Some devices idle - requesting new projects from {}",
                self.acct_mgr.url_file.name
            );
            let target = self.acct_mgr.current();
            self.start_acct_mgr_rpc(target, false, t);
        }
    }

    /// `acct_mgr_rpc`: join, sync with or leave (empty URL) an account manager, with the
    /// caller's login, or the current one (`use_config_file`).
    pub(crate) fn rpc_acct_mgr_sync(
        &mut self,
        url: Option<String>,
        name: Option<String>,
        password: Option<String>,
        use_config_file: bool,
        t: f64,
    ) -> String {
        let target = if use_config_file {
            if !self.acct_mgr.using_am() {
                error!("Not using account manager");
                return reply::error("bad arg");
            }
            self.acct_mgr.current()
        } else {
            let (Some(url), Some(name), Some(password)) = (url, name, password) else {
                return reply::error("bad arg");
            };
            Target {
                url,
                password_hash: password_hash(&name, &password),
                login: name,
                authenticator: String::new(),
            }
        };
        if self.acct_mgr.using_am() && !target.url.is_empty() && !self.acct_mgr.same_am(&target) {
            return reply::error("attached to a different AM - detach first");
        }
        self.start_acct_mgr_rpc(target, true, t);
        reply::SUCCESS.to_owned()
    }

    /// Starts a sync with `target` (`ACCT_MGR_OP::do_rpc`); an empty URL leaves the manager.
    fn start_acct_mgr_rpc(&mut self, mut target: Target, via_gui: bool, t: f64) {
        self.acct_mgr.op_error = (ERR_IN_PROGRESS, String::new());
        if target.url.trim().is_empty() {
            if !self.acct_mgr.url_file.url.is_empty() {
                self.leave_acct_mgr(t);
            }
            self.acct_mgr.op_error = (0, String::new());
            return;
        }
        target.url = canonicalize_master_url(target.url.trim());
        if !valid_master_url(&target.url) {
            self.acct_mgr.op_error = (ERR_INVALID_URL, String::new());
            return;
        }
        let Some(http) = self.projects.http() else {
            self.acct_mgr.op_error = (-113, "HTTP is not available".to_owned());
            self.acct_mgr.clock.failed(t, jitter());
            return;
        };
        let am = &self.acct_mgr;
        let results = if am.send_tasks_active || am.send_tasks_all {
            let active_only = !am.send_tasks_all;
            let body = self.results_body(active_only).to_text();
            Some(
                body.trim()
                    .trim_start_matches("<results>")
                    .trim_end_matches("</results>")
                    .trim()
                    .to_owned(),
            )
        } else {
            None
        };
        let body = self.acct_mgr_request(&target, results, t).to_xml();
        if let Err(e) = fs::write(self.dir.join(ACCT_MGR_REQUEST_FILE), &body) {
            warn!("cannot write {ACCT_MGR_REQUEST_FILE}: {e}");
        }
        let url = format!("{}rpc.php", target.url);
        info!("Contacting account manager at {}", target.url);
        self.acct_mgr.in_flight = Some((target, via_gui));
        self.acct_mgr.syncs += 1;
        let events = self.events.clone();
        self.http_tasks.spawn(async move {
            let result = http.post_scheduler(&url, body).await.map_err(|e| {
                let code = e.boinc_code();
                (code, e.to_string())
            });
            let _ = events.send(Event::AcctMgr(result)).await;
        });
    }

    /// The request body for a sync.
    fn acct_mgr_request(&self, target: &Target, results: Option<String>, t: f64) -> AmRequest {
        let s = &self.state;
        let v = s.core_client_version;
        let am = &self.acct_mgr;
        let gui_rpc = am.url_file.send_gui_rpc_info.then(|| {
            let port = self
                .opts
                .gui_rpc_port
                .unwrap_or(ferrite_gui_rpc::server::DEFAULT_PORT);
            let pw = fs::read_to_string(self.dir.join(GUI_RPC_PASSWD_FILE))
                .ok()
                .map(|t| t.lines().next().unwrap_or("").trim().to_owned());
            (port, pw)
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
                    dynamic: am
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
                        .then(|| account_key(&self.dir, &p.master_url)),
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
            previous_host_cpid: am.login.previous_host_cpid.clone(),
            gui_rpc,
            projects,
            working_global_prefs: self.config.prefs.prefs.to_xml(),
            global_prefs_file: fs::read_to_string(self.dir.join(config::GLOBAL_PREFS)).ok(),
            host_info: s.host_info.clone(),
            net_info: !self.config.cc.options.suppress_net_info,
            opaque: am.login.opaque.clone(),
            time_stats: self.time_session.request_form(&s.time_stats, t),
            net_stats: s.net_stats.clone(),
            results,
        }
    }

    /// A sync ended: the reply text, or (BOINC error code, text).
    pub(crate) fn acct_mgr_done(&mut self, result: Result<String, (i32, String)>, t: f64) {
        let Some((target, via_gui)) = self.acct_mgr.in_flight.take() else {
            return;
        };
        let reply = match result {
            Ok(text) => {
                let _ = fs::write(self.dir.join(ACCT_MGR_REPLY_FILE), &text);
                match AmReply::parse(&text) {
                    Ok(r) => Ok(r.value),
                    Err(e) => Err((-112, format!("AM reply parse error: {e}"))),
                }
            }
            Err((code, e)) => Err((code, format!("AM RPC HTTP failure: {e}"))),
        };
        let reply = match reply {
            Ok(r) => r,
            Err((code, text)) => {
                info!("[{}] {text}", self.acct_mgr.url_file.name);
                self.acct_mgr.op_error = (code, text);
                self.acct_mgr.clock.failed(t, jitter());
                return;
            }
        };
        let views: Vec<ProjectView> = self
            .state
            .projects
            .iter()
            .map(|ps| ProjectView {
                url: ps.project.master_url.clone(),
                authenticator: account_key(&self.dir, &ps.project.master_url),
                attached_via_acct_mgr: ps.project.attached_via_acct_mgr,
                detach_when_done: ps.project.detach_when_done,
                ntasks: ps.results.len(),
                has_am_share: ps.project.ams_resource_share_new.is_some(),
            })
            .collect();
        let plan = plan_sync(
            &views,
            &reply,
            &self.acct_mgr.url_file.signing_key,
            via_gui,
            &BoincCrypt,
        );
        self.acct_mgr.password_error = plan.password_error;
        self.acct_mgr.op_error = (reply.error_num, reply.error.clone());
        self.log_plan_notes(&plan);
        if !plan.succeeded() {
            self.acct_mgr.clock.failed(t, jitter());
            return;
        }
        for url in &plan.detach_done {
            self.am_detach(url);
        }
        if plan.key_ok {
            let am = &mut self.acct_mgr;
            if !reply.name.is_empty() {
                am.url_file.name = reply.name.clone();
            }
            am.url_file.signing_key = reply.signing_key.clone();
            if !reply.opaque.is_empty() {
                am.login.opaque = reply.opaque.clone();
            }
            am.url_file.url = target.url.clone();
            am.login.login = target.login.clone();
            am.login.password_hash = target.password_hash.clone();
            am.login.authenticator = target.authenticator.clone();
            if !reply.authenticator.is_empty() {
                // The manager's account key replaces the name and password.
                am.login.authenticator = reply.authenticator.clone();
            }
            am.login.no_project_notices = reply.no_project_notices;
            am.login.dynamic = reply.dynamic;
            am.send_tasks_active = reply.send_tasks_active;
            am.send_tasks_all = reply.send_tasks_all;
            for action in plan.actions {
                self.apply_am_action(action, t);
            }
            self.apply_am_prefs(&reply, &target.url);
            if let Some(feeds) = reply.rss_feeds.clone() {
                let name = self.acct_mgr.url_file.name.clone();
                let text = ferrite_proto::notices::rss_feeds_xml(&feeds);
                self.project_feeds(&target.url, &name, &text);
            }
        }
        let am = &mut self.acct_mgr;
        am.login.user_name = reply.user_name.clone();
        am.login.team_name = reply.team_name.clone();
        am.login.previous_host_cpid = self.state.host_info.host_cpid.clone();
        am.clock.succeeded(t, reply.repeat_sec);
        am.login.user_keywords = reply.user_keywords.clone();
        am.write_files(&self.dir);
        self.update_feed_filter();
        self.projects.poll_soon();
        self.save.mark_dirty(t);
        self.tick_soon = true;
    }

    /// A manager that sent `no_project_notices` has only its own feeds fetched (as the
    /// official client's feed list).
    fn update_feed_filter(&mut self) {
        let am = &self.acct_mgr;
        self.feeds.only_from =
            (am.using_am() && am.login.no_project_notices).then(|| am.url_file.url.clone());
    }

    fn log_plan_notes(&self, plan: &SyncPlan) {
        let am = self.acct_mgr.url_file.name.as_str();
        for n in &plan.notes {
            let project = n.project.as_deref().unwrap_or(am);
            match n.level {
                NoteLevel::Info => info!(project = %project, "{}", n.text),
                NoteLevel::Alert => warn!(target: NOTICE_TARGET, project = %project, "{}", n.text),
                NoteLevel::Error => error!(project = %project, "{}", n.text),
            }
        }
    }

    fn am_detach(&mut self, url: &str) {
        if let Some(p) = self.state.project(url) {
            let master = p.project.master_url.clone();
            self.tasks.end_project(&master);
        }
        match config::detach_project(&self.dir, &mut self.state, url) {
            Ok(_) => {
                self.forget_feeds(url);
                info!(project = %url, "detached from project by account manager");
            }
            Err(e) => error!("detaching from {url}: {e}"),
        }
    }

    fn apply_am_action(&mut self, action: AmAction, t: f64) {
        match action {
            AmAction::Detach { url } => self.am_detach(&url),
            AmAction::Attach {
                url,
                authenticator,
                no_rsc,
                dont_request_more_work,
                suspend,
            } => {
                if let Err(e) =
                    config::attach_project(&self.dir, &mut self.state, &url, &authenticator)
                {
                    error!("Failed to add project: {url}: {e:#}");
                    return;
                }
                let canonical = canonicalize_master_url(&url);
                if let Some(ps) = self.state.project_mut(&canonical) {
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
            AmAction::Change { url, changes } => self.am_change(&url, changes, t),
        }
    }

    fn am_change(&mut self, url: &str, c: ProjectChanges, t: f64) {
        if let Some(key) = &c.authenticator {
            if let Err(e) = set_account_key(&self.dir, url, key) {
                error!("cannot write the new account key of {url}: {e}");
            }
        }
        let restore =
            matches!(c.resource_share, ShareChange::Restore).then(|| account_share(&self.dir, url));
        let Some(ps) = self.state.project_mut(url) else {
            return;
        };
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
        if c.abort_not_started {
            let master = p.master_url.clone();
            let started: Vec<String> = self
                .state
                .active_tasks
                .iter()
                .filter(|a| a.project_master_url == master)
                .map(|a| a.result_name.clone())
                .collect();
            let names: Vec<String> = self
                .state
                .project(&master)
                .map(|ps| {
                    ps.results
                        .iter()
                        .filter(|r| {
                            r.state < ResultState::ComputeError && !started.contains(&r.name)
                        })
                        .map(|r| r.name.clone())
                        .collect()
                })
                .unwrap_or_default();
            for n in names {
                self.tasks
                    .abort_result(&mut self.state, &master, &n, EXIT_ABORTED_VIA_GUI, t);
            }
        }
    }

    /// The manager's global preferences, when newer (or the manager is dynamic), become
    /// `global_prefs.xml` with the manager as their source; a new host venue too.
    fn apply_am_prefs(&mut self, reply: &AmReply, am_url: &str) {
        let mut reload = false;
        if !reply.host_venue.is_empty() && reply.host_venue != self.state.host_venue {
            self.state.host_venue = reply.host_venue.clone();
            reload = true;
        }
        if let Some(inner) = &reply.global_preferences {
            let am_mod_time = mod_time(inner);
            if use_am_prefs(reply.dynamic, am_mod_time, self.config.prefs.prefs.mod_time) {
                let text = format!(
                    "<global_preferences>\n<source_project>{am_url}</source_project>\n<source_scheduler>{am_url}</source_scheduler>\n{}\n</global_preferences>\n",
                    inner.trim()
                );
                match config::write_atomic(&self.dir.join(config::GLOBAL_PREFS), &text) {
                    Ok(()) => reload = true,
                    Err(e) => error!("Can't save global prefs: {e}"),
                }
            }
        }
        if reload {
            self.reload();
        }
    }

    /// Leaves the manager: forget it, delete its files; projects stay attached but are
    /// the user's again (share from the account file, no manager exclusions).
    fn leave_acct_mgr(&mut self, t: f64) {
        info!("Removing account manager info");
        let am_url = self.acct_mgr.url_file.url.clone();
        self.acct_mgr = AcctMgr::default();
        for f in [ACCT_MGR_URL_FILE, ACCT_MGR_LOGIN_FILE] {
            match fs::remove_file(self.dir.join(f)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => warn!("cannot delete {f}: {e}"),
                _ => {}
            }
        }
        let shares: Vec<(String, f64)> = self
            .state
            .projects
            .iter()
            .filter(|ps| ps.project.ams_resource_share_new.is_some())
            .map(|ps| {
                let u = ps.project.master_url.clone();
                let s = account_share(&self.dir, &u).unwrap_or(100.0);
                (u, s)
            })
            .collect();
        for ps in &mut self.state.projects {
            let p = &mut ps.project;
            p.attached_via_acct_mgr = false;
            p.no_rsc_ams.clear();
            if p.ams_resource_share_new.take().is_some() {
                if let Some((_, s)) = shares.iter().find(|(u, _)| *u == p.master_url) {
                    p.resource_share = *s;
                }
            }
        }
        self.forget_feeds(&am_url);
        self.update_feed_filter();
        self.save.mark_dirty(t);
    }
}

/// The share in the project's account file (its preferences), if readable.
fn account_share(dir: &Path, url: &str) -> Option<f64> {
    let account = config::read_account(dir, url)?;
    Some(account.prefs("").resource_share.unwrap_or(100.0))
}

/// The project's account key (empty when its account file cannot be read).
fn account_key(dir: &Path, url: &str) -> String {
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
    use ferrite_gui_rpc::Request;

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

    fn daemon(dir: &Path) -> Daemon {
        let opts = crate::cli::Options {
            dir: Some(dir.to_path_buf()),
            skip_cpu_benchmarks: true,
            no_gpus: true,
            ..crate::cli::Options::default()
        };
        Daemon::start(opts, crate::logging::init()).expect("daemon")
    }

    /// One sync with the test account manager's reply to the daemon's own request.
    fn sync(d: &mut Daemon, am: &ferrite_testproject::acct_mgr::AccountManager, target: &Target) {
        let t = crate::clock::now();
        let req = d.acct_mgr_request(target, None, t).to_xml();
        let reply = am.rpc(&req);
        d.acct_mgr.in_flight = Some((target.clone(), true));
        d.acct_mgr_done(Ok(reply), t);
    }

    #[test]
    fn replies_attach_change_and_detach_projects() {
        use ferrite_testproject::acct_mgr::{AccountManager, AM_NAME, AM_PASSWORD};
        let dir = tempfile::tempdir().expect("tempdir");
        let am_dir = tempfile::tempdir().expect("tempdir");
        let am = AccountManager::new(am_dir.path().to_path_buf());
        let mut d = daemon(dir.path());
        let target = Target {
            url: "http://am.example/".into(),
            login: "h".into(),
            password_hash: password_hash("h", AM_PASSWORD),
            authenticator: String::new(),
        };
        let url = "http://p.example/";
        am.set_policy(
            None,
            &format!(
                "<acct_mgr_reply>\n<repeat_sec>60</repeat_sec>\n<account>\n<url>{url}</url>\n<authenticator>1_k</authenticator>\n<resource_share>30</resource_share>\n<suspend>1</suspend>\n<no_rsc>NVIDIA</no_rsc>\n</account>\n<account>\n<url>http://forged.example/</url>\n<url_signature>\n00ff\n.\n</url_signature>\n<authenticator>x</authenticator>\n</account>\n<user_keywords>\n<yes>5</yes>\n</user_keywords>\n<no_project_notices>1</no_project_notices>\n</acct_mgr_reply>"
            ),
        )
        .expect("policy");
        sync(&mut d, &am, &target);
        assert!(d.acct_mgr.using_am());
        assert_eq!(d.state.projects.len(), 1, "the forged URL is not attached");
        let p = &d.state.projects[0].project;
        assert_eq!(p.master_url, url);
        assert!(p.attached_via_acct_mgr && p.suspended_via_gui);
        assert_eq!(p.no_rsc_ams, ["NVIDIA"]);
        assert_eq!(account_key(dir.path(), url), "1_k");
        // The share arrives on the next sync, as for the official client (an attach sets no
        // share). The repeat counts from this sync (the first reply may take seconds to
        // make on a loaded machine).
        let t0 = crate::clock::now();
        sync(&mut d, &am, &target);
        let p = &d.state.projects[0].project;
        assert_eq!(
            (p.resource_share, p.ams_resource_share_new),
            (30.0, Some(30.0))
        );
        let next = d.acct_mgr.clock.next_rpc_time - t0;
        assert!((59.0..62.0).contains(&next), "repeat_sec: {next}");
        assert_eq!(
            d.acct_mgr.keywords_xml().as_deref(),
            Some("<user_keywords>\n   <yes>5</yes>\n</user_keywords>\n")
        );
        assert!(d.acct_mgr.info_xml().contains(AM_NAME));
        assert_eq!(
            d.feeds.only_from.as_deref(),
            Some("http://am.example/"),
            "no_project_notices: only the manager's feeds"
        );
        let login = fs::read_to_string(dir.path().join(ACCT_MGR_LOGIN_FILE)).expect("login");
        assert!(login.contains("<login>h</login>"), "{login}");

        // The manager stops setting a share: the account's comes back; resume.
        am.set_policy(
            None,
            &format!("<acct_mgr_reply>\n<account>\n<url>{url}</url>\n<suspend>0</suspend>\n</account>\n</acct_mgr_reply>"),
        )
        .expect("policy");
        sync(&mut d, &am, &target);
        let p = &d.state.projects[0].project;
        assert_eq!((p.resource_share, p.ams_resource_share_new), (100.0, None));
        assert!(!p.suspended_via_gui);

        // A different manager is refused while this one is in use.
        let other = Request::AcctMgrRpc {
            url: Some("http://other.example/".into()),
            name: Some("h".into()),
            password: Some("x".into()),
            use_config_file: false,
        };
        assert_eq!(
            d.gui_rpc_reply(other),
            reply::error("attached to a different AM - detach first")
        );

        // Detach through the manager.
        am.set_policy(
            None,
            &format!("<acct_mgr_reply>\n<account>\n<url>{url}</url>\n<detach>1</detach>\n</account>\n</acct_mgr_reply>"),
        )
        .expect("policy");
        sync(&mut d, &am, &target);
        assert!(d.state.projects.is_empty());

        // Leaving: files deleted, nothing in use.
        let leave = Request::AcctMgrRpc {
            url: Some(String::new()),
            name: Some(String::new()),
            password: Some(String::new()),
            use_config_file: false,
        };
        assert_eq!(d.gui_rpc_reply(leave), reply::SUCCESS);
        assert!(!d.acct_mgr.using_am());
        assert_eq!(d.feeds.only_from, None);
        assert!(!dir.path().join(ACCT_MGR_URL_FILE).exists());
        assert!(!dir.path().join(ACCT_MGR_LOGIN_FILE).exists());
        assert_eq!(
            d.gui_rpc_reply(Request::AcctMgrRpcPoll),
            "<acct_mgr_rpc_reply>\n    <error_num>0</error_num>\n</acct_mgr_rpc_reply>\n"
        );
    }

    #[test]
    fn mod_time_of_prefs() {
        assert_eq!(mod_time("\n<mod_time>12.5</mod_time>\n"), 12.5);
        assert_eq!(mod_time("<x/>"), 0.0);
    }
}
