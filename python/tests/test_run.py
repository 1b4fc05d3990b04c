"""tessel.run: the program under mpirun, its summary and metrics as values, its one-line errors
as TesselError."""

import pytest

import tessel
from conftest import cli


def test_train_gives_its_summary_and_metrics(cora_parts, tmp_path):
    result = tessel.run(["train", str(cora_parts), "--epochs", "3", "--device", "cpu"], np=2)
    assert result.command[0].endswith("mpirun") and "-np" in result.command
    assert result.summary["summary"] is True and result.summary["epochs"] == 3
    assert [r["epoch"] for r in result.metrics] == [1, 2, 3]
    assert "best valid acc" in result.stdout
    # A --metrics file the caller names is the one read (relative to cwd).
    mine = tessel.run(f"train {cora_parts} --epochs 2 --device cpu --metrics own.jsonl", np=2,
                      cwd=tmp_path)
    assert (tmp_path / "own.jsonl").is_file() and len(mine.metrics) == 2
    assert mine.command.count("--metrics") == 1
    # One rank runs the program itself, without mpirun.
    one = tessel.run(["partition", "--check", str(cora_parts)], np=1)
    assert one.command[0] == tessel.find_binary() and one.summary is None


def test_an_error_is_the_programs_one_line_message(tmp_path):
    missing = tmp_path / "missing.h5"
    with pytest.raises(tessel.TesselError) as e:
        tessel.run(["info", str(missing)])
    assert str(e.value) == e.value.message == f"{missing}: no such file"
    assert e.value.returncode == 2 and "tessel: error:" in e.value.stderr


def test_an_error_under_mpirun_is_the_programs_message(cora_parts):
    with pytest.raises(tessel.TesselError) as e:
        tessel.run(["train", str(cora_parts), "--epochs", "1"], np=3)
    assert e.value.message == (f"{cora_parts} holds a partition into 2 parts, but 3 ranks are "
                               "running: run mpirun -np 2")


def test_the_program_is_found_through_tessel_bin(monkeypatch, tmp_path):
    found = tessel.find_binary()
    monkeypatch.setenv("TESSEL_BIN", str(tmp_path / "nothing"))
    with pytest.raises(tessel.TesselError, match=r"TESSEL_BIN=.*nothing is not an executable"):
        tessel.run(["--version"])
    monkeypatch.setenv("TESSEL_BIN", found)
    assert tessel.run(["--version"]).stdout.startswith("tessel ")
    with pytest.raises(tessel.TesselError, match="mpirun-that-is-not-there is not on PATH"):
        tessel.run(["--version"], np=2, mpirun="mpirun-that-is-not-there")


def test_bench_gives_its_report(cora_parts, tmp_path):
    out = tmp_path / "report"
    result = cli("bench", cora_parts, "--modes", "full", "--epochs", 2, "--quiet", "--out", out,
                 np=2)
    assert result.summary["format"] == "tessel-bench"
    assert [m["mode"] for m in result.summary["modes"]] == ["full"]
