//! Start-up and configuration, the parts that need no `Daemon`: warnings logged once, the
//! projects named by account files, the command-line options that add to `cc_config.xml`,
//! the configuration errors' notices, the protocol version. The start-up and SIGHUP steps
//! that borrow several parts are in `daemon/setup.rs`.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use ferrite_proto::cc_config::CcOptions;
use ferrite_proto::client_state::ClientState;
use ferrite_proto::xml::Warning;
use tracing::{error, info, warn};

use crate::cli::Options;
use crate::config;

/// The warnings already logged (file, element, message), so each kind is logged once.
pub(crate) type Warned = HashSet<(Arc<str>, String, String)>;

/// Logs each warning not logged before, and records it in `warned`.
pub(crate) fn log_new_warnings(warned: &mut Warned, warnings: impl IntoIterator<Item = Warning>) {
    for w in warnings {
        let key = (w.file.clone(), w.element.clone(), w.message.clone());
        if warned.insert(key) {
            // The official client makes notices of what it cannot use in an
            // app_config.xml; other documents' oddities are only logged (a cc_config.xml
            // that parses to its end has its notices withdrawn at once).
            if w.file.ends_with("app_config.xml") {
                warn!(target: crate::messages::NOTICE_TARGET, "{w}");
            } else {
                warn!("{w}");
            }
        }
    }
}

/// As the official client: every account file (`account_*.xml`) in `dir` names an attached
/// project, whether or not the state file knows it (a volunteer may bring account files
/// from another host, and a lost state file leaves only them). Projects of the account
/// files that `state` lacks are attached with no tasks; `lost_state` says the state file
/// was damaged, so their tasks were lost with it.
pub(crate) fn attach_account_file_projects(dir: &Path, state: &mut ClientState, lost_state: bool) {
    let (projects, problems) = config::projects_from_account_files(dir);
    for (name, why) in problems {
        warn!("account file {name} not used: {why}");
    }
    for ps in projects {
        let url = ps.project.master_url.clone();
        if state
            .projects
            .iter()
            .any(|p| ferrite_proto::account::canonicalize_master_url(&p.project.master_url) == url)
        {
            continue;
        }
        if lost_state {
            warn!(
                project = %url,
                "project {url} kept attached from its account file; its tasks were lost \
                 with the state file"
            );
        } else {
            info!(project = %url, "project {url} attached from its account file");
        }
        state.projects.push(ps);
    }
}

/// Command-line options that mirror `cc_config.xml` options add to them.
pub(crate) fn add_command_line_options(o: &Options, c: &mut CcOptions) {
    c.unsigned_apps_ok |= o.unsigned_apps_ok;
    c.no_info_fetch |= o.no_info_fetch;
    c.suppress_net_info |= o.suppress_net_info;
    c.exit_before_start |= o.exit_before_start;
    c.allow_multiple_clients |= o.allow_multiple_clients;
    if let Some(d) = o.start_delay {
        c.start_delay = d;
    }
}

/// Says the configuration's errors: those about `cc_config.xml` or an `app_config.xml` as
/// notices, the others in the log; without an error about `cc_config.xml`, its earlier
/// notices are withdrawn.
pub(crate) fn report_config_errors(errors: Vec<String>) {
    if !errors.iter().any(|e| e.contains("cc_config.xml")) {
        crate::messages::MessageLog::global().remove_notices_mentioning("cc_config.xml");
    }
    for e in errors {
        if is_config_file(&e) {
            warn!(target: crate::messages::NOTICE_TARGET, "{e}");
        } else {
            error!("{e}");
        }
    }
}

/// Whether a configuration report is about `cc_config.xml` or an `app_config.xml` (the
/// official client's notices name those files).
pub(crate) fn is_config_file(what: &str) -> bool {
    what.contains("cc_config.xml") || what.contains("app_config.xml")
}

/// Records the BOINC version Ferrite reports ([`ferrite_proto::version::PROTOCOL_VERSION`]) in
/// the state, so every request, upload and app sees it; a data directory last used by
/// another version is said in the log, as the official client does.
pub(crate) fn adopt_protocol_version(state: &mut ClientState) {
    let ours = ferrite_proto::version::PROTOCOL_VERSION;
    let old = state.core_client_version;
    if old != ours && old != ferrite_proto::client_state::ClientVersion::default() {
        info!("Version change ({old} -> {ours})");
    }
    state.core_client_version = ours;
}
