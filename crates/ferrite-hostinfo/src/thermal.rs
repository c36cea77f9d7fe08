//! Temperature sensors: the CPU packages' and the GPUs', for the temperature limits.
//!
//! CPU: the package sensors of `/sys/class/hwmon` are named, never the first zone found:
//! `coretemp`'s "Package id N" (Intel), `k10temp`'s and `zenpower`'s "Tdie", else "Tctl"
//! (AMD). Without one of them, the `x86_pkg_temp` (or ARM `cpu-thermal`/`cpu_thermal`/
//! `soc_thermal`) zones of `/sys/class/thermal` are used. The hottest package counts.
//! GPU: every NVIDIA GPU through NVML, and each `amdgpu` card's hwmon "edge" sensor (else its
//! first one).
//!
//! The sysfs root is a parameter (the daemon passes `FERRITE_SYS_ROOT`), so tests read a fake
//! tree.

use std::path::{Path, PathBuf};

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::Nvml;

/// One temperature reading.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Where it came from, for people: "coretemp Package id 0", "thermal_zone3 x86_pkg_temp",
    /// "NVIDIA GPU 0", "amdgpu edge (hwmon2)".
    pub source: String,
    /// Degrees Celsius.
    pub celsius: f64,
}

/// The hottest of `readings`, if any.
pub fn hottest(readings: &[Reading]) -> Option<&Reading> {
    readings
        .iter()
        .filter(|r| r.celsius.is_finite())
        .max_by(|a, b| a.celsius.total_cmp(&b.celsius))
}

fn read_trimmed(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned())
}

/// A sysfs millidegree file as °C.
fn millideg(p: &Path) -> Option<f64> {
    read_trimmed(p)?
        .parse::<f64>()
        .ok()
        .map(|m| m / 1000.0)
        .filter(|c| (-50.0..250.0).contains(c))
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The `tempN_label`/`tempN_input` pairs of one hwmon device: (label, °C); a sensor without a
/// label has an empty one.
fn hwmon_temps(dir: &Path) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for p in sorted_entries(dir) {
        let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(stem) = name
            .strip_suffix("_input")
            .filter(|s| s.starts_with("temp"))
        else {
            continue;
        };
        if let Some(c) = millideg(&p) {
            let label = read_trimmed(&dir.join(format!("{stem}_label"))).unwrap_or_default();
            out.push((label, c));
        }
    }
    out
}

/// The CPU package sensors under `sys_root` (see the module documentation).
pub fn cpu_package_temps(sys_root: &Path) -> Vec<Reading> {
    let mut out = Vec::new();
    for dir in sorted_entries(&sys_root.join("class/hwmon")) {
        let chip = read_trimmed(&dir.join("name")).unwrap_or_default();
        let temps = hwmon_temps(&dir);
        match chip.as_str() {
            "coretemp" => out.extend(
                temps
                    .iter()
                    .filter(|(l, _)| l.starts_with("Package id"))
                    .map(|(l, c)| Reading {
                        source: format!("coretemp {l}"),
                        celsius: *c,
                    }),
            ),
            "k10temp" | "zenpower" => {
                let pick = temps
                    .iter()
                    .find(|(l, _)| l == "Tdie")
                    .or_else(|| temps.iter().find(|(l, _)| l == "Tctl"));
                out.extend(pick.map(|(l, c)| Reading {
                    source: format!("{chip} {l}"),
                    celsius: *c,
                }));
            }
            _ => {}
        }
    }
    if !out.is_empty() {
        return out;
    }
    for dir in sorted_entries(&sys_root.join("class/thermal")) {
        let zone = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        if !zone.starts_with("thermal_zone") {
            continue;
        }
        let kind = read_trimmed(&dir.join("type")).unwrap_or_default();
        if matches!(
            kind.as_str(),
            "x86_pkg_temp" | "cpu-thermal" | "cpu_thermal" | "soc_thermal"
        ) {
            if let Some(c) = millideg(&dir.join("temp")) {
                out.push(Reading {
                    source: format!("{zone} {kind}"),
                    celsius: c,
                });
            }
        }
    }
    out
}

/// Each `amdgpu` card's temperature under `sys_root`: its "edge" sensor, else its first one.
pub fn amdgpu_temps(sys_root: &Path) -> Vec<Reading> {
    let mut out = Vec::new();
    for dir in sorted_entries(&sys_root.join("class/hwmon")) {
        if read_trimmed(&dir.join("name")).as_deref() != Some("amdgpu") {
            continue;
        }
        let temps = hwmon_temps(&dir);
        let pick = temps
            .iter()
            .find(|(l, _)| l == "edge")
            .or_else(|| temps.first());
        let hw = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        out.extend(pick.map(|(l, c)| Reading {
            source: if l.is_empty() {
                format!("amdgpu ({hw})")
            } else {
                format!("amdgpu {l} ({hw})")
            },
            celsius: *c,
        }));
    }
    out
}

/// Reads the sensors; NVML is opened once, on the first GPU reading.
#[derive(Default)]
pub struct ThermalProbe {
    /// The sysfs root (`/sys` normally).
    pub sys_root: PathBuf,
    nvml: Option<Option<Nvml>>,
}

impl std::fmt::Debug for ThermalProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThermalProbe")
            .field("sys_root", &self.sys_root)
            .field("nvml", &self.nvml.as_ref().map(Option::is_some))
            .finish()
    }
}

impl ThermalProbe {
    /// Reads sysfs under `sys_root`; NVML from where GPU detection loads it.
    pub fn new(sys_root: PathBuf) -> Self {
        ThermalProbe {
            sys_root,
            nvml: None,
        }
    }

    /// The CPU package sensors.
    pub fn cpu(&self) -> Vec<Reading> {
        cpu_package_temps(&self.sys_root)
    }

    /// The GPUs' sensors: NVIDIA through NVML (when `nvidia` is true and a driver answers),
    /// AMD through hwmon.
    pub fn gpu(&mut self, nvidia: bool) -> Vec<Reading> {
        let mut out = Vec::new();
        if nvidia {
            let nvml = self
                .nvml
                .get_or_insert_with(|| crate::gpu::open_nvml(None).ok());
            if let Some(nvml) = nvml {
                let n = nvml.device_count().unwrap_or(0);
                for i in 0..n {
                    let t = nvml
                        .device_by_index(i)
                        .and_then(|d| d.temperature(TemperatureSensor::Gpu));
                    if let Ok(t) = t {
                        out.push(Reading {
                            source: format!("NVIDIA GPU {i}"),
                            celsius: f64::from(t),
                        });
                    }
                }
            }
        }
        out.extend(amdgpu_temps(&self.sys_root));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hwmon(root: &Path, n: u32, chip: &str, sensors: &[(&str, i64)]) {
        let d = root.join(format!("class/hwmon/hwmon{n}"));
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("name"), format!("{chip}\n")).expect("write");
        for (i, (label, milli)) in sensors.iter().enumerate() {
            let i = i + 1;
            if !label.is_empty() {
                std::fs::write(d.join(format!("temp{i}_label")), format!("{label}\n"))
                    .expect("write");
            }
            std::fs::write(d.join(format!("temp{i}_input")), format!("{milli}\n")).expect("write");
        }
    }

    fn zone(root: &Path, n: u32, kind: &str, milli: i64) {
        let d = root.join(format!("class/thermal/thermal_zone{n}"));
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("type"), format!("{kind}\n")).expect("write");
        std::fs::write(d.join("temp"), format!("{milli}\n")).expect("write");
    }

    #[test]
    fn intel_package_sensors_are_named_not_the_first_zone() {
        let tmp = tempfile::tempdir().expect("tmp");
        let r = tmp.path();
        zone(r, 0, "acpitz", 27_800);
        zone(r, 1, "x86_pkg_temp", 71_000);
        hwmon(r, 0, "acpitz", &[("", 27_800)]);
        hwmon(r, 1, "nvme", &[("Composite", 45_850)]);
        hwmon(
            r,
            2,
            "coretemp",
            &[
                ("Package id 0", 72_000),
                ("Core 0", 80_000),
                ("Package id 1", 68_000),
            ],
        );
        let t = cpu_package_temps(r);
        assert_eq!(
            t,
            vec![
                Reading {
                    source: "coretemp Package id 0".into(),
                    celsius: 72.0
                },
                Reading {
                    source: "coretemp Package id 1".into(),
                    celsius: 68.0
                },
            ]
        );
        assert_eq!(hottest(&t).map(|r| r.celsius), Some(72.0));
    }

    #[test]
    fn amd_prefers_tdie_to_tctl_and_zones_are_the_fallback() {
        let tmp = tempfile::tempdir().expect("tmp");
        let r = tmp.path();
        hwmon(
            r,
            0,
            "k10temp",
            &[("Tctl", 85_000), ("Tdie", 75_000), ("Tccd1", 70_000)],
        );
        assert_eq!(cpu_package_temps(r)[0].source, "k10temp Tdie");
        assert_eq!(cpu_package_temps(r)[0].celsius, 75.0);
        let tmp = tempfile::tempdir().expect("tmp");
        let r = tmp.path();
        hwmon(r, 0, "k10temp", &[("Tctl", 63_500), ("Tccd1", 60_000)]);
        assert_eq!(cpu_package_temps(r)[0].source, "k10temp Tctl");
        // No package chip: the package zone, never the ACPI one.
        let tmp = tempfile::tempdir().expect("tmp");
        let r = tmp.path();
        zone(r, 0, "acpitz", 95_000);
        zone(r, 3, "x86_pkg_temp", 64_000);
        assert_eq!(
            cpu_package_temps(r),
            vec![Reading {
                source: "thermal_zone3 x86_pkg_temp".into(),
                celsius: 64.0
            }]
        );
        // Nothing to read: no reading rather than a guess.
        let tmp = tempfile::tempdir().expect("tmp");
        zone(tmp.path(), 0, "acpitz", 40_000);
        assert!(cpu_package_temps(tmp.path()).is_empty());
    }

    #[test]
    fn an_amdgpu_card_reads_its_edge_sensor() {
        let tmp = tempfile::tempdir().expect("tmp");
        let r = tmp.path();
        hwmon(r, 0, "k10temp", &[("Tctl", 50_000)]);
        hwmon(
            r,
            4,
            "amdgpu",
            &[("edge", 66_000), ("junction", 80_000), ("mem", 70_000)],
        );
        let mut p = ThermalProbe::new(r.to_path_buf());
        assert_eq!(
            p.gpu(false),
            vec![Reading {
                source: "amdgpu edge (hwmon4)".into(),
                celsius: 66.0
            }]
        );
    }
}
