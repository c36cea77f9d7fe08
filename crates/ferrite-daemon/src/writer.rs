//! Saving the state file off the main loop. The loop hands a copy of the state (a clone costs
//! a small part of what its serialisation does) to a writer thread, which serialises it,
//! writes, fsyncs and rotates it with the same crash-safe [`StateStore`] a synchronous save
//! uses; the outcome comes back on a channel
//! the loop listens to. At most one save is in flight (the [`SavePolicy`] says when), so
//! generations are written in order and the file on disk is always a whole, earlier state.
//!
//! [`SavePolicy`]: crate::store::SavePolicy

use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;

use ferrite_proto::client_state::ClientState;
use tokio::sync::mpsc;

use crate::store::{SaveError, StateStore};

/// One finished save: the generation of changes it covers and how it went.
#[derive(Debug)]
pub struct SaveDone {
    /// The policy's generation when the save began.
    pub generation: u64,
    /// The store's outcome.
    pub result: Result<(), SaveError>,
    /// Seconds the write, fsync and renames took.
    pub secs: f64,
    /// Seconds the serialisation took.
    pub serialise_secs: f64,
}

struct Job {
    state: Box<ClientState>,
    generation: u64,
}

/// The writer thread and the channel to it.
#[derive(Debug)]
pub struct StateWriter {
    jobs: Option<std_mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl StateWriter {
    /// Starts the thread, which saves through `store` and reports on `done` (unbounded, so
    /// the thread never waits for the loop).
    pub fn start(
        mut store: StateStore,
        done: mpsc::UnboundedSender<SaveDone>,
    ) -> std::io::Result<StateWriter> {
        let (jobs, rx) = std_mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("state-writer".into())
            .spawn(move || {
                for job in rx {
                    let t = std::time::Instant::now();
                    let xml = job.state.to_xml();
                    drop(job.state);
                    let serialise_secs = t.elapsed().as_secs_f64();
                    let t = std::time::Instant::now();
                    let result = store.save(&xml);
                    let secs = t.elapsed().as_secs_f64();
                    // The loop may be gone at shutdown; nothing to tell then.
                    let _ = done.send(SaveDone {
                        generation: job.generation,
                        result,
                        secs,
                        serialise_secs,
                    });
                }
            })?;
        Ok(StateWriter {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Hands a copy of the state to the thread, to serialise and save; gives it back if the
    /// thread is gone (the caller then saves it by itself).
    pub fn submit(&self, state: Box<ClientState>, generation: u64) -> Result<(), Box<ClientState>> {
        match &self.jobs {
            Some(j) => j.send(Job { state, generation }).map_err(|e| e.0.state),
            None => Err(state),
        }
    }

    /// Lets the thread finish the save in hand and waits for it to end.
    pub fn stop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for StateWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A state told apart by its platform name.
    fn state_named(g: u64) -> Box<ClientState> {
        Box::new(ClientState {
            platform_name: format!("p{g}"),
            ..ClientState::default()
        })
    }

    #[test]
    fn saves_in_order_report_each_outcome_and_stop_waits_for_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut w = StateWriter::start(StateStore::new(dir.path()), tx).unwrap();
        for g in 1..=3u64 {
            assert!(w.submit(state_named(g), g).is_ok());
        }
        w.stop();
        let done: Vec<u64> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|d| {
                assert!(d.result.is_ok(), "{:?}", d.result);
                d.generation
            })
            .collect();
        assert_eq!(done, vec![1, 2, 3]);
        let now = std::fs::read_to_string(dir.path().join("client_state.xml")).unwrap();
        assert!(now.contains("<platform_name>p3</platform_name>"), "{now}");
        let prev = std::fs::read_to_string(dir.path().join("client_state_prev.xml")).unwrap();
        assert!(prev.contains("<platform_name>p2</platform_name>"), "{prev}");
        // A stopped writer takes nothing more and gives the state back.
        assert_eq!(w.submit(state_named(4), 4), Err(state_named(4)));
    }

    #[test]
    fn a_failed_save_is_reported_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone");
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut w = StateWriter::start(StateStore::new(&missing), tx).unwrap();
        assert!(w.submit(state_named(7), 7).is_ok());
        w.stop();
        let d = rx.try_recv().unwrap();
        assert_eq!(d.generation, 7);
        assert!(d.result.is_err());
    }
}
