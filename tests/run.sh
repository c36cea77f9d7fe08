#!/usr/bin/env bash
# Ferrite's test command: sets up what the tests need, then runs the whole test suite.
#
#   tests/run.sh                   every test of the workspace (as cargo test --workspace, its
#                                  test binaries several at a time: tests/run_binaries.py) and,
#                                  beside those, the ARM cross builds and emulated checks
#                                  (tests/cross.sh)
#   tests/run.sh -p ferrite-ctl    arguments go to `cargo test` (then without --workspace)
#   tests/run.sh --check-peers     only says which Debian peers are missing
#
# FERRITE_NO_INSTALL=1 keeps it from installing anything even as root (it then only says what
# is missing, as for another user).
#
# The tests drive Debian's BOINC programs as peers (boinc-client's boinc and boinccmd,
# boinctui, BOINC Manager under Xvfb, PoCL, Chromium, promtool, ...) and a real BOINC project
# server (the kit's MariaDB, Apache and PHP). Run as root, this installs the missing ones with
# apt-get, under a policy-rc.d that keeps apt from starting their services. Run as another
# user, it prints the apt-get line that installs what is missing and runs the suite anyway:
# a test whose peer is missing is skipped with a SKIPPED line (under CI=true it fails
# instead), and every skip is listed at the end. Every test binary runs whatever the others'
# results (as cargo's --no-fail-fast); the exit status is non-zero when any test failed.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each peer package and a program that shows it is installed ("-": ask dpkg).
PEERS=(
    "boinc-client boinc" "boinc-client boinccmd" "libboinc-app-dev -"
    "boinctui boinctui" "tmux tmux"
    # BOINC Manager in a virtual X session (Xvfb) driven by xdotool, screenshots by xwd; its
    # wizards followed through their accessibility tree (D-Bus session bus, AT-SPI, pyatspi).
    "boinc-manager boincmgr" "xvfb Xvfb" "xdotool xdotool" "x11-apps xwd"
    # dbus-daemon also runs the private bus of the fake systemd-logind (tests/tests/logind.rs).
    "dbus-daemon dbus-daemon" "at-spi2-core -" "python3-pyatspi -"
    # OpenCL: the ICD loader and PoCL, a real OpenCL platform on the CPU (detection tests).
    "ocl-icd-libopencl1 -" "pocl-opencl-icd -"
    # The BOINC server kit's packages (MariaDB, Apache with PHP, Python's MySQL module), so
    # that tests bringing up several servers at once never run apt-get themselves.
    "mariadb-server -" "mariadb-client -" "apache2 -" "libapache2-mod-php -" "php-cli -"
    "php-mysql -" "php-xml -" "python3 python3" "python3-mysqldb -" "libmariadb3 -"
    "xz-utils xz"
    # promtool checks the metrics text; headless Chromium driven by chromedriver tests the
    # web dashboard.
    "prometheus promtool" "chromium chromium" "chromium-driver chromedriver"
    # The packaging test: systemd-analyze verify and systemd-sysusers --root.
    "systemd systemd-analyze"
    # tests/cross.sh: cross compilers and C libraries for arm64 and armhf, qemu-user to run
    # what they build (no binfmt_misc needed).
    "gcc-aarch64-linux-gnu aarch64-linux-gnu-gcc" "gcc-arm-linux-gnueabihf arm-linux-gnueabihf-gcc"
    "libc6-dev-arm64-cross -" "libc6-dev-armhf-cross -" "qemu-user-static qemu-aarch64-static"
    "g++-aarch64-linux-gnu aarch64-linux-gnu-g++" "g++-arm-linux-gnueabihf arm-linux-gnueabihf-g++"
)

# Whether peer package $1 is installed: its program $2 is on the PATH, or, for "-", dpkg
# knows the package as installed.
peer_installed() {
    if [ "$2" = - ]; then
        dpkg-query -W -f '${Status}' "$1" 2>/dev/null | grep -q 'ok installed'
    else
        command -v "$2" >/dev/null 2>&1
    fi
}

# The peer packages not installed, one a line, each once.
missing_peers() {
    local pair
    for pair in "${PEERS[@]}"; do
        # shellcheck disable=SC2086 # two words: package and program
        peer_installed $pair || echo "${pair%% *}"
    done | awk '!seen[$0]++'
}

if [ "${1:-}" = --check-peers ]; then
    missing="$(missing_peers | tr '\n' ' ')"
    if [ -n "$missing" ]; then
        echo "missing: apt-get install --no-install-recommends ${missing% }"
        exit 1
    fi
    echo "every peer is installed"
    exit 0
fi

echo "== test peers"
mapfile -t need < <(missing_peers)
if [ "${#need[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && [ "${FERRITE_NO_INSTALL:-0}" != 1 ]; then
    export DEBIAN_FRONTEND=noninteractive
    # Debian's boinc-client (and the kit's MariaDB and Apache) are test peers, not services:
    # a policy-rc.d that exits 101 keeps apt from starting them.
    cleanup_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        cleanup_policy=1
        # Gone again even when apt-get fails.
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    # The packages with a service that were not installed before this run.
    new_services=()
    for pkg in boinc-client mariadb-server apache2 prometheus; do
        peer_installed "$pkg" - || new_services+=("$pkg")
    done
    echo "installing: ${need[*]}"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    # Only services this run just installed, in case a package's scripts started one despite
    # policy-rc.d: the tests need none of them (their official clients and servers run on
    # their own ports and folders). A service that was installed before is the machine's
    # own and is left alone, as is every process this script did not start.
    for pkg in "${new_services[@]}"; do
        case "$pkg" in
            mariadb-server) unit=mariadb ;;
            *) unit="$pkg" ;;
        esac
        systemctl stop "$unit" >/dev/null 2>&1 || true
    done
    if [ "$cleanup_policy" = 1 ]; then
        rm -f /usr/sbin/policy-rc.d
        trap - EXIT
    fi
    mapfile -t need < <(missing_peers)
    if [ "${#need[@]}" -gt 0 ]; then
        echo "still missing after apt-get install: ${need[*]}" >&2
        exit 1
    fi
elif [ "${#need[@]}" -gt 0 ]; then
    echo "not installed: ${need[*]}"
    echo "the tests that need them are skipped; to run them too:"
    echo "    sudo apt-get install --no-install-recommends ${need[*]}"
fi
if [ "${#need[@]}" = 0 ]; then echo "every peer is installed"; fi

# The packaging test builds the Debian package with cargo-deb (a pinned version; about a
# minute to compile the first time, nothing when already installed).
CARGO_DEB_VERSION=3.8.0
if ! cargo deb --version 2>/dev/null | grep -qx "cargo-deb $CARGO_DEB_VERSION"; then
    cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked --quiet
fi

# tests/cross.sh builds for these Rust targets (rustup's standard libraries, a download).
if command -v rustup >/dev/null 2>&1 && [ "${FERRITE_NO_INSTALL:-0}" != 1 ]; then
    rustup target add aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf >/dev/null 2>&1 ||
        echo "rustup target add aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf failed"
fi

# The real BOINC server the real-server tests bring up (tests/src/boinc_server.rs): the kit
# beside the repository, unless the caller names another.
if [ -z "${BOINC_SERVER_KIT:-}" ] && [ -x ../shared/boinc-server/up.sh ]; then
    BOINC_SERVER_KIT="$(cd ../shared/boinc-server && pwd)"
fi
if [ -n "${BOINC_SERVER_KIT:-}" ]; then
    export BOINC_SERVER_KIT
    echo "BOINC server kit: $BOINC_SERVER_KIT"
fi

echo "== tests"
# Each skipped test appends its SKIPPED line here (ferrite_e2e::skip).
FERRITE_SKIPPED_LOG="$(mktemp "${TMPDIR:-/tmp}/ferrite-skipped.XXXXXX")"
export FERRITE_SKIPPED_LOG
trap 'rm -f "$FERRITE_SKIPPED_LOG"' EXIT
status=0
if [ "$#" -gt 0 ]; then
    cargo test --locked --no-fail-fast "$@" || status=$?
elif ! command -v python3 >/dev/null 2>&1; then
    # No python3 to list the test targets with: the whole workspace in one run.
    cargo test --workspace --locked --no-fail-fast || status=$?
else
    # The whole workspace, its test binaries several at a time (tests/run_binaries.py): most
    # of them wait (daemons' periods, the real server's daemons, backoffs) rather than
    # compute. Built first with cargo's usual output, then run FERRITE_TEST_JOBS binaries at
    # a time (default 4), the slow ones first, at most FERRITE_SERVER_JOBS (default 2) of the
    # real-server binaries among them (each of their tests brings up its own MariaDB and
    # Apache; four tests at a time in each), then the doc tests; each binary's output printed
    # whole when it ends, and a table of every binary's time and counts at the end.
    cargo test --workspace --locked --no-run || status=$?
    # The ARM cross builds and their checks under qemu-user (tests/cross.sh) run beside the
    # tests, in a target folder of their own (cargo locks the one the tests use), at a lower
    # CPU priority so that the tests' daemons keep their pace; their output is shown at the end.
    cross_log="$(mktemp "${TMPDIR:-/tmp}/ferrite-cross.XXXXXX")"
    CARGO_TARGET_DIR=target/cross nice -n 10 tests/cross.sh >"$cross_log" 2>&1 &
    cross_pid=$!
    if [ "$status" = 0 ]; then
        python3 tests/run_binaries.py --jobs "${FERRITE_TEST_JOBS:-4}" \
            --server-jobs "${FERRITE_SERVER_JOBS:-2}" || status=$?
    fi
    cross_status=0
    wait "$cross_pid" || cross_status=$?
    echo "== ARM cross builds and emulated checks (tests/cross.sh)"
    cat "$cross_log"
    rm -f "$cross_log"
    if [ "$cross_status" != 0 ]; then status=$cross_status; fi
fi

echo "== skipped"
if [ -s "$FERRITE_SKIPPED_LOG" ]; then
    sort -u "$FERRITE_SKIPPED_LOG"
    if [ "${#need[@]}" -gt 0 ]; then
        echo "to run them: sudo apt-get install --no-install-recommends ${need[*]}"
    fi
else
    echo "none"
fi
exit "$status"
