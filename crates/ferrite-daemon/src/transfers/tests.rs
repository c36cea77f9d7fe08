//! The transfers' unit tests.

use super::*;

const URL: &str = "http://127.0.0.1/test/";

/// A state with one project whose app version's one file `app` is downloaded.
fn state_with_app() -> ClientState {
    let xml = format!(
        "<client_state><project><master_url>{URL}</master_url></project>\
         <app><name>a</name></app>\
         <file><name>app</name><nbytes>3</nbytes><status>1</status></file>\
         <app_version><app_name>a</app_name><version_num>100</version_num>\
         <file_ref><file_name>app</file_name><main_program/></file_ref></app_version>\
         </client_state>"
    );
    ClientState::parse(&xml, "client_state.xml")
        .expect("state")
        .value
}

#[test]
fn an_app_file_fetched_again_after_a_detach_is_not_taken_for_a_changed_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pdir = config::project_dir(dir.path(), URL);
    std::fs::create_dir_all(&pdir).expect("mkdir");
    let app = pdir.join("app");
    std::fs::write(&app, "one").expect("write");
    let mut t = Transfers::new(dir.path());
    let mut state = state_with_app();
    assert!(
        !t.check_app_files(&mut state),
        "first sight records the file"
    );

    // Detach: the project and its directory go; re-attach: the file comes again, with
    // another modification time (and here another size).
    config::detach_project(dir.path(), &mut state, URL).expect("detach");
    assert!(!t.check_app_files(&mut state));
    std::fs::create_dir_all(&pdir).expect("mkdir");
    std::fs::write(&app, "other").expect("write");
    let mut state = state_with_app();
    assert!(
        !t.check_app_files(&mut state),
        "the new copy was taken for a changed file"
    );
    assert!(app.exists());
    assert_eq!(state.projects[0].files[0].status, 1);

    // A change after that is still caught.
    std::fs::write(&app, "tampered").expect("write");
    assert!(t.check_app_files(&mut state));
    assert_eq!(state.projects[0].files[0].status, 0);
    assert!(!app.exists());
}

/// A state of `n` tasks of one project waiting for their input files, none downloaded.
fn waiting_for_inputs(n: usize) -> ClientState {
    let mut state = ferrite_proto::client_state::synthetic(1, n);
    let ps = &mut state.projects[0];
    for r in &mut ps.results {
        r.state = ResultState::FilesDownloading;
        r.ready_to_report = false;
    }
    let inputs: HashSet<String> = ps
        .workunits
        .iter()
        .flat_map(|w| w.input_files.iter().map(|f| f.file_name.clone()))
        .collect();
    for f in &mut ps.files {
        if inputs.contains(&f.name) {
            f.status = 0;
        }
    }
    state
}

/// A download of `file` that failed; `permanent`: it can never succeed.
fn failed_download(project: &str, file: &str, permanent: bool) -> TransferDone {
    TransferDone {
        project: project.to_owned(),
        file: file.to_owned(),
        upload: false,
        result: Err("connection refused".to_owned()),
        download: None,
        code: ERR_RESULT_DOWNLOAD,
        permanent,
        resumed_from: 0,
        sent: None,
    }
}

/// A failed attempt that will be retried moves no task, so the tasks are not walked for
/// it; a failure for good moves its task along as the full walk over the tasks does.
#[test]
fn only_a_transfer_end_that_changes_a_file_walks_the_waiting_tasks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut t = Transfers::new(dir.path());
    let mut state = waiting_for_inputs(20);
    let url = state.projects[0].project.master_url.clone();
    let file = state.projects[0].workunits[0].input_files[0]
        .file_name
        .clone();

    let ended = t.finished(failed_download(&url, &file, false), &mut state, 100.0);
    assert!(ended.changed && !ended.moved, "{ended:?}");
    assert!(
        t.plans.is_empty(),
        "the waiting tasks were walked for a retry"
    );
    // The full way would not have moved a task either.
    let mut full = state.clone();
    assert!(!update_results(&mut full.projects[0], 100.0));
    assert_eq!(full, state);

    // Failed for good: the full way on the file's new status gives the same tasks.
    let mut expected = state.clone();
    let ended = t.finished(failed_download(&url, &file, true), &mut state, 101.0);
    assert!(ended.changed && ended.moved, "{ended:?}");
    assert!(t.plans.contains_key(&url));
    let f = state.projects[0].file(&file).expect("file");
    assert_eq!(f.status, ERR_RESULT_DOWNLOAD);
    let (status, msg) = (f.status, f.error_msg.clone());
    let e = expected.projects[0].file_mut(&file).expect("file");
    e.status = status;
    e.error_msg = msg;
    assert!(update_results(&mut expected.projects[0], 101.0));
    assert_eq!(expected.projects[0].results, state.projects[0].results);
    assert_eq!(
        state.projects[0].results[0].state,
        ResultState::ComputeError
    );
}
