//! Ferrite's scheduling core. Pure code: no I/O, no clock, no tokio, no global RNG.
//!
//! The daemon (or the emulator) owns a [`World`] snapshot: the host (CPUs, coprocessor types
//! with instance counts and peak FLOPS), preferences, time statistics, projects (shares,
//! suspension, no-new-work, `project_max_concurrent`, GPU exclusions), apps
//! (`max_concurrent`), app versions (CPU and coprocessor usage, FLOPS) and jobs (FLOPs
//! estimate, deadline, elapsed time, fraction done, checkpoint, working set, state). Ids of
//! projects, apps and versions are indices into the `World` vectors; job ids are the caller's.
//!
//! API flow (work in progress; the model types in [`model`] are stable):
//! 1. Build a `World` with [`World::new`], [`World::add_project`], [`World::add_app`],
//!    [`World::add_app_version`], [`World::add_job`].
//! 2. Keep one `Scheduler` (accounting state: REC, backoffs, "ran for a deadline" flags) and
//!    call its pass at virtual or real time `now` to get the run list, the fetch decision and
//!    the reports due, each with reasons as data.
//! 3. Tell it about RPC outcomes and arriving jobs; randomness for backoff jitter comes from a
//!    caller-supplied [`Jitter`].

pub mod accounting;
pub mod error;
pub mod estimate;
pub mod fetch;
pub mod model;
pub mod policy;
pub mod rng;
pub mod rrsim;
pub mod runlist;
pub mod scheduler;

pub use error::SchedError;
pub use fetch::{
    FetchBlock, FetchDecision, FetchRule, ReportDue, ReportRule, ResourceRequest, RpcReason,
    WorkRequest,
};
pub use model::*;
pub use policy::{Policy, RecMode};
pub use rng::{FixedJitter, Jitter, SplitMix64};
pub use rrsim::SimResult;
pub use runlist::{PreemptAction, PreemptReason, RunDecision, RunReason, SkipReason};
pub use scheduler::{PassOutput, Scheduler};
