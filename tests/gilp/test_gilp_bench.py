"""benchmarks/gilp_throughput.py on the smoke profile: a real training measurement's row, the
Markdown table, and bad input refused before anything is measured."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gilp_throughput.py"


def _load():
    spec = importlib.util.spec_from_file_location("benchmarks_gilp_throughput", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_training_row_and_markdown(tmp_path, capsys):
    bench = _load()
    out = tmp_path / "out"
    status = bench.main(["--what", "train", "--profile", "smoke", "--bench", "toolchain",
                         "--backbones", "mlp", "--work", str(tmp_path / "w"), "--out", str(out),
                         "--markdown"])
    assert status == 0
    (row,) = [json.loads(line) for line in (out / "gilp_throughput.jsonl").read_text().splitlines()]
    assert (row["kind"], row["bench"], row["backbone"], row["profile"]) == (
        "train", "toolchain", "MLP", "smoke")
    assert row["steps_per_second"] > 0 and row["steps_per_epoch"] >= 1
    # The extrapolation covers the profile's epochs at the steady rate, plus the compile.
    steady = row["epochs"] * row["steps_per_epoch"] / row["steps_per_second"]
    assert row["est_train_s"] >= steady - 0.1
    assert "| cpu | toolchain | MLP |" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--what", "everything"], ["--what", ","], ["--bench", "chess"],
                                  ["--backbones", "transformer"], ["--profile", "huge"],
                                  ["--tasks", "0"]])
def test_bad_input_exits_2_and_measures_nothing(tmp_path, argv):
    bench = _load()
    with pytest.raises(SystemExit) as exc:
        bench.main([*argv, "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    assert not (tmp_path / "out").exists()


def test_sim_without_a_checkpoint_is_a_one_line_error(tmp_path, capsys):
    bench = _load()
    status = bench.main(["--what", "sim", "--profile", "smoke", "--bench", "taskgraph",
                         "--work", str(tmp_path / "w"), "--out", str(tmp_path / "out")])
    assert status == 2
    assert "missing checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "out" / "gilp_throughput.jsonl").exists()
