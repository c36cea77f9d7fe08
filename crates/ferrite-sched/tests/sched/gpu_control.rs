//! Per-resource control for every project, in virtual time: a GPU excluded by the volunteer
//! is never used nor counted for work fetch, and a resource set to "finish then stop" runs
//! its started jobs to the end, starts no other and asks for no work, while the other
//! resources go on as before.

use crate::driver::Driver;
use ferrite_sched::*;

const H: f64 = 3600.0;
const DAY: f64 = 86400.0;
const T0: f64 = 1.7e9;

/// Two CPUs and two NVIDIA GPUs; one project with a CPU and a GPU version.
fn world() -> (World, AppVersionId, AppVersionId) {
    let mut host = Host::cpu_only(2, 1e9, 8e9);
    host.coprocs.push(Coproc {
        kind: CoprocKind::Nvidia,
        count: 2,
        peak_flops: 1e12,
    });
    let mut w = World::new(host);
    w.prefs.work_buf_min_days = 0.1;
    w.prefs.work_buf_additional_days = 0.1;
    let p = w.add_project(Project::new("P", 100.0));
    let a = w.add_app(App::new(p, "a"));
    let cpu = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    let gpu = w.add_app_version(AppVersion::coproc(a, p, ResourceId(1), 1.0, 0.1, 1e11));
    (w, cpu, gpu)
}

fn supply(
    cpu: AppVersionId,
    gpu: AppVersionId,
) -> impl Fn(ProjectId, ResourceId) -> Option<(AppVersionId, f64, f64)> {
    move |_, r| Some((if r.is_cpu() { cpu } else { gpu }, H, 3.0 * DAY))
}

#[test]
fn an_excluded_gpu_is_never_used_and_work_is_fetched_for_the_other_only() {
    let (mut w, cpu, gpu) = world();
    w.gpu_control.exclude(ResourceId(1), 1);
    let mut d = Driver::new(w, Policy::default(), T0, 600.0);
    for _ in 0..4 {
        d.add_job(gpu, H, 3.0 * DAY);
    }
    let supply = supply(cpu, gpu);
    let mut gpu_requests = 0;
    for _ in 0..200 {
        let out = d.step_once();
        for e in &out.run.run {
            let j = d.world.jobs.iter().find(|j| j.id == e.job);
            if j.is_some_and(|j| j.app_version == gpu) {
                assert_eq!(e.instances, 0b01, "only GPU 0 is used: {e:?}");
            }
        }
        if let Some(req) = &out.fetch.request {
            if let Some(rr) = req.for_resource(ResourceId(1)) {
                gpu_requests += 1;
                assert!(rr.req_instances <= 1.0 + 1e-9, "one usable GPU: {rr:?}");
            }
        }
        d.serve_fetch(&supply);
    }
    assert!(gpu_requests > 0, "work is still fetched for GPU 0");
    assert!(d.done.len() > 8, "work went on: {}", d.done.len());
}

#[test]
fn finish_then_stop_ends_the_started_jobs_starts_no_other_and_fetches_nothing_for_it() {
    let (w, cpu, gpu) = world();
    let mut d = Driver::new(w, Policy::default(), T0, 300.0);
    let g: Vec<JobId> = (0..4).map(|_| d.add_job(gpu, H, 3.0 * DAY)).collect();
    // Both GPUs start a job.
    let out = d.step_once();
    let started: Vec<JobId> = out
        .run
        .run
        .iter()
        .map(|e| e.job)
        .filter(|j| g.contains(j))
        .collect();
    assert_eq!(started.len(), 2, "{out:?}");

    d.world.gpu_control.finish_then_stop.insert(ResourceId(1));
    let supply = supply(cpu, gpu);
    for _ in 0..100 {
        let out = d.step_once();
        for e in &out.run.run {
            assert!(
                !g.contains(&e.job) || started.contains(&e.job),
                "an unstarted GPU job started: {e:?}"
            );
        }
        if let Some(req) = &out.fetch.request {
            assert!(req.for_resource(ResourceId(1)).is_none(), "{req:?}");
        }
        assert!(out
            .fetch
            .blocks
            .iter()
            .all(|b| b.resource != Some(ResourceId(1)) || b.rule == FetchRule::FinishThenStop));
        d.serve_fetch(&supply);
    }
    let done: Vec<JobId> = d.done.iter().map(|x| x.id).collect();
    for j in &started {
        assert!(done.contains(j), "started job {j:?} ran to its end");
    }
    let waiting: Vec<&Job> = d.world.jobs.iter().filter(|j| g.contains(&j.id)).collect();
    assert_eq!(waiting.len(), 2, "the two unstarted GPU jobs wait");
    let last = d.last.clone().expect("a pass");
    for j in &waiting {
        assert!(
            last.run
                .skipped
                .contains(&(j.id, SkipReason::FinishThenStop)),
            "{:?}",
            last.run.skipped
        );
    }
    assert!(last
        .fetch
        .blocks
        .iter()
        .any(|b| b.resource == Some(ResourceId(1)) && b.rule == FetchRule::FinishThenStop));
    assert!(
        d.done.iter().any(|x| !g.contains(&x.id)),
        "the CPU went on fetching and running work"
    );

    // Lifted: the waiting jobs run.
    d.world.gpu_control.finish_then_stop = ResourceSet::default();
    for _ in 0..20 {
        d.step_once();
        d.serve_fetch(&supply);
    }
    let done: Vec<JobId> = d.done.iter().map(|x| x.id).collect();
    assert!(g.iter().all(|j| done.contains(j)), "{done:?}");
}

#[test]
fn the_first_request_after_attaching_asks_nothing_for_a_stopped_resource() {
    let (mut w, _, _) = world();
    w.projects[0].initial_rpc_pending = true;
    w.gpu_control.finish_then_stop.insert(ResourceId::CPU);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    let req = out.fetch.request.expect("the initial request");
    assert_eq!(req.reason, RpcReason::Init);
    assert_eq!(
        req.for_resource(ResourceId::CPU).map(|r| r.req_secs),
        Some(0.0)
    );
    assert_eq!(
        req.for_resource(ResourceId(1)).map(|r| r.req_secs),
        Some(1.0)
    );
}
