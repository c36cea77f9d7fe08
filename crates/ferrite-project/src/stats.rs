//! The host's time and network statistics that scheduler requests report (`<time_stats>`,
//! `<net_stats>`), kept the way the official client keeps them (`client/time_stats.cpp`,
//! `client/net_stats.cpp`, `lib/util.cpp: update_average`), so servers' estimates of how
//! often the host computes and how fast it transfers mean the same for Ferrite hosts.
//!
//! Pure functions over the state's records and `now`; the daemon calls them from its loop.

use ferrite_proto::client_state::{NetStats, TimeStats};

/// Seconds in a day.
const DAY: f64 = 86_400.0;
/// Half-life of the transfer-rate averages (seven days).
pub const NET_RATE_HALF_LIFE: f64 = 7.0 * DAY;
/// Decay constant of the time fractions: the last ten days weigh 1 − 1/e.
const ALPHA: f64 = 10.0 * DAY;
/// Updates closer together than this are skipped.
const MIN_UPDATE_INTERVAL: f64 = 10.0;
/// A gap longer than this (the client was not running) does not decay `on_frac`.
const LONG_GAP: f64 = 14.0 * DAY;

/// BOINC's exponentially decaying average of work per day: `work` done since
/// `work_start` is folded into `avg` (per day) with half-life `half_life` seconds;
/// `avg_time` is when the average was last updated.
pub fn update_average(
    now: f64,
    work_start: f64,
    work: f64,
    half_life: f64,
    avg: &mut f64,
    avg_time: &mut f64,
) {
    if *avg_time > 0.0 {
        let diff = (now - *avg_time).max(0.0);
        let weight = (-diff * std::f64::consts::LN_2 / half_life).exp();
        *avg *= weight;
        if 1.0 - weight > 1e-6 {
            *avg += (1.0 - weight) * (work / (diff / DAY));
        } else {
            // The limit as diff → 0: diff cancels out.
            *avg += std::f64::consts::LN_2 * work * DAY / half_life;
        }
    } else if work > 0.0 {
        let days = (now - work_start) / DAY;
        if days > 0.0 {
            *avg = work / days;
        }
    }
    *avg_time = now;
}

/// Which way a transfer went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// An upload.
    Up,
    /// A download.
    Down,
}

/// Records a finished HTTP transfer of `nbytes` that moved data for `dt` seconds (its time
/// after the first byte) at `now`: the peak-rate estimate (`bwup`/`bwdown`) and the average.
pub fn record_transfer(ns: &mut NetStats, dir: Direction, nbytes: f64, dt: f64, now: f64) {
    if nbytes <= 0.0 || dt <= 0.0 {
        return;
    }
    let (max_rate, avg, avg_time) = match dir {
        Direction::Up => (&mut ns.bwup, &mut ns.avg_up, &mut ns.avg_time_up),
        Direction::Down => (&mut ns.bwdown, &mut ns.avg_down, &mut ns.avg_time_down),
    };
    let rate = nbytes / dt;
    if *max_rate == 0.0 {
        *max_rate = rate;
    } else {
        // Larger transfers say more about the link (the official weighting).
        let w = (nbytes.ln() / 500.0).clamp(0.0, 1.0);
        *max_rate = w * rate + (1.0 - w) * *max_rate;
    }
    update_average(now, now - dt, nbytes, NET_RATE_HALF_LIFE, avg, avg_time);
}

/// What the client was allowed to do since the last update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activity {
    /// Computing allowed (not suspended, or only throttled).
    pub computing: bool,
    /// GPU computing allowed too.
    pub gpu_computing: bool,
    /// Network activity allowed.
    pub network: bool,
}

/// The part of the time statistics that lives only while the client runs.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSession {
    /// No update yet in this session.
    first: bool,
    /// How long the previous session ran (what requests report as `previous_uptime`).
    previous_uptime: f64,
    /// When computing stopped being allowed (0 while it is).
    inactive_since: f64,
}

impl TimeSession {
    /// A session starting at `now`: resets the per-session figures of `ts`, as the
    /// official client does when it starts (the previous session's length, written at
    /// every save, stays as `previous_uptime`).
    pub fn start(ts: &mut TimeStats, now: f64) -> TimeSession {
        let previous_uptime = ts.previous_uptime;
        ts.client_start_time = now;
        ts.session_active_duration = 0.0;
        ts.session_gpu_active_duration = 0.0;
        TimeSession {
            first: true,
            previous_uptime,
            inactive_since: 0.0,
        }
    }

    /// Folds the time since the last update into `ts` at `now` (at most every ten seconds;
    /// more often does nothing). Linux gives no reliable connected state, so the official
    /// client reports `connected_frac` −1 (unknown), and so does this.
    pub fn update(&mut self, ts: &mut TimeStats, now: f64, act: Activity) {
        if ts.total_start_time == 0.0 {
            ts.total_start_time = now;
        }
        if ts.last_update == 0.0 {
            // The very first run of this client: assume everything was available.
            ts.on_frac = 1.0;
            ts.connected_frac = 1.0;
            ts.active_frac = 1.0;
            ts.gpu_active_frac = 1.0;
            ts.cpu_and_network_available_frac = 1.0;
            self.first = false;
            ts.last_update = now;
            return;
        }
        let mut dt = now - ts.last_update;
        if dt <= MIN_UPDATE_INTERVAL {
            return;
        }
        if dt > LONG_GAP {
            dt = 0.0;
        }
        let w1 = 1.0 - (-dt / ALPHA).exp();
        let w2 = 1.0 - w1;
        if self.first {
            // The first update after a start: the client was off since the last one.
            ts.on_frac *= w2;
            self.first = false;
        } else if dt > 100.0 {
            // The host or the client was asleep.
            ts.on_frac *= w2;
        } else {
            ts.on_frac = w1 + w2 * ts.on_frac;
            ts.cpu_and_network_available_frac *= w2;
            ts.connected_frac = -1.0;
            if act.network && act.computing {
                ts.cpu_and_network_available_frac += w1;
            }
            ts.active_frac *= w2;
            ts.total_duration += dt;
            if act.computing {
                ts.active_frac += w1;
                self.inactive_since = 0.0;
                ts.session_active_duration += dt;
                ts.total_active_duration += dt;
            } else if self.inactive_since == 0.0 {
                self.inactive_since = now;
            }
            ts.gpu_active_frac *= w2;
            if act.computing && act.gpu_computing {
                ts.gpu_active_frac += w1;
                ts.session_gpu_active_duration += dt;
                ts.total_gpu_active_duration += dt;
            }
        }
        ts.last_update = now;
        // The state file records this session's length so far; the next session reports it.
        ts.previous_uptime = now - ts.client_start_time;
    }

    /// The statistics as a scheduler request sends them at `now`: this session's durations
    /// and the previous session's length.
    pub fn request_form(&self, ts: &TimeStats, now: f64) -> TimeStats {
        TimeStats {
            now,
            previous_uptime: self.previous_uptime,
            ..ts.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Activity = Activity {
        computing: true,
        gpu_computing: true,
        network: true,
    };

    #[test]
    fn the_first_transfer_sets_the_rate_and_the_average() {
        let mut ns = NetStats::default();
        record_transfer(&mut ns, Direction::Down, 1_000_000.0, 2.0, 1000.0);
        assert_eq!(ns.bwdown, 500_000.0);
        // 1 MB over 2 s is 43.2 GB per day.
        assert!((ns.avg_down - 1_000_000.0 / (2.0 / DAY)).abs() < 1e-3);
        assert_eq!(ns.avg_time_down, 1000.0);
        assert_eq!((ns.bwup, ns.avg_up, ns.avg_time_up), (0.0, 0.0, 0.0));
    }

    #[test]
    fn later_transfers_blend_by_size_and_decay_the_average() {
        let mut ns = NetStats::default();
        record_transfer(&mut ns, Direction::Up, 1000.0, 1.0, 1000.0);
        record_transfer(&mut ns, Direction::Up, 1000.0, 0.1, 1000.0 + DAY);
        // w = ln(1000)/500 ≈ 0.0138 of the new 10,000 B/s.
        let w = 1000f64.ln() / 500.0;
        assert!((ns.bwup - (w * 10_000.0 + (1.0 - w) * 1000.0)).abs() < 1e-6);
        // A day later the old average has decayed by 2^(-1/7) and the new day's work added.
        let decay = (-DAY * std::f64::consts::LN_2 / NET_RATE_HALF_LIFE).exp();
        let expect = 1000.0 / (1.0 / DAY) * decay + (1.0 - decay) * 1000.0;
        assert!((ns.avg_up - expect).abs() / expect < 1e-9, "{}", ns.avg_up);
    }

    #[test]
    fn time_accumulates_while_running_and_fractions_follow_activity() {
        let mut ts = TimeStats::default();
        let mut s = TimeSession::start(&mut ts, 1000.0);
        s.update(&mut ts, 1000.0, ALL);
        assert_eq!((ts.total_start_time, ts.last_update), (1000.0, 1000.0));
        // Updates within ten seconds change nothing.
        s.update(&mut ts, 1005.0, ALL);
        assert_eq!(ts.total_duration, 0.0);
        for k in 1..=6 {
            s.update(&mut ts, 1000.0 + 20.0 * f64::from(k), ALL);
        }
        assert_eq!(ts.total_duration, 120.0);
        assert_eq!(ts.session_active_duration, 120.0);
        assert_eq!(ts.total_gpu_active_duration, 120.0);
        assert_eq!(ts.connected_frac, -1.0);
        assert!((ts.active_frac - 1.0).abs() < 1e-9);
        // Suspended: time passes, activity does not.
        let off = Activity {
            computing: false,
            gpu_computing: false,
            network: true,
        };
        s.update(&mut ts, 1140.0, off);
        assert_eq!(ts.total_duration, 140.0);
        assert_eq!(ts.total_active_duration, 120.0);
        assert!(ts.active_frac < 1.0);
    }

    #[test]
    fn a_restart_counts_the_time_off_against_on_frac_only() {
        let mut ts = TimeStats::default();
        let mut s = TimeSession::start(&mut ts, 0.0);
        s.update(&mut ts, 1.0, ALL);
        s.update(&mut ts, 21.0, ALL);
        let total = ts.total_duration;
        // Restarted a day later.
        let mut s = TimeSession::start(&mut ts, DAY);
        assert_eq!(ts.client_start_time, DAY);
        assert_eq!(ts.session_active_duration, 0.0);
        s.update(&mut ts, DAY + 20.0, ALL);
        assert!(ts.on_frac < 1.0);
        assert_eq!(ts.total_duration, total);
        // Requests report the last session's 21 s; the state file this one's 20 s.
        assert_eq!(s.request_form(&ts, DAY + 30.0).previous_uptime, 21.0);
        assert_eq!(s.request_form(&ts, DAY + 30.0).now, DAY + 30.0);
        assert_eq!(ts.previous_uptime, 20.0);
    }
}
