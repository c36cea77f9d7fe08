//! Building a `<scheduler_request>` for one project from the client state
//! (`client/cs_scheduler.cpp: make_scheduler_request`).
//!
//! The daemon supplies what this crate cannot know: the account key, the work request the
//! scheduling core computed, the working preferences text, share fractions, disk figures,
//! GPUs, `now`, and the optional logs and trickle-ups it read from files. The result is a
//! typed [`SchedulerRequest`]; `to_xml()` on it gives the body to POST. Building changes
//! nothing; call [`note_rpc_started`] when the POST starts.

use std::collections::HashSet;

use ferrite_proto::client_state::{
    ClientState, Project, ProjectLookup, ProjectState, TaskResult, TimeStats,
};
use ferrite_proto::host::{Coprocs, RscRequest};
use ferrite_proto::sched_request::{
    DiskUsage, InProgressResult, MsgFromHost, OtherResult, SchedulerRequest, StickyFile,
};

/// Work asked of one resource.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RscWork {
    /// Instance-seconds wanted.
    pub req_secs: f64,
    /// Idle instances to fill.
    pub req_instances: f64,
    /// Seconds until an instance would be free (busy-time estimate).
    pub estimated_delay: f64,
}

/// The work request of one RPC, per resource (from the scheduling core).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkRequest {
    /// The CPU.
    pub cpu: RscWork,
    /// GPU types by BOINC resource name (`NVIDIA`, `ATI`, `intel_gpu`, …); a type the
    /// request's `coprocs` lacks is ignored.
    pub gpus: Vec<(String, RscWork)>,
    /// The legacy `work_req_seconds` (CPU `req_secs`; for anonymous platform the maximum
    /// over resources with an app version).
    pub work_req_seconds: f64,
}

/// Everything besides the client state that goes into a request.
#[derive(Debug, Clone, Default)]
pub struct RequestInput {
    /// The project (canonical master URL).
    pub master_url: String,
    /// The account key, from the project's account file.
    pub authenticator: String,
    /// Work wanted.
    pub work: WorkRequest,
    /// The working global preferences (`<global_preferences>…</global_preferences>` as
    /// proto's prefs writer gives them).
    pub working_global_prefs: Option<String>,
    /// Current time (Unix seconds): the `<time_stats><now>`.
    pub now: f64,
    /// This project's share of all projects' shares (1 if total 0).
    pub resource_share_fraction: f64,
    /// Share among runnable projects.
    pub rrs_fraction: f64,
    /// Share among potentially runnable projects.
    pub prrs_fraction: f64,
    /// Disk figures (`None` when cc_config `no_disk_usage`).
    pub disk_usage: Option<DiskUsage>,
    /// The host's GPUs, if any; the GPU work requests are set on them.
    pub coprocs: Option<Coprocs>,
    /// cc_config `max_tasks_reported` (0 = no limit).
    pub max_tasks_reported: usize,
    /// cc_config `allow_multiple_clients`.
    pub allow_multiple_clients: bool,
    /// Account-based sandbox in use.
    pub sandbox: bool,
    /// cc_config `dont_use_docker`.
    pub dont_use_docker: bool,
    /// False when cc_config `suppress_net_info`.
    pub include_net_info: bool,
    /// `<daily_xfer_history>` element, when transfer limits are configured.
    pub daily_xfer_history: Option<String>,
    /// Trickle-up messages read from the project directory.
    pub msgs_from_host: Vec<MsgFromHost>,
    /// `time_stats_log` lines since `send_time_stats_log`, when the project asked.
    pub time_stats_log: Option<String>,
    /// Job-log lines since `send_job_log`, when the project asked.
    pub job_log: Option<String>,
    /// Tasks in progress with their remaining-time estimates; sent only when the project
    /// set `send_full_workload`.
    pub in_progress_results: Vec<InProgressResult>,
    /// `client_opaque.txt`.
    pub client_opaque: Option<String>,
    /// `client_brand.txt`.
    pub client_brand: Option<String>,
    /// Account-manager keywords element.
    pub user_keywords: Option<String>,
    /// cc_config `no_alt_platform`: ask for the main platform's apps only.
    pub no_alt_platforms: bool,
    /// The time statistics in request form ([`crate::stats::TimeSession::request_form`]);
    /// `None` sends the state's with `now`.
    pub time_stats: Option<TimeStats>,
}

/// Why no request could be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The state has no project with this URL.
    #[error("no project {0} in the client state")]
    UnknownProject(String),
}

/// The results a request reports: ready to report and not yet acknowledged, in state
/// order, at most `max` (0 = all).
pub fn results_to_report(ps: &ProjectState, max: usize) -> Vec<&TaskResult> {
    let it = ps
        .results
        .iter()
        .filter(|r| r.ready_to_report && !r.got_server_ack);
    if max == 0 {
        it.collect()
    } else {
        it.take(max).collect()
    }
}

/// Builds the request for `input.master_url`.
pub fn build_request(
    state: &ClientState,
    input: &RequestInput,
) -> Result<SchedulerRequest, RequestError> {
    let ps = state
        .project(&input.master_url)
        .ok_or_else(|| RequestError::UnknownProject(input.master_url.clone()))?;
    let p = &ps.project;
    let v = state.core_client_version;
    let version_text = format!("{}.{}.{}", v.major, v.minor, v.release);

    // Every lookup through an index: a request stays linear in the number of tasks.
    let look = ProjectLookup::new(ps);
    let reported = results_to_report(ps, input.max_tasks_reported);
    let reported_names: HashSet<&str> = reported.iter().map(|r| r.name.as_str()).collect();
    let results = reported
        .iter()
        .map(|r| report_form(&look, r, &version_text))
        .collect();

    let app_versions = ps.app_versions.clone();
    let other_results = ps
        .results
        .iter()
        .filter(|r| !reported_names.contains(r.name.as_str()))
        .filter_map(|r| {
            let index = look.app_version_index_of(r)?;
            let av = ps.app_versions.get(index)?;
            Some(OtherResult {
                name: r.name.clone(),
                app_version: i32::try_from(index).unwrap_or(i32::MAX),
                plan_class: av.plan_class.clone(),
            })
        })
        .collect();

    let (platform_name, alt_platforms) = if p.anonymous_platform {
        ("anonymous".to_owned(), Vec::new())
    } else {
        let alt = if input.no_alt_platforms {
            Vec::new()
        } else {
            state.alt_platforms.clone()
        };
        (state.platform_name.clone(), alt)
    };

    let time_stats = input.time_stats.clone().unwrap_or_else(|| TimeStats {
        now: input.now,
        ..state.time_stats.clone()
    });

    let mut req = SchedulerRequest {
        authenticator: input.authenticator.trim().to_owned(),
        hostid: p.hostid,
        rpc_seqno: if p.hostid == 0 { 0 } else { p.rpc_seqno },
        core_client_version: v,
        resource_share_fraction: input.resource_share_fraction,
        rrs_fraction: input.rrs_fraction,
        prrs_fraction: input.prrs_fraction,
        duration_correction_factor: if p.dont_use_dcf {
            1.0
        } else {
            p.duration_correction_factor
        },
        allow_multiple_clients: input.allow_multiple_clients,
        sandbox: input.sandbox,
        dont_send_work: p.dont_request_more_work,
        dont_use_docker: input.dont_use_docker,
        work_req_seconds: input.work.work_req_seconds,
        cpu_req_secs: input.work.cpu.req_secs,
        cpu_req_instances: input.work.cpu.req_instances,
        estimated_delay: input.work.cpu.estimated_delay,
        client_cap_plan_class: true,
        platform_name,
        alt_platforms,
        code_sign_key: p.code_sign_key.clone().filter(|k| !k.trim().is_empty()),
        working_global_preferences: input.working_global_prefs.clone(),
        cross_project_id: cross_project_id(state, p),
        time_stats,
        net_stats: state.net_stats.clone(),
        daily_xfer_history: input.daily_xfer_history.clone(),
        host_info: state.host_info.clone(),
        include_net_info: input.include_net_info,
        disk_usage: input.disk_usage.clone(),
        coprocs: input.coprocs.clone(),
        results,
        msgs_from_host: input.msgs_from_host.clone(),
        sticky_files: ps
            .files
            .iter()
            .filter(|f| f.sticky)
            .map(|f| StickyFile {
                name: f.name.clone(),
                nbytes: f.nbytes,
                status: f.status,
            })
            .collect(),
        time_stats_log: input
            .time_stats_log
            .clone()
            .filter(|_| p.send_time_stats_log != 0),
        job_log: input.job_log.clone().filter(|_| p.send_job_log != 0),
        app_versions,
        other_results,
        in_progress_results: p
            .send_full_workload
            .then(|| input.in_progress_results.clone()),
        client_opaque: input.client_opaque.clone(),
        client_brand: input.client_brand.clone(),
        user_keywords: input.user_keywords.clone(),
        extra: Vec::new(),
    };
    for (rsc, w) in &input.work.gpus {
        req.set_gpu_request(
            rsc,
            RscRequest {
                req_secs: w.req_secs,
                req_instances: w.req_instances,
                estimated_delay: w.estimated_delay,
            },
        );
    }
    Ok(req)
}

/// The oldest CPID the client knows for the project's e-mail hash.
fn cross_project_id(state: &ClientState, p: &Project) -> Option<String> {
    if p.email_hash.is_empty() {
        return None;
    }
    state
        .user_cpids
        .iter()
        .filter(|u| u.email_hash == p.email_hash && !u.cpid.is_empty())
        .min_by(|a, b| a.time.total_cmp(&b.time))
        .map(|u| u.cpid.clone())
        .or_else(|| (!p.cross_project_id.is_empty()).then(|| p.cross_project_id.clone()))
}

/// A result as reported: its uploaded output files' descriptions attached.
fn report_form(ps: &ProjectLookup<'_>, r: &TaskResult, version: &str) -> TaskResult {
    let mut out = r.clone();
    out.core_client_version = Some(version.to_owned());
    if out.app_version_num.is_none() {
        out.app_version_num = Some(
            ps.app_version_of(r)
                .map_or(r.version_num, |a| a.version_num),
        );
    }
    out.uploaded_files = r
        .output_files
        .iter()
        .filter_map(|fr| ps.file(&fr.file_name))
        .filter(|f| f.uploaded)
        .cloned()
        .collect();
    out
}

/// Bookkeeping when the POST starts: the sequence number sent was the pre-increment value
/// (0 while the host has no id).
pub fn note_rpc_started(project: &mut Project) {
    if project.hostid == 0 {
        project.rpc_seqno = 0;
    }
    project.rpc_seqno = project.rpc_seqno.saturating_add(1);
    project.scheduler_rpc_in_progress = true;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ferrite_proto::client_state::{ProjectState, UserCpid};

    fn state() -> ClientState {
        let mut ps = ProjectState::default();
        ps.project.master_url = "http://p/".into();
        ps.project.hostid = 0;
        ps.project.rpc_seqno = 9;
        ps.project.email_hash = "eh".into();
        ps.project.cross_project_id = "mine".into();
        ps.project.anonymous_platform = true;
        for (n, ready, ack) in [("a", true, false), ("b", true, true), ("c", true, false)] {
            ps.results.push(TaskResult {
                name: n.into(),
                ready_to_report: ready,
                got_server_ack: ack,
                ..TaskResult::default()
            });
        }
        ClientState {
            projects: vec![ps],
            platform_name: "x86_64-pc-linux-gnu".into(),
            alt_platforms: vec!["i686-pc-linux-gnu".into()],
            user_cpids: vec![
                UserCpid {
                    email_hash: "eh".into(),
                    cpid: "newer".into(),
                    time: 20.0,
                },
                UserCpid {
                    email_hash: "eh".into(),
                    cpid: "oldest".into(),
                    time: 10.0,
                },
            ],
            ..ClientState::default()
        }
    }

    #[test]
    fn hostid_zero_sends_seqno_zero_and_anonymous_platform_has_no_alternatives() {
        let s = state();
        let input = RequestInput {
            master_url: "http://P/".into(),
            ..RequestInput::default()
        };
        let r = build_request(&s, &input).unwrap();
        assert_eq!((r.hostid, r.rpc_seqno), (0, 0));
        assert_eq!(r.platform_name, "anonymous");
        assert!(r.alt_platforms.is_empty());
        assert_eq!(r.cross_project_id.as_deref(), Some("oldest"));
        assert!(r.in_progress_results.is_none());
    }

    #[test]
    fn acked_results_are_not_reported_and_the_limit_holds() {
        let s = state();
        let names = |max| -> Vec<String> {
            results_to_report(&s.projects[0], max)
                .iter()
                .map(|r| r.name.clone())
                .collect()
        };
        assert_eq!(names(0), ["a", "c"]);
        assert_eq!(names(1), ["a"]);
        assert_eq!(
            build_request(
                &s,
                &RequestInput {
                    master_url: "http://x/".into(),
                    ..RequestInput::default()
                }
            ),
            Err(RequestError::UnknownProject("http://x/".into()))
        );
    }

    #[test]
    fn seqno_starts_at_one_after_a_request_without_hostid() {
        let mut p = Project {
            rpc_seqno: 7,
            ..Project::default()
        };
        note_rpc_started(&mut p);
        assert_eq!(p.rpc_seqno, 1);
        p.hostid = 3;
        note_rpc_started(&mut p);
        assert_eq!(p.rpc_seqno, 2);
    }
}
