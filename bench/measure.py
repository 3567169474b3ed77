"""Running one command as a measured child: wall time, peak RSS (the child's ru_maxrss from
wait4), exit code, stderr. And the statistics the tables print."""
import os
import signal
import statistics
import subprocess
import threading
import time


class RunFailed(Exception):
    pass


def run_measured(argv, stdout_path=None, timeout=900, env=None):
    """Returns {"wall_s", "rss_kib", "rc", "stderr"}; stdout goes to stdout_path (or nowhere)."""
    out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    try:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE, env=env)
        chunks = []
        reader = threading.Thread(target=lambda: chunks.append(p.stderr.read()), daemon=True)
        reader.start()
        timer = threading.Timer(timeout, lambda: _kill(p))
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        except BaseException:
            _kill(p)
            p.wait()
            raise
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        reader.join(10)
        p.stderr.close()
    finally:
        if stdout_path:
            out.close()
    return {"wall_s": wall, "rss_kib": usage.ru_maxrss, "rc": p.returncode,
            "stderr": (chunks[0] if chunks else b"").decode(errors="replace")}


def _kill(p):
    try:
        p.send_signal(signal.SIGKILL)
    except OSError:
        pass


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
