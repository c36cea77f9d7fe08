//! `ferrited` started with each option of the official client's command line: it starts (or
//! does what the option says) and never refuses an official option.
//!
//! The option list is Debian's `boinc --help` (checked in as `tests/fixtures/boinc_help.txt`);
//! when the official client is installed its `--help` is read too, and must list the same
//! options, so the checked-in list stays true.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ferrite_e2e::{bin, free_port, gui_rpc, peer_or_skip, run_bounded, Proc};

const T: Duration = Duration::from_secs(30);

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

fn checked_in_options() -> Vec<(String, usize)> {
    let path = ferrite_e2e::fixtures().join("boinc_help.txt");
    let text = fs::read_to_string(&path).expect("boinc_help.txt");
    help_options(&text)
}

#[test]
fn the_checked_in_option_list_is_the_installed_clients() {
    let checked_in = checked_in_options();
    assert!(checked_in.len() >= 40, "{checked_in:?}");
    if !peer_or_skip(
        "the_checked_in_option_list_is_the_installed_clients (against boinc --help)",
        &["boinc"],
    ) {
        return;
    }
    let out = Command::new("boinc")
        .arg("--help")
        .output()
        .expect("boinc --help");
    let installed = help_options(&String::from_utf8_lossy(&out.stdout));
    for o in &installed {
        assert!(
            checked_in.contains(o),
            "`boinc --help` lists {o:?}, missing from tests/fixtures/boinc_help.txt"
        );
    }
}

/// The spelling used for the `i`-th option: `-opt`, `--opt`, `--kebab-opt` in turn.
fn spell(name: &str, i: usize) -> String {
    match i % 3 {
        0 => format!("-{name}"),
        1 => format!("--{name}"),
        _ => format!("--{}", name.replace('_', "-")),
    }
}

/// Runs `ferrited` on a fresh data directory with `option` (and its values), on a free
/// loopback port; checks it starts and does what the option says.
fn start_with(name: &str, values: usize, i: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8 path").to_owned();
    let port = free_port();
    let mut args: Vec<String> = vec![spell(name, i)];
    match (name, values) {
        ("dir", _) => args.push(d.clone()),
        ("gui_rpc_port", _) => args.push(port.to_string()),
        ("attach_project", _) => {
            args.extend(["http://127.0.0.1:1/unreachable/".into(), "key".into()])
        }
        (_, 1) if name.ends_with("project") || name == "update_prefs" => {
            args.push("http://127.0.0.1:1/nowhere/".into())
        }
        (_, 1) => args.push("61".into()),
        _ => {}
    }
    if name == "help" || name == "version" {
        let mut cmd = Command::new(bin("ferrited"));
        cmd.args(&args);
        let (out, _) = run_bounded(cmd, T);
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert!(!out.stdout.is_empty(), "{args:?} printed nothing");
        return;
    }
    let mut all = args.clone();
    if name != "dir" {
        all.extend(["--dir".into(), d.clone()]);
    }
    if name != "gui_rpc_port" {
        all.extend(["--gui_rpc_port".into(), port.to_string()]);
    }
    all.extend(["--skip_cpu_benchmarks".into(), "--no_gpus".into()]);
    if name == "daemon" {
        daemon_logs_to_stdoutdae(dir.path(), &all, port);
        return;
    }
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let mut p = Proc::ferrited(&refs);
    if name == "redirectio" {
        let log = dir.path().join("stdoutdae.txt");
        ferrite_e2e::inspect::wait_until("the log in stdoutdae.txt", T, || {
            fs::read_to_string(&log).is_ok_and(|s| s.contains("entering main loop"))
        });
        assert!(
            !p.output().contains("entering main loop"),
            "--redirectio: the log still goes to the terminal"
        );
    } else {
        p.wait_for("entering main loop", T);
    }
    let log = |p: &Proc| {
        p.output() + &fs::read_to_string(dir.path().join("stdoutdae.txt")).unwrap_or_default()
    };
    let out = log(&p);
    assert!(!out.contains("unexpected argument"), "{args:?}: {out}");
    match name {
        "no_gui_rpc" => {
            assert!(out.contains("GUI RPC off"), "{out}");
            assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
            assert!(!dir.path().join("boinc_socket").exists());
        }
        "gui_rpc_unix_domain" => {
            p.wait_for("GUI RPC listening on a Unix socket", T);
            assert!(dir.path().join("boinc_socket").exists());
            assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
        }
        "show_projects" => assert!(out.contains("no projects attached"), "{out}"),
        "check_all_logins"
        | "insecure"
        | "detach_console"
        | "run_by_updater"
        | "allow_multiple_clients"
        | "pers_giveup" => {
            assert!(
                out.contains(&format!("--{name} accepted")),
                "{name} not named in the log: {out}"
            );
        }
        "reset_project" | "update_prefs" | "detach_project" => {
            assert!(
                out.contains(&format!(
                    "--{name} http://127.0.0.1:1/nowhere/: not attached"
                )),
                "{out}"
            );
        }
        "sched_retry_delay_min"
        | "sched_retry_delay_max"
        | "retry_cap"
        | "master_fetch_period"
        | "master_fetch_retry_cap"
        | "master_fetch_interval"
        | "pers_retry_delay_min"
        | "pers_retry_delay_max"
        | "file_xfer_giveup_period" => {
            assert!(out.contains(&format!("{name}=61")), "{out}");
        }
        _ => {}
    }
    if !matches!(name, "no_gui_rpc" | "gui_rpc_unix_domain") {
        // GUI RPC answers (wait for it: binding is logged after the main loop starts).
        ferrite_e2e::inspect::wait_until("GUI RPC on TCP", T, || {
            log(&p).contains("GUI RPC listening on TCP")
        });
        let pw = fs::read_to_string(dir.path().join("gui_rpc_auth.cfg")).unwrap_or_default();
        let reply = gui_rpc(port, Some(pw.trim()), "<get_cc_status/>\n");
        assert!(reply.contains("<cc_status>"), "{name}: {reply}");
    }
    p.signal(libc::SIGTERM);
    let status = p.wait(T);
    assert!(status.success(), "{args:?}: exit {status}; {}", log(&p));
}

/// `--daemon` detaches, and the log goes to `stdoutdae.txt` as the official client's does.
fn daemon_logs_to_stdoutdae(dir: &Path, args: &[String], port: u16) {
    let mut cmd = Command::new(bin("ferrited"));
    cmd.args(args)
        .env("RUST_LOG", "info")
        .env("FERRITE_PROC_ROOT", ferrite_e2e::quiet_proc_root());
    let (out, _) = run_bounded(cmd, T);
    assert!(out.status.success(), "{out:?}");
    let log = dir.join("stdoutdae.txt");
    ferrite_e2e::inspect::wait_until("the daemon's log in stdoutdae.txt", T, || {
        fs::read_to_string(&log).is_ok_and(|s| s.contains("GUI RPC listening on TCP"))
    });
    assert!(dir.join("stderrdae.txt").exists());
    let pw = fs::read_to_string(dir.join("gui_rpc_auth.cfg")).expect("password");
    let reply = gui_rpc(port, Some(pw.trim()), "<quit/>\n");
    assert!(reply.contains("<success/>"), "{reply}");
    ferrite_e2e::inspect::wait_until("the daemon to exit", T, || {
        fs::read_to_string(&log).is_ok_and(|s| s.contains("exiting"))
            && std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
    });
}

#[test]
fn ferrited_starts_with_every_official_option() {
    let mut options = checked_in_options();
    if peer_or_skip(
        "ferrited_starts_with_every_official_option (options from boinc --help)",
        &["boinc"],
    ) {
        if let Ok(out) = Command::new("boinc").arg("--help").output() {
            for o in help_options(&String::from_utf8_lossy(&out.stdout)) {
                if !options.contains(&o) {
                    options.push(o);
                }
            }
        }
    }
    // Four daemons at a time, each on its own data directory and port.
    let indexed: Vec<(usize, (String, usize))> = options.into_iter().enumerate().collect();
    std::thread::scope(|s| {
        for chunk in indexed.chunks(indexed.len().div_ceil(4)) {
            s.spawn(move || {
                for (i, (name, values)) in chunk {
                    start_with(name, *values, *i);
                }
            });
        }
    });
}

#[test]
fn exit_before_start_exits_instead_of_starting_a_task() {
    let dir = ferrite_e2e::fixture_data_dir("02_tasks_running");
    let d = dir.path().to_str().expect("utf-8 path");
    let port = free_port().to_string();
    let mut p = Proc::ferrited(&[
        "-dir",
        d,
        "-gui_rpc_port",
        &port,
        "-exit_before_start",
        "--skip_cpu_benchmarks",
        "--no_gpus",
    ]);
    let status = p.wait(T);
    let out = p.output();
    assert!(status.success(), "{status}: {out}");
    assert!(out.contains("(exit_before_start)"), "{out}");
    assert!(!out.contains("starting task"), "{out}");
}

#[test]
fn unknown_options_are_a_usage_error() {
    // An unknown option is a usage error (exit 2), said with the option's name.
    let mut cmd = Command::new(bin("ferrited"));
    cmd.arg("--no_such_option");
    let (out, _) = run_bounded(cmd, T);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no_such_option"));
}

/// `ferrited --help` as (option with its values, meaning) rows, without `--help`/`--version`
/// and clap's `[default: …]` notes.
fn help_rows() -> Vec<(String, String)> {
    let mut cmd = Command::new(bin("ferrited"));
    cmd.arg("--help");
    let (out, _) = run_bounded(cmd, T);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().strip_prefix("--")?;
            let (opt, meaning) = l.split_once("  ")?;
            let name = opt.split_whitespace().next()?;
            if name == "help" || name == "version" {
                return None;
            }
            let opt = format!("--{}", opt.replace(['<', '>'], ""));
            let meaning = meaning.trim();
            let meaning = match meaning.rfind(" [default: ") {
                Some(i) if meaning.ends_with(']') => &meaning[..i],
                _ => meaning,
            };
            Some((opt, meaning.to_owned()))
        })
        .collect()
}

/// The rows of the first Markdown table after `heading` in `doc`, as (first cell, second
/// cell) with backticks removed.
fn table_after(doc: &str, heading: &str) -> Vec<(String, String)> {
    let start = doc.find(heading).expect("heading");
    doc[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").collect();
            Some((
                cells.first()?.trim().replace('`', ""),
                cells.get(1)?.trim().replace('`', ""),
            ))
        })
        .collect()
}

fn doc(name: &str) -> String {
    fs::read_to_string(ferrite_e2e::workspace_root().join("docs").join(name)).expect("doc")
}

#[test]
fn control_md_lists_every_option_with_the_meaning_help_gives() {
    let help: Vec<(String, String)> = help_rows()
        .into_iter()
        .map(|(o, m)| (o, m.replace('`', "")))
        .collect();
    assert!(help.len() >= 45, "{help:?}");
    let table = table_after(&doc("control.md"), "## `ferrited` options");
    for row in &help {
        assert!(
            table.contains(row),
            "`ferrited --help` says {row:?}; docs/control.md's table does not"
        );
    }
    for row in &table {
        assert!(
            help.contains(row),
            "docs/control.md lists {row:?}; `ferrited --help` does not"
        );
    }
}

#[test]
fn configure_md_names_the_command_line_twin_of_each_option() {
    let help = help_rows();
    let names: Vec<String> = help
        .iter()
        .filter_map(|(o, _)| o.split_whitespace().next().map(str::to_owned))
        .collect();
    let accepted_only: Vec<&String> = names
        .iter()
        .zip(&help)
        .filter(|(_, (_, m))| m.starts_with("Accepted"))
        .map(|(n, _)| n)
        .collect();
    let configure = doc("configure.md");
    let mut twins = 0;
    for line in configure.lines().filter(|l| l.starts_with("| `")) {
        let first = line.trim_matches('|').split(" | ").next().unwrap_or("");
        for option in first.split(", ").map(|c| c.trim().trim_matches('`')) {
            let flag = format!("--{option}");
            if !names.contains(&flag) {
                continue;
            }
            twins += 1;
            // The row names the command-line option, and says it is acted on unless the
            // option is only accepted.
            assert!(
                line.contains(&format!("`{flag}")) || line.contains(&format!("ferrited {flag}")),
                "docs/configure.md's `{option}` row does not name {flag}: {line}"
            );
            let not_acted = line.contains(&format!("`{option}` not acted on"))
                || line.contains("| not acted on");
            assert!(
                !not_acted || accepted_only.contains(&&flag),
                "docs/configure.md says `{option}` is not acted on; {flag} is: {line}"
            );
        }
    }
    assert!(
        twins >= 10,
        "only {twins} cc_config options with a twin found"
    );
    // Every `ferrited --option` the docs name exists.
    for name in [
        "configure.md",
        "control.md",
        "troubleshoot.md",
        "install.md",
    ] {
        let text = doc(name);
        for (i, _) in text.match_indices("ferrited --") {
            let opt: String = text[i + "ferrited ".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            assert!(
                names.contains(&opt) || opt == "--help" || opt == "--version",
                "docs/{name} names `ferrited {opt}`, which ferrited does not take"
            );
        }
    }
}

#[test]
fn exit_before_upload_exits_when_an_upload_would_start_and_reset_project_drops_the_tasks() {
    use ferrite_e2e::testproject::{client_dir, Server, KEY};
    let tmp = tempfile::tempdir().expect("tmp");
    let server = Server::start(tmp.path(), &["--jobs", "2"]);
    let dir = client_dir(tmp.path(), "");
    let d = dir.to_str().expect("utf-8").to_owned();
    let port = free_port().to_string();
    let mut p = Proc::ferrited(&[
        "--dir",
        &d,
        "--gui_rpc_port",
        &port,
        "--skip_cpu_benchmarks",
        "--no_gpus",
        "--attach_project",
        &server.url,
        KEY,
        "-exit_before_upload",
    ]);
    let status = p.wait(Duration::from_secs(150));
    let out = p.output();
    assert!(status.success(), "{status}: {out}");
    assert!(out.contains("(--exit_before_upload)"), "{out}");
    assert!(!out.contains("Started upload"), "{out}");
    // A finished task waits for its upload in the saved state.
    let state = fs::read_to_string(dir.join("client_state.xml")).expect("state");
    assert!(state.contains("<state>4</state>"), "{out}\n{state}");

    // --reset_project (URL without its slash): the tasks are dropped, the project stays.
    let mut p = Proc::ferrited(&[
        "--dir",
        &d,
        "--gui_rpc_port",
        &port,
        "--skip_cpu_benchmarks",
        "--no_gpus",
        "--reset_project",
        server.url.trim_end_matches('/'),
        // The project asks for work again at once: start none of it, so nothing new can
        // reach the uploading state.
        "--exit_before_start",
    ]);
    p.wait_for("entering main loop", T);
    p.signal(libc::SIGTERM);
    assert!(p.wait(T).success(), "{}", p.output());
    assert!(p.output().contains("(--reset_project)"), "{}", p.output());
    let state = fs::read_to_string(dir.join("client_state.xml")).expect("state");
    assert!(
        !state.contains("<state>4</state>"),
        "the finished task is dropped: {state}"
    );
    assert!(state.contains(&format!("<master_url>{}</master_url>", server.url)));
}
