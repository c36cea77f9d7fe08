//! The footprint bench's rows with GPU detection on, on a host with an OpenCL platform
//! installed (Debian's PoCL: the ICD loader, libpocl, LLVM and Clang): each client's RSS
//! fresh (no project) and with 1,000 tasks, computing and network suspended. Ferrite loads
//! the drivers only in its short-lived detection child, as the official client does.

use std::path::Path;
use std::time::Duration;

use ferrite_proto::client_state::ClientState;

use crate::row::Row;
use crate::{connect, data_dir, launch_with, status_kb, suspend_all, Who};

/// Where Debian's PoCL registers itself with the ICD loader.
pub const POCL_ICD: &str = "/etc/OpenCL/vendors/pocl.icd";

/// Whether PoCL is installed (the rows mean nothing without it).
pub fn pocl_installed() -> bool {
    Path::new(POCL_ICD).exists()
}

/// One round: both clients, each on a new empty data directory and on the 1,000-task one,
/// all four at once; RSS read after `settle` (start-up and GPU detection over).
pub fn round(fresh: &mut Row, tasks: &mut Row, xml: &str, state: &ClientState, settle: Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut held = Vec::new();
    for who in [Who::Ferrite, Who::Official] {
        let empty = launch_with(who, data_dir(None), true);
        drop(rt.block_on(connect(empty.port)));
        let loaded = launch_with(who, data_dir(Some((xml, state))), true);
        let mut conn = rt.block_on(connect(loaded.port));
        rt.block_on(suspend_all(&mut conn));
        held.push((empty, loaded, conn));
    }
    std::thread::sleep(settle);
    fresh.push(status_kb(held[0].0.pid()), status_kb(held[1].0.pid()));
    tasks.push(status_kb(held[0].1.pid()), status_kb(held[1].1.pid()));
}
