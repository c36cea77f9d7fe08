//! `ferrite demo`: Ferrite's whole job on loopback, with no internet. It starts the bundled
//! test project (`ferrite-testproject`) with a small app, starts `ferrited` on a fresh demo
//! data directory attached to it, shows the tasks being downloaded, run, uploaded and
//! reported, prints a summary and stops everything it started — also on Ctrl-C or error.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use ferrite_gui_rpc::{GuiRpcClient, Request};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::model::Task;

/// The account key the demo project accepts.
const KEY: &str = "0123456789abcdef0123456789abcdef";
/// GUI RPC password of the demo client.
const PASSWORD: &str = "ferrite-demo";
/// Marks a directory made by the demo, so only such a directory is ever wiped.
const MARKER: &str = ".ferrite-demo";

/// Options of `ferrite demo`.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Jobs the demo project makes.
    pub jobs: u32,
    /// Give up after this long.
    pub timeout: Duration,
    /// The demo's directory (wiped at start).
    pub dir: PathBuf,
}

/// A child process stopped when dropped: SIGTERM, a grace period, then SIGKILL.
struct Stopper {
    name: &'static str,
    child: Option<Child>,
}

impl Stopper {
    async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        if tokio::time::timeout(Duration::from_secs(20), child.wait())
            .await
            .is_err()
        {
            eprintln!("ferrite: {} did not stop in 20 s; killing it", self.name);
            let _ = child.kill().await;
        }
    }
}

impl Drop for Stopper {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
        }
    }
}

/// The binaries next to this one.
fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let path = exe
        .parent()
        .map(|d| d.join(name))
        .context("this program has no directory")?;
    if !path.is_file() {
        bail!(
            "{} is missing: build every binary first (`cargo build --release --bins`)",
            path.display()
        );
    }
    Ok(path)
}

/// Empties `dir` if the demo made it; refuses to touch anything else.
fn fresh_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        let ours = dir.join(MARKER).is_file();
        let empty = fs::read_dir(dir)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !ours && !empty {
            bail!(
                "{} exists and was not made by `ferrite demo`; choose another --data",
                dir.display()
            );
        }
        fs::remove_dir_all(dir).with_context(|| format!("cannot empty {}", dir.display()))?;
    }
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    fs::write(dir.join(MARKER), "made by ferrite demo\n")?;
    Ok(())
}

fn write_exec(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    fs::write(path, text)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The test project's `/status` JSON.
async fn server_status(url: &str) -> anyhow::Result<serde_json::Value> {
    let hostport = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let mut s = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(&hostport))
        .await
        .context("status: connect timed out")??;
    s.write_all(format!("GET /status HTTP/1.0\r\nHost: {hostport}\r\n\r\n").as_bytes())
        .await?;
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut text))
        .await
        .context("status: read timed out")??;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok(serde_json::from_str(body)?)
}

/// Counts of the client's tasks by what they are doing.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    downloading: usize,
    running: usize,
    waiting: usize,
    uploading: usize,
    to_report: usize,
}

fn count(tasks: &[Task]) -> Counts {
    let mut c = Counts::default();
    for t in tasks {
        match t.state {
            0 | 1 => c.downloading += 1,
            2 if t.active_task_state == Some(1) => c.running += 1,
            2 => c.waiting += 1,
            4 => c.uploading += 1,
            _ => c.to_report += 1,
        }
    }
    c
}

/// Runs the demo.
pub async fn run(opts: DemoOptions) -> anyhow::Result<()> {
    let ferrited = sibling("ferrited")?;
    let project = sibling("ferrite-testproject")?;
    let dir = if opts.dir.is_absolute() {
        opts.dir.clone()
    } else {
        std::env::current_dir()?.join(&opts.dir)
    };
    fresh_dir(&dir)?;
    let app_dir = dir.join("app");
    let client_dir = dir.join("client");
    fs::create_dir_all(&app_dir)?;
    fs::create_dir_all(&client_dir)?;
    let app = app_dir.join("demo.sh");
    write_exec(
        &app,
        "#!/bin/sh\n# A plain app: counts the words of its input, takes a second.\n\
         sleep 1\nwc -w < in > out\necho \"demo app done\" >&2\n\
         echo 0 > boinc_finish_called\nexit 0\n",
    )?;
    let input = app_dir.join("input.txt");
    fs::write(
        &input,
        "Ferrite runs BOINC science apps on loopback in this demo.\n",
    )?;

    println!("Ferrite demo in {}", dir.display());
    let mut server_cmd = Command::new(&project);
    server_cmd
        .args(["--port", "0", "--data"])
        .arg(dir.join("server"))
        .arg("--app")
        .arg(format!("demo={}", app.display()))
        .arg("--input")
        .arg(&input)
        .args(["--jobs", &opts.jobs.to_string(), "--fpops-est", "1e9"])
        .args(["--name", "Ferrite Demo Project"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(fs::File::create(dir.join("server.log"))?);
    let mut server = Stopper {
        name: "the demo project",
        child: Some(
            server_cmd
                .spawn()
                .context("cannot start ferrite-testproject")?,
        ),
    };
    let stdout = server
        .child
        .as_mut()
        .and_then(|c| c.stdout.take())
        .context("no server output")?;
    let mut lines = BufReader::new(stdout).lines();
    let url = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(u) = line.split_whitespace().find(|w| w.starts_with("http://")) {
                return Some(u.to_owned());
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .context("the demo project did not start (see server.log)")?;
    println!("  project server  {url}");

    fs::write(
        client_dir.join("cc_config.xml"),
        "<cc_config>\n<options>\n<ncpus>2</ncpus>\n</options>\n</cc_config>\n",
    )?;
    fs::write(
        client_dir.join("global_prefs_override.xml"),
        "<global_preferences>\n<run_if_user_active>1</run_if_user_active>\n\
         <suspend_cpu_usage>0</suspend_cpu_usage>\n<max_ncpus_pct>100</max_ncpus_pct>\n\
         <work_buf_min_days>0.01</work_buf_min_days>\n\
         <work_buf_additional_days>0.01</work_buf_additional_days>\n</global_preferences>\n",
    )?;
    fs::write(client_dir.join("gui_rpc_auth.cfg"), format!("{PASSWORD}\n"))?;
    let port = free_port()?;
    let mut daemon_cmd = Command::new(&ferrited);
    daemon_cmd
        .arg("--dir")
        .arg(&client_dir)
        .args(["--gui_rpc_port", &port.to_string()])
        .args([
            "--skip_cpu_benchmarks",
            "--no_gpus",
            "--attach_project",
            &url,
            KEY,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(dir.join("ferrited.log"))?);
    let mut daemon = Stopper {
        name: "ferrited",
        child: Some(daemon_cmd.spawn().context("cannot start ferrited")?),
    };
    println!(
        "  ferrited        {} (GUI RPC on 127.0.0.1:{port})",
        client_dir.display()
    );

    let outcome = tokio::select! {
        r = watch(&url, port, &opts) => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    daemon.stop().await;
    server.stop().await;
    let summary = outcome?;
    println!(
        "Done: {} tasks reported in {:.1} s; CPU time {:.2} s; uploads received {}; \
         credit: the demo project grants none.",
        summary.reported,
        summary.elapsed.as_secs_f64(),
        summary.cpu_time,
        summary.uploads
    );
    println!(
        "Everything the demo started has stopped. Logs: {}",
        dir.display()
    );
    Ok(())
}

/// What the demo achieved.
struct Summary {
    reported: u64,
    uploads: u64,
    cpu_time: f64,
    elapsed: Duration,
}

async fn watch(url: &str, port: u16, opts: &DemoOptions) -> anyhow::Result<Summary> {
    let t0 = Instant::now();
    let mut client = loop {
        match GuiRpcClient::connect_tcp(("127.0.0.1", port)).await {
            Ok(mut c) => {
                c.authorize(PASSWORD).await?;
                break c;
            }
            Err(e) if t0.elapsed() > Duration::from_secs(20) => {
                return Err(anyhow::anyhow!("ferrited did not come up: {e}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let n = u64::from(opts.jobs);
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let bar = if tty {
        let b = ProgressBar::new(n);
        b.set_style(
            ProgressStyle::with_template("  {bar:30} {pos}/{len} reported  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    let mut last = String::new();
    let mut cpu_time = 0.0;
    loop {
        let status = server_status(url).await?;
        let reported = status["results_reported"].as_u64().unwrap_or(0);
        let body = client
            .call(&Request::GetResults { active_only: false })
            .await?;
        let tasks = Task::all(&body);
        let c = count(&tasks);
        let line = format!(
            "downloading {}, running {}, waiting {}, uploading {}, to report {}",
            c.downloading, c.running, c.waiting, c.uploading, c.to_report
        );
        match &bar {
            Some(b) => {
                b.set_position(reported);
                b.set_message(line.clone());
            }
            None if line != last || reported == n => {
                println!(
                    "  [{:5.1} s] reported {reported}/{n}: {line}",
                    t0.elapsed().as_secs_f64()
                );
            }
            None => {}
        }
        last.clone_from(&line);
        if reported >= n {
            if let Some(b) = &bar {
                b.finish();
            }
            let old = client.call(&Request::GetOldResults).await?;
            for part in old.split("<cpu_time>").skip(1) {
                if let Some(v) = part.split("</cpu_time>").next() {
                    cpu_time += v.trim().parse::<f64>().unwrap_or(0.0);
                }
            }
            return Ok(Summary {
                reported,
                uploads: status["uploads_received"].as_u64().unwrap_or(0),
                cpu_time,
                elapsed: t0.elapsed(),
            });
        }
        if t0.elapsed() > opts.timeout {
            if let Some(b) = &bar {
                b.abandon();
            }
            bail!(
                "only {reported} of {n} tasks reported after {:?} ({line})",
                opts.timeout
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_demo_directory_is_wiped() {
        let d = tempfile::tempdir().expect("tmp");
        let other = d.path().join("precious");
        fs::create_dir_all(&other).expect("mkdir");
        fs::write(other.join("data"), "x").expect("write");
        assert!(fresh_dir(&other).is_err());
        assert!(other.join("data").exists());
        let demo = d.path().join("demo");
        fresh_dir(&demo).expect("new");
        fs::write(demo.join("old"), "x").expect("write");
        fresh_dir(&demo).expect("again");
        assert!(!demo.join("old").exists());
        assert!(demo.join(MARKER).exists());
    }
}
