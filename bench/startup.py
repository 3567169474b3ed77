"""Scenario startup: how long a command takes that reads no cluster: `gpuctl --version` and
`gpuctl nodes --help` beside `kubectl version --client`, and /bin/true (the floor: what starting
any process from the bench costs). Needs no cluster, so it runs once, not per size: interleaved
repetitions, median/min/max wall time in milliseconds. The wall time is taken without GNU time in
between (its own exec would count); the peak RSS comes from one more run under GNU time."""
import os
import statistics
import subprocess
import time

from controlplane import log
from measure import check, run_measured

NAME = "startup"


def commands(gpuctl, kubectl):
    return {"gpuctl --version": [gpuctl, "--version"],
            "gpuctl nodes --help": [gpuctl, "nodes", "--help"],
            "kubectl version --client": [kubectl, "version", "--client"],
            "true": ["/bin/true"]}


def wall_ms(argv, env):
    t0 = time.perf_counter()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    ms = (time.perf_counter() - t0) * 1000.0
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d)" % (" ".join(argv), p.returncode))
    return ms


def measure(gpuctl, kubectl, reps, home):
    """{"tools": {command: {median_ms, min_ms, max_ms, rss_mib, runs_ms, command}}, "reps": reps}"""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "NO_COLOR": "1"}
    os.makedirs(home, exist_ok=True)
    cmds = commands(str(gpuctl), str(kubectl))
    names = list(cmds)
    for n in names:  # warm-up: page cache
        wall_ms(cmds[n], env)
    runs = {n: [] for n in names}
    for rep in range(reps):
        k = rep % len(names)
        for n in names[k:] + names[:k]:
            runs[n].append(wall_ms(cmds[n], env))
    out = {"reps": reps, "tools": {}}
    for n in names:
        rss = check(run_measured(cmds[n], env=env), n)["rss_kib"] / 1024.0
        r = runs[n]
        out["tools"][n] = {"median_ms": statistics.median(r), "min_ms": min(r), "max_ms": max(r), "rss_mib": rss,
                           "runs_ms": [round(x, 3) for x in r], "command": " ".join(cmds[n])}
    log("startup (%d reps): %s" % (reps, ", ".join("%s %.1f ms" % (n, out["tools"][n]["median_ms"]) for n in names)))
    return out


def table(st):
    lines = ["| command | median ms | min ms | max ms | peak RSS MiB |", "|---|---:|---:|---:|---:|"]
    for n, r in st["tools"].items():
        lines.append("| %s | %.1f | %.1f | %.1f | %.1f |" % (n, r["median_ms"], r["min_ms"], r["max_ms"], r["rss_mib"]))
    return "\n".join(lines)
