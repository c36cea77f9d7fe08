/*
 * The Dhrystone 2.1 benchmark behind Ferrite's p_iops, in C.
 *
 * Dhrystone (R. P. Weicker, 1984; version 2.1, 1988) is a synthetic integer program whose
 * mix of assignments, record and string operations, procedure calls, branches and array
 * accesses follows statistics of system programs. Its published source is free to use.
 * This is Ferrite's own rendering of the program: the same procedures, records and
 * globals, one set of globals per thread, driven in batches by `bench/dhrystone.rs`.
 *
 * Why C: the figure projects compare is the one the official client reports, which is what
 * gcc makes of Dhrystone's C. Most of what survives optimisation is Proc_1's record copy,
 * whose speed depends on how the compiler orders one store against the copy (gcc's
 * points-to analysis moves it; LLVM keeps the source order and stalls on store
 * forwarding). Built here by gcc with the optimisation the official build uses
 * (-O2 -funroll-loops, all procedures in one unit as its link-time optimisation makes
 * them), the program measures the same thing on the same host.
 */

#include <stdlib.h>
#include <string.h>

typedef enum { Ident_1, Ident_2, Ident_3, Ident_4, Ident_5 } Enumeration;

typedef char Str_30[31];

typedef struct Record {
    struct Record *ptr_comp;
    Enumeration discr;
    union {
        struct {
            Enumeration enum_comp;
            int int_comp;
            char str_comp[31];
        } var_1;
        struct {
            Enumeration e_comp_2;
            char str_2_comp[31];
        } var_2;
        struct {
            char ch_1_comp;
            char ch_2_comp;
        } var_3;
    } variant;
} Record;

/* The program's globals. Each run keeps them in a local structure of its own (so that
 * benchmark threads share nothing), reached through `dd` as the procedures below name them. */
struct globals {
    Record *ptr_glob;
    Record *next_ptr_glob;
    int int_glob;
    int bool_glob;
    char ch_1_glob;
    char ch_2_glob;
    int arr_1_glob[50];
    int arr_2_glob[50][50];
};

#define ptr_glob (dd->ptr_glob)
#define next_ptr_glob (dd->next_ptr_glob)
#define int_glob (dd->int_glob)
#define bool_glob (dd->bool_glob)
#define ch_1_glob (dd->ch_1_glob)
#define ch_2_glob (dd->ch_2_glob)
#define arr_1_glob (dd->arr_1_glob)
#define arr_2_glob (dd->arr_2_glob)

static void proc_7(int int_1_par_val, int int_2_par_val, int *int_par_ref)
{
    int int_loc = int_1_par_val + 2;
    *int_par_ref = int_2_par_val + int_loc;
}

static int func_3(Enumeration enum_par_val)
{
    return enum_par_val == Ident_3;
}

static void proc_6(struct globals *dd, Enumeration enum_val_par, Enumeration *enum_ref_par)
{
    *enum_ref_par = enum_val_par;
    if (!func_3(enum_val_par))
        *enum_ref_par = Ident_4;
    switch (enum_val_par) {
    case Ident_1:
        *enum_ref_par = Ident_1;
        break;
    case Ident_2:
        *enum_ref_par = int_glob > 100 ? Ident_1 : Ident_4;
        break;
    case Ident_3:
        *enum_ref_par = Ident_2;
        break;
    case Ident_4:
        break;
    case Ident_5:
        *enum_ref_par = Ident_3;
        break;
    }
}

static void proc_3(struct globals *dd, Record **ptr_ref_par)
{
    if (ptr_glob != NULL)
        *ptr_ref_par = ptr_glob->ptr_comp;
    proc_7(10, int_glob, &ptr_glob->variant.var_1.int_comp);
}

static void proc_1(struct globals *dd, Record *ptr_val_par)
{
    Record *next_record = ptr_val_par->ptr_comp;

    *ptr_val_par->ptr_comp = *ptr_glob;
    ptr_val_par->variant.var_1.int_comp = 5;
    next_record->variant.var_1.int_comp = ptr_val_par->variant.var_1.int_comp;
    next_record->ptr_comp = ptr_val_par->ptr_comp;
    proc_3(dd, &next_record->ptr_comp);
    if (next_record->discr == Ident_1) {
        next_record->variant.var_1.int_comp = 6;
        proc_6(dd, ptr_val_par->variant.var_1.enum_comp, &next_record->variant.var_1.enum_comp);
        next_record->ptr_comp = ptr_glob->ptr_comp;
        proc_7(next_record->variant.var_1.int_comp, 10, &next_record->variant.var_1.int_comp);
    } else {
        *ptr_val_par = *ptr_val_par->ptr_comp;
    }
}

static void proc_2(struct globals *dd, int *int_par_ref)
{
    int int_loc = *int_par_ref + 10;
    Enumeration enum_loc = Ident_2;

    do {
        if (ch_1_glob == 'A') {
            int_loc -= 1;
            *int_par_ref = int_loc - int_glob;
            enum_loc = Ident_1;
        }
    } while (enum_loc != Ident_1);
}

static void proc_4(struct globals *dd)
{
    int bool_loc = ch_1_glob == 'A';
    bool_glob = bool_loc | bool_glob;
    ch_2_glob = 'B';
}

static void proc_5(struct globals *dd)
{
    ch_1_glob = 'A';
    bool_glob = 0;
}

static void proc_8(struct globals *dd, int *arr_1_par_ref, int arr_2_par_ref[50][50], int int_1_par_val,
                   int int_2_par_val)
{
    int int_loc = int_1_par_val + 5;
    int int_index;

    arr_1_par_ref[int_loc] = int_2_par_val;
    arr_1_par_ref[int_loc + 1] = arr_1_par_ref[int_loc];
    arr_1_par_ref[int_loc + 30] = int_loc;
    for (int_index = int_loc; int_index <= int_loc + 1; ++int_index)
        arr_2_par_ref[int_loc][int_index] = int_loc;
    arr_2_par_ref[int_loc][int_loc - 1] += 1;
    arr_2_par_ref[int_loc + 20][int_loc] = arr_1_par_ref[int_loc];
    int_glob = 5;
}

static Enumeration func_1(struct globals *dd, char ch_1_par_val, char ch_2_par_val)
{
    char ch_1_loc = ch_1_par_val;
    char ch_2_loc = ch_1_loc;

    if (ch_2_loc != ch_2_par_val)
        return Ident_1;
    ch_1_glob = ch_1_loc;
    return Ident_2;
}

static int func_2(struct globals *dd, const char *str_1_par_ref, const char *str_2_par_ref)
{
    int int_loc = 2;
    char ch_loc = 0;

    while (int_loc <= 2) {
        if (func_1(dd, str_1_par_ref[int_loc], str_2_par_ref[int_loc + 1]) == Ident_1) {
            ch_loc = 'A';
            int_loc += 1;
        }
    }
    if (ch_loc >= 'W' && ch_loc < 'Z')
        int_loc = 7;
    if (ch_loc == 'R')
        return 1;
    if (strcmp(str_1_par_ref, str_2_par_ref) > 0) {
        int_loc += 7;
        int_glob = int_loc;
        return 1;
    }
    return 0;
}

/* Allocates the two records as the original does (each in a cache line of its own: a
 * 56-byte record split across two lines makes every copy slower by an amount that depends
 * on where it lies); 0 on success. */
static int alloc_records(struct globals *dd)
{
    next_ptr_glob = aligned_alloc(64, 64);
    ptr_glob = aligned_alloc(64, 64);
    if (next_ptr_glob == NULL || ptr_glob == NULL) {
        free(next_ptr_glob);
        free(ptr_glob);
        return -1;
    }
    memset(next_ptr_glob, 0, sizeof(Record));
    return 0;
}

/* The program's main loop on the globals `dd` (whose records are allocated): batches of
 * `batch` loops (numbered from 1 in each batch) until `stop(ctx)`, asked after each batch,
 * returns non-zero. Returns the loops run.
 *
 * Like the original's, the globals start undefined but for what the program reads before
 * it writes. Each entry point below has this loop and every procedure inlined into it
 * (`flatten`), as the official build's link-time optimisation has them: the procedures are
 * called once each. */
static unsigned long dhrystone(struct globals *dd, int batch, int (*stop)(void *), void *ctx)
{
    int int_1_loc, int_2_loc, int_3_loc = 0, run_index;
    char ch_index;
    Enumeration enum_loc;
    Str_30 str_1_loc, str_2_loc;
    unsigned long loops = 0;

    ptr_glob->ptr_comp = next_ptr_glob;
    ptr_glob->discr = Ident_1;
    ptr_glob->variant.var_1.enum_comp = Ident_3;
    ptr_glob->variant.var_1.int_comp = 40;
    strcpy(ptr_glob->variant.var_1.str_comp, "DHRYSTONE PROGRAM, SOME STRING");
    strcpy(str_1_loc, "DHRYSTONE PROGRAM, 1'ST STRING");
    arr_2_glob[8][7] = 10;

    do {
        for (run_index = 1; run_index <= batch; ++run_index) {
            proc_5(dd);
            proc_4(dd);
            int_1_loc = 2;
            int_2_loc = 3;
            strcpy(str_2_loc, "DHRYSTONE PROGRAM, 2'ND STRING");
            enum_loc = Ident_2;
            bool_glob = !func_2(dd, str_1_loc, str_2_loc);
            while (int_1_loc < int_2_loc) {
                int_3_loc = 5 * int_1_loc - int_2_loc;
                proc_7(int_1_loc, int_2_loc, &int_3_loc);
                int_1_loc += 1;
            }
            proc_8(dd, arr_1_glob, arr_2_glob, int_1_loc, int_3_loc);
            proc_1(dd, ptr_glob);
            for (ch_index = 'A'; ch_index <= ch_2_glob; ++ch_index) {
                if (enum_loc == func_1(dd, ch_index, 'C')) {
                    proc_6(dd, Ident_1, &enum_loc);
                    strcpy(str_2_loc, "DHRYSTONE PROGRAM, 3'RD STRING");
                    int_2_loc = run_index;
                    int_glob = run_index;
                }
            }
            int_2_loc = int_2_loc * int_1_loc;
            int_1_loc = int_2_loc / int_3_loc;
            int_2_loc = 7 * (int_2_loc - int_3_loc) - int_1_loc;
            proc_2(dd, &int_1_loc);
        }
        loops += (unsigned long)batch;
    } while (!stop(ctx));

    return loops;
}

/* Loops per batch: the official client asks its clock after each 16,000 (a constant, as
 * there: the compiler lays the loop out for it). */
#define LOOPS_PER_BATCH 16000

/* Runs batches of LOOPS_PER_BATCH loops until `stop(ctx)`, asked after each batch, returns
 * non-zero. Returns the loops run, or 0 when the records could not be allocated. */
__attribute__((flatten)) unsigned long ferrite_dhrystone_run(int (*stop)(void *), void *ctx)
{
    struct globals globals, *dd = &globals;
    unsigned long loops;

    if (alloc_records(dd) != 0)
        return 0;
    loops = dhrystone(dd, LOOPS_PER_BATCH, stop, ctx);
    free(next_ptr_glob);
    free(ptr_glob);
    return loops;
}

static int stop_at_once(void *ctx)
{
    (void)ctx;
    return 1;
}

/* Runs one batch of `loops` loops and reports the values they leave, which Dhrystone
 * specifies: state[0] int_glob, [1] bool_glob, [2] ch_1_glob, [3] ch_2_glob,
 * [4] arr_1_glob[8], [5] arr_2_glob[8][7], [6..8] the global record's discr, enum_comp and
 * int_comp, [9..11] the same of the record it links to; `strs` (62 bytes) receives both
 * records' strings. Returns 0, or -1 when the records could not be allocated. */
__attribute__((flatten)) int ferrite_dhrystone_check(int loops, int state[12], char strs[62])
{
    struct globals globals, *dd = &globals;
    Record *next;

    if (alloc_records(dd) != 0)
        return -1;
    int_glob = 0;
    bool_glob = 0;
    ch_1_glob = 0;
    ch_2_glob = 0;
    memset(arr_1_glob, 0, sizeof arr_1_glob);
    memset(arr_2_glob, 0, sizeof arr_2_glob);
    dhrystone(dd, loops, stop_at_once, NULL);
    next = ptr_glob->ptr_comp;
    state[0] = int_glob;
    state[1] = bool_glob;
    state[2] = ch_1_glob;
    state[3] = ch_2_glob;
    state[4] = arr_1_glob[8];
    state[5] = arr_2_glob[8][7];
    state[6] = ptr_glob->discr;
    state[7] = ptr_glob->variant.var_1.enum_comp;
    state[8] = ptr_glob->variant.var_1.int_comp;
    state[9] = next->discr;
    state[10] = next->variant.var_1.enum_comp;
    state[11] = next->variant.var_1.int_comp;
    memcpy(strs, ptr_glob->variant.var_1.str_comp, 31);
    memcpy(strs + 31, next->variant.var_1.str_comp, 31);
    free(next_ptr_glob);
    free(ptr_glob);
    return 0;
}
