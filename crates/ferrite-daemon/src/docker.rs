//! Docker/Podman clean-up: the images and containers of BOINC jobs that are no longer
//! running are removed at start-up, as the official client does (`CLIENT_STATE::
//! docker_cleanup`), and also whenever a job of a Docker app version (plan class naming
//! `docker`) ends, finished or aborted, so that they do not wait for the next start. Skipped
//! when several clients may share the host (`allow_multiple_clients`: the others'
//! containers look the same). The listing and removal run in a thread of their own; the
//! names and rules are `ferrite_hostinfo::docker_cleanup`.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferrite_hostinfo::docker_cleanup::{self, container_name, image_name, InUse};
use ferrite_proto::account::escape_project_url;
use ferrite_proto::client_state::ClientState;
use tracing::{info, warn};

/// How long one Docker/Podman command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// The Docker jobs seen running, and whether a clean-up is under way.
#[derive(Debug, Default)]
pub struct Janitor {
    /// (project URL, result) of the Docker jobs running at the last look.
    running: BTreeSet<(String, String)>,
    /// A clean-up thread is running.
    busy: Arc<AtomicBool>,
}

/// The Docker jobs of `state` that are running (or held in memory, preempted): their
/// (project, result) keys and their image and container names.
pub fn in_use(state: &ClientState) -> (BTreeSet<(String, String)>, InUse) {
    let mut keys = BTreeSet::new();
    let mut names = InUse::default();
    for a in &state.active_tasks {
        let Some(ps) = state.project(&a.project_master_url) else {
            continue;
        };
        let Some(r) = ps.result(&a.result_name) else {
            continue;
        };
        if !ps
            .app_version_of(r)
            .is_some_and(|v| v.plan_class.contains("docker"))
        {
            continue;
        }
        let esc = escape_project_url(&a.project_master_url);
        names.images.insert(image_name(&esc, &r.wu_name));
        names.containers.insert(container_name(&esc, &r.name));
        keys.insert((a.project_master_url.clone(), r.name.clone()));
    }
    (keys, names)
}

/// The CLI of the detected engine: `podman` or `docker`, found through `PATH`.
fn program(state: &ClientState) -> Option<PathBuf> {
    let (_, t) = state.host_info.docker.as_ref()?;
    Some(PathBuf::from(if *t == ferrite_hostinfo::docker::PODMAN {
        "podman"
    } else {
        "docker"
    }))
}

fn engine(state: &ClientState) -> &'static str {
    match state.host_info.docker.as_ref() {
        Some((_, t)) if *t == ferrite_hostinfo::docker::PODMAN => "Podman",
        _ => "Docker",
    }
}

fn log(kind: &str, r: &docker_cleanup::Cleanup) {
    for c in &r.containers {
        info!("Removed unused {kind} container: {c}");
    }
    for i in &r.images {
        info!("Removed unused {kind} image: {i}");
    }
    for f in &r.failed {
        warn!("{kind} command failed: {f}");
    }
}

impl Janitor {
    /// The start-up clean-up (synchronous, as in the official client).
    pub fn at_start(&mut self, state: &ClientState, allow_multiple_clients: bool) {
        let (keys, names) = in_use(state);
        self.running = keys;
        if allow_multiple_clients {
            return;
        }
        let Some(prog) = program(state) else { return };
        log(
            engine(state),
            &docker_cleanup::clean_up(&prog, &names, COMMAND_TIMEOUT),
        );
    }

    /// After the task table's turn: when a Docker job is no longer running, cleans up in a
    /// thread (unless one is still at work; the next end catches what it missed).
    pub fn after_tick(&mut self, state: &ClientState, allow_multiple_clients: bool) {
        let (keys, names) = in_use(state);
        let ended = self.running.iter().any(|k| !keys.contains(k));
        self.running = keys;
        if !ended || allow_multiple_clients {
            return;
        }
        let Some(prog) = program(state) else { return };
        if self.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        let busy = self.busy.clone();
        let kind = engine(state);
        let spawned = std::thread::Builder::new()
            .name("docker-cleanup".into())
            .spawn(move || {
                log(
                    kind,
                    &docker_cleanup::clean_up(&prog, &names, COMMAND_TIMEOUT),
                );
                busy.store(false, Ordering::Release);
            });
        if let Err(e) = spawned {
            warn!("cannot start the {kind} clean-up: {e}");
            self.busy.store(false, Ordering::Release);
        }
    }
}
