"""ResourceAlloc: jobs contend for per-resource capacity on a bipartite graph (docs/gilp/spec.md §2.4).

Node attributes:
  resources: `attr[0] = capacity / 3`, `attr[1] = load / 3` (recomputed after every step),
    `attr[2] = 1` on the escalation resource e*, `attr[3] = p_fail`, the per-job failure
    probability of a release (0.05 ID / 0.10 OOD; bsjax choice: stored on every resource so
    that `release(r)` reads it from r itself and the pure functions need no task-level field).
  jobs: no attributes (home and assignment are the incoming `can_serve` / `assigned` edge).

Actions: `assign(r, j)` (kind 0), `release(r)` (kind 1), `escalate(j)` (kind 2, i = j).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config
from bsjax.gilp.envs import common
from bsjax.gilp.types import Graph, ancestor_closure_np, empty_graph_np

ASSIGN, RELEASE, ESCALATE = 0, 1, 2
A_CAP, A_LOAD, A_ESCALATION, A_PFAIL = 0, 1, 2, 3
P_FAIL = {"id": 0.05, "ood": 0.10}


# ---------------------------------------------------------------------------------------------
# Observable helpers (all `[N]` unless stated)

def _is_resource(g: Graph) -> jax.Array:
    return g.nmask & (g.ntype == config.RESOURCE)


def _is_job(g: Graph) -> jax.Array:
    return g.nmask & (g.ntype == config.JOB)


def _capacity(g: Graph) -> jax.Array:
    """`[N]` int32 capacity of each resource (0 elsewhere)."""
    return jnp.where(_is_resource(g), jnp.round(g.attr[:, A_CAP] * 3.0), 0).astype(jnp.int32)


def _load(etype: jax.Array) -> jax.Array:
    """`[N]` int32 number of `assigned` edges out of each node."""
    return jnp.sum(etype == config.ASSIGNED, axis=1, dtype=jnp.int32)


def _escalation_resource(g: Graph) -> jax.Array:
    """`[]` int32 id of e*."""
    return jnp.argmax(_is_resource(g) & (g.attr[:, A_ESCALATION] > 0.5)).astype(jnp.int32)


def _refresh(g: Graph) -> Graph:
    """Recompute load (attr[1]) and resource statuses after edges changed; FAILED stays FAILED."""
    is_res = _is_resource(g)
    load = _load(g.etype)
    attr = g.attr.at[:, A_LOAD].set(jnp.where(is_res, load / 3.0, g.attr[:, A_LOAD]))
    busy = jnp.where(load >= 1, config.ACTIVE, config.PENDING).astype(jnp.int8)
    status = jnp.where(is_res & (g.status != config.FAILED), busy, g.status)
    return g.replace(attr=attr, status=status)


def _in_range(index: jax.Array) -> jax.Array:
    return (index >= 0) & (index < config.N_MAX)


# ---------------------------------------------------------------------------------------------
# Rules

def candidates(g: Graph) -> tuple[jax.Array, jax.Array]:
    """Every well-typed action in canonical order, padded to A_MAX.

    Returns:
      acts: `[A, 3]` int32 (kind, i, j); padding slots are (-1, -1, -1).
      amask: `[A]` bool real candidates.
    """
    n = config.N_MAX
    ids = jnp.arange(n, dtype=jnp.int32)
    is_res, is_job = _is_resource(g), _is_job(g)
    # The flat layout [assign (r, j) row-major | release r | escalate j] is already canonical order.
    pair_r, pair_j = jnp.repeat(ids, n), jnp.tile(ids, n)
    kind = jnp.concatenate([jnp.full(n * n, ASSIGN), jnp.full(n, RELEASE), jnp.full(n, ESCALATE)])
    first = jnp.concatenate([pair_r, ids, ids])
    second = jnp.concatenate([pair_j, jnp.full(2 * n, -1)])
    real = jnp.concatenate([(is_res[:, None] & is_job[None, :]).reshape(-1), is_res, is_job])
    (slots,) = jnp.nonzero(real, size=config.A_MAX, fill_value=0)
    amask = jnp.arange(config.A_MAX) < jnp.sum(real)
    acts = jnp.stack([kind[slots], first[slots], second[slots]], axis=1).astype(jnp.int32)
    return jnp.where(amask[:, None], acts, -1), amask


def valid(g: Graph, a: jax.Array) -> jax.Array:
    """`[]` bool: the action's precondition holds (spec §2.4 rules table)."""
    kind, i, j = a[0], a[1], a[2]
    r, job = jnp.clip(i, 0, config.N_MAX - 1), jnp.clip(j, 0, config.N_MAX - 1)
    is_res, is_job = _is_resource(g), _is_job(g)
    load = _load(g.etype)
    assign_ok = (_in_range(j) & is_res[r] & is_job[job] & (g.status[job] == config.PENDING)
                 & (g.etype[r, job] == config.CAN_SERVE) & (g.status[r] != config.FAILED)
                 & (load[r] < _capacity(g)[r]))
    release_ok = is_res[r] & (g.status[r] == config.ACTIVE)
    escalate_ok = is_job[r] & ((g.status[r] == config.PENDING) | (g.status[r] == config.FAILED))
    ok = jnp.where(kind == ASSIGN, assign_ok,
                   jnp.where(kind == RELEASE, release_ok, (kind == ESCALATE) & escalate_ok))
    return ok & _in_range(i)


def _release(g: Graph, r: jax.Array, job_outcome: int) -> Graph:
    """Release r with every job on it ending in `job_outcome` (COMPLETED or FAILED)."""
    on_r = g.etype[r] == config.ASSIGNED
    rows = jnp.arange(config.N_MAX) == r
    etype = jnp.where(rows[:, None] & on_r[None, :], jnp.int8(config.CAN_SERVE), g.etype)
    status = jnp.where(on_r, jnp.int8(job_outcome), g.status)
    return _refresh(g.replace(status=status, etype=etype))


def _release_q(g: Graph, r: jax.Array) -> jax.Array:
    """q(release r) = 1 − Π(1 − p_fail) over the jobs on r."""
    jobs_on = jnp.sum(g.etype[r] == config.ASSIGNED)
    return 1.0 - (1.0 - g.attr[r, A_PFAIL]) ** jobs_on


def branches(g: Graph, a: jax.Array) -> tuple[Graph, Graph, jax.Array]:
    """`(g_succ, g_fail, q)`; an invalid action gives `(g, g, 0)`. Only release is stochastic."""
    kind = a[0]
    r, job = jnp.clip(a[1], 0, config.N_MAX - 1), jnp.clip(a[2], 0, config.N_MAX - 1)
    assigned = _refresh(g.replace(status=g.status.at[job].set(config.ACTIVE),
                                  etype=g.etype.at[r, job].set(config.ASSIGNED)))
    released, released_failed = _release(g, r, config.COMPLETED), _release(g, r, config.FAILED)
    # escalate(j) has j in slot i; its single home edge moves to e*.
    home_column = jnp.where(jnp.arange(config.N_MAX) == _escalation_resource(g), config.CAN_SERVE,
                            config.NO_EDGE).astype(jnp.int8)
    escalated = _refresh(g.replace(status=g.status.at[r].set(config.PENDING),
                                   etype=g.etype.at[:, r].set(home_column)))
    succ = common.select_graph(kind == ASSIGN, assigned,
                               common.select_graph(kind == RELEASE, released, escalated))
    fail = common.select_graph(kind == RELEASE, released_failed, succ)
    ok = valid(g, a)
    q = jnp.where(ok & (kind == RELEASE), _release_q(g, r), 0.0).astype(jnp.float32)
    return common.select_graph(ok, succ, g), common.select_graph(ok, fail, g), q


def sample(key: jax.Array, g: Graph, a: jax.Array) -> tuple[Graph, jax.Array]:
    """One outcome: each job on a released resource fails independently w.p. p_fail.

    The key is consumed. Returns `(g_next, failed)` with `failed` True when some job failed.
    """
    g_succ, g_fail, _ = branches(g, a)
    p_job = g.attr[jnp.clip(a[1], 0, config.N_MAX - 1), A_PFAIL]
    # Success and failure branches differ only in the released jobs' statuses.
    job_fails = jax.random.uniform(key, (config.N_MAX,)) < p_job
    differs = g_succ.status != g_fail.status
    status = jnp.where(job_fails & differs, g_fail.status, g_succ.status)
    return g_succ.replace(status=status), jnp.any(job_fails & differs)


def dstar(g: Graph) -> jax.Array:
    """`[]` int32 exact oracle distance (spec §2.4):
    d* = esc + Σ_r [n_r + (g_r + n_r > 0)·⌈(a_r + n_r) / c_r⌉] over non-FAILED resources."""
    is_res, is_job = _is_resource(g), _is_job(g)
    home = ((g.etype == config.CAN_SERVE) | (g.etype == config.ASSIGNED)) & is_res[:, None] & is_job[None, :]
    assigned = (g.etype == config.ASSIGNED) & home
    res_down = is_res & (g.status == config.FAILED)
    home_down = jnp.any(home & res_down[:, None], axis=0)
    goal_job = is_job & g.goal
    pending = g.status == config.PENDING
    forced = goal_job & ((g.status == config.FAILED) | (pending & home_down))
    esc = jnp.sum(forced, dtype=jnp.int32)
    a_r = jnp.sum(assigned, axis=1, dtype=jnp.int32)
    g_r = jnp.sum(assigned & goal_job[None, :], axis=1, dtype=jnp.int32)
    queued = goal_job & pending & ~home_down
    is_estar = jnp.arange(config.N_MAX) == _escalation_resource(g)
    n_r = jnp.sum(home & queued[None, :], axis=1, dtype=jnp.int32) + jnp.where(is_estar, esc, 0)
    cap = jnp.maximum(_capacity(g), 1)
    releases = jnp.where(g_r + n_r > 0, (a_r + n_r + cap - 1) // cap, 0)
    per_resource = jnp.where(is_res & ~res_down, n_r + releases, 0)
    return jnp.minimum(esc + jnp.sum(per_resource), config.UNSOLV).astype(jnp.int32)


# ResourceAlloc has no hidden state: the observable distance is the distance.
dstar_obs = dstar

DECODE_TABLE = common.decode_table([
    (ASSIGN, config.ROLE_ARG1, config.PENDING, +1, config.ACTIVE),
    (ASSIGN, config.ROLE_ARG2, config.PENDING, +1, config.ACTIVE),
    (RELEASE, config.ROLE_ARG1, config.ACTIVE, -1, config.PENDING),
    (RELEASE, config.ROLE_OTHER, config.ACTIVE, +1, config.COMPLETED),
    (RELEASE, config.ROLE_OTHER, config.ACTIVE, -1, config.FAILED),
    (ESCALATE, config.ROLE_ARG1, config.FAILED, +1, config.PENDING),
])


def decode(g: Graph, a: jax.Array, dirs: jax.Array) -> jax.Array:
    """`[N]` int8 next statuses that the direction vector `dirs [N]` stands for."""
    return common.decode_with_table(DECODE_TABLE, g.status, common.roles_of(a), a[0], dirs)


# ---------------------------------------------------------------------------------------------
# Host side: explanations and the generator

def explain(graph: dict, action: tuple) -> list[str]:
    """Observable reasons an action is invalid (spec §5.1 templates); never reads `hidden`."""
    kind, i, j = (int(x) for x in action)
    status = np.asarray(graph["status"])
    etype = np.asarray(graph["etype"])
    name = lambda s: config.STATUS_NAMES[int(s)]  # noqa: E731
    reasons: list[str] = []
    if kind == ASSIGN:
        if status[j] != config.PENDING:
            reasons.append(f"{config.node_name(j)} is {name(status[j])}, not pending")
        elif etype[i, j] != config.CAN_SERVE:
            reasons.append(f"{config.node_name(j)} is not served by {config.node_name(i)}")
        if status[i] == config.FAILED:
            reasons.append(f"{config.node_name(i)} is failed, not pending or active")
        load = int((etype[i] == config.ASSIGNED).sum())
        capacity = int(round(float(np.asarray(graph["attr"])[i, A_CAP]) * 3))
        if load >= capacity:
            reasons.append(f"resource {config.node_name(i)} is at capacity ({load}/{capacity})")
    elif kind == RELEASE and status[i] != config.ACTIVE:
        reasons.append(f"{config.node_name(i)} is {name(status[i])}, not active")
    elif kind == ESCALATE and status[i] not in (config.PENDING, config.FAILED):
        reasons.append(f"{config.node_name(i)} is {name(status[i])}, not pending or failed")
    return reasons


def _params(split: str) -> dict:
    if split == "test_ood":
        return dict(regular=(3, 4), cap_p=(0.5, 0.4, 0.1), jobs=(6, 14), preassign=0.6,
                    down=0.7, p_fail=P_FAIL["ood"])
    return dict(regular=(2, 3), cap_p=(0.3, 0.5, 0.2), jobs=(3, 8), preassign=0.3, down=0.0,
                p_fail=P_FAIL["id"])


def sample_task(rng: np.random.Generator, split: str) -> dict | None:
    """One raw draw of the generator (spec §2.7), or None when it exceeds R + 1 + J <= 19.

    Layout before the id permutation: regular resources, e*, queued jobs, then the pre-assigned
    (ACTIVE, non-goal) jobs, which are extra jobs on top of the J drawn ones (bsjax reading).
    """
    p = _params(split)
    n_res = int(rng.integers(p["regular"][0], p["regular"][1] + 1))
    caps = rng.choice([1, 2, 3], size=n_res, p=p["cap_p"])
    n_jobs = int(rng.integers(p["jobs"][0], p["jobs"][1] + 1))
    homes = rng.integers(0, n_res, size=n_jobs)
    goals = rng.random(n_jobs) < 0.8
    if not goals.any():
        goals[rng.integers(n_jobs)] = True
    down = int(rng.integers(n_res)) if rng.random() < p["down"] else -1
    # A down resource runs nothing (its jobs could never be released).
    pre_homes = [r for r in range(n_res) if rng.random() < p["preassign"] and r != down]
    estar = n_res
    n_total = n_res + 1 + n_jobs + len(pre_homes)
    if n_total > 19:
        return None
    ids = rng.permutation(n_total)  # ids[k] = node id of the k-th node in the layout above
    arrays = empty_graph_np()
    arrays["nmask"][:n_total] = True
    res_ids = ids[:n_res + 1]
    arrays["ntype"][res_ids] = config.RESOURCE
    arrays["attr"][res_ids, A_CAP] = np.append(caps, 1) / 3.0
    arrays["attr"][res_ids, A_PFAIL] = p["p_fail"]
    arrays["attr"][ids[estar], A_ESCALATION] = 1.0
    if down >= 0:
        arrays["status"][ids[down]] = config.FAILED
    for k, home in enumerate(homes):
        job = ids[n_res + 1 + k]
        arrays["ntype"][job] = config.JOB
        arrays["goal"][job] = goals[k]
        arrays["etype"][ids[home], job] = config.CAN_SERVE
    for k, home in enumerate(pre_homes):
        job = ids[n_res + 1 + n_jobs + k]
        arrays["ntype"][job] = config.JOB
        arrays["status"][job] = config.ACTIVE
        arrays["etype"][ids[home], job] = config.ASSIGNED
    load = (arrays["etype"] == config.ASSIGNED).sum(axis=1)
    arrays["attr"][res_ids, A_LOAD] = load[res_ids] / 3.0
    busy = res_ids[(load[res_ids] >= 1) & (arrays["status"][res_ids] != config.FAILED)]
    arrays["status"][busy] = config.ACTIVE
    # No structural edges: anc is the identity on real nodes (unused by ResourceAlloc).
    arrays["anc"] = ancestor_closure_np(arrays["etype"], arrays["nmask"])
    return arrays


BENCH = common.Bench(name="resourcealloc", candidates=candidates, valid=valid, branches=branches,
                     sample=sample, dstar=dstar, dstar_obs=dstar_obs, decode=decode,
                     explain=explain, sample_task=sample_task)
