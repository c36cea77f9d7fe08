//! Applying a GUI RPC [`Command`]: each arm hands the change to the part of the daemon that
//! owns it (the task table, the project loop, the transfers, the account manager, host
//! watching, the configuration) and marks the state for saving; the main loop runs a pass
//! after every command. The reply is the command's outcome.

use std::fs;
use std::io;

use ferrite_gui_rpc::{reply, HostInfoUpdate, ResultAction, RunMode as RpcRunMode};
use ferrite_proto::app_config::AppConfig;
use ferrite_proto::cc_config::CcConfig;
use tracing::{error, info, warn};

use crate::config::{self, APP_CONFIG, CC_CONFIG};
use crate::projects::WebRpcKind;
use crate::rpc::named_project;
use crate::rpc::route::Command;
use crate::run_modes::{set_mode, ModeKind};
use crate::tasks::EXIT_ABORTED_VIA_GUI;
use crate::Daemon;

impl Daemon {
    /// Applies `command` at `t`; returns the reply.
    pub(crate) fn apply(&mut self, command: Command, t: f64) -> String {
        match command {
            Command::SetMode {
                kind,
                mode,
                duration,
                at_checkpoint,
            } => self.rpc_set_mode(kind, mode, duration, at_checkpoint, t),
            Command::Task {
                op,
                project_url,
                name,
            } => self.rpc_result_op(op, &project_url, &name, t),
            Command::Project { op, project_url } => self.rpc_project_op(op, &project_url, t),
            Command::Transfer {
                op,
                project_url,
                filename,
            } => self.rpc_file_transfer_op(op, &project_url, &filename, t),
            Command::NetworkAvailable => self.rpc_network_available(t),
            Command::Attach {
                project_url,
                authenticator,
                project_name,
                use_config_file,
            } => self.rpc_project_attach(
                &project_url,
                &authenticator,
                &project_name,
                use_config_file,
                t,
            ),
            Command::LookupAccount(a) => self.rpc_account(WebRpcKind::LookupAccount, &a),
            Command::CreateAccount(a) => self.rpc_account(WebRpcKind::CreateAccount, &a),
            Command::GetProjectConfig { url } => self.rpc_get_project_config(&url),
            Command::AcctMgrSync {
                url,
                name,
                password,
                use_config_file,
            } => self.rpc_acct_mgr_sync(url, name, password, use_config_file, t),
            Command::Reload => {
                self.reload();
                reply::SUCCESS.to_owned()
            }
            Command::WriteConfig { file, raw } => {
                if file == CC_CONFIG && !raw.trim().is_empty() {
                    if let Err(e) = CcConfig::parse(&raw, CC_CONFIG) {
                        warn!("set_cc_config: {e}; file written anyway, defaults apply");
                    }
                }
                self.rpc_write_config_file(file, &raw)
            }
            Command::SetAppConfig { url, app_config } => self.rpc_set_app_config(&url, app_config),
            Command::RunBenchmarks => {
                self.start_benchmarks();
                reply::SUCCESS.to_owned()
            }
            Command::ResetHostInfo => {
                self.detect_host();
                reply::SUCCESS.to_owned()
            }
            Command::SetHostInfo(update) => self.rpc_set_host_info(update, t),
            Command::MeasureDiskUsage => {
                self.update_disk_usages();
                self.disk_usage_xml()
            }
            Command::SetLanguage(language) => {
                self.state.language = Some(language);
                self.save.mark_dirty(t);
                reply::SUCCESS.to_owned()
            }
            Command::SetProxy(raw) => {
                self.state.proxy_info =
                    Some(format!("<proxy_info>\n{}\n</proxy_info>", raw.trim()));
                self.projects.reset_http();
                self.save.mark_dirty(t);
                reply::SUCCESS.to_owned()
            }
            Command::Quit => reply::SUCCESS.to_owned(),
        }
    }

    fn rpc_set_host_info(&mut self, update: Option<HostInfoUpdate>, t: f64) -> String {
        let Some(h) = update else {
            return reply::error("Missing host_info");
        };
        let hi = &mut self.state.host_info;
        if let Some(v) = h.product_name {
            hi.product_name = Some(v);
        }
        if let Some(v) = h.os_name {
            hi.os_name = v;
        }
        if let Some(v) = h.os_version {
            hi.os_version = v;
        }
        if let Some(v) = h.domain_name {
            hi.domain_name = v;
        }
        self.save.mark_dirty(t);
        reply::SUCCESS.to_owned()
    }

    fn rpc_set_mode(
        &mut self,
        kind: ModeKind,
        mode: RpcRunMode,
        duration: f64,
        at_checkpoint: bool,
        t: f64,
    ) -> String {
        set_mode(&mut self.state, &mut self.modes, kind, mode, duration, t);
        if kind == ModeKind::Cpu {
            self.modes.suspend_at_checkpoint = at_checkpoint && mode == RpcRunMode::Never;
        }
        let name = match kind {
            ModeKind::Cpu => "run",
            ModeKind::Gpu => "GPU",
            ModeKind::Network => "network",
        };
        info!(
            "{name} mode set to {}{}{}",
            mode.tag(),
            if duration > 0.0 {
                format!(" for {duration:.0} s")
            } else {
                String::new()
            },
            if kind == ModeKind::Cpu && self.modes.suspend_at_checkpoint {
                " (running tasks that checkpoint are suspended at their next checkpoint)"
            } else {
                ""
            }
        );
        self.save.mark_dirty(t);
        reply::SUCCESS.to_owned()
    }

    fn rpc_result_op(&mut self, op: ResultAction, url: &str, name: &str, t: f64) -> String {
        let ps = match named_project(&mut self.state, url) {
            Ok(ps) => ps,
            Err(e) => return e,
        };
        if name.is_empty() {
            return reply::error("Missing result name");
        }
        let master = ps.project.master_url.clone();
        let project = ps.project.name_or_url().to_owned();
        let Some(r) = ps.result_mut(name) else {
            return reply::error("no such result");
        };
        match op {
            ResultAction::Suspend => {
                r.suspended_via_gui = true;
                info!(project = %project, "task {name} suspended by user");
            }
            ResultAction::Resume => {
                r.suspended_via_gui = false;
                info!(project = %project, "task {name} resumed by user");
            }
            ResultAction::Abort => {
                info!(project = %project, "task {name} aborted by user");
                // Its app (if any) is aborted; the saved task record goes with it.
                self.tasks
                    .abort_result(&mut self.state, &master, name, EXIT_ABORTED_VIA_GUI, t);
            }
        }
        self.save.mark_dirty(t);
        reply::SUCCESS.to_owned()
    }

    /// Writes (or, for an empty body, deletes) a configuration file of the data directory,
    /// then re-reads the configuration.
    fn rpc_write_config_file(&mut self, name: &str, raw: &str) -> String {
        let path = self.dir.join(name);
        let result = if raw.trim().is_empty() {
            match fs::remove_file(&path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                other => other,
            }
        } else {
            config::write_atomic(&path, &format!("{}\n", raw.trim()))
        };
        match result {
            Ok(()) => {
                info!("{name} changed through GUI RPC");
                self.reload();
                reply::SUCCESS.to_owned()
            }
            Err(e) => {
                error!("cannot write {}: {e}", path.display());
                reply::status(-108)
            }
        }
    }

    fn rpc_set_app_config(&mut self, url: &str, app_config: Option<String>) -> String {
        let Some(text) = app_config else {
            return reply::error("XML parse failed");
        };
        let Some(ps) = self.state.project(url) else {
            return reply::error("no such project");
        };
        if AppConfig::parse(&text, APP_CONFIG).is_err() {
            return reply::error("XML parse failed");
        }
        let dir = config::project_dir(&self.dir, &ps.project.master_url);
        let written = fs::create_dir_all(&dir).and_then(|()| {
            config::write_atomic(&dir.join(APP_CONFIG), &format!("{}\n", text.trim()))
        });
        match written {
            Ok(()) => reply::SUCCESS.to_owned(),
            Err(e) => {
                error!("cannot write {}: {e}", dir.join(APP_CONFIG).display());
                reply::error(&format!("can't write {APP_CONFIG}"))
            }
        }
    }
}
