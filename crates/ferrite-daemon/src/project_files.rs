//! The link files of a project's own files (`<project_files>`): written in the project
//! directory when a scheduler reply lists the files and when one of them is downloaded, as
//! the official client does. `ferrite_project::project_files` decides what they hold.

use std::fs;
use std::path::Path;

use ferrite_project::project_files::links;
use ferrite_proto::client_state::ProjectState;
use tracing::{debug, warn};

use crate::config;

/// Writes the link files of the project files of `ps` that are present (or only those of
/// `only`); a link that already holds the right text is left alone.
pub fn write_links(dir: &Path, ps: &ProjectState, only: Option<&str>) {
    let pdir = config::project_dir(dir, &ps.project.master_url);
    for l in links(ps, only) {
        let path = pdir.join(&l.open_name);
        let meta = fs::symlink_metadata(&path);
        if meta.as_ref().is_ok_and(|m| m.file_type().is_symlink()) {
            // Never written through: the link file is a plain file of the project's.
            let _ = fs::remove_file(&path);
        } else if fs::read_to_string(&path).is_ok_and(|t| t == l.text) {
            continue;
        }
        match config::write_atomic(&path, &l.text) {
            Ok(()) => debug!(
                project = %ps.project.master_url,
                "linked {} to {}", l.file_name, l.open_name
            ),
            Err(e) => warn!(
                project = %ps.project.master_url,
                "cannot create link file {}: {e}", path.display()
            ),
        }
    }
}
