use super::*;

/// `acct_mgr_login.xml` byte for byte as the official client writes it (`write_info`).
const OFFICIAL_LOGIN: &str = "<acct_mgr_login>\n    <login>alice@example.com</login>\n    <password_hash>0123456789abcdef0123456789abcdef</password_hash>\n    <previous_host_cpid>fedcba</previous_host_cpid>\n    <next_rpc_time>1790000000.500000</next_rpc_time>\n    <opaque>\n<userid>42</userid>\n    </opaque>\n    <no_project_notices>0</no_project_notices>\n    <dynamic>1</dynamic>\n<user_name>Alice &amp; Bob</user_name>\n<team_name>Team</team_name>\n<user_keywords>\n   <yes>3</yes>\n   <yes>5</yes>\n   <no>7</no>\n</user_keywords>\n</acct_mgr_login>\n";

const OFFICIAL_URL: &str = "<acct_mgr>\n    <name>BAM!</name>\n    <url>https://bam.boincstats.com/</url>\n    <send_gui_rpc_info/>\n    <signing_key>\n1024\nabcdef\n.\n</signing_key>\n</acct_mgr>\n";

#[test]
fn login_file_round_trips_in_the_official_layout() {
    let f = AcctMgrLoginFile::parse(OFFICIAL_LOGIN)
        .expect("parse")
        .value;
    assert_eq!(f.login, "alice@example.com");
    assert_eq!(f.password_hash, "0123456789abcdef0123456789abcdef");
    assert_eq!(f.previous_host_cpid, "fedcba");
    assert_eq!(f.next_rpc_time, 1_790_000_000.5);
    assert_eq!(f.opaque, "<userid>42</userid>");
    assert!(f.dynamic && !f.no_project_notices);
    assert_eq!(f.user_name, "Alice & Bob");
    assert_eq!(f.user_keywords.yes, vec![3, 5]);
    assert_eq!(f.user_keywords.no, vec![7]);
    assert!(f.has_credentials());
    assert_eq!(f.to_xml(), OFFICIAL_LOGIN);
}

#[test]
fn login_file_with_an_authenticator_writes_no_name() {
    let f = AcctMgrLoginFile {
        authenticator: "key_1".into(),
        login: "ignored".into(),
        ..AcctMgrLoginFile::default()
    };
    let x = f.to_xml();
    assert!(x.contains("<authenticator>key_1</authenticator>"));
    assert!(!x.contains("<login>"));
    assert!(!x.contains("user_keywords"), "no keywords, no element");
    assert_eq!(
        AcctMgrLoginFile::parse(&x)
            .expect("parse")
            .value
            .authenticator,
        "key_1"
    );
    assert!(!AcctMgrLoginFile::default().has_credentials());
}

#[test]
fn url_file_round_trips_in_the_official_layout() {
    let f = AcctMgrUrlFile::parse(OFFICIAL_URL).expect("parse").value;
    assert_eq!(f.name, "BAM!");
    assert_eq!(f.url, "https://bam.boincstats.com/");
    assert!(f.send_gui_rpc_info);
    assert_eq!(f.signing_key, "1024\nabcdef\n.");
    assert_eq!(f.to_xml(), OFFICIAL_URL);
}

#[test]
fn password_hash_is_md5_of_password_and_lowercased_name() {
    // md5("secretalice@example.com")
    let want = crate::crypt::md5_hex(b"secretalice@example.com");
    assert_eq!(password_hash("Alice@Example.com", "secret"), want);
    assert_eq!(password_hash("x", "hash:abc"), "abc");
}

const REPLY: &str = r#"<?xml version="1.0" encoding="ISO-8859-1" ?>
<acct_mgr_reply>
    <name>Test AM</name>
    <user_name>al&amp;ice</user_name>
    <team_name>t</team_name>
    <authenticator>am_key</authenticator>
    <repeat_sec>3600</repeat_sec>
    <dynamic>1</dynamic>
    <send_tasks_active/>
    <message>hello</message>
    <message>second</message>
    <opaque>
        <x>1</x>
    </opaque>
    <signing_key>
1024
aa
.
</signing_key>
    <account>
        <url>http://p.example/</url>
        <url_signature>
0a0b
.
        </url_signature>
        <authenticator>1_abc</authenticator>
        <no_rsc>NVIDIA</no_rsc>
        <no_cpu>1</no_cpu>
        <no_cuda/>
        <dont_request_more_work>0</dont_request_more_work>
        <suspend>1</suspend>
        <resource_share>250</resource_share>
        <update>1</update>
        <future_tag>x</future_tag>
    </account>
    <account>
        <url>http://q.example/</url>
        <detach>1</detach>
        <resource_share>-5</resource_share>
        <detach_when_done>1</detach_when_done>
        <abort_not_started>1</abort_not_started>
    </account>
    <account>
        <authenticator>no url</authenticator>
    </account>
    <global_preferences>
        <mod_time>1700000000</mod_time>
        <max_ncpus_pct>50</max_ncpus_pct>
    </global_preferences>
    <host_venue>home</host_venue>
    <rss_feeds>
        <rss_feed>
            <url>http://am.example/rss.php</url>
            <poll_interval>86400</poll_interval>
        </rss_feed>
    </rss_feeds>
    <no_project_notices>1</no_project_notices>
    <user_keywords>
        <yes>1</yes>
        <no>2</no>
    </user_keywords>
</acct_mgr_reply>
"#;

#[test]
fn reply_reads_every_element() {
    let parsed = AmReply::parse(REPLY).expect("parse");
    let a = parsed.value;
    assert_eq!(a.name, "Test AM");
    assert_eq!(a.user_name, "al&ice");
    assert_eq!(a.authenticator, "am_key");
    assert_eq!(a.repeat_sec, 3600.0);
    assert!(a.dynamic && a.send_tasks_active && !a.send_tasks_all);
    assert_eq!(a.messages, ["hello", "second"]);
    assert_eq!(a.opaque, "<x>1</x>");
    assert_eq!(a.signing_key, "1024\naa\n.");
    assert_eq!(a.accounts.len(), 2, "the account without a URL is dropped");
    let p = &a.accounts[0];
    assert_eq!(p.url_signature, "0a0b\n.\n");
    assert_eq!(p.no_rsc, ["NVIDIA", "CPU"]);
    assert_eq!(p.dont_request_more_work, Some(false));
    assert_eq!(p.suspend, Some(true));
    assert_eq!(p.detach_when_done, None, "absent is not false");
    assert_eq!(p.resource_share, Some(250.0));
    assert!(p.update && !p.detach);
    let q = &a.accounts[1];
    assert!(q.detach);
    assert_eq!(q.resource_share, None, "a negative share is refused");
    assert_eq!(q.detach_when_done, Some(true));
    assert_eq!(q.abort_not_started, Some(true));
    assert!(a
        .global_preferences
        .as_deref()
        .is_some_and(|g| g.contains("<max_ncpus_pct>50</max_ncpus_pct>")));
    assert_eq!(a.host_venue, "home");
    let feeds = a.rss_feeds.expect("feeds");
    assert_eq!(feeds[0].url, "http://am.example/rss.php");
    assert!(a.no_project_notices);
    assert_eq!(a.user_keywords.yes, [1]);
    assert_eq!(a.user_keywords.no, [2]);
    assert!(parsed.warnings.iter().any(|w| w.element == "future_tag"));
}

#[test]
fn reply_error_forms() {
    let a = AmReply::parse(
        "<acct_mgr_reply>\n<error_num>-206</error_num>\n<error_msg>Bad password</error_msg>\n</acct_mgr_reply>",
    )
    .expect("parse")
    .value;
    assert_eq!(a.error_num, -206);
    assert_eq!(a.error, "Bad password");
    let b = AmReply::parse("<acct_mgr_reply><error>down</error></acct_mgr_reply>")
        .expect("parse")
        .value;
    assert_eq!(b.error, "down");
    assert!(AmReply::parse("<html>not a manager</html>").is_err());
}

#[test]
fn reply_written_by_a_manager_reads_back_the_same() {
    let a = AmReply::parse(REPLY).expect("parse").value;
    let again = AmReply::parse(&a.to_xml()).expect("reparse").value;
    let mut want = a.clone();
    // The writer writes the prefs contents as given; compare trimmed.
    want.global_preferences = want.global_preferences.map(|g| g.trim().to_owned());
    let mut got = again;
    got.global_preferences = got.global_preferences.map(|g| g.trim().to_owned());
    assert_eq!(got, want);
}

#[test]
fn request_round_trips_through_the_reader() {
    let host = HostInfo {
        domain_name: "box".into(),
        p_ncpus: 4,
        ..HostInfo::default()
    };
    let q = AmRequest {
        credentials: Some(AmCredentials::Login {
            name: "alice".into(),
            password_hash: "h".into(),
        }),
        host_cpid: "cpid".into(),
        domain_name: "box".into(),
        client_version: "8.2.4".into(),
        run_mode: "auto".into(),
        platform_name: "x86_64-pc-linux-gnu".into(),
        alt_platforms: vec!["i686-pc-linux-gnu".into()],
        previous_host_cpid: "old".into(),
        gui_rpc: Some((31416, Some("pw".into()))),
        projects: vec![
            AmProject {
                url: "http://p.example/".into(),
                project_name: "P".into(),
                hostid: 7,
                resource_share: 100.0,
                attached_via_acct_mgr: true,
                account_key: Some("k".into()),
                dynamic: Some(AmProjectWork {
                    njobs_success: 3,
                    sched_req_no_work: vec!["NVIDIA".into()],
                    ..AmProjectWork::default()
                }),
                ..AmProject::default()
            },
            AmProject {
                url: "http://q.example/".into(),
                suspended_via_gui: true,
                ..AmProject::default()
            },
        ],
        working_global_prefs: "<global_preferences>\n<run_if_user_active>1</run_if_user_active>\n</global_preferences>".into(),
        global_prefs_file: Some("<global_preferences>\n<mod_time>5</mod_time>\n</global_preferences>".into()),
        host_info: host,
        net_info: true,
        opaque: "<x>1</x>".into(),
        time_stats: TimeStats::default(),
        net_stats: NetStats::default(),
        results: Some("<result>\n<name>r1</name>\n</result>".into()),
    };
    let x = q.to_xml();
    assert!(x.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n<acct_mgr_request>\n   <name>alice</name>\n   <password_hash>h</password_hash>\n   <host_cpid>cpid</host_cpid>\n"), "{x}");
    assert!(x.contains("      <account_key>k</account_key>\n   </project>"));
    assert!(x.contains("   <opaque>\n<x>1</x>\n   </opaque>\n"));
    let back = AmRequest::parse(&x).expect("parse").value;
    assert_eq!(back.credentials, q.credentials);
    assert_eq!(back.host_cpid, "cpid");
    assert_eq!(back.run_mode, "auto");
    assert_eq!(back.alt_platforms, q.alt_platforms);
    assert_eq!(back.previous_host_cpid, "old");
    assert_eq!(back.gui_rpc, q.gui_rpc);
    assert_eq!(back.projects, q.projects);
    assert_eq!(back.opaque, q.opaque);
    assert_eq!(back.global_prefs_file, q.global_prefs_file);
    assert_eq!(back.host_info.p_ncpus, 4);
    assert_eq!(
        back.results.as_deref(),
        Some("<result>\n<name>r1</name>\n</result>")
    );
    assert!(back.working_global_prefs.contains("run_if_user_active"));
}

#[test]
fn keywords_are_written_as_the_official_client_writes_them() {
    let k = UserKeywords {
        yes: vec![1, 2],
        no: vec![9],
    };
    assert_eq!(
        k.to_xml(),
        "<user_keywords>\n   <yes>1</yes>\n   <yes>2</yes>\n   <no>9</no>\n</user_keywords>\n"
    );
    assert_eq!(UserKeywords::default().to_xml(), "");
}
