//! The pure parts of the GUI RPC replies that list the state: number formatting, the
//! resources string and the finders that look workunits and tasks up in step with the
//! results. The replies themselves (`get_state`, `get_results` and kin) are
//! `daemon/rpc/state_reply.rs`.

use std::collections::HashMap;

use ferrite_proto::client_state::{ActiveTask, ClientState, ProjectState, ResourceUsage, Workunit};

/// `%.3g`: three significant digits, trailing zeros dropped.
pub(crate) fn g3(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".to_owned();
    }
    let exp = v.abs().log10().floor() as i32;
    let decimals = usize::try_from(2 - exp).unwrap_or(0);
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// The `<resources>` text of a task (`0.5 CPUs`, `1 CPU + 1 NVIDIA GPU`); `None` for a plain
/// one-CPU job, which the official client leaves out.
pub(crate) fn resources_string(u: &ResourceUsage) -> Option<String> {
    let n = if u.avg_ncpus > 0.0 { u.avg_ncpus } else { 1.0 };
    let cpus = if n == 1.0 { "CPU" } else { "CPUs" };
    match u.coprocs.iter().find(|c| c.count > 0.0) {
        Some(c) => {
            let gpu = match c.rsc_type.as_str() {
                "NVIDIA" | "CUDA" => "NVIDIA GPU",
                "ATI" => "AMD/ATI GPU",
                "intel_gpu" => "Intel GPU",
                "apple_gpu" => "Apple GPU",
                other => other,
            };
            Some(if c.count == 1.0 {
                format!("{} {cpus} + 1 {gpu}", g3(n))
            } else {
                format!("{} {cpus} + {} {gpu}s", g3(n), g3(c.count))
            })
        }
        None => (n != 1.0).then(|| format!("{} {cpus}", g3(n))),
    }
}

/// Finds a project's workunits while a reply lists its results (a reply may list 10,000
/// tasks): results mostly come in their workunits' order, so the workunits after the last
/// one found are tried first; an index by name is built on the first miss.
pub(crate) struct WorkunitFinder<'a> {
    workunits: &'a [Workunit],
    next: usize,
    index: Option<HashMap<&'a str, &'a Workunit>>,
}

impl<'a> WorkunitFinder<'a> {
    pub(crate) fn new(p: &'a ProjectState) -> Self {
        WorkunitFinder {
            workunits: &p.workunits,
            next: 0,
            index: None,
        }
    }

    pub(crate) fn find(&mut self, name: &str) -> Option<&'a Workunit> {
        let ahead = self
            .workunits
            .iter()
            .enumerate()
            .skip(self.next)
            .take(AHEAD);
        for (i, wu) in ahead {
            if wu.name == name {
                self.next = i + 1;
                return Some(wu);
            }
        }
        let workunits = self.workunits;
        self.index
            .get_or_insert_with(|| {
                let mut index = HashMap::with_capacity(workunits.len());
                for w in workunits {
                    // The first of a name, as `ProjectState::workunit` finds it.
                    index.entry(w.name.as_str()).or_insert(w);
                }
                index
            })
            .get(name)
            .copied()
    }
}

/// How many jobs after the last one found are tried before a lookup.
pub(crate) const AHEAD: usize = 16;

/// Finds the scheduling core's job of each result while a reply lists them. The core's
/// world lists the jobs in the state's order, so the job after the last one found is tried
/// first, then the few after it (no allocation, no search); any other result is looked up
/// by its id.
#[derive(Default)]
pub(crate) struct JobFinder {
    /// Where the next result's job is likely to be in `World::jobs`.
    next: usize,
    /// Position in `World::jobs` by job id, made on the first lookup by id.
    by_id: Option<HashMap<u32, usize>>,
    /// Position in the state's active tasks by project URL and result name, made on the
    /// first lookup (the first of a pair, as `ClientState::active_task` finds it).
    active: Option<HashMap<String, HashMap<String, usize>>>,
}

impl JobFinder {
    pub(crate) fn find<'w>(
        &mut self,
        world: &'w ferrite_sched::World,
        ids: &crate::snapshot::IdMap,
        url: &str,
        result: &str,
    ) -> Option<&'w ferrite_sched::Job> {
        // Results without a job lookup (finished ones) may lie in between.
        let ahead = world.jobs.iter().enumerate().skip(self.next).take(AHEAD);
        for (i, j) in ahead {
            if ids
                .job(j.id)
                .is_some_and(|(u, n)| n.as_str() == result && u.as_str() == url)
            {
                self.next = i + 1;
                return Some(j);
            }
        }
        let id = ids.find_job(url, result)?;
        let i = *self
            .by_id
            .get_or_insert_with(|| {
                let mut at = HashMap::with_capacity(world.jobs.len());
                for (i, j) in world.jobs.iter().enumerate() {
                    at.entry(j.id.0).or_insert(i);
                }
                at
            })
            .get(&id.0)?;
        self.next = i + 1;
        world.jobs.get(i)
    }
}

impl JobFinder {
    /// The active task of result `result` of project `url`, through an index rather than a
    /// scan of the active tasks per result.
    pub(crate) fn active_task<'s>(
        &mut self,
        state: &'s ClientState,
        url: &str,
        result: &str,
    ) -> Option<&'s ActiveTask> {
        let i = *self
            .active
            .get_or_insert_with(|| {
                let mut at: HashMap<String, HashMap<String, usize>> = HashMap::new();
                for (i, a) in state.active_tasks.iter().enumerate() {
                    at.entry(a.project_master_url.clone())
                        .or_default()
                        .entry(a.result_name.clone())
                        .or_insert(i);
                }
                at
            })
            .get(url)?
            .get(result)?;
        state.active_tasks.get(i)
    }
}
