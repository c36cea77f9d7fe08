//! What transfers mean for tasks: the files each task needs moved now, and results moved
//! along after their files changed.

use ferrite_proto::client_state::{FileRef, ProjectLookup, ProjectState, ResultState, TaskResult};
use tracing::{info, warn};

use super::{ERR_RESULT_DOWNLOAD, ERR_RESULT_UPLOAD};

/// What the transfers' turn needs of a project's tasks: for each task waiting for its input
/// (and app) files or uploading its outputs, the positions of those files in `ps.files`; and
/// the project's own files to fetch. Files are neither added nor removed while a plan is
/// used, so the positions hold; the files' and tasks' states are read afresh at each use.
///
/// A plan is renewed from the one before it ([`Plan::renew`]): a task still at the same
/// position, whose workunit, app version and files are still where the old plan found them
/// (checked by comparing their names, no hashing), keeps what was looked up; only the tasks
/// that are new or moved are looked up by name. So a pass after a batch of new tasks looks up
/// those tasks, not every task of the project.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Plan {
    tasks: Vec<Needs>,
    project_files: Vec<usize>,
}

/// One task's files.
#[derive(Debug, Clone, PartialEq)]
struct Needs {
    /// Position in `ps.results`.
    result: usize,
    /// The result's name (what a later plan checks the position against).
    name: String,
    /// Inputs and app files (a task not yet runnable), or outputs (`upload`).
    files: Vec<usize>,
    /// Positions of the workunit and the app version the files came from (downloads).
    workunit: Option<usize>,
    version: Option<usize>,
    /// The task has an app version to run with.
    app_version: bool,
    upload: bool,
}

impl Needs {
    /// Whether what was looked up for result `r` (at this position) still holds: the same
    /// result, workunit, app version and files, each found by name where it was.
    fn still_fits(&self, ps: &ProjectState, r: &TaskResult, upload: bool) -> bool {
        if self.name != r.name || self.upload != upload {
            return false;
        }
        if upload {
            return self.files_named(ps, r.output_files.iter());
        }
        let Some(wu) = self.workunit.and_then(|i| ps.workunits.get(i)) else {
            return false;
        };
        let Some(v) = self.version.and_then(|i| ps.app_versions.get(i)) else {
            return false;
        };
        wu.name == r.wu_name
            && v.app_name == wu.app_name
            && v.platform == r.platform
            && v.version_num == r.version_num
            && v.plan_class == r.plan_class
            && self.files_named(ps, wu.input_files.iter().chain(&v.file_refs))
    }

    /// Whether the files found are, in order, those `refs` name.
    fn files_named<'a>(&self, ps: &ProjectState, refs: impl Iterator<Item = &'a FileRef>) -> bool {
        let mut at = self.files.iter();
        refs.into_iter().all(|fr| {
            at.next()
                .and_then(|&i| ps.files.get(i))
                .is_some_and(|f| f.name == fr.file_name)
        }) && at.next().is_none()
    }

    /// Looks up the files of result `r` (at position `i`) by name.
    fn look_up(look: &ProjectLookup<'_>, i: usize, r: &TaskResult, upload: bool) -> Needs {
        if upload {
            let files = r
                .output_files
                .iter()
                .filter_map(|fr| look.file_index(&fr.file_name))
                .collect();
            return Needs {
                result: i,
                name: r.name.clone(),
                files,
                workunit: None,
                version: None,
                app_version: true,
                upload: true,
            };
        }
        let ps = look.project();
        let workunit = look.workunit_index(&r.wu_name);
        let wu = workunit.and_then(|i| ps.workunits.get(i));
        let version = wu.and_then(|w| {
            look.app_version_index(&w.app_name, &r.platform, r.version_num, &r.plan_class)
        });
        let av = version.and_then(|i| ps.app_versions.get(i));
        let files = wu
            .map(|w| w.input_files.iter())
            .into_iter()
            .flatten()
            .chain(av.into_iter().flat_map(|v| v.file_refs.iter()))
            .filter_map(|fr| look.file_index(&fr.file_name))
            .collect();
        Needs {
            result: i,
            name: r.name.clone(),
            files,
            workunit,
            version,
            app_version: av.is_some(),
            upload: false,
        }
    }
}

impl Plan {
    /// Looks up the files of `ps`'s tasks that wait for transfers.
    pub(crate) fn new(ps: &ProjectState) -> Plan {
        Plan::renew(ps, Plan::default())
    }

    /// The plan of `ps` now, keeping from `old` (a plan of the same project, made before the
    /// state changed) what still holds; the same as [`Plan::new`].
    pub(crate) fn renew(ps: &ProjectState, old: Plan) -> Plan {
        let look = ProjectLookup::new(ps);
        let mut old = old.tasks.into_iter().peekable();
        let mut tasks = Vec::new();
        for (i, r) in ps.results.iter().enumerate() {
            let upload = match r.state {
                ResultState::New | ResultState::FilesDownloading => false,
                ResultState::FilesUploading => true,
                _ => continue,
            };
            while old.next_if(|n| n.result < i).is_some() {}
            let kept = old
                .next_if(|n| n.result == i)
                .filter(|n| n.still_fits(ps, r, upload));
            tasks.push(kept.unwrap_or_else(|| Needs::look_up(&look, i, r, upload)));
        }
        // The project's own files (a logo, ...), fetched whatever the tasks need; few, so
        // found by a sweep rather than an index of every file.
        let project_files = ferrite_project::project_files::to_download(ps)
            .into_iter()
            .filter_map(|name| ps.files.iter().position(|f| f.name == name))
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
        // The files already listed, by position: a bit per file, not a hash per look.
        let mut seen = vec![false; ps.files.len()];
        let mut push = |i: usize, upload: bool| {
            if let Some(s) = seen.get_mut(i).filter(|s| !**s) {
                *s = true;
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

    /// A plan renewed from the last one is the plan made afresh, whatever changed between
    /// them: tasks moved, a workunit gone, an app version's files changed, tasks added,
    /// a task uploading.
    #[test]
    fn a_renewed_plan_is_the_plan_made_afresh() {
        use ferrite_proto::client_state::synthetic;
        let mut state = synthetic(1, 40);
        let ps = &mut state.projects[0];
        for r in &mut ps.results {
            r.state = ResultState::New;
        }
        let first = Plan::new(ps);
        assert!(first.tasks.len() >= 40, "{}", first.tasks.len());
        let fresh = |ps: &ProjectState| Plan::new(ps);
        // Nothing changed: everything is kept.
        let again = Plan::renew(ps, first);
        assert_eq!(again, fresh(ps));
        // Tasks moved and added, a workunit removed, an app version's files changed, a
        // task uploading.
        ps.results.swap(0, 7);
        ps.results.swap(3, 30);
        let mut extra = ps.results[5].clone();
        extra.name = "an_extra_task".to_owned();
        ps.results.insert(10, extra);
        let gone = ps.results[12].wu_name.clone();
        ps.workunits.retain(|w| w.name != gone);
        ps.files.swap(1, 20);
        if let Some(v) = ps.app_versions.first_mut() {
            v.file_refs.reverse();
            v.file_refs.push(FileRef {
                file_name: ps.files[2].name.clone(),
                ..FileRef::default()
            });
        }
        ps.results[20].state = ResultState::FilesUploading;
        ps.results[21].state = ResultState::FilesDownloaded;
        let renewed = Plan::renew(ps, again);
        assert_eq!(renewed, fresh(ps));
        // And the results are moved along alike.
        let mut other = ps.clone();
        let a = renewed.update(ps, 9.0);
        let b = fresh(&other).update(&mut other, 9.0);
        assert_eq!(a, b);
        assert_eq!(format!("{:?}", ps.results), format!("{:?}", other.results));
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

    /// Files several waiting tasks name are wanted once each, in the order the tasks first
    /// name them, as a set of the positions listed would have them.
    #[test]
    fn a_file_many_tasks_need_is_wanted_once() {
        use ferrite_proto::client_state::synthetic;
        let mut state = synthetic(1, 30);
        let ps = &mut state.projects[0];
        for r in &mut ps.results {
            r.state = ResultState::New;
        }
        for f in &mut ps.files {
            f.status = 0;
        }
        // Every third workunit takes the first one's inputs too.
        let shared = ps.workunits[0].input_files.clone();
        for w in ps.workunits.iter_mut().skip(1).step_by(3) {
            w.input_files.extend(shared.iter().cloned());
        }
        let plan = Plan::new(ps);
        let wanted = plan.wanted(ps);
        let mut seen = std::collections::HashSet::new();
        let mut expected = Vec::new();
        for n in &plan.tasks {
            for &i in &n.files {
                if ps.files[i].download_urls.is_empty() {
                    continue;
                }
                if seen.insert(i) {
                    expected.push((i, false));
                }
            }
        }
        assert!(expected.len() > 30, "{}", expected.len());
        assert_eq!(wanted, expected);
    }
}
