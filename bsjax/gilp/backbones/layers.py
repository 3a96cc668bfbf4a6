"""Shared backbone pieces (docs/gilp/spec.md §3.2, §3.4): dense and norm layers, masked multi-head
attention, masked graph pooling and the node and graph heads.

Every layer works on `[..., d]` arrays (no per-row vmap needed) and is initialised with
Xavier-uniform weights and zero biases.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from bsjax.gilp.backbones.features import arg_indices


class BackboneOut(NamedTuple):
    """`F_θ(G, a)` for one (graph, action) (spec §3.2); a vmap adds leading axes.

    Attributes:
      valid_logit: `[]` logit of p_valid.
      delta_logits: `[N, 3]` over directions {−1, 0, +1} (class = dir + 1).
      reward: `[]` predicted reward r̂.
      done_logit: `[]` logit of p̂_done.
      risk_logit: `[]` logit of ρ̂.
      value: `[]` predicted short-horizon value Ĵ_K.
    """

    valid_logit: jax.Array
    delta_logits: jax.Array
    reward: jax.Array
    done_logit: jax.Array
    risk_logit: jax.Array
    value: jax.Array


def xavier_uniform(key: jax.Array, shape: tuple[int, int]) -> jax.Array:
    """Glorot-uniform `[fan_out, fan_in]` (or any 2-D table; both dims count as fans)."""
    limit = (6.0 / (shape[0] + shape[1])) ** 0.5
    return jax.random.uniform(key, shape, jnp.float32, -limit, limit)


class Dense(eqx.Module):
    """`y = x Wᵀ + b` on the last axis.

    Attributes:
      weight: `[d_out, d_in]` float32.
      bias: `[d_out]` float32 or None.
    """

    weight: jax.Array
    bias: jax.Array | None

    def __init__(self, d_in: int, d_out: int, key: jax.Array, use_bias: bool = True):
        self.weight = xavier_uniform(key, (d_out, d_in))
        self.bias = jnp.zeros((d_out,), jnp.float32) if use_bias else None

    def __call__(self, x: jax.Array) -> jax.Array:
        y = x @ self.weight.T
        return y if self.bias is None else y + self.bias


class LayerNorm(eqx.Module):
    """Layer norm over the last axis with a learned scale (init 1) and shift (init 0)."""

    scale: jax.Array
    shift: jax.Array
    eps: float = eqx.field(static=True, default=1e-5)

    def __init__(self, d: int, eps: float = 1e-5):
        self.scale = jnp.ones((d,), jnp.float32)
        self.shift = jnp.zeros((d,), jnp.float32)
        self.eps = eps

    def __call__(self, x: jax.Array) -> jax.Array:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + self.eps) * self.scale + self.shift


class MLP2(eqx.Module):
    """`Linear(d_in → d_hidden) – GELU – Linear(d_hidden → d_out)`."""

    first: Dense
    second: Dense

    def __init__(self, d_in: int, d_hidden: int, d_out: int, key: jax.Array):
        k1, k2 = jax.random.split(key)
        self.first = Dense(d_in, d_hidden, k1)
        self.second = Dense(d_hidden, d_out, k2)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.second(jax.nn.gelu(self.first(x)))


class MultiHeadAttention(eqx.Module):
    """Scaled dot-product attention with `heads` heads and a key mask (4 heads × 16 in §3.4).

    Attributes:
      query, key, value, out: `Dense(d → d)` projections.
      heads: number of heads (static).
    """

    query: Dense
    key: Dense
    value: Dense
    out: Dense
    heads: int = eqx.field(static=True)

    def __init__(self, d: int, heads: int, key: jax.Array):
        kq, kk, kv, ko = jax.random.split(key, 4)
        self.query, self.key = Dense(d, d, kq), Dense(d, d, kk)
        self.value, self.out = Dense(d, d, kv), Dense(d, d, ko)
        self.heads = heads

    def __call__(self, queries: jax.Array, tokens: jax.Array, token_mask: jax.Array) -> jax.Array:
        """Attend from `queries [Q, d]` to `tokens [T, d]`; masked tokens get no weight.

        `token_mask [T]` must hold at least one True (callers guarantee it), so no row is all −∞.
        """
        n_q, d = queries.shape
        d_head = d // self.heads
        split = lambda x: x.reshape(x.shape[0], self.heads, d_head)  # noqa: E731
        q, k, v = split(self.query(queries)), split(self.key(tokens)), split(self.value(tokens))
        scores = jnp.einsum("qhd,thd->hqt", q, k) / jnp.sqrt(jnp.float32(d_head))
        scores = jnp.where(token_mask[None, None, :], scores, -jnp.inf)
        weights = jax.nn.softmax(scores, axis=-1)
        mixed = jnp.einsum("hqt,thd->qhd", weights, v).reshape(n_q, d)
        return self.out(mixed)


def masked_pool(h: jax.Array, nmask: jax.Array, action: jax.Array) -> jax.Array:
    """`[mean_v h_v ‖ max_v h_v ‖ h_arg1 ‖ h_arg2]` over real nodes (spec §3.2).

    Args:
      h: `[N, d]` node states.
      nmask: `[N]` bool real nodes (at least one).
      action: `[3]` (kind, i, j); a missing argument contributes zeros.
    Returns:
      `[4·d]` float32.
    """
    real = nmask.astype(h.dtype)[:, None]
    mean = (h * real).sum(axis=0) / jnp.maximum(real.sum(), 1.0)
    # A graph always has a real node; the where keeps an empty one finite anyway.
    maximum = jnp.where(nmask[:, None], h, -jnp.inf).max(axis=0)
    maximum = jnp.where(jnp.any(nmask), maximum, 0.0)
    arg1, has_arg1, arg2, has_arg2 = arg_indices(action, nmask)
    h_arg1 = jnp.where(has_arg1, h[arg1], 0.0)
    h_arg2 = jnp.where(has_arg2, h[arg2], 0.0)
    return jnp.concatenate([mean, maximum, h_arg1, h_arg2])


class Heads(eqx.Module):
    """The node head `Linear(d_h → 64) – GELU – Linear(64 → 3)` and the graph head
    `Linear(4·d_h → 64) – GELU – Linear(64 → 5)` on the masked pooling (spec §3.2)."""

    node: MLP2
    graph: MLP2

    def __init__(self, d_h: int, key: jax.Array, d_head_hidden: int = 64):
        k_node, k_graph = jax.random.split(key)
        self.node = MLP2(d_h, d_head_hidden, 3, k_node)
        self.graph = MLP2(4 * d_h, d_head_hidden, 5, k_graph)

    def __call__(self, h: jax.Array, nmask: jax.Array, action: jax.Array) -> BackboneOut:
        """Outputs from node states `h [N, d_h]`; padded nodes' delta logits are zeroed."""
        delta_logits = self.node(h) * nmask.astype(h.dtype)[:, None]
        valid, reward, done, risk, value = self.graph(masked_pool(h, nmask, action))
        return BackboneOut(valid_logit=valid, delta_logits=delta_logits, reward=reward,
                           done_logit=done, risk_logit=risk, value=value)


def count_params(model: eqx.Module) -> int:
    """Number of trainable scalars (every inexact array leaf)."""
    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    return int(sum(leaf.size for leaf in leaves))
