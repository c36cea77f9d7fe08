//! Starting (or restarting from its checkpoint) a task's app: its slot, files, init data,
//! limits and priority, and its task record.

use super::*;
use crate::transfers::{file_stamp, FileStamp};

impl TaskTable {
    /// Starts (or restarts from its checkpoint) the app of a result; with `adopt`, takes over
    /// instead the app a previous client left in the task's slot (`Some(pid, start time)`
    /// while it runs, `None` once it has ended), leaving the slot as it is.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start(
        &mut self,
        state: &mut ClientState,
        inputs: &TickInputs<'_>,
        key: &Key,
        instances: u64,
        now: f64,
        inst: Instant,
        adopt: Option<Option<(i32, u64)>>,
    ) -> Result<(), String> {
        let prefs = inputs.prefs;
        let ps = state.project(&key.0).ok_or("no such project")?;
        let r = ps.result(&key.1).ok_or("no such result")?;
        let wu = ps.workunit(&r.wu_name).ok_or("no workunit")?;
        let av = ps.app_version_of(r).ok_or("no app version")?;
        let main = av
            .file_refs
            .iter()
            .find(|f| f.main_program)
            .or_else(|| av.file_refs.first())
            .ok_or("the app version has no program")?;
        let pdir = config::project_dir(&self.dir, &key.0);
        let program = pdir.join(&main.file_name);
        // The app's files as they were verified: compared right before and right after the
        // spawn, so that a file rewritten since the last app file check does not run (what
        // the app runs is read at the exec).
        let stamped: Vec<(PathBuf, FileStamp)> = av
            .file_refs
            .iter()
            .filter_map(|f| {
                let at = (key.0.clone(), f.file_name.clone());
                inputs
                    .app_stamps
                    .get(&at)
                    .map(|s| (pdir.join(&f.file_name), *s))
            })
            .collect();
        let files = slot_files(ps, &self.dir, key);
        let slot = match self.held.remove(key) {
            Some(s) => s,
            None => self.slots.allocate().map_err(|e| e.to_string())?,
        };
        let resume = state
            .active_task(&key.0, &key.1)
            .map(|a| Checkpoint {
                cpu_time: a.checkpoint_cpu_time,
                elapsed_time: a.checkpoint_elapsed_time,
                fraction_done: a.checkpoint_fraction_done,
            })
            .unwrap_or_default();
        let p = &ps.project;
        let gpu_usage = av.usage.coprocs.iter().map(|c| c.count).fold(0.0, f64::max);
        // The GPU type, and the device of the instance the core assigned (its lowest), as
        // the app must be told.
        let gpu_type = av
            .usage
            .coprocs
            .iter()
            .filter(|c| c.count > 0.0)
            .find_map(|c| crate::snapshot::canonical_gpu_type(&c.rsc_type));
        let gpu_device = gpu_type
            .filter(|_| gpu_usage > 0.0)
            .and_then(|t| gpu_device_num(instances).map(|i| (t, i)))
            .map(|(t, i)| {
                let n = u32::try_from(i).unwrap_or(0);
                let dev = inputs
                    .gpu_instances
                    .get(t)
                    .and_then(|list| list.get(n as usize))
                    .copied()
                    .unwrap_or(GpuInstance {
                        device_num: n,
                        opencl_device_index: n,
                    });
                (t, dev)
            });
        let as_i32 = |n: u32| i32::try_from(n).unwrap_or(-1);
        // The account key and project preferences live in the account file.
        let account = config::read_account(&self.dir, &key.0).unwrap_or_default();
        let init = AppInitData {
            major_version: state.core_client_version.major,
            minor_version: state.core_client_version.minor,
            release: state.core_client_version.release,
            app_version: av.version_num,
            userid: i64::from(p.userid),
            teamid: i64::from(p.teamid),
            hostid: i64::from(p.hostid),
            app_name: av.app_name.clone(),
            plan_class: av.plan_class.clone(),
            symstore: p.symstore.clone(),
            team_name: p.team_name.clone(),
            user_name: p.user_name.clone(),
            project_dir: pdir.display().to_string(),
            boinc_dir: self.dir.display().to_string(),
            wu_name: wu.name.clone(),
            result_name: r.name.clone(),
            slot: i32::try_from(slot.number()).unwrap_or(0),
            client_pid: i32::try_from(std::process::id()).unwrap_or(0),
            wu_cpu_time: resume.cpu_time,
            starting_elapsed_time: resume.elapsed_time,
            user_total_credit: p.user_total_credit,
            user_expavg_credit: p.user_expavg_credit,
            host_total_credit: p.host_total_credit,
            host_expavg_credit: p.host_expavg_credit,
            resource_share_fraction: resource_share_fraction(state, &key.0),
            checkpoint_period: prefs.disk_interval,
            gpu_usage,
            gpu_type: gpu_device.map(|(t, _)| t.to_owned()).unwrap_or_default(),
            gpu_device_num: gpu_device.map_or(-1, |(_, d)| as_i32(d.device_num)),
            gpu_opencl_dev_index: gpu_device.map_or(-1, |(_, d)| as_i32(d.opencl_device_index)),
            ncpus: av.usage.avg_ncpus,
            rsc_fpops_est: wu.rsc_fpops_est,
            rsc_fpops_bound: wu.rsc_fpops_bound,
            rsc_memory_bound: wu.rsc_memory_bound,
            rsc_disk_bound: wu.rsc_disk_bound,
            authenticator: account.authenticator,
            project_preferences: account.project_prefs,
            computation_deadline: computation_deadline(r.report_deadline, prefs),
            proxy_info: inputs
                .proxy
                .filter(|x| x.use_http_proxy || x.use_socks_proxy)
                .cloned(),
            vm_extensions_disabled: state.host_info.p_vm_extensions_disabled,
            host_info: state.host_info.clone(),
            global_prefs: prefs.clone(),
            app_files: av.file_refs.iter().map(|f| f.file_name.clone()).collect(),
            no_priority_change: self.priority.no_priority_change,
            process_priority: self.priority.process_priority,
            process_priority_special: self.priority.process_priority_special,
            ..AppInitData::default()
        };
        let setup = match adopt {
            None => slot
                .setup(&files, &init.to_xml())
                .map_err(|e| format!("slot {}: {e}", slot.number())),
            Some(Some(_)) => super::recover::retarget_init_data(&slot, &init),
            Some(None) => Ok(()),
        };
        if let Err(e) = setup {
            self.held.insert(key.clone(), slot);
            return Err(e);
        }
        // `app_config.xml` `<app_version><cmdline>` replaces the version's own arguments.
        let app_config = inputs.app_configs.get(&key.0).and_then(|c| {
            c.app_versions
                .iter()
                .find(|o| o.app_name == av.app_name && o.plan_class == av.plan_class)
                .map(|o| o.cmdline.as_str())
        });
        // Apps older than API 7.5 learn their GPU from `--device N` (newer ones read
        // `init_data.xml`).
        let devices: Vec<u32> = gpu_device
            .filter(|_| !api_at_least(&av.api_version, 7, 5))
            .map(|(_, dev)| dev.device_num)
            .into_iter()
            .collect();
        let args = ferrite_supervise::cmdline::CommandLine {
            job: &wu.command_line,
            app_version: &av.cmdline,
            app_config,
            devices: &devices,
        }
        .args();
        let flops = if av.usage.flops > 0.0 {
            av.usage.flops
        } else {
            state.host_info.p_fpops.max(1e6)
        };
        let non_cpu = ps
            .app(&av.app_name)
            .is_some_and(|a| a.non_cpu_intensive || a.sporadic);
        let mut cfg = TaskConfig {
            result_name: r.name.clone(),
            slot: slot.number(),
            slot_dir: slot.dir().to_path_buf(),
            project_dir_name: dir_name(&pdir),
            program: program.clone(),
            args,
            env: vec![(
                OsString::from("BOINC_SLOT"),
                OsString::from(slot.number().to_string()),
            )],
            uses_api: uses_api(&av.api_version, &program),
            priority: Priority::for_job(gpu_usage > 0.0, av.usage.avg_ncpus, self.priority),
            project_master_url: Some(key.0.clone()),
            limits: Limits {
                max_elapsed: (!non_cpu).then(|| {
                    ferrite_supervise::limits::max_elapsed_time(wu.rsc_fpops_bound, flops)
                }),
                disk_bound: (wu.rsc_disk_bound > 0.0).then_some(wu.rsc_disk_bound as u64),
                max_ram: max_ram(prefs, state.host_info.m_nbytes),
                ..Limits::default()
            },
            timing: Timing::default(),
            max_wss: prefs.available_ram(state.host_info.m_nbytes, inputs.user_active),
            resume_from: resume,
            stderr_head: inputs.stderr_head,
            confine: None,
        };
        let confinement = confine::Decision::of(
            &self.confine,
            &key.0,
            confine::AppKind::of(
                &av.plan_class,
                &program,
                state.host_info.docker.as_ref().map(|d| d.1),
            ),
            confine::AppNeeds {
                gpu: gpu_usage > 0.0,
                network: av.needs_network,
                docker: false,
            },
        );
        if let confine::Decision::Confined(needs) = confinement {
            let home = std::env::var_os("HOME").map(PathBuf::from);
            let sockets = if needs.docker {
                let host = std::env::var("DOCKER_HOST").ok();
                let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
                confine::docker_sockets(host.as_deref(), runtime.as_deref())
            } else {
                Vec::new()
            };
            cfg.confine = Some(confine::Policy::for_app(
                confine::AppPlace {
                    data_dir: &self.dir,
                    slot_dir: slot.dir(),
                    project_dir: &pdir,
                    home: home.as_deref(),
                    engine_sockets: &sockets,
                },
                needs,
            ));
        }
        let version_num = av.version_num;
        if adopt.is_none() {
            if let Some(e) = changed_app_file(&stamped) {
                self.held.insert(key.clone(), slot);
                return Err(e);
            }
            // Recorded before the app exists: a client killed between the spawn and the
            // next records write still finds the task by its slot (`tasks/recover.rs`).
            self.write_records_with(Some(TaskRecord {
                result_name: key.1.clone(),
                slot: slot.number(),
                slot_dir: slot.dir().to_path_buf(),
                pid: None,
                pid_starttime: 0,
                checkpoint_cpu_time: resume.cpu_time,
                checkpoint_elapsed_time: resume.elapsed_time,
                fraction_done: resume.fraction_done,
                peak_working_set: 0,
                peak_disk_usage: 0,
            }));
        }
        let started = match adopt {
            None => Task::start(cfg, inst),
            Some(process) => Task::adopt(cfg, process, inst),
        };
        let mut task = match started {
            Ok(t) => t,
            Err(e) => {
                self.held.insert(key.clone(), slot);
                // The causes too: "cannot start app: ... Text file busy".
                let mut msg = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(cause) = source {
                    msg.push_str(&format!(": {cause}"));
                    source = cause.source();
                }
                return Err(msg);
            }
        };
        if adopt.is_none() {
            if let Some(e) = changed_app_file(&stamped) {
                // Ended (killed and reaped) before it could do anything the task would keep.
                drop(task);
                self.held.insert(key.clone(), slot);
                return Err(e);
            }
        }
        match adopt {
            None => info!(project = %key.0,
                "starting task {} in slot {} (pid {}, {}){}",
                key.1,
                slot.number(),
                task.pid(),
                confinement.describe(),
                if resume.elapsed_time > 0.0 {
                    format!(", resuming from {:.0} s", resume.elapsed_time)
                } else {
                    String::new()
                }
            ),
            Some(Some((pid, _))) => {
                info!(project = %key.0,
                    "taking over task {} in slot {} (pid {pid}), left running by a previous client",
                    key.1,
                    slot.number()
                );
                // The app rereads init_data.xml and watches this client's PID from now on.
                task.reread_app_info(inst);
            }
            Some(None) => info!(project = %key.0,
                "task {}: its app finished while no client ran (boinc_finish_called in slot {}); \
                 it is not run again",
                key.1,
                slot.number()
            ),
        }
        let slot_no = i32::try_from(slot.number()).unwrap_or(0);
        match state
            .active_tasks
            .iter_mut()
            .find(|a| a.project_master_url == key.0 && a.result_name == key.1)
        {
            Some(a) => {
                a.slot = slot_no;
                a.active_task_state = 1;
            }
            None => state.active_tasks.push(ActiveTask {
                project_master_url: key.0.clone(),
                result_name: key.1.clone(),
                active_task_state: 1,
                app_version_num: version_num,
                slot: slot_no,
                ..ActiveTask::default()
            }),
        }
        self.live.insert(
            key.clone(),
            Live {
                finish: crate::finishing::FinishWatch::new(slot.dir(), inst),
                task,
                slot,
                run_started_at: now,
                counted_elapsed: resume.elapsed_time,
                confinement,
                uses_gpu: gpu_usage > 0.0,
            },
        );
        Ok(())
    }
}

/// Why a start must not go on: one of the app's files no longer has the size and
/// modification time it had when it was verified (the app file check fetches it again).
fn changed_app_file(files: &[(PathBuf, FileStamp)]) -> Option<String> {
    files.iter().find_map(|(path, was)| {
        let now = std::fs::metadata(path).ok().map(|m| file_stamp(&m));
        (now != Some(*was)).then(|| {
            format!(
                "app file {} changed on disk since it was verified",
                path.file_name().unwrap_or_default().to_string_lossy()
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ferrite_proto::client_state::synthetic;

    use super::*;

    /// A task's app file rewritten after it was verified (and after the last app file
    /// check) does not run: the start fails, nothing runs in the slot, and once the file
    /// is as verified again the same start goes ahead.
    #[test]
    fn an_app_file_rewritten_since_its_verification_is_not_started() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut table = TaskTable::new(dir.path());
        let mut state = synthetic(1, 1);
        let ps = &mut state.projects[0];
        ps.results[0].state = ResultState::FilesDownloaded;
        let key: Key = (ps.project.master_url.clone(), ps.results[0].name.clone());
        let app = ps
            .app_version_of(&ps.results[0])
            .and_then(|v| v.file_refs.first())
            .map(|f| f.file_name.clone())
            .expect("the task's app file");
        let pdir = config::project_dir(table.dir.as_path(), &key.0);
        fs::create_dir_all(&pdir).expect("project dir");
        let path = pdir.join(&app);
        let verified = "#!/bin/sh\necho verified > ran\n";
        fs::write(&path, verified).expect("app");
        fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        let stamp = |p: &Path| file_stamp(&fs::metadata(p).expect("app"));
        let mut stamps = crate::transfers::AppStamps::new();
        stamps.insert((key.0.clone(), app.clone()), stamp(&path));
        // Rewritten in place, a different program.
        fs::write(&path, "#!/bin/sh\necho rewritten > ran\n").expect("rewrite");
        let prefs = GlobalPrefs::default();
        let (configs, gpus, no_rsc) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        let control = crate::gpu_control::Resolved::default();
        let inputs = |stamps| TickInputs {
            prefs: &prefs,
            cc_ncpus: 0,
            suspend: None,
            gpu_suspend: None,
            user_active: false,
            app_configs: &configs,
            exclude_gpus: &[],
            no_rsc_prefs: &no_rsc,
            stderr_head: false,
            proxy: None,
            gpu_instances: &gpus,
            exit_before_start: false,
            gpu_control: &control,
            app_stamps: stamps,
            epoch: 0,
        };
        let now = Instant::now();
        let refused = table.start(&mut state, &inputs(&stamps), &key, 0, 1.8e9, now, None);
        let msg = refused.expect_err("a rewritten app file must not start");
        assert!(
            msg.contains(&app) && msg.contains("changed on disk"),
            "{msg}"
        );
        assert!(!table.live.contains_key(&key));
        // As verified again (the app file check fetches it): it starts and runs.
        fs::write(&path, verified).expect("restore");
        let mut restored = crate::transfers::AppStamps::new();
        restored.insert((key.0.clone(), app), stamp(&path));
        // Another test's fork may hold the fresh file open for writing until its exec:
        // "Text file busy" for a moment.
        let mut started = Err(String::new());
        for _ in 0..100 {
            started = table.start(&mut state, &inputs(&restored), &key, 0, 1.8e9, now, None);
            if !started.as_ref().is_err_and(|e| e.contains("busy")) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        started.expect("the verified app starts");
        let slot = table
            .live
            .get(&key)
            .expect("running")
            .slot
            .dir()
            .to_path_buf();
        let ran = slot.join("ran");
        for _ in 0..500 {
            if fs::read_to_string(&ran).is_ok_and(|s| !s.is_empty()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            fs::read_to_string(&ran).expect("the app ran").trim(),
            "verified"
        );
    }
}
