//! `<scheduler_reply>`: what a project's scheduler answers (`client/scheduler_op.cpp:
//! SCHEDULER_REPLY::parse`; the server side is `sched/sched_types.cpp`).
//!
//! Ferrite reads it ([`SchedulerReply::parse`]) and can write it
//! ([`SchedulerReply::to_xml`]) for a loopback test server. Anything before
//! `<scheduler_reply>` (a CGI header) is skipped; line numbers still count from the file's
//! start. Blocks other modules parse are kept verbatim: `<global_preferences>` (body),
//! `<project_preferences>` (body), `<gui_urls>` and `<rss_feeds>` (whole elements).

use crate::client_state::{
    write_block_pub, App, AppVersion, FileInfo, FileRef, Form, TaskResult, Workunit,
};
use crate::xml::{Parsed, Tag, XmlError, XmlReader, XmlWriter};

/// A message for the user (`<message priority="P">text</message>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplyMessage {
    /// `low`, `high`, `notice`, … as sent.
    pub priority: String,
    /// The text.
    pub text: String,
}

/// A trickle-down message (`<trickle_down>`): what the project sends a running task.
///
/// The official client reads it line by line (`client/cs_trickle.cpp:
/// handle_trickle_down`): a line holding `<result_name>` names the task, one holding `<time>`
/// gives the send time (the file's name, `trickle_down_<time>`), and every other line, as
/// it is, is the body written to that file. The server's `trickle_echo` sends back the
/// trickle-up's own lines this way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrickleDown {
    /// The task it is for.
    pub result_name: String,
    /// The send time the server gave (Unix seconds; 0 when absent).
    pub time: i64,
    /// The other lines, each with its newline.
    pub body: String,
}

impl TrickleDown {
    /// Reads the text between `<trickle_down>` and `</trickle_down>`.
    pub fn from_inner(inner: &str) -> TrickleDown {
        let mut t = TrickleDown::default();
        // Whole lines, the rest of the start tag's line first (the official client keeps
        // it in the body too); the end tag's line ends the element.
        for line in inner.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            if let Some(v) = leaf_value(line, "result_name") {
                t.result_name = v.trim().to_owned();
            } else if let Some(v) = leaf_value(line, "time") {
                t.time = leading_int(v.trim());
            } else {
                t.body.push_str(line);
            }
        }
        t
    }

    fn write(&self, w: &mut XmlWriter) {
        // The result's name on the start tag's line, whose rest a reader keeps in the body;
        // the body's lines as they are, the end tag on a line of its own.
        let mut head = String::from("<trickle_down><result_name>");
        crate::xml::push_escaped(&mut head, &self.result_name);
        head.push_str("</result_name>\n");
        w.push_indent().push_raw(&head).int("time", self.time);
        w.push_raw(&self.body);
        if !self.body.is_empty() && !self.body.ends_with('\n') {
            w.push_raw("\n");
        }
        w.push_indent().push_raw("</trickle_down>\n");
    }
}

/// The text between `<name>` and `</name>` when `line` holds them (as BOINC's `parse_str`
/// finds a tag anywhere in a line).
fn leaf_value<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let start = line.find(&open)? + open.len();
    let rest = &line[start..];
    let end = rest.find(&format!("</{name}>")).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The integer a text starts with, as C's `atoi` reads it (0 when there is none).
fn leading_int(s: &str) -> i64 {
    let end = s
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && (c == '-' || c == '+'))))
        .map_or(s.len(), |(i, _)| i);
    s[..end].parse().unwrap_or(0)
}

impl ReplyMessage {
    /// Whether it should be shown as a notice.
    pub fn is_notice(&self) -> bool {
        self.priority == "notice"
    }
}

/// A scheduler reply. Absent elements are `None` (or empty/false): the client keeps its
/// previous value for most of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchedulerReply {
    /// Server version, `100*major + minor`.
    pub scheduler_version: Option<i32>,
    /// The project's canonical master URL according to the server.
    pub master_url: Option<String>,
    /// Project name.
    pub project_name: Option<String>,
    /// Symbol-store URL.
    pub symstore: Option<String>,
    /// Account name.
    pub user_name: Option<String>,
    /// Team name.
    pub team_name: Option<String>,
    /// Server's user id.
    pub userid: Option<i32>,
    /// Server's team id.
    pub teamid: Option<i32>,
    /// User credit, total.
    pub user_total_credit: Option<f64>,
    /// User credit, recent average.
    pub user_expavg_credit: Option<f64>,
    /// Account creation time.
    pub user_create_time: Option<f64>,
    /// Host credit, total.
    pub host_total_credit: Option<f64>,
    /// Host credit, recent average.
    pub host_expavg_credit: Option<f64>,
    /// Host record creation time.
    pub host_create_time: Option<f64>,
    /// The host's venue (absent → keep the previous one).
    pub host_venue: Option<String>,
    /// Present only when the server created a new host record: adopt it, reset `rpc_seqno`.
    pub hostid: Option<i32>,
    /// MD5 of the account's e-mail address.
    pub email_hash: Option<String>,
    /// The user's cross-project id.
    pub cross_project_id: Option<String>,
    /// The user's external CPID.
    pub external_cpid: Option<String>,
    /// No RPC before this many seconds.
    pub request_delay: Option<f64>,
    /// Contact the project again after this many seconds.
    pub next_rpc_delay: Option<f64>,
    /// Messages for the user.
    pub messages: Vec<ReplyMessage>,
    /// Global preferences: the body between the tags, verbatim.
    pub global_preferences: Option<String>,
    /// Project preferences: the body between the tags, verbatim.
    pub project_preferences: Option<String>,
    /// `<gui_urls>…</gui_urls>`, verbatim.
    pub gui_urls: Option<String>,
    /// New code-signing key (whitespace-trimmed).
    pub code_sign_key: Option<String>,
    /// Signature of the new key made with the old one.
    pub code_sign_key_signature: Option<String>,
    /// Applications.
    pub apps: Vec<App>,
    /// Files (app, input and output files).
    pub file_infos: Vec<FileInfo>,
    /// App versions.
    pub app_versions: Vec<AppVersion>,
    /// Workunits.
    pub workunits: Vec<Workunit>,
    /// New results.
    pub results: Vec<TaskResult>,
    /// Results whose reports the server has.
    pub result_acks: Vec<String>,
    /// Results to abort.
    pub result_aborts: Vec<String>,
    /// Results to abort if not started.
    pub result_abort_if_not_started: Vec<String>,
    /// Files whose sticky flag to clear.
    pub delete_file_infos: Vec<String>,
    /// Trickle-ups received: delete the `.sent` files.
    pub message_ack: bool,
    /// The project is down; the rest of the reply is to be ignored.
    pub project_is_down: bool,
    /// Trickle-down messages for tasks.
    pub trickle_downs: Vec<TrickleDown>,
    /// The project has ended.
    pub ended: bool,
    /// Project flag: its apps use little CPU.
    pub non_cpu_intensive: bool,
    /// Project flag: enforce memory bounds strictly.
    pub strict_memory_bound: bool,
    /// Resources the project has no apps for (`CPU`, `NVIDIA`, …); the deprecated
    /// `no_cpu_apps`/`no_cuda_apps`/`no_ati_apps` flags are read into it.
    pub no_rsc_apps: Vec<String>,
    /// From now on, include `<in_progress_results>`.
    pub send_full_workload: bool,
    /// Don't use the duration correction factor.
    pub dont_use_dcf: bool,
    /// Send `time_stats_log` entries since this time (0 = no).
    pub send_time_stats_log: i32,
    /// Send job-log entries since this time (0 = no).
    pub send_job_log: i32,
    /// Project-wide files (replaces the list when present).
    pub project_files: Option<Vec<FileRef>>,
    /// `<rss_feeds>…</rss_feeds>`, verbatim.
    pub rss_feeds: Option<String>,
    /// Replicated trickle-up endpoints.
    pub trickle_up_urls: Vec<String>,
    /// Disk the project would like, bytes.
    pub desired_disk_usage: Option<f64>,
    /// `<auto_update>` (builds with auto-update only), verbatim.
    pub auto_update: Option<String>,
    /// Elements we do not know, kept verbatim.
    pub extra: Vec<String>,
}

fn name_list<'a>(r: &mut XmlReader<'a>, t: &Tag<'a>) -> Result<String, XmlError> {
    let mut name = String::new();
    if t.is_empty() {
        return Ok(name);
    }
    while let Some(c) = r.next_child()? {
        if c.name() == "name" {
            name = r.string(&c)?;
        } else {
            r.unknown(&c, t.name())?;
        }
    }
    Ok(name)
}

impl SchedulerReply {
    /// Parses a reply. Text before `<scheduler_reply>` is ignored.
    pub fn parse(text: &str, file: &str) -> Result<Parsed<SchedulerReply>, XmlError> {
        // Keep line numbers right: replace a skipped prefix by its newlines.
        let owned;
        let text = match text.find("<scheduler_reply") {
            Some(0) | None => text,
            Some(at) => {
                let nl = text[..at].matches('\n').count();
                owned = format!("{}{}", "\n".repeat(nl), &text[at..]);
                owned.as_str()
            }
        };
        let mut r = XmlReader::new(text, file);
        let root = r.root("scheduler_reply")?;
        let mut s = SchedulerReply::default();
        if !root.is_empty() {
            while let Some(t) = r.next_child()? {
                s.read_child(&mut r, &t)?;
            }
        }
        let warnings = r.finish()?;
        Ok(Parsed { value: s, warnings })
    }

    fn read_child<'a>(&mut self, r: &mut XmlReader<'a>, t: &Tag<'a>) -> Result<(), XmlError> {
        match t.name() {
            "scheduler_version" => self.scheduler_version = r.num(t)?,
            "master_url" => self.master_url = Some(r.string(t)?),
            "project_name" => self.project_name = Some(r.string(t)?),
            "symstore" => self.symstore = Some(r.string(t)?),
            "user_name" => self.user_name = Some(r.string(t)?),
            "team_name" => self.team_name = Some(r.string(t)?),
            "userid" => self.userid = r.num(t)?,
            "teamid" => self.teamid = r.num(t)?,
            "user_total_credit" => self.user_total_credit = r.num(t)?,
            "user_expavg_credit" => self.user_expavg_credit = r.num(t)?,
            "user_create_time" => self.user_create_time = r.num(t)?,
            "host_total_credit" => self.host_total_credit = r.num(t)?,
            "host_expavg_credit" => self.host_expavg_credit = r.num(t)?,
            "host_create_time" => self.host_create_time = r.num(t)?,
            "host_venue" => self.host_venue = Some(r.string(t)?),
            "hostid" => self.hostid = r.num(t)?,
            "email_hash" => self.email_hash = Some(r.string(t)?),
            "cross_project_id" => self.cross_project_id = Some(r.string(t)?),
            "external_cpid" => self.external_cpid = Some(r.string(t)?),
            "request_delay" => self.request_delay = r.num_clamped(t, 0.0, 1e9)?,
            "next_rpc_delay" => self.next_rpc_delay = r.num_clamped(t, 0.0, 1e9)?,
            "message" => {
                let priority = t.attr("priority").unwrap_or_default();
                let text = r.string(t)?;
                self.messages.push(ReplyMessage { priority, text });
            }
            "global_preferences" => {
                self.global_preferences = Some(r.inner_raw(t)?.trim().to_owned())
            }
            "project_preferences" => {
                self.project_preferences = Some(r.inner_raw(t)?.trim().to_owned())
            }
            "gui_urls" => self.gui_urls = Some(r.raw(t)?.to_owned()),
            "code_sign_key" => self.code_sign_key = Some(r.text(t)?.trim().to_owned()),
            "code_sign_key_signature" => {
                self.code_sign_key_signature = Some(r.text(t)?.trim().to_owned())
            }
            "app" => self.apps.push(App::read(r, t)?),
            "file_info" => self.file_infos.push(FileInfo::read(r, t)?),
            "app_version" => self.app_versions.push(AppVersion::read(r, t)?),
            "workunit" => self.workunits.push(Workunit::read(r, t)?),
            "result" => self.results.push(TaskResult::read(r, t)?),
            "result_ack" => self.result_acks.push(name_list(r, t)?),
            "result_abort" => self.result_aborts.push(name_list(r, t)?),
            "result_abort_if_not_started" => {
                self.result_abort_if_not_started.push(name_list(r, t)?)
            }
            "delete_file_info" => self.delete_file_infos.push(r.string(t)?),
            "message_ack" => self.message_ack = r.flag(t)?,
            "project_is_down" => self.project_is_down = r.flag(t)?,
            "trickle_down" => self
                .trickle_downs
                .push(TrickleDown::from_inner(r.inner_raw(t)?)),
            "ended" => self.ended = r.flag(t)?,
            "non_cpu_intensive" => self.non_cpu_intensive = r.flag(t)?,
            "strict_memory_bound" => self.strict_memory_bound = r.flag(t)?,
            "no_rsc_apps" => {
                let n = r.string(t)?;
                if !self.no_rsc_apps.contains(&n) {
                    self.no_rsc_apps.push(n);
                }
            }
            "no_cpu_apps" | "no_cuda_apps" | "no_ati_apps" => {
                let rsc = match t.name() {
                    "no_cpu_apps" => "CPU",
                    "no_cuda_apps" => "NVIDIA",
                    _ => "ATI",
                };
                if r.flag(t)? && !self.no_rsc_apps.iter().any(|n| n == rsc) {
                    self.no_rsc_apps.push(rsc.to_owned());
                }
            }
            "send_full_workload" => self.send_full_workload = r.flag(t)?,
            "dont_use_dcf" => self.dont_use_dcf = r.flag(t)?,
            "send_time_stats_log" => self.send_time_stats_log = r.num_or(t, 0)?,
            "send_job_log" => self.send_job_log = r.num_or(t, 0)?,
            "project_files" => {
                let mut list = Vec::new();
                if !t.is_empty() {
                    while let Some(c) = r.next_child()? {
                        if c.name() == "file_ref" {
                            list.push(FileRef::read(r, &c)?);
                        } else {
                            r.unknown(&c, "project_files")?;
                        }
                    }
                }
                self.project_files = Some(list);
            }
            "rss_feeds" => self.rss_feeds = Some(r.raw(t)?.to_owned()),
            "trickle_up_urls" => {
                if !t.is_empty() {
                    while let Some(c) = r.next_child()? {
                        if c.name() == "url" {
                            self.trickle_up_urls.push(r.string(&c)?);
                        } else {
                            r.unknown(&c, "trickle_up_urls")?;
                        }
                    }
                }
            }
            "desired_disk_usage" => self.desired_disk_usage = r.num(t)?,
            "auto_update" => self.auto_update = Some(r.raw(t)?.to_owned()),
            _ => self.extra.extend(r.keep_unknown(t, "scheduler_reply")?),
        }
        Ok(())
    }

    /// Writes the reply the way a BOINC server lays it out (objects grouped by kind).
    pub fn to_xml(&self) -> String {
        let mut w = XmlWriter::with_capacity(4096 + self.results.len() * 2048);
        w.open_flat("scheduler_reply");
        if let Some(v) = self.scheduler_version {
            w.num("scheduler_version", v);
        }
        w.flag("dont_use_dcf", self.dont_use_dcf)
            .opt_text("master_url", self.master_url.as_deref());
        if let Some(d) = self.request_delay {
            w.f64("request_delay", d);
        }
        if let Some(d) = self.next_rpc_delay {
            w.f64("next_rpc_delay", d);
        }
        for m in &self.messages {
            w.raw(&format!(
                "<message priority=\"{}\">{}</message>",
                quick_xml::escape::escape(&m.priority),
                quick_xml::escape::partial_escape(&m.text)
            ));
        }
        w.flag("project_is_down", self.project_is_down)
            .opt_text("project_name", self.project_name.as_deref())
            .opt_text("symstore", self.symstore.as_deref());
        if let Some(v) = self.userid {
            w.num("userid", v);
        }
        w.opt_text("user_name", self.user_name.as_deref());
        for (n, v) in [
            ("user_total_credit", self.user_total_credit),
            ("user_expavg_credit", self.user_expavg_credit),
            ("user_create_time", self.user_create_time),
        ] {
            if let Some(v) = v {
                w.f64(n, v);
            }
        }
        w.opt_text("email_hash", self.email_hash.as_deref())
            .opt_text("cross_project_id", self.cross_project_id.as_deref())
            .opt_text("external_cpid", self.external_cpid.as_deref());
        if let Some(v) = self.hostid {
            w.num("hostid", v);
        }
        for (n, v) in [
            ("host_total_credit", self.host_total_credit),
            ("host_expavg_credit", self.host_expavg_credit),
        ] {
            if let Some(v) = v {
                w.f64(n, v);
            }
        }
        w.opt_text("host_venue", self.host_venue.as_deref());
        if let Some(v) = self.host_create_time {
            w.f64("host_create_time", v);
        }
        if let Some(v) = self.teamid {
            w.num("teamid", v);
        }
        w.opt_text("team_name", self.team_name.as_deref());
        if let Some(p) = &self.global_preferences {
            w.raw(&format!("<global_preferences>\n{p}\n</global_preferences>"));
        }
        if let Some(p) = &self.project_preferences {
            w.raw(&format!(
                "<project_preferences>\n{p}\n</project_preferences>"
            ));
        }
        for n in &self.result_acks {
            w.open("result_ack").text("name", n).close("result_ack");
        }
        for n in &self.result_aborts {
            w.open("result_abort").text("name", n).close("result_abort");
        }
        for n in &self.result_abort_if_not_started {
            w.open("result_abort_if_not_started")
                .text("name", n)
                .close("result_abort_if_not_started");
        }
        for a in &self.apps {
            a.write(&mut w);
        }
        for f in &self.file_infos {
            f.write(&mut w, Form::Reply);
        }
        for v in &self.app_versions {
            v.write(&mut w, Form::Reply);
        }
        for wu in &self.workunits {
            wu.write(&mut w);
        }
        for r in &self.results {
            r.write(&mut w, Form::Reply);
        }
        for n in &self.delete_file_infos {
            w.text("delete_file_info", n);
        }
        w.flag("message_ack", self.message_ack);
        for t in &self.trickle_downs {
            t.write(&mut w);
        }
        w.flag("ended", self.ended)
            .flag("non_cpu_intensive", self.non_cpu_intensive)
            .flag("strict_memory_bound", self.strict_memory_bound);
        for n in &self.no_rsc_apps {
            w.text("no_rsc_apps", n);
        }
        w.flag("send_full_workload", self.send_full_workload);
        if self.send_time_stats_log != 0 {
            w.num("send_time_stats_log", self.send_time_stats_log);
        }
        if self.send_job_log != 0 {
            w.num("send_job_log", self.send_job_log);
        }
        if let Some(list) = &self.project_files {
            w.open("project_files");
            for f in list {
                f.write(&mut w);
            }
            w.close("project_files");
        }
        if let Some(k) = &self.code_sign_key {
            write_block_pub(&mut w, "code_sign_key", k);
        }
        if let Some(k) = &self.code_sign_key_signature {
            write_block_pub(&mut w, "code_sign_key_signature", k);
        }
        if let Some(g) = &self.gui_urls {
            w.raw(g);
        }
        if let Some(g) = &self.rss_feeds {
            w.raw(g);
        }
        if !self.trickle_up_urls.is_empty() {
            w.open("trickle_up_urls");
            for u in &self.trickle_up_urls {
                w.text("url", u);
            }
            w.close("trickle_up_urls");
        }
        if let Some(d) = self.desired_disk_usage {
            w.f64("desired_disk_usage", d);
        }
        if let Some(a) = &self.auto_update {
            w.raw(a);
        }
        for e in &self.extra {
            w.raw(e);
        }
        w.close_flat("scheduler_reply");
        w.finish()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A reply as BOINC 8.3's scheduler writes it when `trickle_echo` answered a trickle-up
    /// (`sched/trickle_echo.cpp`: the trickle-up's lines, `<variety>` removed, inside
    /// `<trickle_down>`).
    const ECHOED: &str = "<scheduler_reply>\n<scheduler_version>803</scheduler_version>\n\
        <message_ack/>\n<trickle_down>\n\n      <result_name>uc_7_0</result_name>\n\
        \x20     <time>1795937321</time>\nsample trickle message\n  second line\n\
        </trickle_down>\n\n</scheduler_reply>\n";

    #[test]
    fn reads_a_trickle_down_line_by_line() {
        let reply = SchedulerReply::parse(ECHOED, "reply").unwrap().value;
        assert!(reply.message_ack);
        assert_eq!(
            reply.trickle_downs,
            vec![TrickleDown {
                result_name: "uc_7_0".into(),
                time: 1_795_937_321,
                body: "\n\nsample trickle message\n  second line\n".into(),
            }]
        );
    }

    #[test]
    fn a_trickle_down_survives_writing_and_reading() {
        let mut reply = SchedulerReply::parse(ECHOED, "reply").unwrap().value;
        reply.trickle_downs.push(TrickleDown {
            result_name: "other".into(),
            time: 5,
            body: "<a>x</a>".into(),
        });
        let again = SchedulerReply::parse(&reply.to_xml(), "reply")
            .unwrap()
            .value;
        assert_eq!(again.trickle_downs[0], reply.trickle_downs[0]);
        assert_eq!(again.trickle_downs[1].body, "<a>x</a>\n");
        assert_eq!(again.trickle_downs[1].time, 5);
    }

    #[test]
    fn a_time_is_read_as_atoi_does() {
        let t = TrickleDown::from_inner("<result_name> r </result_name>\n<time>12abc</time>\n");
        assert_eq!((t.result_name.as_str(), t.time), ("r", 12));
        assert_eq!(t.body, "");
        assert_eq!(TrickleDown::from_inner("\n<time>x</time>\n").time, 0);
        // The end tag's line ends the element, as the official client reads it.
        let t = TrickleDown::from_inner("\nbody\n<time>3</time>");
        assert_eq!((t.time, t.body.as_str()), (0, "\nbody\n"));
    }
}
