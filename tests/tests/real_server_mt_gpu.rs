//! Multi-threaded and GPU app versions on BOINC's own project server (the kit that
//! `BOINC_SERVER_KIT` names), with the scheduler's built-in plan classes: `mt` (as many
//! threads as the host's usable CPUs, up to 64) and `cuda_fermi` (an NVIDIA GPU of compute
//! capability 2.0 or more, CUDA 3.0, driver 195, 384 MB). The app is the C++ BOINC API test
//! app, the only version the project offers; the jobs reach VALID in the server's database
//! for that version, the app saw the CPUs or the GPU the scheduler gave its job (it writes
//! what `init_data.xml` told it into its stderr, which the server keeps), and it ran
//! confined where the kernel has Landlock.

use std::fs;
use std::path::Path;
use std::time::Duration;

use ferrite_e2e::boinc_server::{BoincServer, ServerOptions};
use ferrite_e2e::{free_port, Proc};

/// Jobs each test runs.
const JOBS: u32 = 2;

/// Text from MariaDB's `hex()`.
fn unhex(s: &str) -> String {
    let bytes: Vec<u8> = (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The most tasks the client's log `log` shows computing at once: from "starting task T"
/// until T "is finishing" (its app called `boinc_finish` and uses no CPU: the client hands
/// its CPUs on while it exits) or "finished".
fn most_at_once(log: &str) -> usize {
    let mut computing = std::collections::HashSet::new();
    let mut most = 0;
    for line in log.lines() {
        if let Some((_, rest)) = line.split_once("starting task ") {
            computing.insert(rest.split(' ').next().unwrap_or_default().to_owned());
            most = most.max(computing.len());
        } else if let Some((_, rest)) = line.split_once("] task ") {
            let (name, after) = rest.split_once(' ').unwrap_or_default();
            if after.starts_with("is finishing") || after.starts_with("finished") {
                computing.remove(name);
            }
        }
    }
    most
}

/// What a run left: the client's log and the `stderr_out` of every valid result.
struct Run {
    log: String,
    stderr: Vec<String>,
}

/// Brings a server up whose only version of `upper_case` is the BOINC API test app with plan
/// class `plan_class`, makes [`JOBS`] jobs, runs `ferrited` (its `cc_config.xml` options
/// `cc_options`, its environment `env`) attached to it until they are valid, and checks
/// that every valid result was computed by that version. `None` when the test is skipped.
fn run_to_valid(
    test: &str,
    plan_class: &str,
    cc_options: &str,
    env: &[(&str, &Path)],
) -> Option<Run> {
    if !ferrite_e2e::peer_or_skip(test, &["boinccmd"]) || !ferrite_e2e::boinc_api_or_skip(test) {
        return None;
    }
    let opts = ServerOptions {
        jobs: 0,
        ..ServerOptions::default()
    };
    let server = BoincServer::up(test, &opts)?;
    let tmp = tempfile::tempdir().expect("tempdir");
    let app = ferrite_e2e::boinc_test_app(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let file_name = format!("ferrite_test_app_{plan_class}_1.10");
    let version = server.add_plan_class_version("1.10", plan_class, &app, &file_name, "7.20.5");
    server.only_app_version(&version);
    for i in 0..JOBS {
        server.add_job_with_command_line(&format!("{plan_class}_{i}"), "--show-init --step-ms 200");
    }

    let dir = tmp.path().join("client");
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(dir.join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    fs::write(
        dir.join("cc_config.xml"),
        format!("<cc_config>\n<options>\n{cc_options}</options>\n</cc_config>\n"),
    )
    .expect("cc_config");
    let port = free_port();
    let mut cmd = Proc::ferrited_command(&dir, port, None);
    cmd.args(["--attach_project", server.url(), server.account_key()]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut client = Proc::spawn(cmd);
    client.wait_for("entering main loop", Duration::from_secs(60));
    server.wait_valid_with_client(
        JOBS,
        (Duration::from_secs(300), Duration::from_secs(10)),
        &client,
        port,
    );
    let rows = server.query(
        "select app_version_id, hex(stderr_out) from result \
         where server_state = 5 and outcome = 1 and validate_state = 1",
    );
    assert_eq!(rows.len(), JOBS as usize, "{rows:?}");
    assert!(
        rows.iter().all(|r| r[0] == version),
        "every job ran the {plan_class} version ({version}): {rows:?}\n{}",
        server.scheduler_log()
    );
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
    Some(Run {
        log: client.output(),
        stderr: rows.iter().map(|r| unhex(&r[1])).collect(),
    })
}

#[test]
fn a_multi_threaded_app_version_runs_on_all_cpus_confined_to_valid() {
    // Four CPUs whatever the machine has: the scheduler's `mt` gives such a host four threads.
    let Some(run) = run_to_valid(
        "a_multi_threaded_app_version_runs_on_all_cpus_confined_to_valid",
        "mt",
        "<ncpus>4</ncpus>\n",
        &[],
    ) else {
        return;
    };
    for stderr in &run.stderr {
        // The app got four CPUs in init_data.xml and the scheduler's `--nthreads 4`.
        assert!(
            stderr.contains("init data: ncpus 4, gpu_type '', gpu_device_num -1"),
            "{stderr}"
        );
        assert!(stderr.contains("--nthreads 4"), "{stderr}");
    }
    // Each job holds all four CPUs: they computed one after the other.
    assert_eq!(most_at_once(&run.log), 1, "{}", run.log);
    ferrite_e2e::assert_apps_ran_confined(&run.log);
}

#[test]
fn a_cuda_app_version_runs_on_the_gpu_confined_to_valid() {
    // The fake NVML library's GPUs (an RTX 3080, compute capability 8.6, and a GTX 1660;
    // driver 535.54, CUDA 12.2): only the more capable one is used.
    let lib = tempfile::tempdir().expect("tempdir");
    let nvml = ferrite_e2e::fake_nvml(lib.path());
    let Some(run) = run_to_valid(
        "a_cuda_app_version_runs_on_the_gpu_confined_to_valid",
        "cuda_fermi",
        "",
        &[("FERRITE_NVML_LIBRARY", nvml.as_path())],
    ) else {
        return;
    };
    for stderr in &run.stderr {
        assert!(
            stderr.contains("gpu_type 'NVIDIA', gpu_device_num 0"),
            "{stderr}"
        );
    }
    // One GPU is used (the other is a different model, left out as BOINC does without
    // <use_all_gpus>): the jobs computed one after the other on it.
    assert_eq!(most_at_once(&run.log), 1, "{}", run.log);
    ferrite_e2e::assert_apps_ran_confined(&run.log);
    // Confined with the rights of a GPU app (the NVIDIA device nodes, /dev/dri, /dev/kfd).
    // (Where the kernel has no Landlock apps run unconfined, as the log says.)
    if matches!(
        ferrite_supervise::confine::support(),
        ferrite_supervise::confine::Support::Available(_)
    ) {
        assert_eq!(
            run.log
                .matches("the system read-only, the GPU devices; no TCP")
                .count(),
            JOBS as usize,
            "{}",
            run.log
        );
    }
}
