#!/usr/bin/env python3
"""Small temporal series and the baselines a dynamic GNN must beat on them (standard library
only: no numpy needed).

  temporal_baselines.py make pedalme|chickenpox OUT.json [--seed S]
      writes a synthetic series in PyTorch Geometric Temporal's static-edges layout ("edges",
      "weights", "FX"): PedalMe's size (15 nodes, 35 steps, a weighted complete graph) or
      Chickenpox Hungary's (20 nodes, 522 weekly steps, a sparse county-like graph). Each node's
      value is a level, a yearly season, and an autoregressive process of order 2 coupled to its
      neighbours' previous values, read as non-negative counts (as both real files are).
  temporal_baselines.py score IN.json --lags L [--standardize] [--train-frac F]
                                     [--valid-frac V]
      the test MSE of predicting each node's mean and of a linear autoregression on the same
      lags (least squares, every node pooled, with an intercept), both fitted on every snapshot
      before the test range (training and validation: they choose no epoch), on the split
      `tessel convert temporal` makes of IN.json with the same flags. One JSON line.
"""
import argparse
import json
import math
import random
import sys

# The validation split convert temporal takes without --valid-frac (temporal.hpp).
DEFAULT_VALID_SHARE = 0.15
MIN_SPAN_FOR_VALID = 5

SHAPES = {
    # nodes, steps, season period, neighbours per node (0: complete), autoregression weights,
    # neighbours' weight, sd of the observation noise (the process's innovations have sd 1)
    "pedalme": dict(nodes=15, steps=35, period=52, neighbours=0, ar=(0.35, 0.1), coupling=0.2,
                    observed=1.2),
    "chickenpox": dict(nodes=20, steps=522, period=52, neighbours=3, ar=(0.45, 0.1),
                       coupling=0.2, observed=0.9),
}


def make(shape, seed):
    p = SHAPES[shape]
    rng = random.Random(seed)
    n, steps = p["nodes"], p["steps"]
    pos = [(rng.random(), rng.random()) for _ in range(n)]

    def dist(a, b):
        return math.hypot(pos[a][0] - pos[b][0], pos[a][1] - pos[b][1])

    edges, weights = [], []
    neighbours = [[] for _ in range(n)]
    pairs = set()
    for v in range(n):
        others = sorted((u for u in range(n) if u != v), key=lambda u: dist(u, v))
        if p["neighbours"] > 0:
            others = others[:p["neighbours"]]
        for u in others:
            pairs.add((min(u, v), max(u, v)))
    for a, b in sorted(pairs):
        w = 1.0 if p["neighbours"] > 0 else round(math.exp(-3 * dist(a, b)), 4)
        for s, d in ((a, b), (b, a)):
            edges.append([s, d])
            weights.append(w)
            neighbours[d].append((s, w))
    level = [rng.uniform(20, 60) for _ in range(n)]
    amp = [rng.uniform(0.5, 1.5) for _ in range(n)]
    phase = [rng.uniform(-0.5, 0.5) for _ in range(n)]
    scale = [lv / 6 for lv in level]
    z_prev2, z_prev = [0.0] * n, [0.0] * n
    series = []
    for t in range(-20, steps):  # 20 steps of burn-in
        z = []
        for v in range(n):
            wsum = sum(w for _, w in neighbours[v]) or 1.0
            mix = sum(w * z_prev[u] for u, w in neighbours[v]) / wsum
            z.append(p["ar"][0] * z_prev[v] + p["ar"][1] * z_prev2[v] + p["coupling"] * mix +
                     rng.gauss(0, 1))
        z_prev2, z_prev = z_prev, z
        if t < 0:
            continue
        row = []
        for v in range(n):
            season = amp[v] * math.cos(2 * math.pi * t / p["period"] + phase[v])
            noise = rng.gauss(0, p["observed"])
            row.append(max(0, round(level[v] + scale[v] * (season + z[v] + noise))))
        series.append(row)
    return {"edges": edges, "weights": weights, "FX": series}


def standardize(series):
    steps, n = len(series), len(series[0])
    out = [row[:] for row in series]
    for v in range(n):
        mean = sum(series[t][v] for t in range(steps)) / steps
        sd = math.sqrt(sum((series[t][v] - mean) ** 2 for t in range(steps)) / steps) + 1e-10
        for t in range(steps):
            out[t][v] = (series[t][v] - mean) / sd
    return out


def split(T, train_frac, valid_frac):
    n_train = math.floor(train_frac * T)
    n_valid = math.floor((valid_frac or 0) * T)
    if valid_frac is None and n_train >= MIN_SPAN_FOR_VALID:
        n_valid = max(1, math.floor(DEFAULT_VALID_SHARE * n_train + 0.5))
        n_train -= n_valid
    valid_end = min(T, n_train + n_valid)
    return (0, n_train), (n_train, valid_end), (valid_end, T)


def solve(a, b):
    """Gaussian elimination with partial pivoting: a x = b."""
    k = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(k):
        piv = max(range(c, k), key=lambda r: abs(m[r][c]))
        m[c], m[piv] = m[piv], m[c]
        for r in range(k):
            if r != c and m[c][c] != 0:
                f = m[r][c] / m[c][c]
                for j in range(c, k + 1):
                    m[r][j] -= f * m[c][j]
    return [m[i][k] / m[i][i] if m[i][i] != 0 else 0.0 for i in range(k)]


def score(path, lags, standardized, train_frac, valid_frac):
    data = json.load(open(path))
    series = data.get("FX", data.get("X"))
    if standardized:
        series = standardize(series)
    T, n = len(series) - lags, len(series[0])
    # Snapshot s: features the values of steps s..s+lags-1, target step s+lags (as convert).
    feats = [[[series[s + j][v] for j in range(lags)] for v in range(n)] for s in range(T)]
    target = [[series[s + lags][v] for v in range(n)] for s in range(T)]
    train, valid, test = split(T, train_frac, valid_frac)
    fit = range(0, test[0])
    mean = [sum(target[s][v] for s in fit) / len(fit) for v in range(n)]
    k = lags + 1
    xtx = [[0.0] * k for _ in range(k)]
    xty = [0.0] * k
    for s in fit:
        for v in range(n):
            x = feats[s][v] + [1.0]
            for i in range(k):
                xty[i] += x[i] * target[s][v]
                for j in range(k):
                    xtx[i][j] += x[i] * x[j]
    beta = solve(xtx, xty)
    se_mean = se_ar = 0.0
    count = 0
    for s in range(*test):
        for v in range(n):
            y = target[s][v]
            se_mean += (y - mean[v]) ** 2
            pred = sum(b * x for b, x in zip(beta, feats[s][v] + [1.0]))
            se_ar += (y - pred) ** 2
            count += 1
    return {"file": str(path), "nodes": n, "snapshots": T, "train": train, "valid": valid,
            "test": test, "node_mean_mse": se_mean / count, "linear_ar_mse": se_ar / count}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("shape", choices=sorted(SHAPES))
    m.add_argument("out")
    m.add_argument("--seed", type=int, default=1)
    s = sub.add_parser("score")
    s.add_argument("input")
    s.add_argument("--lags", type=int, default=4)
    s.add_argument("--standardize", action="store_true")
    s.add_argument("--train-frac", type=float, default=0.8)
    s.add_argument("--valid-frac", type=float, default=None)
    a = ap.parse_args()
    if a.cmd == "make":
        with open(a.out, "w") as f:
            json.dump(make(a.shape, a.seed), f)
    else:
        print(json.dumps(score(a.input, a.lags, a.standardize, a.train_frac, a.valid_frac)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
