//! Applying a `<scheduler_reply>` to the client state, in the order BOINC does
//! (`client/cs_scheduler.cpp: handle_scheduler_reply`; reference §6).
//!
//! [`apply_reply`] changes only the [`ClientState`] it is given and returns an
//! [`ApplyOutcome`]: the messages to show, the texts to write (global prefs, account-file
//! parts), and typed [`Event`]s and [`Refusal`]s for the daemon (downloads to start, tasks
//! added per resource for work-fetch backoff, acks, aborts of running tasks, file errors,
//! refused objects with their reason). It does no I/O, and nothing in a reply can make it
//! panic or break the state's invariants: names are unique per kind within a project, and
//! every result's workunit, every workunit's app and input files, and every app version's
//! files exist.
//!
//! Server-sent names go through [`crate::names`]; an object with a bad name, or one that
//! refers to something refused or unknown, is not stored and is listed in
//! [`ApplyOutcome::refusals`] (a refused file makes its workunit, hence its results, refused
//! too).

use std::collections::{BTreeMap, HashMap, HashSet};

use ferrite_proto::client_state::{
    App, AppVersion, ClientState, FileInfo, FileRef, Project, ProjectState, ResultState,
    TaskResult, UserCpid, Workunit,
};
use ferrite_proto::sched_reply::{ReplyMessage, SchedulerReply};

use crate::names::{check_file_name, check_object_name, check_open_name, NameError};
use crate::verify::SignatureVerifier;

/// BOINC's `ERR_NO_SIGNATURE`: a file that must be signed has no signature.
pub const ERR_NO_SIGNATURE: i32 = -123;
/// BOINC's `ERR_RSA_FAILED`: a file's signature does not verify.
pub const ERR_RSA_FAILED: i32 = -120;
/// Exit status of a task aborted by the project (`EXIT_ABORTED_BY_PROJECT`).
pub const EXIT_ABORTED_BY_PROJECT: i32 = 202;
/// Exit status of a task needing a GPU the host lacks (`EXIT_MISSING_COPROC`).
pub const EXIT_MISSING_COPROC: i32 = 201;

/// Settings that shape how a reply is applied.
#[derive(Debug, Clone, Default)]
pub struct ApplyOptions {
    /// cc_config `unsigned_apps_ok`: app-version files need no signature.
    pub unsigned_apps_ok: bool,
    /// GPU resource types the host has (`NVIDIA`, `ATI`, `intel_gpu`, …).
    pub gpu_types: Vec<String>,
    /// `mod_time` of the global preferences in force (0 when none).
    pub current_prefs_mod_time: f64,
    /// The global preferences come from an account manager: projects' prefs are ignored.
    pub prefs_from_account_manager: bool,
}

/// Global preferences the reply brought that should replace the current ones.
#[derive(Debug, Clone, PartialEq)]
pub struct NewGlobalPrefs {
    /// The body between `<global_preferences>` tags, verbatim.
    pub body: String,
    /// Its `mod_time`.
    pub mod_time: f64,
    /// The project it came from (`<source_project>` to insert).
    pub source_project: String,
}

/// How the server's `<master_url>` differs from ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MasterUrlChange {
    /// Same URL with `https`: adopt it (rewrite the account file).
    HttpsUpgrade(String),
    /// Another URL: BOINC moves the project's files to it and resets the project.
    Moved(String),
}

/// Something the daemon must act on or log.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The server names another master URL; nothing was changed here.
    MasterUrlChanged(MasterUrlChange),
    /// Another attached project has the same name.
    DuplicateProjectName(String),
    /// The host's venue changed (re-read prefs if this project is their source).
    VenueChanged(String),
    /// First code-signing key stored (trust on first use).
    CodeSignKeyAccepted,
    /// Key rollover signed by the old key: new key stored.
    CodeSignKeyChanged,
    /// The server created a host record: id adopted, `rpc_seqno` reset to 0.
    HostIdAssigned {
        /// Our previous id (0 = none).
        old: i32,
        /// The new id.
        new: i32,
        /// We had an id already: BOINC generates a new host CPID.
        new_host_cpid: bool,
    },
    /// A file to download (new, or re-sent after an error).
    Download {
        /// File name.
        file: String,
        /// Its signature must be checked after download ([`crate::files::verify_download`]
        /// does it with the file's MD5).
        signature_pending: bool,
    },
    /// A file was given an error status (it will not be downloaded or run; tasks using
    /// it fail).
    FileError {
        /// File name.
        file: String,
        /// BOINC error code now in its status.
        status: i32,
        /// Why.
        message: String,
    },
    /// A new task.
    TaskAdded {
        /// Result name.
        name: String,
        /// Resource it uses (`CPU` or a GPU type).
        resource: String,
    },
    /// A new task needs a GPU the host lacks: stored aborted with exit 201.
    TaskMissingCoproc {
        /// Result name.
        name: String,
        /// The missing resource.
        resource: String,
    },
    /// The server has this report: the result is acknowledged (removable).
    Acked(String),
    /// A task that had not started was aborted (state ABORTED, exit 202, to report).
    Aborted(String),
    /// A running task must be aborted by the daemon (kill it, then state ABORTED, exit 202).
    AbortRunning(String),
    /// A file's sticky flag was cleared (delete it when unreferenced).
    StickyCleared(String),
    /// Trickle-ups acknowledged: delete the `trickle_up*.sent` files.
    TrickleUpsAcked,
    /// The project-wide file list was replaced (re-link them).
    ProjectFilesChanged,
    /// A trickle-down message for a task that has not ended: write `body` as `file` in the
    /// task's slot and tell its app (`<have_trickle_down/>`); the official client drops it
    /// when the task has no slot (it never started, or has ended).
    TrickleDown {
        /// Result name.
        result: String,
        /// The file's name in the slot (`trickle_down_<time>`).
        file: String,
        /// What goes in the file.
        body: String,
    },
    /// A trickle-down message for a result this client does not have, or whose task has
    /// ended: dropped, as the official client does (`handle_trickle_down failed`).
    TrickleDownDropped(String),
}

/// What kind of object a refusal is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// `<app>`.
    App,
    /// `<file_info>`.
    File,
    /// `<app_version>`.
    AppVersion,
    /// `<workunit>`.
    Workunit,
    /// `<result>`.
    Result,
    /// `<project_files>` entry.
    ProjectFile,
    /// `<code_sign_key>`.
    CodeSignKey,
}

/// Why an object from the reply was not stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefusalReason {
    /// Its own name is unsafe.
    #[error("bad name: {0}")]
    BadName(NameError),
    /// A file or open name it refers to is unsafe.
    #[error("bad file reference {name:?}: {error}")]
    BadReference {
        /// The name as sent.
        name: String,
        /// Why it is unsafe.
        error: NameError,
    },
    /// It refers to an app the project does not have.
    #[error("unknown app {0:?}")]
    UnknownApp(String),
    /// It refers to a file the project does not have (or that was refused).
    #[error("unknown file {0:?}")]
    UnknownFile(String),
    /// It refers to a workunit the project does not have (or that was refused).
    #[error("unknown workunit {0:?}")]
    UnknownWorkunit(String),
    /// No app version matches the result.
    #[error("no app version for it")]
    NoAppVersion,
    /// The app version's platform is not one this host runs.
    #[error("unsupported platform {0:?}")]
    UnsupportedPlatform(String),
    /// App versions from the server are ignored for anonymous-platform projects.
    #[error("project uses the anonymous platform")]
    AnonymousPlatform,
    /// A new code-signing key without a signature by the old key.
    #[error("new code-signing key has no signature")]
    KeyWithoutSignature,
    /// A new code-signing key whose signature does not verify with the old key.
    #[error("new code-signing key does not verify with the old key")]
    KeyBadSignature,
}

/// An object not stored, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Its kind.
    pub kind: ObjectKind,
    /// Its name as sent.
    pub name: String,
    /// Why.
    pub reason: RefusalReason,
}

/// What applying a reply produced for the daemon.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApplyOutcome {
    /// Messages for the event log; `notice` ones are also notices.
    pub messages: Vec<ReplyMessage>,
    /// A message said the request was "too recent" (no work-fetch bookkeeping then).
    pub too_recent: bool,
    /// The project is down: only `request_delay` was applied; back off.
    pub project_down: bool,
    /// Global preferences to write to `global_prefs.xml` (newer than the current ones).
    pub global_prefs: Option<NewGlobalPrefs>,
    /// Project preferences body for the account file.
    pub project_prefs: Option<String>,
    /// `<gui_urls>` element for the account file.
    pub gui_urls: Option<String>,
    /// RSS feeds element, for the notice system.
    pub rss_feeds: Option<String>,
    /// The server's version (`100*major + minor`), when sent.
    pub scheduler_version: Option<i32>,
    /// Events, in the order they happened.
    pub events: Vec<Event>,
    /// Objects refused.
    pub refusals: Vec<Refusal>,
    /// New tasks per resource type (`CPU`, `NVIDIA`, …): receiving any clears that
    /// resource's work-fetch backoff in the scheduling core.
    pub tasks_added: BTreeMap<String, u32>,
}

/// Why a reply could not be applied at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The state has no project with this URL.
    #[error("no project {0} in the client state")]
    UnknownProject(String),
}

/// Applies `reply` from project `master_url` at time `now`.
pub fn apply_reply(
    state: &mut ClientState,
    master_url: &str,
    reply: &SchedulerReply,
    now: f64,
    opts: &ApplyOptions,
    verifier: &dyn SignatureVerifier,
) -> Result<ApplyOutcome, ApplyError> {
    let Some(index) = state
        .projects
        .iter()
        .position(|p| p.project.master_url.eq_ignore_ascii_case(master_url))
    else {
        return Err(ApplyError::UnknownProject(master_url.to_owned()));
    };
    let mut out = ApplyOutcome::default();
    let primary = state.platform_name.clone();
    let mut platforms = vec![primary.clone()];
    platforms.extend(state.alt_platforms.iter().cloned());
    let p_fpops = if state.host_info.p_fpops > 0.0 && state.host_info.p_fpops.is_finite() {
        state.host_info.p_fpops
    } else {
        1e9
    };
    let other_names: Vec<String> = state
        .projects
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != index)
        .map(|(_, p)| p.project.project_name.clone())
        .collect();
    let running: Vec<String> = state
        .active_tasks
        .iter()
        .filter(|a| a.project_master_url.eq_ignore_ascii_case(master_url))
        .map(|a| a.result_name.clone())
        .collect();

    // Step 1.
    {
        let p = &mut state.projects[index].project;
        p.last_rpc_time = now;
        p.ended = reply.ended;
        p.non_cpu_intensive = reply.non_cpu_intensive;
        p.strict_memory_bound = reply.strict_memory_bound;
    }

    // Step 2: master URL.
    if let Some(u) = reply.master_url.as_deref() {
        let theirs = ferrite_proto::account::canonicalize_master_url(u.trim());
        let ours = state.projects[index].project.master_url.clone();
        if !u.trim().is_empty() && !theirs.eq_ignore_ascii_case(&ours) {
            let strip = |s: &str| {
                let l = s.to_ascii_lowercase();
                l.split_once("://").map(|(_, r)| r.to_owned()).unwrap_or(l)
            };
            let same_rest = strip(&theirs) == strip(&ours);
            let to_https = theirs.to_ascii_lowercase().starts_with("https://");
            if same_rest && to_https {
                out.events
                    .push(Event::MasterUrlChanged(MasterUrlChange::HttpsUpgrade(
                        theirs,
                    )));
            } else if !same_rest {
                out.events
                    .push(Event::MasterUrlChanged(MasterUrlChange::Moved(theirs)));
            }
        }
    }

    // Step 3: messages, user CPID table.
    out.messages = reply.messages.clone();
    out.too_recent = reply.messages.iter().any(|m| m.text.contains("too recent"));

    // Step 4: project down.
    if reply.project_is_down {
        let p = &mut state.projects[index].project;
        if let Some(d) = reply.request_delay {
            p.min_rpc_time = p.min_rpc_time.max(now + d);
        }
        p.scheduler_rpc_in_progress = false;
        out.project_down = true;
        return Ok(out);
    }

    project_info(&mut state.projects[index].project, reply, now);
    update_user_cpids(&mut state.user_cpids, &state.projects[index].project);

    // Step 5.
    let name = &state.projects[index].project.project_name;
    if !name.is_empty() && other_names.iter().any(|n| n == name) {
        out.events.push(Event::DuplicateProjectName(name.clone()));
    }

    // Step 6: global prefs.
    if let Some(body) = &reply.global_preferences {
        let mod_time = prefs_mod_time(body);
        if !opts.prefs_from_account_manager && mod_time > opts.current_prefs_mod_time {
            out.global_prefs = Some(NewGlobalPrefs {
                body: body.clone(),
                mod_time,
                source_project: state.projects[index].project.master_url.clone(),
            });
        }
    }

    // Step 7: venue, project prefs, GUI URLs.
    {
        let p = &mut state.projects[index].project;
        if let Some(v) = &reply.host_venue {
            if *v != p.host_venue {
                p.host_venue = v.clone();
                out.events.push(Event::VenueChanged(v.clone()));
            }
        }
    }
    out.project_prefs = reply.project_preferences.clone();
    out.gui_urls = reply.gui_urls.clone();
    out.rss_feeds = reply.rss_feeds.clone();
    out.scheduler_version = reply.scheduler_version;

    // Step 8: code-signing key.
    code_sign_key(
        &mut state.projects[index].project,
        reply,
        verifier,
        &mut out,
    );

    // Step 9: objects.
    let ps = &mut state.projects[index];
    let ctx = Ctx {
        now,
        primary: &primary,
        platforms: &platforms,
        p_fpops,
        opts,
        running: &running,
    };
    merge_apps(ps, reply, &mut out);
    let resent = merge_files(ps, reply, &ctx, &mut out);
    for name in &reply.delete_file_infos {
        if let Some(f) = ps.file_mut(name) {
            f.sticky = false;
            out.events.push(Event::StickyCleared(name.clone()));
        }
    }
    merge_app_versions(ps, reply, &ctx, &mut out);
    check_signatures(ps, &resent, opts, verifier, &mut out);
    merge_workunits(ps, reply, &mut out);
    merge_results(ps, reply, &ctx, &mut out);
    sort_results(&mut ps.results);

    // Step 11: acks, aborts, flags.
    let at = positions(&ps.results, |r| &r.name);
    for name in &reply.result_acks {
        if let Some(r) = at.get(name).and_then(|&i| ps.results.get_mut(i)) {
            r.got_server_ack = true;
            out.events.push(Event::Acked(name.clone()));
        }
    }
    let running: HashSet<&str> = ctx.running.iter().map(String::as_str).collect();
    for (list, only_if_not_started) in [
        (&reply.result_aborts, false),
        (&reply.result_abort_if_not_started, true),
    ] {
        for name in list {
            let Some(r) = at.get(name).and_then(|&i| ps.results.get_mut(i)) else {
                continue;
            };
            let started = running.contains(name.as_str());
            abort(r, started, only_if_not_started, ctx.now, &mut out);
        }
    }
    if reply.message_ack {
        out.events.push(Event::TrickleUpsAcked);
    }
    for t in &reply.trickle_downs {
        let live = at
            .get(&t.result_name)
            .and_then(|&i| ps.results.get(i))
            .is_some_and(|r| r.state <= ResultState::FilesDownloaded);
        out.events.push(if live {
            Event::TrickleDown {
                result: t.result_name.clone(),
                file: crate::trickle::trickle_down_file_name(t),
                body: t.body.clone(),
            }
        } else {
            Event::TrickleDownDropped(t.result_name.clone())
        });
    }
    let p = &mut ps.project;
    if reply.send_full_workload {
        p.send_full_workload = true;
    }
    p.dont_use_dcf = reply.dont_use_dcf;
    if p.dont_use_dcf {
        p.duration_correction_factor = 1.0;
    }
    p.send_time_stats_log = reply.send_time_stats_log;
    p.send_job_log = reply.send_job_log;
    p.trickle_up_pending = false;

    // Step 12: host id.
    if let Some(id) = reply.hostid.filter(|id| *id > 0) {
        let old = p.hostid;
        p.hostid = id;
        p.rpc_seqno = 0;
        out.events.push(Event::HostIdAssigned {
            old,
            new: id,
            new_host_cpid: old != 0,
        });
    }

    // Step 13: project files. As the official client, the reply's list replaces the
    // project's: a reply without one (the server has no `project_files.xml` any more)
    // leaves none.
    let list = reply.project_files.as_deref().unwrap_or_default();
    if !list.is_empty() || !ps.project_files.is_empty() {
        let files = positions(&ps.files, |f| &f.name);
        let mut kept = Vec::new();
        for fr in list {
            match check_ref(fr) {
                Err(reason) => out.refusals.push(Refusal {
                    kind: ObjectKind::ProjectFile,
                    name: fr.file_name.clone(),
                    reason,
                }),
                Ok(()) if !files.contains_key(&fr.file_name) => out.refusals.push(Refusal {
                    kind: ObjectKind::ProjectFile,
                    name: fr.file_name.clone(),
                    reason: RefusalReason::UnknownFile(fr.file_name.clone()),
                }),
                Ok(()) => kept.push(fr.clone()),
            }
        }
        ps.project_files = kept;
        out.events.push(Event::ProjectFilesChanged);
    }
    let p = &mut ps.project;

    // Step 14: next RPC.
    p.next_rpc_time = match reply.next_rpc_delay {
        Some(d) if d > 0.0 => now + d,
        _ => 0.0,
    };

    // Step 16: success resets, then request_delay.
    p.nrpc_failures = 0;
    p.min_rpc_time = 0.0;
    if let Some(d) = reply.request_delay.filter(|d| *d > 0.0) {
        p.min_rpc_time = now + d;
    }

    // Step 17: trickle-up URLs, desired disk, no_rsc_apps.
    if !reply.trickle_up_urls.is_empty() {
        p.trickle_up_urls = reply.trickle_up_urls.clone();
    }
    if let Some(d) = reply.desired_disk_usage {
        p.desired_disk_usage = d;
    }
    if !p.anonymous_platform {
        p.no_rsc_apps = reply.no_rsc_apps.clone();
        let mut all = vec!["CPU".to_owned()];
        all.extend(opts.gpu_types.iter().cloned());
        if all.iter().all(|r| p.no_rsc_apps.contains(r)) {
            p.no_rsc_apps.clear();
        }
    }

    // Step 18.
    p.sched_rpc_pending = None;
    p.scheduler_rpc_in_progress = false;
    Ok(out)
}

struct Ctx<'a> {
    now: f64,
    primary: &'a str,
    platforms: &'a [String],
    p_fpops: f64,
    opts: &'a ApplyOptions,
    running: &'a [String],
}

fn project_info(p: &mut Project, r: &SchedulerReply, now: f64) {
    let set = |dst: &mut String, v: &Option<String>| {
        if let Some(v) = v {
            dst.clone_from(v);
        }
    };
    set(&mut p.project_name, &r.project_name);
    set(&mut p.symstore, &r.symstore);
    set(&mut p.user_name, &r.user_name);
    set(&mut p.team_name, &r.team_name);
    set(&mut p.email_hash, &r.email_hash);
    set(&mut p.cross_project_id, &r.cross_project_id);
    set(&mut p.external_cpid, &r.external_cpid);
    let setf = |dst: &mut f64, v: Option<f64>| {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            *dst = v;
        }
    };
    setf(&mut p.user_total_credit, r.user_total_credit);
    setf(&mut p.user_expavg_credit, r.user_expavg_credit);
    setf(&mut p.user_create_time, r.user_create_time);
    setf(&mut p.host_total_credit, r.host_total_credit);
    setf(&mut p.host_expavg_credit, r.host_expavg_credit);
    setf(&mut p.host_create_time, r.host_create_time);
    if let Some(v) = r.userid {
        p.userid = v;
    }
    if let Some(v) = r.teamid {
        p.teamid = v;
    }
    if r.cross_project_id.is_some() {
        p.cpid_time = now;
    }
}

/// Keeps, per e-mail hash, the CPID of the oldest account.
fn update_user_cpids(table: &mut Vec<UserCpid>, p: &Project) {
    if p.cross_project_id.is_empty() || p.email_hash.is_empty() {
        return;
    }
    match table.iter_mut().find(|u| u.email_hash == p.email_hash) {
        Some(u) => {
            if p.user_create_time < u.time {
                u.cpid.clone_from(&p.cross_project_id);
                u.time = p.user_create_time;
            }
        }
        None => table.push(UserCpid {
            email_hash: p.email_hash.clone(),
            cpid: p.cross_project_id.clone(),
            time: p.user_create_time,
        }),
    }
}

fn prefs_mod_time(body: &str) -> f64 {
    let Some(a) = body.find("<mod_time>") else {
        return 0.0;
    };
    let rest = &body[a + "<mod_time>".len()..];
    let Some(b) = rest.find("</mod_time>") else {
        return 0.0;
    };
    rest[..b]
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .unwrap_or(0.0)
}

fn strip_ws(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

fn code_sign_key(
    p: &mut Project,
    reply: &SchedulerReply,
    verifier: &dyn SignatureVerifier,
    out: &mut ApplyOutcome,
) {
    let Some(new) = reply.code_sign_key.as_deref().map(str::trim) else {
        return;
    };
    if new.is_empty() {
        return;
    }
    let old = p.code_sign_key.as_deref().map(str::trim).unwrap_or("");
    if old.is_empty() {
        p.code_sign_key = Some(new.to_owned());
        out.events.push(Event::CodeSignKeyAccepted);
        return;
    }
    if strip_ws(old) == strip_ws(new) {
        return;
    }
    let refuse = |reason| Refusal {
        kind: ObjectKind::CodeSignKey,
        name: String::new(),
        reason,
    };
    match reply.code_sign_key_signature.as_deref() {
        None => out
            .refusals
            .push(refuse(RefusalReason::KeyWithoutSignature)),
        Some(sig) if verifier.verify_string(old, new, sig) => {
            p.code_sign_key = Some(new.to_owned());
            out.events.push(Event::CodeSignKeyChanged);
        }
        Some(_) => out.refusals.push(refuse(RefusalReason::KeyBadSignature)),
    }
}

fn merge_apps(ps: &mut ProjectState, reply: &SchedulerReply, out: &mut ApplyOutcome) {
    for a in &reply.apps {
        if let Err(e) = check_object_name(&a.name) {
            out.refusals.push(Refusal {
                kind: ObjectKind::App,
                name: a.name.clone(),
                reason: RefusalReason::BadName(e),
            });
            continue;
        }
        let friendly = if a.user_friendly_name.trim().is_empty() {
            a.name.clone()
        } else {
            a.user_friendly_name.clone()
        };
        match ps.apps.iter_mut().find(|x| x.name == a.name) {
            Some(x) => {
                x.user_friendly_name = friendly;
                x.non_cpu_intensive = a.non_cpu_intensive;
                x.sporadic = a.sporadic;
                x.fraction_done_exact = a.fraction_done_exact;
            }
            None => ps.apps.push(App {
                name: a.name.clone(),
                user_friendly_name: friendly,
                non_cpu_intensive: a.non_cpu_intensive,
                sporadic: a.sporadic,
                fraction_done_exact: a.fraction_done_exact,
                extra: Vec::new(),
            }),
        }
    }
}

/// A fresh file record from a reply's description: only what a server may set.
fn new_file(f: &FileInfo, now: f64) -> FileInfo {
    let mut n = FileInfo {
        name: f.name.clone(),
        nbytes: clean(f.nbytes),
        max_nbytes: clean(f.max_nbytes),
        md5_cksum: f.md5_cksum.trim().to_ascii_lowercase(),
        executable: f.executable,
        sticky: f.sticky,
        sticky_lifetime: clean(f.sticky_lifetime),
        gzip_when_done: f.gzip_when_done,
        gzipped_nbytes: clean(f.gzipped_nbytes),
        file_signature: f.file_signature.clone(),
        download_urls: f.download_urls.clone(),
        upload_urls: f.upload_urls.clone(),
        xml_signature: f.xml_signature.clone(),
        ..FileInfo::default()
    };
    if !f.gzipped_urls.is_empty() {
        n.download_urls = f.gzipped_urls.clone();
        n.download_gzipped = true;
    }
    if n.sticky_lifetime > 0.0 {
        n.sticky_expire_time = now + n.sticky_lifetime;
    }
    n
}

/// Index by name of `items` (the first of equal names, as the linear lookups of
/// `ProjectState` find), so that a reply with many objects is merged in linear time.
fn positions<T>(items: &[T], name: impl Fn(&T) -> &str) -> HashMap<String, usize> {
    let mut at = HashMap::with_capacity(items.len());
    for (i, x) in items.iter().enumerate() {
        at.entry(name(x).to_owned()).or_insert(i);
    }
    at
}

fn clean(v: f64) -> f64 {
    if v.is_finite() && v >= 0.0 {
        v
    } else {
        0.0
    }
}

/// Merges the reply's files; returns the names of files (new or re-sent) that may need a
/// download, in reply order.
fn merge_files(
    ps: &mut ProjectState,
    reply: &SchedulerReply,
    ctx: &Ctx<'_>,
    out: &mut ApplyOutcome,
) -> Vec<String> {
    let mut touched = Vec::new();
    let mut seen = HashSet::new();
    let mut at = positions(&ps.files, |f| &f.name);
    for f in &reply.file_infos {
        if let Err(e) = check_file_name(&f.name) {
            out.refusals.push(Refusal {
                kind: ObjectKind::File,
                name: f.name.clone(),
                reason: RefusalReason::BadName(e),
            });
            continue;
        }
        let incoming = new_file(f, ctx.now);
        match at.get(&f.name).copied().and_then(|i| ps.files.get_mut(i)) {
            Some(x) => {
                if !incoming.download_urls.is_empty() {
                    x.download_urls = incoming.download_urls;
                    x.download_gzipped = incoming.download_gzipped;
                    x.gzipped_nbytes = incoming.gzipped_nbytes;
                }
                if !incoming.upload_urls.is_empty() {
                    x.upload_urls = incoming.upload_urls;
                }
                if x.max_nbytes == 0.0 {
                    x.max_nbytes = incoming.max_nbytes;
                }
                if incoming.file_signature.is_some() {
                    x.file_signature = incoming.file_signature;
                }
                if incoming.xml_signature.is_some() {
                    x.xml_signature = incoming.xml_signature;
                }
                x.executable |= incoming.executable;
                x.sticky = incoming.sticky;
                if incoming.sticky_lifetime > 0.0 {
                    x.sticky_lifetime = incoming.sticky_lifetime;
                    x.sticky_expire_time = incoming.sticky_expire_time;
                }
                // Re-sent after an error: clear it so it is fetched again.
                if x.status < 0 && !x.download_urls.is_empty() {
                    x.status = 0;
                    x.error_msg = None;
                }
            }
            None => {
                at.insert(f.name.clone(), ps.files.len());
                ps.files.push(incoming);
            }
        }
        if seen.insert(f.name.as_str()) {
            touched.push(f.name.clone());
        }
    }
    touched
}

fn check_ref(fr: &FileRef) -> Result<(), RefusalReason> {
    check_file_name(&fr.file_name).map_err(|error| RefusalReason::BadReference {
        name: fr.file_name.clone(),
        error,
    })?;
    if !fr.open_name.is_empty() {
        check_open_name(&fr.open_name).map_err(|error| RefusalReason::BadReference {
            name: fr.open_name.clone(),
            error,
        })?;
    }
    Ok(())
}

fn check_refs(files: &HashMap<String, usize>, refs: &[FileRef]) -> Result<(), RefusalReason> {
    for fr in refs {
        check_ref(fr)?;
        if !files.contains_key(&fr.file_name) {
            return Err(RefusalReason::UnknownFile(fr.file_name.clone()));
        }
    }
    Ok(())
}

fn merge_app_versions(
    ps: &mut ProjectState,
    reply: &SchedulerReply,
    ctx: &Ctx<'_>,
    out: &mut ApplyOutcome,
) {
    let files = positions(&ps.files, |f| &f.name);
    for av in &reply.app_versions {
        let refuse = |reason| Refusal {
            kind: ObjectKind::AppVersion,
            name: format!("{} {}", av.app_name, av.version_num),
            reason,
        };
        if ps.project.anonymous_platform {
            out.refusals.push(refuse(RefusalReason::AnonymousPlatform));
            continue;
        }
        if ps.app(&av.app_name).is_none() {
            out.refusals
                .push(refuse(RefusalReason::UnknownApp(av.app_name.clone())));
            continue;
        }
        let platform = if av.platform.trim().is_empty() {
            ctx.primary.to_owned()
        } else {
            av.platform.trim().to_owned()
        };
        if !ctx.platforms.contains(&platform) {
            out.refusals
                .push(refuse(RefusalReason::UnsupportedPlatform(platform)));
            continue;
        }
        if let Err(reason) = check_refs(&files, &av.file_refs) {
            out.refusals.push(refuse(reason));
            continue;
        }
        let mut usage = av.usage.clone();
        if !(usage.avg_ncpus.is_finite() && usage.avg_ncpus > 0.0) {
            usage.avg_ncpus = 1.0;
        }
        usage
            .coprocs
            .retain(|c| c.count.is_finite() && c.count > 0.0);
        for c in &mut usage.coprocs {
            if c.rsc_type == "CUDA" {
                c.rsc_type = "NVIDIA".into();
            }
        }
        if !(usage.flops.is_finite() && usage.flops > 0.0) {
            let gpus: f64 = usage.coprocs.iter().map(|c| c.count).sum();
            usage.flops = usage.avg_ncpus * ctx.p_fpops + gpus * 10.0 * ctx.p_fpops;
        }
        let key = (&av.app_name, &platform, av.version_num, &av.plan_class);
        match ps
            .app_versions
            .iter_mut()
            .find(|x| x.is(key.0, key.1, key.2, key.3))
        {
            Some(x) => x.usage = usage,
            None => ps.app_versions.push(AppVersion {
                platform,
                usage,
                extra: Vec::new(),
                ..av.clone()
            }),
        }
    }
    // Every file of an app version must be signed (unless configured otherwise).
    if !ctx.opts.unsigned_apps_ok {
        let names: Vec<String> = ps
            .app_versions
            .iter()
            .flat_map(|v| v.file_refs.iter().map(|r| r.file_name.clone()))
            .collect();
        for n in names {
            if let Some(f) = files.get(&n).and_then(|&i| ps.files.get_mut(i)) {
                f.signature_required = true;
            }
        }
    }
}

/// Decides, for each file the reply touched, whether to download it now and how it will
/// be checked; files needing a signature they cannot have are put in error at once.
fn check_signatures(
    ps: &mut ProjectState,
    touched: &[String],
    opts: &ApplyOptions,
    verifier: &dyn SignatureVerifier,
    out: &mut ApplyOutcome,
) {
    let key = ps
        .project
        .code_sign_key
        .clone()
        .filter(|k| !k.trim().is_empty());
    let at = positions(&ps.files, |f| &f.name);
    for name in touched {
        let Some(f) = at.get(name).and_then(|&i| ps.files.get_mut(i)) else {
            continue;
        };
        if f.status != 0 || f.download_urls.is_empty() {
            continue;
        }
        let needs_sig = f.signature_required && !opts.unsigned_apps_ok;
        if needs_sig {
            let problem = match (&f.file_signature, &key) {
                (None, _) => Some((ERR_NO_SIGNATURE, "missing signature")),
                (Some(_), None) => Some((ERR_RSA_FAILED, "no code-signing key")),
                // With a declared MD5 the signature can be checked before downloading.
                (Some(sig), Some(k)) if f.md5_cksum.len() == 32 => {
                    (!verifier.verify_md5(k, &f.md5_cksum, sig))
                        .then_some((ERR_RSA_FAILED, "signature verification failed"))
                }
                _ => None,
            };
            if let Some((status, message)) = problem {
                f.status = status;
                f.error_msg = Some(message.to_owned());
                out.events.push(Event::FileError {
                    file: name.clone(),
                    status,
                    message: message.to_owned(),
                });
                continue;
            }
        }
        out.events.push(Event::Download {
            file: name.clone(),
            signature_pending: needs_sig,
        });
    }
}

fn merge_workunits(ps: &mut ProjectState, reply: &SchedulerReply, out: &mut ApplyOutcome) {
    let files = positions(&ps.files, |f| &f.name);
    let apps = positions(&ps.apps, |a| &a.name);
    let mut wus = positions(&ps.workunits, |w| &w.name);
    for wu in &reply.workunits {
        let refuse = |reason| Refusal {
            kind: ObjectKind::Workunit,
            name: wu.name.clone(),
            reason,
        };
        if let Err(e) = check_object_name(&wu.name) {
            out.refusals.push(refuse(RefusalReason::BadName(e)));
            continue;
        }
        if wus.contains_key(&wu.name) {
            continue;
        }
        if !apps.contains_key(&wu.app_name) {
            out.refusals
                .push(refuse(RefusalReason::UnknownApp(wu.app_name.clone())));
            continue;
        }
        if let Err(reason) = check_refs(&files, &wu.input_files) {
            out.refusals.push(refuse(reason));
            continue;
        }
        let pos = |v: f64, d: f64| if v.is_finite() && v > 0.0 { v } else { d };
        wus.insert(wu.name.clone(), ps.workunits.len());
        ps.workunits.push(Workunit {
            command_line: wu.command_line.trim().to_owned(),
            rsc_fpops_est: pos(wu.rsc_fpops_est, 6.048e14),
            rsc_fpops_bound: pos(wu.rsc_fpops_bound, 2.4192e15),
            rsc_memory_bound: pos(wu.rsc_memory_bound, 1e8),
            rsc_disk_bound: pos(wu.rsc_disk_bound, 1e9),
            extra: Vec::new(),
            ..wu.clone()
        });
    }
}

/// The resource an app version mainly uses.
fn resource_of(av: &AppVersion) -> String {
    av.usage
        .coprocs
        .iter()
        .find(|c| c.count > 0.0)
        .map_or_else(|| "CPU".to_owned(), |c| c.rsc_type.clone())
}

fn merge_results(
    ps: &mut ProjectState,
    reply: &SchedulerReply,
    ctx: &Ctx<'_>,
    out: &mut ApplyOutcome,
) {
    let files = positions(&ps.files, |f| &f.name);
    let wus = positions(&ps.workunits, |w| &w.name);
    let mut results = positions(&ps.results, |r| &r.name);
    for r in &reply.results {
        let refuse = |reason| Refusal {
            kind: ObjectKind::Result,
            name: r.name.clone(),
            reason,
        };
        if let Err(e) = check_object_name(&r.name) {
            out.refusals.push(refuse(RefusalReason::BadName(e)));
            continue;
        }
        let deadline = if r.report_deadline.is_finite() {
            r.report_deadline
        } else {
            0.0
        };
        if let Some(x) = results.get(&r.name).and_then(|&i| ps.results.get_mut(i)) {
            x.report_deadline = deadline;
            continue;
        }
        let Some(wu) = wus.get(&r.wu_name).and_then(|&i| ps.workunits.get(i)) else {
            out.refusals
                .push(refuse(RefusalReason::UnknownWorkunit(r.wu_name.clone())));
            continue;
        };
        let app = wu.app_name.clone();
        if let Err(reason) = check_refs(&files, &r.output_files) {
            out.refusals.push(refuse(reason));
            continue;
        }
        let av = if r.platform.trim().is_empty() {
            ps.app_versions
                .iter()
                .filter(|v| v.app_name == app && v.platform == ctx.primary)
                .max_by_key(|v| v.version_num)
        } else {
            ps.app_version(&app, r.platform.trim(), r.version_num, &r.plan_class)
        };
        let Some(av) = av else {
            out.refusals.push(refuse(RefusalReason::NoAppVersion));
            continue;
        };
        let resource = resource_of(av);
        let mut n = TaskResult {
            name: r.name.clone(),
            wu_name: r.wu_name.clone(),
            platform: av.platform.clone(),
            version_num: av.version_num,
            plan_class: av.plan_class.clone(),
            report_deadline: deadline,
            received_time: ctx.now,
            report_immediately: r.report_immediately,
            output_files: r.output_files.clone(),
            state: ResultState::New,
            ..TaskResult::default()
        };
        if resource != "CPU" && !ctx.opts.gpu_types.contains(&resource) {
            n.state = ResultState::Aborted;
            n.exit_status = EXIT_MISSING_COPROC;
            n.ready_to_report = true;
            n.completed_time = ctx.now;
            out.events.push(Event::TaskMissingCoproc {
                name: r.name.clone(),
                resource,
            });
        } else {
            *out.tasks_added.entry(resource.clone()).or_insert(0) += 1;
            out.events.push(Event::TaskAdded {
                name: r.name.clone(),
                resource,
            });
        }
        results.insert(r.name.clone(), ps.results.len());
        ps.results.push(n);
    }
}

/// BOINC's run order: received time, then MD5 of the name. The results are moved, not
/// copied (a host may hold 100,000 of them).
fn sort_results(results: &mut Vec<TaskResult>) {
    let mut keyed: Vec<(f64, String, TaskResult)> = std::mem::take(results)
        .into_iter()
        .map(|r| {
            (
                r.received_time,
                ferrite_proto::crypt::md5_hex(r.name.as_bytes()),
                r,
            )
        })
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    results.extend(keyed.into_iter().map(|(_, _, r)| r));
}

/// The server aborts result `r` (`started`: it has an active task).
fn abort(
    r: &mut TaskResult,
    started: bool,
    only_if_not_started: bool,
    now: f64,
    out: &mut ApplyOutcome,
) {
    if r.computing_done() {
        return;
    }
    if started {
        if !only_if_not_started {
            out.events.push(Event::AbortRunning(r.name.clone()));
        }
        return;
    }
    r.state = ResultState::Aborted;
    r.exit_status = EXIT_ABORTED_BY_PROJECT;
    r.ready_to_report = true;
    r.completed_time = now;
    out.events.push(Event::Aborted(r.name.clone()));
}

/// Checks the invariants [`apply_reply`] keeps; returns the first violation found.
pub fn check_invariants(ps: &ProjectState) -> Result<(), String> {
    fn unique<'a>(kind: &str, names: impl Iterator<Item = &'a str>) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for n in names {
            if !seen.insert(n) {
                return Err(format!("duplicate {kind} {n:?}"));
            }
        }
        Ok(())
    }
    unique("app", ps.apps.iter().map(|a| a.name.as_str()))?;
    unique("file", ps.files.iter().map(|f| f.name.as_str()))?;
    unique("workunit", ps.workunits.iter().map(|w| w.name.as_str()))?;
    unique("result", ps.results.iter().map(|r| r.name.as_str()))?;
    let look = ferrite_proto::client_state::ProjectLookup::new(ps);
    for r in &ps.results {
        if look.workunit(&r.wu_name).is_none() {
            return Err(format!("result {:?} has no workunit", r.name));
        }
    }
    for w in &ps.workunits {
        if ps.app(&w.app_name).is_none() {
            return Err(format!("workunit {:?} has no app", w.name));
        }
        if let Some(fr) = w
            .input_files
            .iter()
            .find(|fr| look.file(&fr.file_name).is_none())
        {
            return Err(format!(
                "workunit {:?} lacks file {:?}",
                w.name, fr.file_name
            ));
        }
    }
    for v in &ps.app_versions {
        if let Some(fr) = v
            .file_refs
            .iter()
            .find(|fr| look.file(&fr.file_name).is_none())
        {
            return Err(format!("app version lacks file {:?}", fr.file_name));
        }
    }
    Ok(())
}
