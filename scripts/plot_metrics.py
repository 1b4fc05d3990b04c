#!/usr/bin/env python3
"""Plots loss and accuracy curves of one or more training runs from their metrics files
(`tessel train --metrics FILE.jsonl`).

usage: plot_metrics.py FILE.jsonl [FILE.jsonl ...] [--out FILE.png]
"""
import argparse
import json
import os
import sys


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                obj = json.loads(line)
                if not obj.get("summary"):
                    rows.append(obj)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--out", default="metrics.png")
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_metrics: matplotlib is not installed (apt-get install python3-matplotlib)")
        return 1
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4.2))
    for path in args.files:
        rows = read(path)
        if not rows:
            print(f"plot_metrics: {path} has no epochs", file=sys.stderr)
            continue
        name = os.path.splitext(os.path.basename(path))[0]
        epochs = [r["epoch"] for r in rows]
        ax_loss.plot(epochs, [r["loss"] for r in rows], label=name)
        evaluated = [r for r in rows if r.get("evaluated", True)]
        ax_acc.plot([r["epoch"] for r in evaluated], [r["valid_acc"] for r in evaluated],
                    label=f"{name} valid")
        ax_acc.plot([r["epoch"] for r in evaluated], [r["test_acc"] for r in evaluated],
                    linestyle="--", label=f"{name} test")
    ax_loss.set_xlabel("epoch")
    ax_loss.set_ylabel("training loss")
    ax_loss.set_yscale("log")
    ax_acc.set_xlabel("epoch")
    ax_acc.set_ylabel("accuracy")
    for ax in (ax_loss, ax_acc):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"plot_metrics: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
