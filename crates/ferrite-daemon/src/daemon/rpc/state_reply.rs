//! GUI RPC replies that list the state: `get_state`, `get_results`, `get_simple_gui_info`,
//! `get_screensaver_tasks` and `get_project_status`'s projects, written from a shared borrow
//! of the daemon with the official element names and order (most pieces kept between replies
//! and shared).

use std::fs;

use ferrite_gui_rpc::Body;
use ferrite_proto::client_state::gui::{self, ActiveTaskGui, ProjectGuiExtra, ResultGuiExtra};
use ferrite_proto::client_state::{ActiveTask, Form, ProjectState, TaskResult, Workunit};
use ferrite_proto::host::HostInfoForm;
use ferrite_proto::xml::XmlWriter;

use crate::config;
use crate::rpc::body::BodyWriter;
use crate::rpc::state_reply::*;
use crate::rpc::status::SCHEDULED;
use crate::rpc::workunit_texts::WorkunitTexts;
use crate::run_modes::ModeKind;
use crate::Daemon;

impl Daemon {
    /// `get_results`: every result, or the active ones.
    pub(crate) fn results_body(&self, active_only: bool) -> Body {
        let mut w = BodyWriter::new(if active_only {
            4
        } else {
            self.results_pieces()
        });
        w.xml().open_flat("results");
        self.write_results(&mut w, active_only);
        w.xml().close_flat("results");
        w.finish()
    }

    /// `get_simple_gui_info`: the projects and the active results.
    pub(super) fn simple_gui_info_body(&self) -> Body {
        let mut w = BodyWriter::new(4);
        w.xml().open_flat("simple_gui_info");
        for p in &self.state.projects {
            self.write_project(p, w.xml());
        }
        self.write_results(&mut w, true);
        w.xml().close_flat("simple_gui_info");
        w.finish()
    }

    /// `get_screensaver_tasks`: the CPU suspend reason, then each result whose app runs now
    /// (scheduler state SCHEDULED), in active-task order, written as in `get_results`. The
    /// root is `<handle_get_screensaver_tasks>`, as 7.20 writes it.
    pub(super) fn screensaver_tasks_body(&self, t: f64) -> Body {
        const ROOT: &str = "handle_get_screensaver_tasks";
        let reason = self.shown_suspend_reason(ModeKind::Cpu, t);
        let mut w = BodyWriter::new(4);
        w.xml()
            .open_flat(ROOT)
            .push_raw(&format!("    <suspend_reason>{reason}</suspend_reason>\n"));
        let jobs = &mut JobFinder::default();
        for a in &self.state.active_tasks {
            if self.active_task_live(a).scheduler_state != SCHEDULED {
                continue;
            }
            let Some(p) = self.state.project(&a.project_master_url) else {
                continue;
            };
            if let Some(r) = p.result(&a.result_name) {
                self.write_result(jobs, p, p.workunit(&r.wu_name), r, None, &mut w);
            }
        }
        w.xml().close_flat(ROOT);
        w.finish()
    }

    fn project_extra(&self, p: &ProjectState) -> ProjectGuiExtra {
        let dir = config::project_dir(&self.dir, &p.project.master_url);
        let dir = fs::canonicalize(&dir).unwrap_or(dir);
        let url = &p.project.master_url;
        let now = crate::clock::now();
        ProjectGuiExtra {
            project_dir: dir.display().to_string(),
            gui_urls: config::account_gui_urls(&self.dir, url),
            sched_priority: self.tasks.sched_priority(url),
            download_backoff: self
                .transfers
                .project_backoff(url, false, now)
                .unwrap_or(0.0),
            upload_backoff: self
                .transfers
                .project_backoff(url, true, now)
                .unwrap_or(0.0),
            ..ProjectGuiExtra::default()
        }
    }

    pub(super) fn write_project(&self, p: &ProjectState, w: &mut XmlWriter) {
        gui::write_project(&p.project, &self.project_extra(p), w);
    }

    /// What the GUI shows of a task's process: the live figures of its app when one runs,
    /// else the saved checkpoint (no process, preempted).
    fn active_task_live(&self, a: &ActiveTask) -> ActiveTaskGui {
        if let Some(l) = self.tasks.live_of(&a.project_master_url, &a.result_name) {
            let u = l.task.usage();
            use crate::tasks::{
                PROCESS_ABORT_PENDING, PROCESS_EXECUTING, PROCESS_EXITED, PROCESS_QUIT_PENDING,
                PROCESS_SUSPENDED,
            };
            use ferrite_supervise::TaskState;
            // Scheduler state: 2 scheduled, 1 preempted.
            let (state, sched) = match l.task.state() {
                TaskState::Running => (PROCESS_EXECUTING, SCHEDULED),
                TaskState::Suspended => (PROCESS_SUSPENDED, 1),
                TaskState::QuitPending => (PROCESS_QUIT_PENDING, 1),
                TaskState::AbortPending => (PROCESS_ABORT_PENDING, 1),
                TaskState::Exited => (PROCESS_EXITED, 1),
            };
            return ActiveTaskGui {
                active_task_state: state,
                pid: l.task.pid(),
                scheduler_state: sched,
                fraction_done: u.fraction_done,
                elapsed_time: u.elapsed_time,
                progress_rate: if u.elapsed_time > 0.0 {
                    u.fraction_done / u.elapsed_time
                } else {
                    0.0
                },
            };
        }
        ActiveTaskGui {
            active_task_state: 0,
            pid: 0,
            scheduler_state: 1,
            fraction_done: a.checkpoint_fraction_done,
            elapsed_time: a.checkpoint_elapsed_time,
            progress_rate: 0.0,
        }
    }

    /// A task's process figures as the GUI is shown them: a fraction done guessed from the
    /// elapsed time when the app reports none (the official `write_gui`). The scheduling
    /// estimates keep the reported fraction.
    fn shown_progress(
        &self,
        p: &ProjectState,
        wu: Option<&Workunit>,
        r: &TaskResult,
        mut live: ActiveTaskGui,
    ) -> ActiveTaskGui {
        let Some(wu) = wu else {
            return live;
        };
        let flops = p
            .app_version(&wu.app_name, &r.platform, r.version_num, &r.plan_class)
            .map(|v| v.usage.flops)
            .filter(|f| *f > 0.0)
            .unwrap_or(self.state.host_info.p_fpops);
        live.fraction_done = ferrite_sched::estimate::shown_fraction_done(
            live.fraction_done,
            live.elapsed_time,
            wu.rsc_fpops_est,
            flops,
        );
        live
    }

    /// The time a result still needs, as the scheduling core estimates it (the official
    /// `est_dur`: fraction-done and static estimates blended by the fraction done), with
    /// the app's latest report when it runs. `None` before the core's first pass saw it.
    fn remaining_estimate(
        &self,
        jobs: &mut JobFinder,
        url: &str,
        result: &str,
        live: Option<&ActiveTaskGui>,
    ) -> Option<f64> {
        let (_, world) = self.tasks.last_pass()?;
        let mut job = jobs.find(world, self.tasks.ids(), url, result)?.clone();
        if let Some(l) = live.filter(|l| l.pid != 0) {
            job.elapsed = l.elapsed_time;
            job.fraction_done = l.fraction_done;
            job.elapsed_at_fraction = l.elapsed_time;
        }
        Some(ferrite_sched::estimate::remaining_secs(world, &job))
    }

    fn result_extra(
        &self,
        jobs: &mut JobFinder,
        p: &ProjectState,
        wu: Option<&Workunit>,
        r: &TaskResult,
        a: Option<&ActiveTask>,
        live: Option<&ActiveTaskGui>,
    ) -> ResultGuiExtra {
        let av = wu
            .and_then(|wu| p.app_version(&wu.app_name, &r.platform, r.version_num, &r.plan_class));
        let remaining = if r.computing_done() {
            0.0
        } else if let Some(x) = self.remaining_estimate(jobs, &p.project.master_url, &r.name, live)
        {
            x
        } else {
            let flops = av
                .map(|v| v.usage.flops)
                .filter(|f| *f > 0.0)
                .unwrap_or(self.state.host_info.p_fpops.max(1.0));
            let est = wu.map_or(0.0, |wu| wu.rsc_fpops_est / flops)
                * p.project.duration_correction_factor.max(0.0);
            (est - a.map_or(0.0, |a| a.checkpoint_elapsed_time)).max(0.0)
        };
        let usage = wu
            .and_then(|wu| wu.usage.as_ref())
            .or_else(|| av.map(|v| &v.usage));
        ResultGuiExtra {
            estimated_cpu_time_remaining: remaining,
            project_suspended_via_gui: p.project.suspended_via_gui,
            edf_scheduled: false,
            resources: usage.and_then(resources_string),
        }
    }

    /// Writes `<result>`; `pos` is the result's position in the state when the whole list
    /// is written, in order (its head is then kept for the next reply).
    fn write_result(
        &self,
        jobs: &mut JobFinder,
        p: &ProjectState,
        wu: Option<&Workunit>,
        r: &TaskResult,
        pos: Option<usize>,
        out: &mut BodyWriter,
    ) {
        let a = jobs.active_task(&self.state, &p.project.master_url, &r.name);
        let live = a.map(|a| self.active_task_live(a));
        let extra = self.result_extra(jobs, p, wu, r, a, live.as_ref());
        let live = live.map(|l| self.shown_progress(p, wu, r, l));
        let url = &p.project.master_url;
        match pos {
            Some(i) => self.rpc.result_heads.borrow_mut().write(i, r, url, out),
            None => gui::write_result_head(r, url, out.xml()),
        }
        gui::write_result_tail(r, &extra, a.zip(live.as_ref()), out.xml());
    }

    /// A batch of a scheduler reply's tasks came in for the project at `url`: while a GUI
    /// lists the results (their heads are kept), the new results' heads are written now, a
    /// batch at a time, instead of thousands in the next reply.
    pub(crate) fn write_result_heads_ahead(&self, url: &str) {
        let mut pos = 0;
        for p in &self.state.projects {
            if p.project.master_url == url {
                let heads = &mut self.rpc.result_heads.borrow_mut();
                heads.write_ahead(pos, &p.results, url);
                return;
            }
            pos += p.results.len();
        }
    }

    /// Every result of project `p`, the first at position `pos` of the state's results.
    fn write_project_results(
        &self,
        jobs: &mut JobFinder,
        p: &ProjectState,
        pos: &mut usize,
        out: &mut BodyWriter,
    ) {
        let mut wus = WorkunitFinder::new(p);
        for r in &p.results {
            let wu = wus.find(&r.wu_name);
            self.write_result(jobs, p, wu, r, Some(*pos), out);
            *pos += 1;
        }
    }

    /// Results in project order, or (active only) in active-task order.
    fn write_results(&self, w: &mut BodyWriter, active_only: bool) {
        let jobs = &mut JobFinder::default();
        if active_only {
            for a in &self.state.active_tasks {
                let Some(p) = self.state.project(&a.project_master_url) else {
                    continue;
                };
                if let Some(r) = p.result(&a.result_name) {
                    self.write_result(jobs, p, p.workunit(&r.wu_name), r, None, w);
                }
            }
        } else {
            let mut pos = 0;
            for p in &self.state.projects {
                self.write_project_results(jobs, p, &mut pos, w);
            }
            self.rpc.result_heads.borrow_mut().truncate(pos);
        }
    }

    /// Pieces of a reply listing every result (a kept head and a tail each).
    fn results_pieces(&self) -> usize {
        let n: usize = self.state.projects.iter().map(|p| p.results.len()).sum();
        4 + n * 2
    }

    /// The `get_state` reply. What does not move within a state epoch (the host, the
    /// projects with their apps, versions and workunits, the preferences) is written once
    /// per epoch and kept; the time statistics and the results (from their kept heads) are
    /// written for each reply.
    pub(crate) fn state_xml(&self, t: f64) -> Body {
        let mut kept = self.rpc.state_parts.borrow_mut();
        if kept.as_ref().is_none_or(|k| k.epoch != self.state_epoch) {
            *kept = Some(self.state_parts());
        }
        let Some(parts) = kept.as_ref() else {
            return Body::new();
        };
        let s = &self.state;
        let mut out = BodyWriter::new(self.results_pieces() + 2 * parts.projects.len() + 4);
        let jobs = &mut JobFinder::default();
        let mut pos = 0;
        out.shared(&parts.head);
        // As the official client: the previous session's length, not this one's so far.
        let ts = self.time_session.request_form(&s.time_stats, t);
        ts.write(out.xml(), Form::Request);
        for (p, text) in s.projects.iter().zip(&parts.projects) {
            out.shared(text);
            self.write_project_results(jobs, p, &mut pos, &mut out);
        }
        out.shared(&parts.tail);
        self.rpc.result_heads.borrow_mut().truncate(pos);
        out.finish()
    }

    /// `get_state` written in one go, as it was before its parts were kept (for tests).
    #[cfg(test)]
    pub(crate) fn state_xml_at_once(&self, t: f64) -> String {
        let s = &self.state;
        let mut w = XmlWriter::new();
        self.write_state_head(&mut w);
        let ts = self.time_session.request_form(&s.time_stats, t);
        ts.write(&mut w, Form::Request);
        for p in &s.projects {
            self.write_project_head(p, &mut w, None);
            let jobs = &mut JobFinder::default();
            for r in &p.results {
                let wu = p.workunit(&r.wu_name);
                let a = self.state.active_task(&p.project.master_url, &r.name);
                let live = a.map(|a| self.active_task_live(a));
                let extra = self.result_extra(jobs, p, wu, r, a, live.as_ref());
                let live = live.map(|l| self.shown_progress(p, wu, r, l));
                gui::write_result(
                    r,
                    &p.project.master_url,
                    &extra,
                    a.zip(live.as_ref()),
                    &mut w,
                );
            }
        }
        self.write_state_tail(&mut w);
        w.finish()
    }

    /// The start of `get_state`: host information, CUDA flag and network statistics.
    fn write_state_head(&self, w: &mut XmlWriter) {
        let s = &self.state;
        w.open_flat("client_state");
        s.host_info.write(w, HostInfoForm::STATE_FILE);
        w.flag("have_cuda", s.host_info.coprocs.nvidia.is_some());
        s.net_stats.write(w);
    }

    /// A project in `get_state` up to its results: the project, its apps, app versions and
    /// workunits. With `kept` (and `pos`, the position of its first workunit in the state),
    /// the workunits' texts kept from an earlier epoch are used where they still fit.
    fn write_project_head(
        &self,
        p: &ProjectState,
        w: &mut XmlWriter,
        kept: Option<(&mut WorkunitTexts, &mut usize)>,
    ) {
        self.write_project(p, w);
        for a in &p.apps {
            a.write(w);
        }
        for v in &p.app_versions {
            v.write(w, Form::State);
        }
        match kept {
            Some((texts, pos)) => {
                for wu in &p.workunits {
                    texts.write(*pos, wu, w);
                    *pos += 1;
                }
            }
            None => {
                for wu in &p.workunits {
                    wu.write(w);
                }
            }
        }
    }

    /// The end of `get_state`: platforms, version, preferences and venue.
    fn write_state_tail(&self, w: &mut XmlWriter) {
        let s = &self.state;
        let v = ferrite_proto::version::PROTOCOL_VERSION;
        w.text("platform_name", &s.platform_name)
            .num("core_client_major_version", v.major)
            .num("core_client_minor_version", v.minor)
            .num("core_client_release", v.release)
            .bool01("executing_as_daemon", self.opts.daemon);
        w.text("platform", &s.platform_name);
        for p in &s.alt_platforms {
            w.text("platform", p);
        }
        self.config.prefs.prefs.write(w);
        w.nonempty_text("host_venue", &s.host_venue);
        w.close_flat("client_state");
    }

    /// The parts of `get_state` around the time statistics and the results.
    fn state_parts(&self) -> crate::rpc::StateParts {
        let s = &self.state;
        let text = |w: XmlWriter| crate::rpc::body::kept(w.finish());
        let mut w = XmlWriter::new();
        self.write_state_head(&mut w);
        let head = text(w);
        let mut texts = self.rpc.workunit_texts.borrow_mut();
        let mut pos = 0;
        let projects = s
            .projects
            .iter()
            .map(|p| {
                let mut w = XmlWriter::new();
                self.write_project_head(p, &mut w, Some((&mut texts, &mut pos)));
                text(w)
            })
            .collect();
        texts.truncate(pos);
        let mut w = XmlWriter::new();
        self.write_state_tail(&mut w);
        crate::rpc::StateParts {
            epoch: self.state_epoch,
            head,
            projects,
            tail: text(w),
        }
    }
}
