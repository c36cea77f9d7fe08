//! MD5 (RFC 1321) scheduled for speed, used to verify downloads. A verifying download can
//! go no faster than one core hashes, and the `md-5` crate's portable code (~670 MB/s
//! here) loses a quarter of the possible speed because the compiler folds each step's
//! round constant into the last addition, which puts it on the chain of dependent
//! operations. Here each step first adds the message word, the constant and the part of
//! the round function that does not depend on the newest state word, and only then the
//! part that does (~900 MB/s on the same machine, about OpenSSL's assembly speed). The
//! result is the same digest as the `md-5` crate's, which the tests check on many lengths
//! and split points.

/// The sines of RFC 1321, one per step.
const K: [u32; 64] = [
    0xd76a_a478,
    0xe8c7_b756,
    0x2420_70db,
    0xc1bd_ceee,
    0xf57c_0faf,
    0x4787_c62a,
    0xa830_4613,
    0xfd46_9501,
    0x6980_98d8,
    0x8b44_f7af,
    0xffff_5bb1,
    0x895c_d7be,
    0x6b90_1122,
    0xfd98_7193,
    0xa679_438e,
    0x49b4_0821,
    0xf61e_2562,
    0xc040_b340,
    0x265e_5a51,
    0xe9b6_c7aa,
    0xd62f_105d,
    0x0244_1453,
    0xd8a1_e681,
    0xe7d3_fbc8,
    0x21e1_cde6,
    0xc337_07d6,
    0xf4d5_0d87,
    0x455a_14ed,
    0xa9e3_e905,
    0xfcef_a3f8,
    0x676f_02d9,
    0x8d2a_4c8a,
    0xfffa_3942,
    0x8771_f681,
    0x6d9d_6122,
    0xfde5_380c,
    0xa4be_ea44,
    0x4bde_cfa9,
    0xf6bb_4b60,
    0xbebf_bc70,
    0x289b_7ec6,
    0xeaa1_27fa,
    0xd4ef_3085,
    0x0488_1d05,
    0xd9d4_d039,
    0xe6db_99e5,
    0x1fa2_7cf8,
    0xc4ac_5665,
    0xf429_2244,
    0x432a_ff97,
    0xab94_23a7,
    0xfc93_a039,
    0x655b_59c3,
    0x8f0c_cc92,
    0xffef_f47d,
    0x8584_5dd1,
    0x6fa8_7e4f,
    0xfe2c_e6e0,
    0xa301_4314,
    0x4e08_11a1,
    0xf753_7e82,
    0xbd3a_f235,
    0x2ad7_d2bb,
    0xeb86_d391,
];

/// The initial state of RFC 1321.
const INIT: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

// In each step `b` is the newest state word, so the work that does not need it (`a`, the
// message word, the constant, and for G the `c & !d` half) is summed first.

#[inline(always)]
fn step_f(a: u32, b: u32, c: u32, d: u32, m: u32, k: u32, s: u32) -> u32 {
    let early = a.wrapping_add(m).wrapping_add(k);
    early
        .wrapping_add(d ^ (b & (c ^ d)))
        .rotate_left(s)
        .wrapping_add(b)
}

#[inline(always)]
fn step_g(a: u32, b: u32, c: u32, d: u32, m: u32, k: u32, s: u32) -> u32 {
    // (b & d) | (c & !d): the two halves share no bit, so they may be added instead.
    let early = a.wrapping_add(m).wrapping_add(k).wrapping_add(c & !d);
    early.wrapping_add(b & d).rotate_left(s).wrapping_add(b)
}

#[inline(always)]
fn step_h(a: u32, b: u32, c: u32, d: u32, m: u32, k: u32, s: u32) -> u32 {
    let early = a.wrapping_add(m).wrapping_add(k);
    early
        .wrapping_add((c ^ d) ^ b)
        .rotate_left(s)
        .wrapping_add(b)
}

#[inline(always)]
fn step_i(a: u32, b: u32, c: u32, d: u32, m: u32, k: u32, s: u32) -> u32 {
    let early = a.wrapping_add(m).wrapping_add(k);
    early
        .wrapping_add(c ^ (b | !d))
        .rotate_left(s)
        .wrapping_add(b)
}

/// Runs the compression function over `blocks` (a multiple of 64 bytes).
fn compress(state: &mut [u32; 4], blocks: &[u8]) {
    debug_assert_eq!(blocks.len() % 64, 0);
    // Read through an opaque reference, the constants are loads rather than immediates,
    // and the compiler keeps them in the early sum instead of moving them last.
    let k: &[u32; 64] = std::hint::black_box(&K);
    let [mut a0, mut b0, mut c0, mut d0] = *state;
    for block in blocks.chunks_exact(64) {
        let mut x = [0u32; 16];
        for (w, b) in x.iter_mut().zip(block.chunks_exact(4)) {
            *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        let (mut a, mut b, mut c, mut d) = (a0, b0, c0, d0);
        macro_rules! four {
            ($step:ident, $i:expr, [$m0:expr, $m1:expr, $m2:expr, $m3:expr], [$s0:expr, $s1:expr, $s2:expr, $s3:expr]) => {
                a = $step(a, b, c, d, x[$m0], k[$i], $s0);
                d = $step(d, a, b, c, x[$m1], k[$i + 1], $s1);
                c = $step(c, d, a, b, x[$m2], k[$i + 2], $s2);
                b = $step(b, c, d, a, x[$m3], k[$i + 3], $s3);
            };
        }
        four!(step_f, 0, [0, 1, 2, 3], [7, 12, 17, 22]);
        four!(step_f, 4, [4, 5, 6, 7], [7, 12, 17, 22]);
        four!(step_f, 8, [8, 9, 10, 11], [7, 12, 17, 22]);
        four!(step_f, 12, [12, 13, 14, 15], [7, 12, 17, 22]);
        four!(step_g, 16, [1, 6, 11, 0], [5, 9, 14, 20]);
        four!(step_g, 20, [5, 10, 15, 4], [5, 9, 14, 20]);
        four!(step_g, 24, [9, 14, 3, 8], [5, 9, 14, 20]);
        four!(step_g, 28, [13, 2, 7, 12], [5, 9, 14, 20]);
        four!(step_h, 32, [5, 8, 11, 14], [4, 11, 16, 23]);
        four!(step_h, 36, [1, 4, 7, 10], [4, 11, 16, 23]);
        four!(step_h, 40, [13, 0, 3, 6], [4, 11, 16, 23]);
        four!(step_h, 44, [9, 12, 15, 2], [4, 11, 16, 23]);
        four!(step_i, 48, [0, 7, 14, 5], [6, 10, 15, 21]);
        four!(step_i, 52, [12, 3, 10, 1], [6, 10, 15, 21]);
        four!(step_i, 56, [8, 15, 6, 13], [6, 10, 15, 21]);
        four!(step_i, 60, [4, 11, 2, 9], [6, 10, 15, 21]);
        a0 = a0.wrapping_add(a);
        b0 = b0.wrapping_add(b);
        c0 = c0.wrapping_add(c);
        d0 = d0.wrapping_add(d);
    }
    *state = [a0, b0, c0, d0];
}

/// An MD5 computation fed in pieces.
#[derive(Debug, Clone)]
pub struct Md5 {
    /// The chaining state.
    state: [u32; 4],
    /// Bytes that do not fill a block yet.
    pending: [u8; 64],
    /// How many of `pending` are in use.
    pending_len: usize,
    /// Bytes hashed so far, for the final length field.
    len: u64,
}

impl Default for Md5 {
    fn default() -> Md5 {
        Md5::new()
    }
}

impl Md5 {
    /// Nothing hashed yet.
    pub fn new() -> Md5 {
        Md5 {
            state: INIT,
            pending: [0; 64],
            pending_len: 0,
            len: 0,
        }
    }

    /// Hashes `data` after what came before.
    pub fn update(&mut self, mut data: &[u8]) {
        self.len = self.len.wrapping_add(data.len() as u64);
        if self.pending_len > 0 {
            let take = data.len().min(64 - self.pending_len);
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&data[..take]);
            self.pending_len += take;
            data = &data[take..];
            if self.pending_len < 64 {
                return;
            }
            compress(&mut self.state, &self.pending);
            self.pending_len = 0;
        }
        let whole = data.len() - data.len() % 64;
        compress(&mut self.state, &data[..whole]);
        let rest = &data[whole..];
        self.pending[..rest.len()].copy_from_slice(rest);
        self.pending_len = rest.len();
    }

    /// The 16-byte digest.
    pub fn finalize(mut self) -> [u8; 16] {
        let bits = self.len.wrapping_mul(8);
        let mut tail = [0u8; 128];
        tail[..self.pending_len].copy_from_slice(&self.pending[..self.pending_len]);
        tail[self.pending_len] = 0x80;
        let end = if self.pending_len < 56 { 64 } else { 128 };
        tail[end - 8..end].copy_from_slice(&bits.to_le_bytes());
        compress(&mut self.state, &tail[..end]);
        let mut out = [0u8; 16];
        for (o, w) in out.chunks_exact_mut(4).zip(self.state) {
            o.copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// The digest in lower-case hex, as BOINC writes MD5s.
    pub fn hex(self) -> String {
        hex::encode(self.finalize())
    }
}

/// The MD5 of everything `reader` yields, in lower-case hex.
pub fn md5_hex_reader(mut reader: impl std::io::Read) -> std::io::Result<String> {
    let mut h = Md5::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return Ok(h.hex()),
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use md5::Digest as _;

    fn hex_of(data: &[u8]) -> String {
        let mut h = Md5::new();
        h.update(data);
        h.hex()
    }

    #[test]
    fn rfc_1321_test_suite() {
        let cases: [(&str, &str); 7] = [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                "abcdefghijklmnopqrstuvwxyz",
                "c3fcd3d76192e4007dfb496cca67e13b",
            ),
            (
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                "d174ab98d277d9f5a5611c2c9f419d9f",
            ),
            (
                "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(hex_of(input.as_bytes()), want, "{input:?}");
        }
    }

    #[test]
    fn same_digest_as_the_md5_crate_for_every_length_and_split() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7919 % 251) as u8).collect();
        // Every length around the padding boundaries (55, 56, 63, 64, 119, 120...).
        for len in 0..data.len() {
            let want = hex::encode(md5::Md5::digest(&data[..len]));
            assert_eq!(hex_of(&data[..len]), want, "length {len}");
            // Fed in two pieces at several split points, and in pieces of 1, 3 and 65.
            for split in [0, 1.min(len), len / 3, len / 2, len.saturating_sub(1), len] {
                let mut h = Md5::new();
                h.update(&data[..split]);
                h.update(&data[split..len]);
                assert_eq!(h.hex(), want, "length {len} split at {split}");
            }
            for piece in [1, 3, 65] {
                let mut h = Md5::new();
                for p in data[..len].chunks(piece) {
                    h.update(p);
                }
                assert_eq!(h.hex(), want, "length {len} in pieces of {piece}");
            }
        }
    }

    #[test]
    fn large_input_and_reader_agree_with_the_md5_crate() {
        let data: Vec<u8> = (0..(3u32 << 20) + 77)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let want = hex::encode(md5::Md5::digest(&data));
        assert_eq!(hex_of(&data), want);
        assert_eq!(md5_hex_reader(&data[..]).expect("read"), want);
    }
}
