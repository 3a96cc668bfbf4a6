"""The look-ahead captain: its outcome trees against brute force, legal actions, bayes's games at
a zero budget, and no retrace when a traced param changes."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bsjax.battleship import belief as belief_lib
from bsjax.battleship.agents import lookahead
from bsjax.battleship.agents.lookahead import (
    LookaheadAgent,
    candidate_shots,
    least_cost,
    script_hits,
    tree_hits,
)
from bsjax.battleship.config import GRAND, PAPER
from bsjax.battleship.game import bitboard, suites
from bsjax.battleship.harness import api
from bsjax.battleship.harness.player import Player
from bsjax.battleship.planning import eig, scoring
from bsjax.battleship.types import ASK, SHOOT
from bsjax.core import fastpath

RNG = np.random.default_rng(7)
OCC = (RNG.random((9, 64)) < 0.3).astype(np.float32)         # [P, C] arbitrary 0/1 boards
W = RNG.random(9).astype(np.float32)
W /= W.sum()
OPEN = RNG.random(64) < 0.8


def ref_paths(occ, w, open_, first, shots):
    """The same expectation as a sum over outcome paths (each particle follows its own)."""
    total = 0.0
    for p in range(len(w)):
        free, cell, weights = open_.copy(), first, w.copy()
        for _ in range(shots):
            hit = occ[p, cell]
            total += w[p] * hit
            weights = weights * (occ[:, cell] == hit)
            free[cell] = False
            cell = int(np.argmax(np.where(free, weights @ occ, -1.0)))
    return total


def test_tree_hits_is_the_expectation_over_each_particles_own_future():
    first = int(np.flatnonzero(OPEN)[3])
    for depth in range(4):
        got = tree_hits(jnp.asarray(OCC), jnp.asarray(W), jnp.asarray(W), jnp.asarray(OPEN),
                        jnp.int32(first), depth)
        np.testing.assert_allclose(float(got), ref_paths(OCC, W, OPEN, first, depth + 1),
                                   rtol=1e-5)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 100), st.integers(1, 16))
def test_the_tpus_columns_from_bitboards_equal_the_occupancys(seed, n_cells, n_columns):
    rng = np.random.default_rng(seed)
    occ = rng.random((11, n_cells)) < rng.uniform(0.05, 0.6)                  # [P, C]
    cells = jnp.asarray(rng.integers(0, n_cells, n_columns), jnp.int32)
    occ_f = jnp.asarray(occ, jnp.float32)
    want = lookahead._columns_by_gather(occ_f, None, cells)
    got = jax.jit(lookahead._columns_by_word)(occ_f, bitboard.pack(jnp.asarray(occ)), cells)
    assert got.dtype == want.dtype and got.shape == (n_columns, 11)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_script_hits_question_first_matches_brute_force():
    answers = RNG.random((5, 9)) < 0.5                          # [Kq, P]
    eps = 0.1
    got = script_hits(jnp.asarray(OCC), jnp.asarray(W), jnp.asarray(OPEN), jnp.asarray(answers),
                      jnp.ones(5, bool), jnp.float32(eps), ("Q", "S"))
    p_yes = answers.astype(np.float32) @ W
    q = int(np.argmax(np.asarray(eig.expected_information_gain(jnp.asarray(p_yes), eps))))
    want = 0.0
    for yes in (True, False):
        like = np.where(answers[q] == yes, 1.0 - eps, eps)
        want += np.max(np.where(OPEN, (W * like) @ OCC, -1.0))
    np.testing.assert_allclose(float(got), want, rtol=1e-5)
    # A script of one shot is the MAP cell's hit probability.
    one = script_hits(jnp.asarray(OCC), jnp.asarray(W), jnp.asarray(OPEN), jnp.asarray(answers),
                      jnp.ones(5, bool), jnp.float32(eps), ("S",))
    np.testing.assert_allclose(float(one), np.max(np.where(OPEN, W @ OCC, -1.0)), rtol=1e-6)


def test_a_zero_budget_plays_bayes_games():
    kw = dict(boards="B01,B02", seeds=2, particles=32, progress=False)
    bayes = api.play("bayes", **kw)
    zero = api.play(LookaheadAgent(PAPER, n_shots=1), params={"gamma": 0.95}, **kw)
    for field in ("f1", "shots", "questions", "turns"):
        np.testing.assert_array_equal(getattr(zero, field), getattr(bayes, field))


def test_the_ask_threshold_is_chosen_per_protocol():
    # The paper's γ (0.85, tuned there) lost to bayes on Grand's boards; there the captain
    # keeps bayes's own, and with no shot search it plays bayes's games.
    assert float(LookaheadAgent(PAPER).default_params().bayes.gamma) == np.float32(0.85)
    kw = dict(protocol="grand", sampler="importance", boards="B01,B02", seeds=2, particles=64,
              progress=False)
    bayes = api.play("bayes", **kw)
    zero = api.play(LookaheadAgent(GRAND, n_shots=1), **kw)
    assert float(LookaheadAgent(GRAND).default_params().bayes.gamma) == np.float32(0.95)
    for field in ("f1", "shots", "questions", "turns"):
        np.testing.assert_array_equal(getattr(zero, field), getattr(bayes, field))


def test_every_search_acts_legally_and_a_traced_param_does_not_retrace():
    # Every search on at once (the registry's conformance test plays the default agent).
    agent = LookaheadAgent(PAPER, n_shots=3, depth=1, search="sample", n_rollouts=4,
                           ask_depth=1, n_questions=3)
    sampler = belief_lib.make_sampler("particles", PAPER, 32)
    player = Player(PAPER, agent, sampler)
    board = suites.suite("synthetic", PAPER)[0]
    init = jax.jit(player.init_one)  # compiled: op by op it dispatches every MH step
    state, (belief, agent_state) = init(jax.random.key(0), player.default_params(),
                                        jnp.asarray(board.spans, jnp.int32), jnp.int32(1))
    view = player.env.observe(state)
    chex.clear_trace_counter()
    decide = jax.jit(chex.assert_max_traces(
        lambda k, p: agent.decide(k, p, view, sampler, belief, agent_state), n=1))
    params = agent.default_params()
    for k, p in enumerate([params, params.replace(margin=jnp.float32(-5.0),
                                                  margin_ask=jnp.float32(-5.0),
                                                  margin_question=jnp.float32(-5.0))]):
        action, _, _ = decide(jax.random.key(k), p)
        if int(action.kind) == ASK:
            assert bool(view.can_ask) and np.any(np.asarray(action.question_bits))
        else:
            assert int(action.kind) == SHOOT and bool(view.legal_shots[int(action.cell)])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.5, 1.0, -1.5, 2.25, np.inf, np.nan]), min_size=1,
                max_size=9), st.data())
def test_least_cost_is_the_first_argmin_and_its_gathers(costs, data):
    """Ties, infinities and NaNs included: the one-reduction pick equals `first_argmax(-cost)`
    followed by indexing the cells and the cost."""
    k = len(costs)
    cost = jnp.asarray(costs, jnp.float32)
    cells = jnp.asarray(data.draw(st.lists(st.integers(0, 63), min_size=k, max_size=k)),
                        jnp.int32)
    cell, least = jax.jit(least_cost, static_argnums=2)(cost, cells, 64)
    pick = int(fastpath.first_argmax(-cost))
    assert int(cell) == int(cells[pick])
    np.testing.assert_array_equal(np.asarray(least), np.asarray(cost[pick]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.125, 0.5, 0.5, 1.0]), min_size=64, max_size=64),
       st.lists(st.booleans(), min_size=64, max_size=64), st.sampled_from([1, 2, 8]))
def test_candidate_shots_are_bayes_cell_then_the_next_by_p(p, legal, n_shots):
    """Ties included: the top-k's cells are bayes's MAP cell (`best_shot`) followed by the
    `n_shots - 1` next legal cells by p, lowest index first on ties; no legal cell, none valid."""
    p, legal = jnp.asarray(p, jnp.float32), jnp.asarray(legal)
    cells, valid = jax.jit(candidate_shots, static_argnums=2)(p, legal, n_shots)
    if not bool(jnp.any(legal)):
        assert not bool(jnp.any(valid))
        return
    best = scoring.best_shot(p, legal)
    others = jnp.where(legal & (jnp.arange(64) != best), p, -1.0)
    score, rest = jax.lax.top_k(others, n_shots - 1)
    np.testing.assert_array_equal(np.asarray(cells), np.concatenate([[int(best)], rest]))
    np.testing.assert_array_equal(np.asarray(valid), np.concatenate([[True], score >= 0.0]))
