//! `ferrite-testproject`: a loopback BOINC project server. The first line on stdout is
//! `ferrite-testproject listening on http://127.0.0.1:PORT/`.

use std::io::Write as _;

use clap::Parser as _;
use ferrite_testproject::{Args, Bound};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

fn main() -> anyhow::Result<()> {
    // RUST_LOG: a list of `level` and `target=level` directives; `info` by default.
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| v.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(tracing::Level::INFO));
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(filter)
        .init();
    let args = Args::parse();
    let bound = Bound::new(args)?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "ferrite-testproject listening on {}", bound.url())?;
        out.flush()?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(bound.serve(async {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }))?;
    rt.shutdown_background();
    Ok(())
}
