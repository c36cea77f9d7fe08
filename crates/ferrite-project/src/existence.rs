//! The start-up check of a project's files (`client/cs_files.cpp:
//! CLIENT_STATE::check_file_existence`, `FILE_INFO::check_size`): every file the state file
//! says is present must exist with its size, and app-version files with a known MD5 must
//! also have that MD5. A file that is missing or damaged is marked not present, so the
//! normal download path fetches it again; the tasks that need it wait for that download.
//! Only what cannot come back is an error: a needed file with no download URL, or an
//! output of a finished computation that is gone before its upload. A download that
//! failed before is reset, as the official client does, so a later task can fetch it again.
//!
//! The daemon looks at the disk through the `look` callback and carries out the
//! [`FileCheck`] (deleting damaged files, logging each finding); the decision is here.

use std::collections::HashSet;

use ferrite_proto::client_state::{FileInfo, ProjectLookup, ProjectState, ResultState};

/// `ERR_FILE_MISSING`: the status a file takes when it is gone and cannot come back.
pub const ERR_FILE_MISSING: i32 = -163;
/// `ERR_RESULT_DOWNLOAD`: a task's input or app file cannot be had.
pub const ERR_RESULT_DOWNLOAD: i32 = -186;
/// `ERR_RESULT_UPLOAD`: a task's output cannot be uploaded.
pub const ERR_RESULT_UPLOAD: i32 = -187;

/// What the disk holds under a file's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnDisk {
    /// Nothing (or not a regular file).
    Missing,
    /// A regular file of `len` bytes; `md5` (lowercase hex) when it was asked for.
    Present {
        /// Length in bytes.
        len: u64,
        /// MD5 of the content, when the check asked for it.
        md5: Option<String>,
    },
}

/// What is wrong with a file.
#[derive(Debug, Clone, PartialEq)]
pub enum FileProblem {
    /// Not on disk.
    Missing,
    /// On disk with another size than `nbytes`.
    WrongSize {
        /// `nbytes`.
        expected: f64,
        /// What is on disk.
        got: u64,
    },
    /// An app-version file whose content is not the one verified.
    WrongMd5 {
        /// `md5_cksum`.
        expected: String,
        /// What is on disk.
        got: String,
    },
    /// Its download failed before (status `code`).
    HadError(i32),
}

impl std::fmt::Display for FileProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileProblem::Missing => write!(f, "missing"),
            FileProblem::WrongSize { expected, got } => {
                write!(f, "wrong size: expected {expected} bytes, got {got}")
            }
            FileProblem::WrongMd5 { expected, got } => {
                write!(f, "wrong MD5: expected {expected}, got {got}")
            }
            FileProblem::HadError(code) => write!(f, "its download failed before ({code})"),
        }
    }
}

/// What becomes of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileAction {
    /// Marked not present: downloaded again when a task needs it. What is on disk under
    /// its name (a damaged copy) must be deleted.
    Refetch,
    /// Gone for good: an output not yet uploaded (status [`ERR_FILE_MISSING`]), or a file
    /// with no download URL (marked not present; the tasks that need it fail).
    Lost,
}

/// One file found wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct FileFinding {
    /// The file's name in the project directory.
    pub name: String,
    /// What is wrong.
    pub problem: FileProblem,
    /// What happens to it.
    pub action: FileAction,
}

/// What becomes of a task the check touched.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskFate {
    /// It waits for these files to be downloaded again, then runs (from its checkpoint,
    /// if it has one).
    WaitsFor(Vec<String>),
    /// It fails with `code` and is reported; `why` says which file.
    Error {
        /// The task's exit status.
        code: i32,
        /// The reason, as written into its `stderr_out`.
        why: String,
    },
}

/// The outcome of [`check_files`] for one project.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileCheck {
    /// Files found wrong, in the order of the state file.
    pub files: Vec<FileFinding>,
    /// Tasks touched, by result name.
    pub tasks: Vec<(String, TaskFate)>,
}

impl FileCheck {
    /// True when everything was in order.
    pub fn is_clean(&self) -> bool {
        self.files.is_empty() && self.tasks.is_empty()
    }
}

fn downloadable(f: &FileInfo) -> bool {
    !f.download_urls.is_empty() || !f.gzipped_urls.is_empty()
}

/// The names of the app-version files of the project the check asks for the MD5 of, which
/// `ps` lists as present: what a caller may hash ahead of [`check_files`] (on every core).
pub fn md5_wanted(ps: &ProjectState) -> Vec<&str> {
    let app_files = app_file_names(ps);
    let anonymous = ps.project.anonymous_platform;
    ps.files
        .iter()
        .filter(|f| !f.uploaded && f.status == 1 && asks_md5(f, &app_files, anonymous))
        .map(|f| f.name.as_str())
        .collect()
}

/// Whether [`md5_wanted`] names the file `name` of `ps`; asked once per finished download,
/// so the project's files are looked at only when `name` is an app-version file.
pub fn is_md5_wanted(ps: &ProjectState, name: &str) -> bool {
    let app_files = app_file_names(ps);
    if !app_files.contains(name) {
        return false;
    }
    let anonymous = ps.project.anonymous_platform;
    ps.files.iter().any(|f| {
        f.name == name && !f.uploaded && f.status == 1 && asks_md5(f, &app_files, anonymous)
    })
}

/// The files the app versions of `ps` use.
fn app_file_names(ps: &ProjectState) -> HashSet<String> {
    ps.app_versions
        .iter()
        .flat_map(|v| v.file_refs.iter().map(|r| r.file_name.clone()))
        .collect()
}

/// Whether the check asks for the MD5 of `f`: an app-version file with a known checksum,
/// except an anonymous project's own build (only its presence counts).
fn asks_md5(f: &FileInfo, app_files: &HashSet<String>, anonymous: bool) -> bool {
    app_files.contains(&f.name)
        && !f.md5_cksum.trim().is_empty()
        && !(anonymous && crate::anonymous::is_local_file(f))
}

/// Checks the files of `ps` against the disk and applies the outcome to `ps`: files marked
/// not present or lost, tasks moved back to waiting for their files or failed and made
/// ready to report (at `now`). `look(name, want_md5)` says what the project directory holds
/// under `name`; the MD5 is asked for only for app-version files with a known checksum.
/// `check_sizes` is false under cc_config's `dont_check_file_sizes` (only presence counts).
pub fn check_files(
    ps: &mut ProjectState,
    look: &mut dyn FnMut(&str, bool) -> OnDisk,
    check_sizes: bool,
    now: f64,
) -> FileCheck {
    let mut out = FileCheck::default();
    let anonymous = ps.project.anonymous_platform;
    let app_files = app_file_names(ps);
    // Outputs of computations that finished: they exist nowhere else.
    let pending_outputs: HashSet<String> = ps
        .results
        .iter()
        .filter(|r| r.state == ResultState::FilesUploading)
        .flat_map(|r| {
            r.output_files
                .iter()
                .filter(|o| !o.optional)
                .map(|o| o.file_name.clone())
        })
        .collect();

    for f in &mut ps.files {
        if f.uploaded {
            continue;
        }
        if f.status < 0 {
            if downloadable(f) {
                out.files.push(FileFinding {
                    name: f.name.clone(),
                    problem: FileProblem::HadError(f.status),
                    action: FileAction::Refetch,
                });
                f.status = 0;
                f.error_msg = None;
                f.persistent_file_xfer = None;
            }
            continue;
        }
        let output = pending_outputs.contains(&f.name);
        if f.status != 1 && !output {
            continue;
        }
        let want_md5 = asks_md5(f, &app_files, anonymous);
        // An anonymous project's own file (app_info.xml) may be replaced by a new build:
        // only its presence counts, and its size is taken as it is.
        let local = anonymous && crate::anonymous::is_local_file(f);
        let problem = match look(&f.name, want_md5) {
            OnDisk::Missing => Some(FileProblem::Missing),
            // An output the app wrote but the client has not yet marked present is fine.
            OnDisk::Present { .. } if f.status != 1 => None,
            OnDisk::Present { len, .. } if local => {
                f.nbytes = len as f64;
                None
            }
            OnDisk::Present { len, .. }
                if check_sizes && f.nbytes > 0.0 && f.nbytes != len as f64 =>
            {
                Some(FileProblem::WrongSize {
                    expected: f.nbytes,
                    got: len,
                })
            }
            OnDisk::Present { md5: Some(got), .. }
                if want_md5 && !got.eq_ignore_ascii_case(f.md5_cksum.trim()) =>
            {
                Some(FileProblem::WrongMd5 {
                    expected: f.md5_cksum.trim().to_owned(),
                    got,
                })
            }
            OnDisk::Present { .. } => None,
        };
        let Some(problem) = problem else { continue };
        let action = if output {
            f.status = ERR_FILE_MISSING;
            f.error_msg = Some("output file missing or invalid".to_owned());
            FileAction::Lost
        } else if !downloadable(f) {
            // Not present, as the official client marks it; the tasks that need it fail
            // below, the others never notice.
            f.status = 0;
            f.persistent_file_xfer = None;
            FileAction::Lost
        } else {
            f.status = 0;
            f.persistent_file_xfer = None;
            FileAction::Refetch
        };
        out.files.push(FileFinding {
            name: f.name.clone(),
            problem,
            action,
        });
    }

    // What each unfinished task needs, and what becomes of it (each lookup through an
    // index: the check stays linear in the number of tasks).
    let look = ProjectLookup::new(ps);
    let found: HashSet<&str> = out.files.iter().map(|x| x.name.as_str()).collect();
    let mut fates: Vec<(usize, TaskFate)> = Vec::new();
    for (i, r) in ps.results.iter().enumerate() {
        match r.state {
            ResultState::New | ResultState::FilesDownloading | ResultState::FilesDownloaded => {
                let wu = look.workunit(&r.wu_name).map(|w| w.input_files.iter());
                let av = look.app_version_of(r).map(|v| v.file_refs.iter());
                let needed: Vec<&FileInfo> = wu
                    .into_iter()
                    .flatten()
                    .chain(av.into_iter().flatten())
                    .filter(|fr| !fr.optional)
                    .filter_map(|fr| look.file(&fr.file_name))
                    .collect();
                // A needed file that cannot be fetched: one the check found lost, or one
                // not present that no URL can bring (it would wait for ever).
                if let Some(bad) = needed
                    .iter()
                    .find(|f| f.status < 0 || (f.status == 0 && !downloadable(f)))
                {
                    let why = format!(
                        "file {} cannot be downloaded again: {}",
                        bad.name,
                        bad.error_msg.as_deref().unwrap_or("it has no download URL")
                    );
                    fates.push((
                        i,
                        TaskFate::Error {
                            code: ERR_RESULT_DOWNLOAD,
                            why,
                        },
                    ));
                    continue;
                }
                let waits: Vec<String> = needed
                    .iter()
                    .filter(|f| f.status != 1)
                    .filter(|f| found.contains(f.name.as_str()))
                    .map(|f| f.name.clone())
                    .collect();
                if !waits.is_empty() {
                    fates.push((i, TaskFate::WaitsFor(waits)));
                }
            }
            ResultState::FilesUploading => {
                let lost: Vec<&FileInfo> = r
                    .output_files
                    .iter()
                    .filter_map(|o| look.file(&o.file_name))
                    .filter(|f| !f.uploaded && f.status == ERR_FILE_MISSING)
                    .collect();
                if !lost.is_empty() {
                    let mut why = "output file missing or invalid".to_owned();
                    for f in lost {
                        why.push_str(&format!(
                            "\n<upload_error>\n    <file_name>{}</file_name>\n    <error_code>{}</error_code>\n</upload_error>",
                            f.name, f.status
                        ));
                    }
                    fates.push((
                        i,
                        TaskFate::Error {
                            code: ERR_RESULT_UPLOAD,
                            why,
                        },
                    ));
                }
            }
            _ => {}
        }
    }
    drop((look, found));
    for (i, fate) in fates {
        let Some(r) = ps.results.get_mut(i) else {
            continue;
        };
        match &fate {
            TaskFate::WaitsFor(_) => {
                if r.state == ResultState::FilesDownloaded {
                    r.state = ResultState::FilesDownloading;
                }
            }
            TaskFate::Error { code, why } => {
                if r.exit_status == 0 {
                    r.exit_status = *code;
                }
                r.stderr_out
                    .push_str(&format!("<message>\n{why}\n</message>\n"));
                r.state = if *code == ERR_RESULT_UPLOAD {
                    ResultState::UploadFailed
                } else {
                    ResultState::ComputeError
                };
                r.ready_to_report = true;
                r.completed_time = now;
            }
        }
        out.tasks.push((r.name.clone(), fate));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_proto::client_state::{AppVersion, FileRef, TaskResult, Workunit};
    use std::collections::HashMap;

    const URL: &str = "http://127.0.0.1/test/";

    fn file(name: &str, nbytes: f64, md5: &str, url: bool) -> FileInfo {
        FileInfo {
            name: name.to_owned(),
            nbytes,
            md5_cksum: md5.to_owned(),
            status: 1,
            download_urls: if url {
                vec![format!("{URL}download/{name}")]
            } else {
                Vec::new()
            },
            ..FileInfo::default()
        }
    }

    fn fref(name: &str) -> FileRef {
        FileRef {
            file_name: name.to_owned(),
            ..FileRef::default()
        }
    }

    fn result(name: &str, wu: &str, state: ResultState) -> TaskResult {
        TaskResult {
            name: name.to_owned(),
            wu_name: wu.to_owned(),
            version_num: 100,
            state,
            ..TaskResult::default()
        }
    }

    /// App `app` (one file), workunits w1..w3 with one input each, and results:
    /// r1 runnable, r2 waiting for a download, r3 computed with its output waiting for upload.
    fn project() -> ProjectState {
        let mut out = file("r3_out", 0.0, "", false);
        out.upload_urls = vec![format!("{URL}upload")];
        out.status = 1;
        let mut in2 = file("in2", 10.0, "", true);
        in2.status = 0;
        let wu = |n: &str, input: &str| Workunit {
            name: n.to_owned(),
            app_name: "app".to_owned(),
            input_files: vec![fref(input)],
            ..Workunit::default()
        };
        let mut r3 = result("r3", "w3", ResultState::FilesUploading);
        r3.output_files = vec![fref("r3_out")];
        ProjectState {
            files: vec![
                file("app_1.0", 100.0, "0123456789abcdef0123456789abcdef", true),
                file("in1", 10.0, "", true),
                in2,
                file("in3", 10.0, "", true),
                out,
            ],
            app_versions: vec![AppVersion {
                app_name: "app".to_owned(),
                version_num: 100,
                file_refs: vec![fref("app_1.0")],
                ..AppVersion::default()
            }],
            workunits: vec![wu("w1", "in1"), wu("w2", "in2"), wu("w3", "in3")],
            results: vec![
                result("r1", "w1", ResultState::FilesDownloaded),
                result("r2", "w2", ResultState::FilesDownloading),
                r3,
            ],
            ..ProjectState::default()
        }
    }

    /// Checks `ps` against a disk holding `files` (name, length, MD5); also says which
    /// names were hashed.
    fn run(ps: &mut ProjectState, files: &[(&str, u64, &str)]) -> (FileCheck, Vec<String>) {
        let map: HashMap<String, (u64, String)> = files
            .iter()
            .map(|(n, l, m)| ((*n).to_owned(), (*l, (*m).to_owned())))
            .collect();
        let hashed = std::cell::RefCell::new(Vec::new());
        let mut look = |name: &str, want_md5: bool| match map.get(name) {
            None => OnDisk::Missing,
            Some((len, md5)) => {
                if want_md5 {
                    hashed.borrow_mut().push(name.to_owned());
                }
                OnDisk::Present {
                    len: *len,
                    md5: want_md5.then(|| md5.clone()),
                }
            }
        };
        let check = check_files(ps, &mut look, true, 1000.0);
        (check, hashed.into_inner())
    }

    const GOOD_MD5: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn the_files_to_hash_ahead_are_those_the_check_hashes() {
        let mut ps = project();
        let mut second = file("app_lib", 50.0, GOOD_MD5, true);
        second.status = 0; // not downloaded yet: nothing to hash
        ps.files.push(second);
        ps.files.push(file("app_doc", 5.0, "", true)); // no checksum
        ps.app_versions[0]
            .file_refs
            .extend([fref("app_lib"), fref("app_doc")]);
        assert_eq!(md5_wanted(&ps), ["app_1.0"]);
        // The question for one file gets the list's answer, for every file and one unknown.
        for f in ps.files.iter().map(|f| f.name.as_str()).chain(["nowhere"]) {
            assert_eq!(is_md5_wanted(&ps, f), md5_wanted(&ps).contains(&f), "{f}");
        }
        let on_disk = [
            ("app_1.0", 100, GOOD_MD5),
            ("app_lib", 50, GOOD_MD5),
            ("app_doc", 5, ""),
            ("in1", 10, ""),
            ("in3", 10, ""),
            ("r3_out", 0, ""),
        ];
        let (_, hashed) = run(&mut ps, &on_disk);
        assert_eq!(hashed, md5_wanted(&project()));
    }

    #[test]
    fn everything_in_place_changes_nothing_and_only_app_files_are_hashed() {
        let mut ps = project();
        let before = ps.clone();
        let (check, hashed) = run(
            &mut ps,
            &[
                ("app_1.0", 100, GOOD_MD5),
                ("in1", 10, ""),
                ("in3", 10, ""),
                ("r3_out", 5, ""),
            ],
        );
        assert!(check.is_clean(), "{check:?}");
        assert_eq!(ps, before);
        assert_eq!(hashed, vec!["app_1.0".to_owned()]);
    }

    #[test]
    fn a_lost_project_directory_refetches_inputs_and_app_and_fails_only_the_lost_output() {
        let mut ps = project();
        let (check, _) = run(&mut ps, &[]);
        let findings: Vec<(&str, FileAction)> = check
            .files
            .iter()
            .map(|f| (f.name.as_str(), f.action))
            .collect();
        assert_eq!(
            findings,
            vec![
                ("app_1.0", FileAction::Refetch),
                ("in1", FileAction::Refetch),
                ("in3", FileAction::Refetch),
                ("r3_out", FileAction::Lost),
            ]
        );
        assert!(check
            .files
            .iter()
            .all(|f| f.problem == FileProblem::Missing));
        // r1 waits for its app and input; r2 already waited and now also needs the app.
        assert_eq!(
            check.tasks[0],
            (
                "r1".to_owned(),
                TaskFate::WaitsFor(vec!["in1".to_owned(), "app_1.0".to_owned()])
            )
        );
        assert_eq!(
            check.tasks[1],
            (
                "r2".to_owned(),
                TaskFate::WaitsFor(vec!["app_1.0".to_owned()])
            )
        );
        assert!(matches!(
            &check.tasks[2],
            (n, TaskFate::Error { code: ERR_RESULT_UPLOAD, why }) if n == "r3" && why.contains("r3_out")
        ));
        let r = |n: &str| ps.result(n).expect("result").clone();
        assert_eq!(r("r1").state, ResultState::FilesDownloading);
        assert!(!r("r1").ready_to_report);
        assert_eq!(r("r2").state, ResultState::FilesDownloading);
        let r3 = r("r3");
        assert_eq!(r3.state, ResultState::UploadFailed);
        assert_eq!(r3.exit_status, ERR_RESULT_UPLOAD);
        assert!(r3.ready_to_report);
        assert_eq!(r3.completed_time, 1000.0);
        assert!(r3.stderr_out.contains("output file missing or invalid"));
        for n in ["app_1.0", "in1", "in3"] {
            assert_eq!(ps.file(n).map(|f| f.status), Some(0), "{n}");
        }
        assert_eq!(ps.file("r3_out").map(|f| f.status), Some(ERR_FILE_MISSING));
    }

    #[test]
    fn wrong_size_and_wrong_md5_are_refetched_and_only_their_tasks_wait() {
        let mut ps = project();
        let (check, _) = run(
            &mut ps,
            &[
                ("app_1.0", 100, "ffffffffffffffffffffffffffffffff"),
                ("in1", 10, ""),
                ("in3", 3, ""),
                ("r3_out", 5, ""),
            ],
        );
        assert_eq!(
            check.files,
            vec![
                FileFinding {
                    name: "app_1.0".to_owned(),
                    problem: FileProblem::WrongMd5 {
                        expected: GOOD_MD5.to_owned(),
                        got: "ffffffffffffffffffffffffffffffff".to_owned()
                    },
                    action: FileAction::Refetch,
                },
                FileFinding {
                    name: "in3".to_owned(),
                    problem: FileProblem::WrongSize {
                        expected: 10.0,
                        got: 3
                    },
                    action: FileAction::Refetch,
                },
            ]
        );
        // in3 belongs to a computed task: nothing waits for it.
        let names: Vec<&str> = check.tasks.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["r1", "r2"]);
        assert_eq!(
            ps.result("r3").map(|r| r.state),
            Some(ResultState::FilesUploading)
        );
    }

    #[test]
    fn an_anonymous_projects_rebuilt_app_is_taken_as_it_is_and_never_hashed() {
        let mut ps = project();
        ps.project.anonymous_platform = true;
        // The volunteer's build (app_info.xml): no URL, a checksum it may not match now.
        if let Some(f) = ps.file_mut("app_1.0") {
            f.download_urls.clear();
        }
        let (check, hashed) = run(
            &mut ps,
            &[
                ("app_1.0", 150, "ffffffffffffffffffffffffffffffff"),
                ("in1", 10, ""),
                ("in3", 10, ""),
                ("r3_out", 5, ""),
            ],
        );
        assert!(check.is_clean(), "{check:?}");
        assert!(hashed.is_empty(), "{hashed:?}");
        assert_eq!(
            ps.file("app_1.0").map(|f| (f.status, f.nbytes)),
            Some((1, 150.0))
        );
        // Gone, it is lost like any file without a URL.
        let (check, _) = run(
            &mut ps,
            &[("in1", 10, ""), ("in3", 10, ""), ("r3_out", 5, "")],
        );
        assert_eq!(check.files.len(), 1);
        assert_eq!(check.files[0].action, FileAction::Lost);
    }

    #[test]
    fn a_missing_file_with_no_url_errors_only_the_tasks_that_need_it() {
        let mut ps = project();
        // in1 cannot be downloaded again.
        if let Some(f) = ps.file_mut("in1") {
            f.download_urls.clear();
        }
        let (check, _) = run(
            &mut ps,
            &[
                ("app_1.0", 100, GOOD_MD5),
                ("in3", 10, ""),
                ("r3_out", 5, ""),
            ],
        );
        assert_eq!(
            check.files,
            vec![FileFinding {
                name: "in1".to_owned(),
                problem: FileProblem::Missing,
                action: FileAction::Lost,
            }]
        );
        assert_eq!(check.tasks.len(), 1);
        let (name, fate) = &check.tasks[0];
        assert_eq!(name, "r1");
        assert!(
            matches!(fate, TaskFate::Error { code: ERR_RESULT_DOWNLOAD, why } if why.contains("in1") && why.contains("no download URL")),
            "{fate:?}"
        );
        let r1 = ps.result("r1").expect("r1");
        assert_eq!(
            (r1.state, r1.exit_status, r1.ready_to_report),
            (ResultState::ComputeError, ERR_RESULT_DOWNLOAD, true)
        );
        assert_eq!(
            ps.result("r2").map(|r| r.state),
            Some(ResultState::FilesDownloading)
        );
        assert_eq!(
            ps.result("r3").map(|r| r.state),
            Some(ResultState::FilesUploading)
        );
        assert_eq!(
            ps.file("in1").map(|f| f.status),
            Some(0),
            "not present, as BOINC marks it"
        );
    }

    #[test]
    fn a_task_stuck_on_a_file_no_url_can_bring_fails_with_its_reason() {
        let mut ps = project();
        if let Some(f) = ps.file_mut("in2") {
            f.download_urls.clear();
        }
        let (check, _) = run(
            &mut ps,
            &[
                ("app_1.0", 100, GOOD_MD5),
                ("in1", 10, ""),
                ("in3", 10, ""),
                ("r3_out", 5, ""),
            ],
        );
        assert!(check.files.is_empty());
        assert!(matches!(
            &check.tasks[..],
            [(n, TaskFate::Error { code: ERR_RESULT_DOWNLOAD, .. })] if n == "r2"
        ));
    }

    #[test]
    fn a_failed_download_is_reset_so_it_can_be_fetched_again() {
        let mut ps = project();
        ps.results.retain(|r| r.name != "r2");
        if let Some(f) = ps.file_mut("in2") {
            f.status = -119;
            f.error_msg = Some("MD5 check failed".to_owned());
        }
        let (check, _) = run(
            &mut ps,
            &[
                ("app_1.0", 100, GOOD_MD5),
                ("in1", 10, ""),
                ("in3", 10, ""),
                ("r3_out", 5, ""),
            ],
        );
        assert_eq!(
            check.files,
            vec![FileFinding {
                name: "in2".to_owned(),
                problem: FileProblem::HadError(-119),
                action: FileAction::Refetch,
            }]
        );
        let f = ps.file("in2").expect("in2");
        assert_eq!((f.status, f.error_msg.as_deref()), (0, None));
        assert!(check.tasks.is_empty());
    }

    #[test]
    fn sizes_are_not_compared_under_dont_check_file_sizes() {
        let mut ps = project();
        let mut look = |name: &str, _md5: bool| match name {
            "in1" | "in3" => OnDisk::Present { len: 1, md5: None },
            "app_1.0" => OnDisk::Present {
                len: 1,
                md5: Some(GOOD_MD5.to_owned()),
            },
            _ => OnDisk::Present { len: 1, md5: None },
        };
        let check = check_files(&mut ps, &mut look, false, 0.0);
        assert!(check.is_clean(), "{check:?}");
    }

    #[test]
    fn uploaded_outputs_are_not_checked() {
        let mut ps = project();
        if let Some(f) = ps.file_mut("r3_out") {
            f.uploaded = true;
        }
        let (check, _) = run(
            &mut ps,
            &[("app_1.0", 100, GOOD_MD5), ("in1", 10, ""), ("in3", 10, "")],
        );
        assert!(check.is_clean(), "{check:?}");
    }
}
