"""Tessel's outputs into numpy: predictions, embeddings, metrics and partition folders."""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy


def _attrs(f):
    return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}


def _expect_format(path, attrs, formats):
    if attrs.get("format") not in formats:
        raise ValueError(f"{path}: format is {attrs.get('format')!r}, expected "
                         f"{' or '.join(repr(f) for f in formats)}")


def _by_node_id(path, node_id, *arrays):
    """The rows of `arrays` reordered so that row v is node v; node_id must be a permutation
    of 0..N-1 (every node of the dataset once)."""
    n = len(node_id)
    if not numpy.array_equal(node_id, numpy.arange(n)):
        order = numpy.argsort(node_id, kind="stable")
        if not numpy.array_equal(node_id[order], numpy.arange(n)):
            raise ValueError(f"{path}: /node_id does not hold every node id 0..{n - 1} once")
        arrays = tuple(a[order] for a in arrays)
    return arrays


@dataclass
class Predictions:
    """Predictions of every node (read_predictions). Static modes: row v is node v of the
    source dataset; dynamic mode: [T, N, ...], snapshot t, node v."""
    logits: numpy.ndarray      # float32 [N, C]; dynamic: [T, N, out] (regression: the value)
    predicted: numpy.ndarray   # int64 [N] (argmax class); dynamic: [T, N] argmax, or None for
                               # regression and link prediction
    attrs: dict = field(default_factory=dict)


@dataclass
class EdgeScores:
    """Scores of edges (read_predictions of a link-prediction file, format
    `tessel-link-predictions`): the decoder's raw output, higher = more likely an edge."""
    pos_edge: numpy.ndarray    # int64 [n, 2] (src, dst): the positives of the split, or the
                               # pairs given to `tessel predict --edges`
    pos_score: numpy.ndarray   # float32 [n]
    neg_edge: numpy.ndarray    # int64 [m, 2] pair negatives, or None
    neg_dst: numpy.ndarray     # int64 [n, K] per-source negatives, or None
    neg_score: numpy.ndarray   # float32 [m] or [n, K], or None
    attrs: dict = field(default_factory=dict)


def _read_edge_scores(path, f, attrs):
    def get(name):
        return f[name][()] if name in f else None

    pos_edge, pos_score = get("pos_edge"), get("pos_score")
    if pos_edge is None or pos_score is None:
        raise ValueError(f"{path}: no /pos_edge and /pos_score (a link-prediction file holds "
                         "both)")
    if pos_edge.ndim != 2 or pos_edge.shape[1] != 2 or pos_score.shape != (len(pos_edge),):
        raise ValueError(f"{path}: /pos_edge is {list(pos_edge.shape)} and /pos_score "
                         f"{list(pos_score.shape)}, expected [n, 2] and [n]")
    neg_edge, neg_dst, neg_score = get("neg_edge"), get("neg_dst"), get("neg_score")
    if neg_edge is not None and neg_dst is not None:
        raise ValueError(f"{path}: holds both /neg_edge and /neg_dst, expected one kind")
    if neg_score is not None:
        expect = (None if neg_edge is None and neg_dst is None else
                  (len(neg_edge),) if neg_edge is not None else neg_dst.shape)
        if neg_score.shape != expect:
            raise ValueError(f"{path}: /neg_score is {list(neg_score.shape)}, expected "
                             f"{list(expect) if expect else 'no /neg_score without negatives'}")
    elif neg_edge is not None or neg_dst is not None:
        raise ValueError(f"{path}: negatives without /neg_score")
    return EdgeScores(pos_edge=pos_edge, pos_score=pos_score, neg_edge=neg_edge,
                      neg_dst=neg_dst, neg_score=neg_score, attrs=attrs)


def read_predictions(path):
    """Reads a `--predictions` file of `tessel train` or `tessel predict`: node predictions
    (Predictions), or edge scores (EdgeScores) for link prediction."""
    with h5py.File(path, "r") as f:
        attrs = _attrs(f)
        _expect_format(path, attrs, ("tessel-predictions", "tessel-temporal-predictions",
                                     "tessel-link-predictions"))
        if attrs["format"] == "tessel-link-predictions":
            return _read_edge_scores(path, f, attrs)
        if attrs["format"] == "tessel-predictions":
            logits, predicted = _by_node_id(path, f["node_id"][()], f["logits"][()],
                                            f["predicted"][()])
            return Predictions(logits=logits, predicted=predicted, attrs=attrs)
        n, t = int(attrs["num_nodes"]), int(attrs["num_snapshots"])
        values = f["prediction"][()].reshape(t, n, -1)
    classes = attrs.get("task") == "node-classification"
    return Predictions(logits=values, predicted=values.argmax(axis=2) if classes else None,
                       attrs=attrs)


def read_embeddings(path):
    """Reads an `--embeddings` file: float32 [N, dim] with row v the embedding of node v of the
    source dataset (dynamic mode: [T, N, H], snapshot t, node v)."""
    with h5py.File(path, "r") as f:
        attrs = _attrs(f)
        _expect_format(path, attrs, ("tessel-embeddings", "tessel-temporal-embeddings"))
        if attrs["format"] == "tessel-embeddings":
            (embedding,) = _by_node_id(path, f["node_id"][()], f["embedding"][()])
            return embedding
        n, t = int(attrs["num_nodes"]), int(attrs["num_snapshots"])
        return f["embedding"][()].reshape(t, n, -1)


def _metric_lines(path):
    records, summary = [], None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path} line {number}: not JSON ({e.msg})") from None
            if record.get("summary"):
                summary = record
            else:
                records.append(record)
    return records, summary


def read_metrics(path, frame=None):
    """The epoch records of a `--metrics` file (one per epoch; the summary line is left out:
    read_summary). frame=None: a pandas DataFrame when pandas is importable (nested fields such
    as `phases` become columns `phases.dense`, ...), else a list of dicts; frame=False: always
    the list; frame=True: always a DataFrame (ImportError without pandas)."""
    records, _ = _metric_lines(path)
    if frame is False:
        return records
    try:
        import pandas
    except ImportError:
        if frame:
            raise
        return records
    return pandas.json_normalize(records)


def read_summary(path):
    """The summary line of a `--metrics` file as a dict (best_valid_acc, test_acc, best_epoch,
    ...), or None when the run wrote none (it stopped early)."""
    return _metric_lines(path)[1]


@dataclass
class Partition:
    """A partition folder in source node ids (read_partition).

    Static partitions: part_of[v] is the part that owns node v; owned[p] the nodes part p owns
    (in its local order) and halo[p] the nodes it holds as halo (non-owned in-neighbours of its
    nodes), with halo_owner[p] their owners; degree[v] is v's in-degree in the training graph.
    Temporal partitions have part_of and owned only (their halos differ per snapshot: None).
    """
    num_parts: int
    part_of: numpy.ndarray           # int32 [N]
    owned: list                      # [int64 array] * num_parts
    halo: list = None                # [int64 array] * num_parts
    halo_owner: list = None          # [int32 array] * num_parts
    degree: numpy.ndarray = None     # int64 [N]
    manifest: dict = field(default_factory=dict)
    _edges: list = field(default=None, repr=False)

    def edge_index(self):
        """The training graph the parts hold (symmetrized unless partitioned with
        --no-symmetrize), as an int64 edge_index [2, E] of source ids, ascending by (dst, src)."""
        if self._edges is None:
            raise ValueError("a temporal partition holds no static training graph")
        src = numpy.concatenate([e[0] for e in self._edges])
        dst = numpy.concatenate([e[1] for e in self._edges])
        order = numpy.lexsort((src, dst))
        return numpy.stack([src[order], dst[order]])


def read_partition(path):
    """Reads a partition folder made by `tessel partition` (static or temporal)."""
    path = Path(os.fspath(path))
    try:
        manifest = json.loads((path / "partition.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no partition.json (not a partition folder made by "
                         "`tessel partition`)") from None
    k, n = int(manifest["num_parts"]), int(manifest["num_nodes"])
    if manifest.get("format") == "tessel-temporal-partition":
        offsets = numpy.asarray(manifest["vertex_offsets"], dtype=numpy.int64)
        with h5py.File(path / manifest["store"], "r") as f:
            orig = f["node/orig_id"][()] if "node/orig_id" in f else numpy.arange(n)
        part_of = numpy.empty(n, dtype=numpy.int32)
        part_of[orig] = numpy.repeat(numpy.arange(k, dtype=numpy.int32), numpy.diff(offsets))
        return Partition(num_parts=k, part_of=part_of,
                         owned=[orig[offsets[p]:offsets[p + 1]] for p in range(k)],
                         manifest=manifest)
    if manifest.get("format") != "tessel-partition":
        raise ValueError(f"{path}/partition.json: format is {manifest.get('format')!r}, expected "
                         "'tessel-partition' or 'tessel-temporal-partition'")
    part_of = numpy.full(n, -1, dtype=numpy.int32)
    degree = numpy.zeros(n, dtype=numpy.int64)
    owned, halo, halo_owner, edges = [], [], [], []
    for p, entry in enumerate(manifest["parts"]):
        with h5py.File(path / entry["file"], "r") as f:
            num_owned = int(f.attrs["num_owned"])
            orig = f["nodes/orig_id"][()]
            indptr, indices = f["graph/indptr"][()], f["graph/indices"][()]
            mine = orig[:num_owned]
            if (part_of[mine] >= 0).any():
                v = int(mine[numpy.argmax(part_of[mine] >= 0)])
                raise ValueError(f"{path}: node {v} is owned by parts {part_of[v]} and {p}")
            part_of[mine] = p
            degree[mine] = f["nodes/degree"][:num_owned]
            owned.append(mine)
            halo.append(orig[num_owned:])
            halo_owner.append(f["halo/owner"][()])
            edges.append((orig[indices], numpy.repeat(mine, numpy.diff(indptr))))
    if (part_of < 0).any():
        raise ValueError(f"{path}: node {int(numpy.argmax(part_of < 0))} is owned by no part")
    return Partition(num_parts=k, part_of=part_of, owned=owned, halo=halo,
                     halo_owner=halo_owner, degree=degree, manifest=manifest, _edges=edges)
