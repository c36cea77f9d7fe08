//! Scenario loading: the official emulator's input folder turned into typed, validated data.
//!
//! A scenario folder holds `client_state.xml` (host, availability, projects, apps, app versions,
//! optional concrete jobs, with the emulator-only tags), `global_prefs.xml`, and optionally
//! `global_prefs_override.xml` and `cc_config.xml`. Unknown tags are ignored (collected as
//! warnings); values that make the emulation meaningless (no CPUs, an app version for an unknown
//! app, a negative share, …) are a [`ScenarioError`] naming the file, the element and the line.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferrite_proto::xml::{Tag, Warning, XmlError, XmlReader};

/// Mean length of an "available" period when a scenario gives none (the official default).
pub const DEFAULT_LAMBDA: f64 = 3600.0;
/// Latency bound of an app with neither a tag nor a job to take it from (official default).
pub const DEFAULT_LATENCY_BOUND: f64 = 864_000.0;
/// Job size of an app with neither a tag nor a job to take it from (official default).
pub const DEFAULT_FPOPS_EST: f64 = 3.6e14;
/// Minimum work buffer BOINC enforces whatever the preference says (`WF_EST_FETCH_TIME`).
pub const MIN_WORK_BUF: f64 = 180.0;

/// Why a scenario cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A file could not be read.
    #[error("cannot read {file}")]
    Read {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not usable XML.
    #[error(transparent)]
    Xml(#[from] XmlError),
    /// A value or structure that makes the scenario meaningless.
    #[error("{file}:{line}: <{element}>: {message}")]
    Invalid {
        /// The file.
        file: Arc<str>,
        /// 1-based line of the offending element.
        line: usize,
        /// The element.
        element: String,
        /// What is wrong.
        message: String,
    },
}

/// A two-state up/down process: "up" periods exponential with mean `lambda`, the long-run
/// fraction of time up is `frac`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Availability {
    /// Long-run fraction of time the process is up, in (0, 1].
    pub frac: f64,
    /// Mean length of an up period, seconds.
    pub lambda: f64,
}

impl Default for Availability {
    fn default() -> Self {
        Self {
            frac: 1.0,
            lambda: DEFAULT_LAMBDA,
        }
    }
}

/// A GPU type of the host.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuType {
    /// Type name as app versions refer to it (`NVIDIA`, `ATI`, `intel_gpu`).
    pub name: String,
    /// Number of instances.
    pub count: u32,
    /// Peak FLOPS of one instance.
    pub peak_flops: f64,
}

/// The emulated host.
#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    /// Physical CPUs.
    pub ncpus: u32,
    /// FLOPS of one CPU core.
    pub p_fpops: f64,
    /// RAM bytes (kept for completeness; memory is not modelled).
    pub m_nbytes: f64,
    /// GPU types, in the order they were declared.
    pub gpus: Vec<GpuType>,
    /// Client running.
    pub on: Availability,
    /// Network connected.
    pub connected: Availability,
    /// Computing allowed.
    pub active: Availability,
    /// GPU computing allowed.
    pub gpu_active: Availability,
}

/// A distribution of job sizes: normal with this mean and standard deviation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormalDist {
    /// Mean.
    pub mean: f64,
    /// Standard deviation (0 = exact).
    pub std_dev: f64,
}

/// An app a project's server makes jobs for.
#[derive(Debug, Clone, PartialEq)]
pub struct App {
    /// App name, unique within its project.
    pub name: String,
    /// Index of the owning project in [`Scenario::projects`].
    pub project: usize,
    /// Deadline of a new job, seconds after it is sent.
    pub latency_bound: f64,
    /// True size of a job, FLOPs.
    pub fpops_est: f64,
    /// Distribution of the size *estimate* sent with a job.
    pub fpops: NormalDist,
    /// Relative frequency of this app among the project's apps.
    pub weight: f64,
    /// Working set bytes (parsed, not modelled).
    pub working_set: f64,
    /// At most this many jobs of this app run at once (0 = no limit).
    pub max_concurrent: u32,
}

/// A version of an app: how a job of that app uses the host.
#[derive(Debug, Clone, PartialEq)]
pub struct AppVersion {
    /// Index of the app in [`Scenario::apps`].
    pub app: usize,
    /// Version number.
    pub version_num: i64,
    /// Plan class ("" for plain CPU versions).
    pub plan_class: String,
    /// CPUs used by a running job.
    pub avg_ncpus: f64,
    /// GPU type index in [`Host::gpus`] and instances used, if a GPU version.
    pub gpu: Option<(usize, f64)>,
    /// Speed of a job of this version on this host, FLOPS.
    pub flops: f64,
}

/// A project attached to the emulated client.
#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    /// Master URL, the key jobs refer to.
    pub master_url: String,
    /// Name printed in figures.
    pub name: String,
    /// Resource share.
    pub resource_share: f64,
    /// Scheduler up/down process.
    pub available: Availability,
}

/// A concrete job given in the state file.
#[derive(Debug, Clone, PartialEq)]
pub struct InitialJob {
    /// Result name.
    pub name: String,
    /// Index of the app version in [`Scenario::app_versions`].
    pub app_version: usize,
    /// Deadline relative to the start of the emulation (report_deadline − received_time).
    pub latency: f64,
    /// Size, FLOPs (also its estimate).
    pub fpops: f64,
    /// Received time as written, for ordering.
    pub received_time: f64,
}

/// The preferences that matter to scheduling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prefs {
    /// Time slice, seconds.
    pub cpu_scheduling_period: f64,
    /// Minimum buffer, seconds (at least [`MIN_WORK_BUF`]).
    pub work_buf_min: f64,
    /// Additional buffer, seconds.
    pub work_buf_additional: f64,
    /// Percentage of CPUs to use.
    pub max_ncpus_pct: f64,
    /// Legacy absolute CPU limit (0 = none).
    pub max_cpus: u32,
}

impl Default for Prefs {
    fn default() -> Self {
        Self {
            cpu_scheduling_period: 3600.0,
            work_buf_min: 0.1 * 86400.0,
            work_buf_additional: 0.5 * 86400.0,
            max_ncpus_pct: 100.0,
            max_cpus: 0,
        }
    }
}

impl Prefs {
    /// Upper end of the work buffer, seconds.
    pub fn work_buf_total(&self) -> f64 {
        (self.work_buf_min + self.work_buf_additional).max(1.0)
    }
}

/// What `cc_config.xml` may change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CcConfig {
    /// Overrides the CPU count if > 0.
    pub ncpus: i32,
    /// Half-life of recent estimated credit, seconds.
    pub rec_half_life: f64,
    /// Report every completed job at once.
    pub report_results_immediately: bool,
}

impl Default for CcConfig {
    fn default() -> Self {
        Self {
            ncpus: 0,
            rec_half_life: 10.0 * 86400.0,
            report_results_immediately: false,
        }
    }
}

/// A whole scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The host.
    pub host: Host,
    /// Projects with at least one usable app, in file order.
    pub projects: Vec<Project>,
    /// Apps with at least one version.
    pub apps: Vec<App>,
    /// App versions.
    pub app_versions: Vec<AppVersion>,
    /// Concrete jobs from the state file.
    pub jobs: Vec<InitialJob>,
    /// Preferences (override applied).
    pub prefs: Prefs,
    /// Client configuration.
    pub cc_config: CcConfig,
    /// Everything odd but survivable, with file and line.
    pub warnings: Vec<Warning>,
}

impl Scenario {
    /// CPUs the client may use.
    pub fn usable_cpus(&self) -> u32 {
        let mut n = if self.cc_config.ncpus > 0 {
            self.cc_config.ncpus.unsigned_abs()
        } else {
            self.host.ncpus
        };
        if self.prefs.max_cpus > 0 {
            n = n.min(self.prefs.max_cpus);
        }
        let pct = self.prefs.max_ncpus_pct;
        if pct > 0.0 && pct < 100.0 {
            n = ((f64::from(n) * pct / 100.0).floor() as u32).max(1);
        }
        n.max(1)
    }

    /// Speed of one instance of GPU type `g` relative to one CPU.
    pub fn gpu_relative_speed(&self, g: usize) -> f64 {
        self.host
            .gpus
            .get(g)
            .map_or(0.0, |t| 0.2 * t.peak_flops / self.host.p_fpops)
    }

    /// Loads the scenario in `dir`.
    pub fn load(dir: &Path) -> Result<Self, ScenarioError> {
        let state_path = dir.join("client_state.xml");
        let state = read(&state_path)?;
        let mut scenario = parse_client_state(&state, &state_path.display().to_string())?;
        let prefs_path = dir.join("global_prefs.xml");
        if prefs_path.exists() {
            let text = read(&prefs_path)?;
            let w = apply_prefs(
                &text,
                &prefs_path.display().to_string(),
                &mut scenario.prefs,
            )?;
            scenario.warnings.extend(w);
        }
        let over_path = dir.join("global_prefs_override.xml");
        if over_path.exists() {
            let text = read(&over_path)?;
            let w = apply_prefs(&text, &over_path.display().to_string(), &mut scenario.prefs)?;
            scenario.warnings.extend(w);
        }
        let cc_path = dir.join("cc_config.xml");
        if cc_path.exists() {
            let text = read(&cc_path)?;
            let w = apply_cc_config(
                &text,
                &cc_path.display().to_string(),
                &mut scenario.cc_config,
            )?;
            scenario.warnings.extend(w);
        }
        Ok(scenario)
    }
}

fn read(path: &Path) -> Result<String, ScenarioError> {
    std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
        file: path.to_path_buf(),
        source,
    })
}

fn invalid(r: &XmlReader<'_>, tag: &Tag<'_>, message: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        file: r.file().clone(),
        line: r.line_at(tag.offset()),
        element: tag.name().to_owned(),
        message: message.into(),
    }
}

/// Raw app fields before defaults are filled in.
struct RawApp {
    app: App,
    line: usize,
    has_fpops_mean: bool,
}

struct RawJob {
    name: String,
    wu_name: String,
    project_url: String,
    version_num: Option<i64>,
    plan_class: String,
    report_deadline: f64,
    received_time: f64,
    line: usize,
}

struct RawWu {
    name: String,
    app_name: String,
    rsc_fpops_est: f64,
}

struct RawVersion {
    app_name: String,
    version: AppVersion,
    gpu_type: Option<(String, f64)>,
    line: usize,
}

/// Parses `client_state.xml` text; `file` names it in messages.
pub fn parse_client_state(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
    let mut r = XmlReader::new(text, file);
    let root = r.root("client_state")?;
    let mut host = Host {
        ncpus: 1,
        p_fpops: 1e9,
        m_nbytes: 0.0,
        gpus: Vec::new(),
        on: Availability::default(),
        connected: Availability::default(),
        active: Availability::default(),
        gpu_active: Availability::default(),
    };
    let mut projects: Vec<Project> = Vec::new();
    let mut apps: Vec<RawApp> = Vec::new();
    let mut versions: Vec<RawVersion> = Vec::new();
    let mut jobs: Vec<RawJob> = Vec::new();
    let mut wus: Vec<RawWu> = Vec::new();
    if !root.is_empty() {
        while let Some(tag) = r.next_child()? {
            match tag.name() {
                "host_info" => parse_host_info(&mut r, &tag, &mut host)?,
                "time_stats" => parse_time_stats(&mut r, &tag, &mut host)?,
                "project" => projects.push(parse_project(&mut r, &tag)?),
                "app" => {
                    let Some(project) = projects.len().checked_sub(1) else {
                        return Err(invalid(&r, &tag, "an <app> must follow its <project>"));
                    };
                    let line = r.line_at(tag.offset());
                    let (app, has_fpops_mean) = parse_app(&mut r, &tag, project)?;
                    apps.push(RawApp {
                        app,
                        line,
                        has_fpops_mean,
                    });
                }
                "app_version" => {
                    let line = r.line_at(tag.offset());
                    let mut v = parse_app_version(&mut r, &tag)?;
                    v.line = line;
                    versions.push(v);
                }
                "workunit" => wus.push(parse_workunit(&mut r, &tag)?),
                "result" => {
                    let line = r.line_at(tag.offset());
                    let mut j = parse_result(&mut r, &tag)?;
                    j.line = line;
                    jobs.push(j);
                }
                _ => r.skip(&tag)?,
            }
        }
    }
    let mut warnings = r.finish()?;
    let file_arc: Arc<str> = Arc::from(file);
    let bad = |line: usize, element: &str, message: String| ScenarioError::Invalid {
        file: file_arc.clone(),
        line,
        element: element.to_owned(),
        message,
    };
    if projects.is_empty() {
        return Err(bad(1, "client_state", "no <project>".into()));
    }

    // Resolve app versions to apps (an app version belongs to the app of that name in the
    // project whose <app> came last before it, as in the state file's layout; names are
    // looked up among all apps, latest first).
    let mut app_versions = Vec::new();
    for v in versions {
        let Some(app) = apps.iter().rposition(|a| a.app.name == v.app_name) else {
            return Err(bad(
                v.line,
                "app_version",
                format!("app_name '{}' names no <app>", v.app_name),
            ));
        };
        let mut av = v.version;
        av.app = app;
        if let Some((ty, count)) = v.gpu_type {
            let Some(g) = host
                .gpus
                .iter()
                .position(|t| gpu_type_matches(&t.name, &ty))
            else {
                warnings.push(Warning {
                    file: file_arc.clone(),
                    line: v.line,
                    element: "app_version".into(),
                    message: format!("host has no GPU of type '{ty}'; version ignored"),
                });
                continue;
            };
            av.gpu = Some((g, count));
        }
        if av.flops <= 0.0 {
            av.flops = host.p_fpops * av.avg_ncpus.max(0.0)
                + av.gpu.map_or(0.0, |(_, c)| c * 10.0 * host.p_fpops);
            warnings.push(Warning {
                file: file_arc.clone(),
                line: v.line,
                element: "app_version".into(),
                message: format!("no <flops>; taken as {:.3e}", av.flops),
            });
        }
        if av.flops <= 0.0 {
            return Err(bad(v.line, "app_version", "job speed is zero".into()));
        }
        app_versions.push(av);
    }

    // Concrete jobs: fill in app parameters from them, as the official emulator does.
    let mut initial = Vec::new();
    for j in jobs {
        let Some(wu) = wus.iter().find(|w| w.name == j.wu_name) else {
            return Err(bad(
                j.line,
                "result",
                format!("wu_name '{}' names no <workunit>", j.wu_name),
            ));
        };
        let Some(project) = projects
            .iter()
            .position(|p| same_url(&p.master_url, &j.project_url))
        else {
            return Err(bad(
                j.line,
                "result",
                format!("project_url '{}' names no <project>", j.project_url),
            ));
        };
        let Some(app) = apps
            .iter()
            .position(|a| a.app.project == project && a.app.name == wu.app_name)
        else {
            return Err(bad(
                j.line,
                "result",
                format!("app '{}' of its workunit is not declared", wu.app_name),
            ));
        };
        let candidates: Vec<usize> = app_versions
            .iter()
            .enumerate()
            .filter(|(_, v)| v.app == app)
            .filter(|(_, v)| j.version_num.is_none_or(|n| n == v.version_num))
            .filter(|(_, v)| j.plan_class.is_empty() || j.plan_class == v.plan_class)
            .map(|(i, _)| i)
            .collect();
        let Some(&version) = candidates.first() else {
            return Err(bad(
                j.line,
                "result",
                "no usable <app_version> for this job".into(),
            ));
        };
        let latency = j.report_deadline - j.received_time;
        let raw = &mut apps[app];
        if raw.app.latency_bound <= 0.0 && latency > 0.0 {
            raw.app.latency_bound = latency;
        }
        if raw.app.fpops_est <= 0.0 && wu.rsc_fpops_est > 0.0 {
            raw.app.fpops_est = wu.rsc_fpops_est;
        }
        initial.push(InitialJob {
            name: j.name,
            app_version: version,
            latency,
            fpops: wu.rsc_fpops_est.max(1.0),
            received_time: j.received_time,
        });
    }

    // Defaults, then drop apps without versions and projects without apps.
    for raw in &mut apps {
        let a = &mut raw.app;
        if a.fpops_est <= 0.0 {
            a.fpops_est = DEFAULT_FPOPS_EST;
        }
        if a.latency_bound <= 0.0 {
            a.latency_bound = DEFAULT_LATENCY_BOUND;
        }
        if !raw.has_fpops_mean || a.fpops.mean <= 0.0 {
            a.fpops.mean = a.fpops_est;
        }
        if a.weight <= 0.0 {
            a.weight = 1.0;
        }
        if a.fpops.std_dev < 0.0 {
            return Err(bad(
                raw.line,
                "std_dev",
                "negative standard deviation".into(),
            ));
        }
    }
    let app_used: Vec<bool> = (0..apps.len())
        .map(|i| app_versions.iter().any(|v| v.app == i))
        .collect();
    let project_used: Vec<bool> = (0..projects.len())
        .map(|p| {
            apps.iter()
                .enumerate()
                .any(|(i, a)| app_used[i] && a.app.project == p)
        })
        .collect();
    let mut project_map = vec![usize::MAX; projects.len()];
    let mut kept_projects = Vec::new();
    for (i, p) in projects.into_iter().enumerate() {
        if project_used[i] {
            project_map[i] = kept_projects.len();
            kept_projects.push(p);
        } else {
            warnings.push(Warning {
                file: file_arc.clone(),
                line: 1,
                element: "project".into(),
                message: format!("project '{}' has no usable app; left out", p.name),
            });
        }
    }
    let mut app_map = vec![usize::MAX; apps.len()];
    let mut kept_apps = Vec::new();
    for (i, raw) in apps.into_iter().enumerate() {
        if app_used[i] {
            app_map[i] = kept_apps.len();
            let mut a = raw.app;
            a.project = project_map[a.project];
            kept_apps.push(a);
        }
    }
    for v in &mut app_versions {
        v.app = app_map[v.app];
    }
    if kept_projects.is_empty() {
        return Err(bad(1, "client_state", "no project has a usable app".into()));
    }
    Ok(Scenario {
        host,
        projects: kept_projects,
        apps: kept_apps,
        app_versions,
        jobs: initial,
        prefs: Prefs::default(),
        cc_config: CcConfig::default(),
        warnings,
    })
}

fn same_url(a: &str, b: &str) -> bool {
    a.trim_end_matches('/')
        .eq_ignore_ascii_case(b.trim_end_matches('/'))
}

fn gpu_type_matches(host_name: &str, wanted: &str) -> bool {
    let norm = |s: &str| match s.to_ascii_lowercase().as_str() {
        "cuda" | "nvidia" => "nvidia".to_owned(),
        "ati" | "amd" => "ati".to_owned(),
        "intel" | "intel_gpu" => "intel_gpu".to_owned(),
        other => other.to_owned(),
    };
    norm(host_name) == norm(wanted)
}

fn positive<'a>(
    r: &mut XmlReader<'a>,
    tag: &Tag<'a>,
    v: Option<f64>,
) -> Result<Option<f64>, ScenarioError> {
    match v {
        Some(x) if x <= 0.0 => Err(invalid(r, tag, format!("{x} must be positive"))),
        other => Ok(other),
    }
}

fn fraction<'a>(r: &mut XmlReader<'a>, tag: &Tag<'a>) -> Result<Option<f64>, ScenarioError> {
    match r.num::<f64>(tag)? {
        Some(x) if !(0.0..=1.0).contains(&x) => {
            Err(invalid(r, tag, format!("{x} is not a fraction in [0, 1]")))
        }
        // A process that is never up cannot be sampled; treat 0 as "almost never".
        Some(0.0) => {
            r.warn(tag, "a fraction of 0 is taken as 0.001");
            Ok(Some(0.001))
        }
        other => Ok(other),
    }
}

fn parse_host_info<'a>(
    r: &mut XmlReader<'a>,
    tag: &Tag<'a>,
    host: &mut Host,
) -> Result<(), ScenarioError> {
    if tag.is_empty() {
        return Ok(());
    }
    while let Some(t) = r.next_child()? {
        match t.name() {
            "p_ncpus" => match r.num::<i64>(&t)? {
                Some(n) if n >= 1 => host.ncpus = u32::try_from(n).unwrap_or(u32::MAX),
                Some(n) => return Err(invalid(r, &t, format!("{n} CPUs: need at least 1"))),
                None => {}
            },
            "p_fpops" => {
                let v = r.num(&t)?;
                if let Some(v) = positive(r, &t, v)? {
                    host.p_fpops = v;
                }
            }
            "m_nbytes" => host.m_nbytes = r.num_or(&t, 0.0)?,
            "coprocs" => parse_coprocs(r, &t, host)?,
            _ => r.skip(&t)?,
        }
    }
    Ok(())
}

fn parse_coprocs<'a>(
    r: &mut XmlReader<'a>,
    tag: &Tag<'a>,
    host: &mut Host,
) -> Result<(), ScenarioError> {
    if tag.is_empty() {
        return Ok(());
    }
    while let Some(t) = r.next_child()? {
        let default_name = match t.name() {
            "coproc_cuda" => "NVIDIA",
            "coproc_ati" => "ATI",
            "coproc_intel_gpu" => "intel_gpu",
            "coproc" => "",
            _ => {
                r.skip(&t)?;
                continue;
            }
        };
        let mut gpu = GpuType {
            name: default_name.to_owned(),
            count: 0,
            peak_flops: 0.0,
        };
        if !t.is_empty() {
            while let Some(c) = r.next_child()? {
                match c.name() {
                    "count" => gpu.count = r.num_or(&c, 0u32)?,
                    "peak_flops" => gpu.peak_flops = r.num_or(&c, 0.0)?,
                    "type" if default_name.is_empty() => gpu.name = r.string(&c)?,
                    _ => r.skip(&c)?,
                }
            }
        }
        if gpu.name.is_empty() {
            return Err(invalid(r, &t, "a <coproc> needs a <type>"));
        }
        if gpu.peak_flops <= 0.0 || gpu.peak_flops > 1e15 {
            // BOINC's sanitising value for a missing or absurd peak.
            gpu.peak_flops = 1e11;
        }
        if gpu.count > 0 {
            host.gpus.push(gpu);
        }
    }
    Ok(())
}

fn parse_time_stats<'a>(
    r: &mut XmlReader<'a>,
    tag: &Tag<'a>,
    host: &mut Host,
) -> Result<(), ScenarioError> {
    if tag.is_empty() {
        return Ok(());
    }
    while let Some(t) = r.next_child()? {
        match t.name() {
            "on_frac" => set(&mut host.on.frac, fraction(r, &t)?),
            "connected_frac" => {
                // The client writes -1 when the state is unknown: always connected.
                match r.num::<f64>(&t)? {
                    Some(x) if x < 0.0 => host.connected.frac = 1.0,
                    Some(x) if x > 1.0 => {
                        return Err(invalid(r, &t, format!("{x} is not a fraction in [0, 1]")))
                    }
                    Some(x) => host.connected.frac = x.max(0.001),
                    None => {}
                }
            }
            "active_frac" => set(&mut host.active.frac, fraction(r, &t)?),
            "gpu_active_frac" => set(&mut host.gpu_active.frac, fraction(r, &t)?),
            "on_lambda" => {
                let v = r.num(&t)?;
                set(&mut host.on.lambda, positive(r, &t, v)?);
            }
            "connected_lambda" => {
                let v = r.num(&t)?;
                set(&mut host.connected.lambda, positive(r, &t, v)?);
            }
            "active_lambda" => {
                let v = r.num(&t)?;
                set(&mut host.active.lambda, positive(r, &t, v)?);
            }
            "gpu_active_lambda" => {
                let v = r.num(&t)?;
                set(&mut host.gpu_active.lambda, positive(r, &t, v)?);
            }
            _ => r.skip(&t)?,
        }
    }
    Ok(())
}

fn set(slot: &mut f64, v: Option<f64>) {
    if let Some(v) = v {
        *slot = v;
    }
}

fn parse_project<'a>(r: &mut XmlReader<'a>, tag: &Tag<'a>) -> Result<Project, ScenarioError> {
    let mut p = Project {
        master_url: String::new(),
        name: String::new(),
        resource_share: 100.0,
        available: Availability::default(),
    };
    if !tag.is_empty() {
        while let Some(t) = r.next_child()? {
            match t.name() {
                "master_url" => p.master_url = r.string(&t)?,
                "project_name" => p.name = r.string(&t)?,
                "resource_share" => match r.num::<f64>(&t)? {
                    Some(x) if x < 0.0 => {
                        return Err(invalid(r, &t, format!("negative resource share {x}")))
                    }
                    Some(x) => p.resource_share = x,
                    None => {}
                },
                "available" => {
                    if !t.is_empty() {
                        while let Some(c) = r.next_child()? {
                            match c.name() {
                                "frac" => set(&mut p.available.frac, fraction(r, &c)?),
                                "lambda" => {
                                    let v = r.num(&c)?;
                                    set(&mut p.available.lambda, positive(r, &c, v)?);
                                }
                                _ => r.skip(&c)?,
                            }
                        }
                    }
                }
                _ => r.skip(&t)?,
            }
        }
    }
    if p.master_url.is_empty() {
        return Err(invalid(r, tag, "a <project> needs a <master_url>"));
    }
    if p.name.is_empty() {
        p.name = p.master_url.clone();
    }
    Ok(p)
}

fn parse_app<'a>(
    r: &mut XmlReader<'a>,
    tag: &Tag<'a>,
    project: usize,
) -> Result<(App, bool), ScenarioError> {
    let mut a = App {
        name: String::new(),
        project,
        latency_bound: 0.0,
        fpops_est: 0.0,
        fpops: NormalDist {
            mean: 0.0,
            std_dev: 0.0,
        },
        weight: 0.0,
        working_set: 0.0,
        max_concurrent: 0,
    };
    let mut has_mean = false;
    if !tag.is_empty() {
        while let Some(t) = r.next_child()? {
            match t.name() {
                "name" => a.name = r.string(&t)?,
                "latency_bound" => {
                    let v = r.num(&t)?;
                    set(&mut a.latency_bound, positive(r, &t, v)?);
                }
                "fpops_est" => {
                    let v = r.num(&t)?;
                    set(&mut a.fpops_est, positive(r, &t, v)?);
                }
                "fpops" => {
                    if !t.is_empty() {
                        while let Some(c) = r.next_child()? {
                            match c.name() {
                                "mean" => {
                                    let v = r.num(&c)?;
                                    if let Some(m) = positive(r, &c, v)? {
                                        a.fpops.mean = m;
                                        has_mean = true;
                                    }
                                }
                                "std_dev" => set(&mut a.fpops.std_dev, r.num(&c)?),
                                _ => r.skip(&c)?,
                            }
                        }
                    }
                }
                "weight" => match r.num::<f64>(&t)? {
                    Some(x) if x < 0.0 => {
                        return Err(invalid(r, &t, format!("negative weight {x}")))
                    }
                    other => set(&mut a.weight, other),
                },
                "working_set" => set(&mut a.working_set, r.num(&t)?),
                "max_concurrent" => a.max_concurrent = r.num_or(&t, 0u32)?,
                _ => r.skip(&t)?,
            }
        }
    }
    if a.name.is_empty() {
        return Err(invalid(r, tag, "an <app> needs a <name>"));
    }
    Ok((a, has_mean))
}

fn parse_app_version<'a>(
    r: &mut XmlReader<'a>,
    tag: &Tag<'a>,
) -> Result<RawVersion, ScenarioError> {
    let mut v = RawVersion {
        app_name: String::new(),
        version: AppVersion {
            app: 0,
            version_num: 0,
            plan_class: String::new(),
            avg_ncpus: 1.0,
            gpu: None,
            flops: 0.0,
        },
        gpu_type: None,
        line: 0,
    };
    if !tag.is_empty() {
        while let Some(t) = r.next_child()? {
            match t.name() {
                "app_name" => v.app_name = r.string(&t)?,
                "version_num" => set_i(&mut v.version.version_num, r.num(&t)?),
                "plan_class" => v.version.plan_class = r.string(&t)?,
                "avg_ncpus" => match r.num::<f64>(&t)? {
                    Some(x) if x < 0.0 => {
                        return Err(invalid(r, &t, format!("negative CPU usage {x}")))
                    }
                    other => set(&mut v.version.avg_ncpus, other),
                },
                "flops" => set(&mut v.version.flops, r.num(&t)?),
                "coproc" => {
                    let mut ty = String::new();
                    let mut count = 0.0;
                    if !t.is_empty() {
                        while let Some(c) = r.next_child()? {
                            match c.name() {
                                "type" => ty = r.string(&c)?,
                                "count" => count = r.num_or(&c, 0.0)?,
                                _ => r.skip(&c)?,
                            }
                        }
                    }
                    if ty.is_empty() || count <= 0.0 {
                        return Err(invalid(
                            r,
                            &t,
                            "a <coproc> needs a <type> and a positive <count>",
                        ));
                    }
                    v.gpu_type = Some((ty, count));
                }
                _ => r.skip(&t)?,
            }
        }
    }
    if v.app_name.is_empty() {
        return Err(invalid(r, tag, "an <app_version> needs an <app_name>"));
    }
    Ok(v)
}

fn set_i(slot: &mut i64, v: Option<i64>) {
    if let Some(v) = v {
        *slot = v;
    }
}

fn parse_workunit<'a>(r: &mut XmlReader<'a>, tag: &Tag<'a>) -> Result<RawWu, ScenarioError> {
    let mut w = RawWu {
        name: String::new(),
        app_name: String::new(),
        rsc_fpops_est: 0.0,
    };
    if !tag.is_empty() {
        while let Some(t) = r.next_child()? {
            match t.name() {
                "name" => w.name = r.string(&t)?,
                "app_name" => w.app_name = r.string(&t)?,
                "rsc_fpops_est" => set(&mut w.rsc_fpops_est, r.num(&t)?),
                _ => r.skip(&t)?,
            }
        }
    }
    if w.name.is_empty() {
        return Err(invalid(r, tag, "a <workunit> needs a <name>"));
    }
    Ok(w)
}

fn parse_result<'a>(r: &mut XmlReader<'a>, tag: &Tag<'a>) -> Result<RawJob, ScenarioError> {
    let mut j = RawJob {
        name: String::new(),
        wu_name: String::new(),
        project_url: String::new(),
        version_num: None,
        plan_class: String::new(),
        report_deadline: 0.0,
        received_time: 0.0,
        line: 0,
    };
    if !tag.is_empty() {
        while let Some(t) = r.next_child()? {
            match t.name() {
                "name" => j.name = r.string(&t)?,
                "wu_name" => j.wu_name = r.string(&t)?,
                "project_url" => j.project_url = r.string(&t)?,
                "version_num" => j.version_num = r.num(&t)?,
                "plan_class" => j.plan_class = r.string(&t)?,
                "report_deadline" => set(&mut j.report_deadline, r.num(&t)?),
                "received_time" => set(&mut j.received_time, r.num(&t)?),
                _ => r.skip(&t)?,
            }
        }
    }
    if j.wu_name.is_empty() {
        return Err(invalid(r, tag, "a <result> needs a <wu_name>"));
    }
    Ok(j)
}

/// Applies a preferences document (`global_prefs.xml` or its override) onto `prefs`.
pub fn apply_prefs(
    text: &str,
    file: &str,
    prefs: &mut Prefs,
) -> Result<Vec<Warning>, ScenarioError> {
    let mut r = XmlReader::new(text, file);
    let root = r.root_any(&["global_preferences", "global_prefs"])?;
    if !root.is_empty() {
        while let Some(t) = r.next_child()? {
            match t.name() {
                "cpu_scheduling_period_minutes" => match r.num::<f64>(&t)? {
                    Some(x) if x > 0.0 => prefs.cpu_scheduling_period = x * 60.0,
                    Some(x) => {
                        return Err(invalid(&r, &t, format!("{x} minutes must be positive")))
                    }
                    None => {}
                },
                "work_buf_min_days" => {
                    if let Some(x) = r.num::<f64>(&t)? {
                        prefs.work_buf_min = (x.max(0.0) * 86400.0).max(MIN_WORK_BUF);
                    }
                }
                "work_buf_additional_days" => {
                    if let Some(x) = r.num::<f64>(&t)? {
                        prefs.work_buf_additional = x.max(0.0) * 86400.0;
                    }
                }
                "max_ncpus_pct" => {
                    if let Some(x) = r.num::<f64>(&t)? {
                        prefs.max_ncpus_pct = x;
                    }
                }
                "max_cpus" => {
                    if let Some(x) = r.num::<i64>(&t)? {
                        prefs.max_cpus = u32::try_from(x.max(0)).unwrap_or(0);
                    }
                }
                _ => r.skip(&t)?,
            }
        }
    }
    Ok(r.finish()?)
}

/// Applies `cc_config.xml` onto `cc`.
pub fn apply_cc_config(
    text: &str,
    file: &str,
    cc: &mut CcConfig,
) -> Result<Vec<Warning>, ScenarioError> {
    let mut r = XmlReader::new(text, file);
    let root = r.root("cc_config")?;
    if !root.is_empty() {
        while let Some(t) = r.next_child()? {
            if t.name() != "options" || t.is_empty() {
                r.skip(&t)?;
                continue;
            }
            while let Some(o) = r.next_child()? {
                match o.name() {
                    "ncpus" => cc.ncpus = r.num_or(&o, 0)?,
                    "rec_half_life_days" => match r.num::<f64>(&o)? {
                        Some(x) if x > 0.0 => cc.rec_half_life = x * 86400.0,
                        Some(x) => {
                            return Err(invalid(&r, &o, format!("{x} days must be positive")))
                        }
                        None => {}
                    },
                    "report_results_immediately" => cc.report_results_immediately = r.flag(&o)?,
                    _ => r.skip(&o)?,
                }
            }
        }
    }
    Ok(r.finish()?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"<client_state>
<host_info><p_ncpus>2</p_ncpus><p_fpops>1e9</p_fpops><bogus>1</bogus></host_info>
<project><master_url>http://a/</master_url><project_name>A</project_name>
<resource_share>50</resource_share><available><frac>0.5</frac><lambda>100</lambda></available></project>
<app><name>x</name><latency_bound>1000</latency_bound><fpops_est>1e11</fpops_est></app>
<app_version><app_name>x</app_name><avg_ncpus>1</avg_ncpus><flops>1e9</flops></app_version>
</client_state>"#;

    #[test]
    fn minimal_state_loads_with_defaults() {
        let s = parse_client_state(MINIMAL, "cs.xml").unwrap();
        assert_eq!(s.host.ncpus, 2);
        assert_eq!(s.projects[0].resource_share, 50.0);
        assert_eq!(
            s.projects[0].available,
            Availability {
                frac: 0.5,
                lambda: 100.0
            }
        );
        assert_eq!(s.apps[0].fpops.mean, 1e11);
        assert_eq!(s.apps[0].weight, 1.0);
        assert_eq!(s.app_versions[0].app, 0);
    }

    #[test]
    fn version_of_unknown_app_names_file_and_line() {
        let text = MINIMAL.replace("<app_name>x</app_name>", "<app_name>y</app_name>");
        let err = parse_client_state(&text, "cs.xml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("cs.xml:6: <app_version>"), "{msg}");
        assert!(msg.contains("'y'"), "{msg}");
    }

    #[test]
    fn negative_share_is_an_error_with_line() {
        let text = MINIMAL.replace("<resource_share>50", "<resource_share>-5");
        let err = parse_client_state(&text, "cs.xml").unwrap_err();
        assert!(
            err.to_string().starts_with("cs.xml:4: <resource_share>"),
            "{err}"
        );
    }

    #[test]
    fn truncated_file_is_an_xml_error() {
        let err = parse_client_state(&MINIMAL[..200], "cs.xml").unwrap_err();
        assert!(matches!(err, ScenarioError::Xml(_)), "{err}");
    }

    #[test]
    fn prefs_minimum_buffer_is_enforced() {
        let mut p = Prefs::default();
        apply_prefs(
            "<global_preferences><work_buf_min_days>0.0001</work_buf_min_days>\
             <cpu_scheduling_period_minutes>1</cpu_scheduling_period_minutes></global_preferences>",
            "p.xml",
            &mut p,
        )
        .unwrap();
        assert_eq!(p.work_buf_min, 180.0);
        assert_eq!(p.work_buf_total(), 180.0 + 43200.0);
        assert_eq!(p.cpu_scheduling_period, 60.0);
    }

    #[test]
    fn cc_config_options_apply() {
        let mut cc = CcConfig::default();
        apply_cc_config(
            "<cc_config><options><ncpus>3</ncpus><rec_half_life_days>1</rec_half_life_days></options></cc_config>",
            "cc.xml",
            &mut cc,
        )
        .unwrap();
        assert_eq!(cc.ncpus, 3);
        assert_eq!(cc.rec_half_life, 86400.0);
    }
}
