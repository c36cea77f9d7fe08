//! The project itself, without HTTP: its apps (signed), its input, its state, and the
//! answers to the scheduler and web RPCs as text.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use ferrite_proto::client_state::{
    App, AppVersion, CoprocUsage, FileInfo, FileRef, ResourceUsage, TaskResult, Workunit,
};
use ferrite_proto::crypt::{md5_hex, md5_hex_reader, PrivateKey};
use ferrite_proto::host::RscRequest;
use ferrite_proto::sched_reply::{ReplyMessage, SchedulerReply};
use ferrite_proto::sched_request::SchedulerRequest;

mod news;

use crate::config::{is_safe_name, AppSpec, Args};
use crate::fault::{Fault, Faults};
use crate::state::{Host, Job, ResultStatus, State};

/// Size of the file the `huge-file` fault asks for.
pub const HUGE_FILE_BYTES: u64 = 1 << 30;
/// Version number of every app version served (1.00).
const VERSION_NUM: i32 = 100;
/// Size limit of each output file (part of the upload certificate).
pub const MAX_OUTPUT_BYTES: f64 = 1e9;
/// Most jobs sent in one reply.
const MAX_JOBS_PER_RPC: usize = 100;
/// A resent result gets at least this fraction of its original time to deadline again.
const RESEND_DEADLINE_FRACTION: f64 = 0.5;

/// What a download name serves.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A file on disk.
    File(PathBuf),
    /// This many zero bytes (the `huge-file` fault).
    Zeros(u64),
}

/// An app version ready to send: the executable's file name, MD5 and signature.
#[derive(Debug, Clone)]
struct ServedVersion {
    /// The `--app` it comes from.
    spec: AppSpec,
    /// Its executable's name in the download area.
    file_name: String,
    /// Size of the executable.
    nbytes: f64,
    /// MD5 hex of the executable.
    md5: String,
    /// BOINC signature of the executable.
    signature: String,
}

/// What a job is sent to run with: a version the project serves, or, for a client on the
/// anonymous platform, one of the versions its request lists (BOINC's scheduler then sends
/// no app, app version or app file).
#[derive(Debug, Clone, Copy)]
enum Runs<'a> {
    /// One of the project's `--app` versions.
    Served(&'a ServedVersion),
    /// The client's own version.
    Client(&'a AppVersion),
}

impl Runs<'_> {
    fn app_name(&self) -> &str {
        match self {
            Runs::Served(v) => &v.spec.name,
            Runs::Client(v) => &v.app_name,
        }
    }

    fn version_num(&self) -> i32 {
        match self {
            Runs::Served(_) => VERSION_NUM,
            Runs::Client(v) => v.version_num,
        }
    }

    fn plan_class(&self) -> &str {
        match self {
            Runs::Served(v) => &v.spec.plan_class,
            Runs::Client(v) => &v.plan_class,
        }
    }

    /// The GPU type it uses; `None` for CPU versions.
    fn gpu_type(&self) -> Option<&str> {
        match self {
            Runs::Served(v) => v.spec.gpu_type(),
            Runs::Client(v) => {
                v.usage
                    .coprocs
                    .iter()
                    .find(|c| c.count > 0.0)
                    .map(|c| match c.rsc_type.as_str() {
                        "CUDA" => "NVIDIA",
                        t => t,
                    })
            }
        }
    }

    /// CPUs a job uses.
    fn ncpus(&self) -> f64 {
        match self {
            Runs::Served(v) => v.spec.ncpus,
            Runs::Client(v) if v.usage.avg_ncpus > 0.0 => v.usage.avg_ncpus,
            Runs::Client(_) => 1.0,
        }
    }
}

/// The input every job gets.
#[derive(Debug, Clone)]
struct Input {
    /// The file.
    path: PathBuf,
    /// Its size.
    nbytes: f64,
    /// Its MD5 hex.
    md5: String,
}

/// The project: configuration, keys, state and faults.
#[derive(Debug)]
pub struct Project {
    /// Options it was started with.
    args: Args,
    /// Where state and uploads go.
    data: PathBuf,
    /// `http://127.0.0.1:PORT/`.
    base_url: String,
    /// Code-signing (and upload-certificate) key.
    key: PrivateKey,
    /// Its public half as BOINC text.
    public_text: String,
    /// App versions, in `--app` order.
    versions: Vec<ServedVersion>,
    /// The job input.
    input: Input,
    /// Name of the shared input file when `--sticky-input`.
    sticky_name: Option<String>,
    /// Jobs, accounts, hosts, counters.
    state: Mutex<State>,
    /// Armed faults.
    faults: Mutex<Faults>,
    /// Extra download names made by faults.
    extra_downloads: Mutex<HashMap<String, Source>>,
    /// Upload certificates made so far, by output file name: a result sent again gets the
    /// same one without another RSA signature (slow in debug builds, and made while the
    /// state is locked).
    certs: Mutex<HashMap<String, String>>,
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn file_md5(path: &Path) -> anyhow::Result<(f64, String)> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let len = f.metadata()?.len();
    let md5 = md5_hex_reader(std::io::BufReader::new(f))
        .with_context(|| format!("reading {}", path.display()))?;
    Ok((len as f64, md5))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The text an upload certificate signs.
pub fn upload_cert_text(name: &str, max_nbytes: f64) -> String {
    format!("<name>{name}</name><max_nbytes>{max_nbytes:.0}</max_nbytes>")
}

impl Project {
    /// Sets the project up: data directory, key (made once, then reused), signed apps,
    /// input, state (loaded, or jobs made).
    pub fn new(args: Args, data: PathBuf, base_url: String) -> anyhow::Result<Project> {
        std::fs::create_dir_all(data.join("results"))
            .with_context(|| format!("creating {}", data.display()))?;
        let key_path = data.join("code_sign_private");
        let key = match std::fs::read_to_string(&key_path) {
            Ok(text) => PrivateKey::parse(&text).context("reading the saved key")?,
            Err(_) => {
                let key = PrivateKey::generate(&mut rand::thread_rng(), 1024)?;
                std::fs::write(&key_path, key.to_text()?)?;
                key
            }
        };
        let public_text = key.public_key().to_text();
        std::fs::write(data.join("code_sign_public"), &public_text)?;

        let mut versions: Vec<ServedVersion> = Vec::new();
        for spec in &args.apps {
            if versions
                .iter()
                .any(|v| v.spec.name == spec.name && v.spec.plan_class == spec.plan_class)
            {
                anyhow::bail!(
                    "app {} has two versions with plan class `{}`",
                    spec.name,
                    spec.plan_class
                );
            }
            let (nbytes, md5) = file_md5(&spec.path)?;
            let base = spec
                .path
                .file_name()
                .and_then(|n| n.to_str())
                .filter(|n| is_safe_name(n))
                .unwrap_or("app");
            let plan = if spec.plan_class.is_empty() {
                String::new()
            } else {
                format!("_{}", spec.plan_class)
            };
            let file_name = format!("{}_1.00{plan}_{base}", spec.name);
            let signature = key.sign_md5(&md5)?;
            versions.push(ServedVersion {
                spec: spec.clone(),
                file_name,
                nbytes,
                md5,
                signature,
            });
        }

        let input_path = match &args.input {
            Some(p) => p.clone(),
            None => {
                let p = data.join("default_input");
                std::fs::write(&p, "1\n")?;
                p
            }
        };
        let (nbytes, md5) = file_md5(&input_path)?;
        let input = Input {
            path: input_path,
            nbytes,
            md5,
        };
        let sticky_name = args
            .sticky_input
            .then(|| format!("input_{}", &input.md5[..8]));

        let state_path = data.join("state.json");
        let state = match State::load(&state_path)? {
            Some(s) => s,
            None => {
                let mut s = State::default();
                let mut app_names: Vec<&str> = Vec::new();
                for v in &versions {
                    if !app_names.contains(&v.spec.name.as_str()) {
                        app_names.push(&v.spec.name);
                    }
                }
                if !app_names.is_empty() {
                    for i in 0..args.jobs {
                        let app = app_names[i as usize % app_names.len()];
                        let wu_name = format!("{app}_wu_{i}");
                        s.jobs.push(Job {
                            result_name: format!("{wu_name}_0"),
                            wu_name,
                            app_name: app.to_owned(),
                            status: ResultStatus::Unsent,
                            hostid: 0,
                            plan_class: String::new(),
                            sent_time: 0.0,
                            report_deadline: 0.0,
                            exit_status: None,
                            client_state: None,
                            reports: 0,
                            resends: 0,
                            reported_time: None,
                            uploaded_files: Vec::new(),
                            stderr_out: None,
                        });
                        s.counters.jobs_made += 1;
                    }
                }
                s.save(&state_path)?;
                s
            }
        };
        let mut faults = Faults::default();
        for f in &args.faults {
            faults.arm(*f);
        }
        Ok(Project {
            args,
            data,
            base_url,
            key,
            public_text,
            versions,
            input,
            sticky_name,
            state: Mutex::new(state),
            faults: Mutex::new(faults),
            extra_downloads: Mutex::new(HashMap::new()),
            certs: Mutex::new(HashMap::new()),
        })
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// The public code-signing key, BOINC text.
    pub fn public_key_text(&self) -> &str {
        &self.public_text
    }

    /// Uses one count of `fault` if armed.
    pub fn take_fault(&self, fault: Fault) -> bool {
        let hit = lock(&self.faults).take(fault);
        if hit {
            tracing::info!(%fault, "injecting fault");
        }
        hit
    }

    /// Arms a fault (`POST /fault`).
    pub fn arm_fault(&self, spec: crate::fault::FaultSpec) {
        lock(&self.faults).arm(spec);
    }

    fn save(&self, state: &State) {
        if let Err(e) = state.save(&self.data.join("state.json")) {
            tracing::warn!("saving state: {e}");
        }
    }

    /// What a download name serves, if anything.
    pub fn download(&self, name: &str) -> Option<Source> {
        if let Some(v) = self.versions.iter().find(|v| v.file_name == name) {
            return Some(Source::File(v.spec.path.clone()));
        }
        if let Some(s) = lock(&self.extra_downloads).get(name) {
            return Some(s.clone());
        }
        if self.sticky_name.as_deref() == Some(name) {
            return Some(Source::File(self.input.path.clone()));
        }
        if let Some(wu) = name.strip_suffix("_in") {
            if lock(&self.state).jobs.iter().any(|j| j.wu_name == wu) {
                return Some(Source::File(self.input.path.clone()));
            }
        }
        // Anything dropped into DATA/download is served too.
        if is_safe_name(name) {
            let p = self.data.join("download").join(name);
            if p.is_file() {
                return Some(Source::File(p));
            }
        }
        None
    }

    /// The master page: both ways BOINC advertises a scheduler.
    pub fn master_page(&self) -> String {
        let sched = format!("{}cgi", self.base_url);
        format!(
            "<html>\n<head>\n<title>{name}</title>\n\
             <link rel=\"boinc_scheduler\" href=\"{sched}\">\n</head>\n<body>\n\
             <scheduler>{sched}</scheduler>\n<h1>{name}</h1>\n</body>\n</html>\n",
            name = ferrite_proto::xml::escape(&self.args.name),
        )
    }

    /// `get_project_config.php`.
    pub fn project_config(&self) -> String {
        format!(
            "<project_config>\n    <name>{name}</name>\n    <master_url>{url}</master_url>\n    \
             <web_rpc_url_base>{url}</web_rpc_url_base>\n    <local_revision>1</local_revision>\n    \
             <min_passwd_length>6</min_passwd_length>\n    <platforms>\n        <platform>\n            \
             <platform_name>x86_64-pc-linux-gnu</platform_name>\n            \
             <user_friendly_name>Linux running on an AMD x86_64 or Intel EM64T CPU</user_friendly_name>\n        \
             </platform>\n    </platforms>\n</project_config>\n",
            name = ferrite_proto::xml::escape(&self.args.name),
            url = self.base_url
        )
    }

    fn web_error(num: i32, msg: &str) -> String {
        format!("<error>\n    <error_num>{num}</error_num>\n    <error_msg>{msg}</error_msg>\n</error>\n")
    }

    fn account_out(&self) -> String {
        format!(
            "<account_out>\n    <authenticator>{}</authenticator>\n</account_out>\n",
            ferrite_proto::xml::escape(&self.args.account_key)
        )
    }

    /// `lookup_account.php` with its query parameters.
    pub fn lookup_account(&self, q: &HashMap<String, String>) -> String {
        let Some(email) = q.get("email_addr").map(|e| e.trim().to_lowercase()) else {
            return Self::web_error(-205, "Bad email address");
        };
        let state = lock(&self.state);
        let Some(acct) = state.accounts.get(&email) else {
            return Self::web_error(-136, "No account found");
        };
        match q.get("passwd_hash") {
            None => "<account_out>\n    <success/>\n</account_out>\n".to_owned(),
            Some(h) => {
                let h = h.to_lowercase();
                let by_key = md5_hex(format!("{}{email}", self.args.account_key).as_bytes());
                if h == acct.passwd_hash || h == by_key {
                    self.account_out()
                } else {
                    Self::web_error(-206, "Invalid password")
                }
            }
        }
    }

    /// `create_account.php` with its query parameters.
    pub fn create_account(&self, q: &HashMap<String, String>) -> String {
        let email = q
            .get("email_addr")
            .map(|e| e.trim().to_lowercase())
            .unwrap_or_default();
        if !email.contains('@') || email.len() > 200 {
            return Self::web_error(-205, "Bad email address");
        }
        let hash = q
            .get("passwd_hash")
            .map(|h| h.to_lowercase())
            .unwrap_or_default();
        if hash.len() != 32 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Self::web_error(-206, "Bad password hash");
        }
        let mut state = lock(&self.state);
        if let Some(a) = state.accounts.get(&email) {
            if a.passwd_hash != hash {
                return Self::web_error(-137, "That email address is already in use");
            }
        } else {
            let user_name = q.get("user_name").cloned().unwrap_or_default();
            state.accounts.insert(
                email,
                crate::state::Account {
                    passwd_hash: hash,
                    user_name,
                },
            );
            self.save(&state);
        }
        self.account_out()
    }

    /// `/status` as JSON.
    pub fn status_json(&self) -> String {
        let state = lock(&self.state);
        let c = &state.counters;
        let results: Vec<serde_json::Value> = state
            .jobs
            .iter()
            .map(|j| {
                serde_json::json!({
                    "name": j.result_name,
                    "status": format!("{:?}", j.status),
                    "hostid": j.hostid,
                    "exit_status": j.exit_status,
                    "reports": j.reports,
                    "resends": j.resends,
                    "reported_time": j.reported_time,
                    "uploaded_files": j.uploaded_files,
                    "stderr_out": j.stderr_out,
                })
            })
            .collect();
        let faults: serde_json::Map<String, serde_json::Value> = lock(&self.faults)
            .pending()
            .into_iter()
            .map(|(n, c)| (n, serde_json::Value::from(c)))
            .collect();
        serde_json::json!({
            "jobs_made": c.jobs_made,
            "results_sent": c.results_sent,
            "uploads_received": c.uploads_received,
            "results_reported": c.results_reported,
            "duplicate_reports": c.duplicate_reports,
            "unknown_reports": c.unknown_reports,
            "lost_results": c.lost_results,
            "results_resent": c.results_resent,
            "lost_results_reissued": c.lost_results_reissued,
            "results_in_progress": state
                .jobs
                .iter()
                .filter(|j| j.status == ResultStatus::InProgress)
                .count(),
            "scheduler_rpcs": c.scheduler_rpcs,
            "feed_fetches": c.feed_fetches,
            "project_list_fetches": c.project_list_fetches,
            "hosts": state.hosts.len(),
            "accounts": state.accounts.len(),
            "results": results,
            "faults_armed": faults,
        })
        .to_string()
    }

    /// Records a completely received output file; false if `file` belongs to no result.
    pub fn upload_done(&self, result: &str, file: &str) -> bool {
        let mut state = lock(&self.state);
        let Some(job) = state.job_by_result(result) else {
            return false;
        };
        if job.uploaded_files.iter().any(|f| f == file) {
            return true;
        }
        job.uploaded_files.push(file.to_owned());
        state.counters.uploads_received += 1;
        self.save(&state);
        true
    }

    /// The result an output file name belongs to, if any (`<result>_out`).
    pub fn result_of_output(&self, file: &str) -> Option<String> {
        let result = file.strip_suffix("_out")?;
        let state = lock(&self.state);
        state
            .jobs
            .iter()
            .any(|j| j.result_name == result && j.status != ResultStatus::Unsent)
            .then(|| result.to_owned())
    }

    /// Checks an upload certificate; any passes when the project makes none.
    pub fn check_upload_cert(&self, name: &str, max_nbytes: f64, signature: &str) -> bool {
        !self.args.upload_certs
            || self
                .key
                .public_key()
                .verify(upload_cert_text(name, max_nbytes).as_bytes(), signature)
                .is_ok()
    }

    /// Answers a scheduler request.
    pub fn scheduler(&self, body: &str) -> String {
        let mut reply = SchedulerReply {
            scheduler_version: Some(803),
            master_url: Some(self.base_url.clone()),
            project_name: Some(self.args.name.clone()),
            dont_use_dcf: true,
            ..SchedulerReply::default()
        };
        let req = match SchedulerRequest::parse(body, "scheduler_request") {
            Ok(p) => p.value,
            Err(e) => {
                reply.messages.push(ReplyMessage {
                    priority: "notice".into(),
                    text: format!("Can't parse scheduler request: {e}"),
                });
                reply.request_delay = Some(60.0);
                return reply.to_xml();
            }
        };
        let mut state = lock(&self.state);
        state.counters.scheduler_rpcs += 1;
        if req.authenticator.trim() != self.args.account_key {
            reply.messages.push(ReplyMessage {
                priority: "notice".into(),
                text: "Invalid or missing account key.  To fix, remove and add this project."
                    .into(),
            });
            reply.request_delay = Some(60.0);
            self.save(&state);
            return reply.to_xml();
        }
        let v = req.core_client_version;
        let version = v.major * 10000 + v.minor * 100 + v.release;
        if version < self.args.min_core_client_version {
            // The real scheduler's answer to a client below min_core_client_version.
            reply.messages.push(ReplyMessage {
                priority: "notice".into(),
                text: "Your BOINC client software is too old.  Please install the current \
                       version."
                    .into(),
            });
            reply.request_delay = Some(86400.0);
            self.save(&state);
            return reply.to_xml();
        }
        let t = now();
        reply.request_delay = Some(1.0);
        reply.rss_feeds = Some(self.rss_feeds());
        reply.userid = Some(1);
        reply.user_name = Some("tester".into());
        reply.user_create_time = Some(1.7e9);
        reply.cross_project_id = Some(md5_hex(self.args.account_key.as_bytes()));
        reply.team_name = Some(String::new());

        let hostid = Self::host_record(&mut state, &req, &mut reply, t);

        // Reports. Every one is acknowledged, so that the client drops it; only the first
        // report of a result sent to this host counts.
        for r in &req.results {
            reply.result_acks.push(r.name.clone());
            let Some(i) = state.jobs.iter().position(|j| j.result_name == r.name) else {
                state.counters.unknown_reports += 1;
                continue;
            };
            let job = &mut state.jobs[i];
            match job.status {
                ResultStatus::Reported => {
                    job.reports += 1;
                    state.counters.duplicate_reports += 1;
                }
                ResultStatus::InProgress if job.hostid == hostid => {
                    job.status = ResultStatus::Reported;
                    job.exit_status = Some(r.exit_status);
                    job.client_state = Some(r.state.as_i32());
                    job.stderr_out = Some(r.stderr_out.clone());
                    job.reports = 1;
                    job.reported_time = Some(t);
                    state.counters.results_reported += 1;
                }
                // Never sent, or sent to another host.
                ResultStatus::Unsent | ResultStatus::InProgress => {
                    tracing::info!(result = %r.name, hostid, "report of a result not sent to this host");
                    state.counters.unknown_reports += 1;
                }
            }
        }

        // Sticky files no longer needed.
        let outstanding = state.work_outstanding();
        for f in &req.sticky_files {
            let needed = outstanding && self.sticky_name.as_deref() == Some(f.name.as_str());
            if !needed {
                reply.delete_file_infos.push(f.name.clone());
            }
        }

        // Work: first the tasks this host lost (only a request listing the tasks it has can
        // tell), then, if none, new work.
        if !req.dont_send_work {
            let has_list = body.contains("<other_results");
            let resent = has_list && self.resend_lost(&req, &mut state, &mut reply, hostid, t) > 0;
            if !resent {
                self.send_work(&req, &mut state, &mut reply, hostid, t);
            }
        }
        if let Some(text) = &self.args.notice {
            reply.messages.push(ReplyMessage {
                priority: "notice".into(),
                text: text.clone(),
            });
        }
        if req.code_sign_key.is_none() {
            reply.code_sign_key = Some(self.public_text.clone());
        }
        // Credit: 10 per job reported as a success, for the account and this host alike.
        let credit = 10.0
            * state
                .jobs
                .iter()
                .filter(|j| j.status == ResultStatus::Reported && j.exit_status == Some(0))
                .count() as f64;
        reply.user_total_credit = Some(credit);
        reply.user_expavg_credit = Some(credit);
        reply.host_total_credit = Some(credit);
        reply.host_expavg_credit = Some(credit);
        self.save(&state);
        drop(state);
        // A real BOINC server writes each workunit's command line twice: an empty element
        // from the workunit's XML, then the job's (clients keep the last).
        reply.to_xml().replace(
            "<workunit>\n",
            "<workunit>\n<command_line>\n\n</command_line>\n",
        )
    }

    /// The host record the request comes from, made if needed; the reply tells the client a
    /// new (or found again) host id.
    ///
    /// A known id is kept while the client's `rpc_seqno` does not go back (a lower one means
    /// a copied client). A request without a usable id gets the most recent host with its
    /// `host_cpid` again, as BOINC's scheduler does: a client that lost the reply giving it
    /// its id (killed before saving it) stays the same host and gets back the tasks that reply
    /// carried.
    fn host_record(
        state: &mut State,
        req: &SchedulerRequest,
        reply: &mut SchedulerReply,
        t: f64,
    ) -> i32 {
        let cpid = req.host_info.host_cpid.trim();
        if let Some(h) = state
            .hosts
            .iter_mut()
            .find(|h| h.id == req.hostid && req.hostid > 0)
        {
            if req.rpc_seqno >= h.rpc_seqno {
                h.rpc_seqno = req.rpc_seqno;
                if h.host_cpid.is_empty() {
                    h.host_cpid = cpid.to_owned();
                }
                return h.id;
            }
        }
        let same_cpid = state
            .hosts
            .iter_mut()
            .filter(|h| !cpid.is_empty() && h.host_cpid == cpid)
            .max_by_key(|h| h.id);
        let id = match same_cpid {
            Some(h) => {
                tracing::info!(hostid = h.id, "request without a usable host id: same CPID");
                h.rpc_seqno = 0;
                h.id
            }
            None => {
                let id = state.hosts.iter().map(|h| h.id).max().unwrap_or(0) + 1;
                state.hosts.push(Host {
                    id,
                    rpc_seqno: 0,
                    create_time: t,
                    host_cpid: cpid.to_owned(),
                });
                id
            }
        };
        let create_time = state
            .hosts
            .iter()
            .find(|h| h.id == id)
            .map_or(t, |h| h.create_time);
        reply.hostid = Some(id);
        reply.host_create_time = Some(create_time);
        id
    }

    /// The request's platform (the usual Linux one when it names none).
    fn platform(req: &SchedulerRequest) -> String {
        if req.platform_name.is_empty() {
            "x86_64-pc-linux-gnu".to_owned()
        } else {
            req.platform_name.clone()
        }
    }

    /// The speed `v` runs at on the requesting host, FLOPS.
    fn flops(req: &SchedulerRequest, v: Runs<'_>) -> f64 {
        let p_fpops = if req.host_info.p_fpops > 0.0 {
            req.host_info.p_fpops
        } else {
            1e9
        };
        let c = req.coprocs.as_ref();
        let gpu = match v.gpu_type() {
            None => return p_fpops * v.ncpus(),
            Some("NVIDIA") => c.and_then(|c| c.nvidia.as_ref()).map(|n| n.peak_flops),
            Some(rsc) => c
                .and_then(|c| c.other.iter().find(|o| o.rsc_type == rsc))
                .map(|o| o.peak_flops),
        };
        gpu.filter(|f| *f > 0.0).unwrap_or(1e11)
    }

    /// The version a job of `app` is sent with for resource `rsc` (`None` = CPU): for an
    /// anonymous-platform request one of the versions it lists, else one of the project's.
    fn pick<'a>(
        &'a self,
        req: &'a SchedulerRequest,
        app: &str,
        rsc: Option<&str>,
    ) -> Option<Runs<'a>> {
        if req.platform_name == "anonymous" {
            req.app_versions
                .iter()
                .map(Runs::Client)
                .find(|v| v.app_name() == app && v.gpu_type() == rsc)
        } else {
            self.versions
                .iter()
                .map(Runs::Served)
                .find(|v| v.app_name() == app && v.gpu_type() == rsc)
        }
    }

    /// Sends again every in-progress result of host `hostid` that the request neither lists
    /// among the tasks it has (`<other_results>`) nor reports: the client lost it, e.g. it was
    /// killed before saving the reply that brought it. The deadline is extended to at least
    /// half the original span from now (at most the project's delay bound). A lost result that
    /// can no longer make that deadline, or whose app version is gone, goes back to unsent.
    /// Returns the number resent.
    fn resend_lost(
        &self,
        req: &SchedulerRequest,
        state: &mut State,
        reply: &mut SchedulerReply,
        hostid: i32,
        t: f64,
    ) -> usize {
        let listed: HashSet<&str> = req
            .other_results
            .iter()
            .map(|o| o.name.as_str())
            .chain(req.results.iter().map(|r| r.name.as_str()))
            .collect();
        let platform = Self::platform(req);
        let mut bad_signature: Option<bool> = None;
        let mut resent = 0usize;
        for i in 0..state.jobs.len() {
            if resent >= MAX_JOBS_PER_RPC {
                break;
            }
            let job = &state.jobs[i];
            if job.status != ResultStatus::InProgress
                || job.hostid != hostid
                || listed.contains(job.result_name.as_str())
            {
                continue;
            }
            state.counters.lost_results += 1;
            let version = if req.platform_name == "anonymous" {
                req.app_versions
                    .iter()
                    .map(Runs::Client)
                    .find(|v| v.app_name() == job.app_name && v.plan_class() == job.plan_class)
            } else {
                self.versions
                    .iter()
                    .map(Runs::Served)
                    .find(|v| v.app_name() == job.app_name && v.plan_class() == job.plan_class)
            };
            let deadline = job
                .report_deadline
                .max(t + RESEND_DEADLINE_FRACTION * (job.report_deadline - job.sent_time))
                .min(t + self.args.deadline);
            let feasible = version
                .map(|v| (v, Self::flops(req, v)))
                .filter(|(_, flops)| self.args.fpops_est / flops <= deadline - t);
            let name = job.result_name.clone();
            let Some((v, flops)) = feasible else {
                let job = &mut state.jobs[i];
                job.status = ResultStatus::Unsent;
                job.hostid = 0;
                state.counters.lost_results_reissued += 1;
                reply.messages.push(ReplyMessage {
                    priority: "low".into(),
                    text: format!("Didn't resend lost task {name} (expired)"),
                });
                continue;
            };
            let sign_bad =
                *bad_signature.get_or_insert_with(|| self.take_fault(Fault::BadSignature));
            let job = &mut state.jobs[i];
            job.sent_time = t;
            job.report_deadline = deadline;
            job.resends += 1;
            let job = job.clone();
            self.add_job(reply, &job, v, flops, &platform, sign_bad);
            state.counters.results_resent += 1;
            resent += 1;
            tracing::info!(result = %name, hostid, "resending lost task");
            reply.messages.push(ReplyMessage {
                priority: "low".into(),
                text: format!("Resent lost task {name}"),
            });
        }
        resent
    }

    /// Per-resource requests: (resource type, seconds, instances); `None` type = CPU.
    fn requests(req: &SchedulerRequest) -> Vec<(Option<String>, RscRequest)> {
        let mut out = Vec::new();
        let mut cpu = RscRequest {
            req_secs: req.cpu_req_secs,
            req_instances: req.cpu_req_instances,
            estimated_delay: 0.0,
        };
        let has_gpus = req.coprocs.as_ref().is_some_and(|c| !c.is_empty());
        if cpu.req_secs <= 0.0 && req.work_req_seconds > 0.0 && !has_gpus {
            // A client that only sends the total.
            cpu.req_secs = req.work_req_seconds;
        }
        out.push((None, cpu));
        if let Some(c) = &req.coprocs {
            if let Some(n) = &c.nvidia {
                out.push((Some("NVIDIA".into()), n.request.unwrap_or_default()));
            }
            for o in &c.other {
                out.push((Some(o.rsc_type.clone()), o.request.unwrap_or_default()));
            }
        }
        out
    }

    fn send_work(
        &self,
        req: &SchedulerRequest,
        state: &mut State,
        reply: &mut SchedulerReply,
        hostid: i32,
        t: f64,
    ) {
        let platform = Self::platform(req);
        let mut bad_signature: Option<bool> = None;
        let mut sent = 0usize;
        for (rsc, want) in Self::requests(req) {
            if want.req_secs <= 0.0 {
                continue;
            }
            let (mut secs, mut inst) = (0.0, 0.0);
            while (secs < want.req_secs || inst < want.req_instances) && sent < MAX_JOBS_PER_RPC {
                let pick = state.jobs.iter().position(|j| {
                    j.status == ResultStatus::Unsent
                        && self.pick(req, &j.app_name, rsc.as_deref()).is_some()
                });
                let Some(i) = pick else { break };
                let app_name = state.jobs[i].app_name.clone();
                let Some(v) = self.pick(req, &app_name, rsc.as_deref()) else {
                    break;
                };
                let flops = Self::flops(req, v);
                let sign_bad =
                    *bad_signature.get_or_insert_with(|| self.take_fault(Fault::BadSignature));
                let job = &mut state.jobs[i];
                job.status = ResultStatus::InProgress;
                job.hostid = hostid;
                job.plan_class = v.plan_class().to_owned();
                job.sent_time = t;
                job.report_deadline = t + self.args.deadline;
                let job = job.clone();
                self.add_job(reply, &job, v, flops, &platform, sign_bad);
                state.counters.results_sent += 1;
                sent += 1;
                secs += self.args.fpops_est / flops;
                inst += v.ncpus().max(1.0);
                if rsc.is_some() {
                    inst += 1.0;
                }
            }
        }
        if sent == 0 && (req.cpu_req_secs > 0.0 || req.work_req_seconds > 0.0) {
            reply.messages.push(ReplyMessage {
                priority: "low".into(),
                text: "No tasks are available".into(),
            });
        }
    }

    /// The upload certificate of output file `name` (made once).
    fn upload_cert(&self, name: &str) -> Option<String> {
        if let Some(c) = lock(&self.certs).get(name) {
            return Some(c.clone());
        }
        let cert = self
            .key
            .sign(upload_cert_text(name, MAX_OUTPUT_BYTES).as_bytes())
            .ok()?;
        lock(&self.certs).insert(name.to_owned(), cert.clone());
        Some(cert)
    }

    fn add_job(
        &self,
        reply: &mut SchedulerReply,
        job: &Job,
        runs: Runs<'_>,
        flops: f64,
        platform: &str,
        bad_signature: bool,
    ) {
        match runs {
            Runs::Served(v) => self.add_version(reply, v, flops, platform, bad_signature),
            Runs::Client(_) => {}
        }
        // An anonymous-platform client runs the job with its own version, on that version's
        // platform.
        let platform = match runs {
            Runs::Client(v) if !v.platform.is_empty() => v.platform.as_str(),
            _ => platform,
        };
        self.add_work(reply, job, runs, platform);
    }

    /// The app, executable and app version of `v`, once per reply.
    fn add_version(
        &self,
        reply: &mut SchedulerReply,
        v: &ServedVersion,
        flops: f64,
        platform: &str,
        bad_signature: bool,
    ) {
        let base = &self.base_url;
        if !reply.apps.iter().any(|a| a.name == v.spec.name) {
            reply.apps.push(App {
                name: v.spec.name.clone(),
                user_friendly_name: v.spec.name.clone(),
                ..App::default()
            });
        }
        if !reply.file_infos.iter().any(|f| f.name == v.file_name) {
            let mut signature = v.signature.clone();
            if bad_signature {
                // Flip the first hex digit.
                let flipped = if signature.starts_with('0') { "1" } else { "0" };
                signature.replace_range(0..1, flipped);
            }
            reply.file_infos.push(FileInfo {
                name: v.file_name.clone(),
                download_urls: vec![format!("{base}download/{}", v.file_name)],
                executable: true,
                nbytes: v.nbytes,
                md5_cksum: v.md5.clone(),
                file_signature: Some(signature),
                ..FileInfo::default()
            });
        }
        let coprocs = match v.spec.gpu_type() {
            Some(t) => vec![CoprocUsage {
                rsc_type: t.to_owned(),
                count: 1.0,
            }],
            None => Vec::new(),
        };
        if !reply
            .app_versions
            .iter()
            .any(|a| a.is(&v.spec.name, platform, VERSION_NUM, &v.spec.plan_class))
        {
            reply.app_versions.push(AppVersion {
                app_name: v.spec.name.clone(),
                version_num: VERSION_NUM,
                platform: platform.to_owned(),
                plan_class: v.spec.plan_class.clone(),
                file_refs: vec![FileRef {
                    file_name: v.file_name.clone(),
                    main_program: true,
                    ..FileRef::default()
                }],
                usage: ResourceUsage {
                    avg_ncpus: v.spec.ncpus,
                    flops,
                    coprocs,
                    gpu_ram: 0.0,
                },
                ..AppVersion::default()
            });
        }
    }

    /// The workunit, input and result of `job`, to run with `runs` on `platform`.
    fn add_work(&self, reply: &mut SchedulerReply, job: &Job, runs: Runs<'_>, platform: &str) {
        let base = &self.base_url;
        // Input.
        let (mut in_name, sticky) = match &self.sticky_name {
            Some(n) => (n.clone(), true),
            None => (format!("{}_in", job.wu_name), false),
        };
        let mut md5 = self.input.md5.clone();
        if self.take_fault(Fault::WrongMd5) {
            md5 = md5_hex(md5.as_bytes());
        }
        let mut url = format!("{base}download/{in_name}");
        if self.take_fault(Fault::HostileName) {
            in_name = "../../hostile_in".into();
            url = format!("{base}download/{}_in", job.wu_name);
        }
        if !reply.file_infos.iter().any(|f| f.name == in_name) {
            reply.file_infos.push(FileInfo {
                name: in_name.clone(),
                download_urls: vec![url],
                nbytes: self.input.nbytes,
                md5_cksum: md5,
                sticky,
                ..FileInfo::default()
            });
        }
        let mut inputs = vec![FileRef {
            file_name: in_name,
            open_name: "in".into(),
            // Copied, so that apps not using the BOINC API read the data itself.
            copy_file: true,
            ..FileRef::default()
        }];
        if self.take_fault(Fault::HugeFile) {
            let name = format!("huge_{}", job.wu_name);
            lock(&self.extra_downloads).insert(name.clone(), Source::Zeros(HUGE_FILE_BYTES));
            reply.file_infos.push(FileInfo {
                name: name.clone(),
                download_urls: vec![format!("{base}download/{name}")],
                nbytes: HUGE_FILE_BYTES as f64,
                ..FileInfo::default()
            });
            inputs.push(FileRef {
                file_name: name,
                open_name: "huge".into(),
                ..FileRef::default()
            });
        }
        reply.workunits.push(Workunit {
            name: job.wu_name.clone(),
            app_name: runs.app_name().to_owned(),
            version_num: runs.version_num(),
            rsc_fpops_est: self.args.fpops_est,
            rsc_fpops_bound: self.args.fpops_est * 1000.0,
            rsc_memory_bound: 5e8,
            rsc_disk_bound: 1e10,
            input_files: inputs,
            command_line: self.args.command_line.clone(),
            ..Workunit::default()
        });

        // Output, with its upload certificate when the project makes them.
        let out_name = format!("{}_out", job.result_name);
        let cert = if self.args.upload_certs {
            self.upload_cert(&out_name)
        } else {
            None
        };
        reply.file_infos.push(FileInfo {
            name: out_name.clone(),
            upload_urls: vec![format!("{base}cgi-bin/file_upload_handler")],
            max_nbytes: MAX_OUTPUT_BYTES,
            xml_signature: cert,
            extra: vec![
                "<generated_locally/>".into(),
                "<upload_when_present/>".into(),
            ],
            ..FileInfo::default()
        });
        reply.results.push(TaskResult {
            name: job.result_name.clone(),
            wu_name: job.wu_name.clone(),
            report_deadline: job.report_deadline,
            output_files: vec![FileRef {
                file_name: out_name,
                open_name: "out".into(),
                // Copied back from the slot: an app not using the BOINC API just writes `out`.
                copy_file: true,
                ..FileRef::default()
            }],
            platform: platform.to_owned(),
            version_num: runs.version_num(),
            plan_class: runs.plan_class().to_owned(),
            report_immediately: true,
            ..TaskResult::default()
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use clap::Parser as _;
    use ferrite_proto::sched_request::OtherResult;

    const KEY: &str = "0123456789abcdef0123456789abcdef";

    /// A project with `jobs` jobs of one app, in a temporary directory.
    fn project(dir: &Path, extra: &[&str]) -> Project {
        let app = dir.join("app.sh");
        std::fs::write(&app, "#!/bin/sh\nexit 0\n").unwrap();
        let app_arg = format!("alpha={}", app.display());
        let mut argv = vec!["ferrite-testproject", "--app", &app_arg];
        argv.extend(extra);
        let args = Args::parse_from(argv);
        Project::new(args, dir.join("data"), "http://127.0.0.1:1/".into()).unwrap()
    }

    /// A request from host `hostid` (CPID `cpid`) asking for plenty of CPU work, listing
    /// `has` as the tasks it holds and reporting `reports`.
    fn request(hostid: i32, seqno: i32, cpid: &str, has: &[&str], reports: &[&str]) -> String {
        let mut req = SchedulerRequest {
            authenticator: KEY.into(),
            hostid,
            rpc_seqno: seqno,
            cpu_req_secs: 1e6,
            cpu_req_instances: 4.0,
            core_client_version: ferrite_proto::version::PROTOCOL_VERSION,
            ..SchedulerRequest::default()
        };
        req.host_info.host_cpid = cpid.into();
        req.host_info.p_fpops = 1e9;
        req.other_results = has
            .iter()
            .map(|n| OtherResult {
                name: (*n).into(),
                ..OtherResult::default()
            })
            .collect();
        req.results = reports
            .iter()
            .map(|n| TaskResult {
                name: (*n).into(),
                wu_name: n.trim_end_matches("_0").into(),
                ..TaskResult::default()
            })
            .collect();
        req.to_xml()
    }

    fn reply(p: &Project, body: &str) -> SchedulerReply {
        SchedulerReply::parse(&p.scheduler(body), "reply")
            .unwrap()
            .value
    }

    fn names(r: &SchedulerReply) -> Vec<&str> {
        r.results.iter().map(|r| r.name.as_str()).collect()
    }

    fn counters(p: &Project) -> crate::state::Counters {
        lock(&p.state).counters.clone()
    }

    #[test]
    fn an_anonymous_platform_client_gets_work_for_its_own_versions_and_no_apps() {
        let tmp = tempfile::tempdir().unwrap();
        let p = project(tmp.path(), &["--jobs", "2"]);
        let mut req = SchedulerRequest::parse(&request(0, 0, "cpid-a", &[], &[]), "r")
            .unwrap()
            .value;
        req.platform_name = "anonymous".into();
        req.app_versions.push(AppVersion {
            app_name: "alpha".into(),
            version_num: 777,
            platform: "x86_64-pc-linux-gnu".into(),
            plan_class: "mine".into(),
            ..AppVersion::default()
        });
        let r = reply(&p, &req.to_xml());
        assert_eq!(r.results.len(), 2);
        assert!(r.apps.is_empty() && r.app_versions.is_empty(), "{r:?}");
        assert!(
            r.file_infos
                .iter()
                .all(|f| !f.executable && f.file_signature.is_none()),
            "no app file: {:?}",
            r.file_infos
        );
        for res in &r.results {
            assert_eq!(
                (
                    res.version_num,
                    res.plan_class.as_str(),
                    res.platform.as_str()
                ),
                (777, "mine", "x86_64-pc-linux-gnu")
            );
        }
        assert!(r.workunits.iter().all(|w| w.version_num == 777));

        // Versions of other apps, or of other resources, get nothing.
        std::fs::create_dir_all(tmp.path().join("b")).unwrap();
        let p = project(&tmp.path().join("b"), &["--jobs", "2"]);
        req.app_versions[0].app_name = "gamma".into();
        let r = reply(&p, &req.to_xml());
        assert!(r.results.is_empty());
    }

    #[test]
    fn replies_look_like_a_stock_servers() {
        let tmp = tempfile::tempdir().unwrap();
        let p = project(tmp.path(), &["--jobs", "1", "--command-line=-cpu_time 2"]);
        let text = p.scheduler(&request(0, 0, "cpid-a", &[], &[]));
        assert_eq!(text.matches("<command_line>").count(), 2, "{text}");
        let r = SchedulerReply::parse(&text, "reply").unwrap().value;
        assert_eq!(
            r.workunits[0].command_line, "-cpu_time 2",
            "the last one counts"
        );
        let out = r
            .file_infos
            .iter()
            .find(|f| f.name.ends_with("_out"))
            .unwrap();
        assert_eq!(out.xml_signature, None, "no upload certificates by default");
        assert!(p.check_upload_cert(&out.name, MAX_OUTPUT_BYTES, ""));

        std::fs::create_dir_all(tmp.path().join("signed")).unwrap();
        let signed = project(
            &tmp.path().join("signed"),
            &["--jobs", "1", "--upload-certs"],
        );
        let r = reply(&signed, &request(0, 0, "cpid-a", &[], &[]));
        let out = r
            .file_infos
            .iter()
            .find(|f| f.name.ends_with("_out"))
            .unwrap();
        let cert = out.xml_signature.clone().unwrap();
        assert!(signed.check_upload_cert(&out.name, MAX_OUTPUT_BYTES, &cert));
        assert!(!signed.check_upload_cert(&out.name, MAX_OUTPUT_BYTES, ""));
    }

    #[test]
    fn a_notice_given_goes_in_every_reply_with_the_work() {
        let tmp = tempfile::tempdir().unwrap();
        let p = project(tmp.path(), &["--jobs", "1", "--notice", "Read the forum"]);
        for seqno in 0..2 {
            let r = reply(&p, &request(0, seqno, "cpid-a", &[], &[]));
            let notices: Vec<_> = r
                .messages
                .iter()
                .filter(|m| m.priority == "notice")
                .map(|m| m.text.as_str())
                .collect();
            assert_eq!(notices, ["Read the forum"], "{:?}", r.messages);
            if seqno == 0 {
                assert_eq!(r.results.len(), 1, "the notice comes with the work");
            }
        }
        let tmp2 = tempfile::tempdir().unwrap();
        let plain = project(tmp2.path(), &["--jobs", "1"]);
        let r = reply(&plain, &request(0, 0, "cpid-a", &[], &[]));
        assert!(
            r.messages.iter().all(|m| m.priority != "notice"),
            "{:?}",
            r.messages
        );
    }

    #[test]
    fn a_client_below_the_minimum_version_is_told_to_upgrade_and_gets_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let p = project(tmp.path(), &["--jobs", "2"]);
        let mut req = SchedulerRequest::parse(&request(0, 0, "cpid-a", &[], &[]), "q")
            .unwrap()
            .value;
        req.core_client_version = ferrite_proto::client_state::ClientVersion::default();
        let r = reply(&p, &req.to_xml());
        assert!(r.results.is_empty());
        assert_eq!(r.request_delay, Some(86400.0));
        assert!(r.messages[0].text.contains("too old"), "{:?}", r.messages);
        // 7.20.5 is served.
        req.core_client_version.major = 7;
        req.core_client_version.minor = 20;
        req.core_client_version.release = 5;
        assert_eq!(reply(&p, &req.to_xml()).results.len(), 2);
    }

    #[test]
    fn in_progress_results_missing_from_the_request_are_sent_again_to_their_host_only() {
        let tmp = tempfile::tempdir().unwrap();
        let p = project(tmp.path(), &["--jobs", "3", "--deadline", "1000"]);
        let first = reply(&p, &request(0, 0, "cpid-a", &[], &[]));
        assert_eq!(first.hostid, Some(1));
        assert_eq!(
            names(&first),
            ["alpha_wu_0_0", "alpha_wu_1_0", "alpha_wu_2_0"]
        );
        let sent = first.results[1].report_deadline;

        // Another host lists nothing: host 1's tasks are not its to get.
        let other = reply(&p, &request(0, 0, "cpid-b", &[], &[]));
        assert_eq!(other.hostid, Some(2));
        assert!(other.results.is_empty(), "{:?}", names(&other));

        // Host 1 lists one task and reports another: the third is lost and comes again,
        // with its workunit, app version and files, and no new work beside it.
        let again = reply(
            &p,
            &request(1, 1, "cpid-a", &["alpha_wu_0_0"], &["alpha_wu_1_0"]),
        );
        assert_eq!(names(&again), ["alpha_wu_2_0"]);
        assert_eq!(again.hostid, None, "the host keeps its id");
        assert_eq!(again.workunits.len(), 1);
        assert_eq!(again.workunits[0].name, "alpha_wu_2");
        assert_eq!(again.app_versions.len(), 1);
        let files: Vec<&str> = again.file_infos.iter().map(|f| f.name.as_str()).collect();
        assert!(files.contains(&"alpha_wu_2_in"), "{files:?}");
        assert!(files.contains(&"alpha_wu_2_0_out"), "{files:?}");
        assert!(
            again
                .file_infos
                .iter()
                .any(|f| f.executable && f.file_signature.is_some()),
            "{files:?}"
        );
        assert!(again.results[0].report_deadline >= sent);
        assert!(
            again
                .messages
                .iter()
                .any(|m| m.text == "Resent lost task alpha_wu_2_0"),
            "{:?}",
            again.messages
        );
        let c = counters(&p);
        assert_eq!(
            (
                c.results_sent,
                c.lost_results,
                c.results_resent,
                c.results_reported
            ),
            (3, 1, 1, 1)
        );

        // Listing everything it has: nothing is resent.
        let calm = reply(
            &p,
            &request(1, 2, "cpid-a", &["alpha_wu_0_0", "alpha_wu_2_0"], &[]),
        );
        assert!(calm.results.is_empty(), "{:?}", names(&calm));
        assert_eq!(counters(&p).results_resent, 1);

        // A request without the list (an old client) cannot tell: nothing is resent.
        let xml = request(1, 3, "cpid-a", &[], &[]);
        let start = xml.find("<other_results").unwrap();
        let end = xml.find("</other_results>").unwrap() + "</other_results>".len();
        let without = format!("{}{}", &xml[..start], &xml[end..]);
        assert!(reply(&p, &without).results.is_empty());
        let job = lock(&p.state).jobs[2].clone();
        assert_eq!((job.status, job.resends), (ResultStatus::InProgress, 1));
    }

    #[test]
    fn a_client_that_lost_the_reply_giving_its_host_id_is_the_same_host_and_gets_its_tasks() {
        let tmp = tempfile::tempdir().unwrap();
        let p = project(tmp.path(), &["--jobs", "2"]);
        let first = reply(&p, &request(0, 0, "cpid-a", &[], &[]));
        assert_eq!((first.hostid, first.results.len()), (Some(1), 2));
        // Killed before saving that reply: no host id, no tasks.
        let again = reply(&p, &request(0, 0, "cpid-a", &[], &[]));
        assert_eq!(again.hostid, Some(1));
        assert_eq!(names(&again), ["alpha_wu_0_0", "alpha_wu_1_0"]);
        assert_eq!(lock(&p.state).hosts.len(), 1);
        let c = counters(&p);
        assert_eq!((c.results_sent, c.results_resent), (2, 2));
    }

    #[test]
    fn a_lost_result_that_cannot_make_a_new_deadline_goes_back_to_unsent() {
        let tmp = tempfile::tempdir().unwrap();
        // 1e13 FLOPs at 1e9 FLOPS: 10 000 s, more than the 100 s deadline.
        let p = project(
            tmp.path(),
            &["--jobs", "1", "--deadline", "100", "--fpops-est", "1e13"],
        );
        assert_eq!(reply(&p, &request(0, 0, "c", &[], &[])).results.len(), 1);
        let lost = reply(&p, &request(1, 1, "c", &[], &[]));
        assert!(
            lost.messages
                .iter()
                .any(|m| m.text == "Didn't resend lost task alpha_wu_0_0 (expired)"),
            "{:?}",
            lost.messages
        );
        // Back to unsent, so that it goes out again as new work (here at once).
        assert_eq!(names(&lost), ["alpha_wu_0_0"]);
        let c = counters(&p);
        assert_eq!(
            (
                c.lost_results,
                c.lost_results_reissued,
                c.results_resent,
                c.results_sent
            ),
            (1, 1, 0, 2)
        );
    }

    #[test]
    fn reports_of_unknown_or_already_reported_results_are_acknowledged_and_counted_once() {
        let tmp = tempfile::tempdir().unwrap();
        let p = project(tmp.path(), &["--jobs", "3"]);
        assert_eq!(reply(&p, &request(0, 0, "a", &[], &[])).results.len(), 3);
        let first = reply(
            &p,
            &request(
                1,
                1,
                "a",
                &["alpha_wu_1_0", "alpha_wu_2_0"],
                &["alpha_wu_0_0"],
            ),
        );
        assert_eq!(first.result_acks, ["alpha_wu_0_0"]);
        // The reply was lost: the same report again, with a name the project never made.
        let second = reply(
            &p,
            &request(
                1,
                2,
                "a",
                &["alpha_wu_1_0", "alpha_wu_2_0"],
                &["alpha_wu_0_0", "nosuch_wu_0"],
            ),
        );
        assert_eq!(second.result_acks, ["alpha_wu_0_0", "nosuch_wu_0"]);
        // Another host reports a task host 1 has.
        let third = reply(&p, &request(0, 0, "b", &[], &["alpha_wu_1_0"]));
        assert_eq!(third.result_acks, ["alpha_wu_1_0"]);

        let c = counters(&p);
        assert_eq!(
            (c.results_reported, c.duplicate_reports, c.unknown_reports),
            (1, 1, 2)
        );
        let state = lock(&p.state);
        assert_eq!(state.jobs[0].reports, 2);
        assert_eq!(state.jobs[1].status, ResultStatus::InProgress);
        assert_eq!(state.jobs[1].hostid, 1);
        drop(state);
        let status: serde_json::Value = serde_json::from_str(&p.status_json()).unwrap();
        assert_eq!(status["duplicate_reports"], 1);
        assert_eq!(status["unknown_reports"], 2);
        assert_eq!(status["results_in_progress"], 2);
    }
}
