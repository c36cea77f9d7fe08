//! Finishing jobs (the app called `boinc_finish` and only waits to exit): the run list keeps
//! them, with their RAM and place, but counts their CPUs as free; a job that reports it is
//! done but is not marked finishing keeps its CPU. Driven in virtual time: short jobs back to
//! back with the BOINC API's two-second wait at the end of each.

use ferrite_sched::*;

const DAY: f64 = 86400.0;
const T0: f64 = 1.7e9;

/// `ncpus` CPUs, one project with a one-CPU app, `n` jobs of `secs` seconds each.
fn world(ncpus: u32, n: u32, secs: f64) -> World {
    let mut w = World::new(Host::cpu_only(ncpus, 1e9, 8e9));
    w.prefs.work_buf_min_days = 0.0;
    w.prefs.work_buf_additional_days = 0.0;
    let p = w.add_project(Project::new("P", 1.0));
    let a = w.add_app(App::new(p, "a"));
    let v = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    for i in 0..n {
        // Received one after another: the project offers them in this order.
        let j = Job::new(
            JobId(i),
            p,
            v,
            secs * 1e9,
            T0 - 1000.0 + f64::from(i),
            T0 + 30.0 * DAY,
        );
        w.add_job(j);
    }
    w
}

fn set_running(w: &mut World, i: usize, since: f64) {
    let j = &mut w.jobs[i];
    j.state = JobState::Running;
    j.run_started_at = Some(since);
    j.elapsed = 2.0;
    j.fraction_done = 1.0;
    j.elapsed_at_fraction = 2.0;
}

fn reasons(out: &PassOutput) -> Vec<(JobId, RunReason)> {
    out.run.run.iter().map(|e| (e.job, e.reason)).collect()
}

#[test]
fn a_finishing_job_keeps_its_place_but_not_its_cpu() {
    let mut w = world(1, 2, 2.0);
    set_running(&mut w, 0, T0 - 2.0);
    let mut s = Scheduler::new(Policy::default());

    // Done computing but not known to be finishing (it may still use the CPU): it keeps it.
    let out = s.pass(&w, T0);
    assert_eq!(reasons(&out), vec![(JobId(0), RunReason::TimeSlice)]);
    assert_eq!(out.run.idle_cpus, 0.0);

    // Finishing: it stays in the run list (not preempted, so nobody stops or quits it), and
    // the next job gets the CPU.
    w.jobs[0].finishing = true;
    let out = s.pass(&w, T0 + 0.1);
    assert_eq!(
        reasons(&out),
        vec![
            (JobId(0), RunReason::Finishing),
            (JobId(1), RunReason::Priority)
        ]
    );
    assert!(out.run.preempt.is_empty(), "{:?}", out.run.preempt);
    assert_eq!(out.run.idle_cpus, 0.0);
    assert!(RunReason::Finishing
        .describe()
        .contains("CPUs are counted free"));

    // It uses CPU again (the daemon clears the flag): the CPU is its own once more, and the
    // job started meanwhile is the one that waits (suspended, never having checkpointed).
    w.jobs[0].finishing = false;
    set_running(&mut w, 1, T0 + 0.1);
    w.jobs[1].elapsed = 0.1;
    w.jobs[1].fraction_done = 0.05;
    w.jobs[1].elapsed_at_fraction = 0.1;
    let out = s.pass(&w, T0 + 0.2);
    assert_eq!(out.run.run.len(), 1, "{:?}", reasons(&out));
    assert_eq!(out.run.preempt.len(), 1, "{:?}", out.run.preempt);
}

#[test]
fn a_finishing_job_still_holds_its_memory() {
    let mut w = world(2, 2, 2.0);
    let budget = w.host.ram_bytes * w.prefs.ram_frac(w.user_active);
    set_running(&mut w, 0, T0 - 2.0);
    w.jobs[0].finishing = true;
    w.jobs[0].working_set_bytes = 0.6 * budget;
    w.jobs[1].working_set_bytes = 0.6 * budget;
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert_eq!(reasons(&out), vec![(JobId(0), RunReason::Finishing)]);
    assert!(
        matches!(
            out.run.skipped[..],
            [(JobId(1), SkipReason::Memory { need, .. })] if need == 0.6 * budget
        ),
        "{:?}",
        out.run.skipped
    );
    // With room for both (the second one ran before and measured less), it runs beside it.
    w.jobs[1].state = JobState::Preempted { in_memory: false };
    w.jobs[1].elapsed = 1.0;
    w.jobs[1].working_set_bytes = 0.3 * budget;
    let out = s.pass(&w, T0);
    assert_eq!(out.run.run.len(), 2);
}

#[test]
fn the_flag_means_nothing_for_a_job_that_does_not_run() {
    let mut w = world(1, 2, 2.0);
    set_running(&mut w, 0, T0 - 2.0);
    w.jobs[0].state = JobState::Preempted { in_memory: true };
    w.jobs[0].finishing = true;
    assert!(!w.jobs[0].is_finishing());
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert!(out.run.run.iter().all(|e| e.reason != RunReason::Finishing));
    assert_eq!(out.run.run.len(), 1);
}

/// A virtual-time run of `n` jobs that compute `secs` each, then wait `finish_wait` for their
/// process to exit, on `ncpus` CPUs, passes every `step` seconds (and whenever a job changes
/// phase, as the daemon does on an exit). `mark` says whether the waiting jobs are marked
/// finishing. Returns the makespan and the most jobs that computed at once.
fn back_to_back(ncpus: u32, n: u32, secs: f64, finish_wait: f64, mark: bool) -> (f64, usize) {
    let mut w = world(ncpus, n, secs);
    let mut s = Scheduler::new(Policy::default());
    let step = 0.05;
    let mut now = T0;
    // Per job: wall time its computing ends, wall time its process exits.
    let mut ends: Vec<Option<(f64, f64)>> = vec![None; n as usize];
    let mut most_computing = 0;
    while now < T0 + 1000.0 {
        for (j, end) in w.jobs.iter_mut().zip(&ends) {
            let Some((computed, exits)) = *end else {
                continue;
            };
            if !j.state.is_unfinished() {
                continue;
            }
            let started = j.run_started_at.unwrap_or(now);
            j.elapsed = now - started;
            j.fraction_done = ((now - started) / secs).min(1.0);
            j.elapsed_at_fraction = j.elapsed;
            if now >= exits {
                j.state = JobState::Finished {
                    completed_time: now,
                    ready_to_report: false,
                };
                j.finishing = false;
            } else if now >= computed {
                j.finishing = mark;
            }
        }
        if w.jobs.iter().all(|j| !j.state.is_unfinished()) {
            return (now - T0, most_computing);
        }
        let out = s.pass(&w, now);
        for e in &out.run.run {
            let i = w.jobs.iter().position(|j| j.id == e.job).expect("job");
            if w.jobs[i].state == JobState::Unstarted {
                w.jobs[i].state = JobState::Running;
                w.jobs[i].run_started_at = Some(now);
                ends[i] = Some((now + secs, now + secs + finish_wait));
            }
        }
        for p in &out.run.preempt {
            assert!(
                !w.jobs[p.job.0 as usize].is_finishing(),
                "a finishing job was preempted: {p:?}"
            );
        }
        let computing = (0..n as usize)
            .filter(|&i| w.jobs[i].is_running() && ends[i].is_some_and(|(c, _)| now < c))
            .count();
        most_computing = most_computing.max(computing);
        now += step;
    }
    panic!("the jobs did not finish");
}

#[test]
fn short_jobs_run_back_to_back_while_the_previous_ones_exit() {
    // 16 jobs of 2 s on 4 CPUs, each waiting 2 s after computing (boinc_finish).
    let (marked, most) = back_to_back(4, 16, 2.0, 2.0, true);
    let (unmarked, most_unmarked) = back_to_back(4, 16, 2.0, 2.0, false);
    // Four waves of computing, then the last wave's wait: 4 × 2 + 2 s (plus the steps).
    assert!(marked <= 10.5, "makespan {marked}");
    // Without the flag every job holds its CPU through its wait: 4 × (2 + 2) s.
    assert!(unmarked >= 16.0, "makespan {unmarked}");
    // Never more jobs computing than CPUs.
    assert!(most <= 4 && most_unmarked <= 4, "{most} {most_unmarked}");
}
