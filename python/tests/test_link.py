"""Link-prediction stores from Python: the /link group written by write_store equals what
`tessel convert ogb` makes of an ogbl folder, reads back, and bad splits are refused before
anything is written; edge-score files read back."""

import filecmp
import gzip
import re

import h5py
import numpy
import pytest

import tessel
from conftest import REPO, assert_same_store, cli, same_hdf5_as_tessel

COLLAB = REPO / "tests" / "data" / "ogbl" / "ogbl-collab-tiny"


def _table(path, dtype):
    with gzip.open(path, "rt") as f:
        return numpy.array([[float(v) for v in line.split(",")] for line in f]).astype(dtype)


def _collab_link():
    # The values make_fixtures.py saved in split/time/*.pt.
    return {"train_pos": [[0, 1], [1, 2], [2, 3], [3, 4]],
            "train_weight": [1, 2, 1, 1], "train_year": [2015, 2016, 2017, 2017],
            "valid_pos": [[0, 2], [1, 3]], "valid_weight": [1, 3], "valid_year": [2018, 2018],
            "valid_neg": [[0, 5], [1, 5], [2, 5]],
            "test_pos": [[4, 5], [0, 4]], "test_weight": [2, 1], "test_year": [2019, 2019],
            "test_neg": [[3, 5], [0, 3]],
            "source": "ogb", "metric": "hits@50", "seed": -1, "fractions": ""}


def test_write_store_link_equals_convert_ogb(tmp_path):
    converted = tmp_path / "converted.h5"
    cli("convert", "ogb", COLLAB, converted)
    edges = _table(COLLAB / "raw" / "edge.csv.gz", numpy.int64)
    x = _table(COLLAB / "raw" / "node-feat.csv.gz", numpy.float32)
    path = tessel.write_store(tmp_path / "py.h5", edges.T, x, None, name="ogbl-collab-tiny",
                              link=_collab_link())
    assert_same_store(path, converted)
    if same_hdf5_as_tessel():
        assert filecmp.cmp(path, converted, shallow=False)
    store = tessel.read_store(converted)
    assert store.num_classes == 0 and (store.y == -1).all() and len(store.train) == 0
    link = store.link
    assert (link["source"], link["metric"], link["seed"]) == ("ogb", "hits@50", -1)
    numpy.testing.assert_array_equal(link["valid_neg"], [[0, 5], [1, 5], [2, 5]])
    assert link["train_weight"].dtype == numpy.float32
    assert "valid_neg_dst" not in link
    info = cli("info", path, "--json").summary
    assert info["num_nodes"] == 6


def test_random_split_with_per_source_negatives_reads_back(tmp_path):
    edge_index = numpy.array([[0, 1, 2], [1, 2, 3]])
    x = numpy.zeros((5, 0), dtype=numpy.float32)
    link = {"train_pos": edge_index.T, "valid_pos": [[3, 4]], "test_pos": [[0, 4]],
            "valid_neg_dst": [[0, 1]], "test_neg_dst": [[2, 3]], "seed": 7,
            "fractions": "60,20,20"}
    path = tessel.write_store(tmp_path / "r.h5", edge_index, x, None, link=link)
    store = tessel.read_store(path)
    assert store.x.shape == (5, 0)
    assert (store.link["source"], store.link["metric"], store.link["seed"],
            store.link["fractions"]) == ("random", "mrr", 7, "60,20,20")
    numpy.testing.assert_array_equal(store.link["test_neg_dst"], [[2, 3]])
    assert tessel.read_store(tmp_path / "r.h5").link is not None
    node = tessel.write_store(tmp_path / "n.h5", edge_index, numpy.ones((5, 1)), [0, 1, 0, 1, 0])
    assert tessel.read_store(node).link is None


GOOD = {"train_pos": [[0, 1]], "valid_pos": [[1, 2]], "test_pos": [[2, 3]],
        "valid_neg": [[0, 3]], "test_neg": [[1, 3]]}


@pytest.mark.parametrize("change, message", [
    ({"valid_pos": [[1, 9]]}, "link['valid_pos'] row 0 column 1: node 9 is not a node id"),
    ({"test_pos": [[0, 1]]}, "link['test_pos'] row 0: edge 0,1 is also an edge of the graph"),
    ({"test_pos": [[1, 0]]}, "link['test_pos'] row 0: edge 1,0 is also an edge of the graph"),
    ({"valid_neg_dst": [[1]]}, "link: valid needs exactly one kind of negatives"),
    ({"test_neg": None, "test_neg_dst": [[1, 2]]}, "valid and test hold different kinds"),
    ({"train_pos": [0, 1]}, "link['train_pos']: shape [2], expected 2 dimensions"),
    ({"valid_weight": [1, 2]}, "link['valid_weight']: shape [2], expected [1]"),
    ({"metric": "mrr"}, "mrr goes with per-source negatives"),
    ({"metric": "hits@"}, "expected 'auc', 'mrr' or 'hits@K'"),
    ({"test_negs": [[1, 3]]}, "link: unknown key 'test_negs'"),
])
def test_bad_link_splits_are_refused_before_anything_is_written(tmp_path, change, message):
    link = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    edge_index = numpy.array([[0], [1]])
    with pytest.raises(ValueError, match=re.escape(message)):
        tessel.write_store(tmp_path / "bad.h5", edge_index, numpy.ones((4, 1)), None, link=link)
    assert list(tmp_path.iterdir()) == []


def _edge_score_file(path, **arrays):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "tessel-link-predictions"
        f.attrs["version"] = 1
        f.attrs["split"] = "test"
        for k, v in arrays.items():
            f[k] = numpy.asarray(v)
    return path


def test_read_predictions_reads_edge_scores(tmp_path):
    pairs = _edge_score_file(tmp_path / "p.h5", pos_edge=[[0, 1], [2, 3]],
                             pos_score=numpy.float32([1.5, -0.5]), neg_edge=[[0, 3]],
                             neg_score=numpy.float32([-2]))
    s = tessel.read_predictions(pairs)
    assert isinstance(s, tessel.EdgeScores)
    numpy.testing.assert_array_equal(s.pos_score, [1.5, -0.5])
    assert s.neg_dst is None and s.neg_edge.shape == (1, 2) and s.attrs["split"] == "test"
    dst = _edge_score_file(tmp_path / "d.h5", pos_edge=[[0, 1]], pos_score=[0.25],
                           neg_dst=[[2, 3, 4]], neg_score=[[0.0, 1.0, 2.0]])
    assert tessel.read_predictions(dst).neg_score.shape == (1, 3)
    given = _edge_score_file(tmp_path / "g.h5", pos_edge=[[4, 2]], pos_score=[3.0])
    assert tessel.read_predictions(given).neg_score is None
    bad = _edge_score_file(tmp_path / "b.h5", pos_edge=[[0, 1]], pos_score=[0.25],
                           neg_dst=[[2, 3, 4]], neg_score=[0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match=r"/neg_score is \[3\], expected \[1, 3\]"):
        tessel.read_predictions(bad)


def test_write_store_edge_split_as_convert_does(tmp_path, cora_arrays):
    edge_index, x, y, splits = cora_arrays
    path = tessel.write_store(tmp_path / "s.h5", edge_index, x, y, *splits,
                              edge_split=(85, 5, 10), seed=3)
    store = tessel.read_store(path)
    link = store.link

    def undirected(pairs):
        return {(min(u, v), max(u, v)) for u, v in numpy.asarray(pairs).tolist() if u != v}

    edges = undirected(numpy.asarray(edge_index).T)
    total = len(edges)
    valid, test, train = (undirected(link[k]) for k in ("valid_pos", "test_pos", "train_pos"))
    assert (len(link["valid_pos"]), len(link["test_pos"])) == (total * 5 // 100, total * 10 // 100)
    assert len(train) == len(link["train_pos"]) == total - len(valid) - len(test)
    assert train | valid | test == edges and not (valid & test) and not (train & (valid | test))
    assert undirected(store.edge_index().T) == train  # the message-passing graph
    negatives = numpy.concatenate([link["valid_neg"], link["test_neg"]])
    assert len(link["valid_neg"]) == len(valid) and len(link["test_neg"]) == len(test)
    assert (negatives[:, 0] != negatives[:, 1]).all()
    assert len(undirected(negatives)) == len(negatives) and not (undirected(negatives) & edges)
    assert (link["source"], link["metric"], link["seed"], link["fractions"]) == (
        "random", "auc", 3, "85,5,10")
    numpy.testing.assert_array_equal(store.y, y)
    again = tessel.read_store(tessel.write_store(tmp_path / "t.h5", edge_index, x, y, *splits,
                                                 edge_split=(85, 5, 10), seed=3)).link
    other = tessel.read_store(tessel.write_store(tmp_path / "u.h5", edge_index, x, y, *splits,
                                                 edge_split=(85, 5, 10), seed=4)).link
    numpy.testing.assert_array_equal(again["test_neg"], link["test_neg"])
    assert undirected(other["test_pos"]) != test
    # Tessel trains link prediction on it.
    cli("partition", path, "--parts", 2, "--out", tmp_path / "p")
    result = cli("train", tmp_path / "p", "--task", "link", "--epochs", "2", "--device", "cpu",
                 np=2)
    assert result.summary["epochs"] == 2


@pytest.mark.parametrize("kwargs, message", [
    ({"edge_split": (80, 10, 5)}, r"edge_split = \(80, 10, 5\), expected three whole"),
    ({"edge_split": (0, 50, 50)}, r"train above 0"),
    ({"edge_split": (85, 5, 10), "directed": True}, r"a directed graph is refused"),
    ({"edge_split": (85, 5, 10), "seed": -1}, r"seed = -1, expected a whole number"),
    ({"edge_split": (85, 5, 10), "link": {"train_pos": [[0, 1]]}}, r"edge_split and link"),
])
def test_bad_edge_splits_are_refused(tmp_path, kwargs, message):
    edge_index = numpy.array([[0, 1, 2, 3], [1, 2, 3, 0]])
    with pytest.raises(ValueError, match=message):
        tessel.write_store(tmp_path / "b.h5", edge_index, numpy.zeros((4, 0), numpy.float32),
                           None, **kwargs)
    assert list(tmp_path.iterdir()) == []
