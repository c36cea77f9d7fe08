//! What the daemon watches besides its own work, as inputs to the suspend decision
//! (`ferrite_sched::suspend`): time since the last keyboard or mouse input, whether the host
//! runs on battery, whether an `exclusive_app` runs, and the CPU load of other programs.
//!
//! The user's activity comes first from systemd-logind's sessions over D-Bus (`logind.rs`),
//! else from the `idle_detect` helper's shared memory, else from input devices' and
//! terminals' access times; the log says which source is in use, and when that changes.
//!
//! Where it looks can be moved for tests and unusual systems with environment variables:
//! `FERRITE_DEV_ROOT` (input devices and terminals, default `/dev`), `FERRITE_SYS_ROOT`
//! (`class/power_supply`, default `/sys`), `FERRITE_PROC_ROOT` (`stat` and the process list,
//! default `/proc`).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use ferrite_hostinfo::IdleProbe;
use tracing::info;

use crate::logind::{Logind, LogindWatch};

/// How often the slower probes (process scan, CPU load) run, seconds.
const SLOW_PROBE_SECS: f64 = 10.0;

/// How often input devices and the power supply are looked at, seconds.
const FAST_PROBE_SECS: f64 = 1.0;

/// How long the list of input devices and terminals is kept before `/dev` is listed again
/// (new logins add terminals), seconds.
const DEVICE_LIST_SECS: f64 = 60.0;

/// One observation of the host.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Seen {
    /// Seconds since the last user input (`None`: nothing to tell from).
    pub idle_secs: Option<f64>,
    /// Running on battery.
    pub on_battery: bool,
    /// When an exclusive app was last seen (wall time).
    pub exclusive_app_at: Option<f64>,
    /// When an exclusive GPU app was last seen (wall time).
    pub exclusive_gpu_app_at: Option<f64>,
    /// CPU load of programs other than our apps, percent of all CPUs.
    pub non_client_cpu_pct: f64,
}

/// Samples the host on its own timers; cheap to call every tick.
#[derive(Debug)]
pub struct ActivityMonitor {
    idle: IdleProbe,
    sys_root: PathBuf,
    proc_root: PathBuf,
    seen: Seen,
    fast_at: f64,
    slow_at: f64,
    /// The input devices and terminals to look at, and when they were listed.
    devices: Vec<PathBuf>,
    devices_at: f64,
    /// Previous (busy, total) CPU seconds of the host and our apps' CPU seconds.
    last_cpu: Option<(f64, f64, f64)>,
    /// The logind watcher, started at the first observation (on the daemon's runtime).
    logind: Option<LogindWatch>,
    logind_started: bool,
    /// Where the idle time came from last (logged when it changes).
    source: Option<IdleSource>,
}

/// Where the user's idle time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleSource {
    /// systemd-logind's sessions.
    Logind,
    /// The `idle_detect` helper's shared memory.
    IdleDetect,
    /// Access times of input devices and terminals.
    Devices,
    /// Nothing: the user counts as absent.
    Nothing,
}

impl IdleSource {
    fn describe(self) -> &'static str {
        match self {
            IdleSource::Logind => "systemd-logind's sessions (D-Bus IdleHint/IdleSinceHint)",
            IdleSource::IdleDetect => "the idle_detect helper (/dev/shm/idle_detect_shmem)",
            IdleSource::Devices => "access times of input devices and terminals under /dev",
            IdleSource::Nothing => "nothing (no logind, idle_detect or readable device)",
        }
    }
}

/// The idle time and its source: logind's answer when it has one, else the helper's shared
/// memory, else the devices' access times.
pub fn idle_from(
    logind: &Logind,
    idle: &IdleProbe,
    devices: &[PathBuf],
) -> (Option<f64>, IdleSource) {
    let now = SystemTime::now();
    if let Logind::Sessions(u) = logind {
        let now_us = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        return (u.idle_secs(now_us), IdleSource::Logind);
    }
    if let Some(d) = ferrite_hostinfo::idle_from_idle_detect(&idle.shm_root, now) {
        return (Some(d.as_secs_f64()), IdleSource::IdleDetect);
    }
    match ferrite_hostinfo::idle_from_devices(devices, now) {
        Some(d) => (Some(d.as_secs_f64()), IdleSource::Devices),
        None => (None, IdleSource::Nothing),
    }
}

fn env_path(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(default), PathBuf::from)
}

impl ActivityMonitor {
    /// Looks where the environment says (see the module documentation).
    pub fn from_env() -> Self {
        let dev_root = env_path("FERRITE_DEV_ROOT", "/dev");
        let shm_root = dev_root.join("shm");
        ActivityMonitor {
            idle: IdleProbe {
                dev_root,
                shm_root,
                ignore_tty: Vec::new(),
            },
            sys_root: env_path("FERRITE_SYS_ROOT", "/sys"),
            proc_root: env_path("FERRITE_PROC_ROOT", "/proc"),
            seen: Seen::default(),
            fast_at: f64::NEG_INFINITY,
            slow_at: f64::NEG_INFINITY,
            devices: Vec::new(),
            devices_at: f64::NEG_INFINITY,
            last_cpu: None,
            logind: None,
            logind_started: false,
            source: None,
        }
    }

    /// `cc_config.xml` `<ignore_tty>` prefixes.
    pub fn set_ignore_tty(&mut self, ttys: &[String]) {
        if self.idle.ignore_tty != ttys {
            self.idle.ignore_tty = ttys.to_vec();
            self.devices_at = f64::NEG_INFINITY;
        }
    }

    /// The latest observation, refreshed when its probes are due. `apps_cpu_secs` is the CPU
    /// time our apps have used so far (summed over the live tasks); `exclusive` and
    /// `exclusive_gpu` are `cc_config.xml`'s program names.
    pub fn observe(
        &mut self,
        now: f64,
        apps_cpu_secs: f64,
        exclusive: &[String],
        exclusive_gpu: &[String],
    ) -> Seen {
        if now - self.fast_at >= FAST_PROBE_SECS || now < self.fast_at {
            self.fast_at = now;
            if now - self.devices_at >= DEVICE_LIST_SECS || now < self.devices_at {
                self.devices_at = now;
                self.devices = ferrite_hostinfo::candidate_devices(&self.idle);
            }
            if !self.logind_started {
                self.logind_started = true;
                self.logind = LogindWatch::spawn();
            }
            let logind = self.logind.as_ref().map_or_else(
                || Logind::Unreachable("not started".into()),
                LogindWatch::latest,
            );
            let (idle, source) = idle_from(&logind, &self.idle, &self.devices);
            self.seen.idle_secs = idle;
            // Until logind has answered once, the other sources stand in without a word.
            if logind != Logind::Unknown && self.source != Some(source) {
                match &logind {
                    Logind::Unreachable(why) if source != IdleSource::Logind => info!(
                        "User activity from {} (logind not in use: {why})",
                        source.describe()
                    ),
                    _ => info!("User activity from {}", source.describe()),
                }
                self.source = Some(source);
            }
            self.seen.on_battery = ferrite_hostinfo::on_battery(&self.sys_root);
        }
        if now - self.slow_at >= SLOW_PROBE_SECS || now < self.slow_at {
            self.slow_at = now;
            if !exclusive.is_empty() || !exclusive_gpu.is_empty() {
                let running = running_programs(&self.proc_root);
                let any = |names: &[String]| names.iter().any(|n| running.contains(n));
                if any(exclusive) {
                    self.seen.exclusive_app_at = Some(now);
                }
                if any(exclusive_gpu) {
                    self.seen.exclusive_gpu_app_at = Some(now);
                }
            }
            let stat = std::fs::read_to_string(self.proc_root.join("stat")).unwrap_or_default();
            match (cpu_seconds(&stat), self.last_cpu) {
                (Some((busy, total)), Some((busy0, total0, apps0))) => {
                    // A task that ended takes its CPU time out of the sum: skip that interval.
                    if apps_cpu_secs >= apps0 {
                        self.seen.non_client_cpu_pct =
                            non_client_pct(busy - busy0, total - total0, apps_cpu_secs - apps0);
                    }
                    self.last_cpu = Some((busy, total, apps_cpu_secs));
                }
                (Some((busy, total)), None) => self.last_cpu = Some((busy, total, apps_cpu_secs)),
                (None, _) => self.seen.non_client_cpu_pct = 0.0,
            }
        }
        self.seen
    }
}

/// Clock ticks per second of `/proc/stat` (`USER_HZ`, 100 on every Linux ABI).
const USER_HZ: f64 = 100.0;

/// Busy and total CPU seconds of all CPUs from `/proc/stat`'s first line.
pub fn cpu_seconds(stat: &str) -> Option<(f64, f64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse::<f64>().unwrap_or(0.0))
        .collect();
    if v.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest time is inside user and nice).
    let at = |i: usize| v.get(i).copied().unwrap_or(0.0);
    let idle = at(3) + at(4);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    Some((busy / USER_HZ, (busy + idle) / USER_HZ))
}

/// Percent of all CPUs used by others: the host's busy time less our apps', over the interval.
pub fn non_client_pct(busy: f64, total: f64, apps: f64) -> f64 {
    if total <= 0.0 {
        return 0.0;
    }
    ((busy - apps.max(0.0)).max(0.0) / total * 100.0).clamp(0.0, 100.0)
}

/// Names of the running programs: each process's `comm` and the file name of its `argv[0]`.
fn running_programs(proc_root: &Path) -> std::collections::HashSet<String> {
    let mut out = std::collections::HashSet::new();
    let Ok(rd) = std::fs::read_dir(proc_root) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let dir = e.path();
        if let Ok(comm) = std::fs::read_to_string(dir.join("comm")) {
            out.insert(comm.trim_end().to_owned());
        }
        if let Ok(cmd) = std::fs::read(dir.join("cmdline")) {
            let argv0 = cmd.split(|b| *b == 0).next().unwrap_or_default();
            let argv0 = String::from_utf8_lossy(argv0);
            if let Some(base) = Path::new(argv0.as_ref()).file_name() {
                out.insert(base.to_string_lossy().into_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_gives_busy_and_total_seconds() {
        let stat = "cpu  100 20 30 800 50 5 5 0 0 0\ncpu0 50 10 15 400 25 2 3 0 0 0\n";
        assert_eq!(cpu_seconds(stat), Some((1.6, 10.1)));
        assert_eq!(cpu_seconds("intr 1 2 3\n"), None);
    }

    #[test]
    fn our_apps_do_not_count_as_load_of_others() {
        // 2 CPUs for 10 s: 20 s in all; 12 s busy of which 9 s are our apps' → 15 %.
        assert!((non_client_pct(12.0, 20.0, 9.0) - 15.0).abs() < 1e-9);
        assert_eq!(non_client_pct(5.0, 20.0, 9.0), 0.0);
        assert_eq!(non_client_pct(5.0, 0.0, 0.0), 0.0);
    }

    #[test]
    fn logind_comes_first_then_idle_detect_then_the_devices() {
        use ferrite_hostinfo::logind::UserIdle;
        let tmp = tempfile::tempdir().expect("tmp");
        let dev = tmp.path().join("dev");
        std::fs::create_dir_all(dev.join("shm")).expect("mkdir");
        std::fs::write(dev.join("tty1"), "").expect("write");
        let probe = IdleProbe {
            dev_root: dev.clone(),
            shm_root: dev.join("shm"),
            ignore_tty: Vec::new(),
        };
        let devices = ferrite_hostinfo::candidate_devices(&probe);
        // A terminal touched just now, but logind says every session has been idle for an
        // hour: logind wins.
        let hour_ago = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("clock")
            .as_micros() as u64
            - 3_600_000_000;
        let (idle, src) = idle_from(
            &Logind::Sessions(UserIdle::IdleSince(hour_ago)),
            &probe,
            &devices,
        );
        assert_eq!(src, IdleSource::Logind);
        assert!(
            idle.is_some_and(|s| (3600.0..3700.0).contains(&s)),
            "{idle:?}"
        );
        let (idle, src) = idle_from(&Logind::Sessions(UserIdle::NoSessions), &probe, &devices);
        assert_eq!((idle, src), (None, IdleSource::Logind));
        // Without logind: the helper's segment when fresh, else the terminal.
        let unreachable = Logind::Unreachable("no system bus".into());
        let (idle, src) = idle_from(&unreachable, &probe, &devices);
        assert_eq!(src, IdleSource::Devices);
        assert!(idle.is_some_and(|s| s < 60.0), "{idle:?}");
        let now_s = (hour_ago / 1_000_000 + 3600) as i64;
        let mut shm = now_s.to_ne_bytes().to_vec();
        shm.extend_from_slice(&(now_s - 120).to_ne_bytes());
        std::fs::write(dev.join("shm/idle_detect_shmem"), shm).expect("write");
        let (idle, src) = idle_from(&unreachable, &probe, &devices);
        assert_eq!(src, IdleSource::IdleDetect);
        assert!(
            idle.is_some_and(|s| (119.0..200.0).contains(&s)),
            "{idle:?}"
        );
        let (idle, src) = idle_from(&unreachable, &probe, &[]);
        assert_eq!((idle.is_some(), src), (true, IdleSource::IdleDetect));
        std::fs::remove_file(dev.join("shm/idle_detect_shmem")).expect("rm");
        assert_eq!(
            idle_from(&unreachable, &probe, &[]),
            (None, IdleSource::Nothing)
        );
    }

    #[test]
    fn the_monitor_reads_battery_idle_time_processes_and_load_from_its_roots() {
        let tmp = tempfile::tempdir().expect("tmp");
        let sys = tmp.path().join("sys/class/power_supply");
        std::fs::create_dir_all(sys.join("AC")).expect("mkdir");
        std::fs::create_dir_all(sys.join("BAT0")).expect("mkdir");
        std::fs::write(sys.join("AC/type"), "Mains\n").expect("write");
        std::fs::write(sys.join("AC/online"), "0\n").expect("write");
        std::fs::write(sys.join("BAT0/type"), "Battery\n").expect("write");
        std::fs::write(sys.join("BAT0/status"), "Discharging\n").expect("write");
        let dev = tmp.path().join("dev");
        std::fs::create_dir_all(&dev).expect("mkdir");
        std::fs::write(dev.join("tty1"), "").expect("write");
        let proc_ = tmp.path().join("proc");
        std::fs::create_dir_all(proc_.join("4242")).expect("mkdir");
        std::fs::write(proc_.join("4242/comm"), "gamed\n").expect("write");
        std::fs::write(
            proc_.join("4242/cmdline"),
            b"/opt/game/bin/game.x86_64\0-fast\0",
        )
        .expect("write");
        std::fs::write(proc_.join("stat"), "cpu  0 0 0 1000 0 0 0 0\n").expect("write");
        let mut m = ActivityMonitor {
            idle: IdleProbe {
                dev_root: dev.clone(),
                shm_root: dev.join("shm"),
                ignore_tty: Vec::new(),
            },
            sys_root: tmp.path().join("sys"),
            proc_root: proc_.clone(),
            seen: Seen::default(),
            fast_at: f64::NEG_INFINITY,
            slow_at: f64::NEG_INFINITY,
            devices: Vec::new(),
            devices_at: f64::NEG_INFINITY,
            last_cpu: None,
            logind: None,
            logind_started: true,
            source: None,
        };
        let excl = vec!["game.x86_64".to_owned()];
        let s = m.observe(100.0, 0.0, &excl, &[]);
        assert!(s.on_battery);
        assert!(s.idle_secs.is_some_and(|i| i < 60.0), "{s:?}");
        assert_eq!(s.exclusive_app_at, Some(100.0));
        assert_eq!(s.exclusive_gpu_app_at, None);
        // 10 s later: 2 CPUs, 20 s in all, 15 s busy, 5 s of them ours → 50 %.
        std::fs::write(proc_.join("stat"), "cpu  1500 0 0 1500 0 0 0 0\n").expect("write");
        std::fs::write(sys.join("AC/online"), "1\n").expect("write");
        let s = m.observe(110.0, 5.0, &[], &["gamed".to_owned()]);
        assert!((s.non_client_cpu_pct - 50.0).abs() < 1e-9, "{s:?}");
        assert!(!s.on_battery);
        assert_eq!(s.exclusive_app_at, Some(100.0));
        assert_eq!(s.exclusive_gpu_app_at, Some(110.0));
    }
}
