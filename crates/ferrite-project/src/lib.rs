//! Ferrite's project protocol logic: everything between the daemon's HTTP/file I/O and the
//! client state for talking to BOINC projects. Pure functions over texts, digests and
//! `now`; no I/O, no clock, no async.
//!
//! # For the daemon author
//!
//! **Attach** ([`attach`]): `get_project_config_url(url)` → GET → `parse_project_config`;
//! `lookup_account_url(&rpc_base(url, Some(&cfg)), email, &passwd_hash(pw, email))` (or
//! `create_account_url`) → GET → `parse_account_reply` gives the authenticator or a
//! `WebRpcError::Project { num, message }`. Then `new_project(&state, url, auth, email)`
//! checks the URL and returns the `ProjectState` to push (master fetch pending, RPC reason
//! INIT); write the account file yourself.
//!
//! **Master page** ([`master`]): GET the master URL → `parse_master_page(text)` →
//! `apply_master_page(&mut project, &page)` (or `master_fetch_failed` + RPC backoff).
//! `scheduler_url(&project, attempt, url_random)` picks the URL per attempt.
//!
//! **Scheduler RPC** ([`request`], [`reply`]): fill a `RequestInput` (account key, work
//! request from `ferrite-sched`, working prefs text, share fractions, disk figures, GPUs,
//! `now`, logs and trickle-ups ([`trickle`]) you read) → `build_request(&state, &input)?.to_xml()` → write
//! `sched_request_<esc>.xml`, call `note_rpc_started(&mut project)`, POST. Parse the body
//! with `SchedulerReply::parse` (proto) → `apply_reply(&mut state, url, &reply, now,
//! &ApplyOptions { unsigned_apps_ok, gpu_types, current_prefs_mod_time,
//! prefs_from_account_manager }, &BoincCrypt)`. Act on the `ApplyOutcome`:
//! `messages` (event log / notices), `global_prefs` (write `global_prefs.xml`),
//! `project_prefs` / `gui_urls` (account file), `tasks_added` (clear per-resource work
//! backoff), `project_down` (RPC backoff), and `events`: `Download` (start a transfer),
//! `AbortRunning` (kill the task, then mark it aborted with exit 202), `Acked`,
//! `FileError`, `TrickleUpsAcked` (delete the sent trickle-up files), `TrickleDown` (write
//! the file in the task's slot, tell the app), `MasterUrlChanged`, `HostIdAssigned { new_host_cpid }`,
//! …; log every `refusals` entry (objects with unsafe names or dangling references are
//! never stored). `reply::check_invariants` states what the state always satisfies.
//!
//! **Files** ([`files`]): after a download, hash the (uncompressed) bytes and call
//! `verify_download(&file, len, &md5, project.code_sign_key.as_deref(), unsigned_apps_ok,
//! &BoincCrypt)`, then `record_verification(&mut file, &result)`. Uploads: POST
//! `get_file_size_request` (files ≥ `FILE_SIZE_CHECK_THRESHOLD`), `parse_upload_reply` →
//! `resume_offset`; then POST `file_upload_header(..)` followed by the bytes from the
//! offset; `parse_upload_reply` tells success / transient / permanent.
//!
//! **Names** ([`names`]): `check_file_name`, `check_open_name`, `check_object_name` (typed
//! `NameError`); after canonicalising a path, `stays_inside(project_dir, path)` guards
//! against symbolic-link escapes.
//!
//! **Start-up file check** ([`existence`]): `check_files` compares a project's files with
//! the disk; what is missing or damaged is fetched again, tasks whose files cannot come back
//! fail with their reason.
//!
//! **Signatures** ([`verify`]): every check goes through the `SignatureVerifier` trait;
//! `BoincCrypt` is BOINC's scheme via `ferrite_proto::crypt`, and any
//! `Fn(key, md5_hex, signature) -> bool` closure works in tests.

pub mod acct_mgr;
pub mod anonymous;
pub mod attach;
pub mod disallowed;
pub mod existence;
pub mod files;
pub mod master;
pub mod names;
pub mod project_files;
pub mod reply;
pub mod request;
pub mod stats;
pub mod trickle;
pub mod verify;
