"""Temporal stores (format `tessel-temporal`, version 1) from a list of snapshots, and read back:
snapshot 0 whole, then each step's added and removed edges, as `tessel convert temporal` writes
them (docs/formats.md)."""

import os
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy

from . import _check
from ._atomic import AtomicOutput
from ._h5 import Writer
from .store import edges_of

FORMAT = "tessel-temporal"
VERSION = 1

_DESCRIPTION = (
    "Tessel temporal store: T snapshots of one node set. Snapshot 0 is /base (in-neighbor CSR "
    "with weights); snapshot t is snapshot t-1 minus /delta/removed_* and plus /delta/added_* "
    "rows [offsets[t], offsets[t+1]). /node/feat is [T*N, F], /node/target [T, N]; /split/* are "
    "snapshot ranges [begin, end).")


@dataclass
class Snapshot:
    """One snapshot: edges src -> dst with weights, node features and targets."""
    edge_index: numpy.ndarray   # int64 [2, E]: sources, destinations; ascending by (dst, src)
    edge_weight: numpy.ndarray  # float32 [E], >= 0
    x: numpy.ndarray            # float32 [N, F]
    y: numpy.ndarray            # float32 [N]: targets (class ids, -1 = unlabeled, if classes)


def _field(snapshot, names):
    """The first present field of `names` in a snapshot given as a dict, a tuple
    (edge_index, edge_weight, x, y) or an object with attributes (PyG Temporal's Data)."""
    order = ("edge_index", "edge_weight", "x", "y")
    for n in names:
        if isinstance(snapshot, dict):
            value = snapshot.get(n)
        elif isinstance(snapshot, (tuple, list)):
            value = snapshot[order.index(n)] if n in order and len(snapshot) == 4 else None
        else:
            value = getattr(snapshot, n, None)
        if value is not None:
            return value
    return None


def _canonical(src, dst, weight, num_nodes):
    """Edges sorted by (dst, src) with repeated pairs merged (their weights added), as keys
    dst * N + src, and the weights."""
    key = dst * num_nodes + src
    order = numpy.argsort(key, kind="stable")
    key, weight = key[order], weight[order]
    if len(key) == 0:
        return key, weight
    first = numpy.ones(len(key), dtype=bool)
    first[1:] = key[1:] != key[:-1]
    starts = numpy.flatnonzero(first)
    if len(starts) == len(key):
        return key, weight
    return key[starts], numpy.add.reduceat(weight, starts).astype(numpy.float32)


# The validation split taken by default from the end of the training span (as convert temporal).
DEFAULT_VALID_SHARE = 0.15
MIN_SPAN_FOR_VALID = 5


def _ranges(train, valid, test, train_frac, valid_frac, num_snapshots):
    T = num_snapshots
    if train is None and valid is None and test is None:
        frac = 0.0 if valid_frac is None else valid_frac
        if not (train_frac > 0 and frac >= 0 and train_frac + frac <= 1):
            raise ValueError(f"train_frac {train_frac} and valid_frac {valid_frac} must be "
                             "positive and sum to at most 1")
        n_train, n_valid = int(numpy.floor(train_frac * T)), int(numpy.floor(frac * T))
        if n_train < 1:
            raise ValueError(f"{T} snapshots leave no training snapshot at train_frac "
                             f"{train_frac}")
        # No valid_frac: the end of a long enough training span validates, as convert does.
        if valid_frac is None and n_train >= MIN_SPAN_FOR_VALID:
            n_valid = max(1, int(numpy.floor(DEFAULT_VALID_SHARE * n_train + 0.5)))
            n_train -= n_valid
        valid_end = min(T, n_train + n_valid)
        return (0, n_train), (n_train, valid_end), (valid_end, T)
    out = []
    for name, r in (("train", train), ("valid", valid), ("test", test)):
        r = (0, 0) if r is None else tuple(int(v) for v in r)
        if len(r) != 2 or not 0 <= r[0] <= r[1] <= T:
            raise ValueError(f"{name} = {r}: expected a snapshot range (begin, end) inside "
                             f"[0, {T}]")
        out.append(r)
    if out[0][1] <= out[0][0]:
        raise ValueError(f"train = {out[0]}: no training snapshots")
    return tuple(out)


def write_temporal_store(path, snapshots, *, num_classes=0, train=None, valid=None, test=None,
                         train_frac=0.8, valid_frac=None, name=None, full_snapshots=False):
    """Writes a temporal store that `tessel partition` and `tessel train --mode dynamic` read.

    snapshots: a sequence of T snapshots over the same N nodes, each an object with attributes
        (PyTorch Geometric Temporal's snapshots: edge_index, edge_attr or edge_weight, x, y), a
        dict with those keys, or a tuple (edge_index, edge_weight, x, y). edge_index is [2, E]
        (sources, destinations) or a scipy sparse matrix A with A[u, v] for each edge u -> v;
        edge weights are finite and >= 0 (default 1; an edge given twice has its weights added);
        x is [N, F] floating point; y is [N] (or [N, 1]): the target of each node.
    num_classes: 0 (the default) for regression targets; else y holds class ids in
        [0, num_classes), -1 = unlabeled.
    train, valid, test: snapshot ranges (begin, end); when none is given, the first
        floor(train_frac * T) snapshots train, the next floor(valid_frac * T) validate and the
        rest test, as `tessel convert temporal --train-frac --valid-frac`; with valid_frac None
        (the default) the last 15% of a training span of 5 or more snapshots (at least one)
        validate instead, as convert does without --valid-frac.
    full_snapshots: also store every snapshot whole (`--full-snapshots`).

    Every input is checked first (a bad one raises ValueError naming the snapshot, the array and
    the row, and nothing is written); the file is renamed into place when complete.
    """
    path = Path(os.fspath(path))
    snapshots = list(snapshots)
    T = len(snapshots)
    if T == 0:
        raise ValueError("snapshots: none given")
    num_classes = int(num_classes)
    if num_classes < 0:
        raise ValueError(f"num_classes = {num_classes}, expected 0 (regression) or a class count")
    keys, weights, feats, targets = [], [], [], []
    N = F = None
    for t, s in enumerate(snapshots):
        where = f"snapshots[{t}]"
        x = _field(s, ("x",))
        if x is None:
            raise ValueError(f"{where}: no node features (x)")
        x = _check.floats(x, f"{where}.x", ndim=2)
        if N is None:
            N, F = x.shape
            if N == 0 or F == 0:
                raise ValueError(f"{where}.x: shape {_check.shape_text(x.shape)}; a temporal store "
                                 "needs nodes and at least one feature")
            if N > 3037000499:
                raise ValueError(f"{where}.x: {N} nodes, more than this writer handles")
        elif x.shape != (N, F):
            raise ValueError(f"{where}.x: shape {_check.shape_text(x.shape)}, but snapshot 0 has "
                             f"[{N}, {F}] (every snapshot has the same nodes and features)")
        graph = _field(s, ("edge_index",))
        if graph is None:
            raise ValueError(f"{where}: no edges (edge_index)")
        src, dst = edges_of(graph, N, f"{where}.edge_index")
        w = _field(s, ("edge_weight", "edge_attr"))
        if w is None and hasattr(graph, "tocoo"):
            w = graph.tocoo().data
        if w is None:
            w = numpy.ones(len(src), dtype=numpy.float32)
        wname = f"{where}.edge_weight"
        w = _check.array(w, wname)
        if w.ndim == 2 and w.shape[1] == 1:
            w = w[:, 0]
        w = _check.floats(w, wname, ndim=1)
        if w.shape[0] != len(src):
            raise ValueError(f"{wname}: {w.shape[0]} weights for {len(src)} edges")
        if (w < 0).any():
            e = int(numpy.argmax(w < 0))
            raise ValueError(f"{wname}[{e}] = {w[e]}: edge weights must be >= 0")
        key, w = _canonical(src, dst, w, N)
        y = _field(s, ("y",))
        if y is None:
            raise ValueError(f"{where}: no targets (y)")
        y = _check.array(y, f"{where}.y")
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.dtype.kind in "iu":
            y = y.astype(numpy.float64)
        y = _check.floats(y, f"{where}.y", ndim=1)
        if y.shape[0] != N:
            raise ValueError(f"{where}.y: {y.shape[0]} targets for {N} nodes")
        if num_classes > 0:
            bad = (y != numpy.floor(y)) | (y < -1) | (y >= num_classes)
            if bad.any():
                v = int(numpy.argmax(bad))
                raise ValueError(f"{where}.y row {v} is {y[v]}, expected a class in "
                                 f"[0, {num_classes}) or -1")
        keys.append(key)
        weights.append(w)
        feats.append(x)
        targets.append(y)
    ranges = _ranges(train, valid, test, train_frac, valid_frac, T)
    if name is None:
        name = path.stem

    # Snapshot t's changes from t-1: removed are the edges gone or reweighted, added the edges
    # new or reweighted (with their new weights), each step ascending by (dst, src).
    add_key, add_w, rem_key = [], [], []
    add_off, rem_off = numpy.zeros(T + 1, "<i8"), numpy.zeros(T + 1, "<i8")
    for t in range(1, T):
        _, bi, ai = numpy.intersect1d(keys[t - 1], keys[t], assume_unique=True,
                                      return_indices=True)
        same = weights[t - 1][bi] == weights[t][ai]
        gone = numpy.ones(len(keys[t - 1]), dtype=bool)
        gone[bi[same]] = False
        new = numpy.ones(len(keys[t]), dtype=bool)
        new[ai[same]] = False
        rem_key.append(keys[t - 1][gone])
        add_key.append(keys[t][new])
        add_w.append(weights[t][new])
        add_off[t + 1] = add_off[t] + new.sum()
        rem_off[t + 1] = rem_off[t] + gone.sum()
    cat = lambda parts, dtype: (numpy.concatenate(parts).astype(dtype) if parts
                                else numpy.zeros(0, dtype))
    add_key, rem_key = cat(add_key, "<i8"), cat(rem_key, "<i8")
    add_w = cat(add_w, "<f4")

    def csr(key, n):
        dst, src = numpy.divmod(key, n)
        indptr = numpy.zeros(n + 1, dtype="<i8")
        numpy.cumsum(numpy.bincount(dst, minlength=n), out=indptr[1:])
        return indptr, src.astype("<i8")

    with AtomicOutput(path) as out:
        w = Writer(out.temp_path)
        try:
            for key, value in (("format", FORMAT), ("version", VERSION), ("name", str(name)),
                               ("num_nodes", N), ("num_snapshots", T), ("feature_dim", F),
                               ("num_classes", num_classes),
                               ("full_snapshots", 1 if full_snapshots else 0),
                               ("description", _DESCRIPTION)):
                w.attr("/", key, value)
            indptr, indices = csr(keys[0], N)
            w.group("/base")
            w.dataset("/base/indptr", indptr,
                      "snapshot 0: in-neighbor CSR row pointers, int64 [N+1]")
            w.dataset("/base/indices", indices, "snapshot 0: sources of each row, ascending, int64")
            w.dataset("/base/weight", weights[0].astype("<f4"), "snapshot 0: edge weights, float32")
            add_dst, add_src = numpy.divmod(add_key, N)
            rem_dst, rem_src = numpy.divmod(rem_key, N)
            w.group("/delta")
            w.dataset("/delta/added_offsets", add_off,
                      "int64 [T+1]: edges added at step t are rows [offsets[t], offsets[t+1])")
            w.dataset("/delta/added_dst", add_dst, "int64: destination of each added edge")
            w.dataset("/delta/added_src", add_src, "int64: source of each added edge")
            w.dataset("/delta/added_weight", add_w, "float32: weight of each added edge")
            w.dataset("/delta/removed_offsets", rem_off,
                      "int64 [T+1]: edges removed at step t are rows [offsets[t], offsets[t+1])")
            w.dataset("/delta/removed_dst", rem_dst, "int64: destination of each removed edge")
            w.dataset("/delta/removed_src", rem_src, "int64: source of each removed edge")
            if full_snapshots:
                parts = [csr(k, N) for k in keys]
                edge_off = numpy.zeros(T + 1, dtype="<i8")
                numpy.cumsum([len(k) for k in keys], out=edge_off[1:])
                w.group("/full")
                w.dataset("/full/edge_offsets", edge_off, "int64 [T+1]: snapshot t's edges")
                w.dataset("/full/indptr", numpy.stack([p[0] for p in parts]),
                          "int64 [T, N+1]: each snapshot's row pointers (relative to its first "
                          "edge)", chunk_rows=1)
                w.dataset("/full/indices", cat([p[1] for p in parts], "<i8"),
                          "int64: every snapshot's sources, snapshot by snapshot")
                w.dataset("/full/weight", cat(weights, "<f4"),
                          "float32: every snapshot's edge weights")
            w.group("/node")
            w.dataset("/node/feat", numpy.concatenate(feats),
                      "float32 [T*N, F]: row t*N+v holds node v's features at snapshot t",
                      chunk_rows=max(1, min(N, (4 << 20) // F)))
            w.dataset("/node/target", numpy.stack(targets).astype("<f4"),
                      "float32 [T, N]: node targets per snapshot (a class id or -1 when "
                      "num_classes > 0)", chunk_rows=1)
            w.group("/split")
            for which, r in zip(("train", "valid", "test"), ranges):
                w.dataset(f"/split/{which}", numpy.array(r, dtype="<i8"),
                          "snapshot range [begin, end), int64 [2]")
        finally:
            w.close()
    return path


@dataclass
class TemporalStore:
    """A temporal store read into numpy (read_temporal_store); its snapshots can be written
    again with write_temporal_store."""
    name: str
    num_nodes: int
    num_classes: int
    snapshots: list              # [Snapshot] * T
    train: tuple                 # snapshot ranges (begin, end)
    valid: tuple
    test: tuple
    orig_id: numpy.ndarray = None  # int64 [N] in a partitioned copy: each node's source id
    attrs: dict = field(default_factory=dict)


def read_temporal_store(path):
    """Reads a temporal store (`tessel convert temporal`, write_temporal_store, or a temporal
    partition's temporal.h5), rebuilding every snapshot from the base and the differences."""
    with h5py.File(path, "r") as f:
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        if attrs.get("format") != FORMAT:
            raise ValueError(f"{path}: format is {attrs.get('format')!r}, expected {FORMAT!r} "
                             "(a Tessel temporal store)")
        N, T = int(attrs["num_nodes"]), int(attrs["num_snapshots"])
        F = int(attrs["feature_dim"])
        indptr = f["base/indptr"][()]
        key = (numpy.repeat(numpy.arange(N, dtype="<i8"), numpy.diff(indptr)) * N +
               f["base/indices"][()])
        weight = f["base/weight"][()]
        d = {k: f["delta/" + k][()] for k in f["delta"]}
        feat, target = f["node/feat"][()], f["node/target"][()]
        ranges = [tuple(int(v) for v in f["split/" + s][()]) for s in ("train", "valid", "test")]
        orig_id = f["node/orig_id"][()] if "node/orig_id" in f else None
    snapshots = []
    for t in range(T):
        if t > 0:
            r0, r1 = d["removed_offsets"][t], d["removed_offsets"][t + 1]
            gone = d["removed_dst"][r0:r1] * N + d["removed_src"][r0:r1]
            kept = ~numpy.isin(key, gone, assume_unique=True)
            if kept.sum() != len(key) - len(gone):
                raise ValueError(f"{path}: step {t} removes edges snapshot {t - 1} lacks")
            a0, a1 = d["added_offsets"][t], d["added_offsets"][t + 1]
            key = numpy.concatenate([key[kept], d["added_dst"][a0:a1] * N + d["added_src"][a0:a1]])
            weight = numpy.concatenate([weight[kept], d["added_weight"][a0:a1]])
            order = numpy.argsort(key, kind="stable")
            key, weight = key[order], weight[order]
            if len(key) > 1 and not (key[1:] > key[:-1]).all():
                raise ValueError(f"{path}: step {t} adds edges snapshot {t - 1} already has")
        dst, src = numpy.divmod(key, N)
        snapshots.append(Snapshot(edge_index=numpy.stack([src, dst]), edge_weight=weight,
                                  x=feat[t * N:(t + 1) * N].reshape(N, F), y=target[t]))
    return TemporalStore(name=str(attrs.get("name", "")), num_nodes=N,
                         num_classes=int(attrs["num_classes"]), snapshots=snapshots,
                         train=ranges[0], valid=ranges[1], test=ranges[2], orig_id=orig_id,
                         attrs=attrs)
