"""The likelihood-weighted importance sampler (`bsjax.battleship.belief.importance`) on tiny boards.

The sequential most-constrained-first proposal is not uniform over configurations, so the oracle
for its marginals is `sequential_marginal` below: an exhaustive walk of the proposal's own
placement tree (exact proposal probability of every completed placement, dead ends dropped),
weighted by the answer likelihood. With a single ship the proposal is uniform and the marginals
must match the exact posterior (`bsjax.battleship.belief.exact`).
"""

from __future__ import annotations

import collections
import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import bits, grand_tiny, observe, tiny  # noqa: E402

from bsjax.battleship.belief import constraints, exact, generator, importance, moves
from bsjax.battleship.belief.base import answer_model
from bsjax.battleship.belief.importance import ImportanceSampler, normalised_weights
from bsjax.battleship.config import protocol
from bsjax.battleship.game import bitboard, refrng
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.game.env import Env
from bsjax.battleship.types import ask, shoot

N_BIG = 100000
N_SMALL = 2000
ATOL = 0.03


PAPER5 = tiny(5, 5, (3, 2))
GRAND5 = grand_tiny(5, 5, (3, 2))
GRAND4 = grand_tiny(4, 4, (2, 2, 3))


# ----- the exact distribution of the sequential proposal -----

def _mask(cells_row) -> int:
    return sum(1 << int(c) for c in np.flatnonzero(cells_row))


def _to_int(config, bitwords) -> int:
    return _mask(bitboard.unpack_np(np.asarray(bitwords, np.uint32), config.n_cells))


def sequential_proposal(config, obs, reorder=True):
    """Exact proposal probability of every completed placement: {spans tuple: q}.

    Mirrors the sampler's process: ship k's base candidates from the shots alone; at each step the
    unplaced ship with the fewest non-overlapping candidates (tracker: of a length still left)
    goes next, ties to the lower index (or the fixed initial order with `reorder=False`); a
    uniform candidate is taken; a dead end drops the mass.
    """
    table = spans_lib.table_for(config)
    masks = [_mask(row) for row in table.cells]
    length = [int(x) for x in table.length]
    n_ships = config.n_ships
    miss = _to_int(config, obs.miss_bits)
    colour = [_to_int(config, c) for c in np.asarray(obs.colour_bits)]
    sunk = [bool(x) for x in np.asarray(obs.sunk)]
    lengths = [int(x) for x in np.asarray(obs.ship_lengths)]
    tracker = config.fleet is None
    hist = collections.Counter(lengths)
    base = []
    for k in range(n_ships):
        ok = []
        for n, m in enumerate(masks):
            if m & miss or (m & colour[k]) != colour[k] or (sunk[k] and m != colour[k]):
                continue
            if (length[n] not in hist) if tracker else (length[n] != lengths[k]):
                continue
            ok.append(n)
        base.append(ok)
    order = sorted(range(n_ships), key=lambda k: (len(base[k]), k))
    out = collections.defaultdict(float)

    def rec(prob, occ, placed, remaining, step):
        if step == n_ships:
            out[tuple(placed)] += prob
            return
        unplaced = [k for k in range(n_ships) if placed[k] is None]
        cands = {k: [n for n in base[k] if not masks[n] & occ
                     and (not tracker or remaining[length[n]] > 0)] for k in unplaced}
        ship = min(unplaced, key=lambda k: (len(cands[k]), k)) if reorder else order[step]
        if not cands[ship]:
            return
        p = prob / len(cands[ship])
        for n in cands[ship]:
            new_placed = list(placed)
            new_placed[ship] = n
            new_remaining = remaining.copy()
            new_remaining[length[n]] -= 1
            rec(p, occ | masks[n], new_placed, new_remaining, step + 1)

    rec(1.0, 0, [None] * n_ships, hist.copy(), 0)
    return dict(out)


def sequential_marginal(config, obs, reorder=True):
    """`[C]` marginal of the proposal weighted by hit coverage and the answer likelihood."""
    table = spans_lib.table_for(config)
    masks = [_mask(row) for row in table.cells]
    hit = _to_int(config, obs.hit_bits)
    match, mismatch = config.answer_likelihood()
    nq = int(obs.n_questions)
    regions = [_to_int(config, q) for q in np.asarray(obs.question_bits)[:nq]]
    answers = [bool(a) for a in np.asarray(obs.answers)[:nq]]
    marg = np.zeros(config.n_cells)
    total = 0.0
    for placed, q in sequential_proposal(config, obs, reorder).items():
        board = functools.reduce(lambda a, n: a | masks[n], placed, 0)
        if board & hit != hit:
            continue
        w = q * math.prod(match if bool(board & r) == a else mismatch
                          for r, a in zip(regions, answers))
        total += w
        marg += w * np.array([(board >> c) & 1 for c in range(config.n_cells)], float)
    return marg / total if total > 0 else marg


@functools.cache
def jitted(sampler):
    # A fresh draw for `o` (the state is not read: `init` is `update`'s draw, under the default
    # answer model).
    return jax.jit(lambda k, s, o: sampler.init(k, o, 0)), jax.jit(sampler.hit_probability)


def sample(sampler, obs, seed=0):
    update, hit_probability = jitted(sampler)
    state = update(jax.random.key(seed), None, obs)
    return state, np.asarray(hit_probability(state))


# ----- scenarios (cell index = row * cols + col) -----

PAPER_SCENARIOS = {
    "empty": dict(),
    "shots_and_answers": dict(hits=(0,), misses=(6, 7, 12),
                              questions=[((18, 19, 23, 24), True), ((2, 3, 4), False)]),
    "two_hits": dict(hits=(11, 13), misses=(12, 2)),
}

GRAND_SCENARIOS = {
    "empty": dict(),
    "colour": dict(colour=[(12,), ()], misses=(7, 17), questions=[((0, 1, 5, 6), True)]),
    "sunk": dict(colour=[(12,), (0, 1)], sunk=[False, True], misses=(11,)),
}


@pytest.mark.parametrize("name", list(PAPER_SCENARIOS))
def test_fixed_fleet_matches_sequential_proposal(name):
    obs = observe(PAPER5, (3, 2), **PAPER_SCENARIOS[name])
    _, p = sample(ImportanceSampler(PAPER5, N_BIG), obs)
    np.testing.assert_allclose(p, sequential_marginal(PAPER5, obs), atol=ATOL)


@pytest.mark.parametrize("name", list(GRAND_SCENARIOS))
def test_tracker_matches_sequential_proposal(name):
    obs = observe(GRAND5, (3, 2), **GRAND_SCENARIOS[name])
    _, p = sample(ImportanceSampler(GRAND5, N_BIG), obs)
    np.testing.assert_allclose(p, sequential_marginal(GRAND5, obs), atol=ATOL)


# Three ships, lengths {2, 2, 3} on 4x4 (with two ships the order never changes the proposal).
GRAND4_SCENARIOS = {
    "repeated_lengths": dict(colour=[(), (), (5,)], misses=(6, 9),
                             questions=[((0, 1, 2, 3), False)]),
    "reorder_matters": dict(colour=[(5,), (3,), (6,)]),
}


@pytest.mark.parametrize("reorder", [True, False], ids=["dynamic", "static"])
@pytest.mark.parametrize("name", list(GRAND4_SCENARIOS))
def test_three_ship_tracker_matches_sequential_proposal(name, reorder):
    obs = observe(GRAND4, (2, 3, 2), **GRAND4_SCENARIOS[name])
    _, p = sample(ImportanceSampler(GRAND4, N_BIG, reorder=reorder), obs)
    np.testing.assert_allclose(p, sequential_marginal(GRAND4, obs, reorder), atol=ATOL)


def test_dynamic_and_static_order_differ():
    obs = observe(GRAND4, (2, 3, 2), **GRAND4_SCENARIOS["reorder_matters"])
    gap = np.abs(sequential_marginal(GRAND4, obs, True) - sequential_marginal(GRAND4, obs, False))
    assert gap.max() > 3 * ATOL / 2


def test_proposal_is_not_the_uniform_posterior():
    """Sanity of the oracle: the proposal differs from the exact posterior (the test has teeth)."""
    obs = observe(GRAND5, (3, 2), **GRAND_SCENARIOS["colour"])
    gap = np.abs(sequential_marginal(GRAND5, obs) - exact.hit_probability(GRAND5, obs))
    assert gap.max() > 0.03


# ----- the uniform prior: the proposal's probability divided out -----

UNIFORM_CASES = {
    **{f"paper-{name}": (PAPER5, (3, 2), kw) for name, kw in PAPER_SCENARIOS.items()},
    **{f"grand-{name}": (GRAND5, (3, 2), kw) for name, kw in GRAND_SCENARIOS.items()},
    **{f"grand4-{name}": (GRAND4, (2, 3, 2), kw) for name, kw in GRAND4_SCENARIOS.items()},
}


@pytest.mark.parametrize("name", list(UNIFORM_CASES))
def test_the_uniform_prior_matches_the_exact_posterior(name):
    config, fleet, kw = UNIFORM_CASES[name]
    obs = observe(config, fleet, **kw)
    _, p = sample(ImportanceSampler(config, N_BIG, prior="uniform"), obs)
    np.testing.assert_allclose(p, exact.hit_probability(config, obs), atol=ATOL)


def test_the_uniform_prior_moves_the_default_weights_only_where_it_should():
    """Same draws, so the same particles; the default's weights are the answer likelihood
    alone, the uniform prior's add the proposal's log candidate counts (the test has teeth:
    the two marginals differ where the proposal is not uniform)."""
    obs = observe(GRAND5, (3, 2), **GRAND_SCENARIOS["colour"])
    default, p_default = sample(ImportanceSampler(GRAND5, N_SMALL), obs)
    uniform, p_uniform = sample(ImportanceSampler(GRAND5, N_SMALL, prior="uniform"), obs)
    np.testing.assert_array_equal(default.spans, uniform.spans)
    np.testing.assert_array_equal(default.valid, uniform.valid)
    assert np.abs(p_default - p_uniform).max() > 0.03
    gap = np.where(default.valid, uniform.log_weights - default.log_weights, 0.0)
    assert np.all(gap[default.valid] >= 0) and np.ptp(gap[default.valid]) > 0


def test_an_unknown_prior_is_refused():
    with pytest.raises(ValueError, match="unknown prior"):
        ImportanceSampler(GRAND5, 10, prior="flat")


@pytest.mark.parametrize("config, kw", [
    (tiny(5, 5, (3,)), dict(hits=(12,), misses=(11, 2),
                            questions=[((13, 14), True), ((7, 17, 22), False)])),
    (tiny(5, 5, (3,)), dict()),
    (grand_tiny(5, 5, (3,)), dict(colour=[(6,)], misses=(7,), questions=[((0, 5), True)])),
])
def test_single_ship_matches_exact_posterior(config, kw):
    obs = observe(config, (3,), **kw)
    _, p = sample(ImportanceSampler(config, N_BIG), obs)
    np.testing.assert_allclose(p, exact.hit_probability(config, obs), atol=ATOL)


# ----- hard constraints on random games -----

@functools.cache
def game_tools(config):
    step = jax.jit(lambda key, state, action: Env(config).step(key, state, action)[0])
    sampler = ImportanceSampler(config, N_SMALL)
    update = jitted(sampler)[0]

    @jax.jit
    def check(state, obs):
        ship_bits = spans_lib.spans_bits(config, state.spans)                 # [P, S, W]
        consistent = jax.vmap(lambda b: constraints.shot_consistent(b, obs, True))(ship_bits)
        board = spans_lib.board_bits(config, state.spans)
        disjoint = bitboard.popcount(board) == jnp.sum(bitboard.popcount(ship_bits), axis=-1)
        log_lik = jax.vmap(lambda b: constraints.answer_log_likelihood(config, b, obs))(board)
        lengths = spans_lib.span_lengths(config, state.spans)
        return consistent, disjoint, log_lik, lengths, sampler.weighted_particles(state)[1]

    configs = exact.fleet_configurations(config, config.fleet or (3, 2))
    return step, update, check, configs


@pytest.mark.parametrize("config", [PAPER5, GRAND5], ids=["paper", "grand"])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_valid_particles_satisfy_hard_constraints(config, data):
    step, update, check, configs = game_tools(config)
    truth = configs[data.draw(st.integers(0, len(configs) - 1), label="truth")]
    state = Env(config).init(jnp.asarray(truth), 0)
    n_actions = data.draw(st.integers(0, 12), label="n_actions")
    for t in range(n_actions):
        if data.draw(st.booleans(), label="ask"):
            region = data.draw(st.sets(st.integers(0, config.n_cells - 1), min_size=1,
                                       max_size=6), label="region")
            action = ask(jnp.int32(-1), jnp.asarray(bits(config, region)))
        else:
            action = shoot(data.draw(st.integers(0, config.n_cells - 1), label="cell"), config)
        state = step(jax.random.key(t), state, action)
    obs = state.obs
    particles = update(jax.random.key(n_actions), None, obs)
    consistent, disjoint, log_lik, lengths, weights = map(np.asarray, check(particles, obs))
    valid = np.asarray(particles.valid)
    assert np.all(consistent[valid]) and np.all(disjoint[valid])
    np.testing.assert_allclose(np.asarray(particles.log_weights)[valid], log_lik[valid],
                               rtol=1e-6)
    ship_lengths = np.asarray(obs.ship_lengths)
    if config.fleet is None:
        assert np.all(np.sort(lengths[valid], axis=1) == np.sort(ship_lengths))
    else:
        assert np.all(lengths[valid] == ship_lengths)
    assert np.all(weights[~valid] == 0) and np.all(np.isfinite(weights))
    if valid.any():
        np.testing.assert_allclose(weights.sum(), 1.0, rtol=1e-5)
    assert not np.any(np.isneginf(np.asarray(particles.log_weights)[valid]))


# ----- weights, sunk ships, degenerate evidence, retracing -----

@pytest.mark.parametrize("config", [PAPER5, GRAND5], ids=["paper", "grand"])
def test_weights_reflect_answers(config):
    region_yes, region_no = (0, 1, 2, 3, 4), (20, 21, 22, 23, 24)
    obs = observe(config, (3, 2), questions=[(region_yes, True), (region_no, False)])
    state, _ = sample(ImportanceSampler(config, N_SMALL), obs)
    valid = np.asarray(state.valid)
    assert valid.all()
    boards = np.asarray(spans_lib.board_cells(config, state.spans))
    yes = boards[:, list(region_yes)].any(1)
    no = ~boards[:, list(region_no)].any(1)
    log_match, log_mismatch = config.log_answer_likelihood()
    expected = (np.where(yes, log_match, log_mismatch)
                + np.where(no, log_match, log_mismatch))
    np.testing.assert_allclose(np.asarray(state.log_weights), expected, rtol=1e-6)
    _, w = ImportanceSampler(config, N_SMALL).weighted_particles(state)
    w = np.asarray(w)
    both, neither = np.flatnonzero(yes & no), np.flatnonzero(~yes & ~no)
    ratio = math.exp(2 * (log_match - log_mismatch))
    np.testing.assert_allclose(w[both[0]] / w[neither[0]], ratio, rtol=1e-4)
    if config.evidence_scale == 1.0:   # grand: the plain (1 - eps) / eps channel
        np.testing.assert_allclose(ratio, (0.9 / 0.1) ** 2, rtol=1e-6)


def test_sunk_ship_is_fixed_and_consumes_its_length():
    obs = observe(GRAND5, (3, 2), **GRAND_SCENARIOS["sunk"])
    state, _ = sample(ImportanceSampler(GRAND5, N_SMALL), obs)
    valid = np.asarray(state.valid)
    assert valid.any()
    spans = np.asarray(state.spans)[valid]
    sunk_span = spans_lib.span_index(5, 5, (2, 3), 2, 0, 0, True)   # cells 0, 1
    assert np.all(spans[:, 1] == sunk_span)
    assert np.all(np.asarray(spans_lib.span_lengths(GRAND5, spans[:, 0])) == 3)
    assert np.all(np.asarray(spans_lib.board_cells(GRAND5, spans))[:, 12])


@pytest.mark.parametrize("config, kw", [
    (PAPER5, dict(misses=tuple(range(25)))),
    (PAPER5, dict(hits=(12,), misses=(7, 11, 13, 17))),      # an anonymous hit no ship can cover
    (GRAND5, dict(colour=[(0, 24), ()])),                      # one ship at two far corners
    (GRAND5, dict(colour=[(0,), (3, 4)], sunk=[False, True], misses=(2, 10))),  # only a 2 fits
], ids=["all_water", "boxed_hit", "split_colour", "length_used_up"])
def test_contradictory_evidence_gives_zeros_not_nan(config, kw):
    obs = observe(config, (3, 2), **kw)
    sampler = ImportanceSampler(config, N_SMALL)
    state, p = sample(sampler, obs)
    assert not np.asarray(state.valid).any()
    np.testing.assert_array_equal(p, np.zeros(config.n_cells))
    _, w = sampler.weighted_particles(state)
    np.testing.assert_array_equal(np.asarray(w), np.zeros(N_SMALL))
    chex.assert_tree_all_finite((p, w))


def test_normalised_weights_edge_cases():
    lw = jnp.array([-1e30, -1e30, 0.0], jnp.float32)
    np.testing.assert_allclose(normalised_weights(lw, jnp.array([True, True, False])), [.5, .5, 0])
    zero = normalised_weights(jnp.full(3, -jnp.inf), jnp.zeros(3, bool))
    np.testing.assert_array_equal(np.asarray(zero), np.zeros(3))


def test_update_is_fresh_and_compiles_once():
    chex.clear_trace_counter()
    sampler = ImportanceSampler(GRAND5, 64)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def update(key, state, obs):
        return sampler.update(key, state, obs)[0]

    obs_a = observe(GRAND5, (3, 2))
    obs_b = observe(GRAND5, (3, 2), **GRAND_SCENARIOS["sunk"])
    with jax.debug_key_reuse(True):   # the key is split, never reused
        state = jax.jit(sampler.init)(jax.random.key(0), obs_a, 7)
    state_b = update(jax.random.key(1), state, obs_b)
    state_c = update(jax.random.key(1), state_b, obs_a)
    chex.assert_trees_all_equal_shapes_and_dtypes(state, state_b, state_c)
    assert state_b.spans.dtype == jnp.int32 and state_b.log_weights.dtype == jnp.float32
    # Nothing carried over: the same key and observations give the same particles whatever state.
    fresh = update(jax.random.key(1), state, obs_a)
    chex.assert_trees_all_equal(fresh, state_c)


def test_update_or_keep_keeps_the_state_of_a_finished_game():
    """`base.update_or_keep` for a sampler without its own: the update where `keep` is false,
    the state itself where it is true, the update's info either way."""
    from bsjax.battleship.belief.base import update_or_keep
    sampler = ImportanceSampler(PAPER5, 64)
    # Compiled, as in a turn (op by op, each call dispatches every MH step's operations).
    state = jax.jit(sampler.init)(jax.random.key(0), observe(PAPER5, (3, 2)), jnp.int32(0))
    obs = observe(PAPER5, (3, 2), **PAPER_SCENARIOS["two_hits"])
    key = jax.random.key(1)
    updated, info = jax.jit(sampler.update)(key, state, obs)
    for keep, expected in ((False, updated), (True, state)):
        got, got_info = jax.jit(functools.partial(update_or_keep, sampler))(
            key, state, obs, jnp.bool_(keep))
        for a, b in zip(jax.tree.leaves((expected, info)), jax.tree.leaves((got, got_info))):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(sampler.hit_probability(updated)),
                              np.asarray(sampler.hit_probability(state)))


def test_a_subclass_that_overrides_update_is_not_bypassed():
    """A particle sampler's subclass with its own `update` (and not `update_or_keep`) is
    updated by that `update` when a game goes on; one with its own `update_or_keep` by that."""
    import dataclasses

    from bsjax.battleship.belief.base import update_or_keep as base_update_or_keep
    from bsjax.battleship.belief.particles import ParticleSampler

    @dataclasses.dataclass(frozen=True)
    class Frozen(ParticleSampler):
        def update(self, key, state, obs):
            return state, super().update(key, state, obs)[1]

    def update_or_keep(sampler, *args):  # compiled, as in a turn
        return jax.jit(functools.partial(base_update_or_keep, sampler))(*args)

    sampler = Frozen(PAPER5, n_particles=32)
    state = jax.jit(sampler.init)(jax.random.key(0), observe(PAPER5, (3, 2)), jnp.int32(0))
    obs = observe(PAPER5, (3, 2), **PAPER_SCENARIOS["two_hits"])
    got, _ = update_or_keep(sampler, jax.random.key(1), state, obs, jnp.bool_(False))
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(got)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    moved, _ = update_or_keep(ParticleSampler(PAPER5, n_particles=32), jax.random.key(1), state,
                              obs, jnp.bool_(False))
    assert not np.array_equal(np.asarray(moved.spans), np.asarray(state.spans))

    @dataclasses.dataclass(frozen=True)
    class OwnKeep(ParticleSampler):  # its own update_or_keep (never moves) is the one used
        def update_or_keep(self, key, state, obs, keep):
            return state, super().update(key, state, obs)[1]

    kept, _ = update_or_keep(OwnKeep(PAPER5, n_particles=32), jax.random.key(1), state, obs,
                             jnp.bool_(False))
    np.testing.assert_array_equal(np.asarray(kept.spans), np.asarray(state.spans))


# ----- the packed proposal against the `[N]`-mask one it replaced ---------------------------------

def reference_propose(self, words, base, order, hist, obs):
    """The proposal as written before its span masks were packed into words: `[N]` bool
    masks, `base` `[S, N]` bool. Returns (`[S]` int32 spans, `[]` bool valid)."""
    table = spans_lib.table_for(self.config)
    bits = jnp.asarray(table.bits)                                            # [N, W]
    length = jnp.asarray(table.length)                                        # [N]
    n_ships = base.shape[0]
    occ = jnp.zeros(bits.shape[1], jnp.uint32)
    placed = jnp.zeros(n_ships, bool)
    spans = jnp.zeros(n_ships, jnp.int32)
    remaining = hist
    alive = jnp.bool_(True)
    for step in range(n_ships):  # static and tiny (4 ships)
        free = ~bitboard.intersects(bits, occ[None, :])                      # [N]
        if self.config.fleet is None:
            free = free & (remaining[length] > 0)
        if self.reorder:
            counts = jnp.sum(base & free[None, :], axis=1, dtype=jnp.int32)   # [S]
            counts = jnp.where(placed, jnp.iinfo(jnp.int32).max, counts)
            ship = jnp.argmin(counts)                                         # first minimum
        else:
            ship = order[step]
        allowed = base[ship] & free                                           # [N]
        any_allowed = jnp.any(allowed)
        allowed = allowed | ~any_allowed  # dead end: any span, the particle is invalid
        pick = refrng.u32_times_int_high(words[step], jnp.sum(allowed, dtype=jnp.int32))
        choice = moves.nth_true(allowed, pick).astype(jnp.int32)
        alive = alive & any_allowed
        occ = occ | bits[choice]
        placed = placed.at[ship].set(True)
        spans = spans.at[ship].set(choice)
        if self.config.fleet is None:
            remaining = remaining.at[length[choice]].add(-1)
    valid = alive & bitboard.contains(occ, obs.hit_bits)
    return spans, valid


class UnpackedProposal(ImportanceSampler):
    """The importance sampler with `reference_propose` (its packed `base` unpacked)."""

    def _propose(self, words, base, order, hist, obs):
        n_spans = spans_lib.table_for(self.config).n_spans
        spans, valid = reference_propose(self, words, bitboard.unpack(base, n_spans), order,
                                         hist, obs)
        return spans, valid, spans_lib.board_bits(self.config, spans), jnp.float32(0.0)


@functools.cache
def _draws(config, reorder):
    def draw(sampler, key, obs):
        state = sampler._draw(key, obs, answer_model(config))
        return state.spans, state.valid, state.log_weights
    return (jax.jit(functools.partial(draw, ImportanceSampler(config, 256, reorder))),
            jax.jit(functools.partial(draw, UnpackedProposal(config, 256, reorder))))


@pytest.mark.parametrize("name, reorder", [("paper", True), ("grand", True), ("grand", False)])
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**30), revealed=st.integers(0, 14), misses=st.integers(0, 30),
       sunk=st.lists(st.booleans(), min_size=4, max_size=4))
def test_the_packed_proposal_draws_the_particles_of_the_mask_proposal(name, reorder, seed,
                                                                       revealed, misses, sunk):
    """256 particles from the same key, with shots on a generated board (in Grand as colours,
    some ships sunk, the fleet a multiset the proposal consumes), some misses on its ships (dead
    ends and invalid particles included) and four answered questions. Every span, validity and
    weight equal (the weights from the boards the proposal builds as it places the ships)."""
    config = protocol(name)
    lengths = (2, 3, 4, 5) if config.fleet is None else config.fleet
    truth = np.asarray(generator.reference_board(config, jnp.asarray(lengths, jnp.int32),
                                                 jnp.int32(seed + 1))[0])
    cells = spans_lib.table_for(config).cells[truth]                               # [S, C]
    rng = np.random.default_rng(seed)
    on = np.flatnonzero(cells.any(0))
    hits = rng.choice(on, min(revealed, len(on)), replace=False).tolist()
    missed = rng.choice(config.n_cells, misses, replace=False).tolist()
    missed = [c for c in missed if c not in hits]
    # Answered questions make each particle's weight depend on its board's every cell.
    questions = [(rng.choice(config.n_cells, 6, replace=False).tolist(), bool(rng.integers(2)))
                 for _ in range(4)]
    if config.reveal_colour:
        colour = [sorted(set(hits) & set(np.flatnonzero(c))) for c in cells]
        obs = observe(config, lengths, misses=missed, colour=colour, sunk=sunk,
                      questions=questions)
    else:
        obs = observe(config, lengths, hits=hits, misses=missed, questions=questions)
    packed, unpacked = _draws(config, reorder)
    key = jax.random.key(seed)
    obs = jax.tree.map(jnp.asarray, obs)
    for got, want in zip(packed(key, obs), unpacked(key, obs)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("name", ["paper", "grand"])
def test_a_tpus_particles_last_occupancy_sums_as_the_default(name):
    """`weighted_occupancy(particles_last=True)` (a TPU's hit probability): the same sums, up
    to their order, on drawn particles with their unequal weights."""
    config = protocol(name)
    lengths = (2, 3, 4, 5) if config.fleet is None else config.fleet
    obs = jax.tree.map(jnp.asarray, observe(config, lengths, misses=[0, 9, 18, 27],
                                            questions=[([1, 2, 3, 10, 11], True)]))
    state = ImportanceSampler(config, 300).init(jax.random.key(3), obs, jnp.int32(0))
    weights = normalised_weights(state.log_weights, state.valid)
    assert len(np.unique(np.asarray(weights))) > 1  # the question weighs particles apart
    first, last = (np.asarray(importance.weighted_occupancy(config, state.spans, weights, flag))
                   for flag in (False, True))
    assert first.sum() > 1
    np.testing.assert_allclose(last, first, rtol=1e-6, atol=1e-7)


def test_a_layout_chosen_when_lowered_plays_the_same_games_on_a_cpu():
    """`layout="lowering"` traces the TPU's particles-last forms (the hit probability and the
    planners' particles) beside the default ones; lowered for a CPU it plays bayes's games as
    "auto" does, record for record. An unknown layout is refused."""
    import dataclasses

    from bsjax.battleship.harness import run_config
    from bsjax.battleship.harness.loop import BatchRunner
    from bsjax.battleship.harness.run_config import RunConfig

    cfg = RunConfig(agent="bayes", protocol="grand", sampler="importance", particles=64,
                    boards="B01,B02", seeds=1)
    game_config, boards = run_config.validate(cfg)
    player = run_config.make_player(cfg, game_config)
    assert player.sampler.layout == "auto"
    lowered = dataclasses.replace(
        player, sampler=dataclasses.replace(player.sampler, layout="lowering"))
    from bsjax.battleship.harness.experiment import game_list
    games = game_list(boards, cfg.seeds)
    results = [BatchRunner(p, len(games), reuse=False).play(games, cfg.run_seed)
               for p in (player, lowered)]
    np.testing.assert_array_equal(results[0].shots, results[1].shots)
    for name in ("kind", "cell", "question_id", "outcome", "hit_probability"):
        np.testing.assert_array_equal(results[0].records[name], results[1].records[name])
    with pytest.raises(ValueError, match="unknown layout"):
        ImportanceSampler(game_config, layout="tpu")
