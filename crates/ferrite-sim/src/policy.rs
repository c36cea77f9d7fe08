//! The seam between the emulator and the client it scores: the decisions a client makes
//! (which jobs run, when to contact which project and what to ask for, which jobs to give up
//! on) and the outcomes it is told about. Every decision is taken by Ferrite's scheduling core
//! through [`crate::core::CorePolicy`]; the emulator holds no scheduling logic of its own.

use crate::model::Job;
use crate::server::WorkRequest;

/// What the emulator needs from a client policy; [`crate::core::CorePolicy`] (Ferrite's
/// scheduling core, `ferrite-sched`) implements it.
pub trait ClientPolicy: std::fmt::Debug {
    /// The step ending at `now` lasted `dt`; `used[p]` peak FLOPs project p used in it. Called
    /// before the step's progress is applied (`jobs` still shows what ran during the step).
    fn account(&mut self, now: f64, dt: f64, used: &[f64], jobs: &[Job]);
    /// Gives up on jobs that can no longer meet their deadline; returns how many.
    fn abort_doomed(&mut self, now: f64, jobs: &mut [Job]) -> usize;
    /// Indices (into `jobs`) of the jobs to run now.
    fn schedule(&mut self, now: f64, jobs: &[Job]) -> Vec<usize>;
    /// The next RPC to make, if any; `contacted[p]` marks projects already contacted in this
    /// step.
    fn next_rpc(&mut self, now: f64, jobs: &[Job], contacted: &[bool]) -> Option<RpcPlan>;
    /// An RPC to `p` failed (project down).
    fn rpc_failed(&mut self, now: f64, p: usize);
    /// An RPC to `p` carrying `req` succeeded and brought `new_jobs`.
    fn handle_reply(&mut self, now: f64, p: usize, req: &WorkRequest, new_jobs: &[Job]);
}

/// A planned scheduler RPC.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcPlan {
    /// Project to contact.
    pub project: usize,
    /// Work asked for (may be empty: report only).
    pub request: WorkRequest,
}
