//! Ferrite's HTTP I/O for the BOINC project protocol: scheduler RPCs, web RPCs, master
//! pages, resumable downloads and uploads. The protocol logic (what to send, what a reply
//! means) is in `ferrite-project`; this crate only moves bytes, with BOINC's timeouts,
//! limits and error codes. Everything is async on the caller's tokio runtime; all
//! functions are methods of one cheap-to-clone [`HttpClient`].
//!
//! # For the daemon author
//!
//! **Client**: `HttpClient::new(HttpConfig { user_agent: boinc_user_agent("x86_64-pc-linux-gnu",
//! version, None), connect_timeout, read_timeout, max_text_bytes, proxy: ProxyConfig {..},
//! accept_language })` once (rebuild it when cc_config's proxy or timeouts change). Clone
//! it into each task. A server that sends nothing for `read_timeout` is cut off with
//! [`NetError::Timeout`]; texts over `max_text_bytes` give [`NetError::TooLarge`].
//!
//! **Bandwidth**: `set_bandwidth_limits(max_bytes_sec_down, max_bytes_sec_up)` whenever
//! the prefs change (0 = none); the limit holds for the sum of all transfers of a
//! direction, including those under way.
//!
//! **Texts**: `get_text(url)` (master page), `get_project_config(master_url)`,
//! `account_rpc(lookup_or_create_url)` (URLs from `ferrite_project::attach`),
//! `post_scheduler(url, request_xml) -> reply text` (then
//! `ferrite_proto::sched_reply::SchedulerReply::parse`). Errors: [`NetError`] with
//! `boinc_code()` (5xx → -184, other statuses → -224, connect → -107, timeout → -182).
//!
//! **Downloads**: `download(&urls, &DownloadTarget { partial, dest }, &ExpectedFile {
//! nbytes, md5, max_nbytes, gzip, gzipped_nbytes }, &|bytes_on_disk| .., &cancel) ->
//! DownloadOutcome`. URLs are tried in order; the partial file is resumed with `Range`
//! (restarted when the server answers 200); the body is streamed to disk on one blocking
//! thread and hashed on another; more bytes than expected are cut off
//! ([`DownloadError::TooBig`]); the MD5 is checked before the rename to `dest`. For
//! `download_gzipped` files (partial = `NAME.gzt`) the gzip file is decompressed into
//! `dest` and the uncompressed bytes are checked, as BOINC does. For signed files pass
//! `md5: None` and check the signature with `ferrite_project::files::verify_download` and
//! the outcome's MD5. Cancelling the token or dropping the future keeps the partial file
//! for the next attempt. [`DownloadError::is_permanent`] / `boinc_code()` feed the retry
//! logic; `received` feeds the daily transfer history.
//!
//! **MD5 of big files**: [`fast_md5::Md5`] / [`fast_md5::md5_hex_reader`] give the same
//! digest as the `md-5` crate about 30% faster (downloads use them; a verifying download
//! cannot go faster than one core hashes).
//!
//! **Uploads**: `upload(url, &UploadJob { file, path, nbytes, md5, version, known_offset },
//! &|offset| .., &cancel) -> UploadOutcome`: size query (files ≥ 8192 bytes with unknown
//! offset), then the `<file_upload>` header and the bytes from the server's offset.
//! [`UploadError::Transient`] / [`UploadError::Permanent`] carry the handler's message.
//! An upload is cut off only when nothing moves for `read_timeout` (waiting for the
//! bandwidth limit does not count).
//!
//! **Retries** ([`backoff`], pure): keep a [`backoff::FileRetry`] per transfer (persist its
//! fields in `<persistent_file_xfer>`) and a [`backoff::ProjectBackoff`] per project and
//! direction; after an episode call `classify(code, is_upload)`, then
//! `FileRetry::on_failure(..)` → next URL now / back off until / give up with a code, and
//! `ProjectBackoff::on_failure` / `on_success`. Start an episode only when
//! `FileRetry::may_start(now, &project_backoff)`.
//!
//! **Not here**: per-transfer decisions (which file, when) — the daemon's; byte counts of
//! RPC texts for the daily transfer history; a 301 on a scheduler POST is followed as a
//! GET (reqwest), where BOINC keeps the POST.
//!

pub mod backoff;
pub mod client;
pub mod download;
pub mod fast_md5;
pub mod gzip;
pub mod speed;
pub mod throttle;
pub mod upload;

pub use client::{
    boinc_user_agent, HttpClient, HttpConfig, NetError, ProxyConfig, ProxyServer, WebRpcFailure,
};
pub use download::{DownloadError, DownloadOutcome, DownloadTarget, ExpectedFile};
pub use tokio_util::sync::CancellationToken;
pub use upload::{UploadError, UploadJob, UploadOutcome};
