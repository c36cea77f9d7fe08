//! CPU benchmarks: Whetstone (`p_fpops`), Dhrystone 2.1 (`p_iops`) and a streaming copy
//! (`p_membw`), run on every CPU at once at idle priority for a bounded time, plus the rule
//! for when they are due. When to run them is the daemon's decision; it calls
//! [`run_benchmarks`] from a blocking thread.
//!
//! The two CPU figures mean what they mean from the official client, which projects use for
//! run-time estimates and credit: `p_fpops` is Whetstone instructions per second
//! ([`whetstone`]), `p_iops` is Dhrystone "VAX MIPS" × 10⁶ ([`dhrystone`]), each per CPU:
//! every CPU runs its own copy at the same time, each copy's rate is taken over its own
//! thread CPU time in whole passes or batches, and the figure is the mean over the CPUs.
//! The official client spends 10 s on each; Ferrite spends a share of the time it is given.

mod dhrystone;
mod whetstone;

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Re-run period of the benchmarks (the official client's 30 days).
pub const BENCHMARK_PERIOD_SECS: f64 = 30.0 * 86400.0;

/// The figures used when benchmarks are skipped (`skip_cpu_benchmarks`) or fail.
pub const DEFAULT_FPOPS: f64 = 1e9;
/// See [`DEFAULT_FPOPS`].
pub const DEFAULT_IOPS: f64 = 1e9;
/// See [`DEFAULT_FPOPS`].
pub const DEFAULT_MEMBW: f64 = 1e9;

/// Benchmark figures, per CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BenchmarkResult {
    /// Whetstone instructions per second of one CPU.
    pub p_fpops: f64,
    /// Dhrystone VAX MIPS of one CPU, × 10⁶.
    pub p_iops: f64,
    /// Memory bandwidth of one CPU, bytes per second.
    pub p_membw: f64,
    /// Whetstone passes each CPU completed (10⁸ instructions each), mean over the CPUs.
    pub fp_passes: f64,
    /// Dhrystone loops each CPU completed, mean over the CPUs.
    pub int_loops: f64,
    /// Mean share of wall time the benchmark threads actually ran (1 = had the CPUs to
    /// themselves). Low values mean other work was running and the figures rest on little
    /// CPU time; the daemon may log that or re-run later.
    pub cpu_share: f64,
    /// How many threads ran in parallel.
    pub threads: u32,
    /// Wall time taken.
    pub elapsed: Duration,
}

impl BenchmarkResult {
    /// The figures to report when benchmarks are skipped.
    pub fn defaults() -> Self {
        BenchmarkResult {
            p_fpops: DEFAULT_FPOPS,
            p_iops: DEFAULT_IOPS,
            p_membw: DEFAULT_MEMBW,
            fp_passes: 0.0,
            int_loops: 0.0,
            cpu_share: 0.0,
            threads: 0,
            elapsed: Duration::ZERO,
        }
    }
}

/// Whether benchmarks should run now, given when they last ran (`p_calculated`, Unix time,
/// 0 = never). A clock that went backwards also triggers a run.
pub fn benchmarks_due(last: f64, now: f64) -> bool {
    if last <= 0.0 {
        return true;
    }
    let age = now - last;
    !(0.0..=BENCHMARK_PERIOD_SECS).contains(&age)
}

/// Lowers the calling thread to the idle scheduling class (nice 19 if that fails), so that a
/// benchmark never takes CPU time from anything else.
fn lower_priority() {
    // SAFETY: plain system calls on the calling thread (pid 0 / the thread id) with a valid
    // parameter block.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, 19);
        }
    }
}

/// Whetstone passes until the deadline (checked after each pass); returns the instructions
/// credited for them.
fn float_kernel(deadline: Instant) -> (u64, Duration) {
    let start = Instant::now();
    let one = black_box(1);
    let mut passes = 0u64;
    loop {
        whetstone::pass(one);
        passes += 1;
        if Instant::now() >= deadline {
            break;
        }
    }
    (passes * whetstone::INSTRUCTIONS_PER_PASS, start.elapsed())
}

/// Dhrystone batches until the deadline (checked after each batch); returns the loops run.
fn int_kernel(deadline: Instant) -> (u64, Duration) {
    let start = Instant::now();
    let loops = dhrystone::run(|| Instant::now() >= deadline);
    (loops, start.elapsed())
}

/// Streaming copy over a buffer larger than the caches. Returns bytes moved (read + write).
fn membw_kernel(deadline: Instant) -> (u64, Duration) {
    const LEN: usize = 4 << 20; // 4 Mi u64 = 32 MiB each way
    let src: Vec<u64> = (0..LEN as u64).collect();
    let mut dst = vec![0u64; LEN];
    let start = Instant::now();
    let mut bytes = 0u64;
    loop {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
        bytes += 2 * (LEN * std::mem::size_of::<u64>()) as u64;
        if Instant::now() >= deadline {
            break;
        }
    }
    (bytes, start.elapsed())
}

/// CPU time consumed by the calling thread.
fn thread_cpu_time() -> Duration {
    // SAFETY: `ts` is writable plain data; the clock id is valid on Linux.
    unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        if libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) != 0 {
            return Duration::ZERO;
        }
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }
}

/// Per-thread outcome of one phase.
struct PhaseRate {
    /// Units per second of CPU time actually received.
    rate: f64,
    /// Units done per thread.
    units: f64,
    /// CPU time received ÷ wall time: below 1 when other work took the CPU.
    cpu_share: f64,
}

/// Runs `kernel` on `threads` threads at idle priority until the phase ends. Rates are per
/// second of the thread's own CPU time, so that a busy machine (where an idle-priority
/// thread gets little CPU) does not make the CPU look slow.
fn run_parallel(
    threads: u32,
    phase: Duration,
    kernel: fn(Instant) -> (u64, Duration),
) -> PhaseRate {
    let per_thread: Vec<(f64, f64, f64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    lower_priority();
                    let cpu0 = thread_cpu_time();
                    let (units, wall) = kernel(Instant::now() + phase);
                    let cpu = thread_cpu_time().saturating_sub(cpu0);
                    let secs = if cpu.is_zero() { wall } else { cpu };
                    (
                        units as f64 / secs.as_secs_f64().max(1e-9),
                        cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9),
                        units as f64,
                    )
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    if per_thread.is_empty() {
        return PhaseRate {
            rate: 0.0,
            units: 0.0,
            cpu_share: 0.0,
        };
    }
    let n = per_thread.len() as f64;
    PhaseRate {
        rate: per_thread.iter().map(|p| p.0).sum::<f64>() / n,
        units: per_thread.iter().map(|p| p.2).sum::<f64>() / n,
        cpu_share: per_thread.iter().map(|p| p.1).sum::<f64>() / n,
    }
}

/// Runs the three benchmarks on `ncpus` threads in parallel, at idle priority, within about
/// `duration` in total (clamped to 10 s): 45 % floating point, 45 % integer, 10 % memory.
/// Blocking: call it from a blocking thread.
pub fn run_benchmarks(ncpus: u32, duration: Duration) -> BenchmarkResult {
    let start = Instant::now();
    let threads = ncpus.max(1);
    let total = duration
        .min(Duration::from_secs(10))
        .max(Duration::from_millis(30));
    let fp = run_parallel(threads, total.mul_f64(0.45), float_kernel);
    let int = run_parallel(threads, total.mul_f64(0.45), int_kernel);
    let mem = run_parallel(threads, total.mul_f64(0.08), membw_kernel);
    let pick = |v: f64, d: f64| if v.is_finite() && v > 0.0 { v } else { d };
    BenchmarkResult {
        p_fpops: pick(fp.rate, DEFAULT_FPOPS),
        p_iops: pick(
            int.rate / dhrystone::VAX_DHRYSTONES_PER_SEC * 1e6,
            DEFAULT_IOPS,
        ),
        p_membw: pick(mem.rate, DEFAULT_MEMBW),
        fp_passes: fp.units / whetstone::INSTRUCTIONS_PER_PASS as f64,
        int_loops: int.units,
        cpu_share: (fp.cpu_share + int.cpu_share + mem.cpu_share) / 3.0,
        threads,
        elapsed: start.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_when_never_run_stale_or_clock_went_back() {
        let now = 1_700_000_000.0;
        assert!(benchmarks_due(0.0, now));
        assert!(!benchmarks_due(now - 86400.0, now));
        assert!(!benchmarks_due(now - BENCHMARK_PERIOD_SECS, now));
        assert!(benchmarks_due(now - BENCHMARK_PERIOD_SECS - 1.0, now));
        assert!(benchmarks_due(now + 3600.0, now));
    }

    #[test]
    fn short_run_gives_positive_figures_on_every_thread() {
        let r = run_benchmarks(2, Duration::from_millis(60));
        assert_eq!(r.threads, 2);
        for v in [r.p_fpops, r.p_iops, r.p_membw] {
            assert!(v.is_finite() && v > 1e6, "{r:?}");
        }
        // Whole Whetstone passes and whole Dhrystone batches on each thread, at least one.
        let passes = r.fp_passes * 2.0;
        assert!(r.fp_passes >= 1.0 && passes == passes.round(), "{r:?}");
        let batches = r.int_loops * 2.0 / dhrystone::LOOPS_PER_BATCH as f64;
        assert!(
            r.int_loops >= 16_000.0 && batches == batches.round(),
            "{r:?}"
        );
    }

    #[test]
    fn figures_are_rates_of_the_work_counted() {
        // p_fpops is 10^8 instructions per pass per CPU second, and p_iops 10^6/1757 per
        // Dhrystone loop per CPU second: both imply a CPU time no longer than the run.
        let r = run_benchmarks(1, Duration::from_millis(100));
        let fp_secs = r.fp_passes * whetstone::INSTRUCTIONS_PER_PASS as f64 / r.p_fpops;
        let int_secs = r.int_loops / dhrystone::VAX_DHRYSTONES_PER_SEC * 1e6 / r.p_iops;
        assert!(fp_secs > 0.0 && fp_secs <= r.elapsed.as_secs_f64(), "{r:?}");
        assert!(
            int_secs > 0.0 && int_secs <= r.elapsed.as_secs_f64(),
            "{r:?}"
        );
    }
}
