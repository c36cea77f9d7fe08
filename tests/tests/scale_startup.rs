//! A large data directory (the scale bench's generator: one project, 20,000 tasks whose
//! input files are all missing, so each must be fetched again) answers GUI RPC before the
//! first pass over its tasks is over: the start-up's first pass goes in chunks, and the main
//! loop serves GUI RPC between them.

use std::time::{Duration, Instant};

use ferrite_e2e::{free_port, try_gui_rpc, Proc};
use ferrite_proto::client_state::{synthetic, synthetic_account, RunMode};

const TASKS: usize = 20_000;
/// Loading and checking 20,000 tasks in a debug build on a loaded machine.
const T: Duration = Duration::from_secs(600);
const PASSWORD: &str = "scalepw";
/// What `ferrited` logs when the first pass over every task is over.
const FIRST_PASS_DONE: &str = "first pass over the tasks done";

#[test]
fn a_large_data_directory_answers_gui_rpc_before_its_first_pass_is_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state = synthetic(1, TASKS);
    // Nothing runs or downloads: the first pass only decides.
    state.user_run_request = RunMode::Never;
    state.user_network_request = RunMode::Never;
    std::fs::write(dir.path().join("client_state.xml"), state.to_xml()).expect("state file");
    std::fs::write(dir.path().join("gui_rpc_auth.cfg"), PASSWORD).expect("password");
    for ps in &state.projects {
        let (name, xml) = synthetic_account(&ps.project.master_url);
        std::fs::write(dir.path().join(name), xml).expect("account");
    }
    drop(state);
    let port = free_port();
    let mut cmd = Proc::ferrited_command(dir.path(), port, None);
    cmd.arg("--no_gpus");
    let mut p = Proc::spawn(cmd);
    p.wait_for("entering main loop", T);

    // The first authorised call answered, as soon as the loop takes it.
    let start = Instant::now();
    let reply = loop {
        match try_gui_rpc(port, Some(PASSWORD), "<get_cc_status/>\n") {
            Ok(r) if r.contains("<cc_status>") => break r,
            _ if start.elapsed() < T && !p.has_exited() => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => panic!("no get_cc_status answer: {other:?}\n{}", p.output()),
        }
    };
    let answered = p.output();
    assert!(reply.contains("<network_mode>"), "{reply}");
    assert!(
        !answered.contains(FIRST_PASS_DONE),
        "GUI RPC answered only after the first pass:\n{answered}"
    );
    // And the first pass does end, over every task.
    p.wait_for(FIRST_PASS_DONE, T);
    let out = p.output();
    assert!(
        out.contains(&format!("{FIRST_PASS_DONE} ({TASKS} tasks")),
        "{out}"
    );
    p.signal(libc::SIGTERM);
    assert!(p.wait(T).success(), "{}", p.output());
}
