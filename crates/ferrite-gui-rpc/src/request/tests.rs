//! Parsing and writing GUI RPC requests.

use super::*;

fn doc(op: &str) -> String {
    format!("<boinc_gui_rpc_request>\n{op}\n</boinc_gui_rpc_request>\n")
}

#[test]
fn boinccmd_set_run_mode() {
    let r = parse_request(&doc(
        "<set_run_mode>\n<never/>\n  <duration>30.000000</duration>\n</set_run_mode>",
    ));
    assert_eq!(
        r,
        Ok(Request::SetRunMode {
            mode: RunMode::Never,
            duration: 30.0,
            at_checkpoint: false,
        })
    );
}

#[test]
fn set_run_mode_carries_ferrites_at_checkpoint_element() {
    let r = parse_request(&doc(
        "<set_run_mode><never/><duration>0</duration><ferrite_at_checkpoint/></set_run_mode>",
    ));
    let asked = Request::SetRunMode {
        mode: RunMode::Never,
        duration: 0.0,
        at_checkpoint: true,
    };
    assert_eq!(r, Ok(asked.clone()));
    let xml = asked.to_xml();
    assert!(xml.contains("<ferrite_at_checkpoint/>"), "{xml}");
    assert_eq!(parse_request(&asked.to_document()), Ok(asked));
    // Without the element (every official GUI), nothing is written either.
    let plain = Request::SetRunMode {
        mode: RunMode::Never,
        duration: 0.0,
        at_checkpoint: false,
    };
    let xml = plain.to_xml();
    assert!(!xml.contains("ferrite_at_checkpoint"), "{xml}");
    assert_eq!(parse_request(&plain.to_document()), Ok(plain));
}

#[test]
fn boinctui_one_line_request() {
    let r = parse_request(
        "<boinc_gui_rpc_request><set_run_mode><always/><duration>0</duration></set_run_mode></boinc_gui_rpc_request>",
    );
    assert_eq!(
        r,
        Ok(Request::SetRunMode {
            mode: RunMode::Always,
            duration: 0.0,
            at_checkpoint: false,
        })
    );
}

#[test]
fn unknown_ops_keep_the_slash_like_the_official() {
    assert_eq!(
        parse_request(&doc("<no_such_operation/>")),
        Err(RequestError::UnrecognizedOp("no_such_operation/".into()))
    );
    assert_eq!(
        parse_request(&doc("<no_such_operation></no_such_operation>")),
        Err(RequestError::UnrecognizedOp("no_such_operation".into()))
    );
    assert_eq!(
        parse_request(&doc("--nopw")),
        Err(RequestError::UnrecognizedOp("--nopw".into()))
    );
    assert_eq!(
        RequestError::UnrecognizedOp("no_such_operation/".into()).reply_body(),
        "<error>unrecognized op: no_such_operation/</error>\n"
    );
}

#[test]
fn structural_errors() {
    assert_eq!(parse_request(""), Err(RequestError::MissingRoot));
    assert_eq!(parse_request("  \n"), Err(RequestError::MissingRoot));
    assert_eq!(
        parse_request("<boinc_gui_rpc_request>\n</boinc_gui_rpc_request>"),
        Err(RequestError::MissingRequest)
    );
    assert_eq!(
        parse_request(&doc("<set_gpu_mode><duration>3</duration></set_gpu_mode>")),
        Err(RequestError::MissingMode)
    );
}

#[test]
fn result_op_and_messages() {
    assert_eq!(
        parse_request(&doc(
            "<abort_result>\n   <project_url>http://127.0.0.1:18080/</project_url>\n   <name>wu_abort_0</name>\n</abort_result>"
        )),
        Ok(Request::ResultOp {
            op: ResultAction::Abort,
            project_url: "http://127.0.0.1:18080/".into(),
            name: "wu_abort_0".into()
        })
    );
    assert_eq!(
        parse_request(&doc(
            "<get_messages>\n  <seqno>12</seqno>\n<translatable/></get_messages>"
        )),
        Ok(Request::GetMessages {
            seqno: 12,
            translatable: true
        })
    );
    assert_eq!(parse_request(&doc("<get_state/>")), Ok(Request::GetState));
}

#[test]
fn raw_documents_are_passed_verbatim() {
    let cc = "<cc_config>\n<options><ncpus>1</ncpus></options>\n</cc_config>";
    assert_eq!(
        parse_request(&doc(&format!("<set_cc_config>\n{cc}\n</set_cc_config>"))),
        Ok(Request::SetCcConfig { raw: cc.into() })
    );
    assert_eq!(
        parse_request(&doc("<set_cc_config/>")),
        Ok(Request::SetCcConfig { raw: String::new() })
    );
}

#[test]
fn every_request_round_trips_through_xml() {
    let account = AccountIn {
        url: "http://p/".into(),
        email_addr: "a@b".into(),
        passwd_hash: "h".into(),
        user_name: "u & v".into(),
        team_name: "t".into(),
        ldap_auth: true,
        server_assigned_cookie: true,
        server_cookie: "c".into(),
        consented_to_terms: true,
    };
    let all = vec![
        Request::ExchangeVersions {
            major: 7,
            minor: 20,
            release: 5,
            name: Some("ferrite".into()),
        },
        Request::GetAllProjectsList,
        Request::GetCcStatus,
        Request::GetDiskUsage,
        Request::GetDailyXferHistory,
        Request::GetFileTransfers,
        Request::GetHostInfo,
        Request::GetMessages {
            seqno: 5,
            translatable: true,
        },
        Request::GetMessageCount,
        Request::GetNewerVersion,
        Request::GetNoticesPublic { seqno: 3 },
        Request::GetOldResults,
        Request::GetProjectStatus,
        Request::GetResults { active_only: true },
        Request::GetScreensaverTasks,
        Request::GetSimpleGuiInfo,
        Request::GetState,
        Request::GetStatistics,
        Request::FerriteExplain,
        Request::RunGraphicsApp {
            slot: Some(2),
            operation: Some("run".into()),
            graphics_pid: None,
        },
        Request::ResultOp {
            op: ResultAction::Suspend,
            project_url: "http://p/?a=1&b=2".into(),
            name: "r<1>".into(),
        },
        Request::FileTransferOp {
            op: FileTransferAction::Retry,
            project_url: "http://p/".into(),
            filename: "f".into(),
        },
        Request::ProjectOp {
            op: ProjectAction::DontDetachWhenDone,
            project_url: "http://p/".into(),
        },
        Request::SetRunMode {
            mode: RunMode::Never,
            duration: 60.0,
            at_checkpoint: false,
        },
        Request::SetRunMode {
            mode: RunMode::Never,
            duration: 0.0,
            at_checkpoint: true,
        },
        Request::SetGpuMode {
            mode: RunMode::Restore,
            duration: 0.0,
        },
        Request::SetNetworkMode {
            mode: RunMode::Auto,
            duration: 1.5,
        },
        Request::NetworkAvailable,
        Request::Quit,
        Request::ReadCcConfig,
        Request::ReadGlobalPrefsOverride,
        Request::ResetHostInfo,
        Request::RunBenchmarks,
        Request::SetHostInfo {
            host_info: Some(HostInfoUpdate {
                product_name: Some("phone".into()),
                os_name: None,
                os_version: Some("14".into()),
                domain_name: None,
            }),
        },
        Request::SetLanguage {
            language: "de".into(),
        },
        Request::GetProxySettings,
        Request::SetProxySettings {
            raw: "<use_http_proxy/>\n<http_server_name>h</http_server_name>".into(),
        },
        Request::GetNotices { seqno: 9 },
        Request::AcctMgrInfo,
        Request::GetCcConfig,
        Request::SetCcConfig {
            raw: "<cc_config>\n</cc_config>".into(),
        },
        Request::GetGlobalPrefsFile,
        Request::GetGlobalPrefsOverride,
        Request::GetGlobalPrefsWorking,
        Request::SetGlobalPrefsOverride {
            raw: "<global_preferences><run_on_batteries>0</run_on_batteries></global_preferences>"
                .into(),
        },
        Request::GetAppConfig {
            url: "http://p/".into(),
        },
        Request::SetAppConfig {
            url: "http://p/".into(),
            app_config: Some("<app_config><app><name>a</name></app></app_config>".into()),
        },
        Request::GetProjectInitStatus,
        Request::GetProjectConfig {
            url: "http://p/".into(),
        },
        Request::GetProjectConfigPoll,
        Request::LookupAccount(account.clone()),
        Request::LookupAccountPoll,
        Request::CreateAccount(account),
        Request::CreateAccountPoll,
        Request::ProjectAttach {
            project_url: "http://p/".into(),
            authenticator: "k".into(),
            project_name: "P".into(),
            email_addr: "e".into(),
            use_config_file: false,
        },
        Request::ProjectAttachPoll,
        Request::AcctMgrRpc {
            url: Some("http://am/".into()),
            name: Some("n".into()),
            password: Some("pw".into()),
            use_config_file: false,
        },
        Request::AcctMgrRpcPoll,
    ];
    let mut all = all;
    for op in [ResultAction::Abort, ResultAction::Resume] {
        all.push(Request::ResultOp {
            op,
            project_url: "http://p/".into(),
            name: "r".into(),
        });
    }
    all.push(Request::FileTransferOp {
        op: FileTransferAction::Abort,
        project_url: "http://p/".into(),
        filename: "f".into(),
    });
    for op in [
        ProjectAction::Reset,
        ProjectAction::Detach,
        ProjectAction::Update,
        ProjectAction::Suspend,
        ProjectAction::Resume,
        ProjectAction::NoMoreWork,
        ProjectAction::AllowMoreWork,
        ProjectAction::DetachWhenDone,
    ] {
        all.push(Request::ProjectOp {
            op,
            project_url: "http://p/".into(),
        });
    }
    let mut names: Vec<_> = all.iter().map(Request::op_name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), crate::ops::OPS.len(), "one variant per op");
    for r in all {
        let text = r.to_document();
        assert_eq!(parse_request(&text).as_ref(), Ok(&r), "{text}");
        assert_eq!(r.info().name, r.op_name());
    }
}

/// A request of stray end tags under many open elements (any peer can send one before
/// authenticating) is read in linear time: each stray end tag searched the whole stack
/// of open elements, 1.3 s of a release build for one 100 kB request.
#[test]
fn stray_end_tags_under_deep_nesting_are_read_in_linear_time() {
    let n = 14_000;
    let text = format!(
        "<boinc_gui_rpc_request><get_state>{}{}",
        "<a>".repeat(n),
        "</b>".repeat(n)
    );
    assert!(text.len() < crate::framing::MAX_REQUEST_BYTES);
    let t = std::time::Instant::now();
    let r = parse_request(&text);
    let took = t.elapsed();
    assert_eq!(r, Ok(Request::GetState));
    assert!(took < std::time::Duration::from_secs(2), "took {took:?}");
}

/// A request nested as deep as the size cap allows is read, and dropped, on a small
/// thread stack: the tree stops nesting at a fixed depth (it overflowed the stack).
/// Documents passed on verbatim keep their text whatever their depth.
#[test]
fn deep_nesting_is_read_on_a_small_stack_and_raw_documents_keep_it() {
    let deep = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(|| {
            let text = format!("<boinc_gui_rpc_request><get_state>{}", "<a>".repeat(33_000));
            assert!(text.len() < crate::framing::MAX_REQUEST_BYTES);
            parse_request(&text)
        })
        .expect("spawn")
        .join()
        .expect("no stack overflow");
    assert_eq!(deep, Ok(Request::GetState));

    let inner = format!(
        "<cc_config>{}x{}</cc_config>",
        "<a>".repeat(300),
        "</a>".repeat(300)
    );
    let text = format!(
        "<boinc_gui_rpc_request><set_cc_config>{inner}</set_cc_config></boinc_gui_rpc_request>"
    );
    assert_eq!(
        parse_request(&text),
        Ok(Request::SetCcConfig { raw: inner })
    );
}
