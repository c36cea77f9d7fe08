//! `ferrite-testproject`: a loopback BOINC project server. The first line on stdout is
//! `ferrite-testproject listening on http://127.0.0.1:PORT/`.

use std::io::Write as _;

use clap::Parser as _;
use ferrite_testproject::{Args, Bound};

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
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
