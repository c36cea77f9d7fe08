//! Persistence: the state file loaded at start-up and saved through the crash-safe
//! [`store`](crate::store) (on the writer thread once the main loop runs) whenever the state
//! changed, at most once a second.

use ferrite_proto::client_state::ClientState;
use tracing::{error, info, warn};

use crate::store::{self, LoadSource};
use crate::{now, rpc, state_summary, Daemon};

impl Daemon {
    pub(crate) fn load_state(&mut self) {
        let loaded = self.store.load(ClientState::parse);
        for r in &loaded.rejected {
            warn!("state file {} not used: {}", r.path.display(), r.reason);
            // A damaged current or previous generation may still hold tasks a person can
            // recover by hand: keep a copy before saves rotate it away. (A cut-short
            // client_state_next.xml is the normal trace of a crash during a save.)
            if !r.path.ends_with(store::STATE_FILE_NEXT) {
                let stamp = now() as u64;
                let mut kept = self.dir.join(format!("client_state_damaged_{stamp}.xml"));
                let mut n = 1;
                while kept.exists() {
                    kept = self
                        .dir
                        .join(format!("client_state_damaged_{stamp}_{n}.xml"));
                    n += 1;
                }
                match std::fs::copy(&r.path, &kept) {
                    Ok(_) => warn!("kept a copy of the damaged file as {}", kept.display()),
                    Err(e) => warn!("could not keep a copy of {}: {e}", r.path.display()),
                }
            }
        }
        match (loaded.value, loaded.source) {
            (Some(parsed), source) => {
                if source != LoadSource::Current {
                    warn!(
                        "loaded state from {} (the newest complete state file)",
                        source.file_name().unwrap_or("?")
                    );
                }
                self.log_warnings(parsed.warnings);
                self.state = parsed.value;
            }
            (None, _) if !loaded.rejected.is_empty() => {
                self.state = ClientState::default();
                error!(
                    "no usable state file; starting with a fresh state. Every task of the lost \
                     state file was lost (a project may send lost tasks again)"
                );
            }
            (None, _) => info!("no state file; starting with a fresh state"),
        }
        self.attach_account_file_projects(!loaded.rejected.is_empty());
        for line in state_summary(&self.state) {
            info!("{line}");
        }
        self.save.mark_dirty(now());
    }

    /// Saves the state when the policy says so; `force` asks for it at once (after the save
    /// in progress, if any). Once the main loop runs, the writer thread does the writing and
    /// [`save_done`](Self::save_done) hears how it went; before that, and at shutdown, the
    /// save happens here.
    pub(crate) fn save_if_due(&mut self, now: f64, force: bool) {
        if force && self.save.is_dirty() {
            self.save.hurry();
        }
        if !self.save.due(now) {
            return;
        }
        let mut xml = self.state.to_xml();
        let generation = self.save.begin(now);
        if let Some(w) = &self.writer {
            match w.submit(xml, generation) {
                Ok(()) => return,
                Err(back) => {
                    warn!("the state writer has stopped; saving on the main loop");
                    self.writer = None;
                    xml = back;
                }
            }
        }
        let r = self.store.save(&xml);
        self.save_done(generation, r);
    }

    /// A save ended: the policy learns it; a failure is said, and the end of failures.
    pub(crate) fn save_done(&mut self, generation: u64, result: Result<(), store::SaveError>) {
        match result {
            Ok(()) => {
                if self.save.failures() > 0 {
                    info!(
                        "state file saved again after {} failed attempts",
                        self.save.failures()
                    );
                }
                self.save.finish(generation, true);
            }
            Err(e) => {
                self.save.finish(generation, false);
                let hint = if e.is_disk_full() {
                    " (disk full: free some space; the last good state is kept)"
                } else {
                    " (the last good state is kept)"
                };
                if self.save.failures() <= 1 {
                    // As the official client: a state file that cannot be written is a notice.
                    warn!(
                        target: rpc::messages::NOTICE_TARGET,
                        "Couldn't write state file; check directory permissions"
                    );
                }
                error!("saving the state failed: {e}{hint}; retrying");
            }
        }
    }
}
