"""L0/L1 captains: `random` (uniform over unshot cells) and `greedy` (shoot argmax p).

Every agent is a frozen dataclass with `init_state()` (its per-game pytree, `()` if none) and
`decide(key, view, sampler, belief, state) -> (Action, p of the chosen cell, state)`, written for
ONE game; the harness vmaps it over games.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bsjax.battleship.agents.base import Agent
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard, rules
from bsjax.battleship.planning import sim
from bsjax.battleship.types import View, shoot
from bsjax.core import fastpath


def best_shot(hit_probability: jax.Array, unknown: jax.Array) -> jax.Array:
    """argmax of `[C]` p over unknown cells; ties go to the lowest cell index."""
    return fastpath.first_argmax(jnp.where(unknown, hit_probability, -1.0))


class TurnSummary(NamedTuple):
    """What every planner reads from the view and the belief at the start of a turn.

    Attributes: p `[C]` hit probability; parts the weighted particle set; unknown and hit_cells
    `[C]` bool; hits and total (ship cells) `[]` float32; best `[]` int32 the argmax cell and
    best_value its `sim.next` shot value (h + p)/T.
    """

    p: jax.Array
    parts: sim.Particles
    unknown: jax.Array
    hit_cells: jax.Array
    hits: jax.Array
    total: jax.Array
    best: jax.Array
    best_value: jax.Array


def summarize_turn(config: GameConfig, view: View, sampler, belief) -> TurnSummary:
    p = sampler.hit_probability(belief)
    unknown = rules.unknown_cells(config, view.obs)
    hit_cells = bitboard.unpack(view.obs.hit_bits, config.n_cells)
    hits = jnp.sum(hit_cells, dtype=jnp.int32).astype(jnp.float32)
    total = jnp.sum(view.obs.ship_lengths).astype(jnp.float32)
    best = best_shot(p, unknown)
    return TurnSummary(p, sim.particles(config, *sampler.weighted_particles(belief)), unknown,
                       hit_cells, hits, total, best, sim.shot_values(p[best], hits, total))


@dataclasses.dataclass(frozen=True)
class RandomAgent(Agent):
    """Shoots a uniformly random unshot cell; never asks. Needs no belief."""

    config: GameConfig
    name = "random"
    needs_belief = False

    def init_state(self):
        return ()

    def decide(self, key: jax.Array, view: View, sampler, belief, state):
        """Returns (action, `[]` float32 p of the chosen cell: 0, no belief, state). Key consumed."""
        unknown = rules.unknown_cells(self.config, view.obs)
        cell = fastpath.categorical(key, jnp.where(unknown, 0.0, -jnp.inf))
        return shoot(cell, self.config), jnp.float32(0.0), state


@dataclasses.dataclass(frozen=True)
class GreedyAgent(Agent):
    """L1: shoot the unshot cell of highest posterior hit probability (lowest index on ties)."""

    config: GameConfig
    name = "greedy"
    needs_belief = True

    def init_state(self):
        return ()

    def decide(self, key: jax.Array, view: View, sampler, belief, state):
        """Returns (action, `[]` float32 p of the chosen cell, state)."""
        del key  # deterministic given the belief
        p = sampler.hit_probability(belief)
        cell = best_shot(p, rules.unknown_cells(self.config, view.obs))
        return shoot(cell, self.config), p[cell], state
