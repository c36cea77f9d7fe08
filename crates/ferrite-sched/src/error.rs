//! Errors of the scheduling core: only snapshot validation can fail; the passes themselves
//! are total functions of a valid [`crate::World`].

use crate::model::{AppId, AppVersionId, JobId, ProjectId, ResourceId};

/// A snapshot refers to something it does not contain.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchedError {
    /// An app, app version or job names a project index out of range.
    #[error("{what} {index} refers to unknown project {project:?}")]
    UnknownProject {
        /// Kind of the referring entry.
        what: &'static str,
        /// Its index (or job id).
        index: usize,
        /// The bad reference.
        project: ProjectId,
    },
    /// An app version names an app out of range.
    #[error("app version {version:?} refers to unknown app {app:?}")]
    UnknownApp {
        /// The app version.
        version: AppVersionId,
        /// The bad reference.
        app: AppId,
    },
    /// An app version uses a resource type the host does not have.
    #[error("app version {version:?} uses unknown resource {resource:?}")]
    UnknownResource {
        /// The app version.
        version: AppVersionId,
        /// The bad reference.
        resource: ResourceId,
    },
    /// A job names an app version out of range.
    #[error("job {job:?} refers to unknown app version {version:?}")]
    UnknownVersion {
        /// The job.
        job: JobId,
        /// The bad reference.
        version: AppVersionId,
    },
    /// A job's project differs from its app version's project.
    #[error("job {job:?} belongs to another project than its app version {version:?}")]
    ProjectMismatch {
        /// The job.
        job: JobId,
        /// Its app version.
        version: AppVersionId,
    },
}
