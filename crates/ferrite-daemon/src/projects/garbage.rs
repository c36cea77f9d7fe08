//! The clean-up that follows the servers' acknowledgements: which results, workunits and
//! files go, and when that needs a walk over every result.
//!
//! A result goes once the server acknowledged it (`got_server_ack`) and it is ready to
//! report. Only a scheduler reply sets `got_server_ack` (and the state file at start-up),
//! so the walk over every result runs at start-up and after a reply that acknowledged
//! reports, not at every pass: at 100,000 tasks that walk was most of an idle pass. A result
//! the server acknowledged before it was ready to report (a server acknowledging what it was
//! not sent) is remembered by its position and name, and looked at alone at each pass
//! until it is ready.

use std::collections::{HashMap, HashSet};

use ferrite_proto::client_state::{ProjectState, TaskResult};

/// What one project's walk removed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Swept {
    /// The results removed, each with its app's name (from its workunit).
    pub results: Vec<(String, TaskResult)>,
    /// The files no longer referred to, removed from the state (their names).
    pub files: Vec<String>,
}

/// Whether the server's acknowledgement lets the result go.
fn collectable(r: &TaskResult) -> bool {
    r.got_server_ack && r.ready_to_report
}

/// Removes from `ps` the results the server acknowledged that are ready to report, then
/// the workunits no result refers to, then the files nothing refers to (kept: sticky
/// files, user files, the files `<project_files>` lists and an anonymous project's own
/// files). The result's order is kept.
pub(crate) fn sweep(ps: &mut ProjectState) -> Swept {
    let mut out = Swept::default();
    if !ps.results.iter().any(collectable) {
        return out;
    }
    let mut gone = Vec::new();
    ps.results.retain(|r| {
        let keep = !collectable(r);
        if !keep {
            gone.push(r.clone());
        }
        keep
    });
    let app_of: HashMap<&str, &str> = ps
        .workunits
        .iter()
        .map(|w| (w.name.as_str(), w.app_name.as_str()))
        .collect();
    out.results = gone
        .into_iter()
        .map(|r| {
            let app = app_of
                .get(r.wu_name.as_str())
                .map(|a| (*a).to_owned())
                .unwrap_or_default();
            (app, r)
        })
        .collect();
    let live: HashSet<&str> = ps.results.iter().map(|r| r.wu_name.as_str()).collect();
    ps.workunits.retain(|w| live.contains(w.name.as_str()));
    let mut used: HashSet<&str> = HashSet::new();
    for w in &ps.workunits {
        used.extend(w.input_files.iter().map(|f| f.file_name.as_str()));
    }
    for r in &ps.results {
        used.extend(r.output_files.iter().map(|f| f.file_name.as_str()));
    }
    for v in &ps.app_versions {
        used.extend(v.file_refs.iter().map(|f| f.file_name.as_str()));
    }
    // Files of `<project_files>` stay while the project lists them.
    used.extend(ps.project_files.iter().map(|f| f.file_name.as_str()));
    // An anonymous project's own files (app_info.xml) are the volunteer's: kept.
    let anonymous = ps.project.anonymous_platform;
    let mut unused = Vec::new();
    ps.files.retain(|f| {
        let keep = used.contains(f.name.as_str())
            || f.sticky
            || f.is_user_file
            || (anonymous && ferrite_project::anonymous::is_local_file(f));
        if !keep {
            unused.push(f.name.clone());
        }
        keep
    });
    out.files = unused;
    out
}

/// When the clean-up must walk every result.
#[derive(Debug)]
pub(crate) struct GarbageWatch {
    /// Something may have become collectable that only a walk finds: set at start-up and
    /// when a reply acknowledged reports.
    sweep_due: bool,
    /// The results the server acknowledged that were not ready to report at the last walk:
    /// the project's position, the result's position, its name.
    acked_unready: Vec<(usize, usize, String)>,
}

impl Default for GarbageWatch {
    fn default() -> Self {
        GarbageWatch {
            sweep_due: true,
            acked_unready: Vec::new(),
        }
    }
}

impl GarbageWatch {
    /// A reply acknowledged reports.
    pub(crate) fn acked(&mut self) {
        self.sweep_due = true;
    }

    /// Whether a walk over every result may find something to remove: asked for, or a
    /// remembered acknowledged result is now ready to report or is no longer where it was
    /// (then the walk looks again).
    pub(crate) fn due(&self, projects: &[ProjectState]) -> bool {
        self.sweep_due
            || self.acked_unready.iter().any(|(p, i, name)| {
                projects
                    .get(*p)
                    .and_then(|ps| ps.results.get(*i))
                    .is_none_or(|r| r.name != *name || collectable(r))
            })
    }

    /// A walk over every project's results was done: what it left acknowledged and not
    /// ready is remembered.
    pub(crate) fn swept(&mut self, projects: &[ProjectState]) {
        self.sweep_due = false;
        self.acked_unready.clear();
        for (p, ps) in projects.iter().enumerate() {
            for (i, r) in ps.results.iter().enumerate() {
                if r.got_server_ack && !r.ready_to_report {
                    self.acked_unready.push((p, i, r.name.clone()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_proto::client_state::synthetic;

    /// The old way: at every pass, every result acknowledged and ready goes.
    fn full_way(projects: &[ProjectState]) -> Vec<String> {
        projects
            .iter()
            .flat_map(|ps| ps.results.iter())
            .filter(|r| collectable(r))
            .map(|r| r.name.clone())
            .collect()
    }

    #[test]
    fn a_sweep_removes_acknowledged_results_their_workunits_and_unused_files() {
        let mut state = synthetic(1, 4);
        let ps = &mut state.projects[0];
        let (r0, wu0) = (ps.results[0].name.clone(), ps.results[0].wu_name.clone());
        let inputs: Vec<String> = ps
            .workunits
            .iter()
            .find(|w| w.name == wu0)
            .map(|w| w.input_files.iter().map(|f| f.file_name.clone()).collect())
            .unwrap_or_default();
        assert!(!inputs.is_empty());
        ps.results[0].got_server_ack = true;
        ps.results[0].ready_to_report = true;
        // Acknowledged, not ready: stays.
        ps.results[1].got_server_ack = true;
        let swept = sweep(ps);
        assert_eq!(
            swept
                .results
                .iter()
                .map(|(_, r)| &r.name)
                .collect::<Vec<_>>(),
            vec![&r0]
        );
        assert_eq!(swept.results[0].0, "app0");
        assert_eq!(ps.results.len(), 3);
        assert!(ps.workunits.iter().all(|w| w.name != wu0));
        for f in &inputs {
            assert!(swept.files.contains(f), "{f} not removed: {swept:?}");
            assert!(ps.files.iter().all(|x| &x.name != f));
        }
        // Nothing more to remove: a second sweep changes nothing.
        assert_eq!(sweep(ps), Swept::default());
    }

    /// Through a sequence of changes (reports acknowledged, acknowledged results made
    /// ready, results added and removed), whenever the watch says no walk is due the old
    /// full walk would find nothing to remove, and the watch's walks remove what it would.
    #[test]
    fn the_watch_asks_for_a_walk_whenever_the_full_way_would_remove_something() {
        let mut state = synthetic(2, 50);
        let mut watch = GarbageWatch::default();
        let mut walks = 0;
        let mut removed = 0;
        for step in 0..400usize {
            let p = step % 2;
            let n = state.projects[p].results.len();
            match step % 7 {
                // A reply acknowledges a ready result.
                0 | 3 if n > 0 => {
                    let r = &mut state.projects[p].results[(step * 31) % n];
                    r.ready_to_report = true;
                    r.got_server_ack = true;
                    watch.acked();
                }
                // A reply acknowledges a result that is not ready yet.
                1 if n > 0 => {
                    let r = &mut state.projects[p].results[(step * 17) % n];
                    r.got_server_ack = true;
                    watch.acked();
                }
                // A task finishes: ready to report (no acknowledgement yet, or an early one).
                2 | 5 if n > 0 => {
                    state.projects[p].results[(step * 13) % n].ready_to_report = true;
                }
                // A new task (a copy under a new name) at the front, moving the others.
                4 => {
                    let Some(mut r) = state.projects[p].results.first().cloned() else {
                        continue;
                    };
                    r.name = format!("new_{step}");
                    r.got_server_ack = false;
                    r.ready_to_report = false;
                    state.projects[p].results.insert(0, r);
                }
                // A task removed another way (a project reset, say).
                _ if n > 0 => {
                    state.projects[p].results.remove((step * 7) % n);
                }
                _ => {}
            }
            let expected = full_way(&state.projects);
            if !watch.due(&state.projects) {
                assert!(
                    expected.is_empty(),
                    "step {step}: no walk due, but the full way removes {expected:?}"
                );
                continue;
            }
            walks += 1;
            let mut got = Vec::new();
            for ps in &mut state.projects {
                got.extend(sweep(ps).results.into_iter().map(|(_, r)| r.name));
            }
            watch.swept(&state.projects);
            assert_eq!(got, expected, "step {step}");
            removed += got.len();
            assert!(full_way(&state.projects).is_empty());
        }
        assert!(removed > 10, "the sequence removed only {removed}");
        assert!(walks < 400, "a walk at every step: nothing saved");
    }
}
