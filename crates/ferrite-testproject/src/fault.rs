//! Faults the server injects on demand, so a client's handling of each can be tested.

use std::collections::HashMap;
use std::fmt;

/// Text for `--help`.
pub const FAULT_HELP: &str = "\
Faults (--fault NAME[:COUNT] at start, or POST /fault with body NAME[:COUNT]; COUNT is how
many requests it affects, 1 by default, `always` for no limit):
  sched-500         the scheduler answers HTTP 500
  sched-timeout     the scheduler never answers (holds the connection for 10 minutes)
  sched-truncated   the scheduler reply is cut in the middle of the XML
  sched-malformed   the scheduler reply is not well-formed XML
  master-500        the master page answers HTTP 500
  download-500      a download answers HTTP 500
  download-stall    a download sends half the file, then stalls for 10 minutes
  upload-500        the upload handler answers HTTP 500
  upload-transient  the upload handler answers <status>1</status> (transient error)
  upload-permanent  the upload handler answers <status>-1</status> (permanent error)
  wrong-md5         the next job sent gives its input a wrong <md5_cksum>
  hostile-name      the next job sent names its input `../../hostile_in`
  bad-signature     the next reply signs app files with a corrupted signature
  huge-file         the next job sent gets an extra 1 GiB input (served as zeros)";

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Scheduler: HTTP 500.
    Sched500,
    /// Scheduler: no answer.
    SchedTimeout,
    /// Scheduler: reply cut short.
    SchedTruncated,
    /// Scheduler: reply not XML.
    SchedMalformed,
    /// Master page: HTTP 500.
    Master500,
    /// Download: HTTP 500.
    Download500,
    /// Download: half the bytes, then nothing.
    DownloadStall,
    /// Upload handler: HTTP 500.
    Upload500,
    /// Upload handler: status 1.
    UploadTransient,
    /// Upload handler: status -1.
    UploadPermanent,
    /// A job's input with a wrong MD5.
    WrongMd5,
    /// A job's input named with `..`.
    HostileName,
    /// App files with a bad signature.
    BadSignature,
    /// A job asking for a 1 GiB file.
    HugeFile,
}

impl Fault {
    /// Every fault, in help order.
    pub const ALL: [Fault; 14] = [
        Fault::Sched500,
        Fault::SchedTimeout,
        Fault::SchedTruncated,
        Fault::SchedMalformed,
        Fault::Master500,
        Fault::Download500,
        Fault::DownloadStall,
        Fault::Upload500,
        Fault::UploadTransient,
        Fault::UploadPermanent,
        Fault::WrongMd5,
        Fault::HostileName,
        Fault::BadSignature,
        Fault::HugeFile,
    ];

    /// The name used on the command line and in `POST /fault`.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Sched500 => "sched-500",
            Fault::SchedTimeout => "sched-timeout",
            Fault::SchedTruncated => "sched-truncated",
            Fault::SchedMalformed => "sched-malformed",
            Fault::Master500 => "master-500",
            Fault::Download500 => "download-500",
            Fault::DownloadStall => "download-stall",
            Fault::Upload500 => "upload-500",
            Fault::UploadTransient => "upload-transient",
            Fault::UploadPermanent => "upload-permanent",
            Fault::WrongMd5 => "wrong-md5",
            Fault::HostileName => "hostile-name",
            Fault::BadSignature => "bad-signature",
            Fault::HugeFile => "huge-file",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A fault and how many requests it affects (`None` = no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultSpec {
    /// The fault.
    pub fault: Fault,
    /// Requests left to affect; `None` = always.
    pub count: Option<u32>,
}

impl FaultSpec {
    /// Parses `NAME[:COUNT]`.
    pub fn parse(s: &str) -> Result<FaultSpec, String> {
        let s = s.trim();
        let (name, count) = match s.split_once(':') {
            Some((n, c)) => (n, Some(c)),
            None => (s, None),
        };
        let fault = Fault::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| format!("unknown fault `{name}`\n{FAULT_HELP}"))?;
        let count = match count {
            None => Some(1),
            Some("always") => None,
            Some(c) => Some(
                c.parse::<u32>()
                    .map_err(|_| format!("`{c}`: COUNT is a number or `always`"))?,
            ),
        };
        Ok(FaultSpec { fault, count })
    }
}

/// The faults armed now.
#[derive(Debug, Default)]
pub struct Faults {
    /// Remaining count per fault (`None` = always).
    armed: HashMap<Fault, Option<u32>>,
}

impl Faults {
    /// Arms `spec` (adding to the count of a fault already armed).
    pub fn arm(&mut self, spec: FaultSpec) {
        let e = self.armed.entry(spec.fault).or_insert(Some(0));
        *e = match (*e, spec.count) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            _ => None,
        };
        if *e == Some(0) {
            self.armed.remove(&spec.fault);
        }
    }

    /// Whether `fault` is armed; if so, uses one of its count.
    pub fn take(&mut self, fault: Fault) -> bool {
        match self.armed.get_mut(&fault) {
            None => false,
            Some(None) => true,
            Some(Some(n)) => {
                *n -= 1;
                if *n == 0 {
                    self.armed.remove(&fault);
                }
                true
            }
        }
    }

    /// Names and remaining counts (`-1` = always), for `/status`.
    pub fn pending(&self) -> Vec<(String, i64)> {
        let mut v: Vec<(String, i64)> = self
            .armed
            .iter()
            .map(|(f, c)| (f.name().to_owned(), c.map_or(-1, i64::from)))
            .collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_and_counts() {
        for f in Fault::ALL {
            assert!(FAULT_HELP.contains(f.name()), "{f} documented");
            assert_eq!(FaultSpec::parse(f.name()).expect("parses").fault, f);
        }
        assert!(FaultSpec::parse("nope").is_err());
        assert!(FaultSpec::parse("sched-500:x").is_err());
        let mut fs = Faults::default();
        fs.arm(FaultSpec::parse("sched-500:2").expect("spec"));
        fs.arm(FaultSpec::parse("wrong-md5:always").expect("spec"));
        assert!(fs.take(Fault::Sched500));
        assert!(fs.take(Fault::Sched500));
        assert!(!fs.take(Fault::Sched500));
        for _ in 0..5 {
            assert!(fs.take(Fault::WrongMd5));
        }
        assert!(!fs.take(Fault::Upload500));
        assert_eq!(fs.pending(), vec![("wrong-md5".to_owned(), -1)]);
    }
}
