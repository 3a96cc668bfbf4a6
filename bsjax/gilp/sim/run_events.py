"""A simulated run's records (`SimRun`) and their event rows (docs/gilp/spec.md §6.1, the
`bsjax.gilp.events` schema)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from bsjax.gilp import config
from bsjax.gilp.llm.prompts import action_str
from bsjax.gilp.sim.records import StepRecord


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
            row = dict(ident)
            row.update({
                "t": int(rec.t[e, t]),
                "action": None if noop else action_str(run.bench, rec.action[e, t]),
                "valid": bool(rec.valid[e, t]), "calls": int(rec.calls[e, t]),
                "tok_in": int(rec.tok_in[e, t]), "tok_out": int(rec.tok_out[e, t]),
                "draft_atoms": draft, "committed_atoms": committed,
                "halluc_draft": [int(f) for f in rec.halluc_draft[e, t][dv]],
                "halluc_committed": [int(f) for f in rec.halluc_committed[e, t][cv]],
                "cons": _opt_float(rec.cons[e, t]), "cons_after": _opt_float(rec.cons_after[e, t]),
                "corrected": bool(rec.corrected[e, t]), "rho_hat": _opt_float(rec.rho_hat[e, t]),
                "rho_eff": _opt_float(rec.rho_eff[e, t]), "risk_fired": bool(rec.risk_fired[e, t]),
                "rho_star": _opt_float(rec.rho_star[e, t]), "bad_outcome": bool(rec.bad_outcome[e, t]),
                "live_false_atoms": int(rec.live_false[e, t]) if belief else None,
                "parse_fail": bool(rec.parse_fail[e, t]), "fallback": False,
                "done": bool(rec.done[e, t]), "success": bool(rec.success[e, t]),
                "dead_end": bool(rec.dead_end[e, t]),
                "live_atoms": _atoms(rec.live[e, t])[0] if belief else None,
                "stochastic_miss": [int(f) for f in rec.stochastic_miss[e, t][cv]],
                "risk_gate_empty": bool(rec.risk_gate_empty[e, t]),
                "halluc_event": bool(rec.halluc_event[e, t]), "slip": bool(rec.slip[e, t]),
                "confidence": _opt_float(rec.confidence[e, t]),
            })
            rows.append(row)
    return rows


__all__ = ["SimRun", "records_to_events"]
