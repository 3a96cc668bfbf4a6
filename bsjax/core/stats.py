"""Statistics for results tables: Wilson score intervals and head-to-head F1 win rates."""

from __future__ import annotations

import math
from collections import defaultdict
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
    """Pooled head-to-head F1 win rate of A over B (grand-protocol §3.1).

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


def f1_by_board(rows: Iterable[Mapping]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        out[row["board"]].append(float(row["f1"]))
    return dict(out)


def summarize(rows: list[Mapping]) -> dict:
    """Aggregate game rows into the summary fields of `bsjax play --json`."""
    n = len(rows)
    wins = sum(1 for r in rows if r["won"])
    turns = sum(r["turns"] for r in rows)
    llm_calls = sum(r.get("llm_calls", 0) for r in rows)
    low, high = wilson_interval(wins, n)
    mean = lambda key: (sum(float(r[key]) for r in rows) / n) if n else 0.0  # noqa: E731
    return {
        "games": n,
        "avg_f1": mean("f1"),
        "wins": wins,
        "win_rate": wins / n if n else 0.0,
        "win_rate_ci": [low, high],
        "avg_shots": mean("shots"),
        "avg_questions": mean("questions"),
        "avg_hits": mean("hits"),
        "llm_calls": llm_calls,
        "llm_rate": llm_calls / turns if turns else 0.0,
        "fallbacks": sum(r.get("fallbacks", 0) for r in rows),
        "wall_seconds": sum(float(r.get("wall_seconds", 0.0)) for r in rows),
    }
