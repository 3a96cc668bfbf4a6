"""Summaries of a run's game rows and LLM events: what `summary.json`, the tables and
`bsjax lens` report.

`summarize` aggregates game rows (F1, wins with a Wilson interval, shots, questions, LLM calls).
`compare_paired` compares two runs game by game: the rows of a study share boards and seeds, so
a game of one row and the same game of another are a pair.
`summarize_llm_events` says what a run's LLM calls did, from its `kind == "llm"` events: counts,
fallbacks by reason, the choices made, cache hits, tokens and latency. Latency is the backend's
seconds per call (`backend_s`; runs from before it was recorded: the call's wall `latency`) over
the calls the backend answered — replies replayed from the call cache are counted apart, not as
fast calls.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from bsjax.core.stats import mcnemar_exact, paired_bootstrap, wilson_interval


def f1_by_board(rows: Iterable[Mapping]) -> dict[str, list[float]]:
    """Board id -> the F1 of each of its games, in row order."""
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


def paired_games(rows: Iterable[Mapping],
                 baseline_rows: Iterable[Mapping]) -> list[tuple[Mapping, Mapping]]:
    """(row game, baseline game) for every game both played, a game being its board and seed
    index; in the order of `rows`. Games only one of them played are left out."""
    baseline = {(r["board"], r["seed"]): r for r in baseline_rows}
    return [(r, baseline[(r["board"], r["seed"])]) for r in rows
            if (r["board"], r["seed"]) in baseline]


def compare_paired(rows: Iterable[Mapping], baseline_rows: Iterable[Mapping]) -> dict:
    """A run against a baseline run over the games both played.

    Returns `n_paired`; the mean F1 difference (row − baseline) with a 95% paired bootstrap
    interval; the games only the row completed and only the baseline completed, the difference in
    completion rate and McNemar's exact p-value. Every value but `n_paired` is None when the two
    share no game.
    """
    pairs = paired_games(rows, baseline_rows)
    out = {"n_paired": len(pairs), "delta_f1": None, "delta_f1_low": None,
           "delta_f1_high": None, "only_row_completed": None, "only_baseline_completed": None,
           "delta_completion": None, "mcnemar_p": None}
    if not pairs:
        return out
    f1 = paired_bootstrap([float(r["f1"]) for r, _ in pairs], [float(b["f1"]) for _, b in pairs])
    test = mcnemar_exact([bool(r["won"]) for r, _ in pairs], [bool(b["won"]) for _, b in pairs])
    out.update(delta_f1=f1.mean, delta_f1_low=f1.low, delta_f1_high=f1.high,
               only_row_completed=test.only_a, only_baseline_completed=test.only_b,
               delta_completion=test.difference, mcnemar_p=test.p_value)
    return out


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _choice(event: dict) -> str:
    """A valid call's decision: the revision kind, or the captain's action kind."""
    detail = str(event.get("detail", ""))
    return detail.split(" ", 1)[0] if event.get("source") == "captain" else detail


def summarize_llm_events(events: list[dict]) -> dict:
    """Summary of LLM events (dicts as written to events.jsonl)."""
    calls = [e for e in events if e.get("kind") == "llm"]
    asked = [e for e in calls if not e.get("cached", False)]
    seconds = [float(e.get("backend_s", e.get("latency", 0.0))) for e in asked]
    fallbacks = [e for e in calls if not e.get("ok")]
    return {
        "llm_events": len(calls),
        "llm_cached": len(calls) - len(asked),
        "llm_fallback_rate": len(fallbacks) / len(calls) if calls else 0.0,
        "fallback_reasons": dict(Counter(e.get("reason", "?") for e in fallbacks)),
        "llm_choices": dict(Counter(_choice(e) for e in calls if e.get("ok"))),
        "llm_tokens_in": sum(int(e.get("tokens_in", 0)) for e in calls),
        "llm_tokens_out": sum(int(e.get("tokens_out", 0)) for e in calls),
        "llm_latency_mean": statistics.fmean(seconds) if seconds else 0.0,
        "llm_latency_median": percentile(seconds, 0.5),
        "llm_latency_p95": percentile(seconds, 0.95),
        "llm_backend_seconds": sum(seconds),
    }


__all__ = ["compare_paired", "paired_games", "percentile", "summarize_llm_events"]
