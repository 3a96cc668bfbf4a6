"""The backbone on a graph's candidate actions and the imagined successors it predicts
(docs/gilp/spec.md §4.3), shared by the parametric planners, the GILP skeleton and the agent sim.

**imagine** (spec §4.3): the backbone's predicted successor. Statuses come from the argmax delta
decoded by the benchmark's `decode` tables; the state is kept unchanged when the backbone predicts
the action invalid (`sigmoid(valid_logit) < 0.5`). For ResourceAlloc the deterministic edge
rewiring of the rules is applied on top (`resourcealloc_rewire`); it reads only observable fields.
The step counter `t` is not advanced (no backbone reads it).

**Slot cuts** (`sizes`, `planning_sizes`): planners may run the backbone on only the node slots
and candidate slots a task set uses (static, rounded up). Backbones are padding-invariant, so the
decisions are those of the full-size computation up to float rounding, at a fraction of the cost
(MPNN work grows with N²·A). The environment functions always see full N_MAX graphs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config
from bsjax.gilp.backbones.features import graph_inputs
from bsjax.gilp.backbones.layers import BackboneOut
from bsjax.gilp.envs import common
from bsjax.gilp.envs.common import Bench
from bsjax.gilp.types import Graph, graph_from_np

# Optional static (n_nodes, n_actions) slot cuts, see `planning_sizes`.
Sizes = tuple[int, int] | None


def score_candidates(model: Callable, g: Graph, acts: jax.Array,
                     n_nodes: int | None = None) -> BackboneOut:
    """The backbone on every candidate of one graph: one vmapped call (spec §8).

    Args:
      model: a backbone, `model(graph_inputs(g), action) -> BackboneOut`.
      g: one observed graph with `N` node slots.
      acts: `[A, 3]` candidate actions.
      n_nodes: optional static count `n <= N` of leading node slots that hold every real node.
        The backbone then runs on the first n slots only (backbones are size-agnostic and
        padding-invariant, so real-node outputs agree up to float rounding) and the delta logits
        of the cut-off padding slots are filled with "no change".
    Returns:
      `BackboneOut` with a leading `[A]` axis (`delta_logits` `[A, N, 3]`).
    """
    n = g.status.shape[0]
    if n_nodes is None or n_nodes >= n:
        return jax.vmap(model, in_axes=(None, 0))(graph_inputs(g), acts)
    cut = g.replace(status=g.status[:n_nodes], ntype=g.ntype[:n_nodes], goal=g.goal[:n_nodes],
                    attr=g.attr[:n_nodes], etype=g.etype[:n_nodes, :n_nodes],
                    anc=g.anc[:n_nodes, :n_nodes], hidden=g.hidden[:n_nodes],
                    nmask=g.nmask[:n_nodes])
    outs = jax.vmap(model, in_axes=(None, 0))(graph_inputs(cut), acts)
    no_change = jnp.broadcast_to(jnp.asarray([0.0, 1.0, 0.0], outs.delta_logits.dtype),
                                 (acts.shape[0], n - n_nodes, 3))
    return outs._replace(delta_logits=jnp.concatenate([outs.delta_logits, no_change], axis=1))


def planning_candidates(bench: Bench, g: Graph, n_actions: int | None = None
                        ) -> tuple[jax.Array, jax.Array]:
    """`bench.candidates(g)` cut to the first `n_actions` slots (static; must cover every real
    candidate: candidate lists are packed to the front). Slot indices are unchanged."""
    acts, amask = bench.candidates(g)
    if n_actions is None:
        return acts, amask
    return acts[:n_actions], amask[:n_actions]


def take(outs: BackboneOut, slot: jax.Array) -> BackboneOut:
    """The outputs of one candidate slot."""
    return jax.tree_util.tree_map(lambda x: x[slot], outs)


def predicted_valid(out: BackboneOut) -> jax.Array:
    """`sigmoid(valid_logit) ≥ 0.5`, i.e. `valid_logit ≥ 0` (any leading shape)."""
    return out.valid_logit >= 0.0


def predicted_directions(out: BackboneOut) -> jax.Array:
    """`[N]` int8 argmax delta direction in {−1, 0, +1}."""
    return (jnp.argmax(out.delta_logits, axis=-1) - 1).astype(jnp.int8)


def resourcealloc_rewire(g: Graph, action: jax.Array) -> Graph:
    """ResourceAlloc's deterministic structural update of an action assumed to take effect
    (spec §2.4, §4.3); reads only observable fields, statuses untouched.

    - `assign(r, j)`: a `can_serve` edge r → j becomes `assigned`;
    - `release(r)`: every `assigned` edge out of r reverts to `can_serve`;
    - `escalate(j)`: j's home edge moves to the escalation resource e* (`attr[2] = 1`):
      column j becomes a single `can_serve` edge from e*;
    then the load `attr[:, 1] = #assigned out-edges / 3` is recomputed on every resource.

    Args:
      g: one observed ResourceAlloc graph.
      action: `[3]` int (kind, i, j) with kinds assign 0, release 1, escalate 2.
    """
    n = g.status.shape[0]
    ids = jnp.arange(n)
    kind, i, j = action[0], action[1], action[2]
    first, second = jnp.clip(i, 0, n - 1), jnp.clip(j, 0, n - 1)
    is_res = g.nmask & (g.ntype == config.RESOURCE)
    is_job = g.nmask & (g.ntype == config.JOB)
    in_range = (i >= 0) & (i < n)
    rows = (ids == first)[:, None]
    etype = g.etype
    assign = ((kind == 0) & in_range & (j >= 0) & (j < n) & is_res[first] & is_job[second]
              & rows & (ids == second)[None, :] & (etype == config.CAN_SERVE))
    etype = jnp.where(assign, jnp.int8(config.ASSIGNED), etype)
    release = (kind == 1) & in_range & is_res[first] & rows & (etype == config.ASSIGNED)
    etype = jnp.where(release, jnp.int8(config.CAN_SERVE), etype)
    estar = jnp.argmax(is_res & (g.attr[:, 2] > 0.5))
    home = jnp.where(ids == estar, config.CAN_SERVE, config.NO_EDGE).astype(jnp.int8)
    escalate = (kind == 2) & in_range & is_job[first] & (ids == first)[None, :]
    etype = jnp.where(escalate, home[:, None], etype)
    load = jnp.sum(etype == config.ASSIGNED, axis=1).astype(jnp.float32)
    attr = g.attr.at[:, 1].set(jnp.where(is_res, load / 3.0, g.attr[:, 1]))
    return g.replace(etype=etype, attr=attr)


def imagine(bench: Bench, g_obs: Graph, action: jax.Array, out: BackboneOut) -> Graph:
    """The backbone's imagined successor `Ĝ' = imagine(Ĝ, a)` (spec §4.3).

    Args:
      bench: the benchmark (its `decode` tables; `resourcealloc` adds the edge rewiring).
      g_obs: one observed graph (hidden zeroed).
      action: `[3]` the action.
      out: the backbone's outputs for `(g_obs, action)` (no leading axis).
    Returns:
      The imagined graph: statuses decoded from argmax ΔĜ on real nodes, or `g_obs` unchanged
      when `sigmoid(valid_logit) < 0.5`; for ResourceAlloc also `resourcealloc_rewire`.
    """
    dirs = jnp.where(g_obs.nmask, predicted_directions(out), 0).astype(jnp.int8)
    status = bench.decode(g_obs, action, dirs).astype(jnp.int8)
    moved = g_obs.replace(status=jnp.where(g_obs.nmask, status, g_obs.status))
    if bench.name == "resourcealloc":
        moved = resourcealloc_rewire(moved, action)
    return common.select_graph(predicted_valid(out), moved, g_obs)


def max_value(outs: BackboneOut, amask: jax.Array) -> jax.Array:
    """`[]` max_a Ĵ_K over the real candidates."""
    return jnp.max(jnp.where(amask, outs.value, -jnp.inf))


def greedy_slot(outs: BackboneOut, amask: jax.Array) -> jax.Array:
    """`[]` int32 argmax Ĵ_K over candidates predicted valid, else argmax p_valid (lower slot on
    ties)."""
    allowed = amask & predicted_valid(outs)
    by_value = jnp.argmax(jnp.where(allowed, outs.value, -jnp.inf))
    by_validity = jnp.argmax(jnp.where(amask, outs.valid_logit, -jnp.inf))
    return jnp.where(jnp.any(allowed), by_value, by_validity).astype(jnp.int32)


def lowest_argmax(scores: jax.Array, slots: jax.Array) -> jax.Array:
    """The lowest slot among those whose score equals the maximum (scores `[M]`, slots `[M]`)."""
    best = jnp.max(scores)
    return jnp.min(jnp.where(scores == best, slots, jnp.iinfo(jnp.int32).max)).astype(jnp.int32)


GRAPH_FIELDS = ("status", "ntype", "goal", "attr", "etype", "anc", "hidden", "nmask", "t", "budget",
                "horizon")


@functools.cache
def _candidates_batch(bench: Bench) -> Callable:
    return jax.jit(jax.vmap(bench.candidates))


def _round_up(value: int, multiple: int, cap: int) -> int:
    return min(cap, max(multiple, -(-value // multiple) * multiple))


def planning_sizes(bench: Bench, tasks: dict) -> tuple[int, int]:
    """Static `(n_nodes, n_actions)` slot cuts that cover every real node and candidate of the
    given tasks (host-side; `tasks` are stacked arrays `[T, ...]`), rounded up to multiples of 4
    and 8 so that similar task sets share a compiled planner."""
    nmask = np.asarray(tasks["nmask"], bool)
    last_node = int(np.max(np.nonzero(nmask.any(0))[0], initial=0)) + 1
    graphs = {name: np.asarray(tasks[name]) for name in GRAPH_FIELDS}
    _, amask = _candidates_batch(bench)(graph_from_np(graphs))
    amask = np.asarray(amask, bool)
    last_action = int(np.max(np.nonzero(amask.any(0))[0], initial=0)) + 1
    return _round_up(last_node, 4, config.N_MAX), _round_up(last_action, 8, config.A_MAX)


__all__ = ["GRAPH_FIELDS", "Sizes", "greedy_slot", "imagine", "lowest_argmax", "max_value",
           "planning_candidates", "planning_sizes", "predicted_directions", "predicted_valid",
           "resourcealloc_rewire", "score_candidates", "take"]
