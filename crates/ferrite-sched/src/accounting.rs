//! Recent estimated credit (REC) accounting and project priority (reference §3.1, §3.2).
//!
//! REC is "credit per day" decaying with a half-life (10 days by default). It is kept per
//! (project, resource); in [`RecMode::Global`] the priority uses the sum over resources, which
//! is exactly BOINC's single FLOP-weighted REC (the update is linear and all entries decay
//! together). Unlike the official client, a GPU type's speed is per instance (no `count`
//! factor, §7 W6), and GPU time is not scaled by the CPU throttle. When the running jobs use
//! more CPUs than the host has (a GPU job's CPU part on top of a CPU job per core), the CPU
//! jobs are credited with the CPU time they share, not their nominal CPUs.

use crate::model::{AppVersion, ProjectId, ResourceId, Time, World};
use crate::policy::{Policy, RecMode};

/// Credit per FLOP (`COBBLESTONE_SCALE` = 200 / 86400e9).
pub const COBBLESTONE_SCALE: f64 = 200.0 / 86400e9;

/// Relative speed of one instance of resource `r` against one CPU core (1 for the CPU;
/// `efficiency × peak_flops / p_fpops` for a coprocessor instance).
pub fn relative_speed(world: &World, r: ResourceId, policy: &Policy) -> f64 {
    if r.is_cpu() {
        return 1.0;
    }
    let c = &world.host.coprocs[r.index() - 1];
    policy.gpu_efficiency * c.sane_peak_flops() / world.host.p_fpops.max(1.0)
}

/// Fraction of the host's peak FLOPS (or of resource `r`'s instances, per-resource mode) one
/// job of version `v` uses: the size of the temporary priority bump when it is scheduled.
pub fn job_peak_frac(world: &World, v: &AppVersion, policy: &Policy) -> f64 {
    match policy.rec_mode {
        RecMode::PerResource => v.usage() / world.instances(v.resource).max(1e-9),
        RecMode::Global => {
            let speed = relative_speed(world, v.resource, policy);
            let job = v.avg_ncpus
                + if v.resource.is_cpu() {
                    0.0
                } else {
                    v.coproc_usage * speed
                };
            let mut total = world.instances(ResourceId::CPU);
            for r in 1..world.n_resources() {
                let r = ResourceId(r as u8);
                total += world.instances(r) * relative_speed(world, r, policy);
            }
            job / total.max(1e-9)
        }
    }
}

/// The fraction of its nominal CPUs a running CPU job gets: 1, or less when the running jobs
/// use more CPUs than the host has (GPU jobs' CPU parts are served first).
pub fn cpu_job_scale(world: &World) -> f64 {
    let (mut of_gpu_jobs, mut of_cpu_jobs) = (0.0, 0.0);
    for j in world.jobs.iter().filter(|j| j.is_running()) {
        let v = world.version_of(j);
        if v.resource.is_cpu() {
            of_cpu_jobs += v.avg_ncpus;
        } else {
            of_gpu_jobs += v.avg_ncpus;
        }
    }
    let ncpus = world.instances(ResourceId::CPU);
    if of_cpu_jobs > 0.0 && of_gpu_jobs + of_cpu_jobs > ncpus {
        ((ncpus - of_gpu_jobs) / of_cpu_jobs).clamp(0.0, 1.0)
    } else {
        1.0
    }
}

/// BOINC's `update_average`: decay `avg` by the half-life over `dt` and add `x` credit
/// earned during it, keeping `avg` in credit per day.
pub fn update_average(avg: &mut f64, dt: f64, x: f64, half_life: f64) {
    if dt <= 0.0 {
        return;
    }
    let w = (-dt * std::f64::consts::LN_2 / half_life).exp();
    if 1.0 - w > 1e-6 {
        *avg = w * *avg + (1.0 - w) * x / (dt / 86400.0);
    } else {
        *avg += std::f64::consts::LN_2 * x * 86400.0 / half_life;
    }
}

/// The REC book: what each project recently received on each resource.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RecBook {
    /// REC per project, per resource (credit per day).
    pub rec: Vec<Vec<f64>>,
    /// Time of the last accounting; `None` before the first.
    pub last_time: Option<Time>,
}

impl RecBook {
    /// Make room for every project and resource of `world`.
    pub fn resize(&mut self, world: &World) {
        let nr = world.n_resources();
        self.rec.resize_with(world.projects.len(), Vec::new);
        for row in &mut self.rec {
            row.resize(nr, 0.0);
        }
    }

    /// Account the interval since the last call: every job in `Running` state in `world` is
    /// taken to have run the whole interval. Intervals shorter than 1 s are left to grow;
    /// intervals longer than `policy.max_accounting_gap` only decay (hibernation).
    pub fn account(&mut self, world: &World, now: Time, policy: &Policy) {
        self.resize(world);
        let Some(last) = self.last_time else {
            self.last_time = Some(now);
            return;
        };
        let dt = now - last;
        if dt < 0.0 {
            // Clock set back: restart the interval.
            self.last_time = Some(now);
            return;
        }
        if dt < 1.0 {
            return;
        }
        let nr = world.n_resources();
        let mut secs = vec![vec![0.0; nr]; world.projects.len()];
        if dt <= policy.max_accounting_gap {
            // CPU jobs share what the GPU jobs' CPU parts leave when the run list overcommits
            // the CPUs: a project is credited with the CPU time its jobs get.
            let scale = cpu_job_scale(world);
            for j in world.jobs.iter().filter(|j| j.is_running()) {
                let v = world.version_of(j);
                let row = &mut secs[j.project.index()];
                row[0] += dt * v.avg_ncpus * if v.resource.is_cpu() { scale } else { 1.0 };
                if !v.resource.is_cpu() {
                    row[v.resource.index()] += dt * v.coproc_usage;
                }
            }
        }
        let speeds: Vec<f64> = (0..nr)
            .map(|r| relative_speed(world, ResourceId(r as u8), policy))
            .collect();
        for (p, row) in self.rec.iter_mut().enumerate() {
            for (r, rec) in row.iter_mut().enumerate() {
                let x = secs[p][r] * world.host.p_fpops * speeds[r] * COBBLESTONE_SCALE;
                update_average(rec, dt, x, policy.rec_half_life);
            }
        }
        self.last_time = Some(now);
    }

    /// Starts project `p` from the REC a state file saved (`<rec>`, one figure for all
    /// resources, as the official client keeps it), counted on the CPU; a project the book
    /// already credits keeps what it has. Non-finite or negative figures are ignored.
    pub fn seed(&mut self, p: ProjectId, rec: f64) {
        if !(rec.is_finite() && rec > 0.0) {
            return;
        }
        let i = p.index();
        if self.rec.len() <= i {
            self.rec.resize_with(i + 1, Vec::new);
        }
        let row = &mut self.rec[i];
        if row.iter().any(|x| *x != 0.0) {
            return;
        }
        if row.is_empty() {
            row.push(0.0);
        }
        row[0] = rec;
    }

    /// REC used for priority on resource `r`.
    pub fn rec_for(&self, p: ProjectId, r: ResourceId, mode: RecMode) -> f64 {
        let Some(row) = self.rec.get(p.index()) else {
            return 0.0;
        };
        match mode {
            RecMode::Global => row.iter().sum(),
            RecMode::PerResource => row.get(r.index()).copied().unwrap_or(0.0),
        }
    }
}

/// Project priorities on one resource, with what is needed to bump them.
#[derive(Clone, Debug, PartialEq)]
pub struct Priorities {
    /// Priority per project (higher = more deserving; 0 for suspended projects).
    pub value: Vec<f64>,
    /// Share fraction per project among the eligible ones (0 for zero-share).
    pub share_frac: Vec<f64>,
}

impl Priorities {
    /// BOINC's `project_priority_init` over the non-suspended projects:
    /// `−(REC/ΣREC)/share_frac`, zero-share projects at `−1000 − REC/ΣREC`.
    pub fn compute(world: &World, book: &RecBook, r: ResourceId, policy: &Policy) -> Self {
        let np = world.projects.len();
        let eligible = |p: usize| !world.projects[p].suspended;
        let rs: f64 = (0..np)
            .filter(|&p| eligible(p))
            .map(|p| world.projects[p].resource_share)
            .sum();
        let recs: Vec<f64> = (0..np)
            .map(|p| book.rec_for(ProjectId(p as u32), r, policy.rec_mode))
            .collect();
        let mut total: f64 = (0..np).filter(|&p| eligible(p)).map(|p| recs[p]).sum();
        if total <= 0.0 {
            total = 1.0;
        }
        let mut value = vec![0.0; np];
        let mut share_frac = vec![0.0; np];
        for p in 0..np {
            if !eligible(p) {
                continue;
            }
            let share = world.projects[p].resource_share;
            if share > 0.0 && rs > 0.0 {
                share_frac[p] = share / rs;
                value[p] = -(recs[p] / total) / share_frac[p];
            } else {
                value[p] = -1000.0 - recs[p] / total;
            }
        }
        Priorities { value, share_frac }
    }

    /// Lower project `p`'s priority after giving it a job using `peak_frac` of the host: its
    /// temporary REC grows by one hour's worth of the total REC times that fraction, so the
    /// next job goes to whoever is now most deserving (this interleaves projects).
    pub fn bump(&mut self, p: usize, peak_frac: f64) {
        let d = peak_frac / 24.0;
        if self.share_frac[p] > 0.0 {
            self.value[p] -= d / self.share_frac[p];
        } else {
            self.value[p] -= d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::{App, AppVersion, Coproc, CoprocKind, Host, Job, JobId, JobState, Project};

    /// 4 CPUs and a GPU: M runs four 1-CPU jobs, G one GPU job with 0.5 CPU, for an hour.
    #[test]
    fn overcommitted_cpu_jobs_are_credited_with_the_cpu_they_share() {
        let mut host = Host::cpu_only(4, 1e9, 8e9);
        host.coprocs.push(Coproc {
            kind: CoprocKind::Nvidia,
            count: 1,
            peak_flops: 5e10,
        });
        let mut w = World::new(host);
        let m = w.add_project(Project::new("M", 100.0));
        let g = w.add_project(Project::new("G", 100.0));
        let ma = w.add_app(App::new(m, "m"));
        let ga = w.add_app(App::new(g, "g"));
        let mv = w.add_app_version(AppVersion::cpu(ma, m, 1.0, 1e9));
        let gv = w.add_app_version(AppVersion::coproc(ga, g, ResourceId(1), 1.0, 0.5, 1e10));
        for k in 0..5u32 {
            let (p, v) = if k < 4 { (m, mv) } else { (g, gv) };
            let mut j = Job::new(JobId(k), p, v, 1e13, 0.0, 1e6);
            j.state = JobState::Running;
            w.add_job(j);
        }
        assert!((cpu_job_scale(&w) - 3.5 / 4.0).abs() < 1e-12);
        let policy = Policy {
            max_accounting_gap: 7200.0,
            ..Policy::default()
        };
        let mut book = RecBook::default();
        book.account(&w, 0.0, &policy);
        book.account(&w, 3600.0, &policy);
        let cpu_rec = |p: ProjectId| book.rec[p.index()][0];
        // M's four jobs got 3.5 CPUs, G's job its 0.5.
        assert!(
            (cpu_rec(m) / cpu_rec(g) - 7.0).abs() < 1e-9,
            "{:?}",
            book.rec
        );
        // Without the GPU job, no overcommit.
        w.jobs.pop();
        assert_eq!(cpu_job_scale(&w), 1.0);
    }

    #[test]
    fn a_saved_rec_seeds_an_empty_row_only() {
        let mut book = RecBook::default();
        book.seed(ProjectId(2), 150.0);
        assert_eq!(book.rec.len(), 3);
        assert_eq!(
            book.rec_for(ProjectId(2), ResourceId(0), RecMode::Global),
            150.0
        );
        // Already credited: kept.
        book.seed(ProjectId(2), 7.0);
        assert_eq!(
            book.rec_for(ProjectId(2), ResourceId(0), RecMode::Global),
            150.0
        );
        book.seed(ProjectId(0), f64::NAN);
        book.seed(ProjectId(1), -3.0);
        assert_eq!(
            book.rec_for(ProjectId(0), ResourceId(0), RecMode::Global),
            0.0
        );
        assert_eq!(
            book.rec_for(ProjectId(1), ResourceId(0), RecMode::Global),
            0.0
        );
    }

    #[test]
    fn rec_halves_after_one_half_life_without_work() {
        let mut avg = 100.0;
        update_average(&mut avg, 10.0 * 86400.0, 0.0, 10.0 * 86400.0);
        assert!((avg - 50.0).abs() < 1e-9);
    }

    #[test]
    fn steady_credit_converges_to_its_daily_rate() {
        let mut avg = 0.0;
        for _ in 0..(100 * 24) {
            update_average(&mut avg, 3600.0, 10.0, 10.0 * 86400.0);
        }
        // 10 credits per hour = 240 per day; after 10 half-lives within 0.1 %.
        assert!((avg - 240.0).abs() < 0.5, "{avg}");
    }
}
