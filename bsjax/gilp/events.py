"""The per-step event record of a GILP episode (`events.jsonl`, docs/gilp/spec.md §6.1): schema,
validation, episode grouping and JSON-lines I/O.

One row is one executed step of one episode. Every §6.2 metric is computed from these rows alone
(`bsjax.gilp.metrics`), so a metric can be redefined without re-running anything.

The schema is declared once, in `SCHEMA` (one `Field` per key: its kind, its group, its meaning,
whether a row must have it): the validation (`validate_row`), the canonical key order of the
files and the table of docs/gilp/events.md (`schema_table`, checked by the tests) all follow from
it. Keys outside the schema are kept and ignored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from bsjax.core.files import read_jsonl, read_run_jsonl
from bsjax.gilp import config

ATOM_STATUSES = (*config.STATUS_NAMES, "unknown")
SPLITS = ("id", "ood")
EVENTS_FILE = "events.jsonl"


class EventError(ValueError):
    """A malformed event row or episode."""


class Field(NamedTuple):
    """One key of an event row.

    Attributes:
      name: the key.
      kind: what `validate_row` accepts: `str`, `bool`, `int` (non-negative), `float` (finite),
        `unit` (a number in [0, 1]), `atoms` (`[[v, status], ...]`), `flags` (`[0|1, ...]`),
        `flaglists` (a list of `flags`); a trailing `?` also accepts null.
      group: the part of the step it describes.
      doc: its meaning.
      required: every row has it (else it is read when present).
    """

    name: str
    kind: str
    group: str
    doc: str
    required: bool = True


SCHEMA: tuple[Field, ...] = (
    Field("method", "str", "identity", "planner name (\"Agent-Replan\", \"GILP\", ...); rows are "
          "grouped by it, so a variant run (a τ_low sweep point, a Table 4 backbone) gets its "
          "own label"),
    Field("bench", "str", "identity", "one of `config.BENCHMARKS`"),
    Field("task", "int", "identity", "task index within its split"),
    Field("split", "str", "identity", "`id` or `ood`: in or out of distribution (val tasks are "
          "`id`)"),
    Field("H", "int", "identity", "oracle horizon of the task (constant over the episode)"),
    Field("seed", "int", "identity", "episode seed (0..7 in the sim protocol)"),
    Field("t", "int", "identity", "0-based step index; an episode's rows have t = 0, 1, ..., "
          "T-1 (k = t+1)"),
    Field("action", "str?", "the action", "executed action as rendered (`execute(node_3)`); null "
          "for a no-op after an unparseable reply"),
    Field("valid", "bool", "the action", "the executed action was valid; false for every no-op, "
          "so parse-failure no-ops count as invalid actions"),
    Field("calls", "int", "cost", "LLM calls made in the step (0 for parametric planners)"),
    Field("tok_in", "int", "cost", "input tokens summed over those calls"),
    Field("tok_out", "int", "cost", "output tokens summed over those calls"),
    Field("draft_atoms", "atoms", "imagined deltas", "Phase-2 draft atoms `[v, status]` (status "
          "a `STATUS_NAMES` entry or `unknown`; `atoms_from_codes` builds them); for non-gated "
          "methods the committed atoms"),
    Field("committed_atoms", "atoms", "imagined deltas", "atoms of the committed output (what "
          "enters the history)"),
    Field("halluc_draft", "flags", "imagined deltas", "aligned with `draft_atoms`: 1 iff the atom "
          "is hallucinated (outside the support of the true transition; `metrics.hallucinated`)"),
    Field("halluc_committed", "flags", "imagined deltas", "aligned with `committed_atoms`"),
    Field("cons", "unit?", "gate", "Jaccard consistency of the draft (logged passively by "
          "gateless hybrids); null without a backbone"),
    Field("cons_after", "unit?", "gate", "consistency of the revised reply (null without a "
          "correction)"),
    Field("corrected", "bool", "gate", "a correction call was made (Phase 3)"),
    Field("rho_hat", "unit?", "gate", "backbone risk of the selected action"),
    Field("rho_eff", "unit?", "gate", "effective risk after gating"),
    Field("risk_fired", "bool", "gate", "a risk-gate call was made (Phase 4)"),
    Field("rho_star", "unit", "risk outcome", "true risk ρ*(G_t, a_t)"),
    Field("bad_outcome", "bool", "risk outcome", "invalid ∨ failure branch realised ∨ "
          "d*(G_{t+1}) > d*(G_t)"),
    Field("live_false_atoms", "int?", "belief", "\\|F_t\\|: false beliefs carried into the step "
          "(at its start); null where no belief exists (parametric planners)"),
    Field("parse_fail", "bool", "flags", "at least one call of the step returned an unparseable "
          "reply"),
    Field("fallback", "bool", "flags", "a transport error or timeout was turned into a parse "
          "failure"),
    Field("done", "bool", "flags", "the episode ended after this step (only the last row, which "
          "must be done)"),
    Field("success", "bool", "flags", "every goal node is COMPLETED after this step (only on a "
          "last row)"),
    Field("dead_end", "bool", "flags", "the episode stopped at d* = UNSOLV"),
    Field("live_atoms", "atoms?", "belief", "the live false atoms themselves, at the step's "
          "start: a committed hallucinated atom of step t persists through every later step whose "
          "`live_atoms` holds it (PD); the real path writes its window-based proxy; null where no "
          "belief exists (PD is then undefined)", required=False),
    Field("halluc_calls", "flaglists", "optional", "hallucination flags of every atom of every "
          "call, one list per call in call order (len = calls); used by HSR_all", required=False),
    Field("stochastic_miss", "flags", "optional", "aligned with `committed_atoms`: the atom "
          "matches the success branch but the failure branch was realised (not a hallucination)",
          required=False),
    Field("risk_gate_empty", "bool", "optional", "the risk gate fired but the low-risk subset was "
          "empty", required=False),
    Field("timeout", "bool", "optional", "the episode hit the wall-clock cap (real path)",
          required=False),
    Field("wall_s", "float", "optional", "wall (or device) seconds spent on the step",
          required=False),
)
# Required fields in canonical (file) order, then the optional ones, with their kinds.
FIELDS: dict[str, str] = {f.name: f.kind for f in SCHEMA if f.required}
OPTIONAL: dict[str, str] = {f.name: f.kind for f in SCHEMA if not f.required}

_JSON_TYPES = {"str": "string", "bool": "bool", "int": "int ≥ 0", "float": "number",
               "unit": "number in [0, 1]", "atoms": "`[[v, status], ...]`",
               "flags": "`[0\\|1, ...]`", "flaglists": "`[[0\\|1, ...], ...]`"}


def schema_table() -> str:
    """The schema as a Markdown table (docs/gilp/events.md holds it; a test keeps them equal)."""
    lines = ["| key | JSON type | group | required | meaning |", "|---|---|---|---|---|"]
    for f in SCHEMA:
        kind = _JSON_TYPES[f.kind.rstrip("?")] + (" or null" if f.kind.endswith("?") else "")
        lines.append(f"| `{f.name}` | {kind} | {f.group} | {'yes' if f.required else 'no'} | "
                     f"{f.doc} |")
    return "\n".join(lines) + "\n"


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
