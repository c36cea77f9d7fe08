//! Temperature limits: how much CPU the apps may use, and whether GPU apps run, so that the
//! sensors stay under the volunteer's limits.
//!
//! The CPU side holds the temperature instead of stopping everything: [`CpuThermal`] turns
//! the package temperature, sampled about once a second, into a CPU share (percent of what
//! the apps would use) that the daemon carries out with its CPU throttle. It is an integral
//! controller with a dead band and a look-ahead:
//!
//! - the reading is smoothed (a first-order filter of [`ThermalTuning::smoothing_secs`]) and
//!   its rate of rise is extrapolated [`ThermalTuning::lead_secs`] ahead, so the share starts
//!   to fall before a fast-heating package crosses the limit;
//! - above the limit (less [`ThermalTuning::margin_c`]) the share is integrated down in
//!   proportion to the excess;
//! - inside the band from `limit - hysteresis` to the limit the share holds still;
//! - under the band it is integrated back up, slowly and at most
//!   [`ThermalTuning::max_rise_pct_per_sec`], until it reaches 100 % and the controller lets go.
//!
//! The GPU side is on/off with hysteresis ([`GpuThermal`]): a GPU over its limit suspends the
//! GPU tasks until it has cooled `hysteresis` degrees under the limit.
//!
//! No clock and no I/O: the caller passes the time and the readings.

/// The controller's constants.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThermalTuning {
    /// Width of the band under the limit where the share holds, °C.
    pub hysteresis_c: f64,
    /// The share never goes below this, percent (some work always goes on).
    pub min_share_pct: f64,
    /// Time constant of the reading's smoothing, seconds.
    pub smoothing_secs: f64,
    /// How far ahead the rate of rise is extrapolated, seconds.
    pub lead_secs: f64,
    /// Share taken off per °C of predicted excess, percent (the proportional part).
    pub kp_pct_per_c: f64,
    /// Share taken off per second per °C of excess, percent (the integral part).
    pub ki_pct_per_c_sec: f64,
    /// Share given back per second per °C under the band, percent.
    pub rise_pct_per_c_sec: f64,
    /// Most share given back per second, percent.
    pub max_rise_pct_per_sec: f64,
    /// The integral acts from this many °C under the limit, so the temperature settles just
    /// under the limit rather than on it.
    pub margin_c: f64,
    /// Longest interval taken from one sample to the next, seconds (after a host sleep).
    pub max_step_secs: f64,
}

impl Default for ThermalTuning {
    fn default() -> Self {
        ThermalTuning {
            hysteresis_c: 3.0,
            min_share_pct: 10.0,
            smoothing_secs: 5.0,
            lead_secs: 15.0,
            kp_pct_per_c: 6.0,
            ki_pct_per_c_sec: 0.2,
            rise_pct_per_c_sec: 0.05,
            max_rise_pct_per_sec: 1.0,
            margin_c: 0.5,
            max_step_secs: 10.0,
        }
    }
}

/// The CPU temperature controller's state.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuThermal {
    tuning: ThermalTuning,
    /// The integral part of the share, percent.
    integral: f64,
    /// The share in force, percent (100: no limit).
    share: f64,
    /// The smoothed reading, °C.
    smoothed: Option<f64>,
    /// The smoothed rate of change, °C per second.
    slope: f64,
    /// Time of the last sample.
    last_t: Option<f64>,
}

impl Default for CpuThermal {
    fn default() -> Self {
        CpuThermal::new(ThermalTuning::default())
    }
}

impl CpuThermal {
    /// Nothing sampled yet; the share is 100 %.
    pub fn new(tuning: ThermalTuning) -> Self {
        CpuThermal {
            tuning,
            integral: 100.0,
            share: 100.0,
            smoothed: None,
            slope: 0.0,
            last_t: None,
        }
    }

    /// The CPU share in force, percent of what the apps would use (100: no limit).
    pub fn share_pct(&self) -> f64 {
        self.share
    }

    /// Whether the controller holds the CPU share under 100 %.
    pub fn holding(&self) -> bool {
        self.share < 100.0
    }

    /// The smoothed temperature, °C, if a sensor was read.
    pub fn smoothed_c(&self) -> Option<f64> {
        self.smoothed
    }

    /// One sample at time `now` (seconds): `temp_c` is the hottest CPU package sensor (`None`:
    /// no reading), `limit_c` the limit (`None` or not above 0: no limit). Returns the share
    /// in force. Without a limit the share is 100 % at once; without a reading it rises back
    /// at the slowest rate.
    pub fn sample(&mut self, now: f64, temp_c: Option<f64>, limit_c: Option<f64>) -> f64 {
        let tu = self.tuning;
        let dt = match self.last_t {
            Some(t0) if now > t0 => (now - t0).min(tu.max_step_secs),
            Some(_) => 0.0,
            None => 0.0,
        };
        self.last_t = Some(now);
        let Some(limit) = limit_c.filter(|l| *l > 0.0) else {
            self.integral = 100.0;
            self.share = 100.0;
            self.track(temp_c, dt);
            return self.share;
        };
        let Some(t) = self.track(temp_c, dt) else {
            self.integral = (self.integral + tu.max_rise_pct_per_sec * dt).min(100.0);
            self.share = self.integral.max(tu.min_share_pct);
            return self.share;
        };
        let predicted = t + self.slope.max(0.0) * tu.lead_secs;
        let top = limit - tu.margin_c;
        let bottom = limit - tu.hysteresis_c;
        if t > top {
            self.integral -= tu.ki_pct_per_c_sec * (t - top) * dt;
        } else if predicted < bottom {
            let rise = (tu.rise_pct_per_c_sec * (bottom - predicted)).min(tu.max_rise_pct_per_sec);
            self.integral += rise * dt;
        }
        self.integral = self.integral.clamp(tu.min_share_pct, 100.0);
        let kick = tu.kp_pct_per_c * (predicted - top).max(0.0);
        self.share = (self.integral - kick).clamp(tu.min_share_pct, 100.0);
        self.share
    }

    /// Feeds a reading to the smoothing; returns the smoothed temperature.
    fn track(&mut self, temp_c: Option<f64>, dt: f64) -> Option<f64> {
        let t = temp_c.filter(|t| t.is_finite())?;
        match self.smoothed {
            None => {
                self.smoothed = Some(t);
                self.slope = 0.0;
            }
            Some(s) => {
                let a = dt / (self.tuning.smoothing_secs + dt);
                let next = s + a * (t - s);
                if dt > 0.0 {
                    self.slope += a * ((next - s) / dt - self.slope);
                }
                self.smoothed = Some(next);
            }
        }
        self.smoothed
    }
}

/// Whether GPU tasks are held for temperature: on over the limit, off once `hysteresis_c`
/// under it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GpuThermal {
    hot: bool,
}

impl GpuThermal {
    /// Whether GPU tasks are held now.
    pub fn hot(&self) -> bool {
        self.hot
    }

    /// One sample: `temp_c` is the hottest GPU (`None`: no reading, which lets go),
    /// `limit_c` the limit (`None` or not above 0: none). Returns whether GPU tasks are held.
    pub fn sample(&mut self, temp_c: Option<f64>, limit_c: Option<f64>, hysteresis_c: f64) -> bool {
        self.hot = match (temp_c, limit_c.filter(|l| *l > 0.0)) {
            (Some(t), Some(l)) if self.hot => t > l - hysteresis_c,
            (Some(t), Some(l)) => t > l,
            _ => false,
        };
        self.hot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A package as a heater with one time constant: it tends to `ambient + gain × share`.
    struct Heater {
        temp: f64,
        ambient: f64,
        gain_c_per_pct: f64,
        tau_secs: f64,
    }

    impl Heater {
        fn step(&mut self, share: f64, dt: f64) {
            let target = self.ambient + self.gain_c_per_pct * share;
            self.temp += (target - self.temp) * (dt / self.tau_secs).min(1.0);
        }
    }

    struct Run {
        overshoot_c: f64,
        settling_secs: f64,
        mean_share_last_10min: f64,
        share_swing_last_10min: f64,
        temp_swing_last_10min: f64,
        mean_temp_last_10min: f64,
        crossings_after_settling: usize,
    }

    /// 30 minutes at 1 s steps from a cold start; sensors read in whole degrees.
    fn run(gain: f64, tau: f64, limit: f64) -> Run {
        let mut h = Heater {
            temp: 40.0,
            ambient: 40.0,
            gain_c_per_pct: gain,
            tau_secs: tau,
        };
        let mut c = CpuThermal::default();
        let mut trace = Vec::new();
        for step in 0..1800 {
            let now = f64::from(step);
            let share = c.sample(now, Some(h.temp.round()), Some(limit));
            h.step(share, 1.0);
            trace.push((now, h.temp, share));
        }
        let tail = &trace[1200..];
        let mean_temp = tail.iter().map(|x| x.1).sum::<f64>() / tail.len() as f64;
        let mean_share = tail.iter().map(|x| x.2).sum::<f64>() / tail.len() as f64;
        let swing = tail.iter().map(|x| x.2).fold(f64::MIN, f64::max)
            - tail.iter().map(|x| x.2).fold(f64::MAX, f64::min);
        let temp_swing = tail.iter().map(|x| x.1).fold(f64::MIN, f64::max)
            - tail.iter().map(|x| x.1).fold(f64::MAX, f64::min);
        let settling = trace
            .iter()
            .filter(|x| (x.1 - mean_temp).abs() > 1.0)
            .map(|x| x.0 + 1.0)
            .fold(0.0, f64::max);
        let crossings = trace
            .windows(2)
            .filter(|w| w[0].0 >= settling && (w[0].1 - limit) * (w[1].1 - limit) < 0.0)
            .count();
        Run {
            overshoot_c: trace.iter().map(|x| x.1).fold(f64::MIN, f64::max) - limit,
            settling_secs: settling,
            mean_share_last_10min: mean_share,
            share_swing_last_10min: swing,
            temp_swing_last_10min: temp_swing,
            mean_temp_last_10min: mean_temp,
            crossings_after_settling: crossings,
        }
    }

    #[test]
    fn the_cpu_share_settles_under_the_limit_without_oscillating() {
        // 100 % share would reach 100 °C; the limit of 80 °C needs a share of 66.7 %.
        for (gain, tau) in [(0.6, 30.0), (0.6, 10.0), (0.6, 120.0), (1.0, 30.0)] {
            let r = run(gain, tau, 80.0);
            let ideal = 40.0 / gain;
            println!(
                "heater {gain} °C/%, tau {tau} s, limit 80 °C: overshoot {:.2} °C, settling \
                 {:.0} s, mean share {:.1} % (ideal {ideal:.1} %), share swing {:.2} %, \
                 temperature swing {:.2} °C, mean temperature {:.2} °C, limit crossings after settling {}",
                r.overshoot_c,
                r.settling_secs,
                r.mean_share_last_10min,
                r.share_swing_last_10min,
                r.temp_swing_last_10min,
                r.mean_temp_last_10min,
                r.crossings_after_settling
            );
            assert!(r.overshoot_c < 6.0, "overshoot {}", r.overshoot_c);
            assert!(r.settling_secs < 400.0, "settling {}", r.settling_secs);
            // Held inside the band: between the shares that give 77 °C and 80 °C.
            let band_low = 37.0 / gain;
            assert!(
                r.mean_share_last_10min > band_low - 1.5 && r.mean_share_last_10min < ideal + 1.5,
                "mean share {} for {band_low}..{ideal}",
                r.mean_share_last_10min
            );
            // Whole-degree readings leave a dither of a few percent, not a swing.
            assert!(
                r.share_swing_last_10min < 5.0,
                "swing {}",
                r.share_swing_last_10min
            );
            assert!(
                r.temp_swing_last_10min < 1.5,
                "swing {}",
                r.temp_swing_last_10min
            );
            assert!(
                r.mean_temp_last_10min <= 80.5 && r.mean_temp_last_10min > 76.5,
                "held at {}",
                r.mean_temp_last_10min
            );
            assert!(
                r.crossings_after_settling <= 1,
                "{}",
                r.crossings_after_settling
            );
        }
    }

    #[test]
    fn a_cool_host_keeps_the_full_share_and_no_limit_means_none() {
        let mut c = CpuThermal::default();
        for s in 0..100 {
            assert_eq!(c.sample(f64::from(s), Some(55.0), Some(80.0)), 100.0);
        }
        assert!(!c.holding());
        let mut c = CpuThermal::default();
        assert_eq!(c.sample(0.0, Some(95.0), None), 100.0);
        assert_eq!(c.sample(1.0, Some(95.0), Some(0.0)), 100.0);
    }

    #[test]
    fn the_share_comes_back_as_the_load_falls_and_holds_inside_the_band() {
        let mut h = Heater {
            temp: 40.0,
            ambient: 40.0,
            gain_c_per_pct: 0.6,
            tau_secs: 30.0,
        };
        let mut c = CpuThermal::default();
        let mut now = 0.0;
        for _ in 0..900 {
            let s = c.sample(now, Some(h.temp), Some(80.0));
            h.step(s, 1.0);
            now += 1.0;
        }
        assert!(c.holding());
        let held = c.share_pct();
        // Inside the band (78 °C with a limit of 80 and 3 °C of hysteresis): no change.
        for _ in 0..60 {
            c.sample(now, Some(78.0), Some(80.0));
            now += 1.0;
        }
        assert!(
            (c.share_pct() - held).abs() < 1.0,
            "{} vs {held}",
            c.share_pct()
        );
        // The load falls by half (full share would now reach 70 °C): the share climbs back to
        // 100 % and the controller lets go.
        h.gain_c_per_pct = 0.3;
        for _ in 0..1800 {
            let s = c.sample(now, Some(h.temp), Some(80.0));
            h.step(s, 1.0);
            now += 1.0;
        }
        assert_eq!(c.share_pct(), 100.0);
        assert!(!c.holding());
        // A sensor that goes away lets go too, at the slowest rate.
        let mut c = CpuThermal::default();
        for s in 0..100 {
            c.sample(f64::from(s), Some(90.0), Some(80.0));
        }
        let low = c.share_pct();
        assert!(low < 100.0);
        c.sample(101.0, None, Some(80.0));
        assert!(c.share_pct() > low);
    }

    #[test]
    fn a_hot_gpu_is_held_until_it_cools_under_the_band() {
        let mut g = GpuThermal::default();
        assert!(!g.sample(Some(79.0), Some(80.0), 5.0));
        assert!(g.sample(Some(81.0), Some(80.0), 5.0));
        assert!(g.sample(Some(77.0), Some(80.0), 5.0));
        assert!(!g.sample(Some(74.0), Some(80.0), 5.0));
        assert!(!g.sample(Some(79.0), Some(80.0), 5.0));
        assert!(g.sample(Some(85.0), Some(80.0), 5.0));
        assert!(!g.sample(None, Some(80.0), 5.0));
        assert!(!g.sample(Some(95.0), None, 5.0));
    }
}
