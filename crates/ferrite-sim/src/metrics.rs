//! Figures of merit, accumulated step by step and computed exactly as the official emulator
//! defines them (wasted, idle, share violation, monotony, RPCs per job; per project used share
//! and deadlines met/missed), and their human and JSON renderings.

use std::fmt::Write as _;

use serde::Serialize;

use crate::engine::SimOptions;
use crate::model::Resources;
use crate::scenario::Scenario;

/// Per-project running totals.
#[derive(Debug, Clone, Default)]
struct ProjectAcc {
    flops_used: f64,
    flops_wasted: f64,
    met: u64,
    missed: u64,
    /// Seconds since the project last had a running job.
    idle_time: f64,
    /// Σ dt × idle_time² over steps it was idle.
    idle_sumsq: f64,
}

/// Running totals over a run.
#[derive(Debug, Clone)]
pub struct Accumulators {
    projects: Vec<ProjectAcc>,
    /// Seconds accounted (every step, whatever the host state).
    active_time: f64,
    /// Seconds accounted while GPUs could compute.
    gpu_active_time: f64,
    flops_used: f64,
    flops_wasted: f64,
    /// Scheduler RPCs carried out (project up).
    pub rpcs: u64,
    /// Jobs made by the emulated servers.
    pub jobs_received: u64,
    /// Jobs the client gave up on (reported as missed).
    pub aborted: u64,
}

impl Accumulators {
    /// Empty totals for `n` projects.
    pub fn new(n: usize) -> Self {
        Self {
            projects: vec![ProjectAcc::default(); n],
            active_time: 0.0,
            gpu_active_time: 0.0,
            flops_used: 0.0,
            flops_wasted: 0.0,
            rpcs: 0,
            jobs_received: 0,
            aborted: 0,
        }
    }

    /// Accounts one step of `dt` seconds: `used[p]` peak FLOPs of project p, `ran[p]` whether
    /// it had a running job.
    pub fn step(&mut self, dt: f64, gpu_active: bool, used: &[f64], ran: &[bool]) {
        for ((p, u), r) in self.projects.iter_mut().zip(used).zip(ran) {
            p.flops_used += u;
            self.flops_used += u;
            if *r {
                p.idle_time = 0.0;
            } else {
                p.idle_time += dt;
                p.idle_sumsq += dt * p.idle_time * p.idle_time;
            }
        }
        self.active_time += dt;
        if gpu_active {
            self.gpu_active_time += dt;
        }
    }

    /// Accounts a reported job of project `p`: late (or given up) ones waste their FLOPs.
    pub fn reported(&mut self, p: usize, late: bool, peak_flops: f64) {
        let pa = &mut self.projects[p];
        if late {
            pa.missed += 1;
            pa.flops_wasted += peak_flops;
            self.flops_wasted += peak_flops;
        } else {
            pa.met += 1;
        }
    }

    /// The figures.
    pub fn report(&self, scenario: &Scenario, res: &Resources, opts: &SimOptions) -> Report {
        let cpu_peak = res.instances[0] * res.p_fpops;
        let gpu_peak: f64 = res
            .instances
            .iter()
            .zip(&res.relative_speed)
            .skip(1)
            .fold(0.0, |acc, (n, s)| acc + n * s)
            * res.p_fpops;
        let flops_total = cpu_peak * self.active_time + gpu_peak * self.gpu_active_time;
        let ratio = |x: f64| {
            if flops_total > 0.0 {
                x / flops_total
            } else {
                0.0
            }
        };
        let total_share: f64 = scenario.projects.iter().map(|p| p.resource_share).sum();
        let used = self.flops_used;
        let share_violation = if used > 0.0 && total_share > 0.0 {
            scenario
                .projects
                .iter()
                .zip(&self.projects)
                .map(|(p, a)| (a.flops_used - used * p.resource_share / total_share).abs())
                .sum::<f64>()
                / used
        } else {
            0.0
        };
        let n = self.projects.len() as f64;
        let rms_sum: f64 = self
            .projects
            .iter()
            .map(|a| {
                if self.active_time > 0.0 {
                    (a.idle_sumsq / self.active_time).sqrt()
                } else {
                    0.0
                }
            })
            .sum();
        // No project: nothing to interleave.
        let x = if n > 0.0 {
            rms_sum / (n * n * scenario.prefs.cpu_scheduling_period)
        } else {
            0.0
        };
        let monotony = 1.0 - 1.0 / (x + 1.0);
        let projects: Vec<ProjectReport> = scenario
            .projects
            .iter()
            .zip(&self.projects)
            .map(|(p, a)| ProjectReport {
                name: p.name.clone(),
                resource_share: p.resource_share,
                used_share: if used > 0.0 { a.flops_used / used } else { 0.0 },
                flops_used: a.flops_used,
                flops_wasted: a.flops_wasted,
                deadlines_met: a.met,
                deadlines_missed: a.missed,
            })
            .collect();
        Report {
            duration: opts.duration,
            delta: opts.delta,
            seed: opts.seed,
            policy: "core".to_owned(),
            cpu_sched_rr_only: opts.rr_only,
            existing_jobs_only: opts.existing_jobs_only,
            server_uses_workload: opts.server_uses_workload,
            wasted_fraction: ratio(self.flops_wasted),
            idle_fraction: ratio((flops_total - used).max(0.0)),
            share_violation,
            monotony,
            rpcs_per_job: if self.jobs_received > 0 {
                self.rpcs as f64 / (2.0 * self.jobs_received as f64)
            } else {
                0.0
            },
            deadlines_met: projects.iter().map(|p| p.deadlines_met).sum(),
            deadlines_missed: projects.iter().map(|p| p.deadlines_missed).sum(),
            jobs_aborted: self.aborted,
            rpcs: self.rpcs,
            jobs_received: self.jobs_received,
            peak_flops_cpu: cpu_peak,
            peak_flops_gpu: gpu_peak,
            flops_total,
            flops_used: used,
            flops_wasted: self.flops_wasted,
            projects,
        }
    }
}

/// One project's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProjectReport {
    /// Project name.
    pub name: String,
    /// Its resource share.
    pub resource_share: f64,
    /// Its fraction (0–1) of all FLOPs used.
    pub used_share: f64,
    /// Peak FLOPs used.
    pub flops_used: f64,
    /// Peak FLOPs of its jobs reported after their deadline.
    pub flops_wasted: f64,
    /// Jobs reported in time.
    pub deadlines_met: u64,
    /// Jobs reported late or given up.
    pub deadlines_missed: u64,
}

/// The figures of a run (the JSON document of `ferrite-sim --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Emulated seconds.
    pub duration: f64,
    /// Time step.
    pub delta: f64,
    /// Seed.
    pub seed: u64,
    /// Client policy: always `core` (Ferrite's scheduling core, ferrite-sched); kept in the
    /// output so figures from different emulator versions stay comparable.
    pub policy: String,
    /// Whether deadline promotion was off.
    pub cpu_sched_rr_only: bool,
    /// Whether servers made no new jobs.
    pub existing_jobs_only: bool,
    /// Whether servers checked the host's workload (EDF) before sending a job.
    pub server_uses_workload: bool,
    /// Peak FLOPs of late jobs / FLOPs available.
    pub wasted_fraction: f64,
    /// (available − used) / available.
    pub idle_fraction: f64,
    /// Σ |used_p − used × share_p/Σshare| / used.
    pub share_violation: f64,
    /// 0 = projects interleave perfectly, towards 1 = long runs of one project.
    pub monotony: f64,
    /// RPCs / (2 × jobs received), the official definition.
    pub rpcs_per_job: f64,
    /// Jobs reported in time, all projects.
    pub deadlines_met: u64,
    /// Jobs reported late or given up, all projects.
    pub deadlines_missed: u64,
    /// Jobs given up by the client (included in `deadlines_missed`).
    pub jobs_aborted: u64,
    /// RPCs carried out.
    pub rpcs: u64,
    /// Jobs made by the servers.
    pub jobs_received: u64,
    /// Peak FLOPS of the usable CPUs.
    pub peak_flops_cpu: f64,
    /// Peak FLOPS of the GPUs.
    pub peak_flops_gpu: f64,
    /// FLOPs available over the run.
    pub flops_total: f64,
    /// Peak FLOPs used.
    pub flops_used: f64,
    /// Peak FLOPs wasted.
    pub flops_wasted: f64,
    /// Per project, in scenario order.
    pub projects: Vec<ProjectReport>,
}

impl Report {
    /// The human summary, laid out like the official emulator's.
    pub fn human(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Ferrite emulator: policy {}, duration {:.0} s, time step {:.0} s, seed {}, round-robin only: {}, existing jobs only: {}, server uses workload: {}",
            self.policy,
            self.duration,
            self.delta,
            self.seed,
            yes_no(self.cpu_sched_rr_only),
            yes_no(self.existing_jobs_only),
            yes_no(self.server_uses_workload)
        );
        let _ = writeln!(s, "Figures of merit:");
        let _ = writeln!(s, "wasted fraction {:.6}", self.wasted_fraction);
        let _ = writeln!(s, "Idle fraction {:.6}", self.idle_fraction);
        let _ = writeln!(s, "Share violation {:.6}", self.share_violation);
        let _ = writeln!(s, "Monotony {:.6}", self.monotony);
        let _ = writeln!(s, "RPCs per job {:.6}", self.rpcs_per_job);
        let _ = writeln!(
            s,
            "Deadlines: met {} missed {} (of which aborted {}); RPCs {}; jobs received {}",
            self.deadlines_met,
            self.deadlines_missed,
            self.jobs_aborted,
            self.rpcs,
            self.jobs_received
        );
        let _ = writeln!(s, "-------------------------");
        let _ = writeln!(
            s,
            "Peak FLOPS: CPU {:.2}G GPU {:.2}G",
            self.peak_flops_cpu / 1e9,
            self.peak_flops_gpu / 1e9
        );
        for p in &self.projects {
            let _ = writeln!(
                s,
                "{}: share {:.2} total flops {:.2}G ({:.2}%)\n   used {:.2}G wasted {:.2}G\n   deadlines: met {} missed {}",
                p.name,
                p.resource_share,
                p.flops_used / 1e9,
                p.used_share * 100.0,
                p.flops_used / 1e9,
                p.flops_wasted / 1e9,
                p.deadlines_met,
                p.deadlines_missed
            );
        }
        s
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::scenario::parse_client_state;

    fn scenario() -> Scenario {
        parse_client_state(
            r#"<client_state><host_info><p_ncpus>2</p_ncpus><p_fpops>1e9</p_fpops></host_info>
<project><master_url>a</master_url><project_name>A</project_name><resource_share>100</resource_share></project>
<app><name>x</name></app><app_version><app_name>x</app_name><flops>1e9</flops></app_version>
<project><master_url>b</master_url><project_name>B</project_name><resource_share>100</resource_share></project>
<app><name>y</name></app><app_version><app_name>y</app_name><flops>1e9</flops></app_version>
</client_state>"#,
            "t",
        )
        .unwrap()
    }

    fn res() -> Resources {
        Resources {
            instances: vec![2.0],
            relative_speed: vec![1.0],
            p_fpops: 1e9,
        }
    }

    #[test]
    fn figures_follow_the_definitions() {
        let s = scenario();
        let mut acc = Accumulators::new(2);
        // 10 steps of 60 s: A uses 1.5 CPUs' worth, B runs only in the first 5 steps.
        for k in 0..10 {
            let b = if k < 5 { 0.3e9 * 60.0 } else { 0.0 };
            acc.step(60.0, true, &[1.5e9 * 60.0, b], &[true, k < 5]);
        }
        acc.reported(0, false, 1.0);
        acc.reported(1, true, 120e9);
        acc.rpcs = 3;
        acc.jobs_received = 6;
        let r = acc.report(&s, &res(), &SimOptions::default());
        let total = 2e9 * 600.0;
        let used = 1.5e9 * 600.0 + 0.3e9 * 300.0;
        assert!((r.idle_fraction - (total - used) / total).abs() < 1e-12);
        assert!((r.wasted_fraction - 120e9 / total).abs() < 1e-12);
        let a = 1.5e9 * 600.0;
        let sv = ((a - used / 2.0).abs() + (used - a - used / 2.0).abs()) / used;
        assert!((r.share_violation - sv).abs() < 1e-12);
        assert_eq!(r.rpcs_per_job, 0.25);
        assert_eq!(r.deadlines_missed, 1);
        assert_eq!(r.projects[1].deadlines_missed, 1);
        // B idle for the last 5 steps: idle times 60..300.
        let sumsq: f64 = (1..=5).map(|k| 60.0 * (60.0 * f64::from(k)).powi(2)).sum();
        let x = (sumsq / 600.0).sqrt() / (4.0 * 3600.0);
        assert!((r.monotony - (1.0 - 1.0 / (1.0 + x))).abs() < 1e-12);
    }

    #[test]
    fn no_usage_gives_zero_violation_not_nan() {
        let s = scenario();
        let acc = Accumulators::new(2);
        let r = acc.report(&s, &res(), &SimOptions::default());
        assert_eq!(r.share_violation, 0.0);
        assert_eq!(r.idle_fraction, 0.0);
        assert_eq!(r.rpcs_per_job, 0.0);
    }
}
