//! Shared helpers for Ferrite's end-to-end tests: locating the workspace's binaries, copying
//! fixture data directories, running `ferrited` as a child process, and running the official
//! BOINC client (Debian's `boinc-client`) as a compatibility peer on loopback.

use std::fs;
use std::io::{self, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

pub mod boinc_server;
pub mod inspect;
pub mod interrupt;
pub mod testproject;
pub mod webdriver;
pub mod x11;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// This package's fixture folder.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The path of workspace binary `name`, built (once per test process and binary) if needed.
///
/// Test executables live in `<target>/<profile>/deps/`; the binaries one level up. Only the
/// binary asked for is built, so a test does not depend on every crate of the workspace
/// compiling.
pub fn bin(name: &str) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<std::collections::HashSet<String>>> = OnceLock::new();
    let exe = std::env::current_exe().unwrap_or_default();
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| workspace_root().join("target/debug"));
    let path = profile_dir.join(name);
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    // `cargo test --workspace` builds every binary first, and tests/run_binaries.py says so
    // (FERRITE_E2E_BINS_BUILT=1): `cargo build` would resolve the dependencies' features
    // otherwise than `cargo test` and compile them all a second time.
    let prebuilt = std::env::var_os("FERRITE_E2E_BINS_BUILT").is_some_and(|v| v == "1");
    if !prebuilt && !built.contains(name) {
        // A test run of this package alone may not have built it, so build it (quick when
        // up to date).
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "--bin", name])
            .current_dir(workspace_root())
            .status();
        assert!(
            status.map(|s| s.success()).unwrap_or(false),
            "building {name} failed"
        );
        built.insert(name.to_owned());
    }
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// The log filter of the daemons tests start: `info`, and the `state_debug` flag's line at
/// the end of each save ([`STATE_SAVED`]), an event tests wait on instead of sleeping while
/// a save may be in flight.
pub const TEST_LOG: &str = "info,ferrite::state_debug=debug";

/// The system bus address the tests' `ferrited` gets: a socket that does not exist.
pub const NO_SYSTEM_BUS: &str = "unix:path=/nonexistent/ferrite-tests-no-system-bus";

/// The line ferrited logs at the end of each save under [`TEST_LOG`].
pub const STATE_SAVED: &str = "state file saved";

/// Raises this process's soft limit on open files to at least `want` (within the hard
/// limit), for tests that hold many sockets.
pub fn raise_nofile(want: libc::rlim_t) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write `lim`.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        if lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        }
    }
    assert!(
        lim.rlim_cur >= want,
        "the hard limit on open files ({}) is below {want}",
        lim.rlim_max
    );
}

/// Copies directory `src` into `dst` recursively (symlinks copied as links).
pub fn copy_dir(src: &Path, dst: &Path) -> io::Result<()> {
    fs::create_dir_all(dst)?;
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let ty = entry.file_type()?;
        let to = dst.join(entry.file_name());
        if ty.is_dir() {
            copy_dir(&entry.path(), &to)?;
        } else if ty.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(entry.path())?, &to)?;
        } else {
            fs::copy(entry.path(), &to)?;
        }
    }
    Ok(())
}

/// A fresh temporary copy of fixture data directory `name` (e.g. `02_tasks_running`).
pub fn fixture_data_dir(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(&fixtures().join("data_dir").join(name), dir.path()).expect("copy fixture");
    dir
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A child process whose stderr (and stdout) go to a log file we can read while it runs.
/// Killed when dropped.
#[derive(Debug)]
pub struct Proc {
    child: Child,
    log: PathBuf,
    _log_dir: tempfile::TempDir,
}

/// An empty directory standing in for `/proc`: no other programs, no CPU load.
pub fn quiet_proc_root() -> PathBuf {
    let dir = std::env::temp_dir().join("ferrite-e2e-quiet-proc");
    fs::create_dir_all(&dir).expect("quiet proc root");
    dir
}

impl Proc {
    /// Spawns `cmd` with both output streams in a log file. A daemon started this way sees an
    /// empty process table (`FERRITE_PROC_ROOT`): the other tests' apps running beside it
    /// would otherwise count as a busy computer and suspend its work (`suspend_cpu_usage`
    /// defaults to 25 %). Tests of that rule set the variable themselves.
    pub fn spawn(mut cmd: Command) -> Proc {
        if !cmd.get_envs().any(|(k, _)| k == "FERRITE_PROC_ROOT") {
            cmd.env("FERRITE_PROC_ROOT", quiet_proc_root());
        }
        // Tests stay on loopback: the project list is looked for on a closed local port
        // unless a test serves one.
        if !cmd.get_envs().any(|(k, _)| k == "FERRITE_PROJECT_LIST_URL") {
            cmd.env(
                "FERRITE_PROJECT_LIST_URL",
                "http://127.0.0.1:9/project_list.php",
            );
        }
        let log_dir = tempfile::tempdir().expect("tempdir");
        let log = log_dir.path().join("output.log");
        let file = fs::File::create(&log).expect("log file");
        let file2 = file.try_clone().expect("clone log");
        cmd.stdout(Stdio::from(file2))
            .stderr(Stdio::from(file))
            .stdin(Stdio::null());
        let child = cmd.spawn().expect("spawn");
        Proc {
            child,
            log,
            _log_dir: log_dir,
        }
    }

    /// `ferrited` with `args`. Its system bus ([`NO_SYSTEM_BUS`]) is none, so the host's
    /// systemd-logind never tells it whether the user is idle: tests control that with
    /// `FERRITE_DEV_ROOT` (or a bus of their own, set with `DBUS_SYSTEM_BUS_ADDRESS`).
    pub fn ferrited(args: &[&str]) -> Proc {
        let mut cmd = Command::new(bin("ferrited"));
        cmd.args(args)
            .env("RUST_LOG", TEST_LOG)
            .env("NO_COLOR", "1")
            .env("DBUS_SYSTEM_BUS_ADDRESS", NO_SYSTEM_BUS);
        Proc::spawn(cmd)
    }

    /// The command of a `ferrited` on data directory `dir` with GUI RPC on `port`, its CPU
    /// benchmarks skipped and `fakebin` (fake programs: VBoxManage, podman, ...) first on its
    /// PATH; the caller adds what else it needs and spawns it.
    pub fn ferrited_command(dir: &Path, port: u16, fakebin: Option<&Path>) -> Command {
        let mut cmd = Command::new(bin("ferrited"));
        cmd.args(["--dir", dir.to_str().expect("utf-8 path")])
            .args(["--gui_rpc_port", &port.to_string(), "--skip_cpu_benchmarks"])
            .env("RUST_LOG", TEST_LOG)
            .env("NO_COLOR", "1")
            .env("DBUS_SYSTEM_BUS_ADDRESS", NO_SYSTEM_BUS);
        if let Some(fake) = fakebin {
            let base = std::env::var("PATH").unwrap_or_default();
            cmd.env("PATH", format!("{}:{base}", fake.display()));
        }
        cmd
    }

    /// Whether the process has ended.
    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid fits")
    }

    /// Everything the process has printed so far.
    pub fn output(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Waits until the output contains `needle`; panics with the output after `timeout`.
    pub fn wait_for(&mut self, needle: &str, timeout: Duration) {
        self.wait_for_count(needle, 1, timeout);
    }

    /// Waits until `needle` occurs at least `n` times in the output (an event seen again
    /// after an action: count the occurrences before it, then wait for one more); panics
    /// with the output after `timeout`.
    pub fn wait_for_count(&mut self, needle: &str, n: usize, timeout: Duration) {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.output().matches(needle).count() >= n {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "process exited ({status}) before printing {needle:?} {n} times; output:\n{}",
                    self.output()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "timed out waiting for {needle:?} {n} times; output:\n{}",
            self.output()
        );
    }

    /// Sends `signal` (e.g. `libc::SIGTERM`).
    pub fn signal(&self, signal: i32) {
        // SAFETY: sending a signal to our own child process.
        let rc = unsafe { libc::kill(self.pid(), signal) };
        assert_eq!(rc, 0, "kill failed");
    }

    /// Waits for the process to exit, at most `timeout`; kills it and panics past that.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            if start.elapsed() > timeout {
                let _ = self.child.kill();
                panic!(
                    "process did not exit in {timeout:?}; output:\n{}",
                    self.output()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    /// Asks the process to stop (SIGTERM: a daemon then stops its apps), and kills it after
    /// ten seconds; a test that fails half-way leaves no process behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.signal(libc::SIGTERM);
            let t0 = std::time::Instant::now();
            while t0.elapsed() < Duration::from_secs(10) {
                if !matches!(self.child.try_wait(), Ok(None)) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether every one of `programs` is on the `PATH`.
pub fn installed(programs: &[&str]) -> bool {
    programs.iter().all(|b| {
        Command::new("sh")
            .args(["-c", &format!("command -v {b}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}

/// Whether Debian's official client and `boinccmd` are installed (`tests/run.sh` installs
/// them when run as root).
pub fn official_client_installed() -> bool {
    installed(&["boinc", "boinccmd"])
}

/// Whether this run is CI's (`CI` set to anything but empty or `false`): there a missing peer
/// is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

/// The Debian package that provides program `program`, for the `apt-get install` hint.
pub fn debian_package(program: &str) -> &str {
    match program {
        "boinc" | "boinccmd" => "boinc-client",
        "boincmgr" => "boinc-manager",
        "Xvfb" => "xvfb",
        "xwd" => "x11-apps",
        "promtool" => "prometheus",
        "chromedriver" => "chromium-driver",
        "systemd-analyze" | "systemd-sysusers" => "systemd",
        "setpriv" | "ionice" | "unshare" => "util-linux",
        "dpkg-deb" => "dpkg",
        other => other,
    }
}

/// Skips test `test` for reason `why`: prints `SKIPPED <test>: <why>` and, when
/// `FERRITE_SKIPPED_LOG` names a file (`tests/run.sh` sets it), appends the line there so the
/// run can list every skip at its end. Under CI ([`in_ci`]) it panics instead: CI installs
/// every peer and runs as root, so a skip there would hide a test that never ran.
pub fn skip(test: &str, why: &str) {
    assert!(!in_ci(), "{test}: {why}; CI must run this test");
    let line = format!("SKIPPED {test}: {why}");
    eprintln!("{line}");
    if let Some(log) = std::env::var_os("FERRITE_SKIPPED_LOG") {
        use std::io::Write;
        if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(log) {
            // One write per line: the tests of a binary run on several threads.
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
}

/// Whether every one of `programs` (the Debian peers test `test` runs) is on the `PATH`; when
/// one is not, the test is skipped (see [`skip`]) naming what is missing and the `apt-get
/// install` line that brings it, and this returns false. A test starts with
/// `if !peer_or_skip("name", &["boinc", "boinccmd"]) { return; }`.
pub fn peer_or_skip(test: &str, programs: &[&str]) -> bool {
    let missing: Vec<&str> = programs
        .iter()
        .copied()
        .filter(|p| !installed(&[p]))
        .collect();
    if missing.is_empty() {
        return true;
    }
    let mut packages: Vec<&str> = missing.iter().map(|p| debian_package(p)).collect();
    packages.dedup();
    skip(
        test,
        &format!(
            "{} not installed (apt-get install {})",
            missing.join(", "),
            packages.join(" ")
        ),
    );
    false
}

/// Whether this process runs as root; when not, test `test` is skipped (see [`skip`]) saying
/// what it needs root for (`for_what`), and this returns false.
pub fn root_or_skip(test: &str, for_what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    skip(test, &format!("needs root {for_what}"));
    false
}

/// Whether the BOINC API test app can be built (g++ and Debian's `libboinc-app-dev`, see
/// [`boinc_test_app`]); when not, test `test` is skipped (see [`skip`]) and this returns false.
pub fn boinc_api_or_skip(test: &str) -> bool {
    if !peer_or_skip(test, &["g++"]) {
        return false;
    }
    if Path::new("/usr/include/boinc/boinc_api.h").exists() {
        return true;
    }
    skip(
        test,
        "the BOINC API headers are not installed (apt-get install libboinc-app-dev)",
    );
    false
}

/// The official BOINC client running on a data directory, on a loopback GUI RPC port.
#[derive(Debug)]
pub struct OfficialClient {
    proc: Proc,
    port: u16,
    password: String,
}

impl OfficialClient {
    /// Starts `boinc --dir dir` with GUI RPC on a free loopback port and waits until it answers.
    ///
    /// Computing and network activity are suspended through `boinccmd` as soon as it answers,
    /// so the client only loads and serves its state. Panics with a hint when the official
    /// client is not installed.
    pub fn start(dir: &Path) -> OfficialClient {
        Self::start_with(dir, false)
    }

    /// Like [`start`](Self::start), but the client detects GPUs and OpenCL platforms.
    pub fn start_detecting_gpus(dir: &Path) -> OfficialClient {
        Self::start_with(dir, true)
    }

    fn start_with(dir: &Path, detect_gpus: bool) -> OfficialClient {
        assert!(
            official_client_installed(),
            "the official client is needed: install Debian's boinc-client (see .ci/run)"
        );
        let password = fs::read_to_string(dir.join("gui_rpc_auth.cfg"))
            .map(|s| s.lines().next().unwrap_or("").trim().to_owned())
            .unwrap_or_default();
        let port = free_port();
        let mut cmd = Command::new("boinc");
        cmd.arg("--dir")
            .arg(dir)
            .args(["--gui_rpc_port", &port.to_string(), "--no_info_fetch"])
            .current_dir(dir);
        if !detect_gpus {
            cmd.arg("--no_gpus");
        }
        let mut client = OfficialClient {
            proc: Proc::spawn(cmd),
            port,
            password,
        };
        client.wait_ready(Duration::from_secs(30));
        let _ = client.boinccmd(&["--set_run_mode", "never"]);
        let _ = client.boinccmd(&["--set_network_mode", "never"]);
        client
    }

    fn wait_ready(&mut self, timeout: Duration) {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Ok(Some(status)) = self.proc.child.try_wait() {
                panic!("official client exited ({status}):\n{}", self.proc.output());
            }
            if self.boinccmd(&["--get_cc_status"]).0 {
                return;
            }
            thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "official client did not answer GUI RPC:\n{}",
            self.proc.output()
        );
    }

    /// The loopback GUI RPC port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Runs `boinccmd` against this client; returns (success, stdout).
    pub fn boinccmd(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new("boinccmd")
            .args(["--host", &format!("127.0.0.1:{}", self.port)])
            .args(["--passwd", &self.password])
            .args(args)
            .output();
        match out {
            Ok(o) => (
                o.status.success(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
            ),
            Err(_) => (false, String::new()),
        }
    }

    /// Sends one GUI RPC request (authenticated) and returns the raw reply.
    pub fn gui_rpc(&self, op_xml: &str) -> String {
        gui_rpc(self.port, Some(&self.password), op_xml)
    }

    /// What the client printed.
    pub fn output(&self) -> String {
        self.proc.output()
    }

    /// Asks the client to quit and waits for it.
    pub fn quit(mut self) -> String {
        let _ = self.boinccmd(&["--quit"]);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.proc.child.try_wait() {
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
        self.proc.output()
    }
}

/// The result of running `boinccmd`.
#[derive(Debug)]
pub struct CmdOutput {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs the official `boinccmd` against `127.0.0.1:port`, with `--passwd` when `password` is
/// given. It runs in an empty directory, so it finds no `gui_rpc_auth.cfg` of its own; it is
/// stopped after two minutes.
pub fn boinccmd(port: u16, password: Option<&str>, args: &[&str]) -> CmdOutput {
    boinccmd_bounded(port, password, args, Duration::from_secs(120))
}

/// The opening-tag names of `xml`, in document order (`<a/>` counts as `a`).
pub fn element_names(xml: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        if rest.starts_with('/') || rest.starts_with('!') || rest.starts_with('?') {
            continue;
        }
        let end = rest
            .find(|c: char| c == '>' || c == '/' || c.is_whitespace())
            .unwrap_or(rest.len());
        names.push(rest[..end].to_owned());
    }
    names
}

/// The first `<tag>…</tag>` element of `xml` (tags included), if any.
pub fn first_element<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)?;
    let end = xml[start..].find(&close)? + start + close.len();
    Some(&xml[start..end])
}

/// The reply bodies of an official transcript (`<<< reply` sections), in order.
pub fn transcript_replies(transcript: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in transcript.lines() {
        if line.starts_with("<<< reply") {
            cur = Some(String::new());
            continue;
        }
        if let Some(buf) = cur.as_mut() {
            if line == "<ETX>" {
                out.extend(cur.take());
                continue;
            }
            buf.push_str(line);
            buf.push('\n');
        }
    }
    out
}

/// A minimal synchronous GUI RPC client for tests: sends `op_xml` (after authenticating
/// with `password`, if given) and returns the reply text without its 0x03. Panics, naming
/// the port, when the exchange fails (see [`try_gui_rpc`]).
pub fn gui_rpc(port: u16, password: Option<&str>, op_xml: &str) -> String {
    try_gui_rpc(port, password, op_xml)
        .unwrap_or_else(|e| panic!("GUI RPC to 127.0.0.1:{port}: {e}"))
}

/// [`gui_rpc`] that returns a failed exchange (refused, closed, timed out, refused
/// authentication) as an error instead of panicking: for nudges whose failure is harmless.
pub fn try_gui_rpc(port: u16, password: Option<&str>, op_xml: &str) -> io::Result<String> {
    // ferrited binds its GUI RPC port just after it logs "entering main loop": a client that
    // comes at once may find it not yet listening, so a refused connection is tried again
    // for a few seconds.
    let t0 = Instant::now();
    let mut s = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionRefused | io::ErrorKind::Interrupted
                ) && t0.elapsed() < Duration::from_secs(5) =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e),
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    if let Some(pw) = password {
        authorize(&mut s, pw)?;
    }
    exchange(&mut s, op_xml)
}

/// Sends `op_xml` wrapped in `<boinc_gui_rpc_request>` on `s`; the reply text without its
/// 0x03.
fn exchange(s: &mut std::net::TcpStream, op_xml: &str) -> io::Result<String> {
    use std::io::Write as _;
    let msg = format!("<boinc_gui_rpc_request>\n{op_xml}</boinc_gui_rpc_request>\n\u{3}");
    s.write_all(msg.as_bytes())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    while !buf.ends_with(&[3]) {
        // A read with a timeout is not restarted after a signal, even under SA_RESTART, nor
        // after a stop and continue (SIGSTOP, SIGCONT): it fails with EINTR, and is retried
        // as std's own read loops (`read_to_end`, `write_all`) retry it.
        let n = match s.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before the reply's end",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    buf.pop();
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The authentication exchange on `s`, read by the GUI RPC client's own reader.
fn authorize(s: &mut std::net::TcpStream, password: &str) -> io::Result<()> {
    use ferrite_gui_rpc::client::{auth1_nonce, auth2_op, check_authorized, AUTH1_OP};
    let r = exchange(s, AUTH1_OP)?;
    let nonce = auth1_nonce(&r).ok_or_else(|| io::Error::other(format!("no nonce in {r}")))?;
    let r = exchange(s, &auth2_op(nonce, password))?;
    check_authorized(&r).map_err(|_| io::Error::new(io::ErrorKind::PermissionDenied, r))
}

/// One GUI RPC connection kept open across calls, as BOINC Manager keeps one (the official
/// client keeps some operations, such as `get_project_config`, per connection).
#[derive(Debug)]
pub struct GuiRpcSession {
    stream: std::net::TcpStream,
}

impl GuiRpcSession {
    /// Connects to `127.0.0.1:port` and authenticates with `password`.
    pub fn open(port: u16, password: &str) -> GuiRpcSession {
        let stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut s = GuiRpcSession { stream };
        authorize(&mut s.stream, password).expect("authorized");
        s
    }

    /// Sends `op_xml`; the reply text without its 0x03.
    pub fn call(&mut self, op_xml: &str) -> String {
        exchange(&mut self.stream, op_xml).expect("GUI RPC exchange")
    }
}

/// Starts `ferrited` on `dir` with GUI RPC on `port` and waits until it listens.
pub fn ferrited_with_gui_rpc(dir: &Path, port: u16) -> Proc {
    let d = dir.to_str().expect("utf-8 path");
    let port = port.to_string();
    let mut p = Proc::ferrited(&[
        "--dir",
        d,
        "--gui_rpc_port",
        &port,
        "--skip_cpu_benchmarks",
        "--no_gpus",
    ]);
    p.wait_for("GUI RPC listening on TCP", Duration::from_secs(30));
    p
}

/// Runs `cmd` with its output captured; kills it and panics when it takes longer than
/// `timeout`. Returns its output and how long it ran. The output is read while the command
/// runs, so a command that prints more than a pipe holds cannot stall.
pub fn run_bounded(mut cmd: Command, timeout: Duration) -> (std::process::Output, Duration) {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            let out = stdout.join().unwrap_or_default();
            let err = stderr.join().unwrap_or_default();
            panic!(
                "{cmd:?} did not finish within {timeout:?}; stdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&err)
            );
        }
        thread::sleep(Duration::from_millis(10));
    };
    let output = std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    };
    (output, start.elapsed())
}

/// `boinccmd` against `127.0.0.1:port` (run in an empty directory), bounded by `timeout`.
pub fn boinccmd_bounded(
    port: u16,
    password: Option<&str>,
    args: &[&str],
    timeout: Duration,
) -> CmdOutput {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    assert!(
        *INSTALLED.get_or_init(|| installed(&["boinccmd"])),
        "this test drives ferrited with Debian's boinccmd, which is not installed \
         (apt-get install boinc-client; tests/run.sh does as root)"
    );
    let cwd = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new("boinccmd");
    cmd.current_dir(cwd.path())
        .env("TZ", "UTC")
        .args(["--host", &format!("127.0.0.1:{port}")]);
    if let Some(p) = password {
        cmd.args(["--passwd", p]);
    }
    cmd.args(args);
    let (out, _) = run_bounded(cmd, timeout);
    CmdOutput {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The `ferrite` command run in `cwd` with `args`, bounded by `timeout`.
pub fn ferrite_bounded(cwd: &Path, args: &[&str], timeout: Duration) -> CmdOutput {
    let mut cmd = Command::new(bin("ferrite"));
    cmd.current_dir(cwd).env("TZ", "UTC").args(args);
    let (out, _) = run_bounded(cmd, timeout);
    CmdOutput {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Whether this kernel confines apps with Landlock; when it does not, test `test` is skipped
/// (see [`skip`]) with the reason, and this returns false.
pub fn landlock_or_skip(test: &str) -> bool {
    match ferrite_supervise::confine::support() {
        ferrite_supervise::confine::Support::Available(_) => true,
        other => {
            skip(test, &other.describe());
            false
        }
    }
}

/// Compiles the C test app `source` (one of `tests/apps/*.c`) with `cc` into `out`.
pub fn build_c_app(source: &Path, out: &Path) {
    let status = Command::new("cc")
        .args(["-O1", "-Wall", "-o"])
        .arg(out)
        .arg(source)
        .status()
        .expect("a C compiler (cc) must be installed");
    assert!(status.success(), "building {} failed", source.display());
}

/// Asserts that every app `ferrited` started (`out`: its log) ran confined, where this
/// kernel has Landlock (elsewhere apps run unconfined, as the log says, and nothing is
/// asserted).
pub fn assert_apps_ran_confined(out: &str) {
    if !matches!(
        ferrite_supervise::confine::support(),
        ferrite_supervise::confine::Support::Available(_)
    ) {
        return;
    }
    let started = out.matches("starting task ").count();
    assert!(started > 0, "no app started:\n{out}");
    assert_eq!(
        out.matches(", confined: its slot").count(),
        started,
        "every app runs confined:\n{out}"
    );
}

/// The C++ BOINC API test app (`crates/ferrite-supervise/tests/apps/test_app.cpp`, whose
/// flags are listed at its top), compiled with g++ against Debian's `libboinc-app-dev` into
/// `dir` (the first call's) once per test process, written under a temporary name and
/// renamed into place, so test processes building at once never see half a binary.
pub fn boinc_test_app(dir: &Path) -> PathBuf {
    static APP: OnceLock<PathBuf> = OnceLock::new();
    APP.get_or_init(|| {
        let source = workspace_root().join("crates/ferrite-supervise/tests/apps/test_app.cpp");
        fs::create_dir_all(dir).expect("app build dir");
        let out = dir.join("boinc_test_app");
        let tmp = dir.join(format!("boinc_test_app.{}", std::process::id()));
        let status = Command::new("g++")
            .args(["-O1", "-I/usr/include/boinc", "-o"])
            .arg(&tmp)
            .arg(&source)
            .args(["-lboinc_api", "-lboinc", "-lpthread"])
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "building the BOINC test app failed (needs g++ and libboinc-app-dev)"
        );
        fs::rename(&tmp, &out).expect("rename test app");
        out
    })
    .clone()
}

/// The fake `libnvidia-ml.so` of `ferrite-hostinfo`'s tests (two GPUs), compiled into `dir`
/// with `$CC` (default `cc`).
pub fn fake_nvml(dir: &Path) -> PathBuf {
    let src = workspace_root().join("crates/ferrite-hostinfo/tests/fake_nvml/fake_nvml.c");
    let out = dir.join("libnvidia-ml-fake.so");
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".to_owned()))
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("run the C compiler");
    assert!(status.success(), "compiling the fake NVML library failed");
    out
}
