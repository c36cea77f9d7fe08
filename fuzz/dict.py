#!/usr/bin/env python3
"""Writes fuzz/dict/<target>.dict (libFuzzer dictionaries): the element names the parsers
match on, taken from the seed corpora and from the sources."""
import pathlib, re

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "fuzz" / "dict"
OUT.mkdir(exist_ok=True)
TAG = re.compile(rb"</?([A-Za-z_][A-Za-z0-9_]*)")


def names_in(paths):
    found = set()
    for p in paths:
        found.update(TAG.findall(p.read_bytes()))
    return found


def quoted_in(paths):
    found = set()
    for p in paths:
        found.update(re.findall(rb'"([a-z][a-z0-9_]{2,40})"', p.read_bytes()))
    return found


def write(target, names, extra=()):
    lines = []
    for n in sorted(names):
        s = n.decode()
        lines += [f'"<{s}>"', f'"</{s}>"', f'"<{s}/>"']
    lines += list(extra)
    (OUT / f"{target}.dict").write_text("\n".join(lines) + "\n")


src = ROOT / "crates"
for t, rs in [("sched_reply", ["ferrite-proto/src/sched_reply.rs", "ferrite-proto/src/client_state/objects.rs",
                               "ferrite-proto/src/client_state/project.rs", "ferrite-project/src/reply.rs"]),
              ("client_state", ["ferrite-proto/src/client_state/mod.rs", "ferrite-proto/src/client_state/objects.rs",
                                "ferrite-proto/src/client_state/project.rs", "ferrite-proto/src/client_state/stats.rs",
                                "ferrite-proto/src/host.rs"]),
              ("prefs_config", ["ferrite-proto/src/prefs.rs", "ferrite-proto/src/cc_config.rs",
                                "ferrite-proto/src/app_config.rs"]),
              ("gui_rpc_request", ["ferrite-gui-rpc/src/ops.rs", "ferrite-gui-rpc/src/request.rs"]),
              ("transfer_response", ["ferrite-project/src/files.rs", "ferrite-proto/src/client_state/objects.rs"]),
              ("project_pages", ["ferrite-project/src/master.rs", "ferrite-project/src/attach.rs",
                                 "ferrite-proto/src/account.rs", "ferrite-proto/src/statistics.rs",
                                 "ferrite-proto/src/job_log.rs"])]:
    names = names_in((ROOT / "fuzz/corpus" / t).iterdir()) | quoted_in(src / r for r in rs)
    extra = ['"\\x03"', '"&amp;"', '"&lt;"', '"<![CDATA["', '"]]>"', '"<!--"', '"-->"', '"<?xml version=\\"1.0\\"?>"',
             '"1e308"', '"-1"', '"nan"', '"inf"', '"18446744073709551616"']
    write(t, {n for n in names if len(n) <= 40}, extra)
    print(t, len(names))
