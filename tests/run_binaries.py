#!/usr/bin/env python3
"""Runs the workspace's test binaries several at a time (tests/run.sh's default path).

Most of Ferrite's test binaries spend their time waiting (daemons' periods, the real BOINC
server's daemons, backoffs), not computing, so this builds them once with
`cargo test --workspace --no-run` and then runs them JOBS at a time, the known slow ones
first, each as `cargo test` would run it: its package folder as working directory and the
CARGO_* variables cargo gives a test. Each binary's output goes to a file of its own and is
printed whole when it ends, so the log reads like cargo's. The real-server binaries
(tests/tests/real_server*.rs) run four tests at a time each (their tests wait on a server
instance of their own) and at most SERVER_JOBS of them at once (each test brings up MariaDB
and Apache). The doc tests run last, through cargo, and after them the few binaries of ALONE,
each with the machine to itself. Like --no-fail-fast, every binary runs
whatever another's result; the exit status is 1 when any failed, 101 when the build failed.

    run_binaries.py [--jobs N] [--server-jobs M] [--only PKG/TARGET,...]
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# The binaries that take longest (seconds on a 2-core machine, one binary at a time), started
# first so that the last to end are short ones. package/target; the rest follow in any order.
SLOW_FIRST = [
    "ferrite-sim/scenarios",  # 57 alone, CPU-bound: 513 beside three others
    "ferrite-e2e/scale_startup",  # 150-280 (20,000 tasks, debug)
    "ferrite-e2e/real_server_trickle",  # 215
    "ferrite-e2e/real_server_events",  # 193
    "ferrite-e2e/real_server",  # 123
    "ferrite-ctl/commands",  # 101
    "ferrite-e2e/project",  # 96
    "ferrite-e2e/real_server_attach",  # 87
    "ferrite-e2e/real_server_result_rows",  # 81
    "ferrite-e2e/real_server_conformance",  # 80
    "ferrite-e2e/real_server_mt_gpu",  # 65-80
    "ferrite-e2e/acct_mgr",  # 67
    "ferrite-e2e/acct_mgr_fleet",  # 64
    "ferrite-e2e/manager",  # 53
    "ferrite-e2e/real_server_acct_mgr",  # 50
    "ferrite-e2e/checkpoint_grace",  # 47
    "ferrite-e2e/daemon",  # 44
    "ferrite-e2e/apps",  # 43
    "ferrite-e2e/real_server_anonymous",  # 42
    "ferrite-e2e/real_server_files",  # 40
    "ferrite-e2e/service",  # 39
    "ferrite-e2e/recovery",  # 38
    "ferrite-e2e/confine",  # 37
    "ferrite-e2e/official_client",  # 36
    "ferrite-e2e/soak",  # 36
    "ferrite-e2e/tasks",  # 36
    "ferrite-e2e/real_server_failed_task",  # 35
    "ferrite-ctl/exit_status",  # 31
    "ferrite-e2e/notices",  # 30
    "ferrite-e2e/real_server_app_args",  # 28
    "ferrite-e2e/security",  # 28
    "ferrite-e2e/throttle",  # 26
    "ferrite-e2e/netfaults",  # 26
    "ferrite-e2e/demo",  # 25
]

# The binaries that run with the machine to themselves, after all the others (the ARM cross
# builds may still run beside them, at a lower priority). finishing: its busy-finish test
# tells an app that spins through boinc_finish's wait from an idle one by the share of CPU
# time it gets; with three other binaries' daemons and apps beside it, the spinner may get
# less than that share and pass for idle.
ALONE = {"ferrite-e2e/finishing"}

# Seconds the test binaries get to stop after the runner is interrupted (a real-server
# binary stops its instances, a few seconds each, all at once).
STOP_WAIT = 120

RESULT = re.compile(
    r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored;", re.MULTILINE
)


class Job:
    def __init__(self, key, title, argv, cwd, env, server):
        self.key = key
        self.title = title
        self.argv = argv
        self.cwd = cwd
        self.env = env
        self.server = server
        self.proc = None
        self.out = None
        self.start = 0.0
        self.seconds = 0.0
        self.status = None


def build(root):
    """Builds every test binary; returns the artifact messages of those to run, or None."""
    cmd = [
        "cargo", "test", "--workspace", "--locked", "--no-run",
        "--message-format=json-render-diagnostics",
    ]
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, text=True)
    artifacts = []
    for line in proc.stdout:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if (
            msg.get("reason") == "compiler-artifact"
            and msg.get("profile", {}).get("test")
            and msg.get("executable")
        ):
            artifacts.append(msg)
    if proc.wait() != 0:
        return None
    return artifacts


def cargo_env(pkg, target, exe, target_dir):
    """The variables `cargo test` sets for a test binary of package `pkg`."""
    env = dict(os.environ)
    env["CARGO"] = os.environ.get("CARGO") or shutil.which("cargo") or "cargo"
    manifest = pkg["manifest_path"]
    env["CARGO_MANIFEST_DIR"] = os.path.dirname(manifest)
    env["CARGO_MANIFEST_PATH"] = manifest
    env["CARGO_PKG_NAME"] = pkg["name"]
    version = pkg["version"]
    env["CARGO_PKG_VERSION"] = version
    core = version.split("+")[0].split("-", 1)
    parts = (core[0].split(".") + ["0", "0", "0"])[:3]
    env["CARGO_PKG_VERSION_MAJOR"], env["CARGO_PKG_VERSION_MINOR"], env[
        "CARGO_PKG_VERSION_PATCH"
    ] = parts
    env["CARGO_PKG_VERSION_PRE"] = core[1] if len(core) > 1 else ""
    env["CARGO_PKG_AUTHORS"] = ":".join(pkg.get("authors") or [])
    env["CARGO_PKG_DESCRIPTION"] = pkg.get("description") or ""
    env["CARGO_PKG_HOMEPAGE"] = pkg.get("homepage") or ""
    env["CARGO_PKG_REPOSITORY"] = pkg.get("repository") or ""
    env["CARGO_PKG_LICENSE"] = pkg.get("license") or ""
    env["CARGO_PKG_RUST_VERSION"] = pkg.get("rust_version") or ""
    # `cargo test --workspace --no-run` built every binary of the workspace: the e2e tests'
    # `bin()` need not run `cargo build` (which would compile the dependencies again, with
    # the features of a build rather than a test).
    env["FERRITE_E2E_BINS_BUILT"] = "1"
    env["CARGO_CRATE_NAME"] = target["name"].replace("-", "_")
    if "test" in target["kind"]:
        env["CARGO_TARGET_TMPDIR"] = os.path.join(target_dir, "tmp")
    deps = os.path.dirname(exe)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in [deps, os.path.dirname(deps), os.environ.get("LD_LIBRARY_PATH")] if p
    )
    return env


def jobs_of(root, artifacts):
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1", "--locked"],
            cwd=root, check=True, stdout=subprocess.PIPE, text=True,
        ).stdout
    )
    packages = {p["id"]: p for p in meta["packages"]}
    target_dir = meta["target_directory"]
    jobs = []
    for a in artifacts:
        pkg = packages[a["package_id"]]
        target = a["target"]
        exe = a["executable"]
        cwd = os.path.dirname(pkg["manifest_path"])
        src = os.path.relpath(target["src_path"], cwd)
        if "lib" in target["kind"] or "proc-macro" in target["kind"]:
            title = f"unittests {src}"
        elif "bin" in target["kind"]:
            title = f"unittests {src}"
        else:
            title = src
        title = f"{title} ({os.path.relpath(exe, root)})"
        kind = "test" if "test" in target["kind"] else target["kind"][0]
        key = f"{pkg['name']}/{target['name']}" if kind == "test" else (
            f"{pkg['name']}/{kind}:{target['name']}"
        )
        server = kind == "test" and target["name"].startswith("real_server")
        argv = [exe] + (["--test-threads=4"] if server else [])
        jobs.append(
            Job(key, title, argv, cwd, cargo_env(pkg, target, exe, target_dir), server)
        )
    order = {k: i for i, k in enumerate(SLOW_FIRST)}
    jobs.sort(key=lambda j: (j.key in ALONE, order.get(j.key, len(order)), j.key))
    # The doc tests last: cargo compiles each one (it holds the build lock meanwhile).
    jobs.append(
        Job(
            "doc-tests",
            "doc tests (cargo test --workspace --doc)",
            ["cargo", "test", "--workspace", "--locked", "--no-fail-fast", "--doc"],
            root, dict(os.environ), False,
        )
    )
    # Those that run alone, at the very end.
    jobs.sort(key=lambda j: j.key in ALONE)
    return jobs


def start(job, logdir):
    job.out = tempfile.NamedTemporaryFile(
        mode="w+", dir=logdir, prefix=job.key.replace("/", "_").replace(":", "_") + ".",
        suffix=".log", delete=False,
    )
    job.start = time.monotonic()
    job.proc = subprocess.Popen(
        job.argv, cwd=job.cwd, env=job.env, stdin=subprocess.DEVNULL,
        stdout=job.out, stderr=subprocess.STDOUT, start_new_session=True,
    )


def finish(job):
    job.seconds = time.monotonic() - job.start
    job.status = job.proc.returncode
    job.out.flush()
    job.out.seek(0)
    text = job.out.read()
    job.out.close()
    os.unlink(job.out.name)
    passed = failed = ignored = 0
    for m in RESULT.finditer(text):
        passed += int(m.group(1))
        failed += int(m.group(2))
        ignored += int(m.group(3))
    job.counts = (passed, failed, ignored)
    sys.stdout.write(f"     Running {job.title}\n{text}")
    if job.status != 0:
        sys.stdout.write(f"error: {job.key} failed (exit status {job.status})\n")
    sys.stdout.write("\n")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--server-jobs", type=int, default=2)
    ap.add_argument(
        "--only", default="", help="comma-separated package/target keys: run only those"
    )
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    t0 = time.monotonic()
    artifacts = build(root)
    if artifacts is None:
        print("error: building the tests failed", file=sys.stderr)
        return 101
    print(f"built the test binaries in {time.monotonic() - t0:.0f} s", flush=True)
    pending = jobs_of(root, artifacts)
    if args.only:
        keep = set(args.only.split(","))
        pending = [j for j in pending if j.key in keep]
    running = []
    done = []
    logdir = tempfile.mkdtemp(prefix="ferrite-tests.")
    t1 = time.monotonic()

    def kill_all(*_):
        for j in running:
            try:
                os.killpg(j.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        sys.exit(130)

    def stop(signum, _frame):
        # Each binary runs in a session of its own, out of reach of the terminal's Ctrl-C:
        # the signal goes on to its process group, and the binaries get STOP_WAIT seconds
        # to stop what they started (a real-server binary stops its server instances on
        # SIGINT/SIGTERM, tests/src/interrupt.rs) before what is left is killed. A second
        # signal kills them at once.
        signal.signal(signal.SIGINT, kill_all)
        signal.signal(signal.SIGTERM, kill_all)
        print(
            f"\n{signal.Signals(signum).name}: passing it on to {len(running)} test "
            f"binaries and waiting up to {STOP_WAIT} s for them to stop (again: kill them)",
            file=sys.stderr, flush=True,
        )
        for j in running:
            try:
                os.killpg(j.proc.pid, signum)
            except OSError:
                pass
        deadline = time.monotonic() + STOP_WAIT
        for j in running:
            try:
                j.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(j.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            j.proc.wait()
            finish(j)
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        while pending or running:
            servers = sum(1 for j in running if j.server)
            while len(running) < args.jobs:
                if any(j.key in ALONE for j in running):
                    break
                nxt = next(
                    (j for j in pending if not j.server or servers < args.server_jobs), None
                )
                if nxt is None or (nxt.key in ALONE and running):
                    break
                pending.remove(nxt)
                start(nxt, logdir)
                running.append(nxt)
                servers += nxt.server
            time.sleep(0.2)
            for j in list(running):
                if j.proc.poll() is not None:
                    running.remove(j)
                    finish(j)
                    done.append(j)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    wall = time.monotonic() - t1
    print(f"== test binaries ({args.jobs} at a time, real-server {args.server_jobs})")
    print(f"{'binary':<44} {'seconds':>8} {'passed':>7} {'failed':>7} {'ignored':>7}")
    failed = []
    for j in sorted(done, key=lambda j: -j.seconds):
        p, f, i = j.counts
        mark = "" if j.status == 0 else "  FAILED"
        print(f"{j.key:<44} {j.seconds:8.1f} {p:7} {f:7} {i:7}{mark}")
        if j.status != 0:
            failed.append(j.key)
    total = sum(j.seconds for j in done)
    print(f"{len(done)} binaries, {total:.0f} s one after another, {wall:.0f} s of wall time")
    if failed:
        print("failed: " + " ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
