//! The scheduling snapshot: the client's state (with configuration, host and the live tasks)
//! turned into a `ferrite_sched::World`, and the stable id map that ties the core's indices
//! back to projects, apps, app versions and results.
//!
//! The core keeps per-project figures (REC, backoffs) by index, so an entity keeps its index
//! for the life of the daemon: [`IdMap`] only ever appends. A project that disappears from the
//! state stays in the world as a suspended project without jobs.

use std::collections::{BTreeMap, HashMap};

use ferrite_proto::app_config::AppConfig;
use ferrite_proto::cc_config::ExcludeGpu;
use ferrite_proto::client_state::{ClientState, ProjectLookup, ResultState};
use ferrite_proto::prefs::GlobalPrefs;
use ferrite_sched::{
    App, AppId, AppVersion, AppVersionId, Coproc, CoprocKind, Host, Job, JobId, JobState, Prefs,
    Project, ProjectId, ResourceId, World,
};

/// Key of an app version: master URL, app name, platform, version number, plan class.
pub type VersionKey = (String, String, String, i32, String);

/// Stable ids for everything the core sees. Append-only.
#[derive(Debug, Default, Clone)]
pub struct IdMap {
    /// Master URL per project id.
    pub projects: Vec<String>,
    /// (master URL, app name) per app id.
    pub apps: Vec<(String, String)>,
    /// Version key per app-version id.
    pub versions: Vec<VersionKey>,
    /// (master URL, result name) per job id.
    pub jobs: Vec<(String, String)>,
    /// Reverse index of `jobs`, so a job keeps its id.
    job_index: HashMap<(String, String), u32>,
    /// What the last snapshot found for each result, by master URL and the result's
    /// position: checked against the state (names compared, no hashing) before it is used
    /// again, so a snapshot looks up by name only the results that are new or moved.
    found: HashMap<String, Vec<Option<Found>>>,
}

/// A result's job id, workunit and app version as a snapshot found them.
#[derive(Debug, Clone, Copy)]
struct Found {
    job: JobId,
    /// Positions in the project's workunits and app versions.
    workunit: usize,
    version: usize,
    vid: AppVersionId,
}

impl Found {
    /// Whether result `r` of `ps` is still the job `ids` knows, with the same workunit and
    /// app version at the same positions.
    fn still_fits(
        &self,
        ids: &IdMap,
        ps: &ferrite_proto::client_state::ProjectState,
        r: &ferrite_proto::client_state::TaskResult,
    ) -> bool {
        let (Some(wu), Some(v)) = (
            ps.workunits.get(self.workunit),
            ps.app_versions.get(self.version),
        ) else {
            return false;
        };
        ids.jobs
            .get(self.job.0 as usize)
            .is_some_and(|(_, n)| *n == r.name)
            && wu.name == r.wu_name
            && v.app_name == wu.app_name
            && v.platform == r.platform
            && v.version_num == r.version_num
            && v.plan_class == r.plan_class
    }
}

fn intern<K: PartialEq + Clone>(v: &mut Vec<K>, k: &K) -> u32 {
    let i = v.iter().position(|x| x == k).unwrap_or_else(|| {
        v.push(k.clone());
        v.len() - 1
    });
    u32::try_from(i).unwrap_or(u32::MAX)
}

fn index_of<K: PartialEq>(v: &[K], k: &K) -> u32 {
    v.iter()
        .position(|x| x == k)
        .and_then(|i| u32::try_from(i).ok())
        .unwrap_or(0)
}

impl IdMap {
    /// The id of a result's job (assigned on first sight).
    pub fn job_id(&mut self, url: &str, result: &str) -> JobId {
        let key = (url.to_owned(), result.to_owned());
        if let Some(id) = self.job_index.get(&key) {
            return JobId(*id);
        }
        let id = u32::try_from(self.jobs.len()).unwrap_or(u32::MAX);
        self.jobs.push(key.clone());
        self.job_index.insert(key, id);
        JobId(id)
    }

    /// The id of a result's job, if it was ever seen.
    pub fn find_job(&self, url: &str, result: &str) -> Option<JobId> {
        self.job_index
            .get(&(url.to_owned(), result.to_owned()))
            .map(|id| JobId(*id))
    }

    /// The (master URL, result name) of a job id.
    pub fn job(&self, id: JobId) -> Option<&(String, String)> {
        self.jobs.get(id.0 as usize)
    }
}

/// What the daemon knows of a result's process, for the snapshot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LiveTask {
    /// The process computes now.
    pub running: bool,
    /// The process exists but is suspended (in memory).
    pub suspended: bool,
    /// Wall time the current run started.
    pub run_started_at: f64,
    /// Elapsed seconds so far, all episodes.
    pub elapsed: f64,
    /// Fraction done reported.
    pub fraction_done: f64,
    /// Working set, bytes.
    pub working_set: f64,
    /// Swap used, bytes.
    pub swap: f64,
    /// In its finishing wait (`boinc_finish` called, no CPU used): its CPU counts as free.
    pub finishing: bool,
}

/// Everything besides the state the snapshot needs.
#[derive(Debug, Clone)]
pub struct SnapshotInputs<'a> {
    /// The preferences in force.
    pub prefs: &'a GlobalPrefs,
    /// cc_config `<ncpus>` (≤ 0: use the detected count).
    pub cc_ncpus: i32,
    /// Whether the user is active (selects the in-use limits).
    pub user_active: bool,
    /// GPU computing is suspended (GPU mode, `run_gpu_if_user_active`, exclusive GPU apps):
    /// GPU jobs are not runnable.
    pub gpu_suspended: bool,
    /// Each project's `app_config.xml`, by master URL.
    pub app_configs: &'a BTreeMap<String, AppConfig>,
    /// `cc_config.xml` `<exclude_gpu>` entries.
    pub exclude_gpus: &'a [ExcludeGpu],
    /// Resources switched off in each project's web preferences, by master URL.
    pub no_rsc_prefs: &'a BTreeMap<String, Vec<String>>,
    /// Results that may not start now (temporary-exit backoff), by (URL, name).
    pub not_before: &'a HashMap<(String, String), f64>,
    /// Wall time of the snapshot.
    pub now: f64,
}

/// Builds the core's world from the state. `live` tells, per (URL, result), what its process
/// does. Results without a usable app version are left out (they cannot run).
pub fn build_world(
    state: &ClientState,
    ids: &mut IdMap,
    inputs: &SnapshotInputs<'_>,
    live: &dyn Fn(&str, &str) -> Option<LiveTask>,
) -> World {
    let h = &state.host_info;
    let ncpus = inputs
        .prefs
        .usable_cpus(h.p_ncpus.max(1), inputs.cc_ncpus, inputs.user_active);
    let mut host = Host::cpu_only(ncpus, h.p_fpops.max(1e6), h.m_nbytes.max(0.0));
    host.swap_bytes = h.m_swap.max(0.0);
    let gpu_types = host_gpu_types(h);
    host.coprocs = gpu_types.iter().map(|(_, c)| c.clone()).collect();
    let gpu_names: Vec<&str> = gpu_types.iter().map(|(n, _)| *n).collect();
    let gp = inputs.prefs;
    let mut world = World::new(host);
    world.prefs = Prefs {
        work_buf_min_days: gp.work_buf_min_days,
        work_buf_additional_days: gp.work_buf_additional_days,
        cpu_scheduling_period_minutes: gp.cpu_scheduling_period_minutes,
        // Already applied to `host.ncpus` above.
        max_ncpus_pct: 100.0,
        ram_max_used_busy_pct: gp.ram_max_used_busy_pct,
        ram_max_used_idle_pct: gp.ram_max_used_idle_pct,
        vm_max_used_pct: gp.vm_max_used_pct,
        leave_apps_in_memory: gp.leave_apps_in_memory,
        disk_max_used_gb: gp.disk_max_used_gb,
        disk_max_used_pct: gp.disk_max_used_pct,
        disk_min_free_gb: gp.disk_min_free_gb,
    };
    world.user_active = inputs.user_active;
    world.time_stats.on_frac = state.time_stats.on_frac;
    world.time_stats.active_frac = state.time_stats.active_frac;
    world.time_stats.gpu_active_frac = state.time_stats.gpu_active_frac;
    world.time_stats.connected_frac = state.time_stats.connected_frac;

    // Projects, apps and versions in id order; entities gone from the state stay as inert
    // placeholders so that indices never move.
    for p in &state.projects {
        intern(&mut ids.projects, &p.project.master_url);
        for a in &p.apps {
            intern(
                &mut ids.apps,
                &(p.project.master_url.clone(), a.name.clone()),
            );
        }
        for v in &p.app_versions {
            intern(
                &mut ids.apps,
                &(p.project.master_url.clone(), v.app_name.clone()),
            );
            intern(&mut ids.versions, &version_key(&p.project.master_url, v));
        }
    }
    for url in &ids.projects {
        let proj = match state.project(url) {
            Some(ps) => {
                let p = &ps.project;
                let mut x = Project::new(p.master_url.clone(), p.resource_share.max(0.0));
                x.suspended = p.suspended_via_gui;
                x.no_new_work = p.dont_request_more_work;
                x.initial_rpc_pending =
                    p.sched_rpc_pending == Some(ferrite_proto::client_state::RpcReason::Init);
                x.dcf = if p.duration_correction_factor > 0.0 {
                    p.duration_correction_factor
                } else {
                    1.0
                };
                if let Some(ac) = inputs.app_configs.get(&p.master_url) {
                    x.max_concurrent = u32::try_from(ac.project_max_concurrent)
                        .ok()
                        .filter(|n| *n > 0);
                    x.report_immediately = ac.report_results_immediately;
                }
                x.excluded_instances =
                    excluded_gpus(inputs.exclude_gpus, &p.master_url, None, &gpu_names);
                // The server says which resources it has no apps for; the volunteer's web
                // preferences may turn others off.
                x.fetch_only_known_resources = false;
                // An anonymous-platform project has only the volunteer's versions: it is
                // asked for work only for the resources they use, as the official client
                // does (`anonymous_platform_no_apps`).
                x.fetch_only_known_resources = p.anonymous_platform;
                let prefs_off = inputs.no_rsc_prefs.get(&p.master_url);
                for name in p.no_rsc_apps.iter().chain(prefs_off.into_iter().flatten()) {
                    if let Some(r) = resource_of(name, &gpu_names) {
                        x.no_work_for.insert(r);
                    }
                }
                x
            }
            None => {
                let mut x = Project::new(url.clone(), 0.0);
                x.suspended = true;
                x.no_new_work = true;
                x
            }
        };
        world.add_project(proj);
    }
    let projects = ids.projects.clone();
    let pid = |url: &str| -> ProjectId { ProjectId(index_of(&projects, &url.to_owned())) };
    for (url, name) in &ids.apps {
        let mut app = App::new(pid(url), name.clone());
        app.excluded_instances = excluded_gpus(inputs.exclude_gpus, url, Some(name), &gpu_names);
        if let Some(a) = state.project(url).and_then(|p| p.app(name)) {
            app.fraction_done_exact = a.fraction_done_exact;
        }
        if let Some(c) = app_config(inputs, url, name) {
            app.max_concurrent = u32::try_from(c.max_concurrent).ok().filter(|n| *n > 0);
            app.report_immediately = c.report_results_immediately;
            app.fraction_done_exact |= c.fraction_done_exact;
        }
        world.add_app(app);
    }
    for key in &ids.versions {
        let app = AppId(index_of(&ids.apps, &(key.0.clone(), key.1.clone())));
        let p = pid(&key.0);
        let v = state.project(&key.0).and_then(|ps| {
            ps.app_versions
                .iter()
                .find(|v| version_key(&key.0, v) == *key)
        });
        let av = match v {
            Some(v) => {
                let flops = if v.usage.flops > 0.0 {
                    v.usage.flops
                } else {
                    world.host.p_fpops
                };
                let gpu = v.usage.coprocs.iter().find(|c| c.count > 0.0);
                let (ncpus, ngpus) = usage_override(
                    inputs,
                    &key.0,
                    v,
                    v.usage.avg_ncpus,
                    gpu.map_or(0.0, |c| c.count),
                );
                match gpu.and_then(|g| resource_of(&g.rsc_type, &gpu_names)) {
                    Some(r) => AppVersion::coproc(app, p, r, ngpus, ncpus, flops),
                    // CPU versions, and GPU versions for a type this host lacks (their jobs
                    // are not runnable, below).
                    None => AppVersion::cpu(app, p, ncpus.max(0.001), flops),
                }
            }
            None => AppVersion::cpu(app, p, 1.0, world.host.p_fpops),
        };
        world.add_app_version(av);
    }

    // The active tasks by (project, result), the first of each as `active_task` finds it.
    let mut active: HashMap<(&str, &str), &ferrite_proto::client_state::ActiveTask> =
        HashMap::with_capacity(state.active_tasks.len());
    for a in &state.active_tasks {
        active
            .entry((a.project_master_url.as_str(), a.result_name.as_str()))
            .or_insert(a);
    }
    // The results that may not start yet, looked up without copying names.
    let not_before: HashMap<(&str, &str), f64> = inputs
        .not_before
        .iter()
        .map(|((u, n), t)| ((u.as_str(), n.as_str()), *t))
        .collect();
    for ps in &state.projects {
        let url = &ps.project.master_url;
        let p = pid(url);
        // Looked up by name only when the last snapshot's finding no longer holds (new or
        // moved results): indexes keep that linear in the number of tasks.
        let look = ProjectLookup::new(ps);
        let mut vids: HashMap<usize, AppVersionId> = HashMap::new();
        let last = ids.found.remove(url.as_str()).unwrap_or_default();
        let mut found = Vec::with_capacity(ps.results.len());
        for (i, r) in ps.results.iter().enumerate() {
            let kept = last
                .get(i)
                .copied()
                .flatten()
                .filter(|f| f.still_fits(ids, ps, r));
            let f = match kept {
                Some(f) => f,
                None => {
                    let Some(wi) = look.workunit_index(&r.wu_name) else {
                        found.push(None);
                        continue;
                    };
                    let wu = &ps.workunits[wi];
                    let Some(vi) = look.app_version_index(
                        &wu.app_name,
                        &r.platform,
                        r.version_num,
                        &r.plan_class,
                    ) else {
                        found.push(None);
                        continue;
                    };
                    let v = &ps.app_versions[vi];
                    let vid = *vids.entry(vi).or_insert_with(|| {
                        AppVersionId(index_of(&ids.versions, &version_key(url, v)))
                    });
                    Found {
                        job: ids.job_id(url, &r.name),
                        workunit: wi,
                        version: vi,
                        vid,
                    }
                }
            };
            found.push(Some(f));
            let (wu, v, vid, id) = (
                &ps.workunits[f.workunit],
                &ps.app_versions[f.version],
                f.vid,
                f.job,
            );
            let mut job = Job::new(
                id,
                p,
                vid,
                wu.rsc_fpops_est.max(1.0),
                r.received_time,
                r.report_deadline,
            );
            job.report_immediately = r.report_immediately;
            job.suspended = r.suspended_via_gui;
            job.working_set_bytes = wu.rsc_memory_bound.max(0.0);
            if r.computing_done() {
                job.state = JobState::Finished {
                    completed_time: r.completed_time,
                    ready_to_report: r.ready_to_report || r.state == ResultState::FilesUploaded,
                };
                world.add_job(job);
                continue;
            }
            job.runnable = r.state == ResultState::FilesDownloaded
                && (!gpu_version(v)
                    || !inputs.gpu_suspended && gpu_resource_present(v, &gpu_names))
                && (not_before.is_empty()
                    || not_before
                        .get(&(url.as_str(), r.name.as_str()))
                        .is_none_or(|t| *t <= inputs.now));
            let a = (!active.is_empty())
                .then(|| active.get(&(url.as_str(), r.name.as_str())))
                .flatten();
            if let Some(a) = a {
                job.elapsed = a.checkpoint_elapsed_time;
                job.checkpoint_elapsed = a.checkpoint_elapsed_time;
                job.fraction_done = a.checkpoint_fraction_done;
                job.elapsed_at_fraction = a.checkpoint_fraction_done_elapsed_time;
                if a.working_set_size_smoothed > 0.0 {
                    job.working_set_bytes = a.working_set_size_smoothed;
                }
                job.swap_bytes = a.swap_size.max(0.0);
                job.state = JobState::Preempted { in_memory: false };
            }
            if let Some(l) = live(url, &r.name) {
                job.elapsed = l.elapsed;
                job.fraction_done = l.fraction_done;
                job.elapsed_at_fraction = l.elapsed;
                if l.working_set > 0.0 {
                    job.working_set_bytes = l.working_set;
                }
                job.swap_bytes = l.swap.max(0.0);
                if l.running {
                    job.state = JobState::Running;
                    job.run_started_at = Some(l.run_started_at);
                    job.finishing = l.finishing;
                } else if l.suspended {
                    job.state = JobState::Preempted { in_memory: true };
                }
            }
            world.add_job(job);
        }
        ids.found.insert(url.clone(), found);
    }
    world
}

/// The official spelling of a GPU resource type name (`NVIDIA`, `ATI`, `intel_gpu`), from
/// any of the names BOINC accepts (`CUDA`, `AMD`, `CAL`, any case).
pub fn canonical_gpu_type(name: &str) -> Option<&'static str> {
    let n = name.to_ascii_lowercase();
    match n.as_str() {
        "nvidia" | "cuda" => Some("NVIDIA"),
        "ati" | "amd" | "cal" => Some("ATI"),
        "intel_gpu" | "intel" => Some("intel_gpu"),
        _ => None,
    }
}

/// The host's GPU types in resource order (`ResourceId(i + 1)` is entry `i`), with their
/// official names: NVIDIA, then AMD, then Intel, as the official client numbers them.
fn host_gpu_types(h: &ferrite_proto::host::HostInfo) -> Vec<(&'static str, Coproc)> {
    let mut v = Vec::new();
    if let Some(nv) = h.coprocs.nvidia.as_ref().filter(|n| n.count > 0) {
        v.push((
            "NVIDIA",
            Coproc {
                kind: CoprocKind::Nvidia,
                count: nv.count,
                peak_flops: nv.peak_flops,
            },
        ));
    }
    for (element, name, kind) in [
        ("coproc_ati", "ATI", CoprocKind::Amd),
        ("coproc_intel_gpu", "intel_gpu", CoprocKind::IntelGpu),
    ] {
        if let Some(o) = h
            .coprocs
            .other
            .iter()
            .find(|o| o.element == element && o.count > 0)
        {
            v.push((
                name,
                Coproc {
                    kind,
                    count: o.count,
                    peak_flops: o.peak_flops,
                },
            ));
        }
    }
    v
}

/// The core's resource for a BOINC resource name (`CPU`, or a GPU type the host has, in the
/// spellings of `no_rsc_apps`, `no_rsc` and app versions' `<coproc>`).
fn resource_of(name: &str, gpu_names: &[&str]) -> Option<ResourceId> {
    if name.eq_ignore_ascii_case("CPU") {
        return Some(ResourceId(0));
    }
    let canonical = canonical_gpu_type(name)?;
    let i = gpu_names.iter().position(|n| *n == canonical)?;
    u8::try_from(i + 1).ok().map(ResourceId)
}

/// Whether the GPU type an app version uses is one this host has.
fn gpu_resource_present(v: &ferrite_proto::client_state::AppVersion, gpu_names: &[&str]) -> bool {
    v.usage
        .coprocs
        .iter()
        .filter(|c| c.count > 0.0)
        .all(|c| resource_of(&c.rsc_type, gpu_names).is_some())
}

/// The `app_config.xml` `<app>` block of an app, if any.
fn app_config<'a>(
    inputs: &SnapshotInputs<'a>,
    url: &str,
    app: &str,
) -> Option<&'a ferrite_proto::app_config::AppConfigApp> {
    inputs
        .app_configs
        .get(url)
        .and_then(|c| c.apps.iter().find(|a| a.name == app))
}

/// CPU and GPU usage of a version after `app_config.xml`: an `<app_version>` block matching
/// app and plan class wins, then the app's `<gpu_versions>` for GPU versions (BOINC's order).
fn usage_override(
    inputs: &SnapshotInputs<'_>,
    url: &str,
    v: &ferrite_proto::client_state::AppVersion,
    ncpus: f64,
    ngpus: f64,
) -> (f64, f64) {
    let Some(ac) = inputs.app_configs.get(url) else {
        return (ncpus, ngpus);
    };
    if let Some(o) = ac
        .app_versions
        .iter()
        .find(|o| o.app_name == v.app_name && o.plan_class == v.plan_class)
    {
        let c = if o.avg_ncpus > 0.0 {
            o.avg_ncpus
        } else {
            ncpus
        };
        let g = if o.ngpus > 0.0 && ngpus > 0.0 {
            o.ngpus
        } else {
            ngpus
        };
        return (c, g);
    }
    if ngpus > 0.0 {
        if let Some(g) = ac
            .apps
            .iter()
            .find(|a| a.name == v.app_name)
            .and_then(|a| a.gpu_versions)
            .filter(|g| g.applies())
        {
            return (g.cpu_usage, g.gpu_usage);
        }
    }
    (ncpus, ngpus)
}

/// The GPU devices `cc_config.xml` excludes, as the core's per-resource masks (index 0,
/// the CPU, unused; then one per entry of `gpu_names`): with `app` `None`, the entries for
/// the whole project (no `<app>`); with an app name, the entries naming that app. An entry
/// without `<type>` applies to every GPU type.
fn excluded_gpus(
    excludes: &[ExcludeGpu],
    url: &str,
    app: Option<&str>,
    gpu_names: &[&str],
) -> Vec<u64> {
    let mut masks = vec![0u64; gpu_names.len() + 1];
    for e in excludes.iter().filter(|e| {
        ferrite_proto::account::canonicalize_master_url(&e.url)
            == ferrite_proto::account::canonicalize_master_url(url)
            && e.app.as_deref() == app
    }) {
        let bits = match e.device_num {
            Some(n) if (0..64).contains(&n) => 1u64 << n,
            Some(_) => 0,
            None => u64::MAX,
        };
        for (i, name) in gpu_names.iter().enumerate() {
            let applies = e
                .rsc_type
                .as_deref()
                .is_none_or(|t| canonical_gpu_type(t) == Some(*name));
            if applies {
                masks[i + 1] |= bits;
            }
        }
    }
    if masks.iter().all(|m| *m == 0) {
        Vec::new()
    } else {
        masks
    }
}

fn gpu_version(v: &ferrite_proto::client_state::AppVersion) -> bool {
    v.usage.coprocs.iter().any(|c| c.count > 0.0)
}

fn version_key(url: &str, v: &ferrite_proto::client_state::AppVersion) -> VersionKey {
    (
        url.to_owned(),
        v.app_name.clone(),
        v.platform.clone(),
        v.version_num,
        v.plan_class.clone(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATE: &str = include_str!("../tests/fixtures/02_client_state.xml");
    static NO_APP_CONFIGS: BTreeMap<String, AppConfig> = BTreeMap::new();
    static NO_APP_CONFIGS_NO_RSC: BTreeMap<String, Vec<String>> = BTreeMap::new();

    fn state() -> ClientState {
        ClientState::parse(STATE, "client_state.xml")
            .expect("fixture")
            .value
    }

    fn inputs<'a>(
        prefs: &'a GlobalPrefs,
        nb: &'a HashMap<(String, String), f64>,
    ) -> SnapshotInputs<'a> {
        SnapshotInputs {
            prefs,
            cc_ncpus: 0,
            user_active: false,
            gpu_suspended: false,
            app_configs: &NO_APP_CONFIGS,
            exclude_gpus: &[],
            no_rsc_prefs: &NO_APP_CONFIGS_NO_RSC,
            not_before: nb,
            now: 1_795_340_000.0,
        }
    }

    /// A host with `nvidia` NVIDIA, `ati` AMD and `intel` Intel GPUs.
    fn with_gpus(mut s: ClientState, nvidia: u32, ati: u32, intel: u32) -> ClientState {
        use ferrite_proto::host::{NvidiaCoproc, OpenclDeviceProp, OpenclGpu, OpenclGpuKind};
        let c = &mut s.host_info.coprocs;
        c.nvidia = (nvidia > 0).then(|| NvidiaCoproc {
            count: nvidia,
            peak_flops: 1e13,
            have_cuda: true,
            ..NvidiaCoproc::default()
        });
        for (kind, count) in [(OpenclGpuKind::Amd, ati), (OpenclGpuKind::Intel, intel)] {
            if count > 0 {
                c.other.push(
                    OpenclGpu {
                        kind,
                        count,
                        peak_flops: 2e12,
                        available_ram: 1e9,
                        prop: OpenclDeviceProp::default(),
                    }
                    .to_coproc(),
                );
            }
        }
        s
    }

    #[test]
    fn amd_and_intel_gpus_are_resources_with_their_versions_and_exclusions() {
        let mut s = with_gpus(state(), 0, 2, 1);
        let prefs = GlobalPrefs::default();
        let nb = HashMap::new();
        let mut ids = IdMap::default();
        // The fixture's version becomes an Intel GPU one.
        s.projects[0].app_versions[0].usage.coprocs =
            vec![ferrite_proto::client_state::CoprocUsage {
                rsc_type: "intel_gpu".to_owned(),
                count: 1.0,
            }];
        let excludes = [ExcludeGpu {
            url: "http://127.0.0.1:18080/".to_owned(),
            device_num: Some(1),
            rsc_type: Some("ATI".to_owned()),
            app: None,
        }];
        let mut inp = inputs(&prefs, &nb);
        inp.exclude_gpus = &excludes;
        let w = build_world(&s, &mut ids, &inp, &|_, _| None);
        w.validate().expect("world");
        let kinds: Vec<_> = w
            .host
            .coprocs
            .iter()
            .map(|c| (c.kind.clone(), c.count))
            .collect();
        assert_eq!(kinds, [(CoprocKind::Amd, 2), (CoprocKind::IntelGpu, 1)]);
        assert_eq!(w.app_versions[0].resource, ResourceId(2), "intel_gpu");
        assert_eq!(w.projects[0].excluded_instances, vec![0, 0b10, 0]);
        assert!(w.jobs.iter().any(|j| j.runnable), "an Intel GPU is there");
        // The same version on a host with no Intel GPU: its jobs cannot run.
        let s2 = with_gpus(
            {
                let mut x = s.clone();
                x.host_info.coprocs = Default::default();
                x
            },
            1,
            0,
            0,
        );
        let w = build_world(&s2, &mut IdMap::default(), &inp, &|_, _| None);
        assert!(w
            .jobs
            .iter()
            .all(|j| !j.runnable || matches!(j.state, JobState::Finished { .. })));
        assert_eq!(resource_of("AMD", &["NVIDIA", "ATI"]), Some(ResourceId(2)));
        assert_eq!(resource_of("cuda", &["NVIDIA", "ATI"]), Some(ResourceId(1)));
        assert_eq!(resource_of("intel_gpu", &["NVIDIA", "ATI"]), None);
    }

    #[test]
    fn app_config_and_gpu_exclusions_reach_the_core() {
        let s = with_gpus(state(), 2, 0, 0);
        let prefs = GlobalPrefs::default();
        let nb = HashMap::new();
        let url = "http://127.0.0.1:18080/";
        let ac = ferrite_proto::app_config::AppConfig::parse(
            "<app_config>\n<app>\n<name>fixture_app</name>\n<max_concurrent>1</max_concurrent>\n\
             <report_results_immediately>1</report_results_immediately>\n</app>\n\
             <app_version>\n<app_name>fixture_app</app_name>\n<avg_ncpus>2</avg_ncpus>\n\
             </app_version>\n<project_max_concurrent>3</project_max_concurrent>\n</app_config>\n",
            "app_config.xml",
        )
        .expect("app_config")
        .value;
        let configs = BTreeMap::from([(url.to_owned(), ac)]);
        let app_name = s.projects[0].apps[0].name.clone();
        let excludes = [
            ExcludeGpu {
                url: "http://127.0.0.1:18080".to_owned(),
                device_num: Some(1),
                rsc_type: None,
                app: None,
            },
            ExcludeGpu {
                url: "http://127.0.0.1:18080/".to_owned(),
                device_num: Some(0),
                rsc_type: Some("NVIDIA".to_owned()),
                app: Some(app_name),
            },
            ExcludeGpu {
                url: "http://127.0.0.1:18080/".to_owned(),
                device_num: Some(2),
                rsc_type: None,
                app: Some("another_app".to_owned()),
            },
        ];
        let mut inp = inputs(&prefs, &nb);
        inp.app_configs = &configs;
        inp.exclude_gpus = &excludes;
        let mut ids = IdMap::default();
        let w = build_world(&s, &mut ids, &inp, &|_, _| None);
        w.validate().expect("fixture");
        assert_eq!(w.projects[0].max_concurrent, Some(3));
        // The project's entry for every app, the app's own entry for its jobs only.
        assert_eq!(w.projects[0].excluded_instances, vec![0, 0b10]);
        assert_eq!(w.apps[0].excluded_instances, vec![0, 0b1]);
        assert_eq!(w.apps[0].max_concurrent, Some(1));
        assert!(w.apps[0].report_immediately);
        assert_eq!(w.app_versions[0].avg_ncpus, 2.0);
        // The server's no_rsc_apps and the web preferences' "use CPU: no" stop CPU fetch.
        let mut s2 = s.clone();
        s2.projects[0].project.no_rsc_apps = vec!["NVIDIA".to_owned()];
        let w = build_world(&s2, &mut ids, &inp, &|_, _| None);
        assert!(!w.projects[0].fetch_only_known_resources);
        assert!(!w.projects[0].no_work_for.contains(ResourceId(0)));
        let no_cpu = BTreeMap::from([(url.to_owned(), vec!["CPU".to_owned()])]);
        inp.no_rsc_prefs = &no_cpu;
        let w = build_world(&s2, &mut ids, &inp, &|_, _| None);
        assert!(w.projects[0].no_work_for.contains(ResourceId(0)));
        // Without a config nothing is limited.
        let w = build_world(&s, &mut ids, &inputs(&prefs, &nb), &|_, _| None);
        assert_eq!(w.projects[0].max_concurrent, None);
        assert_eq!(w.apps[0].max_concurrent, None);
        assert!(w.projects[0].excluded_instances.is_empty());
        assert!(w.apps[0].excluded_instances.is_empty());
    }

    #[test]
    fn fixture_state_becomes_a_world_with_its_jobs_versions_and_deadlines() {
        let s = state();
        let prefs = GlobalPrefs::default();
        let nb = HashMap::new();
        let mut ids = IdMap::default();
        let w = build_world(&s, &mut ids, &inputs(&prefs, &nb), &|_, _| None);
        w.validate().expect("fixture");
        assert_eq!(w.projects.len(), 1);
        assert_eq!(w.projects[0].name, "http://127.0.0.1:18080/");
        assert_eq!(w.projects[0].resource_share, 100.0);
        assert_eq!(w.app_versions.len(), 1);
        assert_eq!(w.app_versions[0].avg_ncpus, 1.0);
        assert_eq!(w.app_versions[0].flops, 1e9);
        assert_eq!(w.jobs.len(), 3);
        let by = |n: &str| {
            let id = ids.jobs.iter().position(|(_, r)| r == n).expect("fixture");
            w.jobs
                .iter()
                .find(|j| j.id.0 as usize == id)
                .expect("fixture")
        };
        let short = by("wu_short_0");
        assert!(matches!(
            short.state,
            JobState::Finished {
                ready_to_report: true,
                ..
            }
        ));
        let long = by("wu_long_0");
        assert!(long.runnable);
        assert_eq!(long.fpops_est, 1e10);
        assert_eq!(long.report_deadline, 1_795_938_347.0);
        assert_eq!(long.received_time, 1_795_333_547.804_013);
        // It owns a slot in the state but has no process: preempted out of memory.
        assert_eq!(long.state, JobState::Preempted { in_memory: false });
        assert!(by("wu_abort_0").runnable);
    }

    /// What a snapshot keeps of the last one's findings gives the world a snapshot made
    /// without them does, whatever changed between them.
    #[test]
    fn a_snapshot_from_the_last_ones_findings_is_the_snapshot_made_afresh() {
        let mut s = ferrite_proto::client_state::synthetic(2, 30);
        let prefs = GlobalPrefs::default();
        let nb = HashMap::new();
        let mut ids = IdMap::default();
        let first = build_world(&s, &mut ids, &inputs(&prefs, &nb), &|_, _| None);
        let again = |s: &ClientState, ids: &mut IdMap| {
            let mut afresh = ids.clone();
            afresh.found.clear();
            let kept = build_world(s, ids, &inputs(&prefs, &nb), &|_, _| None);
            let made = build_world(s, &mut afresh, &inputs(&prefs, &nb), &|_, _| None);
            assert_eq!(format!("{:?}", kept.jobs), format!("{:?}", made.jobs));
            assert_eq!(ids.jobs, afresh.jobs);
            kept
        };
        assert_eq!(
            format!("{:?}", again(&s, &mut ids).jobs),
            format!("{:?}", first.jobs)
        );
        // Results moved, added and removed, a workunit gone, a result on another version.
        let ps = &mut s.projects[0];
        ps.results.swap(0, 9);
        let mut extra = ps.results[4].clone();
        extra.name = "an_extra_task".to_owned();
        ps.results.insert(2, extra);
        ps.results.remove(12);
        let gone = ps.results[6].wu_name.clone();
        ps.workunits.retain(|w| w.name != gone);
        let other = ps.app_versions.last().map(|v| v.version_num);
        ps.results[11].version_num = other.unwrap_or(0);
        ps.app_versions.swap(0, 1);
        s.projects.swap(0, 1);
        let w = again(&s, &mut ids);
        assert!(w.jobs.len() >= 25, "{}", w.jobs.len());
    }

    #[test]
    fn ids_are_stable_and_live_tasks_and_suspensions_show() {
        let mut s = state();
        let prefs = GlobalPrefs::default();
        let mut nb = HashMap::new();
        let mut ids = IdMap::default();
        let _ = build_world(&s, &mut ids, &inputs(&prefs, &nb), &|_, _| None);
        let first = ids.jobs.clone();
        // A result disappears and one is user-suspended: ids do not move.
        s.projects[0].results.retain(|r| r.name != "wu_short_0");
        s.projects[0]
            .result_mut("wu_abort_0")
            .expect("fixture")
            .suspended_via_gui = true;
        nb.insert(
            ("http://127.0.0.1:18080/".to_owned(), "wu_long_0".to_owned()),
            2e9,
        );
        let live = |_: &str, r: &str| {
            (r == "wu_abort_0").then_some(LiveTask {
                running: true,
                suspended: false,
                run_started_at: 5.0,
                elapsed: 12.0,
                fraction_done: 0.25,
                working_set: 1e6,
                swap: 0.0,
                finishing: false,
            })
        };
        let w = build_world(&s, &mut ids, &inputs(&prefs, &nb), &live);
        assert_eq!(ids.jobs, first);
        assert_eq!(w.jobs.len(), 2);
        let abort_id = first
            .iter()
            .position(|(_, r)| r == "wu_abort_0")
            .expect("fixture");
        let j = w
            .jobs
            .iter()
            .find(|j| j.id.0 as usize == abort_id)
            .expect("fixture");
        assert!(j.suspended);
        assert_eq!(j.state, JobState::Running);
        assert_eq!(j.elapsed, 12.0);
        assert_eq!(j.run_started_at, Some(5.0));
        let long_id = first
            .iter()
            .position(|(_, r)| r == "wu_long_0")
            .expect("fixture");
        let j = w
            .jobs
            .iter()
            .find(|j| j.id.0 as usize == long_id)
            .expect("fixture");
        assert!(!j.runnable, "in a temporary-exit backoff");
    }

    #[test]
    fn usable_cpus_follow_prefs_and_cc_config() {
        let s = state();
        let prefs = GlobalPrefs {
            max_ncpus_pct: 50.0,
            ..GlobalPrefs::default()
        };
        let nb = HashMap::new();
        let mut ids = IdMap::default();
        let mut inp = inputs(&prefs, &nb);
        inp.cc_ncpus = 8;
        inp.user_active = true;
        let w = build_world(&s, &mut ids, &inp, &|_, _| None);
        assert_eq!(w.host.ncpus, 4);
    }

    #[test]
    fn the_not_in_use_cpu_share_acts_while_the_user_is_away() {
        let s = state();
        let prefs = GlobalPrefs {
            max_ncpus_pct: 25.0,
            niu_max_ncpus_pct: 75.0,
            ..GlobalPrefs::default()
        };
        let nb = HashMap::new();
        let mut ids = IdMap::default();
        let mut inp = inputs(&prefs, &nb);
        inp.cc_ncpus = 8;
        inp.user_active = true;
        let w = build_world(&s, &mut ids, &inp, &|_, _| None);
        assert_eq!(w.host.ncpus, 2, "max_ncpus_pct while in use");
        inp.user_active = false;
        let w = build_world(&s, &mut ids, &inp, &|_, _| None);
        assert_eq!(w.host.ncpus, 6, "niu_max_ncpus_pct while not in use");
        assert!(!w.user_active);
    }
}
