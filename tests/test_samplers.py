"""Samplers against the exact posterior on tiny boards, degeneracy, and retrace guards."""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support import observe, tiny

from bsjax.battleship.belief import exact, make_sampler
from bsjax.battleship.belief.chain import ChainSampler
from bsjax.battleship.belief.particles import ParticleSampler

TINY = tiny(5, 5, (3, 2), max_questions=4)


def _as_jax(obs):
    return jax.tree.map(jnp.asarray, obs)


# A few evidence situations on the 5x5 board with ships of length 3 and 2 (cells 0..24).
SITUATIONS = {
    "empty": dict(),
    "hit-and-misses": dict(hits=[12], misses=[7, 13, 6]),
    "question": dict(misses=[0, 24], questions=[(list(range(5)), True), (list(range(20, 25)),
                                                                            False)]),
    "hits-and-question": dict(hits=[6, 7], misses=[8, 18], questions=[(list(range(15, 25)), True)]),
}


# The faithful chain's one-ship move freezes which ship covers a hit (docs/battleship/protocol.md §15.8), so
# it converges to the exact posterior only while there are no hits.
CASES = ([("chain", 0.06, s) for s in ("empty", "question")]
         + [("particles", 0.05, s) for s in sorted(SITUATIONS)]
         + [("exact", 2e-6, s) for s in sorted(SITUATIONS)])


@functools.cache
def _first_marginals(sampler):
    """`(keys [R], obs) -> [R, C]` hit probabilities of the first belief drawn with each key.
    The observations are an argument, not constants: every situation runs one program."""
    return jax.jit(jax.vmap(lambda k, o: sampler.hit_probability(sampler.init(k, o, jnp.int32(5))),
                            in_axes=(0, None)))


@pytest.mark.parametrize("sampler_name, atol, situation", CASES)
def test_hit_probability_converges_to_exact(sampler_name, atol, situation):
    obs = observe(TINY, (3, 2), **SITUATIONS[situation])
    truth = exact.hit_probability(TINY, obs)
    sampler = make_sampler(sampler_name, TINY, particles=2000)
    # Average several independent runs: each is an unbiased-in-the-limit estimate.
    keys = jax.random.split(jax.random.key(7), 4)
    estimate = np.asarray(_first_marginals(sampler)(keys, _as_jax(obs))).mean(0)
    np.testing.assert_allclose(estimate, truth, atol=atol)


def test_particles_track_a_sequence_of_observations():
    """Sequential updates (reweight, resample, MH) match the exact posterior after each step."""
    sampler = ParticleSampler(TINY, n_particles=3000, sweeps=3)
    steps = [dict(misses=[12]), dict(misses=[12], hits=[6]), dict(misses=[12, 5], hits=[6]),
             dict(misses=[12, 5], hits=[6], questions=[(list(range(20, 25)), True)])]
    update = jax.jit(sampler.update)
    state = jax.jit(sampler.init)(jax.random.key(0), _as_jax(observe(TINY, (3, 2))), jnp.int32(0))
    for i, evidence in enumerate(steps):
        obs = observe(TINY, (3, 2), **evidence)
        state, info = update(jax.random.key(i + 1), state, _as_jax(obs))
        assert 1.0 <= float(info.ess) <= 3000.0 and 0.0 < float(info.acceptance) <= 1.0
        np.testing.assert_allclose(np.asarray(sampler.hit_probability(state)),
                                   exact.hit_probability(TINY, obs), atol=0.05)


@pytest.mark.parametrize("sampler_name", ["chain", "particles", "exact"])
def test_contradictory_evidence_gives_no_nan(sampler_name):
    # Every cell of row A missed yet "is there a ship in row A?" answered yes, and a hit where
    # the other evidence makes a ship impossible: no particle can satisfy everything.
    obs = observe(TINY, (3, 2), hits=[24], misses=[19, 23, 18, 22, 17],
                  questions=[(list(range(5)), True)])
    sampler = make_sampler(sampler_name, TINY, particles=200)
    state = jax.jit(sampler.init)(jax.random.key(0), _as_jax(obs), jnp.int32(3))
    p = np.asarray(sampler.hit_probability(state))
    assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))
    _, weights = sampler.weighted_particles(state)
    assert np.all(np.isfinite(np.asarray(weights)))


@pytest.mark.parametrize("sampler_name", ["chain", "particles", "exact"])
def test_update_traces_once(sampler_name):
    sampler = make_sampler(sampler_name, TINY, particles=64)
    chex.clear_trace_counter()
    update = jax.jit(chex.assert_max_traces(sampler.update, n=1))
    state = jax.jit(sampler.init)(jax.random.key(0), _as_jax(observe(TINY, (3, 2))), jnp.int32(1))
    for i, evidence in enumerate([dict(misses=[3]), dict(misses=[3], hits=[4])]):
        state, _ = update(jax.random.key(i), state, _as_jax(observe(TINY, (3, 2), **evidence)))
    jax.block_until_ready(state)


def test_chain_samples_respect_shots_after_repair():
    """A hit no stored sample covers forces a repair; samples then all agree with the shots."""
    sampler = ChainSampler(TINY, n_samples=100)
    obs0 = observe(TINY, (3, 2))
    state = jax.jit(sampler.init)(jax.random.key(1), _as_jax(obs0), jnp.int32(11))
    p = np.asarray(sampler.hit_probability(state))
    cell = int(np.argmin(p))
    obs1 = observe(TINY, (3, 2), hits=[cell])
    state, info = jax.jit(sampler.update)(jax.random.key(2), state, _as_jax(obs1))
    # Without answers the target is flat over the move pool: every move is accepted.
    assert float(info.ess) == 100.0 and float(info.acceptance) == 1.0
    occupancy = np.asarray(jax.vmap(lambda s: _cells(s))(state.samples.T))
    assert occupancy[:, cell].all()


def _cells(spans):
    from bsjax.battleship.game import spans as spans_lib
    return spans_lib.board_cells(TINY, spans)


def test_chain_freezes_ship_identity_on_hits():
    """Reference quirk 8: after a hit, the ship that covers it never changes."""
    sampler = ChainSampler(TINY, n_samples=300)
    obs = _as_jax(observe(TINY, (3, 2), hits=[12]))
    state = jax.jit(sampler.init)(jax.random.key(4), obs, jnp.int32(2))
    covers = np.asarray(jax.vmap(lambda s: _ship_cells(s)[:, 12])(state.samples.T))  # [N, S]
    assert (covers.sum(1) == 1).all()
    assert covers.all(0).any()  # one ship holds cell 12 in every sample


def _ship_cells(spans):
    from bsjax.battleship.game import spans as spans_lib
    return jnp.asarray(spans_lib.table_for(TINY).cells)[spans]


def test_particles_match_exact_under_colour_and_sunk_evidence():
    """Grand-style evidence (hits reveal colour, a sunk ship, a free length assignment)."""
    from support import grand_tiny
    config = grand_tiny(5, 5, (3, 2, 2))
    # Ship 3 (length 2) is sunk on cells 0,1; ship 1 revealed at cell 12; misses around it.
    obs = observe(config, (2, 2, 3), colour=[[12], [], [0, 1]], sunk=[False, False, True])
    obs = obs.replace(miss_bits=observe(config, (2, 2, 3), misses=[7, 17]).miss_bits)
    truth = exact.hit_probability(config, obs)
    sampler = ParticleSampler(config, n_particles=4000, sweeps=24)
    init = jax.jit(jax.vmap(lambda k: sampler.hit_probability(sampler.init(k, _as_jax(obs),
                                                                            jnp.int32(0)))))
    estimate = np.asarray(init(jax.random.split(jax.random.key(3), 3))).mean(0)
    np.testing.assert_allclose(estimate, truth, atol=0.05)


def test_update_info_reports_degeneracy():
    """The ESS is P when nothing is learned and falls when evidence makes part of the particles
    unlikely (row A answered "no" three times: boards with a ship there lose a factor ~95);
    acceptance is a rate."""
    sampler = ParticleSampler(TINY, n_particles=400, sweeps=2)
    state = jax.jit(sampler.init)(jax.random.key(0), _as_jax(observe(TINY, (3, 2))), jnp.int32(0))
    update = jax.jit(sampler.update)
    _, same = update(jax.random.key(1), state, _as_jax(observe(TINY, (3, 2))))
    assert float(same.ess) == pytest.approx(400.0, rel=1e-4)
    surprising = observe(TINY, (3, 2), questions=[(list(range(5)), False)] * 3)
    _, info = update(jax.random.key(2), state, _as_jax(surprising))
    assert 1.0 <= float(info.ess) < 0.8 * 400 and 0.0 < float(info.acceptance) <= 1.0
