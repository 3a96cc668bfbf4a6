"""Evidence terms shared by every sampler: shot consistency and the answer log-likelihood."""

from __future__ import annotations

import jax.numpy as jnp

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard
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

    The sum is accumulated sequentially (an unrolled chain of adds over the static question
    budget) so that, in float64, it reproduces the reference's left-to-right sum bit for bit.

    Args:
      board: `[W]` uint32 occupancy.
    Returns:
      `[]` log-likelihood of `dtype`.
    """
    log_match, log_mismatch = config.log_answer_likelihood()
    truth = bitboard.intersects(obs.question_bits, board[None, :])                   # [Q]
    terms = jnp.where(truth == obs.answers, jnp.asarray(log_match, dtype),
                      jnp.asarray(log_mismatch, dtype))
    total = jnp.zeros((), dtype)
    for j in range(config.max_questions):  # static, tiny: keeps the reference summation order
        total = total + jnp.where(j < obs.n_questions, terms[j], jnp.zeros((), dtype))
    return total


def log_posterior(config: GameConfig, ship_bits: jnp.ndarray, obs: Observations,
                  dtype=jnp.float32) -> jnp.ndarray:
    """Unnormalised log-posterior of a placement `[S, W]`: -inf if it contradicts a shot."""
    board = bitboard.union(ship_bits, axis=0)
    return jnp.where(shot_consistent(ship_bits, obs, config.reveal_colour),
                     answer_log_likelihood(config, board, obs, dtype),
                     jnp.asarray(NEG_INF, dtype))
