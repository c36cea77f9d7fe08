//! A third-party GUI RPC client against `ferrited`: Debian's `boinctui` (a curses manager for
//! BOINC clients) runs in a detached `tmux` session of fixed size, and its screen, read with
//! `tmux capture-pane`, must show the fixture's project and tasks.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use ferrite_e2e::{ferrited_with_gui_rpc, fixture_data_dir, free_port, peer_or_skip};

/// A tmux server on its own socket, killed (with everything in it) when dropped.
struct Tmux {
    /// The socket name (`tmux -L`), unique to this test run.
    socket: String,
}

impl Tmux {
    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(["-f", "/dev/null", "-L", &self.socket])
            .env("TERM", "xterm-256color");
        cmd
    }

    /// Starts `program` in a detached session of `cols` × `rows` with `HOME` set to `home`.
    fn start(socket: String, home: &Path, program: &str, cols: u16, rows: u16) -> Tmux {
        let tmux = Tmux { socket };
        let home = home.to_str().expect("utf-8 home");
        let status = tmux
            .command()
            .env("HOME", home)
            .args(["new-session", "-d", "-s", "ui"])
            .args(["-x", &cols.to_string(), "-y", &rows.to_string()])
            .args(["env", &format!("HOME={home}"), "LANG=C.UTF-8", program])
            .status()
            .expect("run tmux");
        assert!(status.success(), "tmux new-session failed");
        tmux
    }

    /// The visible text of the session's pane.
    fn screen(&self) -> String {
        let out = self
            .command()
            .args(["capture-pane", "-p", "-t", "ui"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").status();
    }
}

#[test]
fn boinctui_shows_the_projects_tasks_from_ferrited() {
    if !peer_or_skip(
        "boinctui_shows_the_projects_tasks_from_ferrited",
        &["boinctui", "tmux"],
    ) {
        return;
    }
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let mut daemon = ferrited_with_gui_rpc(dir.path(), port);

    // boinctui reads its host list from $HOME/.boinctui.cfg.
    let home = tempfile::tempdir().expect("tempdir");
    fs::write(
        home.path().join(".boinctui.cfg"),
        format!(
            "<boinctui_cfg>\n<server>\n<host>127.0.0.1</host>\n<port>{port}</port>\n\
             <pwd>testpw</pwd>\n<hostid>ferrited</hostid>\n</server>\n</boinctui_cfg>\n"
        ),
    )
    .expect("write .boinctui.cfg");
    let tmux = Tmux::start(
        format!("ferrite-e2e-{}-{port}", std::process::id()),
        home.path(),
        "boinctui",
        200,
        50,
    );

    let wanted = [
        "wu_short_0",
        "wu_long_0",
        "wu_abort_0",
        "Fixture Project",
        &format!("127.0.0.1:{port}"),
    ];
    let start = Instant::now();
    let mut screen = String::new();
    while start.elapsed() < Duration::from_secs(30) {
        screen = tmux.screen();
        if wanted.iter().all(|w| screen.contains(w)) {
            break;
        }
        thread::sleep(Duration::from_millis(200));
    }
    for w in wanted {
        assert!(
            screen.contains(w),
            "boinctui does not show {w:?}:\n{screen}"
        );
    }
    assert!(!screen.contains("offline"), "{screen}");
    // Each task row names the project and the task.
    for task in ["wu_short_0", "wu_long_0", "wu_abort_0"] {
        let row = screen.lines().find(|l| l.contains(task)).expect("task row");
        assert!(row.contains("Fixture Project"), "{row}");
    }

    drop(tmux);
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait(Duration::from_secs(20));
    assert!(status.success(), "ferrited: {status}\n{}", daemon.output());
}
