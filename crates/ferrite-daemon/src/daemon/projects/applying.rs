//! A large reply taken in over several turns of the main loop: the glue of
//! `projects/applying.rs` (see it for the batches).

use ferrite_project::reply::apply_task_batch_indexed;
use ferrite_project::verify::BoincCrypt;
use tracing::{info, warn};

use crate::clock::now;
use crate::projects::applying::Applying;
use crate::Daemon;

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
                Ok(o) => {
                    a.outcome.absorb(o);
                    self.write_result_heads_ahead(&a.url);
                }
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
