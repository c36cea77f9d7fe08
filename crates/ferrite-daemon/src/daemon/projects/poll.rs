//! The scheduler poll: the shared HTTP client, the saved backoffs given to the scheduling
//! core, and the choice and start of at most one scheduler operation at a time.

use std::fs;

use ferrite_net::HttpClient;
use ferrite_project::reply::split_tasks;
use ferrite_project::request::{build_request, note_rpc_started, RequestInput};
use ferrite_proto::account::escape_project_url;
use ferrite_proto::client_state::{RpcReason, RscBackoff};
use ferrite_proto::sched_reply::SchedulerReply;
use ferrite_sched::{Jitter, ResourceId, World};
use tracing::{error, info, warn};

use crate::event::Event;
use crate::projects::applying::REPLY_BATCH;
use crate::projects::disk::DISK_FULL_FREE_BYTES;
use crate::projects::ReadReply;
use crate::projects::{
    authenticator, client_brand, disk_figures, http_client, may_fetch_from, resource_name,
    rpc_backoff, to_request_work, volume_space, OpDone, POLL_PERIOD, REPORT_CHECK_PERIOD,
};
use crate::Daemon;

/// What the poll decided to do.
enum Action {
    Master(String),
    Rpc {
        url: String,
        reason: RpcReason,
        work: Option<ferrite_sched::WorkRequest>,
    },
}

impl Daemon {
    /// Network activity is allowed now (network mode).
    /// Network activity is allowed now: the network mode, and in "according to
    /// preferences" mode the preferences' daily network time window.
    pub(crate) fn network_allowed(&self, t: f64) -> bool {
        use ferrite_proto::client_state::RunMode;
        match crate::run_modes::current_mode(
            &self.state,
            &self.modes,
            crate::run_modes::ModeKind::Network,
            t,
        ) {
            RunMode::Always => true,
            RunMode::Never => false,
            RunMode::Auto => {
                let (hour, weekday) = ferrite_proto::prefs::local_hour_and_weekday(
                    t,
                    i64::from(self.state.host_info.timezone),
                );
                !self.config.prefs.prefs.net_suspended_at(hour, weekday)
            }
        }
    }

    /// The HTTP client every exchange shares (scheduler RPCs, transfers, the attach wizard's
    /// web RPCs, account-manager syncs, news feeds), built from cc_config at its first use,
    /// whichever comes first: a GUI request can come before the first pass's projects' turn.
    /// `None` when the configuration gives none.
    pub(crate) fn shared_http(&mut self) -> Option<HttpClient> {
        if self.projects.http.is_none() {
            let brand = client_brand(&self.dir);
            self.projects.http = http_client(&self.state, &self.config.cc.options, &brand);
        }
        self.projects.http.clone()
    }

    /// The HTTP client that scheduler RPCs and transfers share, built from cc_config at first
    /// use (none when the configuration gives none); at the first turn the saved backoffs
    /// are given to the scheduling core.
    pub(crate) fn project_http(&mut self, t: f64) -> Option<HttpClient> {
        let http = self.shared_http()?;
        if !self.projects.backoffs_loaded {
            self.projects.backoffs_loaded = true;
            self.load_backoffs(t);
            // The last pass chose its request without the saved backoffs: none is sent
            // before a pass that knows them.
            self.projects.fetch_after_next_pass = true;
            self.tasks.request_pass(t);
        }
        Some(http)
    }

    /// One turn of the project loop (after the transfers' turn): clean-up of what servers
    /// acknowledged, then at most one scheduler operation.
    pub(crate) fn tick_projects(&mut self, http: &HttpClient, t: f64) {
        let net = self.network_allowed(t);
        self.collect_garbage(t);
        if !net || self.projects.busy.is_some() || t < self.projects.next_poll {
            return;
        }
        self.projects.next_poll = t + POLL_PERIOD;
        let Some(action) = self.choose_action(t) else {
            return;
        };
        self.start_action(action, http, t);
    }

    /// Gives the persisted backoffs to the scheduling core.
    fn load_backoffs(&mut self, now: f64) {
        let Some(world) = self.tasks.last_pass().map(|(_, w)| w.clone()) else {
            self.projects.backoffs_loaded = false;
            return;
        };
        let ids = self.tasks.ids().projects.clone();
        let sched = self.tasks.scheduler_mut();
        for (i, url) in ids.iter().enumerate() {
            let Some(ps) = self.state.project(url) else {
                continue;
            };
            let Some(fs) = sched.fetch_state.get_mut(i) else {
                continue;
            };
            fs.min_rpc_time = ps.project.min_rpc_time;
            fs.restore_failures(u32::try_from(ps.project.nrpc_failures).unwrap_or(0), now);
            for b in &ps.project.rsc_backoff {
                for r in 0..fs.backoff_until.len() {
                    let rid = ResourceId(r as u8);
                    if resource_name(&world, rid) == b.name {
                        fs.backoff_until[r] = b.backoff_time;
                        if let Some(x) = fs.backoff_interval.get_mut(r) {
                            *x = b.backoff_interval;
                        }
                    }
                }
            }
        }
        // Every project shows a record per resource from the start, as the official client.
        for url in &ids {
            self.store_backoffs(url);
        }
    }

    /// Copies the core's view of a project's backoffs into the state (so they are saved and
    /// shown).
    pub(super) fn store_backoffs(&mut self, url: &str) {
        let Some((_, world)) = self.tasks.last_pass() else {
            return;
        };
        let names = resource_names(world);
        let Some(i) = self.tasks.ids().projects.iter().position(|u| u == url) else {
            return;
        };
        let Some(fs) = self.tasks.scheduler_mut().fetch_state.get(i).cloned() else {
            return;
        };
        if let Some(ps) = self.state.project_mut(url) {
            ps.project.rsc_backoff = backoff_records(&names, &fs);
        }
    }

    /// The scheduler poll's order of checks (reference §2).
    fn choose_action(&mut self, t: f64) -> Option<Action> {
        if self.host.benchmarks_running {
            return None;
        }
        // 1. Master fetches.
        for ps in &self.state.projects {
            let p = &ps.project;
            if p.suspended_via_gui || p.min_rpc_time > t {
                continue;
            }
            if p.master_url_fetch_pending || p.scheduler_urls.is_empty() {
                return Some(Action::Master(p.master_url.clone()));
            }
        }
        // 2. Pending RPCs; the server's next_rpc_time sets one.
        for ps in &mut self.state.projects {
            let p = &mut ps.project;
            if p.sched_rpc_pending.is_none()
                && p.next_rpc_time > 0.0
                && p.next_rpc_time <= t
                && !(p.dont_request_more_work && ps.results.is_empty())
            {
                p.sched_rpc_pending = Some(RpcReason::ProjectReq);
            }
        }
        for ps in &self.state.projects {
            let p = &ps.project;
            let Some(reason) = p.sched_rpc_pending else {
                continue;
            };
            let honours_backoff = reason != RpcReason::UserReq;
            let honours_suspend = !matches!(
                reason,
                RpcReason::UserReq | RpcReason::Init | RpcReason::AcctMgrReq
            );
            if (honours_backoff && p.min_rpc_time > t) || (honours_suspend && p.suspended_via_gui) {
                continue;
            }
            let url = p.master_url.clone();
            let work = if reason == RpcReason::Init {
                self.initial_request(&url)
            } else {
                self.piggyback(&url, t)
            };
            return Some(Action::Rpc { url, reason, work });
        }
        // 3. Trickle-ups.
        for ps in &self.state.projects {
            let p = &ps.project;
            if p.trickle_up_pending && p.min_rpc_time <= t && !p.suspended_via_gui {
                let url = p.master_url.clone();
                let work = self.piggyback(&url, t);
                return Some(Action::Rpc {
                    url,
                    reason: RpcReason::TrickleUp,
                    work,
                });
            }
        }
        let (out, _) = self.tasks.last_pass()?;
        // 4. Reports, as the core's rules say (checked at most once a minute, or when a
        //    report is due immediately).
        let ids = self.tasks.ids().projects.clone();
        let due: Vec<String> = out
            .reports
            .iter()
            .filter_map(|r| ids.get(r.project.index()).cloned())
            .collect();
        let fetch = out.fetch.request.clone();
        let world = self.tasks.last_pass().map(|(_, w)| w.clone())?;
        // A task that became ready to report since the last look is a reason to look now.
        let ready: usize = out.reports.iter().map(|r| r.jobs.len()).sum();
        let newly_ready = ready > self.projects.last_ready;
        self.projects.last_ready = ready;
        if !due.is_empty()
            && (t - self.projects.last_report_check >= REPORT_CHECK_PERIOD
                || newly_ready
                || self.config.cc.options.report_results_immediately)
        {
            self.projects.last_report_check = t;
            for url in due {
                let ok = self.state.project(&url).is_some_and(|ps| {
                    ps.project.min_rpc_time <= t && !ps.project.suspended_via_gui
                });
                if ok {
                    let work = self.piggyback(&url, t);
                    return Some(Action::Rpc {
                        url,
                        reason: RpcReason::ResultsDue,
                        work,
                    });
                }
            }
        }
        // 5. Work fetch, as the core chose, unless nothing more can be stored.
        if self.storage_blocks_work() {
            return None;
        }
        if std::mem::take(&mut self.projects.fetch_after_next_pass) {
            return None;
        }
        let req = fetch?;
        let url = ids.get(req.project.index())?.clone();
        let ps = self.state.project(&url)?;
        if !may_fetch_from(&ps.project, t) {
            return None;
        }
        let _ = world;
        Some(Action::Rpc {
            url,
            reason: RpcReason::NeedWork,
            work: Some(req),
        })
    }

    /// Whether the data directory can take nothing more: its file system is (almost) full, or
    /// the state cannot be saved (disk full, read-only). No work is asked for then. Says so
    /// when it starts and when it ends.
    fn storage_blocks_work(&mut self) -> bool {
        let free = volume_space(&self.dir).map(|(_, free)| free);
        let unsaved = self.save.failures() > 0;
        let full = unsaved || free.is_some_and(|f| f < DISK_FULL_FREE_BYTES);
        if full != self.projects.storage_full {
            self.projects.storage_full = full;
            if full {
                let why = if unsaved {
                    "the state file cannot be saved (disk full or read-only)".to_owned()
                } else {
                    format!(
                        "the disk holding the data directory is full ({:.0} bytes free)",
                        free.unwrap_or(0.0)
                    )
                };
                warn!("not asking for work: {why}");
            } else {
                info!("disk space is available again; asking for work as usual");
            }
        }
        full
    }

    /// The work the core would ask of `url` on an RPC made for another reason.
    /// The first request after attaching asks for one second per resource, as the core's
    /// fetch decision says for a project whose initial RPC is pending (the official client's
    /// `set_initial_work_request`); the buffer is filled at the next RPC, once the project's
    /// apps are known.
    /// Nothing is asked for while no more can be stored (a full disk).
    fn initial_request(&mut self, url: &str) -> Option<ferrite_sched::WorkRequest> {
        if self.storage_blocks_work() {
            return None;
        }
        let (out, _) = self.tasks.last_pass()?;
        let req = out.fetch.request.as_ref()?;
        let ids = &self.tasks.ids().projects;
        (req.reason == ferrite_sched::RpcReason::Init
            && ids.get(req.project.index()).is_some_and(|u| u == url))
        .then(|| req.clone())
    }

    fn piggyback(&mut self, url: &str, t: f64) -> Option<ferrite_sched::WorkRequest> {
        if self.storage_blocks_work() {
            return None;
        }
        let (out, world) = self.tasks.last_pass()?;
        let (sim, world) = (out.sim.clone(), world.clone());
        let pid = self.tasks.ids().projects.iter().position(|u| u == url)?;
        self.tasks
            .scheduler_mut()
            .piggyback(&world, t, &sim, ferrite_sched::ProjectId(pid as u32))
    }

    fn start_action(&mut self, action: Action, http: &HttpClient, t: f64) {
        let events = self.events.clone();
        match action {
            Action::Master(url) => {
                info!(project = %url, "fetching the master page");
                self.projects.busy = Some(url.clone());
                let http = http.clone();
                self.http_tasks.spawn(async move {
                    let result = http.get_text(&url).await.map_err(|e| e.to_string());
                    let _ = events
                        .send(Event::Project(OpDone::Master {
                            project: url,
                            result,
                        }))
                        .await;
                });
            }
            Action::Rpc { url, reason, work } => {
                let Some(key) = authenticator(&self.dir, &url) else {
                    warn!(project = %url, "no account key (account file missing or empty); not contacting it");
                    if let Some(ps) = self.state.project_mut(&url) {
                        ps.project.sched_rpc_pending = None;
                        let k = self.projects.tuning;
                        rpc_backoff(&mut ps.project, t, self.projects.jitter.next_unit(), &k);
                    }
                    return;
                };
                self.update_disk_usages();
                let world = self.tasks.last_pass().map(|(_, w)| w.clone());
                let mut input = self.request_input(&url, key, work.as_ref(), world.as_ref(), t);
                input.msgs_from_host = self.trickle_ups_for_request(&url);
                let trickles = input.msgs_from_host.len();
                let req = match build_request(&self.state, &input) {
                    Ok(r) => r,
                    Err(e) => {
                        error!("{e}");
                        return;
                    }
                };
                let xml = req.to_xml();
                let esc = escape_project_url(&url);
                let _ = fs::write(self.dir.join(format!("sched_request_{esc}.xml")), &xml);
                let Some(ps) = self.state.project_mut(&url) else {
                    return;
                };
                let urls: Vec<String> = (0..ps.project.scheduler_urls.len())
                    .filter_map(|i| {
                        ferrite_project::master::scheduler_url(
                            &ps.project,
                            i,
                            self.projects.url_random,
                        )
                        .map(str::to_owned)
                    })
                    .collect();
                note_rpc_started(&mut ps.project);
                let name = if ps.project.project_name.is_empty() {
                    url.clone()
                } else {
                    ps.project.project_name.clone()
                };
                let asked = work
                    .as_ref()
                    .map(|w| {
                        w.resources
                            .iter()
                            .map(|r| {
                                format!(
                                    "{}: {:.0} s",
                                    world
                                        .as_ref()
                                        .map_or("CPU".to_owned(), |w| resource_name(w, r.resource)),
                                    r.req_secs
                                )
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .filter(|s| !s.is_empty());
                let reported = req.results.len();
                if trickles > 0 && reason != RpcReason::TrickleUp {
                    info!(project = %name, "Sending trickle-up message");
                }
                info!(
                    project = %name,
                    "Sending scheduler request: {}.{}{}",
                    reason.description(),
                    if reported > 0 { format!(" Reporting {reported} completed tasks.") } else { String::new() },
                    asked.map_or_else(|| " Not requesting tasks.".to_owned(), |a| format!(" Requesting new tasks ({a})."))
                );
                self.save.mark_dirty(t);
                self.projects.busy = Some(url.clone());
                let http = http.clone();
                let reply_file = self
                    .dir
                    .join(format!("sched_reply_{}.xml", escape_project_url(&url)));
                self.http_tasks.spawn(async move {
                    let mut result = Err("no scheduler URL".to_owned());
                    let mut posted = Vec::new();
                    for u in urls {
                        let started = std::time::Instant::now();
                        result = http
                            .post_scheduler(&u, xml.clone())
                            .await
                            .map_err(|e| format!("{u}: {e}"));
                        if result.is_ok() {
                            posted.push((xml.len() as f64, started.elapsed().as_secs_f64()));
                            break;
                        }
                    }
                    // A reply of many thousand jobs is tens of megabytes: it is saved and
                    // read here, on a blocking thread, so the main loop gets it ready to apply.
                    let result = match result {
                        Ok(text) => {
                            tokio::task::spawn_blocking(move || read_reply(&reply_file, &text))
                                .await
                                .unwrap_or_else(|e| Err(format!("reading the reply failed: {e}")))
                        }
                        Err(e) => Err(e),
                    };
                    let _ = events
                        .send(Event::Project(OpDone::Scheduler {
                            project: url,
                            reason,
                            sent: work,
                            result,
                            posted,
                        }))
                        .await;
                });
            }
        }
    }

    fn request_input(
        &self,
        url: &str,
        key: String,
        work: Option<&ferrite_sched::WorkRequest>,
        world: Option<&World>,
        t: f64,
    ) -> RequestInput {
        let total_share: f64 = self
            .state
            .projects
            .iter()
            .map(|p| p.project.resource_share.max(0.0))
            .sum();
        let share = self
            .state
            .project(url)
            .map_or(0.0, |p| p.project.resource_share.max(0.0));
        let frac = if total_share > 0.0 {
            share / total_share
        } else {
            1.0
        };
        let cc = &self.config.cc.options;
        let coprocs = &self.state.host_info.coprocs;
        RequestInput {
            master_url: url.to_owned(),
            authenticator: key,
            work: match (work, world) {
                (Some(w), Some(world)) => to_request_work(world, w),
                _ => Default::default(),
            },
            working_global_prefs: Some(self.config.prefs.prefs.to_xml()),
            now: t,
            resource_share_fraction: frac,
            rrs_fraction: frac,
            prrs_fraction: frac,
            disk_usage: (!cc.no_disk_usage).then(|| {
                let d = disk_figures(&self.dir, &self.state, &self.config.prefs.prefs);
                ferrite_proto::sched_request::DiskUsage {
                    d_boinc_used_total: d.used_total,
                    d_boinc_used_project: d.used.get(url).copied().unwrap_or(0.0),
                    d_project_share: d.allowed * frac,
                }
            }),
            coprocs: (coprocs.ndevs() > 0).then(|| coprocs.clone()),
            max_tasks_reported: usize::try_from(cc.max_tasks_reported).unwrap_or(0),
            allow_multiple_clients: cc.allow_multiple_clients,
            dont_use_docker: cc.dont_use_docker,
            include_net_info: !cc.suppress_net_info,
            no_alt_platforms: cc.no_alt_platform,
            client_brand: Some(client_brand(&self.dir)),
            time_stats: Some(self.time_session.request_form(&self.state.time_stats, t)),
            user_keywords: self.acct_mgr.keywords_xml(),
            job_log: self
                .state
                .project(url)
                .filter(|p| p.project.send_job_log != 0)
                .and_then(|p| {
                    crate::history::job_log_since(
                        &crate::history::job_log_path(&self.dir, url),
                        f64::from(p.project.send_job_log),
                    )
                }),
            daily_xfer_history: (self.config.prefs.prefs.daily_xfer_period_days > 0).then(|| {
                self.transfers.history().scheduler_request_xml(
                    t,
                    self.state.host_info.timezone,
                    self.config.prefs.prefs.daily_xfer_period_days,
                )
            }),
            ..RequestInput::default()
        }
    }
}

/// The names of the host's processing resources, in the core's order (CPU first).
fn resource_names(world: &World) -> Vec<String> {
    (0..=world.host.coprocs.len())
        .map(|r| resource_name(world, ResourceId(u8::try_from(r).unwrap_or(u8::MAX))))
        .collect()
}

/// A project's work-fetch backoffs as saved and shown: one record per resource of the host,
/// backing off or not (zeros), as the official client's `PROJECT::write_state` writes them.
fn backoff_records(
    names: &[String],
    fs: &ferrite_sched::fetch::ProjectFetchState,
) -> Vec<RscBackoff> {
    names
        .iter()
        .enumerate()
        .map(|(r, name)| RscBackoff {
            name: name.clone(),
            backoff_time: fs.backoff_until.get(r).copied().unwrap_or(0.0),
            backoff_interval: fs.backoff_interval.get(r).copied().unwrap_or(0.0),
        })
        .collect()
}

/// A scheduler reply's text saved as `sched_reply_*.xml` (as the official client keeps the
/// last one) and read.
fn read_reply(file: &std::path::Path, text: &str) -> Result<Box<ReadReply>, String> {
    let _ = std::fs::write(file, text);
    let mut reply = SchedulerReply::parse(text, "scheduler reply")
        .map(|p| p.value)
        .map_err(|e| format!("unusable reply: {e}"))?;
    // Its tasks past the first batch are held back, taken in a batch per turn of the loop.
    let held_back = split_tasks(&mut reply, REPLY_BATCH);
    Ok(Box::new(ReadReply { reply, held_back }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_resource_has_a_backoff_record() {
        let names = vec!["CPU".to_owned(), "NVIDIA".to_owned()];
        let mut fs = ferrite_sched::fetch::ProjectFetchState::default();
        fs.resize(2);
        let recs = backoff_records(&names, &fs);
        assert_eq!(recs.len(), 2, "zeros are written too: {recs:?}");
        assert_eq!((recs[0].name.as_str(), recs[0].backoff_time), ("CPU", 0.0));
        fs.backoff_until[1] = 900.0;
        fs.backoff_interval[1] = 600.0;
        let recs = backoff_records(&names, &fs);
        assert_eq!(recs[1].name, "NVIDIA");
        assert_eq!(
            (recs[1].backoff_time, recs[1].backoff_interval),
            (900.0, 600.0)
        );
    }

    #[test]
    fn a_scheduler_reply_is_saved_and_read_off_the_loop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("sched_reply_p.example.xml");
        let text = "<scheduler_reply>\n<request_delay>7</request_delay>\n</scheduler_reply>\n";
        let reply = read_reply(&file, text).expect("a reply");
        assert_eq!(reply.reply.request_delay, Some(7.0));
        assert_eq!(std::fs::read_to_string(&file).expect("saved"), text);
        let bad = read_reply(&file, "<scheduler_reply>\n<request_delay>").expect_err("cut short");
        assert!(bad.starts_with("unusable reply: "), "{bad}");
        assert_eq!(
            std::fs::read_to_string(&file).expect("saved"),
            "<scheduler_reply>\n<request_delay>",
            "the last reply is kept even when it cannot be read"
        );
    }
}
