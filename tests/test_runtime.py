"""The reflective runtime: signals, presets, MRA's decide / observe, and the L4 host step.

References: docs/battleship/protocol.md §8.3 (three-bucket policy), §9.1 (per-turn protocol), §9.2 (confidence
and gate), §9.3 (preview values), §9.4 (presets and selection order), §9.5 (applying a revision),
§9.6 (MRA-LLM), §6.4 (candidate pools), §15 quirks 10-12 and 14. Expected values are computed by
hand or by small numpy references written from the spec, never from the package.
"""

from __future__ import annotations

import json
import threading

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support import FakeSampler, bits, neighbours, ref_clusters

from bsjax.battleship.agents.mra import MRAAgent, MRALLMAgent, mode_pools
from bsjax.battleship.config import PAPER
from bsjax.battleship.game import questions, rules
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.game.env import Env
from bsjax.battleship.harness.llm_host import RevisionHost
from bsjax.battleship.runtime import presets as presets_lib
from bsjax.battleship.runtime import signals
from bsjax.battleship.runtime.presets import PAPER_PRESETS, GateContext
from bsjax.battleship.runtime.record import default_policy, initial_record
from bsjax.battleship.types import ASK, SHOOT
from bsjax.core.llm.backends import LLMError
from bsjax.core.llm.structured import LLMClient

TOTAL = 14.0
CATALOG = questions.CATALOG
CELLS = questions.catalog_cells()                       # [83, 64] bool
FAMILY = np.array([t.family for t in CATALOG])
MATCH, MISMATCH = PAPER.answer_likelihood()            # tempered 0.82 / 0.18
TAU = 0.72
COARSE, LOCAL, LATE = 0, 1, 2
CO, LA, CL = 0, 1, 2                                    # preset indices, table order of §9.4

# §6.4: the first 10 candidates of each MRA mode, in catalog order, and the full mode pools.
FIRST10 = {COARSE: list(range(0, 10)),                 # rows A-H, columns 1-2
           LOCAL: list(range(20, 30)),                 # row-bands A-B..G-H, column-bands 1-2..3-4
           LATE: list(range(0, 10))}                   # rows A-H, columns 1-2
FULL = {COARSE: list(range(0, 20)),                    # rows, columns, quadrants
        LOCAL: list(range(20, 83)),                    # row-bands, column-bands, blocks
        LATE: list(range(0, 20)) + list(range(34, 83))}  # rows, columns, quadrants, blocks


# ----------------------------------------------------------------------------- records


BASE_RECORD = initial_record(3)


def pol(coarse=6, local=2, late=4, salvage=16, threshold=0.55):
    return default_policy(coarse, local, late, salvage, threshold)


def rec(policy=None, **fields):
    """`initial_record(3).replace(...)` with every value cast to the field's own dtype/shape
    (so that jitted subjects trace once)."""
    cast = {}
    for name, value in fields.items():
        ref = getattr(BASE_RECORD, name)
        cast[name] = jnp.asarray(value, dtype=ref.dtype)
        assert cast[name].shape == ref.shape, name
    record = BASE_RECORD.replace(**cast)
    return record.replace(policy=policy) if policy is not None else record


def policy_tuple(policy):
    return (tuple(int(x) for x in np.asarray(policy.budgets)), int(policy.salvage_start_turn),
            float(policy.exploit_threshold), int(policy.mode))


def assert_policy(policy, budgets, salvage, threshold, mode):
    got = policy_tuple(policy)
    assert got[0] == tuple(budgets) and got[1] == salvage and got[3] == mode, got
    assert got[2] == pytest.approx(threshold, abs=1e-6), got


# ----------------------------------------------------------------------------- 1. signals


confidence_j = jax.jit(signals.model_confidence)
need_j = jax.jit(signals.need_revision, static_argnames=("tau",))
should_j = jax.jit(signals.should_revise, static_argnames=("tau", "enabled"))


@pytest.mark.parametrize("pred, cal", [(0.0, 0.0), (0.5, 0.0), (0.2, 0.1), (0.6, 0.3),
                                       (1.0, 1.0), (1.5, 0.9), (2.0, 2.0)])
def test_model_confidence(pred, cal):
    """§9.2: modelConfidence = max(0, 1 - (predErrEMA + calErrEMA) / 2)."""
    got = float(confidence_j(rec(pred_error_ema=pred, calibration_error_ema=cal)))
    assert got == pytest.approx(max(0.0, 1.0 - (pred + cal) / 2.0), abs=1e-6)


@pytest.mark.parametrize("tau, expected", [(0.75, False), (0.76, True), (0.74, False),
                                           (1.0, True), (0.0, False)])
def test_need_revision_is_strictly_below_tau(tau, expected):
    """needRevision = confidence < τ; confidence exactly 0.75 here."""
    record = rec(pred_error_ema=0.5, calibration_error_ema=0.0)
    assert float(confidence_j(record)) == 0.75
    assert bool(need_j(record, tau=tau)) is expected


def test_need_revision_never_at_tau_zero():
    """τ = 0 never opens the gate, even at confidence 0 (B5 behaves like B3)."""
    record = rec(pred_error_ema=3.0, calibration_error_ema=3.0)
    assert float(confidence_j(record)) == 0.0
    assert not bool(need_j(record, tau=0.0))


OPEN_GATE = dict(pred_error_ema=0.5, calibration_error_ema=0.5, cooldown=0,
                 low_confidence_streak=2, next_kind=CL, next_delta=0.02)


@pytest.mark.parametrize("change, tau, enabled, expected", [
    ({}, TAU, True, True),
    ({}, TAU, False, False),                                             # revision disabled
    ({}, 0.5, True, False),                                              # confidence 0.5 == τ
    ({}, 0.4, True, False),                                              # no need
    ({"cooldown": 1}, TAU, True, False),                                 # cooldown > 0
    ({"low_confidence_streak": 1}, TAU, True, False),                    # streak < 2
    ({"low_confidence_streak": 7}, TAU, True, True),
    ({"next_delta": 0.01}, TAU, True, False),                            # Δ not > δ_min
    ({"next_delta": 0.0101}, TAU, True, True),
    ({"next_kind": -1}, TAU, True, False),                               # no kind
    ({"next_kind": -1, "next_delta": 0.5}, TAU, True, False),
    # The coarse collapse's positive-preview exception: a loose candidate with Δ <= δ_min.
    ({"next_kind": CO, "next_delta": -0.005, "coarse_candidate": True}, TAU, True, True),
    ({"next_kind": CO, "next_delta": -0.005, "coarse_candidate": False}, TAU, True, False),
    ({"next_kind": LA, "next_delta": 0.0, "coarse_candidate": True}, TAU, True, False),
    ({"next_kind": CO, "next_delta": 0.02}, TAU, True, True),
])
def test_should_revise_needs_every_condition(change, tau, enabled, expected):
    """§9.2 gate: enabled ∧ need ∧ cooldown == 0 ∧ streak ≥ 2 ∧ positive preview ∧ a kind."""
    record = rec(**{**OPEN_GATE, **change})
    assert bool(should_j(record, tau=tau, enabled=enabled)) is expected


# ----------------------------------------------------------------------------- 2. presets


def test_paper_preset_table():
    """§9.4: the three kinds in reference order, the policyMode each writes."""
    assert [(p.kind, p.mode, p.mode_index, p.loose) for p in PAPER_PRESETS] == [
        ("coarse_roi_collapse", "coarse-reduced", 1, True),
        ("late_diffuse_reprobe", "late-reprobe", 2, False),
        ("cluster_closeout_bias", "closeout", 3, False)]
    assert presets_lib.MIN_DELTA == 0.01 and presets_lib.COOLDOWN == 3


@jax.jit
def eligible_j(record, turn, hits):
    context = GateContext(turn=turn, hits=hits)
    return jnp.stack([p.eligible(record, context) for p in PAPER_PRESETS])


@jax.jit
def candidates_j(record, turn, hits):
    return presets_lib.candidates(PAPER_PRESETS, record, GateContext(turn=turn, hits=hits))


@jax.jit
def select_j(record, turn, hits):
    return presets_lib.select(PAPER_PRESETS, record, GateContext(turn=turn, hits=hits))


apply_j = jax.jit(lambda policy, kind: presets_lib.apply(PAPER_PRESETS, policy, kind))


def eligible(record, turn, hits):
    return [bool(x) for x in eligible_j(record, jnp.int32(turn), jnp.int32(hits))]


# Coarse collapse: turn ≤ 10, hits = 0, coarse used ≥ 2, coarse budget > 2.
@pytest.mark.parametrize("turn, hits, used, budget, expected", [
    (10, 0, 2, 3, True), (0, 0, 5, 6, True),
    (11, 0, 2, 3, False), (10, 1, 2, 3, False), (10, 0, 1, 3, False), (10, 0, 2, 2, False)])
def test_coarse_collapse_eligibility(turn, hits, used, budget, expected):
    record = rec(policy=pol(coarse=budget), used=[used, 0, 0])
    assert eligible(record, turn, hits)[CO] is expected


# Late re-probe: turn ≥ salvageStartTurn, frontier 0, largest cluster > 0, late budget < 6.
@pytest.mark.parametrize("turn, salvage, frontier, cluster, late, expected", [
    (16, 16, 0, 1, 5, True), (30, 16, 0, 9, 0, True), (12, 12, 0, 1, 4, True),
    (15, 16, 0, 1, 5, False), (11, 12, 0, 1, 4, False), (16, 16, 1, 1, 5, False),
    (16, 16, 0, 0, 5, False), (16, 16, 0, 1, 6, False)])
def test_late_reprobe_eligibility(turn, salvage, frontier, cluster, late, expected):
    record = rec(policy=pol(late=late, salvage=salvage), frontier_count=frontier,
                 largest_cluster=cluster)
    assert eligible(record, turn, hits=3)[LA] is expected


# Closeout: largest cluster ≥ 2, exploit threshold > 0.4.
@pytest.mark.parametrize("cluster, threshold, expected", [
    (2, 0.41, True), (9, 0.55, True), (1, 0.55, False), (2, 0.4, False), (2, 0.3, False)])
def test_closeout_eligibility(cluster, threshold, expected):
    record = rec(policy=pol(threshold=threshold), largest_cluster=cluster)
    assert eligible(record, turn=5, hits=2)[CL] is expected


def all_eligible(deltas, **overrides):
    """A record on which all three presets are eligible (turn 10, hits 0 in the context)."""
    fields = dict(policy=pol(coarse=3, local=2, late=4, salvage=10, threshold=0.55),
                  used=[2, 0, 0], frontier_count=0, largest_cluster=2, preview_delta=deltas)
    fields.update(overrides)
    record = rec(**fields)
    if not overrides:
        assert eligible(record, 10, 0) == [True, True, True]
    return record


@pytest.mark.parametrize("deltas, expected", [
    ([-0.01, 0.0101, 0.0101], [True, True, True]),
    ([-0.0101, 0.01, 0.01], [False, False, False]),
    ([0.0, 0.011, 0.02], [True, True, True]),
    ([-0.5, -0.5, -0.5], [False, False, False]),
])
def test_candidate_rule(deltas, expected):
    """§9.4: coarse collapse is a candidate iff Δ ≥ -δ_min (loose); the others iff Δ > δ_min."""
    record = all_eligible(deltas)
    got = [bool(x) for x in candidates_j(record, jnp.int32(10), jnp.int32(0))]
    assert got == expected


def test_candidate_requires_eligibility():
    record = all_eligible([0.5, 0.5, 0.5])
    got = [bool(x) for x in candidates_j(record, jnp.int32(11), jnp.int32(1))]  # coarse ineligible
    assert got == [False, True, True]


@pytest.mark.parametrize("deltas, expected", [
    ([0.02, 0.02, 0.02], CO),          # ties go to the coarse collapse
    ([0.05, 0.02, 0.03], CO),
    ([0.03, 0.02, 0.0], CO),
    ([0.02, 0.03, 0.0], LA),           # coarse loses to late; closeout not a candidate
    ([0.025, 0.03, 0.02], LA),
    ([0.02, 0.0, 0.03], CL),           # coarse loses to closeout; late not a candidate
    ([0.025, 0.02, 0.03], CL),         # coarse loses; late < closeout
    ([0.0, 0.02, 0.02], LA),           # late wins iff Δ_late >= Δ_closeout
    ([0.0, 0.0201, 0.02], LA),
    ([0.0, 0.02, 0.0201], CL),
    ([0.0, 0.0, 0.02], CL),
    ([-0.005, 0.0, 0.0], CO),          # the loose coarse candidate alone
    ([-0.02, 0.0, 0.01], -1),          # no candidate
    ([-0.02, 0.5, 0.5], None),         # see below: late and closeout made ineligible
])
def test_selection_order(deltas, expected):
    """§9.4: coarse iff its Δ ≥ every other candidate's; else late iff Δ_late ≥ Δ_closeout (when
    closeout is a candidate); else closeout; else none (-1, Δ 0)."""
    if expected is None:
        record = all_eligible(deltas, frontier_count=1, largest_cluster=1)
        expected = -1
    else:
        record = all_eligible(deltas)
    kind, delta, flags = select_j(record, jnp.int32(10), jnp.int32(0))
    assert int(kind) == expected
    assert float(delta) == pytest.approx(deltas[expected] if expected >= 0 else 0.0, abs=1e-7)
    assert bool(flags[CO]) == (deltas[CO] >= -0.01)


def test_selection_ignores_better_non_candidates():
    """Only candidates compete: a large Δ of an ineligible preset does not block the coarse one."""
    record = all_eligible([0.0, 0.5, 0.5], frontier_count=1, largest_cluster=1)   # late, closeout
    kind, delta, flags = select_j(record, jnp.int32(10), jnp.int32(0))            # ineligible
    assert int(kind) == CO and float(delta) == 0.0
    assert [bool(f) for f in flags] == [True, False, False]
    # And with hits the coarse collapse is ineligible: closeout with its own Δ.
    record = all_eligible([0.9, 0.0, 0.02])
    kind, delta, _ = select_j(record, jnp.int32(10), jnp.int32(2))
    assert int(kind) == CL and float(delta) == pytest.approx(0.02)


@pytest.mark.parametrize("policy, kind, expected", [
    # defaults (6, 2, 4), s = 16, t = 0.55
    (pol(), CO, ((5, 3, 4), 16, 0.55, 1)),
    (pol(), LA, ((6, 1, 5), 15, 0.55, 2)),
    (pol(), CL, ((6, 2, 4), 15, 0.50, 3)),
    (pol(), -1, ((6, 2, 4), 16, 0.55, 0)),
    # floors: local max(0, l - 1), salvage max(12, s - 1), threshold max(0.4, t - 0.05)
    (pol(local=0, salvage=12, threshold=0.4), LA, ((6, 0, 5), 12, 0.4, 2)),
    (pol(local=0, salvage=12, threshold=0.4), CL, ((6, 0, 4), 12, 0.4, 3)),
    (pol(local=1, salvage=13, threshold=0.42), LA, ((6, 0, 5), 12, 0.42, 2)),
    (pol(local=1, salvage=13, threshold=0.42), CL, ((6, 1, 4), 12, 0.4, 3)),
    (pol(local=1, salvage=5, threshold=0.3), CL, ((6, 1, 4), 12, 0.4, 3)),
    (pol(coarse=3, local=0, late=0, salvage=30), CO, ((2, 1, 0), 30, 0.55, 1)),
    (pol(coarse=3, local=0, late=5, salvage=30), LA, ((3, 0, 6), 29, 0.55, 2)),
])
def test_preset_patches(policy, kind, expected):
    """§9.4 patches, with the floors."""
    assert_policy(apply_j(policy, jnp.int32(kind)), *expected)


# ----------------------------------------------------------------------------- fixtures (boards)


def span(length, row, col, horizontal):
    return spans_lib.span_index(8, 8, (2, 3, 4, 5), length, row, col, horizontal)


def occupancy(boards):
    return spans_lib.table_for(PAPER).cells[np.asarray(boards)].any(axis=-2)


# Case "column 3": columns 7 and 8 hold the same ship cells on both boards (5: column 8 rows A-E,
# 3: column 8 rows F-H, 4: column 7 rows A-D) and are given as misses (the fake belief does not
# care), so the
# unknown part holds only the 2-ship: column 3 rows A-B (board X) or column 5 rows A-B (board Y).
# Every row (it contains a column-8 cell) answers yes on both boards, columns 1-2 answer no on both;
# only column 3, column 5 and the top-left quadrant split them.
SHARED = [span(5, 0, 7, False), span(4, 0, 6, False), span(3, 5, 7, False)]
COL3_X = SHARED + [span(2, 0, 2, False)]
COL3_Y = SHARED + [span(2, 0, 4, False)]
COL3_MISSES = sorted(int(c) for c in np.flatnonzero(occupancy([SHARED])[0]))

# Late fixture (as in test_planning): 5, 4, 3 hit and fenced by misses (no frontier); the 2 is on
# G7-G8 or H7-H8. Only the blocks F6-G7 and F7-G8 split the two boards.
COMMON = [span(5, 0, 6, False), span(4, 1, 7, False), span(3, 5, 2, False)]
LATE_A = COMMON + [span(2, 6, 6, True)]
LATE_B = COMMON + [span(2, 7, 6, True)]
LATE_HITS = sorted(int(c) for c in np.flatnonzero(occupancy([COMMON])[0]))
LATE_MISSES = sorted({nb for c in LATE_HITS for nb in neighbours(c)} - set(LATE_HITS))


def test_fixtures_are_what_they_claim():
    occ = occupancy([COL3_X, COL3_Y])
    answers = (CELLS[:, None, :] & occ[None]).any(-1)
    differ = {CATALOG[i].qid for i in np.flatnonzero(answers[:, 0] != answers[:, 1])
              if FAMILY[i] in ("row", "column", "quadrant")}
    assert differ == {"column:3", "column:5", "quadrant:top-left"}
    assert len(COL3_MISSES) == 12 and not set(COL3_MISSES) & {2, 10, 4, 12}
    occ = occupancy([LATE_A, LATE_B])
    answers = (CELLS[:, None, :] & occ[None]).any(-1)
    assert {CATALOG[i].qid for i in np.flatnonzero(answers[:, 0] != answers[:, 1])} == {
        "block-2x2:F6-G7", "block-2x2:F7-G8"}
    assert len(LATE_HITS) == 12
    assert all(nb in set(LATE_HITS) | set(LATE_MISSES) for c in LATE_HITS for nb in neighbours(c))



# ----------------------------------------------------------------------------- numpy references


def ref_state(boards, weights, hits, misses):
    """Everything §7.3-7.4 and §8.3 read, for a hand-built state: p, unknown cells, pYes, the
    coarse and salvage scores of the 83 templates, frontier count and largest cluster."""
    occ = occupancy(boards)
    w = np.asarray(weights, np.float64)
    w = w / w.sum()
    p = w @ occ.astype(np.float64)
    unknown = np.ones(64, bool)
    unknown[list(hits) + list(misses)] = False
    hit = np.zeros(64, bool)
    hit[list(hits)] = True
    h = len(hits)
    p_yes, raw = np.zeros(83), np.zeros(83)
    for k, region in enumerate(CELLS):
        truth = (occ & region).any(axis=1)
        p_yes[k] = w[truth].sum()
        values = []
        for answer in (True, False):
            wl = w * np.where(truth == answer, MATCH, MISMATCH)
            marg = wl @ occ.astype(np.float64) / wl.sum()
            values.append((h + (marg[unknown].max() if unknown.any() else 0.0)) / TOTAL)
        raw[k] = p_yes[k] * values[0] + (1 - p_yes[k]) * values[1]
    split = 1 - np.abs(2 * p_yes - 1)
    mass_cells = np.where(unknown, p, 0.0)
    binned = np.zeros((7, 7))
    for cell in range(64):
        r, c = divmod(cell, 8)
        binned[min(r, 6), min(c, 6)] += mass_cells[cell]
    mass, relevance = np.zeros(83), np.zeros(83)
    clusters = ref_clusters(hit)
    for t in CATALOG:
        if t.family == "block-2x2":
            r, c = divmod(min(t.cells), 8)
            m = binned[r, c] / 4.0
        else:
            m = sum(mass_cells[c] for c in t.cells) / (8.0 if t.family in ("row", "column") else 16.0)
        mass[t.index] = min(max(m, 0.0), 1.0)
        rows_r, cols_r = {c // 8 for c in t.cells}, {c % 8 for c in t.cells}
        for comp in clusters:
            rows_k, cols_k = {c // 8 for c in comp}, {c % 8 for c in comp}
            overlap = (max(len(rows_r & rows_k), len(cols_r & cols_k))
                       / max(len(rows_k), len(cols_k), 1))
            relevance[t.index] = max(relevance[t.index], overlap)
    frontier = {nb for c in hits for nb in neighbours(c) if unknown[nb]}
    return dict(
        p=p, unknown=unknown, h=h, p_yes=p_yes,
        scores={COARSE: raw + 0.015 * split + 0.005 * mass,
                LOCAL: raw + 0.03 * split + 0.035 * mass + 0.025 * relevance,
                LATE: raw + 0.03 * split + 0.035 * mass + 0.025 * relevance},
        frontier=len(frontier), largest=max((len(c) for c in clusters), default=0),
        p_best=p[unknown].max(), best_cell=int(np.flatnonzero(unknown & (p == p[unknown].max()))[0]),
        v_shot=(h + p[unknown].max()) / TOTAL)


def ref_mode(ref, turn, salvage):
    """§8.3 questionFamilyMode."""
    if ref["largest"] == 0:
        return COARSE
    if turn >= salvage and ref["frontier"] == 0:
        return LATE
    return LOCAL


def ref_policy_value(ref, turn, used, policy, pools=FIRST10, asked=(), questions_left=15):
    """§9.3 V(policy) and the §8.3 decision: (V, ask, question or None, bq, mode).

    `policy` = (budgets, salvage, threshold)."""
    budgets, salvage, threshold = policy
    mode = ref_mode(ref, turn, salvage)
    scores = ref["scores"][mode]
    bq, question = 0.0, None
    for i in pools[mode]:                       # scan from 0, strictly larger only
        if i not in asked and scores[i] > bq:
            bq, question = scores[i], i
    is_open = used[mode] < budgets[mode] and questions_left > 0
    ask = (is_open and question is not None and bq > ref["v_shot"]
           and not ref["p_best"] >= threshold)
    return (bq if ask else ref["v_shot"]), ask, question, bq, mode


def f32(x):
    return float(np.float32(x))


def ref_patch(kind, policy):
    """§9.4 patches by hand, in float32 for the threshold as the record stores it."""
    (c, local, late), s, t = policy
    if kind == CO:
        return (c - 1, local + 1, late), s, t
    if kind == LA:
        return (c, max(0, local - 1), late + 1), max(12, s - 1), t
    return (c, local, late), max(12, s - 1), float(max(np.float32(0.4), np.float32(t) - np.float32(0.05)))


# ----------------------------------------------------------------------------- 4. MRA decide



SAMPLER = FakeSampler()
KEY = jax.random.key(0)
MRA = MRAAgent(PAPER)
MRA_IMPROVED = MRAAgent(PAPER, variant="improved")
MRA_LLM = MRALLMAgent(PAPER)
BASE_STATE = Env(PAPER).init(jnp.asarray(COL3_X, jnp.int32), jnp.int32(0))


def _decider(agent):
    params = agent.default_params()
    return jax.jit(lambda view, belief, record: agent.decide(KEY, params, view, SAMPLER, belief,
                                                             record))


DECIDE = {"paper": _decider(MRA), "improved": _decider(MRA_IMPROVED)}


def make_belief(boards, weights=(1, 1), p=None):
    spans = np.asarray(boards, np.int32)
    w = np.asarray(weights, np.float32)
    w = w / w.sum()
    if p is None:
        p = w @ occupancy(spans).astype(np.float32)
    return (jnp.asarray(p, jnp.float32), jnp.asarray(spans), jnp.asarray(w))


def make_view(hits=(), misses=(), turn=0, questions_left=15):
    view = Env(PAPER).observe(BASE_STATE)
    obs = view.obs.replace(hit_bits=jnp.asarray(bits(PAPER, hits)),
                           miss_bits=jnp.asarray(bits(PAPER, misses)))
    return view._replace(obs=obs, turn=jnp.int32(turn), questions_left=jnp.int32(questions_left),
                         legal_shots=rules.unknown_cells(PAPER, obs),
                         can_ask=jnp.bool_(questions_left > 0))


# name: (boards, hits, misses)
SCENES = {
    "col3": ([COL3_X, COL3_Y], [], COL3_MISSES),
    "late": ([LATE_A, LATE_B], LATE_HITS, LATE_MISSES),
    "hit27": ([COL3_X, COL3_Y], [27], COL3_MISSES),    # one hit (D4) with four unknown neighbours
}


def scene(name, turn, record=None, variant="paper", questions_left=15):
    boards, hits, misses = SCENES[name]
    record = record if record is not None else rec()
    action, p_best, new = DECIDE[variant](make_view(hits, misses, turn, questions_left),
                                          make_belief(boards), record)
    return action, float(p_best), new, ref_state(boards, (1, 1), hits, misses)


@pytest.mark.parametrize("name, turn, salvage, expected", [
    ("col3", 3, 16, COARSE), ("col3", 30, 16, COARSE),          # no hits: coarse
    ("hit27", 20, 16, LOCAL), ("hit27", 2, 16, LOCAL),          # hits, frontier > 0: local
    ("late", 15, 16, LOCAL), ("late", 16, 16, LATE),            # no frontier: late iff turn >= s
    ("late", 11, 12, LOCAL), ("late", 12, 12, LATE),            # ... with the policy's own s
])
def test_question_mode(name, turn, salvage, expected):
    """§8.3 questionFamilyMode, and the decision-time summary the gate later reads."""
    _, _, new, ref = scene(name, turn, rec(policy=pol(salvage=salvage)))
    assert ref_mode(ref, turn, salvage) == expected
    assert int(new.question_mode) == expected
    assert int(new.frontier_count) == ref["frontier"]
    assert int(new.largest_cluster) == ref["largest"]
    assert float(new.best_hit_prob) == pytest.approx(ref["p_best"], abs=1e-6)


@pytest.mark.parametrize("variant", ["paper", "improved"])
@pytest.mark.parametrize("name, turn, used", [
    ("col3", 3, [0, 0, 0]), ("col3", 3, [5, 0, 0]), ("col3", 3, [6, 0, 0]),
    ("hit27", 20, [0, 0, 0]), ("hit27", 20, [0, 2, 0]),
    ("late", 15, [0, 0, 0]), ("late", 16, [0, 0, 0]), ("late", 16, [0, 0, 4]),
])
def test_decision_matches_reference(variant, name, turn, used):
    """§8.3: ask the best candidate of the mode's pool iff the budget is open, bq > V_shot(best)
    and p(best) < threshold; otherwise shoot the global argmax. The counter of the mode in force
    increments on an ask; the prediction fields follow §9.1."""
    pools = FIRST10 if variant == "paper" else FULL
    action, p_best, new, ref = scene(name, turn, rec(used=used), variant)
    value, ask, question, bq, mode = ref_policy_value(
        ref, turn, used, ((6, 2, 4), 16, f32(0.55)), pools=pools)
    assert int(new.question_mode) == mode
    assert p_best == pytest.approx(ref["p_best"], abs=1e-6)
    expected_used = list(used)
    if ask:
        q = int(action.question_id)
        assert int(action.kind) == ASK and q in pools[mode]
        assert ref["scores"][mode][q] == pytest.approx(bq, abs=1e-6)
        np.testing.assert_array_equal(np.asarray(action.question_bits), questions.catalog_bits()[q])
        expected_used[mode] += 1
        assert int(new.pred_kind) == 1
        assert float(new.pred_answer_prob) == pytest.approx(ref["p_yes"][q], abs=1e-6)
        assert float(new.pred_gain) == pytest.approx(max(0.0, bq - ref["h"] / TOTAL), abs=1e-6)
    else:
        assert int(action.kind) == SHOOT and int(action.cell) == ref["best_cell"]
        assert int(new.pred_kind) == 0 and float(new.pred_answer_prob) == 0.0
        assert float(new.pred_gain) == pytest.approx(ref["p_best"] / TOTAL, abs=1e-6)
    assert float(new.pred_hit_prob) == pytest.approx(ref["p_best"], abs=1e-6)
    assert float(new.pred_baseline) == pytest.approx(ref["h"] / TOTAL, abs=1e-6)
    assert [int(x) for x in new.used] == expected_used


def test_decision_cases_are_not_vacuous():
    """The reference decision of the cases above: both branches and all three modes occur."""
    outcomes = set()
    for name, turn in (("col3", 3), ("hit27", 20), ("late", 15), ("late", 16)):
        boards, hits, misses = SCENES[name]
        ref = ref_state(boards, (1, 1), hits, misses)
        _, ask, _, _, mode = ref_policy_value(ref, turn, [0, 0, 0], ((6, 2, 4), 16, f32(0.55)))
        outcomes.add((mode, ask))
    assert {(COARSE, True), (LOCAL, True), (LATE, True)} <= outcomes


def test_paper_scores_only_first_ten_candidates():
    """§6.4 / quirk 11: in coarse mode the paper scores rows A-H and columns 1-2 only. Column 3
    (and its twin column 5) would be best; paper asks row A (pYes 1, an answer known in advance:
    quirk 10), the improved variant asks column 3."""
    _, _, _, ref = scene("col3", 3)
    coarse = ref["scores"][COARSE]
    full_best = max(FULL[COARSE], key=lambda i: (coarse[i], -i))
    first_best = max(FIRST10[COARSE], key=lambda i: (coarse[i], -i))
    assert CATALOG[full_best].qid == "column:3" and CATALOG[first_best].qid == "row:A"
    assert coarse[10] == coarse[12] > coarse[16] > coarse[0] > ref["v_shot"]
    assert ref["p_yes"][0] == 1.0 and ref["p_yes"][10] == 0.5

    action, _, new, _ = scene("col3", 3)
    assert int(action.kind) == ASK and int(action.question_id) == 0
    assert float(new.best_question_value) == pytest.approx(coarse[0], abs=1e-6)
    assert float(new.pred_answer_prob) == pytest.approx(1.0)
    action, _, new, _ = scene("col3", 3, variant="improved")
    assert int(action.kind) == ASK and int(action.question_id) == 10
    assert float(new.best_question_value) == pytest.approx(coarse[10], abs=1e-6)
    assert float(new.pred_answer_prob) == pytest.approx(0.5)


def test_late_mode_paper_never_sees_blocks():
    """Late mode: only blocks F6-G7 / F7-G8 split the boards; the improved variant asks F6-G7,
    paper's first-10 list (rows, columns 1-2) cannot."""
    action, _, _, _ = scene("late", 16, variant="improved")
    assert int(action.kind) == ASK and CATALOG[int(action.question_id)].qid == "block-2x2:F6-G7"
    action, _, _, _ = scene("late", 16)
    assert int(action.question_id) in FIRST10[LATE] or int(action.kind) == SHOOT


def test_paper_repeats_questions_improved_does_not():
    """Quirk 12: MRA (paper) never records asked questions, so it asks row A again; the improved
    variant records them and moves on to the twin column 5."""
    _, _, first, _ = scene("col3", 3)
    action, _, second, _ = scene("col3", 4, first)
    assert int(action.kind) == ASK and int(action.question_id) == 0
    assert [int(x) for x in second.used] == [2, 0, 0]

    _, _, first, _ = scene("col3", 3, variant="improved")
    action, _, second, _ = scene("col3", 4, first, variant="improved")
    assert int(action.kind) == ASK and CATALOG[int(action.question_id)].qid == "column:5"
    assert set(np.flatnonzero(np.asarray(second.asked))) == {10, 12}
    assert [int(x) for x in second.used] == [2, 0, 0]


@pytest.mark.parametrize("threshold, expected", [(0.55, ASK), (0.5001, ASK), (0.5, SHOOT),
                                                 (0.3, SHOOT)])
def test_exploit_threshold_suppresses_questions(threshold, expected):
    """preferQuestion needs ¬(p(best) ≥ exploitThreshold); p(best) = 0.5 exactly here."""
    action, p_best, new, _ = scene("col3", 3, rec(policy=pol(threshold=threshold)))
    assert p_best == 0.5
    assert int(action.kind) == expected
    if expected == SHOOT:
        assert int(action.cell) == 2                  # A3: lowest-index cell of p 0.5
        assert [int(x) for x in new.used] == [0, 0, 0]


def test_no_question_left_or_budget_spent_shoots():
    for record, questions_left in ((rec(used=[6, 0, 0]), 15), (rec(), 0)):
        action, _, new, _ = scene("col3", 3, record, questions_left=questions_left)
        assert int(action.kind) == SHOOT and int(action.cell) == 2
        assert [int(x) for x in new.used] == [int(x) for x in record.used]


def test_candidate_needs_positive_adj():
    """The scan starts from a best of 0: with no mass on any unknown cell every adj is exactly 0,
    so there is no best question (bestQuestionValue 0) and MRA shoots; every preview Δ is 0."""
    boards, misses = [COL3_X, COL3_X], sorted(int(c) for c in np.flatnonzero(occupancy([COL3_X])[0]))
    ref = ref_state(boards, (1, 1), [], misses)
    assert np.all(ref["scores"][COARSE] == 0.0) and ref["v_shot"] == 0.0
    action, p_best, new = DECIDE["paper"](make_view([], misses, 3), make_belief(boards), rec())
    assert int(action.kind) == SHOOT and int(action.cell) == 0 and float(p_best) == 0.0
    assert float(new.best_question_value) == 0.0
    np.testing.assert_array_equal(np.asarray(new.preview_delta), 0.0)


@pytest.mark.parametrize("name, turn, used, policy", [
    ("late", 15, [0, 2, 0], ((6, 2, 4), 16, 0.55)),   # local closed; late/closeout reach late mode
    ("col3", 5, [5, 0, 0], ((6, 2, 4), 16, 0.55)),    # coarse open; the collapse closes it
    ("late", 16, [0, 0, 4], ((6, 2, 4), 16, 0.55)),   # late closed; the re-probe reopens it
    ("hit27", 20, [0, 1, 0], ((6, 2, 4), 16, 0.52)),  # closeout drops the threshold below p
    ("late", 13, [0, 1, 4], ((6, 1, 4), 14, 0.6)),    # local closed; closeout reaches late, closed
])
def test_preview_deltas_by_hand(name, turn, used, policy):
    """§9.3: Δ_k = V(preset_k applied to the current policy) - V(current policy), with the mode
    recomputed under the patched salvage turn and the used counts against the patched budgets."""
    budgets, salvage, threshold = policy
    current = pol(*budgets, salvage=salvage, threshold=threshold)
    _, _, new, ref = scene(name, turn, rec(policy=current, used=used))
    policy = (budgets, salvage, f32(threshold))
    v_now = ref_policy_value(ref, turn, used, policy)[0]
    expected = [ref_policy_value(ref, turn, used, ref_patch(k, policy))[0] - v_now
                for k in (CO, LA, CL)]
    np.testing.assert_allclose(np.asarray(new.preview_delta), expected, atol=2e-6)


def test_preview_cases_are_not_vacuous():
    """Hand check of the first two preview cases: the re-probe gains, the closeout does not."""
    boards, hits, misses = SCENES["late"]
    ref = ref_state(boards, (1, 1), hits, misses)
    policy = ((6, 2, 4), 16, f32(0.55))
    v_now, ask, *_ = ref_policy_value(ref, 15, [0, 2, 0], policy)
    assert not ask and v_now == ref["v_shot"]                  # local budget closed
    late_v, late_ask, *_ = ref_policy_value(ref, 15, [0, 2, 0], ref_patch(LA, policy))
    close_v, close_ask, *_ = ref_policy_value(ref, 15, [0, 2, 0], ref_patch(CL, policy))
    assert late_ask and late_v - v_now > 0.01                  # late mode at s = 15, open
    assert not close_ask and close_v == v_now                  # p(best) 0.5 >= 0.5
    boards, hits, misses = SCENES["col3"]
    ref = ref_state(boards, (1, 1), hits, misses)
    v_now, ask, *_ = ref_policy_value(ref, 5, [5, 0, 0], policy)
    coarse_v, coarse_ask, *_ = ref_policy_value(ref, 5, [5, 0, 0], ref_patch(CO, policy))
    assert ask and not coarse_ask and coarse_v < v_now


# ----------------------------------------------------------------------------- 3. MRA observe


def _observer(agent, **params):
    params = agent.default_params().replace(**params)
    return jax.jit(lambda view, belief, record, outcome, over:
                   agent.observe(params, view, SAMPLER, belief, record, outcome, over))


OBSERVE = {"paper": _observer(MRA), "off": _observer(MRA, revision=jnp.bool_(False)),
           "improved": _observer(MRA_IMPROVED), "llm": _observer(MRA_LLM)}
NO_PREVIEW = [-1.0, -1.0, -1.0]


def upd(record, **fields):
    """`record.replace` with each value cast to the field's dtype."""
    return record.replace(**{k: jnp.asarray(v, getattr(record, k).dtype)
                             for k, v in fields.items()})


def observe(agent, record, outcome, hits=(3,), misses=(), turn=5, p=None, over=False):
    if p is None:
        p = np.full(64, 0.1, np.float32)
    belief = make_belief([COL3_X, COL3_Y], p=p)
    return OBSERVE[agent](make_view(hits, misses, turn), belief, record, jnp.bool_(outcome),
                          jnp.bool_(over))


def test_observe_shot_errors_and_ema():
    """§9.1: predErr = |signal - p|, calErr = |realized - predicted gain| = predErr / 14 for a shot;
    the first observation sets the EMA, then EMA <- (3 EMA + x) / 4."""
    record = rec(pred_kind=0, pred_hit_prob=0.3, pred_gain=0.3 / 14, preview_delta=NO_PREVIEW)
    out = observe("paper", record, True)
    assert int(out.n_observations) == 1
    assert float(out.pred_error_ema) == pytest.approx(0.7, abs=1e-6)
    assert float(out.calibration_error_ema) == pytest.approx(0.7 / 14, abs=1e-6)

    out2 = observe("paper", upd(out, pred_hit_prob=0.6, pred_gain=0.6 / 14), False)
    assert int(out2.n_observations) == 2
    assert float(out2.pred_error_ema) == pytest.approx((3 * 0.7 + 0.6) / 4, abs=1e-6)
    assert float(out2.calibration_error_ema) == pytest.approx((3 * 0.05 + 0.6 / 14) / 4, abs=1e-6)

    out3 = observe("paper", upd(out2, pred_hit_prob=0.9, pred_gain=0.9 / 14), True)
    assert float(out3.pred_error_ema) == pytest.approx((3 * 0.675 + 0.1) / 4, abs=1e-6)


@pytest.mark.parametrize("p_hit, outcome", [(0.3, True), (0.3, False), (0.85, True), (0.0, False)])
def test_observe_shot_calibration_is_pred_error_over_14(p_hit, outcome):
    record = rec(pred_kind=0, pred_hit_prob=p_hit, pred_gain=p_hit / 14, preview_delta=NO_PREVIEW)
    out = observe("paper", record, outcome)
    pred = abs(float(outcome) - p_hit)
    assert float(out.pred_error_ema) == pytest.approx(pred, abs=1e-6)
    assert float(out.calibration_error_ema) == pytest.approx(pred / 14, abs=1e-6)


# p after the answer: the hit (A1) and the miss (A2) are excluded, the best unknown is C5 at 0.65.
P_AFTER = np.full(64, 0.1, np.float32)
P_AFTER[[0, 1, 20]] = [1.0, 0.95, 0.65]


@pytest.mark.parametrize("variant", ["paper", "improved"])
@pytest.mark.parametrize("pred_hit, answer, outcome", [
    (0.4, 0.3, True), (0.4, 0.3, False), (0.8, 0.9, True)])
def test_observe_question_errors(variant, pred_hit, answer, outcome):
    """§9.1 for a question: predErr = |signal - pYes|; realizedGain = max(0, max_c p_c(after) -
    predicted hit prob) in probability units against a /14 prediction (quirk 14); the improved
    variant divides the realized gain by 14."""
    record = rec(pred_kind=1, pred_hit_prob=pred_hit, pred_answer_prob=answer, pred_gain=0.02,
                 preview_delta=NO_PREVIEW)
    out = observe(variant, record, outcome, hits=[0], misses=[1], p=P_AFTER)
    realized = max(0.0, 0.65 - pred_hit)
    if variant == "improved":
        realized /= 14
    assert float(out.pred_error_ema) == pytest.approx(abs(float(outcome) - answer), abs=1e-6)
    assert float(out.calibration_error_ema) == pytest.approx(abs(realized - 0.02), abs=1e-6)


def test_observe_question_quirk_magnitude():
    """Paper: calErr 0.23 for a 0.25 jump in p; improved: |0.25/14 - 0.02| ≈ 0.0021."""
    record = rec(pred_kind=1, pred_hit_prob=0.4, pred_answer_prob=0.3, pred_gain=0.02,
                 preview_delta=NO_PREVIEW)
    paper = observe("paper", record, True, hits=[0], misses=[1], p=P_AFTER)
    improved = observe("improved", record, True, hits=[0], misses=[1], p=P_AFTER)
    assert float(paper.calibration_error_ema) == pytest.approx(0.23, abs=1e-6)
    assert float(improved.calibration_error_ema) == pytest.approx(0.02 - 0.25 / 14, abs=1e-6)


@pytest.mark.parametrize("before, after", [(0, 0), (1, 0), (2, 1), (3, 2)])
def test_observe_cooldown_decrements(before, after):
    record = rec(cooldown=before, preview_delta=NO_PREVIEW)
    assert int(observe("paper", record, True).cooldown) == after


@pytest.mark.parametrize("ema, streak_before, streak_after", [
    (0.8, 0, 1), (0.8, 1, 2), (0.8, 5, 6),       # confidence < τ: increment
    (0.0, 3, 0), (0.0, 0, 0),                    # confidence >= τ: reset
])
def test_observe_streak(ema, streak_before, streak_after):
    """§9.1 step 5 (updateConfidenceStreak), after the EMAs are updated."""
    record = rec(pred_kind=0, pred_hit_prob=1.0 if ema == 0.0 else 0.2,
                 pred_gain=(1.0 if ema == 0.0 else 0.2) / 14, pred_error_ema=ema,
                 calibration_error_ema=ema / 14, n_observations=4,
                 low_confidence_streak=streak_before, preview_delta=NO_PREVIEW)
    assert int(observe("paper", record, True).low_confidence_streak) == streak_after


def test_observe_streak_reads_updated_confidence():
    """Confidence 0.70 < τ before the observation, 0.775 after a perfect prediction: reset."""
    record = rec(pred_kind=0, pred_hit_prob=1.0, pred_gain=1.0 / 14, pred_error_ema=0.6,
                 calibration_error_ema=0.0, n_observations=3, low_confidence_streak=3,
                 preview_delta=NO_PREVIEW)
    assert float(confidence_j(record)) < TAU
    out = observe("paper", record, True)
    assert float(confidence_j(out)) == pytest.approx(0.775, abs=1e-6)
    assert int(out.low_confidence_streak) == 0


# A record whose gate opens after one miss: EMAs (0.8, 0.1) -> (0.65, 0.0786), confidence 0.636;
# streak 1 -> 2; cooldown 1 -> 0; coarse (hits) and late (frontier 1) are ineligible despite their
# large Δ, closeout is the only candidate (Δ 0.02 > δ_min).
GATE = dict(pred_kind=0, pred_hit_prob=0.2, pred_gain=0.2 / 14, pred_error_ema=0.8,
            calibration_error_ema=0.1, n_observations=3, low_confidence_streak=1, cooldown=1,
            frontier_count=1, largest_cluster=2, preview_delta=[0.5, 0.5, 0.02])


def test_revision_applied_when_gate_opens():
    """§9.2 / §9.5: the preset patches the policy, cooldown 3, revisionCount + 1, last kind."""
    out = observe("paper", rec(**GATE), False)
    assert float(confidence_j(out)) == pytest.approx(1 - (0.65 + (0.3 + 0.2 / 14) / 4) / 2,
                                                     abs=1e-6)
    assert int(out.low_confidence_streak) == 2
    assert int(out.next_kind) == CL and float(out.next_delta) == pytest.approx(0.02)
    assert_policy(out.policy, (6, 2, 4), 15, 0.5, 3)
    assert int(out.cooldown) == 3
    assert int(out.revision_count) == 1 and int(out.llm_revision_count) == 0
    assert int(out.fallback_count) == 0
    assert int(out.last_kind) == CL and float(out.last_delta) == pytest.approx(0.02)
    assert bool(out.revised_now) and not bool(out.llm_request)
    # The next turn: cooldown 3 -> 2, no second revision although every other condition holds.
    again = observe("paper", upd(out, pred_hit_prob=0.2, pred_gain=0.2 / 14,
                                 revised_now=False), False)
    assert int(again.cooldown) == 2 and int(again.revision_count) == 1
    assert int(again.low_confidence_streak) == 3


@pytest.mark.parametrize("agent, change, over, next_kind", [
    ("off", {}, False, CL),                                       # revision disabled (B3)
    ("paper", {"cooldown": 2}, False, CL),                        # cooldown 2 -> 1
    ("paper", {"low_confidence_streak": 0}, False, CL),           # streak 0 -> 1
    ("paper", {"pred_error_ema": 0.0, "calibration_error_ema": 0.0, "pred_hit_prob": 0.0,
               "pred_gain": 0.0}, False, CL),                     # confidence 1: no need
    ("paper", {"preview_delta": [0.5, 0.5, 0.01]}, False, -1),    # no positive preview
    ("paper", {"largest_cluster": 1}, False, -1),                 # closeout ineligible
    ("paper", {}, True, None),                                    # the game is over
    ("llm", {}, True, None),
])
def test_no_revision_when_a_condition_fails(agent, change, over, next_kind):
    record = rec(**{**GATE, **change})
    out = observe(agent, record, False, over=over)
    assert policy_tuple(out.policy) == policy_tuple(record.policy)
    assert int(out.revision_count) == 0 and not bool(out.revised_now)
    assert not bool(out.llm_request)
    assert int(out.cooldown) == max(0, int(record.cooldown) - 1)
    if over:
        # A finished game only reconciles (§9.1 step 4): EMAs move, the streak and gate stop.
        assert int(out.n_observations) == 4
        assert float(out.pred_error_ema) == pytest.approx(0.65, abs=1e-6)
        assert int(out.low_confidence_streak) == int(record.low_confidence_streak)
        assert int(out.next_kind) == int(record.next_kind)
    else:
        assert int(out.next_kind) == next_kind


def test_llm_agent_requests_instead_of_patching():
    """§9.6: mra-llm (τ = 1.0) hands the open gate to the host: llm_request set, the policy and
    counters untouched, the symbolic preview (kind and patched policy) kept for the prompt."""
    assert float(MRA_LLM.default_params().tau) == 1.0 and MRA_LLM.llm
    out = observe("llm", rec(**GATE), False)
    assert bool(out.llm_request)
    assert policy_tuple(out.policy) == policy_tuple(default_policy())
    assert int(out.revision_count) == 0 and int(out.llm_revision_count) == 0
    assert int(out.cooldown) == 0 and not bool(out.revised_now)
    assert int(out.next_kind) == CL
    assert_policy(out.preview_policy, (6, 2, 4), 15, 0.5, 3)
    # τ = 1.0 needs revision at any confidence below 1: a tiny error still counts as low.
    record = rec(**{**GATE, "pred_error_ema": 0.01, "calibration_error_ema": 0.0})
    assert bool(observe("llm", record, False).llm_request)
    assert not bool(observe("paper", record, False).revised_now)


# ----------------------------------------------------------------------------- 5. L4 host step


class ScriptedBackend:
    """`chat(system, user)` returning canned replies keyed by the prompt's turnNumber."""

    def __init__(self, replies):
        self.replies = replies
        self.calls = {}
        self._lock = threading.Lock()

    def chat(self, system, user):
        prompt = json.loads(user)
        turn = prompt["state"]["turnNumber"]
        with self._lock:
            self.calls[turn] = (system, prompt)
        reply = self.replies[turn]
        if isinstance(reply, Exception):
            raise reply
        return reply


VALID = json.dumps({"revisionKind": "late_diffuse_reprobe", "coarseBudget": 3, "localBudget": 1,
                    "lateBudget": 6, "salvageStartTurn": 13, "exploitThreshold": 0.45,
                    "policyMode": "late-reprobe"})
REPLIES = {
    10: VALID,                                                             # game 0: LLM revision
    11: "Sure! I would tighten the closeout.",                             # game 1: not JSON
    12: VALID,                                                             # game 2: no request
    13: 'Here: {"revisionKind": "cluster_closeout_bias", "coarseBudget": 4.6} done',  # game 3
    14: json.dumps({"revisionKind": "cluster_closeout_bias", "coarseBudget": 9,
                    "localBudget": 4, "lateBudget": 3}),                   # game 4: total 16
    15: LLMError("connection refused"),                                    # game 5: transport
    16: json.dumps({"revisionKind": "panic"}),                             # game 6: unknown kind
}


def host_records():
    """Seven games whose gate asked for an LLM (all but game 2); game 4's symbolic preview is the
    late re-probe, the others' the closeout."""
    out = []
    for g in range(7):
        kind = LA if g == 4 else CL
        preview = apply_j(pol(), jnp.int32(kind))
        out.append(rec(pred_error_ema=0.5, calibration_error_ema=0.1, frontier_count=0,
                       largest_cluster=3, best_hit_prob=0.4, best_question_value=0.05,
                       question_mode=LATE, next_kind=kind, next_delta=0.02 + 0.001 * g,
                       low_confidence_streak=2, llm_request=g != 2, revision_count=g % 2,
                       preview_delta=[0.0, 0.03, 0.02]).replace(preview_policy=preview))
    return out


def game(tree, g):
    return jax.tree.map(lambda x: x[g], tree)


def host_params(games: int):
    """mra-llm's default params (τ = 1.0, cooldown 3) for a batch of `games`."""
    return jax.tree.map(lambda x: jnp.stack([x] * games), MRA_LLM.default_params())


@pytest.mark.parametrize("schema", [False, True])
def test_revision_host_step(schema):
    """§9.6: a valid reply patches the policy with the LLM's numbers (missing ones from the
    symbolic preview) and counts an LLM revision; an invalid reply, a guard failure or a transport
    error applies the symbolic preset and counts a fallback; a game that did not ask is untouched.
    The parser and guards are the same behind the schema call (here a backend that ignores it)."""
    records = host_records()
    batch = jax.tree.map(lambda *xs: jnp.stack(xs), *records)
    requests = np.array([g != 2 for g in range(7)])
    backend = ScriptedBackend(REPLIES)
    host = RevisionHost(LLMClient(backend), PAPER_PRESETS, schema=schema)
    belief = jnp.arange(7.0)
    (belief_out, out), events = host.step((belief, batch), host_params(7), requests,
                                          np.arange(10, 17), np.full(7, 9))
    np.testing.assert_array_equal(np.asarray(belief_out), np.arange(7.0))
    assert sorted(backend.calls) == [10, 11, 13, 14, 15, 16]          # game 2 never asked

    by_game = {e.game: e for e in events}
    assert sorted(by_game) == [0, 1, 3, 4, 5, 6]
    assert {g: (e.ok, e.reason) for g, e in by_game.items()} == {
        0: (True, "ok"), 1: (False, "not_json"), 3: (True, "ok"), 4: (False, "budget_over_15"),
        5: (False, "transport"), 6: (False, "unknown_kind")}
    assert by_game[0].turn == 10 and by_game[0].kind == "late_diffuse_reprobe"

    def check(g, policy, llm, fallback, last_kind):
        r, before = game(out, g), records[g]
        assert_policy(r.policy, *policy)
        assert int(r.revision_count) == int(before.revision_count) + 1
        assert int(r.llm_revision_count) == llm and int(r.fallback_count) == fallback
        assert int(r.cooldown) == 3 and bool(r.revised_now) and not bool(r.llm_request)
        assert int(r.last_kind) == last_kind
        # lastRevisionDelta keeps the symbolic Δ either way (quirk 19).
        assert float(r.last_delta) == pytest.approx(float(before.next_delta))

    check(0, ((3, 1, 6), 13, 0.45, 2), llm=1, fallback=0, last_kind=LA)     # the LLM's numbers
    check(3, ((5, 2, 4), 15, 0.5, 3), llm=1, fallback=0, last_kind=CL)      # rest from preview
    check(1, ((6, 2, 4), 15, 0.5, 3), llm=0, fallback=1, last_kind=CL)      # symbolic closeout
    check(4, ((6, 1, 5), 15, 0.55, 2), llm=0, fallback=1, last_kind=LA)     # symbolic re-probe
    check(5, ((6, 2, 4), 15, 0.5, 3), llm=0, fallback=1, last_kind=CL)
    check(6, ((6, 2, 4), 15, 0.5, 3), llm=0, fallback=1, last_kind=CL)
    chex.assert_trees_all_equal(game(out, 2), records[2])

    # The prompt (§9.6): schema with the three kinds; state and the symbolic preview.
    system, prompt = backend.calls[10]
    for kind in presets_lib.KINDS:
        assert kind in system
    assert prompt["task"] == "Revise reflective policy under low-confidence model mismatch."
    state, preview = prompt["state"], prompt["symbolicPreview"]
    assert state["turnNumber"] == 10 and state["questionsRemaining"] == 9
    assert state["modelConfidence"] == pytest.approx(0.7, abs=1e-4)
    assert state["confidenceThreshold"] == 1.0 and state["needRevision"] is True
    assert state["questionFamilyMode"] == "late" and state["largestHitClusterSize"] == 3
    assert preview["revisionKind"] == "cluster_closeout_bias"
    assert (preview["coarseBudget"], preview["localBudget"], preview["lateBudget"],
            preview["salvageStartTurn"]) == (6, 2, 4, 15)
    assert preview["exploitThreshold"] == pytest.approx(0.5)
    assert backend.calls[14][1]["symbolicPreview"]["revisionKind"] == "late_diffuse_reprobe"


def test_revision_host_without_requests_changes_nothing():
    records = host_records()
    records = [r.replace(llm_request=jnp.bool_(False)) for r in records]
    batch = jax.tree.map(lambda *xs: jnp.stack(xs), *records)
    backend = ScriptedBackend(REPLIES)
    host = RevisionHost(LLMClient(backend), PAPER_PRESETS)
    (_, out), events = host.step((jnp.zeros(7), batch), host_params(7), np.zeros(7, bool),
                                 np.arange(10, 17), np.full(7, 9))
    assert events == [] and backend.calls == {}
    chex.assert_trees_all_equal(out, batch)


def test_mode_pools_are_the_spec_lists():
    """§6.4 pools: first 10 in catalog order per mode (paper), every member (improved)."""
    for first_n, lists in ((10, FIRST10), (None, FULL)):
        pools = mode_pools(first_n)
        for mode in (COARSE, LOCAL, LATE):
            assert list(np.flatnonzero(pools[mode])) == lists[mode]


def test_choosing_presets_keeps_table_order():
    assert presets_lib.choose("all") is PAPER_PRESETS
    chosen = presets_lib.choose("cluster_closeout_bias, coarse_roi_collapse")
    assert [p.kind for p in chosen] == ["coarse_roi_collapse", "cluster_closeout_bias"]
    for bad in ("", "closeout", "coarse_roi_collapse,coarse_roi_collapse"):
        with pytest.raises(ValueError):
            presets_lib.choose(bad)
