"""Property checks every benchmark's tests run on generated tasks (test-only)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config
from bsjax.gilp.data import generate
from bsjax.gilp.envs import common
from bsjax.gilp.types import Graph, graph_from_np, graph_to_np


class Jitted(NamedTuple):
    """A benchmark's rules and the common helpers on them, jitted once per benchmark."""

    valid: Callable
    branches: Callable
    dstar: Callable
    dstar_obs: Callable
    candidates: Callable
    decode: Callable
    sample: Callable
    sample_many: Callable      # sample vmapped over keys
    oracle: Callable
    modal: Callable
    step: Callable
    valid_candidates: Callable  # `[A]` bool: the candidate slots that hold a valid action
    all_decodable: Callable     # both branches of every candidate decode from their directions


@functools.cache
def jitted(bench: common.Bench) -> Jitted:
    """The jitted functions of `bench` (cached, so each compiles once per test session)."""

    @jax.jit
    def valid_candidates(g):
        acts, amask = bench.candidates(g)
        return jax.vmap(bench.valid, (None, 0))(g, acts) & amask

    @jax.jit
    def all_decodable(g):
        acts, amask = bench.candidates(g)

        def one(a):
            g_succ, g_fail, _ = bench.branches(g, a)
            return jnp.stack([jnp.all(bench.decode(g, a, common.direction(g.status, nxt.status))
                                      == nxt.status) for nxt in (g_succ, g_fail)])
        return jnp.all(jax.vmap(one)(acts) | ~amask[:, None])

    return Jitted(
        valid=jax.jit(bench.valid), branches=jax.jit(bench.branches), dstar=jax.jit(bench.dstar),
        dstar_obs=jax.jit(bench.dstar_obs), candidates=jax.jit(bench.candidates),
        decode=jax.jit(bench.decode), sample=jax.jit(bench.sample),
        sample_many=jax.jit(jax.vmap(bench.sample, (0, None, None))),
        oracle=jax.jit(lambda g: common.oracle_action(bench, g)),
        modal=jax.jit(lambda g, a: common.modal(bench, g, a)),
        step=jax.jit(lambda key, g, a: common.step(bench, key, g, a)),
        valid_candidates=valid_candidates, all_decodable=all_decodable)


def generated(bench: common.Bench, split: str, indices: Iterable[int]) -> list[dict]:
    """The generator's tasks `indices` of `split` for `bench`."""
    return [generate.generate_task(bench.name, split, i) for i in indices]


def permute(task: dict, perm: np.ndarray) -> dict:
    """The same task with node `v` moved to position `perm[v]` (padding moves too)."""
    out = dict(task)
    inv = np.argsort(perm)
    for name in ("status", "ntype", "goal", "attr", "hidden", "nmask"):
        out[name] = np.asarray(task[name])[inv]
    for name in ("etype", "anc"):
        out[name] = np.asarray(task[name])[inv][:, inv]
    return out


def random_walk(bench: common.Bench, g: Graph, seed: int, steps: int) -> list[Graph]:
    """States along a trajectory of uniformly random valid actions with sampled outcomes."""
    J = jitted(bench)
    rng, key, states = np.random.default_rng(seed), jax.random.key(seed), [g]
    for _ in range(steps):
        ok = np.flatnonzero(J.valid_candidates(g))
        if len(ok) == 0:
            break
        key, k_step = jax.random.split(key)
        g, _ = J.step(k_step, g, J.candidates(g)[0][rng.choice(ok)])
        states.append(g)
    return states


def assert_oracle_reaches_goal_in_exactly_h_modal_steps(bench: common.Bench, tasks) -> None:
    """Under modal outcomes the oracle finishes every task in H steps, d* falling by one each."""
    J = jitted(bench)
    for task in tasks:
        g = graph_from_np(task)
        horizon = int(task["horizon"])
        for t in range(horizon):
            assert not bool(common.goals_done(g))
            g = J.modal(g, J.oracle(g))
            assert int(J.dstar(g)) == horizon - t - 1
        assert bool(common.goals_done(g))


def assert_decodable_along_random_walks(bench: common.Bench, tasks, steps: int = 12,
                                        seed: int = 9) -> None:
    """decode(g, a, dir(g, g')) == g'.status for every candidate's success and failure branch,
    along sampled trajectories of a uniformly random valid policy (`random_walk`)."""
    J = jitted(bench)
    for index, task in enumerate(tasks):
        for g in random_walk(bench, graph_from_np(task), seed + index, steps):
            assert bool(J.all_decodable(g))


def assert_decodes_branches_and_any_direction(bench: common.Bench, g: Graph, a: jax.Array,
                                              dirs: list[int]) -> None:
    """Both branches of `a` decode from their directions; any direction vector on the first
    `len(dirs)` nodes decodes to valid status codes and keeps the 0-direction nodes."""
    J = jitted(bench)
    g_succ, g_fail, _ = J.branches(g, a)
    for nxt in (g_succ, g_fail):
        direction = common.direction(g.status, nxt.status)
        np.testing.assert_array_equal(J.decode(g, a, direction), nxt.status)
    full_dirs = np.zeros(config.N_MAX, np.int8)
    full_dirs[:len(dirs)] = dirs
    decoded = np.asarray(J.decode(g, a, jnp.asarray(full_dirs)))
    assert ((decoded >= 0) & (decoded < config.N_STATUS)).all()
    np.testing.assert_array_equal(decoded[full_dirs == 0], np.asarray(g.status)[full_dirs == 0])


def assert_generator_deterministic_and_in_range(bench: common.Bench, val_tasks, ood_tasks,
                                                index: int) -> None:
    """Task `index` regenerates identically, horizons lie in the split's range with d* = H and
    the budget of docs/gilp/spec.md §2.6, and a generated split's checksum is reproducible."""
    J = jitted(bench)
    again = generate.generate_task(bench.name, "val", index)
    for name in generate.ARRAY_FIELDS:
        np.testing.assert_array_equal(np.asarray(again[name]), np.asarray(val_tasks[index][name]))
    for tasks, split in ((val_tasks, "val"), (ood_tasks, "test_ood")):
        lo, hi = generate.split_range(bench.name, split)
        for task in tasks:
            assert lo <= int(task["horizon"]) <= hi
            assert int(task["budget"]) == config.step_budget(int(task["horizon"]))
            assert int(J.dstar(graph_from_np(task))) == int(task["horizon"])
    _, m1 = generate.generate_split(bench.name, "test_id", count=3)
    a2, m2 = generate.generate_split(bench.name, "test_id", count=3)
    assert m1["sha256"] == m2["sha256"] == generate.checksum(a2)


def assert_padding_and_permutation_invariance(bench: common.Bench, tasks, stride: int = 3,
                                              seed: int = 5) -> None:
    """Moving nodes among the padding slots keeps d*, the number of candidates, and validity and
    modal successor of every `stride`-th candidate (node arguments renamed)."""
    J = jitted(bench)
    rng = np.random.default_rng(seed)
    for task in tasks:
        perm = rng.permutation(config.N_MAX)
        g, h = graph_from_np(task), graph_from_np(permute(task, perm))
        assert int(J.dstar(g)) == int(J.dstar(h))
        acts, amask = J.candidates(g)
        assert int(amask.sum()) == int(J.candidates(h)[1].sum())
        for slot in np.flatnonzero(np.asarray(amask))[::stride]:
            a = np.asarray(acts[slot])
            b = jnp.asarray([a[0], perm[a[1]], perm[a[2]] if a[2] >= 0 else -1], jnp.int32)
            assert bool(J.valid(g, acts[slot])) == bool(J.valid(h, b))
            np.testing.assert_array_equal(np.asarray(J.modal(g, acts[slot]).status),
                                          np.asarray(J.modal(h, b).status)[perm])


def assert_jit_vmap_over_candidates(bench: common.Bench, task: dict) -> None:
    """valid, branches, sample and support vmap over all candidate slots under one jit, with the
    expected shapes, no valid padding slot and a non-empty support for every node."""
    g = graph_from_np(task)
    acts, amask = jitted(bench).candidates(g)
    with jax.debug_key_reuse(True):
        keys = jax.random.split(jax.random.key(2), config.A_MAX)
        ok, (g_succ, g_fail, q), (g_next, failed), support = jax.jit(lambda g, acts, keys: (
            jax.vmap(bench.valid, (None, 0))(g, acts),
            jax.vmap(bench.branches, (None, 0))(g, acts),
            jax.vmap(bench.sample, (0, None, 0))(keys, g, acts),
            jax.vmap(lambda a: common.support(bench, g, a))(acts)))(g, acts, keys)
    chex.assert_shape([ok, q, failed], (config.A_MAX,))
    chex.assert_shape([g_succ.status, g_fail.status, g_next.status], (config.A_MAX, config.N_MAX))
    chex.assert_shape(support, (config.A_MAX, config.N_MAX, config.N_STATUS))
    assert np.asarray(ok)[~np.asarray(amask)].sum() == 0
    assert np.asarray(support).sum(-1).min() >= 1


def assert_step_compiles_once(bench: common.Bench, tasks) -> None:
    """One trace of the jitted `step` serves the oracle's first action on every task; each step
    is valid, advances t to 1, has a finite reward and keeps int8 statuses."""
    J = jitted(bench)
    chex.clear_trace_counter()

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(key, g, a):
        return common.step(bench, key, g, a)

    with jax.debug_key_reuse(True):
        keys = jax.random.split(jax.random.key(3), len(tasks))
        for key, task in zip(keys, tasks):
            g = graph_from_np(task)
            g_next, info = step(key, g, J.oracle(g))
            assert bool(info.valid) and int(g_next.t) == 1
            chex.assert_tree_all_finite(info.reward)
            assert graph_to_np(g_next)["status"].dtype == np.int8


def assert_step_and_support_trace_once(bench: common.Bench, graphs, actions) -> None:
    """One trace of jitted `step` and `support` serves every graph with every action."""
    chex.clear_trace_counter()

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step_and_support(key, g, a):
        return common.step(bench, key, g, a), common.support(bench, g, a)

    for g in graphs:
        for i, a in enumerate(actions):
            step_and_support(jax.random.key(i), g, a)
