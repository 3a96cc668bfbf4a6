"""GILP prompts for the real-LLM path (docs/gilp/spec.md §4.5, §5.1, App. A): system prompt, the
agent-only and GILP/Hybrid user prompts, the skeleton block, the correction, re-parse and risk-gate
prompts, and the response format (text and JSON Schema).

Everything is host-side string building from host copies (a graph is a dict of numpy arrays, see
`gilp_serialise`). Each LLM call is one system + one user message; the history lives in the
"Recent Steps" block (W = 3 lines).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from bsjax.gilp import config
from bsjax.gilp.llm.serialise import node_name, serialise

HISTORY_WINDOW = 3
UNKNOWN = 5  # status code of an `unknown` claim (see gilp_parse)

SYSTEM_PROMPT = (
    "You are the planning agent for a multi-step task whose world state is a typed graph. Consider "
    "how the candidate actions would change the current state and choose the one action that moves "
    "the task closest to its goal. Reply with a single JSON object and no other text.\n"
    "Rules:\n"
    "- Claim a state change only when the current state, the chosen action, or the backbone "
    "skeleton (if one is given) supports it.\n"
    "- Never treat a node as completed without evidence, for example satisfied dependencies or a "
    "met precondition.\n"
    "- If the skeleton flags an action as high-risk, prefer another one unless you can justify it."
)

RESPONSE_FORMAT = (
    "Return JSON with exactly these keys:\n"
    '"selected_action": one candidate written as in the list, e.g. "execute(node_3)";\n'
    '"imagined_next_state": {"changed_nodes": [ids], "node_<id>_new_status": "<status>" for each '
    "changed id};\n"
    '"reasoning": one or two sentences;\n'
    '"confidence": a number between 0 and 1.\n'
    "Statuses: pending, active, completed, failed, skipped."
)

def response_schema(candidates: Sequence[str] | None = None,
                    node_ids: Sequence[int] | None = None) -> dict:
    """The reply's JSON Schema (structured outputs: Ollama `format=`, a llama.cpp grammar).

    Without arguments it fixes only the keys and types (`RESPONSE_SCHEMA`). With this call's
    `candidates` the action must be one of them (a small model otherwise invents actions), and
    with the graph's real `node_ids` the imagined state may name only those nodes, each once,
    through `changed_nodes` and `node_<id>_new_status` keys.
    """
    action: dict = {"type": "string"}
    if candidates:  # (an empty enum would make an empty grammar rule)
        action = {"type": "string", "enum": list(dict.fromkeys(candidates))}
    if node_ids is None:
        # Node ids are slots 0..N_MAX-1 and a step changes at most every node: bounding the
        # list keeps a grammar-constrained small model from counting on until max_tokens.
        state = {"type": "object", "required": ["changed_nodes"],
                 "properties": {"changed_nodes": {
                     "type": "array", "maxItems": config.N_MAX,
                     "items": {"type": "integer", "minimum": 0, "maximum": config.N_MAX - 1}}},
                 "additionalProperties": {"type": "string", "enum": list(config.STATUS_NAMES)}}
    else:
        ids = [int(v) for v in node_ids]
        status = {"type": "string", "enum": list(config.STATUS_NAMES)}
        state = {"type": "object", "required": ["changed_nodes"],
                 "properties": {"changed_nodes": {"type": "array", "maxItems": len(ids),
                                                  "items": {"type": "integer", "enum": ids}},
                                **{f"node_{v}_new_status": status for v in ids}},
                 "additionalProperties": False}
    return {
        "type": "object",
        "required": ["selected_action", "imagined_next_state", "reasoning", "confidence"],
        "properties": {
            "selected_action": action,
            "imagined_next_state": state,
            "reasoning": {"type": "string", "maxLength": 300},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
    }


RESPONSE_SCHEMA = response_schema()

SKELETON_HEADER = (
    "## Parametric World-Model Skeleton\n"
    "These predictions come from a small trained world model. Use them to ground the state changes "
    "you imagine, and do not contradict them without explicit reasoning from the state."
)

# Which skeleton fields each variant renders (§4.5); "delta" covers the predicted delta and the
# affected entities.
FIELDS = ("p_valid", "value", "risk", "delta")
VARIANT_FIELDS = {"validity": ("p_valid",), "delta": ("delta",), "risk": ("risk",),
                  "value": ("value",), "full": FIELDS}
METHOD_VARIANT = {"Hybrid-ValidityOnly": "validity", "Hybrid-DeltaOnly": "delta",
                  "Hybrid-RiskOnly": "risk", "Hybrid-ValueOnly": "value", "Hybrid-Full": "full"}

Atom = tuple[int, int]  # (node id, status code; UNKNOWN for an unspecified status)


def status_name(code: int) -> str:
    return config.STATUS_NAMES[code] if 0 <= int(code) < config.N_STATUS else "unknown"


def action_str(bench: str, act) -> str:
    """`execute(node_3)` or `assign(node_2,node_7)` from an action triple `(kind, i, j)`."""
    kind, i, j = (int(x) for x in act)
    name = config.ACTION_KINDS[bench][kind]
    return f"{name}({node_name(i)},{node_name(j)})" if j >= 0 else f"{name}({node_name(i)})"


def candidate_list(bench: str, acts, amask) -> tuple[list[str], list[int]]:
    """The prompt's candidate strings (real slots in slot order) and the slot of each."""
    slots = [int(a) for a in np.flatnonzero(np.asarray(amask, bool))]
    return [action_str(bench, np.asarray(acts)[a]) for a in slots], slots


def atoms_str(atoms: Sequence[Atom]) -> str:
    """`node_3: completed, node_7: active`, or `no change`."""
    return ", ".join(f"{node_name(v)}: {status_name(s)}" for v, s in atoms) or "no change"


def changes(status, next_status, nmask=None) -> list[Atom]:
    """The atoms `(v, next status)` of every real node whose status changes."""
    status, next_status = np.asarray(status), np.asarray(next_status)
    keep = status != next_status
    if nmask is not None:
        keep &= np.asarray(nmask, bool)
    return [(int(v), int(next_status[v])) for v in np.flatnonzero(keep)]


def history_line(t: int, action: str | None, valid: bool, atoms: Sequence[Atom]) -> str:
    """`t=4: execute(node_3) -> valid; you predicted node_3: completed` (a committed step)."""
    shown = action if action is not None else "no action (unparseable reply)"
    return (f"t={int(t)}: {shown} -> {'valid' if valid else 'invalid'}; you predicted "
            f"{atoms_str(atoms)}")


def goal_progress(graph: dict) -> tuple[int, int]:
    """(goal nodes COMPLETED, goal nodes)."""
    goal = np.asarray(graph["goal"], bool) & np.asarray(graph["nmask"], bool)
    return int(np.sum(goal & (np.asarray(graph["status"]) == config.COMPLETED))), int(goal.sum())


class SkeletonRow(NamedTuple):
    """One rendered row of `B_t`: action string, backbone scores, decoded delta as
    `(v, from, to)` triples, affected entity ids and the GOAL flag."""

    action: str
    p_valid: float
    value: float
    risk: float
    delta: tuple[tuple[int, int, int], ...]
    affected: tuple[int, ...]
    affected_goal: bool


def skeleton_from_arrays(graph: dict, bench: str, acts, rows, p_valid, value, risk, pred_status,
                         affected, affected_goal) -> tuple[SkeletonRow, ...]:
    """Rows of `B_t` from host arrays.

    Args:
      rows: `[2k]` candidate slots from `gate.skeleton_rows` (-1 padding is skipped).
      p_valid, value, risk: `[A]` backbone outputs.
      pred_status: `[A, N]` decoded next statuses per candidate.
      affected, affected_goal: `[A, N]` bool and `[A]` bool from `gate.affected_entities`.
    """
    status, nmask = np.asarray(graph["status"]), np.asarray(graph["nmask"], bool)
    out = []
    for a in (int(r) for r in np.asarray(rows) if int(r) >= 0):
        nxt = np.asarray(pred_status[a])
        delta = tuple((v, int(status[v]), int(nxt[v])) for v, _ in changes(status, nxt, nmask))
        out.append(SkeletonRow(action_str(bench, np.asarray(acts)[a]), float(p_valid[a]),
                               float(value[a]), float(risk[a]), delta,
                               tuple(int(v) for v in np.flatnonzero(np.asarray(affected[a]) & nmask)),
                               bool(affected_goal[a])))
    return tuple(out)


def render_skeleton(rows: Sequence[SkeletonRow], fields: str = "full", rho_th: float = 0.65) -> str:
    """The skeleton block with the fields of one variant (`VARIANT_FIELDS`)."""
    shown = VARIANT_FIELDS[fields]
    lines = [SKELETON_HEADER]
    for row in rows:
        parts = []
        if "p_valid" in shown:
            parts.append(f"p_valid = {row.p_valid:.2f}")
        if "value" in shown:
            parts.append(f"value = {row.value:.2f}")
        if "risk" in shown:
            parts.append(f"risk = {row.risk:.2f}")
        head = f"{row.action}:" + (" " + " | ".join(parts) if parts else "")
        if "risk" in shown and row.risk > rho_th:
            head += " [HIGH RISK]"
        lines.append(head)
        if "delta" in shown:
            delta = ", ".join(f"{node_name(v)}: {status_name(s)}→{status_name(t)}"
                              for v, s, t in row.delta) or "no change"
            entities = [node_name(v) for v in row.affected] + (["GOAL"] if row.affected_goal else [])
            lines.append(f"  predicted delta: {delta}")
            lines.append(f"  affected entities: [{', '.join(entities)}]")
    return "\n".join(lines)


@dataclasses.dataclass
class PromptContext:
    """What one step's prompts are built from (host copies only).

    Attributes:
      graph: the observed state as a dict of numpy arrays.
      bench: benchmark name.
      acts, amask: `[A, 3]` candidate triples and `[A]` mask.
      history: rendered `history_line`s, oldest first; the last `HISTORY_WINDOW` are shown.
      skeleton: rows of `B_t` (None for the agent-only prompt).
      fields: skeleton variant (`VARIANT_FIELDS` key).
      fmt: serialisation format.
      rho_th: risk threshold of the [HIGH RISK] tag.
    """

    graph: dict
    bench: str
    acts: np.ndarray
    amask: np.ndarray
    history: Sequence[str] = ()
    skeleton: Sequence[SkeletonRow] | None = None
    fields: str = "full"
    fmt: str = "json_table"
    rho_th: float = 0.65

    def candidates(self) -> tuple[list[str], list[int]]:
        return candidate_list(self.bench, self.acts, self.amask)


def _sections(ctx: PromptContext, skeleton: bool, with_candidates: bool = True) -> list[str]:
    x, n = goal_progress(ctx.graph)
    out = ["## Current World State\n" + serialise(ctx.graph, ctx.fmt),
           f"## Goal\nComplete all nodes marked [GOAL]. Current progress: {x}/{n} completed."]
    if skeleton and ctx.skeleton is not None:
        out.append(render_skeleton(ctx.skeleton, ctx.fields, ctx.rho_th))
    recent = list(ctx.history)[-HISTORY_WINDOW:]
    out.append("## Recent Steps\n" + ("\n".join(recent) if recent else "(none yet)"))
    if with_candidates:
        names, _ = ctx.candidates()
        out.append("## Candidate Actions\nYou must select exactly one:\n"
                   + "\n".join(f"{i}: {a}" for i, a in enumerate(names)))
    return out


def _join(sections: list[str]) -> str:
    return "\n".join(sections)


def agent_prompt(ctx: PromptContext) -> str:
    """The agent-only user prompt (App. A.2): state, goal, recent steps, candidates, format."""
    return _join(_sections(ctx, skeleton=False)
                 + ["## Required Response Format\n" + RESPONSE_FORMAT])


def gilp_prompt(ctx: PromptContext) -> str:
    """The GILP / Hybrid user prompt (App. A.3): the agent prompt with the skeleton block between
    Goal and Recent Steps."""
    return _join(_sections(ctx, skeleton=True) + ["## Required Response Format\n" + RESPONSE_FORMAT])


def user_prompt(ctx: PromptContext) -> str:
    """`gilp_prompt` when the context carries a skeleton, else `agent_prompt`."""
    return gilp_prompt(ctx) if ctx.skeleton is not None else agent_prompt(ctx)


def correction_block(action: str, imagined: Sequence[Atom], backbone: Sequence[Atom],
                     discrepancy_lines: Sequence[str], explain_lines: Sequence[str] = ()) -> str:
    """The Phase-3b block (App. A.4). With no discrepancy and no explanation (GILP-tau0 on an
    agreeing draft) it asks the agent to confirm or revise instead."""
    found = [f"- {line}" for line in list(discrepancy_lines) + list(explain_lines)]
    if found:
        head = ("## Backbone Consistency Check FAILED\n"
                "The state transition you imagined disagrees with the parametric world model. "
                "Please revise it.")
        tail = ("Revise selected_action and/or imagined_next_state so they agree with the backbone. "
                "If you think the backbone is wrong, give explicit reasoning from the state.")
    else:
        head = ("## Backbone Consistency Check\n"
                "The parametric world model agrees with the set of nodes you expect to change.")
        tail = "Confirm your reply or revise selected_action and/or imagined_next_state."
    body = [head, f"Previous action: {action}", f"Your imagined next state: {atoms_str(imagined)}",
            f"Backbone prediction: {atoms_str(backbone)}"]
    if found:
        body += ["Discrepancies:"] + found
    return "\n".join(body + [tail])


def correction_prompt(ctx: PromptContext, action: str, imagined: Sequence[Atom],
                      backbone: Sequence[Atom], discrepancy_lines: Sequence[str],
                      explain_lines: Sequence[str] = ()) -> str:
    """The correction call's user message: the GILP prompt's sections, the correction block and
    the revised response format."""
    return _join(_sections(ctx, skeleton=True)
                 + [correction_block(action, imagined, backbone, discrepancy_lines, explain_lines),
                    "## Revised Response Format\n" + RESPONSE_FORMAT])


def reparse_prompt(ctx: PromptContext) -> str:
    """GILP's re-prompt after an unparseable draft (§4.6 step 2; spends the correction budget)."""
    return _join(_sections(ctx, skeleton=True)
                 + ["## Invalid Reply\nYour previous reply was not valid JSON with a selected_action "
                    "from the candidate list. Reply again with a single JSON object.",
                    "## Required Response Format\n" + RESPONSE_FORMAT])


def risk_block(action: str, rho: float, explain_lines: Sequence[str],
               alternatives: Sequence[tuple[str, float]]) -> str:
    """The Phase-4 block (App. A.5); `alternatives` are `L_t` as (action string, ρ̂)."""
    factors = "; ".join(explain_lines) or ("the backbone predicts this action is invalid or likely "
                                           "to fail")
    lines = ["## High-Risk Action Warning",
             "The parametric world model predicts a high failure risk for your selected action:",
             f"- Selected action: {action} --- predicted risk = {rho:.2f}",
             f"- Risk factors: {factors}",
             "Choose one of these lower-risk alternatives instead:"]
    lines += [f"{i}: {a} [risk = {r:.2f}]" for i, (a, r) in enumerate(alternatives)]
    return "\n".join(lines)


def risk_prompt(ctx: PromptContext, action: str, rho: float, explain_lines: Sequence[str],
                alternatives: Sequence[tuple[str, float]]) -> str:
    """The risk-gate call's user message: state, goal, skeleton and recent steps, then the warning
    with only `L_t` (indexed from 0 in that list, which is what a bare index refers to)."""
    return _join(_sections(ctx, skeleton=True, with_candidates=False)
                 + [risk_block(action, rho, explain_lines, alternatives),
                    "## Response Format\n" + RESPONSE_FORMAT])
