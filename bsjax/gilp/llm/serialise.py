"""Host-side serialisation of a GILP state graph for prompts (docs/gilp/spec.md §5.1, App. B).

Three formats: the JSON table (default), a Markdown checklist and a nested adjacency tree. A graph
is a dict of numpy arrays (`status, ntype, goal, attr, etype, nmask`; see
`bsjax.gilp.types.graph_to_np`). Only observable fields are read: `hidden` never is.
"""

from __future__ import annotations

import json

import numpy as np

from bsjax.gilp import config as gilp_config
from bsjax.gilp.config import node_name

FORMATS = ("json_table", "markdown", "nested")
LEVELS = ("low", "medium", "high")
TOOL_CATEGORIES = ("search", "fetch", "parse", "compute", "write", "notify")
# Incoming edges that the checklist lists as "needs" (dependencies and data inputs) or "upstream".
_NEEDS = (
    gilp_config.DEPENDS_ON,
    gilp_config.DATA_JSON,
    gilp_config.DATA_TABLE,
    gilp_config.DATA_TEXT,
    gilp_config.DATA_BLOB,
)


def real_nodes(graph: dict) -> list[int]:
    """Ids of the real (unpadded) nodes, ascending."""
    return [int(v) for v in np.flatnonzero(np.asarray(graph["nmask"], bool))]


def incoming(graph: dict, v: int) -> list[tuple[int, int]]:
    """`(source, edge type)` of every edge into v, by source id."""
    col = np.asarray(graph["etype"])[:, v]
    nmask = np.asarray(graph["nmask"], bool)
    return [(int(u), int(col[u])) for u in np.flatnonzero((col >= 0) & nmask)]


def _level(x: float) -> str:
    return LEVELS[int(np.clip(round(float(x) * 2), 0, 2))]


def job_home(graph: dict, v: int) -> tuple[int | None, int | None]:
    """A job's home resource (the source of its can_serve or assigned edge) and the resource it
    runs on (the source of its assigned edge), each None if absent."""
    home = assigned = None
    for u, e in incoming(graph, v):
        if e in (gilp_config.CAN_SERVE, gilp_config.ASSIGNED):
            home = u
        if e == gilp_config.ASSIGNED:
            assigned = u
    return home, assigned


def node_attrs(graph: dict, v: int) -> dict:
    """Human-readable observable attributes of node v (spec §2.2–2.5)."""
    ntype = int(graph["ntype"][v])
    a = np.asarray(graph["attr"][v], np.float64)
    if ntype == gilp_config.SUBTASK:
        return {"duration": int(round(a[0])) + 1, "fragility": _level(a[1])}
    if ntype == gilp_config.TOOL:
        return {"category": TOOL_CATEGORIES[int(np.argmax(a[1:7]))], "flakiness": _level(a[0])}
    if ntype == gilp_config.RESOURCE:
        return {
            "capacity": int(round(a[0] * 3)),
            "load": int(round(a[1] * 3)),
            "escalation": bool(a[2] > 0.5),
        }
    if ntype == gilp_config.JOB:
        home, assigned = job_home(graph, v)
        return {"home": home, "assigned_to": assigned}
    if ntype == gilp_config.COMPONENT:
        return {"depth": int(round(a[0] * 6))}
    return {}


def _type_name(graph: dict, v: int) -> str:
    return gilp_config.NODE_TYPE_NAMES[int(graph["ntype"][v])]


def _status_name(graph: dict, v: int) -> str:
    return gilp_config.STATUS_NAMES[int(graph["status"][v])]


def _dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def json_table(graph: dict) -> str:
    """`{"columns": [...], "rows": [...]}` with one compact row per line, ordered by id."""
    rows = []
    for v in real_nodes(graph):
        row = [
            v,
            _type_name(graph, v),
            _status_name(graph, v),
            bool(graph["goal"][v]),
            [[u, gilp_config.EDGE_TYPE_NAMES[e]] for u, e in incoming(graph, v)],
            node_attrs(graph, v),
        ]
        rows.append(_dumps(row))
    head = '{"columns": ["id","type","status","goal","in","attrs"], "rows": ['
    return head + "\n" + ",\n".join(rows) + "\n]}"


def _attr_text(graph: dict, v: int) -> str:
    def show(x):
        if x is None:
            return "none"
        if isinstance(x, bool):
            return "yes" if x else "no"
        return str(x)

    attrs = node_attrs(graph, v)
    if int(graph["ntype"][v]) == gilp_config.JOB:
        attrs = {k: (node_name(x) if x is not None else None) for k, x in attrs.items()}
    return ", ".join(f"{k}: {show(x)}" for k, x in attrs.items())


def markdown(graph: dict) -> str:
    """`- [x] node_3 (subtask, completed) needs: node_1, node_2 {duration: 1, ...} [GOAL]`."""
    lines = []
    for v in real_nodes(graph):
        done = "x" if int(graph["status"][v]) == gilp_config.COMPLETED else " "
        line = f"- [{done}] {node_name(v)} ({_type_name(graph, v)}, {_status_name(graph, v)})"
        edges = incoming(graph, v)
        needs = [node_name(u) for u, e in edges if e in _NEEDS]
        upstream = [node_name(u) for u, e in edges if e == gilp_config.PROPAGATES]
        if needs:
            line += " needs: " + ", ".join(needs)
        if upstream:
            line += " upstream: " + ", ".join(upstream)
        attrs = _attr_text(graph, v)
        if attrs:
            line += " {" + attrs + "}"
        if bool(graph["goal"][v]):
            line += " [GOAL]"
        lines.append(line)
    return "\n".join(lines)


def nested(graph: dict) -> str:
    """`{"node_1": {"type": ..., "status": ..., "goal": ..., "attrs": {...}, "children":
    {"node_3": {"edge": "depends_on", ...}}}}` on one line, over the graph's edges from its roots
    (nodes with no incoming edge), in id order. A node reached again is written as "see above"."""
    etype = np.asarray(graph["etype"])
    nmask = np.asarray(graph["nmask"], bool)
    seen: set[int] = set()

    def entry(v: int, via: int | None):
        if v in seen:
            return "see above"
        seen.add(v)
        item = {}
        if via is not None:
            item["edge"] = gilp_config.EDGE_TYPE_NAMES[via]
        item.update(
            type=_type_name(graph, v),
            status=_status_name(graph, v),
            goal=bool(graph["goal"][v]),
            attrs=node_attrs(graph, v),
        )
        kids = {
            node_name(w): entry(int(w), int(etype[v, w])) for w in np.flatnonzero((etype[v] >= 0) & nmask)
        }
        if kids:
            item["children"] = kids
        return item

    nodes = real_nodes(graph)
    roots = [v for v in nodes if not incoming(graph, v)]
    tree = {node_name(v): entry(v, None) for v in roots}
    for v in nodes:  # nodes on a cycle have no root; never produced by the generators
        if v not in seen:
            tree[node_name(v)] = entry(v, None)
    return json.dumps(tree)


def serialise(graph: dict, fmt: str = "json_table") -> str:
    """The state in one of `FORMATS`."""
    if fmt == "json_table":
        return json_table(graph)
    if fmt == "markdown":
        return markdown(graph)
    if fmt == "nested":
        return nested(graph)
    raise ValueError(f"unknown serialisation {fmt!r} (choose from {', '.join(FORMATS)})")
