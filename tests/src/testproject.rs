//! The loopback BOINC project (`ferrite-testproject`) as a child process, and what the tests
//! that run `ferrited` against it share: its HTTP and `/status`, a data directory for
//! `ferrited` that runs whatever the machine's load, and `ferrited` attached to it.

use std::fs;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{bin, Proc};

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
        let data = dir.join("server");
        let input = dir.join("input.txt");
        fs::write(&input, "world\n").expect("input");
        let mut cmd = Command::new(bin("ferrite-testproject"));
        cmd.args(["--port", "0", "--data"]).arg(&data);
        for app in apps {
            let path = dir.join(format!("{}.sh", app.name));
            fs::write(
                &path,
                format!(
                    "#!/bin/sh\n{}echo \"{} $(cat in)\" > out\necho {} done >&2\n\
                     echo 0 > boinc_finish_called\nexit 0\n",
                    app.prelude, app.word, app.name
                ),
            )
            .expect("app");
            set_executable(&path);
            cmd.arg("--app")
                .arg(format!("{}={}", app.name, path.display()));
        }
        cmd.arg("--input")
            .arg(&input)
            .args(["--fpops-est", "1e8"])
            .args(extra);
        let mut proc = Proc::spawn(cmd);
        proc.wait_for("listening on http://", Duration::from_secs(30));
        let out = proc.output();
        let url = out
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .expect("the server prints its URL")
            .to_owned();
        Server { proc, url, data }
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

/// Makes `p` executable.
pub fn set_executable(p: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let mut perm = fs::metadata(p).expect("meta").permissions();
    perm.set_mode(0o755);
    fs::set_permissions(p, perm).expect("chmod");
}

/// A data directory `dir/client` for ferrited that runs whatever the machine's load (4 CPUs,
/// a small work buffer, GUI RPC password `pw`), with `cc_options` inside `<options>`.
pub fn client_dir(dir: &Path, cc_options: &str) -> PathBuf {
    let d = dir.join("client");
    fs::create_dir_all(&d).expect("mkdir");
    fs::write(
        d.join("cc_config.xml"),
        format!(
            "<cc_config>\n<options>\n<ncpus>4</ncpus>\n{cc_options}\n</options>\n</cc_config>\n"
        ),
    )
    .expect("cc_config");
    fs::write(
        d.join("global_prefs_override.xml"),
        "<global_preferences>\n<run_if_user_active>1</run_if_user_active>\n\
         <suspend_cpu_usage>0</suspend_cpu_usage>\n<max_ncpus_pct>100</max_ncpus_pct>\n\
         <work_buf_min_days>0.01</work_buf_min_days>\n\
         <work_buf_additional_days>0.01</work_buf_additional_days>\n</global_preferences>\n",
    )
    .expect("prefs");
    fs::write(d.join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    d
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
