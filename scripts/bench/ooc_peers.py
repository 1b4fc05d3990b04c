#!/usr/bin/env python3
"""Peers of scripts/bench/papers100m_cgroup.sh: DGL's sampled GraphSAGE with the features in
memory, and DGL's GraphBolt with the features left on disk (OnDiskDataset, `in_memory: false`:
a numpy memory map), on the graph Tessel trains.

  ooc_peers.py export --ogb DIR --out DIR
      DIR is papers100M's raw layout (raw/data.npz, raw/node-label.npz, split/<name>/*.csv.gz),
      as `tessel convert synthetic --preset papers100m --scale F --ogb --npz` writes it. Writes
      an OnDiskDataset folder: metadata.yaml, edges/edge.npy (the graph symmetrized, without
      self-loops or duplicate edges: what `tessel partition` trains on), features/feat.npy
      (copied from the npz member in row blocks, never whole in memory), set/train_*.npy; then
      lets GraphBolt preprocess it once (its CSC graph and its copy of the features), so that
      the timed runs only load it.
  ooc_peers.py dgl --data DIR [--threads 2 --epochs 2 ...]
      dgl.dataloading.NeighborSampler + DataLoader on a dgl.graph, every feature row read into
      memory first.
  ooc_peers.py graphbolt --data DIR [--threads 2 --epochs 2 ...]
      gb.OnDiskDataset(DIR).load(), ItemSampler -> sample_neighbor -> fetch_feature ->
      gb.DataLoader (num_workers=0); the features stay a memory map of the .npy file. Before the
      first epoch the file's pages are dropped from the page cache (posix_fadvise DONTNEED), so
      the first epoch reads them from disk.

Both train the model Tessel trains (peer_gnn.py's: SAGEConv mean, dropout on every layer's
input, ReLU between layers, Adam) over the training nodes in batches of --batch-size, one
process with --threads threads. Each epoch prints one JSON line: steps, seconds, seeds/s,
sampled edges/s (the edges of the sampled blocks), the process's peak RSS so far, and its
resident memory at the epoch's end split into anonymous and file-backed (RssAnon, RssFile).
"""
import argparse
import gzip
import json
import os
import resource
import sys
import time
import warnings
import zipfile


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("--ogb", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--block-mb", type=int, default=64, help="feature rows copied per block")
    for name in ("dgl", "graphbolt"):
        r = sub.add_parser(name)
        r.add_argument("--data", required=True, help="a folder `export` wrote")
        r.add_argument("--threads", type=int, default=2)
        r.add_argument("--epochs", type=int, default=2)
        r.add_argument("--max-steps", type=int, default=0, help="steps per epoch, 0: all")
        r.add_argument("--layers", type=int, default=3)
        r.add_argument("--hidden", type=int, default=256)
        r.add_argument("--fanouts", default="15,10,5", help="input layer first")
        r.add_argument("--batch-size", type=int, default=1024)
        r.add_argument("--dropout", type=float, default=0.5)
        r.add_argument("--lr", type=float, default=0.01)
    return p.parse_args()


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def rss_parts_mib():
    """The process's resident memory now, anonymous and file-backed (the mapped features are
    file-backed), in MiB."""
    parts = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile"):
                parts[key] = round(int(value.split()[0]) / 1024)
    return dict(rss_anon_mib=parts.get("RssAnon"), rss_file_mib=parts.get("RssFile"))


def emit(record):
    print(json.dumps(record), flush=True)


# ---- export ------------------------------------------------------------------------------

def npy_header(f):
    """Reads an .npy header from the file object f: (shape, fortran_order, dtype)."""
    import numpy as np
    major, _ = np.lib.format.read_magic(f)
    if major == 1:
        return np.lib.format.read_array_header_1_0(f)
    return np.lib.format.read_array_header_2_0(f)


def read_member(zf, name):
    import numpy as np
    with zf.open(name) as f:
        return np.lib.format.read_array(f)


def read_column(path):
    import numpy as np
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return np.loadtxt(f, dtype=np.int64, ndmin=1)


def export(args):
    import numpy as np
    raw = os.path.join(args.ogb, "raw")
    out = args.out
    for d in ("edges", "features", "set"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    t0 = time.perf_counter()
    with zipfile.ZipFile(os.path.join(raw, "data.npz")) as zf:
        n = int(read_member(zf, "num_nodes_list.npy")[0])
        edge_index = read_member(zf, "edge_index.npy")
        src = np.concatenate([edge_index[0], edge_index[1]])
        dst = np.concatenate([edge_index[1], edge_index[0]])
        del edge_index
        keep = src != dst
        key = np.unique(dst[keep] * n + src[keep])  # by destination, then source
        del src, dst, keep
        edges = np.empty((2, key.size), dtype=np.int64)
        np.remainder(key, n, out=edges[0])
        np.floor_divide(key, n, out=edges[1])
        del key
        np.save(os.path.join(out, "edges", "edge.npy"), edges)
        num_edges = edges.shape[1]
        del edges
        # The features: row blocks from the (possibly deflated) zip member to a plain .npy.
        with zf.open("node_feat.npy") as f:
            shape, fortran, dtype = npy_header(f)
            if fortran or len(shape) != 2 or shape[0] != n:
                sys.exit(f"ooc_peers.py: {raw}/data.npz node_feat: shape {shape}, "
                         f"expected [{n}, F] in C order")
            rows = max(1, (args.block_mb << 20) // (shape[1] * dtype.itemsize))
            path = os.path.join(out, "features", "feat.npy")
            with open(path + ".tmp", "wb") as o:
                np.lib.format.write_array_header_1_0(
                    o, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
                        "shape": tuple(shape)})
                left = shape[0] * shape[1] * dtype.itemsize
                while left:
                    block = f.read(min(left, rows * shape[1] * dtype.itemsize))
                    if not block:
                        sys.exit(f"ooc_peers.py: {raw}/data.npz node_feat ends early")
                    o.write(block)
                    left -= len(block)
            os.replace(path + ".tmp", path)
            feature_dim = int(shape[1])
    with zipfile.ZipFile(os.path.join(raw, "node-label.npz")) as zf:
        label = read_member(zf, "node_label.npy").reshape(-1)
    split_root = os.path.join(args.ogb, "split")
    split_dir = os.path.join(split_root, sorted(os.listdir(split_root))[0])
    train = read_column(next(os.path.join(split_dir, f) for f in sorted(os.listdir(split_dir))
                             if f.startswith("train.")))
    train_label = label[train]
    if np.isnan(train_label).any():
        sys.exit("ooc_peers.py: a training node has no label")
    classes = int(np.nanmax(label)) + 1
    np.save(os.path.join(out, "set", "train_seeds.npy"), train)
    np.save(os.path.join(out, "set", "train_labels.npy"), train_label.astype(np.int64))
    with open(os.path.join(out, "metadata.yaml"), "w") as f:
        f.write(f"""dataset_name: tessel_papers100m_shape
graph:
  nodes:
    - num: {n}
  edges:
    - format: numpy
      path: edges/edge.npy
feature_data:
  - domain: node
    name: feat
    format: numpy
    in_memory: false
    path: features/feat.npy
tasks:
  - name: node_classification
    num_classes: {classes}
    train_set:
      - data:
          - name: seed_nodes
            format: numpy
            path: set/train_seeds.npy
          - name: labels
            format: numpy
            path: set/train_labels.npy
""")
    export_s = time.perf_counter() - t0
    # GraphBolt's own preprocessing (its CSC graph, its copy of the features), done here once.
    t0 = time.perf_counter()
    os.environ.setdefault("DGLBACKEND", "pytorch")
    warnings.filterwarnings("ignore")
    import dgl.graphbolt as gb
    gb.OnDiskDataset(out)
    emit(dict(export="ok", nodes=n, directed_edges=num_edges, feature_dim=feature_dim,
              classes=classes, train=int(train.size), export_s=round(export_s, 1),
              graphbolt_preprocess_s=round(time.perf_counter() - t0, 1),
              peak_rss_mib=round(peak_rss_mib())))


# ---- training ----------------------------------------------------------------------------

def make_model(args, torch, feature_dim, classes):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peer_gnn import make_models
    Net = make_models("dgl", torch)
    dims = [feature_dim] + [args.hidden] * (args.layers - 1) + [classes]
    torch.manual_seed(0)
    return Net("sage", dims, args.dropout)


def train_epochs(args, torch, model, batches, framework, extra):
    """batches(): an iterator of (x, y, blocks) for one epoch."""
    F = torch.nn.functional
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    model.train()
    for epoch in range(1, args.epochs + 1):
        steps = seeds = edges = 0
        t = time.perf_counter()
        for x, y, blocks in batches():
            opt.zero_grad()
            loss = F.cross_entropy(model(blocks, x), y)
            loss.backward()
            opt.step()
            steps += 1
            seeds += int(y.shape[0])
            edges += sum(int(b.num_edges()) for b in blocks)
            if args.max_steps and steps >= args.max_steps:
                break
        s = time.perf_counter() - t
        emit(dict(framework=framework, epoch=epoch, steps=steps, seconds=round(s, 3),
                  seeds_per_s=round(seeds / s), sampled_edges_per_s=round(edges / s),
                  loss=round(loss.item(), 4), threads=torch.get_num_threads(),
                  peak_rss_mib=round(peak_rss_mib()), **rss_parts_mib(), **extra))


def setup(args):
    warnings.filterwarnings("ignore")
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("DGLBACKEND", "pytorch")
    import torch
    torch.set_num_threads(args.threads)
    return torch


def run_dgl(args):
    torch = setup(args)
    import numpy as np
    import dgl
    t0 = time.perf_counter()
    edges = np.load(os.path.join(args.data, "edges", "edge.npy"))
    feat = torch.from_numpy(np.load(os.path.join(args.data, "features", "feat.npy")))
    seeds = torch.from_numpy(np.load(os.path.join(args.data, "set", "train_seeds.npy")))
    labels = torch.from_numpy(np.load(os.path.join(args.data, "set", "train_labels.npy")))
    n = feat.shape[0]
    g = dgl.graph((torch.from_numpy(edges[0]), torch.from_numpy(edges[1])), num_nodes=n)
    del edges
    label = torch.full((n,), -1, dtype=torch.int64)
    label[seeds] = labels
    classes = int(labels.max()) + 1
    load_s = time.perf_counter() - t0
    model = make_model(args, torch, feat.shape[1], classes)
    sampler = dgl.dataloading.NeighborSampler([int(f) for f in args.fanouts.split(",")])
    loader = dgl.dataloading.DataLoader(g, seeds, sampler, batch_size=args.batch_size,
                                        shuffle=True, drop_last=False, num_workers=0)

    def batches():
        for input_nodes, output_nodes, blocks in loader:
            yield feat[input_nodes], label[output_nodes], blocks

    train_epochs(args, torch, model, batches, "dgl " + dgl.__version__ + " in memory",
                 dict(load_s=round(load_s, 1), features="in memory"))


def run_graphbolt(args):
    torch = setup(args)
    import dgl
    import dgl.graphbolt as gb
    t0 = time.perf_counter()
    dataset = gb.OnDiskDataset(args.data).load()
    graph, features = dataset.graph, dataset.feature
    train_set = dataset.tasks[0].train_set
    classes = int(dataset.tasks[0].metadata["num_classes"])
    feature_dim = int(features.size("node", None, "feat")[0])
    load_s = time.perf_counter() - t0
    # The memory-mapped file (GraphBolt's preprocessed copy): drop its pages so that the first
    # epoch reads from disk, and check that it is mapped, not read into memory.
    path = os.path.join(os.path.abspath(args.data), "preprocessed", "features", "feat.npy")
    with open("/proc/self/maps") as f:
        mapped = path in f.read()
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    model = make_model(args, torch, feature_dim, classes)
    datapipe = gb.ItemSampler(train_set, batch_size=args.batch_size, shuffle=True)
    datapipe = datapipe.sample_neighbor(graph, [int(f) for f in args.fanouts.split(",")])
    datapipe = datapipe.fetch_feature(features, node_feature_keys=["feat"])
    loader = gb.DataLoader(datapipe, num_workers=0)

    def batches():
        for mb in loader:
            yield mb.node_features["feat"], mb.labels, mb.blocks

    train_epochs(args, torch, model, batches, "graphbolt " + dgl.__version__ + " on disk",
                 dict(load_s=round(load_s, 1),
                      features="memory-mapped" if mapped else "not mapped (read into memory?)"))


def main():
    args = parse_args()
    if args.cmd == "export":
        export(args)
    elif args.cmd == "dgl":
        run_dgl(args)
    else:
        run_graphbolt(args)


if __name__ == "__main__":
    main()
