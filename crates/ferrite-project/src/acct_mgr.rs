//! Account-manager sync as pure decisions (`client/acct_mgr.cpp: handle_reply, poll` in
//! BOINC): given the client's projects and a manager's reply, what to attach, detach,
//! suspend, resume or change; when to sync next. The daemon posts the request, reads the
//! reply with `ferrite_proto::acct_mgr::AmReply`, asks [`plan_sync`] and carries the plan out.

use ferrite_proto::account::canonicalize_master_url;
use ferrite_proto::acct_mgr::{AmAccount, AmReply};

use crate::verify::SignatureVerifier;

/// Seconds between periodic syncs when the manager names no `repeat_sec`.
pub const DEFAULT_SYNC_PERIOD: f64 = 86400.0;
/// First retry delay after a failed sync (`ACCT_MGR_MIN_BACKOFF`).
pub const MIN_BACKOFF: f64 = 600.0;
/// Longest retry delay (`ACCT_MGR_MAX_BACKOFF`).
pub const MAX_BACKOFF: f64 = 86400.0;
/// Starvation must last this long before a dynamic manager is asked for other projects.
pub const STARVED_RPC_DELAY: f64 = 600.0;
/// `ERR_BAD_PASSWD`: the manager refused the password.
pub const ERR_BAD_PASSWD: i32 = -206;

/// What the sync needs to know about one attached project.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectView {
    /// Master URL.
    pub url: String,
    /// The account key in use.
    pub authenticator: String,
    /// Attached by the manager.
    pub attached_via_acct_mgr: bool,
    /// Set to be detached when its work is done.
    pub detach_when_done: bool,
    /// The project's tasks (results) the client still holds.
    pub ntasks: usize,
    /// A host-specific share from the manager is in force.
    pub has_am_share: bool,
}

/// How a project's resource share changes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ShareChange {
    /// Leave it.
    Keep,
    /// The manager's share for this host.
    Set(f64),
    /// The manager no longer sets one: back to the account's share (100 if unreadable).
    Restore,
}

/// What the manager says about a project the client already has.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectChanges {
    /// A new account key (only when both the old and the new key are weak keys).
    pub authenticator: Option<String>,
    /// "No new tasks" (false when the manager says nothing).
    pub dont_request_more_work: bool,
    /// Detach when done (false when the manager says nothing).
    pub detach_when_done: bool,
    /// Contact the scheduler now (`RPC_REASON_ACCT_MGR_REQ`, backoff cleared).
    pub update: bool,
    /// Resource share.
    pub resource_share: ShareChange,
    /// Suspend (`Some(true)`) or resume (`Some(false)`).
    pub suspend: Option<bool>,
    /// Abort the tasks not started yet.
    pub abort_not_started: bool,
    /// Resource types the manager excludes (replaces the previous list).
    pub no_rsc: Vec<String>,
}

/// One thing to do to the client's projects.
#[derive(Debug, Clone, PartialEq)]
pub enum AmAction {
    /// Detach from a project the manager attached.
    Detach {
        /// Master URL.
        url: String,
    },
    /// Attach a new project (`attached_via_acct_mgr`).
    Attach {
        /// Master URL as the manager gave it.
        url: String,
        /// Account key.
        authenticator: String,
        /// Excluded resource types.
        no_rsc: Vec<String>,
        /// "No new tasks", when the manager said.
        dont_request_more_work: Option<bool>,
        /// Start suspended.
        suspend: bool,
    },
    /// Apply the manager's settings to an attached project (and mark it as the manager's).
    Change {
        /// Master URL.
        url: String,
        /// The settings.
        changes: ProjectChanges,
    },
}

/// How loud a note to the user is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteLevel {
    /// Event log.
    Info,
    /// A notice the user should see (the official `MSG_USER_ALERT`).
    Alert,
    /// Something wrong on the manager's side (`MSG_INTERNAL_ERROR`).
    Error,
}

/// A line for the event log or the notices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Level.
    pub level: NoteLevel,
    /// The project it is about, if any.
    pub project: Option<String>,
    /// Text.
    pub text: String,
}

impl Note {
    fn new(level: NoteLevel, project: Option<&str>, text: impl Into<String>) -> Self {
        Self {
            level,
            project: project.map(str::to_owned),
            text: text.into(),
        }
    }
}

/// What to do with a reply.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SyncPlan {
    /// The manager reported an error (code, text): the sync failed; nothing else applies.
    pub failure: Option<(i32, String)>,
    /// The manager refused the password (shown in `get_cc_status` when not asked by a GUI).
    pub password_error: bool,
    /// Projects to detach first: set to detach when done, attached by the manager, no tasks.
    pub detach_done: Vec<String>,
    /// The reply's signing key is present and matches the stored one: the accounts, the
    /// preferences, the feeds and the manager's name, key, opaque data and credentials apply.
    pub key_ok: bool,
    /// The project actions, in reply order (empty when `key_ok` is false).
    pub actions: Vec<AmAction>,
    /// For the event log and notices, in order.
    pub notes: Vec<Note>,
}

impl SyncPlan {
    /// The sync succeeded (the next one is a period away, failures reset).
    pub fn succeeded(&self) -> bool {
        self.failure.is_none()
    }
}

/// An account key the project made for an account manager (`is_weak_auth`: contains `_`).
pub fn is_weak_authenticator(key: &str) -> bool {
    key.contains('_')
}

/// Decides what a reply does (`ACCT_MGR_OP::handle_reply`). `stored_key` is the manager's
/// key the client already has (empty: none); `via_gui` says whether a GUI asked for this
/// sync.
pub fn plan_sync(
    projects: &[ProjectView],
    reply: &AmReply,
    stored_key: &str,
    via_gui: bool,
    verifier: &dyn SignatureVerifier,
) -> SyncPlan {
    let mut plan = SyncPlan::default();
    for m in &reply.messages {
        plan.notes.push(Note::new(
            NoteLevel::Info,
            None,
            format!("Account manager: {m}"),
        ));
    }
    plan.password_error = reply.error_num == ERR_BAD_PASSWD && !via_gui;
    if !reply.error.is_empty() || reply.error_num != 0 {
        let text = if reply.error.is_empty() {
            error_text(reply.error_num)
        } else {
            reply.error.clone()
        };
        plan.notes.push(Note::new(
            NoteLevel::Alert,
            None,
            format!("Message from account manager: {text}"),
        ));
        plan.failure = Some((reply.error_num, text));
        return plan;
    }
    for p in projects {
        if p.detach_when_done && p.ntasks == 0 && p.attached_via_acct_mgr {
            plan.notes.push(Note::new(
                NoteLevel::Info,
                Some(&p.url),
                "Detaching - no more tasks",
            ));
            plan.detach_done.push(p.url.clone());
        }
    }
    plan.notes.push(Note::new(
        NoteLevel::Info,
        None,
        "Account manager contact succeeded",
    ));
    plan.key_ok = true;
    if reply.signing_key.is_empty() {
        plan.notes.push(Note::new(
            NoteLevel::Error,
            None,
            "No signing key from account manager",
        ));
        plan.key_ok = false;
    }
    if !stored_key.is_empty() && stored_key.trim() != reply.signing_key {
        plan.notes.push(Note::new(
            NoteLevel::Error,
            None,
            "Inconsistent signing key from account manager",
        ));
        plan.key_ok = false;
    }
    if !plan.key_ok {
        return plan;
    }
    let remaining: Vec<&ProjectView> = projects
        .iter()
        .filter(|p| !plan.detach_done.contains(&p.url))
        .collect();
    for acct in &reply.accounts {
        let url = canonicalize_master_url(&acct.url);
        let have = remaining
            .iter()
            .find(|p| canonicalize_master_url(&p.url) == url);
        match have {
            Some(p) => plan_existing(&mut plan, p, acct),
            None => plan_new(&mut plan, acct, &reply.signing_key, verifier),
        }
    }
    plan
}

fn plan_existing(plan: &mut SyncPlan, p: &ProjectView, acct: &AmAccount) {
    if acct.detach {
        if p.attached_via_acct_mgr {
            plan.actions.push(AmAction::Detach { url: p.url.clone() });
        }
        return;
    }
    let mut authenticator = None;
    if !acct.authenticator.is_empty() && acct.authenticator != p.authenticator {
        if is_weak_authenticator(&p.authenticator) && is_weak_authenticator(&acct.authenticator) {
            authenticator = Some(acct.authenticator.clone());
            plan.notes.push(Note::new(
                NoteLevel::Info,
                Some(&p.url),
                "Received new authenticator from account manager",
            ));
        } else {
            plan.notes.push(Note::new(
                NoteLevel::Info,
                Some(&p.url),
                "Already attached to a different account",
            ));
        }
    }
    let detach_when_done = acct.detach_when_done.unwrap_or(false);
    let resource_share = match acct.resource_share {
        Some(s) => ShareChange::Set(s),
        None if p.has_am_share => ShareChange::Restore,
        None => ShareChange::Keep,
    };
    plan.actions.push(AmAction::Change {
        url: p.url.clone(),
        changes: ProjectChanges {
            authenticator,
            dont_request_more_work: acct.dont_request_more_work.unwrap_or(false)
                || detach_when_done,
            detach_when_done,
            update: acct.update,
            resource_share,
            suspend: acct.suspend,
            abort_not_started: acct.abort_not_started == Some(true),
            no_rsc: acct.no_rsc.clone(),
        },
    });
}

fn plan_new(plan: &mut SyncPlan, acct: &AmAccount, key: &str, verifier: &dyn SignatureVerifier) {
    if acct.detach || acct.detach_when_done == Some(true) {
        return;
    }
    if !verifier.verify_string(key, &acct.url, &acct.url_signature) {
        plan.notes.push(Note::new(
            NoteLevel::Error,
            None,
            format!("Bad signature for URL {}", acct.url),
        ));
        return;
    }
    if acct.authenticator.is_empty() {
        plan.notes.push(Note::new(
            NoteLevel::Info,
            None,
            format!(
                "Account manager reply missing authenticator for {}",
                acct.url
            ),
        ));
        return;
    }
    plan.notes.push(Note::new(
        NoteLevel::Info,
        None,
        format!("Attaching to {}", acct.url),
    ));
    plan.actions.push(AmAction::Attach {
        url: acct.url.clone(),
        authenticator: acct.authenticator.clone(),
        no_rsc: acct.no_rsc.clone(),
        dont_request_more_work: acct.dont_request_more_work,
        suspend: acct.suspend == Some(true),
    });
}

/// Whether the manager's global preferences replace the client's: always for a dynamic
/// manager, otherwise when they are newer.
pub fn use_am_prefs(dynamic: bool, am_mod_time: f64, current_mod_time: f64) -> bool {
    dynamic || am_mod_time > current_mod_time
}

/// The words the official client shows for the error codes managers send.
pub fn error_text(code: i32) -> String {
    match code {
        -206 => "invalid password".to_owned(),
        -136 => "item not found in database".to_owned(),
        -137 => "name is not unique".to_owned(),
        -205 => "bad email address".to_owned(),
        -183 => "project is down".to_owned(),
        -113 => "HTTP error".to_owned(),
        n => format!("error {n}"),
    }
}

/// When to sync with the manager (`ACCT_MGR_INFO::next_rpc_time`, `nfailures`, and the
/// starvation timer of dynamic managers).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SyncClock {
    /// Unix time of the next periodic sync (a sync happens once `now` is past it).
    pub next_rpc_time: f64,
    /// Failed syncs in a row.
    pub nfailures: u32,
    /// When some device began to lack work (0: none does).
    pub first_starved: f64,
    /// Delay between starvation syncs.
    pub starved_backoff: f64,
    /// Earliest next starvation sync.
    pub starved_min_time: f64,
}

impl SyncClock {
    /// A periodic sync is due.
    pub fn due(&self, now: f64) -> bool {
        now > self.next_rpc_time
    }

    /// A sync starts: until it ends, the next one is a day away (as officially).
    pub fn started(&mut self, now: f64) {
        self.next_rpc_time = now + DEFAULT_SYNC_PERIOD;
    }

    /// A sync succeeded: the next one is `repeat_sec` away (a day when 0).
    pub fn succeeded(&mut self, now: f64, repeat_sec: f64) {
        self.nfailures = 0;
        self.next_rpc_time = now
            + if repeat_sec > 0.0 {
                repeat_sec
            } else {
                DEFAULT_SYNC_PERIOD
            };
    }

    /// A sync failed: retry after `min(600·2ⁿ, 86400)·(0.5 + 0.5·u)`, `u` uniform in [0, 1).
    pub fn failed(&mut self, now: f64, u: f64) {
        let n = i32::try_from(self.nfailures.min(30)).unwrap_or(30);
        let base = (MIN_BACKOFF * 2f64.powi(n)).min(MAX_BACKOFF);
        self.next_rpc_time = now + base * (0.5 + 0.5 * u.clamp(0.0, 1.0));
        self.nfailures += 1;
    }

    /// Called once a minute for a dynamic manager: true when a device has lacked work long
    /// enough to ask the manager for other projects (backing off 600 s, doubling, up to a
    /// day).
    pub fn starved(&mut self, now: f64, some_device_idle: bool) -> bool {
        if !some_device_idle {
            self.first_starved = 0.0;
            return false;
        }
        if self.first_starved == 0.0 {
            self.first_starved = now;
            self.starved_backoff = STARVED_RPC_DELAY;
            self.starved_min_time = now + STARVED_RPC_DELAY;
            return false;
        }
        if now < self.starved_min_time {
            return false;
        }
        self.starved_backoff = (self.starved_backoff * 2.0).min(DEFAULT_SYNC_PERIOD);
        self.starved_min_time = now + self.starved_backoff;
        true
    }
}

#[cfg(test)]
mod tests;
