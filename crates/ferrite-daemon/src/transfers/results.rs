//! What transfers mean for tasks: the files each task needs moved now, and results moved
//! along after their files changed.

use ferrite_proto::client_state::{FileInfo, ProjectState, ResultState};
use tracing::{info, warn};

use super::{ERR_RESULT_DOWNLOAD, ERR_RESULT_UPLOAD};

/// Files of `ps` that need a transfer now: inputs and app files of tasks not yet runnable,
/// outputs of tasks whose computation finished, project files not yet present.
pub(super) fn wanted(ps: &ProjectState) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    let mut push = |name: &str, upload: bool| {
        if !out.iter().any(|(n, _)| n == name) {
            out.push((name.to_owned(), upload));
        }
    };
    for r in &ps.results {
        match r.state {
            ResultState::New | ResultState::FilesDownloading => {
                let wu = ps.workunit(&r.wu_name).map(|w| w.input_files.iter());
                let av = ps.app_version_of(r).map(|v| v.file_refs.iter());
                for fr in wu.into_iter().flatten().chain(av.into_iter().flatten()) {
                    if let Some(f) = ps.file(&fr.file_name) {
                        if f.status == 0 && !f.download_urls.is_empty() {
                            push(&f.name, false);
                        }
                    }
                }
            }
            ResultState::FilesUploading => {
                for fr in &r.output_files {
                    if let Some(f) = ps.file(&fr.file_name) {
                        if f.status == 1 && !f.uploaded && !f.upload_urls.is_empty() {
                            push(&f.name, true);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    // The project's own files (a logo, ...), fetched whatever the tasks need.
    for name in ferrite_project::project_files::to_download(ps) {
        push(name, false);
    }
    out
}

/// Moves results along after file changes: all inputs present → runnable; a needed file in
/// error → the task fails and is reported; all outputs uploaded → ready to report; an
/// output that failed for good → upload failed, reported.
pub fn update_results(ps: &mut ProjectState, now: f64) -> bool {
    // (result index, new state, error code and message)
    type Update = (usize, ResultState, Option<(i32, String)>);
    let mut updates: Vec<Update> = Vec::new();
    for (i, r) in ps.results.iter().enumerate() {
        match r.state {
            ResultState::New | ResultState::FilesDownloading => {
                let wu = ps.workunit(&r.wu_name).map(|w| w.input_files.iter());
                let av = ps.app_version_of(r).map(|v| v.file_refs.iter());
                let files: Vec<&FileInfo> = wu
                    .into_iter()
                    .flatten()
                    .chain(av.into_iter().flatten())
                    .filter_map(|fr| ps.file(&fr.file_name))
                    .collect();
                if let Some(bad) = files.iter().find(|f| f.status < 0) {
                    let why = format!(
                        "file {} failed: {}",
                        bad.name,
                        bad.error_msg.as_deref().unwrap_or("transfer error")
                    );
                    updates.push((
                        i,
                        ResultState::ComputeError,
                        Some((ERR_RESULT_DOWNLOAD, why)),
                    ));
                } else if files.iter().all(|f| f.status == 1) && ps.app_version_of(r).is_some() {
                    updates.push((i, ResultState::FilesDownloaded, None));
                }
            }
            ResultState::FilesUploading => {
                let outs: Vec<&FileInfo> = r
                    .output_files
                    .iter()
                    .filter_map(|fr| ps.file(&fr.file_name))
                    .collect();
                if let Some(bad) = outs.iter().find(|f| f.status < 0 && !f.uploaded) {
                    let why = format!(
                        "<upload_error>\n    <file_name>{}</file_name>\n    <error_code>{}</error_code>\n</upload_error>",
                        bad.name, bad.status
                    );
                    updates.push((i, ResultState::UploadFailed, Some((ERR_RESULT_UPLOAD, why))));
                } else if outs.iter().all(|f| f.uploaded || f.upload_urls.is_empty()) {
                    updates.push((i, ResultState::FilesUploaded, None));
                }
            }
            _ => {}
        }
    }
    let changed = !updates.is_empty();
    for (i, st, err) in updates {
        let Some(r) = ps.results.get_mut(i) else {
            continue;
        };
        match err {
            Some((code, why)) => {
                warn!(project = %ps.project.master_url, "task {}: {why}", r.name);
                if r.exit_status == 0 {
                    r.exit_status = code;
                }
                if st == ResultState::ComputeError {
                    r.stderr_out
                        .push_str(&format!("<message>\n{why}\n</message>\n"));
                } else {
                    r.stderr_out.push_str(&why);
                    r.stderr_out.push('\n');
                }
                r.state = st;
                r.ready_to_report = true;
                r.completed_time = now;
            }
            None => {
                r.state = st;
                if st == ResultState::FilesUploaded {
                    r.ready_to_report = true;
                    info!(project = %ps.project.master_url, "task {} uploaded; ready to report", r.name);
                }
            }
        }
    }
    changed
}
