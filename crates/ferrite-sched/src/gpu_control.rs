//! The volunteer's control over each processing resource, for every project at once (no
//! BOINC client has it): GPU instances taken out of use by index or UUID (the daemon
//! resolves UUIDs to instances), and "finish then stop" per resource: no new work is fetched
//! for it and no job that has not started yet starts on it, while the jobs that already ran
//! on it go on to the end. When the last of them ends the resource stays idle.
//!
//! The run list ([`crate::runlist`]) and work fetch ([`crate::fetch`]) read this from
//! [`crate::World::gpu_control`]; their reasons are [`crate::SkipReason::FinishThenStop`]
//! and [`crate::FetchRule::FinishThenStop`] (and the usual exclusion rules for excluded
//! instances).

use crate::model::{Job, JobState, ResourceId, ResourceSet};

/// Per-resource control for every project.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuControl {
    /// Instances not used by any project: one bit mask of device numbers per resource index
    /// (index 0, the CPU, is ignored).
    pub excluded: Vec<u64>,
    /// Resources that finish their started jobs and then stop.
    pub finish_then_stop: ResourceSet,
}

impl GpuControl {
    /// Instances of `r` excluded for every project.
    pub fn excluded_mask(&self, r: ResourceId) -> u64 {
        if r.is_cpu() {
            return 0;
        }
        self.excluded.get(r.index()).copied().unwrap_or(0)
    }

    /// Excludes instance `device` of `r` (devices ≥ 64 are ignored, as in BOINC).
    pub fn exclude(&mut self, r: ResourceId, device: u32) {
        if r.is_cpu() || device >= 64 {
            return;
        }
        if self.excluded.len() <= r.index() {
            self.excluded.resize(r.index() + 1, 0);
        }
        self.excluded[r.index()] |= 1u64 << device;
    }

    /// Whether `r` is set to finish then stop.
    pub fn stops(&self, r: ResourceId) -> bool {
        self.finish_then_stop.contains(r)
    }

    /// Whether `job` may start or go on running on `r`: always, unless `r` finishes then
    /// stops and the job has not run yet.
    pub fn may_run(&self, r: ResourceId, job: &Job) -> bool {
        !self.stops(r) || has_started(job)
    }
}

/// Whether a job has run at all (it is running, was preempted, or has elapsed time).
pub fn has_started(job: &Job) -> bool {
    !matches!(job.state, JobState::Unstarted) || job.elapsed > 0.0
}
