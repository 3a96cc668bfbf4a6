"""The captains behind `grand_levers.py`: bayes with one lever changed, each a traced function
of one game like every bsjax agent (static structure in fields, levers as traced params).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple
from unittest import mock

import chex
import jax.numpy as jnp
import numpy as np

from bsjax.battleship.agents import bayes
from bsjax.battleship.game import bitboard
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.planning import eig, scoring, sim
from bsjax.battleship.planning.scoring import summarize_turn
from bsjax.battleship.types import ASK, SHOOT, Action
from bsjax.core import fastpath


@chex.dataclass(frozen=True)
class ProbeParams:
    """bayes's params and θ `[]` float32: probe a shot's cell when its p is below θ."""

    gamma: chex.Array
    scoring: dict
    probe: chex.Array


@dataclasses.dataclass(frozen=True)
class ProbeAgent(bayes.BayesAgent):
    """bayes, but a shot whose hit probability is below `probe` becomes a question about its
    cell while questions are left (bayes's own questions are kept)."""

    name = "bayes-probe"

    def default_params(self) -> ProbeParams:
        base = super().default_params()
        return ProbeParams(gamma=base.gamma, scoring=base.scoring, probe=jnp.float32(0.0))

    def decide(self, key, params, view, sampler, belief, state):
        action, p_cell, state = super().decide(
            key, bayes.BayesParams(gamma=params.gamma, scoring=params.scoring), view, sampler,
            belief, state)
        cell_bits = bitboard.single(action.cell, self.config.n_words)
        probe = ((action.kind == SHOOT) & (p_cell < params.probe) & view.can_ask
                 & ~bayes.already_asked(cell_bits[None], view)[0])
        return Action(kind=jnp.where(probe, ASK, action.kind).astype(jnp.int32),
                      cell=action.cell, question_id=jnp.where(probe, -1, action.question_id),
                      question_bits=jnp.where(probe, cell_bits, action.question_bits)
                      ), p_cell, state


def rectangles(max_cells: int) -> np.ndarray:
    """`[R, W]` uint32: every axis-aligned rectangle of the 8 × 8 board of at most `max_cells`."""
    masks = []
    for r0 in range(8):
        for r1 in range(r0, 8):
            for c0 in range(8):
                for c1 in range(c0, 8):
                    if (r1 - r0 + 1) * (c1 - c0 + 1) <= max_cells:
                        mask = np.zeros((8, 8), bool)
                        mask[r0:r1 + 1, c0:c1 + 1] = True
                        masks.append(mask.ravel())
    return bitboard.pack_np(np.array(masks))


def widened_pool(extra):
    """bayes's `candidate_regions` with the `[R, W]` regions `extra(hit_cells, unknown)`
    appended (template index -1)."""
    dsl = bayes.candidate_regions

    def pool(config, hit_cells, unknown):
        regions, template = dsl(config, hit_cells, unknown)
        more = extra(hit_cells, unknown)
        return (jnp.concatenate([regions, more]),
                jnp.concatenate([template, jnp.full(more.shape[0], -1, jnp.int32)]))
    return pool


@dataclasses.dataclass(frozen=True)
class WidePoolAgent(bayes.BayesAgent):
    """bayes whose candidate questions also hold every rectangle of at most `max_cells` cells
    (a static field: each pool is its own program)."""

    max_cells: int = 9
    name = "bayes-wide-pool"

    def decide(self, key, params, view, sampler, belief, state):
        # bayes's decide reads the module's pool function when it is traced.
        fixed = jnp.asarray(rectangles(self.max_cells))
        with mock.patch.object(bayes, "candidate_regions", widened_pool(lambda *_: fixed)):
            return super().decide(key, params, view, sampler, belief, state)


def line_masks(rows: int, cols: int, reach: int) -> np.ndarray:
    """`[2 C, C]` bool: for each anchor cell, the cells within `reach` of it along its row, then
    along its column (the anchor left out)."""
    masks = np.zeros((2, rows * cols, rows * cols), bool)
    for row in range(rows):
        for col in range(cols):
            for step in [s * d for d in range(1, reach + 1) for s in (-1, 1)]:
                if 0 <= col + step < cols:
                    masks[0, row * cols + col, row * cols + col + step] = True
                if 0 <= row + step < rows:
                    masks[1, row * cols + col, (row + step) * cols + col] = True
    return masks.reshape(-1, rows * cols)


@dataclasses.dataclass(frozen=True)
class LinesAgent(bayes.BayesAgent):
    """bayes whose candidate questions also hold, for every hit cell, its unshot neighbours along
    its row and along its column within `reach` (a static field)."""

    reach: int = 1
    name = "bayes-lines"

    def decide(self, key, params, view, sampler, belief, state):
        masks = np.concatenate([line_masks(self.config.rows, self.config.cols, r)
                                for r in range(1, self.reach + 1)])               # [R, C]
        anchors = np.arange(masks.shape[0]) % self.config.n_cells

        def lines(hit_cells, unknown):
            return bitboard.pack(jnp.asarray(masks) & unknown[None, :] & hit_cells[anchors][:, None])

        with mock.patch.object(bayes, "candidate_regions", widened_pool(lines)):
            return super().decide(key, params, view, sampler, belief, state)


@chex.dataclass(frozen=True)
class PressureParams:
    """bayes's params, β `[]` float32 and ρ0 `[]` float32: γ + β (ρ − ρ0) is the turn's γ."""

    gamma: chex.Array
    scoring: dict
    beta: chex.Array
    rho0: chex.Array


def questions_per_unhit_cell(config, view) -> jnp.ndarray:
    """ρ `[]` float32: the questions left per ship cell not yet hit (at least one cell)."""
    hits = jnp.sum(bitboard.unpack(view.obs.hit_bits, config.n_cells), dtype=jnp.int32)
    unhit = jnp.maximum(jnp.sum(view.obs.ship_lengths) - hits, 1).astype(jnp.float32)
    return view.questions_left.astype(jnp.float32) / unhit


@dataclasses.dataclass(frozen=True)
class PressureAgent(bayes.BayesAgent):
    """bayes whose ask threshold moves with ρ, the questions left per ship cell not yet hit:
    more eager with questions to spare, more sparing when they run short."""

    name = "bayes-pressure"

    def default_params(self) -> PressureParams:
        base = super().default_params()
        return PressureParams(gamma=base.gamma, scoring=base.scoring, beta=jnp.float32(0.0),
                              rho0=jnp.float32(1.2))

    def decide(self, key, params, view, sampler, belief, state):
        gamma = params.gamma + params.beta * (questions_per_unhit_cell(self.config, view)
                                              - params.rho0)
        return super().decide(key, bayes.BayesParams(gamma=gamma, scoring=params.scoring), view,
                              sampler, belief, state)


def ship_wounded(view) -> jnp.ndarray:
    """`[]` bool: a ship is hit (its colour revealed) and not yet sunk."""
    return jnp.any(bitboard.any_set(view.obs.colour_bits) & ~view.obs.sunk)


@chex.dataclass(frozen=True)
class PhaseParams:
    """bayes's params (γ: no ship wounded) and γ_wounded `[]` float32: a ship hit, not sunk."""

    gamma: chex.Array
    scoring: dict
    gamma_wounded: chex.Array


@dataclasses.dataclass(frozen=True)
class PhaseAgent(bayes.BayesAgent):
    """bayes with its ask threshold γ_wounded while a ship is hit and not yet sunk."""

    name = "bayes-phase"

    def default_params(self) -> PhaseParams:
        base = super().default_params()
        return PhaseParams(gamma=base.gamma, scoring=base.scoring, gamma_wounded=base.gamma)

    def decide(self, key, params, view, sampler, belief, state):
        gamma = jnp.where(ship_wounded(view), params.gamma_wounded, params.gamma)
        return super().decide(key, bayes.BayesParams(gamma=gamma, scoring=params.scoring), view,
                              sampler, belief, state)


@chex.dataclass(frozen=True)
class ShotInfoParams:
    """bayes's params, κ `[]` float32 the weight of a shot's information and full `[]` float32
    (> 0: the whole outcome's entropy; else the colour's alone)."""

    gamma: chex.Array
    scoring: dict
    kappa: chex.Array
    full: chex.Array


def entropy_bits(probabilities: jnp.ndarray, axis: int = 0) -> jnp.ndarray:
    """Σ −q log2 q over `axis`, 0 log 0 = 0."""
    safe = jnp.where(probabilities > 0, probabilities, 1.0)
    return -jnp.sum(probabilities * jnp.log2(safe), axis=axis)


@dataclasses.dataclass(frozen=True)
class ShotInfoAgent(bayes.BayesAgent):
    """bayes whose shot goes to the unshot cell of the largest p + κ I (κ = 0: bayes's MAP cell);
    its questions are bayes's."""

    name = "bayes-shot-info"

    def default_params(self) -> ShotInfoParams:
        base = super().default_params()
        return ShotInfoParams(gamma=base.gamma, scoring=base.scoring, kappa=jnp.float32(0.0),
                              full=jnp.float32(0.0))

    def decide(self, key, params, view, sampler, belief, state):
        action, p_cell, state = super().decide(
            key, bayes.BayesParams(gamma=params.gamma, scoring=params.scoring), view, sampler,
            belief, state)
        spans, weights = sampler.weighted_particles(belief)                  # [P, S], [P]
        ship_cells = jnp.asarray(spans_lib.table_for(self.config).cells)[spans]   # [P, S, C]
        by_ship = jnp.einsum("p,psc->sc", weights / jnp.sum(weights),
                             ship_cells.astype(jnp.float32))                  # [S, C]
        p = jnp.sum(by_ship, axis=0)
        colour = p * entropy_bits(by_ship / jnp.maximum(p, 1e-9))
        info = jnp.where(params.full > 0, eig.binary_entropy(p) + colour, colour)
        cell = jnp.argmax(jnp.where(view.legal_shots, p + params.kappa * info, -jnp.inf))
        cell = jnp.where(action.kind == SHOOT, cell, action.cell).astype(jnp.int32)
        return action._replace(cell=cell), p_cell, state


@scoring.scoring_rule(lam=0.0)
def information_and_hit_gain(q: scoring.QuestionFeatures, params) -> jnp.ndarray:
    """EIG + λ (E_a[max p | a] − max p now): `[K]` values."""
    after = q.p_yes * q.best_after[:, 0] + (1.0 - q.p_yes) * q.best_after[:, 1]
    gain = after - jnp.max(jnp.where(q.unknown, q.p, 0.0))
    return eig.expected_information_gain(q.p_yes, q.epsilon) + params["lam"] * gain


@chex.dataclass(frozen=True)
class OccupancyParams:
    """bayes's params, λ `[]` float32 and uncertainty `[]` float32 (0: Σ H_b(p_c); 1:
    Σ min(p_c, 1 − p_c); 2: the unknown cells with 0.1 < p_c < 0.9)."""

    gamma: chex.Array
    scoring: dict
    lam: chex.Array
    uncertainty: chex.Array


def occupancy_uncertainty(p: jnp.ndarray, unknown: jnp.ndarray, kind: jnp.ndarray) -> jnp.ndarray:
    """`[..., C]` hit probabilities -> `[...]` the unknown cells' summed uncertainty of `kind`."""
    each = jnp.where(kind < 0.5, eig.binary_entropy(p),
                     jnp.where(kind < 1.5, jnp.minimum(p, 1.0 - p),
                               ((p > 0.1) & (p < 0.9)).astype(jnp.float32)))
    return jnp.sum(jnp.where(unknown, each, 0.0), axis=-1)


class AnswerLook(NamedTuple):
    """The candidate questions of one turn under the captain's answer model.

    Attributes: p_yes `[K]`; p_answer `[K, 2]` the probability of a yes (0) / no (1) answer;
    after `[K, 2, C]` the cells' hit probabilities after each answer; epsilon `[]`."""

    p_yes: jnp.ndarray
    p_answer: jnp.ndarray
    after: jnp.ndarray
    epsilon: jnp.ndarray


@dataclasses.dataclass(frozen=True)
class ScoredQuestionAgent(bayes.BayesAgent):
    """bayes whose question is the best by `score` (bayes: EIG) and whose Bayes-D threshold is
    `ask_gamma` (bayes: γ); subclasses override either."""

    def score(self, params, look: AnswerLook, p, unknown, regions) -> jnp.ndarray:
        return eig.expected_information_gain(look.p_yes, look.epsilon)

    def ask_gamma(self, params, view) -> jnp.ndarray:
        return params.gamma

    def decide(self, key, params, view, sampler, belief, state):
        del key
        cfg = self.config
        turn = summarize_turn(cfg, view, sampler, belief)
        p, parts, unknown = turn.p, turn.parts, turn.unknown
        regions, template = bayes.candidate_regions(cfg, turn.hit_cells, unknown)
        answers = sim.answers(regions, parts).astype(jnp.float32)                # [K, P]
        p_yes = answers @ parts.weights                                           # [K]
        valid = bitboard.any_set(regions) & ~bayes.already_asked(regions, view)
        # The marginals after each answer under the captain's answer model (as `sim.lookahead`).
        model = turn.answers
        mass = parts.weights @ parts.occupancy                                    # [C]
        yes_mass = (answers * parts.weights) @ parts.occupancy                    # [K, C]
        after = jnp.stack([model.mismatch * mass + model.gap * yes_mass,
                           model.match * mass - model.gap * yes_mass], axis=1)   # [K, 2, C]
        p_answer = jnp.stack([model.match * p_yes + model.mismatch * (1.0 - p_yes),
                              model.mismatch * p_yes + model.match * (1.0 - p_yes)], axis=1)
        after = after / jnp.maximum(p_answer, 1e-9)[..., None]
        look = AnswerLook(p_yes, p_answer, after, model.epsilon)
        best_q = fastpath.first_argmax(
            jnp.where(valid, self.score(params, look, p, unknown, regions), -jnp.inf))
        action, p_cell = bayes.ask_or_shoot(cfg, view, turn, regions, template, valid, best_q,
                                            self.ask_gamma(params, view))
        return action, p_cell, state


def occupancy_drop(look: AnswerLook, p, unknown, kind) -> jnp.ndarray:
    """`[K]` the expected drop of the unknown cells' occupancy uncertainty of `kind`."""
    return (occupancy_uncertainty(p, unknown, kind)
            - jnp.sum(look.p_answer * occupancy_uncertainty(look.after, unknown, kind), axis=1))


@dataclasses.dataclass(frozen=True)
class OccupancyAgent(ScoredQuestionAgent):
    """bayes whose questions are scored by EIG + λ U, U the expected drop of the unknown cells'
    occupancy uncertainty: bits about where the ships are, not which ship is which (a hit's
    colour tells that for free on Grand's boards). λ = 0 is bayes's choice."""

    name = "bayes-occupancy"

    def default_params(self) -> OccupancyParams:
        base = super().default_params()
        return OccupancyParams(gamma=base.gamma, scoring=base.scoring, lam=jnp.float32(0.0),
                               uncertainty=jnp.float32(0.0))

    def score(self, params, look, p, unknown, regions):
        return (eig.expected_information_gain(look.p_yes, look.epsilon)
                + params.lam * occupancy_drop(look, p, unknown, params.uncertainty))


@chex.dataclass(frozen=True)
class CombinedParams:
    """bayes's params and the weights of a combined rule (all 0 and γ_wounded = γ: bayes):
    gamma_wounded `[]` the ask threshold while a ship is hit and not sunk; gain, drop, size `[]`
    the weights of the next shot's gain, the occupancy entropy's drop and the region's share of
    the board beside the question's EIG."""

    gamma: chex.Array
    scoring: dict
    gamma_wounded: chex.Array
    gain: chex.Array
    drop: chex.Array
    size: chex.Array


@dataclasses.dataclass(frozen=True)
class CombinedAgent(ScoredQuestionAgent):
    """bayes with several levers at once, for a search over their weights."""

    name = "bayes-combined"

    def default_params(self) -> CombinedParams:
        base = super().default_params()
        zero = jnp.float32(0.0)
        return CombinedParams(gamma=base.gamma, scoring=base.scoring, gamma_wounded=base.gamma,
                              gain=zero, drop=zero, size=zero)

    def score(self, params, look, p, unknown, regions):
        best_after = jnp.max(jnp.where(unknown, look.after, -1.0), axis=-1)      # [K, 2]
        gain = (jnp.sum(look.p_answer * best_after, axis=1)
                - jnp.max(jnp.where(unknown, p, 0.0)))
        cells = bitboard.unpack(regions, self.config.n_cells)
        size = jnp.sum(cells, axis=1).astype(jnp.float32) / self.config.n_cells
        return (eig.expected_information_gain(look.p_yes, look.epsilon) + params.gain * gain
                + params.drop * occupancy_drop(look, p, unknown, 0.0) + params.size * size)

    def ask_gamma(self, params, view):
        return jnp.where(ship_wounded(view), params.gamma_wounded, params.gamma)


@scoring.scoring_rule(gain=0.0, mass=0.0, cluster=0.0)
def information_and_features(q: scoring.QuestionFeatures, params) -> jnp.ndarray:
    """EIG + w_gain (E_a[max p | a] − max p now) + w_mass regionMass + w_cluster
    clusterRelevance: `[K]` values (all weights 0: bayes's EIG). With w_gain alone it is
    `information_and_hit_gain`, which is kept apart because the extra zero-weighted terms
    change XLA's arithmetic enough to move one of the committed `hit_gain` games."""
    after = q.p_yes * q.best_after[:, 0] + (1.0 - q.p_yes) * q.best_after[:, 1]
    gain = after - jnp.max(jnp.where(q.unknown, q.p, 0.0))
    return (eig.expected_information_gain(q.p_yes, q.epsilon) + params["gain"] * gain
            + params["mass"] * q.region_mass + params["cluster"] * q.cluster_relevance)
