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
pub(crate) const DISK_FULL_FREE_BYTES: f64 = 1024.0 * 1024.0;

/// Total and free bytes of the file system holding `path`.
pub(crate) fn volume_space(path: &Path) -> Option<(f64, f64)> {
    let s = nix::sys::statvfs::statvfs(path).ok()?;
    let frag = s.fragment_size() as f64;
    Some((s.blocks() as f64 * frag, s.blocks_available() as f64 * frag))
}

/// Each project's disk share (`<disk_share>` of the state and the GUI RPCs), in the order of
/// the state's projects: the space `allowed` divided by ferrite-sched's disk policy (by
/// resource share, with what modest projects leave lent to the greedy ones), from each
/// project's `disk_usage`, `desired_disk_usage` and resource share.
pub(crate) fn disk_shares(state: &ClientState, allowed: f64, now: f64) -> Vec<f64> {
    use ferrite_sched::disk::{plan, DiskInput, ProjectDisk};
    let input = DiskInput {
        // A limit of `allowed` bytes, whatever the volume: the plan divides it.
        total: 0.0,
        free: allowed,
        used_total: 0.0,
        projects: state
            .projects
            .iter()
            .map(|ps| ProjectDisk {
                usage: ps.project.disk_usage,
                desired: ps.project.desired_disk_usage,
                resource_share: ps.project.resource_share,
            })
            .collect(),
        files: Vec::new(),
    };
    // No preference limits here: `allowed` is the limit they set.
    let prefs = ferrite_sched::Prefs {
        disk_max_used_gb: 0.0,
        disk_max_used_pct: 0.0,
        disk_min_free_gb: 0.0,
        ..ferrite_sched::Prefs::default()
    };
    plan(&prefs, &input, now).shares
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_shares_divide_the_allowed_space_by_resource_share() {
        let xml = "<client_state>\
            <project><master_url>http://a.example/</master_url><resource_share>100</resource_share>\
            <disk_usage>1000</disk_usage></project>\
            <project><master_url>http://b.example/</master_url><resource_share>300</resource_share>\
            </project></client_state>";
        let state = ClientState::parse(xml, "client_state.xml")
            .expect("state")
            .value;
        let shares = disk_shares(&state, 46e9, 0.0);
        // Weights: share + a tenth of the largest share (130, 330 of 460).
        assert_eq!(shares.len(), 2);
        assert!((shares[0] - 13e9).abs() < 1.0, "{shares:?}");
        assert!((shares[1] - 33e9).abs() < 1.0, "{shares:?}");
        // A project that wants more than its quota gets what the modest one leaves.
        let mut state = state;
        state.projects[1].project.desired_disk_usage = 40e9;
        let shares = disk_shares(&state, 46e9, 0.0);
        assert!((shares[1] - (46e9 - 1000.0)).abs() < 1.0, "{shares:?}");
    }
}
