//! The Dhrystone 2.1 benchmark behind `p_iops`.
//!
//! Dhrystone (Weicker, 1984; version 2.1, 1988) is a synthetic integer program whose mix of
//! assignments, record and string operations, procedure calls, branches and array accesses
//! follows statistics of system programs. Its result is Dhrystone *loops* per second; the
//! official client divides that by 1757 (the loops per second of a VAX 11/780, the 1-MIPS
//! machine) and multiplies by 10⁶, reporting "VAX MIPS" as instructions per second in
//! `p_iops`, per second of the thread's own CPU time, counting batches of 16,000 loops.
//! Ferrite runs the same program with the same arithmetic of the result.
//!
//! The program itself is C (`dhrystone.c`, built by `build.rs`), compiled as the official
//! client's is: by gcc with `-O2 -funroll-loops`, every procedure inlined into the loop.
//! What survives that optimisation, in both builds, is mostly `Proc_1`'s copy of the
//! global record into the next one, and its speed depends on where the compiler puts one
//! store: gcc's points-to analysis moves it ahead of the copy, LLVM keeps the source order,
//! and the CPU then waits on store forwarding in every loop. A Rust rendering of the same
//! program measured 0.87 of the official figure on the same host, and one copying the
//! record field by field 2.2 times it; the C one built as above measures what the official
//! client measures, which is what projects compare `p_iops` against.

#[cfg(test)]
use std::ffi::c_char;
use std::ffi::{c_int, c_ulong, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Loops per batch: the official client checks its clock after each 16,000
/// (`LOOPS_PER_BATCH` in `dhrystone.c`; the tests check that both agree).
#[cfg(test)]
pub(crate) const LOOPS_PER_BATCH: u64 = 16_000;

/// Dhrystones per second of the VAX 11/780, the machine rated at 1 MIPS.
pub(crate) const VAX_DHRYSTONES_PER_SEC: f64 = 1757.0;

extern "C" {
    fn ferrite_dhrystone_run(
        stop: extern "C" fn(*mut c_void) -> c_int,
        ctx: *mut c_void,
    ) -> c_ulong;
    #[cfg(test)]
    fn ferrite_dhrystone_check(loops: c_int, state: *mut c_int, strs: *mut c_char) -> c_int;
}

/// Asks the closure behind `ctx` whether to stop (non-zero: stop). A panic stops the run
/// instead of unwinding into C.
extern "C" fn ask_stop<F: FnMut() -> bool>(ctx: *mut c_void) -> c_int {
    // SAFETY: `run` passes a pointer to its own `F`, alive and not otherwise borrowed for
    // the whole of the C call that calls this.
    let stop = unsafe { &mut *ctx.cast::<F>() };
    match catch_unwind(AssertUnwindSafe(stop)) {
        Ok(false) => 0,
        Ok(true) | Err(_) => 1,
    }
}

/// Runs batches of 16,000 Dhrystone loops until `stop` says so (asked after
/// each batch); returns the loops run (0 when the program's two records could not be
/// allocated).
pub(crate) fn run<F: FnMut() -> bool>(mut stop: F) -> u64 {
    let ctx: *mut F = &mut stop;
    // SAFETY: the C function only calls `ask_stop::<F>` with `ctx`, which points to `stop`
    // for the whole call, and touches no Rust memory otherwise.
    let loops = unsafe { ferrite_dhrystone_run(ask_stop::<F>, ctx.cast()) };
    #[allow(clippy::useless_conversion)] // `c_ulong` is 32 bits wide on some targets
    u64::from(loops)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOME_STRING: &[u8; 30] = b"DHRYSTONE PROGRAM, SOME STRING";

    /// The state `loops` loops leave: Dhrystone's twelve checked values and both records'
    /// strings.
    fn state_after(loops: i32) -> ([i32; 12], [u8; 62]) {
        let mut state = [0 as c_int; 12];
        let mut strs = [0 as c_char; 62];
        // SAFETY: both buffers have the sizes the C function writes.
        let rc = unsafe { ferrite_dhrystone_check(loops, state.as_mut_ptr(), strs.as_mut_ptr()) };
        assert_eq!(rc, 0, "records allocated");
        (state, strs.map(|c| c as u8))
    }

    #[test]
    fn a_loop_leaves_the_state_dhrystone_specifies() {
        // Weicker's published expected values after the loops (Ident_1 = 0 ... Ident_5 = 4).
        let (s, strs) = state_after(10);
        assert_eq!(s[0], 5, "Int_Glob");
        assert_eq!(s[1], 1, "Bool_Glob");
        assert_eq!(s[2], i32::from(b'A'), "Ch_1_Glob");
        assert_eq!(s[3], i32::from(b'B'), "Ch_2_Glob");
        assert_eq!(s[4], 7, "Arr_1_Glob[8]");
        assert_eq!(s[5], 10 + 10, "Arr_2_Glob[8][7]: 10 + the number of runs");
        assert_eq!(
            &s[6..9],
            &[0, 2, 17],
            "Ptr_Glob: discr, enum_comp, int_comp"
        );
        assert_eq!(
            &s[9..12],
            &[0, 1, 18],
            "Next_Ptr_Glob: discr, enum_comp, int_comp"
        );
        assert_eq!(&strs[..30], SOME_STRING);
        assert_eq!(&strs[31..61], SOME_STRING);
    }

    #[test]
    fn array_count_follows_the_runs() {
        assert_eq!(state_after(1).0[5], 11);
        assert_eq!(state_after(100).0[5], 110);
    }

    #[test]
    fn run_counts_whole_batches() {
        let mut batches = 0;
        let loops = run(|| {
            batches += 1;
            batches == 3
        });
        assert_eq!(loops, 3 * LOOPS_PER_BATCH);
    }

    #[test]
    fn a_panicking_stop_ends_the_run() {
        let loops = run(|| -> bool { panic!("clock failed") });
        assert_eq!(loops, LOOPS_PER_BATCH);
    }
}
