//! Configuration files of the data directory, and the changes to it that the command line
//! asks for (attach, detach).
//!
//! `cc_config.xml`, `global_prefs.xml` + `global_prefs_override.xml` (merged into the working
//! preferences) and each project's `app_config.xml` are read at start-up and again on SIGHUP.
//! A missing file means defaults; a file that is not XML is reported and its defaults used,
//! never fatal.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use ferrite_hostinfo::{GpuConfig, HostDetector, HostProbeConfig, UserCoproc};
use ferrite_proto::account::{
    account_file_name, canonicalize_master_url, escape_project_url, AccountFile,
};
use ferrite_proto::app_config::AppConfig;
use ferrite_proto::cc_config::{CcConfig, CcOptions, LogFlags, ProxyInfo};
use ferrite_proto::client_state::{ClientState, Project, ProjectState, ResultState, RpcReason};
use ferrite_proto::prefs::{working_prefs, NetworkPrefsStatus, OverrideStatus, WorkingPrefs};
use ferrite_proto::xml::Warning;

use crate::cli::Options;

/// `cc_config.xml`.
pub const CC_CONFIG: &str = "cc_config.xml";
/// Network (project-supplied) global preferences.
pub const GLOBAL_PREFS: &str = "global_prefs.xml";
/// Local overrides of the global preferences.
pub const GLOBAL_PREFS_OVERRIDE: &str = "global_prefs_override.xml";
/// Per-project app configuration, in the project directory.
pub const APP_CONFIG: &str = "app_config.xml";

/// Everything configurable, as read from the data directory.
#[derive(Debug, Clone)]
pub struct Config {
    /// `cc_config.xml` (defaults when missing or unusable).
    pub cc: CcConfig,
    /// The working preferences and how they were obtained.
    pub prefs: WorkingPrefs,
    /// `app_config.xml` of each project that has one, by master URL.
    pub app_configs: BTreeMap<String, AppConfig>,
    /// Resources the volunteer switched off in each project's web preferences ("use CPU",
    /// "use NVIDIA GPU"), from the account files, by master URL.
    pub no_rsc_prefs: BTreeMap<String, Vec<String>>,
}

/// What reading the configuration found worth saying.
#[derive(Debug, Default)]
pub struct ConfigReport {
    /// Survivable oddities, with file and line.
    pub warnings: Vec<Warning>,
    /// Files that could not be used at all (their defaults apply).
    pub errors: Vec<String>,
}

fn read_optional(path: &Path) -> Result<Option<String>, String> {
    match fs::read(path) {
        Ok(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The `<gui_urls>` a project sent (kept in its account file), for GUIs; `None` when it sent
/// none or the file is missing or unreadable.
pub fn account_gui_urls(dir: &Path, url: &str) -> Option<String> {
    let name = account_file_name(url);
    let text = fs::read_to_string(dir.join(&name)).ok()?;
    AccountFile::parse(&text, &name).ok()?.value.gui_urls
}

/// The resources a project's web preferences (in its account file) switch off for this
/// host's venue; `None` when the file is missing or unreadable.
pub fn account_no_rsc(dir: &Path, url: &str, host_venue: &str) -> Option<Vec<String>> {
    let name = account_file_name(url);
    let text = fs::read_to_string(dir.join(&name)).ok()?;
    let account = AccountFile::parse(&text, &name).ok()?.value;
    Some(account.prefs(host_venue).no_rsc)
}

impl Config {
    /// Defaults everywhere, as if no configuration file existed.
    pub fn empty() -> Config {
        Config {
            cc: CcConfig::default(),
            prefs: working_prefs(None, None, "", &|_| None, 0.0),
            app_configs: BTreeMap::new(),
            no_rsc_prefs: BTreeMap::new(),
        }
    }

    /// Reads the configuration of data directory `dir` for the projects of `state`.
    pub fn load(dir: &Path, state: &ClientState, now: f64) -> (Config, ConfigReport) {
        let mut report = ConfigReport::default();

        let cc = match read_optional(&dir.join(CC_CONFIG)) {
            Ok(Some(text)) => match CcConfig::parse(&text, CC_CONFIG) {
                Ok(p) => {
                    report.warnings.extend(p.warnings);
                    p.value
                }
                Err(e) => {
                    report.errors.push(format!("{e}; using default options"));
                    CcConfig::default()
                }
            },
            Ok(None) => CcConfig::default(),
            Err(e) => {
                report.errors.push(e);
                CcConfig::default()
            }
        };

        let mut texts = [None, None];
        for (slot, name) in texts.iter_mut().zip([GLOBAL_PREFS, GLOBAL_PREFS_OVERRIDE]) {
            match read_optional(&dir.join(name)) {
                Ok(t) => *slot = t,
                Err(e) => report.errors.push(e),
            }
        }
        let venue_of = |url: &str| {
            state
                .project(url)
                .map(|p| p.project.host_venue.clone())
                .filter(|v| !v.is_empty())
        };
        let prefs = working_prefs(
            texts[0].as_deref(),
            texts[1].as_deref(),
            &state.host_venue,
            &venue_of,
            now,
        );
        report.warnings.extend(prefs.warnings.iter().cloned());
        if let NetworkPrefsStatus::Unparsable(e) = &prefs.network {
            report
                .errors
                .push(format!("{e}; using default preferences"));
        }
        if let OverrideStatus::Unparsable(e) = &prefs.override_file {
            report.errors.push(format!("{e}; override ignored"));
        }

        let mut app_configs = BTreeMap::new();
        for p in &state.projects {
            let url = &p.project.master_url;
            let path = project_dir(dir, url).join(APP_CONFIG);
            match read_optional(&path) {
                Ok(Some(text)) => {
                    let name = format!("projects/{}/{APP_CONFIG}", escape_project_url(url));
                    match AppConfig::parse(&text, &name) {
                        Ok(parsed) => {
                            report.warnings.extend(parsed.warnings);
                            app_configs.insert(url.clone(), parsed.value);
                        }
                        Err(e) => report.errors.push(format!("{e}; ignored")),
                    }
                }
                Ok(None) => {}
                Err(e) => report.errors.push(e),
            }
        }
        let mut no_rsc_prefs = BTreeMap::new();
        for p in &state.projects {
            let url = &p.project.master_url;
            if let Some(no_rsc) = account_no_rsc(dir, url, &p.project.host_venue) {
                no_rsc_prefs.insert(url.clone(), no_rsc);
            }
        }
        (
            Config {
                cc,
                prefs,
                app_configs,
                no_rsc_prefs,
            },
            report,
        )
    }

    /// The log filter the `cc_config.xml` log flags ask for.
    pub fn log_directives(&self) -> String {
        let flags = &self.cc.log_flags;
        crate::logging::directives(
            LogFlags::NAMES
                .iter()
                .map(|name| (*name, flags.get(name).unwrap_or(false))),
        )
    }

    /// The GPU options for host detection.
    pub fn gpu_config(&self, opts: &Options) -> GpuConfig {
        gpu_config(&self.cc, opts)
    }
}

fn gpu_config(cc: &CcConfig, opts: &Options) -> GpuConfig {
    let o = &cc.options;
    GpuConfig {
        no_gpus: o.no_gpus || opts.no_gpus,
        ignore_nvidia_dev: o
            .ignore_nvidia_dev
            .iter()
            .filter_map(|&d| u32::try_from(d).ok())
            .collect(),
        ignore_ati_dev: o
            .ignore_ati_dev
            .iter()
            .filter_map(|&d| u32::try_from(d).ok())
            .collect(),
        ignore_intel_dev: o
            .ignore_intel_dev
            .iter()
            .filter_map(|&d| u32::try_from(d).ok())
            .collect(),
        no_opencl: o.no_opencl,
        use_all_gpus: o.use_all_gpus,
        user_coprocs: o
            .coprocs
            .iter()
            .map(|c| UserCoproc {
                rsc_type: c.rsc_type.clone(),
                count: u32::try_from(c.count).unwrap_or(0),
                peak_flops: c.peak_flops,
                device_nums: c
                    .device_nums
                    .iter()
                    .filter_map(|&d| u32::try_from(d).ok())
                    .collect(),
            })
            .collect(),
    }
}

/// The project directory of `master_url`.
pub fn project_dir(dir: &Path, master_url: &str) -> PathBuf {
    dir.join("projects").join(escape_project_url(master_url))
}

/// Writes `text` to `path` through a temporary file and a rename, as BOINC does for small
/// files, so a crash leaves either the old or the new file.
///
/// A path that is a symbolic link (the Debian package links `/var/lib/ferrite/cc_config.xml`
/// to `/etc/ferrite/`) is written in place through the link, as the official client does, so
/// the link survives and the file in `/etc` stays the one in force.
pub fn write_atomic(path: &Path, text: &str) -> io::Result<()> {
    if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(path)?;
        f.write_all(text.as_bytes())?;
        return f.sync_all();
    }
    write_atomic_with(path, |f| {
        f.write_all(text.as_bytes())?;
        f.sync_all()
    })
}

/// [`write_atomic`]'s temporary-file path: `write` fills `NAME.tmp`, which then replaces
/// `path`. When writing or the rename fails (a full disk), `NAME.tmp` is removed: the old
/// file stays as it was and nothing half-written is left beside it.
fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut fs::File) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let result = fs::File::create(&tmp)
        .and_then(|mut f| write(&mut f))
        .and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Attaches to a project the way the official client's `--attach_project` does: writes the
/// account file and adds the project, whose master page and first scheduler RPC are pending.
pub fn attach_project(
    dir: &Path,
    state: &mut ClientState,
    url: &str,
    authenticator: &str,
) -> anyhow::Result<()> {
    let raw = url.trim();
    let scheme_ok = match raw.find("://") {
        Some(i) => raw[..i].eq_ignore_ascii_case("http") || raw[..i].eq_ignore_ascii_case("https"),
        None => true,
    };
    if !scheme_ok || raw.len() <= raw.find("://").map_or(0, |i| i + 3) {
        anyhow::bail!("'{raw}' is not a project URL (http:// or https://)");
    }
    let url = canonicalize_master_url(raw);
    if authenticator.trim().is_empty() {
        anyhow::bail!("the account key is empty");
    }
    if state.project(&url).is_some() {
        anyhow::bail!("already attached to {url}");
    }
    let account = AccountFile {
        master_url: url.clone(),
        authenticator: authenticator.trim().to_owned(),
        ..AccountFile::default()
    };
    write_atomic(&dir.join(account_file_name(&url)), &account.to_xml())?;
    fs::create_dir_all(project_dir(dir, &url))?;
    state.projects.push(ProjectState {
        project: Project {
            master_url: url,
            resource_share: 100.0,
            master_url_fetch_pending: true,
            sched_rpc_pending: Some(RpcReason::Init),
            ..Project::default()
        },
        ..ProjectState::default()
    });
    // The official client keeps its projects in name order (the new one has none yet).
    state.sort_projects_by_name();
    Ok(())
}

/// Detaches from a project: removes it, its tasks and its files from the state and its
/// account file, statistics and project directory from disk. Returns false when not attached.
pub fn detach_project(dir: &Path, state: &mut ClientState, url: &str) -> io::Result<bool> {
    let url = canonicalize_master_url(url);
    let Some(pos) = state
        .projects
        .iter()
        .position(|p| canonicalize_master_url(&p.project.master_url) == url)
    else {
        return Ok(false);
    };
    let removed = state.projects.remove(pos);
    let master = removed.project.master_url;
    state
        .active_tasks
        .retain(|t| t.project_master_url != master);
    let esc = escape_project_url(&master);
    for name in [
        account_file_name(&master),
        format!("statistics_{esc}.xml"),
        format!("sched_request_{esc}.xml"),
        format!("sched_reply_{esc}.xml"),
        format!("master_{esc}.xml"),
        format!("job_log_{esc}.txt"),
    ] {
        match fs::remove_file(dir.join(name)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    match fs::remove_dir_all(project_dir(dir, &master)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    Ok(true)
}

/// The projects of the data directory's account files (`account_*.xml`), as the official
/// client reads them at start-up (`client/cs_account.cpp: parse_account_files`): each one
/// attached, with no tasks, its master page and first scheduler RPC pending. Those the state
/// file lacks are attached at start-up. Also returns, for each account file that could not be used,
/// its name and why.
pub fn projects_from_account_files(dir: &Path) -> (Vec<ProjectState>, Vec<(String, String)>) {
    let mut projects: Vec<ProjectState> = Vec::new();
    let mut problems = Vec::new();
    let mut names: Vec<String> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("account_") && n.ends_with(".xml"))
            .collect(),
        Err(e) => {
            problems.push((dir.display().to_string(), e.to_string()));
            return (projects, problems);
        }
    };
    names.sort();
    for name in names {
        let account = match read_optional(&dir.join(&name)) {
            Ok(Some(text)) => match AccountFile::parse(&text, &name) {
                Ok(parsed) => parsed.value,
                Err(e) => {
                    problems.push((name, e.to_string()));
                    continue;
                }
            },
            Ok(None) => continue,
            Err(e) => {
                problems.push((name, e));
                continue;
            }
        };
        if account.authenticator.trim().is_empty() {
            problems.push((name, "it has no account key".to_owned()));
            continue;
        }
        let url = account.master_url.clone();
        if projects.iter().any(|p| p.project.master_url == url) {
            continue;
        }
        projects.push(ProjectState {
            project: Project {
                master_url: url,
                project_name: account.project_name.clone(),
                resource_share: account.prefs("").resource_share.unwrap_or(100.0),
                master_url_fetch_pending: true,
                sched_rpc_pending: Some(RpcReason::Init),
                ..Project::default()
            },
            ..ProjectState::default()
        });
    }
    (projects, problems)
}

/// Projects whose account file is missing, by master URL. The official client drops such
/// projects with all their tasks; Ferrite keeps them and says so.
pub fn projects_without_account(dir: &Path, state: &ClientState) -> Vec<String> {
    state
        .projects
        .iter()
        .map(|p| &p.project.master_url)
        .filter(|url| !dir.join(account_file_name(url)).exists())
        .cloned()
        .collect()
}

/// Lines describing a loaded state for the log: projects with their apps and tasks.
pub fn summary(state: &ClientState) -> Vec<String> {
    let ntasks: usize = state.projects.iter().map(|p| p.results.len()).sum();
    let mut lines = vec![format!(
        "state: {} project{}, {} tasks ({} running when saved)",
        state.projects.len(),
        if state.projects.len() == 1 { "" } else { "s" },
        ntasks,
        state.active_tasks.len()
    )];
    for p in &state.projects {
        let name = p.project.name_or_url();
        let mut by_state: BTreeMap<&'static str, usize> = BTreeMap::new();
        for r in &p.results {
            *by_state.entry(result_state_name(r.state)).or_default() += 1;
        }
        let states: Vec<String> = by_state.iter().map(|(s, n)| format!("{n} {s}")).collect();
        let apps: Vec<&str> = p.apps.iter().map(|a| a.name.as_str()).collect();
        lines.push(format!(
            "project {name} ({}): apps [{}], {} app versions, {} tasks{}{}",
            p.project.master_url,
            apps.join(", "),
            p.app_versions.len(),
            p.results.len(),
            if states.is_empty() {
                String::new()
            } else {
                format!(" ({})", states.join(", "))
            },
            if p.project.suspended_via_gui {
                ", suspended"
            } else {
                ""
            }
        ));
    }
    lines
}

fn result_state_name(s: ResultState) -> &'static str {
    match s {
        ResultState::New => "new",
        ResultState::FilesDownloading => "downloading",
        ResultState::FilesDownloaded => "ready to run",
        ResultState::ComputeError => "computation error",
        ResultState::FilesUploading => "uploading",
        ResultState::FilesUploaded => "ready to report",
        ResultState::Aborted => "aborted",
        ResultState::UploadFailed => "upload failed",
    }
}

/// The `--detect_gpus` report for this machine.
pub fn detect_report(opts: &Options) -> anyhow::Result<String> {
    let dir = opts.data_dir();
    let cc = match fs::read_to_string(dir.join(CC_CONFIG)) {
        Ok(text) => CcConfig::parse(&text, CC_CONFIG)
            .map(|p| p.value)
            .unwrap_or_default(),
        Err(_) => CcConfig::default(),
    };
    let mut probe = HostProbeConfig::new(&dir);
    probe.gpu = gpu_config(&cc, opts);
    let det = HostDetector::new(probe);
    let found = det.detect_host();
    let gpus = det.probe_gpus();
    Ok(ferrite_hostinfo::detect_gpus_report(&found, &gpus))
}

/// The account file of `url` (`None`, after a warning when it is damaged, if it cannot be
/// read).
pub fn read_account(dir: &Path, url: &str) -> Option<AccountFile> {
    let name = account_file_name(url);
    let text = fs::read_to_string(dir.join(&name)).ok()?;
    match AccountFile::parse(&text, &name) {
        Ok(p) => Some(p.value),
        Err(e) => {
            tracing::warn!("{e}");
            None
        }
    }
}

/// The proxy a GUI set (`set_proxy_settings`, kept in the state file), if any.
pub fn gui_proxy(state: &ClientState) -> Result<Option<ProxyInfo>, String> {
    let Some(text) = state.proxy_info.as_deref() else {
        return Ok(None);
    };
    ferrite_proto::xml::parse_document(text, "client_state.xml", "proxy_info", |r, t| {
        ProxyInfo::read(r, t)
    })
    .map(|p| Some(p.value))
    .map_err(|e| e.to_string())
}

/// The proxy in force, chosen as the official client chooses it (`select_proxy_info`): the
/// one a GUI set, else `cc_config.xml`'s (each only when it names a server). HTTP goes
/// through it and apps are told of it in `init_data.xml`.
pub fn working_proxy(state: &ClientState, cc: &CcOptions) -> Option<ProxyInfo> {
    gui_proxy(state)
        .ok()
        .flatten()
        .filter(ProxyInfo::present)
        .or_else(|| cc.proxy_info.as_ref().filter(|p| p.present()).cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_a_gui_set_wins_over_cc_config() {
        let cc_proxy = ProxyInfo {
            use_http_proxy: true,
            http_server_name: "cc.example".into(),
            ..ProxyInfo::default()
        };
        let cc = CcOptions {
            proxy_info: Some(cc_proxy),
            ..CcOptions::default()
        };
        let mut state = ClientState::default();
        let name = |p: Option<ProxyInfo>| p.map(|p| p.http_server_name);
        assert_eq!(
            name(working_proxy(&state, &cc)).as_deref(),
            Some("cc.example")
        );
        state.proxy_info = Some(
            "<proxy_info>\n<use_http_proxy/>\n<http_server_name>gui.example</http_server_name>\n\
             </proxy_info>"
                .into(),
        );
        assert_eq!(
            name(working_proxy(&state, &cc)).as_deref(),
            Some("gui.example")
        );
        // A GUI proxy naming no server leaves cc_config's in force.
        state.proxy_info = Some("<proxy_info>\n</proxy_info>".into());
        assert_eq!(
            name(working_proxy(&state, &cc)).as_deref(),
            Some("cc.example")
        );
        assert_eq!(working_proxy(&state, &CcOptions::default()), None);
    }

    #[test]
    fn attach_writes_account_file_and_detach_removes_everything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut state = ClientState::default();
        attach_project(dir.path(), &mut state, "HTTP://Example.org/proj", "abc").expect("attach");
        let url = state.projects[0].project.master_url.clone();
        assert_eq!(url, "http://example.org/proj/");
        assert!(state.projects[0].project.master_url_fetch_pending);
        let acct = dir.path().join(account_file_name(&url));
        let text = fs::read_to_string(&acct).expect("account file");
        let parsed = AccountFile::parse(&text, "a").expect("parses").value;
        assert_eq!(
            (parsed.master_url.as_str(), parsed.authenticator.as_str()),
            (url.as_str(), "abc")
        );
        assert!(project_dir(dir.path(), &url).is_dir());
        assert!(
            attach_project(dir.path(), &mut state, &url, "abc").is_err(),
            "twice"
        );
        assert!(attach_project(dir.path(), &mut state, "ftp://x/", "k").is_err());

        assert!(detach_project(dir.path(), &mut state, "http://example.org/proj").expect("detach"));
        assert!(state.projects.is_empty());
        assert!(!acct.exists());
        assert!(!project_dir(dir.path(), &url).exists());
        assert!(!detach_project(dir.path(), &mut state, &url).expect("detach again"));
    }

    #[test]
    fn account_files_give_the_attached_projects_without_tasks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut state = ClientState::default();
        attach_project(dir.path(), &mut state, "http://a.example/p", "key-a").expect("a");
        let b = AccountFile {
            master_url: "http://b.example/q/".to_owned(),
            authenticator: "key-b".to_owned(),
            project_name: "Project B".to_owned(),
            project_prefs: "<resource_share>250</resource_share>\n".to_owned(),
            gui_urls: None,
        };
        fs::write(
            dir.path().join(account_file_name(&b.master_url)),
            b.to_xml(),
        )
        .expect("b");
        fs::write(dir.path().join("account_broken.xml"), "<account>\n<authent").expect("w");
        fs::write(
            dir.path().join("account_nokey.xml"),
            "<account>\n<master_url>http://c.example/</master_url>\n</account>\n",
        )
        .expect("w");
        fs::write(dir.path().join("statistics_a.example_p.xml"), "<x/>").expect("w");

        let (projects, problems) = projects_from_account_files(dir.path());
        let got: Vec<(&str, &str, f64, bool, Option<RpcReason>)> = projects
            .iter()
            .map(|p| {
                (
                    p.project.master_url.as_str(),
                    p.project.project_name.as_str(),
                    p.project.resource_share,
                    p.project.master_url_fetch_pending,
                    p.project.sched_rpc_pending,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "http://a.example/p/",
                    "",
                    100.0,
                    true,
                    Some(RpcReason::Init)
                ),
                (
                    "http://b.example/q/",
                    "Project B",
                    250.0,
                    true,
                    Some(RpcReason::Init)
                ),
            ]
        );
        assert!(projects
            .iter()
            .all(|p| p.results.is_empty() && p.files.is_empty()));
        let bad: Vec<&str> = problems.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(bad, vec!["account_broken.xml", "account_nokey.xml"]);
    }

    #[test]
    fn broken_files_fall_back_to_defaults_with_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(CC_CONFIG), "<cc_config><options>").expect("w");
        fs::write(
            dir.path().join(GLOBAL_PREFS_OVERRIDE),
            "<global_preferences><work_buf_min_days>lots</work_buf_min_days><max_ncpus_pct>250</max_ncpus_pct></global_preferences>",
        )
        .expect("w");
        let (cfg, report) = Config::load(dir.path(), &ClientState::default(), 1e9);
        assert_eq!(cfg.cc, CcConfig::default());
        assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
        assert!(
            report.errors[0].contains("cc_config.xml"),
            "{:?}",
            report.errors
        );
        assert!(report
            .warnings
            .iter()
            .any(|w| w.element == "work_buf_min_days"));
        assert!(report.warnings.iter().any(|w| w.element == "max_ncpus_pct"));
        assert_eq!(cfg.prefs.prefs.max_ncpus_pct, 100.0);
    }

    #[test]
    fn log_flags_become_directives() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(
            dir.path().join(CC_CONFIG),
            "<cc_config><log_flags><task>0</task><work_fetch_debug>1</work_fetch_debug></log_flags></cc_config>",
        )
        .expect("w");
        let (cfg, _) = Config::load(dir.path(), &ClientState::default(), 1e9);
        let d = cfg.log_directives();
        assert!(d.contains("ferrite::task=warn"), "{d}");
        assert!(d.contains("ferrite::work_fetch_debug=debug"), "{d}");
    }
}

#[cfg(test)]
mod write_tests {
    use super::*;

    #[test]
    fn a_linked_file_is_written_through_its_link() {
        let d = tempfile::tempdir().expect("tmp");
        let etc = d.path().join("etc.xml");
        fs::write(&etc, "old").expect("write");
        let link = d.path().join("cc_config.xml");
        std::os::unix::fs::symlink(&etc, &link).expect("link");
        write_atomic(&link, "new").expect("write through");
        assert!(fs::symlink_metadata(&link)
            .expect("meta")
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&etc).expect("read"), "new");
        let plain = d.path().join("plain.xml");
        write_atomic(&plain, "x").expect("write");
        assert_eq!(fs::read_to_string(&plain).expect("read"), "x");
    }

    /// A disk that fills up half-way through the write: the error comes back, the old file
    /// is untouched and no `NAME.tmp` stays behind.
    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary_file() {
        let d = tempfile::tempdir().expect("tmp");
        let path = d.path().join("global_prefs_override.xml");
        fs::write(&path, "old").expect("write");
        let r = write_atomic_with(&path, |f| {
            f.write_all(b"half of the new")?;
            Err(io::Error::from_raw_os_error(28)) // ENOSPC
        });
        assert_eq!(r.expect_err("fails").raw_os_error(), Some(28));
        assert_eq!(fs::read_to_string(&path).expect("read"), "old");
        assert!(!d.path().join("global_prefs_override.tmp").exists());
        assert_eq!(fs::read_dir(d.path()).expect("dir").count(), 1);
    }

    /// The rename fails (the name is taken by a directory): no `NAME.tmp` stays behind.
    #[test]
    fn a_failed_rename_leaves_no_temporary_file() {
        let d = tempfile::tempdir().expect("tmp");
        let path = d.path().join("taken.xml");
        fs::create_dir(&path).expect("dir");
        fs::write(path.join("inside"), "x").expect("write");
        assert!(write_atomic(&path, "new").is_err());
        assert!(!d.path().join("taken.tmp").exists());
        assert!(path.join("inside").exists());
    }
}
