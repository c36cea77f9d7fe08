//! The start-up's own watch: a stop asked for while it runs, and systemd told how it goes.
//!
//! A large data directory (150,000 tasks: a 200 MB `client_state.xml`) takes seconds to load
//! and check. [`StopFlag`] hears SIGTERM and SIGINT from before the start-up begins (a plain
//! flag set by the signal handler: the runtime that would otherwise hear them is busy
//! starting), and [`Daemon::start_with`](crate::Daemon::start_with) (`daemon/startup.rs`)
//! looks at it between its phases. The state file is parsed on a thread of its own that the start-up stops waiting
//! for when a stop comes: nothing has changed then, the state file is untouched, and the
//! daemon exits at once.
//!
//! Under systemd ([`Progress`]), each phase done feeds the watchdog (`WATCHDOG=1`, at most
//! once per ping interval) and, once the start-up has taken longer than
//! [`Progress::EXTEND_AFTER`], extends the start timeout (`EXTEND_TIMEOUT_USEC`) by
//! [`Progress::EXTENSION`]: both come from work done, so a start-up stuck in one phase stops
//! sending them and systemd's own timeouts apply.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sdnotify::Notifier;

/// The signal that asked the start-up to stop, if one did (0: none).
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicI32>);

impl StopFlag {
    /// A flag nothing sets but [`StopFlag::set`].
    pub fn new() -> Self {
        StopFlag::default()
    }

    /// A flag set by SIGTERM and SIGINT from now on. The handlers are added beside those
    /// tokio installs for the main loop; both run on each signal.
    pub fn on_signals() -> std::io::Result<Self> {
        let flag = StopFlag::new();
        for signal in [libc::SIGTERM, libc::SIGINT] {
            let inner = Arc::clone(&flag.0);
            // SAFETY: the action only stores into an atomic integer, which is
            // async-signal-safe; it allocates nothing and takes no lock.
            unsafe {
                signal_hook_registry::register(signal, move || {
                    inner.store(signal, Ordering::SeqCst);
                })?;
            }
        }
        Ok(flag)
    }

    /// Records a stop asked for by `signal`.
    pub fn set(&self, signal: i32) {
        self.0.store(signal, Ordering::SeqCst);
    }

    /// The signal that asked for a stop, if any.
    pub fn asked(&self) -> Option<i32> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// The stop's name for the log (`SIGTERM`, `SIGINT`).
    pub fn reason(&self) -> &'static str {
        match self.asked() {
            Some(libc::SIGINT) => "SIGINT",
            Some(libc::SIGTERM) => "SIGTERM",
            Some(_) => "a signal",
            None => "no stop",
        }
    }
}

/// What the start-up says to systemd as its phases end.
#[derive(Debug)]
pub struct Progress {
    notifier: Notifier,
    began: Instant,
    last_ping: Option<Instant>,
    /// Until when systemd was last told to wait.
    extended_to: Option<Instant>,
}

impl Progress {
    /// How long a start-up may take before it asks systemd for more time.
    pub const EXTEND_AFTER: Duration = Duration::from_secs(3);
    /// How much more time each phase done asks for: longer than any one phase of a
    /// 150,000-task start-up.
    pub const EXTENSION: Duration = Duration::from_secs(60);

    /// Progress reported through `notifier`, the start-up having begun now.
    pub fn new(notifier: Notifier) -> Self {
        Progress::began_at(notifier, Instant::now())
    }

    /// Progress reported through `notifier` for a start-up begun at `began`.
    pub fn began_at(notifier: Notifier, began: Instant) -> Self {
        Progress {
            notifier,
            began,
            last_ping: None,
            extended_to: None,
        }
    }

    /// The notifier, for the daemon to keep once started.
    pub fn notifier(&self) -> &Notifier {
        &self.notifier
    }

    /// Phase `what` is done at `at`: what systemd should hear now, as datagrams (empty when
    /// nothing is due). Pure: [`Progress::done`] sends them.
    pub fn due(&mut self, what: &str, at: Instant) -> Vec<String> {
        let mut out = Vec::new();
        if !self.notifier.is_enabled() {
            return out;
        }
        if let Some(every) = self.notifier.ping_interval() {
            if self.last_ping.is_none_or(|p| at.duration_since(p) >= every) {
                self.last_ping = Some(at);
                out.push("WATCHDOG=1".to_owned());
            }
        }
        let elapsed = at.duration_since(self.began);
        if elapsed >= Self::EXTEND_AFTER {
            // Asked again once half of the last extension is used, so that systemd is never
            // left with less than half of it while work goes on.
            let renew = self
                .extended_to
                .is_none_or(|to| to.saturating_duration_since(at) <= Self::EXTENSION / 2);
            if renew {
                self.extended_to = Some(at + Self::EXTENSION);
                out.push(format!(
                    "EXTEND_TIMEOUT_USEC={}\nSTATUS=starting: {what} ({} s)",
                    Self::EXTENSION.as_micros(),
                    elapsed.as_secs()
                ));
            }
        }
        out
    }

    /// Phase `what` is done: sends what is due (see [`Progress::due`]).
    pub fn done(&mut self, what: &str) {
        for message in self.due(what, Instant::now()) {
            if let Err(e) = self.notifier.send(&message) {
                tracing::debug!("cannot notify systemd: {e}");
            }
        }
    }
}

/// How a start-up that a stop may cut short ended
/// ([`Daemon::start_with`](crate::Daemon::start_with), whose `D` is the `Daemon`).
#[derive(Debug)]
pub enum Started<D> {
    /// Started: the main loop may run
    /// ([`Daemon::run_after`](crate::Daemon::run_after)).
    Ready(Box<D>),
    /// A stop came during the start-up; what it had changed is saved. The process exits.
    Stopped,
}

/// Runs `work` on a thread of its own and waits for its value, unless `stop` is asked for
/// first: then `Ok(None)` at once, the thread left to finish alone (its value dropped).
/// An error when the thread cannot be made (`work` did not run), or when it ended without a
/// value (`work` panicked).
pub fn unless_stopped<T: Send + 'static>(
    name: &str,
    stop: &StopFlag,
    work: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<Option<T>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let _ = tx.send(work());
        })?;
    loop {
        if stop.asked().is_some() {
            return Ok(None);
        }
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(v) => return Ok(Some(v)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(std::io::Error::other(format!(
                    "{name} ended without a result"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(watchdog: Option<Duration>) -> Progress {
        Progress::began_at(
            Notifier::with_socket("/run/ferrite-test/notify", watchdog),
            Instant::now(),
        )
    }

    #[test]
    fn a_quick_start_up_only_feeds_the_watchdog() {
        let mut p = watched(Some(Duration::from_secs(10)));
        let t0 = p.began;
        assert_eq!(p.due("state loaded", t0), ["WATCHDOG=1"]);
        // Within the ping interval (5 s): nothing more.
        assert!(p
            .due("files checked", t0 + Duration::from_secs(1))
            .is_empty());
    }

    #[test]
    fn a_long_start_up_extends_the_timeout_as_phases_end() {
        let mut p = watched(Some(Duration::from_secs(4)));
        let t0 = p.began;
        let at = t0 + Duration::from_secs(5);
        let out = p.due("state loaded", at);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0], "WATCHDOG=1");
        assert!(
            out[1].starts_with("EXTEND_TIMEOUT_USEC=60000000\nSTATUS=starting: state loaded"),
            "{out:?}"
        );
        // The next phase soon after: the extension still holds, the watchdog was just fed.
        assert!(p.due("config", at + Duration::from_secs(1)).is_empty());
        // Past half the extension: asked again, and the watchdog fed.
        let later = at + Duration::from_secs(31);
        let out = p.due("files checked", later);
        assert_eq!(out[0], "WATCHDOG=1");
        assert!(out[1].starts_with("EXTEND_TIMEOUT_USEC="), "{out:?}");
    }

    #[test]
    fn outside_systemd_nothing_is_due() {
        let mut p = Progress::new(Notifier::disabled());
        let later = p.began + Duration::from_secs(100);
        assert!(p.due("state loaded", later).is_empty());
    }

    #[test]
    fn a_stop_abandons_the_work_at_once() {
        let stop = StopFlag::new();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let setter = stop.clone();
        // The work waits for a word that comes only after the stop: without abandoning it,
        // the wait below would never end.
        let waiter = std::thread::spawn(move || {
            setter.set(libc::SIGTERM);
        });
        let got = unless_stopped("test-work", &stop, move || go_rx.recv().is_ok()).expect("thread");
        waiter.join().expect("setter");
        assert_eq!(got, None);
        assert_eq!(stop.reason(), "SIGTERM");
        drop(go_tx);
    }

    #[test]
    fn without_a_stop_the_value_comes_back() {
        let stop = StopFlag::new();
        assert_eq!(
            unless_stopped("test-work", &stop, || 42).expect("thread"),
            Some(42)
        );
        assert_eq!(stop.asked(), None);
    }

    #[test]
    fn the_signal_handler_sets_the_flag() {
        let flag = StopFlag::on_signals().expect("handlers");
        // The process's own SIGINT: tokio is not listening in this test, and the flag's
        // handler replaces the default action (ending the process) for as long as it is
        // registered.
        // SAFETY: raise sends a signal to this thread; the handler only stores an integer.
        let rc = unsafe { libc::raise(libc::SIGINT) };
        assert_eq!(rc, 0);
        assert_eq!(flag.asked(), Some(libc::SIGINT));
        assert_eq!(flag.reason(), "SIGINT");
    }
}
