//! The virtual-time loop: samples the host's and the projects' availability, advances running
//! jobs step by step, lets the client policy schedule and contact the emulated servers, and
//! accumulates the figures of merit exactly as the official emulator defines them.
//!
//! Time advances in fixed steps of `delta` seconds from 3600 s (the official start time). As in
//! the official emulator, a step's progress is accounted at its end, a job that finishes inside
//! a step frees its CPU at the step boundary, and jobs keep computing while the client is "off"
//! (only GPU jobs need the GPU-active state); the client acts (schedules, contacts projects)
//! only while on. Unlike it, one step may hold one RPC per project (a real client polls every
//! 5 s, so one minute allows several).

use crate::core::CorePolicy;
use crate::metrics::{Accumulators, Report};
use crate::model::{Job, JobState, Resources};
use crate::policy::ClientPolicy;
use crate::random::{rng, stream, OnOffProcess};
use crate::scenario::Scenario;
use crate::server::ProjectServer;
use crate::workload::Workload;

/// Emulated time at which the run starts (log times start at 01:00:00 in the official tool).
pub const START_TIME: f64 = 3600.0;

/// How to run the emulation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimOptions {
    /// Emulated seconds to run.
    pub duration: f64,
    /// Time step, seconds.
    pub delta: f64,
    /// Random seed.
    pub seed: u64,
    /// Priority order only, no deadline promotion.
    pub rr_only: bool,
    /// The servers make no new jobs.
    pub existing_jobs_only: bool,
    /// The servers send a job only if an EDF booking of the host's queue with it misses no
    /// more deadlines (`--server_uses_workload`).
    pub server_uses_workload: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            duration: 86_400.0,
            delta: 60.0,
            seed: 1,
            rr_only: false,
            existing_jobs_only: false,
            server_uses_workload: false,
        }
    }
}

/// Options that make no sense.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OptionsError {
    /// Duration not positive or not finite.
    #[error("duration must be a positive number of seconds, not {0}")]
    Duration(f64),
    /// Step not positive or not finite.
    #[error("delta must be a positive number of seconds, not {0}")]
    Delta(f64),
}

/// The host's availability processes.
#[derive(Debug)]
struct HostProcesses {
    on: OnOffProcess,
    connected: OnOffProcess,
    active: OnOffProcess,
    gpu_active: OnOffProcess,
}

/// Availability of the host during one step.
#[derive(Debug, Clone, Copy)]
struct HostState {
    on: bool,
    connected: bool,
    gpu_active: bool,
}

/// Runs `scenario` with `opts` and returns the figures.
pub fn run(scenario: &Scenario, opts: &SimOptions) -> Result<Report, OptionsError> {
    if !(opts.duration.is_finite() && opts.duration > 0.0) {
        return Err(OptionsError::Duration(opts.duration));
    }
    if !(opts.delta.is_finite() && opts.delta > 0.0) {
        return Err(OptionsError::Delta(opts.delta));
    }
    let mut world = World::new(scenario, opts);
    world.run();
    Ok(world.acc.report(scenario, &world.res, opts))
}

/// Everything that changes during a run.
#[derive(Debug)]
struct World<'a> {
    scenario: &'a Scenario,
    opts: SimOptions,
    res: Resources,
    host: HostProcesses,
    /// Per project: its scheduler's up/down process, sampled at each RPC attempt.
    project_up: Vec<OnOffProcess>,
    servers: Vec<ProjectServer>,
    policy: Box<dyn ClientPolicy>,
    jobs: Vec<Job>,
    seq: u64,
    acc: Accumulators,
    now: f64,
}

impl<'a> World<'a> {
    fn new(scenario: &'a Scenario, opts: &SimOptions) -> Self {
        let seed = opts.seed;
        let mut instances = vec![f64::from(scenario.usable_cpus())];
        let mut relative_speed = vec![1.0];
        for (g, t) in scenario.host.gpus.iter().enumerate() {
            instances.push(f64::from(t.count));
            relative_speed.push(scenario.gpu_relative_speed(g));
        }
        let res = Resources {
            instances,
            relative_speed,
            p_fpops: scenario.host.p_fpops,
        };
        let h = &scenario.host;
        let host = HostProcesses {
            on: OnOffProcess::new(h.on, START_TIME, rng(seed, stream::ON)),
            connected: OnOffProcess::new(h.connected, START_TIME, rng(seed, stream::CONNECTED)),
            active: OnOffProcess::new(h.active, START_TIME, rng(seed, stream::ACTIVE)),
            gpu_active: OnOffProcess::new(h.gpu_active, START_TIME, rng(seed, stream::GPU_ACTIVE)),
        };
        let np = scenario.projects.len();
        let project_up = (0..np)
            .map(|p| {
                let s = stream::PROJECT_UP + p as u64;
                OnOffProcess::new(scenario.projects[p].available, START_TIME, rng(seed, s))
            })
            .collect();
        let servers = (0..np)
            .map(|p| ProjectServer::new(scenario, p, rng(seed, stream::PROJECT_JOBS + p as u64)))
            .collect();
        let policy: Box<dyn ClientPolicy> = Box::new(CorePolicy::new(
            scenario,
            opts.rr_only,
            rng(seed, stream::CLIENT),
        ));
        // Initial jobs, in the client's order: received time, then name.
        let mut initial: Vec<_> = scenario.jobs.iter().collect();
        initial.sort_by(|a, b| {
            a.received_time
                .total_cmp(&b.received_time)
                .then(a.name.cmp(&b.name))
        });
        let mut seq = 0;
        let mut jobs = Vec::new();
        for j in initial {
            let v = &scenario.app_versions[j.app_version];
            seq += 1;
            jobs.push(Job {
                name: j.name.clone(),
                project: scenario.apps[v.app].project,
                app: v.app,
                version: j.app_version,
                avg_ncpus: v.avg_ncpus,
                gpu: v.gpu,
                flops: v.flops,
                fpops_left: j.fpops,
                fpops_est: j.fpops,
                received: START_TIME,
                deadline: START_TIME + j.latency,
                state: JobState::Queued,
                started: false,
                slice_start: START_TIME,
                elapsed: 0.0,
                peak_used: 0.0,
                seq,
            });
        }
        Self {
            scenario,
            opts: *opts,
            res,
            host,
            project_up,
            servers,
            policy,
            jobs,
            seq,
            acc: Accumulators::new(np),
            now: START_TIME,
        }
    }

    fn sample_host(&mut self) -> HostState {
        let t = self.now;
        let on = self.host.on.at(t);
        // Sample every process every step so that each stays a function of time alone.
        let active = self.host.active.at(t);
        let gpu = self.host.gpu_active.at(t);
        let connected = self.host.connected.at(t);
        HostState {
            on,
            connected: on && connected,
            gpu_active: on && active && gpu,
        }
    }

    fn run(&mut self) {
        let end = START_TIME + self.opts.duration;
        let mut first = true;
        loop {
            let host = self.sample_host();
            if !first {
                self.progress(self.opts.delta, host.gpu_active);
            }
            first = false;
            if host.on {
                self.client_pass(host);
            }
            self.jobs.retain(|j| j.state != JobState::Reported);
            self.now += self.opts.delta;
            if self.now > end + 1e-9 {
                break;
            }
        }
    }

    /// Accounts the step that just ended: job progress, FLOPs, monotony.
    fn progress(&mut self, dt: f64, gpu_active: bool) {
        let ncpus = self.res.instances[0];
        let mut cpu_of_cpu_jobs = 0.0;
        let mut cpu_of_gpu_jobs = 0.0;
        for j in self.jobs.iter().filter(|j| j.state == JobState::Running) {
            if j.gpu.is_some() {
                if gpu_active {
                    cpu_of_gpu_jobs += j.avg_ncpus;
                }
            } else {
                cpu_of_cpu_jobs += j.avg_ncpus;
            }
        }
        let total = cpu_of_cpu_jobs + cpu_of_gpu_jobs;
        let cpu_scale = if total > ncpus && cpu_of_cpu_jobs > 0.0 {
            ((ncpus - cpu_of_gpu_jobs) / cpu_of_cpu_jobs).max(0.0)
        } else {
            1.0
        };
        let np = self.scenario.projects.len();
        let mut used = vec![0.0; np];
        let mut ran = vec![false; np];
        let computes = |j: &Job| j.state == JobState::Running && (j.gpu.is_none() || gpu_active);
        for j in self.jobs.iter().filter(|j| computes(j)) {
            used[j.project] += dt * self.res.job_peak(j, cpu_scale);
            ran[j.project] = true;
        }
        // The policy accounts the step as it was (before jobs are marked finished).
        self.policy.account(self.now, dt, &used, &self.jobs);
        let now = self.now;
        for j in self.jobs.iter_mut().filter(|j| computes(j)) {
            let speed = if j.gpu.is_some() {
                j.flops
            } else {
                j.flops * cpu_scale
            };
            j.fpops_left -= dt * speed;
            j.elapsed += dt;
            j.peak_used += dt * self.res.job_peak(j, cpu_scale);
            if j.fpops_left <= 0.0 {
                j.fpops_left = 0.0;
                j.state = JobState::Done(now);
            }
        }
        self.acc.step(dt, gpu_active, &used, &ran);
    }

    /// The client's actions while it runs: abort doomed jobs, schedule, contact projects.
    fn client_pass(&mut self, host: HostState) {
        let now = self.now;
        self.policy.abort_doomed(now, &mut self.jobs);
        self.reschedule();
        if !host.connected {
            return;
        }
        let np = self.scenario.projects.len();
        let mut contacted = vec![false; np];
        let cpu_avail =
            (self.scenario.host.on.frac * self.scenario.host.active.frac).clamp(0.01, 1.0);
        while let Some(plan) = self.policy.next_rpc(now, &self.jobs, &contacted) {
            let p = plan.project;
            contacted[p] = true;
            if !self.project_up[p].at_contact(now) {
                self.policy.rpc_failed(now, p);
                continue;
            }
            self.acc.rpcs += 1;
            for j in self
                .jobs
                .iter_mut()
                .filter(|j| j.project == p && j.is_reportable())
            {
                let aborted = matches!(j.state, JobState::Aborted(_));
                self.acc
                    .reported(p, now > j.deadline || aborted, j.peak_used);
                if aborted {
                    self.acc.aborted += 1;
                }
                j.state = JobState::Reported;
            }
            let new_jobs = if self.opts.existing_jobs_only {
                Vec::new()
            } else {
                let mut workload = self.opts.server_uses_workload.then(|| self.workload());
                self.servers[p].reply(
                    self.scenario,
                    now,
                    &plan.request,
                    cpu_avail,
                    &self.res.instances,
                    workload.as_mut(),
                    &mut self.seq,
                )
            };
            self.acc.jobs_received += new_jobs.len() as u64;
            self.policy.handle_reply(now, p, &plan.request, &new_jobs);
            let got = !new_jobs.is_empty();
            self.jobs.extend(new_jobs);
            if got {
                self.reschedule();
            }
        }
    }

    /// The host's queue as a server checking the workload sees it: every unfinished job (of
    /// any project) with its deadline and the client's estimate of its remaining run time.
    fn workload(&self) -> Workload {
        let now = self.now;
        Workload::new(
            self.scenario.usable_cpus() as usize,
            self.jobs
                .iter()
                .filter(|j| j.is_unfinished())
                .map(|j| (j.deadline - now, j.est_remaining())),
        )
    }

    fn reschedule(&mut self) {
        let run = self.policy.schedule(self.now, &self.jobs);
        let mut chosen = vec![false; self.jobs.len()];
        for i in run {
            chosen[i] = true;
        }
        for (j, c) in self.jobs.iter_mut().zip(chosen) {
            match (j.state, c) {
                (JobState::Queued, true) => {
                    j.state = JobState::Running;
                    j.started = true;
                    j.slice_start = self.now;
                }
                (JobState::Running, false) => j.state = JobState::Queued,
                _ => {}
            }
        }
    }
}
