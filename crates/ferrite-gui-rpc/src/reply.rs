//! Reply bodies and their framing.
//!
//! A reply on the wire is `<boinc_gui_rpc_reply>\n` + body + `</boinc_gui_rpc_reply>\n` + 0x03.
//! Bodies are built by the daemon (state-dependent answers) or by the helpers here; every body
//! ends with a newline, as the official client writes them.

use bytes::Bytes;

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

/// A reply body as a list of byte pieces, written to the peer one after the other (in
/// vectored writes): text written for this reply, and pieces kept between replies and
/// shared, not copied (a result's head, a line of the event log), so a reply of megabytes
/// costs the daemon no copy of the parts that did not change and no fresh memory for them.
#[derive(Debug, Clone, Default)]
pub struct Body {
    parts: Vec<Bytes>,
    len: usize,
}

impl Body {
    /// An empty body.
    pub fn new() -> Body {
        Body::default()
    }

    /// An empty body with room for `n` pieces.
    pub fn with_capacity(n: usize) -> Body {
        Body {
            parts: Vec::with_capacity(n),
            len: 0,
        }
    }

    /// Appends a piece (an empty one is left out).
    pub fn push(&mut self, piece: Bytes) {
        if !piece.is_empty() {
            self.len += piece.len();
            self.parts.push(piece);
        }
    }

    /// The pieces, in order.
    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// Bytes in all.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the body has no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The body in one piece of text (for callers that want a string: tests, the web API);
    /// bytes that are not UTF-8 are replaced, as a reader of the reply would.
    pub fn to_text(&self) -> String {
        match self.parts.as_slice() {
            [one] => String::from_utf8_lossy(one).into_owned(),
            parts => {
                let mut all = Vec::with_capacity(self.len);
                for p in parts {
                    all.extend_from_slice(p);
                }
                String::from_utf8(all)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
            }
        }
    }
}

impl From<String> for Body {
    fn from(text: String) -> Body {
        let mut b = Body::with_capacity(1);
        b.push(Bytes::from(text));
        b
    }
}

impl From<&'static str> for Body {
    fn from(text: &'static str) -> Body {
        let mut b = Body::with_capacity(1);
        b.push(Bytes::from_static(text.as_bytes()));
        b
    }
}

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
    fn a_body_is_its_pieces_in_order() {
        let shared = Bytes::from_static(b"<result>\n</result>\n");
        let mut b = Body::new();
        b.push(Bytes::from("<results>\n".to_owned()));
        b.push(shared.clone());
        b.push(Bytes::new());
        b.push(shared);
        b.push(Bytes::from_static(b"</results>\n"));
        assert_eq!(b.parts().len(), 4, "the empty piece is left out");
        assert_eq!(
            b.to_text(),
            "<results>\n<result>\n</result>\n<result>\n</result>\n</results>\n"
        );
        assert_eq!(b.len(), b.to_text().len());
        assert!(Body::new().is_empty());
        assert_eq!(Body::from(SUCCESS).to_text(), SUCCESS);
        assert_eq!(Body::from(error("x")).to_text(), "<error>x</error>\n");
        let mut bad = Body::new();
        bad.push(Bytes::from_static(b"a\xffb"));
        bad.push(Bytes::from_static(b"c"));
        assert_eq!(bad.to_text(), "a\u{fffd}bc");
    }

    #[test]
    fn unframe_returns_the_body() {
        let framed = String::from_utf8(frame("<seqno>40</seqno>\n")).unwrap_or_default();
        let framed = framed.trim_end_matches('\u{3}');
        assert_eq!(unframe(framed), Some("<seqno>40</seqno>\n"));
        assert_eq!(unframe("garbage"), None);
    }
}
