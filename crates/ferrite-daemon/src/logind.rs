//! Asks systemd-logind over D-Bus (the system bus, `DBUS_SYSTEM_BUS_ADDRESS` or the standard
//! socket) whether the user is idle: a task off the main loop lists the sessions
//! (`org.freedesktop.login1.Manager.ListSessions`) and reads each one's properties every
//! [`POLL`], and publishes the result (`ferrite_hostinfo::logind` aggregates it). Without a
//! reachable logind it says so, and tries again every [`RETRY`].

use std::collections::HashMap;
use std::time::Duration;

use ferrite_hostinfo::logind::{aggregate, SessionIdle, UserIdle};
use tokio::sync::watch;
use zbus::zvariant::{OwnedObjectPath, OwnedValue};
use zbus::Connection;

/// How often the sessions are read.
pub const POLL: Duration = Duration::from_secs(2);

/// How long after a failure logind is asked again.
pub const RETRY: Duration = Duration::from_secs(30);

/// The longest one exchange with the bus may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

const DEST: &str = "org.freedesktop.login1";

/// What the watcher knows.
#[derive(Debug, Clone, PartialEq)]
pub enum Logind {
    /// Not asked yet.
    Unknown,
    /// No answer: why.
    Unreachable(String),
    /// The sessions' state.
    Sessions(UserIdle),
}

/// The receiving end of the watcher.
#[derive(Debug, Clone)]
pub struct LogindWatch {
    rx: watch::Receiver<Logind>,
}

impl LogindWatch {
    /// Starts the watcher on the current tokio runtime, if there is one.
    pub fn spawn() -> Option<LogindWatch> {
        let handle = tokio::runtime::Handle::try_current().ok()?;
        let (tx, rx) = watch::channel(Logind::Unknown);
        handle.spawn(run(tx));
        Some(LogindWatch { rx })
    }

    /// The latest answer.
    pub fn latest(&self) -> Logind {
        self.rx.borrow().clone()
    }
}

async fn run(tx: watch::Sender<Logind>) {
    loop {
        let conn = match tokio::time::timeout(CALL_TIMEOUT, Connection::system()).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                tx.send_replace(Logind::Unreachable(format!("no system bus: {e}")));
                if sleep_or_closed(&tx, RETRY).await {
                    return;
                }
                continue;
            }
            Err(_) => {
                tx.send_replace(Logind::Unreachable("the system bus does not answer".into()));
                if sleep_or_closed(&tx, RETRY).await {
                    return;
                }
                continue;
            }
        };
        loop {
            match tokio::time::timeout(CALL_TIMEOUT, sessions(&conn)).await {
                Ok(Ok(s)) => {
                    tx.send_replace(Logind::Sessions(aggregate(&s)));
                    if sleep_or_closed(&tx, POLL).await {
                        return;
                    }
                }
                Ok(Err(e)) => {
                    tx.send_replace(Logind::Unreachable(format!("logind: {e}")));
                    break;
                }
                Err(_) => {
                    tx.send_replace(Logind::Unreachable("logind does not answer".into()));
                    break;
                }
            }
        }
        if sleep_or_closed(&tx, RETRY).await {
            return;
        }
    }
}

/// Waits `d`; true when no one listens any more (the daemon is gone).
async fn sleep_or_closed(tx: &watch::Sender<Logind>, d: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(d) => false,
        () = tx.closed() => true,
    }
}

type SessionRow = (String, u32, String, String, OwnedObjectPath);

async fn sessions(conn: &Connection) -> zbus::Result<Vec<SessionIdle>> {
    let reply = conn
        .call_method(
            Some(DEST),
            "/org/freedesktop/login1",
            Some("org.freedesktop.login1.Manager"),
            "ListSessions",
            &(),
        )
        .await?;
    let rows: Vec<SessionRow> = reply.body().deserialize()?;
    let mut out = Vec::with_capacity(rows.len());
    for (_, _, _, _, path) in rows {
        let reply = match conn
            .call_method(
                Some(DEST),
                path.as_str(),
                Some("org.freedesktop.DBus.Properties"),
                "GetAll",
                &("org.freedesktop.login1.Session",),
            )
            .await
        {
            Ok(r) => r,
            // It closed between the two calls.
            Err(zbus::Error::MethodError(..)) => continue,
            Err(e) => return Err(e),
        };
        let props: HashMap<String, OwnedValue> = reply.body().deserialize()?;
        let text = |k: &str| {
            props
                .get(k)
                .and_then(|v| <&str>::try_from(v).ok())
                .unwrap_or_default()
                .to_owned()
        };
        out.push(SessionIdle {
            class: text("Class"),
            kind: text("Type"),
            state: text("State"),
            idle: props
                .get("IdleHint")
                .and_then(|v| bool::try_from(v).ok())
                .unwrap_or(false),
            idle_since_us: props
                .get("IdleSinceHint")
                .and_then(|v| u64::try_from(v).ok())
                .unwrap_or(0),
        });
    }
    Ok(out)
}
