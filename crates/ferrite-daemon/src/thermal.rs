//! Temperature limits: the sensors read once a second while a limit is set
//! (`ferrite_hostinfo::thermal`), turned into a CPU share and a GPU hold by
//! `ferrite_sched::thermal`, and carried out by the CPU throttle (`throttle.rs`) and the GPU
//! suspend decision (`daemon/host.rs`).
//!
//! The preferences are Ferrite's extensions `ferrite_cpu_temp_limit` and
//! `ferrite_gpu_temp_limit` (°C, 0 = none). Sensors are read under `FERRITE_SYS_ROOT` (default
//! `/sys`), so tests use a fake tree; NVIDIA GPUs through NVML.

use std::path::PathBuf;

use ferrite_hostinfo::thermal::{hottest, Reading, ThermalProbe};
use ferrite_sched::thermal::{CpuThermal, GpuThermal};
use tracing::{info, warn};

/// How often the sensors are read while a limit is set, seconds.
pub const SAMPLE_SECS: f64 = 1.0;

/// How far under its limit a GPU must cool before its tasks resume, °C.
pub const GPU_HYSTERESIS_C: f64 = 5.0;

/// What the temperature limits do now, for the suspend decision, the GUIs and the log.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ThermalStatus {
    /// The CPU limit, °C (0: none).
    pub cpu_limit_c: f64,
    /// The hottest CPU package sensor last read.
    pub cpu: Option<Reading>,
    /// The CPU share the limit allows, percent (100: no hold).
    pub cpu_share_pct: f64,
    /// The GPU limit, °C (0: none).
    pub gpu_limit_c: f64,
    /// The hottest GPU last read.
    pub gpu: Option<Reading>,
    /// GPU tasks are suspended for temperature.
    pub gpu_hot: bool,
}

impl ThermalStatus {
    /// The CPU share is held under 100 %.
    pub fn cpu_holding(&self) -> bool {
        self.cpu_share_pct < 100.0
    }

    /// One line for people, when a limit acts: "CPU at 83 °C (limit 80 °C): apps held to 64%
    /// of their CPU; GPU at 88 °C (limit 85 °C): GPU tasks suspended".
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.cpu_holding() {
            parts.push(format!(
                "CPU at {} (limit {:.0} °C): apps held to {:.0}% of their CPU",
                temp_text(self.cpu.as_ref()),
                self.cpu_limit_c,
                self.cpu_share_pct
            ));
        }
        if self.gpu_hot {
            parts.push(format!(
                "GPU at {} (limit {:.0} °C): GPU tasks suspended",
                temp_text(self.gpu.as_ref()),
                self.gpu_limit_c
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

impl ThermalStatus {
    /// The `<thermal>` record of `ferrite_explain` (Ferrite only), when a limit is set: the
    /// limits, the readings, the CPU share, whether GPU tasks are held, and the sentence of
    /// [`describe`](Self::describe) (empty while no limit acts).
    pub fn explain_xml(&self) -> Option<String> {
        if self.cpu_limit_c <= 0.0 && self.gpu_limit_c <= 0.0 {
            return None;
        }
        let temp =
            |r: Option<&Reading>| r.map_or_else(String::new, |r| format!("{:.1}", r.celsius));
        let sensor = |r: Option<&Reading>| {
            r.map_or_else(String::new, |r| {
                r.source
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
            })
        };
        Some(format!(
            "<thermal>\n    <cpu_limit>{:.1}</cpu_limit>\n    <cpu_temp>{}</cpu_temp>\n    \
             <cpu_sensor>{}</cpu_sensor>\n    <cpu_share>{:.0}</cpu_share>\n    \
             <gpu_limit>{:.1}</gpu_limit>\n    <gpu_temp>{}</gpu_temp>\n    \
             <gpu_sensor>{}</gpu_sensor>\n    <gpu_held>{}</gpu_held>\n    \
             <reason>{}</reason>\n</thermal>\n",
            self.cpu_limit_c,
            temp(self.cpu.as_ref()),
            sensor(self.cpu.as_ref()),
            self.cpu_share_pct,
            self.gpu_limit_c,
            temp(self.gpu.as_ref()),
            sensor(self.gpu.as_ref()),
            u8::from(self.gpu_hot),
            self.describe().unwrap_or_default()
        ))
    }
}

fn temp_text(r: Option<&Reading>) -> String {
    r.map_or_else(
        || "an unknown temperature".to_owned(),
        |r| format!("{:.0} °C", r.celsius),
    )
}

/// The sensors and the controllers.
#[derive(Debug)]
pub struct ThermalWatch {
    probe: ThermalProbe,
    cpu: CpuThermal,
    gpu: GpuThermal,
    next_at: f64,
    status: ThermalStatus,
    /// The sensor names last logged (logged again when they change).
    cpu_source: Option<Option<String>>,
    gpu_source: Option<Option<String>>,
}

impl ThermalWatch {
    /// Reads sysfs under `sys_root`.
    pub fn new(sys_root: PathBuf) -> Self {
        ThermalWatch {
            probe: ThermalProbe::new(sys_root),
            cpu: CpuThermal::default(),
            gpu: GpuThermal::default(),
            next_at: f64::NEG_INFINITY,
            status: ThermalStatus {
                cpu_share_pct: 100.0,
                ..ThermalStatus::default()
            },
            cpu_source: None,
            gpu_source: None,
        }
    }

    /// Reads `FERRITE_SYS_ROOT` (default `/sys`).
    pub fn from_env() -> Self {
        let root = std::env::var_os("FERRITE_SYS_ROOT")
            .filter(|v| !v.is_empty())
            .map_or_else(|| PathBuf::from("/sys"), PathBuf::from);
        ThermalWatch::new(root)
    }

    /// What the limits do now.
    pub fn status(&self) -> &ThermalStatus {
        &self.status
    }

    /// Samples the sensors when due (only while a limit is set; `nvidia`: the host has NVIDIA
    /// GPUs to ask NVML about) and updates the controllers; logs each change.
    pub fn observe(
        &mut self,
        t: f64,
        cpu_limit_c: f64,
        gpu_limit_c: f64,
        nvidia: bool,
    ) -> &ThermalStatus {
        let cpu_limit = (cpu_limit_c > 0.0).then_some(cpu_limit_c);
        let gpu_limit = (gpu_limit_c > 0.0).then_some(gpu_limit_c);
        let limits_changed =
            cpu_limit_c != self.status.cpu_limit_c || gpu_limit_c != self.status.gpu_limit_c;
        if !limits_changed && t < self.next_at && t >= self.next_at - SAMPLE_SECS {
            return &self.status;
        }
        self.next_at = t + SAMPLE_SECS;
        let was = self.status.clone();
        self.status.cpu_limit_c = cpu_limit_c.max(0.0);
        self.status.gpu_limit_c = gpu_limit_c.max(0.0);

        let cpu_reading = if cpu_limit.is_some() {
            let all = self.probe.cpu();
            let hot = hottest(&all).cloned();
            self.note_source(true, hot.as_ref(), cpu_limit_c);
            hot
        } else {
            None
        };
        self.status.cpu_share_pct =
            self.cpu
                .sample(t, cpu_reading.as_ref().map(|r| r.celsius), cpu_limit);
        self.status.cpu = cpu_reading;

        let gpu_reading = if gpu_limit.is_some() {
            let all = self.probe.gpu(nvidia);
            let hot = hottest(&all).cloned();
            self.note_source(false, hot.as_ref(), gpu_limit_c);
            hot
        } else {
            None
        };
        self.status.gpu_hot = self.gpu.sample(
            gpu_reading.as_ref().map(|r| r.celsius),
            gpu_limit,
            GPU_HYSTERESIS_C,
        );
        self.status.gpu = gpu_reading;
        self.log_changes(&was);
        &self.status
    }

    /// Logs which sensor a limit reads, once per change (or that there is none).
    fn note_source(&mut self, cpu: bool, r: Option<&Reading>, limit: f64) {
        let name = r.map(|r| r.source.clone());
        let kept = if cpu {
            &mut self.cpu_source
        } else {
            &mut self.gpu_source
        };
        if kept.as_ref() == Some(&name) {
            return;
        }
        let what = if cpu { "CPU" } else { "GPU" };
        match &name {
            Some(n) => info!("{what} temperature limit {limit:.0} °C: reading sensor {n}"),
            None => warn!(
                "{what} temperature limit {limit:.0} °C: no {} sensor found; the limit does nothing",
                if cpu { "CPU package" } else { "GPU" }
            ),
        }
        *kept = Some(name);
    }

    fn log_changes(&self, was: &ThermalStatus) {
        let s = &self.status;
        if s.cpu_holding() && !was.cpu_holding() {
            info!(
                "CPU at {} over the limit of {:.0} °C: lowering the apps' CPU share to hold it",
                temp_text(s.cpu.as_ref()),
                s.cpu_limit_c
            );
        } else if !s.cpu_holding() && was.cpu_holding() {
            info!(
                "CPU at {}: back under the limit of {:.0} °C, the apps have their full CPU share",
                temp_text(s.cpu.as_ref()),
                s.cpu_limit_c
            );
        }
        if s.gpu_hot && !was.gpu_hot {
            info!(
                "GPU at {} over the limit of {:.0} °C: suspending GPU tasks",
                temp_text(s.gpu.as_ref()),
                s.gpu_limit_c
            );
        } else if !s.gpu_hot && was.gpu_hot {
            info!(
                "GPU at {}: {GPU_HYSTERESIS_C:.0} °C under the limit of {:.0} °C, resuming GPU tasks",
                temp_text(s.gpu.as_ref()),
                s.gpu_limit_c
            );
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn write_temps(root: &std::path::Path, cpu_milli: i64, gpu_milli: i64) {
        let cpu = root.join("class/hwmon/hwmon1");
        let gpu = root.join("class/hwmon/hwmon3");
        std::fs::create_dir_all(&cpu).expect("mkdir");
        std::fs::create_dir_all(&gpu).expect("mkdir");
        std::fs::write(cpu.join("name"), "coretemp\n").expect("write");
        std::fs::write(cpu.join("temp1_label"), "Package id 0\n").expect("write");
        std::fs::write(cpu.join("temp1_input"), format!("{cpu_milli}\n")).expect("write");
        std::fs::write(cpu.join("temp2_label"), "Core 0\n").expect("write");
        std::fs::write(cpu.join("temp2_input"), "99000\n").expect("write");
        std::fs::write(gpu.join("name"), "amdgpu\n").expect("write");
        std::fs::write(gpu.join("temp1_label"), "edge\n").expect("write");
        std::fs::write(gpu.join("temp1_input"), format!("{gpu_milli}\n")).expect("write");
    }

    #[test]
    fn a_fake_sysfs_tree_drives_the_cpu_share_and_the_gpu_hold() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path();
        write_temps(root, 60_000, 60_000);
        let mut w = ThermalWatch::new(root.to_path_buf());
        let s = w.observe(0.0, 80.0, 85.0, false).clone();
        assert_eq!(
            s.cpu.as_ref().map(|r| r.source.as_str()),
            Some("coretemp Package id 0")
        );
        assert_eq!(s.cpu_share_pct, 100.0);
        assert!(!s.gpu_hot);
        assert_eq!(s.describe(), None);
        // The package heats past its limit, the GPU past its own.
        write_temps(root, 90_000, 90_000);
        let mut t = 1.0;
        while t < 30.0 {
            w.observe(t, 80.0, 85.0, false);
            t += 1.0;
        }
        let s = w.status().clone();
        assert!(s.cpu_holding() && s.cpu_share_pct < 60.0, "{s:?}");
        assert!(s.gpu_hot);
        let text = s.describe().expect("a reason");
        assert!(text.contains("CPU at 90 °C (limit 80 °C)"), "{text}");
        assert!(text.contains("GPU tasks suspended"), "{text}");
        // Within the sample interval nothing is read again.
        write_temps(root, 40_000, 82_000);
        assert_eq!(w.observe(t - 0.5, 80.0, 85.0, false), &s);
        // Cooler: the GPU stays held inside its hysteresis band, the CPU share climbs back.
        for _ in 0..400 {
            w.observe(t, 80.0, 85.0, false);
            t += 1.0;
        }
        assert!(w.status().gpu_hot);
        assert_eq!(w.status().cpu_share_pct, 100.0);
        write_temps(root, 40_000, 79_000);
        w.observe(t, 80.0, 85.0, false);
        assert!(!w.status().gpu_hot);
        // No limits: no hold, whatever the sensors say.
        write_temps(root, 120_000, 120_000);
        let s = w.observe(t + 1.0, 0.0, 0.0, false);
        assert!(!s.cpu_holding() && !s.gpu_hot && s.cpu.is_none());
    }
}
