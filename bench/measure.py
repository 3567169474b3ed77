"""Running one command as a measured child: wall time, peak RSS, exit code, stderr. And the
statistics the tables print.

The peak RSS comes from GNU time (`/usr/bin/time -f %M`), never from our own wait4: Linux keeps a
process's RSS high-water mark across exec, so a child forked from this Python process (hundreds
of MiB after populating) would report at least the parent's RSS. time is small, so what it
reports of its child is the command's own."""
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

TIME = "/usr/bin/time"


class RunFailed(Exception):
    pass


def run_measured(argv, stdout_path=None, timeout=900, env=None):
    """Returns {"wall_s", "rss_kib", "rc", "stderr"}; stdout goes to stdout_path (or nowhere)."""
    with tempfile.NamedTemporaryFile("r", prefix="gpuctl-bench-rss.") as rss, \
            (open(stdout_path, "wb") if stdout_path else open("/dev/null", "wb")) as out:
        t0 = time.perf_counter()
        p = subprocess.Popen([TIME, "-f", "%M", "-o", rss.name, *argv], stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.PIPE, env=env, start_new_session=True)
        try:
            _, err = p.communicate(timeout=timeout)
        except BaseException:  # a timeout, Ctrl-C: time and the command with it
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise
        wall = time.perf_counter() - t0
        lines = rss.read().split()
    try:
        rss_kib = int(lines[-1])
    except (IndexError, ValueError):
        raise RunFailed("%s reported no peak RSS for %s (exit %s)" % (TIME, argv[0], p.returncode))
    return {"wall_s": wall, "rss_kib": rss_kib, "rc": p.returncode, "stderr": err.decode(errors="replace")}


def check(res, what):
    if res["rc"] != 0:
        raise RunFailed("%s failed (exit %s): %s" % (what, res["rc"], res["stderr"].strip()[-2000:]))
    return res


def summary(runs):
    """median/min/max wall seconds and the peak RSS (median and max over runs) of a list of runs."""
    walls = [r["wall_s"] for r in runs]
    rss = [r["rss_kib"] / 1024.0 for r in runs]
    return {"median_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls),
            "rss_mib_median": statistics.median(rss), "rss_mib_max": max(rss), "reps": len(runs)}


def interleave(name, tools, reps, run):
    """`reps` rounds of run(tool) for every tool, the order alternating between rounds; each run
    returns {"wall_s", "rss_kib", "errors": [...]}. Returns {tool: [runs]}."""
    runs = {t: [] for t in tools}
    for rep in range(reps):
        for t in (tools if rep % 2 == 0 else tools[::-1]):
            runs[t].append(run(t))
        print("[bench %s] %s rep %d/%d: %s" % (time.strftime("%H:%M:%S"), name, rep + 1, reps, ", ".join(
            "%s %.2fs%s" % (t, runs[t][-1]["wall_s"], " (WRONG)" if runs[t][-1]["errors"] else "") for t in tools)),
            file=sys.stderr, flush=True)
    return runs


def tools_and_correctness(runs, commands):
    """The scenario's "tools" (summary, runs, command of each) and "correctness": ok unless a run
    of gpuctl was wrong; what the peer got wrong is reported (peer_errors), never a failure."""
    def errors(tools):
        return ["%s rep %d: %s" % (t, k + 1, e) for t in tools for k, r in enumerate(runs[t]) for e in r["errors"]]
    mine = errors(["gpuctl"])
    return ({t: dict(summary(r), runs=r, command=commands[t]) for t, r in runs.items()},
            {"ok": not mine, "errors": mine[:20], "peer_errors": errors([t for t in runs if t != "gpuctl"])[:20]})


def tools_table(name, sc, peer):
    """A markdown table of a two-tool scenario: gpuctl beside its peer."""
    lines = ["| scenario | tool | median s | min s | max s | x %s | peak RSS MiB (median) |" % peer,
             "|---|---|---:|---:|---:|---:|---:|"]
    for t, r in sc["tools"].items():
        lines.append("| %s | %s | %.2f | %.2f | %.2f | %.2f | %.1f |" % (
            name, t, r["median_s"], r["min_s"], r["max_s"], r["median_s"] / sc["tools"][peer]["median_s"],
            r["rss_mib_median"]))
    return "\n".join(lines)
