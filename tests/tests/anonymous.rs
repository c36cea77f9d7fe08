//! The anonymous platform end to end: a project directory holding `app_info.xml` and the
//! volunteer's own build of the project's app. `ferrited` asks the test project for work as
//! platform `anonymous`, listing the local version; the project sends jobs for it and no app;
//! the local app runs them and the results are reported. The local files survive the jobs'
//! clean-up, a later `app_info.xml` is taken up by `read_cc_config`, a broken one is
//! reported and leaves the project's apps as they were, and a project reset keeps them.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferrite_e2e::testproject::{self, client_dir, set_executable, walk, Server, ShellApp};
use ferrite_e2e::{boinccmd, free_port};

/// The app_info.xml of app `alpha`, version `version`, made of the local file `my_alpha`.
fn app_info(version: i32) -> String {
    format!(
        "<app_info>\n\
         <app>\n  <name>alpha</name>\n  <user_friendly_name>Alpha (my build)</user_friendly_name>\n</app>\n\
         <file_info>\n  <name>my_alpha</name>\n  <executable/>\n</file_info>\n\
         <app_version>\n  <app_name>alpha</app_name>\n  <version_num>{version}</version_num>\n\
         <avg_ncpus>1</avg_ncpus>\n\
         <file_ref>\n    <file_name>my_alpha</file_name>\n    <main_program/>\n  </file_ref>\n\
         </app_version>\n</app_info>\n"
    )
}

/// The volunteer's build: writes `local <input>`.
fn local_app(pdir: &Path) -> PathBuf {
    let path = pdir.join("my_alpha");
    fs::write(
        &path,
        "#!/bin/sh\necho \"local $(cat in)\" > out\necho 0 > boinc_finish_called\nexit 0\n",
    )
    .expect("local app");
    set_executable(&path);
    path
}

fn uploads(server: &Server) -> Vec<String> {
    let mut v: Vec<String> = walk(&server.data.join("results"))
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| fs::read_to_string(p).unwrap_or_default())
        .collect();
    v.sort();
    v
}

#[test]
fn an_anonymous_platform_project_runs_the_volunteers_own_app() {
    if !ferrite_e2e::peer_or_skip(
        "an_anonymous_platform_project_runs_the_volunteers_own_app",
        &["boinccmd"],
    ) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start_apps(
        tmp.path(),
        &[ShellApp {
            name: "alpha",
            word: "project",
            prelude: "",
        }],
        &["--jobs", "3"],
    );
    let dir = client_dir(tmp.path(), "");
    let esc = ferrite_proto::account::escape_project_url(&server.url);
    let pdir = dir.join("projects").join(&esc);
    fs::create_dir_all(&pdir).expect("project dir");
    fs::write(pdir.join("app_info.xml"), app_info(777)).expect("app_info");
    let app = local_app(&pdir);
    let port = free_port();
    let mut client = testproject::start_client(&dir, port, Some(&server.url));
    assert!(
        client
            .output()
            .contains("Found app_info.xml; using anonymous platform"),
        "{}",
        client.output()
    );
    testproject::nudge_until_reported(
        &server,
        &client,
        port,
        (3, Duration::from_secs(90)),
        "the jobs of the local app",
        true,
    );
    // Every job ran the local build, none the project's app.
    assert_eq!(
        uploads(&server),
        vec!["local world\n".to_owned(); 3],
        "{}",
        client.output()
    );
    let request =
        fs::read_to_string(dir.join(format!("sched_request_{esc}.xml"))).expect("request");
    assert!(
        request.contains("<platform_name>anonymous</platform_name>"),
        "{request}"
    );
    let versions = ferrite_e2e::first_element(&request, "app_versions").expect("app_versions");
    assert!(
        versions.contains("<app_name>alpha</app_name>")
            && versions.contains("<version_num>777</version_num>"),
        "{versions}"
    );
    // The project's executable was never fetched, and the local one outlived the jobs'
    // clean-up.
    let exe_prefix = "alpha_1.00";
    assert!(
        !walk(&pdir).iter().any(|p| p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(exe_prefix))),
        "{:?}",
        walk(&pdir)
    );
    assert!(app.is_file());

    // A new version in app_info.xml is taken up by read_cc_config and listed in the next
    // request.
    fs::write(pdir.join("app_info.xml"), app_info(778)).expect("app_info 778");
    let out = boinccmd(port, Some("pw"), &["--read_cc_config"]);
    assert_eq!(out.code, 0, "{out:?}");
    let out = boinccmd(port, Some("pw"), &["--project", &server.url, "update"]);
    assert_eq!(out.code, 0, "{out:?}");
    let t0 = std::time::Instant::now();
    loop {
        let request =
            fs::read_to_string(dir.join(format!("sched_request_{esc}.xml"))).unwrap_or_default();
        if request.contains("<version_num>778</version_num>") {
            assert!(
                !request.contains("<version_num>777</version_num>"),
                "{request}"
            );
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no request listing version 778\n{}",
            client.output()
        );
        std::thread::sleep(Duration::from_millis(300));
    }

    // A broken app_info.xml: a clear message, and the project keeps its apps.
    fs::write(
        pdir.join("app_info.xml"),
        "<app_info>\n<app><name>alpha</name>\n",
    )
    .expect("broken");
    let out = boinccmd(port, Some("pw"), &["--read_cc_config"]);
    assert_eq!(out.code, 0, "{out:?}");
    client.wait_for("Syntax error in app_info.xml", Duration::from_secs(10));
    let state = ferrite_e2e::gui_rpc(port, Some("pw"), "<get_state/>");
    assert!(
        state.contains("<version_num>778</version_num>"),
        "the last good versions stay: {state}"
    );
    let notices = ferrite_e2e::gui_rpc(
        port,
        Some("pw"),
        "<get_notices><seqno>0</seqno></get_notices>",
    );
    assert!(notices.contains("app_info.xml"), "{notices}");

    // A project reset keeps the volunteer's files, apps and versions.
    let out = boinccmd(port, Some("pw"), &["--project", &server.url, "reset"]);
    assert_eq!(out.code, 0, "{out:?}");
    let state = ferrite_e2e::gui_rpc(port, Some("pw"), "<get_state/>");
    assert!(state.contains("<version_num>778</version_num>"), "{state}");
    assert!(app.is_file() && pdir.join("app_info.xml").is_file());
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
}
