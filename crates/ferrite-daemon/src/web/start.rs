//! Starting the HTTP server from the daemon's options, and what the main loop feeds it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use ferrite_gui_rpc::{auth, Call};
use tokio::sync::mpsc;
use tracing::{error, info};

use super::{Limits, Sources, UsageHistory, UsageSample, WebServer};
use crate::clock::now;
use crate::event::Event;
use crate::metrics::ProcessStats;
use crate::Daemon;

/// Seconds between two samples of the daemon's own CPU and memory.
pub const USAGE_EVERY_SECS: f64 = 30.0;

/// Samples kept: one day.
pub const USAGE_SAMPLES: usize = 2880;

impl Daemon {
    /// Starts the HTTP server when `--metrics_port` or `<ferrite_metrics_port>` asks, on
    /// `--metrics_bind` (127.0.0.1 by default). Failing to start is logged, never fatal.
    pub(crate) async fn start_web(&mut self) -> Option<WebServer> {
        let port = if self.opts.metrics_port != 0 {
            self.opts.metrics_port
        } else {
            self.config.cc.options.ferrite_metrics_port
        };
        if port == 0 {
            return None;
        }
        let ip = self
            .opts
            .metrics_bind
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let addr = SocketAddr::new(ip, port);
        let secret = match &self.opts.metrics_token_file {
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
            None => match auth::load_or_create_password(&self.dir) {
                Ok((auth::Password::Required(p), _)) => Some(p),
                Ok((auth::Password::Disabled, _)) => None,
                Err(e) => {
                    error!("not serving metrics: {e}");
                    return None;
                }
            },
        };
        let (tx, rx) = tokio::sync::watch::channel(String::new());
        let (calls_tx, mut calls_rx) = mpsc::channel::<Call>(16);
        let usage = UsageHistory::new(USAGE_SAMPLES);
        let sources = Sources {
            metrics: rx,
            calls: Some(calls_tx),
            data_dir: Some(self.dir.clone()),
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
                let events = self.events.clone();
                tokio::spawn(async move {
                    while let Some(call) = calls_rx.recv().await {
                        if events.send(Event::GuiRpc(call)).await.is_err() {
                            break;
                        }
                    }
                });
                self.metrics = Some(tx);
                self.usage = Some(usage);
                self.refresh_metrics(now());
                Some(server)
            }
            Err(e) => {
                error!("cannot serve metrics on {addr}: {e}");
                None
            }
        }
    }

    /// Adds a sample of the daemon's own CPU and memory when one is due.
    pub(crate) fn sample_usage(&mut self, t: f64) {
        let Some(usage) = &self.usage else {
            return;
        };
        if usage
            .last_time()
            .is_some_and(|last| t - last < USAGE_EVERY_SECS && t >= last)
        {
            return;
        }
        if let Some(p) = ProcessStats::read() {
            usage.push(UsageSample {
                time: t,
                cpu_seconds: p.cpu_seconds,
                resident_bytes: p.resident_bytes,
            });
        }
    }
}
