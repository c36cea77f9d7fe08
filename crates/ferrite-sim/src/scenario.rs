//! Scenario loading: the official emulator's input folder turned into typed, validated data.
//!
//! A scenario folder holds `client_state.xml` (host, availability, projects, apps, app versions,
//! optional concrete jobs, with the emulator-only tags), `global_prefs.xml`, and optionally
//! `global_prefs_override.xml` and `cc_config.xml`. The state file is read by ferrite-proto's
//! state loader ([`crate::state`]), so a real client's state file loads too. Unknown tags are
//! ignored (collected as warnings); values that make the emulation meaningless (no CPUs, an app
//! version for an unknown app, a negative size, …) are a [`ScenarioError`] naming the file and
//! the element.

use std::path::{Path, PathBuf};

use ferrite_proto::xml::{Tag, Warning, XmlError, XmlReader};

pub use crate::state::parse_client_state;

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
    #[error("{at}: <{element}>: {message}")]
    Invalid {
        /// The file, with the line of the offending element when it is known (`file:line`).
        at: String,
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

    /// Loads a state file alone (any `client_state.xml`, `client_state_prev.xml`, …), with
    /// default preferences and configuration.
    pub fn from_state_file(path: &Path) -> Result<Self, ScenarioError> {
        let text = read(path)?;
        parse_client_state(&text, &path.display().to_string())
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

fn invalid(r: &XmlReader<'_>, tag: &Tag<'_>, message: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        at: format!("{}:{}", r.file(), r.line_at(tag.offset())),
        element: tag.name().to_owned(),
        message: message.into(),
    }
}

fn read(path: &Path) -> Result<String, ScenarioError> {
    std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
        file: path.to_path_buf(),
        source,
    })
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
