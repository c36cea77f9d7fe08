#!/usr/bin/env bash
# Ferrite on ARM: cross builds for arm64 (aarch64-unknown-linux-gnu) and armhf
# (armv7-unknown-linux-gnueabihf) from an x86_64 Debian machine, checks of what they do under
# qemu-user, and their Debian packages. tests/run.sh calls it after the native suite.
#
#   tests/cross.sh                 every step below, for both targets
#   tests/cross.sh --check-tools   only says which tools are missing
#
# Steps (each prints its time):
#   1. tools: Debian's cross compilers and C libraries (gcc-aarch64-linux-gnu,
#      gcc-arm-linux-gnueabihf, g++-aarch64-linux-gnu, g++-arm-linux-gnueabihf,
#      libc6-dev-arm64-cross, libc6-dev-armhf-cross), qemu-user-static, and the two Rust
#      targets. As root (unless FERRITE_NO_INSTALL=1) the missing ones are installed and dpkg
#      is told of the arm64 and armhf architectures (so that `apt-get download` finds their
#      BOINC API packages); otherwise the script says what is missing and skips everything
#      (exit 0), or fails under CI=true.
#   2. cross builds of ferrited and ferrite for both targets (the dev profile, as the
#      packaging test's package; Dhrystone's C goes through the cross compiler in build.rs),
#      and the other C in the tree (the fake NVML and OpenCL libraries of the tests, the
#      confinement tests' apps in tests/apps), and the C++ BOINC API test app linked against
#      Debian's arm64 / armhf libboinc-app (downloaded with `apt-get download`, unpacked
#      into a sysroot under the target folder, never installed). Under qemu the app runs
#      standalone: a run that crashes after its first step, then one that resumes from its
#      checkpoint and calls boinc_finish.
#   3. under qemu-user (qemu-aarch64-static / qemu-arm-static with the cross C libraries as
#      sysroot; binfmt_misc is not needed): the unit tests of the pure crates
#      (ferrite-proto, ferrite-sched, ferrite-hostinfo) for aarch64, ferrite-hostinfo's
#      /proc/cpuinfo fixture tests for both targets, and `ferrited --detect_gpus` for both,
#      checked for the vendor and the platforms.
#   4. the demo on aarch64: `ferrite demo` (native) with an aarch64 ferrited under qemu; the
#      demo project (native) serves the aarch64 platform its scheduler request names.
#   5. `cargo deb --target` for both: the package lists arm64 / armhf, its ferrited is an
#      ELF for that machine and runs under qemu. As root it is installed into a throwaway
#      root the way tests/tests/packaging.rs installs the amd64 one (`dpkg --root
#      --force-script-chrootless`, plus --force-architecture): the maintainer scripts create
#      the boinc account and the data directory there, and a purge removes them; otherwise
#      it is unpacked (dpkg -x).
#
# The native suite stays native: only these steps are emulated.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_INCREMENTAL=0
TARGETS=(aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf)
# Each package and a program that shows it is installed ("-": ask dpkg).
TOOLS=(
    "gcc-aarch64-linux-gnu aarch64-linux-gnu-gcc" "gcc-arm-linux-gnueabihf arm-linux-gnueabihf-gcc"
    "g++-aarch64-linux-gnu aarch64-linux-gnu-g++" "g++-arm-linux-gnueabihf arm-linux-gnueabihf-g++"
    "libc6-dev-arm64-cross -" "libc6-dev-armhf-cross -"
    "qemu-user-static qemu-aarch64-static" "qemu-user-static qemu-arm-static"
)

tool_installed() {
    if [ "$2" = - ]; then
        dpkg-query -W -f '${Status}' "$1" 2>/dev/null | grep -q 'ok installed'
    else
        command -v "$2" >/dev/null 2>&1
    fi
}

missing_tools() {
    local pair
    for pair in "${TOOLS[@]}"; do
        # shellcheck disable=SC2086 # two words: package and program
        tool_installed $pair || echo "${pair%% *}"
    done | awk '!seen[$0]++'
}

missing_targets() {
    local installed t
    installed="$(rustup target list --installed 2>/dev/null || true)"
    for t in "${TARGETS[@]}"; do
        grep -qx "$t" <<<"$installed" || echo "$t"
    done
}

# Missing tools: skipped with a message, a failure under CI=true.
skip_or_fail() {
    echo "SKIPPED tests/cross.sh: $1"
    if [ -n "${FERRITE_SKIPPED_LOG:-}" ]; then
        echo "SKIPPED tests/cross.sh: $1" >>"$FERRITE_SKIPPED_LOG"
    fi
    if [ "${CI:-}" = true ]; then
        echo "CI=true: the ARM tools must be there (tests/run.sh installs them as root)" >&2
        exit 1
    fi
    exit 0
}

if [ "${1:-}" = --check-tools ]; then
    need="$(missing_tools | tr '\n' ' ')"
    targets="$(missing_targets | tr '\n' ' ')"
    [ -n "$need" ] && echo "missing: apt-get install --no-install-recommends ${need% }"
    [ -n "$targets" ] && echo "missing: rustup target add ${targets% }"
    [ -z "$need$targets" ] && echo "every ARM tool is installed"
    [ -z "$need$targets" ]
    exit
fi

step_start=$SECONDS
step() {
    echo "== cross: $1"
    step_start=$SECONDS
}
step_done() {
    echo "   ($1: $((SECONDS - step_start)) s)"
}

step "tools"
mapfile -t need < <(missing_tools)
mapfile -t need_targets < <(missing_targets)
if [ "$(id -u)" = 0 ] && [ "${FERRITE_NO_INSTALL:-0}" != 1 ]; then
    if [ "${#need[@]}" -gt 0 ]; then
        echo "installing: ${need[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
    if [ "${#need_targets[@]}" -gt 0 ] && command -v rustup >/dev/null; then
        rustup target add "${need_targets[@]}"
    fi
    # The BOINC API test app's libraries come from Debian's arm64 / armhf packages.
    foreign="$(dpkg --print-foreign-architectures)"
    added=no
    for arch in arm64 armhf; do
        if ! grep -qx "$arch" <<<"$foreign"; then
            dpkg --add-architecture "$arch"
            added=yes
        fi
    done
    # An index that cannot be fetched (a third-party source without ARM) is not fatal.
    [ "$added" = yes ] && { apt-get update -qq || true; }
    mapfile -t need < <(missing_tools)
    mapfile -t need_targets < <(missing_targets)
fi
if [ "${#need[@]}" -gt 0 ]; then
    skip_or_fail "not installed: ${need[*]} (sudo apt-get install --no-install-recommends ${need[*]})"
fi
if [ "${#need_targets[@]}" -gt 0 ]; then
    skip_or_fail "Rust targets missing: ${need_targets[*]} (rustup target add ${need_targets[*]})"
fi
step_done tools

total_start=$SECONDS
# Cargo's output folder: CARGO_TARGET_DIR when set (tests/run.sh gives this script a folder of
# its own, so it can build while the native tests hold the main one), else target/.
tdir="${CARGO_TARGET_DIR:-target}"
tmp="$tdir/tmp/cross"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

# qemu-user for a target, with that target's C library as the sysroot.
qemu_for() {
    case "$1" in
        aarch64-unknown-linux-gnu) echo "qemu-aarch64-static -L /usr/aarch64-linux-gnu" ;;
        armv7-unknown-linux-gnueabihf) echo "qemu-arm-static -L /usr/arm-linux-gnueabihf" ;;
    esac
}
gcc_for() {
    case "$1" in
        aarch64-unknown-linux-gnu) echo aarch64-linux-gnu-gcc ;;
        armv7-unknown-linux-gnueabihf) echo arm-linux-gnueabihf-gcc ;;
    esac
}
# The multiarch folder of a target's libraries.
multiarch_for() {
    case "$1" in
        aarch64-unknown-linux-gnu) echo aarch64-linux-gnu ;;
        armv7-unknown-linux-gnueabihf) echo arm-linux-gnueabihf ;;
    esac
}
# What `dpkg --print-architecture` says on that machine, and the ELF e_machine of its programs.
deb_arch_for() {
    case "$1" in
        aarch64-unknown-linux-gnu) echo arm64 ;;
        armv7-unknown-linux-gnueabihf) echo armhf ;;
    esac
}
elf_machine_for() {
    case "$1" in
        aarch64-unknown-linux-gnu) echo 183 ;; # EM_AARCH64
        armv7-unknown-linux-gnueabihf) echo 40 ;; # EM_ARM
    esac
}
# The platforms `ferrited --detect_gpus` must list. Under qemu-user the host kernel answers
# the 32-bit ARM question, and an x86_64 kernel accepts the PER_LINUX32 persona: aarch64 gets
# its alternative platform, as on a Cortex-A72 or A76.
platforms_for() {
    case "$1" in
        aarch64-unknown-linux-gnu) echo "aarch64-unknown-linux-gnu arm-unknown-linux-gnueabihf" ;;
        armv7-unknown-linux-gnueabihf) echo "arm-unknown-linux-gnueabihf" ;;
    esac
}
elf_machine() {
    od -An -t u2 -j 18 -N 2 "$1" | tr -d ' '
}
fail() {
    echo "FAILED: $*" >&2
    exit 1
}

for t in "${TARGETS[@]}"; do
    step "build $t"
    cargo build --locked --target "$t" -p ferrite-daemon -p ferrite-ctl --bins
    cc="$(gcc_for "$t")"
    "$cc" -shared -fPIC -O1 -o "$tmp/fake_nvml-$t.so" \
        crates/ferrite-hostinfo/tests/fake_nvml/fake_nvml.c
    for vendor in AMD INTEL; do
        "$cc" -shared -fPIC -O1 "-DFAKE_$vendor" -o "$tmp/fake_icd_$vendor-$t.so" \
            crates/ferrite-hostinfo/tests/fake_opencl/fake_icd.c
    done
    for app in tests/apps/*.c; do
        "$cc" -O1 -Wall -o "$tmp/$(basename "$app" .c)-$t" "$app"
    done
    step_done "build $t"
done

# The C++ BOINC API test app for each target, against Debian's libboinc-app of that
# architecture. Debian's static libboinc_api.a holds no code, so the app links the shared
# libraries, which qemu finds through LD_LIBRARY_PATH in the unpacked sysroot.
boinc_api_debs="libboinc-app-dev libboinc-app7 libboinc7 libssl3"
for t in "${TARGETS[@]}"; do
    arch="$(deb_arch_for "$t")"
    step "BOINC API test app for $arch"
    sysroot="$tdir/boinc-api-$arch"
    lib="$sysroot/usr/lib/$(multiarch_for "$t")"
    if [ ! -e "$lib/libboinc_api.so" ]; then
        debs="$tdir/boinc-api-debs-$arch"
        rm -rf "$debs" "$sysroot"
        mkdir -p "$debs"
        # shellcheck disable=SC2086 # a list of package names
        if ! (cd "$debs" && apt-get download -qq $(printf "%s:$arch " $boinc_api_debs)) \
            >"$tmp/apt-download-$arch.log" 2>&1; then
            cat "$tmp/apt-download-$arch.log"
            msg="apt-get download of the $arch BOINC API packages failed (as root, this script adds the architecture: dpkg --add-architecture $arch && apt-get update)"
            [ "${CI:-}" = true ] && fail "$msg"
            echo "SKIPPED tests/cross.sh: $msg"
            [ -n "${FERRITE_SKIPPED_LOG:-}" ] && echo "SKIPPED tests/cross.sh: $msg" >>"$FERRITE_SKIPPED_LOG"
            continue
        fi
        for deb in "$debs"/*.deb; do dpkg -x "$deb" "$sysroot"; done
    fi
    app="$tmp/boinc_test_app-$arch"
    cxx="$(gcc_for "$t")"
    "${cxx%gcc}g++" -O1 -I"$sysroot/usr/include/boinc" \
        -o "$app" crates/ferrite-supervise/tests/apps/test_app.cpp \
        -L"$lib" -Wl,-rpath-link,"$lib" -lboinc_api -lboinc -lpthread
    [ "$(elf_machine "$app")" = "$(elf_machine_for "$t")" ] || fail "$app: not an ELF for $arch"
    # Standalone (no init_data.xml): the first run crashes after one step, which the API's
    # signal handler turns into exit status 193; the second resumes from the checkpoint.
    run="$tmp/app-run-$arch"
    mkdir -p "$run"
    echo 4 >"$run/in"
    app_lib="$(cd "$lib" && pwd)"
    app_abs="$(cd "$(dirname "$app")" && pwd)/$(basename "$app")"
    rc=0
    # shellcheck disable=SC2046 # the qemu command line is words
    (cd "$run" && LD_LIBRARY_PATH="$app_lib" $(qemu_for "$t") "$app_abs" --crash --step-ms 20) ||
        rc=$?
    [ "$rc" = 193 ] || fail "$arch test app: --crash exited $rc, not 193"
    # shellcheck disable=SC2046
    (cd "$run" && LD_LIBRARY_PATH="$app_lib" $(qemu_for "$t") "$app_abs" --step-ms 20) ||
        fail "$arch test app: the resumed run failed"
    grep -q "resuming from checkpoint" "$run/stderr.txt" || fail "$arch test app did not resume"
    [ "$(cat "$run/out")" = "done 4 steps" ] || fail "$arch test app: out is '$(cat "$run/out")'"
    [ -e "$run/boinc_finish_called" ] || fail "$arch test app: no boinc_finish_called"
    echo "   crashed once (193), resumed from its checkpoint, finished: $(cat "$run/out")"
    step_done "test app $arch"
done

step "unit tests under qemu (aarch64: ferrite-proto, ferrite-sched, ferrite-hostinfo)"
# The runner (qemu) comes from .cargo/config.toml. ferrite-hostinfo's integration file's
# host tests read the emulated machine (its cpuinfo is the x86 host's); the fixture tests are
# the ones that say what an ARM build reports for a Raspberry Pi.
cargo test --locked --target aarch64-unknown-linux-gnu -p ferrite-proto -p ferrite-sched --lib
# One test at a time: a test that writes a fake podman script and runs it at once can find it
# held open (ETXTBSY) by another test's fork, whose window is much wider under emulation.
cargo test --locked --target aarch64-unknown-linux-gnu -p ferrite-hostinfo --lib \
    -- --test-threads=1
cargo test --locked --target aarch64-unknown-linux-gnu -p ferrite-hostinfo --test hostinfo \
    -- cpuinfo detect_host_names benchmark_figures --include-ignored --nocapture
step_done "aarch64 unit tests"
step "armhf: ferrite-hostinfo's cpuinfo fixture tests under qemu"
cargo test --locked --target armv7-unknown-linux-gnueabihf -p ferrite-hostinfo --test hostinfo \
    -- cpuinfo detect_host_names
step_done "armhf tests"

for t in "${TARGETS[@]}"; do
    step "ferrited --detect_gpus under qemu ($t)"
    # shellcheck disable=SC2046 # the qemu command line is words
    report="$($(qemu_for "$t") "$tdir/$t/debug/ferrited" --detect_gpus --dir "$tmp")"
    echo "$report" | sed 's/^/   | /'
    grep -qx "Platforms: $(platforms_for "$t")" <<<"$report" ||
        fail "$t: platforms are not '$(platforms_for "$t")'"
    grep -q "^Processor: [0-9]* ARM " <<<"$report" || fail "$t: vendor is not ARM"
    step_done "detect $t"
done

# The same emulated ferrited reading a Raspberry Pi's /proc/cpuinfo (a fixture bind-mounted
# over the host's in a private mount namespace), against what the official client's ARM
# build reports for that text (parse_cpuinfo_linux in client/hostinfo_unix.cpp; see
# crates/ferrite-hostinfo/tests/hostinfo.rs for the two deliberate differences).
fixtures=crates/ferrite-hostinfo/tests/fixtures/cpuinfo
# target | fixture | "Processor:" line after the CPU count | features | product name
PI_CASES=(
    "aarch64-unknown-linux-gnu|aarch64-raspberry-pi-4.txt|ARM BCM2835 [Impl 0x41 Arch 8 Variant 0x0 Part 0xd08 Rev 3]|fp asimd evtstrm crc32 cpuid|BCM2835"
    "aarch64-unknown-linux-gnu|aarch64-raspberry-pi-5.txt|ARM [Impl 0x41 Arch 8 Variant 0x4 Part 0xd0b Rev 1]|fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp|Raspberry Pi 5 Model B Rev 1.0"
    "armv7-unknown-linux-gnueabihf|armv7l-raspberry-pi-os-32bit.txt|ARM ARMv7 Processor rev 3 (v7l) [Impl 0x41 Arch 7 Variant 0x0 Part 0xd08 Rev 3]|half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva idivt vfpd32 lpae evtstrm crc32|BCM2711"
)
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    for case in "${PI_CASES[@]}"; do
        IFS='|' read -r t fixture processor features product <<<"$case"
        step "ferrited --detect_gpus under qemu ($t) on $fixture"
        report="$(unshare -m sh -c 'mount --bind "$1" /proc/cpuinfo && shift && exec "$@"' sh \
            "$fixtures/$fixture" $(qemu_for "$t") "$tdir/$t/debug/ferrited" --detect_gpus --dir "$tmp")"
        echo "$report" | sed 's/^/   | /'
        got="$(sed -n 's/^Processor: [0-9]* //p' <<<"$report")"
        [ "$got" = "$processor" ] || fail "$fixture: 'Processor: N $got', not '$processor'"
        grep -qxF "Processor features: $features" <<<"$report" || fail "$fixture: features"
        grep -qxF "Product name: $product" <<<"$report" || fail "$fixture: product name"
        grep -qxF "Platforms: $(platforms_for "$t")" <<<"$report" || fail "$fixture: platforms"
        step_done "$fixture"
    done
else
    echo "   (not root or no mount namespaces: the Raspberry Pi cpuinfo runs are left out)"
fi

step "demo on aarch64: ferrited under qemu"
demo_bin="$tmp/demo-bin"
mkdir -p "$demo_bin"
cargo build --locked -p ferrite-ctl -p ferrite-testproject --bins
# `ferrite demo` starts the ferrited and ferrite-testproject beside its own (resolved) path:
# a copy of the native ferrite, the native project server, and an aarch64 ferrited behind
# qemu (exec: the demo's signals reach qemu, which hands them to the emulated daemon).
cp "$tdir/debug/ferrite" "$demo_bin/ferrite"
ln -s "$(cd "$tdir" && pwd)/debug/ferrite-testproject" "$demo_bin/ferrite-testproject"
printf '#!/bin/sh\nexec %s %s "$@"\n' "$(qemu_for aarch64-unknown-linux-gnu)" \
    "$(cd "$tdir" && pwd)/aarch64-unknown-linux-gnu/debug/ferrited" >"$demo_bin/ferrited"
chmod +x "$demo_bin/ferrited"
demo_out="$("$demo_bin/ferrite" demo --jobs 2 --timeout 300 --data "$tmp/demo")" || {
    echo "$demo_out"
    cat "$tmp/demo/ferrited.log" || true
    fail "the demo with an aarch64 ferrited"
}
echo "$demo_out" | tail -n 5 | sed 's/^/   | /'
grep -q "Done: 2 tasks reported" <<<"$demo_out" || fail "the aarch64 demo reported no 2 tasks"
grep -q "aarch64-unknown-linux-gnu" "$tmp/demo/client/client_state.xml" ||
    fail "the aarch64 demo's state names no aarch64 platform"
step_done "aarch64 demo"

for t in "${TARGETS[@]}"; do
    arch="$(deb_arch_for "$t")"
    step "Debian package for $arch"
    out="$tmp/deb-$arch"
    mkdir -p "$out"
    # --profile dev: the debug binaries built above (cargo-deb warns that it is meant for
    # release builds); --fast: a quicker compression of these large binaries.
    cargo deb --target "$t" --no-build --profile dev --fast -p ferrite-daemon --output "$out" \
        >"$out/cargo-deb.log" 2>&1 || {
        cat "$out/cargo-deb.log"
        fail "cargo deb --target $t"
    }
    deb="$(ls "$out"/*.deb)"
    echo "   $(basename "$deb")"
    [ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || fail "$deb: not Architecture $arch"
    # Absolute: dpkg runs the maintainer scripts by their path under the root.
    root="$(cd "$out" && pwd)/root"
    installed=no
    if [ "$(id -u)" = 0 ]; then
        # A throwaway root with an empty dpkg database, as the amd64 packaging test does.
        mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
        : >"$root/var/lib/dpkg/status"
        deb_root() {
            dpkg --root="$root" --force-script-chrootless --force-depends \
                --force-architecture --log=/dev/null "$@"
        }
        deb_root -i "$deb" >"$out/dpkg-install.log" 2>&1 || {
            cat "$out/dpkg-install.log"
            fail "dpkg --root -i $deb"
        }
        [ "$(dpkg --root="$root" -s ferrite | sed -n 's/^Architecture: //p')" = "$arch" ] ||
            fail "$deb: the installed package is not Architecture $arch"
        grep -q '^boinc:' "$root/etc/passwd" || fail "$deb: no boinc account in the root"
        [ -d "$root/var/lib/ferrite" ] || fail "$deb: no /var/lib/ferrite"
        [ -L "$root/var/lib/ferrite/gui_rpc_auth.cfg" ] || fail "$deb: no gui_rpc_auth.cfg link"
        installed=yes
        echo "   installed into a throwaway root: boinc account, /var/lib/ferrite, links"
    else
        dpkg -x "$deb" "$root"
    fi
    for b in ferrited ferrite; do
        [ "$(elf_machine "$root/usr/bin/$b")" = "$(elf_machine_for "$t")" ] ||
            fail "$deb: usr/bin/$b is not an ELF for $arch"
    done
    [ -f "$root/etc/ferrite/cc_config.xml" ] || fail "$deb: no /etc/ferrite/cc_config.xml"
    # shellcheck disable=SC2046 # the qemu command line is words
    $(qemu_for "$t") "$root/usr/bin/ferrited" --version | sed 's/^/   | /'
    if [ "$installed" = yes ]; then
        deb_root --purge ferrite >"$out/dpkg-purge.log" 2>&1 || {
            cat "$out/dpkg-purge.log"
            fail "dpkg --root --purge ferrite ($arch)"
        }
        [ ! -e "$root/usr/bin/ferrited" ] && [ ! -e "$root/var/lib/ferrite" ] ||
            fail "$deb: the purge left ferrited or /var/lib/ferrite"
        echo "   purged: ferrited and /var/lib/ferrite gone"
    fi
    step_done "deb $arch"
done

echo "== cross: all passed in $((SECONDS - total_start)) s"
