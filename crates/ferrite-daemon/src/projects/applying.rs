//! A scheduler reply of many thousand new tasks taken in over several turns of the main
//! loop: the reply itself and its first [`REPLY_BATCH`] tasks in the turn its event
//! arrives, then a batch per turn (the loop does not wait between them), so no turn holds
//! the loop for long and GUIs are answered throughout. Until the last batch is in, the
//! project's scheduler operation stays in flight (no other starts); then what the reply
//! brought is acted on (`Daemon::reply_applied`) and the state saved at once.

use std::collections::VecDeque;

use ferrite_project::reply::{ApplyOutcome, BatchIndex, TaskBatch};
use ferrite_proto::client_state::RpcReason;
use ferrite_proto::sched_reply::SchedulerReply;

/// New tasks per batch: a batch is merged in about a millisecond (tens in a debug build on
/// a loaded machine), whatever the project's size, as the project's index by name is kept
/// from batch to batch; a reply of 100,000 tasks takes four hundred turns.
pub(crate) const REPLY_BATCH: usize = 250;

/// A reply being taken in: what it brought so far, the batches still held back, and what
/// the end of the scheduler operation needs.
#[derive(Debug)]
pub(crate) struct Applying {
    pub(crate) url: String,
    pub(crate) reason: RpcReason,
    pub(crate) sent: Option<ferrite_sched::WorkRequest>,
    /// The reply's `request_delay` (0 when none).
    pub(crate) request_delay: f64,
    /// The notices of the project's scheduler may be withdrawn (the reply sent none).
    pub(crate) withdraw_notices: bool,
    /// The outcome of the reply and of the batches applied so far.
    pub(crate) outcome: ApplyOutcome,
    pub(crate) held_back: VecDeque<TaskBatch>,
    /// The project's objects by name, kept from one batch to the next.
    pub(crate) index: BatchIndex,
    /// When the reply arrived (every batch's tasks are received then).
    pub(crate) t: f64,
}

impl Applying {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        url: &str,
        reason: RpcReason,
        sent: Option<ferrite_sched::WorkRequest>,
        reply: &SchedulerReply,
        withdraw_notices: bool,
        outcome: ApplyOutcome,
        held_back: Vec<TaskBatch>,
        t: f64,
    ) -> Applying {
        Applying {
            url: url.to_owned(),
            reason,
            sent,
            request_delay: reply.request_delay.unwrap_or(0.0),
            withdraw_notices,
            outcome,
            held_back: held_back.into(),
            index: BatchIndex::default(),
            t,
        }
    }
}
