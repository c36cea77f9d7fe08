//! The emulated server's deadline check with `--server_uses_workload`, as BOINC's scheduler
//! does it (`sched/edf_sim.cpp`): the host's queue — every unfinished job, with the client's
//! estimate of its remaining run time and its deadline — is booked earliest deadline first on
//! the host's usable CPUs; a new job is sent only if, booked with it, no job that made its
//! deadline misses it and no job already late finishes later than it would have.

/// One job of the host's queue (`IP_RESULT`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Booked {
    /// Seconds from now to its deadline.
    deadline: f64,
    /// Estimated run time left, seconds.
    remaining: f64,
    /// It misses its deadline with the queue as it was when the reply started.
    late: bool,
    /// Then: when it finishes, seconds from now.
    late_finish: f64,
}

/// The host's queue as the server books it.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Usable CPUs (BOINC books every job on them, GPU jobs included).
    ncpus: usize,
    jobs: Vec<Booked>,
}

impl Workload {
    /// The queue of `(seconds to deadline, estimated run time left)` pairs on `ncpus` CPUs;
    /// jobs with nothing left are not booked.
    pub fn new(ncpus: usize, jobs: impl IntoIterator<Item = (f64, f64)>) -> Self {
        let mut w = Self {
            ncpus: ncpus.max(1),
            jobs: jobs
                .into_iter()
                .filter(|&(_, remaining)| remaining > 0.0)
                .map(|(deadline, remaining)| Booked {
                    deadline,
                    remaining,
                    late: false,
                    late_finish: 0.0,
                })
                .collect(),
        };
        let finish = book(w.ncpus, &mut w.jobs);
        for (j, f) in w.jobs.iter_mut().zip(finish) {
            if f > j.deadline {
                j.late = true;
                j.late_finish = f;
            }
        }
        w
    }

    /// Whether a job with `deadline` seconds to go and `runtime` estimated seconds can be sent
    /// (BOINC's `check_candidate`); if so it joins the queue.
    pub fn admit(&mut self, deadline: f64, runtime: f64) -> bool {
        let mut jobs = self.jobs.clone();
        jobs.push(Booked {
            deadline,
            remaining: runtime,
            late: false,
            late_finish: 0.0,
        });
        let finish = book(self.ncpus, &mut jobs);
        let ok = jobs.iter().zip(&finish).all(|(j, &f)| {
            if j.late {
                f <= j.late_finish
            } else {
                f <= j.deadline
            }
        });
        if ok {
            self.jobs = jobs;
        }
        ok
    }
}

/// Sorts `jobs` by deadline (stable) and books each on the CPU free first; returns each
/// job's finish time, seconds from now, in the sorted order.
fn book(ncpus: usize, jobs: &mut [Booked]) -> Vec<f64> {
    jobs.sort_by(|a, b| a.deadline.total_cmp(&b.deadline));
    let mut booked_to = vec![0.0f64; ncpus];
    jobs.iter()
        .map(|j| {
            let (cpu, _) =
                booked_to
                    .iter()
                    .enumerate()
                    .fold(
                        (0, f64::INFINITY),
                        |best, (i, &t)| {
                            if t < best.1 {
                                (i, t)
                            } else {
                                best
                            }
                        },
                    );
            booked_to[cpu] += j.remaining;
            booked_to[cpu]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_what_keeps_every_deadline() {
        // One CPU, two 3 s jobs due in 5 s: the second is late (finishes at 6 s).
        let mut w = Workload::new(1, [(5.0, 3.0), (5.0, 3.0)]);
        // A 1 s job due in 10 s runs last and finishes at 7 s: sent, and booked.
        assert!(w.admit(10.0, 1.0));
        // 3.5 s due in 9.5 s would finish in time but push that one to 10.5 s: refused.
        assert!(!w.admit(9.5, 3.5));
        // 1 s due in 4 s runs first and makes the late job later still (7 s): refused.
        assert!(!w.admit(4.0, 1.0));
        // A job that would itself miss (5 s due in 9 s) is refused.
        assert!(!w.admit(9.0, 5.0));
        // 0.5 s due in 6.5 s: in time (6.5 s), nothing later than before.
        assert!(w.admit(6.5, 0.5));
        // Booked: the 10 s job now ends at 7.5 s, so 2.5 s more due in 10 s is too much.
        assert!(!w.admit(10.0, 2.6));
    }

    #[test]
    fn a_late_job_may_not_get_later() {
        // Two CPUs: the 8 s job due in 5 s is late whatever happens (finishes at 8 s).
        let mut w = Workload::new(2, [(5.0, 8.0), (20.0, 1.0)]);
        // Due in 4 s, 4 s: takes the free CPU first; the late job still finishes at 8 s.
        assert!(w.admit(4.0, 4.0));
        // Another early one lands on the late job's CPU and delays it: refused.
        assert!(!w.admit(3.0, 1.0));
        // Jobs with nothing left are not booked: an empty queue admits a job that fits.
        let mut empty = Workload::new(2, [(1.0, 0.0)]);
        assert!(empty.admit(10.0, 10.0));
        assert!(!empty.admit(10.0, 10.5));
    }
}
