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
