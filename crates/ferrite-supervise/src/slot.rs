//! Slot directories (`slots/N`): allocation, cleaning, and the files a task finds in its slot.
//!
//! The [`SlotManager`] hands out the lowest free slot number, empties a reused directory before
//! handing it out and never gives one number to two live tasks. [`Slot::setup`] writes the
//! logical → physical file mapping (BOINC `<soft_link>` files, real symlinks or copies), the
//! `init_data.xml` text given by the caller, and an empty `stderr.txt`. Names that come from a
//! project server are checked: no `/`, no `..`, nothing absolute.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The init file the app reads at `boinc_init`.
pub const INIT_DATA_FILE: &str = "init_data.xml";
/// The app's stderr.
pub const STDERR_FILE: &str = "stderr.txt";
/// Marker written once the slot is fully populated.
pub const SETUP_COMPLETE_FILE: &str = "boinc_setup_complete";
/// Written by the API in `boinc_finish`.
pub const FINISH_FILE: &str = "boinc_finish_called";
/// Written by the API in `boinc_temporary_exit`.
pub const TEMPORARY_EXIT_FILE: &str = "boinc_temporary_exit";
/// The most of `stderr.txt` the official client keeps (63 KiB).
pub const MAX_STDERR_LEN: u64 = 63 * 1024;

/// Errors of slot handling.
#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    /// A file or directory name from the server is not a single plain name.
    #[error("refusing unsafe file name {0:?}")]
    UnsafeName(String),
    /// Every slot number up to the limit is taken.
    #[error("no free slot (limit {0})")]
    NoFreeSlot(u32),
    /// The slot number is already held by a live task.
    #[error("slot {0} is already in use")]
    InUse(u32),
    /// A filesystem operation failed.
    #[error("cannot {op} {path}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path concerned.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SlotError + 'a {
    move |source| SlotError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Checks that `name` is one plain path component (no `/`, not `.`/`..`, not empty, no NUL).
pub fn check_name(name: &str) -> Result<(), SlotError> {
    let bad = name.is_empty()
        || name == "."
        || name == ".."
        || name.contains('/')
        || name.contains('\0')
        || name.contains('\\');
    if bad {
        Err(SlotError::UnsafeName(name.to_owned()))
    } else {
        Ok(())
    }
}

/// How a logical name is made visible in the slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMode {
    /// A small text file `<soft_link>../../projects/P/F</soft_link>\n` (the BOINC default).
    SoftLinkFile,
    /// A real symlink to `../../projects/P/F` (projects that sent `<use_symlinks/>`).
    Symlink,
    /// A copy of the project file (`<copy_file/>`); for outputs nothing is created at start and
    /// the slot file is moved to the project directory when the task ends.
    Copy,
}

/// Whether a file is read or written by the app (matters only for [`LinkMode::Copy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole {
    /// Input file or app-version file: must exist in the project directory.
    Input,
    /// Output file: written by the app.
    Output,
}

/// One entry of the logical → physical mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotFile {
    /// Name the app opens (the FILE_REF open name, or the physical name when there is none).
    pub open_name: String,
    /// Project directory name under `projects/` (the escaped master URL).
    pub project_dir: String,
    /// Physical file name inside the project directory.
    pub file_name: String,
    /// Link file, symlink or copy.
    pub mode: LinkMode,
    /// Input or output.
    pub role: FileRole,
}

impl SlotFile {
    /// The path from the slot to the physical file, as BOINC writes it.
    pub fn relative_target(&self) -> String {
        format!("../../projects/{}/{}", self.project_dir, self.file_name)
    }

    fn check(&self) -> Result<(), SlotError> {
        check_name(&self.open_name)?;
        check_name(&self.project_dir)?;
        check_name(&self.file_name)
    }
}

/// The text of a BOINC soft-link file pointing at `target`.
pub fn soft_link_text(target: &str) -> String {
    format!("<soft_link>{target}</soft_link>\n")
}

/// The target of a soft-link file's text (first line), if it is one.
pub fn parse_soft_link(text: &str) -> Option<&str> {
    let line = text.lines().next()?;
    let start = line.find("<soft_link>")? + "<soft_link>".len();
    let end = start + line[start..].find("</soft_link>")?;
    Some(&line[start..end])
}

/// Allocates slot directories under `<data_dir>/slots`.
#[derive(Debug)]
pub struct SlotManager {
    /// The client data directory; `projects/` and `slots/` live under it.
    data_dir: PathBuf,
    /// Slot numbers held by live (or resumable) tasks; never handed out twice.
    in_use: Mutex<BTreeSet<u32>>,
    /// Highest slot number + 1 that may be used (BOINC: 100 × usable CPUs).
    limit: u32,
}

impl SlotManager {
    /// A manager for `<data_dir>/slots` allowing slot numbers below `limit`.
    pub fn new(data_dir: impl Into<PathBuf>, limit: u32) -> SlotManager {
        SlotManager {
            data_dir: data_dir.into(),
            in_use: Mutex::new(BTreeSet::new()),
            limit,
        }
    }

    /// The `slots` directory.
    pub fn slots_dir(&self) -> PathBuf {
        self.data_dir.join("slots")
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.in_use
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the lowest free slot number, empties (or creates) its directory and marks it used.
    /// A directory that cannot be emptied is skipped, as the official client does.
    pub fn allocate(&self) -> Result<Slot, SlotError> {
        let mut used = self.lock();
        let slots_dir = self.slots_dir();
        fs::create_dir_all(&slots_dir).map_err(io_err("create", &slots_dir))?;
        for n in 0..self.limit {
            if used.contains(&n) {
                continue;
            }
            let dir = slots_dir.join(n.to_string());
            let ready = if dir.exists() {
                empty_dir(&dir).is_ok()
            } else {
                fs::create_dir(&dir).is_ok()
            };
            if ready {
                used.insert(n);
                return Ok(Slot { number: n, dir });
            }
            tracing::warn!(slot = n, "slot directory could not be emptied; skipping it");
        }
        Err(SlotError::NoFreeSlot(self.limit))
    }

    /// Claims slot `n` for a task that already owns it (restart after a daemon restart or a
    /// preemption), keeping its contents (the app's checkpoint files live there).
    pub fn claim(&self, n: u32) -> Result<Slot, SlotError> {
        let mut used = self.lock();
        if used.contains(&n) {
            return Err(SlotError::InUse(n));
        }
        let dir = self.slots_dir().join(n.to_string());
        fs::create_dir_all(&dir).map_err(io_err("create", &dir))?;
        used.insert(n);
        Ok(Slot { number: n, dir })
    }

    /// Whether slot `n` is held.
    pub fn is_in_use(&self, n: u32) -> bool {
        self.lock().contains(&n)
    }

    /// Ends a task's use of its slot for good: empties the directory and frees the number.
    pub fn release(&self, slot: Slot) -> Result<(), SlotError> {
        let res = empty_dir(&slot.dir);
        self.lock().remove(&slot.number);
        res
    }

    /// Frees the number but keeps the contents (the task will restart in this slot later and
    /// will [`claim`](Self::claim) it again).
    pub fn park(&self, slot: Slot) {
        self.lock().remove(&slot.number);
    }
}

/// Removes everything inside `dir` (not following symlinks), keeping `dir` itself.
pub fn empty_dir(dir: &Path) -> Result<(), SlotError> {
    let entries = fs::read_dir(dir).map_err(io_err("read", dir))?;
    for entry in entries {
        let entry = entry.map_err(io_err("read", dir))?;
        let path = entry.path();
        let ft = entry.file_type().map_err(io_err("stat", &path))?;
        if ft.is_dir() {
            fs::remove_dir_all(&path).map_err(io_err("remove", &path))?;
        } else {
            fs::remove_file(&path).map_err(io_err("remove", &path))?;
        }
    }
    Ok(())
}

/// One slot directory held by a task.
#[derive(Debug, PartialEq, Eq)]
pub struct Slot {
    /// The slot number (`slots/N`), saved in the task's state.
    number: u32,
    /// The directory, `<data_dir>/slots/N`.
    dir: PathBuf,
}

impl Slot {
    /// The slot number.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// The slot directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The data directory (two levels up).
    fn data_dir(&self) -> PathBuf {
        self.dir.join("..").join("..")
    }

    /// Whether a previous setup completed (the setup marker exists).
    pub fn is_setup_complete(&self) -> bool {
        self.dir.join(SETUP_COMPLETE_FILE).exists()
    }

    /// Populates the slot: the file mapping (existing entries are kept, so this is
    /// idempotent), `stderr.txt` and the setup marker; then writes `init_data.xml` as given.
    /// Every name is checked before anything is written.
    pub fn setup(&self, files: &[SlotFile], init_data_xml: &str) -> Result<(), SlotError> {
        for f in files {
            f.check()?;
        }
        if !self.is_setup_complete() {
            for f in files {
                self.setup_file(f)?;
            }
            let stderr = self.dir.join(STDERR_FILE);
            fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&stderr)
                .map_err(io_err("create", &stderr))?;
            let marker = self.dir.join(SETUP_COMPLETE_FILE);
            fs::write(&marker, b"").map_err(io_err("write", &marker))?;
        }
        self.write_init_data(init_data_xml)
    }

    fn setup_file(&self, f: &SlotFile) -> Result<(), SlotError> {
        let entry = self.dir.join(&f.open_name);
        if entry.symlink_metadata().is_ok() {
            return Ok(());
        }
        let target = f.relative_target();
        match f.mode {
            LinkMode::SoftLinkFile => {
                fs::write(&entry, soft_link_text(&target)).map_err(io_err("write", &entry))
            }
            LinkMode::Symlink => {
                std::os::unix::fs::symlink(&target, &entry).map_err(io_err("symlink", &entry))
            }
            LinkMode::Copy => match f.role {
                FileRole::Output => Ok(()),
                FileRole::Input => {
                    let src = self
                        .data_dir()
                        .join("projects")
                        .join(&f.project_dir)
                        .join(&f.file_name);
                    // Copied under a temporary name and renamed into place: a setup cut
                    // short (the daemon killed mid-copy) leaves no partial input that the
                    // next setup would keep as it is (entries that exist are kept).
                    let part = self.dir.join(format!("{}.ferrite-copy", f.open_name));
                    fs::copy(&src, &part).map_err(io_err("copy", &src))?;
                    fs::rename(&part, &entry).map_err(io_err("rename", &part))
                }
            },
        }
    }

    /// Writes `init_data.xml` (before every start and when prefs change).
    pub fn write_init_data(&self, xml: &str) -> Result<(), SlotError> {
        let path = self.dir.join(INIT_DATA_FILE);
        fs::write(&path, xml).map_err(io_err("write", &path))
    }

    /// Moves copy-mode outputs from the slot to the project directory (when the task ends for
    /// good). Missing outputs are skipped; the caller finds them absent later. An output that
    /// is not a regular file (a symlink the app made, which could point at any file of the
    /// host or of another project) is never moved: it is removed and counts as missing.
    pub fn move_copied_outputs(&self, files: &[SlotFile]) -> Result<(), SlotError> {
        for f in files {
            f.check()?;
            if f.mode != LinkMode::Copy || f.role != FileRole::Output {
                continue;
            }
            let src = self.dir.join(&f.open_name);
            match src.symlink_metadata() {
                Err(_) => continue,
                Ok(m) if m.is_file() => {}
                Ok(m) => {
                    tracing::warn!("output {} is not a regular file; not kept", src.display());
                    if m.is_dir() {
                        let _ = fs::remove_dir_all(&src);
                    } else {
                        let _ = fs::remove_file(&src);
                    }
                    continue;
                }
            }
            let dst = self
                .data_dir()
                .join("projects")
                .join(&f.project_dir)
                .join(&f.file_name);
            fs::rename(&src, &dst).map_err(io_err("rename", &src))?;
        }
        Ok(())
    }

    /// The app's `stderr.txt`: its last 63 KiB, or the first 63 KiB if `head` is set (cc_config
    /// `stderr_head`). Missing file reads as empty.
    pub fn read_stderr(&self, head: bool) -> Result<String, SlotError> {
        read_stderr_file(&self.dir.join(STDERR_FILE), head)
    }

    /// Size in bytes of everything in the slot (symlinks not followed).
    pub fn disk_usage(&self) -> Result<u64, SlotError> {
        crate::limits::dir_size(&self.dir).map_err(io_err("measure", &self.dir))
    }
}

/// Reads up to [`MAX_STDERR_LEN`] bytes of a stderr file (tail unless `head`).
pub fn read_stderr_file(path: &Path, head: bool) -> Result<String, SlotError> {
    let mut file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => return Err(io_err("open", path)(e)),
    };
    let len = file.metadata().map_err(io_err("stat", path))?.len();
    if !head && len > MAX_STDERR_LEN {
        file.seek(SeekFrom::Start(len - MAX_STDERR_LEN))
            .map_err(io_err("seek", path))?;
    }
    let mut buf = Vec::new();
    file.take(MAX_STDERR_LEN)
        .read_to_end(&mut buf)
        .map_err(io_err("read", path))?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_refused() {
        for bad in ["", ".", "..", "../x", "/etc/passwd", "a/b", "a\0b", "a\\b"] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["in", "out.gz", "..hidden", "x..y", "fixture_app_2.00.sh"] {
            assert!(check_name(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn soft_link_text_round_trip() {
        let t = soft_link_text("../../projects/127.0.0.1_18080/fixture_app_2.00.sh");
        assert_eq!(
            t,
            "<soft_link>../../projects/127.0.0.1_18080/fixture_app_2.00.sh</soft_link>\n"
        );
        assert_eq!(
            parse_soft_link(&t),
            Some("../../projects/127.0.0.1_18080/fixture_app_2.00.sh")
        );
        assert_eq!(parse_soft_link("plain data"), None);
    }
}
