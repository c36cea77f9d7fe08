//! Trickle messages through the request and the reply: pending trickle-up files go out as
//! `<msg_from_host>`, a reply's trickle-downs are routed to the tasks they name.

#![allow(clippy::unwrap_used)]

use ferrite_project::reply::{apply_reply, ApplyOptions, Event};
use ferrite_project::request::{build_request, RequestInput};
use ferrite_project::trickle::msgs_from_host;
use ferrite_project::verify::BoincCrypt;
use ferrite_proto::client_state::{ClientState, ProjectState, ResultState, TaskResult};
use ferrite_proto::sched_reply::SchedulerReply;

const URL: &str = "http://127.0.0.1/test/";

fn state() -> ClientState {
    let mut ps = ProjectState::default();
    ps.project.master_url = URL.into();
    ps.project.scheduler_urls = vec!["http://127.0.0.1/test_cgi/cgi".into()];
    ps.project.hostid = 4;
    ps.project.trickle_up_pending = true;
    for (name, state) in [
        ("running_0", ResultState::FilesDownloaded),
        ("done_0", ResultState::FilesUploaded),
    ] {
        ps.results.push(TaskResult {
            name: name.into(),
            state,
            ..TaskResult::default()
        });
    }
    ClientState {
        projects: vec![ps],
        platform_name: "x86_64-pc-linux-gnu".into(),
        ..ClientState::default()
    }
}

#[test]
fn pending_trickle_up_files_are_in_the_request() {
    let s = state();
    let files = [
        (
            "trickle_up_running_0_1795937330.xml",
            "<variety>example_app</variety>\nsample trickle message",
        ),
        ("running_0_out", "output, not a trickle"),
        (
            "trickle_up_running_0_1795937321.xml.sent",
            "<variety>example_app</variety>\nearlier message",
        ),
    ];
    let input = RequestInput {
        master_url: URL.into(),
        msgs_from_host: msgs_from_host(files.iter().map(|(n, c)| (*n, *c))),
        ..RequestInput::default()
    };
    let xml = build_request(&s, &input).unwrap().to_xml();
    let at = |needle: &str| {
        xml.find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in\n{xml}"))
    };
    assert_eq!(xml.matches("<msg_from_host>").count(), 2, "{xml}");
    // Oldest first, each with its result and time, the file's lines kept.
    assert!(at("<time>1795937321</time>") < at("earlier message"));
    assert!(at("earlier message") < at("<time>1795937330</time>"));
    assert!(xml.contains("\n<variety>example_app</variety>\nsample trickle message\n"));
    assert_eq!(
        xml.matches("<result_name>running_0</result_name>").count(),
        2
    );
    assert!(!xml.contains("output, not a trickle"));
}

#[test]
fn trickle_downs_are_routed_to_tasks_that_have_not_ended() {
    let mut s = state();
    let text = "<scheduler_reply>\n<scheduler_version>803</scheduler_version>\n<message_ack/>\n\
        <trickle_down>\n<result_name>running_0</result_name>\n<time>1795937321</time>\n\
        sample trickle message\n</trickle_down>\n\
        <trickle_down>\n<result_name>done_0</result_name>\n<time>7</time>\nlate\n</trickle_down>\n\
        <trickle_down>\n<result_name>unknown_0</result_name>\n<time>8</time>\nx\n</trickle_down>\n\
        </scheduler_reply>\n";
    let reply = SchedulerReply::parse(text, "reply").unwrap().value;
    let out = apply_reply(
        &mut s,
        URL,
        &reply,
        1_795_937_400.0,
        &ApplyOptions::default(),
        &BoincCrypt,
    )
    .unwrap();
    let trickles: Vec<&Event> = out
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::TrickleDown { .. } | Event::TrickleDownDropped(_) | Event::TrickleUpsAcked
            )
        })
        .collect();
    assert_eq!(
        trickles,
        [
            &Event::TrickleUpsAcked,
            &Event::TrickleDown {
                result: "running_0".into(),
                file: "trickle_down_1795937321".into(),
                body: "\nsample trickle message\n".into(),
            },
            &Event::TrickleDownDropped("done_0".into()),
            &Event::TrickleDownDropped("unknown_0".into()),
        ]
    );
    // A successful reply ends the trickle-up RPC's reason.
    assert!(!s.projects[0].project.trickle_up_pending);
}
