//! Aborting tasks: one named by a GUI or the overdue check, and the tasks the scheduling
//! core says were not started before their deadline, all at once.

use ferrite_proto::client_state::TaskResult;

use super::*;

impl TaskTable {
    /// [`TaskTable::check_overdue`] when its daily look is due (the first call, then a day
    /// after the last look). Returns whether the state changed.
    pub fn check_overdue_if_due(
        &mut self,
        state: &mut ClientState,
        now: f64,
        max_days: f64,
    ) -> bool {
        if now < self.next_overdue_check {
            return false;
        }
        self.next_overdue_check = now + 86400.0;
        self.check_overdue(state, now, max_days)
    }

    /// The daily look at started tasks past their deadline (at start-up, then once a day):
    /// each is named in the log, and with `max_overdue_days` ≥ 0 (cc_config) a task overdue by
    /// more than that is aborted with 209, as the official client does. Returns whether the
    /// state changed.
    pub fn check_overdue(&mut self, state: &mut ClientState, now: f64, max_days: f64) -> bool {
        let mut changed = false;
        for (url, name, days) in overdue_tasks(state, now) {
            if max_days >= 0.0 && days > max_days {
                warn!(project = %url, "Task {name} is {days:.2} days overdue; aborting it.");
                self.abort_result(state, &url, &name, EXIT_OVERDUE_EXCEEDED, now);
                changed = true;
            } else {
                info!(project = %url,
                    "Task {name} is {days:.2} days overdue; you may not get credit for it. \
                     Consider aborting it."
                );
            }
        }
        changed
    }

    /// Aborts a result with `code` (unless its computation already ended): it is marked
    /// aborted and ready to report, its app (if any) is aborted, a held slot freed and its
    /// active task dropped. Returns whether the result was marked.
    pub fn abort_result(
        &mut self,
        state: &mut ClientState,
        url: &str,
        name: &str,
        code: i32,
        now: f64,
    ) -> bool {
        let marked = state
            .project_mut(url)
            .and_then(|p| p.result_mut(name))
            .is_some_and(|r| mark_aborted(r, code, now));
        self.abort(url, name, code);
        state
            .active_tasks
            .retain(|a| !(a.project_master_url == url && a.result_name == name));
        marked
    }

    /// Aborts the tasks `late` (none of them running) as not started before their deadline:
    /// each project's results are walked once, so aborting most of 100,000 tasks at
    /// start-up costs one look at each, not a search of the list per task. Returns whether
    /// a result was marked.
    pub(super) fn abort_unstarted_late(
        &mut self,
        state: &mut ClientState,
        late: &[Key],
        now: f64,
    ) -> bool {
        if late.is_empty() {
            return false;
        }
        let mut by_project: HashMap<&str, HashSet<&str>> = HashMap::new();
        for (url, name) in late {
            by_project.entry(url).or_default().insert(name);
        }
        let mut marked = false;
        for ps in &mut state.projects {
            let Some(names) = by_project.get(ps.project.master_url.as_str()) else {
                continue;
            };
            let url = &ps.project.master_url;
            for r in &mut ps.results {
                if names.contains(r.name.as_str()) && mark_aborted(r, EXIT_UNSTARTED_LATE, now) {
                    warn!(
                        project = %url,
                        "aborting task {}: not started and deadline has passed",
                        r.name
                    );
                    marked = true;
                }
            }
        }
        state.active_tasks.retain(|a| {
            !by_project
                .get(a.project_master_url.as_str())
                .is_some_and(|names| names.contains(a.result_name.as_str()))
        });
        for (url, name) in late {
            self.abort(url, name, EXIT_UNSTARTED_LATE);
        }
        marked
    }

    /// A user abort: the process (if any) is aborted with `code`; a held slot is freed.
    pub fn abort(&mut self, url: &str, result: &str, code: i32) {
        let key = (url.to_owned(), result.to_owned());
        if let Some(l) = self.live.get_mut(&key) {
            l.task.abort(code, Instant::now());
        } else if let Some(slot) = self.held.remove(&key) {
            if let Err(e) = self.slots.release(slot) {
                warn!("task {result}: cannot clean its slot: {e}");
            }
        }
    }
}

/// Marks `r` aborted with `code` and ready to report, unless its computation already ended;
/// returns whether it was marked.
fn mark_aborted(r: &mut TaskResult, code: i32, now: f64) -> bool {
    if r.state >= ResultState::ComputeError {
        return false;
    }
    r.state = ResultState::Aborted;
    r.exit_status = code;
    r.ready_to_report = true;
    r.completed_time = now;
    true
}

#[cfg(test)]
mod tests {
    use ferrite_proto::client_state::{synthetic, ActiveTask};

    use super::*;

    #[test]
    fn late_tasks_are_aborted_in_one_walk_and_the_others_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut table = TaskTable::new(dir.path());
        let mut state = synthetic(2, 40);
        // Task 0 (project 0) has already finished; tasks 2 (project 0) and 3 (project 1)
        // were never started; task 4 (project 0) is not late.
        let name = |state: &ClientState, p: usize, i: usize| {
            (
                state.projects[p].project.master_url.clone(),
                state.projects[p].results[i].name.clone(),
            )
        };
        let done = name(&state, 0, 0);
        let late = [name(&state, 0, 1), name(&state, 1, 1)];
        let kept = name(&state, 0, 2);
        state.active_tasks.push(ActiveTask {
            project_master_url: late[1].0.clone(),
            result_name: late[1].1.clone(),
            ..ActiveTask::default()
        });
        let mut keys = late.to_vec();
        keys.push(done.clone());
        assert!(table.abort_unstarted_late(&mut state, &keys, 1.8e9));
        let result = |key: &Key| {
            state
                .project(&key.0)
                .and_then(|p| p.result(&key.1))
                .expect("result")
        };
        for key in &late {
            let r = result(key);
            assert_eq!(r.state, ResultState::Aborted, "{}", key.1);
            assert_eq!(r.exit_status, EXIT_UNSTARTED_LATE);
            assert!(r.ready_to_report);
            assert_eq!(r.completed_time, 1.8e9);
        }
        // Finished before: its outcome stands.
        assert_eq!(result(&done).state, ResultState::FilesUploaded);
        assert_eq!(result(&kept).state, ResultState::FilesDownloaded);
        assert!(state.active_tasks.is_empty());
        // Nothing late: nothing changes.
        assert!(!table.abort_unstarted_late(&mut state, &[], 1.8e9));
    }

    #[test]
    fn the_overdue_look_comes_at_the_first_pass_then_once_a_day() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut table = TaskTable::new(dir.path());
        let mut state = synthetic(1, 3);
        let t = 1.8e9;
        // Result `i` started and two days past its deadline.
        let overdue = |state: &mut ClientState, i: usize| {
            let p = &mut state.projects[0];
            let r = &mut p.results[i];
            r.state = ResultState::FilesDownloaded;
            r.report_deadline = t - 2.0 * 86400.0;
            let task = ActiveTask {
                project_master_url: p.project.master_url.clone(),
                result_name: r.name.clone(),
                ..ActiveTask::default()
            };
            state.active_tasks.push(task);
        };
        overdue(&mut state, 1);
        assert!(table.check_overdue_if_due(&mut state, t, 0.0));
        assert_eq!(state.projects[0].results[1].state, ResultState::Aborted);
        // A task found overdue within the day waits for the next look.
        overdue(&mut state, 2);
        assert!(!table.check_overdue_if_due(&mut state, t + 3600.0, 0.0));
        assert_eq!(
            state.projects[0].results[2].state,
            ResultState::FilesDownloaded
        );
        assert!(table.check_overdue_if_due(&mut state, t + 86400.0, 0.0));
        assert_eq!(state.projects[0].results[2].state, ResultState::Aborted);
    }
}
