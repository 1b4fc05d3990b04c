"""Tessel from Python: graphs in from numpy, scipy, PyG and DGL; predictions, embeddings,
metrics, partitions and trained models out into numpy and PyG; the `tessel` program run from
Python. Pure Python over numpy and h5py (scipy for sparse matrices); torch, torch_geometric,
dgl and pandas are used when present. Guide: docs/python.md."""

__version__ = "0.1.0"

from .cli import RunResult, TesselError, find_binary, run
from .model import Checkpoint, load_state_dict, read_checkpoint, to_pyg_model
from .results import (EdgeScores, Partition, Predictions, read_embeddings, read_metrics, read_partition,
                      read_predictions, read_summary)
from .store import Store, from_dgl, from_pyg, read_store, write_store
from .temporal import Snapshot, TemporalStore, read_temporal_store, write_temporal_store

__all__ = [
    "Checkpoint", "EdgeScores", "Partition", "Predictions", "RunResult", "Snapshot", "Store", "TemporalStore",
    "TesselError", "find_binary", "from_dgl", "from_pyg", "load_state_dict", "read_checkpoint",
    "read_embeddings", "read_metrics", "read_partition", "read_predictions", "read_store",
    "read_summary", "read_temporal_store", "run", "to_pyg_model", "write_store",
    "write_temporal_store",
]
