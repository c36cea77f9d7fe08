//! Suspending at the next checkpoint.
//!
//! When computing is suspended for a reason that can wait (someone uses the computer, the
//! time-of-day window closed, no recent input), a running task that has checkpointed before is
//! left to run until it checkpoints again, for at most the grace time (`cc_config.xml`
//! `ferrite_checkpoint_grace`), so the CPU time since its last checkpoint is not put at risk.
//! The user's "suspend" waits too when the GUI asked for it (`set_run_mode` with Ferrite's
//! `<ferrite_at_checkpoint/>`). Urgent reasons (battery, disk, benchmarks, a plain "suspend",
//! …) stop tasks at once.
//!
//! The daemon notes each running task when the suspension is asked ([`Waiting`]) and asks
//! [`verdict`] on every tick with the task's latest checkpoint; all time is a parameter.

use crate::suspend::SuspendReason;

/// Whether a suspension for `reason` may wait for the running tasks' next checkpoints;
/// `user_at_checkpoint`: the user's suspension (run mode "never") was asked to wait for them.
pub fn can_wait_for_checkpoint(reason: SuspendReason, user_at_checkpoint: bool) -> bool {
    match reason {
        SuspendReason::UserActive | SuspendReason::TimeOfDay | SuspendReason::NoRecentInput => true,
        SuspendReason::UserRequest => user_at_checkpoint,
        _ => false,
    }
}

/// A running task when computing was suspended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Waiting {
    /// When the suspension was asked (Unix seconds).
    pub asked_at: f64,
    /// The task's CPU time at its last checkpoint then (0: it never checkpointed).
    pub checkpoint_cpu_at_ask: f64,
    /// The task's CPU time then.
    pub cpu_at_ask: f64,
}

/// What to do with a running task while computing is suspended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Stop it now: the reason is urgent, the grace time is off, or the task never
    /// checkpointed (nothing says it will).
    StopNow,
    /// Let it run until it checkpoints, at the latest until `until` (Unix seconds).
    RunOn {
        /// The end of the grace time.
        until: f64,
    },
    /// It checkpointed since the suspension was asked: stop it. `kept` is the CPU time it
    /// had run since its previous checkpoint when the suspension was asked, seconds: what
    /// would have been lost had it been stopped then and not restarted from memory.
    Checkpointed {
        /// CPU seconds now in a checkpoint.
        kept: f64,
    },
    /// The grace time ended without a new checkpoint: stop it.
    GraceOver,
}

/// The verdict for a task noted as `w`, whose last checkpoint is now at
/// `checkpoint_cpu_now` CPU seconds, while computing is suspended for `reason` (with
/// `user_at_checkpoint` as in [`can_wait_for_checkpoint`]) with a grace time of `grace_secs`
/// (0, negative or not a number: off).
pub fn verdict(
    reason: SuspendReason,
    user_at_checkpoint: bool,
    grace_secs: f64,
    w: &Waiting,
    checkpoint_cpu_now: f64,
    now: f64,
) -> Verdict {
    // A NaN grace is off too.
    let grace_on = grace_secs > 0.0;
    if !can_wait_for_checkpoint(reason, user_at_checkpoint)
        || !grace_on
        || w.checkpoint_cpu_at_ask <= 0.0
    {
        return Verdict::StopNow;
    }
    if checkpoint_cpu_now > w.checkpoint_cpu_at_ask {
        return Verdict::Checkpointed {
            kept: (w.cpu_at_ask - w.checkpoint_cpu_at_ask).max(0.0),
        };
    }
    let until = w.asked_at + grace_secs;
    if now >= until {
        Verdict::GraceOver
    } else {
        Verdict::RunOn { until }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: f64 = 1_000_000.0;

    fn noted(cp: f64, cpu: f64) -> Waiting {
        Waiting {
            asked_at: T0,
            checkpoint_cpu_at_ask: cp,
            cpu_at_ask: cpu,
        }
    }

    #[test]
    fn a_task_that_checkpoints_runs_on_until_its_next_checkpoint() {
        let w = noted(100.0, 130.0);
        let r = SuspendReason::TimeOfDay;
        // Seconds go by in virtual time; no new checkpoint yet.
        for dt in [0.0, 10.0, 59.9] {
            assert_eq!(
                verdict(r, false, 300.0, &w, 100.0, T0 + dt),
                Verdict::RunOn { until: T0 + 300.0 }
            );
        }
        // It checkpoints at 140 s of CPU: stopped, with the 30 s it had since 100 kept.
        assert_eq!(
            verdict(r, false, 300.0, &w, 140.0, T0 + 61.0),
            Verdict::Checkpointed { kept: 30.0 }
        );
    }

    #[test]
    fn the_grace_time_bounds_the_wait() {
        let w = noted(100.0, 130.0);
        let r = SuspendReason::UserActive;
        assert_eq!(
            verdict(r, false, 120.0, &w, 100.0, T0 + 119.0),
            Verdict::RunOn { until: T0 + 120.0 }
        );
        assert_eq!(
            verdict(r, false, 120.0, &w, 100.0, T0 + 120.0),
            Verdict::GraceOver
        );
        assert_eq!(
            verdict(r, false, 120.0, &w, 100.0, T0 + 5000.0),
            Verdict::GraceOver
        );
    }

    #[test]
    fn urgent_reasons_an_off_grace_and_tasks_without_checkpoint_stop_at_once() {
        let w = noted(100.0, 130.0);
        for r in [
            SuspendReason::Batteries,
            SuspendReason::UserRequest,
            SuspendReason::DiskSize,
            SuspendReason::Benchmarks,
            SuspendReason::CpuThrottle,
            SuspendReason::ExclusiveApp,
            SuspendReason::CpuUsage,
            SuspendReason::InitialDelay,
        ] {
            assert!(!can_wait_for_checkpoint(r, false), "{r:?}");
            assert_eq!(
                verdict(r, false, 300.0, &w, 100.0, T0),
                Verdict::StopNow,
                "{r:?}"
            );
        }
        let r = SuspendReason::NoRecentInput;
        for grace in [0.0, -5.0, f64::NAN] {
            assert_eq!(verdict(r, false, grace, &w, 100.0, T0), Verdict::StopNow);
        }
        assert_eq!(
            verdict(r, false, 300.0, &noted(0.0, 50.0), 0.0, T0),
            Verdict::StopNow
        );
    }

    #[test]
    fn the_users_suspend_waits_only_when_asked_to() {
        let w = noted(100.0, 130.0);
        let r = SuspendReason::UserRequest;
        assert!(can_wait_for_checkpoint(r, true));
        assert_eq!(
            verdict(r, true, 300.0, &w, 100.0, T0 + 10.0),
            Verdict::RunOn { until: T0 + 300.0 }
        );
        assert_eq!(
            verdict(r, true, 300.0, &w, 112.0, T0 + 20.0),
            Verdict::Checkpointed { kept: 30.0 }
        );
        assert_eq!(verdict(r, false, 300.0, &w, 100.0, T0), Verdict::StopNow);
        // The option is for the user's suspension only: urgent reasons still act at once.
        for urgent in [SuspendReason::Batteries, SuspendReason::DiskSize] {
            assert!(!can_wait_for_checkpoint(urgent, true), "{urgent:?}");
            assert_eq!(
                verdict(urgent, true, 300.0, &w, 100.0, T0),
                Verdict::StopNow
            );
        }
    }
}
