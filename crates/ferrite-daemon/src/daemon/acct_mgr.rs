//! Account-manager syncs across the parts: a sync is started over the projects' HTTP client
//! and its reply is carried out on the state, the tasks, the feeds and the preferences.
//! What the manager part decides is in [`crate::acct_mgr`].

use std::fs;

use ferrite_project::acct_mgr::AmAction;
use ferrite_proto::acct_mgr::{AmReply, ACCT_MGR_REQUEST_FILE};
use ferrite_proto::client_state::ResultState;
use tracing::{error, info, warn};

use crate::acct_mgr::{self, AcctMgr, Begin, RequestInputs, Target};
use crate::config;
use crate::event::Event;
use crate::tasks::EXIT_ABORTED_VIA_GUI;
use crate::Daemon;

impl Daemon {
    /// Start-up: the manager in use ([`AcctMgr::start`]) and its feed filter.
    pub(crate) fn init_acct_mgr(&mut self) {
        self.acct_mgr = AcctMgr::start(&self.dir, &mut self.state);
        self.update_feed_filter();
    }

    /// Once a turn of the loop: the sync the manager wants ([`AcctMgr::tick`]). Lacking
    /// work here means computing is allowed and no project has a task left to run.
    pub(crate) fn tick_acct_mgr(&mut self, t: f64) {
        let (host, state) = (&self.host, &self.state);
        let idle = || {
            host.suspended.0.is_none()
                && !state.projects.iter().any(|p| {
                    p.results
                        .iter()
                        .any(|r| r.state < ResultState::ComputeError)
                })
        };
        if let Some(target) = self.acct_mgr.tick(t, idle) {
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
        match self
            .acct_mgr
            .gui_target(url, name, password, use_config_file)
        {
            Ok(target) => {
                self.start_acct_mgr_rpc(target, true, t);
                ferrite_gui_rpc::reply::SUCCESS.to_owned()
            }
            Err(reply) => reply,
        }
    }

    /// Starts a sync with `target` (`ACCT_MGR_OP::do_rpc`); an empty URL leaves the manager.
    fn start_acct_mgr_rpc(&mut self, target: Target, via_gui: bool, t: f64) {
        let target = match self.acct_mgr.begin(target) {
            Begin::Nothing => return,
            Begin::Leave => {
                self.leave_acct_mgr(t);
                return;
            }
            Begin::Send(target) => target,
        };
        let Some(http) = self.shared_http() else {
            self.acct_mgr.no_http(t);
            return;
        };
        let results = self.acct_mgr.tasks_wanted().map(|active_only| {
            let body = self.results_body(active_only).to_text();
            body.trim()
                .trim_start_matches("<results>")
                .trim_end_matches("</results>")
                .trim()
                .to_owned()
        });
        let body = self.acct_mgr_request(&target, results, t).to_xml();
        if let Err(e) = fs::write(self.dir.join(ACCT_MGR_REQUEST_FILE), &body) {
            warn!("cannot write {ACCT_MGR_REQUEST_FILE}: {e}");
        }
        let url = format!("{}rpc.php", target.url);
        info!("Contacting account manager at {}", target.url);
        self.acct_mgr.sent(target, via_gui);
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
    fn acct_mgr_request(
        &self,
        target: &Target,
        results: Option<String>,
        t: f64,
    ) -> ferrite_proto::acct_mgr::AmRequest {
        let inputs = RequestInputs {
            state: &self.state,
            dir: &self.dir,
            gui_rpc_port: self
                .opts
                .gui_rpc_port
                .unwrap_or(ferrite_gui_rpc::server::DEFAULT_PORT),
            working_global_prefs: self.config.prefs.prefs.to_xml(),
            net_info: !self.config.cc.options.suppress_net_info,
            time_stats: self.time_session.request_form(&self.state.time_stats, t),
            results,
        };
        self.acct_mgr.request(target, inputs)
    }

    /// A sync ended: the reply text, or (BOINC error code, text).
    pub(crate) fn acct_mgr_done(&mut self, result: Result<String, (i32, String)>, t: f64) {
        let Some((target, via_gui)) = self.acct_mgr.take_in_flight() else {
            return;
        };
        let reply = match acct_mgr::read_reply(&self.dir, result) {
            Ok(r) => r,
            Err((code, text)) => {
                self.acct_mgr.failed(code, text, t);
                return;
            }
        };
        let plan = self
            .acct_mgr
            .plan(&self.state, &self.dir, &reply, via_gui, t);
        if !plan.succeeded() {
            return;
        }
        for url in &plan.detach_done {
            self.am_detach(url);
        }
        if plan.key_ok {
            self.acct_mgr.adopt(&target, &reply);
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
        self.acct_mgr
            .synced(&reply, &self.state.host_info.host_cpid, &self.dir, t);
        self.update_feed_filter();
        self.projects.poll_soon();
        self.save.mark_dirty(t);
        self.tick_soon = true;
    }

    /// A manager that sent `no_project_notices` has only its own feeds fetched.
    fn update_feed_filter(&mut self) {
        self.feeds.only_from = self.acct_mgr.feed_filter();
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
            } => acct_mgr::attach(
                &self.dir,
                &mut self.state,
                &url,
                &authenticator,
                no_rsc,
                dont_request_more_work,
                suspend,
            ),
            AmAction::Change { url, changes } => {
                let abort = acct_mgr::change(&self.dir, &mut self.state, &url, changes);
                if let Some((master, names)) = abort {
                    for n in names {
                        self.tasks.abort_result(
                            &mut self.state,
                            &master,
                            &n,
                            EXIT_ABORTED_VIA_GUI,
                            t,
                        );
                    }
                }
            }
        }
    }

    /// The manager's preferences and host venue ([`acct_mgr::adopt_prefs`]), read again
    /// when they changed.
    fn apply_am_prefs(&mut self, reply: &AmReply, am_url: &str) {
        let prefs_mod_time = self.config.prefs.prefs.mod_time;
        if acct_mgr::adopt_prefs(&self.dir, &mut self.state, prefs_mod_time, reply, am_url) {
            self.reload();
        }
    }

    /// Leaves the manager ([`AcctMgr::leave`]); its feeds go.
    fn leave_acct_mgr(&mut self, t: f64) {
        let am_url = self.acct_mgr.leave(&self.dir, &mut self.state);
        self.forget_feeds(&am_url);
        self.update_feed_filter();
        self.save.mark_dirty(t);
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    use ferrite_gui_rpc::{reply, Request};
    use ferrite_proto::acct_mgr::{password_hash, ACCT_MGR_LOGIN_FILE, ACCT_MGR_URL_FILE};

    use crate::acct_mgr::{account_key, Target};
    use crate::Daemon;

    fn daemon(dir: &Path) -> Daemon {
        let opts = crate::test_options(dir);
        Daemon::start(opts, crate::logging::init()).expect("daemon")
    }

    /// One sync with the test account manager's reply to the daemon's own request.
    fn sync(d: &mut Daemon, am: &ferrite_testproject::acct_mgr::AccountManager, target: &Target) {
        let t = crate::clock::now();
        let req = d.acct_mgr_request(target, None, t).to_xml();
        let reply = am.rpc(&req);
        d.acct_mgr.sent(target.clone(), true);
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
}
