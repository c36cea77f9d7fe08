//! A scheduler reply as it comes off the wire: parsed, then applied to a loaded client
//! state. Applying must keep the state's invariants, the state must save and load again,
//! and a parsed reply written back must parse again.
//!
//! Input: byte 0 picks the options (signature verdict, unsigned_apps_ok, GPUs, account
//! manager prefs), the rest is the reply text.
#![no_main]

use std::sync::OnceLock;

use ferrite_project::reply::{apply_reply, check_invariants, ApplyOptions};
use ferrite_proto::client_state::ClientState;
use ferrite_proto::sched_reply::SchedulerReply;
use libfuzzer_sys::fuzz_target;

const STATE: &str =
    include_str!("../../crates/ferrite-project/tests/fixtures/state_02_tasks_running.xml");
const URL: &str = "http://127.0.0.1:18080/";

fn base() -> &'static ClientState {
    static S: OnceLock<ClientState> = OnceLock::new();
    S.get_or_init(|| match ClientState::parse(STATE, "client_state.xml") {
        Ok(p) => p.value,
        Err(e) => panic!("fixture: {e}"),
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let Ok(parsed) = SchedulerReply::parse(text, "sched_reply.xml") else {
        return;
    };
    let reply = parsed.value;
    let written = reply.to_xml();
    if let Err(e) = SchedulerReply::parse(&written, "sched_reply.xml") {
        panic!("a written reply does not parse again: {e}\n{written}");
    }

    let good_signatures = sel & 1 != 0;
    let opts = ApplyOptions {
        unsigned_apps_ok: sel & 2 != 0,
        gpu_types: if sel & 4 != 0 {
            vec!["NVIDIA".to_owned(), "ATI".to_owned()]
        } else {
            Vec::new()
        },
        current_prefs_mod_time: if sel & 8 != 0 { 1.6e9 } else { 0.0 },
        prefs_from_account_manager: sel & 16 != 0,
    };
    let verifier = move |_k: &str, _m: &str, _s: &str| good_signatures;
    let mut state = base().clone();
    let now = 1.7e9;
    let url = if sel & 32 != 0 {
        "HTTP://127.0.0.1:18080/"
    } else {
        URL
    };
    for round in 0..2 {
        if apply_reply(
            &mut state,
            url,
            &reply,
            now + f64::from(round),
            &opts,
            &verifier,
        )
        .is_err()
        {
            panic!("the fixture's project is unknown");
        }
        for p in &state.projects {
            if let Err(e) = check_invariants(p) {
                panic!("invariant broken after applying a reply (round {round}): {e}");
            }
        }
    }
    let saved = state.to_xml();
    if let Err(e) = ClientState::parse(&saved, "client_state.xml") {
        panic!("the state after a reply does not load again: {e}\n{saved}");
    }
});
