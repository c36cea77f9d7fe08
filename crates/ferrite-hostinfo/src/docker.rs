//! Docker and Podman detection as the official client does it on Linux
//! (`client/hostinfo_unix.cpp`, `get_docker_version`): Podman first, then Docker; a program
//! counts when `PROG --version` prints a version and `PROG run --rm hello-world` greets
//! (an unprivileged user may have the program but not be able to run containers).
//!
//! The result is `<docker_version>` and `<docker_type>` (1 Docker, 2 Podman).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `<docker_type>` of Docker.
pub const DOCKER: u32 = 1;
/// `<docker_type>` of Podman.
pub const PODMAN: u32 = 2;

/// How long one command may take (the hello-world test may pull an image).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// The version in a `--version` line: `Docker version 24.0.7, build …` → `24.0.7`,
/// `podman version 4.9.3` → `4.9.3` (the text after `version ` up to a comma, space or end
/// of line).
pub fn parse_version_line(line: &str) -> Option<String> {
    let rest = &line[line.find("version ")? + "version ".len()..];
    let end = rest
        .find(',')
        .or_else(|| rest.find(' '))
        .or_else(|| rest.find('\n'))?;
    Some(rest[..end].to_owned())
}

/// Runs `program args…` in its own process group and returns its standard output (`None`
/// when it cannot start). One that does not finish within `timeout` is killed with its
/// children; what it printed until then is returned.
pub(crate) fn output_of(program: &Path, args: &[&str], timeout: Duration) -> Option<String> {
    run(program, args, timeout).map(|(out, _)| out)
}

/// Whether `program args…` runs and exits with status 0 within `timeout`.
pub(crate) fn status_of(program: &Path, args: &[&str], timeout: Duration) -> bool {
    run(program, args, timeout).is_some_and(|(_, ok)| ok)
}

/// [`output_of`], with whether the program exited with status 0 in time.
fn run(program: &Path, args: &[&str], timeout: Duration) -> Option<(String, bool)> {
    use std::os::unix::process::CommandExt as _;
    let mut child = Command::new(program)
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let mut ok = false;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                ok = status.success();
                break;
            }
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                // The whole group: a script's children keep the pipe open otherwise.
                if let Ok(pid) = i32::try_from(child.id()) {
                    // SAFETY: signalling the process group this function created.
                    unsafe {
                        libc::kill(-pid, libc::SIGKILL);
                    }
                }
                let _ = child.wait();
                break;
            }
        }
    }
    reader.join().ok().map(|out| (out, ok))
}

/// Whether `program` is a working Docker/Podman CLI; its version if so.
fn usable_version(program: &Path, timeout: Duration) -> Option<String> {
    // The version is on the first line, or the second with podman-docker.
    let version = output_of(program, &["--version"], timeout)?
        .lines()
        .find_map(|l| parse_version_line(&format!("{l}\n")))?;
    let hello = output_of(program, &["run", "--rm", "hello-world"], timeout)?;
    if !hello.contains("Hello") {
        tracing::info!("{} found but 'hello-world' test failed", program.display());
        return None;
    }
    Some(version)
}

/// Tries each `(program, docker_type)` in order; the first that works gives
/// `(version, docker_type)`.
pub fn detect_with(programs: &[(PathBuf, u32)], timeout: Duration) -> Option<(String, u32)> {
    detect_in(programs, timeout, None)
}

/// [`detect_with`]; `pause_pid_file`: where rootless Podman records its pause process (the
/// process that holds its user namespace and outlives the command that started it). When
/// no pause process ran before a Podman check and one runs after it with no container
/// running (`podman ps -q` prints nothing), the check started it: it is stopped, so that
/// detection leaves nothing behind. One that ran before is the volunteer's and is left.
pub fn detect_in(
    programs: &[(PathBuf, u32)],
    timeout: Duration,
    pause_pid_file: Option<&Path>,
) -> Option<(String, u32)> {
    programs.iter().find_map(|(p, t)| {
        let pause = pause_pid_file.filter(|_| *t == PODMAN);
        let before = pause.and_then(live_pid);
        let found = usable_version(p, timeout).map(|v| (v, *t));
        if let (None, Some(pid)) = (before, pause.and_then(live_pid)) {
            stop_pause_process(p, pid, timeout);
        }
        found
    })
}

/// The PID a pid file names, if that process is alive (not a zombie).
fn live_pid(file: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(file).ok()?.trim().parse().ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the command name's closing parenthesis.
    let state = stat.rsplit_once(") ")?.1.chars().next()?;
    (pid > 1 && state != 'Z' && state != 'X').then_some(pid)
}

/// Stops the pause process `pid` that Podman started during detection, unless a container
/// runs (then the volunteer has started one meanwhile, which needs it).
fn stop_pause_process(podman: &Path, pid: i32, timeout: Duration) {
    match run(podman, &["ps", "-q"], timeout) {
        Some((out, true)) if out.trim().is_empty() => {
            // SAFETY: a plain signal to the PID the pause file names, checked alive above.
            if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
                tracing::info!("stopped the Podman pause process {pid} that detection started");
            }
        }
        _ => tracing::info!("left the Podman pause process {pid}: containers may be running"),
    }
}

/// Rootless Podman's pause pid file: `$XDG_RUNTIME_DIR/libpod/tmp/pause.pid` (root's Podman
/// has no pause process).
fn rootless_pause_pid_file() -> Option<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return None;
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")?;
    Some(PathBuf::from(runtime).join("libpod/tmp/pause.pid"))
}

/// Podman, then Docker, found through `PATH`.
pub fn detect() -> Option<(String, u32)> {
    detect_in(
        &[
            (PathBuf::from("podman"), PODMAN),
            (PathBuf::from("docker"), DOCKER),
        ],
        COMMAND_TIMEOUT,
        rootless_pause_pid_file().as_deref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_lines_parse_like_the_official_client() {
        assert_eq!(
            parse_version_line("Docker version 24.0.7, build 24.0.7-0ubuntu2~22.04.1\n"),
            Some("24.0.7".into())
        );
        assert_eq!(
            parse_version_line("podman version 4.9.3\n"),
            Some("4.9.3".into())
        );
        assert_eq!(
            parse_version_line("Emulate Docker CLI using podman.\n"),
            None
        );
        assert_eq!(parse_version_line("podman version 4.9.3"), None, "no end");
    }

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        crate::test_support::write_script(&p, body);
        p
    }

    /// A fake rootless `podman`: `run` starts a stand-in pause process (a `sleep`) and
    /// writes its PID to `pause` unless a live one is there already; `ps -q` prints `ps`.
    fn rootless_podman(dir: &Path) -> PathBuf {
        let pause = dir.join("pause.pid");
        let ps = dir.join("ps");
        script(
            dir,
            "podman",
            &format!(
                "case \"$1\" in --version) echo 'podman version 4.3.1';; \
                 run) if ! kill -0 \"$(cat {pause} 2>/dev/null)\" 2>/dev/null; then \
                 sleep 300 >/dev/null 2>&1 </dev/null & echo $! > {pause}; fi; \
                 echo 'Hello from Docker!';; \
                 ps) cat {ps} 2>/dev/null; true;; esac\n",
                pause = pause.display(),
                ps = ps.display()
            ),
        )
    }

    fn gone(pid: i32) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if live_pid_of(pid).is_none() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn live_pid_of(pid: i32) -> Option<i32> {
        let d = tempfile::tempdir().ok()?;
        let f = d.path().join("pid");
        std::fs::write(&f, pid.to_string()).ok()?;
        live_pid(&f)
    }

    #[test]
    fn a_pause_process_podman_started_during_detection_is_stopped() {
        let d = tempfile::tempdir().expect("tmp");
        let podman = rootless_podman(d.path());
        let pause = d.path().join("pause.pid");
        let t = Duration::from_secs(10);
        assert_eq!(
            detect_in(&[(podman, PODMAN)], t, Some(&pause)),
            Some(("4.3.1".into(), PODMAN))
        );
        let pid: i32 = std::fs::read_to_string(&pause)
            .expect("the fake podman started a pause process")
            .trim()
            .parse()
            .expect("pid");
        assert!(
            gone(pid),
            "the pause process {pid} detection started still runs"
        );
    }

    #[test]
    fn a_pause_process_that_ran_before_or_serves_a_container_is_left() {
        let d = tempfile::tempdir().expect("tmp");
        let podman = rootless_podman(d.path());
        let pause = d.path().join("pause.pid");
        let t = Duration::from_secs(10);
        // The volunteer's own pause process, running before detection.
        let mut theirs = Command::new("sleep").arg("300").spawn().expect("sleep");
        std::fs::write(&pause, theirs.id().to_string()).expect("pid file");
        assert!(detect_in(&[(podman.clone(), PODMAN)], t, Some(&pause)).is_some());
        assert_eq!(
            theirs.try_wait().ok(),
            Some(None),
            "the volunteer's was stopped"
        );
        let _ = theirs.kill();
        let _ = theirs.wait();
        // Started by detection, but a container runs meanwhile.
        std::fs::remove_file(&pause).expect("rm");
        std::fs::write(d.path().join("ps"), "4f2a9c1e0b3d\n").expect("ps");
        assert!(detect_in(&[(podman, PODMAN)], t, Some(&pause)).is_some());
        let pid: i32 = std::fs::read_to_string(&pause)
            .expect("pause pid")
            .trim()
            .parse()
            .expect("pid");
        assert!(
            live_pid(&pause).is_some(),
            "stopped under a running container"
        );
        // SAFETY: the stand-in this test's fake podman started.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }

    #[test]
    fn podman_first_then_docker_and_only_when_hello_world_runs() {
        let d = tempfile::tempdir().expect("tmp");
        let podman_ok = script(
            d.path(),
            "podman",
            "case \"$1\" in --version) echo 'podman version 4.3.1';; \
             run) echo 'Hello from Docker!';; esac\n",
        );
        let podman_no_containers = script(
            d.path(),
            "podman-rootless",
            "case \"$1\" in --version) echo 'podman version 4.3.1';; run) exit 125;; esac\n",
        );
        let docker = script(
            d.path(),
            "docker",
            "case \"$1\" in --version) echo 'Emulate Docker CLI'; \
             echo 'Docker version 24.0.5, build ced0996';; run) echo 'Hello from Docker!';; esac\n",
        );
        let t = Duration::from_secs(10);
        assert_eq!(
            detect_with(&[(podman_ok, PODMAN), (docker.clone(), DOCKER)], t),
            Some(("4.3.1".into(), PODMAN))
        );
        assert_eq!(
            detect_with(
                &[(podman_no_containers, PODMAN), (docker.clone(), DOCKER)],
                t
            ),
            Some(("24.0.5".into(), DOCKER)),
            "version on the second line (podman-docker style)"
        );
        assert_eq!(detect_with(&[(d.path().join("missing"), PODMAN)], t), None);
        let hangs = script(
            d.path(),
            "slow",
            "case \"$1\" in --version) echo 'podman version 1.0';; run) sleep 30;; esac\n",
        );
        let start = Instant::now();
        assert_eq!(
            detect_with(&[(hangs, PODMAN)], Duration::from_millis(500)),
            None
        );
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "a hung command is killed"
        );
    }
}
