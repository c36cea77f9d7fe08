//! Starting an app process and signalling or reaping it.
//!
//! Each app becomes the leader of a new session and process group (so a signal to the group
//! reaches every descendant that stayed in it, and a terminal Ctrl-C on the daemon does not
//! reach the apps). The child gets the signal state the BOINC API needs (empty mask, default
//! dispositions, so SIGALRM works) and idle priority unless told otherwise.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::slot::STDERR_FILE;

/// How the app's CPU priority is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// CPU job: nice 19 and SCHED_IDLE.
    CpuJob,
    /// GPU job, job using less than one CPU, or wrapper: nice 10, normal policy.
    HighPriorityJob,
    /// A nice value the volunteer chose (`cc_config` `process_priority` or
    /// `process_priority_special`); nice 19 also takes the idle scheduling class.
    Nice(i32),
    /// Leave the daemon's priority (cc_config `no_priority_change`).
    Unchanged,
}

/// The `cc_config.xml` settings that choose apps' priorities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityConfig {
    /// `no_priority_change` (or `--no_priority_change`): apps keep the daemon's priority.
    pub no_priority_change: bool,
    /// `process_priority`, for CPU jobs: 0 lowest … 5 realtime, -1 unspecified.
    pub process_priority: i32,
    /// `process_priority_special`, for GPU jobs and jobs using less than one CPU.
    pub process_priority_special: i32,
}

impl Default for PriorityConfig {
    fn default() -> PriorityConfig {
        PriorityConfig {
            no_priority_change: false,
            process_priority: -1,
            process_priority_special: -1,
        }
    }
}

/// The nice value of a `process_priority` level, as the official client maps them on Unix
/// (0 lowest: 19, 1 low: 10, 2 normal: 0, 3 high: -10, 4 highest: -15, 5 realtime: -20);
/// `None` for -1 (unspecified) and unknown levels. Negative values need privileges; without
/// them the app keeps the daemon's priority.
pub fn nice_of_level(level: i32) -> Option<i32> {
    match level {
        0 => Some(19),
        1 => Some(10),
        2 => Some(0),
        3 => Some(-10),
        4 => Some(-15),
        5 => Some(-20),
        _ => None,
    }
}

impl Priority {
    /// The priority for a job: `no_priority_change` wins; then the configured level for its
    /// kind (GPU or < 1 CPU: `process_priority_special`, else `process_priority`); else GPU or
    /// < 1 CPU gives nice 10 and CPU jobs nice 19 in the idle class.
    pub fn for_job(uses_gpu: bool, avg_ncpus: f64, cfg: PriorityConfig) -> Priority {
        let special = uses_gpu || avg_ncpus < 1.0;
        let level = if special {
            cfg.process_priority_special
        } else {
            cfg.process_priority
        };
        if cfg.no_priority_change {
            Priority::Unchanged
        } else if let Some(nice) = nice_of_level(level) {
            Priority::Nice(nice)
        } else if special {
            Priority::HighPriorityJob
        } else {
            Priority::CpuJob
        }
    }
}

/// What to start.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    /// The executable (BOINC passes the physical file in the project dir, relative to the slot:
    /// `../../projects/P/prog`). A relative path is taken relative to the slot directory.
    pub program: PathBuf,
    /// Arguments after `argv[0]`.
    pub args: Vec<String>,
    /// The slot directory; becomes the working directory and holds `stderr.txt`.
    pub slot_dir: PathBuf,
    /// Extra environment variables (the daemon's environment is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// Priority class.
    pub priority: Priority,
    /// A Landlock ruleset the child enters before exec ([`crate::confine::Prepared::raw_fd`]);
    /// it must stay open until `spawn` returns.
    pub confine: Option<std::os::fd::RawFd>,
}

/// Errors while starting an app.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// `stderr.txt` could not be opened.
    #[error("cannot open stderr file in {0}")]
    Stderr(PathBuf, #[source] io::Error),
    /// fork or exec failed (exec errors come back from the child through std's error pipe).
    #[error("cannot execute {0}")]
    Exec(PathBuf, #[source] io::Error),
}

/// Starts the app; returns its PID (also its process group and session ID).
pub fn spawn(req: &SpawnRequest) -> Result<i32, SpawnError> {
    let stderr_path = req.slot_dir.join(STDERR_FILE);
    let stderr = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&stderr_path)
        .map_err(|e| SpawnError::Stderr(req.slot_dir.clone(), e))?;
    let program = if req.program.is_absolute() {
        req.program.clone()
    } else {
        req.slot_dir.join(&req.program)
    };
    let mut cmd = Command::new(&program);
    // argv[0] as BOINC passes it (the path as given).
    cmd.arg0(req.program.as_os_str())
        .args(&req.args)
        .current_dir(&req.slot_dir)
        .envs(req.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr));
    let priority = req.priority;
    let confine = req.confine;
    // SAFETY: the closure runs in the forked child before exec and only calls
    // async-signal-safe functions (setsid, sigprocmask, sigaction, close_range, getrlimit,
    // fcntl, setpriority, sched_setscheduler, getuid, prctl, landlock_restrict_self); it
    // allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            child_setup(priority)?;
            // Last, so that nothing above needs a right the app does not get.
            match confine {
                Some(fd) => crate::confine::restrict_self(fd),
                None => Ok(()),
            }
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| SpawnError::Exec(program.clone(), e))?;
    // The Child handle is dropped without waiting: the task reaps the PID with wait4.
    Ok(child.id() as i32)
}

fn child_setup(priority: Priority) -> io::Result<()> {
    // SAFETY: plain libc calls on this (child) process; every pointer passed is to a local.
    unsafe {
        if libc::setsid() < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        // Default disposition for every signal, through the raw system call so that the
        // signals glibc reserves for itself (32, 33), which its wrapper refuses, are reset too.
        // An all-zero kernel sigaction is SIG_DFL with no flags and an empty mask.
        let dfl = [0u64; 4];
        for sig in 1..=64 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                // Errors (invalid signal numbers) are harmless here.
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    sig,
                    dfl.as_ptr(),
                    std::ptr::null_mut::<u64>(),
                    8usize,
                );
            }
        }
        // Nothing the daemon inherited (a service manager's sockets, a shell's redirections)
        // or opened reaches the app beyond its three standard streams: every other
        // descriptor is closed at exec. Close-on-exec rather than closed now, so that std's
        // pipe that reports a failed exec works until the exec.
        if libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) != 0
        {
            // Kernels before 5.11: one descriptor at a time, up to the limit.
            let mut lim: libc::rlimit = std::mem::zeroed();
            let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                lim.rlim_cur.min(1 << 20)
            } else {
                1024
            };
            for fd in 3..libc::c_int::try_from(max).unwrap_or(1024) {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                    libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                }
            }
        }
        match priority {
            Priority::Unchanged => {}
            Priority::HighPriorityJob => {
                libc::setpriority(libc::PRIO_PROCESS, 0, 10);
            }
            Priority::CpuJob => {
                libc::setpriority(libc::PRIO_PROCESS, 0, 19);
                let param = libc::sched_param { sched_priority: 0 };
                libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
            }
            Priority::Nice(nice) => {
                // Failing (a negative value without CAP_SYS_NICE) leaves the priority as is.
                libc::setpriority(libc::PRIO_PROCESS, 0, nice);
                if nice >= 19 {
                    let param = libc::sched_param { sched_priority: 0 };
                    libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
                }
            }
        }
    }
    Ok(())
}

/// Sends `sig` to process group `pgid`. A group that no longer exists counts as success
/// (returns `Ok(false)`); `Ok(true)` means at least one process got the signal.
pub fn signal_group(pgid: i32, sig: i32) -> io::Result<bool> {
    if pgid <= 1 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    deliver(-pgid, sig)
}

/// Sends `sig` to one process; a process that is gone counts as success (`Ok(false)`).
pub fn signal_pid(pid: i32, sig: i32) -> io::Result<bool> {
    if pid <= 1 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    deliver(pid, sig)
}

/// `kill(target, sig)` (a negative target is a process group), with "no such process"
/// as `Ok(false)`.
fn deliver(target: i32, sig: i32) -> io::Result<bool> {
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(target, sig) } == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// How a reaped process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessExit {
    /// `exit(code)`.
    Exited(i32),
    /// Killed by a signal.
    Signaled(i32),
    /// Anything else (raw wait status).
    Other(i32),
}

impl ProcessExit {
    /// Decodes a raw wait status.
    pub fn from_raw(status: i32) -> ProcessExit {
        if libc::WIFEXITED(status) {
            ProcessExit::Exited(libc::WEXITSTATUS(status))
        } else if libc::WIFSIGNALED(status) {
            ProcessExit::Signaled(libc::WTERMSIG(status))
        } else {
            ProcessExit::Other(status)
        }
    }
}

/// The result of reaping a child.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reaped {
    /// How it ended.
    pub exit: ProcessExit,
    /// CPU seconds of the process and its waited-for children (from rusage).
    pub cpu_time: f64,
    /// Peak resident set of the process, bytes (from rusage).
    pub max_rss: u64,
}

/// Whether child `pid` has exited, without reaping it: while it stays a zombie its PID (and
/// so its process-group ID) cannot be reused, so the group can still be signalled safely.
pub fn has_exited(pid: i32) -> io::Result<bool> {
    // SAFETY: siginfo_t is plain data; waitid fills it. WNOHANG|WNOWAIT neither blocks nor reaps.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: pointer to a local.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: si_pid is valid for a child-state siginfo; zero means "no child changed state".
    Ok(unsafe { info.si_pid() } != 0)
}

/// Reaps `pid` if it has exited (never blocks). `Ok(None)` while it runs.
pub fn try_reap(pid: i32) -> io::Result<Option<Reaped>> {
    let mut status = 0;
    // SAFETY: rusage is plain data and fully written by wait4 on success.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pointers to locals; WNOHANG keeps the call non-blocking.
    let rc = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
    match rc {
        0 => Ok(None),
        r if r == pid => {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            Ok(Some(Reaped {
                exit: ProcessExit::from_raw(status),
                cpu_time: tv(ru.ru_utime) + tv(ru.ru_stime),
                max_rss: (ru.ru_maxrss.max(0) as u64) * 1024,
            }))
        }
        _ => Err(io::Error::last_os_error()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn priority_choice() {
        let dflt = PriorityConfig::default();
        assert_eq!(Priority::for_job(false, 1.0, dflt), Priority::CpuJob);
        assert_eq!(
            Priority::for_job(true, 1.0, dflt),
            Priority::HighPriorityJob
        );
        assert_eq!(
            Priority::for_job(false, 0.5, dflt),
            Priority::HighPriorityJob
        );
        let unchanged = PriorityConfig {
            no_priority_change: true,
            process_priority: 2,
            process_priority_special: 2,
        };
        assert_eq!(
            Priority::for_job(false, 1.0, unchanged),
            Priority::Unchanged
        );
        // Configured levels, each for its kind of job.
        let cfg = PriorityConfig {
            no_priority_change: false,
            process_priority: 1,
            process_priority_special: 2,
        };
        assert_eq!(Priority::for_job(false, 1.0, cfg), Priority::Nice(10));
        assert_eq!(Priority::for_job(true, 1.0, cfg), Priority::Nice(0));
        assert_eq!(Priority::for_job(false, 0.5, cfg), Priority::Nice(0));
        let only_cpu = PriorityConfig {
            process_priority: 0,
            ..PriorityConfig::default()
        };
        assert_eq!(Priority::for_job(false, 1.0, only_cpu), Priority::Nice(19));
        assert_eq!(
            Priority::for_job(true, 1.0, only_cpu),
            Priority::HighPriorityJob
        );
        assert_eq!(
            (0..=6).map(nice_of_level).collect::<Vec<_>>(),
            [
                Some(19),
                Some(10),
                Some(0),
                Some(-10),
                Some(-15),
                Some(-20),
                None
            ]
        );
        assert_eq!(nice_of_level(-1), None);
    }

    #[test]
    fn signalling_a_gone_group_is_success() {
        let dir = tempfile::tempdir().unwrap();
        let pid = spawn(&SpawnRequest {
            program: "/bin/true".into(),
            args: vec![],
            slot_dir: dir.path().to_owned(),
            env: vec![],
            priority: Priority::Unchanged,
            confine: None,
        })
        .unwrap();
        let reaped = loop {
            if let Some(r) = try_reap(pid).unwrap() {
                break r;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(reaped.exit, ProcessExit::Exited(0));
        assert!(!signal_group(pid, libc::SIGKILL).unwrap());
        assert!(!signal_pid(pid, libc::SIGKILL).unwrap());
    }

    /// A descriptor the daemon holds without close-on-exec (as one inherited from a shell
    /// or a service manager) is not open in the app.
    #[test]
    fn descriptors_beyond_the_standard_three_do_not_reach_the_app() {
        use std::os::fd::AsRawFd as _;
        let dir = tempfile::tempdir().unwrap();
        let held = std::fs::File::create(dir.path().join("held")).unwrap();
        // SAFETY: dup of a descriptor this test owns; the copy is closed below.
        let leaked = unsafe { libc::dup(held.as_raw_fd()) };
        assert!(leaked > 2);
        // SAFETY: fcntl on a descriptor this test owns.
        let flags = unsafe { libc::fcntl(leaked, libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, 0, "dup leaves close-on-exec off");
        let script = format!(
            "if [ -e /proc/$$/fd/{leaked} ]; then echo inherited >&2; else echo closed >&2; fi"
        );
        let pid = spawn(&SpawnRequest {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script],
            slot_dir: dir.path().to_owned(),
            env: vec![],
            priority: Priority::Unchanged,
            confine: None,
        })
        .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let reaped = loop {
            if let Some(r) = try_reap(pid).unwrap() {
                break r;
            }
            assert!(std::time::Instant::now() < deadline, "the app did not exit");
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        // SAFETY: closes the copy made above.
        unsafe { libc::close(leaked) };
        assert_eq!(reaped.exit, ProcessExit::Exited(0));
        let said = std::fs::read_to_string(dir.path().join(STDERR_FILE)).unwrap();
        assert_eq!(said.trim(), "closed");
    }

    #[test]
    fn exec_failure_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = spawn(&SpawnRequest {
            program: "no_such_program".into(),
            args: vec![],
            slot_dir: dir.path().to_owned(),
            env: vec![],
            priority: Priority::Unchanged,
            confine: None,
        })
        .unwrap_err();
        assert!(matches!(err, SpawnError::Exec(..)));
    }
}
