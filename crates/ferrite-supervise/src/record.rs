//! The persistable per-task record, and finding and ending apps orphaned by a previous daemon.
//!
//! The daemon saves a [`TaskRecord`] whenever a task checkpoints or starts. After a restart it
//! calls [`find_orphans`] on the saved records: a recorded PID counts as an orphan only if that
//! process still exists, started at the recorded time (when known) and has its working
//! directory in the recorded slot, so a reused PID is never killed. [`end_orphans`] then stops
//! them (SIGTERM, then SIGKILL to the group) and the task restarts from the recorded checkpoint.
//!
//! Like the official client, a task also leaves `boinc_task_state.xml` in its slot at every
//! checkpoint ([`TaskStateFile`]), so either client can resume the task from that slot.

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

/// Name of the per-slot checkpoint file the official client writes.
pub const TASK_STATE_FILE: &str = "boinc_task_state.xml";

/// `boinc_task_state.xml`: the checkpoint figures of a slot, in the official client's format.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskStateFile {
    /// Master URL of the task's project (checked against the state file on reading).
    pub project_master_url: String,
    /// Result name (checked likewise).
    pub result_name: String,
    /// CPU seconds at the checkpoint.
    pub checkpoint_cpu_time: f64,
    /// Elapsed seconds at the checkpoint.
    pub checkpoint_elapsed_time: f64,
    /// Fraction done at the checkpoint (written, not read back by the official client).
    pub fraction_done: f64,
    /// Peak working set, bytes.
    pub peak_working_set_size: f64,
    /// Peak swap, bytes.
    pub peak_swap_size: f64,
    /// Peak slot disk usage, bytes.
    pub peak_disk_usage: f64,
}

impl TaskStateFile {
    /// The file text, laid out as the official client writes it.
    pub fn encode(&self) -> String {
        format!(
            "<active_task>\n    <project_master_url>{}</project_master_url>\n    \
             <result_name>{}</result_name>\n    \
             <checkpoint_cpu_time>{:.6}</checkpoint_cpu_time>\n    \
             <checkpoint_elapsed_time>{:.6}</checkpoint_elapsed_time>\n    \
             <fraction_done>{:.6}</fraction_done>\n    \
             <peak_working_set_size>{:.0}</peak_working_set_size>\n    \
             <peak_swap_size>{:.0}</peak_swap_size>\n    \
             <peak_disk_usage>{:.0}</peak_disk_usage>\n</active_task>\n",
            self.project_master_url,
            self.result_name,
            self.checkpoint_cpu_time,
            self.checkpoint_elapsed_time,
            self.fraction_done,
            self.peak_working_set_size,
            self.peak_swap_size,
            self.peak_disk_usage,
        )
    }

    /// Parses the file text; `None` if it is not an `<active_task>` document.
    pub fn parse(text: &str) -> Option<TaskStateFile> {
        if !text.trim_start().starts_with("<active_task>") {
            return None;
        }
        let tag = |name: &str| -> Option<&str> {
            let open = format!("<{name}>");
            let start = text.find(&open)? + open.len();
            let end = start + text[start..].find(&format!("</{name}>"))?;
            Some(text[start..end].trim())
        };
        let num = |name: &str| tag(name).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        Some(TaskStateFile {
            project_master_url: tag("project_master_url")?.to_owned(),
            result_name: tag("result_name")?.to_owned(),
            checkpoint_cpu_time: num("checkpoint_cpu_time"),
            checkpoint_elapsed_time: num("checkpoint_elapsed_time"),
            fraction_done: num("fraction_done"),
            peak_working_set_size: num("peak_working_set_size"),
            peak_swap_size: num("peak_swap_size"),
            peak_disk_usage: num("peak_disk_usage"),
        })
    }

    /// Reads the slot's file if it belongs to this project and result.
    pub fn read(slot_dir: &Path, master_url: &str, result_name: &str) -> Option<TaskStateFile> {
        let text = fs::read_to_string(slot_dir.join(TASK_STATE_FILE)).ok()?;
        TaskStateFile::parse(&text)
            .filter(|t| t.project_master_url == master_url && t.result_name == result_name)
    }

    /// Writes the file into the slot.
    pub fn write(&self, slot_dir: &Path) -> io::Result<()> {
        fs::write(slot_dir.join(TASK_STATE_FILE), self.encode())
    }
}

impl TaskRecord {
    /// Takes a slot's `boinc_task_state.xml` into account the official way: its checkpoint CPU
    /// and elapsed times replace the record's only when larger; its peaks are taken as they are.
    pub fn merge_task_state(&mut self, file: &TaskStateFile) {
        if file.checkpoint_cpu_time > self.checkpoint_cpu_time {
            self.checkpoint_cpu_time = file.checkpoint_cpu_time;
            self.fraction_done = file.fraction_done;
        }
        if file.checkpoint_elapsed_time > self.checkpoint_elapsed_time {
            self.checkpoint_elapsed_time = file.checkpoint_elapsed_time;
        }
        self.peak_working_set = file.peak_working_set_size as u64;
        self.peak_disk_usage = file.peak_disk_usage as u64;
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

/// Processes of this user working in a slot under `slots_dir` that are not in `known`: apps a
/// previous daemon started but was killed before it could record them. Nothing but a client's
/// app works in a slot, so each one is ended like a recorded orphan; otherwise it would go on
/// writing into a slot that a new task gets (an app killed this way once wrote its output
/// into another task's slot). Members of a known orphan's group are left to that orphan.
pub fn find_strays(slots_dir: &Path, known: &[Orphan]) -> Vec<Orphan> {
    let Ok(slots) = fs::canonicalize(slots_dir) else {
        return Vec::new();
    };
    let me = std::process::id();
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    scan_all()
        .into_iter()
        .filter(|s| !s.is_dead() && u32::try_from(s.pid).is_ok_and(|p| p != me))
        .filter(|s| {
            !known
                .iter()
                .any(|o| o.pid == s.pid || (o.whole_group && o.pgid == s.pgrp))
        })
        .filter(|s| {
            use std::os::unix::fs::MetadataExt as _;
            fs::metadata(format!("/proc/{}", s.pid)).is_ok_and(|m| m.uid() == uid)
        })
        .filter_map(|s| {
            let cwd = fs::canonicalize(proc_cwd(s.pid).ok()?).ok()?;
            let slot = cwd.strip_prefix(&slots).ok()?.components().next()?;
            Some(Orphan {
                result_name: format!(
                    "an unrecorded app in slot {}",
                    slot.as_os_str().to_string_lossy()
                ),
                pid: s.pid,
                pgid: s.pgrp,
                whole_group: s.pgrp == s.pid,
            })
        })
        .collect()
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn unrecorded_apps_working_in_a_slot_are_found_and_ended() {
        let dir = tempfile::tempdir().unwrap();
        let slot = dir.path().join("slots").join("3");
        let elsewhere = dir.path().join("projects");
        fs::create_dir_all(&slot).unwrap();
        fs::create_dir_all(&elsewhere).unwrap();
        let spawn = |cwd: &Path| {
            std::process::Command::new("sleep")
                .arg("30")
                .current_dir(cwd)
                .spawn()
                .unwrap()
        };
        let mut stray = spawn(&slot);
        let mut bystander = spawn(&elsewhere);
        let stray_pid = i32::try_from(stray.id()).unwrap();
        let by_pid = i32::try_from(bystander.id()).unwrap();
        // /proc shows the new cwd once the child has run its chdir.
        let deadline = Instant::now() + Duration::from_secs(5);
        let found = loop {
            let found = find_strays(&dir.path().join("slots"), &[]);
            if found.iter().any(|o| o.pid == stray_pid) || Instant::now() > deadline {
                break found;
            }
            thread::sleep(Duration::from_millis(10));
        };
        let mine: Vec<_> = found.iter().filter(|o| o.pid == stray_pid).collect();
        assert_eq!(mine.len(), 1, "{found:?}");
        assert_eq!(mine[0].result_name, "an unrecorded app in slot 3");
        assert!(!found.iter().any(|o| o.pid == by_pid), "{found:?}");
        // A stray already known as a recorded orphan is not listed twice.
        assert!(find_strays(&dir.path().join("slots"), &[mine[0].clone()])
            .iter()
            .all(|o| o.pid != stray_pid));

        end_orphans(&found, Duration::from_secs(2)).unwrap();
        let status = stray.wait().unwrap();
        assert!(!status.success(), "the stray was ended: {status}");
        assert!(
            bystander.try_wait().unwrap().is_none(),
            "the bystander runs on"
        );
        bystander.kill().unwrap();
        bystander.wait().unwrap();
    }

    #[test]
    fn task_state_file_round_trip_and_merge() {
        let t = TaskStateFile {
            project_master_url: "http://127.0.0.1:18080/".into(),
            result_name: "wu_0".into(),
            checkpoint_cpu_time: 12.5,
            checkpoint_elapsed_time: 20.25,
            fraction_done: 0.5,
            peak_working_set_size: 1048576.0,
            peak_swap_size: 0.0,
            peak_disk_usage: 4096.0,
        };
        let text = t.encode();
        assert!(text.starts_with(
            "<active_task>\n    <project_master_url>http://127.0.0.1:18080/</project_master_url>\n"
        ));
        assert!(text.contains("    <checkpoint_cpu_time>12.500000</checkpoint_cpu_time>\n"));
        assert!(text.contains("    <peak_working_set_size>1048576</peak_working_set_size>\n"));
        assert_eq!(TaskStateFile::parse(&text), Some(t.clone()));
        assert_eq!(TaskStateFile::parse("<other/>"), None);

        let dir = tempfile::tempdir().unwrap();
        t.write(dir.path()).unwrap();
        assert!(TaskStateFile::read(dir.path(), "http://other/", "wu_0").is_none());
        let back = TaskStateFile::read(dir.path(), "http://127.0.0.1:18080/", "wu_0").unwrap();
        let mut rec = TaskRecord {
            result_name: "wu_0".into(),
            slot: 0,
            slot_dir: dir.path().to_owned(),
            pid: None,
            pid_starttime: 0,
            checkpoint_cpu_time: 20.0,
            checkpoint_elapsed_time: 10.0,
            fraction_done: 0.7,
            peak_working_set: 0,
            peak_disk_usage: 0,
        };
        rec.merge_task_state(&back);
        assert_eq!(rec.checkpoint_cpu_time, 20.0);
        assert_eq!(rec.fraction_done, 0.7);
        assert_eq!(rec.checkpoint_elapsed_time, 20.25);
        assert_eq!(rec.peak_working_set, 1048576);
    }
}
