//! `client_state.xml` as read at startup: parse, write back and re-read (a state the
//! daemon saves must load again, and saving is stable), then the conversion into the
//! scheduling core's world and one scheduling pass over it.
#![no_main]

use std::collections::{BTreeMap, HashMap};

use ferrite_daemon::snapshot::{build_world, IdMap, SnapshotInputs};
use ferrite_proto::client_state::ClientState;
use ferrite_proto::prefs::GlobalPrefs;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parsed) = ClientState::parse(text, "client_state.xml") else {
        return;
    };
    let state = parsed.value;
    let written = state.to_xml();
    let again = match ClientState::parse(&written, "client_state.xml") {
        Ok(p) => p.value,
        Err(e) => panic!("a written state does not load again: {e}\n{written}"),
    };
    let rewritten = again.to_xml();
    assert_eq!(written, rewritten, "writing a re-read state changes it");

    let prefs = GlobalPrefs::default();
    let app_configs = BTreeMap::new();
    let not_before = HashMap::new();
    let no_rsc_prefs = BTreeMap::new();
    // The daemon passes the wall clock, never a value from the file.
    let now = 1.7e9;
    let inputs = SnapshotInputs {
        prefs: &prefs,
        cc_ncpus: 0,
        user_active: false,
        gpu_suspended: false,
        app_configs: &app_configs,
        exclude_gpus: &[],
        no_rsc_prefs: &no_rsc_prefs,
        not_before: &not_before,
        now,
    };
    let mut ids = IdMap::default();
    let world = build_world(&state, &mut ids, &inputs, &|_, _| None);
    let mut sched = ferrite_sched::Scheduler::new(ferrite_sched::Policy::default());
    let _ = sched.pass(&world, now);
});
