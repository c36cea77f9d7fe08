//! The daemon's start-up (`Daemon::start`, `Daemon::start_with`): the data directory locked,
//! the `Daemon` built field by field, then its phases (the state loaded, the configuration
//! read, the host detected, the files checked), each reported to systemd and each followed by
//! a look at the stop flag. The stop flag, the watch and the loading thread are `startup.rs`.

use std::collections::HashSet;

use anyhow::Context as _;
use ferrite_proto::client_state::ClientState;
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::cli::Options;
use crate::clock::now;
use crate::config::{self, Config};
use crate::lock::DirLock;
use crate::logging::LogHandle;
use crate::sdnotify::Notifier;
use crate::setup::adopt_protocol_version;
use crate::startup::{Progress, Started, StopFlag};
use crate::{
    acct_mgr, anonymous, docker, filecheck, gpu_control, history, host, http_tasks, notices,
    persist, projects, rpc, run_modes, show_projects, tasks, throttle, transfers, tuning, Daemon,
};

impl Daemon {
    /// Locks the data directory and loads state and configuration.
    pub fn start(opts: Options, log: LogHandle) -> anyhow::Result<Self> {
        let mut progress = Progress::new(Notifier::from_env());
        match Daemon::start_with(opts, log, &StopFlag::new(), &mut progress)? {
            Started::Ready(daemon) => Ok(*daemon),
            Started::Stopped => anyhow::bail!("stopped during the start-up"),
        }
    }

    /// [`Daemon::start`], stopping early when `stop` is asked for (see the module's text)
    /// and telling systemd through `progress` how it goes.
    pub fn start_with(
        opts: Options,
        log: LogHandle,
        stop: &StopFlag,
        progress: &mut Progress,
    ) -> anyhow::Result<Started<Daemon>> {
        let dir = opts.data_dir();
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create data directory {}", dir.display()))?;
        let lock = DirLock::acquire(&dir)?;
        info!(
            "Ferrite {} starting in {}",
            env!("CARGO_PKG_VERSION"),
            dir.display()
        );

        let (events, inbox) = mpsc::channel(64);
        let mut daemon =
            Self {
                state: ClientState::default(),
                config: Config::empty(),
                save: persist::Persistence::new(&dir),
                warned: HashSet::new(),
                host: host::HostWatch::new(now()),
                app_started_at: None,
                _lock: lock,
                tasks: tasks::TaskTable::new(&dir),
                throttle: throttle::Throttle::new(),
                transfers: transfers::Transfers::new(&dir)
                    .with_history(history::XferHistory::load(&dir, now(), 0)),
                verified: filecheck::Verified::default(),
                projects: projects::ProjectLoop::default(),
                feeds: notices::Feeds::default(),
                notifier: progress.notifier().clone(),
                metrics: None,
                usage: None,
                time_session: ferrite_project::stats::TimeSession::start(
                    &mut ferrite_proto::client_state::TimeStats::default(),
                    0.0,
                ),
                state_epoch: 0,
                docker: docker::Janitor::default(),
                gpu_control: gpu_control::GpuControlState::default(),
                acct_mgr: acct_mgr::AcctMgr::default(),
                dir,
                opts,
                log,
                events,
                inbox,
                rpc: rpc::RpcState::default(),
                http_tasks: http_tasks::HttpTasks::default(),
                modes: run_modes::RunModes::default(),
                tick_soon: true,
                last_comm: 0.0,
            };
        if !daemon.load_state(stop) {
            info!(
                "{} during the start-up, before the state was loaded: nothing to save; exiting",
                stop.reason()
            );
            return Ok(Started::Stopped);
        }
        // What the start-up changes from here on is saved if a stop comes.
        let loaded = daemon.save.generation();
        if daemon.phase_done("state loaded", stop, progress) {
            return daemon.stop_in_start_up(stop, loaded);
        }
        adopt_protocol_version(&mut daemon.state);
        daemon.time_session =
            ferrite_project::stats::TimeSession::start(&mut daemon.state.time_stats, now());
        daemon.load_config();
        daemon.init_acct_mgr();
        if daemon.phase_done("configuration read", stop, progress) {
            return daemon.stop_in_start_up(stop, loaded);
        }
        let tuning = tuning::Tuning::from_options(&daemon.opts);
        let changed = tuning.changes();
        if !changed.is_empty() {
            info!(
                "retry figures from the command line: {}",
                changed.join(", ")
            );
        }
        daemon.projects.tuning = tuning;
        daemon.transfers.tuning = tuning;
        for (name, why) in daemon.opts.not_applicable() {
            info!("--{name} accepted; it does nothing here: {why}");
        }
        for url in config::projects_without_account(&daemon.dir, &daemon.state) {
            warn!(
                "project {url} has no account file; its tasks are kept, but it cannot contact \
                 its server until it is attached again"
            );
        }
        daemon.load_feeds(now());
        daemon.detect_host();
        if daemon.phase_done("host detected", stop, progress) {
            return daemon.stop_in_start_up(stop, loaded);
        }
        // This session's figures, not the last session's from the state file.
        daemon.state.time_stats.client_start_time = daemon.host.started_at;
        daemon.apply_command_line()?;
        // After `--attach_project`: a project attached there has its disk share from the start.
        daemon.refresh_usage(daemon.host.started_at);
        // As the official client after reading its state file: projects in name order, the
        // order of the state file and of every GUI RPC reply.
        daemon.state.sort_projects_by_name();
        if daemon.opts.show_projects {
            for line in show_projects(&daemon.state) {
                info!("{line}");
            }
        }
        // Before anything looks at apps: app_info.xml replaces an anonymous project's.
        if anonymous::load_all(&daemon.dir, &mut daemon.state, &daemon.config.cc.options) {
            daemon.save.mark_dirty(now());
        }
        daemon.tasks.recover(&mut daemon.state);
        if daemon.phase_done("tasks recovered", stop, progress) {
            return daemon.stop_in_start_up(stop, loaded);
        }
        if daemon.find_trickle_ups() {
            daemon.save.mark_dirty(now());
        }
        let multiple = daemon.config.cc.options.allow_multiple_clients;
        daemon.docker.at_start(&daemon.state, multiple);
        // As the official client does at start-up: files lost in a crash or a copy are
        // fetched again, and only the tasks whose files cannot come back fail.
        // App files hashed before and unchanged since are not read again.
        let check_sizes = !daemon.config.cc.options.dont_check_file_sizes;
        daemon.verified = filecheck::Verified::load(&daemon.dir);
        if filecheck::check_all(
            &daemon.dir,
            &mut daemon.state,
            &mut daemon.verified,
            check_sizes,
            None,
            now(),
        ) {
            daemon.save.mark_dirty(now());
        }
        if daemon.phase_done("files checked", stop, progress) {
            return daemon.stop_in_start_up(stop, loaded);
        }
        Ok(Started::Ready(Box::new(daemon)))
    }

    /// Phase `what` of the start-up is done: systemd hears of it; true when a stop was asked.
    fn phase_done(&mut self, what: &str, stop: &StopFlag, progress: &mut Progress) -> bool {
        progress.done(what);
        stop.asked().is_some()
    }

    /// A stop came during the start-up, the state loaded: what the start-up changed since
    /// generation `loaded` (the state as loaded) is saved; nothing else runs.
    fn stop_in_start_up(mut self, stop: &StopFlag, loaded: u64) -> anyhow::Result<Started<Daemon>> {
        let _ = self.notifier.stopping();
        if self.save.generation() > loaded {
            info!("{} during the start-up; saving the state", stop.reason());
            self.save.save_at_exit(&self.state);
            if self.save.is_dirty() {
                anyhow::bail!(
                    "exiting with the state not saved; the previous state file is intact"
                );
            }
        } else {
            info!(
                "{} during the start-up; nothing changed to save",
                stop.reason()
            );
        }
        info!("exiting");
        Ok(Started::Stopped)
    }
}
