"""Temporal stores from snapshots: the same store as `tessel convert temporal`, readable back,
trainable, and bad snapshots refused before anything is written."""

import filecmp
import json
import os
from types import SimpleNamespace

import numpy
import pytest

import tessel
from conftest import ENGLAND_COVID, assert_same_store, cli, same_hdf5_as_tessel


def england_covid_snapshots(lags=8):
    """england_covid as PyTorch Geometric Temporal users hold it: one snapshot per day s with
    that day's weighted mobility edges, the cases of days s..s+lags-1 as features and day
    s+lags's as the target (Tessel's --lags layout, unstandardized)."""
    data = json.loads(ENGLAND_COVID.read_text())
    cases = numpy.array(data["y"], dtype=numpy.float64)  # [days, regions]
    edges = data["edge_mapping"]
    snapshots = []
    for s in range(cases.shape[0] - lags):
        # Self-loops and repeated pairs included, as the file has them.
        snapshots.append(SimpleNamespace(
            edge_index=numpy.array(edges["edge_index"][str(s)]).T,
            edge_attr=numpy.array(edges["edge_weight"][str(s)], dtype=numpy.float64),
            x=cases[s:s + lags].T.copy(), y=cases[s + lags]))
    return snapshots


def test_england_covid_equals_convert_temporal(tmp_path):
    converted = tmp_path / "ec.h5"
    cli("convert", "temporal", ENGLAND_COVID, converted, "--lags", 8)
    path = tessel.write_temporal_store(tmp_path / "py.h5", england_covid_snapshots(),
                                       name="england_covid")
    assert_same_store(path, converted)
    if same_hdf5_as_tessel():
        assert filecmp.cmp(path, converted, shallow=False)
    info = cli("info", path, "--json").summary
    assert info["num_snapshots"] == 53 and info["num_nodes"] == 129


@pytest.mark.parametrize("full", [False, True])
def test_read_back_and_written_again_is_the_same_store(tmp_path, full):
    converted = tmp_path / "ec.h5"
    flags = ["--full-snapshots"] if full else []
    cli("convert", "temporal", ENGLAND_COVID, converted, "--lags", 8, "--standardize",
        "--valid-frac", 0.1, *flags)
    store = tessel.read_temporal_store(converted)
    assert (store.train, store.valid, store.test) == ((0, 42), (42, 47), (47, 53))
    assert len(store.snapshots) == 53 and store.snapshots[0].x.shape == (129, 8)
    path = tessel.write_temporal_store(tmp_path / "again.h5", store.snapshots, name=store.name,
                                       train=store.train, valid=store.valid, test=store.test,
                                       full_snapshots=full)
    assert_same_store(path, converted)


def test_a_python_temporal_store_trains(tmp_path):
    path = tessel.write_temporal_store(tmp_path / "ec.h5", england_covid_snapshots(),
                                       name="england_covid")
    parts = tmp_path / "parts"
    cli("partition", path, "--parts", 2, "--out", parts)
    p = tessel.read_partition(parts)
    assert p.num_parts == 2 and sorted(numpy.concatenate(p.owned).tolist()) == list(range(129))
    assert all((p.part_of[p.owned[q]] == q).all() for q in range(2))
    out = cli("train", parts, "--mode", "dynamic", "--model", "gcn-gru", "--epochs", 2,
              "--device", "cpu", "--predictions", tmp_path / "pred.h5", "--checkpoint",
              tmp_path / "ck", np=2)
    assert len(out.metrics) == 2 and numpy.isfinite(out.summary["final_test_mse"])
    pred = tessel.read_predictions(tmp_path / "pred.h5")
    assert pred.logits.shape == (53, 129, 1) and pred.predicted is None
    ck = tessel.read_checkpoint(tmp_path / "ck")
    assert ck.mode == "dynamic" and any(n.startswith("gru.") for n in ck.parameters)
    with pytest.raises(ValueError, match="load_state_dict names the parameters of gcn, sage and gat"):
        tessel.load_state_dict(tmp_path / "ck")


def test_repeated_edges_add_their_weights_and_weights_default_to_one(tmp_path):
    x = numpy.ones((3, 1))
    snapshots = [dict(edge_index=[[0, 0, 2], [1, 1, 1]], edge_weight=[1.5, 2.0, 1.0], x=x,
                      y=[0.0, 1.0, 2.0]),
                 (numpy.array([[2], [0]]), None, x, numpy.zeros(3))]
    path = tessel.write_temporal_store(tmp_path / "t.h5", snapshots, train=(0, 1), test=(1, 2))
    store = tessel.read_temporal_store(path)
    s0, s1 = store.snapshots
    assert s0.edge_index.tolist() == [[0, 2], [1, 1]] and s0.edge_weight.tolist() == [3.5, 1.0]
    assert s1.edge_index.tolist() == [[2], [0]] and s1.edge_weight.tolist() == [1.0]
    assert (store.train, store.valid, store.test) == ((0, 1), (0, 0), (1, 2))
    cli("info", path)


def small_snapshots():
    return [dict(edge_index=[[0, 1], [1, 2]], x=numpy.zeros((3, 2)), y=numpy.zeros(3))
            for _ in range(3)]


BAD_SNAPSHOTS = [
    (lambda s: s[1].update(edge_weight=[1.0, -2.0]),
     r"^snapshots\[1\]\.edge_weight\[1\] = -2\.0: edge weights must be >= 0"),
    (lambda s: s[2].update(x=numpy.zeros((4, 2))),
     r"^snapshots\[2\]\.x: shape \[4, 2\], but snapshot 0 has \[3, 2\]"),
    (lambda s: s[0].update(x=[[0.0, 0.0], [0.0], [0.0, 0.0]]),
     r"^snapshots\[0\]\.x: row 1 has 1 value, but row 0 has 2"),
    (lambda s: s[1]["x"].__setitem__((2, 1), numpy.nan),
     r"^snapshots\[1\]\.x: row 2 column 1 is nan, expected a finite number"),
    (lambda s: s[1].update(edge_index=[[0, 3], [1, 2]]),
     r"^snapshots\[1\]\.edge_index: edge 1 \(column 1\) is 3 -> 2: 3 is not a node id"),
    (lambda s: s[2].update(y=numpy.zeros(2)), r"^snapshots\[2\]\.y: 2 targets for 3 nodes"),
    (lambda s: s[1].update(edge_weight=[1.0]),
     r"^snapshots\[1\]\.edge_weight: 1 weights for 2 edges"),
    (lambda s: s[0].update(y=[0.0, 0.5, 1.0]),
     r"^snapshots\[0\]\.y row 1 is 0\.5, expected a class in \[0, 2\) or -1"),
]


@pytest.mark.parametrize("change,message", BAD_SNAPSHOTS)
def test_bad_snapshots_are_refused_before_anything_is_written(tmp_path, change, message):
    snapshots = small_snapshots()
    change(snapshots)
    with pytest.raises(ValueError, match=message):
        tessel.write_temporal_store(tmp_path / "t.h5", snapshots, num_classes=2)
    assert os.listdir(tmp_path) == []


def test_bad_split_ranges_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"^train = \(0, 4\): expected a snapshot range"):
        tessel.write_temporal_store(tmp_path / "t.h5", small_snapshots(), train=(0, 4))
    with pytest.raises(ValueError, match="leave no training snapshot"):
        tessel.write_temporal_store(tmp_path / "t.h5", small_snapshots(), train_frac=0.2)
    assert os.listdir(tmp_path) == []
