//! The written `<workunit>` elements of `get_state`, kept from one state epoch to the next.
//! `get_state`'s parts are written again whenever the state epoch moved (while a large reply
//! is taken in, at every turn of the loop), and the workunits are most of them; a workunit
//! changes rarely, so each one's text is kept with a copy of the workunit it was written
//! from and used again while the workunit is still equal to that copy.
//!
//! Equal workunits write the same text, except for a figure that went from `0` to `-0` (or
//! back), which compare equal: no figure of a workunit does that.

use ferrite_proto::client_state::Workunit;
use ferrite_proto::xml::XmlWriter;

/// The kept texts, by the workunits' positions in the state (projects in order, each
/// project's workunits in order), as `get_state` lists them.
#[derive(Debug, Default)]
pub struct WorkunitTexts {
    kept: Vec<Option<(Workunit, String)>>,
    /// Texts written anew so far (kept or not).
    written: u64,
}

impl WorkunitTexts {
    /// Writes the workunit at position `i` into `w`: the kept text when it was written from
    /// an equal workunit, else written anew (and kept). Only text written at the top level
    /// is kept.
    pub fn write(&mut self, i: usize, wu: &Workunit, w: &mut XmlWriter) {
        if w.depth() != 0 {
            wu.write(w);
            return;
        }
        if self.kept.len() <= i {
            self.kept.resize_with(i + 1, || None);
        }
        let slot = &mut self.kept[i];
        match slot {
            Some((was, text)) if was == wu => {
                w.push_raw(text);
            }
            _ => {
                self.written += 1;
                let mut own = XmlWriter::with_capacity(512);
                wu.write(&mut own);
                let text = own.finish();
                w.push_raw(&text);
                *slot = Some((wu.clone(), text));
            }
        }
    }

    /// Drops the workunits past the first `n` (the state holds fewer now).
    pub fn truncate(&mut self, n: usize) {
        self.kept.truncate(n);
    }

    /// Forgets every text (the memory goes back while the GUIs are quiet).
    pub fn clear(&mut self) {
        self.kept = Vec::new();
    }

    /// How many texts are kept.
    pub fn kept(&self) -> usize {
        self.kept.iter().flatten().count()
    }

    /// How many texts were written anew so far.
    pub fn written(&self) -> u64 {
        self.written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_proto::client_state::synthetic;

    fn at_once(wu: &Workunit) -> String {
        let mut w = XmlWriter::new();
        wu.write(&mut w);
        w.finish()
    }

    fn kept(texts: &mut WorkunitTexts, i: usize, wu: &Workunit) -> String {
        let mut w = XmlWriter::new();
        texts.write(i, wu, &mut w);
        w.finish()
    }

    #[test]
    fn a_kept_workunit_is_written_as_the_writer_writes_it_and_follows_every_change() {
        let state = synthetic(1, 20);
        let mut texts = WorkunitTexts::default();
        let mut wu = state.projects[0].workunits[3].clone();
        assert_eq!(kept(&mut texts, 0, &wu), at_once(&wu));
        assert_eq!(texts.written(), 1);
        // Unchanged: the kept text, not written again.
        assert_eq!(kept(&mut texts, 0, &wu), at_once(&wu));
        assert_eq!(texts.written(), 1);
        let changes: &[fn(&mut Workunit)] = &[
            |w| w.name.push('x'),
            |w| w.app_name = "other".into(),
            |w| w.rsc_fpops_est *= 2.0,
            |w| w.rsc_memory_bound += 1.0,
            |w| w.command_line = "--x <1> & 2".into(),
            |w| w.input_files.clear(),
        ];
        for change in changes {
            let before = texts.written();
            change(&mut wu);
            assert_eq!(kept(&mut texts, 0, &wu), at_once(&wu));
            assert_eq!(texts.written(), before + 1);
            assert_eq!(kept(&mut texts, 0, &wu), at_once(&wu));
            assert_eq!(texts.written(), before + 1);
        }
        // Another workunit at the same place.
        let other = &state.projects[0].workunits[4];
        assert_eq!(kept(&mut texts, 0, other), at_once(other));
        // Inside an element: written as the writer writes it there.
        let mut w = XmlWriter::new();
        w.open("x");
        texts.write(0, other, &mut w);
        let mut want = XmlWriter::new();
        want.open("x");
        other.write(&mut want);
        assert_eq!(w.finish(), want.finish());
        texts.truncate(0);
        assert_eq!(kept(&mut texts, 5, other), at_once(other));
        assert_eq!(texts.kept(), 1);
        texts.clear();
        assert_eq!(texts.kept(), 0);
        assert_eq!(kept(&mut texts, 0, &wu), at_once(&wu));
    }
}
