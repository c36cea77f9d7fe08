//! The tables and lines `ferrite` prints for people (JSON goes through serde instead).
//! Every table names a project the same way ([`ProjectNames`]).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::model::{Message, Project, Status, Task, Transfer};

pub(crate) fn message_line(m: &Message) -> String {
    let project = if m.project.is_empty() {
        "---"
    } else {
        &m.project
    };
    format!("{} {} [{project}] {}", m.seqno, utc(m.time), m.body)
}

pub(crate) fn transfers_table(transfers: &[Transfer]) -> String {
    let rows: Vec<Vec<String>> = transfers
        .iter()
        .map(|t| {
            let done = if t.nbytes > 0.0 {
                format!("{:.1}%", 100.0 * t.bytes_xferred / t.nbytes)
            } else {
                String::new()
            };
            let speed = if t.active {
                format!("{:.1} KB/s", t.xfer_speed / 1024.0)
            } else {
                String::new()
            };
            vec![
                t.name.clone(),
                if t.project_name.is_empty() {
                    t.project_url.clone()
                } else {
                    t.project_name.clone()
                },
                t.state(),
                format!("{:.0}", t.nbytes),
                done,
                speed,
                t.num_retries.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "FILE", "PROJECT", "STATE", "BYTES", "DONE", "SPEED", "RETRIES",
        ],
        &rows,
    )
}

pub(crate) fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// `YYYY-MM-DD HH:MM:SS` in UTC.
pub(crate) fn utc(t: i64) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// A duration as `3d 4h`, `2h 5m`, `4m 10s` or `12s`.
pub(crate) fn span(secs: f64) -> String {
    let s = secs.max(0.0).round() as i64;
    let (d, h, m, sec) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60, s % 60);
    if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m}m")
    } else if m > 0 {
        format!("{m}m {sec}s")
    } else {
        format!("{sec}s")
    }
}

/// Left-aligned columns separated by two spaces.
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                l.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

/// How every table names a project: its name, or its URL until it has told its name.
pub(crate) struct ProjectNames(std::collections::BTreeMap<String, String>);

impl ProjectNames {
    pub(crate) fn new(projects: &[Project]) -> ProjectNames {
        ProjectNames(
            projects
                .iter()
                .filter(|p| !p.name.is_empty())
                .map(|p| (p.master_url.clone(), p.name.clone()))
                .collect(),
        )
    }

    /// The name of the project with master URL `url` (`url` itself when it has none).
    pub(crate) fn of<'a>(&'a self, url: &'a str) -> &'a str {
        self.0.get(url).map_or(url, String::as_str)
    }
}

pub(crate) fn tasks_table(tasks: &[Task], names: &ProjectNames, now: f64) -> String {
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| {
            let deadline = if t.report_deadline <= 0.0 {
                String::new()
            } else if t.report_deadline >= now {
                format!("in {}", span(t.report_deadline - now))
            } else {
                format!("{} ago", span(now - t.report_deadline))
            };
            vec![
                t.name.clone(),
                names.of(&t.project_url).to_owned(),
                t.status.clone(),
                format!("{:.1}%", t.fraction_done * 100.0),
                span(t.elapsed_time),
                span(t.estimated_remaining),
                deadline,
            ]
        })
        .collect();
    table(
        &[
            "TASK",
            "PROJECT",
            "STATUS",
            "DONE",
            "ELAPSED",
            "REMAINING",
            "DEADLINE",
        ],
        &rows,
    )
}

pub(crate) fn status_text(s: &Status, projects: usize, tasks: &[Task]) -> String {
    let mut out = String::new();
    for (name, m) in [
        ("computing", &s.cpu),
        ("GPU", &s.gpu),
        ("network", &s.network),
    ] {
        let mut line = format!("{name:<10} {}", m.current);
        if m.current != m.permanent || m.delay > 0.0 {
            line.push_str(&format!(" for {} (then {})", span(m.delay), m.permanent));
        }
        if let Some(r) = &m.suspend_reason {
            line.push_str(&format!(", suspended: {r}"));
        }
        out.push_str(&line);
        out.push('\n');
    }
    let running = tasks.iter().filter(|t| t.status == "running").count();
    out.push_str(&format!(
        "projects   {projects}\ntasks      {} ({running} running)\n",
        tasks.len()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_tables() {
        assert_eq!(utc(1795332972), "2026-11-22 07:36:12");
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(span(93_784.0), "1d 2h");
        assert_eq!(span(65.0), "1m 5s");
        assert_eq!(
            table(&["A", "BB"], &[vec!["xxx".into(), "y".into()]]),
            "A    BB\nxxx  y\n"
        );
    }
}
