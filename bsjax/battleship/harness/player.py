"""A captain playing the environment: one turn of ONE game (vmapped over games by the harness).

A turn is: observe (`env.Env.observe`) → decide (the agent, from its belief) → act
(`env.Env.step`, which owns the action contract) → update the belief → the agent's after-turn
step (the reflective runtime's reconciliation) → a `TurnRecord`. A finished game is unchanged by
a turn: the environment returns it as it was, and its belief and agent state are kept.

One game's params (`PlayParams`: the agent's params and the belief's answer model, pytrees of
arrays) are an argument of every function here, so the harness vmaps them like games: games with
different params (τ, cooldown, scoring weights, the modelled answer noise, ...) share one
compiled program.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp

from bsjax.battleship.agents.base import Agent, HostCaptain
from bsjax.battleship.belief.base import AnswerModel, Sampler, answer_model, update_or_keep
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game.env import Env
from bsjax.battleship.types import GameState, TurnRecord

PyTree = object


@chex.dataclass(frozen=True)
class PlayParams:
    """One game's params.

    Attributes:
      agent: the agent's params (`agent.default_params()`; `()` if it has none).
      answers: the belief's `AnswerModel` (`()` for an agent without a belief).
    """

    agent: PyTree
    answers: AnswerModel | tuple


@dataclasses.dataclass(frozen=True)
class Player:
    """An agent, its sampler (or None) and the rng mode: everything static about a run."""

    config: GameConfig
    agent: Agent | HostCaptain
    sampler: Sampler | None
    reference_rng: bool = False

    @property
    def env(self) -> Env:
        return Env(self.config, self.reference_rng)

    def sharded(self, devices: int) -> Player:
        """This player for a batch sharded over `devices` devices in equal blocks of games. A
        sampler that pools work across a batch's games (the chain's repair search,
        `ChainSampler.repair_groups`) pools within each device's block instead, so that no
        device gathers another's games. The same games."""
        if devices > 1 and hasattr(self.sampler, "repair_groups"):
            return dataclasses.replace(
                self, sampler=dataclasses.replace(self.sampler, repair_groups=devices))
        return self

    def default_params(self) -> PlayParams:
        """One game's params at their defaults: the agent's, and the protocol's answer model
        (its log terms in the sampler's dtype: float64 for the bit-exact reference chain)."""
        answers = ()
        if self.sampler is not None:
            answers = answer_model(self.config,
                                   log_dtype=getattr(self.sampler, "log_dtype", jnp.float32))
        return PlayParams(agent=self.agent.default_params(), answers=answers)

    def init_one(self, key: jax.Array, params: PlayParams, truth_spans: jax.Array,
                 game_seed: jax.Array):
        """One game's (GameState, (belief, agent state)). The key is consumed."""
        state, belief = self.init_belief_one(key, params.answers, truth_spans, game_seed)
        return state, (belief, self.agent.init_state(params.agent))

    def init_belief_one(self, key: jax.Array, answers: AnswerModel | tuple,
                        truth_spans: jax.Array, game_seed: jax.Array):
        """One game's (GameState, belief): `init_one` without the agent, so it depends only on
        the game config, the sampler and the rng mode (`harness.initial` shares its compile
        across agents). The key is consumed."""
        state = self.env.init(truth_spans, game_seed)
        belief = (self.sampler.init(key, state.obs, game_seed, answers)
                  if self.sampler is not None else jnp.zeros(()))
        return state, belief

    def turn_one(self, key: jax.Array, params: PlayParams, state: GameState, carry):
        """One turn of one game: decide, act, update the belief. A finished game is unchanged.

        `carry` is (belief, agent state). Returns (state, carry, TurnRecord). Key consumed.
        """
        belief, agent_state = carry
        k_act, k_env, k_belief = jax.random.split(key, 3)
        view = self.env.observe(state)
        action, p_choice, new_agent_state = self.agent.decide(k_act, params.agent, view,
                                                              self.sampler, belief, agent_state)
        return self._advance((k_env, k_belief), params, state, belief, agent_state,
                             new_agent_state, action, p_choice)

    def act_one(self, key: jax.Array, params: PlayParams, state: GameState, carry, action):
        """A turn whose action was chosen on the host (LM-only captain). Key consumed."""
        belief, agent_state = carry
        _, k_env, k_belief = jax.random.split(key, 3)
        return self._advance((k_env, k_belief), params, state, belief, agent_state, agent_state,
                             action, jnp.float32(0.0))

    def _advance(self, keys, params, state, belief, agent_state, new_agent_state, action,
                 p_choice):
        k_env, k_belief = keys
        env = self.env
        new_state, outcome = env.step(k_env, state, action)
        diagnostics = {}
        if self.sampler is not None:
            # No refresh is needed once the game is over; keep the old belief then.
            belief, info = update_or_keep(self.sampler, k_belief, belief, new_state.obs,
                                          new_state.done)
            diagnostics = {"ess": info.ess, "acceptance": info.acceptance}
        # The reflective runtime's after-turn step (the identity for other agents).
        new_agent_state = self.agent.observe(params.agent, env.observe(new_state), self.sampler,
                                             belief, new_agent_state, outcome, new_state.done)
        agent_state = jax.tree.map(lambda new, old: jnp.where(state.done, old, new),
                                   new_agent_state, agent_state)
        extras = dict(self.agent.trace(agent_state))
        llm_request = extras.pop("llm_request", jnp.bool_(False))
        extras.update(diagnostics)  # the belief's ESS and MH acceptance of this update
        record = TurnRecord(active=~state.done, kind=action.kind, cell=action.cell,
                            question_id=action.question_id, outcome=outcome,
                            hit_probability=jnp.asarray(p_choice, jnp.float32),
                            llm_request=llm_request & ~state.done, extras=extras)
        return new_state, (belief, agent_state), record


__all__ = ["PlayParams", "Player"]
