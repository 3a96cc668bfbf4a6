"""L3: MRA, the three-bucket reflective planner (docs/battleship/protocol.md §8.3, §9), for ONE game.

`decide` is the policy plus the runtime's decision-time bookkeeping (world summary, preview Δ of
every preset, the prediction of the chosen action); `observe` runs after the belief has absorbed
the outcome: reconcile (errors, EMAs, cooldown), confidence, streak, and the gated revision —
applied symbolically in-graph, or, for `mra-llm`, requested from the host (`llm_request`).
Turning revision off changes no belief or planning path: they read the record, never own it.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np

from bsjax.battleship.agents.base import Agent
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard, questions, rules, state_regions
from bsjax.battleship.planning import scoring, sim
from bsjax.battleship.planning.scoring import summarize_turn
from bsjax.battleship.runtime import presets as presets_lib
from bsjax.battleship.runtime import signals
from bsjax.battleship.runtime.record import (
    COARSE,
    LATE,
    LOCAL,
    Policy,
    ReflectiveRecord,
    default_policy,
    initial_record,
)
from bsjax.battleship.types import ASK, SHOOT, Action, View
from bsjax.core import fastpath

MODE_FAMILIES = (questions.COARSE_FAMILIES, questions.LOCAL_FAMILIES,
                 ("row", "column", "quadrant", "block-2x2"))


def mode_pools(first_n: int | None) -> np.ndarray:
    """`[3, 83]` bool candidate templates of each mode; the paper keeps the first 10 in catalog
    order (quirk 11), `first_n=None` keeps them all."""
    pools = np.zeros((3, questions.N_TEMPLATES), bool)
    for mode, families in enumerate(MODE_FAMILIES):
        members = np.flatnonzero(questions.family_mask(*families))
        pools[mode, members[:first_n] if first_n else members] = True
    return pools


@chex.dataclass(frozen=True)
class MRAParams:
    """What a study may vary in the reflective runtime, without recompiling.

    Attributes:
      revision: `[]` bool `--revision on|off` (B4 / B3): whether the gate may open.
      tau: `[]` float32 the confidence threshold τ (0.72 for MRA; 1.0 for mra-llm).
      cooldown: `[]` int32 turns after a revision before the gate may open again (3).
      min_delta: `[]` float32 δ_min, the preview Δ a preset must beat (0.01).
      presets: `[K]` bool which presets of the agent's table the gate may apply (all).
      llm_budget: `[]` int32 LLM revisions per game (mra-llm; 999).
      policy: the initial revisable `Policy` (MRA's defaults, §8.3).
      scoring: the question-scoring rule's params.
    """

    revision: chex.Array
    tau: chex.Array
    cooldown: chex.Array
    min_delta: chex.Array
    presets: chex.Array
    llm_budget: chex.Array
    policy: Policy
    scoring: dict


@dataclasses.dataclass(frozen=True)
class MRAAgent(Agent):
    """Static structure (what changes the compiled program); the values are `MRAParams`.

    Attributes:
      variant: "paper" (faithful, quirks included) or "improved" (all candidates of a mode,
        asked questions recorded and never repeated, calibration error in one unit).
      llm: the gate hands the revision to the host instead of applying the preset (mra-llm).
      presets: the preset table the gate chooses from (`params.presets` masks it).
      rule: the question-scoring rule (`planning.scoring.paper`).
    """

    config: GameConfig
    variant: str = "paper"
    llm: bool = False
    presets: tuple = presets_lib.PAPER_PRESETS
    rule: scoring.ScoringRule = scoring.paper

    name = "mra"
    needs_belief = True
    tau_default = 0.72

    def default_policy(self) -> Policy:
        return default_policy()

    def default_params(self) -> MRAParams:
        return MRAParams(revision=jnp.bool_(True), tau=jnp.float32(self.tau_default),
                         cooldown=jnp.int32(presets_lib.COOLDOWN),
                         min_delta=jnp.float32(presets_lib.MIN_DELTA),
                         presets=jnp.ones(len(self.presets), bool), llm_budget=jnp.int32(999),
                         policy=self.default_policy(), scoring=self.rule.default_params())

    def init_state(self, params: MRAParams) -> ReflectiveRecord:
        return initial_record(len(self.presets), policy=params.policy)

    @property
    def improved(self) -> bool:
        return self.variant == "improved"

    # ----- decide -----

    def decide(self, key: jax.Array, params: MRAParams, view: View, sampler, belief,
               record: ReflectiveRecord):
        """Returns (action, `[]` float32 p of the best shot, record)."""
        del key
        cfg = self.config
        turn = summarize_turn(cfg, view, sampler, belief)
        p, unknown, hit_cells, hits, total, best, best_value = (
            turn.p, turn.unknown, turn.hit_cells, turn.hits, turn.total, turn.best,
            turn.best_value)

        frontier_count = jnp.sum(state_regions.frontier(hit_cells, unknown, cfg.rows, cfg.cols),
                                 dtype=jnp.int32)
        labels = state_regions.hit_clusters(hit_cells, cfg.rows, cfg.cols, cfg.max_ship_cells)
        sizes = jnp.sum(labels[None, :] == jnp.arange(cfg.n_cells)[:, None], axis=1)
        largest_cluster = jnp.max(sizes).astype(jnp.int32)

        static_pools = mode_pools(None if self.improved else 10)
        # Only templates some mode may ask are reweighted (20 of 83 in the paper's variant); the
        # others are never scored (-inf below).
        askable = static_pools.any(axis=0)
        features = scoring.template_features(
            cfg, turn, True, labels, rows=None if askable.all() else np.flatnonzero(askable))
        adjusted = jnp.stack([self.rule(features, params.scoring),    # coarse formula
                              self.rule(features._replace(coarse=jnp.bool_(False)),
                                        params.scoring)])

        pools = jnp.asarray(static_pools)
        if self.improved:
            pools = pools & ~record.asked[None, :]

        def evaluate(policy: Policy):
            """(V, ask?, question, bq, mode) of the immediate action under `policy` (§9.3)."""
            mode = jnp.where(largest_cluster == 0, COARSE,
                             jnp.where((view.turn >= policy.salvage_start_turn)
                                       & (frontier_count == 0), LATE, LOCAL))
            is_open = (record.used[mode] < policy.budgets[mode]) & view.can_ask
            scores = jnp.where(pools[mode], adjusted[jnp.minimum(mode, 1)], -jnp.inf)
            question = fastpath.first_argmax(scores)
            top = jnp.max(scores)  # = scores[question], NaN included, without a gather
            # The reference scans from a best of 0 and keeps strictly larger values.
            # Questions are scored only while the mode's budget is open (§8.3).
            has_question = (top > 0) & is_open
            bq = jnp.where(has_question, top, 0.0)
            prefer = (is_open & has_question & (bq > best_value)
                      & ~(p[best] >= policy.exploit_threshold))
            return jnp.where(prefer, bq, best_value), prefer, question, bq, mode

        # The policy and every preset's patch of it, evaluated as one batch (one set of
        # kernels on a GPU instead of one per preset; the same values).
        policies = jax.tree.map(lambda *leaves: jnp.stack(leaves), record.policy,
                                *(preset.patch(record.policy) for preset in self.presets))
        values, asks, chosen, bqs, modes = jax.vmap(evaluate)(policies)
        value, ask, question, bq, mode = values[0], asks[0], chosen[0], bqs[0], modes[0]
        deltas = values[1:] - value

        cell = best  # MRA shoots the global argmax, not a frontier cell
        baseline = hits / total
        record = record.replace(
            frontier_count=frontier_count, largest_cluster=largest_cluster,
            best_hit_prob=p[best], best_question_value=bq, preview_delta=deltas,
            pred_kind=ask.astype(jnp.int32), pred_hit_prob=p[best],
            pred_answer_prob=jnp.where(ask, features.p_yes[question], 0.0),
            pred_gain=jnp.where(ask, jnp.maximum(0.0, bq - baseline), p[best] / total),
            pred_baseline=baseline,
            used=fastpath.add_at(record.used, mode, ask.astype(jnp.int32)),
            asked=record.asked | (ask & (jnp.arange(record.asked.shape[0]) == question)),
            revised_now=jnp.bool_(False), llm_request=jnp.bool_(False), question_mode=mode,
        )
        action = Action(kind=jnp.where(ask, ASK, SHOOT).astype(jnp.int32), cell=cell,
                        question_id=jnp.where(ask, question, -1),
                        question_bits=sim.template_bits()[question])
        return action, p[best], record

    def kind_ids(self) -> jnp.ndarray:
        """`[K]` int32 each preset's index in the paper's table (what events and the lens name),
        so a run with a subset of the presets records the same ids; a preset of the user's own
        gets an id past the paper's."""
        return jnp.asarray([presets_lib.KINDS.index(p.kind) if p.kind in presets_lib.KINDS
                            else len(presets_lib.KINDS) + i for i, p in enumerate(self.presets)],
                           jnp.int32)

    def trace(self, record: ReflectiveRecord) -> dict:
        """Per-turn scalars for events.jsonl and `bsjax lens --view confidence`."""
        out = {
            "confidence": signals.model_confidence(record),
            "pred_kind": record.pred_kind, "pred_hit_prob": record.pred_hit_prob,
            "pred_answer_prob": record.pred_answer_prob, "pred_gain": record.pred_gain,
            "pred_error_ema": record.pred_error_ema,
            "calibration_error_ema": record.calibration_error_ema,
            "streak": record.low_confidence_streak, "cooldown": record.cooldown,
            "next_kind": record.next_kind, "next_delta": record.next_delta,
            "revision": jnp.where(record.revised_now, self.kind_ids()[record.last_kind],
                                  -1).astype(jnp.int32),
            "question_mode": record.question_mode, "policy_mode": record.policy.mode,
            "coarse_budget": record.policy.budgets[0], "local_budget": record.policy.budgets[1],
            "late_budget": record.policy.budgets[2],
            "salvage_start_turn": record.policy.salvage_start_turn,
            "exploit_threshold": record.policy.exploit_threshold,
            "llm_request": record.llm_request,
        }
        for i, preset in enumerate(self.presets):
            out[f"delta_{preset.kind}"] = record.preview_delta[i]
        return out

    # ----- observe: reconcile, confidence, gate, revision -----

    def observe(self, params: MRAParams, view: View, sampler, belief, record: ReflectiveRecord,
                outcome: jax.Array, game_over: jax.Array) -> ReflectiveRecord:
        """After the belief absorbed the outcome. `view` is the post-action view."""
        cfg = self.config
        total = jnp.sum(view.obs.ship_lengths).astype(jnp.float32)
        signal = outcome.astype(jnp.float32)
        is_question = record.pred_kind == 1
        unknown = rules.unknown_cells(cfg, view.obs)
        best_after = jnp.max(jnp.where(unknown, sampler.hit_probability(belief), 0.0))
        question_gain = jnp.maximum(0.0, best_after - record.pred_hit_prob)
        if self.improved:
            question_gain = question_gain / total   # same unit as the prediction (fixes quirk 14)
        realized = jnp.where(is_question, question_gain, signal / total)
        pred_error = jnp.abs(signal - jnp.where(is_question, record.pred_answer_prob,
                                                record.pred_hit_prob))
        cal_error = jnp.abs(realized - record.pred_gain)
        first = record.n_observations == 0
        ema = lambda old, x: jnp.where(first, x, (3.0 * old + x) / 4.0)  # noqa: E731
        record = record.replace(
            pred_error_ema=ema(record.pred_error_ema, pred_error),
            calibration_error_ema=ema(record.calibration_error_ema, cal_error),
            n_observations=record.n_observations + 1,
            cooldown=jnp.maximum(0, record.cooldown - 1),
        )
        need = signals.need_revision(record, params.tau)
        streak = jnp.where(need, record.low_confidence_streak + 1, 0)
        context = presets_lib.GateContext(
            turn=view.turn, hits=bitboard.popcount(view.obs.hit_bits))
        gated = record.replace(low_confidence_streak=streak)
        next_kind, next_delta, flags = presets_lib.select(self.presets, gated, context,
                                                          params.min_delta, params.presets)
        gated = gated.replace(next_kind=next_kind, next_delta=next_delta,
                              coarse_candidate=flags[0],
                              preview_policy=presets_lib.apply(self.presets, record.policy,
                                                               next_kind))
        gate = (signals.should_revise(gated, params.tau, params.revision, params.min_delta)
                & ~game_over)
        ask_llm = gate & (record.llm_revision_count < params.llm_budget) if self.llm else False
        # The host answers an LLM request between steps; otherwise the preset applies here.
        revised = apply_revision(self.presets, gated, gate & ~ask_llm, next_kind,
                                 cooldown=params.cooldown)
        revised = revised.replace(llm_request=jnp.asarray(ask_llm))
        # A finished game only reconciles; the streak and the gate stop with it.
        return jax.tree.map(lambda done, live: jnp.where(game_over, done, live), record, revised)


def apply_revision(presets, record: ReflectiveRecord, gate: jax.Array, kind: jax.Array,
                   policy: Policy | None = None, from_llm: jax.Array = False,
                   fallback: jax.Array = False,
                   cooldown: jax.Array = presets_lib.COOLDOWN) -> ReflectiveRecord:
    """Apply a revision where `gate`: the preset `kind`'s patch (or an explicit `policy` from the
    LLM), counters, the cooldown (3 in the paper), the last kind and its symbolic Δ."""
    patched = presets_lib.apply(presets, record.policy, kind) if policy is None else policy
    new = record.replace(
        policy=patched,
        revision_count=record.revision_count + 1,
        llm_revision_count=record.llm_revision_count + jnp.asarray(from_llm, jnp.int32),
        fallback_count=record.fallback_count + jnp.asarray(fallback, jnp.int32),
        cooldown=jnp.asarray(cooldown, jnp.int32),
        last_kind=kind, last_delta=record.next_delta, revised_now=jnp.bool_(True),
    )
    return jax.tree.map(lambda a, b: jnp.where(gate, a, b), new, record)


@dataclasses.dataclass(frozen=True)
class MRALLMAgent(MRAAgent):
    """L4: MRA whose open gate asks an LLM for the revision (out of the graph, by the harness).

    τ = 0 never opens the gate (identical to `mra --revision off`); τ = 1.0 is the paper's B6.
    """

    llm: bool = True

    name = "mra-llm"
    tau_default = 1.0


__all__ = ["MRAAgent", "MRALLMAgent", "MRAParams", "apply_revision", "mode_pools"]
