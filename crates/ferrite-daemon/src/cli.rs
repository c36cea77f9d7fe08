//! `ferrited`'s command line: every option of the official client, spelled as it spells them
//! (`--gui_rpc_port`, and the old single-dash `-gui_rpc_port`) and in kebab case
//! (`--gui-rpc-port`). Options that mean nothing on Linux or in Ferrite are accepted and
//! named in the log ([`Options::not_applicable`]), never refused.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;

/// Ferrite: a BOINC volunteer-computing client.
///
/// Takes the official client's options (`--opt`, `-opt` and `--opt-with-dashes` alike).
#[derive(Debug, Clone, Parser, Default)]
#[command(name = "ferrited", version, about, long_about = None, args_override_self = true)]
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

    /// Serve GUI RPC only on the Unix domain socket `boinc_socket` (no TCP port).
    #[arg(long = "gui_rpc_unix_domain", alias = "gui-rpc-unix-domain")]
    pub gui_rpc_unix_domain: bool,

    /// Serve no GUI RPC at all: no TCP port, no Unix socket.
    #[arg(long = "no_gui_rpc", alias = "no-gui-rpc")]
    pub no_gui_rpc: bool,

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

    /// Reset a project (its tasks and files are dropped, new work is asked for), then run.
    #[arg(long = "reset_project", alias = "reset-project", value_name = "URL")]
    pub reset_project: Option<String>,

    /// Contact a project at start-up (to update preferences and report), then run.
    #[arg(long = "update_prefs", alias = "update-prefs", value_name = "URL")]
    pub update_prefs: Option<String>,

    /// Log the attached projects (URL, computer ID, resource share) at start-up.
    #[arg(long = "show_projects", alias = "show-projects")]
    pub show_projects: bool,

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

    /// Exit (saving the state) right before an app would start.
    #[arg(long = "exit_before_start", alias = "exit-before-start")]
    pub exit_before_start: bool,

    /// Exit (saving the state) right before an upload would start.
    #[arg(long = "exit_before_upload", alias = "exit-before-upload")]
    pub exit_before_upload: bool,

    /// Exit N seconds after an app starts.
    #[arg(
        long = "exit_after_app_start",
        alias = "exit-after-app-start",
        value_name = "N"
    )]
    pub exit_after_app_start: Option<u64>,

    /// Abort all tasks when exiting.
    #[arg(long = "abort_jobs_on_exit", alias = "abort-jobs-on-exit")]
    pub abort_jobs_on_exit: bool,

    /// Fetch one job per device at most, and no more once the client had or asked for work
    /// (as cc_config `<fetch_minimal_work>`).
    #[arg(long = "fetch_minimal_work", alias = "fetch-minimal-work")]
    pub fetch_minimal_work: bool,

    /// Run apps at normal priority.
    #[arg(long = "no_priority_change", alias = "no-priority-change")]
    pub no_priority_change: bool,

    /// Accept app files without a code signature (for testing projects only).
    #[arg(long = "unsigned_apps_ok", alias = "unsigned-apps-ok")]
    pub unsigned_apps_ok: bool,

    /// Do not fetch the project list or client version information (as cc_config
    /// `<no_info_fetch>`).
    #[arg(long = "no_info_fetch", alias = "no-info-fetch")]
    pub no_info_fetch: bool,

    /// Send no host name or IP address to project servers (as cc_config
    /// `<suppress_net_info>`).
    #[arg(long = "suppress_net_info", alias = "suppress-net-info")]
    pub suppress_net_info: bool,

    /// Start no app during the first X seconds (as cc_config `<start_delay>`).
    #[arg(long = "start_delay", alias = "start-delay", value_name = "X")]
    pub start_delay: Option<f64>,

    /// Give up on a file transfer after N seconds of failures (default 90 days).
    #[arg(
        long = "file_xfer_giveup_period",
        alias = "file-xfer-giveup-period",
        value_name = "N"
    )]
    pub file_xfer_giveup_period: Option<u32>,

    /// Shortest retry delay of a failed file transfer, seconds (default 120).
    #[arg(
        long = "pers_retry_delay_min",
        alias = "pers-retry-delay-min",
        value_name = "N"
    )]
    pub pers_retry_delay_min: Option<u32>,

    /// Longest retry delay of a failed file transfer, seconds (default 21600).
    #[arg(
        long = "pers_retry_delay_max",
        alias = "pers-retry-delay-max",
        value_name = "N"
    )]
    pub pers_retry_delay_max: Option<u32>,

    /// Accepted and ignored, as by the official client (see `--file_xfer_giveup_period`).
    #[arg(long = "pers_giveup", alias = "pers-giveup", value_name = "N")]
    pub pers_giveup: Option<u32>,

    /// Shortest scheduler RPC backoff, seconds (default 60).
    #[arg(
        long = "sched_retry_delay_min",
        alias = "sched-retry-delay-min",
        value_name = "N"
    )]
    pub sched_retry_delay_min: Option<u32>,

    /// Longest scheduler RPC backoff, seconds (default 14400).
    #[arg(
        long = "sched_retry_delay_max",
        alias = "sched-retry-delay-max",
        value_name = "N"
    )]
    pub sched_retry_delay_max: Option<u32>,

    /// Failed scheduler RPCs counted in the backoff at most (default 10).
    #[arg(long = "retry_cap", alias = "retry-cap", value_name = "N")]
    pub retry_cap: Option<u32>,

    /// Fetch the master page again after N failed scheduler RPCs (default 10).
    #[arg(
        long = "master_fetch_period",
        alias = "master-fetch-period",
        value_name = "N"
    )]
    pub master_fetch_period: Option<u32>,

    /// After N failed master page fetches, wait `--master_fetch_interval` (default 3).
    #[arg(
        long = "master_fetch_retry_cap",
        alias = "master-fetch-retry-cap",
        value_name = "N"
    )]
    pub master_fetch_retry_cap: Option<u32>,

    /// Wait after repeated master page failures, seconds (default 86400).
    #[arg(
        long = "master_fetch_interval",
        alias = "master-fetch-interval",
        value_name = "N"
    )]
    pub master_fetch_interval: Option<u32>,

    /// Write the log to `stdoutdae.txt` and stderr to `stderrdae.txt` in the data directory.
    #[arg(long = "redirectio", alias = "redirect-io")]
    pub redirectio: bool,

    /// Detach from the terminal and run in the background (logs to `stdoutdae.txt`).
    #[arg(long)]
    pub daemon: bool,

    /// Accepted: Ferrite never refuses to start because another client runs on the host (one
    /// client per data directory is always enforced).
    #[arg(long = "allow_multiple_clients", alias = "allow-multiple-clients")]
    pub allow_multiple_clients: bool,

    /// Accepted; not applicable: Ferrite's idle detection reads input devices, whoever logs in.
    #[arg(long = "check_all_logins", alias = "check-all-logins")]
    pub check_all_logins: bool,

    /// Accepted; not applicable: Ferrite runs apps without BOINC's sandbox accounts.
    #[arg(long)]
    pub insecure: bool,

    /// Accepted; not applicable (Windows: detach from the console).
    #[arg(
        long = "detach_console",
        aliases = ["detach-console", "detach", "detach_phase_two", "detach-phase-two"]
    )]
    pub detach_console: bool,

    /// Accepted; not applicable (macOS: started by the Manager).
    #[arg(long = "launched_by_manager", alias = "launched-by-manager")]
    pub launched_by_manager: bool,

    /// Accepted; not applicable (set by the official updater).
    #[arg(long = "run_by_updater", alias = "run-by-updater")]
    pub run_by_updater: bool,

    /// Accepted; not applicable (macOS: started by the screensaver).
    #[arg(long)]
    pub saver: bool,

    /// Ferrite only: serve OpenMetrics (Prometheus) text at `/metrics` and the web dashboard
    /// at `/` on `127.0.0.1:PORT`; 0 (the default) leaves it off unless `cc_config.xml` sets
    /// `<ferrite_metrics_port>`.
    #[arg(
        long = "metrics_port",
        alias = "metrics-port",
        value_name = "PORT",
        default_value_t = 0
    )]
    pub metrics_port: u16,

    /// Ferrite only: no project uses this GPU: TYPE:N (e.g. NVIDIA:1) or its UUID; repeatable, adds to ferrite_gpu_control.xml.
    #[arg(
        long = "exclude_gpu",
        alias = "exclude-gpu",
        value_name = "GPU",
        value_parser = ferrite_proto::gpu_control::GpuSelector::parse_spec
    )]
    pub exclude_gpu: Vec<ferrite_proto::gpu_control::GpuSelector>,

    /// Ferrite only: this resource (CPU, NVIDIA, ATI, intel_gpu) ends its started tasks, then starts and fetches no more; repeatable.
    #[arg(
        long = "finish_then_stop",
        alias = "finish-then-stop",
        value_name = "RESOURCE"
    )]
    pub finish_then_stop: Vec<String>,

    /// Ferrite only: the address the metrics and dashboard server listens on instead of
    /// 127.0.0.1; anything but loopback needs a GUI RPC password or `--metrics_token_file`.
    #[arg(long = "metrics_bind", alias = "metrics-bind", value_name = "ADDR")]
    pub metrics_bind: Option<std::net::IpAddr>,

    /// Ferrite only: a file whose first line is the bearer token that the metrics and
    /// dashboard server asks for instead of the GUI RPC password.
    #[arg(
        long = "metrics_token_file",
        alias = "metrics-token-file",
        value_name = "PATH"
    )]
    pub metrics_token_file: Option<PathBuf>,
}

/// Long option names that take no `-` spelling rewrite (clap's own).
const CLAP_BUILTINS: [&str; 2] = ["help", "version"];

impl Options {
    /// Parses the process's arguments (see [`Options::parse_args`]).
    pub fn from_env() -> Options {
        Options::parse_args(std::env::args_os())
    }

    /// Parses `args` the way the official client does: `-opt` is `--opt`; macOS's
    /// `-psn_…` argument is ignored. Bad usage prints clap's message and exits 2.
    pub fn parse_args<I, T>(args: I) -> Options
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        Options::parse_from(normalize_args(args))
    }

    /// As [`Options::parse_args`], returning the error instead of exiting.
    pub fn try_parse_args<I, T>(args: I) -> Result<Options, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        Options::try_parse_from(normalize_args(args))
    }

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

    /// Log files instead of the terminal: `--daemon` or `--redirectio`, as officially.
    pub fn log_to_files(&self) -> bool {
        self.daemon || self.redirectio
    }

    /// The options given that Ferrite accepts but that do nothing here, each with why.
    pub fn not_applicable(&self) -> Vec<(&'static str, &'static str)> {
        let mut out = Vec::new();
        let mut note = |on: bool, name, why| {
            if on {
                out.push((name, why));
            }
        };
        note(
            self.check_all_logins,
            "check_all_logins",
            "idle detection reads the input devices, whoever is logged in",
        );
        note(
            self.insecure,
            "insecure",
            "apps run as the client's own user; there is no sandbox to turn off",
        );
        note(self.detach_console, "detach_console", "a Windows option");
        note(
            self.launched_by_manager,
            "launched_by_manager",
            "a macOS option",
        );
        note(self.saver, "saver", "a macOS option");
        note(
            self.run_by_updater,
            "run_by_updater",
            "set by the official client's updater",
        );
        note(
            self.pers_giveup.is_some(),
            "pers_giveup",
            "the official client ignores it too; use --file_xfer_giveup_period",
        );
        note(
            self.allow_multiple_clients,
            "allow_multiple_clients",
            "Ferrite never refuses to start because another client runs on the host; \
             one client per data directory is always enforced",
        );
        out
    }
}

/// Every long option name `ferrited` takes, in the official spelling (underscores).
pub fn long_option_names() -> Vec<String> {
    use clap::CommandFactory;
    let cmd = Options::command();
    let mut names: Vec<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_owned))
        .collect();
    names.extend(CLAP_BUILTINS.iter().map(|s| (*s).to_owned()));
    names
}

/// Rewrites the official client's single-dash spellings (`-dir`, `-gui_rpc_port`) to the
/// double-dash ones, leaves option values alone (`--detach_project -x` keeps `-x`), and drops
/// macOS's `-psn_…` argument.
pub fn normalize_args<I, T>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    use clap::CommandFactory;
    let cmd = Options::command();
    // How many values follow option `name`, if it is one of ours.
    let values_of = |name: &str| -> Option<usize> {
        if CLAP_BUILTINS.contains(&name) {
            return Some(0);
        }
        let arg = cmd.get_arguments().find(|a| {
            a.get_long() == Some(name) || a.get_all_aliases().is_some_and(|al| al.contains(&name))
        })?;
        Some(if arg.get_action().takes_values() {
            arg.get_num_args().map_or(1, |r| r.min_values())
        } else {
            0
        })
    };
    let mut out: Vec<OsString> = Vec::new();
    let mut skip = 0usize;
    let mut single_value = false;
    for (i, arg) in args.into_iter().map(Into::into).enumerate() {
        if i == 0 || skip > 0 {
            skip = skip.saturating_sub(1);
            // A value that starts with `-` rides with its option (`--opt=-value`), or clap
            // would read it as an option.
            let hyphen = arg.to_str().is_some_and(|a| a.starts_with('-'));
            match out.last_mut() {
                Some(opt) if single_value && hyphen => {
                    opt.push("=");
                    opt.push(&arg);
                }
                _ => out.push(arg),
            }
            continue;
        }
        let Some(s) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if s.starts_with("-psn_") {
            continue;
        }
        let name = s.strip_prefix("--").or_else(|| s.strip_prefix('-'));
        match name.and_then(|n| values_of(n).map(|v| (n, v))) {
            Some((n, v)) => {
                skip = v;
                single_value = v == 1;
                out.push(OsString::from(format!("--{n}")));
            }
            None => out.push(arg),
        }
    }
    out
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

    /// `boinc --help` of Debian's official client, checked in.
    const OFFICIAL_HELP: &str = include_str!("../../../tests/fixtures/boinc_help.txt");

    /// The options of `--help` text: name and how many values follow.
    fn help_options(help: &str) -> Vec<(String, usize)> {
        help.lines()
            .filter_map(|l| {
                let l = l.trim_start().strip_prefix("--")?;
                let mut words = l.split_whitespace();
                let name = words.next()?.to_owned();
                let values = words
                    .take_while(|w| w.starts_with('<') || w.chars().all(|c| c.is_ascii_uppercase()))
                    .count();
                Some((name, values))
            })
            .collect()
    }

    /// The option in each of its three spellings, with sample values.
    fn spellings(name: &str, values: usize) -> Vec<Vec<String>> {
        let vals: Vec<String> = match (name, values) {
            ("gui_rpc_port", _) => vec!["31417".into()],
            ("dir", _) => vec!["/tmp".into()],
            (_, 2) => vec!["http://p.example/".into(), "key".into()],
            (n, 1) if n.ends_with("project") || n == "update_prefs" => {
                vec!["http://p.example/".into()]
            }
            (_, 1) => vec!["60".into()],
            _ => vec![],
        };
        ["-", "--"]
            .iter()
            .map(|dash| format!("{dash}{name}"))
            .chain([format!("--{}", name.replace('_', "-"))])
            .map(|opt| {
                let mut v = vec!["ferrited".to_owned(), opt];
                v.extend(vals.iter().cloned());
                v
            })
            .collect()
    }

    #[test]
    fn every_official_option_parses_in_every_spelling() {
        let opts = help_options(OFFICIAL_HELP);
        assert!(opts.len() >= 40, "{opts:?}");
        // Options the official parser takes beyond its --help list.
        let extra = [
            ("detect_gpus", 0),
            ("launched_by_manager", 0),
            ("saver", 0),
            ("detach", 0),
            ("detach_phase_two", 0),
        ];
        for (name, values) in opts
            .iter()
            .map(|(n, v)| (n.as_str(), *v))
            .chain(extra)
            .filter(|(n, _)| !["help", "version"].contains(n))
        {
            for args in spellings(name, values) {
                if let Err(e) = Options::try_parse_args(&args) {
                    panic!("{args:?} refused: {e}");
                }
            }
        }
        for builtin in ["-help", "--help", "-version", "--version"] {
            let e = Options::try_parse_args(["ferrited", builtin]).expect_err("exits");
            assert_eq!(e.exit_code(), 0, "{builtin}");
        }
    }

    #[test]
    fn single_dash_spellings_mean_the_same() {
        let a = Options::try_parse_args([
            "ferrited",
            "-dir",
            "/d",
            "-gui_rpc_port",
            "7",
            "-attach_project",
            "http://p/",
            "K",
            "-no_info_fetch",
            "-start_delay",
            "2.5",
            "-psn_0_12345",
            "-reset_project",
            "http://q/",
        ])
        .expect("parses");
        assert_eq!(a.data_dir(), PathBuf::from("/d"));
        assert_eq!(a.gui_rpc_port, Some(7));
        assert_eq!(a.attach(), Some(("http://p/", "K")));
        assert!(a.no_info_fetch);
        assert_eq!(a.start_delay, Some(2.5));
        assert_eq!(a.reset_project.as_deref(), Some("http://q/"));
        // A value that looks like an option name is left alone when it is a value.
        let b = Options::try_parse_args(["ferrited", "-detach_project", "-dir", "-no_gpus"])
            .expect("parses");
        assert_eq!(b.detach_project.as_deref(), Some("-dir"));
        assert!(b.no_gpus && b.dir.is_none());
        assert!(Options::try_parse_args(["ferrited", "-no_such_option"]).is_err());
    }

    #[test]
    fn not_applicable_options_are_named() {
        let a = Options::try_parse_args([
            "ferrited",
            "--insecure",
            "--check_all_logins",
            "-detach",
            "--saver",
        ])
        .expect("parses");
        let names: Vec<&str> = a.not_applicable().iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            ["check_all_logins", "insecure", "detach_console", "saver"]
        );
        assert!(Options::default().not_applicable().is_empty());
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(Options::try_parse_from(["ferrited", "--gui_rpc_port", "70000"]).is_err());
        assert!(Options::try_parse_from(["ferrited", "--attach_project", "only-url"]).is_err());
    }
}
