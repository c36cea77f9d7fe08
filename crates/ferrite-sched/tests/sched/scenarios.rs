//! The seed documents' own examples, driven through the public API in virtual time.

use super::driver::Driver;
use ferrite_sched::*;

const H: f64 = 3600.0;
const DAY: f64 = 86400.0;
const T0: f64 = 1.7e9;

fn cpu_project(w: &mut World, name: &str, share: f64) -> (ProjectId, AppVersionId) {
    let p = w.add_project(Project::new(name, share));
    let a = w.add_app(App::new(p, name));
    let v = w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
    (p, v)
}

/// One CPU; P1 (jobs of 0.1 h due in 1 h, share 0.5), P2 and P3 (jobs of 1 h due in 24 h,
/// share 0.25 each). P1's short jobs must run in time, and P2 and P3 must each hold the CPU
/// for a whole scheduling period instead of alternating every time a P1 job ends.
#[test]
fn p1_p2_p3_long_jobs_keep_whole_time_slices() {
    let mut w = World::new(Host::cpu_only(1, 1e9, 8e9));
    w.prefs.work_buf_min_days = 0.0;
    w.prefs.work_buf_additional_days = 0.0;
    let (_, v1) = cpu_project(&mut w, "P1", 0.5);
    let (p2, v2) = cpu_project(&mut w, "P2", 0.25);
    let (p3, v3) = cpu_project(&mut w, "P3", 0.25);
    let mut d = Driver::new(w, Policy::default(), T0, 60.0);
    d.run_until(T0 + 3.0 * DAY, |d| {
        if d.queued(v1) == 0 {
            d.add_job(v1, 0.1 * H, 1.0 * H);
        }
        for v in [v2, v3] {
            while d.queued(v) < 2 {
                d.add_job(v, 1.0 * H, 24.0 * H);
            }
        }
    });
    let late: Vec<_> = d.done.iter().filter(|x| x.finished > x.deadline).collect();
    assert!(late.is_empty(), "late jobs: {late:?}");
    // Turns of P2/P3 jobs, ignoring P1's interruptions.
    let project_of = |id: JobId| d.done.iter().find(|x| x.id == id).map(|x| x.project);
    let mut turns: Vec<(JobId, f64)> = Vec::new();
    for (_, dt, ids) in &d.timeline {
        for &id in ids {
            let p = project_of(id);
            if p == Some(p2) || p == Some(p3) {
                match turns.last_mut() {
                    Some((last, t)) if *last == id => *t += dt,
                    _ => turns.push((id, *dt)),
                }
            }
        }
    }
    let finished: std::collections::HashSet<JobId> = d.done.iter().map(|x| x.id).collect();
    let n = turns.len();
    assert!(n > 30, "only {n} turns");
    for (k, (id, t)) in turns.iter().enumerate() {
        // Every turn but the last lasts the whole job (1 h = the period).
        if k + 1 < n {
            assert!(
                finished.contains(id) && *t >= H - 1.0,
                "turn {k} of {id:?} lasted {t} s"
            );
        }
    }
    let runs = |p: ProjectId| d.done.iter().filter(|x| x.project == p).count();
    assert!(
        runs(p2) >= 15 && runs(p3) >= 15,
        "P2 {} P3 {}",
        runs(p2),
        runs(p3)
    );
}

/// With time slicing off (period 1 min) the same scenario does switch: checks that the test
/// above measures something.
#[test]
fn p1_p2_p3_short_period_switches_often() {
    let mut w = World::new(Host::cpu_only(1, 1e9, 8e9));
    w.prefs.work_buf_min_days = 0.0;
    w.prefs.work_buf_additional_days = 0.0;
    w.prefs.cpu_scheduling_period_minutes = 1.0;
    let (_, v1) = cpu_project(&mut w, "P1", 0.5);
    let (_, v2) = cpu_project(&mut w, "P2", 0.25);
    let (_, v3) = cpu_project(&mut w, "P3", 0.25);
    let mut d = Driver::new(w, Policy::default(), T0, 60.0);
    d.run_until(T0 + 1.0 * DAY, |d| {
        if d.queued(v1) == 0 {
            d.add_job(v1, 0.1 * H, 1.0 * H);
        }
        for v in [v2, v3] {
            while d.queued(v) < 2 {
                d.add_job(v, 1.0 * H, 24.0 * H);
            }
        }
    });
    let preempted_in_slice = d
        .timeline
        .windows(2)
        .filter(|w| {
            let a = &w[0].2;
            let b = &w[1].2;
            a.len() == 1
                && b.len() == 1
                && a[0] != b[0]
                && !d
                    .done
                    .iter()
                    .any(|x| x.id == a[0] && x.finished <= w[1].0 + 1e-6)
        })
        .count();
    assert!(preempted_in_slice > 20, "{preempted_in_slice}");
}

/// One CPU and one GPU twice as fast; A has only GPU jobs, B has CPU and GPU jobs, equal
/// shares. With one REC across resources: the CPU goes 100 % to B, the GPU about 75 % to A and
/// 25 % to B (each project then gets 1.5 CPU-equivalents).
#[test]
fn gpu_example_global_rec_splits_gpu_three_to_one() {
    let mut host = Host::cpu_only(1, 1e9, 8e9);
    // Relative speed = 0.2 × peak / p_fpops = 2.
    host.coprocs.push(Coproc {
        kind: CoprocKind::Nvidia,
        count: 1,
        peak_flops: 1e10,
    });
    let mut w = World::new(host);
    w.prefs.work_buf_min_days = 0.0;
    w.prefs.work_buf_additional_days = 0.0;
    let gpu = ResourceId(1);
    let a = w.add_project(Project::new("A", 1.0));
    let b = w.add_project(Project::new("B", 1.0));
    let aa = w.add_app(App::new(a, "ag"));
    let ba = w.add_app(App::new(b, "b"));
    let ag = w.add_app_version(AppVersion::coproc(aa, a, gpu, 1.0, 0.01, 2e9));
    let bc = w.add_app_version(AppVersion::cpu(ba, b, 1.0, 1e9));
    let bg = w.add_app_version(AppVersion::coproc(ba, b, gpu, 1.0, 0.01, 2e9));
    let policy = Policy {
        rec_half_life: 2.0 * DAY,
        max_accounting_gap: 1000.0,
        ..Policy::default()
    };
    let mut d = Driver::new(w, policy, T0, 300.0);
    let refill = |d: &mut Driver| {
        for v in [ag, bc, bg] {
            while d.queued(v) < 2 {
                d.add_job(v, 1.0 * H, 30.0 * DAY);
            }
        }
    };
    d.run_until(T0 + 10.0 * DAY, refill);
    let before = d.used.clone();
    d.run_until(T0 + 30.0 * DAY, refill);
    let g = Driver::diff(&before, &d.used, gpu);
    let c = Driver::diff(&before, &d.used, ResourceId::CPU);
    let gpu_total = g[0] + g[1];
    let a_frac = g[a.index()] / gpu_total;
    assert!((a_frac - 0.75).abs() < 0.05, "A's GPU share {a_frac}");
    // B's CPU jobs hold the CPU (A only uses its GPU feeder's 1 %).
    let b_cpu_jobs = c[b.index()] - 0.01 * g[b.index()];
    assert!(
        b_cpu_jobs / (20.0 * DAY) > 0.97,
        "B's CPU {}",
        b_cpu_jobs / (20.0 * DAY)
    );
}

/// Per-resource REC honours shares on each resource separately: the GPU splits evenly.
#[test]
fn gpu_example_per_resource_rec_splits_gpu_evenly() {
    let mut host = Host::cpu_only(1, 1e9, 8e9);
    host.coprocs.push(Coproc {
        kind: CoprocKind::Nvidia,
        count: 1,
        peak_flops: 1e10,
    });
    let mut w = World::new(host);
    w.prefs.work_buf_min_days = 0.0;
    w.prefs.work_buf_additional_days = 0.0;
    let gpu = ResourceId(1);
    let a = w.add_project(Project::new("A", 1.0));
    let b = w.add_project(Project::new("B", 1.0));
    let aa = w.add_app(App::new(a, "ag"));
    let ba = w.add_app(App::new(b, "b"));
    let ag = w.add_app_version(AppVersion::coproc(aa, a, gpu, 1.0, 0.01, 2e9));
    let bc = w.add_app_version(AppVersion::cpu(ba, b, 1.0, 1e9));
    let bg = w.add_app_version(AppVersion::coproc(ba, b, gpu, 1.0, 0.01, 2e9));
    let policy = Policy {
        rec_half_life: 2.0 * DAY,
        max_accounting_gap: 1000.0,
        rec_mode: RecMode::PerResource,
        ..Policy::default()
    };
    let mut d = Driver::new(w, policy, T0, 300.0);
    let refill = |d: &mut Driver| {
        for v in [ag, bc, bg] {
            while d.queued(v) < 2 {
                d.add_job(v, 1.0 * H, 30.0 * DAY);
            }
        }
    };
    d.run_until(T0 + 10.0 * DAY, refill);
    let before = d.used.clone();
    d.run_until(T0 + 30.0 * DAY, refill);
    let g = Driver::diff(&before, &d.used, gpu);
    let a_frac = g[a.index()] / (g[0] + g[1]);
    assert!((a_frac - 0.5).abs() < 0.05, "A's GPU share {a_frac}");
}

/// A one-year job whose deadline round-robin would miss (B's queue would delay it) runs
/// earliest-deadline-first and makes it, and B's queued jobs still meet theirs. Then both
/// projects fetch short jobs and share fairly again: B catches up for about one REC half-life
/// (10 days), after which the split is even; A is not starved for months (debt-style payback).
#[test]
fn one_year_high_priority_job_then_fair_sharing() {
    let mut w = World::new(Host::cpu_only(1, 1e9, 8e9));
    w.prefs.work_buf_min_days = 0.0;
    w.prefs.work_buf_additional_days = 0.0;
    let (a, va) = cpu_project(&mut w, "A", 1.0);
    let (b, vb) = cpu_project(&mut w, "B", 1.0);
    let policy = Policy {
        max_accounting_gap: 4000.0,
        ..Policy::default()
    };
    let mut d = Driver::new(w, policy, T0, 1800.0);
    let big = d.add_job(va, 360.0 * DAY, 362.0 * DAY);
    for _ in 0..40 {
        d.add_job(vb, 2.0 * H, 365.0 * DAY);
    }
    let first = d.step_once();
    assert!(
        first.sim.missed_ids(&d.world).contains(&big),
        "round-robin would make it late"
    );
    assert!(first
        .run
        .run
        .iter()
        .any(|e| e.job == big && e.reason == RunReason::Deadline));
    // Work arrives through the fetch decisions; servers refuse jobs that cannot make it.
    let refill = move |d: &mut Driver| {
        d.serve_fetch(&move |p, r| {
            if !r.is_cpu() {
                None
            } else if p == b {
                Some((vb, 2.0 * H, 20.0 * DAY))
            } else {
                Some((va, 2.0 * H, 20.0 * DAY))
            }
        });
    };
    while !d.done.iter().any(|x| x.id == big) {
        refill(&mut d);
        d.step_once();
        assert!(d.now < T0 + 363.0 * DAY, "the year-long job did not finish");
    }
    let bigdone = d
        .done
        .iter()
        .find(|x| x.id == big)
        .cloned()
        .expect("finished");
    assert!(
        bigdone.finished <= bigdone.deadline,
        "missed by {} s",
        bigdone.finished - bigdone.deadline
    );
    let t1 = d.now;
    let u1 = d.used.clone();
    d.run_until(t1 + 10.0 * DAY, refill);
    let u2 = d.used.clone();
    d.run_until(t1 + 40.0 * DAY, refill);
    let u3 = d.used.clone();
    d.run_until(t1 + 70.0 * DAY, refill);
    let u4 = d.used.clone();
    let late: Vec<_> = d.done.iter().filter(|x| x.finished > x.deadline).collect();
    assert!(late.is_empty(), "late jobs: {late:?}");
    let catch_up = Driver::diff(&u1, &u2, ResourceId::CPU);
    assert!(
        catch_up[b.index()] / (10.0 * DAY) > 0.8,
        "B right after: {}",
        catch_up[b.index()] / (10.0 * DAY)
    );
    let mid = Driver::diff(&u2, &u3, ResourceId::CPU);
    assert!(
        mid[a.index()] > 0.2 * 30.0 * DAY,
        "A not starved for months: {} days",
        mid[a.index()] / DAY
    );
    let later = Driver::diff(&u3, &u4, ResourceId::CPU);
    let a_frac = later[a.index()] / (later[0] + later[1]);
    assert!(
        (a_frac - 0.5).abs() < 0.08,
        "A's share 40-70 days after: {a_frac}"
    );
}
