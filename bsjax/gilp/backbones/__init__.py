"""The six parametric world-model backbones of GILP (docs/gilp/spec.md §3.2, §3.4).

Every backbone is an `eqx.Module` called on ONE graph and ONE action:
`model(graph_inputs(g), action) -> BackboneOut`. Score all candidates of a state with
`jax.vmap(model, in_axes=(None, 0))(graph_inputs(g), acts)`, a batch of samples with
`jax.vmap(model)(inputs_batch, actions)`.
"""

from __future__ import annotations

import equinox as eqx
import jax

from bsjax.gilp.backbones.attention import GPS, ActionNode
from bsjax.gilp.backbones.layers import BackboneOut, count_params
from bsjax.gilp.backbones.message_passing import GCN, MPNN, ErrorAware
from bsjax.gilp.backbones.mlp import MLPBackbone

# Canonical names (spec §3.4 spelling) -> constructor `(key) -> Module`.
BACKBONES = {
    "MLP": MLPBackbone,
    "GCN": GCN,
    "MPNN": MPNN,
    "GPS": GPS,
    "ActionNode": ActionNode,
    "ErrorAware": ErrorAware,
}
BACKBONE_NAMES = tuple(BACKBONES)
# Spec §3.4 parameter counts (a test asserts each model within ±10%).
SPEC_PARAMS = {"MLP": 79_000, "GCN": 32_000, "MPNN": 75_000, "GPS": 83_000, "ActionNode": 49_000,
               "ErrorAware": 32_000}


def canonical_name(name: str) -> str:
    """The spec spelling of a backbone name (case-insensitive); ValueError if unknown."""
    by_lower = {known.lower(): known for known in BACKBONES}
    if name.lower() not in by_lower:
        raise ValueError(f"unknown backbone {name!r} (choose from {', '.join(BACKBONE_NAMES)})")
    return by_lower[name.lower()]


def make_backbone(name: str, key: jax.Array) -> eqx.Module:
    """A freshly initialised backbone (Xavier-uniform weights, zero biases).

    Args:
      name: one of `BACKBONE_NAMES` (case-insensitive).
      key: PRNG key, consumed.
    """
    return BACKBONES[canonical_name(name)](key)


def backbone_name(model: eqx.Module) -> str:
    """The canonical name of a model's architecture."""
    for name, cls in BACKBONES.items():
        if type(model) is cls:
            return name
    raise ValueError(f"not a GILP backbone: {type(model).__name__}")


__all__ = ["BACKBONES", "BACKBONE_NAMES", "SPEC_PARAMS", "ActionNode", "BackboneOut", "ErrorAware",
           "GCN", "GPS", "MLPBackbone", "MPNN", "backbone_name", "canonical_name", "count_params",
           "make_backbone"]
