//! The crash-safe state store: `client_state.xml` and its two companions.
//!
//! A save writes the whole state to `client_state_next.xml`, fsyncs it, moves the current
//! file to `client_state_prev.xml`, renames the new file into place and fsyncs the directory.
//! At every instant of that sequence one complete, fsynced state file exists under one of the
//! three names, so a crash or power cut at any point loses at most the save in progress.
//!
//! Loading tries the three names in the order the official client does — `next` (a save that
//! finished writing but not renaming), then the current file, then `prev` — and takes the
//! first one that parses completely, recording why each earlier candidate was passed over.
//!
//! File-system operations go through [`StoreFs`] so tests can inject the failures a real disk
//! produces (full, read-only, a rename that fails half-way).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The current state file.
pub const STATE_FILE: &str = "client_state.xml";
/// The state file being written.
pub const STATE_FILE_NEXT: &str = "client_state_next.xml";
/// The previous generation.
pub const STATE_FILE_PREV: &str = "client_state_prev.xml";

/// The file-system operations a save needs, so that tests can make them fail.
pub trait StoreFs: std::fmt::Debug + Send {
    /// Creates or truncates `path`, writes `bytes` and fsyncs the file.
    fn write_synced(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// Renames `from` to `to`, replacing `to`.
    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes `path`; a missing file is not an error.
    fn remove(&mut self, path: &Path) -> io::Result<()>;
    /// Fsyncs the directory `dir`, making renames in it durable.
    fn sync_dir(&mut self, dir: &Path) -> io::Result<()>;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

impl StoreFs for RealFs {
    fn write_synced(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        f.write_all(bytes)?;
        f.sync_all()
    }

    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove(&mut self, path: &Path) -> io::Result<()> {
        match fs::remove_file(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn sync_dir(&mut self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// Which file a load used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadSource {
    /// `client_state_next.xml`: the last save was interrupted after writing, before renaming.
    Next,
    /// `client_state.xml`: the normal case.
    Current,
    /// `client_state_prev.xml`: the current file was missing or damaged.
    Prev,
    /// No usable file: a fresh state.
    Fresh,
}

impl LoadSource {
    /// The file name, or `None` for a fresh state.
    pub fn file_name(self) -> Option<&'static str> {
        match self {
            LoadSource::Next => Some(STATE_FILE_NEXT),
            LoadSource::Current => Some(STATE_FILE),
            LoadSource::Prev => Some(STATE_FILE_PREV),
            LoadSource::Fresh => None,
        }
    }
}

/// A candidate state file that was passed over, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The file.
    pub path: PathBuf,
    /// Why it was not used (parse error with line, read error).
    pub reason: String,
}

/// The outcome of a load.
#[derive(Debug)]
pub struct Loaded<T> {
    /// The document loaded, or `None` for a fresh start.
    pub value: Option<T>,
    /// Which file it came from.
    pub source: LoadSource,
    /// Candidates passed over, in the order tried.
    pub rejected: Vec<Rejected>,
}

/// A save that failed. The previous state file is untouched in every case.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    /// Writing `client_state_next.xml` failed (disk full, read-only, I/O error).
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file being written.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Moving a generation into place failed.
    #[error("cannot rename {from} to {to}: {source}")]
    Rename {
        /// Source name.
        from: PathBuf,
        /// Target name.
        to: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Making the renames durable failed; the new file is in place but may not survive a
    /// power cut.
    #[error("cannot sync directory {path}: {source}")]
    SyncDir {
        /// The data directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl SaveError {
    /// Whether the failure looks like a full disk (so work fetch should stop).
    pub fn is_disk_full(&self) -> bool {
        let src = match self {
            SaveError::Write { source, .. }
            | SaveError::Rename { source, .. }
            | SaveError::SyncDir { source, .. } => source,
        };
        src.raw_os_error() == Some(libc::ENOSPC) || src.raw_os_error() == Some(libc::EDQUOT)
    }
}

/// The state files of one data directory.
#[derive(Debug)]
pub struct StateStore<F: StoreFs = RealFs> {
    dir: PathBuf,
    fs: F,
}

impl StateStore<RealFs> {
    /// The store of data directory `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self::with_fs(dir, RealFs)
    }
}

impl<F: StoreFs> StateStore<F> {
    /// A store whose file operations go through `fs`.
    pub fn with_fs(dir: impl Into<PathBuf>, fs: F) -> Self {
        Self {
            dir: dir.into(),
            fs,
        }
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file-system layer (tests use it to change injected faults).
    pub fn fs_mut(&mut self) -> &mut F {
        &mut self.fs
    }

    /// Loads the newest complete state file; `parse` turns text into a document or explains
    /// why it cannot (its error text is kept in [`Loaded::rejected`]).
    pub fn load<T, E: std::fmt::Display>(
        &self,
        mut parse: impl FnMut(&str, &str) -> Result<T, E>,
    ) -> Loaded<T> {
        let mut rejected = Vec::new();
        let order = [
            (LoadSource::Next, STATE_FILE_NEXT),
            (LoadSource::Current, STATE_FILE),
            (LoadSource::Prev, STATE_FILE_PREV),
        ];
        for (source, name) in order {
            let path = self.dir.join(name);
            let text = match fs::read(&path) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    rejected.push(Rejected {
                        path,
                        reason: format!("cannot read: {e}"),
                    });
                    continue;
                }
            };
            let text = match String::from_utf8(text) {
                Ok(t) => t,
                // BOINC writes UTF-8, but an old file may carry Latin-1 bytes in a user name:
                // keep the file usable rather than reject it for that.
                Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
            };
            match parse(&text, name) {
                Ok(value) => {
                    return Loaded {
                        value: Some(value),
                        source,
                        rejected,
                    }
                }
                Err(e) => rejected.push(Rejected {
                    path,
                    reason: e.to_string(),
                }),
            }
        }
        Loaded {
            value: None,
            source: LoadSource::Fresh,
            rejected,
        }
    }

    /// Saves `xml` as the new state file with the crash-safe rotation.
    ///
    /// On any error the current `client_state.xml` (or, if the failure came after it was
    /// rotated, `client_state_prev.xml` plus a complete `client_state_next.xml`) still holds the
    /// last good state, and a load finds it.
    pub fn save(&mut self, xml: &str) -> Result<(), SaveError> {
        let next = self.dir.join(STATE_FILE_NEXT);
        let cur = self.dir.join(STATE_FILE);
        let prev = self.dir.join(STATE_FILE_PREV);
        if let Err(source) = self.fs.write_synced(&next, xml.as_bytes()) {
            // A partial next file would be rejected on load anyway; remove it so it does not
            // take disk space the failure may be about.
            let _ = self.fs.remove(&next);
            return Err(SaveError::Write { path: next, source });
        }
        if cur.exists() {
            if let Err(source) = self.fs.rename(&cur, &prev) {
                // The complete next file stays: a load prefers it, so nothing is lost.
                return Err(SaveError::Rename {
                    from: cur,
                    to: prev,
                    source,
                });
            }
        }
        if let Err(source) = self.fs.rename(&next, &cur) {
            return Err(SaveError::Rename {
                from: next,
                to: cur,
                source,
            });
        }
        self.fs
            .sync_dir(&self.dir)
            .map_err(|source| SaveError::SyncDir {
                path: self.dir.clone(),
                source,
            })
    }
}

/// When to save: after a change, at most once per `min_interval` (at once when asked to),
/// retrying failures with a growing delay, one save at a time. A save covers the changes noted
/// before it began; changes noted while it is written keep the state dirty. Pure bookkeeping
/// over caller-supplied times (seconds).
#[derive(Debug, Clone)]
pub struct SavePolicy {
    min_interval: f64,
    dirty_since: Option<f64>,
    last_attempt: f64,
    failures: u32,
    /// Changes noted so far.
    generation: u64,
    /// The generation a save in progress covers.
    in_flight: Option<u64>,
    /// The next save should not wait for `min_interval`.
    urgent: bool,
    /// Seconds the main loop took to serialise the state for the last save.
    serialise_secs: f64,
}

impl SavePolicy {
    /// Longest wait between retries of a failing save.
    pub const MAX_RETRY: f64 = 60.0;
    /// Between ordinary saves, at least this many times what the last serialisation took
    /// (on the writer thread once the main loop runs): at most a tenth of the time goes to
    /// writing the state out, so a state of 100,000 tasks is not serialised every second.
    pub const SERIALISE_SPACING: f64 = 10.0;

    /// A policy that saves at most once per `min_interval` seconds.
    pub fn new(min_interval: f64) -> Self {
        Self {
            min_interval,
            dirty_since: None,
            last_attempt: f64::NEG_INFINITY,
            failures: 0,
            generation: 0,
            in_flight: None,
            urgent: false,
            serialise_secs: 0.0,
        }
    }

    /// The last save's serialisation took `secs` of the main loop's time.
    pub fn note_serialise(&mut self, secs: f64) {
        if secs.is_finite() && secs >= 0.0 {
            self.serialise_secs = secs;
        }
    }

    /// Notes that the state changed at `now`.
    pub fn mark_dirty(&mut self, now: f64) {
        self.dirty_since.get_or_insert(now);
        self.generation += 1;
    }

    /// Asks for the next save as soon as the one in progress (if any) is done, without the
    /// usual wait (a scheduler reply was applied; shutting down).
    pub fn hurry(&mut self) {
        self.urgent = true;
    }

    /// The generation of the changes noted so far (a save that begins now covers it).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether a save is being written.
    pub fn in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Whether there are unsaved changes.
    pub fn is_dirty(&self) -> bool {
        self.dirty_since.is_some()
    }

    /// Consecutive failed saves.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// When the next save may happen, if one is wanted (none while one is being written: its
    /// end is the next moment to look again).
    pub fn next_due(&self) -> Option<f64> {
        self.dirty_since?;
        if self.in_flight.is_some() {
            return None;
        }
        let wait = if self.urgent {
            0.0
        } else if self.failures == 0 {
            self.min_interval
                .max(self.serialise_secs * Self::SERIALISE_SPACING)
        } else {
            (self.min_interval * 2f64.powi(self.failures.min(16) as i32)).min(Self::MAX_RETRY)
        };
        Some(self.last_attempt + wait)
    }

    /// Whether a save should happen now.
    pub fn due(&self, now: f64) -> bool {
        self.next_due().is_some_and(|t| now >= t)
    }

    /// A save begins at `now`; returns the generation it covers, for [`finish`](Self::finish).
    pub fn begin(&mut self, now: f64) -> u64 {
        self.last_attempt = now;
        self.urgent = false;
        self.in_flight = Some(self.generation);
        self.generation
    }

    /// The save that began with `generation` ended. Changes noted since it began keep the
    /// state dirty.
    pub fn finish(&mut self, generation: u64, ok: bool) {
        if self.in_flight == Some(generation) {
            self.in_flight = None;
        }
        if ok {
            self.failures = 0;
            if self.generation == generation {
                self.dirty_since = None;
            }
        } else {
            self.failures = self.failures.saturating_add(1);
        }
    }

    /// Forgets a save in progress whose outcome will not be heard (its writer stopped).
    pub fn abandon(&mut self) {
        self.in_flight = None;
    }

    /// Records the outcome of a save attempted (begun and finished) at `now`.
    pub fn record(&mut self, now: f64, ok: bool) {
        let g = self.begin(now);
        self.finish(g, ok);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file system that fails chosen operations, on top of the real one.
    #[derive(Debug, Default)]
    struct FaultyFs {
        fail_write: Option<i32>,
        fail_rename_to: Option<&'static str>,
        /// Bytes written before a write failure, to leave a torn file like a full disk does.
        partial: usize,
    }

    impl StoreFs for FaultyFs {
        fn write_synced(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
            if let Some(errno) = self.fail_write {
                fs::write(path, &bytes[..self.partial.min(bytes.len())])?;
                return Err(io::Error::from_raw_os_error(errno));
            }
            RealFs.write_synced(path, bytes)
        }
        fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
            if self
                .fail_rename_to
                .is_some_and(|n| to.file_name().is_some_and(|f| f == n))
            {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            RealFs.rename(from, to)
        }
        fn remove(&mut self, path: &Path) -> io::Result<()> {
            RealFs.remove(path)
        }
        fn sync_dir(&mut self, dir: &Path) -> io::Result<()> {
            RealFs.sync_dir(dir)
        }
    }

    fn doc(n: u32) -> String {
        format!("<client_state>\n<gen>{n}</gen>\n</client_state>\n")
    }

    /// A stand-in parser: a complete document has both tags; returns the generation.
    fn parse(text: &str, _file: &str) -> Result<u32, String> {
        if !text.trim_end().ends_with("</client_state>") {
            return Err("cut short".into());
        }
        let start = text.find("<gen>").ok_or("no gen")? + 5;
        let end = text.find("</gen>").ok_or("no gen end")?;
        text[start..end].parse().map_err(|e| format!("{e}"))
    }

    #[test]
    fn save_rotates_generations() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = StateStore::new(dir.path());
        store.save(&doc(1)).expect("save 1");
        store.save(&doc(2)).expect("save 2");
        assert_eq!(
            fs::read_to_string(dir.path().join(STATE_FILE)).ok(),
            Some(doc(2))
        );
        assert_eq!(
            fs::read_to_string(dir.path().join(STATE_FILE_PREV)).ok(),
            Some(doc(1))
        );
        assert!(!dir.path().join(STATE_FILE_NEXT).exists());
        let loaded = store.load(parse);
        assert_eq!(
            (loaded.value, loaded.source),
            (Some(2), LoadSource::Current)
        );
    }

    #[test]
    fn disk_full_keeps_last_good_state_and_leaves_no_torn_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = StateStore::with_fs(dir.path(), FaultyFs::default());
        store.save(&doc(1)).expect("save 1");
        store.fs_mut().fail_write = Some(libc::ENOSPC);
        store.fs_mut().partial = 10;
        let err = store.save(&doc(2)).expect_err("disk full");
        assert!(err.is_disk_full(), "{err}");
        assert!(
            !dir.path().join(STATE_FILE_NEXT).exists(),
            "torn next file removed"
        );
        let loaded = store.load(parse);
        assert_eq!(
            (loaded.value, loaded.source),
            (Some(1), LoadSource::Current)
        );
        // Space returns: the next save succeeds.
        store.fs_mut().fail_write = None;
        store.save(&doc(3)).expect("save 3");
        assert_eq!(store.load(parse).value, Some(3));
    }

    #[test]
    fn failed_rename_into_place_is_recovered_from_next() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = StateStore::with_fs(dir.path(), FaultyFs::default());
        store.save(&doc(1)).expect("save 1");
        store.fs_mut().fail_rename_to = Some(STATE_FILE);
        store.save(&doc(2)).expect_err("rename fails");
        // client_state.xml was rotated away; the complete next file is found first.
        let loaded = store.load(parse);
        assert_eq!((loaded.value, loaded.source), (Some(2), LoadSource::Next));
    }

    #[test]
    fn load_falls_back_in_official_order_with_reasons() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        fs::write(p.join(STATE_FILE_NEXT), "<client_state>\n<gen>9").expect("write");
        fs::write(
            p.join(STATE_FILE),
            "<client_state>\n<gen>x</gen>\n</client_state>\n",
        )
        .expect("write");
        fs::write(p.join(STATE_FILE_PREV), doc(4)).expect("write");
        let loaded = StateStore::new(p).load(parse);
        assert_eq!((loaded.value, loaded.source), (Some(4), LoadSource::Prev));
        assert_eq!(loaded.rejected.len(), 2);
        assert!(loaded.rejected[0].path.ends_with(STATE_FILE_NEXT));
        assert_eq!(loaded.rejected[0].reason, "cut short");
        assert!(loaded.rejected[1].path.ends_with(STATE_FILE));
    }

    #[test]
    fn nothing_usable_is_a_fresh_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let loaded = StateStore::new(dir.path()).load(parse);
        assert_eq!((loaded.value, loaded.source), (None, LoadSource::Fresh));
        assert!(loaded.rejected.is_empty());
    }

    #[test]
    fn save_policy_coalesces_and_backs_off() {
        let mut p = SavePolicy::new(1.0);
        assert!(!p.due(0.0), "clean state is never due");
        p.mark_dirty(0.0);
        assert!(p.due(0.0), "first save is immediate");
        p.record(0.0, true);
        assert!(!p.due(0.5));
        p.mark_dirty(0.2);
        p.mark_dirty(0.4);
        assert!(!p.due(0.9), "at most once a second");
        assert!(p.due(1.0));
        p.record(1.0, false);
        assert!(!p.due(2.5), "first retry waits 2 s");
        assert!(p.due(3.0));
        for t in 0..10 {
            p.record(3.0 + f64::from(t), false);
        }
        assert_eq!(p.next_due(), Some(12.0 + SavePolicy::MAX_RETRY));
        p.record(100.0, true);
        assert!(!p.is_dirty());
        assert_eq!(p.failures(), 0);
    }

    #[test]
    fn a_state_slow_to_serialise_is_saved_less_often_unless_hurried() {
        let mut p = SavePolicy::new(1.0);
        p.note_serialise(0.05);
        p.mark_dirty(0.0);
        p.record(0.0, true);
        p.mark_dirty(0.1);
        assert!(p.due(1.0), "a small state: once a second");
        p.record(1.0, true);
        // A large state took 0.4 s to serialise: the next ordinary save waits 4 s.
        p.note_serialise(0.4);
        p.mark_dirty(1.1);
        assert!(!p.due(4.9));
        assert!(p.due(5.0));
        // A scheduler reply hurries it: saved at once all the same.
        p.hurry();
        assert!(p.due(1.2));
    }

    #[test]
    fn a_save_in_progress_covers_only_the_changes_before_it() {
        let mut p = SavePolicy::new(1.0);
        p.mark_dirty(0.0);
        let g = p.begin(0.0);
        assert!(p.in_flight());
        assert_eq!(p.next_due(), None, "one save at a time");
        // A change while it is written: still dirty afterwards, due after the interval.
        p.mark_dirty(0.1);
        p.finish(g, true);
        assert!(!p.in_flight());
        assert!(p.is_dirty());
        assert!(!p.due(0.5));
        assert!(p.due(1.0));
        // Nothing changed during the next one: clean.
        let g = p.begin(1.0);
        p.finish(g, true);
        assert!(!p.is_dirty());
        // Hurried: due at once after the one in progress, without the interval.
        p.mark_dirty(1.2);
        let g = p.begin(1.2);
        p.mark_dirty(1.3);
        p.hurry();
        assert!(!p.due(1.3), "not while one is written");
        p.finish(g, true);
        assert!(p.due(1.31));
        // A failure keeps it dirty and backs off; an abandoned save frees the slot.
        let g = p.begin(1.31);
        p.finish(g, false);
        assert!(p.is_dirty());
        assert_eq!(p.failures(), 1);
        let _ = p.begin(5.0);
        p.abandon();
        assert!(!p.in_flight());
        assert!(p.is_dirty());
    }
}
