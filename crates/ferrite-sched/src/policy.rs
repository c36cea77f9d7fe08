//! Policy switches and tunables of the core, the knobs the emulator varies
//! (`--cpu_sched_rr_only`, `--rec_half_life`) and the daemon reads from `cc_config.xml`.

/// How recent estimated credit (REC) is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecMode {
    /// One REC per project, FLOP-weighted across resources (BOINC's behaviour; at equal
    /// shares a GPU-only project gets most of the GPU while a mixed project gets the CPU).
    Global,
    /// One REC per (project, resource): shares are honoured on each resource separately.
    PerResource,
}

/// Scheduling policy knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Run deadline-endangered jobs earliest-deadline-first. `false` is the emulator's
    /// `--cpu_sched_rr_only`: pure weighted round-robin by priority.
    pub edf: bool,
    /// Half-life of REC in seconds (`cc_config <rec_half_life_days>`, default 10 days).
    pub rec_half_life: f64,
    /// REC bookkeeping mode.
    pub rec_mode: RecMode,
    /// Assumed fraction of a GPU's peak FLOPS that apps achieve (BOINC: 0.2).
    pub gpu_efficiency: f64,
    /// Accounting intervals longer than this are discarded as hibernation (BOINC: 120 s).
    /// An emulator stepping in larger increments should raise it.
    pub max_accounting_gap: f64,
    /// A job whose remaining time is below this fraction of the time slice is allowed to finish
    /// instead of being preempted at its checkpoint ("finish if nearly done").
    pub finish_if_nearly_done_frac: f64,
    /// `--fetch_minimal_work` / cc_config `fetch_minimal_work`: ask once for one job per
    /// device (1 s per resource, every instance), and never again once work was had or
    /// requested (for runs that end with `--exit_when_idle`).
    pub fetch_minimal_work: bool,
    /// Give up doomed jobs (never started, and estimated to finish after their deadline even
    /// if started now: [`crate::runlist::is_doomed`]) instead of running them. `false` with
    /// `--cpu_sched_rr_only`: as in the official client, every job runs in its turn, late or
    /// not (an estimate is only an estimate: some of them still make it).
    pub abort_doomed: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            edf: true,
            rec_half_life: 10.0 * 86400.0,
            rec_mode: RecMode::Global,
            gpu_efficiency: 0.2,
            max_accounting_gap: 120.0,
            finish_if_nearly_done_frac: 0.1,
            fetch_minimal_work: false,
            abort_doomed: true,
        }
    }
}

impl Policy {
    /// The emulator's `--cpu_sched_rr_only`: no EDF for endangered jobs, and doomed jobs run
    /// in their turn.
    pub fn rr_only() -> Self {
        Policy {
            edf: false,
            abort_doomed: false,
            ..Policy::default()
        }
    }
}
