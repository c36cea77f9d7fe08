//! Trickle messages, as the official client handles them (`client/cs_trickle.cpp`,
//! `client/app.cpp: move_trickle_file`).
//!
//! **Up**: an app writes `trickle_up.xml` in its slot and says so on its `trickle_up`
//! channel; the client moves the file to `projects/<dir>/trickle_up_<result>_<time>.xml`
//! and marks the project `trickle_up_pending`, which makes the project loop ask for a
//! scheduler RPC. Every request to the project carries each such file as a
//! `<msg_from_host>` ([`msg_from_host`]); a file sent gets the suffix `.sent` and is sent
//! again with each request until a reply carries `<message_ack/>`, which deletes the sent
//! files ([`is_sent`]). A file that arrives during the RPC has no suffix yet and stays.
//!
//! **Down**: a reply's `<trickle_down>` for a task this client has is written as
//! `trickle_down_<time>` ([`trickle_down_file_name`]) in the task's slot, and the app is
//! told with `<have_trickle_down/>` on its `trickle_down` channel
//! ([`crate::reply::Event::TrickleDown`]).

use ferrite_proto::sched_reply::TrickleDown;
use ferrite_proto::sched_request::MsgFromHost;

/// How a trickle-up file's name starts in the project directory.
pub const TRICKLE_UP_PREFIX: &str = "trickle_up_";

/// The suffix of a trickle-up file already sent and waiting for the server's ack.
pub const SENT_SUFFIX: &str = ".sent";

/// What a trickle-up file's name says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrickleUpName {
    /// The result whose app wrote it.
    pub result_name: String,
    /// When it was moved to the project directory (Unix seconds).
    pub time: i64,
    /// Whether it was already sent (its name ends in `.sent`).
    pub sent: bool,
}

/// Reads a project-directory file name of the form `trickle_up_<result>_<time>[.xml][.sent]`
/// (the result is everything up to the last `_`; the time is the number after it, read as
/// C's `atoi` does). `None` for any other file.
pub fn trickle_up_name(file_name: &str) -> Option<TrickleUpName> {
    let rest = file_name.strip_prefix(TRICKLE_UP_PREFIX)?;
    let (result_name, tail) = rest.rsplit_once('_')?;
    if result_name.is_empty() {
        return None;
    }
    let digits = tail
        .char_indices()
        .find(|(_, c)| !c.is_ascii_digit())
        .map_or(tail.len(), |(i, _)| i);
    Some(TrickleUpName {
        result_name: result_name.to_owned(),
        time: tail[..digits].parse().unwrap_or(0),
        sent: file_name.ends_with(SENT_SUFFIX),
    })
}

/// Whether a project-directory file is a trickle-up already sent (deleted on the server's
/// `<message_ack/>`).
pub fn is_sent(file_name: &str) -> bool {
    file_name.starts_with("trickle_up") && file_name.ends_with(SENT_SUFFIX)
}

/// The `<msg_from_host>` for a trickle-up file named `file_name` holding `contents`;
/// `None` when the name is not a trickle-up's.
pub fn msg_from_host(file_name: &str, contents: &str) -> Option<MsgFromHost> {
    let n = trickle_up_name(file_name)?;
    Some(MsgFromHost {
        result_name: n.result_name,
        time: n.time,
        body: contents.to_owned(),
    })
}

/// The messages of a project's trickle-up files, oldest first (`files`: name and contents
/// of each file in the project directory; other files are passed over).
pub fn msgs_from_host<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<MsgFromHost> {
    let mut msgs: Vec<MsgFromHost> = files
        .into_iter()
        .filter_map(|(name, contents)| msg_from_host(name, contents))
        .collect();
    msgs.sort_by(|a, b| (a.time, &a.result_name).cmp(&(b.time, &b.result_name)));
    msgs
}

/// The name of the file a trickle-down is written to in its task's slot.
pub fn trickle_down_file_name(t: &TrickleDown) -> String {
    format!("trickle_down_{}", t.time)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn trickle_up_names_are_read_as_the_official_client_reads_them() {
        let n = trickle_up_name("trickle_up_uc_7_0_1795937321.xml").unwrap();
        assert_eq!(
            n,
            TrickleUpName {
                result_name: "uc_7_0".into(),
                time: 1_795_937_321,
                sent: false
            }
        );
        let s = trickle_up_name("trickle_up_uc_7_0_1795937321.xml.sent").unwrap();
        assert!(s.sent);
        assert_eq!(s.time, 1_795_937_321);
        assert_eq!(trickle_up_name("trickle_up_x_abc").unwrap().time, 0);
        assert_eq!(trickle_up_name("trickle_up_12"), None);
        assert_eq!(trickle_up_name("upper_case_1.00"), None);
        assert!(is_sent("trickle_up_a_1.xml.sent"));
        assert!(!is_sent("trickle_up_a_1.xml"));
        assert!(!is_sent("in.sent"));
    }

    #[test]
    fn messages_come_from_trickle_files_only_oldest_first() {
        let msgs = msgs_from_host([
            ("trickle_up_b_20.xml", "<variety>v</variety>\nsecond\n"),
            ("job.in", "not a trickle"),
            ("trickle_up_a_10.xml.sent", "<variety>v</variety>\nfirst\n"),
        ]);
        let got: Vec<(&str, i64, &str)> = msgs
            .iter()
            .map(|m| (m.result_name.as_str(), m.time, m.body.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("a", 10, "<variety>v</variety>\nfirst\n"),
                ("b", 20, "<variety>v</variety>\nsecond\n")
            ]
        );
    }

    #[test]
    fn a_trickle_down_goes_to_a_file_named_after_its_time() {
        let t = TrickleDown {
            result_name: "r".into(),
            time: 1_795_937_321,
            body: String::new(),
        };
        assert_eq!(trickle_down_file_name(&t), "trickle_down_1795937321");
    }
}
