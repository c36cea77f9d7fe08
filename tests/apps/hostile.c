/* A hostile BOINC app (no API): from its slot it tries everything an app should not be able
 * to do to the client, the volunteer and other projects, and writes one line per attempt,
 * "probe yes" or "probe no", to its output file `out` (which goes back to the project) and to
 * stderr. The test runs two copies at once, so that another slot is in use. It does what the test project's plain apps do to finish: writes `out`, then
 * `boinc_finish_called`, and exits 0.
 *
 * Built by tests/tests/confine.rs with the system's C compiler.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "probe.h"

static int can_list(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    int n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n > 0;
}

static int can_create(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 0;
    int ok = write(fd, "planted\n", 8) == 8;
    close(fd);
    return ok;
}

/* The account key init_data.xml gives the app (only its own project's, as BOINC does). */
static void authenticator(char *key, size_t len) {
    char buf[65536];
    key[0] = 0;
    int fd = open("init_data.xml", O_RDONLY);
    if (fd < 0) return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = 0;
    char *p = strstr(buf, "<authenticator>");
    if (!p) return;
    p += strlen("<authenticator>");
    char *e = strchr(p, '<');
    if (e) *e = 0;
    snprintf(key, len, "%s", p);
}

/* The project's directory name, from the slot's init_data.xml (<project_dir>…/NAME<). */
static void project_name(char *name, size_t len) {
    char buf[65536];
    name[0] = 0;
    int fd = open("init_data.xml", O_RDONLY);
    if (fd < 0) return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = 0;
    char *p = strstr(buf, "<project_dir>");
    if (!p) return;
    p += strlen("<project_dir>");
    char *e = strchr(p, '<');
    if (!e) return;
    *e = 0;
    char *slash = strrchr(p, '/');
    snprintf(name, len, "%s", slash ? slash + 1 : p);
}

static int tcp(int port, int bind_only) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return 0;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((unsigned short)port);
    int ok = bind_only ? bind(s, (struct sockaddr *)&a, sizeof a) == 0
                       : connect(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}

static int abstract_socket(const char *name) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) return 0;
    struct sockaddr_un a = {0};
    a.sun_family = AF_UNIX;
    size_t n = strlen(name);
    memcpy(a.sun_path + 1, name, n);
    int ok = connect(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) == 0;
    close(s);
    return ok;
}

/* The PID of the other copy of this app (same command name, another PID), polled for up to
 * 20 s (under a client that runs the copies one after the other there is none); 0 if none. */
static int other_copy(void) {
    char me[64] = "", path[64], comm[64];
    FILE *f = fopen("/proc/self/comm", "r");
    if (!f) return 0;
    if (!fgets(me, sizeof me, f)) me[0] = 0;
    fclose(f);
    for (int tries = 0; tries < 200; tries++) {
        DIR *d = opendir("/proc");
        if (!d) return 0;
        struct dirent *e;
        int found = 0;
        while (!found && (e = readdir(d))) {
            int pid = atoi(e->d_name);
            if (pid <= 0 || pid == (int)getpid()) continue;
            snprintf(path, sizeof path, "/proc/%d/comm", pid);
            FILE *c = fopen(path, "r");
            if (!c) continue;
            if (fgets(comm, sizeof comm, c) && strcmp(comm, me) == 0) found = pid;
            fclose(c);
        }
        closedir(d);
        if (found) return found;
        usleep(100000);
    }
    return 0;
}

int main(void) {
    char path[4096], project[1024], cwd[4096];
    out = fopen("out", "w");
    if (!out) return 1;
    setvbuf(out, NULL, _IOLBF, 0);
    project_name(project, sizeof project);
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    const char *slash = strrchr(cwd, '/');
    int my_slot = slash ? atoi(slash + 1) : -1;
    /* Two copies run at once: let the other one's slot be set up. */
    sleep(2);

    /* What the app must be able to do. */
    report("read_own_input", can_read("in"));
    report("write_own_slot", can_create("scratch.txt"));
    snprintf(path, sizeof path, "../../projects/%s", project);
    report("list_own_project", can_list(path));
    report("read_system_library", can_read("/usr/lib/os-release") || can_read("/etc/os-release"));

    /* What it must not. */
    report("read_gui_rpc_auth_cfg", can_read("../../gui_rpc_auth.cfg"));
    snprintf(path, sizeof path, "../../account_%s.xml", project);
    report("read_account_file", can_read(path));
    report("read_client_state_xml", can_read("../../client_state.xml"));
    report("list_data_directory", can_list("../.."));
    report("write_data_directory", can_create("../../planted_by_app.txt"));
    report("read_other_project", can_read("../../projects/other.example_p/their_file"));
    report("write_other_project", can_create("../../projects/other.example_p/planted_by_app"));
    int other = 0;
    for (int s = 0; s < 8; s++) {
        if (s == my_slot) continue;
        snprintf(path, sizeof path, "../%d", s);
        if (can_list(path)) other = 1;
    }
    report("list_other_slot", other);
    report("read_etc_boinc_client", can_read("/etc/boinc-client/gui_rpc_auth.cfg") ||
                                    can_list("/etc/boinc-client"));
    report("read_etc_shadow", can_read("/etc/shadow"));
    const char *home = getenv("HOME");
    report("list_home", home && can_list(home));
    snprintf(path, sizeof path, "/proc/%d/environ", (int)getppid());
    report("read_client_environ", can_read(path));
    int copy = other_copy();
    report("other_app_running", copy > 0);
    snprintf(path, sizeof path, "/proc/%d/environ", copy);
    report("read_other_app_environ", copy > 0 && can_read(path));
    snprintf(path, sizeof path, "/proc/%d/mem", (int)getppid());
    int mem = open(path, O_RDONLY);
    report("open_client_memory", mem >= 0);
    if (mem >= 0) close(mem);
    report("signal_client", kill(getppid(), 0) == 0);
    report("signal_init", kill(1, 0) == 0);
    const char *port = strrchr(project, '_');
    report("tcp_connect_project_server", port && tcp(atoi(port + 1), 0));
    report("tcp_bind", tcp(0, 1));
    snprintf(path, sizeof path, "ferrite-confine-probe-%s", port ? port + 1 : "");
    report("abstract_socket_outside", abstract_socket(path));

    authenticator(path, sizeof path);
    fprintf(out, "authenticator %s\n", path);
    fclose(out);
    FILE *f = fopen("boinc_finish_called", "w");
    if (f) {
        fputs("0\n", f);
        fclose(f);
    }
    return 0;
}
