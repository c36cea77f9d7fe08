//! The emulator on the official emulator's scenarios: loading, determinism, sane figures, the
//! command-line contract, and the default policy's figures against the official emulator's
//! (from each scenario's README, BOINC master c5c6cb79b9, time step 60 s).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use ferrite_sim::{run, Report, Scenario, ScenarioError, SimOptions};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn load(name: &str) -> Scenario {
    Scenario::load(&fixture(name)).unwrap()
}

fn run_for(name: &str, duration: f64, seed: u64) -> Report {
    let opts = SimOptions {
        duration,
        seed,
        ..SimOptions::default()
    };
    run(&load(name), &opts).unwrap()
}

const DAY: f64 = 86_400.0;

/// The official emulator's default-policy figures: wasted, idle, share violation, missed.
struct Official {
    wasted: f64,
    idle: f64,
    share_violation: f64,
    missed: u64,
}

#[test]
fn every_scenario_loads() {
    let a = load("a_long_vs_short");
    assert_eq!(a.usable_cpus(), 4);
    assert_eq!(a.projects.len(), 2);
    assert_eq!(a.apps[0].latency_bound, 7_200_000.0);
    assert_eq!(a.prefs.cpu_scheduling_period, 3600.0);

    let b = load("b_three_projects");
    assert_eq!(b.usable_cpus(), 2);
    let shares: Vec<f64> = b.projects.iter().map(|p| p.resource_share).collect();
    assert_eq!(shares, vec![50.0, 25.0, 25.0]);

    let s = load("sample_legacy");
    assert_eq!(s.host.on.frac, 0.8);
    assert_eq!(s.host.on.lambda, 1000.0);
    assert_eq!(s.projects[1].available.frac, 0.7);
    assert_eq!(s.apps[1].fpops.std_dev, 10e9);
    // The summary's "work buf min 180 max 43380": the 180 s floor and the default extra 0.5 d.
    assert_eq!(s.prefs.work_buf_min, 180.0);
    assert_eq!(s.prefs.work_buf_total(), 43_380.0);
    assert_eq!(s.prefs.cpu_scheduling_period, 60.0);
}

#[test]
fn bad_input_names_file_and_element() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("client_state.xml"),
        "<client_state>\n<host_info>\n<p_ncpus>0</p_ncpus>\n</host_info>\n</client_state>\n",
    )
    .unwrap();
    let err = Scenario::load(dir.path()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ScenarioError::Invalid { .. }), "{msg}");
    assert!(msg.contains("client_state.xml: <p_ncpus>"), "{msg}");

    let missing = tempfile::tempdir().unwrap();
    let err = Scenario::load(missing.path()).unwrap_err();
    assert!(matches!(err, ScenarioError::Read { .. }), "{err}");
}

#[test]
fn unknown_tags_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("b_three_projects/client_state.xml")).unwrap();
    let text = text.replace(
        "<host_info>",
        "<host_info>\n    <some_future_tag><x>1</x></some_future_tag>",
    );
    std::fs::write(dir.path().join("client_state.xml"), text).unwrap();
    std::fs::write(
        dir.path().join("global_prefs.xml"),
        "<global_preferences><unheard_of>3</unheard_of>\
         <cpu_scheduling_period_minutes>30</cpu_scheduling_period_minutes></global_preferences>",
    )
    .unwrap();
    let s = Scenario::load(dir.path()).unwrap();
    assert_eq!(s.projects.len(), 3);
    assert_eq!(s.prefs.cpu_scheduling_period, 1800.0);
}

#[test]
fn override_and_cc_config_apply() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["client_state.xml", "global_prefs.xml"] {
        std::fs::copy(fixture("a_long_vs_short").join(f), dir.path().join(f)).unwrap();
    }
    std::fs::write(
        dir.path().join("global_prefs_override.xml"),
        "<global_preferences><max_ncpus_pct>50</max_ncpus_pct></global_preferences>",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("cc_config.xml"),
        "<cc_config><options><rec_half_life_days>2</rec_half_life_days></options></cc_config>",
    )
    .unwrap();
    let s = Scenario::load(dir.path()).unwrap();
    assert_eq!(s.usable_cpus(), 2);
    assert_eq!(s.cc_config.rec_half_life, 2.0 * DAY);
    let r = run(&s, &SimOptions::default()).unwrap();
    assert_eq!(r.peak_flops_cpu, 2e9);
}

#[test]
fn same_seed_gives_identical_json_and_seed_matters() {
    let json = |seed| serde_json::to_string(&run_for("sample_legacy", DAY, seed)).unwrap();
    let one = json(1);
    assert_eq!(one, json(1));
    // Host and project availability are random in this scenario: another seed is another run.
    assert_ne!(one, json(2));
}

fn assert_sane(r: &Report) {
    for (name, v) in [
        ("wasted", r.wasted_fraction),
        ("idle", r.idle_fraction),
        ("share violation", r.share_violation),
        ("monotony", r.monotony),
    ] {
        assert!((0.0..=1.0).contains(&v), "{name} = {v}");
    }
    assert!(r.share_violation <= 2.0);
    assert!(r.rpcs_per_job >= 0.0 && r.rpcs_per_job.is_finite());
    let shares: f64 = r.projects.iter().map(|p| p.used_share).sum();
    assert!((shares - 1.0).abs() < 1e-9, "{shares}");
    let reported = r.deadlines_met + r.deadlines_missed;
    assert!(
        reported <= r.jobs_received,
        "{reported} > {}",
        r.jobs_received
    );
    assert!(r.flops_used <= r.flops_total * (1.0 + 1e-9));
    assert!(r.wasted_fraction <= 1.0 - r.idle_fraction + 1e-9);
    assert_eq!(
        r.deadlines_missed,
        r.projects.iter().map(|p| p.deadlines_missed).sum::<u64>()
    );
}

#[test]
fn figures_are_sane_on_every_scenario_and_variant() {
    for (name, duration) in [
        ("a_long_vs_short", 10.0 * DAY),
        ("b_three_projects", 2.0 * DAY),
        ("sample_legacy", DAY),
        ("gpu_shared", 2.0 * DAY),
        ("gpu_deadlines", 2.0 * DAY),
    ] {
        for rr_only in [false, true] {
            let opts = SimOptions {
                duration,
                rr_only,
                ..SimOptions::default()
            };
            let r = run(&load(name), &opts).unwrap();
            assert_sane(&r);
            assert!(r.jobs_received > 0, "{name} rr_only {rr_only}");
        }
    }
}

#[test]
fn existing_jobs_only_makes_no_jobs() {
    let opts = SimOptions {
        existing_jobs_only: true,
        ..SimOptions::default()
    };
    let r = run(&load("b_three_projects"), &opts).unwrap();
    assert_eq!(r.jobs_received, 0);
    assert_eq!(r.idle_fraction, 1.0);
    assert_eq!(r.rpcs_per_job, 0.0);
}

#[test]
fn state_file_jobs_run_with_relative_deadlines() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("b_three_projects/client_state.xml")).unwrap();
    // As in a real state file, the job follows its project's objects and names no project.
    let jobs = "<workunit><name>w1</name><app_name>p2_app</app_name><rsc_fpops_est>1.2e12</rsc_fpops_est></workunit>\n\
                <result><name>r1</name><wu_name>w1</wu_name>\
                <received_time>1000000</received_time><report_deadline>1003600</report_deadline></result>\n\
                <project>";
    let at = text.match_indices("<project>").nth(2).unwrap().0;
    let text = format!("{}{}{}", &text[..at], jobs, &text[at + "<project>".len()..]);
    std::fs::write(dir.path().join("client_state.xml"), text).unwrap();
    let s = Scenario::load(dir.path()).unwrap();
    assert_eq!(s.jobs.len(), 1);
    assert_eq!(s.jobs[0].latency, 3600.0);
    let opts = SimOptions {
        duration: 7200.0,
        existing_jobs_only: true,
        ..SimOptions::default()
    };
    let r = run(&s, &opts).unwrap();
    // 1.2e12 FLOPs at 1 GFLOPS: 20 minutes, reported well within the hour.
    assert_eq!(r.projects[1].deadlines_met, 1);
    assert_eq!(r.deadlines_missed, 0);
    let used = r.projects[1].flops_used;
    assert!((used - 1.2e12).abs() < 1e-3 * 1.2e12, "{used}");
}

#[test]
fn bad_options_are_errors() {
    let s = load("b_three_projects");
    for (duration, delta) in [
        (0.0, 60.0),
        (86400.0, 0.0),
        (f64::NAN, 60.0),
        (86400.0, -1.0),
    ] {
        let opts = SimOptions {
            duration,
            delta,
            ..SimOptions::default()
        };
        assert!(run(&s, &opts).is_err(), "{duration} {delta}");
    }
}

/// Which of the official figures a policy is held to on a scenario.
#[derive(Clone, Copy)]
struct Checks {
    wasted: bool,
    idle: bool,
    share_violation: bool,
    missed: bool,
}

const ALL: Checks = Checks {
    wasted: true,
    idle: true,
    share_violation: true,
    missed: true,
};

fn check_against_official(name: &str, duration: f64, official: &Official, checks: Checks) {
    let r = run_for(name, duration, 1);
    assert_sane(&r);
    eprintln!(
        "{name}: wasted {:.6} (official {:.6}) idle {:.6} ({:.6}) share violation {:.6} ({:.6}) missed {} ({})",
        r.wasted_fraction,
        official.wasted,
        r.idle_fraction,
        official.idle,
        r.share_violation,
        official.share_violation,
        r.deadlines_missed,
        official.missed
    );
    // Figures are compared at the official output's precision (six decimals).
    let le = |ours: f64, theirs: f64| ours <= theirs + 5e-7;
    if checks.wasted {
        assert!(
            le(r.wasted_fraction, official.wasted),
            "{name}: wasted {}",
            r.wasted_fraction
        );
    }
    if checks.idle {
        assert!(
            le(r.idle_fraction, official.idle),
            "{name}: idle {}",
            r.idle_fraction
        );
    }
    if checks.share_violation {
        assert!(
            le(r.share_violation, official.share_violation),
            "{name}: share violation {}",
            r.share_violation
        );
    }
    if checks.missed {
        assert!(
            r.deadlines_missed <= official.missed,
            "{name}: missed {}",
            r.deadlines_missed
        );
    }
}

const A_OFFICIAL: Official = Official {
    wasted: 0.005833,
    idle: 0.0,
    share_violation: 0.1625,
    missed: 56,
};

const B_OFFICIAL: Official = Official {
    wasted: 0.002292,
    idle: 0.0,
    share_violation: 0.311528,
    missed: 11,
};

const SAMPLE_OFFICIAL: Official = Official {
    wasted: 0.305903,
    idle: 0.216319,
    share_violation: 0.066755,
    missed: 576,
};

/// Idle is not held on sample_legacy. The host is off 20 % of the time (mean off period 250 s)
/// and each project's scheduler is down 30 % of the time; the client can neither fetch nor
/// report while off (running jobs finish, none starts). With 100 s and 50 s jobs due 1000 s
/// and 500 s after arrival, a queue long enough to ride out those gaps cannot meet its
/// deadlines: the official run keeps its CPUs busier (idle 0.216) by queueing 12 h of work and
/// misses 576 deadlines. Ferrite keeps each project's queue within what its deadlines allow,
/// aborts jobs that can no longer make it, and while an instance idles tries a project whose
/// RPCs failed again after about two minutes: over seeds 1-20 it averages idle 0.217, share
/// violation 0.014 and 377 misses (official: 0.230, 0.073, 598; see
/// `sample_legacy_seed_means_no_worse_than_official`); seed 1's host is off 21.8 % of the day
/// (idle 0.215).
const SAMPLE_CHECKS: Checks = Checks { idle: false, ..ALL };

#[test]
fn a_long_vs_short_no_worse_than_official() {
    check_against_official("a_long_vs_short", 100.0 * DAY, &A_OFFICIAL, ALL);
}

/// The official client gives the long-job project 58 % (P1 finishes 4 jobs, P2 misses 56);
/// Ferrite's core runs each project's jobs earliest-deadline-first, sizes fetch by the
/// deadlines and sends the real start delay to the server, so the split is even and nothing
/// is late.
#[test]
fn a_long_vs_short_splits_evenly_with_no_miss() {
    let r = run_for("a_long_vs_short", 100.0 * DAY, 1);
    assert_eq!(r.wasted_fraction, 0.0);
    assert_eq!(r.deadlines_missed, 0);
    assert_eq!(r.projects[0].deadlines_met, 4);
    assert!(
        (r.projects[0].used_share - 0.5).abs() < 0.01,
        "{}",
        r.projects[0].used_share
    );
}

/// A project's scheduler pays per RPC: finished jobs due to be reported wait for the next one
/// finishing soon, and each report asks for the work the fetch trigger would, so the long-job
/// project's rare fetches and the short-job project's reports share RPCs.
#[test]
fn a_long_vs_short_rpcs_per_job_no_worse_than_official() {
    let r = run_for("a_long_vs_short", 100.0 * DAY, 1);
    assert!(r.rpcs_per_job <= 0.223560, "{}", r.rpcs_per_job);
}

/// The short-deadline project's requests wait for its next report when only it is short of
/// work, so one RPC both reports and fetches.
#[test]
fn b_three_projects_rpcs_per_job_no_worse_than_official() {
    let r = run_for("b_three_projects", 10.0 * DAY, 1);
    assert!(r.rpcs_per_job <= 0.294221, "{}", r.rpcs_per_job);
}

/// Without deadline promotion the 1-hour-deadline project's queue sits at what its deadlines
/// allow; its request waits for its next report while fewer than three jobs fit, so a report
/// RPC brings the jobs that fit then, not a one-job RPC between every two reports (official:
/// 0.284221 RPCs per job, 129 missed).
#[test]
fn b_three_projects_rr_only_rpcs_per_job_no_worse_than_official() {
    let opts = SimOptions {
        duration: 10.0 * DAY,
        rr_only: true,
        ..SimOptions::default()
    };
    let r = run(&load("b_three_projects"), &opts).unwrap();
    assert_sane(&r);
    assert!(r.rpcs_per_job <= 0.284221, "{}", r.rpcs_per_job);
    assert!(r.deadlines_missed <= 129, "{}", r.deadlines_missed);
    assert!(r.share_violation <= 0.3, "{}", r.share_violation);
}

#[test]
fn b_three_projects_no_worse_than_official() {
    check_against_official("b_three_projects", 10.0 * DAY, &B_OFFICIAL, ALL);
}

/// With `--server_uses_workload` the emulated server books the host's whole queue earliest
/// deadline first before sending a job (official b: wasted 0.005417, share violation
/// 0.278750, 26 missed, monotony 0.701220, 0.292398 RPCs per job).
#[test]
fn b_three_projects_server_uses_workload_no_worse_than_official() {
    let opts = SimOptions {
        duration: 10.0 * DAY,
        server_uses_workload: true,
        ..SimOptions::default()
    };
    let r = run(&load("b_three_projects"), &opts).unwrap();
    assert_sane(&r);
    assert!(r.server_uses_workload);
    assert!(r.wasted_fraction <= 0.005417, "{}", r.wasted_fraction);
    assert!(r.share_violation <= 0.278750, "{}", r.share_violation);
    assert!(r.deadlines_missed <= 26, "{}", r.deadlines_missed);
    assert!(r.monotony <= 0.701220, "{}", r.monotony);
    assert!(r.rpcs_per_job <= 0.292398, "{}", r.rpcs_per_job);
    // The check changes what the servers send: not the run without it.
    let plain = run_for("b_three_projects", 10.0 * DAY, 1);
    assert_ne!(plain.jobs_received, r.jobs_received);
}

#[test]
fn sample_legacy_no_worse_than_official_except_idle() {
    check_against_official("sample_legacy", DAY, &SAMPLE_OFFICIAL, SAMPLE_CHECKS);
}

/// Only the state file's three jobs, on one CPU: S's two 1-hour jobs, due 3 h and 6 h after
/// arriving behind L's 10-hour job, run first and everything meets its deadline (the official
/// emulator meets all three too).
#[test]
fn edf_urgent_job_behind_a_long_one_runs_first() {
    let opts = SimOptions {
        existing_jobs_only: true,
        ..SimOptions::default()
    };
    for rr_only in [false, true] {
        let r = run(
            &load("edf_short_behind_long"),
            &SimOptions { rr_only, ..opts },
        )
        .unwrap();
        assert_eq!(r.deadlines_missed, 0, "rr_only {rr_only}");
        assert_eq!(r.projects[0].deadlines_met, 1, "rr_only {rr_only}");
        assert_eq!(r.projects[1].deadlines_met, 2, "rr_only {rr_only}");
    }
}

/// A GPU-only project and a CPU+GPU project at equal shares (official, 10 days: G 49.90 %,
/// idle 0.000198, nothing missed): the GPU-only project gets half of everything, most of the
/// GPU, and no GPU job is late.
#[test]
fn gpu_shared_between_a_gpu_only_and_a_mixed_project() {
    let opts = SimOptions {
        duration: 10.0 * DAY,
        ..SimOptions::default()
    };
    let r = run(&load("gpu_shared"), &opts).unwrap();
    assert_sane(&r);
    assert_eq!(r.deadlines_missed, 0);
    assert_eq!(r.wasted_fraction, 0.0);
    assert!(r.idle_fraction <= 0.000198, "{}", r.idle_fraction);
    let g = r.projects[0].used_share;
    assert!((g - 0.5).abs() < 0.01, "{g}");
}

/// Most of gpu_shared's RPCs are reports of jobs due in days: one finished over an hour ago
/// waits for the project's next job finishing within four hours of it, so one RPC reports
/// both (official: 0.257062 RPCs per job, 0.255650 with `--server_uses_workload`).
#[test]
fn gpu_shared_share_and_rpcs_per_job_no_worse_than_official() {
    for (rr_only, server_uses_workload, official) in [
        (false, false, 0.257062),
        (true, false, 0.257062),
        (false, true, 0.255650),
    ] {
        let opts = SimOptions {
            duration: 10.0 * DAY,
            rr_only,
            server_uses_workload,
            ..SimOptions::default()
        };
        let r = run(&load("gpu_shared"), &opts).unwrap();
        assert_eq!(r.deadlines_missed, 0);
        // Official 0.002073; the goal compares at the third decimal. CPU jobs sharing the
        // CPUs with the GPU job's CPU part are credited with what they get, so the mixed
        // project is not charged for CPU time it did not have (it was 0.003919 before).
        assert!(r.share_violation < 0.0025, "{}", r.share_violation);
        assert!(
            r.rpcs_per_job <= official,
            "rr_only {rr_only} server_uses_workload {server_uses_workload}: {}",
            r.rpcs_per_job
        );
    }
}

/// Three projects' GPU jobs due within a day on one GPU, against the official figures of each
/// variant (missed, share violation, monotony, RPCs per job). The mixed project asked first
/// takes only its share of the GPU's buffer while its deadlines are unknown, and the
/// simulation plans it for the part of the GPU its CPU work leaves it, so its batches fit
/// what it will really get.
#[test]
fn gpu_deadlines_no_worse_than_official() {
    for (rr_only, server_uses_workload, missed, share, monotony, rpcs) in [
        (false, false, 0, 0.048710, 0.498765, 0.434240),
        (true, false, 2, 0.013759, 0.358312, 0.426339),
        (false, true, 0, 0.013642, 0.570599, 0.513333),
    ] {
        let opts = SimOptions {
            duration: 10.0 * DAY,
            rr_only,
            server_uses_workload,
            ..SimOptions::default()
        };
        let r = run(&load("gpu_deadlines"), &opts).unwrap();
        assert_sane(&r);
        let variant = format!("rr_only {rr_only} server_uses_workload {server_uses_workload}");
        assert!(
            r.deadlines_missed <= missed,
            "{variant}: {}",
            r.deadlines_missed
        );
        assert_eq!(r.wasted_fraction, 0.0, "{variant}");
        assert!(
            r.share_violation <= share,
            "{variant}: {}",
            r.share_violation
        );
        assert!(r.monotony <= monotony, "{variant}: {}", r.monotony);
        assert!(r.rpcs_per_job <= rpcs, "{variant}: {}", r.rpcs_per_job);
    }
}

/// Three projects on two GPU types (N: NVIDIA only; R: AMD and CPU; C: CPU only), against the
/// official figures of each variant: nothing wasted, idle, share violation, monotony and RPCs
/// per job no worse; nothing missed in any variant (with `--cpu_sched_rr_only` doomed jobs run
/// in their turn, as in the official client, instead of being given up). At the first fetch
/// the CPU-only C is asked for the CPUs before R (which can also supply the AMD GPU), and R
/// for its share of what they still lack: R asked first left C idle an hour (monotony 0.008),
/// and asked for the whole CPU buffer 8 of its CPU jobs were aborted as doomed with
/// `--cpu_sched_rr_only` (monotony 0.066).
#[test]
fn two_gpu_types_no_worse_than_official() {
    for (rr_only, server_uses_workload, idle, share, monotony, rpcs) in [
        (false, false, 0.000577, 0.396579, 0.000050, 0.229483),
        (true, false, 0.000577, 0.396579, 0.000050, 0.180386),
        (false, true, 0.000577, 0.396579, 0.000050, 0.229483),
    ] {
        let opts = SimOptions {
            duration: 10.0 * DAY,
            rr_only,
            server_uses_workload,
            ..SimOptions::default()
        };
        let r = run(&load("two_gpu_types"), &opts).unwrap();
        assert_sane(&r);
        let variant = format!("rr_only {rr_only} server_uses_workload {server_uses_workload}");
        assert_eq!(r.wasted_fraction, 0.0, "{variant}");
        assert!(r.idle_fraction <= idle, "{variant}: {}", r.idle_fraction);
        assert!(
            r.share_violation <= share,
            "{variant}: {}",
            r.share_violation
        );
        assert!(r.rpcs_per_job <= rpcs, "{variant}: {}", r.rpcs_per_job);
        assert!(r.monotony <= monotony, "{variant}: {}", r.monotony);
        assert_eq!(r.deadlines_missed, 0, "{variant}");
    }
}

#[test]
fn command_line_contract_json() {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite-sim"))
        .args([
            "--duration",
            "86400",
            "--delta",
            "60",
            "--seed",
            "3",
            "--json",
        ])
        .arg(fixture("b_three_projects"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "wasted_fraction",
        "idle_fraction",
        "share_violation",
        "monotony",
        "rpcs_per_job",
        "deadlines_missed",
    ] {
        assert!(v[key].is_number(), "{key}");
    }
    let projects = v["projects"].as_array().unwrap();
    assert_eq!(projects.len(), 3);
    assert_eq!(projects[0]["name"], "P1");
    for p in projects {
        assert!(p["used_share"].is_number());
        assert!(p["deadlines_met"].is_number());
        assert!(p["deadlines_missed"].is_number());
    }
    assert_eq!(v["seed"], 3);
    assert_eq!(v["policy"], "core");
    assert!(v["jobs_aborted"].is_number());
}

#[test]
fn command_line_flags_and_human_output() {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite-sim"))
        .args([
            "--cpu_sched_rr_only",
            "--existing_jobs_only",
            "--server_uses_workload",
            "--duration",
            "3600",
        ])
        .arg(fixture("b_three_projects"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("round-robin only: yes"), "{text}");
    assert!(text.contains("existing jobs only: yes"), "{text}");
    assert!(text.contains("server uses workload: yes"), "{text}");
    assert!(text.contains("wasted fraction "), "{text}");
    assert!(text.contains("P3: share 25.00"), "{text}");

    let kebab = Command::new(env!("CARGO_BIN_EXE_ferrite-sim"))
        .args(["--cpu-sched-rr-only", "--duration", "3600", "--json"])
        .arg(fixture("b_three_projects"))
        .output()
        .unwrap();
    assert!(kebab.status.success());
    let v: serde_json::Value = serde_json::from_slice(&kebab.stdout).unwrap();
    assert_eq!(v["policy"], "core");
    assert_eq!(v["cpu_sched_rr_only"], true);

    // Only one client policy exists: there is no --policy switch.
    let policy = Command::new(env!("CARGO_BIN_EXE_ferrite-sim"))
        .args(["--policy", "reference", "--duration", "3600"])
        .arg(fixture("b_three_projects"))
        .output()
        .unwrap();
    assert!(!policy.status.success());

    let bad = Command::new(env!("CARGO_BIN_EXE_ferrite-sim"))
        .arg(fixture("no_such_scenario"))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("client_state.xml"));
}

/// Every state file kept as a fixture anywhere in the repository (scenarios, the daemon's and
/// the protocol crate's captured data directories of a real client): what `ferrited` loads,
/// `ferrite-sim` loads, and a day of emulation on it gives sane figures.
#[test]
fn every_state_file_fixture_in_the_repository_loads_and_runs() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(name.as_str(), "target" | ".git" | "fuzz") {
                    walk(&path, out);
                }
            } else if name.contains("client_state") && name.ends_with(".xml") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    // The scenarios (3), the protocol crate's captured states (10), the end-to-end data
    // directories (11) and the daemon's (1); a walk that finds fewer is broken.
    assert!(files.len() >= 25, "{files:?}");
    let mut with_jobs = 0;
    let mut real = 0;
    for f in &files {
        let s = Scenario::from_state_file(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let text = std::fs::read_to_string(f).unwrap();
        if text.contains("<platform_name>") {
            real += 1;
        }
        with_jobs += usize::from(!s.jobs.is_empty());
        // The state's own jobs only: a real project's tiny test jobs would otherwise fill a
        // day's buffer with tens of thousands of jobs and make this test slow.
        let opts = SimOptions {
            existing_jobs_only: true,
            ..SimOptions::default()
        };
        let r = run(&s, &opts).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if !s.jobs.is_empty() {
            let reported = r.deadlines_met + r.deadlines_missed;
            assert!(reported >= 1, "{}: no job of the state ran", f.display());
        }
        for v in [
            r.wasted_fraction,
            r.idle_fraction,
            r.share_violation,
            r.monotony,
        ] {
            assert!((0.0..=1.0).contains(&v), "{}: {v}", f.display());
        }
        assert!(r.flops_used <= r.flops_total * (1.0 + 1e-9));
        if s.jobs.is_empty() {
            // Nothing to run: the host idles all day.
            assert_eq!(r.idle_fraction, 1.0, "{}", f.display());
        } else {
            let shares: f64 = r.projects.iter().map(|p| p.used_share).sum();
            assert!((shares - 1.0).abs() < 1e-9, "{}: {shares}", f.display());
        }
    }
    assert!(real >= 20, "{real} state files written by a client");
    assert!(with_jobs >= 5, "{with_jobs} state files with jobs");
}

/// The official emulator's figures for sample_legacy over seeds 1-20, per variant (the
/// variant's options, then one figure list per seed), from `official_seeds.txt`.
fn official_sample_seeds() -> Vec<(String, Vec<[f64; 6]>)> {
    official_seeds("sample_legacy", DAY)
}

/// The official emulator's figures per seed and variant from `name`'s `official_seeds.txt`
/// (runs of `duration` seconds), in the order wasted, idle, share violation, monotony, RPCs
/// per job, missed.
fn official_seeds(name: &str, duration: f64) -> Vec<(String, Vec<[f64; 6]>)> {
    let text = std::fs::read_to_string(fixture(name).join("official_seeds.txt")).unwrap();
    let prefix = format!("--duration {duration}");
    let mut out: Vec<(String, Vec<[f64; 6]>)> = Vec::new();
    for line in text.lines() {
        if let Some(head) = line.strip_prefix("## ") {
            let opts = head.trim().trim_start_matches(prefix.as_str()).trim();
            out.push((opts.to_owned(), Vec::new()));
        } else if line.starts_with("seed ") {
            let words: Vec<&str> = line.split_whitespace().collect();
            let mut figs = [0.0; 6];
            for (k, name) in [
                "wasted",
                "idle",
                "share",
                "monotony",
                "rpcs_per_job",
                "missed",
            ]
            .iter()
            .enumerate()
            {
                let at = words.iter().position(|w| w == name).unwrap();
                figs[k] = words[at + 1].parse().unwrap();
            }
            out.last_mut().unwrap().1.push(figs);
        }
    }
    out
}

/// sample_legacy is one random realisation of host and server availability per seed, and the
/// official emulator draws them from the same stream as the job sizes (each of its variants
/// sees a different realisation): seed-1 figures there are noise. Over seeds 1-20 every mean
/// figure of Ferrite's is no worse than the official emulator's, in every variant.
#[test]
fn sample_legacy_seed_means_no_worse_than_official() {
    let official = official_sample_seeds();
    assert_eq!(official.len(), 3);
    for (opts, seeds) in &official {
        assert_eq!(seeds.len(), 20, "{opts}");
        let n = seeds.len() as f64;
        let theirs: Vec<f64> = (0..6)
            .map(|k| seeds.iter().map(|s| s[k]).sum::<f64>() / n)
            .collect();
        let mut ours = [0.0; 6];
        for seed in 1..=20 {
            let sim = SimOptions {
                duration: DAY,
                seed,
                rr_only: opts == "--cpu_sched_rr_only",
                server_uses_workload: opts == "--server_uses_workload",
                ..SimOptions::default()
            };
            let r = run(&load("sample_legacy"), &sim).unwrap();
            let figs = [
                r.wasted_fraction,
                r.idle_fraction,
                r.share_violation,
                r.monotony,
                r.rpcs_per_job,
                r.deadlines_missed as f64,
            ];
            for (o, f) in ours.iter_mut().zip(figs) {
                *o += f / n;
            }
        }
        eprintln!("sample_legacy {opts}: ours {ours:.4?} official {theirs:.4?}");
        for (k, name) in [
            "wasted",
            "idle",
            "share violation",
            "monotony",
            "RPCs per job",
            "missed",
        ]
        .iter()
        .enumerate()
        {
            assert!(
                ours[k] <= theirs[k],
                "{opts} {name}: {} > {}",
                ours[k],
                theirs[k]
            );
        }
    }
}

/// flaky_part_time (a host on 40 % of the time, off for 12 hours on average): over seeds
/// 1-100, with deadline promotion, Ferrite's client idles no more than the official one and
/// keeps the projects nearer their shares (every job runs earliest deadline first on a host
/// on less than half the time, `PART_TIME_ON_FRAC`).
#[test]
fn flaky_part_time_seed_means_idle_and_share_no_worse_than_official() {
    let official = official_seeds("flaky_part_time", 10.0 * DAY);
    let (_, seeds) = official
        .iter()
        .find(|(opts, _)| opts.is_empty())
        .expect("default variant");
    assert_eq!(seeds.len(), 100);
    let n = seeds.len() as f64;
    let theirs = |k: usize| seeds.iter().map(|s| s[k]).sum::<f64>() / n;
    let (mut idle, mut share) = (0.0, 0.0);
    for seed in 1..=100 {
        let sim = SimOptions {
            duration: 10.0 * DAY,
            seed,
            ..SimOptions::default()
        };
        let r = run(&load("flaky_part_time"), &sim).unwrap();
        idle += r.idle_fraction / n;
        share += r.share_violation / n;
    }
    eprintln!(
        "flaky_part_time: idle {idle:.4} (official {:.4}), share violation {share:.3} (official {:.3})",
        theirs(1),
        theirs(2)
    );
    assert!(idle <= theirs(1), "idle {idle} > {}", theirs(1));
    assert!(
        share <= theirs(2),
        "share violation {share} > {}",
        theirs(2)
    );
}
