"""Dataset stores (format `tessel-dataset`, version 1) from numpy, scipy, PyG and DGL graphs, and
read back into numpy. The layout is docs/formats.md's; a store written here holds the arrays
`tessel convert ogb` writes for the same graph."""

import os
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy

from . import _check, link as _link
from ._atomic import AtomicOutput
from ._h5 import Writer

FORMAT = "tessel-dataset"
VERSION = 1

# The texts of the C++ writer (src/datasets/store.cpp), so both writers' files say the same.
_ROOT_DESCRIPTION = (
    "Tessel dataset store: one graph with node features, class labels and a train/valid/test "
    "split. /graph/indptr and /graph/indices form the in-neighbor CSR (row v lists every u with "
    "an edge u -> v); /node/feat is float32 [num_nodes, feature_dim]; /node/label is int64 "
    "(-1 = unlabeled); /split/{train,valid,test} are int64 node ids. When directed is 0 each "
    "undirected edge may be stored once; symmetrize before training.")
_INDPTR_DESCRIPTION = (
    "In-neighbor CSR row pointers, int64 [num_nodes + 1]: the in-neighbors of node v are "
    "/graph/indices[indptr[v]:indptr[v+1]].")
_INDICES_DESCRIPTION = (
    "In-neighbor CSR column ids, int64 [num_edges]: the source u of every stored edge u -> v, "
    "grouped by destination v, ascending within each row.")
_FEAT_DESCRIPTION = (
    "Node features, float32 [num_nodes, feature_dim]; row v belongs to node v. Chunked by rows "
    "so a row range can be read alone.")
_LABEL_DESCRIPTION = "Class of each node, int64 [num_nodes], in [0, num_classes); -1 = unlabeled."
_SPLIT_WORDS = {"train": "training", "valid": "validation", "test": "test"}


def feature_chunk_rows(feature_dim):
    """Rows per chunk of /node/feat: about 1 MiB, as the C++ writer chooses."""
    return max(1, (1 << 20) // (max(feature_dim, 1) * 4))


def _is_sparse(graph):
    try:
        import scipy.sparse
    except ImportError:
        return False
    return scipy.sparse.issparse(graph)


def edges_of(graph, num_nodes, name):
    """(src, dst) int64 arrays of `graph`: an edge_index [2, E] (row 0 the sources, row 1 the
    destinations, as in PyG) or a scipy sparse matrix A with an entry A[u, v] for each edge
    u -> v (values ignored, every stored entry is an edge)."""
    if _is_sparse(graph):
        if graph.ndim != 2 or graph.shape[0] != graph.shape[1]:
            raise ValueError(f"{name}: a sparse matrix of shape {_check.shape_text(graph.shape)}, "
                             "expected a square adjacency matrix")
        if graph.shape[0] != num_nodes:
            raise ValueError(f"{name}: a {graph.shape[0]} x {graph.shape[1]} adjacency matrix, "
                             f"but the features have {num_nodes} rows")
        coo = graph.tocoo()
        return coo.row.astype("<i8"), coo.col.astype("<i8")
    edge_index = _check.integers(graph, name, ndim=2)
    if edge_index.shape[0] != 2:
        hint = " (transpose it: edge_index.T)" if edge_index.shape[1] == 2 else ""
        raise ValueError(f"{name}: shape {_check.shape_text(edge_index.shape)}, expected "
                         f"[2, num_edges] (sources in row 0, destinations in row 1){hint}")
    src, dst = edge_index[0], edge_index[1]
    for row, ids in ((0, src), (1, dst)):
        bad = (ids < 0) | (ids >= num_nodes)
        if bad.any():
            e = int(numpy.argmax(bad))
            raise ValueError(f"{name}: edge {e} (column {e}) is {src[e]} -> {dst[e]}: "
                             f"{ids[e]} is not a node id (x has {num_nodes} rows, ids 0 to "
                             f"{num_nodes - 1})")
    return src, dst


def in_neighbor_csr(src, dst, num_nodes):
    """The in-neighbor CSR of edges src[e] -> dst[e]: row v lists the sources of v's in-edges,
    ascending; duplicates and self-loops kept (as `tessel convert ogb` stores an edge list)."""
    order = numpy.lexsort((src, dst))
    indptr = numpy.zeros(num_nodes + 1, dtype="<i8")
    numpy.cumsum(numpy.bincount(dst, minlength=num_nodes), out=indptr[1:])
    return indptr, numpy.ascontiguousarray(src[order], dtype="<i8")


def symmetrized_edges(src, dst):
    """Both directions of every edge, without self-loops and duplicates, ascending by
    (dst, src): the training graph `tessel partition` builds (and `convert --symmetrize`)."""
    keep = src != dst
    s = numpy.concatenate([src[keep], dst[keep]])
    d = numpy.concatenate([dst[keep], src[keep]])
    order = numpy.lexsort((s, d))
    s, d = s[order], d[order]
    first = numpy.ones(len(s), dtype=bool)
    first[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1])
    return s[first], d[first]


def _labels(y, num_nodes, name):
    a = _check.array(y, name)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise ValueError(f"{name}: shape {_check.shape_text(a.shape)}, expected [{num_nodes}] "
                         "(one class per node; multi-label data is not supported)")
    if a.shape[0] != num_nodes:
        raise ValueError(f"{name}: {a.shape[0]} labels, but x has {num_nodes} rows")
    if a.dtype.kind == "f":
        unlabeled = numpy.isnan(a)
        whole = unlabeled | (numpy.isfinite(a) & (a == numpy.floor(a)))
        if not whole.all():
            i = int(numpy.argmin(whole))
            raise ValueError(f"{name}[{i}] = {a[i]} is not a class id (an integer; -1 or NaN = "
                             "unlabeled)")
        a = numpy.where(unlabeled, -1, a)
    elif a.dtype.kind not in "iu":
        raise ValueError(f"{name}: dtype {a.dtype}, expected integer class ids (-1 = unlabeled)")
    labels = a.astype("<i8")
    low = labels < -1
    if low.any():
        i = int(numpy.argmax(low))
        raise ValueError(f"{name}[{i}] = {labels[i]} is not a class id (-1 = unlabeled)")
    high = labels >= max(num_nodes, 1)
    if high.any():
        i = int(numpy.argmax(high))
        raise ValueError(f"{name}[{i}] = {labels[i]} is too large: class ids must be below the "
                         f"number of nodes ({num_nodes})")
    return labels


def _split_ids(value, name, num_nodes):
    """(ids, from_mask): a boolean mask over the nodes, or node ids (kept in their order)."""
    if value is None:
        return numpy.zeros(0, dtype="<i8"), False
    a = _check.array(value, name)
    if a.dtype == bool:
        if a.shape != (num_nodes,):
            hint = (" (several splits: choose one column, e.g. mask[:, 0])" if a.ndim == 2 and
                    a.shape[0] == num_nodes else "")
            raise ValueError(f"{name}: a boolean mask of shape {_check.shape_text(a.shape)}, "
                             f"expected [{num_nodes}] (one entry per node){hint}")
        return numpy.flatnonzero(a).astype("<i8"), True
    ids = _check.integers(a, name, ndim=1)
    _check.node_ids(ids, name, num_nodes)
    return ids, False


def _check_disjoint(splits, num_nodes):
    owner = numpy.full(num_nodes, -1, dtype=numpy.int8)
    for s, (name, ids, from_mask) in enumerate(splits):
        where = (lambda i: f"{name} row {ids[i]}") if from_mask else (
            lambda i: f"{name}[{i}] = {ids[i]}")
        # Repeats inside one split first, then nodes some earlier split already holds.
        _, first = numpy.unique(ids, return_index=True)
        if len(first) != len(ids):
            repeated = numpy.ones(len(ids), dtype=bool)
            repeated[first] = False
            i = int(numpy.argmax(repeated))
            hint = " (a 0/1 mask? pass it as a boolean array)" if len(ids) == num_nodes else ""
            raise ValueError(f"{where(i)}: node {ids[i]} is already in {name}{hint}")
        taken = owner[ids] >= 0
        if taken.any():
            i = int(numpy.argmax(taken))
            raise ValueError(f"{where(i)}: node {ids[i]} is already in "
                             f"{splits[owner[ids[i]]][0]}")
        owner[ids] = s


def _masks_as_bool(value, num_nodes, name):
    """A split given as a 0/1 integer mask (older DGL datasets) as a boolean one."""
    if value is None:
        return None
    a = _check.array(value, name)
    if a.dtype.kind in "iu" and a.shape == (num_nodes,) and numpy.isin(a, (0, 1)).all():
        return a.astype(bool)
    return value


def _write(path, graph, x, y, splits, num_classes, name, directed, symmetrize, names,
           link=None, edge_split=None, seed=0):
    path = Path(os.fspath(path))
    feat = _check.floats(x, names["x"], ndim=2)
    n, f = feat.shape
    src, dst = edges_of(graph, n, names["graph"])
    if edge_split is not None:
        if link is not None:
            raise ValueError("edge_split and link: give one (edge_split makes the link splits)")
        if directed:
            raise ValueError("edge_split splits undirected edges: a directed graph is refused "
                             "(pass symmetrize=True, as `convert --symmetrize --edge-split`)")
        link, src, dst = _link.random_split(src, dst, n, edge_split, seed)
    if y is None and link is not None:
        y = numpy.full(n, -1, dtype="<i8")  # a link store: no node classes
    labels = _labels(y, n, names["y"])
    split_ids = []
    for which, value in zip(("train", "valid", "test"), splits):
        ids, from_mask = _split_ids(value, names[which], n)
        split_ids.append((names[which], ids, from_mask))
    _check_disjoint(split_ids, n)
    top = int(labels.max()) + 1 if n else 0
    if num_classes is None:
        num_classes = top
    elif not isinstance(num_classes, (int, numpy.integer)) or isinstance(num_classes, bool):
        raise ValueError(f"num_classes = {num_classes!r}, expected an integer")
    elif num_classes < top or num_classes > max(n, 1):
        raise ValueError(f"num_classes = {num_classes}, but the labels need at least {top} "
                         f"classes and there are {n} nodes (at most {max(n, 1)} classes)")
    if symmetrize:
        src, dst = symmetrized_edges(src, dst)
        directed = False
    link_arrays = _link.check_link(link, n, src, dst, directed) if link is not None else None
    indptr, indices = in_neighbor_csr(src, dst, n)
    if name is None:
        name = path.stem

    # Everything is checked: only now does a file appear (as its temporary, renamed at the end).
    with AtomicOutput(path) as out:
        w = Writer(out.temp_path)
        try:
            w.group("/graph")
            w.dataset("/graph/indptr", indptr, _INDPTR_DESCRIPTION)
            w.dataset("/graph/indices", indices, _INDICES_DESCRIPTION)
            w.dataset("/node/label", labels, _LABEL_DESCRIPTION)
            w.dataset("/node/feat", feat, _FEAT_DESCRIPTION, chunk_rows=feature_chunk_rows(f))
            for which, (_, ids, _) in zip(("train", "valid", "test"), split_ids):
                w.dataset(f"/split/{which}", ids,
                          f"Node ids of the {_SPLIT_WORDS[which]} set, int64.")
            if link_arrays is not None:
                _link.write_link(w, *link_arrays)
            for key, value in (("format", FORMAT), ("version", VERSION), ("name", str(name)),
                               ("num_nodes", n), ("num_edges", len(indices)),
                               ("num_classes", int(num_classes)), ("feature_dim", f),
                               ("directed", 1 if directed else 0),
                               ("description", _ROOT_DESCRIPTION)):
                w.attr("/", key, value)
        finally:
            w.close()
    return path


def write_store(path, graph, x, y, train=None, valid=None, test=None, *, name=None,
                num_classes=None, directed=False, symmetrize=False, link=None, edge_split=None,
                seed=0):
    """Writes a dataset store that `tessel info`, `tessel partition` and `tessel train` read.

    graph: the edges, as an edge_index [2, E] of node ids (row 0 the sources u, row 1 the
        destinations v of edges u -> v, as PyG's) or a scipy sparse matrix A [N, N] with an entry
        A[u, v] for each edge u -> v (every stored entry is an edge; values are ignored).
    x: features [N, F], floating point (stored as float32), all finite. N is its row count.
    y: class per node [N] (or [N, 1]): integers, -1 = unlabeled; floats must be whole or NaN
        (= unlabeled).
    train, valid, test: each a boolean mask [N] or node ids (kept in their order); None = empty.
        No node may be in two splits, or twice in one.
    name: the dataset's name (default: the file name without its extension).
    num_classes: default max(y) + 1, as `tessel convert ogb`.
    directed: False (the default, as `convert ogb`): the edges are undirected and each may be
        stored once; training symmetrizes them. True: they are directed (`convert --directed`).
    symmetrize: store both directions of every edge without self-loops and duplicates
        (`convert --symmetrize`; the store is then undirected).
    link: edge splits for link prediction, a dict with the /link group's names
        (docs/formats.md): train_pos, valid_pos, test_pos int [n, 2]; valid_neg and test_neg
        [m, 2] (pair negatives) or valid_neg_dst and test_neg_dst [n, K] (per-source
        negatives); optional {train,valid,test}_weight and _year [n]; attributes source
        ('random', the default, or 'ogb'), metric ('auc', 'mrr' or 'hits@K'; default mrr with
        per-source negatives, else auc), seed, fractions. graph is then the message-passing
        graph: unless source is 'ogb', no valid or test positive may be one of its edges (in
        either direction when undirected). y may be None (every node unlabeled) and x may
        have 0 columns.
    edge_split: (train, valid, test) percentages, e.g. (85, 5, 10): split graph's edges at
        random for link prediction, as `tessel convert --edge-split` does (every undirected
        edge once, permuted with `seed`; validation and test negatives drawn once and stored;
        /graph then holds the training edges, y and the node splits are kept). The same
        procedure as convert, not the same draws. Not with link or directed=True.
    seed: the edge split's seed (a whole number >= 0).

    Edges are stored as given otherwise (duplicates and self-loops kept, rows ascending), so the
    edge list of an OGB folder gives the store `tessel convert ogb` writes from it. Every input
    is checked first: a bad one raises ValueError naming the array and the row, and nothing is
    written. The file is written under a temporary name and renamed into place when complete.
    Returns the path written.
    """
    names = {"x": "x", "y": "y", "graph": "adjacency" if _is_sparse(graph) else "edge_index",
             "train": "train", "valid": "valid", "test": "test"}
    return _write(path, graph, x, y, (train, valid, test), num_classes, name, directed,
                  symmetrize, names, link, edge_split, seed)


def _attr(obj, names):
    for n in names:
        value = getattr(obj, n, None)
        if value is not None:
            return value, n
    return None, names[0]


def from_pyg(data, path, *, name=None, num_classes=None, directed=False, symmetrize=False,
             train=None, valid=None, test=None):
    """Writes a `torch_geometric.data.Data` (or any object with the same attributes) as a store.

    Reads data.edge_index, data.x, data.y and the masks data.train_mask, data.val_mask and
    data.test_mask (absent masks give empty splits); train, valid and test, when given, replace
    the masks (masks or ids, as in write_store). Edge weights and edge features are not stored.
    The other arguments are write_store's; errors name the attribute (`data.x row 5 ...`).
    """
    edge_index = getattr(data, "edge_index", None)
    if edge_index is None:
        raise ValueError("from_pyg: data has no edge_index (a HeteroData? Tessel trains "
                         "homogeneous graphs: convert it with data.to_homogeneous())")
    x = getattr(data, "x", None)
    if x is None:
        raise ValueError("from_pyg: data has no node features (data.x is None)")
    n = _check.array(x, "data.x").shape[0]
    names = {"x": "data.x", "y": "data.y", "graph": "data.edge_index"}
    splits = []
    for which, given, attrs in (("train", train, ("train_mask",)),
                                ("valid", valid, ("val_mask", "valid_mask")),
                                ("test", test, ("test_mask",))):
        if given is not None:
            splits.append(given)
            names[which] = which
        else:
            mask, attr = _attr(data, attrs)
            names[which] = f"data.{attr}"
            splits.append(_masks_as_bool(mask, n, names[which]))
    y = getattr(data, "y", None)
    if y is None:
        raise ValueError("from_pyg: data has no labels (data.y is None)")
    return _write(path, edge_index, x, y, splits, num_classes, name, directed, symmetrize, names)


def from_dgl(graph, path, *, name=None, num_classes=None, directed=False, symmetrize=False,
             feat="feat", label="label", train="train_mask", valid="val_mask",
             test="test_mask"):
    """Writes a homogeneous `dgl.DGLGraph` as a store.

    Edges come from graph.edges(); features, labels and split masks from graph.ndata under the
    keys `feat`, `label`, `train`, `valid` and `test` (DGL's built-in datasets' names by default;
    a key the graph lacks gives an empty split). The other arguments are write_store's.
    """
    if len(getattr(graph, "ntypes", ["_N"])) != 1 or len(getattr(graph, "etypes", ["_E"])) != 1:
        raise ValueError(f"from_dgl: a heterograph ({len(graph.ntypes)} node types, "
                         f"{len(graph.etypes)} edge types); Tessel trains homogeneous graphs "
                         "(dgl.to_homogeneous)")
    n = int(graph.num_nodes())
    src, dst = graph.edges()
    edge_index = numpy.stack([_check.array(src, "graph.edges()[0]"),
                              _check.array(dst, "graph.edges()[1]")])
    ndata = graph.ndata
    for key in (feat, label):
        if key not in ndata:
            raise ValueError(f"from_dgl: graph.ndata has no {key!r} (keys: "
                             f"{', '.join(sorted(ndata.keys())) or 'none'})")
    names = {"x": f"graph.ndata[{feat!r}]", "y": f"graph.ndata[{label!r}]",
             "graph": "graph.edges()"}
    splits = []
    for which, key in (("train", train), ("valid", valid), ("test", test)):
        names[which] = f"graph.ndata[{key!r}]"
        splits.append(_masks_as_bool(ndata[key], n, names[which]) if key in ndata else None)
    x = ndata[feat]
    if _check.array(x, names["x"]).shape[0] != n:
        raise ValueError(f"{names['x']}: {_check.array(x, names['x']).shape[0]} rows, but the "
                         f"graph has {n} nodes")
    return _write(path, edge_index, x, ndata[label], splits, num_classes, name, directed,
                  symmetrize, names)


@dataclass
class Store:
    """A dataset store read into numpy (read_store)."""
    name: str
    num_nodes: int
    num_classes: int
    directed: bool
    indptr: numpy.ndarray   # int64 [N + 1]: in-neighbor CSR row pointers
    indices: numpy.ndarray  # int64 [E]: the sources of each row's edges, ascending
    x: numpy.ndarray        # float32 [N, F]
    y: numpy.ndarray        # int64 [N], -1 = unlabeled
    train: numpy.ndarray    # int64 node ids
    valid: numpy.ndarray
    test: numpy.ndarray
    attrs: dict = field(default_factory=dict)
    link: dict = None       # the /link group (arrays and attributes), None in a node store

    def edge_index(self):
        """The stored edges as an int64 edge_index [2, E] (sources, destinations), ordered by
        destination, then source."""
        dst = numpy.repeat(numpy.arange(self.num_nodes, dtype="<i8"), numpy.diff(self.indptr))
        return numpy.stack([self.indices, dst])

    def adjacency(self):
        """The stored edges as a scipy CSR matrix A [N, N] with A[u, v] = 1 for each edge u -> v
        (repeated edges add up)."""
        import scipy.sparse
        src, dst = self.edge_index()
        return scipy.sparse.csr_matrix((numpy.ones(len(src), dtype=numpy.float32), (src, dst)),
                                       shape=(self.num_nodes, self.num_nodes))


def _features(dataset):
    """/node/feat as float32: a float16 store (`tessel convert --feature-dtype float16`) reads as
    numpy float16 and a bfloat16 one as float32 through h5py; both widen exactly."""
    return numpy.asarray(dataset[()], dtype=numpy.float32)


def read_store(path):
    """Reads a dataset store (written by `tessel convert` or write_store) into numpy."""
    with h5py.File(path, "r") as f:
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        if attrs.get("format") != FORMAT:
            raise ValueError(f"{path}: format is {attrs.get('format')!r}, expected {FORMAT!r} "
                             "(a Tessel dataset store)")
        if not 1 <= int(attrs.get("version", 0)) <= VERSION:
            raise ValueError(f"{path}: store version {attrs.get('version')} is not supported "
                             f"(this package reads version {VERSION})")
        return Store(name=str(attrs.get("name", "")), num_nodes=int(attrs["num_nodes"]),
                     num_classes=int(attrs["num_classes"]), directed=bool(attrs["directed"]),
                     indptr=f["graph/indptr"][()], indices=f["graph/indices"][()],
                     x=_features(f["node/feat"]), y=f["node/label"][()],
                     train=f["split/train"][()],
                     valid=f["split/valid"][()], test=f["split/test"][()], attrs=attrs,
                     link=_link.read_link(f))
