"""GILP gate functions (docs/gilp/spec.md §2.6, §4.5–§4.7): Jaccard, bands, ρ_eff, L_t, B_t, Û,
discrepancy lines and the ablation behaviours, on hand-built cases."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsjax.gilp import config as gilp_config
from bsjax.gilp import methods
from bsjax.gilp.planners import gate
from bsjax.gilp.types import ancestor_closure_np


def _mask(n, ids):
    m = np.zeros(n, bool)
    m[list(ids)] = True
    return m


# --- consistency -------------------------------------------------------------------------------

def test_jaccard_both_empty_is_one():
    assert float(gate.jaccard(np.zeros(6, bool), np.zeros(6, bool))) == 1.0


@pytest.mark.parametrize("s, s_hat, expected", [
    ({1}, {1}, 1.0), ({1}, set(), 0.0), (set(), {2}, 0.0), ({1, 2}, {2, 3}, 1 / 3),
    ({1, 2, 3}, {1, 2, 3, 4}, 0.75), ({0, 5}, {1, 4}, 0.0)])
def test_jaccard_values(s, s_hat, expected):
    assert float(gate.jaccard(_mask(6, s), _mask(6, s_hat))) == pytest.approx(expected, abs=1e-6)


def test_jaccard_batched_and_jitted():
    s = np.stack([_mask(4, {0}), _mask(4, set()), _mask(4, {1, 2})])
    s_hat = np.stack([_mask(4, {0, 1}), _mask(4, set()), _mask(4, {3})])
    out = jax.jit(gate.jaccard)(s, s_hat)
    np.testing.assert_allclose(np.asarray(out), [0.5, 1.0, 0.0])


def test_band_boundaries_exact():
    # 0.30 is the middle band (not corrected); 0.70 is accepted (not doubled).
    cons = np.array([0.0, 0.29, 0.2999, 0.30, 0.5, 0.6999, 0.70, 0.71, 1.0])
    np.testing.assert_array_equal(np.asarray(gate.band(cons)), [2, 2, 2, 1, 1, 1, 0, 0, 0])
    assert int(gate.band(0.30, 0.30, 0.70)) == gate.MIDDLE
    assert int(gate.band(0.70, 0.30, 0.70)) == gate.ACCEPT


def test_band_boundaries_from_jaccard_ratios():
    # 3/10 and 7/10 computed in float32 still land on the inclusive side of the boundary.
    s = _mask(10, range(10))
    assert int(gate.band(gate.jaccard(s, _mask(10, range(3))))) == gate.MIDDLE
    assert int(gate.band(gate.jaccard(s, _mask(10, range(7))))) == gate.ACCEPT
    assert int(gate.band(gate.jaccard(s, _mask(10, range(2))))) == gate.CORRECT


def test_band_custom_taus():
    assert int(gate.band(0.3, tau_low=0.35, tau_high=0.7)) == gate.CORRECT
    assert int(gate.band(0.5, tau_low=0.2, tau_high=0.5)) == gate.ACCEPT


def test_rho_eff_doubling_capped_at_one():
    rho = np.array([0.0, 0.2, 0.4, 0.5, 0.6, 1.0], np.float32)
    np.testing.assert_allclose(np.asarray(gate.rho_eff(rho, True)), [0, 0.4, 0.8, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(np.asarray(gate.rho_eff(rho, False)), rho)
    mixed = gate.rho_eff(rho, rho > 0.3)
    np.testing.assert_allclose(np.asarray(mixed), [0, 0.2, 0.8, 1.0, 1.0, 1.0])


# --- low-risk subset ---------------------------------------------------------------------------

def test_low_risk_subset_basic():
    values = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    risks = np.array([0.9, 0.1, 0.65, 0.66, 0.2, 0.1, 0.0])
    p_valid = np.array([1, 1, 1, 1, 0.49, 0.5, 1])
    amask = np.ones(7, bool)
    out = np.asarray(gate.low_risk_subset(values, risks, p_valid, amask, chosen=0))
    # 0 is chosen, 3 too risky, 4 likely invalid; ρ̂ = 0.65 and p_valid = 0.5 are inclusive.
    np.testing.assert_array_equal(np.flatnonzero(out), [1, 2, 5, 6])


def test_low_risk_subset_top4_by_value_with_ties():
    values = np.array([0.5, 0.7, 0.7, 0.1, 0.7, 0.9, 0.7, 0.2])
    risks = np.zeros(8)
    out = np.asarray(gate.low_risk_subset(values, risks, np.ones(8), np.ones(8, bool), chosen=5))
    # 5 is excluded as the chosen action; ties at 0.7 keep the lower indices 1, 2, 4, 6.
    np.testing.assert_array_equal(np.flatnonzero(out), [1, 2, 4, 6])


def test_low_risk_subset_empty_cases():
    values = np.array([0.3, 0.2, 0.1])
    amask = np.ones(3, bool)
    assert not np.asarray(gate.low_risk_subset(values, np.full(3, 0.9), np.ones(3), amask, 0)).any()
    assert not np.asarray(gate.low_risk_subset(values, np.zeros(3), np.zeros(3), amask, 0)).any()
    assert not np.asarray(gate.low_risk_subset(values, np.zeros(3), np.ones(3),
                                               np.zeros(3, bool), 0)).any()
    only_chosen = gate.low_risk_subset(values, np.array([0, 1, 1.0]), np.ones(3), amask, 0)
    assert not np.asarray(only_chosen).any()


def test_low_risk_subset_respects_mask_and_threshold():
    values = np.array([0.1, 0.9, 0.8, 0.7])
    risks = np.array([0.0, 0.5, 0.5, 0.5])
    amask = np.array([1, 0, 1, 1], bool)
    out = np.asarray(gate.low_risk_subset(values, risks, np.ones(4), amask, chosen=-1, rho_th=0.4))
    np.testing.assert_array_equal(np.flatnonzero(out), [0])
    out = np.asarray(gate.low_risk_subset(values, risks, np.ones(4), amask, chosen=-1, k=2))
    np.testing.assert_array_equal(np.flatnonzero(out), [2, 3])


# --- skeleton rows -----------------------------------------------------------------------------

def test_skeleton_rows_order_and_dedup():
    values = np.array([0.1, 0.9, 0.3, 0.8, 0.5, 0.2, 0.7, 0.0, 0.6])
    risks = np.array([0.2, 0.95, 0.3, 0.1, 0.7, 0.8, 0.0, 0.9, 0.4])
    rows = np.asarray(gate.skeleton_rows(values, risks, np.ones(9, bool), k=4))
    # value top-4: 1 (0.9), 3 (0.8), 6 (0.7), 8 (0.6); risk top-4: 1, 7, 5, 4 -> 1 is a duplicate.
    np.testing.assert_array_equal(rows, [1, 3, 6, 8, 7, 5, 4, -1])
    assert rows.dtype == np.int32


def test_skeleton_rows_full_overlap_and_padding():
    values = np.array([0.4, 0.3, 0.2, 0.1, 0.0])
    risks = np.array([0.9, 0.8, 0.7, 0.6, 0.0])
    rows = np.asarray(gate.skeleton_rows(values, risks, np.ones(5, bool)))
    # The risk top-4 are the value top-4: B_t has 4 rows, slot 4 is in neither ranking.
    np.testing.assert_array_equal(rows, [0, 1, 2, 3, -1, -1, -1, -1])
    rows = np.asarray(gate.skeleton_rows(values[:2], risks[:2], np.ones(2, bool)))
    np.testing.assert_array_equal(rows, [0, 1, -1, -1, -1, -1, -1, -1])


def test_skeleton_rows_ties_and_mask():
    values = np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.9])
    risks = np.array([0.1, 0.1, 0.3, 0.3, 0.3, 0.3])
    amask = np.array([1, 1, 1, 1, 1, 0], bool)  # slot 5 is padding
    rows = np.asarray(gate.skeleton_rows(values, risks, amask, k=2))
    np.testing.assert_array_equal(rows, [0, 1, 2, 3])
    assert not np.asarray(gate.skeleton_rows(values, risks, np.zeros(6, bool), k=2) >= 0).any()


def test_skeleton_rows_jit_vmap_and_mask():
    key = jax.random.key(0)
    kv, kr = jax.random.split(key)
    values = jax.random.uniform(kv, (5, gilp_config.A_MAX))
    risks = jax.random.uniform(kr, (5, gilp_config.A_MAX))
    amask = jnp.arange(gilp_config.A_MAX)[None, :] < jnp.array([3, 10, 40, 96, 0])[:, None]
    rows = jax.jit(jax.vmap(gate.skeleton_rows))(values, risks, amask)
    assert rows.shape == (5, 8)
    for b in range(5):
        got = np.asarray(rows[b])
        m = np.asarray(amask[b])
        v, r = np.where(m, np.asarray(values[b]), -np.inf), np.where(m, np.asarray(risks[b]), -np.inf)
        top_v = [int(i) for i in np.argsort(-v, kind="stable")[:4] if m[i]]
        top_r = [int(i) for i in np.argsort(-r, kind="stable")[:4] if m[i] and i not in top_v]
        expected = top_v + top_r
        np.testing.assert_array_equal(got, expected + [-1] * (8 - len(expected)))
        mask = np.asarray(gate.skeleton_mask(got, gilp_config.A_MAX))
        np.testing.assert_array_equal(np.flatnonzero(mask), sorted(expected))


# --- affected entities -------------------------------------------------------------------------

def _app_a3_graph():
    """App. A.3-like: 3 -> 7 (goal 7), 2 -> 4, 2 -> 6; 5 is a leaf outside the goal's ancestry;
    slot 9 is padding."""
    n = 10
    etype = np.full((n, n), -1, np.int8)
    for u, v in [(1, 3), (3, 7), (2, 4), (2, 6), (0, 5)]:
        etype[u, v] = gilp_config.DEPENDS_ON
    nmask = np.arange(n) < 9
    goal = np.zeros(n, bool)
    goal[7] = True
    return etype, goal, ancestor_closure_np(etype, nmask), nmask


def test_affected_entities_app_a3():
    etype, goal, anc, nmask = _app_a3_graph()
    dirs = np.zeros((3, 10), np.int8)
    dirs[0, 3] = 1   # execute(node_3): pending -> completed
    dirs[1, 5] = 1   # skip(node_5): pending -> skipped
    dirs[2, 2] = 1   # retry(node_2): failed -> active
    nodes, flag = gate.affected_entities(dirs, etype, goal, anc, nmask)
    nodes, flag = np.asarray(nodes), np.asarray(flag)
    assert [list(np.flatnonzero(row)) for row in nodes] == [[3, 7], [5], [2, 4, 6]]
    np.testing.assert_array_equal(flag, [True, False, False])


def test_affected_entities_goal_node_itself_and_padding():
    etype, goal, anc, nmask = _app_a3_graph()
    dirs = np.zeros(10, np.int8)
    dirs[7] = -1
    dirs[9] = 1  # a padded node never counts
    nodes, flag = gate.affected_entities(dirs, etype, goal, anc, nmask)
    assert list(np.flatnonzero(np.asarray(nodes))) == [7] and bool(flag)
    nodes, flag = gate.affected_entities(np.zeros(10, np.int8), etype, goal, anc, nmask)
    assert not np.asarray(nodes).any() and not bool(flag)


def test_affected_entities_ancestor_without_anc_diagonal():
    # Goal ancestry through `anc` (node 1 is an ancestor of goal 7 via 3); the goal test also
    # holds when anc lacks its diagonal.
    etype, goal, anc, nmask = _app_a3_graph()
    dirs = np.zeros(10, np.int8)
    dirs[1] = 1
    _, flag = gate.affected_entities(dirs, etype, goal, anc, nmask)
    assert bool(flag)
    dirs = np.zeros(10, np.int8)
    dirs[7] = 1
    _, flag = gate.affected_entities(dirs, etype, goal, anc & ~np.eye(10, dtype=bool), nmask)
    assert bool(flag)


def test_affected_entities_bipartite_resource():
    # ResourceAlloc: anc is the diagonal; assign(r0, j3) touches r0 and j3, and r0's out-edges
    # reach every job it serves.
    n = 6
    etype = np.full((n, n), -1, np.int8)
    etype[0, 2] = gilp_config.ASSIGNED
    etype[0, 3] = gilp_config.CAN_SERVE
    etype[1, 4] = gilp_config.CAN_SERVE
    nmask = np.arange(n) < 5
    goal = _mask(n, {3, 4})
    anc = ancestor_closure_np(etype, nmask)
    dirs = np.zeros(n, np.int8)
    dirs[[0, 3]] = 1
    nodes, flag = gate.affected_entities(dirs, etype, goal, anc, nmask)
    assert list(np.flatnonzero(np.asarray(nodes))) == [0, 2, 3] and bool(flag)


# --- discrepancies -----------------------------------------------------------------------------

def test_discrepancies_lines():
    current = np.array([0, 0, 3, 0, 0])
    backbone = np.array([0, 1, 1, 0, 0])        # backbone: node 1 -> active, node 2 -> active
    imagined = np.array([0, 2, 1, 2, 0])        # agent: node 1 -> completed, 2 -> active, 3 -> completed
    s = imagined != current
    s_hat = backbone != current
    assert gate.discrepancies(imagined, backbone, s, s_hat) == [
        "Node 1: backbone predicts active but you imagined completed.",
        "Node 3: backbone predicts pending but you imagined completed."]
    # A node the backbone changes but the agent leaves alone; an `unknown` claim.
    imagined = np.array([0, 5, 3, 0, 0])
    s = np.array([0, 1, 0, 0, 0], bool)
    assert gate.discrepancies(imagined, backbone, s, s_hat) == [
        "Node 1: backbone predicts active but you imagined unknown.",
        "Node 2: backbone predicts active but you imagined failed."]
    assert gate.discrepancies(backbone, backbone, s_hat, s_hat) == []


# --- ablations ---------------------------------------------------------------------------------

def _decide(name, cons, used=0):
    issue, double = gate.gate_decision(methods.get_method(name), cons, used)
    return bool(issue), bool(double)


@pytest.mark.parametrize("name, cons, used, expected", [
    # GILP: correct below 0.30 while budget is left; double in the middle band or when the budget
    # went to a parse re-prompt.
    ("GILP", 0.0, 0, (True, False)), ("GILP", 0.29, 0, (True, False)),
    ("GILP", 0.30, 0, (False, True)), ("GILP", 0.69, 0, (False, True)),
    ("GILP", 0.70, 0, (False, False)), ("GILP", 1.0, 0, (False, False)),
    ("GILP", 0.1, 1, (False, True)), ("GILP", 0.5, 1, (False, True)), ("GILP", 0.9, 1, (False, False)),
    # NoCorrGate: never corrects, never doubles.
    ("GILP-NoCorrGate", 0.0, 0, (False, False)), ("GILP-NoCorrGate", 0.5, 0, (False, False)),
    ("GILP-NoCorrGate", 1.0, 0, (False, False)),
    # NoRiskGate: the same Phase 3 as GILP (doubling is logged; Phase 4 is off).
    ("GILP-NoRiskGate", 0.1, 0, (True, False)), ("GILP-NoRiskGate", 0.5, 0, (False, True)),
    ("GILP-NoRiskGate", 0.8, 0, (False, False)),
    # tau0: always corrects (doubling only after the correction) unless the budget is spent.
    ("GILP-tau0", 0.0, 0, (True, False)), ("GILP-tau0", 0.5, 0, (True, False)),
    ("GILP-tau0", 1.0, 0, (True, False)), ("GILP-tau0", 0.5, 1, (False, True)),
    ("GILP-tau0", 1.0, 1, (False, False)),
    # tau1: never corrects; doubles whenever cons < 0.70.
    ("GILP-tau1", 0.0, 0, (False, True)), ("GILP-tau1", 0.29, 0, (False, True)),
    ("GILP-tau1", 0.5, 0, (False, True)), ("GILP-tau1", 0.70, 0, (False, False)),
])
def test_ablation_behaviours(name, cons, used, expected):
    assert _decide(name, cons, used) == expected


def test_ablation_flags_and_after_correction():
    assert not methods.get_method("GILP-NoRiskGate").risk_gate
    assert all(methods.get_method(m).risk_gate for m in ("GILP", "GILP-NoCorrGate", "GILP-tau0",
                                                      "GILP-tau1"))
    for name in ("GILP", "GILP-NoRiskGate", "GILP-tau0"):
        flags = methods.get_method(name)
        assert bool(gate.after_correction(flags, 0.69)) and bool(gate.after_correction(flags, 0.0))
        assert not bool(gate.after_correction(flags, 0.70))
    assert not bool(gate.after_correction(methods.get_method("GILP-NoCorrGate"), 0.0))
    with pytest.raises(ValueError, match="correction rule"):
        dataclasses.replace(methods.get_method("GILP"), correct="sometimes")
    with pytest.raises(ValueError, match="need a gate"):
        dataclasses.replace(methods.get_method("Hybrid-Full"), risk_gate=True)
    hash(methods.get_method("GILP"))  # frozen and hashable: usable as a static jit argument


def test_gate_decision_vmaps_and_sweeps_tau_low():
    cons = jnp.array([0.1, 0.3, 0.35, 0.8])
    issue, double = jax.vmap(lambda c: gate.gate_decision(methods.get_method("GILP"), c, 0,
                                                          tau_low=0.40))(cons)
    np.testing.assert_array_equal(np.asarray(issue), [True, True, True, False])
    np.testing.assert_array_equal(np.asarray(double), [False, False, False, False])
    config = gilp_config.GilpConfig()
    issue, double = gate.gate_decision(methods.get_method("GILP"), 0.25, 0, config.max_corrections,
                                       config.tau_low, config.tau_high)
    assert bool(issue) and not bool(double)


# --- one gate: the real-LLM loop against the traced gate ------------------------------------------

_N, _A = 6, 5


class _ScriptedDriver:
    """A `GilpDriver` whose replies are given in advance: (slot or None, atoms) per call."""

    def __init__(self, draft, reparse, revise, escalate):
        self.script = {"draft": draft, "reparse": reparse, "revise": revise,
                       "escalate": escalate}
        self.alerts = []

    def _reply(self, call):
        from bsjax.gilp.llm.driver import LLMReply
        action, atoms = self.script[call]
        return LLMReply(call, action, list(atoms), 0.5, 0, 0, 0.0, False, action is not None,
                        "ok" if action is not None else "no_action", False, "")

    def draft(self, ctx):
        return self._reply("draft")

    def reparse(self, ctx):
        return self._reply("reparse")

    def revise(self, ctx, correction):
        return self._reply("revise")

    def escalate(self, ctx, alert):
        self.alerts.append(alert)
        return self._reply("escalate")


class _Bench:
    name = "taskgraph"

    def explain(self, graph, act):
        return ""


def _reply(draw, slots):
    slot = draw(st.one_of(st.none(), st.sampled_from(slots)))
    nodes = draw(st.lists(st.integers(0, _N - 1), unique=True, max_size=_N))
    return slot, [(v, draw(st.integers(0, 4))) for v in nodes]


@st.composite
def _gate_cases(draw):
    method = draw(st.sampled_from(sorted(m for m in methods.METHOD_NAMES if methods.get_method(m).gated)))
    amask = np.array(draw(st.lists(st.booleans(), min_size=_A, max_size=_A)))
    amask[0] = True
    slots = [int(a) for a in np.flatnonzero(amask)]
    grid = st.sampled_from([0.0, 0.1, 0.3, 0.33, 0.5, 0.64, 0.65, 0.66, 0.9, 1.0])
    p1 = {"acts": np.array([[0, a, -1] for a in range(_A)]),
          "changed": np.array(draw(st.lists(st.lists(st.booleans(), min_size=_N, max_size=_N),
                                            min_size=_A, max_size=_A))),
          "risk": np.array(draw(st.lists(grid, min_size=_A, max_size=_A)), np.float32),
          "value": np.array(draw(st.lists(grid, min_size=_A, max_size=_A)), np.float32),
          "p_valid": np.array(draw(st.lists(grid, min_size=_A, max_size=_A)), np.float32),
          "amask": amask, "pred_status": np.zeros((_A, _N), np.int8)}
    script = {call: _reply(draw, slots) for call in ("draft", "reparse", "revise", "escalate")}
    return method, p1, script


@functools.partial(jax.jit, static_argnames=("k",))
def _traced_gate(flags, cons, used, cons_after, slot, values, risks, p_valid, amask, k):
    """The simulator's gate sequence, jitted once (the flags are traced, as in the simulator)."""
    phase3 = gate.consistency_gate(flags, cons, used)
    return phase3, gate.risk_gate(flags, phase3, cons_after, risks[slot], values, risks, p_valid,
                                  amask, slot, k=k)


@settings(max_examples=120, deadline=None)
@given(case=_gate_cases())
def test_the_real_loop_takes_the_simulators_gate_decisions(case):
    """`real_phases.decide` (the host loop, LLM calls scripted) and the gate as the simulator
    runs it (`consistency_gate` then `risk_gate`, jitted, on the same values) make the same
    decisions: correction, effective risk, escalation, empty low-risk subset, final slot."""
    from bsjax.gilp import methods
    from bsjax.gilp.llm.parse import change_mask
    from bsjax.gilp.real import phases as real_phases
    name, p1, script = case
    method = methods.get_method(name)
    driver = _ScriptedDriver(**script)
    graph = {"status": np.zeros(_N, np.int8), "nmask": np.ones(_N, bool)}
    out = real_phases.decide(method, driver, None, p1, graph, _Bench())

    flags = methods.method_flags(method)
    draft, used = script["draft"], 0
    if draft[0] is None:
        draft, used = script["reparse"], 1
    if draft[0] is None:
        assert out["cons"] is None and out["action"] is None and not driver.alerts
        return
    slot, atoms = draft

    cons = gate.jaccard(change_mask(_N, atoms), p1["changed"][slot])
    issue = bool(gate.consistency_gate(flags, cons, used).issue)
    revised = script["revise"] if script["revise"][0] is not None else draft
    kept_slot, kept_atoms = revised if issue else draft
    cons_after = gate.jaccard(change_mask(_N, kept_atoms), p1["changed"][kept_slot])
    phase3, phase4 = _traced_gate(flags, cons, used, cons_after, kept_slot, p1["value"],
                                  p1["risk"], p1["p_valid"], p1["amask"], k=method.skeleton_k)
    assert out["corrected"] == bool(phase3.issue)
    assert out["rho_eff"] == pytest.approx(float(phase4.rho_eff), abs=0)
    assert out["risk_fired"] == bool(phase4.fired) == bool(driver.alerts)
    assert out["risk_gate_empty"] == bool(phase4.high & ~jnp.any(phase4.subset))
    if phase4.fired:
        members = sorted(np.flatnonzero(np.asarray(phase4.subset)),
                         key=lambda a: (-float(p1["value"][a]), a))
        assert driver.alerts[0].slots == [int(a) for a in members]
        expected = script["escalate"][0] if script["escalate"][0] is not None else members[0]
    else:
        expected = kept_slot
    assert out["action"] == expected
