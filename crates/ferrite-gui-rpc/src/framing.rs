//! Splitting the incoming byte stream into requests at the 0x03 terminator.
//!
//! Unlike the official client, bytes after a terminator are kept for the next request, so a GUI
//! may pipeline requests or have one split over many reads. A request that grows to the size
//! cap without a terminator is an error: the connection must be closed.

/// The byte that ends every request and reply.
pub const TERMINATOR: u8 = 0x03;

/// The official request size cap (`GUI_RPC_REQ_MSG_SIZE`): a request of this many bytes,
/// terminator included, is refused.
pub const MAX_REQUEST_BYTES: usize = 100_000;

/// A request grew past the size cap without a terminator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("request exceeds {limit} bytes without a 0x03 terminator")]
pub struct Oversize {
    /// The cap that was hit.
    pub limit: usize,
}

/// Accumulates received bytes and hands out complete requests.
#[derive(Debug)]
pub struct FrameBuffer {
    /// Bytes received but not yet handed out.
    buf: Vec<u8>,
    /// How far `buf` has been searched for a terminator (avoids rescanning on every read).
    scanned: usize,
    /// Size cap for one request, terminator included.
    limit: usize,
}

impl Default for FrameBuffer {
    fn default() -> Self {
        Self::new(MAX_REQUEST_BYTES)
    }
}

impl FrameBuffer {
    /// A buffer refusing requests of `limit` bytes or more (terminator included).
    pub fn new(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            scanned: 0,
            limit,
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Reads once from `r` straight into the buffer, with room for at least `room` more
    /// bytes (no copy through another buffer: a reply can be megabytes). Returns the bytes
    /// read, 0 at the end of the stream.
    pub async fn read_from<R>(&mut self, r: &mut R, room: usize) -> std::io::Result<usize>
    where
        R: tokio::io::AsyncRead + Unpin,
    {
        use tokio::io::AsyncReadExt as _;
        self.buf.reserve(room);
        r.read_buf(&mut self.buf).await
    }

    /// Number of bytes held.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether no bytes are held.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The held bytes (for protocol sniffing before any terminator arrives).
    pub fn peek(&self) -> &[u8] {
        &self.buf
    }

    /// The next complete request without its terminator, `Ok(None)` if more bytes are needed,
    /// or an error if the pending request is already too big.
    pub fn next_request(&mut self) -> Result<Option<Vec<u8>>, Oversize> {
        let found = memchr::memchr(TERMINATOR, &self.buf[self.scanned..]).map(|i| self.scanned + i);
        match found {
            Some(end) if end + 1 < self.limit => {
                // Keep the request's allocation (a reply can be megabytes); copy only what
                // follows it.
                let rest = self.buf.split_off(end + 1);
                let mut request = std::mem::replace(&mut self.buf, rest);
                request.pop();
                self.scanned = 0;
                Ok(Some(request))
            }
            Some(_) => Err(Oversize { limit: self.limit }),
            None if self.buf.len() >= self.limit => Err(Oversize { limit: self.limit }),
            None => {
                self.scanned = self.buf.len();
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn split_and_pipelined_requests() {
        let mut fb = FrameBuffer::default();
        fb.push(b"<a/");
        assert_eq!(fb.next_request(), Ok(None));
        fb.push(b">\x03<b/>\x03<c");
        assert_eq!(fb.next_request(), Ok(Some(b"<a/>".to_vec())));
        assert_eq!(fb.next_request(), Ok(Some(b"<b/>".to_vec())));
        assert_eq!(fb.next_request(), Ok(None));
        fb.push(b"/>\x03");
        assert_eq!(fb.next_request(), Ok(Some(b"<c/>".to_vec())));
        assert!(fb.is_empty());
    }

    #[test]
    fn the_cap_counts_the_terminator() {
        let mut fb = FrameBuffer::new(10);
        fb.push(b"123456789\x03");
        assert_eq!(fb.next_request(), Err(Oversize { limit: 10 }));
        let mut fb = FrameBuffer::new(10);
        fb.push(b"12345678\x03");
        assert_eq!(fb.next_request(), Ok(Some(b"12345678".to_vec())));
        let mut fb = FrameBuffer::new(10);
        fb.push(b"1234567890");
        assert_eq!(fb.next_request(), Err(Oversize { limit: 10 }));
    }

    #[tokio::test]
    async fn reads_land_in_the_buffer_and_split_into_requests() {
        let (mut a, mut b) = tokio::io::duplex(8);
        let mut fb = FrameBuffer::default();
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt as _;
            a.write_all(b"<first/>\x03<second").await.unwrap();
            a.write_all(b"/>\x03").await.unwrap();
        });
        let mut got = Vec::new();
        while got.len() < 2 {
            match fb.next_request() {
                Ok(Some(r)) => got.push(r),
                Ok(None) => {
                    let n = fb.read_from(&mut b, 4).await.unwrap();
                    assert!(n > 0 && n <= 8, "{n}");
                }
                Err(e) => panic!("{e}"),
            }
        }
        writer.await.unwrap();
        assert_eq!(got, [b"<first/>".to_vec(), b"<second/>".to_vec()]);
        assert_eq!(fb.read_from(&mut b, 4).await.unwrap(), 0, "end of stream");
    }

    #[test]
    fn empty_requests_are_requests() {
        let mut fb = FrameBuffer::default();
        fb.push(b"\x03");
        assert_eq!(fb.next_request(), Ok(Some(Vec::new())));
    }
}
