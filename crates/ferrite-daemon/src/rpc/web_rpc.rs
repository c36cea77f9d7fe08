//! The replies of the attach wizard's web RPC polls (`lookup_account_poll`,
//! `create_account_poll`, `get_project_config_poll`), laid out as the official client's
//! `handle_*_poll` write them: a nonzero error number as `<error_num>`, otherwise what the
//! project answered from its own element on; with no operation started (or an answer without
//! that element), an empty `<account_out/>` / `<project_config/>`, and nothing at all for
//! `create_account_poll` (the official client passes on the project's whole reply there,
//! empty when none; Ferrite passes it on from `<account_out>` or `<error>`, as for
//! `lookup_account_poll`).

use crate::projects::{WebRpcKind, WebRpcState, ERR_IN_PROGRESS};

/// The poll's reply for the web RPC of `kind` in state `state`.
pub(crate) fn poll_reply(kind: WebRpcKind, state: &WebRpcState) -> String {
    let error = |n: i32| {
        let tag = match kind {
            WebRpcKind::ProjectConfig => "project_config",
            _ => "account_out",
        };
        format!("<{tag}>\n    <error_num>{n}</error_num>\n</{tag}>\n")
    };
    let text = match state {
        WebRpcState::Pending => return error(ERR_IN_PROGRESS),
        WebRpcState::Failed(n) if *n != 0 => return error(*n),
        WebRpcState::Failed(_) | WebRpcState::Idle => "",
        WebRpcState::Done(text) => text.as_str(),
    };
    match kind {
        WebRpcKind::ProjectConfig => text.find("<project_config").map_or_else(
            || "<project_config/>\n".to_owned(),
            |i| text[i..].to_owned(),
        ),
        WebRpcKind::LookupAccount | WebRpcKind::CreateAccount => {
            let empty = match kind {
                WebRpcKind::LookupAccount => "<account_out/>\n",
                _ => "",
            };
            text.find("<account_out")
                .or_else(|| text.find("<error"))
                .map_or_else(|| empty.to_owned(), |i| text[i..].to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_started_answers_as_the_official_client() {
        let idle = WebRpcState::Idle;
        assert_eq!(
            poll_reply(WebRpcKind::LookupAccount, &idle),
            "<account_out/>\n"
        );
        assert_eq!(
            poll_reply(WebRpcKind::ProjectConfig, &idle),
            "<project_config/>\n"
        );
        assert_eq!(poll_reply(WebRpcKind::CreateAccount, &idle), "");
    }

    #[test]
    fn errors_and_answers() {
        assert_eq!(
            poll_reply(WebRpcKind::CreateAccount, &WebRpcState::Pending),
            format!(
                "<account_out>\n    <error_num>{ERR_IN_PROGRESS}</error_num>\n</account_out>\n"
            )
        );
        assert_eq!(
            poll_reply(WebRpcKind::ProjectConfig, &WebRpcState::Failed(-113)),
            "<project_config>\n    <error_num>-113</error_num>\n</project_config>\n"
        );
        let done = WebRpcState::Done(
            "<?xml version=\"1.0\"?>\n<account_out>\n<authenticator>k</authenticator>\n</account_out>\n"
                .to_owned(),
        );
        assert_eq!(
            poll_reply(WebRpcKind::LookupAccount, &done),
            "<account_out>\n<authenticator>k</authenticator>\n</account_out>\n"
        );
        let refused = WebRpcState::Done("<error><error_num>-136</error_num></error>\n".to_owned());
        assert_eq!(
            poll_reply(WebRpcKind::LookupAccount, &refused),
            "<error><error_num>-136</error_num></error>\n"
        );
        assert_eq!(
            poll_reply(
                WebRpcKind::ProjectConfig,
                &WebRpcState::Done("junk".to_owned())
            ),
            "<project_config/>\n"
        );
    }
}
