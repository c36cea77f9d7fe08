//! Tasks in their finishing wait. The BOINC API's `boinc_finish` prints "called
//! boinc_finish(N)" to the slot's `stderr.txt`, then sleeps two seconds (so the timer thread
//! can send the final status) before it writes `boinc_finish_called` and exits. During that
//! sleep the task needs no CPU: once the line is there and the process stops asking for CPU
//! (its threads' time on a CPU and waiting for one, `/proc/PID/task/*/schedstat`, stops
//! growing), the task is marked finishing and the core counts its CPU as free
//! ([`ferrite_sched::Job::finishing`]), so the next task starts while this one exits. Its slot
//! stays taken and its exit is handled as any other. Should its CPU time grow again, it is no
//! longer finishing and gets its CPU back.
//!
//! Looking costs a `stat` of `stderr.txt` and a read of `/proc/PID/stat`, done only for a
//! running task near its end (fraction done 1, or less than [`ENDGAME_SECS`] left by its own
//! progress rate); meanwhile the daemon polls every [`FAST_POLL_SECS`], for at most
//! [`ENDGAME_FAST_SECS`] per task.

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;
use std::time::{Duration, Instant};

use ferrite_supervise::procinfo::{cpu_demand_seconds, ProcStat};
use ferrite_supervise::slot::STDERR_FILE;
use ferrite_supervise::TaskState;
use tracing::info;

use crate::tasks::{Key, Live};

/// What `boinc_finish` prints to stderr before its wait.
pub const FINISH_LINE: &str = "called boinc_finish(";
/// A task with less than this left (by its fraction done and elapsed time) is near its end.
pub const ENDGAME_SECS: f64 = 3.0;
/// How often the daemon polls while a task is near its end.
pub const FAST_POLL_SECS: f64 = 0.025;
/// The fast polling of one task lasts at most this long (an app that reports it is done but
/// goes on computing is then looked at with the normal tick).
pub const ENDGAME_FAST_SECS: f64 = 10.0;
/// The shortest window over which CPU time is compared.
pub const MIN_WINDOW: Duration = Duration::from_millis(90);
/// CPU time that may accrue in a window of an idle process: one clock tick (10 ms) and
/// rounding, or 5 % of the window if that is more.
const IDLE_CPU_SECS: f64 = 0.011;
const IDLE_CPU_SHARE: f64 = 0.05;
/// At most this much new `stderr.txt` is read per look (its tail).
const MAX_SCAN: u64 = 64 * 1024;

/// Whether a task with `fraction_done` after `elapsed` seconds is near its end.
pub fn in_endgame(fraction_done: f64, elapsed: f64) -> bool {
    if fraction_done >= 1.0 {
        return true;
    }
    fraction_done > 0.0 && elapsed * (1.0 - fraction_done) / fraction_done < ENDGAME_SECS
}

/// Whether a process whose CPU time grew by `cpu` seconds over `window` is idle.
pub fn idle(cpu: f64, window: Duration) -> bool {
    cpu <= IDLE_CPU_SECS.max(IDLE_CPU_SHARE * window.as_secs_f64())
}

/// A change of a task's finishing mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Nothing changed.
    None,
    /// It called `boinc_finish` and uses no CPU: its CPU is free.
    Began,
    /// It uses CPU again (or stopped running): its CPU is counted again.
    Ended,
}

/// One task's watch.
#[derive(Debug, Clone)]
pub struct FinishWatch {
    /// Bytes of `stderr.txt` already looked at (what earlier runs wrote is skipped).
    stderr_seen: u64,
    /// The finish line was seen.
    called_finish: bool,
    /// Recent CPU samples (time, CPU seconds), oldest first: a new one is compared with the
    /// newest that is at least [`MIN_WINDOW`] old.
    samples: VecDeque<(Instant, f64)>,
    /// When the task was first seen near its end (this run).
    endgame_since: Option<Instant>,
    /// The task is finishing.
    finishing: bool,
    /// When the watch began (the process had just started) and when the finish line was
    /// first seen: the log says how long the app took and how long the look took.
    started: Option<Instant>,
    line_seen: Option<Instant>,
}

impl FinishWatch {
    /// A watch for a task starting now in `slot_dir`.
    pub fn new(slot_dir: &Path, started: Instant) -> FinishWatch {
        FinishWatch {
            stderr_seen: fs::metadata(slot_dir.join(STDERR_FILE)).map_or(0, |m| m.len()),
            called_finish: false,
            samples: VecDeque::new(),
            endgame_since: None,
            finishing: false,
            started: Some(started),
            line_seen: None,
        }
    }

    /// Milliseconds from the process's start to the finish line being seen, and from then to
    /// now.
    fn timings(&self, now: Instant) -> (u128, u128) {
        let ms = |a: Option<Instant>, b: Instant| a.map_or(0, |a| b.duration_since(a).as_millis());
        let seen = self.line_seen.unwrap_or(now);
        (ms(self.started, seen), ms(self.line_seen, now))
    }

    /// Whether the task is finishing (its CPU counts as free).
    pub fn is_finishing(&self) -> bool {
        self.finishing
    }

    /// Whether the daemon should poll this task every [`FAST_POLL_SECS`] now.
    pub fn wants_fast_poll(&self, now: Instant) -> bool {
        !self.finishing
            && self
                .endgame_since
                .is_some_and(|t| now.duration_since(t).as_secs_f64() < ENDGAME_FAST_SECS)
    }

    /// The rule, given what was seen: `running` (computing, not suspended or stopping), near
    /// its end, whether the finish line is there, and the CPU time at `now` (`None`: not
    /// read). Pure apart from the watch's own memory.
    pub fn judge(
        &mut self,
        now: Instant,
        running: bool,
        endgame: bool,
        called_finish: bool,
        cpu: Option<f64>,
    ) -> Change {
        if !running || !(endgame || self.finishing) {
            self.samples.clear();
            self.endgame_since = None;
            return self.set(false);
        }
        self.endgame_since.get_or_insert(now);
        if called_finish && !self.called_finish {
            self.called_finish = true;
            self.line_seen = Some(now);
        }
        let Some(cpu) = cpu else {
            return Change::None;
        };
        let old_enough = self
            .samples
            .iter()
            .rposition(|(at, _)| now.saturating_duration_since(*at) >= MIN_WINDOW);
        self.samples.push_back((now, cpu));
        let Some(k) = old_enough else {
            return Change::None;
        };
        // Samples older than the one compared with are of no further use.
        self.samples.drain(..k);
        let (at, base) = self.samples[0];
        let quiet = idle(cpu - base, now.saturating_duration_since(at));
        self.set(self.called_finish && quiet)
    }

    fn set(&mut self, finishing: bool) -> Change {
        let was = std::mem::replace(&mut self.finishing, finishing);
        match (was, finishing) {
            (false, true) => Change::Began,
            (true, false) => Change::Ended,
            _ => Change::None,
        }
    }

    /// Looks at the task: its state, progress, `stderr.txt` (new bytes only, until the line
    /// is found) and CPU time.
    fn look(&mut self, now: Instant, l: &Live) -> Change {
        let running = l.task.state() == TaskState::Running;
        let u = l.task.usage();
        let endgame = in_endgame(u.fraction_done, u.elapsed_time);
        if !running || !(endgame || self.finishing) {
            return self.judge(now, running, endgame, false, None);
        }
        let called = self.called_finish || self.scan_stderr(&l.task.config().slot_dir);
        // The time its threads were running or waiting to run: on a loaded machine a busy
        // app may get too little CPU in a window to look busy by its CPU time alone. Where
        // the kernel keeps no such figures, its CPU time.
        let pid = l.task.pid();
        let cpu = cpu_demand_seconds(pid).or_else(|| ProcStat::read(pid).map(|s| s.cpu_seconds()));
        self.judge(now, running, endgame, called, cpu)
    }

    /// Whether the finish line is in the part of `stderr.txt` not looked at yet.
    fn scan_stderr(&mut self, slot_dir: &Path) -> bool {
        let path = slot_dir.join(STDERR_FILE);
        let Ok(mut f) = fs::File::open(&path) else {
            return false;
        };
        let len = f.metadata().map_or(0, |m| m.len());
        if len < self.stderr_seen {
            // Truncated or replaced: look at it all.
            self.stderr_seen = 0;
        }
        if len == self.stderr_seen {
            return false;
        }
        // An overlap one byte shorter than the line: a line cut by the previous look is
        // found whole, one found before is not found again.
        let from = self
            .stderr_seen
            .saturating_sub(FINISH_LINE.len() as u64 - 1)
            .max(len.saturating_sub(MAX_SCAN));
        let mut buf = Vec::with_capacity((len - from) as usize);
        if f.seek(SeekFrom::Start(from)).is_err()
            || f.take(len - from).read_to_end(&mut buf).is_err()
        {
            return false;
        }
        self.stderr_seen = len;
        contains(&buf, FINISH_LINE.as_bytes())
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Looks at every live task; returns whether a finishing mark changed (a pass is due) and
/// whether some task wants fast polling.
pub fn watch(live: &mut HashMap<Key, Live>, now: Instant) -> (bool, bool) {
    let mut changed = false;
    let mut fast = false;
    for (key, l) in live.iter_mut() {
        let mut w = std::mem::replace(&mut l.finish, FinishWatch::inert());
        match w.look(now, l) {
            Change::Began => {
                changed = true;
                let (seen, since) = w.timings(now);
                info!(
                    project = %key.0,
                    "task {} is finishing (its app called boinc_finish and uses no CPU): its \
                     CPU goes to the next task while it exits (line seen {seen} ms after the \
                     start, CPU idle {since} ms later)",
                    key.1
                );
            }
            Change::Ended => {
                changed = true;
                info!(
                    project = %key.0,
                    "task {} is no longer finishing: its CPU counts again",
                    key.1
                );
            }
            Change::None => {}
        }
        fast |= w.wants_fast_poll(now);
        l.finish = w;
    }
    (changed, fast)
}

impl FinishWatch {
    /// A watch that sees nothing (a placeholder while one is looked at).
    fn inert() -> FinishWatch {
        FinishWatch {
            stderr_seen: 0,
            called_finish: false,
            samples: VecDeque::new(),
            endgame_since: None,
            finishing: false,
            started: None,
            line_seen: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn near_the_end_by_fraction_done_or_rate() {
        assert!(in_endgame(1.0, 0.0));
        assert!(in_endgame(0.5, 2.0)); // 2 s left
        assert!(!in_endgame(0.5, 10.0)); // 10 s left
        assert!(!in_endgame(0.0, 100.0)); // no progress reported: unknown
    }

    #[test]
    fn idle_means_at_most_a_clock_tick_or_five_percent() {
        assert!(idle(0.0, ms(100)));
        assert!(idle(0.01, ms(100)));
        assert!(!idle(0.03, ms(100)));
        assert!(idle(0.04, ms(1000)));
        assert!(!idle(0.1, ms(1000)));
    }

    #[test]
    fn finishing_needs_the_line_and_a_quiet_window() {
        let t = Instant::now();
        let mut w = FinishWatch::inert();
        // Done by its progress, no line yet, quiet: not finishing.
        assert_eq!(w.judge(t, true, true, false, Some(1.0)), Change::None);
        assert!(w.wants_fast_poll(t));
        // The line appears, but no sample is old enough for a full window yet.
        assert_eq!(
            w.judge(t + ms(50), true, true, true, Some(1.0)),
            Change::None
        );
        // A full quiet window (from the first sample) with the line: finishing.
        assert_eq!(
            w.judge(t + ms(100), true, true, false, Some(1.0)),
            Change::Began
        );
        assert!(w.is_finishing());
        assert!(!w.wants_fast_poll(t + ms(100)));
        // Quiet on: no change.
        assert_eq!(
            w.judge(t + ms(1200), true, true, false, Some(1.005)),
            Change::None
        );
        // It computes again: its CPU counts again.
        assert_eq!(
            w.judge(t + ms(1300), true, true, false, Some(1.1)),
            Change::Ended
        );
        // And quiet again later: finishing again (the line was seen).
        assert_eq!(
            w.judge(t + ms(1400), true, true, false, Some(1.1)),
            Change::Began
        );
        // Stopped running (suspended, told to quit): not finishing.
        assert_eq!(
            w.judge(t + ms(1500), false, true, false, None),
            Change::Ended
        );
    }

    #[test]
    fn a_task_that_computes_after_the_line_keeps_its_cpu() {
        let t = Instant::now();
        let mut w = FinishWatch::inert();
        let mut cpu = 5.0;
        for i in 0..20 {
            cpu += 0.09;
            assert_eq!(
                w.judge(t + ms(100 * i), true, true, true, Some(cpu)),
                Change::None
            );
        }
        assert!(!w.is_finishing());
    }

    #[test]
    fn far_from_its_end_nothing_is_looked_at() {
        let t = Instant::now();
        let mut w = FinishWatch::inert();
        assert_eq!(w.judge(t, true, false, true, Some(0.0)), Change::None);
        assert_eq!(
            w.judge(t + ms(500), true, false, true, Some(0.0)),
            Change::None
        );
        assert!(!w.is_finishing());
        assert!(!w.wants_fast_poll(t + ms(500)));
    }

    #[test]
    fn the_line_is_found_in_new_stderr_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(STDERR_FILE);
        fs::write(&path, "12:00:00 (1): called boinc_finish(0)\n").expect("write");
        // Written by an earlier run: not this run's.
        let mut w = FinishWatch::new(dir.path(), Instant::now());
        assert!(!w.scan_stderr(dir.path()));
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        std::io::Write::write_all(&mut f, b"step 20\n12:00:05 (2): called boinc_").expect("write");
        assert!(!w.scan_stderr(dir.path()));
        // The rest of the line in a later write.
        std::io::Write::write_all(&mut f, b"finish(0)\n").expect("write");
        assert!(w.scan_stderr(dir.path()));
    }
}
