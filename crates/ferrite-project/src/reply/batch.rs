//! A reply of many thousand new tasks applied in batches: [`split_tasks`] (off the main
//! loop) keeps the first batch in the reply and returns the rest, each batch's results with
//! the workunits and files that only they (and later ones) need; [`apply_task_batch`] merges
//! one batch, so the daemon can take in a reply of 100,000 tasks a few thousand per turn of
//! its loop while GUIs keep being answered.
//!
//! Applying the reply and then its batches, in order, leaves the project's results exactly
//! as [`apply_reply`] of the whole reply does (same objects, same run order); only the
//! order in which files and workunits are listed may differ.

use std::collections::HashSet;

use rustc_hash::FxHashMap;

use ferrite_proto::client_state::{ClientState, FileInfo, ProjectState, TaskResult, Workunit};
use ferrite_proto::sched_reply::SchedulerReply;

use super::merge::{
    check_signatures, merge_files, merge_results, merge_workunits, positions, sort_results, Names,
};
use super::{project_index, ApplyError, ApplyOptions, ApplyOutcome, Setting};
use crate::verify::SignatureVerifier;

/// New tasks held back from a reply, to be merged after it by [`apply_task_batch`]: results,
/// with the workunits and files no earlier part of the reply refers to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskBatch {
    /// Files (input and output files of the batch's tasks).
    pub file_infos: Vec<FileInfo>,
    /// Workunits of the batch's results.
    pub workunits: Vec<Workunit>,
    /// The results, in BOINC's run order for results received together.
    pub results: Vec<TaskResult>,
}

/// The key BOINC orders results received at the same time by: the MD5 of the name.
fn run_key(r: &TaskResult) -> String {
    ferrite_proto::crypt::md5_hex(r.name.as_bytes())
}

/// Splits a reply with more than `size` new results: the reply keeps everything but the
/// results past the first `size` (in run order) and the workunits and files only those
/// need; they are returned in batches of at most `size` results, in run order, to be
/// applied after the reply. Results the reply also acknowledges, aborts or sends a
/// trickle-down for stay in the reply, as do files named by app versions or the project's
/// file list. A reply of at most `size` results is left as it is.
pub fn split_tasks(reply: &mut SchedulerReply, size: usize) -> Vec<TaskBatch> {
    let size = size.max(1);
    if reply.results.len() <= size {
        return Vec::new();
    }
    // Results in run order: each batch then follows the one before it in the state.
    let mut keyed: Vec<(String, TaskResult)> = std::mem::take(&mut reply.results)
        .into_iter()
        .map(|r| (run_key(&r), r))
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    let pinned: HashSet<&str> = reply
        .result_acks
        .iter()
        .chain(&reply.result_aborts)
        .chain(&reply.result_abort_if_not_started)
        .map(String::as_str)
        .chain(reply.trickle_downs.iter().map(|t| t.result_name.as_str()))
        .collect();
    let mut results: Vec<(usize, TaskResult)> = Vec::with_capacity(keyed.len());
    let mut placed = 0usize;
    for (_, r) in keyed {
        let batch = if pinned.contains(r.name.as_str()) {
            0
        } else {
            placed += 1;
            (placed - 1) / size
        };
        results.push((batch, r));
    }
    // Each workunit and file goes with the earliest batch that names it; one named by
    // nothing held back stays in the reply.
    let mut wu_batch: FxHashMap<String, usize> = FxHashMap::default();
    for (b, r) in &results {
        let e = wu_batch.entry(r.wu_name.clone()).or_insert(*b);
        *e = (*e).min(*b);
    }
    let wu_of = |name: &str| wu_batch.get(name).copied().unwrap_or(0);
    let mut file_batch: FxHashMap<String, usize> = FxHashMap::default();
    let mut name_file = |name: &str, b: usize| {
        let e = file_batch.entry(name.to_owned()).or_insert(b);
        *e = (*e).min(b);
    };
    for (b, r) in &results {
        for fr in &r.output_files {
            name_file(&fr.file_name, *b);
        }
    }
    for w in &reply.workunits {
        for fr in &w.input_files {
            name_file(&fr.file_name, wu_of(&w.name));
        }
    }
    let in_reply = reply
        .app_versions
        .iter()
        .flat_map(|v| v.file_refs.iter().map(|fr| fr.file_name.as_str()))
        .chain(
            reply
                .project_files
                .iter()
                .flatten()
                .map(|fr| fr.file_name.as_str()),
        )
        .chain(reply.delete_file_infos.iter().map(String::as_str))
        .map(str::to_owned)
        .collect::<Vec<_>>();
    for name in in_reply {
        name_file(&name, 0);
    }
    let file_of = |name: &str| file_batch.get(name).copied().unwrap_or(0);

    let last = results.iter().map(|(b, _)| *b).max().unwrap_or(0);
    let mut batches = vec![TaskBatch::default(); last];
    let mut kept_files = Vec::new();
    for f in std::mem::take(&mut reply.file_infos) {
        match file_of(&f.name) {
            0 => kept_files.push(f),
            b => batches[b - 1].file_infos.push(f),
        }
    }
    reply.file_infos = kept_files;
    let mut kept_wus = Vec::new();
    for w in std::mem::take(&mut reply.workunits) {
        match wu_of(&w.name) {
            0 => kept_wus.push(w),
            b => batches[b - 1].workunits.push(w),
        }
    }
    reply.workunits = kept_wus;
    for (b, r) in results {
        match b {
            0 => reply.results.push(r),
            b => batches[b - 1].results.push(r),
        }
    }
    batches
}

/// Merges one batch held back from a reply of project `master_url` (see [`split_tasks`]),
/// with the reply's `now`: its files, workunits and results, as [`apply_reply`] merges a
/// reply's. The outcome holds only the batch's events, refusals and tasks added.
pub fn apply_task_batch(
    state: &mut ClientState,
    master_url: &str,
    batch: &TaskBatch,
    now: f64,
    opts: &ApplyOptions,
    verifier: &dyn SignatureVerifier,
) -> Result<ApplyOutcome, ApplyError> {
    let mut index = BatchIndex::default();
    apply_task_batch_indexed(state, master_url, batch, now, opts, verifier, &mut index)
}

/// The project's files, workunits and results by name, kept from one batch of a reply to
/// the next so that a batch costs what it adds, not a sweep of the whole project. Between
/// two batches only the batches add objects to the project (its scheduler operation is in
/// flight until the last), so an index whose lists have the lengths it left them with, and
/// whose first and last objects are where it says, still holds; any other index is rebuilt.
#[derive(Debug, Default)]
pub struct BatchIndex {
    /// The project (its position in the state) and the lists' lengths it was left with.
    at: Option<(usize, [usize; 3])>,
    files: Names,
    workunits: Names,
    results: Names,
}

/// Whether `names` holds the first and the last of `items` at their positions.
fn ends_fit<T>(names: &Names, items: &[T], name: impl Fn(&T) -> &str) -> bool {
    let fits = |i: usize| names.get(name(&items[i])) == Some(&i);
    items.is_empty() || fits(0) && fits(items.len() - 1)
}

impl BatchIndex {
    fn lens(ps: &ProjectState) -> [usize; 3] {
        [ps.files.len(), ps.workunits.len(), ps.results.len()]
    }

    /// Whether the index still describes project `index`, `ps`.
    fn fits(&self, index: usize, ps: &ProjectState) -> bool {
        self.at == Some((index, Self::lens(ps)))
            && ends_fit(&self.files, &ps.files, |f| &f.name)
            && ends_fit(&self.workunits, &ps.workunits, |w| &w.name)
            && ends_fit(&self.results, &ps.results, |r| &r.name)
    }

    /// The index made afresh.
    fn build(index: usize, ps: &ProjectState) -> BatchIndex {
        BatchIndex {
            at: Some((index, Self::lens(ps))),
            files: positions(&ps.files, |f| &f.name),
            workunits: positions(&ps.workunits, |w| &w.name),
            results: positions(&ps.results, |r| &r.name),
        }
    }
}

/// [`apply_task_batch`] with the index the batch before it left (see [`BatchIndex`]); the
/// same outcome and state as without.
pub fn apply_task_batch_indexed(
    state: &mut ClientState,
    master_url: &str,
    batch: &TaskBatch,
    now: f64,
    opts: &ApplyOptions,
    verifier: &dyn SignatureVerifier,
    index: &mut BatchIndex,
) -> Result<ApplyOutcome, ApplyError> {
    let at = project_index(state, master_url)?;
    let setting = Setting::of(state, master_url);
    let ctx = setting.ctx(now, opts);
    let mut out = ApplyOutcome::default();
    let ps = &mut state.projects[at];
    if !index.fits(at, ps) {
        *index = BatchIndex::build(at, ps);
    }
    let names = index;
    let touched = merge_files(ps, &batch.file_infos, &ctx, &mut names.files, &mut out);
    check_signatures(ps, &touched, opts, verifier, &names.files, &mut out);
    merge_workunits(
        ps,
        &batch.workunits,
        &names.files,
        &mut names.workunits,
        &mut out,
    );
    let from = ps.results.len();
    merge_results(
        ps,
        &batch.results,
        &ctx,
        &names.files,
        &names.workunits,
        &mut names.results,
        &mut out,
    );
    // The batch came in run order after the ones before it: only when something else
    // broke the order (a clock set back) is the whole list sorted again, and the index of
    // the results made afresh.
    if in_run_order(&ps.results[from.saturating_sub(1)..]) {
        names.at = Some((at, BatchIndex::lens(ps)));
    } else {
        sort_results(&mut ps.results);
        *names = BatchIndex::build(at, ps);
    }
    Ok(out)
}

/// Whether `results` are in BOINC's run order (received time, then MD5 of the name).
fn in_run_order(results: &[TaskResult]) -> bool {
    let keys: Vec<(f64, String)> = results
        .iter()
        .map(|r| (r.received_time, run_key(r)))
        .collect();
    keys.windows(2).all(|w| {
        w[0].0
            .total_cmp(&w[1].0)
            .then_with(|| w[0].1.cmp(&w[1].1))
            .is_le()
    })
}

impl ApplyOutcome {
    /// Adds what a batch applied after this reply brought: its events, refusals and tasks.
    pub fn absorb(&mut self, batch: ApplyOutcome) {
        self.events.extend(batch.events);
        self.refusals.extend(batch.refusals);
        for (resource, n) in batch.tasks_added {
            *self.tasks_added.entry(resource).or_insert(0) += n;
        }
    }
}
