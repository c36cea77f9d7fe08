//! What the main loop reacts to: everything else (signal listeners, GUI RPC connections,
//! the HTTP exchanges, transfers, the benchmarks) sends it an [`Event`].

use ferrite_hostinfo::BenchmarkResult;

use crate::{notices, projects, transfers};

/// What the main loop reacts to.
#[derive(Debug)]
pub enum Event {
    /// Stop: save the state, stop children, exit (SIGTERM, SIGINT, or a control request).
    Shutdown(&'static str),
    /// Re-read `cc_config.xml`, `global_prefs_override.xml` and every `app_config.xml` (SIGHUP).
    Reload,
    /// The CPU benchmarks finished (they run on a blocking thread).
    BenchmarksDone(BenchmarkResult),
    /// A GUI RPC request, to be answered from the state.
    GuiRpc(ferrite_gui_rpc::Call),
    /// A master fetch or scheduler RPC ended.
    Project(projects::OpDone),
    /// A file transfer attempt ended.
    Transfer(transfers::TransferDone),
    /// A web RPC of the attach wizard ended (reply text, or a BOINC error code).
    WebRpc(projects::WebRpcKind, Result<String, i32>),
    /// A news feed or project list fetch ended.
    Info(notices::InfoFetched),
    /// A child process ended (SIGCHLD): an app exited, so its CPU can be given to the next
    /// task now rather than at the next tick.
    ChildExited,
    /// An account-manager sync ended (reply text, or a BOINC error code and its text).
    AcctMgr(Result<String, (i32, String)>),
}
