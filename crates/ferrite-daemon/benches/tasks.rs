//! The daemon's own cost of running tasks: 32 short tasks of the real BOINC-API test app
//! (`crates/ferrite-supervise/tests/apps/test_app.cpp`, built with g++ against Debian's
//! libboinc-app-dev), four at a time (`cc_config.xml` `<ncpus>4</ncpus>`), run by the
//! `ferrited` binary on a fresh data directory with one project and network activity off.
//! Prints the daemon's CPU time per task (utime + stime of the `ferrited` process from
//! `/proc/PID/stat`, divided by 32; also without the start-up), its peak RSS (`VmHWM`) and the
//! wall time until every task had finished.
//!
//! Run: `cargo bench -p ferrite-daemon --bench tasks`.

#[path = "common/short_tasks.rs"]
mod short_tasks;

use short_tasks::{NCPUS, STEPS, STEP_MS, TASKS};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let app = short_tasks::build_test_app();
    let ferrited = env!("CARGO_BIN_EXE_ferrited");
    let o = short_tasks::run(ferrited, &app);
    println!(
        "{TASKS} tasks of the BOINC-API test app ({STEPS} x {STEP_MS} ms sleeping steps each), \
         {NCPUS} at a time, through ferrited ({ferrited})"
    );
    println!(
        "tasks finished: {} ok, {} computation errors; first task started {:.2} s after launch",
        o.finished,
        o.errors,
        o.first_start.as_secs_f64()
    );
    println!(
        "wall time until all done:      {:>8.2} s  (ideal {:.1} s of app time)",
        o.wall.as_secs_f64(),
        short_tasks::ideal().as_secs_f64()
    );
    println!("medians from the log: {}", o.phases.describe());
    println!(
        "ferrited CPU total:            {:>8.1} ms  (start-up {:.1} ms)",
        o.cpu * 1e3,
        o.startup_cpu * 1e3
    );
    println!(
        "ferrited CPU per task:         {:>8.2} ms  ({:.2} ms without start-up)",
        o.cpu * 1e3 / TASKS as f64,
        (o.cpu - o.startup_cpu) * 1e3 / TASKS as f64
    );
    println!(
        "ferrited peak RSS (VmHWM):     {:>8.1} MB  (VmRSS at the end {:.1} MB)",
        o.hwm_kb as f64 / 1024.0,
        o.rss_kb as f64 / 1024.0
    );
}
