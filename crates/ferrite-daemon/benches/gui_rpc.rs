//! GUI RPC replies built from a generated state with 20 projects and 10,000 tasks (the
//! store bench's state), as the main loop builds them. Prints, per request, the reply size
//! and the median time to build it (the main loop is busy for that long).
//!
//! Run: `cargo bench -p ferrite-daemon --bench gui_rpc`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use ferrite_daemon::cli::Options;
use ferrite_daemon::{logging, Daemon};
use ferrite_gui_rpc::Request;
use ferrite_proto::client_state::synthetic;

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = synthetic(20, 10_000);
    std::fs::write(dir.path().join("client_state.xml"), state.to_xml()).expect("state file");
    std::fs::write(dir.path().join("gui_rpc_auth.cfg"), "pw\n").expect("password file");
    let log = logging::init();
    log.set("warn");
    let opts = Options {
        dir: Some(dir.path().to_path_buf()),
        skip_cpu_benchmarks: true,
        no_gpus: true,
        ..Options::default()
    };
    let mut daemon = Daemon::start(opts, log).expect("daemon");
    println!(
        "state: {} projects, {} tasks",
        daemon.state().projects.len(),
        daemon.state().results().count()
    );
    let requests = [
        ("get_state", Request::GetState),
        ("get_results", Request::GetResults { active_only: false }),
        (
            "get_results active_only",
            Request::GetResults { active_only: true },
        ),
        ("get_project_status", Request::GetProjectStatus),
        ("get_simple_gui_info", Request::GetSimpleGuiInfo),
        ("get_cc_status", Request::GetCcStatus),
        (
            "get_messages",
            Request::GetMessages {
                seqno: 0,
                translatable: false,
            },
        ),
    ];
    for (name, request) in requests {
        let bytes = daemon.gui_rpc_reply(request.clone()).len();
        let runs = (0..9)
            .map(|_| {
                let t = Instant::now();
                black_box(daemon.gui_rpc_reply(black_box(request.clone())));
                t.elapsed()
            })
            .collect();
        println!(
            "{name:<24} {:>10.1} KB  {:>8.2} ms",
            bytes as f64 / 1e3,
            median(runs).as_secs_f64() * 1e3
        );
    }
}
