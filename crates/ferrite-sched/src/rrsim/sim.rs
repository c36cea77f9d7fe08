//! The round-robin simulation's steps: the simulated jobs and their queues, the projects'
//! max-concurrent limits, and the event loop ([`Sim`]) that allocates the resources, jumps
//! to the next completion, accounts for the interval and advances the jobs.

// Per-(project, resource) tables are indexed by both ids at once; index loops read better.
#![allow(clippy::needless_range_loop)]

use super::{deadline_cushion, project_order, ProjectResourceSim, ResourceSim, SimResult};
use crate::estimate::remaining_secs;
use crate::model::{ResourceId, Time, World};
use crate::policy::Policy;

/// Working record of a simulated job.
#[derive(Clone, Debug)]
struct SimJob {
    /// Index in `World::jobs`.
    index: usize,
    /// Remaining wall seconds at full rate (already divided by availability).
    left: f64,
    /// Main-resource usage.
    usage: f64,
    /// CPU usage (for GPU jobs, the feeder's CPUs).
    cpu: f64,
    /// App index, for per-app max-concurrent.
    app: usize,
    /// Project index.
    project: usize,
    /// Resource index.
    res: usize,
    /// Computation deadline (report deadline minus the min buffer).
    deadline: Time,
    /// Finishing after this makes the job endangered (see [`deadline_cushion`]).
    safe_by: Time,
    /// Current rate fraction (0..=1).
    rate: f64,
    /// Finished in the simulation.
    done: bool,
}

const EPS: f64 = 1e-9;

/// Per-project simulation bookkeeping for one resource.
#[derive(Clone, Debug, Default)]
struct Queue {
    /// Indices into the `SimJob` vector, FIFO order.
    jobs: Vec<usize>,
    /// First index not yet known to be done.
    head: usize,
}

/// Raw cap of a project without max-concurrent limits on one resource: the usage of its
/// first pending jobs, up to `limit` (the instances). Advances the queue head past done jobs.
fn walk_raw_cap(q: &mut Queue, sjobs: &[SimJob], limit: f64) -> f64 {
    while q.head < q.jobs.len() && sjobs[q.jobs[q.head]].done {
        q.head += 1;
    }
    let mut c = 0.0;
    for &sj in &q.jobs[q.head..] {
        if c >= limit - EPS {
            break;
        }
        if !sjobs[sj].done {
            c += sjobs[sj].usage;
        }
    }
    c.min(limit)
}

pub(super) fn simulate_impl(
    world: &World,
    now: Time,
    priority: &[f64],
    policy: &Policy,
    incremental: bool,
) -> SimResult {
    let mut sim = Sim::new(world, now, priority, policy);
    sim.run(incremental);
    sim.finish()
}

/// Max-concurrent limits of the projects and apps, fixed for one simulation.
struct Limits {
    /// Per project: its `max_concurrent`.
    proj: Vec<Option<u32>>,
    /// Per app: its `max_concurrent`.
    app: Vec<Option<u32>>,
    /// Per project: it or one of its apps has a limit.
    has: Vec<bool>,
    /// Per project and resource: the largest instance count it could use under its limits
    /// (all the instances for a project without limits).
    could_use: Vec<Vec<f64>>,
}

impl Limits {
    fn new(world: &World, instances: &[f64]) -> Limits {
        let (np, nr) = (world.projects.len(), instances.len());
        let proj: Vec<Option<u32>> = world.projects.iter().map(|p| p.max_concurrent).collect();
        let app: Vec<Option<u32>> = world.apps.iter().map(|a| a.max_concurrent).collect();
        let has: Vec<bool> = (0..np)
            .map(|p| {
                proj[p].is_some()
                    || world
                        .apps
                        .iter()
                        .any(|a| a.project.index() == p && a.max_concurrent.is_some())
            })
            .collect();
        let could_use = (0..np)
            .map(|p| {
                (0..nr)
                    .map(|r| {
                        if has[p] {
                            Self::max_use(world, p, r, proj[p], instances[r])
                        } else {
                            instances[r]
                        }
                    })
                    .collect()
            })
            .collect();
        Limits {
            proj,
            app,
            has,
            could_use,
        }
    }

    /// Instances of resource `r` project `p` could use at most under its own and its apps'
    /// limits (`proj_mc`: its own).
    fn max_use(world: &World, p: usize, r: usize, proj_mc: Option<u32>, instances: f64) -> f64 {
        let mut per_app_cap = 0.0;
        for (ai, a) in world.apps.iter().enumerate() {
            if a.project.index() != p {
                continue;
            }
            let max_use = world
                .app_versions
                .iter()
                .filter(|v| v.app.index() == ai && v.resource.index() == r)
                .map(|v| v.usage())
                .fold(0.0, f64::max);
            if max_use > 0.0 {
                let n = a.max_concurrent.map_or(f64::INFINITY, f64::from);
                per_app_cap += n * max_use;
            }
        }
        let pcap = proj_mc.map_or(f64::INFINITY, |n| {
            let u = world
                .app_versions
                .iter()
                .filter(|v| v.project.index() == p && v.resource.index() == r)
                .map(|v| v.usage())
                .fold(0.0, f64::max);
            f64::from(n) * u
        });
        per_app_cap.min(pcap).min(instances)
    }
}

/// The state of one simulation: its fixed inputs, the simulated jobs, the result being built
/// and scratch buffers reused across events.
struct Sim<'a> {
    world: &'a World,
    now: Time,
    /// End of the buffer window.
    buf_end: Time,
    instances: Vec<f64>,
    share_frac: Vec<Vec<f64>>,
    /// Projects in priority order (highest first), ties by index.
    by_priority: Vec<usize>,
    limits: Limits,
    sjobs: Vec<SimJob>,
    /// Per project and resource.
    queues: Vec<Vec<Queue>>,
    out: SimResult,
    /// Simulated time.
    t: Time,
    /// Per project: instances given on the resource being allocated.
    alloc: Vec<f64>,
    /// Per project: instances it could use on the resource being allocated.
    cap: Vec<f64>,
    proj_running: Vec<u32>,
    app_running: Vec<u32>,
    /// Simulated jobs running (rate > 0).
    active: Vec<usize>,
    /// Per resource: instances in use.
    used: Vec<f64>,
    /// Per project and resource: instances in use.
    proj_used: Vec<Vec<f64>>,
    saturated_set: Vec<bool>,
    /// Per (project, resource): the moment a new job would start is known.
    start_found: Vec<Vec<bool>>,
    /// Cached raw caps of projects without max-concurrent limits (None = recompute).
    raw_cap: Vec<Vec<Option<f64>>>,
    /// Per project: CPU instances allocated at the last full allocation.
    alloc_cpu: Vec<f64>,
    /// Projects whose finished CPU jobs just hand their allocation on (fast path).
    fast_projects: Vec<usize>,
    /// Simulated jobs finished at the last event.
    finished: Vec<usize>,
}

impl<'a> Sim<'a> {
    fn new(world: &'a World, now: Time, priority: &[f64], policy: &Policy) -> Sim<'a> {
        let nr = world.n_resources();
        let np = world.projects.len();
        let instances: Vec<f64> = (0..nr)
            .map(|r| world.instances(ResourceId(r as u8)))
            .collect();

        // Which projects can use which resource (they have an app version for it and may get
        // work for it), and their share fractions.
        let mut can_use = vec![vec![false; nr]; np];
        for v in &world.app_versions {
            can_use[v.project.index()][v.resource.index()] = true;
        }
        let share_frac = crate::shares::share_fractions(world, &can_use, policy);
        let out = Self::empty_result(world, now, &instances, &share_frac);

        let mut by_priority: Vec<usize> = (0..np).collect();
        by_priority.sort_by(|&a, &b| {
            let pa = priority.get(a).copied().unwrap_or(0.0);
            let pb = priority.get(b).copied().unwrap_or(0.0);
            pb.total_cmp(&pa).then(a.cmp(&b))
        });
        let limits = Limits::new(world, &instances);

        let mut sim = Sim {
            world,
            now,
            buf_end: now + world.prefs.work_buf_total(),
            instances,
            share_frac,
            by_priority,
            limits,
            sjobs: Vec::new(),
            queues: vec![vec![Queue::default(); nr]; np],
            out,
            t: now,
            alloc: vec![0.0; np],
            cap: vec![0.0; np],
            proj_running: vec![0; np],
            app_running: vec![0; world.apps.len()],
            active: Vec::new(),
            used: vec![0.0; nr],
            proj_used: vec![vec![0.0; nr]; np],
            saturated_set: vec![false; nr],
            start_found: vec![vec![false; nr]; np],
            raw_cap: vec![vec![None; nr]; np],
            alloc_cpu: vec![0.0; np],
            fast_projects: Vec::new(),
            finished: Vec::new(),
        };
        sim.collect_jobs();
        sim
    }

    /// The result before any event: instances and share fractions filled in.
    fn empty_result(
        world: &World,
        now: Time,
        instances: &[f64],
        share_frac: &[Vec<f64>],
    ) -> SimResult {
        SimResult {
            now,
            resources: instances
                .iter()
                .map(|&instances| ResourceSim {
                    instances,
                    ..ResourceSim::default()
                })
                .collect(),
            projects: share_frac
                .iter()
                .map(|fracs| {
                    fracs
                        .iter()
                        .map(|&share_frac| ProjectResourceSim {
                            share_frac,
                            ..Default::default()
                        })
                        .collect()
                })
                .collect(),
            job_finish: vec![None; world.jobs.len()],
            missed: Vec::new(),
            endangered: Vec::new(),
        }
    }

    /// The runnable jobs become simulated jobs, queued per project and resource in the run
    /// list's order ([`project_order`]); each project's queue figures are counted.
    fn collect_jobs(&mut self) {
        let world = self.world;
        let buf_min = world.prefs.work_buf_min();
        let mut order: Vec<usize> = (0..world.jobs.len())
            .filter(|&i| {
                let j = &world.jobs[i];
                j.state.is_unfinished()
                    && j.runnable
                    && !j.suspended
                    && !world.projects[j.project.index()].suspended
            })
            .collect();
        order.sort_by(|&a, &b| project_order(&world.jobs[a], &world.jobs[b]));
        self.sjobs.reserve(order.len());
        for &i in &order {
            let j = &world.jobs[i];
            let v = world.version_of(j);
            let r = v.resource;
            let avail = world.time_stats.availability(r);
            let left = remaining_secs(world, j) / avail;
            // Garbage estimates must not stall the event loop: NaN or negative counts as
            // nothing left, infinite as "longer than any deadline" (~30,000 years).
            let left = if left.is_nan() || left < 0.0 {
                0.0
            } else {
                left.min(1e12)
            };
            let usage = v.usage().max(1e-3);
            let pr = &mut self.out.projects[j.project.index()][r.index()];
            pr.n_runnable_jobs += 1;
            pr.nused_total += usage;
            pr.queue_secs += left;
            let idx = self.sjobs.len();
            self.sjobs.push(SimJob {
                index: i,
                left,
                usage,
                cpu: v.avg_ncpus.max(0.0),
                app: v.app.index(),
                project: j.project.index(),
                res: r.index(),
                deadline: j.report_deadline - buf_min,
                safe_by: j.report_deadline
                    - deadline_cushion(&world.prefs, j.report_deadline - j.received_time),
                rate: 0.0,
                done: false,
            });
            self.queues[j.project.index()][r.index()].jobs.push(idx);
        }
    }

    /// The event loop: allocate, jump to the next completion, account for the interval,
    /// advance the jobs, until nothing runs.
    fn run(&mut self, incremental: bool) {
        // Fast path: when only CPU jobs of projects without max-concurrent limits finished and
        // their projects can still use as much as before, every allocation stays the same;
        // those projects just hand their CPU allocation to their next jobs.
        let mut full = true;
        let mut first = true;
        loop {
            if full {
                self.allocate_all();
            } else {
                self.reallocate_fast();
            }
            if first {
                for r in 0..self.instances.len() {
                    self.out.resources[r].nidle_now = (self.instances[r] - self.used[r]).max(0.0);
                }
                first = false;
            }
            if self.active.is_empty() {
                break;
            }
            let Some(dt) = self.next_event() else {
                break;
            };
            let t_next = self.t + dt;
            self.account_interval(t_next);
            self.advance(dt, t_next);
            self.t = t_next;
            full = self.what_changed(incremental);
        }
    }

    /// Fast path: the projects in `fast_projects` hand their CPU allocation to their next
    /// jobs; everything else keeps running as it was.
    fn reallocate_fast(&mut self) {
        let (sjobs, fast_projects) = (&self.sjobs, &self.fast_projects);
        self.active.retain(|&s| {
            let sj = &sjobs[s];
            let redistributed = sj.res == 0 && fast_projects.contains(&sj.project);
            !sj.done && !redistributed
        });
        for &p in &self.fast_projects {
            let mut a = self.alloc_cpu[p];
            let q = &self.queues[p][0];
            for &sj in &q.jobs[q.head..] {
                if a <= EPS {
                    break;
                }
                if self.sjobs[sj].done {
                    continue;
                }
                let give = a.min(self.sjobs[sj].usage);
                a -= give;
                self.sjobs[sj].rate = give / self.sjobs[sj].usage;
                self.active.push(sj);
            }
        }
    }

    /// Allocates every resource from scratch: each coprocessor type, then the CPUs left by
    /// the GPU jobs' CPU parts.
    fn allocate_all(&mut self) {
        for &s in &self.active {
            self.sjobs[s].rate = 0.0;
        }
        self.active.clear();
        self.proj_running.iter_mut().for_each(|x| *x = 0);
        self.app_running.iter_mut().for_each(|x| *x = 0);
        self.used.iter_mut().for_each(|x| *x = 0.0);
        for pu in self.proj_used.iter_mut() {
            pu.iter_mut().for_each(|x| *x = 0.0);
        }
        let nr = self.instances.len();
        let mut gpu_cpu = 0.0;
        for r in (1..nr).rev().chain(std::iter::once(0)) {
            let capacity = if r == 0 {
                (self.instances[0] - gpu_cpu).max(0.0)
            } else {
                self.instances[r]
            };
            if !self.compute_caps(r, capacity) {
                self.nothing_queued(r, capacity);
                continue;
            }
            let remaining = self.water_fill(capacity);
            if r == 0 {
                self.alloc_cpu.copy_from_slice(&self.alloc);
            }
            self.note_start_delays(r, capacity, remaining);
            gpu_cpu += self.distribute(r);
        }
        self.used[0] += gpu_cpu;
    }

    /// Sets each project's cap on resource `r` (how much it could use, walking its queued
    /// jobs under its limits) and zeroes its allocation; whether anyone could use any.
    /// Without max-concurrent limits a project's raw cap only changes when one of its jobs
    /// finishes, so it is cached until then.
    fn compute_caps(&mut self, r: usize, capacity: f64) -> bool {
        let mut any = false;
        for p in 0..self.queues.len() {
            self.cap[p] = if self.limits.has[p] {
                self.limited_cap(p, r, capacity)
            } else {
                let raw = match self.raw_cap[p][r] {
                    Some(raw) => raw,
                    None => {
                        let raw =
                            walk_raw_cap(&mut self.queues[p][r], &self.sjobs, self.instances[r]);
                        self.raw_cap[p][r] = Some(raw);
                        raw
                    }
                };
                raw.min(capacity)
            };
            self.alloc[p] = 0.0;
            any |= self.cap[p] > EPS;
        }
        any
    }

    /// Cap of project `p`, which has max-concurrent limits, on resource `r`: the usage of its
    /// first pending jobs its own and its apps' limits let run, up to `capacity`.
    fn limited_cap(&mut self, p: usize, r: usize, capacity: f64) -> f64 {
        let q = &mut self.queues[p][r];
        while q.head < q.jobs.len() && self.sjobs[q.jobs[q.head]].done {
            q.head += 1;
        }
        let q = &self.queues[p][r];
        let mut c = 0.0;
        let mut pr = self.proj_running[p];
        let mut counted_apps: Vec<(usize, u32)> = Vec::new();
        for &sj in &q.jobs[q.head..] {
            if c >= capacity - EPS {
                break;
            }
            let s = &self.sjobs[sj];
            if s.done {
                continue;
            }
            if self.limits.proj[p].is_some_and(|m| pr >= m) {
                break;
            }
            if let Some(m) = self.limits.app[s.app] {
                let n = self.app_running[s.app]
                    + counted_apps
                        .iter()
                        .find(|(a, _)| *a == s.app)
                        .map_or(0, |x| x.1);
                if n >= m {
                    continue;
                }
                match counted_apps.iter_mut().find(|(a, _)| *a == s.app) {
                    Some(x) => x.1 += 1,
                    None => counted_apps.push((s.app, 1)),
                }
            }
            pr += 1;
            c += s.usage;
        }
        c.min(capacity)
    }

    /// Nobody has a job queued for resource `r`: a new job of anyone starts now.
    fn nothing_queued(&mut self, r: usize, capacity: f64) {
        if r == 0 {
            self.alloc_cpu.iter_mut().for_each(|x| *x = 0.0);
        }
        if capacity <= EPS {
            return;
        }
        for p in 0..self.queues.len() {
            if !self.start_found[p][r] && (!self.limits.has[p] || self.limits.could_use[p][r] > EPS)
            {
                self.start_found[p][r] = true;
                self.out.projects[p][r].start_delay = self.t - self.now;
            }
        }
    }

    /// Divides `capacity` among the projects up to their caps: water-filling by resource
    /// share, then what is left to zero-share projects by priority. Returns what nobody took.
    fn water_fill(&mut self, capacity: f64) -> f64 {
        let projects = &self.world.projects;
        let (cap, alloc) = (&self.cap, &mut self.alloc);
        let mut remaining = capacity;
        loop {
            let wsum: f64 = (0..projects.len())
                .filter(|&p| cap[p] - alloc[p] > EPS && projects[p].resource_share > 0.0)
                .map(|p| projects[p].resource_share)
                .sum();
            if wsum <= 0.0 || remaining <= EPS {
                break;
            }
            let mut capped = false;
            let mut given = 0.0;
            for &p in &self.by_priority {
                let room = cap[p] - alloc[p];
                if room <= EPS || projects[p].resource_share <= 0.0 {
                    continue;
                }
                let want = remaining * projects[p].resource_share / wsum;
                if want >= room {
                    alloc[p] += room;
                    given += room;
                    capped = true;
                } else {
                    alloc[p] += want;
                    given += want;
                }
            }
            remaining -= given;
            if !capped {
                break;
            }
        }
        for &p in &self.by_priority {
            if remaining <= EPS {
                break;
            }
            if projects[p].resource_share <= 0.0 && cap[p] > EPS {
                let g = cap[p].min(remaining);
                alloc[p] += g;
                remaining -= g;
            }
        }
        remaining
    }

    /// When would a new job of each project start on resource `r`? As soon as its queued
    /// jobs cannot use all of its share, or use all they can while instances idle
    /// (`remaining`).
    fn note_start_delays(&mut self, r: usize, capacity: f64, remaining: f64) {
        for p in 0..self.queues.len() {
            if self.start_found[p][r] {
                continue;
            }
            let limit = if self.limits.has[p] {
                self.limits.could_use[p][r]
            } else {
                f64::INFINITY
            };
            let (cap, alloc) = (self.cap[p], self.alloc[p]);
            let entitled = (self.share_frac[p][r] * capacity).min(limit);
            let below_share = cap < entitled - EPS;
            let idle_room = remaining > EPS && alloc >= cap - EPS && cap < limit - EPS;
            if below_share || idle_room {
                self.start_found[p][r] = true;
                self.out.projects[p][r].start_delay = self.t - self.now;
            }
        }
    }

    /// Gives each project's allocation on resource `r` to its queued jobs in order, under its
    /// limits. Returns the CPUs the GPU jobs so started use.
    fn distribute(&mut self, r: usize) -> f64 {
        let mut gpu_cpu = 0.0;
        for p in 0..self.queues.len() {
            let mut a = self.alloc[p];
            if a <= EPS {
                continue;
            }
            let q = &self.queues[p][r];
            for &sj in &q.jobs[q.head..] {
                if a <= EPS {
                    break;
                }
                let s = &mut self.sjobs[sj];
                if s.done {
                    continue;
                }
                if self.limits.proj[p].is_some_and(|m| self.proj_running[p] >= m) {
                    break;
                }
                if self.limits.app[s.app].is_some_and(|m| self.app_running[s.app] >= m) {
                    continue;
                }
                let give = a.min(s.usage);
                let rate = give / s.usage;
                a -= give;
                self.proj_running[p] += 1;
                self.app_running[s.app] += 1;
                let cpu = s.cpu * rate;
                s.rate = rate;
                self.active.push(sj);
                self.used[r] += give;
                self.proj_used[p][r] += give;
                if r != 0 {
                    gpu_cpu += cpu;
                    self.proj_used[p][0] += cpu;
                }
            }
        }
        gpu_cpu
    }

    /// Seconds to the next completion, `None` when nothing would ever finish.
    fn next_event(&self) -> Option<f64> {
        let dt = self
            .active
            .iter()
            .map(|&s| self.sjobs[s].left / self.sjobs[s].rate)
            .fold(f64::INFINITY, f64::min)
            .max(0.0);
        dt.is_finite().then_some(dt)
    }

    /// Shortfalls, capacity shortfalls and the saturated time over `[t, t_next]`.
    fn account_interval(&mut self, t_next: Time) {
        let t = self.t;
        let in_window = (t_next.min(self.buf_end) - t).max(0.0);
        for r in 0..self.instances.len() {
            let instances = self.instances[r];
            let idle = (instances - self.used[r]).max(0.0);
            if idle > 1e-6 {
                self.out.resources[r].shortfall += idle * in_window;
                if !self.saturated_set[r] {
                    self.saturated_set[r] = true;
                    self.out.resources[r].saturated_time = t - self.now;
                }
            }
            if in_window > 0.0 {
                for p in 0..self.queues.len() {
                    let want = instances * self.share_frac[p][r];
                    let used = self.proj_used[p][r];
                    let pr = &mut self.out.projects[p][r];
                    pr.shortfall += (want - used).max(0.0) * in_window;
                    // Not only the idle instances: a project its limits keep to fewer
                    // instances is asked for those even while others fill the rest (as
                    // BOINC's `mc_shortfall`), or it would get nothing while they have work.
                    if self.limits.has[p] {
                        let could = (self.limits.could_use[p][r] - used).max(0.0);
                        pr.capacity_shortfall += could * in_window;
                    }
                }
            }
        }
    }

    /// Runs the active jobs for `dt`; those that finish (at `t_next`) are recorded, late or
    /// endangered ones counted.
    fn advance(&mut self, dt: f64, t_next: Time) {
        let world = self.world;
        for &s in &self.active {
            let sj = &mut self.sjobs[s];
            sj.left -= sj.rate * dt;
            if sj.left > 1e-6 * (1.0 + dt) {
                continue;
            }
            sj.left = 0.0;
            sj.done = true;
            self.out.job_finish[sj.index] = Some(t_next);
            self.finished.push(s);
            if t_next > sj.safe_by {
                self.out.endangered.push(sj.index);
            }
            if t_next > sj.deadline {
                let j = &world.jobs[sj.index];
                let r = world.version_of(j).resource.index();
                self.out.resources[r].busy_time +=
                    remaining_secs(world, j) * sj.usage / self.instances[r].max(1.0);
                self.out.missed.push(sj.index);
                self.out.projects[j.project.index()][r].deadlines_missed += 1;
                self.out.resources[r].deadline_missed_instances += sj.usage;
            }
        }
    }

    /// After an event: whether every allocation must be recomputed (`true`), or only the
    /// projects in `fast_projects` hand their CPUs on (see [`Sim::run`]).
    fn what_changed(&mut self, incremental: bool) -> bool {
        let mut full = false;
        self.fast_projects.clear();
        for &s in &self.finished {
            let (p, r) = (self.sjobs[s].project, self.sjobs[s].res);
            let old = self.raw_cap[p][r];
            self.raw_cap[p][r] = None;
            if r != 0 || self.limits.has[p] {
                full = true;
                continue;
            }
            let raw = walk_raw_cap(&mut self.queues[p][r], &self.sjobs, self.instances[r]);
            self.raw_cap[p][r] = Some(raw);
            if old != Some(raw) || !incremental {
                full = true;
            }
            if !self.fast_projects.contains(&p) {
                self.fast_projects.push(p);
            }
        }
        self.finished.clear();
        full
    }

    /// The result: nothing runs after the last completion, so the rest of the buffer window
    /// is idle and every new job would start then at the latest.
    fn finish(mut self) -> SimResult {
        let (t, now) = (self.t, self.now);
        let tail = (self.buf_end - t).max(0.0);
        let out = &mut self.out;
        for r in 0..self.instances.len() {
            let instances = self.instances[r];
            if !self.saturated_set[r] {
                out.resources[r].saturated_time = t - now;
            }
            out.resources[r].shortfall += instances * tail;
            for p in 0..self.queues.len() {
                out.projects[p][r].shortfall += instances * self.share_frac[p][r] * tail;
                if self.limits.has[p] {
                    out.projects[p][r].capacity_shortfall += self.limits.could_use[p][r] * tail;
                }
            }
        }
        for p in 0..self.queues.len() {
            for r in 0..self.instances.len() {
                if !self.start_found[p][r] {
                    out.projects[p][r].start_delay = t - now;
                }
            }
        }
        out.missed.sort_unstable();
        out.endangered.sort_unstable();
        self.out
    }
}
