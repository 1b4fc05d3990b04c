#!/usr/bin/env python3
"""Timing and table side of scripts/bench/peers.sh (standard library only).

  peers_table.py run --record RUNS.jsonl --round R --side S --label L --workload W
                     [--tessel-metrics M.jsonl --binary TESSEL] -- COMMAND ...
      runs COMMAND once and appends one JSON object to RUNS.jsonl: its wall seconds, its CPU
      seconds (user + sys of the whole process tree, from getrusage(RUSAGE_CHILDREN)), its exit
      status and the round's figures, either from Tessel's --metrics file (train step = epoch
      seconds minus evaluation seconds, medians over the epochs after the first two; sampled:
      epoch seconds without evaluation, median over the epochs after the first) or from the JSON
      lines COMMAND prints (peer_gnn.py, which takes its medians the same way).
  peers_table.py missing --record RUNS.jsonl --side S --label L --why TEXT
      notes a side that cannot run (no environment).
  peers_table.py report RUNS.jsonl --threads T --graph TEXT --models TEXT --load-before TEXT
                        --load-after TEXT --md OUT.md --json OUT.json
      per side and figure the best and the median over rounds, the ratios Tessel / peer of both,
      every run's CPU s / wall s, and the machine (CPU model, ISA, threads, load average), as a
      markdown table (OUT.md, also printed) and a JSON file with every round's raw figures.
"""
import argparse
import hashlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

# (workload, key in a run's figures, column title)
COLUMNS = [("full-gcn", "train_step_s", "GCN train step"), ("full-gcn", "eval_s", "GCN eval"),
           ("full-sage", "train_step_s", "SAGE train step"), ("full-sage", "eval_s", "SAGE eval"),
           ("sampled-sage", "epoch_s", "sampled SAGE epoch"),
           ("full-gat", "train_step_s", "GAT train step"), ("full-gat", "eval_s", "GAT eval"),
           ("sampled-gat", "epoch_s", "sampled GAT epoch")]
WORKLOADS = {"full-gcn": "full GCN", "full-sage": "full SAGE", "sampled-sage": "sampled SAGE",
             "full-gat": "full GAT", "sampled-gat": "sampled GAT"}

def median_after(values, skip):
    return statistics.median(values[skip:] if len(values) > skip else values)


def tessel_figures(path):
    """The round's figures from a `tessel train --metrics` file."""
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    summary = next((r for r in rows if r.get("summary")), {})
    epochs = [r for r in rows if not r.get("summary")]
    if not epochs:
        return {"error": "no epochs in the metrics file"}, {}
    train = [r["epoch_s"] - r["phases"].get("eval", 0.0) for r in epochs]
    versions = {"GEMM": summary.get("gemm_backend", "?")}
    if summary.get("mode") == "sampled":
        return {"epoch_s": median_after(train, 1), "steps": epochs[-1].get("steps"),
                "sampled_edges": epochs[-1].get("sampled_edges"),
                "loss": epochs[-1].get("loss")}, versions
    evals = [r["phases"]["eval"] for r in epochs if r.get("evaluated")]
    return {"train_step_s": median_after(train, 2),
            "eval_s": median_after(evals, 2) if evals else None,
            "valid_acc": summary.get("best_valid_acc"), "loss": epochs[-1].get("loss")}, versions


def peer_figures(stdout):
    """The round's figures from peer_gnn.py's JSON lines (one measurement per run)."""
    figures, versions = {}, {}
    for line in stdout.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if "info" in r:
            versions = {k: r["info"][k] for k in ("dgl", "torch_geometric", "torch")
                        if k in r["info"]}
        elif "mode" in r:
            figures = {k: v for k, v in r.items()
                       if k not in ("framework", "variant", "model", "mode")}
    return figures, versions


def sha256_prefix(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:12]


def run(args):
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    record = {"round": args.round, "side": args.side, "label": args.label,
              "workload": args.workload, "command": command}
    if args.binary:
        record["binary_sha256"] = sha256_prefix(args.binary)
    if args.tessel_metrics and os.path.exists(args.tessel_metrics):
        os.remove(args.tessel_metrics)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    record["wall_s"] = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    record["user_s"] = after.ru_utime - before.ru_utime
    record["sys_s"] = after.ru_stime - before.ru_stime
    record["cpu_s"] = record["user_s"] + record["sys_s"]
    record["max_rss_mib"] = after.ru_maxrss / 1024  # the largest process of the tree
    record["rc"] = done.returncode
    if done.returncode != 0:
        # Progress lines stay quiet; a failed run's messages are shown.
        print("".join((done.stdout + done.stderr).splitlines(keepends=True)[-20:]), end="",
              file=sys.stderr)
    if args.tessel_metrics:
        figures, versions = ({}, {}) if not os.path.exists(args.tessel_metrics) \
            else tessel_figures(args.tessel_metrics)
    else:
        figures, versions = peer_figures(done.stdout)
    if done.returncode != 0:
        figures = {**figures, "error": f"exit status {done.returncode}"}
    elif not figures:
        figures = {"error": "no figures"}
    record["figures"], record["versions"] = figures, versions
    with open(args.record, "a") as f:
        f.write(json.dumps(record) + "\n")
    print(f"  round {args.round} {args.label}, {WORKLOADS.get(args.workload, args.workload)}: "
          f"{record['cpu_s']:.1f} CPU s / {record['wall_s']:.1f} wall s"
          + (f", {figures['error']}" if "error" in figures else ""), file=sys.stderr)


def missing(args):
    with open(args.record, "a") as f:
        f.write(json.dumps({"side": args.side, "label": args.label, "missing": args.why}) + "\n")


# ---- report ------------------------------------------------------------------------------

def machine():
    model = "?"
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        model = next(line.split(":", 1)[1].strip() for line in out.splitlines()
                     if line.startswith("Model name:"))
    except (OSError, StopIteration):
        pass
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags.update(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "below avx2"
    return {"cpu_model": model, "isa": isa, "logical_cpus": os.cpu_count(),
            "ONEDNN_MAX_CPU_ISA": os.environ.get("ONEDNN_MAX_CPU_ISA"),
            "MKL_ENABLE_INSTRUCTIONS": os.environ.get("MKL_ENABLE_INSTRUCTIONS"),
            "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY"),
            "TESSEL_CPU_ISA": os.environ.get("TESSEL_CPU_ISA")}


def load_average(text):
    m = re.search(r"load averages?:\s*([\d.]+),?\s+([\d.]+),?\s+([\d.]+)", text)
    return [float(x) for x in m.groups()] if m else None


def fmt(value, digits=3):
    return "-" if value is None else f"{value:.{digits}f}"


def report(args):
    with open(args.results) as f:
        records = [json.loads(line) for line in f if line.strip()]
    runs = [r for r in records if "missing" not in r]
    notes = [f"{r['label']}: {r['missing']}" for r in records if "missing" in r]
    rounds = sorted({r["round"] for r in runs})
    sides = []  # in the order they ran
    for r in runs:
        if r["side"] not in sides:
            sides.append(r["side"])
    label, versions, framework = {}, {}, {}
    for r in runs:
        label[r["side"]] = r["label"]
        versions.setdefault(r["side"], {}).update(r.get("versions", {}))
        framework[r["side"]] = "tessel" if r["side"].startswith("tessel") else "peer"
    shown = {s: label[s] + (" (" + ", ".join(f"{k} {v}" for k, v in versions[s].items()) + ")"
                            if versions[s] else "") for s in sides}

    summary = {}
    for s in sides:
        summary[s] = {"label": shown[s], "figures": {}}
        for workload, key, title in COLUMNS:
            by_round = {r["round"]: r["figures"].get(key) for r in runs
                        if r["side"] == s and r["workload"] == workload}
            if not by_round:
                continue
            values = [v for v in by_round.values() if v is not None]
            errors = sorted({r["figures"]["error"] for r in runs if r["side"] == s
                             and r["workload"] == workload and "error" in r["figures"]})
            for e in errors:
                note = f"{shown[s]}, {WORKLOADS[workload]}: {e}"
                if note not in notes:
                    notes.append(note)
            summary[s]["figures"][title] = {
                "rounds": [by_round.get(i) for i in rounds],
                "best": min(values) if values else None,
                "median": statistics.median(values) if values else None}

    ratios = []
    for t in (s for s in sides if framework[s] == "tessel"):
        for p in (s for s in sides if framework[s] == "peer"):
            row = {"tessel": label[t], "peer": label[p], "figures": {}}
            for _, _, title in COLUMNS:
                a, b = summary[t]["figures"].get(title), summary[p]["figures"].get(title)
                if not a or not b:
                    continue
                ratio = {k: a[k] / b[k] if a[k] is not None and b[k] else None
                         for k in ("best", "median")}
                row["figures"][title] = ratio
            ratios.append(row)

    binaries = sorted({r["binary_sha256"] for r in runs if "binary_sha256" in r})
    if len(binaries) > 1:
        notes.append(f"the tessel binary changed between runs (sha256 {', '.join(binaries)}): "
                     "see peers.json for which run used which")
    m = machine()
    before, after = load_average(args.load_before), load_average(args.load_after)
    cap = m["ONEDNN_MAX_CPU_ISA"]
    isa = m["isa"] + (f", oneDNN capped at ONEDNN_MAX_CPU_ISA={cap}" if cap else
                      ", ONEDNN_MAX_CPU_ISA not set")
    for cap in ("MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY"):
        if m[cap]:
            isa += f", torch capped at {cap}={m[cap]}"
    if m["TESSEL_CPU_ISA"]:
        isa += f", Tessel's own kernels capped at TESSEL_CPU_ISA={m['TESSEL_CPU_ISA']}"

    out = []
    out.append(f"Machine: {m['cpu_model']}, {m['logical_cpus']} logical CPUs; ISA {isa}. "
               f"{args.threads} threads per side. Load average (1, 5, 15 min) before the first "
               f"round: {', '.join(map(str, before)) if before else '?'}; after the last: "
               f"{', '.join(map(str, after)) if after else '?'}.")
    round_s = {i: sum(r["wall_s"] for r in runs if r["round"] == i) for i in rounds}
    out.append("")
    out.append(f"Graph: {args.graph}. Models: {args.models} Wall seconds of each round's runs: "
               + ", ".join(f"{round_s[i]:.0f}" for i in rounds) + ".")
    out.append("")
    out.append(f"{len(rounds)} rounds, interleaved: each round runs every workload in turn, and "
               "every side once per workload, in the same order. A round's figure is the median "
               "over its epochs after warm-up (full batch: after the first two; sampled: after "
               "the first). Seconds, best / median over the rounds:")
    out.append("")
    # The columns of the workloads that ran.
    titles = [title for _, _, title in COLUMNS
              if any(title in summary[s]["figures"] for s in sides)]
    out.append(f"| {args.threads} threads | " + " | ".join(f"{t} (s)" for t in titles) + " |")
    out.append("|---" * (len(titles) + 1) + "|")
    for s in sides:
        cells = []
        for t in titles:
            f = summary[s]["figures"].get(t)
            if not f or f["best"] is None:
                cells.append("-")
                continue
            n = sum(v is not None for v in f["rounds"])
            cells.append(f"{fmt(f['best'])} / {fmt(f['median'])}"
                         + (f" ({n} of {len(rounds)})" if n < len(rounds) else ""))
        out.append(f"| {shown[s]} | " + " | ".join(cells) + " |")
    if ratios:
        out.append("")
        out.append("Tessel / peer, ratio of the bests / ratio of the medians (below 1: Tessel is "
                   "faster):")
        out.append("")
        out.append("| Tessel / peer | " + " | ".join(titles) + " |")
        out.append("|---" * (len(titles) + 1) + "|")
        for row in ratios:
            cells = []
            for t in titles:
                r = row["figures"].get(t)
                cells.append("-" if not r or r["best"] is None else
                             f"{fmt(r['best'], 2)} / {fmt(r['median'], 2)}")
            out.append(f"| {row['tessel']} / {row['peer']} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("CPU s / wall s of every measured run (user + sys of its process tree / elapsed, "
               "start-up and data loading included); a run that had its cores to itself shows "
               f"CPU s near {args.threads} x wall s, less its single-threaded setup:")
    out.append("")
    out.append("| run | " + " | ".join(f"round {i}" for i in rounds) + " |")
    out.append("|---" * (len(rounds) + 1) + "|")
    for s in sides:
        for workload in WORKLOADS:
            cell = {r["round"]: r for r in runs if r["side"] == s and r["workload"] == workload}
            if not cell:
                continue
            out.append(f"| {label[s]}, {WORKLOADS[workload]} | " + " | ".join(
                f"{cell[i]['cpu_s']:.1f} / {cell[i]['wall_s']:.1f}" if i in cell else "-"
                for i in rounds) + " |")
    for note in notes:
        out.append("")
        out.append(note)
    text = "\n".join(out) + "\n"
    with open(args.md, "w") as f:
        f.write(text)
    print(text, end="")
    with open(args.json, "w") as f:
        json.dump({"machine": m, "threads": args.threads, "graph": args.graph,
                   "models": args.models, "rounds": len(rounds),
                   "round_wall_s": [round_s[i] for i in rounds],
                   "load_average": {"before": before, "after": after,
                                    "before_text": args.load_before.strip(),
                                    "after_text": args.load_after.strip()},
                   "summary": summary, "ratios": ratios, "notes": notes, "runs": records},
                  f, indent=1)
        f.write("\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="subcommand", required=True)
    r = sub.add_parser("run")
    r.add_argument("--record", required=True)
    r.add_argument("--round", type=int, required=True)
    r.add_argument("--side", required=True)
    r.add_argument("--label", required=True)
    r.add_argument("--workload", choices=list(WORKLOADS), required=True)
    r.add_argument("--tessel-metrics", help="Tessel's --metrics file (else: the JSON on stdout)")
    r.add_argument("--binary", help="the tessel binary, whose sha256 the record keeps")
    r.add_argument("command", nargs=argparse.REMAINDER)
    m = sub.add_parser("missing")
    m.add_argument("--record", required=True)
    m.add_argument("--side", required=True)
    m.add_argument("--label", required=True)
    m.add_argument("--why", required=True)
    t = sub.add_parser("report")
    t.add_argument("results")
    t.add_argument("--threads", type=int, required=True)
    t.add_argument("--graph", required=True)
    t.add_argument("--models", required=True)
    t.add_argument("--load-before", required=True, help="uptime's line before the first round")
    t.add_argument("--load-after", required=True, help="uptime's line after the last round")
    t.add_argument("--md", required=True)
    t.add_argument("--json", required=True)
    args = p.parse_args()
    {"run": run, "missing": missing, "report": report}[args.subcommand](args)


if __name__ == "__main__":
    sys.exit(main())
