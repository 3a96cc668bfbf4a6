"""The two contracts a captain can meet: `Agent` (decides inside the compiled turn) and
`HostCaptain` (decides on the host between compiled turns, e.g. an LLM every turn).

An agent is a static structure plus params. The structure is a frozen dataclass (what changes
the compiled program: the config, the variant, the scoring rule, the preset table) that
subclasses one of these protocols, so it inherits the defaults: no params, `observe` keeps the
state, `trace` records nothing. Its params are a pytree of arrays (`default_params()`: τ,
cooldown, budgets, scoring weights, ...) passed to every method, so the harness vmaps them like
games and a sweep is one compile (mctx's traced hyperparameters). The harness calls every
method unconditionally; a new agent writes only what it changes.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

import jax

from bsjax.battleship.types import Action, View

PyTree = Any


class TurnHooks(Protocol):
    """What the harness calls around every compiled turn, with defaults that change nothing."""

    def default_params(self) -> PyTree:
        """The agent's params at their defaults: a pytree of arrays (`()` if it has none)."""
        return ()

    def observe(self, params: PyTree, view: View, sampler, belief: PyTree, state: PyTree,
                outcome: jax.Array, game_over: jax.Array) -> PyTree:
        """The state after the turn's outcome, once the belief has absorbed it (`view` is the
        post-action view). Default: unchanged. The reflective runtime predicts, observes and
        reconciles here."""
        return state

    def trace(self, state: PyTree) -> dict[str, jax.Array]:
        """Per-turn scalars recorded in events.jsonl (an `llm_request` flag among them asks the
        host for an LLM call). Default: none."""
        return {}


class Agent(TurnHooks, Protocol):
    """A captain whose every decision is a traced function of ONE game (vmapped by the harness).

    Class attributes:
      name: the registry name (`bsjax play --agent NAME`).
      needs_belief: whether the harness keeps a sampler's belief for it.
      llm: whether its state can ask the host for an LLM revision (an L4 gate; see
        `bsjax.battleship.harness.llm_host`).
    """

    name: ClassVar[str]
    needs_belief: ClassVar[bool]
    llm: ClassVar[bool] = False
    host_decides: ClassVar[bool] = False

    def init_state(self, params: PyTree) -> PyTree:
        """The per-game state pytree at the start of a game (`()` if none)."""
        ...

    def decide(self, key: jax.Array, params: PyTree, view: View, sampler, belief: PyTree,
               state: PyTree) -> tuple[Action, jax.Array, PyTree]:
        """(action, hit probability of the chosen cell (0 for a question), new state). The key is
        consumed; the action should be legal in `view` (`View.legal_shots`, `View.can_ask`)."""
        ...


class HostCaptain(TurnHooks, Protocol):
    """A captain whose decisions are made on the host between compiled turns (the LM-only
    captain: an LLM chooses every action). The compiled part only applies the chosen action
    (`Player.act_one`); `bsjax.battleship.harness.llm_host.CaptainHost` makes the decisions.
    """

    name: ClassVar[str]
    needs_belief: ClassVar[bool]
    llm: ClassVar[bool] = False
    host_decides: ClassVar[bool] = True
    variant: str

    def init_state(self, params: PyTree) -> PyTree:
        """The per-game state pytree (`()` if none)."""
        ...


__all__ = ["Agent", "HostCaptain", "TurnHooks"]
