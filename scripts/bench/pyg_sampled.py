#!/usr/bin/env python3
"""PyG sampled reference for scripts/bench/gpu.sh: GraphSAGE (PyG's SAGEConv, mean aggregation)
trained on mini-batches of the graph of a 1-part Tessel partition (part-0.h5), on one GPU.

usage: pyg_sampled.py PART_H5 [--hidden 128] [--layers 3] [--fanouts 15,10,5]
                      [--batch-size 1024] [--steps 20] [--epochs 3] [--json FILE]

PyG's NeighborLoader needs pyg-lib or torch-sparse, which PyPI has no wheels of (nor has the
GPU machines' image), so the neighbourhoods are drawn here with torch operations on the GPU, the
fastest way PyG's layers can be fed without them: per hop outward from the seeds, `fanout`
neighbours of every new frontier node, uniformly with replacement (Tessel draws without), the
new nodes numbered after the known ones through a node-to-position table; features and graph
stay on the GPU. The layers run on the whole sampled subgraph, as with NeighborLoader. --fanouts
lists the input layer first, as Tessel does. Prints one line and writes one JSON object: seconds
per epoch of --steps batches (the median of the epochs after the first), sampled edges per
second of the sampling alone, peak GPU memory and the last loss.
"""
import argparse
import json
import statistics
import sys
import time

import h5py
import numpy as np
import torch
import torch.nn.functional as F

try:
    from torch_geometric.nn import SAGEConv
except ImportError:  # the caller checks importability first; say so plainly if not
    sys.exit("pyg_sampled.py: torch_geometric is not importable")


class Sage(torch.nn.Module):
    def __init__(self, dims, dropout):
        super().__init__()
        self.convs = torch.nn.ModuleList(
            [SAGEConv(a, b, aggr="mean") for a, b in zip(dims[:-1], dims[1:])])
        self.dropout = dropout

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, p=self.dropout, training=self.training)
            x = conv(x, edge_index)
            if i + 1 < len(self.convs):
                x = F.relu(x)
        return x


def sample(indptr, indices, seeds, hops, position):
    """The subgraph of `seeds` (global ids): its nodes (seeds first) and local edge_index.
    `position` (global id -> local id, -1 for none) is all -1 before and after."""
    dev = seeds.device
    n_id = seeds
    position[seeds] = torch.arange(seeds.numel(), device=dev)
    frontier = torch.arange(seeds.numel(), device=dev)
    src, dst = [], []
    for fanout in hops:
        rows = n_id[frontier]
        start = indptr[rows]
        degree = indptr[rows + 1] - start
        keep = degree > 0
        frontier, start, degree = frontier[keep], start[keep], degree[keep]
        draw = (torch.rand(frontier.numel(), fanout, device=dev) * degree[:, None]).long()
        draw = torch.minimum(draw, degree[:, None] - 1)  # rounding can reach the degree
        neighbours = indices[(start[:, None] + draw).reshape(-1)]
        new = torch.unique(neighbours[position[neighbours] < 0])
        first = n_id.numel()
        position[new] = torch.arange(first, first + new.numel(), device=dev)
        src.append(position[neighbours])
        dst.append(torch.repeat_interleave(frontier, fanout))
        n_id = torch.cat([n_id, new])
        frontier = torch.arange(first, first + new.numel(), device=dev)
    position[n_id] = -1
    return n_id, torch.stack([torch.cat(src), torch.cat(dst)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("part")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--fanouts", default="15,10,5")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    dev = torch.device("cuda")
    with h5py.File(a.part, "r") as f:
        indptr = torch.from_numpy(f["/graph/indptr"][:].astype(np.int64))
        indices = torch.from_numpy(f["/graph/indices"][:].astype(np.int64))
        x = torch.from_numpy(f["/node/feat"][:])
        y = torch.from_numpy(f["/node/label"][:].astype(np.int64))
        train = torch.from_numpy(f["/split/train"][:].astype(np.int64))
    n = indptr.numel() - 1
    assert x.shape[0] == n, "pyg_sampled.py: needs the part of a 1-part partition (no halo)"
    fanouts = [int(v) for v in a.fanouts.split(",")]
    assert len(fanouts) == a.layers, "pyg_sampled.py: one fanout per layer"
    hops = fanouts[::-1]  # outward from the seeds: the last layer's fanout first
    classes = int(y.max()) + 1
    indptr, indices, x, y, train = (t.to(dev) for t in (indptr, indices, x, y, train))
    position = torch.full((n,), -1, dtype=torch.int64, device=dev)
    torch.manual_seed(0)
    net = Sage([x.shape[1]] + [a.hidden] * (a.layers - 1) + [classes], a.dropout).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    epoch_s, sample_s, edges_per_epoch = [], [], []
    for _ in range(a.epochs):
        net.train()
        order = train[torch.randperm(train.numel(), device=dev)]
        t0 = time.perf_counter()
        sampling, edges = 0.0, 0
        for step in range(a.steps):
            seeds = order[step * a.batch_size:(step + 1) * a.batch_size]
            if seeds.numel() == 0:
                break
            torch.cuda.synchronize()
            s0 = time.perf_counter()
            n_id, edge_index = sample(indptr, indices, seeds, hops, position)
            torch.cuda.synchronize()
            sampling += time.perf_counter() - s0
            edges += edge_index.shape[1]
            opt.zero_grad()
            out = net(x[n_id], edge_index)[: seeds.numel()]
            loss = F.cross_entropy(out, y[seeds])
            loss.backward()
            opt.step()
        loss_value = float(loss)  # synchronizes, as Tessel's loss does
        torch.cuda.synchronize()
        epoch_s.append(time.perf_counter() - t0)
        sample_s.append(sampling)
        edges_per_epoch.append(edges)
    timed = slice(1, None) if a.epochs > 1 else slice(0, None)
    r = {"model": "sage", "sampler": "torch ops on the GPU, with replacement",
         "epoch_s": statistics.median(epoch_s[timed]),
         "sample_s": statistics.median(sample_s[timed]),
         "sampled_edges": edges_per_epoch[-1],
         "sampled_edges_per_s": edges_per_epoch[-1] / max(sample_s[-1], 1e-9),
         "peak_gb": torch.cuda.max_memory_allocated() / 1e9, "loss": loss_value,
         "steps": a.steps, "epochs": a.epochs}
    print(f"pyg sampled sage: {r['epoch_s']:.3f} s/epoch ({a.steps} steps), sample "
          f"{r['sample_s']:.3f} s, {r['sampled_edges_per_s'] / 1e6:.1f} M sampled edges/s, "
          f"peak {r['peak_gb']:.2f} GB, loss {loss_value:.4f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
