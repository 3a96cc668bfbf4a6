"""RepairFlow: faults propagate down a forest of components (docs/gilp/spec.md §2.5).

Node attributes: `attr[0] = depth / 6`, `attr[1] = is_leaf`, `attr[2] = q_repair`, the failure
probability of repairing a diagnosed fault (0.10 ID / 0.15 OOD; bsjax choice: stored on every
component so the pure functions read it from the repaired node and need no task-level field).

Hidden fields (`hidden[:, H_*]`, int8 0/1): fault, latent, diagnosed, checked, isolated. Statuses
are derived from them after every action; only `dstar` and the rules read them, while `dstar_obs`,
`infer_hidden` and `explain` use statuses, goals, edges and `anc` only. Given a graph whose hidden
fields do not produce its statuses (`observe(g)`, a belief graph), the rules and `dstar` run on the
`infer_hidden` estimate instead: the agent's expectation model (spec §5.2).

Actions: `diagnose(i)` (kind 0), `repair(i)` (kind 1), `isolate(i)` (kind 2).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config
from bsjax.gilp.envs import common
from bsjax.gilp.types import Graph, ancestor_closure_np, empty_graph_np

DIAGNOSE, REPAIR, ISOLATE = 0, 1, 2
A_DEPTH, A_LEAF, A_QREPAIR = 0, 1, 2
Q_REPAIR = {"id": 0.10, "ood": 0.15}
Q_BLIND = 0.6  # blind repair of an undiagnosed fault fails w.p. 0.6


def _is_component(g: Graph) -> jax.Array:
    return g.nmask & (g.ntype == config.COMPONENT)


def _fields(hidden: jax.Array) -> tuple[jax.Array, ...]:
    """`hidden [N, 5]` int8 -> five `[N]` bool fields (fault, latent, diagnosed, checked, isolated)."""
    return tuple(hidden[:, k] > 0 for k in range(config.N_HIDDEN))


def _symptomatic(g: Graph, fault: jax.Array, isolated: jax.Array) -> jax.Array:
    """`[N]` bool: some ancestor-or-self has an active, non-isolated fault."""
    source = fault & ~isolated & g.nmask
    return jnp.any(g.anc & source[:, None], axis=0)


def _derive_status(g: Graph, fault, diagnosed, checked, isolated) -> jax.Array:
    """`[N]` int8 statuses derived from the hidden fields (spec §2.5; `checked` already cleared
    on symptomatic nodes)."""
    symptomatic = _symptomatic(g, fault, isolated)
    status = jnp.where(isolated, config.SKIPPED,
                       jnp.where(fault & diagnosed, config.ACTIVE,
                                 jnp.where(symptomatic, config.FAILED,
                                           jnp.where(checked, config.COMPLETED, config.PENDING))))
    return jnp.where(g.nmask, status, config.PENDING).astype(jnp.int8)


def _settle(g: Graph, fault, latent, diagnosed, checked, isolated) -> Graph:
    """Store hidden fields and derive statuses; symptomatic nodes lose `checked` (spec §2.5)."""
    checked = checked & ~_symptomatic(g, fault, isolated)
    hidden = jnp.stack([fault, latent, diagnosed, checked, isolated], axis=1) & g.nmask[:, None]
    return g.replace(status=_derive_status(g, fault, diagnosed, checked, isolated),
                     hidden=hidden.astype(jnp.int8))


def _resolve(g: Graph) -> Graph:
    """`g` itself when its hidden fields produce its statuses, else `infer_hidden(g)`.

    True environment graphs are always consistent. An `observe(g)` graph (hidden zeroed) or a
    belief graph (statuses overwritten) is not, unless its estimate would be the same; the rules
    then run on the observable estimate, which is the agent's expectation model (spec §5.2).
    """
    fault, _, diagnosed, checked, isolated = _fields(g.hidden)
    consistent = jnp.all(_derive_status(g, fault, diagnosed, checked, isolated) == g.status)
    return g.replace(hidden=jnp.where(consistent, g.hidden, infer_hidden(g).hidden))


def candidates(g: Graph) -> tuple[jax.Array, jax.Array]:
    """Every well-typed action in canonical order, padded to A_MAX.

    Returns:
      acts: `[A, 3]` int32 (kind, i, -1); padding slots are (-1, -1, -1).
      amask: `[A]` bool real candidates.
    """
    n = config.N_MAX
    ids = jnp.arange(n, dtype=jnp.int32)
    is_comp = _is_component(g)
    real = jnp.tile(is_comp, 3)
    (slots,) = jnp.nonzero(real, size=config.A_MAX, fill_value=0)
    amask = jnp.arange(config.A_MAX) < jnp.sum(real)
    acts = jnp.stack([slots // n, jnp.tile(ids, 3)[slots], jnp.full(config.A_MAX, -1)], axis=1)
    return jnp.where(amask[:, None], acts, -1).astype(jnp.int32), amask


def valid(g: Graph, a: jax.Array) -> jax.Array:
    """`[]` bool: the action's precondition holds (spec §2.5 rules table)."""
    kind, i = a[0], a[1]
    node = jnp.clip(i, 0, config.N_MAX - 1)
    s = g.status[node]
    diagnose_ok = (s == config.PENDING) | (s == config.FAILED)
    repair_ok = (s == config.ACTIVE) | (s == config.FAILED)
    isolate_ok = ~g.goal[node] & (s != config.SKIPPED)
    ok = jnp.where(kind == DIAGNOSE, diagnose_ok,
                   jnp.where(kind == REPAIR, repair_ok, (kind == ISOLATE) & isolate_ok))
    return ok & (i >= 0) & (i < config.N_MAX) & _is_component(g)[node]


def branches(g: Graph, a: jax.Array) -> tuple[Graph, Graph, jax.Array]:
    """`(g_succ, g_fail, q)`; an invalid action gives `(g, g, 0)`. Only repair is stochastic.

    A graph whose hidden fields do not produce its statuses (e.g. `observe(g)`) is first given
    the observable estimate of `infer_hidden`."""
    g_in, g = g, _resolve(g)
    kind = a[0]
    node = jnp.clip(a[1], 0, config.N_MAX - 1)
    arg = jnp.arange(config.N_MAX) == node
    fault, latent, diagnosed, checked, isolated = _fields(g.hidden)
    own_fault = fault[node]
    symptomatic = _symptomatic(g, fault, isolated)

    # diagnose: a fault is found; a healthy, non-symptomatic node is verified; else nothing.
    diagnosed_d = diagnosed | (arg & fault)
    checked_d = checked | (arg & ~fault & ~symptomatic)
    g_diagnose = _settle(g, fault, latent, diagnosed_d, checked_d, isolated)

    # repair: success clears the node's own fault (a no-op without one); failure loses diagnosis.
    fixed = arg & fault
    g_repair = _settle(g, fault & ~fixed, latent, diagnosed & ~arg, checked | fixed, isolated)
    g_repair_fail = _settle(g, fault, latent, diagnosed & ~arg, checked, isolated)
    q_repair = jnp.where(g.status[node] == config.ACTIVE, g.attr[node, A_QREPAIR],
                         jnp.where(own_fault, Q_BLIND, 1.0))

    # isolate: contains the node; isolating a fault wakes its latent children.
    child = g.etype[node] == config.PROPAGATES
    woken = child & latent & own_fault
    g_isolate = _settle(g, fault | woken, latent & ~woken, diagnosed, checked, isolated | arg)

    succ = common.select_graph(kind == DIAGNOSE, g_diagnose,
                               common.select_graph(kind == REPAIR, g_repair, g_isolate))
    fail = common.select_graph(kind == REPAIR, g_repair_fail, succ)
    ok = valid(g, a)
    q = jnp.where(ok & (kind == REPAIR), q_repair, 0.0).astype(jnp.float32)
    return common.select_graph(ok, succ, g_in), common.select_graph(ok, fail, g_in), q


def sample(key: jax.Array, g: Graph, a: jax.Array) -> tuple[Graph, jax.Array]:
    """One outcome; the single stochastic component (a repair) fails w.p. q. The key is consumed."""
    return common.sample_one_component(branches, key, g, a)


def _distance(g: Graph, fault: jax.Array, latent: jax.Array, isolated: jax.Array) -> jax.Array:
    """d* = |V| + Σ_{f∈F} cost(f) (spec §2.5) for given fault / latent / isolated fields."""
    goal = g.goal & g.nmask
    feeds_goal = jnp.any(g.anc & goal[None, :], axis=1)  # ancestor-or-self of some goal
    faults = fault & ~isolated & g.nmask & feeds_goal
    unverified = goal & (g.status != config.COMPLETED) & ~faults
    children = g.etype == config.PROPAGATES
    latent_children = jnp.sum(children & (latent & feeds_goal)[None, :], axis=1, dtype=jnp.int32)
    fix = 2 - (g.status == config.ACTIVE).astype(jnp.int32)  # (diagnose,) repair
    cost = jnp.where(goal, fix, jnp.minimum(fix, 1 + latent_children))  # or isolate
    total = jnp.sum(unverified, dtype=jnp.int32) + jnp.sum(jnp.where(faults, cost, 0))
    return jnp.minimum(total, config.UNSOLV).astype(jnp.int32)


def dstar(g: Graph) -> jax.Array:
    """`[]` int32 exact oracle distance; privileged (reads the hidden fields; a graph with
    inconsistent hidden fields, e.g. `observe(g)`, is measured on its `infer_hidden` estimate)."""
    g = _resolve(g)
    fault, latent, _, _, isolated = _fields(g.hidden)
    return _distance(g, fault, latent, isolated)


def inferred_faults(g: Graph) -> jax.Array:
    """`[N]` bool faults as the agent sees them: FAILED/ACTIVE nodes with no FAILED/ACTIVE proper
    ancestor. Reads statuses and `anc` only."""
    broken = g.nmask & ((g.status == config.FAILED) | (g.status == config.ACTIVE))
    proper_anc = g.anc & ~jnp.eye(config.N_MAX, dtype=bool)
    return broken & ~jnp.any(proper_anc & broken[:, None], axis=0)


def dstar_obs(g: Graph) -> jax.Array:
    """`[]` int32 the distance with latent ≡ 0 and inferred faults; never reads `hidden`."""
    no = jnp.zeros(config.N_MAX, bool)
    return _distance(g, inferred_faults(g), no, g.status == config.SKIPPED)


def infer_hidden(g: Graph) -> Graph:
    """The expectation model's graph: hidden fields estimated from the observable state
    (fault = inferred fault or ACTIVE, latent = 0, diagnosed = ACTIVE, checked = COMPLETED,
    isolated = SKIPPED). On states that satisfy the fault invariant the rules applied to it
    reproduce every observable transition except latent activation."""
    status = g.status
    fault = inferred_faults(g) | (status == config.ACTIVE)
    hidden = jnp.stack([fault, jnp.zeros_like(fault), status == config.ACTIVE, status == config.COMPLETED,
                        status == config.SKIPPED], axis=1) & g.nmask[:, None]
    return g.replace(hidden=hidden.astype(jnp.int8))


DECODE_TABLE = common.decode_table(
    [
        (DIAGNOSE, config.ROLE_ARG1, config.FAILED, +1, config.ACTIVE),
        (DIAGNOSE, config.ROLE_ARG1, config.PENDING, +1, config.COMPLETED),
        (REPAIR, config.ROLE_ARG1, config.ACTIVE, +1, config.COMPLETED),
        (REPAIR, config.ROLE_ARG1, config.ACTIVE, -1, config.FAILED),
        (REPAIR, config.ROLE_ARG1, config.FAILED, +1, config.COMPLETED),
        (REPAIR, config.ROLE_OTHER, config.FAILED, +1, config.PENDING),
    ]
    + [
        (ISOLATE, config.ROLE_ARG1, s, +1, config.SKIPPED)
        for s in (config.PENDING, config.ACTIVE, config.COMPLETED, config.FAILED)
    ]
    + [(ISOLATE, config.ROLE_OTHER, config.FAILED, +1, config.PENDING)]
)


def decode(g: Graph, a: jax.Array, dirs: jax.Array) -> jax.Array:
    """`[N]` int8 next statuses that `dirs [N]` stands for (statuses only; hidden is not decoded)."""
    return common.decode_with_table(DECODE_TABLE, g.status, common.roles_of(a), a[0], dirs)


# ---------------------------------------------------------------------------------------------
# Host side


def explain(graph: dict, action: tuple) -> list[str]:
    """Observable reasons an action is invalid or futile (spec §5.1 templates); never reads
    `hidden`."""
    kind, i, _ = (int(x) for x in action)
    status = np.asarray(graph["status"])
    anc = np.asarray(graph["anc"])
    name = config.STATUS_NAMES[int(status[i])]
    broken = np.asarray(graph["nmask"]) & np.isin(status, (config.FAILED, config.ACTIVE))
    upstream = [u for u in np.flatnonzero(anc[:, i] & broken) if u != i]
    # The topmost broken ancestor is the inferred root cause.
    roots = [u for u in upstream if not any(anc[w, u] and w != u for w in upstream)]
    upstream_line = (
        f"{config.node_name(i)} has an unresolved upstream failure ({config.node_name(roots[0])} failed)"
        if roots
        else None
    )
    reasons: list[str] = []
    if kind == DIAGNOSE:
        if status[i] not in (config.PENDING, config.FAILED):
            reasons.append(f"{config.node_name(i)} is {name}, not pending or failed")
        elif status[i] == config.FAILED and upstream_line:
            reasons.append(upstream_line)
    elif kind == REPAIR:
        if status[i] not in (config.ACTIVE, config.FAILED):
            reasons.append(f"{config.node_name(i)} is {name}, not active or failed")
        elif status[i] == config.FAILED:
            reasons.append(upstream_line or f"{config.node_name(i)} is failed, not active (undiagnosed)")
    elif kind == ISOLATE:
        if bool(np.asarray(graph["goal"])[i]):
            reasons.append(f"{config.node_name(i)} is a goal node and cannot be isolated")
        elif status[i] == config.SKIPPED:
            reasons.append(f"{config.node_name(i)} is skipped, not pending, active, completed or failed")
    return reasons


def _params(split: str) -> dict:
    if split == "test_ood":
        return dict(
            nodes=(8, 16), depth=6, goals=(3, 6), faults=(2, 4), latents=(1, 2), q_repair=Q_REPAIR["ood"]
        )
    return dict(nodes=(6, 12), depth=4, goals=(2, 5), faults=(1, 3), latents=(0, 0), q_repair=Q_REPAIR["id"])


def _draw(rng: np.random.Generator, bounds: tuple[int, int]) -> int:
    return int(rng.integers(bounds[0], bounds[1] + 1))


def sample_task(rng: np.random.Generator, split: str) -> dict:
    """One raw draw of the generator (spec §2.7), built in creation order and then relabelled by a
    random permutation of node ids."""
    p = _params(split)
    n = _draw(rng, p["nodes"])
    parent, depth = np.full(n, -1), np.zeros(n, int)
    for v in range(1, n):
        # A uniform earlier parent whose depth leaves room (depth of a root = 0).
        room = np.flatnonzero(depth[:v] < p["depth"])
        if rng.random() < 0.85 and len(room):
            parent[v] = rng.choice(room)
            depth[v] = depth[parent[v]] + 1
    children = [np.flatnonzero(parent == v) for v in range(n)]
    leaf = np.array([len(c) == 0 for c in children])
    anc = np.eye(n, dtype=bool)  # anc[u, v]: u is ancestor-or-self of v (creation order)
    for v in range(n):
        if parent[v] >= 0:
            anc[:, v] |= anc[:, parent[v]]

    n_goals = min(_draw(rng, p["goals"]), n)
    leaves, inner = rng.permutation(np.flatnonzero(leaf)), rng.permutation(np.flatnonzero(~leaf))
    goal = np.zeros(n, bool)
    goal[np.concatenate([leaves, inner])[:n_goals]] = True

    # Active faults on goal paths, never one below another.
    fault = np.zeros(n, bool)
    n_faults = _draw(rng, p["faults"])
    for u in rng.permutation(np.flatnonzero(anc[:, goal].any(axis=1))):
        if fault.sum() < n_faults and not (anc[u, fault].any() or anc[fault, u].any()):
            fault[u] = True

    # Latent faults on children of active faults, on a goal path w.p. 0.7.
    latent = np.zeros(n, bool)
    on_goal_path = anc[:, goal].any(axis=1)
    for _ in range(_draw(rng, p["latents"])):
        pool = np.flatnonzero((parent >= 0) & fault[np.maximum(parent, 0)] & ~latent)
        preferred = pool[on_goal_path[pool] == (rng.random() < 0.7)]
        pool = preferred if len(preferred) else pool
        if len(pool):
            latent[rng.choice(pool)] = True

    symptomatic = (anc & fault[:, None]).any(axis=0)
    checked = ~symptomatic & (rng.random(n) < 0.3)

    ids = rng.permutation(n)  # ids[v] = node id of creation-order node v
    arrays = empty_graph_np()
    arrays["nmask"][:n] = True
    arrays["ntype"][ids] = config.COMPONENT
    arrays["goal"][ids] = goal
    arrays["attr"][ids, A_DEPTH] = depth / 6.0
    arrays["attr"][ids, A_LEAF] = leaf
    arrays["attr"][ids, A_QREPAIR] = p["q_repair"]
    for v in range(n):
        if parent[v] >= 0:
            arrays["etype"][ids[parent[v]], ids[v]] = config.PROPAGATES
    hidden = np.stack([fault, latent, np.zeros(n, bool), checked, np.zeros(n, bool)], axis=1)
    arrays["hidden"][ids] = hidden
    arrays["status"][ids] = np.where(
        symptomatic, config.FAILED, np.where(checked, config.COMPLETED, config.PENDING)
    )
    arrays["anc"] = ancestor_closure_np(arrays["etype"], arrays["nmask"])
    return arrays


BENCH = common.Bench(
    name="repairflow",
    candidates=candidates,
    valid=valid,
    branches=branches,
    sample=sample,
    dstar=dstar,
    dstar_obs=dstar_obs,
    decode=decode,
    explain=explain,
    sample_task=sample_task,
)
