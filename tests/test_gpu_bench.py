"""`benchmarks/gpu_bench.py`: the order of its points, its budget, its bad input, one real point."""

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def gpu_bench():
    sys.path.insert(0, str(BENCHMARKS))  # gpu_bench imports its sibling `throughput`
    try:
        spec = importlib.util.spec_from_file_location("benchmarks_gpu_bench",
                                                      BENCHMARKS / "gpu_bench.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCHMARKS))


def _key(p):
    return p["agent"], p["sampler"], p["games"], p["autotune"], p["mh_kernel"], p["step"]


def test_the_plan_asks_the_open_questions_first_and_covers_the_grid(gpu_bench):
    points = gpu_bench.plan()
    keys = [_key(p) for p in points]
    assert len(set(keys)) == len(keys)
    # A single game's speed and the peak first, then the planners at 54 and 65,536 games.
    assert keys[:5] == [("greedy", "particles", g, None, None, None) for g in gpu_bench.SIZES]
    n_planners = 2 * len(gpu_bench.PLANNERS)
    planners = [(p["agent"], p["games"]) for p in points[5:5 + n_planners]]
    assert planners == [(a, g) for a in gpu_bench.PLANNERS for g in (54, 65536)]
    # Then bayes at 65,536 in four steps, the one stepped point.
    assert [p for p in points if p["step"] is not None] == [points[5 + n_planners]]
    assert _key(points[5 + n_planners]) == ("bayes", "particles", 65536, None, None, 16384)
    # The autotuning pair is one program under two levels.
    pair = [p for p in points if p["autotune"] is not None]
    assert [(p["agent"], p["games"], p["autotune"]) for p in pair] == [
        ("wma", 4096, 0), ("wma", 4096, 4)]
    # Every agent x sampler at every size of the grid is somewhere in the plan.
    default = {(p["agent"], p["sampler"], p["games"]) for p in points
               if p["autotune"] is None and p["mh_kernel"] is None and p["step"] is None}
    for agent in ("greedy",) + gpu_bench.PLANNERS:
        for g in gpu_bench.SIZES:
            assert (agent, "particles", g) in default and (agent, "importance", g) in default
        assert {(agent, "chain", 1), (agent, "chain", 54)} <= default
    # Past the grid, greedy alone, last.
    assert [(p["agent"], p["games"]) for p in points[-2:]] == [
        ("greedy", g) for g in gpu_bench.PEAK_SIZES]


def test_the_plan_keeps_to_the_sizes_asked_for(gpu_bench):
    points = gpu_bench.plan((1, 8), ())
    assert {p["games"] for p in points} == {1, 8}
    assert not [p for p in points if p["autotune"] is not None]  # no size above 54: no pair
    assert not [p for p in points if p["step"] is not None]


def test_a_points_estimate_grows_with_its_batch(gpu_bench):
    point = {"agent": "wma", "sampler": "particles", "games": 4096}
    assert gpu_bench.estimate_seconds(point, []) == 30.0
    rows = [{"agent": "wma", "sampler": "particles", "games": 1024, "compile_seconds": 10.0,
             "seconds": 0.5},
            {"agent": "wma", "sampler": "particles", "games": 65536, "error": "out of memory"}]
    assert gpu_bench.estimate_seconds(point, rows) == pytest.approx(10.0 + 2 * 0.5 * 4)
    smaller = dict(point, games=54)  # never assumed faster than the rate measured
    assert gpu_bench.estimate_seconds(smaller, rows) == pytest.approx(10.0 + 2 * 0.5)


@pytest.mark.parametrize("argv", [["--games", "0,54"], ["--games", "one"], ["--games", ""],
                                  ["--budget-s", "0"], ["--peak", "x"], ["--tag", "a/b"],
                                  ["--point-timeout-s", "0"], ["--isolate-from", "0"]])
def test_bad_input_exits_2_and_writes_nothing(gpu_bench, tmp_path, capsys, argv):
    assert gpu_bench.main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()
    assert capsys.readouterr().err.startswith("gpu-bench: error:")


def test_a_short_budget_measures_the_first_point_and_skips_the_rest(gpu_bench, tmp_path):
    out = tmp_path / "out"
    # Every point in a child process (`--isolate-from 1`): the path large points take.
    status = gpu_bench.main(["--games", "1", "--peak", "", "--particles", "32", "--budget-s", "30.5",
                             "--no-identity", "--isolate-from", "1", "--out", str(out),
                             "--tag", "cpu"])
    assert status == 0
    rows = [json.loads(line) for line in (out / "cpu.jsonl").read_text().splitlines()]
    assert (rows[0]["agent"], rows[0]["sampler"], rows[0]["games"]) == ("greedy", "particles", 1)
    assert "error" not in rows[0] and rows[0]["games_per_second"] > 0
    # A second point may fit the budget; on a loaded machine it may instead be stopped at its
    # share of the budget, which is written as such (never as a measurement).
    assert all(r.get("games_per_second", 0) > 0 or "not finished" in r.get("error", "")
               for r in rows[1:])
    assert rows[0]["mh_kernel"] == "auto" and rows[0]["autotune_level"] == 0
    assert rows[0]["command"].startswith("benchmarks/gpu_bench.py --games 1")
    # An unmeasured series is guessed at 30 s: after the first point, the 30.5 s budget holds no
    # other agent (a second greedy/particles point may fit).
    assert {(r["agent"], r["sampler"]) for r in rows} == {("greedy", "particles")}
    assert (out / "cpu.png").read_bytes()[:8] == PNG_MAGIC


def test_an_isolated_point_past_its_time_is_a_row_and_the_run_goes_on(gpu_bench, tmp_path):
    out = tmp_path / "out"
    status = gpu_bench.main(["--games", "1", "--peak", "", "--particles", "32", "--budget-s", "31",
                             "--no-identity", "--isolate-from", "1", "--point-timeout-s", "0.5",
                             "--out", str(out), "--tag", "cpu"])
    assert status == 0
    rows = [json.loads(line) for line in (out / "cpu.jsonl").read_text().splitlines()]
    assert rows[0]["error"] == "not finished in 0.5 s (stopped)"
    assert (rows[0]["agent"], rows[0]["games"], rows[0]["mh_kernel"]) == ("greedy", 1, "auto")
    assert all("error" in r for r in rows)  # every point tried was stopped, none lost the run
    assert not (out / "cpu.png").exists()   # nothing measured, nothing to draw


def test_a_stepped_point_plays_its_turns_in_steps_and_leaves_the_setting_alone(gpu_bench,
                                                                             monkeypatch):
    monkeypatch.delenv("BSJAX_GAMES_PER_STEP", raising=False)
    point = {"agent": "greedy", "sampler": "particles", "games": 4, "autotune": None,
             "mh_kernel": None, "step": 2}
    row = gpu_bench.measure_point(point, 32, "paper", {})
    assert "error" not in row, row
    assert row["games_per_step"] == 2 and row["steps_per_turn"] == 2 and row["batch_size"] == 4
    assert "BSJAX_GAMES_PER_STEP" not in os.environ
