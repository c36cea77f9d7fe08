//! Trickle messages between the project loop, the task table and the project directories:
//! the trickle-up files looked for at start-up and read into each scheduler request, and a
//! reply's acks and trickle-downs (`trickle.rs` handles the files).

use ferrite_project::reply::{ApplyOutcome, Event as ReplyEvent};
use ferrite_proto::sched_request::MsgFromHost;
use tracing::{info, warn};

use crate::config::project_dir;
use crate::trickle::{read_trickle_ups, remove_sent_trickle_ups, trickle_ups_in};
use crate::Daemon;

impl Daemon {
    /// At start-up: trickle-up files left in the project directories (by an earlier run or
    /// by the official client) are sent with the next request; unsent ones ask for one.
    pub(crate) fn find_trickle_ups(&mut self) -> bool {
        let mut changed = false;
        for ps in &mut self.state.projects {
            let url = ps.project.master_url.clone();
            let (unsent, sent) = trickle_ups_in(&project_dir(&self.dir, &url));
            if unsent {
                self.tasks.trickle_ups_found(&url);
                if !ps.project.trickle_up_pending {
                    ps.project.trickle_up_pending = true;
                    changed = true;
                }
            }
            if sent {
                self.projects.sent_trickles.insert(&url);
            }
        }
        changed
    }

    /// The trickle-up messages for a request to `url`: the project directory is read when
    /// an app sent one since the last request, when the project is marked
    /// `trickle_up_pending` or when sent ones wait for their ack.
    pub(crate) fn trickle_ups_for_request(&mut self, url: &str) -> Vec<MsgFromHost> {
        let new = self.tasks.trickle_ups_read(url);
        let pending = self
            .state
            .project(url)
            .is_some_and(|p| p.project.trickle_up_pending);
        if !new && !pending && !self.projects.sent_trickles.contains(url) {
            return Vec::new();
        }
        let msgs = read_trickle_ups(&project_dir(&self.dir, url));
        if !msgs.is_empty() {
            self.projects.sent_trickles.insert(url);
        }
        msgs
    }

    /// What a reply said about trickles: sent trickle-ups acknowledged (deleted),
    /// trickle-downs written into their tasks' slots. A trickle-up an app sent while the
    /// request was under way asks for another request.
    pub(crate) fn reply_trickles(&mut self, url: &str, out: &ApplyOutcome) {
        for e in &out.events {
            match e {
                ReplyEvent::TrickleUpsAcked => {
                    self.projects.sent_trickles.remove(url);
                    let n = remove_sent_trickle_ups(&project_dir(&self.dir, url));
                    if n > 0 {
                        info!(project = %url, "{n} trickle-up messages acknowledged");
                    }
                }
                ReplyEvent::TrickleDown { result, file, body } => {
                    match self.tasks.trickle_down(url, result, file, body) {
                        Ok(path) => {
                            info!(project = %url, "trickle-down message for task {result}: {}", path.display());
                        }
                        Err(e) => crate::tasks::log_undelivered(url, &e),
                    }
                }
                ReplyEvent::TrickleDownDropped(result) => {
                    warn!(project = %url, "handle_trickle_down failed: no task {result} here");
                }
                _ => {}
            }
        }
        if self.tasks.has_new_trickle_ups(url) {
            if let Some(ps) = self.state.project_mut(url) {
                ps.project.trickle_up_pending = true;
            }
        }
    }
}
