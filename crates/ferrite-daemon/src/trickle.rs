//! Trickle messages on disk, as the official client keeps them (`client/cs_trickle.cpp`):
//! the trickle-up files in a project's directory read into each scheduler request and
//! renamed `.sent`, deleted when the server acknowledges them, looked for at start-up; and
//! the trickle-downs of a reply written into their tasks' slots. What the names mean is
//! decided in `ferrite_project::trickle`; the apps' side is `tasks/trickle.rs`. The glue
//! that hands these to the project loop and the task table is `daemon/trickle.rs`.

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use ferrite_project::trickle::{self, SENT_SUFFIX, TRICKLE_UP_PREFIX};
use ferrite_proto::sched_request::MsgFromHost;
use tracing::warn;

/// Projects that sent trickle-up files not yet acknowledged by their server: their next
/// request reads the directory again (the official client reads it for every request).
#[derive(Debug, Default)]
pub struct SentTrickles(HashSet<String>);

impl SentTrickles {
    /// `url`'s project sent trickle-ups that wait for their ack.
    pub fn insert(&mut self, url: &str) {
        if !self.0.contains(url) {
            self.0.insert(url.to_owned());
        }
    }

    /// `url`'s server acknowledged its project's trickle-ups.
    pub fn remove(&mut self, url: &str) {
        self.0.remove(url);
    }

    /// Whether `url`'s project has trickle-ups waiting for their ack.
    pub fn contains(&self, url: &str) -> bool {
        self.0.contains(url)
    }
}

/// The trickle-up files in `dir`: their messages, oldest first, each file renamed with the
/// suffix `.sent` (kept until the server acknowledges it; a file that cannot be read is
/// left for the next request).
pub fn read_trickle_ups(dir: &Path) -> Vec<MsgFromHost> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for e in entries.flatten() {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        if !name.starts_with(TRICKLE_UP_PREFIX) || trickle::trickle_up_name(&name).is_none() {
            continue;
        }
        let path = e.path();
        let contents = match fs::read(&path) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(err) => {
                warn!("cannot read trickle file {}: {err}", path.display());
                continue;
            }
        };
        if !name.ends_with(SENT_SUFFIX) {
            let sent = dir.join(format!("{name}{SENT_SUFFIX}"));
            if let Err(err) = fs::rename(&path, &sent) {
                warn!("cannot rename {}: {err}", path.display());
            }
        }
        files.push((name, contents));
    }
    trickle::msgs_from_host(files.iter().map(|(n, c)| (n.as_str(), c.as_str())))
}

/// Deletes the trickle-up files of `dir` that were sent (the server acknowledged them);
/// returns how many.
pub fn remove_sent_trickle_ups(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let sent = e.file_name().to_str().is_some_and(trickle::is_sent);
        if sent && fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

/// Which trickle-up files `dir` holds: (any not sent yet, any sent and not acknowledged).
pub fn trickle_ups_in(dir: &Path) -> (bool, bool) {
    let Ok(entries) = fs::read_dir(dir) else {
        return (false, false);
    };
    let mut found = (false, false);
    for e in entries.flatten() {
        let Some(name) = e.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if trickle::trickle_up_name(&name).is_some() {
            if name.ends_with(SENT_SUFFIX) {
                found.1 = true;
            } else {
                found.0 = true;
            }
        }
    }
    found
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn trickle_files_are_read_marked_sent_and_removed_on_ack() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(
            d.join("trickle_up_uc_1_0_100.xml"),
            "<variety>v</variety>\nhello\n",
        )
        .unwrap();
        fs::write(
            d.join("trickle_up_uc_2_0_50.xml.sent"),
            "<variety>v</variety>\nold\n",
        )
        .unwrap();
        fs::write(d.join("uc_1_0_out"), "output").unwrap();
        assert_eq!(trickle_ups_in(d), (true, true));
        let msgs = read_trickle_ups(d);
        let got: Vec<(&str, i64)> = msgs
            .iter()
            .map(|m| (m.result_name.as_str(), m.time))
            .collect();
        assert_eq!(got, [("uc_2_0", 50), ("uc_1_0", 100)]);
        assert_eq!(msgs[1].body, "<variety>v</variety>\nhello\n");
        // Both are now waiting for the ack; a new one arrives meanwhile.
        assert!(d.join("trickle_up_uc_1_0_100.xml.sent").exists());
        assert!(!d.join("trickle_up_uc_1_0_100.xml").exists());
        fs::write(d.join("trickle_up_uc_3_0_150.xml"), "x").unwrap();
        assert_eq!(remove_sent_trickle_ups(d), 2);
        let mut left: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["trickle_up_uc_3_0_150.xml", "uc_1_0_out"]);
    }
}
