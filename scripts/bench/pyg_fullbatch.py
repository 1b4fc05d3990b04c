#!/usr/bin/env python3
"""PyG full-batch reference: the same 2-layer GCN / GraphSAGE as `tessel train --mode full` on
the graph of a 1-part Tessel partition (part-0.h5), timed per epoch on one GPU.

usage: pyg_fullbatch.py PART_H5 [--models gcn,sage] [--hidden 128] [--epochs 13]
                        [--inputs sparse,edge_index] [--json FILE]
Prints one line per (model, input): ms per epoch (median of epochs 3-12, i.e. after two
warm-up epochs) and peak GPU memory (torch.cuda.max_memory_allocated, and
max_memory_reserved). `sparse` hands the
convolutions a torch.sparse CSR adjacency (rows = targets), `edge_index` a [2, E] tensor.
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
    from torch_geometric.nn import GCNConv, SAGEConv
except ImportError:  # the caller checks importability first; say so plainly if not
    sys.exit("pyg_fullbatch.py: torch_geometric is not importable")


class Net(torch.nn.Module):
    def __init__(self, kind, in_dim, hidden, out_dim, dropout):
        super().__init__()
        if kind == "gcn":
            self.convs = torch.nn.ModuleList([GCNConv(in_dim, hidden, cached=True),
                                              GCNConv(hidden, out_dim, cached=True)])
        else:
            self.convs = torch.nn.ModuleList([SAGEConv(in_dim, hidden, aggr="mean"),
                                              SAGEConv(hidden, out_dim, aggr="mean")])
        self.dropout = dropout

    def forward(self, x, adj):
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, p=self.dropout, training=self.training)
            x = conv(x, adj)
            if i + 1 < len(self.convs):
                x = F.relu(x)
        return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("part")
    ap.add_argument("--models", default="gcn,sage")
    ap.add_argument("--inputs", default="sparse")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=13)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    dev = torch.device("cuda")
    with h5py.File(a.part, "r") as f:
        indptr = torch.from_numpy(f["/graph/indptr"][:].astype(np.int64))
        indices = torch.from_numpy(f["/graph/indices"][:].astype(np.int64))
        x = torch.from_numpy(f["/node/feat"][:])
        y = torch.from_numpy(f["/node/label"][:])
        train = torch.from_numpy(f["/split/train"][:].astype(np.int64))
    n = indptr.numel() - 1
    assert x.shape[0] == n, "pyg_fullbatch.py: needs the part of a 1-part partition (no halo)"
    classes = int(y.max()) + 1
    x, y, train = x.to(dev), y.to(dev), train.to(dev)
    results = []
    for model in a.models.split(","):
        for kind in a.inputs.split(","):
            torch.cuda.empty_cache()
            if kind == "sparse":
                adj = torch.sparse_csr_tensor(indptr, indices, torch.ones(indices.numel()),
                                              size=(n, n)).to(dev)
            else:
                dst = torch.repeat_interleave(torch.arange(n), indptr[1:] - indptr[:-1])
                adj = torch.stack([indices, dst]).to(dev)
            torch.manual_seed(0)
            net = Net(model, x.shape[1], a.hidden, classes, a.dropout).to(dev)
            opt = torch.optim.Adam(net.parameters(), lr=0.01)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            times = []
            for _ in range(a.epochs):
                t0 = time.perf_counter()
                net.train()
                opt.zero_grad()
                out = net(x, adj)
                loss = F.cross_entropy(out[train], y[train])
                loss.backward()
                opt.step()
                loss_value = float(loss)  # synchronizes, as Tessel's loss does
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            timed = times[2:12] if len(times) >= 12 else times[2:]
            r = {"model": model, "input": kind, "ms_per_epoch": 1e3 * statistics.median(timed),
                 "peak_gb": torch.cuda.max_memory_allocated() / 1e9,
                 "reserved_gb": torch.cuda.max_memory_reserved() / 1e9, "final_loss": loss_value}
            results.append(r)
            print(f"pyg {model:5s} {kind:10s} {r['ms_per_epoch']:9.2f} ms/epoch  "
                  f"peak {r['peak_gb']:6.2f} GB  reserved {r['reserved_gb']:6.2f} GB  "
                  f"loss {loss_value:.4f}", flush=True)
            del adj, net, opt
    if a.json:
        with open(a.json, "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
