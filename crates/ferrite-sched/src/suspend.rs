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
    /// Other programs' CPU load counts as over `suspend_cpu_usage`, as [`CpuLoadWatch`]
    /// judges it (sustained, with hysteresis).
    pub cpu_busy: bool,
    /// The host has at least one usable GPU (or other coprocessor).
    pub has_gpu: bool,
}

/// How long an exclusive app keeps computing suspended after it was last seen (the official
/// client scans every 10 s and waits 5 s more).
pub const EXCLUSIVE_APP_HOLD_SECS: f64 = 15.0;

/// How long a CPU-usage suspension holds at least, so a load that comes and goes does not make
/// the tasks flap.
pub const CPU_USAGE_HOLD_SECS: f64 = 20.0;

/// How long other programs' load must stay over `suspend_cpu_usage` before computing is
/// suspended: one and a half of the daemon's 10-second load samples, so a spike seen in one
/// sample never stops the tasks.
pub const CPU_USAGE_CONFIRM_SECS: f64 = 15.0;

/// How far under `suspend_cpu_usage` (percentage points) the load must fall before the
/// suspension's hold time starts to run out.
pub const CPU_USAGE_BAND_PCT: f64 = 5.0;

/// Other programs' CPU load over time, with hysteresis: busy once the load has stayed over the
/// threshold for [`CPU_USAGE_CONFIRM_SECS`], and until it has stayed [`CPU_USAGE_BAND_PCT`]
/// under it for [`CPU_USAGE_HOLD_SECS`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuLoadWatch {
    over_since: Option<f64>,
    busy_at: Option<f64>,
}

impl CpuLoadWatch {
    /// One look at time `now` (seconds): `load_pct` is other programs' load, `threshold_pct`
    /// `suspend_cpu_usage` (or its not-in-use value; 0 = off). Returns whether the load counts
    /// as busy.
    pub fn sample(&mut self, now: f64, load_pct: f64, threshold_pct: f64) -> bool {
        if threshold_pct <= 0.0 {
            *self = CpuLoadWatch::default();
            return false;
        }
        let held = |at: Option<f64>| at.is_some_and(|a| now >= a && now - a < CPU_USAGE_HOLD_SECS);
        let busy = held(self.busy_at);
        if load_pct > threshold_pct {
            let since = *self.over_since.get_or_insert(now);
            if busy || now - since >= CPU_USAGE_CONFIRM_SECS {
                self.busy_at = Some(now);
            }
        } else {
            self.over_since = None;
            if busy && load_pct > threshold_pct - CPU_USAGE_BAND_PCT {
                self.busy_at = Some(now);
            }
        }
        held(self.busy_at)
    }
}

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
    if p.suspend_cpu_usage_pct > 0.0 && o.cpu_busy {
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
            cpu_busy: false,
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
                    cpu_busy: true,
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
            cpu_busy: true,
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
        let loaded = Observed {
            cpu_busy: true,
            ..quiet()
        };
        assert_eq!(
            cpu_suspend_reason(&p, &loaded),
            Some(SuspendReason::CpuUsage)
        );
        let off = SuspendPrefs {
            suspend_cpu_usage_pct: 0.0,
            ..p
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

    /// The busy verdicts of a load sampled every 10 s (held between samples, as the daemon
    /// sees it once a second), from t = 0 to the end of `loads`.
    fn busy_trace(loads: &[f64], threshold: f64) -> Vec<bool> {
        let mut w = CpuLoadWatch::default();
        (0..loads.len() * 10)
            .map(|t| w.sample(t as f64, loads[t / 10], threshold))
            .collect()
    }

    #[test]
    fn a_short_spike_of_other_programs_load_stops_nothing() {
        // One 10-s sample at 90 % over a threshold of 25 %: never busy.
        let t = busy_trace(&[5.0, 90.0, 5.0, 5.0, 5.0], 25.0);
        assert!(t.iter().all(|b| !b));
        // Two spikes apart: still never.
        let t = busy_trace(&[90.0, 5.0, 90.0, 5.0], 25.0);
        assert!(t.iter().all(|b| !b));
    }

    #[test]
    fn a_sustained_load_suspends_and_resumes_with_hysteresis() {
        // Over from t = 10 s: busy from 25 s (15 s sustained), not before.
        let t = busy_trace(
            &[
                5.0, 90.0, 90.0, 90.0, 22.0, 22.0, 22.0, 10.0, 10.0, 10.0, 10.0,
            ],
            25.0,
        );
        assert!(!t[24] && t[25], "{t:?}");
        // 22 % is under the threshold but inside the 5-point band: still busy.
        assert!(t[40..70].iter().all(|b| *b), "{t:?}");
        // Under the band from 70 s: busy until 20 s after the last look inside the band.
        assert!(t[70..89].iter().all(|b| *b), "{t:?}");
        assert!(t[90..].iter().all(|b| !b), "{t:?}");
        // The threshold at 0 turns it off at once.
        let mut w = CpuLoadWatch::default();
        for s in 0..30 {
            w.sample(f64::from(s), 90.0, 25.0);
        }
        assert!(!w.sample(30.0, 90.0, 0.0));
    }
}
