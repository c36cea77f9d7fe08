//! Typed GUI RPC requests: parsing the request XML into [`Request`] and writing it back.
//!
//! Parsing follows the official reader: the first tag is the root (its name is not checked),
//! the second item is the operation, `<op/>` and `<op>…</op>` are the same op, arguments are
//! looked up by tag name and unknown arguments are ignored. Where the official client rejects
//! a request without looking at its state (no mode in `set_run_mode`, …) the rejection is made
//! here, so the daemon only sees requests it can act on.

use crate::xml::{self, Element, TopItem};

/// A run mode as sent by `set_run_mode`, `set_gpu_mode` and `set_network_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// Run regardless of preferences.
    Always,
    /// Run according to preferences.
    Auto,
    /// Never run.
    Never,
    /// Cancel a temporary mode.
    Restore,
}

impl RunMode {
    /// The tag BOINC uses for this mode.
    pub fn tag(self) -> &'static str {
        match self {
            RunMode::Always => "always",
            RunMode::Auto => "auto",
            RunMode::Never => "never",
            RunMode::Restore => "restore",
        }
    }

    /// BOINC's numeric code (`RUN_MODE_*`: 1 always, 2 auto, 3 never, 4 restore).
    pub fn code(self) -> i32 {
        match self {
            RunMode::Always => 1,
            RunMode::Auto => 2,
            RunMode::Never => 3,
            RunMode::Restore => 4,
        }
    }
}

/// What a `*_result` op does to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultAction {
    /// `abort_result`.
    Abort,
    /// `suspend_result`.
    Suspend,
    /// `resume_result`.
    Resume,
}

/// What a `*_file_transfer` op does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileTransferAction {
    /// `abort_file_transfer`.
    Abort,
    /// `retry_file_transfer`.
    Retry,
}

/// What a `project_*` op does to a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectAction {
    /// `project_reset`.
    Reset,
    /// `project_detach`.
    Detach,
    /// `project_update`.
    Update,
    /// `project_suspend`.
    Suspend,
    /// `project_resume`.
    Resume,
    /// `project_nomorework`.
    NoMoreWork,
    /// `project_allowmorework`.
    AllowMoreWork,
    /// `project_detach_when_done`.
    DetachWhenDone,
    /// `project_dont_detach_when_done`.
    DontDetachWhenDone,
}

/// Host facts a GUI may send with `set_host_info` (Android helper apps do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostInfoUpdate {
    /// `product_name`.
    pub product_name: Option<String>,
    /// `os_name`.
    pub os_name: Option<String>,
    /// `os_version`.
    pub os_version: Option<String>,
    /// `domain_name`.
    pub domain_name: Option<String>,
}

/// Arguments of `lookup_account` and `create_account` (the official `ACCOUNT_IN`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountIn {
    /// Project master URL.
    pub url: String,
    /// E-mail address or LDAP user name.
    pub email_addr: String,
    /// `md5(password + lowercase(email))`.
    pub passwd_hash: String,
    /// Name of the new account (create only).
    pub user_name: String,
    /// Team to join (create only).
    pub team_name: String,
    /// Authenticate against the project's LDAP.
    pub ldap_auth: bool,
    /// The project assigned a cookie instead of a password.
    pub server_assigned_cookie: bool,
    /// That cookie.
    pub server_cookie: String,
    /// The user accepted the project's terms of use (create only).
    pub consented_to_terms: bool,
}

/// Every GUI RPC operation the official client serves (authentication excluded), with its
/// arguments. Free-form strings are unescaped and trimmed; whole documents (`raw` fields) are
/// passed on exactly as received between the op tags.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    // ---- status family (no authentication needed on local connections)
    /// `exchange_versions`: the GUI's version and name.
    ExchangeVersions {
        /// GUI major version.
        major: i32,
        /// GUI minor version.
        minor: i32,
        /// GUI release.
        release: i32,
        /// GUI name (needed before `create_account` with consent).
        name: Option<String>,
    },
    /// `get_all_projects_list`.
    GetAllProjectsList,
    /// `get_cc_status`.
    GetCcStatus,
    /// `get_disk_usage`.
    GetDiskUsage,
    /// `get_daily_xfer_history`.
    GetDailyXferHistory,
    /// `get_file_transfers`.
    GetFileTransfers,
    /// `get_host_info`.
    GetHostInfo,
    /// `get_messages`: messages with a sequence number above `seqno`.
    GetMessages {
        /// Highest sequence number the GUI already has (0 = all).
        seqno: i64,
        /// Keep the `_("…")` translation markers.
        translatable: bool,
    },
    /// `get_message_count`.
    GetMessageCount,
    /// `get_newer_version`.
    GetNewerVersion,
    /// `get_notices_public`.
    GetNoticesPublic {
        /// Highest notice sequence number the GUI already has.
        seqno: i64,
    },
    /// `get_old_results`.
    GetOldResults,
    /// `get_project_status`.
    GetProjectStatus,
    /// `get_results`.
    GetResults {
        /// Only results with an active task.
        active_only: bool,
    },
    /// `get_screensaver_tasks`.
    GetScreensaverTasks,
    /// `get_simple_gui_info`.
    GetSimpleGuiInfo,
    /// `get_state`.
    GetState,
    /// `get_statistics`.
    GetStatistics,
    /// `ferrite_explain` (Ferrite only): why each task runs or waits and why work is or is
    /// not fetched, from the scheduling core's last decisions.
    FerriteExplain,
    /// `run_graphics_app` (macOS only in the official client).
    RunGraphicsApp {
        /// Slot of the task.
        slot: Option<i64>,
        /// `run`, `runfullscreen`, `stop` or `test`, if one was given.
        operation: Option<String>,
        /// Process id, for `stop`/`test`.
        graphics_pid: Option<i64>,
    },

    // ---- control family (authentication needed)
    /// `abort_result`, `suspend_result`, `resume_result`.
    ResultOp {
        /// What to do.
        op: ResultAction,
        /// The task's project (may be empty: the daemon answers `Missing project URL`).
        project_url: String,
        /// The task's name (may be empty: `Missing result name`).
        name: String,
    },
    /// `abort_file_transfer`, `retry_file_transfer`.
    FileTransferOp {
        /// What to do.
        op: FileTransferAction,
        /// The file's project.
        project_url: String,
        /// The file's name.
        filename: String,
    },
    /// `project_*`.
    ProjectOp {
        /// What to do.
        op: ProjectAction,
        /// The project (may be empty: `Missing project URL`).
        project_url: String,
    },
    /// `set_run_mode`.
    SetRunMode {
        /// The mode.
        mode: RunMode,
        /// Seconds the mode lasts; 0 = permanent.
        duration: f64,
        /// Ferrite's `<ferrite_at_checkpoint/>`: with `never`, a running task that
        /// checkpoints may run on to its next checkpoint before it is suspended (the
        /// official client ignores the element).
        at_checkpoint: bool,
    },
    /// `set_gpu_mode`.
    SetGpuMode {
        /// The mode.
        mode: RunMode,
        /// Seconds the mode lasts; 0 = permanent.
        duration: f64,
    },
    /// `set_network_mode`.
    SetNetworkMode {
        /// The mode.
        mode: RunMode,
        /// Seconds the mode lasts; 0 = permanent.
        duration: f64,
    },
    /// `network_available`.
    NetworkAvailable,
    /// `quit`.
    Quit,
    /// `read_cc_config`.
    ReadCcConfig,
    /// `read_global_prefs_override`.
    ReadGlobalPrefsOverride,
    /// `reset_host_info`.
    ResetHostInfo,
    /// `run_benchmarks`.
    RunBenchmarks,
    /// `set_host_info`.
    SetHostInfo {
        /// The `<host_info>` fields given, or `None` when the tag is missing (the daemon
        /// answers `Missing host_info`).
        host_info: Option<HostInfoUpdate>,
    },
    /// `set_language`.
    SetLanguage {
        /// Language code, e.g. `de`.
        language: String,
    },
    /// `get_proxy_settings`.
    GetProxySettings,
    /// `set_proxy_settings`: the content of `<proxy_info>` (or of the op if the tag is
    /// missing), raw.
    SetProxySettings {
        /// Raw `<proxy_info>` content.
        raw: String,
    },
    /// `get_notices`.
    GetNotices {
        /// Highest notice sequence number the GUI already has.
        seqno: i64,
    },
    /// `acct_mgr_info`.
    AcctMgrInfo,

    // ---- preferences and configuration
    /// `get_cc_config`.
    GetCcConfig,
    /// `set_cc_config`: the new `cc_config.xml` (empty = delete the file).
    SetCcConfig {
        /// Raw document between the op tags, trimmed.
        raw: String,
    },
    /// `get_global_prefs_file`.
    GetGlobalPrefsFile,
    /// `get_global_prefs_override`.
    GetGlobalPrefsOverride,
    /// `get_global_prefs_working`.
    GetGlobalPrefsWorking,
    /// `set_global_prefs_override`: the new override file (empty = delete it).
    SetGlobalPrefsOverride {
        /// Raw document between the op tags, trimmed.
        raw: String,
    },
    /// `get_app_config`.
    GetAppConfig {
        /// Project master URL.
        url: String,
    },
    /// `set_app_config`.
    SetAppConfig {
        /// Project master URL.
        url: String,
        /// The whole `<app_config>…</app_config>` element, or `None` if it was missing (the
        /// daemon answers `XML parse failed`).
        app_config: Option<String>,
    },

    // ---- attach family
    /// `get_project_init_status`.
    GetProjectInitStatus,
    /// `get_project_config`.
    GetProjectConfig {
        /// Project URL (never empty: `<error>no url</error>` is answered here).
        url: String,
    },
    /// `get_project_config_poll`.
    GetProjectConfigPoll,
    /// `lookup_account`.
    LookupAccount(AccountIn),
    /// `lookup_account_poll`.
    LookupAccountPoll,
    /// `create_account`.
    CreateAccount(AccountIn),
    /// `create_account_poll`.
    CreateAccountPoll,
    /// `project_attach`.
    ProjectAttach {
        /// Project master URL.
        project_url: String,
        /// Account key.
        authenticator: String,
        /// Project name, for messages.
        project_name: String,
        /// E-mail address (informational).
        email_addr: String,
        /// Take URL and key from `project_init.xml` instead.
        use_config_file: bool,
    },
    /// `project_attach_poll`.
    ProjectAttachPoll,
    /// `acct_mgr_rpc`: join, sync with or leave an account manager.
    AcctMgrRpc {
        /// Account manager URL (`None` if the tag was missing).
        url: Option<String>,
        /// Login name (`None` if missing).
        name: Option<String>,
        /// Password, or `hash:`-prefixed hash (`None` if missing).
        password: Option<String>,
        /// Use the current account manager.
        use_config_file: bool,
    },
    /// `acct_mgr_rpc_poll`.
    AcctMgrRpcPoll,
}

/// A request the protocol layer answers itself with an error body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// No tag at all.
    #[error("missing boinc_gui_rpc_request tag")]
    MissingRoot,
    /// A root tag but no operation.
    #[error("missing request")]
    MissingRequest,
    /// An op not in the table; the name keeps a trailing `/` for `<op/>` like the official.
    #[error("unrecognized op: {0}")]
    UnrecognizedOp(String),
    /// A mode op without a mode tag.
    #[error("Missing mode")]
    MissingMode,
    /// `set_language` without `<language>`.
    #[error("no language found")]
    MissingLanguage,
    /// `get_project_config` without `<url>`.
    #[error("no url")]
    MissingUrl,
    /// `lookup_account` without URL, e-mail or password hash.
    #[error("missing URL, email address, or password")]
    MissingAccountFields,
}

impl RequestError {
    /// The reply body the official client sends for this error.
    pub fn reply_body(&self) -> String {
        crate::reply::error(&self.to_string())
    }
}

/// The operation named by a request, found before any argument is parsed (authentication is
/// decided on the name alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpName {
    /// The name as written, with a trailing `/` for `<op/>` (used in error texts).
    pub written: String,
}

impl OpName {
    /// The name without the `/`.
    pub fn bare(&self) -> &str {
        self.written.strip_suffix('/').unwrap_or(&self.written)
    }
}

/// A parsed request document: the op name and its element.
#[derive(Debug)]
pub struct ParsedDocument<'a> {
    op: OpName,
    element: Option<Element<'a>>,
}

impl<'a> ParsedDocument<'a> {
    /// The op name.
    pub fn op(&self) -> &OpName {
        &self.op
    }

    /// The `<nonce_hash>` argument of `auth2`.
    pub fn nonce_hash(&self) -> Option<String> {
        self.element
            .as_ref()
            .and_then(|e| e.child_text("nonce_hash"))
            .map(str::to_owned)
    }

    /// Turns the document into a typed request.
    pub fn into_request(self) -> Result<Request, RequestError> {
        let empty = Element::default();
        let e = self.element.as_ref().unwrap_or(&empty);
        request_from_element(self.op.bare(), e)
            .unwrap_or_else(|| Err(RequestError::UnrecognizedOp(self.op.written.clone())))
    }
}

/// Reads the request document (without the 0x03) up to its operation.
pub fn parse_document(text: &str) -> Result<ParsedDocument<'_>, RequestError> {
    let tokens = xml::tokenize(text);
    let mut items = xml::parse_forest(text, &tokens).into_iter();
    let root = match items.next() {
        Some(TopItem::Element(root)) => root,
        // Text before any tag: the official reader would take it as the root tag. A stray end
        // tag likewise. Treat the next item as the op.
        Some(TopItem::Text(_) | TopItem::StrayEnd(_)) => {
            return op_from_top(items.next());
        }
        None => return Err(RequestError::MissingRoot),
    };
    if root.self_closing {
        return op_from_top(items.next());
    }
    // The op is the first thing inside the root: an element, or text before it.
    let first_text = root.text.trim();
    let first_child_pos = root.raw.find('<');
    let text_comes_first =
        !first_text.is_empty() && first_child_pos.is_none_or(|p| !root.raw[..p].trim().is_empty());
    if text_comes_first {
        let word = root.raw[..first_child_pos.unwrap_or(root.raw.len())].trim();
        return Ok(ParsedDocument {
            op: OpName {
                written: xml::unescape(word).into_owned(),
            },
            element: None,
        });
    }
    match root.children.into_iter().next() {
        Some(element) => Ok(ParsedDocument {
            op: OpName {
                written: if element.self_closing {
                    format!("{}/", element.name)
                } else {
                    element.name.to_owned()
                },
            },
            element: Some(element),
        }),
        None => Err(RequestError::MissingRequest),
    }
}

fn op_from_top(item: Option<TopItem<'_>>) -> Result<ParsedDocument<'_>, RequestError> {
    match item {
        Some(TopItem::Element(element)) => Ok(ParsedDocument {
            op: OpName {
                written: if element.self_closing {
                    format!("{}/", element.name)
                } else {
                    element.name.to_owned()
                },
            },
            element: Some(element),
        }),
        Some(TopItem::Text(t)) => Ok(ParsedDocument {
            op: OpName {
                written: t.to_owned(),
            },
            element: None,
        }),
        Some(TopItem::StrayEnd(name)) => Ok(ParsedDocument {
            op: OpName {
                written: format!("/{name}"),
            },
            element: None,
        }),
        None => Err(RequestError::MissingRequest),
    }
}

/// Parses a whole request document into a typed request.
pub fn parse_request(text: &str) -> Result<Request, RequestError> {
    parse_document(text)?.into_request()
}

fn text(e: &Element<'_>, name: &str) -> String {
    e.child_text(name).unwrap_or_default().to_owned()
}

fn opt_text(e: &Element<'_>, name: &str) -> Option<String> {
    e.child_text(name).map(str::to_owned)
}

fn int(e: &Element<'_>, name: &str) -> i64 {
    e.child_text(name)
        .and_then(|t| {
            t.parse::<i64>()
                .ok()
                .or_else(|| t.parse::<f64>().ok().map(|f| f as i64))
        })
        .unwrap_or(0)
}

fn opt_int(e: &Element<'_>, name: &str) -> Option<i64> {
    e.child_text(name).and_then(|t| t.parse().ok())
}

fn float(e: &Element<'_>, name: &str) -> f64 {
    e.child_text(name)
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|f| f.is_finite())
        .unwrap_or(0.0)
}

fn mode(e: &Element<'_>) -> Result<(RunMode, f64), RequestError> {
    // The last mode tag wins, as in the official loop.
    let mode = e
        .children
        .iter()
        .filter_map(|c| match c.name {
            "always" => Some(RunMode::Always),
            "auto" => Some(RunMode::Auto),
            "never" => Some(RunMode::Never),
            "restore" => Some(RunMode::Restore),
            _ => None,
        })
        .next_back()
        .ok_or(RequestError::MissingMode)?;
    Ok((mode, float(e, "duration")))
}

fn account_in(e: &Element<'_>) -> AccountIn {
    AccountIn {
        url: text(e, "url"),
        email_addr: text(e, "email_addr"),
        passwd_hash: text(e, "passwd_hash"),
        user_name: text(e, "user_name"),
        team_name: text(e, "team_name"),
        ldap_auth: e.flag("ldap_auth"),
        server_assigned_cookie: e.flag("server_assigned_cookie"),
        server_cookie: text(e, "server_cookie"),
        consented_to_terms: e.flag("consented_to_terms"),
    }
}

/// `None` when the op is unknown.
fn request_from_element(op: &str, e: &Element<'_>) -> Option<Result<Request, RequestError>> {
    use Request as R;
    let result_op = |op| R::ResultOp {
        op,
        project_url: text(e, "project_url"),
        name: text(e, "name"),
    };
    let file_op = |op| R::FileTransferOp {
        op,
        project_url: text(e, "project_url"),
        filename: text(e, "filename"),
    };
    let project_op = |op| R::ProjectOp {
        op,
        project_url: text(e, "project_url"),
    };
    let raw = || e.raw.trim().to_owned();
    let request = match op {
        "exchange_versions" => R::ExchangeVersions {
            major: int(e, "major") as i32,
            minor: int(e, "minor") as i32,
            release: int(e, "release") as i32,
            name: opt_text(e, "name"),
        },
        "get_all_projects_list" => R::GetAllProjectsList,
        "get_cc_status" => R::GetCcStatus,
        "get_disk_usage" => R::GetDiskUsage,
        "get_daily_xfer_history" => R::GetDailyXferHistory,
        "get_file_transfers" => R::GetFileTransfers,
        "get_host_info" => R::GetHostInfo,
        "get_messages" => R::GetMessages {
            seqno: int(e, "seqno"),
            translatable: e.flag("translatable"),
        },
        "get_message_count" => R::GetMessageCount,
        "get_newer_version" => R::GetNewerVersion,
        "get_notices_public" => R::GetNoticesPublic {
            seqno: int(e, "seqno"),
        },
        "get_old_results" => R::GetOldResults,
        "ferrite_explain" => R::FerriteExplain,
        "get_project_status" => R::GetProjectStatus,
        "get_results" => R::GetResults {
            active_only: e.flag("active_only"),
        },
        "get_screensaver_tasks" => R::GetScreensaverTasks,
        "get_simple_gui_info" => R::GetSimpleGuiInfo,
        "get_state" => R::GetState,
        "get_statistics" => R::GetStatistics,
        "run_graphics_app" => R::RunGraphicsApp {
            slot: opt_int(e, "slot"),
            operation: ["run", "runfullscreen", "stop", "test"]
                .into_iter()
                .find(|o| e.flag(o))
                .map(str::to_owned),
            graphics_pid: opt_int(e, "graphics_pid"),
        },
        "abort_result" => result_op(ResultAction::Abort),
        "suspend_result" => result_op(ResultAction::Suspend),
        "resume_result" => result_op(ResultAction::Resume),
        "abort_file_transfer" => file_op(FileTransferAction::Abort),
        "retry_file_transfer" => file_op(FileTransferAction::Retry),
        "project_reset" => project_op(ProjectAction::Reset),
        "project_detach" => project_op(ProjectAction::Detach),
        "project_update" => project_op(ProjectAction::Update),
        "project_suspend" => project_op(ProjectAction::Suspend),
        "project_resume" => project_op(ProjectAction::Resume),
        "project_nomorework" => project_op(ProjectAction::NoMoreWork),
        "project_allowmorework" => project_op(ProjectAction::AllowMoreWork),
        "project_detach_when_done" => project_op(ProjectAction::DetachWhenDone),
        "project_dont_detach_when_done" => project_op(ProjectAction::DontDetachWhenDone),
        "set_run_mode" | "set_gpu_mode" | "set_network_mode" => {
            let (mode, duration) = match mode(e) {
                Ok(m) => m,
                Err(err) => return Some(Err(err)),
            };
            match op {
                "set_run_mode" => R::SetRunMode {
                    mode,
                    duration,
                    at_checkpoint: e.flag("ferrite_at_checkpoint"),
                },
                "set_gpu_mode" => R::SetGpuMode { mode, duration },
                _ => R::SetNetworkMode { mode, duration },
            }
        }
        "network_available" => R::NetworkAvailable,
        "quit" => R::Quit,
        "read_cc_config" => R::ReadCcConfig,
        "read_global_prefs_override" => R::ReadGlobalPrefsOverride,
        "reset_host_info" => R::ResetHostInfo,
        "run_benchmarks" => R::RunBenchmarks,
        "set_host_info" => R::SetHostInfo {
            host_info: e.child("host_info").map(|h| HostInfoUpdate {
                product_name: opt_text(h, "product_name"),
                os_name: opt_text(h, "os_name"),
                os_version: opt_text(h, "os_version"),
                domain_name: opt_text(h, "domain_name"),
            }),
        },
        "set_language" => match e.child_text("language") {
            Some(language) => R::SetLanguage {
                language: language.to_owned(),
            },
            None => return Some(Err(RequestError::MissingLanguage)),
        },
        "get_proxy_settings" => R::GetProxySettings,
        "set_proxy_settings" => R::SetProxySettings {
            raw: e
                .child("proxy_info")
                .map_or_else(raw, |p| p.raw.trim().to_owned()),
        },
        "get_notices" => R::GetNotices {
            seqno: int(e, "seqno"),
        },
        "acct_mgr_info" => R::AcctMgrInfo,
        "get_cc_config" => R::GetCcConfig,
        "set_cc_config" => R::SetCcConfig { raw: raw() },
        "get_global_prefs_file" => R::GetGlobalPrefsFile,
        "get_global_prefs_override" => R::GetGlobalPrefsOverride,
        "get_global_prefs_working" => R::GetGlobalPrefsWorking,
        "set_global_prefs_override" => R::SetGlobalPrefsOverride { raw: raw() },
        "get_app_config" => R::GetAppConfig {
            url: text(e, "url"),
        },
        "set_app_config" => R::SetAppConfig {
            url: text(e, "url"),
            app_config: e
                .child("app_config")
                .map(|a| format!("<app_config>{}</app_config>", a.raw)),
        },
        "get_project_init_status" => R::GetProjectInitStatus,
        "get_project_config" => match e.child_text("url").filter(|u| !u.is_empty()) {
            Some(url) => R::GetProjectConfig {
                url: url.to_owned(),
            },
            None => return Some(Err(RequestError::MissingUrl)),
        },
        "get_project_config_poll" => R::GetProjectConfigPoll,
        "lookup_account" => {
            let a = account_in(e);
            if (a.url.is_empty() || a.email_addr.is_empty() || a.passwd_hash.is_empty())
                && !a.server_assigned_cookie
            {
                return Some(Err(RequestError::MissingAccountFields));
            }
            R::LookupAccount(a)
        }
        "lookup_account_poll" => R::LookupAccountPoll,
        "create_account" => R::CreateAccount(account_in(e)),
        "create_account_poll" => R::CreateAccountPoll,
        "project_attach" => R::ProjectAttach {
            project_url: text(e, "project_url"),
            authenticator: text(e, "authenticator"),
            project_name: text(e, "project_name"),
            email_addr: text(e, "email_addr"),
            use_config_file: e.flag("use_config_file"),
        },
        "project_attach_poll" => R::ProjectAttachPoll,
        "acct_mgr_rpc" => R::AcctMgrRpc {
            url: opt_text(e, "url"),
            name: opt_text(e, "name"),
            password: opt_text(e, "password"),
            use_config_file: e.flag("use_config_file"),
        },
        "acct_mgr_rpc_poll" => R::AcctMgrRpcPoll,
        _ => return None,
    };
    Some(Ok(request))
}

impl Request {
    /// The op's tag name.
    pub fn op_name(&self) -> &'static str {
        use Request as R;
        match self {
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
            R::GetOldResults => "get_old_results",
            R::GetProjectStatus => "get_project_status",
            R::GetResults { .. } => "get_results",
            R::GetScreensaverTasks => "get_screensaver_tasks",
            R::GetSimpleGuiInfo => "get_simple_gui_info",
            R::GetState => "get_state",
            R::GetStatistics => "get_statistics",
            R::FerriteExplain => "ferrite_explain",
            R::RunGraphicsApp { .. } => "run_graphics_app",
            R::ResultOp { op, .. } => match op {
                ResultAction::Abort => "abort_result",
                ResultAction::Suspend => "suspend_result",
                ResultAction::Resume => "resume_result",
            },
            R::FileTransferOp { op, .. } => match op {
                FileTransferAction::Abort => "abort_file_transfer",
                FileTransferAction::Retry => "retry_file_transfer",
            },
            R::ProjectOp { op, .. } => match op {
                ProjectAction::Reset => "project_reset",
                ProjectAction::Detach => "project_detach",
                ProjectAction::Update => "project_update",
                ProjectAction::Suspend => "project_suspend",
                ProjectAction::Resume => "project_resume",
                ProjectAction::NoMoreWork => "project_nomorework",
                ProjectAction::AllowMoreWork => "project_allowmorework",
                ProjectAction::DetachWhenDone => "project_detach_when_done",
                ProjectAction::DontDetachWhenDone => "project_dont_detach_when_done",
            },
            R::SetRunMode { .. } => "set_run_mode",
            R::SetGpuMode { .. } => "set_gpu_mode",
            R::SetNetworkMode { .. } => "set_network_mode",
            R::NetworkAvailable => "network_available",
            R::Quit => "quit",
            R::ReadCcConfig => "read_cc_config",
            R::ReadGlobalPrefsOverride => "read_global_prefs_override",
            R::ResetHostInfo => "reset_host_info",
            R::RunBenchmarks => "run_benchmarks",
            R::SetHostInfo { .. } => "set_host_info",
            R::SetLanguage { .. } => "set_language",
            R::GetProxySettings => "get_proxy_settings",
            R::SetProxySettings { .. } => "set_proxy_settings",
            R::GetNotices { .. } => "get_notices",
            R::AcctMgrInfo => "acct_mgr_info",
            R::GetCcConfig => "get_cc_config",
            R::SetCcConfig { .. } => "set_cc_config",
            R::GetGlobalPrefsFile => "get_global_prefs_file",
            R::GetGlobalPrefsOverride => "get_global_prefs_override",
            R::GetGlobalPrefsWorking => "get_global_prefs_working",
            R::SetGlobalPrefsOverride { .. } => "set_global_prefs_override",
            R::GetAppConfig { .. } => "get_app_config",
            R::SetAppConfig { .. } => "set_app_config",
            R::GetProjectInitStatus => "get_project_init_status",
            R::GetProjectConfig { .. } => "get_project_config",
            R::GetProjectConfigPoll => "get_project_config_poll",
            R::LookupAccount(_) => "lookup_account",
            R::LookupAccountPoll => "lookup_account_poll",
            R::CreateAccount(_) => "create_account",
            R::CreateAccountPoll => "create_account_poll",
            R::ProjectAttach { .. } => "project_attach",
            R::ProjectAttachPoll => "project_attach_poll",
            R::AcctMgrRpc { .. } => "acct_mgr_rpc",
            R::AcctMgrRpcPoll => "acct_mgr_rpc_poll",
        }
    }

    /// The op's entry in the operation table.
    pub fn info(&self) -> &'static crate::ops::OpInfo {
        match crate::ops::lookup(self.op_name()) {
            Some(info) => info,
            None => unreachable!("every Request variant is in the op table"),
        }
    }

    /// Writes the op element (`<op>…</op>` or `<op/>`), as a GUI would send it inside
    /// `<boinc_gui_rpc_request>`.
    pub fn to_xml(&self) -> String {
        use std::fmt::Write as _;
        use Request as R;
        let name = self.op_name();
        let mut inner = String::new();
        fn tag(out: &mut String, t: &str, v: &str) {
            let _ = writeln!(out, "  <{t}>{}</{t}>", xml::escape(v));
        }
        match self {
            R::ExchangeVersions {
                major,
                minor,
                release,
                name: gui,
            } => {
                tag(&mut inner, "major", &major.to_string());
                tag(&mut inner, "minor", &minor.to_string());
                tag(&mut inner, "release", &release.to_string());
                if let Some(gui) = gui {
                    tag(&mut inner, "name", gui);
                }
            }
            R::GetMessages {
                seqno,
                translatable,
            } => {
                tag(&mut inner, "seqno", &seqno.to_string());
                if *translatable {
                    inner.push_str("  <translatable/>\n");
                }
            }
            R::GetNoticesPublic { seqno } | R::GetNotices { seqno } => {
                tag(&mut inner, "seqno", &seqno.to_string());
            }
            R::GetResults { active_only } => {
                tag(
                    &mut inner,
                    "active_only",
                    if *active_only { "1" } else { "0" },
                );
            }
            R::RunGraphicsApp {
                slot,
                operation,
                graphics_pid,
            } => {
                if let Some(slot) = slot {
                    tag(&mut inner, "slot", &slot.to_string());
                }
                if let Some(op) = operation {
                    let _ = writeln!(inner, "  <{}/>", xml::escape(op));
                }
                if let Some(pid) = graphics_pid {
                    tag(&mut inner, "graphics_pid", &pid.to_string());
                }
            }
            R::ResultOp {
                project_url,
                name: result,
                ..
            } => {
                tag(&mut inner, "project_url", project_url);
                tag(&mut inner, "name", result);
            }
            R::FileTransferOp {
                project_url,
                filename,
                ..
            } => {
                tag(&mut inner, "project_url", project_url);
                tag(&mut inner, "filename", filename);
            }
            R::ProjectOp { project_url, .. } => tag(&mut inner, "project_url", project_url),
            R::SetRunMode {
                mode,
                duration,
                at_checkpoint,
            } => {
                let _ = writeln!(inner, "  <{}/>", mode.tag());
                tag(&mut inner, "duration", &format!("{duration:.6}"));
                if *at_checkpoint {
                    inner.push_str("  <ferrite_at_checkpoint/>\n");
                }
            }
            R::SetGpuMode { mode, duration } | R::SetNetworkMode { mode, duration } => {
                let _ = writeln!(inner, "  <{}/>", mode.tag());
                tag(&mut inner, "duration", &format!("{duration:.6}"));
            }
            R::SetHostInfo { host_info: Some(h) } => {
                let mut body = String::new();
                for (t, v) in [
                    ("product_name", &h.product_name),
                    ("os_name", &h.os_name),
                    ("os_version", &h.os_version),
                    ("domain_name", &h.domain_name),
                ] {
                    if let Some(v) = v {
                        let _ = writeln!(body, "    <{t}>{}</{t}>", xml::escape(v));
                    }
                }
                let _ = write!(inner, "  <host_info>\n{body}  </host_info>\n");
            }
            R::SetLanguage { language } => tag(&mut inner, "language", language),
            R::SetProxySettings { raw } => {
                let _ = writeln!(inner, "<proxy_info>\n{raw}\n</proxy_info>");
            }
            R::SetCcConfig { raw } | R::SetGlobalPrefsOverride { raw } => {
                let _ = writeln!(inner, "{raw}");
            }
            R::GetAppConfig { url } | R::GetProjectConfig { url } => tag(&mut inner, "url", url),
            R::SetAppConfig { url, app_config } => {
                tag(&mut inner, "url", url);
                if let Some(doc) = app_config {
                    let _ = writeln!(inner, "{doc}");
                }
            }
            R::LookupAccount(a) | R::CreateAccount(a) => {
                tag(&mut inner, "url", &a.url);
                tag(&mut inner, "email_addr", &a.email_addr);
                tag(&mut inner, "passwd_hash", &a.passwd_hash);
                if !a.user_name.is_empty() {
                    tag(&mut inner, "user_name", &a.user_name);
                }
                if !a.team_name.is_empty() {
                    tag(&mut inner, "team_name", &a.team_name);
                }
                if a.ldap_auth {
                    tag(&mut inner, "ldap_auth", "1");
                }
                if a.server_assigned_cookie {
                    tag(&mut inner, "server_assigned_cookie", "1");
                    tag(&mut inner, "server_cookie", &a.server_cookie);
                }
                if a.consented_to_terms {
                    inner.push_str("  <consented_to_terms/>\n");
                }
            }
            R::ProjectAttach {
                project_url,
                authenticator,
                project_name,
                email_addr,
                use_config_file,
            } => {
                if *use_config_file {
                    inner.push_str("  <use_config_file/>\n");
                } else {
                    tag(&mut inner, "project_url", project_url);
                    tag(&mut inner, "authenticator", authenticator);
                    tag(&mut inner, "project_name", project_name);
                    if !email_addr.is_empty() {
                        tag(&mut inner, "email_addr", email_addr);
                    }
                }
            }
            R::AcctMgrRpc {
                url,
                name: login,
                password,
                use_config_file,
            } => {
                if *use_config_file {
                    inner.push_str("  <use_config_file/>\n");
                }
                for (t, v) in [("url", url), ("name", login), ("password", password)] {
                    if let Some(v) = v {
                        tag(&mut inner, t, v);
                    }
                }
            }
            _ => {}
        }
        if inner.is_empty() {
            format!("<{name}/>\n")
        } else {
            format!("<{name}>\n{inner}</{name}>\n")
        }
    }

    /// The whole request document a GUI sends (without the 0x03 terminator).
    pub fn to_document(&self) -> String {
        format!(
            "<boinc_gui_rpc_request>\n{}</boinc_gui_rpc_request>\n",
            self.to_xml()
        )
    }
}

#[cfg(test)]
mod tests;
