//! BOINC code signing: the text formats of RSA keys and signatures (`lib/crypt.cpp`) and the
//! signature scheme itself.
//!
//! * A **hex block** is bytes as lowercase hex, 32 bytes per line, then a line holding `.`.
//!   Reading skips white space and stops at the first other non-hex character.
//! * A **public key** is the key size in bits on the first line, then a hex block of the
//!   modulus and the public exponent, each big-endian and left-padded to 128 bytes.
//! * A **private key** has the same layout with modulus, public exponent, private exponent
//!   (128 bytes each), the two primes, the two prime exponents and the CRT coefficient
//!   (64 bytes each).
//! * A **signature** over some data is the RSA private-key operation, with PKCS#1 v1.5
//!   type-1 padding and no DigestInfo, on the 32 ASCII characters of the data's MD5 in
//!   lowercase hex; it is written as a hex block.
//!
//! BOINC keys are at most 1024 bits (`MAX_RSA_MODULUS_BITS`), so that is all this module
//! reads or writes.

use std::fmt::Write as _;
use std::io::Read;

use md5::{Digest, Md5};
use rsa::rand_core::CryptoRngCore;
use rsa::traits::{PrivateKeyParts, PublicKeyParts};
use rsa::{BigUint, Pkcs1v15Sign, RsaPrivateKey, RsaPublicKey};

/// Bytes per big number of the modulus size (`MAX_RSA_MODULUS_LEN`).
const MODULUS_LEN: usize = 128;
/// Bytes per big number of the prime size (`MAX_RSA_PRIME_LEN`).
const PRIME_LEN: usize = 64;
/// Length of a public key's hex block.
const PUBLIC_LEN: usize = 2 * MODULUS_LEN;
/// Length of a private key's hex block.
const PRIVATE_LEN: usize = 3 * MODULUS_LEN + 5 * PRIME_LEN;
/// Largest key BOINC handles.
pub const MAX_KEY_BITS: usize = 1024;

/// Why a key or signature could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CryptError {
    /// The text is not in BOINC's key format (`ERR_BAD_HEX_FORMAT`).
    #[error("bad key text: {0}")]
    BadKey(&'static str),
    /// The signature text holds no hex data (`ERR_BAD_HEX_FORMAT`).
    #[error("bad signature text: no hex data")]
    BadSignatureText,
    /// The signature does not match the data under this key (`ERR_RSA_FAILED`).
    #[error("signature verification failed")]
    BadSignature,
    /// The RSA library refused the key or the operation (`ERR_CRYPTO`).
    #[error("RSA: {0}")]
    Rsa(#[from] rsa::Error),
    /// Reading the data to sign or check failed.
    #[error("reading the data: {0}")]
    Io(#[from] std::io::Error),
}

/// MD5 of `data` as 32 lowercase hex characters (what BOINC signs).
pub fn md5_hex(data: &[u8]) -> String {
    hex_lower(&Md5::digest(data))
}

/// MD5 of everything `reader` yields, as 32 lowercase hex characters; reads in 64 KiB
/// pieces, so a large file is never held in memory.
pub fn md5_hex_reader(mut reader: impl Read) -> std::io::Result<String> {
    let mut h = Md5::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&buf[..n]);
    }
    Ok(hex_lower(&h.finalize()))
}

fn hex_lower(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Writes `bytes` as a BOINC hex block: 32 bytes per line, every line ending in `\n`, then
/// the terminator line `.` (no newline after it, as the block is usually wrapped in XML).
pub fn write_hex_block(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2 + bytes.len() / 32 + 4);
    for line in bytes.chunks(32) {
        s.push_str(&hex_lower(line));
        s.push('\n');
    }
    s.push('.');
    s
}

/// Reads a BOINC hex block: white space is skipped, reading stops at the first other
/// character that is not a hex digit (normally the `.` terminator) or at an unpaired digit.
pub fn read_hex_block(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() / 2);
    let mut high: Option<u8> = None;
    for c in text.bytes() {
        if c.is_ascii_whitespace() && high.is_none() {
            continue;
        }
        let Some(v) = (c as char).to_digit(16) else {
            break;
        };
        // `to_digit(16)` is below 16, so it fits a byte.
        let v = v as u8;
        match high.take() {
            None => high = Some(v),
            Some(h) => out.push(h << 4 | v),
        }
    }
    out
}

/// Splits `text` into the leading bit count and the hex block after it.
fn split_key_text(text: &str) -> Result<(u16, Vec<u8>), CryptError> {
    let text = text.trim_start();
    let (first, rest) = text
        .split_once('\n')
        .ok_or(CryptError::BadKey("no line break after the bit count"))?;
    let bits: u16 = first
        .trim_end_matches('\r')
        .parse()
        .map_err(|_| CryptError::BadKey("first line is not a bit count"))?;
    if bits == 0 {
        return Err(CryptError::BadKey("bit count is 0"));
    }
    Ok((bits, read_hex_block(rest)))
}

fn fixed(n: &BigUint, len: usize) -> Result<Vec<u8>, CryptError> {
    let b = n.to_bytes_be();
    if b.len() > len {
        return Err(CryptError::BadKey(
            "a number is larger than BOINC's key format holds",
        ));
    }
    let mut out = vec![0u8; len - b.len()];
    out.extend_from_slice(&b);
    Ok(out)
}

/// Writes the bit count line and the hex block.
fn key_text(bits: u16, data: &[u8]) -> String {
    format!("{bits}\n{}", write_hex_block(data))
}

/// A project's public code-signing key, as it travels in `<code_sign_key>`.
#[derive(Debug, Clone, PartialEq)]
pub struct PublicKey {
    /// The bit count written on the first line (informational; the math uses the modulus).
    bits: u16,
    /// The key itself.
    key: RsaPublicKey,
}

impl PublicKey {
    /// Parses BOINC's public-key text (surrounding white space allowed).
    pub fn parse(text: &str) -> Result<PublicKey, CryptError> {
        let (bits, data) = split_key_text(text)?;
        if data.len() != PUBLIC_LEN {
            return Err(CryptError::BadKey("public key data is not 256 bytes"));
        }
        let n = BigUint::from_bytes_be(&data[..MODULUS_LEN]);
        let e = BigUint::from_bytes_be(&data[MODULUS_LEN..]);
        let key = RsaPublicKey::new(n, e)?;
        Ok(PublicKey { bits, key })
    }

    /// BOINC's text for this key, ending with the `.` line (no final newline).
    pub fn to_text(&self) -> String {
        let mut data = Vec::with_capacity(PUBLIC_LEN);
        // Both numbers of a key we parsed or made fit 128 bytes.
        for n in [self.key.n(), self.key.e()] {
            data.extend(fixed(n, MODULUS_LEN).unwrap_or_default());
        }
        key_text(self.bits, &data)
    }

    /// The key size in bits as written in the text.
    pub fn bits(&self) -> u16 {
        self.bits
    }

    /// Checks `signature` (BOINC hex text) over data whose MD5 hex is `md5_hex`.
    pub fn verify_md5(&self, md5_hex: &str, signature: &str) -> Result<(), CryptError> {
        let sig = read_hex_block(signature);
        if sig.is_empty() {
            return Err(CryptError::BadSignatureText);
        }
        if sig.len() != self.key.size() {
            return Err(CryptError::BadSignature);
        }
        self.key
            .verify(Pkcs1v15Sign::new_unprefixed(), md5_hex.as_bytes(), &sig)
            .map_err(|_| CryptError::BadSignature)
    }

    /// Checks `signature` over `data` (a file's bytes, or a string for key rollover and
    /// upload certificates).
    pub fn verify(&self, data: &[u8], signature: &str) -> Result<(), CryptError> {
        self.verify_md5(&md5_hex(data), signature)
    }
}

/// A project's private code-signing key (kept by the server only).
#[derive(Debug, Clone)]
pub struct PrivateKey {
    /// The bit count written on the first line.
    bits: u16,
    /// The key itself.
    key: RsaPrivateKey,
}

impl PrivateKey {
    /// Makes a new key of `bits` bits (at most [`MAX_KEY_BITS`]; BOINC projects use 1024).
    pub fn generate(rng: &mut impl CryptoRngCore, bits: usize) -> Result<PrivateKey, CryptError> {
        if !(512..=MAX_KEY_BITS).contains(&bits) {
            return Err(CryptError::BadKey("key size must be 512 to 1024 bits"));
        }
        let key = RsaPrivateKey::new(rng, bits)?;
        let bits = u16::try_from(bits).map_err(|_| CryptError::BadKey("key size"))?;
        Ok(PrivateKey { bits, key })
    }

    /// Parses BOINC's private-key text.
    pub fn parse(text: &str) -> Result<PrivateKey, CryptError> {
        let (bits, data) = split_key_text(text)?;
        if data.len() != PRIVATE_LEN {
            return Err(CryptError::BadKey("private key data is not 704 bytes"));
        }
        let num = |from: usize, len: usize| BigUint::from_bytes_be(&data[from..from + len]);
        let n = num(0, MODULUS_LEN);
        let e = num(MODULUS_LEN, MODULUS_LEN);
        let d = num(2 * MODULUS_LEN, MODULUS_LEN);
        let p = num(3 * MODULUS_LEN, PRIME_LEN);
        let q = num(3 * MODULUS_LEN + PRIME_LEN, PRIME_LEN);
        let mut key = RsaPrivateKey::from_components(n, e, d, vec![p, q])?;
        key.validate()?;
        key.precompute()?;
        Ok(PrivateKey { bits, key })
    }

    /// BOINC's text for this key, ending with the `.` line (no final newline).
    pub fn to_text(&self) -> Result<String, CryptError> {
        let k = &self.key;
        let mut data = Vec::with_capacity(PRIVATE_LEN);
        data.extend(fixed(k.n(), MODULUS_LEN)?);
        data.extend(fixed(k.e(), MODULUS_LEN)?);
        data.extend(fixed(k.d(), MODULUS_LEN)?);
        let primes = k.primes();
        if primes.len() != 2 {
            return Err(CryptError::BadKey("BOINC keys have exactly two primes"));
        }
        for p in primes {
            data.extend(fixed(p, PRIME_LEN)?);
        }
        let one = BigUint::from(1u8);
        for p in primes {
            // d mod (p - 1): the CRT exponents BOINC stores.
            data.extend(fixed(&(k.d() % (p - &one)), PRIME_LEN)?);
        }
        let qinv = k
            .crt_coefficient()
            .ok_or(CryptError::BadKey("no CRT coefficient"))?;
        data.extend(fixed(&qinv, PRIME_LEN)?);
        Ok(key_text(self.bits, &data))
    }

    /// The matching public key.
    pub fn public_key(&self) -> PublicKey {
        PublicKey {
            bits: self.bits,
            key: self.key.to_public_key(),
        }
    }

    /// Signs data whose MD5 hex is `md5_hex`; returns BOINC's signature text.
    pub fn sign_md5(&self, md5_hex: &str) -> Result<String, CryptError> {
        let sig = self
            .key
            .sign(Pkcs1v15Sign::new_unprefixed(), md5_hex.as_bytes())?;
        Ok(write_hex_block(&sig))
    }

    /// Signs `data` (a file's bytes or a string); returns BOINC's signature text.
    pub fn sign(&self, data: &[u8]) -> Result<String, CryptError> {
        self.sign_md5(&md5_hex(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_block_round_trip_and_layout() {
        let bytes: Vec<u8> = (0..70u8).collect();
        let text = write_hex_block(&bytes);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0].len(), 64);
        assert_eq!(lines[2].len(), 12);
        assert_eq!(lines[3], ".");
        assert_eq!(read_hex_block(&text), bytes);
        assert_eq!(read_hex_block("  0a\n0B\r\nzz"), vec![0x0a, 0x0b]);
    }

    #[test]
    fn md5_of_reader_matches_md5_of_bytes() {
        let data = vec![7u8; 200_000];
        assert_eq!(md5_hex_reader(&data[..]).expect("read"), md5_hex(&data));
        assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
    }

    #[test]
    fn key_text_is_refused_when_malformed() {
        assert!(PublicKey::parse("").is_err());
        assert!(PublicKey::parse("abc\n00\n.").is_err());
        assert!(PublicKey::parse("1024\n0011\n.").is_err());
        assert!(PrivateKey::parse("1024\n0011\n.").is_err());
        assert!(PrivateKey::generate(&mut rand::thread_rng(), 2048).is_err());
    }
}
