// A BOINC API test app for Ferrite's supervisor tests, linked against libboinc_api.
//
// It reads the number of steps from its input `in`, does one step per `--step-ms` milliseconds
// (sleeping, or spinning with `--spin`), checkpoints after every step into `ckpt` (a temporary
// file renamed into place) and reports fraction done, then writes `out` and calls boinc_finish(0).
// Options change its behaviour:
//   --crash            segfault after the first step (the API's handler exits with 193)
//   --temp-exit        boinc_temporary_exit(77, "waiting for test resource") after one step
//   --temp-exit-once   the same, but only in a run that did not start from a checkpoint
//   --temp-exit-secs N the delay asked for by the temporary exit (default 77)
//   --forever          never finish
//   --alloc MB         allocate and touch MB megabytes, then keep going
//   --fill MB          write a file of MB megabytes into the slot, then keep going
//   --fork             fork a child that spins forever (same process group)
//   --trickle          send one trickle-up message after the first step
//   --step-ms N        length of a step (default 100)
//   --no-checkpoint    never checkpoint (a restart begins again at step 0)
//   --busy-finish      start a thread that spins until the process exits, then call
//                      boinc_finish (the process keeps using CPU through the API's final wait)
//   --show-init        write to stderr, after boinc_init, the CPUs and GPU that init_data.xml
//                      gives it and its whole command line
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>
#include <unistd.h>
#include <signal.h>
#include <pthread.h>

#include "boinc_api.h"

static void spin_for(double secs) {
    struct timespec t0, t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    volatile double x = 0;
    do {
        for (int i = 0; i < 100000; i++) x += i * 0.5;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
}

static void sleep_for(double secs) {
    struct timespec ts;
    ts.tv_sec = (time_t)secs;
    ts.tv_nsec = (long)((secs - ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0) {}
}

static void* spin_forever(void*) {
    for (;;) spin_for(1.0);
    return NULL;
}

static int read_int_file(const char* logical, int dflt) {
    std::string path;
    if (boinc_resolve_filename_s(logical, path)) return dflt;
    FILE* f = fopen(path.c_str(), "r");
    if (!f) return dflt;
    int v = dflt;
    if (fscanf(f, "%d", &v) != 1) v = dflt;
    fclose(f);
    return v;
}

// Writes the checkpoint as real BOINC apps are advised to: into a temporary file of the slot,
// renamed over `ckpt` once complete. The API's timer thread exits the process as soon as the
// client asks it to quit (outside a critical section), so a file rewritten in place could be
// left truncated and empty; `ckpt` always holds either the previous step or this one.
static void write_checkpoint(int step) {
    FILE* f = fopen("ckpt.tmp", "w");
    if (!f) return;
    bool ok = fprintf(f, "%d\n", step) > 0;
    if (fclose(f) != 0) ok = false;
    if (ok) rename("ckpt.tmp", "ckpt");
}

int main(int argc, char** argv) {
    bool crash = false, temp_exit = false, forever = false, spin = false, do_fork = false;
    bool trickle = false, temp_exit_once = false, no_checkpoint = false, busy_finish = false;
    bool show_init = false;
    int alloc_mb = 0, fill_mb = 0, step_ms = 100, temp_exit_secs = 77;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--crash") crash = true;
        else if (a == "--temp-exit") temp_exit = true;
        else if (a == "--temp-exit-once") temp_exit = temp_exit_once = true;
        else if (a == "--temp-exit-secs" && i + 1 < argc) temp_exit_secs = atoi(argv[++i]);
        else if (a == "--forever") forever = true;
        else if (a == "--spin") spin = true;
        else if (a == "--fork") do_fork = true;
        else if (a == "--trickle") trickle = true;
        else if (a == "--no-checkpoint") no_checkpoint = true;
        else if (a == "--busy-finish") busy_finish = true;
        else if (a == "--show-init") show_init = true;
        else if (a == "--alloc" && i + 1 < argc) alloc_mb = atoi(argv[++i]);
        else if (a == "--fill" && i + 1 < argc) fill_mb = atoi(argv[++i]);
        else if (a == "--step-ms" && i + 1 < argc) step_ms = atoi(argv[++i]);
    }

    int rc = boinc_init();
    if (rc) {
        fprintf(stderr, "boinc_init failed: %d\n", rc);
        exit(rc);
    }
    if (show_init) {
        APP_INIT_DATA aid;
        boinc_get_init_data(aid);
        fprintf(stderr, "init data: ncpus %g, gpu_type '%s', gpu_device_num %d\n", aid.ncpus,
            aid.gpu_type, aid.gpu_device_num);
        fprintf(stderr, "command line:");
        for (int i = 1; i < argc; i++) fprintf(stderr, " %s", argv[i]);
        fprintf(stderr, "\n");
    }
    int steps = read_int_file("in", 10);
    int start = 0;
    FILE* cf = fopen("ckpt", "r");
    if (cf) {
        if (fscanf(cf, "%d", &start) != 1) start = 0;
        fclose(cf);
        fprintf(stderr, "resuming from checkpoint at step %d\n", start);
    } else {
        fprintf(stderr, "starting fresh, %d steps\n", steps);
    }
    fflush(stderr);

    if (do_fork) {
        pid_t child = fork();
        if (child == 0) {
            fprintf(stderr, "child %d spinning\n", (int)getpid());
            fflush(stderr);
            for (;;) spin_for(1.0);
        }
        fprintf(stderr, "forked child %d\n", (int)child);
        fflush(stderr);
    }
    std::vector<char*> hog;
    if (alloc_mb > 0) {
        for (int i = 0; i < alloc_mb; i++) {
            char* p = (char*)malloc(1 << 20);
            if (!p) break;
            memset(p, i + 1, 1 << 20);
            hog.push_back(p);
        }
        fprintf(stderr, "allocated %d MB\n", alloc_mb);
        fflush(stderr);
    }
    if (fill_mb > 0) {
        FILE* f = fopen("filler.dat", "w");
        std::vector<char> block(1 << 20, 'x');
        for (int i = 0; f && i < fill_mb; i++) fwrite(block.data(), 1, block.size(), f);
        if (f) fclose(f);
        fprintf(stderr, "wrote %d MB into the slot\n", fill_mb);
        fflush(stderr);
    }

    for (int i = start; forever || i < steps; i++) {
        if (spin) spin_for(step_ms / 1000.0);
        else sleep_for(step_ms / 1000.0);
        if (!forever && !no_checkpoint) {
            write_checkpoint(i + 1);
            boinc_checkpoint_completed();
        }
        if (!forever) boinc_fraction_done((double)(i + 1) / steps);
        if (i == start) {
            if (crash) {
                fprintf(stderr, "about to crash\n");
                fflush(stderr);
                volatile int* bad = NULL;
                *bad = 1;
            }
            if (temp_exit && !(temp_exit_once && start > 0)) {
                boinc_temporary_exit(temp_exit_secs, "waiting for test resource");
            }
            if (trickle) {
                char variety[] = "test";
                char text[] = "<value>42</value>\n";
                boinc_send_trickle_up(variety, text);
            }
        }
    }

    std::string out;
    boinc_resolve_filename_s("out", out);
    FILE* f = fopen(out.c_str(), "w");
    if (!f) {
        fprintf(stderr, "cannot write output\n");
        boinc_finish(1);
    }
    fprintf(f, "done %d steps\n", steps);
    fclose(f);
    fprintf(stderr, "finished\n");
    if (busy_finish) {
        pthread_t t;
        pthread_create(&t, NULL, spin_forever, NULL);
    }
    boinc_finish(0);
    return 0;
}
