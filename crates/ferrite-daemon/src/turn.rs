//! What woke the main loop, and how long each turn took: a turn past [`SLOW_TURN`] is logged
//! with what woke the loop and where the time went.

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
