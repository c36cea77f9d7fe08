//! Code signing against real data: a BOINC 8.3 server's signed executable, the reference
//! captures' signed shell script, and round trips with freshly made keys.

use ferrite_proto::crypt::{md5_hex, read_hex_block, CryptError, PrivateKey, PublicKey};
use ferrite_proto::sched_reply::SchedulerReply;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/crypt/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).expect("fixture")
}

/// MD5 of the 3,156,880-byte executable the real server signed (the executable itself is
/// not kept; its README gives the MD5, and the decrypted signature must equal it).
const REAL_EXE_MD5: &str = "e28157c92a1ca0fe0653c0aaa34eb874";

#[test]
fn real_server_signature_verifies_with_its_code_sign_key() {
    let key_text = fixture("code_sign_public");
    let key = PublicKey::parse(&key_text).expect("real key parses");
    assert_eq!(key.bits(), 1024);
    // Our writer reproduces the server's key text exactly.
    assert_eq!(key.to_text(), key_text.trim_end());

    let reply = SchedulerReply::parse(&fixture("sched_reply_attach.xml"), "reply")
        .expect("reply parses")
        .value;
    // The key the reply carries is the same one.
    let sent = PublicKey::parse(reply.code_sign_key.as_deref().expect("key in reply"))
        .expect("key parses");
    assert_eq!(sent, key);
    let exe = reply
        .file_infos
        .iter()
        .find(|f| f.name == "upper_case_1.0_x86_64-pc-linux-gnu")
        .expect("executable file_info");
    let sig = exe.file_signature.as_deref().expect("signed");
    key.verify_md5(REAL_EXE_MD5, sig)
        .expect("real signature verifies");

    // Any other MD5 is refused.
    let other = "e28157c92a1ca0fe0653c0aaa34eb875";
    assert!(matches!(
        key.verify_md5(other, sig),
        Err(CryptError::BadSignature)
    ));
}

#[test]
fn reference_capture_signature_verifies_over_the_served_file() {
    let reply = SchedulerReply::parse(
        &fixture("sched_reply_04_work_signed_app_3_jobs.xml"),
        "reply",
    )
    .expect("reply parses")
    .value;
    let key = PublicKey::parse(reply.code_sign_key.as_deref().expect("key")).expect("key");
    let fi = reply
        .file_infos
        .iter()
        .find(|f| f.name == "fixture_app_2.00.sh")
        .expect("app file");
    let body = std::fs::read(format!(
        "{}/tests/fixtures/crypt/fixture_app_2.00.sh",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("served file");
    assert_eq!(md5_hex(&body), fi.md5_cksum);
    let sig = fi.file_signature.as_deref().expect("signature");
    key.verify(&body, sig)
        .expect("verifies over the file bytes");

    let mut tampered = body.clone();
    tampered[10] ^= 1;
    assert!(key.verify(&tampered, sig).is_err());
}

#[test]
fn generated_key_round_trips_and_refuses_tampering() {
    let mut rng = rand::thread_rng();
    let key = PrivateKey::generate(&mut rng, 1024).expect("key");
    let public = key.public_key();
    let data = b"#!/bin/sh\necho hello > out\n";
    let sig = key.sign(data).expect("sign");
    assert!(sig.ends_with("\n."));
    assert_eq!(read_hex_block(&sig).len(), 128);
    public.verify(data, &sig).expect("own signature verifies");

    // Key texts round-trip exactly.
    let priv_text = key.to_text().expect("private text");
    let again = PrivateKey::parse(&priv_text).expect("private key parses");
    assert_eq!(again.to_text().expect("text"), priv_text);
    assert_eq!(again.public_key(), public);
    let pub_text = public.to_text();
    assert!(pub_text.starts_with("1024\n"));
    assert_eq!(pub_text.lines().count(), 10);
    assert_eq!(PublicKey::parse(&pub_text).expect("parses"), public);
    // A signature made with the re-read key is the same (PKCS#1 v1.5 is deterministic).
    assert_eq!(again.sign(data).expect("sign"), sig);

    // Tampered data.
    assert!(matches!(
        public.verify(b"#!/bin/sh\necho hellO > out\n", &sig),
        Err(CryptError::BadSignature)
    ));
    // Tampered signature: flip one hex digit.
    let mut bad = sig.clone().into_bytes();
    bad[5] = if bad[5] == b'0' { b'1' } else { b'0' };
    let bad = String::from_utf8(bad).expect("ascii");
    assert!(public.verify(data, &bad).is_err());
    // Truncated signature.
    assert!(public.verify(data, &sig[..100]).is_err());
    assert!(matches!(
        public.verify(data, "."),
        Err(CryptError::BadSignatureText)
    ));
    // Another key.
    let other = PrivateKey::generate(&mut rng, 1024)
        .expect("key")
        .public_key();
    assert!(other.verify(data, &sig).is_err());
}
