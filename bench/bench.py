#!/usr/bin/python3
"""gpuctl's benchmarks at fleet scale (issue 14), run by scripts/bench.

Starts its own etcd + kube-apiserver (bench/controlplane.py), populates N GPU nodes with 10
pods each (bench/populate.py) and one job per node with a GPU quota per namespace
(bench/populate_jobs.py), and measures each scenario side by side with its peers in interleaved
repetitions (bench/scenario.py; nodes_json.py, jobs_quota.py, startup.py). Writes a results JSON
and prints markdown tables; exit 1 when a run or a correctness check fails (never because of a
timing). `--plot RESULTS.json` renders a results file's plots (bench/plot.py) instead."""
import argparse
import datetime
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.dont_write_bytecode = True
import controlplane  # noqa: E402
import peers  # noqa: E402
import populate  # noqa: E402
import populate_jobs  # noqa: E402
import startup  # noqa: E402
from controlplane import ROOT, log  # noqa: E402
from jobs_quota import Jobs, Quota  # noqa: E402
from measure import RunFailed  # noqa: E402
from nodes_json import NodesJson, NodesTable  # noqa: E402
from scenario import ListScenario  # noqa: E402
import fleet  # noqa: E402

CLUSTER_SCENARIOS = {c.name: c for c in (NodesJson, NodesTable, Jobs, Quota)}
SCENARIOS = tuple(CLUSTER_SCENARIOS) + (startup.NAME,) + fleet.SCENARIOS


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="scripts/bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="500", help="node counts, comma-separated, ascending (10 pods per node); default 500")
    ap.add_argument("--reps", type=int, default=5, help="repetitions per tool (default 5)")
    ap.add_argument("--startup-reps", type=int, default=30, help="repetitions of the startup scenario (default 30)")
    ap.add_argument("--quick", action="store_true",
                    help="20 nodes, 2 repetitions (10 for startup), no compiling of peers: what ctest runs (bench.quick)")
    ap.add_argument("--gpuctl", default=str(ROOT / "build" / "gpuctl"), help="the gpuctl binary (default build/gpuctl)")
    ap.add_argument("--state-dir", default=str(Path.home() / ".cache" / "gpuctl-bench" / "state"),
                    help="etcd data, PKI, logs and outputs (default ~/.cache/gpuctl-bench/state)")
    ap.add_argument("--out", help="results JSON (default STATE_DIR/results.json)")
    ap.add_argument("--bin-dir", help="etcd/kube-apiserver/kubectl (default: newest ~/.cache/gpuctl-cp/*/bin)")
    ap.add_argument("--no-build", action="store_true",
                    help="exit 77 (skipped) instead of building the control-plane binaries when they are missing")
    ap.add_argument("--concurrency", type=int, default=8, help="parallel connections while populating (default 8)")
    ap.add_argument("--scenario", action="append", choices=SCENARIOS, help="scenarios to run (default all)")
    ap.add_argument("--skip-peer", action="append", default=[], choices=("kubectl", "view-allocations"),
                    help="leave a peer out of the list scenarios (repeatable; kubectl takes minutes a run at 5,000 "
                    "nodes)")
    ap.add_argument("--plot", metavar="RESULTS_JSON", help="only render the plots of a results file (bench/plot.py)")
    ap.add_argument("--plot-dir", default=str(ROOT / "docs" / "benchmarks"),
                    help="where --plot writes its PNGs (default docs/benchmarks)")
    fleet.add_args(ap)
    a = ap.parse_args(argv)
    if a.plot:
        return a
    if a.quick:
        a.sizes, a.reps, a.startup_reps = "20", 2, 10
    try:
        a.sizes = [int(s) for s in a.sizes.split(",")]
    except ValueError:
        ap.error("--sizes takes node counts such as 500,2000")
    if any(s < 1 for s in a.sizes) or a.sizes != sorted(set(a.sizes)) or a.reps < 1 or a.startup_reps < 1:
        ap.error("--sizes must be ascending positive node counts, --reps at least 1")
    if not os.access("/usr/bin/time", os.X_OK):
        ap.error("/usr/bin/time (GNU time, Debian package time) is missing: run scripts/install-deps.sh")
    if not os.access(a.gpuctl, os.X_OK):
        ap.error("no gpuctl binary at %s (scripts/build.sh builds build/gpuctl; or pass --gpuctl)" % a.gpuctl)
    a.scenario = a.scenario or list(SCENARIOS)
    ListScenario.skipped_peers = set(a.skip_peer)
    return a


def first_line(argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return (p.stdout or p.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "?"


def machine():
    mem = re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())
    cpu = re.search(r"model name\s*:\s*(.*)", Path("/proc/cpuinfo").read_text())
    return {"nproc": os.cpu_count(), "cpu": cpu.group(1) if cpu else "?",
            "mem_gib": round(int(mem.group(1)) / 1024 / 1024, 1) if mem else None,
            "kernel": platform.release(), "loadavg_start": os.getloadavg()}


def versions(bin_dir, gpuctl):
    return {"gpuctl": first_line([gpuctl, "--version"]),
            "kubectl": first_line([str(bin_dir / "kubectl"), "version", "--client"]),
            "kube-apiserver": first_line([str(bin_dir / "kube-apiserver"), "--version"]),
            "etcd": first_line([str(bin_dir / "etcd"), "--version"]),
            "curl": first_line(["curl", "--version"]), "python": platform.python_version()}


def table(results):
    lines = ["| scenario | nodes | pods | tool | median s | min s | max s | x curl | peak RSS MiB (median) | requests |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for size in results["sizes"]:
        for name, sc in size["scenarios"].items():
            limit = sc["tools"]["curl"]["median_s"]
            for t, r in sc["tools"].items():
                if "unavailable" in r:
                    lines.append("| %s | %d | %d | %s | unavailable: %s | | | | | |" % (
                        name, size["nodes"], size["pods"], t, r["unavailable"]))
                    continue
                lines.append("| %s | %d | %d | %s | %.2f | %.2f | %.2f | %.2f | %.0f | %s |" % (
                    name, size["nodes"], size["pods"], t, r["median_s"], r["min_s"], r["max_s"],
                    r["median_s"] / limit if limit else 0, r["rss_mib_median"],
                    "?" if r["requests"] is None else r["requests"]))
    return "\n".join(lines)


def start_peers(a):
    """kubectl-view-allocations: compiling starts now, in the background, when a scenario runs it."""
    va = peers.ViewAllocations()
    if {"nodes-json", "nodes-table"} & set(a.scenario):
        va.start(compile_allowed=not a.quick)
    return va


def run_sizes(a, cp, va, results):
    """Populates each size and runs the cluster scenarios on it; returns False when a
    correctness check failed."""
    ok, have = True, 0
    names = [n for n in a.scenario if n in CLUSTER_SCENARIOS]
    for n in a.sizes:
        if have and {"jobs", "quota"} & set(names):
            populate_jobs.lift_quotas(cp, a.concurrency)
        secs = populate.populate(cp, have, n - have, a.concurrency)
        if {"jobs", "quota"} & set(names):
            t = time.time()
            populate_jobs.populate_jobs(cp, have, n - have, a.concurrency)
            secs += time.time() - t
        have = n
        size = {"nodes": n, "pods": n * populate.PODS_PER_NODE, "jobs": n if {"jobs", "quota"} & set(names) else 0,
                "populate_s": round(secs, 1), "scenarios": {}}
        results["sizes"].append(size)
        for name in names:
            extra = {}
            if name in ("nodes-json", "nodes-table"):
                p = va.wait()
                extra[peers.VIEW_ALLOCATIONS_TOOL] = p
                results["peers"] = {p.name: {"version": p.version, "path": p.path, "unavailable": p.reason}}
            sc = CLUSTER_SCENARIOS[name](cp, a.gpuctl, cp.dir / ("out-%d" % n), extra).measure(a.reps)
            size["scenarios"][name] = sc
            ok = ok and sc["correctness"]["ok"]
    return ok


def report(results, out, ok, t0):
    if results["sizes"] and all(s["scenarios"] for s in results["sizes"]):
        print(table(results))
    if "startup" in results:
        print("\n" + startup.table(results["startup"]))
    fleet.report(results)
    for size in results["sizes"]:
        for name, sc in size["scenarios"].items():
            if not sc["correctness"]["ok"]:
                print("\n%s at %d nodes: gpuctl's output differs from the raw lists:\n  %s" % (
                    name, size["nodes"], "\n  ".join(sc["correctness"]["errors"])))
    log("results in %s (%.0fs in all); %s" % (out, time.time() - t0, "ok" if ok else "FAILED"))


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.plot:
        import plot
        return plot.main([a.plot, a.plot_dir])
    # SIGTERM and SIGHUP stop us as Ctrl-C does: through the finally below, which stops the cluster.
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda num, _: sys.exit(128 + num))
    try:
        bin_dir = controlplane.find_bin_dir(a.bin_dir, build=not a.no_build)
    except controlplane.Skip as e:
        log("skipped: %s" % e)
        return 77
    except controlplane.BuildError as e:
        log("FAILED: %s" % e)
        return 1
    cp = controlplane.ControlPlane(a.state_dir, bin_dir)
    out = Path(a.out) if a.out else cp.dir / "results.json"
    results = {"schema": 2, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "argv": ["scripts/bench"] + (sys.argv[1:] if argv is None else argv), "machine": machine(),
               "versions": versions(bin_dir, a.gpuctl), "reps": a.reps, "sizes": []}
    ok = True
    t0 = time.time()
    va = start_peers(a)
    try:
        if any(n in CLUSTER_SCENARIOS or n in fleet.SCENARIOS for n in a.scenario):
            cp.start()
            ok = run_sizes(a, cp, va, results)
            ok = fleet.run(a, cp, results) and ok
            cp.stop()
        if startup.NAME in a.scenario:  # no cluster: once, after it is stopped
            results["startup"] = startup.measure(a.gpuctl, bin_dir / "kubectl", a.startup_reps, cp.dir / "startup-home")
    except (controlplane.BuildError, RunFailed, RuntimeError) as e:
        log("FAILED: %s" % e)
        results["error"] = str(e)
        ok = False
    except BaseException as e:  # a bug of the bench, Ctrl-C: the results so far, marked failed
        results["error"] = "%s: %s" % (type(e).__name__, e)
        ok = False
        raise
    finally:
        va.stop()
        cp.stop()
        results["machine"]["loadavg_end"] = os.getloadavg()
        results["total_s"] = round(time.time() - t0, 1)
        results["ok"] = ok
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
    report(results, out, ok, t0)
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        log("interrupted; the control plane was stopped")
        sys.exit(130)
