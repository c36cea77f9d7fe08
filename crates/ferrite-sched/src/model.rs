//! The scheduling model: a [`World`] snapshot of the host, preferences, time statistics,
//! projects, apps, app versions and jobs, as the daemon (or the emulator) sees them at one
//! instant. Everything the scheduling passes read comes from here; nothing in it is mutated
//! by the core. Ids of projects, apps and app versions are indices into the `World` vectors
//! (stable for the life of a snapshot); job ids are opaque and stable across snapshots.

use std::fmt;

/// Seconds since the Unix epoch, as BOINC keeps time. Plain `f64` so the emulator can use
/// virtual time freely.
pub type Time = f64;

/// Bytes in a "GB" of BOINC preferences (`GIGA` = 2^30).
pub const GIGA: f64 = 1_073_741_824.0;

/// A processing resource type: index 0 is the CPU, 1.. are coprocessor types in the order of
/// [`Host::coprocs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceId(pub u8);

impl ResourceId {
    /// The CPU resource.
    pub const CPU: ResourceId = ResourceId(0);

    /// Index into per-resource vectors.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// True for the CPU.
    pub fn is_cpu(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_cpu() {
            write!(f, "CPU")
        } else {
            write!(f, "coproc#{}", self.0)
        }
    }
}

/// A project: index into [`World::projects`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProjectId(pub u32);

/// An app: index into [`World::apps`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AppId(pub u32);

/// An app version: index into [`World::app_versions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AppVersionId(pub u32);

/// A job (BOINC "result"): an opaque id chosen by the caller, stable across snapshots, so the
/// core can keep per-job state (e.g. "ran for a deadline") between passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(pub u32);

impl ProjectId {
    /// Index into [`World::projects`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}
impl AppId {
    /// Index into [`World::apps`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}
impl AppVersionId {
    /// Index into [`World::app_versions`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Kind of a coprocessor type; it only matters for display and for matching XML names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoprocKind {
    /// `NVIDIA` (CUDA / OpenCL).
    Nvidia,
    /// `ATI` (AMD).
    Amd,
    /// `intel_gpu`.
    IntelGpu,
    /// `apple_gpu`.
    AppleGpu,
    /// A user-defined coprocessor type from `cc_config.xml` `<coproc>`, by its name.
    Other(String),
}

/// One coprocessor type of the host.
#[derive(Clone, Debug, PartialEq)]
pub struct Coproc {
    /// What it is (display and XML name only).
    pub kind: CoprocKind,
    /// Number of instances (devices), at most 64 as in BOINC.
    pub count: u32,
    /// Peak FLOPS of one instance; ≤ 0 or absurd values are sanitised to 100 GFLOPS
    /// (see [`Coproc::sane_peak_flops`]).
    pub peak_flops: f64,
}

impl Coproc {
    /// `peak_flops` with BOINC's sanitising: ≤ 0 or > 1e15 becomes 1e11.
    pub fn sane_peak_flops(&self) -> f64 {
        if self.peak_flops <= 0.0 || self.peak_flops > 1e15 {
            1e11
        } else {
            self.peak_flops
        }
    }
}

/// The host as far as scheduling cares.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    /// Logical CPUs detected (or `cc_config <ncpus>` if the daemon applied it).
    pub ncpus: u32,
    /// Whetstone FLOPS of one CPU core (BOINC default 1e9 before benchmarks).
    pub p_fpops: f64,
    /// Physical RAM in bytes; the RAM budget of the run list is a fraction of it.
    pub ram_bytes: f64,
    /// Swap space in bytes (`m_swap`); the swap budget of the run list is a fraction of it
    /// (0: no swap, not checked).
    pub swap_bytes: f64,
    /// Coprocessor types; resource `ResourceId(i + 1)` is `coprocs[i]`.
    pub coprocs: Vec<Coproc>,
}

impl Host {
    /// A host with `ncpus` CPUs of `p_fpops` each, `ram_bytes` of RAM and no coprocessors.
    pub fn cpu_only(ncpus: u32, p_fpops: f64, ram_bytes: f64) -> Self {
        Host {
            ncpus,
            p_fpops,
            ram_bytes,
            swap_bytes: 0.0,
            coprocs: Vec::new(),
        }
    }

    /// Number of resource types (CPU + coprocessor types).
    pub fn n_resources(&self) -> usize {
        1 + self.coprocs.len()
    }
}

/// Global preferences the scheduler uses (already merged and clamped by the proto layer).
#[derive(Clone, Debug, PartialEq)]
pub struct Prefs {
    /// Minimum work buffer in days (`work_buf_min_days`): the fetch trigger.
    pub work_buf_min_days: f64,
    /// Extra buffer in days above the minimum (`work_buf_additional_days`).
    pub work_buf_additional_days: f64,
    /// Time slice in minutes (`cpu_scheduling_period_minutes`); preemption waits for it.
    pub cpu_scheduling_period_minutes: f64,
    /// Percentage of CPUs to use (`max_ncpus_pct`, 0 = all).
    pub max_ncpus_pct: f64,
    /// RAM percentage usable while the user is active (`ram_max_used_busy_pct`).
    pub ram_max_used_busy_pct: f64,
    /// RAM percentage usable while the user is idle (`ram_max_used_idle_pct`).
    pub ram_max_used_idle_pct: f64,
    /// Percentage of the swap space the running apps may use (`vm_max_used_pct`).
    pub vm_max_used_pct: f64,
    /// Keep preempted CPU apps in memory (suspend) rather than quitting them.
    pub leave_apps_in_memory: bool,
    /// Disk: maximum GB BOINC may use (0 = no limit).
    pub disk_max_used_gb: f64,
    /// Disk: maximum percentage of the volume (0 = no limit).
    pub disk_max_used_pct: f64,
    /// Disk: keep at least this many GB free.
    pub disk_min_free_gb: f64,
}

impl Default for Prefs {
    /// BOINC's defaults (`GLOBAL_PREFS::defaults`).
    fn default() -> Self {
        Prefs {
            work_buf_min_days: 0.1,
            work_buf_additional_days: 0.5,
            cpu_scheduling_period_minutes: 60.0,
            max_ncpus_pct: 0.0,
            ram_max_used_busy_pct: 50.0,
            ram_max_used_idle_pct: 90.0,
            vm_max_used_pct: 75.0,
            leave_apps_in_memory: false,
            disk_max_used_gb: 0.0,
            disk_max_used_pct: 90.0,
            disk_min_free_gb: 0.1,
        }
    }
}

/// BOINC's floor on the minimum buffer (`WF_EST_FETCH_TIME`): fetch this long before idling.
pub const WF_EST_FETCH_TIME: f64 = 180.0;

impl Prefs {
    /// `work_buf_min` in seconds: `max(days × 86400, 180)`.
    pub fn work_buf_min(&self) -> f64 {
        (self.work_buf_min_days.max(0.0) * 86400.0).max(WF_EST_FETCH_TIME)
    }

    /// `work_buf_total` in seconds: `max(1, min + additional)`.
    pub fn work_buf_total(&self) -> f64 {
        (self.work_buf_min() + self.work_buf_additional_days.max(0.0) * 86400.0).max(1.0)
    }

    /// The time slice in seconds (< 0.0001 minutes means 60 minutes, as in BOINC).
    pub fn sched_period(&self) -> f64 {
        let m = if self.cpu_scheduling_period_minutes < 0.0001 {
            60.0
        } else {
            self.cpu_scheduling_period_minutes
        };
        m * 60.0
    }

    /// Usable CPUs: `ncpus × max_ncpus_pct / 100` truncated, at least 1 (0 % = all).
    pub fn usable_cpus(&self, ncpus: u32) -> u32 {
        let pct = self.max_ncpus_pct;
        if pct <= 0.0 || pct >= 100.0 {
            return ncpus.max(1);
        }
        ((f64::from(ncpus) * pct / 100.0) as u32).max(1)
    }

    /// Fraction of RAM apps may use now (0 % means 100 %, as in BOINC).
    pub fn ram_frac(&self, user_active: bool) -> f64 {
        let pct = if user_active {
            self.ram_max_used_busy_pct
        } else {
            self.ram_max_used_idle_pct
        };
        if pct <= 0.0 {
            1.0
        } else {
            (pct / 100.0).min(1.0)
        }
    }

    /// Bytes of swap the running apps may use on a host with `swap_bytes` of swap
    /// (`vm_max_used_pct` of it, as BOINC reads the preference); `None` when the host has no
    /// swap: nothing is checked then.
    pub fn swap_limit(&self, swap_bytes: f64) -> Option<f64> {
        (swap_bytes > 0.0).then(|| swap_bytes * (self.vm_max_used_pct / 100.0).clamp(0.0, 1.0))
    }
}

/// The exponentially averaged availability fractions of `time_stats` (§1.5 of the reference).
#[derive(Clone, Debug, PartialEq)]
pub struct TimeStats {
    /// Fraction of wall time the client runs.
    pub on_frac: f64,
    /// Fraction of time the host is connected (−1 = unknown, treated as always).
    pub connected_frac: f64,
    /// Fraction of client-running time computing is allowed.
    pub active_frac: f64,
    /// Fraction of client-running time GPU computing is allowed.
    pub gpu_active_frac: f64,
}

impl Default for TimeStats {
    fn default() -> Self {
        TimeStats {
            on_frac: 1.0,
            connected_frac: 1.0,
            active_frac: 1.0,
            gpu_active_frac: 1.0,
        }
    }
}

/// What the client observed since the last time-statistics update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed {
    /// Computing was allowed (no suspend reason other than CPU throttling).
    pub computing: bool,
    /// GPU computing was allowed too.
    pub gpu: bool,
    /// Network connection state, if the platform knows it (`None`: unknown, as on Linux).
    pub connected: Option<bool>,
}

/// Averaging time constant of the time statistics (`ALPHA` = 10 days).
pub const TIME_STATS_ALPHA: f64 = 10.0 * 86400.0;

impl TimeStats {
    /// Fold `dt` seconds of observation into the fractions (BOINC's `TIME_STATS::update`).
    /// `first_after_start`: the client was off for `dt` (ignored beyond 14 days). A gap over
    /// 100 s while running means the host slept: it counts as off.
    pub fn update(&mut self, dt: f64, first_after_start: bool, seen: Observed) {
        if dt <= 0.0 {
            return;
        }
        let w1 = 1.0 - (-dt / TIME_STATS_ALPHA).exp();
        let w2 = 1.0 - w1;
        if first_after_start {
            if dt <= 14.0 * 86400.0 {
                self.on_frac *= w2;
            }
            return;
        }
        if dt > 100.0 {
            self.on_frac *= w2;
            return;
        }
        let b = |x: bool| if x { 1.0 } else { 0.0 };
        self.on_frac = w1 + w2 * self.on_frac;
        self.active_frac = w2 * self.active_frac + w1 * b(seen.computing);
        self.gpu_active_frac = w2 * self.gpu_active_frac + w1 * b(seen.computing && seen.gpu);
        self.connected_frac = match seen.connected {
            None => -1.0,
            Some(c) => {
                let prev = if self.connected_frac < 0.0 {
                    1.0
                } else {
                    self.connected_frac
                };
                w2 * prev + w1 * b(c)
            }
        };
    }

    /// `overall_cpu_frac` = on × active, clamped to [0.01, 1].
    pub fn overall_cpu_frac(&self) -> f64 {
        (self.on_frac * self.active_frac).clamp(0.01, 1.0)
    }

    /// `overall_gpu_frac` = on × gpu_active, clamped to [0.01, 1].
    pub fn overall_gpu_frac(&self) -> f64 {
        (self.on_frac * self.gpu_active_frac).clamp(0.01, 1.0)
    }

    /// Fraction of wall time a job on resource `r` actually progresses.
    pub fn availability(&self, r: ResourceId) -> f64 {
        if r.is_cpu() {
            self.overall_cpu_frac()
        } else {
            self.overall_gpu_frac()
        }
    }
}

/// A small set of resources as a bit mask (bit `r` = resource `ResourceId(r)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceSet(pub u16);

impl ResourceSet {
    /// Whether `r` is in the set.
    pub fn contains(self, r: ResourceId) -> bool {
        self.0 & (1 << r.0) != 0
    }
    /// Add `r`.
    pub fn insert(&mut self, r: ResourceId) {
        self.0 |= 1 << r.0;
    }
}

/// An attached project.
#[derive(Clone, Debug, PartialEq)]
pub struct Project {
    /// Display name (master URL or project name); never used in hot paths.
    pub name: String,
    /// Resource share (≥ 0; 0 = backup project that only gets work when a device idles).
    pub resource_share: f64,
    /// Suspended by the user: its jobs do not run and it is not asked for work.
    pub suspended: bool,
    /// "No new tasks": runs its jobs but is not asked for work.
    pub no_new_work: bool,
    /// `project_max_concurrent` from `app_config.xml` (max running jobs of this project).
    pub max_concurrent: Option<u32>,
    /// Project-level `report_results_immediately` (`app_config.xml`).
    pub report_immediately: bool,
    /// Resources the project must not be asked for: server `<no_rsc_apps>`, project prefs,
    /// `cc_config` or account manager exclusions, merged by the daemon.
    pub no_work_for: ResourceSet,
    /// GPU instances excluded for this project (`cc_config <exclude_gpu>`), one bit mask of
    /// device numbers per resource index (index 0, the CPU, is ignored).
    pub excluded_instances: Vec<u64>,
    /// Asked for work only on the resources its known app versions use (the emulator's
    /// projects). The daemon turns this off and lets the server's `no_rsc_apps` (in
    /// `no_work_for`) say which resources the project has no apps for, as the official client
    /// does: a project may bring GPU apps later.
    pub fetch_only_known_resources: bool,
    /// Attached but never contacted: the next RPC is the initial one (`RPC_REASON_INIT`).
    pub initial_rpc_pending: bool,
    /// Duration correction factor (1 when the server says `dont_use_dcf`).
    pub dcf: f64,
    /// The project started an upload at this time (`None` = not uploading); fetch is deferred
    /// for 300 s after it so the request can ride on the report.
    pub last_upload_started: Option<Time>,
}

impl Project {
    /// A plain project with the given name and share.
    pub fn new(name: impl Into<String>, resource_share: f64) -> Self {
        Project {
            name: name.into(),
            resource_share,
            suspended: false,
            no_new_work: false,
            max_concurrent: None,
            report_immediately: false,
            no_work_for: ResourceSet::default(),
            excluded_instances: Vec::new(),
            fetch_only_known_resources: true,
            initial_rpc_pending: false,
            dcf: 1.0,
            last_upload_started: None,
        }
    }

    /// Bit mask of the instances of `r` excluded for this project.
    pub fn excluded_mask(&self, r: ResourceId) -> u64 {
        self.excluded_instances.get(r.index()).copied().unwrap_or(0)
    }
}

/// An application of a project.
#[derive(Clone, Debug, PartialEq)]
pub struct App {
    /// Owning project.
    pub project: ProjectId,
    /// Name (display only).
    pub name: String,
    /// `app_config.xml` `max_concurrent`: max running jobs of this app.
    pub max_concurrent: Option<u32>,
    /// `app_config.xml` `report_results_immediately`.
    pub report_immediately: bool,
    /// `app_config.xml` `fraction_done_exact`: trust fraction done for estimates.
    pub fraction_done_exact: bool,
    /// GPU instances this app's jobs must not use (`cc_config <exclude_gpu>` naming the app),
    /// one bit mask per resource index like [`Project::excluded_instances`]. Unlike the
    /// project's, these do not change work fetch: other apps of the project may use them.
    pub excluded_instances: Vec<u64>,
}

impl App {
    /// An app with no `app_config` overrides.
    pub fn new(project: ProjectId, name: impl Into<String>) -> Self {
        App {
            project,
            name: name.into(),
            max_concurrent: None,
            report_immediately: false,
            fraction_done_exact: false,
            excluded_instances: Vec::new(),
        }
    }

    /// Bit mask of the instances of `r` excluded for this app's jobs.
    pub fn excluded_mask(&self, r: ResourceId) -> u64 {
        self.excluded_instances.get(r.index()).copied().unwrap_or(0)
    }
}

/// An app version: how jobs of an app use the host.
#[derive(Clone, Debug, PartialEq)]
pub struct AppVersion {
    /// The app it belongs to.
    pub app: AppId,
    /// The project (redundant with the app's; kept for fast access).
    pub project: ProjectId,
    /// CPUs used (fractional for GPU feeders, > 1 for multi-thread apps).
    pub avg_ncpus: f64,
    /// The main resource: CPU, or the coprocessor type it uses.
    pub resource: ResourceId,
    /// Instances of `resource` used when it is a coprocessor (fraction < 1 shares a device).
    pub coproc_usage: f64,
    /// Estimated speed of a job of this version on this host, FLOPS (server `<flops>`); 0 means
    /// "derive it" as BOINC does ([`AppVersion::effective_flops`]).
    pub flops: f64,
}

impl AppVersion {
    /// A CPU version using `avg_ncpus` CPUs.
    pub fn cpu(app: AppId, project: ProjectId, avg_ncpus: f64, flops: f64) -> Self {
        AppVersion {
            app,
            project,
            avg_ncpus,
            resource: ResourceId::CPU,
            coproc_usage: 0.0,
            flops,
        }
    }

    /// A coprocessor version.
    pub fn coproc(
        app: AppId,
        project: ProjectId,
        resource: ResourceId,
        coproc_usage: f64,
        avg_ncpus: f64,
        flops: f64,
    ) -> Self {
        AppVersion {
            app,
            project,
            avg_ncpus,
            resource,
            coproc_usage,
            flops,
        }
    }

    /// `flops`, or BOINC's guess `avg_ncpus × p_fpops + coproc_usage × 10 × p_fpops`.
    pub fn effective_flops(&self, p_fpops: f64) -> f64 {
        if self.flops > 0.0 {
            self.flops
        } else {
            let g = if self.resource.is_cpu() {
                0.0
            } else {
                self.coproc_usage * 10.0
            };
            ((self.avg_ncpus + g) * p_fpops).max(1.0)
        }
    }

    /// Instances of the main resource one job uses (CPUs for CPU versions).
    pub fn usage(&self) -> f64 {
        if self.resource.is_cpu() {
            self.avg_ncpus
        } else {
            self.coproc_usage
        }
    }
}

/// Where a job is in its life, as far as scheduling cares.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JobState {
    /// Not started yet (no process, no checkpoint).
    Unstarted,
    /// Scheduled and executing now.
    Running,
    /// Started earlier, not executing now; `in_memory` when suspended rather than quit.
    Preempted {
        /// The process was suspended in memory (true) or quit (false).
        in_memory: bool,
    },
    /// Computation done (uploaded or uploading); waits to be reported.
    Finished {
        /// When the job completed (for the 1-hour reporting rule).
        completed_time: Time,
        /// Output files are uploaded: the job can be reported.
        ready_to_report: bool,
    },
}

impl JobState {
    /// Whether the job still needs computing.
    pub fn is_unfinished(self) -> bool {
        !matches!(self, JobState::Finished { .. })
    }
}

/// A job (BOINC "result" with its workunit and active task).
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// Stable id chosen by the caller.
    pub id: JobId,
    /// Owning project.
    pub project: ProjectId,
    /// The version it runs with (gives resource usage and speed).
    pub app_version: AppVersionId,
    /// `rsc_fpops_est`: estimated FLOPs.
    pub fpops_est: f64,
    /// Report deadline (Unix seconds).
    pub report_deadline: Time,
    /// When it arrived; orders a project's jobs (FIFO).
    pub received_time: Time,
    /// Life-cycle state.
    pub state: JobState,
    /// Elapsed (wall) run time so far, seconds.
    pub elapsed: f64,
    /// Last fraction done reported by the app (0..=1).
    pub fraction_done: f64,
    /// Elapsed time when `fraction_done` was reported.
    pub elapsed_at_fraction: f64,
    /// Elapsed time at the last checkpoint (0 = never checkpointed): work since is lost if the
    /// job is quit.
    pub checkpoint_elapsed: f64,
    /// Wall time of the last checkpoint (`None` = never); the time slice ends at the first
    /// checkpoint after it expired.
    pub last_checkpoint_time: Option<Time>,
    /// Wall time the current (or last) run started; start of the time slice.
    pub run_started_at: Option<Time>,
    /// Working set, bytes: measured (smoothed RSS) once the job has run, `rsc_memory_bound`
    /// before. For a job that has not started, the run list prefers the largest working set
    /// measured for its app version (see [`crate::runlist`]).
    pub working_set_bytes: f64,
    /// Swap its process uses, bytes (measured; 0 when unknown or never run).
    pub swap_bytes: f64,
    /// Input files present and nothing else prevents it from running (download done, not in a
    /// temporary-exit backoff, not aborted).
    pub runnable: bool,
    /// Suspended by the user.
    pub suspended: bool,
    /// Server asked to report this job immediately.
    pub report_immediately: bool,
    /// Coprocessor instances (bit mask of device numbers) the job last ran on; a running GPU
    /// job keeps them when possible.
    pub assigned_instances: u64,
    /// Its app has finished computing and only waits to exit (the BOINC API's `boinc_finish`
    /// sleeps two seconds before the process ends) without using CPU: the run list keeps it
    /// (its slot, RAM and coprocessors stay taken) but counts its CPUs as free, so the next
    /// job starts at once. Meaningful only while [`JobState::Running`].
    pub finishing: bool,
}

impl Job {
    /// A fresh unstarted, runnable job.
    pub fn new(
        id: JobId,
        project: ProjectId,
        app_version: AppVersionId,
        fpops_est: f64,
        received_time: Time,
        report_deadline: Time,
    ) -> Self {
        Job {
            id,
            project,
            app_version,
            fpops_est,
            report_deadline,
            received_time,
            state: JobState::Unstarted,
            elapsed: 0.0,
            fraction_done: 0.0,
            elapsed_at_fraction: 0.0,
            checkpoint_elapsed: 0.0,
            last_checkpoint_time: None,
            run_started_at: None,
            working_set_bytes: 0.0,
            swap_bytes: 0.0,
            runnable: true,
            suspended: false,
            report_immediately: false,
            assigned_instances: 0,
            finishing: false,
        }
    }

    /// Whether the job has ever run (has elapsed time or a process).
    pub fn started(&self) -> bool {
        self.elapsed > 0.0 || !matches!(self.state, JobState::Unstarted)
    }

    /// Whether the job is executing now.
    pub fn is_running(&self) -> bool {
        matches!(self.state, JobState::Running)
    }

    /// Whether the job runs but only waits for its process to exit (see [`Job::finishing`]):
    /// its CPUs are not counted against the CPU budget.
    pub fn is_finishing(&self) -> bool {
        self.finishing && self.is_running()
    }
}

/// Everything the core needs to decide, at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct World {
    /// The host.
    pub host: Host,
    /// Global preferences.
    pub prefs: Prefs,
    /// Availability fractions.
    pub time_stats: TimeStats,
    /// The user is active now (selects the RAM budget).
    pub user_active: bool,
    /// BOINC uses more disk than allowed ([`crate::disk::DiskPlan::over_by`] > 0): no work is
    /// fetched until space is recovered.
    pub disk_full: bool,
    /// Attached projects; `ProjectId(i)` is `projects[i]`.
    pub projects: Vec<Project>,
    /// Apps; `AppId(i)` is `apps[i]`.
    pub apps: Vec<App>,
    /// App versions; `AppVersionId(i)` is `app_versions[i]`.
    pub app_versions: Vec<AppVersion>,
    /// Jobs in any order.
    pub jobs: Vec<Job>,
    /// The volunteer's per-resource control for every project (excluded GPUs, "finish then
    /// stop").
    pub gpu_control: crate::gpu_control::GpuControl,
}

impl World {
    /// An empty world on `host` with default prefs and always-on time stats.
    pub fn new(host: Host) -> Self {
        World {
            host,
            prefs: Prefs::default(),
            time_stats: TimeStats::default(),
            user_active: false,
            disk_full: false,
            projects: Vec::new(),
            apps: Vec::new(),
            app_versions: Vec::new(),
            jobs: Vec::new(),
            gpu_control: crate::gpu_control::GpuControl::default(),
        }
    }

    /// Add a project; returns its id.
    pub fn add_project(&mut self, p: Project) -> ProjectId {
        self.projects.push(p);
        ProjectId((self.projects.len() - 1) as u32)
    }

    /// Add an app; returns its id.
    pub fn add_app(&mut self, a: App) -> AppId {
        self.apps.push(a);
        AppId((self.apps.len() - 1) as u32)
    }

    /// Add an app version; returns its id.
    pub fn add_app_version(&mut self, v: AppVersion) -> AppVersionId {
        self.app_versions.push(v);
        AppVersionId((self.app_versions.len() - 1) as u32)
    }

    /// Add a job.
    pub fn add_job(&mut self, j: Job) {
        self.jobs.push(j);
    }

    /// Number of resource types.
    pub fn n_resources(&self) -> usize {
        self.host.n_resources()
    }

    /// Instances of resource `r` usable now (usable CPUs for the CPU).
    pub fn instances(&self, r: ResourceId) -> f64 {
        if r.is_cpu() {
            f64::from(self.prefs.usable_cpus(self.host.ncpus))
        } else {
            self.host
                .coprocs
                .get(r.index() - 1)
                .map_or(0.0, |c| f64::from(c.count))
        }
    }

    /// The app version of a job.
    pub fn version_of(&self, job: &Job) -> &AppVersion {
        &self.app_versions[job.app_version.index()]
    }

    /// Check that every id refers to an existing entry and the values are usable.
    pub fn validate(&self) -> Result<(), crate::SchedError> {
        use crate::SchedError as E;
        let nr = self.n_resources();
        for (i, a) in self.apps.iter().enumerate() {
            if a.project.index() >= self.projects.len() {
                return Err(E::UnknownProject {
                    what: "app",
                    index: i,
                    project: a.project,
                });
            }
        }
        for (i, v) in self.app_versions.iter().enumerate() {
            if v.app.index() >= self.apps.len() {
                return Err(E::UnknownApp {
                    version: AppVersionId(i as u32),
                    app: v.app,
                });
            }
            if v.project.index() >= self.projects.len() {
                return Err(E::UnknownProject {
                    what: "app version",
                    index: i,
                    project: v.project,
                });
            }
            if v.resource.index() >= nr {
                return Err(E::UnknownResource {
                    version: AppVersionId(i as u32),
                    resource: v.resource,
                });
            }
        }
        for j in &self.jobs {
            if j.project.index() >= self.projects.len() {
                return Err(E::UnknownProject {
                    what: "job",
                    index: j.id.0 as usize,
                    project: j.project,
                });
            }
            if j.app_version.index() >= self.app_versions.len() {
                return Err(E::UnknownVersion {
                    job: j.id,
                    version: j.app_version,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_stats_decay_with_a_ten_day_constant() {
        let mut ts = TimeStats::default();
        let off = Observed {
            computing: false,
            gpu: false,
            connected: None,
        };
        // Ten days of 60 s steps with computing suspended: active → e^-1.
        for _ in 0..(10 * 1440) {
            ts.update(60.0, false, off);
        }
        assert!(
            (ts.active_frac - (-1.0f64).exp()).abs() < 1e-6,
            "{}",
            ts.active_frac
        );
        assert!((ts.gpu_active_frac - ts.active_frac).abs() < 1e-12);
        assert!((ts.on_frac - 1.0).abs() < 1e-12);
        assert_eq!(ts.connected_frac, -1.0);
        assert!((ts.overall_cpu_frac() - ts.active_frac).abs() < 1e-12);
        // A 5-day sleep halves nothing but scales on_frac by e^-0.5.
        ts.update(5.0 * 86400.0, false, off);
        assert!((ts.on_frac - (-0.5f64).exp()).abs() < 1e-9);
        // A restart after more than 14 days off leaves it alone.
        let before = ts.on_frac;
        ts.update(20.0 * 86400.0, true, off);
        assert_eq!(ts.on_frac, before);
    }

    #[test]
    fn usable_cpus_and_buffers_follow_boinc_rules() {
        let mut p = Prefs::default();
        assert_eq!(p.usable_cpus(8), 8);
        p.max_ncpus_pct = 60.0;
        assert_eq!(p.usable_cpus(8), 4);
        p.max_ncpus_pct = 1.0;
        assert_eq!(p.usable_cpus(8), 1);
        p.work_buf_min_days = 0.0;
        p.work_buf_additional_days = 0.0;
        assert_eq!(p.work_buf_min(), WF_EST_FETCH_TIME);
        assert_eq!(p.work_buf_total(), WF_EST_FETCH_TIME);
        p.cpu_scheduling_period_minutes = 0.0;
        assert_eq!(p.sched_period(), 3600.0);
    }
}
