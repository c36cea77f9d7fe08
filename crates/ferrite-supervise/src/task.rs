//! One running app: start, preempt, quit, abort, watch, classify its end.
//!
//! A [`Task`] is driven by its owner: requests (`suspend`, `resume`, `quit`, `abort`) change what
//! is asked of the app, and [`Task::poll`] (about once a second, never blocking) reaps the
//! process, exchanges messages over the shared-memory channels, samples the process tree,
//! checks the limits, escalates kills and returns [`TaskEvent`]s. Time is passed in as `now`.
//!
//! Deviations from the official client, on purpose: apps run in their own session and process
//! group; a suspended app gets `<resume/>` before `<quit/>`/`<abort/>` (a suspended API app
//! does not act on them otherwise); an app that keeps using CPU after `<suspend/>` (or has no
//! API) is stopped with SIGSTOP to its whole group; a quit or abort that is not obeyed within
//! `quit_timeout` is followed by SIGTERM and then SIGKILL to the group, and every process of
//! the tree is killed when the main process ends, so no descendant survives.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::exit::{classify_in_slot, ExitOutcome, Requested};
use crate::limits::{check_disk, check_elapsed, check_memory, dir_size, LimitExceeded, Limits};
use crate::msg::{
    AppStatus, ControlMsg, GraphicsReply, Heartbeat, TrickleDownNotice, TrickleUpNotice,
};
use crate::process::{self, Priority, Reaped, SpawnError, SpawnRequest};
use crate::procinfo::{sample_tree, sample_tree_from, ProcId, ProcStat};
use crate::queue::ControlQueue;
use crate::record::{TaskRecord, TaskStateFile};
use crate::shmem::{Channel, SharedMem, ShmemError, MMAP_FILE_NAME};
use crate::slot::{read_stderr_file, FINISH_FILE, STDERR_FILE, TEMPORARY_EXIT_FILE};

mod adopt;

/// Name of the trickle-up file an app writes into its slot.
pub const TRICKLE_UP_FILE: &str = "trickle_up.xml";

/// Timeouts and periods of the supervision.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Period of heartbeats and process-tree samples (BOINC: 1 s).
    pub poll_period: Duration,
    /// How long an app has to obey `<quit/>`/`<abort/>` before SIGTERM.
    pub quit_timeout: Duration,
    /// How long after SIGTERM before SIGKILL.
    pub term_grace: Duration,
    /// How long an app may keep using CPU after `<suspend/>` before it is SIGSTOPped.
    pub suspend_grace: Duration,
    /// A process-control message that cannot be delivered for this long means the app hangs:
    /// it is killed and will restart (BOINC: 180 s).
    pub message_block_timeout: Duration,
    /// How long the process may live on after writing `boinc_finish_called` before it is
    /// aborted with EXIT_ABORTED_BY_CLIENT (BOINC: 300 s).
    pub finish_file_timeout: Duration,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            poll_period: Duration::from_secs(1),
            quit_timeout: Duration::from_secs(5),
            term_grace: Duration::from_secs(3),
            suspend_grace: Duration::from_secs(5),
            message_block_timeout: Duration::from_secs(180),
            finish_file_timeout: Duration::from_secs(300),
        }
    }
}

/// Figures at the last checkpoint (what a restart resumes from).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Checkpoint {
    /// CPU seconds at the checkpoint, all episodes.
    pub cpu_time: f64,
    /// Elapsed seconds at the checkpoint, all episodes.
    pub elapsed_time: f64,
    /// Fraction done at the checkpoint.
    pub fraction_done: f64,
}

/// Everything needed to start one episode of a task in a prepared slot.
#[derive(Debug, Clone)]
pub struct TaskConfig {
    /// Result name (used for trickle-up file names and the record).
    pub result_name: String,
    /// The slot number (for the record).
    pub slot: u32,
    /// The slot directory, already set up (`Slot::setup`) with `init_data.xml` written.
    pub slot_dir: PathBuf,
    /// Project directory name under `projects/` (escaped master URL); used for
    /// `LD_LIBRARY_PATH` and as the destination of trickle-up files.
    pub project_dir_name: String,
    /// The executable, relative to the slot (`../../projects/P/prog`) or absolute.
    pub program: PathBuf,
    /// Command-line arguments.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(OsString, OsString)>,
    /// Whether the app speaks the BOINC API (false: scripts and plain programs, which are
    /// suspended with signals and told to quit with SIGTERM).
    pub uses_api: bool,
    /// CPU priority.
    pub priority: Priority,
    /// Project master URL; when set, `boinc_task_state.xml` is written at every checkpoint
    /// (as the official client does), so the slot can be resumed by either client.
    pub project_master_url: Option<String>,
    /// Resource limits.
    pub limits: Limits,
    /// Timeouts.
    pub timing: Timing,
    /// RAM available to apps, bytes (sent in heartbeats as `max_wss`).
    pub max_wss: f64,
    /// Where the previous episodes got to (zero for a fresh task).
    pub resume_from: Checkpoint,
    /// Report the first 63 KiB of a long `stderr.txt` instead of the last (cc_config
    /// `stderr_head`).
    pub stderr_head: bool,
    /// What the app may reach ([`crate::confine`]); `None` runs it unconfined.
    pub confine: Option<crate::confine::Policy>,
}

/// Errors while starting a task.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The shared-memory file could not be made.
    #[error("cannot set up shared memory")]
    Shmem(#[from] ShmemError),
    /// A stale exit file could not be removed from the slot.
    #[error("cannot remove stale {0}")]
    StaleFile(PathBuf, #[source] std::io::Error),
    /// The process could not be started (exec failure included).
    #[error("cannot start app")]
    Spawn(#[from] SpawnError),
    /// The app's Landlock ruleset could not be built.
    #[error("cannot confine app")]
    Confine(#[from] crate::confine::ConfineError),
}

/// What the supervisor currently asks of the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Computing.
    Running,
    /// Suspended in memory.
    Suspended,
    /// Asked to quit (will restart later).
    QuitPending,
    /// Asked to abort.
    AbortPending,
    /// The process has ended and was reaped.
    Exited,
}

/// Resource figures of a task.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TaskUsage {
    /// CPU seconds, all episodes (the process tree's, or what the app reports if larger).
    pub cpu_time: f64,
    /// Elapsed (running, not suspended) seconds, all episodes.
    pub elapsed_time: f64,
    /// Current working set of the tree, bytes.
    pub working_set: u64,
    /// The working set smoothed over samples (each sample halves the distance, as the
    /// official client's `rss_smoothed`), bytes.
    pub working_set_smoothed: u64,
    /// Peak working set of this episode, bytes.
    pub peak_working_set: u64,
    /// Current virtual size of the tree, bytes (what the official 7.20 client reports as a
    /// task's `swap_size`: the processes' VmSize).
    pub swap_size: u64,
    /// Peak virtual size of the tree in this episode, bytes (`final_peak_swap_size`).
    pub peak_swap_size: u64,
    /// Last fraction done the app reported (or the resumed one).
    pub fraction_done: f64,
    /// Last measured slot size, bytes.
    pub disk_usage: u64,
    /// Peak slot size, bytes.
    pub peak_disk_usage: u64,
    /// The last checkpoint.
    pub checkpoint: Checkpoint,
    /// Whether the app asks for network access.
    pub want_network: bool,
    /// Bytes sent as reported by the app.
    pub bytes_sent: f64,
    /// Bytes received as reported by the app.
    pub bytes_received: f64,
}

/// How a task ended, with its final figures.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskExit {
    /// The classification.
    pub outcome: ExitOutcome,
    /// Final figures.
    pub usage: TaskUsage,
    /// The last 63 KiB of the slot's `stderr.txt`.
    pub stderr: String,
    /// A limit that caused the abort, if any.
    pub limit: Option<LimitExceeded>,
}

/// Something the owner should know about.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEvent {
    /// The app checkpointed; persist the record now.
    Checkpoint(Checkpoint),
    /// The app's want-network flag changed.
    WantNetwork(bool),
    /// A trickle-up message was moved to the project directory.
    TrickleUp(PathBuf),
    /// The app asked for an intermediate upload.
    UploadRequested,
    /// A limit was exceeded; the task is being aborted with its exit code.
    LimitExceeded(LimitExceeded),
    /// The app kept computing after `<suspend/>` (or has no API): its group was SIGSTOPped.
    StoppedBySignal,
    /// A control message stayed undelivered beyond `message_block_timeout`: the app was
    /// killed and will restart.
    Hung,
    /// The process ended; the task is finished with (see [`ExitOutcome::will_restart`]).
    Exited(TaskExit),
}

/// One running app process.
#[derive(Debug)]
pub struct Task {
    /// Inputs of this episode.
    cfg: TaskConfig,
    /// Main PID, also the process group and session.
    pid: i32,
    /// Start time of the main process (identifies it in /proc against PID reuse).
    pid_starttime: u64,
    /// The mapped channels (also for non-API apps, which simply ignore the file).
    shm: Option<SharedMem>,
    /// Process-control messages waiting for the channel.
    queue: ControlQueue,
    /// What is asked of the app.
    state: TaskState,
    /// Quit/abort request, for the exit classification.
    requested: Requested,
    /// The group is stopped with SIGSTOP.
    stopped: bool,
    /// Suspend-obedience check: when to look next, and the baseline once taken (when, CPU
    /// seconds of the group then).
    suspend_check: Option<(Instant, Option<(Instant, f64)>)>,
    /// When the quit or abort was requested.
    request_time: Option<Instant>,
    /// When SIGTERM was sent.
    term_time: Option<Instant>,
    /// When SIGKILL was sent.
    kill_time: Option<Instant>,
    /// The previous poll (elapsed time accrues between polls while running).
    last_poll: Instant,
    /// When the next heartbeat / tree sample is due.
    next_sample: Instant,
    /// When the slot size is next measured.
    next_disk_check: Instant,
    /// CPU seconds of this episode measured in /proc (monotone).
    episode_cpu: f64,
    /// Every process seen in the tree (to kill those that left the group).
    members: BTreeSet<ProcId>,
    /// Running figures.
    usage: TaskUsage,
    /// The last status message.
    status: Option<AppStatus>,
    /// Network suspended (sent in heartbeats).
    network_suspended: bool,
    /// A limit that caused the abort, if any.
    limit: Option<LimitExceeded>,
    /// Extra processes the app reported (`<other_pid>`, e.g. a VM); sampled and killed with it.
    other_pids: Vec<i32>,
    /// The last graphics reply (web graphics URL, remote desktop address).
    graphics: GraphicsReply,
    /// When `boinc_finish_called` was first seen while the process still ran.
    finish_seen: Option<Instant>,
    /// Set once the process was reaped or abandoned: Drop must not kill anything.
    done: bool,
    /// Started by a previous client and taken over ([`Task::adopt`]): not this process's
    /// child, so its end is seen in /proc and judged by the files it left in the slot.
    adopted: bool,
}

impl Task {
    /// A task whose app runs as `pid` (started now, or taken over when `adopted`), its usage
    /// starting from the checkpoint the configuration resumes from.
    fn running(
        pid: i32,
        pid_starttime: u64,
        shm: Option<SharedMem>,
        cfg: TaskConfig,
        now: Instant,
        adopted: bool,
    ) -> Task {
        let usage = TaskUsage {
            cpu_time: cfg.resume_from.cpu_time,
            elapsed_time: cfg.resume_from.elapsed_time,
            fraction_done: cfg.resume_from.fraction_done,
            checkpoint: cfg.resume_from,
            ..TaskUsage::default()
        };
        Task {
            pid,
            pid_starttime,
            shm,
            queue: ControlQueue::default(),
            state: TaskState::Running,
            requested: Requested::Nothing,
            stopped: false,
            suspend_check: None,
            request_time: None,
            term_time: None,
            kill_time: None,
            last_poll: now,
            next_sample: now,
            next_disk_check: now,
            episode_cpu: 0.0,
            members: BTreeSet::new(),
            usage,
            status: None,
            network_suspended: false,
            limit: None,
            other_pids: Vec::new(),
            graphics: GraphicsReply::default(),
            finish_seen: None,
            done: false,
            adopted,
            cfg,
        }
    }

    /// Starts the app in its (already set up) slot.
    pub fn start(cfg: TaskConfig, now: Instant) -> Result<Task, StartError> {
        let slot = cfg.slot_dir.clone();
        for stale in [TEMPORARY_EXIT_FILE, FINISH_FILE] {
            let p = slot.join(stale);
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StartError::StaleFile(p, e)),
            }
        }
        let shm = SharedMem::create(&slot.join(MMAP_FILE_NAME))?;
        let mut env = vec![(OsString::from("LD_LIBRARY_PATH"), ld_library_path(&cfg))];
        env.extend(cfg.env.iter().cloned());
        // Built here, before the fork; the child only enters it.
        let ruleset = match &cfg.confine {
            Some(policy) => policy.prepare()?,
            None => None,
        };
        let pid = process::spawn(&SpawnRequest {
            program: cfg.program.clone(),
            args: cfg.args.clone(),
            slot_dir: slot,
            env,
            priority: cfg.priority,
            confine: ruleset.as_ref().map(crate::confine::Prepared::raw_fd),
        })?;
        drop(ruleset);
        let pid_starttime = ProcStat::read(pid).map_or(0, |s| s.starttime);
        tracing::debug!(pid, result = %cfg.result_name, "app started");
        let task = Task::running(pid, pid_starttime, Some(shm), cfg, now, false);
        task.send_heartbeat();
        Ok(task)
    }

    /// Main PID (also the process group ID).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// What is asked of the app.
    pub fn state(&self) -> TaskState {
        self.state
    }

    /// Current figures.
    pub fn usage(&self) -> TaskUsage {
        self.usage
    }

    /// The last status message the app sent.
    pub fn last_status(&self) -> Option<AppStatus> {
        self.status
    }

    /// The last graphics reply of the app.
    pub fn graphics(&self) -> &GraphicsReply {
        &self.graphics
    }

    /// Whether the group is currently stopped by SIGSTOP.
    pub fn is_stopped_by_signal(&self) -> bool {
        self.stopped
    }

    /// The inputs of this episode.
    pub fn config(&self) -> &TaskConfig {
        &self.cfg
    }

    /// The persistable record (PIDs and checkpoint figures).
    pub fn record(&self) -> TaskRecord {
        TaskRecord {
            result_name: self.cfg.result_name.clone(),
            slot: self.cfg.slot,
            slot_dir: self.cfg.slot_dir.clone(),
            pid: (self.state != TaskState::Exited).then_some(self.pid),
            pid_starttime: self.pid_starttime,
            checkpoint_cpu_time: self.usage.checkpoint.cpu_time,
            checkpoint_elapsed_time: self.usage.checkpoint.elapsed_time,
            fraction_done: self.usage.checkpoint.fraction_done,
            peak_working_set: self.usage.peak_working_set,
            peak_disk_usage: self.usage.peak_disk_usage,
        }
    }

    /// Preempts the app, keeping it in memory: `<suspend/>` for API apps (SIGSTOP follows if it
    /// keeps computing), SIGSTOP to the group at once for apps without the API.
    pub fn suspend(&mut self, now: Instant) {
        if self.state != TaskState::Running {
            return;
        }
        self.account_elapsed(now);
        self.state = TaskState::Suspended;
        if self.cfg.uses_api {
            self.queue.push(ControlMsg::Suspend);
            self.flush_queue(now);
            self.suspend_check = Some((now + self.cfg.timing.suspend_grace, None));
        } else {
            self.stop_group();
        }
    }

    /// Resumes a suspended app.
    pub fn resume(&mut self, now: Instant) {
        if self.state != TaskState::Suspended {
            return;
        }
        self.last_poll = now;
        self.state = TaskState::Running;
        self.suspend_check = None;
        self.continue_group();
        if self.cfg.uses_api {
            self.queue.push(ControlMsg::Resume);
            self.flush_queue(now);
        }
    }

    /// New RAM limits from the preferences: what heartbeats tell the app (`max_wss`) and the
    /// largest RAM it may ever use ([`Limits::max_ram`]).
    pub fn set_ram_limits(&mut self, max_wss: f64, max_ram: Option<u64>) {
        self.cfg.max_wss = max_wss;
        self.cfg.limits.max_ram = max_ram;
    }

    /// Asks the app to exit so it can be restarted later from its checkpoint.
    pub fn quit(&mut self, now: Instant) {
        self.request_exit(ControlMsg::Quit, Requested::Quit, now);
    }

    /// Asks the app to exit for good; the task ends as [`ExitOutcome::Aborted`] with `code`.
    pub fn abort(&mut self, code: i32, now: Instant) {
        self.request_exit(ControlMsg::Abort, Requested::Abort(code), now);
    }

    /// Sends SIGKILL to the whole tree now (the next poll reaps it).
    pub fn kill(&mut self, now: Instant) {
        if self.requested == Requested::Nothing {
            self.requested = Requested::Quit;
            self.state = TaskState::QuitPending;
        }
        self.kill_tree(libc::SIGKILL);
        self.kill_time.get_or_insert(now);
    }

    /// Tells the app whether network activity is suspended (sent in every heartbeat).
    pub fn set_network_suspended(&mut self, suspended: bool) {
        self.network_suspended = suspended;
    }

    /// Tells the app that a trickle-down file was put in its slot.
    pub fn notify_trickle_down(&mut self) -> bool {
        let notice = TrickleDownNotice {
            have_trickle_down: true,
            upload_file_status: false,
        };
        self.shm
            .as_ref()
            .is_some_and(|s| s.send(Channel::TrickleDown, &notice.encode()))
    }

    /// Asks the app to reread `init_data.xml` (after prefs changed).
    pub fn reread_app_info(&mut self, now: Instant) {
        if self.cfg.uses_api {
            self.queue.push(ControlMsg::RereadAppInfo);
            self.flush_queue(now);
        }
    }

    /// Leaves the app running and forgets it (the daemon is exiting without stopping its apps);
    /// the returned record lets a later daemon find it again.
    pub fn abandon(mut self) -> TaskRecord {
        self.done = true;
        self.record()
    }

    /// The next time [`poll`](Self::poll) has work to do without new input.
    pub fn poll_timeout(&self) -> Instant {
        let mut t = self.next_sample;
        if let Some((at, None)) = self.suspend_check {
            t = t.min(at);
        }
        if let (Some(r), None) = (self.request_time, self.term_time) {
            t = t.min(r + self.cfg.timing.quit_timeout);
        }
        if let (Some(term), None) = (self.term_time, self.kill_time) {
            t = t.min(term + self.cfg.timing.term_grace);
        }
        if let Some(since) = self.queue.blocked_since() {
            t = t.min(since + self.cfg.timing.message_block_timeout);
        }
        if let Some(seen) = self.finish_seen {
            t = t.min(seen + self.cfg.timing.finish_file_timeout);
        }
        t
    }

    /// Does everything due: reap, read messages, sample, heartbeat, limits, escalation.
    /// Never blocks. After an [`TaskEvent::Exited`] event the task is inert.
    pub fn poll(&mut self, now: Instant) -> Vec<TaskEvent> {
        let mut events = Vec::new();
        if self.done {
            return events;
        }
        self.account_elapsed(now);
        self.read_messages(&mut events);
        match self.has_exited() {
            Ok(true) => {
                self.finish(&mut events);
                return events;
            }
            Ok(false) => {}
            Err(e) => {
                tracing::error!(pid = self.pid, error = %e, "cannot wait for app");
            }
        }
        if now >= self.next_sample {
            self.next_sample = now + self.cfg.timing.poll_period;
            self.sample();
            self.send_heartbeat();
        }
        self.flush_queue(now);
        self.check_hung(now, &mut events);
        self.check_limits(now, &mut events);
        self.check_suspend_obeyed(now, &mut events);
        self.escalate(now);
        events
    }

    fn account_elapsed(&mut self, now: Instant) {
        if self.state == TaskState::Running {
            let dt = now.saturating_duration_since(self.last_poll).as_secs_f64();
            self.usage.elapsed_time += dt;
        }
        self.last_poll = now;
    }

    fn read_messages(&mut self, events: &mut Vec<TaskEvent>) {
        let Some(shm) = &self.shm else { return };
        let status = shm.receive(Channel::AppStatus);
        let trickle = shm.receive(Channel::TrickleUp);
        if let Some(text) = shm.receive(Channel::GraphicsReply) {
            self.graphics = GraphicsReply::decode(&text);
        }
        if let Some(text) = status {
            let st = AppStatus::decode(&text);
            self.apply_status(st, events);
        }
        if let Some(text) = trickle {
            let n = TrickleUpNotice::decode(&text);
            if n.new_trickle_up {
                match self.move_trickle_up() {
                    Ok(path) => events.push(TaskEvent::TrickleUp(path)),
                    Err(e) => tracing::warn!(error = %e, "cannot move trickle-up file"),
                }
            }
            if n.new_upload_file {
                events.push(TaskEvent::UploadRequested);
            }
        }
    }

    fn apply_status(&mut self, st: AppStatus, events: &mut Vec<TaskEvent>) {
        if let Some(fd) = st.fraction_done {
            self.usage.fraction_done = fd;
        }
        self.usage.cpu_time = self.usage.cpu_time.max(st.current_cpu_time);
        if let Some(other) = st.other_pid.filter(|p| *p > 1) {
            self.other_pids = vec![other];
        }
        if let Some(b) = st.bytes_sent {
            self.usage.bytes_sent = b;
        }
        if let Some(b) = st.bytes_received {
            self.usage.bytes_received = b;
        }
        if st.want_network != self.usage.want_network {
            self.usage.want_network = st.want_network;
            events.push(TaskEvent::WantNetwork(st.want_network));
        }
        if st.checkpoint_cpu_time > self.usage.checkpoint.cpu_time {
            let cp = Checkpoint {
                cpu_time: st.checkpoint_cpu_time,
                elapsed_time: self.usage.elapsed_time,
                fraction_done: self.usage.fraction_done,
            };
            self.usage.checkpoint = cp;
            // Measure the slot after each checkpoint.
            self.next_disk_check = self.last_poll;
            self.write_task_state_file();
            events.push(TaskEvent::Checkpoint(cp));
        }
        self.status = Some(st);
    }

    fn write_task_state_file(&self) {
        let Some(url) = &self.cfg.project_master_url else {
            return;
        };
        let cp = self.usage.checkpoint;
        let file = TaskStateFile {
            project_master_url: url.clone(),
            result_name: self.cfg.result_name.clone(),
            checkpoint_cpu_time: cp.cpu_time,
            checkpoint_elapsed_time: cp.elapsed_time,
            fraction_done: cp.fraction_done,
            peak_working_set_size: self.usage.peak_working_set as f64,
            peak_swap_size: 0.0,
            peak_disk_usage: self.usage.peak_disk_usage as f64,
        };
        if let Err(e) = file.write(&self.cfg.slot_dir) {
            tracing::warn!(error = %e, "cannot write task state file");
        }
    }

    fn move_trickle_up(&self) -> std::io::Result<PathBuf> {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let dest = self
            .cfg
            .slot_dir
            .join("../../projects")
            .join(&self.cfg.project_dir_name)
            .join(format!("trickle_up_{}_{secs}.xml", self.cfg.result_name));
        fs::rename(self.cfg.slot_dir.join(TRICKLE_UP_FILE), &dest)?;
        Ok(dest)
    }

    fn sample(&mut self) {
        // Forget members that are gone (their PIDs may be reused), then walk from the rest.
        self.members.retain(is_alive);
        let mut roots = vec![self.pid];
        roots.extend(self.members.iter().map(|m| m.pid));
        roots.extend(&self.other_pids);
        let tree = sample_tree_from(&roots);
        self.episode_cpu = self.episode_cpu.max(tree.cpu_time);
        self.usage.cpu_time = self
            .usage
            .cpu_time
            .max(self.cfg.resume_from.cpu_time + self.episode_cpu);
        // Like the official client, prefer the working set the app reports about itself
        // (wrappers report their child's, a VM's is invisible to /proc).
        self.usage.working_set = match self.status.and_then(|s| s.wss) {
            Some(w) if w > 0.0 => w as u64,
            _ => tree.working_set,
        };
        self.usage.working_set_smoothed = if self.usage.working_set_smoothed == 0 {
            self.usage.working_set
        } else {
            (self.usage.working_set_smoothed + self.usage.working_set) / 2
        };
        self.usage.peak_working_set = self.usage.peak_working_set.max(tree.working_set);
        self.usage.swap_size = tree.swap_size;
        self.usage.peak_swap_size = self.usage.peak_swap_size.max(tree.swap_size);
        self.members.extend(tree.members);
    }

    fn send_heartbeat(&self) {
        let Some(shm) = &self.shm else { return };
        if !self.cfg.uses_api {
            return;
        }
        let hb = Heartbeat {
            wss: self.usage.working_set as f64,
            max_wss: self.cfg.max_wss,
            network_suspended: self.network_suspended,
            sporadic_ca: 0,
        };
        shm.send(Channel::Heartbeat, &hb.encode());
    }

    fn flush_queue(&mut self, now: Instant) {
        if let Some(shm) = &self.shm {
            self.queue.flush(shm, now);
        }
    }

    fn check_hung(&mut self, now: Instant, events: &mut Vec<TaskEvent>) {
        let timing = self.cfg.timing.clone();
        if self.stopped {
            // A stopped app cannot read its channel; that is not a hang.
            self.queue.reset_blocked(now);
        } else if let Some(since) = self.queue.blocked_since() {
            if now >= since + timing.message_block_timeout && self.kill_time.is_none() {
                tracing::warn!(
                    pid = self.pid,
                    "app does not read control messages; killing it"
                );
                events.push(TaskEvent::Hung);
                self.kill(now);
            }
        }
        match self.finish_seen {
            None => {
                if self.cfg.slot_dir.join(FINISH_FILE).exists() {
                    self.finish_seen = Some(now);
                }
            }
            Some(seen) => {
                if now >= seen + timing.finish_file_timeout
                    && !matches!(self.requested, Requested::Abort(_))
                {
                    tracing::warn!(pid = self.pid, "process still present after finish file");
                    self.abort(crate::limits::EXIT_ABORTED_BY_CLIENT, now);
                }
            }
        }
    }

    fn check_limits(&mut self, now: Instant, events: &mut Vec<TaskEvent>) {
        // A task too large for any RAM limit can never run: suspended in memory or running,
        // it ends here.
        let memory = matches!(self.state, TaskState::Running | TaskState::Suspended)
            .then(|| check_memory(self.usage.working_set_smoothed, self.cfg.limits.max_ram))
            .flatten();
        let mut exceeded = match (memory, self.state) {
            (Some(m), _) => Some(m),
            (None, TaskState::Running) => {
                check_elapsed(self.usage.elapsed_time, self.cfg.limits.max_elapsed)
            }
            (None, _) => return,
        };
        if exceeded.is_none() && now >= self.next_disk_check {
            self.next_disk_check = now + self.cfg.limits.disk_check_interval;
            if let Ok(size) = dir_size(&self.cfg.slot_dir) {
                self.usage.disk_usage = size;
                self.usage.peak_disk_usage = self.usage.peak_disk_usage.max(size);
                exceeded = check_disk(size, self.cfg.limits.disk_bound);
            }
        }
        if let Some(limit) = exceeded {
            tracing::info!(result = %self.cfg.result_name, "{}", limit.message());
            self.abort(limit.exit_code(), now);
            self.limit = Some(limit.clone());
            events.push(TaskEvent::LimitExceeded(limit));
        }
    }

    fn check_suspend_obeyed(&mut self, now: Instant, events: &mut Vec<TaskEvent>) {
        if self.state != TaskState::Suspended || self.stopped {
            return;
        }
        let Some((at, baseline)) = self.suspend_check else {
            return;
        };
        if now < at {
            return;
        }
        let mut roots = vec![self.pid];
        roots.extend(self.members.iter().map(|m| m.pid));
        let cpu = sample_tree_from(&roots).cpu_time;
        let period = self.cfg.timing.poll_period;
        match baseline {
            None => self.suspend_check = Some((now + period, Some((now, cpu)))),
            Some((taken, base)) => {
                // Computing at 5 % of a CPU or more since the baseline: however little a
                // loaded machine gives it, a group that goes on computing is seen within a
                // few looks. The baseline moves on after ten periods, so a burst long after
                // the suspension is not diluted by the quiet time before it.
                let window = now.saturating_duration_since(taken).as_secs_f64();
                if cpu - base > 0.05 * window.max(1.0) {
                    self.suspend_check = None;
                    tracing::info!(pid = self.pid, "app ignores suspend; stopping its group");
                    self.stop_group();
                    events.push(TaskEvent::StoppedBySignal);
                } else if now.saturating_duration_since(taken) >= period * 10 {
                    self.suspend_check = Some((now + period, Some((now, cpu))));
                } else {
                    self.suspend_check = Some((now + period, Some((taken, base))));
                }
            }
        }
    }

    fn request_exit(&mut self, msg: ControlMsg, req: Requested, now: Instant) {
        if matches!(self.state, TaskState::Exited) {
            return;
        }
        self.account_elapsed(now);
        let was_suspended = self.state == TaskState::Suspended;
        self.continue_group();
        self.state = match req {
            Requested::Abort(_) => TaskState::AbortPending,
            _ => TaskState::QuitPending,
        };
        // An abort overrides a pending quit, never the other way round.
        if !matches!(self.requested, Requested::Abort(_)) {
            self.requested = req;
        }
        self.suspend_check = None;
        self.request_time.get_or_insert(now);
        if self.cfg.uses_api {
            if was_suspended {
                self.queue.push(ControlMsg::Resume);
            }
            self.queue.push(msg);
            self.flush_queue(now);
        } else {
            self.kill_tree(libc::SIGTERM);
            self.term_time.get_or_insert(now);
        }
    }

    fn escalate(&mut self, now: Instant) {
        let Some(req) = self.request_time else { return };
        if self.term_time.is_none() && now >= req + self.cfg.timing.quit_timeout {
            tracing::info!(pid = self.pid, "app did not exit; sending SIGTERM");
            self.kill_tree(libc::SIGCONT);
            self.kill_tree(libc::SIGTERM);
            self.term_time = Some(now);
        }
        if let (Some(term), None) = (self.term_time, self.kill_time) {
            if now >= term + self.cfg.timing.term_grace {
                tracing::info!(pid = self.pid, "app did not exit; sending SIGKILL");
                self.kill_tree(libc::SIGKILL);
                self.kill_time = Some(now);
            }
        }
    }

    fn stop_group(&mut self) {
        self.kill_tree(libc::SIGSTOP);
        self.stopped = true;
    }

    fn continue_group(&mut self) {
        if self.stopped {
            self.kill_tree(libc::SIGCONT);
            self.stopped = false;
        }
    }

    /// Signals the group and every known member that left it.
    fn kill_tree(&mut self, sig: i32) {
        if self.pid <= 1 {
            // An adopted task whose process was already gone: nothing to signal.
            return;
        }
        if let Err(e) = process::signal_group(self.pid, sig) {
            tracing::warn!(pgid = self.pid, sig, error = %e, "cannot signal process group");
        }
        self.members
            .extend(sample_tree(self.pid, &self.other_pids).members);
        for m in &self.members {
            if m.pid != self.pid && is_alive(m) {
                let _ = process::signal_pid(m.pid, sig);
            }
        }
    }

    /// The main process has exited and is still a zombie (so its group ID is still ours):
    /// take the final figures, kill whatever is left of the tree, then reap.
    fn finish(&mut self, events: &mut Vec<TaskEvent>) {
        // Final figures: the last messages, then the tree (children that outlived the main
        // process still count), then rusage.
        self.read_messages(events);
        self.sample();
        self.kill_tree(libc::SIGKILL);
        let reaped = match self.reap() {
            Ok(Some(r)) => r,
            Ok(None) | Err(_) => {
                tracing::error!(pid = self.pid, "exited app could not be reaped");
                Reaped {
                    exit: process::ProcessExit::Other(-1),
                    cpu_time: 0.0,
                    max_rss: 0,
                }
            }
        };
        self.done = true;
        self.state = TaskState::Exited;
        self.episode_cpu = self.episode_cpu.max(reaped.cpu_time);
        self.usage.cpu_time = self
            .usage
            .cpu_time
            .max(self.cfg.resume_from.cpu_time + self.episode_cpu);
        self.usage.peak_working_set = self.usage.peak_working_set.max(reaped.max_rss);
        if let Ok(size) = dir_size(&self.cfg.slot_dir) {
            self.usage.disk_usage = size;
            self.usage.peak_disk_usage = self.usage.peak_disk_usage.max(size);
        }
        self.shm = None;
        let outcome = classify_in_slot(&self.cfg.slot_dir, reaped.exit, self.requested);
        let stderr = read_stderr_file(&self.cfg.slot_dir.join(STDERR_FILE), self.cfg.stderr_head)
            .unwrap_or_default();
        tracing::debug!(pid = self.pid, ?outcome, "app exited");
        events.push(TaskEvent::Exited(TaskExit {
            outcome,
            usage: self.usage,
            stderr,
            limit: self.limit.clone(),
        }));
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // No app outlives its supervisor unless explicitly abandoned.
        self.kill_tree(libc::SIGKILL);
        for _ in 0..50 {
            if self.adopted || !matches!(process::try_reap(self.pid), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

fn is_alive(m: &ProcId) -> bool {
    ProcStat::read(m.pid).is_some_and(|s| s.starttime == m.starttime && !s.is_dead())
}

fn ld_library_path(cfg: &TaskConfig) -> OsString {
    let mut v = OsString::from(format!("../../projects/{}:.:../..", cfg.project_dir_name));
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        v.push(":");
        v.push(old);
    }
    v
}
