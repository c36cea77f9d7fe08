//! The core's recent estimated credit (REC) and scheduling priorities, shown as the official
//! client shows them: each project's `<rec>` and `<rec_time>` in the state (saved, and read
//! back at the next start) and its `<sched_priority>` in the GUI RPCs.

use super::*;
use ferrite_sched::accounting::Priorities;
use ferrite_sched::{ProjectId, RecMode, ResourceId};

impl TaskTable {
    /// After a pass: at the first one the core starts from the REC the state file saved;
    /// then each project's REC (over all resources) and the time it was brought up to date go
    /// into the state, and the CPU scheduling priorities are kept for the GUI.
    pub(super) fn publish_rec(&mut self, state: &mut ClientState) {
        let Some((_, world)) = &self.last_pass else {
            return;
        };
        let book = &mut self.sched.rec;
        if !self.rec_loaded {
            self.rec_loaded = true;
            for (i, url) in self.ids.projects.iter().enumerate() {
                if let Some(ps) = state.project(url) {
                    book.seed(
                        ProjectId(u32::try_from(i).unwrap_or(u32::MAX)),
                        ps.project.rec,
                    );
                }
            }
        }
        let prio = Priorities::compute(world, book, ResourceId(0), &self.sched.policy);
        let rec_time = book.last_time.unwrap_or(0.0);
        self.sched_priorities.clear();
        for (i, url) in self.ids.projects.iter().enumerate() {
            let p = ProjectId(u32::try_from(i).unwrap_or(u32::MAX));
            let priority = prio.value.get(i).copied().unwrap_or(0.0);
            self.sched_priorities.push(priority);
            if let Some(ps) = state.project_mut(url) {
                ps.project.rec = book.rec_for(p, ResourceId(0), RecMode::Global);
                ps.project.rec_time = rec_time;
            }
        }
    }

    /// The project's scheduling priority at the last pass (the official `sched_priority`:
    /// minus its REC's part of the total over its resource share's part; lower when it got
    /// more than its share), 0 before the first pass.
    pub fn sched_priority(&self, url: &str) -> f64 {
        self.ids
            .projects
            .iter()
            .position(|u| u == url)
            .and_then(|i| self.sched_priorities.get(i))
            .copied()
            .unwrap_or(0.0)
    }
}
