//! User activity and power state, inputs for the "run when idle" and "run on batteries"
//! preferences: time since the last keyboard/mouse input, read from the access times of input
//! devices and terminals under `/dev` (no GUI library is linked), and whether the machine runs
//! on battery, from `/sys/class/power_supply`. Roots are parameters so tests use fixture trees.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Where and what to look at for input activity.
#[derive(Debug, Clone)]
pub struct IdleProbe {
    /// Device directory, normally `/dev`.
    pub dev_root: PathBuf,
    /// `cc_config.xml` `<ignore_tty>` prefixes (full paths such as `/dev/pts/3`, interpreted
    /// relative to `dev_root`'s parent when `dev_root` is not `/dev`).
    pub ignore_tty: Vec<String>,
}

impl Default for IdleProbe {
    fn default() -> Self {
        IdleProbe {
            dev_root: PathBuf::from("/dev"),
            ignore_tty: Vec::new(),
        }
    }
}

/// Serial lines can be busy without anyone at the keyboard.
const IGNORED_TTY_PREFIXES: &[&str] = &["ttyS", "ttyACM"];

fn candidate_devices(probe: &IdleProbe) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let list = |dir: &Path| -> Vec<(String, PathBuf)> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                    .collect()
            })
            .unwrap_or_default()
    };
    // Keyboards, mice, touchpads.
    for (name, path) in list(&probe.dev_root.join("input")) {
        if name.starts_with("event") || name.starts_with("mouse") || name == "mice" {
            out.push(path);
        }
    }
    // Consoles and pseudo-terminals (local and remote logins).
    for (name, path) in list(&probe.dev_root) {
        let tty =
            name.starts_with("tty") && !IGNORED_TTY_PREFIXES.iter().any(|p| name.starts_with(p));
        if tty || name.starts_with("pty") {
            out.push(path);
        }
    }
    for (name, path) in list(&probe.dev_root.join("pts")) {
        if name != "ptmx" {
            out.push(path);
        }
    }
    out.retain(|p| {
        let logical = Path::new("/dev").join(p.strip_prefix(&probe.dev_root).unwrap_or(p));
        let shown = logical.to_string_lossy();
        !probe
            .ignore_tty
            .iter()
            .any(|ig| shown.starts_with(ig.as_str()))
    });
    out
}

/// Time since the most recent access to an input device or terminal, or `None` when no such
/// device can be read (the caller then treats the user as absent, like the official client's
/// "infinite" idle time).
pub fn idle_time(probe: &IdleProbe, now: SystemTime) -> Option<Duration> {
    let latest = candidate_devices(probe)
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .filter_map(|m| {
            let a = m.accessed().ok();
            let w = m.modified().ok();
            a.max(w)
        })
        .max()?;
    Some(now.duration_since(latest).unwrap_or(Duration::ZERO))
}

fn read_trimmed(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned())
}

/// True when the machine runs on battery: a battery is discharging and no mains or USB supply
/// is online. `sys_root` is normally `/sys`. Machines without batteries are never on battery.
pub fn on_battery(sys_root: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(sys_root.join("class/power_supply")) else {
        return false;
    };
    let mut discharging = false;
    let mut external_online = false;
    for e in rd.flatten() {
        let dir = e.path();
        let kind = read_trimmed(&dir.join("type")).unwrap_or_default();
        match kind.as_str() {
            "Battery" => {
                // Peripheral batteries (mice, keyboards) carry scope=Device.
                if read_trimmed(&dir.join("scope")).as_deref() == Some("Device") {
                    continue;
                }
                if read_trimmed(&dir.join("status")).as_deref() == Some("Discharging") {
                    discharging = true;
                }
            }
            "Mains" | "USB" | "USB_C" | "USB_PD" | "Wireless"
                if read_trimmed(&dir.join("online")).as_deref() == Some("1") =>
            {
                external_online = true;
            }
            _ => {}
        }
    }
    discharging && !external_online
}
