//! The anonymous platform against BOINC's own project server (the kit that
//! `BOINC_SERVER_KIT` names): the volunteer's copy of the project's `upper_case` app, listed
//! in `app_info.xml` as version 7.77, gets jobs from the real scheduler, which sends them
//! for that version and no app; the results end VALID in the server's database with the
//! version number Ferrite reported, and the app ran confined where the kernel has Landlock.

use std::fs;
use std::time::Duration;

use ferrite_e2e::boinc_server::{BoincServer, ServerOptions};
use ferrite_e2e::{free_port, Proc};

#[test]
fn an_anonymous_platform_client_runs_its_own_build_to_valid() {
    if !ferrite_e2e::peer_or_skip(
        "an_anonymous_platform_client_runs_its_own_build_to_valid",
        &["boinccmd"],
    ) {
        return;
    }
    let opts = ServerOptions {
        jobs: 3,
        ..ServerOptions::default()
    };
    let test = "an_anonymous_platform_client_runs_its_own_build_to_valid";
    let Some(server) = BoincServer::up(test, &opts) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("client");
    let pdir = dir
        .join("projects")
        .join(ferrite_proto::account::escape_project_url(server.url()));
    fs::create_dir_all(&pdir).expect("project dir");
    let exe = server
        .project_dir()
        .join("apps/upper_case/1.00/x86_64-pc-linux-gnu/upper_case_1.00_x86_64-pc-linux-gnu");
    fs::copy(&exe, pdir.join("my_upper_case")).expect("copy the app");
    ferrite_e2e::testproject::set_executable(&pdir.join("my_upper_case"));
    fs::write(
        pdir.join("app_info.xml"),
        "<app_info>\n<app><name>upper_case</name></app>\n\
         <file_info><name>my_upper_case</name><executable/></file_info>\n\
         <app_version><app_name>upper_case</app_name><version_num>777</version_num>\n\
         <api_version>8.3.0</api_version>\n\
         <file_ref><file_name>my_upper_case</file_name><main_program/></file_ref>\n\
         </app_version>\n</app_info>\n",
    )
    .expect("app_info");
    fs::write(dir.join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    let port = free_port();
    let port_s = port.to_string();
    let mut client = Proc::ferrited(&[
        "--dir",
        dir.to_str().expect("utf-8"),
        "--gui_rpc_port",
        &port_s,
        "--skip_cpu_benchmarks",
        "--attach_project",
        server.url(),
        server.account_key(),
    ]);
    client.wait_for("entering main loop", Duration::from_secs(60));
    server.wait_valid_with_client(
        opts.jobs,
        (Duration::from_secs(300), Duration::from_secs(10)),
        &client,
        port,
    );
    let versions = server.query("select app_version_num from result where outcome = 1");
    assert_eq!(versions.len(), opts.jobs as usize, "{versions:?}");
    assert!(
        versions
            .iter()
            .all(|r| r.first().map(String::as_str) == Some("777")),
        "{versions:?}"
    );
    // The volunteer's own build ran confined (Landlock) where the kernel has it.
    ferrite_e2e::assert_apps_ran_confined(&client.output());
    // Nothing of the project's own app was fetched.
    assert!(
        !pdir.join("upper_case_1.00_x86_64-pc-linux-gnu").exists(),
        "{}",
        client.output()
    );
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
}
