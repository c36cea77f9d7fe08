//! Host watching: what the host is (hardware, GPUs re-probed while no driver answered, CPU
//! benchmarks) and what it is doing (user input, battery, other programs' CPU load, exclusive
//! apps), turned into the decision whether computing may go on.

use std::collections::BTreeMap;
use std::path::Path;

use ferrite_hostinfo::HostDetector;
use ferrite_sched::suspend::SuspendReason;

use crate::activity::ActivityMonitor;
use crate::thermal::ThermalWatch;

/// How often to look for a GPU driver that was not there at start-up, seconds.
/// What the host is and does, as last seen: the owner of host watching. Its events are the
/// GPU re-probe timer, the benchmarks' end ([`Event::BenchmarksDone`]) and the start of each
/// pass, where [`Daemon::decide_suspension`](crate::Daemon::decide_suspension) looks at the host.
#[derive(Debug)]
pub(crate) struct HostWatch {
    /// When to look for GPUs again (no driver answered yet).
    pub(crate) gpu_retry_at: Option<f64>,
    /// The last GPU probe's note ("No NVIDIA GPU: …"), logged only when it changes.
    pub(crate) gpu_note: Option<String>,
    /// The used devices of each GPU type, from the last GPU probe.
    pub(crate) gpu_instances: BTreeMap<String, Vec<ferrite_hostinfo::GpuInstance>>,
    /// The CPU benchmarks are running on a blocking thread.
    pub(crate) benchmarks_running: bool,
    /// User input, battery, exclusive apps and other programs' CPU load.
    pub(crate) activity: ActivityMonitor,
    /// The CPU and GPU temperature limits.
    pub(crate) thermal: ThermalWatch,
    /// Wall time the daemon started (for `start_delay`).
    pub(crate) started_at: f64,
    /// Next refresh of the disk figures kept in the state (projects' `disk_usage`, the
    /// host's free space).
    pub(crate) next_usage_refresh: f64,
    /// Other programs' CPU load against `suspend_cpu_usage`, with hysteresis.
    pub(crate) cpu_load: ferrite_sched::suspend::CpuLoadWatch,
    /// Next look at whether the CPU benchmarks are due.
    pub(crate) next_bench_check: f64,
    /// Why computing (all of it, then GPU computing only) is suspended, as last decided.
    pub(crate) suspended: (Option<SuspendReason>, Option<SuspendReason>),
}

impl HostWatch {
    /// Nothing seen yet; the daemon started at `started_at`.
    pub(crate) fn new(started_at: f64) -> Self {
        HostWatch {
            gpu_retry_at: None,
            gpu_note: None,
            gpu_instances: BTreeMap::new(),
            benchmarks_running: false,
            activity: ActivityMonitor::from_env(),
            thermal: ThermalWatch::from_env(),
            started_at,
            next_usage_refresh: 0.0,
            cpu_load: ferrite_sched::suspend::CpuLoadWatch::default(),
            next_bench_check: 0.0,
            suspended: (None, None),
        }
    }
}

pub(crate) const GPU_REPROBE_SECS: f64 = 120.0;

/// GPU detection in a child process (this binary, run with
/// `ferrite_hostinfo::gpu_child::GPU_SCAN_ARG`), so that no driver is ever loaded into the
/// daemon; a child that crashes or hangs gives no GPU, and the probe's note
/// (`GPU detection failed: …`) is logged.
pub(crate) fn probe_gpus(det: &HostDetector) -> ferrite_hostinfo::GpuProbe {
    let exe = Path::new("/proc/self/exe");
    det.probe_gpus_in_child(exe, ferrite_hostinfo::gpu_child::timeout_from_env())
}

/// How often to check whether the CPU benchmarks are due again (every 30 days), seconds.
pub(crate) const BENCHMARK_CHECK_SECS: f64 = 3600.0;
