//! GUI RPC operations on projects and their transfers: attaching (by account key, or by
//! email and password through the project's web RPCs), project operations, and the file
//! transfer list and operations. They answer from the state and from the project loop.

use ferrite_gui_rpc::{reply, FileTransferAction, ProjectAction, Request};
use ferrite_project::attach;
use ferrite_proto::account::canonicalize_master_url;
use ferrite_proto::client_state::RpcReason;
use tracing::{error, info, warn};

use crate::projects::{AttachProgress, WebRpcKind, WebRpcState, ERR_IN_PROGRESS};
use crate::{config, Daemon, Event};

impl Daemon {
    pub(super) fn answer_projects(&mut self, request: Request, t: f64) -> String {
        match request {
            Request::ProjectOp { op, project_url } => self.rpc_project_op(op, &project_url, t),
            Request::FileTransferOp {
                op,
                project_url,
                filename,
            } => self.rpc_file_transfer_op(op, &project_url, &filename),
            Request::GetFileTransfers => "<file_transfers>\n</file_transfers>\n".to_owned(),
            Request::ProjectAttach {
                project_url,
                authenticator,
                use_config_file,
                ..
            } => self.rpc_project_attach(&project_url, &authenticator, use_config_file, t),
            Request::ProjectAttachPoll => self.rpc_project_attach_poll(),
            Request::LookupAccount(a) => {
                if a.url.trim().is_empty() || a.email_addr.is_empty() || a.passwd_hash.is_empty() {
                    return reply::error("missing URL, email address, or password");
                }
                let base = attach::rpc_base(&a.url, None);
                let url = attach::lookup_account_url(&base, &a.email_addr, &a.passwd_hash);
                self.start_web_rpc(WebRpcKind::LookupAccount, url)
            }
            Request::CreateAccount(a) => {
                if a.url.trim().is_empty() || a.email_addr.is_empty() || a.passwd_hash.is_empty() {
                    return reply::error("missing URL, email address, or password");
                }
                let base = attach::rpc_base(&a.url, None);
                let url = attach::create_account_url(
                    &base,
                    &attach::NewAccount {
                        email: a.email_addr.clone(),
                        passwd_hash: a.passwd_hash.clone(),
                        user_name: a.user_name.clone(),
                        team_name: Some(a.team_name.clone()),
                        consent_source: a.consented_to_terms.then(|| "Ferrite".to_owned()),
                    },
                );
                self.start_web_rpc(WebRpcKind::CreateAccount, url)
            }
            Request::GetProjectConfig { url } => {
                if url.trim().is_empty() {
                    return reply::error("no url");
                }
                let url = attach::get_project_config_url(&url);
                self.start_web_rpc(WebRpcKind::ProjectConfig, url)
            }
            Request::NetworkAvailable => {
                // "Retry pending transfers": every backoff ends now.
                for p in &mut self.state.projects {
                    p.project.min_rpc_time = 0.0;
                }
                self.projects.poll_soon();
                self.save.mark_dirty(t);
                reply::SUCCESS.to_owned()
            }
            Request::LookupAccountPoll => self.web_rpc_poll(WebRpcKind::LookupAccount),
            Request::CreateAccountPoll => self.web_rpc_poll(WebRpcKind::CreateAccount),
            Request::GetProjectConfigPoll => self.web_rpc_poll(WebRpcKind::ProjectConfig),
            other => reply::error(&format!("unexpected request {other:?}")),
        }
    }

    fn rpc_project_op(&mut self, op: ProjectAction, url: &str, t: f64) -> String {
        if url.trim().is_empty() {
            return reply::error("Missing project URL");
        }
        let Some(ps) = self.state.project_mut(url) else {
            return reply::error("No such project");
        };
        let p = &mut ps.project;
        let name = if p.project_name.is_empty() {
            p.master_url.clone()
        } else {
            p.project_name.clone()
        };
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
                match config::detach_project(&self.dir, &mut self.state, &master) {
                    Ok(_) => info!(project = %name, "detached from project by user"),
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

    fn rpc_file_transfer_op(&self, _op: FileTransferAction, url: &str, file: &str) -> String {
        if url.trim().is_empty() {
            return reply::error("Missing project URL");
        }
        let Some(ps) = self.state.project(url) else {
            return reply::error("No such project");
        };
        if file.is_empty() {
            return reply::error("Missing filename");
        }
        if ps.file(file).is_none() {
            return reply::error("No such file");
        }
        // Ferrite has no transfer queue yet, so nothing waits.
        reply::error("No such transfer waiting")
    }

    fn rpc_project_attach(
        &mut self,
        url: &str,
        key: &str,
        use_config_file: bool,
        t: f64,
    ) -> String {
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
                info!(project = %canonical, "attaching to project");
                self.projects.attach = Some(AttachProgress::InProgress(canonical));
                self.projects.poll_soon();
                self.save.mark_dirty(t);
                reply::SUCCESS.to_owned()
            }
            Err(e) => reply::error(&format!("{e:#}")),
        }
    }

    fn rpc_project_attach_poll(&self) -> String {
        let (error_num, messages): (i32, &[String]) = match &self.projects.attach {
            None => (0, &[]),
            Some(AttachProgress::InProgress(_)) => (ERR_IN_PROGRESS, &[]),
            Some(AttachProgress::Done {
                error_num,
                messages,
                ..
            }) => (*error_num, messages),
        };
        let mut out = String::from("<project_attach_reply>\n");
        for m in messages {
            out.push_str(&format!("    <message>{}</message>\n", xml_escape(m)));
        }
        out.push_str(&format!(
            "    <error_num>{error_num}</error_num>\n</project_attach_reply>\n"
        ));
        out
    }

    /// Starts a web RPC of the attach wizard; its poll answers -204 until it ends.
    fn start_web_rpc(&mut self, kind: WebRpcKind, url: String) -> String {
        let Some(http) = self.projects.http() else {
            return reply::error("HTTP is not available");
        };
        self.projects.web[kind as usize] = WebRpcState::Pending;
        let events = self.events.clone();
        tokio::spawn(async move {
            let result = http.get_text(&url).await.map_err(|e| {
                warn!("web RPC {url}: {e}");
                e.boinc_code()
            });
            let _ = events.send(Event::WebRpc(kind, result)).await;
        });
        reply::SUCCESS.to_owned()
    }

    fn web_rpc_poll(&self, kind: WebRpcKind) -> String {
        let wrap = |n: i32| match kind {
            WebRpcKind::ProjectConfig => {
                format!("<project_config>\n<error_num>{n}</error_num>\n</project_config>\n")
            }
            _ => format!("<account_out>\n<error_num>{n}</error_num>\n</account_out>\n"),
        };
        match &self.projects.web[kind as usize] {
            WebRpcState::Idle => wrap(0),
            WebRpcState::Pending => wrap(ERR_IN_PROGRESS),
            WebRpcState::Failed(n) => wrap(*n),
            WebRpcState::Done(text) => {
                let start = match kind {
                    WebRpcKind::ProjectConfig => text.find("<project_config"),
                    _ => text.find("<account_out").or_else(|| text.find("<error")),
                };
                match start {
                    Some(i) => text[i..].to_owned(),
                    None => wrap(-112),
                }
            }
        }
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

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
