//! Persistence: the state file loaded at start-up and saved through the crash-safe
//! [`store`](crate::store) (on the writer thread once the main loop runs) whenever the state
//! changed, at most once a second.

use ferrite_proto::client_state::ClientState;
use tracing::{error, info, warn};

use tokio::sync::mpsc;

use crate::clock::now;
use crate::store::{self, SavePolicy, StateStore};
use crate::writer;

/// The state file's owner: the store, the writer thread, and the policy that says when the
/// state is dirty and a save is due. Everything that changes the state calls
/// [`mark_dirty`](Self::mark_dirty); the main loop calls [`save_if_due`](Self::save_if_due)
/// at the end of each turn and hands the writer's outcomes to [`save_done`](Self::save_done).
#[derive(Debug)]
pub(crate) struct Persistence {
    pub(crate) store: StateStore,
    /// Writes the state file on its own thread once the main loop runs.
    writer: Option<writer::StateWriter>,
    /// Outcomes of the writer's saves.
    saved_tx: mpsc::UnboundedSender<writer::SaveDone>,
    saved_rx: mpsc::UnboundedReceiver<writer::SaveDone>,
    policy: SavePolicy,
    /// The newest generation a save wrote successfully.
    saved: u64,
}

impl Persistence {
    /// The state files of `dir`, saved at most once a second (less often for a state slow
    /// to serialise: [`SavePolicy::SERIALISE_SPACING`]).
    pub(crate) fn new(dir: &std::path::Path) -> Self {
        let (saved_tx, saved_rx) = mpsc::unbounded_channel();
        Persistence {
            store: StateStore::new(dir),
            writer: None,
            saved_tx,
            saved_rx,
            policy: SavePolicy::new(1.0),
            saved: 0,
        }
    }

    /// The state changed at `now`: a save is due within the policy's interval.
    pub(crate) fn mark_dirty(&mut self, now: f64) {
        self.policy.mark_dirty(now);
    }

    /// Some change is not saved yet.
    pub(crate) fn is_dirty(&self) -> bool {
        self.policy.is_dirty()
    }

    /// Failed saves in a row.
    pub(crate) fn failures(&self) -> u32 {
        self.policy.failures()
    }

    /// When the next save is due, if one is.
    pub(crate) fn next_due(&self) -> Option<f64> {
        self.policy.next_due()
    }

    /// Starts the writer thread (the main loop starts); without it saves happen on the
    /// caller's thread.
    pub(crate) fn start_writer(&mut self, dir: &std::path::Path) {
        match writer::StateWriter::start(StateStore::new(dir), self.saved_tx.clone()) {
            Ok(w) => self.writer = Some(w),
            Err(e) => warn!("cannot start the state writer thread ({e}); saving on the main loop"),
        }
    }

    /// The writer serialised the state in `secs`: saves are spaced by it
    /// ([`SavePolicy::SERIALISE_SPACING`]), so the writer's work stays a small part of the
    /// host's.
    pub(crate) fn note_serialise(&mut self, secs: f64) {
        self.policy.note_serialise(secs);
    }

    /// The next outcome of the writer's saves (the main loop waits on it with its events).
    pub(crate) async fn saved(&mut self) -> Option<writer::SaveDone> {
        self.saved_rx.recv().await
    }

    /// At shutdown: the writer stops after its save in progress, its outcomes are heard, and
    /// the last save of `state` happens here, at once.
    pub(crate) fn save_at_exit(&mut self, state: &ClientState) {
        if let Some(mut w) = self.writer.take() {
            w.stop();
        }
        while let Ok(d) = self.saved_rx.try_recv() {
            self.save_done(d.generation, d.result);
        }
        self.policy.abandon();
        self.policy.mark_dirty(now());
        self.save_if_due(state, now(), true);
    }

    /// Saves the state when the policy says so; `force` asks for it at once (after the save
    /// in progress, if any). Once the main loop runs, the writer thread does the writing and
    /// [`save_done`](Self::save_done) hears how it went; before that, and at shutdown, the
    /// save happens here.
    pub(crate) fn save_if_due(&mut self, state: &ClientState, now: f64, force: bool) {
        if force && self.policy.is_dirty() {
            self.policy.hurry();
        }
        if !self.policy.due(now) {
            return;
        }
        let generation = self.policy.begin(now);
        if let Some(w) = &self.writer {
            // The writer serialises a copy: the loop only clones.
            match w.submit(Box::new(state.clone()), generation) {
                Ok(()) => return,
                Err(_) => {
                    warn!("the state writer has stopped; saving on the main loop");
                    self.writer = None;
                }
            }
        }
        let started = std::time::Instant::now();
        let xml = state.to_xml();
        self.policy.note_serialise(started.elapsed().as_secs_f64());
        let r = self.store.save(&xml);
        self.save_done(generation, r);
    }

    /// A save ended: the policy learns it; a failure is said, and the end of failures.
    /// The generation of the changes noted so far.
    pub(crate) fn generation(&self) -> u64 {
        self.policy.generation()
    }

    /// The newest generation the state file on disk holds.
    pub(crate) fn saved_generation(&self) -> u64 {
        self.saved
    }

    pub(crate) fn save_done(&mut self, generation: u64, result: Result<(), store::SaveError>) {
        match result {
            Ok(()) => {
                // `state_debug`: the end of each save is an event tests (and volunteers
                // chasing a problem) can wait on.
                tracing::debug!(target: "ferrite::state_debug", "state file saved");
                if self.policy.failures() > 0 {
                    info!(
                        "state file saved again after {} failed attempts",
                        self.policy.failures()
                    );
                }
                self.policy.finish(generation, true);
                self.saved = self.saved.max(generation);
            }
            Err(e) => {
                self.policy.finish(generation, false);
                let hint = if e.is_disk_full() {
                    " (disk full: free some space; the last good state is kept)"
                } else {
                    " (the last good state is kept)"
                };
                if self.policy.failures() <= 1 {
                    // As the official client: a state file that cannot be written is a notice.
                    warn!(
                        target: crate::messages::NOTICE_TARGET,
                        "Couldn't write state file; check directory permissions"
                    );
                }
                error!("saving the state failed: {e}{hint}; retrying");
            }
        }
    }
}
