//! `<project>` in the state file: a project's identity, account figures and scheduler
//! bookkeeping (`client/project.cpp: PROJECT::write_state/parse_state`).

use super::objects::{block_text, keep, write_block};
use crate::xml::{Tag, XmlError, XmlReader, XmlWriter};

/// Why a scheduler RPC is pending (`RPC_REASON_*` in `lib/common_defs.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RpcReason {
    /// 1: the user asked for an update.
    UserReq,
    /// 2: results are due.
    ResultsDue,
    /// 3: the client needs work.
    NeedWork,
    /// 4: trickle-up messages to send.
    TrickleUp,
    /// 5: the account manager asked.
    AcctMgrReq,
    /// 6: first RPC after attaching.
    Init,
    /// 7: the project asked (`next_rpc_delay`).
    ProjectReq,
}

impl RpcReason {
    /// BOINC's number.
    pub fn as_i32(self) -> i32 {
        match self {
            RpcReason::UserReq => 1,
            RpcReason::ResultsDue => 2,
            RpcReason::NeedWork => 3,
            RpcReason::TrickleUp => 4,
            RpcReason::AcctMgrReq => 5,
            RpcReason::Init => 6,
            RpcReason::ProjectReq => 7,
        }
    }

    /// The reason numbered `n` (0 and unknown numbers are `None`).
    pub fn from_i32(n: i32) -> Option<RpcReason> {
        Some(match n {
            1 => RpcReason::UserReq,
            2 => RpcReason::ResultsDue,
            3 => RpcReason::NeedWork,
            4 => RpcReason::TrickleUp,
            5 => RpcReason::AcctMgrReq,
            6 => RpcReason::Init,
            7 => RpcReason::ProjectReq,
            _ => return None,
        })
    }

    /// The text BOINC shows for it ("Requested by user", …), used in request logs.
    pub fn description(self) -> &'static str {
        match self {
            RpcReason::UserReq => "Requested by user",
            RpcReason::ResultsDue => "To report completed tasks",
            RpcReason::NeedWork => "To fetch work",
            RpcReason::TrickleUp => "To send trickle-up message",
            RpcReason::AcctMgrReq => "Requested by account manager",
            RpcReason::Init => "Project initialization",
            RpcReason::ProjectReq => "Requested by project",
        }
    }
}

/// Work-fetch backoff of one resource for one project.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RscBackoff {
    /// Resource name (`CPU`, `NVIDIA`, …).
    pub name: String,
    /// No work request for this resource before this time (Unix time).
    pub backoff_time: f64,
    /// Current backoff interval, seconds.
    pub backoff_interval: f64,
}

/// A project as the state file records it.
#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    /// Canonical master URL: the project's identity.
    pub master_url: String,
    /// Name from the server.
    pub project_name: String,
    /// Symbol-store URL (crash reports).
    pub symstore: String,
    /// Account name.
    pub user_name: String,
    /// Team name.
    pub team_name: String,
    /// The host's venue for this project.
    pub host_venue: String,
    /// MD5 of the account's e-mail address (CPID bookkeeping).
    pub email_hash: String,
    /// The user's cross-project id.
    pub cross_project_id: String,
    /// The user's external CPID.
    pub external_cpid: String,
    /// When the CPID was last sent.
    pub cpid_time: f64,
    /// User credit, total.
    pub user_total_credit: f64,
    /// User credit, recent average.
    pub user_expavg_credit: f64,
    /// Account creation time.
    pub user_create_time: f64,
    /// Scheduler request counter; never decreases (the server makes a new host otherwise).
    pub rpc_seqno: i32,
    /// Server's user id.
    pub userid: i32,
    /// Server's team id.
    pub teamid: i32,
    /// Server's host id (0 before the first reply).
    pub hostid: i32,
    /// Host credit, total.
    pub host_total_credit: f64,
    /// Host credit, recent average.
    pub host_expavg_credit: f64,
    /// Host record creation time.
    pub host_create_time: f64,
    /// Consecutive failed scheduler RPCs.
    pub nrpc_failures: i32,
    /// Consecutive failed master-page fetches.
    pub master_fetch_failures: i32,
    /// RPC backoff end (written, ignored on read by BOINC: backoffs do not survive a restart).
    pub min_rpc_time: f64,
    /// When the project asked to be contacted again (0 = no request).
    pub next_rpc_time: f64,
    /// Recent estimated credit (REC) for share accounting.
    pub rec: f64,
    /// When `rec` was last updated.
    pub rec_time: f64,
    /// Resource share (the account file is authoritative).
    pub resource_share: f64,
    /// Share set by an account manager (`None` when not set; BOINC writes it when ≥ 0).
    pub ams_resource_share_new: Option<f64>,
    /// Disk used by the project, bytes.
    pub disk_usage: f64,
    /// Disk share, bytes.
    pub disk_share: f64,
    /// Disk the project would like, bytes.
    pub desired_disk_usage: f64,
    /// Duration correction factor.
    pub duration_correction_factor: f64,
    /// Why an RPC is pending, if one is.
    pub sched_rpc_pending: Option<RpcReason>,
    /// Send `time_stats_log` entries since this time (0 = no).
    pub send_time_stats_log: i32,
    /// Send job-log entries since this time (0 = no).
    pub send_job_log: i32,
    /// Jobs completed successfully.
    pub njobs_success: i32,
    /// Jobs that failed.
    pub njobs_error: i32,
    /// Total elapsed time of completed jobs, seconds.
    pub elapsed_time: f64,
    /// Last scheduler RPC (Unix time).
    pub last_rpc_time: f64,
    /// The project uses `app_info.xml` (ignored on read by BOINC).
    pub anonymous_platform: bool,
    /// Fetch the master page before the next RPC.
    pub master_url_fetch_pending: bool,
    /// Trickle-up messages wait to be sent.
    pub trickle_up_pending: bool,
    /// Include `<in_progress_results>` in requests.
    pub send_full_workload: bool,
    /// Don't use the duration correction factor.
    pub dont_use_dcf: bool,
    /// Project flag: its apps use little CPU.
    pub non_cpu_intensive: bool,
    /// Project flag: enforce memory bounds strictly.
    pub strict_memory_bound: bool,
    /// Suspended by the user.
    pub suspended_via_gui: bool,
    /// "No new tasks".
    pub dont_request_more_work: bool,
    /// Detach once the current work is done.
    pub detach_when_done: bool,
    /// The project has ended.
    pub ended: bool,
    /// Attached by an account manager.
    pub attached_via_acct_mgr: bool,
    /// An RPC was running when the file was written (ignored on read by BOINC).
    pub scheduler_rpc_in_progress: bool,
    /// Use real symlinks in slot directories.
    pub use_symlinks: bool,
    /// Per-resource work-fetch backoffs.
    pub rsc_backoff: Vec<RscBackoff>,
    /// Resources the account manager excludes.
    pub no_rsc_ams: Vec<String>,
    /// Resources the project has no apps for.
    pub no_rsc_apps: Vec<String>,
    /// Resources the user's project preferences exclude.
    pub no_rsc_pref: Vec<String>,
    /// Scheduler URLs from the master page.
    pub scheduler_urls: Vec<String>,
    /// The project's code-signing public key (whitespace-trimmed), if known.
    pub code_sign_key: Option<String>,
    /// Trickle-up URLs from the server.
    pub trickle_up_urls: Vec<String>,
    /// CPU recent-average credit estimate.
    pub cpu_ec: f64,
    /// CPU time used, seconds.
    pub cpu_time: f64,
    /// GPU recent-average credit estimate.
    pub gpu_ec: f64,
    /// GPU time used, seconds.
    pub gpu_time: f64,
    /// Elements we do not know, kept verbatim.
    pub extra: Vec<String>,
}

impl Default for Project {
    fn default() -> Self {
        Project {
            master_url: String::new(),
            project_name: String::new(),
            symstore: String::new(),
            user_name: String::new(),
            team_name: String::new(),
            host_venue: String::new(),
            email_hash: String::new(),
            cross_project_id: String::new(),
            external_cpid: String::new(),
            cpid_time: 0.0,
            user_total_credit: 0.0,
            user_expavg_credit: 0.0,
            user_create_time: 0.0,
            rpc_seqno: 0,
            userid: 0,
            teamid: 0,
            hostid: 0,
            host_total_credit: 0.0,
            host_expavg_credit: 0.0,
            host_create_time: 0.0,
            nrpc_failures: 0,
            master_fetch_failures: 0,
            min_rpc_time: 0.0,
            next_rpc_time: 0.0,
            rec: 0.0,
            rec_time: 0.0,
            resource_share: 100.0,
            ams_resource_share_new: None,
            disk_usage: 0.0,
            disk_share: 0.0,
            desired_disk_usage: 0.0,
            duration_correction_factor: 1.0,
            sched_rpc_pending: None,
            send_time_stats_log: 0,
            send_job_log: 0,
            njobs_success: 0,
            njobs_error: 0,
            elapsed_time: 0.0,
            last_rpc_time: 0.0,
            anonymous_platform: false,
            master_url_fetch_pending: false,
            trickle_up_pending: false,
            send_full_workload: false,
            dont_use_dcf: false,
            non_cpu_intensive: false,
            strict_memory_bound: false,
            suspended_via_gui: false,
            dont_request_more_work: false,
            detach_when_done: false,
            ended: false,
            attached_via_acct_mgr: false,
            scheduler_rpc_in_progress: false,
            use_symlinks: false,
            rsc_backoff: Vec::new(),
            no_rsc_ams: Vec::new(),
            no_rsc_apps: Vec::new(),
            no_rsc_pref: Vec::new(),
            scheduler_urls: Vec::new(),
            code_sign_key: None,
            trickle_up_urls: Vec::new(),
            cpu_ec: 0.0,
            cpu_time: 0.0,
            gpu_ec: 0.0,
            gpu_time: 0.0,
            extra: Vec::new(),
        }
    }
}

impl Project {
    /// The name to show: the project's own, or its master URL before a reply gave one.
    pub fn name_or_url(&self) -> &str {
        if self.project_name.is_empty() {
            &self.master_url
        } else {
            &self.project_name
        }
    }

    /// Reads `<project>`; `<master_url>` is mandatory.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Project, XmlError> {
        let mut p = Project::default();
        if !tag.is_empty() {
            while let Some(t) = r.next_child()? {
                match t.name() {
                    "master_url" => p.master_url = r.string(&t)?,
                    "project_name" => p.project_name = r.string(&t)?,
                    "symstore" => p.symstore = r.string(&t)?,
                    "user_name" => p.user_name = r.string(&t)?,
                    "team_name" => p.team_name = r.string(&t)?,
                    "host_venue" => p.host_venue = r.string(&t)?,
                    "email_hash" => p.email_hash = r.string(&t)?,
                    "cross_project_id" => p.cross_project_id = r.string(&t)?,
                    "external_cpid" => p.external_cpid = r.string(&t)?,
                    "cpid_time" => p.cpid_time = r.num_or(&t, 0.0)?,
                    "user_total_credit" => p.user_total_credit = r.num_or(&t, 0.0)?,
                    "user_expavg_credit" => p.user_expavg_credit = r.num_or(&t, 0.0)?,
                    "user_create_time" => p.user_create_time = r.num_or(&t, 0.0)?,
                    "rpc_seqno" => p.rpc_seqno = r.num_clamped(&t, 0, i32::MAX)?.unwrap_or(0),
                    "userid" => p.userid = r.num_or(&t, 0)?,
                    "teamid" => p.teamid = r.num_or(&t, 0)?,
                    "hostid" => p.hostid = r.num_or(&t, 0)?,
                    "host_total_credit" => p.host_total_credit = r.num_or(&t, 0.0)?,
                    "host_expavg_credit" => p.host_expavg_credit = r.num_or(&t, 0.0)?,
                    "host_create_time" => p.host_create_time = r.num_or(&t, 0.0)?,
                    "nrpc_failures" => {
                        p.nrpc_failures = r.num_clamped(&t, 0, i32::MAX)?.unwrap_or(0)
                    }
                    "master_fetch_failures" => {
                        p.master_fetch_failures = r.num_clamped(&t, 0, i32::MAX)?.unwrap_or(0)
                    }
                    "min_rpc_time" => p.min_rpc_time = r.num_or(&t, 0.0)?,
                    "next_rpc_time" => p.next_rpc_time = r.num_or(&t, 0.0)?,
                    "rec" => p.rec = r.num_or(&t, 0.0)?,
                    "rec_time" => p.rec_time = r.num_or(&t, 0.0)?,
                    "resource_share" => {
                        p.resource_share = r.num_clamped(&t, 0.0, 1e9)?.unwrap_or(100.0)
                    }
                    "ams_resource_share_new" | "ams_resource_share" => {
                        p.ams_resource_share_new = r.num(&t)?.filter(|v: &f64| *v >= 0.0)
                    }
                    "disk_usage" => p.disk_usage = r.num_or(&t, 0.0)?,
                    "disk_share" => p.disk_share = r.num_or(&t, 0.0)?,
                    "desired_disk_usage" => p.desired_disk_usage = r.num_or(&t, 0.0)?,
                    "duration_correction_factor" => {
                        p.duration_correction_factor = r.num_clamped(&t, 0.0, 1e6)?.unwrap_or(1.0)
                    }
                    "sched_rpc_pending" => {
                        let n: i32 = r.num_or(&t, 0)?;
                        p.sched_rpc_pending = RpcReason::from_i32(n);
                        if n != 0 && p.sched_rpc_pending.is_none() {
                            r.warn(&t, format!("unknown RPC reason {n}; ignored"));
                        }
                    }
                    "send_time_stats_log" => p.send_time_stats_log = r.num_or(&t, 0)?,
                    "send_job_log" => p.send_job_log = r.num_or(&t, 0)?,
                    "njobs_success" => p.njobs_success = r.num_or(&t, 0)?,
                    "njobs_error" => p.njobs_error = r.num_or(&t, 0)?,
                    "elapsed_time" => p.elapsed_time = r.num_or(&t, 0.0)?,
                    "last_rpc_time" => p.last_rpc_time = r.num_or(&t, 0.0)?,
                    "anonymous_platform" => p.anonymous_platform = r.flag(&t)?,
                    "master_url_fetch_pending" => p.master_url_fetch_pending = r.flag(&t)?,
                    "trickle_up_pending" => p.trickle_up_pending = r.flag(&t)?,
                    "send_full_workload" => p.send_full_workload = r.flag(&t)?,
                    "dont_use_dcf" => p.dont_use_dcf = r.flag(&t)?,
                    "non_cpu_intensive" => p.non_cpu_intensive = r.flag(&t)?,
                    "strict_memory_bound" => p.strict_memory_bound = r.flag(&t)?,
                    "suspended_via_gui" => p.suspended_via_gui = r.flag(&t)?,
                    "dont_request_more_work" => p.dont_request_more_work = r.flag(&t)?,
                    "detach_when_done" => p.detach_when_done = r.flag(&t)?,
                    "ended" => p.ended = r.flag(&t)?,
                    "attached_via_acct_mgr" => p.attached_via_acct_mgr = r.flag(&t)?,
                    "scheduler_rpc_in_progress" => p.scheduler_rpc_in_progress = r.flag(&t)?,
                    "use_symlinks" => p.use_symlinks = r.flag(&t)?,
                    "rsc_backoff_time" | "rsc_backoff_interval" => {
                        let is_time = t.name() == "rsc_backoff_time";
                        let (name, value) = read_name_value(r, &t)?;
                        let entry = match p.rsc_backoff.iter_mut().find(|b| b.name == name) {
                            Some(e) => e,
                            None => {
                                p.rsc_backoff.push(RscBackoff {
                                    name,
                                    ..RscBackoff::default()
                                });
                                let last = p.rsc_backoff.len() - 1;
                                &mut p.rsc_backoff[last]
                            }
                        };
                        if is_time {
                            entry.backoff_time = value;
                        } else {
                            entry.backoff_interval = value;
                        }
                    }
                    "no_rsc_ams" => p.no_rsc_ams.push(r.string(&t)?),
                    "no_rsc_apps" => p.no_rsc_apps.push(r.string(&t)?),
                    "no_rsc_pref" => p.no_rsc_pref.push(r.string(&t)?),
                    "scheduler_url" => p.scheduler_urls.push(r.string(&t)?),
                    "code_sign_key" => {
                        let k = block_text(r, &t)?;
                        p.code_sign_key = (!k.is_empty()).then_some(k);
                    }
                    "trickle_up_url" => p.trickle_up_urls.push(r.string(&t)?),
                    "cpu_ec" => p.cpu_ec = r.num_or(&t, 0.0)?,
                    "cpu_time" => p.cpu_time = r.num_or(&t, 0.0)?,
                    "gpu_ec" => p.gpu_ec = r.num_or(&t, 0.0)?,
                    "gpu_time" => p.gpu_time = r.num_or(&t, 0.0)?,
                    _ => keep(r, &t, "project", &mut p.extra)?,
                }
            }
        }
        if p.master_url.is_empty() {
            return Err(r.missing(tag, "master_url"));
        }
        Ok(p)
    }

    /// Opens `<project>` and writes the fields the state file and the GUI RPC form share,
    /// in their common order (identity, credit, RPC and scheduling figures, flags, resource
    /// backoffs, `no_rsc_*`, `ams_resource_share_new`).
    pub(crate) fn write_common(&self, w: &mut XmlWriter) {
        w.open("project")
            .text("master_url", &self.master_url)
            .text("project_name", &self.project_name)
            .text("symstore", &self.symstore)
            .text("user_name", &self.user_name)
            .text("team_name", &self.team_name)
            .text("host_venue", &self.host_venue)
            .text("email_hash", &self.email_hash)
            .text("cross_project_id", &self.cross_project_id)
            .text("external_cpid", &self.external_cpid)
            .f64("cpid_time", self.cpid_time)
            .f64("user_total_credit", self.user_total_credit)
            .f64("user_expavg_credit", self.user_expavg_credit)
            .f64("user_create_time", self.user_create_time)
            .num("rpc_seqno", self.rpc_seqno)
            .num("userid", self.userid)
            .num("teamid", self.teamid)
            .num("hostid", self.hostid)
            .f64("host_total_credit", self.host_total_credit)
            .f64("host_expavg_credit", self.host_expavg_credit)
            .f64("host_create_time", self.host_create_time)
            .num("nrpc_failures", self.nrpc_failures)
            .num("master_fetch_failures", self.master_fetch_failures)
            .f64("min_rpc_time", self.min_rpc_time)
            .f64("next_rpc_time", self.next_rpc_time)
            .f64("rec", self.rec)
            .f64("rec_time", self.rec_time)
            .f64("resource_share", self.resource_share)
            .f64("disk_usage", self.disk_usage)
            .f64("disk_share", self.disk_share)
            .f64("desired_disk_usage", self.desired_disk_usage)
            .f64(
                "duration_correction_factor",
                self.duration_correction_factor,
            )
            .num(
                "sched_rpc_pending",
                self.sched_rpc_pending.map_or(0, RpcReason::as_i32),
            )
            .num("send_time_stats_log", self.send_time_stats_log)
            .num("send_job_log", self.send_job_log)
            .num("njobs_success", self.njobs_success)
            .num("njobs_error", self.njobs_error)
            .f64("elapsed_time", self.elapsed_time)
            .f64("last_rpc_time", self.last_rpc_time)
            .flag("anonymous_platform", self.anonymous_platform)
            .flag("master_url_fetch_pending", self.master_url_fetch_pending)
            .flag("trickle_up_pending", self.trickle_up_pending)
            .flag("send_full_workload", self.send_full_workload)
            .flag("dont_use_dcf", self.dont_use_dcf)
            .flag("non_cpu_intensive", self.non_cpu_intensive)
            .flag("strict_memory_bound", self.strict_memory_bound)
            .flag("suspended_via_gui", self.suspended_via_gui)
            .flag("dont_request_more_work", self.dont_request_more_work)
            .flag("detach_when_done", self.detach_when_done)
            .flag("ended", self.ended)
            .flag("attached_via_acct_mgr", self.attached_via_acct_mgr)
            .flag("scheduler_rpc_in_progress", self.scheduler_rpc_in_progress)
            .flag("use_symlinks", self.use_symlinks);
        for b in &self.rsc_backoff {
            w.open("rsc_backoff_time")
                .text("name", &b.name)
                .f64("value", b.backoff_time)
                .close("rsc_backoff_time");
            w.open("rsc_backoff_interval")
                .text("name", &b.name)
                .f64("value", b.backoff_interval)
                .close("rsc_backoff_interval");
        }
        for n in &self.no_rsc_ams {
            w.text("no_rsc_ams", n);
        }
        for n in &self.no_rsc_apps {
            w.text("no_rsc_apps", n);
        }
        for n in &self.no_rsc_pref {
            w.text("no_rsc_pref", n);
        }
        if let Some(s) = self.ams_resource_share_new {
            w.f64("ams_resource_share_new", s);
        }
    }

    /// Writes `<project>` in the official order.
    pub fn write(&self, w: &mut XmlWriter) {
        self.write_common(w);
        for u in &self.scheduler_urls {
            w.text("scheduler_url", u);
        }
        if let Some(k) = &self.code_sign_key {
            write_block(w, "code_sign_key", k);
        }
        for u in &self.trickle_up_urls {
            w.text("trickle_up_url", u);
        }
        w.f64("cpu_ec", self.cpu_ec)
            .f64("cpu_time", self.cpu_time)
            .f64("gpu_ec", self.gpu_ec)
            .f64("gpu_time", self.gpu_time);
        for e in &self.extra {
            w.raw(e);
        }
        w.close("project");
    }
}

/// Reads `<x><name>N</name><value>V</value></x>`.
fn read_name_value<'a>(r: &mut XmlReader<'a>, tag: &Tag<'a>) -> Result<(String, f64), XmlError> {
    let mut name = String::new();
    let mut value = 0.0;
    if tag.is_empty() {
        return Ok((name, value));
    }
    while let Some(t) = r.next_child()? {
        match t.name() {
            "name" => name = r.string(&t)?,
            "value" => value = r.num_or(&t, 0.0)?,
            _ => r.unknown(&t, tag.name())?,
        }
    }
    Ok((name, value))
}
