//! Speed of the emulator: 100 emulated days of scenario `a_long_vs_short` at a 60 s step.
//! Prints the wall time of each run (target: under 2 s) and the figures, so a regression in
//! either shows.

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
    for round in 1..=3 {
        let t = Instant::now();
        let report = match run(scenario, &opts) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("run failed: {e}");
                std::process::exit(1);
            }
        };
        let secs = t.elapsed().as_secs_f64();
        best = best.min(secs);
        println!(
            "a_long_vs_short 100 d @ 60 s, run {round}: wall {secs:.3} s \
             (wasted {:.6} idle {:.6} share violation {:.6}, {} jobs)",
            report.wasted_fraction,
            report.idle_fraction,
            report.share_violation,
            report.jobs_received
        );
    }
    println!("a_long_vs_short 100 d @ 60 s: best wall time {best:.3} s (target < 2 s)");
}
