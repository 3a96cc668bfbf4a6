"""The `sim.next` closed forms, EIG / Bayes-D, and the WMA and Bayes agents' decisions.

References: docs/battleship/protocol.md §7.2–§7.5 (shot value, question raw value, bonuses, EIG),
§8.2 (WMA two-bucket policy); docs/battleship/grand-protocol.md §5.5–§5.6 (EIG, Bayes-D). Every
reference below is a plain numpy / Python loop written from those pages, not from the package.
"""

from __future__ import annotations

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support import FakeSampler, bits, neighbours, observe, ref_clusters, tiny

from bsjax.battleship.agents.bayes import BayesAgent
from bsjax.battleship.agents.wma import WMAAgent, WMAState
from bsjax.battleship.belief import exact
from bsjax.battleship.belief.base import answer_model
from bsjax.battleship.config import PAPER
from bsjax.battleship.game import bitboard, questions, rules, suites
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.game.env import Env
from bsjax.battleship.planning import eig, scoring, sim
from bsjax.battleship.types import ASK, SHOOT

SETTINGS = settings(max_examples=25, deadline=None)
TOTAL = 14.0                                     # paper fleet 5 + 4 + 3 + 2
CATALOG = questions.CATALOG
CELLS = questions.catalog_cells()               # [83, 64] bool
TEMPLATE_BITS = questions.catalog_bits()        # [83, 2] uint32
FAMILY = np.array([t.family for t in CATALOG])
COARSE = np.isin(FAMILY, questions.COARSE_FAMILIES)
BLOCK = FAMILY == "block-2x2"
EPS = PAPER.epsilon


# ----------------------------------------------------------------------------- jitted subjects


@functools.partial(jax.jit, static_argnames=("config", "tempered"))
def _lookahead(config, spans, weights, region_bits, unknown, hits, total, tempered):
    parts = sim.particles(config, spans, weights)
    look = sim.lookahead(config, parts, sim.answers(region_bits, parts), unknown, tempered)
    return look, sim.raw_question_values(look, hits, total), eig.expected_best_after(look)


shot_values_j = jax.jit(sim.shot_values)
split_j = jax.jit(sim.split)
region_mass_j = jax.jit(sim.region_mass)
cluster_relevance_j = jax.jit(sim.cluster_relevance)
# One jitted function for the whole property test (a compile per region count, not per example).
relevance_of_regions_j = jax.jit(lambda hit, regions: sim.cluster_relevance(hit, regions=regions))
eig_j = jax.jit(eig.expected_information_gain, static_argnames=("epsilon",))
bayes_d_ask_j = jax.jit(eig.bayes_d_ask, static_argnames=("gamma",))


def lookahead(config, spans, weights, region_cells, unknown, hits, tempered=True):
    region_bits = bitboard.pack_np(np.asarray(region_cells, bool))
    look, raw, after = _lookahead(config, jnp.asarray(spans, jnp.int32),
                                  jnp.asarray(weights, jnp.float32), jnp.asarray(region_bits),
                                  jnp.asarray(unknown, bool), jnp.float32(hits),
                                  jnp.float32(TOTAL), tempered)
    return (np.asarray(look.p_yes), np.asarray(look.best_after), np.asarray(raw),
            np.asarray(after))


# ----------------------------------------------------------------------------- numpy references


def occupancy(config, spans):
    """`[P, C]` bool ship cells of `[P, S]` span ids."""
    return spans_lib.table_for(config).cells[np.asarray(spans)].any(axis=-2)


def ref_lookahead(occ, weights, region_cells, unknown, hits, likelihood, total=TOTAL):
    """Per region: (pYes, [p*_yes, p*_no], raw) by explicit reweighting (§7.3)."""
    occ = np.asarray(occ, np.float64)
    weights = np.asarray(weights, np.float64)
    match, mismatch = likelihood
    p_yes, best, raw = [], [], []
    for region in np.asarray(region_cells, bool):
        truth = np.array([bool(np.any(o.astype(bool) & region)) for o in occ])
        py = float(sum(w for w, t in zip(weights, truth) if t))
        stars = []
        for answer in (True, False):
            w = np.array([wi * (match if t == answer else mismatch)
                          for wi, t in zip(weights, truth)])
            tot = w.sum()
            if tot <= 0 or not unknown.any():
                stars.append(0.0)
                continue
            marg = (w @ occ) / tot
            star = -1.0
            for c in range(occ.shape[1]):
                if unknown[c] and marg[c] > star:
                    star = marg[c]
            stars.append(star)
        values = [(hits + s) / total for s in stars]
        p_yes.append(py)
        best.append(stars)
        raw.append(py * values[0] + (1.0 - py) * values[1])
    return np.array(p_yes), np.array(best), np.array(raw)


def ref_region_mass(p, unknown):
    """§7.4 regionMass with the block-2x2 binning quirk."""
    mass = np.where(unknown, p, 0.0).astype(np.float64)
    binned = np.zeros((7, 7))
    for cell in range(64):
        r, c = divmod(cell, 8)
        binned[min(r, 6), min(c, 6)] += mass[cell]
    out = np.zeros(len(CATALOG))
    for t in CATALOG:
        if t.family == "block-2x2":
            r, c = divmod(t.cells[0], 8)              # top-left cell = anchor
            m = binned[r, c] / 4.0
        else:
            d = 8.0 if t.family in ("row", "column") else 16.0
            m = sum(mass[cell] for cell in t.cells) / d
        out[t.index] = min(max(m, 0.0), 1.0)
    return out


def ref_cluster_relevance(hit):
    clusters = ref_clusters(np.asarray(hit, bool))
    out = np.zeros(len(CATALOG))
    for t in CATALOG:
        rows_r, cols_r = {c // 8 for c in t.cells}, {c % 8 for c in t.cells}
        best = 0.0
        for k in clusters:
            rows_k, cols_k = {c // 8 for c in k}, {c % 8 for c in k}
            overlap = (max(len(rows_r & rows_k), len(cols_r & cols_k))
                       / max(len(rows_k), len(cols_k), 1))
            best = max(best, overlap)
        out[t.index] = best
    return out


def h_b(x):
    return 0.0 if x <= 0 or x >= 1 else -x * math.log2(x) - (1 - x) * math.log2(1 - x)


def ref_eig(p, epsilon):
    return h_b(epsilon + (1 - 2 * epsilon) * p) - h_b(epsilon)


# ----------------------------------------------------------------------------- particle sets


def random_particles(seed, n=40):
    rng = np.random.default_rng(seed)
    spans = np.array([b.spans for b in suites.random_suite(n, seed, PAPER)], np.int32)
    weights = rng.random(n) + 0.05
    weights = (weights / weights.sum()).astype(np.float32)
    unknown = rng.random(64) < 0.7
    hits = int(rng.integers(0, 14))
    return spans, weights, unknown, hits


# ----------------------------------------------------------------------------- 1. closed forms


def test_paper_answer_likelihood():
    match, mismatch = PAPER.answer_likelihood()
    assert match == pytest.approx(0.82) and mismatch == pytest.approx(0.18)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tempered", [True, False])
def test_question_values_match_bruteforce(seed, tempered):
    spans, weights, unknown, hits = random_particles(seed)
    # The 83 templates, plus the full board (always yes) and the empty region (always no), whose
    # noise-free partitions have an empty side.
    regions = np.concatenate([CELLS, np.ones((1, 64), bool), np.zeros((1, 64), bool)])
    p_yes, best, raw, _ = lookahead(PAPER, spans, weights, regions, unknown, hits, tempered)
    likelihood = PAPER.answer_likelihood() if tempered else (1.0, 0.0)
    ref_p, ref_best, ref_raw = ref_lookahead(occupancy(PAPER, spans), weights, regions, unknown,
                                             hits, likelihood)
    np.testing.assert_allclose(p_yes, ref_p, atol=1e-5)
    np.testing.assert_allclose(best, ref_best, atol=1e-5)
    np.testing.assert_allclose(raw, ref_raw, atol=1e-5)
    assert p_yes[-2] == pytest.approx(1.0) and p_yes[-1] == 0.0
    if not tempered:                         # the empty side of a partition leaves V_a = h / 14
        assert best[-2, 1] == 0.0 and best[-1, 0] == 0.0


def _float_matrix_lookahead(config, parts, answer_matrix, unknown):
    """`sim.lookahead` as first written: products with the 0/1 float matrix of the answers."""
    match, mismatch = config.answer_likelihood()
    truth = answer_matrix.astype(jnp.float32)
    yes_mass = (truth * parts.weights) @ parts.occupancy
    mass = parts.weights @ parts.occupancy
    p_yes, p_no = truth @ parts.weights, (1.0 - truth) @ parts.weights
    marginals = jnp.stack([mismatch * mass + (match - mismatch) * yes_mass,
                           match * mass - (match - mismatch) * yes_mass], axis=1)
    total = jnp.stack([match * p_yes + mismatch * p_no, mismatch * p_yes + match * p_no], axis=1)
    marginals = marginals / jnp.where(total > 0, total, 1.0)[..., None]
    best = jnp.max(jnp.where(unknown, marginals, -1.0), axis=-1)
    return p_yes, jnp.where((total > 0) & jnp.any(unknown), best, 0.0)


def _harness_batch(seed):
    """A batch shaped as the harness batches it: `[54, 500]` particles (span ids and softmax
    weights) and `[54, 64]` unknown cells."""
    rng = np.random.default_rng(seed)
    spans = np.array([[b.spans for b in suites.random_suite(500, g, PAPER)] for g in range(54)],
                     np.int32)
    weights = jax.nn.softmax(jnp.asarray(rng.normal(size=(54, 500)) * 3, jnp.float32), axis=-1)
    return spans, weights, jnp.asarray(rng.random((54, 64)) < 0.7)


def test_lookahead_equals_the_float_matrix_products_bit_for_bit():
    """The split-weights form of the look-ahead gives the 0/1-matrix products' values exactly,
    batched as the harness batches it (54 games x 500 particles x 83 templates)."""
    spans, weights, unknown = _harness_batch(7)

    def both(spans, weights, unknown):
        parts = sim.particles(PAPER, spans, weights)
        answer_matrix = sim.answers(sim.template_bits(), parts)
        look = sim.lookahead(PAPER, parts, answer_matrix, unknown)
        return (look.p_yes, look.best_after), _float_matrix_lookahead(PAPER, parts,
                                                                      answer_matrix, unknown)

    (p_yes, best), (want_p_yes, want_best) = jax.jit(jax.vmap(both))(spans, weights, unknown)
    assert np.asarray(p_yes).tobytes() == np.asarray(want_p_yes).tobytes()
    assert np.asarray(best).tobytes() == np.asarray(want_best).tobytes()


def test_lookahead_rows_give_the_full_call_values_bit_for_bit():
    """Reweighting only some candidates (`rows`, as MRA does with the 20 templates its modes may
    ask) leaves every value of those candidates as the full call gives it, batched as the
    harness batches it; the others get best_after 0 and their p_yes unchanged."""
    from bsjax.battleship.agents.mra import mode_pools

    rows = np.flatnonzero(mode_pools(10).any(axis=0))
    assert len(rows) == 20
    spans, weights, unknown = _harness_batch(11)

    def both(spans, weights, unknown):
        parts = sim.particles(PAPER, spans, weights)
        answer_matrix = sim.answers(sim.template_bits(), parts)
        return (sim.lookahead(PAPER, parts, answer_matrix, unknown, rows=rows),
                sim.lookahead(PAPER, parts, answer_matrix, unknown))

    some, full = jax.jit(jax.vmap(both))(spans, weights, unknown)
    assert np.asarray(some.p_yes).tobytes() == np.asarray(full.p_yes).tobytes()
    best, want = np.asarray(some.best_after), np.asarray(full.best_after)
    assert best[:, rows].tobytes() == want[:, rows].tobytes()
    assert want[:, rows].any()
    others = np.setdiff1d(np.arange(best.shape[1]), rows)
    assert not best[:, others].any()


def test_question_values_without_unknown_cells_are_h_over_14():
    spans, weights, _, hits = random_particles(3)
    unknown = np.zeros(64, bool)
    p_yes, best, raw, _ = lookahead(PAPER, spans, weights, CELLS, unknown, hits)
    np.testing.assert_array_equal(best, 0.0)
    np.testing.assert_allclose(raw, hits / TOTAL, atol=1e-6)


def test_raw_gap_identity():
    """raw(q) - V_shot(best) = [pYes p*_yes + (1 - pYes) p*_no - max_c p_c] / 14."""
    spans, weights, unknown, hits = random_particles(4)
    p_yes, best, raw, _ = lookahead(PAPER, spans, weights, CELLS, unknown, hits)
    p = weights.astype(np.float64) @ occupancy(PAPER, spans)
    best_shot = np.max(np.where(unknown, p, -1))
    gap = (p_yes * best[:, 0] + (1 - p_yes) * best[:, 1] - best_shot) / TOTAL
    np.testing.assert_allclose(raw - (hits + best_shot) / TOTAL, gap, atol=1e-5)


# ----------------------------------------------------------------------------- 2. bonuses


@SETTINGS
@given(p=st.lists(st.floats(0.0, 1.0), min_size=64, max_size=64), hits=st.integers(0, 14))
def test_shot_values(p, hits):
    p = np.asarray(p, np.float32)
    got = np.asarray(shot_values_j(jnp.asarray(p), jnp.float32(hits), jnp.float32(TOTAL)))
    np.testing.assert_allclose(got, (hits + p.astype(np.float64)) / 14.0, atol=1e-6)
    # p (h+1)/T + (1-p) h/T, as the spec states it before simplifying.
    np.testing.assert_allclose(got, p * (hits + 1) / 14.0 + (1 - p) * hits / 14.0, atol=1e-6)


def test_split():
    p = np.array([0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0], np.float32)
    np.testing.assert_allclose(np.asarray(split_j(jnp.asarray(p))),
                               [0.0, 0.2, 0.5, 1.0, 0.5, 0.2, 0.0], atol=1e-6)


@SETTINGS
@given(p=st.lists(st.floats(0.0, 1.0), min_size=64, max_size=64),
       shot=st.lists(st.booleans(), min_size=64, max_size=64),
       scale=st.sampled_from([1.0, 3.0]))
@example(p=[1.0] * 64, shot=[False] * 64, scale=1.0)
@example(p=[1.0] * 64, shot=[False] * 64, scale=3.0)
def test_region_mass_matches_reference(p, shot, scale):
    p = np.asarray(p, np.float32) * np.float32(scale)     # scale > 1 exercises the clip
    unknown = ~np.asarray(shot, bool)
    got = np.asarray(region_mass_j(jnp.asarray(p), jnp.asarray(unknown)))
    np.testing.assert_allclose(got, ref_region_mass(p, unknown), atol=1e-5)


@SETTINGS
@given(p=st.lists(st.floats(0.0, 1.0, width=32).filter(lambda x: x == 0 or x > 1e-30),
                  min_size=64, max_size=64),                 # no subnormals: XLA flushes them
       shot=st.lists(st.booleans(), min_size=64, max_size=64))
def test_region_mass_blocks_are_summed_in_cell_order(p, shot):
    """A block's binned mass is the float32 sum in cell order, as a scatter-add makes it, bit for
    bit (the games recorded with the scatter-add play unchanged)."""
    p, unknown = np.asarray(p, np.float32), ~np.asarray(shot, bool)
    mass = np.where(unknown, p, np.float32(0.0)).astype(np.float32)
    binned = np.zeros(49, np.float32)
    rows, cols = np.divmod(np.arange(64), 8)
    np.add.at(binned, np.minimum(rows, 6) * 7 + np.minimum(cols, 6), mass)  # in index order
    expected = np.clip(binned / np.float32(4.0), 0.0, 1.0)
    got = np.asarray(region_mass_j(jnp.asarray(p), jnp.asarray(unknown)))
    for t in CATALOG:
        if t.family == "block-2x2":
            r, c = divmod(t.cells[0], 8)
            assert got[t.index].view(np.uint32) == expected[r * 7 + c].view(np.uint32)


def test_region_mass_block_quirk_by_hand():
    unknown = np.ones(64, bool)

    def blocks_of(cell):
        p = np.zeros(64, np.float32)
        p[cell] = 1.0
        mass = np.asarray(region_mass_j(jnp.asarray(p), jnp.asarray(unknown)))
        return {CATALOG[i].qid: float(mass[i]) for i in np.flatnonzero(BLOCK & (mass > 0))}

    # An interior cell feeds only the block it anchors, not the three others that contain it.
    assert blocks_of(3 * 8 + 3) == {"block-2x2:D4-E5": 0.25}
    # Row H and column 8 go to the blocks anchored on row G / column 7.
    assert blocks_of(63) == {"block-2x2:G7-H8": 0.25}
    assert blocks_of(7 * 8 + 2) == {"block-2x2:G3-H4": 0.25}
    assert blocks_of(2 * 8 + 7) == {"block-2x2:C7-D8": 0.25}
    # Row A, column 1 only reaches its own block; rows / columns / bands use the plain sum.
    p = np.zeros(64, np.float32)
    p[0] = 1.0
    mass = np.asarray(region_mass_j(jnp.asarray(p), jnp.asarray(unknown)))
    assert mass[questions.template_by_qid("row:A").index] == pytest.approx(1 / 8)
    assert mass[questions.template_by_qid("quadrant:top-left").index] == pytest.approx(1 / 16)
    assert mass[questions.template_by_qid("row-band-2:A-B").index] == pytest.approx(1 / 16)
    # Known cells carry no mass.
    shot = unknown.copy()
    shot[0] = False
    assert np.all(np.asarray(region_mass_j(jnp.asarray(p), jnp.asarray(shot))) == 0.0)


@SETTINGS
@given(hit=st.lists(st.booleans(), min_size=64, max_size=64),
       thin=st.lists(st.booleans(), min_size=64, max_size=64))
@example(hit=[False] * 64, thin=[False] * 64)
@example(hit=[True] * 64, thin=[True] * 64)
def test_cluster_relevance_matches_reference(hit, thin):
    hit = np.asarray(hit, bool) & np.asarray(thin, bool)       # ~25% density: several clusters
    got = np.asarray(cluster_relevance_j(jnp.asarray(hit)))
    np.testing.assert_allclose(got, ref_cluster_relevance(hit), atol=1e-6)


@SETTINGS
@given(hit=st.lists(st.booleans(), min_size=64, max_size=64),
       regions=st.lists(st.lists(st.booleans(), min_size=64, max_size=64), min_size=1,
                        max_size=6))
def test_cluster_relevance_of_any_regions(hit, regions):
    """Given regions, the same definition; the catalog's cells give the default exactly."""
    hit, regions = np.asarray(hit, bool), np.asarray(regions, bool)
    got = np.asarray(relevance_of_regions_j(hit, regions))
    clusters = ref_clusters(hit)
    for region, value in zip(regions, got):
        cells = np.flatnonzero(region)
        rows_r, cols_r = set(cells // 8), set(cells % 8)
        best = max([max(len(rows_r & {c // 8 for c in k}), len(cols_r & {c % 8 for c in k}))
                    / max(len({c // 8 for c in k}), len({c % 8 for c in k}), 1)
                    for k in clusters], default=0.0)
        assert value == np.float32(best)
    catalog = relevance_of_regions_j(hit, questions.catalog_cells())
    np.testing.assert_array_equal(np.asarray(catalog), np.asarray(cluster_relevance_j(hit)))


def test_cluster_relevance_by_hand():
    hit = np.zeros(64, bool)
    hit[[8 * 2 + 3, 8 * 3 + 3, 8 * 4 + 3]] = True               # D3..E4 vertical: rows C-E, col 4
    got = np.asarray(cluster_relevance_j(jnp.asarray(hit)))
    by = {t.qid: got[t.index] for t in CATALOG}
    assert by["column:4"] == pytest.approx(1.0)                 # all three rows
    assert by["column:1"] == pytest.approx(1.0)                 # a column spans every row
    assert by["row:D"] == pytest.approx(1 / 3)
    assert by["block-2x2:A1-B2"] == pytest.approx(0.0)
    assert by["block-2x2:C1-D2"] == pytest.approx(2 / 3)
    assert np.all(np.asarray(cluster_relevance_j(jnp.zeros(64, bool))) == 0.0)


# ----------------------------------------------------------------------------- 3. EIG


TINY = tiny(5, 5, (3, 2), max_questions=4)


def tiny_regions():
    rng = np.random.default_rng(7)
    regions = []
    for r in range(5):
        m = np.zeros(25, bool)
        m[r * 5:(r + 1) * 5] = True
        regions.append(m)
    for c in range(5):
        m = np.zeros(25, bool)
        m[c::5] = True
        regions.append(m)
    for _ in range(10):
        regions.append(rng.random(25) < 0.25)
    regions.append(np.ones(25, bool))                           # constant yes
    return np.array(regions)


def mutual_information(weights, truth, epsilon):
    """I(A; S) in bits from the joint P(s) P(a | s), with P(a | s) = 1 - eps if a == q(s)."""
    info, p_a = 0.0, {}
    for a in (True, False):
        p_a[a] = sum(w * ((1 - epsilon) if t == a else epsilon) for w, t in zip(weights, truth))
    for w, t in zip(weights, truth):
        if w <= 0:
            continue
        for a in (True, False):
            cond = (1 - epsilon) if t == a else epsilon
            if cond > 0:
                info += w * cond * math.log2(cond / p_a[a])
    return info


@pytest.mark.parametrize("epsilon", [0.1, 0.0, 0.25])
def test_eig_matches_enumerated_mutual_information(epsilon):
    obs = observe(TINY, (3, 2), hits=[12], misses=[7, 13],
                  questions=[(list(range(5)), True)])
    configs, weights = exact.posterior(TINY, obs)
    assert configs.shape[0] > 10
    regions = tiny_regions()
    unknown = np.ones(25, bool)
    unknown[[12, 7, 13]] = False
    p_yes, _, _, _ = lookahead(TINY, configs, weights, regions, unknown, 1)
    gain = np.asarray(eig_j(jnp.asarray(p_yes), epsilon=epsilon))
    occ = occupancy(TINY, configs)
    for k, region in enumerate(regions):
        truth = (occ & region).any(axis=1)
        assert p_yes[k] == pytest.approx(
            exact.question_yes_probability(TINY, obs, region), abs=1e-5)
        assert gain[k] == pytest.approx(mutual_information(weights, truth, epsilon), abs=1e-5)
    assert gain[-1] == pytest.approx(0.0, abs=1e-6)


def test_eig_ceiling_and_edges():
    p = jnp.asarray([0.0, 0.5, 1.0, 0.2, 0.8], jnp.float32)
    gain = np.asarray(eig_j(p, epsilon=0.1))
    ceiling = 1.0 - h_b(0.1)
    assert ceiling == pytest.approx(0.531, abs=5e-4)
    assert gain[1] == pytest.approx(ceiling, abs=1e-6)
    assert gain[0] == pytest.approx(0.0, abs=1e-6) and gain[2] == pytest.approx(0.0, abs=1e-6)
    assert gain[3] == pytest.approx(gain[4], abs=1e-6) and 0 < gain[3] < gain[1]
    assert float(eig_j(jnp.float32(0.5), epsilon=0.0)) == pytest.approx(1.0, abs=1e-6)


# ----------------------------------------------------------------------------- 4. Bayes-D


def test_bayes_d_worked_example():
    assert bool(bayes_d_ask_j(jnp.float32(0.308), jnp.float32(0.427)))      # 0.406 > 0.308
    assert not bool(bayes_d_ask_j(jnp.float32(0.308), jnp.float32(0.32)))   # 0.304 < 0.308
    assert not bool(bayes_d_ask_j(jnp.float32(0.25), jnp.float32(0.5), gamma=0.5))  # strict


@pytest.mark.parametrize("seed", [5, 6])
def test_expected_best_after_matches_bruteforce(seed):
    spans, weights, unknown, hits = random_particles(seed, n=24)
    _, _, _, after = lookahead(PAPER, spans, weights, CELLS, unknown, hits, tempered=False)
    occ = occupancy(PAPER, spans).astype(np.float64)
    w = weights.astype(np.float64)
    for k, region in enumerate(CELLS):
        truth = (occ.astype(bool) & region).any(axis=1)
        total, expected = w.sum(), 0.0
        for side in (truth, ~truth):
            mass = w[side].sum()
            if mass > 0:
                marg = w[side] @ occ[side] / mass
                expected += mass / total * marg[unknown].max()
        assert after[k] == pytest.approx(expected, abs=1e-5), CATALOG[k].qid


# ----------------------------------------------------------------------------- agents' fixtures



SAMPLER = FakeSampler()
WMA = WMAAgent(PAPER)
BAYES = BayesAgent(PAPER)
KEY = jax.random.key(0)


def _wma(key, view, belief, state):
    return WMA.decide(key, WMA.default_params(), view, SAMPLER, belief, state)


def _bayes(key, view, belief):
    return BAYES.decide(key, BAYES.default_params(), view, SAMPLER, belief, ())


wma_decide = jax.jit(_wma)
bayes_decide = jax.jit(_bayes)


def span(length, row, col, horizontal):
    return spans_lib.span_index(8, 8, (2, 3, 4, 5), length, row, col, horizontal)


# Two far-apart boards: every ship in rows A-D, or every ship in rows E-H (fleet order 5, 4, 3, 2).
TOP = [span(5, 0, 0, True), span(4, 1, 0, True), span(3, 2, 0, True), span(2, 3, 0, True)]
BOTTOM = [span(5, 7, 0, True), span(4, 6, 0, True), span(3, 5, 0, True), span(2, 4, 0, True)]

# Late-game boards: the 5, 4 and 3 are hit and fenced by misses (no frontier); the 2 is either on
# G7-G8 or on H7-H8. The hit ships cover rows G, H, columns 7, 8 and the bottom-right quadrant,
# so every coarse template answers the same on both boards; only blocks F6-G7 / F7-G8 split them.
COMMON = [span(5, 0, 6, False), span(4, 1, 7, False), span(3, 5, 2, False)]
LATE_A = COMMON + [span(2, 6, 6, True)]
LATE_B = COMMON + [span(2, 7, 6, True)]
LATE_HITS = sorted(int(c) for c in np.flatnonzero(occupancy(PAPER, [COMMON]).reshape(64)))
LATE_MISSES = sorted({nb for c in LATE_HITS for nb in neighbours(c)} - set(LATE_HITS))

BASE = Env(PAPER).init(jnp.asarray(TOP, jnp.int32), jnp.int32(0))


def make_belief(boards, weights, p=None):
    spans = np.asarray(boards, np.int32)
    weights = np.asarray(weights, np.float32)
    weights = weights / weights.sum()
    if p is None:
        p = weights @ occupancy(PAPER, spans).astype(np.float32)
    return (jnp.asarray(p, jnp.float32), jnp.asarray(spans), jnp.asarray(weights))


def make_view(hits=(), misses=(), turn=0, questions_left=15, asked_regions=()):
    view = Env(PAPER).observe(BASE)
    obs = view.obs.replace(hit_bits=jnp.asarray(bits(PAPER, hits)),
                           miss_bits=jnp.asarray(bits(PAPER, misses)))
    if asked_regions:
        qbits = np.zeros((PAPER.max_questions, PAPER.n_words), np.uint32)
        for j, region in enumerate(asked_regions):
            qbits[j] = bits(PAPER, region)
        obs = obs.replace(question_bits=jnp.asarray(qbits),
                          n_questions=jnp.int32(len(asked_regions)))
    return view._replace(obs=obs, turn=jnp.int32(turn), questions_left=jnp.int32(questions_left),
                         legal_shots=rules.unknown_cells(PAPER, obs),
                         can_ask=jnp.bool_(questions_left > 0))


def make_state(asked=(), coarse_used=0, late_used=0):
    mask = np.zeros(questions.N_TEMPLATES, bool)
    mask[list(asked)] = True
    return WMAState(asked=jnp.asarray(mask),
                    coarse_used=jnp.int32(coarse_used), late_used=jnp.int32(late_used))


def ref_adjusted(belief, hits, misses, weights_triplet):
    """Reference scores of every template for a hand-built state (§7.3-7.4)."""
    p, spans, w = (np.asarray(x) for x in belief)
    unknown = np.ones(64, bool)
    unknown[list(hits) + list(misses)] = False
    hit = np.zeros(64, bool)
    hit[list(hits)] = True
    p_yes, _, raw = ref_lookahead(occupancy(PAPER, spans), w, CELLS, unknown, len(hits),
                                  PAPER.answer_likelihood())
    w_split, w_mass, w_cluster = weights_triplet
    return (raw + w_split * (1 - np.abs(2 * p_yes - 1)) + w_mass * ref_region_mass(p, unknown)
            + w_cluster * ref_cluster_relevance(hit))


def shot_value(belief, hits, misses):
    p = np.asarray(belief[0], np.float64)
    unknown = np.ones(64, bool)
    unknown[list(hits) + list(misses)] = False
    return (len(hits) + p[unknown].max()) / TOTAL


def unpack(state):
    return (np.asarray(state.asked), int(state.coarse_used), int(state.late_used))


# ----------------------------------------------------------------------------- 5. WMA


@functools.partial(jax.jit, static_argnames=("coarse_phase",))
def _score_questions(spans, weights, p, unknown, hit_cells, hits, coarse_phase):
    """WMA's rule (`scoring.paper`) on the template features of a hand-built turn."""
    parts = sim.particles(PAPER, spans, weights)
    total = jnp.float32(TOTAL)
    turn = scoring.TurnSummary(p, parts, unknown, hit_cells, hits, total, jnp.int32(0),
                               jnp.float32(0.0), answer_model(PAPER))
    features = scoring.template_features(PAPER, turn, jnp.bool_(coarse_phase))
    return WMA.rule(features, WMA.default_params().scoring)


@pytest.mark.parametrize("coarse_phase", [True, False])
def test_wma_score_questions_formulas(coarse_phase):
    """Coarse formula in the coarse phase, salvage otherwise (§7.4)."""
    spans, weights, unknown, _ = random_particles(10)
    rng = np.random.default_rng(11)
    hit = ~unknown & (rng.random(64) < 0.6)
    p = weights @ occupancy(PAPER, spans).astype(np.float32)
    got = np.asarray(_score_questions(jnp.asarray(spans), jnp.asarray(weights), jnp.asarray(p),
                                      jnp.asarray(unknown), jnp.asarray(hit),
                                      jnp.float32(hit.sum()), coarse_phase))
    p_yes, _, raw = ref_lookahead(occupancy(PAPER, spans), weights, CELLS, unknown,
                                  int(hit.sum()), PAPER.answer_likelihood())
    w_split, w_mass, w_cluster = sim.COARSE_WEIGHTS if coarse_phase else sim.SALVAGE_WEIGHTS
    assert (w_split, w_mass, w_cluster) == ((0.015, 0.005, 0.0) if coarse_phase
                                            else (0.03, 0.035, 0.025))
    ref = (raw + w_split * (1 - np.abs(2 * p_yes - 1)) + w_mass * ref_region_mass(p, unknown)
           + w_cluster * ref_cluster_relevance(hit))
    np.testing.assert_allclose(got, ref, atol=1e-5)


def test_adjusted_values_are_the_weighted_sum_term_by_term():
    """The weights scale the features as one `[K, 3]` product (`sim.adjusted_values`): bit for
    bit the term-by-term sum it replaced, jitted over a batch as a turn runs it."""
    def term_by_term(raw, p_yes, mass, relevance, w):
        return raw + w[0] * sim.split(p_yes) + w[1] * mass + w[2] * relevance

    rng = np.random.default_rng(5)
    raw, p_yes, mass, relevance = (jnp.asarray(rng.random((54, 83), np.float32) * scale)
                                   for scale in (3.0, 1.0, 1.0, 1.0))
    weights = jnp.asarray(rng.normal(size=(54, 3)).astype(np.float32))
    args = (raw, p_yes, mass, relevance, weights)
    got = np.asarray(jax.jit(jax.vmap(sim.adjusted_values))(*args))
    want = np.asarray(jax.jit(jax.vmap(term_by_term))(*args))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_late_fixture_is_what_it_claims():
    hits, misses = set(LATE_HITS), set(LATE_MISSES)
    twos = {54, 55, 62, 63}
    assert len(hits) == 12 and not (misses & twos) and not (hits & twos)
    assert all(nb in hits | misses for c in hits for nb in neighbours(c))   # no frontier
    occ = occupancy(PAPER, [LATE_A, LATE_B])
    answers = (CELLS[:, None, :] & occ[None]).any(-1)                         # [83, 2]
    differ = answers[:, 0] != answers[:, 1]
    assert not np.any(differ & COARSE)
    assert {CATALOG[i].qid for i in np.flatnonzero(differ)} == {
        "block-2x2:F6-G7", "block-2x2:F7-G8"}


def test_wma_frontier_exploit_highest_p_lowest_index():
    """(a) A hit with unknown neighbours: shoot the best frontier cell, whatever else is worth."""
    p = np.zeros(64, np.float32)
    p[0] = 0.9                                  # global best, not on the frontier
    p[[19, 26, 28, 35]] = [0.3, 0.6, 0.2, 0.6]  # neighbours of D4 (27); 26 and 35 tie
    p[27] = 1.0
    belief = make_belief([TOP, BOTTOM], [1, 1], p=p)
    for turn, late_used in ((20, 0), (5, 0)):
        state = make_state(late_used=late_used)
        action, p_cell, new = wma_decide(KEY, make_view(hits=[27], turn=turn), belief, state)
        assert int(action.kind) == SHOOT and int(action.cell) == 26
        assert int(action.question_id) == -1
        assert float(p_cell) == pytest.approx(0.6)
        chex.assert_trees_all_equal(new, state)
    action, _, _ = wma_decide(KEY, make_view(hits=[27], misses=[26], turn=20), belief,
                              make_state())
    assert int(action.kind) == SHOOT and int(action.cell) == 35


def test_wma_frontier_beats_a_valuable_question():
    """(a) The late fixture asks at turn 20; re-open one fenced neighbour (F7 = 46, p = 0) and the
    frontier wins, with no threshold on its p."""
    belief = make_belief([LATE_A, LATE_B], [1, 1])
    misses = [c for c in LATE_MISSES if c != 46]
    action, p_cell, new = wma_decide(KEY, make_view(LATE_HITS, misses, turn=20), belief,
                                     make_state())
    assert int(action.kind) == SHOOT and int(action.cell) == 46
    assert float(p_cell) == 0.0
    chex.assert_trees_all_equal(new, make_state())


def test_wma_coarse_phase_asks_best_coarse_template():
    """(b) No hits, coarse budget open: the best coarse template beats the best shot."""
    belief = make_belief([TOP, BOTTOM], [1, 1])
    view = make_view(turn=3)
    action, p_cell, new = wma_decide(KEY, view, belief, make_state())
    ref = ref_adjusted(belief, [], [], sim.COARSE_WEIGHTS)
    best_shot = shot_value(belief, [], [])
    q = int(action.question_id)
    assert int(action.kind) == ASK
    assert COARSE[q]
    assert ref[q] > best_shot
    assert ref[q] == pytest.approx(np.max(np.where(COARSE, ref, -np.inf)), abs=1e-6)
    # By hand: the top-left and bottom-left quadrants hold 13 ship cells of p 0.5 each (the
    # largest regionMass among the pYes = 0.5 templates); the tie goes to the earlier one.
    assert CATALOG[q].qid == "quadrant:top-left"
    np.testing.assert_array_equal(np.asarray(action.question_bits), TEMPLATE_BITS[q])
    assert float(p_cell) == pytest.approx(0.5)
    asked, coarse_used, late_used = unpack(new)
    assert coarse_used == 1 and late_used == 0
    assert asked[q] and asked.sum() == 1

    # Already asked templates are skipped.
    action, _, new = wma_decide(KEY, view, belief, new)
    assert int(action.kind) == ASK and CATALOG[int(action.question_id)].qid == (
        "quadrant:bottom-left")
    asked, coarse_used, _ = unpack(new)
    assert coarse_used == 2 and asked.sum() == 2


def test_wma_coarse_budget_spent_shoots():
    """(b) With coarse_used = 6 (or no questions left) it shoots the best cell."""
    belief = make_belief([TOP, BOTTOM], [1, 1])
    for state, view in ((make_state(coarse_used=6), make_view(turn=8)),
                        (make_state(), make_view(turn=8, questions_left=0))):
        action, p_cell, new = wma_decide(KEY, view, belief, state)
        assert int(action.kind) == SHOOT and int(action.cell) == 0
        assert int(action.question_id) == -1
        assert float(p_cell) == pytest.approx(0.5)
        chex.assert_trees_all_equal(new, state)


def test_wma_ask_gate_is_strict():
    """(b) A question is asked only if adj > V_shot(best). Certain belief, every coarse template
    asked but row H (pYes = 0, split 0, no mass): adj == V_shot exactly, so it shoots."""
    belief = make_belief([TOP, TOP], [1, 1])
    row_h = questions.template_by_qid("row:H").index
    state = make_state(asked=[i for i in np.flatnonzero(COARSE) if i != row_h])
    action, p_cell, new = wma_decide(KEY, make_view(turn=4), belief, state)
    assert int(action.kind) == SHOOT and int(action.cell) == 0
    assert float(p_cell) == 1.0
    chex.assert_trees_all_equal(new, state)
    # With row A still open (pYes = 1 but regionMass 5/8) the bonus alone makes it worth asking,
    # as in the reference.
    state = make_state(asked=[i for i in np.flatnonzero(COARSE) if i not in (0, row_h)])
    action, _, _ = wma_decide(KEY, make_view(turn=4), belief, state)
    assert int(action.kind) == ASK and int(action.question_id) == 0


@pytest.mark.parametrize("turn, coarse, late", [(16, 1, 0), (17, 0, 1), (25, 0, 1)])
def test_wma_bucket_of_a_question_uses_post_ask_turn(turn, coarse, late):
    """(c) turnAsked is the turn after the ask: a question asked at turn 17 counts as late."""
    belief = make_belief([TOP, BOTTOM], [1, 1])
    action, _, new = wma_decide(KEY, make_view(turn=turn), belief, make_state(coarse_used=2))
    assert int(action.kind) == ASK
    asked, coarse_used, late_used = unpack(new)
    assert (coarse_used, late_used) == (2 + coarse, late)
    assert asked[int(action.question_id)]


def test_wma_late_phase_pool_includes_blocks_and_never_repeats():
    """(d) Hits, no frontier, turn >= 18, late budget open: blocks compete (salvage formula)."""
    belief = make_belief([LATE_A, LATE_B], [1, 1])
    view = make_view(LATE_HITS, LATE_MISSES, turn=20)
    ref = ref_adjusted(belief, LATE_HITS, LATE_MISSES, sim.SALVAGE_WEIGHTS)
    pool = COARSE | BLOCK
    best_shot = shot_value(belief, LATE_HITS, LATE_MISSES)

    state = make_state(asked=[3], coarse_used=6, late_used=2)
    seen = []
    for _ in range(3):
        action, p_cell, new = wma_decide(KEY, view, belief, state)
        q = int(action.question_id)
        assert int(action.kind) == ASK and pool[q] and q not in seen and q != 3
        allowed = pool & ~np.asarray(state.asked)
        assert ref[q] == pytest.approx(np.max(np.where(allowed, ref, -np.inf)), abs=1e-6)
        assert ref[q] > best_shot
        asked, coarse_used, late_used = unpack(new)
        assert coarse_used == 6 and late_used == int(state.late_used) + 1 and asked[q]
        assert float(p_cell) == pytest.approx(0.5)
        seen.append(q)
        state = new
    # The two splitting blocks tie (same partition, no mass, same relevance): F6-G7 first.
    assert [CATALOG[q].qid for q in seen[:2]] == ["block-2x2:F6-G7", "block-2x2:F7-G8"]

    # Late budget spent: shoot G7 (54; p 0.5, lowest index of the tie).
    action, _, new = wma_decide(KEY, view, belief, make_state(late_used=6))
    assert int(action.kind) == SHOOT and int(action.cell) == 54
    chex.assert_trees_all_equal(new, make_state(late_used=6))


@pytest.mark.parametrize("turn", [0, 10, 17])
def test_wma_hits_without_frontier_before_late_turn_shoots(turn):
    """(e) Hits, no frontier, turn < 18: no question pool at all."""
    belief = make_belief([LATE_A, LATE_B], [1, 1])
    state = make_state()
    action, p_cell, new = wma_decide(KEY, make_view(LATE_HITS, LATE_MISSES, turn=turn), belief,
                                     state)
    assert int(action.kind) == SHOOT and int(action.cell) == 54
    assert float(p_cell) == pytest.approx(0.5)
    chex.assert_trees_all_equal(new, state)


# ----------------------------------------------------------------------------- 6. Bayes


def test_bayes_asks_max_eig_question_on_split_belief():
    belief = make_belief([TOP, BOTTOM], [1, 1])
    action, p_cell, _ = bayes_decide(KEY, make_view(turn=0), belief)
    assert int(action.kind) == ASK
    # Every template that separates the two boards has pYes = 0.5 (EIG 0.531); row A is first.
    assert int(action.question_id) == 0
    np.testing.assert_array_equal(np.asarray(action.question_bits), TEMPLATE_BITS[0])
    assert float(p_cell) == pytest.approx(0.5)
    assert int(action.cell) == 0

    # Row A already asked (same cells): never chosen again, row B instead.
    view = make_view(turn=1, asked_regions=[list(range(8))])
    action, _, _ = bayes_decide(KEY, view, belief)
    assert int(action.kind) == ASK and int(action.question_id) == 1


def test_bayes_shoots_map_cell_when_certain():
    belief = make_belief([TOP, TOP], [1, 1])
    action, p_cell, _ = bayes_decide(KEY, make_view(turn=0), belief)
    assert int(action.kind) == SHOOT and int(action.cell) == 0
    assert int(action.question_id) == -1
    assert float(p_cell) == pytest.approx(1.0)


def test_bayes_no_questions_left_shoots():
    belief = make_belief([TOP, BOTTOM], [1, 1])
    action, _, _ = bayes_decide(KEY, make_view(turn=0, questions_left=0), belief)
    assert int(action.kind) == SHOOT and int(action.cell) == 0


@pytest.mark.parametrize("seed", [8, 9])
def test_bayes_matches_bruteforce_on_random_particles(seed):
    """No hits, so the pool is the 83 templates: max-EIG question, Bayes-D on its partition."""
    spans, weights, _, _ = random_particles(seed, n=12)
    occ = occupancy(PAPER, spans)
    misses = [int(c) for c in np.random.default_rng(seed).choice(64, 10, replace=False)]
    belief = make_belief(spans, weights)
    action, p_cell, _ = bayes_decide(KEY, make_view(misses=misses, turn=0), belief)

    p = np.asarray(belief[0], np.float64)
    unknown = np.ones(64, bool)
    unknown[misses] = False
    p_yes, best, _ = ref_lookahead(occ, weights, CELLS, unknown, 0, (1.0, 0.0))
    gains = np.array([ref_eig(x, EPS) for x in p_yes])
    ask = 0.95 * (p_yes * best[:, 0] + (1 - p_yes) * best[:, 1]) > p[unknown].max()   # [83]
    top = gains >= gains.max() - 1e-6            # float ties may pick any of these
    if int(action.kind) == ASK:
        q = int(action.question_id)
        assert top[q] and ask[q]
    else:
        assert int(action.kind) == SHOOT and not np.all(ask[top])
        assert int(action.cell) == int(np.argmax(np.where(unknown, p, -1)))


# ----------------------------------------------------------------------------- 7. retrace guard


def test_wma_decide_does_not_retrace():
    chex.clear_trace_counter()

    def decide(key, view, belief, state):
        return WMA.decide(key, WMA.default_params(), view, SAMPLER, belief, state)

    guarded = jax.jit(chex.assert_max_traces(decide, n=1))
    coarse = guarded(KEY, make_view(turn=3), make_belief([TOP, BOTTOM], [1, 1]), make_state())
    late = guarded(KEY, make_view(LATE_HITS, LATE_MISSES, turn=20),
                   make_belief([LATE_A, LATE_B], [1, 1]), make_state(late_used=1))
    assert int(coarse[0].kind) == ASK and int(late[0].kind) == ASK
