//! `statistics_<esc>.xml`: a project's daily credit history (`<project_statistics>`), shown
//! by GUIs as graphs and trimmed to cc_config `save_stats_days`.

use crate::account::canonicalize_master_url;
use crate::xml::{Parsed, Tag, XmlError, XmlReader, XmlWriter};

/// One day's credit totals (`<daily_statistics>`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DailyStatistics {
    /// Start of the day (Unix time, midnight UTC as the client computes it): the record key.
    pub day: f64,
    /// The user's total credit at the project.
    pub user_total_credit: f64,
    /// The user's recent average credit.
    pub user_expavg_credit: f64,
    /// This host's total credit at the project.
    pub host_total_credit: f64,
    /// This host's recent average credit.
    pub host_expavg_credit: f64,
}

impl DailyStatistics {
    /// Reads `<daily_statistics>`.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut d = Self::default();
        if tag.is_empty() {
            return Ok(d);
        }
        while let Some(c) = r.next_child()? {
            let slot = match c.name() {
                "day" => &mut d.day,
                "user_total_credit" => &mut d.user_total_credit,
                "user_expavg_credit" => &mut d.user_expavg_credit,
                "host_total_credit" => &mut d.host_total_credit,
                "host_expavg_credit" => &mut d.host_expavg_credit,
                _ => {
                    r.unknown(&c, "daily_statistics")?;
                    continue;
                }
            };
            if let Some(v) = r.num::<f64>(&c)? {
                *slot = v;
            }
        }
        Ok(d)
    }

    /// Writes `<daily_statistics>`.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("daily_statistics")
            .f64("day", self.day)
            .f64("user_total_credit", self.user_total_credit)
            .f64("user_expavg_credit", self.user_expavg_credit)
            .f64("host_total_credit", self.host_total_credit)
            .f64("host_expavg_credit", self.host_expavg_credit)
            .close("daily_statistics");
    }
}

/// A statistics file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProjectStatistics {
    /// The project's canonical master URL (which project the file belongs to).
    pub master_url: String,
    /// One record per day, oldest first.
    pub daily: Vec<DailyStatistics>,
}

impl ProjectStatistics {
    /// Reads `<project_statistics>`; `master_url` is mandatory.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut s = Self::default();
        if !tag.is_empty() {
            while let Some(c) = r.next_child()? {
                match c.name() {
                    "master_url" => s.master_url = canonicalize_master_url(&r.string(&c)?),
                    "daily_statistics" => s.daily.push(DailyStatistics::read(r, &c)?),
                    _ => r.unknown(&c, "project_statistics")?,
                }
            }
        }
        if s.master_url.is_empty() {
            return Err(r.missing(tag, "master_url"));
        }
        Ok(s)
    }

    /// Writes `<project_statistics>`.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("project_statistics")
            .text("master_url", &self.master_url);
        for d in &self.daily {
            d.write(w);
        }
        w.close("project_statistics");
    }

    /// Parses a statistics file.
    pub fn parse(text: &str, file: &str) -> Result<Parsed<Self>, XmlError> {
        crate::xml::parse_document(text, file, "project_statistics", Self::read)
    }

    /// The file as BOINC writes it.
    pub fn to_xml(&self) -> String {
        crate::xml::write_document(|w| self.write(w))
    }

    /// Records today's totals: replaces the record of `day` if it is the last one, else
    /// appends; then drops records older than `save_stats_days` before `day`.
    pub fn record(&mut self, today: DailyStatistics, save_stats_days: i32) {
        match self.daily.last_mut() {
            Some(last) if last.day == today.day => *last = today,
            _ => self.daily.push(today),
        }
        let cutoff = today.day - f64::from(save_stats_days.max(0)) * 86_400.0;
        self.daily.retain(|d| d.day >= cutoff);
    }
}
