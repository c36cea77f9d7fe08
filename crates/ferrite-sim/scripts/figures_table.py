#!/usr/bin/env python3
"""Prints docs/scheduling.md's figures table: ferrite-sim beside the official emulator.

Run from the repository root after `cargo build --release -p ferrite-sim`:
`python3 crates/ferrite-sim/scripts/figures_table.py [SEED [SCENARIO...]]` (seed 1 by default).
Official figures come from each scenario folder's `emulator_output_<variant>.txt` ("missed"
is the sum of the projects' missed deadlines); bold marks a Ferrite figure worse at the third
decimal.
`figures_table.py seeds [SCENARIO]` prints instead the table over the seeds of sample_legacy (or
of SCENARIO: flaky_part_time) that its `official_seeds.txt` holds (1-20; flaky_part_time: 1-100):
the official per-seed figures from that file, Ferrite's from ferrite-sim, means of both.
"""
import json, re, subprocess, sys, os
BIN = os.environ.get("SIM", "target/release/ferrite-sim")
FIX = "crates/ferrite-sim/tests/fixtures"
SC = [("a_long_vs_short", 8640000, []), ("b_three_projects", 864000, []), ("sample_legacy", 86400, []),
      ("gpu_shared", 864000, []), ("gpu_deadlines", 864000, []), ("edf_short_behind_long", 86400, ["--existing_jobs_only"]),
      ("mt_beside_st", 864000, []), ("app_max_concurrent", 864000, []),
      ("two_gpu_types", 864000, [])]
SEEDED = {"sample_legacy": 86400, "flaky_part_time": 864000}
VAR = [("default", []), ("rr_only", ["--cpu_sched_rr_only"]), ("server_uses_workload", ["--server_uses_workload"])]
def seed_means(name):
    dur = SEEDED[name]
    path = f"{FIX}/{name}/official_seeds.txt"
    off, cur = {}, None
    for line in open(path):
        if line.startswith("## "):
            cur = line[3:].replace(f"--duration {dur}", "").strip(); off[cur] = []
        elif line.startswith("seed "):
            w = line.split(); off[cur].append({w[k]: float(w[k + 1]) for k in range(2, len(w), 2)})
    keys = [("wasted", "wasted_fraction", 3), ("idle", "idle_fraction", 4), ("share", "share_violation", 3),
            ("missed", "deadlines_missed", 1), ("monotony", "monotony", 3), ("rpcs_per_job", "rpcs_per_job", 3)]
    for opts, seeds in off.items():
        ours = [json.loads(subprocess.run([BIN, "--json", "--seed", str(s), "--duration", str(dur), *opts.split(), f"{FIX}/{name}"],
                                          capture_output=True, text=True, check=True).stdout) for s in range(1, len(seeds) + 1)]
        cells = []
        for ok, fk, d in keys:
            a = sum(x[ok] for x in seeds) / len(seeds); b = sum(x[fk] for x in ours) / len(ours)
            c = f"{a:.{d}f} / {b:.{d}f}"
            cells.append(f"**{c}**" if b > a else c)
        print(f"| {f'`{opts}`' if opts else 'default'} | " + " | ".join(cells) + " |")
if sys.argv[1:2] == ["seeds"]:
    seed_means(sys.argv[2] if len(sys.argv) > 2 else "sample_legacy"); sys.exit(0)
seed = sys.argv[1] if len(sys.argv) > 1 else "1"
only = sys.argv[2:]
def official(path):
    t = open(path).read()
    g = lambda k: float(re.search(k + r" ([0-9.eE+-]+)", t).group(1))
    missed = sum(int(m) for m in re.findall(r"missed (\d+)", t))
    return dict(w=g("wasted fraction"), i=g("Idle fraction"), s=g("Share violation"), m=missed, mo=g("Monotony"), r=g("RPCs per job"))
worse = 0
for name, dur, extra in SC:
    if only and name not in only: continue
    for vname, vargs in VAR:
        o = official(f"{FIX}/{name}/emulator_output_{vname}.txt")
        out = subprocess.run([BIN, "--json", "--seed", seed, "--duration", str(dur), *extra, *vargs, f"{FIX}/{name}"], capture_output=True, text=True, check=True).stdout
        j = json.loads(out)
        f = dict(w=j["wasted_fraction"], i=j["idle_fraction"], s=j["share_violation"], m=j["deadlines_missed"], mo=j["monotony"], r=j["rpcs_per_job"])
        cells = []
        for k in ["w", "i", "s", "m", "mo", "r"]:
            if k == "m":
                a, b = str(o[k]), str(f[k]); bad = f[k] > o[k]
            else:
                a, b = f"{o[k]:.3f}", f"{f[k]:.3f}"; bad = float(b) > float(a)
            worse += bad
            c = f"{a} / {b}"
            cells.append(f"**{c}**" if bad else c)
        v = "default" if vname == "default" else f"`--{'cpu_sched_rr_only' if vname == 'rr_only' else vname}`"
        print(f"| {name} | {v} | " + " | ".join(cells) + " |")
print(f"worse cells: {worse}", file=sys.stderr)
