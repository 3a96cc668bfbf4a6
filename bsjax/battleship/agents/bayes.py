"""Grand et al.'s Bayes-QMD captain without the LLM (docs/battleship/grand-protocol.md §5.4–§5.6), ONE game.

- Bayes-Q: the question is the best-scored (EIG by default: the `planning.scoring` rule
  `information_gain`) of a candidate pool drawn from the region DSL — the 83
  catalog templates, frontier rings (radius 1, 2) around every hit or frontier cell, and cluster
  neighbourhoods (depth 1, 2) of every hit cluster — instead of k questions sampled from an LLM.
  Regions already asked (same cells) and empty regions are left out.
- Bayes-M: shots go to the MAP cell (argmax p, lowest index on ties).
- Bayes-D: ask iff gamma * E_a[max p | a] > max p now, with the particles split by the best
  question's noise-free answer (epsilon enters the weights, not the partition), gamma = 0.95.
Zero LLM calls; works on both protocols.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp

from bsjax.battleship.agents.base import Agent
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard, questions, state_regions
from bsjax.battleship.planning import eig, scoring, sim
from bsjax.battleship.planning.scoring import summarize_turn
from bsjax.battleship.types import ASK, SHOOT, Action, View
from bsjax.core import fastpath

RADII = (1, 2)


def candidate_regions(config: GameConfig, hit_cells: jnp.ndarray,
                      unknown: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The DSL candidate pool of one turn.

    Returns:
      (`[K, W]` uint32 regions, `[K]` int32 template index or -1), K = 83 + 4 C: the templates,
      then frontier rings of radius 1 and 2 anchored at every cell, then cluster neighbourhoods
      of depth 1 and 2 anchored at every cell (invalid anchors give empty regions).
    """
    rows, cols, n = config.rows, config.cols, config.n_cells
    cells = jnp.arange(n, dtype=jnp.int32)
    frontier = state_regions.frontier(hit_cells, unknown, rows, cols)
    labels = state_regions.hit_clusters(hit_cells, rows, cols, config.max_ship_cells)
    ring_anchor = hit_cells | frontier
    cluster_anchor = hit_cells & (labels == cells)        # one anchor per cluster

    def rings(radius):
        regions = jax.vmap(lambda a: state_regions.frontier_ring(a, jnp.int32(radius), unknown,
                                                             rows, cols))(cells)
        return regions & ring_anchor[:, None]

    def neighbourhoods(depth):
        regions = jax.vmap(lambda a: state_regions.cluster_neighborhood(
            a, depth, hit_cells, unknown, rows, cols, config.max_ship_cells))(cells)
        return regions & cluster_anchor[:, None]

    dsl = jnp.concatenate([rings(r) for r in RADII] + [neighbourhoods(d) for d in RADII])
    regions = jnp.concatenate([sim.template_bits(), bitboard.pack(dsl)])
    template = jnp.concatenate([jnp.arange(questions.N_TEMPLATES, dtype=jnp.int32),
                                jnp.full(dsl.shape[0], -1, jnp.int32)])
    return regions, template


def already_asked(regions: jnp.ndarray, view: View) -> jnp.ndarray:
    """`[K]` bool: the same cells were asked about before."""
    obs = view.obs
    same = jnp.all(regions[:, None, :] == obs.question_bits[None, :, :], axis=-1)   # [K, Q]
    asked = jnp.arange(obs.question_bits.shape[0]) < obs.n_questions
    return jnp.any(same & asked[None, :], axis=1)


@chex.dataclass(frozen=True)
class BayesParams:
    """Attributes: gamma `[]` float32 the Bayes-D discount (0.95); scoring the rule's params."""

    gamma: chex.Array
    scoring: dict


@dataclasses.dataclass(frozen=True)
class BayesAgent(Agent):
    """Bayes-QMD without an LLM. Static structure: the config and the question-scoring rule."""

    config: GameConfig
    rule: scoring.ScoringRule = scoring.information_gain

    name = "bayes"
    needs_belief = True

    def default_params(self) -> BayesParams:
        return BayesParams(gamma=jnp.float32(0.95), scoring=self.rule.default_params())

    def init_state(self, params):
        return ()

    def decide(self, key: jax.Array, params: BayesParams, view: View, sampler, belief, state):
        """Returns (action, `[]` float32 p of the MAP cell, state)."""
        del key
        action, p_cell = self.act(params, view, summarize_turn(self.config, view, sampler, belief))
        return action, p_cell, state

    def act(self, params: BayesParams, view: View, turn) -> tuple[Action, jax.Array]:
        """Bayes-Q, -M and -D on the turn's `TurnSummary` (a captain built on bayes passes the
        summary it computed once). Returns (action, `[]` float32 p of the MAP cell)."""
        cfg = self.config
        parts, unknown, hit_cells = turn.parts, turn.unknown, turn.hit_cells
        regions, template = candidate_regions(cfg, hit_cells, unknown)
        p_yes = sim.answers(regions, parts).astype(jnp.float32) @ parts.weights    # [K]
        valid = bitboard.any_set(regions) & ~already_asked(regions, view)
        features = scoring.region_features(cfg, turn, regions, p_yes, coarse=turn.hits == 0)
        gain = jnp.where(valid, self.rule(features, params.scoring), -jnp.inf)
        best_q = fastpath.first_argmax(gain)
        return ask_or_shoot(cfg, view, turn, regions, template, valid, best_q, params.gamma)


def ask_or_shoot(config: GameConfig, view: View, turn, regions: jax.Array, template: jax.Array,
                 valid: jax.Array, best_q: jax.Array,
                 gamma: jax.Array) -> tuple[Action, jax.Array]:
    """Bayes-D on question `best_q` of the `[K, W]` candidate `regions` (`[K]` template ids and
    `[K]` valid): ask it iff γ E_a[max p | a] > max p now, with the particles split by its
    noise-free answer, else shoot the MAP cell. Returns (action, `[]` p of the MAP cell)."""
    p, parts, cell = turn.p, turn.parts, turn.best
    # The best question's answers recomputed (one row) rather than kept from the [K, P]
    # matrix: used once, the matrix fuses into its product and is never stored as booleans.
    best_region = fastpath.row_at(regions, best_q)                                  # [W]
    best_answers = sim.answers(best_region[None], parts)                          # [1, P]
    look = sim.lookahead(config, parts, best_answers, turn.unknown, tempered=False)
    ask = (eig.bayes_d_ask(p[cell], eig.expected_best_after(look)[0], gamma)
           & valid[best_q] & view.can_ask)
    action = Action(kind=jnp.where(ask, ASK, SHOOT).astype(jnp.int32), cell=cell,
                    question_id=jnp.where(ask, template[best_q], -1),
                    question_bits=best_region)
    return action, p[cell]


__all__ = ["BayesAgent", "BayesParams", "already_asked", "ask_or_shoot", "candidate_regions"]
