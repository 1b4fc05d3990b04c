"""Link-prediction splits of a store (the `/link` group, docs/formats.md) from numpy, checked as
the C++ reader checks them, and read back."""

import numpy

from . import _check

# The texts of the C++ writer (src/datasets/ogb_link.cpp), so both writers' files say the same.
_LINK_DESCRIPTION = (
    "Link prediction splits. {train,valid,test}_pos: int64 [n, 2] positive edges (src, dst). "
    "valid/test negatives: {valid,test}_neg int64 [m, 2] pairs, or {valid,test}_neg_dst int64 "
    "[n, K] negative destinations of the source of each positive. Optional {split}_weight float32 "
    "[n] and {split}_year int64 [n], aligned with the _pos rows. /graph is the message-passing "
    "graph (for OGB folders: the training edges).")
_WORDS = {"train": "training", "valid": "validation", "test": "test"}
_SPLITS = ("train", "valid", "test")
ATTRS = ("source", "metric", "seed", "fractions")
ARRAYS = tuple(f"{s}_pos" for s in _SPLITS) + ("valid_neg", "test_neg", "valid_neg_dst",
                                               "test_neg_dst") + tuple(
    f"{s}_{what}" for s in _SPLITS for what in ("weight", "year"))


def _description(key):
    split, _, what = key.partition("_")
    if what == "pos":
        return f"Positive {_WORDS[split]} edges, int64 [n, 2]: row = (src, dst)."
    if what == "neg":
        return f"Fixed negative {_WORDS[split]} edges, int64 [m, 2]: row = (src, dst)."
    if what == "neg_dst":
        return (f"Negative destinations, int64 [n, K]: row i holds K nodes scored against the "
                f"source of {split}_pos row i.")
    if what == "weight":
        return f"Weight of each {split}_pos edge, float32 [n]."
    return f"Year of each {split}_pos edge, int64 [n]."


def _metric_ok(metric):
    if metric in ("auc", "mrr"):
        return True
    k = metric[5:] if metric.startswith("hits@") else ""
    return k.isdigit() and 0 < len(k) < 7 and int(k) > 0


def _edge_keys(pairs, num_nodes):
    return pairs[:, 0] * numpy.int64(num_nodes) + pairs[:, 1]


def _fractions(edge_split):
    try:
        parts = [int(f) for f in edge_split]
        whole = all(float(f) == int(f) for f in edge_split)
    except (TypeError, ValueError):
        parts, whole = [], False
    if len(parts) != 3 or not whole or min(parts) < 0 or sum(parts) != 100 or parts[0] == 0:
        raise ValueError(f"edge_split = {edge_split!r}, expected three whole percentages "
                         "(train, valid, test) summing to 100, train above 0 (e.g. (85, 5, 10))")
    return parts


def random_split(src, dst, num_nodes, edge_split, seed):
    """A random edge split as `tessel convert --edge-split` makes one (docs/formats.md): every
    undirected edge once (self-loops and duplicates dropped), permuted with `seed`;
    floor(E x valid / 100) validation and floor(E x test / 100) test edges cut off, the rest
    training (PyG's RandomLinkSplit); as many validation and test negatives as positives, uniform
    pairs u != v that are no edge of the whole graph and not drawn twice. The same procedure as
    the C++ writer, not the same draws (numpy's generator). Returns (link dict, src, dst of the
    message-passing graph: the training edges)."""
    parts = _fractions(edge_split)
    if isinstance(seed, bool) or not isinstance(seed, (int, numpy.integer)) or seed < 0:
        raise ValueError(f"seed = {seed!r}, expected a whole number >= 0")
    n = numpy.int64(num_nodes)
    src = numpy.asarray(src, dtype=numpy.int64)
    dst = numpy.asarray(dst, dtype=numpy.int64)
    keep = src != dst
    keys = numpy.unique(numpy.minimum(src, dst)[keep] * n + numpy.maximum(src, dst)[keep])
    rng = numpy.random.default_rng(int(seed))
    keys = keys[rng.permutation(len(keys))]
    total = len(keys)
    n_valid, n_test = total * parts[1] // 100, total * parts[2] // 100
    if total - n_valid - n_test == 0:
        raise ValueError(f"edge_split {parts}: the graph's {total} undirected edges leave no "
                         "training edge")
    valid, test, train = (keys[:n_valid], keys[n_valid:n_valid + n_test],
                          keys[n_valid + n_test:])
    need = n_valid + n_test
    if need > int(n) * (int(n) - 1) // 2 - total:
        raise ValueError(f"edge_split {parts}: {need} negative pairs needed, but the graph has "
                         f"only {int(n) * (int(n) - 1) // 2 - total} non-edges")
    edge_set = numpy.sort(keys)
    negatives, seen = [], set()
    while len(negatives) < need:
        draws = rng.integers(0, n, size=(max(2 * (need - len(negatives)), 64), 2), dtype=numpy.int64)
        draws = draws[draws[:, 0] != draws[:, 1]]
        k = numpy.minimum(draws[:, 0], draws[:, 1]) * n + numpy.maximum(draws[:, 0], draws[:, 1])
        at = numpy.searchsorted(edge_set, k)
        is_edge = (at < len(edge_set)) & (edge_set[numpy.minimum(at, len(edge_set) - 1)] == k)
        for pair, key, edge in zip(draws, k, is_edge):
            if edge or int(key) in seen:
                continue
            seen.add(int(key))
            negatives.append(pair)
            if len(negatives) == need:
                break
    neg = numpy.array(negatives, dtype=numpy.int64).reshape(-1, 2)

    def pairs(k):
        return numpy.stack([k // n, k % n], axis=1).astype(numpy.int64)

    link = {"train_pos": pairs(train), "valid_pos": pairs(valid), "test_pos": pairs(test),
            "valid_neg": neg[:n_valid], "test_neg": neg[n_valid:], "source": "random",
            "metric": "auc", "seed": int(seed), "fractions": ",".join(str(f) for f in parts)}
    return link, train // n, train % n


def check_link(link, num_nodes, src, dst, directed):
    """The `link` dict of write_store, checked and converted: (arrays, attrs). Raises ValueError
    naming the key and row of the first problem."""
    if not isinstance(link, dict):
        raise ValueError(f"link: a {type(link).__name__}, expected a dict of the /link arrays "
                         "(train_pos, valid_pos, test_pos, valid_neg or valid_neg_dst, ...)")
    unknown = sorted(set(link) - set(ARRAYS) - set(ATTRS))
    if unknown:
        raise ValueError(f"link: unknown key {unknown[0]!r} (expected {', '.join(ARRAYS)}; "
                         f"attributes {', '.join(ATTRS)})")
    arrays = {}
    for split in _SPLITS:
        key = f"{split}_pos"
        if key not in link:
            raise ValueError(f"link: no {key!r} (train_pos, valid_pos and test_pos are required; "
                             "an empty split is an array of shape [0, 2])")
        pos = _check.integers(link[key], f"link[{key!r}]", ndim=2)
        if pos.shape[1] != 2:
            raise ValueError(f"link[{key!r}]: shape {_check.shape_text(pos.shape)}, expected "
                             "[n, 2] (one edge per row)")
        arrays[key] = pos
    kinds = []
    for split in ("valid", "test"):
        pair, dst_key = f"{split}_neg", f"{split}_neg_dst"
        n = len(arrays[f"{split}_pos"])
        if (pair in link) == (dst_key in link):
            raise ValueError(f"link: {split} needs exactly one kind of negatives: {pair!r} "
                             f"[m, 2] or {dst_key!r} [{n}, K]")
        if pair in link:
            neg = _check.integers(link[pair], f"link[{pair!r}]", ndim=2)
            if neg.shape[1] != 2:
                raise ValueError(f"link[{pair!r}]: shape {_check.shape_text(neg.shape)}, "
                                 "expected [m, 2]")
            arrays[pair] = neg
            kinds.append("pair")
        else:
            neg = _check.integers(link[dst_key], f"link[{dst_key!r}]", ndim=2)
            if neg.shape[0] != n or neg.shape[1] < 1:
                raise ValueError(f"link[{dst_key!r}]: shape {_check.shape_text(neg.shape)}, "
                                 f"expected [{n}, K] (K >= 1 negatives per {split} positive)")
            arrays[dst_key] = neg
            kinds.append("dst")
    if kinds[0] != kinds[1]:
        raise ValueError("link: valid and test hold different kinds of negatives (valid_neg "
                         "with test_neg_dst, or the reverse); expected the same kind")
    if kinds[0] == "dst" and arrays["valid_neg_dst"].shape[1] != arrays["test_neg_dst"].shape[1]:
        raise ValueError(f"link: valid_neg_dst has {arrays['valid_neg_dst'].shape[1]} negatives "
                         f"per source, test_neg_dst {arrays['test_neg_dst'].shape[1]}; expected "
                         "as many")
    for key, value in arrays.items():
        flat = value.reshape(-1)
        bad = (flat < 0) | (flat >= num_nodes)
        if bad.any():
            i = int(numpy.argmax(bad))
            row, col = divmod(i, value.shape[1])
            raise ValueError(f"link[{key!r}] row {row} column {col}: node {flat[i]} is not a "
                             f"node id ({num_nodes} nodes)")
    for split in _SPLITS:
        n = len(arrays[f"{split}_pos"])
        for what, kind in (("weight", "f"), ("year", "i")):
            key = f"{split}_{what}"
            if key not in link:
                continue
            a = _check.array(link[key], f"link[{key!r}]")
            if a.ndim == 2 and a.shape[1] == 1:
                a = a[:, 0]
            if a.shape != (n,):
                raise ValueError(f"link[{key!r}]: shape {_check.shape_text(a.shape)}, expected "
                                 f"[{n}] (one value per {split}_pos row)")
            if kind == "f" and a.dtype.kind in "iu":
                a = a.astype("<f4")  # OGB's collab weights are integer counts
            elif kind == "f":
                a = _check.floats(a.reshape(n, 1), f"link[{key!r}]", ndim=2)[:, 0]
            else:
                a = _check.integers(a, f"link[{key!r}]", ndim=1)
            arrays[key] = a
    attrs = {"source": str(link.get("source", "random")),
             "metric": str(link.get("metric", "mrr" if kinds[0] == "dst" else "auc")),
             "seed": int(link.get("seed", -1)), "fractions": str(link.get("fractions", ""))}
    if attrs["source"] not in ("random", "ogb"):
        raise ValueError(f"link['source'] = {attrs['source']!r}, expected 'random' or 'ogb'")
    if not _metric_ok(attrs["metric"]):
        raise ValueError(f"link['metric'] = {attrs['metric']!r}, expected 'auc', 'mrr' or "
                         "'hits@K'")
    if (attrs["metric"] == "mrr") != (kinds[0] == "dst"):
        raise ValueError(f"link['metric'] = {attrs['metric']!r}: mrr goes with per-source "
                         "negatives (valid_neg_dst, test_neg_dst), the others with pairs")
    # Validation and test positives must not be message-passing edges, except in OGB's own
    # splits (which do not promise it: collab repeats author pairs across years).
    if attrs["source"] != "ogb" and len(src):
        graph = numpy.stack([src, dst], axis=1).astype("<i8")
        keys = _edge_keys(graph, num_nodes)
        if not directed:
            keys = numpy.concatenate([keys, _edge_keys(graph[:, ::-1], num_nodes)])
        for split in ("valid", "test"):
            pos = arrays[f"{split}_pos"]
            hit = numpy.isin(_edge_keys(pos, num_nodes), keys)
            if hit.any():
                i = int(numpy.argmax(hit))
                raise ValueError(f"link['{split}_pos'] row {i}: edge {pos[i, 0]},{pos[i, 1]} is "
                                 f"also an edge of the graph ({split} edges must be left out of "
                                 "the message-passing graph)")
    return arrays, attrs


def write_link(w, arrays, attrs):
    """Writes the /link group with the package's HDF5 writer, in the C++ writer's order (the
    attributes, then per split: positives, negatives, weights, years)."""
    w.group("/link")
    for key in ATTRS:
        w.attr("/link", key, attrs[key])
    w.attr("/link", "description", _LINK_DESCRIPTION)
    for split in _SPLITS:
        for what in ("pos", "neg", "neg_dst", "weight", "year"):
            key = f"{split}_{what}"
            if key in arrays:
                a = arrays[key]
                a = a.astype("<f4") if what == "weight" else a.astype("<i8")
                w.dataset(f"/link/{key}", a, _description(key))


def read_link(f):
    """The /link group of an open h5py file as a dict (arrays and attributes), or None."""
    if "link" not in f:
        return None
    g = f["link"]
    out = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in g.attrs.items()
           if k in ATTRS}
    for key in ARRAYS:
        if key in g:
            out[key] = g[key][()]
    return out
