//! The emulated project server: answers a scheduler request by making jobs (app chosen by
//! weight, size estimate drawn from the app's distribution, deadline = now + latency bound)
//! until the request is met, refusing a job it thinks cannot meet its deadline — estimated
//! queue delay plus the job's estimated run time over the latency bound — and then no longer
//! using that app version in this reply. This is the official emulator's server rule; with
//! `--server_uses_workload` the deadline check is instead an EDF booking of the host's whole
//! queue ([`crate::workload`]), as BOINC's scheduler can do.

use rand_chacha::ChaCha8Rng;

use crate::model::{Job, JobState};
use crate::random::{standard_normal, uniform};
use crate::scenario::Scenario;
use crate::workload::Workload;

/// Safety net: no reply holds more jobs than this (a request whose usage never decreases
/// would otherwise loop forever).
pub const MAX_JOBS_PER_REPLY: usize = 10_000;

/// What the client asks for, per resource (`[0]` = CPU, `[1 + g]` = GPU type g).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkRequest {
    /// Instance-seconds of work wanted.
    pub req_secs: Vec<f64>,
    /// Idle instances to fill.
    pub req_instances: Vec<f64>,
    /// Seconds before a new job of this project would start, as the client estimates it.
    pub estimated_delay: Vec<f64>,
}

impl WorkRequest {
    /// An empty request for `n` resources.
    pub fn none(n: usize) -> Self {
        Self {
            req_secs: vec![0.0; n],
            req_instances: vec![0.0; n],
            estimated_delay: vec![0.0; n],
        }
    }

    /// Whether anything is asked for.
    pub fn wants_work(&self) -> bool {
        self.req_secs
            .iter()
            .chain(&self.req_instances)
            .any(|x| *x > 0.0)
    }

    fn needs(&self, rsc: usize) -> bool {
        self.req_secs.get(rsc).is_some_and(|x| *x > 0.0)
            || self.req_instances.get(rsc).is_some_and(|x| *x > 0.0)
    }
}

/// The server of one project.
#[derive(Debug)]
pub struct ProjectServer {
    /// Project index.
    project: usize,
    /// Project name, for job names.
    name: String,
    /// Number of jobs made so far (names are unique).
    made: u64,
    /// Job sizes and app choice draw from here.
    rng: ChaCha8Rng,
}

impl ProjectServer {
    /// The server of project `project`.
    pub fn new(scenario: &Scenario, project: usize, rng: ChaCha8Rng) -> Self {
        Self {
            project,
            name: scenario.projects[project].name.clone(),
            made: 0,
            rng,
        }
    }

    /// Answers `req` at time `now`. `avail` is the client's on×active fraction (the server
    /// scales run times by it when decrementing the request, as BOINC's does); `instances` the
    /// host's instances per resource; `workload`, with `--server_uses_workload`, the host's
    /// queue the deadline check books new jobs into. Returns the new jobs; `seq` numbers them.
    #[allow(clippy::too_many_arguments)]
    pub fn reply(
        &mut self,
        scenario: &Scenario,
        now: f64,
        req: &WorkRequest,
        avail: f64,
        instances: &[f64],
        mut workload: Option<&mut Workload>,
        seq: &mut u64,
    ) -> Vec<Job> {
        let mut req = req.clone();
        let versions: Vec<usize> = (0..scenario.app_versions.len())
            .filter(|v| scenario.apps[scenario.app_versions[*v].app].project == self.project)
            .collect();
        let mut dont_use = vec![false; scenario.app_versions.len()];
        let mut out = Vec::new();
        let rsc_of = |v: usize| scenario.app_versions[v].gpu.map_or(0, |(g, _)| g + 1);
        while out.len() < MAX_JOBS_PER_REPLY {
            // Apps with a version still usable for a resource the client wants.
            let usable = |v: usize, dont_use: &[bool]| !dont_use[v] && req.needs(rsc_of(v));
            let mut apps: Vec<usize> = versions
                .iter()
                .filter(|v| usable(**v, &dont_use))
                .map(|v| scenario.app_versions[*v].app)
                .collect();
            apps.dedup();
            apps.sort_unstable();
            apps.dedup();
            if apps.is_empty() {
                break;
            }
            let app = self.choose_app(scenario, &apps);
            let Some(v) = versions
                .iter()
                .copied()
                .filter(|v| scenario.app_versions[*v].app == app && usable(*v, &dont_use))
                .max_by(|a, b| {
                    scenario.app_versions[*a]
                        .flops
                        .total_cmp(&scenario.app_versions[*b].flops)
                        .then(b.cmp(a))
                })
            else {
                break;
            };
            let av = &scenario.app_versions[v];
            let a = &scenario.apps[app];
            let est = if a.fpops.std_dev > 0.0 {
                a.fpops.mean + a.fpops.std_dev * standard_normal(&mut self.rng)
            } else {
                a.fpops.mean
            };
            // A non-positive estimate is meaningless to a client; keep it above 1% of the mean.
            let est = est.max(a.fpops.mean * 0.01);
            let et = est / av.flops;
            let rsc = rsc_of(v);
            let fits = match workload.as_deref_mut() {
                Some(w) => w.admit(a.latency_bound, et),
                None => {
                    let delay = req.estimated_delay.get(rsc).copied().unwrap_or(0.0);
                    delay + et <= a.latency_bound
                }
            };
            if !fits {
                dont_use[v] = true;
                continue;
            }
            let run = et / avail.max(1e-3);
            decrement(&mut req, 0, av.avg_ncpus, run, instances);
            if let Some((_, n)) = av.gpu {
                decrement(&mut req, rsc, n, run, instances);
            }
            *seq += 1;
            out.push(Job {
                name: format!("{}_{}", self.name, self.made),
                project: self.project,
                app,
                version: v,
                avg_ncpus: av.avg_ncpus,
                gpu: av.gpu,
                flops: av.flops,
                fpops_left: a.fpops_est,
                fpops_est: est,
                received: now,
                deadline: now + a.latency_bound,
                state: JobState::Queued,
                started: false,
                slice_start: now,
                elapsed: 0.0,
                peak_used: 0.0,
                seq: *seq,
            });
            self.made += 1;
        }
        out
    }

    fn choose_app(&mut self, scenario: &Scenario, apps: &[usize]) -> usize {
        let sum: f64 = apps.iter().map(|a| scenario.apps[*a].weight).sum();
        let mut x = uniform(&mut self.rng) * sum;
        for a in apps {
            x -= scenario.apps[*a].weight;
            if x <= 0.0 {
                return *a;
            }
        }
        apps[apps.len() - 1]
    }
}

fn decrement(req: &mut WorkRequest, rsc: usize, n: f64, run: f64, instances: &[f64]) {
    if let Some(s) = req.req_secs.get_mut(rsc) {
        *s -= run * n;
    }
    if let Some(i) = req.req_instances.get_mut(rsc) {
        *i -= n;
    }
    let inst = instances.get(rsc).copied().unwrap_or(1.0).max(1e-9);
    if let Some(d) = req.estimated_delay.get_mut(rsc) {
        *d += run * n / inst;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::random::rng;
    use crate::scenario::parse_client_state;

    fn scenario() -> Scenario {
        parse_client_state(
            r#"<client_state><host_info><p_ncpus>4</p_ncpus><p_fpops>1e9</p_fpops></host_info>
<project><master_url>u</master_url><project_name>P</project_name></project>
<app><name>a</name><latency_bound>36000</latency_bound><fpops_est>3.6e12</fpops_est></app>
<app_version><app_name>a</app_name><avg_ncpus>1</avg_ncpus><flops>1e9</flops></app_version>
</client_state>"#,
            "t",
        )
        .unwrap()
    }

    #[test]
    fn fills_request_and_sets_deadline() {
        let s = scenario();
        let mut srv = ProjectServer::new(&s, 0, rng(1, 1));
        let mut req = WorkRequest::none(1);
        req.req_secs[0] = 3.6e3 * 5.0;
        let mut seq = 0;
        let jobs = srv.reply(&s, 100.0, &req, 1.0, &[4.0], None, &mut seq);
        assert_eq!(jobs.len(), 5);
        assert_eq!(jobs[0].deadline, 36100.0);
        assert_eq!(jobs[4].name, "P_4");
        assert_eq!(seq, 5);
    }

    #[test]
    fn refuses_jobs_that_would_miss() {
        let s = scenario();
        let mut srv = ProjectServer::new(&s, 0, rng(1, 1));
        let mut req = WorkRequest::none(1);
        req.req_secs[0] = 1e9;
        // Each job adds 3600/4 s of delay: 36000 - 3600 allows 36 jobs, then refusal.
        let mut seq = 0;
        let jobs = srv.reply(&s, 0.0, &req, 1.0, &[4.0], None, &mut seq);
        assert_eq!(jobs.len(), 37);
        req.estimated_delay[0] = 33_000.0;
        assert!(srv
            .reply(&s, 0.0, &req, 1.0, &[4.0], None, &mut seq)
            .is_empty());
    }
}
