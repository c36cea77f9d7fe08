//! The project loop's glue: the scheduler poll (`poll.rs`), a reply applied (`reply.rs`)
//! and taken in over several turns (`applying.rs`), the clean-up after the servers'
//! acknowledgements (`garbage.rs`), and a project reset. They borrow the
//! state, the task table, the transfers and the project loop (`projects.rs`) at once.

use std::fs;

use ferrite_proto::client_state::RpcReason;

use crate::{config, Daemon};

mod applying;
mod garbage;
mod poll;
mod reply;

impl Daemon {
    /// Resets a project: its apps are ended (no process of theirs is left, their slots are
    /// freed), its tasks forgotten, its files deleted, its apps dropped; the account stays
    /// and the server is asked for new work.
    pub(crate) fn reset_project(&mut self, url: &str, t: f64) {
        self.tasks.end_project(url);
        self.state
            .active_tasks
            .retain(|a| a.project_master_url != url);
        let mut anonymous = false;
        if let Some(ps) = self.state.project_mut(url) {
            ps.results.clear();
            ps.workunits.clear();
            ps.project_files.clear();
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
            for b in &mut ps.project.rsc_backoff {
                b.backoff_time = 0.0;
                b.backoff_interval = 0.0;
            }
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
