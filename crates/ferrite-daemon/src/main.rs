//! `ferrited`: the Ferrite client daemon.

use std::process::ExitCode;

use ferrite_daemon::cli::Options;
use ferrite_daemon::sdnotify::Notifier;
use ferrite_daemon::startup::{Progress, Started, StopFlag};
use ferrite_daemon::{logging, Daemon, EarlySignals};

fn main() -> ExitCode {
    ferrite_daemon::memory::configure_allocator();
    // GPU detection child: the daemon runs its own binary so that drivers load only here.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(ferrite_hostinfo::gpu_child::GPU_SCAN_ARG) {
        print!("{}", ferrite_hostinfo::gpu_child::child_main(&args[1..]));
        return ExitCode::SUCCESS;
    }
    let opts = Options::from_env();
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
    // The log files are opened before detaching, so a failure is said on the terminal.
    let files = if opts.log_to_files() {
        let dir = opts.data_dir();
        match logging::LogFiles::open(&dir) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!(
                    "ferrited: cannot open {} in {}: {e}",
                    logging::STDOUT_FILE,
                    dir.display()
                );
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    if opts.daemon {
        // Detach before any thread exists: fork is only safe in a single-threaded process.
        if let Err(e) = nix::unistd::daemon(true, false) {
            eprintln!("ferrited: cannot detach from the terminal: {e}");
            return ExitCode::FAILURE;
        }
    }
    let log = logging::init_with(files);
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
        // Listened for before the start-up, so a stop asked for during it saves and exits:
        // the flag between the start-up's phases, the streams once the main loop runs.
        let early = EarlySignals::listen()?;
        let stop = StopFlag::on_signals()?;
        let mut progress = Progress::new(Notifier::from_env());
        match Daemon::start_with(opts, log, &stop, &mut progress)? {
            Started::Ready(daemon) => daemon.run_after(Some(early)).await,
            Started::Stopped => Ok(()),
        }
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
