//! A tiny virtual-time loop driving the core like the daemon would: apply the run decision,
//! advance running jobs (exact completions), checkpoint them, account, replenish work.

use ferrite_sched::*;

/// What happened to a finished job.
#[derive(Clone, Debug)]
pub struct Done {
    pub id: JobId,
    pub project: ProjectId,
    pub finished: f64,
    pub deadline: f64,
}

pub struct Driver {
    pub world: World,
    pub sched: Scheduler,
    pub now: f64,
    /// Longest step between passes.
    pub step: f64,
    /// Apps checkpoint after this much elapsed time.
    pub checkpoint_every: f64,
    /// Instance-seconds used, per project per resource.
    pub used: Vec<Vec<f64>>,
    /// Per step: (start, length, running jobs).
    pub timeline: Vec<(f64, f64, Vec<JobId>)>,
    pub done: Vec<Done>,
    pub next_id: u32,
    pub last: Option<PassOutput>,
}

impl Driver {
    pub fn new(world: World, policy: Policy, now: f64, step: f64) -> Self {
        let np = world.projects.len();
        let nr = world.n_resources();
        Driver {
            world,
            sched: Scheduler::new(policy),
            now,
            step,
            checkpoint_every: 60.0,
            used: vec![vec![0.0; nr]; np],
            timeline: Vec::new(),
            done: Vec::new(),
            next_id: 1_000_000,
            last: None,
        }
    }

    /// True duration of a job (estimates are exact here).
    pub fn duration(&self, j: &Job) -> f64 {
        j.fpops_est
            / self
                .world
                .version_of(j)
                .effective_flops(self.world.host.p_fpops)
    }

    /// Add a job of `version` taking `secs` at this host's speed, due `latency` from now.
    pub fn add_job(&mut self, version: AppVersionId, secs: f64, latency: f64) -> JobId {
        let v = &self.world.app_versions[version.index()];
        let flops = v.effective_flops(self.world.host.p_fpops);
        let id = JobId(self.next_id);
        self.next_id += 1;
        let j = Job::new(
            id,
            v.project,
            version,
            secs * flops,
            self.now,
            self.now + latency,
        );
        self.world.add_job(j);
        id
    }

    /// Unfinished jobs of `version`.
    pub fn queued(&self, version: AppVersionId) -> usize {
        self.world
            .jobs
            .iter()
            .filter(|j| j.app_version == version && j.state.is_unfinished())
            .count()
    }

    /// One pass + one step. Returns the pass output.
    pub fn step_once(&mut self) -> PassOutput {
        let out = self.sched.pass(&self.world, self.now);
        let now = self.now;
        let running: std::collections::HashSet<JobId> = out.run.run.iter().map(|e| e.job).collect();
        for p in &out.run.preempt {
            if let Some(j) = self.world.jobs.iter_mut().find(|j| j.id == p.job) {
                let in_memory = p.action == PreemptAction::KeepInMemory;
                if !in_memory {
                    j.elapsed = j.checkpoint_elapsed;
                    j.elapsed_at_fraction = j.elapsed;
                }
                j.state = JobState::Preempted { in_memory };
            }
        }
        for e in &out.run.run {
            if let Some(j) = self.world.jobs.iter_mut().find(|j| j.id == e.job) {
                if !j.is_running() {
                    j.state = JobState::Running;
                    j.run_started_at = Some(now);
                }
                j.assigned_instances = e.instances;
            }
        }
        // Step length: up to the next completion.
        let mut dt = self.step;
        for j in self.world.jobs.iter().filter(|j| running.contains(&j.id)) {
            let left = self.duration(j) - j.elapsed;
            if left > 1e-9 {
                dt = dt.min(left);
            }
        }
        dt = dt.max(1e-3);
        let mut ids = Vec::new();
        for i in 0..self.world.jobs.len() {
            if !running.contains(&self.world.jobs[i].id) {
                continue;
            }
            let dur = self.duration(&self.world.jobs[i]);
            let v = self.world.version_of(&self.world.jobs[i]).clone();
            let j = &mut self.world.jobs[i];
            let run = dt.min((dur - j.elapsed).max(0.0));
            j.elapsed += run;
            j.fraction_done = (j.elapsed / dur).min(1.0);
            j.elapsed_at_fraction = j.elapsed;
            if j.elapsed - j.checkpoint_elapsed >= self.checkpoint_every - 1e-9 {
                j.checkpoint_elapsed = j.elapsed;
                j.last_checkpoint_time = Some(now + run);
            }
            let p = j.project.index();
            self.used[p][0] += run * v.avg_ncpus;
            if !v.resource.is_cpu() {
                self.used[p][v.resource.index()] += run * v.coproc_usage;
            }
            ids.push(j.id);
        }
        self.timeline.push((now, dt, ids));
        self.now += dt;
        self.sched.account(&self.world, self.now);
        for i in 0..self.world.jobs.len() {
            let dur = self.duration(&self.world.jobs[i]);
            let j = &mut self.world.jobs[i];
            if j.is_running() && j.elapsed >= dur - 1e-6 {
                j.state = JobState::Finished {
                    completed_time: self.now,
                    ready_to_report: true,
                };
                self.done.push(Done {
                    id: j.id,
                    project: j.project,
                    finished: self.now,
                    deadline: j.report_deadline,
                });
            }
        }
        // Reported jobs leave the world.
        self.world.jobs.retain(|j| j.state.is_unfinished());
        self.last = Some(out.clone());
        out
    }

    /// Act as the project servers for the last pass's work request: `supply(project, resource)`
    /// gives the (version, seconds, latency) of the jobs that project sends for that resource,
    /// or `None`. Jobs are sent until the request is covered; a job that could not finish in
    /// time given the request's `estimated_delay` is refused, as a BOINC server does.
    pub fn serve_fetch(
        &mut self,
        supply: &dyn Fn(ProjectId, ResourceId) -> Option<(AppVersionId, f64, f64)>,
    ) {
        let Some(req) = self.last.as_ref().and_then(|o| o.fetch.request.clone()) else {
            return;
        };
        let nr = self.world.n_resources();
        let mut got = vec![0u32; nr];
        for rr in &req.resources {
            let Some((v, secs, latency)) = supply(req.project, rr.resource) else {
                continue;
            };
            if rr.estimated_delay + secs > latency {
                continue;
            }
            let usage = self.world.app_versions[v.index()].usage();
            let mut left = rr.req_secs;
            let mut inst = rr.req_instances;
            while left > 0.0 || inst > 0.0 {
                self.add_job(v, secs, latency);
                got[rr.resource.index()] += 1;
                left -= secs * usage;
                inst -= usage;
            }
        }
        let mut j = FixedJitter(0.5);
        self.sched
            .handle_rpc_succeeded(self.now, req.project, Some(&req), &got, 0.0, &mut j);
        if let Some(o) = self.last.as_mut() {
            o.fetch.request = None;
        }
    }

    /// Run until `until`, calling `refill` before each pass.
    pub fn run_until(&mut self, until: f64, mut refill: impl FnMut(&mut Driver)) {
        while self.now < until {
            refill(self);
            self.step_once();
        }
    }

    /// Usage per project on resource `r` accumulated between two snapshots of `used`.
    pub fn diff(before: &[Vec<f64>], after: &[Vec<f64>], r: ResourceId) -> Vec<f64> {
        before
            .iter()
            .zip(after)
            .map(|(b, a)| a[r.index()] - b[r.index()])
            .collect()
    }
}
