//! Work-fetch decisions, backoffs and reporting through the public API.

use ferrite_sched::*;

const H: f64 = 3600.0;
const DAY: f64 = 86400.0;
const T0: f64 = 1.7e9;

fn host_with_gpu() -> Host {
    let mut h = Host::cpu_only(4, 1e9, 16e9);
    h.coprocs.push(Coproc {
        kind: CoprocKind::Nvidia,
        count: 2,
        peak_flops: 1e12,
    });
    h
}

/// A project holding `n` one-hour CPU jobs (not running).
fn busy_project(w: &mut World, name: &str, n: u32, first_id: u32) -> (ProjectId, AppVersionId) {
    let p = w.add_project(Project::new(name, 100.0));
    let a = w.add_app(App::new(p, name));
    let v = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    for i in 0..n {
        w.add_job(Job::new(
            JobId(first_id + i),
            p,
            v,
            H * 1e9,
            T0,
            T0 + 10.0 * DAY,
        ));
    }
    (p, v)
}

#[test]
fn new_project_first_fetch_asks_one_second_per_resource() {
    let mut w = World::new(host_with_gpu());
    busy_project(&mut w, "A", 400, 0);
    let mut n = Project::new("N", 50.0);
    n.initial_rpc_pending = true;
    let n = w.add_project(n);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let req = out.fetch.request.expect("a first request");
    assert_eq!(req.project, n);
    assert_eq!(req.reason, RpcReason::Init);
    assert_eq!(req.resources.len(), 2);
    assert!(req
        .resources
        .iter()
        .all(|r| r.req_secs == 1.0 && r.req_instances == 0.0));
    assert_eq!(req.work_req_seconds, 1.0);

    // Every GPU excluded for it: no GPU request.
    w.projects[n.index()].excluded_instances = vec![0, 0b11];
    let out = s.pass(&w, T0 + 1.0);
    let req = out.fetch.request.expect("a first request");
    assert_eq!(req.resources.len(), 1);
    assert!(req.for_resource(ResourceId::CPU).is_some());

    // A failed first contact backs the project off, with the reason shown.
    s.handle_rpc_failed(T0 + 2.0, n, &mut FixedJitter(0.0));
    let out = s.pass(&w, T0 + 3.0);
    assert_eq!(out.fetch.request, None);
    assert!(out.fetch.blocks.iter().any(|b| b.project == Some(n)
        && matches!(b.rule, FetchRule::RpcBackoff { until } if (until - (T0 + 2.0 + 60.0)).abs() < 1e-6)));
}

#[test]
fn new_project_with_no_queue_is_asked_before_a_busy_one() {
    // A has run for two days (high REC) and its queue is nearly empty; N just got its app.
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    let (a, _) = busy_project(&mut w, "A", 1, 0);
    w.jobs[0].state = JobState::Running;
    w.jobs[0].run_started_at = Some(T0);
    let n = w.add_project(Project::new("N", 100.0));
    let na = w.add_app(App::new(n, "n"));
    w.add_app_version(AppVersion::cpu(na, n, 1.0, 1e9));
    let mut s = Scheduler::new(Policy::default());
    let mut t = T0;
    while t < T0 + 2.0 * DAY {
        s.account(&w, t);
        t += 60.0;
    }
    let out = s.pass(&w, t);
    let req = out.fetch.request.expect("CPU idle: fetch");
    assert_eq!(req.project, n, "blocks: {:?}", out.fetch.blocks);
    assert_eq!(req.reason, RpcReason::NeedWork);
    let cpu = req.for_resource(ResourceId::CPU).expect("CPU asked");
    assert!((cpu.req_instances - 1.0).abs() < 1e-9, "one CPU idle now");
    // Shortfall: one CPU idle for the 1 h job then two CPUs to the end of the 0.6-day buffer.
    let buf = w.prefs.work_buf_total();
    let want = H + 2.0 * (buf - H);
    assert!(
        (cpu.req_secs - want).abs() < 1.0,
        "{} vs {}",
        cpu.req_secs,
        want
    );
    assert_eq!(req.work_req_seconds, cpu.req_secs);
    assert!(out
        .fetch
        .blocks
        .iter()
        .any(|b| b.project == Some(a) && b.rule == FetchRule::LowerPriority));
}

#[test]
fn full_buffer_fetches_nothing_and_says_why() {
    let mut w = World::new(Host::cpu_only(4, 1e9, 16e9));
    busy_project(&mut w, "A", 200, 0);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert_eq!(out.fetch.request, None);
    assert!(out.fetch.blocks.iter().any(|b| b.project.is_none()
        && b.resource == Some(ResourceId::CPU)
        && matches!(b.rule, FetchRule::BufferFull { saturated, .. } if (saturated - 50.0 * H).abs() < 1.0)));
}

#[test]
fn resource_backoff_doubles_is_randomised_and_clears_on_jobs() {
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    let (p, _) = busy_project(&mut w, "P", 0, 0);
    let (q, _) = busy_project(&mut w, "Q", 0, 100);
    w.projects[q.index()].resource_share = 10.0; // lower priority than P
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let req = out.fetch.request.expect("idle: fetch");
    assert_eq!(req.project, p);
    s.handle_rpc_succeeded(T0, p, Some(&req), &[0], 0.0, &mut FixedJitter(0.0));
    let until = s.fetch_state[p.index()].backoff_until[0];
    assert!((until - (T0 + 300.0)).abs() < 1e-6, "600 s × 0.5");
    // While backed off, Q is asked and the reason for not asking P is data.
    let out = s.pass(&w, T0 + 10.0);
    assert_eq!(out.fetch.request.as_ref().map(|r| r.project), Some(q));
    assert!(out.fetch.blocks.iter().any(|b| b.project == Some(p)
        && b.resource == Some(ResourceId::CPU)
        && b.rule == FetchRule::ResourceBackoff { until }));
    // Second empty reply after expiry doubles the interval (jitter 0.99 → ×1.49).
    let req2 = WorkRequest {
        project: p,
        ..req.clone()
    };
    s.handle_rpc_succeeded(
        T0 + 400.0,
        p,
        Some(&req2),
        &[0],
        0.0,
        &mut FixedJitter(0.99),
    );
    assert_eq!(s.fetch_state[p.index()].backoff_interval[0], 1200.0);
    assert!(
        (s.fetch_state[p.index()].backoff_until[0] - (T0 + 400.0 + 1200.0 * 1.49)).abs() < 1e-6
    );
    // Intervals cap at one day.
    for k in 0..10 {
        let t = T0 + 1e6 * f64::from(k + 1);
        s.handle_rpc_succeeded(t, p, Some(&req2), &[0], 0.0, &mut FixedJitter(0.5));
    }
    assert_eq!(s.fetch_state[p.index()].backoff_interval[0], 86400.0);
    s.handle_jobs_arrived(p, ResourceId::CPU);
    assert_eq!(s.fetch_state[p.index()].backoff_until[0], 0.0);
    assert_eq!(s.fetch_state[p.index()].backoff_interval[0], 0.0);
}

#[test]
fn max_concurrent_project_at_capacity_is_not_asked() {
    let mut w = World::new(Host::cpu_only(4, 1e9, 16e9));
    let (p, v) = busy_project(&mut w, "P", 0, 0);
    w.projects[p.index()].max_concurrent = Some(1);
    // One long job already fills what P may run; three CPUs idle.
    w.add_job(Job::new(
        JobId(1),
        p,
        v,
        30.0 * DAY * 1e9,
        T0,
        T0 + 60.0 * DAY,
    ));
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert_eq!(out.fetch.request, None);
    assert!(out
        .fetch
        .blocks
        .iter()
        .any(|b| b.project == Some(p) && b.rule == FetchRule::MaxConcurrent));
}

#[test]
fn gpu_excluded_project_is_not_asked_for_that_gpu() {
    let mut w = World::new(host_with_gpu());
    let p = w.add_project(Project::new("P", 100.0));
    let a = w.add_app(App::new(p, "a"));
    w.add_app_version(AppVersion::coproc(a, p, ResourceId(1), 1.0, 0.1, 1e11));
    w.projects[p.index()].excluded_instances = vec![0, 0b11];
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert_eq!(out.fetch.request, None);
    assert!(out.fetch.blocks.iter().any(|b| b.project == Some(p)
        && b.resource == Some(ResourceId(1))
        && b.rule == FetchRule::AllInstancesExcluded));
    // A project with no GPU app says so.
    assert!(out.fetch.blocks.iter().any(|b| b.project == Some(p)
        && b.resource == Some(ResourceId::CPU)
        && b.rule == FetchRule::NoApps));
}

#[test]
fn finished_jobs_are_reported_after_an_hour_or_when_no_new_work() {
    let mut w = World::new(Host::cpu_only(1, 1e9, 16e9));
    let (p, v) = busy_project(&mut w, "P", 0, 0);
    let mut j = Job::new(JobId(5), p, v, 1e9, T0, T0 + 10.0 * DAY);
    j.state = JobState::Finished {
        completed_time: T0,
        ready_to_report: true,
    };
    w.add_job(j);
    let s = Scheduler::new(Policy::default());
    assert!(s.decide_reports(&w, T0 + 60.0).is_empty());
    let due = s.decide_reports(&w, T0 + H + 1.0);
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].rule, ReportRule::CompletedLongAgo);
    assert_eq!(due[0].jobs, vec![JobId(5)]);
    // Deadline within a day.
    let due = s.decide_reports(&w, T0 + 9.5 * DAY - H);
    assert_eq!(due[0].rule, ReportRule::DeadlineNear);
    w.projects[p.index()].no_new_work = true;
    assert_eq!(
        s.decide_reports(&w, T0 + 60.0)[0].rule,
        ReportRule::NoNewWork
    );
}

/// A job finished over an hour ago, due in days, waits for the project's running job if that
/// one is estimated to finish within `MAX_REPORT_HOLD` of the first one's completion; no
/// longer, and not at all when the running job ends later.
#[test]
fn an_old_report_with_a_far_deadline_waits_for_the_next_job_within_the_hold() {
    let mut w = World::new(Host::cpu_only(1, 1e9, 16e9));
    let (p, v) = busy_project(&mut w, "P", 0, 0);
    let mut done = Job::new(JobId(5), p, v, 1e9, T0, T0 + 10.0 * DAY);
    done.state = JobState::Finished {
        completed_time: T0,
        ready_to_report: true,
    };
    w.add_job(done);
    // A 3-hour job started at T0: estimated to end at T0 + 3 h.
    let mut running = Job::new(JobId(6), p, v, 3.0 * H * 1e9, T0, T0 + 10.0 * DAY);
    running.state = JobState::Running;
    running.run_started_at = Some(T0);
    w.add_job(running);
    let s = Scheduler::new(Policy::default());
    let at = |w: &mut World, t: f64| {
        let j = w.jobs.last_mut().expect("running job");
        j.elapsed = t - T0;
        j.fraction_done = (t - T0) / (3.0 * H);
        j.elapsed_at_fraction = t - T0;
        s.decide_reports(w, t)
    };
    const { assert!(MAX_REPORT_HOLD >= 3.0 * H) };
    // Completed an hour ago, the next one ends within the hold: held.
    assert!(at(&mut w, T0 + H + 60.0).is_empty());
    // A running job ending after the hold does not hold it.
    w.jobs.last_mut().expect("running job").fpops_est = (MAX_REPORT_HOLD + H) * 1e9;
    let due = at(&mut w, T0 + H + 60.0);
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].rule, ReportRule::CompletedLongAgo);
    // Nor does one whose end would bring the deadline within a day.
    w.jobs.last_mut().expect("running job").fpops_est = 3.0 * H * 1e9;
    w.jobs[0].report_deadline = T0 + DAY + 2.0 * H;
    let due = at(&mut w, T0 + H + 60.0);
    assert_eq!(due.len(), 1, "{due:?}");
}

#[test]
fn a_report_due_by_its_deadline_waits_for_the_next_job_finishing_soon() {
    // Jobs of 30 min due 10 h after arrival: a finished one is due at once (deadline within a
    // day), unless another job of the project finishes within the hour, well before it.
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    let p = w.add_project(Project::new("P", 100.0));
    let a = w.add_app(App::new(p, "a"));
    let v = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    let mut done = Job::new(JobId(1), p, v, 1800e9, T0, T0 + 10.0 * H);
    done.state = JobState::Finished {
        completed_time: T0 + H,
        ready_to_report: true,
    };
    w.add_job(done);
    let mut running = Job::new(JobId(2), p, v, 1800e9, T0, T0 + 10.0 * H);
    running.state = JobState::Running;
    running.run_started_at = Some(T0 + 0.5 * H);
    running.elapsed = 0.5 * H;
    w.add_job(running);
    let s = Scheduler::new(Policy::default());
    let now = T0 + H;
    // The running job has 1800 s left at most: the report waits for it.
    w.jobs[1].elapsed = 1500.0;
    assert!(s.decide_reports(&w, now).is_empty());
    // It would take longer than an hour: report now.
    w.jobs[1].elapsed = 0.0;
    w.jobs[1].fpops_est = 3.0 * H * 1e9;
    assert_eq!(s.decide_reports(&w, now)[0].rule, ReportRule::DeadlineNear);
    // Finished an hour ago: reported whatever runs.
    w.jobs[1].fpops_est = 1800e9;
    w.jobs[1].elapsed = 1500.0;
    assert_eq!(
        s.decide_reports(&w, T0 + 2.0 * H + 1.0)[0].rule,
        ReportRule::DeadlineNear
    );
}

#[test]
fn piggyback_asks_what_the_trigger_would_unless_a_better_project_could() {
    // 2 CPUs; P holds 10 h of work (above the 0.1-day min buffer): a report RPC asks nothing
    // more (topping up to the max buffer on every report would crowd out short deadlines).
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    let (p, _) = busy_project(&mut w, "P", 10, 0);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert_eq!(out.fetch.request, None, "not low: no fetch of its own");
    assert_eq!(s.piggyback(&w, T0, &out.sim, p), None);
    // With 2 h of work on 2 CPUs the CPU is low: P backed off for the CPU still asks on its
    // report RPC.
    w.jobs.truncate(2);
    let out = s.pass(&w, T0);
    s.fetch_state[p.index()].backoff_until[0] = T0 + H;
    let req = s
        .piggyback(&w, T0, &out.sim, p)
        .expect("below the min buffer");
    let cpu = req.for_resource(ResourceId::CPU).expect("CPU");
    assert!((cpu.req_secs - out.sim.resources[0].shortfall).abs() < 1e-6);
    // A project that has had less CPU recently (higher priority) could be asked instead.
    let (q, _) = busy_project(&mut w, "Q", 0, 100);
    w.jobs[0].state = JobState::Running;
    w.jobs[0].run_started_at = Some(T0);
    let mut t = T0;
    while t < T0 + DAY {
        s.account(&w, t);
        t += 60.0;
    }
    let out = s.pass(&w, t);
    assert_eq!(s.piggyback(&w, t, &out.sim, p), None);
    assert!(s.piggyback(&w, t, &out.sim, q).is_some());
}

#[test]
fn disk_over_the_limit_stops_fetch() {
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    busy_project(&mut w, "P", 0, 0);
    w.disk_full = true;
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert_eq!(out.fetch.request, None);
    assert!(out.fetch.blocks.contains(&FetchBlock {
        project: None,
        resource: None,
        rule: FetchRule::DiskFull
    }));
    w.disk_full = false;
    assert!(s.pass(&w, T0 + 1.0).fetch.request.is_some());
}

/// The request carries, per resource, when a new job of that project would start: B's one
/// queued hour, not 0 (which made servers skip their deadline check).
#[test]
fn estimated_delay_is_the_projects_start_delay() {
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    w.prefs.work_buf_min_days = 0.5;
    let (_, av) = busy_project(&mut w, "A", 0, 0);
    let (b, _) = busy_project(&mut w, "B", 1, 100);
    for i in 0..3 {
        w.add_job(Job::new(
            JobId(i),
            ProjectId(0),
            av,
            10.0 * H * 1e9,
            T0,
            T0 + 10.0 * DAY,
        ));
    }
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let req = out
        .fetch
        .request
        .expect("saturated 11 h < 12 h minimum buffer: fetch");
    assert_eq!(req.project, b, "blocks: {:?}", out.fetch.blocks);
    let cpu = req.for_resource(ResourceId::CPU).expect("CPU asked");
    assert!(
        (cpu.estimated_delay - H).abs() < 1e-6,
        "{}",
        cpu.estimated_delay
    );
}

/// Fetch is sized by the project's deadlines: P's jobs take 60 h and are due 100 h after
/// arrival; with one CPU idle, new work may reach as far as 2 CPUs × (100 h − 3.4 h cushion
/// − 60 h) plus one last job running alone — 133.2 instance-hours, i.e. two jobs, so it asks
/// for 73.2 h (the server adds one job past the request) instead of its 424 h shortfall.
#[test]
fn fetch_is_limited_by_what_the_deadlines_allow() {
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    w.prefs.work_buf_additional_days = 10.0;
    let (p, v) = busy_project(&mut w, "P", 0, 0);
    w.add_job(Job::new(JobId(1), p, v, 60.0 * H * 1e9, T0, T0 + 100.0 * H));
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let req = out.fetch.request.expect("one CPU idle: fetch");
    let cpu = req.for_resource(ResourceId::CPU).expect("CPU asked");
    assert!(
        (cpu.req_secs - 73.2 * H).abs() < 1.0,
        "{}",
        cpu.req_secs / H
    );
    assert_eq!(cpu.req_instances, 1.0);
    assert_eq!(cpu.estimated_delay, 0.0);

    // Jobs of 95 h due in 100 h and a 5-day minimum buffer (cushion capped at 25 h): no job
    // of that size can finish in time, so none is asked for, and the reason is shown.
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    w.prefs.work_buf_min_days = 5.0;
    let (p, v) = busy_project(&mut w, "P", 0, 0);
    for i in 0..2 {
        w.add_job(Job::new(JobId(i), p, v, 95.0 * H * 1e9, T0, T0 + 100.0 * H));
    }
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert_eq!(out.fetch.request, None);
    assert!(
        out.fetch.blocks.iter().any(|b| b.project == Some(p)
            && b.resource == Some(ResourceId::CPU)
            && matches!(b.rule, FetchRule::DeadlineLimit { latest_start, .. }
                if (latest_start - (100.0 - 25.0 - 95.0) * H).abs() < 1.0)),
        "{:?}",
        out.fetch.blocks
    );
}

/// Until a project's delay bound is known, it is asked for its share of the idle
/// instances only (the other project is asked for the rest): two 1000-hour jobs rather than
/// four when the first of two equal projects is contacted on an empty 4-CPU host.
#[test]
fn unknown_project_is_asked_for_its_share_of_idle_instances() {
    let mut w = World::new(Host::cpu_only(4, 1e9, 16e9));
    busy_project(&mut w, "A", 0, 0);
    busy_project(&mut w, "B", 0, 100);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let req = out.fetch.request.expect("idle: fetch");
    let cpu = req.for_resource(ResourceId::CPU).expect("CPU asked");
    assert_eq!(cpu.req_instances, 2.0);
}

/// A project with CPU and GPU versions whose delay bound is not known yet is asked for its
/// share of the CPU buffer's idle seconds, not all of them: asked first for the GPUs and the
/// CPUs at once, its CPU jobs would otherwise crowd out an equally deserving CPU-only project
/// and later take every CPU as deadline-endangered. (C holds a job, so M comes first.)
#[test]
fn unknown_mixed_project_is_asked_for_its_share_of_the_cpu_buffer() {
    let mut w = World::new(host_with_gpu());
    let m = w.add_project(Project::new("M", 100.0));
    let a = w.add_app(App::new(m, "m"));
    w.add_app_version(AppVersion::cpu(a, m, 1.0, 1e9));
    w.add_app_version(AppVersion::coproc(a, m, ResourceId(1), 1.0, 0.1, 1e11));
    busy_project(&mut w, "C", 1, 0);
    let whole = 4.0 * w.prefs.work_buf_total();
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let req = out.fetch.request.expect("idle: fetch");
    assert_eq!(req.project, m);
    let cpu = req.for_resource(ResourceId::CPU).expect("CPU asked");
    assert!(
        cpu.req_secs > 0.0 && cpu.req_secs <= 0.5 * whole + 1.0,
        "{} of {whole} CPU seconds",
        cpu.req_secs
    );
}

/// Equally deserving projects on an empty host: the CPU is asked first of the project that can
/// supply only the CPU, not of one that can also supply a GPU (listed first here), which is
/// left the GPU and its share of what the CPU still lacks.
#[test]
fn a_cpu_only_project_is_asked_for_the_cpu_before_a_mixed_one() {
    let mut w = World::new(host_with_gpu());
    let m = w.add_project(Project::new("M", 100.0));
    let a = w.add_app(App::new(m, "m"));
    w.add_app_version(AppVersion::cpu(a, m, 1.0, 1e9));
    w.add_app_version(AppVersion::coproc(a, m, ResourceId(1), 1.0, 0.1, 1e11));
    let (c, _) = busy_project(&mut w, "C", 0, 0);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let req = out.fetch.request.expect("idle: fetch");
    assert_eq!(req.project, c);
    assert!(req
        .for_resource(ResourceId::CPU)
        .is_some_and(|r| r.req_secs > 0.0));
}

#[test]
fn a_just_attached_project_without_app_versions_is_asked_for_every_resource() {
    let mut w = World::new(host_with_gpu());
    let p = w.add_project(Project::new("P", 100.0));
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let req = out
        .fetch
        .request
        .expect("an empty host asks the new project for work");
    assert_eq!(req.project, p);
    assert!(req
        .for_resource(ResourceId::CPU)
        .is_some_and(|r| r.req_secs > 0.0));
    assert!(req
        .for_resource(ResourceId(1))
        .is_some_and(|r| r.req_secs > 0.0));
    assert!(!out.fetch.blocks.iter().any(|b| b.rule == FetchRule::NoApps));
}

#[test]
fn fetch_minimal_work_asks_once_for_one_job_per_device() {
    // A project with CPU and GPU apps and no jobs on a host of 4 CPUs and 2 GPUs.
    let mut w = World::new(host_with_gpu());
    let p = w.add_project(Project::new("P", 100.0));
    let a = w.add_app(App::new(p, "a"));
    w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    w.add_app_version(AppVersion::coproc(a, p, ResourceId(1), 1.0, 0.1, 1e11));
    let mut s = Scheduler::new(Policy {
        fetch_minimal_work: true,
        ..Policy::default()
    });
    let out = s.pass(&w, T0);
    let req = out.fetch.request.expect("the one request");
    let asked: Vec<(ResourceId, f64, f64)> = req
        .resources
        .iter()
        .map(|r| (r.resource, r.req_secs, r.req_instances))
        .collect();
    assert_eq!(
        asked,
        vec![(ResourceId::CPU, 1.0, 4.0), (ResourceId(1), 1.0, 2.0)],
        "1 s and every instance per resource"
    );
    assert_eq!(req.work_req_seconds, 1.0);
    // Once that request went out (whatever came back), nothing more is asked.
    s.handle_rpc_succeeded(T0 + 1.0, p, Some(&req), &[0, 0], 0.0, &mut FixedJitter(0.0));
    let out = s.pass(&w, T0 + 2.0 * H);
    assert_eq!(out.fetch.request, None);
    assert!(out
        .fetch
        .blocks
        .iter()
        .any(|b| b.rule == FetchRule::MinimalWorkDone));
    assert!(s.piggyback(&w, T0 + 2.0 * H, &out.sim, p).is_none());

    // A client that starts with jobs already had its work: it asks for nothing.
    let mut w2 = World::new(host_with_gpu());
    busy_project(&mut w2, "Q", 1, 0);
    let mut s2 = Scheduler::new(Policy {
        fetch_minimal_work: true,
        ..Policy::default()
    });
    let out = s2.pass(&w2, T0);
    assert_eq!(out.fetch.request, None);
    // Without the option the same client asks for a full buffer.
    let out = Scheduler::new(Policy::default()).pass(&w2, T0);
    let req = out.fetch.request.expect("a normal request");
    assert!(req.work_req_seconds > 1.0, "{req:?}");
}

/// Only P is short of its share (Q keeps both CPUs busy for days): with one of P's jobs
/// finishing within the hour, P's request waits for that job's report; once nothing of P runs
/// any more, or without deadline promotion, it is asked at once.
#[test]
fn a_starved_project_request_waits_for_its_next_report() {
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    let (q, _) = busy_project(&mut w, "Q", 60, 0);
    let p = w.add_project(Project::new("P", 100.0));
    let a = w.add_app(App::new(p, "a"));
    let v = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    let mut j = Job::new(JobId(100), p, v, H * 1e9, T0, T0 + 10.0 * DAY);
    j.state = JobState::Running;
    j.run_started_at = Some(T0 - 50.0 * 60.0);
    j.elapsed = 50.0 * 60.0;
    w.add_job(j);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let waits = out.fetch.blocks.iter().find_map(|b| match b.rule {
        FetchRule::WaitsForReport { until } if b.project == Some(p) => Some(until),
        _ => None,
    });
    let request = out.fetch.request.as_ref().map(|r| r.project);
    let until = waits.unwrap_or_else(|| panic!("no wait: {request:?} {:?}", out.fetch.blocks));
    // Its estimated end (the estimate blends in the static size while no fraction done is
    // reported), within the hour.
    assert!(until > T0 && until <= T0 + H, "{until}");
    assert_ne!(request, Some(p));
    assert_ne!(request, Some(q));
    // Its job no longer runs: asked now.
    w.jobs.last_mut().expect("P's job").state = JobState::Preempted { in_memory: true };
    let out = s.pass(&w, T0);
    assert_eq!(out.fetch.request.map(|r| r.project), Some(p));
    // Without deadline promotion it never waits.
    w.jobs.last_mut().expect("P's job").state = JobState::Running;
    let mut rr = Scheduler::new(Policy::rr_only());
    let out = rr.pass(&w, T0);
    assert_eq!(out.fetch.request.map(|r| r.project), Some(p));
}

/// Without deadline promotion, a project with 1-hour deadlines whose queue is at what its
/// deadlines allow (room for fewer than `RR_WAIT_ROOM_JOBS` jobs) lets its request wait for
/// the report of its job finishing in a few minutes; with its queue empty (room for many) it
/// is asked at once.
#[test]
fn without_edf_a_request_waits_for_the_report_only_at_the_deadline_limit() {
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    // Q keeps both CPUs busy for 10 hours: above the minimum buffer, below the maximum.
    busy_project(&mut w, "Q", 20, 0);
    let p = w.add_project(Project::new("P", 100.0));
    let a = w.add_app(App::new(p, "a"));
    let v = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    // A 6-minute job running for 5 minutes, due an hour after it arrived.
    let mut j = Job::new(JobId(100), p, v, 360.0 * 1e9, T0 - 600.0, T0 + 3000.0);
    j.state = JobState::Running;
    j.run_started_at = Some(T0 - 300.0);
    j.elapsed = 300.0;
    j.fraction_done = 300.0 / 360.0;
    j.elapsed_at_fraction = 300.0;
    w.add_job(j);
    let waits = |w: &World| {
        let out = Scheduler::new(Policy::rr_only()).pass(w, T0);
        let waited =
            out.fetch.blocks.iter().any(|b| {
                b.project == Some(p) && matches!(b.rule, FetchRule::WaitsForReport { .. })
            });
        (waited, out.fetch.request.map(|r| r.project))
    };
    // Nothing queued: room for many jobs, asked now.
    assert_eq!(waits(&w), (false, Some(p)));
    // Queue P's 6-minute jobs (due an hour after arriving now) until its deadlines leave
    // room for fewer than RR_WAIT_ROOM_JOBS more: then the request waits for the report.
    let mut waited_at = None;
    for k in 0..12u32 {
        w.add_job(Job::new(JobId(200 + k), p, v, 360.0 * 1e9, T0, T0 + H));
        let (waited, req) = waits(&w);
        if waited {
            assert_ne!(req, Some(p));
            waited_at = Some(k + 1);
            break;
        }
        assert_eq!(req, Some(p), "{k} queued");
    }
    let queued = waited_at.expect("the request waits once the queue is near its limit");
    // The wait leaves the report RPC less than RR_WAIT_ROOM_JOBS jobs to ask for.
    let mut s = Scheduler::new(Policy::rr_only());
    let out = s.pass(&w, T0);
    let report_req = s
        .piggyback(&w, T0, &out.sim, p)
        .expect("the report asks for work");
    assert!(
        report_req.work_req_seconds < RR_WAIT_ROOM_JOBS * 360.0,
        "{queued} queued: {report_req:?}"
    );
}

/// Three projects with GPU apps and no jobs yet (deadlines unknown) on an idle host: the one
/// asked first gets a third of the GPUs' buffer seconds, not all of them, and (each can also
/// supply the CPUs) a third of the CPUs' buffer seconds.
#[test]
fn a_project_with_unknown_deadlines_asks_only_its_share_of_the_gpu_buffer() {
    let mut w = World::new(host_with_gpu());
    for name in ["A", "B", "C"] {
        let p = w.add_project(Project::new(name, 100.0));
        let a = w.add_app(App::new(p, name));
        w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
        w.add_app_version(AppVersion::coproc(a, p, ResourceId(1), 1.0, 0.1, 1e11));
    }
    let out = Scheduler::new(Policy::default()).pass(&w, T0);
    let req = out.fetch.request.expect("an idle host asks");
    let secs = |r: ResourceId| {
        req.resources
            .iter()
            .find(|x| x.resource == r)
            .map_or(0.0, |x| x.req_secs)
    };
    let buffer = w.prefs.work_buf_total();
    let gpu = secs(ResourceId(1));
    assert!(
        (gpu - 2.0 * buffer / 3.0).abs() < 1e-6 * buffer,
        "{gpu} of {buffer} s on 2 GPUs"
    );
    let cpu = secs(ResourceId::CPU);
    assert!(
        (cpu - 4.0 * buffer / 3.0).abs() < 1e-6 * buffer,
        "{cpu} of {buffer} s on 4 CPUs: {req:?}"
    );
}

#[test]
fn failed_project_is_retried_early_only_while_an_instance_idles() {
    // A's scheduler failed four times in a row: its backoff has grown to 16 min × U(0.5, 1).
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    let (a, _) = busy_project(&mut w, "A", 0, 0);
    let mut s = Scheduler::new(Policy::default());
    let mut jitter = FixedJitter(0.5);
    s.pass(&w, T0 - 10.0);
    for k in 0..4 {
        s.handle_rpc_failed(T0 + f64::from(k), a, &mut jitter);
    }
    let failed = T0 + 3.0;
    let backoff_end = failed + 960.0 * 0.75;
    let retry = failed + IDLE_RETRY_INTERVAL;
    let backoff_until = |out: &PassOutput| {
        out.fetch.blocks.iter().find_map(|b| match b.rule {
            FetchRule::RpcBackoff { until } if b.project == Some(a) => Some(until),
            _ => None,
        })
    };
    // Both CPUs idle: the backoff ends at the idle retry, which `explain` shows.
    let out = s.pass(&w, retry - 1.0);
    assert_eq!(out.fetch.request, None);
    assert_eq!(backoff_until(&out), Some(retry));
    let out = s.pass(&w, retry);
    assert_eq!(out.fetch.request.map(|r| r.project), Some(a));

    // With two hours of work queued for each CPU (below the minimum buffer, but nothing
    // idles) the full backoff holds.
    let (b, _) = busy_project(&mut w, "B", 4, 100);
    w.projects[b.index()].resource_share = 1.0;
    let out = s.pass(&w, retry);
    assert!(out.fetch.request.as_ref().is_none_or(|r| r.project != a));
    assert_eq!(backoff_until(&out), Some(backoff_end));

    // A server's request_delay is never shortened, idle or not.
    w.jobs.clear();
    s.handle_rpc_succeeded(retry, a, None, &[0], 3600.0, &mut jitter);
    let out = s.pass(&w, retry + 600.0);
    assert_eq!(backoff_until(&out), Some(retry + 3600.0));
}

#[test]
fn restored_failures_wait_for_the_idle_retry_after_a_restart() {
    // A client restarts with A backed off for an hour after 4 failures (its state file): the
    // idle retry, which was not saved, counts from the restart, not from time 0.
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    let (a, _) = busy_project(&mut w, "A", 0, 0);
    let mut s = Scheduler::new(Policy::default());
    s.pass(&w, T0 - 10.0);
    let fs = &mut s.fetch_state[a.index()];
    fs.min_rpc_time = T0 + 3600.0;
    fs.restore_failures(4, T0);
    let out = s.pass(&w, T0 + 1.0);
    assert!(out.fetch.request.as_ref().is_none_or(|r| r.project != a));
    let out = s.pass(&w, T0 + IDLE_RETRY_INTERVAL);
    assert_eq!(out.fetch.request.map(|r| r.project), Some(a));
    // No failures: nothing to wait for but the backoff itself.
    s.fetch_state[a.index()].restore_failures(0, T0);
    assert_eq!(s.fetch_state[a.index()].idle_retry_time, 0.0);
}

#[test]
fn piggyback_tops_up_a_project_whose_deadlines_limit_its_queue() {
    // 2 CPUs; P's one-hour jobs have a 12-hour delay bound, shorter than the 0.6-day max
    // buffer: its deadlines, not the buffer, limit its queue. 6 h of work queued (above the
    // 0.1-day min buffer): no fetch of its own, but its report RPC asks what its deadlines
    // still allow.
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    let p = w.add_project(Project::new("P", 100.0));
    let a = w.add_app(App::new(p, "a"));
    let v = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    for i in 0..6 {
        w.add_job(Job::new(JobId(i), p, v, H * 1e9, T0, T0 + 12.0 * H));
    }
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert_eq!(out.fetch.request, None, "not low: no fetch of its own");
    let req = s.piggyback(&w, T0, &out.sim, p).expect("a top-up");
    let cpu = req.for_resource(ResourceId::CPU).expect("CPU");
    // Never past the deadlines: what is queued and asked for ends before the 12 h bound.
    let queued = 6.0 * H;
    assert!(cpu.req_secs > 0.0);
    assert!((queued + cpu.req_secs) / 2.0 < 12.0 * H, "{}", cpu.req_secs);

    // Queued up to what its deadlines allow, it asks nothing.
    for i in 6..20 {
        w.add_job(Job::new(JobId(i), p, v, H * 1e9, T0, T0 + 12.0 * H));
    }
    let out = s.pass(&w, T0);
    assert_eq!(s.piggyback(&w, T0, &out.sim, p), None);
}

/// Jobs of 100 s due 1000 s after arrival on 2 CPUs (as in the emulator's sample): project P
/// has one finished job, two running and `queued` more waiting, all received at `T0`.
fn short_deadline_world(queued: u32) -> (World, ProjectId) {
    let mut w = World::new(Host::cpu_only(2, 1e9, 16e9));
    w.prefs.work_buf_min_days = 0.0001;
    w.prefs.work_buf_additional_days = 0.25;
    let p = w.add_project(Project::new("P", 100.0));
    let a = w.add_app(App::new(p, "a"));
    let v = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    let mut done = Job::new(JobId(0), p, v, 100e9, T0, T0 + 1000.0);
    done.state = JobState::Finished {
        completed_time: T0 + 100.0,
        ready_to_report: true,
    };
    w.add_job(done);
    for i in 1..=2 {
        let mut j = Job::new(JobId(i), p, v, 100e9, T0, T0 + 1000.0);
        j.state = JobState::Running;
        j.run_started_at = Some(T0 + 100.0);
        w.add_job(j);
    }
    for i in 0..queued {
        w.add_job(Job::new(JobId(10 + i), p, v, 100e9, T0, T0 + 1000.0));
    }
    (w, p)
}

#[test]
fn a_report_that_would_bring_little_work_waits_for_the_next_rpc() {
    let now = T0 + 100.0;
    // Queued up to what the deadlines allow: its RPC would bring nothing, so the report
    // waits (`decide_reports` alone, without the simulation, reports it).
    let (w, p) = short_deadline_world(14);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, now);
    assert_eq!(s.decide_reports(&w, now)[0].rule, ReportRule::DeadlineNear);
    assert_eq!(s.piggyback(&w, now, &out.sim, p), None);
    assert!(out.reports.is_empty(), "{:?}", out.reports);
    assert_eq!(
        out.held_reports,
        vec![HeldReport {
            project: p,
            jobs: vec![JobId(0)],
            until: T0 + 900.0,
        }]
    );
    assert!(out.next_wakeup <= T0 + 900.0);
    assert!(s.decide_reports_with(&w, now, &out.sim).is_empty());
    assert!(out.fetch.request.is_none(), "{:?}", out.fetch.request);
    // Within a tenth of its delay bound of the deadline, it goes whatever the queue.
    let late = T0 + 1000.0 - 0.1 * 1000.0 + 1.0;
    let out = s.pass(&w, late);
    assert!(out.held_reports.is_empty());
    assert_eq!(out.reports.len(), 1);
    assert_eq!(out.reports[0].project, p);

    // Room for one more job: the request it would carry is worth less than an RPC.
    let (w, _) = short_deadline_world(10);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, now);
    let little = s.piggyback(&w, now, &out.sim, p).expect("a top-up");
    assert!(little.resources[0].req_secs <= 100.0, "{little:?}");
    assert!(out.reports.is_empty(), "{:?}", out.reports);

    // Room for several jobs: the report's request is worth its RPC, it goes now.
    let (w, _) = short_deadline_world(4);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, now);
    assert!(s.piggyback(&w, now, &out.sim, p).is_some());
    assert_eq!(out.reports.len(), 1);

    // A job with a 10-day delay bound waits at most MAX_REPORT_HOLD after completing; one due
    // sooner, until a tenth of its bound (an hour at most) before its deadline.
    let mut long = w.jobs[0].clone();
    long.report_deadline = T0 + 10.0 * DAY;
    assert_eq!(
        fetch::report_wait_limit(&long),
        T0 + 100.0 + MAX_REPORT_HOLD
    );
    long.report_deadline = T0 + 2.0 * H;
    assert_eq!(fetch::report_wait_limit(&long), T0 + 2.0 * H - 0.2 * H);
    long.report_deadline = T0 + 4.0 * H;
    assert_eq!(fetch::report_wait_limit(&long), T0 + 4.0 * H - 0.4 * H);
    long.report_deadline = T0 + 20.0 * H;
    assert_eq!(
        fetch::report_wait_limit(&long),
        T0 + 100.0 + MAX_REPORT_HOLD
    );

    // Only the running jobs: the CPUs idle within 180 s, the report goes with a request.
    let (w, _) = short_deadline_world(0);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, now);
    assert_eq!(out.reports.len(), 1);
}
