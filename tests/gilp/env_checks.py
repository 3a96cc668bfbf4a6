"""Property checks every benchmark's tests run on generated tasks (test-only)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.gilp.envs import common
from bsjax.gilp.types import graph_from_np


@functools.lru_cache(maxsize=None)
def _jitted(bench: common.Bench):
    oracle_modal = jax.jit(lambda g: common.modal(bench, g, common.oracle_action(bench, g)))

    @jax.jit
    def all_decodable(g):
        acts, amask = bench.candidates(g)

        def one(a):
            g_succ, g_fail, _ = bench.branches(g, a)
            return jnp.stack([jnp.all(bench.decode(g, a, common.direction(g.status, nxt.status))
                                      == nxt.status) for nxt in (g_succ, g_fail)])
        return jnp.all(jax.vmap(one)(acts) | ~amask[:, None])

    @jax.jit
    def valid_candidates(g):
        acts, amask = bench.candidates(g)
        return acts, jax.vmap(bench.valid, (None, 0))(g, acts) & amask

    return oracle_modal, jax.jit(bench.dstar), all_decodable, valid_candidates, jax.jit(bench.sample)


def assert_oracle_reaches_goal_in_exactly_h_modal_steps(bench: common.Bench, tasks) -> None:
    """Under modal outcomes the oracle finishes every task in H steps, d* falling by one each."""
    oracle_modal, dstar, _, _, _ = _jitted(bench)
    for task in tasks:
        g = graph_from_np(task)
        horizon = int(task["horizon"])
        for t in range(horizon):
            assert not bool(common.goals_done(g))
            g = oracle_modal(g)
            assert int(dstar(g)) == horizon - t - 1
        assert bool(common.goals_done(g))


def assert_decodable_along_random_walks(bench: common.Bench, tasks, steps: int = 12,
                                        seed: int = 9) -> None:
    """decode(g, a, dir(g, g')) == g'.status for every candidate's success and failure branch,
    along sampled trajectories of a uniformly random valid policy."""
    _, _, all_decodable, valid_candidates, sample = _jitted(bench)
    rng = np.random.default_rng(seed)
    key = jax.random.key(1)
    for task in tasks:
        g = graph_from_np(task)
        for _ in range(steps):
            assert bool(all_decodable(g))
            acts, ok = valid_candidates(g)
            ok = np.asarray(ok)
            if not ok.any():
                break
            key, k_step = jax.random.split(key)
            g, _ = sample(k_step, g, acts[rng.choice(np.flatnonzero(ok))])
