//! When the next scheduling pass is due. A pass (snapshot, accounting, simulation, run list,
//! fetch decision) costs time in proportion to the number of jobs, so the client runs one only
//! when something a pass reads has changed (the caller's state epoch, the suspend decision, the
//! user's activity, the running apps' memory passing the RAM limit) or when a deadline of the pass's own comes (its `next_wakeup`: the periodic
//! pass, a time slice ending, a backoff expiring, a report coming due; or a job allowed to start
//! again), not on every tick of the main loop.

use crate::model::Time;
use crate::suspend::SuspendReason;

/// What a pass depends on that may change between passes without the state changing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassInputs {
    /// The caller's state epoch: it moves whenever the state may have changed.
    pub epoch: u64,
    /// Why computing is suspended, if it is.
    pub suspend: Option<SuspendReason>,
    /// Why GPU computing is suspended (while CPU computing is not), if it is.
    pub gpu_suspend: Option<SuspendReason>,
    /// The user counts as active (the RAM limits and preferences follow it).
    pub user_active: bool,
    /// The running apps' working sets add up to more than the RAM the preferences allow
    /// (working sets grow between passes without the state changing; the official client
    /// asks for a schedule when they pass the limit, too).
    pub over_ram_limit: bool,
}

/// Remembers what the last pass saw and when the next one must run at the latest.
#[derive(Debug, Clone, Default)]
pub struct PassGate {
    last: Option<PassInputs>,
    due: Time,
}

impl PassGate {
    /// Whether a pass must run now: nothing ran yet, an input changed, or the deadline came.
    pub fn is_due(&self, inputs: &PassInputs, now: Time) -> bool {
        self.last.as_ref() != Some(inputs) || now >= self.due
    }

    /// A pass ran on `inputs`; the next one is due at `next_wakeup` at the latest.
    pub fn passed(&mut self, inputs: PassInputs, next_wakeup: Time) {
        self.last = Some(inputs);
        self.due = next_wakeup;
    }

    /// The next pass is due no later than `t`.
    pub fn wake_by(&mut self, t: Time) {
        self.due = self.due.min(t);
    }

    /// The caller's own tick moved the epoch on (its changes are the pass's results, not
    /// news for the next pass): the next check compares with `epoch`.
    pub fn settle(&mut self, epoch: u64) {
        if let Some(l) = &mut self.last {
            l.epoch = epoch;
        }
    }

    /// When the next pass is due at the latest, once one has run.
    pub fn due(&self) -> Option<Time> {
        self.last.map(|_| self.due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(epoch: u64) -> PassInputs {
        PassInputs {
            epoch,
            suspend: Some(SuspendReason::UserRequest),
            gpu_suspend: None,
            user_active: false,
            over_ram_limit: false,
        }
    }

    #[test]
    fn the_first_check_asks_for_a_pass() {
        assert!(PassGate::default().is_due(&inputs(0), 0.0));
    }

    #[test]
    fn nothing_changed_means_no_pass_until_the_deadline() {
        let mut g = PassGate::default();
        g.passed(inputs(7), 160.0);
        assert!(!g.is_due(&inputs(7), 101.0));
        assert!(!g.is_due(&inputs(7), 159.9));
        assert!(g.is_due(&inputs(7), 160.0));
        assert_eq!(g.due(), Some(160.0));
    }

    #[test]
    fn a_new_epoch_or_suspend_decision_asks_for_a_pass() {
        let mut g = PassGate::default();
        g.passed(inputs(7), 160.0);
        assert!(g.is_due(&inputs(8), 101.0));
        let resumed = PassInputs {
            suspend: None,
            ..inputs(7)
        };
        assert!(g.is_due(&resumed, 101.0));
        let active = PassInputs {
            user_active: true,
            ..inputs(7)
        };
        assert!(g.is_due(&active, 101.0));
        let over = PassInputs {
            over_ram_limit: true,
            ..inputs(7)
        };
        assert!(g.is_due(&over, 101.0));
        let gpu_hot = PassInputs {
            gpu_suspend: Some(SuspendReason::CpuThrottle),
            ..inputs(7)
        };
        assert!(g.is_due(&gpu_hot, 101.0));
    }

    #[test]
    fn the_callers_own_epoch_step_is_not_news() {
        let mut g = PassGate::default();
        g.passed(inputs(7), 160.0);
        g.settle(8);
        assert!(!g.is_due(&inputs(8), 101.0));
        assert!(g.is_due(&inputs(9), 101.0));
    }

    #[test]
    fn an_earlier_wake_brings_the_deadline_forward() {
        let mut g = PassGate::default();
        g.passed(inputs(1), 160.0);
        g.wake_by(130.0);
        g.wake_by(150.0);
        assert!(!g.is_due(&inputs(1), 129.0));
        assert!(g.is_due(&inputs(1), 130.0));
    }
}
