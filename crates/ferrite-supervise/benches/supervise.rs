//! Supervisor overhead: runs 32 short tasks of the C++ BOINC API test app, 4 at a time, through
//! the whole slot → start → poll → exit → release cycle, and prints the supervisor's own CPU
//! time per task (getrusage of this process, children excluded) and its peak RSS (VmHWM).
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ferrite_supervise::{ExitOutcome, Task, TaskEvent};

const TASKS: usize = 32;
const PARALLEL: usize = 4;
/// How often the driver polls (the daemon would poll once a second; this is 10× busier).
const POLL_EVERY: Duration = Duration::from_millis(100);

fn self_cpu() -> f64 {
    // SAFETY: rusage is plain data, fully written by getrusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pointer to a local.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let dd = common::DataDir::new();
    dd.install_test_app(); // builds the app before measuring
    let mut queue: VecDeque<usize> = (0..TASKS).collect();
    let mut running: Vec<(Task, ferrite_supervise::Slot)> = Vec::new();
    let mut finished = 0usize;
    let mut polls = 0u64;
    let cpu0 = self_cpu();
    let wall0 = Instant::now();
    while finished < TASKS {
        while running.len() < PARALLEL {
            let Some(i) = queue.pop_front() else { break };
            let (slot, cfg) = common::api_task(&dd, &format!("bench{i}"), 3, &["--step-ms", "100"]);
            let task = Task::start(cfg, Instant::now()).unwrap();
            running.push((task, slot));
        }
        let now = Instant::now();
        let mut k = 0;
        while k < running.len() {
            polls += 1;
            let exited = running[k].0.poll(now).into_iter().find_map(|e| match e {
                TaskEvent::Exited(x) => Some(x),
                _ => None,
            });
            if let Some(x) = exited {
                assert!(
                    matches!(x.outcome, ExitOutcome::Finished(_)),
                    "{:?}",
                    x.outcome
                );
                let (_task, slot) = running.swap_remove(k);
                dd.slots.release(slot).unwrap();
                finished += 1;
            } else {
                k += 1;
            }
        }
        std::thread::sleep(POLL_EVERY);
    }
    let wall = wall0.elapsed().as_secs_f64();
    let cpu = self_cpu() - cpu0;
    println!(
        "ferrite-supervise bench: {TASKS} tasks of the BOINC API test app, {PARALLEL} at a time"
    );
    println!(
        "  wall time            {wall:.2} s ({:.2} s per task slot)",
        wall * PARALLEL as f64 / TASKS as f64
    );
    println!(
        "  polls                {polls} (every {} ms per running task)",
        POLL_EVERY.as_millis()
    );
    println!(
        "  supervisor CPU       {:.2} ms total, {:.3} ms per task",
        cpu * 1e3,
        cpu * 1e3 / TASKS as f64
    );
    println!("  supervisor CPU/poll  {:.1} µs", cpu * 1e6 / polls as f64);
    println!("  peak RSS (VmHWM)     {} KiB", status_kib("VmHWM:"));
    println!("  current RSS (VmRSS)  {} KiB", status_kib("VmRSS:"));
}
