"""Question scoring as pure functions: a rule maps one turn's question features and its params
to one value per candidate region (mctx passes `qtransform` the same way).

Every planner that asks questions (WMA, wma-reflective, MRA, bayes) builds the same documented
`QuestionFeatures` from its turn and calls its rule; the rule is a static field of the agent and
its params are part of the agent's traced params (`params.scoring`), so a sweep over a rule's
weights is one compiled program. A new rule is a decorated function:

    @scoring_rule(split_weight=0.03)
    def split(q: QuestionFeatures, params) -> jax.Array:          # [K] values
        return q.raw + params["split_weight"] * sim.split(q.p_yes)

    bsjax.play("wma", boards="B01,B02", seeds=2, rule=split)

Features a rule does not read cost nothing: XLA drops them from the compiled program.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.battleship.belief import mh_kernel
from bsjax.battleship.belief.base import AnswerModel
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard, state_regions
from bsjax.battleship.planning import eig, sim
from bsjax.battleship.types import View
from bsjax.core import fastpath


def best_shot(hit_probability: jax.Array, legal: jax.Array) -> jax.Array:
    """argmax of `[C]` p over `[C]` bool legal cells; ties go to the lowest cell index."""
    return fastpath.first_argmax(jnp.where(legal, hit_probability, -1.0))


class TurnSummary(NamedTuple):
    """What every planner reads from the view and the belief at the start of a turn.

    Attributes: p `[C]` hit probability; parts the weighted particle set; unknown `[C]` bool the
    legal shots (`View.legal_shots`); hit_cells `[C]` bool; hits and total (ship cells) `[]`
    float32; best `[]` int32 the argmax cell and best_value its `sim.next` shot value (h + p)/T;
    answers the belief's `AnswerModel` (the look-ahead reweights by it).
    """

    p: jax.Array
    parts: sim.Particles
    unknown: jax.Array
    hit_cells: jax.Array
    hits: jax.Array
    total: jax.Array
    best: jax.Array
    best_value: jax.Array
    answers: AnswerModel


def summarize_turn(config: GameConfig, view: View, sampler, belief) -> TurnSummary:
    """The `TurnSummary` of one game from its view and its sampler's belief."""
    p = sampler.hit_probability(belief)
    unknown = view.legal_shots
    hit_cells = bitboard.unpack(view.obs.hit_bits, config.n_cells)
    hits = jnp.sum(hit_cells, dtype=jnp.int32).astype(jnp.float32)
    total = jnp.sum(view.obs.ship_lengths).astype(jnp.float32)
    best = best_shot(p, unknown)
    # A sampler that defers its kernels (`mh_kernel`) or its layout (`layout`: the importance
    # sampler) to the lowering lays its particles out for the platform too.
    mode = getattr(sampler, "layout", getattr(sampler, "mh_kernel", "xla"))
    by_platform = mh_kernel.resolve(mode) != "xla"
    parts = sim.particles(config, *sampler.weighted_particles(belief), by_platform=by_platform)
    return TurnSummary(p, parts, unknown,
                       hit_cells, hits, total, best, sim.shot_values(p[best], hits, total),
                       sampler.answer_model(belief))


class QuestionFeatures(NamedTuple):
    """What a scoring rule reads: one turn of ONE game and its K candidate regions.

    Attributes:
      p: `[C]` float32 hit probability of every cell.
      unknown: `[C]` bool cells not shot yet.
      hit_cells: `[C]` bool cells shot and hit.
      hits, total: `[]` float32 hits so far and ship cells in the fleet.
      best_value: `[]` float32 the best shot's one-step value (h + p_best) / T, the value a
        question must beat to be asked.
      p_yes: `[K]` float32 belief mass whose board answers yes.
      best_after: `[K, 2]` float32 the best unknown-cell hit probability after a yes (0) / no
        (1) answer, the belief reweighted by the captain's answer likelihood.
      raw: `[K]` float32 the question's one-step value p_yes V_yes + (1 − p_yes) V_no with
        V_a = (h + best_after_a) / T (the paper's §7.3).
      region_mass: `[K]` float32 clip(unknown mass in the region / its size, 0, 1) (catalog
        templates: the paper's divisors and block binning).
      cluster_relevance: `[K]` float32 the region's overlap with the rows or columns of the
        hit clusters, 0 without hits.
      coarse: `[]` bool the coarse phase (no hits yet: the paper's rule weighs questions with
        its coarse weights there, with its salvage weights otherwise).
      epsilon: `[]` float32 the captain's modelled answer-noise rate (its `AnswerModel`).
    """

    p: jax.Array
    unknown: jax.Array
    hit_cells: jax.Array
    hits: jax.Array
    total: jax.Array
    best_value: jax.Array
    p_yes: jax.Array
    best_after: jax.Array
    raw: jax.Array
    region_mass: jax.Array
    cluster_relevance: jax.Array
    coarse: jax.Array
    epsilon: jax.Array


def template_features(config: GameConfig, turn: TurnSummary, coarse: jax.Array,
                      labels: jax.Array | None = None,
                      rows: np.ndarray | None = None) -> QuestionFeatures:
    """The features of the 83 catalog templates (K = 83).

    Args:
      coarse: `[]` bool the coarse phase.
      labels: `[C]` hit-cluster labels (`state_regions.hit_clusters`), if the caller has them.
      rows: static indices of the templates the caller may ask (`sim.lookahead`'s `rows`);
        the others get `best_after` 0.
    """
    look = sim.lookahead(config, turn.parts, sim.answers(sim.template_bits(), turn.parts),
                         turn.unknown, rows=rows, model=turn.answers)
    if labels is None:
        labels = state_regions.hit_clusters(turn.hit_cells, config.rows, config.cols,
                                        config.max_ship_cells)
    return QuestionFeatures(
        p=turn.p, unknown=turn.unknown, hit_cells=turn.hit_cells, hits=turn.hits,
        total=turn.total, best_value=turn.best_value, p_yes=look.p_yes,
        best_after=look.best_after, raw=sim.raw_question_values(look, turn.hits, turn.total),
        region_mass=sim.region_mass(turn.p, turn.unknown),
        cluster_relevance=sim.cluster_relevance(turn.hit_cells, labels),
        coarse=jnp.asarray(coarse), epsilon=turn.answers.epsilon)


def region_features(config: GameConfig, turn: TurnSummary, regions: jax.Array,
                    p_yes: jax.Array, coarse: jax.Array) -> QuestionFeatures:
    """The features of any `[K, W]` uint32 regions, with their `[K]` p_yes given by the caller
    (the bayes captain sums its own)."""
    cells = bitboard.unpack(regions, config.n_cells)                               # [K, C]
    look = sim.lookahead(config, turn.parts, sim.answers(regions, turn.parts), turn.unknown,
                         model=turn.answers)
    look = look._replace(p_yes=p_yes)
    size = jnp.maximum(jnp.sum(cells, axis=1), 1).astype(jnp.float32)
    mass = cells.astype(jnp.float32) @ jnp.where(turn.unknown, turn.p, 0.0) / size
    return QuestionFeatures(
        p=turn.p, unknown=turn.unknown, hit_cells=turn.hit_cells, hits=turn.hits,
        total=turn.total, best_value=turn.best_value, p_yes=p_yes, best_after=look.best_after,
        raw=sim.raw_question_values(look, turn.hits, turn.total),
        region_mass=jnp.clip(mass, 0.0, 1.0),
        cluster_relevance=sim.cluster_relevance(
            turn.hit_cells, state_regions.hit_clusters(turn.hit_cells, config.rows, config.cols,
                                                   config.max_ship_cells), regions=cells),
        coarse=jnp.asarray(coarse), epsilon=turn.answers.epsilon)


@dataclasses.dataclass(frozen=True)
class ScoringRule:
    """A question-scoring rule: `fn(features, params) -> [K] values` and its default params.

    Attributes:
      fn: a pure, jittable function of `QuestionFeatures` and the params dict.
      defaults: name -> default value (a number or a tuple of numbers) of each param.
      name: the rule's name.
    """

    fn: Callable[[QuestionFeatures, Mapping[str, jax.Array]], jax.Array]
    defaults: tuple[tuple[str, Any], ...] = ()
    name: str = ""

    def __call__(self, features: QuestionFeatures, params: Mapping[str, jax.Array]) -> jax.Array:
        return self.fn(features, params)

    def default_params(self) -> dict[str, jax.Array]:
        """The rule's params as float32 arrays (traced like every other param)."""
        return {k: jnp.asarray(v, jnp.float32) for k, v in self.defaults}


def scoring_rule(**defaults) -> Callable[[Callable], ScoringRule]:
    """Decorator: a function `(QuestionFeatures, params) -> [K]` becomes a `ScoringRule` whose
    params (keyword defaults here) are traced, so they can be swept in one compile."""
    def wrap(fn: Callable) -> ScoringRule:
        values = tuple((k, tuple(v) if isinstance(v, (list, tuple)) else v)
                       for k, v in defaults.items())
        return ScoringRule(fn, values, fn.__name__)
    return wrap


@scoring_rule(coarse=sim.COARSE_WEIGHTS, salvage=sim.SALVAGE_WEIGHTS)
def paper(q: QuestionFeatures, params) -> jax.Array:
    """The paper's adjusted value (§7.4): raw + w_split split + w_mass regionMass + w_cluster
    clusterRelevance, with the coarse weights in the coarse phase, the salvage weights after."""
    weights = jnp.where(q.coarse, params["coarse"], params["salvage"])            # [3]
    return sim.adjusted_values(q.raw, q.p_yes, q.region_mass, q.cluster_relevance, weights)


@scoring_rule()
def information_gain(q: QuestionFeatures, params) -> jax.Array:
    """Grand et al.'s Bayes-Q: the noisy-channel expected information gain, in bits."""
    del params
    return eig.expected_information_gain(q.p_yes, q.epsilon)


RULES = {"paper": paper, "information_gain": information_gain}


__all__ = ["QuestionFeatures", "RULES", "ScoringRule", "TurnSummary", "best_shot",
           "information_gain", "paper", "region_features", "scoring_rule", "summarize_turn",
           "template_features"]
