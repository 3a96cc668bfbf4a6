"""MRA-LLM's revision request (the paper's L4): prompts, the per-call JSON Schema, parsing and
guards.

The LLM is asked, only when the symbolic gate is open, to choose one policy revision and return
JSON. Two call shapes:

- `schema` (default): the reply is constrained by `response_schema(preview)`, built per call from
  the values the guards accept — a revision kind, each question budget from 0 up to a cap such
  that the three caps sum to at most 15 (the preview's own budgets always allowed), a salvage
  turn in 1..40 and an exploit threshold on a 0.05 grid in [0, 1] — so every reply the schema
  admits passes the guards. `policyMode` is not asked for: the runtime writes the mode of the
  chosen kind. The user prompt is compact JSON.
- `free`: the published call: the paper's system prompt and pretty-printed JSON, no constraint.

Either way the reply goes through `parse_reply`: anything unusable — no JSON, an unknown kind,
numbers outside the guards — raises `InvalidReply` with a short reason; the caller falls back to
the symbolic preset and counts it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re

from bsjax.battleship.runtime.presets import KINDS
from bsjax.battleship.runtime.record import MODE_NAMES, POLICY_MODE_NAMES

TASK = "Revise reflective policy under low-confidence model mismatch."

SYSTEM_PROMPT = (
    "You choose exactly one reflective policy revision for a Battleship agent. Return JSON only, "
    "with this schema: {\"revisionKind\": one of " + ", ".join(f'"{k}"' for k in KINDS) + ", "
    "\"coarseBudget\": integer, \"localBudget\": integer, \"lateBudget\": integer, "
    "\"salvageStartTurn\": integer, \"exploitThreshold\": number in [0, 1], "
    "\"policyMode\": string}. Omitted numeric fields fall back to the symbolic preview. Budgets "
    "must be >= 0 with a total of at most 15; salvageStartTurn must lie in [1, 40]; "
    "exploitThreshold must lie in [0, 1]."
)


SCHEMA_SYSTEM_PROMPT = (
    "You choose exactly one reflective policy revision for a Battleship agent whose model of the "
    "game has lost confidence. Reply with one JSON object: \"revisionKind\" (one of "
    + ", ".join(f'"{k}"' for k in KINDS) + "), the question budgets \"coarseBudget\", "
    "\"localBudget\" and \"lateBudget\" (integers >= 0, at most 15 in total), "
    "\"salvageStartTurn\" (the turn from which late questions are asked, 1-40) and "
    "\"exploitThreshold\" (the hit probability above which the agent shoots instead of asking, "
    "0-1). The agent's state and the revision its symbolic rule would make (symbolicPreview) "
    "follow."
)
TOTAL_BUDGET = 15
SALVAGE_TURNS = tuple(range(1, 41))
THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(21))
BUDGET_KEYS = ("coarseBudget", "localBudget", "lateBudget")


def budget_caps(budgets) -> tuple[int, int, int]:
    """Per-budget caps for one call: each budget may go from 0 up to its preview value plus an
    equal share of the slack to the total of 15, so that any three values within the caps sum to
    at most 15. Previews over the total (the symbolic path does not check it) are scaled down."""
    budgets = [max(0, int(b)) for b in budgets]
    total = sum(budgets)
    if total > TOTAL_BUDGET:
        caps = [TOTAL_BUDGET * b // total for b in budgets]
    else:
        share, extra = divmod(TOTAL_BUDGET - total, 3)
        caps = [b + share + (i < extra) for i, b in enumerate(budgets)]
    return tuple(caps)


def response_schema(preview: dict) -> dict:
    """The JSON Schema of one revision call's legal replies (see the module docstring)."""
    caps = budget_caps([preview[key] for key in BUDGET_KEYS])
    budgets = {key: {"type": "integer", "enum": list(range(cap + 1))}
               for key, cap in zip(BUDGET_KEYS, caps)}
    properties = {"revisionKind": {"type": "string", "enum": list(KINDS)}, **budgets,
                  "salvageStartTurn": {"type": "integer", "enum": list(SALVAGE_TURNS)},
                  "exploitThreshold": {"type": "number", "enum": list(THRESHOLDS)}}
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


class InvalidReply(ValueError):
    """A reply that cannot be applied; `reason` is one of the counted fallback reasons."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class Proposal:
    """A validated revision: preset index, budgets (coarse, local, late), salvage turn, threshold."""

    kind: int
    budgets: tuple[int, int, int]
    salvage_start_turn: int
    exploit_threshold: float
    mode: str


def user_prompt(state: dict, preview: dict, compact: bool = False) -> str:
    """JSON with `task`, `state` and the `symbolicPreview`: pretty-printed as published, or
    compact (no indentation, no spaces) for the schema call."""
    prompt = {"task": TASK, "state": state, "symbolicPreview": preview}
    return json.dumps(prompt, separators=(",", ":")) if compact else json.dumps(prompt, indent=2)


def host_state(record: dict, tau: float) -> tuple[dict, dict]:
    """The prompt's `state` and `symbolicPreview` from a host copy of one game's record.

    `record` holds plain Python numbers: turn, confidence, EMAs, the decision-time summary, the
    questions left, the policy and the symbolic preview's patched policy (`preview_*`).
    """
    state = {
        "turnNumber": int(record["turn"]),
        "modelConfidence": round(float(record["confidence"]), 4),
        "confidenceThreshold": tau,
        "predictionErrorEMA": round(float(record["pred_error_ema"]), 4),
        "calibrationErrorEMA": round(float(record["calibration_error_ema"]), 4),
        "frontierCount": int(record["frontier_count"]),
        "largestHitClusterSize": int(record["largest_cluster"]),
        "bestHitProb": round(float(record["best_hit_prob"]), 4),
        "bestQuestionValue": round(float(record["best_question_value"]), 4),
        "questionsRemaining": int(record["questions_left"]),
        "policyMode": POLICY_MODE_NAMES[int(record["policy_mode"])],
        "questionFamilyMode": MODE_NAMES[int(record["question_mode"])],
        "needRevision": bool(record["confidence"] < tau),
    }
    kind = int(record["next_kind"])
    preview = {
        "revisionKind": KINDS[kind] if kind >= 0 else "",
        "policyMode": POLICY_MODE_NAMES[kind + 1] if kind >= 0 else "default",
        "coarseBudget": int(record["preview_budgets"][0]),
        "localBudget": int(record["preview_budgets"][1]),
        "lateBudget": int(record["preview_budgets"][2]),
        "salvageStartTurn": int(record["preview_salvage_start_turn"]),
        "exploitThreshold": round(float(record["preview_exploit_threshold"]), 4),
    }
    return state, preview


_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)


def _loads(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        match = _OBJECT.search(text or "")
        if match is None:
            raise InvalidReply("not_json", (text or "")[:60]) from None
        try:
            value = json.loads(match.group(0))
        except json.JSONDecodeError:
            raise InvalidReply("not_json", match.group(0)[:60]) from None
    if not isinstance(value, dict):
        raise InvalidReply("not_json", "not an object")
    return value


def _number(value, fallback, integer: bool):
    if value is None:
        return fallback
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidReply("bad_number", repr(value)[:40])
    try:
        number = float(value)
    except ValueError:
        raise InvalidReply("bad_number", repr(value)[:40]) from None
    if not math.isfinite(number):
        raise InvalidReply("out_of_range", repr(value))
    return int(round(number)) if integer else number


def parse_reply(text: str, preview: dict) -> Proposal:
    """Parse and guard an LLM reply; missing numbers take the symbolic preview's values."""
    reply = _loads(text)
    kind = reply.get("revisionKind")
    if kind not in KINDS:
        raise InvalidReply("unknown_kind", repr(kind)[:40])
    budgets = tuple(_number(reply.get(key), preview[key], integer=True)
                    for key in ("coarseBudget", "localBudget", "lateBudget"))
    salvage = _number(reply.get("salvageStartTurn"), preview["salvageStartTurn"], integer=True)
    threshold = _number(reply.get("exploitThreshold"), preview["exploitThreshold"], integer=False)
    if min(budgets) < 0:
        raise InvalidReply("out_of_range", f"negative budget {budgets}")
    if sum(budgets) > 15:
        raise InvalidReply("budget_over_15", f"total {sum(budgets)}")
    if not 1 <= salvage <= 40:
        raise InvalidReply("out_of_range", f"salvageStartTurn {salvage}")
    if not 0.0 <= threshold <= 1.0:
        raise InvalidReply("out_of_range", f"exploitThreshold {threshold}")
    mode = reply.get("policyMode")
    return Proposal(kind=KINDS.index(kind), budgets=budgets, salvage_start_turn=salvage,
                    exploit_threshold=float(threshold),
                    mode=mode if isinstance(mode, str) else POLICY_MODE_NAMES[KINDS.index(kind) + 1])
