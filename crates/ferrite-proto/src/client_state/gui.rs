//! The GUI RPC forms of the state objects (`get_state`, `get_results`,
//! `get_project_status`, `get_simple_gui_info`): `<project>` as `PROJECT::write_state(gui)`
//! writes it, `<result>` as `RESULT::write_gui` and `<active_task>` as `ACTIVE_TASK::write_gui`
//! do, in the element order of the official 7.20 client. They carry run-time facts the state
//! file lacks (estimates, scheduler state, the project directory), which the caller supplies.

use super::objects::TaskResult;
use super::project::{Project, RpcReason};
use super::stats::ActiveTask;
use crate::xml::XmlWriter;

/// Run-time facts about a project that only the running client knows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProjectGuiExtra {
    /// Absolute path of the project directory.
    pub project_dir: String,
    /// Scheduling priority (negative: the project got more than its share).
    pub sched_priority: f64,
    /// When the project files were last downloaded (Unix time; 0 = never).
    pub project_files_downloaded_time: f64,
    /// Seconds until downloads may be retried (0 = no backoff).
    pub download_backoff: f64,
    /// Seconds until uploads may be retried (0 = no backoff).
    pub upload_backoff: f64,
}

/// Writes `<project>` in the GUI form.
pub fn write_project(p: &Project, extra: &ProjectGuiExtra, w: &mut XmlWriter) {
    w.open("project")
        .text("master_url", &p.master_url)
        .text("project_name", &p.project_name)
        .text("symstore", &p.symstore)
        .text("user_name", &p.user_name)
        .text("team_name", &p.team_name)
        .text("host_venue", &p.host_venue)
        .text("email_hash", &p.email_hash)
        .text("cross_project_id", &p.cross_project_id)
        .text("external_cpid", &p.external_cpid)
        .f64("cpid_time", p.cpid_time)
        .f64("user_total_credit", p.user_total_credit)
        .f64("user_expavg_credit", p.user_expavg_credit)
        .f64("user_create_time", p.user_create_time)
        .num("rpc_seqno", p.rpc_seqno)
        .num("userid", p.userid)
        .num("teamid", p.teamid)
        .num("hostid", p.hostid)
        .f64("host_total_credit", p.host_total_credit)
        .f64("host_expavg_credit", p.host_expavg_credit)
        .f64("host_create_time", p.host_create_time)
        .num("nrpc_failures", p.nrpc_failures)
        .num("master_fetch_failures", p.master_fetch_failures)
        .f64("min_rpc_time", p.min_rpc_time)
        .f64("next_rpc_time", p.next_rpc_time)
        .f64("rec", p.rec)
        .f64("rec_time", p.rec_time)
        .f64("resource_share", p.resource_share)
        .f64("disk_usage", p.disk_usage)
        .f64("disk_share", p.disk_share)
        .f64("desired_disk_usage", p.desired_disk_usage)
        .f64("duration_correction_factor", p.duration_correction_factor)
        .num(
            "sched_rpc_pending",
            p.sched_rpc_pending.map_or(0, RpcReason::as_i32),
        )
        .num("send_time_stats_log", p.send_time_stats_log)
        .num("send_job_log", p.send_job_log)
        .num("njobs_success", p.njobs_success)
        .num("njobs_error", p.njobs_error)
        .f64("elapsed_time", p.elapsed_time)
        .f64("last_rpc_time", p.last_rpc_time)
        .flag("anonymous_platform", p.anonymous_platform)
        .flag("master_url_fetch_pending", p.master_url_fetch_pending)
        .flag("trickle_up_pending", p.trickle_up_pending)
        .flag("send_full_workload", p.send_full_workload)
        .flag("dont_use_dcf", p.dont_use_dcf)
        .flag("non_cpu_intensive", p.non_cpu_intensive)
        .flag("strict_memory_bound", p.strict_memory_bound)
        .flag("suspended_via_gui", p.suspended_via_gui)
        .flag("dont_request_more_work", p.dont_request_more_work)
        .flag("detach_when_done", p.detach_when_done)
        .flag("ended", p.ended)
        .flag("attached_via_acct_mgr", p.attached_via_acct_mgr)
        .flag("scheduler_rpc_in_progress", p.scheduler_rpc_in_progress)
        .flag("use_symlinks", p.use_symlinks);
    for b in &p.rsc_backoff {
        w.open("rsc_backoff_time")
            .text("name", &b.name)
            .f64("value", b.backoff_time)
            .close("rsc_backoff_time");
        w.open("rsc_backoff_interval")
            .text("name", &b.name)
            .f64("value", b.backoff_interval)
            .close("rsc_backoff_interval");
    }
    for (tag, list) in [
        ("no_rsc_ams", &p.no_rsc_ams),
        ("no_rsc_apps", &p.no_rsc_apps),
        ("no_rsc_pref", &p.no_rsc_pref),
    ] {
        for n in list {
            w.text(tag, n);
        }
    }
    if let Some(s) = p.ams_resource_share_new {
        w.f64("ams_resource_share_new", s);
    }
    for e in p.extra.iter().filter(|e| e.starts_with("<gui_urls")) {
        w.raw(e);
    }
    w.f64("sched_priority", extra.sched_priority).f64(
        "project_files_downloaded_time",
        extra.project_files_downloaded_time,
    );
    if extra.download_backoff > 0.0 {
        w.f64("download_backoff", extra.download_backoff);
    }
    if extra.upload_backoff > 0.0 {
        w.f64("upload_backoff", extra.upload_backoff);
    }
    w.text("project_dir", &extra.project_dir);
    w.close("project");
}

/// What the running client knows about a task in memory (`ACTIVE_TASK` beyond the state file).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActiveTaskGui {
    /// `PROCESS_*` state: 0 uninitialized, 1 executing, 9 suspended, …
    pub active_task_state: i32,
    /// Process id (0 = no process).
    pub pid: i32,
    /// 0 uninitialized, 1 preempted, 2 scheduled.
    pub scheduler_state: i32,
    /// Fraction done reported by the app.
    pub fraction_done: f64,
    /// Wall time so far, seconds.
    pub elapsed_time: f64,
    /// Progress per second of elapsed time (0 = unknown).
    pub progress_rate: f64,
}

/// Writes `<active_task>` in the GUI form from the saved record and the live facts. The
/// block starts at column 0 (as officially written inside `<result>`), so `w` should be at
/// the top level.
pub fn write_active_task(a: &ActiveTask, live: &ActiveTaskGui, w: &mut XmlWriter) {
    w.raw(&active_task_text(a, live));
}

fn active_task_text(a: &ActiveTask, live: &ActiveTaskGui) -> String {
    let mut t = XmlWriter::new();
    t.open("active_task")
        .num("active_task_state", live.active_task_state)
        .num("app_version_num", a.app_version_num)
        .num("slot", a.slot)
        .num("pid", live.pid)
        .num("scheduler_state", live.scheduler_state)
        .f64("checkpoint_cpu_time", a.checkpoint_cpu_time)
        .f64("fraction_done", live.fraction_done)
        .f64("current_cpu_time", a.current_cpu_time)
        .f64("elapsed_time", live.elapsed_time)
        .f64("swap_size", a.swap_size)
        .f64("working_set_size", a.working_set_size)
        .f64("working_set_size_smoothed", a.working_set_size_smoothed)
        .f64("page_fault_rate", a.page_fault_rate.unwrap_or(0.0))
        .f64("bytes_sent", a.bytes_sent.unwrap_or(0.0))
        .f64("bytes_received", a.bytes_received.unwrap_or(0.0))
        .f64("progress_rate", live.progress_rate)
        .close("active_task");
    t.finish()
}

/// The children written by `f` at one level of indentation, without an enclosing element.
fn indented(f: impl FnOnce(&mut XmlWriter)) -> String {
    let mut t = XmlWriter::new();
    t.open("x");
    f(&mut t);
    let s = t.finish();
    s.strip_prefix("<x>\n").unwrap_or(&s).to_owned()
}

/// Run-time facts about a result that only the running client knows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResultGuiExtra {
    /// Estimated seconds of computing left.
    pub estimated_cpu_time_remaining: f64,
    /// The project is suspended.
    pub project_suspended_via_gui: bool,
    /// Running in deadline (EDF) mode.
    pub edf_scheduled: bool,
    /// The resources string (e.g. `0.5 CPUs + 1 NVIDIA GPU`); `None` for plain 1-CPU jobs.
    pub resources: Option<String>,
}

/// Writes `<result>` in the GUI form, with its `<active_task>` when it has one. The result
/// is written as one block at the writer's current level (the GUI replies are flat).
pub fn write_result(
    r: &TaskResult,
    project_url: &str,
    extra: &ResultGuiExtra,
    active: Option<(&ActiveTask, &ActiveTaskGui)>,
    w: &mut XmlWriter,
) {
    let mut s = String::with_capacity(2048);
    s.push_str("<result>\n");
    s.push_str(&indented(|w| {
        w.text("name", &r.name)
            .text("wu_name", &r.wu_name)
            .text("platform", &r.platform)
            .num("version_num", r.version_num)
            .text("plan_class", &r.plan_class)
            .text("project_url", project_url)
            .f64("final_cpu_time", r.final_cpu_time)
            .f64("final_elapsed_time", r.final_elapsed_time)
            .num("exit_status", r.exit_status)
            .num("state", r.state.as_i32())
            .f64("report_deadline", r.report_deadline)
            .f64("received_time", r.received_time)
            .f64(
                "estimated_cpu_time_remaining",
                extra.estimated_cpu_time_remaining,
            )
            .flag("got_server_ack", r.got_server_ack)
            .flag("ready_to_report", r.ready_to_report);
        if r.completed_time != 0.0 {
            w.f64("completed_time", r.completed_time);
        }
        w.flag("suspended_via_gui", r.suspended_via_gui)
            .flag("project_suspended_via_gui", extra.project_suspended_via_gui)
            .flag("report_immediately", r.report_immediately)
            .flag("edf_scheduled", extra.edf_scheduled);
    }));
    if let Some((a, live)) = active {
        s.push_str(&active_task_text(a, live));
    }
    if let Some(res) = &extra.resources {
        s.push_str(&indented(|w| {
            w.text("resources", res);
        }));
    }
    s.push_str("</result>");
    w.raw(&s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_state::ResultState;

    fn names(xml: &str) -> Vec<String> {
        xml.lines()
            .filter_map(|l| {
                let l = l.trim_start();
                let rest = l.strip_prefix('<')?;
                if rest.starts_with('/') {
                    return None;
                }
                let end = rest.find(['>', '/'])?;
                Some(rest[..end].to_owned())
            })
            .collect()
    }

    #[test]
    fn result_with_active_task_has_the_official_order_and_layout() {
        let r = TaskResult {
            name: "wu_abort_0".into(),
            wu_name: "wu_abort".into(),
            platform: "x86_64-pc-linux-gnu".into(),
            version_num: 200,
            state: ResultState::FilesDownloaded,
            report_immediately: true,
            report_deadline: 1795938347.0,
            received_time: 1795333547.804013,
            ..TaskResult::default()
        };
        let a = ActiveTask {
            project_master_url: "http://127.0.0.1:18080/".into(),
            result_name: "wu_abort_0".into(),
            app_version_num: 200,
            slot: 1,
            ..ActiveTask::default()
        };
        let live = ActiveTaskGui {
            active_task_state: 1,
            pid: 13151,
            scheduler_state: 2,
            elapsed_time: 9.020151,
            ..ActiveTaskGui::default()
        };
        let mut w = XmlWriter::new();
        write_result(
            &r,
            "http://127.0.0.1:18080/",
            &ResultGuiExtra {
                estimated_cpu_time_remaining: 6.158931,
                ..ResultGuiExtra::default()
            },
            Some((&a, &live)),
            &mut w,
        );
        let xml = w.finish();
        // Verbatim from the official client's get_state reply.
        let expected = "<result>
    <name>wu_abort_0</name>
    <wu_name>wu_abort</wu_name>
    <platform>x86_64-pc-linux-gnu</platform>
    <version_num>200</version_num>
    <plan_class></plan_class>
    <project_url>http://127.0.0.1:18080/</project_url>
    <final_cpu_time>0.000000</final_cpu_time>
    <final_elapsed_time>0.000000</final_elapsed_time>
    <exit_status>0</exit_status>
    <state>2</state>
    <report_deadline>1795938347.000000</report_deadline>
    <received_time>1795333547.804013</received_time>
    <estimated_cpu_time_remaining>6.158931</estimated_cpu_time_remaining>
    <report_immediately/>
<active_task>
    <active_task_state>1</active_task_state>
    <app_version_num>200</app_version_num>
    <slot>1</slot>
    <pid>13151</pid>
    <scheduler_state>2</scheduler_state>
    <checkpoint_cpu_time>0.000000</checkpoint_cpu_time>
    <fraction_done>0.000000</fraction_done>
    <current_cpu_time>0.000000</current_cpu_time>
    <elapsed_time>9.020151</elapsed_time>
    <swap_size>0.000000</swap_size>
    <working_set_size>0.000000</working_set_size>
    <working_set_size_smoothed>0.000000</working_set_size_smoothed>
    <page_fault_rate>0.000000</page_fault_rate>
    <bytes_sent>0.000000</bytes_sent>
    <bytes_received>0.000000</bytes_received>
    <progress_rate>0.000000</progress_rate>
</active_task>
</result>
";
        assert_eq!(xml, expected);
    }

    #[test]
    fn project_gui_form_ends_with_the_run_time_facts() {
        let p = Project {
            master_url: "http://p/".into(),
            dont_use_dcf: true,
            suspended_via_gui: true,
            rsc_backoff: vec![super::super::RscBackoff {
                name: "CPU".into(),
                backoff_time: 5.0,
                backoff_interval: 600.0,
            }],
            code_sign_key: Some("KEY".into()),
            ..Project::default()
        };
        let mut w = XmlWriter::new();
        let extra = ProjectGuiExtra {
            project_dir: "/d/projects/p".into(),
            sched_priority: -1.0,
            ..ProjectGuiExtra::default()
        };
        write_project(&p, &extra, &mut w);
        let xml = w.finish();
        let n = names(&xml);
        let tail: Vec<&str> = n[n.len() - 4..].iter().map(String::as_str).collect();
        assert_eq!(
            tail,
            [
                "value",
                "sched_priority",
                "project_files_downloaded_time",
                "project_dir"
            ]
        );
        assert!(!xml.contains("code_sign_key"), "{xml}");
        assert!(!xml.contains("cpu_ec"), "{xml}");
        assert!(xml.contains("    <suspended_via_gui/>\n"), "{xml}");
        let i = n.iter().position(|s| s == "last_rpc_time").unwrap_or(0);
        assert_eq!(n[i + 1], "dont_use_dcf");
        assert_eq!(n[i + 2], "suspended_via_gui");
    }
}
