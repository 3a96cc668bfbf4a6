"""The exact belief (`belief.enumerated`, `--sampler exact`) against the host enumeration
(`belief.exact`) on tiny boards: marginals to float32 rounding, samples by a chi-square test."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from support import observe, tiny

from bsjax.battleship.belief import exact, make_sampler
from bsjax.battleship.belief.enumerated import ExactSampler
from bsjax.battleship.config import GRAND

TWO = tiny(5, 5, (3, 2), max_questions=4)
THREE = tiny(5, 5, (3, 2, 2), max_questions=4)
COLOUR = tiny(5, 5, (3, 2), max_questions=4, reveal_colour=True, sunk_feedback=True)

SITUATIONS = {
    "empty": dict(),
    "hit-and-misses": dict(hits=[12], misses=[7, 13, 6]),
    "question": dict(misses=[0, 24], questions=[(list(range(5)), True),
                                                (list(range(20, 25)), False)]),
    "hits-and-question": dict(hits=[6, 7], misses=[8, 18],
                              questions=[(list(range(15, 25)), True)]),
    "two-hits-apart": dict(hits=[0, 24], misses=[12], questions=[([4, 9, 14], False)]),
}


def _small(config, particles=64):
    """Tiles of a few rows, so that every tiny board spans several tiles and blocks."""
    return ExactSampler(config, n_particles=particles, row_tile=4, col_tile=4)


def _jax(obs):
    return jax.tree.map(jnp.asarray, obs)


def _init(sampler, obs, seed=0):
    return jax.jit(sampler.init)(jax.random.key(seed), _jax(obs), jnp.int32(0))


@pytest.mark.parametrize("config", [TWO, THREE], ids=["two-ships", "three-ships"])
@pytest.mark.parametrize("situation", sorted(SITUATIONS))
def test_marginal_equals_enumeration(config, situation):
    obs = observe(config, config.fleet, **SITUATIONS[situation])
    state = _init(_small(config), obs)
    np.testing.assert_allclose(np.asarray(state.marginal), exact.hit_probability(config, obs),
                               atol=2e-6)


def test_default_tiles_give_the_same_marginal():
    obs = observe(THREE, THREE.fleet, **SITUATIONS["hits-and-question"])
    small = _init(_small(THREE), obs).marginal
    default = _init(ExactSampler(THREE), obs).marginal
    np.testing.assert_allclose(np.asarray(default), np.asarray(small), atol=1e-6)


def test_colour_and_sunk_evidence_of_a_fixed_fleet():
    # Ship 1 (length 2) sunk on cells 0, 1; ship 0 revealed at cell 12, a miss beside it.
    obs = observe(COLOUR, COLOUR.fleet, colour=[[12], [0, 1]], sunk=[False, True])
    obs = obs.replace(miss_bits=observe(COLOUR, COLOUR.fleet, misses=[13]).miss_bits)
    state = _init(_small(COLOUR), obs)
    np.testing.assert_allclose(np.asarray(state.marginal), exact.hit_probability(COLOUR, obs),
                               atol=2e-6)


@pytest.mark.parametrize("situation", ["hits-and-question", "question"])
def test_samples_follow_the_posterior(situation):
    """20,000 draws binned by placement (40 bins of equal posterior mass): Pearson's chi-square
    against the exact weights, p > 1e-3 (a fixed key: the test is deterministic)."""
    obs = observe(THREE, THREE.fleet, **SITUATIONS[situation])
    sampler = _small(THREE, particles=20_000)
    spans, weights = jax.jit(sampler.weighted_particles)(_init(sampler, obs, seed=3))
    np.testing.assert_allclose(np.asarray(weights), 1 / 20_000)
    configs, probability = exact.posterior(THREE, obs)
    index = {tuple(row): i for i, row in enumerate(configs)}
    drawn = np.asarray(spans)
    rows = np.asarray([index.get(tuple(row), -1) for row in drawn])
    assert np.all(rows >= 0), "a sample is not a legal placement consistent with the shots"
    assert np.all(probability[rows] > 0)
    # 40 bins of consecutive placements (table order) holding equal posterior mass.
    bins = np.minimum((np.cumsum(probability) - probability) * 40, 39).astype(int)
    observed = np.bincount(bins[rows], minlength=40).astype(float)
    expected = np.bincount(bins, weights=probability, minlength=40) * len(rows)
    keep = expected > 0
    _, p_value = stats.chisquare(observed[keep], expected[keep])
    assert p_value > 1e-3, p_value


def test_samples_are_a_pure_function_of_the_state():
    sampler = _small(TWO)
    state = _init(sampler, observe(TWO, TWO.fleet, **SITUATIONS["question"]))
    draw = jax.jit(sampler.weighted_particles)
    np.testing.assert_array_equal(np.asarray(draw(state)[0]), np.asarray(draw(state)[0]))


def test_update_traces_once_and_is_vmappable():
    sampler = _small(TWO)
    chex.clear_trace_counter()
    update = jax.jit(jax.vmap(chex.assert_max_traces(sampler.update, n=1)))
    obs0 = observe(TWO, TWO.fleet)
    stack = lambda *trees: jax.tree.map(lambda *x: jnp.stack([jnp.asarray(v) for v in x]),  # noqa: E731
                                        *trees)
    state = jax.jit(jax.vmap(lambda k, o: sampler.init(k, o, jnp.int32(0))))(
        jax.random.split(jax.random.key(0), 2), stack(obs0, obs0))
    for i, (first, second) in enumerate([(dict(misses=[3]), dict(hits=[12])),
                                         (dict(misses=[3], hits=[4]), SITUATIONS["question"])]):
        obs = [observe(TWO, TWO.fleet, **first), observe(TWO, TWO.fleet, **second)]
        state, info = update(jax.random.split(jax.random.key(i + 1), 2), state, stack(*obs))
        for g in range(2):
            np.testing.assert_allclose(np.asarray(state.marginal[g]),
                                       exact.hit_probability(TWO, obs[g]), atol=2e-6)
    assert np.all(np.asarray(info.ess) == 64.0)


def test_contradictory_evidence_gives_zeros_not_nan():
    obs = observe(TWO, TWO.fleet, hits=[24], misses=[19, 23, 18, 22, 17],
                  questions=[(list(range(5)), True)])
    sampler = _small(TWO)
    state = _init(sampler, obs)
    np.testing.assert_array_equal(np.asarray(state.marginal), 0.0)
    spans, weights = sampler.weighted_particles(state)
    assert np.all(np.isfinite(np.asarray(weights)))


def test_a_tracker_fleet_is_refused(tmp_path):
    with pytest.raises(ValueError, match="fixed fleet"):
        make_sampler("exact", GRAND)
    from bsjax.cli import main
    code = main(["play", "--agent", "greedy", "--protocol", "grand", "--sampler", "exact",
                 "--seeds", "1", "--out", str(tmp_path / "run")])
    assert code == 2 and not (tmp_path / "run").exists()
