//! BOINC's XML dialect: a lenient pull reader, a writer in the official layout, and the
//! error and warning types every document shares.
//!
//! Documents are read with [`XmlReader`] and written with [`XmlWriter`]; each document module
//! (state file, preferences, scheduler RPC, …) converts between them and its domain types. A
//! conversion returns the value plus a list of [`Warning`]s: unknown elements, values that did
//! not parse, values clamped into range. Only text that is not XML, a document cut short, or a
//! missing mandatory element is an [`XmlError`].

mod reader;
mod writer;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

pub use reader::{Num, Tag, XmlReader, MAX_KEPT_UNKNOWN, MAX_TEXT_LEN};
pub(crate) use writer::push_escaped;
pub use writer::XmlWriter;

/// Something odd but survivable in a document: the value read is still usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The document, as named by whoever read it (usually the file name).
    pub file: Arc<str>,
    /// 1-based line of the element the warning is about.
    pub line: usize,
    /// The element's name.
    pub element: String,
    /// What happened, in words.
    pub message: String,
}

impl Warning {
    /// A key under which repeats of the same warning collapse: the same element and message in
    /// the same file, whatever the line. Used to log each kind of oddity once.
    pub fn dedup_key(&self) -> (Arc<str>, &str, &str) {
        (
            self.file.clone(),
            self.element.as_str(),
            self.message.as_str(),
        )
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: <{}>: {}",
            self.file, self.line, self.element, self.message
        )
    }
}

/// A document that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XmlError {
    /// The text is not well-formed XML.
    #[error("{file}:{line}: not well-formed XML: {message}")]
    Malformed {
        /// The document.
        file: Arc<str>,
        /// 1-based line where the parser stopped.
        line: usize,
        /// The parser's description.
        message: String,
    },
    /// The text ends inside an element: a file cut short by a crash or a full disk.
    #[error("{file}:{line}: document ends inside <{element}> (cut short?)")]
    Truncated {
        /// The document.
        file: Arc<str>,
        /// The last line.
        line: usize,
        /// The innermost element still open.
        element: String,
    },
    /// The root element is not the one this document type has.
    #[error("{file}:{line}: expected <{expected}> as the root element, found <{found}>")]
    WrongRoot {
        /// The document.
        file: Arc<str>,
        /// Line of the root element found.
        line: usize,
        /// The expected root name(s).
        expected: String,
        /// The root name found.
        found: String,
    },
    /// A mandatory element is missing.
    #[error("{file}:{line}: <{parent}> has no <{element}>, which it must have")]
    MissingElement {
        /// The document.
        file: Arc<str>,
        /// Line where `parent` starts.
        line: usize,
        /// The element that lacks a child.
        parent: String,
        /// The missing child.
        element: String,
    },
}

/// A value read from a document, with what was odd about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed<T> {
    /// The value.
    pub value: T,
    /// Everything survivable that was odd.
    pub warnings: Vec<Warning>,
}

/// Reads a whole document whose root element is `root`: `read` consumes the root's content,
/// and anything after the root is reported as a warning.
pub fn parse_document<T>(
    text: &str,
    file: &str,
    root: &str,
    read: impl FnOnce(&mut XmlReader<'_>, &Tag<'_>) -> Result<T, XmlError>,
) -> Result<Parsed<T>, XmlError> {
    let mut r = XmlReader::new(text, file);
    let tag = r.root(root)?;
    let value = read(&mut r, &tag)?;
    let warnings = r.finish()?;
    Ok(Parsed { value, warnings })
}

/// Writes a whole document with `write`.
pub fn write_document(write: impl FnOnce(&mut XmlWriter)) -> String {
    let mut w = XmlWriter::new();
    write(&mut w);
    w.finish()
}

/// `text` escaped for element content: `<`, `>` and `&` (what [`XmlWriter::text`] writes;
/// quotes need no escape outside attributes). Borrowed when there is nothing to escape.
pub fn escape(text: &str) -> Cow<'_, str> {
    if memchr::memchr3(b'<', b'>', b'&', text.as_bytes()).is_none() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    push_escaped(&mut out, text);
    Cow::Owned(out)
}

/// `text` with the five predefined entities (`&lt;` `&gt;` `&amp;` `&quot;` `&apos;`) and
/// numeric character references decoded. Anything else, a bare `&` or an unknown entity, is
/// kept as it is, as BOINC's `xml_unescape` keeps it (URLs with a bare `&` are common).
/// Borrowed when there is no `&`.
pub fn unescape(text: &str) -> Cow<'_, str> {
    if !text.contains('&') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        match decode_entity(tail) {
            Some((c, len)) => {
                out.push(c);
                rest = &tail[len..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The character an entity at the start of `s` (which starts with `&`) stands for, and the
/// entity's length in bytes; `None` when it is not one [`unescape`] decodes.
fn decode_entity(s: &str) -> Option<(char, usize)> {
    // The longest decoded entity is `&#x10FFFF;` (10 bytes) or `&#1114111;`.
    let end = s.as_bytes().iter().take(12).position(|&b| b == b';')?;
    let name = &s[1..end];
    let c = match name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        "apos" => '\'',
        _ => {
            let num = name.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse::<u32>().ok()?,
            };
            char::from_u32(code)?
        }
    };
    Some((c, end + 1))
}

/// Formats a double the way BOINC's `%f` does: six decimals.
pub fn fmt_f64(v: f64) -> String {
    format!("{v:.6}")
}

#[cfg(test)]
mod tests;
