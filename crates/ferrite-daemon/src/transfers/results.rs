//! What transfers mean for tasks: the files each task needs moved now, and results moved
//! along after their files changed.

use std::collections::HashSet;

use ferrite_proto::client_state::{ProjectLookup, ProjectState, ResultState};
use tracing::{info, warn};

use super::{ERR_RESULT_DOWNLOAD, ERR_RESULT_UPLOAD};

/// What the transfers' turn needs of a project's tasks, looked up once per turn through one
/// index: for each task waiting for its input (and app) files or uploading its outputs, the
/// positions of those files in `ps.files`; and the project's own files to fetch. Files are
/// neither added nor removed while a plan is used, so the positions hold; the files' and
/// tasks' states are read afresh at each use.
pub(super) struct Plan {
    tasks: Vec<Needs>,
    project_files: Vec<usize>,
}

/// One task's files.
struct Needs {
    /// Position in `ps.results`.
    result: usize,
    /// Inputs and app files (a task not yet runnable), or outputs (`upload`).
    files: Vec<usize>,
    /// The task has an app version to run with.
    app_version: bool,
    upload: bool,
}

impl Plan {
    /// Looks up the files of `ps`'s tasks that wait for transfers.
    pub(super) fn new(ps: &ProjectState) -> Plan {
        let look = ProjectLookup::new(ps);
        let mut tasks = Vec::new();
        for (i, r) in ps.results.iter().enumerate() {
            match r.state {
                ResultState::New | ResultState::FilesDownloading => {
                    let av = look.app_version_of(r);
                    let wu = look.workunit(&r.wu_name).map(|w| w.input_files.iter());
                    let files = wu
                        .into_iter()
                        .flatten()
                        .chain(av.into_iter().flat_map(|v| v.file_refs.iter()))
                        .filter_map(|fr| look.file_index(&fr.file_name))
                        .collect();
                    tasks.push(Needs {
                        result: i,
                        files,
                        app_version: av.is_some(),
                        upload: false,
                    });
                }
                ResultState::FilesUploading => {
                    let files = r
                        .output_files
                        .iter()
                        .filter_map(|fr| look.file_index(&fr.file_name))
                        .collect();
                    tasks.push(Needs {
                        result: i,
                        files,
                        app_version: true,
                        upload: true,
                    });
                }
                _ => {}
            }
        }
        // The project's own files (a logo, ...), fetched whatever the tasks need.
        let project_files = ferrite_project::project_files::to_download(ps)
            .into_iter()
            .filter_map(|name| look.file_index(name))
            .collect();
        Plan {
            tasks,
            project_files,
        }
    }

    /// The output files of tasks uploading them (positions in `ps.files`).
    pub(super) fn outputs(&self) -> impl Iterator<Item = usize> + '_ {
        self.tasks
            .iter()
            .filter(|n| n.upload)
            .flat_map(|n| n.files.iter().copied())
    }

    /// Files of `ps` that need a transfer now: inputs and app files of tasks not yet
    /// runnable, outputs of tasks whose computation finished, project files not yet present;
    /// each once, in the order the tasks name them, as (position in `ps.files`, upload).
    pub(super) fn wanted(&self, ps: &ProjectState) -> Vec<(usize, bool)> {
        let mut out: Vec<(usize, bool)> = Vec::new();
        let mut seen: HashSet<usize> = HashSet::new();
        let mut push = |i: usize, upload: bool| {
            if seen.insert(i) {
                out.push((i, upload));
            }
        };
        for n in &self.tasks {
            let Some(r) = ps.results.get(n.result) else {
                continue;
            };
            let waiting = match r.state {
                ResultState::New | ResultState::FilesDownloading => !n.upload,
                ResultState::FilesUploading => n.upload,
                _ => false,
            };
            if !waiting {
                continue;
            }
            for &i in &n.files {
                let Some(f) = ps.files.get(i) else { continue };
                let due = if n.upload {
                    f.status == 1 && !f.uploaded && !f.upload_urls.is_empty()
                } else {
                    f.status == 0 && !f.download_urls.is_empty()
                };
                if due {
                    push(i, n.upload);
                }
            }
        }
        for &i in &self.project_files {
            push(i, false);
        }
        out
    }

    /// Moves results along after file changes: all inputs present → runnable; a needed
    /// file in error → the task fails and is reported; all outputs uploaded → ready to
    /// report; an output that failed for good → upload failed, reported.
    pub(super) fn update(&self, ps: &mut ProjectState, now: f64) -> bool {
        // (result index, new state, error code and message)
        type Update = (usize, ResultState, Option<(i32, String)>);
        let mut updates: Vec<Update> = Vec::new();
        for n in &self.tasks {
            let Some(r) = ps.results.get(n.result) else {
                continue;
            };
            let files = n.files.iter().filter_map(|&i| ps.files.get(i));
            match r.state {
                ResultState::New | ResultState::FilesDownloading if !n.upload => {
                    if let Some(bad) = files.clone().find(|f| f.status < 0) {
                        let why = format!(
                            "file {} failed: {}",
                            bad.name,
                            bad.error_msg.as_deref().unwrap_or("transfer error")
                        );
                        updates.push((
                            n.result,
                            ResultState::ComputeError,
                            Some((ERR_RESULT_DOWNLOAD, why)),
                        ));
                    } else if n.app_version && files.clone().all(|f| f.status == 1) {
                        updates.push((n.result, ResultState::FilesDownloaded, None));
                    }
                }
                ResultState::FilesUploading if n.upload => {
                    if let Some(bad) = files.clone().find(|f| f.status < 0 && !f.uploaded) {
                        let why = format!(
                            "<upload_error>\n    <file_name>{}</file_name>\n    <error_code>{}</error_code>\n</upload_error>",
                            bad.name, bad.status
                        );
                        updates.push((
                            n.result,
                            ResultState::UploadFailed,
                            Some((ERR_RESULT_UPLOAD, why)),
                        ));
                    } else if files
                        .clone()
                        .all(|f| f.uploaded || f.upload_urls.is_empty())
                    {
                        updates.push((n.result, ResultState::FilesUploaded, None));
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
                        r.completed_time = now;
                        info!(project = %ps.project.master_url, "task {} uploaded; ready to report", r.name);
                    }
                }
            }
        }
        changed
    }
}

/// Moves `ps`'s results along after file changes (see [`Plan::update`]).
pub fn update_results(ps: &mut ProjectState, now: f64) -> bool {
    Plan::new(ps).update(ps, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_proto::client_state::{FileInfo, FileRef, TaskResult};

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

    /// One plan serves the whole turn: the files it looked up are read afresh, so a task
    /// whose input arrived is moved on and no longer wants a download, while one whose
    /// input is missing still does.
    #[test]
    fn a_turns_plan_reads_the_files_states_afresh() {
        use ferrite_proto::client_state::{App, AppVersion, Workunit};
        let mut ps = ProjectState::default();
        ps.apps.push(App {
            name: "a".to_owned(),
            ..App::default()
        });
        ps.app_versions.push(AppVersion {
            app_name: "a".to_owned(),
            ..AppVersion::default()
        });
        for t in 0..2 {
            ps.files.push(FileInfo {
                name: format!("in_{t}"),
                download_urls: vec!["http://127.0.0.1:9/in".to_owned()],
                ..FileInfo::default()
            });
            ps.workunits.push(Workunit {
                name: format!("wu_{t}"),
                app_name: "a".to_owned(),
                input_files: vec![FileRef {
                    file_name: format!("in_{t}"),
                    ..FileRef::default()
                }],
                ..Workunit::default()
            });
            ps.results.push(TaskResult {
                name: format!("r_{t}"),
                wu_name: format!("wu_{t}"),
                state: ResultState::New,
                ..TaskResult::default()
            });
        }
        let plan = Plan::new(&ps);
        assert_eq!(plan.wanted(&ps), vec![(0, false), (1, false)]);
        ps.files[0].status = 1;
        assert!(plan.update(&mut ps, 10.0));
        assert_eq!(ps.results[0].state, ResultState::FilesDownloaded);
        assert_eq!(ps.results[1].state, ResultState::New);
        assert_eq!(plan.wanted(&ps), vec![(1, false)]);
        assert!(!plan.update(&mut ps, 11.0), "nothing more changed");
    }
}
