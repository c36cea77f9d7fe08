//! Ferrite's GUI RPC replies beside the official client's (Debian's `boinc` 7.20.5), on
//! equivalent state: each client has its own copy of the test project (same apps, same jobs,
//! uploads failing, a notice in every scheduler reply), the same command line (GPU detection
//! on: both see the host's OpenCL CPU platforms, if any), the same `cc_config.xml` (4 CPUs)
//! and the same preferences, and is asked once two tasks run, two uploads back off after a
//! failure, the event log has messages and the scheduler's notice is shown. Every read-only
//! request is then sent to both, each reply is read into a tree and compared element by
//! element: elements one client sends and the other does not, and values that differ where
//! both are deterministic (the few inherently different values are listed in [`IGNORED`] and
//! [`ZERO_OR_SET`], with the reason).
//!
//! Every difference must be listed in docs/migrate.md ("GUI RPC replies that differ from the
//! official client"), and every listed difference must still occur, so the table stays true.
//! The test prints the table it found in the doc's row format; with
//! `FERRITE_WRITE_DIFF_TABLE=1` it rewrites the doc's table itself (keeping the reason of each
//! row still found; new rows say "to be fixed"). `FERRITE_KEEP_REPLIES=DIR` keeps every
//! normalised reply of both clients in DIR.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ferrite_e2e::testproject::{self, client_dir_in, http, Server, ShellApp, KEY};
use ferrite_e2e::{boinccmd_bounded, free_port, workspace_root, GuiRpcSession, Proc};
use ferrite_gui_rpc::Request;
use ferrite_proto::xml::{XmlError, XmlReader};

/// The notice the test project sends in every scheduler reply.
const NOTICE: &str = "Ferrite Test Project news: read the forum";

/// The doc section the table lives in.
const SECTION: &str = "## GUI RPC replies that differ from the official client";

/// Values not compared at all (the elements' presence still is): figures measured on the
/// host or in the client at the moment, which may be zero or not by chance. A pattern is an
/// element name, `*suffix` of a name, or `parent/name`.
const IGNORED: &[(&str, &str)] = &[
    (
        "*cpu_time",
        "CPU time measured; a shell app's can be 0 or a few ms",
    ),
    (
        "final_elapsed_time",
        "measured; the official client counts a task that ends within a poll as 0 s",
    ),
    ("fraction_done", "progress measured at the moment"),
    ("*working_set_size*", "memory measured"),
    ("swap_size", "memory measured"),
    ("page_fault_rate", "measured"),
    ("xfer_speed", "measured"),
    ("bytes_xferred", "measured"),
    ("m_swap", "measured"),
    ("available_ram", "a GPU's free memory, measured"),
    ("d_free", "disk space measured"),
    ("d_total", "disk space measured"),
    ("d_allowed", "derived from the free disk space measured"),
    ("d_boinc", "disk space measured"),
    ("pid", "a process id"),
    (
        "slot",
        "a slot is the first free one when the task starts: it follows the order its files arrived",
    ),
    ("body", "the event log: each client's own wording"),
    ("seqno", "the event log: how many lines each client logged"),
    (
        "network_status",
        "online (0) for 10 s after any HTTP exchange, otherwise 2 (\"don't need a \
         connection\"): it depends on the moment",
    ),
    ("host_cpid", "random"),
    ("nonce", "random"),
];

/// Values compared only as zero, empty or set: instants, durations and figures that grow as
/// the clients run, which are never equal but which a client sets or leaves at zero by the
/// protocol's rules.
const ZERO_OR_SET: &[(&str, &str)] = &[
    ("*time*", "an instant or a duration"),
    ("*_duration", "a duration"),
    ("previous_uptime", "a duration"),
    ("now", "an instant"),
    ("report_deadline", "an instant"),
    ("p_calculated", "an instant"),
    ("rsc_backoff_time/value", "an instant"),
    ("time_so_far", "a duration measured"),
    (
        "last_bytes_xferred",
        "bytes sent before the failure: depends on each client's headers",
    ),
    ("rec", "recent credit: grows with the time tasks ran"),
    ("sched_priority", "follows the recent credit"),
    ("disk_share", "follows the free disk space"),
    ("disk_usage", "the project's files as measured on disk"),
    ("avg_up", "a transfer rate measured"),
    ("avg_down", "a transfer rate measured"),
    ("bwup", "a transfer rate measured"),
    ("bwdown", "a transfer rate measured"),
    (
        "dx/up",
        "bytes counted on the wire: depends on each client's headers",
    ),
    (
        "dx/down",
        "bytes counted on the wire: depends on each client's headers",
    ),
];

/// Elements that name the items of a list: besides their values, their order is compared (a
/// GUI shows the items in the order it gets them).
const ORDERED: &[&str] = &[
    "project/master_url",
    "project/project_name",
    "result/name",
    "workunit/name",
    "file_transfer/name",
    "app/name",
];

/// The requests whose results are the active tasks, listed in the order they started.
const ACTIVE_LISTS: &[&str] = &[
    "get_results (active_only)",
    "get_screensaver_tasks",
    "get_simple_gui_info",
];

/// The read-only requests, as BOINC Manager and `boinccmd` send them: (label, request body).
/// `{URL}` stands for the client's project URL.
const REQUESTS: &[(&str, &str)] = &[
    (
        "exchange_versions",
        "<exchange_versions>\n<major>7</major>\n<minor>20</minor>\n<release>5</release>\n\
         </exchange_versions>\n",
    ),
    ("get_all_projects_list", "<get_all_projects_list/>\n"),
    ("get_cc_status", "<get_cc_status/>\n"),
    ("get_daily_xfer_history", "<get_daily_xfer_history/>\n"),
    ("get_disk_usage", "<get_disk_usage/>\n"),
    ("get_file_transfers", "<get_file_transfers/>\n"),
    ("get_host_info", "<get_host_info/>\n"),
    (
        "get_messages",
        "<get_messages>\n<seqno>0</seqno>\n</get_messages>\n",
    ),
    ("get_message_count", "<get_message_count/>\n"),
    ("get_newer_version", "<get_newer_version/>\n"),
    (
        "get_notices",
        "<get_notices>\n<seqno>0</seqno>\n</get_notices>\n",
    ),
    (
        "get_notices_public",
        "<get_notices_public>\n<seqno>0</seqno>\n</get_notices_public>\n",
    ),
    ("get_old_results", "<get_old_results/>\n"),
    ("get_project_status", "<get_project_status/>\n"),
    (
        "get_results",
        "<get_results>\n<active_only>0</active_only>\n</get_results>\n",
    ),
    (
        "get_results (active_only)",
        "<get_results>\n<active_only>1</active_only>\n</get_results>\n",
    ),
    ("get_screensaver_tasks", "<get_screensaver_tasks/>\n"),
    ("get_simple_gui_info", "<get_simple_gui_info/>\n"),
    ("get_state", "<get_state/>\n"),
    ("get_statistics", "<get_statistics/>\n"),
    ("get_proxy_settings", "<get_proxy_settings/>\n"),
    ("acct_mgr_info", "<acct_mgr_info/>\n"),
    ("acct_mgr_rpc_poll", "<acct_mgr_rpc_poll/>\n"),
    ("get_cc_config", "<get_cc_config/>\n"),
    ("get_global_prefs_file", "<get_global_prefs_file/>\n"),
    (
        "get_global_prefs_override",
        "<get_global_prefs_override/>\n",
    ),
    ("get_global_prefs_working", "<get_global_prefs_working/>\n"),
    (
        "get_app_config",
        "<get_app_config>\n<url>{URL}</url>\n</get_app_config>\n",
    ),
    ("get_project_init_status", "<get_project_init_status/>\n"),
    ("get_project_config_poll", "<get_project_config_poll/>\n"),
    ("lookup_account_poll", "<lookup_account_poll/>\n"),
    ("create_account_poll", "<create_account_poll/>\n"),
    ("project_attach_poll", "<project_attach_poll/>\n"),
];

/// The label in [`REQUESTS`] of a read-only request; `None` for a request that changes
/// something (or starts a web RPC) and for Ferrite's own `ferrite_explain`. The match names
/// every request, so a new one must be sorted here before this test builds.
fn read_only_label(r: &Request) -> Option<&'static str> {
    use Request as R;
    Some(match r {
        R::ExchangeVersions { .. } => "exchange_versions",
        R::GetAllProjectsList => "get_all_projects_list",
        R::GetCcStatus => "get_cc_status",
        R::GetDiskUsage => "get_disk_usage",
        R::GetDailyXferHistory => "get_daily_xfer_history",
        R::GetFileTransfers => "get_file_transfers",
        R::GetHostInfo => "get_host_info",
        R::GetMessages { .. } => "get_messages",
        R::GetMessageCount => "get_message_count",
        R::GetNewerVersion => "get_newer_version",
        R::GetNoticesPublic { .. } => "get_notices_public",
        R::GetNotices { .. } => "get_notices",
        R::GetOldResults => "get_old_results",
        R::GetProjectStatus => "get_project_status",
        R::GetResults { active_only: false } => "get_results",
        R::GetResults { active_only: true } => "get_results (active_only)",
        R::GetScreensaverTasks => "get_screensaver_tasks",
        R::GetSimpleGuiInfo => "get_simple_gui_info",
        R::GetState => "get_state",
        R::GetStatistics => "get_statistics",
        R::GetProxySettings => "get_proxy_settings",
        R::AcctMgrInfo => "acct_mgr_info",
        R::AcctMgrRpcPoll => "acct_mgr_rpc_poll",
        R::GetCcConfig => "get_cc_config",
        R::GetGlobalPrefsFile => "get_global_prefs_file",
        R::GetGlobalPrefsOverride => "get_global_prefs_override",
        R::GetGlobalPrefsWorking => "get_global_prefs_working",
        R::GetAppConfig { .. } => "get_app_config",
        R::GetProjectInitStatus => "get_project_init_status",
        R::GetProjectConfigPoll => "get_project_config_poll",
        R::LookupAccountPoll => "lookup_account_poll",
        R::CreateAccountPoll => "create_account_poll",
        R::ProjectAttachPoll => "project_attach_poll",
        // Ferrite only: nothing to compare with.
        R::FerriteExplain => return None,
        // Changes something, or starts a web RPC.
        R::RunGraphicsApp { .. }
        | R::ResultOp { .. }
        | R::FileTransferOp { .. }
        | R::ProjectOp { .. }
        | R::SetRunMode { .. }
        | R::SetGpuMode { .. }
        | R::SetNetworkMode { .. }
        | R::NetworkAvailable
        | R::Quit
        | R::ReadCcConfig
        | R::ReadGlobalPrefsOverride
        | R::ResetHostInfo
        | R::RunBenchmarks
        | R::SetHostInfo { .. }
        | R::SetLanguage { .. }
        | R::SetProxySettings { .. }
        | R::SetCcConfig { .. }
        | R::SetGlobalPrefsOverride { .. }
        | R::SetAppConfig { .. }
        | R::GetProjectConfig { .. }
        | R::LookupAccount(_)
        | R::CreateAccount(_)
        | R::ProjectAttach { .. }
        | R::AcctMgrRpc { .. } => return None,
    })
}

/// One element of a reply: its name, its text (leaves only) and its children.
#[derive(Debug, Default)]
struct Node {
    name: String,
    text: String,
    children: Vec<Node>,
}

/// The children of the element `r` has open; `src` is `r`'s source.
fn read_children(r: &mut XmlReader<'_>, src: &str) -> Result<Vec<Node>, XmlError> {
    let mut out = Vec::new();
    while let Some(tag) = r.next_child()? {
        let mut node = Node {
            name: tag.name().to_owned(),
            ..Node::default()
        };
        if !tag.is_empty() {
            let after = &src[tag.offset()..];
            let content = after.find('>').map_or("", |i| &after[i + 1..]);
            let content = content.trim_start();
            let container = content.starts_with('<')
                && !content.starts_with("<![CDATA[")
                && !content.starts_with("</");
            if container {
                let inner = format!("<e>{}</e>", r.inner_raw(&tag)?);
                let mut sub = XmlReader::new(&inner, "reply");
                sub.root("e")?;
                node.children = read_children(&mut sub, &inner)?;
            } else {
                node.text = r.text(&tag)?.trim().to_owned();
            }
        }
        out.push(node);
    }
    Ok(out)
}

/// A reply as a tree below `<boinc_gui_rpc_reply>`.
fn parse_reply(xml: &str) -> Result<Vec<Node>, XmlError> {
    let mut r = XmlReader::new(xml, "reply");
    r.root("boinc_gui_rpc_reply")?;
    read_children(&mut r, xml)
}

/// What a reply holds at one element path (`results/result/state`): whether any element
/// there has children, and the values of those that do not.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Slot {
    container: bool,
    values: BTreeSet<String>,
    /// The values in document order.
    order: Vec<String>,
}

/// Every element path of `nodes`, with what is there.
fn flatten(nodes: &[Node], prefix: &str, out: &mut BTreeMap<String, Slot>) {
    for n in nodes {
        let path = if prefix.is_empty() {
            n.name.clone()
        } else {
            format!("{prefix}/{}", n.name)
        };
        let slot = out.entry(path.clone()).or_default();
        if n.children.is_empty() {
            slot.values.insert(n.text.clone());
            slot.order.push(n.text.clone());
        } else {
            slot.container = true;
            flatten(&n.children, &path, out);
        }
    }
}

/// Whether `path` matches one of `list`'s patterns.
fn matches(list: &[(&str, &str)], path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    list.iter().any(|(pat, _)| {
        if pat.contains('/') {
            path == *pat || path.ends_with(&format!("/{pat}"))
        } else if let Some(inner) = pat.strip_prefix('*').and_then(|p| p.strip_suffix('*')) {
            name.contains(inner)
        } else if let Some(suffix) = pat.strip_prefix('*') {
            name.ends_with(suffix)
        } else {
            name == *pat
        }
    })
}

/// A value as [`ZERO_OR_SET`] compares it.
fn zero_or_set(v: &str) -> String {
    if v.is_empty() {
        String::new()
    } else if v.parse::<f64>().is_ok_and(|x| x == 0.0) {
        "0".to_owned()
    } else {
        "(set)".to_owned()
    }
}

/// One row of the table: a request, an element path, what each client has there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Row {
    request: String,
    element: String,
    official: String,
    ferrite: String,
}

impl Row {
    fn markdown(&self, why: &str) -> String {
        format!(
            "| {} | `{}` | {} | {} | {} |",
            self.request, self.element, self.official, self.ferrite, why
        )
    }
}

/// A table cell for a set of values (and elements, when `container`): in backquotes, cut
/// short.
fn cell(values: &BTreeSet<String>, container: bool) -> String {
    let joined = values
        .iter()
        .map(|v| {
            if v.is_empty() {
                "(empty)".to_owned()
            } else if v == " …" {
                "…".to_owned()
            } else {
                v.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let joined = match (container, joined.is_empty()) {
        (true, true) => "(elements)".to_owned(),
        (true, false) => format!("(elements), {joined}"),
        (false, _) => joined,
    };
    let flat: String = joined
        .chars()
        .map(|c| match c {
            '\n' | '\r' | '\t' => ' ',
            '|' => '/',
            '`' => '\'',
            c => c,
        })
        .collect();
    let short: String = flat.chars().take(48).collect();
    let short = if short.len() < flat.len() {
        format!("{short}…")
    } else {
        short
    };
    format!("`{short}`")
}

/// `values` for a cell beside `other`: all of them when they fit, else only those `other`
/// lacks, after a `…` for the ones both send.
fn only(values: &BTreeSet<String>, other: &BTreeSet<String>) -> BTreeSet<String> {
    let len: usize = values.iter().map(|v| v.len() + 2).sum();
    if len <= 48 || values.is_disjoint(other) {
        return values.clone();
    }
    let mut out: BTreeSet<String> = values.difference(other).cloned().collect();
    // "…" sorts after every ASCII value: put the marker first with a leading space.
    out.insert(" …".to_owned());
    out
}

/// The differences between two replies to `request`.
fn differences(
    request: &str,
    official: &BTreeMap<String, Slot>,
    ours: &BTreeMap<String, Slot>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    let parent_in = |m: &BTreeMap<String, Slot>, p: &str| match p.rsplit_once('/') {
        Some((parent, _)) => m.contains_key(parent),
        None => true,
    };
    // Elements one client sends and the other does not (the outermost one only).
    for (path, _) in official.iter().filter(|(p, _)| !ours.contains_key(*p)) {
        if parent_in(ours, path) {
            rows.push(Row {
                request: request.to_owned(),
                element: path.clone(),
                official: "sent".into(),
                ferrite: "not sent".into(),
            });
        }
    }
    for (path, _) in ours.iter().filter(|(p, _)| !official.contains_key(*p)) {
        if parent_in(official, path) {
            rows.push(Row {
                request: request.to_owned(),
                element: path.clone(),
                official: "not sent".into(),
                ferrite: "sent".into(),
            });
        }
    }
    // Values, where both send the element and it is deterministic.
    for (path, o) in official {
        let Some(f) = ours.get(path) else { continue };
        if matches(IGNORED, path) {
            continue;
        }
        let (ov, fv) = if matches(ZERO_OR_SET, path) {
            let classes = |s: &Slot| -> BTreeSet<String> {
                s.values.iter().map(|v| zero_or_set(v)).collect()
            };
            (classes(o), classes(f))
        } else {
            (o.values.clone(), f.values.clone())
        };
        if ov == fv && o.container == f.container {
            // The lists of active tasks follow the order the tasks started, which follows
            // when each task's files arrived (as its slot does): their order is a moment's.
            let by_start = ACTIVE_LISTS.contains(&request) && path.ends_with("result/name");
            let ordered = !by_start && ORDERED.iter().any(|p| matches(&[(p, "")], path));
            if ordered && o.order != f.order {
                let seq = |s: &Slot| {
                    let joined = s.order.join(", ");
                    cell(&BTreeSet::from([joined]), false)
                };
                rows.push(Row {
                    request: request.to_owned(),
                    element: format!("{path} (order)"),
                    official: seq(o),
                    ferrite: seq(f),
                });
            }
            continue;
        }
        rows.push(Row {
            request: request.to_owned(),
            element: path.clone(),
            official: cell(&only(&ov, &fv), o.container),
            ferrite: cell(&only(&fv, &ov), f.container),
        });
    }
    rows
}

/// The lines of a `get_messages` reply: body → (field → value) for every other field of the
/// line, the first line with each body.
fn event_log(tree: &[Node]) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for msg in tree
        .iter()
        .filter(|n| n.name == "msgs")
        .flat_map(|n| &n.children)
    {
        let field = |name: &str| msg.children.iter().find(|c| c.name == name);
        let Some(body) = field("body") else { continue };
        let rest: BTreeMap<String, String> = msg
            .children
            .iter()
            .filter(|c| c.name != "body" && !matches(IGNORED, &c.name))
            .filter(|c| !matches(ZERO_OR_SET, &c.name))
            .map(|c| (c.name.clone(), c.text.clone()))
            .collect();
        out.entry(body.text.clone()).or_insert(rest);
    }
    out
}

/// The event log lines both clients logged in the same words, compared field by field (the
/// project a line names, its priority): one row per field, with the values that differ.
fn same_line_differences(
    request: &str,
    official: &BTreeMap<String, BTreeMap<String, String>>,
    ours: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<Row> {
    let mut by_field: BTreeMap<&str, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for (body, o) in official {
        let Some(f) = ours.get(body) else { continue };
        for (name, ov) in o {
            let fv = f.get(name).cloned().unwrap_or_else(|| "(not sent)".into());
            if *ov != fv {
                let e = by_field.entry(name).or_default();
                e.0.insert(ov.clone());
                e.1.insert(fv);
            }
        }
    }
    by_field
        .into_iter()
        .map(|(name, (o, f))| Row {
            request: request.to_owned(),
            element: format!("msgs/msg/{name} (same line)"),
            official: cell(&o, false),
            ferrite: cell(&f, false),
        })
        .collect()
}

/// The table in docs/migrate.md: each row with its reason.
fn documented(doc: &str) -> BTreeMap<Row, String> {
    let section = doc
        .split(SECTION)
        .nth(1)
        .unwrap_or_else(|| panic!("docs/migrate.md has a section '{SECTION}'"));
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut rows = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = split_row(line);
        if cells.len() < 5 || !cells[1].starts_with('`') {
            continue;
        }
        rows.insert(
            Row {
                request: cells[0].to_owned(),
                element: cells[1].trim_matches('`').to_owned(),
                official: cells[2].to_owned(),
                ferrite: cells[3].to_owned(),
            },
            cells[4..].join(" | "),
        );
    }
    rows
}

/// The cells of a markdown table row (cells hold no `|`: [`cell`] writes `/` instead).
fn split_row(line: &str) -> Vec<&str> {
    line.trim()
        .trim_matches('|')
        .split(" | ")
        .map(str::trim)
        .collect()
}

/// The table for `found`, each row with its documented reason ("to be fixed" when new).
fn table(found: &BTreeSet<Row>, doc: &BTreeMap<Row, String>) -> String {
    let mut out =
        String::from("| request | element | official | Ferrite | why |\n|---|---|---|---|---|\n");
    for row in found {
        let why = doc
            .get(row)
            .or_else(|| {
                doc.iter()
                    .find(|(r, _)| r.request == row.request && r.element == row.element)
                    .map(|(_, w)| w)
            })
            .map_or("to be fixed", String::as_str);
        out.push_str(&row.markdown(why));
        out.push('\n');
    }
    out
}

/// `doc` with the section's table replaced by `table`.
fn with_table(doc: &str, table: &str) -> String {
    let start = doc
        .find(SECTION)
        .unwrap_or_else(|| panic!("docs/migrate.md has a section '{SECTION}'"));
    let end = doc[start + SECTION.len()..]
        .find("\n## ")
        .map_or(doc.len(), |i| start + SECTION.len() + i + 1);
    let section = &doc[start..end];
    let mut lines: Vec<&str> = section.lines().collect();
    let first = lines.iter().position(|l| l.starts_with("| request |"));
    let new: Vec<&str> = table.lines().collect();
    match first {
        Some(i) => {
            let n = lines[i..].iter().take_while(|l| l.starts_with('|')).count();
            lines.splice(i..i + n, new);
        }
        None => {
            lines.push("");
            lines.extend(new);
        }
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let mut section = lines.join("\n");
    section.push('\n');
    if end < doc.len() {
        section.push('\n');
    }
    format!("{}{}{}", &doc[..start], section, &doc[end..])
}

/// A client under test: its process, GUI RPC port, data directory and project URL.
struct Client {
    who: &'static str,
    proc: Proc,
    port: u16,
    dir: PathBuf,
    url: String,
}

impl Client {
    /// Starts the official client (`boinc`, when `who` is "official") or `ferrited` on
    /// `dir`, attached to `server`, with the command line both take ([`Client::wait_answering`]
    /// waits until it answers GUI RPC: both are started first, so that both have run as long
    /// when their replies are compared).
    fn start(who: &'static str, dir: &Path, server: &Server) -> Client {
        let port = free_port();
        let d = dir.to_str().expect("utf-8 path");
        let port_arg = port.to_string();
        let args = [
            "--dir",
            d,
            "--gui_rpc_port",
            &port_arg,
            "--skip_cpu_benchmarks",
            "--no_info_fetch",
            "--attach_project",
            &server.url,
            KEY,
        ];
        let proc = if who == "official" {
            let mut cmd = Command::new("boinc");
            cmd.args(args).current_dir(dir);
            Proc::spawn(cmd)
        } else {
            Proc::ferrited(&args)
        };
        Client {
            who,
            proc,
            port,
            dir: dir.to_path_buf(),
            url: server.url.clone(),
        }
    }

    /// Waits (bounded) until the client answers GUI RPC.
    fn wait_answering(&self) {
        let t0 = Instant::now();
        while boinccmd_bounded(
            self.port,
            Some("pw"),
            &["--get_cc_status"],
            Duration::from_secs(10),
        )
        .code
            != 0
        {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{} does not answer GUI RPC:\n{}",
                self.who,
                self.proc.output()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `reply` with what differs between the two set-ups by construction (each client's
    /// data directory, its own copy of the project) written the same way.
    fn normalise(&self, reply: &str) -> String {
        let base = self.url.trim_end_matches('/');
        let dir_name = base.trim_start_matches("http://").replace(':', "_");
        reply
            .replace(self.dir.to_str().unwrap_or("/nonexistent"), "DATA_DIR")
            .replace(base, "PROJECT_URL")
            .replace(&dir_name, "PROJECT_DIR")
    }

    /// What the client has not reached yet of the state compared: two tasks running, both
    /// finished tasks' uploads backing off after a failure, the scheduler's notice shown.
    fn missing(&self, rpc: &mut GuiRpcSession) -> Vec<&'static str> {
        let mut missing = Vec::new();
        let results = rpc.call("<get_results>\n<active_only>0</active_only>\n</get_results>\n");
        let executing = results
            .matches("<active_task_state>1</active_task_state>")
            .count();
        if executing < 2 {
            missing.push("two tasks running");
        }
        let xfers = rpc.call("<get_file_transfers/>\n");
        let backing_off = xfers
            .split("<file_transfer>")
            .skip(1)
            .filter(|x| {
                x.split("<num_retries>")
                    .nth(1)
                    .and_then(|t| t.split('<').next())
                    .and_then(|n| n.trim().parse::<i64>().ok())
                    .is_some_and(|n| n >= 1)
            })
            .count();
        if backing_off < 2 {
            missing.push("two uploads backing off");
        }
        let notices = rpc.call("<get_notices>\n<seqno>0</seqno>\n</get_notices>\n");
        if !notices.contains(NOTICE) {
            missing.push("the scheduler's notice");
        }
        // A client that fetched the project's news has them as notices.
        let fetched = testproject::status(&self.url)["feed_fetches"]
            .as_u64()
            .unwrap_or(0);
        if fetched > 0 && notices.matches("<notice>").count() < 3 {
            missing.push("the project's news as notices");
        }
        missing
    }
}

impl Drop for Client {
    /// The official client, stopped, asks its apps to quit and waits for them; the test's
    /// plain shell apps ignore that, and would outlive a client killed after its grace
    /// period. So every process working in one of its slots is ended first.
    fn drop(&mut self) {
        if self.who != "official" {
            return;
        }
        let slots = self.dir.join("slots");
        let Ok(procs) = fs::read_dir("/proc") else {
            return;
        };
        for e in procs.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(&slots)) {
                // SAFETY: a signal to a process of this test's official client.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// Each client's own copy of the test project: `alpha` runs for ten minutes, `beta` ends at
/// once; four jobs (two of each); every upload fails (HTTP 500), so finished tasks' uploads
/// back off; every scheduler reply carries a notice.
fn project(dir: &Path) -> Server {
    fs::create_dir_all(dir).expect("mkdir");
    Server::start_apps(
        dir,
        &[
            ShellApp {
                name: "alpha",
                word: "hello",
                prelude: "sleep 600\n",
            },
            ShellApp {
                name: "beta",
                word: "goodbye",
                prelude: "",
            },
        ],
        &[
            "--jobs",
            "4",
            "--fault",
            "upload-500:always",
            "--notice",
            NOTICE,
        ],
    )
}

/// A data directory for either client: 4 CPUs, the same preferences, password `pw`, the
/// project's list (as `all_projects_list.xml`) and a `notices/` folder (Debian's package
/// makes one; the official client does not, and fetches no news without it).
fn data_dir(dir: &Path, server: &Server) -> PathBuf {
    let d = client_dir_in(dir, "", "");
    fs::create_dir_all(d.join("notices")).expect("notices dir");
    let list = http(&server.url, "GET", "project_list.php", "");
    assert!(list.contains("</projects>"), "project list: {list}");
    fs::write(d.join("all_projects_list.xml"), list).expect("project list");
    d
}

#[test]
fn gui_rpc_replies_match_the_official_clients() {
    let test = "gui_rpc_replies_match_the_official_clients";
    if !ferrite_e2e::peer_or_skip(test, &["boinc", "boinccmd"]) {
        return;
    }
    // Every request compared is one the daemon only reads, and every such request is compared.
    let labels: BTreeSet<&str> = REQUESTS.iter().map(|(l, _)| *l).collect();
    for (label, body) in REQUESTS {
        let xml = format!(
            "<boinc_gui_rpc_request>\n{}</boinc_gui_rpc_request>\n",
            body.replace("{URL}", "http://x/")
        );
        let req = ferrite_gui_rpc::request::parse_request(&xml)
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(read_only_label(&req), Some(*label), "{label}");
    }
    assert_eq!(labels.len(), REQUESTS.len());

    let tmp = tempfile::tempdir().expect("tempdir");
    let official_project = project(&tmp.path().join("official-project"));
    let ferrite_project = project(&tmp.path().join("ferrite-project"));
    let odir = data_dir(&tmp.path().join("official"), &official_project);
    let fdir = data_dir(&tmp.path().join("ferrite"), &ferrite_project);
    // `ferrited` built (when needed) before either starts: both run as long when compared.
    let _ = ferrite_e2e::bin("ferrited");
    let official = Client::start("official", &odir, &official_project);
    let ferrite = Client::start("Ferrite", &fdir, &ferrite_project);
    official.wait_answering();
    ferrite.wait_answering();
    let mut sessions = [
        GuiRpcSession::open(official.port, "pw"),
        GuiRpcSession::open(ferrite.port, "pw"),
    ];
    let clients = [&official, &ferrite];

    // Both reach the state compared (bounded).
    let t0 = Instant::now();
    loop {
        let missing: Vec<(&str, Vec<&str>)> = clients
            .iter()
            .zip(sessions.iter_mut())
            .map(|(c, s)| (c.who, c.missing(s)))
            .filter(|(_, m)| !m.is_empty())
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "not reached: {missing:?}\n--- official ---\n{}\n--- ferrited ---\n{}",
            official.proc.output(),
            ferrite.proc.output()
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // Every request to both, one right after the other.
    let keep = std::env::var_os("FERRITE_KEEP_REPLIES").map(PathBuf::from);
    let mut found = BTreeSet::new();
    for (label, body) in REQUESTS {
        let mut trees = Vec::new();
        let mut logs = Vec::new();
        for (c, s) in clients.iter().zip(sessions.iter_mut()) {
            let reply = c.normalise(&s.call(&body.replace("{URL}", &c.url)));
            if let Some(k) = &keep {
                let _ = fs::create_dir_all(k);
                let name = format!("{}.{}.xml", label.replace([' ', '(', ')'], "_"), c.who);
                let _ = fs::write(k.join(name), &reply);
            }
            let tree = parse_reply(&reply)
                .unwrap_or_else(|e| panic!("{label}: {}'s reply: {e}\n{reply}", c.who));
            let mut flat = BTreeMap::new();
            flatten(&tree, "", &mut flat);
            trees.push(flat);
            logs.push(event_log(&tree));
        }
        found.extend(differences(label, &trees[0], &trees[1]));
        if *label == "get_messages" {
            found.extend(same_line_differences(label, &logs[0], &logs[1]));
        }
    }
    drop(sessions);
    drop(ferrite);
    drop(official);

    let doc_path = workspace_root().join("docs/migrate.md");
    let doc = fs::read_to_string(&doc_path).expect("docs/migrate.md");
    let listed = documented(&doc);
    let table = table(&found, &listed);
    println!("GUI RPC differences from the official client:\n{table}");
    if std::env::var("FERRITE_WRITE_DIFF_TABLE").is_ok_and(|v| v == "1") {
        fs::write(&doc_path, with_table(&doc, &table)).expect("write docs/migrate.md");
        println!("docs/migrate.md: table rewritten ({} rows)", found.len());
        return;
    }
    let listed_rows: BTreeSet<Row> = listed.keys().cloned().collect();
    let undocumented: Vec<String> = found
        .difference(&listed_rows)
        .map(|r| r.markdown("to be fixed"))
        .collect();
    let stale: Vec<String> = listed_rows
        .difference(&found)
        .map(|r| r.markdown(&listed[r]))
        .collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "docs/migrate.md '{}' is out of date (FERRITE_WRITE_DIFF_TABLE=1 rewrites it).\n\
         Differences not listed:\n{}\nListed but not seen:\n{}\n",
        SECTION.trim_start_matches("## "),
        undocumented.join("\n"),
        stale.join("\n")
    );
}

#[test]
fn differences_are_outermost_elements_deterministic_values_and_list_order() {
    let flat = |xml: &str| {
        let mut out = BTreeMap::new();
        flatten(&parse_reply(xml).expect("reply"), "", &mut out);
        out
    };
    let official = flat(
        "<boinc_gui_rpc_reply>\n<r>\n<result><name>b</name><state>2</state><pid>1</pid>\
         <elapsed_time>3.5</elapsed_time><gone><x>1</x></gone></result>\n\
         <result><name>a</name><state>4</state><pid>2</pid><elapsed_time>0</elapsed_time>\
         </result>\n</r>\n</boinc_gui_rpc_reply>\n",
    );
    let ours = flat(
        "<boinc_gui_rpc_reply>\n<r>\n<result><name>a</name><state>4</state><pid>7</pid>\
         <elapsed_time>0</elapsed_time><new/></result>\n\
         <result><name>b</name><state>3</state><pid>8</pid><elapsed_time>0</elapsed_time>\
         </result>\n</r>\n</boinc_gui_rpc_reply>\n",
    );
    let rows: Vec<String> = differences("q", &official, &ours)
        .iter()
        .map(|r| format!("{} {} {}", r.element, r.official, r.ferrite))
        .collect();
    assert_eq!(
        rows,
        [
            "r/result/gone sent not sent",
            "r/result/new not sent sent",
            "r/result/elapsed_time `(set), 0` `0`",
            "r/result/name (order) `b, a` `a, b`",
            "r/result/state `2, 4` `3, 4`",
        ],
        "pids are not compared, times only as zero or set, and only the outermost missing \
         element counts"
    );
    assert!(differences("q", &official, &official).is_empty());
}

#[test]
fn event_log_lines_in_the_same_words_are_compared_field_by_field() {
    let log = |xml: &str| event_log(&parse_reply(xml).expect("reply"));
    let official = log(
        "<boinc_gui_rpc_reply>\n<msgs>\n\
         <msg><project>P</project><pri>1</pri><seqno>1</seqno><body><![CDATA[\nStarted x\n]]></body><time>5</time></msg>\n\
         <msg><project></project><pri>1</pri><seqno>2</seqno><body>Only official</body><time>6</time></msg>\n\
         </msgs>\n</boinc_gui_rpc_reply>\n",
    );
    let ours = log(
        "<boinc_gui_rpc_reply>\n<msgs>\n\
         <msg><project>http://p/</project><pri>1</pri><seqno>9</seqno><body>Started x</body><time>7</time></msg>\n\
         </msgs>\n</boinc_gui_rpc_reply>\n",
    );
    let rows = same_line_differences("get_messages", &official, &ours);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].element, "msgs/msg/project (same line)");
    assert_eq!(
        (rows[0].official.as_str(), rows[0].ferrite.as_str()),
        ("`P`", "`http://p/`")
    );
    assert!(same_line_differences("get_messages", &official, &official).is_empty());
}

#[test]
fn the_table_is_read_back_as_written() {
    let mut found = BTreeSet::new();
    let v = |s: &str| BTreeSet::from([s.to_owned()]);
    found.insert(Row {
        request: "get_state".into(),
        element: "project/x".into(),
        official: cell(&v("a|b"), false),
        ferrite: cell(&BTreeSet::from(["".to_owned(), "1".to_owned()]), true),
    });
    let doc = format!("# T\n\n{SECTION}\n\nText.\n\n| request |\n|---|\n\n## Next\n\nmore\n");
    let t = table(&found, &BTreeMap::new());
    let written = with_table(&doc, &t);
    assert!(
        written.contains("Text.") && written.ends_with("## Next\n\nmore\n"),
        "{written}"
    );
    let back = documented(&written);
    assert_eq!(back.keys().cloned().collect::<BTreeSet<_>>(), found);
    assert_eq!(
        back.values().next().map(String::as_str),
        Some("to be fixed")
    );
    // Written again, the same document.
    assert_eq!(with_table(&written, &table(&found, &back)), written);
}
