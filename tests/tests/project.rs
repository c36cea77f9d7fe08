//! Ferrite against a BOINC project server on loopback (`ferrite-testproject`): attach, work
//! fetch, downloads with verification, running, uploads and reports; and what each fault the
//! server can inject does to the client.

use std::fs;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ferrite_e2e::{bin, free_port, Proc};

const KEY: &str = "0123456789abcdef0123456789abcdef";

/// One HTTP/1.0 exchange with the test server (loopback only).
fn http(url: &str, method: &str, path: &str, body: &str) -> String {
    let hostport = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut s = TcpStream::connect(&hostport).expect("connect to the test server");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
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

fn status(url: &str) -> serde_json::Value {
    serde_json::from_str(&http(url, "GET", "status", "")).expect("status is JSON")
}

/// The test server with its apps; killed when dropped.
struct Server {
    proc: Proc,
    url: String,
    data: PathBuf,
}

impl Server {
    fn start(dir: &Path, extra: &[&str]) -> Server {
        let data = dir.join("server");
        let input = dir.join("input.txt");
        fs::write(&input, "world\n").expect("input");
        let mut apps = Vec::new();
        for (name, word) in [("alpha", "hello"), ("beta", "goodbye")] {
            let path = dir.join(format!("{name}.sh"));
            // A plain (non-API) app: reads its input, writes its output, says it finished.
            fs::write(
                &path,
                format!(
                    "#!/bin/sh\necho \"{word} $(cat in)\" > out\necho {name} done >&2\n\
                     echo 0 > boinc_finish_called\nexit 0\n"
                ),
            )
            .expect("app");
            set_executable(&path);
            apps.push(format!("{name}={}", path.display()));
        }
        let mut cmd = Command::new(bin("ferrite-testproject"));
        cmd.args(["--port", "0", "--data"])
            .arg(&data)
            .args(["--app", &apps[0], "--app", &apps[1], "--input"])
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

    fn arm(&self, fault: &str) {
        let r = http(&self.url, "POST", "fault", fault);
        assert!(r.contains("armed"), "arming {fault}: {r}");
    }

    /// Waits until `done(status)`; panics with both logs after `limit`.
    fn wait_until(
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

fn set_executable(p: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let mut perm = fs::metadata(p).expect("meta").permissions();
    perm.set_mode(0o755);
    fs::set_permissions(p, perm).expect("chmod");
}

/// A data directory for ferrited that runs whatever the machine's load, with `cc_options`
/// inside `<options>`.
fn client_dir(dir: &Path, cc_options: &str) -> PathBuf {
    let d = dir.join("client");
    fs::create_dir_all(&d).expect("mkdir");
    fs::write(
        d.join("cc_config.xml"),
        format!("<cc_config>\n<options>\n<ncpus>4</ncpus>\n{cc_options}\n</options>\n</cc_config>\n"),
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

fn start_client(dir: &Path, port: u16, attach: Option<&str>) -> Proc {
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

#[test]
fn attached_ferrited_downloads_runs_uploads_and_reports_twenty_jobs_of_two_apps() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "20"]);
    let dir = client_dir(tmp.path(), "");
    let client = start_client(&dir, free_port(), Some(&server.url));

    let s = server.wait_until(&client, Duration::from_secs(150), "20 reports", |s| {
        s["results_reported"] == 20
    });
    assert_eq!(s["jobs_made"], 20);
    assert_eq!(s["results_sent"], 20);
    assert_eq!(s["uploads_received"], 20);
    assert_eq!(s["duplicate_reports"], 0);
    assert_eq!(s["hosts"], 1, "one host record: the host id is kept");
    let results = s["results"].as_array().expect("results");
    assert_eq!(results.len(), 20);
    let mut per_app = [0, 0];
    for r in results {
        assert_eq!(r["exit_status"], 0, "{r}");
        let name = r["name"].as_str().expect("name");
        let out = server
            .data
            .join("results")
            .join(name)
            .join(format!("{name}_out"));
        let text = fs::read_to_string(&out).expect("each output stored per result");
        if name.starts_with("alpha") {
            assert_eq!(text, "hello world\n", "{name}");
            per_app[0] += 1;
        } else {
            assert_eq!(text, "goodbye world\n", "{name}");
            per_app[1] += 1;
        }
    }
    assert_eq!(per_app, [10, 10], "both apps ran");
    // The app files were verified against the project's key before they ran.
    let log = client.output();
    assert!(log.contains("code-signing key stored"), "{log}");
    assert!(!log.contains("signature"), "no signature complaint:\n{log}");
}
