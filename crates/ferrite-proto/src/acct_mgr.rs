//! Account managers (BAM!, Science United, boinchub, GridRepublic): the two files that say
//! which manager a client uses (`acct_mgr_url.xml`, `acct_mgr_login.xml`, in the official
//! client's layout so a data directory moves between clients and keeps syncing), the request
//! a client posts to `<manager URL>rpc.php` and the manager's reply
//! (`client/acct_mgr.cpp` in BOINC).

use crate::client_state::{Form, NetStats, TimeStats};
use crate::host::{HostInfo, HostInfoForm};
use crate::notices::RssFeed;
use crate::xml::{escape, Parsed, Tag, XmlError, XmlReader, XmlWriter};

/// The manager's URL, name and signing key.
pub const ACCT_MGR_URL_FILE: &str = "acct_mgr_url.xml";
/// The account at the manager and the sync bookkeeping.
pub const ACCT_MGR_LOGIN_FILE: &str = "acct_mgr_login.xml";
/// The last request posted to the manager (kept for people, as officially).
pub const ACCT_MGR_REQUEST_FILE: &str = "acct_mgr_request.xml";
/// The last reply of the manager.
pub const ACCT_MGR_REPLY_FILE: &str = "acct_mgr_reply.xml";

/// Keyword preferences (BOINC 8.0 `USER_KEYWORDS`): keyword ids the user wants or refuses.
/// They come from the manager and go into every scheduler request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserKeywords {
    /// Wanted keyword ids.
    pub yes: Vec<i32>,
    /// Refused keyword ids.
    pub no: Vec<i32>,
}

impl UserKeywords {
    /// No keyword at all (nothing is written then).
    pub fn is_empty(&self) -> bool {
        self.yes.is_empty() && self.no.is_empty()
    }

    /// Reads `<user_keywords>`.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut k = Self::default();
        if tag.is_empty() {
            return Ok(k);
        }
        while let Some(c) = r.next_child()? {
            match c.name() {
                "yes" => k.yes.extend(r.num::<i32>(&c)?),
                "no" => k.no.extend(r.num::<i32>(&c)?),
                _ => r.unknown(&c, "user_keywords")?,
            }
        }
        Ok(k)
    }

    /// The element as the official client writes it (three-space indentation inside), or
    /// an empty string when there is no keyword.
    pub fn to_xml(&self) -> String {
        if self.is_empty() {
            return String::new();
        }
        let mut s = String::from("<user_keywords>\n");
        for k in &self.yes {
            s.push_str(&format!("   <yes>{k}</yes>\n"));
        }
        for k in &self.no {
            s.push_str(&format!("   <no>{k}</no>\n"));
        }
        s.push_str("</user_keywords>\n");
        s
    }
}

/// `acct_mgr_url.xml` (`ACCT_MGR_INFO::write_info`/`init`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AcctMgrUrlFile {
    /// The manager's name.
    pub name: String,
    /// The manager's master URL (ends with `/`).
    pub url: String,
    /// Send the GUI RPC port and password in requests (farm managers).
    pub send_gui_rpc_info: bool,
    /// The manager's public key, in BOINC's key text form (trimmed); empty when unknown.
    pub signing_key: String,
    /// The manager's web site needs a cookie (kept for `acct_mgr_info`).
    pub cookie_required: bool,
    /// Where to send a user whose cookie is missing.
    pub cookie_failure_url: String,
}

impl AcctMgrUrlFile {
    /// Reads `<acct_mgr>`.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut f = Self::default();
        if tag.is_empty() {
            return Ok(f);
        }
        while let Some(c) = r.next_child()? {
            match c.name() {
                "name" => f.name = r.string(&c)?,
                "url" => f.url = r.string(&c)?,
                "send_gui_rpc_info" => f.send_gui_rpc_info = r.flag(&c)?,
                "signing_key" => f.signing_key = r.inner_raw(&c)?.trim().to_owned(),
                "cookie_required" => f.cookie_required = r.flag(&c)?,
                "cookie_failure_url" => f.cookie_failure_url = r.string(&c)?,
                _ => r.unknown(&c, "acct_mgr")?,
            }
        }
        Ok(f)
    }

    /// Parses the file.
    pub fn parse(text: &str) -> Result<Parsed<Self>, XmlError> {
        crate::xml::parse_document(text, ACCT_MGR_URL_FILE, "acct_mgr", Self::read)
    }

    /// The file as the official client writes it.
    pub fn to_xml(&self) -> String {
        let mut w = XmlWriter::new();
        w.open("acct_mgr")
            .text("name", &self.name)
            .text("url", &self.url)
            .flag("send_gui_rpc_info", self.send_gui_rpc_info);
        let mut s = w.finish();
        if !self.signing_key.is_empty() {
            s.push_str(&format!(
                "    <signing_key>\n{}\n</signing_key>\n",
                self.signing_key
            ));
        }
        if self.cookie_required {
            s.push_str("    <cookie_required/>\n");
            s.push_str(&format!(
                "    <cookie_failure_url>{}</cookie_failure_url>\n",
                escape(&self.cookie_failure_url)
            ));
        }
        s.push_str("</acct_mgr>\n");
        s
    }
}

/// `acct_mgr_login.xml` (`ACCT_MGR_INFO::write_info`/`parse_login_file`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AcctMgrLoginFile {
    /// The account key at the manager (wins over name and password).
    pub authenticator: String,
    /// Login name (often an e-mail address).
    pub login: String,
    /// `MD5hex(password + lowercase(login))`.
    pub password_hash: String,
    /// The host CPID sent in the last request.
    pub previous_host_cpid: String,
    /// Unix time of the next periodic sync.
    pub next_rpc_time: f64,
    /// The manager's opaque data, echoed in every request (trimmed).
    pub opaque: String,
    /// Hide project notices.
    pub no_project_notices: bool,
    /// The manager may change the set of projects (Science United).
    pub dynamic: bool,
    /// Account name at the manager.
    pub user_name: String,
    /// Team name at the manager.
    pub team_name: String,
    /// Keyword preferences.
    pub user_keywords: UserKeywords,
}

impl AcctMgrLoginFile {
    /// Reads `<acct_mgr_login>`.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut f = Self::default();
        if tag.is_empty() {
            return Ok(f);
        }
        while let Some(c) = r.next_child()? {
            match c.name() {
                "authenticator" => f.authenticator = r.string(&c)?,
                "login" => f.login = r.string(&c)?,
                "password_hash" => f.password_hash = r.string(&c)?,
                "previous_host_cpid" => f.previous_host_cpid = r.string(&c)?,
                "next_rpc_time" => f.next_rpc_time = r.num_or(&c, 0.0)?,
                "opaque" => f.opaque = r.inner_raw(&c)?.trim().to_owned(),
                "no_project_notices" => f.no_project_notices = r.flag(&c)?,
                "dynamic" => f.dynamic = r.flag(&c)?,
                "user_name" => f.user_name = r.string(&c)?,
                "team_name" => f.team_name = r.string(&c)?,
                "user_keywords" => f.user_keywords = UserKeywords::read(r, &c)?,
                _ => r.unknown(&c, "acct_mgr_login")?,
            }
        }
        Ok(f)
    }

    /// Parses the file.
    pub fn parse(text: &str) -> Result<Parsed<Self>, XmlError> {
        crate::xml::parse_document(text, ACCT_MGR_LOGIN_FILE, "acct_mgr_login", Self::read)
    }

    /// The file as the official client writes it (opaque data between newlines, names
    /// unindented).
    pub fn to_xml(&self) -> String {
        let mut s = String::from("<acct_mgr_login>\n");
        if !self.authenticator.is_empty() {
            s.push_str(&format!(
                "    <authenticator>{}</authenticator>\n",
                escape(&self.authenticator)
            ));
        } else {
            s.push_str(&format!("    <login>{}</login>\n", escape(&self.login)));
            s.push_str(&format!(
                "    <password_hash>{}</password_hash>\n",
                escape(&self.password_hash)
            ));
        }
        s.push_str(&format!(
            "    <previous_host_cpid>{}</previous_host_cpid>\n    <next_rpc_time>{:.6}</next_rpc_time>\n    <opaque>\n{}\n    </opaque>\n    <no_project_notices>{}</no_project_notices>\n    <dynamic>{}</dynamic>\n",
            escape(&self.previous_host_cpid),
            self.next_rpc_time,
            self.opaque,
            u8::from(self.no_project_notices),
            u8::from(self.dynamic),
        ));
        if !self.user_name.is_empty() {
            s.push_str(&format!(
                "<user_name>{}</user_name>\n",
                escape(&self.user_name)
            ));
        }
        if !self.team_name.is_empty() {
            s.push_str(&format!(
                "<team_name>{}</team_name>\n",
                escape(&self.team_name)
            ));
        }
        s.push_str(&self.user_keywords.to_xml());
        s.push_str("</acct_mgr_login>\n");
        s
    }

    /// True when the file holds credentials (an account key, or a name and a hash).
    pub fn has_credentials(&self) -> bool {
        !self.authenticator.is_empty() || (!self.login.is_empty() && !self.password_hash.is_empty())
    }
}

/// How a client proves who it is to the manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AmCredentials {
    /// The account key the manager gave.
    Authenticator(String),
    /// Login name and `MD5hex(password + lowercase(name))`.
    Login {
        /// Login name.
        name: String,
        /// Password hash.
        password_hash: String,
    },
}

/// The password hash the official client sends: `MD5hex(password + lowercase(name))`; a
/// password written `hash:XXXX` is the hash `XXXX` itself.
pub fn password_hash(name: &str, password: &str) -> String {
    match password.strip_prefix("hash:") {
        Some(h) => h.to_owned(),
        None => crate::crypt::md5_hex(format!("{password}{}", name.to_lowercase()).as_bytes()),
    }
}

/// One `<project>` of a request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AmProject {
    /// Master URL.
    pub url: String,
    /// Project name.
    pub project_name: String,
    /// Suspended by the user (or the manager).
    pub suspended_via_gui: bool,
    /// Host id at the project.
    pub hostid: i32,
    /// Estimated seconds of queued work.
    pub not_started_dur: f64,
    /// Estimated seconds left of running work.
    pub in_progress_dur: f64,
    /// Attached by the manager.
    pub attached_via_acct_mgr: bool,
    /// "No new tasks".
    pub dont_request_more_work: bool,
    /// Detach when the work is done.
    pub detach_when_done: bool,
    /// The project has ended.
    pub ended: bool,
    /// Resource share in force.
    pub resource_share: f64,
    /// Disk used, bytes.
    pub disk_usage: f64,
    /// Disk share, bytes.
    pub disk_share: f64,
    /// Figures only a dynamic manager gets.
    pub dynamic: Option<AmProjectWork>,
    /// The project's account key: sent only for projects the manager attached.
    pub account_key: Option<String>,
}

/// Work and starvation figures sent to dynamic managers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AmProjectWork {
    /// Consecutive failed scheduler RPCs.
    pub nrpc_failures: i32,
    /// CPU credit estimate.
    pub cpu_ec: f64,
    /// CPU time, seconds.
    pub cpu_time: f64,
    /// GPU credit estimate.
    pub gpu_ec: f64,
    /// GPU time, seconds.
    pub gpu_time: f64,
    /// Jobs done successfully.
    pub njobs_success: i32,
    /// Jobs failed.
    pub njobs_error: i32,
    /// Resource types that asked for work and got none.
    pub sched_req_no_work: Vec<String>,
}

/// The body of an account-manager request (`ACCT_MGR_OP::do_rpc`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AmRequest {
    /// Credentials; `None` writes an empty name and hash.
    pub credentials: Option<AmCredentials>,
    /// Host CPID.
    pub host_cpid: String,
    /// Host name.
    pub domain_name: String,
    /// `M.m.r`.
    pub client_version: String,
    /// Permanent run mode: `always`, `auto` or `never`.
    pub run_mode: String,
    /// The primary platform.
    pub platform_name: String,
    /// Other platforms.
    pub alt_platforms: Vec<String>,
    /// The CPID sent last time (empty: not written).
    pub previous_host_cpid: String,
    /// GUI RPC port and password (first line of `gui_rpc_auth.cfg`, `None` without the file),
    /// when the manager asked for them.
    pub gui_rpc: Option<(u16, Option<String>)>,
    /// The attached projects.
    pub projects: Vec<AmProject>,
    /// The global preferences in force (`<global_preferences>` element).
    pub working_global_prefs: String,
    /// `global_prefs.xml`, verbatim, when it exists.
    pub global_prefs_file: Option<String>,
    /// Host description (with GPUs; network information unless suppressed).
    pub host_info: HostInfo,
    /// Write `domain_name`/`ip_addr` in `host_info`.
    pub net_info: bool,
    /// The manager's opaque data (empty: not written).
    pub opaque: String,
    /// Time statistics.
    pub time_stats: TimeStats,
    /// Network statistics.
    pub net_stats: NetStats,
    /// GUI-form `<result>` elements, when the manager asked for tasks.
    pub results: Option<String>,
}

impl AmRequest {
    /// The request as the official client writes it.
    pub fn to_xml(&self) -> String {
        let mut s =
            String::from("<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n<acct_mgr_request>\n");
        match &self.credentials {
            Some(AmCredentials::Authenticator(a)) => {
                s.push_str(&format!(
                    "   <authenticator>{}</authenticator>\n",
                    escape(a)
                ));
            }
            Some(AmCredentials::Login {
                name,
                password_hash,
            }) => {
                s.push_str(&format!(
                    "   <name>{}</name>\n   <password_hash>{}</password_hash>\n",
                    escape(name),
                    escape(password_hash)
                ));
            }
            None => s.push_str("   <name></name>\n   <password_hash></password_hash>\n"),
        }
        s.push_str(&format!(
            "   <host_cpid>{}</host_cpid>\n   <domain_name>{}</domain_name>\n   <client_version>{}</client_version>\n   <run_mode>{}</run_mode>\n",
            escape(&self.host_cpid),
            escape(&self.domain_name),
            escape(&self.client_version),
            escape(&self.run_mode)
        ));
        s.push_str(&format!(
            "    <platform_name>{}</platform_name>\n",
            escape(&self.platform_name)
        ));
        for p in &self.alt_platforms {
            s.push_str(&format!(
                "    <alt_platform>\n        <name>{}</name>\n    </alt_platform>\n",
                escape(p)
            ));
        }
        if !self.previous_host_cpid.is_empty() {
            s.push_str(&format!(
                "   <previous_host_cpid>{}</previous_host_cpid>\n",
                escape(&self.previous_host_cpid)
            ));
        }
        if let Some((port, password)) = &self.gui_rpc {
            s.push_str(&format!("   <gui_rpc_port>{port}</gui_rpc_port>\n"));
            if let Some(p) = password {
                s.push_str(&format!(
                    "   <gui_rpc_password>{}</gui_rpc_password>\n",
                    escape(p)
                ));
            }
        }
        for p in &self.projects {
            write_project(&mut s, p);
        }
        s.push_str("<working_global_preferences>\n");
        s.push_str(self.working_global_prefs.trim());
        s.push_str("\n</working_global_preferences>\n");
        if let Some(g) = &self.global_prefs_file {
            s.push_str(g.trim());
            s.push('\n');
        }
        let mut w = XmlWriter::new();
        self.host_info.write(
            &mut w,
            HostInfoForm {
                net_info: self.net_info,
                coprocs: true,
            },
        );
        s.push_str(&w.finish());
        if !self.opaque.is_empty() {
            s.push_str(&format!("   <opaque>\n{}\n   </opaque>\n", self.opaque));
        }
        let mut w = XmlWriter::new();
        self.time_stats.write(&mut w, Form::Request);
        self.net_stats.write(&mut w);
        s.push_str(&w.finish());
        if let Some(r) = &self.results {
            s.push_str("<results>\n");
            let r = r.trim();
            if !r.is_empty() {
                s.push_str(r);
                s.push('\n');
            }
            s.push_str("</results>\n");
        }
        s.push_str("</acct_mgr_request>\n");
        s
    }

    /// Reads a request (the test account manager's side).
    pub fn parse(text: &str) -> Result<Parsed<Self>, XmlError> {
        crate::xml::parse_document(text, ACCT_MGR_REQUEST_FILE, "acct_mgr_request", |r, tag| {
            let mut q = Self::default();
            let (mut name, mut hash) = (None, None);
            if tag.is_empty() {
                return Ok(q);
            }
            while let Some(c) = r.next_child()? {
                match c.name() {
                    "authenticator" => {
                        q.credentials = Some(AmCredentials::Authenticator(r.string(&c)?));
                    }
                    "name" => name = Some(r.string(&c)?),
                    "password_hash" => hash = Some(r.string(&c)?),
                    "host_cpid" => q.host_cpid = r.string(&c)?,
                    "domain_name" => q.domain_name = r.string(&c)?,
                    "client_version" => q.client_version = r.string(&c)?,
                    "run_mode" => q.run_mode = r.string(&c)?,
                    "platform_name" => q.platform_name = r.string(&c)?,
                    "alt_platform" => {
                        while let Some(n) = r.next_child()? {
                            if n.name() == "name" {
                                q.alt_platforms.push(r.string(&n)?);
                            } else {
                                r.skip(&n)?;
                            }
                        }
                    }
                    "previous_host_cpid" => q.previous_host_cpid = r.string(&c)?,
                    "gui_rpc_port" => {
                        let port = r
                            .num::<u32>(&c)?
                            .and_then(|p| u16::try_from(p).ok())
                            .unwrap_or(0);
                        let pw = q.gui_rpc.take().and_then(|g| g.1);
                        q.gui_rpc = Some((port, pw));
                    }
                    "gui_rpc_password" => {
                        let pw = r.string(&c)?;
                        let port = q.gui_rpc.take().map_or(0, |g| g.0);
                        q.gui_rpc = Some((port, Some(pw)));
                    }
                    "project" => q.projects.push(read_project(r, &c)?),
                    "working_global_preferences" => {
                        q.working_global_prefs = r.inner_raw(&c)?.trim().to_owned();
                    }
                    "global_preferences" => q.global_prefs_file = Some(r.raw(&c)?.to_owned()),
                    "host_info" => {
                        q.host_info = HostInfo::read(r, &c)?;
                        q.net_info = !q.host_info.domain_name.is_empty();
                    }
                    "opaque" => q.opaque = r.inner_raw(&c)?.trim().to_owned(),
                    "time_stats" => q.time_stats = TimeStats::read(r, &c)?,
                    "net_stats" => q.net_stats = NetStats::read(r, &c)?,
                    "results" => q.results = Some(r.inner_raw(&c)?.trim().to_owned()),
                    _ => r.unknown(&c, "acct_mgr_request")?,
                }
            }
            if q.credentials.is_none() {
                let (name, password_hash) = (name.unwrap_or_default(), hash.unwrap_or_default());
                if !name.is_empty() || !password_hash.is_empty() {
                    q.credentials = Some(AmCredentials::Login {
                        name,
                        password_hash,
                    });
                }
            }
            Ok(q)
        })
    }
}

fn write_project(s: &mut String, p: &AmProject) {
    s.push_str(&format!(
        "   <project>\n      <url>{}</url>\n      <project_name>{}</project_name>\n      <suspended_via_gui>{}</suspended_via_gui>\n      <hostid>{}</hostid>\n      <not_started_dur>{:.6}</not_started_dur>\n      <in_progress_dur>{:.6}</in_progress_dur>\n      <attached_via_acct_mgr>{}</attached_via_acct_mgr>\n      <dont_request_more_work>{}</dont_request_more_work>\n      <detach_when_done>{}</detach_when_done>\n      <ended>{}</ended>\n      <resource_share>{:.6}</resource_share>\n      <disk_usage>{:.6}</disk_usage>\n      <disk_share>{:.6}</disk_share>\n",
        escape(&p.url),
        escape(&p.project_name),
        u8::from(p.suspended_via_gui),
        p.hostid,
        p.not_started_dur,
        p.in_progress_dur,
        u8::from(p.attached_via_acct_mgr),
        u8::from(p.dont_request_more_work),
        u8::from(p.detach_when_done),
        u8::from(p.ended),
        p.resource_share,
        p.disk_usage,
        p.disk_share,
    ));
    if let Some(d) = &p.dynamic {
        s.push_str(&format!(
            "      <nrpc_failures>{}</nrpc_failures>\n      <cpu_ec>{:.6}</cpu_ec>\n      <cpu_time>{:.6}</cpu_time>\n      <gpu_ec>{:.6}</gpu_ec>\n      <gpu_time>{:.6}</gpu_time>\n      <njobs_success>{}</njobs_success>\n      <njobs_error>{}</njobs_error>\n",
            d.nrpc_failures, d.cpu_ec, d.cpu_time, d.gpu_ec, d.gpu_time, d.njobs_success, d.njobs_error
        ));
        for r in &d.sched_req_no_work {
            s.push_str(&format!(
                "    <sched_req_no_work>{}</sched_req_no_work>\n",
                escape(r)
            ));
        }
    }
    if let Some(k) = &p.account_key {
        s.push_str(&format!("      <account_key>{}</account_key>\n", escape(k)));
    }
    s.push_str("   </project>\n");
}

fn read_project(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<AmProject, XmlError> {
    let mut p = AmProject::default();
    if tag.is_empty() {
        return Ok(p);
    }
    let mut d = AmProjectWork::default();
    let mut dynamic = false;
    while let Some(c) = r.next_child()? {
        match c.name() {
            "url" => p.url = r.string(&c)?,
            "project_name" => p.project_name = r.string(&c)?,
            "suspended_via_gui" => p.suspended_via_gui = r.flag(&c)?,
            "hostid" => p.hostid = r.num_or(&c, 0)?,
            "not_started_dur" => p.not_started_dur = r.num_or(&c, 0.0)?,
            "in_progress_dur" => p.in_progress_dur = r.num_or(&c, 0.0)?,
            "attached_via_acct_mgr" => p.attached_via_acct_mgr = r.flag(&c)?,
            "dont_request_more_work" => p.dont_request_more_work = r.flag(&c)?,
            "detach_when_done" => p.detach_when_done = r.flag(&c)?,
            "ended" => p.ended = r.flag(&c)?,
            "resource_share" => p.resource_share = r.num_or(&c, 0.0)?,
            "disk_usage" => p.disk_usage = r.num_or(&c, 0.0)?,
            "disk_share" => p.disk_share = r.num_or(&c, 0.0)?,
            "account_key" => p.account_key = Some(r.string(&c)?),
            "nrpc_failures" => {
                dynamic = true;
                d.nrpc_failures = r.num_or(&c, 0)?;
            }
            "cpu_ec" => d.cpu_ec = r.num_or(&c, 0.0)?,
            "cpu_time" => d.cpu_time = r.num_or(&c, 0.0)?,
            "gpu_ec" => d.gpu_ec = r.num_or(&c, 0.0)?,
            "gpu_time" => d.gpu_time = r.num_or(&c, 0.0)?,
            "njobs_success" => d.njobs_success = r.num_or(&c, 0)?,
            "njobs_error" => d.njobs_error = r.num_or(&c, 0)?,
            "sched_req_no_work" => d.sched_req_no_work.push(r.string(&c)?),
            _ => r.unknown(&c, "project")?,
        }
    }
    if dynamic {
        p.dynamic = Some(d);
    }
    Ok(p)
}

/// One `<account>` of a reply (`AM_ACCOUNT`). The `Option` fields tell "absent" from a
/// value, as the official client does.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AmAccount {
    /// The project's master URL (mandatory).
    pub url: String,
    /// The manager's signature of `url` (hex block), checked before attaching.
    pub url_signature: String,
    /// The account key at the project.
    pub authenticator: String,
    /// Detach from the project.
    pub detach: bool,
    /// Contact the project's scheduler now.
    pub update: bool,
    /// Resource types the manager excludes (`CPU`, `NVIDIA`, `ATI`, `intel_gpu`, …).
    pub no_rsc: Vec<String>,
    /// "No new tasks".
    pub dont_request_more_work: Option<bool>,
    /// Detach when the work is done.
    pub detach_when_done: Option<bool>,
    /// Host-specific resource share.
    pub resource_share: Option<f64>,
    /// Suspend (true) or resume (false) the project.
    pub suspend: Option<bool>,
    /// Abort the tasks not started yet.
    pub abort_not_started: Option<bool>,
    /// Dynamic managers: the user's average credit at the project.
    pub user_avg_ec: f64,
    /// Dynamic managers: the user's total credit.
    pub user_total_ec: f64,
    /// Dynamic managers: CPU credit estimate.
    pub cpu_ec: f64,
    /// Dynamic managers: CPU time.
    pub cpu_time: f64,
    /// Dynamic managers: GPU credit estimate.
    pub gpu_ec: f64,
    /// Dynamic managers: GPU time.
    pub gpu_time: f64,
    /// Dynamic managers: jobs done.
    pub njobs_success: i32,
    /// Dynamic managers: jobs failed.
    pub njobs_error: i32,
}

impl AmAccount {
    fn no_rsc(&mut self, name: &str, on: bool) {
        let have = self.no_rsc.iter().position(|n| n == name);
        match (on, have) {
            (true, None) => self.no_rsc.push(name.to_owned()),
            (false, Some(i)) => {
                self.no_rsc.remove(i);
            }
            _ => {}
        }
    }

    /// Reads `<account>`; `None` (with a warning) when it has no URL, as the official client
    /// drops such an account.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Option<Self>, XmlError> {
        let mut a = Self::default();
        if tag.is_empty() {
            r.warn(tag, "account without a URL; ignored");
            return Ok(None);
        }
        while let Some(c) = r.next_child()? {
            match c.name() {
                "url" => a.url = r.string(&c)?,
                "url_signature" => {
                    a.url_signature = format!("{}\n", r.inner_raw(&c)?.trim());
                }
                "authenticator" => a.authenticator = r.string(&c)?,
                "detach" => a.detach = r.flag(&c)?,
                "update" => a.update = r.flag(&c)?,
                "user_avg_ec" => a.user_avg_ec = r.num_or(&c, 0.0)?,
                "user_total_ec" => a.user_total_ec = r.num_or(&c, 0.0)?,
                "cpu_ec" => a.cpu_ec = r.num_or(&c, 0.0)?,
                "cpu_time" => a.cpu_time = r.num_or(&c, 0.0)?,
                "gpu_ec" => a.gpu_ec = r.num_or(&c, 0.0)?,
                "gpu_time" => a.gpu_time = r.num_or(&c, 0.0)?,
                "njobs_success" => a.njobs_success = r.num_or(&c, 0)?,
                "njobs_error" => a.njobs_error = r.num_or(&c, 0)?,
                "no_cpu" => {
                    let on = r.flag(&c)?;
                    a.no_rsc("CPU", on);
                }
                // Deprecated; the official client maps both to NVIDIA.
                "no_cuda" | "no_ati" => {
                    let on = r.flag(&c)?;
                    a.no_rsc("NVIDIA", on);
                }
                "no_rsc" => {
                    let name = r.string(&c)?;
                    if !name.is_empty() {
                        a.no_rsc(&name, true);
                    }
                }
                "dont_request_more_work" => a.dont_request_more_work = Some(r.flag(&c)?),
                "detach_when_done" => a.detach_when_done = Some(r.flag(&c)?),
                "resource_share" => {
                    if let Some(v) = r.num::<f64>(&c)? {
                        if v >= 0.0 {
                            a.resource_share = Some(v);
                        } else {
                            r.warn(&c, format!("resource share out of range: {v}; ignored"));
                        }
                    }
                }
                "suspend" => a.suspend = Some(r.flag(&c)?),
                "abort_not_started" => a.abort_not_started = Some(r.flag(&c)?),
                _ => r.unknown(&c, "account")?,
            }
        }
        if a.url.is_empty() {
            r.warn(tag, "account without a URL; ignored");
            return Ok(None);
        }
        Ok(Some(a))
    }

    /// Writes `<account>` (the test account manager's side).
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("account").text("url", &self.url);
        if !self.url_signature.is_empty() {
            w.raw(&format!(
                "<url_signature>\n{}\n</url_signature>",
                self.url_signature.trim()
            ));
        }
        w.nonempty_text("authenticator", &self.authenticator);
        if self.detach {
            w.num("detach", 1);
        }
        if self.update {
            w.num("update", 1);
        }
        for n in &self.no_rsc {
            w.text("no_rsc", n);
        }
        for (name, v) in [
            ("dont_request_more_work", self.dont_request_more_work),
            ("detach_when_done", self.detach_when_done),
            ("suspend", self.suspend),
            ("abort_not_started", self.abort_not_started),
        ] {
            if let Some(v) = v {
                w.bool01(name, v);
            }
        }
        if let Some(s) = self.resource_share {
            w.f64("resource_share", s);
        }
        w.close("account");
    }
}

/// An account manager's reply (`ACCT_MGR_OP::parse`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AmReply {
    /// The manager's name.
    pub name: String,
    /// Account name at the manager.
    pub user_name: String,
    /// Team name at the manager.
    pub team_name: String,
    /// The account key at the manager (replaces name and password).
    pub authenticator: String,
    /// A BOINC error code from the manager (0: none).
    pub error_num: i32,
    /// An error text from the manager (`<error>` or `<error_msg>`).
    pub error: String,
    /// Seconds until the next periodic sync (0: the default day).
    pub repeat_sec: f64,
    /// The manager may change the set of projects.
    pub dynamic: bool,
    /// Send the tasks in progress in later requests.
    pub send_tasks_active: bool,
    /// Send every task in later requests.
    pub send_tasks_all: bool,
    /// Informational messages for the user.
    pub messages: Vec<String>,
    /// Opaque data to store and echo (trimmed; empty: none).
    pub opaque: String,
    /// The manager's public key (trimmed; empty: none).
    pub signing_key: String,
    /// The projects.
    pub accounts: Vec<AmAccount>,
    /// The contents of `<global_preferences>`, verbatim, when given.
    pub global_preferences: Option<String>,
    /// The venue for this host (empty: none).
    pub host_venue: String,
    /// Notice feeds, when the element is there.
    pub rss_feeds: Option<Vec<RssFeed>>,
    /// Hide project notices.
    pub no_project_notices: bool,
    /// Keyword preferences.
    pub user_keywords: UserKeywords,
}

impl AmReply {
    /// Parses a reply; the root must be `<acct_mgr_reply>`.
    pub fn parse(text: &str) -> Result<Parsed<Self>, XmlError> {
        crate::xml::parse_document(text, ACCT_MGR_REPLY_FILE, "acct_mgr_reply", |r, tag| {
            let mut a = Self::default();
            if tag.is_empty() {
                return Ok(a);
            }
            while let Some(c) = r.next_child()? {
                match c.name() {
                    "name" => a.name = r.string(&c)?,
                    "user_name" => a.user_name = r.string(&c)?,
                    "team_name" => a.team_name = r.string(&c)?,
                    "authenticator" => a.authenticator = r.string(&c)?,
                    "error_num" => a.error_num = r.num_or(&c, 0)?,
                    "error" | "error_msg" => a.error = r.string(&c)?,
                    "repeat_sec" => a.repeat_sec = r.num_or(&c, 0.0)?,
                    "dynamic" => a.dynamic = r.flag(&c)?,
                    "send_tasks_active" => a.send_tasks_active = r.flag(&c)?,
                    "send_tasks_all" => a.send_tasks_all = r.flag(&c)?,
                    "message" => a.messages.push(r.string(&c)?),
                    "opaque" => a.opaque = r.inner_raw(&c)?.trim().to_owned(),
                    "signing_key" => a.signing_key = r.inner_raw(&c)?.trim().to_owned(),
                    "account" => a.accounts.extend(AmAccount::read(r, &c)?),
                    "global_preferences" => {
                        a.global_preferences = Some(r.inner_raw(&c)?.to_owned());
                    }
                    "host_venue" => a.host_venue = r.string(&c)?,
                    "rss_feeds" => {
                        let mut feeds = Vec::new();
                        if !c.is_empty() {
                            while let Some(f) = r.next_child()? {
                                if f.name() == "rss_feed" {
                                    feeds.extend(RssFeed::read(r, &f)?);
                                } else {
                                    r.unknown(&f, "rss_feeds")?;
                                }
                            }
                        }
                        a.rss_feeds = Some(feeds);
                    }
                    "no_project_notices" => a.no_project_notices = r.flag(&c)?,
                    "user_keywords" => a.user_keywords = UserKeywords::read(r, &c)?,
                    _ => r.unknown(&c, "acct_mgr_reply")?,
                }
            }
            Ok(a)
        })
    }

    /// The reply as an account manager writes it (the test account manager's side).
    pub fn to_xml(&self) -> String {
        let mut w = XmlWriter::new();
        w.open("acct_mgr_reply")
            .nonempty_text("name", &self.name)
            .nonempty_text("user_name", &self.user_name)
            .nonempty_text("team_name", &self.team_name)
            .nonempty_text("authenticator", &self.authenticator);
        if self.error_num != 0 {
            w.num("error_num", self.error_num);
        }
        w.nonempty_text("error_msg", &self.error);
        if self.repeat_sec > 0.0 {
            w.f64("repeat_sec", self.repeat_sec);
        }
        w.flag("dynamic", self.dynamic)
            .flag("send_tasks_active", self.send_tasks_active)
            .flag("send_tasks_all", self.send_tasks_all)
            .flag("no_project_notices", self.no_project_notices);
        for m in &self.messages {
            w.text("message", m);
        }
        if !self.opaque.is_empty() {
            w.verbatim("opaque", &format!("\n{}\n", self.opaque));
        }
        if !self.signing_key.is_empty() {
            w.verbatim("signing_key", &format!("\n{}\n", self.signing_key));
        }
        for acct in &self.accounts {
            acct.write(&mut w);
        }
        if let Some(p) = &self.global_preferences {
            w.verbatim("global_preferences", p);
        }
        w.nonempty_text("host_venue", &self.host_venue);
        if let Some(feeds) = &self.rss_feeds {
            w.open("rss_feeds");
            for f in feeds {
                f.write(&mut w);
            }
            w.close("rss_feeds");
        }
        if !self.user_keywords.is_empty() {
            w.raw(&self.user_keywords.to_xml());
        }
        w.close("acct_mgr_reply");
        w.finish()
    }
}

#[cfg(test)]
mod tests;
