//! The Ferrite daemon: the imperative shell around Ferrite's pure cores.
//!
//! [`Daemon`] owns the client's state. One main loop ([`Daemon::run`]) takes [`Event`]s from
//! everything else (signal listeners now; transfers, apps and GUI RPC connections as they come)
//! and is the only code that changes state. The loop saves the state file through the
//! crash-safe [`store`] whenever the state changed, at most once a second.

pub mod acct_mgr;
pub mod activity;
pub mod anonymous;
pub mod cli;
pub mod config;
pub mod docker;
pub mod filecheck;
pub mod gpu_control;
pub mod history;
pub mod lock;
pub mod logging;
pub mod memory;
pub mod metrics;
pub mod notices;
pub mod projects;
pub mod rpc;
pub mod sdnotify;
pub mod snapshot;
pub mod store;
pub mod tasks;
pub mod throttle;
pub mod transfers;
pub mod tuning;
pub mod web;
pub mod writer;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use ferrite_hostinfo::{BenchmarkResult, HostDetector, HostProbeConfig};
use ferrite_proto::client_state::{ClientState, ResultState};
use ferrite_proto::xml::Warning;
use ferrite_sched::suspend::SuspendReason;
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use crate::cli::Options;
use crate::config::Config;
use crate::lock::DirLock;
use crate::logging::LogHandle;
use crate::store::{LoadSource, SavePolicy, StateStore};

/// How often to look for a GPU driver that was not there at start-up, seconds.
const GPU_REPROBE_SECS: f64 = 120.0;

/// How often to check whether the CPU benchmarks are due again (every 30 days), seconds.
const BENCHMARK_CHECK_SECS: f64 = 3600.0;

/// Seconds since the Unix epoch, as BOINC counts time.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// What the main loop reacts to.
#[derive(Debug)]
pub enum Event {
    /// Stop: save the state, stop children, exit (SIGTERM, SIGINT, or a control request).
    Shutdown(&'static str),
    /// Re-read `cc_config.xml`, `global_prefs_override.xml` and every `app_config.xml` (SIGHUP).
    Reload,
    /// The CPU benchmarks finished (they run on a blocking thread).
    BenchmarksDone(BenchmarkResult),
    /// A GUI RPC request, to be answered from the state.
    GuiRpc(ferrite_gui_rpc::Call),
    /// A master fetch or scheduler RPC ended.
    Project(projects::OpDone),
    /// A file transfer attempt ended.
    Transfer(transfers::TransferDone),
    /// A web RPC of the attach wizard ended (reply text, or a BOINC error code).
    WebRpc(projects::WebRpcKind, Result<String, i32>),
    /// A news feed or project list fetch ended.
    Info(notices::InfoFetched),
    /// A child process ended (SIGCHLD): an app exited, so its CPU can be given to the next
    /// task now rather than at the next tick.
    ChildExited,
    /// An account-manager sync ended (reply text, or a BOINC error code and its text).
    AcctMgr(Result<String, (i32, String)>),
}

/// The running client.
#[derive(Debug)]
pub struct Daemon {
    opts: Options,
    dir: PathBuf,
    _lock: DirLock,
    store: StateStore,
    /// Writes the state file on its own thread once the main loop runs.
    writer: Option<writer::StateWriter>,
    /// Outcomes of the writer's saves.
    saved_tx: mpsc::UnboundedSender<writer::SaveDone>,
    saved_rx: mpsc::UnboundedReceiver<writer::SaveDone>,
    state: ClientState,
    config: Config,
    save: SavePolicy,
    log: LogHandle,
    /// When to look for GPUs again (no driver answered yet).
    gpu_retry_at: Option<f64>,
    /// The last GPU probe's note ("No NVIDIA GPU: …"), logged only when it changes.
    gpu_note: Option<String>,
    /// The used devices of each GPU type, from the last GPU probe.
    gpu_instances: BTreeMap<String, Vec<ferrite_hostinfo::GpuInstance>>,
    /// When to look at overdue tasks again (at start-up, then daily).
    next_overdue_check: f64,
    /// The CPU benchmarks are running on a blocking thread.
    benchmarks_running: bool,
    /// User input, battery, exclusive apps and other programs' CPU load.
    activity: activity::ActivityMonitor,
    /// Wall time the daemon started (for `start_delay`).
    started_at: f64,
    /// When the first app started since start-up (for `--exit_after_app_start`).
    app_started_at: Option<f64>,
    /// Next refresh of the disk figures kept in the state (projects' `disk_usage`, the
    /// host's free space).
    next_usage_refresh: f64,
    /// Why computing (all of it, then GPU computing only) is suspended, as last decided.
    pub(crate) suspended: (Option<SuspendReason>, Option<SuspendReason>),
    /// Last time other programs' CPU load was over `suspend_cpu_usage`.
    cpu_busy_at: Option<f64>,
    /// Warnings already logged, so each kind is logged once.
    warned: HashSet<(Arc<str>, String, String)>,
    events: mpsc::Sender<Event>,
    inbox: mpsc::Receiver<Event>,
    /// GUI RPC state kept between calls (temporary run modes).
    rpc: rpc::RpcState,
    /// The apps: processes, slots, and the scheduling core that decides what runs.
    tasks: tasks::TaskTable,
    /// CPU throttling (`cpu_usage_limit`).
    throttle: throttle::Throttle,
    /// Run a supervision tick at the next turn of the loop (a GUI request changed something).
    tick_soon: bool,
    /// The project loop: master fetches and scheduler RPCs.
    projects: projects::ProjectLoop,
    /// Project news feeds and their schedule.
    feeds: notices::Feeds,
    /// The project list is being fetched.
    project_list_in_flight: bool,
    /// File transfers.
    transfers: transfers::Transfers,
    /// systemd's notification socket (a no-op outside a `Type=notify` unit).
    notifier: sdnotify::Notifier,
    /// The latest OpenMetrics text, when the metrics endpoint is on.
    metrics: Option<tokio::sync::watch::Sender<String>>,
    /// The daemon's own CPU and memory over time, kept while the HTTP server is on.
    usage: Option<web::UsageHistory>,
    /// Bytes received and sent by finished transfer attempts since start-up.
    xfer_bytes: (u64, u64),
    /// Bytes transferred per day (`daily_xfer_history.xml`).
    xfer_history: history::XferHistory,
    /// This run's part of the time statistics that scheduler requests report.
    time_session: ferrite_project::stats::TimeSession,
    /// Bumped whenever the state may have changed (any event but a read-only GUI query,
    /// every tick): replies cached for one epoch stay exact.
    pub(crate) state_epoch: u64,
    /// Docker/Podman images and containers of ended jobs.
    docker: docker::Janitor,
    /// Per-GPU control for every project (Ferrite only).
    gpu_control: gpu_control::GpuControlState,
    /// The account manager in use and its sync clock.
    acct_mgr: acct_mgr::AcctMgr,
}

impl Daemon {
    /// Locks the data directory and loads state and configuration.
    pub fn start(opts: Options, log: LogHandle) -> anyhow::Result<Self> {
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
        let (saved_tx, saved_rx) = mpsc::unbounded_channel();
        let mut daemon = Self {
            store: StateStore::new(&dir),
            writer: None,
            saved_tx,
            saved_rx,
            state: ClientState::default(),
            config: Config::empty(),
            save: SavePolicy::new(1.0),
            warned: HashSet::new(),
            gpu_retry_at: None,
            gpu_note: None,
            gpu_instances: BTreeMap::new(),
            next_overdue_check: 0.0,
            benchmarks_running: false,
            activity: activity::ActivityMonitor::from_env(),
            started_at: now(),
            app_started_at: None,
            next_usage_refresh: 0.0,
            suspended: (None, None),
            cpu_busy_at: None,
            _lock: lock,
            tasks: tasks::TaskTable::new(&dir),
            throttle: throttle::Throttle::new(),
            transfers: transfers::Transfers::new(&dir),
            projects: projects::ProjectLoop::default(),
            feeds: notices::Feeds::default(),
            project_list_in_flight: false,
            notifier: sdnotify::Notifier::from_env(),
            metrics: None,
            usage: None,
            xfer_bytes: (0, 0),
            xfer_history: history::XferHistory::load(&dir, now(), 0),
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
            tick_soon: true,
        };
        daemon.load_state();
        adopt_protocol_version(&mut daemon.state);
        daemon.time_session =
            ferrite_project::stats::TimeSession::start(&mut daemon.state.time_stats, now());
        daemon.load_config();
        daemon.init_acct_mgr();
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
        // This session's figures, not the last session's from the state file.
        daemon.state.time_stats.client_start_time = daemon.started_at;
        daemon.refresh_usage(daemon.started_at);
        daemon.apply_command_line()?;
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
        let multiple = daemon.config.cc.options.allow_multiple_clients;
        daemon.docker.at_start(&daemon.state, multiple);
        // As the official client does at start-up: files lost in a crash or a copy are
        // fetched again, and only the tasks whose files cannot come back fail.
        let check_sizes = !daemon.config.cc.options.dont_check_file_sizes;
        if filecheck::check_all(&daemon.dir, &mut daemon.state, check_sizes, None, now()) {
            daemon.save.mark_dirty(now());
        }
        Ok(daemon)
    }

    /// The state as loaded or changed so far.
    pub fn state(&self) -> &ClientState {
        &self.state
    }

    /// A sender for events to the main loop.
    pub fn sender(&self) -> mpsc::Sender<Event> {
        self.events.clone()
    }

    fn log_warnings(&mut self, warnings: impl IntoIterator<Item = Warning>) {
        for w in warnings {
            let key = (w.file.clone(), w.element.clone(), w.message.clone());
            if self.warned.insert(key) {
                // The official client makes notices of what it cannot use in an
                // app_config.xml; other documents' oddities are only logged (a cc_config.xml
                // that parses to its end has its notices withdrawn at once).
                if w.file.ends_with("app_config.xml") {
                    warn!(target: rpc::messages::NOTICE_TARGET, "{w}");
                } else {
                    warn!("{w}");
                }
            }
        }
    }

    fn load_state(&mut self) {
        let loaded = self.store.load(ClientState::parse);
        for r in &loaded.rejected {
            warn!("state file {} not used: {}", r.path.display(), r.reason);
            // A damaged current or previous generation may still hold tasks a person can
            // recover by hand: keep a copy before saves rotate it away. (A cut-short
            // client_state_next.xml is the normal trace of a crash during a save.)
            if !r.path.ends_with(store::STATE_FILE_NEXT) {
                let stamp = now() as u64;
                let mut kept = self.dir.join(format!("client_state_damaged_{stamp}.xml"));
                let mut n = 1;
                while kept.exists() {
                    kept = self
                        .dir
                        .join(format!("client_state_damaged_{stamp}_{n}.xml"));
                    n += 1;
                }
                match std::fs::copy(&r.path, &kept) {
                    Ok(_) => warn!("kept a copy of the damaged file as {}", kept.display()),
                    Err(e) => warn!("could not keep a copy of {}: {e}", r.path.display()),
                }
            }
        }
        match (loaded.value, loaded.source) {
            (Some(parsed), source) => {
                if source != LoadSource::Current {
                    warn!(
                        "loaded state from {} (the newest complete state file)",
                        source.file_name().unwrap_or("?")
                    );
                }
                self.log_warnings(parsed.warnings);
                self.state = parsed.value;
            }
            (None, _) if !loaded.rejected.is_empty() => {
                self.state = ClientState::default();
                error!(
                    "no usable state file; starting with a fresh state. Every task of the lost \
                     state file was lost (a project may send lost tasks again)"
                );
            }
            (None, _) => info!("no state file; starting with a fresh state"),
        }
        self.attach_account_file_projects(!loaded.rejected.is_empty());
        for line in state_summary(&self.state) {
            info!("{line}");
        }
        self.save.mark_dirty(now());
    }

    /// As the official client: every account file (`account_*.xml`) names an attached
    /// project, whether or not the state file knows it (a volunteer may bring account files
    /// from another host, and a lost state file leaves only them). Projects of the account
    /// files that the state lacks are attached with no tasks; `lost_state` says the state
    /// file was damaged, so their tasks were lost with it.
    fn attach_account_file_projects(&mut self, lost_state: bool) {
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

    fn apply_command_line(&mut self) -> anyhow::Result<()> {
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

    /// Saves the state when the policy says so; `force` asks for it at once (after the save
    /// in progress, if any). Once the main loop runs, the writer thread does the writing and
    /// [`save_done`](Self::save_done) hears how it went; before that, and at shutdown, the
    /// save happens here.
    fn save_if_due(&mut self, now: f64, force: bool) {
        if force && self.save.is_dirty() {
            self.save.hurry();
        }
        if !self.save.due(now) {
            return;
        }
        let mut xml = self.state.to_xml();
        let generation = self.save.begin(now);
        if let Some(w) = &self.writer {
            match w.submit(xml, generation) {
                Ok(()) => return,
                Err(back) => {
                    warn!("the state writer has stopped; saving on the main loop");
                    self.writer = None;
                    xml = back;
                }
            }
        }
        let r = self.store.save(&xml);
        self.save_done(generation, r);
    }

    /// A save ended: the policy learns it; a failure is said, and the end of failures.
    fn save_done(&mut self, generation: u64, result: Result<(), store::SaveError>) {
        match result {
            Ok(()) => {
                if self.save.failures() > 0 {
                    info!(
                        "state file saved again after {} failed attempts",
                        self.save.failures()
                    );
                }
                self.save.finish(generation, true);
            }
            Err(e) => {
                self.save.finish(generation, false);
                let hint = if e.is_disk_full() {
                    " (disk full: free some space; the last good state is kept)"
                } else {
                    " (the last good state is kept)"
                };
                if self.save.failures() <= 1 {
                    // As the official client: a state file that cannot be written is a notice.
                    warn!(
                        target: rpc::messages::NOTICE_TARGET,
                        "Couldn't write state file; check directory permissions"
                    );
                }
                error!("saving the state failed: {e}{hint}; retrying");
            }
        }
    }

    fn load_config(&mut self) {
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
            rpc::messages::MessageLog::global().remove_notices_mentioning("cc_config.xml");
        }
        for e in report.errors {
            if is_config_file(&e) {
                warn!(target: rpc::messages::NOTICE_TARGET, "{e}");
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

    fn reload(&mut self) {
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

    /// Re-detects the host, keeping what the official client keeps from the state file (the
    /// benchmark figures and the host's cross-project id).
    fn detect_host(&mut self) {
        let mut probe = HostProbeConfig::new(&self.dir);
        probe.gpu = self.config.gpu_config(&self.opts);
        let det = HostDetector::new(probe);
        let found = det.detect_host();
        for w in &found.warnings {
            warn!("host detection: {w}");
        }
        let old = std::mem::take(&mut self.state.host_info);
        let mut host = found.host;
        host.p_fpops = old.p_fpops;
        host.p_iops = old.p_iops;
        host.p_membw = old.p_membw;
        host.p_calculated = old.p_calculated;
        // As the official client: cleared at each start (the volunteer may have turned the
        // extensions on since a VirtualBox app said they were off).
        host.p_vm_extensions_disabled = false;
        host.host_cpid = if old.host_cpid.is_empty() {
            ferrite_hostinfo::generate_host_cpid(Path::new("/sys"), &self.dir)
        } else {
            old.host_cpid
        };
        if self.config.cc.options.ncpus > 0 {
            host.p_ncpus = u32::try_from(self.config.cc.options.ncpus).unwrap_or(host.p_ncpus);
        }
        // cc_config <device_name>: the name projects and GUIs see instead of the host name.
        let device = self.config.cc.options.device_name.trim();
        if !device.is_empty() {
            host.domain_name = device.to_owned();
        }
        host.virtualbox_version = if self.config.cc.options.dont_use_vbox {
            info!("VirtualBox: not looked for (dont_use_vbox in cc_config.xml)");
            None
        } else {
            ferrite_hostinfo::vbox::detect()
        };
        match &host.virtualbox_version {
            Some(v) => info!("VirtualBox version: {v}"),
            None if self.config.cc.options.dont_use_vbox => {}
            None => info!("VirtualBox: not found"),
        }
        if !ferrite_hostinfo::vbox::cpu_has_vm_extensions(&host.p_features) {
            info!("CPU virtualisation extensions (vmx/svm): not available");
        }
        host.docker = ferrite_hostinfo::docker::detect();
        match &host.docker {
            Some((v, t)) => info!(
                "{} version {v} found",
                if *t == ferrite_hostinfo::docker::PODMAN {
                    "Podman"
                } else {
                    "Docker"
                }
            ),
            None => info!("Docker/Podman: not found (or cannot run containers)"),
        }
        let gpus = det.probe_gpus();
        for w in &gpus.warnings {
            info!("GPU detection: {w}");
        }
        for w in &gpus.opencl.warnings {
            info!("OpenCL: {w}");
        }
        for line in ferrite_hostinfo::opencl_lines(&gpus) {
            info!("{line}");
        }
        ferrite_hostinfo::apply_gpu_probe(&mut host, &gpus);
        self.note_gpu_probe(&gpus);
        self.gpu_instances = gpus.instances();
        self.gpu_control.set_devices(&gpus);
        self.gpu_retry_at = gpus.should_retry().then(|| now() + GPU_REPROBE_SECS);
        if host.p_fpops <= 0.0 {
            let d = BenchmarkResult::defaults();
            host.p_fpops = d.p_fpops;
            host.p_iops = d.p_iops;
            host.p_membw = d.p_membw;
        }
        info!(
            "host: {} CPUs ({}), {:.1} GiB memory, {} NVIDIA GPUs, OS {}: {}",
            host.p_ncpus,
            host.p_model,
            host.m_nbytes / f64::from(1u32 << 30),
            host.coprocs.nvidia.as_ref().map_or(0, |n| n.count),
            host.os_name,
            host.os_version
        );
        self.state.host_info = host;
        let platforms = det.platforms();
        if let Some((primary, alt)) = platforms.split_first() {
            self.state.platform_name = primary.clone();
            self.state.alt_platforms = alt.to_vec();
        }
        self.save.mark_dirty(now());
    }

    /// Re-probes GPUs after a start without a usable driver (it may load late at boot).
    fn reprobe_gpus(&mut self, now: f64) {
        let mut probe = HostProbeConfig::new(&self.dir);
        probe.gpu = self.config.gpu_config(&self.opts);
        let gpus = HostDetector::new(probe).probe_gpus();
        let before = self.state.host_info.coprocs.clone();
        ferrite_hostinfo::apply_gpu_probe(&mut self.state.host_info, &gpus);
        self.note_gpu_probe(&gpus);
        self.gpu_instances = gpus.instances();
        self.gpu_control.set_devices(&gpus);
        self.gpu_retry_at = gpus.should_retry().then_some(now + GPU_REPROBE_SECS);
        if self.state.host_info.coprocs != before {
            info!(
                "GPUs found on re-probe: {} NVIDIA",
                self.state
                    .host_info
                    .coprocs
                    .nvidia
                    .as_ref()
                    .map_or(0, |n| n.count)
            );
            self.save.mark_dirty(now);
        }
    }

    /// Logs why no GPU was found, once: a re-probe that finds the same says nothing.
    fn note_gpu_probe(&mut self, gpus: &ferrite_hostinfo::gpu::GpuProbe) {
        let note = gpus.note();
        if note != self.gpu_note {
            if let Some(n) = &note {
                info!("{n}");
            }
            self.gpu_note = note;
        }
    }

    /// Whether the CPU benchmarks are due (first start, or older than 30 days).
    fn benchmarks_due(&self, now: f64) -> bool {
        let skip = self.opts.skip_cpu_benchmarks || self.config.cc.options.skip_cpu_benchmarks;
        !skip
            && !self.benchmarks_running
            && ferrite_hostinfo::benchmarks_due(self.state.host_info.p_calculated, now)
    }

    /// Starts the CPU benchmarks on a blocking thread, unless they are already running.
    fn start_benchmarks(&mut self) {
        if self.benchmarks_running {
            info!("CPU benchmarks are already running");
            return;
        }
        self.benchmarks_running = true;
        let ncpus = self.state.host_info.p_ncpus.max(1);
        let tx = self.events.clone();
        info!("running CPU benchmarks on {ncpus} CPUs (under 10 s)");
        tokio::task::spawn_blocking(move || {
            let r = ferrite_hostinfo::run_benchmarks(ncpus, Duration::from_secs(8));
            let _ = tx.blocking_send(Event::BenchmarksDone(r));
        });
    }

    fn benchmarks_done(&mut self, r: BenchmarkResult, now: f64) {
        self.benchmarks_running = false;
        info!(
            "benchmarks: {:.2e} FLOPS, {:.2e} IOPS, {:.2e} B/s memory per CPU ({:.1} s{})",
            r.p_fpops,
            r.p_iops,
            r.p_membw,
            r.elapsed.as_secs_f64(),
            if r.cpu_share < 0.8 {
                format!(
                    "; other work held {:.0}% of the CPUs, figures may be low",
                    (1.0 - r.cpu_share) * 100.0
                )
            } else {
                String::new()
            }
        );
        let h = &mut self.state.host_info;
        h.p_fpops = r.p_fpops;
        h.p_iops = r.p_iops;
        h.p_membw = r.p_membw;
        h.p_calculated = now;
        self.save.mark_dirty(now);
    }

    /// Runs the main loop until a shutdown event; then saves and stops.
    pub async fn run(mut self) -> anyhow::Result<()> {
        spawn_signal_listeners(self.events.clone())?;
        let gui_rpc = if self.opts.no_gui_rpc {
            info!("GUI RPC off (--no_gui_rpc): no TCP port, no Unix socket");
            None
        } else {
            self.start_gui_rpc()
        };
        let metrics_server = self.start_web().await;
        self.save_if_due(now(), false);
        if self.opts.run_cpu_benchmarks || self.benchmarks_due(now()) {
            self.start_benchmarks();
        }
        let mut next_bench_check = now() + BENCHMARK_CHECK_SECS;
        let mut next_tick = now();
        let ping_every = self.notifier.ping_interval();
        let mut last_ping = std::time::Instant::now();
        if self.config.cc.options.lower_client_priority {
            match lower_io_priority() {
                Ok(n) => info!("running at idle I/O priority ({n} threads; lower_client_priority)"),
                Err(e) => warn!("cannot lower the client's I/O priority: {e}"),
            }
        }
        match writer::StateWriter::start(StateStore::new(&self.dir), self.saved_tx.clone()) {
            Ok(w) => self.writer = Some(w),
            Err(e) => warn!("cannot start the state writer thread ({e}); saving on the main loop"),
        }
        info!("entering main loop");
        let mut reclaim = memory::Reclaimer::new(now());
        if let Err(e) = self.notifier.ready_with_status(&self.status_line()) {
            warn!("cannot notify systemd: {e}");
        }
        let reason = loop {
            let t = now();
            let next = [
                self.save.next_due(),
                self.gpu_retry_at,
                Some(next_tick),
                self.throttle.next_switch(t),
            ]
            .into_iter()
            .flatten()
            .fold(t + 1.0, f64::min);
            let next = if self.tick_soon { t } else { next };
            let wait = (next - t).clamp(0.0, 1.0);
            tokio::select! {
                done = self.saved_rx.recv() => if let Some(d) = done {
                    tracing::debug!("state file written in {:.1} ms", d.secs * 1e3);
                    self.save_done(d.generation, d.result);
                },
                ev = self.inbox.recv() => match ev {
                    Some(Event::Shutdown(why)) => break why,
                    Some(Event::Reload) => {
                        self.state_epoch += 1;
                        self.reload();
                    }
                    Some(Event::BenchmarksDone(r)) => {
                        self.state_epoch += 1;
                        self.benchmarks_done(r, now());
                    }
                    Some(Event::GuiRpc(call)) => {
                        let query = is_query(&call.request);
                        self.handle_gui_rpc(call);
                        reclaim.gui_call(now());
                        if !query {
                            // It may have changed something: decide again now.
                            self.tick_soon = true;
                            self.state_epoch += 1;
                        }
                    }
                    Some(Event::Project(done)) => {
                        self.state_epoch += 1;
                        self.project_op_done(done, now());
                    }
                    Some(Event::WebRpc(kind, result)) => self.projects.web_rpc_done(kind, result),
                    Some(Event::Info(done)) => self.info_fetched(done, now()),
                    Some(Event::ChildExited) => self.tick_soon = true,
                    Some(Event::AcctMgr(result)) => {
                        self.state_epoch += 1;
                        self.acct_mgr_done(result, now());
                    }
                    Some(Event::Transfer(done)) => {
                        self.state_epoch += 1;
                        let t = now();
                        if let Ok(n) = &done.result {
                            let tz = self.state.host_info.timezone;
                            self.xfer_history.add(t, tz, *n, done.upload);
                            if done.upload {
                                self.xfer_bytes.1 += n;
                            } else {
                                self.xfer_bytes.0 += n;
                            }
                        }
                        if self.transfers.finished(done, &mut self.state, t) {
                            self.save.mark_dirty(t);
                        }
                        self.tick_soon = true;
                    }
                    None => break "event channel closed",
                },
                () = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
            }
            let t = now();
            if let Some(every) = ping_every {
                if last_ping.elapsed() >= every {
                    last_ping = std::time::Instant::now();
                    let _ = self.notifier.watchdog();
                }
            }
            if self.gpu_retry_at.is_some_and(|at| t >= at) {
                self.state_epoch += 1;
                self.reprobe_gpus(t);
            }
            if t >= next_bench_check {
                next_bench_check = t + BENCHMARK_CHECK_SECS;
                if self.benchmarks_due(t) {
                    self.start_benchmarks();
                }
            }
            if self.tick_soon || t >= next_tick {
                self.tick_soon = false;
                if let Some(why) = self.tick_tasks(t) {
                    break why;
                }
                self.state_epoch += 1;
                self.tasks.settle(self.state_epoch);
                next_tick = (t + 1.0).min(self.tasks.next_wakeup.max(t + 0.1));
                self.tick_projects(t);
                self.tick_acct_mgr(t);
                self.tick_info(t);
                self.refresh_metrics(t);
                self.xfer_history.poll(&self.dir, t, false);
                let _ = self.notifier.status(&self.status_line());
            }
            if self.throttle.wants_poll() {
                let groups = throttle::groups(&self.tasks, &self.state);
                self.throttle.poll(&groups, now());
            }
            self.save_if_due(t, false);
            let r = reclaim.due(t);
            if r.heap {
                // The GUIs went quiet: what replies kept goes with the burst's heap.
                self.rpc.forget_kept_replies();
            }
            memory::release(r);
        };
        info!("shutting down ({reason})");
        let _ = self.notifier.stopping();
        let abort_code = (self.opts.abort_jobs_on_exit
            || self.config.cc.options.abort_jobs_on_exit)
            .then_some(ferrite_supervise::limits::EXIT_CLIENT_EXITING);
        self.transfers.shutdown().await;
        self.throttle
            .release(&throttle::groups(&self.tasks, &self.state));
        self.tasks.shutdown(&mut self.state, abort_code).await;
        self.xfer_history.poll(&self.dir, now(), true);
        if let Some(code) = abort_code {
            self.abort_unfinished(code, now());
        }
        // The last save happens here, after the writer's: wait for it and hear how it went.
        if let Some(mut w) = self.writer.take() {
            w.stop();
        }
        while let Ok(d) = self.saved_rx.try_recv() {
            self.save_done(d.generation, d.result);
        }
        self.save.abandon();
        self.save.mark_dirty(now());
        self.save_if_due(now(), true);
        if let Some(server) = gui_rpc {
            server.stop().await;
        }
        if let Some(server) = metrics_server {
            server.stop().await;
        }
        if self.save.is_dirty() {
            anyhow::bail!("exiting with the state not saved; the previous state file is intact");
        }
        info!("state saved; exiting");
        Ok(())
    }
}

impl Daemon {
    /// Puts the disk figures of now into the state, at most once a minute: each project's
    /// `disk_usage` (its present files) and the host's `d_total`/`d_free`, so GUIs never
    /// show the figures a previous session saved.
    fn refresh_usage(&mut self, t: f64) {
        if t < self.next_usage_refresh {
            return;
        }
        self.next_usage_refresh = t + 60.0;
        let d = projects::disk_figures(&self.dir, &self.state, &self.config.prefs.prefs);
        for ps in &mut self.state.projects {
            ps.project.disk_usage = d.used.get(&ps.project.master_url).copied().unwrap_or(0.0);
        }
        if let Some((total, free)) = projects::volume_space(&self.dir) {
            self.state.host_info.d_total = total;
            self.state.host_info.d_free = free;
        }
    }

    /// One supervision tick; returns a reason to exit when `--exit_after_finish` or
    /// `--exit_when_idle` says so.
    fn tick_tasks(&mut self, t: f64) -> Option<&'static str> {
        self.refresh_usage(t);
        // Right before tasks may start: an app file changed since it was verified must not run.
        if self.transfers.check_app_files(&mut self.state) {
            self.save.mark_dirty(t);
            self.state_epoch += 1;
        }
        let (reason, gpu_reason, user_active) = self.decide_suspension(t);
        let activity = ferrite_project::stats::Activity {
            computing: reason
                .is_none_or(|r| r == ferrite_sched::suspend::SuspendReason::CpuThrottle),
            gpu_computing: gpu_reason.is_none(),
            network: self.network_allowed(t),
        };
        self.time_session
            .update(&mut self.state.time_stats, t, activity);
        let limit = self
            .config
            .prefs
            .prefs
            .effective_cpu_usage_limit(user_active);
        self.throttle.set_limit(limit, t);
        let o = &self.config.cc.options;
        // cc_config rec_half_life_days: how fast recent credit fades (the share balance).
        let policy = &mut self.tasks.scheduler_mut().policy;
        policy.rec_half_life = rec_half_life_secs(o.rec_half_life_days);
        policy.fetch_minimal_work = self.opts.fetch_minimal_work || o.fetch_minimal_work;
        self.tasks.priority = ferrite_supervise::PriorityConfig {
            no_priority_change: self.opts.no_priority_change || o.no_priority_change,
            process_priority: o.process_priority,
            process_priority_special: o.process_priority_special,
        };
        let proxy = config::working_proxy(&self.state, &self.config.cc.options);
        let mut inputs = tasks::TickInputs {
            prefs: &self.config.prefs.prefs,
            cc_ncpus: self.config.cc.options.ncpus,
            suspend: reason,
            gpu_suspended: gpu_reason.is_some(),
            user_active,
            app_configs: &self.config.app_configs,
            exclude_gpus: &self.config.cc.options.exclude_gpus,
            no_rsc_prefs: &self.config.no_rsc_prefs,
            stderr_head: self.config.cc.options.stderr_head,
            proxy: proxy.as_ref(),
            gpu_instances: &self.gpu_instances,
            gpu_control: self.gpu_control.resolved(),
            exit_before_start: self.config.cc.options.exit_before_start,
            epoch: self.state_epoch,
        };
        if t >= self.next_overdue_check {
            self.next_overdue_check = t + 86400.0;
            let max_days = self.config.cc.options.max_overdue_days;
            if self.tasks.check_overdue(&mut self.state, t, max_days) {
                self.save.mark_dirty(t);
                self.state_epoch += 1;
            }
        }
        inputs.epoch = self.state_epoch;
        let report = self.tasks.tick(&mut self.state, &inputs, t);
        if report.changed {
            self.save.mark_dirty(t);
        }
        let multiple = self.config.cc.options.allow_multiple_clients;
        self.docker.after_tick(&self.state, multiple);
        if report.exit_before_start {
            return Some("an app was about to start (exit_before_start)");
        }
        if report.started > 0 && self.app_started_at.is_none() {
            self.app_started_at = Some(t);
        }
        if let (Some(n), Some(at)) = (self.opts.exit_after_app_start, self.app_started_at) {
            if t >= at + n as f64 {
                return Some("an app started (--exit_after_app_start)");
            }
        }
        let check_sizes = !self.config.cc.options.dont_check_file_sizes;
        for url in &report.files_missing {
            if filecheck::check_all(&self.dir, &mut self.state, check_sizes, Some(url), t) {
                self.save.mark_dirty(t);
            }
        }
        let o = &self.config.cc.options;
        if (self.opts.exit_after_finish || o.exit_after_finish) && report.finished > 0 {
            return Some("a task finished (exit_after_finish)");
        }
        // As the official client: only once there was work, not before the first jobs came.
        if (self.opts.exit_when_idle || o.exit_when_idle)
            && self.tasks.had_or_requested_work()
            && self.tasks.is_empty()
            && self.idle()
        {
            return Some("no task left to run or report (exit_when_idle)");
        }
        None
    }

    /// Whether computing (and GPU computing) is suspended now and why, from the run modes,
    /// the preferences and what the host shows; logs each change as the official client does.
    /// Also returns whether the user counts as active.
    fn decide_suspension(
        &mut self,
        t: f64,
    ) -> (Option<SuspendReason>, Option<SuspendReason>, bool) {
        use ferrite_proto::client_state::RunMode;
        use ferrite_sched::suspend::{self, Mode, Observed, SuspendPrefs};
        let mode = |kind| match rpc::current_mode(&self.state, &self.rpc, kind, t) {
            RunMode::Always => Mode::Always,
            RunMode::Never => Mode::Never,
            RunMode::Auto => Mode::Auto,
        };
        let (cpu_mode, gpu_mode) = (mode(rpc::ModeKind::Cpu), mode(rpc::ModeKind::Gpu));
        let prefs = &self.config.prefs.prefs;
        let cc = &self.config.cc.options;
        self.activity.set_ignore_tty(&cc.ignore_tty);
        let seen = self.activity.observe(
            t,
            self.tasks.apps_cpu_time(),
            &cc.exclusive_apps,
            &cc.exclusive_gpu_apps,
        );
        let user_active = suspend::user_active(seen.idle_secs, prefs.idle_time_to_run);
        let sp = SuspendPrefs {
            run_on_batteries: prefs.run_on_batteries,
            run_if_user_active: prefs.run_if_user_active,
            run_gpu_if_user_active: prefs.run_gpu_if_user_active,
            suspend_if_no_recent_input_min: prefs.suspend_if_no_recent_input,
            suspend_cpu_usage_pct: prefs.effective_suspend_cpu_usage(user_active),
            start_delay_secs: cc.start_delay,
        };
        let (hour, weekday) = ferrite_proto::prefs::local_hour_and_weekday(
            t,
            i64::from(self.state.host_info.timezone),
        );
        if sp.suspend_cpu_usage_pct > 0.0 && seen.non_client_cpu_pct > sp.suspend_cpu_usage_pct {
            self.cpu_busy_at = Some(t);
        }
        let obs = Observed {
            cpu_mode,
            gpu_mode,
            benchmarks_running: self.benchmarks_running,
            since_start_secs: t - self.started_at,
            on_battery: seen.on_battery,
            user_active,
            idle_secs: seen.idle_secs,
            outside_time_of_day: prefs.cpu_suspended_at(hour, weekday),
            exclusive_app_seen_ago: seen.exclusive_app_at.map(|a| t - a),
            exclusive_gpu_app_seen_ago: seen.exclusive_gpu_app_at.map(|a| t - a),
            non_client_cpu_pct: seen.non_client_cpu_pct,
            cpu_usage_suspended_ago: self.cpu_busy_at.map(|a| t - a),
            has_gpu: {
                let c = &self.state.host_info.coprocs;
                c.nvidia.as_ref().is_some_and(|n| n.count > 0)
                    || c.other.iter().any(|o| o.count > 0)
            },
        };
        let reason = suspend::cpu_suspend_reason(&sp, &obs);
        let gpu_reason = reason
            .is_none()
            .then(|| suspend::gpu_suspend_reason(&sp, &obs))
            .flatten();
        let (old, old_gpu) = self.suspended;
        if reason != old {
            match reason {
                Some(r) => info!("Suspending computation - {}", r.describe()),
                None => info!("Resuming computation"),
            }
        }
        if gpu_reason != old_gpu && reason.is_none() {
            match gpu_reason {
                Some(r) => info!("Suspending GPU computation - {}", r.describe()),
                None => info!("Resuming GPU computation"),
            }
        }
        self.suspended = (reason, gpu_reason);
        (reason, gpu_reason, user_active)
    }

    /// No result is left to compute or to report (reported results are acknowledged).
    fn idle(&self) -> bool {
        self.state
            .results()
            .all(|(_, r)| r.computing_done() && r.got_server_ack)
    }

    /// `abort_jobs_on_exit`: every result not yet computed ends as aborted with `code`.
    fn abort_unfinished(&mut self, code: i32, t: f64) {
        for ps in &mut self.state.projects {
            for r in &mut ps.results {
                if r.state < ResultState::ComputeError {
                    r.state = ResultState::Aborted;
                    r.exit_status = code;
                    r.ready_to_report = true;
                    r.completed_time = t;
                }
            }
        }
        self.state.active_tasks.clear();
        self.save.mark_dirty(t);
    }
}

/// GUI RPC requests that only read: they change nothing, so no scheduling pass follows them
/// and cached replies stay valid.
/// Whether a configuration report is about `cc_config.xml` or an `app_config.xml` (the
/// official client's notices name those files).
fn is_config_file(what: &str) -> bool {
    what.contains("cc_config.xml") || what.contains("app_config.xml")
}

fn is_query(r: &ferrite_gui_rpc::Request) -> bool {
    use ferrite_gui_rpc::Request as R;
    matches!(
        r,
        R::ExchangeVersions { .. }
            | R::GetAllProjectsList
            | R::GetCcStatus
            | R::GetDiskUsage
            | R::GetDailyXferHistory
            | R::GetFileTransfers
            | R::GetHostInfo
            | R::GetMessages { .. }
            | R::GetMessageCount
            | R::GetNewerVersion
            | R::GetNoticesPublic { .. }
            | R::GetNotices { .. }
            | R::GetOldResults
            | R::GetProjectStatus
            | R::GetResults { .. }
            | R::GetScreensaverTasks
            | R::GetSimpleGuiInfo
            | R::GetState
            | R::GetStatistics
            | R::FerriteExplain
    )
}

impl Daemon {
    /// What the daemon is doing, for systemd's `STATUS=`.
    fn status_line(&self) -> String {
        let tasks: usize = self.state.projects.iter().map(|p| p.results.len()).sum();
        format!(
            "{} projects, {} tasks, {} running",
            self.state.projects.len(),
            tasks,
            self.tasks.live.len()
        )
    }

    /// Renders the metrics text from the state and the core's last pass.
    fn refresh_metrics(&mut self, t: f64) {
        let Some(tx) = &self.metrics else {
            return;
        };
        let (mut busy_cpus, mut busy_gpus) = (0.0, 0.0);
        for ((url, name), l) in &self.tasks.live {
            if l.task.state() != ferrite_supervise::TaskState::Running {
                continue;
            }
            let usage = self
                .state
                .project(url)
                .and_then(|p| p.result(name).and_then(|r| p.app_version_of(r)))
                .map(|v| v.usage.clone());
            match usage {
                Some(u) if u.coprocs.iter().any(|c| c.count > 0.0) => {
                    busy_gpus += u.coprocs.iter().map(|c| c.count).sum::<f64>();
                    busy_cpus += u.avg_ncpus;
                }
                Some(u) => busy_cpus += u.avg_ncpus.max(0.0),
                None => busy_cpus += 1.0,
            }
        }
        let work_buffer_secs = self
            .tasks
            .last_pass()
            .map(|(out, world)| {
                out.sim
                    .resources
                    .iter()
                    .enumerate()
                    .map(|(r, x)| {
                        (
                            projects::resource_name(world, ferrite_sched::ResourceId(r as u8)),
                            x.saturated_time,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let disk = projects::disk_figures(&self.dir, &self.state, &self.config.prefs.prefs);
        let rpc = self.projects.rpc_counters();
        let text = metrics::render(
            &metrics::MetricsInput {
                state: &self.state,
                busy_cpus,
                busy_gpus,
                work_buffer_secs,
                rpc: &rpc,
                transfer_bytes_down: self.xfer_bytes.0,
                transfer_bytes_up: self.xfer_bytes.1,
                disk_used: disk.used_total,
                disk_allowed: disk.allowed,
            },
            t,
        );
        tx.send_replace(text);
        self.sample_usage(t);
    }
}

/// The REC half-life in seconds for cc_config `rec_half_life_days` (the default 10 days
/// for a value that is not a positive number).
/// Records the BOINC version Ferrite reports ([`ferrite_proto::version::PROTOCOL_VERSION`]) in
/// the state, so every request, upload and app sees it; a data directory last used by
/// another version is said in the log, as the official client does.
fn adopt_protocol_version(state: &mut ClientState) {
    let ours = ferrite_proto::version::PROTOCOL_VERSION;
    let old = state.core_client_version;
    if old != ours && old != ferrite_proto::client_state::ClientVersion::default() {
        info!("Version change ({old} -> {ours})");
    }
    state.core_client_version = ours;
}

fn rec_half_life_secs(days: f64) -> f64 {
    let days = if days.is_finite() && days > 0.0 {
        days
    } else {
        10.0
    };
    days * 86_400.0
}

/// Puts every thread of this process in the idle I/O scheduling class (as `ionice -c 3`, what
/// the official client does for cc_config `lower_client_priority`); threads started later
/// inherit it from the thread that starts them. Returns the number of threads changed.
fn lower_io_priority() -> std::io::Result<usize> {
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    const IOPRIO_CLASS_IDLE: libc::c_long = 3;
    const IOPRIO_CLASS_SHIFT: u32 = 13;
    let mut n = 0;
    for entry in std::fs::read_dir("/proc/self/task")? {
        let Some(tid) = entry?
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<libc::c_long>().ok())
        else {
            continue;
        };
        // SAFETY: ioprio_set takes three integers and touches no memory of ours.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_ioprio_set,
                IOPRIO_WHO_PROCESS,
                tid,
                IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        n += 1;
    }
    Ok(n)
}

fn spawn_signal_listeners(tx: mpsc::Sender<Event>) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;
    let mut chld = signal(SignalKind::child()).context("cannot listen for SIGCHLD")?;
    tokio::spawn(async move {
        loop {
            let ev = tokio::select! {
                _ = term.recv() => Event::Shutdown("SIGTERM"),
                _ = int.recv() => Event::Shutdown("SIGINT"),
                _ = hup.recv() => Event::Reload,
                _ = chld.recv() => Event::ChildExited,
            };
            if tx.send(ev).await.is_err() {
                break;
            }
        }
    });
    Ok(())
}

/// Lines describing a loaded state: projects, apps, tasks.
pub fn state_summary(state: &ClientState) -> Vec<String> {
    config::summary(state)
}

/// The `--show_projects` lines: each project's URL, computer ID and resource share.
pub fn show_projects(state: &ClientState) -> Vec<String> {
    if state.projects.is_empty() {
        return vec!["no projects attached".to_owned()];
    }
    state
        .projects
        .iter()
        .map(|ps| {
            let p = &ps.project;
            let id = if p.hostid > 0 {
                p.hostid.to_string()
            } else {
                "not assigned yet".to_owned()
            };
            format!(
                "[{}] URL {}; Computer ID {id}; resource share {:.0}",
                if p.project_name.is_empty() {
                    &p.master_url
                } else {
                    &p.project_name
                },
                p.master_url,
                p.resource_share
            )
        })
        .collect()
}

/// The `--detect_gpus` report.
pub fn detect_report(opts: &Options) -> anyhow::Result<String> {
    config::detect_report(opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cc_config_rec_half_life_days_sets_the_cores_half_life() {
        assert_eq!(rec_half_life_secs(10.0), 864_000.0);
        assert_eq!(rec_half_life_secs(0.0), 864_000.0);
        assert_eq!(rec_half_life_secs(f64::NAN), 864_000.0);
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("cc_config.xml"),
            "<cc_config><options><rec_half_life_days>2.5</rec_half_life_days>\
             </options></cc_config>\n",
        )
        .expect("cc_config");
        let opts = cli::Options {
            dir: Some(dir.path().to_path_buf()),
            skip_cpu_benchmarks: true,
            no_gpus: true,
            ..cli::Options::default()
        };
        let mut d = Daemon::start(opts, logging::init()).expect("daemon");
        assert_eq!(d.tasks.scheduler_mut().policy.rec_half_life, 864_000.0);
        // This session's start time, not a saved one.
        assert!((d.state.time_stats.client_start_time - now()).abs() < 60.0);
        let _ = d.tick_tasks(now());
        assert_eq!(d.tasks.scheduler_mut().policy.rec_half_life, 2.5 * 86_400.0);
    }

    #[test]
    fn saved_start_time_and_disk_usage_are_replaced_by_this_sessions() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("client_state.xml"),
            "<client_state>\n<time_stats>\n<client_start_time>1000.0</client_start_time>\n\
             <previous_uptime>50.0</previous_uptime>\n</time_stats>\n\
             <project>\n<master_url>http://p.example/</master_url>\n\
             <disk_usage>123456789.0</disk_usage>\n</project>\n\
             <file_info>\n<name>f1</name>\n<nbytes>1000.0</nbytes>\n<status>1</status>\n</file_info>\n\
             <file_info>\n<name>f2</name>\n<nbytes>500.0</nbytes>\n<status>0</status>\n</file_info>\n\
             <host_info>\n<d_free>1.0</d_free>\n<d_total>2.0</d_total>\n</host_info>\n\
             </client_state>\n",
        )
        .expect("state");
        let opts = cli::Options {
            dir: Some(dir.path().to_path_buf()),
            skip_cpu_benchmarks: true,
            no_gpus: true,
            ..cli::Options::default()
        };
        let d = Daemon::start(opts, logging::init()).expect("daemon");
        let ts = &d.state.time_stats;
        assert!((ts.client_start_time - now()).abs() < 60.0, "{ts:?}");
        assert_eq!(ts.previous_uptime, 50.0);
        let p = &d.state.projects[0].project;
        assert_eq!(p.disk_usage, 1000.0, "present files only");
        assert!(d.state.host_info.d_total > 2.0);
    }

    #[test]
    fn project_gui_urls_from_the_account_file_reach_guis() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = "http://p.example/";
        let opts = cli::Options {
            dir: Some(dir.path().to_path_buf()),
            skip_cpu_benchmarks: true,
            no_gpus: true,
            attach_project: Some(vec![url.to_owned(), "key".to_owned()]),
            ..cli::Options::default()
        };
        let mut d = Daemon::start(opts, logging::init()).expect("daemon");
        let urls = "<gui_urls>\n<gui_url>\n<name>Forum</name>\n<description>Talk</description>\n\
                    <url>http://p.example/forum</url>\n</gui_url>\n</gui_urls>";
        std::fs::write(
            dir.path().join("account_p.example.xml"),
            format!(
                "<account>\n<master_url>{url}</master_url>\n<authenticator>key</authenticator>\n\
                 <project_preferences>\n</project_preferences>\n{urls}\n</account>\n"
            ),
        )
        .expect("account");
        for request in [
            ferrite_gui_rpc::Request::GetProjectStatus,
            ferrite_gui_rpc::Request::GetState,
        ] {
            let reply = d.gui_rpc_reply(request);
            assert!(
                reply.contains("<url>http://p.example/forum</url>"),
                "{reply}"
            );
        }
    }
}

#[cfg(test)]
mod version_tests {
    #[test]
    fn gui_rpc_reports_the_same_version_as_scheduler_requests() {
        let gui = ferrite_gui_rpc::ServerVersion::default();
        let ours = ferrite_proto::version::PROTOCOL_VERSION;
        assert_eq!(
            (gui.major, gui.minor, gui.release),
            (ours.major, ours.minor, ours.release)
        );
    }

    #[test]
    fn a_state_file_of_another_version_takes_the_protocol_version() {
        let mut state = ferrite_proto::client_state::ClientState::default();
        state.core_client_version.major = 7;
        state.core_client_version.minor = 20;
        super::adopt_protocol_version(&mut state);
        assert_eq!(
            state.core_client_version,
            ferrite_proto::version::PROTOCOL_VERSION
        );
    }
}
