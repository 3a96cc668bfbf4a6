"""Backbone inputs (docs/gilp/spec.md §3.1): per-node features, edge types and normalised adjacency.

The 40 per-node channels split into 35 that depend only on the graph and 5 that depend on the
candidate action. `graph_inputs(g)` computes the graph part once per state, and a backbone adds
the action channels itself, so phase-1 scoring is one call
`jax.vmap(model, in_axes=(None, 0))(graph_inputs(g), acts)`.

Channel layout of `node_features` (`[N, 40]`):

| columns | size | content |
|---|---|---|
| 0:5   | 5  | status one-hot |
| 5:10  | 5  | node-type one-hot |
| 10    | 1  | goal bit |
| 11:19 | 8  | attributes |
| 19:27 | 8  | incoming edge count per edge type / 4 |
| 27:35 | 8  | outgoing edge count per edge type / 4 |
| 35:38 | 3  | action-kind one-hot (zeros for a padding action, kind = -1) |
| 38    | 1  | is_arg1 |
| 39    | 1  | is_arg2 |

Padded nodes are all zeros. `hidden` (and `anc`) are never read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bsjax.gilp import config
from bsjax.gilp.types import Graph

N_GRAPH_FEATURES = 35
N_ACTION_FEATURES = 5
N_FEATURES = N_GRAPH_FEATURES + N_ACTION_FEATURES  # 40
STATUS_COLS = slice(0, config.N_STATUS)
# Edge counts are divided by this so that typical degrees land in [0, 1].
EDGE_COUNT_SCALE = 4.0


class GraphInputs(NamedTuple):
    """What a backbone reads about one graph, independent of the candidate action.

    Attributes:
      node_x: `[N, 35]` float32 graph part of the node features (columns 0:35 above); padded rows 0.
      etype: `[N, N]` int32 edge type of u -> v, or -1 (also -1 on any pair touching a padded node).
      adj: `[N, N]` float32 symmetric 0/1 adjacency over the union of edge types, no self loops.
      adj_norm: `[N, N]` float32 `Â = D^{-1/2}(A_sym + I)D^{-1/2}` over real nodes; padded rows and
        columns are 0.
      nmask: `[N]` bool real nodes.
    """

    node_x: jax.Array
    etype: jax.Array
    adj: jax.Array
    adj_norm: jax.Array
    nmask: jax.Array


def normalised_adjacency(adj: jax.Array, nmask: jax.Array) -> jax.Array:
    """`Â = D^{-1/2}(A + I)D^{-1/2}` with self loops on real nodes only.

    Args:
      adj: `[N, N]` symmetric 0/1 adjacency, zero on padded rows and columns.
      nmask: `[N]` bool real nodes.
    Returns:
      `[N, N]` float32; padded rows and columns are 0 (their degree is 0, so guard the rsqrt).
    """
    with_loops = adj + jnp.diag(nmask.astype(jnp.float32))
    degree = with_loops.sum(axis=1)
    inv_sqrt = jnp.where(degree > 0, jax.lax.rsqrt(jnp.maximum(degree, 1.0)), 0.0)
    return inv_sqrt[:, None] * with_loops * inv_sqrt[None, :]


def graph_inputs(g: Graph) -> GraphInputs:
    """The action-independent backbone inputs of one graph (never reads `hidden`).

    Args:
      g: one task's graph with `N` node slots (any N; the backbones are size-agnostic).
    Returns:
      `GraphInputs` with the shapes listed there.
    """
    nmask = g.nmask.astype(bool)
    real = nmask.astype(jnp.float32)
    pair_mask = nmask[:, None] & nmask[None, :]
    etype = jnp.where(pair_mask, g.etype.astype(jnp.int32), config.NO_EDGE)
    # [N, N, 8] one-hot of the edge type u -> v (no edge -> all zeros).
    edge_onehot = jax.nn.one_hot(etype, config.N_EDGE_TYPES, dtype=jnp.float32)
    in_counts = edge_onehot.sum(axis=0)    # [v, type]: edges arriving at v
    out_counts = edge_onehot.sum(axis=1)   # [u, type]: edges leaving u
    node_x = jnp.concatenate([
        jax.nn.one_hot(g.status.astype(jnp.int32), config.N_STATUS, dtype=jnp.float32),
        jax.nn.one_hot(g.ntype.astype(jnp.int32), len(config.NODE_TYPE_NAMES), dtype=jnp.float32),
        g.goal.astype(jnp.float32)[:, None],
        g.attr.astype(jnp.float32),
        in_counts / EDGE_COUNT_SCALE,
        out_counts / EDGE_COUNT_SCALE,
    ], axis=1) * real[:, None]
    directed = (etype >= 0).astype(jnp.float32)
    adj = jnp.maximum(directed, directed.T) * (1.0 - jnp.eye(etype.shape[0], dtype=jnp.float32))
    return GraphInputs(node_x=node_x, etype=etype, adj=adj,
                       adj_norm=normalised_adjacency(adj, nmask), nmask=nmask)


def arg_indices(action: jax.Array, nmask: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array,
                                                               jax.Array]:
    """The action's argument slots and whether each names a real node.

    Args:
      action: `[3]` int (kind, i, j); j = -1 without a second argument.
      nmask: `[N]` bool real nodes.
    Returns:
      `(arg1, has_arg1, arg2, has_arg2)`: clipped `[]` int32 indices (safe to gather with) and `[]`
      bool flags.
    """
    n = nmask.shape[0]
    i, j = action[1].astype(jnp.int32), action[2].astype(jnp.int32)
    arg1, arg2 = jnp.clip(i, 0, n - 1), jnp.clip(j, 0, n - 1)
    has_arg1 = (i >= 0) & (i < n) & nmask[arg1]
    has_arg2 = (j >= 0) & (j < n) & nmask[arg2]
    return arg1, has_arg1, arg2, has_arg2


def action_features(action: jax.Array, nmask: jax.Array) -> jax.Array:
    """`[N, 5]` float32 action channels: kind one-hot broadcast, is_arg1, is_arg2; padded rows 0."""
    n = nmask.shape[0]
    ids = jnp.arange(n)
    # one_hot of kind -1 (a padding action) is all zeros.
    kind = jax.nn.one_hot(action[0].astype(jnp.int32), 3, dtype=jnp.float32)
    arg1, has_arg1, arg2, has_arg2 = arg_indices(action, nmask)
    is_arg1 = ((ids == arg1) & has_arg1).astype(jnp.float32)
    is_arg2 = ((ids == arg2) & has_arg2).astype(jnp.float32)
    channels = jnp.concatenate([jnp.broadcast_to(kind, (n, 3)), is_arg1[:, None], is_arg2[:, None]],
                               axis=1)
    return channels * nmask.astype(jnp.float32)[:, None]


def full_features(inputs: GraphInputs, action: jax.Array) -> jax.Array:
    """`[N, 40]` float32 node features from precomputed graph inputs and one action."""
    return jnp.concatenate([inputs.node_x, action_features(action, inputs.nmask)], axis=1)


def node_features(g: Graph, action: jax.Array) -> jax.Array:
    """`x_v ∈ R^40` for every node of `g` under candidate `action` (spec §3.1).

    Args:
      g: one graph.
      action: `[3]` int (kind, i, j).
    Returns:
      `[N, 40]` float32, padded nodes zero.
    """
    return full_features(graph_inputs(g), action)


def with_soft_status(inputs: GraphInputs, status_probs: jax.Array) -> GraphInputs:
    """The same inputs with the status one-hot replaced by a distribution `[N, 5]` (ErrorAware's
    multi-step consistency term feeds its own predictions back this way)."""
    soft = status_probs.astype(jnp.float32) * inputs.nmask.astype(jnp.float32)[:, None]
    return inputs._replace(node_x=inputs.node_x.at[:, STATUS_COLS].set(soft))


DecodeFn = Callable[[Graph, jax.Array, jax.Array], jax.Array]


def class_next_status(decode: DecodeFn, g: Graph, action: jax.Array) -> jax.Array:
    """`[3, N]` int32: the next status each node would have if every node moved in direction
    `c − 1`, for the delta classes c = 0, 1, 2 (directions −1, 0, +1).

    Decode tables map (kind, role, from status, direction) to a status independently per node, so
    decoding a constant direction vector gives every node's answer for that class at once. Decode
    sees `hidden` zeroed, as in planning (`envs.common.observe`).
    """
    g = g.replace(hidden=jnp.zeros_like(g.hidden))
    n = g.status.shape[0]
    dirs = jnp.array([-1, 0, 1], jnp.int8)
    return jax.vmap(lambda d: decode(g, action, jnp.full((n,), d, jnp.int8)))(dirs).astype(jnp.int32)


def expected_next_status(decode: DecodeFn, g: Graph, action: jax.Array,
                         delta_logits: jax.Array) -> jax.Array:
    """`x̂(v) = Σ_c softmax(ΔĜ[v])[c] · onehot(decode(c))` (spec §3.4, §3.6).

    Args:
      decode: the benchmark's `(g, a, dir[N]) -> status[N]`.
      g: the graph the delta was predicted on.
      action: `[3]` the action it was predicted for.
      delta_logits: `[N, 3]` over directions {−1, 0, +1}.
    Returns:
      `[N, 5]` float32 expected next-status one-hot (rows of padded nodes are not masked here).
    """
    onehots = jax.nn.one_hot(class_next_status(decode, g, action), config.N_STATUS, dtype=jnp.float32)
    probs = jax.nn.softmax(delta_logits.astype(jnp.float32), axis=-1)
    return jnp.einsum("nc,cns->ns", probs, onehots)
