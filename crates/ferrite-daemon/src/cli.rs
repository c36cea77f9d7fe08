//! `ferrited`'s command line: the official client's options, spelled as it spells them
//! (`--gui_rpc_port`) and in kebab case (`--gui-rpc-port`).

use std::path::PathBuf;

use clap::Parser;

/// Ferrite: a BOINC volunteer-computing client.
#[derive(Debug, Clone, Parser, Default)]
#[command(name = "ferrited", version, about, long_about = None)]
pub struct Options {
    /// Data directory (the official client's `--dir`); default: the current directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// GUI RPC TCP port.
    #[arg(long = "gui_rpc_port", alias = "gui-rpc-port", value_name = "PORT")]
    pub gui_rpc_port: Option<u16>,

    /// Allow GUI RPC connections from other hosts (then only those in `remote_hosts.cfg`,
    /// if it exists).
    #[arg(long = "allow_remote_gui_rpc", alias = "allow-remote-gui-rpc")]
    pub allow_remote_gui_rpc: bool,

    /// Serve GUI RPC on a Unix domain socket as well.
    #[arg(long = "gui_rpc_unix_domain", alias = "gui-rpc-unix-domain")]
    pub gui_rpc_unix_domain: bool,

    /// Use no GPUs.
    #[arg(long = "no_gpus", alias = "no-gpus")]
    pub no_gpus: bool,

    /// Print the detected hardware (CPUs, memory, GPUs) and exit.
    #[arg(long = "detect_gpus", alias = "detect-gpus")]
    pub detect_gpus: bool,

    /// Attach to a project with an account key, then run.
    #[arg(
        long = "attach_project",
        alias = "attach-project",
        num_args = 2,
        value_names = ["URL", "KEY"]
    )]
    pub attach_project: Option<Vec<String>>,

    /// Detach from a project, then run.
    #[arg(long = "detach_project", alias = "detach-project", value_name = "URL")]
    pub detach_project: Option<String>,

    /// Do not run the CPU benchmarks (defaults are used).
    #[arg(long = "skip_cpu_benchmarks", alias = "skip-cpu-benchmarks")]
    pub skip_cpu_benchmarks: bool,

    /// Run the CPU benchmarks at start-up.
    #[arg(long = "run_cpu_benchmarks", alias = "run-cpu-benchmarks")]
    pub run_cpu_benchmarks: bool,

    /// Exit when there are no tasks left.
    #[arg(long = "exit_when_idle", alias = "exit-when-idle")]
    pub exit_when_idle: bool,

    /// Exit after the first task finishes.
    #[arg(long = "exit_after_finish", alias = "exit-after-finish")]
    pub exit_after_finish: bool,

    /// Abort all tasks when exiting.
    #[arg(long = "abort_jobs_on_exit", alias = "abort-jobs-on-exit")]
    pub abort_jobs_on_exit: bool,

    /// Fetch only enough work to keep resources busy (no buffer).
    #[arg(long = "fetch_minimal_work", alias = "fetch-minimal-work")]
    pub fetch_minimal_work: bool,

    /// Run apps at normal priority.
    #[arg(long = "no_priority_change", alias = "no-priority-change")]
    pub no_priority_change: bool,

    /// Accept app files without a code signature (for testing projects only).
    #[arg(long = "unsigned_apps_ok", alias = "unsigned-apps-ok")]
    pub unsigned_apps_ok: bool,

    /// Detach from the terminal and run in the background.
    #[arg(long)]
    pub daemon: bool,

    /// Ferrite only: serve OpenMetrics (Prometheus) text on `127.0.0.1:PORT/metrics`; 0 (the
    /// default) leaves it off unless `cc_config.xml` sets `<ferrite_metrics_port>`.
    #[arg(
        long = "metrics_port",
        alias = "metrics-port",
        value_name = "PORT",
        default_value_t = 0
    )]
    pub metrics_port: u16,
}

impl Options {
    /// The data directory to use.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(|| PathBuf::from("."))
    }

    /// The `--attach_project` pair, if given.
    pub fn attach(&self) -> Option<(&str, &str)> {
        match self.attach_project.as_deref() {
            Some([url, key]) => Some((url.as_str(), key.as_str())),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn official_and_kebab_spellings() {
        let a = Options::try_parse_from([
            "ferrited",
            "--dir",
            "/d",
            "--gui_rpc_port",
            "31417",
            "--attach_project",
            "http://p/",
            "KEY",
            "--no_gpus",
            "--skip-cpu-benchmarks",
            "--exit_when_idle",
        ])
        .expect("parses");
        assert_eq!(a.data_dir(), PathBuf::from("/d"));
        assert_eq!(a.gui_rpc_port, Some(31417));
        assert_eq!(a.attach(), Some(("http://p/", "KEY")));
        assert!(a.no_gpus && a.skip_cpu_benchmarks && a.exit_when_idle);
        let b =
            Options::try_parse_from(["ferrited", "--gui-rpc-port", "1", "--detach-project", "u"])
                .expect("parses");
        assert_eq!(b.gui_rpc_port, Some(1));
        assert_eq!(b.detach_project.as_deref(), Some("u"));
    }

    #[test]
    fn metrics_port_in_both_spellings_and_off_by_default() {
        let none = Options::try_parse_from(["ferrited"]).expect("parses");
        assert_eq!(none.metrics_port, 0);
        let a = Options::try_parse_from(["ferrited", "--metrics_port", "9187"]).expect("parses");
        assert_eq!(a.metrics_port, 9187);
        let b = Options::try_parse_from(["ferrited", "--metrics-port", "9188"]).expect("parses");
        assert_eq!(b.metrics_port, 9188);
        assert!(Options::try_parse_from(["ferrited", "--metrics_port", "65536"]).is_err());
        assert!(Options::try_parse_from(["ferrited", "--metrics_port", "x"]).is_err());
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(Options::try_parse_from(["ferrited", "--gui_rpc_port", "70000"]).is_err());
        assert!(Options::try_parse_from(["ferrited", "--attach_project", "only-url"]).is_err());
    }
}
