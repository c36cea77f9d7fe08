//! What the `ferrite` command shows, read from GUI RPC replies: projects, tasks, the
//! client's modes and the event log. Reading is lenient, as BOINC GUIs read: unknown
//! elements are ignored and missing ones take defaults.

use std::collections::BTreeMap;

use quick_xml::events::Event;
use quick_xml::Reader;
use serde::Serialize;

/// The leaf values of one record element, keyed by their path below it (`active_task/slot`);
/// flags such as `<ready_to_report/>` have an empty value.
pub type Record = BTreeMap<String, String>;

/// Every `<tag>` element of `xml`, as a [`Record`]. A reply that is not well-formed yields
/// the records read before the fault.
pub fn records(xml: &str, tag: &str) -> Vec<Record> {
    let mut reader = Reader::from_str(xml);
    let mut out = Vec::new();
    let mut current: Option<Record> = None;
    let mut path: Vec<String> = Vec::new();
    let mut text = String::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if current.is_none() {
                    if name == tag {
                        current = Some(Record::new());
                        path.clear();
                    }
                    continue;
                }
                path.push(name);
                text.clear();
            }
            Ok(Event::Empty(e)) => {
                if let Some(r) = current.as_mut() {
                    let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                    let mut key = path.join("/");
                    if !key.is_empty() {
                        key.push('/');
                    }
                    key.push_str(&name);
                    r.insert(key, String::new());
                }
            }
            Ok(Event::Text(t)) => {
                if current.is_some() {
                    match t.unescape() {
                        Ok(s) => text.push_str(&s),
                        Err(_) => text.push_str(&String::from_utf8_lossy(&t)),
                    }
                }
            }
            Ok(Event::CData(t)) => {
                if current.is_some() {
                    text.push_str(&String::from_utf8_lossy(&t));
                }
            }
            Ok(Event::End(e)) => {
                let Some(r) = current.as_mut() else { continue };
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if path.is_empty() {
                    if name == tag {
                        out.extend(current.take());
                    }
                    continue;
                }
                let key = path.join("/");
                r.entry(key).or_insert_with(|| text.trim().to_owned());
                text.clear();
                path.pop();
            }
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    out
}

fn num(r: &Record, key: &str) -> f64 {
    r.get(key)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

fn int(r: &Record, key: &str) -> i64 {
    r.get(key).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

fn text(r: &Record, key: &str) -> String {
    r.get(key).cloned().unwrap_or_default()
}

fn flag(r: &Record, key: &str) -> bool {
    r.get(key)
        .is_some_and(|v| v.is_empty() || (v.trim() != "0" && !v.trim().is_empty()))
}

/// A project as `get_project_status` describes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Project {
    /// Master URL (the project's identity).
    pub master_url: String,
    /// Name (the URL until the project has told its name).
    pub name: String,
    /// Account name.
    pub user_name: String,
    /// Team name.
    pub team_name: String,
    /// Resource share.
    pub resource_share: f64,
    /// Total credit of the user.
    pub user_total_credit: f64,
    /// Total credit of this host.
    pub host_total_credit: f64,
    /// Suspended by the user.
    pub suspended_via_gui: bool,
    /// "No new tasks".
    pub dont_request_more_work: bool,
    /// Detach once its work is done.
    pub detach_when_done: bool,
    /// The project has ended.
    pub ended: bool,
}

impl Project {
    /// Reads the `<project>` records of a reply.
    pub fn all(xml: &str) -> Vec<Project> {
        records(xml, "project")
            .iter()
            .map(|r| {
                let url = text(r, "master_url");
                let name = text(r, "project_name");
                Project {
                    name: if name.is_empty() { url.clone() } else { name },
                    master_url: url,
                    user_name: text(r, "user_name"),
                    team_name: text(r, "team_name"),
                    resource_share: num(r, "resource_share"),
                    user_total_credit: num(r, "user_total_credit"),
                    host_total_credit: num(r, "host_total_credit"),
                    suspended_via_gui: flag(r, "suspended_via_gui"),
                    dont_request_more_work: flag(r, "dont_request_more_work"),
                    detach_when_done: flag(r, "detach_when_done"),
                    ended: flag(r, "ended"),
                }
            })
            .collect()
    }

    /// A short status word for tables.
    pub fn status(&self) -> String {
        let mut s = Vec::new();
        if self.suspended_via_gui {
            s.push("suspended");
        }
        if self.dont_request_more_work {
            s.push("no new tasks");
        }
        if self.detach_when_done {
            s.push("detach when done");
        }
        if self.ended {
            s.push("ended");
        }
        if s.is_empty() {
            "active".to_owned()
        } else {
            s.join(", ")
        }
    }
}

/// A task as `get_results` describes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Task {
    /// The task's project.
    pub project_url: String,
    /// Task (result) name.
    pub name: String,
    /// Its workunit.
    pub wu_name: String,
    /// What a person would call its state (`ready to run`, `running`, `suspended`, …).
    pub status: String,
    /// BOINC's result state number.
    pub state: i64,
    /// The app's process state, when it has a process record.
    pub active_task_state: Option<i64>,
    /// 0 uninitialized, 1 preempted, 2 scheduled (with a process record).
    pub scheduler_state: Option<i64>,
    /// Fraction done: the app's while it has a process record, else 0 before computing and
    /// 1 once computing ended (as BOINC Manager shows it).
    pub fraction_done: f64,
    /// Elapsed seconds (the final figure once done).
    pub elapsed_time: f64,
    /// Estimated seconds left.
    pub estimated_remaining: f64,
    /// Deadline, Unix time.
    pub report_deadline: f64,
    /// Suspended by the user.
    pub suspended_via_gui: bool,
    /// Done and waiting to be reported.
    pub ready_to_report: bool,
    /// Exit status (non-zero for failures and aborts).
    pub exit_status: i64,
}

/// Names of BOINC's result states.
fn state_name(state: i64) -> &'static str {
    match state {
        0 => "new",
        1 => "downloading",
        2 => "ready to run",
        3 => "computation error",
        4 => "uploading",
        5 => "ready to report",
        6 => "aborted",
        7 => "upload failed",
        _ => "unknown",
    }
}

impl Task {
    /// Reads the `<result>` records of a reply.
    pub fn all(xml: &str) -> Vec<Task> {
        records(xml, "result")
            .iter()
            .map(|r| {
                let state = int(r, "state");
                let has_task = r.contains_key("active_task/active_task_state");
                let active_task_state = has_task.then(|| int(r, "active_task/active_task_state"));
                let scheduler_state = has_task.then(|| int(r, "active_task/scheduler_state"));
                let suspended =
                    flag(r, "suspended_via_gui") || flag(r, "project_suspended_via_gui");
                let status = if state == 2 && suspended {
                    "suspended".to_owned()
                } else if state == 1 && flag(r, "ready_to_report") {
                    "download failed".to_owned()
                } else if state < 2 && suspended {
                    // Its input files still download (as with the official client); it
                    // will not start until resumed.
                    "suspended (files downloading)".to_owned()
                } else if state == 2 && scheduler_state == Some(2) && active_task_state == Some(1) {
                    "running".to_owned()
                } else if state == 2 && has_task {
                    "waiting to run".to_owned()
                } else {
                    state_name(state).to_owned()
                };
                Task {
                    project_url: text(r, "project_url"),
                    name: text(r, "name"),
                    wu_name: text(r, "wu_name"),
                    status,
                    state,
                    active_task_state,
                    scheduler_state,
                    // As BOINC Manager shows it: the app's report while there is a process
                    // record, else 0 before and 100 % after computing.
                    fraction_done: if has_task {
                        num(r, "active_task/fraction_done")
                    } else if state >= 3 {
                        1.0
                    } else {
                        0.0
                    },
                    elapsed_time: if has_task {
                        num(r, "active_task/elapsed_time")
                    } else {
                        num(r, "final_elapsed_time")
                    },
                    estimated_remaining: num(r, "estimated_cpu_time_remaining"),
                    report_deadline: num(r, "report_deadline"),
                    suspended_via_gui: flag(r, "suspended_via_gui"),
                    ready_to_report: flag(r, "ready_to_report"),
                    exit_status: int(r, "exit_status"),
                }
            })
            .collect()
    }
}

impl Task {
    /// Marks transfers the client's network suspension holds (`get_cc_status`), as the
    /// BOINC Manager does: `downloading (suspended: user request)`.
    pub fn note_network_suspension(tasks: &mut [Task], status: &Status) {
        let Some(reason) = &status.network.suspend_reason else {
            return;
        };
        for t in tasks {
            if t.status == "downloading" || t.status == "uploading" {
                t.status = format!("{} (suspended: {reason})", t.status);
            }
        }
    }
}

/// One run mode as `get_cc_status` reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mode {
    /// In force now: `always`, `auto` or `never`.
    pub current: String,
    /// The permanent mode.
    pub permanent: String,
    /// Seconds until the permanent mode applies again (0 = no temporary mode).
    pub delay: f64,
    /// Why it is suspended, if it is (`user request`, …).
    pub suspend_reason: Option<String>,
}

/// The client's status (`get_cc_status`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    /// Computing.
    pub cpu: Mode,
    /// GPU computing.
    pub gpu: Mode,
    /// Network use.
    pub network: Mode,
}

fn mode_name(n: i64) -> String {
    match n {
        1 => "always",
        2 => "auto",
        3 => "never",
        _ => "unknown",
    }
    .to_owned()
}

/// Names of BOINC's suspend reasons.
fn suspend_reason(n: i64) -> Option<String> {
    let s = match n {
        0 => return None,
        1 => "on batteries",
        2 => "computer in use",
        4 => "user request",
        8 => "time of day",
        16 => "benchmarks running",
        32 => "disk space",
        64 => "CPU throttle",
        128 => "no recent input",
        256 => "initial delay",
        512 => "exclusive app running",
        1024 => "CPU busy",
        2048 => "network transfer limit",
        4096 => "requested by operating system",
        _ => return Some(format!("reason {n}")),
    };
    Some(s.to_owned())
}

impl Status {
    /// Reads `<cc_status>`; `None` if the reply has none.
    pub fn parse(xml: &str) -> Option<Status> {
        let r = records(xml, "cc_status").into_iter().next()?;
        let mode = |p: &str| Mode {
            current: mode_name(int(&r, &format!("{p}_mode"))),
            permanent: mode_name(int(&r, &format!("{p}_mode_perm"))),
            delay: num(&r, &format!("{p}_mode_delay")),
            suspend_reason: suspend_reason(int(&r, &format!("{p}_suspend_reason"))),
        };
        Some(Status {
            cpu: mode("task"),
            gpu: mode("gpu"),
            network: mode("network"),
        })
    }
}

/// An event-log line (`get_messages`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// Sequence number.
    pub seqno: i64,
    /// Project name; empty for general lines.
    pub project: String,
    /// 1 info, 2 user alert, 3 internal error.
    pub priority: i64,
    /// Unix time.
    pub time: i64,
    /// The text.
    pub body: String,
}

impl Message {
    /// Reads the `<msg>` records of a reply.
    pub fn all(xml: &str) -> Vec<Message> {
        records(xml, "msg")
            .iter()
            .map(|r| Message {
                seqno: int(r, "seqno"),
                project: text(r, "project"),
                priority: int(r, "pri"),
                time: int(r, "time"),
                body: text(r, "body"),
            })
            .collect()
    }
}

/// A pending file transfer (`get_file_transfers`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transfer {
    /// The file's name.
    pub name: String,
    /// The project's master URL.
    pub project_url: String,
    /// The project's name, for people.
    pub project_name: String,
    /// Upload (true) or download.
    pub is_upload: bool,
    /// The file's size in bytes.
    pub nbytes: f64,
    /// Bytes moved so far in the current attempt (0 when no attempt is under way).
    pub bytes_xferred: f64,
    /// Bytes per second of the current attempt.
    pub xfer_speed: f64,
    /// Whether an attempt is under way (the reply has a `<file_xfer>`).
    pub active: bool,
    /// Failed attempts so far.
    pub num_retries: i64,
    /// Unix time of the next attempt, when waiting after a failure.
    pub next_request_time: f64,
    /// The file's status (0 not present, 1 present, negative: an error code).
    pub status: i64,
}

impl Transfer {
    /// Reads the `<file_transfer>` records of a reply.
    pub fn all(xml: &str) -> Vec<Transfer> {
        records(xml, "file_transfer")
            .iter()
            .map(|r| Transfer {
                name: text(r, "name"),
                project_url: text(r, "project_url"),
                project_name: text(r, "project_name"),
                is_upload: flag(r, "persistent_file_xfer/is_upload") || flag(r, "is_upload"),
                nbytes: num(r, "nbytes"),
                bytes_xferred: num(r, "file_xfer/bytes_xferred"),
                xfer_speed: num(r, "file_xfer/xfer_speed"),
                active: r.keys().any(|k| k.starts_with("file_xfer/")),
                num_retries: int(r, "persistent_file_xfer/num_retries"),
                next_request_time: num(r, "persistent_file_xfer/next_request_time"),
                status: int(r, "status"),
            })
            .collect()
    }

    /// `uploading`, `downloading`, `upload pending` or `download pending`.
    pub fn state(&self) -> String {
        let dir = if self.is_upload { "upload" } else { "download" };
        if self.active {
            format!("{dir}ing")
        } else {
            format!("{dir} pending")
        }
    }
}

/// The leaf values of a `<global_preferences>` document, by element path; `None` when the
/// text has no such document.
pub fn prefs(xml: &str) -> Option<Record> {
    records(xml, "global_preferences").into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    // From the official client's get_results reply (BOINC 7.20.5).
    const RESULTS: &str = "<results>
<result>
    <name>wu_short_0</name>
    <wu_name>wu_short</wu_name>
    <project_url>http://127.0.0.1:18080/</project_url>
    <final_elapsed_time>4.012057</final_elapsed_time>
    <exit_status>0</exit_status>
    <state>5</state>
    <report_deadline>1795938347.000000</report_deadline>
    <ready_to_report/>
</result>
<result>
    <name>wu_long_0</name>
    <wu_name>wu_long</wu_name>
    <project_url>http://127.0.0.1:18080/</project_url>
    <state>2</state>
    <estimated_cpu_time_remaining>7.293361</estimated_cpu_time_remaining>
<active_task>
    <active_task_state>1</active_task_state>
    <scheduler_state>2</scheduler_state>
    <fraction_done>0.250000</fraction_done>
    <elapsed_time>6.012103</elapsed_time>
</active_task>
</result>
</results>
";

    #[test]
    fn tasks_are_read_with_a_human_status() {
        let t = Task::all(RESULTS);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].name, "wu_short_0");
        assert_eq!(t[0].status, "ready to report");
        assert!(t[0].ready_to_report);
        assert_eq!(t[0].elapsed_time, 4.012057);
        assert_eq!(t[0].fraction_done, 1.0, "a computed task is 100 % done");
        assert_eq!(t[1].status, "running");
        assert_eq!(t[1].fraction_done, 0.25);
        assert_eq!(t[1].active_task_state, Some(1));
        assert_eq!(t[1].estimated_remaining, 7.293361);
    }

    #[test]
    fn a_task_without_a_process_is_done_only_once_computed() {
        let r = |state: u8| {
            format!("<results><result><name>r</name><state>{state}</state></result></results>")
        };
        assert_eq!(Task::all(&r(2))[0].fraction_done, 0.0);
        for done in [3, 4, 5, 6] {
            assert_eq!(Task::all(&r(done))[0].fraction_done, 1.0, "state {done}");
        }
    }

    #[test]
    fn suspended_downloads_do_not_read_as_plain_downloading() {
        let xml = "<results>\n\
            <result><name>a</name><state>1</state><suspended_via_gui/></result>\n\
            <result><name>b</name><state>1</state><project_suspended_via_gui/></result>\n\
            <result><name>c</name><state>1</state></result>\n\
            <result><name>d</name><state>1</state><ready_to_report/></result>\n\
            <result><name>e</name><state>4</state></result>\n\
            </results>\n";
        let mut t = Task::all(xml);
        let status: Vec<&str> = t.iter().map(|t| t.status.as_str()).collect();
        assert_eq!(
            status,
            [
                "suspended (files downloading)",
                "suspended (files downloading)",
                "downloading",
                "download failed",
                "uploading"
            ]
        );
        let net = Status::parse(
            "<cc_status>\n<network_suspend_reason>4</network_suspend_reason>\n</cc_status>\n",
        )
        .expect("status");
        Task::note_network_suspension(&mut t, &net);
        assert_eq!(t[2].status, "downloading (suspended: user request)");
        assert_eq!(t[4].status, "uploading (suspended: user request)");
        assert_eq!(t[0].status, "suspended (files downloading)");
    }

    #[test]
    fn status_and_messages_are_read() {
        let s = Status::parse(
            "<cc_status>\n<task_suspend_reason>4</task_suspend_reason>\n<task_mode>3</task_mode>\n\
             <task_mode_perm>2</task_mode_perm>\n<task_mode_delay>30.5</task_mode_delay>\n\
             <gpu_mode>2</gpu_mode>\n<gpu_mode_perm>2</gpu_mode_perm>\n</cc_status>\n",
        )
        .expect("status");
        assert_eq!(s.cpu.current, "never");
        assert_eq!(s.cpu.permanent, "auto");
        assert_eq!(s.cpu.delay, 30.5);
        assert_eq!(s.cpu.suspend_reason.as_deref(), Some("user request"));
        assert_eq!(s.gpu.suspend_reason, None);
        assert!(Status::parse("<error>x</error>").is_none());

        let m = Message::all(
            "<msgs>\n<msg>\n <project></project>\n <pri>1</pri>\n <seqno>1</seqno>\n \
             <body><![CDATA[\nStarting BOINC client version 7.20.5\n]]></body>\n \
             <time>1795332972</time>\n</msg>\n</msgs>\n",
        );
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].body, "Starting BOINC client version 7.20.5");
        assert_eq!(m[0].time, 1795332972);
    }

    #[test]
    fn projects_fall_back_to_the_url_for_a_name() {
        let p = Project::all(
            "<projects>\n<project>\n<master_url>http://a/</master_url>\n<project_name></project_name>\n\
             <suspended_via_gui/>\n<dont_request_more_work/>\n</project>\n</projects>\n",
        );
        assert_eq!(p[0].name, "http://a/");
        assert_eq!(p[0].status(), "suspended, no new tasks");
    }
    #[test]
    fn file_transfers() {
        let xml = "<file_transfers>
<file_transfer>
    <project_url>http://127.0.0.1:18080/</project_url>
    <project_name>Fixture Project</project_name>
    <name>wu_short_0_out</name>
    <nbytes>2048.000000</nbytes>
    <max_nbytes>0.000000</max_nbytes>
    <status>1</status>
    <persistent_file_xfer>
        <num_retries>2</num_retries>
        <first_request_time>1795332972.0</first_request_time>
        <next_request_time>1795333972.0</next_request_time>
        <time_so_far>1.5</time_so_far>
        <last_bytes_xferred>0.000000</last_bytes_xferred>
        <is_upload>1</is_upload>
    </persistent_file_xfer>
</file_transfer>
<file_transfer>
    <project_url>http://127.0.0.1:18080/</project_url>
    <project_name>Fixture Project</project_name>
    <name>wu_long_in</name>
    <nbytes>4096.000000</nbytes>
    <status>0</status>
    <persistent_file_xfer>
        <num_retries>0</num_retries>
        <is_upload>0</is_upload>
    </persistent_file_xfer>
    <file_xfer>
        <bytes_xferred>1024.000000</bytes_xferred>
        <file_offset>0.000000</file_offset>
        <xfer_speed>512.000000</xfer_speed>
        <url>http://127.0.0.1:18080/download/wu_long_in</url>
    </file_xfer>
</file_transfer>
</file_transfers>
";
        let t = Transfer::all(xml);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].name, "wu_short_0_out");
        assert!(t[0].is_upload && !t[0].active);
        assert_eq!(t[0].num_retries, 2);
        assert_eq!(t[0].state(), "upload pending");
        assert_eq!(t[1].state(), "downloading");
        assert_eq!(t[1].bytes_xferred, 1024.0);
        assert_eq!(t[1].xfer_speed, 512.0);
        assert!(Transfer::all("<file_transfers>\n</file_transfers>\n").is_empty());
    }

    #[test]
    fn prefs_leaves() {
        let p = prefs("<global_preferences>\n<run_on_batteries>0</run_on_batteries>\n<cpu_usage_limit>50.000000</cpu_usage_limit>\n<day_prefs><day_of_week>1</day_of_week></day_prefs>\n</global_preferences>\n")
            .expect("prefs");
        assert_eq!(p["cpu_usage_limit"], "50.000000");
        assert_eq!(p["day_prefs/day_of_week"], "1");
        assert!(prefs("<error>no prefs override file</error>").is_none());
    }
}
