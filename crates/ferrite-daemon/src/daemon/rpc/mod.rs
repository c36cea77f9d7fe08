//! GUI RPC's glue: starting the server from the daemon's options, passing each authorised
//! call into the main loop as [`Event::GuiRpc`] and answering it there
//! (`Daemon::handle_gui_rpc`, this file). Only the main loop answers, so every reply sees one
//! consistent state and every change goes through the one owner. A query is answered from a
//! shared borrow of the daemon (`Daemon::query` in `status.rs`, the state's listings in
//! `state_reply.rs`, transfers in `file_transfers.rs`, the attach wizard's polls in
//! `projects.rs`); a command is applied by `Daemon::apply` (`commands.rs`), which hands it to
//! the part that owns it. The router, the writers and what is kept between replies are
//! `rpc/`.

mod commands;
mod file_transfers;
mod projects;
mod state_reply;
mod status;

use ferrite_gui_rpc::server::{ServerConfig, TcpConfig, UnixConfig, DEFAULT_PORT};
use ferrite_gui_rpc::{auth, Body, Call, GuiRpcServer, Request};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::clock::now;
use crate::event::Event;
use crate::rpc::route::{self, Routed};
use crate::rpc::{RpcServerHandle, BIND_RETRY, REMOTE_HOSTS_FILE};
use crate::Daemon;

impl Daemon {
    /// Tells the event log the projects' names when they changed (an attach, a detach, a
    /// scheduler reply with a name), so that lines logged about a project by its master URL
    /// show its name, as the official client's do.
    pub(crate) fn sync_log_project_names(&mut self) {
        let projects = &self.state.projects;
        let same = self.rpc.log_names.len() == projects.len()
            && self
                .rpc
                .log_names
                .iter()
                .zip(projects)
                .all(|((url, name), ps)| {
                    *url == ps.project.master_url && *name == ps.project.project_name
                });
        if same {
            return;
        }
        self.rpc.log_names = projects
            .iter()
            .map(|ps| {
                (
                    ps.project.master_url.clone(),
                    ps.project.project_name.clone(),
                )
            })
            .collect();
        crate::messages::MessageLog::global().set_project_names(
            self.rpc
                .log_names
                .iter()
                .map(|(url, name)| (url.as_str(), name.as_str())),
        );
    }

    /// The server settings from the command line and `cc_config.xml`.
    fn gui_rpc_config(&self, password: auth::Password) -> ServerConfig {
        let mut cfg = ServerConfig::new(password);
        let allow_remote =
            self.opts.allow_remote_gui_rpc || self.config.cc.options.allow_remote_gui_rpc;
        cfg.tcp = (!self.opts.gui_rpc_unix_domain).then(|| TcpConfig {
            port: self.opts.gui_rpc_port.unwrap_or(DEFAULT_PORT),
            allow_remote,
            remote_hosts_file: Some(self.dir.join(REMOTE_HOSTS_FILE)),
            bind_ip: None,
            bind_retry_for: BIND_RETRY,
        });
        cfg.unix = Some(UnixConfig::in_data_dir(&self.dir));
        cfg
    }

    /// Starts the GUI RPC server in the background (binding may be retried for 30 s; a
    /// failure is logged, never fatal: the client computes without a GUI). `None` when the
    /// password file cannot be read or created.
    pub(crate) fn start_gui_rpc(&self) -> Option<RpcServerHandle> {
        let password = match auth::load_or_create_password(&self.dir) {
            Ok((p, _)) => p,
            Err(e) => {
                error!("GUI RPC disabled: {e}");
                return None;
            }
        };
        let cfg = self.gui_rpc_config(password);
        let token = CancellationToken::new();
        let (tx, mut rx) = mpsc::channel::<Call>(64);
        let events = self.events.clone();
        let stop = token.clone();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            // Binding may be retried for a while: give up at once when the daemon stops.
            let started = tokio::select! {
                r = GuiRpcServer::start(cfg.clone(), tx.clone(), stop.clone()) => r,
                () = stop.cancelled() => return,
            };
            let _ = started_tx.send(());
            let server = match started {
                Ok(s) => Some(s),
                Err(e) => {
                    // Serve on whichever listener works.
                    error!("GUI RPC: {e}");
                    let mut fallback = cfg;
                    if matches!(e, ferrite_gui_rpc::ServerError::TcpBind { .. }) {
                        fallback.tcp = None;
                    } else {
                        fallback.unix = None;
                    }
                    let again = tokio::select! {
                        r = GuiRpcServer::start(fallback, tx, stop.clone()) => r,
                        () = stop.cancelled() => return,
                    };
                    match again {
                        Ok(s) => Some(s),
                        Err(e) => {
                            error!("GUI RPC disabled: {e}");
                            None
                        }
                    }
                }
            };
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    call = rx.recv() => match call {
                        Some(call) => {
                            if events.send(Event::GuiRpc(call)).await.is_err() {
                                break;
                            }
                        }
                        None => {
                            if server.is_none() {
                                stop.cancelled().await;
                            }
                            break;
                        }
                    },
                }
            }
            if let Some(server) = server {
                server.shutdown();
                server.wait().await;
            }
        });
        Some(RpcServerHandle {
            token,
            task,
            started: Some(started_rx),
        })
    }

    /// Answers one GUI RPC call: a query from the state as it is, a command by applying it.
    /// Returns whether it was a command (the loop decides again after one).
    pub(crate) fn handle_gui_rpc(&mut self, call: Call) -> bool {
        let Call {
            request,
            peer,
            reply: tx,
        } = call;
        let log = crate::messages::MessageLog::global();
        if matches!(
            request,
            Request::GetNotices { .. } | Request::GetNoticesPublic { .. }
        ) && !log.knows_connection(peer.connection_id)
        {
            // Forget the connection's notice bookkeeping when it closes.
            let (id, closed) = (peer.connection_id, peer.closed.clone());
            tokio::spawn(async move {
                closed.cancelled().await;
                crate::messages::MessageLog::global().forget_connection(id);
            });
        }
        let quit = matches!(request, Request::Quit);
        let (body, command) = self.answer(request, peer.connection_id);
        let _ = tx.send(body);
        if quit {
            info!("quit requested through GUI RPC");
            let events = self.events.clone();
            tokio::spawn(async move {
                let _ = events.send(Event::Shutdown("GUI RPC quit")).await;
            });
        }
        command
    }

    /// The reply body the main loop would send for `request` (as connection 0), for tests and
    /// benches. A `quit` is answered but does not stop the daemon; `run_benchmarks` needs a
    /// tokio runtime.
    pub fn gui_rpc_reply(&mut self, request: Request) -> String {
        // Callers may have changed the state directly: nothing cached is reused.
        self.state_epoch += 1;
        self.answer(request, 0).0.to_text()
    }

    /// The reply to `request` from connection `conn`, and whether it was a command (which
    /// may have changed anything).
    fn answer(&mut self, request: Request, conn: u64) -> (Body, bool) {
        let t = now();
        match route::route(request) {
            Routed::Query(q) => (self.query(&q, conn, t), false),
            Routed::Command(c) => (self.apply(c, t).into(), true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_gui_rpc::reply;
    use ferrite_gui_rpc::{ProjectAction, RunMode as RpcRunMode};

    fn daemon_attached_to(url: &str) -> (tempfile::TempDir, Daemon) {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = crate::cli::Options {
            attach_project: Some(vec![url.to_owned(), "key".to_owned()]),
            ..crate::test_options(dir.path())
        };
        let daemon = Daemon::start(opts, crate::logging::init()).expect("daemon");
        (dir, daemon)
    }

    #[test]
    fn the_event_log_is_told_the_project_names_as_they_change() {
        let url = "http://names.example/";
        let (_dir, mut d) = daemon_attached_to(url);
        let log = crate::messages::MessageLog::global();
        d.sync_log_project_names();
        // No name yet: lines show the master URL.
        assert_eq!(log.project_name(url), url);
        d.state.projects[0].project.project_name = "Names@Home".to_owned();
        d.sync_log_project_names();
        assert_eq!(log.project_name(url), "Names@Home");
        // A line logged by master URL shows the name.
        tracing::info!(project = %url, "names test: Finished download of in_1");
        let msgs = log.msgs_after(0, false).to_text();
        let line = msgs
            .split("<msg>")
            .find(|m| m.contains("names test: Finished download of in_1"))
            .expect("line logged");
        assert!(line.contains("<project>Names@Home</project>"), "{line}");
    }

    #[test]
    fn a_missing_global_prefs_file_answers_the_official_error_code() {
        let (dir, mut d) = daemon_attached_to("http://prefs.example/");
        let _ = std::fs::remove_file(dir.path().join(crate::config::GLOBAL_PREFS));
        assert_eq!(
            d.gui_rpc_reply(Request::GetGlobalPrefsFile),
            "<error>-108</error>\n"
        );
    }

    #[test]
    fn get_state_shows_the_previous_sessions_uptime() {
        let (_dir, mut d) = daemon_attached_to("http://uptime.example/");
        let t = d.state.time_stats.client_start_time;
        // Two updates of this session: the state file's figure becomes this session's length.
        d.time_session.update(
            &mut d.state.time_stats,
            t + 20.0,
            ferrite_project::stats::Activity {
                computing: true,
                gpu_computing: true,
                network: true,
            },
        );
        d.time_session.update(
            &mut d.state.time_stats,
            t + 40.0,
            ferrite_project::stats::Activity {
                computing: true,
                gpu_computing: true,
                network: true,
            },
        );
        assert!(d.state.time_stats.previous_uptime > 0.0);
        let reply = d.gui_rpc_reply(Request::GetState);
        assert!(
            reply.contains("<previous_uptime>0.000000</previous_uptime>"),
            "{reply}"
        );
    }

    #[test]
    fn a_scheduler_request_counts_in_the_upload_statistics() {
        let url = "http://netstats.example/";
        let (_dir, mut d) = daemon_attached_to(url);
        assert_eq!(d.state.net_stats.bwup, 0.0);
        d.project_op_done(
            crate::projects::OpDone::Scheduler {
                project: url.to_owned(),
                reason: ferrite_proto::client_state::RpcReason::UserReq,
                sent: None,
                result: Err("no reply".to_owned()),
                posted: vec![(2000.0, 0.5)],
            },
            now(),
        );
        assert_eq!(d.state.net_stats.bwup, 4000.0);
        assert!(d.state.net_stats.avg_up > 0.0);
    }

    #[test]
    fn project_ops_through_gui_rpc() {
        let url = "http://p.example/";
        let (dir, mut d) = daemon_attached_to(url);
        let op = |op, u: &str| Request::ProjectOp {
            op,
            project_url: u.to_owned(),
        };
        assert_eq!(
            d.gui_rpc_reply(op(ProjectAction::DetachWhenDone, url)),
            reply::SUCCESS
        );
        let p = &d.state().projects[0].project;
        assert!(p.detach_when_done && p.dont_request_more_work);
        assert_eq!(
            d.gui_rpc_reply(op(ProjectAction::DontDetachWhenDone, url)),
            reply::SUCCESS
        );
        let p = &d.state().projects[0].project;
        assert!(!p.detach_when_done && !p.dont_request_more_work);
        assert_eq!(
            d.gui_rpc_reply(op(ProjectAction::Suspend, "")),
            reply::error("Missing project URL")
        );
        let account = dir.path().join("account_p.example.xml");
        assert!(account.exists());
        assert_eq!(
            d.gui_rpc_reply(op(ProjectAction::Detach, url)),
            reply::SUCCESS
        );
        assert!(d.state().projects.is_empty());
        assert!(!account.exists(), "the account file goes with the project");
        assert_eq!(
            d.gui_rpc_reply(op(ProjectAction::Detach, url)),
            reply::error("No such project")
        );
        let status = d.gui_rpc_reply(Request::GetProjectStatus);
        assert_eq!(status, "<projects>\n</projects>\n");
    }

    #[test]
    fn kept_result_heads_give_the_reply_a_fresh_one_gives() {
        let (_dir, mut d) = daemon_attached_to("http://p.example/");
        d.state = ferrite_proto::client_state::synthetic(20, 1000);
        let fresh = |d: &mut Daemon| {
            d.rpc.forget_kept_replies();
            d.gui_rpc_reply(Request::GetResults { active_only: false })
        };
        let first = fresh(&mut d);
        assert_eq!(first.matches("<result>").count(), 1000);
        let written = d.rpc.result_heads.borrow().written();
        let kept = d.gui_rpc_reply(Request::GetResults { active_only: false });
        assert_eq!(kept, first);
        assert_eq!(
            d.rpc.result_heads.borrow().written(),
            written,
            "every head was kept"
        );
        // Results change, go and come: what is kept follows.
        let ps = &mut d.state.projects[3];
        ps.results[0].state = ferrite_proto::client_state::ResultState::ComputeError;
        ps.results[1].exit_status = -177;
        ps.results[2].final_cpu_time = 1234.5;
        ps.results[3].name.push_str("_renamed");
        ps.results.remove(4);
        ps.project.master_url.push_str("moved/");
        d.state.projects[7].results.truncate(10);
        d.state.projects.swap(0, 1);
        let kept = d.gui_rpc_reply(Request::GetResults { active_only: false });
        assert_ne!(kept, first);
        assert_eq!(kept, fresh(&mut d));
        // get_state lists the same results from the same heads.
        let state = d.gui_rpc_reply(Request::GetState);
        let blocks = |x: &str| -> Vec<String> {
            x.split("<result>\n")
                .skip(1)
                .map(|b| b.split("</result>\n").next().unwrap_or_default().to_owned())
                .collect()
        };
        assert_eq!(blocks(&state), blocks(&kept));
    }

    #[test]
    fn heads_written_ahead_for_new_results_give_the_reply_a_fresh_one_gives() {
        let (_dir, mut d) = daemon_attached_to("http://p.example/");
        d.state = ferrite_proto::client_state::synthetic(3, 300);
        let all = Request::GetResults { active_only: false };
        // A GUI lists the results while the last project has none yet.
        let results = std::mem::take(&mut d.state.projects[2].results);
        let _ = d.gui_rpc_reply(all.clone());
        d.state.projects[2].results = results;
        d.write_result_heads_ahead(&d.state.projects[2].project.master_url.clone());
        let _ = d.gui_rpc_reply(all.clone());
        let written = d.rpc.result_heads.borrow().written();
        // New results at the end of a project's list, as a scheduler reply's batch adds them.
        let ps = &mut d.state.projects[2];
        let more: Vec<_> = ps.results[..40]
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.name.push_str("_new");
                r
            })
            .collect();
        ps.results.extend(more);
        let url = ps.project.master_url.clone();
        d.write_result_heads_ahead(&url);
        assert_eq!(d.rpc.result_heads.borrow().written(), written + 40);
        let reply = d.gui_rpc_reply(all.clone());
        assert_eq!(
            d.rpc.result_heads.borrow().written(),
            written + 40,
            "the reply took the heads written ahead"
        );
        assert_eq!(reply.matches("_new</name>").count(), 40);
        d.rpc.forget_kept_replies();
        assert_eq!(reply, d.gui_rpc_reply(all));
    }

    #[test]
    fn get_state_from_kept_parts_is_the_state_written_at_once() {
        let (_dir, mut d) = daemon_attached_to("http://p.example/");
        d.state = ferrite_proto::client_state::synthetic(20, 1000);
        let t = 1_795_000_000.5;
        let whole = |d: &Daemon| d.state_xml_at_once(t);
        d.state_epoch += 1;
        let first = d.state_xml(t).to_text();
        assert_eq!(first, whole(&d));
        assert!(first.len() > 1_000_000, "{}", first.len());
        // Kept for this epoch: the same text again.
        assert_eq!(d.state_xml(t).to_text(), first);
        // A new epoch after a change: written again.
        d.state.projects[2].workunits[0].rsc_fpops_est *= 2.0;
        d.state.projects[5].results[1].exit_status = 3;
        d.state_epoch += 1;
        let second = d.state_xml(t).to_text();
        assert_ne!(second, first);
        assert_eq!(second, whole(&d));
    }

    #[test]
    fn what_was_kept_for_an_older_epoch_is_dropped() {
        let (_dir, mut d) = daemon_attached_to("http://p.example/");
        d.state = ferrite_proto::client_state::synthetic(20, 1000);
        let t = 1_795_000_000.5;
        d.state_epoch += 1;
        let state = d.state_xml(t).to_text();
        assert!(d
            .gui_rpc_reply(Request::GetFileTransfers)
            .contains("<file_transfers>"));
        // Kept for the current epoch: nothing goes.
        let epoch = d.state_epoch;
        d.rpc.state_parts.get_mut().as_mut().expect("kept").epoch = epoch;
        assert_eq!(d.rpc.forget_stale(epoch), 0);
        assert!(d.rpc.state_parts.borrow().is_some());
        assert!(d.rpc.pending_transfers.borrow().is_some());
        // The next epoch: both go, with what they held.
        let freed = d.rpc.forget_stale(epoch + 1);
        assert!(freed > 500_000 && freed < state.len(), "{freed}");
        assert!(d.rpc.state_parts.borrow().is_none());
        assert!(d.rpc.pending_transfers.borrow().is_none());
        assert_eq!(d.rpc.forget_stale(epoch + 1), 0);
        // And the reply written again is the same.
        d.state_epoch = epoch + 1;
        assert_eq!(d.state_xml(t).to_text(), state);
    }

    #[test]
    fn restore_ends_a_temporary_mode_through_gui_rpc() {
        let (_dir, mut d) = daemon_attached_to("http://p.example/");
        let set = |mode, duration| Request::SetRunMode {
            mode,
            duration,
            at_checkpoint: false,
        };
        assert_eq!(
            d.gui_rpc_reply(set(RpcRunMode::Never, 3600.0)),
            reply::SUCCESS
        );
        let cc = d.gui_rpc_reply(Request::GetCcStatus);
        assert!(cc.contains("   <task_suspend_reason>4</task_suspend_reason>\n   <task_mode>3</task_mode>\n   <task_mode_perm>2</task_mode_perm>"), "{cc}");
        assert_eq!(
            d.gui_rpc_reply(set(RpcRunMode::Restore, 0.0)),
            reply::SUCCESS
        );
        let cc = d.gui_rpc_reply(Request::GetCcStatus);
        assert!(cc.contains("   <task_suspend_reason>0</task_suspend_reason>\n   <task_mode>2</task_mode>\n   <task_mode_perm>2</task_mode_perm>\n   <task_mode_delay>0.000000</task_mode_delay>"), "{cc}");
    }
}
