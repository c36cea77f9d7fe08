/* What the probing test apps in tests/apps share: `out`, their output file, opened by
 * main; `report`, one "probe yes" / "probe no" line to it and to stderr; `can_read`, whether
 * a file can be opened and read. Included by each app, which is built from its one source.
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static FILE *out;

static void report(const char *probe, int ok) {
    fprintf(out, "%s %s\n", probe, ok ? "yes" : "no");
    fprintf(stderr, "%s %s\n", probe, ok ? "yes" : "no");
}

static int can_read(const char *path) {
    char buf[64];
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    return n >= 0;
}
