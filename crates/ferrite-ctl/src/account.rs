//! Attaching with an e-mail address and password instead of an account key, as BOINC
//! Manager does it over GUI RPC: `get_project_config` (the project's name and its account
//! rules), then `lookup_account` (or `create_account` for a new account), each followed by
//! its `_poll` until the client has the project's answer; the account key it returns is
//! then given to `project_attach`.

use std::time::{Duration, Instant};

use clap::Args;
use ferrite_gui_rpc::{AccountIn, GuiRpcClient, Request};
use md5::{Digest, Md5};

use crate::model;

/// `ERR_IN_PROGRESS`: the client is still waiting for the project.
const IN_PROGRESS: i64 = -204;
/// How long a web RPC of the project may take.
const POLL_LIMIT: Duration = Duration::from_secs(60);

/// The options of `ferrite attach` that log in instead of giving an account key.
#[derive(Debug, Clone, Default, Args)]
pub struct Login {
    /// The e-mail address of your account at the project (instead of an account key).
    #[arg(long, requires = "password", conflicts_with = "key")]
    pub email: Option<String>,
    /// The account's password (with --email).
    #[arg(long, requires = "email")]
    pub password: Option<String>,
    /// Create the account at the project first (with --email, --password, --user-name).
    #[arg(long, requires_all = ["email", "user_name"])]
    pub create: bool,
    /// The new account's user name (with --create).
    #[arg(long, requires = "create")]
    pub user_name: Option<String>,
    /// A team for the new account to join (with --create).
    #[arg(long, requires = "create")]
    pub team: Option<String>,
}

/// What a login gave: the account key and, when the project said it, its name.
#[derive(Debug, Clone, PartialEq)]
pub struct Account {
    /// The account key (authenticator).
    pub key: String,
    /// The project's name from its configuration, if it gave one.
    pub project_name: Option<String>,
}

/// BOINC's password hash: `md5(password + lower-case e-mail address)`, in hex.
pub fn passwd_hash(password: &str, email: &str) -> String {
    let mut h = Md5::new();
    h.update(password.as_bytes());
    h.update(email.to_lowercase().as_bytes());
    h.finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
}

/// Logs in to (or creates) the account of `login` at `url` through the client, and returns
/// its key.
pub async fn log_in(
    client: &mut GuiRpcClient,
    url: &str,
    login: &Login,
) -> anyhow::Result<Account> {
    let (Some(email), Some(password)) = (login.email.as_deref(), login.password.as_deref()) else {
        anyhow::bail!("give an account key, or --email and --password");
    };
    let email = email.trim().to_lowercase();
    let config = project_config(client, url).await?;
    if login.create {
        if config.creation_disabled {
            anyhow::bail!("{url} does not let clients create accounts; create one on its web site");
        }
        if password.chars().count() < config.min_passwd_length {
            anyhow::bail!(
                "the project wants a password of at least {} characters",
                config.min_passwd_length
            );
        }
    }
    let account = AccountIn {
        url: url.to_owned(),
        email_addr: email.clone(),
        passwd_hash: passwd_hash(password, &email),
        user_name: login.user_name.clone().unwrap_or_default(),
        team_name: login.team.clone().unwrap_or_default(),
        consented_to_terms: login.create,
        ..AccountIn::default()
    };
    let (start, poll, what) = if login.create {
        (
            Request::CreateAccount(account),
            Request::CreateAccountPoll,
            "creating the account",
        )
    } else {
        (
            Request::LookupAccount(account),
            Request::LookupAccountPoll,
            "looking the account up",
        )
    };
    let body = client.call(&start).await?;
    if let Some(text) = ferrite_gui_rpc::client::error_text(&body) {
        anyhow::bail!("{what} at {url}: {text}");
    }
    let reply = poll_until_done(client, &poll, "account_out", what).await?;
    match reply.get("authenticator").map(|k| k.trim()) {
        Some(key) if !key.is_empty() => Ok(Account {
            key: key.to_owned(),
            project_name: config.name,
        }),
        _ => anyhow::bail!("{what} at {url} failed: {}", failure(&reply)),
    }
}

/// What the attach needs of `get_project_config`.
#[derive(Debug, Clone, Default, PartialEq)]
struct ProjectConfig {
    name: Option<String>,
    creation_disabled: bool,
    min_passwd_length: usize,
}

async fn project_config(client: &mut GuiRpcClient, url: &str) -> anyhow::Result<ProjectConfig> {
    let what = "reading the project's configuration";
    let body = client
        .call(&Request::GetProjectConfig {
            url: url.to_owned(),
        })
        .await?;
    if let Some(text) = ferrite_gui_rpc::client::error_text(&body) {
        anyhow::bail!("{what} at {url}: {text}");
    }
    let r = poll_until_done(
        client,
        &Request::GetProjectConfigPoll,
        "project_config",
        what,
    )
    .await?;
    if r.get("error_num").is_some_and(|n| n.trim() != "0") {
        anyhow::bail!("{what} at {url} failed: {}", failure(&r));
    }
    Ok(ProjectConfig {
        name: r
            .get("name")
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty()),
        creation_disabled: r.contains_key("account_creation_disabled")
            || r.contains_key("client_account_creation_disabled"),
        min_passwd_length: r
            .get("min_passwd_length")
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0),
    })
}

/// Polls with `poll` every half second until the reply is no longer "in progress"; the
/// leaf values of the reply's `<tag>` (or of its `<error>`).
async fn poll_until_done(
    client: &mut GuiRpcClient,
    poll: &Request,
    tag: &str,
    what: &str,
) -> anyhow::Result<model::Record> {
    let start = Instant::now();
    loop {
        let body = client.call(poll).await?;
        let reply = model::records(&body, tag)
            .into_iter()
            .next()
            .or_else(|| model::records(&body, "error").into_iter().next());
        let Some(reply) = reply else {
            anyhow::bail!("{what}: the client's answer is not understood: {body}");
        };
        let code: i64 = reply
            .get("error_num")
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        if code != IN_PROGRESS {
            return Ok(reply);
        }
        if start.elapsed() > POLL_LIMIT {
            anyhow::bail!("{what}: no answer from the project within a minute");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The project's or the client's explanation of a failed web RPC.
fn failure(reply: &model::Record) -> String {
    let num = reply.get("error_num").map_or("", |n| n.trim());
    let msg = reply.get("error_msg").map_or("", |m| m.trim());
    match (num, msg) {
        ("", "") => "no account key in the project's answer".to_owned(),
        (n, "") => format!("error {n}{}", known_error(n)),
        ("", m) => m.to_owned(),
        (n, m) => format!("{m} (error {n})"),
    }
}

/// BOINC's names of the errors its account web RPCs return.
fn known_error(num: &str) -> &'static str {
    match num {
        "-136" => ": no such account (ERR_DB_NOT_FOUND)",
        "-137" => ": not unique (ERR_DB_NOT_UNIQUE)",
        "-205" => ": invalid e-mail address (ERR_BAD_EMAIL_ADDR)",
        "-206" => ": wrong password (ERR_BAD_PASSWD)",
        "-207" => ": an account with this e-mail address exists (ERR_NONUNIQUE_EMAIL)",
        "-208" => ": account creation is disabled (ERR_ACCT_CREATION_DISABLED)",
        "-209" => ": the project could not set the account up (ERR_ATTACH_FAIL_INIT)",
        "-242" => ": the project's terms of use must be accepted (ERR_ACCT_REQUIRE_CONSENT)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_hash_is_boincs() {
        // The kit's test account: md5("testpass123" + "tester@example.invalid").
        assert_eq!(
            passwd_hash("testpass123", "Tester@Example.invalid"),
            passwd_hash("testpass123", "tester@example.invalid")
        );
        // md5("") of an empty password and address.
        assert_eq!(passwd_hash("", ""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(passwd_hash("a", "b"), "187ef4436122d1cc2f40dc2b92f0eba0");
    }

    #[test]
    fn failures_name_boincs_errors() {
        let r = |pairs: &[(&str, &str)]| -> model::Record {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(
            failure(&r(&[("error_num", "-136")])),
            "error -136: no such account (ERR_DB_NOT_FOUND)"
        );
        assert_eq!(
            failure(&r(&[("error_num", "-206"), ("error_msg", "bad password")])),
            "bad password (error -206)"
        );
        assert_eq!(failure(&r(&[])), "no account key in the project's answer");
    }

    #[test]
    fn attach_takes_a_key_or_an_email_and_password() {
        use clap::Parser as _;
        let ok = |args: &[&str]| {
            let mut all = vec!["ferrite", "attach", "http://p/"];
            all.extend_from_slice(args);
            crate::Cli::try_parse_from(all).is_ok()
        };
        assert!(ok(&["key"]));
        assert!(ok(&["--email", "e@x", "--password", "pw"]));
        assert!(ok(&[
            "--email",
            "e@x",
            "--password",
            "pw",
            "--create",
            "--user-name",
            "n"
        ]));
        assert!(!ok(&[]), "a key or an e-mail address is needed");
        assert!(!ok(&["--email", "e@x"]), "no password");
        assert!(!ok(&["key", "--email", "e@x", "--password", "pw"]), "both");
        assert!(
            !ok(&["--email", "e@x", "--password", "pw", "--create"]),
            "no user name"
        );
        assert!(
            !ok(&["key", "--user-name", "n"]),
            "a user name only with --create"
        );
    }
}
