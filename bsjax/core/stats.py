"""Statistics shared by both domains: Wilson score intervals, head-to-head win rates and paired
comparisons (a paired bootstrap of a mean difference, McNemar's exact test)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike


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


# --- paired comparisons -------------------------------------------------------------------------

# Bootstrap resamples are drawn in blocks of about this many indices, so memory stays bounded
# however many pairs there are.
_BOOTSTRAP_BLOCK = 1 << 20


class PairedDifference(NamedTuple):
    """The mean of the paired differences a − b and a percentile bootstrap interval for it."""

    mean: float
    low: float
    high: float

    def text(self, digits: int = 4) -> str:
        """`"+0.0209 [-0.0046, +0.0432]"`: the mean and its interval, signed."""
        return f"{self.mean:+.{digits}f} [{self.low:+.{digits}f}, {self.high:+.{digits}f}]"


class McNemar(NamedTuple):
    """McNemar's exact test of two paired binary outcomes (say, games completed by A and B).

    Attributes:
        pairs: the number of pairs.
        only_a: pairs where A succeeded and B did not.
        only_b: pairs where B succeeded and A did not.
        difference: A's success rate minus B's, (only_a − only_b) / pairs.
        p_value: the exact two-sided p-value of "A and B succeed equally often".
    """

    pairs: int
    only_a: int
    only_b: int
    difference: float
    p_value: float


def _paired_arrays(a: ArrayLike, b: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """`a` and `b` as 1-D arrays of one length, at least one pair. Raises ValueError."""
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"paired samples must be 1-D (got shapes {a.shape} and {b.shape})")
    if a.shape != b.shape:
        raise ValueError(f"paired samples must have equal lengths (got {a.size} and {b.size})")
    if a.size == 0:
        raise ValueError("paired samples are empty")
    return a, b


def paired_bootstrap(a: ArrayLike, b: ArrayLike, n_resamples: int = 10_000, seed: int = 0,
                     confidence: float = 0.95) -> PairedDifference:
    """Mean paired difference a − b with a percentile bootstrap interval over the pairs.

    Each resample draws len(a) pairs with replacement (a pair keeps its two values together, so
    what the pairs share, such as a game's board and seed, cancels out) and takes the mean of
    its differences; the interval is the central `confidence` range of those means.

    Args:
        a: the first value of each pair.
        b: the second value of each pair, in the same order.
        n_resamples: how many bootstrap resamples.
        seed: seed of the numpy Generator, so equal inputs give equal intervals.
        confidence: the interval's coverage, in (0, 1).

    Returns:
        (mean, low, high) of a − b.

    Raises:
        ValueError: the samples are not 1-D, differ in length, are empty or not finite, or
            `n_resamples` or `confidence` is out of range.
    """
    a, b = _paired_arrays(a, b)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1 (got {n_resamples})")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1) (got {confidence})")
    differences = a.astype(np.float64) - b.astype(np.float64)
    if not np.all(np.isfinite(differences)):
        raise ValueError("paired samples must be finite")
    n = differences.size
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    block = max(1, _BOOTSTRAP_BLOCK // n)
    for start in range(0, n_resamples, block):
        stop = min(start + block, n_resamples)
        means[start:stop] = differences[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    tail = (1.0 - confidence) / 2
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return PairedDifference(float(differences.mean()), float(low), float(high))


def _boolean_array(values: ArrayLike, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype != bool and not np.isin(array, (0, 1)).all():
        raise ValueError(f"{name} must hold booleans or 0/1")
    return array.astype(bool)


def mcnemar_exact(a_success: ArrayLike, b_success: ArrayLike) -> McNemar:
    """McNemar's exact test of paired successes of A and B.

    Only discordant pairs (one succeeded, the other not) carry information: under the null each
    is A's with probability 1/2, so with n = only_a + only_b the two-sided p-value is
    min(1, 2 · P[X ≤ min(only_a, only_b)]) for X ~ Binomial(n, 1/2), and 1 when n = 0. The tail
    is summed in integers, so the p-value is exact up to the final division.

    Args:
        a_success: per pair, whether A succeeded (booleans or 0/1).
        b_success: per pair, whether B succeeded, in the same order.

    Returns:
        The discordant counts, A's success rate minus B's, and the p-value.

    Raises:
        ValueError: the samples are not 1-D, differ in length, are empty or not boolean.
    """
    a, b = _paired_arrays(a_success, b_success)
    a, b = _boolean_array(a, "a_success"), _boolean_array(b, "b_success")
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(b & ~a))
    discordant = only_a + only_b
    tail = sum(math.comb(discordant, k) for k in range(min(only_a, only_b) + 1))
    p_value = min(1.0, 2 * tail / 2 ** discordant)  # exact integer ratio, rounded once
    return McNemar(int(a.size), only_a, only_b, (only_a - only_b) / a.size, p_value)
