//! Resource limits of a task: pure checks and the slot-size measurement.
//!
//! Elapsed time is bounded by `rsc_fpops_bound / flops` (12 h when that is under 120 s), the
//! slot's disk usage by `rsc_disk_bound`, the smoothed working set by the largest RAM the
//! volunteer allows apps at any time (a task beyond it could never run). Whether a task fits
//! the RAM limit of the moment is the scheduler's decision. Exit codes are the official ones
//! (lib/error_numbers.h).

use std::fs;
use std::io;
use std::path::Path;
use std::time::Duration;

/// The API's crash handler exit code.
pub const EXIT_SIGNAL: i32 = 193;
/// Exit code of an app that obeyed `<abort/>`; also used when the finish file was written but
/// the process hangs.
pub const EXIT_ABORTED_BY_CLIENT: i32 = 194;
/// The slot grew beyond `rsc_disk_bound`.
pub const EXIT_DISK_LIMIT_EXCEEDED: i32 = 196;
/// Elapsed time went beyond `rsc_fpops_bound / flops`.
pub const EXIT_TIME_LIMIT_EXCEEDED: i32 = 197;
/// Working set beyond the memory limit.
pub const EXIT_MEM_LIMIT_EXCEEDED: i32 = 198;
/// `abort_jobs_on_exit`.
pub const EXIT_CLIENT_EXITING: i32 = 199;
/// A started task overdue by more than `max_overdue_days` (cc_config).
pub const EXIT_OVERDUE_EXCEEDED: i32 = 209;
/// Status with no other classification.
pub const EXIT_UNKNOWN: i32 = 204;

/// Below this many seconds a computed elapsed-time bound is replaced by [`DEFAULT_MAX_ELAPSED`].
pub const MIN_MAX_ELAPSED: f64 = 120.0;
/// The fallback elapsed-time bound (12 h).
pub const DEFAULT_MAX_ELAPSED: f64 = 43200.0;
/// Disk check period floor used by the official client (seconds).
pub const MIN_DISK_CHECK_PERIOD: Duration = Duration::from_secs(300);

/// The elapsed-time bound in seconds for a job (`rsc_fpops_bound / flops`, with BOINC's floor).
pub fn max_elapsed_time(rsc_fpops_bound: f64, flops: f64) -> f64 {
    let t = if flops > 0.0 && rsc_fpops_bound > 0.0 {
        rsc_fpops_bound / flops
    } else {
        0.0
    };
    if t.is_finite() && t >= MIN_MAX_ELAPSED {
        t
    } else {
        DEFAULT_MAX_ELAPSED
    }
}

/// A limit a task went beyond, with the exit code and message the task is aborted with.
#[derive(Debug, Clone, PartialEq)]
pub enum LimitExceeded {
    /// Elapsed time beyond the bound.
    ElapsedTime {
        /// Elapsed seconds (all episodes).
        elapsed: f64,
        /// The bound in seconds.
        max: f64,
    },
    /// Slot disk usage beyond `rsc_disk_bound`.
    Disk {
        /// Bytes used by the slot.
        usage: u64,
        /// The bound in bytes.
        bound: u64,
    },
    /// Smoothed working set beyond the largest RAM limit (in use or not).
    Memory {
        /// The smoothed working set, bytes.
        working_set: u64,
        /// The limit, bytes.
        limit: u64,
    },
}

impl LimitExceeded {
    /// The official exit code for this violation.
    pub fn exit_code(&self) -> i32 {
        match self {
            LimitExceeded::ElapsedTime { .. } => EXIT_TIME_LIMIT_EXCEEDED,
            LimitExceeded::Disk { .. } => EXIT_DISK_LIMIT_EXCEEDED,
            LimitExceeded::Memory { .. } => EXIT_MEM_LIMIT_EXCEEDED,
        }
    }

    /// The message the official client reports.
    pub fn message(&self) -> String {
        match self {
            LimitExceeded::ElapsedTime { max, .. } => {
                format!("exceeded elapsed time limit {max:.2}")
            }
            LimitExceeded::Disk { .. } => "Disk usage limit exceeded".to_owned(),
            LimitExceeded::Memory { working_set, limit } => format!(
                "resident set size > client RAM limit: {:.2}MB > {:.2}MB",
                *working_set as f64 / 1e6,
                *limit as f64 / 1e6
            ),
        }
    }
}

/// The limits of one task.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Elapsed-time bound in seconds (see [`max_elapsed_time`]); `None` = unbounded
    /// (non-CPU-intensive and sporadic jobs).
    pub max_elapsed: Option<f64>,
    /// `rsc_disk_bound` in bytes; `None` or 0 = unbounded.
    pub disk_bound: Option<u64>,
    /// How often the slot size is sampled (besides after each checkpoint).
    pub disk_check_interval: Duration,
    /// The largest RAM apps may use at any time, bytes (the larger of the in-use and
    /// not-in-use limits); `None` = unbounded. Changed while the task runs by
    /// `Task::set_ram_limits`.
    pub max_ram: Option<u64>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_elapsed: None,
            disk_bound: None,
            disk_check_interval: MIN_DISK_CHECK_PERIOD,
            max_ram: None,
        }
    }
}

/// Elapsed-time check.
pub fn check_elapsed(elapsed: f64, max: Option<f64>) -> Option<LimitExceeded> {
    let max = max?;
    (elapsed > max).then_some(LimitExceeded::ElapsedTime { elapsed, max })
}

/// Memory check: the smoothed working set against the largest RAM limit.
pub fn check_memory(working_set_smoothed: u64, max_ram: Option<u64>) -> Option<LimitExceeded> {
    let limit = max_ram.filter(|m| *m > 0)?;
    (working_set_smoothed > limit).then_some(LimitExceeded::Memory {
        working_set: working_set_smoothed,
        limit,
    })
}

/// Disk check.
pub fn check_disk(usage: u64, bound: Option<u64>) -> Option<LimitExceeded> {
    let bound = bound.filter(|b| *b > 0)?;
    (usage > bound).then_some(LimitExceeded::Disk { usage, bound })
}

/// Total size in bytes of the regular files under `dir` (symlinks are not followed, so the
/// project files a slot links to do not count). Entries that vanish meanwhile are skipped.
pub fn dir_size(dir: &Path) -> io::Result<u64> {
    let mut total = 0u64;
    for entry in fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            total += dir_size(&entry.path()).unwrap_or(0);
        } else if meta.is_file() {
            total += meta.len();
        }
    }
    Ok(total)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_bound_with_floor() {
        assert_eq!(max_elapsed_time(1e13, 1e9), 1e4);
        assert_eq!(max_elapsed_time(1e10, 1e9), DEFAULT_MAX_ELAPSED);
        assert_eq!(max_elapsed_time(1e13, 0.0), DEFAULT_MAX_ELAPSED);
        assert_eq!(max_elapsed_time(120e9, 1e9), 120.0);
    }

    #[test]
    fn checks() {
        assert_eq!(check_elapsed(10.0, None), None);
        assert_eq!(check_elapsed(10.0, Some(10.0)), None);
        let e = check_elapsed(10.5, Some(10.0)).unwrap();
        assert_eq!(e.exit_code(), 197);
        assert_eq!(check_disk(100, Some(0)), None);
        assert_eq!(check_disk(100, Some(100)), None);
        let d = check_disk(101, Some(100)).unwrap();
        assert_eq!(d.exit_code(), 196);
        assert_eq!(d.message(), "Disk usage limit exceeded");
        assert_eq!(check_memory(5_000_000, None), None);
        assert_eq!(check_memory(5_000_000, Some(0)), None);
        assert_eq!(check_memory(5_000_000, Some(5_000_000)), None);
        let m = check_memory(300_000_000, Some(250_000_000)).unwrap();
        assert_eq!(m.exit_code(), 198);
        assert_eq!(
            m.message(),
            "resident set size > client RAM limit: 300.00MB > 250.00MB"
        );
    }

    #[test]
    fn dir_size_counts_files_not_symlink_targets() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), vec![0u8; 1000]).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b"), vec![0u8; 24]).unwrap();
        std::os::unix::fs::symlink("/usr/bin", dir.path().join("link")).unwrap();
        assert_eq!(dir_size(dir.path()).unwrap(), 1024);
    }
}
