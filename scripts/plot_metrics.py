#!/usr/bin/env python3
"""Plots the training loss and the run's own validation metric of one or more training runs
from their metrics files (`tessel train --metrics FILE.jsonl`): accuracy for the graph modes and
node classification, MSE for dynamic node regression, AUC for link prediction.

usage: plot_metrics.py FILE.jsonl [FILE.jsonl ...] [--out FILE.png] [--title TEXT]
Runs without a validation split show their test values only (valid is n/a, not drawn).
"""
import argparse
import json
import os
import sys

# The metric each record carries, as its keys name it, and how to label it.
METRICS = {
    "acc": "accuracy (higher is better)",
    "mse": "MSE (lower is better)",
    "auc": "AUC (higher is better)",
}


def read(path):
    rows, summary = [], {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                obj = json.loads(line)
                if obj.get("summary"):
                    summary = obj
                else:
                    rows.append(obj)
    return rows, summary


def metric_of(rows):
    """The run's metric: mse or auc when its records carry them, else accuracy."""
    for name in ("mse", "auc"):
        if any(f"test_{name}" in r for r in rows):
            return name
    return "acc"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--out", default="metrics.png")
    parser.add_argument("--title", default=None, help="the figure's title (default: the runs')")
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_metrics: matplotlib is not installed (apt-get install python3-matplotlib)")
        return 1
    fig, (ax_loss, ax_metric) = plt.subplots(1, 2, figsize=(11, 4.2))
    metrics, titles, losses = set(), [], []
    for path in args.files:
        rows, summary = read(path)
        if not rows:
            print(f"plot_metrics: {path} has no epochs", file=sys.stderr)
            continue
        name = os.path.splitext(os.path.basename(path))[0]
        metric = metric_of(rows)
        metrics.add(metric)
        titles.append(f"{name} ({summary.get('mode', '?')} mode"
                      + (f", {summary['model']}" if "model" in summary else "") + ")")
        epochs = [r["epoch"] for r in rows]
        ax_loss.plot(epochs, [r["loss"] for r in rows], label=name)
        losses += [r["loss"] for r in rows if r["loss"] > 0]
        evaluated = [r for r in rows if r.get("evaluated", True)]
        valid = [r for r in evaluated if r.get(f"valid_{metric}") is not None]
        if valid:
            ax_metric.plot([r["epoch"] for r in valid], [r[f"valid_{metric}"] for r in valid],
                           label=f"{name} valid")
        ax_metric.plot([r["epoch"] for r in evaluated],
                       [r[f"test_{metric}"] for r in evaluated], linestyle="--",
                       label=f"{name} test" + ("" if valid else " (no validation split)"))
    if not titles:
        print("plot_metrics: nothing to plot", file=sys.stderr)
        return 1
    ax_loss.set_title("training loss")
    ax_loss.set_xlabel("epoch")
    # A log scale where the loss falls by more than 20x (classification); else linear.
    log_scale = bool(losses) and max(losses) > 20 * min(losses)
    ax_loss.set_ylabel("training loss" + (" (log scale)" if log_scale else ""))
    if log_scale:
        ax_loss.set_yscale("log")
    label = " / ".join(METRICS[m] for m in sorted(metrics))
    ax_metric.set_title(label.split(" (")[0] if len(metrics) == 1 else "metrics")
    ax_metric.set_xlabel("epoch")
    ax_metric.set_ylabel(label)
    for ax in (ax_loss, ax_metric):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(args.title or "; ".join(titles), fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"plot_metrics: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
