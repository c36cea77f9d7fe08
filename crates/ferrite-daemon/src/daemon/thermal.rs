//! The temperature limits seen from the whole daemon: a thermal hold suspends GPU tasks and
//! shows in `cc_status` (the watch itself, which needs no `Daemon`, is `thermal.rs`).

#[cfg(test)]
mod tests {
    use ferrite_sched::suspend::SuspendReason;

    use crate::thermal::tests::write_temps;
    use crate::thermal::ThermalWatch;

    #[test]
    fn the_daemon_shows_a_thermal_hold_in_cc_status_and_suspends_gpu_tasks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = crate::test_options(dir.path());
        let mut d = crate::Daemon::start(opts, crate::logging::init()).expect("daemon");
        let sys = tempfile::tempdir().expect("sys");
        write_temps(sys.path(), 70_000, 70_000);
        d.host.thermal = ThermalWatch::new(sys.path().to_path_buf());
        d.state
            .host_info
            .coprocs
            .other
            .push(ferrite_proto::host::OtherCoproc {
                rsc_type: "ATI".into(),
                count: 1,
                ..Default::default()
            });
        // Nothing but the temperatures may suspend anything (this host's load and its users
        // are not the test's).
        d.config.prefs.prefs.suspend_cpu_usage = 0.0;
        d.config.prefs.prefs.niu_suspend_cpu_usage = 0.0;
        d.config.prefs.prefs.run_gpu_if_user_active = true;
        d.config.prefs.prefs.ferrite_cpu_temp_limit = 80.0;
        d.config.prefs.prefs.ferrite_gpu_temp_limit = 85.0;
        let t0 = crate::now();
        let (cpu, gpu, _) = d.decide_suspension(t0);
        assert_eq!((cpu, gpu), (None, None));
        let status = |d: &mut crate::Daemon| d.gui_rpc_reply(ferrite_gui_rpc::Request::GetCcStatus);
        let x = status(&mut d);
        assert!(
            x.contains("<task_suspend_reason>0</task_suspend_reason>"),
            "{x}"
        );
        assert!(
            x.contains("<gpu_suspend_reason>0</gpu_suspend_reason>"),
            "{x}"
        );
        write_temps(sys.path(), 92_000, 91_000);
        let mut gpu = None;
        for i in 1..=20 {
            (_, gpu, _) = d.decide_suspension(t0 + f64::from(i));
        }
        assert_eq!(gpu, Some(SuspendReason::CpuThrottle));
        assert!(d.host.thermal.status().cpu_holding());
        let x = status(&mut d);
        assert!(
            x.contains("<task_suspend_reason>64</task_suspend_reason>"),
            "{x}"
        );
        assert!(
            x.contains("<gpu_suspend_reason>64</gpu_suspend_reason>"),
            "{x}"
        );
    }
}
