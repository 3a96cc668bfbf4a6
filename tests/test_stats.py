"""Wilson intervals against the paper's published CIs; the head-to-head win rate."""

from __future__ import annotations

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
