//! Ending a project's tasks before it is detached or reset, as the official client does
//! (`ACTIVE_TASK_SET::abort_project`): no app of the project outlives it.

use super::*;

/// How long ending a project's tasks waits for their killed processes to be reaped.
const END_WAIT: Duration = Duration::from_secs(5);
/// How often it looks while it waits.
const END_POLL: Duration = Duration::from_millis(5);

impl TaskTable {
    /// Ends every task of project `url` now: each app's whole process tree is killed
    /// (SIGKILL, which ends a stopped process too), its main process reaped and its slot
    /// emptied and freed; the slots held by the project's tasks without a process are freed
    /// too. Nothing is recorded in the results: the caller drops them (detach) or resets
    /// the project. Returns how many processes were ended.
    ///
    /// Blocks until the processes are gone, at most [`END_WAIT`] (a killed process goes in
    /// milliseconds); one still there after that is left to the next poll, which reaps it.
    pub fn end_project(&mut self, url: &str) -> usize {
        let keys: Vec<Key> = self.live.keys().filter(|k| k.0 == url).cloned().collect();
        let mut ending: Vec<(Key, Live)> = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(mut l) = self.live.remove(&key) {
                info!("task {}: ending its app (project removed or reset)", key.1);
                l.task.kill(Instant::now());
                ending.push((key, l));
            }
        }
        let ended = ending.len();
        let deadline = Instant::now() + END_WAIT;
        while !ending.is_empty() {
            let mut i = 0;
            while i < ending.len() {
                let gone = ending[i]
                    .1
                    .task
                    .poll(Instant::now())
                    .iter()
                    .any(|e| matches!(e, TaskEvent::Exited(_)));
                if gone {
                    let (key, l) = ending.swap_remove(i);
                    if let Err(e) = self.slots.release(l.slot) {
                        warn!("task {}: cannot clean its slot: {e}", key.1);
                    }
                } else {
                    i += 1;
                }
            }
            if ending.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                for (key, l) in ending.drain(..) {
                    warn!(
                        "task {}: its app (pid {}) has not ended yet",
                        key.1,
                        l.task.pid()
                    );
                    self.live.insert(key, l);
                }
                break;
            }
            std::thread::sleep(END_POLL);
        }
        let held: Vec<Key> = self.held.keys().filter(|k| k.0 == url).cloned().collect();
        for key in held {
            if let Some(slot) = self.held.remove(&key) {
                if let Err(e) = self.slots.release(slot) {
                    warn!("task {}: cannot clean its slot: {e}", key.1);
                }
            }
        }
        self.not_before.retain(|k, _| k.0 != url);
        self.start_failures.retain(|k, _| k.0 != url);
        if ended > 0 {
            self.write_records();
        }
        ended
    }
}
