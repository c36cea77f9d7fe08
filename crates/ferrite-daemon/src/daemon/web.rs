//! Starting the HTTP server and sampling the daemon's own usage for it.

use crate::clock::now;
use crate::web::{self, WebServer};
use crate::Daemon;

impl Daemon {
    /// Starts the HTTP server when the options ask ([`web::start_for_loop`]); its metrics
    /// and usage history are then fed by the loop.
    pub(crate) async fn start_web(&mut self) -> Option<WebServer> {
        let started = web::start_for_loop(
            &self.opts,
            self.config.cc.options.ferrite_metrics_port,
            &self.dir,
            self.events.clone(),
        )
        .await?;
        self.metrics = Some(started.metrics);
        self.usage = Some(started.usage);
        self.refresh_metrics(now());
        Some(started.server)
    }

    /// Adds a sample of the daemon's own CPU and memory when one is due.
    pub(crate) fn sample_usage(&mut self, t: f64) {
        if let Some(usage) = &self.usage {
            usage.sample_if_due(t);
        }
    }
}
