#!/usr/bin/env python3
"""Plots the bubble fraction against micro-batches per mini-batch, one line per (schedule,
stages), measured (replayed from measured stage times, and wall clock) next to the analytic
figure, from the results.tsv that scripts/bench/pipeline.sh writes.

usage: plot_pipeline.py RESULTS.tsv OUT.png
Exits 0 without a plot (printing why) when matplotlib is not installed.
"""
import csv
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    results, out = sys.argv[1], sys.argv[2]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_pipeline.py: matplotlib is not installed; no plot")
        return 0
    lines = {}
    with open(results) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            s = int(row["S"])
            if s < 2:
                continue
            key = (row["schedule"], s)
            lines.setdefault(key, []).append(
                (int(row["m"]), float(row["bubble_replay"]), float(row["bubble_wall"]),
                 float(row["bubble_analytic"]), float(row["bubble_schedule"])))
    if not lines:
        print("plot_pipeline.py: no pipelined runs in", results)
        return 0
    fig, ax = plt.subplots(figsize=(9.5, 4.8))
    colors = {"gpipe": "tab:blue", "1f1b": "tab:orange", "wave": "tab:green"}
    styles = {2: "-", 4: "--", 8: ":"}
    for (schedule, s), points in sorted(lines.items()):
        points.sort()
        m = [p[0] for p in points]
        color, style = colors.get(schedule, "black"), styles.get(s, "-.")
        ax.plot(m, [p[1] for p in points], style, marker="o", color=color,
                label=f"{schedule} S={s} replayed")
        ax.plot(m, [p[2] for p in points], style, marker="x", color=color, alpha=0.4,
                label=f"{schedule} S={s} wall clock")
        ax.plot(m, [p[4] for p in points], style, marker="s", color=color, alpha=0.25,
                markerfacecolor="none", label=f"{schedule} S={s} schedule (simulated)")
    ax.set_xscale("log", base=2)
    ticks = sorted({p[0] for points in lines.values() for p in points})
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel("micro-batches per mini-batch (m)")
    ax.set_ylabel("bubble fraction (idle / stage time)")
    ax.set_ylim(0, 1)
    ax.set_title("Pipeline bubble against micro-batches (gpipe and 1f1b have the same analytic bubble, so "
                 "their lines may coincide)", fontsize=9)
    ax.grid(True, alpha=0.3)
    # Outside the axes: one entry per (schedule, stages, kind) would cover the lines.
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
