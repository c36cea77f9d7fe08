//! Seeded randomness: one independent ChaCha stream per random process, so that the host's
//! availability, each project's up/down pattern and each project's job sizes do not shift when
//! the policy under test makes different choices (common random numbers across policies), and
//! the same seed always gives the same run.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::scenario::Availability;

/// Stream numbers: fixed, so adding a process never perturbs the others.
pub mod stream {
    /// Host "client running".
    pub const ON: u64 = 1;
    /// Host "network connected".
    pub const CONNECTED: u64 = 2;
    /// Host "computing allowed".
    pub const ACTIVE: u64 = 3;
    /// Host "GPU computing allowed".
    pub const GPU_ACTIVE: u64 = 4;
    /// Project `p`'s scheduler availability is `PROJECT_UP + p`.
    pub const PROJECT_UP: u64 = 1 << 16;
    /// Project `p`'s job generation is `PROJECT_JOBS + p`.
    pub const PROJECT_JOBS: u64 = 1 << 17;
    /// The client's own randomness (backoff jitter).
    pub const CLIENT: u64 = 5;
}

/// A deterministic random stream.
pub fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// A uniform draw in [0, 1).
pub fn uniform(rng: &mut ChaCha8Rng) -> f64 {
    rng.gen::<f64>()
}

/// An exponential draw with the given mean.
pub fn exponential(rng: &mut ChaCha8Rng, mean: f64) -> f64 {
    // 1 - U is in (0, 1], so the logarithm is finite.
    -mean * (1.0 - uniform(rng)).ln()
}

/// A standard normal draw (Box–Muller).
pub fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1 = 1.0 - uniform(rng);
    let u2 = uniform(rng);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A two-state up/down process in continuous time. Up periods are exponential with mean
/// `lambda`; down periods exponential with mean `lambda/frac − lambda`, so the long-run up
/// fraction is `frac`. Unlike a per-step coin, the state at time `t` does not depend on how
/// often it is sampled.
#[derive(Debug, Clone)]
pub struct OnOffProcess {
    /// Mean up period.
    up_mean: f64,
    /// Mean down period (0 for a process that is always up).
    down_mean: f64,
    /// Current state.
    up: bool,
    /// Time at which the state flips next.
    next_flip: f64,
    /// Its own random stream.
    rng: ChaCha8Rng,
}

impl OnOffProcess {
    /// A process starting at time `start` in its stationary distribution.
    pub fn new(a: Availability, start: f64, mut rng: ChaCha8Rng) -> Self {
        let always = a.frac >= 1.0;
        let down_mean = if always {
            0.0
        } else {
            a.lambda / a.frac - a.lambda
        };
        let up = always || uniform(&mut rng) < a.frac;
        let first = if always {
            f64::INFINITY
        } else if up {
            exponential(&mut rng, a.lambda)
        } else {
            exponential(&mut rng, down_mean)
        };
        Self {
            up_mean: a.lambda,
            down_mean,
            up,
            next_flip: start + first,
            rng,
        }
    }

    /// The state at time `t` (non-decreasing across calls).
    pub fn at(&mut self, t: f64) -> bool {
        while self.next_flip <= t {
            self.flip();
        }
        self.up
    }

    /// Ends the current period: the state changes and the next period's length is drawn.
    fn flip(&mut self) {
        self.up = !self.up;
        let mean = if self.up {
            self.up_mean
        } else {
            self.down_mean
        };
        // Guard against a zero-length period looping forever on a degenerate mean.
        self.next_flip += exponential(&mut self.rng, mean).max(1e-3);
    }

    /// The state as the official emulator samples a project scheduler's availability
    /// (`RANDOM_PROCESS::sample` in BOINC's `client/sim_util.cpp`, called at each RPC attempt
    /// with the time since the previous one): the process moves on only when sampled, and at
    /// most one period ends per sample, however long ago the previous sample was. So a
    /// scheduler found up before a long gap is down at the next attempt, and one found down is
    /// up; the period that sample starts may already be over at the attempt after it.
    pub fn at_contact(&mut self, t: f64) -> bool {
        if self.next_flip < t {
            self.flip();
        }
        self.up
    }

    /// When the state next changes.
    pub fn next_change(&self) -> f64 {
        self.next_flip
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn always_up_never_flips() {
        let mut p = OnOffProcess::new(Availability::default(), 0.0, rng(1, 1));
        assert!(p.at(1e9));
        assert_eq!(p.next_change(), f64::INFINITY);
    }

    #[test]
    fn long_run_fraction_matches() {
        let a = Availability {
            frac: 0.7,
            lambda: 1000.0,
        };
        let mut p = OnOffProcess::new(a, 0.0, rng(7, 3));
        let n = 200_000;
        let up = (0..n).filter(|i| p.at(f64::from(*i) * 60.0)).count();
        let f = up as f64 / f64::from(n);
        assert!((f - 0.7).abs() < 0.02, "{f}");
    }

    /// Sampled the official emulator's way, the process ends at most one period per sample:
    /// after a gap longer than any period it has flipped once, and the period that flip
    /// started is over at the next sample, so it flips back; an always-up process never flips.
    #[test]
    fn at_contact_ends_one_period_per_sample() {
        let a = Availability {
            frac: 0.5,
            lambda: 100.0,
        };
        for seed in 1..20 {
            let mut p = OnOffProcess::new(a, 0.0, rng(seed, 3));
            let first = p.at_contact(0.0);
            assert_eq!(p.at_contact(1e7), !first, "seed {seed}");
            assert_eq!(p.at_contact(1e7 + 1.0), first, "seed {seed}");
        }
        let mut always = OnOffProcess::new(
            Availability {
                frac: 1.0,
                lambda: 100.0,
            },
            0.0,
            rng(1, 3),
        );
        assert!((0..10).all(|k| always.at_contact(1e7 * f64::from(k))));
    }

    #[test]
    fn same_seed_same_sequence_other_stream_differs() {
        let a: Vec<f64> = (0..5).map(|_| uniform(&mut rng(3, 9))).collect();
        let mut r1 = rng(3, 9);
        let mut r2 = rng(3, 9);
        let mut r3 = rng(3, 10);
        let x: Vec<f64> = (0..5).map(|_| uniform(&mut r1)).collect();
        let y: Vec<f64> = (0..5).map(|_| uniform(&mut r2)).collect();
        let z: Vec<f64> = (0..5).map(|_| uniform(&mut r3)).collect();
        assert_eq!(x, y);
        assert_ne!(x, z);
        assert_eq!(a[0], x[0]);
    }

    #[test]
    fn normal_has_right_moments() {
        let mut r = rng(11, 1);
        let n = 100_000;
        let xs: Vec<f64> = (0..n).map(|_| standard_normal(&mut r)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.02, "{mean}");
        assert!((var - 1.0).abs() < 0.03, "{var}");
    }
}
