//! The round-robin simulation: replays the current workload forward under weighted
//! round-robin and predicts, per resource, the shortfall, the saturated time, the busy time and
//! the idle instances now; per (project, resource) its own shortfall against its share, its
//! max-concurrent capacity shortfall and its predicted deadline misses; and per job its
//! projected finish time and whether it misses its deadline.
//!
//! Model (the seed design's, not the official client's address-ordered fill, reference §7 W1):
//! a fluid weighted round-robin. At every event (a job finishing), each coprocessor type and
//! then the CPU is divided among the projects that have pending jobs for it, in proportion to
//! their shares of it ([`crate::shares`]) (water-filling: a project that cannot use its whole share — too few
//! jobs, `max_concurrent` — gives the rest to the others). Projects are visited in real
//! priority order, and capacity left over by positive-share projects goes to zero-share
//! (backup) projects in that order. Inside a project, its allocation goes to its jobs in FIFO
//! order (running jobs first, then arrival order); a job given less than its usage runs
//! proportionally slower. GPU jobs' CPU usage is committed before CPU jobs share the rest, as
//! the run list does. Between events every rate is constant, so the simulation jumps from
//! completion to completion: O(events × (projects + running jobs)).

// Per-(project, resource) tables are indexed by both ids at once; index loops read better.
#![allow(clippy::needless_range_loop)]

mod sim;

use crate::model::{JobId, Time, World};
use crate::policy::Policy;
use sim::simulate_impl;

/// Per-resource outputs of the simulation.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ResourceSim {
    /// Instances of the resource (usable CPUs for the CPU).
    pub instances: f64,
    /// Instance-seconds of idleness between now and the end of the max buffer.
    pub shortfall: f64,
    /// Seconds from now during which every instance stays busy.
    pub saturated_time: f64,
    /// Seconds of work that will run ahead of any new job: the remaining instance-seconds of
    /// jobs predicted to miss their deadline (they run earliest-deadline-first), spread over the
    /// instances, fractional usage included (sent as `estimated_delay`). Other queued work
    /// shares the resource round-robin with a new job instead of delaying it.
    pub busy_time: f64,
    /// Instances idle right now.
    pub nidle_now: f64,
    /// Σ usage of jobs predicted to miss their deadline.
    pub deadline_missed_instances: f64,
}

/// Per-(project, resource) outputs of the simulation.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ProjectResourceSim {
    /// Instance-seconds, within the buffer window, by which the project's use of the resource
    /// fell below its share of the instances (the seed design's `shortfall(P)`).
    pub shortfall: f64,
    /// For projects with max-concurrent limits: instance-seconds within the buffer window that
    /// the project could use under its limits beyond what its own jobs use (BOINC's
    /// `mc_shortfall`; the fetch request size for it).
    pub capacity_shortfall: f64,
    /// Jobs predicted to miss their deadline.
    pub deadlines_missed: u32,
    /// Seconds from now until a new job of this project for this resource would start: the
    /// first simulated moment its queued jobs no longer use all it could get (its share of the
    /// instances, or more when others leave instances idle). Sent as `estimated_delay`; the
    /// server adds each job it sends to it and refuses jobs that would then miss.
    pub start_delay: f64,
    /// Runnable jobs of this project for this resource.
    pub n_runnable_jobs: u32,
    /// Σ usage of those jobs.
    pub nused_total: f64,
    /// Σ remaining wall seconds of those jobs.
    pub queue_secs: f64,
    /// Share of the instances the project is entitled to (fraction among the projects that
    /// can use the resource).
    pub share_frac: f64,
}

/// The full result of one simulation.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SimResult {
    /// Time the simulation started at.
    pub now: Time,
    /// Indexed by resource.
    pub resources: Vec<ResourceSim>,
    /// Indexed by project, then resource.
    pub projects: Vec<Vec<ProjectResourceSim>>,
    /// Projected finish time of each job, aligned with `World::jobs` (`None`: not simulated,
    /// i.e. finished, suspended or not runnable).
    pub job_finish: Vec<Option<Time>>,
    /// Jobs predicted to miss their (computation) deadline, as indices into `World::jobs`.
    pub missed: Vec<usize>,
    /// Jobs predicted to finish later than [`deadline_cushion`] before their report deadline,
    /// as sorted indices into `World::jobs`: the run list runs them earliest-deadline-first.
    /// It contains `missed` except for jobs whose delay bound is so short that BOINC's
    /// computation deadline (report deadline − minimum buffer) cannot be met by anyone (a 1 h
    /// deadline with a 2.4 h buffer): those are endangered only when really late.
    pub endangered: Vec<usize>,
}

/// Safety margin, in scheduling periods, added to the minimum buffer when judging whether a
/// job is endangered. The simulation is fluid, while the real run list hands out whole time
/// slices: a job predicted to finish just in time can be kept waiting for up to one slice the
/// simulation does not see, so one period is the margin that makes "predicted on time" mean
/// "on time".
pub const ENDANGERED_MARGIN_PERIODS: f64 = 1.0;

/// The cushion is never more than this fraction of the job's delay bound, so a project whose
/// deadlines are shorter than the buffer is not endangered (nor refused work) by construction.
pub const MAX_CUSHION_FRAC: f64 = 0.25;

/// How long before its report deadline a job with delay bound `latency` (report deadline −
/// arrival) should be done: the minimum buffer (BOINC's computation deadline) plus
/// [`ENDANGERED_MARGIN_PERIODS`] scheduling periods, capped at [`MAX_CUSHION_FRAC`] of the
/// delay bound. A job predicted to finish later is endangered (it runs earliest-deadline-first)
/// and work fetch keeps a project's queue short enough that its new jobs finish earlier.
pub fn deadline_cushion(prefs: &crate::model::Prefs, latency: f64) -> f64 {
    let full = prefs.work_buf_min() + ENDANGERED_MARGIN_PERIODS * prefs.sched_period();
    full.min(MAX_CUSHION_FRAC * latency.max(0.0))
}

impl SimResult {
    /// Ids of the jobs predicted to miss their deadline.
    pub fn missed_ids(&self, world: &World) -> Vec<JobId> {
        self.missed.iter().map(|&i| world.jobs[i].id).collect()
    }

    /// Whether the job at `index` in `World::jobs` is predicted to miss its deadline.
    pub fn misses(&self, index: usize) -> bool {
        self.missed.binary_search(&index).is_ok()
    }

    /// Whether the job at `index` in `World::jobs` is endangered: predicted to finish within
    /// [`deadline_cushion`] of its report deadline.
    pub fn endangered(&self, index: usize) -> bool {
        self.endangered.binary_search(&index).is_ok()
    }
}

/// The order in which a project runs its own jobs, in the simulation and in the run list:
/// earliest deadline first, a started job before an unstarted one, then arrival, then id.
/// With a project's usual fixed delay bound this is FIFO; unlike "running first" it never lets
/// the jobs of one project take turns (which would make all of them late together when each
/// one alone would finish in time).
pub fn project_order(a: &crate::model::Job, b: &crate::model::Job) -> std::cmp::Ordering {
    a.report_deadline
        .total_cmp(&b.report_deadline)
        .then(b.started().cmp(&a.started()))
        .then(a.received_time.total_cmp(&b.received_time))
        .then(a.id.cmp(&b.id))
}

/// Run the simulation at `now`. `priority[p]` orders projects (higher first) for leftover
/// capacity and tie-breaks; it must have one entry per project. `policy` says how shares are
/// split across resources (see [`crate::shares::share_fractions`]).
pub fn simulate(world: &World, now: Time, priority: &[f64], policy: &Policy) -> SimResult {
    simulate_impl(world, now, priority, policy, true)
}

/// The same simulation recomputing every allocation at every event (no incremental fast
/// path): slower, kept as the reference the fast path is tested against.
pub fn simulate_exhaustive(
    world: &World,
    now: Time,
    priority: &[f64],
    policy: &Policy,
) -> SimResult {
    simulate_impl(world, now, priority, policy, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    const H: f64 = 3600.0;

    /// Two CPUs; A (share 2) holds A1 (3 h) and A2 (5 h), B (share 1) holds B1 (20 h); the
    /// buffer window is 9 h (min 3 h + additional 6 h). Weighted round-robin gives A 4/3 CPU
    /// and B 2/3 until A1 ends at 3 h, then A2 and B1 one CPU each until A2 ends at 7 h, then
    /// one CPU idles. Total shortfall 2 instance-hours; A's own shortfall 1/3 × 4 h + 4/3 × 2 h
    /// = 4 instance-hours; B never falls below its share: 0.
    #[test]
    fn seed_two_cpu_shortfall_example() {
        let mut w = World::new(Host::cpu_only(2, 1e9, 8e9));
        w.prefs.work_buf_min_days = 3.0 / 24.0;
        w.prefs.work_buf_additional_days = 6.0 / 24.0;
        let a = w.add_project(Project::new("A", 2.0));
        let b = w.add_project(Project::new("B", 1.0));
        let aa = w.add_app(App::new(a, "a"));
        let ba = w.add_app(App::new(b, "b"));
        let av = w.add_app_version(AppVersion::cpu(aa, a, 1.0, 1e9));
        let bv = w.add_app_version(AppVersion::cpu(ba, b, 1.0, 1e9));
        let far = 1e9;
        w.add_job(Job::new(JobId(1), a, av, 3.0 * H * 1e9, 0.0, far));
        w.add_job(Job::new(JobId(2), a, av, 5.0 * H * 1e9, 1.0, far));
        w.add_job(Job::new(JobId(3), b, bv, 20.0 * H * 1e9, 0.0, far));
        let s = simulate(&w, 0.0, &[0.0, 0.0], &Policy::default());
        let cpu = &s.resources[0];
        assert!(
            (cpu.shortfall - 2.0 * H).abs() < 1e-6,
            "total {}",
            cpu.shortfall / H
        );
        assert!(
            (s.projects[0][0].shortfall - 4.0 * H).abs() < 1e-6,
            "A {}",
            s.projects[0][0].shortfall / H
        );
        assert!(
            s.projects[1][0].shortfall.abs() < 1e-6,
            "B {}",
            s.projects[1][0].shortfall / H
        );
        assert!((cpu.saturated_time - 7.0 * H).abs() < 1e-6);
        assert_eq!(cpu.nidle_now, 0.0);
        assert_eq!(s.job_finish[0], Some(3.0 * H));
        assert_eq!(s.job_finish[1], Some(7.0 * H));
        assert!(s.missed.is_empty());
    }

    #[test]
    fn late_job_is_flagged_and_idle_instances_counted() {
        let mut w = World::new(Host::cpu_only(4, 1e9, 8e9));
        w.prefs.work_buf_min_days = 0.0;
        let p = w.add_project(Project::new("P", 1.0));
        let app = w.add_app(App::new(p, "a"));
        let v = w.add_app_version(AppVersion::cpu(app, p, 1.0, 1e9));
        // 2 h of work due in 1 h: must be flagged; 3 of 4 CPUs idle now.
        w.add_job(Job::new(
            JobId(7),
            p,
            v,
            2.0 * H * 1e9,
            0.0,
            1.0 * H + 180.0,
        ));
        let s = simulate(&w, 0.0, &[0.0], &Policy::default());
        assert_eq!(s.missed_ids(&w), vec![JobId(7)]);
        assert_eq!(s.projects[0][0].deadlines_missed, 1);
        assert!((s.resources[0].nidle_now - 3.0).abs() < 1e-9);
        assert_eq!(s.resources[0].saturated_time, 0.0);
    }

    #[test]
    fn max_concurrent_caps_a_project_and_others_take_the_rest() {
        let mut w = World::new(Host::cpu_only(4, 1e9, 8e9));
        let p = w.add_project(Project::new("P", 100.0));
        let q = w.add_project(Project::new("Q", 1.0));
        let mut pa = App::new(p, "pa");
        pa.max_concurrent = Some(1);
        let pa = w.add_app(pa);
        let qa = w.add_app(App::new(q, "qa"));
        let pv = w.add_app_version(AppVersion::cpu(pa, p, 1.0, 1e9));
        let qv = w.add_app_version(AppVersion::cpu(qa, q, 1.0, 1e9));
        for i in 0..4 {
            w.add_job(Job::new(JobId(i), p, pv, H * 1e9, f64::from(i), 1e9));
            w.add_job(Job::new(JobId(10 + i), q, qv, H * 1e9, f64::from(i), 1e9));
        }
        let s = simulate(&w, 0.0, &[0.0, 0.0], &Policy::default());
        // P can run one job at a time: 4 h serially; Q fills the other 3 CPUs.
        assert_eq!(s.job_finish[6], Some(4.0 * H));
        assert_eq!(s.resources[0].nidle_now, 0.0);
        // Once Q's 4 jobs are done P still has work but can use only one CPU.
        assert!(s.projects[0][0].capacity_shortfall > 0.0);
    }

    /// A new job's start delay per project: C (no jobs) could start one at once; A's three
    /// one-hour jobs fill its CPU until 3 h; B's single ten-hour job uses all B can get, and
    /// the first idle CPU appears when A's queue runs dry at 3 h.
    #[test]
    fn start_delay_is_when_a_new_job_of_the_project_would_start() {
        let mut w = World::new(Host::cpu_only(2, 1e9, 8e9));
        let add = |w: &mut World, name: &str| {
            let p = w.add_project(Project::new(name, 1.0));
            let a = w.add_app(App::new(p, name));
            (p, w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9)))
        };
        let (a, av) = add(&mut w, "A");
        let (b, bv) = add(&mut w, "B");
        let (c, _) = add(&mut w, "C");
        for i in 0..3 {
            w.add_job(Job::new(JobId(i), a, av, H * 1e9, f64::from(i), 1e9));
        }
        w.add_job(Job::new(JobId(9), b, bv, 10.0 * H * 1e9, 0.0, 1e9));
        let s = simulate(&w, 0.0, &[0.0; 3], &Policy::default());
        let d = |p: ProjectId| s.projects[p.index()][0].start_delay;
        assert!((d(a) - 3.0 * H).abs() < 1e-6, "A {}", d(a) / H);
        assert!((d(b) - 3.0 * H).abs() < 1e-6, "B {}", d(b) / H);
        assert_eq!(d(c), 0.0);
        assert_eq!(s.job_finish[2], Some(3.0 * H));
    }

    /// Endangered means "predicted to finish within the cushion of the deadline": the minimum
    /// buffer plus one scheduling period, at most a quarter of the delay bound.
    #[test]
    fn endangered_uses_a_cushion_of_buffer_plus_one_period() {
        let mut w = World::new(Host::cpu_only(2, 1e9, 8e9));
        w.prefs.work_buf_min_days = 0.0; // 180 s floor
        let p = w.add_project(Project::new("P", 1.0));
        let app = w.add_app(App::new(p, "a"));
        let v = w.add_app_version(AppVersion::cpu(app, p, 1.0, 1e9));
        // Due in 10 h: cushion min(180 s + 1 h, 2.5 h) = 3780 s. 9.5 h of work finishes
        // inside it (endangered, though before the computation deadline), 8 h does not.
        w.add_job(Job::new(JobId(1), p, v, 9.5 * H * 1e9, 0.0, 10.0 * H));
        w.add_job(Job::new(JobId(2), p, v, 8.0 * H * 1e9, 0.0, 10.0 * H));
        let s = simulate(&w, 0.0, &[0.0], &Policy::default());
        assert_eq!(deadline_cushion(&w.prefs, 10.0 * H), 3780.0);
        assert!(s.endangered(0) && !s.misses(0));
        assert!(!s.endangered(1));

        // A 1 h delay bound under a 2.4 h minimum buffer: BOINC's computation deadline is
        // already past (missed), but the job is endangered only within 15 min of its deadline.
        let mut w2 = w.clone();
        w2.prefs.work_buf_min_days = 0.1;
        w2.jobs = vec![
            Job::new(JobId(3), p, v, 0.5 * H * 1e9, 0.0, H),
            Job::new(JobId(4), p, v, 0.8 * H * 1e9, 0.0, H),
        ];
        let s = simulate(&w2, 0.0, &[0.0], &Policy::default());
        assert_eq!(deadline_cushion(&w2.prefs, H), 900.0);
        assert!(s.misses(0) && !s.endangered(0));
        assert!(s.misses(1) && s.endangered(1));
    }

    /// A project's jobs run earliest deadline first: with one CPU, the later-deadline job that
    /// is already running waits for the earlier one instead of sharing the CPU with it.
    #[test]
    fn project_runs_its_jobs_earliest_deadline_first() {
        let mut w = World::new(Host::cpu_only(1, 1e9, 8e9));
        w.prefs.work_buf_min_days = 0.0;
        let p = w.add_project(Project::new("P", 1.0));
        let app = w.add_app(App::new(p, "a"));
        let v = w.add_app_version(AppVersion::cpu(app, p, 1.0, 1e9));
        let mut late = Job::new(JobId(1), p, v, 2.0 * H * 1e9, 0.0, 20.0 * H);
        late.state = JobState::Running;
        late.run_started_at = Some(0.0);
        w.add_job(late);
        w.add_job(Job::new(JobId(2), p, v, 2.0 * H * 1e9, 1.0, 10.0 * H));
        let s = simulate(&w, 0.0, &[0.0], &Policy::default());
        assert_eq!(s.job_finish[1], Some(2.0 * H));
        assert_eq!(s.job_finish[0], Some(4.0 * H));
    }
}
