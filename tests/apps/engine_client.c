/* An app posing as a Docker app (BOINC's docker_wrapper, no API): from its slot it talks to
 * the container engine's Unix socket named by $DOCKER_HOST (unix://PATH), as the docker
 * command it would run does, and tries another project's files and the client's secrets.
 * It writes one line per attempt, "probe yes" or "probe no", to its output file `out`, then
 * `boinc_finish_called`, and exits 0. Before the probes it waits (at most 60 s) for a file
 * `go` in its slot, so that the test can look at it while it runs.
 *
 * Built by tests/tests/confine_kinds.rs with the system's C compiler.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "probe.h"

/* Sends "ping\n" to the engine's socket and expects "pong" back. */
static int engine_answers(void) {
    const char *host = getenv("DOCKER_HOST");
    if (!host || strncmp(host, "unix://", 7) != 0) return 0;
    const char *path = host + 7;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a.sun_path) return 0;
    strcpy(a.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) return 0;
    int ok = 0;
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0 && write(s, "ping\n", 5) == 5) {
        char buf[16] = {0};
        ssize_t n = read(s, buf, sizeof buf - 1);
        ok = n >= 4 && strncmp(buf, "pong", 4) == 0;
    }
    close(s);
    return ok;
}

int main(void) {
    out = fopen("out", "w");
    if (!out) return 1;
    setvbuf(out, NULL, _IOLBF, 0);
    for (int i = 0; i < 600 && access("go", F_OK) != 0; i++) usleep(100000);

    report("reach_engine_socket", engine_answers());
    report("read_own_input", can_read("in"));
    report("read_other_project", can_read("../../projects/other.example_p/their_file"));
    report("read_gui_rpc_auth_cfg", can_read("../../gui_rpc_auth.cfg"));
    fclose(out);
    FILE *f = fopen("boinc_finish_called", "w");
    if (f) {
        fputs("0\n", f);
        fclose(f);
    }
    return 0;
}
