//! Loading the state file at start-up: the newest complete generation, read and parsed on a
//! thread of its own; damaged generations are kept aside for a person to look at.

use ferrite_proto::client_state::ClientState;
use tracing::{error, info, warn};

use crate::clock::now;
use crate::startup::{self, StopFlag};
use crate::store::{self, LoadSource, StateStore};
use crate::{config, Daemon};

impl Daemon {
    /// Loads the newest complete state file, read and parsed on a thread of its own; returns
    /// false, with nothing loaded, when `stop` is asked for first.
    pub(crate) fn load_state(&mut self, stop: &StopFlag) -> bool {
        let store = StateStore::new(&self.dir);
        let loaded = match startup::unless_stopped("state-load", stop, move || {
            store.load(ClientState::parse)
        }) {
            Ok(Some(loaded)) => loaded,
            Ok(None) => return false,
            Err(e) => {
                warn!("cannot load the state on a thread of its own ({e}); loading it here");
                self.save.store.load(ClientState::parse)
            }
        };
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
        for line in config::summary(&self.state) {
            info!("{line}");
        }
        self.save.mark_dirty(now());
        true
    }
}
