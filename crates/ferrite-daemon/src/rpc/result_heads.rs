//! The written heads of the results (`<result>` to `<received_time>`, four fifths of a
//! `get_results` or `get_state` reply), kept between replies: a result's head changes only
//! when one of the fields it shows does, while the GUIs ask for the whole list every second
//! or two. A reply then copies each head and writes only the figures that move (estimate,
//! flags, the running task's progress).
//!
//! A kept head is used only after checking it against the result as it is now: its numbers
//! are compared, and its strings with the bytes at their places in the kept text up to the
//! next `<` (a head is kept only when none of its strings holds `<`, `>` or `&`, so each
//! appears there as it is). The check is a few comparisons, no formatting. A reply shares
//! the kept head's bytes ([`BodyWriter::shared`]) instead of copying them.

use bytes::Bytes;
use ferrite_proto::client_state::gui;
use ferrite_proto::client_state::TaskResult;
use ferrite_proto::xml::XmlWriter;

use super::body::{kept, BodyWriter};

/// What a head shows besides its strings.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Numbers {
    version_num: i32,
    exit_status: i32,
    state: i32,
    final_cpu_time: u64,
    final_elapsed_time: u64,
    report_deadline: u64,
    received_time: u64,
}

impl Numbers {
    fn of(r: &TaskResult) -> Numbers {
        // Compared by their bits: the same bits write the same text.
        Numbers {
            version_num: r.version_num,
            exit_status: r.exit_status,
            state: r.state.as_i32(),
            final_cpu_time: r.final_cpu_time.to_bits(),
            final_elapsed_time: r.final_elapsed_time.to_bits(),
            report_deadline: r.report_deadline.to_bits(),
            received_time: r.received_time.to_bits(),
        }
    }
}

/// The strings a head shows, in its order.
fn strings<'a>(r: &'a TaskResult, project_url: &'a str) -> [&'a str; 5] {
    [&r.name, &r.wu_name, &r.platform, &r.plan_class, project_url]
}

/// One kept head.
#[derive(Debug)]
struct Head {
    numbers: Numbers,
    /// Where each of [`strings`] lies in `xml` (start; its length is the string's).
    at: [u32; 5],
    /// The head as [`gui::write_result_head`] writes it at the top level.
    xml: Bytes,
}

impl Head {
    /// The head of `r`, or `None` when it cannot be checked later (a string needed escaping).
    fn build(r: &TaskResult, project_url: &str) -> Option<Head> {
        let strings = strings(r, project_url);
        // One vectorised search per string (a pattern of chars is a loop per char, the most
        // of a head's cost in a debug build).
        if strings
            .iter()
            .any(|s| memchr::memchr3(b'<', b'>', b'&', s.as_bytes()).is_some())
        {
            return None;
        }
        let mut w = XmlWriter::with_capacity(640);
        gui::write_result_head(r, project_url, &mut w);
        let xml = w.finish();
        // Each string follows its opening tag, in order.
        let mut at = [0u32; 5];
        let mut from = 0;
        for (i, (s, tag)) in strings.iter().zip(TAGS).enumerate() {
            let start = from + xml[from..].find(tag)? + tag.len();
            if xml.get(start..start + s.len())? != *s {
                return None;
            }
            at[i] = u32::try_from(start).ok()?;
            from = start + s.len();
        }
        Some(Head {
            numbers: Numbers::of(r),
            at,
            xml: kept(xml),
        })
    }

    /// Whether this is still the head of `r`.
    fn fits(&self, r: &TaskResult, project_url: &str) -> bool {
        self.numbers == Numbers::of(r)
            && strings(r, project_url).iter().zip(self.at).all(|(s, at)| {
                // The kept string runs up to the next `<` (it holds none): the same
                // bytes followed by that `<` are the same string.
                let (at, end) = (at as usize, at as usize + s.len());
                let xml = &self.xml[..];
                xml.get(at..end) == Some(s.as_bytes()) && xml.get(end) == Some(&b'<')
            })
    }
}

/// The opening tags of [`strings`], in order.
const TAGS: [&str; 5] = [
    "<name>",
    "<wu_name>",
    "<platform>",
    "<plan_class>",
    "<project_url>",
];

/// The kept heads, by the results' positions in the state (projects in order, each
/// project's results in order): a reply lists them in that order.
#[derive(Debug, Default)]
pub struct ResultHeads {
    heads: Vec<Option<Head>>,
    /// Heads written anew so far (kept or not).
    written: u64,
    /// A reply listed every result since the heads were last forgotten (a GUI lists them,
    /// even while there are none yet).
    listed: bool,
}

impl ResultHeads {
    /// Writes the head of the result at position `i`, from the kept one when it still
    /// fits, else written anew (and kept).
    pub fn write(&mut self, i: usize, r: &TaskResult, project_url: &str, out: &mut BodyWriter) {
        if self.heads.len() <= i {
            self.heads.resize_with(i + 1, || None);
        }
        let slot = &mut self.heads[i];
        if !slot.as_ref().is_some_and(|h| h.fits(r, project_url)) {
            self.written += 1;
            *slot = Head::build(r, project_url);
        }
        match slot {
            // Kept at the top level: shared as it is.
            Some(h) if out.xml().depth() == 0 => out.shared(&h.xml),
            Some(h) => {
                out.xml().raw(&String::from_utf8_lossy(&h.xml));
            }
            None => gui::write_result_head(r, project_url, out.xml()),
        }
    }

    /// Writes ahead the heads of `results`, the first at position `first`, that lie past the
    /// heads kept so far: a reply's new tasks, a batch at a time as they come in, rather than
    /// all in the next reply. Only while heads are kept (a GUI lists the results); the reply
    /// still checks each against its result.
    pub fn write_ahead(&mut self, first: usize, results: &[TaskResult], project_url: &str) {
        // Heads go at their results' positions: with a gap before `first` (results of an
        // earlier project not kept yet) they would not line up, so none is written.
        if !self.listed || first > self.heads.len() {
            return;
        }
        let Some(new) = results.get(self.heads.len() - first..) else {
            return;
        };
        for r in new {
            self.written += 1;
            self.heads.push(Head::build(r, project_url));
        }
    }

    /// A reply listed every result, `n` of them: the heads past them go (the state holds
    /// fewer now).
    pub fn truncate(&mut self, n: usize) {
        self.heads.truncate(n);
        self.listed = true;
    }

    /// Forgets every head (the memory goes back while the GUIs are quiet).
    pub fn clear(&mut self) {
        self.heads = Vec::new();
        self.listed = false;
    }

    /// How many heads were written anew so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Bytes the kept heads take, roughly.
    pub fn bytes(&self) -> usize {
        self.heads
            .iter()
            .flatten()
            .map(|h| h.xml.len() + std::mem::size_of::<Head>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_proto::client_state::{synthetic, ResultState};

    fn head(r: &TaskResult, url: &str) -> String {
        let mut w = XmlWriter::new();
        gui::write_result_head(r, url, &mut w);
        w.finish()
    }

    fn kept(heads: &mut ResultHeads, i: usize, r: &TaskResult, url: &str) -> String {
        let mut w = BodyWriter::new(1);
        heads.write(i, r, url, &mut w);
        w.finish().to_text()
    }

    #[test]
    fn a_kept_head_is_written_as_the_writer_writes_it_and_follows_every_change() {
        let state = synthetic(2, 20);
        let mut heads = ResultHeads::default();
        let ps = &state.projects[0];
        let url = ps.project.master_url.as_str();
        let mut r = ps.results[3].clone();
        assert_eq!(kept(&mut heads, 0, &r, url), head(&r, url));
        assert!(heads.bytes() > 400, "kept: {}", heads.bytes());
        // Every field the head shows, changed one at a time, shows at once.
        let changes: &[fn(&mut TaskResult)] = &[
            |r| r.name.push('x'),
            |r| r.name = r.name.replace('w', "v"),
            |r| r.wu_name.pop().map_or((), drop),
            |r| r.platform = "windows_x86_64".into(),
            |r| r.version_num += 1,
            |r| r.plan_class = "mt".into(),
            |r| r.final_cpu_time += 0.5,
            |r| r.final_elapsed_time = 1e-9,
            |r| r.exit_status = -197,
            |r| r.state = ResultState::ComputeError,
            |r| r.report_deadline += 1.0,
            |r| r.received_time -= 1.0,
            |r| r.plan_class = "cuda<12>&".into(),
            |r| r.plan_class.clear(),
        ];
        for change in changes {
            change(&mut r);
            assert_eq!(kept(&mut heads, 0, &r, url), head(&r, url));
            // And again from the kept head.
            assert_eq!(kept(&mut heads, 0, &r, url), head(&r, url));
        }
        let other = &state.projects[1].project.master_url;
        assert_eq!(kept(&mut heads, 0, &r, other), head(&r, other));
        // Another result at the same place.
        let s = &ps.results[4];
        assert_eq!(kept(&mut heads, 0, s, url), head(s, url));
        // Indented like the writer's first line.
        let mut w = BodyWriter::new(1);
        w.xml().open("x");
        heads.write(0, s, url, &mut w);
        let mut want = XmlWriter::new();
        want.open("x");
        gui::write_result_head(s, url, &mut want);
        assert_eq!(w.finish().to_text(), want.finish());
        heads.clear();
        assert_eq!(heads.bytes(), 0);
    }

    #[test]
    fn heads_written_ahead_are_the_heads_a_reply_writes_and_are_not_written_again() {
        let state = synthetic(1, 30);
        let ps = &state.projects[0];
        let url = ps.project.master_url.as_str();
        let mut heads = ResultHeads::default();
        // No GUI lists the results: nothing is written ahead.
        heads.write_ahead(0, &ps.results, url);
        assert_eq!((heads.written(), heads.bytes()), (0, 0));
        for (i, r) in ps.results[..10].iter().enumerate() {
            kept(&mut heads, i, r, url);
        }
        heads.truncate(10);
        assert_eq!(heads.written(), 10);
        // The ten more that came in: written ahead, those kept left alone.
        heads.write_ahead(0, &ps.results[..20], url);
        assert_eq!(heads.written(), 20);
        // A range that ends before the kept heads adds nothing.
        heads.write_ahead(0, &ps.results[..5], url);
        assert_eq!(heads.written(), 20);
        // Nor one that starts past them: its heads would not line up with their results.
        heads.write_ahead(25, &ps.results[25..], url);
        assert_eq!(heads.written(), 20);
        // The reply writes every head as a fresh one would, taking the written ones.
        for (i, r) in ps.results.iter().enumerate() {
            assert_eq!(kept(&mut heads, i, r, url), head(r, url));
        }
        assert_eq!(heads.written(), 30, "the heads written ahead were used");
        // A GUI listed no results yet (there were none): the first ones are written ahead.
        heads.clear();
        heads.truncate(0);
        heads.write_ahead(0, &ps.results[..3], url);
        assert_eq!(heads.written(), 33);
    }
}
