//! Idle detection through systemd-logind: a private `dbus-daemon` stands in for the system
//! bus, this test serves a fake `org.freedesktop.login1` on it (a desktop session and a text
//! session whose `IdleHint`/`IdleSinceHint` it changes, with `PropertiesChanged`, and a
//! session that opens and closes, with `SessionNew` and `SessionRemoved`), and `ferrited`,
//! pointed at that bus with `DBUS_SYSTEM_BUS_ADDRESS` and with `run_if_user_active` 0,
//! suspends computing while a session is in use and resumes once every session is idle,
//! reading logind on its signals only; when logind goes away it says so and falls back to the
//! other sources.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferrite_e2e::inspect::wait_until;
use ferrite_e2e::{first_element, free_port, gui_rpc, Proc};
use zbus::names::InterfaceName;
use zbus::object_server::SignalEmitter;
use zbus::zvariant::{ObjectPath, OwnedObjectPath, Value};

/// A private bus: `dbus-daemon` on a socket in a temporary directory, ended on drop.
struct Bus {
    child: Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl Bus {
    fn start() -> Bus {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--print-address"])
            .arg(format!(
                "--address=unix:path={}",
                dir.path().join("bus").display()
            ))
            .stdout(Stdio::piped())
            .spawn()
            .expect("start dbus-daemon");
        let mut line = String::new();
        // It prints its address once listening, or exits (end of file) when it cannot.
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the bus address");
        assert!(line.starts_with("unix:"), "dbus-daemon printed {line:?}");
        Bus {
            child,
            address: line.trim().to_owned(),
            _dir: dir,
        }
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

type Row = (String, u32, String, String, OwnedObjectPath);

struct Manager {
    sessions: Arc<Mutex<Vec<Row>>>,
    /// How many times the sessions were listed.
    lists: Arc<AtomicU64>,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Manager {
    fn list_sessions(&self) -> Vec<Row> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.sessions.lock().expect("sessions").clone()
    }

    #[zbus(signal)]
    async fn session_new(
        emitter: &SignalEmitter<'_>,
        id: &str,
        path: ObjectPath<'_>,
    ) -> zbus::Result<()>;

    #[zbus(signal)]
    async fn session_removed(
        emitter: &SignalEmitter<'_>,
        id: &str,
        path: ObjectPath<'_>,
    ) -> zbus::Result<()>;
}

/// One session's idle state, shared with the test.
#[derive(Clone)]
struct Idle {
    idle: Arc<AtomicBool>,
    since_us: Arc<AtomicU64>,
}

impl Idle {
    fn new() -> Idle {
        Idle {
            idle: Arc::new(AtomicBool::new(false)),
            since_us: Arc::new(AtomicU64::new(0)),
        }
    }

    fn set_active(&self) {
        self.idle.store(false, Ordering::SeqCst);
        self.since_us.store(now_us(), Ordering::SeqCst);
    }

    /// Idle since `ago` seconds.
    fn set_idle(&self, ago: u64) {
        self.since_us
            .store(now_us() - ago * 1_000_000, Ordering::SeqCst);
        self.idle.store(true, Ordering::SeqCst);
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

struct Session {
    kind: &'static str,
    state: Idle,
}

#[zbus::interface(name = "org.freedesktop.login1.Session")]
impl Session {
    #[zbus(property)]
    fn idle_hint(&self) -> bool {
        self.state.idle.load(Ordering::SeqCst)
    }

    #[zbus(property)]
    fn idle_since_hint(&self) -> u64 {
        self.state.since_us.load(Ordering::SeqCst)
    }

    #[zbus(property, name = "Type")]
    fn kind(&self) -> String {
        self.kind.to_owned()
    }

    #[zbus(property)]
    fn class(&self) -> String {
        "user".to_owned()
    }

    #[zbus(property)]
    fn state(&self) -> String {
        "active".to_owned()
    }
}

fn session_path(id: &str) -> OwnedObjectPath {
    OwnedObjectPath::try_from(format!("/org/freedesktop/login1/session/_3{id}"))
        .expect("object path")
}

fn row(id: &str, seat: &str) -> Row {
    (
        id.to_owned(),
        1000u32,
        "volunteer".to_owned(),
        seat.to_owned(),
        session_path(id),
    )
}

/// The fake logind: its connection, its sessions and how often they were listed.
struct Logind {
    conn: zbus::Connection,
    sessions: Arc<Mutex<Vec<Row>>>,
    lists: Arc<AtomicU64>,
}

impl Logind {
    /// Serves the fake logind on `address`: sessions "2" (Wayland) and "c3" (a tty login).
    async fn serve(address: &str, desk: Idle, tty: Idle) -> zbus::Result<Logind> {
        let sessions = Arc::new(Mutex::new(vec![row("2", "seat0"), row("c3", "")]));
        let lists = Arc::new(AtomicU64::new(0));
        let conn = zbus::connection::Builder::address(address)?
            .name("org.freedesktop.login1")?
            .serve_at(
                "/org/freedesktop/login1",
                Manager {
                    sessions: sessions.clone(),
                    lists: lists.clone(),
                },
            )?
            .serve_at(
                session_path("2").as_str(),
                Session {
                    kind: "wayland",
                    state: desk,
                },
            )?
            .serve_at(
                session_path("c3").as_str(),
                Session {
                    kind: "tty",
                    state: tty,
                },
            )?
            .build()
            .await?;
        Ok(Logind {
            conn,
            sessions,
            lists,
        })
    }

    /// Emits one `PropertiesChanged` with session `id`'s idle hints, as logind does when they
    /// move.
    async fn idle_changed(&self, id: &str) -> zbus::Result<()> {
        let iface = self
            .conn
            .object_server()
            .interface::<_, Session>(session_path(id).as_str())
            .await?;
        let (idle, since) = {
            let s = iface.get().await;
            (s.idle_hint(), s.idle_since_hint())
        };
        let changed = HashMap::from([
            ("IdleHint", Value::from(idle)),
            ("IdleSinceHint", Value::from(since)),
        ]);
        zbus::fdo::Properties::properties_changed(
            iface.signal_emitter(),
            InterfaceName::from_static_str("org.freedesktop.login1.Session")?,
            changed,
            Cow::Borrowed(&[]),
        )
        .await
    }

    /// A new session `id` of `kind` opens, with `SessionNew`.
    async fn open(&self, id: &str, kind: &'static str, state: Idle) -> zbus::Result<()> {
        let path = session_path(id);
        self.conn
            .object_server()
            .at(path.as_str(), Session { kind, state })
            .await?;
        self.sessions.lock().expect("sessions").push(row(id, ""));
        let emitter = SignalEmitter::new(&self.conn, "/org/freedesktop/login1")?;
        Manager::session_new(&emitter, id, path.as_ref()).await
    }

    /// Session `id` ends, with `SessionRemoved`.
    async fn close(&self, id: &str) -> zbus::Result<()> {
        let path = session_path(id);
        self.sessions
            .lock()
            .expect("sessions")
            .retain(|r| r.0 != id);
        self.conn
            .object_server()
            .remove::<Session, _>(path.as_str())
            .await?;
        let emitter = SignalEmitter::new(&self.conn, "/org/freedesktop/login1")?;
        Manager::session_removed(&emitter, id, path.as_ref()).await
    }
}

/// `get_cc_status`'s `task_suspend_reason`.
fn suspend_reason(port: u16) -> String {
    let reply = gui_rpc(port, None, "<get_cc_status/>\n");
    first_element(&reply, "task_suspend_reason")
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn logind_sessions_going_idle_and_active_suspend_and_resume_computing() {
    if !ferrite_e2e::peer_or_skip(
        "logind_sessions_going_idle_and_active_suspend_and_resume_computing",
        &["dbus-daemon"],
    ) {
        return;
    }
    let bus = Bus::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let (desk, tty) = (Idle::new(), Idle::new());
    desk.set_idle(3600);
    tty.set_idle(4000);
    let logind = rt
        .block_on(Logind::serve(&bus.address, desk.clone(), tty.clone()))
        .expect("serve the fake logind");
    let changed = |id: &str| {
        rt.block_on(logind.idle_changed(id))
            .expect("PropertiesChanged");
    };

    let data = tempfile::tempdir().expect("data");
    // No input device to fall back on: without logind the user counts as absent.
    let dev = tempfile::tempdir().expect("dev");
    std::fs::write(
        data.path().join("global_prefs_override.xml"),
        "<global_preferences>\n<run_if_user_active>0</run_if_user_active>\n\
         <idle_time_to_run>3</idle_time_to_run>\n<suspend_cpu_usage>0</suspend_cpu_usage>\n\
         </global_preferences>\n",
    )
    .expect("override");
    let port = free_port();
    let mut cmd = Proc::ferrited_command(data.path(), port, None);
    cmd.arg("--no_gpus")
        .env("DBUS_SYSTEM_BUS_ADDRESS", &bus.address)
        .env("FERRITE_DEV_ROOT", dev.path());
    let mut d = Proc::spawn(cmd);
    d.wait_for("GUI RPC listening on TCP", Duration::from_secs(30));
    d.wait_for(
        "User activity from systemd-logind's sessions",
        Duration::from_secs(20),
    );
    // Both sessions idle for an hour: computing goes on.
    let reason = |want: &str| {
        let want = format!("<task_suspend_reason>{want}</task_suspend_reason>");
        wait_until(
            &format!("get_cc_status says {want}"),
            Duration::from_secs(20),
            || suspend_reason(port) == want,
        );
    };
    reason("0");
    let t0 = Instant::now();
    // Nothing changes: logind is not asked again (it is read on its signals, not polled).
    let lists = logind.lists.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(logind.lists.load(Ordering::SeqCst), lists, "logind polled");

    // Someone uses the desktop: computing is suspended, "computer is in use" (2).
    desk.set_active();
    changed("2");
    reason("2");
    d.wait_for(
        "Suspending computation - computer is in use",
        Duration::from_secs(10),
    );
    // The desktop idle again, the text session still idle: computing resumes.
    desk.set_idle(600);
    changed("2");
    reason("0");
    // A remote login typing (the tty session): in use again.
    tty.set_active();
    changed("c3");
    reason("2");
    tty.set_idle(900);
    changed("c3");
    reason("0");
    // Someone logs in at a new seat (SessionNew) and uses it; then logs out (SessionRemoved).
    let seat = Idle::new();
    seat.set_active();
    rt.block_on(logind.open("7", "x11", seat))
        .expect("SessionNew");
    reason("2");
    rt.block_on(logind.close("7")).expect("SessionRemoved");
    reason("0");
    // One read per signal (six of them) at most, and the slow safety re-read.
    let reads = logind.lists.load(Ordering::SeqCst) - lists;
    let safety = t0.elapsed().as_secs() / 60 + 1;
    assert!(
        (1..=6 + safety).contains(&reads),
        "{reads} reads of the sessions for 6 signals in {:?}",
        t0.elapsed()
    );

    // logind gone from the bus: the daemon says so and falls back (here to nothing: the user
    // counts as absent, so computing goes on).
    rt.block_on(logind.conn.release_name("org.freedesktop.login1"))
        .expect("release the name");
    d.wait_for("logind not in use", Duration::from_secs(20));
    assert!(
        d.output()
            .contains("User activity from nothing (no logind, idle_detect or readable device)"),
        "{}",
        d.output()
    );
    reason("0");
    d.signal(libc::SIGTERM);
    assert!(d.wait(Duration::from_secs(40)).success(), "{}", d.output());
    drop(logind);
    drop(rt);
    drop(bus);
}
