"""Agent params from the command line and study files (`--set NAME=VALUE`, `sweep --param` of an
agent param, `params = {...}` in an experiment file): the same games as `bsjax.play(params=...)`,
recorded in run.json, one compiled program for a sweep, and resumable."""

from __future__ import annotations

import dataclasses
import json

import pytest
from test_cli import run_cli

from bsjax.battleship.harness import api, experiment, study
from bsjax.battleship.harness.run_config import RunConfig, normalize_params, result_identity
from bsjax.core.errors import UsageError

GAME = ["--agent", "bayes", "--boards", "B01,B02", "--seeds", "1", "--particles", "32"]
KW = dict(boards="B01,B02", seeds=1, particles=32, progress=False)


def _f1(run_dir) -> dict:
    rows = [json.loads(line) for line in (run_dir / "games.jsonl").read_text().splitlines()]
    return {(r["board"], r["seed"]): r["f1"] for r in rows}


def _api_f1(result, point: int = 0) -> dict:
    return {(b, s): float(f) for b, s, f in zip(result.boards, result.seeds, result.f1[point])}


def test_set_plays_the_games_of_play_params_and_is_recorded(tmp_path):
    proc = run_cli("play", *GAME, "--set", "gamma=0.5", "--out", "run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "run"
    assert json.loads((run / "run.json").read_text())["config"]["params"] == {"gamma": 0.5}
    sweep = api.play("bayes", params={"gamma": [0.5, 0.95]}, **KW)
    assert _f1(run) == _api_f1(sweep, 0)
    assert _f1(run) != _api_f1(sweep, 1)  # the param took effect (bayes's own γ is 0.95)
    # A resume with the same params finds every game done; other params are refused.
    again = run_cli("play", *GAME, "--set", "gamma=0.5", "--out", "run", "--resume", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert _f1(run) == _api_f1(sweep, 0)
    other = run_cli("play", *GAME, "--set", "gamma=0.6", "--out", "run", "--resume",
                    cwd=tmp_path)
    assert other.returncode == 2 and "different configuration" in other.stderr
    lens = run_cli("lens", "run", cwd=tmp_path)
    assert lens.stdout.splitlines()[0] == "bayes, paper protocol, params gamma=0.5"


def test_a_sweep_of_an_agent_param_is_one_program_and_plays_play_params_games(tmp_path):
    proc = run_cli("sweep", *GAME, "--param", "gamma=0.5,0.95", "--out", "sw", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    sweep = api.play("bayes", params={"gamma": [0.5, 0.95]}, **KW)
    for point, value in enumerate(("0.5", "0.95")):
        assert _f1(tmp_path / "sw" / "runs" / f"gamma={value}") == _api_f1(sweep, point)
    table = (tmp_path / "sw" / "table.csv").read_text().splitlines()
    assert table[0].split(",")[0] == "gamma"
    assert [line.split(",")[0] for line in table[1:]] == ["0.5", "0.95"]
    made = study.sweep_study(RunConfig(agent="bayes"), "gamma", "0.5,0.95")
    configs = [row.config(made.base) for row in made.rows]
    assert [c.params for c in configs] == [{"gamma": 0.5}, {"gamma": 0.95}]
    assert experiment.groupable(configs)  # params are traced: one compiled program


def test_row_and_flag_params_add_to_the_base_params(tmp_path):
    base = RunConfig(agent="lookahead", params={"margin": 0.1})
    row = study.Row("r", "r", overrides=(("params", {"gamma": 0.85}),))
    assert row.config(base).params == {"gamma": 0.85, "margin": 0.1}
    path = tmp_path / "s.toml"
    path.write_text("[experiment]\nkind = 'sweep'\n[base]\nagent = 'lookahead'\n"
                    "params = {margin = 0.1}\n[sweep]\nparam = 'gamma'\nvalues = [0.85]\n")
    loaded = study.load_toml(path, {"params": {"tail_shots": 2.0}})
    assert loaded.rows[0].config(loaded.base).params == {"gamma": 0.85, "margin": 0.1,
                                                          "tail_shots": 2.0}


def test_params_compare_equal_to_their_run_json():
    cfg = RunConfig(agent="bayes", params={"z": (1, 2), "gamma": 0.9})
    assert list(cfg.params) == ["gamma", "z"] and cfg.params["z"] == [1, 2]
    written = json.loads(json.dumps(dataclasses.asdict(cfg)))
    assert result_identity(written) == result_identity(dataclasses.asdict(cfg))
    assert result_identity(dataclasses.asdict(RunConfig())) == result_identity({})


@pytest.mark.parametrize("bad", [3, {"gamma": float("nan")}, {"": 1}, {"g": {"a": 1}}])
def test_malformed_params_are_refused(bad):
    with pytest.raises(UsageError):
        normalize_params(bad)



def test_a_bench_row_records_the_params_it_ran_with(tmp_path):
    proc = run_cli("bench", "--agent", "bayes", "--particles", "32", "--games", "1",
                   "--set", "gamma=0.5", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["params"] == {"gamma": 0.5}
