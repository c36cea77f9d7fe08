//! A pass of the loop: the tasks' turn (suspension decided, the scheduling core's pass, apps
//! started and stopped), the transfers' turn, and what is reported after it (metrics,
//! systemd's status line).

use ferrite_proto::client_state::ResultState;

use crate::{config, filecheck, metrics, projects, tasks, transfers, Daemon};

impl Daemon {
    /// The texts exchanged over HTTP since the last pass (scheduler requests and replies,
    /// master pages, web RPCs, news feeds) count in the daily transfer history and toward the
    /// daily transfer limit, as every HTTP body does in the official client; file bodies are
    /// counted when their transfers end.
    pub(crate) fn count_text_traffic(&mut self, http: &ferrite_net::HttpClient, t: f64) {
        let (down, up) = http.take_text_bytes();
        let tz = self.state.host_info.timezone;
        self.transfers.count_text_traffic(down, up, t, tz);
    }

    /// A transfer attempt ended ([`Event::Transfer`](crate::event::Event::Transfer)): the byte
    /// counts and the daily history learn it, then the transfers apply it to the state.
    /// True when tasks moved along (the file became present, uploaded or failed for good):
    /// a pass should follow at once. An attempt to be retried waits for the next pass, so a
    /// run of failing downloads does not bring a pass over every task at each failure.
    pub(crate) fn transfer_done(&mut self, done: transfers::TransferDone, t: f64) -> bool {
        let tz = self.state.host_info.timezone;
        self.transfers.count_attempt(&done, t, tz);
        let fresh = match (&done.result, &done.download) {
            (Ok(_), Some((len, md5))) if !done.upload => {
                Some((done.project.clone(), done.file.clone(), *len, md5.clone()))
            }
            _ => None,
        };
        let ended = self.transfers.finished(done, &mut self.state, t);
        if ended.changed {
            self.save.mark_dirty(t);
        }
        // A verified app file: its first check after a restart need not hash it.
        if let Some((url, name, len, md5)) = fresh {
            filecheck::downloaded(
                &self.dir,
                &self.state,
                &mut self.verified,
                &url,
                &name,
                len,
                &md5,
            );
        }
        ended.moved
    }

    /// The transfers' turn of a pass: due downloads and uploads start, on the HTTP client the
    /// project loop shares.
    pub(crate) fn tick_transfers(&mut self, http: &ferrite_net::HttpClient, t: f64) {
        let ctx = transfers::TransferContext {
            http,
            prefs: &self.config.prefs.prefs,
            cc: &self.config.cc.options,
            network_allowed: self.network_allowed(t),
        };
        if self
            .transfers
            .tick(&mut self.state, &ctx, t, &self.events.clone())
        {
            self.save.mark_dirty(t);
        }
    }

    /// One supervision tick; returns a reason to exit when `--exit_after_finish` or
    /// `--exit_when_idle` says so.
    pub(crate) fn tick_tasks(&mut self, t: f64) -> Option<&'static str> {
        self.refresh_usage(t);
        let (reason, gpu_reason, user_active) = self.decide_suspension(t);
        let activity = ferrite_project::stats::Activity {
            computing: reason
                .is_none_or(|r| r == ferrite_sched::suspend::SuspendReason::CpuThrottle),
            gpu_computing: gpu_reason.is_none(),
            network: self.network_allowed(t),
        };
        // Right before tasks may start: an app file changed since it was verified must not
        // run. While computing is suspended nothing starts, and the files are not looked at.
        let gpus = self.host.gpu_instances.values().any(|v| !v.is_empty());
        if (activity.computing || (activity.gpu_computing && gpus))
            && self.transfers.check_app_files(&mut self.state)
        {
            self.save.mark_dirty(t);
            self.state_epoch += 1;
        }
        self.time_session
            .update(&mut self.state.time_stats, t, activity);
        let limit = self
            .config
            .prefs
            .prefs
            .effective_cpu_usage_limit(user_active);
        self.throttle.set_limit(limit, t);
        self.throttle
            .set_thermal_share(self.host.thermal.status().cpu_share_pct, t);
        let o = &self.config.cc.options;
        // cc_config rec_half_life_days: how fast recent credit fades (the share balance).
        let policy = &mut self.tasks.scheduler_mut().policy;
        policy.rec_half_life = rec_half_life_secs(o.rec_half_life_days);
        policy.fetch_minimal_work = self.opts.fetch_minimal_work || o.fetch_minimal_work;
        self.tasks.priority = ferrite_supervise::PriorityConfig {
            no_priority_change: self.opts.no_priority_change || o.no_priority_change,
            process_priority: o.process_priority,
            process_priority_special: o.process_priority_special,
        };
        self.tasks.checkpoint_grace = o.ferrite_checkpoint_grace;
        self.tasks.user_suspend_at_checkpoint = self.modes.suspend_at_checkpoint;
        self.tasks.confine.enabled = o.ferrite_confine_apps;
        self.tasks.confine.unconfined_projects = o.ferrite_unconfined_projects.clone();
        let proxy = config::working_proxy(&self.state, &self.config.cc.options);
        let mut inputs = tasks::TickInputs {
            prefs: &self.config.prefs.prefs,
            cc_ncpus: self.config.cc.options.ncpus,
            suspend: reason,
            gpu_suspend: gpu_reason,
            user_active,
            app_configs: &self.config.app_configs,
            exclude_gpus: &self.config.cc.options.exclude_gpus,
            no_rsc_prefs: &self.config.no_rsc_prefs,
            stderr_head: self.config.cc.options.stderr_head,
            proxy: proxy.as_ref(),
            gpu_instances: &self.host.gpu_instances,
            gpu_control: self.gpu_control.resolved(),
            exit_before_start: self.config.cc.options.exit_before_start,
            app_stamps: self.transfers.app_stamps(),
            epoch: self.state_epoch,
        };
        let max_days = self.config.cc.options.max_overdue_days;
        if self
            .tasks
            .check_overdue_if_due(&mut self.state, t, max_days)
        {
            self.save.mark_dirty(t);
            self.state_epoch += 1;
        }
        inputs.epoch = self.state_epoch;
        let report = self.tasks.tick(
            &mut self.state,
            &inputs,
            tasks::TickTime {
                unix: t,
                mono: std::time::Instant::now(),
            },
        );
        if report.changed {
            self.save.mark_dirty(t);
        }
        if report.finished > 0 {
            // A finished task is saved at once: a kill must not make it computed again.
            self.save.save_if_due(&self.state, t, true);
        }
        self.tasks
            .state_saved(self.save.generation(), self.save.saved_generation());
        let multiple = self.config.cc.options.allow_multiple_clients;
        self.docker.after_tick(&self.state, multiple);
        if report.exit_before_start {
            return Some("an app was about to start (exit_before_start)");
        }
        if report.started > 0 && self.app_started_at.is_none() {
            self.app_started_at = Some(t);
        }
        if let (Some(n), Some(at)) = (self.opts.exit_after_app_start, self.app_started_at) {
            if t >= at + n as f64 {
                return Some("an app started (--exit_after_app_start)");
            }
        }
        let check_sizes = !self.config.cc.options.dont_check_file_sizes;
        for url in &report.files_missing {
            if filecheck::check_all(
                &self.dir,
                &mut self.state,
                &mut self.verified,
                check_sizes,
                Some(url),
                t,
            ) {
                self.save.mark_dirty(t);
            }
        }
        let o = &self.config.cc.options;
        if (self.opts.exit_after_finish || o.exit_after_finish) && report.finished > 0 {
            return Some("a task finished (exit_after_finish)");
        }
        // As the official client: only once there was work, not before the first jobs came.
        if (self.opts.exit_when_idle || o.exit_when_idle)
            && self.tasks.had_or_requested_work()
            && self.tasks.is_empty()
            && self.idle()
        {
            return Some("no task left to run or report (exit_when_idle)");
        }
        None
    }

    /// No result is left to compute or to report (reported results are acknowledged).
    pub(crate) fn idle(&self) -> bool {
        self.state
            .results()
            .all(|(_, r)| r.computing_done() && r.got_server_ack)
    }

    /// `abort_jobs_on_exit`: every result not yet computed ends as aborted with `code`.
    pub(crate) fn abort_unfinished(&mut self, code: i32, t: f64) {
        for ps in &mut self.state.projects {
            for r in &mut ps.results {
                if r.state < ResultState::ComputeError {
                    r.state = ResultState::Aborted;
                    r.exit_status = code;
                    r.ready_to_report = true;
                    r.completed_time = t;
                }
            }
        }
        self.state.active_tasks.clear();
        self.save.mark_dirty(t);
    }

    /// What the daemon is doing, for systemd's `STATUS=`.
    pub(crate) fn status_line(&self) -> String {
        let tasks: usize = self.state.projects.iter().map(|p| p.results.len()).sum();
        format!(
            "{} projects, {} tasks, {} running",
            self.state.projects.len(),
            tasks,
            self.tasks.live.len()
        )
    }

    /// Renders the metrics text from the state and the core's last pass.
    pub(crate) fn refresh_metrics(&mut self, t: f64) {
        let Some(tx) = &self.metrics else {
            return;
        };
        let (mut busy_cpus, mut busy_gpus) = (0.0, 0.0);
        let look = crate::lookup::StateLookup::new(&self.state);
        for ((url, name), l) in &self.tasks.live {
            if l.task.state() != ferrite_supervise::TaskState::Running {
                continue;
            }
            let usage = look.app_version_of(url, name).map(|v| v.usage.clone());
            match usage {
                Some(u) if u.coprocs.iter().any(|c| c.count > 0.0) => {
                    busy_gpus += u.coprocs.iter().map(|c| c.count).sum::<f64>();
                    busy_cpus += u.avg_ncpus;
                }
                Some(u) => busy_cpus += u.avg_ncpus.max(0.0),
                None => busy_cpus += 1.0,
            }
        }
        let work_buffer_secs = self
            .tasks
            .last_pass()
            .map(|(out, world)| {
                out.sim
                    .resources
                    .iter()
                    .enumerate()
                    .map(|(r, x)| {
                        (
                            projects::resource_name(world, ferrite_sched::ResourceId(r as u8)),
                            x.saturated_time,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let disk = projects::disk_figures(&self.dir, &self.state, &self.config.prefs.prefs);
        let rpc = self.projects.rpc_counters();
        let text = metrics::render(
            &metrics::MetricsInput {
                state: &self.state,
                busy_cpus,
                busy_gpus,
                work_buffer_secs,
                rpc: &rpc,
                transfer_bytes_down: self.transfers.bytes_moved().0,
                transfer_bytes_up: self.transfers.bytes_moved().1,
                disk_used: disk.used_total,
                disk_allowed: disk.allowed,
            },
            t,
        );
        tx.send_replace(text);
        self.sample_usage(t);
    }
}

/// The REC half-life in seconds for cc_config `rec_half_life_days` (the default 10 days
/// for a value that is not a positive number).
pub(crate) fn rec_half_life_secs(days: f64) -> f64 {
    let days = if days.is_finite() && days > 0.0 {
        days
    } else {
        10.0
    };
    days * 86_400.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::now;
    use crate::logging;

    #[test]
    fn cc_config_rec_half_life_days_sets_the_cores_half_life() {
        assert_eq!(rec_half_life_secs(10.0), 864_000.0);
        assert_eq!(rec_half_life_secs(0.0), 864_000.0);
        assert_eq!(rec_half_life_secs(f64::NAN), 864_000.0);
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("cc_config.xml"),
            "<cc_config><options><rec_half_life_days>2.5</rec_half_life_days>\
             </options></cc_config>\n",
        )
        .expect("cc_config");
        let opts = crate::test_options(dir.path());
        let mut d = Daemon::start(opts, logging::init()).expect("daemon");
        assert_eq!(d.tasks.scheduler_mut().policy.rec_half_life, 864_000.0);
        // This session's start time, not a saved one.
        assert!((d.state.time_stats.client_start_time - now()).abs() < 60.0);
        let _ = d.tick_tasks(now());
        assert_eq!(d.tasks.scheduler_mut().policy.rec_half_life, 2.5 * 86_400.0);
    }

    #[test]
    fn the_cores_rec_and_priorities_reach_the_state_and_the_gui() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = ("http://a.example/", "http://b.example/");
        let opts = crate::cli::Options {
            attach_project: Some(vec![a.to_owned(), "key".to_owned()]),
            ..crate::test_options(dir.path())
        };
        let mut d = Daemon::start(opts, logging::init()).expect("daemon");
        config::attach_project(dir.path(), &mut d.state, b, "key").expect("attach b");
        // What a previous session saved: A got three times B's credit lately.
        for (url, rec) in [(a, 150.0), (b, 50.0)] {
            let p = &mut d.state.project_mut(url).expect("project").project;
            p.rec = rec;
            p.resource_share = 100.0;
        }
        let t = now();
        let _ = d.tick_tasks(t);
        let rec = |d: &Daemon, url: &str| d.state.project(url).expect("project").project.rec;
        assert!((rec(&d, a) - 150.0).abs() < 0.01, "{}", rec(&d, a));
        assert!((rec(&d, b) - 50.0).abs() < 0.01, "{}", rec(&d, b));
        let rec_time = d.state.project(a).expect("a").project.rec_time;
        assert!(rec_time >= t, "{rec_time}");
        // Equal shares: −(REC part)/(share part).
        assert!((d.tasks.sched_priority(a) + 1.5).abs() < 1e-3);
        assert!((d.tasks.sched_priority(b) + 0.5).abs() < 1e-3);
        let state = d.gui_rpc_reply(ferrite_gui_rpc::Request::GetState);
        assert!(
            state.contains("<sched_priority>-1.500000</sched_priority>"),
            "{state}"
        );
        assert!(
            state.contains("<sched_priority>-0.500000</sched_priority>"),
            "{state}"
        );
        assert!(state.contains("<rec>150.000000</rec>"), "{state}");
    }

    /// A loopback HTTP server that answers one request with `reply`; returns its URL.
    fn one_reply_server(reply: &'static str) -> String {
        use std::io::{BufRead as _, BufReader, Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/cgi", listener.local_addr().expect("addr"));
        std::thread::spawn(move || {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut r = BufReader::new(stream);
            let mut len = 0;
            let mut line = String::new();
            while r.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0; len];
            let _ = r.read_exact(&mut body);
            let _ = write!(
                r.get_mut(),
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        });
        url
    }

    #[tokio::test]
    async fn scheduler_rpc_bytes_count_in_the_daily_transfer_history() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = crate::test_options(dir.path());
        let mut d = Daemon::start(opts, logging::init()).expect("daemon");
        let t = now();
        let http = d.project_http(t).expect("http client");
        let reply = "<scheduler_reply>\n</scheduler_reply>\n";
        let url = one_reply_server(reply);
        let request = "<scheduler_request>\n".repeat(50);
        let got = http
            .clone()
            .post_scheduler(&url, request.clone())
            .await
            .expect("rpc");
        assert_eq!(got, reply);
        d.count_text_traffic(&http, t);
        let days = &d.transfers.history().days().days;
        assert_eq!(days.len(), 1, "{days:?}");
        assert_eq!(days[0].up, request.len() as f64);
        assert_eq!(days[0].down, reply.len() as f64);
        // Counted once.
        d.count_text_traffic(&http, t);
        assert_eq!(
            d.transfers.history().days().days[0].up,
            request.len() as f64
        );
        // And toward the daily limit: a limit of what was moved stops file transfers.
        d.config.prefs.prefs.daily_xfer_limit_mb = (request.len() + reply.len()) as f64 / 1e6;
        d.config.prefs.prefs.daily_xfer_period_days = 1;
        assert!(d.transfers.over_daily_limit(&d.config.prefs.prefs, t));
    }
}
