//! Sorting GUI RPC requests: a [`Query`] only reads, and is answered from a shared borrow of
//! the daemon (`Daemon::query` in `status.rs`); a [`Command`] changes something, and is
//! applied by the part of the daemon that owns what it changes (`Daemon::apply` in
//! `daemon/rpc/commands.rs`), after which the main loop decides again. [`route`] is the one place that
//! says which is which: its match names every request, so a new one cannot be left out.

use ferrite_gui_rpc::{
    AccountIn, FileTransferAction, HostInfoUpdate, ProjectAction, Request, ResultAction,
    RunMode as RpcRunMode,
};

use crate::config::{CC_CONFIG, GLOBAL_PREFS_OVERRIDE};
use crate::run_modes::ModeKind;

/// A request sorted by what it does to the daemon.
#[derive(Debug)]
pub(crate) enum Routed {
    /// It only reads.
    Query(Query),
    /// It changes something.
    Command(Command),
}

/// A request that only reads the daemon (caches kept for replies aside); only [`route`]
/// makes one.
#[derive(Debug)]
pub(crate) struct Query(Request);

impl Query {
    /// The request.
    pub(crate) fn request(&self) -> &Request {
        &self.0
    }
}

/// A change asked for through GUI RPC, with the part of the daemon that owns it.
#[derive(Debug)]
pub(crate) enum Command {
    /// `set_run_mode`, `set_gpu_mode`, `set_network_mode`: the permanent mode in the state,
    /// a temporary one in `RpcState`; `at_checkpoint`: Ferrite's `<ferrite_at_checkpoint/>`
    /// (`set_run_mode` only).
    SetMode {
        kind: ModeKind,
        mode: RpcRunMode,
        duration: f64,
        at_checkpoint: bool,
    },
    /// `suspend_result`, `resume_result`, `abort_result`: a task (the task table aborts).
    Task {
        op: ResultAction,
        project_url: String,
        name: String,
    },
    /// `project_*` operations (the project loop: updates, detaching, resets).
    Project {
        op: ProjectAction,
        project_url: String,
    },
    /// `retry_file_transfer`, `abort_file_transfer` (the transfers).
    Transfer {
        op: FileTransferAction,
        project_url: String,
        filename: String,
    },
    /// `network_available`: every project and transfer backoff ends now.
    NetworkAvailable,
    /// `project_attach` (the project loop's first RPC follows).
    Attach {
        project_url: String,
        authenticator: String,
        project_name: String,
        use_config_file: bool,
    },
    /// `lookup_account`: a web RPC of the attach wizard (the project loop).
    LookupAccount(AccountIn),
    /// `create_account`: likewise.
    CreateAccount(AccountIn),
    /// `get_project_config`: likewise.
    GetProjectConfig { url: String },
    /// `acct_mgr_rpc`: join, sync with or leave an account manager.
    AcctMgrSync {
        url: Option<String>,
        name: Option<String>,
        password: Option<String>,
        use_config_file: bool,
    },
    /// `read_cc_config`, `read_global_prefs_override`: the configuration read again.
    Reload,
    /// `set_cc_config`, `set_global_prefs_override`: a configuration file written (deleted
    /// when empty), then read.
    WriteConfig { file: &'static str, raw: String },
    /// `set_app_config`: a project's `app_config.xml` written.
    SetAppConfig {
        url: String,
        app_config: Option<String>,
    },
    /// `run_benchmarks` (host watching).
    RunBenchmarks,
    /// `reset_host_info`: the host detected again (host watching).
    ResetHostInfo,
    /// `set_host_info`: the names the host is shown with.
    SetHostInfo(Option<HostInfoUpdate>),
    /// `get_disk_usage`: each project's usage measured and kept in the state.
    MeasureDiskUsage,
    /// `set_language`: kept in the state file.
    SetLanguage(String),
    /// `set_proxy_settings`: kept in the state file; the HTTP clients are made again.
    SetProxy(String),
    /// `quit`: the daemon stops after the reply.
    Quit,
}

/// Sorts `request`.
pub(crate) fn route(request: Request) -> Routed {
    use Command as C;
    use Request as R;
    let command = match request {
        q @ (R::ExchangeVersions { .. }
        | R::GetAllProjectsList
        | R::GetCcStatus
        | R::GetDailyXferHistory
        | R::GetFileTransfers
        | R::GetHostInfo
        | R::GetMessages { .. }
        | R::GetMessageCount
        | R::GetNewerVersion
        | R::GetNoticesPublic { .. }
        | R::GetNotices { .. }
        | R::GetOldResults
        | R::GetProjectStatus
        | R::GetResults { .. }
        | R::GetScreensaverTasks
        | R::GetSimpleGuiInfo
        | R::GetState
        | R::GetStatistics
        | R::FerriteExplain
        | R::RunGraphicsApp { .. }
        | R::GetProxySettings
        | R::AcctMgrInfo
        | R::AcctMgrRpcPoll
        | R::GetCcConfig
        | R::GetGlobalPrefsFile
        | R::GetGlobalPrefsOverride
        | R::GetGlobalPrefsWorking
        | R::GetAppConfig { .. }
        | R::GetProjectInitStatus
        | R::GetProjectConfigPoll
        | R::LookupAccountPoll
        | R::CreateAccountPoll
        | R::ProjectAttachPoll) => return Routed::Query(Query(q)),
        R::SetRunMode {
            mode,
            duration,
            at_checkpoint,
        } => C::SetMode {
            kind: ModeKind::Cpu,
            mode,
            duration,
            at_checkpoint,
        },
        R::SetGpuMode { mode, duration } => C::SetMode {
            kind: ModeKind::Gpu,
            mode,
            duration,
            at_checkpoint: false,
        },
        R::SetNetworkMode { mode, duration } => C::SetMode {
            kind: ModeKind::Network,
            mode,
            duration,
            at_checkpoint: false,
        },
        R::ResultOp {
            op,
            project_url,
            name,
        } => C::Task {
            op,
            project_url,
            name,
        },
        R::ProjectOp { op, project_url } => C::Project { op, project_url },
        R::FileTransferOp {
            op,
            project_url,
            filename,
        } => C::Transfer {
            op,
            project_url,
            filename,
        },
        R::NetworkAvailable => C::NetworkAvailable,
        R::ProjectAttach {
            project_url,
            authenticator,
            project_name,
            use_config_file,
            email_addr: _,
        } => C::Attach {
            project_url,
            authenticator,
            project_name,
            use_config_file,
        },
        R::LookupAccount(a) => C::LookupAccount(a),
        R::CreateAccount(a) => C::CreateAccount(a),
        R::GetProjectConfig { url } => C::GetProjectConfig { url },
        R::AcctMgrRpc {
            url,
            name,
            password,
            use_config_file,
        } => C::AcctMgrSync {
            url,
            name,
            password,
            use_config_file,
        },
        R::ReadCcConfig | R::ReadGlobalPrefsOverride => C::Reload,
        R::SetCcConfig { raw } => C::WriteConfig {
            file: CC_CONFIG,
            raw,
        },
        R::SetGlobalPrefsOverride { raw } => C::WriteConfig {
            file: GLOBAL_PREFS_OVERRIDE,
            raw,
        },
        R::SetAppConfig { url, app_config } => C::SetAppConfig { url, app_config },
        R::RunBenchmarks => C::RunBenchmarks,
        R::ResetHostInfo => C::ResetHostInfo,
        R::SetHostInfo { host_info } => C::SetHostInfo(host_info),
        R::GetDiskUsage => C::MeasureDiskUsage,
        R::SetLanguage { language } => C::SetLanguage(language),
        R::SetProxySettings { raw } => C::SetProxy(raw),
        R::Quit => C::Quit,
    };
    Routed::Command(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_query(r: Request) -> bool {
        matches!(route(r), Routed::Query(_))
    }

    #[test]
    fn reads_are_queries_and_changes_are_commands() {
        // What the Manager and boinctui poll every second or two: a query never makes the
        // main loop run a pass or forget what replies keep.
        for r in [
            Request::GetState,
            Request::GetResults { active_only: true },
            Request::GetCcStatus,
            Request::GetFileTransfers,
            Request::GetMessages {
                seqno: 0,
                translatable: true,
            },
            Request::GetNotices { seqno: 0 },
            Request::GetProjectStatus,
            Request::GetSimpleGuiInfo,
            Request::AcctMgrInfo,
            Request::GetProxySettings,
            Request::ProjectAttachPoll,
        ] {
            assert!(is_query(r.clone()), "{r:?}");
        }
        for r in [
            Request::SetRunMode {
                mode: RpcRunMode::Never,
                duration: 0.0,
                at_checkpoint: false,
            },
            Request::ProjectOp {
                op: ProjectAction::Update,
                project_url: "http://p/".into(),
            },
            Request::ResultOp {
                op: ResultAction::Abort,
                project_url: "http://p/".into(),
                name: "r".into(),
            },
            Request::NetworkAvailable,
            Request::GetDiskUsage,
            Request::ReadCcConfig,
            Request::Quit,
        ] {
            assert!(!is_query(r.clone()), "{r:?}");
        }
    }

    #[test]
    fn commands_keep_what_the_request_said() {
        let Routed::Command(Command::SetMode {
            kind,
            mode,
            duration,
            at_checkpoint,
        }) = route(Request::SetNetworkMode {
            mode: RpcRunMode::Auto,
            duration: 60.0,
        })
        else {
            panic!("set_network_mode is a command");
        };
        assert_eq!(
            (kind, mode, duration, at_checkpoint),
            (ModeKind::Network, RpcRunMode::Auto, 60.0, false)
        );
        let Routed::Command(Command::SetMode {
            kind,
            at_checkpoint,
            ..
        }) = route(Request::SetRunMode {
            mode: RpcRunMode::Never,
            duration: 0.0,
            at_checkpoint: true,
        })
        else {
            panic!("set_run_mode is a command");
        };
        assert_eq!((kind, at_checkpoint), (ModeKind::Cpu, true));
        let Routed::Command(Command::WriteConfig { file, raw }) =
            route(Request::SetGlobalPrefsOverride { raw: "<x/>".into() })
        else {
            panic!("set_global_prefs_override is a command");
        };
        assert_eq!((file, raw.as_str()), (GLOBAL_PREFS_OVERRIDE, "<x/>"));
    }
}
