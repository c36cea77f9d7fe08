//! Resumable downloads (one persistent-transfer attempt over a file's URL list): resume
//! with `Range` from the partial file, stream to disk on one blocking thread while another
//! hashes the same bytes, cut off a server that sends more than the entry allows, verify
//! the MD5 and only then rename the file into place.

use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use futures_util::StreamExt as _;
use reqwest::header::{HeaderValue, ACCEPT_ENCODING, CONTENT_RANGE, RANGE};
use reqwest::StatusCode;
use tokio_util::sync::CancellationToken;

use crate::client::{check_url, HttpClient, NetError, ERR_FILE_TOO_BIG};
use crate::fast_md5::Md5;

/// BOINC's `ERR_IO`.
pub const ERR_IO: i32 = -106;
/// BOINC's `ERR_MD5_FAILED`.
pub const ERR_MD5_FAILED: i32 = -119;
/// BOINC's `ERR_FILE_WRONG_SIZE`.
pub const ERR_FILE_WRONG_SIZE: i32 = -221;

/// An episode that adds fewer bytes than this without completing the file is undone.
const MIN_DOWNLOAD_INCREMENT: u64 = 5000;
/// Chunks queued between the network and each of the writer and hasher threads. Hyper hands
/// over up to ~400 KB at a time, so this bounds the bytes held in memory to a few MB (64
/// chunks made the peak RSS of a fast loopback download ~30 MiB) while still covering a
/// short stall of the disk or the hasher.
const QUEUE: usize = 8;
/// Buffer for reading and writing whole files (resumed prefixes, gzip).
const WRITE_BUF: usize = 1 << 20;
/// The download writer's buffer: smaller chunks are gathered into it, larger ones (the
/// usual case: hyper hands over up to ~400 KB at a time) go straight to the file without
/// being copied.
const COALESCE: usize = 64 << 10;

/// Received bytes are gathered into blocks of at least this size before they go to the
/// writer and the hasher.
const BLOCK: usize = 256 << 10;
/// Blocks kept for reuse.
const POOL: usize = QUEUE + 4;

/// Blocks of received bytes, used again once the writer and the hasher are done with them.
/// Each chunk hyper hands over is copied into a block and dropped at once, so hyper reads
/// the next one into the same buffer, and the blocks are not given back to the allocator:
/// a download of gigabytes then touches a few megabytes of memory over and over instead of
/// fresh pages for every chunk (which the kernel must fault in and zero: ~200 faults per MB
/// with a buffer per chunk, where the allocator maps each on its own).
#[derive(Debug, Clone, Default)]
struct BlockPool(std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

impl BlockPool {
    /// An empty block with room for at least `n` bytes.
    fn take(&self, n: usize) -> Vec<u8> {
        let mut v = self
            .0
            .lock()
            .ok()
            .and_then(|mut p| p.pop())
            .unwrap_or_default();
        v.reserve(n.max(BLOCK));
        v
    }

    /// `block` as shared bytes that come back to the pool when the last reference goes.
    fn share(&self, block: Vec<u8>) -> bytes::Bytes {
        bytes::Bytes::from_owner(Pooled {
            data: block,
            pool: self.clone(),
        })
    }
}

/// A block out of its pool.
struct Pooled {
    data: Vec<u8>,
    pool: BlockPool,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let mut v = std::mem::take(&mut self.data);
        v.clear();
        if let Ok(mut p) = self.pool.0.lock() {
            if p.len() < POOL {
                p.push(v);
            }
        }
    }
}

/// What the file must be, from its `<file_info>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpectedFile {
    /// Size of the final file (`nbytes`; for gzip downloads, uncompressed); `None` or 0 when
    /// unknown. Plain downloads sending more are cut off while streaming.
    pub nbytes: Option<u64>,
    /// MD5 hex of the final file (for gzip downloads, of the uncompressed bytes, as BOINC
    /// does); `None` when the file is checked another way (a signed file: verify with
    /// `ferrite_project::files::verify_download` and the outcome's MD5).
    pub md5: Option<String>,
    /// Upper bound on the bytes sent when their exact number is unknown (`max_nbytes`).
    pub max_nbytes: Option<u64>,
    /// `download_gzipped`: the URL serves a gzip file; it is decompressed into the
    /// destination and the uncompressed bytes are checked.
    pub gzip: bool,
    /// `gzipped_nbytes`: exact size of the gzip file on the wire (gzip downloads only).
    pub gzipped_nbytes: Option<u64>,
}

impl ExpectedFile {
    /// Exact number of bytes on the wire, when known.
    fn wire_exact(&self) -> Option<u64> {
        if self.gzip {
            self.gzipped_nbytes
        } else {
            self.nbytes
        }
        .filter(|n| *n > 0)
    }

    /// The most bytes the server may send.
    pub fn wire_limit(&self) -> Option<u64> {
        self.wire_exact().or(self.max_nbytes.filter(|n| *n > 0))
    }

    /// The most bytes the final file may have.
    fn file_limit(&self) -> Option<u64> {
        self.nbytes
            .filter(|n| *n > 0)
            .or(self.max_nbytes.filter(|n| *n > 0))
    }
}

/// Where a download goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadTarget {
    /// The file being written; it survives failures and cancellation, and the next
    /// attempt resumes from its length.
    pub partial: PathBuf,
    /// Where the verified file is renamed to (parent directories are created).
    pub dest: PathBuf,
}

/// A verified, renamed download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadOutcome {
    /// The URL that served it (`None` when the partial file was already complete).
    pub url: Option<String>,
    /// Size of the final file (uncompressed for gzip downloads).
    pub nbytes: u64,
    /// MD5 hex of the final file.
    pub md5: String,
    /// Bytes that were already on disk and kept (the server honoured `Range`).
    pub resumed_from: u64,
    /// Bytes received in this attempt, on the wire (count them in the daily transfer
    /// history).
    pub received: u64,
}

/// Why a download attempt did not produce a verified file.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    /// The file has no download URL.
    #[error("no download URL")]
    NoUrls,
    /// Every URL failed; this is the last URL's failure.
    #[error(transparent)]
    Net(#[from] NetError),
    /// The local file could not be read or written.
    #[error("{op} {path}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The server sent (or announced) more than the entry allows; the episode's bytes were
    /// dropped.
    #[error("{url} sends more than {limit} bytes")]
    TooBig {
        /// The URL.
        url: String,
        /// The limit.
        limit: u64,
    },
    /// The whole file arrived and its MD5 is wrong; the partial file was deleted.
    #[error("MD5 check failed: expected {expected}, got {got}")]
    Md5Mismatch {
        /// From the entry.
        expected: String,
        /// Of the bytes received.
        got: String,
    },
    /// The server ended the reply before the expected size; the partial file is kept.
    #[error("{url} ended the file after {got} of {expected} bytes")]
    Incomplete {
        /// The URL.
        url: String,
        /// Bytes on disk.
        got: u64,
        /// Expected size.
        expected: u64,
    },
    /// A `206` whose `Content-Range` does not start where asked; the partial file was
    /// emptied so the next attempt starts over.
    #[error("{url} answered a range that does not start at {asked}")]
    BadRange {
        /// The URL.
        url: String,
        /// The offset asked for.
        asked: u64,
    },
    /// A gzip download that does not decompress; the partial file was deleted.
    #[error("{path} is not a valid gzip file")]
    BadGzip {
        /// The downloaded file.
        path: PathBuf,
        /// What the decoder said.
        #[source]
        source: std::io::Error,
    },
    /// The final file does not have the expected size (gzip downloads, checked after
    /// decompressing); the partial file was deleted.
    #[error("wrong size: expected {expected} bytes, got {got}")]
    WrongSize {
        /// From the entry.
        expected: u64,
        /// Of the file.
        got: u64,
    },
    /// Cancelled; the partial file is kept for resuming.
    #[error("download cancelled")]
    Cancelled,
}

impl DownloadError {
    /// The BOINC error code for the file transfer's record.
    pub fn boinc_code(&self) -> i32 {
        match self {
            DownloadError::NoUrls => crate::client::ERR_HTTP_PERMANENT,
            DownloadError::Net(e) => e.boinc_code(),
            DownloadError::Io { .. } => ERR_IO,
            DownloadError::TooBig { .. } => ERR_FILE_TOO_BIG,
            DownloadError::Md5Mismatch { .. } => ERR_MD5_FAILED,
            DownloadError::BadGzip { .. } => ERR_IO,
            DownloadError::WrongSize { .. } => ERR_FILE_WRONG_SIZE,
            DownloadError::Incomplete { .. } | DownloadError::BadRange { .. } => {
                crate::client::ERR_HTTP_TRANSIENT
            }
            DownloadError::Cancelled => -197,
        }
    }

    /// Whether the file failed for good (as opposed to: retry later with backoff).
    pub fn is_permanent(&self) -> bool {
        match self {
            DownloadError::NoUrls
            | DownloadError::TooBig { .. }
            | DownloadError::Md5Mismatch { .. }
            | DownloadError::BadGzip { .. }
            | DownloadError::WrongSize { .. } => true,
            DownloadError::Net(e) => e.is_permanent(),
            _ => false,
        }
    }
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> DownloadError + 'a {
    move |source| DownloadError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Opens the partial file, keeps its first `keep` bytes and appends every chunk received
/// until the sender is dropped; returns the file's length.
fn writer(
    path: PathBuf,
    keep: u64,
    mut rx: tokio::sync::mpsc::Receiver<bytes::Bytes>,
) -> Result<u64, DownloadError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io("opening", &path))?;
    f.set_len(keep).map_err(io("truncating", &path))?;
    f.seek(SeekFrom::Start(keep))
        .map_err(io("seeking", &path))?;
    let mut out = std::io::BufWriter::with_capacity(COALESCE, f);
    let mut len = keep;
    while let Some(chunk) = rx.blocking_recv() {
        out.write_all(&chunk).map_err(io("writing", &path))?;
        len += chunk.len() as u64;
    }
    out.flush().map_err(io("writing", &path))?;
    Ok(len)
}

/// Hashes the first `keep` bytes already in the partial file, then every chunk received
/// (on its own thread, so hashing and writing overlap).
fn hasher(
    path: PathBuf,
    keep: u64,
    mut rx: tokio::sync::mpsc::Receiver<bytes::Bytes>,
) -> Result<Md5, DownloadError> {
    let mut h = Md5::new();
    if keep > 0 {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(io("opening", &path))?;
        let mut r = std::io::BufReader::with_capacity(WRITE_BUF, f).take(keep);
        let mut buf = vec![0u8; WRITE_BUF];
        let mut left = keep;
        while left > 0 {
            let n = r.read(&mut buf).map_err(io("reading", &path))?;
            if n == 0 {
                return Err(io("reading", &path)(
                    std::io::ErrorKind::UnexpectedEof.into(),
                ));
            }
            h.update(&buf[..n]);
            left -= n as u64;
        }
    }
    while let Some(chunk) = rx.blocking_recv() {
        h.update(&chunk);
    }
    Ok(h)
}

/// Hands a block to the writer and the hasher (nothing when it is empty); false when
/// either has stopped.
async fn send_block(
    pool: &BlockPool,
    block: Vec<u8>,
    tx: &tokio::sync::mpsc::Sender<bytes::Bytes>,
    htx: &tokio::sync::mpsc::Sender<bytes::Bytes>,
) -> bool {
    if block.is_empty() {
        return true;
    }
    let b = pool.share(block);
    tx.send(b.clone()).await.is_ok() && htx.send(b).await.is_ok()
}

fn start_of_content_range(v: Option<&HeaderValue>) -> Option<u64> {
    let s = v?.to_str().ok()?.trim().strip_prefix("bytes")?.trim_start();
    s.split('-').next()?.trim().parse().ok()
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn truncate(path: &Path, len: u64) -> Result<(), DownloadError> {
    match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(f) => f.set_len(len).map_err(io("truncating", path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io("opening", path)(e)),
    }
}

fn remove(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!("removing {}: {e}", path.display());
        }
    }
}

async fn md5_of_file(path: &Path) -> Result<String, DownloadError> {
    let p = path.to_owned();
    let r = tokio::task::spawn_blocking(move || {
        let f = std::fs::File::open(&p)?;
        crate::fast_md5::md5_hex_reader(f)
    })
    .await
    .map_err(|e| io("hashing", path)(std::io::Error::other(e)))?;
    r.map_err(io("hashing", path))
}

fn md5_matches(expected: Option<&str>, got: &str) -> bool {
    expected.is_none_or(|e| e.trim().eq_ignore_ascii_case(got))
}

fn finish(from: &Path, dest: &Path) -> Result<(), DownloadError> {
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
    }
    std::fs::rename(from, dest).map_err(io("renaming", from))
}

/// Decompresses `gz` into `out`, hashing the output and refusing more than `limit` bytes;
/// returns the MD5 and length of the output.
fn gunzip(gz: &Path, out: &Path, limit: Option<u64>) -> Result<(String, u64), DownloadError> {
    let bad = |source| DownloadError::BadGzip {
        path: gz.to_owned(),
        source,
    };
    let f = std::fs::File::open(gz).map_err(io("opening", gz))?;
    let mut dec = flate2::read::GzDecoder::new(std::io::BufReader::with_capacity(WRITE_BUF, f));
    let mut w = std::io::BufWriter::with_capacity(
        WRITE_BUF,
        std::fs::File::create(out).map_err(io("creating", out))?,
    );
    let mut h = Md5::new();
    let mut buf = vec![0u8; WRITE_BUF];
    let mut len = 0u64;
    loop {
        let n = dec.read(&mut buf).map_err(bad)?;
        if n == 0 {
            break;
        }
        len += n as u64;
        if let Some(l) = limit.filter(|l| len > *l) {
            return Err(DownloadError::WrongSize {
                expected: l,
                got: len,
            });
        }
        h.update(&buf[..n]);
        w.write_all(&buf[..n]).map_err(io("writing", out))?;
    }
    w.flush().map_err(io("writing", out))?;
    Ok((hex::encode(h.finalize()), len))
}

/// Checks the complete partial file (whose MD5 is `wire_md5`), decompressing it first for
/// gzip downloads, and moves the result to the destination. Returns the final MD5 and size.
/// A file that fails is deleted, so the next attempt starts over.
async fn complete(
    target: &DownloadTarget,
    expected: &ExpectedFile,
    wire_md5: String,
    wire_len: u64,
) -> Result<(String, u64), DownloadError> {
    let (md5, len, made) = if expected.gzip {
        let tmp = target.dest.with_file_name(format!(
            "{}.decompress_temp",
            target
                .dest
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        ));
        if let Some(dir) = tmp.parent() {
            std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
        }
        let (gz, out, limit) = (target.partial.clone(), tmp.clone(), expected.file_limit());
        let r = tokio::task::spawn_blocking(move || gunzip(&gz, &out, limit))
            .await
            .map_err(|e| io("decompressing", &target.partial)(std::io::Error::other(e)))?;
        match r {
            Ok((md5, len)) => (md5, len, Some(tmp)),
            Err(e) => {
                remove(&tmp);
                remove(&target.partial);
                return Err(e);
            }
        }
    } else {
        (wire_md5, wire_len, None)
    };
    let fail = |e: DownloadError| {
        if let Some(t) = &made {
            remove(t);
        }
        remove(&target.partial);
        Err(e)
    };
    if let Some(n) = expected.nbytes.filter(|n| *n > 0 && *n != len) {
        return fail(DownloadError::WrongSize {
            expected: n,
            got: len,
        });
    }
    if !md5_matches(expected.md5.as_deref(), &md5) {
        return fail(DownloadError::Md5Mismatch {
            expected: expected.md5.clone().unwrap_or_default(),
            got: md5,
        });
    }
    match &made {
        Some(tmp) => {
            finish(tmp, &target.dest)?;
            remove(&target.partial);
        }
        None => finish(&target.partial, &target.dest)?,
    }
    Ok((md5, len))
}

impl HttpClient {
    /// One download attempt: tries `urls` in order until one yields the whole file,
    /// resuming from `target.partial`. `progress` is called with the bytes on disk after
    /// each chunk. On success the file is at `target.dest`, verified. Cancelling `cancel`
    /// (or dropping the future) leaves a partial file the next call resumes.
    pub async fn download(
        &self,
        urls: &[String],
        target: &DownloadTarget,
        expected: &ExpectedFile,
        progress: &(dyn Fn(u64) + Send + Sync),
        cancel: &CancellationToken,
    ) -> Result<DownloadOutcome, DownloadError> {
        if urls.is_empty() {
            return Err(DownloadError::NoUrls);
        }
        // A link at the partial file's name is not ours (whatever could write the project
        // directory put it there): it is removed, never written through.
        if std::fs::symlink_metadata(&target.partial).is_ok_and(|m| m.is_symlink()) {
            tracing::warn!("{} is a symlink; removed", target.partial.display());
            remove(&target.partial);
        }
        // A complete partial file from an earlier attempt (e.g. the rename was missed).
        let have = file_len(&target.partial);
        if let Some(n) = expected.wire_exact() {
            if have == n {
                let wire_md5 = md5_of_file(&target.partial).await?;
                if let Ok((md5, nbytes)) = complete(target, expected, wire_md5, n).await {
                    return Ok(DownloadOutcome {
                        url: None,
                        nbytes,
                        md5,
                        resumed_from: n,
                        received: 0,
                    });
                }
            }
            if have >= n {
                truncate(&target.partial, 0)?;
            }
        }
        let mut last = DownloadError::NoUrls;
        for url in urls {
            match self.episode(url, target, expected, progress, cancel).await {
                Ok(o) => return Ok(o),
                Err(
                    e @ (DownloadError::Net(_)
                    | DownloadError::Incomplete { .. }
                    | DownloadError::BadRange { .. }),
                ) => {
                    tracing::info!("download from {url} failed: {e}");
                    last = e;
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    async fn episode(
        &self,
        url: &str,
        target: &DownloadTarget,
        expected: &ExpectedFile,
        progress: &(dyn Fn(u64) + Send + Sync),
        cancel: &CancellationToken,
    ) -> Result<DownloadOutcome, DownloadError> {
        check_url(url)?;
        let limit = expected.wire_limit();
        let mut have = file_len(&target.partial);
        if limit.is_some_and(|l| have > l) {
            truncate(&target.partial, 0)?;
            have = 0;
        }
        let too_big = || DownloadError::TooBig {
            url: url.to_owned(),
            limit: limit.unwrap_or(0),
        };
        // At most two requests: a Range the server cannot satisfy is retried from 0.
        let mut attempt = 0;
        let (resp, start) = loop {
            attempt += 1;
            let mut req = self
                .inner
                .get(url)
                .header(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
            if have > 0 {
                req = req.header(RANGE, format!("bytes={have}-"));
            }
            let sent = tokio::select! {
                r = self.send(url, req) => r,
                () = cancel.cancelled() => return Err(DownloadError::Cancelled),
            };
            match sent {
                Ok(resp) if resp.status() == StatusCode::PARTIAL_CONTENT && have > 0 => {
                    if start_of_content_range(resp.headers().get(CONTENT_RANGE)) != Some(have) {
                        truncate(&target.partial, 0)?;
                        return Err(DownloadError::BadRange {
                            url: url.to_owned(),
                            asked: have,
                        });
                    }
                    break (resp, have);
                }
                // The server ignored the Range (or there was none): start over.
                Ok(resp) => break (resp, 0),
                Err(NetError::Status { status: 416, .. }) if have > 0 && attempt < 2 => {
                    truncate(&target.partial, 0)?;
                    have = 0;
                }
                Err(e) => return Err(e.into()),
            }
        };
        if let (Some(l), Some(n)) = (limit, resp.content_length()) {
            if start.saturating_add(n) > l {
                return Err(too_big());
            }
        }

        let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(QUEUE);
        let (htx, hrx) = tokio::sync::mpsc::channel::<bytes::Bytes>(QUEUE);
        let path = target.partial.clone();
        let writing = tokio::task::spawn_blocking(move || writer(path, start, rx));
        let path = target.partial.clone();
        let hashing = tokio::task::spawn_blocking(move || hasher(path, start, hrx));
        let mut total = start;
        let pool = BlockPool::default();
        let mut block = pool.take(BLOCK);
        let mut stream = resp.bytes_stream();
        let read_timeout = self.config.read_timeout;
        let min_bps = self.config.low_speed_bps;
        let mut speed = crate::speed::LowSpeed::new(min_bps, read_timeout, Instant::now());
        let failure: Option<DownloadError> = loop {
            let next = tokio::select! {
                n = tokio::time::timeout(read_timeout, stream.next()) => n,
                () = cancel.cancelled() => break Some(DownloadError::Cancelled),
            };
            let chunk = match next {
                Err(_) => {
                    break Some(
                        NetError::Timeout {
                            url: url.to_owned(),
                        }
                        .into(),
                    )
                }
                Ok(None) => break None,
                Ok(Some(Err(e))) => break Some(NetError::from_reqwest(url, e).into()),
                Ok(Some(Ok(c))) => c,
            };
            if limit.is_some_and(|l| total + chunk.len() as u64 > l) {
                break Some(too_big());
            }
            let n = chunk.len() as u64;
            total += n;
            if let Err(slow) = speed.observe(n, Instant::now()) {
                break Some(
                    NetError::TooSlow {
                        url: url.to_owned(),
                        min_bps,
                        secs: slow.window.as_secs(),
                        bps: slow.bps,
                    }
                    .into(),
                );
            }
            if block.capacity() - block.len() < chunk.len() {
                let full = std::mem::replace(&mut block, pool.take(chunk.len()));
                if !send_block(&pool, full, &tx, &htx).await {
                    break None; // the writer or hasher failed; its error is reported below
                }
            }
            block.extend_from_slice(&chunk);
            drop(chunk);
            if block.len() >= BLOCK {
                let full = std::mem::replace(&mut block, pool.take(BLOCK));
                if !send_block(&pool, full, &tx, &htx).await {
                    break None;
                }
            }
            progress(total);
            tokio::select! {
                () = self.down.consume(n) => {}
                () = cancel.cancelled() => break Some(DownloadError::Cancelled),
            }
        };
        // What was received goes to the file whatever ended the stream (a partial file is
        // resumed from its length).
        send_block(&pool, block, &tx, &htx).await;
        drop((tx, htx));
        drop(stream);
        let joined =
            |e: tokio::task::JoinError| io("writing", &target.partial)(std::io::Error::other(e));
        let written = writing.await.map_err(joined)??;
        let hashed = hashing.await.map_err(joined)??;
        if let Some(e) = failure {
            if matches!(e, DownloadError::TooBig { .. }) {
                truncate(&target.partial, start)?;
            }
            return Err(e);
        }
        if written != total {
            return Err(io("writing", &target.partial)(std::io::Error::other(
                "short write",
            )));
        }
        if let Some(n) = expected.wire_exact() {
            if total < n {
                // A few bytes that do not complete the file are probably a proxy's page,
                // not the file: drop them (BOINC's MIN_DOWNLOAD_INCREMENT).
                if total - start < MIN_DOWNLOAD_INCREMENT {
                    truncate(&target.partial, start)?;
                }
                return Err(DownloadError::Incomplete {
                    url: url.to_owned(),
                    got: total,
                    expected: n,
                });
            }
        }
        let wire_md5 = hex::encode(hashed.finalize());
        let (md5, nbytes) = complete(target, expected, wire_md5, total).await?;
        Ok(DownloadOutcome {
            url: Some(url.to_owned()),
            nbytes,
            md5,
            resumed_from: start,
            received: total - start,
        })
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn blocks_come_back_to_the_pool_when_the_last_reader_is_done() {
        let pool = BlockPool::default();
        let mut b = pool.take(10);
        assert!(b.capacity() >= BLOCK);
        b.extend_from_slice(b"abc");
        let at = b.as_ptr();
        let shared = pool.share(b);
        let other = shared.clone();
        assert_eq!(&shared[..], b"abc");
        drop(shared);
        assert!(
            pool.0.lock().map(|p| p.is_empty()).unwrap_or(false),
            "still read"
        );
        drop(other);
        // The same memory, empty, comes out again.
        let again = pool.take(10);
        assert_eq!(again.as_ptr(), at);
        assert!(again.is_empty());
        // A bigger chunk than a block gets a block that holds it.
        assert!(pool.take(BLOCK * 3).capacity() >= BLOCK * 3);
        // The pool keeps at most POOL blocks.
        let many: Vec<_> = (0..POOL + 5).map(|_| pool.share(pool.take(1))).collect();
        drop(many);
        assert_eq!(pool.0.lock().map(|p| p.len()).unwrap_or(0), POOL);
    }

    use super::*;

    #[test]
    fn content_range_start() {
        let h = |s: &str| HeaderValue::from_str(s).ok();
        assert_eq!(
            start_of_content_range(h("bytes 100-199/200").as_ref()),
            Some(100)
        );
        assert_eq!(start_of_content_range(h("bytes */200").as_ref()), None);
        assert_eq!(start_of_content_range(None), None);
    }

    #[test]
    fn limits() {
        let e = ExpectedFile {
            nbytes: Some(10),
            max_nbytes: Some(100),
            ..ExpectedFile::default()
        };
        assert_eq!(e.wire_limit(), Some(10));
        let e = ExpectedFile {
            nbytes: Some(0),
            max_nbytes: Some(100),
            ..ExpectedFile::default()
        };
        assert_eq!(e.wire_limit(), Some(100));
        assert_eq!(ExpectedFile::default().wire_limit(), None);
        assert!(md5_matches(None, "abc"));
        assert!(md5_matches(Some(" ABC "), "abc"));
        assert!(!md5_matches(Some("abd"), "abc"));
    }
}
