//! Per-GPU control for every project (Ferrite only): GPUs excluded by `TYPE:N` or UUID and
//! resources set to "finish then stop", from `ferrite_gpu_control.xml` in the data directory
//! and `ferrited --exclude_gpu/--finish_then_stop` (both count). The file is read at start-up
//! and on every reload; UUIDs are matched to the devices detection found. The decisions are
//! the core's (`ferrite_sched::gpu_control`); this module resolves names to the core's
//! resources in each snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use ferrite_proto::gpu_control::{GpuControlFile, GpuSelector, FILE_NAME};
use ferrite_sched::{CoprocKind, ResourceId, World};
use tracing::{info, warn};

use crate::cli::Options;
use crate::snapshot::canonical_gpu_type;

/// The control with names resolved: what each snapshot applies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolved {
    /// Excluded device numbers by official type name (`NVIDIA`, `ATI`, `intel_gpu`, or a
    /// `cc_config` coprocessor's name), as a bit mask.
    pub excluded: BTreeMap<String, u64>,
    /// Resources that finish then stop, by official name (`CPU`, `NVIDIA`, …).
    pub finish_then_stop: BTreeSet<String>,
}

/// The configuration and the devices it is resolved against.
#[derive(Debug, Clone, Default)]
pub struct GpuControlState {
    /// The file and the command line, merged.
    config: GpuControlFile,
    /// (type, device number, UUID) of the devices that have a UUID.
    uuids: Vec<(String, u32, String)>,
    /// The result.
    resolved: Resolved,
}

/// The official name of resource `name` (`cpu` → `CPU`, `cuda` → `NVIDIA`); other names
/// (user-defined coprocessors) as written.
fn canonical_resource(name: &str) -> String {
    if name.eq_ignore_ascii_case("cpu") {
        "CPU".to_owned()
    } else {
        canonical_gpu_type(name).map_or_else(|| name.to_owned(), str::to_owned)
    }
}

fn kind_name(k: &CoprocKind) -> &str {
    match k {
        CoprocKind::Nvidia => "NVIDIA",
        CoprocKind::Amd => "ATI",
        CoprocKind::IntelGpu => "intel_gpu",
        CoprocKind::AppleGpu => "apple_gpu",
        CoprocKind::Other(n) => n,
    }
}

impl GpuControlState {
    /// Reads `ferrite_gpu_control.xml` from `dir` and adds the command line's choices.
    pub fn load(&mut self, dir: &Path, opts: &Options) {
        let path = dir.join(FILE_NAME);
        let mut config = match std::fs::read_to_string(&path) {
            Ok(text) => match GpuControlFile::parse(&text, &path.display().to_string()) {
                Ok(p) => {
                    for w in p.warnings {
                        warn!("{w}");
                    }
                    p.value
                }
                Err(e) => {
                    warn!(
                        target: crate::messages::NOTICE_TARGET,
                        "{e}; no GPU is excluded or stopped by this file"
                    );
                    GpuControlFile::default()
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => GpuControlFile::default(),
            Err(e) => {
                warn!("cannot read {}: {e}", path.display());
                GpuControlFile::default()
            }
        };
        config.exclude.extend(opts.exclude_gpu.iter().cloned());
        config
            .finish_then_stop
            .extend(opts.finish_then_stop.iter().cloned());
        self.config = config;
        self.resolve();
    }

    /// Records the devices detection found (NVIDIA UUIDs from NVML).
    pub fn set_devices(&mut self, probe: &ferrite_hostinfo::gpu::GpuProbe) {
        let uuids = probe
            .nvidia
            .iter()
            .filter(|d| !d.uuid.is_empty())
            .map(|d| ("NVIDIA".to_owned(), d.device_num, d.uuid.clone()))
            .collect();
        if uuids != self.uuids {
            self.uuids = uuids;
            self.resolve();
        }
    }

    /// What the snapshots apply.
    pub fn resolved(&self) -> &Resolved {
        &self.resolved
    }

    fn resolve(&mut self) {
        let mut r = Resolved::default();
        for s in &self.config.exclude {
            let found = match s {
                GpuSelector::Device {
                    rsc_type,
                    device_num,
                } => Some((canonical_resource(rsc_type), *device_num)),
                GpuSelector::Uuid(u) => self
                    .uuids
                    .iter()
                    .find(|(_, _, id)| id.eq_ignore_ascii_case(u))
                    .map(|(t, n, _)| (t.clone(), *n)),
            };
            match found {
                Some((t, n)) if n < 64 && t != "CPU" => {
                    *r.excluded.entry(t.clone()).or_default() |= 1u64 << n;
                    info!("GPU control: {t} {n} ({s}) is not used by any project");
                }
                _ if self.uuids.is_empty() && matches!(s, GpuSelector::Uuid(_)) => info!(
                    "GPU control: {s} names no GPU found (yet); it is matched again when GPUs \
                     are detected"
                ),
                _ => warn!("GPU control: {s} names no GPU of this computer; ignored"),
            }
        }
        for name in &self.config.finish_then_stop {
            let c = canonical_resource(name);
            info!("GPU control: {c} finishes its started tasks, then stops");
            r.finish_then_stop.insert(c);
        }
        self.resolved = r;
    }
}

/// Puts `resolved` into `world`'s per-resource control.
pub fn apply(world: &mut World, resolved: &Resolved) {
    let mut c = ferrite_sched::GpuControl::default();
    if resolved.finish_then_stop.contains("CPU") {
        c.finish_then_stop.insert(ResourceId::CPU);
    }
    for (i, coproc) in world.host.coprocs.iter().enumerate() {
        let Ok(idx) = u8::try_from(i + 1) else { break };
        let r = ResourceId(idx);
        let name = kind_name(&coproc.kind);
        if let Some(mask) = resolved.excluded.get(name) {
            for k in 0..64 {
                if mask & (1u64 << k) != 0 {
                    c.exclude(r, k);
                }
            }
        }
        if resolved.finish_then_stop.contains(name) {
            c.finish_then_stop.insert(r);
        }
    }
    world.gpu_control = c;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_sched::{Coproc, Host};

    #[test]
    fn names_and_uuids_resolve_to_the_worlds_resources() {
        let mut s = GpuControlState::default();
        s.config.exclude = vec![
            GpuSelector::Device {
                rsc_type: "amd".into(),
                device_num: 1,
            },
            GpuSelector::Uuid("gpu-abc".into()),
            GpuSelector::Uuid("GPU-unknown".into()),
        ];
        s.config.finish_then_stop = vec!["cpu".into(), "intel".into()];
        s.uuids = vec![("NVIDIA".into(), 1, "GPU-ABC".into())];
        s.resolve();
        let mut host = Host::cpu_only(4, 1e9, 8e9);
        for kind in [CoprocKind::Nvidia, CoprocKind::Amd, CoprocKind::IntelGpu] {
            host.coprocs.push(Coproc {
                kind,
                count: 2,
                peak_flops: 1e12,
            });
        }
        let mut w = World::new(host);
        apply(&mut w, s.resolved());
        let c = &w.gpu_control;
        assert_eq!(c.excluded_mask(ResourceId(1)), 0b10, "NVIDIA 1 by its UUID");
        assert_eq!(c.excluded_mask(ResourceId(2)), 0b10, "ATI 1");
        assert_eq!(c.excluded_mask(ResourceId(3)), 0);
        assert!(c.stops(ResourceId::CPU) && c.stops(ResourceId(3)));
        assert!(!c.stops(ResourceId(1)) && !c.stops(ResourceId(2)));
    }
}
