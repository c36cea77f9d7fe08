//! The task table: which results have an app process (or a slot) now, and the once-a-second
//! loop that supervises them. Each tick polls the processes, copies their progress into the
//! state's `active_tasks`, builds the scheduling snapshot, asks `ferrite_sched` for the run
//! list and carries it out (start, suspend, quit, resume). Exits become result states.
//!
//! Restarts: every live task's `TaskRecord` is kept in `ferrite_tasks.json` in the data
//! directory (written atomically whenever a task starts, checkpoints or ends). At start-up the
//! slots of the state's `active_tasks` are claimed and any app still running from a previous
//! daemon (found by its record) is ended; the task then resumes from its checkpoint.

mod abort;
mod end;
mod exit;
mod grace;
mod rec;
mod recover;
mod start;
mod trickle;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferrite_hostinfo::GpuInstance;
use ferrite_proto::app_config::AppConfig;
use ferrite_proto::cc_config::{ExcludeGpu, ProxyInfo};
use ferrite_proto::client_state::{ActiveTask, ClientState, ResultState};
use ferrite_proto::init_data::AppInitData;
use ferrite_proto::prefs::GlobalPrefs;
use ferrite_sched::suspend::SuspendReason;
use ferrite_sched::wake::{PassGate, PassInputs};
use ferrite_sched::{
    JobId, PassOutput, PreemptAction, PreemptReason, Scheduler, SkipReason, World,
};
// `ERR_FILE_MISSING` (BOINC's -163): an output the app should have written is not there.
use ferrite_project::existence::ERR_FILE_MISSING;
use ferrite_supervise::{
    end_orphans, find_orphans, find_strays, Checkpoint, ExitOutcome, FileRole, Limits, LinkMode,
    Priority, PriorityConfig, Slot, SlotFile, SlotManager, Task, TaskConfig, TaskEvent, TaskExit,
    TaskRecord, TaskState, Timing,
};
use tracing::{info, warn};

use crate::config;
use crate::snapshot::{build_world, IdMap, LiveTask, SnapshotInputs};
pub use trickle::{log_undelivered, TrickleDownError, Trickles};

/// The records of live tasks, in the data directory.
pub const TASK_RECORDS_FILE: &str = "ferrite_tasks.json";

/// `ERR_FILE_TOO_BIG`: an output file is larger than its `max_nbytes`.
const ERR_FILE_TOO_BIG: i32 = -131;
/// `ERR_WRITE`: an output could not be compressed (`<gzip_when_done/>`).
const ERR_WRITE: i32 = -103;

use ferrite_supervise::confine;
use ferrite_supervise::limits::EXIT_OVERDUE_EXCEEDED;

/// `EXIT_UNSTARTED_LATE`: a job that was never started can no longer meet its deadline.
pub const EXIT_UNSTARTED_LATE: i32 = 200;
/// `EXIT_ABORTED_VIA_GUI`: the exit status of a task aborted by the user.
pub const EXIT_ABORTED_VIA_GUI: i32 = 203;

/// `PROCESS_*` numbers of an active task, as saved and shown to GUIs.
pub const PROCESS_EXECUTING: i32 = 1;
/// The process has exited.
pub const PROCESS_EXITED: i32 = 2;
/// An abort was requested.
pub const PROCESS_ABORT_PENDING: i32 = 5;
/// A quit was requested.
pub const PROCESS_QUIT_PENDING: i32 = 8;
/// Suspended in memory.
pub const PROCESS_SUSPENDED: i32 = 9;

/// How long a task that could not be started waits before its next attempt, seconds: the
/// first wait, doubled after each failure in a row up to the longest. A start can fail for a
/// passing reason (an app file rewritten while it is started, which the file check then fetches
/// again), so the first retry comes soon.
const START_RETRY_FIRST_SECS: f64 = 10.0;
const START_RETRY_MAX_SECS: f64 = 600.0;

/// The smoothed working set after one more sample. A sample of nothing (a process that
/// has exited, or that could not be read) tells nothing of what the task needs and leaves
/// the estimate as it is.
fn fold_working_set(smoothed: f64, sample: u64) -> f64 {
    if sample == 0 {
        smoothed
    } else if smoothed > 0.0 {
        0.9 * smoothed + 0.1 * sample as f64
    } else {
        sample as f64
    }
}

/// The working set a stopped task is scheduled by until it runs again: no less than the
/// peak of the run that just ended. Without it the samples of each restart's first moments
/// pull the estimate down, and a task preempted because memory is short is started again
/// into the same shortage, again and again.
fn estimate_after_stop(smoothed: f64, peak: u64) -> f64 {
    smoothed.max(peak as f64)
}

/// The wait before the next start of a task that failed to start `failures` times in a row.
fn start_retry_secs(failures: u32) -> f64 {
    let doubled = START_RETRY_FIRST_SECS * 2f64.powi(failures.saturating_sub(1).min(16) as i32);
    doubled.min(START_RETRY_MAX_SECS)
}
/// Seconds before a task whose file was missing is tried again.
const MISSING_FILE_RETRY_SECS: f64 = 10.0;

/// How long shutdown waits for apps before killing what is left.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(15);

/// (master URL, result name).
pub type Key = (String, String);

/// One result with a process.
#[derive(Debug)]
pub struct Live {
    /// The supervised process.
    pub task: Task,
    /// Its slot, held while the process lives.
    pub slot: Slot,
    /// Wall time the current run started (for the time slice).
    pub run_started_at: f64,
    /// The task's elapsed time already added to its project's `elapsed_time`.
    pub counted_elapsed: f64,
    /// Whether it is in its finishing wait (`boinc_finish`), its CPU free for the next task.
    pub finish: crate::finishing::FinishWatch,
    /// Whether its app runs confined, and why not (`ferrite explain`).
    pub confinement: confine::Decision,
    /// Its app version uses a GPU (a GPU-only suspension stops it).
    pub uses_gpu: bool,
}

/// What the main loop decided for a supervision tick, besides the state.
#[derive(Debug, Clone, Copy)]
pub struct TickInputs<'a> {
    /// The preferences in force.
    pub prefs: &'a GlobalPrefs,
    /// `cc_config.xml` `<ncpus>` (≤ 0: the detected count).
    pub cc_ncpus: i32,
    /// Why computing is suspended, if it is.
    pub suspend: Option<SuspendReason>,
    /// Why GPU computing is suspended (CPU computing may go on), if it is.
    pub gpu_suspend: Option<SuspendReason>,
    /// Someone uses the computer (selects the in-use CPU and memory limits).
    pub user_active: bool,
    /// Each project's `app_config.xml`.
    pub app_configs: &'a BTreeMap<String, AppConfig>,
    /// `cc_config.xml` `<exclude_gpu>` entries.
    pub exclude_gpus: &'a [ExcludeGpu],
    /// Resources switched off in each project's web preferences.
    pub no_rsc_prefs: &'a BTreeMap<String, Vec<String>>,
    /// `cc_config.xml` `<stderr_head>`: keep the start of a long stderr, not its end.
    pub stderr_head: bool,
    /// The proxy in force, told to apps in `init_data.xml` when it is used.
    pub proxy: Option<&'a ProxyInfo>,
    /// The used devices of each GPU type, in the scheduler's instance order.
    pub gpu_instances: &'a BTreeMap<String, Vec<GpuInstance>>,
    /// `--exit_before_start` (or cc_config `<exit_before_start>`): start nothing; the tick
    /// reports it and the daemon exits.
    pub exit_before_start: bool,
    /// Per-GPU control for every project (excluded GPUs, finish then stop).
    pub gpu_control: &'a crate::gpu_control::Resolved,
    /// The stamp (size, modification time) of each app file as it was verified, by (project
    /// URL, file name): a start whose app files no longer match fails, and the app file check
    /// fetches them again.
    pub app_stamps: &'a crate::transfers::AppStamps,
    /// The daemon's state epoch: a pass runs only when it moved (or another input changed,
    /// or the core's own deadline came).
    pub epoch: u64,
}

/// The time of a tick, from the caller's clock: Unix time, as BOINC counts it, and the
/// monotonic instant the apps' polling measures its intervals with.
#[derive(Debug, Clone, Copy)]
pub struct TickTime {
    /// Seconds since the Unix epoch.
    pub unix: f64,
    /// The same moment on the monotonic clock.
    pub mono: Instant,
}

/// What the tick saw that the daemon should act on.
#[derive(Debug, Default)]
pub struct TickReport {
    /// The state changed (save it).
    pub changed: bool,
    /// Results whose computation finished successfully in this tick.
    pub finished: usize,
    /// An app was about to start and `exit_before_start` is set.
    pub exit_before_start: bool,
    /// Apps started in this tick.
    pub started: usize,
    /// Projects a task of which could not start because a file is gone: their files are
    /// checked again.
    pub files_missing: Vec<String>,
}

/// The daemon's tasks.
#[derive(Debug)]
pub struct TaskTable {
    /// Absolute data directory.
    dir: PathBuf,
    /// Slot numbers in use.
    slots: SlotManager,
    /// Results with a process.
    pub live: HashMap<Key, Live>,
    /// Slots held by results without a process (preempted out of memory, or not yet resumed
    /// after a restart), so no other task gets them.
    held: HashMap<Key, Slot>,
    /// Results that may not start before this wall time (temporary exit, failed start).
    not_before: HashMap<Key, f64>,
    /// Failed starts in a row, per result, for the wait before the next attempt.
    start_failures: HashMap<Key, u32>,
    /// Stable ids for the core.
    ids: IdMap,
    /// The scheduling core.
    sched: Scheduler,
    /// The snapshot of the previous tick (for accounting).
    last_world: Option<World>,
    /// When the core wants the next pass at the latest.
    pub next_wakeup: f64,
    /// When to look at overdue tasks again (at start-up, then daily).
    next_overdue_check: f64,
    /// Apps' priorities: `--no_priority_change` and cc_config `no_priority_change`,
    /// `process_priority`, `process_priority_special`.
    pub priority: PriorityConfig,
    /// Apps' confinement: cc_config `ferrite_confine_apps`, `ferrite_unconfined_project`,
    /// and the kernel's Landlock.
    pub confine: confine::Settings,
    /// The core's decisions of the last pass (run list, fetch, reports, with reasons), for
    /// the project loop and for `explain`.
    last_pass: Option<(PassOutput, World)>,
    /// Whether the next tick needs a pass.
    gate: PassGate,
    /// When the next tick should poll the tasks at the latest, though the core does not need
    /// a pass: soon while a task nears its end (see `finishing`), else never.
    pub fast_poll_at: f64,
    /// Trickle-ups sent by apps and trickle-downs for them (`tasks/trickle.rs`).
    trickles: Trickles,
    /// Whether the core started from the REC the state file saved (at the first pass).
    rec_loaded: bool,
    /// Each project's CPU scheduling priority at the last pass, by project id.
    sched_priorities: Vec<f64>,
    /// Tasks whose apps a previous client left running, or that finished while no client
    /// ran, to be taken over at the first tick (`tasks/recover.rs`).
    adopt: HashMap<Key, recover::Leftover>,
    /// Slots of tasks that ended, kept until a state file that says so is on disk, with the
    /// generation of the state changes that must be saved first (`None`: not yet known).
    done_slots: Vec<(Option<u64>, Slot)>,
    /// cc_config `ferrite_checkpoint_grace`: how long a task may run on to its next
    /// checkpoint once computing is suspended for a reason that can wait, seconds.
    pub checkpoint_grace: f64,
    /// The user's suspension (run mode "never") may wait for checkpoints too (GUI RPC
    /// `set_run_mode` with `<ferrite_at_checkpoint/>`).
    pub user_suspend_at_checkpoint: bool,
    /// The running tasks let run on to their next checkpoint (`tasks/grace.rs`).
    waits: HashMap<Key, ferrite_sched::checkpoint_grace::Waiting>,
}

impl TaskTable {
    /// An empty table for data directory `dir`.
    pub fn new(dir: &Path) -> TaskTable {
        let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let ncpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let limit = u32::try_from(ncpus.saturating_mul(100)).unwrap_or(u32::MAX);
        let support = confine::support();
        // Said once, at start-up; `ferrite explain` says it for each running task.
        match support {
            confine::Support::Available(_) => info!("{}", support.describe()),
            _ => warn!("{}", support.describe()),
        }
        TaskTable {
            slots: SlotManager::new(&dir, limit),
            dir,
            live: HashMap::new(),
            held: HashMap::new(),
            not_before: HashMap::new(),
            start_failures: HashMap::new(),
            ids: IdMap::default(),
            sched: Scheduler::new(ferrite_sched::Policy::default()),
            last_world: None,
            next_wakeup: 0.0,
            next_overdue_check: 0.0,
            priority: PriorityConfig::default(),
            confine: confine::Settings {
                enabled: true,
                unconfined_projects: Vec::new(),
                support,
            },
            last_pass: None,
            gate: PassGate::default(),
            fast_poll_at: f64::INFINITY,
            trickles: Trickles::default(),
            rec_loaded: false,
            sched_priorities: Vec::new(),
            adopt: HashMap::new(),
            done_slots: Vec::new(),
            checkpoint_grace: ferrite_proto::cc_config::CHECKPOINT_GRACE_DEFAULT_SECS,
            user_suspend_at_checkpoint: false,
            waits: HashMap::new(),
        }
    }

    /// The state changes noted so far are generation `noted`, and the state file on disk
    /// holds generation `saved`: the slots of tasks that ended are tagged with `noted` when
    /// they are not yet, and cleaned and freed once `saved` reaches their tag.
    pub fn state_saved(&mut self, noted: u64, saved: u64) {
        let mut kept = Vec::new();
        for (tag, slot) in std::mem::take(&mut self.done_slots) {
            let tag = tag.unwrap_or(noted);
            if tag <= saved {
                let n = slot.number();
                if let Err(e) = self.slots.release(slot) {
                    warn!("cannot clean slot {n}: {e}");
                }
            } else {
                kept.push((Some(tag), slot));
            }
        }
        self.done_slots = kept;
    }

    fn records(&self) -> Vec<TaskRecord> {
        self.live
            .values()
            .map(|l| l.task.record())
            .chain(self.adopt.values().filter_map(|a| a.record.clone()))
            .collect()
    }

    fn write_records(&self) {
        self.write_records_with(None);
    }

    /// The records file, with `extra` (a task about to be started) beside the live tasks.
    fn write_records_with(&self, extra: Option<TaskRecord>) {
        let path = self.dir.join(TASK_RECORDS_FILE);
        let mut records = self.records();
        records.extend(extra);
        match serde_json::to_string_pretty(&records) {
            Ok(text) => {
                if let Err(e) = config::write_atomic(&path, &text) {
                    warn!("cannot write {}: {e}", path.display());
                }
            }
            Err(e) => warn!("cannot encode task records: {e}"),
        }
    }

    /// Whether any app process exists.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Whether this client had tasks when it started or has asked a project for work since.
    pub fn had_or_requested_work(&self) -> bool {
        self.sched.had_work()
    }

    /// The core's decisions of the last tick, with the snapshot they were made on.
    pub fn last_pass(&self) -> Option<(&PassOutput, &World)> {
        self.last_pass.as_ref().map(|(p, w)| (p, w))
    }

    /// The stable ids that connect the core's numbers to projects and results.
    pub fn ids(&self) -> &IdMap {
        &self.ids
    }

    /// The scheduling core, for the project loop to feed RPC outcomes back
    /// (`handle_rpc_succeeded`, `handle_rpc_failed`, `handle_jobs_arrived`, …).
    pub fn scheduler_mut(&mut self) -> &mut Scheduler {
        &mut self.sched
    }

    /// CPU seconds the live tasks' processes have used so far (their current runs).
    pub fn apps_cpu_time(&self) -> f64 {
        self.live.values().map(|l| l.task.usage().cpu_time).sum()
    }

    /// What the GUI shows of a result's process, if it has one.
    pub fn live_of(&self, url: &str, result: &str) -> Option<&Live> {
        self.live.get(&(url.to_owned(), result.to_owned()))
    }

    /// The daemon's tick moved the state epoch on to `epoch` after this table's tick: that
    /// step is not news for the next pass.
    pub fn settle(&mut self, epoch: u64) {
        self.gate.settle(epoch);
    }

    /// Something the core reads changed outside the state (its copy of the saved backoffs):
    /// the next tick runs a pass.
    pub fn request_pass(&mut self, now: f64) {
        self.gate.wake_by(now);
    }

    /// One supervision tick: every app is polled; the core's pass (snapshot, accounting, run
    /// list) runs only when the gate says something it reads changed, when an app exited,
    /// or when its own next wakeup came. While computing is suspended
    /// (`inputs.suspend`) nothing starts and every process stops: suspended in memory, or told
    /// to quit when the reason allows it, `leave_apps_in_memory` is off and the task has a
    /// checkpoint to restart from; for a reason that can wait, a task that checkpoints first
    /// runs on to its next checkpoint (`tasks/grace.rs`). While only GPU computing is
    /// suspended (`inputs.gpu_suspend`) the GPU tasks stop the same way (quit, as the run list
    /// does with GPU tasks), after their next checkpoint when the reason can wait. The tick
    /// reads no clock: all its time is `now`'s.
    pub fn tick(
        &mut self,
        state: &mut ClientState,
        inputs: &TickInputs<'_>,
        now: TickTime,
    ) -> TickReport {
        let TickTime {
            unix: now,
            mono: inst,
        } = now;
        let prefs = inputs.prefs;
        let run_allowed = inputs.suspend.is_none();
        let quit_when_suspended = inputs
            .suspend
            .is_some_and(|r| !r.keeps_tasks_in_memory() && !prefs.leave_apps_in_memory);
        let mut report = TickReport::default();
        // The RAM limits follow the preferences and the user's activity.
        let max_wss = prefs.available_ram(state.host_info.m_nbytes, inputs.user_active);
        let ram_bound = max_ram(prefs, state.host_info.m_nbytes);
        for l in self.live.values_mut() {
            l.task.set_ram_limits(max_wss, ram_bound);
        }
        if !self.adopt.is_empty() {
            self.take_over(state, inputs, now, inst, &mut report);
        }
        let live_before = self.live.len();
        self.poll_all(state, inst, now, &mut report);
        self.stop_at_checkpoints(state, inputs, quit_when_suspended, inst, now);
        let exited = self.live.len() != live_before;
        let (finish_changed, fast_poll) = crate::finishing::watch(&mut self.live, inst);
        if finish_changed {
            self.gate.wake_by(now);
        }
        // Near a task's end the daemon looks often, so its CPU goes on as soon as it is free.
        self.fast_poll_at = if fast_poll {
            now + crate::finishing::FAST_POLL_SECS
        } else {
            f64::INFINITY
        };
        let running_wss: f64 = self
            .live
            .values()
            .filter(|l| l.task.state() == TaskState::Running)
            .map(|l| l.task.usage().working_set as f64)
            .sum();
        let gate_inputs = PassInputs {
            epoch: inputs.epoch,
            suspend: inputs.suspend,
            gpu_suspend: inputs.gpu_suspend,
            user_active: inputs.user_active,
            over_ram_limit: running_wss > max_wss,
        };
        if !exited && !self.gate.is_due(&gate_inputs, now) {
            return report;
        }

        let world = self.snapshot(state, inputs, now);
        if let Some(prev) = &self.last_world {
            self.sched.account(prev, now);
        }
        let out = self.sched.pass(&world, now);
        self.next_wakeup = out.next_wakeup;
        let run: HashSet<JobId> = if run_allowed {
            out.run.run.iter().map(|e| e.job).collect()
        } else {
            HashSet::new()
        };
        let quit: HashSet<JobId> = out
            .run
            .preempt
            .iter()
            .filter(|p| p.action == PreemptAction::Quit)
            .map(|p| p.job)
            .collect();
        // Tasks over a memory limit, with the limit's words for the log.
        let over_ram: HashMap<JobId, &str> = out
            .run
            .preempt
            .iter()
            .filter_map(|p| match p.reason {
                PreemptReason::Skipped(SkipReason::Memory { .. }) => {
                    Some((p.job, "its working set exceeds the RAM limit"))
                }
                PreemptReason::Skipped(SkipReason::Swap { .. }) => {
                    Some((p.job, "its swap use exceeds the swap limit"))
                }
                _ => None,
            })
            .collect();

        let late: Vec<Key> = out
            .abort
            .iter()
            .filter_map(|id| self.ids.job(*id))
            .filter(|key| !self.live.contains_key(*key))
            .cloned()
            .collect();
        if self.abort_unstarted_late(state, &late, now) {
            report.changed = true;
        }
        // Stop what must not run, resume what may.
        let keys: Vec<Key> = self.live.keys().cloned().collect();
        for key in keys {
            let id = self.ids.job_id(&key.0, &key.1);
            let runs_on = self.runs_on_to_checkpoint(&key, inputs, now);
            let Some(l) = self.live.get_mut(&key) else {
                continue;
            };
            let st = l.task.state();
            // Whether quitting keeps its work (it restarts from a checkpoint).
            let checkpointed = state
                .active_task(&key.0, &key.1)
                .is_some_and(|a| a.checkpoint_cpu_time > 0.0);
            if run.contains(&id) {
                if st == TaskState::Suspended {
                    info!(project = %key.0, "resuming task {}", key.1);
                    l.task.resume(inst);
                    l.run_started_at = now;
                }
            } else if quit.contains(&id) && run_allowed && !runs_on {
                if let Some(limit) = over_ram.get(&id).filter(|_| !checkpointed) {
                    // Quitting would lose all its work: suspended in memory instead, as the
                    // official client does with every task over the RAM limit.
                    if st == TaskState::Running {
                        info!(
                            project = %key.0,
                            "suspending task {} ({limit}; it has no checkpoint yet, so it stays \
                             in memory)",
                            key.1
                        );
                        l.task.suspend(inst);
                    }
                } else if matches!(st, TaskState::Running | TaskState::Suspended) {
                    let why = over_ram
                        .get(&id)
                        .map_or(String::new(), |limit| format!("{limit}; "));
                    info!(
                        project = %key.0,
                        "preempting task {} ({why}quit; it restarts from its checkpoint)",
                        key.1
                    );
                    l.task.quit(inst);
                }
            } else if st == TaskState::Running && !runs_on {
                grace::stop_for_suspension(l, &key, quit_when_suspended && checkpointed, inst);
            }
        }
        // Start what should run and has no process.
        for e in &out.run.run {
            if !run_allowed {
                break;
            }
            let Some(key) = self.ids.job(e.job).cloned() else {
                continue;
            };
            if self.live.contains_key(&key) {
                continue;
            }
            if inputs.exit_before_start {
                info!(project = %key.0, "exiting before task {} starts (exit_before_start)", key.1);
                report.exit_before_start = true;
                break;
            }
            if let Some(name) = crate::filecheck::missing_file(&self.dir, state, &key.0, &key.1) {
                warn!(
                    project = %key.0,
                    "cannot start task {}: file {name} is missing; checking the project's files",
                    key.1
                );
                if !report.files_missing.contains(&key.0) {
                    report.files_missing.push(key.0.clone());
                }
                // The check makes it wait for the download; this only spaces the tries
                // should the file stay missing.
                self.not_before.insert(key, now + MISSING_FILE_RETRY_SECS);
                continue;
            }
            match self.start(state, inputs, &key, e.instances, now, inst, None) {
                Ok(()) => {
                    report.changed = true;
                    report.started += 1;
                    self.start_failures.remove(&key);
                }
                Err(msg) => {
                    let failures = self.start_failures.entry(key.clone()).or_insert(0);
                    *failures += 1;
                    let wait = start_retry_secs(*failures);
                    warn!(project = %key.0,
                        "cannot start task {}: {msg}; retrying in {wait:.0} s", key.1);
                    self.not_before.insert(key, now + wait);
                }
            }
        }
        // The interval that starts now, as the core will account it next time.
        self.last_world = Some(self.snapshot(state, inputs, now));
        self.gate.passed(gate_inputs, self.next_wakeup);
        if let Some(t) = self
            .not_before
            .values()
            .copied()
            .filter(|&t| t > now)
            .min_by(f64::total_cmp)
        {
            self.gate.wake_by(t);
        }
        self.last_pass = Some((out, world));
        self.publish_rec(state);
        if report.changed {
            self.write_records();
        }
        report
    }

    fn snapshot(&mut self, state: &ClientState, inputs: &TickInputs<'_>, now: f64) -> World {
        let gpu_control = inputs.gpu_control;
        // The live tasks by borrowed names: no copy of every result's name per snapshot.
        let live: HashMap<(&str, &str), &Live> = self
            .live
            .iter()
            .map(|((u, n), l)| ((u.as_str(), n.as_str()), l))
            .collect();
        let view = |url: &str, r: &str| {
            if live.is_empty() {
                return None;
            }
            live.get(&(url, r)).map(|l| {
                let u = l.task.usage();
                LiveTask {
                    running: l.task.state() == TaskState::Running,
                    suspended: l.task.state() == TaskState::Suspended,
                    run_started_at: l.run_started_at,
                    elapsed: u.elapsed_time,
                    fraction_done: u.fraction_done,
                    working_set: u.working_set as f64,
                    swap: u.swap_size as f64,
                    finishing: l.finish.is_finishing(),
                }
            })
        };
        let inputs = SnapshotInputs {
            prefs: inputs.prefs,
            cc_ncpus: inputs.cc_ncpus,
            user_active: inputs.user_active,
            gpu_suspended: inputs.gpu_suspend.is_some(),
            app_configs: inputs.app_configs,
            exclude_gpus: inputs.exclude_gpus,
            no_rsc_prefs: inputs.no_rsc_prefs,
            not_before: &self.not_before,
            now,
        };
        let mut world = build_world(state, &mut self.ids, &inputs, &view);
        crate::gpu_control::apply(&mut world, gpu_control);
        world
    }

    /// Polls every process, keeps the state's active tasks up to date and handles exits.
    fn poll_all(
        &mut self,
        state: &mut ClientState,
        inst: Instant,
        now: f64,
        report: &mut TickReport,
    ) {
        let mut exits = Vec::new();
        let mut trickled = Vec::new();
        let mut checkpointed = false;
        for (key, l) in &mut self.live {
            for ev in l.task.poll(inst) {
                match ev {
                    TaskEvent::Checkpoint(c) => {
                        checkpointed = true;
                        if let Some(a) = active_task_mut(state, key) {
                            set_checkpoint(a, c);
                        }
                    }
                    TaskEvent::LimitExceeded(lim) => {
                        warn!(project = %key.0, "task {}: {}", key.1, lim.message());
                    }
                    TaskEvent::Hung => {
                        warn!(project = %key.0, "task {}: app not responding; restarting it", key.1)
                    }
                    TaskEvent::Exited(x) => exits.push((key.clone(), x)),
                    TaskEvent::TrickleUp(_) => trickled.push(key.clone()),
                    _ => {}
                }
            }
            let u = l.task.usage();
            count_elapsed(state, &key.0, &mut l.counted_elapsed, u.elapsed_time);
            if let Some(a) = active_task_mut(state, key) {
                a.current_cpu_time = u.cpu_time;
                a.working_set_size = u.working_set as f64;
                a.swap_size = u.swap_size as f64;
                a.working_set_size_smoothed =
                    fold_working_set(a.working_set_size_smoothed, u.working_set);
                a.active_task_state = match l.task.state() {
                    TaskState::Running => PROCESS_EXECUTING,
                    TaskState::Suspended => PROCESS_SUSPENDED,
                    TaskState::QuitPending => PROCESS_QUIT_PENDING,
                    TaskState::AbortPending => PROCESS_ABORT_PENDING,
                    TaskState::Exited => PROCESS_EXITED,
                };
            }
        }
        if checkpointed {
            report.changed = true;
            self.write_records();
        }
        for key in &trickled {
            self.trickle_up_sent(state, key);
            report.changed = true;
        }
        self.send_trickle_downs();
        for (key, x) in exits {
            if let Some(mut l) = self.live.remove(&key) {
                count_elapsed(state, &key.0, &mut l.counted_elapsed, x.usage.elapsed_time);
                self.exited(state, &key, l.slot, x, now, report);
            }
        }
    }

    /// Stops every app (quit through the channel, then signals) and waits until none is left;
    /// with `abort_code`, the apps are aborted instead and their results end with that code.
    pub async fn shutdown(&mut self, state: &mut ClientState, abort_code: Option<i32>) {
        if self.live.is_empty() {
            return;
        }
        info!("stopping {} app(s)", self.live.len());
        let begin = Instant::now();
        for l in self.live.values_mut() {
            match abort_code {
                Some(code) => l.task.abort(code, begin),
                None => l.task.quit(begin),
            }
        }
        let mut killed = false;
        while !self.live.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = crate::clock::now();
            let mut report = TickReport::default();
            self.poll_all(state, Instant::now(), now, &mut report);
            if !killed && begin.elapsed() > SHUTDOWN_WAIT {
                killed = true;
                warn!("apps still running after {SHUTDOWN_WAIT:?}; killing them");
                for l in self.live.values_mut() {
                    l.task.kill(Instant::now());
                }
            }
            if begin.elapsed() > SHUTDOWN_WAIT * 2 {
                warn!("{} app(s) could not be stopped", self.live.len());
                break;
            }
        }
        self.write_records();
    }
}

/// Whether the app speaks the BOINC API: it declares an API version and its program is not a
/// script (an interpreter-run script cannot map the shared-memory channel; it is controlled
/// with signals).
fn uses_api(api_version: &str, program: &Path) -> bool {
    if api_version.trim().is_empty() {
        return false;
    }
    let mut head = [0u8; 2];
    let is_script = fs::File::open(program)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok_and(|()| &head == b"#!");
    !is_script
}

fn dir_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Adds what a running task's elapsed time grew by since last counted to its project's
/// `elapsed_time` (the project's total computing time, as the official client keeps it).
fn count_elapsed(state: &mut ClientState, url: &str, counted: &mut f64, elapsed: f64) {
    if elapsed > *counted {
        if let Some(ps) = state.project_mut(url) {
            ps.project.elapsed_time += elapsed - *counted;
        }
        *counted = elapsed;
    }
}

/// The deadline an app is told (`init_data.xml` `computation_deadline`): the report
/// deadline less the minimum work buffer (at least 180 s), as the official client tells it.
fn computation_deadline(report_deadline: f64, prefs: &GlobalPrefs) -> f64 {
    report_deadline - (prefs.work_buf_min_days * 86_400.0).max(180.0)
}

fn resource_share_fraction(state: &ClientState, url: &str) -> f64 {
    let total: f64 = state
        .projects
        .iter()
        .map(|p| p.project.resource_share.max(0.0))
        .sum();
    let mine = state.project(url).map_or(0.0, |p| p.project.resource_share);
    if total > 0.0 {
        mine / total
    } else {
        1.0
    }
}

/// Started tasks (those with an active task) past their report deadline: (project, result,
/// days overdue).
fn overdue_tasks(state: &ClientState, now: f64) -> Vec<(String, String, f64)> {
    let look = crate::lookup::StateLookup::new(state);
    state
        .active_tasks
        .iter()
        .filter_map(|a| {
            let r = look.result(&a.project_master_url, &a.result_name)?;
            let days = (now - r.report_deadline) / 86400.0;
            (r.report_deadline > 0.0 && days > 0.0 && r.state < ResultState::ComputeError)
                .then(|| (a.project_master_url.clone(), a.result_name.clone(), days))
        })
        .collect()
}

/// The largest RAM apps may ever use (the larger of the in-use and not-in-use limits): a task
/// whose smoothed working set goes beyond it could never run and is aborted (198).
fn max_ram(prefs: &GlobalPrefs, m_nbytes: f64) -> Option<u64> {
    let most = prefs
        .available_ram(m_nbytes, true)
        .max(prefs.available_ram(m_nbytes, false));
    (most.is_finite() && most >= 1.0).then_some(most as u64)
}

/// The slot's file mapping: app-version files and workunit inputs, then the result's outputs.
fn slot_files(
    ps: &ferrite_proto::client_state::ProjectState,
    dir: &Path,
    key: &Key,
) -> Vec<SlotFile> {
    let project_dir = dir_name(&config::project_dir(dir, &key.0));
    let Some(r) = ps.result(&key.1) else {
        return Vec::new();
    };
    let mode = |copy: bool| {
        if copy {
            LinkMode::Copy
        } else if ps.project.use_symlinks {
            LinkMode::Symlink
        } else {
            LinkMode::SoftLinkFile
        }
    };
    let mut out = Vec::new();
    let mut add = |f: &ferrite_proto::client_state::FileRef, role| {
        out.push(SlotFile {
            open_name: if f.open_name.is_empty() {
                f.file_name.clone()
            } else {
                f.open_name.clone()
            },
            project_dir: project_dir.clone(),
            file_name: f.file_name.clone(),
            mode: mode(f.copy_file),
            role,
        });
    };
    if let Some(av) = ps.app_version_of(r) {
        for f in &av.file_refs {
            add(f, FileRole::Input);
        }
    }
    if let Some(wu) = ps.workunit(&r.wu_name) {
        for f in &wu.input_files {
            add(f, FileRole::Input);
        }
    }
    for f in &r.output_files {
        add(f, FileRole::Output);
    }
    out
}

fn active_task_mut<'a>(state: &'a mut ClientState, key: &Key) -> Option<&'a mut ActiveTask> {
    state
        .active_tasks
        .iter_mut()
        .find(|a| a.project_master_url == key.0 && a.result_name == key.1)
}

fn set_checkpoint(a: &mut ActiveTask, c: Checkpoint) {
    a.checkpoint_cpu_time = c.cpu_time;
    a.checkpoint_elapsed_time = c.elapsed_time;
    a.checkpoint_fraction_done = c.fraction_done;
    a.checkpoint_fraction_done_elapsed_time = c.elapsed_time;
}

fn read_records(dir: &Path) -> Vec<TaskRecord> {
    let path = dir.join(TASK_RECORDS_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
            warn!("{} is not readable ({e}); ignoring it", path.display());
            Vec::new()
        }),
        Err(_) => Vec::new(),
    }
}

/// Whether an `<api_version>` (`7.5.0`) is at least `major.minor`; an empty or unreadable
/// one is not (the official client's `api_version_at_least`).
fn api_at_least(v: &str, major: u32, minor: u32) -> bool {
    let mut it = v.trim().split('.').map(|p| p.parse::<u32>().ok());
    match (it.next().flatten(), it.next().flatten()) {
        (Some(a), b) => (a, b.unwrap_or(0)) >= (major, minor),
        _ => false,
    }
}

/// The device number for a GPU task: the lowest instance in the core's assignment mask.
fn gpu_device_num(instances: u64) -> Option<i32> {
    (instances != 0).then(|| i32::try_from(instances.trailing_zeros()).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn old_apps_get_their_device_on_the_command_line() {
        assert!(super::api_at_least("7.5.0", 7, 5));
        assert!(super::api_at_least("8.0", 7, 5));
        assert!(!super::api_at_least("7.4.9", 7, 5));
        assert!(!super::api_at_least("", 7, 5));
    }

    #[test]
    fn the_working_set_estimate_ignores_empty_samples_and_keeps_a_stopped_runs_peak() {
        use super::{estimate_after_stop, fold_working_set};
        let mb = 1_000_000u64;
        let mut ws = fold_working_set(0.0, 500 * mb);
        assert_eq!(ws, 500e6);
        // An exited process reads as nothing: the estimate stays.
        assert_eq!(fold_working_set(ws, 0), ws);
        // A restart's first, small samples pull it down...
        for _ in 0..10 {
            ws = fold_working_set(ws, 10 * mb);
        }
        assert!(ws < 250e6, "{ws}");
        // ...until the run stops: then it is what the run reached at its peak.
        assert_eq!(estimate_after_stop(ws, 520 * mb), 520e6);
        assert_eq!(estimate_after_stop(600e6, 520 * mb), 600e6);
    }

    #[test]
    fn a_failed_start_is_retried_soon_then_less_and_less_often() {
        let waits: Vec<f64> = (1..=8).map(super::start_retry_secs).collect();
        assert_eq!(waits, [10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 600.0, 600.0]);
        assert_eq!(super::start_retry_secs(u32::MAX), 600.0);
    }

    #[test]
    fn the_lowest_assigned_instance_is_the_device() {
        assert_eq!(super::gpu_device_num(0), None);
        assert_eq!(super::gpu_device_num(0b1), Some(0));
        assert_eq!(super::gpu_device_num(0b110), Some(1));
    }

    use super::*;

    #[test]
    fn scripts_are_controlled_with_signals() {
        let d = tempfile::tempdir().expect("temp file");
        let script = d.path().join("app.sh");
        fs::write(&script, "#!/bin/sh\nexit 0\n").expect("temp file");
        let bin = d.path().join("app");
        fs::write(&bin, b"\x7fELF....").expect("temp file");
        assert!(!uses_api("7.20.0", &script));
        assert!(uses_api("7.20.0", &bin));
        assert!(!uses_api("", &bin));
    }
}
