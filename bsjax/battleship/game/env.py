"""The environment of one game: `init`, `observe`, `step` and the action contract (pgx's `Env`).

The environment owns what an action does; a captain (`harness.player.Player`: an agent and its
belief) only chooses actions from the `View` that `observe` returns, which carries the legal
actions:

- a **shot** is legal while the game runs at a cell not shot before (`View.legal_shots`);
- a **question** is legal while the game runs and a question is left (`View.can_ask`).

An illegal action changes nothing but the counters: it takes its turn, reveals nothing and
answers nothing (outcome False); an illegal shot also uses one of the shots. The published
reference only ever dispatches shots at unknown cells and questions within the budget, so it
defines no other meaning; counting the wasted shot keeps F1 = 2 hits / (shots + ship cells)
honest (a captain that re-shoots a hit loses precision instead of scoring the hit again), and
every game still ends: by its shots, or at the turn limit (shots + questions) when a captain
keeps asking past its budget. A finished game is returned unchanged, whatever the action.

Everything is written for ONE game and vmapped at the edge; the truth stays in `GameState` and
never reaches the `View`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard, refrng, rules
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import ASK, SHOOT, Action, GameState, View

SPOTTER_SEED_OFFSET = 1000003


@dataclasses.dataclass(frozen=True)
class Env:
    """The game under one protocol (static; closed over by `jit`).

    Attributes:
      config: the protocol's rules.
      reference_rng: answers flip by the reference spotter's own stream (bit-exact paper runs)
        instead of the step's key.
    """

    config: GameConfig
    reference_rng: bool = False

    def init(self, truth_spans: jax.Array, game_seed: jax.Array) -> GameState:
        """A new game on the board `truth_spans` (`[S]` int32 span ids); `game_seed` (`[]` int32)
        seeds the reference spotter stream. Deterministic."""
        config = self.config
        truth_spans = jnp.asarray(truth_spans, jnp.int32)
        lengths = spans_lib.span_lengths(config, truth_spans)
        if config.fleet is None:
            lengths = jnp.sort(lengths)  # the tracker gives the multiset, not which ship is which
        zero = jnp.int32(0)
        return GameState(
            truth_spans=truth_spans,
            truth_bits=spans_lib.board_bits(config, truth_spans),
            obs=rules.empty_observations(config, lengths),
            shots=zero, hits=zero, questions=zero, turn=zero,
            done=jnp.bool_(False), won=jnp.bool_(False),
            spotter_stream=refrng.jax_seed_state(
                jnp.asarray(game_seed, jnp.int32) + jnp.int32(SPOTTER_SEED_OFFSET)),
        )

    def observe(self, state: GameState) -> View:
        """What the captain sees of `state`: observations, budgets and the legal actions."""
        config = self.config
        running = ~state.done
        return View(obs=state.obs, shots_left=config.max_shots - state.shots,
                    questions_left=config.max_questions - state.questions, turn=state.turn,
                    legal_shots=rules.unknown_cells(config, state.obs) & running,
                    can_ask=running & (state.questions < config.max_questions))

    def is_legal(self, view: View, action: Action) -> jax.Array:
        """`[]` bool: `action` is legal in the game seen as `view` (the module's contract)."""
        cell = jnp.clip(action.cell, 0, self.config.n_cells - 1)
        shot_ok = ((action.cell >= 0) & (action.cell < self.config.n_cells)
                   & view.legal_shots[cell])
        return jnp.where(action.kind == ASK, view.can_ask, (action.kind == SHOOT) & shot_ok)

    def step(self, key: jax.Array, state: GameState, action: Action
             ) -> tuple[GameState, jax.Array]:
        """Apply one action to one game. The key is consumed.

        Returns:
          (new state, `[]` bool outcome: hit for a shot, recorded answer for a question; False
          for an illegal action and for a finished game, which is returned unchanged).
        """
        config = self.config
        legal = self.is_legal(self.observe(state), action)
        is_ask = action.kind == ASK
        cell = jnp.clip(action.cell, 0, config.n_cells - 1)
        shot_state, is_hit = rules.shoot(config, state, cell)
        ask_state, answer = rules.answer(key, config, state, action.question_bits,
                                         self.reference_rng)
        new = jax.tree.map(lambda a, b: jnp.where(is_ask, a, b), ask_state, shot_state)
        # An illegal action uses its turn (set below) and, for a shot, the shot; nothing else.
        wasted = state.replace(shots=state.shots + (action.kind != ASK).astype(jnp.int32))
        new = jax.tree.map(lambda a, b: jnp.where(legal, a, b), new, wasted)
        outcome = legal & jnp.where(is_ask, answer, is_hit)
        all_sunk = ~bitboard.any_set(new.truth_bits & ~new.obs.hit_bits)
        turn = state.turn + 1
        new = new.replace(
            turn=turn,
            won=all_sunk,
            done=all_sunk | (new.shots >= config.max_shots) | (turn >= config.max_turns),
        )
        new = jax.tree.map(lambda old, upd: jnp.where(state.done, old, upd), state, new)
        return new, outcome & ~state.done


__all__ = ["Env", "SPOTTER_SEED_OFFSET"]
