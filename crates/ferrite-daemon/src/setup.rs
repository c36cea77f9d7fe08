//! Start-up and configuration: account files, command-line actions, `cc_config.xml` and the
//! preferences read at start-up and again on SIGHUP.

use anyhow::Context as _;
use ferrite_proto::client_state::ClientState;
use ferrite_proto::xml::Warning;
use tracing::{error, info, warn};

use crate::clock::now;
use crate::config::{self, Config};
use crate::{anonymous, Daemon};

impl Daemon {
    pub(crate) fn log_warnings(&mut self, warnings: impl IntoIterator<Item = Warning>) {
        for w in warnings {
            let key = (w.file.clone(), w.element.clone(), w.message.clone());
            if self.warned.insert(key) {
                // The official client makes notices of what it cannot use in an
                // app_config.xml; other documents' oddities are only logged (a cc_config.xml
                // that parses to its end has its notices withdrawn at once).
                if w.file.ends_with("app_config.xml") {
                    warn!(target: crate::messages::NOTICE_TARGET, "{w}");
                } else {
                    warn!("{w}");
                }
            }
        }
    }

    /// As the official client: every account file (`account_*.xml`) names an attached
    /// project, whether or not the state file knows it (a volunteer may bring account files
    /// from another host, and a lost state file leaves only them). Projects of the account
    /// files that the state lacks are attached with no tasks; `lost_state` says the state
    /// file was damaged, so their tasks were lost with it.
    pub(crate) fn attach_account_file_projects(&mut self, lost_state: bool) {
        let (projects, problems) = config::projects_from_account_files(&self.dir);
        for (name, why) in problems {
            warn!("account file {name} not used: {why}");
        }
        for ps in projects {
            let url = ps.project.master_url.clone();
            if self.state.projects.iter().any(|p| {
                ferrite_proto::account::canonicalize_master_url(&p.project.master_url) == url
            }) {
                continue;
            }
            if lost_state {
                warn!(
                    project = %url,
                    "project {url} kept attached from its account file; its tasks were lost \
                     with the state file"
                );
            } else {
                info!(project = %url, "project {url} attached from its account file");
            }
            self.state.projects.push(ps);
        }
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
        // Command-line options that mirror cc_config options add to them.
        let (o, c) = (&self.opts, &mut config.cc.options);
        c.unsigned_apps_ok |= o.unsigned_apps_ok;
        c.no_info_fetch |= o.no_info_fetch;
        c.suppress_net_info |= o.suppress_net_info;
        c.exit_before_start |= o.exit_before_start;
        c.allow_multiple_clients |= o.allow_multiple_clients;
        if let Some(d) = o.start_delay {
            c.start_delay = d;
        }
        self.config = config;
        self.gpu_control.load(&self.dir, &self.opts);
        self.log_warnings(report.warnings);
        if !report.errors.iter().any(|e| e.contains("cc_config.xml")) {
            crate::messages::MessageLog::global().remove_notices_mentioning("cc_config.xml");
        }
        for e in report.errors {
            if is_config_file(&e) {
                warn!(target: crate::messages::NOTICE_TARGET, "{e}");
            } else {
                error!("{e}");
            }
        }
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

/// Whether a configuration report is about `cc_config.xml` or an `app_config.xml` (the
/// official client's notices name those files).
pub(crate) fn is_config_file(what: &str) -> bool {
    what.contains("cc_config.xml") || what.contains("app_config.xml")
}

/// Records the BOINC version Ferrite reports ([`ferrite_proto::version::PROTOCOL_VERSION`]) in
/// the state, so every request, upload and app sees it; a data directory last used by
/// another version is said in the log, as the official client does.
pub(crate) fn adopt_protocol_version(state: &mut ClientState) {
    let ours = ferrite_proto::version::PROTOCOL_VERSION;
    let old = state.core_client_version;
    if old != ours && old != ferrite_proto::client_state::ClientVersion::default() {
        info!("Version change ({old} -> {ours})");
    }
    state.core_client_version = ours;
}
