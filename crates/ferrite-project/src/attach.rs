//! Attaching to a project directly: the web RPCs that find or create the account
//! (`client/acct_setup.cpp`; `get_project_config.php`, `lookup_account.php`,
//! `create_account.php`), their replies, and the new project record
//! (`client/cs_account.cpp: add_project`).
//!
//! URLs are built from the canonical master URL (or the project's `web_rpc_url_base`)
//! with BOINC's parameter escaping: every byte but ASCII letters and digits becomes `%XX`
//! (upper-case hex), so `.` is `%2E` and `_` is `%5F`.

use ferrite_proto::account::canonicalize_master_url;
use ferrite_proto::client_state::{ClientState, ProjectState, RpcReason};
use ferrite_proto::crypt::md5_hex;
use ferrite_proto::xml::{Tag, XmlError, XmlReader};

/// BOINC's `escape_url` for one query parameter.
pub fn escape_param(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `passwd_hash = MD5hex(password + lowercase(email))`.
pub fn passwd_hash(password: &str, email: &str) -> String {
    md5_hex(format!("{password}{}", email.to_lowercase()).as_bytes())
}

/// The base the account RPCs go to: `web_rpc_url_base` when the project gave one, else
/// the canonical master URL; always ending in `/`.
pub fn rpc_base(master_url: &str, config: Option<&ProjectConfig>) -> String {
    let base = config
        .and_then(|c| c.web_rpc_url_base.as_deref())
        .filter(|b| !b.trim().is_empty())
        .unwrap_or(master_url);
    canonicalize_master_url(base.trim())
}

/// `get_project_config.php` of a master URL.
pub fn get_project_config_url(master_url: &str) -> String {
    format!(
        "{}get_project_config.php",
        canonicalize_master_url(master_url.trim())
    )
}

/// `lookup_account.php?email_addr=E&passwd_hash=H` under `base` (see [`rpc_base`]).
pub fn lookup_account_url(base: &str, email: &str, passwd_hash: &str) -> String {
    format!(
        "{}lookup_account.php?email_addr={}&passwd_hash={}",
        canonicalize_master_url(base.trim()),
        escape_param(email),
        escape_param(passwd_hash)
    )
}

/// What `create_account.php` needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewAccount {
    /// E-mail address.
    pub email: String,
    /// [`passwd_hash`] of the password.
    pub passwd_hash: String,
    /// Public user name.
    pub user_name: String,
    /// Team to join, if any.
    pub team_name: Option<String>,
    /// When the user consented to the terms of use: the client's name, sent as `source`.
    pub consent_source: Option<String>,
}

/// `create_account.php?…` under `base` (see [`rpc_base`]).
pub fn create_account_url(base: &str, a: &NewAccount) -> String {
    let mut url = format!(
        "{}create_account.php?email_addr={}&passwd_hash={}&user_name={}",
        canonicalize_master_url(base.trim()),
        escape_param(&a.email),
        escape_param(&a.passwd_hash),
        escape_param(&a.user_name)
    );
    if let Some(t) = a.team_name.as_deref().filter(|t| !t.is_empty()) {
        url.push_str("&team_name=");
        url.push_str(&escape_param(t));
    }
    if let Some(s) = &a.consent_source {
        url.push_str("&consent_flag=1&source=");
        url.push_str(&escape_param(s));
    }
    url
}

/// A failed web RPC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebRpcError {
    /// The project answered `<error>` (e.g. -136 not found, -137 not unique, -205 bad
    /// e-mail, -206 bad password, -208 creation disabled, -242 consent required, -183
    /// project down).
    #[error("project error {num}: {message}")]
    Project {
        /// `error_num`.
        num: i32,
        /// `error_msg`.
        message: String,
    },
    /// The reply is not one of the documented forms.
    #[error("unreadable reply: {0}")]
    Malformed(String),
}

/// A successful account look-up or creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountReply {
    /// The account key to attach with.
    Authenticator(String),
    /// The account exists (look-up without a password hash).
    Exists,
}

fn reader_at<'a>(text: &'a str, roots: &[&str]) -> Result<(XmlReader<'a>, Tag<'a>), WebRpcError> {
    let start = roots
        .iter()
        .filter_map(|r| text.find(&format!("<{r}")))
        .min()
        .ok_or_else(|| WebRpcError::Malformed("no known root element".into()))?;
    let mut r = XmlReader::new(&text[start..], "web_rpc_reply");
    let root = r.root_any(roots).map_err(malformed)?;
    Ok((r, root))
}

fn malformed(e: XmlError) -> WebRpcError {
    WebRpcError::Malformed(e.to_string())
}

fn read_error(r: &mut XmlReader<'_>, root: &Tag<'_>) -> Result<WebRpcError, XmlError> {
    let mut num = 0;
    let mut message = String::new();
    if !root.is_empty() {
        while let Some(t) = r.next_child()? {
            match t.name() {
                "error_num" => num = r.num_or(&t, 0)?,
                "error_msg" => message = r.string(&t)?,
                _ => r.skip(&t)?,
            }
        }
    }
    Ok(WebRpcError::Project { num, message })
}

/// Reads the reply of `lookup_account.php` or `create_account.php`.
pub fn parse_account_reply(text: &str) -> Result<AccountReply, WebRpcError> {
    let (mut r, root) = reader_at(text, &["account_out", "error"])?;
    if root.name() == "error" {
        return Err(read_error(&mut r, &root).map_err(malformed)?);
    }
    let mut auth = None;
    let mut success = false;
    if !root.is_empty() {
        while let Some(t) = r.next_child().map_err(malformed)? {
            match t.name() {
                "authenticator" => auth = Some(r.string(&t).map_err(malformed)?),
                "success" => {
                    r.skip(&t).map_err(malformed)?;
                    success = true;
                }
                _ => r.skip(&t).map_err(malformed)?,
            }
        }
    }
    match auth.filter(|a| !a.is_empty()) {
        Some(a) => Ok(AccountReply::Authenticator(a)),
        None if success => Ok(AccountReply::Exists),
        None => Err(WebRpcError::Malformed("no authenticator".into())),
    }
}

/// A platform the project has apps for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigPlatform {
    /// Platform name.
    pub platform_name: String,
    /// Display name.
    pub user_friendly_name: String,
    /// Plan class, if the entry is for one.
    pub plan_class: Option<String>,
}

/// `<project_config>`: what the attach dialog needs to know about a project.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectConfig {
    /// Project name.
    pub name: String,
    /// Its master URL.
    pub master_url: String,
    /// Base URL of the account RPCs.
    pub web_rpc_url_base: Option<String>,
    /// Server version text.
    pub server_version: Option<String>,
    /// The URL is an account manager, not a project.
    pub account_manager: bool,
    /// Server's local revision.
    pub local_revision: Option<String>,
    /// Web site stopped.
    pub web_stopped: bool,
    /// Scheduler stopped.
    pub sched_stopped: bool,
    /// No new accounts at all.
    pub account_creation_disabled: bool,
    /// No new accounts from clients.
    pub client_account_creation_disabled: bool,
    /// An invitation code is needed.
    pub invite_code_required: bool,
    /// Shortest password allowed.
    pub min_passwd_length: i32,
    /// Oldest client version accepted (`10000*maj + 100*min + rel`).
    pub min_client_version: i32,
    /// Accounts are looked up by user name rather than e-mail.
    pub uses_username: bool,
    /// Terms of use to show before creating an account.
    pub terms_of_use: Option<String>,
    /// LDAP authentication is offered.
    pub ldap_auth: bool,
    /// Platforms with apps.
    pub platforms: Vec<ConfigPlatform>,
}

/// Reads the reply of `get_project_config.php` (an `<error>` reply is an error).
pub fn parse_project_config(text: &str) -> Result<ProjectConfig, WebRpcError> {
    let (mut r, root) = reader_at(text, &["project_config", "error"])?;
    if root.name() == "error" {
        return Err(read_error(&mut r, &root).map_err(malformed)?);
    }
    read_config(&mut r, &root).map_err(malformed)
}

fn read_config(r: &mut XmlReader<'_>, root: &Tag<'_>) -> Result<ProjectConfig, XmlError> {
    let mut c = ProjectConfig::default();
    if root.is_empty() {
        return Ok(c);
    }
    while let Some(t) = r.next_child()? {
        match t.name() {
            "name" => c.name = r.string(&t)?,
            "master_url" => c.master_url = r.string(&t)?,
            "web_rpc_url_base" => c.web_rpc_url_base = Some(r.string(&t)?),
            "server_version" => c.server_version = Some(r.string(&t)?),
            "account_manager" => c.account_manager = r.flag(&t)?,
            "local_revision" => c.local_revision = Some(r.string(&t)?),
            "web_stopped" => c.web_stopped = r.flag(&t)?,
            "sched_stopped" => c.sched_stopped = r.flag(&t)?,
            "account_creation_disabled" => c.account_creation_disabled = r.flag(&t)?,
            "client_account_creation_disabled" => {
                c.client_account_creation_disabled = r.flag(&t)?
            }
            "invite_code_required" => c.invite_code_required = r.flag(&t)?,
            "min_passwd_length" => c.min_passwd_length = r.num_or(&t, 0)?,
            "min_client_version" => c.min_client_version = r.num_or(&t, 0)?,
            "uses_username" => c.uses_username = r.flag(&t)?,
            "terms_of_use" => c.terms_of_use = Some(r.string(&t)?),
            "ldap_auth" => c.ldap_auth = r.flag(&t)?,
            "platforms" if !t.is_empty() => {
                while let Some(p) = r.next_child()? {
                    if p.name() != "platform" || p.is_empty() {
                        r.skip(&p)?;
                        continue;
                    }
                    let mut cp = ConfigPlatform::default();
                    while let Some(e) = r.next_child()? {
                        match e.name() {
                            "platform_name" => cp.platform_name = r.string(&e)?,
                            "user_friendly_name" => cp.user_friendly_name = r.string(&e)?,
                            "plan_class" => cp.plan_class = Some(r.string(&e)?),
                            _ => r.skip(&e)?,
                        }
                    }
                    c.platforms.push(cp);
                }
            }
            _ => r.skip(&t)?,
        }
    }
    Ok(c)
}

/// Why an attach is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    /// Not a valid master URL (`ERR_INVALID_URL`).
    #[error("invalid master URL {0:?}")]
    InvalidUrl(String),
    /// Empty account key (`ERR_AUTHENTICATOR`).
    #[error("empty account key")]
    NoAuthenticator,
    /// Already attached (`ERR_ALREADY_ATTACHED`).
    #[error("already attached to {0}")]
    AlreadyAttached(String),
}

/// BOINC's `valid_master_url`: `http(s)://`, then a `.` (not first), a `/` later (not
/// right after that dot), and a trailing `/`.
pub fn valid_master_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    let Some(rest) = rest else {
        return false;
    };
    let Some(dot) = rest.find('.') else {
        return false;
    };
    if dot == 0 {
        return false;
    }
    let Some(slash) = rest[dot..].find('/') else {
        return false;
    };
    slash != 1 && url.ends_with('/')
}

/// Checks an attach and makes the new project record: canonical URL, master fetch
/// pending, first RPC pending with reason INIT, `email_hash` when an e-mail is given.
/// The daemon writes the account file and creates the project directory.
pub fn new_project(
    state: &ClientState,
    master_url: &str,
    authenticator: &str,
    email: Option<&str>,
) -> Result<ProjectState, AttachError> {
    let url = canonicalize_master_url(master_url.trim());
    if !valid_master_url(&url) {
        return Err(AttachError::InvalidUrl(master_url.to_owned()));
    }
    if authenticator.trim().is_empty() {
        return Err(AttachError::NoAuthenticator);
    }
    if state.project(&url).is_some() {
        return Err(AttachError::AlreadyAttached(url));
    }
    let mut ps = ProjectState::default();
    ps.project.master_url = url;
    ps.project.master_url_fetch_pending = true;
    ps.project.sched_rpc_pending = Some(RpcReason::Init);
    ps.project.resource_share = 100.0;
    ps.project.duration_correction_factor = 1.0;
    if let Some(e) = email.map(str::trim).filter(|e| !e.is_empty()) {
        ps.project.email_hash = md5_hex(e.as_bytes());
    }
    Ok(ps)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn urls_use_boincs_escaping() {
        assert_eq!(escape_param("a.b_c-d@e é"), "a%2Eb%5Fc%2Dd%40e%20%C3%A9");
        assert_eq!(
            get_project_config_url("127.0.0.1:18080"),
            "http://127.0.0.1:18080/get_project_config.php"
        );
        let a = NewAccount {
            email: "a@b.c".into(),
            passwd_hash: "h".into(),
            user_name: "u n".into(),
            team_name: Some("T&T".into()),
            consent_source: Some("Ferrite".into()),
        };
        assert_eq!(
            create_account_url("http://p.org/x", &a),
            "http://p.org/x/create_account.php?email_addr=a%40b%2Ec&passwd_hash=h&user_name=u%20n&team_name=T%26T&consent_flag=1&source=Ferrite"
        );
        let cfg = ProjectConfig {
            web_rpc_url_base: Some("https://rpc.p.org/".into()),
            ..ProjectConfig::default()
        };
        assert_eq!(rpc_base("http://p.org/", Some(&cfg)), "https://rpc.p.org/");
        assert_eq!(rpc_base("http://p.org/", None), "http://p.org/");
    }

    #[test]
    fn master_url_validity_and_new_project() {
        assert!(valid_master_url("http://127.0.0.1/x/"));
        assert!(valid_master_url("https://einstein.phys.uwm.edu/"));
        assert!(!valid_master_url("http://localhost/"));
        assert!(!valid_master_url("ftp://a.b/"));
        assert!(!valid_master_url("http://.a/"));
        assert!(!valid_master_url("http://a./"));
        let mut s = ClientState::default();
        assert_eq!(
            new_project(&s, "http://localhost/", "k", None),
            Err(AttachError::InvalidUrl("http://localhost/".into()))
        );
        assert_eq!(
            new_project(&s, "p.org", " ", None),
            Err(AttachError::NoAuthenticator)
        );
        let ps = new_project(&s, "P.ORG//x", "k", Some("Me@x.org")).unwrap();
        assert_eq!(ps.project.master_url, "http://p.org/x/");
        assert!(ps.project.master_url_fetch_pending);
        assert_eq!(ps.project.sched_rpc_pending, Some(RpcReason::Init));
        assert_eq!(ps.project.email_hash, md5_hex(b"Me@x.org"));
        s.projects.push(ps);
        assert_eq!(
            new_project(&s, "http://p.org/x", "k", None),
            Err(AttachError::AlreadyAttached("http://p.org/x/".into()))
        );
    }

    #[test]
    fn replies() {
        assert_eq!(
            parse_account_reply("<account_out><success/></account_out>"),
            Ok(AccountReply::Exists)
        );
        assert!(matches!(
            parse_account_reply("<html>oops</html>"),
            Err(WebRpcError::Malformed(_))
        ));
        assert!(matches!(
            parse_account_reply("<account_out></account_out>"),
            Err(WebRpcError::Malformed(_))
        ));
        assert_eq!(
            parse_project_config(
                "<error><error_num>-183</error_num><error_msg>down</error_msg></error>"
            ),
            Err(WebRpcError::Project {
                num: -183,
                message: "down".into()
            })
        );
    }
}
