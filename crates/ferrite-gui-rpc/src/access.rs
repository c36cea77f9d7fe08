//! Who may connect over TCP: loopback always, remote hosts only when allowed, and then only
//! those listed in `remote_hosts.cfg` (unless remote access is open to all).
//!
//! The file holds one host name or IP address per line; blank lines and lines starting with
//! `#` or `;` are ignored. Like the official client, the list is reread and re-resolved for
//! every non-local connection, so edits take effect without a restart.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// The file's name in the data directory.
pub const REMOTE_HOSTS_FILE: &str = "remote_hosts.cfg";

/// The host entries of a `remote_hosts.cfg` text.
pub fn parse_remote_hosts(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
        .map(str::to_owned)
        .collect()
}

/// Whether the peer counts as this machine: exactly 127.0.0.1 (also IPv4-mapped) or ::1,
/// as the official client's `is_localhost` (`lib/network.cpp`). The rest of 127.0.0.0/8
/// is treated as a remote host: it gets no unauthenticated reads.
pub fn is_local(peer: IpAddr) -> bool {
    match peer {
        IpAddr::V4(v4) => v4 == Ipv4Addr::LOCALHOST,
        IpAddr::V6(v6) => {
            v6 == Ipv6Addr::LOCALHOST || v6.to_ipv4_mapped() == Some(Ipv4Addr::LOCALHOST)
        }
    }
}

/// The access decision for a TCP peer: local peers always; others if remote access is open
/// to all (`allow_remote` without a host list) or if their address is in `allowed`.
pub fn peer_allowed(peer: IpAddr, policy: &RemotePolicy, allowed: &[IpAddr]) -> bool {
    if is_local(peer) {
        return true;
    }
    let peer = match peer {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer, IpAddr::V4),
        v4 => v4,
    };
    match policy {
        RemotePolicy::LocalOnly => false,
        RemotePolicy::AnyHost => true,
        RemotePolicy::Listed => allowed.contains(&peer),
    }
}

/// Which remote peers may connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemotePolicy {
    /// Only loopback peers.
    LocalOnly,
    /// Remote access is allowed and no host list exists: any peer (it must still
    /// authenticate for everything when a password is set).
    AnyHost,
    /// Only the hosts listed in `remote_hosts.cfg`.
    Listed,
}

/// Reads and resolves `remote_hosts.cfg`; `Ok(None)` when the file does not exist.
/// Entries that do not resolve are skipped with a warning.
pub async fn load_allowed_hosts(path: &Path) -> io::Result<Option<Vec<IpAddr>>> {
    let text = match tokio::fs::read_to_string(path).await {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut addrs = Vec::new();
    for host in parse_remote_hosts(&text) {
        if let Ok(ip) = host.parse::<IpAddr>() {
            addrs.push(ip);
            continue;
        }
        match tokio::net::lookup_host((host.as_str(), 0)).await {
            Ok(resolved) => addrs.extend(resolved.map(|a| a.ip())),
            Err(e) => {
                tracing::warn!(%host, error = %e, "cannot resolve a host in remote_hosts.cfg")
            }
        }
    }
    Ok(Some(addrs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_format() {
        let text = "# comment\n; another\n\n  192.168.1.7  \nhost.example\n";
        assert_eq!(
            parse_remote_hosts(text),
            vec!["192.168.1.7", "host.example"]
        );
    }

    #[test]
    fn decisions() {
        let listed: Vec<IpAddr> = vec!["192.168.1.7".parse().unwrap_or(IpAddr::from([0; 4]))];
        let local: IpAddr = IpAddr::from([127, 0, 0, 1]);
        let other: IpAddr = IpAddr::from([192, 168, 1, 8]);
        let good: IpAddr = IpAddr::from([192, 168, 1, 7]);
        let mapped: IpAddr = "::ffff:192.168.1.7".parse().unwrap_or(local);
        assert!(peer_allowed(local, &RemotePolicy::LocalOnly, &[]));
        assert!(peer_allowed(
            "::1".parse().unwrap_or(other),
            &RemotePolicy::LocalOnly,
            &[]
        ));
        assert!(!peer_allowed(good, &RemotePolicy::LocalOnly, &listed));
        assert!(peer_allowed(good, &RemotePolicy::Listed, &listed));
        assert!(peer_allowed(mapped, &RemotePolicy::Listed, &listed));
        assert!(!peer_allowed(other, &RemotePolicy::Listed, &listed));
        assert!(peer_allowed(other, &RemotePolicy::AnyHost, &[]));
    }

    #[test]
    fn only_127_0_0_1_and_ipv6_loopback_are_local() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap_or(IpAddr::from([0; 4]));
        assert!(is_local(ip("127.0.0.1")));
        assert!(is_local(ip("::1")));
        assert!(is_local(ip("::ffff:127.0.0.1")));
        for other in [
            "127.0.0.2",
            "127.1.2.3",
            "::ffff:127.0.0.2",
            "0.0.0.0",
            "::",
        ] {
            assert!(!is_local(ip(other)), "{other}");
            assert!(
                !peer_allowed(ip(other), &RemotePolicy::LocalOnly, &[]),
                "{other}"
            );
        }
    }
}
