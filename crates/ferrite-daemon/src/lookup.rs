//! Lookups of many (project, result) pairs in one go: the live tasks' app versions each
//! loop turn, overdue tasks. Each project is indexed (a [`ProjectLookup`]) on its first
//! lookup, so a turn costs one sweep of the projects it touches, not a scan of every result
//! per task (a host may hold 100,000 tasks).

use std::cell::OnceCell;

use ferrite_proto::client_state::{AppVersion, ClientState, ProjectLookup, TaskResult};

/// Indexes over the projects of a state, built as they are asked for.
pub(crate) struct StateLookup<'a> {
    state: &'a ClientState,
    projects: Vec<OnceCell<ProjectLookup<'a>>>,
}

impl<'a> StateLookup<'a> {
    pub(crate) fn new(state: &'a ClientState) -> Self {
        StateLookup {
            state,
            projects: state.projects.iter().map(|_| OnceCell::new()).collect(),
        }
    }

    /// The lookup over project `url` (found as [`ClientState::project`] finds it).
    pub(crate) fn project(&self, url: &str) -> Option<&ProjectLookup<'a>> {
        let ps = self.state.project(url)?;
        let i = self
            .state
            .projects
            .iter()
            .position(|p| std::ptr::eq(p, ps))?;
        let cell = self.projects.get(i)?;
        Some(cell.get_or_init(|| ProjectLookup::new(ps)))
    }

    /// Result `name` of project `url`.
    pub(crate) fn result(&self, url: &str, name: &str) -> Option<&'a TaskResult> {
        self.project(url)?.result(name)
    }

    /// The app version result `name` of project `url` runs with.
    pub(crate) fn app_version_of(&self, url: &str, name: &str) -> Option<&'a AppVersion> {
        let p = self.project(url)?;
        p.app_version_of(p.result(name)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_as_the_state_does() {
        let state = ferrite_proto::client_state::synthetic(3, 30);
        let look = StateLookup::new(&state);
        for (ps, r) in state.results() {
            let url = &ps.project.master_url;
            assert!(std::ptr::eq(look.result(url, &r.name).expect("result"), r));
            let ours = look.app_version_of(url, &r.name).map(|v| v as *const _);
            let theirs = ps.app_version_of(r).map(|v| v as *const _);
            assert!(ours.is_some());
            assert_eq!(ours, theirs);
        }
        // Another project's result, and unknown names.
        let (a, b) = (&state.projects[0], &state.projects[1]);
        assert!(look
            .result(&a.project.master_url, &b.results[0].name)
            .is_none());
        assert!(look.result("http://nowhere/", &a.results[0].name).is_none());
        assert!(look
            .app_version_of(&a.project.master_url, "no such task")
            .is_none());
    }
}
