"""TaskGraph rules (docs/gilp/spec.md §2.2): every rule row on a hand-built DAG, decodability, d* against
the BFS verifier, the generator (§2.7), padding invariance, the oracle, jit / vmap and retracing."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsjax.gilp import config, types
from bsjax.gilp.envs import taskgraph
from bsjax.gilp.envs.taskgraph import BENCH, EXECUTE, RETRY, SKIP
from bsjax.gilp.types import graph_from_np
from gilp import env_checks  # noqa: E402
from gilp.bfs import bfs_distance  # noqa: E402

P, A, CO, F, S = config.PENDING, config.ACTIVE, config.COMPLETED, config.FAILED, config.SKIPPED

J = env_checks.jitted(BENCH)


def build(edges, status, goals, duration, phi, n_max=config.N_MAX):
    """A hand-built TaskGraph: `edges` are (u, v) depends_on pairs, nodes 0..len(status)-1."""
    arrays = types.empty_graph_np(n_max)
    n = len(status)
    arrays["nmask"][:n] = True
    arrays["status"][:n] = status
    arrays["goal"][list(goals)] = True
    arrays["attr"][:n, 0] = np.asarray(duration) - 1
    arrays["attr"][:n, 1] = np.asarray(phi) / 2
    for u, v in edges:
        arrays["etype"][u, v] = config.DEPENDS_ON
    arrays["anc"] = types.ancestor_closure_np(arrays["etype"], arrays["nmask"])
    return arrays


# root(0) -> mid(1, d = 2, φ = 2) -> goal(2, φ = 1); distractor(3) hangs off the root.
#   0 ──> 1 ──> 2 [GOAL]
#   └──> 3
EDGES = [(0, 1), (1, 2), (0, 3)]
DUR, PHI, GOALS = [1, 2, 1, 1], [0, 2, 1, 1], [2]


def hand(status):
    return build(EDGES, status, GOALS, DUR, PHI)


def act(kind, i, j=-1):
    return jnp.asarray([kind, i, j], jnp.int32)


# (statuses, action, valid, arg status on success, on failure, q)
RULES = [
    ([P, P, P, P], (EXECUTE, 0), True, CO, F, 0.05),        # d = 1, φ = 0: completes or fails
    ([P, P, P, P], (EXECUTE, 1), False, P, P, 0.0),         # unmet dependency (node 0 pending)
    ([CO, P, P, P], (EXECUTE, 1), True, A, A, 0.0),         # d = 2 first stage never fails
    ([CO, A, P, P], (EXECUTE, 1), True, CO, F, 0.35),       # completing stage, φ = 2
    ([CO, CO, P, P], (EXECUTE, 2), True, CO, F, 0.15),      # φ = 1
    ([CO, F, P, P], (EXECUTE, 2), False, P, P, 0.0),        # predecessor failed
    ([CO, CO, P, P], (EXECUTE, 0), False, CO, CO, 0.0),     # already completed
    ([CO, F, P, P], (EXECUTE, 1), False, F, F, 0.0),        # failed nodes need retry
    ([CO, P, P, S], (EXECUTE, 3), False, S, S, 0.0),
    ([CO, F, P, P], (RETRY, 1), True, A, A, 0.0),
    ([CO, A, P, P], (RETRY, 1), False, A, A, 0.0),
    ([P, P, P, P], (RETRY, 0), False, P, P, 0.0),
    ([CO, P, P, P], (SKIP, 3), True, S, S, 0.0),
    ([CO, P, P, A], (SKIP, 3), True, S, S, 0.0),
    ([CO, P, P, F], (SKIP, 3), True, S, S, 0.0),
    ([CO, P, P, CO], (SKIP, 3), False, CO, CO, 0.0),
    ([CO, P, P, S], (SKIP, 3), False, S, S, 0.0),
    ([CO, P, P, P], (SKIP, 2), False, P, P, 0.0),           # goal nodes cannot be skipped
    ([CO, P, P, P], (SKIP, 1), True, S, S, 0.0),            # valid, but a dead end
    ([P, P, P, P], (-1, 0), False, P, P, 0.0),              # padding kind
]


@pytest.mark.parametrize("status,action,ok,to_succ,to_fail,q", RULES)
def test_rule_rows(status, action, ok, to_succ, to_fail, q):
    g = graph_from_np(hand(status))
    a = act(*action)
    assert bool(J.valid(g, a)) == ok
    g_succ, g_fail, q_out = J.branches(g, a)
    assert float(q_out) == pytest.approx(q)
    i = action[1]
    expect_succ, expect_fail = np.array(status), np.array(status)
    expect_succ[i], expect_fail[i] = to_succ, to_fail
    np.testing.assert_array_equal(np.asarray(g_succ.status)[:4], expect_succ)
    np.testing.assert_array_equal(np.asarray(g_fail.status)[:4], expect_fail)
    assert g_succ.status.dtype == jnp.int8
    assert not np.asarray(g_succ.status)[4:].any()


def test_actions_on_padded_nodes_are_invalid():
    g = graph_from_np(hand([P, P, P, P]))
    for kind in range(3):
        for i in (4, 23, -1, 24):
            assert not bool(J.valid(g, act(kind, i)))


def test_dstar_hand_built():
    assert int(J.dstar(graph_from_np(hand([P, P, P, P])))) == 1 + 2 + 1       # distractor ignored
    assert int(J.dstar(graph_from_np(hand([CO, A, P, S])))) == 1 + 1
    assert int(J.dstar(graph_from_np(hand([CO, F, P, P])))) == 2 + 1          # retry, execute
    assert int(J.dstar(graph_from_np(hand([CO, CO, CO, P])))) == 0
    assert int(J.dstar(graph_from_np(hand([CO, S, P, P])))) == config.UNSOLV       # required skip
    assert int(J.dstar(graph_from_np(hand([S, CO, CO, P])))) == config.UNSOLV


@pytest.mark.parametrize("status", [[P, P, P, P], [CO, F, P, A], [CO, A, P, F], [CO, S, P, P],
                                    [P, P, P, S]])
def test_dstar_matches_bfs_hand_built(status):
    g = graph_from_np(hand(status))
    assert int(J.dstar(g)) == bfs_distance(BENCH, g)


def test_candidates_layout():
    g = graph_from_np(hand([P, P, P, P]))
    acts, amask = J.candidates(g)
    chex.assert_shape(acts, (config.A_MAX, 3))
    acts, amask = np.asarray(acts), np.asarray(amask)
    assert acts.dtype == np.int32 and amask.sum() == 12
    used = acts[amask]
    np.testing.assert_array_equal(used, [(k, i, -1) for k in range(3) for i in range(4)])
    assert (acts[~amask] == -1).all()
    assert amask[:12].all()                                  # real candidates come first
    # With real nodes scattered among padding the order is still kind-major, then id.
    arrays = hand([P, P, P, P])
    perm = np.r_[[3, 9, 17, 20], np.setdiff1d(np.arange(config.N_MAX), [3, 9, 17, 20])]
    h = graph_from_np(env_checks.permute(arrays, perm))
    acts, amask = (np.asarray(x) for x in J.candidates(h))
    np.testing.assert_array_equal(acts[:12], [(k, i, -1) for k in range(3) for i in (3, 9, 17, 20)])
    assert amask.sum() == 12 and amask[:12].all()


def test_explain_templates():
    def say(status, kind, i):
        return BENCH.explain(hand(status), (kind, i, -1))
    assert say([P, P, P, P], EXECUTE, 1) == ["node_1 has unmet dependencies (node_0 still pending)"]
    assert say([CO, F, P, P], EXECUTE, 2) == ["node_2 has unmet dependencies (node_1 failed)"]
    assert say([CO, P, P, P], SKIP, 1) == ["node_1 is required by goal node_2"]
    assert say([CO, P, P, P], SKIP, 0) == ["node_0 is required by goal node_2",
                                           "node_0 is completed, not pending, active or failed"]
    assert say([CO, P, P, P], SKIP, 2) == ["node_2 is a goal node"]
    assert say([CO, P, P, P], RETRY, 1) == ["node_1 is pending, not failed"]
    assert say([CO, CO, P, P], EXECUTE, 0) == ["node_0 is completed, not pending or active"]
    assert say([CO, P, P, P], EXECUTE, 1) == []
    assert say([CO, P, P, P], SKIP, 3) == []
    assert say([CO, P, P, P], -1, -1) == []


@settings(max_examples=40, deadline=None)
@given(status=st.lists(st.integers(0, 4), min_size=4, max_size=4), kind=st.integers(-1, 2),
       node=st.integers(-1, 6), dirs=st.lists(st.integers(-1, 1), min_size=4, max_size=4))
def test_branch_properties(status, kind, node, dirs):
    g = graph_from_np(hand(status))
    a = act(kind, node)
    ok = bool(J.valid(g, a))
    g_succ, g_fail, q = J.branches(g, a)
    before, succ, fail = (np.asarray(x) for x in (g.status, g_succ.status, g_fail.status))
    assert 0.0 <= float(q) <= 0.5
    changed = (succ != before) | (fail != before)
    if not ok:
        assert float(q) == 0.0 and not changed.any()
    else:
        assert not np.delete(changed, node).any()        # only the argument changes
        assert (float(q) > 0) == (fail[node] == F)
    env_checks.assert_decodes_branches_and_any_direction(BENCH, g, a, dirs)


def test_failure_probability_is_sampled_independently():
    g = graph_from_np(hand([CO, A, P, P]))
    a = act(EXECUTE, 1)
    with jax.debug_key_reuse(True):
        k_exec, k_skip = jax.random.split(jax.random.key(0))
        g_next, failed = J.sample_many(jax.random.split(k_exec, 4000), g, a)
        _, never = J.sample_many(jax.random.split(k_skip, 4000), g, act(SKIP, 3))
    failed = np.asarray(failed)
    assert abs(failed.mean() - 0.35) < 0.03
    np.testing.assert_array_equal(np.asarray(g_next.status)[:, 1], np.where(failed, F, CO))
    assert not np.asarray(never).any()


# ---------------------------------------------------------------------------------------------
# Generated tasks


@pytest.fixture(scope="module")
def val_tasks():
    return env_checks.generated(BENCH, "val", range(8))


@pytest.fixture(scope="module")
def ood_tasks():
    return env_checks.generated(BENCH, "test_ood", range(8))


def test_generator_determinism_and_ranges(val_tasks, ood_tasks):
    env_checks.assert_generator_deterministic_and_in_range(BENCH, val_tasks, ood_tasks, index=3)


def test_generator_structure():
    rng = np.random.default_rng(7)
    backwards = 0
    for split in ("train", "test_ood"):
        for _ in range(40):
            task = BENCH.sample_task(rng, split)
            if task is None:
                continue
            n = int(task["nmask"].sum())
            assert n <= config.N_MAX and task["nmask"][:n].all() and not task["nmask"][n:].any()
            etype, anc, goal, status = task["etype"], task["anc"], task["goal"], task["status"]
            assert set(np.unique(etype)) <= {config.NO_EDGE, config.DEPENDS_ON}
            assert not (anc & anc.T & ~np.eye(config.N_MAX, dtype=bool)).any()     # a DAG
            n_goals = int(goal.sum())
            assert n_goals == 1 if split == "train" else 1 <= n_goals <= 2
            assert set(np.unique(status[:n])) <= {P, CO}
            has_parent = (etype == config.DEPENDS_ON).any(axis=0)
            assert not (status == CO)[has_parent | goal].any()    # only non-goal roots start done
            durations = task["attr"][:n, 0] + 1
            assert set(np.unique(durations)) <= {1, 2}
            assert set(np.unique(task["attr"][:n, 1] * 2)) <= {0, 1, 2}
            # Distractors: nodes that are neither goal ancestors nor parents of anything.
            required = (anc & goal[None, :]).any(axis=1)
            leaves = ~(etype == config.DEPENDS_ON).any(axis=1) & task["nmask"]
            assert (leaves & ~required).sum() >= (1 if split == "train" else 2)
            us, vs = np.nonzero(etype == config.DEPENDS_ON)
            backwards += int((us > vs).sum())
    assert backwards > 0        # ids are permuted: they do not follow the topological order


def _small_tasks(count, seed, max_n=7, max_d=6):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        task = BENCH.sample_task(rng, "train")
        if task is not None and task["nmask"].sum() <= max_n:
            if 1 <= int(J.dstar(graph_from_np(task))) <= max_d:
                out.append(task)
    return out


def test_dstar_matches_bfs_on_small_generated_tasks():
    rng = np.random.default_rng(3)
    walked = 0
    for task in _small_tasks(8, seed=11, max_n=6, max_d=5):
        g = graph_from_np(task)
        assert int(J.dstar(g)) == bfs_distance(BENCH, g)
        # Also from a state a few random execute / retry steps later, through either branch, so
        # that ACTIVE and FAILED nodes appear (skips of required nodes: the hand-built cases).
        acts, _ = J.candidates(g)
        for _ in range(3):
            ok = np.asarray(J.valid_candidates(g)) & (np.asarray(acts[:, 0]) != SKIP)
            if not ok.any():
                break
            g_succ, g_fail, _ = J.branches(g, acts[rng.choice(np.flatnonzero(ok))])
            g = g_fail if rng.random() < 0.5 else g_succ
        if int(J.dstar(g)) <= 5:
            walked += int((np.asarray(g.status) == F).any() | (np.asarray(g.status) == A).any())
            assert int(J.dstar(g)) == bfs_distance(BENCH, g)
    assert walked >= 3


def test_padding_and_permutation_invariance(val_tasks, ood_tasks):
    env_checks.assert_padding_and_permutation_invariance(BENCH, val_tasks[:4] + ood_tasks[:4])


def test_oracle_reaches_goal_in_exactly_h_modal_steps(val_tasks, ood_tasks):
    env_checks.assert_oracle_reaches_goal_in_exactly_h_modal_steps(BENCH, val_tasks + ood_tasks)


def test_decodable_on_generated_transitions(val_tasks, ood_tasks):
    env_checks.assert_decodable_along_random_walks(BENCH, val_tasks + ood_tasks)


def test_jit_vmap_over_candidates(val_tasks):
    env_checks.assert_jit_vmap_over_candidates(BENCH, val_tasks[0])


def test_step_compiles_once_for_two_tasks(val_tasks):
    env_checks.assert_step_compiles_once(BENCH, val_tasks[:2])
    assert taskgraph.sample_task is BENCH.sample_task
