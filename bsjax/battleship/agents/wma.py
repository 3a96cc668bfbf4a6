"""L2: the WMA two-bucket planner (docs/battleship/protocol.md §8.2), for ONE game.

Each turn: shoot the most likely frontier cell if any cell next to a hit is unknown; otherwise,
in the coarse phase (no hits yet, < 6 coarse questions) score every unasked row / column /
quadrant template with the coarse formula, in the late phase (hits, turn >= 18, < 6 late
questions) every unasked coarse or block-2x2 template with the salvage formula, and ask the best
iff its adjusted value beats the best shot's `sim.next` value; else shoot the best cell.
The scoring is a `planning.scoring` rule (the paper's by default), passed in.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp

from bsjax.battleship.agents.base import Agent
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import questions, state_regions
from bsjax.battleship.planning import scoring, sim
from bsjax.battleship.planning.scoring import best_shot, summarize_turn
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


@chex.dataclass(frozen=True)
class WMAParams:
    """WMA's params (the reference's defaults in `WMAAgent.default_params`).

    Attributes:
      coarse_budget, late_budget: `[]` int32 questions of each bucket (6, 6).
      late_game_turn: `[]` int32 the first turn of the late phase (18).
      scoring: the scoring rule's params (the paper rule: `coarse`, `salvage` `[3]` weights).
    """

    coarse_budget: chex.Array
    late_budget: chex.Array
    late_game_turn: chex.Array
    scoring: dict


@dataclasses.dataclass(frozen=True)
class WMAAgent(Agent):
    """Static structure: the config and the question-scoring rule."""

    config: GameConfig
    rule: scoring.ScoringRule = scoring.paper

    name = "wma"
    needs_belief = True

    def default_params(self) -> WMAParams:
        return WMAParams(coarse_budget=jnp.int32(6), late_budget=jnp.int32(6),
                         late_game_turn=jnp.int32(18), scoring=self.rule.default_params())

    def init_state(self, params: WMAParams) -> WMAState:
        return WMAState(asked=jnp.zeros(questions.N_TEMPLATES, bool),
                        coarse_used=jnp.int32(0), late_used=jnp.int32(0))

    def decide(self, key: jax.Array, params: WMAParams, view: View, sampler, belief,
               state: WMAState):
        """Returns (action, `[]` float32 p of the best shot, new state)."""
        del key
        cfg = self.config
        turn = summarize_turn(cfg, view, sampler, belief)
        p, unknown, hit_cells, best = turn.p, turn.unknown, turn.hit_cells, turn.best

        frontier = state_regions.frontier(hit_cells, unknown, cfg.rows, cfg.cols)
        frontier_cell = best_shot(p, frontier)
        has_frontier = jnp.any(frontier)
        has_hits = turn.hits > 0

        coarse_phase = ~has_hits & (state.coarse_used < params.coarse_budget)
        late_phase = (has_hits & (view.turn >= params.late_game_turn)
                      & (state.late_used < params.late_budget))
        coarse_family = jnp.asarray(questions.family_mask(*questions.COARSE_FAMILIES))
        late_family = coarse_family | jnp.asarray(questions.family_mask("block-2x2"))
        pool = jnp.where(coarse_phase, coarse_family, late_phase & late_family)
        pool = pool & ~state.asked & view.can_ask

        features = scoring.template_features(cfg, turn, coarse_phase)
        adjusted = jnp.where(pool, self.rule(features, params.scoring), -jnp.inf)
        question = fastpath.first_argmax(adjusted)          # ties: earliest template
        ask = ~has_frontier & jnp.any(pool) & (adjusted[question] > turn.best_value)
        cell = jnp.where(has_frontier, frontier_cell, best)

        action = Action(kind=jnp.where(ask, ASK, SHOOT).astype(jnp.int32), cell=cell,
                        question_id=jnp.where(ask, question, -1),
                        question_bits=sim.template_bits()[question])
        # The reference stores the post-ask turn: a question asked at turn 17 counts as late.
        late_ask = view.turn + 1 >= params.late_game_turn
        state = WMAState(
            asked=state.asked | (ask & (jnp.arange(state.asked.shape[0]) == question)),
            coarse_used=state.coarse_used + (ask & ~late_ask & coarse_family[question]),
            late_used=state.late_used + (ask & late_ask),
        )
        return action, p[cell], state


__all__ = ["WMAAgent", "WMAParams", "WMAState"]
