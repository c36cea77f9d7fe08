//! The persistable per-task record, and finding and ending apps orphaned by a previous daemon.
//!
//! The daemon saves a [`TaskRecord`] whenever a task checkpoints or starts. After a restart it
//! calls [`find_orphans`] on the saved records: a recorded PID counts as an orphan only if that
//! process still exists, started at the recorded time (when known) and has its working
//! directory in the recorded slot, so a reused PID is never killed. [`end_orphans`] then stops
//! them (SIGTERM, then SIGKILL to the group) and the task restarts from the recorded checkpoint.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::process::{signal_group, signal_pid};
use crate::procinfo::{proc_cwd, scan_all, ProcStat};
use crate::task::Checkpoint;

/// What the daemon persists about a task between runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The result this task computes.
    pub result_name: String,
    /// Slot number (`slots/N`); the task keeps its slot across restarts.
    pub slot: u32,
    /// The slot directory (to recognise the task's processes by their cwd).
    pub slot_dir: PathBuf,
    /// PID of the running app (its process group), if one runs.
    pub pid: Option<i32>,
    /// Start time of that process in clock ticks after boot (0 = unknown).
    pub pid_starttime: u64,
    /// CPU seconds at the last checkpoint (all episodes).
    pub checkpoint_cpu_time: f64,
    /// Elapsed seconds at the last checkpoint (all episodes).
    pub checkpoint_elapsed_time: f64,
    /// Fraction done at the last checkpoint.
    pub fraction_done: f64,
    /// Peak working set seen, bytes.
    pub peak_working_set: u64,
    /// Peak slot size seen, bytes.
    pub peak_disk_usage: u64,
}

impl TaskRecord {
    /// The checkpoint to resume from (`TaskConfig::resume_from`).
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            cpu_time: self.checkpoint_cpu_time,
            elapsed_time: self.checkpoint_elapsed_time,
            fraction_done: self.fraction_done,
        }
    }
}

/// A still-running app of a previous daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// Result of the task.
    pub result_name: String,
    /// The recorded PID.
    pub pid: i32,
    /// Its process group.
    pub pgid: i32,
    /// Whether the whole group is signalled: only for a group the task's own app leads (never
    /// a group shared with other programs, as apps of the official client are).
    pub whole_group: bool,
}

/// The recorded apps that are still running in their slots.
pub fn find_orphans(records: &[TaskRecord]) -> Vec<Orphan> {
    records.iter().filter_map(orphan_of).collect()
}

fn orphan_of(rec: &TaskRecord) -> Option<Orphan> {
    let pid = rec.pid.filter(|p| *p > 1)?;
    match ProcStat::read(pid).filter(|s| !s.is_dead()) {
        Some(stat) => {
            if rec.pid_starttime != 0 && stat.starttime != rec.pid_starttime {
                return None;
            }
            if !same_dir(&proc_cwd(pid).ok()?, &rec.slot_dir) {
                return None;
            }
            Some(Orphan {
                result_name: rec.result_name.clone(),
                pid,
                pgid: stat.pgrp,
                whole_group: stat.pgrp == pid,
            })
        }
        // The main process is gone, but members of its group may live on: the group ID stays
        // reserved while any member exists, and the member must also work in the slot.
        None => scan_all()
            .into_iter()
            .filter(|s| s.pgrp == pid && !s.is_dead())
            .find(|s| proc_cwd(s.pid).is_ok_and(|cwd| same_dir(&cwd, &rec.slot_dir)))
            .map(|s| Orphan {
                result_name: rec.result_name.clone(),
                pid: s.pid,
                pgid: pid,
                whole_group: true,
            }),
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Ends orphans: SIGCONT + SIGTERM (to the group when the orphan leads one), waits up to
/// `grace` for them to go, then SIGKILL. Blocks for at most about `grace`; meant for startup.
/// Processes already gone count as ended.
pub fn end_orphans(orphans: &[Orphan], grace: Duration) -> io::Result<()> {
    // SAFETY: getpgrp has no preconditions.
    let own_group = unsafe { libc::getpgrp() };
    let send = |o: &Orphan, sig| {
        if o.whole_group && o.pgid > 1 && o.pgid != own_group {
            signal_group(o.pgid, sig)
        } else {
            signal_pid(o.pid, sig)
        }
    };
    for o in orphans {
        send(o, libc::SIGCONT)?;
        send(o, libc::SIGTERM)?;
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && orphans.iter().any(is_running) {
        thread::sleep(Duration::from_millis(20));
    }
    for o in orphans {
        send(o, libc::SIGKILL)?;
    }
    Ok(())
}

fn is_running(o: &Orphan) -> bool {
    ProcStat::read(o.pid).is_some_and(|s| !s.is_dead())
}
