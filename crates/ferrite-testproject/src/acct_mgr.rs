//! A test account manager beside the project, speaking BOINC's account-manager wire format
//! under `/am/`: `rpc.php` takes an `<acct_mgr_request>` and answers an `<acct_mgr_reply>`
//! whose project URLs it signs with its own key (kept as `am_signing_private` in the data
//! directory).
//!
//! What it answers is set by the test: `POST /am/policy[?login=NAME]` with an
//! `<acct_mgr_reply>` text (accounts without signatures); it becomes the reply for that login
//! (or for every login without one of its own). `GET /am/status` gives the requests counted
//! per login and what each host said last, as JSON. Every login's password is
//! [`AM_PASSWORD`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use ferrite_proto::acct_mgr::{password_hash, AmCredentials, AmReply, AmRequest};
use ferrite_proto::crypt::PrivateKey;

/// The password of every account at the test manager.
pub const AM_PASSWORD: &str = "secret";
/// The name the test manager gives itself.
pub const AM_NAME: &str = "Ferrite test AM";

/// What one host said in its last request.
#[derive(Debug, Clone, Default)]
struct Seen {
    host_cpid: String,
    projects: Vec<serde_json::Value>,
    opaque: String,
    results: Option<usize>,
}

#[derive(Debug, Default)]
struct State {
    /// Reply template per login; `None` key = every other login.
    policy: BTreeMap<Option<String>, AmReply>,
    /// Requests per login.
    requests: BTreeMap<String, u64>,
    /// Refused requests (bad password).
    refused: u64,
    /// Last request per login.
    last: BTreeMap<String, Seen>,
}

/// The test account manager.
#[derive(Debug)]
pub struct AccountManager {
    data: PathBuf,
    key: OnceLock<Option<PrivateKey>>,
    state: Mutex<State>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl AccountManager {
    /// A manager keeping its key in `data`.
    pub fn new(data: PathBuf) -> Self {
        Self {
            data,
            key: OnceLock::new(),
            state: Mutex::new(State::default()),
        }
    }

    /// The signing key (made once, then reused from the data directory).
    fn key(&self) -> Option<&PrivateKey> {
        self.key
            .get_or_init(|| {
                let path = self.data.join("am_signing_private");
                if let Ok(text) = std::fs::read_to_string(&path) {
                    if let Ok(k) = PrivateKey::parse(&text) {
                        return Some(k);
                    }
                }
                let k = PrivateKey::generate(&mut rand::thread_rng(), 1024).ok()?;
                if let Ok(text) = k.to_text() {
                    let _ = std::fs::write(&path, text);
                }
                Some(k)
            })
            .as_ref()
    }

    /// The manager's public key text.
    pub fn public_key(&self) -> String {
        self.key()
            .map(|k| k.public_key().to_text())
            .unwrap_or_default()
    }

    /// Sets the reply template for `login` (every other login when `None`).
    pub fn set_policy(&self, login: Option<&str>, reply_xml: &str) -> Result<(), String> {
        let reply = AmReply::parse(reply_xml).map_err(|e| e.to_string())?.value;
        lock(&self.state)
            .policy
            .insert(login.map(str::to_owned), reply);
        Ok(())
    }

    /// Answers one `rpc.php` request.
    pub fn rpc(&self, body: &str) -> String {
        let req = match AmRequest::parse(body) {
            Ok(r) => r.value,
            Err(e) => return error_reply(-112, &format!("bad request: {e}")),
        };
        let login = match &req.credentials {
            Some(AmCredentials::Login {
                name,
                password_hash: h,
            }) if *h == password_hash(name, AM_PASSWORD) => name.clone(),
            Some(AmCredentials::Authenticator(a)) if a.starts_with("am_") => a[3..].to_owned(),
            _ => {
                lock(&self.state).refused += 1;
                return error_reply(-206, "Invalid password");
            }
        };
        let mut st = lock(&self.state);
        *st.requests.entry(login.clone()).or_default() += 1;
        st.last.insert(
            login.clone(),
            Seen {
                host_cpid: req.host_cpid.clone(),
                projects: req
                    .projects
                    .iter()
                    .map(|p| {
                        serde_json::json!({
                            "url": p.url,
                            "suspended_via_gui": p.suspended_via_gui,
                            "attached_via_acct_mgr": p.attached_via_acct_mgr,
                            "resource_share": p.resource_share,
                            "dont_request_more_work": p.dont_request_more_work,
                            "account_key": p.account_key,
                        })
                    })
                    .collect(),
                opaque: req.opaque.clone(),
                results: req.results.as_ref().map(|r| r.matches("<result>").count()),
            },
        );
        let mut reply = st
            .policy
            .get(&Some(login.clone()))
            .or_else(|| st.policy.get(&None))
            .cloned()
            .unwrap_or_default();
        drop(st);
        if reply.name.is_empty() {
            reply.name = AM_NAME.to_owned();
        }
        if reply.user_name.is_empty() {
            reply.user_name = login;
        }
        if reply.error_num == 0 && reply.error.is_empty() {
            if let Some(key) = self.key() {
                if reply.signing_key.is_empty() {
                    reply.signing_key = key.public_key().to_text();
                }
                for a in &mut reply.accounts {
                    if a.url_signature.is_empty() {
                        a.url_signature = key.sign(a.url.as_bytes()).unwrap_or_default();
                    }
                }
            }
        }
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n{}",
            reply.to_xml()
        )
    }

    /// Requests per login and each host's last request, as JSON.
    pub fn status_json(&self) -> serde_json::Value {
        let st = lock(&self.state);
        let last: serde_json::Map<String, serde_json::Value> = st
            .last
            .iter()
            .map(|(k, s)| {
                (
                    k.clone(),
                    serde_json::json!({
                        "host_cpid": s.host_cpid,
                        "projects": s.projects,
                        "opaque": s.opaque,
                        "results": s.results,
                    }),
                )
            })
            .collect();
        serde_json::json!({
            "requests": st.requests,
            "refused": st.refused,
            "last": last,
        })
    }

    /// `get_project_config.php`: what BOINC Manager's account-manager wizard asks first; the
    /// `<account_manager/>` flag tells it this URL is a manager, not a project.
    pub fn project_config(master_url: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n<project_config>\n    <name>{AM_NAME}</name>\n    <master_url>{master_url}</master_url>\n    <account_manager/>\n    <uses_username/>\n    <client_account_creation_disabled/>\n    <min_passwd_length>6</min_passwd_length>\n</project_config>\n"
        )
    }

    /// The manager's master page.
    pub fn master_page() -> String {
        format!("<html><head><title>{AM_NAME}</title></head><body>{AM_NAME}</body></html>\n")
    }
}

fn error_reply(num: i32, msg: &str) -> String {
    AmReply {
        error_num: num,
        error: msg.to_owned(),
        ..AmReply::default()
    }
    .to_xml()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_urls_and_checks_the_password() {
        let dir = tempfile::tempdir().expect("tempdir");
        let am = AccountManager::new(dir.path().to_path_buf());
        am.set_policy(
            None,
            "<acct_mgr_reply>\n<repeat_sec>5</repeat_sec>\n<account>\n<url>http://127.0.0.1:1/</url>\n<authenticator>k</authenticator>\n</account>\n</acct_mgr_reply>",
        )
        .expect("policy");
        let req = AmRequest {
            credentials: Some(AmCredentials::Login {
                name: "Host1".into(),
                password_hash: password_hash("Host1", AM_PASSWORD),
            }),
            ..AmRequest::default()
        };
        let r = AmReply::parse(&am.rpc(&req.to_xml())).expect("reply").value;
        assert_eq!(r.repeat_sec, 5.0);
        assert_eq!(r.name, AM_NAME);
        let key = ferrite_proto::crypt::PublicKey::parse(&r.signing_key).expect("key");
        key.verify(r.accounts[0].url.as_bytes(), &r.accounts[0].url_signature)
            .expect("signed");
        let bad = AmRequest {
            credentials: Some(AmCredentials::Login {
                name: "Host1".into(),
                password_hash: "wrong".into(),
            }),
            ..AmRequest::default()
        };
        let r = AmReply::parse(&am.rpc(&bad.to_xml())).expect("reply").value;
        assert_eq!(r.error_num, -206);
        let s = am.status_json();
        assert_eq!(s["requests"]["Host1"], 1);
        assert_eq!(s["refused"], 1);
    }
}
