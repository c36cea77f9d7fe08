//! Multi-thread CPU jobs in the run list: one never takes more CPUs than are free, a CPU it
//! cannot use goes to a single-thread job, and a multi-thread job of the most deserving
//! project goes before the open time slices of single-thread jobs (else it would starve).

use ferrite_sched::*;

const H: f64 = 3600.0;
const DAY: f64 = 86400.0;
const T0: f64 = 1.7e9;

/// 4 CPUs; one project per entry, in this order: (name, threads of its app, queued jobs,
/// running jobs started 6 minutes ago, slice open). Returns the world and each project's
/// job ids.
fn world(projects: &[(&str, f64, u32, u32)]) -> (World, Vec<Vec<JobId>>) {
    let mut w = World::new(Host::cpu_only(4, 1e9, 16e9));
    w.prefs.work_buf_min_days = 0.0;
    w.prefs.work_buf_additional_days = 0.0;
    let mut ids = Vec::new();
    let mut next = 0;
    for &(name, threads, queued, running) in projects {
        let p = w.add_project(Project::new(name, 1.0));
        let a = w.add_app(App::new(p, name));
        let v = w.add_app_version(AppVersion::cpu(a, p, threads, threads * 1e9));
        let mut mine = Vec::new();
        for k in 0..running + queued {
            let mut j = Job::new(
                JobId(next),
                p,
                v,
                2.0 * H * threads * 1e9,
                T0 - DAY + f64::from(next),
                T0 + 30.0 * DAY,
            );
            if k < running {
                j.state = JobState::Running;
                j.run_started_at = Some(T0 - 0.1 * H);
                j.elapsed = 0.1 * H;
                j.fraction_done = 0.05;
                j.elapsed_at_fraction = j.elapsed;
                j.checkpoint_elapsed = j.elapsed - 60.0;
                j.last_checkpoint_time = Some(T0 - 60.0);
            }
            mine.push(JobId(next));
            w.add_job(j);
            next += 1;
        }
        ids.push(mine);
    }
    (w, ids)
}

fn committed(w: &World, out: &PassOutput) -> f64 {
    out.run
        .run
        .iter()
        .map(|e| {
            let j = w.jobs.iter().find(|j| j.id == e.job).expect("a known job");
            w.version_of(j).avg_ncpus
        })
        .sum()
}

fn runs(out: &PassOutput, id: JobId) -> bool {
    out.run.run.iter().any(|e| e.job == id)
}

/// S has three single-thread jobs running with open slices and is the most deserving
/// project; the 4-thread job of M (next in priority) does not fit on the one free CPU, so it
/// waits and T's single-thread job takes that CPU.
#[test]
fn a_multi_thread_job_never_overcommits_and_a_single_thread_job_takes_the_free_cpu() {
    let (w, ids) = world(&[("S", 1.0, 0, 3), ("M", 4.0, 1, 0), ("T", 1.0, 2, 0)]);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert!(committed(&w, &out) <= 4.0 + 1e-9, "{:?}", out.run.run);
    assert!(!runs(&out, ids[1][0]), "{:?}", out.run.run);
    for &id in &ids[0] {
        assert!(runs(&out, id));
    }
    assert!(runs(&out, ids[2][0]), "{:?}", out.run.run);
    assert!(out.run.idle_cpus.abs() < 1e-9);
    assert!(out
        .run
        .skipped
        .contains(&(ids[1][0], SkipReason::CpusCommitted)));
}

/// M, the most deserving project, offers a 4-thread job while S's four single-thread jobs
/// are in open slices: M's job runs on all 4 CPUs and S's jobs stop, to resume first.
#[test]
fn a_multi_thread_job_of_the_most_deserving_project_goes_before_open_slices() {
    let (w, ids) = world(&[("M", 4.0, 1, 0), ("S", 1.0, 0, 4)]);
    let mut s = Scheduler::new(Policy::default());
    let out = s.pass(&w, T0);
    assert!(runs(&out, ids[0][0]), "{:?}", out.run.run);
    assert!(
        (committed(&w, &out) - 4.0).abs() < 1e-9,
        "{:?}",
        out.run.run
    );
    for &id in &ids[1] {
        assert!(!runs(&out, id));
        assert!(out.run.interrupted.contains(&id), "{id:?}");
    }
}
