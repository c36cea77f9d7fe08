//! Disk shares (reference §5): the space BOINC may use from the three preferences (and which
//! one binds), each project's share by resource share with the space unused by modest
//! projects lent to the greedy ones, the greatest offender, and the order in which deletable
//! files (non-sticky unreferenced files, expired sticky files) go when space is needed.
//! Pure: the daemon measures usage and deletes the files.

use crate::model::{Prefs, ProjectId, Time, GIGA};

/// Which preference limits the allowed space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskRule {
    /// `disk_min_free_gb`: keep this much free.
    MinFree,
    /// `disk_max_used_pct`: at most this percentage of the volume.
    MaxPercent,
    /// `disk_max_used_gb`: at most this many GB.
    MaxGb,
}

/// Disk usage of one project.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ProjectDisk {
    /// Bytes used by its project directory and its slots.
    pub usage: f64,
    /// Bytes the server says it wants (`<desired_disk_usage>`), 0 if none.
    pub desired: f64,
    /// Its resource share.
    pub resource_share: f64,
}

/// A file the daemon could delete.
#[derive(Clone, Debug, PartialEq)]
pub struct DiskFile {
    /// The caller's id for the file.
    pub id: u32,
    /// Owning project, if any.
    pub project: Option<ProjectId>,
    /// Size in bytes.
    pub size: f64,
    /// Sticky (kept for future jobs).
    pub sticky: bool,
    /// End of the sticky lifetime (`None`: until the server unsticks it).
    pub sticky_expire: Option<Time>,
    /// Still referenced by a job, app version or upload.
    pub referenced: bool,
}

/// What the daemon measured.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct DiskInput {
    /// Size of the volume holding the data directory, bytes.
    pub total: f64,
    /// Free bytes on it.
    pub free: f64,
    /// Bytes used by BOINC in all (projects + top-level files).
    pub used_total: f64,
    /// Per project, aligned with `World::projects`.
    pub projects: Vec<ProjectDisk>,
    /// Candidate files.
    pub files: Vec<DiskFile>,
}

/// The disk plan.
#[derive(Clone, Debug, PartialEq)]
pub struct DiskPlan {
    /// Bytes BOINC may use.
    pub allowed: f64,
    /// The preference that sets `allowed`.
    pub binding: DiskRule,
    /// Per project: its share of `allowed` (sent as `<d_project_share>`).
    pub shares: Vec<f64>,
    /// Per project: whether it wants more than its plain quota.
    pub greedy: Vec<bool>,
    /// Project most over its share, if any is.
    pub greatest_offender: Option<ProjectId>,
    /// Bytes over the allowed space (0 if within): fetch and downloads should stop.
    pub over_by: f64,
    /// Files that may be deleted, in the order to delete them; the daemon deletes from the
    /// front until `over_by` is recovered (and may always delete the whole list as garbage).
    pub delete: Vec<u32>,
}

/// Allowed space and the binding rule (reference §5.1).
pub fn allowed(prefs: &Prefs, total: f64, free: f64, used_total: f64) -> (f64, DiskRule) {
    let mut best = (
        used_total + free - prefs.disk_min_free_gb.max(0.0) * GIGA,
        DiskRule::MinFree,
    );
    if prefs.disk_max_used_pct > 0.0 {
        let x = total * prefs.disk_max_used_pct / 100.0;
        if x < best.0 {
            best = (x, DiskRule::MaxPercent);
        }
    }
    if prefs.disk_max_used_gb > 0.0 {
        let x = prefs.disk_max_used_gb * GIGA;
        if x < best.0 {
            best = (x, DiskRule::MaxGb);
        }
    }
    (best.0.max(0.0), best.1)
}

/// Compute the plan at `now`.
pub fn plan(prefs: &Prefs, input: &DiskInput, now: Time) -> DiskPlan {
    let (allowed, binding) = allowed(prefs, input.total, input.free, input.used_total);
    let ps = &input.projects;
    let max_share = ps.iter().map(|p| p.resource_share).fold(0.0, f64::max);
    let drs: Vec<f64> = ps
        .iter()
        .map(|p| {
            if max_share > 0.0 {
                p.resource_share.max(0.0) + max_share / 10.0
            } else {
                1.0
            }
        })
        .collect();
    // Quotas divide by the sum of the weights actually used, so they add up to `allowed`
    // (the official client divides by Σ plain shares, reference §7 W8).
    let sum: f64 = drs.iter().sum();
    let quota: Vec<f64> = drs
        .iter()
        .map(|d| if sum > 0.0 { allowed * d / sum } else { 0.0 })
        .collect();
    let need: Vec<f64> = ps.iter().map(|p| p.usage.max(p.desired)).collect();
    let greedy: Vec<bool> = need.iter().zip(&quota).map(|(n, q)| n > q).collect();
    let modest_use: f64 = (0..ps.len()).filter(|&i| !greedy[i]).map(|i| need[i]).sum();
    let greedy_drs: f64 = (0..ps.len()).filter(|&i| greedy[i]).map(|i| drs[i]).sum();
    let shares: Vec<f64> = (0..ps.len())
        .map(|i| {
            if greedy[i] && greedy_drs > 0.0 {
                (allowed - modest_use).max(0.0) * drs[i] / greedy_drs
            } else {
                quota[i]
            }
        })
        .collect();
    let offense: Vec<f64> = (0..ps.len()).map(|i| ps[i].usage - shares[i]).collect();
    let greatest_offender = (0..ps.len())
        .filter(|&i| offense[i] > 0.0)
        .max_by(|&a, &b| offense[a].total_cmp(&offense[b]).then(b.cmp(&a)))
        .map(|i| ProjectId(i as u32));

    let deletable =
        |f: &DiskFile| !f.referenced && (!f.sticky || f.sticky_expire.is_some_and(|t| t <= now));
    let mut files: Vec<&DiskFile> = input.files.iter().filter(|f| deletable(f)).collect();
    let off_of = |f: &DiskFile| {
        f.project.map_or(f64::INFINITY, |p| {
            offense.get(p.index()).copied().unwrap_or(0.0)
        })
    };
    // Orphans first, then the greatest offender's files, largest first.
    files.sort_by(|a, b| {
        off_of(b)
            .total_cmp(&off_of(a))
            .then(b.size.total_cmp(&a.size))
            .then(a.id.cmp(&b.id))
    });
    DiskPlan {
        allowed,
        binding,
        shares,
        greedy,
        greatest_offender,
        over_by: (input.used_total - allowed).max(0.0),
        delete: files.iter().map(|f| f.id).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefs(gb: f64, pct: f64, min_free: f64) -> Prefs {
        Prefs {
            disk_max_used_gb: gb,
            disk_max_used_pct: pct,
            disk_min_free_gb: min_free,
            ..Prefs::default()
        }
    }

    #[test]
    fn the_tightest_preference_binds() {
        let total = 100.0 * GIGA;
        // 10 GB used, 20 GB free: min free 5 GB → 25 GB; 90 % → 90 GB; max 50 GB.
        let (a, r) = allowed(&prefs(50.0, 90.0, 5.0), total, 20.0 * GIGA, 10.0 * GIGA);
        assert_eq!((a, r), (25.0 * GIGA, DiskRule::MinFree));
        let (a, r) = allowed(&prefs(8.0, 90.0, 5.0), total, 20.0 * GIGA, 10.0 * GIGA);
        assert_eq!((a, r), (8.0 * GIGA, DiskRule::MaxGb));
        let (a, r) = allowed(&prefs(0.0, 20.0, 0.0), total, 80.0 * GIGA, 10.0 * GIGA);
        assert_eq!((a, r), (20.0 * GIGA, DiskRule::MaxPercent));
        // Never negative.
        let (a, _) = allowed(&prefs(0.0, 0.0, 50.0), total, 1.0 * GIGA, 1.0 * GIGA);
        assert_eq!(a, 0.0);
    }

    #[test]
    fn unused_space_is_lent_and_offender_files_go_first() {
        // 30 GB allowed (max GB); shares 100 and 100 → weights 110 / 110 → quotas 15 / 15.
        let input = DiskInput {
            total: 1000.0 * GIGA,
            free: 500.0 * GIGA,
            used_total: 26.0 * GIGA,
            projects: vec![
                ProjectDisk {
                    usage: 2.0 * GIGA,
                    desired: 0.0,
                    resource_share: 100.0,
                },
                ProjectDisk {
                    usage: 24.0 * GIGA,
                    desired: 0.0,
                    resource_share: 100.0,
                },
            ],
            files: vec![
                DiskFile {
                    id: 1,
                    project: Some(ProjectId(0)),
                    size: 1e9,
                    sticky: false,
                    sticky_expire: None,
                    referenced: false,
                },
                DiskFile {
                    id: 2,
                    project: Some(ProjectId(1)),
                    size: 1e8,
                    sticky: true,
                    sticky_expire: Some(10.0),
                    referenced: false,
                },
                DiskFile {
                    id: 3,
                    project: Some(ProjectId(1)),
                    size: 5e9,
                    sticky: true,
                    sticky_expire: Some(1e12),
                    referenced: false,
                },
                DiskFile {
                    id: 4,
                    project: Some(ProjectId(1)),
                    size: 2e9,
                    sticky: false,
                    sticky_expire: None,
                    referenced: true,
                },
                DiskFile {
                    id: 5,
                    project: Some(ProjectId(1)),
                    size: 3e9,
                    sticky: false,
                    sticky_expire: None,
                    referenced: false,
                },
            ],
        };
        let p = plan(&prefs(30.0, 90.0, 0.1), &input, 100.0);
        assert_eq!(p.binding, DiskRule::MaxGb);
        assert!((p.shares[0] - 15.0 * GIGA).abs() < 1.0);
        // The greedy project gets what the modest one does not use: 30 − 2 = 28 GB.
        assert!((p.shares[1] - 28.0 * GIGA).abs() < 1.0);
        assert_eq!(p.greedy, vec![false, true]);
        assert!(
            (p.shares[0] + 15.0 * GIGA - 30.0 * GIGA).abs() < 1.0,
            "quotas add up to allowed"
        );
        assert_eq!(p.greatest_offender, None);
        assert_eq!(p.over_by, 0.0);
        // Referenced and unexpired sticky files are kept; project 1 has the higher offense.
        assert_eq!(p.delete, vec![5, 2, 1]);
    }

    #[test]
    fn over_the_limit_names_the_offender() {
        let input = DiskInput {
            total: 100.0 * GIGA,
            free: 50.0 * GIGA,
            used_total: 12.0 * GIGA,
            projects: vec![
                ProjectDisk {
                    usage: 1.0 * GIGA,
                    desired: 0.0,
                    resource_share: 300.0,
                },
                ProjectDisk {
                    usage: 11.0 * GIGA,
                    desired: 0.0,
                    resource_share: 100.0,
                },
            ],
            files: vec![],
        };
        let p = plan(&prefs(10.0, 0.0, 0.0), &input, 0.0);
        assert!((p.over_by - 2.0 * GIGA).abs() < 1.0);
        assert_eq!(p.greatest_offender, Some(ProjectId(1)));
    }

    #[test]
    fn all_zero_shares_do_not_divide_by_zero() {
        let input = DiskInput {
            total: 100.0 * GIGA,
            free: 50.0 * GIGA,
            used_total: 0.0,
            projects: vec![ProjectDisk::default(), ProjectDisk::default()],
            files: vec![],
        };
        let p = plan(&prefs(10.0, 0.0, 0.0), &input, 0.0);
        assert!((p.shares[0] - 5.0 * GIGA).abs() < 1.0);
        assert!((p.shares[1] - 5.0 * GIGA).abs() < 1.0);
    }
}
