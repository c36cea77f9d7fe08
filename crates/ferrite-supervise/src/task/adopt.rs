//! Taking over an app a previous client started: a daemon killed with SIGKILL leaves its apps
//! running (each leads its own session), and the next daemon supervises them again instead of
//! ending them and computing their results a second time.
//!
//! Such a process is not the new daemon's child: its end is seen in `/proc` (the PID with its
//! start time gone or a zombie), and no wait status comes with it. The end is judged, as the
//! official client judges an app that finished while it was down
//! (`ACTIVE_TASK_SET::check_for_finished_jobs`), by the files in the slot: the status in
//! `boinc_finish_called`, then `boinc_temporary_exit`; with neither, the app ended without
//! finishing and the task restarts from its checkpoint.

use std::io;
use std::time::Instant;

use super::*;

impl Task {
    /// Takes over the app of `cfg`'s task that a previous client started in `cfg.slot_dir`:
    /// `process` is its PID and start time while it still runs, `None` when it has already
    /// ended (the first [`poll`](Self::poll) then reports how, from the files it left).
    /// Nothing in the slot is changed; the channels keep what they hold.
    pub fn adopt(
        cfg: TaskConfig,
        process: Option<(i32, u64)>,
        now: Instant,
    ) -> Result<Task, StartError> {
        let (pid, pid_starttime, shm) = match process {
            Some((pid, starttime)) if pid > 1 => {
                let shm = SharedMem::open(&cfg.slot_dir.join(MMAP_FILE_NAME))?;
                (pid, starttime, Some(shm))
            }
            _ => (0, 0, None),
        };
        tracing::debug!(pid, result = %cfg.result_name, "app adopted");
        let task = Task::running(pid, pid_starttime, shm, cfg, now, true);
        task.send_heartbeat();
        Ok(task)
    }

    /// Whether this task's app was started by a previous client and taken over.
    pub fn is_adopted(&self) -> bool {
        self.adopted
    }

    /// Whether the main process has ended: for a child, a zombie waits to be reaped; for an
    /// adopted app, its PID with its start time is gone or a zombie.
    pub(super) fn has_exited(&self) -> io::Result<bool> {
        if !self.adopted {
            return process::has_exited(self.pid);
        }
        if self.pid <= 1 {
            return Ok(true);
        }
        Ok(ProcStat::read(self.pid).is_none_or(|s| {
            s.is_dead() || (self.pid_starttime != 0 && s.starttime != self.pid_starttime)
        }))
    }

    /// How the ended main process went: a child's wait status and rusage; for an adopted app,
    /// the status `boinc_finish_called` holds (an exit 0 without it, which the classification
    /// turns into a temporary exit or an exit without finishing) and no rusage.
    pub(super) fn reap(&self) -> io::Result<Option<Reaped>> {
        if !self.adopted {
            return process::try_reap(self.pid);
        }
        let status = fs::read_to_string(self.cfg.slot_dir.join(FINISH_FILE))
            .map(|t| crate::exit::FinishFile::parse(&t).status)
            .unwrap_or(0);
        Ok(Some(Reaped {
            exit: process::ProcessExit::Exited(status),
            cpu_time: 0.0,
            max_rss: 0,
        }))
    }
}
