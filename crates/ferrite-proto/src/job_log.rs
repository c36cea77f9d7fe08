//! Small text logs and histories in the data directory:
//! - `job_log_<esc>.txt`: one line per successfully completed job;
//! - `time_stats_log`: one line per power/network/processing state change;
//! - `daily_xfer_history.xml`: bytes transferred per day.
//!
//! Each line format has a parser and a formatter; a bad line is an error for that line only,
//! so callers can skip it and go on.

use std::fmt;

use crate::xml::{Parsed, XmlError, XmlReader, XmlWriter};

/// A line that does not have the expected format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad {what} line: {reason}: '{line}'")]
pub struct BadLine {
    /// Which log ("job log", "time stats log").
    pub what: &'static str,
    /// What was wrong.
    pub reason: String,
    /// The line, cut to 200 bytes.
    pub line: String,
}

fn bad(what: &'static str, reason: impl Into<String>, line: &str) -> BadLine {
    let mut end = line.len().min(200);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    BadLine {
        what,
        reason: reason.into(),
        line: line[..end].to_owned(),
    }
}

/// One completed job in `job_log_<esc>.txt`
/// (`<time> ue <est> ct <cpu> fe <fpops> nm <name> et <elapsed> es <exit status>`).
#[derive(Debug, Clone, PartialEq)]
pub struct JobLogRecord {
    /// When the job was reported complete (Unix time, whole seconds).
    pub time: f64,
    /// Runtime estimate before duration-correction, seconds.
    pub est_runtime_uncorrected: f64,
    /// Final CPU time, seconds.
    pub cpu_time: f64,
    /// The workunit's FLOPs estimate (written without decimals).
    pub fpops_est: f64,
    /// The result's name.
    pub name: String,
    /// Final elapsed time, seconds.
    pub elapsed_time: f64,
    /// The app's exit status.
    pub exit_status: i32,
}

impl JobLogRecord {
    /// Parses one line (without or with its newline). Keys may come in any order; unknown
    /// keys are skipped (a future client may add some).
    pub fn parse_line(line: &str) -> Result<Self, BadLine> {
        const WHAT: &str = "job log";
        let mut tokens = line.split_whitespace();
        let time_tok = tokens.next().ok_or_else(|| bad(WHAT, "empty", line))?;
        let time = time_tok
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite())
            .ok_or_else(|| bad(WHAT, "time is not a number", line))?;
        let mut rec = JobLogRecord {
            time,
            est_runtime_uncorrected: 0.0,
            cpu_time: 0.0,
            fpops_est: 0.0,
            name: String::new(),
            elapsed_time: 0.0,
            exit_status: 0,
        };
        let mut have_name = false;
        while let Some(key) = tokens.next() {
            let val = tokens
                .next()
                .ok_or_else(|| bad(WHAT, format!("'{key}' has no value"), line))?;
            let num = || {
                val.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| bad(WHAT, format!("'{key}' value is not a number"), line))
            };
            match key {
                "ue" => rec.est_runtime_uncorrected = num()?,
                "ct" => rec.cpu_time = num()?,
                "fe" => rec.fpops_est = num()?,
                "et" => rec.elapsed_time = num()?,
                "es" => {
                    rec.exit_status = val
                        .parse()
                        .map_err(|_| bad(WHAT, "exit status is not an integer", line))?
                }
                "nm" => {
                    rec.name = val.to_owned();
                    have_name = true;
                }
                _ => {}
            }
        }
        if !have_name {
            return Err(bad(WHAT, "no result name (nm)", line));
        }
        Ok(rec)
    }

    /// Parses a whole job log, returning the good records and the bad lines.
    pub fn parse_log(text: &str) -> (Vec<Self>, Vec<BadLine>) {
        let mut good = Vec::new();
        let mut bad_lines = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match Self::parse_line(line) {
                Ok(r) => good.push(r),
                Err(e) => bad_lines.push(e),
            }
        }
        (good, bad_lines)
    }
}

impl fmt::Display for JobLogRecord {
    /// The line as BOINC appends it, without the newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.0} ue {:.6} ct {:.6} fe {:.0} nm {} et {:.6} es {}",
            self.time,
            self.est_runtime_uncorrected,
            self.cpu_time,
            self.fpops_est,
            self.name,
            self.elapsed_time,
            self.exit_status
        )
    }
}

/// One line of `time_stats_log`: `<unix time> <event>`.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeStatsEvent {
    /// When (Unix time, microsecond precision).
    pub time: f64,
    /// What happened.
    pub event: TimeStatsEventKind,
}

/// The events BOINC records in `time_stats_log` (`client/time_stats.cpp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeStatsEventKind {
    /// The client started.
    PowerOn,
    /// The client stopped.
    PowerOff,
    /// Network is up.
    NetUp,
    /// Network is down.
    NetDown,
    /// Network state unknown.
    NetUnknown,
    /// Computing resumed.
    ProcStart,
    /// Computing suspended.
    ProcStop,
    /// Something newer, kept as written.
    Other(String),
}

impl TimeStatsEventKind {
    /// The word written in the log.
    pub fn as_str(&self) -> &str {
        match self {
            Self::PowerOn => "power_on",
            Self::PowerOff => "power_off",
            Self::NetUp => "net_up",
            Self::NetDown => "net_down",
            Self::NetUnknown => "net_unknown",
            Self::ProcStart => "proc_start",
            Self::ProcStop => "proc_stop",
            Self::Other(s) => s,
        }
    }

    fn from_word(s: &str) -> Self {
        match s {
            "power_on" => Self::PowerOn,
            "power_off" => Self::PowerOff,
            "net_up" => Self::NetUp,
            "net_down" => Self::NetDown,
            "net_unknown" => Self::NetUnknown,
            "proc_start" => Self::ProcStart,
            "proc_stop" => Self::ProcStop,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl TimeStatsEvent {
    /// Parses one line.
    pub fn parse_line(line: &str) -> Result<Self, BadLine> {
        const WHAT: &str = "time stats log";
        let mut parts = line.split_whitespace();
        let (Some(t), Some(ev), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad(WHAT, "expected '<time> <event>'", line));
        };
        let time = t
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| bad(WHAT, "time is not a number", line))?;
        Ok(Self {
            time,
            event: TimeStatsEventKind::from_word(ev),
        })
    }
}

impl fmt::Display for TimeStatsEvent {
    /// The line as BOINC writes it (`%f %s`), without the newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6} {}", self.time, self.event.as_str())
    }
}

/// One day of `daily_xfer_history.xml` (`<dx>`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DailyXfer {
    /// Day number: (Unix time + timezone offset) / 86400, rounded down.
    pub when: i32,
    /// Bytes uploaded that day.
    pub up: f64,
    /// Bytes downloaded that day.
    pub down: f64,
}

/// `daily_xfer_history.xml`: what the transfer quota (`daily_xfer_limit_mb`) is checked
/// against.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DailyXferHistory {
    /// Days, in file order (BOINC puts the newest first).
    pub days: Vec<DailyXfer>,
}

impl DailyXferHistory {
    /// Parses the file.
    pub fn parse(text: &str, file: &str) -> Result<Parsed<Self>, XmlError> {
        let mut r = XmlReader::new(text, file);
        let root = r.root("daily_xfers")?;
        let mut h = Self::default();
        if !root.is_empty() {
            while let Some(dx) = r.next_child()? {
                if dx.name() != "dx" {
                    r.unknown(&dx, "daily_xfers")?;
                    continue;
                }
                let mut d = DailyXfer::default();
                if !dx.is_empty() {
                    while let Some(c) = r.next_child()? {
                        match c.name() {
                            "when" => d.when = r.num_or(&c, 0)?,
                            "up" => d.up = r.num_or(&c, 0.0)?,
                            "down" => d.down = r.num_or(&c, 0.0)?,
                            _ => r.unknown(&c, "dx")?,
                        }
                    }
                }
                h.days.push(d);
            }
        }
        let warnings = r.finish()?;
        Ok(Parsed { value: h, warnings })
    }

    /// The file as BOINC writes it.
    pub fn to_xml(&self) -> String {
        let mut s = String::from("<daily_xfers>\n");
        for d in &self.days {
            s.push_str(&format!(
                "<dx>\n   <when>{}</when>\n   <up>{:.6}</up>\n   <down>{:.6}</down>\n</dx>\n",
                d.when, d.up, d.down
            ));
        }
        s.push_str("</daily_xfers>\n");
        s
    }

    /// Writes the document into `w`.
    pub fn write(&self, w: &mut XmlWriter) {
        w.raw(&self.to_xml());
    }

    /// Bytes up and down over the `period_days` days ending with day `today`.
    pub fn totals(&self, today: i32, period_days: i32) -> (f64, f64) {
        self.days
            .iter()
            .filter(|d| d.when <= today && d.when > today - period_days)
            .fold((0.0, 0.0), |(u, dn), d| (u + d.up, dn + d.down))
    }
}
