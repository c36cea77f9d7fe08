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

use std::collections::{BTreeMap, HashSet};

use ferrite_proto::client_state::{App, ClientState, Project, ProjectState, ResultState, UserCpid};
use ferrite_proto::sched_reply::{ReplyMessage, SchedulerReply};

use crate::names::NameError;
use crate::verify::SignatureVerifier;

mod batch;
mod merge;

pub use batch::{apply_task_batch, apply_task_batch_indexed, split_tasks, BatchIndex, TaskBatch};
use merge::*;

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

/// Applies `reply` from project `master_url` at time `now`: BOINC's steps in its order, each
/// a function of its own below.
pub fn apply_reply(
    state: &mut ClientState,
    master_url: &str,
    reply: &SchedulerReply,
    now: f64,
    opts: &ApplyOptions,
    verifier: &dyn SignatureVerifier,
) -> Result<ApplyOutcome, ApplyError> {
    let index = project_index(state, master_url)?;
    let mut out = ApplyOutcome::default();
    let setting = Setting::of(state, master_url);
    let other_names: Vec<String> = state
        .projects
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != index)
        .map(|(_, p)| p.project.project_name.clone())
        .collect();

    note_contact(&mut state.projects[index].project, reply, now);
    master_url_change(&state.projects[index].project, reply, &mut out);
    // Step 3: messages, user CPID table.
    out.messages = reply.messages.clone();
    out.too_recent = reply.messages.iter().any(|m| m.text.contains("too recent"));
    if reply.project_is_down {
        project_down(&mut state.projects[index].project, reply, now, &mut out);
        return Ok(out);
    }
    project_info(&mut state.projects[index].project, reply, now);
    update_user_cpids(&mut state.user_cpids, &state.projects[index].project);
    // Step 5.
    let name = &state.projects[index].project.project_name;
    if !name.is_empty() && other_names.iter().any(|n| n == name) {
        out.events.push(Event::DuplicateProjectName(name.clone()));
    }
    prefs_and_venue(&mut state.projects[index].project, reply, opts, &mut out);
    code_sign_key(
        &mut state.projects[index].project,
        reply,
        verifier,
        &mut out,
    );

    let ps = &mut state.projects[index];
    let ctx = setting.ctx(now, opts);
    merge_objects(ps, reply, &ctx, verifier, &mut out);
    acks_and_aborts(ps, reply, &ctx, &mut out);
    project_flags(&mut ps.project, reply, &mut out);
    project_files(ps, reply, &mut out);
    rpc_times_and_limits(&mut ps.project, reply, now, opts);
    Ok(out)
}

/// The position of project `master_url` in the state.
fn project_index(state: &ClientState, master_url: &str) -> Result<usize, ApplyError> {
    state
        .projects
        .iter()
        .position(|p| p.project.master_url.eq_ignore_ascii_case(master_url))
        .ok_or_else(|| ApplyError::UnknownProject(master_url.to_owned()))
}

/// What the merge needs to know of the host and the running tasks.
struct Setting {
    primary: String,
    platforms: Vec<String>,
    p_fpops: f64,
    running: Vec<String>,
}

impl Setting {
    fn of(state: &ClientState, master_url: &str) -> Setting {
        let primary = state.platform_name.clone();
        let mut platforms = vec![primary.clone()];
        platforms.extend(state.alt_platforms.iter().cloned());
        let p_fpops = if state.host_info.p_fpops > 0.0 && state.host_info.p_fpops.is_finite() {
            state.host_info.p_fpops
        } else {
            1e9
        };
        let running = state
            .active_tasks
            .iter()
            .filter(|a| a.project_master_url.eq_ignore_ascii_case(master_url))
            .map(|a| a.result_name.clone())
            .collect();
        Setting {
            primary,
            platforms,
            p_fpops,
            running,
        }
    }

    fn ctx<'a>(&'a self, now: f64, opts: &'a ApplyOptions) -> Ctx<'a> {
        Ctx {
            now,
            primary: &self.primary,
            platforms: &self.platforms,
            p_fpops: self.p_fpops,
            opts,
            running: &self.running,
        }
    }
}

/// Step 1: the contact itself.
fn note_contact(p: &mut Project, reply: &SchedulerReply, now: f64) {
    p.last_rpc_time = now;
    p.ended = reply.ended;
    p.non_cpu_intensive = reply.non_cpu_intensive;
    p.strict_memory_bound = reply.strict_memory_bound;
}

/// Step 2: a master URL other than ours (an upgrade to HTTPS, or a move).
fn master_url_change(p: &Project, reply: &SchedulerReply, out: &mut ApplyOutcome) {
    let Some(u) = reply.master_url.as_deref() else {
        return;
    };
    let theirs = ferrite_proto::account::canonicalize_master_url(u.trim());
    let ours = &p.master_url;
    if u.trim().is_empty() || theirs.eq_ignore_ascii_case(ours) {
        return;
    }
    let strip = |s: &str| {
        let l = s.to_ascii_lowercase();
        l.split_once("://").map(|(_, r)| r.to_owned()).unwrap_or(l)
    };
    let same_rest = strip(&theirs) == strip(ours);
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

/// Step 4: the project is down; only the delay it asks for is kept.
fn project_down(p: &mut Project, reply: &SchedulerReply, now: f64, out: &mut ApplyOutcome) {
    if let Some(d) = reply.request_delay {
        p.min_rpc_time = p.min_rpc_time.max(now + d);
    }
    p.scheduler_rpc_in_progress = false;
    out.project_down = true;
}

/// Steps 6 and 7: global preferences newer than ours, the venue, project preferences, GUI
/// URLs, news feeds.
fn prefs_and_venue(
    p: &mut Project,
    reply: &SchedulerReply,
    opts: &ApplyOptions,
    out: &mut ApplyOutcome,
) {
    if let Some(body) = &reply.global_preferences {
        let mod_time = prefs_mod_time(body);
        if !opts.prefs_from_account_manager && mod_time > opts.current_prefs_mod_time {
            out.global_prefs = Some(NewGlobalPrefs {
                body: body.clone(),
                mod_time,
                source_project: p.master_url.clone(),
            });
        }
    }
    if let Some(v) = &reply.host_venue {
        if *v != p.host_venue {
            p.host_venue = v.clone();
            out.events.push(Event::VenueChanged(v.clone()));
        }
    }
    out.project_prefs = reply.project_preferences.clone();
    out.gui_urls = reply.gui_urls.clone();
    out.rss_feeds = reply.rss_feeds.clone();
    out.scheduler_version = reply.scheduler_version;
}

/// Step 9: the objects, in dependency order (apps, files, app versions, workunits,
/// results), the results then put in BOINC's run order.
fn merge_objects(
    ps: &mut ProjectState,
    reply: &SchedulerReply,
    ctx: &Ctx<'_>,
    verifier: &dyn SignatureVerifier,
    out: &mut ApplyOutcome,
) {
    merge_apps(ps, reply, out);
    // Each index is built once and kept up to date as objects are added.
    let mut files = positions(&ps.files, |f| &f.name);
    let resent = merge_files(ps, &reply.file_infos, ctx, &mut files, out);
    for name in &reply.delete_file_infos {
        if let Some(f) = files.get(name).and_then(|&i| ps.files.get_mut(i)) {
            f.sticky = false;
            out.events.push(Event::StickyCleared(name.clone()));
        }
    }
    merge_app_versions(ps, reply, ctx, &files, out);
    check_signatures(ps, &resent, ctx.opts, verifier, &files, out);
    let mut wus = positions(&ps.workunits, |w| &w.name);
    merge_workunits(ps, &reply.workunits, &files, &mut wus, out);
    let mut results = positions(&ps.results, |r| &r.name);
    merge_results(ps, &reply.results, ctx, &files, &wus, &mut results, out);
    sort_results(&mut ps.results);
}

/// Step 11: acknowledged reports, the server's aborts, trickle-downs.
fn acks_and_aborts(
    ps: &mut ProjectState,
    reply: &SchedulerReply,
    ctx: &Ctx<'_>,
    out: &mut ApplyOutcome,
) {
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
            abort(r, started, only_if_not_started, ctx.now, out);
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
}

/// The project's flags, and step 12: a host id assigned.
fn project_flags(p: &mut Project, reply: &SchedulerReply, out: &mut ApplyOutcome) {
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
}

/// Step 13: project files. As the official client, the reply's list replaces the
/// project's: a reply without one (the server has no `project_files.xml` any more) leaves
/// none.
fn project_files(ps: &mut ProjectState, reply: &SchedulerReply, out: &mut ApplyOutcome) {
    let list = reply.project_files.as_deref().unwrap_or_default();
    if list.is_empty() && ps.project_files.is_empty() {
        return;
    }
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

/// Steps 14 to 18: the next RPC's times, the trickle-up URLs, the disk asked for, the
/// resources without apps; the RPC is over.
fn rpc_times_and_limits(p: &mut Project, reply: &SchedulerReply, now: f64, opts: &ApplyOptions) {
    p.next_rpc_time = match reply.next_rpc_delay {
        Some(d) if d > 0.0 => now + d,
        _ => 0.0,
    };
    // Success resets, then request_delay.
    p.nrpc_failures = 0;
    p.min_rpc_time = 0.0;
    if let Some(d) = reply.request_delay.filter(|d| *d > 0.0) {
        p.min_rpc_time = now + d;
    }
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
    p.sched_rpc_pending = None;
    p.scheduler_rpc_in_progress = false;
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
