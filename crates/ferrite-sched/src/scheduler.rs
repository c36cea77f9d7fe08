//! The stateful [`Scheduler`]: owns the accounting state (REC, per-(project, resource) work
//! fetch backoffs, project RPC backoffs, which jobs ran for a deadline, interrupted slices)
//! and runs a scheduling pass over a [`World`] snapshot at a given `now`.
//! Inputs arrive through `handle_*` methods; outputs are the [`PassOutput`] of [`Scheduler::pass`]
//! and [`Scheduler::next_wakeup`].

use std::collections::HashSet;

use crate::accounting::{Priorities, RecBook};
use crate::fetch::{
    self, FetchBlock, FetchDecision, FetchRule, HeldReport, ProjectFetchState, ReportDue,
    WorkRequest,
};
use crate::model::{JobId, ProjectId, ResourceId, Time, World};
use crate::policy::Policy;
use crate::rng::Jitter;
use crate::rrsim::{self, SimResult};
use crate::runlist::{self, RunDecision, RunInputs, RunReason};

/// Job scheduling runs at least this often (`CPU_SCHED_PERIOD`).
pub const CPU_SCHED_PERIOD: f64 = 60.0;

/// Everything one pass decides.
#[derive(Clone, Debug, PartialEq)]
pub struct PassOutput {
    /// The simulation the decisions are based on.
    pub sim: SimResult,
    /// Jobs to run and tasks to preempt.
    pub run: RunDecision,
    /// Whether and what to fetch, with reasons.
    pub fetch: FetchDecision,
    /// Projects to contact to report finished jobs.
    pub reports: Vec<ReportDue>,
    /// Reports held for their project's next RPC ([`fetch::hold_reports`]).
    pub held_reports: Vec<HeldReport>,
    /// When the next pass is due at the latest.
    pub next_wakeup: Time,
    /// Unstarted jobs that can no longer meet their deadline: abort them (and report them);
    /// the run list leaves them out ([`runlist::doomed`]). Empty without
    /// [`Policy::abort_doomed`]: such jobs then run in their turn.
    pub abort: Vec<JobId>,
}

/// The scheduling core's state.
#[derive(Clone, Debug)]
pub struct Scheduler {
    /// Policy knobs (EDF on/off, REC half-life and mode, …).
    pub policy: Policy,
    /// Recent estimated credit per project and resource.
    pub rec: RecBook,
    /// Fetch and RPC backoff state per project (index = project).
    pub fetch_state: Vec<ProjectFetchState>,
    /// Jobs that were run for a deadline: they stay EDF until they finish (hysteresis against
    /// thrashing between EDF and round-robin).
    ran_edf: HashSet<JobId>,
    /// Jobs preempted before their time slice ended: they resume first.
    interrupted: HashSet<JobId>,
    /// Per app version, the largest working set and swap use measured (index = version).
    version_memory: Vec<(f64, f64)>,
    /// Time of the last pass.
    last_pass: Option<Time>,
    /// Whether work was had (jobs at the first pass) or asked for by a completed RPC; with
    /// `fetch_minimal_work`, no work is asked for after that. `None` before the first look.
    had_or_requested_work: Option<bool>,
}

impl Scheduler {
    /// A scheduler with `policy` and no history.
    pub fn new(policy: Policy) -> Self {
        Scheduler {
            policy,
            rec: RecBook::default(),
            fetch_state: Vec::new(),
            ran_edf: HashSet::new(),
            interrupted: HashSet::new(),
            version_memory: Vec::new(),
            last_pass: None,
            had_or_requested_work: None,
        }
    }

    /// `fetch_minimal_work`: once work was had or asked for, no request; before that, one
    /// job per device (every instance, 1 s each), as the official client asks.
    fn minimal_work(&mut self, world: &World, req: Option<WorkRequest>) -> Option<WorkRequest> {
        if !self.policy.fetch_minimal_work {
            return req;
        }
        if self.had_or_requested_work(world) {
            return None;
        }
        req.map(|mut w| {
            for r in &mut w.resources {
                if r.req_secs > 0.0 {
                    r.req_secs = 1.0;
                    r.req_instances = world.instances(r.resource);
                }
            }
            w.work_req_seconds = w
                .resources
                .iter()
                .find(|x| x.resource.is_cpu())
                .map_or(0.0, |x| x.req_secs);
            w
        })
    }

    /// Whether this client had work (jobs in the first world it saw) or asked for some in a
    /// completed scheduler RPC: `fetch_minimal_work` stops fetching then, and
    /// `--exit_when_idle` exits only then (not before the first jobs came).
    pub fn had_or_requested_work(&mut self, world: &World) -> bool {
        *self
            .had_or_requested_work
            .get_or_insert(!world.jobs.is_empty())
    }

    /// [`had_or_requested_work`](Self::had_or_requested_work) as last decided (false before
    /// the first pass).
    pub fn had_work(&self) -> bool {
        self.had_or_requested_work == Some(true)
    }

    /// The fetch decision after `fetch_minimal_work`, with the rule that stopped a request.
    fn minimal_fetch(&mut self, world: &World, mut fetch: FetchDecision) -> FetchDecision {
        let wanted = fetch.request.is_some();
        fetch.request = self.minimal_work(world, fetch.request.take());
        if wanted && fetch.request.is_none() {
            fetch.blocks.push(FetchBlock {
                project: None,
                resource: None,
                rule: FetchRule::MinimalWorkDone,
            });
        }
        fetch
    }

    fn resize(&mut self, world: &World) {
        let nr = world.n_resources();
        self.fetch_state
            .resize_with(world.projects.len(), ProjectFetchState::default);
        for s in &mut self.fetch_state {
            s.resize(nr);
        }
        self.rec.resize(world);
    }

    /// Learn the projects' delay bounds and job sizes from the snapshot (for fetch sizing).
    fn observe(&mut self, world: &World) {
        self.resize(world);
        fetch::observe_jobs(world, &mut self.fetch_state);
    }

    /// Account the time since the last accounting: every job `Running` in `world` is taken to
    /// have run throughout. Call it with the snapshot as it was during the interval (before
    /// marking a job finished, for instance); [`Scheduler::pass`] calls it itself.
    pub fn account(&mut self, world: &World, now: Time) {
        self.resize(world);
        self.rec.account(world, now, &self.policy);
    }

    /// Project priorities per resource at this instant.
    pub fn priorities(&self, world: &World) -> Vec<Priorities> {
        (0..world.n_resources())
            .map(|r| Priorities::compute(world, &self.rec, ResourceId(r as u8), &self.policy))
            .collect()
    }

    /// Run the simulation and build the run list (no fetch decision). Updates the
    /// "ran for a deadline" and "interrupted slice" memories.
    pub fn schedule(&mut self, world: &World, now: Time) -> (SimResult, RunDecision) {
        self.account(world, now);
        let _ = self.had_or_requested_work(world);
        let prio = self.priorities(world);
        let sim = rrsim::simulate(world, now, &prio[0].value, &self.policy);
        let run = self.run_list(world, now, &sim, &prio);
        (sim, run)
    }

    fn run_list(
        &mut self,
        world: &World,
        now: Time,
        sim: &SimResult,
        prio: &[Priorities],
    ) -> RunDecision {
        // Forget jobs that are gone or finished.
        if !self.ran_edf.is_empty() || !self.interrupted.is_empty() {
            let live: HashSet<JobId> = world
                .jobs
                .iter()
                .filter(|j| j.state.is_unfinished())
                .map(|j| j.id)
                .collect();
            self.ran_edf.retain(|j| live.contains(j));
            self.interrupted.retain(|j| live.contains(j));
        }
        runlist::observe_version_memory(world, &mut self.version_memory);
        let run = runlist::build(
            world,
            now,
            &RunInputs {
                sim,
                priorities: prio,
                ran_edf: &self.ran_edf,
                interrupted: &self.interrupted,
                version_memory: &self.version_memory,
                policy: &self.policy,
            },
        );
        for e in &run.run {
            if e.reason == RunReason::Deadline {
                self.ran_edf.insert(e.job);
            }
            self.interrupted.remove(&e.job);
        }
        self.interrupted.extend(run.interrupted.iter().copied());
        self.last_pass = Some(now);
        run
    }

    /// The fetch decision for `world` at `now`, given this pass's simulation.
    pub fn decide_fetch(&mut self, world: &World, now: Time, sim: &SimResult) -> FetchDecision {
        self.observe(world);
        let prio = self.priorities(world);
        let fetch = fetch::decide(world, now, sim, &prio, &self.fetch_state, &self.policy);
        self.minimal_fetch(world, fetch)
    }

    /// Work to ask from `project` on an RPC made for another reason (reporting, update),
    /// given this pass's simulation.
    pub fn piggyback(
        &mut self,
        world: &World,
        now: Time,
        sim: &SimResult,
        project: ProjectId,
    ) -> Option<WorkRequest> {
        self.observe(world);
        let prio = self.priorities(world);
        let req = fetch::piggyback(
            world,
            now,
            sim,
            &prio,
            &self.fetch_state,
            &self.policy,
            project,
        );
        self.minimal_work(world, req)
    }

    /// Projects whose finished jobs should be reported now.
    pub fn decide_reports(&self, world: &World, now: Time) -> Vec<ReportDue> {
        fetch::reports_due(world, now, &self.fetch_state)
    }

    /// Projects whose finished jobs should be reported now, given this pass's simulation:
    /// [`decide_reports`](Self::decide_reports) less the reports that can wait for the
    /// project's next RPC ([`fetch::hold_reports`]), as [`pass`](Self::pass) decides them.
    pub fn decide_reports_with(
        &mut self,
        world: &World,
        now: Time,
        sim: &SimResult,
    ) -> Vec<ReportDue> {
        self.observe(world);
        let prio = self.priorities(world);
        let due = fetch::reports_due(world, now, &self.fetch_state);
        fetch::hold_reports(world, now, sim, &prio, &self.fetch_state, &self.policy, due).0
    }

    /// The jobs to give up at `now`: the doomed ones ([`runlist::doomed`]) when the policy
    /// gives them up ([`Policy::abort_doomed`]), else none.
    pub fn doomed(&self, world: &World, now: Time) -> Vec<JobId> {
        if self.policy.abort_doomed {
            runlist::doomed(world, now)
        } else {
            Vec::new()
        }
    }

    /// One full pass: accounting, simulation, run list, fetch decision, reports, next wakeup.
    pub fn pass(&mut self, world: &World, now: Time) -> PassOutput {
        self.account(world, now);
        let prio = self.priorities(world);
        let sim = rrsim::simulate(world, now, &prio[0].value, &self.policy);
        let run = self.run_list(world, now, &sim, &prio);
        self.observe(world);
        let fetch = fetch::decide(world, now, &sim, &prio, &self.fetch_state, &self.policy);
        let fetch = self.minimal_fetch(world, fetch);
        let reports = fetch::reports_due(world, now, &self.fetch_state);
        let (reports, held_reports) = fetch::hold_reports(
            world,
            now,
            &sim,
            &prio,
            &self.fetch_state,
            &self.policy,
            reports,
        );
        let next_wakeup = self.next_wakeup(world, now);
        let abort = self.doomed(world, now);
        PassOutput {
            sim,
            run,
            fetch,
            reports,
            held_reports,
            next_wakeup,
            abort,
        }
    }

    /// A completed scheduler RPC asked for work (whatever its reason): with
    /// `fetch_minimal_work`, no more is asked for.
    pub fn note_work_requested(&mut self, sent: &WorkRequest) {
        if sent.resources.iter().any(|r| r.req_secs > 0.0) {
            self.had_or_requested_work = Some(true);
        }
    }

    /// A scheduler RPC to `project` completed. `sent` is the request that rode on it (if any);
    /// `jobs_received[r]` counts the new jobs per resource; `request_delay` is the server's.
    /// Resources asked for and not supplied back off; resources supplied are cleared.
    pub fn handle_rpc_succeeded(
        &mut self,
        now: Time,
        project: ProjectId,
        sent: Option<&WorkRequest>,
        jobs_received: &[u32],
        request_delay: f64,
        jitter: &mut dyn Jitter,
    ) {
        if let Some(w) = sent {
            self.note_work_requested(w);
        }
        let Some(s) = self.fetch_state.get_mut(project.index()) else {
            return;
        };
        s.rpc_succeeded(now, request_delay);
        for (r, &n) in jobs_received.iter().enumerate() {
            if n > 0 && r < s.backoff_until.len() {
                s.clear_backoff(ResourceId(r as u8));
            }
        }
        if let Some(req) = sent {
            for rr in &req.resources {
                let got = jobs_received.get(rr.resource.index()).copied().unwrap_or(0);
                if rr.req_secs > 0.0 && got == 0 && rr.resource.index() < s.backoff_until.len() {
                    s.back_off(rr.resource, now, jitter);
                }
            }
        }
    }

    /// A scheduler RPC to `project` failed (connection, parse error, project down).
    pub fn handle_rpc_failed(&mut self, now: Time, project: ProjectId, jitter: &mut dyn Jitter) {
        if let Some(s) = self.fetch_state.get_mut(project.index()) {
            s.rpc_failed(now, jitter);
        }
    }

    /// Jobs for resource `r` arrived from `project` (also: an upload of such a job finished):
    /// clear that resource's backoff.
    pub fn handle_jobs_arrived(&mut self, project: ProjectId, r: ResourceId) {
        if let Some(s) = self.fetch_state.get_mut(project.index()) {
            if r.index() < s.backoff_until.len() {
                s.clear_backoff(r);
            }
        }
    }

    /// The user asked to update `project`: every resource backoff is cleared.
    pub fn handle_user_update(&mut self, project: ProjectId) {
        if let Some(s) = self.fetch_state.get_mut(project.index()) {
            for r in 0..s.backoff_until.len() {
                s.clear_backoff(ResourceId(r as u8));
            }
        }
    }

    /// The latest time the next pass should run: the periodic pass, a time slice ending,
    /// a backoff expiring, or a report coming due.
    pub fn next_wakeup(&self, world: &World, now: Time) -> Time {
        let mut t = self.last_pass.unwrap_or(now) + CPU_SCHED_PERIOD;
        let mut consider = |x: Time| {
            if x > now && x < t {
                t = x;
            }
        };
        let period = world.prefs.sched_period();
        for j in &world.jobs {
            if j.is_running() {
                if let Some(s) = j.run_started_at {
                    consider(s + period);
                }
            }
            if let crate::model::JobState::Finished {
                completed_time,
                ready_to_report: true,
            } = j.state
            {
                consider(completed_time + fetch::MAX_REPORT_DELAY);
                // A report held for the project's next RPC goes at the latest then.
                consider(fetch::report_wait_limit_on(world, j));
            }
        }
        for s in &self.fetch_state {
            consider(s.min_rpc_time);
            for &b in &s.backoff_until {
                consider(b);
            }
        }
        t.max(now)
    }
}
