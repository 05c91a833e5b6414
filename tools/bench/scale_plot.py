#!/usr/bin/env python3
"""Plots softrnic_scalebench outputs: each wire and size, throughput against the QP count as a
ratio to 1 QP of the same run (log x). usage: scale_plot.py OUT.png FILE... (one file per wire)"""
import subprocess
import sys
import tempfile


def rows(path):
    wire = "?"
    for line in open(path):
        f = line.split()
        if line.startswith("softrnic_scalebench:"):
            wire = f[1]
        elif len(f) > 8 and f[0].isdigit():
            yield wire, int(f[0]), int(f[1]), float(f[6].rstrip("x"))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    series = {}
    for path in sys.argv[2:]:
        for wire, qps, size, ratio in rows(path):
            series.setdefault("%s %s B" % (wire, size), []).append((qps, ratio))
    if not series:
        sys.exit("no rows found")
    with tempfile.TemporaryDirectory() as d:
        plots = []
        for i, (name, pts) in enumerate(sorted(series.items())):
            fn = "%s/%d.dat" % (d, i)
            with open(fn, "w") as f:
                for q, r in sorted(pts):
                    f.write("%d %f\n" % (q, r))
            plots.append("'%s' using 1:2 with linespoints title '%s'" % (fn, name))
        script = (
            "set terminal png size 900,520\nset output '%s'\nset logscale x 2\nset key outside right\n"
            "set xlabel 'connected QPs streaming at once'\nset ylabel 'throughput / 1 QP (same run)'\n"
            "set yrange [0:*]\nset grid\nplot %s\n" % (sys.argv[1], ", ".join(plots)))
        subprocess.run(["gnuplot"], input=script, text=True, check=True)


if __name__ == "__main__":
    main()
