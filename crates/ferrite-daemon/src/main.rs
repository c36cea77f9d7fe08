//! `ferrited`: the Ferrite client daemon.

use std::process::ExitCode;

use clap::Parser;
use ferrite_daemon::cli::Options;
use ferrite_daemon::{logging, Daemon};

fn main() -> ExitCode {
    let opts = Options::parse();
    if opts.detect_gpus {
        return match ferrite_daemon::detect_report(&opts) {
            Ok(report) => {
                print!("{report}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ferrited: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    if opts.daemon {
        // Detach before any thread exists: fork is only safe in a single-threaded process.
        if let Err(e) = nix::unistd::daemon(true, false) {
            eprintln!("ferrited: cannot detach from the terminal: {e}");
            return ExitCode::FAILURE;
        }
    }
    let log = logging::init();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ferrited: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let daemon = Daemon::start(opts, log)?;
        daemon.run().await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("ferrited: {e:#}");
            ExitCode::FAILURE
        }
    }
}
