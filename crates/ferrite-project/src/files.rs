//! Files: checking a downloaded file against its [`FileInfo`]
//! (`client/cs_files.cpp: FILE_INFO::verify_file`), and the texts of the upload handler
//! protocol (`client/file_xfer.cpp`, `sched/file_upload_handler.cpp`).
//!
//! The daemon hashes the bytes it wrote (for gzip downloads, the uncompressed bytes) and
//! passes the length and MD5 here; it sends the request texts and hands the reply text back.

use ferrite_proto::client_state::{ClientVersion, FileInfo};
use ferrite_proto::xml::XmlReader;

use crate::verify::SignatureVerifier;

/// Why a downloaded file is not accepted; each maps to the BOINC error code the file's
/// status takes ([`VerifyError::code`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VerifyError {
    /// Size differs from `nbytes` (`ERR_FILE_WRONG_SIZE`, -221).
    #[error("wrong size: expected {expected} bytes, got {got}")]
    WrongSize {
        /// `nbytes`.
        expected: f64,
        /// Actual length.
        got: u64,
    },
    /// The file must be signed and has no signature (`ERR_NO_SIGNATURE`, -123).
    #[error("missing signature")]
    NoSignature,
    /// The signature does not verify, or there is no key to check it (`ERR_RSA_FAILED`,
    /// -120).
    #[error("signature verification failed")]
    BadSignature,
    /// MD5 differs from `md5_cksum` (`ERR_MD5_FAILED`, -119).
    #[error("MD5 check failed: expected {expected}, got {got}")]
    Md5Mismatch {
        /// `md5_cksum`.
        expected: String,
        /// Actual MD5.
        got: String,
    },
}

impl VerifyError {
    /// The BOINC error code stored as the file's status.
    pub fn code(&self) -> i32 {
        match self {
            VerifyError::WrongSize { .. } => -221,
            VerifyError::NoSignature => -123,
            VerifyError::BadSignature => -120,
            VerifyError::Md5Mismatch { .. } => -119,
        }
    }
}

/// Checks a downloaded file: size, then the signature for files that need one (MD5 not
/// compared then, as BOINC does), else the MD5 when known. `code_sign_key` is the
/// project's key; `unsigned_apps_ok` is cc_config's option.
pub fn verify_download(
    file: &FileInfo,
    len: u64,
    md5_hex: &str,
    code_sign_key: Option<&str>,
    unsigned_apps_ok: bool,
    verifier: &dyn SignatureVerifier,
) -> Result<(), VerifyError> {
    if file.nbytes > 0.0 && file.nbytes != len as f64 {
        return Err(VerifyError::WrongSize {
            expected: file.nbytes,
            got: len,
        });
    }
    let md5 = md5_hex.trim().to_ascii_lowercase();
    if file.signature_required && !unsigned_apps_ok {
        let sig = file
            .file_signature
            .as_deref()
            .ok_or(VerifyError::NoSignature)?;
        let key = code_sign_key
            .filter(|k| !k.trim().is_empty())
            .ok_or(VerifyError::BadSignature)?;
        return if verifier.verify_md5(key, &md5, sig) {
            Ok(())
        } else {
            Err(VerifyError::BadSignature)
        };
    }
    let expected = file.md5_cksum.trim().to_ascii_lowercase();
    if !expected.is_empty() && expected != md5 {
        return Err(VerifyError::Md5Mismatch { expected, got: md5 });
    }
    Ok(())
}

/// Records a verification outcome in the file: present, or the error code and message.
pub fn record_verification(file: &mut FileInfo, outcome: &Result<(), VerifyError>) {
    match outcome {
        Ok(()) => {
            file.status = 1;
            file.error_msg = None;
        }
        Err(e) => {
            file.status = e.code();
            file.error_msg = Some(e.to_string());
        }
    }
}

/// Below this size the size query is skipped and uploads start at 0
/// (`FILE_SIZE_CHECK_THRESHOLD`).
pub const FILE_SIZE_CHECK_THRESHOLD: u64 = 8192;

fn version_lines(v: ClientVersion) -> String {
    format!(
        "<data_server_request>\n    <core_client_major_version>{}</core_client_major_version>\n    <core_client_minor_version>{}</core_client_minor_version>\n    <core_client_release>{}</core_client_release>\n",
        v.major, v.minor, v.release
    )
}

/// The body of a size query (`<get_file_size>`).
pub fn get_file_size_request(version: ClientVersion, name: &str) -> String {
    format!(
        "{}    <get_file_size>{}</get_file_size>\n</data_server_request>\n",
        version_lines(version),
        ferrite_proto::xml::escape(name)
    )
}

/// The header of an upload: send it, then the file's bytes from `offset` to the end, and
/// nothing after. Every tag is on its own line and it ends with `<data>\n`, as the handler
/// reads it line by line. The file's upload certificate is echoed inside `<xml_signature>`;
/// a project that does not make certificates (`dont_generate_upload_certificates`, the stock
/// setting) sends none and gets the element empty, as the official client sends it.
pub fn file_upload_header(
    version: ClientVersion,
    file: &FileInfo,
    nbytes: u64,
    md5_hex: &str,
    offset: u64,
) -> String {
    let cert = file.xml_signature.as_deref().map(str::trim).unwrap_or("");
    format!(
        "{}<file_upload>\n<file_info>\n<name>{}</name>\n<xml_signature>\n{}</xml_signature>\n<max_nbytes>{:.0}</max_nbytes>\n</file_info>\n<nbytes>{}</nbytes>\n<md5_cksum>{}</md5_cksum>\n<offset>{}</offset>\n<data>\n",
        version_lines(version),
        ferrite_proto::xml::escape(&file.name),
        cert,
        file.max_nbytes,
        nbytes,
        md5_hex.trim(),
        offset
    )
}

/// How the upload handler answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadStatus {
    /// Status 0.
    Success,
    /// Status 1, or no readable status: retry later (`ERR_UPLOAD_TRANSIENT`, -127).
    Transient,
    /// Status -1: give up on this file (`ERR_UPLOAD_PERMANENT`, -128).
    Permanent,
}

/// A `<data_server_reply>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadReply {
    /// What to do next.
    pub status: UploadStatus,
    /// For a size query: bytes the server already has.
    pub file_size: Option<u64>,
    /// The handler's message, to log.
    pub message: Option<String>,
}

/// Reads the handler's answer; anything unreadable counts as a transient error.
pub fn parse_upload_reply(text: &str) -> UploadReply {
    let mut out = UploadReply {
        status: UploadStatus::Transient,
        file_size: None,
        message: None,
    };
    let Some(start) = text.find("<data_server_reply") else {
        return out;
    };
    let mut r = XmlReader::new(&text[start..], "data_server_reply");
    let Ok(root) = r.root("data_server_reply") else {
        return out;
    };
    if root.is_empty() {
        return out;
    }
    let mut status: Option<i32> = None;
    while let Ok(Some(t)) = r.next_child() {
        let ok = match t.name() {
            "status" => r.num::<i32>(&t).map(|v| status = v).is_ok(),
            "file_size" => r
                .num::<f64>(&t)
                .map(|v| out.file_size = v.filter(|v| v.is_finite() && *v >= 0.0).map(|v| v as u64))
                .is_ok(),
            "message" => r.string(&t).map(|m| out.message = Some(m)).is_ok(),
            _ => r.skip(&t).is_ok(),
        };
        if !ok {
            break;
        }
    }
    out.status = match status {
        Some(0) => UploadStatus::Success,
        Some(s) if s < 0 => UploadStatus::Permanent,
        _ => UploadStatus::Transient,
    };
    out
}

/// After a size query answered `server_has` bytes: the offset to upload from, or `None`
/// when the server already has the whole file (the upload is complete).
pub fn resume_offset(server_has: u64, nbytes: u64) -> Option<u64> {
    (server_has < nbytes).then_some(server_has)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn fi() -> FileInfo {
        FileInfo {
            name: "f".into(),
            nbytes: 4.0,
            md5_cksum: "8D777F385D3DFEC8815D20F7496026DC".into(),
            ..FileInfo::default()
        }
    }

    #[test]
    fn size_then_md5() {
        let never = |_: &str, _: &str, _: &str| false;
        let md5 = ferrite_proto::crypt::md5_hex(b"data");
        assert_eq!(verify_download(&fi(), 4, &md5, None, false, &never), Ok(()));
        assert_eq!(
            verify_download(&fi(), 5, &md5, None, false, &never)
                .unwrap_err()
                .code(),
            -221
        );
        let e = verify_download(&fi(), 4, &"0".repeat(32), None, false, &never).unwrap_err();
        assert_eq!(e.code(), -119);
        let mut f = fi();
        record_verification(&mut f, &Err(e));
        assert_eq!(f.status, -119);
        record_verification(&mut f, &Ok(()));
        assert_eq!((f.status, f.error_msg), (1, None));
    }

    #[test]
    fn signed_files_need_signature_and_key_and_skip_md5() {
        let yes = |k: &str, m: &str, s: &str| k == "K" && s == "S" && m.len() == 32;
        let mut f = fi();
        f.signature_required = true;
        let other_md5 = "f".repeat(32);
        assert_eq!(
            verify_download(&f, 4, &other_md5, Some("K"), false, &yes),
            Err(VerifyError::NoSignature)
        );
        f.file_signature = Some("S".into());
        assert_eq!(
            verify_download(&f, 4, &other_md5, Some("K"), false, &yes),
            Ok(())
        );
        assert_eq!(
            verify_download(&f, 4, &other_md5, None, false, &yes),
            Err(VerifyError::BadSignature)
        );
        f.file_signature = Some("T".into());
        assert_eq!(
            verify_download(&f, 4, &other_md5, Some("K"), false, &yes),
            Err(VerifyError::BadSignature)
        );
        // unsigned_apps_ok falls back to the MD5.
        assert_eq!(
            verify_download(&f, 4, &other_md5, Some("K"), true, &yes)
                .unwrap_err()
                .code(),
            -119
        );
    }

    #[test]
    fn size_query_and_replies() {
        let v = ClientVersion {
            major: 8,
            minor: 2,
            release: 1,
        };
        assert_eq!(
            get_file_size_request(v, "out_0"),
            "<data_server_request>\n    <core_client_major_version>8</core_client_major_version>\n    <core_client_minor_version>2</core_client_minor_version>\n    <core_client_release>1</core_client_release>\n    <get_file_size>out_0</get_file_size>\n</data_server_request>\n"
        );
        let r = parse_upload_reply(
            "<data_server_reply>\n<status>0</status>\n<file_size>1234</file_size>\n</data_server_reply>",
        );
        assert_eq!((r.status, r.file_size), (UploadStatus::Success, Some(1234)));
        let r = parse_upload_reply(
            "<data_server_reply><status>-1</status><message>bad signature</message></data_server_reply>",
        );
        assert_eq!(r.status, UploadStatus::Permanent);
        assert_eq!(r.message.as_deref(), Some("bad signature"));
        assert_eq!(
            parse_upload_reply("<data_server_reply><status>1</status></data_server_reply>").status,
            UploadStatus::Transient
        );
        for junk in [
            "",
            "<html>502</html>",
            "<data_server_reply><status>x",
            "<data_server_reply/>",
        ] {
            assert_eq!(
                parse_upload_reply(junk).status,
                UploadStatus::Transient,
                "{junk}"
            );
        }
        assert_eq!(resume_offset(10, 100), Some(10));
        assert_eq!(resume_offset(100, 100), None);
    }

    #[test]
    fn a_file_without_certificate_is_uploaded_with_an_empty_signature() {
        let h = file_upload_header(ClientVersion::default(), &fi(), 4, "x", 0);
        assert!(
            h.contains("<name>f</name>\n<xml_signature>\n</xml_signature>\n<max_nbytes>"),
            "{h}"
        );
        assert!(h.ends_with("<offset>0</offset>\n<data>\n"), "{h}");
    }
}
