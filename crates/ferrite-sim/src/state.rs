//! A scenario from a state file: `client_state.xml` is read by ferrite-proto's state loader
//! (the one `ferrited` uses), so whatever the daemon loads the emulator loads, and the
//! emulator's own tags (availability processes, the servers' job distributions) are taken
//! from the elements that loader keeps verbatim.
//!
//! A real client's state file has none of those tags: its apps get the official emulator's
//! defaults, and its unfinished results become the run's initial jobs (a result belongs to
//! the `<project>` before it, its workunit and app version to the same project).

use std::sync::Arc;

use ferrite_proto::client_state::{ClientState, ProjectState, ResultState, TaskResult};
use ferrite_proto::xml::{Tag, Warning, XmlReader};

use crate::scenario::{
    App, AppVersion, Availability, CcConfig, GpuType, Host, InitialJob, NormalDist, Prefs, Project,
    Scenario, ScenarioError, DEFAULT_FPOPS_EST, DEFAULT_LATENCY_BOUND,
};

/// Elements only the emulator's scenarios carry; the state loader keeps them verbatim (and
/// warns about them as unknown, which is not news here).
const EMULATOR_TAGS: &[&str] = &[
    "on_lambda",
    "connected_lambda",
    "active_lambda",
    "gpu_active_lambda",
    "available",
    "latency_bound",
    "fpops_est",
    "fpops",
    "weight",
    "working_set",
    "max_concurrent",
];

/// BOINC's value for a GPU peak that is missing or absurd.
const SANE_GPU_PEAK: f64 = 1e11;
/// CPU speed of a host whose state file gives none.
const DEFAULT_P_FPOPS: f64 = 1e9;

/// Parses `client_state.xml` text into a scenario; `file` names it in messages. Preferences
/// and `cc_config.xml` are left at their defaults.
pub fn parse_client_state(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
    let parsed = ClientState::parse(text, file)?;
    let mut cx = Cx {
        file: Arc::from(file),
        warnings: parsed
            .warnings
            .into_iter()
            .filter(|w| !EMULATOR_TAGS.contains(&w.element.as_str()))
            .collect(),
    };
    let cs = parsed.value;
    let host = cx.host(&cs)?;
    let mut projects = Vec::new();
    let mut apps = Vec::new();
    let mut app_versions = Vec::new();
    let mut jobs = Vec::new();
    for ps in &cs.projects {
        cx.project(
            ps,
            &host,
            &mut projects,
            &mut apps,
            &mut app_versions,
            &mut jobs,
        )?;
    }
    Ok(Scenario {
        host,
        projects,
        apps,
        app_versions,
        jobs,
        prefs: Prefs::default(),
        cc_config: CcConfig::default(),
        warnings: cx.warnings,
    })
}

/// One emulator-only element kept by the state loader, opened for reading.
struct Fragment<'a> {
    r: XmlReader<'a>,
    tag: Tag<'a>,
}

impl<'a> Fragment<'a> {
    fn open(raw: &'a str, file: &Arc<str>) -> Option<Self> {
        let name = raw
            .trim_start()
            .strip_prefix('<')?
            .split(|c: char| c.is_whitespace() || c == '>' || c == '/')
            .next()?;
        let mut r = XmlReader::new(raw, file.clone());
        let tag = r.root(name).ok()?;
        Some(Self { r, tag })
    }

    fn name(&self) -> &str {
        self.tag.name()
    }

    fn num(&mut self) -> Result<Option<f64>, ScenarioError> {
        Ok(self.r.num(&self.tag)?)
    }

    /// `(name, value)` of each numeric child (`<mean>`, `<frac>`, …).
    fn children(&mut self) -> Result<Vec<(String, Option<f64>)>, ScenarioError> {
        let mut out = Vec::new();
        if self.tag.is_empty() {
            return Ok(out);
        }
        while let Some(c) = self.r.next_child()? {
            let v = self.r.num(&c)?;
            out.push((c.name().to_owned(), v));
        }
        Ok(out)
    }
}

/// The file being converted and the warnings gathered so far.
struct Cx {
    file: Arc<str>,
    warnings: Vec<Warning>,
}

impl Cx {
    fn invalid(&self, element: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid {
            at: self.file.to_string(),
            element: element.to_owned(),
            message: message.into(),
        }
    }

    fn warn(&mut self, element: &str, message: impl Into<String>) {
        self.warnings.push(Warning {
            file: self.file.clone(),
            line: 0,
            element: element.to_owned(),
            message: message.into(),
        });
    }

    fn positive(&self, element: &str, v: Option<f64>) -> Result<Option<f64>, ScenarioError> {
        match v {
            Some(x) if x <= 0.0 || x.is_nan() => {
                Err(self.invalid(element, format!("{x} must be positive")))
            }
            other => Ok(other),
        }
    }

    /// An availability fraction: within [0, 1]; 0 (a process never up cannot be sampled) is
    /// taken as 0.001; the client's -1 ("unknown") as always.
    fn fraction(&mut self, element: &str, x: f64) -> Result<f64, ScenarioError> {
        if x < 0.0 {
            return Ok(1.0);
        }
        if !(0.0..=1.0).contains(&x) {
            return Err(self.invalid(element, format!("{x} is not a fraction in [0, 1]")));
        }
        if x == 0.0 {
            self.warn(element, "a fraction of 0 is taken as 0.001");
            return Ok(0.001);
        }
        Ok(x)
    }

    fn host(&mut self, cs: &ClientState) -> Result<Host, ScenarioError> {
        let hi = &cs.host_info;
        if hi.p_ncpus == 0 {
            return Err(self.invalid("p_ncpus", "0 CPUs: need at least 1"));
        }
        let p_fpops = if hi.p_fpops > 0.0 {
            hi.p_fpops
        } else {
            self.warn(
                "p_fpops",
                format!("no CPU speed; taken as {DEFAULT_P_FPOPS:e}"),
            );
            DEFAULT_P_FPOPS
        };
        let mut gpus = Vec::new();
        let sane = |peak: f64| {
            if peak > 0.0 && peak <= 1e15 {
                peak
            } else {
                SANE_GPU_PEAK
            }
        };
        if let Some(nv) = &hi.coprocs.nvidia {
            if nv.count > 0 {
                gpus.push(GpuType {
                    name: "NVIDIA".into(),
                    count: nv.count,
                    peak_flops: sane(nv.peak_flops),
                });
            }
        }
        for o in &hi.coprocs.other {
            if o.count > 0 && !o.rsc_type.is_empty() {
                gpus.push(GpuType {
                    name: o.rsc_type.clone(),
                    count: o.count,
                    peak_flops: sane(o.peak_flops),
                });
            }
        }
        let ts = &cs.time_stats;
        let mut on = Availability {
            frac: self.fraction("on_frac", ts.on_frac)?,
            ..Availability::default()
        };
        let mut connected = Availability {
            frac: self.fraction("connected_frac", ts.connected_frac)?,
            ..Availability::default()
        };
        let mut active = Availability {
            frac: self.fraction("active_frac", ts.active_frac)?,
            ..Availability::default()
        };
        let mut gpu_active = Availability {
            frac: self.fraction("gpu_active_frac", ts.gpu_active_frac)?,
            ..Availability::default()
        };
        for raw in &ts.extra {
            let Some(mut f) = Fragment::open(raw, &self.file) else {
                continue;
            };
            let slot = match f.name() {
                "on_lambda" => &mut on.lambda,
                "connected_lambda" => &mut connected.lambda,
                "active_lambda" => &mut active.lambda,
                "gpu_active_lambda" => &mut gpu_active.lambda,
                _ => continue,
            };
            let name = f.name().to_owned();
            let v = f.num()?;
            if let Some(v) = self.positive(&name, v)? {
                *slot = v;
            }
        }
        Ok(Host {
            ncpus: hi.p_ncpus,
            p_fpops,
            m_nbytes: hi.m_nbytes,
            gpus,
            on,
            connected,
            active,
            gpu_active,
        })
    }

    /// Converts one project with its apps, versions and unfinished results; a project with no
    /// usable app is left out with a warning.
    #[allow(clippy::too_many_arguments)]
    fn project(
        &mut self,
        ps: &ProjectState,
        host: &Host,
        projects: &mut Vec<Project>,
        apps: &mut Vec<App>,
        app_versions: &mut Vec<AppVersion>,
        jobs: &mut Vec<InitialJob>,
    ) -> Result<(), ScenarioError> {
        let p = &ps.project;
        let name = if p.project_name.is_empty() {
            p.master_url.clone()
        } else {
            p.project_name.clone()
        };
        let mut available = Availability::default();
        for raw in &p.extra {
            let Some(mut f) = Fragment::open(raw, &self.file) else {
                continue;
            };
            if f.name() != "available" {
                continue;
            }
            for (child, v) in f.children()? {
                match (child.as_str(), v) {
                    ("frac", Some(x)) => available.frac = self.fraction("frac", x)?,
                    ("lambda", v) => {
                        if let Some(x) = self.positive("lambda", v)? {
                            available.lambda = x;
                        }
                    }
                    _ => {}
                }
            }
        }
        let project_index = projects.len();
        let app_base = apps.len();
        let version_base = app_versions.len();
        // Apps with their emulator parameters (defaults filled in below, after the jobs).
        let mut own_apps: Vec<(App, bool)> = Vec::new();
        for a in &ps.apps {
            own_apps.push(self.app(a, project_index)?);
        }
        let mut own_versions: Vec<AppVersion> = Vec::new();
        for v in &ps.app_versions {
            let Some(app) = own_apps.iter().position(|(a, _)| a.name == v.app_name) else {
                return Err(self.invalid(
                    "app_version",
                    format!(
                        "app_name '{}' names no <app> of project '{name}'",
                        v.app_name
                    ),
                ));
            };
            let mut avg_ncpus = v.usage.avg_ncpus;
            if avg_ncpus <= 0.0 {
                avg_ncpus = 1.0;
            }
            let mut gpu = None;
            if let Some(c) = v.usage.coprocs.iter().find(|c| c.count > 0.0) {
                let Some(g) = host
                    .gpus
                    .iter()
                    .position(|t| gpu_type_matches(&t.name, &c.rsc_type))
                else {
                    self.warn(
                        "app_version",
                        format!(
                            "{} {}: host has no GPU of type '{}'; version ignored",
                            v.app_name, v.version_num, c.rsc_type
                        ),
                    );
                    continue;
                };
                gpu = Some((g, c.count));
            }
            let mut flops = v.usage.flops;
            if flops <= 0.0 {
                flops =
                    host.p_fpops * avg_ncpus + gpu.map_or(0.0, |(_, c)| c * 10.0 * host.p_fpops);
                self.warn(
                    "app_version",
                    format!(
                        "{} {}: no <flops>; taken as {flops:.3e}",
                        v.app_name, v.version_num
                    ),
                );
            }
            own_versions.push(AppVersion {
                app,
                version_num: i64::from(v.version_num),
                plan_class: v.plan_class.clone(),
                avg_ncpus,
                gpu,
                flops,
            });
        }
        // Unfinished results: the run's initial jobs; they also fill in their app's deadline
        // and size when the scenario gives none (as the official emulator does).
        let mut own_jobs: Vec<(InitialJob, usize)> = Vec::new();
        let look = ferrite_proto::client_state::ProjectLookup::new(ps);
        for res in ps.results.iter().filter(|r| unfinished(r)) {
            let Some(wu) = look.workunit(&res.wu_name) else {
                return Err(self.invalid(
                    "result",
                    format!(
                        "{}: wu_name '{}' names no <workunit>",
                        res.name, res.wu_name
                    ),
                ));
            };
            let Some(app) = own_apps.iter().position(|(a, _)| a.name == wu.app_name) else {
                return Err(self.invalid(
                    "result",
                    format!(
                        "{}: app '{}' of its workunit is not declared",
                        res.name, wu.app_name
                    ),
                ));
            };
            let of_app = |v: &&AppVersion| v.app == app;
            let exact = own_versions.iter().enumerate().find(|(_, v)| {
                of_app(v)
                    && v.version_num == i64::from(res.version_num)
                    && v.plan_class == res.plan_class
            });
            let any = || own_versions.iter().enumerate().find(|(_, v)| of_app(v));
            let Some((version, _)) = exact.or_else(any) else {
                self.warn(
                    "result",
                    format!("{}: no usable <app_version>; left out", res.name),
                );
                continue;
            };
            let latency = res.report_deadline - res.received_time;
            let (a, _) = &mut own_apps[app];
            if a.latency_bound <= 0.0 && latency > 0.0 {
                a.latency_bound = latency;
            }
            if a.fpops_est <= 0.0 && wu.rsc_fpops_est > 0.0 {
                a.fpops_est = wu.rsc_fpops_est;
            }
            own_jobs.push((
                InitialJob {
                    name: res.name.clone(),
                    app_version: version,
                    latency,
                    fpops: wu.rsc_fpops_est.max(1.0),
                    received_time: res.received_time,
                },
                app,
            ));
        }
        // Keep apps that have a version; renumber.
        let mut app_map = vec![usize::MAX; own_apps.len()];
        for (i, (mut a, has_mean)) in own_apps.into_iter().enumerate() {
            if !own_versions.iter().any(|v| v.app == i) {
                continue;
            }
            if a.fpops_est <= 0.0 {
                a.fpops_est = DEFAULT_FPOPS_EST;
            }
            if a.latency_bound <= 0.0 {
                a.latency_bound = DEFAULT_LATENCY_BOUND;
            }
            if !has_mean || a.fpops.mean <= 0.0 {
                a.fpops.mean = a.fpops_est;
            }
            if a.weight <= 0.0 {
                a.weight = 1.0;
            }
            app_map[i] = apps.len();
            apps.push(a);
        }
        if apps.len() == app_base {
            self.warn(
                "project",
                format!("project '{name}' has no usable app; left out"),
            );
            return Ok(());
        }
        for mut v in own_versions {
            v.app = app_map[v.app];
            app_versions.push(v);
        }
        for (mut j, _) in own_jobs {
            j.app_version += version_base;
            jobs.push(j);
        }
        projects.push(Project {
            master_url: p.master_url.clone(),
            name,
            resource_share: p.resource_share,
            available,
        });
        Ok(())
    }

    /// An app with the emulator's parameters from its kept elements; the flag says whether
    /// a size distribution's mean was given.
    fn app(
        &mut self,
        a: &ferrite_proto::client_state::App,
        project: usize,
    ) -> Result<(App, bool), ScenarioError> {
        let mut app = App {
            name: a.name.clone(),
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
        for raw in &a.extra {
            let Some(mut f) = Fragment::open(raw, &self.file) else {
                continue;
            };
            let name = f.name().to_owned();
            match name.as_str() {
                "latency_bound" => {
                    let v = f.num()?;
                    if let Some(x) = self.positive(&name, v)? {
                        app.latency_bound = x;
                    }
                }
                "fpops_est" => {
                    let v = f.num()?;
                    if let Some(x) = self.positive(&name, v)? {
                        app.fpops_est = x;
                    }
                }
                "fpops" => {
                    for (child, v) in f.children()? {
                        match child.as_str() {
                            "mean" => {
                                if let Some(m) = self.positive("mean", v)? {
                                    app.fpops.mean = m;
                                    has_mean = true;
                                }
                            }
                            "std_dev" => match v {
                                Some(x) if x < 0.0 => {
                                    return Err(self.invalid(
                                        "std_dev",
                                        format!("app '{}': negative standard deviation", a.name),
                                    ))
                                }
                                Some(x) => app.fpops.std_dev = x,
                                None => {}
                            },
                            _ => {}
                        }
                    }
                }
                "weight" => match f.num()? {
                    Some(x) if x < 0.0 => {
                        return Err(self.invalid(&name, format!("negative weight {x}")))
                    }
                    Some(x) => app.weight = x,
                    None => {}
                },
                "working_set" => app.working_set = f.num()?.unwrap_or(0.0),
                "max_concurrent" => {
                    let n = f.num()?.unwrap_or(0.0);
                    app.max_concurrent = if n >= 1.0 {
                        n.min(f64::from(u32::MAX)) as u32
                    } else {
                        0
                    };
                }
                _ => {}
            }
        }
        Ok((app, has_mean))
    }
}

/// Whether a result still has computing to do (not finished, reported or given up).
fn unfinished(r: &TaskResult) -> bool {
    !r.ready_to_report
        && !r.got_server_ack
        && matches!(
            r.state,
            ResultState::New | ResultState::FilesDownloading | ResultState::FilesDownloaded
        )
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"<client_state>
<host_info><p_ncpus>2</p_ncpus><p_fpops>1e9</p_fpops><bogus>1</bogus></host_info>
<time_stats><on_frac>0.8</on_frac><on_lambda>1000</on_lambda></time_stats>
<project><master_url>http://a/</master_url><project_name>A</project_name>
<resource_share>50</resource_share><available><frac>0.5</frac><lambda>100</lambda></available></project>
<app><name>x</name><latency_bound>1000</latency_bound><fpops_est>1e11</fpops_est></app>
<app_version><app_name>x</app_name><avg_ncpus>1</avg_ncpus><flops>1e9</flops></app_version>
</client_state>"#;

    #[test]
    fn minimal_state_loads_with_emulator_tags_and_defaults() {
        let s = parse_client_state(MINIMAL, "cs.xml").unwrap();
        assert_eq!(s.host.ncpus, 2);
        assert_eq!(
            s.host.on,
            Availability {
                frac: 0.8,
                lambda: 1000.0
            }
        );
        assert_eq!(s.projects[0].resource_share, 50.0);
        assert_eq!(
            s.projects[0].available,
            Availability {
                frac: 0.5,
                lambda: 100.0
            }
        );
        assert_eq!(s.apps[0].latency_bound, 1000.0);
        assert_eq!(s.apps[0].fpops.mean, 1e11);
        assert_eq!(s.apps[0].weight, 1.0);
        assert_eq!(s.app_versions[0].app, 0);
        // The emulator's own tags are understood, so not reported as unknown; others are.
        let unknown: Vec<&str> = s.warnings.iter().map(|w| w.element.as_str()).collect();
        assert_eq!(unknown, vec!["bogus"], "{:?}", s.warnings);
    }

    #[test]
    fn version_of_unknown_app_names_file_element_and_name() {
        let text = MINIMAL.replace("<app_name>x</app_name>", "<app_name>y</app_name>");
        let err = parse_client_state(&text, "cs.xml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("cs.xml: <app_version>"), "{msg}");
        assert!(msg.contains("'y'"), "{msg}");
    }

    #[test]
    fn negative_share_is_clamped_with_a_warning() {
        let text = MINIMAL.replace("<resource_share>50", "<resource_share>-5");
        let s = parse_client_state(&text, "cs.xml").unwrap();
        assert_eq!(s.projects[0].resource_share, 0.0);
        assert!(
            s.warnings.iter().any(|w| w.element == "resource_share"),
            "{:?}",
            s.warnings
        );
    }

    #[test]
    fn non_positive_lambda_is_an_error() {
        let text = MINIMAL.replace("<lambda>100</lambda>", "<lambda>0</lambda>");
        let err = parse_client_state(&text, "cs.xml").unwrap_err();
        assert!(err.to_string().starts_with("cs.xml: <lambda>"), "{err}");
    }

    #[test]
    fn truncated_file_is_an_xml_error() {
        let err = parse_client_state(&MINIMAL[..200], "cs.xml").unwrap_err();
        assert!(matches!(err, ScenarioError::Xml(_)), "{err}");
    }

    /// A real client's layout: results name no project; each belongs to the `<project>`
    /// before it. Finished and reported results are not initial jobs.
    #[test]
    fn results_belong_to_the_project_before_them() {
        let project = |n: &str| {
            format!(
                "<project><master_url>http://{n}/</master_url><project_name>{n}</project_name></project>\n\
                 <app><name>app</name></app>\n\
                 <app_version><app_name>app</app_name><version_num>7</version_num><flops>2e9</flops></app_version>\n\
                 <workunit><name>w</name><app_name>app</app_name><rsc_fpops_est>4e12</rsc_fpops_est></workunit>\n\
                 <result><name>{n}_r</name><wu_name>w</wu_name><version_num>7</version_num>\
                 <received_time>100</received_time><report_deadline>7300</report_deadline></result>\n\
                 <result><name>{n}_done</name><wu_name>w</wu_name><version_num>7</version_num>\
                 <state>5</state><ready_to_report/></result>\n"
            )
        };
        let text = format!(
            "<client_state><host_info><p_ncpus>1</p_ncpus><p_fpops>1e9</p_fpops></host_info>\n{}{}</client_state>",
            project("A"),
            project("B")
        );
        let s = parse_client_state(&text, "cs.xml").unwrap();
        assert_eq!(s.projects.len(), 2);
        assert_eq!(s.apps.len(), 2);
        let names: Vec<&str> = s.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, vec!["A_r", "B_r"]);
        for (k, j) in s.jobs.iter().enumerate() {
            let v = &s.app_versions[j.app_version];
            assert_eq!(s.apps[v.app].project, k);
            assert_eq!(j.latency, 7200.0);
            assert_eq!(j.fpops, 4e12);
        }
        // An app with no emulator tags takes its deadline and size from its job.
        assert_eq!(s.apps[0].latency_bound, 7200.0);
        assert_eq!(s.apps[0].fpops_est, 4e12);
    }

    #[test]
    fn no_cpus_is_an_error() {
        let err = parse_client_state(
            "<client_state><host_info><p_ncpus>0</p_ncpus></host_info></client_state>",
            "cs.xml",
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("cs.xml: <p_ncpus>"), "{err}");
    }
}
