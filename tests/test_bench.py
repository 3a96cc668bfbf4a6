"""The throughput suite end to end on a tiny grid: JSON lines, PNG, plot-only, Markdown."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One real measurement per batch size (greedy / particles P=32 / G = 1, 2)."""
    out = tmp_path_factory.mktemp("bench")
    throughput = _load("throughput")
    status = throughput.main(["--agents", "greedy", "--samplers", "particles", "--particles", "32",
                              "--sizes", "1,2", "--protocol", "paper", "--out", str(out),
                              "--tag", "tiny"])
    return throughput, out, status


def test_rows_and_png(tiny_run):
    _, out, status = tiny_run
    assert status == 0
    rows = [json.loads(line) for line in (out / "tiny.jsonl").read_text().splitlines()]
    assert [r["games"] for r in rows] == [1, 2]
    for r in rows:
        assert (r["agent"], r["sampler"], r["particles"], r["protocol"]) == (
            "greedy", "particles", 32, "paper")
        assert r["games_per_second"] > 0 and r["seconds"] > 0 and r["compile_seconds"] > 0
        assert r["games_per_second"] == pytest.approx(r["games"] / r["seconds"], rel=1e-3)
        assert 1 <= r["turns"] <= 60 and r["ms_per_turn"] > 0
        assert r["devices"] >= 1 and r["platform"] and r["device"] and r["jax"]
        assert r["timestamp"]
    assert (out / "tiny.png").read_bytes()[:8] == PNG_MAGIC


def test_plot_only_and_markdown(tiny_run, capsys):
    throughput, out, _ = tiny_run
    (out / "tiny.png").unlink()
    capsys.readouterr()
    assert throughput.main(["--plot-only", "--markdown", "--out", str(out), "--tag", "tiny"]) == 0
    assert (out / "tiny.png").read_bytes()[:8] == PNG_MAGIC
    table = capsys.readouterr().out
    assert "| agent | sampler | particles | G = 1 | G = 2 | compile (s) |" in table
    assert "| greedy | `particles` | 32 |" in table

    summarize = _load("summarize")
    assert summarize.main([str(out / "tiny.jsonl")]) == 0
    assert capsys.readouterr().out == table
    assert summarize.main([str(out / "tiny.jsonl"), "--metric", "ms_per_turn"]) == 0
    assert "ms per turn" in capsys.readouterr().out


def test_an_importance_prior_is_a_series_of_its_own():
    from bsjax.battleship.harness import bench
    row = {"agent": "bayes", "sampler": "importance", "particles": 1000, "games": 54,
           "games_per_second": 10.0, "compile_seconds": 1.0, "device": "cpu:0", "devices": 1}
    rows = [row, row | {"prior": "proposal", "games": 108}, row | {"prior": "uniform"}]
    assert list(bench.series(rows)) == [("bayes", "importance", 1000, "cpu:0", 1),
                                        ("bayes", "importance, uniform prior", 1000, "cpu:0", 1)]
    table = bench.markdown_table(rows)
    assert "| bayes | `importance` | 1000 | 10.0 | 10.0 |" in table
    assert "| bayes | `importance, uniform prior` | 1000 | 10.0 |  |" in table


def test_bad_input_measures_nothing(tmp_path, capsys):
    throughput = _load("throughput")
    assert throughput.main(["--agents", "nobody", "--out", str(tmp_path)]) == 2
    assert throughput.main(["--sizes", "0,2", "--out", str(tmp_path)]) == 2
    assert throughput.main(["--plot-only", "--out", str(tmp_path)]) == 2
    assert not any(tmp_path.iterdir())
    assert "error" in capsys.readouterr().err
