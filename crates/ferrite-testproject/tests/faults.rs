//! Each injectable fault, armed at run time (`POST /fault`) or at start (`--fault`), does
//! what `--help` says, for the number of requests asked, and then the server behaves again.

mod common;

use std::time::Duration;

use common::{get, get_json, post, request, request_timeout, rpc, start, work_request};
use ferrite_proto::crypt::{md5_hex, PublicKey};
use ferrite_proto::sched_reply::SchedulerReply;
use ferrite_testproject::project::HUGE_FILE_BYTES;

fn arm(url: &str, spec: &str) {
    let r = post(url, "fault", spec.as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
}

fn sched_raw(url: &str) -> common::Resp {
    post(url, "cgi", work_request(0.0, 0.0).to_xml().as_bytes())
}

#[test]
fn unknown_fault_is_refused() {
    let f = start(&[]);
    let r = post(f.server.url(), "fault", b"no-such-fault");
    assert_eq!(r.status, 400);
    assert!(r.text().contains("sched-500"), "lists the faults");
}

#[test]
fn scheduler_faults() {
    let f = start(&["--fault", "sched-500:2"]);
    let url = f.server.url();
    assert_eq!(get_json(url, "status")["faults_armed"]["sched-500"], 2);
    assert_eq!(sched_raw(url).status, 500);
    assert_eq!(sched_raw(url).status, 500);
    assert_eq!(sched_raw(url).status, 200, "count used up");

    arm(url, "sched-truncated");
    let r = sched_raw(url);
    assert_eq!(r.status, 200);
    assert!(r.text().starts_with("<scheduler_reply>"));
    assert!(
        SchedulerReply::parse(&r.text(), "reply").is_err(),
        "{}",
        r.text()
    );

    arm(url, "sched-malformed");
    let r = sched_raw(url);
    assert!(
        SchedulerReply::parse(&r.text(), "reply").is_err(),
        "{}",
        r.text()
    );
    assert!(SchedulerReply::parse(&sched_raw(url).text(), "reply").is_ok());

    arm(url, "sched-timeout");
    let body = work_request(0.0, 0.0).to_xml();
    let r = request_timeout(
        "POST",
        url,
        "cgi",
        &[],
        body.as_bytes(),
        Duration::from_secs(2),
    );
    assert!(r.is_err(), "no answer within 2 s: {r:?}");
    assert_eq!(sched_raw(url).status, 200, "other requests still served");
}

#[test]
fn master_download_and_upload_http_faults() {
    let f = start(&["--jobs", "1"]);
    let url = f.server.url();
    arm(url, "master-500");
    assert_eq!(get(url, "").status, 500);
    assert_eq!(get(url, "").status, 200);

    let reply = rpc(url, &work_request(10.0, 1.0));
    let input = reply.workunits[0].input_files[0].file_name.clone();
    let path = format!("download/{input}");
    arm(url, "download-500");
    assert_eq!(get(url, &path).status, 500);
    assert_eq!(get(url, &path).body, b"0123456789abcdef");

    arm(url, "download-stall");
    let r = request_timeout("GET", url, &path, &[], b"", Duration::from_secs(2));
    assert!(r.is_err(), "stalled: {r:?}");

    let handler = "cgi-bin/file_upload_handler";
    let q =
        b"<data_server_request>\n<get_file_size>x_out</get_file_size>\n</data_server_request>\n";
    arm(url, "upload-500");
    assert_eq!(post(url, handler, q).status, 500);
    arm(url, "upload-transient");
    assert!(post(url, handler, q).text().contains("<status>1</status>"));
    arm(url, "upload-permanent");
    assert!(post(url, handler, q).text().contains("<status>-1</status>"));
    // Back to normal: an unknown file is a permanent error, but a real reply.
    assert_eq!(post(url, handler, q).status, 200);
}

#[test]
fn wrong_md5_and_hostile_name_faults() {
    let f = start(&[
        "--jobs",
        "3",
        "--fault",
        "wrong-md5",
        "--fault",
        "hostile-name",
    ]);
    let url = f.server.url();
    let reply = rpc(url, &work_request(1.0, 1.0));
    let wu = &reply.workunits[0];
    let fi = reply
        .file_infos
        .iter()
        .find(|fi| fi.name == wu.input_files[0].file_name)
        .expect("input");
    assert!(fi.name.contains(".."), "hostile name: {}", fi.name);
    let data = get(url, fi.download_urls[0].trim_start_matches(url)).body;
    assert_eq!(data, b"0123456789abcdef");
    assert_ne!(md5_hex(&data), fi.md5_cksum, "wrong MD5 announced");
    // The next job is normal.
    let reply = rpc(url, &work_request(1.0, 1.0));
    let fi = reply
        .file_infos
        .iter()
        .find(|fi| fi.name == reply.workunits[0].input_files[0].file_name)
        .expect("input");
    assert!(!fi.name.contains(".."));
    assert_eq!(fi.md5_cksum, md5_hex(b"0123456789abcdef"));
}

#[test]
fn bad_signature_fault() {
    let f = start(&["--jobs", "2"]);
    let url = f.server.url();
    arm(url, "bad-signature");
    let reply = rpc(url, &work_request(1.0, 1.0));
    let key = PublicKey::parse(reply.code_sign_key.as_deref().expect("key")).expect("key");
    let exe = reply
        .file_infos
        .iter()
        .find(|fi| fi.executable)
        .expect("exe");
    let body = get(url, &format!("download/{}", exe.name)).body;
    assert!(key
        .verify(&body, exe.file_signature.as_deref().expect("sig"))
        .is_err());
    let reply = rpc(url, &work_request(1.0, 1.0));
    let exe = reply
        .file_infos
        .iter()
        .find(|fi| fi.executable)
        .expect("exe");
    key.verify(&body, exe.file_signature.as_deref().expect("sig"))
        .expect("good again");
}

#[test]
fn huge_file_fault_is_streamed() {
    let f = start(&["--jobs", "1"]);
    let url = f.server.url();
    arm(url, "huge-file");
    let reply = rpc(url, &work_request(1.0, 1.0));
    let wu = &reply.workunits[0];
    assert_eq!(wu.input_files.len(), 2);
    let huge = reply
        .file_infos
        .iter()
        .find(|fi| fi.name == wu.input_files[1].file_name)
        .expect("huge file_info");
    assert_eq!(huge.nbytes, HUGE_FILE_BYTES as f64);
    let path = format!("download/{}", huge.name);
    let r = request("HEAD", url, &path, &[], b"");
    assert_eq!(r.header("content-length"), Some("1073741824"));
    // The last bytes, without reading the rest.
    let r = request("GET", url, &path, &[("Range", "bytes=-4")], b"");
    assert_eq!(r.status, 206);
    assert_eq!(r.body, vec![0u8; 4]);
}
