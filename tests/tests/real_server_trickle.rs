//! Trickle messages with a real BOINC project server (BOINC server 8.3, the kit that
//! `BOINC_SERVER_KIT` names; see `ferrite_e2e::boinc_server`): the project runs BOINC's
//! `trickle_echo` daemon and sends messages to hosts (`<msg_to_host/>`); the job is the kit's
//! `upper_case` (BOINC's `samples/example_app/uc2`) with `-trickle_up -trickle_down`, so the
//! app sends a trickle-up and then listens for trickle-downs. The server is the judge: its
//! `msg_from_host` table must get the app's message, its `msg_to_host` row (the echo) must
//! be sent, the echo must reach the app's slot and the app, and the result must end VALID.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferrite_e2e::boinc_server::{BoincServer, ServerOptions};
use ferrite_e2e::{boinccmd, free_port, Proc};

/// Preferences that let tasks run on a busy, shared machine.
const PREFS: &str = "<global_preferences>\n<suspend_cpu_usage>0</suspend_cpu_usage>\n\
                     <run_if_user_active>1</run_if_user_active>\n</global_preferences>\n";

/// The `trickle_down` channel of `boinc_mmap_file` (BOINC's `lib/app_ipc.h`): a flag byte,
/// then the message.
const TRICKLE_DOWN_CHANNEL: usize = 7 * 1024;

/// How long each step may take on a loaded 2-core machine.
const STEP: Duration = Duration::from_secs(120);

/// Waits until `cond` gives a value, polling every 200 ms; panics with `context` after
/// `limit`.
fn wait_for<T>(
    what: &str,
    limit: Duration,
    mut cond: impl FnMut() -> Option<T>,
    context: impl Fn() -> String,
) -> T {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if let Some(v) = cond() {
            return v;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "timed out after {limit:?} waiting for {what}\n{}",
        context()
    );
}

/// The `trickle_down_*` files in the client's slots.
fn trickle_down_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(slots) = fs::read_dir(dir.join("slots")) else {
        return Vec::new();
    };
    slots
        .flatten()
        .filter_map(|s| fs::read_dir(s.path()).ok())
        .flat_map(|d| d.flatten().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("trickle_down_"))
        })
        .collect()
}

/// The message on a slot's `trickle_down` channel, and whether it is still unread (the
/// flag byte is set).
fn trickle_down_channel(slot: &Path) -> Option<(String, bool)> {
    let mem = fs::read(slot.join("boinc_mmap_file")).ok()?;
    let channel = mem.get(TRICKLE_DOWN_CHANNEL..TRICKLE_DOWN_CHANNEL + 1024)?;
    let text = &channel[1..];
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    Some((
        String::from_utf8_lossy(&text[..end]).into_owned(),
        channel[0] != 0,
    ))
}

fn one_number(server: &BoincServer, sql: &str) -> i64 {
    server
        .query(sql)
        .first()
        .and_then(|r| r.first())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What one client's round trip showed.
struct RoundTrip {
    /// The message the server stored, without its `<result_name>` and `<time>` lines.
    up: String,
    /// The trickle-down file's name without its time, and its contents.
    down: (String, String),
}

/// Runs the round trip of one client (GUI RPC on `port`, password `pw`, data directory
/// `dir`) for job `wu`: its app's trickle-up in `msg_from_host`, the client's files deleted
/// after the ack, `trickle_echo`'s answer sent, written in the task's slot and read by the
/// app from its channel, and `valid` results VALID in the end.
fn round_trip(
    server: &BoincServer,
    wu: &str,
    (dir, port): (&Path, u16),
    valid: u32,
    output: &dyn Fn() -> String,
) -> RoundTrip {
    let result = format!("{wu}_0");
    let mine = format!("xml like '%<result_name>{result}</result_name>%'");
    let context = || {
        format!(
            "--- msg_from_host ---\n{:?}\n--- msg_to_host ---\n{:?}\n--- trickle_echo ---\n{}\n\
             --- scheduler ---\n{}\n--- client ---\n{}",
            server
                .query("select id, create_time, hostid, variety, handled, xml from msg_from_host"),
            server.query("select id, create_time, hostid, variety, handled, xml from msg_to_host"),
            server.log("trickle_echo.log"),
            server.scheduler_log(),
            output()
        )
    };

    // Up: the app's message is in the server's table, with its result and time, and the
    // client deleted its files once the server acknowledged them.
    let row = wait_for(
        "the trickle-up in msg_from_host",
        STEP,
        || {
            server
                .query(&format!(
                    "select create_time, variety, xml from msg_from_host where {mine}"
                ))
                .into_iter()
                .next()
        },
        context,
    );
    let received = now();
    let (created, variety, xml) = (row[0].clone(), row[1].clone(), row[2].replace("\\n", "\n"));
    assert_eq!(variety, "example_app", "{}", context());
    assert!(
        xml.contains("sample trickle message"),
        "{xml}\n{}",
        context()
    );
    let moved: f64 = xml
        .split("<time>")
        .nth(1)
        .and_then(|t| t.split("</time>").next())
        .and_then(|t| t.trim().parse().ok())
        .expect("the message's time");
    eprintln!(
        "trickle-up: moved to the project directory at {moved}, in msg_from_host at {created} \
         ({:.0} s later; seen by the test {:.1} s after the move)",
        created.parse::<f64>().unwrap_or(0.0) - moved,
        received - moved
    );
    let project_dir = dir
        .join("projects")
        .join(ferrite_proto::account::escape_project_url(server.url()));
    wait_for(
        "the acknowledged trickle-up files to be deleted",
        STEP,
        || {
            let left = fs::read_dir(&project_dir)
                .ok()?
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .any(|n| n.starts_with("trickle_up"));
            (!left).then_some(())
        },
        context,
    );

    // Down: trickle_echo answers; the next request brings the echo (pressing "Update" as a
    // volunteer would, since nothing else is due), written in the task's slot and announced
    // to the app, which reads the channel.
    let t0 = Instant::now();
    let mut last_update = Instant::now();
    let file = wait_for(
        "the echoed trickle-down in the task's slot",
        STEP,
        || {
            let files = trickle_down_files(dir);
            if files.is_empty() && last_update.elapsed() > Duration::from_secs(5) {
                let pending = one_number(
                    server,
                    &format!("select count(*) from msg_to_host where handled = 0 and {mine}"),
                );
                if pending > 0 {
                    let _ = boinccmd(port, Some("pw"), &["--project", server.url(), "update"]);
                    last_update = Instant::now();
                }
            }
            files.into_iter().next()
        },
        context,
    );
    eprintln!(
        "trickle-down: in the slot {:.1} s after the trickle-up row",
        t0.elapsed().as_secs_f64()
    );
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert_eq!(name, format!("trickle_down_{moved:.0}"), "{}", context());
    let body = fs::read_to_string(&file).unwrap_or_default();
    assert!(body.contains("sample trickle message"), "{body:?}");
    assert!(!body.contains("<result_name>"), "{body:?}");
    assert_eq!(
        one_number(
            server,
            &format!("select count(*) from msg_to_host where handled = 1 and {mine}")
        ),
        1,
        "{}",
        context()
    );
    let slot = file.parent().expect("slot").to_path_buf();
    wait_for(
        "the app to read <have_trickle_down/> from its channel",
        STEP,
        || {
            let (text, unread) = trickle_down_channel(&slot)?;
            (text == "<have_trickle_down/>\n" && !unread).then_some(())
        },
        || format!("channel: {:?}\n{}", trickle_down_channel(&slot), context()),
    );

    // And the job still ends well.
    server.wait_valid(
        valid,
        (Duration::from_secs(240), Duration::from_secs(30)),
        |s| {
            let _ = boinccmd(port, Some("pw"), &["--project", s.url(), "update"]);
        },
        context,
    );
    let up = xml
        .lines()
        .filter(|l| !l.contains("<result_name>") && !l.contains("<time>"))
        .collect::<Vec<_>>()
        .join("\n");
    RoundTrip {
        up,
        down: (name.trim_end_matches(char::is_numeric).to_owned(), body),
    }
}

/// A project with `trickle_echo` and messages to hosts on.
fn trickle_server(test: &str) -> Option<BoincServer> {
    let opts = ServerOptions {
        jobs: 0,
        ..ServerOptions::default()
    };
    let server = BoincServer::up(test, &opts)?;
    server.set_config("msg_to_host", "1");
    server.add_daemon("trickle_echo --variety example_app");
    Some(server)
}

/// A fresh data directory for a client: GUI RPC password `pw`, preferences that let tasks
/// run on a busy machine.
fn client_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    fs::write(dir.path().join("global_prefs_override.xml"), PREFS).expect("prefs");
    dir
}

/// The app sends its trickle-up once it has read its input, waits 10 s, looks for a
/// trickle-down, then computes for 60 s with the trickle-down channel open.
const COMMAND_LINE: &str = "-cpu_time 60 -trickle_up -trickle_down";

fn ferrited_attached(server: &BoincServer, dir: &Path, port: u16) -> Proc {
    let d = dir.to_str().expect("utf-8");
    let port = port.to_string();
    let mut client = Proc::ferrited(&[
        "--dir",
        d,
        "--gui_rpc_port",
        &port,
        "--attach_project",
        server.url(),
        server.account_key(),
    ]);
    client.wait_for("entering main loop", Duration::from_secs(60));
    client
}

#[test]
fn trickle_up_reaches_the_server_and_its_echo_reaches_the_app() {
    if !ferrite_e2e::peer_or_skip(
        "trickle_up_reaches_the_server_and_its_echo_reaches_the_app",
        &["boinccmd"],
    ) {
        return;
    }
    let test = "trickle_up_reaches_the_server_and_its_echo_reaches_the_app";
    let Some(server) = trickle_server(test) else {
        return;
    };
    let wu = server.add_job_with_command_line("trickle_job", COMMAND_LINE);
    let dir = client_dir();
    let port = free_port();
    let mut client = ferrited_attached(&server, dir.path(), port);
    round_trip(&server, &wu, (dir.path(), port), 1, &|| client.output());
    client.signal(libc::SIGTERM);
    let status = client.wait(Duration::from_secs(60));
    assert!(status.success(), "ferrited exited with {status}");
}

/// The official client and Ferrite, one after the other on the same project, send the same
/// message up and put the same file in the slot.
#[test]
fn trickles_travel_as_with_the_official_client() {
    if !ferrite_e2e::peer_or_skip(
        "trickles_travel_as_with_the_official_client",
        &["boinc", "boinccmd"],
    ) {
        return;
    }
    let test = "trickles_travel_as_with_the_official_client";
    let Some(server) = trickle_server(test) else {
        return;
    };
    let wu = server.add_job_with_command_line("official_job", COMMAND_LINE);
    let off_dir = client_dir();
    let official = ferrite_e2e::OfficialClient::start(off_dir.path());
    let _ = official.boinccmd(&["--set_run_mode", "auto"]);
    let _ = official.boinccmd(&["--set_network_mode", "auto"]);
    let (ok, out) = official.boinccmd(&["--project_attach", server.url(), server.account_key()]);
    assert!(ok, "the official client did not attach: {out}");
    let theirs = round_trip(&server, &wu, (off_dir.path(), official.port()), 1, &|| {
        official.output()
    });
    let _ = official.quit();

    let wu = server.add_job_with_command_line("ferrite_job", COMMAND_LINE);
    let dir = client_dir();
    let port = free_port();
    let client = ferrited_attached(&server, dir.path(), port);
    let ours = round_trip(&server, &wu, (dir.path(), port), 2, &|| client.output());
    assert_eq!(ours.up, theirs.up, "the message the server stored");
    assert_eq!(ours.down, theirs.down, "the trickle-down file");
}

/// Trickle-up files are files: those left in the project directory when the client stopped
/// (one never sent, one sent without an acknowledgement) go to the server after a restart,
/// without anything else to send, and are deleted once the server has them.
#[test]
fn trickle_ups_left_on_disk_are_sent_after_a_restart() {
    let test = "trickle_ups_left_on_disk_are_sent_after_a_restart";
    let opts = ServerOptions {
        jobs: 0,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up(test, &opts) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    fs::write(dir.path().join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    fs::write(dir.path().join("global_prefs_override.xml"), PREFS).expect("prefs");
    let d = dir.path().to_str().expect("utf-8").to_owned();
    let port_s = port.to_string();
    let mut client = Proc::ferrited(&[
        "--dir",
        &d,
        "--gui_rpc_port",
        &port_s,
        "--attach_project",
        server.url(),
        server.account_key(),
    ]);
    client.wait_for("entering main loop", Duration::from_secs(60));
    wait_for(
        "the attach request",
        STEP,
        || (one_number(&server, "select count(*) from host") > 0).then_some(()),
        || {
            format!(
                "{}\n--- ferrited ---\n{}",
                server.scheduler_log(),
                client.output()
            )
        },
    );
    // The client saves what the reply brought at once; stop it.
    client.signal(libc::SIGTERM);
    let status = client.wait(Duration::from_secs(60));
    assert!(status.success(), "ferrited exited with {status}");
    let first_run = client.output();

    let project_dir = dir
        .path()
        .join("projects")
        .join(ferrite_proto::account::escape_project_url(server.url()));
    let t = now() as i64;
    fs::write(
        project_dir.join(format!("trickle_up_left_0_{t}.xml")),
        "<variety>restart</variety>\nnever sent\n",
    )
    .expect("write a trickle-up file");
    fs::write(
        project_dir.join(format!("trickle_up_sent_0_{}.xml.sent", t - 5)),
        "<variety>restart</variety>\nsent, never acknowledged\n",
    )
    .expect("write a sent trickle-up file");

    let mut client = Proc::ferrited(&["--dir", &d, "--gui_rpc_port", &port_s]);
    client.wait_for("entering main loop", Duration::from_secs(60));
    let started = Instant::now();
    let context = || {
        format!(
            "--- msg_from_host ---\n{:?}\n--- scheduler ---\n{}\n--- first run ---\n{first_run}\n\
             --- ferrited ---\n{}",
            server.query("select id, create_time, variety, xml from msg_from_host"),
            server.scheduler_log(),
            client.output()
        )
    };
    let rows = wait_for(
        "both trickle-ups in msg_from_host",
        STEP,
        || {
            let rows = server.query("select xml from msg_from_host where variety = 'restart'");
            (rows.len() >= 2).then_some(rows)
        },
        context,
    );
    eprintln!(
        "after the restart: both trickle-ups in msg_from_host {:.1} s after the main loop began",
        started.elapsed().as_secs_f64()
    );
    let texts: Vec<String> = rows.iter().map(|r| r[0].replace("\\n", "\n")).collect();
    for (result, time, text) in [
        ("left_0", t, "never sent"),
        ("sent_0", t - 5, "sent, never acknowledged"),
    ] {
        assert!(
            texts.iter().any(
                |x| x.contains(&format!("<result_name>{result}</result_name>"))
                    && x.contains(&format!("<time>{time}</time>"))
                    && x.contains(text)
            ),
            "{texts:?}\n{}",
            context()
        );
    }
    assert_eq!(rows.len(), 2, "each message once: {texts:?}");
    wait_for(
        "the acknowledged files to be deleted",
        STEP,
        || {
            let left = fs::read_dir(&project_dir)
                .ok()?
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .any(|n| n.starts_with("trickle_up"));
            (!left).then_some(())
        },
        context,
    );
    client.signal(libc::SIGTERM);
    let status = client.wait(Duration::from_secs(60));
    assert!(status.success(), "ferrited exited with {status}");
}
