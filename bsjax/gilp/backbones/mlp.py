"""The MLP backbone (docs/gilp/spec.md §3.4, B1): no message passing at all."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from bsjax.gilp.backbones.features import N_FEATURES, GraphInputs, arg_indices, full_features
from bsjax.gilp.backbones.layers import BackboneOut, Dense, Heads


class MLPBackbone(eqx.Module):
    """A shared per-node MLP on `[x_v ‖ x_arg1 ‖ x_arg2 ‖ mean_u x_u]` (160) → 128 → 128, GELU
    after each layer, then the heads with d_h = 128.

    It sees the action's arguments and a mean over nodes, never a neighbour's status: edges reach
    it only through the degree summary channels.
    """

    first: Dense
    second: Dense
    heads: Heads

    def __init__(self, key: jax.Array, d_h: int = 128):
        k1, k2, k_heads = jax.random.split(key, 3)
        self.first = Dense(4 * N_FEATURES, d_h, k1)
        self.second = Dense(d_h, d_h, k2)
        self.heads = Heads(d_h, k_heads)

    def __call__(self, inputs: GraphInputs, action: jax.Array) -> BackboneOut:
        """Outputs for one graph and one `[3]` action."""
        x = full_features(inputs, action)                            # [N, 40]
        nmask = inputs.nmask
        real = nmask.astype(jnp.float32)[:, None]
        arg1, has_arg1, arg2, has_arg2 = arg_indices(action, nmask)
        context = jnp.concatenate([
            jnp.where(has_arg1, x[arg1], 0.0),
            jnp.where(has_arg2, x[arg2], 0.0),
            (x * real).sum(axis=0) / jnp.maximum(real.sum(), 1.0),
        ])                                                           # [120]
        per_node = jnp.concatenate([x, jnp.broadcast_to(context, (x.shape[0], context.shape[0]))],
                                   axis=1)                           # [N, 160]
        h = jax.nn.gelu(self.second(jax.nn.gelu(self.first(per_node))))
        return self.heads(h * real, nmask, action)
