//! BOINC's GUI RPC protocol, the control channel between GUIs (boinccmd, BOINC Manager,
//! boinctui, `ferrite`) and the daemon: framing, authentication, typed requests, reply helpers,
//! the server transport and a client. It uses no other Ferrite crate.
//!
//! The daemon starts a [`GuiRpcServer`] with a [`ServerConfig`] and an `mpsc` channel, then
//! answers each [`Call`] it receives with a reply [`Body`] (text, or pieces it keeps and shares
//! between replies):
//!
//! ```no_run
//! # async fn run(data_dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
//! use ferrite_gui_rpc::{auth, reply, GuiRpcServer, Request, ServerConfig};
//! use tokio_util::sync::CancellationToken;
//!
//! let (password, _source) = auth::load_or_create_password(data_dir)?;
//! let (tx, mut rx) = tokio::sync::mpsc::channel(64);
//! let shutdown = CancellationToken::new();
//! let server = GuiRpcServer::start(ServerConfig::new(password), tx, shutdown.clone()).await?;
//! while let Some(call) = rx.recv().await {
//!     let body = match call.request {
//!         Request::Quit => reply::SUCCESS.to_owned(),
//!         _ => reply::error("not implemented"),
//!     };
//!     let _ = call.reply.send(body.into());
//! }
//! shutdown.cancel();
//! server.wait().await;
//! # Ok(()) }
//! ```

pub mod access;
pub mod auth;
pub mod client;
mod evictions;
pub mod framing;
pub mod ops;
pub mod reply;
pub mod request;
pub mod server;
pub mod session;
mod xml;

pub use client::{ClientError, GuiRpcClient};
pub use reply::Body;
pub use request::{
    AccountIn, FileTransferAction, HostInfoUpdate, ProjectAction, Request, RequestError,
    ResultAction, RunMode,
};
pub use server::{
    Call, GuiRpcServer, PeerInfo, PeerTransport, ServerConfig, ServerError, TcpConfig, UnixConfig,
};
pub use session::ServerVersion;
pub use xml::{escape, unescape};
