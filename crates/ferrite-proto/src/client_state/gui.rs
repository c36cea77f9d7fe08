//! The GUI RPC forms of the state objects (`get_state`, `get_results`,
//! `get_project_status`, `get_simple_gui_info`): `<project>` as `PROJECT::write_state(gui)`
//! writes it, `<result>` as `RESULT::write_gui` and `<active_task>` as `ACTIVE_TASK::write_gui`
//! do, in the element order of the official 7.20 client. They carry run-time facts the state
//! file lacks (estimates, scheduler state, the project directory), which the caller supplies.

use super::objects::TaskResult;
use super::project::Project;
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
    /// The project's `<gui_urls>` element (kept in its account file), verbatim.
    pub gui_urls: Option<String>,
}

/// Writes `<project>` in the GUI form.
pub fn write_project(p: &Project, extra: &ProjectGuiExtra, w: &mut XmlWriter) {
    p.write_common(w);
    match &extra.gui_urls {
        Some(g) => {
            w.raw(g);
        }
        None => {
            for e in p.extra.iter().filter(|e| e.starts_with("<gui_urls")) {
                w.raw(e);
            }
        }
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
    w.push_indent();
    w.at_depth(0, |w| write_active_task_block(a, live, w));
}

/// `<active_task>` at column 0, its children one level in.
fn write_active_task_block(a: &ActiveTask, live: &ActiveTaskGui, w: &mut XmlWriter) {
    w.open("active_task")
        .int("active_task_state", live.active_task_state)
        .int("app_version_num", a.app_version_num)
        .int("slot", a.slot)
        .int("pid", live.pid)
        .int("scheduler_state", live.scheduler_state)
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
/// is written as one block whose first line is indented at the writer's current level and
/// whose other lines are laid out as at the top level (the GUI replies are flat).
pub fn write_result(
    r: &TaskResult,
    project_url: &str,
    extra: &ResultGuiExtra,
    active: Option<(&ActiveTask, &ActiveTaskGui)>,
    w: &mut XmlWriter,
) {
    write_result_head(r, project_url, w);
    write_result_tail(r, extra, active, w);
}

/// The first part of [`write_result`]: `<result>` to `<received_time>`. It depends on these
/// fields only (and so may be kept and written again while they stay the same): `name`,
/// `wu_name`, `platform`, `version_num`, `plan_class`, the project URL, `final_cpu_time`,
/// `final_elapsed_time`, `exit_status`, `state`, `report_deadline` and `received_time`.
pub fn write_result_head(r: &TaskResult, project_url: &str, w: &mut XmlWriter) {
    w.push_indent().push_raw("<result>\n");
    w.at_depth(1, |w| {
        w.text("name", &r.name)
            .text("wu_name", &r.wu_name)
            .text("platform", &r.platform)
            .int("version_num", r.version_num)
            .text("plan_class", &r.plan_class)
            .text("project_url", project_url)
            .f64("final_cpu_time", r.final_cpu_time)
            .f64("final_elapsed_time", r.final_elapsed_time)
            .int("exit_status", r.exit_status)
            .int("state", r.state.as_i32())
            .f64("report_deadline", r.report_deadline)
            .f64("received_time", r.received_time);
    });
}

/// The rest of [`write_result`] after [`write_result_head`]: the estimate, the flags, the
/// `<active_task>` and `</result>`.
pub fn write_result_tail(
    r: &TaskResult,
    extra: &ResultGuiExtra,
    active: Option<(&ActiveTask, &ActiveTaskGui)>,
    w: &mut XmlWriter,
) {
    w.at_depth(1, |w| {
        w.f64(
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
        if let Some((a, live)) = active {
            w.at_depth(0, |w| write_active_task_block(a, live, w));
        }
        if let Some(res) = &extra.resources {
            w.text("resources", res);
        }
    });
    w.push_raw("</result>\n");
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

    /// `<result>` as the writer wrote it before it wrote straight into the reply: each part
    /// built in a string of its own, then copied in.
    fn reference_result(
        r: &TaskResult,
        project_url: &str,
        extra: &ResultGuiExtra,
        active: Option<(&ActiveTask, &ActiveTaskGui)>,
        w: &mut XmlWriter,
    ) {
        fn indented(f: impl FnOnce(&mut XmlWriter)) -> String {
            let mut t = XmlWriter::new();
            t.open("x");
            f(&mut t);
            let s = t.finish();
            s.strip_prefix("<x>\n").unwrap_or(&s).to_owned()
        }
        let mut s = String::from("<result>\n");
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
            s.push_str(&t.finish());
        }
        if let Some(res) = &extra.resources {
            s.push_str(&indented(|w| {
                w.text("resources", res);
            }));
        }
        s.push_str("</result>");
        w.raw(&s);
    }

    #[test]
    fn results_of_a_1000_task_state_are_written_as_by_the_reference_writer() {
        let mut state = crate::client_state::synthetic(20, 1000);
        let mut n = 0u32;
        let mut new = XmlWriter::new();
        let mut old = XmlWriter::new();
        for ps in &mut state.projects {
            let url = ps.project.master_url.clone();
            for r in &mut ps.results {
                n += 1;
                let k = f64::from(n);
                // Vary everything the writer looks at.
                r.suspended_via_gui = n % 7 == 0;
                r.got_server_ack = n % 11 == 0;
                r.report_immediately = n % 13 == 0;
                r.exit_status = if n % 17 == 0 { -197 } else { 0 };
                if n % 19 == 0 {
                    r.plan_class = "cuda<&>\"x\"".into();
                }
                let extra = ResultGuiExtra {
                    estimated_cpu_time_remaining: k * 2.718_281_7 + 1e-7 * k,
                    project_suspended_via_gui: n % 5 == 0,
                    edf_scheduled: n % 3 == 0,
                    resources: (n % 4 == 0).then(|| format!("0.{n} CPUs + 1 NVIDIA GPU")),
                };
                let a = ActiveTask {
                    project_master_url: url.clone(),
                    result_name: r.name.clone(),
                    app_version_num: 102,
                    slot: (n % 16) as i32,
                    checkpoint_cpu_time: k * 1.25,
                    current_cpu_time: k * 1.5 + 0.0000005,
                    working_set_size: 1.5e8 + k,
                    page_fault_rate: (n % 2 == 0).then_some(k / 7.0),
                    bytes_sent: (n % 3 == 0).then_some(-k),
                    ..ActiveTask::default()
                };
                let live = ActiveTaskGui {
                    active_task_state: (n % 10) as i32,
                    pid: 4000 + n as i32,
                    scheduler_state: (n % 3) as i32,
                    fraction_done: k / 1001.0,
                    elapsed_time: k * 0.999_999_5,
                    progress_rate: 1.0 / k,
                };
                let active = (n % 6 == 0).then_some((&a, &live));
                write_result(r, &url, &extra, active, &mut new);
                reference_result(r, &url, &extra, active, &mut old);
            }
        }
        assert_eq!(n, 1000);
        let (new, old) = (new.finish(), old.finish());
        assert!(old.len() > 500_000, "{}", old.len());
        if new != old {
            let at = new
                .bytes()
                .zip(old.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(new.len().min(old.len()));
            let from = at.saturating_sub(200);
            panic!(
                "differs at byte {at}:\nnew: {}\nold: {}",
                &new[from..(at + 200).min(new.len())],
                &old[from..(at + 200).min(old.len())]
            );
        }
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
        // The account file's GUI URLs come right before sched_priority.
        let mut with_urls = XmlWriter::new();
        let urls = "<gui_urls>\n<gui_url>\n<name>Forum</name>\n<url>http://p/forum</url>\n</gui_url>\n</gui_urls>";
        write_project(
            &p,
            &ProjectGuiExtra {
                gui_urls: Some(urls.to_owned()),
                ..extra.clone()
            },
            &mut with_urls,
        );
        let with_urls = with_urls.finish();
        assert!(
            with_urls.contains(&format!("{urls}\n    <sched_priority>")),
            "{with_urls}"
        );
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
