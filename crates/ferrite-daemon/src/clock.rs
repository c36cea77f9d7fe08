//! The wall clock, read by the daemon's I/O code only (the cores are given the time).

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, as BOINC counts time.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
