"""Numpy references for the tests: the OGB raw folder read directly, and GCN / GraphSAGE forward
passes written from Tessel's layer definitions (src/nn), independent of the package's code."""

import gzip

import numpy


def load_ogb_folder(folder, split="planetoid"):
    """edge_index [2, E], x, y and the three split id arrays of an OGB raw folder (CSV)."""
    def table(name, dtype):
        with gzip.open(folder / name, "rt") as f:
            return numpy.loadtxt(f, delimiter=",", dtype=dtype, ndmin=1)
    edge_index = table("raw/edge.csv.gz", numpy.int64).T
    x = table("raw/node-feat.csv.gz", numpy.float32)
    y = table("raw/node-label.csv.gz", numpy.int64)
    splits = [table(f"split/{split}/{s}.csv.gz", numpy.int64) for s in ("train", "valid", "test")]
    return edge_index, x, y, splits


def training_graph(edge_index, num_nodes):
    """The in-neighbour matrix M (M[v, u] = 1 for each edge u -> v) of the graph Tessel trains
    on: both directions, no self-loops, no duplicates."""
    src, dst = edge_index
    keep = src != dst
    pairs = numpy.unique(numpy.stack([numpy.concatenate([dst[keep], src[keep]]),
                                      numpy.concatenate([src[keep], dst[keep]])], axis=1), axis=0)
    m = numpy.zeros((num_nodes, num_nodes))
    m[pairs[:, 0], pairs[:, 1]] = 1.0
    return m


def normalize_rows(x):
    """--normalize-features row: each row divided by the sum of its absolute values."""
    s = numpy.abs(x).sum(axis=1, keepdims=True)
    return numpy.divide(x, s, out=numpy.zeros_like(x), where=s > 0)


def forward(kind, state, m, x):
    """Logits and the last hidden layer (after its ReLU) of a gcn, sage or gat model with PyG-named
    parameters `state`, in float64. GCN: out = Â H W + b, Â = D̃^-1/2 (M + I) D̃^-1/2 with
    D̃ = in-degree + 1; SAGE (mean): out = H W_root + mean over in-neighbours of H W_neigh + b
    (the mean is 0 without neighbours); ReLU between layers, none after the last."""
    n = m.shape[0]
    degree = m.sum(axis=1)
    if kind == "gat":
        return gat_forward(state, m, x)
    if kind == "gcn":
        d = 1.0 / numpy.sqrt(degree + 1.0)
        op = d[:, None] * (m + numpy.eye(n)) * d[None, :]
    else:
        op = m / numpy.maximum(degree, 1.0)[:, None]
    h = x.astype(numpy.float64)
    layers = len({k.split(".")[1] for k in state})
    hidden = None
    for l in range(layers):
        p = {k.split(".", 2)[2]: v.astype(numpy.float64) for k, v in state.items()
             if k.startswith(f"convs.{l}.")}
        if kind == "gcn":
            h = op @ (h @ p["lin.weight"].T) + p["bias"]
        else:
            h = h @ p["lin_r.weight"].T + op @ (h @ p["lin_l.weight"].T) + p["lin_l.bias"]
        if l + 1 < layers:
            h = numpy.maximum(h, 0.0)
            hidden = h
    return h, hidden


def gat_forward(state, m, x):
    """GAT with GATConv-named parameters, in float64: per head h, z = H W_h, the logits
    LeakyReLU_0.2(att_src_h . z_u + att_dst_h . z_v) over v's in-neighbours and v itself (the
    self loop), softmax per v, out_v = sum_u alpha_vu z_u; heads concatenated in the hidden
    layers, averaged in the last, then the bias; ReLU between layers."""
    mask = (m + numpy.eye(m.shape[0])) > 0
    h = x.astype(numpy.float64)
    layers = len({k.split(".")[1] for k in state})
    hidden = None
    for l in range(layers):
        p = {k.split(".", 2)[2]: v.astype(numpy.float64) for k, v in state.items()
             if k.startswith(f"convs.{l}.")}
        heads, f = p["att_src"].shape[1], p["att_src"].shape[2]
        z = (h @ p["lin.weight"].T).reshape(-1, heads, f)
        outs = []
        for k in range(heads):
            s = z[:, k, :] @ p["att_src"][0, k]
            t = z[:, k, :] @ p["att_dst"][0, k]
            e = t[:, None] + s[None, :]
            e = numpy.where(e > 0, e, 0.2 * e)
            e = numpy.where(mask, e, -numpy.inf)
            a = numpy.exp(e - e.max(axis=1, keepdims=True))
            a /= a.sum(axis=1, keepdims=True)
            outs.append(a @ z[:, k, :])
        last = l + 1 == layers
        h = (sum(outs) / heads if last else numpy.concatenate(outs, axis=1)) + p["bias"]
        if not last:
            h = numpy.maximum(h, 0.0)
            hidden = h
    return h, hidden
