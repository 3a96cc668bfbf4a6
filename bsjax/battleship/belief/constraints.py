"""Evidence terms shared by every sampler: shot consistency and the answer log-likelihood."""

from __future__ import annotations

import jax.numpy as jnp

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations

NEG_INF = -jnp.inf


def shot_consistent(ship_bits: jnp.ndarray, obs: Observations, has_colours: bool = True) -> jnp.ndarray:
    """Whether a placement agrees with every shot.

    Args:
      ship_bits: `[S, W]` uint32 bitboard of each ship.
      obs: the observations.
      has_colours: static; False skips the colour/sunk terms (protocols that reveal no colour).
    Returns:
      `[]` bool: every hit covered, no miss covered, ship k covers the cells revealed as k, and a
      ship known sunk covers exactly its revealed cells.
    """
    board = bitboard.union(ship_bits, axis=0)
    ok = bitboard.contains(board, obs.hit_bits) & ~bitboard.intersects(board, obs.miss_bits)
    if not has_colours:
        return ok
    colour_ok = bitboard.contains(ship_bits, obs.colour_bits)                       # [S]
    sunk_ok = ~obs.sunk | ~bitboard.any_set(ship_bits ^ obs.colour_bits)              # [S]
    return ok & jnp.all(colour_ok & sunk_ok)


def answer_log_likelihood(config: GameConfig, board: jnp.ndarray, obs: Observations,
                          dtype=jnp.float32) -> jnp.ndarray:
    """Sum over recorded answers of ln L(answer matches the board), in answer order.

    Args:
      board: `[W]` uint32 occupancy.
    Returns:
      `[]` log-likelihood of `dtype`.
    """
    truth = bitboard.intersects(obs.question_bits, board[None, :])                   # [Q]
    return sum_answer_terms(config, truth, obs, dtype)


def sum_answer_terms(config: GameConfig, truth: jnp.ndarray, obs: Observations,
                     dtype=jnp.float32) -> jnp.ndarray:
    """`answer_log_likelihood` from `[Q]` bool: whether the board meets each question's region.

    The sum is accumulated sequentially (an unrolled chain of adds over the static question
    budget) so that, in float64, it reproduces the reference's left-to-right sum bit for bit.
    """
    log_match, log_mismatch = config.log_answer_likelihood()
    terms = jnp.where(truth == obs.answers, jnp.asarray(log_match, dtype),
                      jnp.asarray(log_mismatch, dtype))
    total = jnp.zeros((), dtype)
    for j in range(config.max_questions):  # static, tiny: keeps the reference summation order
        total = total + jnp.where(j < obs.n_questions, terms[j], jnp.zeros((), dtype))
    return total


def span_question_masks(config: GameConfig, obs: Observations) -> jnp.ndarray:
    """`[N, Qw]` uint32, one row per span of the table: bit j set when the span meets the region
    of question j. Built once per observation, it turns a placement's answers into an OR of S
    table rows instead of S x Q bitboard intersections per evaluation."""
    span_bits = jnp.asarray(spans_lib.table_for(config).bits)                       # [N, W]
    return bitboard.pack(bitboard.any_set(span_bits[:, None] & obs.question_bits[None]))


def placement_truth(config: GameConfig, question_masks: jnp.ndarray,
                    spans: jnp.ndarray) -> jnp.ndarray:
    """`[Q]` bool: whether placement `spans` (`[S]` span ids) meets each question's region, from
    `span_question_masks`. Equal to intersecting its bitboard with every question."""
    words = bitboard.union(question_masks[spans], axis=0)                          # [Qw]
    return bitboard.unpack(words, config.max_questions)


def log_posterior(config: GameConfig, ship_bits: jnp.ndarray, obs: Observations,
                  dtype=jnp.float32, truth: jnp.ndarray | None = None) -> jnp.ndarray:
    """Unnormalised log-posterior of a placement `[S, W]`: -inf if it contradicts a shot.

    `truth` (`[Q]` bool, whether the placement meets each question's region) may be given when
    the caller has it from a table; otherwise it is computed from the bitboards.
    """
    board = bitboard.union(ship_bits, axis=0)
    if truth is None:
        truth = bitboard.intersects(obs.question_bits, board[None, :])
    return jnp.where(shot_consistent(ship_bits, obs, config.reveal_colour),
                     sum_answer_terms(config, truth, obs, dtype),
                     jnp.asarray(NEG_INF, dtype))
