//! Building a reply [`Body`] from text written for this reply and pieces kept between
//! replies (a result's head, a part of `get_state`, a line of the event log): the kept
//! pieces are shared, not copied, so a reply of a megabyte made mostly of kept pieces costs
//! the main loop a few hundred kilobytes of new text at most, in blocks the allocator
//! reuses, and no fresh pages (which, with a block per reply, the kernel had to fault in and
//! zero on every call).

use bytes::{Bytes, BytesMut};
use ferrite_gui_rpc::Body;
use ferrite_proto::xml::XmlWriter;

/// The size of the blocks the new text is gathered in: under the allocator's threshold for
/// blocks mapped on their own, so freed blocks go back to the heap and are used again.
const BLOCK: usize = 32 * 1024;

/// Text kept between replies, as bytes of exactly its length (no spare room held).
pub(crate) fn kept(text: String) -> Bytes {
    Bytes::from(text.into_bytes().into_boxed_slice())
}

/// Writes a reply body: XML through [`xml`](Self::xml), kept pieces through
/// [`shared`](Self::shared), in order.
#[derive(Debug)]
pub(crate) struct BodyWriter {
    body: Body,
    /// The text written since the last piece was cut.
    w: XmlWriter,
    /// The block the written text is cut into pieces from.
    block: BytesMut,
}

impl BodyWriter {
    /// A writer for a body of about `pieces` pieces.
    pub(crate) fn new(pieces: usize) -> BodyWriter {
        BodyWriter {
            body: Body::with_capacity(pieces),
            w: XmlWriter::with_capacity(1024),
            block: BytesMut::new(),
        }
    }

    /// The XML writer for this reply's own text.
    pub(crate) fn xml(&mut self) -> &mut XmlWriter {
        &mut self.w
    }

    /// Appends a kept piece as it is (written by a writer at the current depth).
    pub(crate) fn shared(&mut self, piece: &Bytes) {
        self.cut();
        self.body.push(piece.clone());
    }

    /// Moves the text written so far into the body as one piece.
    fn cut(&mut self) {
        let text = self.w.as_str().as_bytes();
        if text.is_empty() {
            return;
        }
        if self.block.capacity() - self.block.len() < text.len() {
            // The pieces cut from the old block keep it alive as long as they need it.
            self.block = BytesMut::with_capacity(BLOCK.max(text.len()));
        }
        self.block.extend_from_slice(text);
        self.body.push(self.block.split().freeze());
        self.w.clear();
    }

    /// The finished body.
    pub(crate) fn finish(mut self) -> Body {
        self.cut();
        self.body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_kept_pieces_come_out_in_order_and_the_kept_ones_are_not_copied() {
        let kept = Bytes::from("<result>\n    <name>a</name>\n</result>\n".to_owned());
        let mut b = BodyWriter::new(8);
        b.xml().open_flat("results");
        b.shared(&kept);
        b.xml().open("extra").int("n", 5).close("extra");
        b.shared(&kept);
        b.xml().close_flat("results");
        let body = b.finish();
        assert_eq!(
            body.to_text(),
            "<results>\n<result>\n    <name>a</name>\n</result>\n<extra>\n    <n>5</n>\n</extra>\n\
             <result>\n    <name>a</name>\n</result>\n</results>\n"
        );
        // The kept piece is the same memory, twice.
        let same: Vec<_> = body
            .parts()
            .iter()
            .filter(|p| p.as_ptr() == kept.as_ptr())
            .collect();
        assert_eq!(same.len(), 2);
        assert_eq!(body.parts().len(), 5);
    }

    #[test]
    fn much_new_text_spans_blocks() {
        let kept = Bytes::from_static(b"<k/>\n");
        let mut b = BodyWriter::new(0);
        let mut want = String::new();
        for i in 0..20_000 {
            b.xml().int("n", i);
            b.shared(&kept);
            want.push_str(&format!("<n>{i}</n>\n<k/>\n"));
        }
        // One piece longer than a block.
        let long = "x".repeat(BLOCK * 2);
        b.xml().text("long", &long);
        want.push_str(&format!("<long>{long}</long>\n"));
        assert_eq!(b.finish().to_text(), want);
    }
}
