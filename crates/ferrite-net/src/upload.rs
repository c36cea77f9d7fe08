//! Uploads with BOINC's upload-handler protocol: an optional `<get_file_size>` query, then
//! the `<file_upload>` header followed by the file's bytes from the server's offset,
//! streamed from disk; the handler's `<data_server_reply>` decides success, retry or
//! failure. The request texts and the reply parser are `ferrite_project::files`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferrite_project::files::{
    file_upload_header, get_file_size_request, parse_upload_reply, resume_offset, UploadStatus,
    FILE_SIZE_CHECK_THRESHOLD,
};
use ferrite_proto::client_state::{ClientVersion, FileInfo};
use futures_util::StreamExt as _;
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE};
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
use tokio_util::sync::CancellationToken;

use crate::client::{check_url, HttpClient, NetError, SCHEDULER_CONTENT_TYPE};

/// BOINC's `ERR_UPLOAD_TRANSIENT`.
pub const ERR_UPLOAD_TRANSIENT: i32 = -127;
/// BOINC's `ERR_UPLOAD_PERMANENT`.
pub const ERR_UPLOAD_PERMANENT: i32 = -128;

/// Largest handler reply read.
const MAX_REPLY: u64 = 64 << 10;

/// One output file to send.
#[derive(Debug, Clone)]
pub struct UploadJob {
    /// The file's entry: its `name`, `max_nbytes` and upload certificate
    /// (`xml_signature`) are sent.
    pub file: FileInfo,
    /// The file on disk.
    pub path: PathBuf,
    /// Its size (`nbytes`, recomputed at task end).
    pub nbytes: u64,
    /// Its MD5 hex (`md5_cksum`).
    pub md5: String,
    /// The client version written in the requests.
    pub version: ClientVersion,
    /// The offset the server is known to have (`upload_offset`); `None` = ask it with a
    /// size query (skipped for files under 8192 bytes, which start at 0).
    pub known_offset: Option<u64>,
}

/// A finished upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadOutcome {
    /// Where this attempt started in the file (the server's size).
    pub from_offset: u64,
    /// Body bytes sent in this attempt (file data only).
    pub sent: u64,
    /// The server already had the whole file; nothing was sent.
    pub already_complete: bool,
}

/// Why an upload attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The HTTP exchange failed (for uploads every status, 404 included, is transient).
    #[error(transparent)]
    Net(#[from] NetError),
    /// The local file could not be read.
    #[error("reading {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The handler answered status 1 or nothing readable: retry later.
    #[error("upload handler asks to retry later: {}", .message.as_deref().unwrap_or("no message"))]
    Transient {
        /// The handler's message.
        message: Option<String>,
    },
    /// The handler answered status -1: this file will never be accepted.
    #[error("upload handler refused the file: {}", .message.as_deref().unwrap_or("no message"))]
    Permanent {
        /// The handler's message.
        message: Option<String>,
    },
    /// Cancelled; the next attempt re-queries the size.
    #[error("upload cancelled")]
    Cancelled,
}

impl UploadError {
    /// The BOINC error code for the transfer's record.
    pub fn boinc_code(&self) -> i32 {
        match self {
            UploadError::Net(e) => e.boinc_code(),
            UploadError::Io { .. } => crate::download::ERR_IO,
            UploadError::Permanent { .. } => ERR_UPLOAD_PERMANENT,
            UploadError::Transient { .. } => ERR_UPLOAD_TRANSIENT,
            UploadError::Cancelled => -197,
        }
    }

    /// Whether the file failed for good (`ERR_UPLOAD_PERMANENT`); HTTP errors are
    /// transient for uploads.
    pub fn is_permanent(&self) -> bool {
        matches!(self, UploadError::Permanent { .. })
    }
}

fn read_err(path: &Path) -> impl FnOnce(std::io::Error) -> UploadError + '_ {
    move |source| UploadError::Io {
        path: path.to_owned(),
        source,
    }
}

impl HttpClient {
    async fn upload_post(
        &self,
        url: &str,
        body: reqwest::Body,
        len: u64,
        activity: &Activity,
        cancel: &CancellationToken,
    ) -> Result<ferrite_project::files::UploadReply, UploadError> {
        let req = self
            .uploads
            .post(url)
            .header(CONTENT_TYPE, SCHEDULER_CONTENT_TYPE)
            .header(CONTENT_LENGTH, len)
            .body(body);
        let idle = self.config.read_timeout;
        let min_bps = self.config.low_speed_bps;
        let text = tokio::select! {
            r = async {
                // No overall bound: the idle watchdog below ends a stalled exchange.
                let resp = self.send_within(url, req, None).await?;
                self.read_text(url, resp, MAX_REPLY).await
            } => r?,
            () = activity.stalled(idle) => {
                let url = url.to_owned();
                return Err(match activity.too_slow() {
                    Some(s) => NetError::TooSlow {
                        url,
                        min_bps,
                        secs: s.window.as_secs(),
                        bps: s.bps,
                    },
                    None => NetError::Timeout { url },
                }
                .into());
            }
            () = cancel.cancelled() => return Err(UploadError::Cancelled),
        };
        let reply = parse_upload_reply(&text);
        if let Some(m) = &reply.message {
            tracing::info!("upload handler at {url}: {m}");
        }
        match reply.status {
            UploadStatus::Success => Ok(reply),
            UploadStatus::Transient => Err(UploadError::Transient {
                message: reply.message,
            }),
            UploadStatus::Permanent => Err(UploadError::Permanent {
                message: reply.message,
            }),
        }
    }

    /// Asks the handler how many bytes of `name` it has.
    pub async fn upload_size_query(
        &self,
        url: &str,
        version: ClientVersion,
        name: &str,
        cancel: &CancellationToken,
    ) -> Result<u64, UploadError> {
        check_url(url)?;
        let text = get_file_size_request(version, name);
        let len = text.len() as u64;
        let reply = self
            .upload_post(url, text.into(), len, &Activity::new(), cancel)
            .await?;
        Ok(reply.file_size.unwrap_or(0))
    }

    /// One upload attempt to one URL: size query when needed, then the file from the
    /// server's offset. `progress` is called with the file offset reached. After any
    /// attempt that sent bytes (or with several URLs), set `known_offset = None` for the
    /// next one, as BOINC does.
    pub async fn upload(
        &self,
        url: &str,
        job: &UploadJob,
        progress: &(dyn Fn(u64) + Send + Sync),
        cancel: &CancellationToken,
    ) -> Result<UploadOutcome, UploadError> {
        check_url(url)?;
        let offset = match job.known_offset {
            Some(o) => o,
            None if job.nbytes < FILE_SIZE_CHECK_THRESHOLD => 0,
            None => {
                let has = self
                    .upload_size_query(url, job.version, &job.file.name, cancel)
                    .await?;
                match resume_offset(has, job.nbytes) {
                    Some(o) => o,
                    None => {
                        return Ok(UploadOutcome {
                            from_offset: has,
                            sent: 0,
                            already_complete: true,
                        })
                    }
                }
            }
        }
        .min(job.nbytes);
        let header = file_upload_header(job.version, &job.file, job.nbytes, &job.md5, offset);
        // Never through a link: what is uploaded is a file of the project's own.
        let mut f = tokio::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&job.path)
            .await
            .map_err(read_err(&job.path))?;
        let on_disk = f.metadata().await.map_err(read_err(&job.path))?.len();
        if on_disk < job.nbytes {
            return Err(read_err(&job.path)(std::io::Error::other(format!(
                "file has {on_disk} bytes, {} expected",
                job.nbytes
            ))));
        }
        f.seek(std::io::SeekFrom::Start(offset))
            .await
            .map_err(read_err(&job.path))?;
        let data_len = job.nbytes - offset;
        let header_len = header.len() as u64;
        let mut at = offset;
        let data = tokio_util::io::ReaderStream::with_capacity(f.take(data_len), 256 << 10).map(
            move |chunk| {
                if let Ok(c) = &chunk {
                    at += c.len() as u64;
                    progress(at);
                }
                chunk
            },
        );
        // The progress callback is borrowed, so the body stream cannot be 'static:
        // relay it through a channel fed from this task.
        let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(8);
        let body = reqwest::Body::wrap_stream(tokio_stream_from(rx));
        let up = self.up.clone();
        let activity = Activity::new();
        let mut speed = crate::speed::LowSpeed::new(
            self.config.low_speed_bps,
            self.config.read_timeout,
            Instant::now(),
        );
        let feed = async {
            if tx.send(Ok(bytes::Bytes::from(header))).await.is_err() {
                return;
            }
            futures_util::pin_mut!(data);
            while let Some(c) = data.next().await {
                if let Ok(bytes) = &c {
                    // Waiting for the bandwidth limit is not a stall.
                    activity.throttled.store(true, Ordering::Relaxed);
                    up.consume(bytes.len() as u64).await;
                    activity.throttled.store(false, Ordering::Relaxed);
                    activity.touch();
                }
                let n = c.as_ref().map_or(0, |b| b.len() as u64);
                if tx.send(c).await.is_err() {
                    return;
                }
                activity.touch();
                if let Err(slow) = speed.observe(n, Instant::now()) {
                    activity.mark_too_slow(slow);
                    return;
                }
            }
        };
        let post = self.upload_post(url, body, header_len + data_len, &activity, cancel);
        let (r, ()) = tokio::join!(post, feed);
        r?;
        Ok(UploadOutcome {
            from_offset: offset,
            sent: data_len,
            already_complete: false,
        })
    }
}

/// When an exchange last made progress, for the idle watchdog.
#[derive(Debug)]
struct Activity {
    /// The reference point.
    start: Instant,
    /// Milliseconds after `start` of the last progress.
    last_ms: AtomicU64,
    /// Set while the sender waits for the bandwidth limit.
    throttled: AtomicBool,
    /// Set when the transfer fell below the low-speed limit.
    slow: std::sync::Mutex<Option<crate::speed::TooSlow>>,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            throttled: AtomicBool::new(false),
            slow: std::sync::Mutex::new(None),
        }
    }

    /// The transfer fell below the low-speed limit: the watchdog ends it.
    fn mark_too_slow(&self, s: crate::speed::TooSlow) {
        if let Ok(mut slow) = self.slow.lock() {
            *slow = Some(s);
        }
    }

    /// The low-speed window that ended the transfer, if that is what did.
    fn too_slow(&self) -> Option<crate::speed::TooSlow> {
        self.slow.lock().ok().and_then(|s| *s)
    }

    /// Records progress now.
    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Completes once nothing has progressed for `limit`, or the transfer was too slow.
    async fn stalled(&self, limit: Duration) {
        loop {
            if self.too_slow().is_some() {
                return;
            }
            let last = self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let idle = last.elapsed();
            if idle >= limit && !self.throttled.load(Ordering::Relaxed) {
                return;
            }
            let wait = limit
                .saturating_sub(idle)
                .clamp(Duration::from_millis(50), Duration::from_secs(1));
            tokio::time::sleep(wait).await;
        }
    }
}

/// A receiver as a stream.
fn tokio_stream_from<T: Send + 'static>(
    rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) })
}
