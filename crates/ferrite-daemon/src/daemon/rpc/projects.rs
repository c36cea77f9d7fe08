//! GUI RPC operations on projects and their transfers: attaching (by account key, or by
//! email and password through the project's web RPCs), project operations, and the file
//! transfer list and operations. They answer from the state and from the project loop.

use ferrite_gui_rpc::{reply, AccountIn, FileTransferAction, ProjectAction};
use ferrite_project::attach;
use ferrite_proto::account::canonicalize_master_url;
use ferrite_proto::client_state::RpcReason;
use tracing::{error, info, warn};

use crate::event::Event;
use crate::projects::{WebRpcKind, WebRpcState};
use crate::rpc::named_project;
use crate::{config, Daemon};

impl Daemon {
    /// `network_available` ("retry pending transfers"): every project and transfer backoff
    /// ends now.
    pub(crate) fn rpc_network_available(&mut self, t: f64) -> String {
        for p in &mut self.state.projects {
            p.project.min_rpc_time = 0.0;
        }
        self.transfers.retry_all(&mut self.state, t);
        self.projects.poll_soon();
        self.save.mark_dirty(t);
        reply::SUCCESS.to_owned()
    }

    /// `lookup_account`, `create_account`: the attach wizard's web RPC to the project.
    pub(crate) fn rpc_account(&mut self, kind: WebRpcKind, a: &AccountIn) -> String {
        if a.url.trim().is_empty() || a.email_addr.is_empty() || a.passwd_hash.is_empty() {
            return reply::error("missing URL, email address, or password");
        }
        let base = attach::rpc_base(&a.url, None);
        let url = if kind == WebRpcKind::CreateAccount {
            attach::create_account_url(
                &base,
                &attach::NewAccount {
                    email: a.email_addr.clone(),
                    passwd_hash: a.passwd_hash.clone(),
                    user_name: a.user_name.clone(),
                    team_name: Some(a.team_name.clone()),
                    consent_source: a.consented_to_terms.then(|| "Ferrite".to_owned()),
                },
            )
        } else {
            attach::lookup_account_url(&base, &a.email_addr, &a.passwd_hash)
        };
        self.start_web_rpc(kind, url)
    }

    /// `get_project_config`: the project's configuration, fetched for the attach wizard.
    pub(crate) fn rpc_get_project_config(&mut self, url: &str) -> String {
        if url.trim().is_empty() {
            return reply::error("no url");
        }
        let url = attach::get_project_config_url(url);
        self.start_web_rpc(WebRpcKind::ProjectConfig, url)
    }

    pub(crate) fn rpc_project_op(&mut self, op: ProjectAction, url: &str, t: f64) -> String {
        let p = match named_project(&mut self.state, url) {
            Ok(ps) => &mut ps.project,
            Err(e) => return e,
        };
        let name = p.name_or_url().to_owned();
        match op {
            ProjectAction::Suspend => {
                p.suspended_via_gui = true;
                info!(project = %name, "project suspended by user");
            }
            ProjectAction::Resume => {
                p.suspended_via_gui = false;
                info!(project = %name, "project resumed by user");
            }
            ProjectAction::NoMoreWork => {
                p.dont_request_more_work = true;
                info!(project = %name, "work fetch suspended by user");
            }
            ProjectAction::AllowMoreWork => {
                p.dont_request_more_work = false;
                info!(project = %name, "work fetch resumed by user");
            }
            ProjectAction::DetachWhenDone => {
                p.detach_when_done = true;
                p.dont_request_more_work = true;
                info!(project = %name, "project will be detached when its tasks are done");
            }
            ProjectAction::DontDetachWhenDone => {
                p.detach_when_done = false;
                p.dont_request_more_work = false;
                info!(project = %name, "project will no longer be detached when done");
            }
            ProjectAction::Detach => {
                if p.attached_via_acct_mgr {
                    return reply::error("must detach using account manager");
                }
                let master = p.master_url.clone();
                // As the official client: the project's apps end before it goes.
                self.tasks.end_project(&master);
                match config::detach_project(&self.dir, &mut self.state, &master) {
                    Ok(_) => {
                        self.forget_feeds(&master);
                        info!(project = %name, "detached from project by user");
                    }
                    Err(e) => {
                        error!("detaching from {master}: {e}");
                        return reply::error(&format!("detach failed: {e}"));
                    }
                }
            }
            ProjectAction::Reset => {
                let master = p.master_url.clone();
                info!(project = %name, "resetting project");
                self.reset_project(&master, t);
            }
            ProjectAction::Update => {
                let master = p.master_url.clone();
                info!(project = %name, "update requested by user");
                self.request_update(&master);
            }
        }
        self.save.mark_dirty(t);
        reply::SUCCESS.to_owned()
    }

    pub(crate) fn rpc_file_transfer_op(
        &mut self,
        op: FileTransferAction,
        url: &str,
        file: &str,
        t: f64,
    ) -> String {
        let ps = match named_project(&mut self.state, url) {
            Ok(ps) => ps,
            Err(e) => return e,
        };
        if file.is_empty() {
            return reply::error("Missing filename");
        }
        if ps.file(file).is_none() {
            return reply::error("No such file");
        }
        let master = ps.project.master_url.clone();
        let done = match op {
            FileTransferAction::Retry => self.transfers.retry_now(&mut self.state, &master, file),
            FileTransferAction::Abort => self.transfers.abort(&mut self.state, &master, file, t),
        };
        if !done {
            return reply::error("No such transfer waiting");
        }
        info!(project = %master, "{op:?} of the transfer of {file} requested by user");
        self.projects.poll_soon();
        self.save.mark_dirty(t);
        reply::SUCCESS.to_owned()
    }

    /// `project_attach`: the name the caller gives (the Manager's, from the project's
    /// configuration) is the project's name until a scheduler reply gives one, as in the
    /// official client.
    pub(crate) fn rpc_project_attach(
        &mut self,
        url: &str,
        key: &str,
        name: &str,
        use_config_file: bool,
        t: f64,
    ) -> String {
        if self.config.cc.options.disallow_attach {
            return reply::error("Attaching projects is disabled by cc_config (disallow_attach)");
        }
        if use_config_file {
            return reply::error("no project_init.xml: attach with a URL and an account key");
        }
        if url.trim().is_empty() {
            return reply::error("Missing URL");
        }
        if key.trim().is_empty() {
            return reply::error("Missing authenticator");
        }
        let canonical = canonicalize_master_url(url.trim());
        if self.state.project(&canonical).is_some() {
            return reply::error("Already attached to project");
        }
        match config::attach_project(&self.dir, &mut self.state, url, key) {
            Ok(()) => {
                let platform = self.state.platform_name.clone();
                if let Some(ps) = self.state.project_mut(&canonical) {
                    ps.project.project_name = name.trim().to_owned();
                    crate::anonymous::load(&self.dir, ps, &platform);
                }
                // Its place among the others is by the name just given.
                self.state.sort_projects_by_name();
                info!(project = %canonical, "attaching to project");
                self.projects.attach_pending = Some(canonical);
                self.projects.poll_soon();
                self.refresh_usage_soon();
                self.save.mark_dirty(t);
                reply::SUCCESS.to_owned()
            }
            Err(e) => reply::error(&format!("{e:#}")),
        }
    }

    /// `project_attach_poll`: as in the official client, the result of the last
    /// `project_attach` itself, known when it answered (the project is attached then; its
    /// master page and first scheduler RPC follow in the background and are not waited for).
    /// A refused attach answers an `<error>` at once, so what is polled is always 0.
    pub(super) fn rpc_project_attach_poll(&self) -> String {
        "<project_attach_reply>\n    <error_num>0</error_num>\n</project_attach_reply>\n".to_owned()
    }

    /// Starts a web RPC of the attach wizard; its poll answers -204 until it ends.
    fn start_web_rpc(&mut self, kind: WebRpcKind, url: String) -> String {
        let Some(http) = self.shared_http() else {
            return reply::error("HTTP is not available");
        };
        self.projects.web[kind as usize] = WebRpcState::Pending;
        let events = self.events.clone();
        self.http_tasks.spawn(async move {
            let result = http.get_text(&url).await.map_err(|e| {
                // The URL carries the account's password hash: only its redacted form is
                // logged.
                let shown = crate::messages::redact(&format!("web RPC {url}: {e}"));
                warn!("{shown}");
                e.boinc_code()
            });
            let _ = events.send(Event::WebRpc(kind, result)).await;
        });
        reply::SUCCESS.to_owned()
    }

    pub(super) fn web_rpc_poll(&self, kind: WebRpcKind) -> String {
        crate::rpc::web_rpc::poll_reply(kind, &self.projects.web[kind as usize])
    }

    /// `ferrite_explain`: the scheduling core's last decisions with their reasons: for each
    /// task whether it runs, is preempted, waits or is done, and why; for each project and
    /// resource whether work is asked for, and why not.
    pub(super) fn explain_xml(&self, now: f64) -> String {
        use ferrite_sched::JobState;
        use std::fmt::Write as _;
        let mut out = String::from("<ferrite_explain>\n");
        // A client-wide suspension overrides every task's decision: say it first.
        let thermal = self.host.thermal.status();
        for (what, reason) in [
            ("computing", self.host.suspended.0),
            ("gpu", self.host.suspended.1),
        ] {
            // GPU tasks held for temperature: the <thermal> record says so and why.
            if what == "gpu"
                && thermal.gpu_hot
                && reason == Some(ferrite_sched::suspend::SuspendReason::CpuThrottle)
            {
                continue;
            }
            if let Some(r) = reason {
                let _ = writeln!(
                    out,
                    "<suspended>\n    <what>{what}</what>\n    <code>{}</code>\n    <reason>{}</reason>\n</suspended>",
                    r.code(),
                    r.describe()
                );
            }
        }
        if let Some(x) = thermal.explain_xml() {
            out.push_str(&x);
        }
        // cc_config `ferrite_checkpoint_grace`: how long a running task may go on to its next
        // checkpoint when computing is suspended for a reason that can wait (0: off).
        let _ = writeln!(
            out,
            "<checkpoint_grace>{:.0}</checkpoint_grace>",
            self.tasks.checkpoint_grace.max(0.0)
        );
        // Whether apps are confined (Landlock): the kernel's say, then each running app's.
        let _ = writeln!(
            out,
            "<confine_support>{}</confine_support>",
            ferrite_proto::xml::escape(&self.tasks.confine.support.describe())
        );
        let mut confined: Vec<_> = self.tasks.live.iter().collect();
        confined.sort_by(|a, b| a.0.cmp(b.0));
        for ((url, name), live) in confined {
            let _ = write!(
                out,
                "<confinement>\n    <project>{}</project>\n    <result>{}</result>\n    <reason>{}</reason>\n</confinement>\n",
                ferrite_proto::xml::escape(url),
                ferrite_proto::xml::escape(name),
                ferrite_proto::xml::escape(live.confinement.describe())
            );
        }
        let Some((pass, world)) = self.tasks.last_pass() else {
            out.push_str("<pending/>\n</ferrite_explain>\n");
            return out;
        };
        let ids = self.tasks.ids();
        let url_of = |p: usize| ids.projects.get(p).cloned().unwrap_or_default();
        for job in &world.jobs {
            let Some(key) = ids.job(job.id) else {
                continue;
            };
            let (url, name) = key;
            let (decision, reason) = if self.tasks.suspending_at_checkpoint(key) {
                (
                    "run",
                    format!(
                        "suspending at checkpoint: {} is suspended; it runs on to its next \
                         checkpoint, then it is suspended",
                        if self.host.suspended.0.is_some() {
                            "computing"
                        } else {
                            "GPU computing"
                        }
                    ),
                )
            } else if let Some(e) = pass.run.run.iter().find(|e| e.job == job.id) {
                ("run", e.reason.describe())
            } else if let Some(e) = pass.run.preempt.iter().find(|e| e.job == job.id) {
                ("preempt", e.reason.describe(e.action))
            } else if let Some((_, why)) = pass.run.skipped.iter().find(|(j, _)| *j == job.id) {
                ("wait", why.describe())
            } else if pass.abort.contains(&job.id) {
                ("abort", "cannot meet its deadline".to_owned())
            } else {
                match job.state {
                    JobState::Finished {
                        ready_to_report, ..
                    } => (
                        "done",
                        match pass.held_reports.iter().find(|h| h.jobs.contains(&job.id)) {
                            Some(h) if ready_to_report => {
                                format!("ready to report; {}", h.describe(now))
                            }
                            _ if ready_to_report => "ready to report".to_owned(),
                            _ => "uploading".to_owned(),
                        },
                    ),
                    _ if job.suspended => ("wait", "suspended by the user".to_owned()),
                    _ if !job.runnable => (
                        "wait",
                        "not runnable yet (files downloading or retry delay)".to_owned(),
                    ),
                    _ => ("wait", "lower priority than the tasks running".to_owned()),
                }
            };
            let _ = write!(
                out,
                "<task>\n    <project>{}</project>\n    <name>{}</name>\n    <decision>{decision}</decision>\n    <reason>{}</reason>\n</task>\n",
                ferrite_proto::xml::escape(url),
                ferrite_proto::xml::escape(name),
                ferrite_proto::xml::escape(&reason)
            );
        }
        let resource = |r: ferrite_sched::ResourceId| crate::projects::resource_name(world, r);
        if let Some(req) = &pass.fetch.request {
            for rr in &req.resources {
                let _ = write!(
                    out,
                    "<fetch>\n    <project>{}</project>\n    <resource>{}</resource>\n    <verdict>request</verdict>\n    <reason>{}: {:.0} s, {:.2} idle instances</reason>\n</fetch>\n",
                    ferrite_proto::xml::escape(&url_of(req.project.index())),
                    resource(rr.resource),
                    req.reason.describe(),
                    rr.req_secs,
                    rr.req_instances
                );
            }
        }
        for b in &pass.fetch.blocks {
            let _ = write!(
                out,
                "<fetch>\n    <project>{}</project>\n    <resource>{}</resource>\n    <verdict>blocked</verdict>\n    <reason>{}</reason>\n</fetch>\n",
                ferrite_proto::xml::escape(&b.project.map(|p| url_of(p.index())).unwrap_or_default()),
                b.resource.map(resource).unwrap_or_default(),
                ferrite_proto::xml::escape(&b.rule.describe(now))
            );
        }
        let _ = write!(
            out,
            "<idle_cpus>{:.2}</idle_cpus>\n</ferrite_explain>\n",
            pass.run.idle_cpus
        );
        out
    }

    /// A user "Update": an RPC right away, work-fetch backoffs cleared.
    pub(crate) fn request_update(&mut self, url: &str) {
        if let Some(ps) = self.state.project_mut(url) {
            ps.project.sched_rpc_pending = Some(RpcReason::UserReq);
            ps.project.min_rpc_time = 0.0;
        }
        self.projects.poll_soon();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ferrite_gui_rpc::Request;

    pub(crate) fn daemon() -> (tempfile::TempDir, Daemon) {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = crate::cli::Options {
            attach_project: Some(vec!["http://p.example/".to_owned(), "key".to_owned()]),
            ..crate::test_options(dir.path())
        };
        let d = Daemon::start(opts, crate::logging::init()).expect("daemon");
        (dir, d)
    }

    #[test]
    fn attach_poll_answers_the_attach_at_once_as_the_official_client() {
        let (_dir, mut d) = daemon();
        let attach = Request::ProjectAttach {
            project_url: "http://q.example/".into(),
            authenticator: "k".into(),
            project_name: String::new(),
            email_addr: String::new(),
            use_config_file: false,
        };
        assert_eq!(d.gui_rpc_reply(attach.clone()), reply::SUCCESS);
        // Before the master page or any scheduler RPC: done, with no messages.
        let poll = d.gui_rpc_reply(Request::ProjectAttachPoll);
        assert_eq!(
            poll,
            "<project_attach_reply>\n    <error_num>0</error_num>\n</project_attach_reply>\n"
        );
        let again = d.gui_rpc_reply(attach);
        assert!(again.contains("Already attached"), "{again}");
        // The first contact fails: the project stays attached and the poll does not change
        // (the official client's poll only tells the attach request's own result).
        d.attach_failed("http://q.example/", -210, "master page fetch failed".into());
        assert!(
            d.state.project("http://q.example/").is_some(),
            "the project stays attached, to be tried again"
        );
        assert_eq!(d.projects.attach_pending, None);
        assert_eq!(d.gui_rpc_reply(Request::ProjectAttachPoll), poll);
    }

    #[test]
    fn projects_are_listed_by_name_ignoring_case_not_in_attach_order() {
        let (_dir, mut d) = daemon();
        let before = d.state.projects.len();
        for (url, name) in [
            ("http://z.example/", "zebra@home"),
            ("http://a.example/", "Aardvark"),
            ("http://m.example/", "mole"),
        ] {
            let r = d.gui_rpc_reply(Request::ProjectAttach {
                project_url: url.into(),
                authenticator: "k".into(),
                project_name: name.into(),
                email_addr: String::new(),
                use_config_file: false,
            });
            assert_eq!(r, reply::SUCCESS);
        }
        assert_eq!(d.state.projects.len(), before + 3);
        let names: Vec<String> = d
            .state
            .projects
            .iter()
            .map(|p| p.project.project_name.to_lowercase())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        for request in [Request::GetProjectStatus, Request::GetSimpleGuiInfo] {
            let x = d.gui_rpc_reply(request);
            let a = x
                .find("<project_name>Aardvark</project_name>")
                .expect("listed");
            let m = x.find("<project_name>mole</project_name>").expect("listed");
            let z = x
                .find("<project_name>zebra@home</project_name>")
                .expect("listed");
            assert!(a < m && m < z, "{x}");
        }
    }

    #[test]
    fn disallow_attach_refuses_attaching() {
        let (_dir, mut d) = daemon();
        d.config.cc.options.disallow_attach = true;
        let r = d.gui_rpc_reply(Request::ProjectAttach {
            project_url: "http://q.example/".into(),
            authenticator: "k".into(),
            project_name: String::new(),
            email_addr: String::new(),
            use_config_file: false,
        });
        assert!(r.contains("disallow_attach"), "{r}");
        assert!(d.state.project("http://q.example/").is_none());
    }

    #[test]
    fn attach_takes_the_callers_project_name() {
        let (_dir, mut d) = daemon();
        let r = d.gui_rpc_reply(Request::ProjectAttach {
            project_url: "http://q.example/".into(),
            authenticator: "k".into(),
            project_name: " Test@Kit ".into(),
            email_addr: String::new(),
            use_config_file: false,
        });
        assert_eq!(r, reply::SUCCESS);
        let p = d.state.project("http://q.example/").expect("attached");
        assert_eq!(p.project.project_name, "Test@Kit");
    }
}
