//! Resource limits imposed on this process by Linux control groups (v1 and v2), and the
//! CPU affinity mask: what a container may really use, as opposed to what the machine has.
//!
//! Both roots are parameters (`/proc` and `/sys/fs/cgroup` in production) so that tests read
//! fixture trees. Limits set on an ancestor cgroup apply too, so every level from the process's
//! cgroup up to the mount root is read and the tightest limit wins.

use std::path::{Path, PathBuf};

/// Limits found for the current process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CgroupLimits {
    /// CPU bandwidth limit in CPUs (quota / period), when one is set.
    pub cpu_quota: Option<f64>,
    /// Memory limit in bytes, when one is set (v1's "unlimited" sentinel counts as none).
    pub memory_limit: Option<u64>,
}

/// A line of `/proc/self/cgroup`: hierarchy controllers and path.
#[derive(Debug)]
struct Membership {
    /// Empty for the v2 unified hierarchy.
    controllers: Vec<String>,
    path: String,
}

fn parse_proc_cgroup(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut it = line.splitn(3, ':');
            let _id = it.next()?;
            let controllers = it.next()?;
            let path = it.next()?;
            Some(Membership {
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .collect(),
                path: path.to_owned(),
            })
        })
        .collect()
}

/// Directories from `base/path` up to `base`, deepest first. If the process's own path does
/// not exist under `base` (a container sees its host path in `/proc/self/cgroup` but has its
/// own cgroup mounted as the root), only `base` remains.
fn levels(base: &Path, path: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut rel = PathBuf::from(path.trim_start_matches('/'));
    loop {
        let dir = base.join(&rel);
        if dir.is_dir() {
            out.push(dir);
        }
        if !rel.pop() {
            break;
        }
    }
    out
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

fn min_opt<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b < a { b } else { a }),
        (a, None) => a,
        (None, b) => b,
    }
}

/// v1 reports "no limit" as a huge page-rounded number; anything at or above 2^60 is that.
const V1_UNLIMITED: u64 = 1 << 60;

fn v2_limits(dir: &Path) -> CgroupLimits {
    let cpu_quota = read_trimmed(&dir.join("cpu.max")).and_then(|s| {
        let mut it = s.split_whitespace();
        let quota = it.next()?;
        let period: f64 = it.next().and_then(|p| p.parse().ok()).unwrap_or(100_000.0);
        if quota == "max" || period <= 0.0 {
            return None;
        }
        quota.parse::<f64>().ok().map(|q| q / period)
    });
    let memory_limit = read_trimmed(&dir.join("memory.max")).and_then(|s| {
        if s == "max" {
            None
        } else {
            s.parse().ok()
        }
    });
    CgroupLimits {
        cpu_quota,
        memory_limit,
    }
}

fn v1_cpu(dir: &Path) -> Option<f64> {
    let quota: i64 = read_trimmed(&dir.join("cpu.cfs_quota_us"))?.parse().ok()?;
    let period: i64 = read_trimmed(&dir.join("cpu.cfs_period_us"))?.parse().ok()?;
    (quota > 0 && period > 0).then(|| quota as f64 / period as f64)
}

fn v1_memory(dir: &Path) -> Option<u64> {
    let limit: u64 = read_trimmed(&dir.join("memory.limit_in_bytes"))?
        .parse()
        .ok()?;
    (limit < V1_UNLIMITED).then_some(limit)
}

/// Reads the limits that apply to the current process. `proc_root` is normally `/proc`,
/// `cgroup_root` normally `/sys/fs/cgroup`. Missing files mean "no limit".
pub fn read_cgroup_limits(proc_root: &Path, cgroup_root: &Path) -> CgroupLimits {
    let Some(text) = read_trimmed(&proc_root.join("self/cgroup")) else {
        return CgroupLimits::default();
    };
    let mut limits = CgroupLimits::default();
    for m in parse_proc_cgroup(&text) {
        if m.controllers.is_empty() {
            // v2 unified hierarchy: mounted at the root, or at `unified` on hybrid systems.
            for base in [cgroup_root.to_path_buf(), cgroup_root.join("unified")] {
                for dir in levels(&base, &m.path) {
                    let l = v2_limits(&dir);
                    limits.cpu_quota = min_opt(limits.cpu_quota, l.cpu_quota);
                    limits.memory_limit = min_opt(limits.memory_limit, l.memory_limit);
                }
            }
            continue;
        }
        let wants_cpu = m.controllers.iter().any(|c| c == "cpu");
        let wants_mem = m.controllers.iter().any(|c| c == "memory");
        if !wants_cpu && !wants_mem {
            continue;
        }
        // The hierarchy is mounted under the joined controller list ("cpu,cpuacct"), often
        // with a symbolic link per controller; try both.
        let mut bases = vec![cgroup_root.join(m.controllers.join(","))];
        for c in &m.controllers {
            bases.push(cgroup_root.join(c));
        }
        let Some(base) = bases.into_iter().find(|b| b.is_dir()) else {
            continue;
        };
        for dir in levels(&base, &m.path) {
            if wants_cpu {
                limits.cpu_quota = min_opt(limits.cpu_quota, v1_cpu(&dir));
            }
            if wants_mem {
                limits.memory_limit = min_opt(limits.memory_limit, v1_memory(&dir));
            }
        }
    }
    limits
}

/// Number of CPUs in this process's affinity mask, if the kernel tells.
pub fn affinity_cpu_count() -> Option<u32> {
    // SAFETY: `cpu_set_t` is plain data; zeroed is a valid empty set, and the kernel writes
    // at most `size_of::<cpu_set_t>()` bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        u32::try_from(libc::CPU_COUNT(&set)).ok().filter(|&n| n > 0)
    }
}

/// The CPUs this process may really use: the online CPUs, narrowed by the affinity mask and
/// by a CPU quota. A fractional quota is rounded down (a 1.5-CPU container runs one task at
/// full speed rather than two throttled ones), but never below one CPU.
pub fn effective_ncpus(online: u32, affinity: Option<u32>, quota: Option<f64>) -> u32 {
    let mut n = online.max(1);
    if let Some(a) = affinity {
        n = n.min(a.max(1));
    }
    if let Some(q) = quota {
        if q.is_finite() && q > 0.0 {
            let q = (q.floor() as u32).max(1);
            n = n.min(q);
        }
    }
    n
}

/// Usable memory: physical RAM narrowed by a cgroup memory limit.
pub fn effective_memory(physical: u64, limit: Option<u64>) -> u64 {
    match limit {
        Some(l) if l > 0 && l < physical => l,
        _ => physical,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_ncpus_takes_the_tightest_bound() {
        assert_eq!(effective_ncpus(8, None, None), 8);
        assert_eq!(effective_ncpus(8, Some(4), None), 4);
        assert_eq!(effective_ncpus(8, Some(4), Some(2.5)), 2);
        assert_eq!(effective_ncpus(8, None, Some(0.2)), 1);
        assert_eq!(effective_ncpus(2, None, Some(16.0)), 2);
    }

    #[test]
    fn effective_memory_ignores_limits_above_ram() {
        assert_eq!(effective_memory(1000, Some(400)), 400);
        assert_eq!(effective_memory(1000, Some(4000)), 1000);
        assert_eq!(effective_memory(1000, None), 1000);
    }
}
