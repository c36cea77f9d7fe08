//! The pure parts of GUI RPC's status queries: the constants and helpers the replies are
//! built with (network status, the proxy block, directory sizes). The queries themselves,
//! answered from a shared borrow of the daemon, are `daemon/rpc/status.rs`.

use std::fs;
use std::path::Path;

/// `SUSPEND_REASON_USER_REQ`.
pub(crate) const SUSPEND_USER_REQ: i32 = 4;
/// `CPU_SCHED_SCHEDULED`: the task's app runs.
pub(crate) const SCHEDULED: i32 = 2;
/// `NETWORK_STATUS_ONLINE`.
pub(crate) const NETWORK_ONLINE: i32 = 0;
/// `NETWORK_STATUS_WANT_DISCONNECT`: "don't need connection" (no transfer or RPC pending).
pub(crate) const NETWORK_WANT_DISCONNECT: i32 = 2;

/// `cc_status`'s network status, as the official client's `NET_STATUS::network_status`
/// (without its dial-up states): online while an HTTP exchange is under way or one ended
/// within the last 10 s, otherwise "don't need a connection".
pub(crate) fn network_status(http_in_flight: bool, last_comm: f64, now: f64) -> i32 {
    if http_in_flight || (last_comm > 0.0 && now - last_comm < 10.0) {
        NETWORK_ONLINE
    } else {
        NETWORK_WANT_DISCONNECT
    }
}

/// The default `<proxy_info>` (no proxy), as the official client writes it.
pub(crate) const NO_PROXY: &str = "<proxy_info>
    <socks_server_name></socks_server_name>
    <socks_server_port>80</socks_server_port>
    <http_server_name></http_server_name>
    <http_server_port>80</http_server_port>
    <socks5_user_name></socks5_user_name>
    <socks5_user_passwd></socks5_user_passwd>
    <socks5_remote_dns>0</socks5_remote_dns>
    <http_user_name></http_user_name>
    <http_user_passwd></http_user_passwd>
    <no_proxy></no_proxy>
    <no_autodetect>0</no_autodetect>
</proxy_info>
";

/// Bytes used by the files under `path` (0 if it does not exist).
pub(crate) fn dir_size(path: &Path) -> f64 {
    let Ok(entries) = fs::read_dir(path) else {
        return 0.0;
    };
    let mut total = 0.0;
    for e in entries.flatten() {
        let Ok(ty) = e.file_type() else { continue };
        if ty.is_dir() {
            total += dir_size(&e.path());
        } else if ty.is_file() {
            total += e.metadata().map(|m| m.len() as f64).unwrap_or(0.0);
        }
    }
    total
}

pub(crate) fn read_text(path: &Path) -> Option<String> {
    fs::read(path)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::state_reply::resources_string;
    use ferrite_proto::client_state::{CoprocUsage, ResourceUsage};

    #[test]
    fn the_network_is_online_during_and_just_after_http_exchanges() {
        assert_eq!(network_status(true, 0.0, 100.0), NETWORK_ONLINE);
        assert_eq!(network_status(false, 95.0, 100.0), NETWORK_ONLINE);
        assert_eq!(network_status(false, 85.0, 100.0), NETWORK_WANT_DISCONNECT);
        assert_eq!(network_status(false, 0.0, 5.0), NETWORK_WANT_DISCONNECT);
    }

    #[test]
    fn resources_are_described_as_officially() {
        let usage = |n: f64, gpu: Option<(&str, f64)>| ResourceUsage {
            avg_ncpus: n,
            coprocs: gpu
                .map(|(t, c)| CoprocUsage {
                    rsc_type: t.into(),
                    count: c,
                })
                .into_iter()
                .collect(),
            ..ResourceUsage::default()
        };
        assert_eq!(resources_string(&usage(1.0, None)), None);
        assert_eq!(resources_string(&usage(0.0, None)), None);
        assert_eq!(
            resources_string(&usage(0.5, None)).as_deref(),
            Some("0.5 CPUs")
        );
        assert_eq!(
            resources_string(&usage(4.0, None)).as_deref(),
            Some("4 CPUs")
        );
        assert_eq!(
            resources_string(&usage(0.123456, Some(("NVIDIA", 1.0)))).as_deref(),
            Some("0.123 CPUs + 1 NVIDIA GPU")
        );
        assert_eq!(
            resources_string(&usage(1.0, Some(("ATI", 0.5)))).as_deref(),
            Some("1 CPU + 0.5 AMD/ATI GPUs")
        );
    }
}
