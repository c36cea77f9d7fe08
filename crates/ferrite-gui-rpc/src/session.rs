//! The per-connection protocol state machine, free of I/O: one request text in, one decision
//! out (reply now, optionally closing, or hand the typed request to the daemon).
//!
//! Rules (official client, `GUI_RPC_CONN::handle_rpc`):
//! * `auth1` answers a nonce; a second `auth1` while still unauthenticated closes the
//!   connection after an empty reply. `auth2` without a preceding `auth1`, or a second `auth2`,
//!   likewise closes. A wrong or missing hash answers `<unauthorized/>` and closes.
//! * A remote connection that has not authenticated gets `<unauthorized/>` for everything; a
//!   local one only for ops the table marks as needing auth. The first `<unauthorized/>` is
//!   only a reply; the second closes the connection.
//! * Unknown ops answer `unrecognized op` without any gate, as the official does.
//!
//! Deviation: `auth1`/`auth2` are recognised by the op tag, not by a substring search of the
//! whole request, so a document sent with `set_cc_config` can never be taken for `auth1`.

use crate::auth::{self, Password};
use crate::ops;
use crate::reply;
use crate::request::{self, Request};

/// The version the server reports in `exchange_versions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerVersion {
    /// Major version (BOINC GUIs compare it with theirs).
    pub major: i32,
    /// Minor version.
    pub minor: i32,
    /// Release.
    pub release: i32,
}

impl Default for ServerVersion {
    /// The BOINC version whose protocol Ferrite speaks (8.2.0). This crate uses no other
    /// workspace crate, so the daemon's tests check that it equals
    /// `ferrite_proto::version::PROTOCOL_VERSION`.
    fn default() -> Self {
        Self {
            major: 8,
            minor: 2,
            release: 0,
        }
    }
}

/// What to do with one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send this body (framed) and, if `close`, close the connection afterwards.
    Reply {
        /// The reply body, possibly empty.
        body: String,
        /// Close after sending.
        close: bool,
    },
    /// An authorized request for the daemon.
    Dispatch(Request),
}

impl Action {
    fn reply(body: impl Into<String>) -> Action {
        Action::Reply {
            body: body.into(),
            close: false,
        }
    }

    fn close_with(body: impl Into<String>) -> Action {
        Action::Reply {
            body: body.into(),
            close: true,
        }
    }
}

/// Protocol state of one connection.
#[derive(Debug)]
pub struct Session {
    /// The password in force when the connection was accepted.
    password: Password,
    /// Loopback or Unix-socket peer: may read status without authenticating.
    is_local: bool,
    /// Still has to authenticate before protected ops.
    auth_needed: bool,
    /// An `auth1` was answered.
    got_auth1: bool,
    /// An `auth2` was processed.
    got_auth2: bool,
    /// One `<unauthorized/>` was already sent: the next one closes the connection.
    sent_unauthorized: bool,
    /// The nonce handed out by `auth1`.
    nonce: Option<String>,
    /// The GUI's name from `exchange_versions` (`create_account` with consent needs it).
    client_name: Option<String>,
    /// What `exchange_versions` answers.
    version: ServerVersion,
}

impl Session {
    /// State of a freshly accepted connection.
    pub fn new(password: Password, is_local: bool, version: ServerVersion) -> Self {
        Self {
            auth_needed: password.is_required(),
            password,
            is_local,
            got_auth1: false,
            got_auth2: false,
            sent_unauthorized: false,
            nonce: None,
            client_name: None,
            version,
        }
    }

    /// Whether protected ops are open to this connection.
    pub fn is_authorized(&self) -> bool {
        !self.auth_needed
    }

    /// Whether the peer is local.
    pub fn is_local(&self) -> bool {
        self.is_local
    }

    /// The GUI's name, once `exchange_versions` gave one.
    pub fn client_name(&self) -> Option<&str> {
        self.client_name.as_deref()
    }

    /// Decides what to do with one request (its text without the 0x03). `make_nonce` is
    /// called only for `auth1`.
    pub fn handle(&mut self, text: &str, make_nonce: impl FnOnce() -> String) -> Action {
        let document = request::parse_document(text);
        let op = document.as_ref().ok().map(|d| d.op().bare().to_owned());
        match op.as_deref() {
            Some("auth1") => return self.auth1(make_nonce),
            Some("auth2") => return self.auth2(text),
            Some("get_auth_id") => {
                return Action::reply(reply::error(
                    "get_auth_id is only used by HTTP mode, which this client does not serve",
                ))
            }
            _ => {}
        }
        if self.auth_needed && !self.is_local {
            return self.unauthorized();
        }
        let document = match document {
            Ok(d) => d,
            Err(e) => return Action::reply(e.reply_body()),
        };
        let Some(info) = ops::lookup(document.op().bare()) else {
            return Action::reply(
                request::RequestError::UnrecognizedOp(document.op().written.clone()).reply_body(),
            );
        };
        if info.auth_required && self.auth_needed {
            return self.unauthorized();
        }
        match document.into_request() {
            Err(e) => Action::reply(e.reply_body()),
            Ok(Request::ExchangeVersions { name, .. }) => {
                if name.is_some() {
                    self.client_name = name;
                }
                let v = self.version;
                Action::reply(format!(
                    "<server_version>\n   <major>{}</major>\n   <minor>{}</minor>\n   <release>{}</release>\n</server_version>\n",
                    v.major, v.minor, v.release
                ))
            }
            Ok(request) => Action::Dispatch(request),
        }
    }

    fn auth1(&mut self, make_nonce: impl FnOnce() -> String) -> Action {
        if self.got_auth1 && self.auth_needed {
            return Action::close_with("");
        }
        let nonce = make_nonce();
        let body = format!("<nonce>{nonce}</nonce>\n");
        self.nonce = Some(nonce);
        self.got_auth1 = true;
        Action::reply(body)
    }

    fn auth2(&mut self, text: &str) -> Action {
        if (!self.got_auth1 || self.got_auth2) && self.auth_needed {
            return Action::close_with("");
        }
        self.got_auth2 = true;
        let received = request::parse_document(text)
            .ok()
            .and_then(|d| d.nonce_hash());
        let expected =
            auth::nonce_hash(self.nonce.as_deref().unwrap_or(""), self.password.as_str());
        match received {
            Some(hash) if auth::hashes_match(hash.trim(), &expected) => {
                self.auth_needed = false;
                Action::reply(reply::AUTHORIZED)
            }
            _ => Action::close_with(reply::UNAUTHORIZED),
        }
    }

    fn unauthorized(&mut self) -> Action {
        let close = self.sent_unauthorized;
        self.sent_unauthorized = true;
        Action::Reply {
            body: reply::UNAUTHORIZED.to_owned(),
            close,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::RunMode;

    fn doc(op: &str) -> String {
        format!("<boinc_gui_rpc_request>\n{op}\n</boinc_gui_rpc_request>\n")
    }

    fn session(local: bool) -> Session {
        Session::new(
            Password::Required("testpw".into()),
            local,
            ServerVersion::default(),
        )
    }

    fn nonce() -> String {
        "1795333021.122344".into()
    }

    fn login(s: &mut Session) {
        s.handle(&doc("<auth1/>"), nonce);
        let hash = auth::nonce_hash(&nonce(), "testpw");
        let a = s.handle(
            &doc(&format!(
                "<auth2>\n<nonce_hash>{hash}</nonce_hash>\n</auth2>"
            )),
            nonce,
        );
        assert_eq!(a, Action::reply(reply::AUTHORIZED));
    }

    #[test]
    fn full_login_then_control_op() {
        let mut s = session(false);
        assert_eq!(
            s.handle(&doc("<auth1/>"), nonce),
            Action::reply("<nonce>1795333021.122344</nonce>\n")
        );
        // Hash taken from the official multiple_requests_one_connection transcript.
        assert_eq!(
            s.handle(
                &doc(
                    "<auth2>\n<nonce_hash>dc615b67e42f537e0266fb8f8c7b8a28</nonce_hash>\n</auth2>"
                ),
                nonce
            ),
            Action::reply(reply::AUTHORIZED)
        );
        assert!(s.is_authorized());
        assert_eq!(
            s.handle(&doc("<quit/>"), nonce),
            Action::Dispatch(Request::Quit)
        );
    }

    #[test]
    fn wrong_hash_is_unauthorized_and_closes() {
        let mut s = session(true);
        s.handle(&doc("<auth1/>"), nonce);
        assert_eq!(
            s.handle(
                &doc(
                    "<auth2>\n<nonce_hash>95884d456be36c757900468267361937</nonce_hash>\n</auth2>"
                ),
                nonce
            ),
            Action::close_with(reply::UNAUTHORIZED)
        );
        assert!(!s.is_authorized());
    }

    #[test]
    fn auth_sequence_errors_close_with_an_empty_reply() {
        let mut s = session(true);
        assert_eq!(
            s.handle(&doc("<auth2><nonce_hash>x</nonce_hash></auth2>"), nonce),
            Action::close_with("")
        );
        let mut s = session(true);
        s.handle(&doc("<auth1/>"), nonce);
        assert_eq!(s.handle(&doc("<auth1/>"), nonce), Action::close_with(""));
    }

    #[test]
    fn local_unauthenticated_reads_status_but_not_control() {
        let mut s = session(true);
        assert_eq!(
            s.handle(&doc("<get_cc_status/>"), nonce),
            Action::Dispatch(Request::GetCcStatus)
        );
        assert_eq!(
            s.handle(&doc("<quit/>"), nonce),
            Action::reply(reply::UNAUTHORIZED)
        );
        // Status still works after one refusal.
        assert_eq!(
            s.handle(&doc("<get_state/>"), nonce),
            Action::Dispatch(Request::GetState)
        );
        assert_eq!(
            s.handle(&doc("<set_run_mode><never/></set_run_mode>"), nonce),
            Action::close_with(reply::UNAUTHORIZED)
        );
    }

    #[test]
    fn remote_unauthenticated_gets_nothing() {
        let mut s = session(false);
        assert_eq!(
            s.handle(&doc("<get_cc_status/>"), nonce),
            Action::reply(reply::UNAUTHORIZED)
        );
        assert_eq!(
            s.handle(&doc("<no_such_op/>"), nonce),
            Action::close_with(reply::UNAUTHORIZED)
        );
    }

    #[test]
    fn disabled_password_opens_everything() {
        let mut s = Session::new(Password::Disabled, false, ServerVersion::default());
        assert_eq!(
            s.handle(
                &doc("<set_run_mode>\n<never/>\n  <duration>60.000000</duration>\n</set_run_mode>"),
                nonce
            ),
            Action::Dispatch(Request::SetRunMode {
                mode: RunMode::Never,
                duration: 60.0,
                at_checkpoint: false,
            })
        );
        // boinctui authenticates anyway, hashing the nonce alone.
        s.handle(&doc("<auth1/>"), nonce);
        let hash = auth::nonce_hash(&nonce(), "");
        assert_eq!(
            s.handle(
                &doc(&format!("<auth2><nonce_hash>{hash}</nonce_hash></auth2>")),
                nonce
            ),
            Action::reply(reply::AUTHORIZED)
        );
    }

    #[test]
    fn unknown_ops_and_versions_are_answered_here() {
        let mut s = session(true);
        assert_eq!(
            s.handle(&doc("<no_such_operation/>"), nonce),
            Action::reply("<error>unrecognized op: no_such_operation/</error>\n")
        );
        login(&mut s);
        assert_eq!(
            s.handle(
                &doc("<exchange_versions>\n<major>7</major>\n<minor>20</minor>\n<release>5</release>\n<name>tui</name>\n</exchange_versions>"),
                nonce
            ),
            Action::reply("<server_version>\n   <major>8</major>\n   <minor>2</minor>\n   <release>0</release>\n</server_version>\n")
        );
        assert_eq!(s.client_name(), Some("tui"));
        assert_eq!(
            s.handle(&doc("<set_run_mode/>"), nonce),
            Action::reply("<error>Missing mode</error>\n")
        );
    }
}
