//! The loopback BOINC project (`ferrite-testproject`) as a child process, and what the tests
//! that run `ferrited` against it share: its HTTP, `/status` and faults, a data directory for
//! `ferrited` that runs whatever the machine's load, `ferrited` attached to it, and small
//! file-tree and tmpfs helpers for the fault tests.

use std::fs;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{bin, try_gui_rpc, Proc};

/// The account key the test project accepts.
pub const KEY: &str = "0123456789abcdef0123456789abcdef";

/// One HTTP/1.0 exchange with the test server (loopback only); the response body.
pub fn http(url: &str, method: &str, path: &str, body: &str) -> String {
    let hostport = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut s = TcpStream::connect(&hostport).expect("connect to the test server");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        s,
        "{method} /{path} HTTP/1.0\r\nHost: {hostport}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

/// The server's `/status` counters.
pub fn status(url: &str) -> serde_json::Value {
    serde_json::from_str(&http(url, "GET", "status", "")).expect("status is JSON")
}

/// Arms a fault (or the storm) on the test project (`POST /fault`).
pub fn arm(url: &str, spec: &str) {
    let r = http(url, "POST", "fault", spec);
    assert!(
        r.starts_with("armed") || r.starts_with("storm"),
        "{spec}: {r}"
    );
}

/// Writes a plain (non-API) app script `dir/<name>.sh`: `prelude`, then `"<word> <input>"`
/// to its output `out`, then it says it finished.
pub fn app_script(dir: &Path, name: &str, word: &str, prelude: &str) -> PathBuf {
    let path = dir.join(format!("{name}.sh"));
    fs::write(
        &path,
        format!(
            "#!/bin/sh\n{prelude}echo \"{word} $(cat in)\" > out\necho {name} done >&2\n\
             echo 0 > boinc_finish_called\nexit 0\n"
        ),
    )
    .expect("app");
    set_executable(&path);
    path
}

/// A plain (non-API) shell app of the test project: runs `prelude`, then writes
/// `"<word> <input>"` to its output and says it finished.
#[derive(Debug, Clone, Copy)]
pub struct ShellApp<'a> {
    /// App name.
    pub name: &'a str,
    /// First word of its output.
    pub word: &'a str,
    /// Shell lines run first (e.g. `sleep 0.3\n`).
    pub prelude: &'a str,
}

/// The test server (its input file holds `world`); killed when dropped.
#[derive(Debug)]
pub struct Server {
    /// The server process (its output is the server log).
    pub proc: Proc,
    /// Master URL, `http://127.0.0.1:PORT/`.
    pub url: String,
    /// Its data directory (`results/<result>/<file>` holds the uploads).
    pub data: PathBuf,
}

impl Server {
    /// The server with apps `alpha` (`hello world`) and `beta` (`goodbye world`), started
    /// in `dir/server` with `extra` options.
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        Server::start_with(dir, extra, "")
    }

    /// Like `start`, with `prelude` shell lines run first by each app.
    pub fn start_with(dir: &Path, extra: &[&str], prelude: &str) -> Server {
        Server::start_apps(
            dir,
            &[
                ShellApp {
                    name: "alpha",
                    word: "hello",
                    prelude,
                },
                ShellApp {
                    name: "beta",
                    word: "goodbye",
                    prelude,
                },
            ],
            extra,
        )
    }

    /// The server with `apps` (written to `dir/<name>.sh`), started in `dir/server` with
    /// `--fpops-est 1e8` and `extra` options.
    pub fn start_apps(dir: &Path, apps: &[ShellApp<'_>], extra: &[&str]) -> Server {
        let mut args: Vec<String> = Vec::new();
        for app in apps {
            let path = app_script(dir, app.name, app.word, app.prelude);
            args.push("--app".into());
            args.push(format!("{}={}", app.name, path.display()));
        }
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Server::start_raw(dir, &dir.join("server"), &args)
    }

    /// The test project with exactly `args` (apps included), its data in `data`, the input
    /// `dir/input.txt` (`world`, written if missing) and `--fpops-est 1e8`.
    pub fn start_raw(dir: &Path, data: &Path, args: &[&str]) -> Server {
        let input = dir.join("input.txt");
        if !input.exists() {
            fs::write(&input, "world\n").expect("input");
        }
        let mut cmd = Command::new(bin("ferrite-testproject"));
        cmd.arg("--data")
            .arg(data)
            .arg("--input")
            .arg(&input)
            .args(["--fpops-est", "1e8"])
            .args(args);
        if !args.contains(&"--port") {
            cmd.args(["--port", "0"]);
        }
        Server::spawn(cmd, data)
    }

    /// Starts `cmd` (a `ferrite-testproject` command line whose data folder is `data`) and
    /// waits until it listens.
    pub fn spawn(cmd: Command, data: &Path) -> Server {
        let mut proc = Proc::spawn(cmd);
        proc.wait_for("listening on http://", Duration::from_secs(30));
        let url = proc
            .output()
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .expect("the server prints its URL")
            .to_owned();
        Server {
            proc,
            url,
            data: data.to_path_buf(),
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.url
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port in the URL")
    }

    /// Waits until `done(status)`; panics with both logs after `limit`.
    pub fn wait_until(
        &self,
        client: &Proc,
        limit: Duration,
        what: &str,
        done: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let t0 = Instant::now();
        loop {
            let s = status(&self.url);
            if done(&s) {
                return s;
            }
            assert!(
                t0.elapsed() < limit,
                "{what}: not within {limit:?}\nserver status: {s}\n--- ferrited ---\n{}\n--- server ---\n{}",
                client.output(),
                self.proc.output()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

/// Makes `p` (a file this process wrote) executable and ready to run at once: it is replaced
/// by a copy that [`crate::install_program`] writes, which no process holds open for writing.
pub fn set_executable(p: &Path) {
    let mut fresh = p.as_os_str().to_owned();
    fresh.push(".exec");
    let fresh = PathBuf::from(fresh);
    crate::install_program(p, &fresh);
    fs::rename(&fresh, p).expect("rename the executable into place");
}

/// A data directory `d` for ferrited that runs whatever the machine's load (4 CPUs, a small
/// work buffer, GUI RPC password `pw`), with `cc_options` inside `<options>` and `prefs`
/// inside the preferences override.
pub fn client_dir_in(d: &Path, cc_options: &str, prefs: &str) -> PathBuf {
    fs::create_dir_all(d).expect("mkdir");
    fs::write(
        d.join("cc_config.xml"),
        format!(
            "<cc_config>\n<options>\n<ncpus>4</ncpus>\n{cc_options}\n</options>\n</cc_config>\n"
        ),
    )
    .expect("cc_config");
    fs::write(
        d.join("global_prefs_override.xml"),
        format!(
            "<global_preferences>\n<run_if_user_active>1</run_if_user_active>\n\
             <suspend_cpu_usage>0</suspend_cpu_usage>\n<max_ncpus_pct>100</max_ncpus_pct>\n\
             <work_buf_min_days>0.01</work_buf_min_days>\n\
             <work_buf_additional_days>0.01</work_buf_additional_days>\n{prefs}\n\
             </global_preferences>\n"
        ),
    )
    .expect("prefs");
    fs::write(d.join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    d.to_path_buf()
}

/// [`client_dir_in`] at `dir/client` with no extra preferences.
pub fn client_dir(dir: &Path, cc_options: &str) -> PathBuf {
    client_dir_in(&dir.join("client"), cc_options, "")
}

/// Starts ferrited on `dir` with GUI RPC on `port` (attached to `attach` with [`KEY`] if
/// given) and waits for its main loop.
pub fn start_client(dir: &Path, port: u16, attach: Option<&str>) -> Proc {
    let d = dir.to_str().expect("utf-8");
    let port = port.to_string();
    let mut args = vec![
        "--dir",
        d,
        "--gui_rpc_port",
        &port,
        "--skip_cpu_benchmarks",
        "--no_gpus",
    ];
    if let Some(url) = attach {
        args.extend(["--attach_project", url, KEY]);
    }
    let mut p = Proc::ferrited(&args);
    p.wait_for("entering main loop", Duration::from_secs(30));
    p
}

/// The results the server has that were reported: (name, exit status).
pub fn reported(s: &serde_json::Value) -> Vec<(String, i64)> {
    s["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["reports"].as_i64().unwrap_or(0) > 0)
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default().to_owned(),
                r["exit_status"].as_i64().unwrap_or(i64::MIN),
            )
        })
        .collect()
}

/// Whether `n` results are reported.
pub fn all_reported(n: i64) -> impl Fn(&serde_json::Value) -> bool {
    move |s| s["results_reported"].as_i64() == Some(n)
}

/// The volunteer's "Retry pending transfers" (and "Update" with `update`) every two seconds
/// until `n` results are reported (at most `limit`); the server's status then.
pub fn nudge_until_reported(
    server: &Server,
    client: &Proc,
    port: u16,
    (n, limit): (i64, Duration),
    what: &str,
    update: bool,
) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        let s = status(&server.url);
        if s["results_reported"].as_i64() == Some(n) {
            return s;
        }
        assert!(
            t0.elapsed() < limit,
            "{what}: {s}\n--- ferrited ---\n{}",
            client.output()
        );
        // Through the tests' own GUI RPC client, so the nudge needs no Debian peer; a failed
        // nudge is harmless (the next turn tries again).
        let _ = try_gui_rpc(port, Some("pw"), "<network_available/>\n");
        if update {
            let _ = try_gui_rpc(
                port,
                Some("pw"),
                &format!(
                    "<project_update>\n<project_url>{}</project_url>\n</project_update>\n",
                    server.url
                ),
            );
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// What the probing test apps (`tests/apps/*.c`) reported in the outputs they uploaded to
/// `server`: each probe ("NAME yes" / "NAME no" lines) and whether any app succeeded at it.
pub fn probe_report(server: &Server) -> std::collections::BTreeMap<String, bool> {
    let mut r = std::collections::BTreeMap::new();
    for p in walk(&server.data.join("results")) {
        for (k, v) in fs::read_to_string(&p)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once(' '))
        {
            *r.entry(k.to_owned()).or_insert(false) |= v == "yes";
        }
    }
    r
}

/// Every path under `dir` (symlinks listed, not followed).
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.clone());
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                out.extend(walk(&p));
            }
        }
    }
    out
}

/// The first file called `name` under `dir`.
pub fn find_named(dir: &Path, name: &str) -> Option<PathBuf> {
    walk(dir)
        .into_iter()
        .find(|p| p.file_name() == Some(std::ffi::OsStr::new(name)))
}

/// A tmpfs mounted at a directory; unmounted when dropped.
#[derive(Debug)]
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs with `opts` at `dir`, or says why not (not root, no permission).
    pub fn mount(dir: &Path, opts: &str) -> Result<Tmpfs, String> {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if out.status.success() {
            Ok(Tmpfs(dir.to_path_buf()))
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }

    /// Changes the mount's options (`remount,...`).
    pub fn remount(&self, opts: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(&self.0)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "remount {opts} failed");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
