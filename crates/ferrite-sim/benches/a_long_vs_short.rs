//! Speed of the emulator: 100 emulated days of scenario `a_long_vs_short` at a 60 s step.
//! Prints the wall time of each run (target: under 2 s) and the figures, so a regression in
//! either shows; also the process's CPU time, which stays meaningful when other programs load
//! the machine (the wall time then grows, the CPU time hardly).

use std::path::Path;
use std::time::Instant;

use ferrite_sim::{run, Scenario, SimOptions};

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/a_long_vs_short");
    let scenario = match Scenario::load(&dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot load {}: {e}", dir.display());
            std::process::exit(1);
        }
    };
    bench(&scenario);
}

fn bench(scenario: &Scenario) {
    let opts = SimOptions {
        duration: 8_640_000.0,
        delta: 60.0,
        ..SimOptions::default()
    };
    let mut best = f64::INFINITY;
    let mut best_cpu = f64::INFINITY;
    for round in 1..=3 {
        let t = Instant::now();
        let cpu0 = cpu_secs();
        let report = match run(scenario, &opts) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("run failed: {e}");
                std::process::exit(1);
            }
        };
        let secs = t.elapsed().as_secs_f64();
        let cpu = cpu_secs() - cpu0;
        best = best.min(secs);
        best_cpu = best_cpu.min(cpu);
        println!(
            "a_long_vs_short 100 d @ 60 s, run {round}: wall {secs:.3} s, CPU {cpu:.2} s \
             (wasted {:.6} idle {:.6} share violation {:.6}, {} jobs)",
            report.wasted_fraction,
            report.idle_fraction,
            report.share_violation,
            report.jobs_received
        );
    }
    println!(
        "a_long_vs_short 100 d @ 60 s: best wall time {best:.3} s, best CPU time {best_cpu:.2} s \
         (target < 2 s)"
    );
}

/// User + system CPU seconds of this process so far (`/proc/self/stat`, 100 ticks a second).
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    let field = |i: usize| -> f64 {
        after
            .split_whitespace()
            .nth(i)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the command name.
    (field(11) + field(12)) / 100.0
}
