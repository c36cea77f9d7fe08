//! The histories the official client keeps in the data directory, which projects (job logs in
//! scheduler requests), GUIs (`get_daily_xfer_history`) and the dashboard read:
//!
//! - `job_log_<project>.txt`: one line per task whose app finished successfully, appended
//!   when it finishes (the official `RESULT::append_log_record`). Unlike the official file it
//!   is bounded: past [`JOB_LOG_MAX_BYTES`] the oldest lines go, keeping the newest half.
//! - `daily_xfer_history.xml`: bytes up and down per day (the day number is
//!   `(now + timezone) / 86400`), newest first, written at most once a minute when changed
//!   and at exit; days older than a year are dropped, as the official client drops them.
//!
//! Line and document formats are `ferrite_proto::job_log`'s.

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use ferrite_proto::account::escape_project_url;
use ferrite_proto::client_state::{ProjectState, TaskResult};
use ferrite_proto::job_log::{DailyXfer, DailyXferHistory, JobLogRecord};
use tracing::warn;

/// A job log longer than this is cut to its newest half.
pub const JOB_LOG_MAX_BYTES: u64 = 2 << 20;

/// `daily_xfer_history.xml`.
pub const DAILY_XFER_FILE: &str = "daily_xfer_history.xml";

/// Days of transfer history kept.
pub const XFER_DAYS_KEPT: i32 = 365;

/// Seconds between two writes of the transfer history (the official
/// `DAILY_XFER_HISTORY_PERIOD`).
pub const XFER_WRITE_EVERY: f64 = 60.0;

/// The job log of a project.
pub fn job_log_path(dir: &Path, master_url: &str) -> PathBuf {
    dir.join(format!("job_log_{}.txt", escape_project_url(master_url)))
}

/// The job log record of a result whose app just finished successfully.
pub fn job_record(ps: &ProjectState, r: &TaskResult, now: f64) -> JobLogRecord {
    let wu = ps.workunit(&r.wu_name);
    let fpops_est = wu.map_or(0.0, |w| w.rsc_fpops_est);
    let flops = ps.app_version_of(r).map_or(0.0, |v| v.usage.flops);
    JobLogRecord {
        time: now.round(),
        est_runtime_uncorrected: if flops > 0.0 { fpops_est / flops } else { 0.0 },
        cpu_time: r.final_cpu_time,
        fpops_est,
        name: r.name.clone(),
        elapsed_time: r.final_elapsed_time,
        exit_status: r.exit_status,
    }
}

/// Appends a record to a job log, then cuts the log to its newest half when it has grown
/// past `max_bytes`.
pub fn append_job(path: &Path, rec: &JobLogRecord, max_bytes: u64) -> io::Result<()> {
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(f, "{rec}")?;
    let len = f.metadata()?.len();
    drop(f);
    if len > max_bytes {
        trim_to_newest(path, max_bytes / 2)?;
    }
    Ok(())
}

/// Rewrites a log with only its newest whole lines, at most `keep` bytes (through a
/// temporary file, so a crash leaves the old or the new log, never half of one).
fn trim_to_newest(path: &Path, keep: u64) -> io::Result<()> {
    let text = fs::read(path)?;
    let keep = usize::try_from(keep).unwrap_or(usize::MAX);
    let mut start = text.len().saturating_sub(keep);
    if start > 0 {
        // Start after a line break, at a whole line.
        match text[start - 1..].iter().position(|&b| b == b'\n') {
            Some(i) => start += i,
            None => start = text.len(),
        }
    }
    let tmp = path.with_extension("txt.tmp");
    fs::write(&tmp, &text[start..])?;
    fs::rename(&tmp, path)
}

/// The lines of a job log from time `t` on, for a scheduler request's `<job_log>` when the
/// project asked for them (`send_job_log`); `None` when there is no log.
pub fn job_log_since(path: &Path, t: f64) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let mut out = String::new();
    for line in text.lines() {
        let time = line
            .split_whitespace()
            .next()
            .and_then(|w| w.parse::<f64>().ok());
        if time.is_some_and(|x| x >= t) {
            out.push_str(line);
            out.push('\n');
        }
    }
    Some(out)
}

/// `daily_xfer_history.xml` in memory, with when it was last written.
#[derive(Debug, Default)]
pub struct XferHistory {
    days: DailyXferHistory,
    dirty: bool,
    last_write: f64,
}

/// The day number of `now` (the official `current_day`).
pub fn day_number(now: f64, timezone: i32) -> i32 {
    ((now + f64::from(timezone)) / 86400.0).floor() as i32
}

impl XferHistory {
    /// Reads the file (a missing or unreadable one is an empty history), dropping days older
    /// than a year.
    pub fn load(dir: &Path, now: f64, timezone: i32) -> XferHistory {
        let path = dir.join(DAILY_XFER_FILE);
        let mut days = match fs::read_to_string(&path) {
            Ok(text) => match DailyXferHistory::parse(&text, DAILY_XFER_FILE) {
                Ok(p) => p.value,
                Err(e) => {
                    warn!("{}: {e}; starting a new transfer history", path.display());
                    DailyXferHistory::default()
                }
            },
            Err(_) => DailyXferHistory::default(),
        };
        let today = day_number(now, timezone);
        days.days.retain(|d| today - d.when < XFER_DAYS_KEPT);
        XferHistory {
            days,
            dirty: false,
            last_write: now,
        }
    }

    /// Counts `bytes` moved now.
    pub fn add(&mut self, now: f64, timezone: i32, bytes: u64, upload: bool) {
        if bytes == 0 {
            return;
        }
        let today = day_number(now, timezone);
        let day = match self.days.days.iter_mut().position(|d| d.when == today) {
            Some(i) => &mut self.days.days[i],
            None => {
                self.days.days.insert(
                    0,
                    DailyXfer {
                        when: today,
                        ..DailyXfer::default()
                    },
                );
                self.days.days.retain(|d| today - d.when < XFER_DAYS_KEPT);
                &mut self.days.days[0]
            }
        };
        if upload {
            day.up += bytes as f64;
        } else {
            day.down += bytes as f64;
        }
        self.dirty = true;
    }

    /// The days, newest first.
    pub fn days(&self) -> &DailyXferHistory {
        &self.days
    }

    /// The `<daily_xfer_history>` element of a scheduler request: bytes up and down in the
    /// `ndays` days ending today (the official `write_scheduler_request`).
    pub fn scheduler_request_xml(&self, now: f64, timezone: i32, ndays: i32) -> String {
        let (up, down) = self.days.totals(day_number(now, timezone), ndays);
        format!(
            "<daily_xfer_history>\n   <ndays>{ndays}</ndays>\n   <up>{up:.6}</up>\n   \
             <down>{down:.6}</down>\n</daily_xfer_history>\n"
        )
    }

    /// Writes the file when it changed and the last write is a minute old (or `force`).
    pub fn poll(&mut self, dir: &Path, now: f64, force: bool) {
        if !self.dirty || (!force && (now - self.last_write).abs() < XFER_WRITE_EVERY) {
            return;
        }
        self.last_write = now;
        let path = dir.join(DAILY_XFER_FILE);
        match crate::config::write_atomic(&path, &self.days.to_xml()) {
            Ok(()) => self.dirty = false,
            Err(e) => warn!("cannot write {}: {e}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str, t: f64) -> JobLogRecord {
        JobLogRecord {
            time: t,
            est_runtime_uncorrected: 12.5,
            cpu_time: 3.25,
            fpops_est: 1e12,
            name: name.to_owned(),
            elapsed_time: 4.0,
            exit_status: 0,
        }
    }

    #[test]
    fn job_log_lines_are_the_official_format_and_the_log_stays_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = job_log_path(dir.path(), "http://127.0.0.1:8080/test/");
        assert!(path.ends_with("job_log_127.0.0.1_8080_test.txt"));
        append_job(&path, &rec("r_0", 1700000000.0), 1 << 20).expect("append");
        assert_eq!(
            fs::read_to_string(&path).expect("read"),
            "1700000000 ue 12.500000 ct 3.250000 fe 1000000000000 nm r_0 et 4.000000 es 0\n"
        );
        let line_len = fs::metadata(&path).expect("meta").len();
        let max = line_len * 10;
        for i in 1..40 {
            append_job(
                &path,
                &rec(&format!("r_{i}"), 1700000000.0 + f64::from(i)),
                max,
            )
            .expect("append");
            assert!(fs::metadata(&path).expect("meta").len() <= max, "bounded");
        }
        let text = fs::read_to_string(&path).expect("read");
        let (recs, bad) = JobLogRecord::parse_log(&text);
        assert!(bad.is_empty(), "whole lines only: {bad:?}");
        assert!(recs.len() >= 5, "{text}");
        assert_eq!(recs.last().map(|r| r.name.as_str()), Some("r_39"));
        // Oldest first, consecutive: the newest lines were kept.
        for w in recs.windows(2) {
            assert_eq!(w[1].time - w[0].time, 1.0);
        }
    }

    #[test]
    fn job_log_lines_from_a_time_on_go_to_the_scheduler() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("job_log_x.txt");
        assert_eq!(job_log_since(&path, 0.0), None);
        for t in [100.0, 200.0, 300.0] {
            append_job(&path, &rec(&format!("r_{t}"), t), 1 << 20).expect("append");
        }
        let sent = job_log_since(&path, 200.0).expect("a log");
        assert_eq!(sent.lines().count(), 2, "{sent}");
        assert!(
            sent.starts_with("200 ue ") && sent.contains("nm r_300 "),
            "{sent}"
        );
    }

    #[test]
    fn transfer_history_counts_per_day_newest_first_and_round_trips() {
        let dir = tempfile::tempdir().expect("tempdir");
        let day = 20000.0 * 86400.0;
        let mut h = XferHistory::load(dir.path(), day, 0);
        h.add(day + 10.0, 0, 1000, false);
        h.add(day + 20.0, 0, 500, true);
        h.add(day + 86400.0 + 5.0, 0, 7, false);
        // A timezone moves the day boundary: 3600 s before midnight UTC is the next day at
        // UTC+2.
        h.add(day + 2.0 * 86400.0 - 3600.0, 7200, 1, true);
        let days = &h.days().days;
        assert_eq!(
            days.iter().map(|d| d.when).collect::<Vec<_>>(),
            [20002, 20001, 20000]
        );
        assert_eq!((days[2].up, days[2].down), (500.0, 1000.0));

        // Not written until a minute has passed, unless forced.
        h.poll(dir.path(), day + 30.0, false);
        assert!(!dir.path().join(DAILY_XFER_FILE).exists());
        h.poll(dir.path(), day + 30.0, true);
        let text = fs::read_to_string(dir.path().join(DAILY_XFER_FILE)).expect("written");
        assert!(
            text.starts_with("<daily_xfers>\n<dx>\n   <when>20002</when>\n"),
            "{text}"
        );
        let again = XferHistory::load(dir.path(), day + 86400.0, 0);
        assert_eq!(again.days(), h.days());
        // What a scheduler request says over the last two days (today is day 20002).
        assert_eq!(
            h.scheduler_request_xml(day + 2.0 * 86400.0, 0, 2),
            "<daily_xfer_history>\n   <ndays>2</ndays>\n   <up>1.000000</up>\n   \
             <down>7.000000</down>\n</daily_xfer_history>\n"
        );
        // A year later the old days are gone.
        let later = XferHistory::load(dir.path(), day + 365.0 * 86400.0, 0);
        assert_eq!(
            later.days().days.iter().map(|d| d.when).collect::<Vec<_>>(),
            [20002, 20001]
        );
    }
}
