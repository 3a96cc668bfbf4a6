"""Wilson intervals against the paper's published CIs; the head-to-head win rate; the paired
bootstrap and McNemar's exact test against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsjax.battleship.harness import summaries
from bsjax.core import stats


@pytest.mark.parametrize("wins, ci", [
    (27, (37.1, 62.9)), (40, (61.1, 83.9)), (31, (44.2, 69.7)), (30, (42.4, 68.0)),
    (29, (40.6, 66.3)), (0, (0.0, 6.6)), (16, (19.1, 42.8)),
])
def test_wilson_matches_paper_table(wins, ci):
    low, high = stats.wilson_interval(wins, 54)
    assert (round(100 * low, 1), round(100 * high, 1)) == ci


@given(st.integers(0, 500), st.integers(1, 500))
def test_wilson_contains_the_estimate(k, n):
    k = min(k, n)
    low, high = stats.wilson_interval(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0


def test_head_to_head_counts_ties_as_half_and_is_complementary():
    a = {"B01": [0.5, 0.7], "B02": [0.4]}
    b = {"B01": [0.5, 0.6], "B02": [0.9], "B03": [1.0]}
    # B01: 0.5 vs (0.5 tie, 0.6 loss), 0.7 vs (win, win) -> 2.5 / 4; B02: 0 / 1.
    assert stats.head_to_head_win_rate(a, b) == pytest.approx(2.5 / 5)
    assert stats.head_to_head_win_rate(a, b) + stats.head_to_head_win_rate(b, a) == pytest.approx(1)


def test_summarize_fields():
    rows = [{"board": "B01", "f1": 1.0, "won": True, "shots": 14, "hits": 14, "questions": 0,
             "turns": 14, "llm_calls": 0, "fallbacks": 0},
            {"board": "B01", "f1": 0.0, "won": False, "shots": 40, "hits": 0, "questions": 2,
             "turns": 42, "llm_calls": 0, "fallbacks": 0}]
    summary = summaries.summarize(rows)
    assert summary["games"] == 2 and summary["wins"] == 1 and summary["avg_f1"] == 0.5
    assert summary["avg_questions"] == 1.0 and summary["win_rate_ci"][0] < 0.5 < summary["win_rate_ci"][1]


# --- paired comparisons -------------------------------------------------------------------------

def _discordant(only_a: int, only_b: int, both: int = 3, neither: int = 2):
    """Paired successes with the given discordant counts (and some concordant pairs)."""
    a = [True] * only_a + [False] * only_b + [True] * both + [False] * neither
    b = [False] * only_a + [True] * only_b + [True] * both + [False] * neither
    return a, b


@pytest.mark.parametrize("only_a, only_b, p_value", [
    (0, 5, 2 / 32),                  # 2 · P[X <= 0], X ~ Bin(5, 1/2)
    (5, 0, 2 / 32),                  # the test is two-sided: symmetric in A and B
    (1, 9, 2 * (1 + 10) / 1024),     # 2 · (C(10,0) + C(10,1)) / 2^10 = 0.021484375
    (3, 3, 1.0),                     # 2 · 42/64 > 1: capped at 1
    (0, 0, 1.0),                     # no discordant pair: no evidence either way
])
def test_mcnemar_exact_hand_computed(only_a, only_b, p_value):
    a, b = _discordant(only_a, only_b)
    test = stats.mcnemar_exact(a, b)
    assert (test.only_a, test.only_b, test.pairs) == (only_a, only_b, len(a))
    assert test.p_value == p_value
    assert test.difference == pytest.approx((only_a - only_b) / len(a))


def test_mcnemar_difference_is_the_difference_in_success_rates():
    a = np.array([1, 1, 0, 0, 1])
    b = np.array([1, 0, 1, 0, 0])
    test = stats.mcnemar_exact(a, b)
    assert (test.only_a, test.only_b) == (2, 1)
    assert test.difference == pytest.approx(a.mean() - b.mean())  # 0.6 − 0.4


def test_paired_bootstrap_of_a_constant_difference_collapses_to_it():
    b = np.arange(7) / 8  # dyadic, so b + 0.25 − b is exactly 0.25
    assert stats.paired_bootstrap(b + 0.25, b) == (0.25, 0.25, 0.25)
    assert stats.paired_bootstrap(b, b + 0.25) == (-0.25, -0.25, -0.25)  # a − b


def test_paired_difference_text_is_signed_and_rounded():
    assert stats.PairedDifference(0.02094, -0.00456, 0.04321).text() == "+0.0209 [-0.0046, +0.0432]"
    assert stats.PairedDifference(-0.5, -1.0, 0.0).text(2) == "-0.50 [-1.00, +0.00]"


def test_paired_bootstrap_of_two_pairs():
    # Differences 0 and 1: resample means are 0, 1/2, 1 with probabilities 1/4, 1/2, 1/4, so
    # the 2.5% and 97.5% quantiles are 0 and 1.
    assert stats.paired_bootstrap([0.0, 1.0], [0.0, 0.0]) == (0.5, 0.0, 1.0)


def test_paired_bootstrap_is_deterministic_and_centred_on_the_mean_difference():
    rng = np.random.default_rng(7)
    a, b = rng.uniform(size=40), rng.uniform(size=40)
    result = stats.paired_bootstrap(a, b, seed=3)
    assert result == stats.paired_bootstrap(a, b, seed=3)
    assert result != stats.paired_bootstrap(a, b, seed=4)
    assert result.mean == pytest.approx(np.mean(a - b))
    assert result.low < result.mean < result.high
    # A narrower confidence gives a narrower interval inside the wider one.
    narrow = stats.paired_bootstrap(a, b, seed=3, confidence=0.5)
    assert result.low < narrow.low < narrow.high < result.high


@pytest.mark.parametrize("call, message", [
    (lambda: stats.paired_bootstrap([1.0, 2.0], [1.0]), "equal lengths"),
    (lambda: stats.paired_bootstrap([], []), "empty"),
    (lambda: stats.paired_bootstrap([[1.0]], [[1.0]]), "1-D"),
    (lambda: stats.paired_bootstrap([1.0, float("nan")], [1.0, 1.0]), "finite"),
    (lambda: stats.paired_bootstrap([1.0], [1.0], n_resamples=0), "n_resamples"),
    (lambda: stats.paired_bootstrap([1.0], [1.0], confidence=1.0), "confidence"),
    (lambda: stats.mcnemar_exact([True, False], [True]), "equal lengths"),
    (lambda: stats.mcnemar_exact([], []), "empty"),
    (lambda: stats.mcnemar_exact([2, 0], [1, 0]), "booleans"),
])
def test_paired_statistics_reject_bad_samples(call, message):
    with pytest.raises(ValueError, match=message):
        call()
