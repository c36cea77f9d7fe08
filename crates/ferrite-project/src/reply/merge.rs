//! The reply's objects merged into a project's state: apps, files, app versions (with
//! their signatures checked), workunits and results, each through an index by name; the
//! results put in BOINC's run order; the server's aborts.

use std::collections::HashSet;

use rustc_hash::FxHashMap;

use ferrite_proto::client_state::{
    AppVersion, FileInfo, FileRef, ProjectState, ResultState, TaskResult, Workunit,
};
use ferrite_proto::sched_reply::SchedulerReply;

use super::*;
use crate::names::{check_file_name, check_object_name, check_open_name};
use crate::verify::SignatureVerifier;

pub(super) fn merge_apps(ps: &mut ProjectState, reply: &SchedulerReply, out: &mut ApplyOutcome) {
    for a in &reply.apps {
        if let Err(e) = check_object_name(&a.name) {
            out.refusals.push(Refusal {
                kind: ObjectKind::App,
                name: a.name.clone(),
                reason: RefusalReason::BadName(e),
            });
            continue;
        }
        let friendly = if a.user_friendly_name.trim().is_empty() {
            a.name.clone()
        } else {
            a.user_friendly_name.clone()
        };
        match ps.apps.iter_mut().find(|x| x.name == a.name) {
            Some(x) => {
                x.user_friendly_name = friendly;
                x.non_cpu_intensive = a.non_cpu_intensive;
                x.sporadic = a.sporadic;
                x.fraction_done_exact = a.fraction_done_exact;
            }
            None => ps.apps.push(App {
                name: a.name.clone(),
                user_friendly_name: friendly,
                non_cpu_intensive: a.non_cpu_intensive,
                sporadic: a.sporadic,
                fraction_done_exact: a.fraction_done_exact,
                extra: Vec::new(),
            }),
        }
    }
}

/// A fresh file record from a reply's description: only what a server may set.
pub(super) fn new_file(f: &FileInfo, now: f64) -> FileInfo {
    let mut n = FileInfo {
        name: f.name.clone(),
        nbytes: clean(f.nbytes),
        max_nbytes: clean(f.max_nbytes),
        md5_cksum: f.md5_cksum.trim().to_ascii_lowercase(),
        executable: f.executable,
        sticky: f.sticky,
        sticky_lifetime: clean(f.sticky_lifetime),
        gzip_when_done: f.gzip_when_done,
        gzipped_nbytes: clean(f.gzipped_nbytes),
        file_signature: f.file_signature.clone(),
        download_urls: f.download_urls.clone(),
        upload_urls: f.upload_urls.clone(),
        xml_signature: f.xml_signature.clone(),
        ..FileInfo::default()
    };
    if !f.gzipped_urls.is_empty() {
        n.download_urls = f.gzipped_urls.clone();
        n.download_gzipped = true;
    }
    if n.sticky_lifetime > 0.0 {
        n.sticky_expire_time = now + n.sticky_lifetime;
    }
    n
}

/// Positions of objects of one kind by name (kept up to date as the merge adds objects).
/// Hashed with `rustc-hash`'s hasher, several times faster than the standard SipHash on
/// short names. It does not resist chosen collisions; the names are the state's and its
/// project's replies', and a project server, whose apps the client runs, gains nothing by
/// choosing colliding names.
pub(super) type Names = FxHashMap<String, usize>;

/// Index by name of `items` (the first of equal names, as the linear lookups of
/// `ProjectState` find), so that a reply with many objects is merged in linear time.
pub(super) fn positions<T>(items: &[T], name: impl Fn(&T) -> &str) -> Names {
    let mut at = Names::with_capacity_and_hasher(items.len(), Default::default());
    for (i, x) in items.iter().enumerate() {
        at.entry(name(x).to_owned()).or_insert(i);
    }
    at
}

pub(super) fn clean(v: f64) -> f64 {
    if v.is_finite() && v >= 0.0 {
        v
    } else {
        0.0
    }
}

/// Merges the reply's files; returns the names of files (new or re-sent) that may need a
/// download, in reply order.
pub(super) fn merge_files(
    ps: &mut ProjectState,
    file_infos: &[FileInfo],
    ctx: &Ctx<'_>,
    at: &mut Names,
    out: &mut ApplyOutcome,
) -> Vec<String> {
    let mut touched = Vec::new();
    let mut seen = HashSet::new();
    for f in file_infos {
        if let Err(e) = check_file_name(&f.name) {
            out.refusals.push(Refusal {
                kind: ObjectKind::File,
                name: f.name.clone(),
                reason: RefusalReason::BadName(e),
            });
            continue;
        }
        let incoming = new_file(f, ctx.now);
        match at.get(&f.name).copied().and_then(|i| ps.files.get_mut(i)) {
            Some(x) => {
                if !incoming.download_urls.is_empty() {
                    x.download_urls = incoming.download_urls;
                    x.download_gzipped = incoming.download_gzipped;
                    x.gzipped_nbytes = incoming.gzipped_nbytes;
                }
                if !incoming.upload_urls.is_empty() {
                    x.upload_urls = incoming.upload_urls;
                }
                if x.max_nbytes == 0.0 {
                    x.max_nbytes = incoming.max_nbytes;
                }
                if incoming.file_signature.is_some() {
                    x.file_signature = incoming.file_signature;
                }
                if incoming.xml_signature.is_some() {
                    x.xml_signature = incoming.xml_signature;
                }
                x.executable |= incoming.executable;
                x.sticky = incoming.sticky;
                if incoming.sticky_lifetime > 0.0 {
                    x.sticky_lifetime = incoming.sticky_lifetime;
                    x.sticky_expire_time = incoming.sticky_expire_time;
                }
                // Re-sent after an error: clear it so it is fetched again.
                if x.status < 0 && !x.download_urls.is_empty() {
                    x.status = 0;
                    x.error_msg = None;
                }
            }
            None => {
                at.insert(f.name.clone(), ps.files.len());
                ps.files.push(incoming);
            }
        }
        if seen.insert(f.name.as_str()) {
            touched.push(f.name.clone());
        }
    }
    touched
}

pub(super) fn check_ref(fr: &FileRef) -> Result<(), RefusalReason> {
    check_file_name(&fr.file_name).map_err(|error| RefusalReason::BadReference {
        name: fr.file_name.clone(),
        error,
    })?;
    if !fr.open_name.is_empty() {
        check_open_name(&fr.open_name).map_err(|error| RefusalReason::BadReference {
            name: fr.open_name.clone(),
            error,
        })?;
    }
    Ok(())
}

pub(super) fn check_refs(files: &Names, refs: &[FileRef]) -> Result<(), RefusalReason> {
    for fr in refs {
        check_ref(fr)?;
        if !files.contains_key(&fr.file_name) {
            return Err(RefusalReason::UnknownFile(fr.file_name.clone()));
        }
    }
    Ok(())
}

pub(super) fn merge_app_versions(
    ps: &mut ProjectState,
    reply: &SchedulerReply,
    ctx: &Ctx<'_>,
    files: &Names,
    out: &mut ApplyOutcome,
) {
    for av in &reply.app_versions {
        let refuse = |reason| Refusal {
            kind: ObjectKind::AppVersion,
            name: format!("{} {}", av.app_name, av.version_num),
            reason,
        };
        if ps.project.anonymous_platform {
            out.refusals.push(refuse(RefusalReason::AnonymousPlatform));
            continue;
        }
        if ps.app(&av.app_name).is_none() {
            out.refusals
                .push(refuse(RefusalReason::UnknownApp(av.app_name.clone())));
            continue;
        }
        let platform = if av.platform.trim().is_empty() {
            ctx.primary.to_owned()
        } else {
            av.platform.trim().to_owned()
        };
        if !ctx.platforms.contains(&platform) {
            out.refusals
                .push(refuse(RefusalReason::UnsupportedPlatform(platform)));
            continue;
        }
        if let Err(reason) = check_refs(files, &av.file_refs) {
            out.refusals.push(refuse(reason));
            continue;
        }
        let mut usage = av.usage.clone();
        if !(usage.avg_ncpus.is_finite() && usage.avg_ncpus > 0.0) {
            usage.avg_ncpus = 1.0;
        }
        usage
            .coprocs
            .retain(|c| c.count.is_finite() && c.count > 0.0);
        for c in &mut usage.coprocs {
            if c.rsc_type == "CUDA" {
                c.rsc_type = "NVIDIA".into();
            }
        }
        if !(usage.flops.is_finite() && usage.flops > 0.0) {
            let gpus: f64 = usage.coprocs.iter().map(|c| c.count).sum();
            usage.flops = usage.avg_ncpus * ctx.p_fpops + gpus * 10.0 * ctx.p_fpops;
        }
        let key = (&av.app_name, &platform, av.version_num, &av.plan_class);
        match ps
            .app_versions
            .iter_mut()
            .find(|x| x.is(key.0, key.1, key.2, key.3))
        {
            Some(x) => x.usage = usage,
            None => ps.app_versions.push(AppVersion {
                platform,
                usage,
                extra: Vec::new(),
                ..av.clone()
            }),
        }
    }
    // Every file of an app version must be signed (unless configured otherwise).
    if !ctx.opts.unsigned_apps_ok {
        let names: Vec<String> = ps
            .app_versions
            .iter()
            .flat_map(|v| v.file_refs.iter().map(|r| r.file_name.clone()))
            .collect();
        for n in names {
            if let Some(f) = files.get(&n).and_then(|&i| ps.files.get_mut(i)) {
                f.signature_required = true;
            }
        }
    }
}

/// Decides, for each file the reply touched, whether to download it now and how it will
/// be checked; files needing a signature they cannot have are put in error at once.
pub(super) fn check_signatures(
    ps: &mut ProjectState,
    touched: &[String],
    opts: &ApplyOptions,
    verifier: &dyn SignatureVerifier,
    at: &Names,
    out: &mut ApplyOutcome,
) {
    let key = ps
        .project
        .code_sign_key
        .clone()
        .filter(|k| !k.trim().is_empty());
    for name in touched {
        let Some(f) = at.get(name).and_then(|&i| ps.files.get_mut(i)) else {
            continue;
        };
        if f.status != 0 || f.download_urls.is_empty() {
            continue;
        }
        let needs_sig = f.signature_required && !opts.unsigned_apps_ok;
        if needs_sig {
            let problem = match (&f.file_signature, &key) {
                (None, _) => Some((ERR_NO_SIGNATURE, "missing signature")),
                (Some(_), None) => Some((ERR_RSA_FAILED, "no code-signing key")),
                // With a declared MD5 the signature can be checked before downloading.
                (Some(sig), Some(k)) if f.md5_cksum.len() == 32 => {
                    (!verifier.verify_md5(k, &f.md5_cksum, sig))
                        .then_some((ERR_RSA_FAILED, "signature verification failed"))
                }
                _ => None,
            };
            if let Some((status, message)) = problem {
                f.status = status;
                f.error_msg = Some(message.to_owned());
                out.events.push(Event::FileError {
                    file: name.clone(),
                    status,
                    message: message.to_owned(),
                });
                continue;
            }
        }
        out.events.push(Event::Download {
            file: name.clone(),
            signature_pending: needs_sig,
        });
    }
}

pub(super) fn merge_workunits(
    ps: &mut ProjectState,
    workunits: &[Workunit],
    files: &Names,
    wus: &mut Names,
    out: &mut ApplyOutcome,
) {
    let apps = positions(&ps.apps, |a| &a.name);
    for wu in workunits {
        let refuse = |reason| Refusal {
            kind: ObjectKind::Workunit,
            name: wu.name.clone(),
            reason,
        };
        if let Err(e) = check_object_name(&wu.name) {
            out.refusals.push(refuse(RefusalReason::BadName(e)));
            continue;
        }
        if wus.contains_key(&wu.name) {
            continue;
        }
        if !apps.contains_key(&wu.app_name) {
            out.refusals
                .push(refuse(RefusalReason::UnknownApp(wu.app_name.clone())));
            continue;
        }
        if let Err(reason) = check_refs(files, &wu.input_files) {
            out.refusals.push(refuse(reason));
            continue;
        }
        let pos = |v: f64, d: f64| if v.is_finite() && v > 0.0 { v } else { d };
        wus.insert(wu.name.clone(), ps.workunits.len());
        ps.workunits.push(Workunit {
            command_line: wu.command_line.trim().to_owned(),
            rsc_fpops_est: pos(wu.rsc_fpops_est, 6.048e14),
            rsc_fpops_bound: pos(wu.rsc_fpops_bound, 2.4192e15),
            rsc_memory_bound: pos(wu.rsc_memory_bound, 1e8),
            rsc_disk_bound: pos(wu.rsc_disk_bound, 1e9),
            extra: Vec::new(),
            ..wu.clone()
        });
    }
}

/// The resource an app version mainly uses.
pub(super) fn resource_of(av: &AppVersion) -> String {
    av.usage
        .coprocs
        .iter()
        .find(|c| c.count > 0.0)
        .map_or_else(|| "CPU".to_owned(), |c| c.rsc_type.clone())
}

pub(super) fn merge_results(
    ps: &mut ProjectState,
    results: &[TaskResult],
    ctx: &Ctx<'_>,
    files: &Names,
    wus: &Names,
    at: &mut Names,
    out: &mut ApplyOutcome,
) {
    for r in results {
        let refuse = |reason| Refusal {
            kind: ObjectKind::Result,
            name: r.name.clone(),
            reason,
        };
        if let Err(e) = check_object_name(&r.name) {
            out.refusals.push(refuse(RefusalReason::BadName(e)));
            continue;
        }
        let deadline = if r.report_deadline.is_finite() {
            r.report_deadline
        } else {
            0.0
        };
        if let Some(x) = at.get(&r.name).and_then(|&i| ps.results.get_mut(i)) {
            x.report_deadline = deadline;
            continue;
        }
        let Some(wu) = wus.get(&r.wu_name).and_then(|&i| ps.workunits.get(i)) else {
            out.refusals
                .push(refuse(RefusalReason::UnknownWorkunit(r.wu_name.clone())));
            continue;
        };
        let app = wu.app_name.clone();
        if let Err(reason) = check_refs(files, &r.output_files) {
            out.refusals.push(refuse(reason));
            continue;
        }
        let av = if r.platform.trim().is_empty() {
            ps.app_versions
                .iter()
                .filter(|v| v.app_name == app && v.platform == ctx.primary)
                .max_by_key(|v| v.version_num)
        } else {
            ps.app_version(&app, r.platform.trim(), r.version_num, &r.plan_class)
        };
        let Some(av) = av else {
            out.refusals.push(refuse(RefusalReason::NoAppVersion));
            continue;
        };
        let resource = resource_of(av);
        let mut n = TaskResult {
            name: r.name.clone(),
            wu_name: r.wu_name.clone(),
            platform: av.platform.clone(),
            version_num: av.version_num,
            plan_class: av.plan_class.clone(),
            report_deadline: deadline,
            received_time: ctx.now,
            report_immediately: r.report_immediately,
            output_files: r.output_files.clone(),
            state: ResultState::New,
            ..TaskResult::default()
        };
        if resource != "CPU" && !ctx.opts.gpu_types.contains(&resource) {
            n.state = ResultState::Aborted;
            n.exit_status = EXIT_MISSING_COPROC;
            n.ready_to_report = true;
            n.completed_time = ctx.now;
            out.events.push(Event::TaskMissingCoproc {
                name: r.name.clone(),
                resource,
            });
        } else {
            *out.tasks_added.entry(resource.clone()).or_insert(0) += 1;
            out.events.push(Event::TaskAdded {
                name: r.name.clone(),
                resource,
            });
        }
        at.insert(r.name.clone(), ps.results.len());
        ps.results.push(n);
    }
}

/// BOINC's run order: received time, then MD5 of the name. The results are moved, not
/// copied (a host may hold 100,000 of them).
pub(super) fn sort_results(results: &mut Vec<TaskResult>) {
    let mut keyed: Vec<(f64, String, TaskResult)> = std::mem::take(results)
        .into_iter()
        .map(|r| {
            (
                r.received_time,
                ferrite_proto::crypt::md5_hex(r.name.as_bytes()),
                r,
            )
        })
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    results.extend(keyed.into_iter().map(|(_, _, r)| r));
}

/// The server aborts result `r` (`started`: it has an active task).
pub(super) fn abort(
    r: &mut TaskResult,
    started: bool,
    only_if_not_started: bool,
    now: f64,
    out: &mut ApplyOutcome,
) {
    if r.computing_done() {
        return;
    }
    if started {
        if !only_if_not_started {
            out.events.push(Event::AbortRunning(r.name.clone()));
        }
        return;
    }
    r.state = ResultState::Aborted;
    r.exit_status = EXIT_ABORTED_BY_PROJECT;
    r.ready_to_report = true;
    r.completed_time = now;
    out.events.push(Event::Aborted(r.name.clone()));
}
