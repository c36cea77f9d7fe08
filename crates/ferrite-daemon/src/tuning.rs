//! The retry and backoff figures the official client lets its command line change
//! (`--sched_retry_delay_min`, `--master_fetch_period`, `--pers_retry_delay_max`, …), with
//! the official defaults.

use crate::cli::Options;

/// Scheduler RPC and file transfer retry figures in force.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    /// Shortest scheduler RPC backoff (`SCHED_RETRY_DELAY_MIN`), seconds.
    pub sched_retry_delay_min: f64,
    /// Longest scheduler RPC backoff (`SCHED_RETRY_DELAY_MAX`), seconds.
    pub sched_retry_delay_max: f64,
    /// Failures counted in the RPC backoff at most (`RETRY_CAP`).
    pub retry_cap: i32,
    /// Failed RPCs after which the master page is fetched again (`MASTER_FETCH_PERIOD`).
    pub master_fetch_period: i32,
    /// Failed master fetches after which the project waits `master_fetch_interval`
    /// (`MASTER_FETCH_RETRY_CAP`).
    pub master_fetch_retry_cap: i32,
    /// That wait (`MASTER_FETCH_INTERVAL`), seconds.
    pub master_fetch_interval: f64,
    /// Shortest file transfer retry delay (`PERS_RETRY_DELAY_MIN`), seconds.
    pub pers_retry_delay_min: f64,
    /// Longest file transfer retry delay (`PERS_RETRY_DELAY_MAX`), seconds.
    pub pers_retry_delay_max: f64,
    /// A transfer failing for longer than this is given up (`file_xfer_giveup_period`).
    pub file_xfer_giveup_period: f64,
    /// `--exit_before_upload`: stop the client instead of starting an upload.
    pub exit_before_upload: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            sched_retry_delay_min: 60.0,
            sched_retry_delay_max: 4.0 * 3600.0,
            retry_cap: 10,
            master_fetch_period: 10,
            master_fetch_retry_cap: 3,
            master_fetch_interval: 86400.0,
            pers_retry_delay_min: ferrite_net::backoff::RETRY_DELAY_MIN,
            pers_retry_delay_max: ferrite_net::backoff::RETRY_DELAY_MAX,
            file_xfer_giveup_period: ferrite_net::backoff::GIVEUP_PERIOD,
            exit_before_upload: false,
        }
    }
}

impl Tuning {
    /// The defaults, changed by what the command line gives.
    pub fn from_options(o: &Options) -> Tuning {
        let d = Tuning::default();
        let secs = |v: Option<u32>, def: f64| v.map_or(def, f64::from);
        let count =
            |v: Option<u32>, def: i32| v.map_or(def, |n| i32::try_from(n).unwrap_or(i32::MAX));
        Tuning {
            sched_retry_delay_min: secs(o.sched_retry_delay_min, d.sched_retry_delay_min),
            sched_retry_delay_max: secs(o.sched_retry_delay_max, d.sched_retry_delay_max),
            retry_cap: count(o.retry_cap, d.retry_cap),
            master_fetch_period: count(o.master_fetch_period, d.master_fetch_period),
            master_fetch_retry_cap: count(o.master_fetch_retry_cap, d.master_fetch_retry_cap),
            master_fetch_interval: secs(o.master_fetch_interval, d.master_fetch_interval),
            pers_retry_delay_min: secs(o.pers_retry_delay_min, d.pers_retry_delay_min),
            pers_retry_delay_max: secs(o.pers_retry_delay_max, d.pers_retry_delay_max),
            file_xfer_giveup_period: secs(o.file_xfer_giveup_period, d.file_xfer_giveup_period),
            exit_before_upload: o.exit_before_upload,
        }
    }

    /// The options that changed a figure, as `name=value` for the start-up log.
    pub fn changes(&self) -> Vec<String> {
        let d = Tuning::default();
        let mut out = Vec::new();
        let mut f = |name: &str, v: f64, def: f64| {
            if v != def {
                out.push(format!("{name}={v}"));
            }
        };
        f(
            "sched_retry_delay_min",
            self.sched_retry_delay_min,
            d.sched_retry_delay_min,
        );
        f(
            "sched_retry_delay_max",
            self.sched_retry_delay_max,
            d.sched_retry_delay_max,
        );
        f("retry_cap", self.retry_cap.into(), d.retry_cap.into());
        f(
            "master_fetch_period",
            self.master_fetch_period.into(),
            d.master_fetch_period.into(),
        );
        f(
            "master_fetch_retry_cap",
            self.master_fetch_retry_cap.into(),
            d.master_fetch_retry_cap.into(),
        );
        f(
            "master_fetch_interval",
            self.master_fetch_interval,
            d.master_fetch_interval,
        );
        f(
            "pers_retry_delay_min",
            self.pers_retry_delay_min,
            d.pers_retry_delay_min,
        );
        f(
            "pers_retry_delay_max",
            self.pers_retry_delay_max,
            d.pers_retry_delay_max,
        );
        f(
            "file_xfer_giveup_period",
            self.file_xfer_giveup_period,
            d.file_xfer_giveup_period,
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_official_constants_and_options_change_them() {
        let d = Tuning::from_options(&Options::default());
        assert_eq!(d, Tuning::default());
        assert!(d.changes().is_empty());
        let o = Options::try_parse_args([
            "ferrited",
            "-sched_retry_delay_min",
            "5",
            "--master-fetch-period",
            "2",
            "--file_xfer_giveup_period",
            "30",
            "--pers_retry_delay_max",
            "7",
            "--exit_before_upload",
        ])
        .expect("parses");
        let t = Tuning::from_options(&o);
        assert_eq!(t.sched_retry_delay_min, 5.0);
        assert_eq!(t.master_fetch_period, 2);
        assert_eq!(t.file_xfer_giveup_period, 30.0);
        assert_eq!(t.pers_retry_delay_max, 7.0);
        assert!(t.exit_before_upload);
        assert_eq!(t.sched_retry_delay_max, 14400.0);
        assert_eq!(t.changes().len(), 4);
    }
}
