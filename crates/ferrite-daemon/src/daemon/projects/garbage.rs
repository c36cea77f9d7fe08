//! The clean-up that follows the servers' acknowledgements, glue: what
//! `projects::garbage` removes from the state is removed from disk, logged and kept an hour
//! for `get_old_results`; projects marked "detach when done" are detached once empty.

use std::fs;

use tracing::{error, info};

use crate::config;
use crate::projects::garbage::sweep;
use crate::projects::old_results::OLD_RESULT_KEEP;
use crate::projects::OldResult;
use crate::Daemon;

impl Daemon {
    /// Removes what the server acknowledged: results, then workunits without results, then
    /// files nothing refers to (deleted from disk unless sticky), walking every result only
    /// when the project loop's `GarbageWatch` says something may have become removable;
    /// detaches projects marked "detach when done" once they have no task left.
    pub(crate) fn collect_garbage(&mut self, t: f64) {
        let mut changed = false;
        let mut old = Vec::new();
        if self.projects.garbage.due(&self.state.projects) {
            for ps in &mut self.state.projects {
                let swept = sweep(ps);
                if swept.results.is_empty() {
                    continue;
                }
                changed = true;
                let url = ps.project.master_url.clone();
                let pdir = config::project_dir(&self.dir, &url);
                for f in swept.files {
                    if ferrite_project::names::check_file_name(&f).is_ok() {
                        let _ = fs::remove_file(pdir.join(&f));
                    }
                }
                old.extend(
                    swept
                        .results
                        .into_iter()
                        .map(|(app, r)| (url.clone(), app, r)),
                );
            }
            self.projects.garbage.swept(&self.state.projects);
        }
        while self
            .projects
            .old_results
            .front()
            .is_some_and(|o| o.create_time < t - OLD_RESULT_KEEP)
        {
            self.projects.old_results.pop_front();
        }
        for (url, app_name, r) in old {
            info!(project = %url, "task {} acknowledged by the server; removed", r.name);
            self.projects.old_results.push_back(OldResult {
                project_url: url,
                result_name: r.name,
                app_name,
                exit_status: r.exit_status,
                elapsed_time: r.final_elapsed_time,
                cpu_time: r.final_cpu_time,
                completed_time: r.completed_time,
                create_time: t,
            });
        }
        let detach: Vec<String> = self
            .state
            .projects
            .iter()
            .filter(|ps| ps.project.detach_when_done && ps.results.is_empty())
            .map(|ps| ps.project.master_url.clone())
            .collect();
        for url in detach {
            match config::detach_project(&self.dir, &mut self.state, &url) {
                Ok(_) => info!(project = %url, "detached: its tasks are done"),
                Err(e) => error!("detaching from {url}: {e}"),
            }
            changed = true;
        }
        if changed {
            self.save.mark_dirty(t);
        }
    }
}
