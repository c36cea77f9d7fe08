//! Sharing a CPU limit among running tasks by stopping them in turn.
//!
//! When the apps may use only a share `s` (0 < s < 1) of the CPU they would use and no
//! kernel limit (cgroup `cpu.max`) is available, the daemon stops and continues the apps'
//! process groups itself. Stopping every app for the same part of each second (the official
//! client's duty cycle) makes the load jump between all and nothing; with `n` tasks this
//! planner instead keeps about `s × n` of them running at every moment and rotates which
//! ones, so the load (and the heat) stays level:
//!
//! - the rotation's cycle lasts `n` slots (a slot is the caller's period, one second in the
//!   daemon); task `i` (in the caller's stable order) runs for `s` of each cycle, starting
//!   `i × s` of a cycle after task `i - 1` started (wrapping around);
//! - so the runs are laid end to end around the cycle: when one task stops, the next starts,
//!   and at any moment `floor(s × n)` or `ceil(s × n)` tasks run, `s × n` on average — never
//!   more than the share rounded up to a whole task;
//! - each task gets exactly `s` of every whole cycle.
//!
//! A single task cannot be split: for `n = 1` this is the duty cycle (runs for `s` of each
//! slot, stopped for the rest).
//!
//! No clock and no I/O: the caller passes the time since the rotation began.

/// Where one task stands in the rotation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Turn {
    /// The task may run now.
    pub runs: bool,
    /// Seconds until that changes (infinite when never).
    pub switch_in: f64,
}

/// The turn of task `index` of `n` (in a stable order) under CPU share `share` (a fraction:
/// 0.3 is 30 %), `since` seconds after the rotation began, with slots of `slot` seconds.
/// A share of 1 or more, one not above 0, an index out of range or a slot not above 0 never
/// stops the task.
pub fn turn(share: f64, n: usize, index: usize, slot: f64, since: f64) -> Turn {
    let always = Turn {
        runs: true,
        switch_in: f64::INFINITY,
    };
    if !(share > 0.0 && share < 1.0 && slot > 0.0) || index >= n {
        return always;
    }
    let cycle = slot * n as f64;
    let run_len = share * cycle;
    let start = (index as f64 * run_len).rem_euclid(cycle);
    let pos = (since.max(0.0) - start).rem_euclid(cycle);
    if pos < run_len {
        Turn {
            runs: true,
            switch_in: run_len - pos,
        }
    } else {
        Turn {
            runs: false,
            switch_in: cycle - pos,
        }
    }
}

/// How many of `n` tasks run at once under `share`: at most this many at any moment.
pub fn most_running(share: f64, n: usize) -> usize {
    if !(share > 0.0 && share < 1.0) {
        return n;
    }
    ((share * n as f64 - 1e-9).ceil().max(0.0) as usize).min(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Runs `n` tasks under `share` in virtual time, `steps` steps of `dt` seconds, and
    /// returns each task's run time and the most tasks running at one step.
    fn simulate(share: f64, n: usize, dt: f64, steps: usize) -> (Vec<f64>, usize) {
        let mut ran = vec![0.0; n];
        let mut most = 0;
        for k in 0..steps {
            // The middle of the step, away from the switch instants.
            let t = (k as f64 + 0.5) * dt;
            let running: Vec<usize> = (0..n).filter(|i| turn(share, n, *i, 1.0, t).runs).collect();
            most = most.max(running.len());
            for i in running {
                ran[i] += dt;
            }
        }
        (ran, most)
    }

    #[test]
    fn each_task_gets_its_share_and_no_more_than_the_share_runs_at_once() {
        for n in 1..=9 {
            for share in [0.05, 0.25, 0.3, 0.5, 0.62, 0.75, 0.9, 0.99] {
                // 37.3 s: not a whole number of cycles.
                let (dt, steps) = (0.005, 7_460);
                let elapsed = dt * steps as f64;
                let (ran, most) = simulate(share, n, dt, steps);
                for (i, r) in ran.iter().enumerate() {
                    // Within one cycle's run (share × n slots) of the exact share.
                    let bound = share * n as f64 + 2.0 * dt;
                    assert!(
                        (r - share * elapsed).abs() <= bound,
                        "n {n} share {share} task {i}: ran {r} of {elapsed}"
                    );
                }
                assert!(
                    most <= most_running(share, n),
                    "n {n} share {share}: {most} ran at once"
                );
            }
        }
    }

    #[test]
    fn whole_cycles_give_exactly_the_share_and_the_load_stays_level() {
        // 4 tasks at 50 %: two run at every moment, each half of every 4 s cycle.
        let (ran, most) = simulate(0.5, 4, 0.001, 8_000);
        for r in &ran {
            assert!((r - 4.0).abs() < 0.01, "{ran:?}");
        }
        assert_eq!(most, 2);
        for k in 0..8_000 {
            let t = (k as f64 + 0.5) * 0.001;
            let running = (0..4).filter(|i| turn(0.5, 4, *i, 1.0, t).runs).count();
            assert_eq!(running, 2, "at {t}");
        }
        // 3 tasks at 50 %: 1.5 on average, one or two at a time.
        let (_, most) = simulate(0.5, 3, 0.001, 6_000);
        assert_eq!(most, 2);
        assert_eq!(most_running(0.5, 3), 2);
        assert_eq!(most_running(0.5, 4), 2);
        assert_eq!(most_running(0.01, 4), 1);
        assert_eq!(most_running(1.0, 4), 4);
    }

    #[test]
    fn the_tasks_take_turns_one_after_the_other() {
        // 2 tasks at 50 %: the first runs the first second, the second the next.
        let a = turn(0.5, 2, 0, 1.0, 0.2);
        assert!(a.runs && close(a.switch_in, 0.8));
        let b = turn(0.5, 2, 1, 1.0, 0.2);
        assert!(!b.runs && close(b.switch_in, 0.8));
        let a = turn(0.5, 2, 0, 1.0, 1.2);
        assert!(!a.runs && close(a.switch_in, 0.8));
        let b = turn(0.5, 2, 1, 1.0, 1.2);
        assert!(b.runs && close(b.switch_in, 0.8));
    }

    #[test]
    fn a_single_task_follows_the_duty_cycle() {
        let p = turn(0.3, 1, 0, 1.0, 0.1);
        assert!(p.runs && close(p.switch_in, 0.2));
        let p = turn(0.3, 1, 0, 1.0, 0.3);
        assert!(!p.runs && close(p.switch_in, 0.7));
        let p = turn(0.3, 1, 0, 1.0, 7.05);
        assert!(p.runs && close(p.switch_in, 0.25));
    }

    #[test]
    fn no_share_or_no_task_never_stops() {
        for share in [1.0, 1.5, 0.0, -0.2, f64::NAN] {
            let p = turn(share, 3, 1, 1.0, 0.7);
            assert!(p.runs && p.switch_in.is_infinite(), "{share}");
        }
        assert!(turn(0.5, 2, 2, 1.0, 0.0).runs);
        assert!(turn(0.5, 2, 0, 0.0, 0.0).runs);
        // A clock step backwards counts as the rotation's start.
        let p = turn(0.5, 2, 0, 1.0, -3.0);
        assert!(p.runs && close(p.switch_in, 1.0));
    }
}
