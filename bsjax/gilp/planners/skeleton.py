"""GILP Phase 1 (docs/gilp/spec.md §4.5, §4.6 step 1): score every candidate with the backbone and pick
the skeleton rows `B_t`.

`score_candidates(model, bench, g_obs)` makes ONE vmapped backbone call over the `A_MAX`
candidate slots of one state, decodes each candidate's argmax delta with the benchmark's decode
table, computes the affected entities `Û` and the skeleton `B_t = top-k by Ĵ_K ∪ top-k by ρ̂`
(`planners.gate`). It is pure and written for one state: vmap it over episodes (the simulator) or
jit it once per benchmark for the real-LLM loop (`score_candidates_jit`).

The graph passed in must be what planners may read (`envs.common.observe(g)`); the function never
reads `hidden` itself, and decode sees it zeroed.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bsjax.gilp.envs.common import Bench
from bsjax.gilp.planners import gate, imagination
from bsjax.gilp.types import Graph


class Phase1(NamedTuple):
    """Backbone outputs and the skeleton of one state (A = A_MAX, N = N_MAX, k = skeleton_k).

    Padding candidate slots (`amask = False`) carry p_valid 0, value 0, risk 1, no change and no
    affected entities, and are never skeleton rows.

    Attributes:
      acts: `[A, 3]` int32 candidate actions (kind, i, j) in canonical order.
      amask: `[A]` bool real candidates.
      p_valid: `[A]` float32 sigmoid of the validity logit.
      value: `[A]` float32 predicted short-horizon value Ĵ_K.
      risk: `[A]` float32 predicted risk ρ̂ (sigmoid of the risk logit).
      pred_status: `[A, N]` int8 next statuses decoded from argmax ΔĜ (`bench.decode`).
      changed: `[A, N]` bool the backbone's change-set Ŝ(a) = {v : argmax ΔĜ[v] ≠ 0} (real nodes).
      affected: `[A, N]` bool affected entities Û(a) (nodes).
      affected_goal: `[A]` bool Û(a) holds GOAL.
      rows: `[2k]` int32 skeleton rows (candidate slots, value top-k then the remaining risk
        top-k), padded with -1.
      in_skeleton: `[A]` bool membership of B_t.
    """

    acts: jax.Array
    amask: jax.Array
    p_valid: jax.Array
    value: jax.Array
    risk: jax.Array
    pred_status: jax.Array
    changed: jax.Array
    affected: jax.Array
    affected_goal: jax.Array
    rows: jax.Array
    in_skeleton: jax.Array


def score_candidates(model, bench: Bench, g_obs: Graph, k: int = 4,
                     sizes: tuple[int, int] | None = None) -> Phase1:
    """Phase 1 on one observed state: one `jax.vmap(model, in_axes=(None, 0))` call over the
    candidate slots, decode, affected entities and skeleton rows.

    Args:
      model: a backbone (`eqx.Module`, `model(graph_inputs(g), action) -> BackboneOut`).
      bench: the benchmark's rules (static).
      g_obs: one observed graph (`observe(g)`; hidden zeroed).
      k: rows per ranking of the skeleton (spec: 4).
      sizes: optional static slot cut `(n_nodes, n_actions)` covering every real node and
        candidate (`imagination.planning_sizes`): the backbone runs on the first n_nodes node
        slots and the outputs cover the first n_actions candidate slots only (A = n_actions).
        Backbones are padding-invariant, so this changes nothing but float rounding and cost.
    Returns:
      `Phase1` with the shapes listed there.
    """
    g_obs = g_obs.replace(hidden=jnp.zeros_like(g_obs.hidden))  # belt and braces: no leak
    n_nodes, n_actions = sizes or (None, None)
    acts, amask = imagination.planning_candidates(bench, g_obs, n_actions)
    out = imagination.score_candidates(model, g_obs, acts, n_nodes)
    p_valid = jnp.where(amask, jax.nn.sigmoid(out.valid_logit), 0.0).astype(jnp.float32)
    value = jnp.where(amask, out.value, 0.0).astype(jnp.float32)
    risk = jnp.where(amask, jax.nn.sigmoid(out.risk_logit), 1.0).astype(jnp.float32)
    dirs = (jnp.argmax(out.delta_logits, axis=-1) - 1).astype(jnp.int8)          # [A, N]
    dirs = jnp.where(amask[:, None] & g_obs.nmask[None, :], dirs, 0).astype(jnp.int8)
    pred_status = jax.vmap(lambda a, d: bench.decode(g_obs, a, d))(acts, dirs).astype(jnp.int8)
    changed = dirs != 0
    affected, affected_goal = gate.affected_entities(dirs, g_obs.etype, g_obs.goal, g_obs.anc,
                                                     g_obs.nmask)
    rows = gate.skeleton_rows(value, risk, amask, k=k)
    return Phase1(acts=acts, amask=amask, p_valid=p_valid, value=value, risk=risk,
                  pred_status=pred_status, changed=changed, affected=affected,
                  affected_goal=affected_goal, rows=rows,
                  in_skeleton=gate.skeleton_mask(rows, acts.shape[0]) & amask)


@functools.partial(jax.jit, static_argnames=("bench", "k"))
def score_candidates_jit(model, bench: Bench, g_obs: Graph, k: int = 4) -> Phase1:
    """`score_candidates` jitted (compiles once per benchmark, backbone architecture and k)."""
    return score_candidates(model, bench, g_obs, k)


def backbone_claims(ph1: Phase1, status: jax.Array) -> jax.Array:
    """`[A, N]` int8 the backbone's decoded atoms per candidate as claims: the decoded next status
    where the node is in Ŝ and the decoded status differs from the current one, else -1.

    Args:
      ph1: Phase-1 outputs of the state.
      status: `[N]` the state's current statuses.
    """
    moved = ph1.changed & (ph1.pred_status != status[None, :])
    return jnp.where(moved, ph1.pred_status, -1).astype(jnp.int8)

