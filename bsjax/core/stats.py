"""Statistics shared by both domains: Wilson score intervals and head-to-head win rates."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping


def wilson_interval(successes: int, trials: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score 95% interval for a binomial proportion; (0, 0) for zero trials."""
    if trials <= 0:
        return 0.0, 0.0
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)  # exact at the ends
    return low, high


def head_to_head_win_rate(f1_a: Mapping[str, Iterable[float]],
                          f1_b: Mapping[str, Iterable[float]]) -> float:
    """Pooled head-to-head F1 win rate of A over B (docs/battleship/grand-protocol.md §3.1).

    For each board present in both, every game of A is compared with every game of B: 1 if A's F1
    is higher, 0.5 on a tie, 0 otherwise. Returns total score / total comparisons (nan if none).
    """
    score, comparisons = 0.0, 0
    for board, values_a in f1_a.items():
        if board not in f1_b:
            continue
        values_b = list(f1_b[board])
        for a in values_a:
            for b in values_b:
                score += 1.0 if a > b else (0.5 if a == b else 0.0)
                comparisons += 1
    return score / comparisons if comparisons else float("nan")
