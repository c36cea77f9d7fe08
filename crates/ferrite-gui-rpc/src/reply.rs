//! Reply bodies and their framing.
//!
//! A reply on the wire is `<boinc_gui_rpc_reply>\n` + body + `</boinc_gui_rpc_reply>\n` + 0x03.
//! Bodies are built by the daemon (state-dependent answers) or by the helpers here; every body
//! ends with a newline, as the official client writes them.

use crate::framing::TERMINATOR;
use crate::xml;

/// Opening line of every reply.
pub const REPLY_OPEN: &str = "<boinc_gui_rpc_reply>\n";
/// Closing line of every reply.
pub const REPLY_CLOSE: &str = "</boinc_gui_rpc_reply>\n";

/// `<success/>`.
pub const SUCCESS: &str = "<success/>\n";
/// `<unauthorized/>`.
pub const UNAUTHORIZED: &str = "<unauthorized/>\n";
/// `<authorized/>`.
pub const AUTHORIZED: &str = "<authorized/>\n";

/// Wraps a body into a complete framed reply, 0x03 included.
pub fn frame(body: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(REPLY_OPEN.len() + body.len() + REPLY_CLOSE.len() + 1);
    out.extend_from_slice(REPLY_OPEN.as_bytes());
    out.extend_from_slice(body.as_bytes());
    out.extend_from_slice(REPLY_CLOSE.as_bytes());
    out.push(TERMINATOR);
    out
}

/// `<error>text</error>` with `text` escaped.
pub fn error(text: &str) -> String {
    format!("<error>{}</error>\n", xml::escape(text))
}

/// `<status>N</status>`, the result of the `set_*` file RPCs on failure.
pub fn status(code: i32) -> String {
    format!("<status>{code}</status>\n")
}

/// Takes a received reply (without its 0x03) apart: the body between the reply tags.
/// Returns `None` when the reply tags are missing.
pub fn unframe(reply: &str) -> Option<&str> {
    let start = reply.find("<boinc_gui_rpc_reply>")? + "<boinc_gui_rpc_reply>".len();
    let end = reply.rfind("</boinc_gui_rpc_reply>")?;
    let body = reply.get(start..end)?;
    Some(body.strip_prefix('\n').unwrap_or(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_matches_the_official_bytes() {
        assert_eq!(
            frame(SUCCESS),
            b"<boinc_gui_rpc_reply>\n<success/>\n</boinc_gui_rpc_reply>\n\x03".to_vec()
        );
        assert_eq!(frame(UNAUTHORIZED).len(), 62);
        assert_eq!(frame(AUTHORIZED).len(), 60);
        assert_eq!(error("No such file"), "<error>No such file</error>\n");
        assert_eq!(error("a<b"), "<error>a&lt;b</error>\n");
    }

    #[test]
    fn unframe_returns_the_body() {
        let framed = String::from_utf8(frame("<seqno>40</seqno>\n")).unwrap_or_default();
        let framed = framed.trim_end_matches('\u{3}');
        assert_eq!(unframe(framed), Some("<seqno>40</seqno>\n"));
        assert_eq!(unframe("garbage"), None);
    }
}
