"""A simulated run's records (`SimRun`) and their event rows (docs/gilp/spec.md §6.1, the
`bsjax.gilp.events` schema)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from bsjax.gilp import config, events
from bsjax.gilp.behaviour.records import StepRecord
from bsjax.gilp.llm.prompts import action_str


class SimRun(NamedTuple):
    """The records of one simulated run (host arrays).

    Attributes:
      method, bench: names.
      kind: "llm" or "oracle".
      task: `[E]` int task ids (keys and event rows).
      task_index: `[E]` int position of each episode's task in the `tasks` passed in.
      seed: `[E]` int episode seeds.
      H: `[E]` int oracle horizons.
      records: `StepRecord` of numpy arrays `[E, B_MAX, ...]`.
      seconds: wall time of the run (compile included on a first call).
      chunk_seconds: wall time of each chunk (the first includes the compile).
    """

    method: str
    bench: str
    kind: str
    task: np.ndarray
    task_index: np.ndarray
    seed: np.ndarray
    H: np.ndarray
    records: StepRecord
    seconds: float
    chunk_seconds: tuple[float, ...] = ()


def _atoms(claims: np.ndarray) -> tuple[list[list], np.ndarray]:
    """Atoms [[v, status_name]] of an `[N]` claim vector (ascending v) and their node ids."""
    vs = np.flatnonzero(claims >= 0)
    return [[int(v), config.STATUS_NAMES[int(claims[v])]] for v in vs], vs


def _opt_float(x) -> float | None:
    """A logged float rounded to 6 decimals (None for NaN)."""
    x = float(x)
    return None if np.isnan(x) else round(x, 6)


# Schema keys read straight from the `StepRecord` field of the same name (or the one named),
# converted by the key's kind in `events.SCHEMA`; the others are built below.
_FROM_RECORD = {name: name for name in (
    "valid", "calls", "tok_in", "tok_out", "cons", "cons_after", "corrected", "rho_hat",
    "rho_eff", "risk_fired", "rho_star", "bad_outcome", "parse_fail", "done", "success",
    "dead_end", "risk_gate_empty")}
_KINDS = {**events.FIELDS, **events.OPTIONAL}
_EXTRA = ("halluc_event", "slip", "confidence")
_CONVERT = {"bool": bool, "int": int, "unit": _opt_float, "unit?": _opt_float,
            "float": _opt_float}


def records_to_events(run: SimRun, split: str | Sequence[str] = "id") -> list[dict]:
    """Event rows (spec §6.1, `bsjax.gilp.events` schema) of every executed step of a run.

    Args:
      run: a `SimRun`.
      split: "id" / "ood" for every task, or one entry per task of the run (by `task_index`).
    Returns:
      rows in episode order, then step order; each passes `events.validate_row`.
    """
    rec = run.records
    per_task = [split] * (int(run.task_index.max()) + 1) if isinstance(split, str) else list(split)
    belief = run.kind == "llm"
    rows = []
    for e in range(len(run.task)):
        ident = {"method": run.method, "bench": run.bench, "task": int(run.task[e]),
                 "split": per_task[int(run.task_index[e])], "H": int(run.H[e]),
                 "seed": int(run.seed[e])}
        for t in np.flatnonzero(rec.active[e]):
            noop = bool(rec.noop[e, t])
            draft, dv = _atoms(rec.draft[e, t])
            committed, cv = _atoms(rec.committed[e, t])
            values = dict(ident)
            values.update({key: _CONVERT[_KINDS[key]](getattr(rec, field)[e, t])
                           for key, field in _FROM_RECORD.items()})
            values.update({
                "t": int(rec.t[e, t]),
                "action": None if noop else action_str(run.bench, rec.action[e, t]),
                "draft_atoms": draft, "committed_atoms": committed,
                "halluc_draft": [int(f) for f in rec.halluc_draft[e, t][dv]],
                "halluc_committed": [int(f) for f in rec.halluc_committed[e, t][cv]],
                "live_false_atoms": int(rec.live_false[e, t]) if belief else None,
                "fallback": False,
                "live_atoms": _atoms(rec.live[e, t])[0] if belief else None,
                "stochastic_miss": [int(f) for f in rec.stochastic_miss[e, t][cv]],
                # Simulator-only keys outside the schema (kept by readers, ignored by metrics).
                "halluc_event": bool(rec.halluc_event[e, t]), "slip": bool(rec.slip[e, t]),
                "confidence": _opt_float(rec.confidence[e, t]),
            })
            # In the schema's order, then the extra keys (as the files are written).
            rows.append({key: values[key] for key in (*_KINDS, *_EXTRA) if key in values})
    return rows


__all__ = ["SimRun", "records_to_events"]
