//! The emulated world's job records and the resource layout shared by the emulator loop, the
//! emulated servers and the client policy.

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JobState {
    /// Downloaded, not running (never started, or preempted).
    Queued,
    /// Executing.
    Running,
    /// Finished computing at this time; waiting to be reported.
    Done(f64),
    /// Given up by the client (could not meet its deadline); waiting to be reported.
    Aborted(f64),
    /// Reported to its project; kept only until the next clean-up.
    Reported,
}

/// One job (BOINC "result") held by the emulated client.
#[derive(Debug, Clone)]
pub struct Job {
    /// Name, `<project>_<n>` for generated jobs.
    pub name: String,
    /// Owning project index.
    pub project: usize,
    /// App index.
    pub app: usize,
    /// App version index.
    pub version: usize,
    /// CPUs used while running.
    pub avg_ncpus: f64,
    /// GPU type and instances used, for GPU jobs.
    pub gpu: Option<(usize, f64)>,
    /// Speed while running, FLOPS.
    pub flops: f64,
    /// True FLOPs still to do (the emulator's truth; the client sees it only once started).
    pub fpops_left: f64,
    /// The size estimate sent by the server (what the client plans with before starting).
    pub fpops_est: f64,
    /// When the client received it.
    pub received: f64,
    /// Report deadline.
    pub deadline: f64,
    /// Current state.
    pub state: JobState,
    /// Whether it ever ran (its remaining time is then known exactly, as in the official
    /// emulator).
    pub started: bool,
    /// Wall seconds it has been computing.
    pub elapsed: f64,
    /// Start of the current time slice, if running.
    pub slice_start: f64,
    /// Peak FLOPs spent on it so far (what is "wasted" if it is reported late).
    pub peak_used: f64,
    /// Arrival order, the tie-breaker everywhere.
    pub seq: u64,
}

impl Job {
    /// Whether the job still needs the CPU/GPU (queued or running).
    pub fn is_unfinished(&self) -> bool {
        matches!(self.state, JobState::Queued | JobState::Running)
    }

    /// Whether it waits to be reported.
    pub fn is_reportable(&self) -> bool {
        matches!(self.state, JobState::Done(_) | JobState::Aborted(_))
    }

    /// The client's estimate of the remaining run time at full speed, seconds.
    pub fn est_remaining(&self) -> f64 {
        if self.started {
            self.fpops_left.max(0.0) / self.flops
        } else {
            self.fpops_est / self.flops
        }
    }

    /// Resource index (0 = CPU, 1 + g = GPU type g) and instances of it used.
    pub fn resource(&self) -> (usize, f64) {
        match self.gpu {
            Some((g, n)) => (g + 1, n),
            None => (0, self.avg_ncpus),
        }
    }
}

/// The host's processing resources as the client schedules them.
#[derive(Debug, Clone, PartialEq)]
pub struct Resources {
    /// Instances per resource: `[0]` = usable CPUs, `[1 + g]` = count of GPU type g.
    pub instances: Vec<f64>,
    /// Speed of one instance relative to one CPU.
    pub relative_speed: Vec<f64>,
    /// FLOPS of one CPU.
    pub p_fpops: f64,
}

impl Resources {
    /// Peak FLOPS of the whole host.
    pub fn total_peak(&self) -> f64 {
        self.instances
            .iter()
            .zip(&self.relative_speed)
            .map(|(n, s)| n * s)
            .sum::<f64>()
            * self.p_fpops
    }

    /// Peak FLOPS of a job while it runs, with its CPU part scaled by `cpu_scale`.
    pub fn job_peak(&self, job: &Job, cpu_scale: f64) -> f64 {
        let gpu = job.gpu.map_or(0.0, |(g, n)| {
            n * self.relative_speed.get(g + 1).copied().unwrap_or(0.0)
        });
        (job.avg_ncpus * cpu_scale + gpu) * self.p_fpops
    }
}
