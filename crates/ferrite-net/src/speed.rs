//! The low-speed rule of BOINC transfers (libcurl's `LOW_SPEED_LIMIT`/`LOW_SPEED_TIME`, set
//! from cc_config `http_transfer_timeout_bps` and `http_transfer_timeout`): a transfer that
//! moves fewer than `min_bps` bytes a second on average over a whole window is given up, so
//! a server trickling a few bytes now and then (never idle long enough for the read timeout)
//! cannot hold a transfer slot for ever. Pure bookkeeping over caller-supplied instants.

use std::time::{Duration, Instant};

/// A transfer's speed over consecutive windows.
#[derive(Debug, Clone)]
pub struct LowSpeed {
    min_bps: f64,
    window: Duration,
    since: Instant,
    bytes: u64,
}

/// A window in which the transfer was too slow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TooSlow {
    /// Bytes a second over the window.
    pub bps: f64,
    /// The window's length.
    pub window: Duration,
}

impl LowSpeed {
    /// A rule of at least `min_bps` bytes a second over each `window`, starting at `now`. A
    /// limit of 0 (or a zero window) never fails.
    pub fn new(min_bps: f64, window: Duration, now: Instant) -> LowSpeed {
        LowSpeed {
            min_bps,
            window,
            since: now,
            bytes: 0,
        }
    }

    /// `n` more bytes moved at `now`. Once a whole window has passed, its average is checked
    /// and a new window starts; `Err` when it was below the limit.
    pub fn observe(&mut self, n: u64, now: Instant) -> Result<(), TooSlow> {
        self.bytes = self.bytes.saturating_add(n);
        let elapsed = now.saturating_duration_since(self.since);
        if self.min_bps <= 0.0 || self.window.is_zero() || elapsed < self.window {
            return Ok(());
        }
        let bps = self.bytes as f64 / elapsed.as_secs_f64();
        self.since = now;
        self.bytes = 0;
        if bps < self.min_bps {
            Err(TooSlow {
                bps,
                window: elapsed,
            })
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trickle_fails_after_a_window_and_a_steady_transfer_never_does() {
        let t0 = Instant::now();
        let s = |secs: f64| t0 + Duration::from_secs_f64(secs);
        // 10 B/s over 2 s windows; 4 bytes every half second is 8 B/s.
        let mut slow = LowSpeed::new(10.0, Duration::from_secs(2), t0);
        let mut failed = None;
        for i in 1..=8 {
            if let Err(e) = slow.observe(4, s(f64::from(i) * 0.5)) {
                failed = Some((i, e));
                break;
            }
        }
        let (i, e) = failed.expect("the trickle is given up");
        assert_eq!(i, 4, "at the end of the first window");
        assert!((e.bps - 8.0).abs() < 1e-9, "{e:?}");
        assert_eq!(e.window, Duration::from_secs(2));

        // 12 bytes every half second (24 B/s) for a minute: fine.
        let mut steady = LowSpeed::new(10.0, Duration::from_secs(2), t0);
        for i in 1..=120 {
            assert_eq!(steady.observe(12, s(f64::from(i) * 0.5)), Ok(()));
        }
        // A burst then silence: the window's average decides, not the last chunk.
        let mut bursty = LowSpeed::new(10.0, Duration::from_secs(2), t0);
        assert_eq!(bursty.observe(100, s(0.1)), Ok(()));
        assert_eq!(
            bursty.observe(1, s(2.5)),
            Ok(()),
            "101 B in 2.5 s is 40 B/s"
        );
        // Limit 0: never.
        let mut off = LowSpeed::new(0.0, Duration::from_secs(2), t0);
        assert_eq!(off.observe(0, s(100.0)), Ok(()));
    }
}
