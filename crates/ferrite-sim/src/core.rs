//! Ferrite's scheduling core (`ferrite-sched`) as the emulated client's policy: each pass
//! mirrors the emulated jobs into a `ferrite_sched::World` snapshot, runs the core's
//! `Scheduler` on it, and turns its run list, fetch decision and reports into the emulator's
//! actions; RPC outcomes go back through the core's `handle_*` methods.

use ferrite_sched as fs;
use rand_chacha::ChaCha8Rng;

use crate::model::{Job, JobState};
use crate::policy::{ClientPolicy, RpcPlan};
use crate::random::uniform;
use crate::scenario::Scenario;
use crate::server::WorkRequest;

/// Longest interval handed to the core's accounting at once, seconds.
const ACCOUNTING_PIECE: f64 = 60.0;

/// Backoff jitter for the core, drawn from the emulator's seeded stream.
#[derive(Debug)]
struct ChaChaJitter(ChaCha8Rng);

impl fs::Jitter for ChaChaJitter {
    fn next_unit(&mut self) -> f64 {
        uniform(&mut self.0)
    }
}

/// The core and the static part of its world.
#[derive(Debug)]
pub struct CorePolicy {
    /// The core's state (REC, backoffs, EDF memory).
    sched: fs::Scheduler,
    /// Host, prefs, time stats, projects, apps and versions; jobs are refilled each pass.
    world: fs::World,
    /// Job id (the emulator's `seq`) → index in the emulator's job list, for the last mirror.
    /// Sorted by id (the emulator keeps its jobs in arrival order, so this is cheap).
    index_of: Vec<(u32, usize)>,
    /// What the last mirror copied, while it is known to be current: a job's progress changes
    /// only when time does, and its state shows in the fingerprint.
    mirrored: Option<Fingerprint>,
    /// The last pass's simulation with the fingerprint of the jobs it saw, reused by the fetch
    /// decision when nothing changed since.
    last_sim: Option<(Fingerprint, fs::SimResult)>,
    /// The core's request for the project being contacted, kept for its reply handling.
    sent: Option<(usize, fs::WorkRequest)>,
    jitter: ChaChaJitter,
}

impl CorePolicy {
    /// The core set up for `scenario`; `rr_only` turns off its deadline (EDF) promotion.
    pub fn new(scenario: &Scenario, rr_only: bool, rng: ChaCha8Rng) -> Self {
        let h = &scenario.host;
        let coprocs = h
            .gpus
            .iter()
            .map(|g| fs::Coproc {
                kind: match g.name.to_ascii_lowercase().as_str() {
                    "nvidia" | "cuda" => fs::CoprocKind::Nvidia,
                    "ati" | "amd" => fs::CoprocKind::Amd,
                    "intel_gpu" | "intel" => fs::CoprocKind::IntelGpu,
                    other => fs::CoprocKind::Other(other.to_owned()),
                },
                count: g.count,
                peak_flops: g.peak_flops,
            })
            .collect();
        let host = fs::Host {
            // The scenario already applied cc_config <ncpus>, max_cpus and max_ncpus_pct.
            ncpus: scenario.usable_cpus(),
            p_fpops: h.p_fpops,
            ram_bytes: h.m_nbytes,
            swap_bytes: 0.0,
            coprocs,
        };
        let mut world = fs::World::new(host);
        let p = &scenario.prefs;
        world.prefs = fs::Prefs {
            work_buf_min_days: p.work_buf_min / 86_400.0,
            work_buf_additional_days: p.work_buf_additional / 86_400.0,
            cpu_scheduling_period_minutes: p.cpu_scheduling_period / 60.0,
            max_ncpus_pct: 100.0,
            ..fs::Prefs::default()
        };
        world.time_stats = fs::TimeStats {
            on_frac: h.on.frac,
            connected_frac: h.connected.frac,
            active_frac: h.active.frac,
            gpu_active_frac: h.gpu_active.frac,
        };
        for pr in &scenario.projects {
            let mut project = fs::Project::new(pr.name.clone(), pr.resource_share);
            project.report_immediately = scenario.cc_config.report_results_immediately;
            world.add_project(project);
        }
        for a in &scenario.apps {
            let mut app = fs::App::new(fs::ProjectId(a.project as u32), a.name.clone());
            if a.max_concurrent > 0 {
                app.max_concurrent = Some(a.max_concurrent);
            }
            world.add_app(app);
        }
        for v in &scenario.app_versions {
            let app = fs::AppId(v.app as u32);
            let project = fs::ProjectId(scenario.apps[v.app].project as u32);
            let av = match v.gpu {
                None => fs::AppVersion::cpu(app, project, v.avg_ncpus, v.flops),
                Some((g, n)) => fs::AppVersion::coproc(
                    app,
                    project,
                    fs::ResourceId(g as u8 + 1),
                    n,
                    v.avg_ncpus,
                    v.flops,
                ),
            };
            world.add_app_version(av);
        }
        let mut policy = if rr_only {
            fs::Policy::rr_only()
        } else {
            fs::Policy::default()
        };
        policy.rec_half_life = scenario.cc_config.rec_half_life;
        Self {
            sched: fs::Scheduler::new(policy),
            world,
            index_of: Vec::new(),
            mirrored: None,
            last_sim: None,
            sent: None,
            jitter: ChaChaJitter(rng),
        }
    }

    /// Refills the core's job list from the emulator's, unless it already holds them.
    fn mirror_cached(&mut self, now: f64, jobs: &[Job]) {
        let fp = Fingerprint::of(now, jobs);
        if self.mirrored != Some(fp) {
            self.mirror(now, jobs);
            self.mirrored = Some(fp);
        }
    }

    /// Refills the core's job list from the emulator's.
    fn mirror(&mut self, now: f64, jobs: &[Job]) {
        self.world.jobs.clear();
        self.index_of.clear();
        for (i, j) in jobs.iter().enumerate() {
            let state = match j.state {
                JobState::Queued if j.started => fs::JobState::Preempted { in_memory: true },
                JobState::Queued => fs::JobState::Unstarted,
                JobState::Running => fs::JobState::Running,
                JobState::Done(t) | JobState::Aborted(t) => fs::JobState::Finished {
                    completed_time: t,
                    ready_to_report: true,
                },
                JobState::Reported => continue,
            };
            let id = fs::JobId(j.seq as u32);
            let mut job = fs::Job::new(
                id,
                fs::ProjectId(j.project as u32),
                fs::AppVersionId(j.version as u32),
                j.fpops_est,
                j.received,
                j.deadline,
            );
            job.state = state;
            job.elapsed = j.elapsed;
            if j.started {
                // The app reports its true progress; it checkpoints every step (as in the
                // official emulator).
                let total = j.fpops_left + j.flops * j.elapsed;
                job.fraction_done = if total > 0.0 {
                    (1.0 - j.fpops_left / total).clamp(0.0, 1.0)
                } else {
                    1.0
                };
                job.elapsed_at_fraction = j.elapsed;
                job.checkpoint_elapsed = j.elapsed;
                job.last_checkpoint_time = Some(now);
                job.run_started_at = Some(j.slice_start);
            }
            self.index_of.push((id.0, i));
            self.world.jobs.push(job);
        }
        self.index_of.sort_unstable_by_key(|&(id, _)| id);
    }

    /// Index in the emulator's job list of the core's job `id`, as of the last mirror.
    fn index(&self, id: fs::JobId) -> Option<usize> {
        self.index_of
            .binary_search_by_key(&id.0, |&(k, _)| k)
            .ok()
            .map(|k| self.index_of[k].1)
    }

    fn convert(&self, req: &fs::WorkRequest) -> WorkRequest {
        let mut out = WorkRequest::none(self.world.n_resources());
        for r in &req.resources {
            let k = r.resource.index();
            if k < out.req_secs.len() {
                out.req_secs[k] = r.req_secs;
                out.req_instances[k] = r.req_instances;
                out.estimated_delay[k] = r.estimated_delay;
            }
        }
        out
    }
}

/// What a simulation depends on: the time and every job's identity and state.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Fingerprint {
    now: f64,
    jobs: usize,
    hash: u64,
}

impl Fingerprint {
    fn of(now: f64, jobs: &[Job]) -> Self {
        let mut hash = 0xcbf2_9ce4_8422_2325u64;
        for j in jobs {
            let state = match j.state {
                JobState::Queued => 1,
                JobState::Running => 2,
                JobState::Done(_) => 3,
                JobState::Aborted(_) => 4,
                JobState::Reported => 5,
            };
            hash = (hash ^ (j.seq << 3 | state)).wrapping_mul(0x0100_0000_01b3);
        }
        Self {
            now,
            jobs: jobs.len(),
            hash,
        }
    }
}

impl ClientPolicy for CorePolicy {
    fn account(&mut self, now: f64, dt: f64, _used: &[f64], jobs: &[Job]) {
        // The step's progress is applied after this: what is copied now goes stale.
        self.mirror(now, jobs);
        self.mirrored = None;
        // The core discards accounting intervals longer than its sanity limit (a host that
        // slept); a long emulator step is not one, so it is accounted in pieces of at most a
        // minute.
        let pieces = (dt / ACCOUNTING_PIECE).ceil().max(1.0);
        let start = now - dt;
        for k in 1..=(pieces as u32) {
            let t = start + dt * f64::from(k) / pieces;
            self.sched.account(&self.world, t);
        }
    }

    fn abort_doomed(&mut self, now: f64, jobs: &mut [Job]) -> usize {
        self.mirror_cached(now, jobs);
        let doomed = self.sched.doomed(&self.world, now);
        for id in &doomed {
            if let Some(i) = self.index(*id) {
                jobs[i].state = JobState::Aborted(now);
            }
        }
        doomed.len()
    }

    fn schedule(&mut self, now: f64, jobs: &[Job]) -> Vec<usize> {
        self.mirror_cached(now, jobs);
        let (sim, run) = self.sched.schedule(&self.world, now);
        self.last_sim = Some((Fingerprint::of(now, jobs), sim));
        run.run.iter().filter_map(|e| self.index(e.job)).collect()
    }

    fn next_rpc(&mut self, now: f64, jobs: &[Job], contacted: &[bool]) -> Option<RpcPlan> {
        self.mirror_cached(now, jobs);
        let fp = Fingerprint::of(now, jobs);
        let sim = match self.last_sim.take() {
            Some((f, sim)) if f == fp => sim,
            _ => {
                let prio = self.sched.priorities(&self.world);
                fs::rrsim::simulate(&self.world, now, &prio[0].value, &self.sched.policy)
            }
        };
        let free = |p: usize| !contacted.get(p).copied().unwrap_or(true);
        // Reports first, each carrying the work the core would ask of that project on an RPC
        // made anyway (as the daemon does); then the core's own work request.
        let reports = self.sched.decide_reports_with(&self.world, now, &sim);
        if let Some(rep) = reports.iter().find(|r| free(r.project.index())) {
            let p = rep.project.index();
            let work = self.sched.piggyback(&self.world, now, &sim, rep.project);
            self.last_sim = Some((fp, sim));
            let request = match work {
                Some(req) => {
                    let converted = self.convert(&req);
                    self.sent = Some((p, req));
                    converted
                }
                None => {
                    self.sent = None;
                    WorkRequest::none(self.world.n_resources())
                }
            };
            return Some(RpcPlan {
                project: p,
                request,
            });
        }
        let fetch = self.sched.decide_fetch(&self.world, now, &sim);
        self.last_sim = Some((fp, sim));
        let req = fetch.request.filter(|r| free(r.project.index()))?;
        let p = req.project.index();
        let request = self.convert(&req);
        self.sent = Some((p, req));
        Some(RpcPlan {
            project: p,
            request,
        })
    }

    fn rpc_failed(&mut self, now: f64, p: usize) {
        self.sent = None;
        self.sched
            .handle_rpc_failed(now, fs::ProjectId(p as u32), &mut self.jitter);
    }

    fn handle_reply(&mut self, now: f64, p: usize, _req: &WorkRequest, new_jobs: &[Job]) {
        let mut received = vec![0u32; self.world.n_resources()];
        for j in new_jobs {
            let (r, _) = j.resource();
            if let Some(n) = received.get_mut(r) {
                *n += 1;
            }
        }
        let sent = self.sent.take().filter(|(sp, _)| *sp == p).map(|(_, r)| r);
        self.sched.handle_rpc_succeeded(
            now,
            fs::ProjectId(p as u32),
            sent.as_ref(),
            &received,
            0.0,
            &mut self.jitter,
        );
    }
}
