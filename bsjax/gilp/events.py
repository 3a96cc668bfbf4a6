"""The per-step event record of a GILP episode (`events.jsonl`, docs/gilp/spec.md §6.1): schema,
validation, episode grouping and JSON-lines I/O.

One row is one executed step of one episode. Every §6.2 metric is computed from these rows alone
(`bsjax.gilp.metrics`), so a metric can be redefined without re-running anything.

Row schema (JSON types; `|null` = may be null):

identity
  method: str            planner name ("Agent-Replan", "GILP", ...). Rows are grouped by it, so a
                         variant run (a τ_low sweep point, a Table 4 backbone) gets its own label.
  bench: str             one of config.BENCHMARKS.
  task: int              task index within its split.
  split: "id" | "ood"    in- or out-of-distribution (val tasks are "id").
  H: int                 oracle horizon of the task (constant over the episode).
  seed: int              episode seed (0..7 in the sim protocol).
  t: int                 0-based step index; an episode's rows have t = 0, 1, ..., T-1 (k = t+1).
the action
  action: str|null       executed action as rendered ("execute(node_3)"); null for a no-op after
                         an unparseable reply.
  valid: bool            the executed action was valid. False for every no-op, so parse-failure
                         no-ops count as invalid actions.
cost
  calls: int             LLM calls made in the step (0 for parametric planners).
  tok_in, tok_out: int   tokens summed over those calls.
imagined deltas
  draft_atoms: [[v, status], ...]      Phase-2 draft atoms (for non-gated methods = committed).
  committed_atoms: [[v, status], ...]  atoms of the committed output (what enters the history).
      v: int node id; status: one of STATUS_NAMES or "unknown". Use `atoms_from_codes` to build
      them from int codes.
  halluc_draft: [0|1, ...]       aligned with draft_atoms: 1 iff the atom is hallucinated
                                 (outside the support of the true transition; metrics.hallucinated).
  halluc_committed: [0|1, ...]   aligned with committed_atoms.
gate (null where a method has no gate)
  cons: float|null       Jaccard consistency of the draft (logged passively by gateless hybrids).
  cons_after: float|null consistency of the revised reply (null without a correction).
  corrected: bool        a correction call was made (Phase 3).
  rho_hat, rho_eff: float|null   backbone risk of the selected action, effective risk after gating.
  risk_fired: bool       a risk-gate call was made (Phase 4).
risk outcome
  rho_star: float        true risk ρ*(G_t, a_t) in [0, 1].
  bad_outcome: bool      invalid ∨ failure branch realised ∨ d*(G_{t+1}) > d*(G_t).
belief (simulator; proxy on the real path)
  live_false_atoms: int|null  |F_t|: false beliefs carried into the step (at its start).
  live_atoms: [[v, status], ...]|null   the live false atoms themselves, at the step's start. PD is
                         computed from them: a committed hallucinated atom (v, s) of step t persists
                         through every later step t' whose `live_atoms` holds [v, s]. The real path
                         writes its window-based proxy here. null where no belief exists
                         (parametric planners): PD is then undefined.
flags
  parse_fail: bool       at least one call of the step returned an unparseable reply.
  fallback: bool         a transport error / timeout was turned into a parse failure.
  done: bool             the episode ended after this step (only the last row, which must be done).
  success: bool          every goal node is COMPLETED after this step (only on a last row).
  dead_end: bool         the episode stopped at d* = UNSOLV.

Optional fields (read when present):
  halluc_calls: [[0|1, ...], ...]  hallucination flags of every atom of every call, one list per
                         call in call order (len = calls); used by HSR_all.
  stochastic_miss: [0|1, ...]  aligned with committed_atoms: the atom matches the success branch but
                         the failure branch was realised (not a hallucination).
  risk_gate_empty: bool  the risk gate fired but the low-risk subset was empty.
  timeout: bool          the episode hit the wall-clock cap (real path).
  wall_s: float          wall (or device) seconds spent on the step.
Other keys are kept and ignored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TypedDict

from bsjax.core.files import read_jsonl, read_run_jsonl
from bsjax.gilp import config

ATOM_STATUSES = (*config.STATUS_NAMES, "unknown")
SPLITS = ("id", "ood")
EVENTS_FILE = "events.jsonl"


class EventError(ValueError):
    """A malformed event row or episode."""


class EventRow(TypedDict, total=False):
    method: str
    bench: str
    task: int
    split: str
    H: int
    seed: int
    t: int
    action: str | None
    valid: bool
    calls: int
    tok_in: int
    tok_out: int
    draft_atoms: list[list]
    committed_atoms: list[list]
    halluc_draft: list[int]
    halluc_committed: list[int]
    cons: float | None
    cons_after: float | None
    corrected: bool
    rho_hat: float | None
    rho_eff: float | None
    risk_fired: bool
    rho_star: float
    bad_outcome: bool
    live_false_atoms: int | None
    live_atoms: list[list] | None
    parse_fail: bool
    fallback: bool
    done: bool
    success: bool
    dead_end: bool
    halluc_calls: list[list[int]]
    stochastic_miss: list[int]
    risk_gate_empty: bool
    timeout: bool
    wall_s: float


# Required fields in canonical (file) order, with their kinds.
FIELDS: dict[str, str] = {
    "method": "str", "bench": "str", "task": "int", "split": "str", "H": "int", "seed": "int",
    "t": "int", "action": "str?", "valid": "bool", "calls": "int", "tok_in": "int",
    "tok_out": "int", "draft_atoms": "atoms", "committed_atoms": "atoms",
    "halluc_draft": "flags", "halluc_committed": "flags", "cons": "unit?", "cons_after": "unit?",
    "corrected": "bool", "rho_hat": "unit?", "rho_eff": "unit?", "risk_fired": "bool",
    "rho_star": "unit", "bad_outcome": "bool", "live_false_atoms": "int?", "parse_fail": "bool",
    "fallback": "bool", "done": "bool", "success": "bool", "dead_end": "bool",
}
OPTIONAL: dict[str, str] = {
    "live_atoms": "atoms?", "halluc_calls": "flaglists", "stochastic_miss": "flags",
    "risk_gate_empty": "bool", "timeout": "bool", "wall_s": "float",
}


def atoms_from_codes(vs: Iterable[int], codes: Iterable[int]) -> list[list]:
    """Atoms [[v, status_name], ...] from node ids and int status codes (-1 = unknown)."""
    return [[int(v), "unknown" if int(c) < 0 else config.STATUS_NAMES[int(c)]]
            for v, c in zip(vs, codes)]


def _where(row: dict) -> str:
    return (f"event row (method={row.get('method')!r}, bench={row.get('bench')!r}, "
            f"task={row.get('task')!r}, seed={row.get('seed')!r}, t={row.get('t')!r})")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x) -> bool:
    return (isinstance(x, (int, float)) and not isinstance(x, bool)) and math.isfinite(x)


def _check(name: str, kind: str, value) -> str | None:
    """An error message, or None if `value` is a well-formed `kind`."""
    if kind.endswith("?"):
        if value is None:
            return None
        kind = kind[:-1]
    if kind == "str":
        return None if isinstance(value, str) else "must be a string"
    if kind == "bool":
        return None if isinstance(value, bool) else "must be true/false"
    if kind == "int":
        return None if _is_int(value) and value >= 0 else "must be a non-negative integer"
    if kind == "float":
        return None if _is_num(value) else "must be a finite number"
    if kind == "unit":
        return None if _is_num(value) and 0.0 <= value <= 1.0 else "must be a number in [0, 1]"
    if kind == "flags":
        ok = isinstance(value, list) and all(_is_int(f) and f in (0, 1) for f in value)
        return None if ok else "must be a list of 0/1"
    if kind == "flaglists":
        ok = isinstance(value, list) and all(_check(name, "flags", f) is None for f in value)
        return None if ok else "must be a list of lists of 0/1"
    if kind == "atoms":
        if not isinstance(value, list):
            return "must be a list of [v, status] pairs"
        for atom in value:
            if not (isinstance(atom, (list, tuple)) and len(atom) == 2 and _is_int(atom[0])
                    and 0 <= atom[0] < config.N_MAX and atom[1] in ATOM_STATUSES):
                return (f"has a malformed atom {atom!r}: expected [v, status] with 0 <= v < "
                        f"{config.N_MAX} and status in {ATOM_STATUSES}")
        return None
    raise AssertionError(kind)


def validate_row(row) -> dict:
    """Checks one event row against the schema above and returns it; raises EventError naming the
    row and the offending field."""
    if not isinstance(row, dict):
        raise EventError(f"event row must be a JSON object, got {type(row).__name__}")
    missing = [name for name in FIELDS if name not in row]
    if missing:
        raise EventError(f"{_where(row)}: missing field(s) {', '.join(missing)}")
    for name, kind in (*FIELDS.items(), *OPTIONAL.items()):
        if name in row:
            problem = _check(name, kind, row[name])
            if problem:
                raise EventError(f"{_where(row)}: field {name!r} {problem} (got {row[name]!r})")
    if row["bench"] not in config.BENCHMARKS:
        raise EventError(f"{_where(row)}: unknown bench {row['bench']!r}; expected one of "
                         f"{config.BENCHMARKS}")
    if row["split"] not in SPLITS:
        raise EventError(f"{_where(row)}: split must be one of {SPLITS}, got {row['split']!r}")
    for atoms, flags in (("draft_atoms", "halluc_draft"), ("committed_atoms", "halluc_committed"),
                         ("committed_atoms", "stochastic_miss")):
        if flags in row and len(row[flags]) != len(row[atoms]):
            raise EventError(f"{_where(row)}: {flags} has {len(row[flags])} flags but {atoms} "
                             f"has {len(row[atoms])} atoms")
    if row["action"] is None and row["valid"]:
        raise EventError(f"{_where(row)}: a no-op (action null) must have valid = false")
    if row["success"] and not row["done"]:
        raise EventError(f"{_where(row)}: success = true requires done = true")
    if row["success"] and row["dead_end"]:
        raise EventError(f"{_where(row)}: success and dead_end cannot both be true")
    if row.get("live_atoms") is not None and row["live_false_atoms"] is not None \
            and len(row["live_atoms"]) != row["live_false_atoms"]:
        raise EventError(f"{_where(row)}: live_false_atoms = {row['live_false_atoms']} but "
                         f"live_atoms lists {len(row['live_atoms'])}")
    if "halluc_calls" in row and len(row["halluc_calls"]) != row["calls"]:
        raise EventError(f"{_where(row)}: halluc_calls has {len(row['halluc_calls'])} lists for "
                         f"{row['calls']} calls")
    return row


def episode_key(row: dict) -> tuple:
    """The key of a row's episode: (method, bench, split, task, seed)."""
    return row["method"], row["bench"], row["split"], row["task"], row["seed"]


def group_episodes(rows: Iterable[dict], allow_partial: bool = False) -> list[list[dict]]:
    """Rows grouped into episodes (first-appearance order), each sorted by t.

    Raises EventError if an episode's steps are not t = 0..T-1 exactly once, if H changes within
    it, if a row other than the last is done, or (unless `allow_partial`) if the last is not.
    """
    episodes: dict[tuple, list[dict]] = {}
    for row in rows:
        episodes.setdefault(episode_key(row), []).append(row)
    out = []
    for key, steps in episodes.items():
        steps.sort(key=lambda r: r["t"])
        ts = [r["t"] for r in steps]
        if ts != list(range(len(steps))):
            raise EventError(f"episode {key}: steps must be t = 0..{len(steps) - 1} once each, "
                             f"got {ts}")
        if len({r["H"] for r in steps}) != 1:
            raise EventError(f"episode {key}: H changes within the episode")
        if any(r["done"] for r in steps[:-1]):
            raise EventError(f"episode {key}: a row before the last has done = true")
        if not allow_partial and not steps[-1]["done"]:
            raise EventError(f"episode {key}: the last row (t={ts[-1]}) is not done; the episode "
                             "is incomplete")
        out.append(steps)
    return out


def _ordered(row: dict) -> dict:
    known = [k for k in (*FIELDS, *OPTIONAL) if k in row]
    extra = sorted(k for k in row if k not in FIELDS and k not in OPTIONAL)
    return {k: row[k] for k in known + extra}


def dumps_row(row: dict) -> str:
    """One validated row as a canonical JSON line (fixed key order, so reruns are byte-equal)."""
    return json.dumps(_ordered(validate_row(row)), separators=(",", ":"), allow_nan=False)


def write_events(path: str | Path, rows: Sequence[dict], append: bool = False) -> Path:
    """Validates `rows` and writes them as JSON lines to `path` (a file, or a directory that gets
    `events.jsonl`). Nothing is written if any row is malformed."""
    path = Path(path)
    if path.is_dir():
        path = path / EVENTS_FILE
    text = "".join(dumps_row(row) + "\n" for row in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w") as f:
        f.write(text)
    return path


def read_events(path: str | Path, validate: bool = True) -> list[dict]:
    """Event rows of a JSON-lines file, or of a run directory's `events.jsonl` (merged over its
    `process-K-of-N` parts). Torn lines from an interrupted write are skipped."""
    path = Path(path)
    if path.is_dir():
        direct = path / EVENTS_FILE
        rows = read_jsonl(direct) if direct.is_file() else read_run_jsonl(path, EVENTS_FILE)
    else:
        rows = read_jsonl(path)
    if validate:
        for row in rows:
            validate_row(row)
    return rows
