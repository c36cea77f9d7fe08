//! What transfers mean for tasks: the files each task needs moved now, and results moved
//! along after their files changed.

use std::collections::HashSet;

use ferrite_proto::client_state::{FileInfo, ProjectLookup, ProjectState, ResultState};
use tracing::{info, warn};

use super::{ERR_RESULT_DOWNLOAD, ERR_RESULT_UPLOAD};

/// Files of `ps` that need a transfer now: inputs and app files of tasks not yet runnable,
/// outputs of tasks whose computation finished, project files not yet present; each once,
/// in the order the tasks name them, as (position in `ps.files`, upload). Every lookup goes
/// through an index: a pass stays linear in the number of tasks.
pub(super) fn wanted(ps: &ProjectState) -> Vec<(usize, bool)> {
    let look = ProjectLookup::new(ps);
    let mut out: Vec<(usize, bool)> = Vec::new();
    let mut seen: HashSet<usize> = HashSet::new();
    let mut push = |i: usize, upload: bool| {
        if seen.insert(i) {
            out.push((i, upload));
        }
    };
    for r in &ps.results {
        match r.state {
            ResultState::New | ResultState::FilesDownloading => {
                let wu = look.workunit(&r.wu_name).map(|w| w.input_files.iter());
                let av = look.app_version_of(r).map(|v| v.file_refs.iter());
                for fr in wu.into_iter().flatten().chain(av.into_iter().flatten()) {
                    let Some(i) = look.file_index(&fr.file_name) else {
                        continue;
                    };
                    let f = &ps.files[i];
                    if f.status == 0 && !f.download_urls.is_empty() {
                        push(i, false);
                    }
                }
            }
            ResultState::FilesUploading => {
                for fr in &r.output_files {
                    let Some(i) = look.file_index(&fr.file_name) else {
                        continue;
                    };
                    let f = &ps.files[i];
                    if f.status == 1 && !f.uploaded && !f.upload_urls.is_empty() {
                        push(i, true);
                    }
                }
            }
            _ => {}
        }
    }
    // The project's own files (a logo, ...), fetched whatever the tasks need.
    for name in ferrite_project::project_files::to_download(ps) {
        if let Some(i) = look.file_index(name) {
            push(i, false);
        }
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
    let look = ProjectLookup::new(ps);
    for (i, r) in ps.results.iter().enumerate() {
        match r.state {
            ResultState::New | ResultState::FilesDownloading => {
                let av = look.app_version_of(r);
                let wu = look.workunit(&r.wu_name).map(|w| w.input_files.iter());
                let files: Vec<&FileInfo> = wu
                    .into_iter()
                    .flatten()
                    .chain(av.into_iter().flat_map(|v| v.file_refs.iter()))
                    .filter_map(|fr| look.file(&fr.file_name))
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
                } else if files.iter().all(|f| f.status == 1) && av.is_some() {
                    updates.push((i, ResultState::FilesDownloaded, None));
                }
            }
            ResultState::FilesUploading => {
                let outs: Vec<&FileInfo> = r
                    .output_files
                    .iter()
                    .filter_map(|fr| look.file(&fr.file_name))
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
    drop(look);
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
                    r.completed_time = now;
                    info!(project = %ps.project.master_url, "task {} uploaded; ready to report", r.name);
                }
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_proto::client_state::{FileRef, TaskResult};

    #[test]
    fn a_result_is_complete_when_its_outputs_are_uploaded() {
        let mut ps = ProjectState::default();
        ps.files.push(FileInfo {
            name: "out_0".to_owned(),
            uploaded: true,
            ..FileInfo::default()
        });
        ps.results.push(TaskResult {
            name: "r_0".to_owned(),
            state: ResultState::FilesUploading,
            output_files: vec![FileRef {
                file_name: "out_0".to_owned(),
                ..FileRef::default()
            }],
            ..TaskResult::default()
        });
        assert!(update_results(&mut ps, 500.0));
        let r = &ps.results[0];
        assert_eq!(r.state, ResultState::FilesUploaded);
        assert!(r.ready_to_report);
        // The official client's `completed_time`: when the uploads ended, not when the app did.
        assert_eq!(r.completed_time, 500.0);
    }
}
