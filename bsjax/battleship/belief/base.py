"""The contract every L1 belief (sampler) meets.

A sampler is a frozen dataclass holding static configuration only; its state is a pytree. Every
method is written for ONE game and vmapped over games by the harness; keys are consumed.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import chex
import jax
import jax.numpy as jnp

from bsjax.battleship.types import Observations

PyTree = Any


class BeliefInfo(NamedTuple):
    """What an update says about itself (blackjax's `Info`: beside the state, never in it).

    Attributes:
      ess: `[]` float32 the Kish effective sample size of the particle weights after the new
        evidence, before any resampling, in particles (the chain's equally weighted samples: their
        number); its fall towards 1 is the belief's degeneracy.
      acceptance: `[]` float32 the fraction of the update's MH moves that were accepted (the
        importance sampler, which draws afresh: the fraction of its draws that are valid).
    """

    ess: chex.Array
    acceptance: chex.Array


def kish_ess(weights: chex.Array) -> chex.Array:
    """`[]` float32 (Σw)² / Σw² of `[P]` non-negative weights (0 when they are all 0)."""
    total, square = jnp.sum(weights), jnp.sum(jnp.square(weights))
    return jnp.where(square > 0, jnp.square(total) / jnp.where(square > 0, square, 1.0),
                     0.0).astype(jnp.float32)


class Sampler(Protocol):
    """A posterior over ship placements given a game's observations."""

    def init(self, key: jax.Array, obs: Observations, game_seed: chex.Array) -> PyTree:
        """The belief at the start of a game (`obs` as dealt, `game_seed` the board's seed)."""
        ...

    def update(self, key: jax.Array, state: PyTree, obs: Observations
               ) -> tuple[PyTree, BeliefInfo]:
        """(the belief after the observations grew (one more shot or answer), its `BeliefInfo`).
        The key is consumed."""
        ...

    def weighted_particles(self, state: PyTree) -> tuple[chex.Array, chex.Array]:
        """`([P, S] int32 span ids of each ship, [P] float32 normalised weights)`."""
        ...

    def hit_probability(self, state: PyTree) -> chex.Array:
        """`[C] float32`: the posterior probability that each cell holds a ship."""
        ...


__all__ = ["BeliefInfo", "Sampler", "kish_ess"]
