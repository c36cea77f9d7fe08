//! What a data server sends back: the upload handler's `<data_server_reply>` (status, size
//! for resuming) and the checks on a downloaded file (size, MD5, signature) against a
//! `<file_info>` taken from the input, with the fast MD5 compared to the reference one.
//!
//! A project's code-signing key and signatures (from a reply, checked against each signed
//! download) go through BOINC's RSA check.
//!
//! Input: byte 0 picks the part; the rest is the reply text, a `<file_info>` document and
//! the downloaded bytes split at the first NUL, or a key text and a signature text split at
//! the first NUL.
#![no_main]

use ferrite_net::fast_md5::Md5;
use ferrite_net::ExpectedFile;
use ferrite_project::files::{
    parse_upload_reply, record_verification, resume_offset, verify_download, UploadStatus,
};
use ferrite_project::verify::{BoincCrypt, SignatureVerifier as _};
use ferrite_proto::client_state::{ClientState, FileInfo};
use ferrite_proto::crypt::PublicKey;
use libfuzzer_sys::fuzz_target;
use md5::Digest as _;

fn fast_md5(bytes: &[u8], split: usize) -> String {
    let mut h = Md5::new();
    let (a, b) = bytes.split_at(split.min(bytes.len()));
    h.update(a);
    h.update(b);
    h.hex()
}

fn reference_md5(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(32);
    for b in md5::Md5::digest(bytes) {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// A `<file_info>` as the client state holds it, read by the state parser.
fn file_info(text: &str) -> Option<FileInfo> {
    let doc = format!(
        "<client_state><project><master_url>http://x/</master_url></project>{text}</client_state>"
    );
    let state = ClientState::parse(&doc, "client_state.xml").ok()?.value;
    state.projects.into_iter().next()?.files.into_iter().next()
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    match sel % 4 {
        0 => {
            let text = String::from_utf8_lossy(rest);
            let reply = parse_upload_reply(&text);
            if let Some(has) = reply.file_size {
                for nbytes in [0, 1, has, has.saturating_add(1), u64::MAX] {
                    if let Some(o) = resume_offset(has, nbytes) {
                        assert!(o < nbytes);
                    }
                }
            }
            if reply.status == UploadStatus::Success {
                assert!(text.contains("<data_server_reply"));
            }
        }
        1 => {
            let split = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            let (head, body) = rest.split_at(split);
            let body = body.get(1..).unwrap_or_default();
            let Ok(text) = std::str::from_utf8(head) else {
                return;
            };
            let Some(mut file) = file_info(text) else {
                return;
            };
            let md5 = fast_md5(body, usize::from(sel) * 7);
            for key in [None, Some("1024\n00\n.\n")] {
                for unsigned_ok in [false, true] {
                    let verdict = |_: &str, m: &str, s: &str| s.contains(m);
                    let r =
                        verify_download(&file, body.len() as u64, &md5, key, unsigned_ok, &verdict);
                    record_verification(&mut file, &r);
                    match &r {
                        Ok(()) => assert_eq!(file.status, 1),
                        Err(e) => assert_eq!(file.status, e.code()),
                    }
                }
            }
            let expected = ExpectedFile {
                nbytes: (file.nbytes.is_finite() && file.nbytes >= 0.0)
                    .then_some(file.nbytes as u64),
                md5: (!file.md5_cksum.is_empty()).then(|| file.md5_cksum.clone()),
                max_nbytes: (file.max_nbytes.is_finite() && file.max_nbytes >= 0.0)
                    .then_some(file.max_nbytes as u64),
                gzip: file.download_gzipped,
                gzipped_nbytes: (file.gzipped_nbytes.is_finite() && file.gzipped_nbytes > 0.0)
                    .then_some(file.gzipped_nbytes as u64),
            };
            let _ = expected.wire_limit();
        }
        2 => {
            let text = String::from_utf8_lossy(rest);
            let (key, sig) = text.split_once('\0').unwrap_or((&text, ""));
            let md5 = reference_md5(sig.as_bytes());
            let _ = BoincCrypt.verify_md5(key, &md5, sig);
            let _ = BoincCrypt.verify_string(key, sig, key);
            if let Ok(k) = PublicKey::parse(key) {
                let written = k.to_text();
                match PublicKey::parse(&written) {
                    Ok(again) => assert_eq!(k, again, "a written key reads back differently"),
                    Err(e) => panic!("a written key does not parse again: {e}\n{written}"),
                }
            }
        }
        _ => {
            let fast = fast_md5(rest, usize::from(sel));
            assert_eq!(fast, reference_md5(rest), "fast MD5 differs");
        }
    }
});
