"""The contract every L1 belief (sampler) meets.

A sampler is a frozen dataclass holding static configuration only; its state is a pytree. Every
method is written for ONE game and vmapped over games by the harness; keys are consumed.
"""

from __future__ import annotations

from typing import Any, Protocol

import chex
import jax

from bsjax.battleship.types import Observations

PyTree = Any


class Sampler(Protocol):
    """A posterior over ship placements given a game's observations."""

    def init(self, key: jax.Array, obs: Observations, game_seed: chex.Array) -> PyTree:
        """The belief at the start of a game (`obs` as dealt, `game_seed` the board's seed)."""
        ...

    def update(self, key: jax.Array, state: PyTree, obs: Observations) -> PyTree:
        """The belief after the observations grew (one more shot or answer)."""
        ...

    def weighted_particles(self, state: PyTree) -> tuple[chex.Array, chex.Array]:
        """`([P, S] int32 span ids of each ship, [P] float32 normalised weights)`."""
        ...

    def hit_probability(self, state: PyTree) -> chex.Array:
        """`[C] float32`: the posterior probability that each cell holds a ship."""
        ...


__all__ = ["Sampler"]
