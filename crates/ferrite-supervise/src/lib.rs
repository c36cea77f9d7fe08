//! Running BOINC science apps: slot directories, the app API shared-memory channels, process
//! control (spawn in its own session and process group, preempt, quit, abort, kill), watching
//! (exit classification, CPU time, working set, checkpoints, limits) and orphan recovery.
//!
//! This crate uses no other workspace crate. The daemon gives it a slot's inputs (the file
//! mapping, the `init_data.xml` text, limits) and drives each [`Task`] with `poll(now)`, getting
//! [`TaskEvent`]s back. Nothing here blocks except [`end_orphans`] (meant for startup), and
//! nothing needs an async runtime: call `poll` about once a second (or at
//! [`Task::poll_timeout`]) from the daemon's loop.
//!
//! Typical use:
//! 1. `let slots = SlotManager::new(data_dir, 100 * ncpus);` at startup; `slots.claim(n)` for
//!    each task the state file says owns slot `n`; [`find_orphans`] + [`end_orphans`] on the
//!    saved [`TaskRecord`]s.
//! 2. New task: `let slot = slots.allocate()?; slot.setup(&files, &init_data_xml)?;`
//!    Restart: `slot.write_init_data(&xml)?` (the setup is kept; `boinc_setup_complete`).
//! 3. `Task::start(TaskConfig { slot_dir, program, uses_api, priority, limits, resume_from, .. },
//!    now)`; `Priority::for_job(uses_gpu, avg_ncpus, PriorityConfig)`;
//!    `limits::max_elapsed_time(rsc_fpops_bound, flops)` for `Limits::max_elapsed`.
//! 4. `task.suspend(now)` / `resume` / `quit` / `abort(code)` / `set_network_suspended`;
//!    persist `task.record()` on [`TaskEvent::Checkpoint`].
//! 5. On [`TaskEvent::Exited`]: `outcome.will_restart()` → `slots.park(slot)` and start again
//!    later with `resume_from = record.checkpoint()`; otherwise
//!    `slot.move_copied_outputs(&files)` and `slots.release(slot)`.

pub mod cmdline;
pub mod confine;
pub mod exit;
pub mod limits;
pub mod msg;
pub mod process;
pub mod procinfo;
pub mod queue;
pub mod record;
pub mod shmem;
pub mod slot;
pub mod task;

pub use exit::{ExitOutcome, FinishFile, TemporaryExitFile};
pub use limits::{LimitExceeded, Limits};
pub use process::{Priority, PriorityConfig};
pub use record::{end_orphans, find_orphans, find_strays, Orphan, TaskRecord, TaskStateFile};
pub use slot::{FileRole, LinkMode, Slot, SlotError, SlotFile, SlotManager};
pub use task::{
    Checkpoint, StartError, Task, TaskConfig, TaskEvent, TaskExit, TaskState, TaskUsage, Timing,
};
