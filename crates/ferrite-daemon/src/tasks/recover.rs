//! Start-up after a previous client: what its apps became while no client ran.
//!
//! Each app leads its own session, so a client killed with SIGKILL (or lost to a crash) leaves
//! its apps running. At start-up a task of the state file is, by what its slot shows:
//! - **finished**: its app called `boinc_finish` (`boinc_finish_called` in the slot) and
//!   ended, its exit unseen: it is taken as ended with that file's status, as the official
//!   client's `check_for_finished_jobs` does, its outputs collected and reported, not run
//!   again;
//! - **still running**, a CPU app found by its task record (same PID and start time, working
//!   in the task's slot): it is taken over where it runs ([`Task::adopt`]), its channels kept
//!   and its `init_data.xml` given this client's PID (API apps reread it when told; they
//!   would otherwise end within 10 s on seeing the old PID gone);
//! - **started just before the kill**: a task is recorded (without a PID) before its app is
//!   spawned, so a task the state file does not yet know as running is found, and a process
//!   leading its group in that task's slot is its app, taken over as above;
//! - **anything else** (no process, a GPU app, whose device the scheduler may now give to
//!   another task, an app found in a slot without a record): ended if it runs, and the task
//!   restarted from its checkpoint.

use super::*;
use ferrite_proto::client_state::ProjectLookup;
use ferrite_supervise::slot::{FINISH_FILE, INIT_DATA_FILE};
use ferrite_supervise::Orphan;

/// A task a previous client left behind, to be taken over at the first tick.
#[derive(Debug)]
pub(super) struct Leftover {
    /// Its app, still running, and the main process's start time; `None` when it already
    /// ended after calling `boinc_finish`.
    running: Option<(Orphan, u64)>,
    /// Its task record while it runs, kept in the records file until it is taken over, so a
    /// client killed again before that still finds it.
    pub(super) record: Option<TaskRecord>,
}

impl TaskTable {
    /// Start-up: takes over the apps a previous client left running where that is safe, ends
    /// the others, and claims the slots of the state's active tasks, which resume from their
    /// checkpoints (or, for a finished app, are reported).
    pub fn recover(&mut self, state: &mut ClientState) {
        let records = read_records(&self.dir);
        self.add_unsaved_starts(state, &records);
        let mut orphans = find_orphans(&records);
        // Apps started just before a kill, before their record had a PID, are found by where
        // they work: the leader of a group in the slot of a task recorded as starting is that
        // task's app (and its group goes with it); any other is ended.
        let strays = find_strays(&self.slots.slots_dir(), &orphans);
        let mut leaders = Vec::new();
        for s in &strays {
            if let Some(rec) = records
                .iter()
                .find(|r| r.pid.is_none() && s.whole_group && works_in(s.pid, &r.slot_dir))
            {
                leaders.push(Orphan {
                    result_name: rec.result_name.clone(),
                    ..s.clone()
                });
            }
        }
        let mut to_end: Vec<Orphan> = strays
            .into_iter()
            .filter(|s| !leaders.iter().any(|l| l.pgid == s.pgid))
            .collect();
        orphans.extend(leaders);
        let mut running: HashMap<String, (Orphan, u64, TaskRecord)> = HashMap::new();
        let lookups: Vec<ProjectLookup<'_>> =
            state.projects.iter().map(ProjectLookup::new).collect();
        for o in orphans {
            match adoptable(state, &lookups, &records, &o) {
                Some((starttime, rec)) => {
                    running.insert(o.result_name.clone(), (o, starttime, rec));
                }
                None => to_end.push(o),
            }
        }
        drop(lookups);
        if !to_end.is_empty() {
            info!(
                "ending {} app(s) left running by a previous client: {}",
                to_end.len(),
                to_end
                    .iter()
                    .map(|o| format!("{} (pid {})", o.result_name, o.pid))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if let Err(e) = end_orphans(&to_end, Duration::from_secs(5)) {
                warn!("could not end every leftover app: {e}");
            }
        }
        for a in &mut state.active_tasks {
            let n = u32::try_from(a.slot).unwrap_or(u32::MAX);
            // A checkpoint newer than the state file knows.
            if let Some(r) = records.iter().find(|r| r.result_name == a.result_name) {
                if r.checkpoint_elapsed_time > a.checkpoint_elapsed_time {
                    a.checkpoint_cpu_time = r.checkpoint_cpu_time;
                    a.checkpoint_elapsed_time = r.checkpoint_elapsed_time;
                    a.checkpoint_fraction_done = r.fraction_done;
                }
            }
            a.active_task_state = 0;
            let key = (a.project_master_url.clone(), a.result_name.clone());
            let leftover = running.remove(&a.result_name);
            // The slot's init_data.xml names the task whose files it holds: another task
            // may have used the slot since the state file was saved, and keeps it; this one
            // starts again in another slot.
            let slot_dir = self.slots.slots_dir().join(n.to_string());
            if slot_owner(&slot_dir).is_some_and(|owner| owner != a.result_name) {
                a.slot = -1;
                if let Some((o, _, _)) = leftover {
                    end_leftover(o);
                }
                continue;
            }
            match self.slots.claim(n) {
                Ok(slot) => {
                    let finished = slot.dir().join(FINISH_FILE).exists();
                    if leftover.is_some() || finished {
                        let (running, record) = match leftover {
                            Some((o, t, rec)) => (Some((o, t)), Some(rec)),
                            None => (None, None),
                        };
                        self.adopt.insert(key.clone(), Leftover { running, record });
                    }
                    self.held.insert(key, slot);
                }
                Err(e) => {
                    warn!(project = %a.project_master_url, "task {}: cannot claim slot {n}: {e}", a.result_name);
                    if let Some((o, _, _)) = leftover {
                        end_leftover(o);
                    }
                }
            }
        }
        // A running app whose task the state file no longer has.
        for (_, (o, _, _)) in running {
            end_leftover(o);
        }
        self.write_records();
    }

    /// Tasks whose apps started after the state file was last saved (saves are coalesced):
    /// their task records name them, and they become active tasks in their slots again so
    /// that what their apps did is not lost.
    fn add_unsaved_starts(&self, state: &mut ClientState, records: &[TaskRecord]) {
        let known: HashSet<&str> = state
            .active_tasks
            .iter()
            .map(|a| a.result_name.as_str())
            .collect();
        let mut added = Vec::new();
        // Per project: the files its app read (present on disk, whatever the state says)
        // and the results that ran.
        let mut ran: Vec<(usize, Vec<usize>, usize)> = Vec::new();
        let lookups: Vec<ProjectLookup<'_>> =
            state.projects.iter().map(ProjectLookup::new).collect();
        for rec in records {
            if known.contains(rec.result_name.as_str())
                || slot_owner(&rec.slot_dir).as_deref() != Some(rec.result_name.as_str())
                || !same_slot(
                    &rec.slot_dir,
                    &self.slots.slots_dir().join(rec.slot.to_string()),
                )
            {
                continue;
            }
            let Some((p, look, r)) = lookups
                .iter()
                .enumerate()
                .find_map(|(p, l)| l.result(&rec.result_name).map(|r| (p, l, r)))
            else {
                continue;
            };
            let runnable = matches!(
                r.state,
                ResultState::New | ResultState::FilesDownloading | ResultState::FilesDownloaded
            );
            let ps = look.project();
            let Some(av) = ps
                .app_version_of(r)
                .filter(|_| runnable && !r.got_server_ack)
            else {
                continue;
            };
            info!(project = %ps.project.master_url,
                "task {} was started in slot {} after the state file was last saved",
                rec.result_name,
                rec.slot
            );
            let files = av
                .file_refs
                .iter()
                .chain(
                    look.workunit(&r.wu_name)
                        .into_iter()
                        .flat_map(|w| &w.input_files),
                )
                .filter_map(|f| look.file_index(&f.file_name))
                .collect();
            if let Some(ri) = look.result_index(&r.name) {
                ran.push((p, files, ri));
            }
            added.push(ActiveTask {
                project_master_url: ps.project.master_url.clone(),
                result_name: rec.result_name.clone(),
                app_version_num: av.version_num,
                slot: i32::try_from(rec.slot).unwrap_or(i32::MAX),
                checkpoint_cpu_time: rec.checkpoint_cpu_time,
                checkpoint_elapsed_time: rec.checkpoint_elapsed_time,
                checkpoint_fraction_done: rec.fraction_done,
                ..ActiveTask::default()
            });
        }
        drop(lookups);
        state.active_tasks.extend(added);
        // The app ran, so its files were in place: they count as present when the disk has
        // them at their size, and the result as ready to run.
        for (p, files, ri) in ran {
            let Some(ps) = state.projects.get_mut(p) else {
                continue;
            };
            let pdir = config::project_dir(&self.dir, &ps.project.master_url);
            let mut all = true;
            for i in files {
                let Some(f) = ps.files.get_mut(i) else {
                    continue;
                };
                let on_disk = fs::metadata(pdir.join(&f.name))
                    .is_ok_and(|m| m.is_file() && (f.nbytes <= 0.0 || m.len() as f64 == f.nbytes));
                if f.status == 0 && on_disk {
                    f.status = 1;
                }
                all &= f.status == 1;
            }
            if let Some(r) = ps.results.get_mut(ri).filter(|_| all) {
                r.state = ResultState::FilesDownloaded;
            }
        }
    }

    /// The first tick: each leftover task is taken over (its app supervised where it runs,
    /// or its finish found) before anything is polled or started.
    pub(super) fn take_over(
        &mut self,
        state: &mut ClientState,
        inputs: &TickInputs<'_>,
        now: f64,
        inst: Instant,
        report: &mut TickReport,
    ) {
        let pending: Vec<(Key, Leftover)> = self.adopt.drain().collect();
        for (key, left) in pending {
            let process = left.running.as_ref().map(|(o, t)| (o.pid, *t));
            match self.start(state, inputs, &key, 0, now, inst, Some(process)) {
                Ok(()) => report.changed = true,
                Err(msg) => {
                    warn!(project = %key.0,
                        "cannot take over task {}: {msg}; it restarts from its checkpoint",
                        key.1
                    );
                    if let Some((o, _)) = left.running {
                        end_leftover(o);
                    }
                }
            }
        }
        self.write_records();
    }
}

/// The start time and record of a recorded app's main process when it may be taken over: it still leads
/// its group, works in the slot the state file gives its task, and computes on CPUs only.
fn adoptable(
    state: &ClientState,
    lookups: &[ProjectLookup<'_>],
    records: &[TaskRecord],
    o: &Orphan,
) -> Option<(u64, TaskRecord)> {
    let rec = records.iter().find(|r| r.result_name == o.result_name)?;
    // No PID: recorded as starting, its app found leading a group in its slot.
    if rec.pid.is_some_and(|p| p != o.pid) || !o.whole_group {
        return None;
    }
    let a = state
        .active_tasks
        .iter()
        .find(|a| a.result_name == o.result_name && u32::try_from(a.slot).ok() == Some(rec.slot))?;
    let look = lookups
        .iter()
        .find(|l| l.project().project.master_url == a.project_master_url)?;
    let av = look
        .project()
        .app_version_of(look.result(&a.result_name)?)?;
    if av.usage.coprocs.iter().any(|c| c.count > 0.0) {
        return None;
    }
    let starttime = match rec.pid_starttime {
        0 => ferrite_supervise::procinfo::ProcStat::read(o.pid).map(|s| s.starttime)?,
        t => t,
    };
    Some((starttime, rec.clone()))
}

/// The result whose files a slot holds, from its `init_data.xml`.
fn slot_owner(slot_dir: &Path) -> Option<String> {
    let text = fs::read_to_string(slot_dir.join(INIT_DATA_FILE)).ok()?;
    let data = AppInitData::parse(&text, INIT_DATA_FILE).ok()?.value;
    Some(data.result_name).filter(|n| !n.is_empty())
}

/// Whether process `pid` works in `slot_dir` (or below it).
fn works_in(pid: i32, slot_dir: &Path) -> bool {
    match (
        fs::canonicalize(format!("/proc/{pid}/cwd")),
        fs::canonicalize(slot_dir),
    ) {
        (Ok(cwd), Ok(slot)) => cwd.starts_with(slot),
        _ => false,
    }
}

fn same_slot(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn end_leftover(o: Orphan) {
    info!(
        "ending the app of {} (pid {}) left running by a previous client",
        o.result_name, o.pid
    );
    if let Err(e) = end_orphans(&[o], Duration::from_secs(5)) {
        warn!("could not end a leftover app: {e}");
    }
}

/// An adopted app's `init_data.xml` with this client's PID, the rest as it was started with
/// (its starting CPU and elapsed times among them); `fresh` when the file cannot be read.
pub(super) fn retarget_init_data(slot: &Slot, fresh: &AppInitData) -> Result<(), String> {
    let path = slot.dir().join(INIT_DATA_FILE);
    let mut data = fs::read_to_string(&path)
        .ok()
        .and_then(|t| AppInitData::parse(&t, INIT_DATA_FILE).ok())
        .map_or_else(|| fresh.clone(), |p| p.value);
    data.client_pid = fresh.client_pid;
    slot.write_init_data(&data.to_xml())
        .map_err(|e| format!("slot {}: {e}", slot.number()))
}
