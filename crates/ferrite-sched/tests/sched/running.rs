//! Run-list enforcement rules through the public API: time slices end at checkpoints,
//! deadlines preempt, leave-in-memory vs quit, GPU-first CPU commitment, memory, rr-only.

use ferrite_sched::*;

const H: f64 = 3600.0;
const DAY: f64 = 86400.0;
const T0: f64 = 1.7e9;

/// One CPU, projects A and B (CPU apps). A's job 1 is running since `started`.
fn two_projects() -> (World, AppVersionId, AppVersionId) {
    let mut w = World::new(Host::cpu_only(1, 1e9, 8e9));
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

fn running(id: u32, w: &World, v: AppVersionId, started: f64, last_checkpoint: Option<f64>) -> Job {
    let p = w.app_versions[v.index()].project;
    let mut j = Job::new(JobId(id), p, v, 10.0 * H * 1e9, T0 - DAY, T0 + 30.0 * DAY);
    j.state = JobState::Running;
    j.run_started_at = Some(started);
    j.elapsed = 2.0 * H;
    j.fraction_done = 0.2;
    j.elapsed_at_fraction = j.elapsed;
    j.checkpoint_elapsed = if last_checkpoint.is_some() {
        j.elapsed - 60.0
    } else {
        0.0
    };
    j.last_checkpoint_time = last_checkpoint;
    j
}

/// A has used the CPU for a day, so B is more deserving.
fn scheduler_favouring_b(w: &World) -> Scheduler {
    let mut s = Scheduler::new(Policy::default());
    let mut t = T0 - DAY;
    while t < T0 {
        s.account(w, t);
        t += 60.0;
    }
    s
}

#[test]
fn slice_lasts_until_the_first_checkpoint_after_the_period() {
    let (mut w, va, vb) = two_projects();
    w.add_job(Job::new(
        JobId(2),
        w.app_versions[vb.index()].project,
        vb,
        H * 1e9,
        T0,
        T0 + 30.0 * DAY,
    ));
    // Started 2 h ago, last checkpoint 1.5 h ago (before the period ended): overdue, keeps running.
    w.add_job(running(1, &w, va, T0 - 2.0 * H, Some(T0 - 1.5 * H)));
    let mut s = scheduler_favouring_b(&w);
    let out = s.pass(&w, T0);
    assert_eq!(out.run.run.len(), 1);
    assert_eq!(
        (out.run.run[0].job, out.run.run[0].reason),
        (JobId(1), RunReason::TimeSlice)
    );
    assert!(out.run.preempt.is_empty());
    // After a checkpoint past the period, B's job takes over and A's job quits.
    w.jobs[1].last_checkpoint_time = Some(T0 - 60.0);
    let out = s.pass(&w, T0 + 1.0);
    assert_eq!(
        (out.run.run[0].job, out.run.run[0].reason),
        (JobId(2), RunReason::Priority)
    );
    assert_eq!(
        out.run.preempt,
        vec![PreemptEntry {
            job: JobId(1),
            reason: PreemptReason::LowerPriority,
            action: PreemptAction::Quit
        }]
    );
    // With "leave apps in memory" it is suspended instead.
    w.prefs.leave_apps_in_memory = true;
    let out = s.pass(&w, T0 + 2.0);
    assert_eq!(out.run.preempt[0].action, PreemptAction::KeepInMemory);
    // The next wakeup is at most a minute away.
    assert!(out.next_wakeup > T0 + 2.0 && out.next_wakeup <= T0 + 62.0);
}

#[test]
fn never_checkpointed_job_is_kept_in_memory_when_preempted() {
    let (mut w, va, vb) = two_projects();
    let mut j = running(1, &w, va, T0 - 0.5 * H, None);
    j.report_deadline = T0 + 30.0 * DAY;
    w.add_job(j);
    // B's job is endangered: it preempts A's open slice; A never checkpointed → kept in memory.
    let pb = w.app_versions[vb.index()].project;
    w.add_job(Job::new(JobId(2), pb, vb, 2.0 * H * 1e9, T0, T0 + 2.5 * H));
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert_eq!(out.sim.missed_ids(&w), vec![JobId(2)]);
    assert_eq!(
        (out.run.run[0].job, out.run.run[0].reason),
        (JobId(2), RunReason::Deadline)
    );
    assert_eq!(
        out.run.preempt,
        vec![PreemptEntry {
            job: JobId(1),
            reason: PreemptReason::DeadlineJob,
            action: PreemptAction::KeepInMemory
        }]
    );
    // With EDF off (--cpu_sched_rr_only) the open slice is kept.
    let mut rr = Scheduler::new(Policy::rr_only());
    let out = rr.pass(&w, T0);
    assert_eq!(
        (out.run.run[0].job, out.run.run[0].reason),
        (JobId(1), RunReason::TimeSlice)
    );
}

#[test]
fn a_part_time_host_runs_every_job_earliest_deadline_first() {
    let (mut w, va, vb) = two_projects();
    // A's job 1 (due in 30 days) is in its open slice; B's job 2 (2 hours, due in 2 days)
    // waits, far from endangered even on a host on 40 % of the time.
    w.add_job(running(1, &w, va, T0 - 0.5 * H, Some(T0 - 60.0)));
    let pb = w.app_versions[vb.index()].project;
    w.add_job(Job::new(
        JobId(2),
        pb,
        vb,
        2.0 * H * 1e9,
        T0,
        T0 + 2.0 * DAY,
    ));
    let first = |w: &World, policy: Policy| {
        let out = Scheduler::new(policy).pass(w, T0);
        assert!(out.sim.endangered.is_empty(), "{:?}", out.sim.endangered);
        (out.run.run[0].job, out.run.run[0].reason)
    };
    // A client running all the time keeps the open slice.
    assert_eq!(
        first(&w, Policy::default()),
        (JobId(1), RunReason::TimeSlice)
    );
    // One running less than half the time runs the job due first.
    w.time_stats.on_frac = 0.4;
    assert_eq!(
        first(&w, Policy::default()),
        (JobId(2), RunReason::Deadline)
    );
    w.time_stats.on_frac = PART_TIME_ON_FRAC;
    assert_eq!(
        first(&w, Policy::default()),
        (JobId(1), RunReason::TimeSlice)
    );
    // Without deadline promotion (--cpu_sched_rr_only) the slice is kept there too.
    w.time_stats.on_frac = 0.4;
    assert_eq!(
        first(&w, Policy::rr_only()),
        (JobId(1), RunReason::TimeSlice)
    );
}

#[test]
fn gpu_jobs_commit_their_cpu_before_cpu_jobs() {
    let mut host = Host::cpu_only(2, 1e9, 16e9);
    host.coprocs.push(Coproc {
        kind: CoprocKind::Nvidia,
        count: 1,
        peak_flops: 1e12,
    });
    let mut w = World::new(host);
    let p = w.add_project(Project::new("P", 1.0));
    let a = w.add_app(App::new(p, "a"));
    let cpu = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    let gpu = w.add_app_version(AppVersion::coproc(a, p, ResourceId(1), 1.0, 1.0, 1e11));
    // Two CPU jobs running in their slices, one GPU job waiting.
    for id in 0..2 {
        let mut j = Job::new(JobId(id), p, cpu, 5.0 * H * 1e9, T0 - 10.0, T0 + 9.0 * DAY);
        j.state = JobState::Running;
        j.run_started_at = Some(T0 - 60.0);
        j.elapsed = 60.0;
        w.add_job(j);
    }
    w.add_job(Job::new(
        JobId(9),
        p,
        gpu,
        5.0 * H * 1e11,
        T0,
        T0 + 9.0 * DAY,
    ));
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let ids: Vec<JobId> = out.run.run.iter().map(|e| e.job).collect();
    assert_eq!(ids[0], JobId(9), "the GPU job goes first: {ids:?}");
    assert_eq!(out.run.run[0].instances, 0b1);
    assert_eq!(
        ids.len(),
        2,
        "one CPU job yields its CPU to the GPU job's feeder"
    );
    assert_eq!(out.run.preempt.len(), 1);
    assert_eq!(
        out.run.preempt[0].reason,
        PreemptReason::Skipped(SkipReason::CpusCommitted)
    );
}

#[test]
fn a_gpu_excluded_for_one_app_is_used_by_the_other_apps_only() {
    // Two GPUs; app `a` must not use GPU 0 (`<exclude_gpu>` naming it), app `b` may use both.
    let mut host = Host::cpu_only(4, 1e9, 16e9);
    host.coprocs.push(Coproc {
        kind: CoprocKind::Nvidia,
        count: 2,
        peak_flops: 1e12,
    });
    let mut w = World::new(host);
    let p = w.add_project(Project::new("P", 1.0));
    let mut app_a = App::new(p, "a");
    app_a.excluded_instances = vec![0, 0b01];
    let a = w.add_app(app_a);
    let b = w.add_app(App::new(p, "b"));
    let va = w.add_app_version(AppVersion::coproc(a, p, ResourceId(1), 1.0, 0.1, 1e11));
    let vb = w.add_app_version(AppVersion::coproc(b, p, ResourceId(1), 1.0, 0.1, 1e11));
    for (id, v) in [(1, va), (2, va), (3, vb)] {
        w.add_job(Job::new(
            JobId(id),
            p,
            v,
            H * 1e11,
            T0 + f64::from(id),
            T0 + 9.0 * DAY,
        ));
    }
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let placed: Vec<(JobId, u64)> = out.run.run.iter().map(|e| (e.job, e.instances)).collect();
    // Job 1 gets GPU 1, the only one `a` may use; job 2 of `a` waits; job 3 of `b` takes GPU 0.
    assert!(placed.contains(&(JobId(1), 0b10)), "{placed:?}");
    assert!(placed.contains(&(JobId(3), 0b01)), "{placed:?}");
    assert!(!placed.iter().any(|(j, _)| *j == JobId(2)), "{placed:?}");
    assert!(out
        .run
        .skipped
        .contains(&(JobId(2), SkipReason::NoCoprocInstance)));
}

#[test]
fn job_too_big_for_ram_is_skipped_and_others_run() {
    let (mut w, va, vb) = two_projects();
    w.user_active = true; // 50 % of 8 GB
    let pa = w.app_versions[va.index()].project;
    let pb = w.app_versions[vb.index()].project;
    let mut big = Job::new(JobId(1), pa, va, H * 1e9, T0, T0 + 9.0 * DAY);
    big.working_set_bytes = 5e9;
    w.add_job(big);
    let mut small = Job::new(JobId(2), pb, vb, H * 1e9, T0 + 1.0, T0 + 9.0 * DAY);
    small.working_set_bytes = 1e9;
    w.add_job(small);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert_eq!(
        out.run.run.iter().map(|e| e.job).collect::<Vec<_>>(),
        vec![JobId(2)]
    );
    assert!(
        out.run
            .skipped
            .iter()
            .any(|(j, s)| *j == JobId(1)
                && matches!(s, SkipReason::Memory { need, .. } if *need == 5e9)),
        "{:?}",
        out.run.skipped
    );
}

#[test]
fn max_concurrent_limits_running_jobs() {
    let mut w = World::new(Host::cpu_only(8, 1e9, 16e9));
    let p = w.add_project(Project::new("P", 1.0));
    let mut app = App::new(p, "a");
    app.max_concurrent = Some(2);
    let a = w.add_app(app);
    let v = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    for id in 0..6 {
        w.add_job(Job::new(
            JobId(id),
            p,
            v,
            H * 1e9,
            T0 + f64::from(id),
            T0 + 9.0 * DAY,
        ));
    }
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert_eq!(out.run.run.len(), 2);
    assert!((out.run.idle_cpus - 6.0).abs() < 1e-9);
}

#[test]
fn snapshot_validation_catches_dangling_ids() {
    let (mut w, va, _) = two_projects();
    assert_eq!(w.validate(), Ok(()));
    w.add_job(Job::new(JobId(1), ProjectId(7), va, 1.0, T0, T0));
    assert!(matches!(
        w.validate(),
        Err(SchedError::UnknownProject { .. })
    ));
}

#[test]
fn wacky_duration_correction_makes_every_job_deadline_scheduled() {
    let (mut w, va, vb) = two_projects();
    let pa = w.app_versions[va.index()].project;
    let pb = w.app_versions[vb.index()].project;
    w.add_job(Job::new(JobId(1), pa, va, H * 1e9, T0, T0 + 30.0 * DAY));
    w.add_job(Job::new(
        JobId(2),
        pb,
        vb,
        H * 1e9,
        T0 - 1.0,
        T0 + 30.0 * DAY,
    ));
    w.projects[pa.index()].dcf = 95.0;
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert_eq!(
        (out.run.run[0].job, out.run.run[0].reason),
        (JobId(1), RunReason::Deadline)
    );
    assert_eq!(out.run.run.len(), 1);
}

#[test]
fn garbage_estimates_do_not_stall_a_pass() {
    let (mut w, va, vb) = two_projects();
    let pa = w.app_versions[va.index()].project;
    let pb = w.app_versions[vb.index()].project;
    w.add_job(Job::new(JobId(1), pa, va, f64::NAN, T0, T0 + DAY));
    w.add_job(Job::new(JobId(2), pb, vb, f64::INFINITY, T0, T0 + DAY));
    w.add_job(Job::new(JobId(3), pb, vb, -5.0, T0, T0 + DAY));
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert_eq!(out.run.run.len(), 1);
    // The endless job is predicted to miss its deadline.
    assert!(out.sim.missed_ids(&w).contains(&JobId(2)));
}

#[test]
fn next_wakeup_is_the_earliest_slice_end_backoff_or_periodic_pass() {
    let (mut w, va, _) = two_projects();
    let pa = w.app_versions[va.index()].project;
    // Slice started 59.5 min ago: it ends in 30 s.
    w.add_job(running(1, &w, va, T0 - 3600.0 + 30.0, Some(T0 - 10.0)));
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert!(
        (out.next_wakeup - (T0 + 30.0)).abs() < 1e-6,
        "{}",
        out.next_wakeup - T0
    );
    // Without the running job: the periodic pass (60 s), or a backoff ending sooner.
    w.jobs.clear();
    let out = s.pass(&w, T0);
    assert!((out.next_wakeup - (T0 + 60.0)).abs() < 1e-6);
    s.handle_rpc_failed(T0, pa, &mut FixedJitter(0.0)); // min_rpc_time = T0 + 60 × 2 × 0.5
    s.fetch_state[pa.index()].backoff_until[0] = T0 + 20.0;
    assert!((s.next_wakeup(&w, T0) - (T0 + 20.0)).abs() < 1e-6);
}

/// An unstarted job that cannot finish by its deadline even if started now is not run and is
/// listed for abortion; a started one with the same numbers keeps running (its work is sunk).
#[test]
fn doomed_unstarted_job_is_aborted_not_run() {
    let (mut w, va, _) = two_projects();
    w.host.ncpus = 2;
    let now = T0;
    w.add_job(Job::new(
        JobId(1),
        ProjectId(0),
        va,
        2.0 * 3600.0 * 1e9,
        now,
        now + 3600.0,
    ));
    let mut started = Job::new(
        JobId(2),
        ProjectId(0),
        va,
        2.0 * 3600.0 * 1e9,
        now,
        now + 3600.0,
    );
    started.state = JobState::Preempted { in_memory: true };
    started.elapsed = 60.0;
    w.add_job(started);
    w.add_job(Job::new(
        JobId(3),
        ProjectId(0),
        va,
        1800.0 * 1e9,
        now,
        now + 3600.0,
    ));
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, now);
    assert_eq!(out.abort, vec![JobId(1)]);
    let run: Vec<JobId> = out.run.run.iter().map(|e| e.job).collect();
    assert!(!run.contains(&JobId(1)), "{run:?}");
    assert!(
        run.contains(&JobId(2)) && run.contains(&JobId(3)),
        "{run:?}"
    );
}

/// Without deadline promotion (`--cpu_sched_rr_only`) a doomed job is not given up: as in the
/// official client it runs in its turn (its estimate may be wrong, and it still may make it).
#[test]
fn rr_only_runs_a_doomed_job_in_its_turn() {
    let (mut w, va, _) = two_projects();
    w.host.ncpus = 2;
    let now = T0;
    w.add_job(Job::new(
        JobId(1),
        ProjectId(0),
        va,
        2.0 * 3600.0 * 1e9,
        now,
        now + 3600.0,
    ));
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, now);
    assert_eq!(out.abort, vec![JobId(1)]);
    assert!(out.run.run.is_empty(), "{:?}", out.run.run);

    let mut s = Scheduler::new(Policy::rr_only());
    assert!(s.doomed(&w, now).is_empty());
    let out = s.pass(&w, now);
    assert!(out.abort.is_empty(), "{:?}", out.abort);
    let run: Vec<JobId> = out.run.run.iter().map(|e| e.job).collect();
    assert_eq!(run, vec![JobId(1)]);
}

/// BOINC's cc_config `<prioritize_gpu>` puts GPU jobs ahead of deadline-endangered CPU jobs;
/// Ferrite's core always does (GPU jobs commit their CPU first), with or without the option.
#[test]
fn gpu_jobs_go_before_endangered_cpu_jobs() {
    let mut host = Host::cpu_only(2, 1e9, 16e9);
    host.coprocs.push(Coproc {
        kind: CoprocKind::Nvidia,
        count: 1,
        peak_flops: 1e12,
    });
    let mut w = World::new(host);
    let p = w.add_project(Project::new("P", 1.0));
    let a = w.add_app(App::new(p, "a"));
    let cpu = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    let gpu = w.add_app_version(AppVersion::coproc(a, p, ResourceId(1), 1.0, 1.0, 1e11));
    // Two CPU jobs of 5 h due in 5.5 h (both endangered), one GPU job with days to spare.
    for id in 0..2 {
        w.add_job(Job::new(
            JobId(id),
            p,
            cpu,
            5.0 * H * 1e9,
            T0 - 10.0,
            T0 + 5.5 * H,
        ));
    }
    w.add_job(Job::new(
        JobId(9),
        p,
        gpu,
        5.0 * H * 1e11,
        T0,
        T0 + 9.0 * DAY,
    ));
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let run: Vec<(JobId, RunReason)> = out.run.run.iter().map(|e| (e.job, e.reason)).collect();
    assert_eq!(run[0].0, JobId(9), "the GPU job goes first: {run:?}");
    assert_eq!(run.len(), 2, "{run:?}");
    assert_eq!(run[1], (JobId(0), RunReason::Deadline), "{run:?}");
}
