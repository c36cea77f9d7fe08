//! Runtime estimates of jobs (reference §1.4): the static estimate from FLOPs and speed, the
//! dynamic blend with fraction done for running jobs, and what remains.

use crate::model::{Job, World};

/// Static duration estimate in seconds: `fpops_est / flops × DCF`.
pub fn static_duration(world: &World, job: &Job) -> f64 {
    let v = world.version_of(job);
    let flops = v.effective_flops(world.host.p_fpops);
    let dcf = world.projects[job.project.index()].dcf;
    let dcf = if dcf > 0.0 { dcf } else { 1.0 };
    (job.fpops_est.max(0.0) / flops) * dcf
}

/// Estimated total duration (elapsed + remaining) of a job, BOINC's `est_dur`.
pub fn estimated_duration(world: &World, job: &Job) -> f64 {
    let e = job.elapsed.max(0.0);
    let f = job.fraction_done;
    let mut w = static_duration(world, job);
    if f >= 1.0 {
        return e;
    }
    if f <= 0.0 {
        if e > 0.0 && w > 0.0 {
            // Pretend progress follows 1 - exp(-E/W) so the estimate grows with elapsed time.
            let fp = 1.0 - (-e / w).exp();
            return if fp > 0.0 { e / fp } else { w.max(e) };
        }
        return w;
    }
    let exact = world.apps[world.version_of(job).app.index()].fraction_done_exact;
    let over = e > w;
    if over {
        w = e;
    }
    let ef = if job.elapsed_at_fraction > 0.0 {
        job.elapsed_at_fraction
    } else {
        e
    };
    let d = ef / f;
    if exact || over {
        d
    } else {
        f * d + (1.0 - f) * w
    }
}

/// Estimated remaining run time in seconds (never negative).
pub fn remaining_secs(world: &World, job: &Job) -> f64 {
    if !job.state.is_unfinished() {
        return 0.0;
    }
    (estimated_duration(world, job) - job.elapsed.max(0.0)).max(0.0)
}

/// The fraction done the GUI shows of a running task (the official client's
/// `ACTIVE_TASK::write_gui`): what the app reported, unless it reported nothing (≤ 0) or
/// nonsense (> 1) and more than a minute has elapsed; then `1 - exp(-elapsed / est)`
/// with `est = fpops_est / flops` (the workunit's FLOPs estimate over the app version's
/// speed, no correction factor), which rises steadily towards 1.
///
/// Only for display (GUI RPC, metrics): the scheduling estimates keep the reported
/// fraction ([`estimated_duration`] makes its own guess from the static estimate, as
/// BOINC's `est_dur` does).
pub fn shown_fraction_done(reported: f64, elapsed: f64, fpops_est: f64, flops: f64) -> f64 {
    if (reported > 0.0 && reported <= 1.0) || elapsed <= 60.0 {
        return reported;
    }
    let est = fpops_est / flops;
    let x = elapsed / est;
    if x.is_nan() {
        return reported;
    }
    1.0 - (-x).exp()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    fn world() -> (World, Job) {
        let mut w = World::new(Host::cpu_only(1, 1e9, 1e9));
        let p = w.add_project(Project::new("p", 1.0));
        let a = w.add_app(App::new(p, "a"));
        let v = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
        let j = Job::new(JobId(1), p, v, 3600e9, 0.0, 1e6);
        (w, j)
    }

    #[test]
    fn unstarted_job_uses_static_estimate() {
        let (w, j) = world();
        assert!((remaining_secs(&w, &j) - 3600.0).abs() < 1e-9);
    }

    #[test]
    fn running_job_blends_dynamic_estimate_by_progress() {
        let (w, mut j) = world();
        // Half done after 1000 s: dynamic estimate 2000 s, static 3600 s, weight 0.5 each.
        j.state = JobState::Running;
        j.elapsed = 1000.0;
        j.fraction_done = 0.5;
        j.elapsed_at_fraction = 1000.0;
        assert!((estimated_duration(&w, &j) - 2800.0).abs() < 1e-9);
        assert!((remaining_secs(&w, &j) - 1800.0).abs() < 1e-9);
    }

    #[test]
    fn job_past_its_estimate_trusts_progress() {
        let (w, mut j) = world();
        j.state = JobState::Running;
        j.elapsed = 4000.0;
        j.fraction_done = 0.8;
        j.elapsed_at_fraction = 4000.0;
        assert!((estimated_duration(&w, &j) - 5000.0).abs() < 1e-9);
    }

    #[test]
    fn a_task_without_reported_progress_shows_a_rising_guess_after_a_minute() {
        // 3600 s of work at the version's speed.
        let (fpops, flops) = (3.6e12, 1e9);
        let shown =
            |reported: f64, elapsed: f64| shown_fraction_done(reported, elapsed, fpops, flops);
        // The first minute: what the app said, even nothing.
        assert_eq!(shown(0.0, 0.0), 0.0);
        assert_eq!(shown(0.0, 60.0), 0.0);
        // Then 1 - exp(-elapsed / estimate), rising with (virtual) time.
        let mut last = 0.0;
        for elapsed in [61.0, 600.0, 1800.0, 3600.0, 7200.0, 36000.0] {
            let f = shown(0.0, elapsed);
            assert!(
                (f - (1.0 - (-elapsed / 3600.0f64).exp())).abs() < 1e-12,
                "{elapsed}: {f}"
            );
            assert!(f > last && f < 1.0, "{elapsed}: {f}");
            last = f;
        }
        assert!((shown(0.0, 3600.0) - 0.632_120_558_8).abs() < 1e-9);
        // A fraction above 1 is replaced too; a sane one is kept.
        assert!((shown(1.5, 3600.0) - 0.632_120_558_8).abs() < 1e-9);
        assert_eq!(shown(1.5, 30.0), 1.5);
        assert_eq!(shown(0.25, 7200.0), 0.25);
        assert_eq!(shown(1.0, 7200.0), 1.0);
        // No estimate: a job of no FLOPs is all but done; an unknown speed shows nothing.
        assert_eq!(shown_fraction_done(0.0, 120.0, 0.0, 1e9), 1.0);
        assert_eq!(shown_fraction_done(0.0, 120.0, 3.6e12, 0.0), 0.0);
        assert_eq!(shown_fraction_done(0.0, 120.0, 0.0, 0.0), 0.0);
    }
}
