//! The memory limits of the run list over passes in virtual time: a task that does not fit is
//! skipped (the next one that fits runs) rather than started and stopped over and over, and
//! the swap limit (`vm_max_used_pct`) holds back a task whose swap use does not fit.

use std::collections::HashMap;

use crate::driver::Driver;
use ferrite_sched::*;

const H: f64 = 3600.0;
const DAY: f64 = 86400.0;
const T0: f64 = 1.7e9;

/// `ncpus` CPUs and 8 GB of RAM, someone at the computer (`ram_max_used_busy_pct` 50 %: 4 GB),
/// projects A and B with one CPU app each.
fn world(ncpus: u32) -> (World, AppVersionId, AppVersionId) {
    let mut w = World::new(Host::cpu_only(ncpus, 1e9, 8e9));
    w.user_active = true;
    w.prefs.work_buf_min_days = 0.0;
    w.prefs.work_buf_additional_days = 0.0;
    let a = w.add_project(Project::new("A", 1.0));
    let b = w.add_project(Project::new("B", 1.0));
    let aa = w.add_app(App::new(a, "a"));
    let ba = w.add_app(App::new(b, "b"));
    let va = w.add_app_version(AppVersion::cpu(aa, a, 1.0, 1e9));
    let vb = w.add_app_version(AppVersion::cpu(ba, b, 1.0, 1e9));
    (w, va, vb)
}

fn is_memory(r: &PreemptReason) -> bool {
    matches!(r, PreemptReason::Skipped(SkipReason::Memory { .. }))
}

/// A's tasks claim 0.5 GB (`rsc_memory_bound`) but use 2.2 GB once they run; the limit leaves
/// room for one of them beside B's small tasks. The first guess is wrong once (two of A's
/// tasks start, one is stopped within its time slice); after that A's unstarted tasks are estimated at the 2.2 GB
/// their version was measured at, so none is started only to be stopped, and B's tasks keep
/// the other CPUs busy.
#[test]
fn a_task_over_the_ram_limit_is_skipped_not_started_and_stopped_in_a_loop() {
    let (w, va, vb) = world(4);
    let mut d = Driver::new(w, Policy::default(), T0, 600.0);
    for _ in 0..6 {
        let id = d.add_job(va, 2.0 * H, 30.0 * DAY);
        let j = d.world.jobs.iter_mut().find(|j| j.id == id).expect("added");
        j.working_set_bytes = 0.5e9;
    }
    for _ in 0..12 {
        let id = d.add_job(vb, 2.0 * H, 30.0 * DAY);
        let j = d.world.jobs.iter_mut().find(|j| j.id == id).expect("added");
        j.working_set_bytes = 0.2e9;
    }
    let period = d.world.prefs.sched_period();
    let mut memory_stops = Vec::new();
    let mut waits = 0;
    while d.now < T0 + 12.0 * H {
        let b_waiting = d
            .world
            .jobs
            .iter()
            .any(|j| j.app_version == vb && !j.started());
        let now = d.now;
        let started_at: HashMap<JobId, f64> = d
            .world
            .jobs
            .iter()
            .filter(|j| j.is_running())
            .filter_map(|j| Some((j.id, j.run_started_at?)))
            .collect();
        let out = d.step_once();
        // A task stopped for memory before its time slice is over: started for nothing.
        for p in out.run.preempt.iter().filter(|p| is_memory(&p.reason)) {
            let ran = now - started_at[&p.job];
            if ran < period {
                memory_stops.push((now - T0, p.job, ran));
            }
        }
        for (id, s) in &out.run.skipped {
            if let SkipReason::Memory { need, .. } = s {
                // Only A's tasks wait, at their measured size.
                assert_eq!(*need, 2.2e9, "{id:?}: {s:?}");
                waits += 1;
            }
        }
        if b_waiting {
            assert_eq!(out.run.idle_cpus, 0.0, "idle CPUs at {}", d.now - T0);
        }
        // What the running tasks of A measure.
        for j in d.world.jobs.iter_mut() {
            if j.app_version == va && j.started() {
                j.working_set_bytes = 2.2e9;
            }
        }
    }
    assert!(
        memory_stops.len() <= 1,
        "stopped for memory within their time slice (at, task, ran): {memory_stops:?}"
    );
    assert!(waits > 0, "no task of A ever waited for memory");
    let a_done = d.done.iter().filter(|x| x.project == ProjectId(0)).count();
    assert!(a_done >= 3, "A finished {a_done} tasks");
}

/// On a host with swap, a task whose measured swap use does not fit in `vm_max_used_pct` of
/// it waits, and so do its version's unstarted tasks (estimated at that use); without swap
/// nothing is checked.
#[test]
fn the_swap_limit_holds_back_a_task_whose_swap_does_not_fit() {
    let (mut w, va, vb) = world(2);
    w.host.swap_bytes = 2e9;
    w.prefs.vm_max_used_pct = 50.0;
    let pa = w.app_versions[va.index()].project;
    let pb = w.app_versions[vb.index()].project;
    let mut big = Job::new(JobId(1), pa, va, 10.0 * H * 1e9, T0 - DAY, T0 + 30.0 * DAY);
    big.state = JobState::Preempted { in_memory: false };
    big.elapsed = H;
    big.checkpoint_elapsed = H;
    big.working_set_bytes = 0.1e9;
    big.swap_bytes = 1.5e9;
    w.add_job(big);
    let mut next = Job::new(JobId(2), pa, va, H * 1e9, T0 - DAY + 1.0, T0 + 30.0 * DAY);
    next.working_set_bytes = 0.1e9;
    w.add_job(next);
    let mut small = Job::new(JobId(3), pb, vb, H * 1e9, T0 - DAY, T0 + 30.0 * DAY);
    small.working_set_bytes = 0.1e9;
    w.add_job(small);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let run: Vec<JobId> = out.run.run.iter().map(|e| e.job).collect();
    assert_eq!(run, vec![JobId(3)]);
    for id in [JobId(1), JobId(2)] {
        assert!(
            out.run.skipped.iter().any(|(j, r)| *j == id
                && *r
                    == SkipReason::Swap {
                        need: 1.5e9,
                        left: 1e9,
                        pct: 50.0
                    }),
            "{id:?}: {:?}",
            out.run.skipped
        );
    }
    w.host.swap_bytes = 0.0;
    let out = Scheduler::new(Policy::default()).pass(&w, T0);
    let mut run: Vec<JobId> = out.run.run.iter().map(|e| e.job).collect();
    run.sort();
    assert_eq!(run, vec![JobId(1), JobId(3)]);
}
