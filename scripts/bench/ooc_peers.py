#!/usr/bin/env python3
"""Peers of scripts/bench/papers100m_cgroup.sh: DGL's sampled GraphSAGE with the features in
memory, and DGL's GraphBolt with the features left on disk (OnDiskDataset, `in_memory: false`:
a numpy memory map), on the graph Tessel trains.

  ooc_peers.py export --store STORE.h5 --out DIR [--index-dtype auto|int64]
      STORE.h5 is a Tessel store (`tessel convert synthetic --preset papers100m --scale F`, or any
      `convert` output). Writes GraphBolt's preprocessed OnDiskDataset layout directly, so that
      GraphBolt's own preprocessing (and its copy of the features) never runs:
      DIR/preprocessed/metadata.yaml, fused_csc_sampling_graph.pt (the graph symmetrized,
      without self-loops or duplicate edges: what `tessel partition` trains on; built from the
      store's CSR in blocks of rows, in 32-bit ids where GraphBolt's preprocessing would cast to
      them), features/feat.npy (float32, copied from /node/feat in row blocks; `in_memory:
      false`), set/{train,validation,test}_{seeds,labels}.npy, and dataset_hash_value.txt (the
      MD5 of each file, keyed by DIR as spelled here, which `gb.OnDiskDataset(DIR)` checks).
      Peak memory: the symmetrized graph, the store's row pointers, a cursor per node and one
      block; never the features. DIR must be empty or hold only an earlier export's preprocessed/;
      it is written to a temporary folder and renamed, so a failed export leaves nothing.
  ooc_peers.py export --ogb DIR --out DIR
      DIR is papers100M's raw layout (raw/data.npz, raw/node-label.npz, split/<name>/*.csv.gz),
      as `tessel convert synthetic --preset papers100m --scale F --ogb --npz` writes it. Writes
      an OnDiskDataset folder: metadata.yaml, edges/edge.npy (the same graph as above),
      features/feat.npy (copied from the npz member in row blocks, never whole in memory),
      set/train_*.npy; then lets GraphBolt preprocess it once (its CSC graph and its copy of the
      features into DIR/preprocessed/), so that the timed runs only load it.
  ooc_peers.py dgl --data DIR [--threads 2 --epochs 2 ...]
      dgl.dataloading.NeighborSampler + DataLoader on a dgl.graph built from the preprocessed
      CSC graph (64-bit ids; CSC only), every feature row read into memory first.
  ooc_peers.py graphbolt --data DIR [--threads 2 --epochs 2 ...]
      gb.OnDiskDataset(DIR, force_preprocess=False).load() (the folder is used as preprocessed:
      GraphBolt's check would hash every file, the features included, at each load),
      ItemSampler -> sample_neighbor -> fetch_feature -> gb.DataLoader (num_workers=0); the
      features stay a memory map of the .npy file. Before the first epoch the file's pages are
      dropped from the page cache (posix_fadvise DONTNEED), so the first epoch reads them from
      disk.

Both train the model Tessel trains (peer_gnn.py's: SAGEConv mean, dropout on every layer's
input, ReLU between layers, Adam) over the training nodes in batches of --batch-size, one
process with --threads threads. Each epoch prints one JSON line: steps, seconds, seeds/s,
sampled edges/s (the edges of the sampled blocks), the process's peak RSS so far, and its
resident memory at the epoch's end split into anonymous and file-backed (RssAnon, RssFile).
"""
import argparse
import gzip
import hashlib
import json
import os
import resource
import shutil
import signal
import sys
import time
import warnings
import zipfile


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    source = e.add_mutually_exclusive_group(required=True)
    source.add_argument("--store", help="a Tessel HDF5 store")
    source.add_argument("--ogb", help="papers100M's raw layout (raw/data.npz)")
    e.add_argument("--out", required=True)
    e.add_argument("--block-mb", type=int, default=64,
                   help="MiB of feature rows copied per block (and, with --store, of graph ids)")
    e.add_argument("--index-dtype", choices=("auto", "int64"), default="auto",
                   help="--store: auto: 32-bit node ids and row pointers where they fit, as "
                        "GraphBolt's preprocessing casts them; int64: 64-bit")
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


class ExportError(Exception):
    """Bad input or a failed write: one line for the user."""


def md5_file(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def symmetrized_csc(indptr_ds, indices_ds, n, block_edges, index_dtype, log):
    """The graph of the store's in-neighbour CSR (indptr_ds, indices_ds: h5py datasets) with
    every edge in both directions, without self-loops or duplicates, as a CSC (column v lists
    the sources of v's in-edges, ascending): (indptr, indices) numpy arrays. Reads the store in
    blocks of about block_edges stored edges, twice (degrees, then placement); holds the store's
    row pointers, one cursor per node and the output, plus one block's temporaries."""
    import numpy as np
    src_ptr = indptr_ds[:]
    if src_ptr.shape != (n + 1,) or src_ptr[0] != 0 or np.any(np.diff(src_ptr) < 0):
        raise ExportError("/graph/indptr: expected a monotone [num_nodes + 1] array from 0")
    stored = int(src_ptr[-1])
    if indices_ds.shape != (stored,):
        raise ExportError(f"/graph/indices has shape {indices_ds.shape}, expected [{stored}]")
    narrow = index_dtype == "auto" and n <= np.iinfo(np.int32).max
    id_t = np.int32 if narrow else np.int64

    def blocks():
        """(first row, row ids, column ids) of each block of whole rows, self-loops dropped."""
        r0 = 0
        while r0 < n:
            r1 = int(np.searchsorted(src_ptr, src_ptr[r0] + block_edges, side="right")) - 1
            r1 = min(n, max(r1, r0 + 1))
            e0, e1 = int(src_ptr[r0]), int(src_ptr[r1])
            cols = indices_ds[e0:e1]
            if cols.size and (cols.min() < 0 or cols.max() >= n):
                bad = int(np.flatnonzero((cols < 0) | (cols >= n))[0]) + e0
                raise ExportError(f"/graph/indices[{bad}] = {int(indices_ds[bad])}: not a node id "
                                  f"in [0, {n})")
            rows = np.repeat(np.arange(r0, r1, dtype=id_t), np.diff(src_ptr[r0:r1 + 1]))
            cols = cols.astype(id_t, copy=False)
            keep = rows != cols
            yield r0, rows[keep], cols[keep]
            r0 = r1

    # Pass 1: each stored edge u -> v counts once in column v and once in column u.
    t = time.perf_counter()
    degree = np.zeros(n, dtype=np.int64)
    for r0, rows, cols in blocks():
        if rows.size:
            span = int(rows[-1]) - r0 + 1
            degree[r0:r0 + span] += np.bincount(rows - r0, minlength=span)
        degree += np.bincount(cols, minlength=n)
    total = int(degree.sum())
    log(f"degrees: {stored} stored edges, {total} directed before removing duplicates "
        f"({time.perf_counter() - t:.1f} s)")
    # Pass 2: place each edge both ways at its column's cursor.
    t = time.perf_counter()
    cursor = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(degree, out=cursor[1:])
    del degree
    indices = np.empty(total, dtype=id_t)
    for _, rows, cols in blocks():
        column = np.concatenate([rows, cols])  # where each entry goes
        value = np.concatenate([cols, rows])
        del rows, cols
        order = np.argsort(column, kind="stable")
        column, value = column[order], value[order]
        del order
        if column.size == 0:
            continue
        first = np.flatnonzero(np.concatenate(([True], column[1:] != column[:-1])))
        count = np.diff(np.append(first, column.size))
        rank = np.arange(column.size, dtype=np.int64) - np.repeat(first, count)
        indices[cursor[column] + rank] = value
        cursor[column[first]] += count
        del column, value, first, count, rank
    # Now cursor[v] is where column v ends (the start of v + 1), cursor[n] is still total.
    del src_ptr
    log(f"placed both directions ({time.perf_counter() - t:.1f} s)")
    # Pass 3: sort each column and drop duplicates, compacting in place, in blocks of columns.
    t = time.perf_counter()
    indptr = np.empty(n + 1, dtype=np.int64)
    indptr[0] = 0
    end = cursor[:n]  # end of column v before compaction
    written = 0
    c0 = 0
    while c0 < n:
        p0 = int(end[c0 - 1]) if c0 else 0
        c1 = int(np.searchsorted(end, p0 + 2 * block_edges, side="right"))
        c1 = min(n, max(c1, c0 + 1))
        p1 = int(end[c1 - 1])
        length = np.diff(end[c0:c1], prepend=p0)
        local = np.repeat(np.arange(c1 - c0, dtype=np.int64), length)
        del length
        key = local * n + indices[p0:p1]
        del local
        key.sort()
        fresh = np.concatenate(([True], key[1:] != key[:-1])) if key.size else key.astype(bool)
        key = key[fresh]
        del fresh
        column = key // n
        indices[written:written + key.size] = key - column * n
        indptr[c0 + 1:c1 + 1] = written + np.cumsum(np.bincount(column, minlength=c1 - c0))
        written += key.size
        del key, column
        c0 = c1
    del cursor, end
    if written < total:
        indices.resize(written, refcheck=False)  # torch.save would write the whole buffer
    log(f"sorted, {total - written} duplicates dropped ({time.perf_counter() - t:.1f} s)")
    if narrow and written <= np.iinfo(np.int32).max:
        indptr = indptr.astype(np.int32)
    return indptr, indices


def export_store(args):
    """--store: GraphBolt's preprocessed layout straight from a Tessel store (see the top)."""
    import numpy as np
    try:
        import h5py
    except ImportError:
        sys.exit(f"ooc_peers.py: export --store needs h5py in {sys.executable} "
                 "(pip install h5py)")
    os.environ.setdefault("DGLBACKEND", "pytorch")
    warnings.filterwarnings("ignore")
    import torch
    import yaml
    import dgl.graphbolt as gb

    def log(message):
        print(f"ooc_peers.py export: {message}", file=sys.stderr, flush=True)

    out = args.out
    if os.path.exists(out) and not os.path.isdir(out):
        sys.exit(f"ooc_peers.py: {out} is not a folder")
    if os.path.isdir(out):
        others = sorted(set(os.listdir(out)) - {"preprocessed"})
        if others:
            sys.exit(f"ooc_peers.py: {out} holds {', '.join(others[:3])}: expected an empty folder "
                     "or an earlier export's preprocessed/ (GraphBolt hashes every file in it)")
    created = not os.path.exists(out)
    os.makedirs(out, exist_ok=True)
    final = os.path.join(out, "preprocessed")
    partial = os.path.join(out, f".preprocessed.partial-{os.getpid()}")
    phases = {}
    # SIGTERM: unwind (and remove the partial folder) as for Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t_all = time.perf_counter()
    try:
        try:
            store = h5py.File(args.store, "r")
        except OSError as e:
            raise ExportError(f"cannot open as HDF5: {e}")
        with store:
            attrs = store.attrs
            if attrs.get("format") not in ("tessel-dataset", b"tessel-dataset"):
                raise ExportError("not a Tessel dataset store (root attribute format is "
                                  f"{attrs.get('format')!r}, expected 'tessel-dataset')")
            for name in ("graph/indptr", "graph/indices", "node/feat", "node/label",
                         "split/train", "split/valid", "split/test"):
                if name not in store:
                    raise ExportError(f"/{name} is missing")
            n = int(attrs["num_nodes"])
            classes = int(attrs["num_classes"])
            feat = store["node/feat"]
            if feat.ndim != 2 or feat.shape[0] != n:
                raise ExportError(f"/node/feat has shape {feat.shape}, expected [{n}, F]")
            try:
                feat_dtype = np.dtype(feat.dtype)
            except TypeError:
                feat_dtype = None
            if feat_dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
                raise ExportError(f"/node/feat is {feat.dtype}; this export reads float32 or "
                                  "float16 (convert without --feature-dtype bfloat16)")
            os.makedirs(os.path.join(partial, "features"))
            os.makedirs(os.path.join(partial, "set"))
            block_edges = max(1, (args.block_mb << 20) // 32)

            # The graph.
            t = time.perf_counter()
            indptr, indices = symmetrized_csc(store["graph/indptr"], store["graph/indices"], n,
                                              block_edges, args.index_dtype, log)
            num_edges = int(indices.size)
            narrow_ids = indices.dtype == np.int32
            graph = gb.fused_csc_sampling_graph(torch.from_numpy(indptr),
                                                torch.from_numpy(indices))
            torch.save(graph, os.path.join(partial, "fused_csc_sampling_graph.pt"))
            del graph, indptr, indices
            phases["graph_s"] = round(time.perf_counter() - t, 1)
            log(f"graph: {n} nodes, {num_edges} directed edges ({phases['graph_s']} s)")

            # Labels and the item sets (node ids 32-bit where the graph's are, as GraphBolt's
            # preprocessing casts seed_nodes).
            label = store["node/label"][:]
            if label.shape != (n,):
                raise ExportError(f"/node/label has shape {label.shape}, expected [{n}]")
            sets = {}
            for split, set_name in (("train", "train"), ("valid", "validation"),
                                    ("test", "test")):
                seeds = store[f"split/{split}"][:].astype(np.int64, copy=False)
                bad = np.flatnonzero((seeds < 0) | (seeds >= n))
                if bad.size:
                    raise ExportError(f"/split/{split}[{bad[0]}] = {seeds[bad[0]]}: not a node id "
                                      f"in [0, {n})")
                seed_label = label[seeds]
                bad = np.flatnonzero((seed_label < 0) | (seed_label >= classes))
                if bad.size:
                    raise ExportError(f"/split/{split}[{bad[0]}]: node {seeds[bad[0]]} has label "
                                      f"{seed_label[bad[0]]}, expected a class in [0, {classes})")
                np.save(os.path.join(partial, "set", f"{set_name}_seeds.npy"),
                        seeds.astype(np.int32) if narrow_ids else seeds)
                np.save(os.path.join(partial, "set", f"{set_name}_labels.npy"),
                        seed_label.astype(np.int64, copy=False))
                sets[set_name] = int(seeds.size)
            del label

            # The features: row blocks (whole HDF5 chunks) into an .npy whose header numpy
            # writes; the blocks go through write(), not the memory map, so that the written
            # pages are page cache, not this process's resident memory.
            t = time.perf_counter()
            dim = int(feat.shape[1])
            path = os.path.join(partial, "features", "feat.npy")
            header = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
            offset = header.offset
            del header
            chunk = feat.chunks[0] if feat.chunks else 1
            rows = max(1, (args.block_mb << 20) // max(1, dim * 4))
            rows = max(chunk, rows // chunk * chunk)
            feat_md5 = hashlib.md5()
            with open(path, "r+b") as f:
                feat_md5.update(f.read(offset))
                f.seek(offset)
                for r0 in range(0, n, rows):
                    block = np.ascontiguousarray(feat[r0:min(n, r0 + rows)], dtype=np.float32)
                    if not np.isfinite(block).all():
                        bad = np.argwhere(~np.isfinite(block))[0]
                        raise ExportError(f"/node/feat row {r0 + bad[0]} column {bad[1]} is "
                                          f"{block[tuple(bad)]}, expected a finite number")
                    data = memoryview(block).cast("B")
                    f.write(data)
                    feat_md5.update(data)
                    del block, data
            phases["features_s"] = round(time.perf_counter() - t, 1)
            log(f"features: [{n}, {dim}] float32 ({phases['features_s']} s)")
            name = attrs.get("name", "tessel")
            name = name.decode() if isinstance(name, bytes) else str(name)

        def rel(*parts):
            return os.path.join("preprocessed", *parts)

        def tvt(set_name):
            return [{"data": [
                {"name": "seed_nodes", "format": "numpy",
                 "path": rel("set", f"{set_name}_seeds.npy")},
                {"name": "labels", "format": "numpy",
                 "path": rel("set", f"{set_name}_labels.npy")}]}]

        # The metadata GraphBolt's preprocessing would write (its input's, with the paths moved
        # under preprocessed/, the graph replaced by graph_topology).
        metadata = {
            "dataset_name": name,
            "graph_topology": {"type": "FusedCSCSamplingGraph",
                               "path": rel("fused_csc_sampling_graph.pt")},
            "include_original_edge_id": False,
            "feature_data": [{"domain": "node", "name": "feat", "format": "numpy",
                              "in_memory": False, "path": rel("features", "feat.npy")}],
            "tasks": [{"name": "node_classification", "num_classes": classes,
                       "train_set": tvt("train"), "validation_set": tvt("validation"),
                       "test_set": tvt("test")}],
        }
        with open(os.path.join(partial, "metadata.yaml"), "w") as f:
            yaml.dump(metadata, f)
        # GraphBolt's change check: the MD5 of every file under DIR, keyed by its path as
        # os.walk(DIR) spells it (the features' MD5 was taken as they were written).
        hashes = {}
        for dirpath, _, filenames in os.walk(partial):
            for filename in filenames:
                local = os.path.relpath(os.path.join(dirpath, filename), partial)
                key = os.path.join(out, "preprocessed", local)
                hashes[key] = (feat_md5.hexdigest() if local == os.path.join("features", "feat.npy")
                               else md5_file(os.path.join(dirpath, filename)))
        with open(os.path.join(partial, "dataset_hash_value.txt"), "w") as f:
            f.write(json.dumps(hashes, indent=4))
        if os.path.exists(final):
            shutil.rmtree(final)
        os.replace(partial, final)
    except BaseException as e:
        shutil.rmtree(partial, ignore_errors=True)
        if created:
            shutil.rmtree(out, ignore_errors=True)
        if isinstance(e, ExportError):
            sys.exit(f"ooc_peers.py: {args.store}: {e}")
        if isinstance(e, OSError):
            sys.exit(f"ooc_peers.py: export to {out} failed: {e}")
        raise
    emit(dict(export="ok", source="store", nodes=n, directed_edges=num_edges, feature_dim=dim,
              classes=classes, index_dtype="int32" if narrow_ids else "int64", **sets,
              export_s=round(time.perf_counter() - t_all, 1), **phases,
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
            # Each step on stderr, so a run stopped early (a slow peer under a time limit)
            # still shows its rate so far.
            print(f"{framework} epoch {epoch} step {steps}: {time.perf_counter() - t:.1f} s, "
                  f"{seeds} seeds, {edges} sampled edges", file=sys.stderr, flush=True)
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


def preprocessed(data):
    """The folder's preprocessed/metadata.yaml (either export writes one), paths made whole."""
    import yaml
    path = os.path.join(data, "preprocessed", "metadata.yaml")
    if not os.path.exists(path):
        sys.exit(f"ooc_peers.py: no {path}: run `ooc_peers.py export` first")
    with open(path) as f:
        meta = yaml.safe_load(f)
    meta["graph_topology"]["path"] = os.path.join(data, meta["graph_topology"]["path"])
    for feature in meta["feature_data"]:
        feature["path"] = os.path.join(data, feature["path"])
    for set_ in meta["tasks"][0]["train_set"][0]["data"]:
        set_["path"] = os.path.join(data, set_["path"])
    return meta


def run_dgl(args):
    torch = setup(args)
    import numpy as np
    import dgl
    import dgl.graphbolt  # noqa: F401 (torch.load of the graph needs its classes)
    t0 = time.perf_counter()
    meta = preprocessed(args.data)
    # The CSC graph the export wrote for GraphBolt (column v: v's in-neighbours): DGL samples
    # in-edges from CSC, so no other format of the whole graph is built. In 64-bit ids: with a
    # 32-bit graph DGL 2.1's CPU COO-to-CSR of the sampled blocks fails with 2 threads (its check
    # thread_prefixsum[num_threads] == NNZ, at scale 0.01 in the second batch).
    csc = torch.load(meta["graph_topology"]["path"])
    indptr = csc.csc_indptr.to(torch.int64)
    indices = csc.indices
    del csc
    indices = indices.to(torch.int64)
    feature = next(f for f in meta["feature_data"] if f["name"] == "feat")
    feat = torch.from_numpy(np.load(feature["path"]))
    sets = {d["name"]: np.load(d["path"]) for d in meta["tasks"][0]["train_set"][0]["data"]}
    seeds = torch.from_numpy(sets["seed_nodes"]).to(torch.int64)
    labels = torch.from_numpy(sets["labels"]).to(torch.int64)
    n = feat.shape[0]
    g = dgl.graph(("csc", (indptr, indices, torch.tensor([], dtype=torch.int64))), num_nodes=n)
    del indptr, indices
    label = torch.full((n,), -1, dtype=torch.int64)
    label[seeds] = labels
    classes = int(meta["tasks"][0]["num_classes"])
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
    # force_preprocess=False: use the folder as preprocessed (GraphBolt's default check would
    # hash every file, the features included, and preprocess again on any change).
    dataset = gb.OnDiskDataset(args.data, force_preprocess=False).load()
    graph, features = dataset.graph, dataset.feature
    train_set = dataset.tasks[0].train_set
    classes = int(dataset.tasks[0].metadata["num_classes"])
    feature_dim = int(features.size("node", None, "feat")[0])
    load_s = time.perf_counter() - t0
    print(f"graphbolt: dataset loaded in {load_s:.1f} s", file=sys.stderr, flush=True)
    # The memory-mapped file: drop its pages so that the first epoch reads from disk, and check
    # that it is mapped, not read into memory.
    path = os.path.abspath(next(f["path"] for f in preprocessed(args.data)["feature_data"]
                                if f["name"] == "feat"))
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
        export_store(args) if args.store else export(args)
    elif args.cmd == "dgl":
        run_dgl(args)
    else:
        run_graphbolt(args)


if __name__ == "__main__":
    main()
