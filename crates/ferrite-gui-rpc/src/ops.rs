//! The table of GUI RPC operations, as data: which ones a local client may call without
//! authenticating and which ones give the client network access for a while.
//!
//! It mirrors the official client's table (BOINC 7.20, `gui_rpcs[]`). `auth1`, `auth2` and
//! `get_auth_id` are not in it: the session answers them before any table lookup.
//! `report_device_status` is left out as on non-Android builds, so it is an unrecognized op.

/// What the protocol layer needs to know about one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpInfo {
    /// The request tag.
    pub name: &'static str,
    /// Whether a connection that has not authenticated must be refused this op even when it
    /// is local (remote unauthenticated connections are refused every op).
    pub auth_required: bool,
    /// Whether the op lets the daemon use the network for a few minutes even when the network
    /// mode forbids it (the official `ALLOW_NETWORK_IF_RECENT_RPC_PERIOD`, 300 s).
    pub enables_network: bool,
}

const fn op(name: &'static str, auth_required: bool, enables_network: bool) -> OpInfo {
    OpInfo {
        name,
        auth_required,
        enables_network,
    }
}

/// Every operation the server recognises, in the official table's order.
pub const OPS: &[OpInfo] = &[
    // Read-only status, open to local clients without authentication.
    op("exchange_versions", false, false),
    op("get_all_projects_list", false, false),
    op("get_cc_status", false, false),
    op("get_disk_usage", false, false),
    op("get_daily_xfer_history", false, false),
    op("get_file_transfers", false, false),
    op("get_host_info", false, false),
    op("get_messages", false, false),
    op("get_message_count", false, false),
    op("get_newer_version", false, false),
    op("get_notices_public", false, false),
    op("get_old_results", false, false),
    op("get_project_status", false, false),
    op("get_results", false, false),
    op("get_screensaver_tasks", false, false),
    op("get_simple_gui_info", false, false),
    op("get_state", false, false),
    op("get_statistics", false, false),
    // Ferrite's own read-only op: the scheduling core's reasons (`ferrite explain`).
    op("ferrite_explain", false, false),
    // Everything below needs authentication, even locally.
    op("abort_file_transfer", true, false),
    op("abort_result", true, false),
    op("acct_mgr_info", true, false),
    op("get_app_config", true, false),
    op("get_cc_config", true, false),
    op("get_global_prefs_file", true, false),
    op("get_global_prefs_override", true, false),
    op("get_global_prefs_working", true, false),
    op("get_notices", true, false),
    op("get_project_init_status", true, false),
    op("get_proxy_settings", true, false),
    op("network_available", true, false),
    op("project_allowmorework", true, false),
    op("project_detach", true, false),
    op("project_detach_when_done", true, false),
    op("project_dont_detach_when_done", true, false),
    op("project_nomorework", true, false),
    op("project_resume", true, false),
    op("project_suspend", true, false),
    op("quit", true, false),
    op("read_cc_config", true, false),
    op("read_global_prefs_override", true, false),
    op("reset_host_info", true, false),
    op("resume_result", true, false),
    op("run_benchmarks", true, false),
    op("set_app_config", true, false),
    op("set_cc_config", true, false),
    op("set_global_prefs_override", true, false),
    op("set_gpu_mode", true, false),
    op("set_host_info", true, false),
    op("set_language", true, false),
    op("set_network_mode", true, false),
    op("set_proxy_settings", true, false),
    op("set_run_mode", true, false),
    op("suspend_result", true, false),
    // These also open the network for a while.
    op("acct_mgr_rpc", true, true),
    op("acct_mgr_rpc_poll", true, true),
    op("create_account", true, true),
    op("create_account_poll", true, true),
    op("get_project_config", true, true),
    op("get_project_config_poll", true, true),
    op("lookup_account", true, true),
    op("lookup_account_poll", true, true),
    op("project_attach", true, true),
    op("project_attach_poll", true, true),
    op("project_reset", true, true),
    op("project_update", true, true),
    op("retry_file_transfer", true, true),
    // Officially open without authentication; it only ever answers an error off macOS.
    op("run_graphics_app", false, false),
];

/// Looks an op up by its tag name (without a trailing `/`).
pub fn lookup(name: &str) -> Option<&'static OpInfo> {
    OPS.iter().find(|o| o.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_no_duplicates_and_the_documented_size() {
        let mut names: Vec<_> = OPS.iter().map(|o| o.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), OPS.len());
        // 18 open + 35 auth-only + 13 network + run_graphics_app, + Ferrite's explain.
        assert_eq!(OPS.len(), 68);
    }

    #[test]
    fn gating_matches_the_reference() {
        for open in [
            "get_state",
            "get_cc_status",
            "get_messages",
            "run_graphics_app",
        ] {
            assert!(!lookup(open).is_some_and(|o| o.auth_required), "{open}");
        }
        for closed in [
            "quit",
            "set_run_mode",
            "get_notices",
            "get_proxy_settings",
            "get_cc_config",
        ] {
            assert!(lookup(closed).is_some_and(|o| o.auth_required), "{closed}");
        }
        assert!(lookup("project_update").is_some_and(|o| o.enables_network));
        assert!(!lookup("project_suspend").is_some_and(|o| o.enables_network));
        assert_eq!(lookup("report_device_status"), None);
        assert_eq!(lookup("auth1"), None);
    }
}
