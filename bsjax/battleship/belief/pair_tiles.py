"""The exact belief's machinery (`belief.enumerated`): two ship groups' placement tables, the
weight of a pair of group placements, the loop over the weight matrix's tiles, inverse-CDF picks.

All functions are for ONE game unless said (`accumulate` has its own batching rule).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bsjax.battleship.belief import exact
from bsjax.battleship.belief.base import AnswerModel
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations
from bsjax.core import fastpath


class GroupTable(NamedTuple):
    """One group's legal placements, padded to a whole number of tiles (host numpy).

    Attributes:
      spans: `[N, K]` int32 span ids of the group's K ships (padding: span 0).
      bits: `[N, W]` uint32 the group's board.
      real: `[N]` bool False for the padding rows.
    """

    spans: np.ndarray
    bits: np.ndarray
    real: np.ndarray


@functools.cache
def group_table(config: GameConfig, ships: tuple[int, ...], tile: int) -> GroupTable:
    """The legal placements of ships `ships` (indices into `config.fleet`), padded to `tile`."""
    spans = exact.enumerate_configurations(config, [config.fleet[k] for k in ships])
    n = spans.shape[0]
    size = max(tile, -(-n // tile) * tile)
    bits = spans_lib.table_for(config).bits
    board = (np.bitwise_or.reduce(bits[spans], axis=1) if spans.shape[1]
             else np.zeros((n, config.n_words), np.uint32))
    pad = size - n
    return GroupTable(
        spans=np.concatenate([spans, np.zeros((pad, spans.shape[1]), np.int32)]).astype(np.int32),
        bits=np.concatenate([board, np.zeros((pad, config.n_words), np.uint32)]),
        real=np.arange(size) < n)


class Group(NamedTuple):
    """A group's rows for one game, sorted valid-first (traced).

    Attributes: order `[N]` int32 table row of each position; bits `[N, W]` uint32 and pattern
    `[N]` uint32 (the regions asked that the board meets, bit j for question j) in that order;
    count `[]` int32 the valid rows (positions below it); reach `[N / tile, W]` uint32 the hit
    cells the valid rows of each tile of positions cover, together."""

    order: chex.Array
    bits: chex.Array
    pattern: chex.Array
    count: chex.Array
    reach: chex.Array


class Evidence(NamedTuple):
    """Per-game terms of a tile's weights: hit `[W]` uint32; answers and asked `[]` uint32 (bit j:
    question j's recorded answer / j < n_questions); ratio `[Q + 1]` float32 r^m."""

    hit: chex.Array
    answers: chex.Array
    asked: chex.Array
    ratio: chex.Array


def evidence_of(obs: Observations, answers: AnswerModel) -> Evidence:
    """The per-game terms of the weights under `answers`."""
    n_q = obs.question_bits.shape[0]
    j = jnp.arange(n_q, dtype=jnp.uint32)
    asked = jnp.arange(n_q) < obs.n_questions
    log_ratio = (answers.log_mismatch - answers.log_match).astype(jnp.float32)
    return Evidence(
        hit=obs.hit_bits,
        answers=jnp.sum(jnp.where(asked & obs.answers, jnp.uint32(1) << j, jnp.uint32(0))),
        asked=jnp.sum(jnp.where(asked, jnp.uint32(1) << j, jnp.uint32(0))),
        ratio=jnp.exp(jnp.arange(n_q + 1, dtype=jnp.float32) * log_ratio))


def pattern(bits: chex.Array, obs: Observations) -> chex.Array:
    """`[N]` uint32 bit j set iff board `[N, W]` meets asked region j."""
    n_q = obs.question_bits.shape[0]
    asked = jnp.arange(n_q) < obs.n_questions
    meets = bitboard.intersects(bits[:, None, :], obs.question_bits[None]) & asked[None]
    return jnp.sum(jnp.where(meets, jnp.uint32(1) << jnp.arange(n_q, dtype=jnp.uint32),
                             jnp.uint32(0)), axis=1)


def group(config: GameConfig, table: GroupTable, ships: tuple[int, ...], obs: Observations,
          tile: int) -> Group:
    """The group's rows that fit the single-ship evidence, sorted first (stable), then by the
    hit cells they cover, so that a tile's rows cover much the same hits."""
    bits = jnp.asarray(table.bits)
    ok = jnp.asarray(table.real) & ~bitboard.intersects(bits, obs.miss_bits[None])
    if config.reveal_colour or config.sunk_feedback:
        for i, k in enumerate(ships):  # static and small (the group's ships)
            ship_bits = spans_lib.spans_bits(config, jnp.asarray(table.spans[:, i]))
            colour = obs.colour_bits[k]
            ok = ok & bitboard.contains(ship_bits, colour[None])
            ok = ok & (~obs.sunk[k] | ~bitboard.any_set(ship_bits ^ colour[None]))
    covered = bits & obs.hit_bits[None]                                        # [N, W]
    # A barrier: at a game's start the evidence is a constant, and XLA would fold the sort.
    ok, covered = lax.optimization_barrier((ok, covered))
    keys = [covered[:, w] for w in range(covered.shape[1])] + [~ok]
    order = jnp.lexsort(keys).astype(jnp.int32)
    sorted_bits = bits[order]
    # What the rows of each tile cover at most (the tile pairs that cannot cover every hit
    # are skipped).
    tiles = (covered[order] & jnp.where(ok[order], ~jnp.uint32(0), 0)[:, None]).reshape(
        -1, tile, covered.shape[1])
    reach = lax.reduce(tiles, jnp.uint32(0), lax.bitwise_or, (1,))
    return Group(order, sorted_bits, pattern(sorted_bits, obs),
                  jnp.sum(ok, dtype=jnp.int32), reach)


def weights(a_bits, a_pattern, b_bits, b_pattern, evidence: Evidence) -> chex.Array:
    """`[m, n]` float32 relative weights of the pairs of `[m]` A rows and `[n]` B rows
    (0 where the boards overlap or leave a hit uncovered; validity is the caller's)."""
    overlap = bitboard.intersects(a_bits[:, None, :], b_bits[None, :, :])
    need = evidence.hit[None, :] & ~a_bits                                    # [m, W]
    uncovered = bitboard.any_set(need[:, None, :] & ~b_bits[None, :, :])
    wrong = ((a_pattern[:, None] | b_pattern[None, :]) ^ evidence.answers) & evidence.asked
    ratio = evidence.ratio[jnp.bitwise_count(wrong).astype(jnp.int32)]
    return jnp.where(overlap | uncovered, 0.0, ratio)


class Work(NamedTuple):
    """One game's tile loop: the sorted groups, the evidence, `[T]` int32 the tile pairs (row
    tile · column tiles + column tile, the needed ones first) and `[]` int32 how many are
    needed."""

    a: Group
    b: Group
    evidence: Evidence
    pairs: chex.Array
    steps: chex.Array


def tile_step(work: Work, k, rows, cols, ta: int, tb: int):
    """Add tile pair `k` of `work` (nothing when `k` is past its needed pairs) to `[N_A]` row
    and `[N_B]` column masses (sorted positions)."""
    n_tb = work.b.reach.shape[0]
    pair = work.pairs[jnp.minimum(k, work.pairs.shape[0] - 1)]
    i, j = (pair // n_tb) * ta, (pair % n_tb) * tb
    a, b = work.a, work.b
    w = weights(lax.dynamic_slice_in_dim(a.bits, i, ta), lax.dynamic_slice_in_dim(a.pattern, i, ta),
                lax.dynamic_slice_in_dim(b.bits, j, tb), lax.dynamic_slice_in_dim(b.pattern, j, tb),
                work.evidence)
    w = jnp.where(((i + jnp.arange(ta)) < a.count)[:, None]
                  & ((j + jnp.arange(tb)) < b.count)[None, :] & (k < work.steps), w, 0.0)
    rows = lax.dynamic_update_slice_in_dim(
        rows, lax.dynamic_slice_in_dim(rows, i, ta) + jnp.sum(w, axis=1), i, 0)
    cols = lax.dynamic_update_slice_in_dim(
        cols, lax.dynamic_slice_in_dim(cols, j, tb) + jnp.sum(w, axis=0), j, 0)
    return rows, cols


def accumulate(work: Work, ta: int, tb: int) -> tuple[chex.Array, chex.Array]:
    """(`[N_A]` row masses, `[N_B]` column masses) in sorted positions: `work.steps` tile pairs.

    One game loops `while k < steps`. Vmapped over games, a plain while loop would run to the
    slowest game and select every carry at every step; this one has its own batching rule
    (`custom_vmap`): one loop to the batch's largest count, each game adding nothing past its
    own, with no select of the carries.
    """
    zeros = (jnp.zeros(work.a.order.shape[-1], jnp.float32),
             jnp.zeros(work.b.order.shape[-1], jnp.float32))

    @jax.custom_batching.custom_vmap
    def run(work):
        def body(carry):
            k, rows, cols = carry
            return (k + 1, *tile_step(work, k, rows, cols, ta, tb))
        return lax.while_loop(lambda c: c[0] < work.steps, body, (jnp.int32(0), *zeros))[1:]

    @run.def_vmap
    def _batched(axis_size, in_batched, work):
        work = jax.tree.map(lambda x, batched: x if batched else jnp.broadcast_to(
            x, (axis_size,) + x.shape), work, in_batched[0])
        step = jax.vmap(lambda w, k, r, c: tile_step(w, k, r, c, ta, tb),
                        in_axes=(0, None, 0, 0))

        def body(carry):
            k, rows, cols = carry
            return (k + 1, *step(work, k, rows, cols))

        init = (jnp.int32(0), *(jnp.broadcast_to(z, (axis_size,) + z.shape) for z in zeros))
        out = lax.while_loop(lambda c: c[0] < jnp.max(work.steps), body, init)[1:]
        return out, (True, True)

    return run(work)


def pick(weights: chex.Array, u: chex.Array, block: int = 32) -> chex.Array:
    """`[]` int32 the index i of `[n]` non-negative weights with cumulative weight first past
    `u · Σ weights` (inverse CDF; `u` `[]` uniform in [0, 1)), never a zero weight while any is
    positive. Two levels (blocks of `block`, then one block) keep every cumulative sum short."""
    n = weights.shape[0]
    size = -(-n // block) * block
    padded = jnp.pad(weights, (0, size - n)).reshape(-1, block)
    totals = jnp.sum(padded, axis=1)

    def first_past(w, target):
        cumulative = jnp.cumsum(w)
        i = jnp.minimum(fastpath.count_at_most(cumulative, target), w.shape[0] - 1)
        # Rounding can put the target at the total: the last positive weight then.
        last = w.shape[0] - 1 - jnp.argmax(w[::-1] > 0)
        return jnp.where(w[i] > 0, i, last), cumulative

    k, cumulative = first_past(totals, u * jnp.sum(totals))
    i, _ = first_past(padded[k], u * jnp.sum(totals) - (cumulative[k] - totals[k]))
    return jnp.minimum(k * block + i, n - 1).astype(jnp.int32)


__all__ = ["Evidence", "Group", "GroupTable", "Work", "accumulate", "evidence_of", "group",
           "group_table", "pattern", "pick", "tile_step", "weights"]
