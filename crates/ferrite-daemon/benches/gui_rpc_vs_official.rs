//! `get_state` latency against `ferrited` and against the official client (Debian's
//! `boinc-client`), both loaded with the same generated state (20 projects, 1,000 tasks):
//! the median of 100 calls from one local, authorised connection, and the ratio.
//! Target: Ferrite at most a third of the official client's time.
//!
//! Run: `cargo bench -p ferrite-daemon --bench gui_rpc_vs_official` (needs `boinc` and
//! `boinccmd`; `.ci/run` installs them).

use std::fs;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrite_gui_rpc::{GuiRpcClient, Request};
use ferrite_proto::account::{account_file_name, AccountFile};
use ferrite_proto::client_state::synthetic;

const PASSWORD: &str = "benchpw";
const CALLS: usize = 100;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A data directory holding the generated state, an account file per project and the
/// GUI RPC password.
fn data_dir(xml: &str, urls: &[String]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("client_state.xml"), xml).expect("state");
    fs::write(dir.path().join("gui_rpc_auth.cfg"), PASSWORD).expect("password");
    for url in urls {
        let acct = AccountFile {
            master_url: url.clone(),
            authenticator: "0123456789abcdef0123456789abcdef".into(),
            ..AccountFile::default()
        };
        fs::write(dir.path().join(account_file_name(url)), acct.to_xml()).expect("account");
    }
    dir
}

/// Kills the child when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(cmd: &mut Command) -> Running {
    Running(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn"),
    )
}

/// Connects and authorises, retrying while the server starts (at most 60 s).
async fn connect(port: u16) -> GuiRpcClient {
    let start = Instant::now();
    loop {
        if let Ok(mut c) = GuiRpcClient::connect_tcp(("127.0.0.1", port)).await {
            c.set_timeout(Duration::from_secs(60));
            if c.authorize(PASSWORD).await.is_ok() {
                return c;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no GUI RPC on port {port}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Median `get_state` latency, and the reply size.
async fn measure(port: u16) -> (Duration, usize) {
    let mut c = connect(port).await;
    let first = c.call(&Request::GetState).await.expect("get_state");
    assert!(first.contains("<client_state>"), "not a state reply");
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        let body = c.call(&Request::GetState).await.expect("get_state");
        times.push(t.elapsed());
        std::hint::black_box(body.len());
    }
    times.sort();
    (times[CALLS / 2], first.len())
}

fn boinccmd(port: u16, args: &[&str]) {
    let _ = Command::new("boinccmd")
        .args(["--host", &format!("127.0.0.1:{port}"), "--passwd", PASSWORD])
        .args(args)
        .output();
}

fn main() {
    let state = synthetic(20, 1000);
    let urls: Vec<String> = state
        .projects
        .iter()
        .map(|p| p.project.master_url.clone())
        .collect();
    let xml = state.to_xml();
    let ours = data_dir(&xml, &urls);
    let theirs = data_dir(&xml, &urls);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let port = free_port();
    let ferrited = spawn(
        Command::new(env!("CARGO_BIN_EXE_ferrited"))
            .arg("--dir")
            .arg(ours.path())
            .args(["--skip_cpu_benchmarks", "--gui_rpc_port", &port.to_string()]),
    );
    let (ferrite, ferrite_bytes) = rt.block_on(measure(port));
    drop(ferrited);

    if !has_official_client() {
        println!("get_state, 20 projects / 1,000 tasks: ferrited median {ferrite:?} ({ferrite_bytes} bytes); official client not installed");
        return;
    }
    let port = free_port();
    let official = spawn(
        Command::new("boinc")
            .arg("--dir")
            .arg(theirs.path())
            .args([
                "--gui_rpc_port",
                &port.to_string(),
                "--no_info_fetch",
                "--no_gpus",
            ])
            .current_dir(theirs.path()),
    );
    let (boinc, boinc_bytes) = rt.block_on(async {
        let _ = connect(port).await;
        boinccmd(port, &["--set_run_mode", "never"]);
        boinccmd(port, &["--set_network_mode", "never"]);
        measure(port).await
    });
    drop(official);

    println!("get_state, 20 projects / 1,000 tasks, median of {CALLS} calls on one connection:");
    println!(
        "  ferrited        {:8.2} ms  ({ferrite_bytes} bytes)",
        ms(ferrite)
    );
    println!(
        "  official client {:8.2} ms  ({boinc_bytes} bytes)",
        ms(boinc)
    );
    println!(
        "  ratio           {:8.3}  (target <= 0.333)",
        ferrite.as_secs_f64() / boinc.as_secs_f64()
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn has_official_client() -> bool {
    ["boinc", "boinccmd"].iter().all(|b| {
        Command::new("sh")
            .args(["-c", &format!("command -v {b}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}
