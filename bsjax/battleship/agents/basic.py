"""L0/L1 captains: `random` (uniform over legal shots) and `greedy` (shoot argmax p).

Every agent is a frozen dataclass with `default_params()`, `init_state(params)` (its per-game
pytree, `()` if none) and `decide(key, params, view, sampler, belief, state) -> (Action, p of
the chosen cell, state)`, written for ONE game; the harness vmaps it over games. These two
have no params.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from bsjax.battleship.agents.base import Agent
from bsjax.battleship.config import GameConfig
from bsjax.battleship.planning.scoring import best_shot
from bsjax.battleship.types import View, shoot
from bsjax.core import fastpath


@dataclasses.dataclass(frozen=True)
class RandomAgent(Agent):
    """Shoots a uniformly random legal cell; never asks. Needs no belief."""

    config: GameConfig
    name = "random"
    needs_belief = False

    def init_state(self, params):
        return ()

    def decide(self, key: jax.Array, params, view: View, sampler, belief, state):
        """Returns (action, `[]` float32 p of the chosen cell: 0, no belief, state). Key consumed."""
        cell = fastpath.categorical(key, jnp.where(view.legal_shots, 0.0, -jnp.inf))
        return shoot(cell, self.config), jnp.float32(0.0), state


@dataclasses.dataclass(frozen=True)
class GreedyAgent(Agent):
    """L1: shoot the legal cell of highest posterior hit probability (lowest index on ties)."""

    config: GameConfig
    name = "greedy"
    needs_belief = True

    def init_state(self, params):
        return ()

    def decide(self, key: jax.Array, params, view: View, sampler, belief, state):
        """Returns (action, `[]` float32 p of the chosen cell, state)."""
        del key  # deterministic given the belief
        p = sampler.hit_probability(belief)
        cell = best_shot(p, view.legal_shots)
        return shoot(cell, self.config), p[cell], state
