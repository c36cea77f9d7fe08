//! Retry bookkeeping for file transfers, as pure functions of `now` and a uniform random
//! number: the per-file persistent-transfer state (URL rotation, exponential backoff,
//! give-up time; `client/pers_file_xfer.cpp`) and the per-project, per-direction transfer
//! backoff (`client/client_types.cpp: FILE_XFER_BACKOFF`). No clock, no sleeping.

/// Shortest per-file retry delay (`PERS_RETRY_DELAY_MIN`), seconds.
pub const RETRY_DELAY_MIN: f64 = 120.0;
/// Longest per-file retry delay (`PERS_RETRY_DELAY_MAX`), seconds.
pub const RETRY_DELAY_MAX: f64 = 21600.0;
/// Default give-up period (`file_xfer_giveup_period`, 90 days), seconds.
pub const GIVEUP_PERIOD: f64 = 90.0 * 86400.0;
/// Consecutive failures before a project's transfers back off (`FILE_XFER_FAILURE_LIMIT`).
pub const PROJECT_FAILURE_LIMIT: u32 = 3;
/// BOINC's `ERR_TIMEOUT`, the status of a file whose transfer was given up.
pub const ERR_TIMEOUT: i32 = -182;

/// BOINC's backoff: `min(min·2ⁿ, max)·(0.5 + 0.5·u)` with `u` uniform in [0, 1].
pub fn backoff_delay(n: u32, min: f64, max: f64, u: f64) -> f64 {
    let base = (min * 2f64.powi(n.min(62) as i32)).min(max);
    base * (0.5 + 0.5 * u.clamp(0.0, 1.0))
}

/// How an episode ended, for the retry logic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpisodeResult {
    /// Done.
    Success,
    /// This URL will never work (`ERR_UPLOAD_PERMANENT`; for downloads also 4xx).
    Permanent,
    /// Try again later.
    Transient,
}

/// Classifies a BOINC error code from an episode (0 = success). `-224`
/// (`ERR_HTTP_PERMANENT`) and `-161` (`ERR_NOT_FOUND`) are permanent for downloads but
/// transient for uploads (a 404 there means no handler at that URL).
pub fn classify(code: i32, is_upload: bool) -> EpisodeResult {
    match code {
        0 => EpisodeResult::Success,
        -128 => EpisodeResult::Permanent,
        -224 | -161 if !is_upload => EpisodeResult::Permanent,
        _ => EpisodeResult::Transient,
    }
}

/// What the transfer does next after a failed episode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RetryDecision {
    /// Start another episode now with the URL at this index.
    NextUrl(usize),
    /// Wait until this time, then start again with the URL at this index.
    BackOff {
        /// When to retry.
        until: f64,
        /// URL index to use then.
        url_index: usize,
    },
    /// The file failed for good; its status becomes this error code.
    GiveUp(i32),
}

/// A file's persistent transfer (`<persistent_file_xfer>`): persist these fields.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRetry {
    /// `num_retries`: backoffs so far.
    pub num_retries: u32,
    /// `first_request_time`: when the transfer was first tried (for the give-up period).
    pub first_request_time: f64,
    /// `next_request_time`: not before this time.
    pub next_request_time: f64,
    /// The URL in use.
    pub url_index: usize,
    /// The URL the current round started from (wrapping back to it means every URL
    /// failed).
    pub start_url_index: usize,
}

impl FileRetry {
    /// A new transfer, starting with the first URL (projects order them by proximity).
    pub fn new(now: f64) -> FileRetry {
        FileRetry {
            num_retries: 0,
            first_request_time: now,
            next_request_time: 0.0,
            url_index: 0,
            start_url_index: 0,
        }
    }

    /// Whether an episode may start now, given the project's backoff in this direction: a
    /// transfer that has backed off before also waits for the project.
    pub fn may_start(&self, now: f64, project: &ProjectBackoff) -> bool {
        now >= self.next_request_time && (self.num_retries == 0 || project.ok_to_transfer(now))
    }

    fn advance(&mut self, n_urls: usize) -> bool {
        self.url_index = (self.url_index + 1) % n_urls.max(1);
        self.url_index == self.start_url_index
    }

    /// Records a failed episode. `error_code` is the episode's BOINC error, `u` a uniform
    /// random number in [0, 1], `network_up` false when the host has no network (then the
    /// retry is not counted), `giveup_period` normally [`GIVEUP_PERIOD`].
    #[allow(clippy::too_many_arguments)]
    pub fn on_failure(
        &mut self,
        result: EpisodeResult,
        error_code: i32,
        now: f64,
        n_urls: usize,
        giveup_period: f64,
        network_up: bool,
        u: f64,
    ) -> RetryDecision {
        match result {
            EpisodeResult::Success => RetryDecision::NextUrl(self.url_index),
            EpisodeResult::Permanent => {
                if self.advance(n_urls) {
                    RetryDecision::GiveUp(error_code)
                } else {
                    RetryDecision::NextUrl(self.url_index)
                }
            }
            EpisodeResult::Transient => {
                if now - self.first_request_time > giveup_period {
                    return RetryDecision::GiveUp(ERR_TIMEOUT);
                }
                if !self.advance(n_urls) {
                    return RetryDecision::NextUrl(self.url_index);
                }
                if network_up {
                    self.num_retries += 1;
                }
                self.next_request_time =
                    now + backoff_delay(self.num_retries, RETRY_DELAY_MIN, RETRY_DELAY_MAX, u);
                RetryDecision::BackOff {
                    until: self.next_request_time,
                    url_index: self.url_index,
                }
            }
        }
    }
}

/// A project's transfer backoff in one direction (keep one for uploads, one for
/// downloads).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProjectBackoff {
    /// Consecutive failures.
    pub failures: u32,
    /// No backed-off transfer before this time.
    pub next_xfer_time: f64,
}

impl ProjectBackoff {
    /// Whether transfers that wait for the project may go.
    pub fn ok_to_transfer(&self, now: f64) -> bool {
        now >= self.next_xfer_time
    }

    /// A failed episode; ignored while already backed off. From the third consecutive
    /// failure the project backs off.
    pub fn on_failure(&mut self, now: f64, u: f64) {
        if !self.ok_to_transfer(now) {
            return;
        }
        self.failures += 1;
        if self.failures >= PROJECT_FAILURE_LIMIT {
            self.next_xfer_time =
                now + backoff_delay(self.failures, RETRY_DELAY_MIN, RETRY_DELAY_MAX, u);
        }
    }

    /// Any success clears the backoff.
    pub fn on_success(&mut self) {
        *self = ProjectBackoff::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_doubles_then_caps_with_jitter() {
        assert_eq!(backoff_delay(0, 120.0, 21600.0, 1.0), 120.0);
        assert_eq!(backoff_delay(1, 120.0, 21600.0, 1.0), 240.0);
        assert_eq!(backoff_delay(3, 120.0, 21600.0, 0.0), 480.0);
        assert_eq!(backoff_delay(8, 120.0, 21600.0, 1.0), 21600.0);
        assert_eq!(backoff_delay(1000, 120.0, 21600.0, 0.0), 10800.0);
    }

    #[test]
    fn classification() {
        assert_eq!(classify(0, false), EpisodeResult::Success);
        assert_eq!(classify(-224, false), EpisodeResult::Permanent);
        assert_eq!(classify(-224, true), EpisodeResult::Transient);
        assert_eq!(classify(-161, false), EpisodeResult::Permanent);
        assert_eq!(classify(-128, true), EpisodeResult::Permanent);
        assert_eq!(classify(-184, false), EpisodeResult::Transient);
        assert_eq!(classify(-107, true), EpisodeResult::Transient);
    }

    #[test]
    fn transient_failures_rotate_urls_then_back_off() {
        let mut r = FileRetry::new(1000.0);
        let p = ProjectBackoff::default();
        assert!(r.may_start(1000.0, &p));
        let t = EpisodeResult::Transient;
        assert_eq!(
            r.on_failure(t, -184, 1000.0, 2, GIVEUP_PERIOD, true, 1.0),
            RetryDecision::NextUrl(1)
        );
        // Second URL fails too: the list wrapped, first backoff = 240 s at u = 1.
        assert_eq!(
            r.on_failure(t, -184, 1010.0, 2, GIVEUP_PERIOD, true, 1.0),
            RetryDecision::BackOff {
                until: 1250.0,
                url_index: 0
            }
        );
        assert_eq!(r.num_retries, 1);
        assert!(!r.may_start(1249.0, &p) && r.may_start(1250.0, &p));
        // Network down: not counted, still waits.
        let mut one = FileRetry::new(0.0);
        assert_eq!(
            one.on_failure(t, -107, 5.0, 1, GIVEUP_PERIOD, false, 0.0),
            RetryDecision::BackOff {
                until: 65.0,
                url_index: 0
            }
        );
        assert_eq!(one.num_retries, 0);
        // Many failures: capped at 6 h.
        for _ in 0..20 {
            one.on_failure(t, -184, 10.0, 1, GIVEUP_PERIOD, true, 1.0);
        }
        assert_eq!(one.next_request_time, 10.0 + RETRY_DELAY_MAX);
    }

    #[test]
    fn gives_up_after_the_period_or_when_every_url_is_permanent() {
        let mut r = FileRetry::new(0.0);
        assert_eq!(
            r.on_failure(
                EpisodeResult::Transient,
                -184,
                GIVEUP_PERIOD + 1.0,
                3,
                GIVEUP_PERIOD,
                true,
                0.5
            ),
            RetryDecision::GiveUp(ERR_TIMEOUT)
        );
        let mut r = FileRetry::new(0.0);
        let p = EpisodeResult::Permanent;
        assert_eq!(
            r.on_failure(p, -224, 1.0, 2, GIVEUP_PERIOD, true, 0.5),
            RetryDecision::NextUrl(1)
        );
        assert_eq!(
            r.on_failure(p, -224, 2.0, 2, GIVEUP_PERIOD, true, 0.5),
            RetryDecision::GiveUp(-224)
        );
    }

    #[test]
    fn project_backs_off_from_the_third_failure_and_success_resets() {
        let mut p = ProjectBackoff::default();
        p.on_failure(0.0, 1.0);
        p.on_failure(1.0, 1.0);
        assert!(p.ok_to_transfer(1.0));
        p.on_failure(2.0, 1.0);
        // 120·2³ = 960 s.
        assert_eq!(p.next_xfer_time, 962.0);
        // Failures while backed off are ignored.
        p.on_failure(100.0, 1.0);
        assert_eq!((p.failures, p.next_xfer_time), (3, 962.0));
        // A retried transfer waits for the project; a fresh one does not.
        let mut r = FileRetry::new(0.0);
        assert!(r.may_start(500.0, &p));
        r.num_retries = 1;
        assert!(!r.may_start(500.0, &p) && r.may_start(962.0, &p));
        p.on_success();
        assert!(p.ok_to_transfer(0.0) && p.failures == 0);
    }
}
