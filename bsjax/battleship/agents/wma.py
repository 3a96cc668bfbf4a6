"""L2: the WMA two-bucket planner (docs/battleship/protocol.md §8.2), for ONE game.

Each turn: shoot the most likely frontier cell if any cell next to a hit is unknown; otherwise,
in the coarse phase (no hits yet, < 6 coarse questions) score every unasked row / column /
quadrant template with the coarse formula, in the late phase (hits, turn >= 18, < 6 late
questions) every unasked coarse or block-2x2 template with the salvage formula, and ask the best
iff its adjusted value beats the best shot's `sim.next` value; else shoot the best cell.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp

from bsjax.battleship.agents.base import Agent
from bsjax.battleship.agents.basic import best_shot, summarize_turn
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import questions
from bsjax.battleship.planning import sim
from bsjax.battleship.types import ASK, SHOOT, Action, View
from bsjax.core import fastpath


@chex.dataclass(frozen=True)
class WMAState:
    """Attributes:
    asked: `[83]` bool templates asked (WMA never repeats one).
    coarse_used, late_used: `[]` int32 questions counted in each bucket.
    """

    asked: chex.Array
    coarse_used: chex.Array
    late_used: chex.Array


@dataclasses.dataclass(frozen=True)
class WMAAgent(Agent):
    """Static configuration of the planner (defaults of the reference)."""

    config: GameConfig
    coarse_budget: int = 6
    late_budget: int = 6
    late_game_turn: int = 18

    name = "wma"
    needs_belief = True

    def init_state(self) -> WMAState:
        return WMAState(asked=jnp.zeros(questions.N_TEMPLATES, bool),
                        coarse_used=jnp.int32(0), late_used=jnp.int32(0))

    def decide(self, key: jax.Array, view: View, sampler, belief, state: WMAState):
        """Returns (action, `[]` float32 p of the best shot, new state)."""
        del key
        cfg = self.config
        p, parts, unknown, hit_cells, hits, total, best, best_value = summarize_turn(
            cfg, view, sampler, belief)

        frontier = questions.frontier(hit_cells, unknown, cfg.rows, cfg.cols)
        frontier_cell = best_shot(p, frontier)
        has_frontier = jnp.any(frontier)
        has_hits = hits > 0

        coarse_phase = ~has_hits & (state.coarse_used < self.coarse_budget)
        late_phase = (has_hits & (view.turn >= self.late_game_turn)
                      & (state.late_used < self.late_budget))
        coarse_family = jnp.asarray(questions.family_mask(*questions.COARSE_FAMILIES))
        late_family = coarse_family | jnp.asarray(questions.family_mask("block-2x2"))
        pool = jnp.where(coarse_phase, coarse_family, late_phase & late_family)
        pool = pool & ~state.asked & (view.questions_left > 0)

        adjusted = self.score_questions(parts, p, unknown, hit_cells, hits, total, coarse_phase)
        adjusted = jnp.where(pool, adjusted, -jnp.inf)
        question = fastpath.first_argmax(adjusted)          # ties: earliest template
        ask = ~has_frontier & jnp.any(pool) & (adjusted[question] > best_value)
        cell = jnp.where(has_frontier, frontier_cell, best)

        action = Action(kind=jnp.where(ask, ASK, SHOOT).astype(jnp.int32), cell=cell,
                        question_id=jnp.where(ask, question, -1),
                        question_bits=sim.template_bits()[question])
        # The reference stores the post-ask turn: a question asked at turn 17 counts as late.
        late_ask = view.turn + 1 >= self.late_game_turn
        state = WMAState(
            asked=state.asked.at[question].set(state.asked[question] | ask),
            coarse_used=state.coarse_used + (ask & ~late_ask & coarse_family[question]),
            late_used=state.late_used + (ask & late_ask),
        )
        return action, p[cell], state

    def score_questions(self, parts: sim.Particles, p, unknown, hit_cells, hits, total,
                        coarse_phase) -> jnp.ndarray:
        """`[83]` adjusted values of every template: the coarse formula in the coarse phase, the
        salvage formula otherwise. A researcher's own rule replaces this method (see notebooks/).
        """
        look = sim.lookahead(self.config, parts, sim.answers(sim.template_bits(), parts), unknown)
        raw = sim.raw_question_values(look, hits, total)
        mass = sim.region_mass(p, unknown)
        relevance = sim.cluster_relevance(hit_cells)
        coarse = sim.adjusted_values(raw, look.p_yes, mass, relevance, sim.COARSE_WEIGHTS)
        salvage = sim.adjusted_values(raw, look.p_yes, mass, relevance, sim.SALVAGE_WEIGHTS)
        return jnp.where(coarse_phase, coarse, salvage)


__all__ = ["WMAAgent", "WMAState"]
