//! Suspending at the next checkpoint: while computing is suspended for a reason that can
//! wait (the user's suspension too when a GUI asked it to wait for checkpoints), a running
//! task that checkpoints runs on until it checkpoints again or until `cc_config.xml`
//! `ferrite_checkpoint_grace` seconds have passed, then it is stopped as any other; while only
//! GPU computing is suspended for a reason that can wait there (the computer in use, the GPU
//! temperature limit), a GPU task does the same (the decision is
//! `ferrite_sched::checkpoint_grace`).

use std::time::Instant;

use ferrite_proto::client_state::ClientState;
use ferrite_sched::checkpoint_grace::{verdict, Suspension, Verdict, Waiting};
use ferrite_supervise::TaskState;
use tracing::info;

use super::{Key, Live, TaskTable, TickInputs};

impl TaskTable {
    /// While the running task `key` is under a suspension (all computing's, or the GPU's for
    /// a GPU task, as `inputs` say): whether it may run on to its next checkpoint. It is noted
    /// the first time it is asked about.
    pub(super) fn runs_on_to_checkpoint(
        &mut self,
        key: &Key,
        inputs: &TickInputs<'_>,
        now: f64,
    ) -> bool {
        let Some(l) = self.live.get(key) else {
            return false;
        };
        if l.task.state() != TaskState::Running {
            return false;
        }
        let Some(under) = Suspension::of_task(inputs.suspend, inputs.gpu_suspend, l.uses_gpu)
        else {
            return false;
        };
        let usage = l.task.usage();
        let noted = self.waits.get(key).copied();
        let w = noted.unwrap_or(Waiting {
            asked_at: now,
            checkpoint_cpu_at_ask: usage.checkpoint.cpu_time,
            cpu_at_ask: usage.cpu_time,
        });
        match verdict(
            under,
            self.user_suspend_at_checkpoint,
            self.checkpoint_grace,
            &w,
            usage.checkpoint.cpu_time,
            now,
        ) {
            Verdict::RunOn { until } => {
                if noted.is_none() {
                    info!(
                        project = %key.0,
                        "task {} runs on to its next checkpoint (at most {:.0} s) before it \
                         is suspended",
                        key.1,
                        until - now
                    );
                    self.waits.insert(key.clone(), w);
                }
                true
            }
            _ => {
                self.waits.remove(key);
                false
            }
        }
    }

    /// Whether the task `key` runs on to its next checkpoint now (for the GUIs).
    pub fn suspending_at_checkpoint(&self, key: &Key) -> bool {
        self.waits.contains_key(key)
    }

    /// Each tick: a task let run on that has checkpointed since, or whose grace time ended,
    /// is stopped (under all computing's suspension: suspended, or quit when `quit` and it has
    /// a checkpoint; under the GPU's: quit); each is forgotten once the suspension it is under
    /// ends.
    pub(super) fn stop_at_checkpoints(
        &mut self,
        state: &ClientState,
        inputs: &TickInputs<'_>,
        quit: bool,
        inst: Instant,
        now: f64,
    ) {
        if self.waits.is_empty() {
            return;
        }
        if inputs.suspend.is_none() && inputs.gpu_suspend.is_none() {
            self.waits.clear();
            return;
        }
        let grace = self.checkpoint_grace;
        let user_at_checkpoint = self.user_suspend_at_checkpoint;
        let keys: Vec<Key> = self.waits.keys().cloned().collect();
        for key in keys {
            let Some(w) = self.waits.get(&key).copied() else {
                continue;
            };
            let Some(l) = self.live.get_mut(&key) else {
                self.waits.remove(&key);
                continue;
            };
            let under = Suspension::of_task(inputs.suspend, inputs.gpu_suspend, l.uses_gpu);
            let Some(under) = under.filter(|_| l.task.state() == TaskState::Running) else {
                self.waits.remove(&key);
                continue;
            };
            let cp = l.task.usage().checkpoint.cpu_time;
            match verdict(under, user_at_checkpoint, grace, &w, cp, now) {
                Verdict::RunOn { .. } => continue,
                Verdict::Checkpointed { kept } => info!(
                    project = %key.0,
                    "task {}: suspended at checkpoint; {kept:.0} s of CPU time kept",
                    key.1
                ),
                Verdict::GraceOver => info!(
                    project = %key.0,
                    "task {}: no checkpoint within {grace:.0} s; suspending it now",
                    key.1
                ),
                Verdict::StopNow => {}
            }
            self.waits.remove(&key);
            let checkpointed = cp > 0.0
                || state
                    .active_task(&key.0, &key.1)
                    .is_some_and(|a| a.checkpoint_cpu_time > 0.0);
            let quit = match under {
                Suspension::Computing(_) => quit && checkpointed,
                // GPU tasks leave the GPU's memory, as the run list has them do.
                Suspension::Gpu(_) => true,
            };
            stop_for_suspension(l, &key, quit, inst);
        }
    }
}

/// Stops a running task because computing is suspended: out of memory when `quit` (it
/// restarts from its checkpoint), else suspended in memory.
pub(super) fn stop_for_suspension(l: &mut Live, key: &Key, quit: bool, inst: Instant) {
    if quit {
        info!(
            project = %key.0,
            "removing task {} from memory (it restarts from its checkpoint)",
            key.1
        );
        l.task.quit(inst);
    } else {
        info!(project = %key.0, "suspending task {}", key.1);
        l.task.suspend(inst);
    }
}
