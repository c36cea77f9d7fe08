//! Who may do what over HTTP, as pure code over the request's headers.
//!
//! - Static files of the dashboard hold no data: anyone who reaches the port gets them.
//! - `/metrics` and the dashboard's reads are open to a local peer on a loopback bind (as
//!   GUI RPC's read ops are to local connections); on any other bind, or from any other
//!   peer, they need the secret.
//! - Operations that change something (GUI RPC ops that need authentication) always need
//!   the secret, unless the GUI RPC password is empty and a local peer calls on a loopback
//!   bind (the official client's "no password" setting).
//! - A local peer is what GUI RPC calls local ([`ferrite_gui_rpc::access::is_local`]):
//!   127.0.0.1 or ::1 exactly, as the official client's `is_localhost`. A peer from the rest
//!   of 127.0.0.0/8 is treated as remote: without the secret it gets nothing but static files.
//! - Every API call must carry [`API_HEADER`]: a cross-site HTML form cannot send a custom
//!   header, and a cross-origin script that tries gets no CORS permission (the server sends
//!   no `Access-Control-*` headers at all), so no other site can make a browser act here.
//! - An `Origin` header, when present, must name this server (`http://` + `Host`).
//! - On a loopback bind the `Host` header must be a loopback name, so a hostile page cannot
//!   reach the port through DNS rebinding.
//!
//! The secret travels as `Authorization: Bearer SECRET`; it is the content of the token file
//! the operator named, or else the GUI RPC password.

use std::net::IpAddr;

/// The header every API call must carry (any non-empty value).
pub const API_HEADER: &str = "x-ferrite-dashboard";

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The dashboard's static files.
    Static,
    /// `GET /metrics`.
    Scrape,
    /// An API call that only reads (a GUI RPC op local clients may call unauthenticated).
    ApiRead,
    /// An API call that changes something (a GUI RPC op that needs authentication).
    ApiAct,
}

/// The server's settings that the decision depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The listener is on a loopback address.
    pub loopback: bool,
    /// The secret (`None`: the GUI RPC password is empty and no token file was named).
    secret: Option<String>,
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// `Host` is not a loopback name on a loopback bind.
    #[error("this server answers to loopback names only")]
    HostNotAllowed,
    /// `Origin` names another site.
    #[error("cross-origin requests are refused")]
    CrossOrigin,
    /// An API call without [`API_HEADER`].
    #[error("API calls need the x-ferrite-dashboard header")]
    MissingApiHeader,
    /// No secret, or the wrong one.
    #[error("authentication required")]
    Unauthorized,
}

/// The headers a decision looks at.
#[derive(Debug, Clone, Copy, Default)]
pub struct Facts<'a> {
    /// `Host`.
    pub host: Option<&'a str>,
    /// `Origin`.
    pub origin: Option<&'a str>,
    /// `Authorization`.
    pub authorization: Option<&'a str>,
    /// [`API_HEADER`], when present and not empty.
    pub api_header: bool,
    /// The peer's address is local as GUI RPC counts it
    /// ([`ferrite_gui_rpc::access::is_local`]).
    pub local_peer: bool,
}

impl Policy {
    /// A policy for a listener on a loopback address or not, with `secret` (an empty secret
    /// counts as none).
    pub fn new(loopback: bool, secret: Option<String>) -> Policy {
        Policy {
            loopback,
            secret: secret.filter(|s| !s.is_empty()),
        }
    }

    /// Whether the server may listen at all: anywhere but loopback it needs a secret.
    pub fn may_listen(&self) -> bool {
        self.loopback || self.secret.is_some()
    }

    /// Decides one request.
    pub fn check(&self, access: Access, facts: &Facts<'_>) -> Result<(), Refusal> {
        if self.loopback && !facts.host.is_none_or(is_loopback_host) {
            return Err(Refusal::HostNotAllowed);
        }
        if access == Access::Static {
            return Ok(());
        }
        if let Some(origin) = facts.origin {
            let same = facts.host.is_some_and(|h| {
                origin
                    .strip_prefix("http://")
                    .or_else(|| origin.strip_prefix("https://"))
                    .is_some_and(|o| o.eq_ignore_ascii_case(h))
            });
            if !same {
                return Err(Refusal::CrossOrigin);
            }
        }
        if matches!(access, Access::ApiRead | Access::ApiAct) && !facts.api_header {
            return Err(Refusal::MissingApiHeader);
        }
        let open = self.loopback && facts.local_peer;
        let needs_secret = match access {
            Access::Static => false,
            Access::Scrape | Access::ApiRead => !open,
            Access::ApiAct => self.secret.is_some() || !open,
        };
        if !needs_secret {
            return Ok(());
        }
        let given = facts
            .authorization
            .and_then(|a| {
                a.strip_prefix("Bearer ")
                    .or_else(|| a.strip_prefix("bearer "))
            })
            .map(str::trim);
        match (&self.secret, given) {
            (Some(secret), Some(given)) if same_bytes(secret.as_bytes(), given.as_bytes()) => {
                Ok(())
            }
            _ => Err(Refusal::Unauthorized),
        }
    }
}

/// Compares without stopping at the first difference, so the time taken does not say how
/// much of a guess was right.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `localhost`, `127.x.x.x` or `[::1]`, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((inside, port)) if port.is_empty() || is_port(port) => inside,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return false,
            None => host,
        }
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn is_port(s: &str) -> bool {
    s.strip_prefix(':')
        .unwrap_or(s)
        .parse::<u16>()
        .is_ok_and(|_| !s.is_empty())
}

/// The secret from a token file's text: its first line, trimmed.
pub fn secret_from_file_text(text: &str) -> Option<String> {
    let first = text.lines().next().unwrap_or("").trim();
    (!first.is_empty()).then(|| first.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(host: &'a str, origin: Option<&'a str>, auth: Option<&'a str>) -> Facts<'a> {
        Facts {
            host: Some(host),
            origin,
            authorization: auth,
            api_header: true,
            local_peer: true,
        }
    }

    #[test]
    fn loopback_names_only_on_a_loopback_bind() {
        let p = Policy::new(true, None);
        for h in [
            "127.0.0.1:9187",
            "localhost:9187",
            "LOCALHOST",
            "[::1]:80",
            "[::1]",
            "127.1.2.3",
        ] {
            assert_eq!(
                p.check(Access::Scrape, &facts(h, None, None)),
                Ok(()),
                "{h}"
            );
        }
        for h in [
            "evil.example:9187",
            "192.168.1.5:9187",
            "localhost.evil.example",
            "[::2]:1",
            "127.0.0.1:x",
        ] {
            assert_eq!(
                p.check(Access::Static, &facts(h, None, None)),
                Err(Refusal::HostNotAllowed),
                "{h}"
            );
        }
        // HTTP/1.0 scrapers send no Host at all; browsers always do.
        let no_host = Facts {
            local_peer: true,
            ..Facts::default()
        };
        assert_eq!(p.check(Access::Scrape, &no_host), Ok(()));
        // Any Host on a remote bind (the secret guards it).
        let remote = Policy::new(false, Some("s".into()));
        assert_eq!(
            remote.check(Access::Static, &facts("host.example:9187", None, None)),
            Ok(())
        );
    }

    #[test]
    fn other_origins_and_calls_without_the_header_are_refused() {
        let p = Policy::new(true, None);
        let h = "127.0.0.1:9187";
        assert_eq!(
            p.check(
                Access::ApiAct,
                &facts(h, Some("http://127.0.0.1:9187"), None)
            ),
            Ok(())
        );
        for o in ["http://evil.example", "null", "http://127.0.0.1:9188"] {
            assert_eq!(
                p.check(Access::ApiRead, &facts(h, Some(o), None)),
                Err(Refusal::CrossOrigin),
                "{o}"
            );
        }
        let mut f = facts(h, None, None);
        f.api_header = false;
        assert_eq!(p.check(Access::ApiRead, &f), Err(Refusal::MissingApiHeader));
        assert_eq!(p.check(Access::ApiAct, &f), Err(Refusal::MissingApiHeader));
        assert_eq!(p.check(Access::Scrape, &f), Ok(()));
    }

    #[test]
    fn actions_need_the_secret_when_there_is_one() {
        let p = Policy::new(true, Some("pw".into()));
        let h = "localhost";
        assert_eq!(p.check(Access::ApiRead, &facts(h, None, None)), Ok(()));
        assert_eq!(
            p.check(Access::ApiAct, &facts(h, None, None)),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            p.check(Access::ApiAct, &facts(h, None, Some("Bearer pX"))),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            p.check(Access::ApiAct, &facts(h, None, Some("Basic pw"))),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            p.check(Access::ApiAct, &facts(h, None, Some("Bearer pw"))),
            Ok(())
        );
        // No password at all: local actions are open, as with the official client.
        let open = Policy::new(true, Some(String::new()));
        assert_eq!(open.check(Access::ApiAct, &facts(h, None, None)), Ok(()));
    }

    #[test]
    fn a_peer_gui_rpc_does_not_count_as_local_needs_the_secret_on_a_loopback_bind() {
        let h = "127.0.0.1:9187";
        let mut f = facts(h, None, None);
        f.local_peer = false;
        // No password: what a local peer may do unasked, another one may not do at all.
        let open = Policy::new(true, None);
        assert_eq!(open.check(Access::ApiAct, &facts(h, None, None)), Ok(()));
        for a in [Access::Scrape, Access::ApiRead, Access::ApiAct] {
            assert_eq!(open.check(a, &f), Err(Refusal::Unauthorized), "{a:?}");
        }
        assert_eq!(open.check(Access::Static, &f), Ok(()));
        // With a password it opens everything, as it does for a local peer.
        let p = Policy::new(true, Some("pw".into()));
        for a in [Access::Scrape, Access::ApiRead, Access::ApiAct] {
            assert_eq!(p.check(a, &f), Err(Refusal::Unauthorized), "{a:?}");
            f.authorization = Some("Bearer pw");
            assert_eq!(p.check(a, &f), Ok(()), "{a:?}");
            f.authorization = None;
        }
    }

    #[test]
    fn a_remote_bind_needs_a_secret_for_everything_but_static_files() {
        assert!(!Policy::new(false, None).may_listen());
        assert!(!Policy::new(false, Some(String::new())).may_listen());
        assert!(Policy::new(true, None).may_listen());
        let p = Policy::new(false, Some("tok".into()));
        assert!(p.may_listen());
        let h = "203.0.113.7:9187";
        for a in [Access::Scrape, Access::ApiRead, Access::ApiAct] {
            assert_eq!(
                p.check(a, &facts(h, None, None)),
                Err(Refusal::Unauthorized),
                "{a:?}"
            );
            assert_eq!(
                p.check(a, &facts(h, None, Some("Bearer tok"))),
                Ok(()),
                "{a:?}"
            );
        }
        assert_eq!(p.check(Access::Static, &facts(h, None, None)), Ok(()));
    }

    #[test]
    fn token_files_give_their_first_line() {
        assert_eq!(secret_from_file_text("abc \nrest\n"), Some("abc".into()));
        assert_eq!(secret_from_file_text("\n"), None);
        assert_eq!(secret_from_file_text(""), None);
    }
}
