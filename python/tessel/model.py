"""Trained models out of Tessel checkpoints: parameters as numpy arrays under PyTorch Geometric's
names, and the PyG module itself when torch_geometric is importable."""

import json
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy


@dataclass
class Checkpoint:
    """A checkpoint file read into numpy (read_checkpoint)."""
    path: Path
    mode: str               # full, sampled, pipeline, dynamic
    model: dict             # kind, in_dim, hidden, out_dim, layers, ... as Tessel records them
    epoch: int
    parameters: dict        # Tessel's names -> float32 arrays as stored (weights [in, out])
    attrs: dict = field(default_factory=dict)


def checkpoint_file(path):
    """A checkpoint file, or a `--checkpoint` folder's best.h5 (else its checkpoint.h5), as
    `tessel predict` chooses."""
    path = Path(os.fspath(path))
    if not path.is_dir():
        return path
    for name in ("best.h5", "checkpoint.h5"):
        if (path / name).is_file():
            return path / name
    raise ValueError(f"{path}: holds neither best.h5 nor checkpoint.h5 (made by "
                     "`tessel train --checkpoint`)")


def read_checkpoint(path):
    """Reads a checkpoint (a file, or a --checkpoint folder: its best.h5, else checkpoint.h5)."""
    path = checkpoint_file(path)
    with h5py.File(path, "r") as f:
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        if attrs.get("format") != "tessel-checkpoint":
            raise ValueError(f"{path}: format is {attrs.get('format')!r}, expected "
                             "'tessel-checkpoint'")
        names = [n for n in str(attrs.get("parameters", "")).split(",") if n]
        params = OrderedDict((n, f["params/" + n][()]) for n in names)
    return Checkpoint(path=path, mode=str(attrs["mode"]), model=json.loads(attrs["model"]),
                      epoch=int(attrs["epoch"]), parameters=params, attrs=attrs)


def _state_dict(ck):
    kind, p = ck.model["kind"], ck.parameters
    out = OrderedDict()
    t = lambda a: numpy.ascontiguousarray(a.T)  # Tessel keeps [in, out]; torch Linear [out, in]
    if kind in ("gcn", "sage") and ck.mode in ("full", "sampled"):
        for l in range(int(ck.model["layers"])):
            if kind == "gcn":
                out[f"convs.{l}.lin.weight"] = t(p[f"layer{l}.weight"])
                out[f"convs.{l}.bias"] = p[f"layer{l}.bias"]
            else:
                out[f"convs.{l}.lin_l.weight"] = t(p[f"layer{l}.neigh_weight"])
                out[f"convs.{l}.lin_l.bias"] = p[f"layer{l}.bias"]
                out[f"convs.{l}.lin_r.weight"] = t(p[f"layer{l}.self_weight"])
        return out
    if kind == "gat" and ck.mode in ("full", "sampled"):
        layers = int(ck.model["layers"])
        for l in range(layers):
            heads = int(ck.model["out_heads"] if l == layers - 1 else ck.model["heads"])
            weight = p[f"layer{l}.weight"]
            head_dim = weight.shape[1] // heads
            out[f"convs.{l}.lin.weight"] = t(weight)
            # Tessel keeps the attention vectors flat, head h in [h F, (h + 1) F).
            out[f"convs.{l}.att_src"] = p[f"layer{l}.att_src"].reshape(1, heads, head_dim)
            out[f"convs.{l}.att_dst"] = p[f"layer{l}.att_dst"].reshape(1, heads, head_dim)
            out[f"convs.{l}.bias"] = p[f"layer{l}.bias"]
        return out
    if kind == "sign-mlp":
        for name, value in p.items():
            m = re.fullmatch(r"(hop|mlp)(\d+)\.(weight|bias)", name)
            if not m:
                break
            group = "hops" if m[1] == "hop" else "mlp"
            out[f"{group}.{m[2]}.{m[3]}"] = t(value) if m[3] == "weight" else value
        else:
            return out
    raise ValueError(f"{ck.path}: a {kind} model of mode {ck.mode}; load_state_dict names the "
                     "parameters of gcn, sage and gat (full, sampled) and sign-mlp models; "
                     "read_checkpoint(path).parameters holds every model's, under Tessel's names")


def load_state_dict(checkpoint):
    """The model's parameters as float32 numpy arrays under PyTorch Geometric's names.

    gcn: `convs.{l}.lin.weight` [out, in] and `convs.{l}.bias` (GCNConv); sage:
    `convs.{l}.lin_l.weight` (neighbour mean), `convs.{l}.lin_l.bias` and `convs.{l}.lin_r.weight`
    (root) (SAGEConv, mean aggregation): the state_dict of torch_geometric.nn.models.GCN or
    GraphSAGE (in_channels, hidden_channels, num_layers, out_channels), which to_pyg_model
    builds. gat: `convs.{l}.lin.weight` [heads * F, in], `convs.{l}.att_src` and
    `convs.{l}.att_dst` [1, heads, F] and `convs.{l}.bias` (GATConv; heads concatenated in the
    hidden layers, averaged in the last, which has the checkpoint's out_heads). sign-mlp:
    `hops.{k}.weight`, `hops.{k}.bias` (hop k's map) and `mlp.{l}.weight`, `mlp.{l}.bias`, each a
    torch.nn.Linear's. checkpoint: a file or a --checkpoint folder.
    """
    return _state_dict(read_checkpoint(checkpoint))


def _pyg_gat(torch, ck, state):
    """A torch module of GATConv layers as Tessel's GAT runs them: heads concatenated in the
    hidden layers and averaged in the last, ReLU between layers (not the paper's ELU), self
    loops added, LeakyReLU(0.2) attention logits."""
    from torch_geometric.nn import GATConv

    m = ck.model
    layers = int(m["layers"])
    convs = []
    for l in range(layers):
        last = l == layers - 1
        lin = state[f"convs.{l}.lin.weight"]
        heads = state[f"convs.{l}.att_src"].shape[1]
        convs.append(GATConv(lin.shape[1], lin.shape[0] // heads, heads=heads, concat=not last,
                             negative_slope=0.2, dropout=0.0, add_self_loops=True, bias=True))

    class TesselGAT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList(convs)

        def forward(self, x, edge_index):
            for i, conv in enumerate(self.convs):
                x = conv(x, edge_index)
                if i + 1 < len(self.convs):
                    x = torch.relu(x)
            return x

    model = TesselGAT()
    # GATConv names its shared projection `lin` (PyG >= 2.5) or `lin_src` (older releases, where
    # `lin_dst` is the same module).
    names = set(model.state_dict())
    tensors = {}
    for k, v in state.items():
        if k not in names and k.endswith(".lin.weight"):
            k = k.replace(".lin.weight", ".lin_src.weight")
        tensors[k] = torch.from_numpy(v)
    missing = {k for k in names - set(tensors) if not k.endswith(".lin_dst.weight")}
    if missing:
        raise ValueError(f"{ck.path}: this torch_geometric's GATConv has parameters the "
                         f"checkpoint does not: {sorted(missing)}")
    model.load_state_dict(tensors, strict=False)
    return model


def to_pyg_model(checkpoint):
    """A PyTorch Geometric model holding the checkpoint's parameters, in eval mode:
    model(x, edge_index) gives Tessel's logits when edge_index is the training graph
    (read_partition(dir).edge_index(): symmetrized, without self-loops and duplicates) and x the
    features as the run saw them (row-normalized where it trained with
    --normalize-features row). gcn and sage: torch_geometric.nn.models.GCN or GraphSAGE. gat: a
    torch module whose `convs` are GATConv layers (heads concatenated in the hidden layers and
    averaged in the last, ReLU between layers as Tessel has it, not the paper's ELU). Needs
    torch and torch_geometric."""
    ck = read_checkpoint(checkpoint)
    if ck.model["kind"] not in ("gcn", "sage", "gat"):
        raise ValueError(f"{ck.path}: to_pyg_model builds gcn, sage and gat models, not "
                         f"{ck.model['kind']} (load_state_dict gives its parameters)")
    state = _state_dict(ck)
    try:
        import torch
        from torch_geometric.nn.models import GCN, GraphSAGE
    except ImportError as e:
        raise ImportError(f"to_pyg_model needs torch and torch_geometric ({e})") from e
    m = ck.model
    if m["kind"] == "gat":
        return _pyg_gat(torch, ck, state).eval()
    cls = GCN if m["kind"] == "gcn" else GraphSAGE
    model = cls(in_channels=int(m["in_dim"]), hidden_channels=int(m["hidden"]),
                num_layers=int(m["layers"]), out_channels=int(m["out_dim"]))
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)
    return model.eval()
