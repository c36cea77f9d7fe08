//! `client_state.xml`: the official client's files round-trip, generated states round-trip,
//! and bad input is survived or reported precisely.

mod common;

use ferrite_proto::client_state::{
    App, AppVersion, ClientState, FileInfo, FileRef, Project, ProjectState, ResourceUsage,
    ResultState, RpcReason, RunMode, TaskResult, Workunit,
};
use ferrite_proto::xml::XmlError;

fn fixtures() -> Vec<(String, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/state");
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir)
        .expect("fixture dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .map(|p| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("read"))
        })
        .collect();
    out.sort();
    assert_eq!(out.len(), 10, "all data_dir snapshots' state files");
    out
}

fn state_rename(name: &str, depth: usize) -> String {
    if depth == 1 && name == "file_info" {
        "file".into()
    } else {
        name.into()
    }
}

#[test]
fn official_state_files_round_trip_without_losing_fields() {
    for (name, text) in fixtures() {
        let parsed = ClientState::parse(&text, &name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let cs = parsed.value;
        assert!(!cs.platform_name.is_empty(), "{name}");
        let out = cs.to_xml();
        let again = ClientState::parse(&out, "rewritten")
            .unwrap_or_else(|e| panic!("{name} rewritten: {e}\n{out}"));
        assert_eq!(again.value, cs, "{name}: parse → write → parse");
        assert!(again.warnings.is_empty(), "{name}: {:?}", again.warnings);
        assert_eq!(again.value.to_xml(), out, "{name}: writing is stable");

        let orig = common::leaves(&text, &state_rename);
        let ours = common::leaves(&out, &state_rename);
        let missing = common::missing_leaves(&orig, &ours, &[]);
        assert!(missing.is_empty(), "{name}: lost {missing:?}");
    }
}

#[test]
fn running_snapshot_has_the_expected_domain_values() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/state/02_tasks_running_client_state.xml"
    ))
    .expect("fixture");
    let cs = ClientState::parse(&text, "client_state.xml")
        .expect("parses")
        .value;
    assert_eq!(cs.host_info.p_ncpus, 2);
    assert_eq!(cs.projects.len(), 1);
    let p = cs
        .project("http://127.0.0.1:18080/")
        .expect("project by URL");
    assert_eq!(p.project.hostid, 7);
    assert!(p.project.dont_use_dcf);
    assert_eq!(p.project.rsc_backoff[0].name, "CPU");
    assert_eq!(p.project.rsc_backoff[0].backoff_interval, 600.0);
    assert!(p
        .project
        .code_sign_key
        .as_deref()
        .is_some_and(|k| k.starts_with("1024\n") && k.ends_with("\n.")));
    assert_eq!(p.apps.len(), 1);
    assert_eq!(p.files.len(), 7);
    assert!(p
        .file("fixture_app_2.00.sh")
        .is_some_and(|f| f.executable && f.signature_required && f.file_signature.is_some()));
    assert_eq!(
        p.workunit("wu_short").map(|w| w.command_line.as_str()),
        Some("--fixture-arg 1")
    );
    let r = p.result("wu_short_0").expect("result");
    assert_eq!(r.state, ResultState::FilesUploaded);
    assert!(r.ready_to_report && r.report_immediately);
    assert!(
        r.stderr_out.starts_with("<stderr_txt>"),
        "{:?}",
        r.stderr_out
    );
    assert_eq!(r.final_peak_working_set_size, 1_679_360.0);
    let av = p.app_version_of(r).expect("app version of result");
    assert_eq!(av.version_num, 200);
    assert_eq!(cs.active_tasks.len(), 2);
    assert_eq!(
        cs.active_task("http://127.0.0.1:18080/", "wu_long_0")
            .map(|a| a.slot),
        Some(0)
    );
    assert_eq!(cs.user_run_request, RunMode::Auto);
    assert_eq!(cs.user_run_prev_request, RunMode::Always);
    assert_eq!(cs.core_client_version.minor, 20);
}

#[test]
fn written_layout_matches_the_official_client() {
    // The official writer's layout for the blocks we reproduce exactly.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/state/02_tasks_running_client_state.xml"
    ))
    .expect("fixture");
    let out = ClientState::parse(&text, "c")
        .expect("parses")
        .value
        .to_xml();
    for block in [
        "<host_info>",
        "<time_stats>",
        "<net_stats>",
        "<project>",
        "<app>",
        "<workunit>",
    ] {
        let end = block.replace('<', "</");
        let grab = |s: &str| -> String {
            let a = s.find(block).expect("block");
            let b = a + s[a..].find(&end).expect("end");
            s[a..b].to_owned()
        };
        assert_eq!(grab(&out), grab(&text), "{block} differs");
    }
    assert!(out.starts_with("<client_state>\n<host_info>\n    <timezone>"));
    assert!(out.ends_with("</client_state>\n"));
}

#[test]
fn reported_results_in_early_states_become_uploaded() {
    let doc = "<client_state>\n<project><master_url>http://p/</master_url></project>\n\
        <result><name>r1</name><state>1</state><ready_to_report/></result>\n\
        <result><name>r2</name><state>4</state><got_server_ack/></result>\n\
        <result><name>r3</name><state>3</state><ready_to_report/></result>\n\
        <result><name>r4</name><state>2</state></result>\n</client_state>\n";
    let parsed = ClientState::parse(doc, "c.xml").expect("parses");
    let states: Vec<_> = parsed.value.projects[0]
        .results
        .iter()
        .map(|r| r.state)
        .collect();
    assert_eq!(
        states,
        [
            ResultState::FilesUploaded,
            ResultState::FilesUploaded,
            ResultState::ComputeError,
            ResultState::FilesDownloaded
        ]
    );
    assert_eq!(parsed.warnings.len(), 2, "{:?}", parsed.warnings);
    assert!(parsed.warnings[0].message.contains("state set to 5"));
    assert_eq!(parsed.warnings[0].line, 3);
}

#[test]
fn objects_follow_the_most_recent_project() {
    let doc = "<client_state>\n<app><name>orphan</name></app>\n\
        <project><master_url>http://a/</master_url></project>\n<app><name>a1</name></app>\n\
        <project><master_url>http://b/</master_url></project>\n<app><name>b1</name></app>\n\
        <file_info><name>f</name></file_info>\n</client_state>\n";
    let parsed = ClientState::parse(doc, "c.xml").expect("parses");
    let cs = parsed.value;
    assert_eq!(cs.project("http://a/").map(|p| p.apps.len()), Some(1));
    assert_eq!(
        cs.project("HTTP://B/")
            .and_then(|p| p.app("b1"))
            .map(|a| a.user_friendly_name.as_str()),
        Some("b1")
    );
    assert_eq!(cs.project("http://b/").map(|p| p.files.len()), Some(1));
    assert!(parsed
        .warnings
        .iter()
        .any(|w| w.element == "app" && w.line == 2));
}

#[test]
fn projects_are_found_as_the_official_client_finds_them() {
    let doc = "<client_state>\n\
        <project><master_url>https://www.example.org/proj/</master_url></project>\n\
        <project><master_url>http://127.0.0.1:18080/</master_url></project>\n\
        </client_state>\n";
    let cs = ClientState::parse(doc, "c.xml").expect("parses").value;
    let found = |u: &str| cs.project(u).map(|p| p.project.master_url.clone());
    for u in [
        "https://www.example.org/proj/",
        "https://www.example.org/proj",
        "http://example.org/proj",
        "example.org/proj",
        "HTTPS://WWW.Example.org//proj",
    ] {
        assert_eq!(
            found(u).as_deref(),
            Some("https://www.example.org/proj/"),
            "{u}"
        );
    }
    assert_eq!(
        found("http://127.0.0.1:18080").as_deref(),
        Some("http://127.0.0.1:18080/")
    );
    assert_eq!(found("https://example.org/other"), None);
    assert_eq!(found("http://127.0.0.1:18081/"), None);
}

// ---- bad input ----

fn sample() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/state/02_tasks_running_client_state.xml"
    ))
    .expect("fixture")
}

#[test]
fn truncated_file_names_the_open_element_and_line() {
    let text = sample();
    let cut = text.find("<name>wu_abort_0</name>").expect("marker") + "<name>wu_ab".len();
    let err = ClientState::parse(&text[..cut], "client_state.xml").expect_err("truncated");
    let line = text[..cut].lines().count();
    match &err {
        XmlError::Truncated {
            element,
            line: l,
            file,
        } => {
            assert_eq!(element, "name");
            assert_eq!(*l, line);
            assert_eq!(&**file, "client_state.xml");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("<name>"), "{err}");
}

#[test]
fn garbage_in_the_middle_is_an_error_with_its_line() {
    let text = sample();
    let at = text.find("<workunit>").expect("marker");
    let line = text[..at].lines().count() + 1;
    let bad = format!(
        "{}<workunit>\n</oops>\x01\x02 garbage <<>>\n{}",
        &text[..at],
        &text[at..]
    );
    let err = ClientState::parse(&bad, "client_state.xml").expect_err("garbage");
    match err {
        XmlError::Malformed { line: l, .. } => assert!(
            (line..=line + 1).contains(&l),
            "error at line {l}, garbage at {line}"
        ),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn future_elements_are_kept_and_warned() {
    let text = sample()
        .replace(
            "<project_name>Fixture Project</project_name>",
            "<project_name>Fixture Project</project_name>\n    <quantum_share mode=\"x\">3</quantum_share>",
        )
        .replace("</client_state>", "<future_block><a>1</a><b/></future_block>\n</client_state>")
        .replace("<status>1</status>", "<status>1</status>\n    <hash_sha256>ab</hash_sha256>");
    let parsed = ClientState::parse(&text, "c.xml").expect("parses");
    let cs = &parsed.value;
    assert_eq!(
        cs.projects[0].project.extra,
        ["<quantum_share mode=\"x\">3</quantum_share>"]
    );
    assert_eq!(cs.extra, ["<future_block><a>1</a><b/></future_block>"]);
    assert!(cs.projects[0]
        .files
        .iter()
        .filter(|f| f.status == 1)
        .all(|f| f.extra == ["<hash_sha256>ab</hash_sha256>"]));
    let names: Vec<_> = parsed.warnings.iter().map(|w| w.element.as_str()).collect();
    assert!(
        names.contains(&"quantum_share") && names.contains(&"future_block"),
        "{names:?}"
    );
    // Written back, and read back the same.
    let out = cs.to_xml();
    assert!(out.contains("<quantum_share mode=\"x\">3</quantum_share>"));
    assert!(out.contains("<future_block><a>1</a><b/></future_block>\n</client_state>"));
    assert_eq!(&ClientState::parse(&out, "o").expect("reparses").value, cs);
}

#[test]
fn a_huge_unknown_element_is_dropped_with_a_warning() {
    let big = "y".repeat(50 << 20);
    let text = sample().replace(
        "<net_stats>",
        &format!("<huge_blob>{big}</huge_blob>\n<net_stats>"),
    );
    let parsed = ClientState::parse(&text, "c.xml").expect("parses");
    assert!(parsed.value.extra.is_empty());
    assert!(parsed
        .warnings
        .iter()
        .any(|w| w.element == "huge_blob" && w.message.contains("dropped")));
    assert_eq!(
        parsed.value.projects[0].results.len(),
        3,
        "the rest is read"
    );
    assert!(parsed.value.to_xml().len() < 100_000);
}

#[test]
fn wrong_types_in_numbers_warn_and_use_defaults() {
    let text = sample()
        .replace("<rpc_seqno>0</rpc_seqno>", "<rpc_seqno>lots</rpc_seqno>")
        .replace(
            "<resource_share>100.000000</resource_share>",
            "<resource_share>big</resource_share>",
        )
        .replace("<slot>1</slot>", "<slot>-4</slot>")
        .replace("<on_frac>1.000000</on_frac>", "<on_frac>7</on_frac>")
        .replace(
            "<rsc_fpops_est>10000000000.000000</rsc_fpops_est>",
            "<rsc_fpops_est>fast</rsc_fpops_est>",
        );
    let parsed = ClientState::parse(&text, "c.xml").expect("parses");
    let cs = &parsed.value;
    assert_eq!(cs.projects[0].project.rpc_seqno, 0);
    assert_eq!(cs.projects[0].project.resource_share, 100.0);
    assert_eq!(cs.active_tasks[0].slot, 0, "negative slot clamped");
    assert_eq!(cs.time_stats.on_frac, 1.0, "fraction clamped");
    assert!(cs.projects[0]
        .workunits
        .iter()
        .all(|w| w.rsc_fpops_est == 6.048e14));
    let elements: Vec<_> = parsed.warnings.iter().map(|w| w.element.as_str()).collect();
    for e in [
        "rpc_seqno",
        "resource_share",
        "slot",
        "on_frac",
        "rsc_fpops_est",
    ] {
        assert!(elements.contains(&e), "{e} not warned: {elements:?}");
    }
    let w = parsed
        .warnings
        .iter()
        .find(|w| w.element == "rpc_seqno")
        .expect("warned");
    assert!(w.to_string().starts_with("c.xml:"), "{w}");
    assert!(w.message.contains("'lots'"), "{w}");
}

#[test]
fn missing_mandatory_elements_are_errors_naming_element_and_line() {
    let doc =
        "<client_state>\n<project>\n<project_name>x</project_name>\n</project>\n</client_state>";
    let err = ClientState::parse(doc, "c.xml").expect_err("no master_url");
    assert_eq!(
        err.to_string(),
        "c.xml:2: <project> has no <master_url>, which it must have"
    );
    let doc = "<client_state>\n<project><master_url>u</master_url></project>\n<result>\n<state>2</state></result>\n</client_state>";
    let err = ClientState::parse(doc, "c.xml").expect_err("no name");
    assert_eq!(
        err.to_string(),
        "c.xml:3: <result> has no <name>, which it must have"
    );
}

// ---- generated states ----

mod generated {
    use super::*;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        // Printable text with XML specials, no leading/trailing white space.
        "[a-zA-Z0-9_<>&\"' .:/-]{0,12}".prop_map(|s| s.trim().to_owned())
    }

    fn name() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9_.]{0,15}"
    }

    /// Doubles as BOINC writes them: six decimals survive the round trip.
    fn f6() -> impl Strategy<Value = f64> {
        (0i64..4_000_000_000_000).prop_map(|n| n as f64 / 1e6)
    }

    fn file_ref() -> impl Strategy<Value = FileRef> {
        (name(), prop::option::of(name()), any::<[bool; 3]>()).prop_map(|(f, o, b)| FileRef {
            file_name: f,
            open_name: o.unwrap_or_default(),
            main_program: b[0],
            copy_file: b[1],
            optional: b[2],
            extra: Vec::new(),
        })
    }

    fn file_info() -> impl Strategy<Value = FileInfo> {
        (
            name(),
            f6(),
            f6(),
            -200i32..3,
            any::<[bool; 6]>(),
            prop::collection::vec(text(), 0..3),
            prop::collection::vec(text(), 0..2),
            prop::option::of("[0-9a-f]{8}\n\\."),
            prop::option::of(text()),
        )
            .prop_map(|(n, nb, mx, st, b, dl, ul, sig, err)| FileInfo {
                name: n,
                nbytes: nb,
                max_nbytes: mx,
                md5_cksum: if b[5] {
                    "0123456789abcdef0123456789abcdef".into()
                } else {
                    String::new()
                },
                status: st,
                executable: b[0],
                uploaded: b[1],
                sticky: b[2],
                gzip_when_done: b[3],
                signature_required: b[4],
                file_signature: sig.clone(),
                xml_signature: sig,
                download_urls: dl.into_iter().filter(|s| !s.is_empty()).collect(),
                upload_urls: ul.into_iter().filter(|s| !s.is_empty()).collect(),
                error_msg: err,
                ..FileInfo::default()
            })
    }

    fn app_version() -> impl Strategy<Value = AppVersion> {
        (
            name(),
            1i32..2000,
            prop::option::of(name()),
            prop::collection::vec(file_ref(), 0..3),
            f6(),
            any::<[bool; 3]>(),
        )
            .prop_map(|(app, v, pc, refs, flops, b)| AppVersion {
                app_name: app,
                version_num: v,
                platform: "x86_64-pc-linux-gnu".into(),
                plan_class: pc.unwrap_or_default(),
                api_version: "8.0.0".into(),
                file_refs: refs,
                usage: ResourceUsage {
                    avg_ncpus: 1.0,
                    flops,
                    coprocs: Vec::new(),
                    gpu_ram: 0.0,
                },
                dont_throttle: b[0],
                is_wrapper: b[1],
                needs_network: b[2],
                ..AppVersion::default()
            })
    }

    fn workunit() -> impl Strategy<Value = Workunit> {
        (
            name(),
            name(),
            f6(),
            text(),
            prop::collection::vec(file_ref(), 0..3),
        )
            .prop_map(|(n, app, est, cmd, refs)| Workunit {
                name: n,
                app_name: app,
                version_num: 100,
                rsc_fpops_est: est + 1.0,
                command_line: cmd,
                input_files: refs,
                ..Workunit::default()
            })
    }

    fn result() -> impl Strategy<Value = TaskResult> {
        (
            name(),
            name(),
            0usize..8,
            (f6(), f6(), -300i32..300),
            any::<[bool; 4]>(),
            (f6(), f6(), f6()),
            "[a-z <>&\n]{0,40}",
            prop::collection::vec(file_ref(), 0..2),
        )
            .prop_map(
                |(n, wu, st, (cpu, el, exit), b, (done, dl, rcv), stderr, outs)| {
                    let state = ResultState::ALL[st];
                    // The reader's sanity rule applies to these combinations; keep them valid.
                    let reported_ok = !(b[0] || b[1]) || !matches!(st, 0 | 1 | 2 | 4);
                    TaskResult {
                        name: n,
                        wu_name: wu,
                        platform: "x86_64-pc-linux-gnu".into(),
                        version_num: 100,
                        final_cpu_time: cpu,
                        final_elapsed_time: el,
                        exit_status: exit,
                        state,
                        got_server_ack: b[0] && reported_ok,
                        ready_to_report: b[1] && reported_ok,
                        suspended_via_gui: b[2],
                        report_immediately: b[3],
                        completed_time: done,
                        report_deadline: dl,
                        received_time: rcv,
                        stderr_out: stderr.trim().to_owned(),
                        output_files: outs,
                        final_peak_working_set_size: (cpu * 1e6).round(),
                        ..TaskResult::default()
                    }
                },
            )
    }

    fn project_state() -> impl Strategy<Value = ProjectState> {
        (
            (
                name(),
                text(),
                0i32..1_000_000,
                0i32..1000,
                f6(),
                0i32..8,
                any::<[bool; 5]>(),
            ),
            prop::collection::vec((name(), text()), 0..3),
            prop::collection::vec(file_info(), 0..4),
            prop::collection::vec(app_version(), 0..3),
            prop::collection::vec(workunit(), 0..4),
            prop::collection::vec(result(), 0..5),
            prop::collection::vec(file_ref(), 0..2),
        )
            .prop_map(
                |(
                    (url, pname, hostid, seq, share, reason, b),
                    apps,
                    files,
                    avs,
                    wus,
                    results,
                    pf,
                )| {
                    ProjectState {
                        project: Project {
                            master_url: format!("https://{url}/"),
                            project_name: pname,
                            hostid,
                            rpc_seqno: seq,
                            resource_share: share.min(1e9),
                            sched_rpc_pending: RpcReason::from_i32(reason),
                            dont_request_more_work: b[0],
                            suspended_via_gui: b[1],
                            master_url_fetch_pending: b[2],
                            dont_use_dcf: b[3],
                            ended: b[4],
                            scheduler_urls: vec![format!("https://{url}/cgi")],
                            code_sign_key: b[0].then(|| "1024\nabcdef\n.".to_owned()),
                            no_rsc_apps: if b[1] {
                                vec!["NVIDIA".into()]
                            } else {
                                Vec::new()
                            },
                            ..Project::default()
                        },
                        apps: apps
                            .into_iter()
                            .map(|(n, f)| App {
                                user_friendly_name: if f.is_empty() { n.clone() } else { f },
                                name: n,
                                ..App::default()
                            })
                            .collect(),
                        files,
                        app_versions: avs,
                        workunits: wus,
                        results,
                        project_files: pf,
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn write_then_parse_is_identity(
            projects in prop::collection::vec(project_state(), 0..4),
            run in 1i32..4,
            venue in prop::option::of(name()),
            alt in prop::collection::vec(name(), 0..3),
        ) {
            let mut cs = ferrite_proto::client_state::synthetic(1, 3);
            cs.projects.extend(projects);
            cs.user_run_request = RunMode::from_i32(run).unwrap_or_default();
            cs.host_venue = venue.unwrap_or_default();
            cs.alt_platforms = alt;
            let xml = cs.to_xml();
            let back = ClientState::parse(&xml, "gen.xml").expect("parses");
            prop_assert!(back.warnings.is_empty(), "{:?}", back.warnings);
            prop_assert_eq!(back.value, cs);
        }
    }
}

#[test]
fn synthetic_state_has_the_requested_size_and_round_trips() {
    let cs = ferrite_proto::client_state::synthetic(20, 1000);
    assert_eq!(cs.projects.len(), 20);
    assert_eq!(cs.results().count(), 1000);
    let xml = cs.to_xml();
    let back = ClientState::parse(&xml, "s.xml").expect("parses");
    assert!(back.warnings.is_empty());
    assert_eq!(back.value, cs);
}

#[test]
fn the_leaf_comparison_notices_a_lost_field() {
    let text = sample();
    let out = ClientState::parse(&text, "c")
        .expect("parses")
        .value
        .to_xml();
    let damaged = out
        .replace("<hostid>7</hostid>", "")
        .replace("<dont_use_dcf/>", "");
    let missing = common::missing_leaves(
        &common::leaves(&text, &state_rename),
        &common::leaves(&damaged, &state_rename),
        &[],
    );
    let paths: Vec<_> = missing.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "client_state/project/hostid",
            "client_state/project/dont_use_dcf"
        ]
    );
}

#[test]
fn projects_sort_by_name_ignoring_case_as_the_official_client() {
    let project = |name: &str, url: &str| ProjectState {
        project: Project {
            master_url: url.to_owned(),
            project_name: name.to_owned(),
            ..Project::default()
        },
        ..ProjectState::default()
    };
    let mut s = ClientState {
        projects: vec![
            project("zeta", "http://z/"),
            project("Alpha", "http://a/"),
            project("", "http://new/"),
            project("beta", "http://b2/"),
            project("Beta", "http://b1/"),
            project("alpha2", "http://a2/"),
        ],
        ..ClientState::default()
    };
    s.sort_projects_by_name();
    let urls: Vec<&str> = s
        .projects
        .iter()
        .map(|p| p.project.master_url.as_str())
        .collect();
    // Unnamed first; "Alpha" < "alpha2" < "beta" = "Beta" (kept in order) < "zeta".
    assert_eq!(
        urls,
        [
            "http://new/",
            "http://a/",
            "http://a2/",
            "http://b2/",
            "http://b1/",
            "http://z/"
        ]
    );
}
