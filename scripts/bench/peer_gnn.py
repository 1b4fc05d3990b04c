#!/usr/bin/env python3
"""Peer side of scripts/bench/peers.sh: full-batch GCN, GraphSAGE and GAT, and sampled GraphSAGE
and GAT, in DGL or PyG on an OGB raw folder, timed the way Tessel times itself. Prints one JSON
object per measurement on stdout (and one "info" object with the versions first).

  peer_gnn.py --framework dgl|pyg --ogb DIR --cache FILE.npz --threads 2 [--epochs 12]
              [--only gcn,sage,gat,sampled,sampled-gat] [--adjacency edge_index,sparse]
              [--heads 8] [--attn-dropout 0.5] [--prepare]

Full batch: seconds of one training step (forward, backward, optimizer step) and of a
forward-only evaluation over every node, medians over the epochs after the first two.
Sampled: seconds of one training epoch (sampling, feature gather, forward, backward, step)
over the training nodes, batches of --batch-size, median over the epochs after the first.
The models are Tessel's: dropout on every layer's input, the input features included, ReLU
between layers; --normalize-features row normalizes the features once, before any timing. PyG
passes messages on edge_index, on a torch.sparse CSR adjacency, or both
(--adjacency); its sampled run uses edge_index. GAT (GATConv in both): --heads heads of
--hidden / --heads columns each, concatenated in the hidden layers; one head in the output layer;
LeakyReLU 0.2 logits; --attn-dropout on the attention coefficients; self loops added (DGL:
dgl.add_self_loop on the full graph, none on sampled blocks; PyG: GATConv adds them, sampled
subgraphs included); PyG runs GAT on edge_index only. --prepare only makes the cache and exits.
"""
import argparse
import warnings
import gzip
import json
import os
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=["dgl", "pyg"], required=True)
    p.add_argument("--ogb", required=True, help="OGB raw folder (raw/, split/)")
    p.add_argument("--cache", required=True, help="npz made from the folder on first use")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--epochs", type=int, default=12, help="full-batch epochs (first 2 warm up)")
    p.add_argument("--sampled-epochs", type=int, default=3, help="sampled epochs (first warms up)")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2, help="full-batch layers")
    p.add_argument("--sampled-layers", type=int, default=3)
    p.add_argument("--fanouts", default="15,10,5", help="input layer first, as DGL lists them")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--normalize-features", choices=["none", "row"], default="none",
                   help="row: each feature row divided by the sum of its absolute values, once "
                        "before timing (Tessel's --normalize-features row)")
    p.add_argument("--heads", type=int, default=8, help="GAT: heads of the hidden layers")
    p.add_argument("--attn-dropout", type=float, default=0.5, help="GAT: on the coefficients")
    p.add_argument("--only", default="gcn,sage,sampled",
                   help="subset of gcn,sage,gat,sampled (SAGE),sampled-gat")
    p.add_argument("--adjacency", default="edge_index,sparse",
                   help="PyG: subset of edge_index,sparse (sampled runs on edge_index)")
    p.add_argument("--prepare", action="store_true", help="make the cache from --ogb and exit")
    args = p.parse_args()
    args.only = set(filter(None, args.only.split(",")))
    args.adjacency = set(filter(None, args.adjacency.split(",")))
    if not args.only <= {"gcn", "sage", "gat", "sampled", "sampled-gat"}:
        p.error(f"--only {','.join(sorted(args.only))}: not a subset of "
                "gcn,sage,gat,sampled,sampled-gat")
    if args.hidden % args.heads:
        p.error(f"--hidden {args.hidden} is not a multiple of --heads {args.heads}")
    if not args.adjacency <= {"edge_index", "sparse"}:
        p.error(f"--adjacency {','.join(sorted(args.adjacency))}: "
                "not a subset of edge_index,sparse")
    return args


def read_csv_gz(path, dtype, cols=None):
    import numpy as np
    import pandas as pd
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        frame = pd.read_csv(f, header=None, dtype=dtype)
    array = frame.to_numpy()
    return array if cols is None or cols > 1 else array.reshape(-1)


def find(path_no_ext):
    for ext in (".csv.gz", ".csv"):
        if os.path.exists(path_no_ext + ext):
            return path_no_ext + ext
    sys.exit(f"peer_gnn.py: {path_no_ext}.csv.gz not found")


def load(folder, cache):
    """The OGB raw folder as arrays: the symmetrized graph without self-loops or duplicate edges
    (what `tessel partition` trains on), features, labels, and the split."""
    import numpy as np
    if os.path.exists(cache):
        d = np.load(cache)
        return {k: np.array(d[k]) for k in d.files}
    raw = os.path.join(folder, "raw")
    edges = read_csv_gz(find(os.path.join(raw, "edge")), np.int64, 2)
    num_nodes = int(read_csv_gz(find(os.path.join(raw, "num-node-list")), np.int64, 1)[0])
    feat = read_csv_gz(find(os.path.join(raw, "node-feat")), np.float32, 2)
    label = read_csv_gz(find(os.path.join(raw, "node-label")), np.float64, 1)
    split_root = os.path.join(folder, "split")
    split_dir = os.path.join(split_root, sorted(os.listdir(split_root))[0])
    split = {s: read_csv_gz(find(os.path.join(split_dir, s)), np.int64, 1)
             for s in ("train", "valid", "test")}
    src = np.concatenate([edges[:, 0], edges[:, 1]])
    dst = np.concatenate([edges[:, 1], edges[:, 0]])
    keep = src != dst
    key = np.unique(dst[keep] * num_nodes + src[keep])  # sorted by destination, then source
    src, dst = key % num_nodes, key // num_nodes
    label = np.where(np.isnan(label), -1, label).astype(np.int64)
    out = dict(src=src, dst=dst, num_nodes=np.array([num_nodes]), feat=feat, label=label,
               train=split["train"], valid=split["valid"], test=split["test"])
    os.makedirs(os.path.dirname(os.path.abspath(cache)), exist_ok=True)
    np.savez(cache + ".tmp.npz", **out)
    os.replace(cache + ".tmp.npz", cache)
    return out


def median_after(values, skip):
    kept = values[skip:] if len(values) > skip else values
    return statistics.median(kept)


def emit(record):
    print(json.dumps(record), flush=True)


# ---- models ------------------------------------------------------------------------------

def make_models(framework, torch, heads=8, attn_dropout=0.5):
    nn = torch.nn
    F = torch.nn.functional

    if framework == "dgl":
        from dgl.nn import GATConv, GraphConv, SAGEConv

        def gat(i, o, h):
            return GATConv(i, o, h, attn_drop=attn_dropout, negative_slope=0.2,
                           allow_zero_in_degree=True)

        def gcn(i, o):
            return GraphConv(i, o, norm="both", allow_zero_in_degree=True)

        def sage(i, o):
            return SAGEConv(i, o, "mean")
    else:
        from torch_geometric.nn import GATConv as PygGat, GCNConv, SAGEConv as PygSage

        def gat(i, o, h, concat=True):
            return PygGat(i, o, heads=h, concat=concat, negative_slope=0.2, dropout=attn_dropout,
                          add_self_loops=True)

        def gcn(i, o):
            # cached: the normalized adjacency is built once, as Tessel and DGL do.
            return GCNConv(i, o, cached=True)

        def sage(i, o):
            return PygSage(i, o, aggr="mean")

    class Net(nn.Module):
        def __init__(self, kind, dims, dropout):
            super().__init__()
            self.gat = kind == "gat"
            if self.gat:
                # Hidden layers: `heads` heads of width / heads columns, concatenated; the output
                # layer: one head.
                convs = []
                for l, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
                    last = l == len(dims) - 2
                    o, h = (b, 1) if last else (b // heads, heads)
                    convs.append(gat(a, o, h) if framework == "dgl" else gat(a, o, h, not last))
                self.convs = nn.ModuleList(convs)
            else:
                make = gcn if kind == "gcn" else sage
                self.convs = nn.ModuleList(make(a, b) for a, b in zip(dims[:-1], dims[1:]))
            self.dropout = dropout

        def forward(self, graphs, x):
            # graphs: one graph for every layer (full batch) or one block per layer (sampled).
            # Dropout before every layer, the first included, as Tessel's model applies it.
            for i, (conv, g) in enumerate(zip(self.convs, graphs)):
                x = F.dropout(x, self.dropout, self.training)
                x = conv(g, x) if framework == "dgl" else conv(x, g)
                if self.gat and framework == "dgl":
                    # DGL's GATConv gives [nodes, heads, columns]: concatenate, or average the
                    # output layer's.
                    x = x.flatten(1) if i + 1 < len(self.convs) else x.mean(1)
                if i + 1 < len(self.convs):
                    x = F.relu(x)
            return x

    return Net


# ---- full batch --------------------------------------------------------------------------

def full_batch(args, torch, Net, data, graph, variant, feat, label, train):
    F = torch.nn.functional
    classes = int(label.max()) + 1
    for kind in ("gcn", "sage", "gat"):
        if kind not in args.only or kind not in graph:
            continue
        g = graph[kind]
        dims = [feat.shape[1]] + [args.hidden] * (args.layers - 1) + [classes]
        torch.manual_seed(0)
        model = Net(kind, dims, args.dropout)
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        graphs = [g] * args.layers
        step_s, eval_s = [], []
        for _ in range(args.epochs):
            model.train()
            t = time.perf_counter()
            opt.zero_grad()
            out = model(graphs, feat)
            loss = F.cross_entropy(out[train], label[train])
            loss.backward()
            opt.step()
            step_s.append(time.perf_counter() - t)
            model.eval()
            t = time.perf_counter()
            with torch.no_grad():
                logits = model(graphs, feat)
            eval_s.append(time.perf_counter() - t)
        valid = torch.as_tensor(data["valid"])
        acc = (logits[valid].argmax(1) == label[valid]).float().mean().item()
        emit(dict(framework=args.framework, variant=variant, model=kind, mode="full",
                  train_step_s=median_after(step_s, 2), eval_s=median_after(eval_s, 2),
                  valid_acc=acc, loss=loss.item(), epochs=args.epochs))


# ---- sampled -----------------------------------------------------------------------------

def sampled_dgl(args, torch, Net, data, g, feat, label, train, kind="sage"):
    import dgl
    F = torch.nn.functional
    fanouts = [int(f) for f in args.fanouts.split(",")]
    classes = int(label.max()) + 1
    dims = [feat.shape[1]] + [args.hidden] * (args.sampled_layers - 1) + [classes]
    torch.manual_seed(0)
    model = Net(kind, dims, args.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sampler = dgl.dataloading.NeighborSampler(fanouts)
    loader = dgl.dataloading.DataLoader(g, train, sampler, batch_size=args.batch_size,
                                        shuffle=True, drop_last=False, num_workers=0)
    epoch_s, sampled_edges = [], 0
    for epoch in range(args.sampled_epochs):
        model.train()
        t = time.perf_counter()
        edges = 0
        for input_nodes, output_nodes, blocks in loader:
            x = feat[input_nodes]
            y = label[output_nodes]
            opt.zero_grad()
            loss = F.cross_entropy(model(blocks, x), y)
            loss.backward()
            opt.step()
            edges += sum(b.num_edges() for b in blocks)
        epoch_s.append(time.perf_counter() - t)
        sampled_edges = edges
    emit(dict(framework="dgl", variant="dgl", model=kind, mode="sampled",
              epoch_s=median_after(epoch_s, 1), steps=len(loader), sampled_edges=sampled_edges,
              loss=loss.item(), epochs=args.sampled_epochs))


def sampled_pyg(args, torch, Net, data, edge_index, feat, label, train, kind="sage"):
    from torch_geometric.data import Data
    try:
        from torch_geometric.loader import NeighborLoader
        F = torch.nn.functional
        fanouts = [int(f) for f in args.fanouts.split(",")]
        classes = int(label.max()) + 1
        dims = [feat.shape[1]] + [args.hidden] * (args.sampled_layers - 1) + [classes]
        torch.manual_seed(0)
        model = Net(kind, dims, args.dropout)
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        graph = Data(x=feat, y=label, edge_index=edge_index, num_nodes=feat.shape[0])
        # PyG lists fanouts from the seeds outward: reverse DGL's input-layer-first order.
        loader = NeighborLoader(graph, num_neighbors=fanouts[::-1], input_nodes=train,
                                batch_size=args.batch_size, shuffle=True)
        epoch_s = []
        for epoch in range(args.sampled_epochs):
            model.train()
            t = time.perf_counter()
            edges = 0
            for batch in loader:
                opt.zero_grad()
                out = model([batch.edge_index] * len(dims[1:]), batch.x)[: batch.batch_size]
                loss = F.cross_entropy(out, batch.y[: batch.batch_size])
                loss.backward()
                opt.step()
                edges += int(batch.edge_index.shape[1])
            epoch_s.append(time.perf_counter() - t)
        emit(dict(framework="pyg", variant="pyg edge_index", model=kind, mode="sampled",
                  epoch_s=median_after(epoch_s, 1), steps=len(loader), sampled_edges=edges,
                  loss=loss.item(), epochs=args.sampled_epochs))
    except ImportError as e:
        emit(dict(framework="pyg", variant="pyg edge_index", model=kind, mode="sampled",
                  epoch_s=None,
                  error=f"NeighborLoader unavailable: {e}".splitlines()[0]))


def main():
    args = parse_args()
    # Deprecation and beta-feature notes from torch and PyG would bury the numbers.
    warnings.filterwarnings("ignore")
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("DGLBACKEND", "pytorch")
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    t = time.perf_counter()
    data = load(args.ogb, args.cache)
    load_s = time.perf_counter() - t
    if args.prepare:
        return
    n = int(data["num_nodes"][0])
    feat = torch.from_numpy(data["feat"])
    if args.normalize_features == "row":
        sums = feat.abs().sum(1, keepdim=True)
        feat = torch.where(sums > 0, feat / sums, feat)
    label = torch.from_numpy(data["label"])
    train = torch.from_numpy(data["train"])
    src = torch.from_numpy(data["src"])
    dst = torch.from_numpy(data["dst"])
    Net = make_models(args.framework, torch, args.heads, args.attn_dropout)
    versions = dict(torch=torch.__version__, threads=torch.get_num_threads(), load_s=load_s,
                    nodes=n, directed_edges=int(src.numel()))
    if args.framework == "dgl":
        import dgl
        versions["dgl"] = dgl.__version__
        emit(dict(framework="dgl", info=versions))
        g = dgl.graph((src, dst), num_nodes=n)
        # GCN adds self-loops (D^-1/2 (A + I) D^-1/2); SAGE's mean is over neighbors only.
        # GAT, like Tessel's, attends over the in-neighbours and the node itself.
        looped = dgl.add_self_loop(g)
        graph = {"gcn": looped, "sage": g, "gat": looped}
        full_batch(args, torch, Net, data, graph, "dgl", feat, label, train)
        if "sampled" in args.only:
            sampled_dgl(args, torch, Net, data, g, feat, label, train)
        if "sampled-gat" in args.only:
            sampled_dgl(args, torch, Net, data, g, feat, label, train, "gat")
    else:
        import torch_geometric
        versions["torch_geometric"] = torch_geometric.__version__
        emit(dict(framework="pyg", info=versions))
        edge_index = torch.stack([src, dst])
        if "edge_index" in args.adjacency:
            full_batch(args, torch, Net, data,
                       {"gcn": edge_index, "sage": edge_index, "gat": edge_index},
                       "pyg edge_index", feat, label, train)
        if "sparse" in args.adjacency:
            # adj_t: row v lists v's in-neighbors (sources), the layout PyG's sparse path expects.
            indptr = torch.zeros(n + 1, dtype=torch.int64)
            indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
            adj_t = torch.sparse_csr_tensor(indptr, src, torch.ones(src.numel()), size=(n, n))
            full_batch(args, torch, Net, data, {"gcn": adj_t, "sage": adj_t}, "pyg sparse",
                       feat, label, train)
        if "sampled" in args.only and "edge_index" in args.adjacency:
            sampled_pyg(args, torch, Net, data, edge_index, feat, label, train)
        if "sampled-gat" in args.only and "edge_index" in args.adjacency:
            sampled_pyg(args, torch, Net, data, edge_index, feat, label, train, "gat")


if __name__ == "__main__":
    main()
