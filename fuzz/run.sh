#!/usr/bin/env bash
# Runs Ferrite's fuzz targets: first replays every kept regression input (each must pass),
# then fuzzes each target for SECONDS (default 60), one after another, one job each.
# Needs the nightly toolchain and cargo-fuzz (installed here when missing).
# New corpus entries go to fuzz/work/<target>/ (not committed); crashes to
# fuzz/artifacts/<target>/; builds go to fuzz/target/ unless CARGO_TARGET_DIR is set.
# Exits non-zero when a target fails.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_PER_TARGET="${1:-60}"
TARGETS=(sched_reply client_state prefs_config gui_rpc_request transfer_response project_pages)

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "fuzz/run.sh: the nightly toolchain is needed (rustup toolchain install nightly)" >&2
    exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --quiet
fi

# No sanitizer (the code under test is safe Rust: the findings are panics, overflows,
# hangs and memory blow-ups), debug assertions on so integer overflow panics.
FLAGS=(-s none -a)
cargo +nightly fuzz build "${FLAGS[@]}"

failed=()
for t in "${TARGETS[@]}"; do
    if [ -d "regressions/$t" ] && [ -n "$(ls -A "regressions/$t")" ]; then
        echo "== fuzz: replaying regressions/$t"
        # Files (not directories) are each run once.
        if ! cargo +nightly fuzz run "${FLAGS[@]}" "$t" "regressions/$t"/* >"/tmp/ferrite-fuzz-$t-replay.log" 2>&1; then
            tail -40 "/tmp/ferrite-fuzz-$t-replay.log"
            failed+=("$t (regression)")
            continue
        fi
    fi
    echo "== fuzz: $t for ${SECONDS_PER_TARGET}s"
    mkdir -p "work/$t" "artifacts/$t"
    log="/tmp/ferrite-fuzz-$t.log"
    dict=()
    if [ -f "dict/$t.dict" ]; then dict=(-dict="dict/$t.dict"); fi
    if cargo +nightly fuzz run "${FLAGS[@]}" "$t" "work/$t" "corpus/$t" -- "${dict[@]}" \
        -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$log" 2>&1; then
        grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|^#[0-9]+ +DONE' "$log" || true
    else
        tail -60 "$log"
        failed+=("$t")
    fi
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: failed: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz: ${#TARGETS[@]} targets, no finding"
