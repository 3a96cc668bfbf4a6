"""The contract every L1 belief (sampler) meets.

A sampler is a frozen dataclass holding static configuration only; its state is a pytree. Every
method is written for ONE game and vmapped over games by the harness; keys are consumed.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import chex
import jax
import jax.numpy as jnp

from bsjax.battleship.types import Observations

PyTree = Any


@chex.dataclass(frozen=True)
class AnswerModel:
    """The captain's model of the spotter's answers: the belief's param (traced, so a study can
    sweep it without recompiling). Every value is computed on the host from (ε, κ) in float64,
    as the reference does (`GameConfig.answer_likelihood`), then stored.

    Attributes:
      epsilon: `[]` float32 the modelled flip rate ε (the noisy-channel EIG reads it).
      evidence_scale: `[]` float32 κ, the tempering of the likelihood (0.8 in the paper).
      match, mismatch: `[]` float32 L(an answer agrees / disagrees with the board), tempered.
      gap: `[]` float32 match − mismatch (the look-ahead's reweighting).
      log_match, log_mismatch: `[]` their logs, floored at ln 1e-10, in the sampler's log dtype
        (float64 for the bit-exact reference chain).
    """

    epsilon: chex.Array
    evidence_scale: chex.Array
    match: chex.Array
    mismatch: chex.Array
    gap: chex.Array
    log_match: chex.Array
    log_mismatch: chex.Array

    @property
    def log_likelihood(self) -> tuple[chex.Array, chex.Array]:
        return self.log_match, self.log_mismatch


def answer_model(config, epsilon: float | None = None, evidence_scale: float | None = None,
                 log_dtype=jnp.float32) -> AnswerModel:
    """The `AnswerModel` of ε and κ (the protocol's own where None), for a sampler whose log
    terms are `log_dtype`."""
    import dataclasses
    cfg = dataclasses.replace(
        config, epsilon=config.epsilon if epsilon is None else float(epsilon),
        evidence_scale=config.evidence_scale if evidence_scale is None else float(evidence_scale))
    match, mismatch = cfg.answer_likelihood()
    log_match, log_mismatch = cfg.log_answer_likelihood()
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return AnswerModel(epsilon=f32(cfg.epsilon), evidence_scale=f32(cfg.evidence_scale),
                       match=f32(match), mismatch=f32(mismatch), gap=f32(match - mismatch),
                       log_match=jnp.asarray(log_match, log_dtype),
                       log_mismatch=jnp.asarray(log_mismatch, log_dtype))


class BeliefInfo(NamedTuple):
    """What an update says about itself (blackjax's `Info`: beside the state, never in it).

    Attributes:
      ess: `[]` float32 the Kish effective sample size of the particle weights after the new
        evidence, before any resampling, in particles (the chain's equally weighted samples: their
        number); its fall towards 1 is the belief's degeneracy.
      acceptance: `[]` float32 the fraction of the update's MH moves that were accepted (the
        importance sampler, which draws afresh: the fraction of its draws that are valid).
    """

    ess: chex.Array
    acceptance: chex.Array


def kish_ess(weights: chex.Array) -> chex.Array:
    """`[]` float32 (Σw)² / Σw² of `[P]` non-negative weights (0 when they are all 0)."""
    total, square = jnp.sum(weights), jnp.sum(jnp.square(weights))
    return jnp.where(square > 0, jnp.square(total) / jnp.where(square > 0, square, 1.0),
                     0.0).astype(jnp.float32)


class Sampler(Protocol):
    """A posterior over ship placements given a game's observations."""

    def init(self, key: jax.Array, obs: Observations, game_seed: chex.Array,
             answers: AnswerModel | None = None) -> PyTree:
        """The belief at the start of a game (`obs` as dealt, `game_seed` the board's seed),
        conditioning on `answers` (the protocol's answer model by default) from now on."""
        ...

    def update(self, key: jax.Array, state: PyTree, obs: Observations
               ) -> tuple[PyTree, BeliefInfo]:
        """(the belief after the observations grew (one more shot or answer), its `BeliefInfo`).
        The key is consumed."""
        ...

    def answer_model(self, state: PyTree) -> AnswerModel:
        """The answer model the belief conditions on (set at `init`, carried in the state)."""
        ...

    def weighted_particles(self, state: PyTree) -> tuple[chex.Array, chex.Array]:
        """`([P, S] int32 span ids of each ship, [P] float32 normalised weights)`."""
        ...

    def hit_probability(self, state: PyTree) -> chex.Array:
        """`[C] float32`: the posterior probability that each cell holds a ship."""
        ...


def _definition_depth(cls: type, name: str) -> int:
    """How far up `cls`'s method resolution order `name` is defined (0: by `cls` itself)."""
    return next((i for i, c in enumerate(cls.__mro__) if name in c.__dict__), len(cls.__mro__))


def update_or_keep(sampler: Sampler, key: jax.Array, state: PyTree, obs: Observations,
                   keep: chex.Array) -> tuple[PyTree, BeliefInfo]:
    """`sampler.update(key, state, obs)`, with `state` itself returned where `keep` (`[]` bool:
    a game that has just ended keeps its belief), the info the update's either way. A sampler
    may do this itself (a method of the same name: the particle sampler selects inside its
    fused kernel); otherwise every leaf is selected. A subclass that overrides `update` below
    the class that defines `update_or_keep` gets its own `update` (and the select). The key is
    consumed."""
    own = getattr(sampler, "update_or_keep", None)
    cls = type(sampler)
    if own is not None and (_definition_depth(cls, "update_or_keep")
                            <= _definition_depth(cls, "update")):
        return own(key, state, obs, keep)
    updated, info = sampler.update(key, state, obs)
    return jax.tree.map(lambda new, old: jnp.where(keep, old, new), updated, state), info


__all__ = ["AnswerModel", "BeliefInfo", "Sampler", "answer_model", "kish_ess", "update_or_keep"]
