//! `ferrite`: the control command for a running client (Ferrite's `ferrited` or the official
//! BOINC client), over GUI RPC.
//!
//! Reading commands (`status`, `tasks`, `projects`, `messages`, `transfers`, `prefs get`)
//! print tables for people or JSON with `--json` (`messages --follow --json`: one object per
//! line); control commands (`mode`, `task`, `project`, `attach`, `detach`, `prefs set`,
//! `prefs limits`, `benchmark`, `config reload`, `quit`) print nothing on success. The password is found the way `boinccmd` finds it
//! ([`password`]); errors go to stderr with a distinct exit status for each kind
//! ([`exit`]). A closed pipe ends the output quietly.

// Standard output goes through `exit::write_out`, which ends quietly on a closed pipe where
// the standard macros would panic.
macro_rules! print {
    ($($t:tt)*) => { $crate::exit::write_out(format_args!($($t)*), false) };
}
macro_rules! println {
    () => { $crate::exit::write_out(format_args!(""), true) };
    ($($t:tt)*) => { $crate::exit::write_out(format_args!($($t)*), true) };
}

mod account;
mod commands;
mod demo;
mod exit;
mod hosts;
mod model;
mod password;
mod tables;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use ferrite_gui_rpc::client::{check_success, error_text};
use ferrite_gui_rpc::{ClientError, GuiRpcClient, ProjectAction, Request};
use serde::Serialize;

use crate::commands::{
    explain, mode_request, prefs_get, prefs_limits, prefs_set, project_request, projects, status,
    task_request, tasks,
};
use crate::model::{Message, Task, Transfer};
use crate::tables::{message_line, transfers_table};

/// Control a running Ferrite (or BOINC) client.
#[derive(Debug, Parser)]
#[command(name = "ferrite", version, about, long_about = None, after_help = exit::HELP)]
struct Cli {
    /// Client to talk to: HOST, HOST:PORT or [IPv6]:PORT.
    #[arg(long, global = true, default_value = "127.0.0.1")]
    host: String,
    /// GUI RPC password (default: gui_rpc_auth.cfg, found as boinccmd finds it).
    #[arg(long, global = true)]
    passwd: Option<String>,
    /// Data directory whose gui_rpc_auth.cfg to use (instead of the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Connect to this Unix socket instead of TCP (e.g. DIR/boinc_socket).
    #[arg(long, global = true, value_name = "PATH")]
    unix: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// Ask every host of this file (boinctui's configuration, or lines `HOST[:PORT]
    /// [PASSWORD]`) at once; for `status` and `tasks`.
    #[arg(long, global = true, value_name = "FILE")]
    hosts: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Ferrite's whole job on loopback: a bundled test project, ferrited attached to it,
    /// tasks downloaded, run, uploaded and reported; everything stopped at the end.
    Demo {
        /// Jobs the demo project makes.
        #[arg(long, default_value_t = 8)]
        jobs: u32,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 90.0)]
        timeout: f64,
        /// The demo's directory (made fresh; only a previous demo's directory is wiped).
        #[arg(long, value_name = "DIR", default_value = "ferrite-demo")]
        data: PathBuf,
    },
    /// Run modes, suspend reasons and counts of projects and tasks.
    Status,
    /// Why each task runs or waits, and why work is or is not being fetched for each
    /// resource, from the scheduling core's last decisions (Ferrite only).
    Explain,
    /// All tasks.
    Tasks {
        /// Only tasks that have a process record (running or preempted).
        #[arg(long)]
        active: bool,
        #[command(flatten)]
        watch: WatchArgs,
    },
    /// Attached projects.
    Projects,
    /// The event log.
    Messages {
        /// Only messages after this sequence number.
        #[arg(long, default_value_t = 0)]
        since: i64,
        /// Keep printing new messages until interrupted (Ctrl-C).
        #[arg(long, short = 'f')]
        follow: bool,
        /// With --follow: stop after this many seconds.
        #[arg(long, value_name = "SECS", requires = "follow")]
        max_seconds: Option<f64>,
        /// With --follow: seconds between polls.
        #[arg(long, value_name = "SECS", default_value_t = 1.0, requires = "follow")]
        interval: f64,
    },
    /// Pending file transfers.
    Transfers {
        #[command(flatten)]
        watch: WatchArgs,
    },
    /// Attach to a project with an account key, or with your account's e-mail address and
    /// password (`--create` makes the account first).
    Attach {
        /// The project's master URL.
        url: String,
        /// The account key (authenticator).
        #[arg(required_unless_present = "email")]
        key: Option<String>,
        /// The project's name, for the event log.
        #[arg(long, default_value = "")]
        name: String,
        #[command(flatten)]
        login: account::Login,
    },
    /// Detach from a project (its tasks and files are removed).
    Detach {
        /// The project's master URL.
        url: String,
    },
    /// Computing preferences.
    Prefs {
        #[command(subcommand)]
        op: PrefsOp,
    },
    /// Run the CPU benchmarks now.
    Benchmark,
    /// Set the run, GPU or network mode.
    Mode {
        /// Which mode.
        which: ModeWhich,
        /// The new mode (`restore` ends a temporary mode).
        mode: ModeValue,
        /// Only for this many seconds, then back to the permanent mode.
        #[arg(long = "for", value_name = "SECS")]
        for_secs: Option<f64>,
        /// With `run never`: running tasks that checkpoint run on to their next checkpoint
        /// (at most cc_config `ferrite_checkpoint_grace` seconds) before they are suspended
        /// (Ferrite only; the official client suspends at once).
        #[arg(long)]
        at_checkpoint: bool,
    },
    /// Suspend, resume or abort a task.
    Task {
        /// The task's project URL.
        url: String,
        /// The task's name.
        name: String,
        /// What to do.
        op: TaskOp,
    },
    /// Operate on a project.
    Project {
        /// The project URL.
        url: String,
        /// What to do.
        op: ProjectOp,
    },
    /// Configuration files.
    Config {
        #[command(subcommand)]
        op: ConfigOp,
    },
    /// Stop the client.
    Quit,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeWhich {
    /// Computing.
    Run,
    /// GPU computing.
    Gpu,
    /// Network use.
    Network,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeValue {
    Always,
    Auto,
    Never,
    Restore,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TaskOp {
    Suspend,
    Resume,
    Abort,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
#[value(rename_all = "snake_case")]
enum ProjectOp {
    Suspend,
    Resume,
    Update,
    Reset,
    Detach,
    Nomorework,
    Allowmorework,
    DetachWhenDone,
    DontDetachWhenDone,
}

#[derive(Debug, Subcommand)]
enum PrefsOp {
    /// The preferences in force (or, with --override, the local override file).
    Get {
        /// Show global_prefs_override.xml instead of the preferences in force.
        #[arg(long = "override")]
        override_file: bool,
    },
    /// Install FILE as the local override (global_prefs_override.xml) and apply it.
    Set {
        /// A `<global_preferences>` document.
        file: PathBuf,
    },
    /// Set Ferrite's temperature limits in the local override, keeping its other values.
    #[command(group(clap::ArgGroup::new("limit").required(true).multiple(true)))]
    Limits {
        /// CPU temperature (°C) over which CPU tasks are suspended; 0 = no limit.
        #[arg(long, value_name = "CELSIUS", group = "limit")]
        cpu_temp_limit: Option<f64>,
        /// GPU temperature (°C) over which GPU tasks are suspended; 0 = no limit.
        #[arg(long, value_name = "CELSIUS", group = "limit")]
        gpu_temp_limit: Option<f64>,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigOp {
    /// Re-read cc_config.xml, app_config.xml files and the preferences override.
    Reload,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ferrite: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let searched = password::search_report(
        cli.passwd.as_deref(),
        cli.dir.as_deref(),
        &cwd,
        &password::SystemPaths::default(),
    );
    let result = runtime.block_on(run(cli));
    exit::flush_out();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let code = exit::code(&e);
            eprintln!("ferrite: {e:#}");
            if code == exit::AUTH {
                eprintln!("{searched}");
            }
            ExitCode::from(code)
        }
    }
}

/// Splits `HOST[:PORT]` (IPv6 as `[addr]:port`).
fn host_port(spec: &str) -> anyhow::Result<(String, u16)> {
    const DEFAULT: u16 = ferrite_gui_rpc::server::DEFAULT_PORT;
    if let Some(rest) = spec.strip_prefix('[') {
        let (addr, tail) = rest
            .split_once(']')
            .with_context(|| format!("bad host {spec:?}"))?;
        let port = match tail.strip_prefix(':') {
            Some(p) => p.parse().with_context(|| format!("bad port in {spec:?}"))?,
            None => DEFAULT,
        };
        return Ok((addr.to_owned(), port));
    }
    match spec.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Ok((
            h.to_owned(),
            p.parse().with_context(|| format!("bad port in {spec:?}"))?,
        )),
        _ => Ok((spec.to_owned(), DEFAULT)),
    }
}

async fn connect(cli: &Cli) -> anyhow::Result<GuiRpcClient> {
    let mut client = match &cli.unix {
        Some(path) => GuiRpcClient::connect_unix(path)
            .await
            .with_context(|| format!("cannot connect to {}", path.display()))?,
        None => {
            let (host, port) = host_port(&cli.host).map_err(|e| exit::usage(format!("{e:#}")))?;
            GuiRpcClient::connect_tcp((host.as_str(), port))
                .await
                .with_context(|| format!("cannot connect to {host}:{port}"))?
        }
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let found = password::find_password(
        cli.passwd.as_deref(),
        cli.dir.as_deref(),
        &cwd,
        &password::SystemPaths::default(),
    );
    if let Some((pw, source)) = found {
        if !pw.is_empty() {
            client
                .authorize(&pw)
                .await
                .with_context(|| format!("authorization failed (password from {source})"))?;
        }
    }
    Ok(client)
}

/// Options of the live views (`tasks --watch`, `transfers --watch`).
#[derive(clap::Args, Debug, Clone)]
struct WatchArgs {
    /// Redraw live progress until interrupted (Ctrl-C).
    #[arg(long)]
    watch: bool,
    /// With --watch: stop after this many refreshes.
    #[arg(long, value_name = "N", requires = "watch")]
    count: Option<u64>,
    /// With --watch: seconds between refreshes.
    #[arg(long, value_name = "SECS", default_value_t = 1.0, requires = "watch")]
    interval: f64,
}

/// Polls `request` and redraws one progress bar per (label, fraction done) row that
/// `rows` extracts from the reply, until Ctrl-C or `--count` refreshes. Off a terminal
/// each refresh prints plain `percent label` lines, then `--`.
async fn watch_loop(
    client: &mut GuiRpcClient,
    request: &Request,
    args: &WatchArgs,
    rows: impl Fn(&str) -> Vec<(String, f64)>,
) -> anyhow::Result<()> {
    use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
    use std::io::IsTerminal as _;
    let tty = std::io::stdout().is_terminal();
    let multi = MultiProgress::with_draw_target(if tty {
        ProgressDrawTarget::stdout()
    } else {
        ProgressDrawTarget::hidden()
    });
    let style = ProgressStyle::with_template("{bar:30} {percent:>3}% {msg}")
        .context("progress bar template")?;
    let mut bars: Vec<ProgressBar> = Vec::new();
    let interval = std::time::Duration::from_secs_f64(args.interval.max(0.05));
    let mut refreshes = 0u64;
    loop {
        let body = fetch(client, request).await?;
        let current = rows(&body);
        while bars.len() > current.len() {
            if let Some(bar) = bars.pop() {
                bar.finish_and_clear();
                multi.remove(&bar);
            }
        }
        while bars.len() < current.len() {
            let bar = multi.add(ProgressBar::new(1000));
            bar.set_style(style.clone());
            bars.push(bar);
        }
        for (bar, (label, done)) in bars.iter().zip(&current) {
            bar.set_position((done * 1000.0).round() as u64);
            bar.set_message(label.clone());
        }
        if !tty {
            for (label, done) in &current {
                println!("{:5.1}% {label}", done * 100.0);
            }
            println!("--");
        }
        refreshes += 1;
        if args.count.is_some_and(|n| refreshes >= n) {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    for bar in &bars {
        bar.abandon();
    }
    Ok(())
}

/// `--hosts FILE status|tasks`: one table across the hosts of the file.
async fn run_hosts(file: &std::path::Path, command: &Command, json: bool) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read the hosts file {}", file.display()))?;
    let entries = hosts::parse_hosts(&text).map_err(|e| exit::usage(format!("{e:#}")))?;
    if entries.is_empty() {
        return Err(exit::usage(format!("no host in {}", file.display())));
    }
    let reports = hosts::gather(&entries).await;
    match command {
        Command::Status if json => print_json(&reports),
        Command::Status => {
            print!("{}", hosts::status_table(&reports));
            Ok(())
        }
        Command::Tasks { .. } if json => print_json(&hosts::tasks_json(&reports)),
        Command::Tasks { .. } => {
            print!("{}", hosts::tasks_table(&reports));
            Ok(())
        }
        _ => Err(exit::usage("--hosts works with `status` and `tasks`")),
    }
}

/// Sends a request and checks for an error answer; returns the body.
async fn fetch(client: &mut GuiRpcClient, request: &Request) -> anyhow::Result<String> {
    Ok(client.call_data(request).await?)
}

async fn control(client: &mut GuiRpcClient, request: &Request, json: bool) -> anyhow::Result<()> {
    client.call_expect_success(request).await?;
    if json {
        println!("{}", serde_json::json!({ "ok": true }));
    }
    Ok(())
}

fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    if let Command::Demo {
        jobs,
        timeout,
        data,
    } = &cli.command
    {
        return demo::run(demo::DemoOptions {
            jobs: (*jobs).max(1),
            timeout: std::time::Duration::from_secs_f64(timeout.clamp(1.0, 86400.0)),
            dir: data.clone(),
        })
        .await;
    }
    if let Some(file) = &cli.hosts {
        return run_hosts(file, &cli.command, cli.json).await;
    }
    let mut client = connect(&cli).await?;
    let json = cli.json;
    match &cli.command {
        Command::Demo { .. } => unreachable!("handled above"),
        Command::Explain => explain(&mut client, json).await?,
        Command::Status => status(&mut client, json).await?,
        Command::Tasks { active, watch } if watch.watch => {
            let request = Request::GetResults {
                active_only: *active,
            };
            watch_loop(&mut client, &request, watch, |body| {
                Task::all(body)
                    .into_iter()
                    .map(|t| {
                        let label = format!("{} [{}]", t.name, t.status);
                        (label, t.fraction_done.clamp(0.0, 1.0))
                    })
                    .collect()
            })
            .await?;
        }
        Command::Tasks { active, .. } => tasks(&mut client, *active, json).await?,
        Command::Projects => projects(&mut client, json).await?,
        Command::Messages {
            since,
            follow: false,
            ..
        } => {
            let msgs = messages_after(&mut client, *since).await?;
            if json {
                return print_json(&msgs);
            }
            for m in &msgs {
                println!("{}", message_line(m));
            }
        }
        Command::Messages {
            since,
            follow: true,
            max_seconds,
            interval,
        } => follow_messages(&mut client, *since, *max_seconds, *interval, json).await?,
        Command::Transfers { watch } if watch.watch => {
            watch_loop(&mut client, &Request::GetFileTransfers, watch, |body| {
                Transfer::all(body)
                    .into_iter()
                    .map(|t| {
                        let dir = if t.is_upload { "up" } else { "down" };
                        let done = if t.nbytes > 0.0 {
                            (t.bytes_xferred / t.nbytes).clamp(0.0, 1.0)
                        } else {
                            0.0
                        };
                        (format!("{} ({dir})", t.name), done)
                    })
                    .collect()
            })
            .await?;
        }
        Command::Transfers { .. } => {
            let transfers = Transfer::all(&fetch(&mut client, &Request::GetFileTransfers).await?);
            if json {
                return print_json(&transfers);
            }
            print!("{}", transfers_table(&transfers));
        }
        Command::Attach {
            url,
            key,
            name,
            login,
        } => {
            let (key, name) = match key {
                Some(k) => (k.clone(), name.clone()),
                None => {
                    let a = account::log_in(&mut client, url, login).await?;
                    let n = a.project_name.filter(|_| name.is_empty());
                    (a.key, n.unwrap_or_else(|| name.clone()))
                }
            };
            attach(&mut client, url, &key, &name, json).await?
        }
        Command::Detach { url } => {
            let request = Request::ProjectOp {
                op: ProjectAction::Detach,
                project_url: url.clone(),
            };
            control(&mut client, &request, json).await?;
        }
        Command::Prefs {
            op: PrefsOp::Get { override_file },
        } => prefs_get(&mut client, *override_file, json).await?,
        Command::Prefs {
            op: PrefsOp::Set { file },
        } => prefs_set(&mut client, file, json).await?,
        Command::Prefs {
            op:
                PrefsOp::Limits {
                    cpu_temp_limit,
                    gpu_temp_limit,
                },
        } => prefs_limits(&mut client, *cpu_temp_limit, *gpu_temp_limit, json).await?,
        Command::Benchmark => control(&mut client, &Request::RunBenchmarks, json).await?,
        Command::Mode {
            which,
            mode,
            for_secs,
            at_checkpoint,
        } => {
            let request = mode_request(which, mode, *for_secs, *at_checkpoint)?;
            control(&mut client, &request, json).await?;
        }
        Command::Task { url, name, op } => {
            control(&mut client, &task_request(url, name, op), json).await?;
        }
        Command::Project { url, op } => {
            control(&mut client, &project_request(url, op), json).await?;
        }
        Command::Config {
            op: ConfigOp::Reload,
        } => {
            client.call_expect_success(&Request::ReadCcConfig).await?;
            control(&mut client, &Request::ReadGlobalPrefsOverride, json).await?;
        }
        Command::Quit => control(&mut client, &Request::Quit, json).await?,
    }
    Ok(())
}

/// The event-log lines after `seqno`.
async fn messages_after(client: &mut GuiRpcClient, seqno: i64) -> anyhow::Result<Vec<Message>> {
    let body = fetch(
        client,
        &Request::GetMessages {
            seqno,
            translatable: false,
        },
    )
    .await?;
    Ok(Message::all(&body))
}

/// Prints the event log after `since`, then polls for newer lines every `interval` seconds
/// until Ctrl-C or `max_seconds`. With `json`, one JSON object per line.
async fn follow_messages(
    client: &mut GuiRpcClient,
    since: i64,
    max_seconds: Option<f64>,
    interval: f64,
    json: bool,
) -> anyhow::Result<()> {
    use std::io::Write as _;
    if !(interval > 0.0 && interval.is_finite()) {
        return Err(exit::usage("--interval takes a positive number of seconds"));
    }
    let deadline = match max_seconds {
        Some(s) if s >= 0.0 && s.is_finite() => {
            Some(tokio::time::Instant::now() + std::time::Duration::from_secs_f64(s))
        }
        Some(_) => {
            return Err(exit::usage(
                "--max-seconds takes a number of seconds, 0 or more",
            ))
        }
        None => None,
    };
    let interval = std::time::Duration::from_secs_f64(interval);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut last = since;
    loop {
        for m in messages_after(client, last).await? {
            last = last.max(m.seqno);
            let line = if json {
                serde_json::to_string(&m)?
            } else {
                message_line(&m)
            };
            println!("{line}");
        }
        // Lines reach a pipe as they come, not when the buffer fills.
        std::io::stdout().flush()?;
        let mut wake = tokio::time::Instant::now() + interval;
        if let Some(d) = deadline {
            if tokio::time::Instant::now() >= d {
                return Ok(());
            }
            wake = wake.min(d);
        }
        tokio::select! {
            _ = &mut ctrl_c => return Ok(()),
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}

/// `project_attach`, then `project_attach_poll` until the attach is done (at most a minute).
/// A refusal is an error carrying the client's text.
async fn attach(
    client: &mut GuiRpcClient,
    url: &str,
    key: &str,
    name: &str,
    json: bool,
) -> anyhow::Result<()> {
    /// `ERR_IN_PROGRESS`: the attach is still under way.
    const IN_PROGRESS: i64 = -204;
    let request = Request::ProjectAttach {
        project_url: url.to_owned(),
        authenticator: key.to_owned(),
        project_name: name.to_owned(),
        email_addr: String::new(),
        use_config_file: false,
    };
    let body = client.call(&request).await?;
    if body.contains("<unauthorized/>") {
        return Err(ClientError::Unauthorized.into());
    }
    if let Some(text) = error_text(&body) {
        // Not through check_success: "Missing authenticator" is the refusal's text here,
        // not an authentication failure of this connection.
        anyhow::bail!("the client refused to attach to {url}: {text}");
    }
    check_success(&body).with_context(|| format!("the client refused to attach to {url}"))?;
    let start = std::time::Instant::now();
    loop {
        let body = client.call(&Request::ProjectAttachPoll).await?;
        if let Some(text) = error_text(&body) {
            anyhow::bail!("attaching to {url}: {text}");
        }
        let reply = model::records(&format!("<r>{body}</r>"), "r")
            .into_iter()
            .next()
            .unwrap_or_default();
        let code: i64 = reply
            .get("project_attach_reply/error_num")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if code == 0 {
            break;
        }
        if code != IN_PROGRESS {
            let why: Vec<&str> = reply
                .iter()
                .filter(|(k, _)| k.starts_with("project_attach_reply/message"))
                .map(|(_, v)| v.as_str())
                .collect();
            anyhow::bail!("attaching to {url} failed ({code}): {}", why.join("; "));
        }
        if start.elapsed() > std::time::Duration::from_secs(60) {
            anyhow::bail!("attaching to {url}: no answer from the project within a minute");
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    if json {
        println!("{}", serde_json::json!({ "ok": true }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_specs() {
        assert_eq!(host_port("h").ok(), Some(("h".into(), 31416)));
        assert_eq!(host_port("h:1").ok(), Some(("h".into(), 1)));
        assert_eq!(host_port("[::1]:2").ok(), Some(("::1".into(), 2)));
        assert_eq!(host_port("[::1]").ok(), Some(("::1".into(), 31416)));
        assert!(host_port("h:x").is_err());
    }

    #[test]
    fn at_checkpoint_asks_the_users_suspend_to_wait_for_checkpoints() {
        let c = Cli::try_parse_from(["ferrite", "mode", "run", "never", "--at-checkpoint"])
            .expect("parses");
        let Command::Mode {
            which,
            mode,
            for_secs,
            at_checkpoint,
        } = &c.command
        else {
            panic!("{:?}", c.command);
        };
        let r = mode_request(which, mode, *for_secs, *at_checkpoint).expect("a request");
        assert_eq!(
            r,
            ferrite_gui_rpc::Request::SetRunMode {
                mode: ferrite_gui_rpc::RunMode::Never,
                duration: 0.0,
                at_checkpoint: true,
            }
        );
        assert!(r.to_xml().contains("<ferrite_at_checkpoint/>"));
        // Only the user's suspension of computing can wait.
        for (w, m) in [
            (ModeWhich::Gpu, ModeValue::Never),
            (ModeWhich::Run, ModeValue::Auto),
        ] {
            assert!(mode_request(&w, &m, None, true).is_err(), "{w:?} {m:?}");
        }
    }

    #[test]
    fn cli_parses_the_documented_commands() {
        let c = Cli::try_parse_from(["ferrite", "--json", "mode", "gpu", "never", "--for", "60"])
            .expect("parses");
        assert!(c.json);
        assert!(matches!(
            c.command,
            Command::Mode {
                which: ModeWhich::Gpu,
                mode: ModeValue::Never,
                for_secs: Some(60.0),
                at_checkpoint: false,
            }
        ));
        let c = Cli::try_parse_from(["ferrite", "project", "http://p/", "detach_when_done"])
            .expect("parses");
        assert!(matches!(
            c.command,
            Command::Project {
                op: ProjectOp::DetachWhenDone,
                ..
            }
        ));
        assert!(Cli::try_parse_from(["ferrite", "task", "u", "n", "explode"]).is_err());
        assert!(Cli::try_parse_from(["ferrite", "config", "reload"]).is_ok());
        let c = Cli::try_parse_from(["ferrite", "messages", "-f", "--max-seconds", "2"])
            .expect("parses");
        assert!(matches!(
            c.command,
            Command::Messages {
                follow: true,
                max_seconds: Some(2.0),
                ..
            }
        ));
        // --max-seconds only makes sense while following.
        assert!(Cli::try_parse_from(["ferrite", "messages", "--max-seconds", "2"]).is_err());
        assert!(Cli::try_parse_from(["ferrite", "prefs", "get", "--override"]).is_ok());
        assert!(Cli::try_parse_from(["ferrite", "prefs", "set"]).is_err());
        assert!(Cli::try_parse_from(["ferrite", "attach", "http://p/"]).is_err());
        assert!(Cli::try_parse_from(["ferrite", "attach", "http://p/", "k"]).is_ok());
    }
}
