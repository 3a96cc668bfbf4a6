"""RepairFlow rules (docs/gilp/spec.md §2.5): derived statuses, every rule on a hand-built forest
(blind repair, latent activation, recovery), d* by hand and against the BFS verifier, d*_obs and
the observable expectation model, decodability, the generator (§2.7), the oracle, sampled failure
frequencies, explanations and retracing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsjax.gilp import config, types
from bsjax.gilp.data import generate
from bsjax.gilp.envs import common, repairflow
from bsjax.gilp.envs.repairflow import BENCH, DIAGNOSE, ISOLATE, REPAIR
from bsjax.gilp.types import graph_from_np, graph_to_np
from gilp import env_checks  # noqa: E402
from gilp.bfs import bfs_distance  # noqa: E402

P, A, CO, F, S = config.PENDING, config.ACTIVE, config.COMPLETED, config.FAILED, config.SKIPPED

J = env_checks.jitted(BENCH)


def act(kind, i):
    return jnp.asarray([kind, i, -1], jnp.int32)


def build(parents, goals, fault=(), latent=(), diagnosed=(), checked=(), isolated=(), q=0.10):
    """A hand-built forest (parent -1 = root); statuses derived from the hidden fields here, in
    numpy, independently of the module."""
    n = len(parents)
    arrays = types.empty_graph_np()
    arrays["nmask"][:n] = True
    arrays["ntype"][:n] = config.COMPONENT
    arrays["goal"][list(goals)] = True
    arrays["attr"][:n, 2] = q
    for v, u in enumerate(parents):
        if u >= 0:
            arrays["etype"][u, v] = config.PROPAGATES
    anc = types.ancestor_closure_np(arrays["etype"], arrays["nmask"])
    arrays["anc"] = anc
    hidden = arrays["hidden"]
    for column, nodes in enumerate((fault, latent, diagnosed, checked, isolated)):
        hidden[list(nodes), column] = 1
    fault_b, diag_b, iso_b = hidden[:, 0] > 0, hidden[:, 2] > 0, hidden[:, 4] > 0
    symptomatic = (anc & (fault_b & ~iso_b)[:, None]).any(axis=0)
    hidden[:, 3] &= ~symptomatic
    arrays["status"][:n] = np.select(
        [iso_b, fault_b & diag_b, symptomatic, hidden[:, 3] > 0], [S, A, F, CO], P)[:n]
    return graph_from_np(arrays)


#   0 ──> 1 ──> 2 [GOAL]          fault at 1; node 3 optionally latent
#         └──> 3 [GOAL]
#   └──> 4
#   5 ──> 6 [GOAL]                5 verified healthy
PARENTS, GOALS = [-1, 0, 1, 1, 0, -1, 5], [2, 3, 6]


def hand(**fields):
    base = dict(fault=[1], checked=[5])
    base.update(fields)
    return build(PARENTS, GOALS, **base)


def status(g):
    return np.asarray(g.status)[:7].tolist()


def test_derived_statuses():
    assert status(hand()) == [P, F, F, F, P, CO, P]
    assert status(hand(diagnosed=[1])) == [P, A, F, F, P, CO, P]
    # Isolating a healthy node does not contain its faulty ancestor's symptoms.
    assert status(hand(isolated=[0, 2])) == [S, F, S, F, P, CO, P]


def test_candidates_are_canonical_and_padded():
    acts, amask = map(np.asarray, J.candidates(hand()))
    assert [tuple(a) for a in acts[amask]] == [(k, i, -1) for k in range(3) for i in range(7)]
    assert (acts[~amask] == -1).all()


@pytest.mark.parametrize("fields, action, ok, succ, fail, q", [
    ({}, (DIAGNOSE, 1), True, [P, A, F, F, P, CO, P], None, 0.0),      # fault found
    ({}, (DIAGNOSE, 0), True, [CO, F, F, F, P, CO, P], None, 0.0),     # healthy: verified
    ({}, (DIAGNOSE, 2), True, [P, F, F, F, P, CO, P], None, 0.0),      # symptom only: nothing
    ({}, (DIAGNOSE, 5), False, None, None, 0.0),                       # already completed
    ({}, (REPAIR, 1), True, [P, CO, P, P, P, CO, P], [P, F, F, F, P, CO, P], 0.6),   # blind
    ({}, (REPAIR, 2), True, [P, F, F, F, P, CO, P], [P, F, F, F, P, CO, P], 1.0),    # upstream
    ({}, (REPAIR, 0), False, None, None, 0.0),
    ({"diagnosed": [1]}, (REPAIR, 1), True, [P, CO, P, P, P, CO, P], [P, F, F, F, P, CO, P], 0.1),
    ({"diagnosed": [1], "q": 0.15}, (REPAIR, 1), True, [P, CO, P, P, P, CO, P], [P, F, F, F, P, CO, P],
     0.15),
    ({}, (ISOLATE, 1), True, [P, S, P, P, P, CO, P], None, 0.0),       # contains the fault
    ({}, (ISOLATE, 0), True, [S, F, F, F, P, CO, P], None, 0.0),       # healthy: no containment
    ({}, (ISOLATE, 2), False, None, None, 0.0),                        # goal
    ({"isolated": [4]}, (ISOLATE, 4), False, None, None, 0.0),         # already skipped
    ({"latent": [3]}, (ISOLATE, 1), True, [P, S, P, F, P, CO, P], None, 0.0),  # wakes latent 3
    ({"latent": [3]}, (DIAGNOSE, 3), True, [P, F, F, F, P, CO, P], None, 0.0),
    ({}, (-1, -1), False, None, None, 0.0),                            # padding
])
def test_rules(fields, action, ok, succ, fail, q):
    g = hand(**fields)
    g_succ, g_fail, q_out = J.branches(g, act(*action))
    assert bool(J.valid(g, act(*action))) == ok
    assert np.isclose(float(q_out), q)
    assert status(g_succ) == (succ if ok and succ else status(g))
    assert status(g_fail) == (fail if fail else status(g_succ))


def test_hidden_effects():
    woken, _, _ = J.branches(hand(latent=[3]), act(ISOLATE, 1))
    hidden = np.asarray(woken.hidden)
    assert hidden[3, config.H_FAULT] == 1 and hidden[3, config.H_LATENT] == 0 and hidden[1, config.H_ISOLATED]
    repaired, failed, _ = J.branches(hand(diagnosed=[1]), act(REPAIR, 1))
    assert np.asarray(repaired.hidden)[1].tolist() == [0, 0, 0, 1, 0]
    assert np.asarray(failed.hidden)[1].tolist() == [1, 0, 0, 0, 0]
    # A latent fault under a repaired parent stays dormant and is undetectable by diagnose.
    g, _, _ = J.branches(hand(latent=[3]), act(REPAIR, 1))
    g, _, _ = J.branches(g, act(DIAGNOSE, 3))
    assert g.status[3] == CO and g.hidden[3, config.H_LATENT] == 1


def test_symptomatic_clears_checked():
    arrays = {name: np.array(value) for name, value in graph_to_np(hand()).items()}
    arrays["hidden"][2, config.H_CHECKED] = 1   # inconsistent on purpose: a checked symptomatic node
    g_succ, _, _ = J.branches(graph_from_np(arrays), act(DIAGNOSE, 0))
    assert g_succ.hidden[2, config.H_CHECKED] == 0 and g_succ.status[2] == F


@pytest.mark.parametrize("fields, expected, expected_obs", [
    ({}, 1 + 3, 4),                         # isolate 1, diagnose goals 2, 3, 6
    ({"diagnosed": [1]}, 1 + 3, 4),         # repair or isolate: one step either way
    ({"latent": [3]}, 2 + 3, 4),            # isolation would wake a goal-path latent fault
    ({"fault": [1, 6]}, 1 + 2 + 2, 5),      # goal fault 6: diagnose + repair
    ({"checked": [5, 6], "fault": []}, 2, 2),
])
def test_dstar_by_hand(fields, expected, expected_obs):
    g = hand(**fields)
    assert int(J.dstar(g)) == expected == bfs_distance(BENCH, g)
    assert int(J.dstar_obs(g)) == int(J.dstar_obs(common.observe(g))) == expected_obs


def test_inferred_faults_look_past_isolated_healthy_nodes():
    # 0* ──> 1 (isolated, healthy) ──> 2 [GOAL]: node 2 is FAILED from node 0, not faulty itself.
    g = build([-1, 0, 1], [2], fault=[0], isolated=[1])
    assert status(g)[:3] == [F, S, F]
    assert np.asarray(repairflow.inferred_faults(common.observe(g)))[:3].tolist() == [True, False,
                                                                                       False]
    assert int(J.dstar_obs(common.observe(g))) == int(J.dstar(g)) == 2 == bfs_distance(BENCH, g)


def test_observed_graph_uses_expectation_model():
    # The agent cannot see latent fault 3: it expects isolating 1 to clear node 3's symptom.
    g = hand(latent=[3])
    true, _, _ = J.branches(g, act(ISOLATE, 1))
    imagined, _, _ = J.branches(common.observe(g), act(ISOLATE, 1))
    assert status(true)[3] == F and status(imagined)[3] == P
    assert int(J.dstar(common.observe(g))) == int(J.dstar_obs(g)) == 4 < int(J.dstar(g))


def _raw(split, seed, max_nodes=config.N_MAX):
    rng = np.random.default_rng(seed)
    while True:
        arrays = BENCH.sample_task(rng, split)
        if arrays["nmask"].sum() <= max_nodes:
            return graph_from_np(arrays)


@jax.jit
def expectation_matches(g):
    """`[A]` bool: the observable expectation model predicts every candidate's modal statuses."""
    acts, amask = BENCH.candidates(g)
    guess, seen = repairflow.infer_hidden(common.observe(g)), common.observe(g)
    true = jax.vmap(lambda a: common.modal(BENCH, g, a).status)(acts)
    imagined = jax.vmap(lambda a: common.modal(BENCH, guess, a).status)(acts)
    # Rules given an observed graph (hidden zeroed) run on the same estimate.
    observed = jax.vmap(lambda a: common.modal(BENCH, seen, a).status)(acts)
    return (jnp.all(true == imagined, axis=1) & jnp.all(true == observed, axis=1)) | ~amask


def nested_faults(g):
    hidden, anc = np.asarray(g.hidden), np.asarray(g.anc)
    live = (hidden[:, config.H_FAULT] > 0) & (hidden[:, config.H_ISOLATED] == 0)
    below = anc & live[:, None] & live[None, :] & ~np.eye(config.N_MAX, dtype=bool)
    return bool(below.any())


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 10_000), ood=st.booleans())
def test_decodability_and_invariant_along_random_trajectories(seed, ood):
    for g in env_checks.random_walk(BENCH, _raw("test_ood" if ood else "val", seed), seed, 8):
        assert bool(J.all_decodable(g))
        assert not nested_faults(g)


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_observable_distance_and_expectation_on_id_states(seed):
    for g in env_checks.random_walk(BENCH, _raw("val", seed), seed, 6):
        assert int(J.dstar_obs(g)) == int(J.dstar(g))
        assert int(J.dstar_obs(common.observe(g))) == int(J.dstar_obs(g))
        assert int(J.dstar(common.observe(g))) == int(J.dstar(g))
        assert bool(jnp.all(expectation_matches(g)))


def test_dstar_matches_bfs_on_small_instances():
    graphs = [_raw("val", seed, max_nodes=7) for seed in range(3)]
    graphs += env_checks.random_walk(BENCH, _raw("val", 11, max_nodes=7), 11, 3)[1:]
    # OOD-like: two faults, one with a goal-path latent child, one with an off-path latent child.
    #   0* ──> 1~ ──> 2 [GOAL]     3* ──> 4 [GOAL]
    #                              └──> 5~
    graphs.append(build([-1, 0, 1, -1, 3, 3], [2, 4], fault=[0, 3], latent=[1, 5], q=0.15))
    for g in graphs:
        assert int(J.dstar(g)) == bfs_distance(BENCH, g)


def test_oracle_reaches_goal_in_exactly_h_steps():
    tasks = (env_checks.generated(BENCH, "val", [0, 4])
             + env_checks.generated(BENCH, "test_ood", [1, 5]))
    env_checks.assert_oracle_reaches_goal_in_exactly_h_modal_steps(BENCH, tasks)


@pytest.mark.parametrize("fields, q", [({"diagnosed": [1]}, 0.10),
                                       ({"diagnosed": [1], "q": 0.15}, 0.15), ({}, 0.6)])
def test_sampled_repair_failures_match_q(fields, q):
    keys = jax.random.split(jax.random.key(3), 4000)
    with jax.debug_key_reuse(True):
        nexts, failed = J.sample_many(keys, hand(**fields), act(REPAIR, 1))
    failed = np.asarray(failed)
    assert abs(failed.mean() - q) < 4 * np.sqrt(q * (1 - q) / len(keys))
    assert ((np.asarray(nexts.status[:, 1]) == CO) == ~failed).all()


@pytest.mark.parametrize("split", ["val", "test_ood"])
def test_generator_deterministic_and_well_formed(split):
    ood = split == "test_ood"
    lo, hi = generate.split_range("repairflow", split)
    for index in range(4):
        task = generate.generate_task("repairflow", split, index)
        assert generate.checksum(task) == generate.checksum(
            generate.generate_task("repairflow", split, index))
        assert lo <= task["horizon"] <= hi and task["budget"] == config.step_budget(int(task["horizon"]))
        n = int(task["nmask"].sum())
        assert (8 if ood else 6) <= n <= (16 if ood else 12) and task["nmask"][:n].all()
        edges = task["etype"] == config.PROPAGATES
        assert (edges.sum(axis=0) <= 1).all()                       # a forest
        assert (task["attr"][:n, 1] == ~edges[:n].any(axis=1)).all()  # is_leaf
        assert set(np.unique(task["etype"])) <= {config.NO_EDGE, config.PROPAGATES}
        assert task["attr"][:n, 0].max() <= (1.0 if ood else 4 / 6) + 1e-6
        assert np.allclose(task["attr"][:n, 2], 0.15 if ood else 0.10)
        goals = int(task["goal"].sum())
        assert (3 if ood else 2) <= goals <= (6 if ood else 5)
        hidden = task["hidden"]
        assert not hidden[n:].any() and not hidden[:, [config.H_DIAGNOSED, config.H_ISOLATED]].any()
        faults = int(hidden[:, config.H_FAULT].sum())
        assert 1 <= faults <= (4 if ood else 3)
        g = graph_from_np(task)
        assert not nested_faults(g)
        latent = np.flatnonzero(hidden[:, config.H_LATENT])
        assert len(latent) <= (2 if ood else 0)
        for v in latent:   # latent faults sit on children of active faults
            assert hidden[np.flatnonzero(edges[:, v]), config.H_FAULT].all()
        # Statuses are the derived ones.
        settled = repairflow._settle(g, *repairflow._fields(g.hidden))
        assert (np.asarray(settled.status) == task["status"]).all()


def test_explain():
    g = {name: np.array(value) for name, value in graph_to_np(hand()).items()}
    assert BENCH.explain(g, (REPAIR, 2, -1)) == [
        "node_2 has an unresolved upstream failure (node_1 failed)"]
    assert BENCH.explain(g, (DIAGNOSE, 3, -1)) == [
        "node_3 has an unresolved upstream failure (node_1 failed)"]
    assert BENCH.explain(g, (DIAGNOSE, 5, -1)) == ["node_5 is completed, not pending or failed"]
    assert BENCH.explain(g, (REPAIR, 1, -1)) == ["node_1 is failed, not active (undiagnosed)"]
    assert BENCH.explain(g, (ISOLATE, 6, -1)) == ["node_6 is a goal node and cannot be isolated"]
    assert BENCH.explain(g, (DIAGNOSE, 1, -1)) == []
    # Explanations never read hidden fields.
    g["hidden"][:] = 0
    assert BENCH.explain(g, (REPAIR, 2, -1)) == [
        "node_2 has an unresolved upstream failure (node_1 failed)"]


def test_no_retrace():
    env_checks.assert_step_and_support_trace_once(
        BENCH, [hand(), hand(latent=[3], diagnosed=[1])], [act(REPAIR, 1), act(ISOLATE, 1)])
