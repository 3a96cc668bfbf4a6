"""ToolChain: a data-flow DAG of API calls; call / verify / rollback (docs/gilp/spec.md §2.3).

Attributes: `attr[:, 0] = flakiness φ / 2`, `attr[:, 1:7]` = one-hot tool category (search, fetch,
parse, compute, write, notify). Edges u → v of types 1–4 (payload json / table / text / blob) mean
v consumes u's output. A call whose inputs are not all verified (COMPLETED) fails for sure.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config, types
from bsjax.gilp.envs import common
from bsjax.gilp.types import Graph

CALL, VERIFY, ROLLBACK = 0, 1, 2
P_FAIL = (0.03, 0.10, 0.25)  # call with verified inputs, by flakiness φ
DATA_EDGE_TYPES = (config.DATA_JSON, config.DATA_TABLE, config.DATA_TEXT, config.DATA_BLOB)
CATEGORY_NAMES = ("search", "fetch", "parse", "compute", "write", "notify")
# The ID grammar of producer → consumer categories (spec §2.7).
GRAMMAR = frozenset({(0, 1), (1, 2), (1, 3), (2, 3), (2, 4), (3, 4), (3, 5), (4, 5)})
# Payload type by producer category: search→json, fetch→blob, parse/compute→table, write/notify→text.
PAYLOAD = (
    config.DATA_JSON,
    config.DATA_BLOB,
    config.DATA_TABLE,
    config.DATA_TABLE,
    config.DATA_TEXT,
    config.DATA_TEXT,
)

ID_PARAMS = dict(n=(3, 8), fan_in=(1, 2), p_outside=0.0, phi=(0.5, 0.35, 0.15))
OOD_PARAMS = dict(n=(5, 12), fan_in=(1, 3), p_outside=0.5, phi=(0.3, 0.4, 0.3))
P_SOURCE_COMPLETED, P_SOURCE_ACTIVE = 0.25, 0.15


def flakiness(g: Graph) -> jax.Array:
    """`[N]` int32 flakiness φ ∈ {0, 1, 2}."""
    return jnp.clip(jnp.rint(g.attr[:, 0] * 2.0).astype(jnp.int32), 0, 2)


def _is_data_edge(etype: jax.Array) -> jax.Array:
    return (etype >= config.DATA_JSON) & (etype <= config.DATA_BLOB)


def candidates(g: Graph) -> tuple[jax.Array, jax.Array]:
    """call(i), verify(i), rollback(i) for every real tool (see `common.per_node_candidates`)."""
    return common.per_node_candidates(g)


_arg = common.argument_node


def valid(g: Graph, a: common.Action) -> jax.Array:
    """`[]` bool: call a PENDING tool, verify an ACTIVE one, roll back an ACTIVE / COMPLETED /
    FAILED one. (A call with unverified inputs is valid; it just fails.)"""
    node, exists = _arg(g, a)
    s = g.status[node]
    ok = jnp.stack(
        [
            s == config.PENDING,
            s == config.ACTIVE,
            (s == config.ACTIVE) | (s == config.COMPLETED) | (s == config.FAILED),
        ]
    )
    return exists & ok[jnp.clip(a[0], 0, 2)]


def branches(g: Graph, a: common.Action) -> tuple[Graph, Graph, jax.Array]:
    """Success branch, failure branch and failure probability q (`[]` float32).

    Only call is stochastic: q = p_fail(φ) with every input COMPLETED, else q = 1. Rollback resets
    the argument and every data-flow descendant that is ACTIVE / COMPLETED / FAILED to PENDING.
    An invalid action gives `(g, g, 0)`."""
    node, _ = _arg(g, a)
    kind, s = a[0], g.status
    n = s.shape[0]
    is_valid = valid(g, a)
    is_arg = jnp.arange(n) == node
    inputs = _is_data_edge(g.etype[:, node]) & g.nmask
    inputs_ready = jnp.all(~inputs | (s == config.COMPLETED))
    reset = g.anc[node] & ((s == config.ACTIVE) | (s == config.COMPLETED) | (s == config.FAILED))
    succ = jnp.where(
        kind == CALL,
        jnp.where(is_arg, config.ACTIVE, s),
        jnp.where(
            kind == VERIFY, jnp.where(is_arg, config.COMPLETED, s), jnp.where(reset, config.PENDING, s)
        ),
    )
    fail = jnp.where((kind == CALL) & is_arg, config.FAILED, succ)
    q_call = jnp.where(inputs_ready, jnp.asarray(P_FAIL, jnp.float32)[flakiness(g)[node]], 1.0)
    q = jnp.where(is_valid & (kind == CALL), q_call, 0.0)
    g_succ = g.replace(status=jnp.where(is_valid, succ, s).astype(jnp.int8))
    g_fail = g.replace(status=jnp.where(is_valid, fail, s).astype(jnp.int8))
    return g_succ, g_fail, q.astype(jnp.float32)


def sample(key: jax.Array, g: Graph, a: jax.Array) -> tuple[Graph, jax.Array]:
    """One outcome; the single stochastic component (the call) fails w.p. q. The key is consumed."""
    return common.sample_one_component(branches, key, g, a)


required = common.required


def dstar(g: Graph) -> jax.Array:
    """`[]` int32 d* = Σ_{v∈R} c(v) (spec §2.3): COMPLETED 0, ACTIVE 1, PENDING 2, FAILED 2 below
    another FAILED node (whose rollback resets it) else 3 (rollback, call, verify).

    No action touches a SKIPPED tool, so a SKIPPED one in R is a dead end (generators make none).
    The formula is exact on generated tasks and on every state the oracle visits (it rolls back
    each failure before its next call). It overestimates when three or more top FAILED tools sit
    below one ACTIVE / COMPLETED required tool, where one rollback of that tool is cheaper; such
    states need calls with unverified inputs (tested as a known gap).
    """
    in_r = required(g)
    s = g.status
    failed = s == config.FAILED
    proper_anc = g.anc & ~jnp.eye(s.shape[0], dtype=bool)
    below_failed = jnp.any(proper_anc & failed[:, None], axis=0)
    cost = jnp.where(
        s == config.ACTIVE,
        1,
        jnp.where(s == config.PENDING, 2, jnp.where(failed, jnp.where(below_failed, 2, 3), 0)),
    )
    dead = jnp.any(in_r & (s == config.SKIPPED))
    total = jnp.minimum(jnp.sum(jnp.where(in_r, cost, 0)), config.UNSOLV)
    return jnp.where(dead, config.UNSOLV, total).astype(jnp.int32)


DECODE = common.decode_table(
    [
        (CALL, config.ROLE_ARG1, config.PENDING, +1, config.ACTIVE),
        (CALL, config.ROLE_ARG1, config.PENDING, -1, config.FAILED),
        (VERIFY, config.ROLE_ARG1, config.ACTIVE, +1, config.COMPLETED),
    ]
    + [
        (ROLLBACK, role, before, sign, config.PENDING)
        for role in (config.ROLE_ARG1, config.ROLE_OTHER)
        for before, sign in ((config.ACTIVE, -1), (config.COMPLETED, -1), (config.FAILED, +1))
    ]
)


def decode(g: Graph, a: common.Action, dirs: jax.Array) -> jax.Array:
    """`[N]` int8 next statuses that the directions `dirs` (`[N]`, in {−1, 0, +1}) stand for."""
    roles = common.roles_of(a, g.status.shape[0])
    return common.decode_with_table(DECODE, g.status, roles, a[0], dirs)


def explain(graph: dict, action) -> list[str]:
    """Observable reasons (host-side) why an action is invalid or harmful; `[]` if none."""
    kind, i = int(action[0]), int(action[1])
    status, nmask = np.asarray(graph["status"]), np.asarray(graph["nmask"])
    if not 0 <= kind <= 2 or not 0 <= i < len(status) or not nmask[i]:
        return []
    etype, names, s = np.asarray(graph["etype"]), config.STATUS_NAMES, int(status[i])
    lines = []
    if kind == CALL:
        if s != config.PENDING:
            lines.append(f"{config.node_name(i)} is {names[s]}, not pending")
        inputs = np.flatnonzero(np.isin(etype[:, i], DATA_EDGE_TYPES) & nmask)
        lines += [
            f"input {config.node_name(int(k))} of {config.node_name(i)} is not verified"
            for k in inputs
            if status[k] != config.COMPLETED
        ]
    elif kind == VERIFY:
        if s != config.ACTIVE:
            lines.append(f"{config.node_name(i)} is {names[s]}, not active")
    elif s not in (config.ACTIVE, config.COMPLETED, config.FAILED):
        lines.append(f"{config.node_name(i)} is {names[s]}, not active, completed or failed")
    return lines


def _producers(rng: np.random.Generator, v: int, cats: np.ndarray, p: dict) -> list[int]:
    """Input tools of non-source tool v, drawn among the earlier tools 0..v−1.

    ID: fan-in distinct producers whose category pair is in the grammar (any earlier tool if none
    fits). OOD: each edge comes w.p. p_outside from pairs outside the grammar, else from inside;
    an empty pool falls back to the other one.
    """
    fan_in = int(rng.integers(p["fan_in"][0], p["fan_in"][1] + 1))
    inside = [u for u in range(v) if (int(cats[u]), int(cats[v])) in GRAMMAR]
    outside = [u for u in range(v) if (int(cats[u]), int(cats[v])) not in GRAMMAR]
    if p["p_outside"] == 0.0:
        pool = inside or outside
        return [int(u) for u in rng.choice(pool, size=min(fan_in, len(pool)), replace=False)]
    chosen: list[int] = []
    for _ in range(fan_in):
        first, second = (outside, inside) if rng.random() < p["p_outside"] else (inside, outside)
        pool = [u for u in first if u not in chosen] or [u for u in second if u not in chosen]
        if not pool:
            break
        chosen.append(pool[int(rng.integers(len(pool)))])
    return chosen


def sample_task(rng: np.random.Generator, split: str) -> dict[str, np.ndarray]:
    """One raw ToolChain draw (spec §2.7) as padded arrays.

    Tools in a topological order with ascending categories; the first tool and every search tool
    are sources, every other tool draws its inputs from earlier tools. The goal is the last tool;
    sources start cached (COMPLETED) w.p. 0.25 or ACTIVE w.p. 0.15. Node ids are a random
    permutation.
    """
    ood = split == "test_ood"
    p = OOD_PARAMS if ood else ID_PARAMS
    n = int(rng.integers(p["n"][0], p["n"][1] + 1))
    cats = np.sort(rng.integers(0, len(CATEGORY_NAMES), size=n))
    edges: list[tuple[int, int, int]] = []
    is_source = np.zeros(n, bool)
    for v in range(n):
        is_source[v] = v == 0 or cats[v] == 0
        if is_source[v]:
            continue
        for u in _producers(rng, v, cats, p):
            payload = int(rng.integers(config.DATA_JSON, config.DATA_BLOB + 1)) if ood else PAYLOAD[cats[u]]
            edges.append((u, v, payload))
    status = np.full(n, config.PENDING, np.int8)
    start = rng.random(n)
    status[is_source & (start < P_SOURCE_COMPLETED)] = config.COMPLETED
    status[is_source & (start >= P_SOURCE_COMPLETED) & (start < P_SOURCE_COMPLETED + P_SOURCE_ACTIVE)] = (
        config.ACTIVE
    )
    phi = rng.choice(3, size=n, p=p["phi"])

    ids = rng.permutation(n)  # ids[v]: the public id of internal tool v
    arrays = types.empty_graph_np()
    arrays["nmask"][:n] = True
    arrays["ntype"][:n] = config.TOOL
    arrays["status"][ids] = status
    arrays["goal"][ids[n - 1]] = True
    arrays["attr"][ids, 0] = phi / 2.0
    arrays["attr"][ids, 1 + cats] = 1.0
    for u, v, payload in edges:
        arrays["etype"][ids[u], ids[v]] = payload
    arrays["anc"] = types.ancestor_closure_np(arrays["etype"], arrays["nmask"])
    return arrays


BENCH = common.Bench(
    name="toolchain",
    candidates=candidates,
    valid=valid,
    branches=branches,
    sample=sample,
    dstar=dstar,
    dstar_obs=dstar,
    decode=decode,
    explain=explain,
    sample_task=sample_task,
)
