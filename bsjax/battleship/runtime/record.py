"""The reflective record (docs/battleship/protocol.md §8.3, §9): the state of the L3 runtime for ONE game.

Everything the reflective layer reads or writes is in this pytree: the current policy (budgets,
salvage turn, exploit threshold, mode), the bucket counters, the last prediction, the error EMAs,
the streak and cooldown, the decision-time summary and revision preview, and the counters.
Computed signals (`signals.py`) are pure functions of it; presets (`presets.py`) patch it.
"""

from __future__ import annotations

import chex
import jax.numpy as jnp

# Question modes (`questionFamilyMode`).
COARSE, LOCAL, LATE = 0, 1, 2
MODE_NAMES = ("coarse", "local", "late")
# Policy modes, written by presets: 0 = the default policy, then one per preset kind.
POLICY_MODE_NAMES = ("default", "coarse-reduced", "late-reprobe", "closeout")
NO_REVISION = -1


@chex.dataclass(frozen=True)
class Policy:
    """The revisable policy tuple.

    Attributes: budgets `[3]` int32 (coarse, local, late); salvage_start_turn `[]` int32;
    exploit_threshold `[]` float32; mode `[]` int32 (index into POLICY_MODE_NAMES).
    """

    budgets: chex.Array
    salvage_start_turn: chex.Array
    exploit_threshold: chex.Array
    mode: chex.Array


@chex.dataclass(frozen=True)
class ReflectiveRecord:
    """Attributes (all `[]` unless noted):
    policy: the current Policy.
    used: `[3]` int32 questions asked in each mode.
    asked: `[83]` bool templates asked (read only by the improved variant).
    pred_kind: 0 shot, 1 question; pred_hit_prob, pred_answer_prob, pred_gain, pred_baseline.
    pred_error_ema, calibration_error_ema: float32; n_observations: int32 (first sets the EMA).
    low_confidence_streak, cooldown: int32.
    frontier_count, largest_cluster: int32 decision-time world summary.
    best_hit_prob, best_question_value: float32 decision-time summary.
    preview_delta: `[K]` float32 Δ of each preset at decision time.
    next_kind: int32 preset the symbolic path would apply (NO_REVISION if none); next_delta.
    coarse_candidate: bool the coarse preset was a candidate (positive-preview exception).
    revision_count, llm_revision_count, fallback_count: int32.
    last_kind: int32 last revision applied; last_delta: float32 its symbolic Δ.
    revised_now: bool a revision was applied this turn; llm_request: bool the gate opened this
      turn and an LLM should be asked (mra-llm only).
    question_mode: int32 the question mode at decision time.
    preview_policy: the policy the symbolic preset `next_kind` would produce (the LLM's preview).
    """

    policy: Policy
    used: chex.Array
    asked: chex.Array
    pred_kind: chex.Array
    pred_hit_prob: chex.Array
    pred_answer_prob: chex.Array
    pred_gain: chex.Array
    pred_baseline: chex.Array
    pred_error_ema: chex.Array
    calibration_error_ema: chex.Array
    n_observations: chex.Array
    low_confidence_streak: chex.Array
    cooldown: chex.Array
    frontier_count: chex.Array
    largest_cluster: chex.Array
    best_hit_prob: chex.Array
    best_question_value: chex.Array
    preview_delta: chex.Array
    next_kind: chex.Array
    next_delta: chex.Array
    coarse_candidate: chex.Array
    revision_count: chex.Array
    llm_revision_count: chex.Array
    fallback_count: chex.Array
    last_kind: chex.Array
    last_delta: chex.Array
    revised_now: chex.Array
    llm_request: chex.Array
    question_mode: chex.Array
    preview_policy: Policy


def default_policy(coarse: int = 6, local: int = 2, late: int = 4, salvage_start_turn: int = 16,
                   exploit_threshold: float = 0.55) -> Policy:
    """The MRA defaults (§8.3)."""
    return Policy(budgets=jnp.asarray([coarse, local, late], jnp.int32),
                  salvage_start_turn=jnp.int32(salvage_start_turn),
                  exploit_threshold=jnp.float32(exploit_threshold), mode=jnp.int32(0))


def initial_record(n_presets: int, n_templates: int = 83,
                   policy: Policy | None = None) -> ReflectiveRecord:
    f0, i0 = jnp.float32(0.0), jnp.int32(0)
    policy = policy if policy is not None else default_policy()
    return ReflectiveRecord(
        policy=policy,
        used=jnp.zeros(3, jnp.int32), asked=jnp.zeros(n_templates, bool),
        pred_kind=i0, pred_hit_prob=f0, pred_answer_prob=f0, pred_gain=f0, pred_baseline=f0,
        pred_error_ema=f0, calibration_error_ema=f0, n_observations=i0,
        low_confidence_streak=i0, cooldown=i0,
        frontier_count=i0, largest_cluster=i0, best_hit_prob=f0, best_question_value=f0,
        preview_delta=jnp.zeros(n_presets, jnp.float32), next_kind=jnp.int32(NO_REVISION),
        next_delta=f0, coarse_candidate=jnp.bool_(False),
        revision_count=i0, llm_revision_count=i0, fallback_count=i0,
        last_kind=jnp.int32(NO_REVISION), last_delta=f0,
        revised_now=jnp.bool_(False), llm_request=jnp.bool_(False),
        question_mode=i0, preview_policy=policy,
    )
