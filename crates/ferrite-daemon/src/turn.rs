//! What woke the main loop, what a turn does ([`plan_turn`]), and how long each turn took: a
//! turn past [`SLOW_TURN`] is logged with what woke the loop and where the time went.

use std::time::{Duration, Instant};

use tracing::warn;

use crate::event::Event;
use crate::writer::SaveDone;

/// The longest a turn of the main loop should take: past it, GUIs wait visibly and the turn
/// is logged (with what woke it and where the time went), so a stall is seen and found.
pub(crate) const SLOW_TURN: Duration = Duration::from_millis(100);

/// Times one turn of the main loop.
pub(crate) struct TurnTimer {
    started: Instant,
    woke: &'static str,
}

impl TurnTimer {
    pub(crate) fn start(woke: &'static str) -> Self {
        TurnTimer {
            started: Instant::now(),
            woke,
        }
    }

    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The turn ended: one past [`SLOW_TURN`] is logged.
    pub(crate) fn end(self, dispatched: Duration, passed: bool) {
        let took = self.started.elapsed();
        if took > SLOW_TURN {
            warn!(
                "slow main loop turn: {:.0} ms ({}: {:.0} ms, then {}the save: {:.0} ms)",
                took.as_secs_f64() * 1e3,
                self.woke,
                dispatched.as_secs_f64() * 1e3,
                if passed { "a pass and " } else { "" },
                took.saturating_sub(dispatched).as_secs_f64() * 1e3
            );
        }
    }
}

/// The long pieces of work one turn does after its event. A batch of a scheduler reply's
/// tasks, a pass and the save's copy of the state each take tens of milliseconds at 10,000
/// tasks in a debug build; done in one turn, they add up past what a GUI waits for. So a
/// turn does at most one of the batch and the pass, and a turn that passed leaves the save
/// to the next: the GUI RPC calls that came meanwhile are answered between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TurnPlan {
    /// Take in the next batch of the reply being taken in.
    pub(crate) batch: bool,
    /// Run the pass (or the first pass's next stage).
    pub(crate) pass: bool,
    /// Save the state if the save is due.
    pub(crate) save: bool,
}

/// What the turn does, given whether a pass is due, whether a reply's tasks are being taken
/// in, and what the last turn did (`last`). A pass due goes first, unless the last turn
/// passed while a batch waited (a GUI asking for a pass at every turn does not hold a reply
/// back); the save waits one turn at most.
pub(crate) fn plan_turn(pass_due: bool, taking_in: bool, last: TurnPlan) -> TurnPlan {
    let pass = pass_due && !(taking_in && last.pass);
    TurnPlan {
        batch: taking_in && !pass,
        pass,
        save: !pass || !last.save,
    }
}

impl TurnPlan {
    /// The plan before the first turn: as if the last turn had saved and not passed.
    pub(crate) const START: TurnPlan = TurnPlan {
        batch: false,
        pass: false,
        save: true,
    };
}

/// What woke the main loop.
pub(crate) enum Woke {
    /// The earliest timer came (or a second passed).
    Timer,
    /// The writer thread finished a save (`None`: it has stopped).
    Saved(Option<SaveDone>),
    /// An event (`None`: every sender is gone).
    Event(Option<Event>),
}

impl Woke {
    /// What woke the loop, in a word for the log.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Woke::Timer => "timer",
            Woke::Saved(_) => "state file saved",
            Woke::Event(None) => "event channel closed",
            Woke::Event(Some(ev)) => match ev {
                Event::Shutdown(_) => "shutdown",
                Event::Reload => "reload",
                Event::BenchmarksDone(_) => "benchmarks",
                Event::GuiRpc(_) => "GUI RPC",
                Event::Project(_) => "scheduler operation",
                Event::Transfer(_) => "file transfer",
                Event::WebRpc(..) => "web RPC",
                Event::Info(_) => "news fetch",
                Event::ChildExited => "SIGCHLD",
                Event::AcctMgr(_) => "account manager",
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The turns a loop makes, each given whether a pass is due and a reply is being taken in.
    fn turns(inputs: &[(bool, bool)]) -> Vec<TurnPlan> {
        let mut last = TurnPlan::START;
        inputs
            .iter()
            .map(|&(pass_due, taking_in)| {
                last = plan_turn(pass_due, taking_in, last);
                last
            })
            .collect()
    }

    const fn p(batch: bool, pass: bool, save: bool) -> TurnPlan {
        TurnPlan { batch, pass, save }
    }

    #[test]
    fn a_pass_puts_the_save_off_to_the_next_turn() {
        assert_eq!(turns(&[(false, false)]), vec![p(false, false, true)]);
        assert_eq!(
            turns(&[(true, false), (false, false)]),
            vec![p(false, true, false), p(false, false, true)]
        );
    }

    #[test]
    fn a_batch_and_a_pass_never_share_a_turn() {
        // A pass falls due while a reply's tasks come in: its turn takes in no batch.
        let plan = turns(&[(false, true), (true, true), (false, true), (false, false)]);
        assert_eq!(
            plan,
            vec![
                p(true, false, true),
                p(false, true, false),
                p(true, false, true),
                p(false, false, true),
            ]
        );
        assert!(plan.iter().all(|t| !(t.batch && t.pass)));
    }

    #[test]
    fn passes_asked_for_at_every_turn_do_not_hold_a_reply_back() {
        let plan = turns(&[(true, true); 6]);
        assert_eq!(plan.iter().filter(|t| t.batch).count(), 3, "{plan:?}");
        assert_eq!(plan.iter().filter(|t| t.pass).count(), 3, "{plan:?}");
    }

    #[test]
    fn the_save_waits_one_turn_at_most() {
        // Passes in turn after turn: the save is put off after one pass, never after two.
        let plan = turns(&[(true, false); 5]);
        assert!(plan.iter().all(|t| t.pass));
        assert!(plan.windows(2).all(|w| w[0].save || w[1].save), "{plan:?}");
        // A turn after a pass that put the save off saves, pass or not.
        let plan = turns(&[(true, false), (true, false), (false, false)]);
        assert_eq!(plan[1], p(false, true, true));
    }
}
