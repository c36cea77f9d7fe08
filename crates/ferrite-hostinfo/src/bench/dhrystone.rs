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
//! As in the C original (which keeps its globals in one structure per thread), the state of
//! a loop lives in [`Dhry`]; its two records are reached through their `ptr_comp` links,
//! which the program follows on every loop. The records live in the same structure as the
//! other globals (the original allocates them on the heap), each in a cache line of its own.
//! The state is handed to [`std::hint::black_box`] after every batch, so the optimiser
//! cannot drop the loops whose results it would otherwise never see, and is otherwise
//! free, as it is for the official
//! build (whose compiler folds the constant string comparisons and the dead array stores).
//! What survives optimisation, in both builds, is mostly `Proc_1`'s copy of the global
//! record into the next one through the link and the field updates around it, so the figure
//! mostly measures how fast the CPU stores a record and reads fields back from it.

use std::hint::black_box;

/// Loops per batch: the official client checks its clock after each 16,000.
pub(crate) const LOOPS_PER_BATCH: u64 = 16_000;

/// Dhrystones per second of the VAX 11/780, the machine rated at 1 MIPS.
pub(crate) const VAX_DHRYSTONES_PER_SEC: f64 = 1757.0;

/// Dhrystone's enumeration; the program never produces the fifth value, only tests for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
#[allow(dead_code)]
enum Ident {
    One,
    Two,
    Three,
    Four,
    Five,
}

type Str30 = [u8; 31];

/// A C string of 30 characters and its terminator.
const fn str30(s: &[u8; 30]) -> Str30 {
    let mut out = [0u8; 31];
    let mut i = 0;
    while i < 30 {
        out[i] = s[i];
        i += 1;
    }
    out
}

const SOME_STRING: Str30 = str30(b"DHRYSTONE PROGRAM, SOME STRING");
const FIRST_STRING: Str30 = str30(b"DHRYSTONE PROGRAM, 1'ST STRING");
const SECOND_STRING: Str30 = str30(b"DHRYSTONE PROGRAM, 2'ND STRING");
const THIRD_STRING: Str30 = str30(b"DHRYSTONE PROGRAM, 3'RD STRING");

/// Which of the program's two records (`Ptr_Glob`'s or `Next_Ptr_Glob`'s) a link names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
enum RecordId {
    Glob = 0,
    Next = 1,
}

/// Dhrystone's record (variant 1, the one the program uses); `ptr_comp` names the record
/// it points to. Each record has a cache line of its own: a record split across two lines
/// makes every copy slower by an amount that depends on where the records lie (runs on the
/// same machine gave figures about 25% apart).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Record {
    ptr_comp: RecordId,
    discr: Ident,
    enum_comp: Ident,
    int_comp: i32,
    str_comp: Str30,
}

/// The two records, reached through links.
struct Records([Record; 2]);

impl std::ops::Index<RecordId> for Records {
    type Output = Record;
    fn index(&self, id: RecordId) -> &Record {
        &self.0[id as usize]
    }
}

impl std::ops::IndexMut<RecordId> for Records {
    fn index_mut(&mut self, id: RecordId) -> &mut Record {
        &mut self.0[id as usize]
    }
}

/// The program's global variables.
struct Dhry {
    records: Records,
    ptr_glob: RecordId,
    int_glob: i32,
    bool_glob: bool,
    ch_1_glob: u8,
    ch_2_glob: u8,
    arr_1_glob: [i32; 50],
    arr_2_glob: [[i32; 50]; 50],
}

impl Dhry {
    fn new() -> Self {
        let glob = Record {
            ptr_comp: RecordId::Next,
            discr: Ident::One,
            enum_comp: Ident::Three,
            int_comp: 40,
            str_comp: SOME_STRING,
        };
        let next = Record {
            ptr_comp: RecordId::Glob,
            discr: Ident::One,
            enum_comp: Ident::One,
            int_comp: 0,
            str_comp: [0; 31],
        };
        let mut arr_2_glob = [[0; 50]; 50];
        arr_2_glob[8][7] = 10;
        Dhry {
            records: Records([glob, next]),
            ptr_glob: RecordId::Glob,
            int_glob: 0,
            bool_glob: false,
            ch_1_glob: 0,
            ch_2_glob: 0,
            arr_1_glob: [0; 50],
            arr_2_glob,
        }
    }

    fn proc_1(&mut self, ptr_val_par: RecordId) {
        let next_record = self.records[ptr_val_par].ptr_comp;
        self.records[next_record] = self.records[self.ptr_glob];
        self.records[ptr_val_par].int_comp = 5;
        self.records[next_record].int_comp = self.records[ptr_val_par].int_comp;
        self.records[next_record].ptr_comp = self.records[ptr_val_par].ptr_comp;
        let mut link = self.records[next_record].ptr_comp;
        self.proc_3(&mut link);
        self.records[next_record].ptr_comp = link;
        if self.records[next_record].discr == Ident::One {
            self.records[next_record].int_comp = 6;
            let enum_val = self.records[ptr_val_par].enum_comp;
            let mut enum_ref = self.records[next_record].enum_comp;
            self.proc_6(enum_val, &mut enum_ref);
            self.records[next_record].enum_comp = enum_ref;
            self.records[next_record].ptr_comp = self.records[self.ptr_glob].ptr_comp;
            let int_val = self.records[next_record].int_comp;
            proc_7(int_val, 10, &mut self.records[next_record].int_comp);
        } else {
            let from = self.records[ptr_val_par].ptr_comp;
            self.records[ptr_val_par] = self.records[from];
        }
    }

    fn proc_2(&self, int_par_ref: &mut i32) {
        let mut int_loc = *int_par_ref + 10;
        let mut enum_loc = Ident::Two;
        loop {
            if self.ch_1_glob == b'A' {
                int_loc -= 1;
                *int_par_ref = int_loc - self.int_glob;
                enum_loc = Ident::One;
            }
            if enum_loc == Ident::One {
                break;
            }
        }
    }

    fn proc_3(&mut self, ptr_ref_par: &mut RecordId) {
        *ptr_ref_par = self.records[self.ptr_glob].ptr_comp;
        let int_glob = self.int_glob;
        let glob = self.ptr_glob;
        proc_7(10, int_glob, &mut self.records[glob].int_comp);
    }

    fn proc_4(&mut self) {
        let bool_loc = self.ch_1_glob == b'A';
        self.bool_glob |= bool_loc;
        self.ch_2_glob = b'B';
    }

    fn proc_5(&mut self) {
        self.ch_1_glob = b'A';
        self.bool_glob = false;
    }

    fn proc_6(&self, enum_val_par: Ident, enum_ref_par: &mut Ident) {
        *enum_ref_par = enum_val_par;
        if !func_3(enum_val_par) {
            *enum_ref_par = Ident::Four;
        }
        match enum_val_par {
            Ident::One => *enum_ref_par = Ident::One,
            Ident::Two => {
                *enum_ref_par = if self.int_glob > 100 {
                    Ident::One
                } else {
                    Ident::Four
                }
            }
            Ident::Three => *enum_ref_par = Ident::Two,
            Ident::Four => {}
            Ident::Five => *enum_ref_par = Ident::Three,
        }
    }

    fn proc_8(&mut self, int_1_par_val: i32, int_2_par_val: i32) {
        let int_loc = (int_1_par_val + 5) as usize;
        self.arr_1_glob[int_loc] = int_2_par_val;
        self.arr_1_glob[int_loc + 1] = self.arr_1_glob[int_loc];
        self.arr_1_glob[int_loc + 30] = int_loc as i32;
        for int_index in int_loc..=int_loc + 1 {
            self.arr_2_glob[int_loc][int_index] = int_loc as i32;
        }
        self.arr_2_glob[int_loc][int_loc - 1] =
            self.arr_2_glob[int_loc][int_loc - 1].wrapping_add(1);
        self.arr_2_glob[int_loc + 20][int_loc] = self.arr_1_glob[int_loc];
        self.int_glob = 5;
    }

    fn func_1(&mut self, ch_1_par_val: u8, ch_2_par_val: u8) -> Ident {
        let ch_1_loc = ch_1_par_val;
        let ch_2_loc = ch_1_loc;
        if ch_2_loc != ch_2_par_val {
            Ident::One
        } else {
            self.ch_1_glob = ch_1_loc;
            Ident::Two
        }
    }

    fn func_2(&mut self, str_1_par_ref: &Str30, str_2_par_ref: &Str30) -> bool {
        let mut int_loc = 2usize;
        let mut ch_loc = 0u8;
        while int_loc <= 2 {
            if self.func_1(str_1_par_ref[int_loc], str_2_par_ref[int_loc + 1]) == Ident::One {
                ch_loc = b'A';
                int_loc += 1;
            }
        }
        if (b'W'..b'Z').contains(&ch_loc) {
            int_loc = 7;
        }
        if ch_loc == b'R' {
            true
        } else if c_strcmp(str_1_par_ref, str_2_par_ref) > 0 {
            int_loc += 7;
            self.int_glob = int_loc as i32;
            true
        } else {
            false
        }
    }

    /// One Dhrystone loop (the body of the main program's measurement loop). Like the
    /// original, it assigns values it never reads.
    #[allow(unused_assignments)]
    fn one_loop(&mut self, run_index: i32, str_1_loc: &Str30) {
        self.proc_5();
        self.proc_4();
        let mut int_1_loc: i32 = 2;
        let mut int_2_loc: i32 = 3;
        let mut int_3_loc: i32 = 0;
        let mut str_2_loc = SECOND_STRING;
        let mut enum_loc = Ident::Two;
        self.bool_glob = !self.func_2(str_1_loc, &str_2_loc);
        while int_1_loc < int_2_loc {
            int_3_loc = 5 * int_1_loc - int_2_loc;
            proc_7(int_1_loc, int_2_loc, &mut int_3_loc);
            int_1_loc += 1;
        }
        self.proc_8(int_1_loc, int_3_loc);
        self.proc_1(self.ptr_glob);
        let last = self.ch_2_glob;
        for ch_index in b'A'..last.saturating_add(1) {
            if enum_loc == self.func_1(ch_index, b'C') {
                self.proc_6(Ident::One, &mut enum_loc);
                str_2_loc = THIRD_STRING;
                int_2_loc = run_index;
                self.int_glob = run_index;
            }
        }
        int_2_loc = int_2_loc.wrapping_mul(int_1_loc);
        int_1_loc = int_2_loc / int_3_loc;
        int_2_loc = 7 * (int_2_loc - int_3_loc) - int_1_loc;
        self.proc_2(&mut int_1_loc);
    }
}

fn proc_7(int_1_par_val: i32, int_2_par_val: i32, int_par_ref: &mut i32) {
    let int_loc = int_1_par_val + 2;
    *int_par_ref = int_2_par_val + int_loc;
}

fn func_3(enum_par_val: Ident) -> bool {
    enum_par_val == Ident::Three
}

/// `strcmp` over NUL-terminated 31-byte strings: negative, zero or positive.
fn c_strcmp(a: &Str30, b: &Str30) -> i32 {
    for (x, y) in a.iter().zip(b.iter()) {
        if x != y || *x == 0 {
            return i32::from(*x) - i32::from(*y);
        }
    }
    0
}

/// Runs batches of [`LOOPS_PER_BATCH`] Dhrystone loops until `stop` says so (asked after
/// each batch); returns the loops run.
pub(crate) fn run(mut stop: impl FnMut() -> bool) -> u64 {
    let mut d = Dhry::new();
    let str_1_loc = FIRST_STRING;
    let mut loops = 0u64;
    loop {
        for run_index in 1..=LOOPS_PER_BATCH as i32 {
            d.one_loop(run_index, &str_1_loc);
        }
        loops += LOOPS_PER_BATCH;
        black_box(&mut d);
        if stop() {
            break;
        }
    }
    loops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_leaves_the_state_dhrystone_specifies() {
        // Weicker's published expected values after the loops.
        let mut d = Dhry::new();
        let s1 = FIRST_STRING;
        for i in 1..=10 {
            d.one_loop(i, &s1);
        }
        assert_eq!(d.int_glob, 5);
        assert!(d.bool_glob);
        assert_eq!(d.ch_1_glob, b'A');
        assert_eq!(d.ch_2_glob, b'B');
        assert_eq!(d.arr_1_glob[8], 7);
        assert_eq!(d.arr_2_glob[8][7], 10 + 10);
        let glob = d.records[d.ptr_glob];
        assert_eq!(glob.discr, Ident::One);
        assert_eq!(glob.enum_comp, Ident::Three);
        assert_eq!(glob.int_comp, 17);
        assert_eq!(glob.str_comp, SOME_STRING);
        let next = d.records[glob.ptr_comp];
        assert_eq!(next.discr, Ident::One);
        assert_eq!(next.enum_comp, Ident::Two);
        assert_eq!(next.int_comp, 18);
        assert_eq!(next.str_comp, SOME_STRING);
    }

    #[test]
    fn strcmp_orders_like_c() {
        assert!(c_strcmp(&FIRST_STRING, &SECOND_STRING) < 0);
        assert!(c_strcmp(&THIRD_STRING, &SECOND_STRING) > 0);
        assert_eq!(c_strcmp(&SOME_STRING, &SOME_STRING), 0);
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
}
