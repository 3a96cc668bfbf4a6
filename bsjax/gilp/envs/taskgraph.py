"""TaskGraph: a DAG of subtasks with `depends_on` edges; execute / skip / retry (docs/gilp/spec.md §2.2).

Attributes: `attr[:, 0] = duration − 1` (d ∈ {1, 2}), `attr[:, 1] = fragility φ / 2` (φ ∈ {0, 1, 2}).
Only the argument node ever changes. A duration-2 node takes two executes: PENDING → ACTIVE (never
fails), then ACTIVE → COMPLETED; every completing execute fails to FAILED with p_fail(φ).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config, types
from bsjax.gilp.envs import common
from bsjax.gilp.types import Graph

EXECUTE, SKIP, RETRY = 0, 1, 2
P_FAIL = (0.05, 0.15, 0.35)  # completing execute, by fragility φ

# Generator parameters (spec §2.7): ID for train / val / test_id, OOD for test_ood.
ID_PARAMS = dict(layers=(2, 5), widths=(1, 2), p_second=0.3, goals=(1, 1), goal_layers=1,
                 distractors=(1, 3), p_d2=0.2, phi=(0.6, 0.3, 0.1))
OOD_PARAMS = dict(layers=(4, 8), widths=(1, 4), p_second=0.5, goals=(1, 2), goal_layers=2,
                  distractors=(2, 5), p_d2=0.3, phi=(0.4, 0.4, 0.2))
P_CACHED_ROOT = 0.25  # a non-goal layer-0 node starts COMPLETED


def durations(g: Graph) -> jax.Array:
    """`[N]` int32 duration d ∈ {1, 2} of every node."""
    return 1 + jnp.rint(g.attr[:, 0]).astype(jnp.int32)


def fragility(g: Graph) -> jax.Array:
    """`[N]` int32 fragility φ ∈ {0, 1, 2} of every node."""
    return jnp.clip(jnp.rint(g.attr[:, 1] * 2.0).astype(jnp.int32), 0, 2)


def candidates(g: Graph) -> tuple[jax.Array, jax.Array]:
    """execute(i), skip(i), retry(i) for every real node (see `common.per_node_candidates`)."""
    return common.per_node_candidates(g)


_arg = common.argument_node


def valid(g: Graph, a: common.Action) -> jax.Array:
    """`[]` bool: execute needs PENDING/ACTIVE and every predecessor COMPLETED; skip a non-goal
    PENDING/ACTIVE/FAILED node; retry a FAILED node."""
    node, exists = _arg(g, a)
    s = g.status[node]
    preds = g.etype[:, node] == config.DEPENDS_ON
    deps_met = jnp.all(~preds | (g.status == config.COMPLETED))
    ok = jnp.stack([
        ((s == config.PENDING) | (s == config.ACTIVE)) & deps_met,
        ~g.goal[node] & ((s == config.PENDING) | (s == config.ACTIVE) | (s == config.FAILED)),
        s == config.FAILED,
    ])
    return exists & ok[jnp.clip(a[0], 0, 2)]


def branches(g: Graph, a: common.Action) -> tuple[Graph, Graph, jax.Array]:
    """Success branch, failure branch and failure probability q (`[]` float32).

    Only a completing execute is stochastic; an invalid action gives `(g, g, 0)`."""
    node, _ = _arg(g, a)
    kind, s = a[0], g.status[node]
    is_valid = valid(g, a)
    first_stage = (kind == EXECUTE) & (s == config.PENDING) & (durations(g)[node] == 2)
    completing = (kind == EXECUTE) & ~first_stage
    to_succ = jnp.where(kind == EXECUTE, jnp.where(first_stage, config.ACTIVE, config.COMPLETED),
                        jnp.where(kind == SKIP, config.SKIPPED, config.ACTIVE))
    to_fail = jnp.where(completing, config.FAILED, to_succ)
    q = jnp.where(is_valid & completing, jnp.asarray(P_FAIL, jnp.float32)[fragility(g)[node]], 0.0)
    changes = is_valid & (jnp.arange(g.status.shape[0]) == node)
    g_succ = g.replace(status=jnp.where(changes, to_succ, g.status).astype(jnp.int8))
    g_fail = g.replace(status=jnp.where(changes, to_fail, g.status).astype(jnp.int8))
    return g_succ, g_fail, q.astype(jnp.float32)


def sample(key: jax.Array, g: Graph, a: jax.Array) -> tuple[Graph, jax.Array]:
    """One outcome; the single stochastic component (the completing execute) fails w.p. q.
    The key is consumed."""
    return common.sample_one_component(branches, key, g, a)


required = common.required


def dstar(g: Graph) -> jax.Array:
    """`[]` int32 d* = Σ_{v∈R} rem(v); UNSOLV if a required node is SKIPPED.

    rem(PENDING) = d_v, rem(ACTIVE) = 1, rem(COMPLETED) = 0, rem(FAILED) = 2 (retry, execute)."""
    in_r = required(g)
    s = g.status
    rem = jnp.where(s == config.PENDING, durations(g),
                    jnp.where(s == config.ACTIVE, 1, jnp.where(s == config.FAILED, 2, 0)))
    dead = jnp.any(in_r & (s == config.SKIPPED))
    total = jnp.minimum(jnp.sum(jnp.where(in_r, rem, 0)), config.UNSOLV)
    return jnp.where(dead, config.UNSOLV, total).astype(jnp.int32)


# Decode tables (spec §2.2); the PENDING +1 row of execute depends on the node's duration.
_ROWS = [
    (EXECUTE, config.ROLE_ARG1, config.ACTIVE, +1, config.COMPLETED),
    (EXECUTE, config.ROLE_ARG1, config.PENDING, -1, config.FAILED),
    (EXECUTE, config.ROLE_ARG1, config.ACTIVE, -1, config.FAILED),
    (RETRY, config.ROLE_ARG1, config.FAILED, +1, config.ACTIVE),
    (SKIP, config.ROLE_ARG1, config.PENDING, +1, config.SKIPPED),
    (SKIP, config.ROLE_ARG1, config.ACTIVE, +1, config.SKIPPED),
    (SKIP, config.ROLE_ARG1, config.FAILED, +1, config.SKIPPED),
]
DECODE_D1 = common.decode_table(_ROWS + [(EXECUTE, config.ROLE_ARG1, config.PENDING, +1, config.COMPLETED)])
DECODE_D2 = common.decode_table(_ROWS + [(EXECUTE, config.ROLE_ARG1, config.PENDING, +1, config.ACTIVE)])


def decode(g: Graph, a: common.Action, dirs: jax.Array) -> jax.Array:
    """`[N]` int8 next statuses that the directions `dirs` (`[N]`, in {−1, 0, +1}) stand for."""
    roles = common.roles_of(a, g.status.shape[0])
    one = common.decode_with_table(DECODE_D1, g.status, roles, a[0], dirs)
    two = common.decode_with_table(DECODE_D2, g.status, roles, a[0], dirs)
    return jnp.where(durations(g) == 2, two, one)


def explain(graph: dict, action) -> list[str]:
    """Observable reasons (host-side) why an action is invalid or harmful; `[]` if none."""
    kind, i = int(action[0]), int(action[1])
    status, nmask = np.asarray(graph["status"]), np.asarray(graph["nmask"])
    if not 0 <= kind <= 2 or not 0 <= i < len(status) or not nmask[i]:
        return []
    goal, etype, anc = np.asarray(graph["goal"]), np.asarray(graph["etype"]), np.asarray(graph["anc"])
    names, s = config.STATUS_NAMES, int(status[i])
    lines = []
    if kind == EXECUTE:
        if s not in (config.PENDING, config.ACTIVE):
            lines.append(f"{config.node_name(i)} is {names[s]}, not pending or active")
        unmet = [k for k in np.flatnonzero((etype[:, i] == config.DEPENDS_ON) & nmask)
                 if status[k] != config.COMPLETED]
        if unmet:
            waits = ", ".join(f"{config.node_name(k)} {'still ' if status[k] <= config.ACTIVE else ''}"
                              f"{names[status[k]]}" for k in unmet)
            lines.append(f"{config.node_name(i)} has unmet dependencies ({waits})")
    elif kind == SKIP:
        if goal[i]:
            lines.append(f"{config.node_name(i)} is a goal node")
        else:
            needed_by = np.flatnonzero(anc[i] & goal & nmask)
            if len(needed_by):
                goal_name = config.node_name(needed_by[0])
                lines.append(f"{config.node_name(i)} is required by goal {goal_name}")
        if s not in (config.PENDING, config.ACTIVE, config.FAILED):
            lines.append(f"{config.node_name(i)} is {names[s]}, not pending, active or failed")
    elif s != config.FAILED:
        lines.append(f"{config.node_name(i)} is {names[s]}, not failed")
    return lines


def sample_task(rng: np.random.Generator, split: str) -> dict[str, np.ndarray] | None:
    """One raw TaskGraph draw (spec §2.7) as padded arrays, or None when N > N_MAX.

    Layers of subtasks, each node below layer 0 with one parent in the layer above and maybe a
    second from any earlier layer; goals in the last layer(s); distractor leaves hang off the
    layered nodes, so they never precede a goal. Node ids are a random permutation.
    """
    p = OOD_PARAMS if split == "test_ood" else ID_PARAMS
    n_layers = int(rng.integers(p["layers"][0], p["layers"][1] + 1))
    widths = rng.integers(p["widths"][0], p["widths"][1] + 1, size=n_layers)
    starts = np.concatenate([[0], np.cumsum(widths)])
    n_main = int(starts[-1])
    parents: list[list[int]] = [[] for _ in range(n_main)]
    for layer in range(1, n_layers):
        for v in range(starts[layer], starts[layer + 1]):
            first = int(rng.integers(starts[layer - 1], starts[layer]))
            parents[v].append(first)
            if rng.random() < p["p_second"]:
                others = [u for u in range(starts[layer]) if u != first]
                if others:
                    parents[v].append(others[int(rng.integers(len(others)))])
    pool = np.arange(starts[max(n_layers - p["goal_layers"], 0)], n_main)
    n_goals = min(int(rng.integers(p["goals"][0], p["goals"][1] + 1)), len(pool))
    goals = rng.choice(pool, size=n_goals, replace=False)
    n_distractors = int(rng.integers(p["distractors"][0], p["distractors"][1] + 1))
    for _ in range(n_distractors):
        parents.append([int(rng.integers(n_main))])
    n = n_main + n_distractors
    if n > config.N_MAX:
        return None
    duration = 1 + (rng.random(n) < p["p_d2"]).astype(np.int32)
    phi = rng.choice(3, size=n, p=p["phi"])
    status = np.full(n, config.PENDING, np.int8)
    is_goal = np.zeros(n, bool)
    is_goal[goals] = True
    cached = rng.random(int(widths[0])) < P_CACHED_ROOT
    status[: widths[0]][cached & ~is_goal[: widths[0]]] = config.COMPLETED

    ids = rng.permutation(n)  # ids[v]: the public id of internal node v
    arrays = types.empty_graph_np()
    arrays["nmask"][:n] = True
    arrays["ntype"][:n] = config.SUBTASK
    arrays["status"][ids] = status
    arrays["goal"][ids] = is_goal
    arrays["attr"][ids, 0] = duration - 1
    arrays["attr"][ids, 1] = phi / 2.0
    for v, ps in enumerate(parents):
        for u in ps:
            arrays["etype"][ids[u], ids[v]] = config.DEPENDS_ON
    arrays["anc"] = types.ancestor_closure_np(arrays["etype"], arrays["nmask"])
    return arrays


BENCH = common.Bench(name="taskgraph", candidates=candidates, valid=valid, branches=branches,
                     sample=sample, dstar=dstar, dstar_obs=dstar, decode=decode, explain=explain,
                     sample_task=sample_task)
