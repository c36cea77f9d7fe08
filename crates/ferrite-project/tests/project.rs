//! Integration tests on real captured BOINC data (copied into `tests/fixtures`).
#![allow(clippy::unwrap_used)]

use ferrite_project::master::parse_master_page;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn master_page_fixture_gives_one_deduplicated_url_and_title() {
    let m = parse_master_page(&fixture("master_page.html")).unwrap();
    assert_eq!(m.scheduler_urls, ["http://127.0.0.1:18080/cgi"]);
    assert_eq!(m.project_name.as_deref(), Some("Fixture Project"));
}

/// Every element path (`a/b/c`) in a document, CDATA and text ignored.
fn element_paths(xml: &str) -> std::collections::BTreeSet<String> {
    use quick_xml::events::Event;
    let mut r = quick_xml::Reader::from_str(xml);
    let mut stack: Vec<String> = Vec::new();
    let mut out = std::collections::BTreeSet::new();
    loop {
        match r.read_event().unwrap() {
            Event::Start(e) => {
                stack.push(String::from_utf8_lossy(e.name().as_ref()).into_owned());
                out.insert(stack.join("/"));
            }
            Event::Empty(e) => {
                let n = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                out.insert(format!("{}/{n}", stack.join("/")));
            }
            Event::End(_) => {
                stack.pop();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

fn between<'a>(s: &'a str, open: &str, close: &str) -> &'a str {
    let a = s.find(open).unwrap() + open.len();
    let b = a + s[a..].find(close).unwrap();
    &s[a..b]
}

#[test]
fn request_from_fixture_state_has_the_official_clients_elements() {
    use ferrite_project::request::{build_request, RequestInput, RscWork, WorkRequest};
    use ferrite_proto::client_state::ClientState;
    use ferrite_proto::sched_request::DiskUsage;

    let state = ClientState::parse(&fixture("state_02_tasks_running.xml"), "client_state.xml")
        .unwrap()
        .value;
    let official = fixture("sched_request_02_tasks_running.xml");
    let prefs = between(
        &official,
        "<working_global_preferences>",
        "</working_global_preferences>",
    )
    .trim()
    .to_owned();
    let input = RequestInput {
        master_url: "http://127.0.0.1:18080/".into(),
        authenticator: between(&official, "<authenticator>", "</authenticator>").into(),
        work: WorkRequest {
            cpu: RscWork {
                req_secs: 100.0,
                req_instances: 0.0,
                estimated_delay: 10.0,
            },
            gpus: Vec::new(),
            work_req_seconds: 100.0,
        },
        working_global_prefs: Some(prefs),
        now: 1_795_333_000.0,
        resource_share_fraction: 1.0,
        rrs_fraction: 1.0,
        prrs_fraction: 1.0,
        disk_usage: Some(DiskUsage {
            d_boinc_used_total: 1e6,
            d_boinc_used_project: 5e5,
            d_project_share: 1e10,
        }),
        include_net_info: true,
        ..RequestInput::default()
    };
    let req = build_request(&state, &input).unwrap();
    let ours = req.to_xml();
    // The snapshot's request was made before wu_short_0 finished; the state now has it ready
    // to report. Everything but the reported <result> must match that request, and the
    // reported <result> must match the one a real report carried (real-server fixture).
    let is_result = |p: &&String| p.starts_with("scheduler_request/result");
    let ours_paths = element_paths(&ours);
    let (a, b): (std::collections::BTreeSet<_>, std::collections::BTreeSet<_>) = (
        element_paths(&official)
            .into_iter()
            .filter(|p| !is_result(&p))
            .collect(),
        ours_paths
            .iter()
            .filter(|p| !is_result(p))
            .cloned()
            .collect(),
    );
    let missing: Vec<_> = a.difference(&b).collect();
    let added: Vec<_> = b.difference(&a).collect();
    assert!(
        missing.is_empty() && added.is_empty(),
        "missing {missing:?}\nadded {added:?}"
    );
    let real: std::collections::BTreeSet<_> = element_paths(&fixture("sched_request_report.xml"))
        .into_iter()
        .filter(|p| is_result(&p))
        .collect();
    let ours_result: std::collections::BTreeSet<_> = ours_paths
        .iter()
        .filter(|p| is_result(p))
        .cloned()
        .collect();
    assert_eq!(ours_result, real);
    // Values that come from the state, not from the input.
    assert_eq!(req.hostid, state.projects[0].project.hostid);
    assert!(req.code_sign_key.is_some());
    let reported: Vec<_> = req.results.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(reported, ["wu_short_0"]);
    assert_eq!(req.results[0].uploaded_files[0].name, "wu_short_0_out");
    let mut others: Vec<_> = req.other_results.iter().map(|o| o.name.as_str()).collect();
    others.sort_unstable();
    assert_eq!(others, ["wu_abort_0", "wu_long_0"]);
    assert!(
        official.contains("<name>wu_short_0</name>"),
        "listed as other_result then"
    );
    assert_eq!(req.app_versions.len(), 1);
    assert_eq!(req.platform_name, "x86_64-pc-linux-gnu");
}
