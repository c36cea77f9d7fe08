//! Classifying how an app ended, from its wait status, what was asked of it, and the
//! `boinc_finish_called` / `boinc_temporary_exit` files it left in the slot.
//!
//! The rules follow client/app_control.cpp `handle_exited_app`: a requested quit or abort wins
//! over the status; a temporary-exit file with a reason line comes before the exit code; a
//! non-zero code is an error; zero with a finish file is success; zero without one is a
//! premature exit. Signals from outside (HUP, INT, QUIT, KILL, TERM, STOP) mean "restart";
//! other signals, and the API's crash code 193, are crashes.

use std::fs;
use std::path::Path;

use crate::limits::EXIT_SIGNAL;
use crate::process::ProcessExit;
use crate::slot::{FINISH_FILE, TEMPORARY_EXIT_FILE};

/// The contents of `boinc_finish_called`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishFile {
    /// The status the app passed to `boinc_finish`.
    pub status: i32,
    /// Optional message for the user.
    pub message: Option<String>,
    /// Whether the message is to be shown as a notice.
    pub notice: bool,
}

impl FinishFile {
    /// Parses the file text (line 1 status, line 2 message, line 3 `notice`).
    pub fn parse(text: &str) -> FinishFile {
        let mut lines = text.lines();
        let status = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(0);
        let message = lines
            .next()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_owned);
        let notice = lines.next().is_some_and(|l| l.contains("notice"));
        FinishFile {
            status,
            message,
            notice,
        }
    }
}

/// The contents of `boinc_temporary_exit`.
#[derive(Debug, Clone, PartialEq)]
pub struct TemporaryExitFile {
    /// Seconds to wait before restarting; out-of-range values (outside 0..=86400) become 300.
    pub delay: f64,
    /// Why (shown as the scheduler wait reason).
    pub reason: String,
    /// Whether the reason is to be shown as a notice.
    pub notice: bool,
}

impl TemporaryExitFile {
    /// Parses the file text. Quirk kept from the official client: a file without a reason line
    /// counts as absent (`None`).
    pub fn parse(text: &str) -> Option<TemporaryExitFile> {
        let mut lines = text.lines();
        let delay_line = lines.next()?;
        let reason = lines.next()?.trim().to_owned();
        let delay = match delay_line.trim().parse::<f64>() {
            Ok(d) if (0.0..=86400.0).contains(&d) => d,
            _ => 300.0,
        };
        let notice = lines.next().is_some_and(|l| l.contains("notice"));
        Some(TemporaryExitFile {
            delay,
            reason,
            notice,
        })
    }
}

/// What the supervisor had asked of the app before it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    /// Nothing: the app ended on its own.
    Nothing,
    /// Quit (will be restarted from its checkpoint).
    Quit,
    /// Abort with this exit code.
    Abort(i32),
}

/// How a task's process ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ExitOutcome {
    /// Exit 0 with `boinc_finish_called`: the job is done (outputs should be there).
    Finished(FinishFile),
    /// `boinc_temporary_exit`: restart after `delay` seconds.
    TemporaryExit(TemporaryExitFile),
    /// A crash: killed by a signal that is not an outside kill, or exit code 193.
    Crashed {
        /// The signal, if the process was killed by one.
        signal: Option<i32>,
        /// The exit code, if the process exited (193 from the API's crash handler).
        exit_code: Option<i32>,
    },
    /// Non-zero exit code other than 193 (a compute error).
    ExitedWithError(i32),
    /// Exit 0 without a finish file: premature exit; the job restarts.
    ExitedWithoutFinishing,
    /// Killed by HUP/INT/QUIT/KILL/TERM/STOP from outside: the job restarts.
    KilledFromOutside(i32),
    /// The app ended after a requested quit: the job restarts from its checkpoint.
    Quit,
    /// The app ended after a requested abort with this exit code: the job ends with an error.
    Aborted(i32),
    /// Any other wait status.
    Unknown(i32),
}

impl ExitOutcome {
    /// Whether the job is to be started again later (in the same slot).
    pub fn will_restart(&self) -> bool {
        matches!(
            self,
            ExitOutcome::TemporaryExit(_)
                | ExitOutcome::ExitedWithoutFinishing
                | ExitOutcome::KilledFromOutside(_)
                | ExitOutcome::Quit
        )
    }

    /// The result's exit status as the official client records it (0 for success and restarts).
    pub fn exit_status(&self) -> i32 {
        match self {
            ExitOutcome::Finished(_) => 0,
            ExitOutcome::Crashed {
                exit_code: Some(c), ..
            } => *c,
            ExitOutcome::Crashed {
                signal: Some(s), ..
            } => *s,
            ExitOutcome::Crashed { .. } => EXIT_SIGNAL,
            ExitOutcome::ExitedWithError(c) | ExitOutcome::Aborted(c) => *c,
            ExitOutcome::Unknown(_) => crate::limits::EXIT_UNKNOWN,
            _ => 0,
        }
    }

    /// The line the official client's `handle_exited_app` adds to the result's
    /// `stderr_out` (in a `<message>` element, see [`stderr_message`]) when the app ends in
    /// error on its own: `process exited with code N (0xN, -M)` for a non-zero exit,
    /// `process got signal N` for a crash by signal, `process exit, unknown` for any other
    /// wait status. `None` for successes, restarts and requested aborts (whose reason is
    /// the aborter's to give).
    pub fn error_message(&self) -> Option<String> {
        match self {
            ExitOutcome::ExitedWithError(c)
            | ExitOutcome::Crashed {
                exit_code: Some(c), ..
            } => Some(format!(
                "process exited with code {c} (0x{:x}, {})",
                *c as u32,
                !0xff_i32 | *c
            )),
            ExitOutcome::Crashed {
                signal: Some(s), ..
            } => Some(format!("process got signal {s}")),
            ExitOutcome::Unknown(_) => Some("process exit, unknown".to_owned()),
            _ => None,
        }
    }
}

/// A reason a result failed, as BOINC's `report_result_error` appends it to `stderr_out`
/// (the text is followed directly by the closing tag).
pub fn stderr_message(why: &str) -> String {
    format!("<message>\n{why}</message>\n")
}

/// A result's `stderr_out` once its app has ended for good, as the official client builds
/// it: what it held before, the reason the task failed (if it did, see
/// [`stderr_message`]), then the app's `stderr.txt` as it is in `<stderr_txt>`. Without
/// the final line break, which the state and request writers add (as BOINC does when the
/// text lacks one).
pub fn stderr_out_after_exit(previous: &str, why: Option<&str>, stderr: &str) -> String {
    let mut out = String::with_capacity(previous.len() + stderr.len() + 128);
    out.push_str(previous.trim_end_matches('\n'));
    if !out.is_empty() {
        out.push('\n');
    }
    if let Some(why) = why {
        out.push_str(&stderr_message(why));
    }
    out.push_str("<stderr_txt>\n");
    out.push_str(stderr);
    out.push_str("\n</stderr_txt>");
    out
}

/// Signals that mean "killed from outside, restart the job".
pub fn is_outside_kill(signal: i32) -> bool {
    [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGKILL,
        libc::SIGTERM,
        libc::SIGSTOP,
    ]
    .contains(&signal)
}

/// Classifies an ending from already-read slot files (pure).
pub fn classify(
    exit: ProcessExit,
    requested: Requested,
    finish: Option<FinishFile>,
    temporary: Option<TemporaryExitFile>,
) -> ExitOutcome {
    match requested {
        Requested::Quit => return ExitOutcome::Quit,
        Requested::Abort(code) => return ExitOutcome::Aborted(code),
        Requested::Nothing => {}
    }
    match exit {
        ProcessExit::Exited(code) => {
            if let Some(t) = temporary {
                ExitOutcome::TemporaryExit(t)
            } else if code == EXIT_SIGNAL {
                ExitOutcome::Crashed {
                    signal: None,
                    exit_code: Some(code),
                }
            } else if code != 0 {
                ExitOutcome::ExitedWithError(code)
            } else if let Some(f) = finish {
                ExitOutcome::Finished(f)
            } else {
                ExitOutcome::ExitedWithoutFinishing
            }
        }
        ProcessExit::Signaled(sig) if is_outside_kill(sig) => ExitOutcome::KilledFromOutside(sig),
        ProcessExit::Signaled(sig) => ExitOutcome::Crashed {
            signal: Some(sig),
            exit_code: None,
        },
        ProcessExit::Other(raw) => ExitOutcome::Unknown(raw),
    }
}

/// Reads the finish and temporary-exit files of a slot and classifies the ending.
pub fn classify_in_slot(slot_dir: &Path, exit: ProcessExit, requested: Requested) -> ExitOutcome {
    let finish = fs::read_to_string(slot_dir.join(FINISH_FILE))
        .ok()
        .map(|t| FinishFile::parse(&t));
    let temporary = fs::read_to_string(slot_dir.join(TEMPORARY_EXIT_FILE))
        .ok()
        .and_then(|t| TemporaryExitFile::parse(&t));
    classify(exit, requested, finish, temporary)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn fin() -> Option<FinishFile> {
        Some(FinishFile::parse("0\n"))
    }

    #[test]
    fn error_messages_are_the_official_lines() {
        let m = |o: ExitOutcome| o.error_message();
        assert_eq!(
            m(ExitOutcome::ExitedWithError(1)).as_deref(),
            Some("process exited with code 1 (0x1, -255)")
        );
        assert_eq!(
            m(ExitOutcome::ExitedWithError(42)).as_deref(),
            Some("process exited with code 42 (0x2a, -214)")
        );
        // The API's crash handler exits 193.
        assert_eq!(
            m(classify(
                ProcessExit::Exited(193),
                Requested::Nothing,
                None,
                None
            ))
            .as_deref(),
            Some("process exited with code 193 (0xc1, -63)")
        );
        assert_eq!(
            m(classify(
                ProcessExit::Signaled(11),
                Requested::Nothing,
                None,
                None
            ))
            .as_deref(),
            Some("process got signal 11")
        );
        assert_eq!(
            m(ExitOutcome::Unknown(0x7f)).as_deref(),
            Some("process exit, unknown")
        );
        for quiet in [
            classify(ProcessExit::Exited(0), Requested::Nothing, fin(), None),
            classify(ProcessExit::Exited(0), Requested::Nothing, None, None),
            classify(ProcessExit::Signaled(9), Requested::Nothing, None, None),
            ExitOutcome::Quit,
            ExitOutcome::Aborted(203),
        ] {
            assert_eq!(quiet.error_message(), None, "{quiet:?}");
        }
        assert_eq!(
            stderr_message("process got signal 6"),
            "<message>\nprocess got signal 6</message>\n"
        );
    }

    #[test]
    fn stderr_out_holds_the_reason_then_the_apps_stderr_as_it_is() {
        assert_eq!(
            stderr_out_after_exit(
                "",
                Some("process exited with code 3 (0x3, -253)"),
                "about to fail\n"
            ),
            "<message>\nprocess exited with code 3 (0x3, -253)</message>\n\
             <stderr_txt>\nabout to fail\n\n</stderr_txt>"
        );
        assert_eq!(
            stderr_out_after_exit("", None, "done"),
            "<stderr_txt>\ndone\n</stderr_txt>"
        );
        // What an earlier step wrote stays first.
        assert_eq!(
            stderr_out_after_exit("<message>\nearlier</message>\n", None, ""),
            "<message>\nearlier</message>\n<stderr_txt>\n\n</stderr_txt>"
        );
    }

    #[test]
    fn parse_files() {
        assert_eq!(
            FinishFile::parse("3\nout of luck\nnotice\n"),
            FinishFile {
                status: 3,
                message: Some("out of luck".into()),
                notice: true
            }
        );
        let t = TemporaryExitFile::parse("77\nwaiting for GPU\n").unwrap();
        assert_eq!(
            (t.delay, t.reason.as_str(), t.notice),
            (77.0, "waiting for GPU", false)
        );
        assert_eq!(TemporaryExitFile::parse("77\n"), None);
        assert_eq!(
            TemporaryExitFile::parse("999999\nx\n").unwrap().delay,
            300.0
        );
        assert_eq!(TemporaryExitFile::parse("-1\nx\n").unwrap().delay, 300.0);
    }

    #[test]
    fn classification_rules() {
        use ProcessExit::*;
        let n = Requested::Nothing;
        assert!(matches!(
            classify(Exited(0), n, fin(), None),
            ExitOutcome::Finished(_)
        ));
        assert_eq!(
            classify(Exited(0), n, None, None),
            ExitOutcome::ExitedWithoutFinishing
        );
        assert_eq!(
            classify(Exited(5), n, fin(), None),
            ExitOutcome::ExitedWithError(5)
        );
        assert_eq!(
            classify(Exited(193), n, None, None),
            ExitOutcome::Crashed {
                signal: None,
                exit_code: Some(193)
            }
        );
        assert_eq!(
            classify(Signaled(libc::SIGSEGV), n, None, None),
            ExitOutcome::Crashed {
                signal: Some(libc::SIGSEGV),
                exit_code: None
            }
        );
        assert_eq!(
            classify(Signaled(libc::SIGTERM), n, None, None),
            ExitOutcome::KilledFromOutside(libc::SIGTERM)
        );
        let t = TemporaryExitFile::parse("10\nr\n");
        assert!(matches!(
            classify(Exited(0), n, fin(), t.clone()),
            ExitOutcome::TemporaryExit(_)
        ));
        assert_eq!(
            classify(Exited(0), Requested::Quit, fin(), t),
            ExitOutcome::Quit
        );
        assert_eq!(
            classify(Signaled(9), Requested::Abort(197), None, None),
            ExitOutcome::Aborted(197)
        );
        assert!(ExitOutcome::Quit.will_restart());
        assert!(!ExitOutcome::Aborted(197).will_restart());
        assert_eq!(ExitOutcome::Aborted(197).exit_status(), 197);
    }
}
