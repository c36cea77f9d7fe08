//! CPU throttling: the `cpu_usage_limit` preference (percent; 100 means off) caps the CPU the
//! running apps use.
//!
//! Two mechanisms, chosen once, the first time a limit below 100 is in force (and logged with
//! the reason):
//!
//! - **cgroup v2**: when the daemon may create a child of its own cgroup with the `cpu`
//!   controller (enabled in the parent's `cgroup.subtree_control`), every app's process group
//!   goes into `<own cgroup>/ferrite-apps`, whose `cpu.max` allows `limit %` of one CPU per
//!   CPU the running apps use. The kernel then spreads the pauses finely (100 ms periods).
//! - **stopping apps in turn** otherwise (`ferrite_sched::rotation`): of `n` running apps,
//!   about `limit % × n` run at any moment and the others are stopped (SIGSTOP); which ones
//!   rotates, so each app runs `limit %` of every cycle of `n` seconds and is continued
//!   (SIGCONT) for its turn. The load stays level instead of jumping between all and
//!   nothing. A single app cannot be split: it gets the official client's one-second duty
//!   cycle (runs `limit %` of each second, stopped for the rest).
//!
//! The throttle only ever stops groups whose task is running, and only ever continues groups
//! it stopped itself while their task runs (or is exiting): a task suspended by the user or
//! by the scheduler stays stopped; one the throttle had stopped when it was suspended stays
//! stopped until it may run again. Apps of versions marked `dont_throttle` and GPU apps are
//! never throttled (as in the official client).

use std::collections::HashSet;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use ferrite_proto::client_state::ClientState;
use ferrite_sched::rotation;
use ferrite_supervise::TaskState;
use tracing::{info, warn};

use crate::tasks::TaskTable;

/// The name of the apps' cgroup, under the daemon's own.
pub const CGROUP_NAME: &str = "ferrite-apps";

/// The duty cycle's period, and the rotation's slot, seconds (the official client's
/// resolution).
pub const DUTY_PERIOD: f64 = 1.0;

/// The `cpu.max` period, microseconds.
pub const CPU_MAX_PERIOD_US: u64 = 100_000;

/// Where the duty cycle stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Phase {
    /// The apps may run now.
    pub on: bool,
    /// Seconds until the phase changes (infinite when never).
    pub switch_in: f64,
}

/// The duty cycle `since` seconds after it began: each `period` starts with `limit_pct %` of
/// it running, then stopped. A limit of 100 % or more (or not above 0) is always on.
pub fn duty_phase(limit_pct: f64, period: f64, since: f64) -> Phase {
    if !(limit_pct > 0.0 && limit_pct < 100.0) || period <= 0.0 {
        return Phase {
            on: true,
            switch_in: f64::INFINITY,
        };
    }
    let on_len = period * limit_pct / 100.0;
    let pos = since.max(0.0).rem_euclid(period);
    if pos < on_len {
        Phase {
            on: true,
            switch_in: on_len - pos,
        }
    } else {
        Phase {
            on: false,
            switch_in: period - pos,
        }
    }
}

/// The `cpu.max` line for `limit_pct %` of `ncpus` CPUs (at least one): `"QUOTA PERIOD"`, or
/// `"max PERIOD"` when there is no limit. The quota is at least 1 ms (the kernel's minimum).
pub fn cpu_max(limit_pct: f64, ncpus: f64, period_us: u64) -> String {
    if !(limit_pct > 0.0 && limit_pct < 100.0) {
        return format!("max {period_us}");
    }
    let quota = (limit_pct / 100.0 * period_us as f64 * ncpus.max(1.0)).round();
    format!("{} {period_us}", quota.max(1000.0) as u64)
}

/// The daemon's cgroup v2 path from the text of `/proc/self/cgroup` (the `0::PATH` line).
pub fn own_cgroup_path(proc_self_cgroup: &str) -> Option<String> {
    proc_self_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().to_owned())
}

/// Where the cgroup v2 hierarchy is mounted under `sys_fs_cgroup` (`/sys/fs/cgroup` itself on
/// a unified system, its `unified` folder on a hybrid one).
pub fn cgroup2_mount(sys_fs_cgroup: &Path) -> Option<PathBuf> {
    [sys_fs_cgroup.to_path_buf(), sys_fs_cgroup.join("unified")]
        .into_iter()
        .find(|p| p.join("cgroup.controllers").is_file())
}

fn has_word(text: &str, word: &str) -> bool {
    text.split_whitespace().any(|w| w == word)
}

/// Whether the apps can be put into a child cgroup of `own` (a path inside the cgroup v2
/// hierarchy mounted at `root`) with a CPU limit. On success returns the child's directory,
/// created if needed, with `cpu.max` writable; otherwise why not. It may enable the `cpu`
/// controller in the parent's `cgroup.subtree_control` when the parent offers it.
pub fn probe_cgroup(root: &Path, own: &str) -> Result<PathBuf, String> {
    let parent = root.join(own.trim_start_matches('/'));
    let controllers = fs::read_to_string(parent.join("cgroup.controllers"))
        .map_err(|e| format!("no cgroup v2 hierarchy at {}: {e}", parent.display()))?;
    let subtree = parent.join("cgroup.subtree_control");
    let enabled = fs::read_to_string(&subtree).unwrap_or_default();
    if !has_word(&enabled, "cpu") {
        if !has_word(&controllers, "cpu") {
            return Err(format!(
                "the cpu controller is not available in {} (controllers: {:?})",
                parent.display(),
                controllers.trim()
            ));
        }
        let wrote = write_file(&subtree, "+cpu");
        let now = fs::read_to_string(&subtree).unwrap_or_default();
        match wrote {
            Ok(()) if has_word(&now, "cpu") => {}
            Ok(()) => {
                return Err(format!(
                    "the cpu controller could not be enabled in {}",
                    subtree.display()
                ))
            }
            Err(e) => {
                return Err(format!(
                    "the cpu controller is not enabled in {} and cannot be: {e}",
                    subtree.display()
                ))
            }
        }
    }
    let child = parent.join(CGROUP_NAME);
    match fs::create_dir(&child) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", child.display())),
    }
    fs::OpenOptions::new()
        .write(true)
        .open(child.join("cpu.max"))
        .map_err(|e| format!("cannot write {}: {e}", child.join("cpu.max").display()))?;
    Ok(child)
}

/// One app's process group, as the throttle sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The process group (the app's main PID).
    pub pgid: i32,
    /// What the supervisor asks of the app.
    pub state: TaskState,
    /// The supervisor itself stopped the group with SIGSTOP (a suspend).
    pub stopped_by_supervisor: bool,
    /// CPUs the app uses (its version's `avg_ncpus`).
    pub ncpus: f64,
    /// Never throttled (`dont_throttle` versions, GPU apps).
    pub exempt: bool,
}

/// The live tasks' process groups.
pub fn groups(tasks: &TaskTable, state: &ClientState) -> Vec<Group> {
    let look = crate::lookup::StateLookup::new(state);
    tasks
        .live
        .iter()
        .map(|((url, name), l)| {
            let av = look.app_version_of(url, name);
            Group {
                pgid: l.task.pid(),
                state: l.task.state(),
                stopped_by_supervisor: l.task.is_stopped_by_signal(),
                ncpus: av.map_or(1.0, |v| v.usage.avg_ncpus.max(0.0)),
                exempt: av.is_some_and(|v| {
                    v.dont_throttle || v.usage.coprocs.iter().any(|c| c.count > 0.0)
                }),
            }
        })
        .collect()
}

/// A signal the throttle sends to a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// SIGSTOP.
    Stop(i32),
    /// SIGCONT.
    Cont(i32),
}

/// The throttle's signals for `groups` when the running ones among them may run if `runs`
/// says so, given the groups it has stopped (`stopped`, updated). Running groups follow
/// `runs`; groups being asked to exit are
/// continued so they can; a suspended group stays as it is (if the supervisor stopped it
/// too, the supervisor's resume continues it, so the throttle forgets it); groups gone are
/// forgotten.
pub fn plan(
    runs: impl Fn(&Group) -> bool,
    groups: &[Group],
    stopped: &mut HashSet<i32>,
) -> Vec<Action> {
    let mut out = Vec::new();
    for g in groups {
        let mine = stopped.contains(&g.pgid);
        match g.state {
            TaskState::Running if g.exempt || runs(g) => {
                if mine {
                    stopped.remove(&g.pgid);
                    out.push(Action::Cont(g.pgid));
                }
            }
            TaskState::Running => {
                if !mine {
                    stopped.insert(g.pgid);
                    out.push(Action::Stop(g.pgid));
                }
            }
            TaskState::QuitPending | TaskState::AbortPending => {
                if mine {
                    stopped.remove(&g.pgid);
                    out.push(Action::Cont(g.pgid));
                }
            }
            TaskState::Suspended => {
                if mine && g.stopped_by_supervisor {
                    stopped.remove(&g.pgid);
                }
            }
            TaskState::Exited => {
                stopped.remove(&g.pgid);
            }
        }
    }
    stopped.retain(|p| groups.iter().any(|g| g.pgid == *p));
    out
}

/// How the limit is carried out.
#[derive(Debug, Clone, PartialEq)]
enum Mechanism {
    /// Apps in this cgroup directory, limited by its `cpu.max`.
    Cgroup(PathBuf),
    /// SIGSTOP/SIGCONT, the running apps in turn.
    Signals,
}

/// The throttle's state.
#[derive(Debug)]
pub struct Throttle {
    /// The limit in force, percent (100: off): the preferences' limit times the thermal share.
    limit: f64,
    /// `cpu_usage_limit` (or its not-in-use value), percent.
    prefs_limit: f64,
    /// The share the temperature limit allows, percent (100: no hold).
    thermal_share: f64,
    /// Chosen at the first limit below 100.
    mechanism: Option<Mechanism>,
    /// The cgroup v2 mount to probe (`/sys/fs/cgroup`, or `FERRITE_CGROUP_ROOT`).
    cgroup_root: PathBuf,
    /// When the duty cycle or rotation began (wall time).
    cycle_start: f64,
    /// The throttled running groups in the rotation's order (by process group), as last
    /// polled.
    turns: Vec<i32>,
    /// Groups the throttle stopped.
    stopped: HashSet<i32>,
    /// Groups moved into the cgroup.
    moved: HashSet<i32>,
    /// The `cpu.max` last written.
    cpu_max: String,
}

impl Default for Throttle {
    fn default() -> Throttle {
        Throttle::new()
    }
}

impl Throttle {
    /// No limit yet. `FERRITE_CGROUP_ROOT` names another cgroup v2 mount to probe (tests).
    pub fn new() -> Throttle {
        let cgroup_root = std::env::var_os("FERRITE_CGROUP_ROOT")
            .map_or_else(|| PathBuf::from("/sys/fs/cgroup"), PathBuf::from);
        Throttle {
            limit: 100.0,
            prefs_limit: 100.0,
            thermal_share: 100.0,
            mechanism: None,
            cgroup_root,
            cycle_start: 0.0,
            turns: Vec::new(),
            stopped: HashSet::new(),
            moved: HashSet::new(),
            cpu_max: String::new(),
        }
    }

    /// The limit in force, percent.
    pub fn limit(&self) -> f64 {
        self.limit
    }

    /// Whether [`poll`](Self::poll) has anything to do: a limit is in force, or groups it
    /// stopped or a `cpu.max` it set are still to be undone.
    pub fn wants_poll(&self) -> bool {
        self.mechanism.is_some()
            && (self.limit < 100.0 || !self.stopped.is_empty() || self.cpu_max_pending())
    }

    fn cpu_max_pending(&self) -> bool {
        matches!(self.mechanism, Some(Mechanism::Cgroup(_)))
            && self.cpu_max != cpu_max(self.limit, 1.0, CPU_MAX_PERIOD_US)
            && self.limit >= 100.0
    }

    /// Sets the preferences' limit (`GlobalPrefs::effective_cpu_usage_limit`); the first limit
    /// below 100 chooses the mechanism and logs it.
    pub fn set_limit(&mut self, pct: f64, t: f64) {
        let pct = if pct > 0.0 && pct < 100.0 { pct } else { 100.0 };
        if pct == self.prefs_limit {
            return;
        }
        let was = self.prefs_limit;
        self.prefs_limit = pct;
        if pct >= 100.0 {
            info!("CPU throttling off (cpu_usage_limit 100%)");
        } else if self.mechanism.is_some() {
            if was < 100.0 {
                info!("CPU throttling now at {pct:.0}%");
            } else {
                info!("CPU throttling on again at {pct:.0}%");
            }
        }
        self.apply(t, true);
    }

    /// Sets the share the temperature limit allows, percent (rounded to whole percent; 100:
    /// none). The thermal module logs its own changes; the duty cycle keeps its phase.
    pub fn set_thermal_share(&mut self, share: f64, t: f64) {
        let share = if share > 0.0 && share < 100.0 {
            share.round().clamp(1.0, 100.0)
        } else {
            100.0
        };
        if share == self.thermal_share {
            return;
        }
        self.thermal_share = share;
        self.apply(t, false);
    }

    /// Puts the product of the two limits in force.
    fn apply(&mut self, t: f64, restart_cycle: bool) {
        let pct = self.prefs_limit * self.thermal_share / 100.0;
        let pct = if pct > 0.0 && pct < 100.0 { pct } else { 100.0 };
        if pct == self.limit {
            return;
        }
        if restart_cycle || self.limit >= 100.0 {
            self.cycle_start = t;
        }
        self.limit = pct;
        if pct < 100.0 && self.mechanism.is_none() {
            self.mechanism = Some(self.choose(pct));
        }
    }

    fn choose(&self, pct: f64) -> Mechanism {
        let own = fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|s| own_cgroup_path(&s));
        let probe = match (own, cgroup2_mount(&self.cgroup_root)) {
            (None, _) => Err("the daemon is in no cgroup v2 (/proc/self/cgroup)".to_owned()),
            (_, None) => Err(format!(
                "no cgroup v2 hierarchy under {}",
                self.cgroup_root.display()
            )),
            (Some(own), Some(root)) => probe_cgroup(&root, &own),
        };
        match probe {
            Ok(dir) => {
                info!(
                    "CPU throttling at {pct:.0}% with cgroup v2: apps run in {} limited by cpu.max",
                    dir.display()
                );
                Mechanism::Cgroup(dir)
            }
            Err(why) => {
                info!(
                    "CPU throttling at {pct:.0}% by stopping apps in turn (SIGSTOP/SIGCONT): \
                     about {pct:.0}% of the running apps run at any moment, each for \
                     {pct:.0}% of every cycle (a single app: of every second), because {why}"
                );
                Mechanism::Signals
            }
        }
    }

    /// When the next app's turn starts or ends (wall time), if apps are stopped in turn.
    pub fn next_switch(&self, t: f64) -> Option<f64> {
        if self.mechanism != Some(Mechanism::Signals) || self.limit >= 100.0 {
            return None;
        }
        let since = t - self.cycle_start;
        let n = self.turns.len();
        let switch_in = if n == 0 {
            duty_phase(self.limit, DUTY_PERIOD, since).switch_in
        } else {
            (0..n)
                .map(|i| rotation::turn(self.limit / 100.0, n, i, DUTY_PERIOD, since).switch_in)
                .fold(f64::INFINITY, f64::min)
        };
        Some(t + switch_in.max(0.001))
    }

    /// Carries out the limit for the live groups at wall time `t` (call every loop turn).
    pub fn poll(&mut self, groups: &[Group], t: f64) {
        match self.mechanism.clone() {
            None => {}
            Some(Mechanism::Signals) => {
                let order = rotation_order(groups);
                let (share, n, since) = (self.limit / 100.0, order.len(), t - self.cycle_start);
                let runs = |g: &Group| {
                    order.binary_search(&g.pgid).map_or(true, |i| {
                        rotation::turn(share, n, i, DUTY_PERIOD, since).runs
                    })
                };
                self.signal(runs, groups);
                self.turns = order;
            }
            Some(Mechanism::Cgroup(dir)) => {
                if let Err(e) = self.cgroup(&dir, groups) {
                    warn!(
                        "CPU throttling with cgroup {} failed ({e}); stopping apps in turn \
                         (SIGSTOP/SIGCONT) instead",
                        dir.display()
                    );
                    let _ = write_file(
                        &dir.join("cpu.max"),
                        &cpu_max(100.0, 1.0, CPU_MAX_PERIOD_US),
                    );
                    self.mechanism = Some(Mechanism::Signals);
                    self.cycle_start = t;
                }
            }
        }
    }

    /// Lets every group the throttle holds run again (before the apps are stopped at exit,
    /// so they can act on the quit).
    pub fn release(&mut self, groups: &[Group]) {
        let all: Vec<Group> = groups
            .iter()
            .map(|g| Group {
                state: TaskState::QuitPending,
                ..g.clone()
            })
            .collect();
        self.signal(|_| true, &all);
        if let Some(Mechanism::Cgroup(dir)) = &self.mechanism {
            let _ = write_file(
                &dir.join("cpu.max"),
                &cpu_max(100.0, 1.0, CPU_MAX_PERIOD_US),
            );
        }
    }

    fn signal(&mut self, runs: impl Fn(&Group) -> bool, groups: &[Group]) {
        for a in plan(runs, groups, &mut self.stopped) {
            let (pgid, sig) = match a {
                Action::Stop(p) => (p, libc::SIGSTOP),
                Action::Cont(p) => (p, libc::SIGCONT),
            };
            if let Err(e) = ferrite_supervise::process::signal_group(pgid, sig) {
                warn!("CPU throttling: cannot signal process group {pgid}: {e}");
            }
        }
    }

    fn cgroup(&mut self, dir: &Path, groups: &[Group]) -> std::io::Result<()> {
        let ncpus: f64 = groups
            .iter()
            .filter(|g| g.state == TaskState::Running && !g.exempt)
            .map(|g| g.ncpus)
            .sum();
        let line = cpu_max(self.limit, ncpus, CPU_MAX_PERIOD_US);
        if line != self.cpu_max {
            write_file(&dir.join("cpu.max"), &line)?;
            self.cpu_max = line;
        }
        self.moved.retain(|p| groups.iter().any(|g| g.pgid == *p));
        if self.limit >= 100.0 {
            return Ok(());
        }
        let new: Vec<i32> = groups
            .iter()
            .filter(|g| !g.exempt && g.state != TaskState::Exited && !self.moved.contains(&g.pgid))
            .map(|g| g.pgid)
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        for pid in processes_in_groups(Path::new("/proc"), &new) {
            match write_file(&dir.join("cgroup.procs"), &pid.to_string()) {
                Ok(()) => {}
                // It exited meanwhile.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => return Err(e),
            }
        }
        self.moved.extend(new);
        Ok(())
    }
}

/// The process groups that take turns: the running ones the limit applies to, in a stable
/// order (by process group).
pub fn rotation_order(groups: &[Group]) -> Vec<i32> {
    let mut out: Vec<i32> = groups
        .iter()
        .filter(|g| g.state == TaskState::Running && !g.exempt)
        .map(|g| g.pgid)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn write_file(path: &Path, text: &str) -> std::io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
}

/// The processes (under `proc_root`) whose process group is one of `pgids`.
pub fn processes_in_groups(proc_root: &Path, pgids: &[i32]) -> Vec<i32> {
    let Ok(dir) = fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // After the command name: state, ppid, pgrp.
        let pgrp = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(2))
            .and_then(|x| x.parse::<i32>().ok());
        if pgrp.is_some_and(|g| pgids.contains(&g)) {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn the_duty_cycle_runs_limit_percent_of_each_period() {
        let p = duty_phase(30.0, 1.0, 0.0);
        assert!(p.on && close(p.switch_in, 0.3));
        let p = duty_phase(30.0, 1.0, 0.1);
        assert!(p.on && close(p.switch_in, 0.2));
        let p = duty_phase(30.0, 1.0, 0.3);
        assert!(!p.on && close(p.switch_in, 0.7));
        let p = duty_phase(30.0, 1.0, 0.95);
        assert!(!p.on && close(p.switch_in, 0.05));
        // The next period starts on again.
        let p = duty_phase(30.0, 1.0, 7.05);
        assert!(p.on && close(p.switch_in, 0.25));
        // Sampled finely, the on share is the limit.
        for limit in [1.0, 25.0, 50.0, 75.0, 99.0] {
            let n = 100_000;
            let on = (0..n)
                .filter(|i| duty_phase(limit, 1.0, *i as f64 * 3.0 / n as f64).on)
                .count();
            let share = on as f64 / n as f64 * 100.0;
            assert!((share - limit).abs() < 0.01, "{limit}: {share}");
        }
    }

    #[test]
    fn a_limit_of_100_or_out_of_range_never_stops() {
        for limit in [100.0, 150.0, 0.0, -5.0, f64::NAN] {
            for since in [0.0, 0.5, 0.99, 12.3] {
                let p = duty_phase(limit, 1.0, since);
                assert!(p.on, "{limit}");
                assert!(p.switch_in.is_infinite());
            }
        }
        // A clock step backwards does not stop the apps for long.
        let p = duty_phase(50.0, 1.0, -3.0);
        assert!(p.on && close(p.switch_in, 0.5));
    }

    #[test]
    fn cpu_max_scales_with_the_cpus_in_use() {
        assert_eq!(cpu_max(30.0, 1.0, 100_000), "30000 100000");
        assert_eq!(cpu_max(30.0, 4.0, 100_000), "120000 100000");
        assert_eq!(cpu_max(30.0, 0.0, 100_000), "30000 100000");
        assert_eq!(cpu_max(50.0, 0.5, 100_000), "50000 100000");
        assert_eq!(cpu_max(0.1, 1.0, 100_000), "1000 100000");
        assert_eq!(cpu_max(100.0, 4.0, 100_000), "max 100000");
        assert_eq!(cpu_max(0.0, 4.0, 100_000), "max 100000");
    }

    #[test]
    fn the_own_cgroup_is_the_unified_line() {
        let text = "12:cpu,cpuacct:/x\n0::/system.slice/ferrite.service\n";
        assert_eq!(
            own_cgroup_path(text).as_deref(),
            Some("/system.slice/ferrite.service")
        );
        assert_eq!(own_cgroup_path("4:memory:/a\n"), None);
    }

    fn group(pgid: i32, state: TaskState) -> Group {
        Group {
            pgid,
            state,
            stopped_by_supervisor: false,
            ncpus: 1.0,
            exempt: false,
        }
    }

    #[test]
    fn running_groups_follow_the_phase() {
        let mut stopped = HashSet::new();
        let gs = [group(10, TaskState::Running), group(11, TaskState::Running)];
        assert_eq!(
            plan(|_| false, &gs, &mut stopped),
            vec![Action::Stop(10), Action::Stop(11)]
        );
        // Nothing more while off.
        assert_eq!(plan(|_| false, &gs, &mut stopped), vec![]);
        assert_eq!(
            plan(|_| true, &gs, &mut stopped),
            vec![Action::Cont(10), Action::Cont(11)]
        );
        assert_eq!(plan(|_| true, &gs, &mut stopped), vec![]);
        assert!(stopped.is_empty());
    }

    #[test]
    fn suspended_groups_are_never_continued_or_stopped() {
        let mut stopped = HashSet::new();
        // Suspended by the user while running: the throttle leaves it alone in both phases.
        let mut user = group(20, TaskState::Suspended);
        user.stopped_by_supervisor = true;
        assert_eq!(plan(|_| false, &[user.clone()], &mut stopped), vec![]);
        assert_eq!(plan(|_| true, &[user.clone()], &mut stopped), vec![]);
        assert!(stopped.is_empty());

        // Stopped by the throttle, then suspended (an API app, not stopped by the
        // supervisor): it stays stopped through "on" phases…
        let gs = [group(21, TaskState::Running)];
        assert_eq!(plan(|_| false, &gs, &mut stopped), vec![Action::Stop(21)]);
        let gs = [group(21, TaskState::Suspended)];
        assert_eq!(plan(|_| true, &gs, &mut stopped), vec![]);
        assert_eq!(plan(|_| true, &gs, &mut stopped), vec![]);
        // …and is continued once it may run again (the supervisor does not know the
        // throttle stopped it).
        let gs = [group(21, TaskState::Running)];
        assert_eq!(plan(|_| true, &gs, &mut stopped), vec![Action::Cont(21)]);

        // Stopped by the throttle, then suspended and stopped by the supervisor (no API): the
        // supervisor's resume continues it, so the throttle forgets it and stops it again
        // in the next "off" phase.
        let gs = [group(22, TaskState::Running)];
        assert_eq!(plan(|_| false, &gs, &mut stopped), vec![Action::Stop(22)]);
        let mut s = group(22, TaskState::Suspended);
        s.stopped_by_supervisor = true;
        assert_eq!(plan(|_| true, &[s], &mut stopped), vec![]);
        assert!(!stopped.contains(&22));
        let gs = [group(22, TaskState::Running)];
        assert_eq!(plan(|_| false, &gs, &mut stopped), vec![Action::Stop(22)]);
    }

    #[test]
    fn exiting_groups_are_continued_and_gone_ones_forgotten() {
        let mut stopped = HashSet::new();
        let gs = [group(30, TaskState::Running), group(31, TaskState::Running)];
        plan(|_| false, &gs, &mut stopped);
        let gs = [
            group(30, TaskState::QuitPending),
            group(31, TaskState::AbortPending),
        ];
        assert_eq!(
            plan(|_| false, &gs, &mut stopped),
            vec![Action::Cont(30), Action::Cont(31)]
        );
        let gs = [group(32, TaskState::Running)];
        plan(|_| false, &gs, &mut stopped);
        assert_eq!(plan(|_| false, &[], &mut stopped), vec![]);
        assert!(stopped.is_empty());
    }

    #[test]
    fn exempt_groups_are_never_stopped() {
        let mut stopped = HashSet::new();
        let mut gpu = group(40, TaskState::Running);
        gpu.exempt = true;
        assert_eq!(plan(|_| false, &[gpu], &mut stopped), vec![]);
    }

    /// A fake cgroup v2 tree: `root/<own>` with the given controllers and enabled controllers.
    fn tree(own: &str, controllers: &str, enabled: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join(own.trim_start_matches('/'));
        fs::create_dir_all(&p).expect("mkdir");
        fs::write(p.join("cgroup.controllers"), controllers).expect("controllers");
        fs::write(p.join("cgroup.subtree_control"), enabled).expect("subtree");
        d
    }

    #[test]
    fn the_cgroup_probe_needs_a_v2_tree_with_the_cpu_controller() {
        let empty = tempfile::tempdir().expect("tempdir");
        let e = probe_cgroup(empty.path(), "/a").expect_err("no tree");
        assert!(e.contains("no cgroup v2 hierarchy"), "{e}");

        let d = tree("/a/b", "memory io\n", "memory\n");
        let e = probe_cgroup(d.path(), "/a/b").expect_err("no cpu");
        assert!(e.contains("cpu controller is not available"), "{e}");

        // Offered but not enabled: enabling is tried (a plain file does not become "cpu",
        // as the kernel refuses when the cgroup has processes of its own).
        let d = tree("/a/b", "cpu memory\n", "memory\n");
        let e = probe_cgroup(d.path(), "/a/b").expect_err("not enabled");
        assert!(e.contains("could not be enabled"), "{e}");

        // Enabled: the child is created; it must offer a writable cpu.max (the kernel makes
        // one; in this tree it is missing).
        let d = tree("/a/b", "cpu memory\n", "cpu memory\n");
        let e = probe_cgroup(d.path(), "/a/b").expect_err("no cpu.max");
        assert!(e.contains("cpu.max"), "{e}");
        let child = d.path().join("a/b").join(CGROUP_NAME);
        assert!(child.is_dir());
        fs::write(child.join("cpu.max"), "max 100000\n").expect("cpu.max");
        assert_eq!(probe_cgroup(d.path(), "/a/b"), Ok(child));

        // The root cgroup itself.
        let d = tree("/", "cpu\n", "cpu\n");
        fs::create_dir(d.path().join(CGROUP_NAME)).expect("mkdir");
        fs::write(d.path().join(CGROUP_NAME).join("cpu.max"), "max\n").expect("cpu.max");
        assert_eq!(probe_cgroup(d.path(), "/"), Ok(d.path().join(CGROUP_NAME)));
    }

    #[test]
    fn the_v2_mount_is_found_on_unified_and_hybrid_layouts() {
        let d = tempfile::tempdir().expect("tempdir");
        assert_eq!(cgroup2_mount(d.path()), None);
        fs::create_dir(d.path().join("unified")).expect("mkdir");
        fs::write(d.path().join("unified/cgroup.controllers"), "").expect("file");
        assert_eq!(cgroup2_mount(d.path()), Some(d.path().join("unified")));
        fs::write(d.path().join("cgroup.controllers"), "cpu").expect("file");
        assert_eq!(cgroup2_mount(d.path()), Some(d.path().to_path_buf()));
    }

    #[test]
    fn the_cgroup_mechanism_writes_cpu_max_and_moves_the_groups() {
        let d = tree("/svc", "cpu\n", "cpu\n");
        let child = d.path().join("svc").join(CGROUP_NAME);
        fs::create_dir(&child).expect("mkdir");
        fs::write(child.join("cpu.max"), "max 100000\n").expect("cpu.max");
        fs::write(child.join("cgroup.procs"), "").expect("procs");
        let dir = probe_cgroup(d.path(), "/svc").expect("probe");
        let mut t = Throttle::new();
        t.limit = 25.0;
        t.mechanism = Some(Mechanism::Cgroup(dir.clone()));
        // A child in a process group of its own stands in for an app (the test process's
        // own group also holds other tests' short-lived children).
        use std::os::unix::process::CommandExt;
        let mut app = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let pgid = app.id() as i32;
        let gs = [
            group(pgid, TaskState::Running),
            group(i32::MAX - 7, TaskState::Running),
        ];
        t.poll(&gs, 0.0);
        assert_eq!(
            fs::read_to_string(dir.join("cpu.max")).expect("read"),
            "50000 100000"
        );
        // The app's one process was written (a plain file keeps only the last).
        let moved: i32 = fs::read_to_string(dir.join("cgroup.procs"))
            .expect("read")
            .parse()
            .expect("pid");
        let _ = app.kill();
        let _ = app.wait();
        assert_eq!(moved, pgid);
        assert!(t.moved.contains(&pgid));
        assert_eq!(t.next_switch(0.0), None, "no duty cycle with a cgroup");
    }

    /// The state letter of process `pid` (`T` when stopped).
    fn proc_state(pid: i32) -> char {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        stat.rfind(')')
            .and_then(|i| stat[i + 1..].trim_start().chars().next())
            .expect("state")
    }

    /// Polls until `pid` is in `state` (signals are delivered asynchronously).
    fn wait_state(pid: i32, state: char) -> bool {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < end {
            if proc_state(pid) == state {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn without_a_cgroup_the_running_apps_are_stopped_in_turn() {
        use std::os::unix::process::CommandExt;
        let spawn = || {
            std::process::Command::new("sleep")
                .arg("60")
                .process_group(0)
                .spawn()
                .expect("spawn sleep")
        };
        let mut apps = [spawn(), spawn()];
        let mut pids: Vec<i32> = apps.iter().map(|a| a.id() as i32).collect();
        pids.sort_unstable();
        let gs: Vec<Group> = pids.iter().map(|p| group(*p, TaskState::Running)).collect();
        let mut t = Throttle::new();
        t.mechanism = Some(Mechanism::Signals);
        t.set_limit(50.0, 100.0);
        // Two apps at 50 %: the first runs the first second of each two, the second the next
        // (the duty cycle would stop both together).
        t.poll(&gs, 100.2);
        let first = (wait_state(pids[1], 'T'), proc_state(pids[0]));
        assert_eq!(
            t.next_switch(100.2).map(|s| (s * 10.0).round()),
            Some(1010.0)
        );
        t.poll(&gs, 101.2);
        let second = (wait_state(pids[0], 'T'), wait_state(pids[1], 'S'));
        t.release(&gs);
        let released = (wait_state(pids[0], 'S'), wait_state(pids[1], 'S'));
        for a in &mut apps {
            let _ = a.kill();
            let _ = a.wait();
        }
        assert!(first.0 && first.1 != 'T', "{first:?}");
        assert!(second.0 && second.1, "{second:?}");
        assert!(released.0 && released.1, "{released:?}");
    }

    #[test]
    fn the_thermal_share_scales_the_limit_without_restarting_the_duty_cycle() {
        let mut t = Throttle::new();
        t.mechanism = Some(Mechanism::Signals);
        t.set_limit(50.0, 10.0);
        assert!(close(t.limit(), 50.0));
        assert!(close(t.cycle_start, 10.0));
        // The temperature allows 60 % of that: 30 %, in the same cycle.
        t.set_thermal_share(59.6, 12.4);
        assert!(close(t.limit(), 30.0), "{}", t.limit());
        assert!(close(t.cycle_start, 10.0));
        // Alone, the thermal share is the limit; at 100 % it lets go.
        t.set_limit(100.0, 20.0);
        assert!(close(t.limit(), 60.0));
        t.set_thermal_share(100.0, 21.0);
        assert!(close(t.limit(), 100.0));
        assert!(!t.wants_poll() || !t.stopped.is_empty());
    }
}
