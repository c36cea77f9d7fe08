//! GUI RPC queries (`Daemon::query`): replies built from a shared borrow of the daemon's
//! state, configuration and data directory, with the official element names and order. The
//! replies that list the state (`get_state`, `get_results` and kin) are in `state_reply.rs`.

use ferrite_gui_rpc::{reply, Body, Request};
use ferrite_proto::statistics::ProjectStatistics;
use ferrite_proto::xml::XmlWriter;

use crate::config::{self, CC_CONFIG, GLOBAL_PREFS, GLOBAL_PREFS_OVERRIDE};
use crate::messages::{notices_xml, MessageLog};
use crate::projects::WebRpcKind;
use crate::rpc::route::Query;
use crate::rpc::status::*;
use crate::run_modes::{current_mode, mode_delay, ModeKind};
use crate::Daemon;

impl Daemon {
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
            Request::GetDailyXferHistory => self.transfers.history().days().to_xml(),
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

    /// The suspend reason the GUI shows for a kind of activity: the last decision for
    /// computing (0 while merely throttled, as the official client shows it), the run mode and
    /// the preferences' network hours for the network.
    pub(super) fn shown_suspend_reason(&self, kind: ModeKind, t: f64) -> i32 {
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

    pub(crate) fn disk_usage_xml(&self) -> String {
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
    use ferrite_proto::client_state::ActiveTask;
    use std::fs;

    /// A daemon on a fresh data directory, with no benchmarks and no GPU probe.
    fn daemon_in(dir: &std::path::Path) -> Daemon {
        let opts = crate::test_options(dir);
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
