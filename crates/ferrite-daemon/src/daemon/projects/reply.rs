//! A scheduler operation's end: master pages, scheduler replies applied to the state,
//! failures backed off, and the clean-up that follows the server's acknowledgements.

use std::collections::HashSet;
use std::fs;

use ferrite_project::reply::{
    apply_reply, ApplyOptions, ApplyOutcome, Event as ReplyEvent, ObjectKind,
    EXIT_ABORTED_BY_PROJECT,
};
use ferrite_project::verify::BoincCrypt;
use ferrite_proto::account::{account_file_name, escape_project_url, AccountFile};
use ferrite_proto::client_state::{ProjectLookup, ResultState, RpcReason, TaskResult};
use ferrite_proto::sched_reply::ReplyMessage;
use ferrite_sched::{Jitter, ResourceId};
use tracing::{error, info, warn};

use crate::config::{write_atomic, GLOBAL_PREFS};
use crate::projects::applying::Applying;
use crate::projects::{
    disk_figures, resource_name, root_refusal, rpc_backoff, OpDone, ReadReply, RefusalCauses,
    ERR_ATTACH_FAIL_DOWNLOAD, ERR_ATTACH_FAIL_INIT, ERR_RSC_LIMIT_EXCEEDED,
};
use crate::Daemon;

impl Daemon {
    /// A scheduler operation ended.
    pub(crate) fn project_op_done(&mut self, done: OpDone, t: f64) {
        self.projects.busy = None;
        self.projects.next_poll = 0.0;
        match done {
            OpDone::Master { project, result } => self.master_done(&project, result, t),
            OpDone::Scheduler {
                project,
                reason,
                sent,
                result,
                posted,
            } => {
                for (bytes, secs) in posted {
                    ferrite_project::stats::record_transfer(
                        &mut self.state.net_stats,
                        ferrite_project::stats::Direction::Up,
                        bytes,
                        secs,
                        t,
                    );
                }
                let c = self.projects.rpc_counts.entry(project.clone()).or_default();
                c.0 += 1;
                self.scheduler_done(&project, reason, sent, result, t)
            }
        }
        // What a reply brought (new tasks, acknowledgements, a host id) exists nowhere else:
        // save it now rather than within the second, so a crash cannot lose it.
        self.save.mark_dirty(t);
        self.save.save_if_due(&self.state, t, true);
    }

    fn master_done(&mut self, url: &str, result: Result<String, String>, t: f64) {
        let u = self.projects.jitter.next_unit();
        let esc = escape_project_url(url);
        let Some(ps) = self.state.project_mut(url) else {
            return;
        };
        let page = result.and_then(|text| {
            let _ = fs::write(self.dir.join(format!("master_{esc}.xml")), &text);
            ferrite_project::master::parse_master_page(&text).map_err(|e| e.to_string())
        });
        match page {
            Ok(page) => {
                ferrite_project::master::apply_master_page(&mut ps.project, &page);
                info!(
                    project = %url,
                    "master page: {} scheduler URL(s)",
                    ps.project.scheduler_urls.len()
                );
            }
            Err(e) => {
                info!(project = %url, "master page fetch failed: {e}");
                ferrite_project::master::master_fetch_failed(&mut ps.project);
                rpc_backoff(&mut ps.project, t, u, &self.projects.tuning);
                self.attach_failed(
                    url,
                    ERR_ATTACH_FAIL_DOWNLOAD,
                    format!("master page fetch failed: {e}"),
                );
            }
        }
    }

    /// The first contact of a GUI attach failed: it is logged (with BOINC's error code) and,
    /// as with the official client, the project stays attached and is tried again after the
    /// usual back-off (a server that is down now may be up later; detaching gives up).
    pub(crate) fn attach_failed(&mut self, url: &str, error_num: i32, message: String) {
        if self.projects.attach_pending.as_deref() == Some(url) {
            warn!(
                project = %url,
                "attach: {message} ({error_num}); the project stays attached and will be tried again"
            );
            self.projects.attach_pending = None;
        }
    }

    fn pid_of(&self, url: &str) -> Option<ferrite_sched::ProjectId> {
        self.tasks
            .ids()
            .projects
            .iter()
            .position(|u| u == url)
            .map(|i| ferrite_sched::ProjectId(i as u32))
    }

    fn scheduler_done(
        &mut self,
        url: &str,
        reason: RpcReason,
        sent: Option<ferrite_sched::WorkRequest>,
        result: Result<Box<ReadReply>, String>,
        t: f64,
    ) {
        let ReadReply { reply, held_back } = match result {
            Ok(r) => *r,
            Err(e) => return self.rpc_failed(url, reason, &e, t),
        };
        let opts = self.apply_options();
        let outcome = match apply_reply(&mut self.state, url, &reply, t, &opts, &BoincCrypt) {
            Ok(o) => o,
            Err(e) => {
                warn!("{e}");
                return;
            }
        };
        if outcome
            .events
            .iter()
            .any(|e| matches!(e, ReplyEvent::Acked(_)))
        {
            self.projects.garbage.acked();
        }
        // As the official client: the reply's messages (even "Project is temporarily shut
        // down for maintenance") and the delay asked for, before anything else.
        let got_notice = self.show_reply_messages(url, &outcome.messages, reply.request_delay);
        if outcome.project_down {
            return self.rpc_failed(url, reason, "the project is down", t);
        }
        let applying = Applying::new(
            url,
            reason,
            sent,
            &reply,
            !got_notice,
            outcome,
            held_back,
            t,
        );
        self.reply_applying(applying);
    }

    /// What `apply_reply` needs to know of the host and the configuration.
    pub(super) fn apply_options(&self) -> ApplyOptions {
        ApplyOptions {
            unsigned_apps_ok: self.config.cc.options.unsigned_apps_ok,
            gpu_types: self.gpu_types(),
            current_prefs_mod_time: self.config.prefs.prefs.mod_time,
            prefs_from_account_manager: self
                .acct_mgr
                .owns_prefs(&self.config.prefs.prefs.source_project),
        }
    }

    /// A scheduler reply and all its tasks are in the state: what it brought is acted on
    /// (files written, refused jobs errored, the core's backoffs, ...).
    pub(super) fn reply_applied(&mut self, done: Applying) {
        let Applying {
            url,
            reason,
            sent,
            request_delay,
            withdraw_notices,
            outcome,
            t,
            ..
        } = done;
        let url = url.as_str();
        self.apply_outcome(url, &outcome, sent.is_some() && withdraw_notices, t);
        self.record_statistics(url, t);
        self.refuse_jobs_too_big(url, &outcome, t);
        // The core: backoffs cleared for resources that got jobs, set for those that did not.
        if let (Some(pid), Some((_, world))) = (self.pid_of(url), self.tasks.last_pass()) {
            let world = world.clone();
            let nr = world.host.coprocs.len() + 1;
            let mut got = vec![0u32; nr];
            for (name, n) in &outcome.tasks_added {
                for (r, slot) in got.iter_mut().enumerate() {
                    if resource_name(&world, ResourceId(r as u8)) == *name {
                        *slot += n;
                    }
                }
            }
            if let Some(w) = &sent {
                self.tasks.scheduler_mut().note_work_requested(w);
            }
            let sent = sent.filter(|_| {
                matches!(
                    reason,
                    RpcReason::NeedWork | RpcReason::ResultsDue | RpcReason::TrickleUp
                ) && !outcome.too_recent
            });
            let mut jitter = self.projects.jitter.clone();
            self.tasks.scheduler_mut().handle_rpc_succeeded(
                t,
                pid,
                sent.as_ref(),
                &got,
                request_delay,
                &mut jitter,
            );
            self.projects.jitter = jitter;
            if reason == RpcReason::UserReq {
                self.tasks.scheduler_mut().handle_user_update(pid);
            }
            self.store_backoffs(url);
        }
        if self.projects.attach_pending.as_deref() == Some(url) {
            self.projects.attach_pending = None;
        }
        self.tick_soon = true;
    }

    /// After a scheduler reply, as the official client: today's credit totals go into
    /// `statistics_<project>.xml` (today's record replaced, a new day appended, records older
    /// than cc_config `save_stats_days` dropped), which GUIs draw as graphs.
    fn record_statistics(&self, url: &str, t: f64) {
        use ferrite_proto::statistics::{DailyStatistics, ProjectStatistics};
        let Some(ps) = self.state.project(url) else {
            return;
        };
        let p = &ps.project;
        let path = self
            .dir
            .join(format!("statistics_{}.xml", escape_project_url(url)));
        let mut stats = fs::read_to_string(&path)
            .ok()
            .and_then(|text| ProjectStatistics::parse(&text, "statistics").ok())
            .map(|parsed| parsed.value)
            .unwrap_or_else(|| ProjectStatistics {
                master_url: p.master_url.clone(),
                daily: Vec::new(),
            });
        stats.record(
            DailyStatistics {
                // The day starts at midnight UTC, as in the official client.
                day: t - t.rem_euclid(86_400.0),
                user_total_credit: p.user_total_credit,
                user_expavg_credit: p.user_expavg_credit,
                host_total_credit: p.host_total_credit,
                host_expavg_credit: p.host_expavg_credit,
            },
            self.config.cc.options.save_stats_days,
        );
        if let Err(e) = crate::config::write_atomic(&path, &stats.to_xml()) {
            warn!("cannot write {}: {e}", path.display());
        }
    }

    fn gpu_types(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self
            .state
            .host_info
            .coprocs
            .nvidia
            .as_ref()
            .is_some_and(|n| n.count > 0)
        {
            v.push("NVIDIA".to_owned());
        }
        for o in &self.state.host_info.coprocs.other {
            if o.count > 0 && matches!(o.element.as_str(), "coproc_ati" | "coproc_intel_gpu") {
                v.push(o.rsc_type.clone());
            }
        }
        v
    }

    fn rpc_failed(&mut self, url: &str, reason: RpcReason, why: &str, t: f64) {
        self.projects
            .rpc_counts
            .entry(url.to_owned())
            .or_default()
            .1 += 1;
        let u = self.projects.jitter.next_unit();
        let k = self.projects.tuning;
        if let Some(ps) = self.state.project_mut(url) {
            let p = &mut ps.project;
            p.scheduler_rpc_in_progress = false;
            if !matches!(reason, RpcReason::Init | RpcReason::AcctMgrReq) {
                p.sched_rpc_pending = None;
            }
            rpc_backoff(p, t, u, &k);
            info!(
                project = %url,
                "Scheduler request failed: {why}; next attempt in {:.0} s ({} failures in a row)",
                (p.min_rpc_time - t).max(0.0),
                p.nrpc_failures
            );
        }
        if let Some(pid) = self.pid_of(url) {
            let mut jitter = self.projects.jitter.clone();
            self.tasks
                .scheduler_mut()
                .handle_rpc_failed(t, pid, &mut jitter);
            self.projects.jitter = jitter;
            // The state's backoff is the one that counts (and is saved).
            let min = self
                .state
                .project(url)
                .map_or(0.0, |p| p.project.min_rpc_time);
            if let Some(fs) = self.tasks.scheduler_mut().fetch_state.get_mut(pid.index()) {
                fs.min_rpc_time = min;
            }
        }
        if reason == RpcReason::Init {
            self.attach_failed(
                url,
                ERR_ATTACH_FAIL_INIT,
                format!("scheduler request failed: {why}"),
            );
        }
    }

    /// The project's name for messages, else its URL.
    fn display_name(&self, url: &str) -> String {
        self.state
            .project(url)
            .map(|p| p.project.project_name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| url.to_owned())
    }

    /// Shows the messages of a scheduler reply, and the delay it asks for, under the
    /// project's name. As the official client: `notice` messages are scheduler notices (and
    /// user alerts in the event log), every other priority an ordinary line. Returns whether
    /// one was a notice.
    fn show_reply_messages(
        &self,
        url: &str,
        messages: &[ReplyMessage],
        delay: Option<f64>,
    ) -> bool {
        let name = self.display_name(url);
        let mut got_notice = false;
        for m in messages {
            if m.is_notice() {
                got_notice = true;
                warn!(
                    target: crate::messages::NOTICE_TARGET,
                    project = %name,
                    category = "scheduler",
                    "{}",
                    m.text.trim()
                );
            } else if m.priority.eq_ignore_ascii_case("high") {
                warn!(project = %name, "{}", m.text.trim());
            } else {
                info!(project = %name, "{}", m.text.trim());
            }
        }
        if let Some(d) = delay.filter(|d| *d > 0.0) {
            info!(project = %name, "Project requested delay of {d:.0} seconds");
        }
        got_notice
    }

    /// Acts on what applying a reply produced; `withdraw_notices`: a work request whose
    /// reply had no notice withdraws the project's scheduler notices.
    fn apply_outcome(&mut self, url: &str, out: &ApplyOutcome, withdraw_notices: bool, t: f64) {
        let name = self.display_name(url);
        if withdraw_notices {
            crate::messages::MessageLog::global().remove_notices(&name, "scheduler");
        }
        if let Some(feeds) = &out.rss_feeds {
            self.project_feeds(url, &name, feeds);
        }
        let added: u32 = out.tasks_added.values().sum();
        let acked = out
            .events
            .iter()
            .filter(|e| matches!(e, ReplyEvent::Acked(_)))
            .count();
        info!(
            project = %name,
            "Scheduler request completed: got {added} new tasks{}",
            if acked > 0 { format!(", {acked} reports acknowledged") } else { String::new() }
        );
        if let Some(gp) = &out.global_prefs {
            let text = format!(
                "<global_preferences>\n<source_project>{}</source_project>\n{}\n</global_preferences>\n",
                gp.source_project,
                gp.body.trim()
            );
            match write_atomic(&self.dir.join(GLOBAL_PREFS), &text) {
                Ok(()) => {
                    info!(project = %name, "new global preferences");
                    self.reload();
                }
                Err(e) => error!("cannot write {GLOBAL_PREFS}: {e}"),
            }
        }
        if out.project_prefs.is_some() || out.gui_urls.is_some() {
            self.update_account_file(url, out);
            let venue = self
                .state
                .project(url)
                .map(|p| p.project.host_venue.clone())
                .unwrap_or_default();
            if let Some(no_rsc) = crate::config::account_no_rsc(&self.dir, url, &venue) {
                self.config.no_rsc_prefs.insert(url.to_owned(), no_rsc);
            }
        }
        for e in &out.events {
            match e {
                ReplyEvent::AbortRunning(r) => {
                    warn!(project = %name, "task {r} aborted by the project");
                    self.tasks.abort(url, r, EXIT_ABORTED_BY_PROJECT);
                    if let Some(res) = self.state.project_mut(url).and_then(|p| p.result_mut(r)) {
                        if res.state < ResultState::ComputeError {
                            res.state = ResultState::Aborted;
                            res.exit_status = EXIT_ABORTED_BY_PROJECT;
                            res.ready_to_report = true;
                            res.completed_time = t;
                        }
                    }
                    self.state
                        .active_tasks
                        .retain(|a| !(a.project_master_url == url && a.result_name == *r));
                }
                ReplyEvent::FileError { file, message, .. } => {
                    warn!(project = %name, "file {file}: {message}");
                }
                ReplyEvent::MasterUrlChanged(c) => {
                    warn!(project = %name, "the server gives another master URL: {c:?}");
                }
                ReplyEvent::TaskMissingCoproc { name: r, resource } => {
                    warn!(project = %name, "task {r} needs a {resource} GPU this host lacks");
                }
                ReplyEvent::CodeSignKeyAccepted => {
                    info!(project = %name, "code-signing key stored");
                }
                ReplyEvent::CodeSignKeyChanged => {
                    info!(project = %name, "code-signing key changed (signed by the old key)");
                }
                ReplyEvent::ProjectFilesChanged => {
                    if let Some(ps) = self.state.project(url) {
                        crate::project_files::write_links(&self.dir, ps, None);
                    }
                }
                _ => {}
            }
        }
        self.reply_trickles(url, out);
        // Refused jobs are errored and reported, never written.
        let causes = RefusalCauses::new(&out.refusals);
        let refused: Vec<(String, String, i32)> = out
            .refusals
            .iter()
            .filter(|r| r.kind == ObjectKind::Result)
            .map(|r| {
                let (code, why) = root_refusal(&causes, &r.reason, 0);
                (r.name.clone(), why, code)
            })
            .collect();
        for r in &out.refusals {
            warn!(project = %name, "refused {:?} {:?}: {}", r.kind, r.name, r.reason);
        }
        if let Some(ps) = self.state.project_mut(url) {
            let mut known: HashSet<String> = HashSet::new();
            if !refused.is_empty() {
                known.extend(ps.results.iter().map(|r| r.name.clone()));
            }
            for (rname, why, code) in refused {
                if !known.insert(rname.clone()) {
                    continue;
                }
                ps.results.push(TaskResult {
                    name: rname,
                    state: ResultState::ComputeError,
                    exit_status: code,
                    ready_to_report: true,
                    received_time: t,
                    completed_time: t,
                    report_deadline: t,
                    stderr_out: format!(
                        "<message>\nrefused by the client: {}\n</message>",
                        ferrite_proto::xml::escape(&why)
                    ),
                    ..TaskResult::default()
                });
            }
        }
    }

    /// New jobs whose missing input files alone exceed the disk space BOINC may still use
    /// are errored and reported rather than downloaded.
    fn refuse_jobs_too_big(&mut self, url: &str, out: &ApplyOutcome, t: f64) {
        let added: Vec<&str> = out
            .events
            .iter()
            .filter_map(|e| match e {
                ReplyEvent::TaskAdded { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        if added.is_empty() {
            return;
        }
        let d = disk_figures(&self.dir, &self.state, &self.config.prefs.prefs);
        let room = (d.allowed - d.used_total).max(0.0);
        let Some(ps) = self.state.project_mut(url) else {
            return;
        };
        // Looked up through an index: a reply of 100,000 tasks is checked in linear time.
        let look = ProjectLookup::new(ps);
        let mut too_big: Vec<(usize, &str, f64)> = Vec::new();
        for name in added {
            let Some(i) = look.result_index(name) else {
                continue;
            };
            let Some(wu) = look.workunit(&ps.results[i].wu_name) else {
                continue;
            };
            let need: f64 = wu
                .input_files
                .iter()
                .filter_map(|fr| look.file(&fr.file_name))
                .filter(|f| f.status == 0)
                .map(|f| f.nbytes.max(0.0))
                .sum();
            if need > room {
                too_big.push((i, name, need));
            }
        }
        drop(look);
        for (i, name, need) in too_big {
            let msg = format!(
                "its input files need {:.1} MB; the disk preferences leave BOINC {:.1} MB",
                need / 1e6,
                room / 1e6
            );
            warn!(project = %url, "task {name} not run: {msg}");
            if let Some(r) = ps.results.get_mut(i) {
                r.state = ResultState::ComputeError;
                r.exit_status = ERR_RSC_LIMIT_EXCEEDED;
                r.ready_to_report = true;
                r.completed_time = t;
                r.stderr_out = format!(
                    "<message>\n{}\n</message>",
                    ferrite_proto::xml::escape(&msg)
                );
            }
        }
    }

    fn update_account_file(&mut self, url: &str, out: &ApplyOutcome) {
        let path = self.dir.join(account_file_name(url));
        let Ok(text) = fs::read_to_string(&path) else {
            return;
        };
        let Ok(parsed) = AccountFile::parse(&text, &account_file_name(url)) else {
            return;
        };
        let mut acct = parsed.value;
        if let Some(p) = &out.project_prefs {
            acct.project_prefs = p.clone();
        }
        if let Some(g) = &out.gui_urls {
            acct.gui_urls = Some(g.clone());
        }
        if let Some(ps) = self.state.project(url) {
            if !ps.project.project_name.is_empty() {
                acct.project_name = ps.project.project_name.clone();
            }
        }
        if let Err(e) = write_atomic(&path, &acct.to_xml()) {
            error!("cannot write {}: {e}", path.display());
        }
    }
}
