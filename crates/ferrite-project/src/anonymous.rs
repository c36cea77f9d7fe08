//! The anonymous platform as pure code: what a project's `app_info.xml` does to its state
//! (`client/cs_statefile.cpp: check_anonymous, parse_app_info` in BOINC).
//!
//! The apps and versions of `app_info.xml` replace the project's; its files are the
//! volunteer's, present in the project directory, and never downloaded (they may name no
//! URL) or deleted. The project is flagged `anonymous_platform`, so its scheduler requests
//! name the platform `anonymous` and list these versions, and app versions a server sends
//! are refused. The daemon reads the file and the sizes on disk; this module decides.

use std::collections::HashSet;

use ferrite_proto::app_info::AppInfo;
use ferrite_proto::client_state::{FileInfo, ProjectState};

use crate::names::{check_file_name, check_object_name, NameError};

/// Something in `app_info.xml` that was left out; the rest is used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AppInfoProblem {
    /// A file names download or upload URLs (BOINC refuses them here).
    #[error("Can't specify URLs in app_info.xml: file {0} ignored")]
    UrlsGiven(String),
    /// A file is not in the project directory.
    #[error("File referenced in app_info.xml does not exist: {0}")]
    FileMissing(String),
    /// A file or app name that is not safe to use.
    #[error("app_info.xml: name {name:?} ignored: {reason}")]
    BadName {
        /// The name.
        name: String,
        /// Why.
        #[source]
        reason: NameError,
    },
    /// A version of an app the file does not list.
    #[error("app_info.xml: version {version} of app {app}, which is not listed, ignored")]
    UnknownApp {
        /// The app name.
        app: String,
        /// The version number.
        version: i32,
    },
    /// A version refers to a file the file does not list (or that was left out).
    #[error("app_info.xml: version {version} of app {app} uses file {file}, which is not usable; version ignored")]
    UnknownFile {
        /// The app name.
        app: String,
        /// The version number.
        version: i32,
        /// The file.
        file: String,
    },
}

/// A file of the volunteer's rather than the project's: it names no URL at all (the
/// project's inputs have download URLs, its outputs upload URLs).
pub fn is_local_file(f: &FileInfo) -> bool {
    f.download_urls.is_empty() && f.upload_urls.is_empty() && f.gzipped_urls.is_empty()
}

/// Names of files that workunits or results of `ps` refer to.
fn task_files(ps: &ProjectState) -> HashSet<String> {
    ps.workunits
        .iter()
        .flat_map(|w| w.input_files.iter())
        .chain(ps.results.iter().flat_map(|r| r.output_files.iter()))
        .map(|f| f.file_name.clone())
        .collect()
}

/// Applies `info` to `ps`: flags the project anonymous and replaces its apps, app versions
/// and local files with those of `info`. Versions without a platform get
/// `primary_platform`. `size_of(name)` is the size of the project directory's file `name`
/// (None when absent). Returns what was left out, in file order.
pub fn apply_app_info(
    ps: &mut ProjectState,
    info: &AppInfo,
    primary_platform: &str,
    size_of: &mut dyn FnMut(&str) -> Option<u64>,
) -> Vec<AppInfoProblem> {
    let mut problems = Vec::new();
    ps.project.anonymous_platform = true;

    let mut files: Vec<FileInfo> = Vec::new();
    for f in &info.files {
        if let Err(reason) = check_file_name(&f.name) {
            problems.push(AppInfoProblem::BadName {
                name: f.name.clone(),
                reason,
            });
            continue;
        }
        if !is_local_file(f) {
            problems.push(AppInfoProblem::UrlsGiven(f.name.clone()));
            continue;
        }
        if files.iter().any(|g| g.name == f.name) {
            continue;
        }
        let Some(size) = size_of(&f.name) else {
            problems.push(AppInfoProblem::FileMissing(f.name.clone()));
            continue;
        };
        let mut f = f.clone();
        f.nbytes = size as f64;
        f.status = 1;
        f.persistent_file_xfer = None;
        f.error_msg = None;
        files.push(f);
    }
    // Local files of an earlier reading that this one no longer lists are forgotten (they
    // stay on disk); the project's own files are kept.
    let used_by_tasks = task_files(ps);
    ps.files.retain(|f| {
        !is_local_file(f)
            || used_by_tasks.contains(&f.name)
            || files.iter().any(|g| g.name == f.name)
    });
    for f in &files {
        match ps.files.iter_mut().find(|g| g.name == f.name) {
            Some(g) => *g = f.clone(),
            None => ps.files.push(f.clone()),
        }
    }

    let mut apps = Vec::new();
    for a in &info.apps {
        if let Err(reason) = check_object_name(&a.name) {
            problems.push(AppInfoProblem::BadName {
                name: a.name.clone(),
                reason,
            });
            continue;
        }
        if !apps
            .iter()
            .any(|b: &ferrite_proto::client_state::App| b.name == a.name)
        {
            apps.push(a.clone());
        }
    }

    let mut versions: Vec<ferrite_proto::client_state::AppVersion> = Vec::new();
    for v in &info.app_versions {
        if !apps.iter().any(|a| a.name == v.app_name) {
            problems.push(AppInfoProblem::UnknownApp {
                app: v.app_name.clone(),
                version: v.version_num,
            });
            continue;
        }
        if let Some(r) = v
            .file_refs
            .iter()
            .find(|r| !files.iter().any(|f| f.name == r.file_name))
        {
            problems.push(AppInfoProblem::UnknownFile {
                app: v.app_name.clone(),
                version: v.version_num,
                file: r.file_name.clone(),
            });
            continue;
        }
        let mut v = v.clone();
        if v.platform.is_empty() {
            v.platform = primary_platform.to_owned();
        }
        if !versions
            .iter()
            .any(|w| w.is(&v.app_name, &v.platform, v.version_num, &v.plan_class))
        {
            versions.push(v);
        }
    }
    ps.apps = apps;
    ps.app_versions = versions;
    problems
}

/// The project's `app_info.xml` is gone: it uses the project's own apps again. Drops the
/// versions made of local files and the local files no task uses (not from disk); the
/// server sends its own versions with the next work. Returns the number of versions dropped.
pub fn leave_anonymous(ps: &mut ProjectState) -> usize {
    ps.project.anonymous_platform = false;
    let local: HashSet<String> = ps
        .files
        .iter()
        .filter(|f| is_local_file(f))
        .map(|f| f.name.clone())
        .collect();
    let before = ps.app_versions.len();
    ps.app_versions
        .retain(|v| !v.file_refs.iter().any(|r| local.contains(&r.file_name)));
    let used_by_tasks = task_files(ps);
    ps.files
        .retain(|f| !is_local_file(f) || used_by_tasks.contains(&f.name));
    before - ps.app_versions.len()
}

/// Results of `ps` whose app version is not among its versions (after `app_info.xml`
/// changed): they cannot run.
pub fn tasks_without_version(ps: &ProjectState) -> Vec<String> {
    let look = ferrite_proto::client_state::ProjectLookup::new(ps);
    ps.results
        .iter()
        .filter(|r| !r.computing_done() && look.app_version_of(r).is_none())
        .map(|r| r.name.clone())
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use ferrite_proto::client_state::{App, AppVersion, FileRef, Workunit};

    fn info() -> AppInfo {
        AppInfo::parse(
            "<app_info>\n<app><name>work</name></app>\n\
             <file_info><name>my_app</name><executable/></file_info>\n\
             <file_info><name>helper.dat</name></file_info>\n\
             <app_version><app_name>work</app_name><version_num>777</version_num>\
             <file_ref><file_name>my_app</file_name><main_program/></file_ref></app_version>\n\
             <app_version><app_name>work</app_name><version_num>778</version_num>\
             <plan_class>cuda</plan_class><platform>x86_64-pc-linux-gnu</platform>\
             <coproc><type>NVIDIA</type><count>1</count></coproc>\
             <file_ref><file_name>my_app</file_name><main_program/></file_ref></app_version>\n\
             </app_info>\n",
            "app_info.xml",
        )
        .expect("parse")
        .value
    }

    fn project_with_own_apps() -> ProjectState {
        let mut ps = ProjectState::default();
        ps.project.master_url = "http://p/".into();
        ps.apps.push(App {
            name: "work".into(),
            ..App::default()
        });
        ps.files.push(FileInfo {
            name: "work_1.00".into(),
            download_urls: vec!["http://p/download/work_1.00".into()],
            status: 1,
            ..FileInfo::default()
        });
        ps.files.push(FileInfo {
            name: "wu_in".into(),
            download_urls: vec!["http://p/download/wu_in".into()],
            ..FileInfo::default()
        });
        ps.app_versions.push(AppVersion {
            app_name: "work".into(),
            version_num: 100,
            platform: "x86_64-pc-linux-gnu".into(),
            file_refs: vec![FileRef {
                file_name: "work_1.00".into(),
                ..FileRef::default()
            }],
            ..AppVersion::default()
        });
        ps.workunits.push(Workunit {
            name: "wu".into(),
            app_name: "work".into(),
            input_files: vec![FileRef {
                file_name: "wu_in".into(),
                ..FileRef::default()
            }],
            ..Workunit::default()
        });
        ps
    }

    fn sizes(name: &str) -> Option<u64> {
        match name {
            "my_app" => Some(1234),
            "helper.dat" => Some(7),
            _ => None,
        }
    }

    #[test]
    fn the_files_versions_replace_the_projects_and_its_files_are_present() {
        let mut ps = project_with_own_apps();
        let problems = apply_app_info(&mut ps, &info(), "x86_64-pc-linux-gnu", &mut sizes);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(ps.project.anonymous_platform);
        let versions: Vec<(i32, &str, &str)> = ps
            .app_versions
            .iter()
            .map(|v| (v.version_num, v.platform.as_str(), v.plan_class.as_str()))
            .collect();
        assert_eq!(
            versions,
            [
                (777, "x86_64-pc-linux-gnu", ""),
                (778, "x86_64-pc-linux-gnu", "cuda")
            ]
        );
        let app = ps.file("my_app").expect("local file");
        assert_eq!((app.status, app.nbytes, app.executable), (1, 1234.0, true));
        assert!(is_local_file(app));
        assert_eq!(ps.file("helper.dat").map(|f| f.nbytes), Some(7.0));
        // The project's own input stays: its task needs it.
        assert!(ps.file("wu_in").is_some());
    }

    #[test]
    fn urls_missing_files_and_dangling_versions_are_left_out_with_a_reason() {
        let mut i = info();
        i.files.push(FileInfo {
            name: "remote".into(),
            download_urls: vec!["http://x/remote".into()],
            ..FileInfo::default()
        });
        i.files.push(FileInfo {
            name: "../escape".into(),
            ..FileInfo::default()
        });
        i.app_versions.push(AppVersion {
            app_name: "other".into(),
            version_num: 5,
            ..AppVersion::default()
        });
        let mut only_helper = |n: &str| (n == "helper.dat").then_some(7);
        let mut ps = project_with_own_apps();
        let problems = apply_app_info(&mut ps, &i, "x86_64-pc-linux-gnu", &mut only_helper);
        assert_eq!(
            problems,
            [
                AppInfoProblem::FileMissing("my_app".into()),
                AppInfoProblem::UrlsGiven("remote".into()),
                AppInfoProblem::BadName {
                    name: "../escape".into(),
                    reason: check_file_name("../escape").expect_err("unsafe"),
                },
                AppInfoProblem::UnknownFile {
                    app: "work".into(),
                    version: 777,
                    file: "my_app".into()
                },
                AppInfoProblem::UnknownFile {
                    app: "work".into(),
                    version: 778,
                    file: "my_app".into()
                },
                AppInfoProblem::UnknownApp {
                    app: "other".into(),
                    version: 5
                },
            ]
        );
        assert!(ps.app_versions.is_empty());
        assert!(ps.project.anonymous_platform);
        assert!(problems[0]
            .to_string()
            .starts_with("File referenced in app_info.xml does not exist"));
    }

    #[test]
    fn reading_again_forgets_local_files_no_longer_listed_and_is_idempotent() {
        let mut ps = project_with_own_apps();
        apply_app_info(&mut ps, &info(), "p", &mut sizes);
        let once = ps.clone();
        apply_app_info(&mut ps, &info(), "p", &mut sizes);
        assert_eq!(ps, once);
        let mut smaller = info();
        smaller.files.retain(|f| f.name != "helper.dat");
        apply_app_info(&mut ps, &smaller, "p", &mut sizes);
        assert!(ps.file("helper.dat").is_none());
        assert!(ps.file("my_app").is_some());
    }

    #[test]
    fn leaving_drops_the_local_versions_and_files_only() {
        let mut ps = project_with_own_apps();
        apply_app_info(&mut ps, &info(), "p", &mut sizes);
        ps.app_versions
            .push(project_with_own_apps().app_versions[0].clone());
        assert_eq!(leave_anonymous(&mut ps), 2);
        assert!(!ps.project.anonymous_platform);
        assert_eq!(ps.app_versions.len(), 1);
        assert_eq!(ps.app_versions[0].version_num, 100);
        assert!(ps.file("my_app").is_none() && ps.file("wu_in").is_some());
    }
}
