//! Lookups by name over one project's objects, for work that looks many of them up.
//!
//! [`ProjectState`]'s own lookups (`file`, `workunit`, `result`, `app_version_of`) scan its
//! lists, which is right for one lookup and quadratic for one per task: a host may hold
//! 100,000 tasks. A [`ProjectLookup`] is built over a project for one operation (a pass, a
//! reply, the start-up check) and answers each lookup from a hash map, so the operation stays
//! linear in the number of tasks. Each map is built on first use, in one linear sweep, and
//! holds the first of equal names, as the scans do: the answers are the same.

use std::cell::OnceCell;
use std::collections::HashMap;

use super::{AppVersion, FileInfo, ProjectState, TaskResult, Workunit};

/// (app, platform, version number, plan class): what identifies an app version.
type VersionKey<'a> = (&'a str, &'a str, i32, &'a str);

/// Indexes by name over `ps`, borrowed for one operation; see the module's text.
#[derive(Debug)]
pub struct ProjectLookup<'a> {
    ps: &'a ProjectState,
    files: OnceCell<HashMap<&'a str, usize>>,
    workunits: OnceCell<HashMap<&'a str, usize>>,
    results: OnceCell<HashMap<&'a str, usize>>,
    app_versions: OnceCell<HashMap<VersionKey<'a>, usize>>,
}

/// The position of the first item of each name.
fn first_positions<'a, T>(
    items: &'a [T],
    name: impl Fn(&'a T) -> &'a str,
) -> HashMap<&'a str, usize> {
    let mut at = HashMap::with_capacity(items.len());
    for (i, x) in items.iter().enumerate() {
        at.entry(name(x)).or_insert(i);
    }
    at
}

impl<'a> ProjectLookup<'a> {
    /// A lookup over `ps` (nothing is indexed until it is asked for).
    pub fn new(ps: &'a ProjectState) -> Self {
        ProjectLookup {
            ps,
            files: OnceCell::new(),
            workunits: OnceCell::new(),
            results: OnceCell::new(),
            app_versions: OnceCell::new(),
        }
    }

    /// The project looked at.
    pub fn project(&self) -> &'a ProjectState {
        self.ps
    }

    /// The position in `files` of the file named `name`.
    pub fn file_index(&self, name: &str) -> Option<usize> {
        let ps = self.ps;
        self.files
            .get_or_init(|| first_positions(&ps.files, |f| f.name.as_str()))
            .get(name)
            .copied()
    }

    /// The file named `name` (as [`ProjectState::file`]).
    pub fn file(&self, name: &str) -> Option<&'a FileInfo> {
        self.file_index(name).and_then(|i| self.ps.files.get(i))
    }

    /// The position in `workunits` of the workunit named `name`.
    pub fn workunit_index(&self, name: &str) -> Option<usize> {
        let ps = self.ps;
        self.workunits
            .get_or_init(|| first_positions(&ps.workunits, |w| w.name.as_str()))
            .get(name)
            .copied()
    }

    /// The workunit named `name` (as [`ProjectState::workunit`]).
    pub fn workunit(&self, name: &str) -> Option<&'a Workunit> {
        self.workunit_index(name)
            .and_then(|i| self.ps.workunits.get(i))
    }

    /// The position in `results` of the result named `name`.
    pub fn result_index(&self, name: &str) -> Option<usize> {
        let ps = self.ps;
        self.results
            .get_or_init(|| first_positions(&ps.results, |r| r.name.as_str()))
            .get(name)
            .copied()
    }

    /// The result named `name` (as [`ProjectState::result`]).
    pub fn result(&self, name: &str) -> Option<&'a TaskResult> {
        self.result_index(name).and_then(|i| self.ps.results.get(i))
    }

    /// The app version identified by (app, platform, version, plan class) (as
    /// [`ProjectState::app_version`]).
    pub fn app_version(
        &self,
        app: &str,
        platform: &str,
        version_num: i32,
        plan_class: &str,
    ) -> Option<&'a AppVersion> {
        self.app_version_index(app, platform, version_num, plan_class)
            .and_then(|i| self.ps.app_versions.get(i))
    }

    /// The position in `app_versions` of the app version identified by (app, platform,
    /// version, plan class).
    pub fn app_version_index(
        &self,
        app: &str,
        platform: &str,
        version_num: i32,
        plan_class: &str,
    ) -> Option<usize> {
        let ps = self.ps;
        let at = self.app_versions.get_or_init(|| {
            let mut at = HashMap::with_capacity(ps.app_versions.len());
            for (i, v) in ps.app_versions.iter().enumerate() {
                let key = (
                    v.app_name.as_str(),
                    v.platform.as_str(),
                    v.version_num,
                    v.plan_class.as_str(),
                );
                at.entry(key).or_insert(i);
            }
            at
        });
        at.get(&(app, platform, version_num, plan_class)).copied()
    }

    /// The app version a result runs with, via its workunit's app (as
    /// [`ProjectState::app_version_of`]).
    pub fn app_version_of(&self, result: &TaskResult) -> Option<&'a AppVersion> {
        self.app_version_index_of(result)
            .and_then(|i| self.ps.app_versions.get(i))
    }

    /// The position in `app_versions` of the app version a result runs with.
    pub fn app_version_index_of(&self, result: &TaskResult) -> Option<usize> {
        let wu = self.workunit(&result.wu_name)?;
        self.app_version_index(
            &wu.app_name,
            &result.platform,
            result.version_num,
            &result.plan_class,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_state::synthetic;

    /// Every lookup answers as the project's own scan does, for names present, absent and
    /// given twice.
    #[test]
    fn answers_as_the_scans_do() {
        let mut state = synthetic(2, 40);
        let ps = &mut state.projects[0];
        // A second file and result under names already used: the first one counts.
        let mut dup_file = ps.files[3].clone();
        dup_file.nbytes = 12_345.0;
        ps.files.push(dup_file);
        let mut dup_result = ps.results[5].clone();
        dup_result.exit_status = 77;
        ps.results.push(dup_result);
        let ps = &state.projects[0];
        let look = ProjectLookup::new(ps);
        for f in &ps.files {
            assert!(std::ptr::eq(
                look.file(&f.name).expect("file"),
                ps.file(&f.name).expect("file")
            ));
        }
        for w in &ps.workunits {
            assert!(std::ptr::eq(
                look.workunit(&w.name).expect("workunit"),
                ps.workunit(&w.name).expect("workunit")
            ));
        }
        for r in &ps.results {
            assert!(std::ptr::eq(
                look.result(&r.name).expect("result"),
                ps.result(&r.name).expect("result")
            ));
            let ours = look.app_version_of(r).map(|v| v as *const AppVersion);
            let theirs = ps.app_version_of(r).map(|v| v as *const AppVersion);
            assert_eq!(ours, theirs, "{}", r.name);
        }
        assert!(ps.results.iter().all(|r| look.app_version_of(r).is_some()));
        assert_eq!(look.file("no such file"), None);
        assert_eq!(look.workunit("no such workunit"), None);
        assert_eq!(look.result("no such result"), None);
        assert_eq!(look.app_version("no such app", "x", 1, ""), None);
        assert_eq!(look.result_index(&ps.results[5].name), Some(5));
        assert_eq!(look.file_index(&ps.files[3].name), Some(3));
    }
}
