//! The run modes (computing, GPU computing, network use): the permanent ones kept in the
//! state, the temporary ones GUI RPC sets (`set_run_mode` with a duration) and the network
//! mode `restore` goes back to. GUI RPC changes them (`daemon/rpc/commands.rs`); the project loop,
//! host watching and GUI RPC's status replies read them.

use ferrite_gui_rpc::RunMode as RpcRunMode;
use ferrite_proto::client_state::{ClientState, RunMode};

/// Which of the three run modes an op changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeKind {
    /// Computing.
    Cpu,
    /// GPU computing.
    Gpu,
    /// Network use.
    Network,
}

/// A temporary mode: in force until `until`, then the permanent mode applies again.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TempMode {
    /// The temporary mode.
    pub mode: RunMode,
    /// Unix time it ends (0 = no temporary mode).
    pub until: f64,
}

/// The temporary modes and the network mode to go back to (not saved: temporary modes end
/// with the process, as officially; the permanent modes are the state's).
#[derive(Debug, Default)]
pub struct RunModes {
    /// Temporary CPU, GPU and network modes.
    pub temp: [TempMode; 3],
    /// The network mode to go back to on `restore` (the state file has no such field).
    pub network_prev: RunMode,
    /// The last `set_run_mode` was "never" with Ferrite's `<ferrite_at_checkpoint/>`: running
    /// tasks that checkpoint may run on to their next checkpoint before they are suspended.
    /// Any other `set_run_mode` clears it; not saved.
    pub suspend_at_checkpoint: bool,
}

impl ModeKind {
    fn index(self) -> usize {
        match self {
            ModeKind::Cpu => 0,
            ModeKind::Gpu => 1,
            ModeKind::Network => 2,
        }
    }
}

/// The permanent and previous modes of `kind` in the state.
fn perm_prev<'a>(
    state: &'a mut ClientState,
    modes: &'a mut RunModes,
    kind: ModeKind,
) -> (&'a mut RunMode, &'a mut RunMode) {
    match kind {
        ModeKind::Cpu => (
            &mut state.user_run_request,
            &mut state.user_run_prev_request,
        ),
        ModeKind::Gpu => (
            &mut state.user_gpu_request,
            &mut state.user_gpu_prev_request,
        ),
        ModeKind::Network => (&mut state.user_network_request, &mut modes.network_prev),
    }
}

/// Applies `set_*_mode` (official `RUN_MODE::set`).
pub fn set_mode(
    state: &mut ClientState,
    modes: &mut RunModes,
    kind: ModeKind,
    mode: RpcRunMode,
    duration: f64,
    now: f64,
) {
    let temp_before = current_mode(state, modes, kind, now);
    let i = kind.index();
    let (perm, prev) = perm_prev(state, modes, kind);
    let new = match mode {
        RpcRunMode::Always => RunMode::Always,
        RpcRunMode::Auto => RunMode::Auto,
        RpcRunMode::Never => RunMode::Never,
        RpcRunMode::Restore => {
            if temp_before == *perm {
                *perm = *prev;
            }
            let p = *perm;
            modes.temp[i] = TempMode {
                mode: p,
                until: 0.0,
            };
            return;
        }
    };
    *prev = temp_before;
    if duration > 0.0 {
        modes.temp[i] = TempMode {
            mode: new,
            until: now + duration,
        };
    } else {
        *perm = new;
        modes.temp[i] = TempMode {
            mode: new,
            until: 0.0,
        };
    }
}

/// The mode in force: the temporary one while it lasts, else the permanent one.
pub fn current_mode(state: &ClientState, modes: &RunModes, kind: ModeKind, now: f64) -> RunMode {
    let t = modes.temp[kind.index()];
    if t.until > now {
        return t.mode;
    }
    match kind {
        ModeKind::Cpu => state.user_run_request,
        ModeKind::Gpu => state.user_gpu_request,
        ModeKind::Network => state.user_network_request,
    }
}

/// Seconds left in a temporary mode (0 if none).
pub fn mode_delay(modes: &RunModes, kind: ModeKind, now: f64) -> f64 {
    (modes.temp[kind.index()].until - now).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_modes_expire_and_restore_goes_back() {
        let mut s = ClientState::default();
        let mut modes = RunModes::default();
        set_mode(
            &mut s,
            &mut modes,
            ModeKind::Cpu,
            RpcRunMode::Never,
            0.0,
            100.0,
        );
        assert_eq!(s.user_run_request, RunMode::Never);
        assert_eq!(
            current_mode(&s, &modes, ModeKind::Cpu, 100.0),
            RunMode::Never
        );
        set_mode(
            &mut s,
            &mut modes,
            ModeKind::Cpu,
            RpcRunMode::Always,
            60.0,
            100.0,
        );
        assert_eq!(
            current_mode(&s, &modes, ModeKind::Cpu, 130.0),
            RunMode::Always
        );
        assert_eq!(mode_delay(&modes, ModeKind::Cpu, 130.0), 30.0);
        assert_eq!(s.user_run_request, RunMode::Never, "perm unchanged");
        assert_eq!(
            current_mode(&s, &modes, ModeKind::Cpu, 161.0),
            RunMode::Never
        );
        assert_eq!(mode_delay(&modes, ModeKind::Cpu, 161.0), 0.0);

        set_mode(
            &mut s,
            &mut modes,
            ModeKind::Network,
            RpcRunMode::Always,
            0.0,
            200.0,
        );
        set_mode(
            &mut s,
            &mut modes,
            ModeKind::Network,
            RpcRunMode::Restore,
            0.0,
            201.0,
        );
        assert_eq!(
            s.user_network_request,
            RunMode::Auto,
            "back to the previous mode"
        );
        assert_eq!(
            current_mode(&s, &modes, ModeKind::Network, 202.0),
            RunMode::Auto
        );
    }
}
