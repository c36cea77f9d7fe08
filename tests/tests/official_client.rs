//! Compatibility with the official BOINC client: the state file Ferrite writes must load in
//! Debian's `boinc-client` (7.20.5) with every project and task there.

use std::fs;
use std::time::Duration;

use ferrite_e2e::{copy_dir, fixture_data_dir, peer_or_skip, OfficialClient, Proc};
use ferrite_proto::client_state::ClientState;

#[test]
fn official_client_loads_the_state_ferrite_wrote() {
    if !peer_or_skip(
        "official_client_loads_the_state_ferrite_wrote",
        &["boinc", "boinccmd"],
    ) {
        return;
    }
    round_trip_through_ferrite("02_tasks_running");
}

#[test]
fn official_client_loads_what_ferrite_wrote_from_a_boinc_8_layout() {
    if !peer_or_skip(
        "official_client_loads_what_ferrite_wrote_from_a_boinc_8_layout",
        &["boinc", "boinccmd"],
    ) {
        return;
    }
    round_trip_through_ferrite("8x_layout");
}

/// Runs Ferrite on a copy of fixture data directory `name`, stops it, then has the official
/// client load the result and checks every project, app and task is there.
fn round_trip_through_ferrite(name: &str) {
    let dir = fixture_data_dir(name);
    let original = ClientState::parse(
        &fs::read_to_string(dir.path().join("client_state.xml")).expect("read"),
        "client_state.xml",
    )
    .expect("parse")
    .value;
    let d = dir.path().to_str().expect("utf-8 path");
    let mut p = Proc::ferrited(&["--dir", d, "--skip_cpu_benchmarks", "--no_gpus"]);
    p.wait_for("entering main loop", Duration::from_secs(30));
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(30)).success(), "{}", p.output());

    // Only Ferrite's files decide what the official client sees: drop the official client's
    // previous generation so it cannot fall back to it.
    let copy = tempfile::tempdir().expect("tempdir");
    copy_dir(dir.path(), copy.path()).expect("copy");
    let _ = fs::remove_file(copy.path().join("client_state_prev.xml"));
    let written = fs::read_to_string(copy.path().join("client_state.xml")).expect("read");

    let client = OfficialClient::start(copy.path());
    let (ok, state) = client.boinccmd(&["--get_state"]);
    assert!(
        ok,
        "boinccmd --get_state failed; client output:\n{}",
        client.output()
    );
    let (ok, tasks) = client.boinccmd(&["--get_tasks"]);
    assert!(ok);
    let log = client.quit();

    assert!(
        !log.contains("Can't parse") && !log.contains("unparsed"),
        "the official client complained about our file:\n{log}\n--- file:\n{written}"
    );
    for project in &original.projects {
        assert!(
            state.contains(&format!("master URL: {}", project.project.master_url)),
            "project {} missing:\n{state}",
            project.project.master_url
        );
        for app in &project.apps {
            assert!(
                state.contains(&app.name),
                "app {} missing:\n{state}",
                app.name
            );
        }
        for result in &project.results {
            assert!(
                tasks.contains(&format!("name: {}", result.name)),
                "task {} missing:\n{tasks}\nclient log:\n{log}",
                result.name
            );
            assert!(
                tasks.contains(&format!("WU name: {}", result.wu_name)),
                "workunit {} missing:\n{tasks}",
                result.wu_name
            );
        }
    }
}
