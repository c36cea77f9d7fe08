//! A pull reader for BOINC's XML dialect.
//!
//! BOINC documents are flat, tag-per-value XML: `<rpc_seqno>3</rpc_seqno>`, flags written as
//! `<sticky/>` or `<sticky>1</sticky>`, a few blocks kept verbatim (`<code_sign_key>`,
//! `<stderr_out>` in CDATA). The official client is lenient: it ignores tags it does not know
//! and survives values it cannot parse. [`XmlReader`] gives document code that leniency without
//! losing track of what happened: it walks one element's children at a time, parses leaf values,
//! and records every oddity as a [`Warning`] carrying the file, the element and the line. Only a
//! document that is not XML (or is cut short) is an error.
//!
//! The reader borrows the source text and never builds a tree, so loading a 10,000-task state
//! file is a single pass.

use std::borrow::Cow;
use std::str::FromStr;
use std::sync::Arc;

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use super::{Warning, XmlError};

/// Longest text value kept in full; longer values are cut to this length with a warning.
/// BOINC itself caps `stderr_out` at 64 KiB, and no scalar comes near this.
pub const MAX_TEXT_LEN: usize = 1 << 20;

/// Largest unknown element kept verbatim for writing back; larger ones are dropped with a
/// warning rather than carried in every later save.
pub const MAX_KEPT_UNKNOWN: usize = 64 << 10;

/// An element start (or an empty element) handed out by [`XmlReader::next_child`].
#[derive(Debug, Clone)]
pub struct Tag<'a> {
    start: BytesStart<'a>,
    /// `<x/>`: there is no content and no end tag to consume.
    empty: bool,
    /// Byte offset of the `<` that opens the element, for line numbers and raw capture.
    offset: usize,
    /// The element's name, sliced from the source.
    name: &'a str,
}

impl<'a> Tag<'a> {
    /// The element's name, as written (BOINC uses no namespaces).
    pub fn name(&self) -> &str {
        self.name
    }

    /// Whether the element was written as `<x/>`.
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// Byte offset of the element in the source.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The value of attribute `key`, unescaped, if present and well-formed.
    pub fn attr(&self, key: &str) -> Option<String> {
        self.start
            .attributes()
            .flatten()
            .find(|a| a.key.as_ref() == key.as_bytes())
            .and_then(|a| a.unescape_value().ok().map(Cow::into_owned))
    }
}

/// A lenient pull reader over one BOINC XML document.
#[derive(Debug)]
pub struct XmlReader<'a> {
    src: &'a str,
    inner: Reader<&'a [u8]>,
    file: Arc<str>,
    warnings: Vec<Warning>,
    /// Names of the elements currently open, for error messages about truncation.
    open: Vec<&'a str>,
}

impl<'a> XmlReader<'a> {
    /// A reader over `src`; `file` names the document in errors and warnings.
    pub fn new(src: &'a str, file: impl Into<Arc<str>>) -> Self {
        let mut inner = Reader::from_str(src);
        let cfg = inner.config_mut();
        cfg.trim_text(false);
        cfg.check_end_names = true;
        cfg.expand_empty_elements = false;
        Self {
            src,
            inner,
            file: file.into(),
            warnings: Vec::new(),
            open: Vec::new(),
        }
    }

    /// The element name of `tag` as a slice of the source (no allocation).
    fn name_of(&self, tag: &Tag<'a>) -> &'a str {
        tag.name
    }

    /// A tag for an element starting at byte `offset`; its name is sliced from the source
    /// (which is valid UTF-8 already), not re-validated.
    fn tag(&self, start: BytesStart<'a>, empty: bool, offset: usize) -> Tag<'a> {
        let len = start.name().as_ref().len();
        let from = offset + 1;
        let src: &'a str = self.src;
        let name = src.get(from..from + len).unwrap_or("?");
        Tag {
            start,
            empty,
            offset,
            name,
        }
    }

    /// The unescaped text that started at byte `at` and ends where the reader now is,
    /// borrowed from the source when it has no entities.
    fn borrowed_text(&self, at: usize) -> Option<Cow<'a, str>> {
        let src: &'a str = self.src;
        let raw = src.get(at..self.pos())?;
        quick_xml::escape::unescape(raw).ok()
    }

    /// The name of the document being read.
    pub fn file(&self) -> &Arc<str> {
        &self.file
    }

    /// The 1-based line of byte offset `offset`.
    pub fn line_at(&self, offset: usize) -> usize {
        let end = offset.min(self.src.len());
        1 + memchr_count(b'\n', &self.src.as_bytes()[..end])
    }

    fn pos(&self) -> usize {
        usize::try_from(self.inner.buffer_position()).unwrap_or(usize::MAX)
    }

    fn malformed(&self, err: impl std::fmt::Display) -> XmlError {
        let at = usize::try_from(self.inner.error_position()).unwrap_or(0);
        XmlError::Malformed {
            file: self.file.clone(),
            line: self.line_at(at),
            message: err.to_string(),
        }
    }

    fn truncated(&self) -> XmlError {
        XmlError::Truncated {
            file: self.file.clone(),
            line: self.line_at(self.src.len()),
            element: self
                .open
                .last()
                .map(|n| (*n).to_owned())
                .unwrap_or_default(),
        }
    }

    fn event(&mut self) -> Result<(usize, Event<'a>), XmlError> {
        let at = self.pos();
        match self.inner.read_event() {
            Ok(ev) => Ok((at, ev)),
            Err(e) => Err(self.malformed(e)),
        }
    }

    /// Opens the document: skips the XML declaration, comments and white space, and returns
    /// the root element, which must be named `expected`.
    pub fn root(&mut self, expected: &str) -> Result<Tag<'a>, XmlError> {
        self.root_any(&[expected])
    }

    /// Like [`root`](Self::root), accepting any of several root names.
    pub fn root_any(&mut self, expected: &[&str]) -> Result<Tag<'a>, XmlError> {
        loop {
            let (offset, ev) = self.event()?;
            let (start, empty) = match ev {
                Event::Start(s) => (s, false),
                Event::Empty(s) => (s, true),
                Event::Eof => {
                    return Err(XmlError::MissingElement {
                        file: self.file.clone(),
                        line: self.line_at(offset),
                        parent: "document".into(),
                        element: expected.first().copied().unwrap_or("").into(),
                    })
                }
                Event::Text(t) if !is_blank(&t) => {
                    return Err(XmlError::Malformed {
                        file: self.file.clone(),
                        line: self.line_at(offset),
                        message: "text before the root element".into(),
                    })
                }
                _ => continue,
            };
            let tag = self.tag(start, empty, offset);
            if !expected.contains(&tag.name()) {
                return Err(XmlError::WrongRoot {
                    file: self.file.clone(),
                    line: self.line_at(offset),
                    expected: expected.join("> or <"),
                    found: tag.name().to_owned(),
                });
            }
            if !empty {
                self.open.push(self.name_of(&tag));
            }
            return Ok(tag);
        }
    }

    /// The next child element of the element currently open, or `None` at its end tag.
    ///
    /// Stray text between children is ignored; the end of the document inside an open element
    /// is [`XmlError::Truncated`]. The caller must consume each returned child (with a value
    /// method, [`skip`](Self::skip), or by reading its own children to their end).
    pub fn next_child(&mut self) -> Result<Option<Tag<'a>>, XmlError> {
        loop {
            let (offset, ev) = self.event()?;
            match ev {
                Event::Start(start) => {
                    let tag = self.tag(start, false, offset);
                    self.open.push(self.name_of(&tag));
                    return Ok(Some(tag));
                }
                Event::Empty(start) => return Ok(Some(self.tag(start, true, offset))),
                Event::End(_) => {
                    self.open.pop();
                    return Ok(None);
                }
                Event::Eof => {
                    if self.open.is_empty() {
                        return Ok(None);
                    }
                    return Err(self.truncated());
                }
                _ => continue,
            }
        }
    }

    /// Skips the rest of `tag` (its content and end tag).
    pub fn skip(&mut self, tag: &Tag<'a>) -> Result<(), XmlError> {
        self.raw_span(tag).map(|_| ())
    }

    /// Skips `tag` and returns its whole source text, from `<` to the end of its end tag.
    pub fn raw(&mut self, tag: &Tag<'a>) -> Result<&'a str, XmlError> {
        let (_, end) = self.raw_span(tag)?;
        Ok(&self.src[tag.offset..end])
    }

    /// Skips `tag` and returns the source text between its start and end tags.
    pub fn inner_raw(&mut self, tag: &Tag<'a>) -> Result<&'a str, XmlError> {
        let (inner, _) = self.raw_span(tag)?;
        Ok(&self.src[inner.0..inner.1])
    }

    /// Consumes `tag`; returns ((content start, content end), element end).
    fn raw_span(&mut self, tag: &Tag<'a>) -> Result<((usize, usize), usize), XmlError> {
        if tag.empty {
            let end = self.pos();
            return Ok(((end, end), end));
        }
        let content_start = self.pos();
        let mut depth = 0usize;
        loop {
            let (at, ev) = self.event()?;
            match ev {
                Event::Start(_) => depth += 1,
                Event::End(_) if depth == 0 => {
                    self.open.pop();
                    return Ok(((content_start, at), self.pos()));
                }
                Event::End(_) => depth -= 1,
                Event::Eof => return Err(self.truncated()),
                _ => {}
            }
        }
    }

    /// Reads the text content of `tag` (unescaped; CDATA kept as is) and consumes its end tag.
    ///
    /// Nested elements inside a text value are skipped with a warning. Text longer than
    /// [`MAX_TEXT_LEN`] is cut with a warning.
    pub fn text(&mut self, tag: &Tag<'a>) -> Result<String, XmlError> {
        Ok(self.scalar(tag)?.into_owned())
    }

    /// Like [`text`](Self::text), but borrowing from the source when the value is a single
    /// plain text node (the common case): numbers and flags are read without allocating.
    fn scalar(&mut self, tag: &Tag<'a>) -> Result<Cow<'a, str>, XmlError> {
        if tag.empty {
            return Ok(Cow::Borrowed(""));
        }
        let (at, ev) = self.event()?;
        match ev {
            Event::End(_) => {
                self.open.pop();
                Ok(Cow::Borrowed(""))
            }
            Event::Text(t) => match self.borrowed_text(at) {
                Some(v) => {
                    let (at2, ev2) = self.event()?;
                    if matches!(ev2, Event::End(_)) && v.len() <= MAX_TEXT_LEN {
                        self.open.pop();
                        return Ok(v);
                    }
                    let mut acc = TextAcc::default();
                    acc.push(&v);
                    self.text_loop(tag, acc, Some((at2, ev2))).map(Cow::Owned)
                }
                None => self
                    .text_loop(tag, TextAcc::default(), Some((at, Event::Text(t))))
                    .map(Cow::Owned),
            },
            other => self
                .text_loop(tag, TextAcc::default(), Some((at, other)))
                .map(Cow::Owned),
        }
    }

    /// The general text reader: gathers text and CDATA pieces up to the end tag, starting
    /// with `pending` when given.
    fn text_loop(
        &mut self,
        tag: &Tag<'a>,
        mut acc: TextAcc,
        mut pending: Option<(usize, Event<'a>)>,
    ) -> Result<String, XmlError> {
        loop {
            let (at, ev) = match pending.take() {
                Some(p) => p,
                None => self.event()?,
            };
            match ev {
                Event::Text(t) => match t.unescape() {
                    Ok(s) => acc.push(&s),
                    Err(_) => {
                        // BOINC writes some values unescaped; keep the raw text.
                        self.warn_at(
                            at,
                            tag.name(),
                            "invalid character reference; kept as written",
                        );
                        acc.push(&String::from_utf8_lossy(&t.into_inner()));
                    }
                },
                Event::CData(c) => acc.push(&String::from_utf8_lossy(&c.into_inner())),
                Event::Start(inner) => {
                    let child = self.tag(inner, false, at);
                    self.open.push(self.name_of(&child));
                    let msg = format!(
                        "unexpected element <{}> inside a value; ignored",
                        child.name()
                    );
                    self.warn_at(at, tag.name(), msg);
                    self.skip(&child)?;
                }
                Event::End(_) => {
                    self.open.pop();
                    break;
                }
                Event::Eof => return Err(self.truncated()),
                _ => {}
            }
        }
        if acc.cut {
            let msg = format!("value longer than {MAX_TEXT_LEN} bytes; cut");
            self.warn_at(tag.offset, tag.name(), msg);
        }
        Ok(acc.out)
    }

    /// The trimmed text of `tag`.
    pub fn string(&mut self, tag: &Tag<'a>) -> Result<String, XmlError> {
        let s = self.scalar(tag)?;
        let t = s.trim();
        Ok(if t.len() == s.len() {
            s.into_owned()
        } else {
            t.to_owned()
        })
    }

    /// A number; an unparsable value gives `None` and a warning.
    pub fn num<T: Num>(&mut self, tag: &Tag<'a>) -> Result<Option<T>, XmlError> {
        let s = self.scalar(tag)?;
        let t = s.trim();
        match T::parse_lenient(t) {
            Some(v) => Ok(Some(v)),
            None => {
                let msg = format!("'{}' is not {}; ignored", shorten(t), T::WHAT);
                self.warn_at(tag.offset, tag.name(), msg);
                Ok(None)
            }
        }
    }

    /// A number, or `default` (with a warning) when unparsable.
    pub fn num_or<T: Num>(&mut self, tag: &Tag<'a>, default: T) -> Result<T, XmlError> {
        Ok(self.num(tag)?.unwrap_or(default))
    }

    /// A number clamped into `[min, max]`, with a warning when clamped. Unparsable → `None`.
    pub fn num_clamped<T: Num + PartialOrd + std::fmt::Display>(
        &mut self,
        tag: &Tag<'a>,
        min: T,
        max: T,
    ) -> Result<Option<T>, XmlError> {
        let Some(v) = self.num::<T>(tag)? else {
            return Ok(None);
        };
        let c = if v < min {
            min
        } else if v > max {
            max
        } else {
            return Ok(Some(v));
        };
        let msg = format!("{v} is out of range [{min}, {max}]; clamped to {c}");
        self.warn_at(tag.offset, tag.name(), msg);
        Ok(Some(c))
    }

    /// A BOINC boolean: `<x/>` is true; `<x>0</x>` false; any other number true; text
    /// `true`/`false` accepted.
    pub fn flag(&mut self, tag: &Tag<'a>) -> Result<bool, XmlError> {
        if tag.empty {
            return Ok(true);
        }
        let s = self.scalar(tag)?;
        let t = s.trim();
        if t.is_empty() {
            return Ok(true);
        }
        if let Some(n) = f64::parse_lenient(t) {
            return Ok(n != 0.0);
        }
        match t.to_ascii_lowercase().as_str() {
            "true" | "yes" => Ok(true),
            "false" | "no" => Ok(false),
            _ => {
                let msg = format!("'{}' is not a boolean; taken as true", shorten(t));
                self.warn_at(tag.offset, tag.name(), msg);
                Ok(true)
            }
        }
    }

    /// Skips an element this document does not know, with a warning.
    pub fn unknown(&mut self, tag: &Tag<'a>, parent: &str) -> Result<(), XmlError> {
        self.warn_at(
            tag.offset,
            tag.name(),
            format!("unknown element in <{parent}>; ignored"),
        );
        self.skip(tag)
    }

    /// Consumes an element this document does not know and returns its source text so it can
    /// be written back unchanged; elements over [`MAX_KEPT_UNKNOWN`] are dropped.
    pub fn keep_unknown(
        &mut self,
        tag: &Tag<'a>,
        parent: &str,
    ) -> Result<Option<String>, XmlError> {
        let raw = self.raw(tag)?;
        if raw.len() > MAX_KEPT_UNKNOWN {
            let msg = format!(
                "unknown element in <{parent}> of {} bytes is over {MAX_KEPT_UNKNOWN}; dropped",
                raw.len()
            );
            self.warn_at(tag.offset, tag.name(), msg);
            return Ok(None);
        }
        self.warn_at(
            tag.offset,
            tag.name(),
            format!("unknown element in <{parent}>; kept as is"),
        );
        Ok(Some(raw.to_owned()))
    }

    /// The error for a mandatory child `element` missing from `parent`, which opened at
    /// `parent_offset`.
    pub fn missing(&self, parent: &Tag<'_>, element: &str) -> XmlError {
        XmlError::MissingElement {
            file: self.file.clone(),
            line: self.line_at(parent.offset),
            parent: parent.name().to_owned(),
            element: element.to_owned(),
        }
    }

    /// Records a warning about `element` at byte `offset`.
    pub fn warn_at(&mut self, offset: usize, element: &str, message: impl Into<String>) {
        let line = self.line_at(offset);
        self.warnings.push(Warning {
            file: self.file.clone(),
            line,
            element: element.to_owned(),
            message: message.into(),
        });
    }

    /// Records a warning about `tag`.
    pub fn warn(&mut self, tag: &Tag<'_>, message: impl Into<String>) {
        self.warn_at(tag.offset, tag.name(), message)
    }

    /// The warnings recorded so far, leaving none behind.
    pub fn take_warnings(&mut self) -> Vec<Warning> {
        std::mem::take(&mut self.warnings)
    }

    /// Checks that nothing but white space and comments follows the root element.
    pub fn finish(&mut self) -> Result<Vec<Warning>, XmlError> {
        loop {
            let (offset, ev) = self.event()?;
            match ev {
                Event::Eof => break,
                Event::Start(_) | Event::Empty(_) => {
                    self.warn_at(
                        offset,
                        "document",
                        "content after the root element; ignored",
                    );
                    break;
                }
                _ => {}
            }
        }
        Ok(self.take_warnings())
    }
}

/// A text value being gathered, cut at [`MAX_TEXT_LEN`].
#[derive(Default)]
struct TextAcc {
    out: String,
    cut: bool,
}

impl TextAcc {
    fn push(&mut self, piece: &str) {
        if self.cut {
            return;
        }
        if self.out.len() + piece.len() > MAX_TEXT_LEN {
            let room = MAX_TEXT_LEN.saturating_sub(self.out.len());
            self.out.push_str(floor_slice(piece, room));
            self.cut = true;
        } else {
            self.out.push_str(piece);
        }
    }
}

fn is_blank(t: &quick_xml::events::BytesText<'_>) -> bool {
    t.iter().all(u8::is_ascii_whitespace)
}

fn memchr_count(needle: u8, hay: &[u8]) -> usize {
    hay.iter().filter(|&&b| b == needle).count()
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn floor_slice(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn shorten(s: &str) -> String {
    const MAX: usize = 60;
    if s.len() <= MAX {
        s.to_owned()
    } else {
        format!("{}…", floor_slice(s, MAX))
    }
}

/// Numbers as BOINC writes them, parsed the way its `strtol`/`atof` calls accept them.
pub trait Num: Copy {
    /// What the value should have been, for warnings ("a number", "an integer").
    const WHAT: &'static str;
    /// Parses `s`, accepting what BOINC accepts (`1.000000` as an integer, `1e9`, `nan` not).
    fn parse_lenient(s: &str) -> Option<Self>;
}

impl Num for f64 {
    const WHAT: &'static str = "a number";
    fn parse_lenient(s: &str) -> Option<Self> {
        let v = f64::from_str(s).ok()?;
        v.is_finite().then_some(v)
    }
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const WHAT: &'static str = "an integer";
            fn parse_lenient(s: &str) -> Option<Self> {
                if let Ok(v) = <$t>::from_str(s) {
                    return Some(v);
                }
                // BOINC writes some integers with "%f"; accept an integral float in range.
                let f = f64::parse_lenient(s)?;
                let t = f.trunc();
                (t >= <$t>::MIN as f64 && t <= <$t>::MAX as f64).then_some(t as $t)
            }
        }
    )*};
}
int_num!(i32, i64, u32, u64, usize, u8);
