//! The systemd service notification protocol (`sd_notify`) for `ferrited` run by a
//! `Type=notify` unit: READY, STATUS lines, WATCHDOG pings, RELOADING and STOPPING, sent as
//! datagrams to the socket systemd names in `NOTIFY_SOCKET`.
//!
//! Outside systemd (`NOTIFY_SOCKET` unset) every call is a no-op that succeeds, so the daemon
//! can call these unconditionally. The protocol is small enough to speak with `std` alone;
//! this is written here rather than with the `sd-notify` crate because that crate reads the
//! socket path only from the process environment, which tests cannot set safely (the
//! environment is process-global and tests run in parallel threads): here a path can be
//! given explicitly with [`Notifier::with_socket`].

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::PathBuf;
use std::time::Duration;

/// Where notifications go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// A socket file (`NOTIFY_SOCKET=/run/systemd/notify`).
    Path(PathBuf),
    /// A Linux abstract-namespace socket (`NOTIFY_SOCKET=@name`), given without the `@`.
    Abstract(Vec<u8>),
}

/// Sends service state to systemd; a no-op when the daemon was not started by it.
#[derive(Debug, Clone, Default)]
pub struct Notifier {
    /// The notification socket; `None` when not run by systemd (every call then does nothing).
    target: Option<Target>,
    /// The watchdog timeout systemd enforces (`WatchdogSec=`, passed as `WATCHDOG_USEC`), when
    /// it applies to this process: a loop that has not pinged for this long is killed.
    watchdog: Option<Duration>,
}

impl Notifier {
    /// A notifier that never sends anything.
    pub fn disabled() -> Notifier {
        Notifier::default()
    }

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from the environment. Call it
    /// once at start-up. The variables are left in place (removing them is unsafe once threads
    /// exist); a unit with `NotifyAccess=main` makes systemd ignore anything apps that inherit
    /// them might send.
    pub fn from_env() -> Notifier {
        Notifier::from_vars(
            std::env::var_os("NOTIFY_SOCKET").as_deref(),
            std::env::var_os("WATCHDOG_USEC").as_deref(),
            std::env::var_os("WATCHDOG_PID").as_deref(),
            std::process::id(),
        )
    }

    /// Builds a notifier from the values of the three variables, for a process whose id is
    /// `own_pid`. Malformed values are treated as absent, as libsystemd does.
    pub fn from_vars(
        notify_socket: Option<&OsStr>,
        watchdog_usec: Option<&OsStr>,
        watchdog_pid: Option<&OsStr>,
        own_pid: u32,
    ) -> Notifier {
        let target = notify_socket.and_then(parse_target);
        let for_us = match watchdog_pid.and_then(|p| p.to_str()) {
            None => true,
            Some(p) => p.trim().parse::<u32>().is_ok_and(|pid| pid == own_pid),
        };
        let watchdog = watchdog_usec
            .and_then(|v| v.to_str())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&usec| usec > 0 && for_us && target.is_some())
            .map(Duration::from_micros);
        Notifier { target, watchdog }
    }

    /// A notifier sending to the socket at `path` (a file path, or `@name` for an abstract
    /// socket), with the given watchdog timeout.
    pub fn with_socket(path: impl Into<OsString>, watchdog: Option<Duration>) -> Notifier {
        let target = parse_target(&path.into());
        let watchdog = watchdog.filter(|w| !w.is_zero() && target.is_some());
        Notifier { target, watchdog }
    }

    /// Whether notifications go anywhere (the daemon runs under systemd).
    pub fn is_enabled(&self) -> bool {
        self.target.is_some()
    }

    /// Start-up is complete: the data directory is locked, the state loaded and GUI RPC is
    /// listening. systemd considers the unit started only after this.
    pub fn ready(&self) -> io::Result<()> {
        self.send("READY=1")
    }

    /// Start-up is complete, with a first status line.
    pub fn ready_with_status(&self, status: &str) -> io::Result<()> {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)))
    }

    /// A one-line description of what the daemon is doing (`systemctl status` shows it).
    /// Line breaks in `status` are replaced by spaces: the protocol is line-based.
    pub fn status(&self, status: &str) -> io::Result<()> {
        self.send(&format!("STATUS={}", one_line(status)))
    }

    /// The main loop is alive. Send at least every [`Notifier::ping_interval`].
    pub fn watchdog(&self) -> io::Result<()> {
        self.send("WATCHDOG=1")
    }

    /// The watchdog timeout systemd enforces (`WATCHDOG_USEC`), if any for this process.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog
    }

    /// How often to send [`Notifier::watchdog`]: half the timeout, as systemd advises.
    pub fn ping_interval(&self) -> Option<Duration> {
        self.watchdog.map(|w| w / 2)
    }

    /// The daemon re-reads its configuration (SIGHUP); send [`Notifier::ready`] when done.
    pub fn reloading(&self) -> io::Result<()> {
        self.send("RELOADING=1")
    }

    /// The daemon is shutting down (stopping apps, saving the state).
    pub fn stopping(&self) -> io::Result<()> {
        self.send("STOPPING=1")
    }

    /// Sends one datagram of `NAME=value` lines; nothing when disabled.
    pub(crate) fn send(&self, message: &str) -> io::Result<()> {
        let Some(target) = &self.target else {
            return Ok(());
        };
        let addr = match target {
            Target::Path(p) => SocketAddr::from_pathname(p)?,
            Target::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(name)?
            }
        };
        let socket = UnixDatagram::unbound()?;
        let sent = socket.send_to_addr(message.as_bytes(), &addr)?;
        if sent != message.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "notification datagram truncated",
            ));
        }
        Ok(())
    }
}

/// `NOTIFY_SOCKET`'s value as a target: an absolute path or `@abstract`; anything else (empty,
/// relative, `vsock:`) is not supported and disables notifications.
fn parse_target(value: &OsStr) -> Option<Target> {
    let bytes = value.as_bytes();
    match bytes.first()? {
        b'/' => Some(Target::Path(PathBuf::from(value))),
        b'@' if bytes.len() > 1 => Some(Target::Abstract(bytes[1..].to_vec())),
        _ => None,
    }
}

/// `s` with line breaks replaced by spaces.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bound datagram socket standing in for systemd's, in a temporary directory.
    fn listener() -> (tempfile::TempDir, PathBuf, UnixDatagram) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("notify");
        let sock = UnixDatagram::bind(&path).expect("bind");
        sock.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        (dir, path, sock)
    }

    fn recv(sock: &UnixDatagram) -> String {
        let mut buf = [0u8; 4096];
        let n = sock.recv(&mut buf).expect("a datagram arrives");
        String::from_utf8(buf[..n].to_vec()).expect("utf-8")
    }

    #[test]
    fn each_call_sends_its_exact_datagram() {
        let (_dir, path, sock) = listener();
        let n = Notifier::with_socket(&path, Some(Duration::from_secs(120)));
        assert!(n.is_enabled());
        n.ready().expect("send");
        assert_eq!(recv(&sock), "READY=1");
        n.status("running 2 tasks; 1 download").expect("send");
        assert_eq!(recv(&sock), "STATUS=running 2 tasks; 1 download");
        n.watchdog().expect("send");
        assert_eq!(recv(&sock), "WATCHDOG=1");
        n.reloading().expect("send");
        assert_eq!(recv(&sock), "RELOADING=1");
        n.ready_with_status("idle").expect("send");
        assert_eq!(recv(&sock), "READY=1\nSTATUS=idle");
        n.stopping().expect("send");
        assert_eq!(recv(&sock), "STOPPING=1");
    }

    #[test]
    fn status_is_kept_on_one_line() {
        let (_dir, path, sock) = listener();
        let n = Notifier::with_socket(&path, None);
        n.status("two\nlines\r\nREADY=1").expect("send");
        assert_eq!(recv(&sock), "STATUS=two lines  READY=1");
    }

    #[test]
    fn abstract_socket_is_reached() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("ferrite-sdnotify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("addr");
        let sock = UnixDatagram::bind_addr(&addr).expect("bind abstract");
        sock.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let n = Notifier::with_socket(format!("@{name}"), None);
        n.watchdog().expect("send");
        assert_eq!(recv(&sock), "WATCHDOG=1");
    }

    #[test]
    fn without_a_socket_nothing_is_sent_and_nothing_fails() {
        let n = Notifier::from_vars(None, Some(OsStr::new("60000000")), None, 1);
        assert!(!n.is_enabled());
        assert_eq!(n.watchdog_interval(), None);
        n.ready().expect("no-op");
        n.status("x").expect("no-op");
        n.watchdog().expect("no-op");
        n.stopping().expect("no-op");
        assert!(!Notifier::disabled().is_enabled());
        // Relative paths and unsupported schemes disable it too.
        assert!(!Notifier::with_socket("relative/notify", None).is_enabled());
        assert!(!Notifier::with_socket("", None).is_enabled());
        assert!(!Notifier::with_socket("@", None).is_enabled());
    }

    #[test]
    fn a_vanished_socket_is_an_error_not_a_panic() {
        let (dir, path, sock) = listener();
        drop(sock);
        std::fs::remove_file(&path).expect("remove");
        let n = Notifier::with_socket(&path, None);
        assert!(n.ready().is_err());
        drop(dir);
    }

    #[test]
    fn watchdog_interval_comes_from_watchdog_usec_for_this_pid() {
        let sock = Some(OsStr::new("/run/systemd/notify"));
        let usec = Some(OsStr::new("120000000"));
        let n = Notifier::from_vars(sock, usec, None, 42);
        assert_eq!(n.watchdog_interval(), Some(Duration::from_secs(120)));
        assert_eq!(n.ping_interval(), Some(Duration::from_secs(60)));
        let n = Notifier::from_vars(sock, usec, Some(OsStr::new("42")), 42);
        assert_eq!(n.watchdog_interval(), Some(Duration::from_secs(120)));
        // Meant for another process (e.g. inherited from a parent): not ours.
        let n = Notifier::from_vars(sock, usec, Some(OsStr::new("41")), 42);
        assert_eq!(n.watchdog_interval(), None);
        assert!(n.is_enabled());
        // Zero or garbage: no watchdog.
        assert_eq!(
            Notifier::from_vars(sock, Some(OsStr::new("0")), None, 42).watchdog_interval(),
            None
        );
        assert_eq!(
            Notifier::from_vars(sock, Some(OsStr::new("2m")), None, 42).watchdog_interval(),
            None
        );
        assert_eq!(
            Notifier::with_socket("/x", Some(Duration::ZERO)).watchdog_interval(),
            None
        );
    }
}
