//! The client's decisions inside the emulator: which jobs run, when to contact which project
//! and what to ask for, how to back off, when to give up on a job.
//!
//! This is the policy the emulator scores. It is written as a self-contained adapter with the
//! same concepts as Ferrite's scheduling core (REC-based project priority with a per-job bump
//! for interleaving, a deadline check that promotes endangered jobs to earliest-deadline-first,
//! time slices, per-(project, resource) backoff) plus the fixes the core's design calls for:
//! work fetch per project and resource from the project's share of the instances, a queue
//! limited by what the project's deadlines allow, an honest queue delay sent to the server, and
//! aborting jobs that can no longer meet their deadline.

use rand_chacha::ChaCha8Rng;

use crate::model::{Job, JobState, Resources};
use crate::random::uniform;
use crate::scenario::Scenario;
use crate::server::WorkRequest;

/// Fraction of a deadline the client plans to use for a queue (the rest is margin for
/// availability gaps and estimate noise).
const DEADLINE_USE: f64 = 0.8;
/// Shortest and longest per-(project, resource) work backoff, seconds.
const WORK_BACKOFF_MIN: f64 = 600.0;
const WORK_BACKOFF_MAX: f64 = 86_400.0;
/// Project-down retry: first delay and cap, seconds.
const RPC_RETRY_MIN: f64 = 60.0;
const RPC_RETRY_MAX: f64 = 1800.0;
/// Report a finished job at most this long after it finished.
const MAX_REPORT_DELAY: f64 = 3600.0;
/// Report early when this many are waiting.
const REPORT_IF_AT_LEAST: usize = 64;

/// Switches for the policy under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PolicyOptions {
    /// No earliest-deadline-first promotion: priority order only (`--cpu_sched_rr_only`).
    pub rr_only: bool,
}

/// Per-(project, resource) state kept across passes.
#[derive(Debug, Clone, Copy, Default)]
struct ProjectResource {
    /// No work request for this resource before this time.
    backoff_until: f64,
    /// Current backoff interval (0 = not backing off).
    backoff_interval: f64,
    /// Whether the project has an app version for this resource.
    can_supply: bool,
}

/// Per-project client state.
#[derive(Debug, Clone)]
struct ProjectState {
    /// Recent peak FLOPS used, exponentially averaged (REC); drives priority.
    rec: f64,
    /// No RPC before this time (project down).
    min_rpc_time: f64,
    /// Consecutive failed RPCs.
    rpc_failures: u32,
    /// Shortest deadline span (deadline − received) seen among its jobs.
    latency: Option<f64>,
    /// Longest estimated job run time seen, per resource.
    job_runtime: Vec<f64>,
    /// Per-resource state.
    rsc: Vec<ProjectResource>,
}

/// What the emulator needs from a client policy. Two implementations exist: [`Policy`] (the
/// reference policy written for this emulator) and [`crate::core::CorePolicy`] (Ferrite's
/// scheduling core, `ferrite-sched`).
pub trait ClientPolicy: std::fmt::Debug {
    /// The step ending at `now` lasted `dt`; `used[p]` peak FLOPs project p used in it. Called
    /// before the step's progress is applied (`jobs` still shows what ran during the step).
    fn account(&mut self, now: f64, dt: f64, used: &[f64], jobs: &[Job]);
    /// Gives up on jobs that can no longer meet their deadline; returns how many.
    fn abort_doomed(&mut self, now: f64, jobs: &mut [Job]) -> usize;
    /// Indices (into `jobs`) of the jobs to run now.
    fn schedule(&mut self, now: f64, jobs: &[Job]) -> Vec<usize>;
    /// The next RPC to make, if any; `contacted[p]` marks projects already contacted in this
    /// step.
    fn next_rpc(&mut self, now: f64, jobs: &[Job], contacted: &[bool]) -> Option<RpcPlan>;
    /// An RPC to `p` failed (project down).
    fn rpc_failed(&mut self, now: f64, p: usize);
    /// An RPC to `p` carrying `req` succeeded and brought `new_jobs`.
    fn handle_reply(&mut self, now: f64, p: usize, req: &WorkRequest, new_jobs: &[Job]);
}

/// A planned scheduler RPC.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcPlan {
    /// Project to contact.
    pub project: usize,
    /// Work asked for (may be empty: report only).
    pub request: WorkRequest,
}

/// The emulated client's policy state.
#[derive(Debug)]
pub struct Policy {
    options: PolicyOptions,
    res: Resources,
    shares: Vec<f64>,
    period: f64,
    buf_min: f64,
    buf_total: f64,
    half_life: f64,
    report_immediately: bool,
    /// Client on×active fraction (CPU) and on×GPU-active (GPU): run times are divided by it.
    avail: Vec<f64>,
    projects: Vec<ProjectState>,
    rng: ChaCha8Rng,
}

impl Policy {
    /// A policy for `scenario` on resources `res`.
    pub fn new(
        scenario: &Scenario,
        res: Resources,
        options: PolicyOptions,
        rng: ChaCha8Rng,
    ) -> Self {
        let nrsc = res.instances.len();
        let h = &scenario.host;
        let cpu_avail = (h.on.frac * h.active.frac).clamp(0.01, 1.0);
        let gpu_avail = (h.on.frac * h.gpu_active.frac).clamp(0.01, 1.0);
        let avail = (0..nrsc)
            .map(|r| if r == 0 { cpu_avail } else { gpu_avail })
            .collect();
        let projects = (0..scenario.projects.len())
            .map(|p| {
                let mut rsc = vec![ProjectResource::default(); nrsc];
                for v in &scenario.app_versions {
                    if scenario.apps[v.app].project == p {
                        let r = v.gpu.map_or(0, |(g, _)| g + 1);
                        rsc[r].can_supply = true;
                    }
                }
                ProjectState {
                    rec: 0.0,
                    min_rpc_time: 0.0,
                    rpc_failures: 0,
                    latency: None,
                    job_runtime: vec![0.0; nrsc],
                    rsc,
                }
            })
            .collect();
        Self {
            options,
            res,
            shares: scenario.projects.iter().map(|p| p.resource_share).collect(),
            period: scenario.prefs.cpu_scheduling_period,
            buf_min: scenario.prefs.work_buf_min,
            buf_total: scenario.prefs.work_buf_total(),
            half_life: scenario.cc_config.rec_half_life,
            report_immediately: scenario.cc_config.report_results_immediately,
            avail,
            projects,
            rng,
        }
    }

    /// REC accounting: `used[p]` peak FLOPs project p used over the last `dt` seconds.
    pub fn account_rec(&mut self, dt: f64, used: &[f64]) {
        if dt <= 0.0 {
            return;
        }
        let w = (-dt * std::f64::consts::LN_2 / self.half_life).exp();
        for (p, u) in self.projects.iter_mut().zip(used) {
            p.rec = w * p.rec + (1.0 - w) * (u / dt);
        }
    }

    /// Gives up on queued jobs that can no longer meet their deadline even if started now.
    /// Returns how many were aborted.
    pub fn abort_doomed(&mut self, now: f64, jobs: &mut [Job]) -> usize {
        let mut n = 0;
        for j in jobs.iter_mut() {
            if j.state == JobState::Queued && !j.started && now + j.est_remaining() > j.deadline {
                j.state = JobState::Aborted(now);
                n += 1;
            }
        }
        n
    }

    /// Project priorities for scheduling: higher is more deserving. Share fractions are taken
    /// over projects with a runnable job.
    fn priorities(&self, jobs: &[Job]) -> (Vec<f64>, f64) {
        let np = self.projects.len();
        let mut runnable = vec![false; np];
        for j in jobs.iter().filter(|j| j.is_unfinished()) {
            runnable[j.project] = true;
        }
        let total_rec: f64 = (0..np)
            .filter(|p| runnable[*p])
            .map(|p| self.projects[p].rec)
            .sum();
        let r = if total_rec > 0.0 { total_rec } else { 1.0 };
        let recs = self.projects.iter().map(|p| p.rec / r).collect();
        (recs, r)
    }

    fn priority(&self, p: usize, rec_frac: f64, total_share: f64) -> f64 {
        let share = self.shares[p];
        if share <= 0.0 || total_share <= 0.0 {
            return -1000.0 - rec_frac;
        }
        -rec_frac / (share / total_share)
    }

    /// Decides which unfinished jobs run now. Returns their indices in `jobs`.
    pub fn schedule(&mut self, now: f64, jobs: &[Job]) -> Vec<usize> {
        let np = self.projects.len();
        let nrsc = self.res.instances.len();
        let (mut rec_tmp, _) = self.priorities(jobs);
        let mut runnable = vec![false; np];
        for j in jobs.iter().filter(|j| j.is_unfinished()) {
            runnable[j.project] = true;
        }
        let total_share: f64 = (0..np)
            .filter(|p| runnable[*p])
            .map(|p| self.shares[p])
            .sum();
        let total_peak = self.res.total_peak().max(1.0);

        // Each project's unfinished jobs, best first: running, then started, then by deadline
        // and arrival.
        let mut per_project: Vec<Vec<usize>> = vec![Vec::new(); np];
        for (i, j) in jobs.iter().enumerate() {
            if j.is_unfinished() {
                per_project[j.project].push(i);
            }
        }
        for list in &mut per_project {
            list.sort_by(|a, b| {
                let (ja, jb) = (&jobs[*a], &jobs[*b]);
                (jb.state == JobState::Running)
                    .cmp(&(ja.state == JobState::Running))
                    .then(jb.started.cmp(&ja.started))
                    .then(ja.deadline.total_cmp(&jb.deadline))
                    .then(ja.seq.cmp(&jb.seq))
            });
        }

        // Priority order over all jobs: take the next job of the most deserving project and
        // charge that project for it (interleaves projects).
        let mut order = Vec::new();
        let mut next = vec![0usize; np];
        loop {
            let best = (0..np)
                .filter(|p| next[*p] < per_project[*p].len())
                .max_by(|a, b| {
                    self.priority(*a, rec_tmp[*a], total_share)
                        .total_cmp(&self.priority(*b, rec_tmp[*b], total_share))
                        .then(b.cmp(a))
                });
            let Some(p) = best else { break };
            let i = per_project[p][next[p]];
            next[p] += 1;
            order.push(i);
            rec_tmp[p] += self.res.job_peak(&jobs[i], 1.0) / total_peak;
        }

        // Deadline check: each project works through its own queue at its share of each
        // resource; jobs that would finish late (with a margin) but can still make it if
        // started now are endangered.
        let mut endangered = if self.options.rr_only {
            Vec::new()
        } else {
            self.endangered(now, jobs, &per_project)
        };
        endangered.sort_by(|a, b| {
            jobs[*a]
                .deadline
                .total_cmp(&jobs[*b].deadline)
                .then(jobs[*a].seq.cmp(&jobs[*b].seq))
        });

        // Final order: endangered (EDF), running jobs within their time slice, then priority.
        let mut chosen_order = endangered.clone();
        for &i in &order {
            let j = &jobs[i];
            if j.state == JobState::Running
                && now < j.slice_start + self.period
                && !endangered.contains(&i)
            {
                chosen_order.push(i);
            }
        }
        for &i in &order {
            if !chosen_order.contains(&i) {
                chosen_order.push(i);
            }
        }

        // Fill the resources.
        let ncpus = self.res.instances[0];
        let mut cpu_used = 0.0;
        let mut gpu_used = vec![0.0; nrsc];
        let mut run = Vec::new();
        for i in chosen_order {
            let j = &jobs[i];
            match j.gpu {
                None => {
                    if cpu_used + j.avg_ncpus > ncpus + 1e-9 && cpu_used > 0.0 {
                        continue;
                    }
                    cpu_used += j.avg_ncpus;
                }
                Some((g, n)) => {
                    let r = g + 1;
                    if gpu_used[r] + n > self.res.instances[r] + 1e-9 {
                        continue;
                    }
                    if cpu_used + j.avg_ncpus > ncpus + 1.0 + 1e-9 {
                        continue;
                    }
                    gpu_used[r] += n;
                    cpu_used += j.avg_ncpus;
                }
            }
            run.push(i);
        }
        run
    }

    /// Jobs predicted to miss their deadline if every project keeps its share of each
    /// resource (shares of projects with less work than their share go to the others), each
    /// project running its jobs in its own order (`per_project`).
    fn endangered(&self, now: f64, jobs: &[Job], per_project: &[Vec<usize>]) -> Vec<usize> {
        let nrsc = self.res.instances.len();
        let np = per_project.len();
        let mut out = Vec::new();
        for r in 0..nrsc {
            // Parallelism each project can use on r: instances its jobs would occupy.
            let mut cap = vec![0.0; np];
            for (p, list) in per_project.iter().enumerate() {
                for &i in list {
                    let (jr, u) = jobs[i].resource();
                    if jr == r {
                        cap[p] += u;
                    }
                }
            }
            let rates = water_fill(self.res.instances[r], &cap, &self.shares);
            for (p, list) in per_project.iter().enumerate() {
                if rates[p] <= 0.0 {
                    continue;
                }
                let mut work = 0.0;
                for &i in list {
                    let j = &jobs[i];
                    let (jr, u) = j.resource();
                    if jr != r {
                        continue;
                    }
                    let rem = j.est_remaining();
                    work += rem * u;
                    let finish = now + (work / rates[p]).max(rem) / self.avail[r];
                    let margin = (0.1 * (j.deadline - j.received).max(0.0)).min(self.buf_min);
                    let can_make_it = now + rem <= j.deadline;
                    if finish > j.deadline - margin && can_make_it {
                        out.push(i);
                    }
                }
            }
        }
        out
    }

    /// Chooses the next RPC, if any, at time `now`; `contacted[p]` marks projects already
    /// contacted in this step; `running` tells which jobs run now (for idle instances).
    pub fn next_rpc(&mut self, now: f64, jobs: &[Job], contacted: &[bool]) -> Option<RpcPlan> {
        let np = self.projects.len();
        let nrsc = self.res.instances.len();

        // Per project and resource: queued instance-seconds and instances in use.
        let mut queue = vec![vec![0.0; nrsc]; np];
        let mut nused = vec![vec![0.0; nrsc]; np];
        let mut busy = vec![0.0; nrsc];
        let mut reports = vec![0usize; np];
        let mut report_due = vec![false; np];
        for j in jobs {
            if j.is_unfinished() {
                let (r, u) = j.resource();
                queue[j.project][r] += j.est_remaining() * u;
                nused[j.project][r] += u;
                if j.state == JobState::Running {
                    busy[r] += u;
                }
                if r != 0 {
                    queue[j.project][0] += j.est_remaining() * j.avg_ncpus;
                }
            } else if let JobState::Done(t) | JobState::Aborted(t) = j.state {
                reports[j.project] += 1;
                if self.report_immediately
                    || now >= t + MAX_REPORT_DELAY
                    || now > j.deadline - self.buf_min.max(86_400.0)
                {
                    report_due[j.project] = true;
                }
            }
        }
        for p in 0..np {
            if reports[p] >= REPORT_IF_AT_LEAST {
                report_due[p] = true;
            }
        }
        let contactable = |p: usize| !contacted[p] && now >= self.projects[p].min_rpc_time;

        // Share fractions over projects able to supply each resource.
        let mut share_total = vec![0.0; nrsc];
        for (p, ps) in self.projects.iter().enumerate() {
            for (total, pr) in share_total.iter_mut().zip(&ps.rsc) {
                if pr.can_supply {
                    *total += self.shares[p];
                }
            }
        }

        let mut requests: Vec<WorkRequest> = Vec::with_capacity(np);
        let mut urgency = vec![f64::INFINITY; np];
        for p in 0..np {
            let ps = &self.projects[p];
            let mut req = WorkRequest::none(nrsc);
            for r in 0..nrsc {
                let pr = &ps.rsc[r];
                if !pr.can_supply || self.shares[p] <= 0.0 || share_total[r] <= 0.0 {
                    continue;
                }
                let inst = self.res.instances[r];
                let share_inst = inst * self.shares[p] / share_total[r];
                let cap = share_inst * self.avail[r];
                let horizon = self.horizon(p, r);
                // Until the project's deadlines are known, ask for the minimum buffer only.
                let target = if ps.latency.is_some() {
                    cap * horizon
                } else {
                    cap * horizon.min(self.buf_min)
                };
                let low = if horizon < self.buf_total {
                    target / 2.0
                } else {
                    cap * self.buf_min.min(horizon)
                };
                req.estimated_delay[r] = queue[p][r] / cap.max(1e-9);
                if now < pr.backoff_until {
                    continue;
                }
                let q = queue[p][r];
                let inst_deficit = (share_inst - nused[p][r] - 1e-6).ceil().max(0.0);
                if q < low || inst_deficit > 0.0 {
                    req.req_secs[r] = (target - q).max(if inst_deficit > 0.0 { 1.0 } else { 0.0 });
                    req.req_instances[r] = inst_deficit;
                    let fill = if target > 0.0 { q / target } else { 1.0 };
                    urgency[p] = urgency[p].min(fill);
                }
            }
            requests.push(req);
        }

        // 1. Reports that are due (with whatever work the project needs piggybacked).
        if let Some(p) = (0..np).find(|p| report_due[*p] && contactable(*p)) {
            let request = requests.swap_remove(p);
            return Some(RpcPlan {
                project: p,
                request,
            });
        }
        // 2. The most starved project with a need.
        let best = (0..np)
            .filter(|p| contactable(*p) && requests[*p].wants_work())
            .min_by(|a, b| urgency[*a].total_cmp(&urgency[*b]).then(a.cmp(b)));
        if let Some(p) = best {
            let request = requests.swap_remove(p);
            return Some(RpcPlan {
                project: p,
                request,
            });
        }
        // 3. Idle instances nobody's share covers: ask the most deserving project able to
        //    supply them, beyond its share.
        let queued_unstarted: Vec<f64> = (0..nrsc)
            .map(|r| {
                jobs.iter()
                    .filter(|j| j.state == JobState::Queued && j.resource().0 == r)
                    .map(|j| j.resource().1)
                    .sum()
            })
            .collect();
        let (rec_frac, _) = self.priorities(jobs);
        let total_share: f64 = self.shares.iter().sum();
        for r in 0..nrsc {
            let idle = self.res.instances[r] - busy[r] - queued_unstarted[r];
            if idle < 1.0 - 1e-9 {
                continue;
            }
            let cand = (0..np)
                .filter(|p| {
                    contactable(*p)
                        && self.projects[*p].rsc[r].can_supply
                        && now >= self.projects[*p].rsc[r].backoff_until
                })
                .max_by(|a, b| {
                    self.priority(*a, rec_frac[*a], total_share)
                        .total_cmp(&self.priority(*b, rec_frac[*b], total_share))
                        .then(b.cmp(a))
                });
            if let Some(p) = cand {
                let mut request = requests.swap_remove(p);
                let n = idle.floor();
                request.req_instances[r] = request.req_instances[r].max(n);
                let secs = n * self.avail[r] * self.horizon(p, r).min(self.buf_min);
                request.req_secs[r] = request.req_secs[r].max(secs).max(1.0);
                return Some(RpcPlan {
                    project: p,
                    request,
                });
            }
        }
        None
    }

    /// How far ahead project p's queue for resource r may reach, seconds: the buffer, or less
    /// if the project's deadlines do not allow it.
    fn horizon(&self, p: usize, r: usize) -> f64 {
        let ps = &self.projects[p];
        match ps.latency {
            Some(l) => self
                .buf_total
                .min((DEADLINE_USE * l - ps.job_runtime[r] / self.avail[r]).max(0.0)),
            None => self.buf_total,
        }
    }

    /// The project could not be reached: back off the project.
    pub fn rpc_failed(&mut self, now: f64, p: usize) {
        let ps = &mut self.projects[p];
        ps.rpc_failures += 1;
        let exp = (ps.rpc_failures - 1).min(16);
        let delay = (RPC_RETRY_MIN * 2f64.powi(exp as i32)).min(RPC_RETRY_MAX);
        let jitter = 0.5 + 0.5 * uniform(&mut self.rng);
        ps.min_rpc_time = now + delay * jitter;
    }

    /// A reply arrived: learn from the jobs, clear or extend backoffs.
    pub fn handle_reply(&mut self, now: f64, p: usize, req: &WorkRequest, new_jobs: &[Job]) {
        let nrsc = self.res.instances.len();
        let mut got = vec![false; nrsc];
        {
            let ps = &mut self.projects[p];
            ps.rpc_failures = 0;
            ps.min_rpc_time = now;
            for j in new_jobs {
                let (r, _) = j.resource();
                got[r] = true;
                let span = j.deadline - j.received;
                ps.latency = Some(ps.latency.map_or(span, |l| l.min(span)));
                ps.job_runtime[r] = ps.job_runtime[r].max(j.fpops_est / j.flops);
            }
        }
        for (r, got_r) in got.into_iter().enumerate() {
            let asked = req.req_secs[r] > 0.0 || req.req_instances[r] > 0.0;
            if got_r {
                let pr = &mut self.projects[p].rsc[r];
                pr.backoff_interval = 0.0;
                pr.backoff_until = 0.0;
            } else if asked {
                let min = self.projects[p].latency.map_or(WORK_BACKOFF_MIN, |l| {
                    (l / 4.0).clamp(60.0, WORK_BACKOFF_MIN)
                });
                let jitter = 0.5 + uniform(&mut self.rng);
                let pr = &mut self.projects[p].rsc[r];
                pr.backoff_interval = if pr.backoff_interval > 0.0 {
                    (pr.backoff_interval * 2.0).min(WORK_BACKOFF_MAX)
                } else {
                    min
                };
                pr.backoff_until = now + pr.backoff_interval * jitter;
            }
        }
    }
}

/// Splits `total` instances among projects in proportion to `shares`, none getting more than
/// its `cap`; what a capped project cannot use goes to the others.
fn water_fill(total: f64, cap: &[f64], shares: &[f64]) -> Vec<f64> {
    let n = cap.len();
    let mut rate = vec![0.0; n];
    let mut open: Vec<usize> = (0..n).filter(|p| cap[*p] > 0.0).collect();
    let mut left = total;
    while !open.is_empty() && left > 1e-12 {
        let share_sum: f64 = open.iter().map(|p| shares[*p].max(1e-9)).sum();
        let mut next_open = Vec::new();
        let mut given = 0.0;
        for &p in &open {
            let want = left * shares[p].max(1e-9) / share_sum;
            let room = cap[p] - rate[p];
            if want >= room {
                rate[p] = cap[p];
                given += room;
            } else {
                next_open.push(p);
            }
        }
        if next_open.len() == open.len() {
            for &p in &open {
                rate[p] += left * shares[p].max(1e-9) / share_sum;
            }
            break;
        }
        left -= given;
        open = next_open;
    }
    rate
}

impl ClientPolicy for Policy {
    fn account(&mut self, _now: f64, dt: f64, used: &[f64], _jobs: &[Job]) {
        self.account_rec(dt, used);
    }
    fn abort_doomed(&mut self, now: f64, jobs: &mut [Job]) -> usize {
        Policy::abort_doomed(self, now, jobs)
    }
    fn schedule(&mut self, now: f64, jobs: &[Job]) -> Vec<usize> {
        Policy::schedule(self, now, jobs)
    }
    fn next_rpc(&mut self, now: f64, jobs: &[Job], contacted: &[bool]) -> Option<RpcPlan> {
        Policy::next_rpc(self, now, jobs, contacted)
    }
    fn rpc_failed(&mut self, now: f64, p: usize) {
        Policy::rpc_failed(self, now, p);
    }
    fn handle_reply(&mut self, now: f64, p: usize, req: &WorkRequest, new_jobs: &[Job]) {
        Policy::handle_reply(self, now, p, req, new_jobs);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::water_fill;

    #[test]
    fn water_fill_redistributes_unused_share() {
        let r = water_fill(4.0, &[1.0, 10.0, 10.0], &[1.0, 1.0, 2.0]);
        assert!((r[0] - 1.0).abs() < 1e-12);
        assert!((r[1] - 1.0).abs() < 1e-12);
        assert!((r[2] - 2.0).abs() < 1e-12);
        let r = water_fill(2.0, &[0.0, 5.0], &[1.0, 1.0]);
        assert_eq!(r, vec![0.0, 2.0]);
    }
}
