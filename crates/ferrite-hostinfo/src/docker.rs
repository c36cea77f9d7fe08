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
    programs
        .iter()
        .find_map(|(p, t)| usable_version(p, timeout).map(|v| (v, *t)))
}

/// Podman, then Docker, found through `PATH`.
pub fn detect() -> Option<(String, u32)> {
    detect_with(
        &[
            (PathBuf::from("podman"), PODMAN),
            (PathBuf::from("docker"), DOCKER),
        ],
        COMMAND_TIMEOUT,
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
        use std::os::unix::fs::PermissionsExt as _;
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}")).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p
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
