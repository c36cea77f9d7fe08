//! Logging: `tracing` with the official client's log flags mapped onto targets.
//!
//! Every log flag `F` of `cc_config.xml` is the tracing target `ferrite::F`: the flags that are
//! on by default in BOINC (`task`, `file_xfer`, `sched_ops`) log at `info` and can be turned
//! off; every other flag (`cpu_sched_debug`, `work_fetch_debug`, …) turns on `debug` for its
//! target. `RUST_LOG` overrides all of it. On a terminal the format is human, with local times;
//! elsewhere (systemd's journal) each line starts with a syslog priority `<N>` and has no
//! timestamp, which journald adds itself.

use std::fmt;
use std::io::IsTerminal;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::reload;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

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
    handle: Option<reload::Handle<EnvFilter, tracing_subscriber::Registry>>,
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
        if let (Some(h), Ok(filter)) = (&self.handle, EnvFilter::try_new(directives)) {
            let _ = h.reload(filter);
        }
    }
}

/// Installs the global subscriber; returns the handle that changes its filter.
pub fn init() -> LogHandle {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(directives([])));
    let (filter, handle) = reload::Layer::new(filter);
    let terminal = std::io::stderr().is_terminal();
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(crate::rpc::messages::MessageLayer);
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
    }
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
        assert!(EnvFilter::try_new(directives([("work_fetch_debug", true)])).is_ok());
    }
}
