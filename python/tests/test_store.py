"""Stores written from Python: the same arrays as `tessel convert ogb`, the same training, and
every bad input refused before anything is written."""

import filecmp
import os
import re
import stat
from types import SimpleNamespace

import numpy
import pytest
import scipy.sparse

import tessel
from conftest import CORA, EPOCHS, assert_same_store, cli, same_hdf5_as_tessel


def test_cora_write_store_equals_convert_ogb(tmp_path, cora_arrays, cora_store):
    edge_index, x, y, splits = cora_arrays
    path = tessel.write_store(tmp_path / "cora.h5", edge_index, x, y, *splits)
    assert_same_store(path, cora_store)
    # With the HDF5 release tessel links, the two writers' files are the same bytes.
    if same_hdf5_as_tessel():
        assert filecmp.cmp(path, cora_store, shallow=False)
    info = cli("info", path, "--json").summary
    assert (info["num_nodes"], info["num_edges"], info["num_edges_symmetrized"]) == (2708, 5278,
                                                                                     10556)
    assert info["split"] == {"train": 140, "valid": 500, "test": 1000}


def test_writing_twice_gives_the_same_bytes(tmp_path, cora_arrays):
    edge_index, x, y, splits = cora_arrays
    a = tessel.write_store(tmp_path / "a.h5", edge_index, x, y, *splits, name="cora")
    b = tessel.write_store(tmp_path / "b.h5", edge_index, x, y, *splits, name="cora")
    assert filecmp.cmp(a, b, shallow=False)


@pytest.mark.parametrize("flag", ["--symmetrize", "--directed"])
def test_symmetrize_and_directed_equal_convert_flags(tmp_path, cora_arrays, flag):
    edge_index, x, y, splits = cora_arrays
    converted = tmp_path / "converted.h5"
    cli("convert", "ogb", CORA, converted, flag, "--name", "cora")
    option = {"--symmetrize": dict(symmetrize=True), "--directed": dict(directed=True)}[flag]
    path = tessel.write_store(tmp_path / "py.h5", edge_index, x, y, *splits, name="cora",
                              **option)
    assert_same_store(path, converted)


def test_sparse_matrix_and_masks_give_the_same_store(tmp_path, cora_arrays, cora_store):
    edge_index, x, y, (train, valid, test) = cora_arrays
    n = x.shape[0]
    adjacency = scipy.sparse.csr_matrix((numpy.ones(edge_index.shape[1]), tuple(edge_index)),
                                        shape=(n, n))
    masks = [numpy.isin(numpy.arange(n), ids) for ids in (train, valid, test)]
    # Masks list nodes in ascending order, and the Planetoid split files are ascending too.
    assert all(numpy.array_equal(numpy.flatnonzero(m), ids)
               for m, ids in zip(masks, (train, valid, test)))
    path = tessel.write_store(tmp_path / "cora.h5", adjacency, x.astype(numpy.float64),
                              y.astype(numpy.int32), *masks)
    assert_same_store(path, cora_store)


def pyg_like_cora(cora_arrays):
    """Cora as PyG's Planetoid gives it: both directions of every edge, in no particular order,
    boolean masks (a stand-in with numpy arrays; torch tensors behave the same)."""
    edge_index, x, y, splits = cora_arrays
    both = numpy.concatenate([edge_index, edge_index[::-1]], axis=1)
    both = both[:, numpy.random.default_rng(0).permutation(both.shape[1])]
    n = x.shape[0]
    masks = [numpy.isin(numpy.arange(n), ids) for ids in splits]
    return SimpleNamespace(edge_index=both, x=x, y=y, train_mask=masks[0], val_mask=masks[1],
                           test_mask=masks[2], num_nodes=n)


def test_from_pyg_trains_exactly_like_the_ogb_store(tmp_path, cora_arrays, cora_store,
                                                    cora_parts):
    data = pyg_like_cora(cora_arrays)
    path = tessel.from_pyg(data, tmp_path / "cora.h5")
    info = cli("info", path, "--json").summary
    assert (info["num_edges"], info["num_edges_symmetrized"]) == (10556, 10556)
    parts = tmp_path / "parts"
    cli("partition", path, "--parts", 2, "--out", parts)
    # The training graph, features, labels and splits of every part are those of the OGB store's.
    for p in range(2):
        assert_same_store(parts / f"part-{p}.h5", cora_parts / f"part-{p}.h5")
    args = ["--model", "gcn", "--epochs", EPOCHS, "--device", "cpu"]
    ours = cli("train", parts, *args, np=2).metrics
    theirs = cli("train", cora_parts, *args, np=2).metrics
    assert [r["loss"] for r in ours] == [r["loss"] for r in theirs]
    assert [r["valid_acc"] for r in ours] == [r["valid_acc"] for r in theirs]


def test_from_dgl_reads_edges_and_ndata(tmp_path, cora_arrays, cora_store):
    edge_index, x, y, splits = cora_arrays
    n = x.shape[0]
    masks = {k: numpy.isin(numpy.arange(n), ids).astype(numpy.uint8)  # older DGL: 0/1 masks
             for k, ids in zip(("train_mask", "val_mask", "test_mask"), splits)}
    graph = SimpleNamespace(ntypes=["_N"], etypes=["_E"], num_nodes=lambda: n,
                            edges=lambda: (edge_index[0], edge_index[1]),
                            ndata=dict(feat=x, label=y, **masks))
    path = tessel.from_dgl(graph, tmp_path / "cora.h5")
    assert_same_store(path, cora_store)


def test_from_pyg_with_torch_geometric(tmp_path, cora_arrays, cora_store):
    torch = pytest.importorskip("torch", reason="optional: torch is not importable")
    pytest.importorskip("torch_geometric", reason="optional: torch_geometric is not importable")
    from torch_geometric.data import Data
    edge_index, x, y, splits = cora_arrays
    n = x.shape[0]
    masks = [torch.from_numpy(numpy.isin(numpy.arange(n), ids)) for ids in splits]
    data = Data(edge_index=torch.from_numpy(edge_index), x=torch.from_numpy(x),
                y=torch.from_numpy(y), train_mask=masks[0], val_mask=masks[1],
                test_mask=masks[2])
    path = tessel.from_pyg(data, tmp_path / "cora.h5")
    assert_same_store(path, cora_store)


def tiny():
    """A 4-node path with 2 features: edge_index, x, y, train, valid, test."""
    return dict(graph=numpy.array([[0, 1, 2], [1, 2, 3]]),
                x=numpy.arange(8, dtype=numpy.float32).reshape(4, 2),
                y=numpy.array([0, 1, 0, -1]), train=numpy.array([0, 1]), valid=numpy.array([2]),
                test=None)


BAD_INPUTS = [
    # (what changes, the error it must give)
    (dict(x=[[0.0, 1.0], [2.0, 3.0], [4.0], [6.0, 7.0]]),
     r"^x: row 2 has 1 value, but row 0 has 2"),
    (dict(graph=[[0, 1, 2], [1, 2]]), r"^edge_index: row 1 has 2 values, but row 0 has 3"),
    (dict(x=numpy.array([[0, 1], [2, numpy.nan], [4, 5], [6, 7]], dtype=numpy.float32)),
     r"^x: row 1 column 1 is nan, expected a finite number"),
    (dict(x=numpy.array([[0, 1], [2, 3], [numpy.inf, 5], [6, 7]])), r"^x: row 2 column 0 is inf"),
    (dict(x=numpy.array([[0, 1], [2, 3], [4, 1e39], [6, 7]])),
     r"^x: row 2 column 1 is 1e\+39, which float32 cannot hold"),
    (dict(x=numpy.arange(8).reshape(4, 2)), r"^x: dtype int64, expected floating point"),
    (dict(x=numpy.arange(4, dtype=numpy.float32)), r"^x: shape \[4\], expected 2 dimensions"),
    (dict(graph=numpy.array([[0, 1, 2], [1, 4, 3]])),
     r"^edge_index: edge 1 \(column 1\) is 1 -> 4: 4 is not a node id \(x has 4 rows"),
    (dict(graph=numpy.array([[0, -1, 2], [1, 2, 3]])),
     r"^edge_index: edge 1 \(column 1\) is -1 -> 2"),
    (dict(graph=numpy.array([[0.0, 1.0], [1.0, 2.0]])),
     r"^edge_index: dtype float64, expected integers"),
    (dict(graph=numpy.array([[0, 1], [1, 2], [2, 3]])),
     r"^edge_index: shape \[3, 2\], expected \[2, num_edges\].*transpose"),
    (dict(graph=scipy.sparse.csr_matrix((5, 5))),
     r"^adjacency: a 5 x 5 adjacency matrix, but the features have 4 rows"),
    (dict(y=numpy.array([0, 1, 0])), r"^y: 3 labels, but x has 4 rows"),
    (dict(y=numpy.array([0.0, 1.5, 0.0, 1.0])), r"^y\[1\] = 1.5 is not a class id"),
    (dict(y=numpy.array([0, 1, -2, 1])), r"^y\[2\] = -2 is not a class id"),
    (dict(y=numpy.array([0, 1, 4, 1])), r"^y\[2\] = 4 is too large"),
    (dict(y=numpy.array([True, False, True, False])),
     r"^y: dtype bool, expected integer class ids"),
    (dict(train=numpy.array([0, 7])), r"^train\[1\] = 7 is not a node id \(the graph has 4 nodes"),
    (dict(train=numpy.array([0, 1, 0])), r"^train\[2\] = 0: node 0 is already in train"),
    (dict(valid=numpy.array([3, 1])), r"^valid\[1\] = 1: node 1 is already in train"),
    (dict(test=numpy.array([False, True, False, False])),
     r"^test row 1: node 1 is already in train"),
    (dict(test=numpy.array([True, False])),
     r"^test: a boolean mask of shape \[2\], expected \[4\]"),
    (dict(train=numpy.array([0.0, 1.0])), r"^train: dtype float64, expected integers"),
    (dict(train=numpy.array([1, 1, 0, 0])),
     r"^train\[1\] = 1: node 1 is already in train \(a 0/1 mask\?"),
    (dict(num_classes=1), r"^num_classes = 1, but the labels need at least 2 classes"),
]


@pytest.mark.parametrize("change,message", BAD_INPUTS)
def test_bad_input_is_refused_before_anything_is_written(tmp_path, change, message):
    args = tiny()
    args.update(change)
    with pytest.raises(ValueError, match=message):
        tessel.write_store(tmp_path / "g.h5", **args)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("error", [OSError, KeyboardInterrupt])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, error):
    path = tmp_path / "g.h5"
    path.write_bytes(b"the previous store")

    def fail(self, name, *args, **kwargs):
        if name == "/node/feat":
            raise error("disk full or Ctrl-C (injected)")
        return original(self, name, *args, **kwargs)

    original = tessel._h5.Writer.dataset
    monkeypatch.setattr(tessel._h5.Writer, "dataset", fail)
    with pytest.raises(error, match="injected"):
        tessel.write_store(path, **tiny())
    assert os.listdir(tmp_path) == ["g.h5"]
    assert path.read_bytes() == b"the previous store"


def test_outputs_that_are_not_files_are_refused(tmp_path):
    with pytest.raises(ValueError, match="it is a folder"):
        tessel.write_store(tmp_path, **tiny())
    with pytest.raises(ValueError, match="does not exist"):
        tessel.write_store(tmp_path / "missing" / "g.h5", **tiny())
    os.symlink(tmp_path / "elsewhere", tmp_path / "link.h5")
    with pytest.raises(ValueError, match="not a regular file"):
        tessel.write_store(tmp_path / "link.h5", **tiny())


def test_a_tiny_store_reads_back_and_passes_tessel_info(tmp_path):
    path = tessel.write_store(tmp_path / "g.h5", name="path4", **tiny())
    store = tessel.read_store(path)
    assert store.name == "path4" and store.num_classes == 2 and not store.directed
    assert store.edge_index().tolist() == [[0, 1, 2], [1, 2, 3]]
    assert store.adjacency()[0, 1] == 1 and store.adjacency()[1, 0] == 0
    assert store.y.tolist() == [0, 1, 0, -1] and store.test.tolist() == []
    info = cli("info", path, "--json").summary
    assert (info["num_nodes"], info["num_edges"], info["num_edges_symmetrized"]) == (4, 3, 6)
    assert info["num_labeled"] == 3


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sixteen_bit_stores_read_as_float32_with_the_rounded_values(tmp_path, dtype):
    # convert --feature-dtype rounds to nearest even; read_store hands out float32 either way.
    args = ["convert", "synthetic", "--nodes", "300", "--feat-dim", "16", "--seed", "4"]
    cli(*args, tmp_path / "f32.h5")
    cli(*args, "--feature-dtype", dtype, tmp_path / "small.h5")
    full = tessel.read_store(tmp_path / "f32.h5").x
    small = tessel.read_store(tmp_path / "small.h5").x
    assert small.dtype == numpy.float32 and small.shape == full.shape
    if dtype == "float16":
        expected = full.astype(numpy.float16).astype(numpy.float32)
    else:  # round to nearest even on the top 16 bits
        bits = full.view(numpy.uint32).astype(numpy.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
        expected = bits.astype(numpy.uint32).view(numpy.float32)
    assert not numpy.array_equal(expected, full)  # the rounding is seen
    assert numpy.array_equal(small, expected)
    assert os.path.getsize(tmp_path / "small.h5") < os.path.getsize(tmp_path / "f32.h5")
    assert cli("info", tmp_path / "small.h5", "--json").summary["feature_dtype"] == dtype


def test_the_program_refuses_what_it_cannot_train(tmp_path):
    # write_store checks what a store must hold; what training needs is the trainer's to say,
    # and its one-line message comes back as the exception's.
    args = tiny()
    args["y"] = numpy.array([0, 0, 0, -1])
    path = tessel.write_store(tmp_path / "g.h5", **args)
    cli("partition", path, "--parts", 1, "--out", tmp_path / "p")
    with pytest.raises(tessel.TesselError) as e:
        cli("train", tmp_path / "p", "--epochs", 1, "--device", "cpu")
    assert e.value.message == f"{tmp_path / 'p'}: the dataset has 1 classes; need at least 2"
    assert e.value.returncode != 0


def test_pyg_and_dgl_errors_name_the_attribute(tmp_path):
    args = tiny()
    x = args["x"].copy()
    x[3, 0] = numpy.nan
    data = SimpleNamespace(edge_index=args["graph"], x=x, y=args["y"], train_mask=None)
    with pytest.raises(ValueError, match=r"^data\.x: row 3 column 0 is nan"):
        tessel.from_pyg(data, tmp_path / "g.h5")
    data = SimpleNamespace(edge_index=args["graph"], x=args["x"], y=args["y"],
                           train_mask=numpy.array([True, False, True]))
    with pytest.raises(ValueError, match=r"^data\.train_mask: a boolean mask of shape \[3\]"):
        tessel.from_pyg(data, tmp_path / "g.h5")
    with pytest.raises(ValueError, match="HeteroData"):
        tessel.from_pyg(SimpleNamespace(x=args["x"]), tmp_path / "g.h5")
    graph = SimpleNamespace(ntypes=["_N"], etypes=["_E"], num_nodes=lambda: 4,
                            edges=lambda: (numpy.array([0, 5]), numpy.array([1, 2])),
                            ndata=dict(feat=args["x"], label=args["y"]))
    with pytest.raises(ValueError, match=r"^graph\.edges\(\): edge 1 \(column 1\) is 5 -> 2"):
        tessel.from_dgl(graph, tmp_path / "g.h5")
    graph.ndata = dict(feat=args["x"])
    with pytest.raises(ValueError, match=r"graph\.ndata has no 'label' \(keys: feat\)"):
        tessel.from_dgl(graph, tmp_path / "g.h5")
    assert os.listdir(tmp_path) == []


def test_temporaries_are_unguessable_exclusive_and_keep_the_mode(tmp_path):
    from tessel import _atomic
    target = tmp_path / "out.h5"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    names = set()
    for _ in range(2):
        with _atomic.AtomicOutput(target) as out:
            # The C++ writers' shape, so that a later `tessel` run can remove a leftover.
            assert re.fullmatch(r"\.out\.h5\.tmp-[0-9a-z]{16}-%d-\d+-[A-Za-z0-9_-]+" % os.getpid(),
                                out.temp_path.name)
            assert out.temp_path.is_file() and not out.temp_path.is_symlink()
            names.add(out.temp_path.name)
            out.temp_path.write_bytes(b"new")
    assert len(names) == 2
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.h5"]


def test_a_link_at_the_temporary_name_is_never_followed(tmp_path, monkeypatch):
    from tessel import _atomic
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    monkeypatch.setattr(_atomic, "_temporary_name", lambda name: ".out.h5.tmp-guessed")
    (tmp_path / ".out.h5.tmp-guessed").symlink_to(victim)
    with pytest.raises(FileExistsError):
        with _atomic.AtomicOutput(tmp_path / "out.h5") as out:
            out.temp_path.write_bytes(b"redirected")
    assert victim.read_bytes() == b"keep"
    assert not (tmp_path / "out.h5").exists()
