//! Scenarios of host kinds written for Ferrite (a multi-thread app beside single-threaded
//! ones, an app limited by `max_concurrent`) against the official emulator's figures for the
//! same inputs (BOINC master c5c6cb79b9 built from source with `client/makefile_sim`; its
//! summaries are each fixture's `emulator_output_<variant>.txt`).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use ferrite_sim::{run, Report, Scenario, SimOptions};

const DAY: f64 = 86_400.0;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The official figures of one variant: wasted, idle, share violation, monotony, RPCs per
/// job, missed (summed over the projects).
fn official(name: &str, variant: &str) -> [f64; 6] {
    let text =
        std::fs::read_to_string(fixture(name).join(format!("emulator_output_{variant}.txt")))
            .unwrap();
    let figure = |label: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(label)).unwrap();
        line[label.len()..].trim().parse().unwrap()
    };
    let missed: f64 = text
        .lines()
        .filter_map(|l| l.split("missed ").nth(1))
        .map(|n| n.trim().parse::<f64>().unwrap())
        .sum();
    [
        figure("wasted fraction"),
        figure("Idle fraction"),
        figure("Share violation"),
        figure("Monotony"),
        figure("RPCs per job"),
        missed,
    ]
}

fn ours(r: &Report) -> [f64; 6] {
    [
        r.wasted_fraction,
        r.idle_fraction,
        r.share_violation,
        r.monotony,
        r.rpcs_per_job,
        r.deadlines_missed as f64,
    ]
}

const NAMES: [&str; 6] = [
    "wasted",
    "idle",
    "share violation",
    "monotony",
    "RPCs per job",
    "missed",
];

fn run_variant(name: &str, variant: &str) -> Report {
    let opts = SimOptions {
        duration: 10.0 * DAY,
        rr_only: variant == "rr_only",
        server_uses_workload: variant == "server_uses_workload",
        ..SimOptions::default()
    };
    run(&Scenario::load(&fixture(name)).unwrap(), &opts).unwrap()
}

/// Every figure no worse than the official one, except those in `exempt` (by index).
fn no_worse(name: &str, variant: &str, r: &Report, exempt: &[usize]) {
    let theirs = official(name, variant);
    let mine = ours(r);
    eprintln!("{name} {variant}: ours {mine:.4?} official {theirs:.4?}");
    for k in (0..6).filter(|k| !exempt.contains(k)) {
        // The official summary prints six decimals.
        assert!(
            mine[k] <= theirs[k] + 5e-7,
            "{name} {variant} {}: {} > {}",
            NAMES[k],
            mine[k],
            theirs[k]
        );
    }
}

/// A 4-thread app (share 40) beside two single-threaded projects on 8 CPUs. Without deadline
/// promotion the 4-thread project gets its 40 % to the percent: its job goes before the
/// single-thread jobs' open time slices when it is the most deserving, and only onto free
/// CPUs (it used to start on an overcommitted host and get 38 % of it at best). Every figure
/// is no worse than the official emulator's, except with `--server_uses_workload`, where the
/// official emulated server refuses nearly every job of M and S2 (its EDF check of the
/// host's queue fails) and the official client runs S1 96 % of the time (share violation
/// 1.325): no deadline is missed because almost nothing but S1's jobs is run, and few RPCs
/// bring many of S1's jobs. Ferrite's figures there are those of its default variant
/// (share violation 0.04, 7 of S2's 3-hour jobs late over 10 days).
#[test]
fn mt_beside_st_no_worse_than_official() {
    for (variant, exempt) in [
        ("default", &[][..]),
        ("rr_only", &[][..]),
        ("server_uses_workload", &[4, 5][..]),
    ] {
        let r = run_variant("mt_beside_st", variant);
        no_worse("mt_beside_st", variant, &r, exempt);
        assert_eq!(r.idle_fraction, 0.0, "{variant}");
    }
    let r = run_variant("mt_beside_st", "rr_only");
    let m = r.projects.iter().find(|p| p.name == "M").unwrap();
    assert!((m.used_share - 0.4).abs() < 0.01, "M {}", m.used_share);
}

/// X (share 300 of 400) may run one job at a time (`max_concurrent` 1) on a 4-CPU host; Y
/// takes the other 3 CPUs. The best split (X 25 %, Y 75 %) has a share violation of 1.0: the
/// official emulator's 0.999974 comes from moments where it overlapped two of X's jobs. Every
/// other figure is no worse than the official one (it makes more than twice the RPCs per job).
#[test]
fn app_max_concurrent_no_worse_than_official() {
    for variant in ["default", "rr_only", "server_uses_workload"] {
        let r = run_variant("app_max_concurrent", variant);
        no_worse("app_max_concurrent", variant, &r, &[2]);
        let x = r.projects.iter().find(|p| p.name == "X").unwrap();
        assert!(x.used_share <= 0.25 + 1e-9, "{variant}: X {}", x.used_share);
        assert!(r.share_violation <= 1.0 + 1e-9, "{variant}");
        assert_eq!(r.idle_fraction, 0.0, "{variant}");
    }
}
