//! Caller-supplied randomness for backoff jitter. The core never touches a global RNG, so a
//! seeded emulator run is reproducible.

/// A source of uniform numbers in `[0, 1)`.
pub trait Jitter {
    /// The next uniform number in `[0, 1)`.
    fn next_unit(&mut self) -> f64;
}

/// A tiny deterministic generator (SplitMix64), good enough for backoff jitter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    /// Generator state; the seed.
    pub state: u64,
}

impl SplitMix64 {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl Jitter for SplitMix64 {
    fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A constant "random" source, for tests that want the mean value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FixedJitter(pub f64);

impl Jitter for FixedJitter {
    fn next_unit(&mut self) -> f64 {
        self.0
    }
}
