#!/usr/bin/python3
"""Renders a results JSON of scripts/bench into PNGs with gnuplot (Debian: gnuplot-nox):

- one <scenario>.png per cluster scenario: wall time (median, with a bar from min to max) against
  the number of nodes for gpuctl, its peers and curl (the limit), beside peak RSS (median)
  against the number of nodes;
- startup.png: the startup scenario's median milliseconds per command, min to max as a bar.

Usage: bench/plot.py RESULTS.json [OUT_DIR]   (default docs/benchmarks; also scripts/bench
--plot RESULTS.json [--plot-dir DIR]). Both axes of the cluster plots are logarithmic, so equal
ratios read as equal distances and 10x between tools stays readable."""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# gpuctl stands out; curl, the limit, is a dashed grey line under everything.
STYLE = {"gpuctl": ('"#1f5fbf"', 1, 3), "curl": ('"#808080"', 2, 2), "kubectl": ('"#d9730d"', 1, 2),
         "view-allocations": ('"#2e8b57"', 1, 2)}
OTHER = ('"#8b3a8b"', 1, 2)


def series(results, scenario):
    """{tool: [(nodes, median_s, min_s, max_s, rss_mib)]} over the sizes that ran the scenario."""
    out = {}
    for size in results["sizes"]:
        sc = size["scenarios"].get(scenario)
        for tool, r in (sc or {}).get("tools", {}).items():
            if "median_s" in r:
                out.setdefault(tool, []).append((size["nodes"], r["median_s"], r["min_s"], r["max_s"],
                                                 r["rss_mib_median"]))
    return out


def plot_lines(data, dat_dir, column, errorbars):
    parts = []
    for tool, rows in data.items():
        f = dat_dir / ("%s.dat" % tool)
        f.write_text("".join("%d %g %g %g %g\n" % r for r in rows))
        color, dash, width = STYLE.get(tool, OTHER)
        using = "1:%d:3:4" % column if errorbars else "1:%d" % column
        parts.append("'%s' using %s with %s lw %d dt %d pt 7 ps 1.2 lc rgb %s title '%s'" % (
            f, using, "yerrorlines" if errorbars else "linespoints", width, dash, color,
            "curl (the limit)" if tool == "curl" else tool))
    return "plot " + ", \\\n     ".join(parts)


def scenario_script(results, scenario, data, png, dat_dir):
    sizes = sorted({r[0] for rows in data.values() for r in rows})
    xtics = ", ".join("'%s' %d" % ("{:,}".format(n), n) for n in sizes)
    title = "%s (%s; %d repetitions)" % (scenario, results.get("date", "")[:10], results.get("reps", 0))
    return "\n".join([
        "set terminal pngcairo size 1400,600 font 'DejaVu Sans,12' noenhanced",
        "set output '%s'" % png,
        "set multiplot layout 1,2 title \"%s\\n\" font 'DejaVu Sans,14'" % title,
        "set logscale xy", "set grid xtics ytics mytics lc rgb '#dddddd'",
        "set xtics (%s)" % xtics, "set xrange [%g:%g]" % (sizes[0] / 1.4, sizes[-1] * 1.4),
        "set xlabel 'GPU nodes (10 pods each)'", "set key tmargin center horizontal",
        "set ylabel 'wall time, s (median; bar: min to max)'",
        plot_lines(data, dat_dir, 2, True),
        "set ylabel 'peak RSS, MiB (median)'",
        plot_lines(data, dat_dir, 5, False),
        "unset multiplot", ""])


def startup_script(st, png, dat_dir):
    f = dat_dir / "startup.dat"
    rows = list(st["tools"].items())
    f.write_text("".join('%d "%s" %g %g %g\n' % (i, n, r["median_ms"], r["min_ms"], r["max_ms"])
                         for i, (n, r) in enumerate(rows)))
    return "\n".join([
        "set terminal pngcairo size 900,480 font 'DejaVu Sans,12' noenhanced",
        "set output '%s'" % png,
        "set title 'startup: %d repetitions, median ms (bar: min to max); red dashes: the 5 ms target'" % st["reps"],
        "set style fill solid 0.7 border -1", "set boxwidth 0.6", "set grid ytics lc rgb '#dddddd'",
        "set yrange [0:*]", "set ylabel 'ms'", "set xrange [-0.6:%g]" % (len(rows) - 0.4), "unset key",
        "set arrow from -0.6,5 to %g,5 nohead dt 2 lw 2 lc rgb '#c0392b'" % (len(rows) - 0.4),
        "plot '%s' using 1:3:xtic(2) with boxes lc rgb '#1f5fbf', '' using 1:3:4:5 with yerrorbars lc rgb 'black' pt 0, "
        "'' using 1:5:(sprintf('%%.1f', $3)) with labels offset 0,0.8" % f, ""])


def render(results, out_dir):
    if not shutil.which("gnuplot"):
        raise SystemExit("gnuplot is missing: apt-get install gnuplot-nox (scripts/install-deps.sh)")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="gpuctl-plot.") as tmp:
        names = []
        for size in results["sizes"]:
            names += [n for n in size["scenarios"] if n not in names]
        scripts = []
        for name in names:
            d = Path(tmp) / name
            d.mkdir()
            png = out_dir / ("%s.png" % name)
            scripts.append((png, scenario_script(results, name, series(results, name), png, d)))
        if results.get("startup"):
            png = out_dir / "startup.png"
            scripts.append((png, startup_script(results["startup"], png, Path(tmp))))
        for png, script in scripts:
            p = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
            if p.returncode != 0:
                raise SystemExit("gnuplot failed for %s:\n%s" % (png, p.stderr))
            written.append(png)
    return written


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    results = json.loads(Path(argv[0]).read_text())
    for png in render(results, argv[1] if len(argv) > 1 else ROOT / "docs" / "benchmarks"):
        print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
