//! What the transfers moved: the bytes per day the daily transfer limit reads, the totals
//! since start-up the metrics report, and the daily history (`daily_xfer_history.xml`)
//! that scheduler requests and `get_daily_xfer_history` show. File bodies count when their
//! attempt ends; the texts exchanged over HTTP (scheduler RPCs, master pages, web RPCs, news
//! feeds) count at each pass, as every HTTP body does in the official client.

use std::path::Path;

use ferrite_proto::prefs::GlobalPrefs;

use super::{TransferDone, Transfers};
use crate::history::XferHistory;

impl Transfers {
    /// These transfers with `history`, the daily history as loaded at start-up.
    pub fn with_history(mut self, history: XferHistory) -> Transfers {
        self.history = history;
        self
    }

    /// Bytes moved outside file transfers (scheduler requests and replies, web pages) count
    /// toward the daily transfer limit too, as in the official client.
    pub fn count_other_traffic(&mut self, now: f64, bytes: u64) {
        if bytes > 0 {
            *self
                .daily
                .entry((now / 86400.0).floor() as i64)
                .or_default() += bytes;
        }
    }

    /// Whether the preferences' daily transfer limit (`daily_xfer_limit_mb` over
    /// `daily_xfer_period_days`) is used up: no file transfer starts then.
    pub fn over_daily_limit(&self, prefs: &GlobalPrefs, now: f64) -> bool {
        prefs.daily_xfer_limit_mb > 0.0
            && prefs.daily_xfer_period_days > 0
            && self.bytes_in_period(now, prefs.daily_xfer_period_days) as f64
                >= prefs.daily_xfer_limit_mb * 1e6
    }

    /// Bytes moved in the current daily-limit period.
    fn bytes_in_period(&self, now: f64, days: i32) -> u64 {
        let today = (now / 86400.0).floor() as i64;
        let first = today - i64::from(days.max(1)) + 1;
        self.daily
            .iter()
            .filter(|(d, _)| **d >= first)
            .map(|(_, b)| *b)
            .sum()
    }

    /// The texts exchanged over HTTP since the last pass (`down` bytes received, `up` sent)
    /// count in the daily history and toward the daily transfer limit.
    pub fn count_text_traffic(&mut self, down: u64, up: u64, now: f64, timezone: i32) {
        self.history.add(now, timezone, down, false);
        self.history.add(now, timezone, up, true);
        self.count_other_traffic(now, down.saturating_add(up));
    }

    /// A transfer attempt ended: the bytes it moved count in the daily history and in the
    /// totals since start-up.
    pub fn count_attempt(&mut self, done: &TransferDone, now: f64, timezone: i32) {
        if let Ok(n) = &done.result {
            self.history.add(now, timezone, *n, done.upload);
            if done.upload {
                self.bytes_moved.1 += n;
            } else {
                self.bytes_moved.0 += n;
            }
        }
    }

    /// Bytes (received, sent) by finished transfer attempts since start-up.
    pub fn bytes_moved(&self) -> (u64, u64) {
        self.bytes_moved
    }

    /// The daily transfer history.
    pub fn history(&self) -> &XferHistory {
        &self.history
    }

    /// Writes the daily history to data directory `dir` when it changed and a write is due
    /// (or at once with `force`).
    pub fn poll_history(&mut self, dir: &Path, now: f64, force: bool) {
        self.history.poll(dir, now, force);
    }
}
