"""The front door: `bsjax.play` (params by name, sweeps in one compiled program, arrays and
DataFrames), `bsjax.load_run`, and the agent registry's refusals."""

from __future__ import annotations

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest

import bsjax
from bsjax.battleship import agents as agents_lib
from bsjax.battleship.agents import GreedyAgent, WMAAgent, make_agent, register_agent
from bsjax.battleship.config import GRAND, PAPER
from bsjax.battleship.harness import experiment, run_config
from bsjax.battleship.harness import params as params_lib
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.core.errors import UsageError
from bsjax.core.stats import paired_bootstrap

SMALL = dict(boards="B01,B02", seeds=2, particles=32, progress=False)


@pytest.fixture(scope="module")
def tau_sweep():
    return bsjax.play("mra", params={"tau": [0.5, 0.9]}, **SMALL)


def test_the_minimal_call_plays_the_games_in_memory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = bsjax.play("wma", **SMALL)
    assert res.f1.shape == res.won.shape == res.shots.shape == (1, 4)
    assert res.boards == ["B01", "B01", "B02", "B02"] and res.seeds == [0, 1, 0, 1]
    assert res.records["kind"].shape == (1, 4, PAPER.max_turns)
    assert (res.records["active"].sum(axis=2) == res.turns).all()
    frame = res.to_pandas()
    assert len(frame) == 4 and {"board", "seed", "f1", "won", "questions"} <= set(frame)
    np.testing.assert_array_equal(frame["f1"], res.f1[0])
    turns = res.turns_frame()
    assert len(turns) == int(res.turns.sum())
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_sweep_is_params_by_games_and_each_point_is_its_own_play(tau_sweep):
    assert tau_sweep.f1.shape == (2, 4) and tau_sweep.points == [{"tau": 0.5}, {"tau": 0.9}]
    alone = bsjax.play("mra", params={"tau": 0.9}, **SMALL)
    np.testing.assert_array_equal(alone.f1[0], tau_sweep.f1[1])
    for name in ("kind", "cell", "hit_probability", "confidence"):
        np.testing.assert_array_equal(alone.records[name][0], tau_sweep.records[name][1])
    summary = tau_sweep.summary()
    assert list(summary["tau"]) == [0.5, 0.9] and list(summary["games"]) == [4, 4]
    frame = tau_sweep.to_pandas()
    assert len(frame) == 8 and list(frame["tau"]) == [0.5] * 4 + [0.9] * 4


def test_the_games_are_those_of_bsjax_play_with_the_same_seed(tmp_path):
    res = bsjax.play("greedy", boards="B01,B02", seeds=1, particles=32, progress=False)
    cfg = RunConfig(agent="greedy", boards="B01,B02", seeds=1, particles=32)
    experiment.run(cfg, tmp_path / "run")
    run = bsjax.load_run(tmp_path / "run")
    assert list(run.games["board"]) == res.boards
    np.testing.assert_array_equal(run.games["f1"], res.f1[0])
    np.testing.assert_array_equal(run.games["shots"], res.shots[0])
    assert len(run.events) == int(res.turns.sum()) and run.config["agent"] == "greedy"


def test_the_importance_prior_reaches_the_belief_and_the_run(tmp_path):
    kw = dict(protocol="grand", sampler="importance", boards="B01,B02", seeds=1, particles=64)
    res = bsjax.play("greedy", prior="uniform", progress=False, **kw)
    experiment.run(RunConfig(agent="greedy", prior="uniform", **kw), tmp_path / "run")
    run = bsjax.load_run(tmp_path / "run")
    np.testing.assert_array_equal(run.games["shots"], res.shots[0])
    assert run.config["prior"] == "uniform"
    player = run_config.make_player(RunConfig(agent="greedy", prior="uniform", **kw), GRAND)
    assert player.sampler.prior == "uniform"
    with pytest.raises(UsageError, match="unknown --prior 'flat'"):
        bsjax.play("greedy", prior="flat", progress=False, **kw)


def _player(name="mra"):
    from bsjax.battleship.belief.particles import ParticleSampler
    from bsjax.battleship.harness.player import Player
    return Player(PAPER, make_agent(name, PAPER), ParticleSampler(PAPER, 32))


def test_compare_pairs_each_point_with_the_baselines_games(tau_sweep):
    table = tau_sweep.compare(tau_sweep, baseline_point=0)
    assert list(table["tau"]) == [0.5, 0.9] and list(table["n_paired"]) == [4, 4]
    assert table.loc[0, ["delta_f1", "delta_f1_low", "delta_f1_high"]].tolist() == [0, 0, 0]
    expected = paired_bootstrap(tau_sweep.f1[1], tau_sweep.f1[0])
    assert np.isclose(table.loc[1, "delta_f1"], expected.mean)
    assert np.isclose(table.loc[1, "delta_f1_low"], expected.low)
    # Paired by board and seed, not by position: the baseline's games in another order.
    one_board = bsjax.play("mra", params={"tau": 0.5}, **{**SMALL, "boards": "B02"})
    half = tau_sweep.compare(one_board)
    assert list(half["n_paired"]) == [2, 2] and half.loc[0, "delta_f1"] == 0
    none = tau_sweep.compare(bsjax.play("mra", **{**SMALL, "boards": "B03"}))
    assert list(none["n_paired"]) == [0, 0] and none["delta_f1"].isna().all()
    with pytest.raises(ValueError, match="baseline_point"):
        tau_sweep.compare(tau_sweep, baseline_point=2)


def test_calibration_counts_every_shot_once_in_its_bin(tau_sweep):
    table = tau_sweep.calibration()
    assert list(table["tau"].unique()) == [0.5, 0.9]
    for r, (_, point) in enumerate(table.groupby("tau", sort=False)):
        assert point["shots"].sum() == tau_sweep.shots[r].sum()
        hits = np.nansum(point["hit_rate"] * point["shots"])
        assert np.isclose(hits, tau_sweep.hits[r].sum())
        filled = point[point["shots"] > 0]
        assert ((filled["mean_p"] >= filled["p_low"]) & (filled["mean_p"] <= filled["p_high"])).all()
        made = (tau_sweep.shots[r] - tau_sweep.hits[r]).mean()
        assert np.allclose(point["misses"], made)
    one = tau_sweep.calibration(bins=(0.0, 1.0))
    assert list(one["shots"]) == list(tau_sweep.shots.sum(axis=1))
    mean_p = one["mean_p"].to_numpy()
    assert np.allclose(one["misses_foretold"], (1 - mean_p) * one["shots"] / 4)


def test_calibration_puts_a_bins_edge_in_the_bin_below():
    res = bsjax.play("greedy", **SMALL)
    shots = res.records["active"] & (res.records["kind"] == 0)
    res.records["hit_probability"] = np.where(shots, 0.5, np.nan).astype(np.float32)
    res.records["hit_probability"][0, 0, np.flatnonzero(shots[0, 0])[:2]] = (0.0, 1.0)
    table = res.calibration(bins=(0.0, 0.5, 1.0))
    assert list(table["shots"]) == [int(shots.sum()) - 1, 1]


@pytest.mark.parametrize("bins", [(0.5,), (0.0, 0.5, 0.5), (0.2, 1.5), ((0.0, 1.0),)])
def test_calibration_refuses_bins_that_are_not_edges(bins):
    res = bsjax.play("greedy", boards="B01", seeds=1, particles=8, progress=False)
    with pytest.raises(ValueError, match="increasing edges"):
        res.calibration(bins=bins)


def test_a_grid_of_two_axes_and_fixed_values():
    player = _player()
    points, trees = params_lib.grid(player, {"tau": [0.6, 0.8], "cooldown": [1, 3],
                                             "revision": "on", "presets": "coarse_roi_collapse"})
    assert points == [{"tau": 0.6, "cooldown": 1}, {"tau": 0.6, "cooldown": 3},
                      {"tau": 0.8, "cooldown": 1}, {"tau": 0.8, "cooldown": 3}]
    assert [float(t.agent.tau) for t in trees] == pytest.approx([0.6, 0.6, 0.8, 0.8])
    assert all(t.agent.presets.tolist() == [True, False, False] for t in trees)
    nested = params_lib.with_values(player, {"policy.budgets": [4, 2, 4], "coarse": [0.1, 0, 0]})
    assert nested.agent.policy.budgets.tolist() == [4, 2, 4]
    assert nested.agent.scoring["coarse"].tolist() == pytest.approx([0.1, 0.0, 0.0])


def test_a_list_of_points_plays_each_point_as_the_grid_plays_it():
    # A random search's points: any combination, in order, each the same games as in a grid.
    points = [{"gamma": 0.5, "answer_noise": 0.2}, {"gamma": 0.99}]
    listed = bsjax.play("bayes", params=points, **SMALL)
    assert listed.points == points and listed.f1.shape == (2, 4)
    grid = bsjax.play("bayes", params={"gamma": [0.99, 0.5], "answer_noise": 0.2}, **SMALL)
    np.testing.assert_array_equal(listed.f1[0], grid.f1[1])
    alone = bsjax.play("bayes", params={"gamma": 0.99}, **SMALL)
    np.testing.assert_array_equal(listed.f1[1], alone.f1[0])
    assert not np.array_equal(listed.questions[0], listed.questions[1])


def test_the_answer_model_is_set_by_its_noise_and_tempering():
    """`answer_noise` and `evidence_scale` recompute every leaf as the protocol computes them."""
    import dataclasses as dc
    player = _player("greedy")
    default = params_lib.with_values(player, {})
    assert float(default.answers.match) == pytest.approx(0.82)       # 0.5 + (0.9 - 0.5) 0.8
    noisy = params_lib.with_values(player, {"answer_noise": 0.2, "evidence_scale": 1.0})
    match, mismatch = dc.replace(PAPER, epsilon=0.2, evidence_scale=1.0).answer_likelihood()
    assert float(noisy.answers.match) == np.float32(match) == np.float32(0.8)
    assert float(noisy.answers.gap) == np.float32(match - mismatch)
    assert float(noisy.answers.log_mismatch) == np.float32(np.log(mismatch))
    with pytest.raises(ValueError, match=r"answer_noise must lie in \[0, 1\]"):
        params_lib.with_values(player, {"answer_noise": 2.0})
    res = bsjax.play("greedy", params={"answer_noise": [0.05, 0.2]}, **SMALL)
    assert res.f1.shape == (2, 4) and res.points == [{"answer_noise": 0.05},
                                                     {"answer_noise": 0.2}]


@pytest.mark.parametrize("spec, message", [
    ({"tua": 0.5}, "has no param 'tua'"),
    ({"cooldown": 1.5}, "whole numbers"),
    ({"tau": float("nan")}, "finite"),
    ({"revision": "maybe"}, "on or off"),
    ({"presets": "nope"}, "unknown preset"),
    ({"policy.budgets": [1, 2]}, "shape"),
    ({"tau": []}, "empty"),
    ([], "one or more mappings"),
    ([{"tau": 0.5}, 0.7], "one or more mappings"),
    ([{"tau": 0.5}, {"tua": 0.7}], "has no param 'tua'"),
    ([{"tau": [0.5, 0.7]}], "shape"),
])
def test_bad_params_are_refused_before_anything_plays(spec, message):
    with pytest.raises(UsageError, match=message):
        bsjax.play("mra", params=spec, **SMALL)


def test_an_agent_without_params_says_so():
    with pytest.raises(UsageError, match=r"'greedy' has no param 'tau' \(its params: "
                                         r"answer_noise, evidence_scale\)"):
        bsjax.play("greedy", params={"tau": 0.5}, **SMALL)
    with pytest.raises(UsageError, match=r"'random' has no param 'tau' \(its params: none\)"):
        bsjax.play("random", params={"tau": 0.5}, **SMALL)


def test_given_truths_are_played_and_checked():
    res = bsjax.play("greedy", truths=[list(suites_b01())], seeds=2, particles=32,
                     progress=False)
    assert res.boards == ["T0000", "T0000"] and res.f1.shape == (1, 2)
    assert ((res.hits > 0) & (res.hits <= 14)).all()
    with pytest.raises(UsageError, match="overlap"):
        bsjax.play("greedy", truths=[[0, 0, 0, 0]], progress=False)


def suites_b01():
    from bsjax.battleship.game import suites
    return suites.synthetic_suite()[0].spans


def test_register_agent_refuses_to_replace_a_built_in():
    @dataclasses.dataclass(frozen=True)
    class Impostor(GreedyAgent):
        name = "greedy"

    with pytest.raises(ValueError, match="built-in agent"):
        register_agent(Impostor)
    assert agents_lib.AGENTS["greedy"] is GreedyAgent
    try:
        assert register_agent(Impostor, replace=True) is Impostor
        assert agents_lib.AGENTS["greedy"] is Impostor
    finally:
        agents_lib.AGENTS["greedy"] = GreedyAgent


def test_make_agent_refuses_an_option_the_agent_does_not_take():
    with pytest.raises(ValueError, match="takes no option 'tau'.*params"):
        make_agent("mra", PAPER, tau=0.5)
    with pytest.raises(ValueError, match="takes no option 'variant'"):
        make_agent("wma", PAPER, variant="improved")
    assert make_agent("mra", PAPER, variant="improved").variant == "improved"


def test_a_rule_plugs_into_every_planner_and_its_weight_is_traced():
    @bsjax.scoring_rule(weight=0.0)
    def raw_plus(q, params):
        return q.raw + params["weight"] * q.p_yes

    for name in ("wma", "mra", "wma-reflective", "bayes"):
        agent = make_agent(name, PAPER, rule=raw_plus)
        assert set(agent.default_params().scoring) == {"weight"}
    res = bsjax.play("wma", rule=raw_plus, params={"weight": [0.0, 0.05]}, **SMALL)
    assert res.f1.shape == (2, 4)
    with pytest.raises(UsageError, match="rule and variant apply to an agent given by name"):
        bsjax.play(WMAAgent(PAPER), rule=raw_plus, **SMALL)


def test_load_run_reads_a_study(tmp_path):
    from bsjax.battleship.harness import study as study_lib
    base = RunConfig(agent="mra", boards="B01", seeds=1, particles=32)
    study = study_lib.sweep_study(base, "tau", "0.5,0.9")
    study_lib.run(study, tmp_path / "sweep")
    run = bsjax.load_run(tmp_path / "sweep")
    assert sorted(run.games["row"].unique()) == ["tau=0.5", "tau=0.9"]
    assert set(run.summary) == {"tau=0.5", "tau=0.9"}
    with pytest.raises(ValueError, match="not a bsjax run directory"):
        bsjax.load_run(tmp_path)
    assert json.loads((tmp_path / "sweep" / "study.json").read_text())["kind"] == "sweep"


def test_rows_that_differ_only_in_params_share_one_program_and_equal_their_own_runs(tmp_path):
    """`bsjax sweep` plays its points as one group (one compile); each row's games and events
    are those of its own `bsjax play`, bit for bit."""
    from bsjax.battleship.harness import study as study_lib
    base = RunConfig(agent="mra", boards="B01,B02", seeds=2, particles=32)
    study = study_lib.sweep_study(base, "tau", "0.5,0.9")
    assert [len(g) for g in study_lib.row_groups(study)] == [2]
    study_lib.run(study, tmp_path / "sweep")
    experiment.run(dataclasses.replace(base, tau=0.9), tmp_path / "alone")
    for name in ("games.jsonl", "events.jsonl"):
        grouped = [json.loads(x) for x in (tmp_path / "sweep/runs/tau=0.9" / name).read_text()
                   .splitlines()]
        alone = [json.loads(x) for x in (tmp_path / "alone" / name).read_text().splitlines()]
        strip = lambda rows: [{k: v for k, v in r.items() if k != "wall_seconds"}  # noqa: E731
                              for r in rows]
        assert strip(grouped) == strip(alone), name


def test_rows_of_different_agents_or_llms_keep_their_own_programs():
    from bsjax.battleship.harness import study as study_lib
    groups = study_lib.row_groups(study_lib.paper_study(study_lib.paper_base()))
    assert [[row.id for row in g] for g in groups] == [
        ["B1"], ["B2"], ["B3", "B4"], ["B5"], ["B6"], ["B6-uniform"], ["bayes"]]


def test_params_are_traced_not_compiled_in():
    """Games with other params reuse the compiled turn loop: no static hyperparameter."""
    import jax

    from bsjax.battleship.harness.batch import game_keys
    from bsjax.battleship.harness.play import _compiled, play_batch
    cfg = RunConfig(agent="mra", boards="B01,B02", seeds=1, particles=32)
    game_config, boards = run_config.validate(cfg)
    player = run_config.make_player(cfg, game_config)
    games = experiment.game_list(boards, 1)
    seeds = np.asarray([g.game_seed for g in games])
    keys = game_keys(0, seeds, np.zeros(2, int))
    truths = jnp.asarray([g.spans for g in games], jnp.int32)
    for taus, cooldowns in (([0.3, 0.9], [1, 3]), ([0.72, 0.72], [0, 5])):
        params = [params_lib.with_values(player, {"tau": t, "cooldown": c})
                  for t, c in zip(taus, cooldowns)]
        stacked = jax.tree.map(lambda *xs: np.stack(xs), *params)
        play_batch(keys, player, stacked, truths, jnp.asarray(seeds, jnp.int32))
    init, turns = _compiled(player)
    assert init._cache_size() == 1 and turns._cache_size() == 1


def test_a_second_play_of_the_same_batch_compiles_nothing(tau_sweep):
    """`bsjax.play` again with the agent, sampler and batch shape of an earlier call (here the
    sweep's) reuses its executables: nothing is traced or compiled, and the games are the same."""
    import jax.monitoring

    compiles = []

    def listen(event, seconds, **_):
        if event.endswith(("jaxpr_trace_duration", "backend_compile_duration")):
            compiles.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        again = bsjax.play("mra", params={"tau": [0.5, 0.9]}, **SMALL)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert compiles == [] and again.compile_seconds == 0.0
    np.testing.assert_array_equal(again.f1, tau_sweep.f1)
    np.testing.assert_array_equal(again.records["cell"], tau_sweep.records["cell"])
