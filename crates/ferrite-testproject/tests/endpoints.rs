//! Every endpoint of the test project over loopback: master page, attach web RPCs,
//! scheduler (work, signatures, reports, duplicates, host ids, sticky files), downloads with
//! Range, the upload handler, `/status`, restart from `--data`.

mod common;

use clap::Parser as _;
use common::{get, get_json, post, request, rpc, start, work_request, KEY};
use ferrite_proto::client_state::{ResultState, TaskResult};
use ferrite_proto::crypt::{md5_hex, PrivateKey, PublicKey};
use ferrite_proto::sched_request::{OtherResult, StickyFile};
use ferrite_testproject::{Args, Server};

/// The tasks a client holds after `reply`, as its next request lists them.
fn holding(reply: &ferrite_proto::sched_reply::SchedulerReply) -> Vec<OtherResult> {
    reply
        .results
        .iter()
        .map(|r| OtherResult {
            name: r.name.clone(),
            ..OtherResult::default()
        })
        .collect()
}

fn report(name: &str) -> TaskResult {
    TaskResult {
        name: name.into(),
        state: ResultState::FilesUploaded,
        exit_status: 0,
        ..TaskResult::default()
    }
}

#[test]
fn binds_loopback_and_master_page_advertises_scheduler_both_ways() {
    let f = start(&[]);
    let url = f.server.url();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let page = get(url, "").text();
    let sched = format!("{url}cgi");
    assert!(
        page.contains(&format!("<scheduler>{sched}</scheduler>")),
        "{page}"
    );
    assert!(
        page.contains(&format!("<link rel=\"boinc_scheduler\" href=\"{sched}\">")),
        "{page}"
    );
    assert_eq!(get(url, "nothing_here").status, 404);
}

#[test]
fn attach_web_rpcs() {
    let f = start(&[]);
    let url = f.server.url();
    let cfg = get(url, "get_project_config.php").text();
    assert!(
        cfg.contains(&format!("<master_url>{url}</master_url>")),
        "{cfg}"
    );
    assert!(cfg.contains("<web_rpc_url_base>"));
    assert!(!cfg.contains("account_manager"));

    // passwd_hash = md5(password + lowercase(email)); the client escapes `.` and `_`.
    let hash = md5_hex(b"secretpwuser@example.com");
    let email_q = "User%40Example%2Ecom";
    let r = get(
        url,
        &format!("lookup_account.php?email_addr={email_q}&passwd_hash={hash}"),
    );
    assert!(
        r.text().contains("<error_num>-136</error_num>"),
        "{}",
        r.text()
    );
    let r = get(
        url,
        &format!("create_account.php?email_addr={email_q}&passwd_hash={hash}&user_name=u%5F1"),
    );
    assert!(
        r.text()
            .contains(&format!("<authenticator>{KEY}</authenticator>")),
        "{}",
        r.text()
    );
    let r = get(
        url,
        &format!("lookup_account.php?email_addr={email_q}&passwd_hash={hash}"),
    );
    assert!(r
        .text()
        .contains(&format!("<authenticator>{KEY}</authenticator>")));
    let wrong = md5_hex(b"wrongpwuser@example.com");
    let r = get(
        url,
        &format!("lookup_account.php?email_addr={email_q}&passwd_hash={wrong}"),
    );
    assert!(
        r.text().contains("<error_num>-206</error_num>"),
        "{}",
        r.text()
    );
    // md5(authenticator + email) is accepted as BOINC's server does.
    let by_key = md5_hex(format!("{KEY}user@example.com").as_bytes());
    let r = get(
        url,
        &format!("lookup_account.php?email_addr={email_q}&passwd_hash={by_key}"),
    );
    assert!(r.text().contains("<authenticator>"));
    // Same email, other password: not unique.
    let r = get(
        url,
        &format!("create_account.php?email_addr={email_q}&passwd_hash={wrong}"),
    );
    assert!(
        r.text().contains("<error_num>-137</error_num>"),
        "{}",
        r.text()
    );
    let r = get(url, "create_account.php?email_addr=nobody&passwd_hash=x");
    assert!(r.text().contains("<error_num>-205</error_num>"));
    assert_eq!(get_json(url, "status")["accounts"], 1);
}

#[test]
fn work_fetch_gets_signed_app_and_jobs_that_verify() {
    let f = start(&["--upload-certs", "--jobs", "3"]);
    let url = f.server.url();
    let reply = rpc(url, &work_request(103_680.0, 2.0));
    assert_eq!(reply.hostid, Some(1), "a new host record is announced");
    assert_eq!(reply.results.len(), 3);
    assert_eq!(reply.workunits.len(), 3);
    let key =
        PublicKey::parse(reply.code_sign_key.as_deref().expect("key sent")).expect("key parses");
    assert_eq!(
        key.to_text(),
        std::fs::read_to_string(f.server.project().data_dir().join("code_sign_public"))
            .expect("key file")
    );
    assert_eq!(reply.apps.len(), 1);
    assert_eq!(reply.app_versions.len(), 1);
    let av = &reply.app_versions[0];
    assert_eq!(av.platform, "x86_64-pc-linux-gnu");
    let exe_name = &av.file_refs[0].file_name;
    let exe = reply
        .file_infos
        .iter()
        .find(|fi| &fi.name == exe_name)
        .expect("exe file_info");
    assert!(exe.executable);
    // Download the executable and check MD5 and signature over the served bytes.
    let body = get(url, &format!("download/{exe_name}")).body;
    assert_eq!(body, b"#!/bin/sh\ncat in > out\n");
    assert_eq!(md5_hex(&body), exe.md5_cksum);
    key.verify(&body, exe.file_signature.as_deref().expect("signed"))
        .expect("signature verifies with the served key");

    // Inputs: open name `in`, served, MD5 right; outputs: upload URL and certificate.
    for (wu, res) in reply.workunits.iter().zip(&reply.results) {
        assert_eq!(wu.input_files[0].open_name, "in");
        let fi = reply
            .file_infos
            .iter()
            .find(|fi| fi.name == wu.input_files[0].file_name)
            .expect("input file_info");
        let data = get(url, &format!("download/{}", fi.name)).body;
        assert_eq!(data, b"0123456789abcdef");
        assert_eq!(md5_hex(&data), fi.md5_cksum);
        assert_eq!(res.output_files[0].open_name, "out");
        let out = reply
            .file_infos
            .iter()
            .find(|fi| fi.name == res.output_files[0].file_name)
            .expect("output file_info");
        assert!(out.upload_urls[0].contains("file_upload_handler"));
        let cert = format!(
            "<name>{}</name><max_nbytes>{:.0}</max_nbytes>",
            out.name, out.max_nbytes
        );
        key.verify(cert.as_bytes(), out.xml_signature.as_deref().expect("cert"))
            .expect("upload certificate verifies");
        assert!(res.report_deadline > 0.0);
    }

    // Same host, next seqno: no hostid; no work left.
    let mut next = work_request(100.0, 1.0);
    next.hostid = 1;
    next.rpc_seqno = 1;
    next.code_sign_key = Some(key.to_text());
    next.other_results = holding(&reply);
    let r2 = rpc(url, &next);
    assert_eq!(r2.hostid, None);
    assert!(r2.results.is_empty());
    assert!(
        r2.code_sign_key.is_none(),
        "key not resent once the client has it"
    );
    // A lower seqno looks like a copied client: new host.
    next.rpc_seqno = 0;
    assert_eq!(rpc(url, &next).hostid, Some(2));
    // Unknown host id: new host.
    next.hostid = 999;
    assert_eq!(rpc(url, &next).hostid, Some(3));

    let s = get_json(url, "status");
    assert_eq!(s["jobs_made"], 3);
    assert_eq!(s["results_sent"], 3);
}

#[test]
fn per_resource_requests_are_honoured() {
    let f = start(&["--jobs", "10", "--fpops-est", "1e10"]);
    let url = f.server.url();
    // 1e10 fpops at the request's 1e9 FLOPS = 10 s a job: 25 s needs 3 jobs.
    assert_eq!(rpc(url, &work_request(25.0, 0.0)).results.len(), 3);
    // Instances: 2 idle CPUs need 2 jobs even for 1 s.
    assert_eq!(rpc(url, &work_request(1.0, 2.0)).results.len(), 2);
    // No CPU request: no jobs (GPU-less client).
    assert_eq!(rpc(url, &work_request(0.0, 0.0)).results.len(), 0);
    let mut no = work_request(100.0, 2.0);
    no.dont_send_work = true;
    assert_eq!(rpc(url, &no).results.len(), 0);
    // Wrong account key: a notice, nothing else.
    let mut bad = work_request(100.0, 2.0);
    bad.authenticator = "nope".into();
    let r = rpc(url, &bad);
    assert!(r.results.is_empty() && r.hostid.is_none());
    assert!(r.messages[0].text.contains("account key"));
    assert_eq!(get_json(url, "status")["results_sent"], 5);
}

#[test]
fn gpu_versions_go_only_to_gpu_requests() {
    let dir = tempfile::tempdir().expect("tmp");
    let exe = dir.path().join("gpu.sh");
    std::fs::write(&exe, "#!/bin/sh\n").expect("exe");
    let arg = format!("g={},cuda", exe.display());
    let f = start(&["--app", &arg, "--jobs", "4"]);
    let url = f.server.url();
    let r = rpc(url, &work_request(1000.0, 1.0));
    assert!(!r.results.is_empty());
    for v in &r.app_versions {
        assert_eq!(v.app_name, "demo", "no GPU version for a CPU request");
        assert!(v.usage.coprocs.is_empty());
    }
}

#[test]
fn reports_are_acked_counted_and_duplicates_detected() {
    let f = start(&["--jobs", "2"]);
    let url = f.server.url();
    let first = rpc(url, &work_request(1000.0, 2.0));
    let names: Vec<String> = first.results.iter().map(|r| r.name.clone()).collect();
    assert_eq!(names.len(), 2);
    let mut req = work_request(0.0, 0.0);
    req.hostid = 1;
    req.rpc_seqno = 1;
    req.results = vec![report(&names[0])];
    let r = rpc(url, &req);
    assert_eq!(r.result_acks, vec![names[0].clone()]);
    let s = get_json(url, "status");
    assert_eq!(s["results_reported"], 1);
    assert_eq!(s["duplicate_reports"], 0);

    // The same result again (the client missed the ack), plus the second one.
    req.rpc_seqno = 2;
    req.results = vec![report(&names[0]), report(&names[1])];
    let r = rpc(url, &req);
    assert_eq!(r.result_acks, names);
    let s = get_json(url, "status");
    assert_eq!(s["results_reported"], 2);
    assert_eq!(s["duplicate_reports"], 1);
    // An unknown result is acked but not counted.
    req.rpc_seqno = 3;
    req.results = vec![report("no_such_result")];
    assert_eq!(
        rpc(url, &req).result_acks,
        vec!["no_such_result".to_owned()]
    );
    assert_eq!(get_json(url, "status")["results_reported"], 2);
}

#[test]
fn sticky_input_is_deleted_once_no_job_needs_it() {
    let f = start(&["--jobs", "1", "--sticky-input"]);
    let url = f.server.url();
    let r = rpc(url, &work_request(100.0, 1.0));
    let input = r
        .file_infos
        .iter()
        .find(|fi| fi.sticky)
        .expect("sticky input")
        .name
        .clone();
    let sticky = StickyFile {
        name: input.clone(),
        nbytes: 16.0,
        status: 1,
    };
    let mut req = work_request(0.0, 0.0);
    req.hostid = 1;
    req.rpc_seqno = 1;
    req.sticky_files = vec![sticky.clone()];
    assert!(rpc(url, &req).delete_file_infos.is_empty(), "still needed");
    req.rpc_seqno = 2;
    req.results = vec![report(&r.results[0].name)];
    let done = rpc(url, &req);
    assert_eq!(done.delete_file_infos, vec![input]);
}

fn upload_body(name: &str, cert: &str, nbytes: usize, offset: usize, data: &[u8]) -> Vec<u8> {
    let mut b = format!(
        "<data_server_request>\n    <core_client_major_version>7</core_client_major_version>\n    \
         <core_client_minor_version>20</core_client_minor_version>\n    \
         <core_client_release>5</core_client_release>\n<file_upload>\n<file_info>\n\
         <name>{name}</name>\n<xml_signature>\n{cert}\n</xml_signature>\n\
         <max_nbytes>1000000000</max_nbytes>\n</file_info>\n<nbytes>{nbytes}</nbytes>\n\
         <md5_cksum>x</md5_cksum>\n<offset>{offset}</offset>\n<data>\n"
    )
    .into_bytes();
    b.extend_from_slice(data);
    b
}

fn size_query(name: &str) -> Vec<u8> {
    format!(
        "<data_server_request>\n    <core_client_major_version>7</core_client_major_version>\n    \
         <core_client_minor_version>20</core_client_minor_version>\n    \
         <core_client_release>5</core_client_release>\n    <get_file_size>{name}</get_file_size>\n\
         </data_server_request>\n"
    )
    .into_bytes()
}

#[test]
fn upload_handler_protocol_with_resume() {
    let f = start(&["--upload-certs", "--jobs", "1"]);
    let url = f.server.url();
    let reply = rpc(url, &work_request(100.0, 1.0));
    let res = &reply.results[0];
    let out = reply
        .file_infos
        .iter()
        .find(|fi| fi.name == res.output_files[0].file_name)
        .expect("output");
    let cert = out.xml_signature.clone().expect("cert");
    let handler = "cgi-bin/file_upload_handler";
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();

    let r = post(url, handler, &size_query(&out.name)).text();
    assert!(
        r.contains("<status>0</status>") && r.contains("<file_size>0</file_size>"),
        "{r}"
    );
    // First episode: only 4000 bytes arrive.
    let r = post(
        url,
        handler,
        &upload_body(&out.name, &cert, 10_000, 0, &data[..4000]),
    )
    .text();
    assert!(
        r.contains("<status>1</status>"),
        "short upload is transient: {r}"
    );
    let r = post(url, handler, &size_query(&out.name)).text();
    assert!(r.contains("<file_size>4000</file_size>"), "{r}");
    assert_eq!(get_json(url, "status")["uploads_received"], 0);
    // Resume from the offset.
    let r = post(
        url,
        handler,
        &upload_body(&out.name, &cert, 10_000, 4000, &data[4000..]),
    )
    .text();
    assert!(r.contains("<status>0</status>"), "{r}");
    let stored = f.server.results_dir().join(&res.name).join(&out.name);
    assert_eq!(std::fs::read(&stored).expect("stored per result"), data);
    assert_eq!(get_json(url, "status")["uploads_received"], 1);
    // Offset at the end: success without data (the server has it all); not counted twice.
    let r = post(
        url,
        handler,
        &upload_body(&out.name, &cert, 10_000, 10_000, b""),
    )
    .text();
    assert!(r.contains("<status>0</status>"), "{r}");
    assert_eq!(get_json(url, "status")["uploads_received"], 1);

    // Permanent errors: bad certificate, unknown or hostile names, too big, no <data>.
    let other = PrivateKey::generate(&mut rand::thread_rng(), 1024).expect("key");
    let forged = other
        .sign(
            format!(
                "<name>{}</name><max_nbytes>1000000000</max_nbytes>",
                out.name
            )
            .as_bytes(),
        )
        .expect("sign");
    for body in [
        upload_body(&out.name, &forged, 3, 0, b"abc"),
        upload_body("../../etc/passwd", &cert, 3, 0, b"abc"),
        upload_body("unknown_out", &cert, 3, 0, b"abc"),
        upload_body(&out.name, &cert, 2_000_000_000, 0, b"abc"),
        b"<data_server_request>\n<file_upload>\n<file_info>\n</file_info>\n".to_vec(),
    ] {
        let r = post(url, handler, &body).text();
        assert!(r.contains("<status>-1</status>"), "{r}");
    }
    assert_eq!(std::fs::read(&stored).expect("unchanged"), data);
}

#[test]
fn downloads_support_ranges() {
    let f = start(&["--jobs", "1"]);
    let url = f.server.url();
    let reply = rpc(url, &work_request(100.0, 1.0));
    let name = reply.workunits[0].input_files[0].file_name.clone();
    let path = format!("download/{name}");
    let r = request("GET", url, &path, &[("Range", "bytes=2-5")], b"");
    assert_eq!(r.status, 206);
    assert_eq!(r.body, b"2345");
    assert_eq!(r.header("content-range"), Some("bytes 2-5/16"));
    let r = request("GET", url, &path, &[("Range", "bytes=10-")], b"");
    assert_eq!(r.body, b"abcdef");
    let r = request("GET", url, &path, &[("Range", "bytes=-3")], b"");
    assert_eq!(r.body, b"def");
    let r = request("GET", url, &path, &[("Range", "bytes=16-")], b"");
    assert_eq!(r.status, 416);
    let r = request("HEAD", url, &path, &[], b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("16"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert_eq!(get(url, "download/..%2F..%2Fetc%2Fpasswd").status, 404);
    assert_eq!(get(url, "download/nothing").status, 404);
}

#[test]
fn state_survives_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let app = dir.path().join("a.sh");
    std::fs::write(&app, "#!/bin/sh\n").expect("app");
    let argv = |port: &str| {
        Args::parse_from([
            "x",
            "--port",
            port,
            "--data",
            data.to_str().expect("utf8"),
            "--app",
            &format!("demo={}", app.display()),
            "--jobs",
            "3",
            "--account-key",
            KEY,
        ])
    };
    let (key1, first) = {
        let s = Server::start(argv("0")).expect("start");
        let r = rpc(s.url(), &work_request(10.0, 1.0));
        (r.code_sign_key.clone().expect("key"), r)
    };
    assert_eq!(first.results.len(), 1);
    let s = Server::start(argv("0")).expect("restart");
    let st = get_json(s.url(), "status");
    assert_eq!(st["jobs_made"], 3, "jobs not made again");
    assert_eq!(st["results_sent"], 1);
    assert_eq!(st["hosts"], 1);
    let mut req = work_request(1000.0, 4.0);
    req.hostid = 1;
    req.rpc_seqno = 1;
    req.other_results = holding(&first);
    let r = rpc(s.url(), &req);
    assert_eq!(r.hostid, None, "host record kept");
    assert_eq!(r.results.len(), 2, "only the unsent jobs");
    assert_eq!(
        r.code_sign_key.expect("key"),
        key1,
        "same key after restart"
    );
}
