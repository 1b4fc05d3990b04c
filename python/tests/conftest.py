"""Shared fixtures: the shipped Cora and england_covid, the tessel program, and runs of it made
once per session (conversions, partitions, trained models)."""

import os
from pathlib import Path

import h5py
import numpy
import pytest

import tessel
from reference import load_ogb_folder

REPO = Path(__file__).resolve().parents[2]
CORA = REPO / "datasets" / "samples" / "cora"
ENGLAND_COVID = REPO / "datasets" / "samples" / "england_covid" / "england_covid.json"

# Runs with more ranks than cores, one thread per rank, idle ranks yielding: as the C++ tests.
for key, value in (("OMP_NUM_THREADS", "1"), ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
                   ("OMPI_MCA_mpi_yield_when_idle", "1"),
                   ("OMPI_MCA_btl_vader_single_copy_mechanism", "none")):
    os.environ.setdefault(key, value)

# Few epochs keep the suite short; the comparisons do not need a converged model.
EPOCHS = "6"


def cli(*args, np=1, **kwargs):
    return tessel.run([str(a) for a in args], np=np, **kwargs)


def assert_same_store(a_path, b_path, ignore_attrs=()):
    """Every group, dataset (dtype, shape, chunks, values) and attribute of two HDF5 files
    agree."""
    with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
        names = []
        a.visit(names.append)
        other = []
        b.visit(other.append)
        assert sorted(names) == sorted(other)
        for obj in [""] + names:
            x, y = a[obj] if obj else a, b[obj] if obj else b
            ax = {k: v for k, v in x.attrs.items() if k not in ignore_attrs}
            ay = {k: v for k, v in y.attrs.items() if k not in ignore_attrs}
            assert ax.keys() == ay.keys(), obj
            for k in ax:
                assert type(ax[k]) is type(ay[k]) and numpy.array_equal(ax[k], ay[k]), (obj, k)
            if isinstance(x, h5py.Dataset):
                assert (x.dtype, x.shape, x.chunks) == (y.dtype, y.shape, y.chunks), obj
                assert numpy.array_equal(x[()], y[()]), obj


def same_hdf5_as_tessel():
    """Whether h5py uses the HDF5 release tessel was built with (the build passes it as
    TESSEL_HDF5_VERSION): then the same arrays written the same way give the same bytes."""
    return os.environ.get("TESSEL_HDF5_VERSION") == h5py.version.hdf5_version


@pytest.fixture(scope="session", autouse=True)
def tessel_binary():
    # No skip: without the program most of this suite cannot say anything, which is a failure.
    path = tessel.find_binary()
    return path


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("session")


@pytest.fixture(scope="session")
def cora_arrays():
    return load_ogb_folder(CORA)


@pytest.fixture(scope="session")
def cora_store(work):
    path = work / "cora.h5"
    cli("convert", "ogb", CORA, path)
    return path


@pytest.fixture(scope="session")
def cora_parts(work, cora_store):
    path = work / "cora-p2"
    cli("partition", cora_store, "--parts", 2, "--out", path)
    return path


@pytest.fixture(scope="session")
def trained(work, cora_parts):
    """A model of each kind trained on 2 ranks, with its predictions, embeddings and
    checkpoint; sage on row-normalized features."""
    runs = {}

    def train(kind):
        if kind not in runs:
            out = work / f"train-{kind}"
            out.mkdir()
            extra = {"sage": ["--normalize-features", "row"],
                     # Unequal hidden and output heads: both layouts are read back.
                     "gat": ["--heads", "3", "--out-heads", "2", "--hidden", "4"]}.get(kind, [])
            result = cli("train", cora_parts, "--model", kind, "--epochs", EPOCHS, "--device",
                         "cpu", "--predictions", out / "pred.h5", "--embeddings", out / "emb.h5",
                         "--checkpoint", out / "ck", "--metrics", out / "metrics.jsonl", *extra,
                         np=2)
            runs[kind] = dict(dir=out, result=result, normalize="--normalize-features" in extra)
        return runs[kind]

    return train
