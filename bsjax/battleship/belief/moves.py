"""The chain's single-ship move: which placements a ship may move to, from packed tables.

Reference rule (docs/battleship/protocol.md §5.1): a ship may move to any placement of its length
that overlaps no other ship, still covers the hits it covers now, and leaves the misses it covers
now; any shot cell it does not cover is judged by the other ships alone, so if they contradict
a shot there is no move at all. A ship with colour-revealed cells (grand) must keep them. The
current placement is dropped when another is available.

Checking that rule against K candidate bitboards at every MH step was the chain's cost. Here a
pool is one bit per candidate (the K candidates of a length, in the reference's enumeration
order, packed into ⌈K/32⌉ uint32 words) and the rule is a few word operations on tables:
  - static, per board shape: `overlap[s, L]`, the candidates of length L that overlap span s,
    and `valid[L]`, the candidates that exist;
  - per observation (`MoveTables`, built once per refresh, since the evidence is fixed while the
    chain runs): `shot_ok[s]`, the candidates of span s's length that cover s's hit cells and
    avoid s's miss cells; `colour_ok[k]`, those of ship k's length that hold its revealed cells;
    `answers`, the answer evidence (`constraints.AnswerEvidence`: which questions each span
    meets; the answer terms are summed per proposal).
The pool, and so every draw, is the same as the per-candidate rule's (a property test).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.battleship.belief import constraints
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations


@functools.cache
def _static_tables(rows: int, cols: int, lengths: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Host `overlap` `[N, L_max + 1, Kw]` and `valid` `[L_max + 1, Kw]` uint32 packed masks."""
    table = spans_lib.span_table(rows, cols, lengths)
    k, n = table.max_count, table.n_spans
    overlap = np.zeros((n, len(table.count), k), bool)
    valid = np.zeros((len(table.count), k), bool)
    cells = table.cells.astype(np.int32)
    for length in lengths:
        start, count = int(table.offset[length]), int(table.count[length])
        overlap[:, length, :count] = (cells @ cells[start:start + count].T) > 0
        valid[length, :count] = True
    return bitboard.pack_np(overlap), bitboard.pack_np(valid)


def static_tables(config: GameConfig) -> tuple[np.ndarray, np.ndarray]:
    return _static_tables(config.rows, config.cols, tuple(sorted(config.ship_lengths)))


class MoveTables(NamedTuple):
    """Per-observation tables of one game (N spans, S ships, Kw = ⌈K/32⌉, Qw = ⌈Q/32⌉).

    Attributes:
      shot_ok: `[N, Kw]` uint32 candidates of span s's length covering s's hits, avoiding its misses.
      colour_ok: `[S, Kw]` uint32 candidates of ship k's length holding its revealed cells.
      answers: `constraints.answer_evidence` of the observation, in the chain's log dtype.
    """

    shot_ok: jnp.ndarray
    colour_ok: jnp.ndarray
    answers: constraints.AnswerEvidence


def move_tables(config: GameConfig, board: jnp.ndarray, obs: Observations,
                dtype=jnp.float32, likelihood: constraints.LogLikelihood = None) -> MoveTables:
    """The tables for `obs`; `board` `[S]` gives each ship's length (moves never change it);
    `dtype` is that of the answer log-likelihoods, `likelihood` the answer model's."""
    table = spans_lib.table_for(config)
    span_bits = jnp.asarray(table.bits)                                            # [N, W]
    shot_ok = []
    for length in sorted(config.ship_lengths):  # static: table order is ascending length
        start, count = int(table.offset[length]), int(table.count[length])
        own = span_bits[start:start + count]                                       # [n, W]
        _, valid, cand_bits = spans_lib.candidate_bits(config, jnp.int32(length))  # [K, W]
        need, avoid = (obs.hit_bits & own)[:, None], (obs.miss_bits & own)[:, None]
        ok = (valid[None] & ~bitboard.any_set(need & ~cand_bits[None])
              & ~bitboard.any_set(avoid & cand_bits[None]))                        # [n, K]
        shot_ok.append(bitboard.pack(ok))
    lengths = spans_lib.span_lengths(config, board)
    if config.reveal_colour:
        def holds(length, colour):
            _, valid, cand_bits = spans_lib.candidate_bits(config, length)
            return bitboard.pack(valid & bitboard.contains(cand_bits, colour[None]))
        colour_ok = jax.vmap(holds)(lengths, obs.colour_bits)
    else:
        _, valid = static_tables(config)
        colour_ok = jnp.asarray(valid)[lengths]
    # No `[2**Q]` sums table: one placement per step sums its answer terms faster than it reads
    # a table that large (on CPU, XLA splits any kernel holding it across threads).
    return MoveTables(jnp.concatenate(shot_ok), colour_ok,
                      constraints.answer_evidence(config, obs, dtype, table=False,
                                                  likelihood=likelihood))


def pool_words(config: GameConfig, tables: MoveTables, board: jnp.ndarray, ship: jnp.ndarray,
               ship_bits: jnp.ndarray, obs: Observations) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The placements ship `ship` of `board` may move to.

    Args:
      board: `[S]` int32 span ids. ship: `[]` int32. ship_bits: `[S, W]` the board's bitboards.
    Returns:
      (`[Kw]` uint32 packed mask over the candidates of the ship's length, `[]` int32 the span id
      of candidate 0: candidate k is span `first + k`).
    """
    overlap, valid = (jnp.asarray(t) for t in static_tables(config))
    current = board[ship]
    length = spans_lib.span_lengths(config, current)
    first = jnp.asarray(spans_lib.table_for(config).offset)[length]
    is_other = jnp.arange(board.shape[0]) != ship
    this_bits = ship_bits[ship]
    other_bits = bitboard.union(jnp.where(is_other[:, None], ship_bits, jnp.uint32(0)), axis=0)
    others_fail = (bitboard.any_set(obs.hit_bits & ~this_bits & ~other_bits)
                   | bitboard.any_set(obs.miss_bits & ~this_bits & other_bits))
    blocked = bitboard.union(jnp.where(is_other[:, None], overlap[board, length],
                                       jnp.uint32(0)), axis=0)                     # [Kw]
    kept = valid[length] & ~blocked & tables.shot_ok[current] & tables.colour_ok[ship]
    kept = jnp.where(others_fail, jnp.uint32(0), kept)
    differs = kept & ~bitboard.single(current - first, kept.shape[0])
    return jnp.where(bitboard.any_set(differs), differs, kept), first


def nth_set_bit(words: jnp.ndarray, n: jnp.ndarray) -> jnp.ndarray:
    """Index of the n-th (0-based) set bit of `[Kw]` uint32 words (any index if there is none).

    The word is found from Kw popcounts, the bit by a five-step binary search on popcounts (a
    prefix sum over K bits would lower to an O(K^2) reduce-window on CPU).
    """
    counts = jnp.bitwise_count(words).astype(jnp.int32)
    before = jnp.cumsum(counts) - counts                                          # tiny: Kw
    word = jnp.clip(jnp.sum((before + counts) <= n, dtype=jnp.int32), 0, words.shape[0] - 1)
    x, rank = words[word], n - before[word]
    pos = jnp.uint32(0)
    for half in (16, 8, 4, 2, 1):
        low = jnp.bitwise_count((x >> pos) & jnp.uint32((1 << half) - 1)).astype(jnp.int32)
        up = rank >= low
        rank = jnp.where(up, rank - low, rank)
        pos = jnp.where(up, pos + jnp.uint32(half), pos)
    return word * 32 + pos.astype(jnp.int32)


def nth_true(mask: jnp.ndarray, n: jnp.ndarray) -> jnp.ndarray:
    """Index of the n-th (0-based) True of a `[K]` bool mask (any index if there is none)."""
    return nth_set_bit(bitboard.pack(mask), n)
