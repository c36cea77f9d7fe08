//! `client_state.xml`: the client's persistent state, read at start-up and written whenever
//! it changes (`client/cs_statefile.cpp`).
//!
//! [`ClientState`] is the whole document. Each [`ProjectState`] owns the apps, files, app
//! versions, workunits and results that follow its `<project>` in the file (BOINC's rule:
//! objects belong to the most recent project). Writing follows the official order and layout
//! so the official client can load what Ferrite writes, and every element we do not model is
//! kept verbatim (`extra`) and written back.
//!
//! Sanity rules applied on read (each with a warning): a result that is acknowledged or ready
//! to report while in state 0, 1, 2 or 4 is set to state 5 (FILES_UPLOADED), as BOINC does.
//! Nothing the official client would keep is dropped; objects before any `<project>` (which
//! BOINC discards too) are dropped with a warning.

pub mod gui;
mod lookup;
mod objects;
mod project;
mod stats;
mod synthetic;

pub use lookup::ProjectLookup;
pub use objects::{
    App, AppVersion, CoprocUsage, FileInfo, FileRef, Form, ResourceUsage, ResultState, TaskResult,
    Workunit,
};
pub use project::{Project, RpcReason, RscBackoff};
pub use stats::{ActiveTask, NetStats, TimeStats, UserCpid};
#[doc(hidden)]
pub use synthetic::{synthetic, synthetic_account};

/// Writes `<name>\ntext\n</name>`, the layout BOINC uses for keys and signatures.
pub fn write_block_pub(w: &mut XmlWriter, name: &str, text: &str) {
    objects::write_block(w, name, text);
}

use crate::host::{HostInfo, HostInfoForm};
use crate::xml::{Parsed, Tag, XmlError, XmlReader, XmlWriter};

/// A run mode (`RUN_MODE_*`): for computing, GPU computing or network use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum RunMode {
    /// 1: always allowed.
    Always,
    /// 2: according to preferences.
    #[default]
    Auto,
    /// 3: never.
    Never,
}

impl RunMode {
    /// BOINC's number.
    pub fn as_i32(self) -> i32 {
        match self {
            RunMode::Always => 1,
            RunMode::Auto => 2,
            RunMode::Never => 3,
        }
    }

    /// The mode numbered `n`, if any.
    pub fn from_i32(n: i32) -> Option<RunMode> {
        match n {
            1 => Some(RunMode::Always),
            2 => Some(RunMode::Auto),
            3 => Some(RunMode::Never),
            _ => None,
        }
    }
}

/// A client version (`major.minor.release`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientVersion {
    /// Major number.
    pub major: i32,
    /// Minor number.
    pub minor: i32,
    /// Release number.
    pub release: i32,
}

/// One project and the objects that belong to it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProjectState {
    /// The `<project>` record.
    pub project: Project,
    /// Its applications.
    pub apps: Vec<App>,
    /// Its files (app, input and output files).
    pub files: Vec<FileInfo>,
    /// Its app versions.
    pub app_versions: Vec<AppVersion>,
    /// Its workunits.
    pub workunits: Vec<Workunit>,
    /// Its results (tasks).
    pub results: Vec<TaskResult>,
    /// Project-wide files linked into the project directory (`<project_files>`).
    pub project_files: Vec<FileRef>,
}

impl ProjectState {
    /// The app named `name`.
    pub fn app(&self, name: &str) -> Option<&App> {
        self.apps.iter().find(|a| a.name == name)
    }

    /// The file named `name`.
    pub fn file(&self, name: &str) -> Option<&FileInfo> {
        self.files.iter().find(|f| f.name == name)
    }

    /// The file named `name`, for changing it.
    pub fn file_mut(&mut self, name: &str) -> Option<&mut FileInfo> {
        self.files.iter_mut().find(|f| f.name == name)
    }

    /// The workunit named `name`.
    pub fn workunit(&self, name: &str) -> Option<&Workunit> {
        self.workunits.iter().find(|w| w.name == name)
    }

    /// The result named `name`.
    pub fn result(&self, name: &str) -> Option<&TaskResult> {
        self.results.iter().find(|r| r.name == name)
    }

    /// The result named `name`, for changing it.
    pub fn result_mut(&mut self, name: &str) -> Option<&mut TaskResult> {
        self.results.iter_mut().find(|r| r.name == name)
    }

    /// The app version identified by (app, platform, version, plan class).
    pub fn app_version(
        &self,
        app: &str,
        platform: &str,
        version_num: i32,
        plan_class: &str,
    ) -> Option<&AppVersion> {
        self.app_versions
            .iter()
            .find(|v| v.is(app, platform, version_num, plan_class))
    }

    /// The app version a result runs with (via its workunit's app).
    pub fn app_version_of(&self, result: &TaskResult) -> Option<&AppVersion> {
        let wu = self.workunit(&result.wu_name)?;
        self.app_version(
            &wu.app_name,
            &result.platform,
            result.version_num,
            &result.plan_class,
        )
    }

    fn write(&self, w: &mut XmlWriter) {
        self.project.write(w);
        for a in &self.apps {
            a.write(w);
        }
        for f in &self.files {
            f.write(w, Form::State);
        }
        for v in &self.app_versions {
            v.write(w, Form::State);
        }
        for wu in &self.workunits {
            wu.write(w);
        }
        for r in &self.results {
            r.write(w, Form::State);
        }
        if !self.project_files.is_empty() {
            w.open("project_files");
            for f in &self.project_files {
                f.write(w);
            }
            w.close("project_files");
        }
    }
}

/// The whole `client_state.xml`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientState {
    /// The host description (BOINC re-detects most of it at start-up).
    pub host_info: HostInfo,
    /// On/connected/active fractions.
    pub time_stats: TimeStats,
    /// Network throughput estimates.
    pub net_stats: NetStats,
    /// Projects, in file order, each with its objects.
    pub projects: Vec<ProjectState>,
    /// Tasks that were running when the file was written.
    pub active_tasks: Vec<ActiveTask>,
    /// Primary platform (`x86_64-pc-linux-gnu`).
    pub platform_name: String,
    /// Version of the client that wrote the file.
    pub core_client_version: ClientVersion,
    /// Computing mode chosen by the user.
    pub user_run_request: RunMode,
    /// Mode to return to after a temporary change.
    pub user_run_prev_request: RunMode,
    /// GPU mode chosen by the user.
    pub user_gpu_request: RunMode,
    /// GPU mode to return to.
    pub user_gpu_prev_request: RunMode,
    /// Network mode chosen by the user.
    pub user_network_request: RunMode,
    /// Last check for a newer client (Unix time).
    pub new_version_check_time: f64,
    /// Last download of the all-projects list (Unix time).
    pub all_projects_list_check_time: f64,
    /// User interface language, when known.
    pub language: Option<String>,
    /// A newer client version seen, when any.
    pub newer_version: Option<String>,
    /// Where to check for new client versions.
    pub client_version_check_url: Option<String>,
    /// Other platforms this host can run.
    pub alt_platforms: Vec<String>,
    /// Proxy settings made through the GUI, kept verbatim (`<proxy_info>…</proxy_info>`).
    pub proxy_info: Option<String>,
    /// The host's venue (from the preferences' source project).
    pub host_venue: String,
    /// Known cross-project ids by e-mail hash.
    pub user_cpids: Vec<UserCpid>,
    /// Top-level elements we do not know, kept verbatim and written before the end.
    pub extra: Vec<String>,
}

/// A master URL as the official client compares it when looking a project up.
fn url_lookup_key(url: &str) -> String {
    let canonical = crate::account::canonicalize_master_url(url).to_lowercase();
    let rest = canonical
        .split_once("//")
        .map_or(canonical.as_str(), |(_, r)| r);
    rest.strip_prefix("www.").unwrap_or(rest).to_owned()
}

impl ClientState {
    /// Parses `client_state.xml`. `file` names the document in errors and warnings.
    pub fn parse(text: &str, file: &str) -> Result<Parsed<ClientState>, XmlError> {
        let mut r = XmlReader::new(text, file);
        let root = r.root("client_state")?;
        let mut cs = ClientState::default();
        if !root.is_empty() {
            while let Some(t) = r.next_child()? {
                cs.read_child(&mut r, &t)?;
            }
        }
        let warnings = r.finish()?;
        Ok(Parsed {
            value: cs,
            warnings,
        })
    }

    fn read_child<'a>(&mut self, r: &mut XmlReader<'a>, t: &Tag<'a>) -> Result<(), XmlError> {
        match t.name() {
            "host_info" => self.host_info = HostInfo::read(r, t)?,
            "time_stats" => self.time_stats = TimeStats::read(r, t)?,
            "net_stats" => self.net_stats = NetStats::read(r, t)?,
            "project" => self.projects.push(ProjectState {
                project: Project::read(r, t)?,
                ..ProjectState::default()
            }),
            "app" | "file" | "file_info" | "app_version" | "workunit" | "result"
            | "project_files" => {
                let Some(ps) = self.projects.last_mut() else {
                    r.warn(t, "outside any <project>; dropped");
                    return r.skip(t);
                };
                match t.name() {
                    "app" => ps.apps.push(App::read(r, t)?),
                    "file" | "file_info" => ps.files.push(FileInfo::read(r, t)?),
                    "app_version" => ps.app_versions.push(AppVersion::read(r, t)?),
                    "workunit" => ps.workunits.push(Workunit::read(r, t)?),
                    "result" => {
                        let mut res = TaskResult::read(r, t)?;
                        if (res.got_server_ack || res.ready_to_report)
                            && matches!(
                                res.state,
                                ResultState::New
                                    | ResultState::FilesDownloading
                                    | ResultState::FilesDownloaded
                                    | ResultState::FilesUploading
                            )
                        {
                            r.warn(
                                t,
                                format!(
                                    "result {} is reported or acknowledged in state {}; \
                                     state set to 5 (files uploaded)",
                                    res.name,
                                    res.state.as_i32()
                                ),
                            );
                            res.state = ResultState::FilesUploaded;
                        }
                        ps.results.push(res);
                    }
                    _ => {
                        if !t.is_empty() {
                            while let Some(c) = r.next_child()? {
                                if c.name() == "file_ref" {
                                    ps.project_files.push(FileRef::read(r, &c)?);
                                } else {
                                    r.unknown(&c, "project_files")?;
                                }
                            }
                        }
                    }
                }
            }
            "active_task_set" => {
                if !t.is_empty() {
                    while let Some(c) = r.next_child()? {
                        if c.name() == "active_task" {
                            self.active_tasks.push(ActiveTask::read(r, &c)?);
                        } else {
                            r.unknown(&c, "active_task_set")?;
                        }
                    }
                }
            }
            "platform_name" => self.platform_name = r.string(t)?,
            "core_client_major_version" => self.core_client_version.major = r.num_or(t, 0)?,
            "core_client_minor_version" => self.core_client_version.minor = r.num_or(t, 0)?,
            "core_client_release" => self.core_client_version.release = r.num_or(t, 0)?,
            "user_run_request" => self.user_run_request = run_mode(r, t)?,
            "user_run_prev_request" => self.user_run_prev_request = run_mode(r, t)?,
            "user_gpu_request" => self.user_gpu_request = run_mode(r, t)?,
            "user_gpu_prev_request" => self.user_gpu_prev_request = run_mode(r, t)?,
            "user_network_request" => self.user_network_request = run_mode(r, t)?,
            "new_version_check_time" => self.new_version_check_time = r.num_or(t, 0.0)?,
            "all_projects_list_check_time" => {
                self.all_projects_list_check_time = r.num_or(t, 0.0)?
            }
            "language" => self.language = Some(r.string(t)?),
            "newer_version" => self.newer_version = Some(r.string(t)?),
            "client_version_check_url" => self.client_version_check_url = Some(r.string(t)?),
            "alt_platform" => {
                let p = r.string(t)?;
                if !p.is_empty() {
                    self.alt_platforms.push(p);
                }
            }
            "proxy_info" => self.proxy_info = Some(r.raw(t)?.to_owned()),
            "host_venue" => self.host_venue = r.string(t)?,
            "user_cpids" => {
                if !t.is_empty() {
                    while let Some(c) = r.next_child()? {
                        if c.name() == "user_cpid" {
                            self.user_cpids.push(UserCpid::read(r, &c)?);
                        } else {
                            r.unknown(&c, "user_cpids")?;
                        }
                    }
                }
            }
            _ => self.extra.extend(r.keep_unknown(t, "client_state")?),
        }
        Ok(())
    }

    /// Writes the document in the official order and layout.
    pub fn to_xml(&self) -> String {
        let tasks: usize = self.projects.iter().map(|p| p.results.len()).sum();
        let mut w = XmlWriter::with_capacity(16 * 1024 + tasks * 2600);
        w.open_flat("client_state");
        self.host_info.write(&mut w, HostInfoForm::STATE_FILE);
        self.time_stats.write(&mut w, Form::State);
        self.net_stats.write(&mut w);
        for p in &self.projects {
            p.write(&mut w);
        }
        w.open_flat("active_task_set");
        for a in &self.active_tasks {
            a.write(&mut w);
        }
        w.close_flat("active_task_set");
        let v = self.core_client_version;
        w.text("platform_name", &self.platform_name)
            .num("core_client_major_version", v.major)
            .num("core_client_minor_version", v.minor)
            .num("core_client_release", v.release)
            .num("user_run_request", self.user_run_request.as_i32())
            .num("user_run_prev_request", self.user_run_prev_request.as_i32())
            .num("user_gpu_request", self.user_gpu_request.as_i32())
            .num("user_gpu_prev_request", self.user_gpu_prev_request.as_i32())
            .num("user_network_request", self.user_network_request.as_i32())
            .f64("new_version_check_time", self.new_version_check_time)
            .f64(
                "all_projects_list_check_time",
                self.all_projects_list_check_time,
            )
            .opt_text("language", self.language.as_deref())
            .opt_text("newer_version", self.newer_version.as_deref())
            .opt_text(
                "client_version_check_url",
                self.client_version_check_url.as_deref(),
            );
        for p in &self.alt_platforms {
            w.text("alt_platform", p);
        }
        if let Some(p) = &self.proxy_info {
            w.raw(p);
        }
        w.nonempty_text("host_venue", &self.host_venue);
        if !self.user_cpids.is_empty() {
            w.open_flat("user_cpids");
            for u in &self.user_cpids {
                u.write(&mut w);
            }
            w.close_flat("user_cpids");
        }
        for e in &self.extra {
            w.raw(e);
        }
        w.close_flat("client_state");
        w.finish()
    }

    /// The project with master URL `url`: exact, else ignoring ASCII case, else as the
    /// official client looks a project up (`http://x/p` finds `https://www.x/p/`: the URL
    /// canonicalized, compared without its scheme and `www.`, ignoring case).
    pub fn project(&self, url: &str) -> Option<&ProjectState> {
        self.project_index(url).map(|i| &self.projects[i])
    }

    /// The project with master URL `url`, for changing it.
    pub fn project_mut(&mut self, url: &str) -> Option<&mut ProjectState> {
        self.project_index(url).map(move |i| &mut self.projects[i])
    }

    fn project_index(&self, url: &str) -> Option<usize> {
        self.projects
            .iter()
            .position(|p| p.project.master_url == url)
            .or_else(|| {
                self.projects
                    .iter()
                    .position(|p| p.project.master_url.eq_ignore_ascii_case(url))
            })
            .or_else(|| {
                let key = url_lookup_key(url);
                self.projects
                    .iter()
                    .position(|p| url_lookup_key(&p.project.master_url) == key)
            })
    }

    /// The active task of result `result_name` in project `url`.
    pub fn active_task(&self, url: &str, result_name: &str) -> Option<&ActiveTask> {
        self.active_tasks
            .iter()
            .find(|a| a.result_name == result_name && a.project_master_url == url)
    }

    /// Orders the projects by name, ignoring ASCII case (C's `strcasecmp`), as the official
    /// client keeps them (`sort_projects_by_name`, after loading the state file and after each
    /// attach): the state file and every GUI RPC reply list projects in this order. A project
    /// with no name yet comes first; equal names keep their order.
    pub fn sort_projects_by_name(&mut self) {
        self.projects.sort_by(|a, b| {
            let key = |p: &ProjectState| {
                p.project
                    .project_name
                    .bytes()
                    .map(|c| c.to_ascii_lowercase())
                    .collect::<Vec<u8>>()
            };
            key(a).cmp(&key(b))
        });
    }

    /// Every result of every project, with its project.
    pub fn results(&self) -> impl Iterator<Item = (&ProjectState, &TaskResult)> {
        self.projects
            .iter()
            .flat_map(|p| p.results.iter().map(move |r| (p, r)))
    }
}

fn run_mode<'a>(r: &mut XmlReader<'a>, t: &Tag<'a>) -> Result<RunMode, XmlError> {
    let Some(n) = r.num::<i32>(t)? else {
        return Ok(RunMode::Auto);
    };
    match RunMode::from_i32(n) {
        Some(m) => Ok(m),
        None => {
            r.warn(t, format!("unknown run mode {n}; 2 (auto) used"));
            Ok(RunMode::Auto)
        }
    }
}
