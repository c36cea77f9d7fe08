//! The start-up file check: every project's files are compared with its directory
//! ([`ferrite_project::existence::check_files`] decides); damaged copies are deleted, what is
//! missing is downloaded again by the transfers, and each finding is logged. A project
//! directory that is gone is made again so the downloads have somewhere to go.

use std::fs;
use std::path::Path;

use ferrite_project::existence::{check_files, FileAction, FileProblem, OnDisk, TaskFate};
use ferrite_proto::client_state::ClientState;
use tracing::{info, warn};

use crate::config;

/// What the project directory `pdir` holds under `name`, hashed when `want_md5`.
fn look(pdir: &Path, name: &str, want_md5: bool) -> OnDisk {
    let path = pdir.join(name);
    let Ok(meta) = fs::metadata(&path) else {
        return OnDisk::Missing;
    };
    if !meta.is_file() {
        return OnDisk::Missing;
    }
    let md5 = if want_md5 {
        match fs::File::open(&path)
            .and_then(|f| ferrite_net::fast_md5::md5_hex_reader(std::io::BufReader::new(f)))
        {
            Ok(m) => Some(m),
            // Unreadable: as good as missing.
            Err(_) => return OnDisk::Missing,
        }
    } else {
        None
    };
    OnDisk::Present {
        len: meta.len(),
        md5,
    }
}

/// Checks the files of every project in `state` (only those in `only`, when given)
/// against data directory `dir`. Returns true when the state changed.
pub fn check_all(
    dir: &Path,
    state: &mut ClientState,
    check_sizes: bool,
    only: Option<&str>,
    now: f64,
) -> bool {
    let mut changed = false;
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
            &mut |name, want_md5| look(&pdir, name, want_md5),
            check_sizes,
            now,
        );
        if check.is_clean() {
            continue;
        }
        changed = true;
        for f in &check.files {
            match (f.action, &f.problem) {
                (FileAction::Refetch, FileProblem::HadError(_)) => {
                    info!(project = %url, "resetting file {}: {}", f.name, f.problem);
                }
                (FileAction::Refetch, problem) => {
                    if *problem != FileProblem::Missing {
                        let _ = fs::remove_file(pdir.join(&f.name));
                    }
                    warn!(project = %url, "file {}: {problem}; it is downloaded again", f.name);
                }
                (FileAction::Lost, problem) => {
                    warn!(project = %url, "file {}: {problem}; it cannot be downloaded again", f.name);
                }
            }
        }
        for (task, fate) in &check.tasks {
            match fate {
                TaskFate::WaitsFor(files) => info!(
                    project = %url,
                    "task {task} waits for {} to be downloaded again",
                    files.join(", ")
                ),
                TaskFate::Error { code, why } => warn!(
                    project = %url,
                    "task {task} fails ({code}): {}; it is reported as an error",
                    why.lines().next().unwrap_or(why)
                ),
            }
        }
    }
    changed
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
