"""The environment's action contract (`game/env.py`) and the conformance check every registered
agent passes (`harness/conformance.py`); a deliberately broken agent fails it."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsjax.battleship import agents as agents_lib
from bsjax.battleship.agents import GreedyAgent
from bsjax.battleship.config import GRAND, PAPER
from bsjax.battleship.game import bitboard, rules, suites
from bsjax.battleship.game.env import Env
from bsjax.battleship.harness.conformance import CHECKS, ConformanceError, check_agent
from bsjax.battleship.types import ASK, Action, ask, shoot
from bsjax.core import fastpath

ENV = Env(PAPER)
BOARD = suites.synthetic_suite()[0]          # B01: ship cells include A2 (cell 1)
SHIP_CELL = int(np.flatnonzero(BOARD.grid.reshape(-1))[0])
WATER_CELL = int(np.flatnonzero(BOARD.grid.reshape(-1) == 0)[0])
REGION = bitboard.pack(jnp.arange(64) < 8)   # row A
_step = jax.jit(ENV.step)
_observe = jax.jit(ENV.observe)


def _new():
    return ENV.init(jnp.asarray(BOARD.spans, jnp.int32), jnp.int32(1))


def test_a_reshot_hit_counts_its_shot_and_no_hit():
    """A captain cannot win by shooting one hit cell 14 times."""
    state = _new()
    state, hit = _step(jax.random.key(0), state, shoot(SHIP_CELL, PAPER))
    assert bool(hit) and int(state.hits) == 1 and int(state.shots) == 1
    for k in range(13):
        state, again = _step(jax.random.key(k), state, shoot(SHIP_CELL, PAPER))
        assert not bool(again)
    assert int(state.hits) == 1 and int(state.shots) == 14 and not bool(state.won)
    assert int(bitboard.popcount(state.obs.hit_bits)) == 1
    assert float(rules.f1_score(state.shots, state.hits, 14)) == pytest.approx(2 / 28)


def test_a_reshot_miss_and_an_out_of_range_cell_reveal_nothing():
    state, _ = _step(jax.random.key(0), _new(), shoot(WATER_CELL, PAPER))
    obs = state.obs
    for cell in (WATER_CELL, -1, 64):
        after, outcome = _step(jax.random.key(1), state, shoot(cell, PAPER))
        assert not bool(outcome) and int(after.shots) == int(state.shots) + 1
        np.testing.assert_array_equal(after.obs.miss_bits, obs.miss_bits)
        np.testing.assert_array_equal(after.obs.hit_bits, obs.hit_bits)
        assert int(after.turn) == int(state.turn) + 1


def test_a_question_past_the_budget_uses_its_turn_and_answers_nothing():
    state = _new()
    for k in range(PAPER.max_questions):
        state, _ = _step(jax.random.key(k), state, ask(0, REGION))
    assert int(state.questions) == PAPER.max_questions
    view = _observe(state)
    assert not bool(view.can_ask) and int(view.questions_left) == 0
    after, outcome = _step(jax.random.key(99), state, ask(0, REGION))
    assert not bool(outcome)
    assert int(after.turn) == int(state.turn) + 1
    assert int(after.questions) == int(state.questions) and int(after.shots) == 0
    np.testing.assert_array_equal(after.obs.answers, state.obs.answers)
    assert int(after.obs.n_questions) == PAPER.max_questions


def test_asking_forever_ends_the_game_at_the_turn_limit():
    state = _new()
    for k in range(PAPER.max_turns):
        assert not bool(state.done)
        state, _ = _step(jax.random.key(k), state, ask(0, REGION))
    assert bool(state.done) and not bool(state.won) and int(state.turn) == PAPER.max_turns


def test_the_view_carries_the_legal_actions():
    state, _ = _step(jax.random.key(0), _new(), shoot(SHIP_CELL, PAPER))
    state, _ = _step(jax.random.key(1), state, shoot(WATER_CELL, PAPER))
    view = _observe(state)
    legal = np.asarray(view.legal_shots)
    assert not legal[SHIP_CELL] and not legal[WATER_CELL] and legal.sum() == 62
    np.testing.assert_array_equal(legal, np.asarray(rules.unknown_cells(PAPER, state.obs)))
    assert bool(view.can_ask)
    done = state.replace(done=jnp.bool_(True))
    finished = _observe(done)
    assert not np.asarray(finished.legal_shots).any() and not bool(finished.can_ask)


@settings(max_examples=20, deadline=None)
@given(actions=st.lists(st.tuples(st.integers(0, 2), st.integers(-2, 66)), min_size=1,
                        max_size=70))
def test_any_action_sequence_keeps_the_contract(actions):
    """Arbitrary actions (legal or not, unknown kinds too): counters only grow within their
    budgets, hits are the revealed ship cells, an illegal action only uses its turn (and its
    shot), a finished game never changes."""
    state = _new()
    truth = BOARD.grid.reshape(-1) > 0
    for k, (kind, cell) in enumerate(actions):
        action = Action(jnp.int32(kind), jnp.int32(cell), jnp.int32(-1), REGION)
        legal = bool(ENV.is_legal(_observe(state), action))
        after, outcome = _step(jax.random.key(k), state, action)
        if bool(state.done):
            chex_equal = jax.tree.map(lambda a, b: bool(jnp.all(a == b)), state, after)
            assert all(jax.tree.leaves(chex_equal))
            continue
        assert int(after.turn) == int(state.turn) + 1
        assert int(after.shots) == int(state.shots) + (kind != ASK)
        assert int(after.questions) == int(state.questions) + (kind == ASK and legal)
        if not legal:
            assert not bool(outcome)
            np.testing.assert_array_equal(after.obs.hit_bits, state.obs.hit_bits)
            np.testing.assert_array_equal(after.obs.miss_bits, state.obs.miss_bits)
        hit_cells = bitboard.unpack_np(np.asarray(after.obs.hit_bits), 64)
        assert not np.any(hit_cells & ~truth) and int(after.hits) == int(hit_cells.sum())
        assert int(after.shots) <= PAPER.max_shots and int(after.turn) <= PAPER.max_turns
        state = after


# ----------------------------------------------------------------------------- conformance


@dataclasses.dataclass(frozen=True)
class ReshootingGreedy(GreedyAgent):
    """A faulty captain: once it has a hit, it shoots its first hit cell again and again."""

    name = "reshoot"

    def decide(self, key, params, view, sampler, belief, state):
        action, p, state = super().decide(key, params, view, sampler, belief, state)
        hit_cells = bitboard.unpack(view.obs.hit_bits, self.config.n_cells)
        cell = jnp.where(jnp.any(hit_cells), fastpath.first_argmax(hit_cells), action.cell)
        return action._replace(cell=cell), p, state


@pytest.mark.parametrize("agent", sorted(agents_lib.BUILT_IN))
def test_every_registered_agent_passes_the_conformance_check(agent):
    report = check_agent(agent, boards=2, seeds=1, particles=32)
    assert report.passed and report.actions > 0 and report.illegal == 0
    assert report.row()["keys"] == "pass" and report.traces <= 1


@pytest.mark.parametrize("sampler, config", [("chain", PAPER), ("exact", PAPER), ("importance", PAPER),
                                             ("particles", GRAND)])
def test_the_samplers_pass_the_conformance_check(sampler, config):
    report = check_agent("greedy", sampler=sampler, config=config, boards=2, seeds=1,
                         particles=32)
    assert report.passed and report.actions > 0


def test_a_reshooting_agent_fails_the_legal_check():
    report = check_agent(ReshootingGreedy(PAPER), boards=1, seeds=1, particles=32,
                         raise_on_failure=False)
    assert set(report.failures) == {"legal"} and report.illegal > 0
    assert report.row()["legal"] == "fail" and all(report.row()[c] == "pass"
                                                   for c in CHECKS if c != "legal")
    with pytest.raises(ConformanceError, match="check 'legal' failed: game 0, turn .*shot"):
        check_agent(ReshootingGreedy(PAPER), boards=1, seeds=1, particles=32)


def test_a_key_reusing_agent_fails_the_keys_check():
    @dataclasses.dataclass(frozen=True)
    class KeyReuser(GreedyAgent):
        name = "key-reuser"

        def decide(self, key, params, view, sampler, belief, state):
            action, p, state = super().decide(jax.random.split(key)[0], params, view, sampler,
                                              belief, state)
            noise = jax.random.uniform(key) + jax.random.uniform(key)   # the same key twice
            return action, p + 0.0 * noise, state

    report = check_agent(KeyReuser(PAPER), boards=1, seeds=1, particles=32,
                         raise_on_failure=False)
    assert "keys" in report.failures
