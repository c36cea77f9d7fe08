//! Work fetch under `max_concurrent` (per app) and `project_max_concurrent`: a project is
//! asked only for what its limits let it run in the buffer, and the other projects are asked
//! for the instances it leaves idle.

use ferrite_sched::*;

const DAY: f64 = 86400.0;
const T0: f64 = 1.7e9;

/// An 8-CPU host with the default buffer (0.1 + 0.5 days).
fn host() -> World {
    World::new(Host::cpu_only(8, 1e9, 16e9))
}

/// A project with one CPU app (`max_concurrent` as given) and no jobs yet.
fn project(w: &mut World, name: &str, app_mc: Option<u32>) -> (ProjectId, AppVersionId) {
    let p = w.add_project(Project::new(name, 100.0));
    let mut app = App::new(p, name);
    app.max_concurrent = app_mc;
    let a = w.add_app(app);
    let v = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    (p, v)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.max(1.0)
}

#[test]
fn an_app_limited_to_two_asks_for_two_instances_of_the_buffer() {
    let mut w = host();
    let (p, _) = project(&mut w, "A", Some(2));
    let buf = w.prefs.work_buf_total();
    let out = Scheduler::new(Policy::default()).pass(&w, T0);
    let req = out.fetch.request.expect("a request");
    assert_eq!(req.project, p);
    let cpu = req.for_resource(ResourceId::CPU).expect("CPU asked");
    // Two instances' worth of the buffer, not eight.
    assert!(close(cpu.req_secs, 2.0 * buf), "{cpu:?} (buffer {buf} s)");
}

#[test]
fn project_max_concurrent_caps_the_request_across_its_apps() {
    let mut w = host();
    let (p, _) = project(&mut w, "A", None);
    // A second app of the same project, also without its own limit.
    let a2 = w.add_app(App::new(p, "A2"));
    w.add_app_version(AppVersion::cpu(a2, p, 1.0, 1e9));
    w.projects[p.index()].max_concurrent = Some(3);
    let buf = w.prefs.work_buf_total();
    let out = Scheduler::new(Policy::default()).pass(&w, T0);
    let cpu = out
        .fetch
        .request
        .expect("a request")
        .resources
        .into_iter()
        .find(|r| r.resource == ResourceId::CPU)
        .expect("CPU asked");
    assert!(close(cpu.req_secs, 3.0 * buf), "{cpu:?} (buffer {buf} s)");
}

#[test]
fn a_limited_app_asks_only_for_what_its_instance_has_left_then_stops() {
    let mut w = host();
    let (p, v) = project(&mut w, "A", Some(1));
    let buf = w.prefs.work_buf_total();
    // A job of a third of the buffer: one instance has two thirds left to fill.
    w.add_job(Job::new(
        JobId(1),
        p,
        v,
        buf / 3.0 * 1e9,
        T0,
        T0 + 30.0 * DAY,
    ));
    let out = Scheduler::new(Policy::default()).pass(&w, T0);
    let req = out.fetch.request.expect("a request");
    assert_eq!(req.project, p);
    let cpu = req.for_resource(ResourceId::CPU).expect("CPU asked");
    assert!(
        close(cpu.req_secs, buf * 2.0 / 3.0),
        "{cpu:?} (buffer {buf} s)"
    );

    // Its instance busy for the whole buffer: nothing more, although seven CPUs idle.
    w.add_job(Job::new(JobId(2), p, v, buf * 1e9, T0, T0 + 30.0 * DAY));
    let out = Scheduler::new(Policy::default()).pass(&w, T0);
    assert_eq!(out.fetch.request, None, "{:?}", out.fetch.blocks);
    assert!(out
        .fetch
        .blocks
        .iter()
        .any(|b| b.project == Some(p) && b.rule == FetchRule::MaxConcurrent));
}

#[test]
fn another_project_is_asked_for_the_instances_a_limited_one_leaves_idle() {
    let mut w = host();
    let (a, va) = project(&mut w, "A", Some(1));
    let (b, _) = project(&mut w, "B", None);
    let buf = w.prefs.work_buf_total();
    // A's one instance is busy past the buffer; its second job waits for it.
    w.add_job(Job::new(
        JobId(1),
        a,
        va,
        2.0 * buf * 1e9,
        T0,
        T0 + 30.0 * DAY,
    ));
    w.add_job(Job::new(
        JobId(2),
        a,
        va,
        2.0 * buf * 1e9,
        T0,
        T0 + 30.0 * DAY,
    ));
    let out = Scheduler::new(Policy::default()).pass(&w, T0);
    // One CPU runs A's job, the rest idle: B is asked for them.
    assert_eq!(out.run.run.len(), 1);
    assert!(out
        .run
        .skipped
        .contains(&(JobId(2), SkipReason::AppMaxConcurrent)));
    assert_eq!(out.run.idle_cpus, 7.0);
    let req = out.fetch.request.expect("a request");
    assert_eq!(req.project, b);
    let cpu = req.for_resource(ResourceId::CPU).expect("CPU asked");
    assert!(close(cpu.req_secs, 7.0 * buf), "{cpu:?} (buffer {buf} s)");
    assert!(cpu.req_instances >= 7.0, "{cpu:?}");
}

#[test]
fn a_limited_project_is_asked_for_its_instance_while_another_keeps_every_cpu_busy() {
    let mut w = host();
    let (x, _) = project(&mut w, "X", Some(1));
    let (y, vy) = project(&mut w, "Y", None);
    let buf = w.prefs.work_buf_total();
    // Y's queue keeps all eight CPUs busy for twice the buffer; X has nothing.
    for i in 0..16 {
        w.add_job(Job::new(JobId(i), y, vy, buf * 1e9, T0, T0 + 30.0 * DAY));
    }
    let out = Scheduler::new(Policy::default()).pass(&w, T0);
    let req = out.fetch.request.expect("a request");
    assert_eq!(req.project, x, "{:?}", out.fetch.blocks);
    let cpu = req.for_resource(ResourceId::CPU).expect("CPU asked");
    // What its one instance can run in the buffer.
    assert!(close(cpu.req_secs, buf), "{cpu:?} (buffer {buf} s)");
}
