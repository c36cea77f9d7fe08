//! Confining a science app with Linux Landlock before it runs.
//!
//! The official client runs every project's app as the client's own user with no sandbox, so
//! any app can read the account keys (`account_*.xml`), the GUI RPC password
//! (`gui_rpc_auth.cfg`), other projects' files and other slots, and signal other apps. Here
//! each app gets a Landlock domain of its own, built from one list of grants ([`Policy`]):
//! its slot in full, its project's directory for reading and for writing the outputs it names
//! there (BOINC's link files point there), the system read-only, a few devices, and nothing
//! else of the data directory or the volunteer's home. Its TCP binds and connects are refused
//! unless its app version says `<needs_network/>`, and it cannot signal, or reach through an
//! abstract Unix socket, any process outside its own tree (Landlock's scoping).
//!
//! Apps that drive a virtual machine or a container get what their kind needs ([`AppKind`]):
//! a Docker app is confined with the Docker engine's socket added (the engine, a daemon of
//! its own, starts the container); a Podman app and a VirtualBox app run unconfined, as
//! Podman's container runtime mounts file systems and both use setuid helpers (`newuidmap`,
//! VirtualBox's VM process), which a Landlock domain and `no_new_privs` forbid.
//!
//! The ruleset is built in the daemon before the fork ([`Policy::prepare`], which opens every
//! path); the child only calls `prctl(PR_SET_NO_NEW_PRIVS)`, for a daemon run as root
//! `prctl(PR_CAPBSET_DROP)` (see [`restrict_self`]), and `landlock_restrict_self`, all plain
//! system calls, before `exec`. A kernel without Landlock gives no ruleset, and the
//! app runs as it would under the official client ([`support`] says which).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};

/// The Landlock ABI whose rights Ferrite asks for: filesystem (with truncate and device
/// ioctls), TCP bind and connect, signal and abstract-socket scoping. Older kernels get what
/// they support (best effort); newer ones the same as this.
const WANTED_ABI: ABI = ABI::V6;

/// The system trees an app reads (and executes from). A path inside the data directory, the
/// volunteer's home or [`SECRETS`] is carved out of them.
pub const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/etc", "/proc", "/sys",
];

/// What is never granted though it lies in [`SYSTEM_READ`]: password hashes, sudo and SSH
/// configuration, TLS private keys, wireless and VPN secrets, and the official client's
/// configuration directory (Debian's `gui_rpc_auth.cfg` lives there).
pub const SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/security/opasswd",
    "/etc/krb5.keytab",
    "/etc/NetworkManager/system-connections",
    "/etc/wpa_supplicant",
    "/etc/wireguard",
    "/etc/boinc-client",
    "/etc/ferrite",
];

/// Devices every app may read and write.
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// POSIX shared memory (`shm_open`, OpenMP and MPI runtimes), read-write for every app.
pub const SHARED_MEMORY: &str = "/dev/shm";

/// GPU device nodes a GPU app also gets, read-write with ioctls: every `/dev/nvidia*` node,
/// the DRM nodes (AMD, Intel) and AMD's compute node.
pub const GPU_DEVICES: &[&str] = &["/dev/dri", "/dev/kfd"];

/// How much of a path an app gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rights {
    /// Read, list and execute.
    Read,
    /// Read, list, execute, and create, write and truncate regular files; no removal, rename,
    /// link or special file (the project directory, where the app writes its outputs).
    Outputs,
    /// Read and write devices, with their ioctls.
    Device,
    /// Read and write a Unix socket (a container engine's).
    Socket,
    /// Everything (the slot, shared memory).
    Full,
}

/// One path an app may reach, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The path (a directory grants everything beneath it).
    pub path: PathBuf,
    /// What the app may do there.
    pub rights: Rights,
    /// Why, for people (`ferrite explain`, the log).
    pub why: &'static str,
}

/// What kind of app is confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppNeeds {
    /// It uses a GPU: it gets the GPU device nodes.
    pub gpu: bool,
    /// Its app version says `<needs_network/>`: TCP is not restricted.
    pub network: bool,
    /// A Docker app (`docker_wrapper` on a host whose engine is Docker): it gets the Docker
    /// engine's socket, through which the `docker` command it runs starts its container.
    pub docker: bool,
}

/// What kind of app runs, as far as confinement goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppKind {
    /// Any other app: the base rights.
    Plain,
    /// A VirtualBox app (`vboxwrapper`).
    VirtualBox,
    /// A Docker/Podman app (`docker_wrapper`), with the engine this host reports.
    Container(Engine),
}

/// The container engine of the host (`<docker_type>` of `<host_info>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// Docker (`<docker_type>1`): a daemon of its own behind a Unix socket.
    Docker,
    /// Podman (`<docker_type>2`): runs the container in the app's own process tree.
    Podman,
    /// None detected: `docker_wrapper` stops at once ("Docker type missing").
    None,
}

impl AppKind {
    /// The kind of an app version: plan class naming `vbox` or a main program named
    /// `vboxwrapper…` is VirtualBox; plan class naming `docker` or a main program named
    /// `docker_wrapper…` is a container app, of the engine `docker_type` names.
    pub fn of(plan_class: &str, program: &Path, docker_type: Option<u32>) -> AppKind {
        let pc = plan_class.to_ascii_lowercase();
        let name = program
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        if pc.contains("vbox") || name.starts_with("vboxwrapper") {
            AppKind::VirtualBox
        } else if pc.contains("docker") || name.starts_with("docker_wrapper") {
            AppKind::Container(match docker_type {
                Some(1) => Engine::Docker,
                Some(2) => Engine::Podman,
                _ => Engine::None,
            })
        } else {
            AppKind::Plain
        }
    }
}

/// The Docker engine's sockets a Docker app may reach: `$DOCKER_HOST` when it names a Unix
/// socket (`unix://PATH`), else the system engine's (`/run/docker.sock`, also reached as
/// `/var/run/docker.sock`) and a rootless engine's (`$XDG_RUNTIME_DIR/docker.sock`).
pub fn docker_sockets(docker_host: Option<&str>, runtime_dir: Option<&Path>) -> Vec<PathBuf> {
    if let Some(path) = docker_host.and_then(|h| h.strip_prefix("unix://")) {
        return vec![PathBuf::from(path)];
    }
    let mut v = vec![
        PathBuf::from("/run/docker.sock"),
        PathBuf::from("/var/run/docker.sock"),
    ];
    if let Some(dir) = runtime_dir {
        v.push(dir.join("docker.sock"));
    }
    v
}

/// Everything one app may reach: the single list of what an app gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Paths granted, in order.
    pub grants: Vec<Grant>,
    /// TCP binds and connects allowed (else all are refused).
    pub network: bool,
}

/// Where an app runs.
#[derive(Debug, Clone, Copy)]
pub struct AppPlace<'a> {
    /// The client's data directory (nothing of it is granted but the two below).
    pub data_dir: &'a Path,
    /// The app's slot directory.
    pub slot_dir: &'a Path,
    /// Its project's directory.
    pub project_dir: &'a Path,
    /// The volunteer's home (`$HOME` of the daemon), kept out of the system grants.
    pub home: Option<&'a Path>,
    /// The container engine's sockets ([`docker_sockets`]), granted to a Docker app.
    pub engine_sockets: &'a [PathBuf],
}

/// Errors while building an app's ruleset.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// The Landlock library refused the ruleset.
    #[error("cannot build the app's Landlock ruleset")]
    Ruleset(#[source] landlock::RulesetError),
    /// The slot or project directory could not be opened.
    #[error("cannot open {0} for the app's Landlock ruleset")]
    Path(PathBuf, #[source] landlock::PathFdError),
}

/// Whether this kernel confines apps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Landlock works, with this ABI version.
    Available(i32),
    /// The kernel has Landlock but it is not enabled (not in the `lsm=` list).
    NotEnabled,
    /// The kernel has no Landlock (before Linux 5.13, or built without it).
    NotImplemented,
}

impl Support {
    /// A sentence for the log and the GUIs.
    pub fn describe(self) -> String {
        match self {
            Support::Available(abi) => {
                format!("apps are confined with Landlock (kernel ABI {abi})")
            }
            Support::NotEnabled => "apps run unconfined: Landlock is not enabled in this \
                kernel (add landlock to the lsm= boot parameter)"
                .to_owned(),
            Support::NotImplemented => {
                "apps run unconfined: this kernel has no Landlock (Linux 5.13 or later needed)"
                    .to_owned()
            }
        }
    }
}

/// When set to `1`, [`support`] answers [`Support::NotImplemented`] whatever the kernel
/// offers: a test hook, to see a client on a kernel without Landlock on one with it.
pub const SIMULATE_NO_LANDLOCK_ENV: &str = "FERRITE_SIMULATE_NO_LANDLOCK";

/// Asks the kernel for its Landlock ABI version (see [`SIMULATE_NO_LANDLOCK_ENV`]).
pub fn support() -> Support {
    if std::env::var_os(SIMULATE_NO_LANDLOCK_ENV).is_some_and(|v| v == "1") {
        return Support::NotImplemented;
    }
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the call only
    // returns a number; it reads and writes no memory of ours.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v > 0 {
        Support::Available(i32::try_from(v).unwrap_or(i32::MAX))
    } else if io::Error::last_os_error().raw_os_error() == Some(libc::EOPNOTSUPP) {
        Support::NotEnabled
    } else {
        Support::NotImplemented
    }
}

impl Policy {
    /// The policy of an app, listing directories on this host to carve secrets out of the
    /// system grants.
    pub fn for_app(place: AppPlace<'_>, needs: AppNeeds) -> Policy {
        Policy::for_app_with(place, needs, &list_dir, &canonical)
    }

    /// [`Policy::for_app`] with the directory listing and path resolution given (tests).
    pub fn for_app_with(
        place: AppPlace<'_>,
        needs: AppNeeds,
        list: &dyn Fn(&Path) -> Vec<PathBuf>,
        resolve: &dyn Fn(&Path) -> Option<PathBuf>,
    ) -> Policy {
        let real = |p: &Path| resolve(p).unwrap_or_else(|| p.to_path_buf());
        let mut excluded: Vec<PathBuf> = SECRETS.iter().map(PathBuf::from).collect();
        excluded.push(real(place.data_dir));
        if let Some(home) = place.home.map(real).filter(|h| h.parent().is_some()) {
            excluded.push(home);
        }
        let mut grants = vec![
            Grant {
                path: real(place.slot_dir),
                rights: Rights::Full,
                why: "the app's slot",
            },
            Grant {
                path: real(place.project_dir),
                rights: Rights::Outputs,
                why: "its project's files, and the outputs it writes there",
            },
        ];
        for sys in SYSTEM_READ {
            // A symlinked top (/lib → usr/lib) is granted where it leads.
            if let Some(path) = resolve(Path::new(sys)) {
                carve(&path, &excluded, list, resolve, &mut grants);
            }
        }
        for dev in DEVICES {
            grants.push(Grant {
                path: PathBuf::from(dev),
                rights: Rights::Device,
                why: "standard devices",
            });
        }
        grants.push(Grant {
            path: PathBuf::from(SHARED_MEMORY),
            rights: Rights::Full,
            why: "POSIX shared memory",
        });
        if needs.gpu {
            let nvidia = list(Path::new("/dev")).into_iter().filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("nvidia"))
            });
            for path in nvidia.chain(GPU_DEVICES.iter().map(PathBuf::from)) {
                grants.push(Grant {
                    path,
                    rights: Rights::Device,
                    why: "GPU devices",
                });
            }
        }
        if needs.docker {
            let mut seen = Vec::new();
            for sock in place.engine_sockets {
                let path = real(sock);
                if !seen.contains(&path) {
                    seen.push(path.clone());
                    grants.push(Grant {
                        path,
                        rights: Rights::Socket,
                        why: "the Docker engine's socket (the docker command starts the container \
                              through it)",
                    });
                }
            }
        }
        Policy {
            grants,
            network: needs.network,
        }
    }

    /// Builds the Landlock ruleset in this (parent) process: opens every granted path that
    /// exists. `Ok(None)` when the kernel has no Landlock.
    pub fn prepare(&self) -> Result<Option<Prepared>, ConfineError> {
        let abi = WANTED_ABI;
        let mut ruleset = Ruleset::default()
            .handle_access(AccessFs::from_all(abi))
            .map_err(ConfineError::Ruleset)?;
        if !self.network {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(abi))
                .map_err(ConfineError::Ruleset)?;
        }
        let mut created = ruleset
            .scope(Scope::from_all(abi))
            .map_err(ConfineError::Ruleset)?
            .create()
            .map_err(ConfineError::Ruleset)?;
        for (i, g) in self.grants.iter().enumerate() {
            let fd = match PathFd::new(&g.path) {
                Ok(fd) => fd,
                // The slot and the project directory must be there; a system path or
                // device this host lacks is simply not granted.
                Err(e) if i < 2 => return Err(ConfineError::Path(g.path.clone(), e)),
                Err(_) => continue,
            };
            let is_dir = std::fs::metadata(&g.path).is_ok_and(|m| m.is_dir());
            let mut access = access_of(g.rights, abi);
            if !is_dir {
                access &= AccessFs::from_file(abi);
            }
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(ConfineError::Ruleset)?;
        }
        let fd: Option<OwnedFd> = created.into();
        Ok(fd.map(|fd| Prepared { fd }))
    }

    /// One line per grant, for people.
    pub fn describe(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .grants
            .iter()
            .map(|g| {
                let what = match g.rights {
                    Rights::Read => "read",
                    Rights::Outputs => "read, write files",
                    Rights::Device => "device",
                    Rights::Socket => "socket",
                    Rights::Full => "read-write",
                };
                format!("{} ({what}): {}", g.path.display(), g.why)
            })
            .collect();
        lines.push(if self.network {
            "TCP: allowed (the app version needs the network)".to_owned()
        } else {
            "TCP: no bind, no connect".to_owned()
        });
        lines.push(
            "signals and abstract Unix sockets: only within the app's own processes".to_owned(),
        );
        lines
    }
}

/// The volunteer's and the kernel's say on confinement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `cc_config.xml` `<ferrite_confine_apps>` (default on).
    pub enabled: bool,
    /// `cc_config.xml` `<ferrite_unconfined_project>` URLs (canonical).
    pub unconfined_projects: Vec<String>,
    /// What this kernel offers.
    pub support: Support,
}

/// Whether one app is confined, and why not when it is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Confined, with these needs.
    Confined(AppNeeds),
    /// Run as the official client runs it, for this reason.
    Unconfined(Unconfined),
}

/// Why an app runs unconfined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unconfined {
    /// The kernel has no (enabled) Landlock.
    NoLandlock,
    /// `<ferrite_confine_apps>0</ferrite_confine_apps>`.
    TurnedOff,
    /// `<ferrite_unconfined_project>` names the app's project.
    TurnedOffForProject,
    /// A VirtualBox app.
    VirtualBox,
    /// A Podman app.
    Podman,
}

impl Decision {
    /// The decision for an app of `project_url` of this kind.
    pub fn of(settings: &Settings, project_url: &str, kind: AppKind, needs: AppNeeds) -> Self {
        let why = if !matches!(settings.support, Support::Available(_)) {
            Unconfined::NoLandlock
        } else if !settings.enabled {
            Unconfined::TurnedOff
        } else if settings
            .unconfined_projects
            .iter()
            .any(|u| u == project_url)
        {
            Unconfined::TurnedOffForProject
        } else {
            match kind {
                AppKind::VirtualBox => Unconfined::VirtualBox,
                AppKind::Container(Engine::Podman) => Unconfined::Podman,
                AppKind::Container(Engine::Docker) => {
                    return Decision::Confined(AppNeeds {
                        docker: true,
                        ..needs
                    })
                }
                AppKind::Container(Engine::None) | AppKind::Plain => {
                    return Decision::Confined(needs)
                }
            }
        };
        Decision::Unconfined(why)
    }

    /// One sentence for people (`ferrite explain`, the log).
    pub fn describe(self) -> &'static str {
        match self {
            Decision::Confined(AppNeeds {
                docker: true,
                network: true,
                ..
            }) => {
                "confined: a Docker app; its slot, its project's files, the system read-only, \
                 the Docker engine's socket (the docker command starts its container through \
                 it); TCP allowed (the app version needs the network)"
            }
            Decision::Confined(AppNeeds { docker: true, .. }) => {
                "confined: a Docker app; its slot, its project's files, the system read-only, \
                 the Docker engine's socket (the docker command starts its container through \
                 it); no TCP"
            }
            Decision::Confined(AppNeeds { network: true, .. }) => {
                "confined: its slot, its project's files, the system read-only; TCP allowed \
                 (the app version needs the network)"
            }
            Decision::Confined(AppNeeds { gpu: true, .. }) => {
                "confined: its slot, its project's files, the system read-only, the GPU devices; \
                 no TCP"
            }
            Decision::Confined(_) => {
                "confined: its slot, its project's files, the system read-only; no TCP"
            }
            Decision::Unconfined(Unconfined::NoLandlock) => {
                "unconfined: this kernel has no Landlock"
            }
            Decision::Unconfined(Unconfined::TurnedOff) => {
                "unconfined: <ferrite_confine_apps>0</ferrite_confine_apps> in cc_config.xml"
            }
            Decision::Unconfined(Unconfined::TurnedOffForProject) => {
                "unconfined: <ferrite_unconfined_project> names its project in cc_config.xml"
            }
            Decision::Unconfined(Unconfined::VirtualBox) => {
                "unconfined: a VirtualBox app; VirtualBox's setuid helpers (the VM process \
                 VBoxHeadless) need privileges Landlock's no_new_privs forbids"
            }
            Decision::Unconfined(Unconfined::Podman) => {
                "unconfined: a Podman app; Podman runs the container in the app's own process \
                 tree, and its runtime's mounts and its setuid helpers (newuidmap, newgidmap) \
                 need what a Landlock domain and no_new_privs forbid"
            }
        }
    }
}

/// A ruleset ready for a child to enter.
#[derive(Debug)]
pub struct Prepared {
    fd: OwnedFd,
}

impl Prepared {
    /// The ruleset's descriptor, for [`restrict_self`] in the child.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Capabilities that let a Landlock-confined process read another domain's
/// `/proc/<pid>/environ`, `maps` and `auxv` (ptrace read access): measured on Linux 6.18,
/// with either one in its bounding set a confined root app reads the daemon's environment.
/// `linux/capability.h`: CAP_SYS_ADMIN 21, CAP_PERFMON 38.
const CAPS_DROPPED: [libc::c_ulong; 2] = [21, 38];

/// Enters the ruleset `fd` (in the forked child, before exec): sets no_new_privs; for a
/// daemon run as root, takes [`CAPS_DROPPED`] out of the bounding set, so that the app does
/// not get them at exec (any other user gets no capability at exec under no_new_privs);
/// then restricts this process. Only prctl, getuid and landlock system calls, so it is safe
/// between fork and exec.
pub fn restrict_self(fd: RawFd) -> io::Result<()> {
    // SAFETY: prctl and landlock_restrict_self take integers only.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        let root = libc::getuid() == 0 || libc::geteuid() == 0;
        for cap in CAPS_DROPPED.iter().copied().filter(|_| root) {
            // 1: in the bounding set; 0: not; -1 (EINVAL): a kernel that does not know it.
            if libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) == 1
                && libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn access_of(rights: Rights, abi: ABI) -> BitFlags<AccessFs> {
    let read = AccessFs::from_read(abi);
    match rights {
        Rights::Read => read,
        Rights::Outputs => read | AccessFs::WriteFile | AccessFs::MakeReg | AccessFs::Truncate,
        Rights::Device => {
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::ReadDir | AccessFs::IoctlDev
        }
        Rights::Socket => AccessFs::ReadFile | AccessFs::WriteFile,
        Rights::Full => AccessFs::from_all(abi),
    }
}

/// Grants `path` read-only, or, when an excluded path lies beneath it, each of its entries
/// but the excluded ones (recursively). An entry that is a symlink is granted where it leads,
/// unless that is or holds an excluded path.
fn carve(
    path: &Path,
    excluded: &[PathBuf],
    list: &dyn Fn(&Path) -> Vec<PathBuf>,
    resolve: &dyn Fn(&Path) -> Option<PathBuf>,
    out: &mut Vec<Grant>,
) {
    if excluded.iter().any(|e| path.starts_with(e)) {
        return;
    }
    if excluded.iter().any(|e| e.starts_with(path)) {
        for entry in list(path) {
            let target = resolve(&entry).unwrap_or(entry);
            carve(&target, excluded, list, resolve, out);
        }
        return;
    }
    out.push(Grant {
        path: path.to_path_buf(),
        rights: Rights::Read,
        why: "the system, read-only",
    });
}

fn list_dir(path: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(path)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn canonical(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_list(p: &Path) -> Vec<PathBuf> {
        let names: &[&str] = match p.to_str() {
            Some("/etc") => &["/etc/hosts", "/etc/shadow", "/etc/ssl", "/etc/boinc-client"],
            Some("/etc/ssl") => &["/etc/ssl/certs", "/etc/ssl/private"],
            Some("/opt") => &["/opt/rocm", "/opt/boinc"],
            Some("/dev") => &["/dev/nvidia0", "/dev/nvidiactl", "/dev/sda"],
            _ => &[],
        };
        names.iter().map(PathBuf::from).collect()
    }

    fn identity(p: &Path) -> Option<PathBuf> {
        Some(p.to_path_buf())
    }

    fn policy(needs: AppNeeds) -> Policy {
        Policy::for_app_with(
            AppPlace {
                data_dir: Path::new("/opt/boinc"),
                slot_dir: Path::new("/opt/boinc/slots/3"),
                project_dir: Path::new("/opt/boinc/projects/p.example_x"),
                home: Some(Path::new("/home/vol")),
                engine_sockets: &[
                    PathBuf::from("/run/docker.sock"),
                    PathBuf::from("/run/user/1000/docker.sock"),
                ],
            },
            needs,
            &fake_list,
            &identity,
        )
    }

    fn granted(p: &Policy, path: &str) -> Option<Rights> {
        p.grants
            .iter()
            .find(|g| Path::new(path).starts_with(&g.path))
            .map(|g| g.rights)
    }

    #[test]
    fn secrets_data_dir_and_home_are_carved_out_of_the_system() {
        let p = policy(AppNeeds::default());
        assert_eq!(granted(&p, "/usr/lib/libc.so.6"), Some(Rights::Read));
        assert_eq!(granted(&p, "/etc/hosts"), Some(Rights::Read));
        assert_eq!(granted(&p, "/etc/ssl/certs/ca.pem"), Some(Rights::Read));
        assert_eq!(granted(&p, "/opt/rocm/lib/x.so"), Some(Rights::Read));
        for denied in [
            "/etc/shadow",
            "/etc/ssl/private/key.pem",
            "/etc/boinc-client/gui_rpc_auth.cfg",
            "/opt/boinc/gui_rpc_auth.cfg",
            "/opt/boinc/account_p.example.xml",
            "/opt/boinc/client_state.xml",
            "/opt/boinc/slots/4/init_data.xml",
            "/opt/boinc/projects/other/f",
            "/home/vol/.ssh/id_rsa",
            "/tmp/x",
            "/var/lib/boinc-client/x",
        ] {
            assert_eq!(granted(&p, denied), None, "{denied}");
        }
        assert_eq!(granted(&p, "/opt/boinc/slots/3/out"), Some(Rights::Full));
        assert_eq!(
            granted(&p, "/opt/boinc/projects/p.example_x/app"),
            Some(Rights::Outputs)
        );
        assert!(!p.network);
        assert_eq!(granted(&p, "/dev/nvidia0"), None);
    }

    #[test]
    fn the_volunteer_the_kernel_and_the_app_kind_decide() {
        let mut s = Settings {
            enabled: true,
            unconfined_projects: vec!["https://p.example/".into()],
            support: Support::Available(7),
        };
        let needs = AppNeeds::default();
        let of = |s: &Settings, url, pc, docker_type| {
            let kind = AppKind::of(pc, Path::new("/p/app_1.0"), docker_type);
            Decision::of(s, url, kind, needs)
        };
        assert_eq!(
            of(&s, "https://q.example/", "mt", Some(1)),
            Decision::Confined(needs)
        );
        assert_eq!(
            of(&s, "https://p.example/", "", None),
            Decision::Unconfined(Unconfined::TurnedOffForProject)
        );
        assert_eq!(
            of(&s, "https://q.example/", "vbox64_mt", None),
            Decision::Unconfined(Unconfined::VirtualBox)
        );
        assert_eq!(
            of(&s, "https://q.example/", "docker", Some(2)),
            Decision::Unconfined(Unconfined::Podman)
        );
        let docker = of(&s, "https://q.example/", "docker", Some(1));
        assert_eq!(
            docker,
            Decision::Confined(AppNeeds {
                docker: true,
                ..needs
            })
        );
        assert!(docker.describe().contains("Docker engine's socket"));
        assert!(docker.describe().ends_with("no TCP"));
        let networked = Decision::Confined(AppNeeds {
            docker: true,
            network: true,
            gpu: false,
        });
        assert!(networked.describe().contains("Docker engine's socket"));
        assert!(networked.describe().contains("TCP allowed"));
        assert_eq!(
            of(&s, "https://q.example/", "docker", None),
            Decision::Confined(needs)
        );
        s.enabled = false;
        assert_eq!(
            of(&s, "https://q.example/", "", None),
            Decision::Unconfined(Unconfined::TurnedOff)
        );
        s.support = Support::NotImplemented;
        assert_eq!(
            of(&s, "https://q.example/", "", None),
            Decision::Unconfined(Unconfined::NoLandlock)
        );
    }

    #[test]
    fn gpu_apps_get_the_gpu_nodes_and_network_apps_tcp() {
        let p = policy(AppNeeds {
            gpu: true,
            network: true,
            docker: false,
        });
        assert_eq!(granted(&p, "/dev/nvidia0"), Some(Rights::Device));
        assert_eq!(granted(&p, "/dev/nvidiactl"), Some(Rights::Device));
        assert_eq!(granted(&p, "/dev/dri/renderD128"), Some(Rights::Device));
        assert_eq!(granted(&p, "/dev/sda"), None);
        assert!(p.network);
        assert!(p.describe().iter().any(|l| l.starts_with("TCP: allowed")));
    }

    #[test]
    fn wrappers_are_known_by_plan_class_or_program_name() {
        let kind = |pc, prog: &str, t| AppKind::of(pc, Path::new(prog), t);
        assert_eq!(
            kind("", "/p/vboxwrapper_26206_x86_64-pc-linux-gnu", None),
            AppKind::VirtualBox
        );
        assert_eq!(kind("vbox64_mt", "/p/x", None), AppKind::VirtualBox);
        assert_eq!(
            kind("", "/p/docker_wrapper_3", Some(1)),
            AppKind::Container(Engine::Docker)
        );
        assert_eq!(
            kind("docker", "/p/x", Some(2)),
            AppKind::Container(Engine::Podman)
        );
        assert_eq!(
            kind("docker", "/p/x", Some(0)),
            AppKind::Container(Engine::None)
        );
        assert_eq!(kind("mt", "/p/x", Some(1)), AppKind::Plain);
    }

    #[test]
    fn a_docker_app_gets_the_engine_socket_and_nothing_else_more() {
        let base = policy(AppNeeds::default());
        assert_eq!(granted(&base, "/run/docker.sock"), None);
        let p = policy(AppNeeds {
            docker: true,
            ..AppNeeds::default()
        });
        assert_eq!(granted(&p, "/run/docker.sock"), Some(Rights::Socket));
        assert_eq!(
            granted(&p, "/run/user/1000/docker.sock"),
            Some(Rights::Socket)
        );
        assert_eq!(p.grants.len(), base.grants.len() + 2);
        for denied in [
            "/home/vol/.docker/config.json",
            "/opt/boinc/projects/other/f",
            "/run/user/1000/bus",
        ] {
            assert_eq!(granted(&p, denied), None, "{denied}");
        }
        assert!(!p.network);
        assert_eq!(
            docker_sockets(Some("unix:///tmp/x/d.sock"), Some(Path::new("/run/user/1"))),
            [PathBuf::from("/tmp/x/d.sock")]
        );
        assert_eq!(
            docker_sockets(Some("tcp://h:2375"), Some(Path::new("/run/user/1"))),
            [
                PathBuf::from("/run/docker.sock"),
                PathBuf::from("/var/run/docker.sock"),
                PathBuf::from("/run/user/1/docker.sock")
            ]
        );
    }
}
