"""What the four benchmarks share: the `Bench` interface, status directions, decode tables, and
everything derived from a benchmark's rules — modal outcome, support, reward, oracle policy,
J_K value, risk target and the sampled environment step (docs/gilp/spec.md §2.1, §2.6).

A benchmark module supplies the rules as pure single-task functions (see `Bench`); the functions
here are written once on top of them. All of them are pure, jittable and written for ONE task;
callers vmap over candidates and tasks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config
from bsjax.gilp.types import Graph, StepInfo

Action = jax.Array  # [3] int32 (kind, i, j); j = -1 unless the action has a second argument


@dataclasses.dataclass(frozen=True, eq=False)
class Bench:
    """One benchmark's rules, as pure single-task functions (spec §8 "Pure environments").

    Attributes:
      name: benchmark name (`taskgraph`, ...).
      candidates: `g -> (acts [A, 3] int32, amask [A] bool)`, every well-typed action on an
        existing node in canonical order (kind-major, then i, then j); padding slots kind = -1.
      valid: `(g, a) -> [] bool`.
      branches: `(g, a) -> (g_succ, g_fail, q)`: the success and failure branches and the failure
        probability q; an invalid action gives `(g, g, 0)`.
      sample: `(key, g, a) -> (g_next, failed)`: one outcome with every stochastic component
        drawn independently (the key is consumed); an invalid action gives `(g, False)`.
      dstar: `g -> [] int32` exact oracle distance (`UNSOLV` for dead ends); may read `hidden`.
      dstar_obs: `g -> [] int32` the distance computed from observable fields only.
      decode: `(g, a, direction [N]) -> status [N]`, the next statuses a predicted direction
        vector stands for.
      explain: host-side `(graph_np, action tuple) -> list[str]` observable reasons an action is
        invalid or risky.
      sample_task: host-side `(rng, split) -> dict of padded arrays` one raw draw of the
        generator (before the horizon acceptance loop).
    """

    name: str
    candidates: Callable
    valid: Callable
    branches: Callable
    sample: Callable
    dstar: Callable
    dstar_obs: Callable
    decode: Callable
    explain: Callable
    sample_task: Callable

    @property
    def kinds(self) -> tuple[str, str, str]:
        return config.ACTION_KINDS[self.name]


STATUS_RANK = jnp.asarray(config.STATUS_RANK, jnp.int32)


def direction(before: jax.Array, after: jax.Array) -> jax.Array:
    """dir(s, s') in {-1, 0, +1} per node: 0 if unchanged, else the sign of the rank change,
    +1 when the ranks are equal (COMPLETED <-> SKIPPED). Shapes broadcast; int8 out."""
    rank_change = STATUS_RANK[after.astype(jnp.int32)] - STATUS_RANK[before.astype(jnp.int32)]
    moved = jnp.where(rank_change == 0, 1, jnp.sign(rank_change))
    return jnp.where(before == after, 0, moved).astype(jnp.int8)


# The fallback ladder for directions the benchmark's table does not list (spec §2.1), indexed
# [dir index (0 = -1, 1 = +1), from status] -> to status.
FALLBACK_LADDER = np.array([
    [config.FAILED, config.PENDING, config.PENDING, config.FAILED, config.PENDING],       # -1
    [config.ACTIVE, config.COMPLETED, config.SKIPPED, config.PENDING, config.SKIPPED],    # +1
], np.int8)


def decode_table(entries: list[tuple[int, int, int, int, int]]) -> np.ndarray:
    """A dense decode table `[3 kinds, 3 roles, 5 from, 2 dirs] -> to status or -1`.

    Args:
      entries: `(kind, role, from_status, dir, to_status)` rows, dir in {-1, +1}.
    """
    table = np.full((3, 3, config.N_STATUS, 2), -1, np.int8)
    for kind, role, before, sign, after in entries:
        table[kind, role, before, (sign + 1) // 2] = after
    return table


def decode_with_table(table: np.ndarray, status: jax.Array, roles: jax.Array, kind: jax.Array,
                      dirs: jax.Array) -> jax.Array:
    """Next statuses from a dense decode table, falling back to the ladder.

    Args:
      table: `[3, 3, 5, 2]` from `decode_table`.
      status: `[N]` current statuses.
      roles: `[N]` ROLE_ARG1 / ROLE_ARG2 / ROLE_OTHER per node.
      kind: `[]` action kind (a padding kind of -1 decodes every direction by the ladder).
      dirs: `[N]` predicted directions in {-1, 0, +1}.
    Returns:
      `[N]` int8 next statuses; nodes with direction 0 keep their status.
    """
    status_i = status.astype(jnp.int32)
    dir_index = (jnp.clip(dirs.astype(jnp.int32), -1, 1) + 1) // 2
    listed = jnp.asarray(table)[jnp.clip(kind, 0, 2), roles, status_i, dir_index]
    listed = jnp.where(kind >= 0, listed, -1)
    ladder = jnp.asarray(FALLBACK_LADDER)[dir_index, status_i]
    moved = jnp.where(listed >= 0, listed, ladder)
    return jnp.where(dirs == 0, status, moved).astype(jnp.int8)


def roles_of(action: Action, n: int = config.N_MAX) -> jax.Array:
    """`[N]` int32 role of each node for an action: arg1, arg2 or other."""
    ids = jnp.arange(n)
    return jnp.where(ids == action[1], config.ROLE_ARG1,
                     jnp.where((ids == action[2]) & (action[2] >= 0), config.ROLE_ARG2, config.ROLE_OTHER))


def per_node_candidates(g: Graph) -> tuple[jax.Array, jax.Array]:
    """Each of the three kinds on every real node, in canonical order (kind-major, then i),
    packed to the front and padded to A_MAX: the candidate set of the one-argument benchmarks.

    Returns:
      acts: `[A, 3]` int32 `(kind, i, -1)`; padding slots are `(-1, -1, -1)`.
      amask: `[A]` bool real candidates (a prefix).
    """
    n = g.status.shape[0]
    real = jnp.tile(g.nmask, 3)  # flat slot kind·N + i
    (slots,) = jnp.nonzero(real, size=config.A_MAX, fill_value=0)
    amask = jnp.arange(config.A_MAX) < jnp.sum(real)
    acts = jnp.stack([slots // n, slots % n, jnp.full(config.A_MAX, -1)], axis=-1)
    return jnp.where(amask[:, None], acts, -1).astype(jnp.int32), amask


def argument_node(g: Graph, a: Action) -> tuple[jax.Array, jax.Array]:
    """The (clipped) first argument node and whether the action names a real node with a real
    kind."""
    n = g.status.shape[0]
    node = jnp.clip(a[1], 0, n - 1)
    exists = (a[0] >= 0) & (a[0] <= 2) & (a[1] >= 0) & (a[1] < n) & g.nmask[node]
    return node, exists


def required(g: Graph) -> jax.Array:
    """`[N]` bool R: goal nodes and all their ancestors (over the static closure `anc`)."""
    return jnp.any(g.anc & g.goal[None, :], axis=1) & g.nmask


def sample_one_component(branches: Callable, key: jax.Array, g: Graph,
                         a: Action) -> tuple[Graph, jax.Array]:
    """`(g_next, failed)` for an action with at most one stochastic component: the failure
    branch with probability q, else the success branch. The key is consumed."""
    g_succ, g_fail, q = branches(g, a)
    failed = jax.random.uniform(key) < q
    return select_graph(failed, g_fail, g_succ), failed


def observe(g: Graph) -> Graph:
    """What planners, prompts, backbones and the simulated agent may read: `hidden` zeroed."""
    return g.replace(hidden=jnp.zeros_like(g.hidden))


def select_graph(pred: jax.Array, on_true: Graph, on_false: Graph) -> Graph:
    """`on_true` where `pred` (a scalar) holds, else `on_false`, leaf by leaf."""
    return jax.tree_util.tree_map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


def goals_done(g: Graph) -> jax.Array:
    """`[]` bool: every goal node is COMPLETED."""
    return jnp.all(~g.goal | (g.status == config.COMPLETED))


def modal(bench: Bench, g: Graph, a: Action) -> Graph:
    """The modal successor: the success branch if q <= 0.5, else the failure branch."""
    g_succ, g_fail, q = bench.branches(g, a)
    return select_graph(q <= 0.5, g_succ, g_fail)


def support(bench: Bench, g: Graph, a: Action) -> jax.Array:
    """`[N, 5]` bool: the statuses each node can have after the action with nonzero probability."""
    g_succ, g_fail, q = bench.branches(g, a)
    one_hot = lambda s: jax.nn.one_hot(s.astype(jnp.int32), config.N_STATUS, dtype=bool)  # noqa: E731
    return (one_hot(g_succ.status) & (q < 1)) | (one_hot(g_fail.status) & (q > 0))


def reward(g: Graph, g_next: Graph, dstar_before: jax.Array, dstar_after: jax.Array,
           is_valid: jax.Array) -> jax.Array:
    """r = 1.0·done' + 0.1·clip(min(d*,30) − min(d*',30), −3, 3) − 0.01 − 0.04·[invalid]."""
    progress = jnp.minimum(dstar_before, 30) - jnp.minimum(dstar_after, 30)
    return (goals_done(g_next).astype(jnp.float32) + 0.1 * jnp.clip(progress, -3, 3) - 0.01
            - 0.04 * (~is_valid).astype(jnp.float32))


def rho_star(bench: Bench, g: Graph, a: Action) -> jax.Array:
    """The risk target ρ*: 1 if invalid, else q + (1 − q)·[d*(G_succ) > d*(G)]."""
    g_succ, _, q = bench.branches(g, a)
    worse = (bench.dstar(g_succ) > bench.dstar(g)).astype(jnp.float32)
    return jnp.where(bench.valid(g, a), q + (1.0 - q) * worse, 1.0)


def masked_map(fn: Callable, items, mask: jax.Array, fill, chunk: int = 8):
    """`fn` on the slots of `items` where `mask` holds, `chunk` slots at a time; `fill` elsewhere.

    A `vmap` over every slot pays for the padded and the masked-out ones too; this gathers the
    masked slots to the front and runs a `while_loop` over chunks of them, so the cost follows
    the number of masked slots (under an outer `vmap`: the largest number in the batch). The
    results equal `vmap(fn)(items)` on the masked slots.

    Args:
      fn: `item -> pytree` for one slot. items: pytree with leading axis `[A]`.
      mask: `[A]` bool. fill: pytree like `fn`'s output for one slot.
    Returns:
      pytree with leading axis `[A]`.
    """
    size = mask.shape[0]
    padded = -(-size // chunk) * chunk
    # Masked slots first, in slot order; pad with a spare row that is dropped at the end.
    order = jnp.argsort(~mask, stable=True).astype(jnp.int32)
    order = jnp.concatenate([order, jnp.full(padded - size, size, jnp.int32)])
    mask_padded = jnp.concatenate([mask, jnp.zeros(padded - size + 1, bool)])
    out = jax.tree_util.tree_map(
        lambda f: jnp.broadcast_to(jnp.asarray(f), (padded + 1,) + jnp.shape(f)), fill)
    count = jnp.sum(mask)

    def body(carry):
        start, out = carry
        slots = jax.lax.dynamic_slice(order, (start,), (chunk,))
        picked = jax.tree_util.tree_map(lambda x: x[jnp.minimum(slots, size - 1)], items)
        results = jax.vmap(fn)(picked)
        keep = mask_padded[slots]

        def put(o, r):
            keep_r = keep.reshape(keep.shape + (1,) * (r.ndim - 1))
            return o.at[slots].set(jnp.where(keep_r, r, o[slots]))

        return start + chunk, jax.tree_util.tree_map(put, out, results)

    _, out = jax.lax.while_loop(lambda carry: carry[0] < count, body, (jnp.int32(0), out))
    return jax.tree_util.tree_map(lambda o: o[:size], out)


def valid_mask(bench: Bench, g: Graph, acts: jax.Array, amask: jax.Array) -> jax.Array:
    """`[A]` bool: which of the candidate slots hold a valid action."""
    return amask & jax.vmap(lambda a: bench.valid(g, a))(acts)


def valid_candidates(bench: Bench, g: Graph) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`(acts [A, 3], amask [A], valid [A])`: the candidates and which of them are valid."""
    acts, amask = bench.candidates(g)
    return acts, amask, valid_mask(bench, g, acts, amask)


def _distance_ranking(bench: Bench, g: Graph, distance: Callable | None) -> tuple[jax.Array,
                                                                                  jax.Array]:
    """Oracle choice by `1 + distance(modal(g, a))`, ties to lower ρ* then lower index.

    `distance=None` means `bench.dstar`. An invalid candidate's modal successor is `g` and its
    ρ* is 1, so only the valid candidates are evaluated (`masked_map`), each with one call of
    the rules: ρ* = q + (1 − q)·[d*(g_succ) > d*(g)] and, for `dstar`, d*(modal) is d* of the
    branch that `modal` picks."""
    acts, amask, ok = valid_candidates(bench, g)
    d_here = bench.dstar(g)

    def key_of(a):
        g_succ, g_fail, q = bench.branches(g, a)
        d_succ = bench.dstar(g_succ)
        if distance is None:
            after = jnp.where(q <= 0.5, d_succ, bench.dstar(g_fail))
        else:
            after = distance(select_graph(q <= 0.5, g_succ, g_fail))
        risk = q + (1.0 - q) * (d_succ > d_here).astype(jnp.float32)
        # Lexicographic key (distance, risk, index) as one float: risk lies in [0, 1].
        return after.astype(jnp.float32) * 4.0 + risk

    here = (d_here if distance is None else distance(g)).astype(jnp.float32)
    key = masked_map(key_of, acts, ok, here * 4.0 + 1.0)
    key = jnp.where(amask, key, jnp.inf)
    return jnp.argmin(key), acts


def oracle_action(bench: Bench, g: Graph) -> Action:
    """argmin_a (1 + d*(modal(g, a))), ties by lower p_bad (= ρ*), then canonical index."""
    index, acts = _distance_ranking(bench, g, None)
    return acts[index]


def oracle_obs_action(bench: Bench, g: Graph) -> Action:
    """The oracle on `d*_obs`: what an agent that reads only the observable state would pick."""
    index, acts = _distance_ranking(bench, g, bench.dstar_obs)
    return acts[index]


def advance(g: Graph, g_next: Graph) -> Graph:
    """The successor with the step counter moved on."""
    return g_next.replace(t=g.t + 1)


def step(bench: Bench, key: jax.Array, g: Graph, a: Action) -> tuple[Graph, StepInfo]:
    """One environment step with independently sampled failures. The key is consumed."""
    is_valid = bench.valid(g, a)
    g_next, failed = bench.sample(key, g, a)
    d_before, d_after = bench.dstar(g), bench.dstar(g_next)
    info = StepInfo(valid=is_valid, failed=failed & is_valid,
                    reward=reward(g, g_next, d_before, d_after, is_valid),
                    done=goals_done(g_next), dstar_before=d_before, dstar_after=d_after,
                    delta=direction(g.status, g_next.status))
    return advance(g, g_next), info


def modal_step(bench: Bench, g: Graph, a: Action) -> tuple[Graph, jax.Array]:
    """The modal successor (counter moved on) and the modal reward."""
    g_next = modal(bench, g, a)
    r = reward(g, g_next, bench.dstar(g), bench.dstar(g_next), bench.valid(g, a))
    return advance(g, g_next), r


def _oracle_continuation(bench: Bench, g1: Graph, r0: jax.Array, horizon: int,
                         gamma: float) -> jax.Array:
    """`r0 + Σ_{1≤i<K} γ^i r_i` following the oracle from `g1` under modal outcomes; accumulation
    stops after done."""
    def body(carry, _):
        graph, total, discount, alive = carry
        g_next, r = modal_step(bench, graph, oracle_action(bench, graph))
        total = total + jnp.where(alive, discount * r, 0.0)
        alive = alive & ~goals_done(g_next)
        return (g_next, total, discount * gamma, alive), None

    init = (g1, r0, jnp.float32(gamma), ~goals_done(g1))
    (_, total, _, _), _ = jax.lax.scan(body, init, None, length=horizon - 1)
    return total


def value(bench: Bench, g: Graph, a: Action, horizon: int = 4, gamma: float = 0.9) -> jax.Array:
    """J_K(g, a) = Σ_{i<K} γ^i r_i: take `a`, then the oracle for K−1 steps under modal outcomes;
    accumulation stops after done."""
    g1, r0 = modal_step(bench, g, a)
    return _oracle_continuation(bench, g1, r0, horizon, gamma)


def candidate_values(bench: Bench, g: Graph, acts: jax.Array, amask: jax.Array, horizon: int = 4,
                     gamma: float = 0.9) -> jax.Array:
    """`[A]` float32 J_K(g, a) of every candidate (`value`), -inf on padding.

    Every invalid candidate leaves `g` as it is, so they share one value, computed once; the
    valid ones are evaluated through `masked_map`."""
    ok = valid_mask(bench, g, acts, amask)
    d_here = bench.dstar(g)
    stay = _oracle_continuation(bench, advance(g, g), reward(g, g, d_here, d_here, jnp.bool_(False)),
                                horizon, gamma)
    values = masked_map(lambda a: value(bench, g, a, horizon, gamma), acts, ok, stay)
    return jnp.where(amask, values, -jnp.inf)


def labels(bench: Bench, g: Graph, a: Action, horizon: int = 4, gamma: float = 0.9) -> dict:
    """The backbone's training targets for (g, a), on the modal outcome (spec §3.2).

    Returns a dict of: `valid` [] bool, `delta` [N] int8 (zeros for invalid actions), `reward` [],
    `done` [] bool, `risk` [] float32 (ρ*), `value` [] float32 (J_K), `next_status` [N] int8.
    """
    is_valid = bench.valid(g, a)
    g_next = modal(bench, g, a)
    d_before, d_after = bench.dstar(g), bench.dstar(g_next)
    delta = jnp.where(is_valid, direction(g.status, g_next.status), 0).astype(jnp.int8)
    return {
        "valid": is_valid, "delta": delta,
        "reward": reward(g, g_next, d_before, d_after, is_valid),
        "done": goals_done(g_next), "risk": rho_star(bench, g, a),
        "value": value(bench, g, a, horizon, gamma), "next_status": g_next.status,
    }
