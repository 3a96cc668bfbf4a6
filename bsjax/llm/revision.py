"""MRA-LLM's revision request (paper-protocol §9.6): prompt, JSON schema, parsing and guards.

The LLM is asked, only when the symbolic gate is open, to choose one policy revision and return
JSON. Anything unusable — no JSON, an unknown kind, numbers outside the guards — raises
`InvalidReply` with a short reason; the caller falls back to the symbolic preset and counts it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re

from bsjax.runtime.presets import KINDS
from bsjax.runtime.record import MODE_NAMES, POLICY_MODE_NAMES

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


def user_prompt(state: dict, preview: dict) -> str:
    """Pretty-printed JSON with `task`, `state` and the `symbolicPreview`."""
    return json.dumps({"task": TASK, "state": state, "symbolicPreview": preview}, indent=2)


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
