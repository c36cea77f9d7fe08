//! The user's idle state as systemd-logind reports it, from its sessions' `IdleHint` and
//! `IdleSinceHint` properties (`org.freedesktop.login1.Session`). Desktops (GNOME, KDE, on
//! Wayland and X11) set a graphical session's hint when their own idle delay has passed;
//! logind sets a text session's from its terminal's last access.
//!
//! Pure rules: the daemon asks logind over D-Bus and hands the sessions' properties here.

/// What logind says of one session.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionIdle {
    /// `Class`: `user`, `greeter`, `lock-screen`, `background`, `manager`, ...
    pub class: String,
    /// `Type`: `x11`, `wayland`, `mir`, `tty`, `unspecified`, ...
    pub kind: String,
    /// `State`: `online`, `active` or `closing`.
    pub state: String,
    /// `IdleHint`.
    pub idle: bool,
    /// `IdleSinceHint`: when the session went idle, microseconds since the Unix epoch
    /// (0: not known).
    pub idle_since_us: u64,
}

/// The user's state over all sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserIdle {
    /// Someone uses a session now.
    Active,
    /// Every session is idle, the last of them since this time (microseconds since the Unix
    /// epoch).
    IdleSince(u64),
    /// No one is logged in (with a graphical or text session).
    NoSessions,
}

/// Whether a session is someone at the machine or logged in from afar: a user's graphical or
/// text session that is not closing (greeters, lock screens, background and service sessions
/// such as cron's do not count).
pub fn counts(s: &SessionIdle) -> bool {
    s.class == "user"
        && matches!(s.kind.as_str(), "x11" | "wayland" | "mir" | "tty")
        && s.state != "closing"
}

/// The user is idle when every counted session is idle, since the latest of their
/// `IdleSinceHint`s; active when any one is not.
pub fn aggregate(sessions: &[SessionIdle]) -> UserIdle {
    let mut since = None;
    for s in sessions.iter().filter(|s| counts(s)) {
        if !s.idle {
            return UserIdle::Active;
        }
        since = Some(since.map_or(s.idle_since_us, |x: u64| x.max(s.idle_since_us)));
    }
    since.map_or(UserIdle::NoSessions, UserIdle::IdleSince)
}

impl UserIdle {
    /// Seconds since the user's last activity at `now_us` (microseconds since the Unix epoch):
    /// 0 while active, `None` when no one is logged in (absent).
    pub fn idle_secs(&self, now_us: u64) -> Option<f64> {
        match self {
            UserIdle::Active => Some(0.0),
            UserIdle::IdleSince(since) => Some(now_us.saturating_sub(*since) as f64 / 1e6),
            UserIdle::NoSessions => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(kind: &str, idle: bool, since_s: u64) -> SessionIdle {
        SessionIdle {
            class: "user".into(),
            kind: kind.into(),
            state: "active".into(),
            idle,
            idle_since_us: since_s * 1_000_000,
        }
    }

    #[test]
    fn the_user_is_idle_only_when_every_session_is_since_the_latest() {
        let desk = session("wayland", true, 1000);
        let ssh = session("tty", true, 1500);
        assert_eq!(
            aggregate(&[desk.clone(), ssh.clone()]),
            UserIdle::IdleSince(1_500_000_000)
        );
        assert_eq!(
            UserIdle::IdleSince(1_500_000_000).idle_secs(1_600_000_000),
            Some(100.0)
        );
        // One session in use makes the user active.
        let x11 = session("x11", false, 0);
        assert_eq!(aggregate(&[desk, x11, ssh]), UserIdle::Active);
        assert_eq!(UserIdle::Active.idle_secs(5), Some(0.0));
    }

    #[test]
    fn greeters_service_and_closing_sessions_do_not_count() {
        let mut greeter = session("wayland", false, 0);
        greeter.class = "greeter".into();
        let mut lock = session("x11", false, 0);
        lock.class = "lock-screen".into();
        let cron = session("unspecified", false, 0);
        let mut gone = session("tty", false, 0);
        gone.state = "closing".into();
        let others = [greeter, lock, cron, gone];
        assert_eq!(aggregate(&others), UserIdle::NoSessions);
        assert_eq!(UserIdle::NoSessions.idle_secs(5), None);
        let mut all = others.to_vec();
        all.push(session("wayland", true, 7));
        assert_eq!(aggregate(&all), UserIdle::IdleSince(7_000_000));
        assert_eq!(aggregate(&[]), UserIdle::NoSessions);
        // A clock behind the hint reads as just gone idle.
        assert_eq!(UserIdle::IdleSince(7_000_000).idle_secs(1), Some(0.0));
    }
}
