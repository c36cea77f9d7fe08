//! Property tests: the run list never over-commits a resource beyond the documented rules
//! (see the `runlist` module docs), a feasible job set misses no deadline, and shares converge.

use super::driver::Driver;
use ferrite_sched::*;
use proptest::prelude::*;

const T0: f64 = 1.7e9;
const DAY: f64 = 86400.0;

struct R(SplitMix64);
impl R {
    fn f(&mut self) -> f64 {
        self.0.next_unit()
    }
    fn n(&mut self, k: u64) -> u64 {
        self.0.next_u64() % k
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.n(xs.len() as u64) as usize]
    }
}

/// A random world with GPUs, fractional and multi-thread usage, exclusions, limits, memory.
fn random_world(seed: u64) -> World {
    let mut r = R(SplitMix64::new(seed));
    let mut host = Host::cpu_only(1 + r.n(16) as u32, 1e9, 4e9 + r.f() * 28e9);
    for _ in 0..r.n(3) {
        host.coprocs.push(Coproc {
            kind: CoprocKind::Nvidia,
            count: 1 + r.n(4) as u32,
            peak_flops: 1e12,
        });
    }
    let ngpu = host.coprocs.len();
    let mut w = World::new(host);
    w.prefs.max_ncpus_pct = r.pick(&[0.0, 50.0, 75.0, 100.0]);
    w.user_active = r.n(2) == 0;
    let np = 1 + r.n(5);
    for pi in 0..np {
        let mut p = Project::new(format!("p{pi}"), r.pick(&[0.0, 10.0, 100.0, 200.0]));
        if r.n(4) == 0 {
            p.max_concurrent = Some(1 + r.n(4) as u32);
        }
        p.excluded_instances = (0..=ngpu)
            .map(|i| {
                if i > 0 && r.n(3) == 0 {
                    r.0.next_u64() & 0xF
                } else {
                    0
                }
            })
            .collect();
        p.suspended = r.n(10) == 0;
        let p = w.add_project(p);
        for ai in 0..1 + r.n(2) {
            let mut a = App::new(p, format!("a{ai}"));
            if r.n(4) == 0 {
                a.max_concurrent = Some(1 + r.n(3) as u32);
            }
            let a = w.add_app(a);
            w.add_app_version(AppVersion::cpu(
                a,
                p,
                r.pick(&[0.5, 1.0, 1.0, 2.0, 4.0, 8.0]),
                1e9,
            ));
            if ngpu > 0 && r.n(2) == 0 {
                let g = ResourceId(1 + r.n(ngpu as u64) as u8);
                let u = r.pick(&[0.25, 0.33, 0.5, 1.0, 2.0]);
                w.add_app_version(AppVersion::coproc(
                    a,
                    p,
                    g,
                    u,
                    r.pick(&[0.05, 0.2, 1.0]),
                    1e11,
                ));
            }
        }
    }
    let nv = w.app_versions.len() as u64;
    for id in 0..r.n(80) {
        let v = AppVersionId(r.n(nv) as u32);
        let p = w.app_versions[v.index()].project;
        let mut j = Job::new(
            JobId(id as u32),
            p,
            v,
            (0.1 + r.f() * 10.0) * 3600e9,
            T0 - 1e5,
            T0 + r.f() * 5.0 * DAY,
        );
        j.working_set_bytes = r.f() * 4e9;
        j.runnable = r.n(10) != 0;
        j.suspended = r.n(12) == 0;
        match r.n(4) {
            0 => {
                j.state = JobState::Running;
                j.elapsed = r.f() * 3600.0;
                j.run_started_at = Some(T0 - r.f() * 7200.0);
                j.checkpoint_elapsed = j.elapsed * r.f();
                j.last_checkpoint_time = Some(T0 - r.f() * 600.0);
                j.fraction_done = 0.01 + r.f() * 0.5;
                j.elapsed_at_fraction = j.elapsed;
            }
            1 => {
                j.state = JobState::Preempted {
                    in_memory: r.n(2) == 0,
                };
                j.elapsed = r.f() * 3600.0;
                j.checkpoint_elapsed = j.elapsed * r.f();
            }
            2 if r.n(4) == 0 => {
                j.state = JobState::Finished {
                    completed_time: T0 - 100.0,
                    ready_to_report: true,
                };
            }
            _ => {}
        }
        w.add_job(j);
    }
    w
}

fn check_run_list(w: &World, run: &RunDecision) -> Result<(), TestCaseError> {
    let ncpus = w.instances(ResourceId::CPU);
    let mut cpu = 0.0;
    let mut inst: Vec<Vec<f64>> = (0..w.n_resources())
        .map(|r| vec![0.0; w.instances(ResourceId(r as u8)) as usize])
        .collect();
    let mut per_app = vec![0u32; w.apps.len()];
    let mut per_proj = vec![0u32; w.projects.len()];
    let mut ram = 0.0;
    let mut seen = std::collections::HashSet::new();
    for e in &run.run {
        prop_assert!(seen.insert(e.job), "job listed twice");
        let j = w.jobs.iter().find(|j| j.id == e.job).expect("known job");
        prop_assert!(j.state.is_unfinished() && j.runnable && !j.suspended);
        prop_assert!(!w.projects[j.project.index()].suspended);
        let v = w.version_of(j);
        if v.avg_ncpus > 0.0 {
            prop_assert!(
                cpu < ncpus - 1e-12 + 1e-9,
                "CPU committed {cpu} of {ncpus} before admitting {:?}",
                e.job
            );
        }
        if v.resource.is_cpu() && v.avg_ncpus > 1.0 {
            prop_assert!(
                cpu + v.avg_ncpus.min(ncpus) <= ncpus + 1e-9,
                "multi-thread {:?} ({} CPUs) admitted with {cpu} of {ncpus} committed",
                e.job,
                v.avg_ncpus
            );
        }
        cpu += v.avg_ncpus;
        if !v.resource.is_cpu() {
            let r = v.resource.index();
            let excluded = w.projects[j.project.index()].excluded_mask(v.resource);
            prop_assert_eq!(e.instances & excluded, 0, "excluded instance used");
            let n = e.instances.count_ones() as usize;
            if v.coproc_usage < 1.0 {
                prop_assert_eq!(n, 1);
            } else {
                prop_assert_eq!(n, v.coproc_usage.floor() as usize);
            }
            for (k, slot) in inst[r].iter_mut().enumerate() {
                if e.instances & (1 << k) != 0 {
                    *slot += v.coproc_usage.min(1.0);
                    prop_assert!(
                        *slot <= 1.0 + 1e-9,
                        "instance {k} of resource {r} over-committed"
                    );
                }
            }
            prop_assert_eq!(e.instances >> inst[r].len(), 0, "instance out of range");
        } else {
            prop_assert_eq!(e.instances, 0);
        }
        per_app[v.app.index()] += 1;
        per_proj[j.project.index()] += 1;
        if let Some(m) = w.apps[v.app.index()].max_concurrent {
            prop_assert!(per_app[v.app.index()] <= m);
        }
        if let Some(m) = w.projects[j.project.index()].max_concurrent {
            prop_assert!(per_proj[j.project.index()] <= m);
        }
        // A job that has run counts what was measured of it; one that has not, the largest
        // working set measured for its version (a fresh scheduler knows only this world's).
        ram += if j.started() {
            j.working_set_bytes
        } else {
            w.jobs
                .iter()
                .filter(|x| x.started() && x.app_version == j.app_version)
                .map(|x| x.working_set_bytes)
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
                .filter(|&m| m > 0.0)
                .unwrap_or(j.working_set_bytes)
        };
    }
    prop_assert!(
        ram <= w.host.ram_bytes * w.prefs.ram_frac(w.user_active) + 1.0,
        "RAM budget exceeded"
    );
    for p in &run.preempt {
        prop_assert!(!seen.contains(&p.job), "job both run and preempted");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn run_list_never_overcommits(seed in any::<u64>(), edf in any::<bool>()) {
        let w = random_world(seed);
        let policy = Policy { edf, ..Policy::default() };
        let mut s = Scheduler::new(policy);
        let out = s.pass(&w, T0);
        check_run_list(&w, &out.run)?;
        // Idle CPUs are reported consistently.
        let used: f64 = out.run.run.iter().map(|e| {
            let j = w.jobs.iter().find(|j| j.id == e.job).expect("known");
            w.version_of(j).avg_ncpus
        }).sum();
        prop_assert!((out.run.idle_cpus - (w.instances(ResourceId::CPU) - used).max(0.0)).abs() < 1e-6);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// The simulation's incremental fast path gives the same answers as recomputing every
    /// allocation at every event.
    #[test]
    fn incremental_simulation_matches_exhaustive(seed in any::<u64>()) {
        let w = random_world(seed);
        let prio: Vec<f64> = (0..w.projects.len()).map(|p| -(p as f64)).collect();
        let a = rrsim::simulate(&w, T0, &prio, &Policy::default());
        let b = rrsim::simulate_exhaustive(&w, T0, &prio, &Policy::default());
        prop_assert_eq!(&a.missed, &b.missed);
        for (x, y) in a.job_finish.iter().zip(&b.job_finish) {
            match (x, y) {
                (Some(x), Some(y)) => prop_assert!((x - y).abs() < 1e-6 * (1.0 + (y - T0).abs()), "{x} vs {y}"),
                _ => prop_assert_eq!(x, y),
            }
        }
        for (ra, rb) in a.resources.iter().zip(&b.resources) {
            prop_assert!((ra.shortfall - rb.shortfall).abs() < 1e-3 * (1.0 + rb.shortfall));
            prop_assert!((ra.saturated_time - rb.saturated_time).abs() < 1e-3 * (1.0 + rb.saturated_time));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// One CPU, jobs with deadlines for which earliest-deadline-first meets every deadline
    /// (with a margin of a few scheduling steps): none is missed.
    #[test]
    fn feasible_job_set_meets_every_deadline(
        shares in proptest::collection::vec(1u32..5, 1..4),
        jobs in proptest::collection::vec((0usize..3, 600u32..7200), 1..9),
        slack in 0.0f64..0.3,
    ) {
        let mut w = World::new(Host::cpu_only(1, 1e9, 8e9));
        w.prefs.work_buf_min_days = 0.0;
        w.prefs.work_buf_additional_days = 0.0;
        let mut versions = Vec::new();
        for (i, s) in shares.iter().enumerate() {
            let p = w.add_project(Project::new(format!("p{i}"), f64::from(*s)));
            let a = w.add_app(App::new(p, "a"));
            versions.push(w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9)));
        }
        let mut d = Driver::new(w, Policy::default(), T0, 60.0);
        // Jobs in the generated order are the EDF order: deadlines grow with the cumulative work.
        let n = jobs.len() as f64;
        let mut cum = 0.0;
        for (k, (p, secs)) in jobs.iter().enumerate() {
            let v = versions[p % versions.len()];
            cum += f64::from(*secs);
            let margin = 180.0 + 120.0 * n + 60.0 * k as f64;
            d.add_job(v, f64::from(*secs), cum * (1.0 + slack) + margin);
        }
        let total = jobs.len();
        let end = T0 + cum * 3.0 + 2.0 * DAY;
        while d.done.len() < total && d.now < end {
            d.step_once();
        }
        prop_assert_eq!(d.done.len(), total);
        let late: Vec<_> = d.done.iter().filter(|x| x.finished > x.deadline).collect();
        prop_assert!(late.is_empty(), "late: {:?}", late);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Projects that always have work get CPU time in proportion to their shares.
    #[test]
    fn shares_converge_on_long_runs(
        ncpus in 1u32..4,
        shares in proptest::collection::vec(1u32..5, 2..5),
        lens in proptest::collection::vec(1800u32..10800, 4),
    ) {
        let mut w = World::new(Host::cpu_only(ncpus, 1e9, 8e9));
        w.prefs.work_buf_min_days = 0.0;
        w.prefs.work_buf_additional_days = 0.0;
        let mut versions = Vec::new();
        for (i, s) in shares.iter().enumerate() {
            let p = w.add_project(Project::new(format!("p{i}"), f64::from(*s) * 100.0));
            let a = w.add_app(App::new(p, "a"));
            versions.push(w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9)));
        }
        let policy = Policy { rec_half_life: DAY, max_accounting_gap: 1000.0, ..Policy::default() };
        let mut d = Driver::new(w, policy, T0, 300.0);
        let refill = |d: &mut Driver| {
            for (i, &v) in versions.iter().enumerate() {
                while d.queued(v) < ncpus as usize + 1 {
                    d.add_job(v, f64::from(lens[i % lens.len()]), 60.0 * DAY);
                }
            }
        };
        d.run_until(T0 + 4.0 * DAY, refill);
        let before = d.used.clone();
        d.run_until(T0 + 14.0 * DAY, refill);
        let used = Driver::diff(&before, &d.used, ResourceId::CPU);
        let total: f64 = used.iter().sum();
        let share_total: f64 = shares.iter().map(|s| f64::from(*s)).sum();
        prop_assert!(total > 0.97 * 10.0 * DAY * f64::from(ncpus), "CPUs idle: {}", total);
        for (i, s) in shares.iter().enumerate() {
            let want = f64::from(*s) / share_total;
            let got = used[i] / total;
            prop_assert!((got - want).abs() < 0.06, "project {i}: got {got:.3}, share {want:.3} ({used:?})");
        }
    }
}
