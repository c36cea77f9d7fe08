//! GPU detection in a short-lived child process, as the official client does it
//! (`client/gpu_detect.cpp`: the client runs itself with `--detect_gpus`). Loading NVML, the
//! OpenCL ICD loader and every installed driver (PoCL brings LLVM and Clang: some 70 MB)
//! happens in the child, so a driver's memory, threads, signal handlers, crash or hang never
//! reach the daemon.
//!
//! The daemon runs its own binary with [`GPU_SCAN_ARG`]; the child calls [`child_main`],
//! which writes one `<gpu_scan>` document (`ferrite_proto::host::GpuScan`) on its standard
//! output and exits. [`probe_in_child`] waits for it at most a time limit, kills the child's
//! whole process group when it runs past it, and turns a crash, a hang or an unreadable
//! answer into a probe with no GPU whose status says why.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ferrite_proto::host::GpuScan;

use crate::gpu::{self, GpuConfig, GpuProbe};
use crate::opencl::OPENCL_LIBRARY_ENV;
use crate::NVML_LIBRARY_ENV;

/// The first argument that makes the daemon's binary run as the GPU detection child.
pub const GPU_SCAN_ARG: &str = "--ferrite_gpu_scan";

/// The child's second argument when OpenCL must not be looked at (`<no_opencl>`).
const NO_OPENCL_ARG: &str = "--no_opencl";

/// Environment variable giving the child's time limit in seconds (tests shorten it).
pub const GPU_SCAN_TIMEOUT_ENV: &str = "FERRITE_GPU_SCAN_TIMEOUT";

/// The official client's time limit for its detection child, seconds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of the child's output read: a scan of 16 platforms of 64 devices fits easily.
const MAX_OUTPUT: u64 = 16 << 20;

/// The time limit: `$FERRITE_GPU_SCAN_TIMEOUT` seconds when set and valid, else
/// [`DEFAULT_TIMEOUT`].
pub fn timeout_from_env() -> Duration {
    std::env::var(GPU_SCAN_TIMEOUT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64)
}

/// The child's work: `args` are the arguments after [`GPU_SCAN_ARG`]. Scans the drivers
/// (libraries from `$FERRITE_NVML_LIBRARY` and `$FERRITE_OPENCL_LIBRARY` when set) and
/// returns the document to write on standard output.
pub fn child_main(args: &[String]) -> String {
    let no_opencl = args.iter().any(|a| a == NO_OPENCL_ARG);
    gpu::scan_gpus(no_opencl, None, None).to_xml()
}

/// Runs GPU detection in a child: `exe` (the daemon's own binary) started with
/// [`GPU_SCAN_ARG`], the library paths passed in its environment. Waits at most `timeout`.
/// Never fails: a child that cannot start, crashes, runs too long or answers nothing
/// readable gives [`gpu::failed_probe`] with the reason.
pub fn probe_in_child(
    exe: &Path,
    config: &GpuConfig,
    nvml_library: Option<&Path>,
    opencl_library: Option<&Path>,
    timeout: Duration,
) -> GpuProbe {
    if config.no_gpus {
        return gpu::disabled_probe(config);
    }
    match run_child(exe, config.no_opencl, nvml_library, opencl_library, timeout) {
        Ok(scan) => gpu::probe_from_scan(config, scan),
        Err(why) => gpu::failed_probe(config, &why),
    }
}

fn run_child(
    exe: &Path,
    no_opencl: bool,
    nvml_library: Option<&Path>,
    opencl_library: Option<&Path>,
    timeout: Duration,
) -> Result<GpuScan, String> {
    let mut cmd = Command::new(exe);
    cmd.arg(GPU_SCAN_ARG)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if no_opencl {
        cmd.arg(NO_OPENCL_ARG);
    }
    if let Some(p) = nvml_library {
        cmd.env(NVML_LIBRARY_ENV, p);
    }
    if let Some(p) = opencl_library {
        cmd.env(OPENCL_LIBRARY_ENV, p);
    }
    {
        use std::os::unix::process::CommandExt;
        // Its own process group, so a driver's helper processes go with it when killed.
        cmd.process_group(0);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        // The reader may outlive a killed child only while a grandchild holds the pipe; it is
        // not waited for.
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let r = out.take(MAX_OUTPUT).read_to_end(&mut buf).map(|_| buf);
            let _ = tx.send(r);
        });
    }
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => {
                kill_group(pid);
                let _ = child.wait();
                return Err(format!("cannot wait for the detection process: {e}"));
            }
        }
        if Instant::now() >= deadline {
            kill_group(pid);
            let _ = child.wait();
            return Err(format!(
                "process did not finish in {:.0} s and was killed",
                timeout.as_secs_f64()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Its process group is not signalled once it has been reaped: the id may be reused.
    if !status.success() {
        return Err(describe_exit(status));
    }
    let out = match rx.recv_timeout(Duration::from_secs(1)) {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => return Err(format!("cannot read the detection process' answer: {e}")),
        Err(_) => return Err("the detection process' answer did not end".into()),
    };
    let text = String::from_utf8(out).map_err(|_| "the answer is not UTF-8".to_owned())?;
    GpuScan::parse(&text, "GPU detection answer")
        .map(|p| p.value)
        .map_err(|e| format!("unreadable answer: {e}"))
}

fn kill_group(pid: libc::pid_t) {
    // SAFETY: kill with a negative pid signals the child's own process group only.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

/// The official client's wording: `process exited with status 1: …`, `process was
/// terminated by signal 11`.
fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        format!("process was terminated by signal {sig}")
    } else if let Some(code) = status.code() {
        format!(
            "process exited with status {code}: {}",
            std::io::Error::from_raw_os_error(code)
        )
    } else {
        format!("unknown status {status}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, dir: &Path) -> std::path::PathBuf {
        let p = dir.join("child.sh");
        crate::test_support::write_script(&p, &format!("{script}\n"));
        p
    }

    #[test]
    fn an_answer_is_read_and_turned_into_a_probe() {
        let dir = tempfile::tempdir().expect("tmp");
        let scan = GpuScan {
            nvml: ferrite_proto::host::LibraryAnswer::LibraryMissing("no driver".into()),
            opencl: ferrite_proto::host::LibraryAnswer::NoPlatforms,
            ..GpuScan::default()
        };
        let doc = dir.path().join("answer.xml");
        std::fs::write(&doc, scan.to_xml()).expect("write");
        let exe = sh(
            &format!(
                "[ \"$1\" = {GPU_SCAN_ARG} ] || exit 3\ncat {}",
                doc.display()
            ),
            dir.path(),
        );
        let p = probe_in_child(
            &exe,
            &GpuConfig::default(),
            None,
            None,
            Duration::from_secs(60),
        );
        assert_eq!(
            p.status,
            gpu::NvmlStatus::LibraryMissing("no driver".into()),
            "{p:?}"
        );
        assert_eq!(p.opencl.status, crate::OpenclStatus::NoPlatforms);
        assert!(p.should_retry());
    }

    #[test]
    fn a_crash_a_hang_and_garbage_are_failures_that_say_why() {
        let dir = tempfile::tempdir().expect("tmp");
        let cases = [
            ("kill -SEGV $$", "terminated by signal 11"),
            ("exec sleep 1000", "did not finish in 1 s and was killed"),
            ("echo '<gpu_scan><nvml>'", "unreadable answer"),
            ("exit 2", "exited with status 2"),
        ];
        for (script, want) in cases {
            let exe = sh(script, dir.path());
            let p = probe_in_child(
                &exe,
                &GpuConfig::default(),
                None,
                None,
                Duration::from_secs(1),
            );
            match &p.status {
                gpu::NvmlStatus::DetectionFailed(why) => {
                    assert!(why.contains(want), "{script}: {why}")
                }
                other => panic!("{script}: {other:?}"),
            }
            assert!(!p.should_retry(), "a failed child is not run again");
            assert!(p.coprocs.is_empty());
        }
    }
}
