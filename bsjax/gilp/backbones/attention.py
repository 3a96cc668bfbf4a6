"""Attention backbones (docs/gilp/spec.md §3.4, B4, B5): GPS and ActionNode."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from bsjax.gilp.backbones.features import (
    N_FEATURES,
    GraphInputs,
    arg_indices,
    full_features,
    normalised_adjacency,
)
from bsjax.gilp.backbones.layers import MLP2, BackboneOut, Dense, Heads, LayerNorm, MultiHeadAttention
from bsjax.gilp.backbones.message_passing import D_H, GCNLayer

N_HEADS = 4


class GPSBlock(eqx.Module):
    """`h ← LN(h + Â h W)`; `h ← LN(h + MHA(h))` over real nodes; `h ← LN(h + FFN(h))`."""

    local: Dense
    attention: MultiHeadAttention
    ffn: MLP2
    norm_local: LayerNorm
    norm_attention: LayerNorm
    norm_ffn: LayerNorm

    def __init__(self, d: int, key: jax.Array):
        k_local, k_attn, k_ffn = jax.random.split(key, 3)
        self.local = Dense(d, d, k_local)
        self.attention = MultiHeadAttention(d, N_HEADS, k_attn)
        self.ffn = MLP2(d, d, d, k_ffn)
        self.norm_local, self.norm_attention, self.norm_ffn = LayerNorm(d), LayerNorm(d), LayerNorm(d)

    def __call__(self, h: jax.Array, adj_norm: jax.Array, nmask: jax.Array) -> jax.Array:
        """`h [N, d]`, `adj_norm [N, N]`, `nmask [N]` bool -> `[N, d]` (padded rows 0)."""
        real = nmask.astype(h.dtype)[:, None]
        h = self.norm_local(h + self.local(adj_norm @ h))
        # Key-padding mask: padded nodes are never attended to.
        h = self.norm_attention(h + self.attention(h, h, nmask))
        h = self.norm_ffn(h + self.ffn(h))
        return h * real


class GPS(eqx.Module):
    """Two GPS blocks (local GCN-style mixing, global attention, feed-forward)."""

    encoder: Dense
    blocks: tuple[GPSBlock, ...]
    heads: Heads

    def __init__(self, key: jax.Array, d_h: int = D_H):
        k_enc, k1, k2, k_heads = jax.random.split(key, 4)
        self.encoder = Dense(N_FEATURES, d_h, k_enc)
        self.blocks = (GPSBlock(d_h, k1), GPSBlock(d_h, k2))
        self.heads = Heads(d_h, k_heads)

    def __call__(self, inputs: GraphInputs, action: jax.Array) -> BackboneOut:
        """Outputs for one graph and one `[3]` action."""
        real = inputs.nmask.astype(jnp.float32)[:, None]
        h = self.encoder(full_features(inputs, action)) * real
        for block in self.blocks:
            h = block(h, inputs.adj_norm, inputs.nmask)
        return self.heads(h, inputs.nmask, action)


class ActionNode(eqx.Module):
    """The graph augmented with an action node (index N), embedded from the kind one-hot and
    linked both ways to arg1 / arg2; two residual GCN layers on the augmented graph; then every
    original node cross-attends to the tokens {action node, arg1, arg2} (missing ones masked),
    with a residual and a layer norm.
    """

    encoder: Dense
    action_embed: Dense
    layers: tuple[GCNLayer, ...]
    cross: MultiHeadAttention
    norm: LayerNorm
    heads: Heads

    def __init__(self, key: jax.Array, d_h: int = D_H):
        k_enc, k_act, k1, k2, k_cross, k_heads = jax.random.split(key, 6)
        self.encoder = Dense(N_FEATURES, d_h, k_enc)
        self.action_embed = Dense(3, d_h, k_act)
        self.layers = (GCNLayer(d_h, k1, residual=True), GCNLayer(d_h, k2, residual=True))
        self.cross = MultiHeadAttention(d_h, N_HEADS, k_cross)
        self.norm = LayerNorm(d_h)
        self.heads = Heads(d_h, k_heads)

    def __call__(self, inputs: GraphInputs, action: jax.Array) -> BackboneOut:
        """Outputs for one graph and one `[3]` action."""
        nmask = inputs.nmask
        n = nmask.shape[0]
        arg1, has_arg1, arg2, has_arg2 = arg_indices(action, nmask)
        # Augmented adjacency [N+1, N+1]: the action node links to its (real) arguments.
        ids = jnp.arange(n)
        link = (((ids == arg1) & has_arg1) | ((ids == arg2) & has_arg2)).astype(jnp.float32)
        adj_aug = jnp.zeros((n + 1, n + 1), jnp.float32)
        adj_aug = adj_aug.at[:n, :n].set(inputs.adj).at[n, :n].set(link).at[:n, n].set(link)
        mask_aug = jnp.concatenate([nmask, jnp.ones((1,), bool)])
        adj_norm_aug = normalised_adjacency(adj_aug, mask_aug)
        real_aug = mask_aug.astype(jnp.float32)[:, None]

        kind = jax.nn.one_hot(action[0].astype(jnp.int32), 3, dtype=jnp.float32)
        h_nodes = self.encoder(full_features(inputs, action)) * real_aug[:n]
        h = jnp.concatenate([h_nodes, self.action_embed(kind)[None, :]], axis=0)   # [N+1, d]
        for layer in self.layers:
            h = layer(h, adj_norm_aug, real_aug)

        h_nodes, h_action = h[:n], h[n]
        tokens = jnp.stack([h_action, h_nodes[arg1], h_nodes[arg2]])             # [3, d]
        token_mask = jnp.stack([jnp.bool_(True), has_arg1, has_arg2])
        h_nodes = self.norm(h_nodes + self.cross(h_nodes, tokens, token_mask)) * real_aug[:n]
        return self.heads(h_nodes, nmask, action)
