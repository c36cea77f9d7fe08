//! `app_config.xml` (per project, in `projects/<esc>/`): the user's per-app limits and
//! resource usage overrides, and the GUI RPC `get_app_config`/`set_app_config` body.

use crate::xml::{Parsed, Tag, XmlError, XmlReader, XmlWriter};

/// `<gpu_versions>`: resource usage for the GPU versions of an app.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GpuVersions {
    /// GPU instances per job (> 0 to apply).
    pub gpu_usage: f64,
    /// CPUs per job (≥ 0; 0 disables the whole block, as in BOINC).
    pub cpu_usage: f64,
}

impl GpuVersions {
    /// Whether BOINC applies the block: both values non-zero.
    pub fn applies(&self) -> bool {
        self.gpu_usage > 0.0 && self.cpu_usage > 0.0
    }
}

/// `<app>`: settings for one app of the project.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AppConfigApp {
    /// The app's short name (as in the state file's `<app><name>`).
    pub name: String,
    /// Most jobs of this app running at once (0 = no limit); also limits work fetch.
    pub max_concurrent: i32,
    /// Usage override for the app's GPU versions, when given.
    pub gpu_versions: Option<GpuVersions>,
    /// Use the app's fraction done directly for time estimates.
    pub fraction_done_exact: bool,
    /// Report this app's jobs as soon as they are uploaded.
    pub report_results_immediately: bool,
}

/// `<app_version>`: overrides for the versions of an app with a given plan class.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AppVersionConfig {
    /// The app's short name.
    pub app_name: String,
    /// Plan class to match exactly (empty matches versions without a plan class).
    pub plan_class: String,
    /// Extra command-line arguments (applied when non-empty).
    pub cmdline: String,
    /// CPUs per job (applied when non-zero).
    pub avg_ncpus: f64,
    /// GPU instances per job (applied when non-zero).
    pub ngpus: f64,
}

/// The whole `app_config.xml`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AppConfig {
    /// Per-app settings.
    pub apps: Vec<AppConfigApp>,
    /// Per-version overrides.
    pub app_versions: Vec<AppVersionConfig>,
    /// Most jobs of the project running at once (0 = no limit).
    pub project_max_concurrent: i32,
    /// Report every job of the project as soon as it is uploaded.
    pub report_results_immediately: bool,
}

fn read_app<'a>(r: &mut XmlReader<'a>, tag: &Tag<'a>) -> Result<AppConfigApp, XmlError> {
    let mut a = AppConfigApp::default();
    if tag.is_empty() {
        return Ok(a);
    }
    while let Some(c) = r.next_child()? {
        match c.name() {
            "name" => a.name = r.string(&c)?,
            "max_concurrent" => a.max_concurrent = r.num_clamped(&c, 0, i32::MAX)?.unwrap_or(0),
            "gpu_versions" => {
                let mut g = GpuVersions::default();
                if !c.is_empty() {
                    while let Some(gc) = r.next_child()? {
                        match gc.name() {
                            "gpu_usage" => {
                                if let Some(x) = r.num::<f64>(&gc)? {
                                    if x > 0.0 {
                                        g.gpu_usage = x;
                                    } else {
                                        r.warn(&gc, "gpu_usage must be positive; ignored");
                                    }
                                }
                            }
                            "cpu_usage" => {
                                if let Some(x) = r.num::<f64>(&gc)? {
                                    if x >= 0.0 {
                                        g.cpu_usage = x;
                                    } else {
                                        r.warn(&gc, "cpu_usage must be non-negative; ignored");
                                    }
                                }
                            }
                            _ => r.unknown(&gc, "gpu_versions")?,
                        }
                    }
                }
                a.gpu_versions = Some(g);
            }
            "fraction_done_exact" => a.fraction_done_exact = r.flag(&c)?,
            "report_results_immediately" => a.report_results_immediately = r.flag(&c)?,
            _ => r.unknown(&c, "app")?,
        }
    }
    if a.name.is_empty() {
        r.warn(tag, "<app> without <name>: matches no app");
    }
    Ok(a)
}

fn read_app_version<'a>(
    r: &mut XmlReader<'a>,
    tag: &Tag<'a>,
) -> Result<AppVersionConfig, XmlError> {
    let mut v = AppVersionConfig::default();
    if tag.is_empty() {
        return Ok(v);
    }
    while let Some(c) = r.next_child()? {
        match c.name() {
            "app_name" => v.app_name = r.string(&c)?,
            "plan_class" => v.plan_class = r.string(&c)?,
            "cmdline" => v.cmdline = r.string(&c)?,
            "avg_ncpus" => v.avg_ncpus = r.num_clamped(&c, 0.0, f64::MAX)?.unwrap_or(0.0),
            "ngpus" => v.ngpus = r.num_clamped(&c, 0.0, f64::MAX)?.unwrap_or(0.0),
            _ => r.unknown(&c, "app_version")?,
        }
    }
    Ok(v)
}

impl AppConfig {
    /// Reads `<app_config>`.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut cfg = Self::default();
        if tag.is_empty() {
            return Ok(cfg);
        }
        while let Some(c) = r.next_child()? {
            match c.name() {
                "app" => cfg.apps.push(read_app(r, &c)?),
                "app_version" => cfg.app_versions.push(read_app_version(r, &c)?),
                "project_max_concurrent" => {
                    if let Some(n) = r.num::<i32>(&c)? {
                        if n > 0 {
                            cfg.project_max_concurrent = n;
                        } else {
                            r.warn(&c, format!("{n} is not positive; ignored"));
                        }
                    }
                }
                "report_results_immediately" => cfg.report_results_immediately = r.flag(&c)?,
                _ => r.unknown(&c, "app_config")?,
            }
        }
        Ok(cfg)
    }

    /// Writes `<app_config>` (only what is set).
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("app_config");
        for a in &self.apps {
            w.open("app").text("name", &a.name);
            if a.max_concurrent != 0 {
                w.num("max_concurrent", a.max_concurrent);
            }
            if let Some(g) = &a.gpu_versions {
                w.open("gpu_versions");
                if g.gpu_usage > 0.0 {
                    w.f64("gpu_usage", g.gpu_usage);
                }
                w.f64("cpu_usage", g.cpu_usage).close("gpu_versions");
            }
            w.flag("fraction_done_exact", a.fraction_done_exact)
                .flag("report_results_immediately", a.report_results_immediately)
                .close("app");
        }
        for v in &self.app_versions {
            w.open("app_version")
                .text("app_name", &v.app_name)
                .nonempty_text("plan_class", &v.plan_class)
                .nonempty_text("cmdline", &v.cmdline);
            if v.avg_ncpus != 0.0 {
                w.f64("avg_ncpus", v.avg_ncpus);
            }
            if v.ngpus != 0.0 {
                w.f64("ngpus", v.ngpus);
            }
            w.close("app_version");
        }
        if self.project_max_concurrent > 0 {
            w.num("project_max_concurrent", self.project_max_concurrent);
        }
        w.flag(
            "report_results_immediately",
            self.report_results_immediately,
        );
        w.close("app_config");
    }

    /// Parses `app_config.xml`.
    pub fn parse(text: &str, file: &str) -> Result<Parsed<Self>, XmlError> {
        crate::xml::parse_document(text, file, "app_config", Self::read)
    }

    /// The document.
    pub fn to_xml(&self) -> String {
        crate::xml::write_document(|w| self.write(w))
    }

    /// The settings for app `name`, if any.
    pub fn app(&self, name: &str) -> Option<&AppConfigApp> {
        self.apps.iter().find(|a| a.name == name)
    }

    /// The override for versions of `app_name` with `plan_class` (exact match), if any.
    pub fn app_version(&self, app_name: &str, plan_class: &str) -> Option<&AppVersionConfig> {
        self.app_versions
            .iter()
            .find(|v| v.app_name == app_name && v.plan_class == plan_class)
    }

    /// Whether jobs of `app_name` are reported as soon as uploaded (project- or app-level).
    pub fn report_immediately(&self, app_name: &str) -> bool {
        self.report_results_immediately
            || self
                .app(app_name)
                .is_some_and(|a| a.report_results_immediately)
    }
}
