//! Host watching's glue: host detection and GPU re-probes written into the state, the CPU
//! benchmarks started and their figures kept, the disk figures refreshed, and the decision
//! whether computing may go on (from the preferences, the run modes, the projects and the
//! host's activity and temperatures). The owner of what is watched is `host.rs`.

use std::path::Path;
use std::time::Duration;

use ferrite_hostinfo::{BenchmarkResult, HostDetector, HostProbeConfig};
use ferrite_sched::suspend::SuspendReason;
use tracing::{info, warn};

use crate::clock::now;
use crate::event::Event;
use crate::host::{probe_gpus, BENCHMARK_CHECK_SECS, GPU_REPROBE_SECS};
use crate::{projects, run_modes, Daemon};

impl Daemon {
    /// Host watching's timers: GPUs re-probed while no driver answered, the CPU benchmarks
    /// started when due.
    pub(crate) fn watch_host(&mut self, t: f64) {
        if self.host.gpu_retry_at.is_some_and(|at| t >= at) {
            self.state_epoch += 1;
            self.reprobe_gpus(t);
        }
        if t >= self.host.next_bench_check {
            self.host.next_bench_check = t + BENCHMARK_CHECK_SECS;
            if self.benchmarks_due(t) {
                self.start_benchmarks();
            }
        }
    }

    /// Re-detects the host, keeping what the official client keeps from the state file (the
    /// benchmark figures and the host's cross-project id).
    pub(crate) fn detect_host(&mut self) {
        let mut probe = HostProbeConfig::new(&self.dir);
        probe.gpu = self.config.gpu_config(&self.opts);
        let det = HostDetector::new(probe);
        let found = det.detect_host();
        for w in &found.warnings {
            warn!("host detection: {w}");
        }
        let old = std::mem::take(&mut self.state.host_info);
        let mut host = found.host;
        host.p_fpops = old.p_fpops;
        host.p_iops = old.p_iops;
        host.p_membw = old.p_membw;
        host.p_calculated = old.p_calculated;
        // As the official client: cleared at each start (the volunteer may have turned the
        // extensions on since a VirtualBox app said they were off).
        host.p_vm_extensions_disabled = false;
        host.host_cpid = if old.host_cpid.is_empty() {
            ferrite_hostinfo::generate_host_cpid(Path::new("/sys"), &self.dir)
        } else {
            old.host_cpid
        };
        if self.config.cc.options.ncpus > 0 {
            host.p_ncpus = u32::try_from(self.config.cc.options.ncpus).unwrap_or(host.p_ncpus);
        }
        // cc_config <device_name>: the name projects and GUIs see instead of the host name.
        let device = self.config.cc.options.device_name.trim();
        if !device.is_empty() {
            host.domain_name = device.to_owned();
        }
        host.virtualbox_version = if self.config.cc.options.dont_use_vbox {
            info!("VirtualBox: not looked for (dont_use_vbox in cc_config.xml)");
            None
        } else {
            ferrite_hostinfo::vbox::detect()
        };
        match &host.virtualbox_version {
            Some(v) => info!("VirtualBox version: {v}"),
            None if self.config.cc.options.dont_use_vbox => {}
            None => info!("VirtualBox: not found"),
        }
        if !ferrite_hostinfo::vbox::cpu_has_vm_extensions(&host.p_features) {
            info!("CPU virtualisation extensions (vmx/svm): not available");
        }
        host.docker = ferrite_hostinfo::docker::detect();
        match &host.docker {
            Some((v, t)) => info!(
                "{} version {v} found",
                if *t == ferrite_hostinfo::docker::PODMAN {
                    "Podman"
                } else {
                    "Docker"
                }
            ),
            None => info!("Docker/Podman: not found (or cannot run containers)"),
        }
        let gpus = probe_gpus(&det);
        for w in &gpus.warnings {
            info!("GPU detection: {w}");
        }
        for w in &gpus.opencl.warnings {
            info!("OpenCL: {w}");
        }
        for line in ferrite_hostinfo::opencl_lines(&gpus) {
            info!("{line}");
        }
        ferrite_hostinfo::apply_gpu_probe(&mut host, &gpus);
        self.note_gpu_probe(&gpus);
        self.host.gpu_instances = gpus.instances();
        self.gpu_control.set_devices(&gpus);
        self.host.gpu_retry_at = gpus.should_retry().then(|| now() + GPU_REPROBE_SECS);
        if host.p_fpops <= 0.0 {
            let d = BenchmarkResult::defaults();
            host.p_fpops = d.p_fpops;
            host.p_iops = d.p_iops;
            host.p_membw = d.p_membw;
        }
        info!(
            "host: {} CPUs ({}), {:.1} GiB memory, {} NVIDIA GPUs, OS {}: {}",
            host.p_ncpus,
            host.p_model,
            host.m_nbytes / f64::from(1u32 << 30),
            host.coprocs.nvidia.as_ref().map_or(0, |n| n.count),
            host.os_name,
            host.os_version
        );
        self.state.host_info = host;
        let platforms = det.platforms();
        if let Some((primary, alt)) = platforms.split_first() {
            self.state.platform_name = primary.clone();
            self.state.alt_platforms = alt.to_vec();
        }
        self.save.mark_dirty(now());
    }

    /// Re-probes GPUs after a start without a usable driver (it may load late at boot).
    pub(crate) fn reprobe_gpus(&mut self, now: f64) {
        let mut probe = HostProbeConfig::new(&self.dir);
        probe.gpu = self.config.gpu_config(&self.opts);
        let gpus = probe_gpus(&HostDetector::new(probe));
        let before = self.state.host_info.coprocs.clone();
        ferrite_hostinfo::apply_gpu_probe(&mut self.state.host_info, &gpus);
        self.note_gpu_probe(&gpus);
        self.host.gpu_instances = gpus.instances();
        self.gpu_control.set_devices(&gpus);
        self.host.gpu_retry_at = gpus.should_retry().then_some(now + GPU_REPROBE_SECS);
        if self.state.host_info.coprocs != before {
            info!(
                "GPUs found on re-probe: {} NVIDIA",
                self.state
                    .host_info
                    .coprocs
                    .nvidia
                    .as_ref()
                    .map_or(0, |n| n.count)
            );
            self.save.mark_dirty(now);
        }
    }

    /// Logs why no GPU was found, once: a re-probe that finds the same says nothing.
    pub(crate) fn note_gpu_probe(&mut self, gpus: &ferrite_hostinfo::gpu::GpuProbe) {
        let note = gpus.note();
        if note != self.host.gpu_note {
            if let Some(n) = &note {
                info!("{n}");
            }
            self.host.gpu_note = note;
        }
    }

    /// Whether the CPU benchmarks are due (first start, or older than 30 days). With
    /// `--skip_cpu_benchmarks` (or cc_config's) they never are: when they would be, the
    /// default figures stand in for missing ones and `p_calculated` becomes now, as the
    /// official client's `cpu_benchmarks_set_defaults` does.
    pub(crate) fn benchmarks_due(&mut self, now: f64) -> bool {
        let skip = self.opts.skip_cpu_benchmarks || self.config.cc.options.skip_cpu_benchmarks;
        let due = !self.host.benchmarks_running
            && ferrite_hostinfo::benchmarks_due(self.state.host_info.p_calculated, now);
        if due && skip {
            let d = BenchmarkResult::defaults();
            let h = &mut self.state.host_info;
            for (x, default) in [
                (&mut h.p_fpops, d.p_fpops),
                (&mut h.p_iops, d.p_iops),
                (&mut h.p_membw, d.p_membw),
            ] {
                if *x <= 0.0 {
                    *x = default;
                }
            }
            h.p_calculated = now;
            self.state_epoch += 1;
            self.save.mark_dirty(now);
        }
        due && !skip
    }

    /// Starts the CPU benchmarks on a blocking thread, unless they are already running.
    pub(crate) fn start_benchmarks(&mut self) {
        if self.host.benchmarks_running {
            info!("CPU benchmarks are already running");
            return;
        }
        self.host.benchmarks_running = true;
        let ncpus = self.state.host_info.p_ncpus.max(1);
        let tx = self.events.clone();
        info!("running CPU benchmarks on {ncpus} CPUs (under 10 s)");
        tokio::task::spawn_blocking(move || {
            let r = ferrite_hostinfo::run_benchmarks(ncpus, Duration::from_secs(8));
            let _ = tx.blocking_send(Event::BenchmarksDone(r));
        });
    }

    pub(crate) fn benchmarks_done(&mut self, r: BenchmarkResult, now: f64) {
        self.host.benchmarks_running = false;
        info!(
            "benchmarks: {:.2e} FLOPS, {:.2e} IOPS, {:.2e} B/s memory per CPU ({:.1} s{})",
            r.p_fpops,
            r.p_iops,
            r.p_membw,
            r.elapsed.as_secs_f64(),
            if r.cpu_share < 0.8 {
                format!(
                    "; other work held {:.0}% of the CPUs, figures may be low",
                    (1.0 - r.cpu_share) * 100.0
                )
            } else {
                String::new()
            }
        );
        let h = &mut self.state.host_info;
        h.p_fpops = r.p_fpops;
        h.p_iops = r.p_iops;
        h.p_membw = r.p_membw;
        h.p_calculated = now;
        self.save.mark_dirty(now);
    }

    /// Puts the disk figures of now into the state, at most once a minute: each project's
    /// `disk_usage` (its present files) and `disk_share` (its share of the space the
    /// preferences allow), and the host's `d_total`/`d_free`, so GUIs never
    /// show the figures a previous session saved.
    pub(crate) fn refresh_usage(&mut self, t: f64) {
        if t < self.host.next_usage_refresh {
            return;
        }
        self.host.next_usage_refresh = t + 60.0;
        let d = projects::disk_figures(&self.dir, &self.state, &self.config.prefs.prefs);
        for ps in &mut self.state.projects {
            ps.project.disk_usage = d.used.get(&ps.project.master_url).copied().unwrap_or(0.0);
        }
        let shares = projects::disk_shares(&self.state, d.allowed, t);
        for (ps, share) in self.state.projects.iter_mut().zip(shares) {
            ps.project.disk_share = share;
        }
        if let Some((total, free)) = projects::volume_space(&self.dir) {
            self.state.host_info.d_total = total;
            self.state.host_info.d_free = free;
        }
    }

    /// The disk figures are refreshed at the next tick (a project was attached: its disk
    /// share is known at once, as in the official client, not a minute later).
    pub(crate) fn refresh_usage_soon(&mut self) {
        self.host.next_usage_refresh = 0.0;
    }

    /// Whether computing (and GPU computing) is suspended now and why, from the run modes,
    /// the preferences and what the host shows; logs each change as the official client does.
    /// Also returns whether the user counts as active.
    pub(crate) fn decide_suspension(
        &mut self,
        t: f64,
    ) -> (Option<SuspendReason>, Option<SuspendReason>, bool) {
        use ferrite_proto::client_state::RunMode;
        use ferrite_sched::suspend::{self, Mode, Observed, SuspendPrefs};
        let mode = |kind| match run_modes::current_mode(&self.state, &self.modes, kind, t) {
            RunMode::Always => Mode::Always,
            RunMode::Never => Mode::Never,
            RunMode::Auto => Mode::Auto,
        };
        let (cpu_mode, gpu_mode) = (
            mode(run_modes::ModeKind::Cpu),
            mode(run_modes::ModeKind::Gpu),
        );
        let prefs = &self.config.prefs.prefs;
        let cc = &self.config.cc.options;
        self.host.activity.set_ignore_tty(&cc.ignore_tty);
        let seen = self.host.activity.observe(
            t,
            self.tasks.apps_cpu_time(),
            &cc.exclusive_apps,
            &cc.exclusive_gpu_apps,
        );
        let user_active = suspend::user_active(seen.idle_secs, prefs.idle_time_to_run);
        let sp = SuspendPrefs {
            run_on_batteries: prefs.run_on_batteries,
            run_if_user_active: prefs.run_if_user_active,
            run_gpu_if_user_active: prefs.run_gpu_if_user_active,
            suspend_if_no_recent_input_min: prefs.suspend_if_no_recent_input,
            suspend_cpu_usage_pct: prefs.effective_suspend_cpu_usage(user_active),
            start_delay_secs: cc.start_delay,
        };
        let (hour, weekday) = ferrite_proto::prefs::local_hour_and_weekday(
            t,
            i64::from(self.state.host_info.timezone),
        );
        let cpu_busy =
            self.host
                .cpu_load
                .sample(t, seen.non_client_cpu_pct, sp.suspend_cpu_usage_pct);
        let obs = Observed {
            cpu_mode,
            gpu_mode,
            benchmarks_running: self.host.benchmarks_running,
            since_start_secs: t - self.host.started_at,
            on_battery: seen.on_battery,
            user_active,
            idle_secs: seen.idle_secs,
            outside_time_of_day: prefs.cpu_suspended_at(hour, weekday),
            exclusive_app_seen_ago: seen.exclusive_app_at.map(|a| t - a),
            exclusive_gpu_app_seen_ago: seen.exclusive_gpu_app_at.map(|a| t - a),
            cpu_busy,
            has_gpu: {
                let c = &self.state.host_info.coprocs;
                c.nvidia.as_ref().is_some_and(|n| n.count > 0)
                    || c.other.iter().any(|o| o.count > 0)
            },
        };
        let reason = suspend::cpu_suspend_reason(&sp, &obs);
        let nvidia = self
            .state
            .host_info
            .coprocs
            .nvidia
            .as_ref()
            .is_some_and(|n| n.count > 0);
        let gpu_hot = self
            .host
            .thermal
            .observe(
                t,
                prefs.ferrite_cpu_temp_limit,
                prefs.ferrite_gpu_temp_limit,
                nvidia,
            )
            .gpu_hot;
        // A GPU over its temperature limit suspends the GPU tasks, shown with the nearest
        // official reason, "CPU throttled".
        let gpu_reason = reason
            .is_none()
            .then(|| {
                suspend::gpu_suspend_reason(&sp, &obs)
                    .or((gpu_hot && obs.has_gpu).then_some(SuspendReason::CpuThrottle))
            })
            .flatten();
        let (old, old_gpu) = self.host.suspended;
        if reason != old {
            match reason {
                Some(r) => info!("Suspending computation - {}", r.describe()),
                None => info!("Resuming computation"),
            }
        }
        if gpu_reason != old_gpu && reason.is_none() {
            match gpu_reason {
                Some(r) => info!("Suspending GPU computation - {}", r.describe()),
                None => info!("Resuming GPU computation"),
            }
        }
        self.host.suspended = (reason, gpu_reason);
        (reason, gpu_reason, user_active)
    }
}

#[cfg(test)]
mod tests {
    use crate::clock::now;
    use crate::{logging, Daemon};

    #[test]
    fn skipped_benchmarks_still_set_p_calculated() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = crate::test_options(dir.path());
        let mut d = Daemon::start(opts, logging::init()).expect("daemon");
        d.state.host_info.p_calculated = 0.0;
        let t = now();
        assert!(!d.benchmarks_due(t));
        assert_eq!(d.state.host_info.p_calculated, t);
        assert!(d.state.host_info.p_fpops > 0.0);
        // Not due again for 30 days: p_calculated stays.
        assert!(!d.benchmarks_due(t + 60.0));
        assert_eq!(d.state.host_info.p_calculated, t);
    }
}
