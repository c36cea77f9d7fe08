//! The start-up file check: every project's files are compared with its directory
//! ([`ferrite_project::existence::check_files`] decides); damaged copies are deleted, what is
//! missing is downloaded again by the transfers, and each finding is logged. A project
//! directory that is gone is made again so the downloads have somewhere to go.
//!
//! The app-version files the check hashes are hashed once: each MD5 is kept with the file's
//! length, modification time and inode in [`VERIFIED_FILES`] (Ferrite only), and a later
//! check, after a restart too, takes the kept MD5 while all three are unchanged instead of
//! reading the file again. A download the transfers verified is recorded the same way.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use ferrite_project::existence::{self, check_files, FileAction, FileProblem, OnDisk};
use ferrite_proto::client_state::ClientState;
use tracing::{info, warn};

use crate::config;

mod report;
use report::check_lines;

/// The record of verified files, in the data directory (Ferrite only): a header line, then
/// one line per file, `md5 length mtime_ns inode path`, the path relative to the data
/// directory (`projects/<project>/<file>`) and running to the end of the line.
pub const VERIFIED_FILES: &str = "ferrite_verified_files.txt";

/// At most this many threads hash app files at once.
const HASH_THREADS: usize = 8;

/// The first line of [`VERIFIED_FILES`] (its format, version 1).
const HEADER: &str = "# ferrite_verified_files 1: md5 length mtime_ns inode path";

/// What says a file is the one hashed, without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    /// Length in bytes.
    len: u64,
    /// Modification time, nanoseconds since the epoch.
    mtime_ns: i128,
    /// Inode number (a new copy renamed into place has another).
    ino: u64,
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            len: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ino: meta.ino(),
        }
    }
}

/// A file's MD5 as hashed, and the stamp it had then.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    stamp: Stamp,
    /// Lower-case hex.
    md5: String,
}

/// Why [`VERIFIED_FILES`] could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A line that is not `md5 length mtime_ns inode path`, or a missing header.
    #[error("line {line}: {why}")]
    Malformed {
        /// The line number, from 1.
        line: usize,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// Files whose MD5 is known, by path relative to the data directory, as kept in
/// [`VERIFIED_FILES`]. What it holds is only ever a shortcut: a file whose stamp differs is
/// hashed again.
#[derive(Debug, Default)]
pub struct Verified {
    entries: BTreeMap<String, Entry>,
    /// Changed since it was loaded or written.
    dirty: bool,
}

impl Verified {
    /// The record kept in data directory `dir`. A missing file is an empty record; an
    /// unreadable or malformed one too, with a warning (every file is then hashed again).
    pub fn load(dir: &Path) -> Verified {
        let path = dir.join(VERIFIED_FILES);
        let text = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Verified::default(),
            Err(e) => {
                warn!(
                    "cannot read {}: {e}; app files are hashed again",
                    path.display()
                );
                return Verified::default();
            }
        };
        let parsed = match std::str::from_utf8(&text) {
            Ok(s) => parse(s),
            Err(e) => Err(RecordError::Malformed {
                line: 1 + text
                    .iter()
                    .take(e.valid_up_to())
                    .filter(|&&b| b == b'\n')
                    .count(),
                why: "not UTF-8",
            }),
        };
        match parsed {
            Ok(entries) => Verified {
                entries,
                dirty: false,
            },
            Err(e) => {
                warn!(
                    "{} is malformed ({e}); it is ignored and app files are hashed again",
                    path.display()
                );
                Verified::default()
            }
        }
    }

    /// Writes the record into data directory `dir` (through a temporary file and a rename)
    /// when it changed since it was loaded or last written.
    pub fn save_if_changed(&mut self, dir: &Path) {
        if !self.dirty {
            return;
        }
        let path = dir.join(VERIFIED_FILES);
        match config::write_atomic(&path, &self.to_text()) {
            Ok(()) => self.dirty = false,
            Err(e) => warn!("cannot write {}: {e}", path.display()),
        }
    }

    /// Number of files recorded.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no file is recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn to_text(&self) -> String {
        let mut out = String::with_capacity(64 + self.entries.len() * 96);
        out.push_str(HEADER);
        out.push('\n');
        for (path, e) in &self.entries {
            out.push_str(&format!(
                "{} {} {} {} {path}\n",
                e.md5, e.stamp.len, e.stamp.mtime_ns, e.stamp.ino
            ));
        }
        out
    }

    /// The MD5 recorded for `key` while the file still has `stamp`.
    fn get(&self, key: &str, stamp: Stamp) -> Option<&str> {
        self.entries
            .get(key)
            .filter(|e| e.stamp == stamp)
            .map(|e| e.md5.as_str())
    }

    fn put(&mut self, key: String, entry: Entry) {
        if self.entries.get(&key) != Some(&entry) {
            self.entries.insert(key, entry);
            self.dirty = true;
        }
    }

    fn remove(&mut self, key: &str) {
        if self.entries.remove(key).is_some() {
            self.dirty = true;
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        let before = self.entries.len();
        self.entries.retain(|k, _| keep(k));
        if self.entries.len() != before {
            self.dirty = true;
        }
    }
}

fn parse(text: &str) -> Result<BTreeMap<String, Entry>, RecordError> {
    let mut lines = text.lines().enumerate();
    let bad = |i: usize, why| RecordError::Malformed { line: i + 1, why };
    match lines.next() {
        Some((_, h)) if h == HEADER => {}
        Some((i, _)) => return Err(bad(i, "not the header of this format")),
        None => return Err(bad(0, "empty")),
    }
    let mut out = BTreeMap::new();
    for (i, line) in lines {
        let mut it = line.splitn(5, ' ');
        let (Some(md5), Some(len), Some(mtime_ns), Some(ino), Some(path)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            return Err(bad(i, "fewer than five fields"));
        };
        if md5.len() != 32 || !md5.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(bad(i, "not an MD5 in lower-case hex"));
        }
        let stamp = Stamp {
            len: len.parse().map_err(|_| bad(i, "bad length"))?,
            mtime_ns: mtime_ns
                .parse()
                .map_err(|_| bad(i, "bad modification time"))?,
            ino: ino.parse().map_err(|_| bad(i, "bad inode"))?,
        };
        if path.is_empty() {
            return Err(bad(i, "no path"));
        }
        let entry = Entry {
            stamp,
            md5: md5.to_owned(),
        };
        if out.insert(path.to_owned(), entry).is_some() {
            return Err(bad(i, "a path recorded twice"));
        }
    }
    Ok(out)
}

/// The record's key of file `name` of project directory `pdir` under data directory `dir`:
/// the path relative to `dir`. `None` for what a line cannot hold (it is then never recorded).
fn key(dir: &Path, pdir: &Path, name: &str) -> Option<String> {
    let rel = pdir.join(name);
    let rel = rel.strip_prefix(dir).ok()?.to_str()?;
    (!rel.is_empty() && !rel.contains(['\n', '\r'])).then(|| rel.to_owned())
}

/// What the project directory `pdir` (under data directory `dir`) holds under `name`,
/// hashed when `want_md5`: the MD5 recorded in `verified` while the file's stamp is
/// unchanged, else read and recorded. Each key recorded or reused goes into `seen`.
fn look(
    dir: &Path,
    pdir: &Path,
    name: &str,
    want_md5: bool,
    verified: &mut Verified,
    seen: &mut HashSet<String>,
) -> OnDisk {
    let path = pdir.join(name);
    let Ok(meta) = fs::metadata(&path) else {
        return OnDisk::Missing;
    };
    if !meta.is_file() {
        return OnDisk::Missing;
    }
    if !want_md5 {
        return OnDisk::Present {
            len: meta.len(),
            md5: None,
        };
    }
    let key = key(dir, pdir, name);
    if let Some(k) = &key {
        if let Some(md5) = verified.get(k, Stamp::of(&meta)) {
            let md5 = md5.to_owned();
            seen.insert(k.clone());
            return OnDisk::Present {
                len: meta.len(),
                md5: Some(md5),
            };
        }
    }
    // Unreadable: as good as missing.
    let Some((entry, steady)) = hash(&path) else {
        return OnDisk::Missing;
    };
    let found = OnDisk::Present {
        len: entry.stamp.len,
        md5: Some(entry.md5.clone()),
    };
    if let (Some(k), true) = (key, steady) {
        seen.insert(k.clone());
        verified.put(k, entry);
    }
    found
}

/// Reads and hashes the file at `path`: its MD5 and the stamp it had, and whether nothing
/// wrote it while it was read (only then may the MD5 be recorded). `None` if unreadable.
fn hash(path: &Path) -> Option<(Entry, bool)> {
    let file = fs::File::open(path).ok()?;
    let before = Stamp::of(&file.metadata().ok()?);
    let md5 = ferrite_net::fast_md5::md5_hex_reader(std::io::BufReader::new(&file)).ok()?;
    let steady = file.metadata().is_ok_and(|m| Stamp::of(&m) == before);
    Some((Entry { stamp: before, md5 }, steady))
}

/// Hashes, on up to `threads` threads, the app files of `state` (of project `only`,
/// when given) that the check will ask about and `verified` does not vouch for, and records
/// them, so that the check that follows finds them all known. A first start on a data
/// directory the official client kept reads every app file once; on several cores at once
/// it takes a fraction of the time.
fn hash_ahead(
    dir: &Path,
    state: &ClientState,
    verified: &mut Verified,
    only: Option<&str>,
    threads: usize,
) {
    let mut todo: Vec<(String, std::path::PathBuf)> = Vec::new();
    for ps in &state.projects {
        if only.is_some_and(|o| o != ps.project.master_url) {
            continue;
        }
        let pdir = config::project_dir(dir, &ps.project.master_url);
        for name in existence::md5_wanted(ps) {
            let path = pdir.join(name);
            let (Some(k), Ok(meta)) = (key(dir, &pdir, name), fs::metadata(&path)) else {
                continue;
            };
            if meta.is_file() && verified.get(&k, Stamp::of(&meta)).is_none() {
                todo.push((k, path));
            }
        }
    }
    let threads = threads.min(todo.len());
    if threads < 2 {
        return;
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let hashed: Vec<(String, Entry)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((k, path)) = todo.get(i) else {
                            return out;
                        };
                        if let Some((entry, true)) = hash(path) {
                            out.push((k.clone(), entry));
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    for (k, entry) in hashed {
        verified.put(k, entry);
    }
}

/// Checks the files of every project in `state` (only those in `only`, when given)
/// against data directory `dir`. Returns true when the state changed.
///
/// App files are hashed only when `verified` has no MD5 for them at their present length,
/// modification time and inode; what was hashed is recorded there, and the record is
/// written to [`VERIFIED_FILES`] when it changed. Records of the files checked that are gone,
/// deleted or no longer hashed are dropped (of every project when `only` is `None`).
pub fn check_all(
    dir: &Path,
    state: &mut ClientState,
    verified: &mut Verified,
    check_sizes: bool,
    only: Option<&str>,
    now: f64,
) -> bool {
    let mut changed = false;
    let mut seen = HashSet::new();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    hash_ahead(dir, state, verified, only, threads.min(HASH_THREADS));
    for ps in &mut state.projects {
        let url = ps.project.master_url.clone();
        if only.is_some_and(|o| o != url) {
            continue;
        }
        let pdir = config::project_dir(dir, &url);
        // Every project has its directory, as the official client makes them at start-up;
        // one attached from its account file alone has none yet.
        if !pdir.is_dir() {
            if !ps.files.is_empty() {
                warn!(project = %url, "project directory {} is missing; its files are downloaded again", pdir.display());
            }
            if let Err(e) = fs::create_dir_all(&pdir) {
                warn!(project = %url, "cannot make {}: {e}", pdir.display());
            }
        }
        let check = check_files(
            ps,
            &mut |name, want_md5| look(dir, &pdir, name, want_md5, verified, &mut seen),
            check_sizes,
            now,
        );
        if only.is_some() {
            // Only this project's records can be judged; the others' stay.
            if let Some(prefix) = pdir.strip_prefix(dir).ok().and_then(Path::to_str) {
                let prefix = format!("{prefix}/");
                verified.retain(|k| !k.starts_with(&prefix) || seen.contains(k));
            }
        }
        if check.is_clean() {
            continue;
        }
        changed = true;
        for f in &check.files {
            if f.action == FileAction::Refetch
                && !matches!(f.problem, FileProblem::HadError(_) | FileProblem::Missing)
            {
                let _ = fs::remove_file(pdir.join(&f.name));
                if let Some(k) = key(dir, &pdir, &f.name) {
                    verified.remove(&k);
                }
            }
        }
        for (warning, line) in check_lines(&check) {
            if warning {
                warn!(project = %url, "{line}");
            } else {
                info!(project = %url, "{line}");
            }
        }
    }
    if only.is_none() {
        // Every project was checked: what was not looked at now is not worth keeping.
        verified.retain(|k| seen.contains(k));
    }
    verified.save_if_changed(dir);
    changed
}

/// A download of file `name` of project `url` ended with `len` bytes of MD5 `md5` (as the
/// download computed them while writing). When the transfers accepted it and it is a file
/// the check hashes (an app-version file with a known MD5), it is recorded in `verified` with
/// its stamp now, so the next check need not read it. The record is written with the next
/// check's or at shutdown ([`Verified::save_if_changed`]).
pub fn downloaded(
    dir: &Path,
    state: &ClientState,
    verified: &mut Verified,
    url: &str,
    name: &str,
    len: u64,
    md5: &str,
) {
    let Some(ps) = state.project(url) else {
        return;
    };
    if !existence::is_md5_wanted(ps, name) {
        return;
    }
    let md5 = md5.trim().to_ascii_lowercase();
    if md5.len() != 32 || !md5.bytes().all(|b| b.is_ascii_hexdigit()) {
        return;
    }
    let pdir = config::project_dir(dir, url);
    let Some(k) = key(dir, &pdir, name) else {
        return;
    };
    // Only the file the download wrote: the same length, and still a plain file.
    match fs::metadata(pdir.join(name)) {
        Ok(meta) if meta.is_file() && meta.len() == len => verified.put(
            k,
            Entry {
                stamp: Stamp::of(&meta),
                md5,
            },
        ),
        _ => verified.remove(&k),
    }
}

/// The first file task `result` of project `url` needs to start (app-version files and
/// inputs, not the optional ones) that is not in the project directory under data
/// directory `dir`.
pub fn missing_file(dir: &Path, state: &ClientState, url: &str, result: &str) -> Option<String> {
    let ps = state.project(url)?;
    let r = ps.result(result)?;
    let pdir = config::project_dir(dir, url);
    let wu = ps.workunit(&r.wu_name).map(|w| w.input_files.iter());
    let av = ps.app_version_of(r).map(|v| v.file_refs.iter());
    av.into_iter()
        .flatten()
        .chain(wu.into_iter().flatten())
        .filter(|f| !f.optional)
        .find(|f| !pdir.join(&f.file_name).is_file())
        .map(|f| f.file_name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::time::{Duration, SystemTime};

    const URL: &str = "http://127.0.0.1/test/";
    const GOOD: &[u8] = b"the app's verified content";
    const BAD: &[u8] = b"the app's damaged  content";

    fn md5(data: &[u8]) -> String {
        ferrite_net::fast_md5::md5_hex_reader(data).expect("md5")
    }

    /// A state with one project whose app version's one file `app` is `GOOD`, present.
    fn app_state() -> ClientState {
        let xml = format!(
            "<client_state><project><master_url>{URL}</master_url></project>\
             <app><name>a</name></app>\
             <file><name>app</name><nbytes>{}</nbytes><md5_cksum>{}</md5_cksum>\
             <status>1</status><url>{URL}download/app</url></file>\
             <app_version><app_name>a</app_name><version_num>100</version_num>\
             <file_ref><file_name>app</file_name><main_program/></file_ref></app_version>\
             </client_state>",
            GOOD.len(),
            md5(GOOD)
        );
        ClientState::parse(&xml, "client_state.xml")
            .expect("state")
            .value
    }

    /// A data directory with `app` written as `GOOD`; its path.
    fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let pdir = config::project_dir(dir.path(), URL);
        fs::create_dir_all(&pdir).expect("mkdir");
        let app = pdir.join("app");
        fs::write(&app, GOOD).expect("write");
        (dir, app)
    }

    /// Writes `data` (of the same length) over `path` in place, then sets its modification
    /// time to `mtime`: the same inode and length, so only the mtime can tell.
    fn overwrite(path: &Path, data: &[u8], mtime: SystemTime) {
        let mut f = fs::OpenOptions::new().write(true).open(path).expect("open");
        f.write_all(data).expect("write");
        f.set_modified(mtime).expect("set mtime");
    }

    fn mtime(path: &Path) -> SystemTime {
        fs::metadata(path)
            .and_then(|m| m.modified())
            .expect("mtime")
    }

    fn check(dir: &Path, state: &mut ClientState, verified: &mut Verified) -> bool {
        check_all(dir, state, verified, true, None, 1.0e9)
    }

    /// A state with one project whose app version uses files `app0` to `app{n-1}`, each
    /// listed with `GOOD`'s length and MD5; the data directory holds them as `GOOD`, but
    /// `app1` as `BAD`.
    fn many_app_files(n: usize) -> (tempfile::TempDir, ClientState) {
        let (dir, _) = setup();
        let pdir = config::project_dir(dir.path(), URL);
        let (mut files, mut refs) = (String::new(), String::new());
        for i in 0..n {
            files.push_str(&format!(
                "<file><name>app{i}</name><nbytes>{}</nbytes><md5_cksum>{}</md5_cksum>\
                 <status>1</status><url>{URL}download/app{i}</url></file>",
                GOOD.len(),
                md5(GOOD)
            ));
            refs.push_str(&format!(
                "<file_ref><file_name>app{i}</file_name></file_ref>"
            ));
            let data = if i == 1 { BAD } else { GOOD };
            fs::write(pdir.join(format!("app{i}")), data).expect("write");
        }
        let xml = format!(
            "<client_state><project><master_url>{URL}</master_url></project>\
             <app><name>a</name></app>{files}\
             <app_version><app_name>a</app_name><version_num>100</version_num>{refs}\
             </app_version></client_state>"
        );
        let state = ClientState::parse(&xml, "client_state.xml")
            .expect("state")
            .value;
        (dir, state)
    }

    /// The MD5 `verified` holds for the project's file `name` as it is on disk now.
    fn recorded(dir: &Path, verified: &Verified, name: &str) -> Option<String> {
        let pdir = config::project_dir(dir, URL);
        let k = key(dir, &pdir, name).expect("key");
        let meta = fs::metadata(pdir.join(name)).expect("meta");
        verified.get(&k, Stamp::of(&meta)).map(str::to_owned)
    }

    #[test]
    fn app_files_hashed_ahead_on_several_threads_are_what_one_would_find() {
        let (dir, mut state) = many_app_files(7);
        let mut verified = Verified::default();
        hash_ahead(dir.path(), &state, &mut verified, None, 3);
        assert_eq!(verified.len(), 7, "every app file, the damaged one too");
        for i in 0..7 {
            let want = md5(if i == 1 { BAD } else { GOOD });
            assert_eq!(
                recorded(dir.path(), &verified, &format!("app{i}")),
                Some(want)
            );
        }
        let pdir = config::project_dir(dir.path(), URL);
        // The check that follows reads nothing again and judges as it would have.
        assert!(check(dir.path(), &mut state, &mut verified));
        let status: Vec<i32> = state.projects[0].files.iter().map(|f| f.status).collect();
        assert_eq!(
            status,
            [1, 0, 1, 1, 1, 1, 1],
            "only the damaged copy is fetched again"
        );
        assert!(!pdir.join("app1").exists());
        assert_eq!(verified.len(), 6);
        // Known files are not hashed again: damage behind the record's back goes unseen.
        let app3 = pdir.join("app3");
        overwrite(&app3, BAD, mtime(&app3));
        hash_ahead(dir.path(), &state, &mut verified, None, 3);
        assert_eq!(verified.len(), 6);
        assert_eq!(recorded(dir.path(), &verified, "app3"), Some(md5(GOOD)));
    }

    #[test]
    fn a_file_checked_twice_is_read_once() {
        let (dir, app) = setup();
        let mut state = app_state();
        let mut verified = Verified::default();
        assert!(!check(dir.path(), &mut state, &mut verified), "a good file");
        assert_eq!(verified.len(), 1);

        // Damage the content behind the check's back, keeping length, mtime and inode: a
        // second check that read the file would find the damage. It must not read it.
        overwrite(&app, BAD, mtime(&app));
        assert!(!check(dir.path(), &mut state, &mut verified));
        assert_eq!(state.projects[0].files[0].status, 1);
        assert!(app.exists());
    }

    #[test]
    fn a_file_changed_with_the_same_length_and_a_new_mtime_is_hashed_again() {
        let (dir, app) = setup();
        let mut state = app_state();
        let mut verified = Verified::default();
        assert!(!check(dir.path(), &mut state, &mut verified));

        overwrite(&app, BAD, mtime(&app) + Duration::from_secs(1));
        assert!(
            check(dir.path(), &mut state, &mut verified),
            "the damaged copy went unnoticed"
        );
        assert_eq!(state.projects[0].files[0].status, 0, "downloaded again");
        assert!(!app.exists(), "the damaged copy is deleted");
        assert!(verified.is_empty(), "the deleted file's record is dropped");
        assert!(Verified::load(dir.path()).is_empty(), "and written so");
    }

    #[test]
    fn a_new_copy_under_the_same_name_is_hashed_again() {
        let (dir, app) = setup();
        let mut state = app_state();
        let mut verified = Verified::default();
        assert!(!check(dir.path(), &mut state, &mut verified));

        // Another file renamed into place, with the old one's length and mtime: only the
        // inode differs.
        let t = mtime(&app);
        let other = app.with_file_name("app.new");
        fs::write(&other, BAD).expect("write");
        fs::File::options()
            .write(true)
            .open(&other)
            .and_then(|f| f.set_modified(t))
            .expect("set mtime");
        fs::rename(&other, &app).expect("rename");
        assert!(check(dir.path(), &mut state, &mut verified));
        assert_eq!(state.projects[0].files[0].status, 0);
    }

    #[test]
    fn the_record_survives_a_restart() {
        let (dir, app) = setup();
        let mut state = app_state();
        {
            let mut verified = Verified::load(dir.path());
            assert!(verified.is_empty());
            assert!(!check(dir.path(), &mut state, &mut verified));
        }
        let text = fs::read_to_string(dir.path().join(VERIFIED_FILES)).expect("record");
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(HEADER));
        let line = lines.next().expect("one file");
        assert!(line.starts_with(&md5(GOOD)), "{line}");
        assert!(
            line.ends_with(" projects/127.0.0.1_test/app"),
            "the path relative to the data directory: {line}"
        );
        assert_eq!(lines.next(), None);

        // A new daemon: the record comes from disk, and the file is not read.
        overwrite(&app, BAD, mtime(&app));
        let mut verified = Verified::load(dir.path());
        assert_eq!(verified.len(), 1);
        assert!(!check(dir.path(), &mut state, &mut verified));
        assert_eq!(state.projects[0].files[0].status, 1);
    }

    #[test]
    fn the_record_is_written_only_when_it_changed() {
        let (dir, app) = setup();
        let record = dir.path().join(VERIFIED_FILES);
        let mut state = app_state();
        let mut verified = Verified::default();
        assert!(!check(dir.path(), &mut state, &mut verified));
        assert!(record.exists(), "written after a check that hashed");

        fs::remove_file(&record).expect("rm");
        assert!(!check(dir.path(), &mut state, &mut verified));
        assert!(
            !record.exists(),
            "a check that hashed nothing wrote the record"
        );

        // A file that is gone: its record is dropped, and the record written.
        fs::remove_file(&app).expect("rm");
        assert!(check(dir.path(), &mut state, &mut verified));
        assert!(verified.is_empty());
        let text = fs::read_to_string(&record).expect("record");
        assert_eq!(text, format!("{HEADER}\n"));
    }

    #[test]
    fn a_garbage_record_is_ignored_and_the_check_still_correct() {
        let (dir, app) = setup();
        let record = dir.path().join(VERIFIED_FILES);
        // Damaged, yet a line claims the good MD5 for exactly this file as it is now; the
        // line after it is garbage, so none of the record counts.
        overwrite(&app, BAD, mtime(&app));
        let meta = fs::metadata(&app).expect("stat");
        let s = Stamp::of(&meta);
        let lie = format!(
            "{HEADER}\n{} {} {} {} projects/127.0.0.1_test/app\nnot a record line\n",
            md5(GOOD),
            s.len,
            s.mtime_ns,
            s.ino
        );
        fs::write(&record, &lie).expect("write");
        let mut verified = Verified::load(dir.path());
        assert!(verified.is_empty(), "a malformed record is ignored");
        let mut state = app_state();
        assert!(check(dir.path(), &mut state, &mut verified));
        assert_eq!(state.projects[0].files[0].status, 0, "the damage is found");

        // Bytes that are not even text, and a good file: checked, and the record made anew.
        fs::write(&app, GOOD).expect("write");
        fs::write(&record, [0xff, 0xfe, 0, 1, b'\n', 0x80]).expect("write");
        let mut verified = Verified::load(dir.path());
        assert!(verified.is_empty());
        let mut state = app_state();
        assert!(!check(dir.path(), &mut state, &mut verified));
        assert_eq!(
            Verified::load(dir.path()).len(),
            1,
            "a good record replaces it"
        );

        // The same lie without the garbage line would be believed: the test above is
        // about the garbage.
        overwrite(&app, BAD, mtime(&app));
        let s = Stamp::of(&fs::metadata(&app).expect("stat"));
        let lie = format!(
            "{HEADER}\n{} {} {} {} projects/127.0.0.1_test/app\n",
            md5(GOOD),
            s.len,
            s.mtime_ns,
            s.ino
        );
        fs::write(&record, &lie).expect("write");
        assert_eq!(Verified::load(dir.path()).len(), 1);
    }

    #[test]
    fn a_partial_check_keeps_the_other_projects_records() {
        let (dir, _app) = setup();
        let mut state = app_state();
        let mut verified = Verified::default();
        verified.put(
            "projects/other/x".to_owned(),
            Entry {
                stamp: Stamp {
                    len: 1,
                    mtime_ns: 2,
                    ino: 3,
                },
                md5: md5(b"x"),
            },
        );
        assert!(!check_all(
            dir.path(),
            &mut state,
            &mut verified,
            true,
            Some(URL),
            1.0e9
        ));
        assert_eq!(verified.len(), 2);
        assert_eq!(Verified::load(dir.path()).len(), 2);
        // A full check drops what no project has.
        assert!(!check(dir.path(), &mut state, &mut verified));
        assert_eq!(Verified::load(dir.path()).len(), 1);
    }

    #[test]
    fn a_verified_download_is_recorded_and_its_first_check_is_free() {
        let (dir, app) = setup();
        let state = app_state();
        let mut verified = Verified::default();
        // A length that is not the file's: not what the download wrote, not recorded.
        downloaded(
            dir.path(),
            &state,
            &mut verified,
            URL,
            "app",
            GOOD.len() as u64 + 1,
            &md5(GOOD),
        );
        assert!(verified.is_empty());
        downloaded(
            dir.path(),
            &state,
            &mut verified,
            URL,
            "app",
            GOOD.len() as u64,
            &md5(GOOD),
        );
        assert_eq!(verified.len(), 1);
        verified.save_if_changed(dir.path());

        // After a restart, the first check takes the download's MD5 (it does not read the
        // file, which here is damaged behind its back).
        overwrite(&app, BAD, mtime(&app));
        let mut verified = Verified::load(dir.path());
        let mut state = state;
        assert!(!check(dir.path(), &mut state, &mut verified));
        assert_eq!(state.projects[0].files[0].status, 1);
    }

    #[test]
    fn only_files_the_check_hashes_are_recorded_from_downloads() {
        let (dir, _app) = setup();
        let mut state = app_state();
        let input = config::project_dir(dir.path(), URL).join("in");
        fs::write(&input, b"input").expect("write");
        let mut f = state.projects[0].files[0].clone();
        f.name = "in".to_owned();
        f.md5_cksum = md5(b"input");
        state.projects[0].files.push(f);
        let mut verified = Verified::default();
        downloaded(
            dir.path(),
            &state,
            &mut verified,
            URL,
            "in",
            5,
            &md5(b"input"),
        );
        assert!(
            verified.is_empty(),
            "an input file is never hashed by the check"
        );
    }
}
