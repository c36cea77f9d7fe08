//! Work fetch (reference §4): when to ask (a resource's saturated time below the minimum
//! buffer), whom (the highest-priority project able to supply it), what to ask (`req_secs`,
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
use crate::rrsim::SimResult;

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
/// Report when a project has this many finished jobs (`RESULT_REPORT_IF_AT_LEAST_N`).
pub const RESULT_REPORT_IF_AT_LEAST_N: usize = 64;
/// Report at most this long after completion (`MAX_REPORT_DELAY`).
pub const MAX_REPORT_DELAY: f64 = 3600.0;
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
}

impl ProjectFetchState {
    /// Make room for `nr` resources.
    pub fn resize(&mut self, nr: usize) {
        self.backoff_until.resize(nr, 0.0);
        self.backoff_interval.resize(nr, 0.0);
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

    /// An RPC failed: `min_rpc_time ≥ now + min(60 × 2^n, 4 h) × U(0.5, 1)`.
    pub fn rpc_failed(&mut self, now: Time, jitter: &mut dyn Jitter) {
        self.nrpc_failures = self.nrpc_failures.saturating_add(1);
        let n = self.nrpc_failures.min(10);
        let base = (SCHED_RETRY_DELAY_MIN * f64::from(1u32 << n)).min(SCHED_RETRY_DELAY_MAX);
        let t = now + base * (0.5 + 0.5 * jitter.next_unit());
        self.min_rpc_time = self.min_rpc_time.max(t);
    }

    /// An RPC succeeded: failures reset; the server's `request_delay` applies.
    pub fn rpc_succeeded(&mut self, now: Time, request_delay: f64) {
        self.nrpc_failures = 0;
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
    /// Project-wide RPC backoff after failures or a server `request_delay`.
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
    /// Seconds until an instance frees up (`<estimated_delay>`).
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

/// Decide whether, whom and what to ask for work at `now`.
pub fn decide(
    world: &World,
    now: Time,
    sim: &SimResult,
    prio: &[Priorities],
    state: &[ProjectFetchState],
    policy: &Policy,
) -> FetchDecision {
    let nr = world.n_resources();
    let np = world.projects.len();
    let mut out = FetchDecision::default();
    let state_of = |p: usize| state.get(p);

    // Project-wide rules.
    let mut runnable = vec![0usize; np];
    for j in &world.jobs {
        if j.state.is_unfinished() {
            runnable[j.project.index()] += 1;
        }
    }
    let any_idle = (0..nr).any(|r| sim.resources[r].nidle_now > 1e-6);
    let project_rule = |p: usize| -> Option<FetchRule> {
        let pr = &world.projects[p];
        if pr.suspended {
            return Some(FetchRule::Suspended);
        }
        if pr.no_new_work {
            return Some(FetchRule::NoNewWork);
        }
        if let Some(s) = state_of(p) {
            if s.min_rpc_time > now {
                return Some(FetchRule::RpcBackoff {
                    until: s.min_rpc_time,
                });
            }
        }
        if runnable[p] > WF_MAX_RUNNABLE_JOBS {
            return Some(FetchRule::TooManyJobs);
        }
        if let Some(u) = pr.last_upload_started {
            let until = u + WF_UPLOAD_DEFER_INTERVAL;
            if until > now && !any_idle {
                return Some(FetchRule::UploadDeferral { until });
            }
        }
        None
    };

    // 1. First contact after attaching.
    for p in 0..np {
        let pr = &world.projects[p];
        if !pr.initial_rpc_pending {
            continue;
        }
        if let Some(rule) = project_rule(p).filter(|r| !matches!(r, FetchRule::NoNewWork)) {
            out.blocks.push(FetchBlock {
                project: Some(ProjectId(p as u32)),
                resource: None,
                rule,
            });
            continue;
        }
        let ask = pr.resource_share > 0.0 && !pr.no_new_work;
        let resources = (0..nr)
            .map(|r| ResourceId(r as u8))
            .filter(|&r| {
                let n = world.instances(r) as u32;
                let all_excluded = !r.is_cpu()
                    && n > 0
                    && (0..n.min(64)).all(|k| pr.excluded_mask(r) & (1 << k) != 0);
                !pr.no_work_for.contains(r) && !all_excluded
            })
            .map(|r| ResourceRequest {
                resource: r,
                req_secs: if ask { 1.0 } else { 0.0 },
                req_instances: 0.0,
                estimated_delay: sim.resources[r.index()].busy_time,
            })
            .collect::<Vec<_>>();
        let work_req_seconds = resources
            .iter()
            .find(|x| x.resource.is_cpu())
            .map_or(0.0, |x| x.req_secs);
        out.request = Some(WorkRequest {
            project: ProjectId(p as u32),
            reason: RpcReason::Init,
            resources,
            work_req_seconds,
        });
        return out;
    }

    // 2. Which resources are low / below the max buffer.
    let buf_min = world.prefs.work_buf_min();
    let buf_total = world.prefs.work_buf_total();
    let low: Vec<bool> = (0..nr)
        .map(|r| {
            world.instances(ResourceId(r as u8)) > 0.0 && sim.resources[r].saturated_time < buf_min
        })
        .collect();
    let below_max: Vec<bool> = (0..nr)
        .map(|r| {
            world.instances(ResourceId(r as u8)) > 0.0
                && sim.resources[r].saturated_time < buf_total
        })
        .collect();
    for r in 0..nr {
        if !low[r] && world.instances(ResourceId(r as u8)) > 0.0 {
            out.blocks.push(FetchBlock {
                project: None,
                resource: Some(ResourceId(r as u8)),
                rule: FetchRule::BufferFull {
                    saturated: sim.resources[r].saturated_time,
                    min_buffer: buf_min,
                },
            });
        }
    }
    if !low.iter().any(|&x| x) {
        return out;
    }

    // 3. Per (project, resource) rules.
    let mut has_apps = vec![vec![false; nr]; np];
    for v in &world.app_versions {
        has_apps[v.project.index()][v.resource.index()] = true;
    }
    let has_mc: Vec<bool> = (0..np)
        .map(|p| {
            world.projects[p].max_concurrent.is_some()
                || world
                    .apps
                    .iter()
                    .any(|a| a.project.index() == p && a.max_concurrent.is_some())
        })
        .collect();
    let n_non_excluded = |p: usize, r: usize| -> f64 {
        let n = world.instances(ResourceId(r as u8));
        if r == 0 {
            return n;
        }
        let mask = world.projects[p].excluded_mask(ResourceId(r as u8));
        (0..(n as u32).min(64))
            .filter(|&k| mask & (1 << k) == 0)
            .count() as f64
    };
    let rsc_rule = |p: usize, r: usize| -> Option<FetchRule> {
        let pr = &world.projects[p];
        let rid = ResourceId(r as u8);
        if !has_apps[p][r] || pr.no_work_for.contains(rid) {
            return Some(FetchRule::NoApps);
        }
        if n_non_excluded(p, r) <= 0.0 {
            return Some(FetchRule::AllInstancesExcluded);
        }
        if pr.resource_share <= 0.0 && sim.resources[r].nidle_now <= 1e-6 {
            return Some(FetchRule::ZeroShareNotIdle);
        }
        if has_mc[p] && sim.projects[p][r].capacity_shortfall <= 1e-6 {
            return Some(FetchRule::MaxConcurrent);
        }
        if let Some(s) = state_of(p) {
            if let Some(&until) = s.backoff_until.get(r) {
                if until > now {
                    return Some(FetchRule::ResourceBackoff { until });
                }
            }
        }
        None
    };

    // 4. Fetch priority: scheduling priority minus queued work as a fraction of a full buffer.
    let speeds: Vec<f64> = (0..nr)
        .map(|r| relative_speed(world, ResourceId(r as u8), policy))
        .collect();
    let total_capacity: f64 = (0..nr)
        .map(|r| world.instances(ResourceId(r as u8)) * speeds[r])
        .sum();
    let mut queued = vec![0.0; np];
    for j in world.jobs.iter().filter(|j| j.state.is_unfinished()) {
        let v = world.version_of(j);
        queued[j.project.index()] +=
            remaining_secs(world, j) * v.usage() * speeds[v.resource.index()];
    }
    let fetch_prio = |p: usize, r: usize| -> f64 {
        let base = prio.get(r).map_or(0.0, |x| x.value[p]);
        base - queued[p] / (buf_total * total_capacity.max(1e-9))
    };

    let mut project_ok = vec![true; np];
    for (p, ok) in project_ok.iter_mut().enumerate() {
        if let Some(rule) = project_rule(p) {
            *ok = false;
            out.blocks.push(FetchBlock {
                project: Some(ProjectId(p as u32)),
                resource: None,
                rule,
            });
        }
    }
    let mut rule_cache: Vec<Vec<Option<FetchRule>>> = vec![vec![None; nr]; np];
    for p in 0..np {
        for r in 0..nr {
            rule_cache[p][r] = if project_ok[p] { rsc_rule(p, r) } else { None };
        }
    }
    let ok = |p: usize, r: usize| project_ok[p] && rule_cache[p][r].is_none();

    // Best candidate per resource, then the first project (by priority) able to supply a low one.
    let mut best_for: Vec<Option<usize>> = vec![None; nr];
    let mut chosen: Option<usize> = None;
    let mut best_score = f64::NEG_INFINITY;
    for r in 0..nr {
        let mut order: Vec<usize> = (0..np).filter(|&p| ok(p, r)).collect();
        order.sort_by(|&a, &b| {
            fetch_prio(b, r)
                .total_cmp(&fetch_prio(a, r))
                .then(a.cmp(&b))
        });
        best_for[r] = order.first().copied();
        if low[r] {
            if let Some(&p) = order.first() {
                // Across low resources, ask the most deserving of the best candidates.
                let s = fetch_prio(p, r);
                if s > best_score {
                    best_score = s;
                    chosen = Some(p);
                }
            }
            for p in 0..np {
                if let Some(rule) = rule_cache[p][r] {
                    out.blocks.push(FetchBlock {
                        project: Some(ProjectId(p as u32)),
                        resource: Some(ResourceId(r as u8)),
                        rule,
                    });
                }
            }
        }
    }
    let Some(p) = chosen else { return out };

    let pr = &world.projects[p];
    let wacky = pr.dcf < 0.02 || pr.dcf > 80.0;
    let mut resources = Vec::new();
    for r in 0..nr {
        let rid = ResourceId(r as u8);
        if !ok(p, r) {
            continue;
        }
        let wanted = low[r] || (best_for[r] == Some(p) && below_max[r]);
        if !wanted {
            if low[r] || below_max[r] {
                out.blocks.push(FetchBlock {
                    project: Some(ProjectId(p as u32)),
                    resource: Some(rid),
                    rule: FetchRule::LowerPriority,
                });
            }
            continue;
        }
        let rs = &sim.resources[r];
        let inst = world.instances(rid).max(1e-9);
        let non_ex = n_non_excluded(p, r);
        let (mut secs, mut ninst) = if pr.resource_share <= 0.0 {
            if rs.nidle_now > 1e-6 {
                (1.0, 1.0)
            } else {
                (0.0, 0.0)
            }
        } else if has_mc[p] {
            (sim.projects[p][r].capacity_shortfall, 0.0)
        } else {
            (rs.shortfall * non_ex / inst, rs.nidle_now.min(non_ex))
        };
        if wacky && secs > 0.0 {
            secs = 1.0;
        }
        if ninst > 0.0 && secs <= 0.0 {
            secs = 1.0;
        }
        if secs <= 0.0 {
            continue;
        }
        ninst = ninst.max(0.0);
        resources.push(ResourceRequest {
            resource: rid,
            req_secs: secs,
            req_instances: ninst,
            estimated_delay: rs.busy_time,
        });
    }
    // Other projects that could supply a low resource are lower priority.
    for r in 0..nr {
        if low[r] {
            for q in (0..np).filter(|&q| q != p && ok(q, r)) {
                out.blocks.push(FetchBlock {
                    project: Some(ProjectId(q as u32)),
                    resource: Some(ResourceId(r as u8)),
                    rule: FetchRule::LowerPriority,
                });
            }
        }
    }
    if resources.is_empty() {
        return out;
    }
    let work_req_seconds = resources
        .iter()
        .find(|x| x.resource.is_cpu())
        .map_or(0.0, |x| x.req_secs);
    out.request = Some(WorkRequest {
        project: ProjectId(p as u32),
        reason: RpcReason::NeedWork,
        resources,
        work_req_seconds,
    });
    out
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
        } else if deadline_near {
            Some(ReportRule::DeadlineNear)
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
