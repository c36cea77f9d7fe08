//! Persistent file transfers: downloads of input and app files, uploads of outputs.
//!
//! The main loop calls [`Transfers::tick`] each turn; it starts what may start (as tokio
//! tasks that report back with [`Event::Transfer`](crate::Event::Transfer)) and the loop hands
//! each [`TransferDone`] to [`Transfers::finished`], which changes the state: file status,
//! results whose inputs are all present, results whose outputs are all uploaded.

use std::path::{Path, PathBuf};

use ferrite_net::HttpClient;
use ferrite_proto::cc_config::CcOptions;
use ferrite_proto::client_state::ClientState;
use ferrite_proto::prefs::GlobalPrefs;
use tokio::sync::mpsc;

use crate::Event;

/// What a transfer round may use.
#[derive(Debug, Clone, Copy)]
pub struct TransferContext<'a> {
    /// The HTTP client (proxy, timeouts, bandwidth throttles).
    pub http: &'a HttpClient,
    /// Preferences in force (daily transfer limits).
    pub prefs: &'a GlobalPrefs,
    /// `cc_config.xml` options (`max_file_xfers`, `max_file_xfers_per_project`).
    pub cc: &'a CcOptions,
    /// Network mode and `network_available`: false = start nothing.
    pub network_allowed: bool,
}

/// The end of one transfer attempt, sent back to the main loop.
#[derive(Debug)]
pub struct TransferDone {
    /// Project master URL.
    pub project: String,
    /// File name.
    pub file: String,
    /// Upload (true) or download.
    pub upload: bool,
    /// What happened.
    pub result: Result<u64, String>,
}

/// The daemon's transfers.
#[derive(Debug)]
pub struct Transfers {
    /// Absolute data directory.
    dir: PathBuf,
}

impl Transfers {
    /// Transfers for data directory `dir`.
    pub fn new(dir: &Path) -> Transfers {
        Transfers {
            dir: dir.to_path_buf(),
        }
    }

    /// Starts the transfers that may start now; returns true when the state changed.
    pub fn tick(
        &mut self,
        _state: &mut ClientState,
        _ctx: &TransferContext<'_>,
        _now: f64,
        _events: &mpsc::Sender<Event>,
    ) -> bool {
        let _ = &self.dir;
        false
    }

    /// Applies the end of a transfer; returns true when the state changed.
    pub fn finished(&mut self, _done: TransferDone, _state: &mut ClientState, _now: f64) -> bool {
        false
    }

    /// Stops every transfer (partial files stay for the next start).
    pub async fn shutdown(&mut self) {}
}
