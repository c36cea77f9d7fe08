//! Asks systemd-logind over D-Bus (the system bus, `DBUS_SYSTEM_BUS_ADDRESS` or the standard
//! socket) whether the user is idle: a task off the main loop lists the sessions
//! (`org.freedesktop.login1.Manager.ListSessions`), reads each one's properties and publishes
//! the result (`ferrite_hostinfo::logind` aggregates it); it reads them again when logind
//! says something changed (a session's `PropertiesChanged`, `SessionNew`, `SessionRemoved`, or
//! logind's name changing owner on the bus), and every [`REREAD`] in case a signal was missed.
//! Without a reachable logind it says so, and tries again every [`RETRY`].

use std::collections::HashMap;
use std::time::Duration;

use ferrite_hostinfo::logind::{aggregate, SessionIdle, UserIdle};
use futures_util::StreamExt as _;
use tokio::sync::watch;
use zbus::zvariant::{OwnedObjectPath, OwnedValue};
use zbus::{Connection, MatchRule, MessageStream};

/// How often the sessions are read again without a signal saying they changed.
pub const REREAD: Duration = Duration::from_secs(60);

/// How long after a failure logind is asked again.
pub const RETRY: Duration = Duration::from_secs(30);

/// The longest one exchange with the bus may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// How many signals wait unread at most (a burst of more is read once anyway).
const SIGNAL_QUEUE: usize = 64;

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
        let failure = match tokio::time::timeout(CALL_TIMEOUT, Connection::system()).await {
            Ok(Ok(conn)) => match follow(&conn, &tx).await {
                Some(why) => why,
                None => return,
            },
            Ok(Err(e)) => format!("no system bus: {e}"),
            Err(_) => "the system bus does not answer".into(),
        };
        tx.send_replace(Logind::Unreachable(failure));
        if sleep_or_closed(&tx, RETRY).await {
            return;
        }
    }
}

/// The signals that say the sessions may have changed.
struct Changes {
    properties: MessageStream,
    manager: MessageStream,
    owner: MessageStream,
}

impl Changes {
    async fn subscribe(conn: &Connection) -> zbus::Result<Changes> {
        use zbus::message::Type;
        // Only logind serves objects under /org/freedesktop/login1 on the system bus.
        let properties = MatchRule::builder()
            .msg_type(Type::Signal)
            .interface("org.freedesktop.DBus.Properties")?
            .member("PropertiesChanged")?
            .path_namespace("/org/freedesktop/login1/session")?
            .build();
        let manager = MatchRule::builder()
            .msg_type(Type::Signal)
            .interface("org.freedesktop.login1.Manager")?
            .path("/org/freedesktop/login1")?
            .build();
        let owner = MatchRule::builder()
            .msg_type(Type::Signal)
            .sender("org.freedesktop.DBus")?
            .interface("org.freedesktop.DBus")?
            .member("NameOwnerChanged")?
            .arg(0, DEST)?
            .build();
        let queue = Some(SIGNAL_QUEUE);
        Ok(Changes {
            properties: MessageStream::for_match_rule(properties, conn, queue).await?,
            manager: MessageStream::for_match_rule(manager, conn, queue).await?,
            owner: MessageStream::for_match_rule(owner, conn, queue).await?,
        })
    }

    /// The next signal that matters; `None` when the connection is gone.
    async fn next(&mut self) -> Option<()> {
        loop {
            let msg = tokio::select! {
                m = self.properties.next() => m?,
                m = self.manager.next() => m?,
                m = self.owner.next() => m?,
            };
            let Ok(msg) = msg else { continue };
            let header = msg.header();
            let member = header.member().map(|m| m.as_str()).unwrap_or_default();
            if matches!(
                member,
                "PropertiesChanged" | "SessionNew" | "SessionRemoved" | "NameOwnerChanged"
            ) {
                return Some(());
            }
        }
    }
}

/// Reads the sessions now and again on every change until something fails (why) or the
/// daemon is gone (`None`).
async fn follow(conn: &Connection, tx: &watch::Sender<Logind>) -> Option<String> {
    let mut changes = match tokio::time::timeout(CALL_TIMEOUT, Changes::subscribe(conn)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Some(format!("logind's signals: {e}")),
        Err(_) => return Some("the system bus does not answer".into()),
    };
    loop {
        match tokio::time::timeout(CALL_TIMEOUT, sessions(conn)).await {
            Ok(Ok(s)) => {
                tx.send_replace(Logind::Sessions(aggregate(&s)));
            }
            Ok(Err(e)) => return Some(format!("logind: {e}")),
            Err(_) => return Some("logind does not answer".into()),
        }
        tokio::select! {
            () = tokio::time::sleep(REREAD) => {}
            () = tx.closed() => return None,
            c = changes.next() => {
                if c.is_none() {
                    return Some("the system bus closed the connection".into());
                }
            }
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
