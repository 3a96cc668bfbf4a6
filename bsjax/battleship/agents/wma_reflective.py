"""WMA's question policy driven by the declared reflective runtime, for ONE game.

The L2 → L3 step of the decomposition changes two things at once: the question policy (WMA's two
buckets → MRA's three) and the reflective runtime. This agent holds the question policy fixed at
WMA's and adds only the runtime, so `wma-reflective --revision on` against `--revision off`
measures reflection alone (and `--revision off` plays exactly WMA's games, a test).

WMA's parameters become the runtime's revisable policy: coarse budget → `budgets[COARSE]`, late
budget → `budgets[LATE]`, the late-game turn → `salvage_start_turn`. WMA asks no local questions
(it shoots the frontier), so `budgets[LOCAL]` starts at 0 and is read by nothing. WMA never holds
a question back for a sure shot, so the exploit threshold starts above any probability
(`EXPLOIT_THRESHOLD`); the closeout preset lowers it by 0.05 per revision, down to 0.4 — from its
third revision on, a cell that likely (p ≥ 0.95) stops WMA's question. The paper's presets,
gate, predictions and reconciliation are MRA's (`observe` is inherited).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from bsjax.battleship.agents.mra import MRAAgent, MRAParams
from bsjax.battleship.game import questions, state_regions
from bsjax.battleship.planning import scoring, sim
from bsjax.battleship.planning.scoring import best_shot, summarize_turn
from bsjax.battleship.runtime.record import (
    COARSE,
    LATE,
    Policy,
    ReflectiveRecord,
    default_policy,
)
from bsjax.battleship.types import ASK, SHOOT, Action, View
from bsjax.core import fastpath

EXPLOIT_THRESHOLD = 1.05   # above 1: WMA's questions are never held back until a closeout


@dataclasses.dataclass(frozen=True)
class WMAReflectiveAgent(MRAAgent):
    """Static structure: `MRAAgent`'s. Its params are `MRAParams` whose initial policy holds
    WMA's budgets (coarse 6, late 6, late game from turn 18). `variant` does not apply: WMA
    never repeats a question."""

    name = "wma-reflective"

    def default_policy(self) -> Policy:
        return default_policy(coarse=6, local=0, late=6, salvage_start_turn=18,
                              exploit_threshold=EXPLOIT_THRESHOLD)

    def decide(self, key: jax.Array, params: MRAParams, view: View, sampler, belief,
               record: ReflectiveRecord):
        """Returns (action, `[]` float32 p of the chosen cell, record)."""
        del key
        cfg = self.config
        turn = summarize_turn(cfg, view, sampler, belief)
        p, unknown, hit_cells, hits, total, best, best_value = (
            turn.p, turn.unknown, turn.hit_cells, turn.hits, turn.total, turn.best,
            turn.best_value)

        frontier = state_regions.frontier(hit_cells, unknown, cfg.rows, cfg.cols)
        frontier_cell = best_shot(p, frontier)
        has_frontier = jnp.any(frontier)
        has_hits = hits > 0
        labels = state_regions.hit_clusters(hit_cells, cfg.rows, cfg.cols, cfg.max_ship_cells)
        sizes = jnp.sum(labels[None, :] == jnp.arange(cfg.n_cells)[:, None], axis=1)

        # WMA's scoring rule in both phases, from one look-ahead.
        features = scoring.template_features(cfg, turn, True, labels)
        coarse_values = self.rule(features, params.scoring)
        salvage_values = self.rule(features._replace(coarse=jnp.bool_(False)), params.scoring)
        coarse_family = jnp.asarray(questions.family_mask(*questions.COARSE_FAMILIES))
        late_family = coarse_family | jnp.asarray(questions.family_mask("block-2x2"))

        def evaluate(policy: Policy):
            """(V, ask?, question, its value, coarse phase?) of WMA's action under `policy`."""
            coarse_phase = ~has_hits & (record.used[COARSE] < policy.budgets[COARSE])
            late_phase = (has_hits & (view.turn >= policy.salvage_start_turn)
                          & (record.used[LATE] < policy.budgets[LATE]))
            pool = jnp.where(coarse_phase, coarse_family, late_phase & late_family)
            pool = pool & ~record.asked & view.can_ask
            scores = jnp.where(pool, jnp.where(coarse_phase, coarse_values, salvage_values),
                               -jnp.inf)
            question = fastpath.first_argmax(scores)      # ties: earliest template
            ask = (~has_frontier & jnp.any(pool) & (scores[question] > best_value)
                   & ~(p[best] >= policy.exploit_threshold))
            return jnp.where(ask, scores[question], best_value), ask, question, coarse_phase

        # The policy and every preset's patch of it, evaluated as one batch (one set of
        # kernels on a GPU instead of one per preset; the same values), as MRA does.
        policies = jax.tree.map(lambda *leaves: jnp.stack(leaves), record.policy,
                                *(preset.patch(record.policy) for preset in self.presets))
        values, asks, chosen, coarse_phases = jax.vmap(evaluate)(policies)
        value, ask, question, coarse_phase = values[0], asks[0], chosen[0], coarse_phases[0]
        deltas = values[1:] - value
        bq = jnp.where(ask, value, 0.0)
        cell = jnp.where(has_frontier, frontier_cell, best)
        baseline = hits / total
        # WMA counts a question asked at turn late_game_turn - 1 as late (the reference's quirk).
        late_ask = view.turn + 1 >= record.policy.salvage_start_turn
        used = fastpath.add_at(record.used, COARSE,
                               (ask & ~late_ask & coarse_family[question]).astype(jnp.int32))
        used = fastpath.add_at(used, LATE, (ask & late_ask).astype(jnp.int32))
        record = record.replace(
            frontier_count=jnp.sum(frontier, dtype=jnp.int32),
            largest_cluster=jnp.max(sizes).astype(jnp.int32),
            best_hit_prob=p[best], best_question_value=bq, preview_delta=deltas,
            pred_kind=ask.astype(jnp.int32), pred_hit_prob=p[cell],
            pred_answer_prob=jnp.where(ask, features.p_yes[question], 0.0),
            pred_gain=jnp.where(ask, jnp.maximum(0.0, bq - baseline), p[cell] / total),
            pred_baseline=baseline, used=used,
            asked=record.asked | (ask & (jnp.arange(record.asked.shape[0]) == question)),
            revised_now=jnp.bool_(False), llm_request=jnp.bool_(False),
            question_mode=jnp.where(coarse_phase, COARSE, LATE).astype(jnp.int32),
        )
        action = Action(kind=jnp.where(ask, ASK, SHOOT).astype(jnp.int32), cell=cell,
                        question_id=jnp.where(ask, question, -1),
                        question_bits=sim.template_bits()[question])
        return action, p[cell], record


__all__ = ["EXPLOIT_THRESHOLD", "WMAReflectiveAgent"]
