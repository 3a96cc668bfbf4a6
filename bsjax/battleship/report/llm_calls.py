"""What a run's LLM calls did, from its `kind == "llm"` events: counts, fallbacks by reason,
the choices made, cache hits, tokens and latency.

Latency is the backend's seconds per call (`backend_s`; runs from before it was recorded: the
call's wall `latency`) over the calls the backend answered — replies replayed from the call
cache are counted apart, not as fast calls.
"""

from __future__ import annotations

import statistics
from collections import Counter


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


__all__ = ["percentile", "summarize_llm_events"]
