"""The fused MH kernel (`belief.mh_kernel`) plays the XLA loop's moves, draw for draw.

On a CPU the kernel runs in Pallas's interpreter ("interpret"); what it computes is what the
compiled GPU kernel computes, so equal outputs here mean the same program logic. `auto` must
lower to the kernel for a CUDA GPU and to the XLA loop for a CPU.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from support import grand_tiny, observe, tiny

import bsjax
from bsjax.battleship.belief import mh_kernel
from bsjax.battleship.belief import particles as particles_lib
from bsjax.battleship.belief.particles import ParticleSampler
from bsjax.battleship.config import PAPER


@functools.cache
def _updates(config, n_particles):
    """jitted `update` of the XLA loop and of the interpreted kernel (obs traced: one compile)."""
    def make(mode):
        sampler = ParticleSampler(config, n_particles=n_particles, mh_kernel=mode)
        return sampler, jax.jit(sampler.update), jax.jit(sampler.update_or_keep)
    return make("xla"), make("interpret")


@functools.cache
def _init(sampler):
    """The sampler's `init`, compiled once for every example (op by op, each example would
    dispatch the whole MH loop's operations again)."""
    return jax.jit(sampler.init)


def _observation(config, draw_cells, n_questions, answers, seed):
    rng = np.random.default_rng(seed)
    cells = rng.permutation(config.n_cells)
    hits, misses = cells[:draw_cells[0]], cells[draw_cells[0]:sum(draw_cells)]
    questions = [(rng.choice(config.n_cells, size=int(rng.integers(1, 12)), replace=False),
                  bool(a)) for a in answers[:n_questions]]
    fleet = config.fleet if config.fleet is not None else config.ship_lengths
    return jax.tree.map(jnp.asarray, observe(config, sorted(fleet, reverse=True), hits, misses,
                                             questions))


CONFIGS = {"paper": (PAPER, 500), "tiny": (tiny(5, 6, (3, 2, 2), max_questions=3), 200)}


# Every example runs the interpreted kernel (slow on a CPU): a few by default, more under -m slow.
UPDATE_EXAMPLES = [pytest.param(3, id="3"), pytest.param(12, id="12", marks=pytest.mark.slow)]


def _check_examples(check, examples: int, hits: int, misses: int):
    """Run `check(hits=, misses=, n_questions=, answers=, seed=)` on `examples` hypothesis
    examples (the count is a test parameter, so it cannot sit in a decorator)."""
    settings(max_examples=examples, deadline=None)(given(
        hits=st.integers(0, hits), misses=st.integers(0, misses), n_questions=st.integers(0, 3),
        answers=st.lists(st.booleans(), min_size=3, max_size=3),
        seed=st.integers(0, 2**16))(check))()


@pytest.mark.parametrize("examples", UPDATE_EXAMPLES)
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_kernel_moves_every_particle_as_the_xla_loop(name, examples):
    _check_examples(lambda **example: _kernel_moves_as_the_loop(name, **example), examples,
                    hits=6, misses=10)


def _kernel_moves_as_the_loop(name, hits, misses, n_questions, answers, seed):
    config, n_particles = CONFIGS[name]
    (sampler, xla, xla_or_keep), (_, fused, fused_or_keep) = _updates(config, n_particles)
    obs = _observation(config, (hits, misses), n_questions, answers, seed)
    state = _init(sampler)(jax.random.key(seed), _observation(config, (0, 0), 0, answers, 0),
                           jnp.int32(0))
    key = jax.random.key(seed + 1)
    expected, got = xla(key, state, obs), fused(key, state, obs)
    for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(got)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert 0.0 < float(got[1].acceptance) <= 1.0  # the moves did happen
    # A game that has just ended keeps its belief (the kernel selects it); the info is the
    # update's either way. Without `keep`, the update itself.
    for keep, state_expected in ((True, state), (False, expected[0])):
        for update in (xla_or_keep, fused_or_keep):
            kept, info = update(key, state, obs, jnp.bool_(keep))
            for a, b in zip(jax.tree.leaves((state_expected, expected[1])),
                            jax.tree.leaves((kept, info))):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("boards, seeds", [
    ("B01,B07", 1), pytest.param("B01,B07,B13", 2, marks=pytest.mark.slow)])
def test_games_identical_with_the_kernel(boards, seeds):
    """Whole games, every turn's record (ESS and acceptance included); MRA, whose games hold
    both shots and questions (the evidence a greedy game sees is a subset); 200 particles: a
    full block of 128 lanes and a partial one."""
    loop = bsjax.play("mra", boards=boards, seeds=seeds, particles=200, mh_kernel="xla",
                      progress=False)
    fused = bsjax.play("mra", boards=boards, seeds=seeds, particles=200,
                       mh_kernel="interpret", progress=False)
    assert (loop.questions > 0).any() and (loop.shots > 0).all()
    assert loop.to_pandas().equals(fused.to_pandas())
    assert loop.turns_frame().equals(fused.turns_frame())


@functools.cache
def _both_resamplings(n_particles):
    """`(key, previous, target, kept) -> (the XLA path's plan, [the kernel's draw unpadded and
    padded])`, compiled once per particle count (as in a turn: compiled, not op by op)."""
    @jax.jit
    def both(key, previous, target, kept):
        log_weights, ess = particles_lib.reweighted(previous, target, kept)   # `_reweight`'s
        top = jnp.max(previous + (target - kept))
        plan = particles_lib.resampling(key, log_weights, ess < n_particles / 2)
        inputs = {"log_weights": previous, "target": target, "kept_target": kept,
                  "key_words": plan.key_words}
        read = lambda name, index: inputs[name][index]  # noqa: E731
        return (plan.cumulative, plan.u, top, ess), [
            mh_kernel.drawn_resampling(read, n_particles, width)
            for width in (n_particles, pl.next_power_of_2(n_particles))]
    return both


@settings(max_examples=40, deadline=None)
@given(n_particles=st.sampled_from([1, 5, 128, 200, 500]), seed=st.integers(0, 2**16),
       spread=st.sampled_from([0.0, 1.0, 30.0, 300.0]), ties=st.booleans())
def test_the_kernel_draws_the_resampling_as_the_xla_path(n_particles, seed, spread, ties):
    """The reweighting and resampling the kernel makes itself, from the previous log weights and
    the targets — the largest reweighted log weight, the ESS, the cumulative weights and the
    offset — are `_reweight`'s and `particles.resampling`'s, bit for bit: flat, spread and
    vanishing weights, tied weights. Padded to a power of two (a GPU's vector), the same up to
    the sums' rounding, and the padding's weights are zero."""
    rng = np.random.default_rng(seed)
    draw = lambda: rng.normal(size=n_particles).astype(np.float32) * spread  # noqa: E731
    previous, target, kept = draw(), draw(), draw()
    if ties:  # runs of equal weights
        previous, target, kept = (np.repeat(x[::4], 4)[:n_particles]
                                  for x in (previous, target, kept))

    expected, (drawn, padded) = _both_resamplings(n_particles)(jax.random.key(seed), previous,
                                                               target, kept)
    for want, got in zip(expected, drawn):
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
    cumulative = np.asarray(padded[0])
    np.testing.assert_allclose(cumulative[:n_particles], np.asarray(expected[0]), rtol=1e-6)
    assert (cumulative[n_particles:] == cumulative[n_particles - 1]).all()
    np.testing.assert_allclose(np.asarray(padded[3]), np.asarray(expected[3]), rtol=1e-5)


def _lowered(mode, platform):
    config, n_particles = CONFIGS["tiny"]
    sampler = ParticleSampler(config, n_particles=n_particles, mh_kernel=mode)
    obs = _observation(config, (2, 2), 1, [True] * 3, 0)
    state = _init(sampler)(jax.random.key(0), obs, jnp.int32(0))
    update = jax.jit(sampler.update)
    return update.trace(jax.random.key(1), state, obs).lower(
        lowering_platforms=(platform,)).as_text()


def test_lowering_picks_the_kernel_for_a_gpu_and_auto_the_loop_on_a_cpu():
    assert "mh_sweeps" in _lowered("lowering", "cuda")  # a Triton kernel in the GPU program
    assert "mh_sweeps" not in _lowered("lowering", "cpu")
    assert "mh_sweeps" not in _lowered("xla", "cuda")
    # On a CPU host "auto" is decided when traced (no second branch to trace and compile).
    assert jax.default_backend() != "cpu" or "mh_sweeps" not in _lowered("auto", "cuda")


def test_protocols_the_kernel_does_not_cover_keep_the_loop():
    grand = grand_tiny(4, 4, (3, 2))
    assert not mh_kernel.applies(grand, jax.random.key(0), 100, 8)
    assert mh_kernel.applies(PAPER, jax.random.key(0), 500, 16)
    with pytest.raises(ValueError, match="unknown mh_kernel"):
        ParticleSampler(PAPER, mh_kernel="triton")


def test_the_tpu_loop_without_tables_moves_as_the_table_loop():
    """What `auto` runs on a TPU: the XLA loop intersecting boards with the questions instead of
    reading the per-observation tables (less memory per game)."""
    config, n_particles = CONFIGS["paper"]
    sampler = ParticleSampler(config, n_particles=n_particles)
    obs = _observation(config, (4, 6), 3, [True, False, True], 7)
    state = _init(sampler)(jax.random.key(3), _observation(config, (0, 0), 0, [True] * 3, 0),
                           jnp.int32(0))
    keys = jax.random.split(jax.random.key(4))

    @functools.cache
    def compiled(mode, keeps):
        """One program per mode for both `keep` values (traced), one without `keep`."""
        observe = functools.partial(sampler._observe_with, sweeps=4, mode=mode)
        if not keeps:
            return jax.jit(observe)
        return jax.jit(lambda k1, k2, s, o, keep: observe(k1, k2, s, o, keep=keep))

    def observe(mode, keep=None):
        extra = () if keep is None else (keep,)
        return compiled(mode, keep is not None)(keys[0], keys[1], state, obs, *extra)

    for keep in (None, jnp.bool_(True), jnp.bool_(False)):
        for a, b in zip(jax.tree.leaves(observe("xla", keep)),
                        jax.tree.leaves(observe("xla-direct", keep))):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    kept = observe("xla-direct", jnp.bool_(True))[0]
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(kept)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# ----- the chain's refresh (`belief/chain_kernel.py`) -----

@functools.cache
def _chain_updates(config, n_samples):
    """jitted `update` of the chain's XLA loops and of its interpreted kernel (one compile each
    for every example)."""
    from bsjax.battleship.belief.chain import ChainSampler

    def make(mode):
        sampler = ChainSampler(config, n_samples=n_samples, mh_kernel=mode)
        return sampler, jax.jit(sampler.update)
    return make("xla"), make("interpret")


@pytest.mark.parametrize("examples", [
    pytest.param(2, id="2"), pytest.param(8, id="8", marks=pytest.mark.slow)])
def test_the_chain_kernel_visits_the_boards_of_the_xla_loops(examples):
    _check_examples(_chain_kernel_visits_as_the_loops, examples, hits=5, misses=8)


def _chain_kernel_visits_as_the_loops(hits, misses, n_questions, answers, seed):
    config = PAPER
    (sampler, xla), (_, fused) = _chain_updates(config, 60)
    start = _observation(config, (0, 0), 0, answers, 0)
    state = _init(sampler)(jax.random.key(seed), start, jnp.int32(seed % 1000))
    obs = _observation(config, (hits, misses), n_questions, answers, seed)
    key = jax.random.key(seed + 1)
    expected, got = xla(key, state, obs), fused(key, state, obs)
    for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(got)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("seeds", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_chain_games_identical_with_the_kernel(seeds):
    loop = bsjax.play("greedy", boards="B01,B07", seeds=seeds, sampler="chain", particles=100,
                      mh_kernel="xla", progress=False)
    fused = bsjax.play("greedy", boards="B01,B07", seeds=seeds, sampler="chain", particles=100,
                       mh_kernel="interpret", progress=False)
    assert loop.to_pandas().equals(fused.to_pandas())
    assert loop.turns_frame().equals(fused.turns_frame())


def test_the_reference_streams_keep_the_xla_loops():
    from bsjax.battleship.belief import chain_kernel
    keys = (jax.random.key(0), jax.random.key(1))
    assert chain_kernel.applies(PAPER, keys, (1000, 2500), reference_rng=False)
    assert not chain_kernel.applies(PAPER, keys, (1000, 2500), reference_rng=True)


def test_the_particles_last_marginal_sums_the_same_occupancy():
    from bsjax.battleship.belief.particles import marginal, marginal_particles_last
    sampler = ParticleSampler(PAPER)
    state = _init(sampler)(jax.random.key(0),
                           _observation(PAPER, (3, 5), 2, [True, False, True], 1), jnp.int32(0))
    spans, weights = sampler.weighted_particles(state)
    np.testing.assert_allclose(marginal_particles_last(PAPER, spans, weights),
                               marginal(PAPER, spans, weights), rtol=0, atol=1e-5)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1),
       config=st.sampled_from([PAPER, tiny(4, 5, (3, 2)), grand_tiny(5, 4, (4, 2, 2))]))
def test_the_particles_last_occupancy_is_the_span_tables(seed, config):
    """Each particle's occupancy, computed from its spans' boxes, is the table's, cell for cell
    (one-hot weights read it back exactly)."""
    from bsjax.battleship.belief.particles import marginal_particles_last
    from bsjax.battleship.game import spans as spans_lib
    n_spans = spans_lib.table_for(config).n_spans
    spans = np.random.default_rng(seed).integers(0, n_spans, (7, config.n_ships), np.int32)
    occupancy = jax.vmap(lambda w: marginal_particles_last(config, jnp.asarray(spans), w))(
        jnp.eye(7, dtype=jnp.float32))
    np.testing.assert_array_equal(np.asarray(occupancy),
                                  np.asarray(spans_lib.board_cells(config, spans), np.float32))


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1),
       config=st.sampled_from([PAPER, tiny(4, 5, (3, 2)), grand_tiny(5, 4, (4, 2, 2))]))
def test_the_particles_last_look_ahead_set_is_the_same(seed, config):
    """What a TPU's planners read (occupancy and bitboards built particles-last, transposed) is
    the span tables' particle set, bit for bit."""
    from bsjax.battleship.game import spans as spans_lib
    from bsjax.battleship.planning import sim
    rng = np.random.default_rng(seed)
    spans = jnp.asarray(rng.integers(0, spans_lib.table_for(config).n_spans,
                                     (9, config.n_ships), np.int32))
    weights = jnp.asarray(rng.dirichlet(np.ones(9)), jnp.float32)
    rows, lanes = sim._particles(config, spans, weights), sim._particles_last(config, spans,
                                                                              weights)
    for a, b in zip(rows, lanes):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_a_tpus_answers_word_by_word_are_the_same(seed):
    from bsjax.battleship.planning import sim
    rng = np.random.default_rng(seed)
    regions = jnp.asarray(rng.integers(0, 2**32, (13, 2), np.uint32) & rng.integers(
        0, 2**32, (13, 2), np.uint32))
    bits = jnp.asarray(rng.integers(0, 2**32, (9, 2), np.uint32) & rng.integers(
        0, 2**32, (9, 2), np.uint32) & rng.integers(0, 2**32, (9, 2), np.uint32))
    np.testing.assert_array_equal(np.asarray(sim._answers_by_word(regions, bits)),
                                  np.asarray(sim._answers_whole(regions, bits)))
