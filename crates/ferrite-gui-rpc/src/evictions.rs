//! The log of connections closed because the server was full: one line per burst, not one
//! per connection, so a flood of connections cannot push everything else out of the
//! client's bounded event log.

use std::time::{Duration, Instant};

/// Closings less than this apart belong to the same burst.
pub const BURST_GAP: Duration = Duration::from_secs(10);

/// Closings counted since the current burst began.
#[derive(Debug, Default)]
pub struct EvictionBursts {
    /// When the last closing happened.
    last: Option<Instant>,
    /// Closings in the current burst.
    in_burst: u64,
}

impl EvictionBursts {
    /// Counts one closing at `now`. Returns the line to log when it begins a burst (the
    /// previous burst's count in it), `None` while the burst goes on.
    pub fn note(&mut self, now: Instant) -> Option<String> {
        let continues = self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < BURST_GAP);
        self.last = Some(now);
        if continues {
            self.in_burst += 1;
            return None;
        }
        let previous = std::mem::replace(&mut self.in_burst, 1);
        let tail = if previous > 1 {
            format!(" (the previous burst closed {previous})")
        } else {
            String::new()
        };
        Some(format!(
            "too many GUI RPC connections: closing the ones quiet the longest; further \
             closings less than {} s apart are not logged{tail}",
            BURST_GAP.as_secs()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_closings_is_one_line() {
        let mut b = EvictionBursts::default();
        let t0 = Instant::now();
        let lines: Vec<String> = (0..1000)
            .filter_map(|i| b.note(t0 + Duration::from_millis(i)))
            .collect();
        assert_eq!(lines.len(), 1, "{lines:?}");
        // A new burst after a quiet gap gets its own line, with the last one's count.
        let again = b.note(t0 + Duration::from_secs(60));
        assert!(
            again
                .as_deref()
                .is_some_and(|l| l.contains("the previous burst closed 1000")),
            "{again:?}"
        );
        assert_eq!(b.note(t0 + Duration::from_secs(61)), None);
    }
}
