"""WMA's question policy driven by the reflective runtime (the decomposition's confound row):
revision off plays WMA's games exactly; revision on revises through the paper's presets, and every
revision changes the policy WMA's planner reads."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bsjax.battleship.agents import WMAReflectiveAgent, make_agent
from bsjax.battleship.agents.wma_reflective import EXPLOIT_THRESHOLD
from bsjax.battleship.config import PAPER
from bsjax.battleship.harness import run_config
from bsjax.battleship.harness.batch import game_keys
from bsjax.battleship.harness.experiment import game_list
from bsjax.battleship.harness.play import play_batch
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.battleship.runtime import presets as presets_lib
from bsjax.battleship.runtime.record import COARSE, LATE, LOCAL


def _play(agent: str, **overrides):
    cfg = RunConfig(boards="B01,B04,B07,B10,B13,B16", seeds=4, particles=64, agent=agent,
                    **overrides)
    game_config, boards = run_config.validate(cfg)
    player = run_config.make_player(cfg, game_config)
    games = game_list(boards, cfg.seeds)
    seeds = np.asarray([g.game_seed for g in games], np.int64)
    keys = game_keys(cfg.run_seed, seeds, np.asarray([g.seed_index for g in games]))
    truths = jnp.asarray([g.spans for g in games], jnp.int32)
    params = jax.tree.map(lambda x: np.stack([x] * len(games)),
                          run_config.run_params(cfg, player))
    states, records = play_batch(keys, player, params, truths, jnp.asarray(seeds.astype(np.int32)))
    return jax.device_get(states), records


@pytest.fixture(scope="module")
def wma_games():
    return _play("wma")


def test_initial_policy_is_wma():
    agent = make_agent("wma-reflective", PAPER)
    record = agent.init_state(agent.default_params())
    assert record.policy.budgets.tolist() == [6, 0, 6]
    assert int(record.policy.salvage_start_turn) == 18
    assert float(record.policy.exploit_threshold) == pytest.approx(EXPLOIT_THRESHOLD)
    agent = WMAReflectiveAgent(PAPER)
    params = agent.default_params()
    custom = params.replace(policy=params.policy.replace(
        budgets=jnp.asarray([3, 0, 2], jnp.int32), salvage_start_turn=jnp.int32(15)))
    policy = agent.init_state(custom).policy
    assert policy.budgets[COARSE] == 3 and policy.budgets[LATE] == 2
    assert policy.budgets[LOCAL] == 0 and int(policy.salvage_start_turn) == 15


def test_revision_off_plays_wma_game_for_game(wma_games):
    wma_states, wma_records = wma_games
    states, records = _play("wma-reflective", revision="off")
    for name in ("active", "kind", "cell", "question_id", "outcome", "hit_probability"):
        np.testing.assert_array_equal(getattr(records, name), getattr(wma_records, name),
                                      err_msg=name)
    np.testing.assert_array_equal(states.shots, wma_states.shots)
    np.testing.assert_array_equal(states.won, wma_states.won)
    assert not np.any(records.extras["revision"] >= 0)
    assert np.any(records.kind == 1)   # WMA asks questions on these games: the test is not vacuous


def test_revision_on_revises_and_changes_the_games(wma_games):
    _, wma_records = wma_games
    # A high tau opens the gate often enough to see revisions in 24 games.
    states, records = _play("wma-reflective", revision="on", tau=0.95, cooldown=1)
    revision = records.extras["revision"]
    active = records.active
    assert np.any((revision >= 0) & active)
    # Every revision is one of the presets whose eligibility WMA's policy can meet, and
    # changes the policy the planner reads on the next turn.
    revised_turn, game = np.nonzero((revision >= 0) & active)
    for t, g in zip(revised_turn, game, strict=True):
        before = (records.extras["coarse_budget"][t - 1, g], records.extras["late_budget"][t - 1, g],
                  records.extras["salvage_start_turn"][t - 1, g],
                  records.extras["exploit_threshold"][t - 1, g]) if t else (6, 6, 18,
                                                                           EXPLOIT_THRESHOLD)
        after = (records.extras["coarse_budget"][t, g], records.extras["late_budget"][t, g],
                 records.extras["salvage_start_turn"][t, g],
                 records.extras["exploit_threshold"][t, g])
        assert not np.allclose(before, after)
    # The late re-probe needs a late budget below 6, which WMA's policy never has.
    assert not np.any(revision == 1)
    turns = min(records.kind.shape[0], wma_records.kind.shape[0])
    assert np.any(records.cell[:turns] != wma_records.cell[:turns])


def test_a_preset_subset_revises_only_with_its_presets():
    _, records = _play("mra", revision="on", tau=0.95, cooldown=1, presets="coarse_roi_collapse")
    revision = records.extras["revision"][records.active]
    assert np.any(revision >= 0) and set(revision[revision >= 0].tolist()) == {0}
    # The table is whole (one compiled program for every subset); the mask keeps the gate from
    # ever choosing the others.
    assert "delta_cluster_closeout_bias" in records.extras
    next_kind = records.extras["next_kind"][records.active]
    assert set(next_kind.tolist()) <= {-1, 0}


def test_events_name_a_revision_by_its_index_in_the_papers_table():
    agent = make_agent("mra", PAPER, presets=presets_lib.choose("cluster_closeout_bias"))
    record = agent.init_state(agent.default_params()).replace(revised_now=jnp.bool_(True),
                                                              last_kind=jnp.int32(0))
    assert int(agent.trace(record)["revision"]) == 2
    assert int(agent.trace(record.replace(revised_now=jnp.bool_(False)))["revision"]) == -1
