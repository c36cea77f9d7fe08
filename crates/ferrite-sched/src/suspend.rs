//! Whether computing may go on at all: the client-wide suspend decision.
//!
//! Once a second the daemon gathers what it observed (run mode, benchmarks, battery, time since
//! the last user input, exclusive apps, the CPU load of other programs) and asks
//! [`cpu_suspend_reason`] and [`gpu_suspend_reason`] whether computing is suspended and why.
//! The rules and their order are the official client's (`check_suspend_processing`), so the
//! reason codes shown in `get_cc_status` mean the same thing to BOINC Manager and `boinccmd`.

/// Why computing (or GPU computing) is suspended. The discriminants are the GUI RPC codes
/// (`task_suspend_reason`, `gpu_suspend_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum SuspendReason {
    /// The host runs on battery and `run_on_batteries` is off.
    Batteries = 1,
    /// Someone uses the computer and `run_if_user_active` (or `run_gpu_if_user_active`) is off.
    UserActive = 2,
    /// The run mode is "never" (or a temporary "never").
    UserRequest = 4,
    /// Outside the `start_hour`/`end_hour` window of the day.
    TimeOfDay = 8,
    /// The CPU benchmarks are running.
    Benchmarks = 16,
    /// Not enough disk space.
    DiskSize = 32,
    /// `cpu_usage_limit` duty cycle (reported as 0 by the official client).
    CpuThrottle = 64,
    /// No user input for longer than `suspend_if_no_recent_input`.
    NoRecentInput = 128,
    /// `cc_config.xml` `start_delay` has not elapsed since the start.
    InitialDelay = 256,
    /// An `exclusive_app` (or `exclusive_gpu_app`) runs.
    ExclusiveApp = 512,
    /// Other programs use more CPU than `suspend_cpu_usage`.
    CpuUsage = 1024,
}

impl SuspendReason {
    /// The GUI RPC code.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The official client's wording, as its event log shows it after "Suspending computation - ".
    pub fn describe(self) -> &'static str {
        match self {
            SuspendReason::Batteries => "on batteries",
            SuspendReason::UserActive => "computer is in use",
            SuspendReason::UserRequest => "suspended by user",
            SuspendReason::TimeOfDay => "time of day",
            SuspendReason::Benchmarks => "CPU benchmarks in progress",
            SuspendReason::DiskSize => "need disk space",
            SuspendReason::CpuThrottle => "CPU throttled",
            SuspendReason::NoRecentInput => "no recent user activity",
            SuspendReason::InitialDelay => "initial delay",
            SuspendReason::ExclusiveApp => "an exclusive app is running",
            SuspendReason::CpuUsage => "CPU is busy",
        }
    }

    /// Whether tasks suspended for this reason always stay in memory (the suspension is
    /// short or frequent); for the other reasons `leave_apps_in_memory` decides.
    pub fn keeps_tasks_in_memory(self) -> bool {
        matches!(
            self,
            SuspendReason::Benchmarks | SuspendReason::CpuUsage | SuspendReason::CpuThrottle
        )
    }
}

/// The run mode in force (permanent or temporary) for a kind of activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Run regardless of the preferences.
    Always,
    /// Run according to the preferences.
    Auto,
    /// Do not run.
    Never,
}

/// The preferences the decision reads (already merged with the override file; the CPU-usage
/// threshold already chosen for in-use or not-in-use).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SuspendPrefs {
    /// `run_on_batteries`.
    pub run_on_batteries: bool,
    /// `run_if_user_active`.
    pub run_if_user_active: bool,
    /// `run_gpu_if_user_active`.
    pub run_gpu_if_user_active: bool,
    /// `suspend_if_no_recent_input`, minutes (0 = off).
    pub suspend_if_no_recent_input_min: f64,
    /// `suspend_cpu_usage` or `niu_suspend_cpu_usage`, percent (0 = off).
    pub suspend_cpu_usage_pct: f64,
    /// `cc_config.xml` `start_delay`, seconds.
    pub start_delay_secs: f64,
}

/// What the daemon observed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observed {
    /// The CPU run mode in force.
    pub cpu_mode: Mode,
    /// The GPU run mode in force.
    pub gpu_mode: Mode,
    /// The CPU benchmarks run now.
    pub benchmarks_running: bool,
    /// Seconds since the daemon started.
    pub since_start_secs: f64,
    /// The host runs on battery.
    pub on_battery: bool,
    /// Someone used the keyboard or mouse within `idle_time_to_run` (see [`user_active`]).
    pub user_active: bool,
    /// Seconds since the last user input (`None`: unknown, taken as "long ago").
    pub idle_secs: Option<f64>,
    /// The `cpu_times` window says "not now".
    pub outside_time_of_day: bool,
    /// Seconds since an exclusive app was last seen running (`None`: never).
    pub exclusive_app_seen_ago: Option<f64>,
    /// Seconds since an exclusive GPU app was last seen running (`None`: never).
    pub exclusive_gpu_app_seen_ago: Option<f64>,
    /// CPU load of programs other than this client's apps, percent of all CPUs.
    pub non_client_cpu_pct: f64,
    /// Seconds since computing was last suspended for [`SuspendReason::CpuUsage`].
    pub cpu_usage_suspended_ago: Option<f64>,
    /// The host has at least one usable GPU (or other coprocessor).
    pub has_gpu: bool,
}

/// How long an exclusive app keeps computing suspended after it was last seen (the official
/// client scans every 10 s and waits 5 s more).
pub const EXCLUSIVE_APP_HOLD_SECS: f64 = 15.0;

/// How long a CPU-usage suspension holds at least, so a load that comes and goes does not make
/// the tasks flap.
pub const CPU_USAGE_HOLD_SECS: f64 = 20.0;

/// Whether the user counts as active: input within `idle_time_to_run` minutes. Unknown idle
/// time counts as inactive (the official client's "infinite" idle time).
pub fn user_active(idle_secs: Option<f64>, idle_time_to_run_min: f64) -> bool {
    idle_secs.is_some_and(|s| s < idle_time_to_run_min * 60.0)
}

fn recently(ago: Option<f64>, hold: f64) -> bool {
    ago.is_some_and(|a| a < hold)
}

/// The reason all computing is suspended now, if it is; the first rule that matches wins.
pub fn cpu_suspend_reason(p: &SuspendPrefs, o: &Observed) -> Option<SuspendReason> {
    if o.benchmarks_running {
        return Some(SuspendReason::Benchmarks);
    }
    if p.start_delay_secs > 0.0 && o.since_start_secs < p.start_delay_secs {
        return Some(SuspendReason::InitialDelay);
    }
    match o.cpu_mode {
        Mode::Always => return None,
        Mode::Never => return Some(SuspendReason::UserRequest),
        Mode::Auto => {}
    }
    if !p.run_on_batteries && o.on_battery {
        return Some(SuspendReason::Batteries);
    }
    if !p.run_if_user_active && o.user_active {
        return Some(SuspendReason::UserActive);
    }
    if o.outside_time_of_day {
        return Some(SuspendReason::TimeOfDay);
    }
    if p.suspend_if_no_recent_input_min > 0.0
        && o.idle_secs
            .is_none_or(|s| s > p.suspend_if_no_recent_input_min * 60.0)
    {
        return Some(SuspendReason::NoRecentInput);
    }
    if recently(o.exclusive_app_seen_ago, EXCLUSIVE_APP_HOLD_SECS) {
        return Some(SuspendReason::ExclusiveApp);
    }
    if p.suspend_cpu_usage_pct > 0.0
        && (o.non_client_cpu_pct > p.suspend_cpu_usage_pct
            || recently(o.cpu_usage_suspended_ago, CPU_USAGE_HOLD_SECS))
    {
        return Some(SuspendReason::CpuUsage);
    }
    None
}

/// The reason GPU computing is suspended while CPU computing is not. A host without a GPU
/// never has one, as in the official client (which looks at the GPU rules only when it has
/// coprocessors).
pub fn gpu_suspend_reason(p: &SuspendPrefs, o: &Observed) -> Option<SuspendReason> {
    if !o.has_gpu {
        return None;
    }
    match o.gpu_mode {
        Mode::Always => None,
        Mode::Never => Some(SuspendReason::UserRequest),
        Mode::Auto => {
            if recently(o.exclusive_gpu_app_seen_ago, EXCLUSIVE_APP_HOLD_SECS) {
                Some(SuspendReason::ExclusiveApp)
            } else if o.user_active && !p.run_gpu_if_user_active {
                Some(SuspendReason::UserActive)
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefs() -> SuspendPrefs {
        SuspendPrefs {
            run_on_batteries: true,
            run_if_user_active: true,
            run_gpu_if_user_active: false,
            suspend_if_no_recent_input_min: 0.0,
            suspend_cpu_usage_pct: 25.0,
            start_delay_secs: 0.0,
        }
    }

    fn quiet() -> Observed {
        Observed {
            cpu_mode: Mode::Auto,
            gpu_mode: Mode::Auto,
            benchmarks_running: false,
            since_start_secs: 3600.0,
            on_battery: false,
            user_active: false,
            idle_secs: Some(7200.0),
            outside_time_of_day: false,
            exclusive_app_seen_ago: None,
            exclusive_gpu_app_seen_ago: None,
            non_client_cpu_pct: 3.0,
            cpu_usage_suspended_ago: None,
            has_gpu: true,
        }
    }

    #[test]
    fn an_idle_machine_on_mains_computes() {
        assert_eq!(cpu_suspend_reason(&prefs(), &quiet()), None);
        assert_eq!(gpu_suspend_reason(&prefs(), &quiet()), None);
    }

    #[test]
    fn each_rule_gives_its_official_code() {
        let p = prefs();
        let cases: [(SuspendPrefs, Observed, i32); 9] = [
            (
                p,
                Observed {
                    benchmarks_running: true,
                    ..quiet()
                },
                16,
            ),
            (
                SuspendPrefs {
                    start_delay_secs: 60.0,
                    ..p
                },
                Observed {
                    since_start_secs: 10.0,
                    ..quiet()
                },
                256,
            ),
            (
                p,
                Observed {
                    cpu_mode: Mode::Never,
                    ..quiet()
                },
                4,
            ),
            (
                SuspendPrefs {
                    run_on_batteries: false,
                    ..p
                },
                Observed {
                    on_battery: true,
                    ..quiet()
                },
                1,
            ),
            (
                SuspendPrefs {
                    run_if_user_active: false,
                    ..p
                },
                Observed {
                    user_active: true,
                    idle_secs: Some(5.0),
                    ..quiet()
                },
                2,
            ),
            (
                p,
                Observed {
                    outside_time_of_day: true,
                    ..quiet()
                },
                8,
            ),
            (
                SuspendPrefs {
                    suspend_if_no_recent_input_min: 30.0,
                    ..p
                },
                quiet(),
                128,
            ),
            (
                p,
                Observed {
                    exclusive_app_seen_ago: Some(3.0),
                    ..quiet()
                },
                512,
            ),
            (
                p,
                Observed {
                    non_client_cpu_pct: 80.0,
                    ..quiet()
                },
                1024,
            ),
        ];
        for (p, o, code) in cases {
            assert_eq!(
                cpu_suspend_reason(&p, &o).map(SuspendReason::code),
                Some(code),
                "{o:?}"
            );
        }
    }

    #[test]
    fn the_first_matching_rule_wins_in_the_official_order() {
        let p = SuspendPrefs {
            run_on_batteries: false,
            run_if_user_active: false,
            ..prefs()
        };
        let busy = Observed {
            on_battery: true,
            user_active: true,
            outside_time_of_day: true,
            non_client_cpu_pct: 90.0,
            ..quiet()
        };
        assert_eq!(
            cpu_suspend_reason(&p, &busy),
            Some(SuspendReason::Batteries)
        );
        let on_mains = Observed {
            on_battery: false,
            ..busy
        };
        assert_eq!(
            cpu_suspend_reason(&p, &on_mains),
            Some(SuspendReason::UserActive)
        );
        let benchmarks = Observed {
            benchmarks_running: true,
            cpu_mode: Mode::Never,
            ..busy
        };
        assert_eq!(
            cpu_suspend_reason(&p, &benchmarks),
            Some(SuspendReason::Benchmarks)
        );
    }

    #[test]
    fn run_always_ignores_the_preferences_but_not_benchmarks() {
        let p = SuspendPrefs {
            run_on_batteries: false,
            ..prefs()
        };
        let o = Observed {
            cpu_mode: Mode::Always,
            on_battery: true,
            ..quiet()
        };
        assert_eq!(cpu_suspend_reason(&p, &o), None);
        let b = Observed {
            benchmarks_running: true,
            ..o
        };
        assert_eq!(cpu_suspend_reason(&p, &b), Some(SuspendReason::Benchmarks));
    }

    #[test]
    fn unknown_idle_time_counts_as_absent_user() {
        assert!(!user_active(None, 3.0));
        assert!(user_active(Some(179.0), 3.0));
        assert!(!user_active(Some(181.0), 3.0));
        let p = SuspendPrefs {
            suspend_if_no_recent_input_min: 10.0,
            ..prefs()
        };
        let o = Observed {
            idle_secs: None,
            ..quiet()
        };
        assert_eq!(
            cpu_suspend_reason(&p, &o),
            Some(SuspendReason::NoRecentInput)
        );
        let recent = Observed {
            idle_secs: Some(60.0),
            ..quiet()
        };
        assert_eq!(cpu_suspend_reason(&p, &recent), None);
    }

    #[test]
    fn holds_keep_a_suspension_from_flapping() {
        let p = prefs();
        let gone = Observed {
            exclusive_app_seen_ago: Some(14.0),
            ..quiet()
        };
        assert_eq!(
            cpu_suspend_reason(&p, &gone),
            Some(SuspendReason::ExclusiveApp)
        );
        let long_gone = Observed {
            exclusive_app_seen_ago: Some(16.0),
            ..quiet()
        };
        assert_eq!(cpu_suspend_reason(&p, &long_gone), None);
        let calm = Observed {
            cpu_usage_suspended_ago: Some(5.0),
            ..quiet()
        };
        assert_eq!(cpu_suspend_reason(&p, &calm), Some(SuspendReason::CpuUsage));
        let off = SuspendPrefs {
            suspend_cpu_usage_pct: 0.0,
            ..p
        };
        let loaded = Observed {
            non_client_cpu_pct: 99.0,
            ..calm
        };
        assert_eq!(cpu_suspend_reason(&off, &loaded), None);
    }

    #[test]
    fn gpus_have_their_own_mode_and_user_activity_rule() {
        let p = prefs();
        let active = Observed {
            user_active: true,
            ..quiet()
        };
        assert_eq!(cpu_suspend_reason(&p, &active), None);
        assert_eq!(
            gpu_suspend_reason(&p, &active),
            Some(SuspendReason::UserActive)
        );
        let allowed = SuspendPrefs {
            run_gpu_if_user_active: true,
            ..p
        };
        assert_eq!(gpu_suspend_reason(&allowed, &active), None);
        let never = Observed {
            gpu_mode: Mode::Never,
            ..quiet()
        };
        assert_eq!(
            gpu_suspend_reason(&p, &never),
            Some(SuspendReason::UserRequest)
        );
        let excl = Observed {
            exclusive_gpu_app_seen_ago: Some(1.0),
            ..quiet()
        };
        assert_eq!(
            gpu_suspend_reason(&p, &excl),
            Some(SuspendReason::ExclusiveApp)
        );
        // Without a GPU no rule suspends GPU computing.
        for o in [active, never, excl] {
            let no_gpu = Observed {
                has_gpu: false,
                ..o
            };
            assert_eq!(gpu_suspend_reason(&p, &no_gpu), None);
        }
        assert!(SuspendReason::CpuUsage.keeps_tasks_in_memory());
        assert!(!SuspendReason::UserActive.keeps_tasks_in_memory());
    }
}
