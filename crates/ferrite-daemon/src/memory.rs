//! Giving memory back once work is done. After start-up (loading the state, detecting the
//! host, the first scheduling pass, the first HTTP client) the daemon no longer runs most of
//! the code it has touched, and bursts of GUI RPC replies leave freed heap behind; both stay
//! resident until the kernel needs the memory, as do the parts of replies kept for a state
//! epoch once it is over. [`Reclaimer`] decides when to hand them back (a pure function of
//! the clock and what happened), [`release`] does it:
//!
//! - the heap: glibc's `malloc_trim` returns free pages of every arena to the kernel;
//! - code and read-only data: every read-only, private file mapping with no page of its own
//!   (the program's and the libraries' code, constants and unwind tables, not the relocated
//!   RELRO part) is dropped from the page tables (`MADV_DONTNEED`). The pages stay in the
//!   page cache, shared with every other process that maps the file, and those still in use
//!   come back on a minor fault at once. Nothing can have written to such a mapping, so
//!   nothing is lost.

use std::fs;

/// Seconds after the main loop starts when the start-up's pages are handed back.
const AFTER_START_SECS: f64 = 5.0;
/// Seconds without a GUI RPC after which what replies kept for the state epoch goes and the
/// heap of the burst is handed back: `get_state` called back to back shares its parts, a
/// GUI that calls it now and then does not keep them.
const BRIEF_QUIET_SECS: f64 = 0.5;
/// Seconds without a GUI RPC after which everything replies kept goes too (the results'
/// heads, which a GUI polling `get_results` every second keeps using).
const QUIET_SECS: f64 = 2.0;
/// Bytes of kept replies dropped (their state epoch is over) that make the heap worth
/// trimming at once.
const DROPPED_BYTES: usize = 256 * 1024;

/// What to hand back now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Release {
    pub heap: bool,
    pub code: bool,
    /// What replies kept that goes first.
    pub kept: Kept,
}

/// What replies kept between calls that is to be forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kept {
    /// Nothing.
    #[default]
    Nothing,
    /// What was kept for the current state epoch (`get_state`'s parts, pending transfers).
    EpochParts,
    /// All of it, the results' heads too.
    Everything,
}

/// When to hand memory back.
#[derive(Debug, Clone)]
pub struct Reclaimer {
    /// When the start-up's pages go back; `None` once done.
    startup_at: Option<f64>,
    /// The last GUI RPC answered since the heap was last trimmed.
    gui_at: Option<f64>,
    /// The last GUI RPC answered since the epoch's parts last went.
    brief_at: Option<f64>,
    /// Bytes of kept replies dropped since the heap was last trimmed.
    dropped: usize,
}

impl Reclaimer {
    /// The main loop starts at `now`.
    pub fn new(now: f64) -> Reclaimer {
        Reclaimer {
            startup_at: Some(now + AFTER_START_SECS),
            gui_at: None,
            brief_at: None,
            dropped: 0,
        }
    }

    /// A GUI RPC was answered at `now`.
    pub fn gui_call(&mut self, now: f64) {
        self.gui_at = Some(now);
        self.brief_at = Some(now);
    }

    /// When something is due next, if anything is.
    pub fn next_due(&self) -> Option<f64> {
        [
            self.startup_at,
            self.brief_at.map(|t| t + BRIEF_QUIET_SECS),
            self.gui_at.map(|t| t + QUIET_SECS),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::min)
    }

    /// Kept replies of `bytes` were dropped.
    pub fn dropped(&mut self, bytes: usize) {
        self.dropped += bytes;
    }

    /// What to hand back at `now`.
    pub fn due(&mut self, now: f64) -> Release {
        let mut r = Release::default();
        if self.startup_at.is_some_and(|at| now >= at) {
            self.startup_at = None;
            r.heap = true;
            r.code = true;
        }
        if self.brief_at.is_some_and(|at| now >= at + BRIEF_QUIET_SECS) {
            self.brief_at = None;
            r.heap = true;
            r.kept = Kept::EpochParts;
        }
        if self.gui_at.is_some_and(|at| now >= at + QUIET_SECS) {
            self.gui_at = None;
            r.heap = true;
            r.kept = Kept::Everything;
        }
        if self.dropped >= DROPPED_BYTES {
            r.heap = true;
        }
        if r.heap {
            self.dropped = 0;
        }
        r
    }
}

/// Blocks of this size and more get a mapping of their own from the allocator.
const MMAP_THRESHOLD: i32 = 128 * 1024;
/// Heap arenas the daemon's threads share.
const ARENAS: i32 = 2;

/// Sets the allocator up for a daemon that idles most of the time and answers bursts of GUI
/// RPCs with replies of up to megabytes (call it first thing, before threads start): a
/// block of [`MMAP_THRESHOLD`] or more is mapped on its own and returned to the kernel as
/// soon as it is freed, so a reply's memory does not outlive the reply (glibc would raise
/// this threshold to the largest block freed so far, and keep the following replies in the
/// heap, resident until trimmed); and the few threads share [`ARENAS`] heaps instead of
/// one each.
pub fn configure_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets the allocator's parameters; no allocation is in flight.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

/// Hands back what `r` says.
pub fn release(r: Release) {
    if r.heap {
        trim_heap();
    }
    if r.code {
        if let Err(e) = drop_code_pages() {
            tracing::debug!("cannot drop the start-up's code pages: {e}");
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_heap() {
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() {}

/// The read-only, private file mappings of a `/proc/PID/smaps` text that hold no page of
/// their own (`Anonymous: 0 kB`: nothing was ever written to them, unlike the relocated
/// RELRO part of a program, which is read-only too): (start, length). Every page of such a
/// mapping is the file's, so dropping it loses nothing.
fn clean_file_mappings(smaps: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, usize)> = None;
    for l in smaps.lines() {
        let mut f = l.split_whitespace();
        let Some(first) = f.next() else { continue };
        if first == "Anonymous:" {
            let anon = f.next().and_then(|v| v.parse::<u64>().ok());
            if let (Some((a, len)), Some(0)) = (current.take(), anon) {
                out.push((a, len));
            }
            continue;
        }
        let Some((a, b)) = first.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else {
            continue;
        };
        let perms = f.next().unwrap_or_default().as_bytes();
        let path = f.nth(3).unwrap_or_default();
        let clean_candidate = perms.len() == 4
            && perms[0] == b'r'
            && perms[1] == b'-'
            && perms[3] == b'p'
            && path.starts_with('/')
            && b > a;
        current = clean_candidate.then_some((a, b - a));
    }
    out
}

#[cfg(target_os = "linux")]
fn drop_code_pages() -> std::io::Result<()> {
    let smaps = fs::read_to_string("/proc/self/smaps")?;
    for (start, len) in clean_file_mappings(&smaps) {
        // SAFETY: the range is one whole read-only, private, file-backed mapping with no page
        // of its own (nothing can write to it): dropping its pages loses nothing, the next
        // access reads them again from the page cache.
        let rc = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn drop_code_pages() -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_up_pages_go_back_once_after_the_start() {
        let mut r = Reclaimer::new(100.0);
        assert_eq!(r.due(101.0), Release::default());
        let both = Release {
            heap: true,
            code: true,
            kept: Kept::Nothing,
        };
        assert_eq!(r.due(105.0), both);
        assert_eq!(r.due(200.0), Release::default());
    }

    #[test]
    fn the_heap_goes_back_when_the_gui_has_been_quiet() {
        let mut r = Reclaimer::new(0.0);
        let _ = r.due(10.0);
        assert_eq!(r.next_due(), None);
        r.gui_call(20.0);
        r.gui_call(21.0);
        assert_eq!(r.next_due(), Some(21.5));
        assert_eq!(r.due(21.4), Release::default());
        // Half a second of quiet: the epoch's parts and the heap.
        let brief = Release {
            heap: true,
            code: false,
            kept: Kept::EpochParts,
        };
        assert_eq!(r.due(21.5), brief);
        assert_eq!(r.next_due(), Some(23.0));
        assert_eq!(r.due(22.0), Release::default());
        // Two seconds: everything replies kept.
        let all = Release {
            heap: true,
            code: false,
            kept: Kept::Everything,
        };
        assert_eq!(r.due(23.0), all);
        assert_eq!(r.due(30.0), Release::default());
        assert_eq!(r.next_due(), None);
        // Calls a second apart (a GUI polling): the epoch's parts go between them, the
        // rest stays.
        for t in [40.0, 41.0, 42.0] {
            r.gui_call(t);
            assert_eq!(r.due(t + 0.6), brief);
        }
    }

    #[test]
    fn the_heap_goes_back_once_enough_kept_replies_were_dropped() {
        let mut r = Reclaimer::new(0.0);
        let _ = r.due(10.0);
        r.dropped(DROPPED_BYTES / 2);
        assert_eq!(r.due(11.0), Release::default());
        r.dropped(DROPPED_BYTES / 2);
        let heap = Release {
            heap: true,
            ..Release::default()
        };
        assert_eq!(r.due(11.5), heap);
        assert_eq!(r.due(12.0), Release::default(), "counted from the trim");
    }

    #[test]
    fn only_clean_read_only_file_mappings_are_chosen() {
        let smaps = "\
55d0c0000000-55d0c0100000 r--p 00000000 fd:01 123 /usr/bin/ferrited
Rss:                1024 kB
Anonymous:             0 kB
55d0c0100000-55d0c0700000 r-xp 00100000 fd:01 123 /usr/bin/ferrited
Anonymous:             0 kB
55d0c0700000-55d0c0900000 r--p 00700000 fd:01 123 /usr/bin/ferrited
Anonymous:            64 kB
55d0c0900000-55d0c0910000 rw-p 00900000 fd:01 123 /usr/bin/ferrited
Anonymous:             8 kB
55d0c0910000-55d0c0920000 rw-p 00000000 00:00 0                          [heap]
Anonymous:             8 kB
7f0000000000-7f0000100000 r-xp 00000000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7f0000100000-7f0000101000 r-xs 00000000 00:05 9 /dev/shm/x
Anonymous:             0 kB
7ffc00000000-7ffc00002000 r-xp 00000000 00:00 0                          [vdso]
Anonymous:             0 kB
";
        assert_eq!(
            clean_file_mappings(smaps),
            vec![
                (0x55d0_c000_0000, 0x10_0000),
                (0x55d0_c010_0000, 0x60_0000),
                (0x7f00_0000_0000, 0x10_0000)
            ]
        );
    }

    #[test]
    fn releasing_our_own_pages_keeps_the_program_and_its_data_intact() {
        static TABLE: [u64; 4] = [3, 1, 4, 1];
        let before: Vec<String> = (0..100).map(|i| format!("{i:04}")).collect();
        #[cfg(target_os = "linux")]
        drop_code_pages().expect("madvise");
        trim_heap();
        // Still running the code, reading the constants and the heap whose pages were dropped.
        assert_eq!(TABLE.iter().sum::<u64>(), 9);
        assert_eq!(before[42], "0042");
        assert_eq!(
            format!("{:?}", Release::default()),
            "Release { heap: false, code: false, kept: Nothing }"
        );
    }
}
