//! Logging: `tracing` with the official client's log flags mapped onto targets.
//!
//! Every log flag `F` of `cc_config.xml` is the tracing target `ferrite::F`: the flags that are
//! on by default in BOINC (`task`, `file_xfer`, `sched_ops`) log at `info` and can be turned
//! off; every other flag (`cpu_sched_debug`, `work_fetch_debug`, …) turns on `debug` for its
//! target. `RUST_LOG` (a list of `level` and `target=level` directives) overrides all of it. On a terminal the format is human, with local times;
//! elsewhere (systemd's journal) each line starts with a syslog priority `<N>` and has no
//! timestamp, which journald adds itself. With `--daemon` or `--redirectio` the log goes to
//! `stdoutdae.txt` in the data directory, as the official client's does, moved to
//! `stdoutdae.old` when it grows past `max_stdout_file_size` (cc_config; 2 MiB by default),
//! and stderr to `stderrdae.txt`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use std::fmt;
use std::io::IsTerminal;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::reload;
use tracing_subscriber::util::SubscriberInitExt;

/// Flags that BOINC turns on by default.
pub const DEFAULT_ON_FLAGS: [&str; 3] = ["task", "file_xfer", "sched_ops"];

/// The filter directives for a set of log flags (`(name, enabled)` pairs; flags not listed
/// keep their defaults).
pub fn directives<'a>(flags: impl IntoIterator<Item = (&'a str, bool)>) -> String {
    let mut out = vec!["info".to_owned()];
    for (name, on) in flags {
        let default_on = DEFAULT_ON_FLAGS.contains(&name);
        let level = match (on, default_on) {
            (true, true) => continue,
            (false, true) => "warn",
            (true, false) => "debug",
            (false, false) => continue,
        };
        out.push(format!("ferrite::{name}={level}"));
    }
    out.join(",")
}

/// Changes the log filter of a running daemon (after `cc_config.xml` is re-read).
#[derive(Clone)]
pub struct LogHandle {
    handle: Option<reload::Handle<Targets, tracing_subscriber::Registry>>,
    /// The size limit of `stdoutdae.txt`, when logging to it.
    max_file_size: Option<Arc<AtomicU64>>,
}

impl fmt::Debug for LogHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogHandle").finish_non_exhaustive()
    }
}

impl LogHandle {
    /// Applies `directives`, unless `RUST_LOG` is set (it wins).
    pub fn set(&self, directives: &str) {
        if std::env::var_os("RUST_LOG").is_some() {
            return;
        }
        if let (Some(h), Ok(filter)) = (&self.handle, directives.parse::<Targets>()) {
            let _ = h.reload(filter);
        }
    }

    /// Sets the size at which `stdoutdae.txt` is moved to `stdoutdae.old` (cc_config
    /// `max_stdout_file_size`; 0 or less keeps the default).
    pub fn set_max_file_size(&self, bytes: f64) {
        if let Some(m) = &self.max_file_size {
            let v = if bytes >= 1.0 {
                bytes as u64
            } else {
                DEFAULT_MAX_STDOUT_SIZE
            };
            m.store(v, Ordering::Relaxed);
        }
    }
}

/// The official client's log file in its data directory.
pub const STDOUT_FILE: &str = "stdoutdae.txt";
/// Where its stderr goes.
pub const STDERR_FILE: &str = "stderrdae.txt";
/// `stdoutdae.txt` past its size limit.
pub const STDOUT_OLD: &str = "stdoutdae.old";
/// The official default of `max_stdout_file_size` (2 MiB).
pub const DEFAULT_MAX_STDOUT_SIZE: u64 = 2048 * 1024;

/// The log file: appends, and moves itself to `stdoutdae.old` when past its limit.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    old: PathBuf,
    file: File,
    size: u64,
    max: Arc<AtomicU64>,
}

impl RotatingFile {
    /// Opens (appending) `stdoutdae.txt` in `dir`.
    pub fn open(dir: &Path, max: Arc<AtomicU64>) -> io::Result<RotatingFile> {
        let path = dir.join(STDOUT_FILE);
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            old: dir.join(STDOUT_OLD),
            path,
            file,
            size,
            max,
        })
    }

    fn rotate(&mut self) -> io::Result<()> {
        std::fs::rename(&self.path, &self.old)?;
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.size += n as u64;
        if self.size > self.max.load(Ordering::Relaxed) {
            // A failed rotation keeps appending: the log is never lost for it.
            let _ = self.rotate();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// The log files `--daemon` and `--redirectio` write, opened before the process detaches
/// (so a failure is said on the terminal).
#[derive(Debug)]
pub struct LogFiles {
    stdout: RotatingFile,
    stderr: File,
    max: Arc<AtomicU64>,
}

impl LogFiles {
    /// Opens `stdoutdae.txt` and `stderrdae.txt` in `dir` (created if missing).
    pub fn open(dir: &Path) -> io::Result<LogFiles> {
        std::fs::create_dir_all(dir)?;
        let max = Arc::new(AtomicU64::new(DEFAULT_MAX_STDOUT_SIZE));
        let stdout = RotatingFile::open(dir, max.clone())?;
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(STDERR_FILE))?;
        Ok(LogFiles {
            stdout,
            stderr,
            max,
        })
    }
}

/// Installs the global subscriber logging to stderr; returns the handle that changes its
/// filter.
pub fn init() -> LogHandle {
    init_with(None)
}

/// Installs the global subscriber; returns the handle that changes its filter. With `files`,
/// the log goes there (and stderr to `stderrdae.txt`); otherwise to stderr.
pub fn init_with(files: Option<LogFiles>) -> LogHandle {
    let filter = env_filter().unwrap_or_else(|| default_filter(&directives([])));
    let (filter, handle) = reload::Layer::new(filter);
    let terminal = std::io::stderr().is_terminal();
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(crate::messages::MessageLayer);
    if let Some(files) = files {
        // Panics and anything else written to stderr land beside the log.
        let _ = nix::unistd::dup2_stderr(&files.stderr);
        let max = files.max.clone();
        let result = registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(Mutex::new(files.stdout))
                    .with_ansi(false)
                    .with_target(true),
            )
            .try_init();
        return LogHandle {
            handle: result.is_ok().then_some(handle),
            max_file_size: Some(max),
        };
    }
    let result = if terminal {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_target(true),
            )
            .try_init()
    } else {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(false)
                    .event_format(JournalFormat),
            )
            .try_init()
    };
    LogHandle {
        handle: result.is_ok().then_some(handle),
        max_file_size: None,
    }
}

/// The filter `RUST_LOG` asks for, when it is set and reads as one (a comma-separated list
/// of `level` and `target=level` directives; span and field filters are not supported).
fn env_filter() -> Option<Targets> {
    let value = std::env::var("RUST_LOG").ok()?;
    match value.parse::<Targets>() {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("ferrited: RUST_LOG={value:?} ignored: {e}");
            None
        }
    }
}

/// The filter of the log flags' directives (always valid: [`directives`] writes them).
fn default_filter(directives: &str) -> Targets {
    directives
        .parse()
        .unwrap_or_else(|_| Targets::new().with_default(Level::INFO))
}

/// One line per event: `<priority>target: message fields`, as journald reads stderr.
struct JournalFormat;

impl<S, N> FormatEvent<S, N> for JournalFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let prio = match *event.metadata().level() {
            Level::ERROR => 3,
            Level::WARN => 4,
            Level::INFO => 6,
            Level::DEBUG | Level::TRACE => 7,
        };
        let target = event.metadata().target();
        let target = target.strip_prefix("ferrite::").unwrap_or(target);
        write!(writer, "<{prio}>[{target}] ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_map_to_targets() {
        assert_eq!(directives([]), "info");
        assert_eq!(
            directives([
                ("task", false),
                ("sched_ops", true),
                ("cpu_sched_debug", true),
                ("x", false)
            ]),
            "info,ferrite::task=warn,ferrite::cpu_sched_debug=debug"
        );
        let t: Targets = directives([("work_fetch_debug", true), ("task", false)])
            .parse()
            .expect("directives parse");
        assert!(t.would_enable("ferrite::work_fetch_debug", &Level::DEBUG));
        assert!(!t.would_enable("ferrite::task", &Level::INFO));
        assert!(t.would_enable("ferrite::task", &Level::WARN));
        assert!(t.would_enable("ferrite_daemon", &Level::INFO));
        assert!(!t.would_enable("ferrite_daemon", &Level::DEBUG));
    }

    #[test]
    fn the_log_file_moves_to_old_past_its_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let max = Arc::new(AtomicU64::new(100));
        let mut f = RotatingFile::open(dir.path(), max.clone()).expect("open");
        f.write_all(&[b'a'; 60]).expect("write");
        assert!(!dir.path().join(STDOUT_OLD).exists());
        f.write_all(&[b'b'; 60]).expect("write");
        let old = std::fs::read(dir.path().join(STDOUT_OLD)).expect("old");
        assert_eq!(old.len(), 120);
        f.write_all(b"new\n").expect("write");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(STDOUT_FILE)).expect("txt"),
            "new\n"
        );
        // Appends to an existing file, counting what it held.
        drop(f);
        max.store(10, Ordering::Relaxed);
        let mut g = RotatingFile::open(dir.path(), max).expect("reopen");
        g.write_all(b"0123456789").expect("write");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(STDOUT_OLD)).expect("old"),
            "new\n0123456789"
        );
    }
}
