//! Reading `/proc`: per-process stat lines, and the CPU time, working set and member list of a
//! task's whole process tree (its process group plus any descendant that left the group).

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io;
use std::path::PathBuf;

/// The fields of `/proc/PID/stat` the supervisor needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    /// Process ID.
    pub pid: i32,
    /// Command name (at most 15 chars).
    pub comm: String,
    /// State letter (R, S, D, T, t, Z, …).
    pub state: char,
    /// Parent PID.
    pub ppid: i32,
    /// Process group.
    pub pgrp: i32,
    /// Session.
    pub session: i32,
    /// User CPU, clock ticks.
    pub utime: u64,
    /// System CPU, clock ticks.
    pub stime: u64,
    /// CPU of waited-for children, clock ticks.
    pub cutime: u64,
    /// System CPU of waited-for children, clock ticks.
    pub cstime: u64,
    /// Nice value.
    pub nice: i64,
    /// Start time after boot, clock ticks; with the PID it identifies a process.
    pub starttime: u64,
    /// Resident pages.
    pub rss_pages: u64,
    /// Virtual memory size, bytes (what BOINC reports as a task's swap size).
    pub vsize: u64,
    /// Scheduling policy (0 normal, 5 SCHED_IDLE, …).
    pub policy: u32,
}

impl ProcStat {
    /// Parses a `/proc/PID/stat` line (the command may hold spaces and parentheses).
    pub fn parse(line: &str) -> Option<ProcStat> {
        let open = line.find('(')?;
        let close = line.rfind(')')?;
        let pid = line[..open].trim().parse().ok()?;
        let comm = line.get(open + 1..close)?.to_owned();
        let rest: Vec<&str> = line.get(close + 1..)?.split_whitespace().collect();
        // rest[0] is field 3 (state).
        let f = |n: usize| rest.get(n - 3).copied();
        let num = |n: usize| f(n).and_then(|s| s.parse::<u64>().ok());
        Some(ProcStat {
            pid,
            comm,
            state: f(3)?.chars().next()?,
            ppid: f(4)?.parse().ok()?,
            pgrp: f(5)?.parse().ok()?,
            session: f(6)?.parse().ok()?,
            utime: num(14)?,
            stime: num(15)?,
            cutime: f(16)?.parse::<i64>().ok()?.max(0) as u64,
            cstime: f(17)?.parse::<i64>().ok()?.max(0) as u64,
            nice: f(19)?.parse().ok()?,
            starttime: num(22)?,
            vsize: num(23)?,
            rss_pages: f(24)?.parse::<i64>().ok()?.max(0) as u64,
            policy: f(41).and_then(|s| s.parse().ok()).unwrap_or(0),
        })
    }

    /// Reads one process; `None` if it is gone.
    pub fn read(pid: i32) -> Option<ProcStat> {
        let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        ProcStat::parse(&text)
    }

    /// Total CPU seconds (own + reaped children).
    pub fn cpu_seconds(&self) -> f64 {
        (self.utime + self.stime + self.cutime + self.cstime) as f64 / clock_ticks()
    }

    /// Whether the process is a zombie or dead (counts as not running).
    pub fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Every process currently visible in `/proc`.
pub fn scan_all() -> Vec<ProcStat> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(ProcStat::read)
        .collect()
}

/// Seconds a process's threads spent on a CPU plus waiting for one on a run queue
/// (`/proc/PID/task/*/schedstat`, whose first two fields are those times in nanoseconds).
/// A sleeping process accrues neither; a busy one accrues one or the other however loaded the
/// machine is, so its growth tells a process that wants no CPU from one that gets little.
/// `None` when the process is gone or the kernel keeps no such figures.
pub fn cpu_demand_seconds(pid: i32) -> Option<f64> {
    let dir = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut ns: u64 = 0;
    let mut any = false;
    for entry in dir.flatten() {
        let Ok(text) = fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        if let Some(t) = parse_schedstat(&text) {
            ns = ns.saturating_add(t);
            any = true;
        }
    }
    any.then(|| ns as f64 / 1e9)
}

/// The time on a CPU plus the time waiting on a run queue, in nanoseconds, of one
/// `schedstat` line (`on-cpu wait timeslices`).
pub fn parse_schedstat(line: &str) -> Option<u64> {
    let mut f = line.split_whitespace().map(|s| s.parse::<u64>().ok());
    let on_cpu = f.next()??;
    let waiting = f.next()??;
    Some(on_cpu.saturating_add(waiting))
}

/// Kernel clock ticks per second.
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Page size in bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// A process identified robustly (PID + start time, so a reused PID is not mistaken for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcId {
    /// PID.
    pub pid: i32,
    /// Start time in clock ticks after boot.
    pub starttime: u64,
}

/// What one sample of a task's process tree found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TreeUsage {
    /// CPU seconds of all live members (own + reaped children).
    pub cpu_time: f64,
    /// Sum of the members' resident set sizes, bytes.
    pub working_set: u64,
    /// Sum of the members' virtual sizes, bytes (BOINC's swap size).
    pub swap_size: u64,
    /// Live members other than zombies.
    pub members: BTreeSet<ProcId>,
    /// Whether every live member is stopped (state T).
    pub all_stopped: bool,
}

/// Samples the tree of the task whose group is `pgid`: every process in the group, plus all
/// descendants (by PPID) of the group's members and of `extra_roots`.
pub fn sample_tree(pgid: i32, extra_roots: &[i32]) -> TreeUsage {
    sample_tree_in(&scan_all(), pgid, extra_roots)
}

/// [`sample_tree`] over a given process list (pure; used by tests).
pub fn sample_tree_in(procs: &[ProcStat], pgid: i32, extra_roots: &[i32]) -> TreeUsage {
    let mut children: HashMap<i32, Vec<&ProcStat>> = HashMap::new();
    for p in procs {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut selected: HashMap<i32, &ProcStat> = HashMap::new();
    let mut stack: Vec<&ProcStat> = procs
        .iter()
        .filter(|p| p.pgrp == pgid || extra_roots.contains(&p.pid))
        .collect();
    while let Some(p) = stack.pop() {
        if selected.insert(p.pid, p).is_none() {
            if let Some(kids) = children.get(&p.pid) {
                stack.extend(kids.iter().copied());
            }
        }
    }
    tally(selected.into_values())
}

/// The children of a process, from `/proc/PID/task/*/children` (empty if it is gone).
pub fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut kids = Vec::new();
    for t in tasks.filter_map(|t| t.ok()) {
        let path = t.path().join("children");
        if let Ok(text) = fs::read_to_string(path) {
            kids.extend(
                text.split_whitespace()
                    .filter_map(|k| k.parse::<i32>().ok()),
            );
        }
    }
    kids
}

/// Adds up the CPU time, working set and members of a set of processes; `all_stopped` only
/// when at least one is alive and every live one is stopped.
fn tally<'a>(procs: impl IntoIterator<Item = &'a ProcStat>) -> TreeUsage {
    let page = page_size();
    let mut usage = TreeUsage {
        all_stopped: true,
        ..TreeUsage::default()
    };
    let mut any = false;
    for p in procs {
        usage.cpu_time += p.cpu_seconds();
        if p.is_dead() {
            continue;
        }
        any = true;
        usage.working_set += p.rss_pages * page;
        usage.swap_size += p.vsize;
        usage.members.insert(ProcId {
            pid: p.pid,
            starttime: p.starttime,
        });
        if !matches!(p.state, 'T' | 't') {
            usage.all_stopped = false;
        }
    }
    usage.all_stopped &= any;
    usage
}

/// A cheaper [`sample_tree`] for periodic use: walks the children links from `roots` (the
/// leader and the members seen before) instead of scanning all of `/proc`. A process whose
/// parent died between two samples is found only by the full scan, which
/// is what the final sweep uses.
pub fn sample_tree_from(roots: &[i32]) -> TreeUsage {
    let mut seen: BTreeSet<i32> = BTreeSet::new();
    let mut stack: Vec<i32> = roots.to_vec();
    let mut procs = Vec::new();
    while let Some(pid) = stack.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if let Some(st) = ProcStat::read(pid) {
            stack.extend(children_of(pid));
            procs.push(st);
        }
    }
    tally(&procs)
}

/// The working directory of a process.
pub fn proc_cwd(pid: i32) -> io::Result<PathBuf> {
    fs::read_link(format!("/proc/{pid}/cwd"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn stat(pid: i32, ppid: i32, pgrp: i32, state: char, utime: u64) -> ProcStat {
        ProcStat {
            pid,
            comm: "x".into(),
            state,
            ppid,
            pgrp,
            session: pgrp,
            utime,
            stime: 0,
            cutime: 0,
            cstime: 0,
            nice: 0,
            starttime: pid as u64,
            rss_pages: 1,
            vsize: 4096,
            policy: 0,
        }
    }

    #[test]
    fn parses_stat_with_odd_command() {
        let line = "4242 (a b) c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 3 4 39 19 1 0 \
                    12345 1000000 321 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 5 0 0 0";
        let p = ProcStat::parse(line).unwrap();
        assert_eq!(p.pid, 4242);
        assert_eq!(p.comm, "a b) c)");
        assert_eq!(p.state, 'S');
        assert_eq!((p.ppid, p.pgrp), (1, 4242));
        assert_eq!((p.utime, p.stime, p.cutime, p.cstime), (250, 50, 3, 4));
        assert_eq!(p.nice, 19);
        assert_eq!(p.starttime, 12345);
        assert_eq!(p.rss_pages, 321);
        assert_eq!(p.vsize, 1_000_000);
        assert_eq!(p.policy, 5);
    }

    #[test]
    fn own_stat_is_readable() {
        let me = ProcStat::read(std::process::id() as i32).unwrap();
        assert_eq!(me.pid, std::process::id() as i32);
        assert!(me.rss_pages > 0);
        assert!(me.vsize >= me.rss_pages * page_size());
    }

    #[test]
    fn schedstat_counts_time_on_a_cpu_and_time_waiting_for_one() {
        assert_eq!(parse_schedstat("1500 2500 7\n"), Some(4000));
        assert_eq!(parse_schedstat("1500\n"), None, "no run-queue figure");
        assert_eq!(parse_schedstat("x 1 2"), None);
    }

    #[test]
    fn a_spinning_thread_demands_cpu_and_a_sleeping_process_does_not() {
        let me = std::process::id() as i32;
        let before = cpu_demand_seconds(me).expect("this kernel keeps schedstat");
        let spin_until = std::time::Instant::now() + std::time::Duration::from_millis(200);
        let mut x = 0u64;
        while std::time::Instant::now() < spin_until {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let after = cpu_demand_seconds(me).expect("still readable");
        // 200 ms of wall-clock time spent runnable: on a CPU or waiting for one.
        assert!(after - before >= 0.15, "{before} -> {after}");

        let mut child = std::process::Command::new("/bin/sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let pid = child.id() as i32;
        // Once it sleeps (its start-up done) it demands nothing more.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while ProcStat::read(pid).is_none_or(|p| p.state != 'S') {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never slept"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let first = cpu_demand_seconds(pid).expect("the child's figures");
        std::thread::sleep(std::time::Duration::from_millis(200));
        let second = cpu_demand_seconds(pid).expect("the child's figures");
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            second - first < 0.05,
            "a sleeping process: {first} -> {second}"
        );
        assert_eq!(cpu_demand_seconds(pid), None, "gone once reaped");
    }

    #[test]
    fn children_walk_finds_grandchildren() {
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 5 & sleep 5; wait"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut found = 0;
        for _ in 0..100 {
            found = sample_tree_from(&[pid]).members.len();
            if found == 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let full = sample_tree(ProcStat::read(pid).unwrap().pgrp, &[]);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found, 3);
        assert!(full.members.len() >= 3);
    }

    #[test]
    fn tree_includes_group_and_escaped_descendants() {
        let procs = vec![
            stat(10, 1, 10, 'R', 100),
            stat(11, 10, 10, 'T', 100),
            stat(12, 11, 12, 'S', 100), // left the group (setsid) but is a descendant
            stat(13, 12, 12, 'Z', 100), // zombie: CPU counts, not a member
            stat(20, 1, 20, 'R', 100),  // unrelated
        ];
        let u = sample_tree_in(&procs, 10, &[]);
        let pids: Vec<i32> = u.members.iter().map(|m| m.pid).collect();
        assert_eq!(pids, vec![10, 11, 12]);
        assert!((u.cpu_time - 400.0 / clock_ticks()).abs() < 1e-9);
        assert!(!u.all_stopped);
        let stopped = vec![stat(10, 1, 10, 'T', 0), stat(11, 10, 10, 'T', 0)];
        assert!(sample_tree_in(&stopped, 10, &[]).all_stopped);
        assert!(!sample_tree_in(&stopped, 99, &[]).all_stopped);
    }
}
