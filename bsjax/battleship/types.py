"""The pytrees that flow through `jit`. Every field is an array; shapes are for ONE game.

S = ships, C = cells, W = bitboard words, Q = question budget.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax.numpy as jnp

from bsjax.battleship.config import GameConfig


@chex.dataclass(frozen=True)
class Observations:
    """What the captain has observed (everything a policy or a belief may read).

    Attributes:
      hit_bits: `[W]` uint32 cells shot and hit.
      miss_bits: `[W]` uint32 cells shot and missed.
      colour_bits: `[S, W]` uint32 cells revealed as ship k (grand; all zero in paper).
      sunk: `[S]` bool ship k is known sunk (grand; all False in paper).
      ship_lengths: `[S]` int32 fleet lengths known to the captain (paper fleet; grand tracker).
      question_bits: `[Q, W]` uint32 region of each asked question, in order.
      answers: `[Q]` bool recorded (possibly noisy) answers.
      n_questions: `[]` int32 questions asked so far.
    """

    hit_bits: chex.Array
    miss_bits: chex.Array
    colour_bits: chex.Array
    sunk: chex.Array
    ship_lengths: chex.Array
    question_bits: chex.Array
    answers: chex.Array
    n_questions: chex.Array


@chex.dataclass(frozen=True)
class GameState:
    """One game: the hidden truth, the captain's observations and the counters.

    The truth fields (`truth_spans`, `truth_bits`, `spotter_stream`) never reach a policy: policies
    receive a `View`.

    Attributes:
      truth_spans: `[S]` int32 true placements (global span ids).
      truth_bits: `[W]` uint32 true occupancy.
      obs: the captain's `Observations`.
      shots, hits, questions, turn: `[]` int32 counters.
      done, won: `[]` bool.
      spotter_stream: `[]` int32 reference spotter PRNG state (reference RNG mode only).
    """

    truth_spans: chex.Array
    truth_bits: chex.Array
    obs: Observations
    shots: chex.Array
    hits: chex.Array
    questions: chex.Array
    turn: chex.Array
    done: chex.Array
    won: chex.Array
    spotter_stream: chex.Array


class View(NamedTuple):
    """What a policy sees: observations, budgets and the legal actions, no truth (the pgx
    no-leak rule). `game.env.Env.observe` builds it.

    Attributes:
      obs: the captain's `Observations`.
      shots_left, questions_left, turn: `[]` int32.
      legal_shots: `[C]` bool the cells a shot may target: unshot cells while the game runs
        (all False once it is over).
      can_ask: `[]` bool a question is legal: the game runs and a question is left.
    """

    obs: Observations
    shots_left: chex.Array
    questions_left: chex.Array
    turn: chex.Array
    legal_shots: chex.Array
    can_ask: chex.Array


class Action(NamedTuple):
    """A captain's action. `kind` 0 = shoot `cell`; 1 = ask about region `question_bits`.

    Attributes:
      kind: `[]` int32.
      cell: `[]` int32 target cell (shots).
      question_id: `[]` int32 catalog index, or -1 for a DSL region.
      question_bits: `[W]` uint32 region asked about.
    """

    kind: chex.Array
    cell: chex.Array
    question_id: chex.Array
    question_bits: chex.Array


SHOOT = 0
ASK = 1


def shoot(cell: chex.Array, config: GameConfig) -> Action:
    return Action(jnp.int32(SHOOT), jnp.asarray(cell, jnp.int32), jnp.int32(-1),
                  jnp.zeros(config.n_words, jnp.uint32))


def ask(question_id: chex.Array, question_bits: chex.Array) -> Action:
    return Action(jnp.int32(ASK), jnp.int32(-1), jnp.asarray(question_id, jnp.int32),
                  question_bits)


class TurnRecord(NamedTuple):
    """Per-turn scalars written to `events.jsonl` (stacked over turns by the harness).

    Attributes:
      active: `[]` bool the game was still running this turn.
      kind: `[]` int32 action kind; cell: target cell; question_id: catalog index.
      outcome: `[]` bool hit (shots) or recorded answer (questions).
      hit_probability: `[]` float32 the belief's p of the shot cell (or of the best cell).
      llm_request: `[]` bool the revision gate asked for an LLM this turn.
      extras: dict of `[]` agent-specific trace values (the reflective runtime's predictions,
        EMAs, streak, previews, revision); empty for agents without a runtime.
    """

    active: chex.Array
    kind: chex.Array
    cell: chex.Array
    question_id: chex.Array
    outcome: chex.Array
    hit_probability: chex.Array
    llm_request: chex.Array
    extras: dict
