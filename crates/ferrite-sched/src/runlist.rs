//! The run list and its enforcement (reference §3.3, §3.4, with the fixes of §7 W2, W3, W10):
//! which jobs run now, on which coprocessor instances, which running jobs are preempted and
//! whether they stay in memory, each with its reason.
//!
//! Order of admission, per resource, coprocessor types first and the CPU last:
//! 0. finishing jobs (their app called `boinc_finish` and waits to exit, using no CPU): they
//!    keep their place, slot, RAM and coprocessor instances, but their CPUs count as free,
//!    so the jobs admitted after them start while they exit;
//! 1. deadline-endangered jobs, earliest deadline first — exactly the jobs the simulation
//!    flagged as finishing within a safety margin of their deadline (or after it), plus jobs that already ran for a deadline and are not finished (hysteresis),
//!    plus every job of a project whose duration correction factor is ≥ 90, and every job
//!    on a host whose client runs less than [`PART_TIME_ON_FRAC`] of the time (there the
//!    client may stop for many hours at any moment: the job due first is run to its end
//!    rather than time-sliced against the others);
//!    skipped when [`Policy::edf`] is off (`--cpu_sched_rr_only`);
//! 2. running jobs whose time slice is not over (a slice ends at the first checkpoint after
//!    `cpu_scheduling_period`; a job about to finish keeps running);
//! 3. the rest by project priority, bumping a project's priority after each of its jobs so
//!    projects interleave (weighted round-robin); each project offers its jobs earliest
//!    deadline first, as the simulation assumes ([`crate::rrsim::project_order`]).
//!
//! Doomed jobs (never started, and too long to finish by their deadline even if started now)
//! are not run; [`doomed`] lists them for the caller to abort. Without
//! [`Policy::abort_doomed`] (`--cpu_sched_rr_only`) they are ordinary jobs and run in turn.
//!
//! Admission rules (the "documented rules" the property tests check):
//! - CPU: a job (CPU job or GPU job's feeder CPUs) is admitted only while the CPUs already
//!   committed are below the usable CPUs, so the total exceeds the usable CPUs by less than
//!   the last job's own usage (a GPU job's feeder share). A multi-thread CPU job is admitted
//!   only onto free CPUs (all of them if it is wider than the host): unlike BOINC it never
//!   overcommits them, and a CPU it cannot use goes to a single-thread job. So that it is
//!   not starved by single-thread slices that end at different times, the next job of the
//!   most deserving project, when multi-thread, is admitted before the open slices (after
//!   the deadline jobs). GPU jobs are admitted before any CPU job, so their CPU is
//!   committed first and CPU jobs cannot starve the GPUs.
//! - Coprocessors: every instance carries at most 1.0 of usage; a fractional job goes onto a
//!   partly used instance when one fits, an integer job takes whole free instances; instances
//!   excluded for the project are never used.
//! - `max_concurrent` of the app and `project_max_concurrent` are never exceeded.
//! - Memory: the working sets of admitted jobs fit in the RAM budget (`ram_max_used_busy_pct`
//!   or `ram_max_used_idle_pct` of the RAM, as the user is active or not), and, on a host with
//!   swap, their swap use fits in `vm_max_used_pct` of the swap space. A job that has run
//!   counts what was measured of it; one that has not counts the largest working set measured
//!   for its app version (the scheduler remembers it once those jobs are gone), or its
//!   `rsc_memory_bound` while none was, and as swap the largest swap use measured for its
//!   version. A job that does not fit is skipped and the next one
//!   that fits runs; a running job that no longer fits is quit (its measured size is kept),
//!   so it is not started again until there is room for it, and the version's other jobs,
//!   estimated at its size, do not start in its place only to be stopped in turn.

// Per-(project, resource) tables are indexed by both ids at once; index loops read better.
#![allow(clippy::needless_range_loop)]

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};

use crate::accounting::{job_peak_frac, Priorities};
use crate::estimate::remaining_secs;
use crate::model::{JobId, JobState, ResourceId, Time, World};
use crate::policy::Policy;
use crate::rrsim::{project_order, SimResult};

/// On a host whose client runs less than this fraction of the time (`time_stats` `on_frac`)
/// every job runs earliest deadline first (with [`Policy::edf`]): such a client stops for
/// hours at a time, often more than once before a job's deadline, and a job sliced in turn
/// with the others is more often caught unfinished, or not yet started, by an off period
/// that outlasts its deadline. Work fetch still keeps the projects at their shares.
pub const PART_TIME_ON_FRAC: f64 = 0.5;

/// Why a job is in the run list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunReason {
    /// The simulation predicts a deadline miss (or it already ran for one), or the host runs
    /// part time ([`PART_TIME_ON_FRAC`]): EDF.
    Deadline,
    /// It is running and its time slice is not over.
    TimeSlice,
    /// Weighted round-robin by project priority.
    Priority,
    /// Its app finished computing and waits to exit: it keeps its place but not its CPUs.
    Finishing,
}

/// A job to run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunEntry {
    /// The job.
    pub job: JobId,
    /// Why.
    pub reason: RunReason,
    /// Its main resource.
    pub resource: ResourceId,
    /// Coprocessor instances assigned (bit mask of device numbers; 0 for CPU jobs).
    pub instances: u64,
}

/// The RAM limit in use when a job did not fit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RamLimit {
    /// The user is active: `ram_max_used_busy_pct` applies (else `ram_max_used_idle_pct`).
    pub user_active: bool,
    /// That preference's percentage of the RAM.
    pub pct: f64,
}

/// Why a job was not admitted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SkipReason {
    /// The CPUs are fully committed (for a multi-thread job: fewer are free than it uses).
    CpusCommitted,
    /// No coprocessor instance has room for it.
    NoCoprocInstance,
    /// The app's `max_concurrent` is reached.
    AppMaxConcurrent,
    /// The project's `project_max_concurrent` is reached.
    ProjectMaxConcurrent,
    /// Its working set does not fit in the remaining RAM budget.
    Memory {
        /// Bytes it needs (see the module's memory rule).
        need: f64,
        /// Bytes left under the limit once the jobs admitted before it are counted.
        left: f64,
        /// The limit.
        limit: RamLimit,
    },
    /// Its swap use does not fit in the remaining swap budget (`vm_max_used_pct`).
    Swap {
        /// Bytes it needs.
        need: f64,
        /// Bytes left under the limit.
        left: f64,
        /// `vm_max_used_pct`.
        pct: f64,
    },
    /// Its resource is set to finish then stop, and it has not started.
    FinishThenStop,
}

/// Why a running job stops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PreemptReason {
    /// Its slice is over and jobs of more deserving projects take its place.
    LowerPriority,
    /// A deadline-endangered job needs its place.
    DeadlineJob,
    /// Not admitted for a capacity rule.
    Skipped(SkipReason),
    /// Not running, suspended in memory, and memory should be released (preference
    /// "leave apps in memory" is off and it has a checkpoint).
    ReleaseMemory,
}

/// What to do with a preempted task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreemptAction {
    /// Suspend the process, keep it in memory.
    KeepInMemory,
    /// Quit the process; it restarts from its checkpoint.
    Quit,
}

/// A running (or in-memory) task to stop.
#[derive(Clone, Debug, PartialEq)]
pub struct PreemptEntry {
    /// The job.
    pub job: JobId,
    /// Why.
    pub reason: PreemptReason,
    /// Suspend or quit.
    pub action: PreemptAction,
}

/// The result of building and enforcing the run list.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RunDecision {
    /// Jobs to run, most important first.
    pub run: Vec<RunEntry>,
    /// Tasks to preempt.
    pub preempt: Vec<PreemptEntry>,
    /// Jobs considered but not admitted, with the rule that stopped them.
    pub skipped: Vec<(JobId, SkipReason)>,
    /// CPUs left uncommitted (> 0 means "CPUs idle": a reason to check work fetch).
    pub idle_cpus: f64,
    /// Running jobs preempted before their time slice ended; they resume first later.
    pub interrupted: Vec<JobId>,
}

/// Admission state while the list is built.
struct Admit {
    ncpus: f64,
    cpu_used: f64,
    /// Usage per instance per resource (index 0 unused).
    inst: Vec<Vec<f64>>,
    ram_left: f64,
    ram_limit: RamLimit,
    /// `None`: the host has no swap, not checked.
    swap_left: Option<f64>,
    proj_running: Vec<u32>,
    app_running: Vec<u32>,
}

impl Admit {
    /// RAM and swap job `i` is expected to use (see the module's memory rule).
    fn memory_need(world: &World, i: usize, version_memory: &[(f64, f64)]) -> (f64, f64) {
        let j = &world.jobs[i];
        if j.started() {
            return (j.working_set_bytes.max(0.0), j.swap_bytes.max(0.0));
        }
        let (ws, swap) = version_memory
            .get(j.app_version.index())
            .copied()
            .unwrap_or_default();
        let ram = if ws > 0.0 {
            ws
        } else {
            j.working_set_bytes.max(0.0)
        };
        (ram, swap)
    }

    fn gpu_full(&self, r: usize) -> bool {
        self.inst[r].iter().all(|&u| u > 1.0 - 1e-9)
    }

    fn try_admit(
        &mut self,
        world: &World,
        i: usize,
        version_memory: &[(f64, f64)],
    ) -> Result<u64, SkipReason> {
        let j = &world.jobs[i];
        let v = world.version_of(j);
        let p = j.project.index();
        let app = v.app.index();
        if world.apps[app]
            .max_concurrent
            .is_some_and(|m| self.app_running[app] >= m)
        {
            return Err(SkipReason::AppMaxConcurrent);
        }
        if world.projects[p]
            .max_concurrent
            .is_some_and(|m| self.proj_running[p] >= m)
        {
            return Err(SkipReason::ProjectMaxConcurrent);
        }
        if !world.gpu_control.may_run(v.resource, j) {
            return Err(SkipReason::FinishThenStop);
        }
        // A finishing job uses no CPU: it neither needs a free one nor takes one.
        let cpus = if j.is_finishing() {
            0.0
        } else {
            v.avg_ncpus.max(0.0)
        };
        if cpus > 0.0 && self.cpu_used >= self.ncpus - 1e-9 {
            return Err(SkipReason::CpusCommitted);
        }
        // A multi-thread CPU job starts only on CPUs that are free: it never overcommits the
        // host (a job wider than the host needs all of it).
        if v.resource.is_cpu()
            && cpus > 1.0
            && self.cpu_used + cpus.min(self.ncpus) > self.ncpus + 1e-9
        {
            return Err(SkipReason::CpusCommitted);
        }
        let (ram, swap) = Self::memory_need(world, i, version_memory);
        if ram > self.ram_left {
            return Err(SkipReason::Memory {
                need: ram,
                left: self.ram_left.max(0.0),
                limit: self.ram_limit,
            });
        }
        if let Some(left) = self.swap_left.filter(|&left| swap > left) {
            return Err(SkipReason::Swap {
                need: swap,
                left: left.max(0.0),
                pct: world.prefs.vm_max_used_pct,
            });
        }
        let mut mask = 0u64;
        if !v.resource.is_cpu() {
            let r = v.resource.index();
            let excluded = world.projects[p].excluded_mask(v.resource)
                | world.apps[v.app.index()].excluded_mask(v.resource)
                | world.gpu_control.excluded_mask(v.resource);
            let inst = &self.inst[r];
            let usable = |k: usize| k < 64 && excluded & (1u64 << k) == 0;
            let u = v.coproc_usage;
            if u < 1.0 {
                // Prefer the instance it had, then the fullest one it fits on.
                let prev = (0..inst.len()).find(|&k| {
                    usable(k)
                        && j.assigned_instances & (1u64 << k) != 0
                        && inst[k] + u <= 1.0 + 1e-9
                });
                let best = prev.or_else(|| {
                    (0..inst.len())
                        .filter(|&k| usable(k) && inst[k] + u <= 1.0 + 1e-9)
                        .max_by(|&a, &b| inst[a].total_cmp(&inst[b]).then(b.cmp(&a)))
                });
                let k = best.ok_or(SkipReason::NoCoprocInstance)?;
                self.inst[r][k] += u;
                mask = 1u64 << k;
            } else {
                let need = u.floor() as usize;
                let mut free: Vec<usize> = (0..inst.len())
                    .filter(|&k| usable(k) && inst[k] <= 1e-9)
                    .collect();
                if free.len() < need {
                    return Err(SkipReason::NoCoprocInstance);
                }
                // Instances it held before first.
                free.sort_by_key(|&k| (j.assigned_instances & (1u64 << k) == 0, k));
                for &k in &free[..need] {
                    self.inst[r][k] = 1.0;
                    mask |= 1u64 << k;
                }
            }
        }
        self.cpu_used += cpus;
        self.ram_left -= ram;
        if let Some(left) = self.swap_left.as_mut() {
            *left -= swap;
        }
        self.proj_running[p] += 1;
        self.app_running[app] += 1;
        Ok(mask)
    }
}

/// Heap entry for the priority pass.
#[derive(PartialEq)]
struct HeapItem {
    prio: f64,
    project: usize,
}
impl Eq for HeapItem {}
impl Ord for HeapItem {
    fn cmp(&self, o: &Self) -> Ordering {
        self.prio
            .total_cmp(&o.prio)
            .then(o.project.cmp(&self.project))
    }
}
impl PartialOrd for HeapItem {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Whether a running job's time slice is still open at `now`.
pub fn slice_open(world: &World, i: usize, now: Time) -> bool {
    let j = &world.jobs[i];
    if !j.is_running() {
        return false;
    }
    let period = world.prefs.sched_period();
    let Some(start) = j.run_started_at else {
        return false;
    };
    let end = start + period;
    if now < end {
        return true;
    }
    // Past the period: the slice ends at the first checkpoint after it.
    !j.last_checkpoint_time.is_some_and(|c| c >= end)
}

/// Whether job `i` is doomed at `now`: never started, and even run from now on at full speed
/// it would finish after its report deadline. Running it would only waste the host (its
/// result is worthless to the project), so it is never run and the caller should abort it
/// (BOINC aborts unstarted jobs only once the deadline has passed; knowing sooner lets the
/// project reissue the work sooner and keeps the host for jobs that can still make it).
pub fn is_doomed(world: &World, i: usize, now: Time) -> bool {
    let j = &world.jobs[i];
    j.state.is_unfinished() && !j.started() && now + remaining_secs(world, j) > j.report_deadline
}

/// Ids of the doomed jobs at `now` (see [`is_doomed`]).
pub fn doomed(world: &World, now: Time) -> Vec<JobId> {
    (0..world.jobs.len())
        .filter(|&i| is_doomed(world, i, now))
        .map(|i| world.jobs[i].id)
        .collect()
}

/// The next job of the most deserving project among `jobs` not yet admitted, when it is a
/// multi-thread CPU job (ties go to the lower project index, as in the priority pass).
fn multi_thread_to_promote(
    world: &World,
    jobs: &[usize],
    admitted: &[bool],
    prio: &Priorities,
) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None; // (project, job)
    for &i in jobs.iter().filter(|&&i| !admitted[i]) {
        let j = &world.jobs[i];
        let p = j.project.index();
        best = match best {
            None => Some((p, i)),
            Some((bp, bi)) => {
                let better = match prio.value[p].total_cmp(&prio.value[bp]) {
                    Ordering::Greater => true,
                    Ordering::Less => false,
                    Ordering::Equal if p == bp => {
                        project_order(j, &world.jobs[bi]) == Ordering::Less
                    }
                    Ordering::Equal => p < bp,
                };
                Some(if better { (p, i) } else { (bp, bi) })
            }
        };
    }
    let (_, i) = best?;
    let v = world.version_of(&world.jobs[i]);
    (v.resource.is_cpu() && v.avg_ncpus > 1.0).then_some(i)
}

/// Inputs of [`build`] beyond the world.
#[derive(Debug)]
pub struct RunInputs<'a> {
    /// The simulation of this pass.
    pub sim: &'a SimResult,
    /// Priorities per resource (index = resource).
    pub priorities: &'a [Priorities],
    /// Jobs that already ran for a deadline (kept EDF until they finish).
    pub ran_edf: &'a HashSet<JobId>,
    /// Jobs whose time slice was interrupted (by a deadline job or a capacity rule) before it
    /// ended: they resume before priority order, so a short deadline job does not make the
    /// long jobs of other projects take turns every few minutes.
    pub interrupted: &'a HashSet<JobId>,
    /// Per app version, the largest working set and swap use measured (see
    /// [`observe_version_memory`]).
    pub version_memory: &'a [(f64, f64)],
    /// Policy knobs.
    pub policy: &'a Policy,
}

/// Build the run list at `now` and decide preemptions: per resource (coprocessors first, the
/// CPU last) the admission steps of the module's order, then the preemptions.
pub fn build(world: &World, now: Time, inp: &RunInputs<'_>) -> RunDecision {
    let per_res = candidates(world, now, inp.policy);
    let mut b = Builder::new(world, now, inp);
    let nr = world.n_resources();
    for r in (1..nr).chain(std::iter::once(0)) {
        let jobs = &per_res[r];
        if jobs.is_empty() {
            continue;
        }
        b.admit_finishing(r, jobs);
        // A multi-thread job goes before the deadline jobs while none of them is predicted to
        // miss its deadline, after them otherwise (see `promote_multi_thread`).
        let promote_before_edf = r == 0 && !jobs.iter().any(|&i| inp.sim.misses(i));
        if promote_before_edf {
            b.promote_multi_thread(r, jobs);
        }
        if inp.policy.edf {
            b.admit_deadline_jobs(r, jobs);
        }
        if r == 0 && !promote_before_edf {
            b.promote_multi_thread(r, jobs);
        }
        b.admit_open_slices(r, jobs);
        b.admit_by_priority(r, jobs);
    }
    b.finish()
}

/// The jobs that may run at `now`, per resource, in job order (doomed jobs only when the
/// policy does not give them up).
fn candidates(world: &World, now: Time, policy: &Policy) -> Vec<Vec<usize>> {
    let candidate = |i: usize| {
        let j = &world.jobs[i];
        j.state.is_unfinished()
            && j.runnable
            && !j.suspended
            && !world.projects[j.project.index()].suspended
            && !(policy.abort_doomed && is_doomed(world, i, now))
    };
    let mut per_res: Vec<Vec<usize>> = vec![Vec::new(); world.n_resources()];
    for i in (0..world.jobs.len()).filter(|&i| candidate(i)) {
        per_res[world.version_of(&world.jobs[i]).resource.index()].push(i);
    }
    per_res
}

/// Update `seen`, per app version the largest working set and swap use measured for its jobs
/// that have run: a version with such jobs in `world` gets their largest figures (as BOINC's
/// `max_rss`); one without keeps what was seen last, so its next jobs are still estimated at
/// it once the measured ones are gone.
pub fn observe_version_memory(world: &World, seen: &mut Vec<(f64, f64)>) {
    let mut now = vec![None::<(f64, f64)>; world.app_versions.len()];
    for j in world.jobs.iter().filter(|j| j.started()) {
        if let Some(m) = now.get_mut(j.app_version.index()) {
            let (ws, swap) = m.unwrap_or_default();
            *m = Some((ws.max(j.working_set_bytes), swap.max(j.swap_bytes)));
        }
    }
    seen.resize(world.app_versions.len(), (0.0, 0.0));
    for (s, n) in seen.iter_mut().zip(now) {
        if let Some(n) = n {
            *s = n;
        }
    }
}

/// The run list while it is built: what is admitted, what was tried and refused, the
/// priorities bumped by each admission.
struct Builder<'w, 'i> {
    world: &'w World,
    now: Time,
    inp: &'i RunInputs<'i>,
    adm: Admit,
    prio: Vec<Priorities>,
    admitted: Vec<bool>,
    tried: Vec<Option<SkipReason>>,
    out: RunDecision,
    deadline_jobs_admitted: bool,
}

impl<'w, 'i> Builder<'w, 'i> {
    fn new(world: &'w World, now: Time, inp: &'i RunInputs<'i>) -> Self {
        let nr = world.n_resources();
        let adm = Admit {
            ncpus: world.instances(ResourceId::CPU),
            cpu_used: 0.0,
            inst: (0..nr)
                .map(|r| {
                    if r == 0 {
                        Vec::new()
                    } else {
                        vec![0.0; world.instances(ResourceId(r as u8)) as usize]
                    }
                })
                .collect(),
            ram_left: world.host.ram_bytes * world.prefs.ram_frac(world.user_active),
            ram_limit: RamLimit {
                user_active: world.user_active,
                pct: if world.user_active {
                    world.prefs.ram_max_used_busy_pct
                } else {
                    world.prefs.ram_max_used_idle_pct
                },
            },
            swap_left: world.prefs.swap_limit(world.host.swap_bytes),
            proj_running: vec![0; world.projects.len()],
            app_running: vec![0; world.apps.len()],
        };
        Builder {
            world,
            now,
            inp,
            adm,
            prio: inp.priorities.to_vec(),
            admitted: vec![false; world.jobs.len()],
            tried: vec![None; world.jobs.len()],
            out: RunDecision::default(),
            deadline_jobs_admitted: false,
        }
    }

    /// Whether resource `r` has no room left.
    fn full(&self, r: usize) -> bool {
        if r == 0 {
            self.adm.cpu_used >= self.adm.ncpus - 1e-9
        } else {
            self.adm.gpu_full(r)
        }
    }

    /// Try to admit job `i` of resource `r` for `reason`; on success its project's priority
    /// is bumped so projects interleave. Whether it is (now or already) admitted.
    fn push(&mut self, r: usize, i: usize, reason: RunReason) -> bool {
        if self.admitted[i] {
            return true;
        }
        let world = self.world;
        match self.adm.try_admit(world, i, self.inp.version_memory) {
            Ok(mask) => {
                self.admitted[i] = true;
                let j = &world.jobs[i];
                let v = world.version_of(j);
                let frac = job_peak_frac(world, v, self.inp.policy);
                match self.inp.policy.rec_mode {
                    crate::policy::RecMode::Global => {
                        for pr in self.prio.iter_mut() {
                            pr.bump(j.project.index(), frac);
                        }
                    }
                    crate::policy::RecMode::PerResource => {
                        self.prio[r].bump(j.project.index(), frac)
                    }
                }
                self.out.run.push(RunEntry {
                    job: j.id,
                    reason,
                    resource: ResourceId(r as u8),
                    instances: mask,
                });
                true
            }
            Err(e) => {
                self.tried[i] = Some(e);
                false
            }
        }
    }

    /// Step 0: finishing jobs keep their place (their CPUs are counted free in `try_admit`).
    fn admit_finishing(&mut self, r: usize, jobs: &[usize]) {
        for &i in jobs {
            if self.world.jobs[i].is_finishing() {
                self.push(r, i, RunReason::Finishing);
            }
        }
    }

    /// A multi-thread job of the most deserving project goes before the open slices:
    /// single-thread jobs start and end their slices at different times, so CPUs rarely come
    /// free together, and a multi-thread job waiting for that would starve (BOINC's
    /// `promote_multi_thread_jobs`). The single-thread jobs it displaces resume first. It goes
    /// after the deadline jobs, or before them while none of them is predicted to miss its
    /// deadline (those only within the safety margin keep the CPUs it leaves).
    fn promote_multi_thread(&mut self, r: usize, jobs: &[usize]) {
        if let Some(i) = multi_thread_to_promote(self.world, jobs, &self.admitted, &self.prio[r]) {
            self.push(r, i, RunReason::Priority);
        }
    }

    /// Step 1: EDF, the deadline-endangered jobs earliest deadline first.
    fn admit_deadline_jobs(&mut self, r: usize, jobs: &[usize]) {
        let world = self.world;
        let inp = self.inp;
        let part_time = world.time_stats.on_frac < PART_TIME_ON_FRAC;
        let mut keyed: Vec<(f64, bool, f64, JobId, usize)> = jobs
            .iter()
            .copied()
            .filter(|&i| {
                let j = &world.jobs[i];
                // A project whose duration correction is ≥ 90 has estimates so far off that
                // all its jobs are treated as endangered (as BOINC does). On a part-time
                // host every job is (see `PART_TIME_ON_FRAC`).
                part_time
                    || inp.sim.endangered(i)
                    || inp.ran_edf.contains(&j.id)
                    || world.projects[j.project.index()].dcf >= 90.0
            })
            .map(|i| {
                let j = &world.jobs[i];
                (
                    j.report_deadline,
                    !j.started(),
                    remaining_secs(world, j),
                    j.id,
                    i,
                )
            })
            .collect();
        keyed.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.cmp(&b.1))
                .then(a.2.total_cmp(&b.2))
                .then(a.3.cmp(&b.3))
        });
        for (.., i) in keyed {
            if self.full(r) {
                break;
            }
            if self.push(r, i, RunReason::Deadline) {
                self.deadline_jobs_admitted = true;
            }
        }
    }

    /// Step 2: running jobs with an open slice (or interrupted, or about to finish), most
    /// deserving first.
    fn admit_open_slices(&mut self, r: usize, jobs: &[usize]) {
        let world = self.world;
        let period = world.prefs.sched_period();
        let mut open: Vec<usize> = jobs
            .iter()
            .copied()
            .filter(|&i| {
                !self.admitted[i]
                    && (slice_open(world, i, self.now)
                        || self.inp.interrupted.contains(&world.jobs[i].id)
                        || (world.jobs[i].is_running()
                            && remaining_secs(world, &world.jobs[i])
                                < self.inp.policy.finish_if_nearly_done_frac * period))
            })
            .collect();
        let prio = &self.prio[r];
        open.sort_by(|&a, &b| {
            let pa = prio.value[world.jobs[a].project.index()];
            let pb = prio.value[world.jobs[b].project.index()];
            pb.total_cmp(&pa)
                .then(world.jobs[a].id.cmp(&world.jobs[b].id))
        });
        // Every one is tried (no early stop) so a preempted one records the rule that stopped it.
        for i in open {
            self.push(r, i, RunReason::TimeSlice);
        }
    }

    /// Step 3: the rest in priority order, each project offering its jobs in its own order.
    fn admit_by_priority(&mut self, r: usize, jobs: &[usize]) {
        let world = self.world;
        let np = world.projects.len();
        let mut lists: Vec<Vec<usize>> = vec![Vec::new(); np];
        for &i in jobs {
            if !self.admitted[i] {
                lists[world.jobs[i].project.index()].push(i);
            }
        }
        for l in lists.iter_mut() {
            l.sort_by(|&a, &b| project_order(&world.jobs[a], &world.jobs[b]));
            l.reverse(); // pop from the back
        }
        let mut heap: BinaryHeap<HeapItem> = (0..np)
            .filter(|&p| !lists[p].is_empty())
            .map(|p| HeapItem {
                prio: self.prio[r].value[p],
                project: p,
            })
            .collect();
        while let Some(top) = heap.pop() {
            if self.full(r) {
                break;
            }
            let p = top.project;
            let Some(i) = lists[p].pop() else { continue };
            self.push(r, i, RunReason::Priority);
            if !lists[p].is_empty() {
                heap.push(HeapItem {
                    prio: self.prio[r].value[p],
                    project: p,
                });
            }
        }
    }

    /// The preemptions of the jobs left out, and the decision.
    fn finish(mut self) -> RunDecision {
        let world = self.world;
        for (i, j) in world.jobs.iter().enumerate() {
            if self.admitted[i] {
                continue;
            }
            if let Some(e) = preemption(
                world,
                i,
                self.now,
                self.tried[i],
                self.deadline_jobs_admitted,
                &mut self.out.interrupted,
            ) {
                self.out.preempt.push(e);
            }
            if let Some(s) = self.tried[i] {
                self.out.skipped.push((j.id, s));
            }
        }
        self.out.idle_cpus = (self.adm.ncpus - self.adm.cpu_used).max(0.0);
        self.out
    }
}

/// What to do with job `i`, not admitted, that runs or stays in memory (`None`: nothing).
/// A running job whose slice was open is added to `interrupted`.
fn preemption(
    world: &World,
    i: usize,
    now: Time,
    tried: Option<SkipReason>,
    deadline_jobs_admitted: bool,
    interrupted: &mut Vec<JobId>,
) -> Option<PreemptEntry> {
    let j = &world.jobs[i];
    let gpu = !world.version_of(j).resource.is_cpu();
    match j.state {
        JobState::Running => {
            let open = slice_open(world, i, now);
            if open {
                interrupted.push(j.id);
            }
            let reason = match tried {
                Some(SkipReason::CpusCommitted | SkipReason::NoCoprocInstance)
                    if open && deadline_jobs_admitted =>
                {
                    PreemptReason::DeadlineJob
                }
                Some(s) => PreemptReason::Skipped(s),
                None if deadline_jobs_admitted => PreemptReason::DeadlineJob,
                None => PreemptReason::LowerPriority,
            };
            let never_checkpointed = j.checkpoint_elapsed <= 0.0 && j.elapsed > 0.0;
            let action = if gpu
                || matches!(
                    reason,
                    PreemptReason::Skipped(SkipReason::Memory { .. } | SkipReason::Swap { .. })
                ) {
                PreemptAction::Quit
            } else if world.prefs.leave_apps_in_memory || never_checkpointed {
                PreemptAction::KeepInMemory
            } else {
                PreemptAction::Quit
            };
            Some(PreemptEntry {
                job: j.id,
                reason,
                action,
            })
        }
        JobState::Preempted { in_memory: true } => {
            let has_checkpoint = j.checkpoint_elapsed > 0.0;
            (gpu || (!world.prefs.leave_apps_in_memory && has_checkpoint)).then_some(PreemptEntry {
                job: j.id,
                reason: PreemptReason::ReleaseMemory,
                action: PreemptAction::Quit,
            })
        }
        _ => None,
    }
}
