//! Starting the HTTP server from the daemon's options, and what the main loop feeds it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;

use ferrite_gui_rpc::{auth, Call};
use tokio::sync::{mpsc, watch};
use tracing::{error, info};

use super::{Limits, Sources, UsageHistory, UsageSample, WebServer};
use crate::cli::Options;
use crate::event::Event;
use crate::metrics::ProcessStats;

/// Seconds between two samples of the daemon's own CPU and memory.
pub const USAGE_EVERY_SECS: f64 = 30.0;

/// Samples kept: one day.
pub const USAGE_SAMPLES: usize = 2880;

/// A started HTTP server and what the main loop feeds it.
#[derive(Debug)]
pub struct Started {
    /// The server.
    pub server: WebServer,
    /// Where the latest metrics text goes.
    pub metrics: watch::Sender<String>,
    /// The daemon's own usage over time, which the loop samples ([`UsageHistory::sample_if_due`]).
    pub usage: UsageHistory,
}

/// Starts the HTTP server when `--metrics_port` or `<ferrite_metrics_port>` (`config_port`)
/// asks, on `--metrics_bind` (127.0.0.1 by default), for data directory `dir`. The
/// dashboard's calls go to `events` as GUI RPC calls. Failing to start is logged, never
/// fatal.
pub async fn start_for_loop(
    opts: &Options,
    config_port: u16,
    dir: &Path,
    events: mpsc::Sender<Event>,
) -> Option<Started> {
    let port = if opts.metrics_port != 0 {
        opts.metrics_port
    } else {
        config_port
    };
    if port == 0 {
        return None;
    }
    let ip = opts.metrics_bind.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let addr = SocketAddr::new(ip, port);
    let secret = match &opts.metrics_token_file {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => match super::guard::secret_from_file_text(&text) {
                Some(s) => Some(s),
                None => {
                    error!("not serving metrics: {} is empty", path.display());
                    return None;
                }
            },
            Err(e) => {
                error!("not serving metrics: cannot read {}: {e}", path.display());
                return None;
            }
        },
        None => match auth::load_or_create_password(dir) {
            Ok((auth::Password::Required(p), _)) => Some(p),
            Ok((auth::Password::Disabled, _)) => None,
            Err(e) => {
                error!("not serving metrics: {e}");
                return None;
            }
        },
    };
    let (tx, rx) = watch::channel(String::new());
    let (calls_tx, mut calls_rx) = mpsc::channel::<Call>(16);
    let usage = UsageHistory::new(USAGE_SAMPLES);
    let sources = Sources {
        metrics: rx,
        calls: Some(calls_tx),
        data_dir: Some(dir.to_path_buf()),
        usage: Some(usage.clone()),
    };
    match WebServer::start(addr, secret, sources, Limits::default()).await {
        Ok(server) => {
            info!(
                "metrics on http://{0}/metrics, dashboard on http://{0}/",
                server.local_addr()
            );
            // The dashboard's calls join the GUI RPC calls in the main loop. The
            // forwarder ends when the server (the only sender) is gone.
            tokio::spawn(async move {
                while let Some(call) = calls_rx.recv().await {
                    if events.send(Event::GuiRpc(call)).await.is_err() {
                        break;
                    }
                }
            });
            Some(Started {
                server,
                metrics: tx,
                usage,
            })
        }
        Err(e) => {
            error!("cannot serve metrics on {addr}: {e}");
            None
        }
    }
}

impl UsageHistory {
    /// Adds a sample of the daemon's own CPU and memory when one is due at `t`.
    pub fn sample_if_due(&self, t: f64) {
        if self
            .last_time()
            .is_some_and(|last| t - last < USAGE_EVERY_SECS && t >= last)
        {
            return;
        }
        if let Some(p) = ProcessStats::read() {
            self.push(UsageSample {
                time: t,
                cpu_seconds: p.cpu_seconds,
                resident_bytes: p.resident_bytes,
            });
        }
    }
}
