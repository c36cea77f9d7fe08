//! Start-up and SIGHUP steps that borrow several parts: the command line's actions, the
//! configuration and what depends on it (logging, GPU control, disk figures, HTTP).

use anyhow::Context as _;
use ferrite_proto::client_state::ClientState;
use ferrite_proto::xml::Warning;
use tracing::{info, warn};

use crate::clock::now;
use crate::config::{self, Config};
use crate::{anonymous, setup, Daemon};

impl Daemon {
    pub(crate) fn log_warnings(&mut self, warnings: impl IntoIterator<Item = Warning>) {
        setup::log_new_warnings(&mut self.warned, warnings);
    }

    /// The projects of account files the state lacks are attached
    /// ([`setup::attach_account_file_projects`]).
    pub(crate) fn attach_account_file_projects(&mut self, lost_state: bool) {
        setup::attach_account_file_projects(&self.dir, &mut self.state, lost_state);
    }

    pub(crate) fn apply_command_line(&mut self) -> anyhow::Result<()> {
        if let Some(url) = self.opts.reset_project.clone() {
            match self
                .state
                .project(&url)
                .map(|p| p.project.master_url.clone())
            {
                Some(url) => {
                    info!("resetting {url} (--reset_project)");
                    self.reset_project(&url, now());
                    self.save.mark_dirty(now());
                }
                None => warn!("--reset_project {url}: not attached to that project"),
            }
        }
        if let Some(url) = self.opts.update_prefs.clone() {
            match self.state.project_mut(&url) {
                Some(ps) => {
                    info!("contacting {url} to update preferences (--update_prefs)");
                    ps.project.sched_rpc_pending =
                        Some(ferrite_proto::client_state::RpcReason::UserReq);
                    ps.project.min_rpc_time = 0.0;
                    self.save.mark_dirty(now());
                }
                None => warn!("--update_prefs {url}: not attached to that project"),
            }
        }
        let attached = |state: &ClientState, url: &str| {
            let url = ferrite_proto::account::canonicalize_master_url(url);
            state.project(&url).is_some()
        };
        if let Some((url, _)) = self.opts.attach().filter(|(u, _)| attached(&self.state, u)) {
            // As the official client: nothing to do (a project kept from its account file
            // after the state file was lost is one).
            info!("--attach_project {url}: already attached");
        } else if let Some((url, key)) = self.opts.attach() {
            let url = url.to_owned();
            let key = key.to_owned();
            config::attach_project(&self.dir, &mut self.state, &url, &key)
                .with_context(|| format!("cannot attach to {url}"))?;
            info!("attached to {url}; fetching its master page and asking for work");
            self.save.mark_dirty(now());
            // The configuration was read before the project was attached: its
            // `app_config.xml`, if one is already there, applies from the first pass.
            let (fresh, _) = Config::load(&self.dir, &self.state, now());
            self.config.app_configs = fresh.app_configs;
        }
        if let Some(url) = self.opts.detach_project.clone() {
            match config::detach_project(&self.dir, &mut self.state, &url) {
                Ok(true) => {
                    info!("detached from {url}");
                    self.save.mark_dirty(now());
                }
                Ok(false) => warn!("--detach_project {url}: not attached to that project"),
                Err(e) => return Err(e).with_context(|| format!("cannot detach from {url}")),
            }
        }
        Ok(())
    }

    pub(crate) fn load_config(&mut self) {
        let (mut config, report) = Config::load(&self.dir, &self.state, now());
        setup::add_command_line_options(&self.opts, &mut config.cc.options);
        self.config = config;
        self.gpu_control.load(&self.dir, &self.opts);
        self.log_warnings(report.warnings);
        setup::report_config_errors(report.errors);
        self.log.set(&self.config.log_directives());
        // The official client measures disk usage whenever it reads the preferences.
        self.update_disk_usages();
        self.log
            .set_max_file_size(self.config.cc.options.max_stdout_file_size);
    }

    pub(crate) fn reload(&mut self) {
        info!("re-reading configuration files");
        let _ = self.notifier.reloading();
        // A re-read file may repeat old oddities: log them again.
        self.warned.clear();
        self.load_config();
        if anonymous::load_all(&self.dir, &mut self.state, &self.config.cc.options) {
            self.save.mark_dirty(now());
        }
        self.projects.reset_http();
        // GPU options may have changed, and a driver may have appeared since start-up.
        self.reprobe_gpus(now());
        let _ = self.notifier.ready_with_status(&self.status_line());
    }
}
