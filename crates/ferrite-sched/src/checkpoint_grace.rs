//! Suspending at the next checkpoint.
//!
//! When computing is suspended for a reason that can wait (someone uses the computer, the
//! time-of-day window closed, no recent input), a running task that has checkpointed before is
//! left to run until it checkpoints again, for at most the grace time (`cc_config.xml`
//! `ferrite_checkpoint_grace`), so the CPU time since its last checkpoint is not put at risk.
//! The user's "suspend" waits too when the GUI asked for it (`set_run_mode` with Ferrite's
//! `<ferrite_at_checkpoint/>`). Urgent reasons (battery, disk, benchmarks, a plain "suspend",
//! …) stop tasks at once. When only GPU computing is suspended, a GPU task waits the same way
//! for the reasons that can wait there: the computer in use and the GPU temperature limit.
//!
//! The daemon notes each running task when the suspension is asked ([`Waiting`]) and asks
//! [`verdict`] on every tick with the task's latest checkpoint; all time is a parameter.

use crate::suspend::SuspendReason;

/// The suspension a running task is under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suspension {
    /// All computing is suspended, for this reason.
    Computing(SuspendReason),
    /// Only GPU computing is suspended, for this reason, and the task uses a GPU. The GPU
    /// temperature limit's hold is shown as [`SuspendReason::CpuThrottle`].
    Gpu(SuspendReason),
}

impl Suspension {
    /// The suspension a task is under when all computing is suspended for `cpu` and GPU
    /// computing for `gpu` (`None`: not suspended); `uses_gpu`: the task runs on a GPU.
    pub fn of_task(
        cpu: Option<SuspendReason>,
        gpu: Option<SuspendReason>,
        uses_gpu: bool,
    ) -> Option<Suspension> {
        match (cpu, gpu) {
            (Some(r), _) => Some(Suspension::Computing(r)),
            (None, Some(r)) if uses_gpu => Some(Suspension::Gpu(r)),
            _ => None,
        }
    }

    /// Whether this suspension may wait for the task's next checkpoint (`user_at_checkpoint`
    /// as in [`can_wait_for_checkpoint`]).
    pub fn can_wait(self, user_at_checkpoint: bool) -> bool {
        match self {
            Suspension::Computing(r) => can_wait_for_checkpoint(r, user_at_checkpoint),
            Suspension::Gpu(r) => gpu_can_wait_for_checkpoint(r),
        }
    }
}

/// Whether a suspension for `reason` may wait for the running tasks' next checkpoints;
/// `user_at_checkpoint`: the user's suspension (run mode "never") was asked to wait for them.
pub fn can_wait_for_checkpoint(reason: SuspendReason, user_at_checkpoint: bool) -> bool {
    match reason {
        SuspendReason::UserActive | SuspendReason::TimeOfDay | SuspendReason::NoRecentInput => true,
        SuspendReason::UserRequest => user_at_checkpoint,
        _ => false,
    }
}

/// Whether a GPU-only suspension for `reason` may wait for the GPU tasks' next checkpoints:
/// the computer in use (`run_gpu_if_user_active` off) and the GPU temperature limit
/// ([`SuspendReason::CpuThrottle`] there) can; the GPU run mode "never" and an exclusive GPU
/// app cannot (the GPU is wanted now).
pub fn gpu_can_wait_for_checkpoint(reason: SuspendReason) -> bool {
    matches!(
        reason,
        SuspendReason::UserActive | SuspendReason::CpuThrottle
    )
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
/// `checkpoint_cpu_now` CPU seconds, while it is under `suspension` (with
/// `user_at_checkpoint` as in [`can_wait_for_checkpoint`]) with a grace time of `grace_secs`
/// (0, negative or not a number: off).
pub fn verdict(
    suspension: Suspension,
    user_at_checkpoint: bool,
    grace_secs: f64,
    w: &Waiting,
    checkpoint_cpu_now: f64,
    now: f64,
) -> Verdict {
    // A NaN grace is off too.
    let grace_on = grace_secs > 0.0;
    if !suspension.can_wait(user_at_checkpoint) || !grace_on || w.checkpoint_cpu_at_ask <= 0.0 {
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
    use Suspension::{Computing, Gpu};

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
                verdict(Computing(r), false, 300.0, &w, 100.0, T0 + dt),
                Verdict::RunOn { until: T0 + 300.0 }
            );
        }
        // It checkpoints at 140 s of CPU: stopped, with the 30 s it had since 100 kept.
        assert_eq!(
            verdict(Computing(r), false, 300.0, &w, 140.0, T0 + 61.0),
            Verdict::Checkpointed { kept: 30.0 }
        );
    }

    #[test]
    fn the_grace_time_bounds_the_wait() {
        let w = noted(100.0, 130.0);
        let r = SuspendReason::UserActive;
        assert_eq!(
            verdict(Computing(r), false, 120.0, &w, 100.0, T0 + 119.0),
            Verdict::RunOn { until: T0 + 120.0 }
        );
        assert_eq!(
            verdict(Computing(r), false, 120.0, &w, 100.0, T0 + 120.0),
            Verdict::GraceOver
        );
        assert_eq!(
            verdict(Computing(r), false, 120.0, &w, 100.0, T0 + 5000.0),
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
                verdict(Computing(r), false, 300.0, &w, 100.0, T0),
                Verdict::StopNow,
                "{r:?}"
            );
        }
        let r = SuspendReason::NoRecentInput;
        for grace in [0.0, -5.0, f64::NAN] {
            assert_eq!(
                verdict(Computing(r), false, grace, &w, 100.0, T0),
                Verdict::StopNow
            );
        }
        assert_eq!(
            verdict(Computing(r), false, 300.0, &noted(0.0, 50.0), 0.0, T0),
            Verdict::StopNow
        );
    }

    #[test]
    fn the_users_suspend_waits_only_when_asked_to() {
        let w = noted(100.0, 130.0);
        let r = SuspendReason::UserRequest;
        assert!(can_wait_for_checkpoint(r, true));
        assert_eq!(
            verdict(Computing(r), true, 300.0, &w, 100.0, T0 + 10.0),
            Verdict::RunOn { until: T0 + 300.0 }
        );
        assert_eq!(
            verdict(Computing(r), true, 300.0, &w, 112.0, T0 + 20.0),
            Verdict::Checkpointed { kept: 30.0 }
        );
        assert_eq!(
            verdict(Computing(r), false, 300.0, &w, 100.0, T0),
            Verdict::StopNow
        );
        // The option is for the user's suspension only: urgent reasons still act at once.
        for urgent in [SuspendReason::Batteries, SuspendReason::DiskSize] {
            assert!(!can_wait_for_checkpoint(urgent, true), "{urgent:?}");
            assert_eq!(
                verdict(Computing(urgent), true, 300.0, &w, 100.0, T0),
                Verdict::StopNow
            );
        }
    }

    #[test]
    fn a_gpu_task_waits_for_its_checkpoint_when_only_the_gpu_is_held_for_a_reason_that_can_wait() {
        let w = noted(100.0, 130.0);
        // The GPU temperature limit (shown as "CPU throttled") and the computer in use.
        for r in [SuspendReason::CpuThrottle, SuspendReason::UserActive] {
            assert!(gpu_can_wait_for_checkpoint(r), "{r:?}");
            assert_eq!(
                verdict(Gpu(r), false, 300.0, &w, 100.0, T0 + 10.0),
                Verdict::RunOn { until: T0 + 300.0 },
                "{r:?}"
            );
            assert_eq!(
                verdict(Gpu(r), false, 300.0, &w, 140.0, T0 + 20.0),
                Verdict::Checkpointed { kept: 30.0 },
                "{r:?}"
            );
            assert_eq!(
                verdict(Gpu(r), false, 300.0, &w, 100.0, T0 + 300.0),
                Verdict::GraceOver,
                "{r:?}"
            );
        }
        // The GPU run mode "never" and an exclusive GPU app want the GPU now, whatever the
        // user's at-checkpoint option (it is for the run mode only).
        for r in [SuspendReason::UserRequest, SuspendReason::ExclusiveApp] {
            assert!(!gpu_can_wait_for_checkpoint(r), "{r:?}");
            assert_eq!(
                verdict(Gpu(r), true, 300.0, &w, 100.0, T0),
                Verdict::StopNow,
                "{r:?}"
            );
        }
        // The CPU duty cycle stays urgent when all computing is suspended for it.
        assert_eq!(
            verdict(
                Computing(SuspendReason::CpuThrottle),
                false,
                300.0,
                &w,
                100.0,
                T0
            ),
            Verdict::StopNow
        );
    }

    #[test]
    fn the_suspension_of_a_task_is_all_computings_else_the_gpus_for_a_gpu_task() {
        use SuspendReason::{CpuThrottle, TimeOfDay, UserActive};
        assert_eq!(Suspension::of_task(None, None, true), None);
        assert_eq!(
            Suspension::of_task(Some(TimeOfDay), Some(CpuThrottle), true),
            Some(Computing(TimeOfDay))
        );
        assert_eq!(
            Suspension::of_task(None, Some(UserActive), true),
            Some(Gpu(UserActive))
        );
        // A CPU task goes on while only the GPU is suspended.
        assert_eq!(Suspension::of_task(None, Some(UserActive), false), None);
        assert_eq!(
            Suspension::of_task(Some(TimeOfDay), None, false),
            Some(Computing(TimeOfDay))
        );
    }
}
