#!/usr/bin/env python3
"""Plots the validation metric against wall-clock seconds, one line per mode, from a
`tessel bench` report folder (report.json + <mode>.jsonl metrics files): accuracy, or for
dynamic mode its MSE or AUC (each mode's `metric` in report.json).

usage: plot_bench.py REPORT_DIR [--out FILE.png]
Exits 0 without a plot (printing why) when matplotlib is not installed.
"""
import argparse
import json
import os
import sys


def read_metrics(path):
    epochs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            obj = json.loads(line)
            if not obj.get("summary") and obj.get("evaluated", True):
                epochs.append(obj)
    return epochs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report_dir")
    parser.add_argument("--out", default=None)
    parser.add_argument("--shown-as", default=None,
                        help="the folder to name in the 'wrote' line (where the report will be)")
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_bench: matplotlib is not installed; skipping accuracy_vs_time.png "
              "(apt-get install python3-matplotlib)")
        return 0
    with open(os.path.join(args.report_dir, "report.json")) as f:
        report = json.load(f)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    # Version 1 reports have no metric: accuracy.
    metric_names = sorted({mode.get("metric", "acc") for mode in report["modes"]})
    test_only = False
    for mode in report["modes"]:
        name = mode["mode"]
        key = "valid_" + mode.get("metric", "acc")
        metrics = read_metrics(os.path.join(args.report_dir, f"{name}.jsonl"))
        model = f" {mode['model']}" if "model" in mode else ""
        label = f"{name}{model} ({mode['seconds_per_epoch_median']:.3g} s/epoch)"
        valid = [m for m in metrics if m.get(key) is not None]
        if not valid:
            # No validation split (n/a): the test values, dashed, and said so.
            key = "test_" + mode.get("metric", "acc")
            valid = [m for m in metrics if m.get(key) is not None]
            label += ", test: no validation split"
            test_only = True
        ax.plot([m["wall_s"] for m in valid], [m[key] for m in valid], marker="o", markersize=3,
                linestyle="-" if key.startswith("valid_") else "--", label=label)
    target = report.get("target_acc")
    if target:
        ax.axhline(target, color="gray", linestyle="--", linewidth=1, label=f"target {target}")
    ax.set_xlabel("wall-clock seconds (training, after setup)")
    labels = {"acc": "accuracy", "mse": "MSE (lower is better)", "auc": "AUC"}
    ax.set_ylabel(("validation" if not test_only else "validation (dashed: test)") + " " +
                  ", ".join(labels.get(m, m) for m in metric_names))
    ranks = report.get("ranks", "?")
    ax.set_title(f"{report.get('dataset', '')}, {ranks} rank{'' if ranks == 1 else 's'}: "
                 f"{' / '.join(labels.get(m, m).split(' (')[0] for m in metric_names)} "
                 "against training time")
    ax.grid(True, alpha=0.3)
    ax.legend()
    out = args.out or os.path.join(args.report_dir, "accuracy_vs_time.png")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    shown = os.path.join(args.shown_as, os.path.basename(out)) if args.shown_as else out
    print(f"plot_bench: wrote {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
