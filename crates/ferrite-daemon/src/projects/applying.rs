//! A scheduler reply of many thousand new tasks taken in over several turns of the main
//! loop: the reply itself and its first [`REPLY_BATCH`] tasks in the turn its event
//! arrives, then a batch per turn (the loop does not wait between them), so no turn holds
//! the loop for long and GUIs are answered throughout. Until the last batch is in, the
//! project's scheduler operation stays in flight (no other starts); then what the reply
//! brought is acted on (`Daemon::reply_applied`) and the state saved at once.

use std::collections::VecDeque;

use ferrite_project::reply::{apply_task_batch_indexed, ApplyOutcome, BatchIndex, TaskBatch};
use ferrite_project::verify::BoincCrypt;
use ferrite_proto::client_state::RpcReason;
use ferrite_proto::sched_reply::SchedulerReply;
use tracing::{info, warn};

use crate::clock::now;
use crate::Daemon;

/// New tasks per batch: a batch is merged in about a millisecond (tens in a debug build on
/// a loaded machine), whatever the project's size, as the project's index by name is kept
/// from batch to batch; a reply of 100,000 tasks takes four hundred turns.
pub(crate) const REPLY_BATCH: usize = 250;

/// A reply being taken in: what it brought so far, the batches still held back, and what
/// the end of the scheduler operation needs.
#[derive(Debug)]
pub(crate) struct Applying {
    pub(super) url: String,
    pub(super) reason: RpcReason,
    pub(super) sent: Option<ferrite_sched::WorkRequest>,
    /// The reply's `request_delay` (0 when none).
    pub(super) request_delay: f64,
    /// The notices of the project's scheduler may be withdrawn (the reply sent none).
    pub(super) withdraw_notices: bool,
    /// The outcome of the reply and of the batches applied so far.
    pub(super) outcome: ApplyOutcome,
    held_back: VecDeque<TaskBatch>,
    /// The project's objects by name, kept from one batch to the next.
    index: BatchIndex,
    /// When the reply arrived (every batch's tasks are received then).
    pub(super) t: f64,
}

impl Applying {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
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

impl Daemon {
    /// A reply was applied: with tasks held back, they are taken in over the next turns;
    /// without, its end is handled now.
    pub(super) fn reply_applying(&mut self, a: Applying) {
        if a.held_back.is_empty() {
            return self.reply_applied(a);
        }
        let held: usize = a.held_back.iter().map(|b| b.results.len()).sum();
        info!(
            project = %a.url,
            "taking in the reply's tasks: {held} more in {} batches",
            a.held_back.len()
        );
        self.projects.busy = Some(a.url.clone());
        self.projects.applying = Some(a);
    }

    /// Whether a reply's tasks are still being taken in (the loop does not wait).
    pub(crate) fn taking_in_reply(&self) -> bool {
        self.projects.applying.is_some()
    }

    /// Takes in the next batch of the reply being taken in; after the last, acts on the
    /// reply and saves the state at once.
    pub(crate) fn take_in_next_batch(&mut self) {
        let Some(mut a) = self.projects.applying.take() else {
            return;
        };
        if let Some(batch) = a.held_back.pop_front() {
            let opts = self.apply_options();
            let applied = apply_task_batch_indexed(
                &mut self.state,
                &a.url,
                &batch,
                a.t,
                &opts,
                &BoincCrypt,
                &mut a.index,
            );
            match applied {
                Ok(o) => a.outcome.absorb(o),
                Err(e) => {
                    warn!("{e}: the rest of its reply is dropped");
                    self.projects.busy = None;
                    return;
                }
            }
            self.state_epoch += 1;
            self.save.mark_dirty(now());
        }
        if !a.held_back.is_empty() {
            self.projects.applying = Some(a);
            return;
        }
        self.projects.busy = None;
        self.reply_applied(a);
        let t = now();
        self.save.mark_dirty(t);
        self.save.save_if_due(&self.state, t, true);
    }

    /// Takes in every batch still held back (the daemon stops: nothing a reply brought is
    /// lost).
    pub(crate) fn take_in_whole_reply(&mut self) {
        while self.taking_in_reply() {
            self.take_in_next_batch();
        }
    }
}
