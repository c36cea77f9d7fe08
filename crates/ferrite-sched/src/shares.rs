//! How a project's resource share divides among the resources it can use: the share of each
//! resource's instances the round-robin simulation plans for each project.

use crate::accounting::relative_speed;
use crate::model::{ResourceId, World};
use crate::policy::{Policy, RecMode};

/// Each project's share of each resource's instances (`[project][resource]`), among the
/// projects that may use it (`can_use`, not suspended, positive resource share).
///
/// With one REC per (project, resource) ([`RecMode::PerResource`]) that is the project's
/// resource share among them on each resource. With one REC per project ([`RecMode::Global`],
/// BOINC's) a project is entitled to its share of the whole host's capacity (instances times
/// relative speed, summed over resources): the resources with the fewest projects able to use
/// them are divided first, each in proportion to what the projects using it are still
/// entitled to. A CPU+GPU project that the CPUs already give most of its part thus gets a
/// smaller part of a GPU it shares with GPU-only projects, as the real-priority scheduler
/// gives it.
pub fn share_fractions(world: &World, can_use: &[Vec<bool>], policy: &Policy) -> Vec<Vec<f64>> {
    let nr = world.n_resources();
    let np = world.projects.len();
    let eligible = |p: usize, r: usize| {
        let pr = &world.projects[p];
        !pr.suspended && pr.resource_share > 0.0 && can_use[p][r]
    };
    let by_share = |r: usize, p: usize| {
        let total: f64 = (0..np)
            .filter(|&q| eligible(q, r))
            .map(|q| world.projects[q].resource_share)
            .sum();
        if total > 0.0 && eligible(p, r) {
            world.projects[p].resource_share / total
        } else {
            0.0
        }
    };
    let mut frac = vec![vec![0.0; nr]; np];
    if policy.rec_mode == RecMode::PerResource || nr < 2 {
        for (p, row) in frac.iter_mut().enumerate() {
            for (r, f) in row.iter_mut().enumerate() {
                *f = by_share(r, p);
            }
        }
        return frac;
    }
    let cap: Vec<f64> = (0..nr)
        .map(|r| {
            let rid = ResourceId(r as u8);
            world.instances(rid) * relative_speed(world, rid, policy)
        })
        .collect();
    let users = |p: usize| (0..nr).any(|r| eligible(p, r));
    let total_share: f64 = (0..np)
        .filter(|&p| users(p))
        .map(|p| world.projects[p].resource_share)
        .sum();
    let total_cap: f64 = cap.iter().sum();
    // What each project is still entitled to, in CPU-instance units.
    let mut left: Vec<f64> = (0..np)
        .map(|p| {
            if users(p) && total_share > 0.0 {
                world.projects[p].resource_share / total_share * total_cap
            } else {
                0.0
            }
        })
        .collect();
    let mut order: Vec<usize> = (0..nr).collect();
    order.sort_by_key(|&r| ((0..np).filter(|&p| eligible(p, r)).count(), r));
    for r in order {
        let want: f64 = (0..np).filter(|&p| eligible(p, r)).map(|p| left[p]).sum();
        for p in (0..np).filter(|&p| eligible(p, r)) {
            // Everyone's part already met elsewhere: the resource splits by share.
            let f = if want > 1e-9 * total_cap.max(1.0) {
                left[p] / want
            } else {
                by_share(r, p)
            };
            frac[p][r] = f;
            left[p] = (left[p] - f * cap[r]).max(0.0);
        }
    }
    frac
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{App, AppVersion, Coproc, CoprocKind, Host, Project};

    /// 2 CPUs and one GPU worth 10 CPUs; A and B have GPU apps only, C both.
    fn world() -> (World, Vec<Vec<bool>>) {
        let mut host = Host::cpu_only(2, 1e9, 8e9);
        host.coprocs.push(Coproc {
            kind: CoprocKind::Nvidia,
            count: 1,
            peak_flops: 5e10,
        });
        let mut w = World::new(host);
        let mut can_use = Vec::new();
        for (name, cpu) in [("A", false), ("B", false), ("C", true)] {
            let p = w.add_project(Project::new(name, 100.0));
            let a = w.add_app(App::new(p, name));
            w.add_app_version(AppVersion::coproc(a, p, ResourceId(1), 1.0, 0.1, 1e10));
            if cpu {
                w.add_app_version(AppVersion::cpu(a, p, 1.0, 1e9));
            }
            can_use.push(vec![cpu, true]);
        }
        (w, can_use)
    }

    #[test]
    fn a_mixed_project_gets_less_of_a_shared_gpu_with_one_rec_per_project() {
        let (w, can_use) = world();
        // 12 units, 4 each: C's 2 CPUs give it 2, so it gets 2 of the GPU's 10, A and B 4.
        let f = share_fractions(&w, &can_use, &Policy::default());
        let close = |x: f64, y: f64| (x - y).abs() < 1e-12;
        assert!(close(f[2][0], 1.0), "{f:?}");
        assert!(
            close(f[0][1], 0.4) && close(f[1][1], 0.4) && close(f[2][1], 0.2),
            "{f:?}"
        );
        assert_eq!(f[0][0], 0.0);
    }

    #[test]
    fn per_resource_recs_split_each_resource_by_share() {
        let (w, can_use) = world();
        let policy = Policy {
            rec_mode: RecMode::PerResource,
            ..Policy::default()
        };
        let f = share_fractions(&w, &can_use, &policy);
        for row in &f {
            assert!((row[1] - 1.0 / 3.0).abs() < 1e-12, "{f:?}");
        }
        assert_eq!(f[2][0], 1.0);
    }

    #[test]
    fn a_suspended_or_zero_share_project_gets_nothing() {
        let (mut w, can_use) = world();
        w.projects[0].suspended = true;
        w.projects[1].resource_share = 0.0;
        let f = share_fractions(&w, &can_use, &Policy::default());
        assert_eq!((f[0][1], f[1][1]), (0.0, 0.0));
        assert!((f[2][1] - 1.0).abs() < 1e-12, "{f:?}");
    }
}
