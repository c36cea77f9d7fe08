//! What the project remembers: jobs and their results, accounts, hosts and the counters
//! `/status` shows. Kept in memory and mirrored to `DATA/state.json` after every change, so a
//! restarted server carries on where it stopped.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Where a job's (single) result is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResultStatus {
    /// Not sent to any host yet.
    Unsent,
    /// Sent; not reported.
    InProgress,
    /// Reported by the host it was sent to.
    Reported,
}

/// One job: a workunit and its one result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Workunit name.
    pub wu_name: String,
    /// Result name (`<wu_name>_0`).
    pub result_name: String,
    /// App the job belongs to (a version is picked when it is sent).
    pub app_name: String,
    /// Where the result is.
    pub status: ResultStatus,
    /// Host it was sent to (0 = none).
    pub hostid: i32,
    /// Plan class of the version it was sent with.
    pub plan_class: String,
    /// Unix time it was sent.
    pub sent_time: f64,
    /// Unix time it is due.
    pub report_deadline: f64,
    /// The reported exit status, once reported.
    pub exit_status: Option<i32>,
    /// The reported client state (5 = files uploaded, 3 = compute error, …).
    pub client_state: Option<i32>,
    /// Times it was reported (more than one means duplicates).
    pub reports: u32,
    /// Times it was sent again because its host's request no longer listed it.
    #[serde(default)]
    pub resends: u32,
    /// Unix time of its first report.
    #[serde(default)]
    pub reported_time: Option<f64>,
    /// Output files received completely.
    pub uploaded_files: Vec<String>,
    /// The reported `<stderr_out>` text (CDATA unwrapped), once reported.
    #[serde(default)]
    pub stderr_out: Option<String>,
}

/// An account created through `create_account.php`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Account {
    /// `md5(password + lowercase(email))`.
    pub passwd_hash: String,
    /// User name given at creation.
    pub user_name: String,
}

/// A host record (one per client installation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// The id sent in `<hostid>`.
    pub id: i32,
    /// Highest `rpc_seqno` seen: a lower one means a copied client, which gets a new host.
    pub rpc_seqno: i32,
    /// Unix time the record was made.
    pub create_time: f64,
    /// The client's `host_cpid`: a request without a host id but with this CPID (a client
    /// that lost the reply giving it its id) gets this record again.
    #[serde(default)]
    pub host_cpid: String,
}

/// Counters shown by `/status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Jobs made.
    pub jobs_made: u64,
    /// Results sent to hosts.
    pub results_sent: u64,
    /// Output files received completely.
    pub uploads_received: u64,
    /// Results reported (first report of each).
    pub results_reported: u64,
    /// Reports of a result already reported (acknowledged again, not counted again).
    pub duplicate_reports: u64,
    /// Reports of a result this project never sent to the reporting host (unknown name,
    /// never sent, or sent to another host): acknowledged so the client drops it, not counted.
    #[serde(default)]
    pub unknown_reports: u64,
    /// In-progress results a host's request no longer listed (the client lost them).
    #[serde(default)]
    pub lost_results: u64,
    /// Lost results sent again to their host.
    #[serde(default)]
    pub results_resent: u64,
    /// Lost results not sent again (past their deadline, or their app version is gone): put
    /// back to unsent, so that they are sent as new work.
    #[serde(default)]
    pub lost_results_reissued: u64,
    /// Scheduler requests handled.
    pub scheduler_rpcs: u64,
    /// Fetches of the news feed.
    #[serde(default)]
    pub feed_fetches: u64,
    /// Fetches of the project list.
    #[serde(default)]
    pub project_list_fetches: u64,
}

/// Everything the project keeps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Jobs in creation order.
    pub jobs: Vec<Job>,
    /// Accounts by lower-cased email.
    pub accounts: BTreeMap<String, Account>,
    /// Host records.
    pub hosts: Vec<Host>,
    /// `/status` counters.
    pub counters: Counters,
}

/// A state file that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// File system error.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// Not a state file.
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: String,
        /// What went wrong.
        source: serde_json::Error,
    },
}

impl State {
    /// Reads `path`; `Ok(None)` when it does not exist.
    pub fn load(path: &Path) -> Result<Option<State>, StateError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(StateError::Io {
                    path: path.display().to_string(),
                    source,
                })
            }
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| StateError::Json {
                path: path.display().to_string(),
                source,
            })
    }

    /// Writes `path` atomically (temporary file, then rename).
    pub fn save(&self, path: &Path) -> Result<(), StateError> {
        let io = |source| StateError::Io {
            path: path.display().to_string(),
            source,
        };
        let text = serde_json::to_string_pretty(self).map_err(|source| StateError::Json {
            path: path.display().to_string(),
            source,
        })?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Whether any job still needs its input (not yet reported).
    pub fn work_outstanding(&self) -> bool {
        self.jobs.iter().any(|j| j.status != ResultStatus::Reported)
    }

    /// The job whose result is `name`.
    pub fn job_by_result(&mut self, name: &str) -> Option<&mut Job> {
        self.jobs.iter_mut().find(|j| j.result_name == name)
    }
}
