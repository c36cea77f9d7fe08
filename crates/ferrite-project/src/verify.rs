//! The signature check this crate needs, as a small trait, so the daemon decides which
//! implementation checks BOINC code signatures. [`BoincCrypt`] is the real one
//! (`ferrite_proto::crypt`); tests can pass a closure.

use ferrite_proto::crypt::PublicKey;

/// Checks a BOINC signature: `signature_text` (BOINC hex block) made with the private half
/// of `key_text` (BOINC public-key text) over the 32 lowercase hex characters `md5_hex`.
pub trait SignatureVerifier {
    /// True when the signature is valid. Any malformed input is simply `false`.
    fn verify_md5(&self, key_text: &str, md5_hex: &str, signature_text: &str) -> bool;

    /// Checks a signature over a string (key rollover): the MD5 of its bytes is what is
    /// signed.
    fn verify_string(&self, key_text: &str, data: &str, signature_text: &str) -> bool {
        self.verify_md5(
            key_text,
            &ferrite_proto::crypt::md5_hex(data.as_bytes()),
            signature_text,
        )
    }
}

impl<F> SignatureVerifier for F
where
    F: Fn(&str, &str, &str) -> bool,
{
    fn verify_md5(&self, key_text: &str, md5_hex: &str, signature_text: &str) -> bool {
        self(key_text, md5_hex, signature_text)
    }
}

/// BOINC's RSA scheme, by `ferrite_proto::crypt`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BoincCrypt;

impl SignatureVerifier for BoincCrypt {
    fn verify_md5(&self, key_text: &str, md5_hex: &str, signature_text: &str) -> bool {
        match PublicKey::parse(key_text) {
            Ok(key) => key.verify_md5(md5_hex, signature_text).is_ok(),
            Err(_) => false,
        }
    }
}
