#!/usr/bin/env python3
"""Builds fuzz/corpus/<target>/ from the repository's test fixtures (run from anywhere).

Each seed carries the selector byte its target expects in front of the document."""
import hashlib, json, os, pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "fuzz" / "corpus"
MAX = 20_000  # seeds are small files only


def put(target, data):
    if len(data) > MAX:
        return
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


def files(*globs):
    seen = set()
    for g in globs:
        for p in sorted(ROOT.glob(g)):
            if p.is_file() and p not in seen and "target" not in p.parts:
                seen.add(p)
                yield p.read_bytes()


replies = list(files("crates/*/tests/fixtures/**/*sched_reply*.xml", "tests/fixtures/data_dir/*/sched_reply_*.xml"))
for i, r in enumerate(replies):
    for sel in (0, 3, 0x1d):
        put("sched_reply", bytes([sel]) + r)

for s in files("crates/*/tests/fixtures/**/*client_state*.xml", "crates/*/tests/fixtures/state_*.xml",
               "tests/fixtures/data_dir/*/client_state*.xml"):
    put("client_state", s)

prefs = list(files("crates/*/tests/fixtures/**/global_prefs*.xml", "tests/fixtures/data_dir/*/global_prefs*.xml",
                   "config/global_prefs_override.xml"))
overrides = [p for p in prefs if b"<venue" not in p][:3]
for p in prefs:
    put("prefs_config", b"\x00" + p)
    put("prefs_config", b"\x03" + p)
    for o in overrides:
        put("prefs_config", b"\x00" + p + b"\x00" + o)
for c in files("crates/*/tests/fixtures/**/cc_config*.xml", "tests/fixtures/data_dir/*/cc_config.xml", "config/cc_config.xml"):
    put("prefs_config", b"\x01" + c)
for a in files("crates/*/tests/fixtures/**/app_config*.xml", "tests/fixtures/**/app_config*.xml"):
    put("prefs_config", b"\x02" + a)
put("prefs_config", b"\x02<app_config>\n<app>\n<name>uppercase</name>\n<max_concurrent>2</max_concurrent>\n"
    b"<gpu_versions>\n<gpu_usage>0.5</gpu_usage>\n<cpu_usage>0.4</cpu_usage>\n</gpu_versions>\n"
    b"<report_results_immediately/>\n</app>\n<app_version>\n<app_name>uppercase</app_name>\n"
    b"<plan_class>cuda</plan_class>\n<avg_ncpus>1</avg_ncpus>\n<ngpus>1</ngpus>\n<cmdline>--x</cmdline>\n"
    b"</app_version>\n<project_max_concurrent>3</project_max_concurrent>\n</app_config>\n")

texts = []
for p in sorted((ROOT / "crates/ferrite-gui-rpc/tests/fixtures").glob("*.json")):
    j = json.loads(p.read_text())
    for m in j.get("requests", []) + [m for m in j.get("messages", []) if m.get("direction") == "request"]:
        texts.append(m["text"].encode())
conv = b"".join(texts[:6])
for t in texts:
    put("gui_rpc_request", b"\x0f" + t)
    put("gui_rpc_request", b"\x30" + t)
put("gui_rpc_request", b"\x13" + conv)

for u in files("crates/*/tests/fixtures/upload_reply.xml"):
    put("transfer_response", b"\x00" + u)
for u in (b"<data_server_reply>\n    <status>0</status>\n    <file_size>12345</file_size>\n</data_server_reply>\n",
          b"<data_server_reply>\n    <status>-1</status>\n    <message>bad file</message>\n</data_server_reply>\n",
          b"HTTP junk before <data_server_reply><status>1</status></data_server_reply>"):
    put("transfer_response", b"\x00" + u)
body = b"hello world\n"
md5 = hashlib.md5(body).hexdigest().encode()
fi = (b"<file_info>\n<name>in_1</name>\n<nbytes>12</nbytes>\n<max_nbytes>0</max_nbytes>\n<md5_cksum>" + md5 +
      b"</md5_cksum>\n<url>http://127.0.0.1/in_1</url>\n</file_info>\n")
put("transfer_response", b"\x01" + fi + b"\x00" + body)
put("transfer_response", b"\x01" + fi.replace(b"</name>", b"</name>\n<signature_required/>\n<file_signature>\n"
                                                + md5 + b"\n.\n</file_signature>") + b"\x00" + body)
put("transfer_response", b"\x03" + bytes(range(256)))
key = (ROOT / "crates/ferrite-project/tests/fixtures/code_sign_public").read_bytes()
signed = (ROOT / "crates/ferrite-proto/tests/fixtures/crypt/sched_reply_04_work_signed_app_3_jobs.xml").read_bytes()
sig = signed.split(b"<file_signature>")[1].split(b"</file_signature>")[0]
put("transfer_response", b"\x02" + key + b"\x00" + sig)
for sel, globs in [(0, ["crates/*/tests/fixtures/master_page.html", "tests/fixtures/data_dir/*/master_*.xml"]),
                  (1, ["crates/*/tests/fixtures/lookup_account_reply_*.xml", "tests/fixtures/data_dir/*/lookup_account.xml",
                       "tests/fixtures/data_dir/*/create_account.xml"]),
                  (2, ["crates/*/tests/fixtures/get_project_config_reply.xml", "tests/fixtures/data_dir/*/get_project_config.xml"]),
                  (3, ["crates/ferrite-proto/tests/fixtures/config/account_*.xml"]),
                  (4, ["crates/ferrite-proto/tests/fixtures/config/statistics_*.xml"]),
                  (5, ["crates/ferrite-proto/tests/fixtures/config/job_log_*.txt"]),
                  (6, ["crates/ferrite-proto/tests/fixtures/config/daily_xfer_history.xml"])]:
    for d in files(*globs):
        put("project_pages", bytes([sel]) + d)
        if sel == 0:
            put("project_pages", bytes([0x80]) + d)
print({d.name: len(list(d.iterdir())) for d in OUT.iterdir()})
