//! The anonymous platform: each project's `projects/<project>/app_info.xml`, read at start-up,
//! when a project is attached and whenever the configuration is read again (`read_cc_config`,
//! SIGHUP). The decisions are `ferrite_project::anonymous`; this module reads the file and
//! the sizes of the files it lists, and says what happened in the event log. At the same
//! points, app versions that `dont_use_vbox`/`dont_use_docker` rule out are dropped.

use std::fs;
use std::path::Path;

use ferrite_proto::app_info::{is_skipped_element, AppInfo};
use ferrite_proto::cc_config::CcOptions;
use ferrite_proto::client_state::{ClientState, ProjectState};
use tracing::{info, warn};

use crate::config;
use crate::messages::NOTICE_TARGET;

/// The file's name in a project directory.
pub const APP_INFO: &str = "app_info.xml";

/// Reads `app_info.xml` of every project of `state` (data directory `dir`), then drops the
/// app versions that `cc_config.xml` options rule out (`cc`: `dont_use_vbox`,
/// `dont_use_docker`). Returns true when the state changed.
pub fn load_all(dir: &Path, state: &mut ClientState, cc: &CcOptions) -> bool {
    let platform = state.platform_name.clone();
    let mut changed = false;
    for ps in &mut state.projects {
        changed |= load(dir, ps, &platform);
        let dropped =
            ferrite_project::disallowed::drop_disallowed(ps, cc.dont_use_vbox, cc.dont_use_docker);
        for line in &dropped {
            info!(project = %ps.project.master_url, "{line}");
        }
        changed |= !dropped.is_empty();
    }
    changed
}

/// Reads `app_info.xml` of project `ps`, if it has one, and applies it; a project whose file
/// is gone uses the project's apps again. A file that cannot be read as XML leaves the
/// project's state as it is (the versions of the last good reading stay, as they are in
/// the state file), flagged anonymous as the official client flags it. Returns true when
/// the state changed.
pub fn load(dir: &Path, ps: &mut ProjectState, primary_platform: &str) -> bool {
    let url = ps.project.master_url.clone();
    let pdir = config::project_dir(dir, &url);
    let path = pdir.join(APP_INFO);
    let text = match fs::read(&path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !ps.project.anonymous_platform {
                return false;
            }
            let dropped = ferrite_project::anonymous::leave_anonymous(ps);
            info!(
                project = %url,
                "{APP_INFO} is gone: the project's own apps are used again ({dropped} local \
                 app version(s) dropped)"
            );
            return true;
        }
        Err(e) => {
            warn!(target: NOTICE_TARGET, project = %url, "cannot read {}: {e}; the project's apps are left as they were", path.display());
            return false;
        }
    };
    let before = ps.clone();
    info!(project = %url, "Found {APP_INFO}; using anonymous platform");
    let name = path.display().to_string();
    match AppInfo::parse(&text, &name) {
        Err(e) => {
            ps.project.anonymous_platform = true;
            warn!(
                target: NOTICE_TARGET,
                project = %url,
                "Syntax error in {APP_INFO}: {e}. The project's apps, files and tasks are left \
                 as they were; fix the file and read the configuration again"
            );
        }
        Ok(parsed) => {
            for w in &parsed.warnings {
                if is_skipped_element(w) {
                    warn!(target: NOTICE_TARGET, project = %url, "{w}");
                } else {
                    info!(project = %url, "{w}");
                }
            }
            let mut size_of = |n: &str| {
                fs::metadata(pdir.join(n))
                    .ok()
                    .filter(|m| m.is_file())
                    .map(|m| m.len())
            };
            let problems = ferrite_project::anonymous::apply_app_info(
                ps,
                &parsed.value,
                primary_platform,
                &mut size_of,
            );
            for p in problems {
                warn!(target: NOTICE_TARGET, project = %url, "{p}");
            }
            let versions: Vec<String> = ps
                .app_versions
                .iter()
                .map(|v| {
                    if v.plan_class.is_empty() {
                        format!("{} {}", v.app_name, v.version_num)
                    } else {
                        format!("{} {} ({})", v.app_name, v.version_num, v.plan_class)
                    }
                })
                .collect();
            info!(
                project = %url,
                "{APP_INFO}: {} app(s), {} file(s), app versions: {}",
                ps.apps.len(),
                ps.files
                    .iter()
                    .filter(|f| ferrite_project::anonymous::is_local_file(f))
                    .count(),
                if versions.is_empty() {
                    "none".to_owned()
                } else {
                    versions.join(", ")
                }
            );
            let stuck = ferrite_project::anonymous::tasks_without_version(ps);
            if !stuck.is_empty() {
                warn!(
                    project = %url,
                    "{} task(s) have no app version in {APP_INFO} and cannot run: {}",
                    stuck.len(),
                    stuck.join(", ")
                );
            }
        }
    }
    *ps != before
}
