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
  sched-down        the scheduler answers as a stopped BOINC project does: `Project is
                    temporarily shut down for maintenance`, <project_is_down/> and a
                    <request_delay> of an hour
  master-500        the master page answers HTTP 500
  download-500      a download answers HTTP 500
  download-stall    a download sends half the file, then stalls for 10 minutes
  upload-500        the upload handler answers HTTP 500
  upload-transient  the upload handler answers <status>1</status> (transient error)
  upload-permanent  the upload handler answers <status>-1</status> (permanent error)
  wrong-md5         the next job sent gives its input a wrong <md5_cksum>
  hostile-name      the next job sent names its input `../../hostile_in`
  bad-signature     the next reply signs app files with a corrupted signature
  huge-file         the next job sent gets an extra 1 GiB input (served as zeros)
  key-change        the next reply carries the project's code-signing key even to a client
                    that has another one, with no signature by the old key
  key-change-self-signed
                    the same, with the new key signed by itself (not by the old key)
  tampered-app      the next reply gives its app files the MD5 and size of altered bytes (the
                    signature stays), and those downloads serve the altered bytes: a
                    man-in-the-middle who cannot sign

Storm (POST /fault with body storm:RATE[:SEED], or storm:off): every request to the master
page, scheduler, web RPCs, downloads and uploads gets, with probability RATE (0 to 1), one of
an HTTP 500, a connection reset, a slow answer (1 to 3 s) or a partial body, drawn from a
generator seeded with SEED (1 by default). /status then also lists every request
(`traffic.log`) and, per endpoint, the requests, faults and most requests in any 60 s.";

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
    /// Scheduler: the project is down for maintenance.
    SchedDown,
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
    /// The project's key sent to a client that has another, unsigned.
    KeyChange,
    /// The project's key sent to a client that has another, signed by itself.
    KeyChangeSelfSigned,
    /// App files with the MD5 of altered bytes, and those bytes served.
    TamperedApp,
}

impl Fault {
    /// Every fault, in help order.
    pub const ALL: [Fault; 18] = [
        Fault::Sched500,
        Fault::SchedTimeout,
        Fault::SchedTruncated,
        Fault::SchedMalformed,
        Fault::SchedDown,
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
        Fault::KeyChange,
        Fault::KeyChangeSelfSigned,
        Fault::TamperedApp,
    ];

    /// The name used on the command line and in `POST /fault`.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Sched500 => "sched-500",
            Fault::SchedTimeout => "sched-timeout",
            Fault::SchedTruncated => "sched-truncated",
            Fault::SchedMalformed => "sched-malformed",
            Fault::SchedDown => "sched-down",
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
            Fault::KeyChange => "key-change",
            Fault::KeyChangeSelfSigned => "key-change-self-signed",
            Fault::TamperedApp => "tampered-app",
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

/// A storm: random faults at a rate, from a seeded generator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StormSpec {
    /// Probability that a request gets a fault, 0 to 1.
    pub rate: f64,
    /// Seed of the generator.
    pub seed: u64,
}

impl StormSpec {
    /// Parses `storm:RATE[:SEED]` (`Ok(Some)`) or `storm:off` (`Ok(None)`); `None` when `s`
    /// is not about the storm at all.
    pub fn parse(s: &str) -> Option<Result<Option<StormSpec>, String>> {
        let rest = s.trim().strip_prefix("storm")?;
        let rest = match rest.strip_prefix(':') {
            Some(r) => r,
            None if rest.is_empty() => "",
            None => return None,
        };
        if rest == "off" {
            return Some(Ok(None));
        }
        let mut parts = rest.split(':');
        let rate = match parts.next().map(str::parse::<f64>) {
            Some(Ok(r)) if (0.0..=1.0).contains(&r) => r,
            _ => {
                return Some(Err(format!(
                    "`{s}`: expected storm:RATE[:SEED], RATE in 0..1"
                )))
            }
        };
        let seed = match parts.next() {
            None => 1,
            Some(x) => match x.parse::<u64>() {
                Ok(v) => v,
                Err(_) => return Some(Err(format!("`{x}`: SEED is a number"))),
            },
        };
        if parts.next().is_some() {
            return Some(Err(format!("`{s}`: expected storm:RATE[:SEED]")));
        }
        Some(Ok(Some(StormSpec { rate, seed })))
    }
}

/// What the storm does to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StormFault {
    /// HTTP 500.
    Error,
    /// The connection is closed without an answer.
    Reset,
    /// The answer comes after this many milliseconds.
    Slow(u64),
    /// Part of the body, then the connection is closed.
    Partial,
}

impl StormFault {
    /// The name in `/status`.
    pub fn name(self) -> &'static str {
        match self {
            StormFault::Error => "error",
            StormFault::Reset => "reset",
            StormFault::Slow(_) => "slow",
            StormFault::Partial => "partial",
        }
    }

    /// Whether the request fails (a slow answer is still an answer).
    pub fn fails(self) -> bool {
        !matches!(self, StormFault::Slow(_))
    }
}

/// A running storm: its spec and its generator (SplitMix64: same seed, same faults in the
/// same order of requests).
#[derive(Debug, Clone)]
pub struct Storm {
    /// The spec.
    spec: StormSpec,
    /// Generator state.
    state: u64,
}

impl Storm {
    /// A storm with `spec`.
    pub fn new(spec: StormSpec) -> Storm {
        Storm {
            spec,
            state: spec.seed,
        }
    }

    /// The spec.
    pub fn spec(&self) -> StormSpec {
        self.spec
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The fault for the next request, if any.
    pub fn roll(&mut self) -> Option<StormFault> {
        if self.unit() >= self.spec.rate {
            return None;
        }
        Some(match self.next_u64() % 4 {
            0 => StormFault::Error,
            1 => StormFault::Reset,
            2 => StormFault::Slow(1000 + self.next_u64() % 2000),
            _ => StormFault::Partial,
        })
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// Seconds since the server started.
    pub t: f64,
    /// `master`, `scheduler`, `web_rpc`, `download`, `upload` or `other`.
    pub endpoint: &'static str,
    /// The file (downloads and uploads), else empty.
    pub target: String,
    /// `ok`, or the storm fault's name.
    pub outcome: &'static str,
}

/// Every request, for `/status`: the storm's effect on a client is measured here.
#[derive(Debug, Default)]
pub struct Traffic {
    /// Requests in arrival order (the most recent [`Traffic::MAX_LOG`]).
    log: Vec<Seen>,
    /// Requests per endpoint ever.
    totals: HashMap<&'static str, (u64, u64)>,
}

impl Traffic {
    /// Most requests kept in the log.
    pub const MAX_LOG: usize = 100_000;

    /// Records a request.
    pub fn record(&mut self, seen: Seen) {
        let e = self.totals.entry(seen.endpoint).or_default();
        e.0 += 1;
        if seen.outcome != "ok" {
            e.1 += 1;
        }
        if self.log.len() >= Self::MAX_LOG {
            self.log.remove(0);
        }
        self.log.push(seen);
    }

    /// The most requests to `endpoint` in any 60 s window.
    pub fn max_per_minute(&self, endpoint: &str) -> usize {
        let times: Vec<f64> = self
            .log
            .iter()
            .filter(|s| s.endpoint == endpoint)
            .map(|s| s.t)
            .collect();
        let (mut best, mut lo) = (0, 0);
        for hi in 0..times.len() {
            while times[hi] - times[lo] >= 60.0 {
                lo += 1;
            }
            best = best.max(hi - lo + 1);
        }
        best
    }

    /// As JSON: `{"endpoints": {NAME: {requests, faults, max_per_minute}}, "log": [...]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut endpoints = serde_json::Map::new();
        for (name, (n, f)) in &self.totals {
            endpoints.insert(
                (*name).to_owned(),
                serde_json::json!({
                    "requests": n,
                    "faults": f,
                    "max_per_minute": self.max_per_minute(name),
                }),
            );
        }
        let log: Vec<serde_json::Value> = self
            .log
            .iter()
            .map(|s| {
                serde_json::json!({
                    "t": (s.t * 1000.0).round() / 1000.0,
                    "endpoint": s.endpoint,
                    "target": s.target,
                    "outcome": s.outcome,
                })
            })
            .collect();
        serde_json::json!({ "endpoints": endpoints, "log": log })
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

    #[test]
    fn storm_specs_and_a_seeded_generator() {
        assert_eq!(StormSpec::parse("sched-500"), None);
        assert_eq!(StormSpec::parse("storm:off"), Some(Ok(None)));
        assert_eq!(
            StormSpec::parse("storm:0.25:7"),
            Some(Ok(Some(StormSpec {
                rate: 0.25,
                seed: 7
            })))
        );
        assert!(matches!(StormSpec::parse("storm:2"), Some(Err(_))));
        assert!(matches!(StormSpec::parse("storm:0.5:x"), Some(Err(_))));
        let spec = StormSpec {
            rate: 0.5,
            seed: 42,
        };
        let (mut a, mut b) = (Storm::new(spec), Storm::new(spec));
        let xs: Vec<_> = (0..1000).map(|_| a.roll()).collect();
        let ys: Vec<_> = (0..1000).map(|_| b.roll()).collect();
        assert_eq!(xs, ys, "same seed, same faults");
        let hits = xs.iter().filter(|x| x.is_some()).count();
        assert!((400..600).contains(&hits), "{hits} faults at rate 0.5");
        for kind in ["error", "reset", "slow", "partial"] {
            assert!(
                xs.iter().flatten().any(|f| f.name() == kind),
                "{kind} drawn"
            );
        }
        let mut none = Storm::new(StormSpec { rate: 0.0, seed: 1 });
        assert!((0..100).all(|_| none.roll().is_none()));
    }

    #[test]
    fn traffic_counts_per_endpoint_and_per_minute() {
        let mut t = Traffic::default();
        for (i, at) in [0.0, 10.0, 59.0, 61.0, 200.0].into_iter().enumerate() {
            t.record(Seen {
                t: at,
                endpoint: "scheduler",
                target: String::new(),
                outcome: if i == 0 { "error" } else { "ok" },
            });
        }
        assert_eq!(t.max_per_minute("scheduler"), 3);
        assert_eq!(t.max_per_minute("download"), 0);
        let j = t.to_json();
        assert_eq!(j["endpoints"]["scheduler"]["requests"], 5);
        assert_eq!(j["endpoints"]["scheduler"]["faults"], 1);
        assert_eq!(j["log"].as_array().map(Vec::len), Some(5));
    }
}
