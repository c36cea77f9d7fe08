//! Global preferences: `global_prefs.xml` (network prefs from a project or account manager),
//! `global_prefs_override.xml` (local overrides) and the merged working prefs written into
//! scheduler requests, GUI RPC replies and `init_data.xml`.
//!
//! This module owns the parse rules of BOINC's `GLOBAL_PREFS` (venues, the booleans quirk, the
//! not-in-use fallback, clamps), the override merge, the writer in the official order, the
//! time-window check and the derived values (usable CPUs, allowed disk, RAM limits) as pure
//! functions. It does no I/O and reads no clock: `now` is a parameter.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::xml::{Parsed, Tag, Warning, XmlError, XmlReader, XmlWriter};

/// 1024³ bytes: BOINC's `GIGA`, the unit of the disk preferences.
pub const GIGA: f64 = 1024.0 * 1024.0 * 1024.0;

/// A daily window in local hours (fractional, 0–24) during which an activity is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TimeSpan {
    /// Start of the allowed window, local hours.
    pub start_hour: f64,
    /// End of the allowed window, local hours; below `start_hour` means it wraps midnight.
    pub end_hour: f64,
}

impl TimeSpan {
    /// Whether the activity is suspended at local `hour` (BOINC `TIME_SPAN::suspended`):
    /// equal bounds or 0–24 never suspend, 24–0 always does, a wrapping window suspends in
    /// `[end, start)`.
    pub fn suspended(&self, hour: f64) -> bool {
        let (s, e) = (self.start_hour, self.end_hour);
        if s == e || (s == 0.0 && e == 24.0) {
            return false;
        }
        if s == 24.0 && e == 0.0 {
            return true;
        }
        if s < e {
            hour < s || hour > e
        } else {
            hour >= e && hour < s
        }
    }
}

/// An activity's time windows: one for every day, optionally replaced per weekday.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TimePrefs {
    /// The window used on days without their own entry.
    pub window: TimeSpan,
    /// Per-weekday windows (index 0 = Sunday), from `<day_prefs>`; `None` = use `window`.
    pub week: [Option<TimeSpan>; 7],
}

impl TimePrefs {
    /// Whether the activity is suspended at `local_hour` (h + m/60 + s/3600) on `weekday`
    /// (0 = Sunday … 6 = Saturday), per BOINC `TIME_PREFS::suspended`.
    pub fn suspended_at(&self, local_hour: f64, weekday: u8) -> bool {
        match self.week.get(usize::from(weekday)).copied().flatten() {
            Some(day) => day.suspended(local_hour),
            None => self.window.suspended(local_hour),
        }
    }

    /// Records a weekday window; BOINC ignores windows whose start equals their end.
    fn set_day(&mut self, day: usize, span: TimeSpan) {
        if span.start_hour != span.end_hour {
            if let Some(slot) = self.week.get_mut(day) {
                *slot = Some(span);
            }
        }
    }
}

/// The global preferences in force (BOINC `GLOBAL_PREFS`). Percentages are kept as written
/// (BOINC stores some as fractions; the value is the same).
#[derive(Debug, Clone, PartialEq)]
pub struct GlobalPrefs {
    /// Version of the network prefs (Unix time); newer prefs from a project replace older.
    pub mod_time: f64,
    /// Master URL of the project that supplied the network prefs; its venue may be re-used.
    pub source_project: String,
    /// Scheduler URL that supplied the network prefs.
    pub source_scheduler: String,
    /// Set by an account manager: these prefs are specific to this host, not to propagate.
    pub host_specific: bool,
    /// Compute while on battery power (false: suspend on batteries).
    pub run_on_batteries: bool,
    /// Compute while the user is active (false: suspend computing and transfers).
    pub run_if_user_active: bool,
    /// Use GPUs while the user is active.
    pub run_gpu_if_user_active: bool,
    /// Minutes without input after which the user counts as idle.
    pub idle_time_to_run: f64,
    /// Suspend if there was no input for this many minutes (0 = off).
    pub suspend_if_no_recent_input: f64,
    /// Suspend when non-BOINC CPU load exceeds this % (0 = off).
    pub suspend_cpu_usage: f64,
    /// Same as `suspend_cpu_usage`, while the user is not active.
    pub niu_suspend_cpu_usage: f64,
    /// When computing is allowed.
    pub cpu_times: TimePrefs,
    /// When network transfers are allowed.
    pub net_times: TimePrefs,
    /// Keep preempted apps in memory (suspend them instead of quitting).
    pub leave_apps_in_memory: bool,
    /// Dial-up: ask before connecting.
    pub confirm_before_connecting: bool,
    /// Dial-up: hang up when network activity ends.
    pub hangup_if_dialed: bool,
    /// Accept image downloads without size/checksum check.
    pub dont_verify_images: bool,
    /// Minimum work buffer, days (≥ 0).
    pub work_buf_min_days: f64,
    /// Extra buffer above the minimum, days (≥ 0).
    pub work_buf_additional_days: f64,
    /// % of CPUs to use, 0–100; 0 means all.
    pub max_ncpus_pct: f64,
    /// % of CPUs to use while the user is not active (1–100).
    pub niu_max_ncpus_pct: f64,
    /// Deprecated absolute CPU count (≥ 0); kept for writing back, not used for scheduling.
    pub max_cpus: i32,
    /// CPU scheduling time slice, minutes.
    pub cpu_scheduling_period_minutes: f64,
    /// Minimum seconds between app checkpoints (given to apps as `checkpoint_period`).
    pub disk_interval: f64,
    /// Most disk BOINC may use, GB of 1024³ bytes (0 = no limit).
    pub disk_max_used_gb: f64,
    /// Most of the total disk BOINC may use, % (0 = no limit).
    pub disk_max_used_pct: f64,
    /// Disk to leave free, GB.
    pub disk_min_free_gb: f64,
    /// Most swap apps may use, %.
    pub vm_max_used_pct: f64,
    /// RAM apps may use while the user is active, %.
    pub ram_max_used_busy_pct: f64,
    /// RAM apps may use while the user is idle, %.
    pub ram_max_used_idle_pct: f64,
    /// Upload bandwidth cap, bytes/s (0 = none).
    pub max_bytes_sec_up: f64,
    /// Download bandwidth cap, bytes/s (0 = none).
    pub max_bytes_sec_down: f64,
    /// CPU throttling duty cycle, % (0 < x ≤ 100).
    pub cpu_usage_limit: f64,
    /// CPU throttling while the user is not active, %.
    pub niu_cpu_usage_limit: f64,
    /// Transfer quota, MB per period (0 = off).
    pub daily_xfer_limit_mb: f64,
    /// Quota period, days (0 = off).
    pub daily_xfer_period_days: i32,
    /// Transfer files only on Wi-Fi (meaningful on Android only).
    pub network_wifi_only: bool,
    /// Android: minimum battery charge to compute, %.
    pub battery_charge_min_pct: f64,
    /// Android: maximum battery temperature to compute, °C.
    pub battery_max_temperature: f64,
    /// An override file was applied (written so that GUIs know).
    pub override_file_present: bool,
    /// Ferrite extension `<ferrite_cpu_temp_limit>`: the CPU package temperature Ferrite
    /// holds by lowering the apps' CPU share, °C (0 = no limit).
    pub ferrite_cpu_temp_limit: f64,
    /// Ferrite extension `<ferrite_gpu_temp_limit>`: the GPU temperature over which GPU tasks
    /// are suspended, °C (0 = no limit).
    pub ferrite_gpu_temp_limit: f64,
}

impl Default for GlobalPrefs {
    fn default() -> Self {
        Self {
            mod_time: 0.0,
            source_project: String::new(),
            source_scheduler: String::new(),
            host_specific: false,
            run_on_batteries: false,
            run_if_user_active: true,
            run_gpu_if_user_active: false,
            idle_time_to_run: 3.0,
            suspend_if_no_recent_input: 0.0,
            suspend_cpu_usage: 25.0,
            niu_suspend_cpu_usage: 50.0,
            cpu_times: TimePrefs::default(),
            net_times: TimePrefs::default(),
            leave_apps_in_memory: false,
            confirm_before_connecting: true,
            hangup_if_dialed: false,
            dont_verify_images: false,
            work_buf_min_days: 0.1,
            work_buf_additional_days: 0.5,
            max_ncpus_pct: 0.0,
            niu_max_ncpus_pct: 100.0,
            max_cpus: 0,
            cpu_scheduling_period_minutes: 60.0,
            disk_interval: 60.0,
            disk_max_used_gb: 0.0,
            disk_max_used_pct: 90.0,
            disk_min_free_gb: 0.1,
            vm_max_used_pct: 75.0,
            ram_max_used_busy_pct: 50.0,
            ram_max_used_idle_pct: 90.0,
            max_bytes_sec_up: 0.0,
            max_bytes_sec_down: 0.0,
            cpu_usage_limit: 100.0,
            niu_cpu_usage_limit: 100.0,
            daily_xfer_limit_mb: 0.0,
            daily_xfer_period_days: 0,
            network_wifi_only: false,
            battery_charge_min_pct: 90.0,
            battery_max_temperature: 40.0,
            override_file_present: false,
            ferrite_cpu_temp_limit: 0.0,
            ferrite_gpu_temp_limit: 0.0,
        }
    }
}

/// Which preference elements a parse set (BOINC `GLOBAL_PREFS_MASK`), by element name.
pub type PrefsMask = BTreeSet<&'static str>;

/// What a parse of a prefs document found besides the values.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PrefsParse {
    /// A `<venue>` matching the host venue was found and used.
    pub found_venue: bool,
    /// Elements given in the document (in the venue used, if any).
    pub present: PrefsMask,
    /// `<host_venue>` given at top level (override files use it to force the venue).
    pub host_venue: Option<String>,
}

/// How a document is parsed into prefs.
#[derive(Debug, Clone, Copy)]
struct Mode<'v> {
    /// The host venue whose `<venue>` block wins.
    venue: &'v str,
    /// Clamp `mod_time` to this.
    now: f64,
}

impl GlobalPrefs {
    /// Resets the values that live inside venues to their defaults (BOINC `defaults()`:
    /// `source_*`, `mod_time`, `host_specific` are kept).
    fn reset_venue_values(&mut self) {
        let keep = (
            std::mem::take(&mut self.source_project),
            std::mem::take(&mut self.source_scheduler),
            self.mod_time,
            self.host_specific,
        );
        *self = Self {
            source_project: keep.0,
            source_scheduler: keep.1,
            mod_time: keep.2,
            host_specific: keep.3,
            ..Self::default()
        };
    }

    /// The booleans quirk of a full parse: booleans a prefs file omits are false (and
    /// `network_wifi_only` true), not their defaults.
    fn init_bools(&mut self) {
        self.run_on_batteries = false;
        self.run_if_user_active = false;
        self.leave_apps_in_memory = false;
        self.confirm_before_connecting = false;
        self.hangup_if_dialed = false;
        self.dont_verify_images = false;
        self.network_wifi_only = true;
    }

    /// Reads a `<global_preferences>` element as a full parse from defaults (booleans quirk
    /// included) with no host venue and no `mod_time` clamp: for prefs embedded in other
    /// documents (`init_data.xml`, GUI RPC replies), which are written by [`write`](Self::write).
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut p = Self::default();
        p.init_bools();
        let mode = Mode {
            venue: "",
            now: f64::INFINITY,
        };
        parse_body(r, tag, mode, &mut p, false)?;
        Ok(p)
    }

    /// Parses a whole prefs document as [`read`](Self::read) does.
    pub fn parse(text: &str, file: &str) -> Result<Parsed<Self>, XmlError> {
        crate::xml::parse_document(text, file, "global_preferences", Self::read)
    }

    /// Parses `global_prefs.xml` (network prefs) the way BOINC's full parse does: from
    /// defaults, booleans quirk, the `<venue>` named `host_venue` wins, `mod_time` clamped to
    /// `now`, then the not-in-use fallback.
    pub fn parse_network(
        text: &str,
        file: &str,
        host_venue: &str,
        now: f64,
    ) -> Result<Parsed<(Self, PrefsParse)>, XmlError> {
        let mut r = XmlReader::new(text, file);
        let root = r.root("global_preferences")?;
        let mut p = Self::default();
        p.init_bools();
        let mode = Mode {
            venue: host_venue,
            now,
        };
        let info = parse_body(&mut r, &root, mode, &mut p, false)?;
        let warnings = r.finish()?;
        Ok(Parsed {
            value: (p, info),
            warnings,
        })
    }

    /// Applies `global_prefs_override.xml` on top of `self`: only the elements present change
    /// values; venues inside the file are ignored; niu_* values the file does not give are
    /// reset to their in-use counterparts (as BOINC does). On error `self` is unchanged.
    pub fn apply_override(
        &mut self,
        text: &str,
        file: &str,
        now: f64,
    ) -> Result<Parsed<PrefsParse>, XmlError> {
        let mut r = XmlReader::new(text, file);
        let root = r.root("global_preferences")?;
        let mut p = self.clone();
        let mode = Mode { venue: "", now };
        let info = parse_body(&mut r, &root, mode, &mut p, true)?;
        let warnings = r.finish()?;
        p.override_file_present = true;
        *self = p;
        Ok(Parsed {
            value: info,
            warnings,
        })
    }

    /// Writes `<global_preferences>` in BOINC's order and layout (three-space indentation,
    /// doubles `%f`, booleans 0/1, `<day_prefs>` hours `%.02f`).
    pub fn write(&self, w: &mut XmlWriter) {
        w.raw(&self.to_xml());
    }

    /// The `<global_preferences>` element as BOINC writes it.
    pub fn to_xml(&self) -> String {
        let mut s = String::with_capacity(2048);
        s.push_str("<global_preferences>\n");
        let esc = |t: &str| quick_xml::escape::partial_escape(t).into_owned();
        let _ = writeln!(
            s,
            "   <source_project>{}</source_project>",
            esc(&self.source_project)
        );
        if !self.source_scheduler.is_empty() {
            // Not in BOINC's writer, but kept so a rewritten global_prefs.xml keeps its source.
            let _ = writeln!(
                s,
                "   <source_scheduler>{}</source_scheduler>",
                esc(&self.source_scheduler)
            );
        }
        let f = |s: &mut String, name: &str, v: f64| {
            let _ = writeln!(s, "   <{name}>{v:.6}</{name}>");
        };
        let b = |s: &mut String, name: &str, v: bool| {
            let _ = writeln!(s, "   <{name}>{}</{name}>", u8::from(v));
        };
        f(&mut s, "mod_time", self.mod_time);
        f(
            &mut s,
            "battery_charge_min_pct",
            self.battery_charge_min_pct,
        );
        f(
            &mut s,
            "battery_max_temperature",
            self.battery_max_temperature,
        );
        b(&mut s, "run_on_batteries", self.run_on_batteries);
        b(&mut s, "run_if_user_active", self.run_if_user_active);
        b(
            &mut s,
            "run_gpu_if_user_active",
            self.run_gpu_if_user_active,
        );
        f(
            &mut s,
            "suspend_if_no_recent_input",
            self.suspend_if_no_recent_input,
        );
        f(&mut s, "suspend_cpu_usage", self.suspend_cpu_usage);
        f(&mut s, "start_hour", self.cpu_times.window.start_hour);
        f(&mut s, "end_hour", self.cpu_times.window.end_hour);
        f(&mut s, "net_start_hour", self.net_times.window.start_hour);
        f(&mut s, "net_end_hour", self.net_times.window.end_hour);
        b(&mut s, "leave_apps_in_memory", self.leave_apps_in_memory);
        b(
            &mut s,
            "confirm_before_connecting",
            self.confirm_before_connecting,
        );
        b(&mut s, "hangup_if_dialed", self.hangup_if_dialed);
        b(&mut s, "dont_verify_images", self.dont_verify_images);
        f(&mut s, "work_buf_min_days", self.work_buf_min_days);
        f(
            &mut s,
            "work_buf_additional_days",
            self.work_buf_additional_days,
        );
        f(&mut s, "max_ncpus_pct", self.max_ncpus_pct);
        f(&mut s, "niu_max_ncpus_pct", self.niu_max_ncpus_pct);
        f(&mut s, "niu_cpu_usage_limit", self.niu_cpu_usage_limit);
        f(&mut s, "niu_suspend_cpu_usage", self.niu_suspend_cpu_usage);
        f(
            &mut s,
            "cpu_scheduling_period_minutes",
            self.cpu_scheduling_period_minutes,
        );
        f(&mut s, "disk_interval", self.disk_interval);
        f(&mut s, "disk_max_used_gb", self.disk_max_used_gb);
        f(&mut s, "disk_max_used_pct", self.disk_max_used_pct);
        f(&mut s, "disk_min_free_gb", self.disk_min_free_gb);
        f(&mut s, "vm_max_used_pct", self.vm_max_used_pct);
        f(&mut s, "ram_max_used_busy_pct", self.ram_max_used_busy_pct);
        f(&mut s, "ram_max_used_idle_pct", self.ram_max_used_idle_pct);
        f(&mut s, "idle_time_to_run", self.idle_time_to_run);
        f(&mut s, "max_bytes_sec_up", self.max_bytes_sec_up);
        f(&mut s, "max_bytes_sec_down", self.max_bytes_sec_down);
        f(&mut s, "cpu_usage_limit", self.cpu_usage_limit);
        f(&mut s, "daily_xfer_limit_mb", self.daily_xfer_limit_mb);
        let _ = writeln!(
            s,
            "   <daily_xfer_period_days>{}</daily_xfer_period_days>",
            self.daily_xfer_period_days
        );
        b(&mut s, "override_file_present", self.override_file_present);
        b(&mut s, "network_wifi_only", self.network_wifi_only);
        if self.host_specific {
            b(&mut s, "host_specific", true);
        }
        if self.max_cpus != 0 {
            let _ = writeln!(s, "   <max_cpus>{}</max_cpus>", self.max_cpus);
        }
        // Ferrite's extensions, only when set: the official client's documents stay as they are.
        for (name, v) in [
            ("ferrite_cpu_temp_limit", self.ferrite_cpu_temp_limit),
            ("ferrite_gpu_temp_limit", self.ferrite_gpu_temp_limit),
        ] {
            if v > 0.0 {
                f(&mut s, name, v);
            }
        }
        for day in 0..7 {
            let cpu = self.cpu_times.week[day];
            let net = self.net_times.week[day];
            if cpu.is_none() && net.is_none() {
                continue;
            }
            s.push_str("   <day_prefs>\n");
            let _ = writeln!(s, "      <day_of_week>{day}</day_of_week>");
            if let Some(c) = cpu {
                let _ = writeln!(s, "      <start_hour>{:.2}</start_hour>", c.start_hour);
                let _ = writeln!(s, "      <end_hour>{:.2}</end_hour>", c.end_hour);
            }
            if let Some(n) = net {
                let _ = writeln!(
                    s,
                    "      <net_start_hour>{:.2}</net_start_hour>",
                    n.start_hour
                );
                let _ = writeln!(s, "      <net_end_hour>{:.2}</net_end_hour>", n.end_hour);
            }
            s.push_str("   </day_prefs>\n");
        }
        s.push_str("</global_preferences>\n");
        s
    }

    /// Element names in the order BOINC writes an override file (`write_subset`).
    pub const OVERRIDE_ORDER: &'static [&'static str] = &[
        "run_on_batteries",
        "run_if_user_active",
        "run_gpu_if_user_active",
        "idle_time_to_run",
        "suspend_if_no_recent_input",
        "suspend_cpu_usage",
        "start_hour",
        "end_hour",
        "net_start_hour",
        "net_end_hour",
        "leave_apps_in_memory",
        "battery_charge_min_pct",
        "battery_max_temperature",
        "confirm_before_connecting",
        "hangup_if_dialed",
        "dont_verify_images",
        "work_buf_min_days",
        "work_buf_additional_days",
        "max_ncpus_pct",
        "niu_max_ncpus_pct",
        "niu_cpu_usage_limit",
        "niu_suspend_cpu_usage",
        "max_cpus",
        "cpu_scheduling_period_minutes",
        "disk_interval",
        "disk_max_used_gb",
        "disk_max_used_pct",
        "disk_min_free_gb",
        "vm_max_used_pct",
        "ram_max_used_busy_pct",
        "ram_max_used_idle_pct",
        "max_bytes_sec_up",
        "max_bytes_sec_down",
        "cpu_usage_limit",
        "daily_xfer_limit_mb",
        "daily_xfer_period_days",
        "network_wifi_only",
        "ferrite_cpu_temp_limit",
        "ferrite_gpu_temp_limit",
    ];

    /// The text BOINC writes for element `name` (`%f` doubles, 0/1 booleans), if it is a
    /// preference element.
    pub fn element_text(&self, name: &str) -> Option<String> {
        let f = |v: f64| Some(format!("{v:.6}"));
        let b = |v: bool| Some(u8::from(v).to_string());
        match name {
            "run_on_batteries" => b(self.run_on_batteries),
            "run_if_user_active" => b(self.run_if_user_active),
            "run_gpu_if_user_active" => b(self.run_gpu_if_user_active),
            "idle_time_to_run" => f(self.idle_time_to_run),
            "suspend_if_no_recent_input" => f(self.suspend_if_no_recent_input),
            "suspend_cpu_usage" => f(self.suspend_cpu_usage),
            "start_hour" => f(self.cpu_times.window.start_hour),
            "end_hour" => f(self.cpu_times.window.end_hour),
            "net_start_hour" => f(self.net_times.window.start_hour),
            "net_end_hour" => f(self.net_times.window.end_hour),
            "leave_apps_in_memory" => b(self.leave_apps_in_memory),
            "battery_charge_min_pct" => f(self.battery_charge_min_pct),
            "battery_max_temperature" => f(self.battery_max_temperature),
            "confirm_before_connecting" => b(self.confirm_before_connecting),
            "hangup_if_dialed" => b(self.hangup_if_dialed),
            "dont_verify_images" => b(self.dont_verify_images),
            "work_buf_min_days" => f(self.work_buf_min_days),
            "work_buf_additional_days" => f(self.work_buf_additional_days),
            "max_ncpus_pct" => f(self.max_ncpus_pct),
            "niu_max_ncpus_pct" => f(self.niu_max_ncpus_pct),
            "niu_cpu_usage_limit" => f(self.niu_cpu_usage_limit),
            "niu_suspend_cpu_usage" => f(self.niu_suspend_cpu_usage),
            "max_cpus" => Some(self.max_cpus.to_string()),
            "cpu_scheduling_period_minutes" => f(self.cpu_scheduling_period_minutes),
            "disk_interval" => f(self.disk_interval),
            "disk_max_used_gb" => f(self.disk_max_used_gb),
            "disk_max_used_pct" => f(self.disk_max_used_pct),
            "disk_min_free_gb" => f(self.disk_min_free_gb),
            "vm_max_used_pct" => f(self.vm_max_used_pct),
            "ram_max_used_busy_pct" => f(self.ram_max_used_busy_pct),
            "ram_max_used_idle_pct" => f(self.ram_max_used_idle_pct),
            "max_bytes_sec_up" => f(self.max_bytes_sec_up),
            "max_bytes_sec_down" => f(self.max_bytes_sec_down),
            "cpu_usage_limit" => f(self.cpu_usage_limit),
            "daily_xfer_limit_mb" => f(self.daily_xfer_limit_mb),
            "daily_xfer_period_days" => Some(self.daily_xfer_period_days.to_string()),
            "network_wifi_only" => b(self.network_wifi_only),
            "ferrite_cpu_temp_limit" => f(self.ferrite_cpu_temp_limit),
            "ferrite_gpu_temp_limit" => f(self.ferrite_gpu_temp_limit),
            _ => None,
        }
    }

    /// An override file holding only the elements in `set` (BOINC `write_subset`), in
    /// BOINC's order; empty when `set` names no preference.
    pub fn to_override_xml(&self, set: &PrefsMask) -> String {
        let mut s = String::new();
        for name in Self::OVERRIDE_ORDER.iter().filter(|n| set.contains(*n)) {
            if let Some(v) = self.element_text(name) {
                let _ = writeln!(s, "   <{name}>{v}</{name}>");
            }
        }
        if s.is_empty() {
            return s;
        }
        format!("<global_preferences>\n{s}</global_preferences>\n")
    }

    // ----- derived values (pure) -----

    /// The CPU throttling limit in force, % (BOINC `current_cpu_usage_limit`): the not-in-use
    /// value when the user is idle; values below 0.005 or above 99.99 mean 100.
    pub fn effective_cpu_usage_limit(&self, user_active: bool) -> f64 {
        let mut x = self.cpu_usage_limit;
        if !user_active && self.niu_cpu_usage_limit >= 0.0 {
            x = self.niu_cpu_usage_limit;
        }
        if !(0.005..=99.99).contains(&x) {
            100.0
        } else {
            x
        }
    }

    /// The non-BOINC CPU load above which computing is suspended, % (0 = never).
    pub fn effective_suspend_cpu_usage(&self, user_active: bool) -> f64 {
        if user_active {
            self.suspend_cpu_usage
        } else {
            self.niu_suspend_cpu_usage
        }
    }

    /// CPUs the client may use (BOINC `set_n_usable_cpus`): `cc_ncpus` (cc_config `<ncpus>`)
    /// when positive, else `detected`; scaled by the (not-in-use) CPU % when non-zero,
    /// rounded down; at least 1.
    pub fn usable_cpus(&self, detected: u32, cc_ncpus: i32, user_active: bool) -> u32 {
        let base = if cc_ncpus > 0 {
            f64::from(cc_ncpus)
        } else {
            f64::from(detected)
        };
        let mut pct = self.max_ncpus_pct;
        if !user_active && self.niu_max_ncpus_pct >= 0.0 {
            pct = self.niu_max_ncpus_pct;
        }
        let n = if pct != 0.0 {
            (base * pct / 100.0).floor()
        } else {
            base
        };
        if n < 1.0 {
            1
        } else {
            n as u32
        }
    }

    /// Bytes of disk BOINC may use (BOINC `allowed_disk_usage`): the least of what keeps
    /// `disk_min_free_gb` free, `disk_max_used_pct` of `d_total` and `disk_max_used_gb`
    /// (each limit only if set), never negative. `boinc_usage` is what BOINC already uses.
    pub fn allowed_disk_usage(&self, boinc_usage: f64, d_total: f64, d_free: f64) -> f64 {
        let mut limit = boinc_usage + d_free - self.disk_min_free_gb * GIGA;
        if self.disk_max_used_pct != 0.0 {
            limit = limit.min(d_total * self.disk_max_used_pct / 100.0);
        }
        if self.disk_max_used_gb != 0.0 {
            limit = limit.min(self.disk_max_used_gb * GIGA);
        }
        limit.max(0.0)
    }

    /// Bytes of RAM apps may use, given the host's `m_nbytes`.
    pub fn available_ram(&self, m_nbytes: f64, user_active: bool) -> f64 {
        let pct = if user_active {
            self.ram_max_used_busy_pct
        } else {
            self.ram_max_used_idle_pct
        };
        m_nbytes * pct / 100.0
    }

    /// Bytes of swap apps may use, given the host's `m_swap`.
    pub fn allowed_swap(&self, m_swap: f64) -> f64 {
        m_swap * self.vm_max_used_pct / 100.0
    }

    /// Whether computing is outside its time window at `local_hour` on `weekday`.
    pub fn cpu_suspended_at(&self, local_hour: f64, weekday: u8) -> bool {
        self.cpu_times.suspended_at(local_hour, weekday)
    }

    /// Whether network activity is outside its time window at `local_hour` on `weekday`.
    pub fn net_suspended_at(&self, local_hour: f64, weekday: u8) -> bool {
        self.net_times.suspended_at(local_hour, weekday)
    }
}

/// The local hour (h + m/60 + s/3600) and weekday (0 = Sunday) of a Unix time, given the
/// offset of local time from UTC in seconds (east positive, as in `<timezone>`).
pub fn local_hour_and_weekday(unix_time: f64, utc_offset_secs: i64) -> (f64, u8) {
    let t = unix_time.floor() as i64 + utc_offset_secs;
    let secs_of_day = t.rem_euclid(86_400);
    let days = t.div_euclid(86_400);
    // 1970-01-01 was a Thursday (4).
    let weekday = (days + 4).rem_euclid(7) as u8;
    (secs_of_day as f64 / 3600.0, weekday)
}

/// The text of `global_prefs.xml` as BOINC saves prefs received from a scheduler or account
/// manager: `body` (the contents of the received `<global_preferences>`) tagged with the
/// project and scheduler URLs unless it already names a `<source_project>`.
pub fn network_prefs_file(body: &str, master_url: &str, scheduler_url: &str) -> String {
    let mut s = String::with_capacity(body.len() + 200);
    s.push_str("<global_preferences>\n");
    if !body.contains("<source_project>") {
        let esc = |t: &str| quick_xml::escape::partial_escape(t).into_owned();
        let _ = writeln!(
            s,
            "    <source_project>{}</source_project>",
            esc(master_url)
        );
        let _ = writeln!(
            s,
            "    <source_scheduler>{}</source_scheduler>",
            esc(scheduler_url)
        );
    }
    s.push_str(body);
    s.push_str("</global_preferences>\n");
    s
}

/// Where the network prefs came from when building the working prefs.
#[derive(Debug, Clone, PartialEq)]
pub enum NetworkPrefsStatus {
    /// There is no `global_prefs.xml`: defaults are used.
    Missing,
    /// `global_prefs.xml` was parsed.
    Parsed {
        /// A venue matching the host venue was used.
        found_venue: bool,
    },
    /// `global_prefs.xml` could not be parsed: defaults are used and the file should be
    /// deleted, as BOINC does.
    Unparsable(XmlError),
}

/// What happened to the override file when building the working prefs.
#[derive(Debug, Clone, PartialEq)]
pub enum OverrideStatus {
    /// No override file.
    Missing,
    /// Applied; the elements it set.
    Applied(PrefsMask),
    /// Not XML: ignored (the prefs are the network prefs alone).
    Unparsable(XmlError),
}

/// The merged prefs and how they were obtained (BOINC `read_global_prefs`).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkingPrefs {
    /// The prefs in force.
    pub prefs: GlobalPrefs,
    /// The host venue used to pick the network prefs' `<venue>`.
    pub host_venue: String,
    /// The venue was forced by the override file's `<host_venue>`.
    pub venue_from_override: bool,
    /// Outcome for `global_prefs.xml`.
    pub network: NetworkPrefsStatus,
    /// Outcome for `global_prefs_override.xml`.
    pub override_file: OverrideStatus,
    /// Warnings from both files.
    pub warnings: Vec<Warning>,
}

/// The top-level `<host_venue>` of an override file, if any and non-empty. Unparsable text
/// gives `None`.
pub fn override_host_venue(text: &str) -> Option<String> {
    let mut r = XmlReader::new(text, "global_prefs_override.xml");
    let root = r.root("global_preferences").ok()?;
    if root.is_empty() {
        return None;
    }
    while let Ok(Some(tag)) = r.next_child() {
        if tag.name() == "host_venue" {
            let v = r.string(&tag).ok()?;
            return (!v.is_empty()).then_some(v);
        }
        r.skip(&tag).ok()?;
    }
    None
}

/// Builds the working prefs from the texts of `global_prefs.xml` and
/// `global_prefs_override.xml` (each `None` when the file does not exist), following
/// BOINC's `read_global_prefs`:
/// 1. a non-empty `<host_venue>` in the override file forces the host venue, otherwise
///    `current_venue` is used;
/// 2. the network prefs are parsed from defaults with that venue; if the venue was not
///    forced and `project_venue(source_project)` names another venue, they are parsed again
///    with it;
/// 3. the override file is applied on top.
pub fn working_prefs(
    network_text: Option<&str>,
    override_text: Option<&str>,
    current_venue: &str,
    project_venue: &dyn Fn(&str) -> Option<String>,
    now: f64,
) -> WorkingPrefs {
    let mut warnings = Vec::new();
    let forced = override_text.and_then(override_host_venue);
    let venue_from_override = forced.is_some();
    let mut host_venue = forced.unwrap_or_else(|| current_venue.to_owned());

    let (mut prefs, network) = match network_text {
        None => (GlobalPrefs::default(), NetworkPrefsStatus::Missing),
        Some(text) => {
            match GlobalPrefs::parse_network(text, "global_prefs.xml", &host_venue, now) {
                Err(e) => (GlobalPrefs::default(), NetworkPrefsStatus::Unparsable(e)),
                Ok(mut parsed) => {
                    if !venue_from_override {
                        let pv = project_venue(&parsed.value.0.source_project);
                        if let Some(pv) = pv.filter(|v| *v != host_venue) {
                            host_venue = pv;
                            if let Ok(again) = GlobalPrefs::parse_network(
                                text,
                                "global_prefs.xml",
                                &host_venue,
                                now,
                            ) {
                                parsed = again;
                            }
                        }
                    }
                    warnings.extend(parsed.warnings);
                    let (p, info) = parsed.value;
                    (
                        p,
                        NetworkPrefsStatus::Parsed {
                            found_venue: info.found_venue,
                        },
                    )
                }
            }
        }
    };

    prefs.override_file_present = false;
    let override_file = match override_text {
        None => OverrideStatus::Missing,
        Some(text) => match prefs.apply_override(text, "global_prefs_override.xml", now) {
            Ok(parsed) => {
                warnings.extend(parsed.warnings);
                OverrideStatus::Applied(parsed.value.present)
            }
            Err(e) => OverrideStatus::Unparsable(e),
        },
    };

    WorkingPrefs {
        prefs,
        host_venue,
        venue_from_override,
        network,
        override_file,
        warnings,
    }
}

/// Parses the children of `<global_preferences>` into `p`. `override_mode` skips the venue
/// reset semantics' "from defaults" part (the caller decides the start values) and accepts
/// `<host_venue>`.
fn parse_body(
    r: &mut XmlReader<'_>,
    root: &Tag<'_>,
    mode: Mode<'_>,
    p: &mut GlobalPrefs,
    override_mode: bool,
) -> Result<PrefsParse, XmlError> {
    let mut info = PrefsParse::default();
    if root.is_empty() {
        finish_niu(p, &info.present);
        return Ok(info);
    }
    while let Some(tag) = r.next_child()? {
        match tag.name() {
            "source_project" => p.source_project = r.string(&tag)?,
            "source_scheduler" => p.source_scheduler = r.string(&tag)?,
            "mod_time" => {
                if let Some(v) = r.num::<f64>(&tag)? {
                    p.mod_time = if v > mode.now {
                        r.warn(
                            &tag,
                            format!("{v} is in the future; clamped to now ({})", mode.now),
                        );
                        mode.now
                    } else {
                        v
                    };
                }
            }
            "venue" => {
                let name = tag.attr("name").unwrap_or_default();
                if !override_mode && name == mode.venue {
                    // The matching venue: start over from defaults and use its contents.
                    p.reset_venue_values();
                    p.init_bools();
                    info.present.clear();
                    info.found_venue = true;
                    if !tag.is_empty() {
                        while let Some(child) = r.next_child()? {
                            match child.name() {
                                "source_project" => p.source_project = r.string(&child)?,
                                "source_scheduler" => p.source_scheduler = r.string(&child)?,
                                "venue" => r.unknown(&child, "venue")?,
                                _ => pref_element(r, &child, p, &mut info.present, "venue")?,
                            }
                        }
                    }
                } else {
                    // Another venue; its mod_time/source still count, as in BOINC.
                    venue_skip(r, &tag, p, mode)?;
                }
            }
            "host_venue" if override_mode => info.host_venue = Some(r.string(&tag)?),
            _ if info.found_venue => {
                // Top-level elements after the matching venue are ignored.
                r.skip(&tag)?;
            }
            _ => pref_element(r, &tag, p, &mut info.present, "global_preferences")?,
        }
    }
    finish_niu(p, &info.present);
    Ok(info)
}

/// Skips a non-matching venue, still taking `source_*`/`mod_time` from it as BOINC does.
fn venue_skip(
    r: &mut XmlReader<'_>,
    tag: &Tag<'_>,
    p: &mut GlobalPrefs,
    mode: Mode<'_>,
) -> Result<(), XmlError> {
    if tag.is_empty() {
        return Ok(());
    }
    while let Some(child) = r.next_child()? {
        match child.name() {
            "source_project" => p.source_project = r.string(&child)?,
            "source_scheduler" => p.source_scheduler = r.string(&child)?,
            "mod_time" => {
                if let Some(v) = r.num::<f64>(&child)? {
                    p.mod_time = v.min(mode.now);
                }
            }
            _ => r.skip(&child)?,
        }
    }
    Ok(())
}

/// The not-in-use fallback: niu_* values not given in this document follow their in-use
/// counterparts.
fn finish_niu(p: &mut GlobalPrefs, present: &PrefsMask) {
    if !present.contains("niu_max_ncpus_pct") {
        // BOINC copies 0 ("all CPUs") here, which its own parser reads back as 100; both mean
        // all CPUs, and 100 keeps write-then-parse exact.
        p.niu_max_ncpus_pct = if p.max_ncpus_pct == 0.0 {
            100.0
        } else {
            p.max_ncpus_pct
        };
    }
    if !present.contains("niu_cpu_usage_limit") {
        p.niu_cpu_usage_limit = p.cpu_usage_limit;
    }
    if !present.contains("niu_suspend_cpu_usage") {
        p.niu_suspend_cpu_usage = p.suspend_cpu_usage;
    }
}

/// Reads a number, warning about (and clamping) values below `min` or above `max`.
fn num_in<'a>(
    r: &mut XmlReader<'a>,
    tag: &Tag<'a>,
    min: f64,
    max: f64,
) -> Result<Option<f64>, XmlError> {
    r.num_clamped::<f64>(tag, min, max)
}

/// Reads one preference element (anything but venue and source tags).
fn pref_element<'a>(
    r: &mut XmlReader<'a>,
    tag: &Tag<'a>,
    p: &mut GlobalPrefs,
    present: &mut PrefsMask,
    parent: &str,
) -> Result<(), XmlError> {
    macro_rules! dbl {
        ($name:literal, $field:expr) => {{
            if let Some(v) = r.num::<f64>(tag)? {
                $field = v;
                present.insert($name);
            }
        }};
    }
    macro_rules! dbl_min0 {
        ($name:literal, $field:expr) => {{
            if let Some(v) = num_in(r, tag, 0.0, f64::MAX)? {
                $field = v;
                present.insert($name);
            }
        }};
    }
    macro_rules! boolean {
        ($name:literal, $field:expr) => {{
            $field = r.flag(tag)?;
            present.insert($name);
        }};
    }
    match tag.name() {
        "battery_charge_min_pct" => dbl!("battery_charge_min_pct", p.battery_charge_min_pct),
        "battery_max_temperature" => dbl!("battery_max_temperature", p.battery_max_temperature),
        "run_on_batteries" => boolean!("run_on_batteries", p.run_on_batteries),
        "run_if_user_active" => boolean!("run_if_user_active", p.run_if_user_active),
        "run_gpu_if_user_active" => boolean!("run_gpu_if_user_active", p.run_gpu_if_user_active),
        "idle_time_to_run" => dbl!("idle_time_to_run", p.idle_time_to_run),
        "suspend_if_no_recent_input" => {
            dbl!("suspend_if_no_recent_input", p.suspend_if_no_recent_input)
        }
        "suspend_cpu_usage" => dbl!("suspend_cpu_usage", p.suspend_cpu_usage),
        "niu_suspend_cpu_usage" => dbl!("niu_suspend_cpu_usage", p.niu_suspend_cpu_usage),
        "start_hour" => dbl!("start_hour", p.cpu_times.window.start_hour),
        "end_hour" => dbl!("end_hour", p.cpu_times.window.end_hour),
        "net_start_hour" => dbl!("net_start_hour", p.net_times.window.start_hour),
        "net_end_hour" => dbl!("net_end_hour", p.net_times.window.end_hour),
        "day_prefs" => {
            day_prefs(r, tag, p)?;
        }
        "leave_apps_in_memory" => boolean!("leave_apps_in_memory", p.leave_apps_in_memory),
        "confirm_before_connecting" => {
            boolean!("confirm_before_connecting", p.confirm_before_connecting)
        }
        "hangup_if_dialed" => boolean!("hangup_if_dialed", p.hangup_if_dialed),
        "dont_verify_images" => boolean!("dont_verify_images", p.dont_verify_images),
        "work_buf_min_days" => dbl_min0!("work_buf_min_days", p.work_buf_min_days),
        "work_buf_additional_days" => {
            dbl_min0!("work_buf_additional_days", p.work_buf_additional_days)
        }
        "max_ncpus_pct" => {
            if let Some(v) = num_in(r, tag, 0.0, 100.0)? {
                p.max_ncpus_pct = v;
                present.insert("max_ncpus_pct");
            }
        }
        "niu_max_ncpus_pct" => {
            if let Some(v) = r.num::<f64>(tag)? {
                p.niu_max_ncpus_pct = pct_or_100(r, tag, v);
                present.insert("niu_max_ncpus_pct");
            }
        }
        "max_cpus" => {
            if let Some(v) = r.num_clamped::<i32>(tag, 0, i32::MAX)? {
                p.max_cpus = v;
                present.insert("max_cpus");
            }
        }
        "disk_interval" => dbl_min0!("disk_interval", p.disk_interval),
        "cpu_scheduling_period_minutes" => {
            if let Some(v) = r.num::<f64>(tag)? {
                p.cpu_scheduling_period_minutes = if v < 0.0001 {
                    r.warn(tag, format!("{v} is too small; 60 used"));
                    60.0
                } else {
                    v
                };
                present.insert("cpu_scheduling_period_minutes");
            }
        }
        "disk_max_used_gb" => dbl!("disk_max_used_gb", p.disk_max_used_gb),
        "disk_max_used_pct" => dbl!("disk_max_used_pct", p.disk_max_used_pct),
        "disk_min_free_gb" => dbl!("disk_min_free_gb", p.disk_min_free_gb),
        "vm_max_used_pct" => dbl!("vm_max_used_pct", p.vm_max_used_pct),
        "ram_max_used_busy_pct" => {
            if let Some(v) = r.num::<f64>(tag)? {
                p.ram_max_used_busy_pct = if v == 0.0 { 100.0 } else { v };
                present.insert("ram_max_used_busy_pct");
            }
        }
        "ram_max_used_idle_pct" => {
            if let Some(v) = r.num::<f64>(tag)? {
                p.ram_max_used_idle_pct = if v == 0.0 { 100.0 } else { v };
                present.insert("ram_max_used_idle_pct");
            }
        }
        "max_bytes_sec_up" => dbl_min0!("max_bytes_sec_up", p.max_bytes_sec_up),
        "max_bytes_sec_down" => dbl_min0!("max_bytes_sec_down", p.max_bytes_sec_down),
        "cpu_usage_limit" => {
            if let Some(v) = r.num::<f64>(tag)? {
                if v > 0.0 && v <= 100.0 {
                    p.cpu_usage_limit = v;
                    present.insert("cpu_usage_limit");
                } else {
                    r.warn(tag, format!("{v} is not in (0, 100]; ignored"));
                }
            }
        }
        "niu_cpu_usage_limit" => {
            if let Some(v) = r.num::<f64>(tag)? {
                p.niu_cpu_usage_limit = pct_or_100(r, tag, v);
                present.insert("niu_cpu_usage_limit");
            }
        }
        "daily_xfer_limit_mb" => {
            if let Some(v) = r.num::<f64>(tag)? {
                if v >= 0.0 {
                    p.daily_xfer_limit_mb = v;
                    present.insert("daily_xfer_limit_mb");
                } else {
                    r.warn(tag, format!("{v} is negative; ignored"));
                }
            }
        }
        "daily_xfer_period_days" => {
            if let Some(v) = r.num::<i32>(tag)? {
                if v >= 0 {
                    p.daily_xfer_period_days = v;
                    present.insert("daily_xfer_period_days");
                } else {
                    r.warn(tag, format!("{v} is negative; ignored"));
                }
            }
        }
        "network_wifi_only" => p.network_wifi_only = r.flag(tag)?,
        "ferrite_cpu_temp_limit" => {
            if let Some(v) = num_in(r, tag, 0.0, TEMP_LIMIT_MAX_C)? {
                p.ferrite_cpu_temp_limit = v;
                present.insert("ferrite_cpu_temp_limit");
            }
        }
        "ferrite_gpu_temp_limit" => {
            if let Some(v) = num_in(r, tag, 0.0, TEMP_LIMIT_MAX_C)? {
                p.ferrite_gpu_temp_limit = v;
                present.insert("ferrite_gpu_temp_limit");
            }
        }
        "host_specific" => p.host_specific = r.flag(tag)?,
        // Written by BOINC's writer; informational, set by the merge.
        "override_file_present" => p.override_file_present = r.flag(tag)?,
        _ => r.unknown(tag, parent)?,
    }
    Ok(())
}

/// The highest temperature limit accepted, °C (higher values are clamped to it).
pub const TEMP_LIMIT_MAX_C: f64 = 150.0;

/// The niu_* percentage rule: ≤ 0 or > 100 means 100 (with a warning).
fn pct_or_100(r: &mut XmlReader<'_>, tag: &Tag<'_>, v: f64) -> f64 {
    if v <= 0.0 || v > 100.0 {
        r.warn(tag, format!("{v} is not in (0, 100]; 100 used"));
        100.0
    } else {
        v
    }
}

/// Reads `<day_prefs>`: a weekday and its compute and/or network window.
fn day_prefs<'a>(
    r: &mut XmlReader<'a>,
    tag: &Tag<'a>,
    p: &mut GlobalPrefs,
) -> Result<(), XmlError> {
    let mut day: Option<i64> = None;
    let mut cpu: Option<TimeSpan> = None;
    let mut net: Option<TimeSpan> = None;
    if !tag.is_empty() {
        while let Some(child) = r.next_child()? {
            match child.name() {
                "day_of_week" => day = r.num::<i64>(&child)?,
                "start_hour" => {
                    let v = r.num::<f64>(&child)?.unwrap_or(0.0);
                    cpu.get_or_insert_with(TimeSpan::default).start_hour = v;
                }
                "end_hour" => {
                    let v = r.num::<f64>(&child)?.unwrap_or(0.0);
                    cpu.get_or_insert_with(TimeSpan::default).end_hour = v;
                }
                "net_start_hour" => {
                    let v = r.num::<f64>(&child)?.unwrap_or(0.0);
                    net.get_or_insert_with(TimeSpan::default).start_hour = v;
                }
                "net_end_hour" => {
                    let v = r.num::<f64>(&child)?.unwrap_or(0.0);
                    net.get_or_insert_with(TimeSpan::default).end_hour = v;
                }
                _ => r.unknown(&child, "day_prefs")?,
            }
        }
    }
    let Some(d) = day.filter(|d| (0..7).contains(d)) else {
        r.warn(tag, "no valid <day_of_week> (0-6); ignored");
        return Ok(());
    };
    let d = d as usize;
    if let Some(c) = cpu {
        p.cpu_times.set_day(d, c);
    }
    if let Some(n) = net {
        p.net_times.set_day(d, n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temperature_limits_are_read_from_an_override_and_written_back() {
        let mut p = GlobalPrefs::default();
        let text = "<global_preferences>\n<ferrite_cpu_temp_limit>82.5</ferrite_cpu_temp_limit>\n\
                    <ferrite_gpu_temp_limit>400</ferrite_gpu_temp_limit>\n</global_preferences>\n";
        let parsed = p
            .apply_override(text, "global_prefs_override.xml", 0.0)
            .expect("parse");
        assert_eq!(p.ferrite_cpu_temp_limit, 82.5);
        assert_eq!(p.ferrite_gpu_temp_limit, TEMP_LIMIT_MAX_C);
        assert!(parsed.value.present.contains("ferrite_cpu_temp_limit"));
        assert!(p
            .to_xml()
            .contains("   <ferrite_cpu_temp_limit>82.500000</ferrite_cpu_temp_limit>\n"));
        let o = p.to_override_xml(&parsed.value.present);
        assert!(
            o.contains("<ferrite_gpu_temp_limit>150.000000</ferrite_gpu_temp_limit>"),
            "{o}"
        );
        // Unset limits are not written: the official client's documents stay as they were.
        assert!(!GlobalPrefs::default().to_xml().contains("ferrite_"));
    }

    #[test]
    fn time_span_rules() {
        let always = TimeSpan {
            start_hour: 5.0,
            end_hour: 5.0,
        };
        assert!(!always.suspended(3.0));
        let full = TimeSpan {
            start_hour: 0.0,
            end_hour: 24.0,
        };
        assert!(!full.suspended(23.9));
        let never = TimeSpan {
            start_hour: 24.0,
            end_hour: 0.0,
        };
        assert!(never.suspended(12.0));
        let day = TimeSpan {
            start_hour: 9.0,
            end_hour: 17.0,
        };
        assert!(day.suspended(8.99));
        assert!(!day.suspended(9.0));
        assert!(!day.suspended(17.0));
        assert!(day.suspended(17.01));
        let night = TimeSpan {
            start_hour: 22.0,
            end_hour: 6.0,
        };
        assert!(!night.suspended(23.0));
        assert!(!night.suspended(5.99));
        assert!(night.suspended(6.0));
        assert!(night.suspended(21.99));
        assert!(!night.suspended(22.0));
    }

    #[test]
    fn weekday_window_replaces_the_global_one() {
        let mut t = TimePrefs {
            window: TimeSpan {
                start_hour: 9.0,
                end_hour: 17.0,
            },
            ..TimePrefs::default()
        };
        t.set_day(
            0,
            TimeSpan {
                start_hour: 0.0,
                end_hour: 24.0,
            },
        );
        assert!(!t.suspended_at(20.0, 0), "Sunday uses its own window");
        assert!(t.suspended_at(20.0, 1), "Monday uses the global window");
        assert!(
            t.suspended_at(20.0, 9),
            "bad weekday falls back to the global window"
        );
    }

    #[test]
    fn local_time_of_known_instants() {
        // 2026-11-22 08:18:09 UTC is a Sunday.
        let (h, d) = local_hour_and_weekday(1_795_335_489.0, 0);
        assert_eq!(d, 0);
        assert!((h - (8.0 + 18.0 / 60.0 + 9.0 / 3600.0)).abs() < 1e-9, "{h}");
        // Two hours west moves it back to 06:18 the same day; ten hours west to Saturday.
        assert_eq!(local_hour_and_weekday(1_795_335_489.0, -7200).1, 0);
        assert_eq!(local_hour_and_weekday(1_795_335_489.0, -36_000).1, 6);
    }

    #[test]
    fn derived_values() {
        let mut p = GlobalPrefs {
            max_ncpus_pct: 50.0,
            niu_max_ncpus_pct: 100.0,
            ..GlobalPrefs::default()
        };
        assert_eq!(p.usable_cpus(8, -1, true), 4);
        assert_eq!(p.usable_cpus(8, -1, false), 8);
        assert_eq!(
            p.usable_cpus(8, 3, true),
            1,
            "cc_config ncpus wins, 1.5 rounds down"
        );
        p.max_ncpus_pct = 10.0;
        assert_eq!(p.usable_cpus(4, -1, true), 1, "at least one CPU");
        p.max_ncpus_pct = 0.0;
        assert_eq!(p.usable_cpus(6, -1, true), 6, "0 % means all");

        let p = GlobalPrefs::default();
        // 100 GB disk, 50 GB free, BOINC uses 1 GB: min(1+50-0.1, 90) GB.
        let got = p.allowed_disk_usage(GIGA, 100.0 * GIGA, 50.0 * GIGA);
        assert!((got - 50.9 * GIGA).abs() < 1.0, "{got}");
        let p2 = GlobalPrefs {
            disk_max_used_gb: 2.0,
            ..GlobalPrefs::default()
        };
        assert_eq!(
            p2.allowed_disk_usage(GIGA, 100.0 * GIGA, 50.0 * GIGA),
            2.0 * GIGA
        );
        assert_eq!(
            p.allowed_disk_usage(0.0, 100.0 * GIGA, 0.0),
            0.0,
            "never negative"
        );

        assert_eq!(p.available_ram(1000.0, true), 500.0);
        assert_eq!(p.available_ram(1000.0, false), 900.0);
        assert_eq!(p.effective_cpu_usage_limit(true), 100.0);
        let p3 = GlobalPrefs {
            cpu_usage_limit: 40.0,
            niu_cpu_usage_limit: 0.001,
            ..GlobalPrefs::default()
        };
        assert_eq!(p3.effective_cpu_usage_limit(true), 40.0);
        assert_eq!(p3.effective_cpu_usage_limit(false), 100.0);
        let p4 = GlobalPrefs {
            cpu_usage_limit: 80.0,
            niu_cpu_usage_limit: 30.0,
            suspend_cpu_usage: 25.0,
            niu_suspend_cpu_usage: 60.0,
            ..GlobalPrefs::default()
        };
        assert_eq!(p4.effective_cpu_usage_limit(true), 80.0);
        assert_eq!(p4.effective_cpu_usage_limit(false), 30.0);
        assert_eq!(p4.effective_suspend_cpu_usage(true), 25.0);
        assert_eq!(p4.effective_suspend_cpu_usage(false), 60.0);
    }
}
