//! Scheduler RPC documents: real requests and replies (official client 7.20.5, a BOINC 8.3
//! server, the reference captures) round-trip without losing fields; generated ones too.

mod common;

use ferrite_proto::client_state::{
    App, AppVersion, ClientVersion, FileInfo, FileRef, NetStats, ResourceUsage, ResultState,
    TaskResult, TimeStats, Workunit,
};
use ferrite_proto::host::{Coprocs, NvidiaCoproc, RscRequest};
use ferrite_proto::sched_reply::{ReplyMessage, SchedulerReply};
use ferrite_proto::sched_request::{OtherResult, SchedulerRequest};

fn fixtures(prefix: &str) -> Vec<(String, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/scheduler");
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir)
        .expect("fixture dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains(prefix))
        })
        .map(|p| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("read"))
        })
        .collect();
    out.sort();
    out
}

fn same(name: &str, depth: usize) -> String {
    let _ = depth;
    name.to_owned()
}

#[test]
fn real_requests_round_trip_without_losing_fields() {
    let all = fixtures("sched_request");
    assert_eq!(all.len(), 17);
    for (name, text) in all {
        let parsed =
            SchedulerRequest::parse(&text, &name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(parsed.warnings.is_empty(), "{name}: {:?}", parsed.warnings);
        let q = parsed.value;
        assert!(!q.authenticator.is_empty(), "{name}");
        let out = q.to_xml();
        let again = SchedulerRequest::parse(&out, "rewritten")
            .unwrap_or_else(|e| panic!("{name}: {e}\n{out}"));
        assert!(again.warnings.is_empty(), "{name}: {:?}", again.warnings);
        assert_eq!(again.value, q, "{name}: parse → write → parse");
        let missing = common::missing_leaves(
            &common::leaves(&text, &same),
            &common::leaves(&out, &same),
            &[],
        );
        assert!(missing.is_empty(), "{name}: lost {missing:?}");
    }
}

#[test]
fn real_replies_round_trip_without_losing_fields() {
    let all = fixtures("sched_reply");
    assert_eq!(all.len(), 10);
    for (name, text) in all {
        let parsed = SchedulerReply::parse(&text, &name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(parsed.warnings.is_empty(), "{name}: {:?}", parsed.warnings);
        let s = parsed.value;
        let out = s.to_xml();
        let again = SchedulerReply::parse(&out, "rewritten")
            .unwrap_or_else(|e| panic!("{name}: {e}\n{out}"));
        assert!(again.warnings.is_empty(), "{name}: {:?}", again.warnings);
        assert_eq!(again.value, s, "{name}: parse → write → parse");
        let missing = common::missing_leaves(
            &common::leaves(&text, &same),
            &common::leaves(&out, &same),
            &[],
        );
        assert!(missing.is_empty(), "{name}: lost {missing:?}");
    }
}

fn read(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/scheduler/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture")
}

#[test]
fn real_server_attach_reply_has_the_expected_content() {
    let s = SchedulerReply::parse(&read("real_server_sched_reply_attach.xml"), "r")
        .expect("parses")
        .value;
    assert_eq!(s.scheduler_version, Some(803));
    assert!(s.dont_use_dcf);
    assert_eq!(s.hostid, Some(1));
    assert_eq!(s.request_delay, Some(7.0));
    assert_eq!(s.apps.len(), 1);
    assert_eq!(s.file_infos.len(), 3);
    let exe = &s.file_infos[0];
    assert!(exe.executable);
    assert!(exe
        .file_signature
        .as_deref()
        .is_some_and(|x| x.ends_with("\n.")));
    assert_eq!(exe.download_urls.len(), 1);
    let out = &s.file_infos[2];
    assert_eq!(
        out.upload_urls,
        ["http://127.0.0.1/test_cgi/file_upload_handler"]
    );
    assert_eq!(out.max_nbytes, 5_000_000.0);
    assert_eq!(
        s.workunits[0].command_line, "-cpu_time 10",
        "the last command_line wins"
    );
    assert_eq!(s.results[0].report_deadline, 1_795_937_839.0);
    assert_eq!(s.results[0].output_files[0].open_name, "out");
    assert!(s
        .code_sign_key
        .as_deref()
        .is_some_and(|k| k.starts_with("1024\n")));
    assert!(s
        .gui_urls
        .as_deref()
        .is_some_and(|g| g.starts_with("<gui_urls>")));
    assert!(s.rss_feeds.as_deref().is_some_and(|g| g.contains("&auth=")));

    let s = SchedulerReply::parse(&read("real_server_sched_reply_report.xml"), "r")
        .expect("parses")
        .value;
    assert_eq!(s.result_acks, ["uc_wu_9_0"]);
    assert_eq!(s.hostid, None, "no new host record");
}

#[test]
fn reference_reply_messages_and_preferences() {
    let s = SchedulerReply::parse(&read("ref_sched_reply_03_result_ack.xml"), "r")
        .expect("parses")
        .value;
    assert_eq!(
        s.messages[1],
        ReplyMessage {
            priority: "notice".into(),
            text: "A notice-priority message from the fixture project".into()
        }
    );
    assert!(s.messages[1].is_notice());
    assert_eq!(
        s.project_preferences.as_deref(),
        Some("<resource_share>100</resource_share>")
    );
}

#[test]
fn reply_after_a_cgi_header_keeps_line_numbers() {
    let text = format!(
        "Content-type: text/xml\n\n{}",
        read("ref_sched_reply_03_result_ack.xml")
    )
    .replace("<userid>42</userid>", "<userid>many</userid>");
    let parsed = SchedulerReply::parse(&text, "r.xml").expect("parses");
    let w = parsed
        .warnings
        .iter()
        .find(|w| w.element == "userid")
        .expect("warned");
    assert_eq!(w.line, 11);
    assert_eq!(parsed.value.userid, None);
}

#[test]
fn real_report_request_has_the_expected_content() {
    let q = SchedulerRequest::parse(&read("real_server_sched_request_report.xml"), "q")
        .expect("parses")
        .value;
    assert_eq!(q.hostid, 1);
    assert_eq!(q.rpc_seqno, 1);
    assert_eq!(
        q.core_client_version,
        ClientVersion {
            major: 7,
            minor: 20,
            release: 5
        }
    );
    assert_eq!(q.cpu_req_secs, 2505.2526);
    assert!(q
        .working_global_preferences
        .as_deref()
        .is_some_and(|p| p.starts_with("<global_preferences>")));
    let r = &q.results[0];
    assert_eq!(r.name, "uc_wu_9_0");
    assert_eq!(r.state, ResultState::FilesUploaded);
    assert_eq!(r.core_client_version.as_deref(), Some("7.20.5"));
    assert!(r.stderr_out.starts_with("<stderr_txt>"));
    assert_eq!(r.app_version_num, Some(100));
    assert_eq!(
        r.uploaded_files[0].md5_cksum,
        "90a259c627caf1ff15ed0a9195dd4ba8"
    );
    assert_eq!(q.app_versions[0].app_name, "upper_case");
    assert_eq!(
        q.other_results,
        [OtherResult {
            name: "uc_wu_7_0".into(),
            app_version: 0,
            plan_class: String::new()
        }]
    );
    assert_eq!(
        q.disk_usage.as_ref().map(|d| d.d_boinc_used_total),
        Some(3_301_376.0)
    );
    assert!(q.coprocs.is_none());
}

#[test]
fn gpu_work_requests_travel_inside_coproc_blocks() {
    let mut q = SchedulerRequest {
        authenticator: "k".into(),
        coprocs: Some(Coprocs {
            nvidia: Some(NvidiaCoproc {
                count: 1,
                name: "GPU".into(),
                ..NvidiaCoproc::default()
            }),
            other: Vec::new(),
        }),
        ..SchedulerRequest::default()
    };
    let req = RscRequest {
        req_secs: 8640.0,
        req_instances: 1.0,
        estimated_delay: 0.0,
    };
    assert!(q.set_gpu_request("NVIDIA", req));
    assert!(!q.set_gpu_request("ATI", req));
    let xml = q.to_xml();
    assert!(xml.contains("<req_secs>8640.000000</req_secs>"), "{xml}");
    let back = SchedulerRequest::parse(&xml, "q").expect("parses").value;
    assert_eq!(
        back.coprocs.and_then(|c| c.nvidia).and_then(|n| n.request),
        Some(req)
    );
}

mod generated {
    use super::*;
    use proptest::prelude::*;

    fn name() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9_.]{0,15}"
    }
    fn text() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9_<>&\"' .:/-]{0,12}".prop_map(|s| s.trim().to_owned())
    }
    fn f6() -> impl Strategy<Value = f64> {
        (0i64..4_000_000_000_000).prop_map(|n| n as f64 / 1e6)
    }

    fn reported() -> impl Strategy<Value = TaskResult> {
        (
            name(),
            f6(),
            f6(),
            -300i32..300,
            3usize..8,
            "[a-z <>&\n]{0,40}",
            prop::option::of(name()),
        )
            .prop_map(|(n, cpu, el, exit, st, stderr, out)| TaskResult {
                name: n,
                final_cpu_time: cpu,
                final_elapsed_time: el,
                exit_status: exit,
                state: ResultState::ALL[st],
                platform: "x86_64-pc-linux-gnu".into(),
                version_num: 100,
                app_version_num: Some(100),
                core_client_version: Some("8.2.0".into()),
                stderr_out: stderr.trim().to_owned(),
                final_peak_swap_size: (cpu * 1000.0).round(),
                uploaded_files: out
                    .into_iter()
                    .map(|o| FileInfo {
                        name: o,
                        nbytes: 36.0,
                        max_nbytes: 5e6,
                        md5_cksum: "90a259c627caf1ff15ed0a9195dd4ba8".into(),
                        upload_urls: vec!["http://h/file_upload_handler".into()],
                        ..FileInfo::default()
                    })
                    .collect(),
                ..TaskResult::default()
            })
    }

    fn request() -> impl Strategy<Value = SchedulerRequest> {
        (
            (text(), 0i32..100_000, 0i32..1000, f6(), f6(), any::<[bool; 4]>()),
            prop::collection::vec(reported(), 0..4),
            prop::collection::vec((name(), 0i32..5), 0..5),
            prop::collection::vec(name(), 0..3),
            prop::option::of(f6()),
        )
            .prop_map(|((auth, hostid, seq, secs, delay, b), results, others, avs, gpu)| {
                SchedulerRequest {
                    authenticator: auth,
                    hostid,
                    rpc_seqno: seq,
                    core_client_version: ClientVersion { major: 8, minor: 2, release: 0 },
                    work_req_seconds: secs,
                    cpu_req_secs: secs,
                    cpu_req_instances: 1.0,
                    estimated_delay: delay,
                    dont_send_work: b[0],
                    dont_use_docker: b[1],
                    platform_name: "x86_64-pc-linux-gnu".into(),
                    alt_platforms: if b[2] { vec!["i686-pc-linux-gnu".into()] } else { Vec::new() },
                    code_sign_key: b[3].then(|| "1024\nabc\n.".to_owned()),
                    working_global_preferences: Some(
                        "<global_preferences>\n   <mod_time>0.000000</mod_time>\n</global_preferences>".into(),
                    ),
                    time_stats: TimeStats { now: 1.7e9, ..TimeStats::default() },
                    net_stats: NetStats { bwup: secs, ..NetStats::default() },
                    host_info: ferrite_proto::client_state::synthetic(0, 0).host_info,
                    coprocs: gpu.map(|g| Coprocs {
                        nvidia: Some(NvidiaCoproc {
                            count: 2,
                            name: "NVIDIA GeForce RTX 3080".into(),
                            peak_flops: g,
                            request: Some(RscRequest { req_secs: g, req_instances: 2.0, estimated_delay: 0.0 }),
                            ..NvidiaCoproc::default()
                        }),
                        other: Vec::new(),
                    }),
                    results,
                    app_versions: avs
                        .into_iter()
                        .map(|a| AppVersion {
                            app_name: a,
                            version_num: 100,
                            platform: "x86_64-pc-linux-gnu".into(),
                            usage: ResourceUsage { avg_ncpus: 1.0, flops: 1e9, ..ResourceUsage::default() },
                            ..AppVersion::default()
                        })
                        .collect(),
                    other_results: others
                        .into_iter()
                        .map(|(n, i)| OtherResult { name: n, app_version: i, plan_class: String::new() })
                        .collect(),
                    ..SchedulerRequest::default()
                }
            })
    }

    fn reply() -> impl Strategy<Value = SchedulerReply> {
        (
            (
                prop::option::of(0i32..1000),
                prop::option::of(f6()),
                prop::option::of(text()),
                any::<[bool; 5]>(),
            ),
            prop::collection::vec((name(), text()), 0..3),
            prop::collection::vec((name(), f6(), prop::option::of(text())), 0..4),
            prop::collection::vec((name(), name(), f6()), 0..4),
            prop::collection::vec(name(), 0..3),
        )
            .prop_map(|((hostid, delay, pname, b), msgs, files, jobs, acks)| {
                SchedulerReply {
                    scheduler_version: Some(803),
                    hostid,
                    request_delay: delay,
                    project_name: pname,
                    dont_use_dcf: b[0],
                    ended: b[1],
                    message_ack: b[2],
                    no_rsc_apps: if b[3] {
                        vec!["NVIDIA".into(), "ATI".into()]
                    } else {
                        Vec::new()
                    },
                    code_sign_key: b[4].then(|| "1024\nabc\n.".to_owned()),
                    messages: msgs
                        .into_iter()
                        .map(|(p, t)| ReplyMessage {
                            priority: p,
                            text: t,
                        })
                        .collect(),
                    apps: vec![App {
                        name: "app".into(),
                        user_friendly_name: "App".into(),
                        ..App::default()
                    }],
                    file_infos: files
                        .into_iter()
                        .map(|(n, nb, sig)| FileInfo {
                            name: n.clone(),
                            nbytes: nb,
                            download_urls: vec![format!("http://h/download/{n}")],
                            file_signature: sig
                                .map(|s| format!("{s}\n."))
                                .map(|s| s.trim().to_owned()),
                            ..FileInfo::default()
                        })
                        .collect(),
                    workunits: jobs
                        .iter()
                        .map(|(wu, _, est)| Workunit {
                            name: wu.clone(),
                            app_name: "app".into(),
                            rsc_fpops_est: est + 1.0,
                            input_files: vec![FileRef {
                                file_name: format!("{wu}_in"),
                                ..FileRef::default()
                            }],
                            ..Workunit::default()
                        })
                        .collect(),
                    results: jobs
                        .into_iter()
                        .map(|(wu, r, dl)| TaskResult {
                            name: r,
                            wu_name: wu,
                            report_deadline: dl,
                            platform: "x86_64-pc-linux-gnu".into(),
                            version_num: 100,
                            ..TaskResult::default()
                        })
                        .collect(),
                    result_acks: acks.clone(),
                    result_aborts: acks.iter().take(1).cloned().collect(),
                    delete_file_infos: acks,
                    global_preferences: Some("<mod_time>1.0</mod_time>".into()),
                    ..SchedulerReply::default()
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn request_write_then_parse_is_identity(q in request()) {
            let xml = q.to_xml();
            let back = SchedulerRequest::parse(&xml, "q.xml").expect("parses");
            prop_assert!(back.warnings.is_empty(), "{:?}", back.warnings);
            prop_assert_eq!(back.value, q);
        }

        #[test]
        fn reply_write_then_parse_is_identity(s in reply()) {
            let xml = s.to_xml();
            let back = SchedulerReply::parse(&xml, "r.xml").expect("parses");
            prop_assert!(back.warnings.is_empty(), "{:?}", back.warnings);
            prop_assert_eq!(back.value, s);
        }
    }
}
