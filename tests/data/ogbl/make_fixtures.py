"""Writes the tiny ogbl-shaped folders and .pt files under tests/data/ogbl (run with torch
installed: python3 make_fixtures.py). The outputs are committed; the tests read them, and
their expected values are spelled out in tests/datasets/torch_pt_test.cpp."""
import gzip
import os
import shutil

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def write_gz(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
            f.write(text.encode())


def table(rows):
    return "".join(",".join(str(v) for v in row) + "\n" for row in rows)


def long(rows):
    return torch.tensor(rows, dtype=torch.int64)


def folder(name, num_nodes, edges, features, splits, extra_raw=()):
    root = os.path.join(HERE, name)
    shutil.rmtree(root, ignore_errors=True)
    write_gz(os.path.join(root, "raw", "edge.csv.gz"), table(edges))
    write_gz(os.path.join(root, "raw", "num-node-list.csv.gz"), f"{num_nodes}\n")
    write_gz(os.path.join(root, "raw", "num-edge-list.csv.gz"), f"{len(edges)}\n")
    if features is not None:
        write_gz(os.path.join(root, "raw", "node-feat.csv.gz"), table(features))
    for file, rows in extra_raw:
        write_gz(os.path.join(root, "raw", file), table(rows))
    os.makedirs(os.path.join(root, "split", "time"))
    for which, content in splits.items():
        torch.save(content, os.path.join(root, "split", "time", which + ".pt"))


# ogbl-collab's shape: undirected, edge [n, 2], weight and year per edge, edge_neg in valid/test.
collab_train = [[0, 1], [1, 2], [2, 3], [3, 4]]
folder(
    "ogbl-collab-tiny", 6, collab_train,
    [[0.5, 1, -1], [1.5, 2, 0], [2.5, 3, 1], [3.5, 4, 2], [4.5, 5, 3], [5.5, 6, 4]],
    {
        "train": {"edge": long(collab_train), "weight": long([1, 2, 1, 1]),
                  "year": long([2015, 2016, 2017, 2017])},
        "valid": {"edge": long([[0, 2], [1, 3]]), "weight": long([1, 3]),
                  "year": long([2018, 2018]), "edge_neg": long([[0, 5], [1, 5], [2, 5]])},
        "test": {"edge": long([[4, 5], [0, 4]]), "weight": long([2, 1]),
                 "year": long([2019, 2019]), "edge_neg": long([[3, 5], [0, 3]])},
    },
    extra_raw=[("edge_weight.csv.gz", [[1], [2], [1], [1]]),
               ("edge_year.csv.gz", [[2015], [2016], [2017], [2017]])])

# ogbl-citation2's shape: directed, source_node / target_node, target_node_neg [n, K].
cite_train = [[0, 1], [0, 2], [1, 2], [3, 4], [5, 6]]
folder(
    "ogbl-citation2-tiny", 7, cite_train,
    [[float(v), float(-v)] for v in range(7)],
    {
        "train": {"source_node": long([e[0] for e in cite_train]),
                  "target_node": long([e[1] for e in cite_train])},
        "valid": {"source_node": long([2, 4]), "target_node": long([0, 5]),
                  "target_node_neg": long([[1, 3, 6], [0, 1, 2]])},
        "test": {"source_node": long([6, 1]), "target_node": long([3, 5]),
                 "target_node_neg": long([[0, 2, 4], [3, 4, 6]])},
    })

# Reader cases: views (offset, transposed), other dtypes, and what must be refused.
pt = os.path.join(HERE, "pt")
shutil.rmtree(pt, ignore_errors=True)
os.makedirs(pt)
base = torch.arange(12, dtype=torch.int64).reshape(4, 3)
torch.save({"transposed": base.t(), "offset": base[1:, 1:], "shared": base,
            "int32": torch.tensor([[1, -2], [3, 4]], dtype=torch.int32),
            "float32": torch.tensor([0.5, -1.25, 3.0]),
            "float64": torch.tensor([0.1, 2.5], dtype=torch.float64),
            "empty": torch.zeros((0, 2), dtype=torch.int64)},
           os.path.join(pt, "views.pt"))
torch.save({"edge": torch.tensor([[0, 1]], dtype=torch.float16)}, os.path.join(pt, "half.pt"))
torch.save({"edge": long([[0, 1]]), "names": ["a", "b"]}, os.path.join(pt, "list.pt"))
torch.save([long([0, 1])], os.path.join(pt, "not_dict.pt"))
torch.save({"edge": long([[0, 1]])}, os.path.join(pt, "legacy.pt"),
           _use_new_zipfile_serialization=False)
# ogbl-collab-tiny's valid split in the legacy format (PyTorch before 1.6 wrote only this).
torch.save(torch.load(os.path.join(HERE, "ogbl-collab-tiny", "split", "time", "valid.pt")),
           os.path.join(pt, "collab-valid-legacy.pt"), _use_new_zipfile_serialization=False)
print("torch", torch.__version__)
