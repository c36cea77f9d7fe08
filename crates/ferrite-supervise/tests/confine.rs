//! Apps confined with Landlock: the real BOINC API app still runs to completion and writes
//! its output, while a shell app reaches nothing of the data directory beyond its slot and
//! its project, and cannot signal the client or read its environment.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use ferrite_supervise::confine::{self, AppNeeds, AppPlace, Policy, Support};
use ferrite_supervise::{ExitOutcome, FileRole, LinkMode, SlotFile, Task};

/// True when this kernel confines; otherwise says why the test is skipped (a failure under
/// `CI=true`, where the kernel is known to have Landlock).
fn landlock_or_skip(test: &str) -> bool {
    match confine::support() {
        Support::Available(_) => true,
        other => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: {}",
                other.describe()
            );
            eprintln!("SKIPPED {test}: {}", other.describe());
            false
        }
    }
}

fn policy_for(dd: &DataDir, slot_dir: &Path) -> Policy {
    Policy::for_app(
        AppPlace {
            data_dir: dd.tmp.path(),
            slot_dir,
            project_dir: &dd.project_dir(),
            home: None,
            engine_sockets: &[],
        },
        AppNeeds::default(),
    )
}

/// Secrets a hostile app would go for, as the official client's data directory has them.
fn plant_secrets(dd: &DataDir) {
    let root = dd.tmp.path();
    std::fs::write(root.join("gui_rpc_auth.cfg"), "rpc-secret\n").unwrap();
    std::fs::write(
        root.join("account_127.0.0.1_18080.xml"),
        "<account><authenticator>key</authenticator></account>\n",
    )
    .unwrap();
    std::fs::write(root.join("client_state.xml"), "<client_state/>\n").unwrap();
    let other = root.join("projects").join("other.example_p");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("their_input"), "theirs\n").unwrap();
}

#[test]
fn confined_api_app_runs_to_completion_and_writes_its_output() {
    if !landlock_or_skip("confined_api_app_runs_to_completion_and_writes_its_output") {
        return;
    }
    let dd = DataDir::new();
    plant_secrets(&dd);
    let (slot, mut cfg) = api_task(&dd, "confined", 3, &["--step-ms", "100"]);
    cfg.confine = Some(policy_for(&dd, slot.dir()));
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    let (exit, _) = run(&mut task, Duration::from_secs(30));
    let exit = exit.expect("task did not exit");
    match &exit.outcome {
        ExitOutcome::Finished(f) => assert_eq!(f.status, 0, "{}", exit.stderr),
        other => panic!("not finished: {other:?}\n{}", exit.stderr),
    }
    assert_eq!(
        std::fs::read_to_string(dd.project_dir().join("confined_out")).unwrap(),
        "done 3 steps\n"
    );
}

/// Each probe prints `name:yes` or `name:no` (on stderr: an app's stdout is `/dev/null`).
const PROBES: &str = r#"#!/bin/sh
exec 1>&2
probe() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name:yes"; else echo "$name:no"; fi; }
probe read_slot cat ./mine
probe write_slot sh -c 'echo x > ./written'
probe read_project cat ../../projects/127.0.0.1_18080/confined_in
probe write_output sh -c 'echo out > ../../projects/127.0.0.1_18080/new_out'
probe delete_project_file rm ../../projects/127.0.0.1_18080/confined_in
probe read_system cat /etc/hostname /usr/bin/sh
probe read_gui_rpc_auth cat ../../gui_rpc_auth.cfg
probe read_account cat ../../account_127.0.0.1_18080.xml
probe read_client_state cat ../../client_state.xml
probe list_data_dir ls ../../
probe read_other_project cat ../../projects/other.example_p/their_input
probe write_other_project sh -c 'echo x > ../../projects/other.example_p/planted'
probe read_other_slot cat ../1/theirs
probe signal_client kill -0 "$CLIENT_PID"
probe read_client_environ cat "/proc/$CLIENT_PID/environ"
"#;

#[test]
fn a_confined_app_reaches_only_its_slot_its_project_and_the_system() {
    if !landlock_or_skip("a_confined_app_reaches_only_its_slot_its_project_and_the_system") {
        return;
    }
    let dd = DataDir::new();
    plant_secrets(&dd);
    dd.project_file("confined_in", b"input\n");
    dd.project_program("probes.sh", PROBES.as_bytes());
    let mine = dd.slots.allocate().unwrap();
    let theirs = dd.slots.allocate().unwrap();
    std::fs::write(theirs.dir().join("theirs"), "other slot\n").unwrap();
    let files = vec![SlotFile {
        open_name: "probes.sh".into(),
        project_dir: PROJECT.into(),
        file_name: "probes.sh".into(),
        mode: LinkMode::SoftLinkFile,
        role: FileRole::Input,
    }];
    mine.setup(&files, "<app_init_data/>\n").unwrap();
    std::fs::write(mine.dir().join("mine"), "mine\n").unwrap();
    let mut cfg = config_for(&mine, "probes", &[]);
    cfg.program = format!("../../projects/{PROJECT}/probes.sh").into();
    cfg.uses_api = false;
    cfg.env = vec![("CLIENT_PID".into(), std::process::id().to_string().into())];
    cfg.confine = Some(policy_for(&dd, mine.dir()));
    let mut task = Task::start(cfg, Instant::now()).unwrap();
    let (exit, _) = run(&mut task, Duration::from_secs(30));
    let exit = exit.expect("the probes did not exit");
    let said = std::fs::read_to_string(mine.dir().join("stderr.txt")).unwrap_or_default();
    let out = format!("{said}{}", exit.stderr);
    eprintln!("{out}");
    for allowed in [
        "read_slot",
        "write_slot",
        "read_project",
        "write_output",
        "read_system",
    ] {
        assert!(out.contains(&format!("{allowed}:yes")), "{allowed}\n{out}");
    }
    for denied in [
        "delete_project_file",
        "read_gui_rpc_auth",
        "read_account",
        "read_client_state",
        "list_data_dir",
        "read_other_project",
        "write_other_project",
        "read_other_slot",
        "signal_client",
        "read_client_environ",
    ] {
        assert!(out.contains(&format!("{denied}:no")), "{denied}\n{out}");
    }
    assert!(!dd
        .tmp
        .path()
        .join("projects/other.example_p/planted")
        .exists());
}
