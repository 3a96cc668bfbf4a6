"""The exhaustive posterior oracle (`bsjax.battleship.belief.exact`) against hand and brute-force answers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from support import bits, cells_mask, grand_tiny, observe, tiny  # noqa: F401

from bsjax.battleship.belief import exact
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.game.env import Env


def span_cell_sets(config):
    table = spans_lib.table_for(config)
    return [frozenset(np.flatnonzero(row)) for row in table.cells], table.length


def brute_force_configs(config, lengths):
    """Naive nested loop over every tuple of spans."""
    sets, length = span_cell_sets(config)
    pools = [[i for i in range(len(sets)) if length[i] == L] for L in lengths]
    out = []
    for combo in itertools.product(*pools):
        cells = [sets[i] for i in combo]
        if sum(map(len, cells)) == len(frozenset().union(*cells)):
            out.append(combo)
    return np.array(out, np.int32).reshape(-1, len(lengths))


def brute_force_marginal(config, lengths, hits=(), misses=(), questions=(), colour=None,
                         sunk=None, unsunk_evidence=False):
    """Direct evaluation of the target over all labelled configurations (and assignments)."""
    sets, _ = span_cell_sets(config)
    match, mismatch = config.answer_likelihood()
    assignments = ([tuple(lengths)] if config.fleet is not None
                   else sorted(set(itertools.permutations(lengths))))
    total, marg = 0.0, np.zeros(config.n_cells)
    for assignment in assignments:
        for combo in brute_force_configs(config, assignment):
            ships = [sets[i] for i in combo]
            board = frozenset().union(*ships)
            if not set(hits) <= board or set(misses) & board:
                continue
            if colour is not None:
                ok = True
                for k, ship in enumerate(ships):
                    ok &= set(colour[k]) <= ship
                    if sunk[k]:
                        ok &= ship == set(colour[k])
                    elif unsunk_evidence:
                        ok &= ship != set(colour[k])
                if not ok:
                    continue
            w = 1.0
            for region, answer in questions:
                w *= match if bool(board & set(region)) == answer else mismatch
            total += w
            marg[list(board)] += w
    return marg / total if total > 0 else marg


# --- enumeration -----------------------------------------------------------------------------


def test_one_ship_3x3_has_12_spans():
    config = tiny(3, 3, (2,))
    configs = exact.enumerate_configurations(config, (2,))
    assert configs.shape == (12, 1)
    assert configs.dtype == np.int32
    np.testing.assert_array_equal(configs[:, 0], np.arange(12))


@pytest.mark.parametrize("rows,cols,lengths", [(3, 3, (2, 2)), (4, 4, (3, 2)), (4, 3, (2, 3)),
                                               (4, 4, (2, 2, 3)), (5, 5, (3, 2))])
def test_counts_and_rows_match_naive_loops(rows, cols, lengths):
    config = tiny(rows, cols, lengths)
    configs = exact.enumerate_configurations(config, lengths)
    naive = brute_force_configs(config, lengths)  # itertools.product order is lexicographic
    assert configs.shape == naive.shape
    np.testing.assert_array_equal(configs, naive)


def test_two_length_two_ships_on_3x3_closed_form():
    # 12 spans: the 8 on the rim each meet 4 spans (itself included), the 4 through the centre
    # each meet 6; ordered disjoint pairs = 12*12 - (8*4 + 4*6) = 88.
    config = tiny(3, 3, (2, 2))
    assert exact.enumerate_configurations(config, (2, 2)).shape == (88, 2)
    sets, _ = span_cell_sets(config)
    disjoint_pairs = sum(1 for a in sets for b in sets if not a & b)
    assert exact.enumerate_configurations(config, (2, 2)).shape[0] == disjoint_pairs
    # Labelled count is symmetric: every unordered disjoint pair appears twice.
    assert disjoint_pairs % 2 == 0


def test_larger_boards_are_fast_and_valid():
    for rows, cols, lengths in [(5, 5, (3, 2, 2)), (6, 6, (4, 3, 2))]:
        config = tiny(rows, cols, lengths)
        configs = exact.enumerate_configurations(config, lengths)
        table = spans_lib.table_for(config)
        np.testing.assert_array_equal(table.length[configs], np.broadcast_to(lengths, configs.shape))
        occupied = table.cells[configs].sum(axis=1)                     # [N, C]
        assert occupied.max() == 1                                       # no overlap
        keys = [tuple(r) for r in configs[:: max(1, len(configs) // 2000)]]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_tracker_fleet_enumerates_distinct_permutations():
    config = grand_tiny(4, 4, (3, 2))
    both = exact.fleet_configurations(config, (3, 2))
    one = exact.enumerate_configurations(config, (2, 3))
    two = exact.enumerate_configurations(config, (3, 2))
    assert exact.length_assignments(config, (3, 2)) == [(2, 3), (3, 2)]
    assert exact.length_assignments(config, (2, 2, 3)) == [(2, 2, 3), (2, 3, 2), (3, 2, 2)]
    np.testing.assert_array_equal(both, np.concatenate([one, two]))
    fixed = tiny(4, 4, (3, 2))
    assert exact.length_assignments(fixed, (3, 2)) == [(3, 2)]


# --- marginals -------------------------------------------------------------------------------


def test_empty_board_marginal_is_span_coverage():
    config = tiny(3, 3, (2,))
    obs = observe(config, (2,))
    table = spans_lib.table_for(config)
    expected = table.cells.sum(axis=0) / table.n_spans
    np.testing.assert_allclose(exact.hit_probability(config, obs), expected)
    # Corners lie in 2 of 12 spans, edge middles in 3, the centre in 4.
    np.testing.assert_allclose(expected.reshape(3, 3),
                               np.array([[2, 3, 2], [3, 4, 3], [2, 3, 2]]) / 12)


def test_hit_at_centre_by_hand():
    config = tiny(3, 3, (2,))
    p = exact.hit_probability(config, observe(config, (2,), hits=[4]))
    # Four spans hold the centre: {3,4}, {4,5}, {1,4}, {4,7}.
    expected = np.array([0, 1, 0, 1, 4, 1, 0, 1, 0]) / 4
    np.testing.assert_allclose(p, expected)
    p = exact.hit_probability(config, observe(config, (2,), hits=[4], misses=[3]))
    np.testing.assert_allclose(p, np.array([0, 1, 0, 0, 3, 1, 0, 1, 0]) / 3)


def test_two_ship_marginals_match_brute_force_with_shots_and_questions():
    config = tiny(4, 4, (3, 2))
    kwargs = dict(hits=[5], misses=[0, 10], questions=[([3, 7], True), ([12, 13, 14], False)])
    p = exact.hit_probability(config, observe(config, (3, 2), **kwargs))
    np.testing.assert_allclose(p, brute_force_marginal(config, (3, 2), **kwargs), atol=1e-12)


def test_yes_answer_with_zero_epsilon_removes_configs_missing_region():
    config = tiny(3, 3, (2,), epsilon=0.0)
    region = [0, 1, 2]                                    # top row
    prior = observe(config, (2,))
    assert exact.question_yes_probability(config, prior, cells_mask(config, region)) == \
        pytest.approx(5 / 12)                             # 2 horizontal + 3 vertical spans
    obs = observe(config, (2,), questions=[(region, True)])
    configs = exact.enumerate_configurations(config, (2,))
    w = exact.posterior_weights(config, configs, obs)
    touches = spans_lib.table_for(config).cells[configs[:, 0]][:, region].any(axis=1)
    assert np.all(w[~touches] < 1e-9)
    np.testing.assert_allclose(w[touches], 1 / 5, rtol=1e-8)
    assert exact.question_yes_probability(config, obs, cells_mask(config, region)) == \
        pytest.approx(1.0, abs=1e-9)
    p = exact.hit_probability(config, obs)
    assert np.all(p[6:] < 1e-9)                           # bottom row unreachable


def test_tempered_likelihood_two_configurations():
    config = tiny(1, 3, (2,))                             # spans {0,1} and {1,2} only
    assert config.answer_likelihood() == pytest.approx((0.82, 0.18))
    configs = exact.enumerate_configurations(config, (2,))
    assert configs.shape == (2, 1)
    obs = observe(config, (2,), questions=[([0], True)])
    np.testing.assert_allclose(exact.posterior_weights(config, configs, obs), [0.82, 0.18])
    np.testing.assert_allclose(exact.hit_probability(config, obs), [0.82, 1.0, 0.18])
    assert exact.question_yes_probability(config, obs, cells_mask(config, [2])) == \
        pytest.approx(0.18)
    twice = observe(config, (2,), questions=[([0], True), ([2], False)])
    expected = 0.82**2 / (0.82**2 + 0.18**2)
    np.testing.assert_allclose(exact.posterior_weights(config, configs, twice),
                               [expected, 1 - expected])
    # Untempered channel (kappa = 1) gives the plain 0.9 / 0.1.
    plain = tiny(1, 3, (2,), evidence_scale=1.0)
    np.testing.assert_allclose(exact.posterior_weights(plain, configs, obs), [0.9, 0.1])


def test_unasked_question_slots_are_ignored():
    config = tiny(1, 3, (2,))
    obs = observe(config, (2,), questions=[([0], True)]).replace(n_questions=np.int32(0))
    np.testing.assert_allclose(exact.hit_probability(config, obs), [0.5, 1.0, 0.5])


def test_contradictory_evidence_gives_zeros_not_nan():
    config = tiny(3, 3, (2,))
    obs = observe(config, (2,), hits=[0], misses=[1, 3])
    p = exact.hit_probability(config, obs)
    assert np.all(p == 0) and not np.any(np.isnan(p))
    configs = exact.enumerate_configurations(config, (2,))
    w = exact.posterior_weights(config, configs, obs)
    assert w.shape == (12,) and np.all(w == 0)
    assert exact.question_yes_probability(config, obs, cells_mask(config, [0])) == 0.0


def test_accepts_jax_observations():
    import jax.numpy as jnp

    config = tiny(4, 4, (3, 2))
    obs = observe(config, (3, 2), hits=[5], misses=[6], questions=[([0, 1], False)])
    jax_obs = obs.replace(**{k: jnp.asarray(v) for k, v in obs.items()})
    assert isinstance(jax_obs.hit_bits, jnp.ndarray)
    np.testing.assert_allclose(exact.hit_probability(config, jax_obs),
                               exact.hit_probability(config, obs))


# --- grand: colours, sunk ships, tracker -----------------------------------------------------


def test_grand_sunk_ship_fixes_its_span_and_length():
    config = grand_tiny(4, 4, (3, 2))
    # Ship 0 revealed at {0, 1} and sunk -> it is exactly {0,1}, so ship 1 has length 3 and
    # covers cell 15: {13,14,15} or {7,11,15}.
    colour, sunk = [[0, 1], [15]], [True, False]
    obs = observe(config, (3, 2), colour=colour, sunk=sunk)
    p = exact.hit_probability(config, obs)
    expected = np.zeros(16)
    expected[[0, 1, 15]] = 1.0
    expected[[13, 14, 7, 11]] = 0.5
    np.testing.assert_allclose(p, expected, atol=1e-12)
    np.testing.assert_allclose(p, brute_force_marginal(config, (3, 2), colour=colour, sunk=sunk),
                               atol=1e-12)
    configs, w = exact.posterior(config, obs)
    assert np.all(spans_lib.table_for(config).length[configs[w > 0]] == [2, 3])


def test_grand_colour_constrains_the_named_ship():
    config = grand_tiny(4, 4, (3, 2))
    colour, sunk = [[0, 1], [15]], [False, False]
    obs = observe(config, (3, 2), colour=colour, sunk=sunk)
    p = exact.hit_probability(config, obs)
    np.testing.assert_allclose(p, brute_force_marginal(config, (3, 2), colour=colour, sunk=sunk),
                               atol=1e-12)
    # Unsunk evidence: ship 0 is not exactly {0,1}, so it is {0,1,2}; ship 1 is {14,15}/{11,15}.
    q = exact.hit_probability(config, obs, unsunk_evidence=True)
    expected = np.zeros(16)
    expected[[0, 1, 2, 15]] = 1.0
    expected[[14, 11]] = 0.5
    np.testing.assert_allclose(q, expected, atol=1e-12)
    np.testing.assert_allclose(
        q, brute_force_marginal(config, (3, 2), colour=colour, sunk=sunk, unsunk_evidence=True),
        atol=1e-12)


def test_grand_with_question_matches_brute_force():
    config = grand_tiny(4, 4, (2, 2, 3))
    kwargs = dict(colour=[[5], [], []], sunk=[False, False, False], misses=[0, 9],
                  questions=[([12, 13, 14, 15], True)])
    obs = observe(config, (2, 2, 3), **kwargs)
    p = exact.hit_probability(config, obs)
    np.testing.assert_allclose(p, brute_force_marginal(config, (2, 2, 3), **kwargs), atol=1e-12)
    assert config.answer_likelihood() == pytest.approx((0.9, 0.1))


def test_grand_observations_from_rules_step():
    """Observations produced by the game rules are read the way the rules wrote them."""
    import jax

    from bsjax.battleship import types

    config = grand_tiny(4, 4, (3, 2))
    table = spans_lib.table_for(config)
    truth = np.array([spans_lib.span_index(4, 4, (2, 3), 3, 0, 0, True),     # {0,1,2}
                      spans_lib.span_index(4, 4, (2, 3), 2, 2, 3, False)],   # {11,15}
                     np.int32)
    state = Env(config).init(truth, 0)
    step = jax.jit(lambda s, a: Env(config).step(jax.random.PRNGKey(0), s, a))
    for cell in (0, 1, 2, 15, 5):
        state, _ = step(state, types.shoot(cell, config))
    assert bool(state.obs.sunk[0]) and not bool(state.obs.sunk[1])
    p = exact.hit_probability(config, state.obs)
    assert np.all(p[[0, 1, 2, 15]] == pytest.approx(1.0))
    assert p[5] == 0.0
    # Ship 1 has length 2 (the tracker's other length) and covers 15: {14,15} or {11,15}.
    expected = np.zeros(16)
    expected[[0, 1, 2, 15]] = 1.0
    expected[[14, 11]] = 0.5
    np.testing.assert_allclose(p, expected, atol=1e-12)
    assert table.cells[truth].any(axis=0)[[11, 15]].all()
