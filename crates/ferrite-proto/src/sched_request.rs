//! `<scheduler_request>`: what the client POSTs to a project's scheduler
//! (`client/cs_scheduler.cpp: make_scheduler_request`).
//!
//! Ferrite writes it ([`SchedulerRequest::to_xml`]) and can parse it
//! ([`SchedulerRequest::parse`]) for a loopback test server. GPU work requests travel inside
//! the `<coprocs>` blocks: set [`crate::host::RscRequest`] on each coprocessor of
//! [`SchedulerRequest::coprocs`] (e.g. with [`SchedulerRequest::set_gpu_request`]).

use crate::client_state::{AppVersion, ClientVersion, Form, NetStats, TaskResult, TimeStats};
use crate::host::{Coprocs, HostInfo, HostInfoForm, RscRequest};
use crate::xml::{Parsed, Tag, XmlError, XmlReader, XmlWriter};

/// Disk figures sent to the server (`<disk_usage>`), bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskUsage {
    /// Used by BOINC in total.
    pub d_boinc_used_total: f64,
    /// Used by this project.
    pub d_boinc_used_project: f64,
    /// This project's disk share.
    pub d_project_share: f64,
}

/// A sticky file the client still holds (`<file_info>` in a request; locality scheduling).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StickyFile {
    /// File name.
    pub name: String,
    /// Size, bytes.
    pub nbytes: f64,
    /// File status (1 = present).
    pub status: i32,
}

/// A task of the project not reported in this request (`<other_result>`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OtherResult {
    /// Result name.
    pub name: String,
    /// Index into this request's `<app_versions>`.
    pub app_version: i32,
    /// Plan class of its app version (for old schedulers); empty = none.
    pub plan_class: String,
}

/// A task in progress, sent when the server asked for the full workload (`<ip_result>`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InProgressResult {
    /// Result name.
    pub name: String,
    /// Deadline (Unix time, whole seconds).
    pub report_deadline: f64,
    /// Estimated remaining run time, seconds.
    pub time_remaining: f64,
    /// CPUs used.
    pub avg_ncpus: f64,
    /// NVIDIA GPUs used, if any.
    pub ncudas: Option<f64>,
    /// AMD GPUs used, if any.
    pub natis: Option<f64>,
    /// Intel GPUs used, if any.
    pub nintel_gpus: Option<f64>,
}

/// A trickle-up message (`<msg_from_host>`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MsgFromHost {
    /// The result that produced it.
    pub result_name: String,
    /// When the app wrote it (Unix time).
    pub time: i64,
    /// The message body as the app wrote it (XML, verbatim).
    pub body: String,
}

/// A scheduler request.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerRequest {
    /// Account key.
    pub authenticator: String,
    /// Server's host id (0 before the first reply).
    pub hostid: i32,
    /// Per-project request counter.
    pub rpc_seqno: i32,
    /// The client's version.
    pub core_client_version: ClientVersion,
    /// This project's share of all projects' shares.
    pub resource_share_fraction: f64,
    /// Share among runnable projects.
    pub rrs_fraction: f64,
    /// Share among potentially runnable projects.
    pub prrs_fraction: f64,
    /// Project DCF (1 if `dont_use_dcf`).
    pub duration_correction_factor: f64,
    /// cc_config `allow_multiple_clients`.
    pub allow_multiple_clients: bool,
    /// Account-based sandbox in use.
    pub sandbox: bool,
    /// "No new tasks".
    pub dont_send_work: bool,
    /// cc_config `dont_use_docker`.
    pub dont_use_docker: bool,
    /// CPU seconds requested (legacy field).
    pub work_req_seconds: f64,
    /// CPU instance-seconds requested.
    pub cpu_req_secs: f64,
    /// Idle CPU instances to fill.
    pub cpu_req_instances: f64,
    /// CPU busy-time estimate, seconds.
    pub estimated_delay: f64,
    /// Always true for current clients (the server uses plan-class capabilities).
    pub client_cap_plan_class: bool,
    /// Primary platform, or `anonymous`.
    pub platform_name: String,
    /// Other platforms the host runs.
    pub alt_platforms: Vec<String>,
    /// The project's current code-signing key, when known.
    pub code_sign_key: Option<String>,
    /// The preferences in force, verbatim (`<global_preferences>…</global_preferences>`).
    pub working_global_preferences: Option<String>,
    /// Oldest CPID known for this account's e-mail hash.
    pub cross_project_id: Option<String>,
    /// Time statistics (request form).
    pub time_stats: TimeStats,
    /// Network statistics.
    pub net_stats: NetStats,
    /// `<daily_xfer_history>` when sent, verbatim.
    pub daily_xfer_history: Option<String>,
    /// The host (no coprocs inside; they go in `coprocs`).
    pub host_info: HostInfo,
    /// Whether `domain_name`/`ip_addr` are sent (cc_config `suppress_net_info` clears it).
    pub include_net_info: bool,
    /// Disk figures, unless cc_config `no_disk_usage`.
    pub disk_usage: Option<DiskUsage>,
    /// GPUs, with the work requested of each (`RscRequest` on each coprocessor).
    pub coprocs: Option<Coprocs>,
    /// Completed tasks being reported (request form of [`TaskResult`]).
    pub results: Vec<TaskResult>,
    /// Trickle-up messages.
    pub msgs_from_host: Vec<MsgFromHost>,
    /// Sticky files held.
    pub sticky_files: Vec<StickyFile>,
    /// `time_stats_log` lines, when the server asked.
    pub time_stats_log: Option<String>,
    /// Job-log lines, when the server asked.
    pub job_log: Option<String>,
    /// The project's app versions; `other_results` refer to them by index.
    pub app_versions: Vec<AppVersion>,
    /// Every other task of the project (the server resends lost ones).
    pub other_results: Vec<OtherResult>,
    /// Tasks in progress, when the server asked for the full workload.
    pub in_progress_results: Option<Vec<InProgressResult>>,
    /// Contents of `client_opaque.txt`.
    pub client_opaque: Option<String>,
    /// Contents of `client_brand.txt`.
    pub client_brand: Option<String>,
    /// `<user_keywords>` (account managers), verbatim.
    pub user_keywords: Option<String>,
    /// Elements we do not know, kept verbatim.
    pub extra: Vec<String>,
}

impl Default for SchedulerRequest {
    fn default() -> Self {
        SchedulerRequest {
            authenticator: String::new(),
            hostid: 0,
            rpc_seqno: 0,
            core_client_version: ClientVersion::default(),
            resource_share_fraction: 1.0,
            rrs_fraction: 1.0,
            prrs_fraction: 1.0,
            duration_correction_factor: 1.0,
            allow_multiple_clients: false,
            sandbox: false,
            dont_send_work: false,
            dont_use_docker: false,
            work_req_seconds: 0.0,
            cpu_req_secs: 0.0,
            cpu_req_instances: 0.0,
            estimated_delay: 0.0,
            client_cap_plan_class: true,
            platform_name: String::new(),
            alt_platforms: Vec::new(),
            code_sign_key: None,
            working_global_preferences: None,
            cross_project_id: None,
            time_stats: TimeStats::default(),
            net_stats: NetStats::default(),
            daily_xfer_history: None,
            host_info: HostInfo::default(),
            include_net_info: true,
            disk_usage: None,
            coprocs: None,
            results: Vec::new(),
            msgs_from_host: Vec::new(),
            sticky_files: Vec::new(),
            time_stats_log: None,
            job_log: None,
            app_versions: Vec::new(),
            other_results: Vec::new(),
            in_progress_results: None,
            client_opaque: None,
            client_brand: None,
            user_keywords: None,
            extra: Vec::new(),
        }
    }
}

fn children<'a>(
    r: &mut XmlReader<'a>,
    tag: &Tag<'a>,
    mut f: impl FnMut(&mut XmlReader<'a>, &Tag<'a>) -> Result<(), XmlError>,
) -> Result<(), XmlError> {
    if tag.is_empty() {
        return Ok(());
    }
    while let Some(t) = r.next_child()? {
        f(r, &t)?;
    }
    Ok(())
}

impl SchedulerRequest {
    /// Sets the work asked of GPU type `rsc_type` (`NVIDIA`, `ATI`, `intel_gpu`, …); false
    /// if the request has no such coprocessor.
    pub fn set_gpu_request(&mut self, rsc_type: &str, req: RscRequest) -> bool {
        let Some(c) = self.coprocs.as_mut() else {
            return false;
        };
        if rsc_type == Coprocs::NVIDIA {
            if let Some(n) = c.nvidia.as_mut() {
                n.request = Some(req);
                return true;
            }
            return false;
        }
        match c.other.iter_mut().find(|o| o.rsc_type == rsc_type) {
            Some(o) => {
                o.request = Some(req);
                true
            }
            None => false,
        }
    }

    /// Parses a scheduler request (for a test server).
    pub fn parse(text: &str, file: &str) -> Result<Parsed<SchedulerRequest>, XmlError> {
        let mut r = XmlReader::new(text, file);
        let root = r.root("scheduler_request")?;
        let mut q = SchedulerRequest {
            client_cap_plan_class: false,
            include_net_info: false,
            ..SchedulerRequest::default()
        };
        children(&mut r, &root, |r, t| q.read_child(r, t))?;
        // `domain_name` occurs only in `<host_info>`: its presence tells the form used.
        q.include_net_info = text.contains("<domain_name>") || text.contains("<domain_name/>");
        let warnings = r.finish()?;
        Ok(Parsed { value: q, warnings })
    }

    fn read_child<'a>(&mut self, r: &mut XmlReader<'a>, t: &Tag<'a>) -> Result<(), XmlError> {
        match t.name() {
            "authenticator" => self.authenticator = r.string(t)?,
            "hostid" => self.hostid = r.num_or(t, 0)?,
            "rpc_seqno" => self.rpc_seqno = r.num_or(t, 0)?,
            "core_client_major_version" => self.core_client_version.major = r.num_or(t, 0)?,
            "core_client_minor_version" => self.core_client_version.minor = r.num_or(t, 0)?,
            "core_client_release" => self.core_client_version.release = r.num_or(t, 0)?,
            "resource_share_fraction" => self.resource_share_fraction = r.num_or(t, 1.0)?,
            "rrs_fraction" => self.rrs_fraction = r.num_or(t, 1.0)?,
            "prrs_fraction" => self.prrs_fraction = r.num_or(t, 1.0)?,
            "duration_correction_factor" => self.duration_correction_factor = r.num_or(t, 1.0)?,
            "allow_multiple_clients" => self.allow_multiple_clients = r.flag(t)?,
            "sandbox" => self.sandbox = r.flag(t)?,
            "dont_send_work" => self.dont_send_work = r.flag(t)?,
            "dont_use_docker" => self.dont_use_docker = r.flag(t)?,
            "work_req_seconds" => self.work_req_seconds = r.num_or(t, 0.0)?,
            "cpu_req_secs" => self.cpu_req_secs = r.num_or(t, 0.0)?,
            "cpu_req_instances" => self.cpu_req_instances = r.num_or(t, 0.0)?,
            "estimated_delay" => self.estimated_delay = r.num_or(t, 0.0)?,
            "client_cap_plan_class" => self.client_cap_plan_class = r.flag(t)?,
            "platform_name" => self.platform_name = r.string(t)?,
            "alt_platform" => {
                let mut name = String::new();
                children(r, t, |r, c| {
                    if c.name() == "name" {
                        name = r.string(c)?;
                        Ok(())
                    } else {
                        r.unknown(c, "alt_platform")
                    }
                })?;
                self.alt_platforms.push(name);
            }
            "code_sign_key" => self.code_sign_key = Some(r.text(t)?.trim().to_owned()),
            "working_global_preferences" => {
                self.working_global_preferences = Some(r.inner_raw(t)?.trim().to_owned())
            }
            "cross_project_id" => self.cross_project_id = Some(r.string(t)?),
            "time_stats" => self.time_stats = TimeStats::read(r, t)?,
            "net_stats" => self.net_stats = NetStats::read(r, t)?,
            "daily_xfer_history" => self.daily_xfer_history = Some(r.raw(t)?.to_owned()),
            "host_info" => self.host_info = HostInfo::read(r, t)?,
            "disk_usage" => {
                let mut d = DiskUsage::default();
                children(r, t, |r, c| {
                    match c.name() {
                        "d_boinc_used_total" => d.d_boinc_used_total = r.num_or(c, 0.0)?,
                        "d_boinc_used_project" => d.d_boinc_used_project = r.num_or(c, 0.0)?,
                        "d_project_share" => d.d_project_share = r.num_or(c, 0.0)?,
                        _ => r.unknown(c, "disk_usage")?,
                    }
                    Ok(())
                })?;
                self.disk_usage = Some(d);
            }
            "coprocs" => self.coprocs = Some(Coprocs::read(r, t)?),
            "result" => self.results.push(TaskResult::read(r, t)?),
            "msg_from_host" => {
                let mut m = MsgFromHost::default();
                let inner = r.inner_raw(t)?;
                // result_name and time come first; the rest is the app's message.
                let mut rest = inner;
                for _ in 0..2 {
                    let trimmed = rest.trim_start();
                    let (name, value, after) = match split_leaf(trimmed) {
                        Some(x) => x,
                        None => break,
                    };
                    match name {
                        "result_name" => m.result_name = value.trim().to_owned(),
                        "time" => m.time = value.trim().parse().unwrap_or(0),
                        _ => break,
                    }
                    rest = after;
                }
                m.body = rest.trim().to_owned();
                self.msgs_from_host.push(m);
            }
            "file_info" => {
                let mut f = StickyFile::default();
                children(r, t, |r, c| {
                    match c.name() {
                        "name" => f.name = r.string(c)?,
                        "nbytes" => f.nbytes = r.num_or(c, 0.0)?,
                        "status" => f.status = r.num_or(c, 0)?,
                        _ => r.unknown(c, "file_info")?,
                    }
                    Ok(())
                })?;
                self.sticky_files.push(f);
            }
            "time_stats_log" => self.time_stats_log = Some(r.text(t)?.trim().to_owned()),
            "job_log" => self.job_log = Some(r.text(t)?.trim().to_owned()),
            "app_versions" => children(r, t, |r, c| {
                if c.name() == "app_version" {
                    self.app_versions.push(AppVersion::read(r, c)?);
                    Ok(())
                } else {
                    r.unknown(c, "app_versions")
                }
            })?,
            "other_results" => children(r, t, |r, c| {
                if c.name() != "other_result" {
                    return r.unknown(c, "other_results");
                }
                let mut o = OtherResult::default();
                children(r, c, |r, e| {
                    match e.name() {
                        "name" => o.name = r.string(e)?,
                        "app_version" => o.app_version = r.num_or(e, 0)?,
                        "plan_class" => o.plan_class = r.string(e)?,
                        _ => r.unknown(e, "other_result")?,
                    }
                    Ok(())
                })?;
                self.other_results.push(o);
                Ok(())
            })?,
            "in_progress_results" => {
                let mut list = Vec::new();
                children(r, t, |r, c| {
                    if c.name() != "ip_result" {
                        return r.unknown(c, "in_progress_results");
                    }
                    let mut ip = InProgressResult::default();
                    children(r, c, |r, e| {
                        match e.name() {
                            "name" => ip.name = r.string(e)?,
                            "report_deadline" => ip.report_deadline = r.num_or(e, 0.0)?,
                            "time_remaining" => ip.time_remaining = r.num_or(e, 0.0)?,
                            "avg_ncpus" => ip.avg_ncpus = r.num_or(e, 0.0)?,
                            "ncudas" => ip.ncudas = r.num(e)?,
                            "natis" => ip.natis = r.num(e)?,
                            "nintel_gpus" => ip.nintel_gpus = r.num(e)?,
                            _ => r.unknown(e, "ip_result")?,
                        }
                        Ok(())
                    })?;
                    list.push(ip);
                    Ok(())
                })?;
                self.in_progress_results = Some(list);
            }
            "client_opaque" => self.client_opaque = Some(r.text(t)?.trim_matches('\n').to_owned()),
            "client_brand" => self.client_brand = Some(r.string(t)?),
            "user_keywords" => self.user_keywords = Some(r.raw(t)?.to_owned()),
            _ => self.extra.extend(r.keep_unknown(t, "scheduler_request")?),
        }
        Ok(())
    }

    /// Writes the request in the order the official client does.
    pub fn to_xml(&self) -> String {
        let mut w = XmlWriter::with_capacity(8192 + self.results.len() * 2048);
        let v = self.core_client_version;
        w.open("scheduler_request")
            .text("authenticator", &self.authenticator)
            .num("hostid", self.hostid)
            .num("rpc_seqno", self.rpc_seqno)
            .num("core_client_major_version", v.major)
            .num("core_client_minor_version", v.minor)
            .num("core_client_release", v.release)
            .f64("resource_share_fraction", self.resource_share_fraction)
            .f64("rrs_fraction", self.rrs_fraction)
            .f64("prrs_fraction", self.prrs_fraction)
            .f64(
                "duration_correction_factor",
                self.duration_correction_factor,
            )
            .bool01("allow_multiple_clients", self.allow_multiple_clients)
            .bool01("sandbox", self.sandbox)
            .bool01("dont_send_work", self.dont_send_work)
            .flag("dont_use_docker", self.dont_use_docker)
            .f64("work_req_seconds", self.work_req_seconds)
            .f64("cpu_req_secs", self.cpu_req_secs)
            .f64("cpu_req_instances", self.cpu_req_instances)
            .f64("estimated_delay", self.estimated_delay);
        if self.client_cap_plan_class {
            w.num("client_cap_plan_class", 1);
        }
        w.text("platform_name", &self.platform_name);
        for p in &self.alt_platforms {
            w.open("alt_platform").text("name", p).close("alt_platform");
        }
        if let Some(k) = &self.code_sign_key {
            crate::client_state::write_block_pub(&mut w, "code_sign_key", k);
        }
        if let Some(p) = &self.working_global_preferences {
            w.raw(&format!(
                "<working_global_preferences>\n{p}\n</working_global_preferences>"
            ));
        }
        w.opt_text("cross_project_id", self.cross_project_id.as_deref());
        self.time_stats.write(&mut w, Form::Request);
        self.net_stats.write(&mut w);
        if let Some(d) = &self.daily_xfer_history {
            w.raw(d);
        }
        self.host_info.write(
            &mut w,
            HostInfoForm {
                net_info: self.include_net_info,
                coprocs: false,
            },
        );
        if let Some(d) = &self.disk_usage {
            w.open("disk_usage")
                .f64("d_boinc_used_total", d.d_boinc_used_total)
                .f64("d_boinc_used_project", d.d_boinc_used_project)
                .f64("d_project_share", d.d_project_share)
                .close("disk_usage");
        }
        if let Some(c) = &self.coprocs {
            c.write_stored_requests(&mut w);
        }
        for r in &self.results {
            r.write(&mut w, Form::Request);
        }
        for m in &self.msgs_from_host {
            w.open("msg_from_host")
                .text("result_name", &m.result_name)
                .num("time", m.time);
            // The app's file as it is, on lines of its own: the server reads the element
            // line by line and takes the `<variety>` line out (`sched/sched_types.cpp:
            // MSG_FROM_HOST_DESC::parse`).
            if !m.body.is_empty() {
                w.push_raw(&m.body);
                if !m.body.ends_with('\n') {
                    w.push_raw("\n");
                }
            }
            w.close("msg_from_host");
        }
        for f in &self.sticky_files {
            w.open("file_info")
                .text("name", &f.name)
                .f64("nbytes", f.nbytes)
                .num("status", f.status)
                .close("file_info");
        }
        if let Some(l) = &self.time_stats_log {
            w.text("time_stats_log", l);
        }
        if let Some(l) = &self.job_log {
            w.text("job_log", l);
        }
        w.open("app_versions");
        for av in &self.app_versions {
            av.write(&mut w, Form::Request);
        }
        w.close("app_versions");
        w.open("other_results");
        for o in &self.other_results {
            w.open("other_result")
                .text("name", &o.name)
                .num("app_version", o.app_version)
                .nonempty_text("plan_class", &o.plan_class)
                .close("other_result");
        }
        w.close("other_results");
        if let Some(list) = &self.in_progress_results {
            w.open("in_progress_results");
            for ip in list {
                w.open("ip_result")
                    .text("name", &ip.name)
                    .num("report_deadline", format_args!("{:.0}", ip.report_deadline))
                    .num("time_remaining", format_args!("{:.2}", ip.time_remaining))
                    .f64("avg_ncpus", ip.avg_ncpus);
                for (n, v) in [
                    ("ncudas", ip.ncudas),
                    ("natis", ip.natis),
                    ("nintel_gpus", ip.nintel_gpus),
                ] {
                    if let Some(v) = v {
                        w.f64(n, v);
                    }
                }
                w.close("ip_result");
            }
            w.close("in_progress_results");
        }
        if let Some(o) = &self.client_opaque {
            w.cdata("client_opaque", o);
        }
        w.opt_text("client_brand", self.client_brand.as_deref());
        if let Some(k) = &self.user_keywords {
            w.raw(k);
        }
        for e in &self.extra {
            w.raw(e);
        }
        w.close("scheduler_request");
        w.finish()
    }
}

/// Splits `<name>value</name>rest` (a simple leaf at the start of `s`).
fn split_leaf(s: &str) -> Option<(&str, &str, &str)> {
    let s = s.strip_prefix('<')?;
    let gt = s.find('>')?;
    let name = &s[..gt];
    if name.is_empty() || name.contains(['/', ' ']) {
        return None;
    }
    let body = &s[gt + 1..];
    let close = format!("</{name}>");
    let end = body.find(&close)?;
    Some((name, &body[..end], &body[end + close.len()..]))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The lines between `<msg_from_host>` and `</msg_from_host>` as BOINC's scheduler reads
    /// them: line by line, the `<variety>` line taken out, the rest kept as the message.
    fn as_the_server_reads(xml: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut cur: Option<(String, String)> = None;
        for line in xml.split_inclusive('\n') {
            if line.contains("</msg_from_host>") {
                out.extend(cur.take());
            } else if line.contains("<msg_from_host>") {
                cur = Some(Default::default());
            } else if let Some((variety, text)) = cur.as_mut() {
                if let Some(v) = line.split("<variety>").nth(1) {
                    *variety = v.split("</variety>").next().unwrap_or("").to_owned();
                } else {
                    text.push_str(line);
                }
            }
        }
        out
    }

    #[test]
    fn trickle_ups_go_out_as_msg_from_host_the_server_can_read() {
        let q = SchedulerRequest {
            msgs_from_host: vec![
                MsgFromHost {
                    result_name: "uc_7_0".into(),
                    time: 1_795_937_321,
                    body: "<variety>example_app</variety>\nsample trickle message".into(),
                },
                MsgFromHost {
                    result_name: "uc_8_0".into(),
                    time: 1_795_937_322,
                    body: "<variety>v2</variety>\n  <x>1</x>\n".into(),
                },
            ],
            ..SchedulerRequest::default()
        };
        let xml = q.to_xml();
        let seen = as_the_server_reads(&xml);
        assert_eq!(seen.len(), 2, "{xml}");
        assert_eq!(seen[0].0, "example_app");
        let lines: Vec<&str> = seen[0].1.lines().map(str::trim).collect();
        assert_eq!(
            lines,
            [
                "<result_name>uc_7_0</result_name>",
                "<time>1795937321</time>",
                "sample trickle message"
            ],
            "{xml}"
        );
        // The app's lines are kept as they are.
        assert_eq!(seen[1].0, "v2");
        assert!(seen[1].1.ends_with("\n  <x>1</x>\n"), "{xml}");
        // And read back (the loopback test project reads requests).
        let back = SchedulerRequest::parse(&xml, "request").unwrap().value;
        assert_eq!(back.msgs_from_host[0].result_name, "uc_7_0");
        assert_eq!(back.msgs_from_host[0].time, 1_795_937_321);
        assert_eq!(back.msgs_from_host[0].body, q.msgs_from_host[0].body);
    }
}
