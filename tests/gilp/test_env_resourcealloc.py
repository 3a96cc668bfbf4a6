"""ResourceAlloc rules (docs/gilp/spec.md §2.4): every rule on hand-built graphs, q(release), d* by hand
and against the BFS verifier, decodability, the generator (§2.7), the oracle, sampled failure
frequencies, explanations and retracing."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsjax.gilp import config, types
from bsjax.gilp.data import generate
from bsjax.gilp.envs import common
from bsjax.gilp.envs.resourcealloc import ASSIGN, BENCH, ESCALATE, RELEASE
from bsjax.gilp.types import graph_from_np, graph_to_np
from gilp import env_checks  # noqa: E402
from gilp.bfs import bfs_distance  # noqa: E402

P, A, CO, F = config.PENDING, config.ACTIVE, config.COMPLETED, config.FAILED

J = env_checks.jitted(BENCH)


def act(kind, i, j=-1):
    return jnp.asarray([kind, i, j], jnp.int32)


def build(caps, jobs, down=(), p_fail=0.05):
    """Resources 0..R-1 (the last is e*, capacity 1) then jobs R.. as (home, status, goal); an
    ACTIVE job is assigned to its home."""
    arrays = types.empty_graph_np()
    n_res = len(caps) + 1
    n = n_res + len(jobs)
    arrays["nmask"][:n] = True
    arrays["ntype"][:n_res] = config.RESOURCE
    arrays["ntype"][n_res:n] = config.JOB
    arrays["attr"][:n_res, 0] = np.append(caps, 1) / 3
    arrays["attr"][n_res - 1, 2] = 1.0
    arrays["attr"][:n_res, 3] = p_fail
    for k, (home, status, goal) in enumerate(jobs):
        arrays["status"][n_res + k] = status
        arrays["goal"][n_res + k] = goal
        arrays["etype"][home, n_res + k] = config.ASSIGNED if status == A else config.CAN_SERVE
    load = (arrays["etype"] == config.ASSIGNED).sum(axis=1)
    arrays["attr"][:n_res, 1] = load[:n_res] / 3
    arrays["status"][:n_res] = np.where(load[:n_res] > 0, A, P)
    arrays["status"][list(down)] = F
    arrays["anc"] = types.ancestor_closure_np(arrays["etype"], arrays["nmask"])
    return graph_from_np(arrays)


# r0 (cap 2) serves j3 (running) and j4, j5 (queued goals); r1 (cap 1) serves j6; e* = node 2.
#   r0 ══> j3 (active)    r0 ──> j4 [GOAL], j5 [GOAL]    r1 ──> j6 [GOAL]    e*(2) idle
HAND = build([2, 1], [(0, A, False), (0, P, True), (0, P, True), (1, P, True)])


def test_candidates_are_canonical_and_padded():
    acts, amask = map(np.asarray, J.candidates(HAND))
    real = acts[amask]
    expected = ([(ASSIGN, r, j) for r in range(3) for j in range(3, 7)]
                + [(RELEASE, r, -1) for r in range(3)] + [(ESCALATE, j, -1) for j in range(3, 7)])
    assert [tuple(a) for a in real] == expected
    assert (acts[~amask] == -1).all() and amask.sum() == 3 * 4 + 3 + 4


@pytest.mark.parametrize("action, ok", [
    ((ASSIGN, 0, 4), True),
    ((ASSIGN, 0, 3), False),     # job already running
    ((ASSIGN, 1, 4), False),     # node_4 is not served by node_1
    ((ASSIGN, 2, 4), False),     # e* is not node_4's home
    ((RELEASE, 0), True),
    ((RELEASE, 1), False),       # idle resource
    ((ESCALATE, 4), True),       # a PENDING job may be escalated
    ((ESCALATE, 3), False),      # a running job may not
    ((-1, -1), False),           # padding
])
def test_validity(action, ok):
    assert bool(J.valid(HAND, act(*action))) == ok


def test_capacity_and_down_resource_block_assign():
    full = build([1], [(0, A, False), (0, P, True)])
    assert not J.valid(full, act(ASSIGN, 0, 3))
    down = build([2, 2], [(0, P, True)], down=[0])
    assert not J.valid(down, act(ASSIGN, 0, 3))
    assert "resource node_0 is at capacity (1/1)" in BENCH.explain(graph_to_np(full), (0, 0, 3))
    assert BENCH.explain(graph_to_np(HAND), (0, 1, 4)) == ["node_4 is not served by node_1"]
    assert BENCH.explain(graph_to_np(HAND), (0, 1, 3)) == ["node_3 is active, not pending"]
    assert "node_0 is failed, not pending or active" in BENCH.explain(graph_to_np(down), (0, 0, 3))
    assert BENCH.explain(graph_to_np(HAND), (0, 0, 4)) == []
    assert BENCH.explain(graph_to_np(HAND), (1, 1, -1)) == ["node_1 is pending, not active"]


def test_assign_branch():
    g_succ, g_fail, q = J.branches(HAND, act(ASSIGN, 1, 6))
    assert float(q) == 0.0 and (np.asarray(g_succ.status) == np.asarray(g_fail.status)).all()
    assert g_succ.status[6] == A and g_succ.status[1] == A          # idle resource becomes busy
    assert g_succ.etype[1, 6] == config.ASSIGNED and np.isclose(g_succ.attr[1, 1], 1 / 3)
    g2, _, _ = J.branches(HAND, act(ASSIGN, 0, 4))
    assert g2.status[0] == A and np.isclose(g2.attr[0, 1], 2 / 3)   # load recomputed
    assert not J.valid(g2, act(ASSIGN, 0, 5))                       # now at capacity


@pytest.mark.parametrize("p_fail, n_jobs", [(0.05, 1), (0.05, 2), (0.10, 3)])
def test_release_branches_and_q(p_fail, n_jobs):
    g = build([3], [(0, A, True)] * n_jobs + [(0, P, True)], p_fail=p_fail)
    g_succ, g_fail, q = J.branches(g, act(RELEASE, 0))
    jobs = np.arange(2, 2 + n_jobs)
    assert np.isclose(float(q), 1 - (1 - p_fail) ** n_jobs)
    for branch, outcome in ((g_succ, CO), (g_fail, F)):
        status, etype = np.asarray(branch.status), np.asarray(branch.etype)
        assert (status[jobs] == outcome).all() and status[2 + n_jobs] == P
        assert (etype[0, jobs] == config.CAN_SERVE).all() and status[0] == P
        assert branch.attr[0, 1] == 0.0
    assert np.isclose(float(q), 0.271) or n_jobs < 3                  # spec: q(release) <= 0.271


def test_escalate_moves_home_to_estar():
    g = build([2], [(0, F, True), (0, P, True)])
    g_succ, _, q = J.branches(g, act(ESCALATE, 2))
    assert g_succ.status[2] == P and g_succ.etype[1, 2] == config.CAN_SERVE
    assert g_succ.etype[0, 2] == config.NO_EDGE and float(q) == 0.0
    assert J.valid(g_succ, act(ASSIGN, 1, 2)) and not J.valid(g_succ, act(ASSIGN, 0, 2))
    done = build([2], [(0, CO, True)])
    assert not J.valid(done, act(ESCALATE, 2))


def test_invalid_action_is_a_noop():
    g_succ, g_fail, q = J.branches(HAND, act(RELEASE, 1))
    for branch in (g_succ, g_fail):
        chex.assert_trees_all_equal(branch, HAND)
    assert float(q) == 0.0


@pytest.mark.parametrize("caps, jobs, down, expected", [
    ([2, 1], [(0, A, False), (0, P, True), (0, P, True), (1, P, True)], (), 2 + 2 + 1 + 1),
    ([1], [(0, A, False), (0, P, True)], (), 1 + 2),                  # release first, then batch
    ([2], [(0, A, True)], (), 1),                                     # one release
    ([2], [(0, A, False)], (), 0),                                    # no goal work
    ([2], [(0, F, True)], (), 1 + 1 + 1),                             # escalate, assign, release
    ([2, 2], [(0, P, True), (0, P, True)], [0], 2 * (1 + 1 + 1)),     # home down: via e* (cap 1)
    ([3], [(0, CO, True), (0, F, False)], (), 0),
])
def test_dstar_by_hand(caps, jobs, down, expected):
    g = build(caps, jobs, down)
    assert int(J.dstar(g)) == expected
    assert int(J.dstar_obs(common.observe(g))) == expected


def _small_tasks(split, count, max_nodes, seed):
    rng, out = np.random.default_rng(seed), []
    while len(out) < count:
        arrays = BENCH.sample_task(rng, split)
        if arrays is not None and arrays["nmask"].sum() <= max_nodes:
            out.append(graph_from_np(arrays))
    return out


def test_dstar_matches_bfs_on_small_instances():
    graphs = _small_tasks("val", 5, 7, seed=3) + [
        build([1], [(0, A, False), (0, P, True), (0, F, True)]),
        build([2, 1], [(0, P, True), (1, P, True), (1, A, True)], down=[0]),
    ]
    for g in graphs:
        assert int(J.dstar(g)) == bfs_distance(BENCH, g)


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 10_000), ood=st.booleans())
def test_decodability_along_random_trajectories(seed, ood):
    rng = np.random.default_rng(seed)
    arrays = None
    while arrays is None:
        arrays = BENCH.sample_task(rng, "test_ood" if ood else "val")
    for g in env_checks.random_walk(BENCH, graph_from_np(arrays), seed, 8):
        assert bool(J.all_decodable(g))


def test_oracle_reaches_goal_in_exactly_h_steps():
    tasks = (env_checks.generated(BENCH, "val", [0, 3, 5])
             + env_checks.generated(BENCH, "test_ood", [2, 6]))
    env_checks.assert_oracle_reaches_goal_in_exactly_h_modal_steps(BENCH, tasks)


def test_sampled_release_failures_match_q():
    g = build([3], [(0, A, True)] * 3, p_fail=0.10)
    keys = jax.random.split(jax.random.key(7), 4000)
    with jax.debug_key_reuse(True):
        nexts, failed = J.sample_many(keys, g, act(RELEASE, 0))
    job_failed = np.asarray(nexts.status[:, 2:5]) == F
    assert ((np.asarray(nexts.status[:, 2:5]) == CO) | job_failed).all()
    n = job_failed.size
    assert abs(job_failed.mean() - 0.10) < 4 * np.sqrt(0.1 * 0.9 / n)
    q = 1 - 0.9 ** 3
    assert abs(np.asarray(failed).mean() - q) < 4 * np.sqrt(q * (1 - q) / len(keys))
    assert (np.asarray(failed) == job_failed.any(axis=1)).all()
    # Deterministic actions never fail.
    _, failed_assign = J.sample_many(keys, HAND, act(ASSIGN, 0, 4))
    assert not np.asarray(failed_assign).any()


@pytest.mark.parametrize("split", ["val", "test_ood"])
def test_generator_deterministic_and_well_formed(split):
    lo, hi = generate.split_range("resourcealloc", split)
    for index in range(4):
        task = generate.generate_task("resourcealloc", split, index)
        again = generate.generate_task("resourcealloc", split, index)
        assert generate.checksum(task) == generate.checksum(again)
        assert lo <= task["horizon"] <= hi
        n = int(task["nmask"].sum())
        assert task["nmask"][:n].all() and n <= 19
        res = task["nmask"] & (task["ntype"] == config.RESOURCE)
        jobs = task["nmask"] & (task["ntype"] == config.JOB)
        estar = res & (task["attr"][:, 2] == 1)
        assert estar.sum() == 1 and np.isclose(task["attr"][estar, 0], 1 / 3)
        assert task["status"][estar] != F
        home = np.isin(task["etype"], (config.CAN_SERVE, config.ASSIGNED))
        assert (home.sum(axis=0)[jobs] == 1).all() and not home[:, ~jobs].any()
        assert not home[~res].any() and not home[estar].any()       # jobs start at regular homes
        assert np.allclose(task["attr"][res, 3], 0.10 if split == "test_ood" else 0.05)
        assert task["goal"][jobs].any() and not task["goal"][~jobs].any()
        running = jobs & (task["status"] == A)
        assert not task["goal"][running].any()
        assert task["budget"] == config.step_budget(int(task["horizon"]))


def test_generator_spec_parameters():
    rng = np.random.default_rng(0)
    ood_regular, id_regular = set(), set()
    for split, seen in (("val", id_regular), ("test_ood", ood_regular)):
        for _ in range(60):
            arrays = BENCH.sample_task(rng, split)
            if arrays is None:
                continue
            seen.add(int(((arrays["ntype"] == config.RESOURCE) & arrays["nmask"]).sum()) - 1)
    assert id_regular == {2, 3} and ood_regular == {3, 4}


def test_no_retrace():
    env_checks.assert_step_and_support_trace_once(
        BENCH, [HAND, build([1], [(0, A, False), (0, P, True)])],
        [act(RELEASE, 0), act(ASSIGN, 0, 3)])
