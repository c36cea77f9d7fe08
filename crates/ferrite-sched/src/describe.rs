//! Plain-language wording of the core's decisions, for `ferrite explain` and the event log.
//! Each text starts with the rule's name (as the troubleshooting guide lists them), then says
//! what it means in this case.

use crate::fetch::{FetchRule, HeldReport, RpcReason};
use crate::model::Time;
use crate::runlist::{PreemptAction, PreemptReason, RunReason, SkipReason};

/// A duration as a person reads it: "45 s", "12 min", "3.5 h", "2.0 days".
pub fn duration(secs: f64) -> String {
    let s = secs.max(0.0);
    if s < 90.0 {
        format!("{s:.0} s")
    } else if s < 90.0 * 60.0 {
        format!("{:.0} min", s / 60.0)
    } else if s < 48.0 * 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.1} days", s / 86400.0)
    }
}

/// Bytes as BOINC's messages count megabytes (2^20 bytes): "1536 MB".
pub fn megabytes(bytes: f64) -> String {
    format!("{:.0} MB", bytes.max(0.0) / 1_048_576.0)
}

/// A percentage preference without needless decimals: "50", "12.5".
fn percent(pct: f64) -> String {
    if (pct - pct.round()).abs() < 1e-9 {
        format!("{pct:.0}")
    } else {
        format!("{pct}")
    }
}

impl RunReason {
    /// Why the job runs.
    pub fn describe(self) -> String {
        match self {
            RunReason::Deadline => {
                "Deadline: it would miss its deadline otherwise (or the client runs less than half \
                 the time), so it runs earliest-deadline-first"
            }
            RunReason::TimeSlice => "TimeSlice: it runs and its time slice is not over",
            RunReason::Priority => {
                "Priority: its project's turn by resource share and recent credit"
            }
            RunReason::Finishing => {
                "Finishing: its app called boinc_finish and only waits to exit, using no CPU; \
                 its CPUs are counted free so the next task starts now (its slot and memory \
                 stay taken until it exits)"
            }
        }
        .to_owned()
    }
}

impl SkipReason {
    /// Why the job waits although it could run.
    pub fn describe(self) -> String {
        match self {
            SkipReason::CpusCommitted => "CpusCommitted: every usable CPU is taken (for a multi-thread job: fewer are free than it uses)",
            SkipReason::NoCoprocInstance => "NoCoprocInstance: no GPU it may use has room for it (busy, or excluded for it in cc_config.xml or for every project)",
            SkipReason::AppMaxConcurrent => {
                "AppMaxConcurrent: its app's max_concurrent (app_config.xml) is reached"
            }
            SkipReason::ProjectMaxConcurrent => {
                "ProjectMaxConcurrent: its project's project_max_concurrent (app_config.xml) is reached"
            }
            SkipReason::Memory { need, left, limit } => {
                let pref = if limit.user_active {
                    "ram_max_used_busy_pct"
                } else {
                    "ram_max_used_idle_pct"
                };
                return format!(
                    "Memory: waiting for memory: needs {}, {} left under {pref} {} %",
                    megabytes(need),
                    megabytes(left),
                    percent(limit.pct)
                );
            }
            SkipReason::Swap { need, left, pct } => {
                return format!(
                    "Swap: waiting for swap space: needs {}, {} left under vm_max_used_pct {} %",
                    megabytes(need),
                    megabytes(left),
                    percent(pct)
                );
            }
            SkipReason::FinishThenStop => {
                "FinishThenStop: its resource is set to finish its started tasks and then stop; \
                 this one has not started"
            }
        }
        .to_owned()
    }
}

impl PreemptReason {
    /// Why a running job stops, and how.
    pub fn describe(self, action: PreemptAction) -> String {
        let how = match action {
            PreemptAction::KeepInMemory => "suspended in memory",
            PreemptAction::Quit => "quit, restarts from its checkpoint",
        };
        let why = match self {
            PreemptReason::LowerPriority => {
                "LowerPriority: its time slice is over and a project with a better claim runs"
                    .to_owned()
            }
            PreemptReason::DeadlineJob => {
                "DeadlineJob: a task that would miss its deadline needs its place".to_owned()
            }
            PreemptReason::Skipped(s) => s.describe(),
            PreemptReason::ReleaseMemory => {
                "ReleaseMemory: not running, and leave_apps_in_memory is off".to_owned()
            }
        };
        format!("{why} ({how})")
    }
}

impl RpcReason {
    /// Why work is requested.
    pub fn describe(self) -> &'static str {
        match self {
            RpcReason::Init => "first contact: one second of work per resource",
            RpcReason::NeedWork => "the work buffer is below its minimum",
        }
    }
}

impl HeldReport {
    /// Why these finished tasks are not reported yet, at time `now`.
    pub fn describe(&self, now: Time) -> String {
        format!(
            "WaitsForNextRpc: reported now, it would bring the project's scheduler little or no \
             work; it goes with the project's next work request, at the latest in {}",
            duration(self.until - now)
        )
    }
}

impl FetchRule {
    /// Why the project is not asked for this resource, at time `now`.
    pub fn describe(&self, now: Time) -> String {
        let left = |until: Time| duration(until - now);
        match *self {
            FetchRule::BufferFull {
                saturated,
                min_buffer,
            } => format!(
                "BufferFull: busy for {} ahead, the minimum buffer is {}",
                duration(saturated),
                duration(min_buffer)
            ),
            FetchRule::Suspended => "Suspended: the project is suspended".to_owned(),
            FetchRule::NoNewWork => "NoNewWork: the project is set to no new tasks".to_owned(),
            FetchRule::RpcBackoff { until } => format!(
                "RpcBackoff: the project's scheduler failed or asked for a delay; next try in {}",
                left(until)
            ),
            FetchRule::TooManyJobs => {
                "TooManyJobs: the project has over 1000 runnable tasks here".to_owned()
            }
            FetchRule::UploadDeferral { until } => format!(
                "UploadDeferral: an upload is under way; the request rides on its report (at most {})",
                left(until)
            ),
            FetchRule::NoApps => {
                "NoApps: the project has no app for it, or its preferences turn it off".to_owned()
            }
            FetchRule::AllInstancesExcluded => {
                "AllInstancesExcluded: every device of this type is excluded for the project"
                    .to_owned()
            }
            FetchRule::ResourceBackoff { until } => format!(
                "ResourceBackoff: the last requests got no work; next try in {}",
                left(until)
            ),
            FetchRule::MaxConcurrent => {
                "MaxConcurrent: app_config.xml limits mean it could not use more".to_owned()
            }
            FetchRule::ZeroShareNotIdle => {
                "ZeroShareNotIdle: resource share 0, asked only when a device idles".to_owned()
            }
            FetchRule::LowerPriority => {
                "LowerPriority: a project with a better claim is asked first".to_owned()
            }
            FetchRule::WaitsForReport { until } => format!(
                "WaitsForReport: only this project is short of work; the request rides on the \
                 report of its task finishing in {}",
                left(until)
            ),
            FetchRule::MinimalWorkDone => "MinimalWorkDone: fetch_minimal_work is set and this \
                 client already had or asked for its one job per device"
                .to_owned(),
            FetchRule::FinishThenStop => "FinishThenStop: the resource is set to finish its \
                 started tasks and then stop; no new work is asked for it"
                .to_owned(),
            FetchRule::DiskFull => {
                "DiskFull: Ferrite uses all the disk space the preferences allow".to_owned()
            }
            FetchRule::DeadlineLimit {
                start_delay,
                latest_start,
            } => format!(
                "DeadlineLimit: a new task would start in {} but must start within {} to meet its deadline",
                duration(start_delay),
                duration(latest_start)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(42.0), "42 s");
        assert_eq!(duration(600.0), "10 min");
        assert_eq!(duration(5400.0), "1.5 h");
        assert_eq!(duration(3.0 * 86400.0), "3.0 days");
        assert_eq!(duration(-5.0), "0 s");
    }

    #[test]
    fn texts_name_the_rule_and_the_case() {
        let r = FetchRule::ResourceBackoff {
            until: 1000.0 + 1200.0,
        }
        .describe(1000.0);
        assert_eq!(
            r,
            "ResourceBackoff: the last requests got no work; next try in 20 min"
        );
        let b = FetchRule::BufferFull {
            saturated: 86400.0,
            min_buffer: 8640.0,
        }
        .describe(0.0);
        assert!(b.starts_with("BufferFull: busy for 24.0 h ahead"), "{b}");
        let w = FetchRule::WaitsForReport { until: 1600.0 }.describe(1000.0);
        assert!(
            w.starts_with("WaitsForReport: ") && w.ends_with("finishing in 10 min"),
            "{w}"
        );
        let h = HeldReport {
            project: crate::model::ProjectId(0),
            jobs: Vec::new(),
            until: 1080.0,
        }
        .describe(1000.0);
        assert!(
            h.starts_with("WaitsForNextRpc: ") && h.ends_with("at the latest in 80 s"),
            "{h}"
        );
        let mem = SkipReason::Memory {
            need: 3072.0 * 1_048_576.0,
            left: 1024.0 * 1_048_576.0,
            limit: crate::runlist::RamLimit {
                user_active: true,
                pct: 50.0,
            },
        };
        let p = PreemptReason::Skipped(mem).describe(PreemptAction::Quit);
        assert!(
            p.starts_with(
                "Memory: waiting for memory: needs 3072 MB, 1024 MB left under \
                 ram_max_used_busy_pct 50 %"
            ) && p.ends_with("(quit, restarts from its checkpoint)"),
            "{p}"
        );
        let swap = SkipReason::Swap {
            need: 2048.0 * 1_048_576.0,
            left: 0.0,
            pct: 12.5,
        }
        .describe();
        assert_eq!(
            swap,
            "Swap: waiting for swap space: needs 2048 MB, 0 MB left under vm_max_used_pct 12.5 %"
        );
        assert!(RunReason::Deadline.describe().starts_with("Deadline: "));
    }
}
