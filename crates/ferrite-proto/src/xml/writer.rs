//! Writes BOINC XML in the official layout: one element per line, four-space indentation
//! inside blocks, doubles with six decimals, flags as `<name/>`.

use std::fmt::{Display, Write as _};

use quick_xml::escape::partial_escape;

/// Builds one XML document in a `String`.
#[derive(Debug, Default, Clone)]
pub struct XmlWriter {
    buf: String,
    depth: usize,
}

impl XmlWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer with room for `n` bytes.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            buf: String::with_capacity(n),
            depth: 0,
        }
    }

    fn indent(&mut self) {
        for _ in 0..self.depth {
            self.buf.push_str("    ");
        }
    }

    /// Opens `<name>` on its own line; later elements are indented one level more.
    pub fn open(&mut self, name: &str) -> &mut Self {
        self.indent();
        self.buf.push('<');
        self.buf.push_str(name);
        self.buf.push_str(">\n");
        self.depth += 1;
        self
    }

    /// Opens a top-level block without indenting its children (the state file's layout:
    /// `<client_state>` children start at column 0).
    pub fn open_flat(&mut self, name: &str) -> &mut Self {
        self.indent();
        self.buf.push('<');
        self.buf.push_str(name);
        self.buf.push_str(">\n");
        self
    }

    /// Closes a block opened with [`open_flat`](Self::open_flat).
    pub fn close_flat(&mut self, name: &str) -> &mut Self {
        self.indent();
        self.buf.push_str("</");
        self.buf.push_str(name);
        self.buf.push_str(">\n");
        self
    }

    /// Closes `</name>`.
    pub fn close(&mut self, name: &str) -> &mut Self {
        self.depth = self.depth.saturating_sub(1);
        self.indent();
        self.buf.push_str("</");
        self.buf.push_str(name);
        self.buf.push_str(">\n");
        self
    }

    /// `<name>text</name>` with the text escaped.
    pub fn text(&mut self, name: &str, text: &str) -> &mut Self {
        self.indent();
        let _ = writeln!(self.buf, "<{name}>{}</{name}>", partial_escape(text));
        self
    }

    /// `<name>text</name>` only when `text` is `Some`.
    pub fn opt_text(&mut self, name: &str, text: Option<&str>) -> &mut Self {
        if let Some(t) = text {
            self.text(name, t);
        }
        self
    }

    /// `<name>text</name>` only when `text` is not empty.
    pub fn nonempty_text(&mut self, name: &str, text: &str) -> &mut Self {
        if !text.is_empty() {
            self.text(name, text);
        }
        self
    }

    /// `<name>value</name>` for integers and other values that format themselves.
    pub fn num(&mut self, name: &str, value: impl Display) -> &mut Self {
        self.indent();
        let _ = writeln!(self.buf, "<{name}>{value}</{name}>");
        self
    }

    /// `<name>value</name>` for a double, in BOINC's `%f` form.
    pub fn f64(&mut self, name: &str, value: f64) -> &mut Self {
        self.indent();
        let _ = writeln!(self.buf, "<{name}>{value:.6}</{name}>");
        self
    }

    /// `<name>0|1</name>`: booleans that BOINC writes as numbers.
    pub fn bool01(&mut self, name: &str, value: bool) -> &mut Self {
        self.num(name, u8::from(value))
    }

    /// `<name/>` when `value` is true; nothing otherwise.
    pub fn flag(&mut self, name: &str, value: bool) -> &mut Self {
        if value {
            self.indent();
            let _ = writeln!(self.buf, "<{name}/>");
        }
        self
    }

    /// `<name><![CDATA[text]]></name>`, splitting any `]]>` in the text.
    pub fn cdata(&mut self, name: &str, text: &str) -> &mut Self {
        self.indent();
        let _ = write!(
            self.buf,
            "<{name}>\n<![CDATA[\n{}\n]]>\n",
            text.replace("]]>", "]]]]><![CDATA[>")
        );
        self.indent();
        let _ = writeln!(self.buf, "</{name}>");
        self
    }

    /// `<name>` + verbatim text + `</name>`, for blocks BOINC keeps as written (keys,
    /// signatures, embedded documents). The text must already be valid element content.
    pub fn verbatim(&mut self, name: &str, inner: &str) -> &mut Self {
        self.indent();
        let _ = write!(self.buf, "<{name}>");
        self.buf.push_str(inner);
        let _ = writeln!(self.buf, "</{name}>");
        self
    }

    /// A complete element kept from an earlier read, written as it was.
    pub fn raw(&mut self, element: &str) -> &mut Self {
        self.indent();
        self.buf.push_str(element.trim());
        self.buf.push('\n');
        self
    }

    /// The document so far.
    pub fn as_str(&self) -> &str {
        &self.buf
    }

    /// The finished document.
    pub fn finish(self) -> String {
        self.buf
    }
}
