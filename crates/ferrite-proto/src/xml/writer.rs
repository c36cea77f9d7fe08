//! Writes BOINC XML in the official layout: one element per line, four-space indentation
//! inside blocks, doubles with six decimals, flags as `<name/>`.

use std::fmt::{Display, Write as _};

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
        const SPACES: &str = "                                ";
        let n = self.depth * 4;
        if n <= SPACES.len() {
            self.buf.push_str(&SPACES[..n]);
        } else {
            for _ in 0..self.depth {
                self.buf.push_str("    ");
            }
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
        self.buf.push('<');
        self.buf.push_str(name);
        self.buf.push('>');
        push_escaped(&mut self.buf, text);
        self.buf.push_str("</");
        self.buf.push_str(name);
        self.buf.push_str(">\n");
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

    /// `<name>value</name>` for an integer (the fast path of [`num`](Self::num)).
    pub fn int(&mut self, name: &str, value: impl itoa::Integer) -> &mut Self {
        self.indent();
        self.buf.push('<');
        self.buf.push_str(name);
        self.buf.push('>');
        self.buf.push_str(itoa::Buffer::new().format(value));
        self.buf.push_str("</");
        self.buf.push_str(name);
        self.buf.push_str(">\n");
        self
    }

    /// `<name>value</name>` for a double, in BOINC's `%f` form.
    pub fn f64(&mut self, name: &str, value: f64) -> &mut Self {
        self.indent();
        self.buf.push('<');
        self.buf.push_str(name);
        self.buf.push('>');
        push_f6(&mut self.buf, value);
        self.buf.push_str("</");
        self.buf.push_str(name);
        self.buf.push_str(">\n");
        self
    }

    /// `<name>0|1</name>`: booleans that BOINC writes as numbers.
    pub fn bool01(&mut self, name: &str, value: bool) -> &mut Self {
        self.int(name, u8::from(value))
    }

    /// `<name/>` when `value` is true; nothing otherwise.
    pub fn flag(&mut self, name: &str, value: bool) -> &mut Self {
        if value {
            self.indent();
            self.buf.push('<');
            self.buf.push_str(name);
            self.buf.push_str("/>\n");
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

    /// Writes what `f` writes at `depth` levels of indentation, then goes back to the
    /// writer's own depth (for blocks whose layout does not follow the nesting, such as
    /// `<active_task>` at column 0 inside `<result>`).
    pub(crate) fn at_depth(&mut self, depth: usize, f: impl FnOnce(&mut Self)) -> &mut Self {
        let own = std::mem::replace(&mut self.depth, depth);
        f(self);
        self.depth = own;
        self
    }

    /// Appends `text` as it is, without indentation or a newline: a piece of the document
    /// written earlier (by a writer at the same depth) and kept.
    pub fn push_raw(&mut self, text: &str) -> &mut Self {
        self.buf.push_str(text);
        self
    }

    /// Indents the next line as the current depth wants.
    pub(crate) fn push_indent(&mut self) -> &mut Self {
        self.indent();
        self
    }

    /// The document so far.
    pub fn as_str(&self) -> &str {
        &self.buf
    }

    /// The indentation depth the next element is written at.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Forgets what was written, keeping the depth and the room (for a writer that hands
    /// its text on piece by piece).
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// The finished document.
    pub fn finish(self) -> String {
        self.buf
    }
}

/// Appends `text` with `<`, `>` and `&` escaped (what `partial_escape` does, without its
/// per-byte overhead: most values have nothing to escape, and `memchr` finds that out a
/// vector at a time).
pub(crate) fn push_escaped(buf: &mut String, text: &str) {
    let bytes = text.as_bytes();
    let mut start = 0;
    while let Some(i) = memchr::memchr3(b'<', b'>', b'&', &bytes[start..]) {
        let at = start + i;
        let rep = match bytes[at] {
            b'<' => "&lt;",
            b'>' => "&gt;",
            _ => "&amp;",
        };
        buf.push_str(&text[start..at]);
        buf.push_str(rep);
        start = at + 1;
    }
    buf.push_str(&text[start..]);
}

/// Appends `v` as `%f` does (six decimals). Values of moderate size (all BOINC times, sizes
/// and rates) go through integer formatting, several times faster than `{:.6}`.
fn push_f6(buf: &mut String, v: f64) {
    const LIMIT: f64 = 9.0e18;
    if !v.is_finite() || v.abs() >= LIMIT {
        let _ = write!(buf, "{v:.6}");
        return;
    }
    let neg = v.is_sign_negative() && v != 0.0;
    let a = v.abs();
    // `as` truncates toward zero: the integer part and the millionths below it.
    let mut int = a as u64;
    let scaled = (a - int as f64) * 1e6;
    let below = scaled as u64;
    let rest = scaled - below as f64;
    if (rest - 0.5).abs() < 1e-4 {
        // Too close to a rounding boundary to trust the product: let std decide exactly.
        let _ = write!(buf, "{v:.6}");
        return;
    }
    let mut frac = below + u64::from(rest > 0.5);
    if frac >= 1_000_000 {
        int += 1;
        frac -= 1_000_000;
    }
    if neg {
        buf.push('-');
    }
    let mut digits = itoa::Buffer::new();
    buf.push_str(digits.format(int));
    // frac < 1_000_000: six digits, zero-padded.
    let f = digits.format(frac);
    buf.push_str(&".000000"[..7 - f.len()]);
    buf.push_str(f);
}

#[cfg(test)]
mod f6_tests {
    use super::push_f6;

    #[test]
    fn matches_std_six_decimals() {
        let samples = [
            0.0,
            1.0,
            -1.5,
            0.1234565,
            1795333510.738071,
            4987202545.333757,
            25276510208.0,
            0.9999999,
            -0.0000004,
            123456.000001,
            3.999_999_5e12,
            5e12,
            1e300,
        ];
        for v in samples {
            let mut s = String::new();
            push_f6(&mut s, v);
            let want = format!("{v:.6}");
            let want = if want == "-0.000000" && v == 0.0 {
                "0.000000".to_owned()
            } else {
                want
            };
            assert_eq!(s, want, "{v}");
        }
        // Values of every magnitude BOINC writes, and their neighbours.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mantissa = (x >> 11) as f64 / (1u64 << 53) as f64;
            let exp = (x % 40) as i32 - 12;
            for v in [mantissa * 10f64.powi(exp), -mantissa * 10f64.powi(exp)] {
                let mut s = String::new();
                push_f6(&mut s, v);
                assert_eq!(s, format!("{v:.6}"), "{v:e}");
            }
        }
        // A sweep of six-decimal values as BOINC writes them.
        for n in (0..2_000_000_000_000i64).step_by(7_777_777_777) {
            let v = n as f64 / 1e6 + 1.7e9;
            let mut s = String::new();
            push_f6(&mut s, v);
            assert_eq!(s, format!("{v:.6}"));
        }
    }
}
