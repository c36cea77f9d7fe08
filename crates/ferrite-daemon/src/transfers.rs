//! Persistent file transfers: downloads of input and app files, uploads of outputs.
//!
//! The main loop calls [`Transfers::tick`] each turn; it starts what may start (as tokio
//! tasks that report back with [`Event::Transfer`](crate::event::Event::Transfer)) and the loop hands
//! each [`TransferDone`] to [`Transfers::finished`], which changes the state: file status,
//! results whose inputs are all present, results whose outputs are all uploaded, and the
//! results a failed file dooms (reported with `ERR_RESULT_DOWNLOAD` / `ERR_RESULT_UPLOAD`,
//! as the official client does).
//!
//! Each file's retry state (retries, first and next request time, time so far, bytes) is
//! kept in its `<persistent_file_xfer>` element in the official layout, so it survives a
//! restart; a download's partial file (`<name>.part` beside it) is resumed with `Range`. The
//! per-file backoff and the per-project, per-direction backoff are `ferrite_net::backoff`'s.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ferrite_net::backoff::{backoff_delay, ProjectBackoff};
use ferrite_net::{CancellationToken, DownloadTarget, ExpectedFile, HttpClient, UploadJob};
use ferrite_project::files::{record_verification, verify_download};
use ferrite_project::stats::{record_transfer, Direction};
use ferrite_project::verify::BoincCrypt;
use ferrite_proto::cc_config::CcOptions;
use ferrite_proto::client_state::{ClientState, FileInfo, ProjectState, ResultState};
use ferrite_proto::prefs::GlobalPrefs;
use ferrite_sched::{Jitter, SplitMix64};
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::config;
use crate::event::Event;

mod results;
mod retry;
mod traffic;

pub use results::update_results;
use results::Plan;
use retry::Retry;

/// What a download that stopped because the local disk is full says (and is recognised by).
const DISK_FULL: &str = "the disk is full";
/// Seconds before such a download is tried again (no backoff: the server is not at fault).
const DISK_FULL_RETRY: f64 = 10.0;

/// Whether a download failed because the local disk is full (or the quota is used up).
fn local_disk_full(e: &ferrite_net::download::DownloadError) -> bool {
    match e {
        ferrite_net::download::DownloadError::Io { source, .. } => {
            matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
        }
        _ => false,
    }
}

/// `ERR_BAD_FILENAME`: a server-sent name that could escape the project directory.
pub const ERR_BAD_FILENAME: i32 = -225;
/// `ERR_RESULT_DOWNLOAD`: a task's input or app file could not be downloaded.
pub const ERR_RESULT_DOWNLOAD: i32 = -186;
/// `ERR_RESULT_UPLOAD`: a task's output could not be uploaded.
pub const ERR_RESULT_UPLOAD: i32 = -187;
/// `ERR_ABORTED_VIA_GUI`: the user aborted the transfer.
pub const ERR_ABORTED_VIA_GUI: i32 = -197;

/// Default `max_file_xfers` and `max_file_xfers_per_project`.
const DEFAULT_MAX_XFERS: usize = 8;
const DEFAULT_MAX_XFERS_PER_PROJECT: usize = 2;

/// What a transfer round may use.
#[derive(Debug, Clone, Copy)]
pub struct TransferContext<'a> {
    /// The HTTP client (proxy, timeouts, bandwidth throttles).
    pub http: &'a HttpClient,
    /// Preferences in force (bandwidth and daily transfer limits).
    pub prefs: &'a GlobalPrefs,
    /// `cc_config.xml` options (`max_file_xfers`, `max_file_xfers_per_project`,
    /// `unsigned_apps_ok`).
    pub cc: &'a CcOptions,
    /// Network mode and `network_available`: false = start nothing, stop what runs.
    pub network_allowed: bool,
}

/// The end of one transfer attempt, sent back to the main loop.
#[derive(Debug, Clone)]
pub struct TransferDone {
    /// Project master URL.
    pub project: String,
    /// File name.
    pub file: String,
    /// Upload (true) or download.
    pub upload: bool,
    /// Bytes moved in this attempt, or why it failed.
    pub result: Result<u64, String>,
    /// Downloads: the final file's size and MD5, to verify against the file's entry.
    pub download: Option<(u64, String)>,
    /// Failure: the BOINC error code.
    pub code: i32,
    /// Failure: the file can never be transferred (no retry).
    pub permanent: bool,
    /// Downloads: bytes already on disk that this attempt kept (`Range` resume).
    pub resumed_from: u64,
    /// Uploads: the size and MD5 of what was sent, reported with the result.
    pub sent: Option<(u64, String)>,
}

/// What a transfer attempt's end did to the state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ended {
    /// The state changed (the file's retry figures at least): to be saved.
    pub changed: bool,
    /// The file became present, uploaded or failed for good, and its tasks were moved
    /// along: one may start or be reported, so a pass should follow at once.
    pub moved: bool,
}

/// A transfer under way.
#[derive(Debug)]
struct Active {
    /// Stops it (the partial file stays).
    cancel: CancellationToken,
    /// Bytes of the file transferred so far (offset reached).
    progress: Arc<AtomicU64>,
    /// Where it started in the file.
    start_offset: u64,
    /// When it started.
    started: Instant,
    /// The URL tried first.
    url: String,
}

/// Live figures of one transfer, for `get_file_transfers`.
#[derive(Debug, Clone, PartialEq)]
pub struct TransferProgress {
    /// Bytes of the file transferred (file offset reached).
    pub bytes_xferred: f64,
    /// Where this attempt started.
    pub file_offset: f64,
    /// Bytes per second in this attempt.
    pub xfer_speed: f64,
    /// The URL.
    pub url: String,
    /// The file's `<persistent_file_xfer>` as the official client shows it while the
    /// transfer runs: the time so far with this attempt's, the bytes moved so far.
    pub record: String,
}

/// The daemon's transfers.
#[derive(Debug)]
pub struct Transfers {
    /// Absolute data directory.
    dir: PathBuf,
    /// Transfers under way, by (project URL, file name).
    active: HashMap<(String, String), Active>,
    /// Per (project URL, upload?) backoff after repeated failures.
    backoff: HashMap<(String, bool), ProjectBackoff>,
    /// Bytes moved per day (day number since the epoch), for the daily limit.
    daily: HashMap<i64, u64>,
    /// Bytes received and sent by finished transfer attempts since start-up.
    bytes_moved: (u64, u64),
    /// Bytes transferred per day (`daily_xfer_history.xml`), file bodies and the texts
    /// exchanged over HTTP alike.
    history: crate::history::XferHistory,
    /// Backoff jitter.
    jitter: SplitMix64,
    /// cc_config `unsigned_apps_ok` as of the last tick.
    unsigned_apps_ok: bool,
    /// Size and modification time of each verified app file, by (project URL, file name):
    /// a file that changes on disk is fetched and verified again before it may run.
    verified: AppStamps,
    /// Each project's last plan, by master URL: the next one keeps what still holds.
    plans: HashMap<String, Plan>,
    /// Where each project's app files were last found in its files, by master URL and name.
    app_files_at: HashMap<String, HashMap<String, usize>>,
    /// Retry figures and `--exit_before_upload` (the official defaults unless the command
    /// line changed them).
    pub tuning: crate::tuning::Tuning,
}

/// The position of app file `name` in `ps.files`: where it was found last time when it is
/// still there, else found by a sweep (a project has few app files and many files, so no
/// index of every file is built for them).
fn app_file_at(hints: &mut HashMap<String, usize>, ps: &ProjectState, name: &str) -> Option<usize> {
    if let Some(&i) = hints.get(name) {
        if ps.files.get(i).is_some_and(|f| f.name == name) {
            return Some(i);
        }
    }
    let i = ps.files.iter().position(|f| f.name == name)?;
    hints.insert(name.to_owned(), i);
    Some(i)
}

/// The partial file of a download.
fn partial_path(dest: &Path) -> PathBuf {
    let mut s = dest.as_os_str().to_owned();
    s.push(".part");
    PathBuf::from(s)
}

impl Transfers {
    /// Transfers for data directory `dir`.
    pub fn new(dir: &Path) -> Transfers {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(7, |d| d.as_nanos() as u64);
        Transfers {
            dir: std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()),
            active: HashMap::new(),
            backoff: HashMap::new(),
            daily: HashMap::new(),
            bytes_moved: (0, 0),
            history: crate::history::XferHistory::default(),
            jitter: SplitMix64::new(seed),
            unsigned_apps_ok: false,
            verified: HashMap::new(),
            plans: HashMap::new(),
            app_files_at: HashMap::new(),
            tuning: crate::tuning::Tuning::default(),
        }
    }

    /// Number of transfers under way.
    pub fn active_count(&self) -> usize {
        self.active.len()
    }

    /// Starts the transfers that may start now; returns true when the state changed.
    pub fn tick(
        &mut self,
        state: &mut ClientState,
        ctx: &TransferContext<'_>,
        now: f64,
        events: &mpsc::Sender<Event>,
    ) -> bool {
        if !ctx.network_allowed {
            for a in self.active.values() {
                a.cancel.cancel();
            }
            return false;
        }
        ctx.http.set_bandwidth_limits(
            ctx.prefs.max_bytes_sec_down.max(0.0) as u64,
            ctx.prefs.max_bytes_sec_up.max(0.0) as u64,
        );
        if self.over_daily_limit(ctx.prefs, now) {
            return false;
        }
        let max_total = usize::try_from(ctx.cc.max_file_xfers)
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or(DEFAULT_MAX_XFERS);
        let max_project = usize::try_from(ctx.cc.max_file_xfers_per_project)
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or(DEFAULT_MAX_XFERS_PER_PROJECT);
        self.unsigned_apps_ok = ctx.cc.unsigned_apps_ok;
        let version = state.core_client_version;
        let mut changed = false;
        changed |= self.check_app_files(state);
        // Outputs the apps wrote become present; results move on as their files allow.
        // Each project's tasks' files are looked up once for the whole turn.
        let mut plans = Vec::with_capacity(state.projects.len());
        let mut old_plans = std::mem::take(&mut self.plans);
        for ps in &mut state.projects {
            let pdir = config::project_dir(&self.dir, &ps.project.master_url);
            let old = old_plans.remove(&ps.project.master_url);
            let plan = Plan::renew(ps, old.unwrap_or_default());
            for i in plan.outputs() {
                if let Some(f) = ps.files.get_mut(i) {
                    if f.status == 0 && !f.uploaded && pdir.join(&f.name).is_file() {
                        f.status = 1;
                        changed = true;
                    }
                }
            }
            changed |= plan.update(ps, now);
            plans.push(plan);
        }
        for (ps, plan) in state.projects.iter_mut().zip(&plans) {
            if self.active.len() >= max_total {
                break;
            }
            if ps.project.suspended_via_gui {
                continue;
            }
            let url = ps.project.master_url.clone();
            let pdir = config::project_dir(&self.dir, &url);
            for (at, upload) in plan.wanted(ps) {
                if self.active.len() >= max_total {
                    break;
                }
                let in_project = self.active.keys().filter(|(u, _)| *u == url).count();
                if in_project >= max_project {
                    break;
                }
                let Some(f) = ps.files.get_mut(at) else {
                    continue;
                };
                let name = f.name.clone();
                let key = (url.clone(), name.clone());
                if self.active.contains_key(&key) {
                    continue;
                }
                let mut retry = f
                    .persistent_file_xfer
                    .as_deref()
                    .map(Retry::parse)
                    .unwrap_or_default();
                if f.persistent_file_xfer.is_none() {
                    retry.first_request_time = now;
                    retry.is_upload = upload;
                    f.persistent_file_xfer = Some(retry.to_xml());
                    changed = true;
                }
                let project_ok = self
                    .backoff
                    .get(&(url.clone(), upload))
                    .is_none_or(|b| b.ok_to_transfer(now));
                if now < retry.next_request_time || (retry.num_retries > 0 && !project_ok) {
                    continue;
                }
                if upload && self.tuning.exit_before_upload {
                    info!(project = %url, "exiting before the upload of {} (--exit_before_upload)", f.name);
                    let _ = events.try_send(Event::Shutdown("--exit_before_upload"));
                    return changed;
                }
                let path = pdir.join(&f.name);
                if !ferrite_project::names::stays_inside(&pdir, &path) {
                    warn!(project = %url, "file {} would leave the project directory; not transferred", f.name);
                    f.status = ERR_BAD_FILENAME;
                    changed = true;
                    continue;
                }
                let active = if upload {
                    self.start_upload(ctx.http, version, &url, f, path, events)
                } else {
                    self.start_download(ctx.http, &url, f, path, ctx.cc.unsigned_apps_ok, events)
                };
                info!(
                    target: "ferrite::file_xfer",
                    project = %url,
                    "Started {} of {}",
                    if upload { "upload" } else { "download" },
                    name
                );
                self.active.insert(key, active);
            }
        }
        for (ps, plan) in state.projects.iter().zip(plans) {
            self.plans.insert(ps.project.master_url.clone(), plan);
        }
        changed
    }

    /// Moves `ps`'s results along after a file changed (see [`update_results`]), with the
    /// project's plan renewed from the last one.
    fn move_results_along(&mut self, ps: &mut ProjectState, now: f64) {
        let url = ps.project.master_url.clone();
        let plan = Plan::renew(ps, self.plans.remove(&url).unwrap_or_default());
        plan.update(ps, now);
        self.plans.insert(url, plan);
    }

    fn start_download(
        &mut self,
        http: &HttpClient,
        url: &str,
        f: &FileInfo,
        dest: PathBuf,
        unsigned_apps_ok: bool,
        events: &mpsc::Sender<Event>,
    ) -> Active {
        let (urls, gzip) = if f.gzipped_urls.is_empty() {
            (f.download_urls.clone(), f.download_gzipped)
        } else {
            (f.gzipped_urls.clone(), true)
        };
        let signed = f.signature_required && !unsigned_apps_ok;
        let positive = |x: f64| (x > 0.0 && x.is_finite()).then_some(x as u64);
        let expected = ExpectedFile {
            nbytes: positive(f.nbytes),
            md5: (!signed && !f.md5_cksum.trim().is_empty()).then(|| f.md5_cksum.clone()),
            max_nbytes: positive(f.max_nbytes),
            gzip,
            gzipped_nbytes: positive(f.gzipped_nbytes),
        };
        let target = DownloadTarget {
            partial: partial_path(&dest),
            dest,
        };
        let start_offset = std::fs::metadata(&target.partial).map_or(0, |m| m.len());
        let progress = Arc::new(AtomicU64::new(start_offset));
        let cancel = CancellationToken::new();
        let active = Active {
            cancel: cancel.clone(),
            progress: progress.clone(),
            start_offset,
            started: Instant::now(),
            url: urls.first().cloned().unwrap_or_default(),
        };
        let http = http.clone();
        let events = events.clone();
        let project = url.to_owned();
        let file = f.name.clone();
        tokio::spawn(async move {
            let p = progress.clone();
            let report = move |n: u64| p.store(n, Ordering::Relaxed);
            let r = http
                .download(&urls, &target, &expected, &report, &cancel)
                .await;
            let done = match r {
                Ok(o) => TransferDone {
                    project,
                    file,
                    upload: false,
                    result: Ok(o.received),
                    download: Some((o.nbytes, o.md5)),
                    code: 0,
                    permanent: false,
                    resumed_from: o.resumed_from,
                    sent: None,
                },
                Err(e) => TransferDone {
                    project,
                    file,
                    upload: false,
                    result: Err(if local_disk_full(&e) {
                        format!("{e}: {DISK_FULL}")
                    } else {
                        e.to_string()
                    }),
                    download: None,
                    code: e.boinc_code(),
                    permanent: e.is_permanent(),
                    resumed_from: 0,
                    sent: None,
                },
            };
            let _ = events.send(Event::Transfer(done)).await;
        });
        active
    }

    fn start_upload(
        &mut self,
        http: &HttpClient,
        version: ferrite_proto::client_state::ClientVersion,
        url: &str,
        f: &FileInfo,
        path: PathBuf,
        events: &mpsc::Sender<Event>,
    ) -> Active {
        let progress = Arc::new(AtomicU64::new(0));
        let cancel = CancellationToken::new();
        let urls = f.upload_urls.clone();
        let active = Active {
            cancel: cancel.clone(),
            progress: progress.clone(),
            start_offset: 0,
            started: Instant::now(),
            url: urls.first().cloned().unwrap_or_default(),
        };
        let http = http.clone();
        let events = events.clone();
        let project = url.to_owned();
        let file = f.clone();
        tokio::spawn(async move {
            let name = file.name.clone();
            let fail = |msg: String, code: i32, permanent: bool| TransferDone {
                project: project.clone(),
                file: name.clone(),
                upload: true,
                result: Err(msg),
                download: None,
                code,
                permanent,
                resumed_from: 0,
                sent: None,
            };
            let p2 = path.clone();
            let hashed = tokio::task::spawn_blocking(move || {
                // Never through a link: an output must be a file of the project's own.
                let f = std::os::unix::fs::OpenOptionsExt::custom_flags(
                    std::fs::OpenOptions::new().read(true),
                    libc::O_NOFOLLOW,
                )
                .open(&p2)?;
                let len = f.metadata()?.len();
                ferrite_net::fast_md5::md5_hex_reader(std::io::BufReader::new(f))
                    .map(|md5| (len, md5))
            })
            .await;
            let (nbytes, md5) = match hashed {
                Ok(Ok(x)) => x,
                Ok(Err(e)) => {
                    let done = fail(format!("reading {}: {e}", path.display()), -108, true);
                    let _ = events.send(Event::Transfer(done)).await;
                    return;
                }
                Err(e) => {
                    let done = fail(format!("hashing: {e}"), -108, false);
                    let _ = events.send(Event::Transfer(done)).await;
                    return;
                }
            };
            let sums = (nbytes, md5.clone());
            let job = UploadJob {
                file,
                path,
                nbytes,
                md5,
                version,
                known_offset: None,
            };
            let mut done = fail("no upload URL".to_owned(), -224, true);
            for u in &urls {
                let p = progress.clone();
                let report = move |n: u64| p.store(n, Ordering::Relaxed);
                match http.upload(u, &job, &report, &cancel).await {
                    Ok(o) => {
                        done = TransferDone {
                            project: project.clone(),
                            file: name.clone(),
                            upload: true,
                            result: Ok(o.sent),
                            download: None,
                            code: 0,
                            permanent: false,
                            resumed_from: 0,
                            sent: Some(sums.clone()),
                        };
                        break;
                    }
                    Err(e) => {
                        let permanent = e.is_permanent();
                        done = fail(format!("{u}: {e}"), e.boinc_code(), permanent);
                        if permanent || cancel.is_cancelled() {
                            break;
                        }
                    }
                }
            }
            let _ = events.send(Event::Transfer(done)).await;
        });
        active
    }

    /// Applies the end of a transfer; says whether the state changed and whether tasks moved.
    pub fn finished(&mut self, done: TransferDone, state: &mut ClientState, now: f64) -> Ended {
        let key = (done.project.clone(), done.file.clone());
        let active = self.active.remove(&key);
        let elapsed = active
            .as_ref()
            .map_or(0.0, |a| a.started.elapsed().as_secs_f64());
        if let Ok(n) = &done.result {
            *self
                .daily
                .entry((now / 86400.0).floor() as i64)
                .or_default() += n;
            let dir = if done.upload {
                Direction::Up
            } else {
                Direction::Down
            };
            record_transfer(&mut state.net_stats, dir, *n as f64, elapsed, now);
        }
        let Some(ps) = state.project_mut(&done.project) else {
            return Ended::default();
        };
        let code_sign_key = ps.project.code_sign_key.clone();
        let pdir = config::project_dir(&self.dir, &done.project);
        let u = self.jitter.next_unit();
        let direction = if done.upload { "upload" } else { "download" };
        let Some(f) = ps.file_mut(&done.file) else {
            return Ended::default();
        };
        let before = (f.status, f.uploaded);
        let mut retry = f
            .persistent_file_xfer
            .as_deref()
            .map(Retry::parse)
            .unwrap_or_default();
        retry.time_so_far += elapsed;
        match (&done.result, done.download.as_ref()) {
            (Ok(_), Some((len, md5))) => {
                // Downloaded: verify against the entry (size, signature or MD5).
                let outcome = verify_download(
                    f,
                    *len,
                    md5,
                    code_sign_key.as_deref(),
                    self.unsigned_apps_ok,
                    &BoincCrypt,
                );
                let path = pdir.join(&f.name);
                match &outcome {
                    Ok(()) => {
                        if f.executable {
                            set_executable(&path);
                        }
                        // The copy just verified is the one an app may run: a change after
                        // this moment is a change (`check_app_files`), even one made before
                        // the next check first looks at the file.
                        if let Ok(meta) = std::fs::metadata(&path) {
                            self.verified
                                .insert((done.project.clone(), f.name.clone()), file_stamp(&meta));
                        }
                        if done.resumed_from > 0 {
                            info!(target: "ferrite::file_xfer", project = %done.project, "Finished download of {} (resumed at byte {})", f.name, done.resumed_from);
                        } else {
                            info!(target: "ferrite::file_xfer", project = %done.project, "Finished download of {}", f.name);
                        }
                    }
                    Err(e) => {
                        warn!(project = %done.project, "downloaded file {} refused: {e}", f.name);
                        let _ = std::fs::remove_file(&path);
                    }
                }
                record_verification(f, &outcome);
                f.persistent_file_xfer = None;
                self.backoff
                    .entry((done.project.clone(), false))
                    .or_default()
                    .on_success();
            }
            (Ok(_), None) => {
                info!(target: "ferrite::file_xfer", project = %done.project, "Finished upload of {}", f.name);
                f.uploaded = true;
                // The report describes what the server got.
                if let Some((len, md5)) = &done.sent {
                    f.nbytes = *len as f64;
                    f.md5_cksum = md5.clone();
                }
                f.persistent_file_xfer = None;
                self.backoff
                    .entry((done.project.clone(), true))
                    .or_default()
                    .on_success();
            }
            (Err(msg), _) => {
                let give_up = done.permanent
                    || now - retry.first_request_time.max(1.0)
                        > self.tuning.file_xfer_giveup_period
                        && retry.first_request_time > 0.0;
                if done.code == ERR_ABORTED_VIA_GUI && active.is_none() {
                    // Cancelled by abort/shutdown: the caller already recorded it.
                } else if give_up {
                    warn!(project = %done.project, "giving up on {direction} of {}: {msg}", f.name);
                    f.status = if done.code < 0 {
                        done.code
                    } else {
                        ERR_RESULT_DOWNLOAD
                    };
                    f.error_msg = Some(msg.clone());
                    f.persistent_file_xfer = None;
                    if !done.upload {
                        let _ = std::fs::remove_file(partial_path(&pdir.join(&f.name)));
                    }
                } else if msg.ends_with(DISK_FULL) {
                    // Our disk, not the server, failed: no backoff; tried again soon, and
                    // resumed from what was written.
                    retry.next_request_time = now + DISK_FULL_RETRY;
                    retry.is_upload = done.upload;
                    f.persistent_file_xfer = Some(retry.to_xml());
                    warn!(
                        project = %done.project,
                        "{direction} of {} stopped: {msg}; trying again in {DISK_FULL_RETRY:.0} s",
                        f.name
                    );
                } else {
                    retry.num_retries += 1;
                    let delay = backoff_delay(
                        retry.num_retries,
                        self.tuning.pers_retry_delay_min,
                        self.tuning.pers_retry_delay_max,
                        u,
                    );
                    retry.next_request_time = now + delay;
                    retry.last_bytes_xferred = active
                        .as_ref()
                        .map_or(0.0, |a| a.progress.load(Ordering::Relaxed) as f64);
                    retry.is_upload = done.upload;
                    f.persistent_file_xfer = Some(retry.to_xml());
                    info!(
                        project = %done.project,
                        "{direction} of {} failed: {msg}; retry in {delay:.0} s",
                        f.name
                    );
                    self.backoff
                        .entry((done.project.clone(), done.upload))
                        .or_default()
                        .on_failure(now, u);
                }
            }
        }
        // Only a file that became present, uploaded or failed can move tasks along: a
        // retry, the common end of a failure, leaves the tasks where they are (no walk over
        // every waiting task at each failed attempt).
        let moves = (f.status, f.uploaded) != before;
        if !done.upload && done.result.is_ok() {
            // A project file that arrived gets its link file.
            crate::project_files::write_links(&self.dir, ps, Some(&done.file));
        }
        if moves {
            self.move_results_along(ps, now);
        }
        Ended {
            changed: true,
            moved: moves,
        }
    }

    /// App-version files are watched: one whose size or modification time changed since it
    /// was verified is deleted and fetched and verified again, and the tasks that would run
    /// it (not those running now) wait for it. Returns true when the state changed.
    pub fn check_app_files(&mut self, state: &mut ClientState) -> bool {
        let mut changed = false;
        // A record lives only as long as its file is a downloaded app file of an attached
        // project: after a detach, a reset or a new download the file is verified anew, and
        // the old record must not make the new copy look changed.
        // (Records are made below under each project's own URL.) The files are looked up
        // through an index, not a scan of the project's files per app file.
        if !self.verified.is_empty() {
            let mut live: HashSet<(&str, &str)> = HashSet::new();
            for ps in &state.projects {
                let hints = self
                    .app_files_at
                    .entry(ps.project.master_url.clone())
                    .or_default();
                for fr in ps.app_versions.iter().flat_map(|v| v.file_refs.iter()) {
                    let f = app_file_at(hints, ps, &fr.file_name).and_then(|i| ps.files.get(i));
                    if f.is_some_and(|f| f.status == 1) {
                        live.insert((ps.project.master_url.as_str(), fr.file_name.as_str()));
                    }
                }
            }
            self.verified
                .retain(|(url, name), _| live.contains(&(url.as_str(), name.as_str())));
        }
        let running: std::collections::HashSet<(String, String)> = state
            .active_tasks
            .iter()
            .map(|a| (a.project_master_url.clone(), a.result_name.clone()))
            .collect();
        for ps in &mut state.projects {
            let url = ps.project.master_url.clone();
            let pdir = config::project_dir(&self.dir, &url);
            let app_files: Vec<String> = ps
                .app_versions
                .iter()
                .flat_map(|v| v.file_refs.iter().map(|f| f.file_name.clone()))
                .collect();
            let mut tampered = Vec::new();
            let hints = self.app_files_at.entry(url.clone()).or_default();
            for name in app_files {
                let Some(f) = app_file_at(hints, ps, &name).and_then(|i| ps.files.get(i)) else {
                    continue;
                };
                // An anonymous project's files are the volunteer's builds: they may change.
                if f.status != 1
                    || (ps.project.anonymous_platform
                        && ferrite_project::anonymous::is_local_file(f))
                {
                    continue;
                }
                let Ok(meta) = std::fs::metadata(pdir.join(&name)) else {
                    continue;
                };
                let now = file_stamp(&meta);
                match self.verified.get(&(url.clone(), name.clone())) {
                    None => {
                        self.verified.insert((url.clone(), name), now);
                    }
                    Some(was) if *was != now => tampered.push(name),
                    Some(_) => {}
                }
            }
            for name in tampered {
                warn!(project = %url, "app file {name} changed on disk; it is fetched and verified again before anything runs it");
                self.verified.remove(&(url.clone(), name.clone()));
                let _ = std::fs::remove_file(pdir.join(&name));
                if let Some(f) = ps.file_mut(&name) {
                    f.status = 0;
                    f.persistent_file_xfer = None;
                }
                let uses: Vec<usize> = ps
                    .results
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| {
                        r.state == ResultState::FilesDownloaded
                            && !running.contains(&(url.clone(), r.name.clone()))
                            && ps
                                .app_version_of(r)
                                .is_some_and(|v| v.file_refs.iter().any(|fr| fr.file_name == name))
                    })
                    .map(|(i, _)| i)
                    .collect();
                for i in uses {
                    if let Some(r) = ps.results.get_mut(i) {
                        r.state = ResultState::FilesDownloading;
                    }
                }
                changed = true;
            }
        }
        changed
    }

    /// The stamp of each app file as it was verified: a task's start compares its app's
    /// files with these right before and right after the spawn.
    pub fn app_stamps(&self) -> &AppStamps {
        &self.verified
    }

    /// "Retry now" for every waiting transfer (GUI `network_available`): their next request
    /// times and the projects' backoffs are cleared.
    pub fn retry_all(&mut self, state: &mut ClientState, _now: f64) {
        self.backoff.clear();
        for ps in &mut state.projects {
            for f in &mut ps.files {
                if let Some(x) = f.persistent_file_xfer.as_deref() {
                    let mut r = Retry::parse(x);
                    r.next_request_time = 0.0;
                    f.persistent_file_xfer = Some(r.to_xml());
                }
            }
        }
    }

    /// `retry_file_transfer`: the file's transfer may start at once. False when the file
    /// has no transfer waiting.
    pub fn retry_now(&mut self, state: &mut ClientState, project: &str, file: &str) -> bool {
        let Some(f) = state.project_mut(project).and_then(|p| p.file_mut(file)) else {
            return false;
        };
        let Some(x) = f.persistent_file_xfer.as_deref() else {
            return false;
        };
        let mut r = Retry::parse(x);
        r.next_request_time = 0.0;
        let upload = r.is_upload;
        f.persistent_file_xfer = Some(r.to_xml());
        self.backoff.remove(&(project.to_owned(), upload));
        true
    }

    /// `abort_file_transfer`: stops the transfer and puts the file in error
    /// (`ERR_ABORTED_VIA_GUI`); its tasks fail and are reported. False when the file has no
    /// transfer.
    pub fn abort(&mut self, state: &mut ClientState, project: &str, file: &str, now: f64) -> bool {
        let key = (project.to_owned(), file.to_owned());
        let running = self.active.remove(&key);
        if let Some(a) = &running {
            a.cancel.cancel();
        }
        let Some(ps) = state.project_mut(project) else {
            return false;
        };
        let Some(f) = ps.file_mut(file) else {
            return false;
        };
        if running.is_none() && f.persistent_file_xfer.is_none() {
            return false;
        }
        f.status = ERR_ABORTED_VIA_GUI;
        f.error_msg = Some("aborted by user".to_owned());
        f.persistent_file_xfer = None;
        self.move_results_along(ps, now);
        true
    }

    /// Live figures of the transfer of `f` (a file of `project`) under way.
    pub fn gui_progress(&self, project: &str, f: &FileInfo) -> Option<TransferProgress> {
        let a = self.active.get(&(project.to_owned(), f.name.clone()))?;
        let now_at = a.progress.load(Ordering::Relaxed);
        let elapsed = a.started.elapsed().as_secs_f64();
        let secs = elapsed.max(1e-3);
        let mut retry = f
            .persistent_file_xfer
            .as_deref()
            .map(Retry::parse)
            .unwrap_or_default();
        retry.time_so_far += elapsed;
        retry.last_bytes_xferred = now_at as f64;
        // As the official FILE_XFER: a download's bytes count from the start of the file
        // and its offset is 0; an upload's offset is where the server had it.
        Some(TransferProgress {
            bytes_xferred: now_at as f64,
            file_offset: if retry.is_upload {
                a.start_offset as f64
            } else {
                0.0
            },
            xfer_speed: now_at.saturating_sub(a.start_offset) as f64 / secs,
            url: a.url.clone(),
            record: retry.to_xml(),
        })
    }

    /// Seconds until the project's transfers in this direction may go again after repeated
    /// failures (`FILE_XFER_BACKOFF`: the GUI's "project backoff"); `None` when they may go.
    pub fn project_backoff(&self, project: &str, upload: bool, now: f64) -> Option<f64> {
        let b = self.backoff.get(&(project.to_owned(), upload))?;
        (b.next_xfer_time > now).then_some(b.next_xfer_time - now)
    }

    /// Test support: the project's transfers in this direction back off until `until`.
    #[cfg(test)]
    pub(crate) fn set_project_backoff(&mut self, project: &str, upload: bool, until: f64) {
        let b = self
            .backoff
            .entry((project.to_owned(), upload))
            .or_default();
        b.failures = ferrite_net::backoff::PROJECT_FAILURE_LIMIT;
        b.next_xfer_time = until;
    }

    /// Test support: the transfer of `file` has been under way for `secs` seconds from byte
    /// `from` and has reached byte `at` (nothing runs it).
    #[cfg(test)]
    pub(crate) fn pretend_active(
        &mut self,
        project: &str,
        file: &str,
        secs: u64,
        (from, at): (u64, u64),
    ) {
        let started = Instant::now()
            .checked_sub(std::time::Duration::from_secs(secs))
            .unwrap_or_else(Instant::now);
        self.active.insert(
            (project.to_owned(), file.to_owned()),
            Active {
                cancel: CancellationToken::new(),
                progress: Arc::new(AtomicU64::new(at)),
                start_offset: from,
                started,
                url: "http://127.0.0.1/upload".to_owned(),
            },
        );
    }

    /// Stops every transfer (partial files stay for the next start).
    pub async fn shutdown(&mut self) {
        for (_, a) in self.active.drain() {
            a.cancel.cancel();
        }
    }
}

fn set_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(m) = std::fs::metadata(path) {
        let mut p = m.permissions();
        p.set_mode(0o755);
        let _ = std::fs::set_permissions(path, p);
    }
}

/// What an app file's check compares: its size and modification time.
pub(crate) type FileStamp = (u64, std::time::SystemTime);

/// The stamp of each verified app file, by (project URL, file name).
pub type AppStamps = HashMap<(String, String), FileStamp>;

/// The stamp of a file from its metadata.
pub(crate) fn file_stamp(meta: &std::fs::Metadata) -> FileStamp {
    (meta.len(), meta.modified().unwrap_or(std::time::UNIX_EPOCH))
}

#[cfg(test)]
mod tests;
