//! Bandwidth limits (prefs `max_bytes_sec_down` / `max_bytes_sec_up`): one token bucket
//! per direction, shared by every transfer of that direction, so together they stay under
//! the limit (BOINC divides the limit equally among active transfers; sharing one bucket
//! gives the same total and lets a lone transfer use all of it). The arithmetic is a pure
//! function; the async part only sleeps for what it returns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The bucket's state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Bytes that may go now without waiting; negative = a debt to wait off.
    pub available: f64,
}

/// Takes `n` bytes from a bucket refilled at `rate` bytes/s for `elapsed` seconds (holding
/// at most one second's worth); returns the new state and how long to wait before the
/// bytes may go on.
pub fn take(bucket: Bucket, rate: f64, elapsed: f64, n: u64) -> (Bucket, Duration) {
    let available = (bucket.available + elapsed.max(0.0) * rate).min(rate) - n as f64;
    let wait = if available < 0.0 {
        Duration::from_secs_f64(-available / rate)
    } else {
        Duration::ZERO
    };
    (Bucket { available }, wait)
}

/// A shared limit for one direction; 0 = none.
#[derive(Debug)]
pub struct Throttle {
    /// Bytes per second; 0 = unlimited.
    rate: AtomicU64,
    /// The bucket and when it was last refilled.
    state: Mutex<(Bucket, Instant)>,
}

impl Throttle {
    /// No limit yet.
    pub fn new() -> Throttle {
        Throttle {
            rate: AtomicU64::new(0),
            state: Mutex::new((Bucket { available: 0.0 }, Instant::now())),
        }
    }

    /// Sets the limit in bytes per second (0 = none); applies to transfers under way.
    pub fn set_rate(&self, bytes_per_sec: u64) {
        self.rate.store(bytes_per_sec, Ordering::Relaxed);
    }

    /// The limit in bytes per second (0 = none).
    pub fn rate(&self) -> u64 {
        self.rate.load(Ordering::Relaxed)
    }

    /// Waits until `n` more bytes may be transferred.
    pub async fn consume(&self, n: u64) {
        let rate = self.rate();
        if rate == 0 {
            return;
        }
        let wait = {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            let (b, wait) = take(s.0, rate as f64, (now - s.1).as_secs_f64(), n);
            *s = (b, now);
            wait
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

impl Default for Throttle {
    fn default() -> Throttle {
        Throttle::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_arithmetic() {
        let empty = Bucket { available: 0.0 };
        // 1000 B/s, nothing saved: 500 bytes wait half a second.
        let (b, w) = take(empty, 1000.0, 0.0, 500);
        assert_eq!((b.available, w), (-500.0, Duration::from_millis(500)));
        // Half a second later the debt is paid: 250 more wait a quarter second.
        let (b, w) = take(b, 1000.0, 0.5, 250);
        assert_eq!((b.available, w), (-250.0, Duration::from_millis(250)));
        // A long idle period saves at most one second's worth.
        let (b, w) = take(b, 1000.0, 60.0, 1000);
        assert_eq!((b.available, w), (0.0, Duration::ZERO));
        // Over a long run the average rate is the limit: 10 s of 100-byte chunks at
        // 1000 B/s, advancing time by each wait.
        let (mut b, mut t) = (empty, 0.0);
        let mut elapsed = 0.0;
        for _ in 0..100 {
            let (nb, w) = take(b, 1000.0, elapsed, 100);
            b = nb;
            elapsed = w.as_secs_f64();
            t += elapsed;
        }
        assert!((t - 10.0).abs() < 1e-6, "{t}");
    }
}
