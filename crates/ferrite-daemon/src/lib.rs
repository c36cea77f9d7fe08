//! The Ferrite daemon: the imperative shell around Ferrite's pure cores.
//!
//! [`Daemon`] holds the client's state and the owner of each part of the main loop. The loop
//! ([`Daemon::run`]) takes [`Event`]s from everything else (signal listeners, GUI RPC
//! connections, scheduler RPCs, transfers, web RPCs, feeds, the account manager, the
//! benchmarks) and is the only code that changes state: it waits for an event or a timer,
//! hands the event to its owner, runs a pass when one is due, and saves the state file
//! through the crash-safe [`store`] whenever the state changed, at most once a second.
//! docs/ARCHITECTURE.md ("The main loop and its owners") lists which code handles each event.

pub mod acct_mgr;
pub mod activity;
pub mod anonymous;
pub mod cli;
pub mod clock;
pub mod config;
mod daemon;
pub mod docker;
pub mod event;
pub mod filecheck;
pub mod finishing;
pub mod gpu_control;
pub mod history;
mod host;
pub mod http_tasks;
pub mod lock;
pub mod logging;
pub mod logind;
mod lookup;
pub mod memory;
pub mod messages;
pub mod metrics;
pub mod notices;
mod persist;
pub mod project_files;
pub mod projects;
pub mod rpc;
pub mod run_modes;
pub mod sdnotify;
mod setup;
pub mod snapshot;
pub mod startup;
pub mod store;
pub mod tasks;
pub mod thermal;
pub mod throttle;
pub mod transfers;
pub mod trickle;
pub mod tuning;
mod turn;
pub mod web;
pub mod writer;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use ferrite_proto::client_state::ClientState;
use tokio::sync::mpsc;
use tracing::{info, warn};

pub use clock::now;
pub use event::Event;

use crate::cli::Options;
use crate::config::Config;
use crate::host::BENCHMARK_CHECK_SECS;

/// How long start-up waits for the GUI RPC listeners before entering the main loop.
const GUI_RPC_START_WAIT: Duration = Duration::from_secs(5);
use crate::lock::DirLock;
use crate::logging::LogHandle;
use crate::turn::{plan_turn, TurnPlan, TurnTimer, Woke};

/// The running client: the state and, grouped by part of the loop, the owners that handle
/// its events.
#[derive(Debug)]
pub struct Daemon {
    // Configuration (`setup.rs`).
    opts: Options,
    dir: PathBuf,
    _lock: DirLock,
    config: Config,
    log: LogHandle,
    /// Warnings already logged, so each kind is logged once.
    warned: HashSet<(Arc<str>, String, String)>,
    // The state, its file (`persist.rs`) and the loop's inputs.
    state: ClientState,
    /// The state file: dirty marks, saves, the writer thread.
    save: persist::Persistence,
    /// Bumped whenever the state may have changed (any event but a read-only GUI query,
    /// every tick): replies cached for one epoch stay exact.
    pub(crate) state_epoch: u64,
    events: mpsc::Sender<Event>,
    inbox: mpsc::Receiver<Event>,
    /// Run a pass at the next turn of the loop (a GUI request changed something, a transfer
    /// ended, an app exited, a scheduler reply or an account-manager sync was applied).
    tick_soon: bool,
    /// When an HTTP exchange (transfer, scheduler, web or account-manager RPC) last ended
    /// (`cc_status`'s network status).
    last_comm: f64,
    // Tasks (`tasks.rs`; their turn of a pass in `daemon/pass.rs`).
    /// The apps: processes, slots, and the scheduling core that decides what runs.
    tasks: tasks::TaskTable,
    /// CPU throttling (`cpu_usage_limit`).
    throttle: throttle::Throttle,
    /// Docker/Podman images and containers of ended jobs.
    docker: docker::Janitor,
    /// Per-GPU control for every project (Ferrite only).
    gpu_control: gpu_control::GpuControlState,
    /// This run's part of the time statistics that scheduler requests report.
    time_session: ferrite_project::stats::TimeSession,
    /// When the first app started since start-up (for `--exit_after_app_start`).
    app_started_at: Option<f64>,
    // Host watching (`host.rs`, its glue in `daemon/host.rs`).
    /// Host watching: GPUs, benchmarks, user activity, battery, disk figures.
    host: host::HostWatch,
    // Projects (`projects.rs`, `acct_mgr.rs`, `notices.rs`; their glue in `daemon/`).
    /// The project loop: master fetches and scheduler RPCs.
    projects: projects::ProjectLoop,
    /// The account manager in use and its sync clock.
    acct_mgr: acct_mgr::AcctMgr,
    /// Project news feeds and their schedule.
    feeds: notices::Feeds,
    /// The HTTP exchanges under way outside the transfers, ended at shutdown.
    http_tasks: http_tasks::HttpTasks,
    // Transfers (`transfers.rs`; the daemon's side in `daemon/pass.rs`).
    /// File transfers.
    transfers: transfers::Transfers,
    /// App files whose MD5 is known (`ferrite_verified_files.txt`), so the file check need
    /// not hash them again while they are unchanged.
    verified: filecheck::Verified,
    // GUI calls (`rpc/`, `web/`).
    /// GUI RPC state kept between calls (what replies keep, the names the event log knows).
    rpc: rpc::RpcState,
    /// The temporary run modes GUI RPC set (the permanent ones are the state's).
    modes: run_modes::RunModes,
    // Reporting: systemd, metrics, the daemon's own usage.
    /// systemd's notification socket (a no-op outside a `Type=notify` unit).
    notifier: sdnotify::Notifier,
    /// The latest OpenMetrics text, when the metrics endpoint is on.
    metrics: Option<tokio::sync::watch::Sender<String>>,
    /// The daemon's own CPU and memory over time, kept while the HTTP server is on.
    usage: Option<web::UsageHistory>,
}

impl Daemon {
    /// The state as loaded or changed so far.
    pub fn state(&self) -> &ClientState {
        &self.state
    }

    /// A sender for events to the main loop.
    pub fn sender(&self) -> mpsc::Sender<Event> {
        self.events.clone()
    }

    /// Runs the main loop until a shutdown event; then saves and stops.
    ///
    /// Each turn: wait for the next event or timer; hand the event to its owner; let host
    /// watching look at its timers; run a pass when one is due (a timer of the tasks, or an
    /// event that may have changed something); poll CPU throttling; save the state if it is
    /// dirty and the save is due; hand freed memory back.
    pub async fn run(self) -> anyhow::Result<()> {
        self.run_after(None).await
    }

    /// [`Daemon::run`], taking SIGTERM and SIGINT from `early`: streams opened before
    /// [`Daemon::start`], so that a stop asked for during the start-up (loading a large
    /// state, checking its files) is not lost, and neither is what the start-up changed: the
    /// first turn of the loop takes it, saves the state and exits.
    pub async fn run_after(mut self, early: Option<EarlySignals>) -> anyhow::Result<()> {
        let servers = self.start_loop(early).await?;
        let mut clock = LoopClock::new(self.notifier.ping_interval());
        self.sync_log_project_names();
        // The first pass goes in two stages, the loop serving GUI RPC between them.
        let mut first_pass = Some(FirstPass::start());
        let mut last = TurnPlan::START;
        let reason = loop {
            let woke = self.wait(&clock).await;
            let turn = TurnTimer::start(woke.kind());
            if let Some(why) = self.dispatch(woke, &mut clock.reclaim) {
                break why;
            }
            let t = now();
            let pass_due = match first_pass.as_ref() {
                Some(first) => first.due(t, self.tick_soon),
                None => self.tick_soon || t >= clock.next_tick,
            };
            // A large reply's tasks come in a batch per turn, in turns without a pass.
            let plan = plan_turn(pass_due, self.taking_in_reply(), last);
            last = plan;
            if plan.batch {
                self.take_in_next_batch();
            }
            let dispatched = turn.elapsed();
            self.sync_log_project_names();
            let t = now();
            clock.ping_watchdog(&self.notifier);
            self.watch_host(t);
            if plan.pass {
                if let Some(first) = first_pass.as_mut() {
                    match self.first_pass_stage(first, t) {
                        Ok(Some(next)) => {
                            clock.next_tick = next;
                            first_pass = None;
                        }
                        Ok(None) => clock.next_tick = first.rest_at,
                        Err(why) => break why,
                    }
                } else {
                    match self.pass(t) {
                        Ok(next) => clock.next_tick = next,
                        Err(why) => break why,
                    }
                }
            }
            if self.throttle.wants_poll() {
                let groups = throttle::groups(&self.tasks, &self.state);
                self.throttle.poll(&groups, now());
            }
            if plan.save {
                self.save.save_if_due(&self.state, t, false);
            }
            clock
                .reclaim
                .dropped(self.rpc.forget_stale(self.state_epoch));
            let r = clock.reclaim.due(t);
            // The GUIs went quiet: what replies kept goes with the burst's heap.
            match r.kept {
                memory::Kept::Nothing => {}
                memory::Kept::EpochParts => self.rpc.forget_epoch_parts(),
                memory::Kept::Everything => self.rpc.forget_kept_replies(),
            }
            memory::release(r);
            turn.end(dispatched, plan.pass);
        };
        self.shut_down(reason, servers).await
    }

    /// What runs before the first turn: signal listeners, the GUI RPC and HTTP servers, the
    /// writer thread and the first save (handed to it), the benchmarks if due, and the word
    /// to systemd.
    async fn start_loop(&mut self, early: Option<EarlySignals>) -> anyhow::Result<Servers> {
        spawn_signal_listeners(self.events.clone(), early)?;
        let mut gui_rpc = if self.opts.no_gui_rpc {
            info!("GUI RPC off (--no_gui_rpc): no TCP port, no Unix socket");
            None
        } else {
            self.start_gui_rpc()
        };
        if let Some(server) = gui_rpc.as_mut() {
            if !server.wait_started(GUI_RPC_START_WAIT).await {
                warn!(
                    "GUI RPC not listening yet after {} s; still trying",
                    GUI_RPC_START_WAIT.as_secs()
                );
            }
        }
        let web = self.start_web().await;
        // The writer thread first: the first save (seconds of serialising and writing at
        // 100,000 tasks) is written there while the loop answers GUI RPC calls.
        self.save.start_writer(&self.dir);
        self.save.save_if_due(&self.state, now(), false);
        if self.opts.run_cpu_benchmarks || self.benchmarks_due(now()) {
            self.start_benchmarks();
        }
        self.host.next_bench_check = now() + BENCHMARK_CHECK_SECS;
        if self.config.cc.options.lower_client_priority {
            match lower_io_priority() {
                Ok(n) => info!("running at idle I/O priority ({n} threads; lower_client_priority)"),
                Err(e) => warn!("cannot lower the client's I/O priority: {e}"),
            }
        }
        info!("entering main loop");
        if let Err(e) = self.notifier.ready_with_status(&self.status_line()) {
            warn!("cannot notify systemd: {e}");
        }
        Ok(Servers { gui_rpc, web })
    }

    /// Waits for the next event, a save's outcome, or the earliest timer (at most a second).
    async fn wait(&mut self, clock: &LoopClock) -> Woke {
        let t = now();
        let next = [
            self.save.next_due(),
            self.host.gpu_retry_at,
            Some(clock.next_tick),
            self.throttle.next_switch(t),
            clock.reclaim.next_due(),
        ]
        .into_iter()
        .flatten()
        .fold(t + 1.0, f64::min);
        let next = if self.tick_soon || self.taking_in_reply() {
            t
        } else {
            next
        };
        let wait = (next - t).clamp(0.0, 1.0);
        tokio::select! {
            done = self.save.saved() => Woke::Saved(done),
            ev = self.inbox.recv() => Woke::Event(ev),
            () = tokio::time::sleep(Duration::from_secs_f64(wait)) => Woke::Timer,
        }
    }

    /// Hands what woke the loop to its owner; returns a reason to stop.
    fn dispatch(&mut self, woke: Woke, reclaim: &mut memory::Reclaimer) -> Option<&'static str> {
        let ev = match woke {
            Woke::Timer | Woke::Saved(None) => return None,
            Woke::Saved(Some(d)) => {
                tracing::debug!(
                    "state file serialised in {:.1} ms, written in {:.1} ms",
                    d.serialise_secs * 1e3,
                    d.secs * 1e3
                );
                self.save.note_serialise(d.serialise_secs);
                self.save.save_done(d.generation, d.result);
                self.tasks
                    .state_saved(self.save.generation(), self.save.saved_generation());
                return None;
            }
            Woke::Event(None) => return Some("event channel closed"),
            Woke::Event(Some(ev)) => ev,
        };
        if matches!(
            ev,
            Event::Project(_)
                | Event::WebRpc(..)
                | Event::Info(_)
                | Event::AcctMgr(_)
                | Event::Transfer(_)
        ) {
            self.last_comm = now();
        }
        match ev {
            Event::Shutdown(why) => return Some(why),
            Event::Reload => {
                self.state_epoch += 1;
                self.reload();
            }
            Event::BenchmarksDone(r) => {
                self.state_epoch += 1;
                self.benchmarks_done(r, now());
            }
            Event::GuiRpc(call) => {
                let command = self.handle_gui_rpc(call);
                reclaim.gui_call(now());
                if command {
                    // It may have changed something: decide again now.
                    self.tick_soon = true;
                    self.state_epoch += 1;
                }
            }
            Event::Project(done) => {
                self.state_epoch += 1;
                self.project_op_done(done, now());
            }
            Event::WebRpc(kind, result) => self.projects.web_rpc_done(kind, result),
            Event::Info(done) => self.info_fetched(done, now()),
            Event::ChildExited => self.tick_soon = true,
            Event::AcctMgr(result) => {
                self.state_epoch += 1;
                self.acct_mgr_done(result, now());
            }
            Event::Transfer(done) => {
                self.state_epoch += 1;
                if self.transfer_done(done, now()) {
                    self.tick_soon = true;
                }
            }
        }
        None
    }

    /// A pass: the tasks' turn (which may end the daemon: `exit_when_idle` and its kin), then
    /// the transfers', the project loop's, the account manager's and the news feeds', and the
    /// figures reported after it. Returns when the next pass is due at the latest.
    fn pass(&mut self, t: f64) -> Result<f64, &'static str> {
        let next_tick = self.pass_tasks(t)?;
        self.pass_rest(t);
        Ok(next_tick)
    }

    /// The tasks' turn of a pass; returns when the next pass is due at the latest.
    fn pass_tasks(&mut self, t: f64) -> Result<f64, &'static str> {
        self.tick_soon = false;
        if let Some(why) = self.tick_tasks(t) {
            return Err(why);
        }
        self.state_epoch += 1;
        self.tasks.settle(self.state_epoch);
        Ok((t + 1.0)
            .min(self.tasks.next_wakeup.max(t + 0.1))
            .min(self.tasks.fast_poll_at))
    }

    /// A pass after the tasks' turn: the transfers', the project loop's, the account
    /// manager's and the news feeds' turns, and the figures reported after it.
    fn pass_rest(&mut self, t: f64) {
        if let Some(http) = self.project_http(t) {
            self.tick_transfers(&http, t);
            self.tick_projects(&http, t);
            self.count_text_traffic(&http, t);
        }
        self.tick_acct_mgr(t);
        self.tick_info(t);
        self.refresh_metrics(t);
        self.transfers.poll_history(&self.dir, t, false);
        let _ = self.notifier.status(&self.status_line());
    }

    /// The next stage of the first pass (see [`FirstPass`]): `Some(when the next pass is
    /// due)` once the last is done, `None` while stages remain.
    fn first_pass_stage(
        &mut self,
        first: &mut FirstPass,
        t: f64,
    ) -> Result<Option<f64>, &'static str> {
        match first.next_tick {
            None => {
                first.next_tick = Some(self.pass_tasks(t)?);
                first.rest_at = now() + FirstPass::REST_AFTER;
                Ok(None)
            }
            Some(next) => {
                self.pass_rest(t);
                let tasks: usize = self.state.projects.iter().map(|p| p.results.len()).sum();
                info!(
                    "first pass over the tasks done ({tasks} tasks, {:.0} ms after entering \
                     the main loop)",
                    first.began.elapsed().as_secs_f64() * 1e3
                );
                Ok(Some(next))
            }
        }
    }

    /// Stops: transfers, throttling and apps end, the last save is made, the servers stop.
    async fn shut_down(mut self, reason: &str, servers: Servers) -> anyhow::Result<()> {
        info!("shutting down ({reason})");
        let _ = self.notifier.stopping();
        let abort_code = (self.opts.abort_jobs_on_exit
            || self.config.cc.options.abort_jobs_on_exit)
            .then_some(ferrite_supervise::limits::EXIT_CLIENT_EXITING);
        self.transfers.shutdown().await;
        self.http_tasks.shutdown().await;
        self.throttle
            .release(&throttle::groups(&self.tasks, &self.state));
        self.tasks.shutdown(&mut self.state, abort_code).await;
        self.transfers.poll_history(&self.dir, now(), true);
        // Downloads recorded since the last file check.
        self.verified.save_if_changed(&self.dir);
        if let Some(code) = abort_code {
            self.abort_unfinished(code, now());
        }
        // A reply's tasks still held back go into the state before its last save.
        self.take_in_whole_reply();
        // The last save happens here, after the writer's: wait for it and hear how it went.
        self.save.save_at_exit(&self.state);
        // The slots of tasks that ended are cleaned once the state file says so.
        self.tasks
            .state_saved(self.save.generation(), self.save.saved_generation());
        if let Some(server) = servers.gui_rpc {
            server.stop().await;
        }
        if let Some(server) = servers.web {
            server.stop().await;
        }
        if self.save.is_dirty() {
            anyhow::bail!("exiting with the state not saved; the previous state file is intact");
        }
        info!("state saved; exiting");
        Ok(())
    }
}

/// The servers the loop runs, stopped at shutdown.
struct Servers {
    gui_rpc: Option<rpc::RpcServerHandle>,
    web: Option<web::WebServer>,
}

/// The first pass after the start-up, in two stages, each in a turn of the loop of its
/// own: the tasks' turn (the start-up's overdue and late tasks, the snapshot of every task
/// and the scheduling core's pass) at once, then the rest (transfers of the files the
/// start-up's check found missing, the project loop, the account manager, the news feeds)
/// [`FirstPass::REST_AFTER`] later, or sooner when a GUI request asks for a pass. With
/// 100,000 tasks the tasks' turn takes seconds; the GUI RPC calls that came meanwhile are
/// answered in the loop's wait after it, before the rest, and the log says when the rest
/// is done.
struct FirstPass {
    began: std::time::Instant,
    /// Set once the tasks' turn is done: when the next pass is due at the latest.
    next_tick: Option<f64>,
    /// When the rest is due, once the tasks' turn is done.
    rest_at: f64,
}

impl FirstPass {
    /// How long after the tasks' turn the rest of the first pass comes: the loop's longest
    /// wait, the time a pass is due at the latest anyway.
    const REST_AFTER: f64 = 1.0;

    fn start() -> Self {
        FirstPass {
            began: std::time::Instant::now(),
            next_tick: None,
            rest_at: f64::INFINITY,
        }
    }

    /// Whether the next stage is due at `t`, with `asked` a pass asked for.
    fn due(&self, t: f64, asked: bool) -> bool {
        self.next_tick.is_none() || asked || t >= self.rest_at
    }
}

/// The main loop's own clocks.
struct LoopClock {
    /// When the next pass is due at the latest.
    next_tick: f64,
    /// How often systemd's watchdog wants a ping, if it does.
    ping_every: Option<Duration>,
    last_ping: std::time::Instant,
    /// When to hand freed memory back.
    reclaim: memory::Reclaimer,
}

impl LoopClock {
    fn new(ping_every: Option<Duration>) -> Self {
        LoopClock {
            next_tick: now(),
            ping_every,
            last_ping: std::time::Instant::now(),
            reclaim: memory::Reclaimer::new(now()),
        }
    }

    /// Pings systemd's watchdog when its interval has passed.
    fn ping_watchdog(&mut self, notifier: &sdnotify::Notifier) {
        if let Some(every) = self.ping_every {
            if self.last_ping.elapsed() >= every {
                self.last_ping = std::time::Instant::now();
                let _ = notifier.watchdog();
            }
        }
    }
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

/// SIGTERM and SIGINT listened for from before [`Daemon::start`] (see
/// [`Daemon::run_after`]): from then on they no longer end the process at once, and one
/// that comes during the start-up waits for the main loop.
#[derive(Debug)]
pub struct EarlySignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl EarlySignals {
    /// Starts listening; must be called within the tokio runtime.
    pub fn listen() -> anyhow::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(EarlySignals {
            term: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
            int: signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?,
        })
    }
}

fn spawn_signal_listeners(
    tx: mpsc::Sender<Event>,
    early: Option<EarlySignals>,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let EarlySignals { mut term, mut int } = match early {
        Some(e) => e,
        None => EarlySignals::listen()?,
    };
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
                p.name_or_url(),
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

/// The options of a unit test's daemon: data directory `dir`, no CPU benchmarks, no GPU
/// probe.
#[cfg(test)]
pub(crate) fn test_options(dir: &std::path::Path) -> cli::Options {
    cli::Options {
        dir: Some(dir.to_path_buf()),
        skip_cpu_benchmarks: true,
        no_gpus: true,
        ..cli::Options::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let opts = crate::test_options(dir.path());
        let d = Daemon::start(opts, logging::init()).expect("daemon");
        let ts = &d.state.time_stats;
        assert!((ts.client_start_time - now()).abs() < 60.0, "{ts:?}");
        assert_eq!(ts.previous_uptime, 50.0);
        let p = &d.state.projects[0].project;
        assert_eq!(p.disk_usage, 1000.0, "present files only");
        assert!(d.state.host_info.d_total > 2.0);
    }

    #[test]
    fn a_project_attached_on_the_command_line_has_a_disk_share_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = crate::cli::Options {
            attach_project: Some(vec!["http://share.example/".to_owned(), "key".to_owned()]),
            ..crate::test_options(dir.path())
        };
        let d = Daemon::start(opts, logging::init()).expect("daemon");
        let p = &d.state.projects[0].project;
        assert!(p.disk_share > 0.0, "{}", p.disk_share);
    }

    #[test]
    fn project_gui_urls_from_the_account_file_reach_guis() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = "http://p.example/";
        let opts = crate::cli::Options {
            attach_project: Some(vec![url.to_owned(), "key".to_owned()]),
            ..crate::test_options(dir.path())
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
mod loop_tests {
    use super::*;
    use ferrite_gui_rpc::{PeerInfo, PeerTransport, Request};

    fn daemon(dir: &std::path::Path) -> Daemon {
        let opts = crate::test_options(dir);
        let mut d = Daemon::start(opts, logging::init()).expect("daemon");
        d.tick_soon = false;
        d
    }

    /// A GUI RPC call as the server makes it, and where its reply goes.
    fn gui_call(request: Request) -> (Woke, tokio::sync::oneshot::Receiver<ferrite_gui_rpc::Body>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let call = ferrite_gui_rpc::Call {
            request,
            peer: PeerInfo {
                connection_id: 1,
                transport: PeerTransport::Tcp(([127, 0, 0, 1], 31416).into()),
                is_local: true,
                authorized: true,
                client_name: None,
                closed: tokio_util::sync::CancellationToken::new(),
            },
            reply: tx,
        };
        (Woke::Event(Some(Event::GuiRpc(call))), rx)
    }

    #[test]
    fn a_gui_query_is_answered_and_leaves_the_epoch_and_the_pass_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut d = daemon(dir.path());
        let mut reclaim = memory::Reclaimer::new(now());
        let epoch = d.state_epoch;
        for (request, tag) in [
            (Request::GetCcStatus, "<cc_status>"),
            (Request::AcctMgrInfo, "<acct_mgr_info>"),
            (Request::GetProxySettings, "<proxy_info>"),
            (Request::ProjectAttachPoll, "<project_attach_reply>"),
        ] {
            let (woke, mut rx) = gui_call(request);
            assert_eq!(d.dispatch(woke, &mut reclaim), None);
            let reply = rx.try_recv().expect("answered at once").to_text();
            assert!(reply.contains(tag), "{reply}");
            assert_eq!(d.state_epoch, epoch, "a cached reply stays valid");
            assert!(!d.tick_soon);
        }

        // A request that acts may change something: a new epoch, a pass at once.
        let (woke, mut rx) = gui_call(Request::NetworkAvailable);
        assert_eq!(d.dispatch(woke, &mut reclaim), None);
        assert!(rx.try_recv().is_ok());
        assert_eq!(d.state_epoch, epoch + 1);
        assert!(d.tick_soon);
    }

    #[test]
    fn a_transfer_end_is_counted_and_asks_for_a_pass_when_tasks_moved() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut d = daemon(dir.path());
        let mut reclaim = memory::Reclaimer::new(now());
        let epoch = d.state_epoch;
        let done = transfers::TransferDone {
            project: "http://p.example/".into(),
            file: "f".into(),
            upload: false,
            result: Ok(1000),
            download: None,
            code: 0,
            permanent: false,
            resumed_from: 0,
            sent: None,
        };
        let woke = Woke::Event(Some(Event::Transfer(done.clone())));
        assert_eq!(d.dispatch(woke, &mut reclaim), None);
        assert_eq!(d.transfers.bytes_moved(), (1000, 0));
        assert_eq!(d.state_epoch, epoch + 1);
        assert!(!d.tick_soon, "nothing moved, yet a pass at once");

        // A task waiting for its input file: a failed attempt to be retried leaves it
        // waiting (the next pass will do); a failure for good fails it: a pass at once.
        let mut state = ferrite_proto::client_state::synthetic(1, 1);
        let ps = &mut state.projects[0];
        ps.results[0].state = ferrite_proto::client_state::ResultState::FilesDownloading;
        let file = ps.workunits[0].input_files[0].file_name.clone();
        if let Some(f) = ps.file_mut(&file) {
            f.status = 0;
        }
        let project = ps.project.master_url.clone();
        d.state = state;
        let failed = |permanent| transfers::TransferDone {
            project: project.clone(),
            file: file.clone(),
            result: Err("connection refused".into()),
            code: transfers::ERR_RESULT_DOWNLOAD,
            permanent,
            ..done.clone()
        };
        let woke = Woke::Event(Some(Event::Transfer(failed(false))));
        assert_eq!(d.dispatch(woke, &mut reclaim), None);
        assert!(!d.tick_soon, "a retry asked for a pass at once");
        let woke = Woke::Event(Some(Event::Transfer(failed(true))));
        assert_eq!(d.dispatch(woke, &mut reclaim), None);
        assert!(d.tick_soon);
        assert_eq!(
            d.state.projects[0].results[0].state,
            ferrite_proto::client_state::ResultState::ComputeError
        );
    }

    #[test]
    fn a_verified_app_file_download_is_recorded_for_the_next_file_check() {
        const URL: &str = "http://127.0.0.1/test/";
        let good = b"the app";
        let md5 = ferrite_net::fast_md5::md5_hex_reader(&good[..]).expect("md5");
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("client_state.xml"),
            format!(
                "<client_state><project><master_url>{URL}</master_url></project>\
                 <app><name>a</name></app>\
                 <file><name>app</name><nbytes>{}</nbytes><md5_cksum>{md5}</md5_cksum>\
                 <url>{URL}download/app</url></file>\
                 <app_version><app_name>a</app_name><version_num>100</version_num>\
                 <file_ref><file_name>app</file_name><main_program/></file_ref></app_version>\
                 </client_state>",
                good.len()
            ),
        )
        .expect("state file");
        let mut d = daemon(dir.path());
        assert!(d.verified.is_empty(), "nothing downloaded yet");
        let pdir = config::project_dir(dir.path(), URL);
        std::fs::write(pdir.join("app"), good).expect("the downloaded file");
        let done = |md5: &str| transfers::TransferDone {
            project: URL.into(),
            file: "app".into(),
            upload: false,
            result: Ok(good.len() as u64),
            download: Some((good.len() as u64, md5.to_owned())),
            code: 0,
            permanent: false,
            resumed_from: 0,
            sent: None,
        };
        // Refused (another MD5): deleted, not recorded.
        d.transfer_done(done(&"0".repeat(32)), now());
        assert!(d.verified.is_empty());
        std::fs::write(pdir.join("app"), good).expect("the downloaded file");
        d.transfer_done(done(&md5), now());
        assert_eq!(d.state.projects[0].files[0].status, 1);
        assert_eq!(d.verified.len(), 1);
        d.verified.save_if_changed(&d.dir);
        assert_eq!(filecheck::Verified::load(dir.path()).len(), 1);

        // Rewritten (here to another size) after the verified download, before the check
        // that precedes starts first looks at it: the check compares with the copy verified,
        // not with what it first sees.
        std::fs::write(pdir.join("app"), b"tampered").expect("rewrite");
        assert!(
            d.transfers.check_app_files(&mut d.state),
            "the change is seen"
        );
        assert_eq!(d.state.projects[0].files[0].status, 0, "fetched again");
        assert!(!pdir.join("app").exists());
    }

    #[test]
    fn shutdown_and_a_closed_inbox_end_the_loop_and_a_timer_does_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut d = daemon(dir.path());
        let mut reclaim = memory::Reclaimer::new(now());
        let stop = Woke::Event(Some(Event::Shutdown("SIGTERM")));
        assert_eq!(d.dispatch(stop, &mut reclaim), Some("SIGTERM"));
        let closed = Woke::Event(None);
        assert_eq!(
            d.dispatch(closed, &mut reclaim),
            Some("event channel closed")
        );
        let epoch = d.state_epoch;
        assert_eq!(d.dispatch(Woke::Timer, &mut reclaim), None);
        assert_eq!(d.state_epoch, epoch);
        assert!(!d.tick_soon);
    }

    #[test]
    fn a_pass_clears_the_request_for_one_and_is_due_again_within_a_second() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let _in_rt = rt.enter();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut d = daemon(dir.path());
        d.tick_soon = true;
        let epoch = d.state_epoch;
        let t = now();
        let next = d.pass(t).expect("no exit option is set");
        assert!(!d.tick_soon);
        assert!(d.state_epoch > epoch);
        assert!(next > t && next <= t + 1.0, "next pass at t + {}", next - t);
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
        super::setup::adopt_protocol_version(&mut state);
        assert_eq!(
            state.core_client_version,
            ferrite_proto::version::PROTOCOL_VERSION
        );
    }
}
