//! How a task's process ended, recorded in its result: the exit classified, outputs
//! checked, the slot freed or kept, the task record updated.

use super::*;

impl TaskTable {
    /// Records how a process ended in the result and frees or keeps its slot.
    pub(super) fn exited(
        &mut self,
        state: &mut ClientState,
        key: &Key,
        slot: Slot,
        x: TaskExit,
        now: f64,
        report: &mut TickReport,
    ) {
        report.changed = true;
        if x.outcome.will_restart() {
            if let ExitOutcome::TemporaryExit(t) = &x.outcome {
                info!(
                    project = %key.0,
                    "task {} exited temporarily ({}); retry in {:.0} s",
                    key.1, t.reason, t.delay
                );
                self.not_before.insert(key.clone(), now + t.delay.max(0.0));
            } else {
                info!(project = %key.0, "task {} stopped ({:?}); it resumes later", key.1, x.outcome);
            }
            if let Some(a) = active_task_mut(state, key) {
                set_checkpoint(a, x.usage.checkpoint);
                a.active_task_state = 0;
                a.working_set_size_smoothed =
                    estimate_after_stop(a.working_set_size_smoothed, x.usage.peak_working_set);
            }
            self.held.insert(key.clone(), slot);
            self.write_records();
            return;
        }
        let files = state
            .project(&key.0)
            .map(|ps| slot_files(ps, &self.dir, key))
            .unwrap_or_default();
        if let Err(e) = slot.move_copied_outputs(&files) {
            warn!(project = %key.0, "task {}: {e}", key.1);
        }
        // As the official client: a VirtualBox app that says the CPU's virtualisation
        // extensions are off sets <p_vm_extensions_disabled> until the next start.
        let vbox = state
            .project(&key.0)
            .and_then(|ps| ps.result(&key.1).and_then(|r| ps.app_version_of(r)))
            .is_some_and(|v| v.plan_class.contains("vbox"));
        if vbox
            && x.stderr
                .contains(ferrite_hostinfo::vbox::VM_EXTENSIONS_DISABLED_MARK)
        {
            info!("Vbox app stderr indicates CPU VM extensions disabled");
            state.host_info.p_vm_extensions_disabled = true;
        }
        let project_dir = config::project_dir(&self.dir, &key.0);
        if let Some(ps) = state.project_mut(&key.0) {
            let outputs: Vec<(String, bool)> = ps
                .result(&key.1)
                .map(|r| {
                    r.output_files
                        .iter()
                        .map(|f| (f.file_name.clone(), f.optional))
                        .collect()
                })
                .unwrap_or_default();
            // The first output problem: (file, error code).
            let mut bad = None;
            let finished = matches!(x.outcome, ExitOutcome::Finished(_));
            for (name, optional) in &outputs {
                let path = project_dir.join(name);
                match fs::metadata(&path) {
                    Ok(m) => {
                        if let Some(fi) = ps.file_mut(name) {
                            let len = m.len() as f64;
                            if fi.max_nbytes > 0.0 && len > fi.max_nbytes {
                                warn!(
                                    "output {name} is {len} bytes, more than its limit of {}; deleted",
                                    fi.max_nbytes
                                );
                                let _ = fs::remove_file(&path);
                                bad.get_or_insert((name.clone(), ERR_FILE_TOO_BIG));
                            } else if fi.gzip_when_done && finished && !fi.uploaded {
                                // As the official client: compressed in place before its
                                // upload; the size reported is the compressed one.
                                match ferrite_net::gzip::compress_in_place(&path) {
                                    Ok(n) => {
                                        tracing::debug!(
                                            "output {name} compressed: {len} -> {n} bytes"
                                        );
                                        fi.nbytes = n as f64;
                                    }
                                    Err(e) => {
                                        warn!("cannot compress output {name}: {e}");
                                        bad.get_or_insert((name.clone(), ERR_WRITE));
                                    }
                                }
                            } else {
                                fi.nbytes = len;
                            }
                        }
                    }
                    Err(_) if !optional => {
                        bad.get_or_insert((name.clone(), ERR_FILE_MISSING));
                    }
                    Err(_) => {
                        // As the official client: an optional output the app did not
                        // write has nothing to upload, and the task does not wait for it.
                        if let Some(fi) = ps.file_mut(name) {
                            fi.upload_urls.clear();
                        }
                    }
                }
            }
            let mut succeeded = None;
            if let Some(r) = ps.result_mut(&key.1) {
                r.final_cpu_time = x.usage.cpu_time;
                r.final_elapsed_time = x.usage.elapsed_time;
                r.final_peak_working_set_size = x.usage.peak_working_set as f64;
                r.final_peak_swap_size = x.usage.peak_swap_size as f64;
                r.final_peak_disk_usage = x.usage.peak_disk_usage as f64;
                // As the official client: why the app failed (`report_result_error`'s
                // `<message>`), then what it wrote to stderr.
                let why = (r.state < ResultState::ComputeError
                    && !matches!(x.outcome, ExitOutcome::Finished(_)))
                .then(|| {
                    x.limit
                        .as_ref()
                        .map(|l| l.message())
                        .or_else(|| x.outcome.error_message())
                })
                .flatten();
                r.stderr_out = ferrite_supervise::exit::stderr_out_after_exit(
                    &r.stderr_out,
                    why.as_deref(),
                    &x.stderr,
                );
                if r.state < ResultState::ComputeError {
                    // As the official client: a task that ends well is complete once its
                    // outputs are uploaded (`completed_time` is set then); one that fails is
                    // complete now.
                    if !matches!((&x.outcome, &bad), (ExitOutcome::Finished(_), None)) {
                        r.completed_time = now;
                    }
                    match (&x.outcome, &bad) {
                        (ExitOutcome::Finished(_), None) => {
                            info!(project = %key.0, "task {} finished; outputs ready for upload", key.1);
                            r.state = ResultState::FilesUploading;
                            r.exit_status = 0;
                            report.finished += 1;
                        }
                        (ExitOutcome::Finished(_), Some((name, code))) => {
                            warn!(project = %key.0, "task {} finished, but its output {name} is unusable", key.1);
                            r.state = ResultState::ComputeError;
                            r.exit_status = *code;
                            r.ready_to_report = true;
                        }
                        (outcome, _) => {
                            let status = x
                                .limit
                                .as_ref()
                                .map_or_else(|| outcome.exit_status(), |l| l.exit_code());
                            // A limit the client enforces aborts the task, as the
                            // official client's abort_task does.
                            r.state = if let Some(l) = &x.limit {
                                warn!(
                                    project = %key.0,
                                    "task {} aborted: {} (exit status {status})",
                                    key.1,
                                    l.message()
                                );
                                ResultState::Aborted
                            } else {
                                warn!(
                                    project = %key.0,
                                    "task {} ended with a computation error ({outcome:?}, exit status {status})",
                                    key.1
                                );
                                ResultState::ComputeError
                            };
                            r.exit_status = status;
                            r.ready_to_report = true;
                        }
                    }
                }
                succeeded = Some(r.state == ResultState::FilesUploading);
            }
            // The project's job counters (`njobs_success`, `njobs_error`), as the official
            // client keeps them when an app ends for good.
            match succeeded {
                Some(true) => {
                    ps.project.njobs_success += 1;
                    // The job log line, as the official client appends it when an app
                    // finishes successfully.
                    if let Some(r) = ps.result(&key.1) {
                        let rec = crate::history::job_record(ps, r, now);
                        let path = crate::history::job_log_path(&self.dir, &key.0);
                        if let Err(e) = crate::history::append_job(
                            &path,
                            &rec,
                            crate::history::JOB_LOG_MAX_BYTES,
                        ) {
                            warn!("cannot append to {}: {e}", path.display());
                        }
                    }
                }
                Some(false) => ps.project.njobs_error += 1,
                None => {}
            }
        }
        state
            .active_tasks
            .retain(|a| !(a.project_master_url == key.0 && a.result_name == key.1));
        // The slot (its finish file, its init_data.xml) is kept until the state file says the
        // task ended: a kill before that finds the finish there and does not run it again.
        self.done_slots.push((None, slot));
        self.not_before.remove(key);
        self.start_failures.remove(key);
        self.write_records();
    }
}
