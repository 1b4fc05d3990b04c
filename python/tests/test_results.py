"""Results back into numpy: partitions, metrics, predictions, embeddings and checkpoints, with
the trained models' logits reproduced from their parameters."""

import numpy
import pytest

import tessel
from conftest import EPOCHS, cli
from reference import forward, normalize_rows, training_graph


def test_read_partition_covers_every_node_and_its_halo(cora_parts, cora_arrays):
    edge_index, x, _, _ = cora_arrays
    n = x.shape[0]
    p = tessel.read_partition(cora_parts)
    assert p.num_parts == 2 and p.part_of.shape == (n,)
    assert sorted(numpy.concatenate(p.owned).tolist()) == list(range(n))
    m = training_graph(edge_index, n)
    assert numpy.array_equal(p.degree, m.sum(axis=1))
    for q in range(2):
        assert (p.part_of[p.owned[q]] == q).all()
        # The halo: every in-neighbour of an owned node that another part owns, each once.
        neighbours = numpy.flatnonzero(m[p.owned[q]].any(axis=0))
        expected = neighbours[p.part_of[neighbours] != q]
        assert sorted(p.halo[q].tolist()) == expected.tolist()
        assert numpy.array_equal(p.halo_owner[q], p.part_of[p.halo[q]])
    src, dst = p.edge_index()
    got = numpy.zeros((n, n))
    got[dst, src] = 1
    assert len(src) == 10556 and numpy.array_equal(got, m)


def within(got, expected):
    scale = numpy.abs(expected).max()
    error = numpy.abs(got - expected).max()
    return scale > 0.05 and error < 1e-4 and error <= 1e-5 * scale + 1e-6


@pytest.mark.parametrize("kind", ["gcn", "sage"])
def test_checkpoint_weights_reproduce_the_logits_in_numpy(kind, trained, cora_arrays):
    run = trained(kind)
    edge_index, x, _, _ = cora_arrays
    state = tessel.load_state_dict(run["dir"] / "ck")
    if kind == "gcn":
        assert list(state) == ["convs.0.lin.weight", "convs.0.bias", "convs.1.lin.weight",
                               "convs.1.bias"]
    else:
        assert list(state) == ["convs.0.lin_l.weight", "convs.0.lin_l.bias",
                               "convs.0.lin_r.weight", "convs.1.lin_l.weight",
                               "convs.1.lin_l.bias", "convs.1.lin_r.weight"]
    assert state["convs.0." + ("lin" if kind == "gcn" else "lin_l") + ".weight"].shape == (16, 1433)
    features = normalize_rows(x) if run["normalize"] else x
    logits, hidden = forward(kind, state, training_graph(edge_index, x.shape[0]), features)
    pred = tessel.read_predictions(run["dir"] / "pred.h5")
    assert pred.logits.shape == (2708, 7) and pred.logits.dtype == numpy.float32
    # Tessel computes in float32, the reference in float64: the bound, 1e-4, and one
    # relative to the logits' size (small after few epochs on row-normalized features), which
    # float32 rounding through two layers stays far inside (measured: 4e-7 of it).
    assert within(pred.logits, logits)
    assert numpy.array_equal(pred.predicted, pred.logits.argmax(axis=1))
    embedding = tessel.read_embeddings(run["dir"] / "emb.h5")
    assert embedding.shape == (2708, 16) and within(embedding, hidden)
    # The predictions are the saved (best) epoch's, whose model best.h5 holds.
    ck = tessel.read_checkpoint(run["dir"] / "ck")
    assert ck.path.name == "best.h5" and ck.epoch == run["result"].summary["saved_epoch"]


def test_gat_checkpoint_weights_reproduce_the_logits_in_numpy(trained, cora_arrays):
    run = trained("gat")
    edge_index, x, _, _ = cora_arrays
    state = tessel.load_state_dict(run["dir"] / "ck")
    assert {k: v.shape for k, v in state.items()} == {
        "convs.0.lin.weight": (12, 1433), "convs.0.att_src": (1, 3, 4),
        "convs.0.att_dst": (1, 3, 4), "convs.0.bias": (12,), "convs.1.lin.weight": (14, 12),
        "convs.1.att_src": (1, 2, 7), "convs.1.att_dst": (1, 2, 7), "convs.1.bias": (7,)}
    logits, hidden = forward("gat", state, training_graph(edge_index, x.shape[0]), x)
    pred = tessel.read_predictions(run["dir"] / "pred.h5")
    assert pred.logits.shape == (2708, 7) and within(pred.logits, logits)
    embedding = tessel.read_embeddings(run["dir"] / "emb.h5")
    assert embedding.shape == (2708, 12) and within(embedding, hidden)


def test_to_pyg_model_reproduces_the_logits(trained, cora_parts):
    torch = pytest.importorskip("torch", reason="optional: torch is not importable")
    pytest.importorskip("torch_geometric", reason="optional: torch_geometric is not importable")
    from reference import load_ogb_folder
    from conftest import CORA
    _, x, _, _ = load_ogb_folder(CORA)
    edge_index = torch.from_numpy(tessel.read_partition(cora_parts).edge_index())
    for kind in ("gcn", "sage", "gat"):
        run = trained(kind)
        model = tessel.to_pyg_model(run["dir"] / "ck")
        features = normalize_rows(x) if run["normalize"] else x
        with torch.no_grad():
            logits = model(torch.from_numpy(features), edge_index).numpy()
        expected = tessel.read_predictions(run["dir"] / "pred.h5").logits
        assert within(logits, expected), kind


def test_metrics_and_summary(trained):
    run = trained("gcn")
    records = tessel.read_metrics(run["dir"] / "metrics.jsonl", frame=False)
    assert [r["epoch"] for r in records] == list(range(1, int(EPOCHS) + 1))
    assert records == run["result"].metrics
    summary = tessel.read_summary(run["dir"] / "metrics.jsonl")
    assert summary == run["result"].summary and summary["mode"] == "full"
    assert summary["best_valid_acc"] == max(r["valid_acc"] for r in records)


def test_metrics_as_a_data_frame(trained):
    pytest.importorskip("pandas", reason="optional: pandas is not importable")
    run = trained("gcn")
    frame = tessel.read_metrics(run["dir"] / "metrics.jsonl")
    assert list(frame["epoch"]) == list(range(1, int(EPOCHS) + 1))
    assert "phases.dense" in frame.columns


def test_sign_mlp_parameters_are_linear_layers(tmp_path, cora_parts):
    cli("train", cora_parts, "--mode", "pipeline", "--hops", 2, "--mlp-layers", 2, "--hidden", 8,
        "--stages", 2, "--split", "1,2", "--epochs", 2, "--checkpoint", tmp_path / "ck", np=2)
    state = tessel.load_state_dict(tmp_path / "ck")
    assert {k: v.shape for k, v in state.items()} == {
        "hops.0.weight": (8, 1433), "hops.0.bias": (8,), "hops.1.weight": (8, 1433),
        "hops.1.bias": (8,), "hops.2.weight": (8, 1433), "hops.2.bias": (8,),
        "mlp.0.weight": (8, 24), "mlp.0.bias": (8,), "mlp.1.weight": (7, 8), "mlp.1.bias": (7,)}
    raw = tessel.read_checkpoint(tmp_path / "ck").parameters
    assert numpy.array_equal(state["mlp.0.weight"], raw["mlp0.weight"].T)
    with pytest.raises(ValueError, match="to_pyg_model builds gcn, sage and gat models"):
        tessel.to_pyg_model(tmp_path / "ck")


def test_bad_result_files_are_named(tmp_path, cora_store):
    with pytest.raises(ValueError,
                       match="format is 'tessel-dataset', expected 'tessel-predictions'"):
        tessel.read_predictions(cora_store)
    with pytest.raises(ValueError, match="no partition.json"):
        tessel.read_partition(tmp_path)
    (tmp_path / "m.jsonl").write_text('{"epoch": 1}\nnot json\n')
    with pytest.raises(ValueError, match=r"m.jsonl line 2: not JSON"):
        tessel.read_metrics(tmp_path / "m.jsonl")
