"""Message-passing backbones (docs/gilp/spec.md §3.4, B2, B3, B6): GCN, MPNN and ErrorAware.

All of them: `Linear(40 → 64)` encoder, two message-passing layers, the shared heads. Node states
of padded nodes are zeroed after every layer and padded nodes never send or receive messages, so
outputs on real nodes do not depend on padding.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from bsjax.gilp import config
from bsjax.gilp.backbones.features import N_FEATURES, GraphInputs, full_features
from bsjax.gilp.backbones.layers import MLP2, BackboneOut, Dense, Heads, xavier_uniform

D_H = 64
EDGE_EMBED = 8


class GCNLayer(eqx.Module):
    """`H ← ReLU(Â H W + b)`, plus `+ H` when `residual`."""

    linear: Dense
    residual: bool = eqx.field(static=True)

    def __init__(self, d: int, key: jax.Array, residual: bool = False):
        self.linear = Dense(d, d, key)
        self.residual = residual

    def __call__(self, h: jax.Array, adj_norm: jax.Array, real: jax.Array) -> jax.Array:
        """`h [N, d]`, `adj_norm [N, N]`, `real [N, 1]` float mask -> `[N, d]`."""
        out = jax.nn.relu(self.linear(adj_norm @ h))
        if self.residual:
            out = out + h
        return out * real


class GCN(eqx.Module):
    """Two plain GCN layers over the union of edge types; edge types reach it only through the
    input's edge-count channels."""

    encoder: Dense
    layers: tuple[GCNLayer, ...]
    heads: Heads

    def __init__(self, key: jax.Array, d_h: int = D_H, residual: bool = False):
        k_enc, k1, k2, k_heads = jax.random.split(key, 4)
        self.encoder = Dense(N_FEATURES, d_h, k_enc)
        self.layers = (GCNLayer(d_h, k1, residual), GCNLayer(d_h, k2, residual))
        self.heads = Heads(d_h, k_heads)

    def trunk(self, inputs: GraphInputs, action: jax.Array) -> jax.Array:
        """`[N, d_h]` node states."""
        real = inputs.nmask.astype(jnp.float32)[:, None]
        h = self.encoder(full_features(inputs, action)) * real
        for layer in self.layers:
            h = layer(h, inputs.adj_norm, real)
        return h

    def __call__(self, inputs: GraphInputs, action: jax.Array) -> BackboneOut:
        """Outputs for one graph and one `[3]` action."""
        return self.heads(self.trunk(inputs, action), inputs.nmask, action)


class ErrorAware(GCN):
    """The residual-GCN trunk `h ← ReLU(Â h W + b) + h` without attention: the action reaches it
    only through the input channels. Its extra training terms live in `bsjax.gilp.training.train`."""

    def __init__(self, key: jax.Array, d_h: int = D_H):
        super().__init__(key, d_h, residual=True)

    def spectral_matrices(self) -> tuple[jax.Array, ...]:
        """The two trunk weight matrices the spectral regulariser bounds."""
        return tuple(layer.linear.weight for layer in self.layers)


class MPNNLayer(eqx.Module):
    """One MPNN layer. Receiver r gets, from every neighbour s,
    `φ([h_s ‖ h_r ‖ E[τ] ‖ +1])` along an edge s → r and `φ([h_s ‖ h_r ‖ E[τ] ‖ −1])` along an
    edge r → s; sum aggregation; `h_r ← h_r + ψ([h_r ‖ m_r])`.

    Attributes:
      message: φ = `Linear(2·d + 8 + 1 → 64) – GELU – Linear(64 → 64)`.
      update: ψ = `Linear(2·d → 64) – GELU – Linear(64 → 64)`.
    """

    message: MLP2
    update: MLP2

    def __init__(self, d: int, key: jax.Array):
        k_msg, k_upd = jax.random.split(key)
        self.message = MLP2(2 * d + EDGE_EMBED + 1, d, d, k_msg)
        self.update = MLP2(2 * d, d, d, k_upd)

    def __call__(self, h: jax.Array, etype: jax.Array, edge_table: jax.Array,
                 real: jax.Array) -> jax.Array:
        """`h [N, d]`, `etype [N, N]` (-1 = none, masked), `edge_table [8, 8]`, `real [N, 1]`.

        Exact rewrites of the formula above, chosen for cost:
        - φ's first layer is linear in its concatenated input, so it splits into per-sender,
          per-receiver and per-edge-type projections, computed once per node / type;
        - messages run over the graph's edge list (at most `E_MAX`, padded and masked) instead
          of all N² node pairs: graphs here have ~N edges, so this is ~10× less work than the
          dense form. Gathers and the sum over senders are one-hot matmuls (a gather's gradient
          is a scatter-add, many times slower on CPU);
        - φ's second layer is affine, so it commutes with the sum over senders (applied once per
          receiver to the summed hidden activations).
        """
        n, d = h.shape
        w1, b1 = self.message.first.weight, self.message.first.bias
        w_send, w_recv = w1[:, :d], w1[:, d:2 * d]
        w_edge, w_dir = w1[:, 2 * d:2 * d + EDGE_EMBED], w1[:, 2 * d + EDGE_EMBED]
        send = h @ w_send.T                                         # [N, d] as sender
        recv = h @ w_recv.T                                         # [N, d] as receiver
        type_proj = edge_table @ w_edge.T                           # [8, d]
        # The edge list: edge e runs src[e] -> dst[e] with type flat[index[e]].
        e_max = min(config.E_MAX, n * n)
        flat = etype.reshape(-1)
        (index,) = jnp.nonzero(flat >= 0, size=e_max, fill_value=0)
        present = (jnp.arange(e_max) < jnp.sum(flat >= 0)).astype(h.dtype)[:, None]   # [E, 1]
        src = jax.nn.one_hot(index // n, n, dtype=h.dtype)         # [E, N]
        dst = jax.nn.one_hot(index % n, n, dtype=h.dtype)
        edge_term = jax.nn.one_hot(flat[index], edge_table.shape[0], dtype=h.dtype) @ type_proj
        # Along the edge (+1) to its head, and against it (−1) to its tail.
        to_head = jax.nn.gelu(src @ send + dst @ recv + b1 + edge_term + w_dir) * present
        to_tail = jax.nn.gelu(dst @ send + src @ recv + b1 + edge_term - w_dir) * present
        hidden_sum = dst.T @ to_head + src.T @ to_tail              # [N, d]
        n_messages = dst.T @ present + src.T @ present              # [N, 1]
        w2, b2 = self.message.second.weight, self.message.second.bias
        messages = hidden_sum @ w2.T + n_messages * b2              # [N, d]
        return (h + self.update(jnp.concatenate([h, messages], axis=1))) * real


class MPNN(eqx.Module):
    """Two edge-typed, direction-aware MPNN layers with a learned edge-type table `E ∈ R^{8×8}`
    shared by both layers."""

    encoder: Dense
    edge_table: jax.Array
    layers: tuple[MPNNLayer, ...]
    heads: Heads

    def __init__(self, key: jax.Array, d_h: int = D_H):
        k_enc, k_edge, k1, k2, k_heads = jax.random.split(key, 5)
        self.encoder = Dense(N_FEATURES, d_h, k_enc)
        self.edge_table = xavier_uniform(k_edge, (config.N_EDGE_TYPES, EDGE_EMBED))
        self.layers = (MPNNLayer(d_h, k1), MPNNLayer(d_h, k2))
        self.heads = Heads(d_h, k_heads)

    def __call__(self, inputs: GraphInputs, action: jax.Array) -> BackboneOut:
        """Outputs for one graph and one `[3]` action."""
        real = inputs.nmask.astype(jnp.float32)[:, None]
        h = self.encoder(full_features(inputs, action)) * real
        for layer in self.layers:
            h = layer(h, inputs.etype, self.edge_table, real)
        return self.heads(h, inputs.nmask, action)
