//! Disk figures: what BOINC's files use, what the preferences allow, and the volume's space.

use std::collections::BTreeMap;
use std::path::Path;

use ferrite_proto::client_state::ClientState;

/// Disk space figures for requests and for refusing jobs that cannot fit, bytes.
#[derive(Debug, Clone, Default)]
pub(crate) struct DiskFigures {
    /// What BOINC may use in all, from the three disk preferences.
    pub allowed: f64,
    /// What BOINC's files use now (present files of every project, by the state).
    pub used_total: f64,
    /// The same per project.
    pub used: BTreeMap<String, f64>,
}

/// Free bytes under which the data directory's file system counts as full: no work is asked
/// for, since neither its files nor the state could be written.
pub(super) const DISK_FULL_FREE_BYTES: f64 = 1024.0 * 1024.0;

/// Total and free bytes of the file system holding `path`.
pub(crate) fn volume_space(path: &Path) -> Option<(f64, f64)> {
    let s = nix::sys::statvfs::statvfs(path).ok()?;
    let frag = s.fragment_size() as f64;
    Some((s.blocks() as f64 * frag, s.blocks_available() as f64 * frag))
}

pub(crate) fn disk_figures(
    dir: &Path,
    state: &ClientState,
    prefs: &ferrite_proto::prefs::GlobalPrefs,
) -> DiskFigures {
    let mut used = BTreeMap::new();
    for ps in &state.projects {
        let bytes: f64 = ps
            .files
            .iter()
            .filter(|f| f.status == 1)
            .map(|f| f.nbytes.max(0.0))
            .sum();
        used.insert(ps.project.master_url.clone(), bytes);
    }
    let used_total: f64 = used.values().sum();
    let (total, free) = volume_space(dir).unwrap_or((0.0, 0.0));
    let p = ferrite_sched::Prefs {
        disk_max_used_gb: prefs.disk_max_used_gb,
        disk_max_used_pct: prefs.disk_max_used_pct,
        disk_min_free_gb: prefs.disk_min_free_gb,
        ..ferrite_sched::Prefs::default()
    };
    let (allowed, _) = ferrite_sched::disk::allowed(&p, total, free, used_total);
    DiskFigures {
        allowed,
        used_total,
        used,
    }
}
