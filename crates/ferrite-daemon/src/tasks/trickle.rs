//! The tasks' side of trickle messages: trickle-ups an app sent (its supervisor moved the
//! file to the project directory) are noted for the project loop, and trickle-downs are put
//! in a task's slot and announced to its app on the `trickle_down` channel.

use std::collections::HashSet;
use std::fs;
use std::path::PathBuf;

use ferrite_proto::client_state::ClientState;
use tracing::{info, warn};

use super::{Key, TaskTable};

/// What the tasks know of trickle messages between passes.
#[derive(Debug, Default)]
pub struct Trickles {
    /// Projects whose apps moved trickle-up files into their directory since the project
    /// loop last read it for a request.
    pub new_ups: HashSet<String>,
    /// Tasks with a trickle-down file in their slot that their app has not been told of yet
    /// (the channel was full, or the app is not running now).
    down_due: HashSet<Key>,
}

/// Why a trickle-down was not put in a slot.
#[derive(Debug, thiserror::Error)]
pub enum TrickleDownError {
    /// The task has no slot: it never started, or it has ended.
    #[error("task {0} has no slot")]
    NoSlot(String),
    /// The file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl TaskTable {
    /// A task's app sent a trickle-up (its file is now in the project directory): the
    /// project gets `trickle_up_pending`, which makes the project loop ask for an RPC.
    pub(super) fn trickle_up_sent(&mut self, state: &mut ClientState, key: &Key) {
        if let Some(ps) = state.project_mut(&key.0) {
            info!(project = %key.0, "task {}: trickle-up message to send", key.1);
            ps.project.trickle_up_pending = true;
        }
        self.trickles.new_ups.insert(key.0.clone());
    }

    /// Writes a trickle-down as `file` in the slot of task (`url`, `result`), running or
    /// holding its slot, and has its app told at the next poll.
    pub fn trickle_down(
        &mut self,
        url: &str,
        result: &str,
        file: &str,
        body: &str,
    ) -> Result<PathBuf, TrickleDownError> {
        let key: Key = (url.to_owned(), result.to_owned());
        let slot = self
            .live
            .get(&key)
            .map(|l| &l.slot)
            .or_else(|| self.held.get(&key))
            .ok_or_else(|| TrickleDownError::NoSlot(result.to_owned()))?;
        let path = slot.dir().join(file);
        fs::write(&path, body).map_err(|source| TrickleDownError::Write {
            path: path.clone(),
            source,
        })?;
        self.trickles.down_due.insert(key);
        Ok(path)
    }

    /// Tells the running apps that have a trickle-down waiting (`<have_trickle_down/>` on
    /// their `trickle_down` channel). Not queued, as in the official client: a full channel
    /// is tried again at the next poll, and so is an app that is not running now. Tasks
    /// whose slot is gone are forgotten.
    pub(super) fn send_trickle_downs(&mut self) {
        if self.trickles.down_due.is_empty() {
            return;
        }
        let live = &mut self.live;
        let held = &self.held;
        self.trickles
            .down_due
            .retain(|key| match live.get_mut(key) {
                Some(l) => !l.task.notify_trickle_down(),
                None => held.contains_key(key),
            });
    }

    /// Whether a task has a trickle-down its app was not told of yet.
    pub fn trickle_down_due(&self, url: &str, result: &str) -> bool {
        self.trickles
            .down_due
            .contains(&(url.to_owned(), result.to_owned()))
    }

    /// Takes note that the project loop read `url`'s trickle-up files for a request.
    pub fn trickle_ups_read(&mut self, url: &str) -> bool {
        self.trickles.new_ups.remove(url)
    }

    /// Notes trickle-up files found in `url`'s directory at start-up.
    pub fn trickle_ups_found(&mut self, url: &str) {
        self.trickles.new_ups.insert(url.to_owned());
    }

    /// Whether apps of `url` moved trickle-up files since the project loop last read them.
    pub fn has_new_trickle_ups(&self, url: &str) -> bool {
        self.trickles.new_ups.contains(url)
    }
}

/// Logs a trickle-down that could not be put in a slot (the official client's
/// `handle_trickle_down failed`).
pub fn log_undelivered(url: &str, e: &TrickleDownError) {
    warn!(project = %url, "handle_trickle_down failed: {e}");
}
