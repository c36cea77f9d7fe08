//! A small, forgiving reader for GUI RPC request XML, and text escaping for replies.
//!
//! The official client reads requests tag by tag and never rejects malformed XML, and GUIs
//! rely on that (boinctui sends whole requests on one line, some clients leave tags open).
//! This module therefore turns the request into a tree of elements without ever failing:
//! unclosed elements end at the end of input, stray end tags are skipped. Each element keeps
//! the byte range of its content so that operations carrying whole documents
//! (`set_cc_config`, `set_global_prefs_override`, `set_app_config`) can pass them on verbatim.

use std::borrow::Cow;
use std::collections::HashMap;

/// One lexical item of the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Token<'a> {
    /// `<name …>`; `end` is the byte offset just after the `>`.
    Start { name: &'a str, end: usize },
    /// `<name …/>`.
    Empty { name: &'a str },
    /// `</name>`; `start` is the byte offset of the `<`.
    End { name: &'a str, start: usize },
    /// Character data, still escaped.
    Text(&'a str),
    /// The content of a `<![CDATA[…]]>` section.
    CData(&'a str),
}

/// Splits `input` into tokens; comments, processing instructions and doctypes are skipped.
pub(crate) fn tokenize(input: &str) -> Vec<Token<'_>> {
    let bytes = input.as_bytes();
    let mut tokens = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        if bytes[pos] != b'<' {
            let end = input[pos..].find('<').map_or(input.len(), |i| pos + i);
            tokens.push(Token::Text(&input[pos..end]));
            pos = end;
            continue;
        }
        let rest = &input[pos..];
        if let Some(body) = rest.strip_prefix("<![CDATA[") {
            let len = body.find("]]>").unwrap_or(body.len());
            tokens.push(Token::CData(&body[..len]));
            pos += "<![CDATA[".len() + len + "]]>".len().min(body.len() - len);
            continue;
        }
        if rest.starts_with("<!--") {
            pos += rest.find("-->").map_or(rest.len(), |i| i + 3);
            continue;
        }
        if rest.starts_with("<?") || rest.starts_with("<!") {
            pos += rest.find('>').map_or(rest.len(), |i| i + 1);
            continue;
        }
        let Some(close) = rest.find('>') else {
            // An unterminated tag: treat the rest as text, as a tag-oriented reader would.
            tokens.push(Token::Text(rest));
            break;
        };
        let inner = &rest[1..close];
        let tag_end = pos + close + 1;
        if let Some(name) = inner.strip_prefix('/') {
            tokens.push(Token::End {
                name: name.trim(),
                start: pos,
            });
        } else if let Some(inner) = inner.strip_suffix('/') {
            tokens.push(Token::Empty {
                name: tag_name(inner),
            });
        } else {
            tokens.push(Token::Start {
                name: tag_name(inner),
                end: tag_end,
            });
        }
        pos = tag_end;
    }
    tokens
}

/// The element name of a tag's inside (`name attr="…"` → `name`).
fn tag_name(inner: &str) -> &str {
    let inner = inner.trim_start();
    inner
        .split(|c: char| c.is_ascii_whitespace())
        .next()
        .unwrap_or(inner)
}

/// An element of the request tree.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Element<'a> {
    /// Tag name.
    pub name: &'a str,
    /// Whether it was written `<name/>` (the op name then keeps a trailing `/`).
    pub self_closing: bool,
    /// Child elements in document order.
    pub children: Vec<Element<'a>>,
    /// Unescaped character data directly inside this element (CDATA included).
    pub text: String,
    /// The raw bytes between the start and end tags (empty for `<name/>`).
    pub raw: &'a str,
}

impl<'a> Element<'a> {
    /// The first child named `name`.
    pub fn child(&self, name: &str) -> Option<&Element<'a>> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Trimmed text of the first child named `name`.
    pub fn child_text(&self, name: &str) -> Option<&str> {
        self.child(name).map(|c| c.text.trim())
    }

    /// BOINC's boolean convention: `<x/>` and `<x>1</x>` are true, `<x>0</x>` is false,
    /// absence is false.
    pub fn flag(&self, name: &str) -> bool {
        self.child(name)
            .is_some_and(|c| c.self_closing || c.text.trim().parse::<i64>() != Ok(0))
    }
}

/// Elements nested deeper than this are not opened (their tags are skipped, their text goes
/// to the deepest open element). Requests nest a few levels; a tree as deep as a 100 kB
/// request allows (33,000 levels) would overflow a 2 MiB thread stack when dropped.
const MAX_DEPTH: usize = 256;

/// A node produced while building the tree: `open` holds the element and the offset where its
/// content begins.
struct Open<'a> {
    element: Element<'a>,
    content_start: usize,
}

/// Builds the forest of top-level elements from tokens, plus any top-level text (which the
/// official reader reports as if it were a tag name).
pub(crate) fn parse_forest<'a>(input: &'a str, tokens: &[Token<'a>]) -> Vec<TopItem<'a>> {
    let mut top = Vec::new();
    let mut stack: Vec<Open<'a>> = Vec::new();
    // How many elements of each name are open: an end tag matching none is skipped without
    // searching the stack (a request of stray end tags under many open elements would
    // otherwise cost depth × end tags).
    let mut open_names: HashMap<&'a str, usize> = HashMap::new();
    let finish = |stack: &mut Vec<Open<'a>>,
                  open_names: &mut HashMap<&'a str, usize>,
                  top: &mut Vec<TopItem<'a>>,
                  end: usize| {
        if let Some(mut open) = stack.pop() {
            if let Some(n) = open_names.get_mut(open.element.name) {
                *n = n.saturating_sub(1);
            }
            open.element.raw = input.get(open.content_start..end).unwrap_or("");
            match stack.last_mut() {
                Some(parent) => parent.element.children.push(open.element),
                None => top.push(TopItem::Element(open.element)),
            }
        }
    };
    for token in tokens {
        match *token {
            Token::Start { .. } if stack.len() >= MAX_DEPTH => {}
            Token::Start { name, end } => {
                *open_names.entry(name).or_insert(0) += 1;
                stack.push(Open {
                    element: Element {
                        name,
                        ..Element::default()
                    },
                    content_start: end,
                });
            }
            Token::Empty { name } => {
                let element = Element {
                    name,
                    self_closing: true,
                    ..Element::default()
                };
                match stack.last_mut() {
                    Some(parent) => parent.element.children.push(element),
                    None => top.push(TopItem::Element(element)),
                }
            }
            Token::End { name, start } => {
                let is_open = open_names.get(name).is_some_and(|n| *n > 0);
                if let Some(depth) = is_open
                    .then(|| stack.iter().rposition(|o| o.element.name == name))
                    .flatten()
                {
                    while stack.len() > depth {
                        finish(&mut stack, &mut open_names, &mut top, start);
                    }
                } else if stack.is_empty() {
                    top.push(TopItem::StrayEnd(name));
                }
            }
            Token::Text(text) => match stack.last_mut() {
                Some(open) => open.element.text.push_str(&unescape(text)),
                None if !text.trim().is_empty() => top.push(TopItem::Text(text.trim())),
                None => {}
            },
            Token::CData(text) => {
                if let Some(open) = stack.last_mut() {
                    open.element.text.push_str(text);
                }
            }
        }
    }
    while !stack.is_empty() {
        finish(&mut stack, &mut open_names, &mut top, input.len());
    }
    top
}

/// An item at the top level of a document, or of an element's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TopItem<'a> {
    Element(Element<'a>),
    Text(&'a str),
    StrayEnd(&'a str),
}

/// Decodes the five predefined entities and numeric references; anything else is kept as is
/// (URLs with a bare `&` are common in hand-written requests). This crate and `ferrite`, which
/// uses only this crate, do not link `ferrite-proto`; every other crate escapes and unescapes
/// through `ferrite_proto::xml`.
pub fn unescape(text: &str) -> Cow<'_, str> {
    if !text.contains('&') {
        return Cow::Borrowed(text);
    }
    quick_xml::escape::unescape(text).unwrap_or_else(|_| Cow::Owned(text.to_owned()))
}

/// Escapes text for element content (`&`, `<`, `>`, and quotes).
pub fn escape(text: &str) -> Cow<'_, str> {
    quick_xml::escape::escape(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forest(input: &str) -> Vec<TopItem<'_>> {
        parse_forest(input, &tokenize(input))
    }

    #[test]
    fn nested_elements_with_text_and_raw_content() {
        let input = "<a>\n<b>x &amp; y</b><c/><d>1</d></a>";
        let items = forest(input);
        let TopItem::Element(a) = &items[0] else {
            panic!("expected an element, got {items:?}");
        };
        assert_eq!(a.name, "a");
        assert_eq!(a.child_text("b"), Some("x & y"));
        assert!(a.flag("c"));
        assert!(a.flag("d"));
        assert!(!a.flag("e"));
        assert_eq!(a.raw, "\n<b>x &amp; y</b><c/><d>1</d>");
    }

    #[test]
    fn unclosed_and_stray_tags_do_not_fail() {
        let input = "<a><b>text</x><c>";
        let items = forest(input);
        let TopItem::Element(a) = &items[0] else {
            panic!("expected an element, got {items:?}");
        };
        assert_eq!(a.child_text("b"), Some("text"));
        assert_eq!(a.children.len(), 1);
        assert_eq!(a.children[0].children[0].name, "c");
    }

    #[test]
    fn cdata_comments_and_declarations() {
        let input = "<?xml version=\"1.0\"?><!-- hi --><a><![CDATA[<raw>]]></a>";
        let items = forest(input);
        let TopItem::Element(a) = &items[0] else {
            panic!("expected an element, got {items:?}");
        };
        assert_eq!(a.text, "<raw>");
    }

    #[test]
    fn bare_ampersand_is_kept() {
        assert_eq!(unescape("http://x/?a=1&b=2"), "http://x/?a=1&b=2");
        assert_eq!(unescape("a &lt; b"), "a < b");
        assert_eq!(escape("<a&b>"), "&lt;a&amp;b&gt;");
    }
}
