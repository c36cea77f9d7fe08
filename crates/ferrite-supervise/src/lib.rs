//! Running BOINC science apps: slot directories, the app API shared-memory channels, process
//! control (spawn in its own process group, preempt, quit, abort, kill), watching (exit
//! classification, CPU time, working set, checkpoints, limits) and orphan recovery.
//!
//! This crate uses no other workspace crate. The daemon gives it a slot's inputs (file mapping,
//! the `init_data.xml` text, limits) and drives each [`Task`] with `poll(now)`, receiving
//! [`TaskEvent`]s.

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
pub use process::Priority;
pub use record::{end_orphans, find_orphans, Orphan, TaskRecord};
pub use slot::{FileRole, LinkMode, Slot, SlotError, SlotFile, SlotManager};
pub use task::{
    Checkpoint, StartError, Task, TaskConfig, TaskEvent, TaskExit, TaskState, TaskUsage, Timing,
};
