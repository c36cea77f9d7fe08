//! Work fetch (reference §4): when to ask (a resource's saturated time below the minimum
//! buffer, or a project's own queue no longer filling its share within it), whom (the highest-priority project able to supply it), what to ask (`req_secs`,
//! `req_instances` per resource and the compatibility `work_req_seconds`); the per-(project,
//! resource) backoff and the project-wide RPC backoff; and when finished jobs are reported.
//! Every "no" carries its reason as data ([`FetchBlock`]) for the control CLI.

// Per-(project, resource) tables are indexed by both ids at once; index loops read better.
#![allow(clippy::needless_range_loop)]

use crate::accounting::{relative_speed, Priorities};
use crate::estimate::remaining_secs;
use crate::model::{JobState, ProjectId, ResourceId, Time, World};
use crate::policy::Policy;
use crate::rng::Jitter;
use crate::rrsim::{deadline_cushion, SimResult};

/// First per-(project, resource) backoff interval (`WF_MIN_BACKOFF_INTERVAL`).
pub const WF_MIN_BACKOFF_INTERVAL: f64 = 600.0;
/// Largest per-(project, resource) backoff interval (`WF_MAX_BACKOFF_INTERVAL`).
pub const WF_MAX_BACKOFF_INTERVAL: f64 = 86400.0;
/// Defer fetch this long after a project started an upload (`WF_UPLOAD_DEFER_INTERVAL`).
pub const WF_UPLOAD_DEFER_INTERVAL: f64 = 300.0;
/// Never fetch from a project holding more runnable jobs (`WF_MAX_RUNNABLE_JOBS`).
pub const WF_MAX_RUNNABLE_JOBS: usize = 1000;
/// Project RPC backoff bounds (`SCHED_RETRY_DELAY_MIN/MAX`).
pub const SCHED_RETRY_DELAY_MIN: f64 = 60.0;
/// See [`SCHED_RETRY_DELAY_MIN`].
pub const SCHED_RETRY_DELAY_MAX: f64 = 14400.0;
/// While an instance idles, a project whose RPCs failed is tried again this long (times
/// U(0.5, 1.5)) after the last failure, however long its exponential backoff has grown: the
/// backoff spares a server that is down, but hours of it leave the host without work long
/// after a short outage ended.
pub const IDLE_RETRY_INTERVAL: f64 = 120.0;
/// Without deadline promotion (`--cpu_sched_rr_only`), a starved project's request waits for
/// its next report only while its deadlines leave room for fewer than this many new jobs. A
/// project whose queue sits at its deadline limit gains room one job at a time as its jobs
/// finish; asking each time makes a one-job RPC between every two reports, while waiting
/// lets the report ask for the jobs that fit then. A project with more room (its queue ran
/// low) is asked at once: in round-robin the larger batch a later request brings would wait
/// behind other projects' work and miss its deadlines.
pub const RR_WAIT_ROOM_JOBS: f64 = 3.0;
/// Report when a project has this many finished jobs (`RESULT_REPORT_IF_AT_LEAST_N`).
pub const RESULT_REPORT_IF_AT_LEAST_N: usize = 64;
/// Report at most this long after completion (`MAX_REPORT_DELAY`).
pub const MAX_REPORT_DELAY: f64 = 3600.0;
/// A finished job whose report deadline is more than [`REPORT_DEADLINE_CUSHION`] away is
/// reported [`MAX_REPORT_DELAY`] after its completion unless a running job of the same project
/// is estimated to finish within this long of that completion: then both go in one RPC (a
/// project's scheduler pays per RPC; the deadline leaves a day or more).
pub const MAX_REPORT_HOLD: f64 = 4.0 * MAX_REPORT_DELAY;
/// A report due by its deadline ([`hold_reports`]) waits at most until this fraction of its
/// job's delay bound (or [`MAX_REPORT_DELAY`], if less) is left before the deadline.
pub const REPORT_WAIT_MARGIN: f64 = 0.1;
/// A report due by its deadline waits only while the project's queue keeps it busy this long
/// on the resources its RPC would ask for: if the RPC fails when it is made, the retry
/// (at most 1.5 × [`IDLE_RETRY_INTERVAL`] later) still comes before those instances idle.
pub const REPORT_WAIT_MIN_QUEUE: f64 = 1.5 * IDLE_RETRY_INTERVAL;
/// A report due by its deadline waits only while the project's deadlines leave room for
/// fewer than this many new jobs on the resources its RPC would ask for: with more, the RPC
/// brings enough work to be worth making now.
pub const REPORT_WAIT_ROOM_JOBS: f64 = 3.0;
/// Report this long before the deadline (`REPORT_DEADLINE_CUSHION`).
pub const REPORT_DEADLINE_CUSHION: f64 = 86400.0;

/// Persistent fetch state of one project (kept by the [`crate::Scheduler`]).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ProjectFetchState {
    /// Per resource: no work request for it before this time.
    pub backoff_until: Vec<Time>,
    /// Per resource: current backoff interval (0 = not backing off).
    pub backoff_interval: Vec<f64>,
    /// No scheduler RPC before this time (project-wide backoff, `min_rpc_time`).
    pub min_rpc_time: Time,
    /// Consecutive failed RPCs.
    pub nrpc_failures: u32,
    /// After failed RPCs: while an instance idles, the project may be tried again from this
    /// time on (see [`IDLE_RETRY_INTERVAL`]); 0 when the last RPC succeeded.
    pub idle_retry_time: Time,
    /// Shortest delay bound (report deadline − arrival) among the project's latest jobs,
    /// seconds (`None` until a job of it has been seen): how far ahead its queue may reach.
    pub latency: Option<f64>,
    /// Per resource: longest estimated run time (seconds at full speed) and its usage among
    /// the project's latest jobs for that resource (`None` until one has been seen): the size
    /// of the next job to expect when sizing a request.
    pub job_shape: Vec<Option<JobShape>>,
}

/// Size of a typical (the largest recent) job of a project for one resource.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JobShape {
    /// Estimated run time at full speed, seconds.
    pub runtime: f64,
    /// Instances of the resource it uses.
    pub usage: f64,
}

/// Learn each project's delay bound and job sizes from the jobs it holds now (finished ones
/// included); a project holding none keeps what was learnt before.
pub fn observe_jobs(world: &World, state: &mut [ProjectFetchState]) {
    let nr = world.n_resources();
    let mut latency: Vec<Option<f64>> = vec![None; state.len()];
    let mut shape: Vec<Vec<Option<JobShape>>> = vec![vec![None; nr]; state.len()];
    for j in &world.jobs {
        let p = j.project.index();
        if p >= state.len() {
            continue;
        }
        let span = j.report_deadline - j.received_time;
        if span.is_finite() && span > 0.0 {
            latency[p] = Some(latency[p].map_or(span, |l: f64| l.min(span)));
        }
        let v = world.version_of(j);
        let runtime = crate::estimate::static_duration(world, j);
        if runtime.is_finite() && runtime > 0.0 {
            let slot = &mut shape[p][v.resource.index()];
            let usage = v.usage().max(1e-3);
            if slot.is_none_or(|s| s.runtime * s.usage < runtime * usage) {
                *slot = Some(JobShape { runtime, usage });
            }
        }
    }
    for (p, st) in state.iter_mut().enumerate() {
        if latency[p].is_some() {
            st.latency = latency[p];
        }
        st.job_shape.resize(nr, None);
        for r in 0..nr {
            if shape[p][r].is_some() {
                st.job_shape[r] = shape[p][r];
            }
        }
    }
}

impl ProjectFetchState {
    /// Make room for `nr` resources.
    pub fn resize(&mut self, nr: usize) {
        self.backoff_until.resize(nr, 0.0);
        self.backoff_interval.resize(nr, 0.0);
        self.job_shape.resize(nr, None);
    }

    /// The last request for `r` got no job: back off `r` (doubling from 10 minutes to 1 day,
    /// randomised ×U(0.5, 1.5)) unless it is already backed off.
    pub fn back_off(&mut self, r: ResourceId, now: Time, jitter: &mut dyn Jitter) {
        let i = r.index();
        if self.backoff_until[i] > now {
            return;
        }
        let iv = self.backoff_interval[i];
        let iv = if iv > 0.0 {
            (2.0 * iv).min(WF_MAX_BACKOFF_INTERVAL)
        } else {
            WF_MIN_BACKOFF_INTERVAL
        };
        self.backoff_interval[i] = iv;
        self.backoff_until[i] = now + iv * (0.5 + jitter.next_unit());
    }

    /// A job for `r` arrived (or the user asked for an update): clear `r`'s backoff.
    pub fn clear_backoff(&mut self, r: ResourceId) {
        self.backoff_until[r.index()] = 0.0;
        self.backoff_interval[r.index()] = 0.0;
    }

    /// An RPC failed: `min_rpc_time ≥ now + min(60 × 2^n, 4 h) × U(0.5, 1)`; while an
    /// instance idles, the project is tried again after [`IDLE_RETRY_INTERVAL`] × U(0.5, 1.5).
    pub fn rpc_failed(&mut self, now: Time, jitter: &mut dyn Jitter) {
        self.nrpc_failures = self.nrpc_failures.saturating_add(1);
        let n = self.nrpc_failures.min(10);
        let base = (SCHED_RETRY_DELAY_MIN * f64::from(1u32 << n)).min(SCHED_RETRY_DELAY_MAX);
        let t = now + base * (0.5 + 0.5 * jitter.next_unit());
        self.min_rpc_time = self.min_rpc_time.max(t);
        self.idle_retry_time = now + IDLE_RETRY_INTERVAL * (0.5 + jitter.next_unit());
    }

    /// The failures of an earlier run of the client (its state file), seen at `now`: the
    /// idle retry time was not saved, so it counts from now, as if the last failure had just
    /// happened (a restart does not cut a backoff short).
    pub fn restore_failures(&mut self, nrpc_failures: u32, now: Time) {
        self.nrpc_failures = nrpc_failures;
        self.idle_retry_time = if nrpc_failures > 0 {
            now + IDLE_RETRY_INTERVAL
        } else {
            0.0
        };
    }

    /// An RPC succeeded: failures reset; the server's `request_delay` applies.
    pub fn rpc_succeeded(&mut self, now: Time, request_delay: f64) {
        self.nrpc_failures = 0;
        self.idle_retry_time = 0.0;
        self.min_rpc_time = if request_delay > 0.0 {
            now + request_delay
        } else {
            0.0
        };
    }
}

/// The rule that keeps a project (or a resource of it) from being asked for work.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FetchRule {
    /// Every instance of the resource stays busy beyond the minimum buffer.
    BufferFull {
        /// Seconds the resource stays saturated.
        saturated: f64,
        /// The minimum buffer, seconds.
        min_buffer: f64,
    },
    /// The project is suspended.
    Suspended,
    /// The project is set to "no new tasks".
    NoNewWork,
    /// Project-wide RPC backoff after failures or a server `request_delay` (after failures,
    /// ending early while an instance idles: [`IDLE_RETRY_INTERVAL`]).
    RpcBackoff {
        /// End of the backoff.
        until: Time,
    },
    /// The project holds too many runnable jobs already.
    TooManyJobs,
    /// An upload started recently; the request will ride on the report.
    UploadDeferral {
        /// End of the deferral.
        until: Time,
    },
    /// The project has no app for this resource (or prefs/config exclude it).
    NoApps,
    /// Every instance of this coprocessor type is excluded for the project.
    AllInstancesExcluded,
    /// The last requests for this resource returned nothing.
    ResourceBackoff {
        /// End of the backoff.
        until: Time,
    },
    /// `max_concurrent` limits: the project could not use more of this resource.
    MaxConcurrent,
    /// Zero resource share: only asked when an instance idles.
    ZeroShareNotIdle,
    /// A project of higher priority is asked instead.
    LowerPriority,
    /// BOINC is over its allowed disk space.
    DiskFull,
    /// The project's queue for this resource already reaches as far as its delay bound
    /// allows: a job of its usual size sent now would finish too late.
    DeadlineLimit {
        /// Seconds until a new job of the project would start (the simulation's start delay).
        start_delay: f64,
        /// Latest useful start for a new job, seconds from now (delay bound minus minimum
        /// buffer, safety margin and the job's run time).
        latest_start: f64,
    },
    /// Only this project is short of work (every instance stays busy) and one of its jobs
    /// finishes before its queue runs out: the request rides on that job's report.
    WaitsForReport {
        /// When the job is expected to finish.
        until: Time,
    },
    /// `fetch_minimal_work`: this client already had or asked for its one job per device.
    MinimalWorkDone,
    /// The volunteer set the resource to finish its started jobs and then stop.
    FinishThenStop,
}

/// End of a project's RPC backoff: its `min_rpc_time`, or, after failed RPCs while an
/// instance idles, the earlier idle retry time.
fn rpc_backoff_end(s: &ProjectFetchState, any_idle: bool) -> Time {
    if any_idle && s.nrpc_failures > 0 {
        s.min_rpc_time.min(s.idle_retry_time)
    } else {
        s.min_rpc_time
    }
}

/// How much new work a project's deadlines allow on one resource.
#[derive(Clone, Copy, Debug, PartialEq)]
struct DeadlineRoom {
    /// Instance-seconds (wall time) of new work that can still finish in time, counting the
    /// last job running alone after the others.
    work: f64,
    /// Instance-seconds of one expected job (wall time).
    job: f64,
    /// Jobs of the expected size that fit.
    jobs: f64,
    /// See [`FetchRule::DeadlineLimit`].
    start_delay: f64,
    /// See [`FetchRule::DeadlineLimit`].
    latest_start: f64,
}

/// One reason for not fetching: which project (or all), which resource (or all), which rule.
#[derive(Clone, Debug, PartialEq)]
pub struct FetchBlock {
    /// The project concerned (`None`: applies to all).
    pub project: Option<ProjectId>,
    /// The resource concerned (`None`: all of the project's).
    pub resource: Option<ResourceId>,
    /// The rule.
    pub rule: FetchRule,
}

/// Request for one resource type.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceRequest {
    /// The resource.
    pub resource: ResourceId,
    /// Instance-seconds of work wanted (`<req_secs>`).
    pub req_secs: f64,
    /// Idle instances to fill (`<req_instances>`).
    pub req_instances: f64,
    /// Seconds until a new job of this project for this resource would start, from the
    /// simulation (`<estimated_delay>`; see [`crate::rrsim::ProjectResourceSim::start_delay`]).
    pub estimated_delay: f64,
}

/// Why the RPC is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcReason {
    /// First RPC after attaching (`RPC_REASON_INIT`): 1 s per resource.
    Init,
    /// The buffer is low (`RPC_REASON_NEED_WORK`).
    NeedWork,
}

/// A work request to send.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkRequest {
    /// The project to contact.
    pub project: ProjectId,
    /// Why.
    pub reason: RpcReason,
    /// Per-resource requests (resources with nothing to ask are left out).
    pub resources: Vec<ResourceRequest>,
    /// Compatibility `<work_req_seconds>` (the CPU request).
    pub work_req_seconds: f64,
}

impl WorkRequest {
    /// Request for resource `r`, if any.
    pub fn for_resource(&self, r: ResourceId) -> Option<&ResourceRequest> {
        self.resources.iter().find(|x| x.resource == r)
    }
}

/// The fetch decision: a request or none, and the reasons why others were not asked.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct FetchDecision {
    /// The request to send, if any.
    pub request: Option<WorkRequest>,
    /// Why nothing (more) is fetched, as data.
    pub blocks: Vec<FetchBlock>,
}

/// Everything the fetch rules look at, computed once per decision.
struct Ctx<'a> {
    world: &'a World,
    sim: &'a SimResult,
    nr: usize,
    np: usize,
    /// Resource below the minimum buffer (the fetch trigger).
    low: Vec<bool>,
    /// Resource below the maximum buffer (worth topping up).
    below_max: Vec<bool>,
    /// Per (project, resource): the project's own queue stops filling its share of the
    /// resource within the minimum buffer (its simulated start delay is shorter), so it is
    /// worth asking even while other projects keep every instance busy.
    starved: Vec<Vec<bool>>,
    /// Project-wide rule blocking each project, if any.
    project_rule: Vec<Option<FetchRule>>,
    /// Per (project, resource) rule, if any (computed for every project).
    rsc_rule: Vec<Vec<Option<FetchRule>>>,
    /// Project has max-concurrent limits.
    has_mc: Vec<bool>,
    /// Project may be asked for more than one resource (app versions for several, or not
    /// known yet).
    multi_rsc: Vec<bool>,
    /// Fetch priority per (project, resource).
    prio: Vec<Vec<f64>>,
    /// What the project's deadlines allow per (project, resource) (`None`: its delay bound or
    /// job size is not known yet).
    room: Vec<Vec<Option<DeadlineRoom>>>,
    /// Deadline promotion (EDF) is on.
    edf: bool,
}

impl<'a> Ctx<'a> {
    fn new(
        world: &'a World,
        now: Time,
        sim: &'a SimResult,
        prio: &[Priorities],
        state: &[ProjectFetchState],
        policy: &Policy,
    ) -> Self {
        let nr = world.n_resources();
        let np = world.projects.len();
        let inst: Vec<f64> = (0..nr)
            .map(|r| world.instances(ResourceId(r as u8)))
            .collect();
        let buf_min = world.prefs.work_buf_min();
        let buf_total = world.prefs.work_buf_total();
        let low = (0..nr)
            .map(|r| inst[r] > 0.0 && sim.resources[r].saturated_time < buf_min)
            .collect();
        let below_max = (0..nr)
            .map(|r| inst[r] > 0.0 && sim.resources[r].saturated_time < buf_total)
            .collect();

        // Starved of its share: its queue stops filling its share within the minimum buffer,
        // and it deserves the resource at least as much as some project holding work for it
        // (a project that has had more than its share lately waits for the global trigger).
        let sched_prio = |p: usize, r: usize| prio.get(r).map_or(0.0, |x| x.value[p]);
        let starved = (0..np)
            .map(|p| {
                (0..nr)
                    .map(|r| {
                        let holders_min = (0..np)
                            .filter(|&q| q != p && sim.projects[q][r].n_runnable_jobs > 0)
                            .map(|q| sched_prio(q, r))
                            .fold(f64::INFINITY, f64::min);
                        inst[r] > 0.0
                            && world.projects[p].resource_share > 0.0
                            && sim.projects[p][r].share_frac > 0.0
                            && sim.projects[p][r].start_delay < buf_min
                            && sched_prio(p, r) >= holders_min
                    })
                    .collect()
            })
            .collect();
        let mut runnable = vec![0usize; np];
        for j in world.jobs.iter().filter(|j| j.state.is_unfinished()) {
            runnable[j.project.index()] += 1;
        }
        let any_idle = (0..nr).any(|r| sim.resources[r].nidle_now > 1e-6);
        let project_rule = (0..np)
            .map(|p| {
                let pr = &world.projects[p];
                let st = state.get(p);
                if pr.suspended {
                    Some(FetchRule::Suspended)
                } else if pr.no_new_work {
                    Some(FetchRule::NoNewWork)
                } else if let Some(until) = st
                    .map(|s| rpc_backoff_end(s, any_idle))
                    .filter(|&t| t > now)
                {
                    Some(FetchRule::RpcBackoff { until })
                } else if runnable[p] > WF_MAX_RUNNABLE_JOBS {
                    Some(FetchRule::TooManyJobs)
                } else {
                    pr.last_upload_started
                        .map(|u| u + WF_UPLOAD_DEFER_INTERVAL)
                        .filter(|&until| until > now && !any_idle)
                        .map(|until| FetchRule::UploadDeferral { until })
                }
            })
            .collect();

        // A project whose app versions are known is asked only for the resources they use;
        // one that has sent none yet (just attached) may have apps for any resource: the
        // server decides, and says which it lacks (`no_rsc_apps`, in `no_work_for`).
        let mut has_apps = vec![vec![false; nr]; np];
        let mut knows_versions = vec![false; np];
        for v in &world.app_versions {
            has_apps[v.project.index()][v.resource.index()] = true;
            knows_versions[v.project.index()] = true;
        }
        for (p, known) in knows_versions.iter().enumerate() {
            if !known || !world.projects[p].fetch_only_known_resources {
                has_apps[p].iter_mut().for_each(|x| *x = true);
            }
        }
        let multi_rsc: Vec<bool> = has_apps
            .iter()
            .map(|a| a.iter().filter(|&&x| x).count() > 1)
            .collect();
        let mut has_mc: Vec<bool> = world
            .projects
            .iter()
            .map(|p| p.max_concurrent.is_some())
            .collect();
        for a in world.apps.iter().filter(|a| a.max_concurrent.is_some()) {
            has_mc[a.project.index()] = true;
        }
        // Deadline room: a new job starts after the project's simulated start delay and its
        // share of the instances drains the new work; the last job runs alone at the end. All
        // of it must finish `deadline_cushion` before its report deadline, the point after
        // which the simulation would call it endangered.
        let room: Vec<Vec<Option<DeadlineRoom>>> = (0..np)
            .map(|p| {
                (0..nr)
                    .map(|r| {
                        let st = state.get(p)?;
                        let latency = st.latency?;
                        let shape = st.job_shape.get(r).copied().flatten()?;
                        let avail = world.time_stats.availability(ResourceId(r as u8));
                        let runtime = shape.runtime / avail;
                        let job = runtime * shape.usage;
                        // Its share of the instances (one job at a time for a backup project).
                        let share_rate = sim.projects[p][r].share_frac * inst[r];
                        let rate = if share_rate > 1e-9 {
                            share_rate
                        } else {
                            shape.usage
                        };
                        let start_delay = sim.projects[p][r].start_delay;
                        let cushion = deadline_cushion(&world.prefs, latency);
                        let latest_start = latency - cushion - runtime;
                        let slack = latest_start - start_delay;
                        let (work, jobs) = if slack < 0.0 {
                            (0.0, 0.0)
                        } else {
                            let w = rate * slack + job;
                            (w, (w / job).floor())
                        };
                        Some(DeadlineRoom {
                            work,
                            job,
                            jobs,
                            start_delay,
                            latest_start,
                        })
                    })
                    .collect()
            })
            .collect();
        let rsc_rule = (0..np)
            .map(|p| {
                (0..nr)
                    .map(|r| {
                        let pr = &world.projects[p];
                        let rid = ResourceId(r as u8);
                        if world.gpu_control.stops(rid) {
                            Some(FetchRule::FinishThenStop)
                        } else if !has_apps[p][r] || pr.no_work_for.contains(rid) {
                            Some(FetchRule::NoApps)
                        } else if non_excluded(world, p, r) <= 0.0 {
                            Some(FetchRule::AllInstancesExcluded)
                        } else if pr.resource_share <= 0.0 && sim.resources[r].nidle_now <= 1e-6 {
                            Some(FetchRule::ZeroShareNotIdle)
                        } else if has_mc[p] && sim.projects[p][r].capacity_shortfall <= 1e-6 {
                            Some(FetchRule::MaxConcurrent)
                        } else if let Some(d) = room[p][r].filter(|d| d.jobs < 1.0) {
                            Some(FetchRule::DeadlineLimit {
                                start_delay: d.start_delay,
                                latest_start: d.latest_start,
                            })
                        } else {
                            state
                                .get(p)
                                .and_then(|s| s.backoff_until.get(r).copied())
                                .filter(|&until| until > now)
                                .map(|until| FetchRule::ResourceBackoff { until })
                        }
                    })
                    .collect()
            })
            .collect();

        // Fetch priority: scheduling priority minus queued work as a fraction of a full buffer.
        let speeds: Vec<f64> = (0..nr)
            .map(|r| relative_speed(world, ResourceId(r as u8), policy))
            .collect();
        let capacity: f64 = (0..nr).map(|r| inst[r] * speeds[r]).sum();
        let mut queued = vec![0.0; np];
        for j in world.jobs.iter().filter(|j| j.state.is_unfinished()) {
            let v = world.version_of(j);
            queued[j.project.index()] +=
                remaining_secs(world, j) * v.usage() * speeds[v.resource.index()];
        }
        let prio = (0..np)
            .map(|p| {
                (0..nr)
                    .map(|r| {
                        prio.get(r).map_or(0.0, |x| x.value[p])
                            - queued[p] / (buf_total * capacity.max(1e-9))
                    })
                    .collect()
            })
            .collect();
        Ctx {
            world,
            sim,
            nr,
            np,
            low,
            below_max,
            starved,
            project_rule,
            rsc_rule,
            has_mc,
            multi_rsc,
            prio,
            room,
            edf: policy.edf,
        }
    }

    /// Share of `p` among the projects that may be asked for `r` (1 if none has a share).
    fn fetchable_share(&self, p: usize, r: usize) -> f64 {
        let total: f64 = (0..self.np)
            .filter(|&q| self.ok(q, r))
            .map(|q| self.world.projects[q].resource_share.max(0.0))
            .sum();
        if total > 0.0 {
            self.world.projects[p].resource_share.max(0.0) / total
        } else {
            1.0
        }
    }

    /// Whether the deadlines of `p`'s jobs for `r`, not the buffer, limit its queue: a new job
    /// must start before the maximum buffer ends (see [`FetchRule::DeadlineLimit`]).
    fn deadline_bound(&self, p: usize, r: usize) -> bool {
        self.room[p][r].is_some_and(|d| d.latest_start < self.world.prefs.work_buf_total())
    }

    /// Whether `r` needs work from `p`: the resource is low, or `p` is starved of its share.
    fn low_for(&self, p: usize, r: usize) -> bool {
        self.low[r] || self.starved[p][r]
    }

    fn ok(&self, p: usize, r: usize) -> bool {
        self.project_rule[p].is_none() && self.rsc_rule[p][r].is_none()
    }

    /// When a starved-only request of `p` for `r` can wait for the report of a job of `p`
    /// finishing soon (within [`MAX_REPORT_DELAY`]) and before its queue stops filling its
    /// share: that report RPC carries the request, so the project is contacted once, not
    /// twice. `None` when it cannot wait: the resource is low for everyone, or no such job.
    /// Without deadline promotion it waits only while `p`'s deadlines leave room for fewer
    /// than [`RR_WAIT_ROOM_JOBS`] jobs (see there).
    fn waits_for_report(&self, now: Time, p: usize, r: usize) -> Option<Time> {
        if self.low[r]
            || (!self.edf && !self.room[p][r].is_some_and(|d| d.jobs < RR_WAIT_ROOM_JOBS))
        {
            return None;
        }
        let horizon = self.sim.projects[p][r].start_delay.min(MAX_REPORT_DELAY);
        self.world
            .jobs
            .iter()
            .filter(|j| j.project.index() == p && matches!(j.state, JobState::Running))
            .filter(|j| self.world.version_of(j).resource.index() == r)
            .map(|j| remaining_secs(self.world, j))
            .filter(|&left| left <= horizon)
            .min_by(f64::total_cmp)
            .map(|left| now + left)
    }

    /// Projects able to ask for `r`, best first.
    fn candidates(&self, r: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.np).filter(|&p| self.ok(p, r)).collect();
        v.sort_by(|&a, &b| {
            self.prio[b][r]
                .total_cmp(&self.prio[a][r])
                .then(self.multi_rsc[a].cmp(&self.multi_rsc[b]))
                .then(a.cmp(&b))
        });
        v
    }

    /// What project `p` should ask for resource `r` (None if nothing).
    fn request(&self, p: usize, r: usize) -> Option<ResourceRequest> {
        let world = self.world;
        let pr = &world.projects[p];
        let rid = ResourceId(r as u8);
        let rs = &self.sim.resources[r];
        let inst = world.instances(rid).max(1e-9);
        let non_ex = non_excluded(world, p, r);
        let (secs, ninst) = if pr.resource_share <= 0.0 {
            if rs.nidle_now > 1e-6 {
                (1.0, 1.0)
            } else {
                (0.0, 0.0)
            }
        } else if self.has_mc[p] {
            (self.sim.projects[p][r].capacity_shortfall, 0.0)
        } else {
            // Idle instances now, or the instances its share entitles it to beyond what its
            // queued jobs use, whichever is larger.
            let entitled = (inst * self.fetchable_share(p, r)).min(non_ex);
            let by_share = (entitled - self.sim.projects[p][r].nused_total).max(0.0);
            // Seconds: the resource's idle time in the buffer window, or the project's own
            // shortfall against its share when others keep the resource busy.
            (
                (rs.shortfall * non_ex / inst).max(self.sim.projects[p][r].shortfall),
                rs.nidle_now.min(non_ex).max(by_share),
            )
        };
        let (mut secs, mut ninst) = (secs, ninst);
        match self.room[p][r] {
            // Never more than the project's deadlines allow: the server keeps sending while
            // either figure is positive, so both are capped (`jobs` ≥ 1 here, see `rsc_rule`).
            Some(d) => {
                secs = secs.min((d.work - d.job).max(1.0));
                ninst = ninst.min(d.jobs);
            }
            // Its deadlines are not known yet: only its share of the idle instances (the other
            // projects are asked for theirs), until its first jobs tell how long they are. On a
            // coprocessor also only its share of the buffer's idle seconds: a mixed project
            // asked first would otherwise fill a shared GPU for all, and the other projects'
            // jobs would then miss their deadlines behind its batch. The same on the CPU for
            // a project that can supply several resources: asked for its GPU work and the
            // CPU's whole buffer at once, its CPU jobs would crowd out the CPU-only projects
            // and later take every CPU as deadline-endangered.
            None if pr.resource_share > 0.0 => {
                let share = self.fetchable_share(p, r);
                let entitled = (inst * share).min(non_ex);
                let by_share = (entitled - self.sim.projects[p][r].nused_total).max(0.0);
                let idle_part = (rs.nidle_now.min(non_ex) * share - 1e-9).ceil().max(0.0);
                ninst = ninst.min(by_share.max(idle_part));
                if !rid.is_cpu() || self.multi_rsc[p] {
                    let own = self.sim.projects[p][r].shortfall;
                    secs = secs.min((rs.shortfall * non_ex / inst * share).max(own));
                }
            }
            None => {}
        }
        if (pr.dcf < 0.02 || pr.dcf > 80.0) && secs > 0.0 {
            secs = 1.0; // wacky duration correction: ask for a token amount
        }
        if ninst > 0.0 && secs <= 0.0 {
            secs = 1.0;
        }
        (secs > 0.0).then(|| ResourceRequest {
            resource: rid,
            req_secs: secs,
            req_instances: ninst.max(0.0),
            estimated_delay: estimated_delay(self.sim, p, r),
        })
    }
}

/// The `estimated_delay` sent for resource `r` to project `p`: when a new job of it would
/// start according to the simulation (its queue drained to below its share, or an instance
/// idle), and never less than the deadline-missing work that runs ahead of everything.
fn estimated_delay(sim: &SimResult, p: usize, r: usize) -> f64 {
    sim.projects[p][r]
        .start_delay
        .max(sim.resources[r].busy_time)
}

/// Non-excluded instances of resource `r` for project `p`.
fn non_excluded(world: &World, p: usize, r: usize) -> f64 {
    let rid = ResourceId(r as u8);
    let n = world.instances(rid);
    if r == 0 {
        return n;
    }
    let mask = world.projects[p].excluded_mask(rid) | world.gpu_control.excluded_mask(rid);
    (0..(n as u32).min(64))
        .filter(|&k| mask & (1 << k) == 0)
        .count() as f64
}

fn finish(project: usize, reason: RpcReason, resources: Vec<ResourceRequest>) -> WorkRequest {
    let work_req_seconds = resources
        .iter()
        .find(|x| x.resource.is_cpu())
        .map_or(0.0, |x| x.req_secs);
    WorkRequest {
        project: ProjectId(project as u32),
        reason,
        resources,
        work_req_seconds,
    }
}

/// Decide whether, whom and what to ask for work at `now`.
pub fn decide(
    world: &World,
    now: Time,
    sim: &SimResult,
    prio: &[Priorities],
    state: &[ProjectFetchState],
    policy: &Policy,
) -> FetchDecision {
    let c = Ctx::new(world, now, sim, prio, state, policy);
    let (nr, np) = (c.nr, c.np);
    let mut out = FetchDecision::default();
    let block = |p: Option<usize>, r: Option<usize>, rule: FetchRule| FetchBlock {
        project: p.map(|p| ProjectId(p as u32)),
        resource: r.map(|r| ResourceId(r as u8)),
        rule,
    };

    // 1. First contact after attaching: 1 s per resource it may use.
    for p in 0..np {
        let pr = &world.projects[p];
        if !pr.initial_rpc_pending {
            continue;
        }
        if let Some(rule) = c.project_rule[p].filter(|r| !matches!(r, FetchRule::NoNewWork)) {
            out.blocks.push(block(Some(p), None, rule));
            continue;
        }
        let ask = pr.resource_share > 0.0 && !pr.no_new_work;
        let resources = (0..nr)
            .filter(|&r| {
                !pr.no_work_for.contains(ResourceId(r as u8)) && non_excluded(world, p, r) > 0.0
            })
            .map(|r| ResourceRequest {
                resource: ResourceId(r as u8),
                // Nothing for a resource set to finish then stop.
                req_secs: if ask && !world.gpu_control.stops(ResourceId(r as u8)) {
                    1.0
                } else {
                    0.0
                },
                req_instances: 0.0,
                estimated_delay: estimated_delay(sim, p, r),
            })
            .collect();
        out.request = Some(finish(p, RpcReason::Init, resources));
        return out;
    }

    if world.disk_full {
        out.blocks.push(block(None, None, FetchRule::DiskFull));
        return out;
    }

    // 2. Is any resource low?
    for r in 0..nr {
        if !c.low[r] && world.instances(ResourceId(r as u8)) > 0.0 {
            out.blocks.push(block(
                None,
                Some(r),
                FetchRule::BufferFull {
                    saturated: sim.resources[r].saturated_time,
                    min_buffer: world.prefs.work_buf_min(),
                },
            ));
        }
    }
    let any_starved = (0..np).any(|p| (0..nr).any(|r| c.starved[p][r] && c.ok(p, r)));
    if !c.low.iter().any(|&x| x) && !any_starved {
        return out;
    }
    for p in 0..np {
        if let Some(rule) = c.project_rule[p] {
            out.blocks.push(block(Some(p), None, rule));
        }
    }

    // 3. The best candidate per resource; ask the most deserving best candidate of a low one.
    let cands: Vec<Vec<usize>> = (0..nr).map(|r| c.candidates(r)).collect();
    let mut chosen: Option<usize> = None;
    let mut best = f64::NEG_INFINITY;
    for r in 0..nr {
        let first = cands[r].iter().copied().find(|&p| {
            if !c.low_for(p, r) {
                return false;
            }
            match c.waits_for_report(now, p, r) {
                Some(until) => {
                    out.blocks
                        .push(block(Some(p), Some(r), FetchRule::WaitsForReport { until }));
                    false
                }
                None => true,
            }
        });
        if let Some(p) = first {
            if c.prio[p][r] > best {
                best = c.prio[p][r];
                chosen = Some(p);
            }
        }
        if !c.low[r] {
            continue;
        }
        for p in (0..np).filter(|&p| c.project_rule[p].is_none()) {
            if let Some(rule) = c.rsc_rule[p][r] {
                out.blocks.push(block(Some(p), Some(r), rule));
            }
        }
    }
    let Some(p) = chosen else { return out };

    // 4. Ask it for every low resource it can supply, and top up the resources below the
    //    max buffer for which it is the best candidate.
    let mut resources = Vec::new();
    for r in (0..nr).filter(|&r| c.ok(p, r)) {
        let wanted = c.low_for(p, r) || (cands[r].first() == Some(&p) && c.below_max[r]);
        if wanted {
            resources.extend(c.request(p, r));
        }
    }
    for r in (0..nr).filter(|&r| c.low[r]) {
        for &q in cands[r].iter().filter(|&&q| q != p) {
            out.blocks
                .push(block(Some(q), Some(r), FetchRule::LowerPriority));
        }
    }
    if !resources.is_empty() {
        out.request = Some(finish(p, RpcReason::NeedWork, resources));
    }
    out
}

/// Work to request from `project` on an RPC made for another reason (reporting, a
/// project- or user-requested update): every resource below the max buffer that the project
/// may be asked for (a resource backoff does not stop it, the RPC happens anyway), that the
/// fetch trigger would ask for or whose queue the project's deadlines limit, and for which no
/// project of strictly higher priority could be asked.
pub fn piggyback(
    world: &World,
    now: Time,
    sim: &SimResult,
    prio: &[Priorities],
    state: &[ProjectFetchState],
    policy: &Policy,
    project: ProjectId,
) -> Option<WorkRequest> {
    let c = Ctx::new(world, now, sim, prio, state, policy);
    piggyback_in(&c, project.index())
}

/// [`piggyback`] for project `p` over a computed context.
fn piggyback_in(c: &Ctx, p: usize) -> Option<WorkRequest> {
    if p >= c.np {
        return None;
    }
    let project_ok = matches!(
        c.project_rule[p],
        None | Some(FetchRule::RpcBackoff { .. }) | Some(FetchRule::UploadDeferral { .. })
    );
    if !project_ok {
        return None;
    }
    let mut resources = Vec::new();
    for r in 0..c.nr {
        let rule_ok = matches!(
            c.rsc_rule[p][r],
            None | Some(FetchRule::ResourceBackoff { .. })
        );
        // Only what the fetch trigger would ask: a resource below the minimum buffer, or one
        // this project is starved on (a top-up to the maximum on every report would fill the
        // queue past what projects with short deadlines can then get); or, for a project
        // whose deadlines and not the buffer limit its queue, what its deadlines allow (that
        // much cannot crowd out the others, and the report RPC happens anyway).
        if !rule_ok || !c.below_max[r] || !(c.low_for(p, r) || c.deadline_bound(p, r)) {
            continue;
        }
        let better = c
            .candidates(r)
            .into_iter()
            .any(|q| q != p && c.prio[q][r] > c.prio[p][r]);
        if !better {
            resources.extend(c.request(p, r));
        }
    }
    (!resources.is_empty()).then(|| finish(p, RpcReason::NeedWork, resources))
}

/// Removes from `due` the reports due only because a deadline is near
/// ([`ReportRule::DeadlineNear`]) that can wait for the project's next RPC: a report RPC
/// costs the project's scheduler as much as one that brings work, so one that brings none,
/// or one job or two, is better made later with more. Such a report waits while
/// - none of its jobs has reached [`report_wait_limit`]: [`REPORT_WAIT_MARGIN`] of its delay
///   bound (at most [`MAX_REPORT_DELAY`]) before its deadline, or [`MAX_REPORT_HOLD`] after
///   its completion, and
/// - the work request it would carry ([`piggyback`]) is empty, or asks only for resources
///   that are not below the minimum buffer, on which the project's own queue lasts at least
///   [`REPORT_WAIT_MIN_QUEUE`], and where its deadlines leave room for fewer than
///   [`REPORT_WAIT_ROOM_JOBS`] new jobs.
///
/// It goes with the project's next work request (the fetch trigger fires once its queue
/// runs low) or on its own when the margin is reached.
pub fn hold_reports(
    world: &World,
    now: Time,
    sim: &SimResult,
    prio: &[Priorities],
    state: &[ProjectFetchState],
    policy: &Policy,
    due: Vec<ReportDue>,
) -> (Vec<ReportDue>, Vec<HeldReport>) {
    if !due.iter().any(|r| r.rule == ReportRule::DeadlineNear) {
        return (due, Vec::new());
    }
    let c = Ctx::new(world, now, sim, prio, state, policy);
    let mut held = Vec::new();
    let kept = due
        .into_iter()
        .filter(|r| {
            let until = (r.rule == ReportRule::DeadlineNear)
                .then(|| report_waits(&c, now, r))
                .flatten();
            if let Some(until) = until {
                held.push(HeldReport {
                    project: r.project,
                    jobs: r.jobs.clone(),
                    until,
                });
            }
            until.is_none()
        })
        .collect();
    (kept, held)
}

/// The time a report due by a deadline goes at the latest: [`REPORT_WAIT_MARGIN`] of the job's
/// delay bound (at most [`MAX_REPORT_DELAY`]) before its deadline, and no later than
/// [`MAX_REPORT_HOLD`] after the job completed.
pub fn report_wait_limit(job: &crate::model::Job) -> Time {
    let bound = (job.report_deadline - job.received_time).max(0.0);
    let by_deadline = job.report_deadline - MAX_REPORT_DELAY.min(bound * REPORT_WAIT_MARGIN);
    match job.state {
        JobState::Finished { completed_time, .. } => {
            by_deadline.min(completed_time + MAX_REPORT_HOLD)
        }
        _ => by_deadline,
    }
}

/// Until when the report `r` waits (see [`hold_reports`]); `None`: it goes now.
fn report_waits(c: &Ctx, now: Time, r: &ReportDue) -> Option<Time> {
    let p = r.project.index();
    let until = c
        .world
        .jobs
        .iter()
        .filter(|j| j.project == r.project)
        .filter(|j| {
            matches!(
                j.state,
                JobState::Finished {
                    ready_to_report: true,
                    ..
                }
            )
        })
        .map(report_wait_limit)
        .fold(f64::INFINITY, f64::min);
    if now >= until {
        return None;
    }
    let waits = piggyback_in(c, p).is_none_or(|w| {
        w.resources.iter().all(|x| {
            let ri = x.resource.index();
            !c.low[ri]
                && c.sim.projects[p][ri].start_delay >= REPORT_WAIT_MIN_QUEUE
                && c.room[p][ri].is_some_and(|d| d.jobs < REPORT_WAIT_ROOM_JOBS)
        })
    });
    waits.then_some(until)
}

/// A report the core holds back for the project's next RPC ([`hold_reports`]).
#[derive(Clone, Debug, PartialEq)]
pub struct HeldReport {
    /// The project.
    pub project: ProjectId,
    /// Its jobs ready to report.
    pub jobs: Vec<crate::model::JobId>,
    /// It goes at this time at the latest.
    pub until: Time,
}

/// Why finished jobs are reported now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportRule {
    /// The project is "no new tasks".
    NoNewWork,
    /// The server, the app or the project asked for immediate reporting.
    Immediately,
    /// A report deadline is within `max(1 day, min buffer)`.
    DeadlineNear,
    /// A job completed more than an hour ago.
    CompletedLongAgo,
    /// At least 64 jobs are ready.
    Many,
}

/// A project to contact to report finished jobs.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportDue {
    /// The project.
    pub project: ProjectId,
    /// The first rule that applies.
    pub rule: ReportRule,
    /// Every job of the project ready to report.
    pub jobs: Vec<crate::model::JobId>,
}

/// Whether the finished jobs `ready` of project `p`, due only because their deadline is near,
/// can wait for a running job of the same project to finish and be reported with it: that
/// job's estimated end comes within [`MAX_REPORT_DELAY`] of the oldest one's completion, and
/// ahead of every one's report deadline by a margin: [`MAX_REPORT_DELAY`], or a quarter of the
/// job's delay bound when that is shorter.
fn joins_next_finish(world: &World, now: Time, p: usize, ready: &[usize]) -> bool {
    let mut oldest = f64::INFINITY;
    let mut latest_report = f64::INFINITY;
    for &i in ready {
        let j = &world.jobs[i];
        if let JobState::Finished { completed_time, .. } = j.state {
            oldest = oldest.min(completed_time);
        }
        let bound = (j.report_deadline - j.received_time).max(0.0);
        if bound < MAX_REPORT_DELAY {
            return false;
        }
        let margin = MAX_REPORT_DELAY.min(bound / 4.0);
        latest_report = latest_report.min(j.report_deadline - margin);
    }
    let wait_until = (oldest + MAX_REPORT_DELAY).min(latest_report);
    running_job_finishes_by(world, now, p, wait_until)
}

/// Whether the finished jobs `ready` of project `p`, due only because one completed over
/// [`MAX_REPORT_DELAY`] ago (no report deadline within `cushion`), can wait for a running job
/// of the same project estimated to finish within [`MAX_REPORT_HOLD`] of the oldest one's
/// completion and before any of their deadlines comes within `cushion`.
fn holds_for_next_finish(
    world: &World,
    now: Time,
    p: usize,
    ready: &[usize],
    cushion: f64,
) -> bool {
    let mut wait_until = f64::INFINITY;
    for &i in ready {
        let j = &world.jobs[i];
        if let JobState::Finished { completed_time, .. } = j.state {
            wait_until = wait_until.min(completed_time + MAX_REPORT_HOLD);
        }
        wait_until = wait_until.min(j.report_deadline - cushion);
    }
    running_job_finishes_by(world, now, p, wait_until)
}

/// Whether a running job of project `p` is estimated to finish by `until`.
fn running_job_finishes_by(world: &World, now: Time, p: usize, until: Time) -> bool {
    world
        .jobs
        .iter()
        .filter(|j| j.project.index() == p && matches!(j.state, JobState::Running))
        .any(|j| now + remaining_secs(world, j) <= until)
}

/// Projects with finished jobs that should be reported at `now` (reference §4.7).
pub fn reports_due(world: &World, now: Time, state: &[ProjectFetchState]) -> Vec<ReportDue> {
    let np = world.projects.len();
    let mut per: Vec<Vec<usize>> = vec![Vec::new(); np];
    for (i, j) in world.jobs.iter().enumerate() {
        if let JobState::Finished {
            ready_to_report: true,
            ..
        } = j.state
        {
            per[j.project.index()].push(i);
        }
    }
    let cushion = REPORT_DEADLINE_CUSHION.max(world.prefs.work_buf_min());
    let mut out = Vec::new();
    for (p, jobs) in per.iter().enumerate() {
        if jobs.is_empty() {
            continue;
        }
        let pr = &world.projects[p];
        if pr.suspended || state.get(p).is_some_and(|s| s.min_rpc_time > now) {
            continue;
        }
        if pr
            .last_upload_started
            .is_some_and(|u| u + WF_UPLOAD_DEFER_INTERVAL > now)
        {
            continue;
        }
        let immediate = jobs.iter().any(|&i| {
            let j = &world.jobs[i];
            j.report_immediately || world.apps[world.version_of(j).app.index()].report_immediately
        }) || pr.report_immediately;
        let deadline_near = jobs
            .iter()
            .any(|&i| now > world.jobs[i].report_deadline - cushion);
        let old = jobs.iter().any(|&i| match world.jobs[i].state {
            JobState::Finished { completed_time, .. } => now > completed_time + MAX_REPORT_DELAY,
            _ => false,
        });
        let rule = if pr.no_new_work {
            Some(ReportRule::NoNewWork)
        } else if immediate {
            Some(ReportRule::Immediately)
        } else if deadline_near && !old && joins_next_finish(world, now, p, jobs) {
            // Reported together with the project's next job, which finishes soon: one RPC
            // for both (a project's scheduler pays per RPC), still well before any deadline.
            None
        } else if deadline_near {
            Some(ReportRule::DeadlineNear)
        } else if old && holds_for_next_finish(world, now, p, jobs, cushion) {
            // Its deadlines are days away: one RPC for it and the next job, a few hours later.
            None
        } else if old {
            Some(ReportRule::CompletedLongAgo)
        } else if jobs.len() >= RESULT_REPORT_IF_AT_LEAST_N {
            Some(ReportRule::Many)
        } else {
            None
        };
        if let Some(rule) = rule {
            out.push(ReportDue {
                project: ProjectId(p as u32),
                rule,
                jobs: jobs.iter().map(|&i| world.jobs[i].id).collect(),
            });
        }
    }
    out
}
