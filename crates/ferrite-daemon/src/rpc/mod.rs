//! GUI RPC's pure parts: the server's configuration pieces and handle, the router
//! ([`route`]) that sorts each request into a query or a command, the reply writers
//! ([`body`], [`result_heads`], [`workunit_texts`], [`state_reply`], [`status`],
//! [`file_transfers`], [`web_rpc`]) and what is kept between replies ([`RpcState`]). Each takes what it reads
//! as arguments.
//!
//! The glue that borrows the daemon is `daemon/rpc/`: starting the server from the daemon's
//! options, passing each authorised call into the main loop as an event and answering it
//! there (only the main loop answers, so every reply sees one consistent state and every
//! change goes through the one owner); the queries answered from a shared borrow of the
//! daemon; the commands, each handed to the owner of what it changes, the run modes
//! ([`crate::run_modes`]) among them.

pub(crate) mod body;
pub(crate) mod file_transfers;
pub(crate) mod result_heads;
pub(crate) mod route;
pub(crate) mod state_reply;
pub(crate) mod status;
pub(crate) mod web_rpc;
pub(crate) mod workunit_texts;

use std::time::Duration;

use ferrite_gui_rpc::reply;
use ferrite_proto::client_state::{ClientState, ProjectState};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// `remote_hosts.cfg`: hosts allowed to connect from elsewhere.
pub const REMOTE_HOSTS_FILE: &str = "remote_hosts.cfg";

/// How long the TCP bind is retried at start-up (the port may still be held by a previous
/// instance at boot), as the official client does.
pub(crate) const BIND_RETRY: Duration = Duration::from_secs(30);

/// GUI RPC state the daemon keeps between calls (not saved: temporary modes end with the
/// process, as officially).
#[derive(Debug, Default)]
pub struct RpcState {
    /// The results' heads written for the last reply that listed them all.
    pub(crate) result_heads: std::cell::RefCell<result_heads::ResultHeads>,
    /// The workunits' texts written for the last `get_state` parts, kept across epochs.
    pub(crate) workunit_texts: std::cell::RefCell<workunit_texts::WorkunitTexts>,
    /// The parts of `get_state` written for a state epoch.
    pub(crate) state_parts: std::cell::RefCell<Option<StateParts>>,
    /// The files waiting for a transfer, found for a state epoch.
    pub(crate) pending_transfers:
        std::cell::RefCell<Option<(u64, std::sync::Arc<[PendingTransfer]>)>>,
    /// The (master URL, name) of each project as the event log was last told them.
    pub(crate) log_names: Vec<(String, String)>,
}

/// The parts of a `get_state` reply that stay the same within a state epoch, as written.
#[derive(Debug)]
pub struct StateParts {
    /// The state epoch they were written in.
    pub(crate) epoch: u64,
    /// `<client_state>` to the network statistics.
    pub(crate) head: bytes::Bytes,
    /// Each project with its apps, app versions and workunits (its results follow).
    pub(crate) projects: Vec<bytes::Bytes>,
    /// The platforms, the preferences and `</client_state>`.
    pub(crate) tail: bytes::Bytes,
}

impl StateParts {
    /// The bytes the parts hold.
    pub(crate) fn len(&self) -> usize {
        self.head.len() + self.tail.len() + self.projects.iter().map(|p| p.len()).sum::<usize>()
    }
}

/// A file waiting for (or in) a transfer: its project's and its own index in the state,
/// and its `<file_transfer>` element as far as it stays the same within the state epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTransfer {
    /// Index of the project in `ClientState::projects`.
    pub project: usize,
    /// Index of the file in the project's `files`.
    pub file: usize,
    /// Waiting to be sent (else to be fetched).
    pub upload: bool,
    /// `<file_transfer>` to `<status>`.
    pub head: bytes::Bytes,
    /// The file's retry record as saved, when it has one (else the reply writes one of the
    /// time); a transfer under way shows its live figures instead.
    pub record: Option<bytes::Bytes>,
}

impl RpcState {
    /// Forgets what was kept to answer the next calls faster (the GUIs went quiet: the
    /// memory goes back).
    pub fn forget_kept_replies(&mut self) {
        let heads = self.result_heads.get_mut();
        if heads.bytes() > 0 {
            tracing::debug!(
                "forgetting {} kB of result heads ({} written so far)",
                heads.bytes() >> 10,
                heads.written()
            );
        }
        heads.clear();
        let texts = self.workunit_texts.get_mut();
        if texts.kept() > 0 {
            tracing::debug!(
                "forgetting {} workunits' texts ({} written so far)",
                texts.kept(),
                texts.written()
            );
        }
        texts.clear();
        self.forget_epoch_parts();
    }

    /// Drops what was kept for the state epoch (`get_state`'s parts, the pending transfers),
    /// current or not: the GUIs paused, and may not ask again within this epoch.
    pub fn forget_epoch_parts(&mut self) {
        *self.pending_transfers.get_mut() = None;
        *self.state_parts.get_mut() = None;
    }

    /// Drops what was kept for a state epoch before `epoch` (`get_state`'s parts, the
    /// pending transfers): no reply can use it again. Returns the bytes it held.
    pub fn forget_stale(&mut self, epoch: u64) -> usize {
        let mut freed = 0;
        let parts = self.state_parts.get_mut();
        if parts.as_ref().is_some_and(|p| p.epoch != epoch) {
            freed += parts.take().map_or(0, |p| p.len());
        }
        let pending = self.pending_transfers.get_mut();
        if pending.as_ref().is_some_and(|(e, _)| *e != epoch) {
            freed += pending.take().map_or(0, |(_, list)| {
                list.iter()
                    .map(|t| t.head.len() + t.record.as_ref().map_or(0, |r| r.len()))
                    .sum()
            });
        }
        freed
    }

    /// The files waiting for a transfer in the state of `epoch`: found by `find` once per
    /// epoch (the state changes only from one epoch to the next).
    pub fn pending_transfers(
        &self,
        epoch: u64,
        find: impl FnOnce() -> Vec<PendingTransfer>,
    ) -> std::sync::Arc<[PendingTransfer]> {
        let mut kept = self.pending_transfers.borrow_mut();
        match &*kept {
            Some((e, list)) if *e == epoch => list.clone(),
            _ => {
                let list: std::sync::Arc<[PendingTransfer]> = find().into();
                *kept = Some((epoch, list.clone()));
                list
            }
        }
    }
}

/// The project a control request names, or the reply the official client gives for a
/// missing or unknown URL.
pub(crate) fn named_project<'a>(
    state: &'a mut ClientState,
    url: &str,
) -> Result<&'a mut ProjectState, String> {
    if url.trim().is_empty() {
        return Err(reply::error("Missing project URL"));
    }
    state
        .project_mut(url)
        .ok_or_else(|| reply::error("No such project"))
}

/// The running server: stop it with [`RpcServerHandle::stop`].
#[derive(Debug)]
pub struct RpcServerHandle {
    /// Cancels the listeners, the connections and the forwarder.
    pub(crate) token: CancellationToken,
    /// The task that owns the server.
    pub(crate) task: JoinHandle<()>,
    /// Fires (or closes) once the first attempt to start the listeners has ended.
    pub(crate) started: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl RpcServerHandle {
    /// Waits until the listeners are bound (or failed to bind), at most `limit`: a port
    /// still held by a previous client keeps being retried in the background. Start-up
    /// waits here, so that a tool started on "entering main loop" finds the port open.
    pub async fn wait_started(&mut self, limit: Duration) -> bool {
        match self.started.take() {
            Some(rx) => tokio::time::timeout(limit, rx).await.is_ok(),
            None => true,
        }
    }

    /// Stops accepting, closes the connections and waits until the server is gone.
    pub async fn stop(self) {
        self.token.cancel();
        if tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .is_err()
        {
            warn!("the GUI RPC server did not stop within 5 s");
        }
    }
}
