//! GUI RPC queries (`Daemon::query`): replies built from a shared borrow of the daemon's
//! state, configuration and data directory, with the official element names and order.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use ferrite_gui_rpc::{reply, Body, Request};
use ferrite_proto::client_state::gui::{self, ActiveTaskGui, ProjectGuiExtra, ResultGuiExtra};
use ferrite_proto::client_state::{
    ActiveTask, ClientState, Form, ProjectState, ResourceUsage, TaskResult, Workunit,
};
use ferrite_proto::host::HostInfoForm;
use ferrite_proto::statistics::ProjectStatistics;
use ferrite_proto::xml::XmlWriter;

use super::body::BodyWriter;
use super::route::Query;
use crate::config::{self, CC_CONFIG, GLOBAL_PREFS, GLOBAL_PREFS_OVERRIDE};
use crate::messages::{notices_xml, MessageLog};
use crate::projects::WebRpcKind;
use crate::run_modes::{current_mode, mode_delay, ModeKind};
use crate::Daemon;

/// `SUSPEND_REASON_USER_REQ`.
const SUSPEND_USER_REQ: i32 = 4;
/// `CPU_SCHED_SCHEDULED`: the task's app runs.
const SCHEDULED: i32 = 2;
/// `NETWORK_STATUS_ONLINE`.
const NETWORK_ONLINE: i32 = 0;
/// `NETWORK_STATUS_WANT_DISCONNECT`: "don't need connection" (no transfer or RPC pending).
const NETWORK_WANT_DISCONNECT: i32 = 2;

/// `cc_status`'s network status, as the official client's `NET_STATUS::network_status`
/// (without its dial-up states): online while an HTTP exchange is under way or one ended
/// within the last 10 s, otherwise "don't need a connection".
fn network_status(http_in_flight: bool, last_comm: f64, now: f64) -> i32 {
    if http_in_flight || (last_comm > 0.0 && now - last_comm < 10.0) {
        NETWORK_ONLINE
    } else {
        NETWORK_WANT_DISCONNECT
    }
}

/// The default `<proxy_info>` (no proxy), as the official client writes it.
const NO_PROXY: &str = "<proxy_info>
    <socks_server_name></socks_server_name>
    <socks_server_port>80</socks_server_port>
    <http_server_name></http_server_name>
    <http_server_port>80</http_server_port>
    <socks5_user_name></socks5_user_name>
    <socks5_user_passwd></socks5_user_passwd>
    <socks5_remote_dns>0</socks5_remote_dns>
    <http_user_name></http_user_name>
    <http_user_passwd></http_user_passwd>
    <no_proxy></no_proxy>
    <no_autodetect>0</no_autodetect>
</proxy_info>
";

/// Bytes used by the files under `path` (0 if it does not exist).
fn dir_size(path: &Path) -> f64 {
    let Ok(entries) = fs::read_dir(path) else {
        return 0.0;
    };
    let mut total = 0.0;
    for e in entries.flatten() {
        let Ok(ty) = e.file_type() else { continue };
        if ty.is_dir() {
            total += dir_size(&e.path());
        } else if ty.is_file() {
            total += e.metadata().map(|m| m.len() as f64).unwrap_or(0.0);
        }
    }
    total
}

/// `%.3g`: three significant digits, trailing zeros dropped.
fn g3(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".to_owned();
    }
    let exp = v.abs().log10().floor() as i32;
    let decimals = usize::try_from(2 - exp).unwrap_or(0);
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// The `<resources>` text of a task (`0.5 CPUs`, `1 CPU + 1 NVIDIA GPU`); `None` for a plain
/// one-CPU job, which the official client leaves out.
fn resources_string(u: &ResourceUsage) -> Option<String> {
    let n = if u.avg_ncpus > 0.0 { u.avg_ncpus } else { 1.0 };
    let cpus = if n == 1.0 { "CPU" } else { "CPUs" };
    match u.coprocs.iter().find(|c| c.count > 0.0) {
        Some(c) => {
            let gpu = match c.rsc_type.as_str() {
                "NVIDIA" | "CUDA" => "NVIDIA GPU",
                "ATI" => "AMD/ATI GPU",
                "intel_gpu" => "Intel GPU",
                "apple_gpu" => "Apple GPU",
                other => other,
            };
            Some(if c.count == 1.0 {
                format!("{} {cpus} + 1 {gpu}", g3(n))
            } else {
                format!("{} {cpus} + {} {gpu}s", g3(n), g3(c.count))
            })
        }
        None => (n != 1.0).then(|| format!("{} {cpus}", g3(n))),
    }
}

/// Finds a project's workunits while a reply lists its results (a reply may list 10,000
/// tasks): results mostly come in their workunits' order, so the workunits after the last
/// one found are tried first; an index by name is built on the first miss.
struct WorkunitFinder<'a> {
    workunits: &'a [Workunit],
    next: usize,
    index: Option<HashMap<&'a str, &'a Workunit>>,
}

impl<'a> WorkunitFinder<'a> {
    fn new(p: &'a ProjectState) -> Self {
        WorkunitFinder {
            workunits: &p.workunits,
            next: 0,
            index: None,
        }
    }

    fn find(&mut self, name: &str) -> Option<&'a Workunit> {
        let ahead = self
            .workunits
            .iter()
            .enumerate()
            .skip(self.next)
            .take(AHEAD);
        for (i, wu) in ahead {
            if wu.name == name {
                self.next = i + 1;
                return Some(wu);
            }
        }
        let workunits = self.workunits;
        self.index
            .get_or_insert_with(|| {
                let mut index = HashMap::with_capacity(workunits.len());
                for w in workunits {
                    // The first of a name, as `ProjectState::workunit` finds it.
                    index.entry(w.name.as_str()).or_insert(w);
                }
                index
            })
            .get(name)
            .copied()
    }
}

/// How many jobs after the last one found are tried before a lookup.
const AHEAD: usize = 16;

/// Finds the scheduling core's job of each result while a reply lists them. The core's
/// world lists the jobs in the state's order, so the job after the last one found is tried
/// first, then the few after it (no allocation, no search); any other result is looked up
/// by its id.
#[derive(Default)]
struct JobFinder {
    /// Where the next result's job is likely to be in `World::jobs`.
    next: usize,
    /// Position in `World::jobs` by job id, made on the first lookup by id.
    by_id: Option<HashMap<u32, usize>>,
    /// Position in the state's active tasks by project URL and result name, made on the
    /// first lookup (the first of a pair, as `ClientState::active_task` finds it).
    active: Option<HashMap<String, HashMap<String, usize>>>,
}

impl JobFinder {
    fn find<'w>(
        &mut self,
        world: &'w ferrite_sched::World,
        ids: &crate::snapshot::IdMap,
        url: &str,
        result: &str,
    ) -> Option<&'w ferrite_sched::Job> {
        // Results without a job lookup (finished ones) may lie in between.
        let ahead = world.jobs.iter().enumerate().skip(self.next).take(AHEAD);
        for (i, j) in ahead {
            if ids
                .job(j.id)
                .is_some_and(|(u, n)| n.as_str() == result && u.as_str() == url)
            {
                self.next = i + 1;
                return Some(j);
            }
        }
        let id = ids.find_job(url, result)?;
        let i = *self
            .by_id
            .get_or_insert_with(|| {
                let mut at = HashMap::with_capacity(world.jobs.len());
                for (i, j) in world.jobs.iter().enumerate() {
                    at.entry(j.id.0).or_insert(i);
                }
                at
            })
            .get(&id.0)?;
        self.next = i + 1;
        world.jobs.get(i)
    }
}

impl JobFinder {
    /// The active task of result `result` of project `url`, through an index rather than a
    /// scan of the active tasks per result.
    fn active_task<'s>(
        &mut self,
        state: &'s ClientState,
        url: &str,
        result: &str,
    ) -> Option<&'s ActiveTask> {
        let i = *self
            .active
            .get_or_insert_with(|| {
                let mut at: HashMap<String, HashMap<String, usize>> = HashMap::new();
                for (i, a) in state.active_tasks.iter().enumerate() {
                    at.entry(a.project_master_url.clone())
                        .or_default()
                        .entry(a.result_name.clone())
                        .or_insert(i);
                }
                at
            })
            .get(url)?
            .get(result)?;
        state.active_tasks.get(i)
    }
}

fn read_text(path: &Path) -> Option<String> {
    fs::read(path)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

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

    /// Answers a query at `t` for connection `conn` from the state as it is. The long lists
    /// are bodies of pieces, most of them kept between replies and shared; the rest is text.
    pub(super) fn query(&self, q: &Query, conn: u64, t: f64) -> Body {
        match q.request() {
            Request::GetState => self.state_xml(t),
            Request::GetResults { active_only } => self.results_body(*active_only),
            Request::GetSimpleGuiInfo => self.simple_gui_info_body(),
            Request::GetScreensaverTasks => self.screensaver_tasks_body(t),
            Request::GetMessages {
                seqno,
                translatable,
            } => MessageLog::global().msgs_after(*seqno, *translatable),
            Request::GetFileTransfers => self.rpc_file_transfers(t),
            other => self.query_text(other, conn, t).into(),
        }
    }

    fn query_text(&self, request: &Request, conn: u64, t: f64) -> String {
        match request {
            Request::GetProjectStatus => {
                let mut w = XmlWriter::new();
                w.open_flat("projects");
                for p in &self.state.projects {
                    self.write_project(p, &mut w);
                }
                w.close_flat("projects");
                w.finish()
            }
            Request::GetCcStatus => self.cc_status_xml(t),
            Request::GetHostInfo => {
                let mut w = XmlWriter::new();
                let confinement = self.tasks.confine.support.describe();
                self.state.host_info.write_gui_rpc(&mut w, &confinement);
                w.finish()
            }
            Request::GetMessageCount => {
                format!("<seqno>{}</seqno>\n", MessageLog::global().last_seqno())
            }
            Request::GetNotices { seqno } => {
                let (refresh, n) = MessageLog::global().notices_for(conn, *seqno, false);
                notices_xml(refresh, &n)
            }
            Request::GetNoticesPublic { seqno } => {
                let (refresh, n) = MessageLog::global().notices_for(conn, *seqno, true);
                notices_xml(refresh, &n)
            }
            Request::GetStatistics => self.statistics_xml(),
            // From memory, as the official client answers: the file lags up to a minute.
            Request::GetDailyXferHistory => self.xfer_history.days().to_xml(),
            Request::GetAllProjectsList => crate::notices::project_list(&self.dir),
            // Ferrite does not look for newer versions: none is named. The download page is
            // nvc_config.xml's `client_download_url`, else the official default.
            Request::GetNewerVersion => {
                use ferrite_proto::nvc_config::{NvcConfig, NVC_CONFIG_FILE};
                let nvc = read_text(&self.dir.join(NVC_CONFIG_FILE))
                    .and_then(|t| NvcConfig::parse(&t, NVC_CONFIG_FILE).ok())
                    .map(|p| p.value)
                    .unwrap_or_default();
                let mut w = XmlWriter::new();
                w.text("newer_version", "")
                    .text("download_url", &nvc.client_download_url);
                w.finish()
            }
            Request::RunGraphicsApp { .. } => {
                reply::error("run_graphics_app RPC is currently available only on Mac OS")
            }
            Request::GetProxySettings => match &self.state.proxy_info {
                Some(p) => format!("{}\n", p.trim()),
                None => NO_PROXY.to_owned(),
            },
            Request::AcctMgrInfo => self.acct_mgr.info_xml(),
            Request::AcctMgrRpcPoll => self.acct_mgr.poll_xml(),
            Request::GetOldResults => crate::projects::old_results_xml(&self.projects.old_results),
            Request::FerriteExplain => self.explain_xml(t),
            Request::ProjectAttachPoll => self.rpc_project_attach_poll(),
            Request::LookupAccountPoll => self.web_rpc_poll(WebRpcKind::LookupAccount),
            Request::CreateAccountPoll => self.web_rpc_poll(WebRpcKind::CreateAccount),
            Request::GetProjectConfigPoll => self.web_rpc_poll(WebRpcKind::ProjectConfig),
            Request::GetProjectInitStatus => {
                "<get_project_init_status>\n    <url></url>\n    <name></name>\n</get_project_init_status>\n"
                    .to_owned()
            }
            Request::GetCcConfig => read_text(&self.dir.join(CC_CONFIG))
                .map(|t| format!("{}\n", t.trim()))
                .unwrap_or_default(),
            Request::GetGlobalPrefsOverride => {
                match read_text(&self.dir.join(GLOBAL_PREFS_OVERRIDE)) {
                    Some(t) => format!("{}\n", t.trim()),
                    None => reply::error("no prefs override file"),
                }
            }
            Request::GetGlobalPrefsFile => match read_text(&self.dir.join(GLOBAL_PREFS)) {
                // The official client answers its parse's error code: ERR_FOPEN.
                None => reply::error("-108"),
                Some(text) => match ferrite_proto::prefs::GlobalPrefs::parse_network(
                    &text,
                    GLOBAL_PREFS,
                    &self.config.prefs.host_venue,
                    t,
                ) {
                    Ok(p) => p.value.0.to_xml(),
                    Err(_) => reply::error("-112"),
                },
            },
            Request::GetGlobalPrefsWorking => self.config.prefs.prefs.to_xml(),
            Request::GetAppConfig { url } => match self.state.project(url) {
                None => reply::error("no such project"),
                Some(p) => {
                    let path = config::project_dir(&self.dir, &p.project.master_url)
                        .join(config::APP_CONFIG);
                    match read_text(&path) {
                        Some(t) => format!("{}\n", t.trim()),
                        None => reply::error("app_config.xml not found"),
                    }
                }
            },
            Request::ExchangeVersions { .. } => {
                let v = ferrite_proto::version::PROTOCOL_VERSION;
                format!(
                    "<server_version>\n   <major>{}</major>\n   <minor>{}</minor>\n   <release>{}</release>\n</server_version>\n",
                    v.major, v.minor, v.release
                )
            }
            // Commands never come here (`route`).
            other => reply::error(&format!("{} is not handled", other.op_name())),
        }
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

    fn write_project(&self, p: &ProjectState, w: &mut XmlWriter) {
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
            self.write_project_head(p, &mut w);
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
    /// workunits.
    fn write_project_head(&self, p: &ProjectState, w: &mut XmlWriter) {
        self.write_project(p, w);
        for a in &p.apps {
            a.write(w);
        }
        for v in &p.app_versions {
            v.write(w, Form::State);
        }
        for wu in &p.workunits {
            wu.write(w);
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
    fn state_parts(&self) -> super::StateParts {
        let s = &self.state;
        let text = |w: XmlWriter| super::body::kept(w.finish());
        let mut w = XmlWriter::new();
        self.write_state_head(&mut w);
        let head = text(w);
        let projects = s
            .projects
            .iter()
            .map(|p| {
                let mut w = XmlWriter::new();
                self.write_project_head(p, &mut w);
                text(w)
            })
            .collect();
        let mut w = XmlWriter::new();
        self.write_state_tail(&mut w);
        super::StateParts {
            epoch: self.state_epoch,
            head,
            projects,
            tail: text(w),
        }
    }

    /// The suspend reason the GUI shows for a kind of activity: the last decision for
    /// computing (0 while merely throttled, as the official client shows it), the run mode and
    /// the preferences' network hours for the network.
    fn shown_suspend_reason(&self, kind: ModeKind, t: f64) -> i32 {
        use ferrite_sched::suspend::SuspendReason;
        // A mode just changed through the GUI shows at once, before the next tick decides.
        let never = |kind| {
            current_mode(&self.state, &self.modes, kind, t)
                == ferrite_proto::client_state::RunMode::Never
        };
        let shown = |r: Option<SuspendReason>| {
            r.filter(|r| !matches!(r, SuspendReason::CpuThrottle | SuspendReason::UserRequest))
                .map_or(0, SuspendReason::code)
        };
        match kind {
            _ if never(kind) || (kind == ModeKind::Gpu && never(ModeKind::Cpu)) => SUSPEND_USER_REQ,
            // Held under a temperature limit: "CPU throttled" (the official client never shows
            // its own duty cycle).
            ModeKind::Cpu
                if self.host.suspended.0.is_none() && self.host.thermal.status().cpu_holding() =>
            {
                SuspendReason::CpuThrottle.code()
            }
            ModeKind::Cpu => shown(self.host.suspended.0),
            ModeKind::Gpu
                if self.host.suspended.0.is_none()
                    && self.host.suspended.1 == Some(SuspendReason::CpuThrottle) =>
            {
                SuspendReason::CpuThrottle.code()
            }
            ModeKind::Gpu => shown(self.host.suspended.0.or(self.host.suspended.1)),
            // Outside the preferences' network hours (auto mode).
            ModeKind::Network if !self.network_allowed(t) => SuspendReason::TimeOfDay.code(),
            ModeKind::Network => 0,
        }
    }

    fn cc_status_xml(&self, t: f64) -> String {
        let s = &self.state;
        let mut w = XmlWriter::new();
        w.open("cc_status")
            .num(
                "network_status",
                network_status(
                    self.projects.busy() || self.transfers.active_count() > 0,
                    self.last_comm,
                    t,
                ),
            )
            .num("ams_password_error", u8::from(self.acct_mgr.password_error));
        for (kind, name) in [
            (ModeKind::Cpu, "task"),
            (ModeKind::Gpu, "gpu"),
            (ModeKind::Network, "network"),
        ] {
            let cur = current_mode(s, &self.modes, kind, t);
            let perm = match kind {
                ModeKind::Cpu => s.user_run_request,
                ModeKind::Gpu => s.user_gpu_request,
                ModeKind::Network => s.user_network_request,
            };
            let reason = self.shown_suspend_reason(kind, t);
            w.num(&format!("{name}_suspend_reason"), reason)
                .num(&format!("{name}_mode"), cur.as_i32())
                .num(&format!("{name}_mode_perm"), perm.as_i32())
                .f64(
                    &format!("{name}_mode_delay"),
                    mode_delay(&self.modes, kind, t),
                );
        }
        let o = &self.config.cc.options;
        w.bool01("disallow_attach", o.disallow_attach)
            .bool01("simple_gui_only", o.simple_gui_only)
            .num("max_event_log_lines", o.max_event_log_lines)
            .close("cc_status");
        // The official layout indents with three spaces.
        w.finish().replace("\n    <", "\n   <")
    }

    /// Measures each project's disk usage (`<disk_usage>` of `get_state` and
    /// `get_project_status`): its project directory and its tasks' slot directories, as the
    /// official client does when it reads the preferences, before each scheduler request
    /// and for `get_disk_usage`.
    pub(crate) fn update_disk_usages(&mut self) {
        let slots = self.dir.join("slots");
        let state = &mut self.state;
        for ps in &mut state.projects {
            let url = &ps.project.master_url;
            let mut used = dir_size(&config::project_dir(&self.dir, url));
            for a in state
                .active_tasks
                .iter()
                .filter(|a| &a.project_master_url == url)
            {
                used += dir_size(&slots.join(a.slot.to_string()));
            }
            ps.project.disk_usage = used;
        }
    }

    pub(super) fn disk_usage_xml(&self) -> String {
        let mut w = XmlWriter::new();
        w.open_flat("disk_usage_summary");
        let mut projects_total = 0.0;
        for p in &self.state.projects {
            let used = p.project.disk_usage;
            projects_total += used;
            w.open("project")
                .text("master_url", &p.project.master_url)
                .f64("disk_usage", used)
                .close("project");
        }
        let (d_total, d_free) = crate::projects::volume_space(&self.dir)
            .unwrap_or((self.state.host_info.d_total, self.state.host_info.d_free));
        let d_boinc = (dir_size(&self.dir) - projects_total).max(0.0);
        let allowed =
            self.config
                .prefs
                .prefs
                .allowed_disk_usage(d_boinc + projects_total, d_total, d_free);
        w.f64("d_total", d_total)
            .f64("d_free", d_free)
            .f64("d_boinc", d_boinc)
            .f64("d_allowed", allowed);
        w.close_flat("disk_usage_summary");
        w.finish().replace("\n    <", "\n  <")
    }

    fn statistics_xml(&self) -> String {
        let mut w = XmlWriter::new();
        w.open_flat("statistics");
        for p in &self.state.projects {
            let url = &p.project.master_url;
            let name = format!(
                "statistics_{}.xml",
                ferrite_proto::account::escape_project_url(url)
            );
            let stats = read_text(&self.dir.join(&name))
                .and_then(|t| ProjectStatistics::parse(&t, &name).ok())
                .map(|p| p.value)
                .unwrap_or_else(|| ProjectStatistics {
                    master_url: url.clone(),
                    daily: Vec::new(),
                });
            stats.write(&mut w);
        }
        w.close_flat("statistics");
        w.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_proto::client_state::CoprocUsage;

    #[test]
    fn the_network_is_online_during_and_just_after_http_exchanges() {
        assert_eq!(network_status(true, 0.0, 100.0), NETWORK_ONLINE);
        assert_eq!(network_status(false, 95.0, 100.0), NETWORK_ONLINE);
        assert_eq!(network_status(false, 85.0, 100.0), NETWORK_WANT_DISCONNECT);
        assert_eq!(network_status(false, 0.0, 5.0), NETWORK_WANT_DISCONNECT);
    }

    #[test]
    fn resources_are_described_as_officially() {
        let usage = |n: f64, gpu: Option<(&str, f64)>| ResourceUsage {
            avg_ncpus: n,
            coprocs: gpu
                .map(|(t, c)| CoprocUsage {
                    rsc_type: t.into(),
                    count: c,
                })
                .into_iter()
                .collect(),
            ..ResourceUsage::default()
        };
        assert_eq!(resources_string(&usage(1.0, None)), None);
        assert_eq!(resources_string(&usage(0.0, None)), None);
        assert_eq!(
            resources_string(&usage(0.5, None)).as_deref(),
            Some("0.5 CPUs")
        );
        assert_eq!(
            resources_string(&usage(4.0, None)).as_deref(),
            Some("4 CPUs")
        );
        assert_eq!(
            resources_string(&usage(0.123456, Some(("NVIDIA", 1.0)))).as_deref(),
            Some("0.123 CPUs + 1 NVIDIA GPU")
        );
        assert_eq!(
            resources_string(&usage(1.0, Some(("ATI", 0.5)))).as_deref(),
            Some("1 CPU + 0.5 AMD/ATI GPUs")
        );
    }

    /// A daemon on a fresh data directory, with no benchmarks and no GPU probe.
    fn daemon_in(dir: &std::path::Path) -> Daemon {
        let opts = crate::cli::Options {
            dir: Some(dir.to_path_buf()),
            skip_cpu_benchmarks: true,
            no_gpus: true,
            ..crate::cli::Options::default()
        };
        Daemon::start(opts, crate::logging::init()).expect("daemon")
    }

    #[test]
    fn screensaver_tasks_have_the_official_root_and_leave_out_tasks_not_running() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut d = daemon_in(dir.path());
        d.state = ferrite_proto::client_state::synthetic(1, 3);
        let p = &d.state.projects[0];
        let (url, result) = (p.project.master_url.clone(), p.results[0].name.clone());
        // A task with a process record but no app running (preempted): not shown.
        d.state.active_tasks.push(ActiveTask {
            project_master_url: url,
            result_name: result.clone(),
            ..ActiveTask::default()
        });
        let x = d.gui_rpc_reply(Request::GetScreensaverTasks);
        assert_eq!(
            x,
            "<handle_get_screensaver_tasks>\n    <suspend_reason>0</suspend_reason>\n\
             </handle_get_screensaver_tasks>\n"
        );
        // The same task is in get_results' active list.
        let active = d.gui_rpc_reply(Request::GetResults { active_only: true });
        assert!(
            active.contains(&format!("<name>{result}</name>")),
            "{active}"
        );
        // Computing suspended by the user: the reason is the official code (4).
        d.gui_rpc_reply(Request::SetRunMode {
            mode: ferrite_gui_rpc::RunMode::Never,
            duration: 0.0,
            at_checkpoint: false,
        });
        let x = d.gui_rpc_reply(Request::GetScreensaverTasks);
        assert!(
            x.contains("    <suspend_reason>4</suspend_reason>\n"),
            "{x}"
        );
    }

    #[test]
    fn newer_version_names_the_download_page_of_nvc_config_or_the_official_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut d = daemon_in(dir.path());
        assert_eq!(
            d.gui_rpc_reply(Request::GetNewerVersion),
            "<newer_version></newer_version>\n\
             <download_url>https://boinc.berkeley.edu/download.php</download_url>\n"
        );
        fs::write(
            dir.path().join("nvc_config.xml"),
            "<nvc_config>\n<client_download_url>https://Mirror.example/get?a=1&amp;b=2</client_download_url>\n</nvc_config>\n",
        )
        .expect("nvc_config");
        assert_eq!(
            d.gui_rpc_reply(Request::GetNewerVersion),
            "<newer_version></newer_version>\n\
             <download_url>https://mirror.example/get?a=1&amp;b=2</download_url>\n"
        );
    }
}
