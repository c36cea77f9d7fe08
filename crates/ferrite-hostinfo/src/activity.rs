//! User activity and power state, inputs for the "run when idle" and "run on batteries"
//! preferences: time since the last keyboard/mouse input, and whether the machine runs on
//! battery (from `/sys/class/power_supply`). Roots are parameters so tests use fixture trees.
//!
//! Idle time comes, as in the official client, first from the `idle_detect` helper's shared
//! memory segment (`/dev/shm/idle_detect_shmem`, which that helper fills from X11 or Wayland
//! sessions), else from the access times of input devices and terminals under `/dev`. No GUI
//! library is linked.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Where and what to look at for input activity.
#[derive(Debug, Clone)]
pub struct IdleProbe {
    /// Device directory, normally `/dev`.
    pub dev_root: PathBuf,
    /// Shared-memory directory holding `idle_detect_shmem`, normally `/dev/shm`.
    pub shm_root: PathBuf,
    /// `cc_config.xml` `<ignore_tty>` prefixes (full paths such as `/dev/pts/3`, interpreted
    /// relative to `dev_root`'s parent when `dev_root` is not `/dev`).
    pub ignore_tty: Vec<String>,
}

impl Default for IdleProbe {
    fn default() -> Self {
        IdleProbe {
            dev_root: PathBuf::from("/dev"),
            shm_root: PathBuf::from("/dev/shm"),
            ignore_tty: Vec::new(),
        }
    }
}

/// Serial lines can be busy without anyone at the keyboard.
const IGNORED_TTY_PREFIXES: &[&str] = &["ttyS", "ttyACM"];

/// The input devices and terminals whose access times tell when the user last typed or
/// moved the mouse (the `<ignore_tty>` ones left out). Listing them reads three directories,
/// so a caller that asks every second keeps the list for a while, as the official client does.
pub fn candidate_devices(probe: &IdleProbe) -> Vec<PathBuf> {
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

fn unix_secs(t: SystemTime) -> i64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

/// Reads the `idle_detect` segment: two native-endian 64-bit integers, the time the helper
/// last updated it and the time of the last user input (Unix seconds). Ignored unless the
/// helper updated it within the last minute (and not in the future by more than 10 s).
pub fn idle_from_idle_detect(shm_root: &Path, now: SystemTime) -> Option<Duration> {
    let bytes = std::fs::read(shm_root.join("idle_detect_shmem")).ok()?;
    let word = |i: usize| -> Option<i64> {
        let b: [u8; 8] = bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?;
        Some(i64::from_ne_bytes(b))
    };
    let (updated, last_input) = (word(0)?, word(1)?);
    let now_s = unix_secs(now);
    if updated > now_s + 10 || updated < now_s - 60 {
        return None;
    }
    Some(Duration::from_secs(
        u64::try_from(now_s - last_input).unwrap_or(0),
    ))
}

/// Time since the last user input: from the `idle_detect` helper when it runs, else from the
/// most recent access to an input device or terminal. `None` when nothing can be read (the
/// caller then treats the user as absent, like the official client's "infinite" idle time).
pub fn idle_time(probe: &IdleProbe, now: SystemTime) -> Option<Duration> {
    idle_time_of(&probe.shm_root, &candidate_devices(probe), now)
}

/// [`idle_time`] with the devices already listed ([`candidate_devices`]).
pub fn idle_time_of(shm_root: &Path, devices: &[PathBuf], now: SystemTime) -> Option<Duration> {
    idle_from_idle_detect(shm_root, now).or_else(|| idle_from_devices(devices, now))
}

/// Time since the most recent access to one of `devices` ([`candidate_devices`]).
pub fn idle_from_devices(devices: &[PathBuf], now: SystemTime) -> Option<Duration> {
    let latest = devices
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

/// True when the machine runs on battery: a battery of the system is discharging and no mains
/// or USB supply is online. `sys_root` is normally `/sys`. Machines without batteries are
/// never on battery, and neither are batteries that are not the system's: a UPS (its own
/// `UPS` type, or a USB UPS or peripheral that the HID driver lists as a `Battery` of scope
/// `Device`) and an empty battery slot (`present` 0).
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
                if read_trimmed(&dir.join("scope")).as_deref() == Some("Device")
                    || read_trimmed(&dir.join("present")).as_deref() == Some("0")
                {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A `power_supply` tree: (name, [(file, text)]).
    fn tree(supplies: &[(&str, &[(&str, &str)])]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().expect("tmp");
        for (name, files) in supplies {
            let d = tmp.path().join("class/power_supply").join(name);
            std::fs::create_dir_all(&d).expect("mkdir");
            for (f, text) in *files {
                std::fs::write(d.join(f), format!("{text}\n")).expect("write");
            }
        }
        tmp
    }

    #[test]
    fn only_a_discharging_system_battery_without_mains_is_on_battery() {
        // A desktop: no power supply class at all, or only its mains.
        let desktop = tempfile::tempdir().expect("tmp");
        assert!(!on_battery(desktop.path()));
        let desktop = tree(&[("ACAD", &[("type", "Mains"), ("online", "1")])]);
        assert!(!on_battery(desktop.path()));
        // A laptop on mains, charging or full.
        let laptop = tree(&[
            ("AC", &[("type", "Mains"), ("online", "1")]),
            (
                "BAT0",
                &[
                    ("type", "Battery"),
                    ("status", "Charging"),
                    ("present", "1"),
                ],
            ),
        ]);
        assert!(!on_battery(laptop.path()));
        // The same laptop unplugged.
        let unplugged = tree(&[
            ("AC", &[("type", "Mains"), ("online", "0")]),
            (
                "BAT0",
                &[
                    ("type", "Battery"),
                    ("status", "Discharging"),
                    ("present", "1"),
                ],
            ),
        ]);
        assert!(on_battery(unplugged.path()));
        // A desktop on a USB UPS that runs on its battery (the HID driver's Device scope),
        // and one whose driver lists it with the UPS type: not the system's battery.
        let ups = tree(&[
            (
                "hid-0001:0463:FFFF.0001-battery",
                &[
                    ("type", "Battery"),
                    ("scope", "Device"),
                    ("status", "Discharging"),
                ],
            ),
            (
                "ups0",
                &[("type", "UPS"), ("status", "Discharging"), ("online", "0")],
            ),
        ]);
        assert!(!on_battery(ups.path()));
        // A laptop whose battery slot is empty: some firmware still says "Discharging".
        let empty = tree(&[(
            "BAT1",
            &[
                ("type", "Battery"),
                ("status", "Discharging"),
                ("present", "0"),
            ],
        )]);
        assert!(!on_battery(empty.path()));
    }
}
