//! A loopback BOINC project server for Ferrite's end-to-end tests and demo.
//!
//! It serves a master page advertising its scheduler both ways BOINC does, the attach web
//! RPCs, a scheduler that honours per-resource work requests and sends signed app versions,
//! a download area streamed from disk (with Range), BOINC's upload-handler protocol,
//! `/status` counters as JSON, and faults injected on demand. It binds to 127.0.0.1 only.
//!
//! Use [`Server::start`] in-process, or run the `ferrite-testproject` binary (same options,
//! see [`config::Args`]).

pub mod acct_mgr;
pub mod config;
pub mod fault;
mod http;
pub mod project;
pub mod state;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;

pub use config::Args;
pub use project::Project;

/// A listening socket and the project behind it, not yet serving.
#[derive(Debug)]
pub struct Bound {
    /// The socket (127.0.0.1 only).
    listener: std::net::TcpListener,
    /// The project.
    project: Arc<Project>,
    /// `http://127.0.0.1:PORT/`.
    url: String,
}

impl Bound {
    /// Binds 127.0.0.1:`args.port` and sets the project up in `args.data` (a directory under
    /// the system temp dir when absent).
    pub fn new(args: Args) -> anyhow::Result<Bound> {
        let listener =
            std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, args.port)))
                .with_context(|| format!("binding 127.0.0.1:{}", args.port))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let url = format!("http://127.0.0.1:{port}/");
        let data = args.data.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("ferrite-testproject-{}-{port}", std::process::id()))
        });
        let project = Arc::new(Project::new(args, data, url.clone())?);
        Ok(Bound {
            listener,
            project,
            url,
        })
    }

    /// `http://127.0.0.1:PORT/` (the master URL).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Serves until `shutdown` completes (call inside a tokio runtime).
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> anyhow::Result<()> {
        let listener = tokio::net::TcpListener::from_std(self.listener)?;
        http::serve(listener, self.project, shutdown).await;
        Ok(())
    }
}

/// A server running on its own thread; stopped when dropped.
#[derive(Debug)]
pub struct Server {
    /// Master URL.
    url: String,
    /// The project (for direct inspection in tests).
    project: Arc<Project>,
    /// Tells the thread to stop.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// The serving thread.
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Binds and starts serving on a new thread.
    pub fn start(args: Args) -> anyhow::Result<Server> {
        let bound = Bound::new(args)?;
        let url = bound.url.clone();
        let project = bound.project.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("testproject".into())
            .spawn(move || {
                let r = rt.block_on(bound.serve(async {
                    let _ = rx.await;
                }));
                if let Err(e) = r {
                    tracing::error!("test project: {e:#}");
                }
                rt.shutdown_background();
            })?;
        Ok(Server {
            url,
            project,
            stop: Some(tx),
            thread: Some(thread),
        })
    }

    /// Master URL, `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The project.
    pub fn project(&self) -> &Project {
        &self.project
    }

    /// Where results are stored: `DATA/results`.
    pub fn results_dir(&self) -> PathBuf {
        self.project.data_dir().join("results")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
