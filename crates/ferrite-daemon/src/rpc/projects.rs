//! GUI RPC operations on projects and their transfers: attaching (by account key, or by
//! email and password through the project's web RPCs), project operations, and the file
//! transfer list and operations. They answer from the state and from the project loop.

use ferrite_gui_rpc::{reply, FileTransferAction, ProjectAction, Request};
use ferrite_proto::account::canonicalize_master_url;
use tracing::{error, info};

use super::not_available;
use crate::{config, Daemon};

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
            } => {
                if !use_config_file && project_url.trim().is_empty() {
                    return reply::error("Missing URL");
                }
                if !use_config_file && authenticator.trim().is_empty() {
                    return reply::error("Missing authenticator");
                }
                if self
                    .state
                    .project(&canonicalize_master_url(&project_url))
                    .is_some()
                {
                    return reply::error("Already attached to project");
                }
                not_available("project_attach")
            }
            Request::ProjectAttachPoll => not_available("project_attach_poll"),
            Request::LookupAccount(_) | Request::LookupAccountPoll => {
                not_available("lookup_account")
            }
            Request::CreateAccount(_) | Request::CreateAccountPoll => {
                not_available("create_account")
            }
            Request::GetProjectConfig { .. } | Request::GetProjectConfigPoll => {
                not_available("get_project_config")
            }
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
            ProjectAction::Reset => return not_available("project_reset"),
            ProjectAction::Update => return not_available("project_update"),
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
}
