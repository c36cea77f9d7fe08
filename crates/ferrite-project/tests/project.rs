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
    // Alternate platforms go out unless cc_config no_alt_platform says not to.
    let mut with_alt = state.clone();
    with_alt.alt_platforms = vec!["i686-pc-linux-gnu".into()];
    assert_eq!(
        build_request(&with_alt, &input).unwrap().alt_platforms,
        ["i686-pc-linux-gnu"]
    );
    let main_only = RequestInput {
        no_alt_platforms: true,
        ..input.clone()
    };
    assert!(build_request(&with_alt, &main_only)
        .unwrap()
        .alt_platforms
        .is_empty());
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

mod reply {
    use super::fixture;
    use ferrite_project::reply::{
        apply_reply, check_invariants, ApplyOptions, Event, ObjectKind, RefusalReason,
    };
    use ferrite_project::verify::{BoincCrypt, SignatureVerifier};
    use ferrite_proto::client_state::{ClientState, ProjectState, ResultState};
    use ferrite_proto::sched_reply::SchedulerReply;

    pub const URL: &str = "http://127.0.0.1/test/";
    pub const NOW: f64 = 1_795_333_000.0;

    /// The state right after `project_attach`: the project with its scheduler URL only.
    pub fn attached_state() -> ClientState {
        let mut ps = ProjectState::default();
        ps.project.master_url = URL.into();
        ps.project.scheduler_urls = vec!["http://127.0.0.1/test_cgi/cgi".into()];
        ps.project.sched_rpc_pending = Some(ferrite_proto::client_state::RpcReason::Init);
        let mut s = ClientState {
            projects: vec![ps],
            platform_name: "x86_64-pc-linux-gnu".into(),
            ..ClientState::default()
        };
        s.host_info.p_fpops = 3e9;
        s
    }

    pub fn parse(name: &str) -> SchedulerReply {
        SchedulerReply::parse(&fixture(name), name).unwrap().value
    }

    pub fn after_attach() -> ClientState {
        let mut s = attached_state();
        apply_reply(
            &mut s,
            URL,
            &parse("sched_reply_attach.xml"),
            NOW,
            &ApplyOptions::default(),
            &BoincCrypt,
        )
        .unwrap();
        s
    }

    #[test]
    fn attach_then_report_replies_from_a_real_server() {
        let mut s = attached_state();
        let out = apply_reply(
            &mut s,
            URL,
            &parse("sched_reply_attach.xml"),
            NOW,
            &ApplyOptions::default(),
            &BoincCrypt,
        )
        .unwrap();
        let ps = &s.projects[0];
        let p = &ps.project;
        assert_eq!(p.project_name, "Test@Loopback");
        assert_eq!((p.hostid, p.rpc_seqno), (1, 0));
        assert_eq!(p.user_name, "tester");
        assert_eq!(p.cross_project_id, "3456fb39d883eab131e143fcee3d3991");
        assert_eq!(p.min_rpc_time, NOW + 7.0);
        assert_eq!(p.next_rpc_time, 0.0);
        assert!(p.dont_use_dcf);
        assert_eq!(p.sched_rpc_pending, None);
        assert_eq!(p.last_rpc_time, NOW);
        assert_eq!(s.user_cpids.len(), 1);
        let key = p.code_sign_key.clone().unwrap();
        assert_eq!(key.trim(), fixture("code_sign_public").trim());
        assert!(out.events.contains(&Event::CodeSignKeyAccepted));
        assert!(out.events.contains(&Event::HostIdAssigned {
            old: 0,
            new: 1,
            new_host_cpid: false
        }));
        assert!(out.refusals.is_empty(), "{:?}", out.refusals);
        assert!(out.gui_urls.is_some() && out.rss_feeds.is_some());
        assert_eq!(out.scheduler_version, Some(803));

        assert_eq!(ps.apps.len(), 1);
        assert_eq!(ps.apps[0].user_friendly_name, "Upper case (example app)");
        let exe = ps.file("upper_case_1.0_x86_64-pc-linux-gnu").unwrap();
        assert!(exe.executable && exe.signature_required);
        assert_eq!(exe.status, 0);
        // The executable's signature, checked with the project's key against the MD5 of
        // the real 3,156,880-byte file (from the fixture's README).
        let sig = exe.file_signature.as_deref().unwrap();
        assert!(BoincCrypt.verify_md5(&key, "e28157c92a1ca0fe0653c0aaa34eb874", sig));
        assert!(!BoincCrypt.verify_md5(&key, "e28157c92a1ca0fe0653c0aaa34eb875", sig));
        let input = ps.file("uc_in_9.txt").unwrap();
        assert!(!input.signature_required);
        let output = ps.file("uc_wu_9_0_r488497178_0").unwrap();
        assert_eq!(output.max_nbytes, 5e6);
        assert_eq!(output.upload_urls.len(), 1);
        assert!(output.download_urls.is_empty());
        assert_eq!(
            out.events
                .iter()
                .filter_map(|e| match e {
                    Event::Download {
                        file,
                        signature_pending,
                    } => Some((file.as_str(), *signature_pending)),
                    _ => None,
                })
                .collect::<Vec<_>>(),
            [
                ("upper_case_1.0_x86_64-pc-linux-gnu", true),
                ("uc_in_9.txt", false)
            ]
        );
        let av = &ps.app_versions[0];
        assert_eq!((av.version_num, av.usage.avg_ncpus), (100, 1.0));
        let wu = ps.workunit("uc_wu_9").unwrap();
        assert_eq!(wu.input_files[0].open_name, "in");
        assert_eq!(wu.rsc_fpops_est, 3.6e12);
        let r = ps.result("uc_wu_9_0").unwrap();
        assert_eq!(r.state, ResultState::New);
        assert_eq!(r.received_time, NOW);
        assert_eq!(r.report_deadline, 1_795_937_839.0);
        assert_eq!(r.version_num, 100);
        assert_eq!(out.tasks_added.get("CPU"), Some(&1));
        check_invariants(ps).unwrap();

        // The task ran and was uploaded; the next reply acknowledges it and sends another.
        {
            let r = s.projects[0].result_mut("uc_wu_9_0").unwrap();
            r.state = ResultState::FilesUploaded;
            r.ready_to_report = true;
        }
        for f in &mut s.projects[0].files {
            f.status = 1;
        }
        s.projects[0].project.rpc_seqno = 2;
        let out = apply_reply(
            &mut s,
            URL,
            &parse("sched_reply_report.xml"),
            NOW + 100.0,
            &ApplyOptions::default(),
            &BoincCrypt,
        )
        .unwrap();
        let ps = &s.projects[0];
        assert!(out.events.contains(&Event::Acked("uc_wu_9_0".into())));
        assert!(ps.result("uc_wu_9_0").unwrap().got_server_ack);
        let new = ps.result("uc_wu_8_0").unwrap();
        assert_eq!(new.received_time, NOW + 100.0);
        assert_eq!(new.report_deadline, 1_795_937_863.0);
        assert_eq!(ps.project.rpc_seqno, 2, "no hostid in this reply");
        assert_eq!(ps.project.code_sign_key.as_deref(), Some(key.as_str()));
        assert_eq!(ps.apps.len(), 1);
        assert_eq!(ps.app_versions.len(), 1);
        assert_eq!(out.tasks_added.get("CPU"), Some(&1));
        assert!(!out
            .events
            .iter()
            .any(|e| matches!(e, Event::Download { file, .. } if file.starts_with("upper_case"))));
        check_invariants(ps).unwrap();
    }

    #[test]
    fn hostile_names_error_the_job_and_are_never_stored() {
        let mut s = attached_state();
        let mut reply = parse("sched_reply_attach.xml");
        for (i, bad) in ["../x", "/etc/passwd", "a/b", "in\0put"].iter().enumerate() {
            let mut f = reply.file_infos[1].clone();
            f.name = (*bad).to_owned();
            reply.file_infos.push(f);
            let mut wu = reply.workunits[0].clone();
            wu.name = format!("wu_{i}");
            wu.input_files[0].file_name = (*bad).to_owned();
            reply.workunits.push(wu);
            let mut r = reply.results[0].clone();
            r.name = format!("r_{i}");
            r.wu_name = format!("wu_{i}");
            reply.results.push(r);
        }
        // A hostile open name in an otherwise good workunit.
        let mut wu = reply.workunits[0].clone();
        wu.name = "wu_open".into();
        wu.input_files[0].open_name = "../../.bashrc".into();
        reply.workunits.push(wu);
        let out = apply_reply(
            &mut s,
            URL,
            &reply,
            NOW,
            &ApplyOptions::default(),
            &BoincCrypt,
        )
        .unwrap();
        let ps = &s.projects[0];
        for bad in ["../x", "/etc/passwd", "a/b", "in\0put"] {
            assert!(ps.file(bad).is_none(), "{bad:?} stored");
            assert!(out.refusals.iter().any(|r| r.kind == ObjectKind::File
                && r.name == bad
                && matches!(r.reason, RefusalReason::BadName(_))));
        }
        for i in 0..4 {
            assert!(ps.workunit(&format!("wu_{i}")).is_none());
            assert!(ps.result(&format!("r_{i}")).is_none());
            assert!(out.refusals.iter().any(|r| r.kind == ObjectKind::Result
                && r.name == format!("r_{i}")
                && r.reason == RefusalReason::UnknownWorkunit(format!("wu_{i}"))));
        }
        assert!(out.refusals.iter().any(|r| r.name == "wu_open"
            && matches!(&r.reason, RefusalReason::BadReference { name, .. } if name == "../../.bashrc")));
        // The good job is unaffected.
        assert!(ps.result("uc_wu_9_0").is_some());
        check_invariants(ps).unwrap();
    }

    fn key_pair(seed: u64) -> ferrite_proto::crypt::PrivateKey {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        ferrite_proto::crypt::PrivateKey::generate(&mut rng, 1024).unwrap()
    }

    #[test]
    fn code_sign_key_rollover_needs_the_old_keys_signature() {
        let old = key_pair(1);
        let new = key_pair(2);
        let old_text = old.public_key().to_text();
        let new_text = new.public_key().to_text();
        let mut s = attached_state();
        s.projects[0].project.code_sign_key = Some(old_text.trim().to_owned());
        let reply = |sig: Option<String>| SchedulerReply {
            code_sign_key: Some(new_text.trim().to_owned()),
            code_sign_key_signature: sig,
            ..SchedulerReply::default()
        };
        let opts = ApplyOptions::default();

        let out = apply_reply(&mut s, URL, &reply(None), NOW, &opts, &BoincCrypt).unwrap();
        assert_eq!(out.refusals[0].reason, RefusalReason::KeyWithoutSignature);
        assert_eq!(
            s.projects[0].project.code_sign_key.as_deref(),
            Some(old_text.trim())
        );

        let self_signed = new.sign(new_text.trim().as_bytes()).unwrap();
        let out = apply_reply(
            &mut s,
            URL,
            &reply(Some(self_signed)),
            NOW,
            &opts,
            &BoincCrypt,
        )
        .unwrap();
        assert_eq!(out.refusals[0].reason, RefusalReason::KeyBadSignature);
        assert_eq!(
            s.projects[0].project.code_sign_key.as_deref(),
            Some(old_text.trim())
        );

        let good = old.sign(new_text.trim().as_bytes()).unwrap();
        let out = apply_reply(&mut s, URL, &reply(Some(good)), NOW, &opts, &BoincCrypt).unwrap();
        assert!(out.refusals.is_empty());
        assert!(out.events.contains(&Event::CodeSignKeyChanged));
        assert_eq!(
            s.projects[0].project.code_sign_key.as_deref(),
            Some(new_text.trim())
        );
    }

    #[test]
    fn unsigned_app_file_is_put_in_error_unless_allowed() {
        let mut reply = parse("sched_reply_attach.xml");
        reply.file_infos[0].file_signature = None;
        let mut s = attached_state();
        let out = apply_reply(
            &mut s,
            URL,
            &reply,
            NOW,
            &ApplyOptions::default(),
            &BoincCrypt,
        )
        .unwrap();
        let f = s.projects[0]
            .file("upper_case_1.0_x86_64-pc-linux-gnu")
            .unwrap();
        assert_eq!(f.status, -123);
        assert!(out
            .events
            .iter()
            .any(|e| matches!(e, Event::FileError { status: -123, .. })));
        let mut s = attached_state();
        let opts = ApplyOptions {
            unsigned_apps_ok: true,
            ..ApplyOptions::default()
        };
        let out = apply_reply(&mut s, URL, &reply, NOW, &opts, &BoincCrypt).unwrap();
        assert_eq!(
            s.projects[0]
                .file("upper_case_1.0_x86_64-pc-linux-gnu")
                .unwrap()
                .status,
            0
        );
        assert!(out.events.contains(&Event::Download {
            file: "upper_case_1.0_x86_64-pc-linux-gnu".into(),
            signature_pending: false
        }));
    }

    #[test]
    fn aborts_acks_delays_and_down_project() {
        let mut s = after_attach();
        s.active_tasks
            .push(ferrite_proto::client_state::ActiveTask {
                project_master_url: URL.into(),
                result_name: "uc_wu_9_0".into(),
                ..Default::default()
            });
        let reply = SchedulerReply {
            result_aborts: vec!["uc_wu_9_0".into(), "nope".into()],
            next_rpc_delay: Some(3600.0),
            hostid: Some(5),
            ..SchedulerReply::default()
        };
        let out = apply_reply(
            &mut s,
            URL,
            &reply,
            NOW,
            &ApplyOptions::default(),
            &BoincCrypt,
        )
        .unwrap();
        assert_eq!(out.events[0], Event::AbortRunning("uc_wu_9_0".into()));
        assert!(out.events.contains(&Event::HostIdAssigned {
            old: 1,
            new: 5,
            new_host_cpid: true
        }));
        let p = &s.projects[0].project;
        assert_eq!(
            (p.next_rpc_time, p.min_rpc_time, p.rpc_seqno),
            (NOW + 3600.0, 0.0, 0)
        );
        s.active_tasks.clear();
        let reply = SchedulerReply {
            result_abort_if_not_started: vec!["uc_wu_9_0".into()],
            ..SchedulerReply::default()
        };
        let out = apply_reply(
            &mut s,
            URL,
            &reply,
            NOW,
            &ApplyOptions::default(),
            &BoincCrypt,
        )
        .unwrap();
        assert_eq!(out.events, [Event::Aborted("uc_wu_9_0".into())]);
        let r = s.projects[0].result("uc_wu_9_0").unwrap();
        assert_eq!(
            (r.state, r.exit_status, r.ready_to_report),
            (ResultState::Aborted, 202, true)
        );

        let down = SchedulerReply {
            project_is_down: true,
            request_delay: Some(600.0),
            project_name: Some("ignored".into()),
            ..SchedulerReply::default()
        };
        let out = apply_reply(
            &mut s,
            URL,
            &down,
            NOW,
            &ApplyOptions::default(),
            &BoincCrypt,
        )
        .unwrap();
        assert!(out.project_down);
        assert_eq!(s.projects[0].project.min_rpc_time, NOW + 600.0);
        assert_eq!(s.projects[0].project.project_name, "Test@Loopback");
    }
}

mod reply_props {
    use super::reply::{after_attach, URL};
    use ferrite_project::reply::{
        apply_reply, apply_task_batch, apply_task_batch_indexed, check_invariants, split_tasks,
        ApplyOptions, BatchIndex,
    };
    use ferrite_proto::client_state::{
        App, AppVersion, CoprocUsage, FileInfo, FileRef, TaskResult, Workunit,
    };
    use ferrite_proto::sched_reply::SchedulerReply;
    use proptest::prelude::*;

    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[a-c]{1,2}",
            1 => Just("../x".to_owned()),
            1 => Just("/etc/passwd".to_owned()),
            1 => Just("a/b".to_owned()),
            1 => Just("\0".to_owned()),
            1 => Just(String::new()),
            1 => Just("upper_case".to_owned()),
            1 => Just("uc_wu_9".to_owned()),
            1 => Just("uc_in_9.txt".to_owned()),
        ]
    }

    fn num() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(-1.0),
            Just(0.0),
            0.0..1e12f64
        ]
    }

    fn file_ref() -> impl Strategy<Value = FileRef> {
        (name(), name()).prop_map(|(f, o)| FileRef {
            file_name: f,
            open_name: o,
            ..FileRef::default()
        })
    }

    prop_compose! {
        fn reply()(
            apps in prop::collection::vec(name(), 0..3),
            files in prop::collection::vec((name(), num(), any::<bool>(), prop::option::of("[0-9a-f]{4}")), 0..4),
            avs in prop::collection::vec((name(), 0..3i32, prop::collection::vec(file_ref(), 0..2), num(), prop::option::of(prop_oneof![Just("NVIDIA"), Just("CUDA"), Just("ATI")])), 0..3),
            wus in prop::collection::vec((name(), name(), prop::collection::vec(file_ref(), 0..2), num()), 0..3),
            results in prop::collection::vec((name(), name(), num(), prop_oneof![Just(String::new()), Just("x86_64-pc-linux-gnu".to_owned()), Just("other".to_owned())], 0..3i32, prop::collection::vec(file_ref(), 0..2)), 0..4),
            acks in prop::collection::vec(name(), 0..3),
            aborts in prop::collection::vec(name(), 0..3),
            hostid in prop::option::of(-2..3i32),
            delays in (prop::option::of(num()), prop::option::of(num())),
            key in prop::option::of("[0-9a-f ]{0,10}"),
            down in prop::bool::weighted(0.1),
        ) -> SchedulerReply {
            SchedulerReply {
                apps: apps.into_iter().map(|n| App { name: n, ..App::default() }).collect(),
                file_infos: files.into_iter().map(|(n, b, exe, sig)| FileInfo {
                    name: n,
                    nbytes: b,
                    executable: exe,
                    file_signature: sig,
                    download_urls: vec!["http://x/f".into()],
                    status: 1,
                    ..FileInfo::default()
                }).collect(),
                app_versions: avs.into_iter().map(|(app, v, refs, flops, gpu)| {
                    let mut av = AppVersion {
                        app_name: app,
                        version_num: v,
                        file_refs: refs,
                        ..AppVersion::default()
                    };
                    av.usage.flops = flops;
                    av.usage.avg_ncpus = flops;
                    if let Some(g) = gpu {
                        av.usage.coprocs.push(CoprocUsage { rsc_type: g.into(), count: 1.0 });
                    }
                    av
                }).collect(),
                workunits: wus.into_iter().map(|(n, app, refs, est)| Workunit {
                    name: n,
                    app_name: app,
                    input_files: refs,
                    rsc_fpops_est: est,
                    ..Workunit::default()
                }).collect(),
                results: results.into_iter().map(|(n, wu, dl, platform, v, refs)| TaskResult {
                    name: n,
                    wu_name: wu,
                    report_deadline: dl,
                    platform,
                    version_num: v,
                    output_files: refs,
                    state: ferrite_proto::client_state::ResultState::UploadFailed,
                    ..TaskResult::default()
                }).collect(),
                result_acks: acks,
                result_aborts: aborts.clone(),
                result_abort_if_not_started: aborts,
                hostid,
                request_delay: delays.0,
                next_rpc_delay: delays.1,
                code_sign_key: key,
                project_is_down: down,
                ..SchedulerReply::default()
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn arbitrary_replies_never_panic_and_keep_invariants(
            replies in prop::collection::vec(reply(), 1..4),
            now in num(),
        ) {
            let mut s = after_attach();
            let verify = |_: &str, _: &str, _: &str| false;
            for r in &replies {
                let out = apply_reply(&mut s, URL, r, now, &ApplyOptions::default(), &verify);
                prop_assert!(out.is_ok());
                let ps = &s.projects[0];
                prop_assert_eq!(check_invariants(ps), Ok(()));
                for f in &ps.files {
                    prop_assert!(ferrite_project::names::check_file_name(&f.name).is_ok());
                }
                for r in &ps.results {
                    prop_assert!(ferrite_project::names::check_object_name(&r.name).is_ok());
                }
            }
        }

        /// A reply split into batches and applied batch after batch leaves the project as
        /// the whole reply applied at once: the same results in the same order, the same
        /// files and workunits, the same tasks added and refusals.
        #[test]
        fn a_reply_applied_in_batches_equals_the_reply_applied_at_once(
            first in reply(),
            r in reply(),
            size in 1..3usize,
            now in num(),
        ) {
            let verify = |_: &str, _: &str, _: &str| false;
            let opts = ApplyOptions::default();
            let mut whole = after_attach();
            let _ = apply_reply(&mut whole, URL, &first, now - 1.0, &opts, &verify);
            let mut split = whole.clone();
            let all = apply_reply(&mut whole, URL, &r, now, &opts, &verify).unwrap();
            let mut head = r.clone();
            let batches = split_tasks(&mut head, size);
            prop_assert!(head.results.len() <= r.results.len());
            let mut indexed = split.clone();
            let mut parts = apply_reply(&mut split, URL, &head, now, &opts, &verify).unwrap();
            let _ = apply_reply(&mut indexed, URL, &head, now, &opts, &verify).unwrap();
            if !parts.project_down {
                // The index kept from batch to batch gives what one made afresh does.
                let mut index = BatchIndex::default();
                for b in &batches {
                    prop_assert!(b.results.len() <= size);
                    let o = apply_task_batch(&mut split, URL, b, now, &opts, &verify).unwrap();
                    let p = apply_task_batch_indexed(
                        &mut indexed, URL, b, now, &opts, &verify, &mut index,
                    )
                    .unwrap();
                    prop_assert_eq!(format!("{o:?}"), format!("{p:?}"));
                    parts.absorb(o);
                }
                prop_assert_eq!(format!("{split:?}"), format!("{indexed:?}"));
            }
            let (a, b) = (&whole.projects[0], &split.projects[0]);
            // (compared as text: a NaN time is equal to itself there)
            prop_assert_eq!(format!("{:?}", a.results), format!("{:?}", b.results));
            let by_name = |v: &mut Vec<String>| { v.sort(); v.clone() };
            prop_assert_eq!(
                by_name(&mut a.files.iter().map(|f| format!("{f:?}")).collect()),
                by_name(&mut b.files.iter().map(|f| format!("{f:?}")).collect())
            );
            prop_assert_eq!(
                by_name(&mut a.workunits.iter().map(|w| format!("{w:?}")).collect()),
                by_name(&mut b.workunits.iter().map(|w| format!("{w:?}")).collect())
            );
            prop_assert_eq!(format!("{:?}", a.project), format!("{:?}", b.project));
            prop_assert_eq!(&all.tasks_added, &parts.tasks_added);
            prop_assert_eq!(all.refusals.len(), parts.refusals.len());
            prop_assert_eq!(check_invariants(b), Ok(()));
        }
    }
}

#[test]
fn upload_request_matches_the_official_clients_bytes() {
    use ferrite_project::files::{file_upload_header, parse_upload_reply, UploadStatus};
    use ferrite_proto::client_state::{ClientVersion, FileInfo};
    let official = fixture("upload_request_body.txt");
    let cert = between(&official, "<xml_signature>", "</xml_signature>").trim();
    let data = "hello from the fixture app, slept 5 s\n";
    let md5 = ferrite_proto::crypt::md5_hex(data.as_bytes());
    assert_eq!(md5, "31ad9bd0148c02a8e150f1b9d846363e");
    let file = FileInfo {
        name: "wu_short_0_out".into(),
        max_nbytes: 100_000.0,
        xml_signature: Some(cert.to_owned()),
        ..FileInfo::default()
    };
    let v = ClientVersion {
        major: 7,
        minor: 20,
        release: 5,
    };
    let header = file_upload_header(v, &file, data.len() as u64, &md5, 0);
    assert_eq!(format!("{header}{data}"), official);
    let reply = parse_upload_reply(&fixture("upload_reply.xml"));
    assert_eq!(reply.status, UploadStatus::Success);
    assert_eq!(reply.file_size, None);
}

#[test]
fn downloaded_executable_of_the_real_server_verifies_with_its_key() {
    use ferrite_project::files::{verify_download, VerifyError};
    use ferrite_project::verify::BoincCrypt;
    let s = reply::after_attach();
    let ps = &s.projects[0];
    let exe = ps.file("upper_case_1.0_x86_64-pc-linux-gnu").unwrap();
    let key = ps.project.code_sign_key.as_deref();
    let md5 = "e28157c92a1ca0fe0653c0aaa34eb874";
    assert_eq!(
        verify_download(exe, 3_156_880, md5, key, false, &BoincCrypt),
        Ok(())
    );
    assert_eq!(
        verify_download(
            exe,
            3_156_880,
            "e28157c92a1ca0fe0653c0aaa34eb875",
            key,
            false,
            &BoincCrypt
        ),
        Err(VerifyError::BadSignature)
    );
    assert!(matches!(
        verify_download(exe, 3_156_879, md5, key, false, &BoincCrypt),
        Err(VerifyError::WrongSize { .. })
    ));
}

#[test]
fn attach_web_rpcs_match_the_official_clients_requests_and_fixture_replies() {
    use ferrite_project::attach::*;
    let hash = passwd_hash("fixturepw", "Fixture@Example.com");
    assert_eq!(hash, "67aad1aa17372ca3ac95e78dc878da2e");
    // Request lines the official client sent (capture1 003 and 005).
    let base = rpc_base("http://127.0.0.1:18080/", None);
    assert_eq!(
        lookup_account_url(&base, "fixture@example.com", &hash),
        "http://127.0.0.1:18080/lookup_account.php?email_addr=fixture%40example%2Ecom&passwd_hash=67aad1aa17372ca3ac95e78dc878da2e"
    );
    let acct = NewAccount {
        email: "fixture@example.com".into(),
        passwd_hash: hash.clone(),
        user_name: "fixture_user".into(),
        ..NewAccount::default()
    };
    assert_eq!(
        create_account_url(&base, &acct),
        "http://127.0.0.1:18080/create_account.php?email_addr=fixture%40example%2Ecom&passwd_hash=67aad1aa17372ca3ac95e78dc878da2e&user_name=fixture%5Fuser"
    );
    assert_eq!(
        parse_account_reply(&fixture("lookup_account_reply_ok.xml")),
        Ok(AccountReply::Authenticator(
            "0123456789abcdef0123456789abcdef".into()
        ))
    );
    assert_eq!(
        parse_account_reply(&fixture("lookup_account_reply_bad_password.xml")),
        Err(WebRpcError::Project {
            num: -206,
            message: "Invalid password".into()
        })
    );
    let c = parse_project_config(&fixture("get_project_config_reply.xml")).unwrap();
    assert_eq!(c.name, "Fixture Project");
    assert_eq!(c.master_url, "http://127.0.0.1:18080/");
    assert_eq!(c.min_passwd_length, 6);
    assert!(c.account_manager && c.uses_username && c.account_creation_disabled);
    assert!(c.client_account_creation_disabled && !c.web_stopped);
    assert_eq!(c.platforms.len(), 1);
    assert_eq!(c.platforms[0].platform_name, "x86_64-pc-linux-gnu");
    assert_eq!(
        rpc_base("http://other/", Some(&c)),
        "http://127.0.0.1:18080/"
    );
}

/// A reply with thousands of jobs (a broken or hostile server: the HTTP layer accepts
/// replies of up to 64 MiB) is merged whole: every job added, none refused, the state's
/// invariants kept. Name lookups were linear scans once, so 16,000 jobs took seven seconds of
/// a release build; how the time grows with the jobs is `cargo bench -p ferrite-project
/// --bench merge`'s figure, not this test's.
#[test]
fn a_reply_with_thousands_of_jobs_is_merged_in_linear_time() {
    use ferrite_project::reply::{apply_reply, check_invariants, ApplyOptions};
    use ferrite_proto::client_state::ClientState;
    use ferrite_proto::sched_reply::SchedulerReply;

    let one = fixture("sched_reply_one_job_unsigned.xml");
    let start = one
        .find("<file_info>\n    <name>wu_unsigned_in</name>")
        .unwrap();
    let end = one.find("</scheduler_reply>").unwrap();
    let (head, job) = (&one[..start], &one[start..end]);
    let n = 12000;
    let mut text = String::from(head);
    for i in 0..n {
        text.push_str(&job.replace("wu_unsigned", &format!("wu{i}")));
    }
    text.push_str("</scheduler_reply>\n");
    let reply = SchedulerReply::parse(&text, "sched_reply.xml")
        .unwrap()
        .value;
    assert_eq!(reply.results.len(), n);

    let mut state = ClientState::parse(&fixture("state_02_tasks_running.xml"), "state")
        .unwrap()
        .value;
    let before = state.projects[0].results.len();
    let verifier = |_: &str, _: &str, _: &str| true;
    let out = apply_reply(
        &mut state,
        "http://127.0.0.1:18080/",
        &reply,
        1.7e9,
        &ApplyOptions::default(),
        &verifier,
    )
    .unwrap();
    assert!(out.refusals.is_empty(), "{:?}", out.refusals.first());
    let ps = &state.projects[0];
    assert_eq!(ps.results.len(), before + n);
    assert_eq!(out.tasks_added.get("CPU"), Some(&(n as u32)));
    check_invariants(ps).unwrap();
}

/// A reply carrying a server's `project_files.xml` (a `<file_info>` and the `<project_files>`
/// that names it `stat_icon`): the file is kept and fetched, its link appears once it is
/// present, a dangling reference is refused, and a later reply without the list leaves
/// none, as the official client's `handle_scheduler_reply` does.
#[test]
fn a_replys_project_files_are_kept_fetched_and_linked() {
    use ferrite_project::project_files::{links, to_download};
    use ferrite_project::reply::{apply_reply, check_invariants, ApplyOptions, ObjectKind};
    use ferrite_proto::client_state::ClientState;
    use ferrite_proto::sched_reply::SchedulerReply;

    let url = "http://127.0.0.1:18080/";
    let files_xml = "<file_info>\n<name>logo_181.png</name>\n\
        <url>http://127.0.0.1:18080/download/logo_181.png</url>\n<nbytes>3</nbytes>\n\
        <md5_cksum>900150983cd24fb0d6963f7d28e17f72</md5_cksum>\n</file_info>\n\
        <project_files>\n<file_ref>\n<file_name>logo_181.png</file_name>\n\
        <open_name>stat_icon</open_name>\n</file_ref>\n<file_ref>\n\
        <file_name>not_sent.png</file_name>\n<open_name>slideshow_00</open_name>\n\
        </file_ref>\n</project_files>\n";
    let reply = |body: &str| {
        let text = format!(
            "<scheduler_reply>\n<scheduler_version>803</scheduler_version>\n{body}</scheduler_reply>\n"
        );
        SchedulerReply::parse(&text, "sched_reply.xml")
            .unwrap()
            .value
    };
    let mut state = ClientState::parse(&fixture("state_02_tasks_running.xml"), "state")
        .unwrap()
        .value;
    let verifier = |_: &str, _: &str, _: &str| true;
    let opts = ApplyOptions::default();
    let out = apply_reply(&mut state, url, &reply(files_xml), 1.7e9, &opts, &verifier).unwrap();
    // The reference to a file the reply does not describe is refused, the other kept.
    assert_eq!(out.refusals.len(), 1, "{:?}", out.refusals);
    assert_eq!(out.refusals[0].kind, ObjectKind::ProjectFile);
    assert_eq!(out.refusals[0].name, "not_sent.png");
    let ps = state.project_mut(url).unwrap();
    assert_eq!(ps.project_files.len(), 1);
    assert_eq!(ps.project_files[0].open_name, "stat_icon");
    check_invariants(ps).unwrap();
    assert_eq!(to_download(ps), vec!["logo_181.png"]);
    assert!(links(ps, None).is_empty());
    // Downloaded and verified: the link points at it from the data directory.
    ps.file_mut("logo_181.png").unwrap().status = 1;
    let l = links(ps, None);
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].open_name, "stat_icon");
    assert_eq!(
        l[0].text,
        "<soft_link>projects/127.0.0.1_18080/logo_181.png</soft_link>\n"
    );
    // The list survives the state file.
    let again = ClientState::parse(&state.to_xml(), "state").unwrap().value;
    assert_eq!(
        again.project(url).unwrap().project_files,
        state.project(url).unwrap().project_files
    );
    // A reply without the list (the project removed its project_files.xml) leaves none.
    apply_reply(&mut state, url, &reply(""), 1.7e9 + 60.0, &opts, &verifier).unwrap();
    let ps = state.project(url).unwrap();
    assert!(ps.project_files.is_empty());
    assert!(links(ps, None).is_empty());
}
