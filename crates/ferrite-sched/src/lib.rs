//! Ferrite's scheduling core. Pure code: no I/O, no clock, no tokio, no global RNG.
//!
//! The daemon (or the emulator) owns a [`World`] snapshot: the host (CPUs, coprocessor types
//! with instance counts and peak FLOPS), preferences, time statistics, projects (shares,
//! suspension, no-new-work, `project_max_concurrent`, GPU exclusions), apps
//! (`max_concurrent`), app versions (CPU and coprocessor usage, FLOPS) and jobs (FLOPs
//! estimate, deadline, elapsed time, fraction done, checkpoint, working set, state). Ids of
//! projects, apps and versions are indices into the `World` vectors; job ids are the caller's.
//!
//! # API flow (for the daemon and the emulator)
//!
//! ```
//! use ferrite_sched::*;
//! // 1. Build a snapshot from scenario data.
//! let mut host = Host::cpu_only(4, 1e9, 8e9);
//! host.coprocs.push(Coproc { kind: CoprocKind::Nvidia, count: 1, peak_flops: 5e12 });
//! let mut world = World::new(host);
//! let p = world.add_project(Project::new("https://example.org/", 100.0));
//! let app = world.add_app(App::new(p, "app"));
//! let cpu_v = world.add_app_version(AppVersion::cpu(app, p, 1.0, 1e9));
//! let gpu_v = world.add_app_version(AppVersion::coproc(app, p, ResourceId(1), 1.0, 0.2, 1e11));
//! let now = 1.7e9;
//! world.add_job(Job::new(JobId(1), p, cpu_v, 3.6e12, now, now + 7.0 * 86400.0));
//! world.add_job(Job::new(JobId(2), p, gpu_v, 3.6e14, now, now + 7.0 * 86400.0));
//!
//! // 2. One scheduler for the life of the client; `Policy::rr_only()` is
//! //    `--cpu_sched_rr_only`.
//! let mut sched = Scheduler::new(Policy::default());
//!
//! // 3. A pass at (virtual) time `now`.
//! let out = sched.pass(&world, now);
//! assert_eq!(out.run.run.len(), 2); // both jobs run; `out.run.preempt` says what stops
//! if let Some(req) = &out.fetch.request {
//!     // Send a scheduler RPC to `req.project` asking `req.resources` (req_secs,
//!     // req_instances, estimated_delay) and `req.work_req_seconds`...
//!     let received_per_resource = vec![3, 0]; // ...then report the outcome:
//!     sched.handle_rpc_succeeded(now, req.project, Some(req), &received_per_resource, 0.0,
//!                                &mut SplitMix64::new(1));
//! }
//! // `out.fetch.blocks` lists why nothing (else) is fetched; `out.reports` which projects to
//! // contact to report finished jobs; `out.next_wakeup` when to run the next pass at the latest.
//! ```
//!
//! Project, app and app-version ids must stay the same from one snapshot to the next (the
//! scheduler keeps REC and backoffs per project index): keep a detached project's entry
//! (suspended) or start a new `Scheduler`. Job ids are free-form but must be unique.
//!
//! The passes index the `World` vectors directly: check a snapshot built from outside data
//! once with [`World::validate`] (dangling ids would panic).
//!
//! Between passes the caller applies the decision to its jobs (state `Running` with
//! `run_started_at = now` for newly started ones, `Preempted { in_memory }` for preempted ones,
//! `assigned_instances` from the entry), advances elapsed time, fraction done and checkpoints,
//! then calls [`Scheduler::account`] with the snapshot as it was during the interval (so the
//! jobs that ran are still `Running`) before marking finished jobs `Finished`. Other inputs:
//! [`Scheduler::handle_rpc_failed`], [`Scheduler::handle_jobs_arrived`],
//! [`Scheduler::handle_user_update`]. Disk shares are a separate pure function:
//! [`disk::plan`].
//!
//! Modules: [`model`] (snapshot types), [`estimate`] (runtime estimates), [`rrsim`] (the
//! round-robin simulation), [`accounting`] (REC and priorities), [`runlist`] (run list and
//! enforcement), [`fetch`] (work fetch, backoffs, reporting), [`disk`] (disk shares),
//! [`scheduler`] (the stateful wrapper), [`shares`] (each project's part of each resource),
//! [`suspend`] (whether computing may go on at all), [`thermal`] (the CPU share and GPU hold
//! that keep the sensors under their limits), [`wake`] (when the next pass is due).

pub mod accounting;
pub mod checkpoint_grace;
pub mod describe;
pub mod disk;
pub mod error;
pub mod estimate;
pub mod fetch;
pub mod gpu_control;
pub mod model;
pub mod policy;
pub mod rng;
pub mod rotation;
pub mod rrsim;
pub mod runlist;
pub mod scheduler;
pub mod shares;
pub mod suspend;
pub mod thermal;
pub mod wake;

pub use error::SchedError;
pub use fetch::{
    FetchBlock, FetchDecision, FetchRule, HeldReport, ReportDue, ReportRule, ResourceRequest,
    RpcReason, WorkRequest, IDLE_RETRY_INTERVAL, MAX_REPORT_DELAY, MAX_REPORT_HOLD,
    REPORT_HOLD_MIN_ON_FRAC, REPORT_WAIT_MARGIN, REPORT_WAIT_MIN_QUEUE, REPORT_WAIT_ROOM_JOBS,
    RR_WAIT_ROOM_JOBS,
};
pub use gpu_control::GpuControl;
pub use model::*;
pub use policy::{Policy, RecMode};
pub use rng::{FixedJitter, Jitter, SplitMix64};
pub use rrsim::SimResult;
pub use runlist::{
    PreemptAction, PreemptEntry, PreemptReason, RamLimit, RunDecision, RunEntry, RunReason,
    SkipReason, PART_TIME_ON_FRAC,
};
pub use scheduler::{PassOutput, Scheduler};
