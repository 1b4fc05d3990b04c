#!/usr/bin/env python3
"""Table side of scripts/bench/peers.sh (standard library only).

  peers_table.py tessel-metrics --label L --full-gcn F.jsonl --full-sage F.jsonl --sampled F.jsonl
      one JSON object per Tessel run (the medians peer_gnn.py reports for DGL and PyG), from
      `tessel train --metrics` files: train step = epoch seconds minus evaluation seconds,
      medians over the epochs after the first two (sampled: after the first, evaluation seconds
      left out too).
  peers_table.py table RESULTS.jsonl --threads T
      the markdown table of every system in RESULTS.jsonl.
"""
import argparse
import json
import statistics
import sys


def epochs(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if not r.get("summary")], next((r for r in rows if r.get("summary")), {})


def median_after(values, skip):
    return statistics.median(values[skip:] if len(values) > skip else values)


def tessel_metrics(args):
    out = {"framework": "tessel", "label": args.label}
    for model, path in (("gcn", args.full_gcn), ("sage", args.full_sage)):
        rows, summary = epochs(path)
        step = [r["epoch_s"] - r["phases"].get("eval", 0.0) for r in rows]
        ev = [r["phases"]["eval"] for r in rows if r.get("evaluated")]
        out[model] = {"train_step_s": median_after(step, 2), "eval_s": median_after(ev, 2),
                      "valid_acc": summary.get("best_valid_acc")}
        out["gemm_backend"] = summary.get("gemm_backend", "?")
    rows, _ = epochs(args.sampled)
    train = [r["epoch_s"] - r["phases"].get("eval", 0.0) for r in rows]
    out["sampled"] = {"epoch_s": median_after(train, 1),
                      "steps": rows[-1].get("steps"), "sampled_edges": rows[-1].get("sampled_edges")}
    print(json.dumps(out))


def fmt(value):
    return "-" if value is None else f"{value:.3f}"


def table(args):
    with open(args.results) as f:
        records = [json.loads(line) for line in f if line.strip()]
    rows, notes, info = [], [], {}
    for r in records:
        if r.get("framework") == "tessel":
            rows.append((f"{r['label']} (GEMM: {r.get('gemm_backend', '?')})", r["gcn"], r["sage"],
                         r["sampled"]))
        elif "missing" in r:
            notes.append(f"{r['framework']}: {r['missing']}")
        elif "info" in r:
            info[r["framework"]] = r["info"]
    peers = {}
    for r in records:
        if r.get("framework") in ("dgl", "pyg") and "mode" in r:
            peers.setdefault(r["variant"], {})[r["model"] if r["mode"] == "full" else "sampled"] = r
    for variant, models in peers.items():
        framework = "dgl" if variant == "dgl" else "pyg"
        i = info.get(framework, {})
        version = i.get("dgl") or i.get("torch_geometric") or "?"
        name = ("DGL " if framework == "dgl" else "PyG ") + version
        label = f"{name} {variant[4:]} (torch {i.get('torch', '?')})" if framework == "pyg" \
            else f"{name} (torch {i.get('torch', '?')})"
        sampled = models.get("sampled")
        if sampled and sampled.get("epoch_s") is None:
            notes.append(f"{name} sampled: {sampled.get('error')}")
        rows.append((label, models.get("gcn", {}), models.get("sage", {}), sampled or {}))
    print(f"| {args.threads} threads | GCN train step (s) | GCN eval (s) | SAGE train step (s) | "
          "SAGE eval (s) | sampled SAGE epoch (s) |")
    print("|---|---|---|---|---|---|")
    for label, gcn, sage, sampled in rows:
        print(f"| {label} | {fmt(gcn.get('train_step_s'))} | {fmt(gcn.get('eval_s'))} | "
              f"{fmt(sage.get('train_step_s'))} | {fmt(sage.get('eval_s'))} | "
              f"{fmt(sampled.get('epoch_s'))} |")
    for note in notes:
        print(f"\n{note}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tessel-metrics")
    t.add_argument("--label", required=True)
    t.add_argument("--full-gcn", required=True)
    t.add_argument("--full-sage", required=True)
    t.add_argument("--sampled", required=True)
    s = sub.add_parser("table")
    s.add_argument("results")
    s.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    tessel_metrics(args) if args.command == "tessel-metrics" else table(args)


if __name__ == "__main__":
    sys.exit(main())
