"""The tolerant parser of GILP replies (docs/gilp/spec.md §5.1 "Parsing").

`parse_reply(text, candidates, status)` never raises. It finds a JSON object (whole reply, first
fenced block, or first `{` to last `}`), reads `selected_action` as an action string or a bare
candidate index, and collects the imagined atoms from `changed_nodes`, `node_<id>_new_status` keys
and a nested `{"new_status": {id: status}}` map.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from bsjax.gilp import config

UNKNOWN = 5  # status code of an atom whose status is missing or unreadable
STATUS_CODES = {name: i for i, name in enumerate(config.STATUS_NAMES)} | {"unknown": UNKNOWN}
SYNONYMS = {
    "done": "completed", "complete": "completed", "finished": "completed",
    "running": "active", "in_progress": "active", "started": "active",
    "error": "failed", "skip": "skipped", "waiting": "pending",
}
DEFAULT_CONFIDENCE = 0.5

_ACTION = re.compile(r"^\s*(\w+)\(\s*node_?(\d+)\s*(?:,\s*node_?(\d+)\s*)?\)\s*$", re.IGNORECASE)
_INDEX = re.compile(r"^\s*\d+\s*$")
_LIST_PREFIX = re.compile(r"^\s*\d+\s*[:.)]\s*(?=\w+\()")  # "2: execute(node_3)" as listed
_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.DOTALL)
_NODE = re.compile(r"^\s*(?:node_?)?(\d+)\s*$", re.IGNORECASE)
_STATUS_KEY = re.compile(r"^\s*node_?(\d+)_new_status\s*$", re.IGNORECASE)
_NODE_KEY = re.compile(r"^\s*node_?(\d+)\s*$", re.IGNORECASE)


class Reply(NamedTuple):
    """A parsed reply.

    Attributes:
      action_index: index into the candidate list given to the parser, or None (PARSE_FAIL).
      atoms: `[(v, status code)]` by node id; UNKNOWN (5) for a change without a readable status;
        claims equal to the current status are dropped.
      confidence: in [0, 1]; 0.5 when missing or unreadable.
      parse_ok: an object was found and the action is a candidate.
      reason: `ok`, `not_json`, `no_action`, `bad_action` or `not_candidate`.
      dropped: atoms dropped because their node id is not a real node.
    """

    action_index: int | None
    atoms: list[tuple[int, int]]
    confidence: float
    parse_ok: bool
    reason: str
    dropped: int = 0


def _try_object(text: str):
    try:  # strict=False: a raw newline inside a string (small models write them) is kept
        value = json.loads(text, strict=False)
    except (ValueError, RecursionError, TypeError):
        return None
    return value if isinstance(value, dict) else None


def load_object(text: str) -> dict | None:
    """The reply's JSON object: the whole text, else the first fenced block, else the span from
    the first `{` to the last `}`; None if none parses."""
    text = text if isinstance(text, str) else ""
    value = _try_object(text)
    if value is None:
        fence = _FENCE.search(text)
        if fence is not None:
            value = _try_object(fence.group(1))
    if value is None:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:
            value = _try_object(text[start:end + 1])
    return value


def canonical_action(text: str) -> str | None:
    """`execute(node_3)` from a tolerant spelling (`Execute( node3 )`), or None."""
    text = _LIST_PREFIX.sub("", text.strip().strip("`'\""))
    match = _ACTION.match(text)
    if match is None:
        return None
    name, i, j = match.group(1).lower(), int(match.group(2)), match.group(3)
    return f"{name}(node_{i},node_{int(j)})" if j is not None else f"{name}(node_{i})"


def parse_action(value, candidates: Sequence[str]) -> tuple[int | None, str]:
    """Index of `selected_action` in `candidates` and a reason (`ok` when found)."""
    if value is None:
        return None, "no_action"
    if isinstance(value, bool):
        return None, "bad_action"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        index = int(value)
        return (index, "ok") if 0 <= index < len(candidates) else (None, "not_candidate")
    if not isinstance(value, str):
        return None, "bad_action"
    if _INDEX.match(value):
        return parse_action(int(value), candidates)
    action = canonical_action(value)
    if action is None:
        return None, "bad_action"
    lookup = {canonical_action(c) or c: i for i, c in reversed(list(enumerate(candidates)))}
    return (lookup[action], "ok") if action in lookup else (None, "not_candidate")


def parse_status(value) -> int:
    """A status code from a (synonym) name; UNKNOWN for anything unreadable."""
    if not isinstance(value, str):
        return UNKNOWN
    key = re.sub(r"[\s\-]+", "_", value.strip().lower())
    key = SYNONYMS.get(key, key)
    return STATUS_CODES.get(key, UNKNOWN)


def _node_id(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        match = _NODE.match(value)
        return int(match.group(1)) if match else None
    return None


def collect_atoms(state) -> dict[int, int]:
    """`{v: status code}` claimed by an `imagined_next_state` value (a dict, or a bare list of
    changed nodes). Explicit statuses win over bare `changed_nodes` entries."""
    if isinstance(state, list):
        state = {"changed_nodes": state}
    if not isinstance(state, dict):
        return {}
    claims: dict[int, int] = {}
    explicit: dict[int, int] = {}
    changed = state.get("changed_nodes")
    for item in changed if isinstance(changed, list) else [changed] if changed is not None else []:
        if isinstance(item, dict):  # {"id": 3, "new_status": "completed"}
            v = _node_id(item.get("id", item.get("node", item.get("node_id"))))
            status = item.get("new_status", item.get("status"))
            if v is not None and status is not None:
                explicit[v] = parse_status(status)
            elif v is not None:
                claims.setdefault(v, UNKNOWN)
        else:
            v = _node_id(item)
            if v is not None:
                claims.setdefault(v, UNKNOWN)
    for key, status in state.items():
        if not isinstance(key, str):
            continue
        match = _STATUS_KEY.match(key) or _NODE_KEY.match(key)
        if match is not None:
            explicit[int(match.group(1))] = parse_status(status)
    nested = state.get("new_status")
    if isinstance(nested, dict):
        for key, status in nested.items():
            v = _node_id(key)
            if v is not None:
                explicit[v] = parse_status(status)
    claims.update(explicit)
    return claims


def parse_confidence(value) -> float:
    """Clipped to [0, 1]; 0.5 when missing or not a finite number."""
    if isinstance(value, bool) or value is None:
        return DEFAULT_CONFIDENCE
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return DEFAULT_CONFIDENCE
    return float(min(1.0, max(0.0, number))) if math.isfinite(number) else DEFAULT_CONFIDENCE


def parse_reply(text: str, candidates: Sequence[str], status=None, nmask=None) -> Reply:
    """Parse one reply; never raises.

    Args:
      text: the raw reply.
      candidates: the candidate strings in prompt order (a bare index refers to this list).
      status: `[N]` current statuses: atoms equal to them are dropped, ids outside `[0, N)` too.
      nmask: `[N]` bool real nodes: atoms on padded nodes are dropped.
    """
    try:
        return _parse(text, candidates, status, nmask)
    except Exception as err:  # noqa: BLE001 — the contract is "never raises"
        return Reply(None, [], DEFAULT_CONFIDENCE, False, f"error:{type(err).__name__}")


def _parse(text, candidates, status, nmask) -> Reply:
    obj = load_object(text)
    if obj is None:
        return Reply(None, [], DEFAULT_CONFIDENCE, False, "not_json")
    index, reason = parse_action(obj.get("selected_action"), candidates)
    claims = collect_atoms(obj.get("imagined_next_state"))
    n = len(status) if status is not None else len(nmask) if nmask is not None else None
    atoms, dropped = [], 0
    for v in sorted(claims):
        s = claims[v]
        if v < 0 or (n is not None and v >= n) or (nmask is not None and not bool(np.asarray(nmask)[v])):
            dropped += 1
            continue
        if status is not None and s == int(np.asarray(status)[v]):
            continue  # a no-op claim
        atoms.append((v, s))
    return Reply(index, atoms, parse_confidence(obj.get("confidence")), index is not None, reason,
                 dropped)


def imagined_status(status, atoms: Sequence[tuple[int, int]]) -> np.ndarray:
    """`[N]` the statuses a reply claims: the current status where it claims nothing."""
    out = np.asarray(status).astype(np.int8).copy()
    for v, s in atoms:
        out[v] = s
    return out


def change_mask(n: int, atoms: Sequence[tuple[int, int]]) -> np.ndarray:
    """`[N]` bool change-set S of a reply's atoms."""
    mask = np.zeros(n, bool)
    for v, _ in atoms:
        mask[v] = True
    return mask
