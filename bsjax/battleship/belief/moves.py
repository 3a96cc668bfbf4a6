"""The single-ship move shared by the samplers: which placements a ship may move to."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations


class MovePool(NamedTuple):
    """The placements one ship may move to, with the bitboards a caller reuses.

    Attributes:
      pool: `[K]` bool allowed candidates.
      candidates: `[K]` int32 candidate span ids (all spans of the ship's length, padded).
      candidate_bits: `[K, W]` uint32 their bitboards.
      ship_bits: `[S, W]` uint32 the board's ships before the move.
    """

    pool: jnp.ndarray
    candidates: jnp.ndarray
    candidate_bits: jnp.ndarray
    ship_bits: jnp.ndarray


def move_pool(config: GameConfig, board: jnp.ndarray, ship: jnp.ndarray, obs: Observations,
              mask_misses: bool) -> MovePool:
    """The placements ship `ship` of `board` may move to, and their span ids.

    Reference rule (docs/battleship/protocol.md §5.1): no overlap with the other ships; hits this ship covers
    stay covered; misses it covers must be left; any shot cell it does not cover is judged by the
    other ships alone, so with a shot-consistent board a miss never filters a placement. With
    `mask_misses` (improved mode) placements covering a miss are dropped up front, which leaves the
    stationary distribution unchanged and wastes fewer moves. A ship with colour-revealed cells
    (grand) must keep them. The current placement is dropped when another is available.

    Args:
      board: `[S]` int32 span ids. ship: `[]` int32.
    Returns:
      The pool, with the candidates' and the board's bitboards (so a proposal's bitboard is
      one row away, not a table lookup per ship).
    """
    n_ships = board.shape[0]
    ship_bits = spans_lib.spans_bits(config, board)                               # [S, W]
    this_bits = ship_bits[ship]
    others = jnp.where((jnp.arange(n_ships) == ship)[:, None], jnp.uint32(0), ship_bits)
    other_bits = bitboard.union(others, axis=0)
    cand, valid, cand_bits = spans_lib.candidate_bits(
        config, spans_lib.span_lengths(config, board[ship]))                      # [K], [K, W]

    hits, misses = obs.hit_bits, obs.miss_bits
    need = hits & this_bits
    if config.reveal_colour:
        need = need | obs.colour_bits[ship]
    blocked = other_bits | (misses if mask_misses else misses & this_bits)
    others_fail = (bitboard.any_set(hits & ~this_bits & ~other_bits)
                   | bitboard.any_set(misses & ~this_bits & other_bits))
    if mask_misses:
        # Improved mode lets an inconsistent board move towards the evidence.
        others_fail = jnp.bool_(False)
    kept = valid & ~bitboard.any_set((cand_bits & blocked[None]) | (need[None] & ~cand_bits))
    kept = kept & ~others_fail
    differs = kept & (cand != board[ship])
    return MovePool(jnp.where(jnp.any(differs), differs, kept), cand, cand_bits, ship_bits)


def nth_true(mask: jnp.ndarray, n: jnp.ndarray) -> jnp.ndarray:
    """Index of the n-th (0-based) True of a `[K]` bool mask (any index if there is none).

    A prefix sum over K would lower to an O(K^2) reduce-window on CPU and dominated the chain's
    step; instead the mask is packed into 32-bit words, the word is found from K/32 popcounts,
    and the bit by a five-step binary search on popcounts.
    """
    words = bitboard.pack(mask)                                                   # [K/32]
    counts = jnp.bitwise_count(words).astype(jnp.int32)
    before = jnp.cumsum(counts) - counts                                          # tiny: K/32
    word = jnp.clip(jnp.sum((before + counts) <= n), 0, words.shape[0] - 1)
    x, rank = words[word], n - before[word]
    pos = jnp.uint32(0)
    for half in (16, 8, 4, 2, 1):
        low = jnp.bitwise_count((x >> pos) & jnp.uint32((1 << half) - 1)).astype(jnp.int32)
        up = rank >= low
        rank = jnp.where(up, rank - low, rank)
        pos = jnp.where(up, pos + jnp.uint32(half), pos)
    return word * 32 + pos.astype(jnp.int32)
