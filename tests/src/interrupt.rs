//! What a test started outside its own process, stopped when the test binary is interrupted.
//!
//! A test binary killed by SIGINT or SIGTERM runs no destructor, so a real BOINC server
//! instance (MariaDB and Apache, which outlive the binary) would be left running. The first
//! [`on_interrupt`] installs handlers for both signals; on one, every cleanup still
//! registered runs (all at once, each on its own thread), then the binary exits with
//! 128 + the signal's number, as a shell reports a process killed by it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Mutex, Once};

type Cleanup = Box<dyn FnOnce() + Send>;

/// The cleanups registered and not yet dropped, by registration number.
static CLEANUPS: Mutex<BTreeMap<u64, Cleanup>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(0);
/// The pipe's write end the signal handler writes the signal's number to (-1: none).
static WAKE: AtomicI32 = AtomicI32::new(-1);

/// A cleanup that runs if the binary is interrupted while this lives; dropping it (once the
/// owner has cleaned up itself) forgets the cleanup.
#[derive(Debug)]
pub struct Registration(u64);

impl Drop for Registration {
    fn drop(&mut self) {
        let mut all = CLEANUPS.lock().unwrap_or_else(|e| e.into_inner());
        all.remove(&self.0);
    }
}

/// Runs `cleanup` if SIGINT or SIGTERM reaches this process while the registration lives.
pub fn on_interrupt(cleanup: impl FnOnce() + Send + 'static) -> Registration {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(install);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut all = CLEANUPS.lock().unwrap_or_else(|e| e.into_inner());
    all.insert(id, Box::new(cleanup));
    Registration(id)
}

extern "C" fn on_signal(signal: libc::c_int) {
    let byte = signal as u8;
    let fd = WAKE.load(Ordering::Relaxed);
    // SAFETY: write(2) is async-signal-safe; it reads one byte of this frame.
    unsafe {
        libc::write(fd, (&byte as *const u8).cast(), 1);
    }
}

/// A pipe, the thread that waits on it and runs the cleanups, and the two handlers. When any
/// step fails the signals keep their default action (the binary dies as before).
fn install() {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let [read_end, write_end] = fds;
    let waiter = std::thread::Builder::new()
        .name("interrupt".into())
        .spawn(move || wait_and_clean(read_end));
    if waiter.is_err() {
        return;
    }
    WAKE.store(write_end, Ordering::Relaxed);
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid start; the handler only calls write(2).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Waits for a signal's byte, runs every registered cleanup, and exits.
fn wait_and_clean(read_end: libc::c_int) {
    let mut byte = 0u8;
    loop {
        // SAFETY: reads at most one byte into `byte`.
        let n = unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) };
        if n == 1 {
            break;
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return;
    }
    let cleanups = std::mem::take(&mut *CLEANUPS.lock().unwrap_or_else(|e| e.into_inner()));
    eprintln!(
        "interrupted (signal {byte}): stopping {} server instance(s) this binary started",
        cleanups.len()
    );
    let running: Vec<_> = cleanups.into_values().map(std::thread::spawn).collect();
    for t in running {
        let _ = t.join();
    }
    std::process::exit(128 + i32::from(byte));
}
