"""DGL side of scripts/bench/link_sampled.sh: sampled link prediction training with DGL's edge
dataloader (dgl.dataloading.as_edge_prediction_sampler over a NeighborSampler, uniform negatives),
a GraphSAGE encoder (mean aggregator, dropout before every layer, ReLU between layers) and a dot
product decoder, binary cross-entropy over the positives and their negatives, Adam.

    python dgl_link_sampled.py RAW_FOLDER --threads T --fanouts 10,10 --batch-size 512
        [--negatives 1] [--hidden 128] [--out-dim 64] [--steps 30] [--warmup 5] [--runs 1]

RAW_FOLDER is the OGB raw folder the Tessel side converts (`tessel convert synthetic --ogb`).
Edges are split like `convert --edge-split 85,5,10` (each undirected edge once, validation and
test edges removed from the message-passing graph in both directions; seeded by numpy, so not the
same edges as Tessel's split, the same counts). Prints one JSON line: the seconds of `--steps`
steps after `--warmup` steps, and training edges (positives) per second.
"""
import argparse
import gzip
import json
import os
import sys
import time


def read_csv(path, dtype):
    import numpy as np
    import pandas as pd
    for ext in (".csv.gz", ".csv"):
        if os.path.exists(path + ext):
            opener = gzip.open if ext.endswith(".gz") else open
            with opener(path + ext, "rt") as f:
                return pd.read_csv(f, header=None, dtype=dtype).to_numpy()
    sys.exit(f"dgl_link_sampled.py: {path}.csv.gz not found")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("raw")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--negatives", type=int, default=1)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--out-dim", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()

    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    import dgl
    from dgl.nn import SAGEConv
    F = torch.nn.functional

    # The CSV files once, then their arrays from a cache beside the folder (not timed either way).
    cache = args.raw.rstrip("/") + "-link-arrays.npz"
    if os.path.exists(cache):
        arrays = np.load(cache)
        edges, num_nodes, feat = arrays["edges"], int(arrays["num_nodes"]), arrays["feat"]
    else:
        raw = os.path.join(args.raw, "raw")
        edges = read_csv(os.path.join(raw, "edge"), np.int64)
        num_nodes = int(read_csv(os.path.join(raw, "num-node-list"), np.int64).reshape(-1)[0])
        feat = read_csv(os.path.join(raw, "node-feat"), np.float32)
        np.savez(cache + ".tmp.npz", edges=edges, num_nodes=np.array(num_nodes), feat=feat)
        os.replace(cache + ".tmp.npz", cache)
    feat = torch.from_numpy(feat)
    feat = feat / feat.abs().sum(1, keepdim=True).clamp_min(1e-12)  # --normalize-features row
    # Undirected edges once (u < v), without self-loops or duplicates; 85/5/10 split.
    u, v = np.minimum(edges[:, 0], edges[:, 1]), np.maximum(edges[:, 0], edges[:, 1])
    keep = u != v
    key = np.unique(u[keep] * num_nodes + v[keep])
    u, v = key // num_nodes, key % num_nodes
    rng = np.random.default_rng(1)
    order = rng.permutation(len(u))
    n_train = int(0.85 * len(u))
    train = order[:n_train]
    tu, tv = u[train], v[train]
    # The message-passing graph: the training edges in both directions. Edge ids [0, n_train)
    # are the training edges in one direction (the dataloader's seeds).
    g = dgl.graph((np.concatenate([tu, tv]), np.concatenate([tv, tu])), num_nodes=num_nodes)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        dgl.dataloading.NeighborSampler(fanouts),
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(args.negatives))
    loader = dgl.dataloading.DataLoader(g, torch.arange(n_train), sampler,
                                        batch_size=args.batch_size, shuffle=True, drop_last=False,
                                        num_workers=0)

    class Net(torch.nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.convs = torch.nn.ModuleList(SAGEConv(a, b, "mean")
                                             for a, b in zip(dims[:-1], dims[1:]))

        def forward(self, blocks, x):
            for i, (conv, b) in enumerate(zip(self.convs, blocks)):
                x = F.dropout(x, args.dropout, self.training)
                x = conv(b, x)
                if i + 1 < len(self.convs):
                    x = F.relu(x)
            return x

    dims = [feat.shape[1]] + [args.hidden] * (len(fanouts) - 1) + [args.out_dim]
    torch.manual_seed(0)
    model = Net(dims)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    model.train()

    def score(graph, z):
        with graph.local_scope():
            graph.ndata["z"] = z
            graph.apply_edges(dgl.function.u_dot_v("z", "z", "s"))
            return graph.edata["s"].reshape(-1)

    steps, edges_run, t0, loss = 0, 0, None, None
    while steps < args.warmup + args.steps:
        for input_nodes, pos_graph, neg_graph, blocks in loader:
            if steps == args.warmup:
                t0 = time.perf_counter()
            x = feat[input_nodes]
            z = model(blocks, x)
            pos, neg = score(pos_graph, z), score(neg_graph, z)
            loss = (F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos)) +
                    F.binary_cross_entropy_with_logits(neg, torch.zeros_like(neg)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if steps >= args.warmup:
                edges_run += pos_graph.num_edges()
            steps += 1
            if steps == args.warmup + args.steps:
                break
    seconds = time.perf_counter() - t0
    print(json.dumps(dict(framework="dgl", version=dgl.__version__, steps=args.steps,
                          train_edges=edges_run, seconds=seconds,
                          edges_per_s=edges_run / seconds, loss=loss.item(),
                          graph_train_edges=int(n_train))), flush=True)


if __name__ == "__main__":
    main()
