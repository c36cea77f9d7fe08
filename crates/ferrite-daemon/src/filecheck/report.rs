//! What the start-up check of a project logs: each file found wrong and each task touched,
//! up to a limit per kind, then how many more there were.

use ferrite_project::existence::{FileAction, FileCheck, FileProblem, TaskFate};

/// Files, and tasks, the start-up check of a project logs one by one; past these, one line
/// says how many more there were. A lost project directory of 100,000 tasks would otherwise
/// log some 300,000 lines at start-up, their formatting a good part of the start-up's time,
/// and push every other message out of the few thousand kept for GUIs.
pub const LOGGED_PER_KIND: usize = 20;

/// What the check of one project logs, in order, each line with whether it is a warning:
/// the first [`LOGGED_PER_KIND`] files found wrong and what becomes of them, then a count of
/// the others; the same for the tasks touched.
pub(super) fn check_lines(check: &FileCheck) -> Vec<(bool, String)> {
    let mut lines = Vec::new();
    for f in check.files.iter().take(LOGGED_PER_KIND) {
        lines.push(match (f.action, &f.problem) {
            (FileAction::Refetch, FileProblem::HadError(_)) => {
                (false, format!("resetting file {}: {}", f.name, f.problem))
            }
            (FileAction::Refetch, problem) => (
                true,
                format!("file {}: {problem}; it is downloaded again", f.name),
            ),
            (FileAction::Lost, problem) => (
                true,
                format!("file {}: {problem}; it cannot be downloaded again", f.name),
            ),
        });
    }
    let rest = check.files.get(LOGGED_PER_KIND..).unwrap_or_default();
    if !rest.is_empty() {
        let lost = rest.iter().filter(|f| f.action == FileAction::Lost).count();
        lines.push((
            true,
            format!(
                "{} more files found missing or wrong, not listed: {} downloaded again, {lost} \
                 that cannot be",
                rest.len(),
                rest.len() - lost
            ),
        ));
    }
    for (task, fate) in check.tasks.iter().take(LOGGED_PER_KIND) {
        lines.push(match fate {
            TaskFate::WaitsFor(files) => (
                false,
                format!(
                    "task {task} waits for {} to be downloaded again",
                    files.join(", ")
                ),
            ),
            TaskFate::Error { code, why } => (
                true,
                format!(
                    "task {task} fails ({code}): {}; it is reported as an error",
                    why.lines().next().unwrap_or(why)
                ),
            ),
        });
    }
    let rest = check.tasks.get(LOGGED_PER_KIND..).unwrap_or_default();
    if !rest.is_empty() {
        let failed = rest
            .iter()
            .filter(|(_, fate)| matches!(fate, TaskFate::Error { .. }))
            .count();
        lines.push((
            failed > 0,
            format!(
                "{} more tasks touched, not listed: {} wait for files to be downloaded again, \
                 {failed} fail and are reported as errors",
                rest.len(),
                rest.len() - failed
            ),
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_project::existence::FileFinding;

    /// A check that found `files` files missing (the last one lost, the others fetched
    /// again) and touched `tasks` tasks (the last one failed, the others waiting).
    fn many(files: usize, tasks: usize) -> FileCheck {
        FileCheck {
            files: (0..files)
                .map(|i| FileFinding {
                    name: format!("in_{i}"),
                    problem: FileProblem::Missing,
                    action: if i + 1 == files {
                        FileAction::Lost
                    } else {
                        FileAction::Refetch
                    },
                })
                .collect(),
            tasks: (0..tasks)
                .map(|i| {
                    let fate = if i + 1 == tasks {
                        TaskFate::Error {
                            code: -186,
                            why: format!("in_{i} cannot be downloaded again"),
                        }
                    } else {
                        TaskFate::WaitsFor(vec![format!("in_{i}")])
                    };
                    (format!("task_{i}"), fate)
                })
                .collect(),
        }
    }

    #[test]
    fn a_few_findings_are_each_logged() {
        let lines = check_lines(&many(2, 2));
        assert_eq!(
            lines,
            vec![
                (
                    true,
                    "file in_0: missing; it is downloaded again".to_string()
                ),
                (
                    true,
                    "file in_1: missing; it cannot be downloaded again".to_string()
                ),
                (
                    false,
                    "task task_0 waits for in_0 to be downloaded again".to_string()
                ),
                (
                    true,
                    "task task_1 fails (-186): in_1 cannot be downloaded again; it is reported \
                     as an error"
                        .to_string()
                ),
            ]
        );
    }

    #[test]
    fn many_findings_log_the_first_ones_and_a_count_of_the_rest() {
        let lines = check_lines(&many(100_000, 50_000));
        assert_eq!(lines.len(), 2 * LOGGED_PER_KIND + 2, "{lines:?}");
        assert_eq!(
            lines[LOGGED_PER_KIND - 1],
            (
                true,
                format!(
                    "file in_{}: missing; it is downloaded again",
                    LOGGED_PER_KIND - 1
                )
            )
        );
        assert_eq!(
            lines[LOGGED_PER_KIND],
            (
                true,
                format!(
                    "{} more files found missing or wrong, not listed: {} downloaded again, 1 \
                     that cannot be",
                    100_000 - LOGGED_PER_KIND,
                    100_000 - LOGGED_PER_KIND - 1
                )
            )
        );
        assert_eq!(
            lines[LOGGED_PER_KIND + 1],
            (
                false,
                "task task_0 waits for in_0 to be downloaded again".to_string()
            )
        );
        assert_eq!(
            lines.last(),
            Some(&(
                true,
                format!(
                    "{} more tasks touched, not listed: {} wait for files to be downloaded \
                     again, 1 fail and are reported as errors",
                    50_000 - LOGGED_PER_KIND,
                    50_000 - LOGGED_PER_KIND - 1
                )
            ))
        );
    }
}
