"""The exact posterior as a belief: every legal placement of a fixed fleet, weighted, every turn.

The target is the one `belief.exact` computes on the host (docs/battleship/protocol.md §5.1):
the uniform prior over labelled, non-overlapping placements, times the shot evidence as hard
constraints (hits covered, misses empty, colour and sunk ships where revealed), times
`L(answer_j == any(board ∩ region_j))` for every question asked. Nothing is sampled to get it:
each update scores every placement again, so the belief carries nothing from turn to turn and
cannot degenerate.

The placements are not stored one by one (21,354,072 for the paper fleet on 8 × 8). The fleet is
split into two groups of ships, A (the first half) and B (the rest), and each group's legal
placements are enumerated once on the host (paper: 4,000 for the ships of length 5 and 4, 9,896
for 3 and 2). A placement is a pair (a, b) whose boards do not overlap; its weight depends on
the two boards only through

    overlap(a, b), hits ⊆ a ∪ b, and the answer pattern q(a) | q(b),

where q(x) is the `[Q]`-bit word of the regions board x meets. So the posterior is a
`[N_A, N_B]` matrix of weights, computed in `[row_tile, col_tile]` tiles and never stored: each
tile adds its row sums to the mass of every a and its column sums to the mass of every b. Since
the ships of a placement do not overlap, the cell marginal is exact from those two vectors:
`P(c) = (Σ_a R_a occ_a(c) + Σ_b C_b occ_b(c)) / Z`.

A group row that covers a miss (or contradicts its ships' colour or sunk evidence) has weight 0
with every partner, so the rows and columns are first sorted valid-first and the tiles stop at
the last valid one: the work per turn is `N_A(valid) × N_B(valid)`, which misses shrink fast
(a data-dependent loop; vmapped over games it runs to the slowest game's count).

Weights are relative, in float32: `r^m` with `m` the number of answers the placement
contradicts and `r = L(mismatch) / L(match)` (the tempered paper model: r ≈ 0.17, so 15
contradictions are ≈ 3e-12; a noiseless model's r = 1e-10 underflows at 4 contradictions, which
a truthful spotter never produces).

Samples. `weighted_particles` draws P placements from the exact posterior (equal weights 1/P)
for the planners that score questions on particles (bayes, WMA, MRA): a row a ∝ R_a, then the
column tile of that row by its mass (one pass over the valid columns, `[P, col_tile]` at a
time), then a column b of that tile ∝ w(a, b), each by an inverse CDF of short cumulative sums
(`_pick`). The draw is a pure function of the state (its key is the update's), so an agent
that only reads `hit_probability` (greedy) never pays for it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bsjax.battleship.belief import exact
from bsjax.battleship.belief.base import AnswerModel, BeliefInfo, Sampler, answer_model
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations


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


def unsupported(config: GameConfig) -> str | None:
    """Why the exact belief cannot serve `config` (one line), or None when it can."""
    if config.fleet is None:
        return ("the exact belief needs a fixed fleet; this protocol's captain knows only the "
                "multiset of lengths (grand's ship tracker)")
    if len(config.fleet) != config.n_ships:
        return "the exact belief needs one fleet length per ship"
    if config.max_questions > 31:
        return "the exact belief packs the answers in a 32-bit word: at most 31 questions"
    return None


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


@chex.dataclass(frozen=True)
class ExactState:
    """One game's exact belief.

    Attributes:
      row_mass: `[N_A]` float32 unnormalised posterior mass of each group-A placement.
      marginal: `[C]` float32 the posterior probability that each cell holds a ship.
      obs: the `Observations` the masses condition on (the samples recompute a row from them).
      key: `[2]` uint32 the samples' key as raw words (the update's key): the samples are a
        pure function of the state, the same on every call, not a second use of a key.
      answers: the `AnswerModel` of the weights.
    """

    row_mass: chex.Array
    marginal: chex.Array
    obs: Observations
    key: chex.Array
    answers: AnswerModel


class _Group(NamedTuple):
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


class _Evidence(NamedTuple):
    """Per-game terms of a tile's weights: hit `[W]` uint32; answers and asked `[]` uint32 (bit j:
    question j's recorded answer / j < n_questions); ratio `[Q + 1]` float32 r^m."""

    hit: chex.Array
    answers: chex.Array
    asked: chex.Array
    ratio: chex.Array


def _key_words(key: jax.Array) -> chex.Array:
    """The raw uint32 words of a typed key (a raw key as it is)."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key)
    return key


@dataclasses.dataclass(frozen=True)
class ExactSampler(Sampler):
    """Static configuration (hashable; closed over by jit).

    Attributes:
      config: the game rules (a fixed fleet: `unsupported` says which configs are refused).
      n_particles: P, the posterior samples `weighted_particles` draws.
      row_tile, col_tile: the tile of the weight matrix scored at once, per game (memory per
        game ≈ 4 · row_tile · col_tile bytes per temporary).
    """

    config: GameConfig
    n_particles: int = 500
    row_tile: int = 32
    col_tile: int = 512

    name = "exact"

    def __post_init__(self):
        why = unsupported(self.config)
        if why is not None:
            raise ValueError(why)

    # ----- public interface -----

    def init(self, key: jax.Array, obs: Observations, game_seed: chex.Array,
             answers: AnswerModel | None = None) -> ExactState:
        """The exact posterior given `obs` under `answers` (the protocol's by default). The key
        is consumed (it seeds the samples); `game_seed` is unused."""
        del game_seed
        answers = answer_model(self.config) if answers is None else answers
        return self._posterior(key, obs, answers)

    def update(self, key: jax.Array, state: ExactState, obs: Observations
               ) -> tuple[ExactState, BeliefInfo]:
        """The exact posterior given the grown `obs` (scored afresh). The key is consumed.
        Info: P as the ESS (the samples are independent exact draws), acceptance 1."""
        state = self._posterior(key, obs, state.answers)
        return state, BeliefInfo(ess=jnp.float32(self.n_particles), acceptance=jnp.float32(1.0))

    def answer_model(self, state: ExactState) -> AnswerModel:
        return state.answers

    def hit_probability(self, state: ExactState) -> chex.Array:
        """`[C]` float32 the exact marginal (all zeros when no placement fits the evidence)."""
        return state.marginal

    def weighted_particles(self, state: ExactState) -> tuple[chex.Array, chex.Array]:
        """`([P, S] int32` placements drawn from the exact posterior, `[P]` float32 1/P`)`; a
        pure function of the state (the same draws on every call)."""
        return self._samples(state), jnp.full(self.n_particles, 1.0 / self.n_particles,
                                               jnp.float32)

    # ----- internals -----

    @property
    def _ships(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        half = self.config.n_ships // 2
        return tuple(range(half)), tuple(range(half, self.config.n_ships))

    def _tables(self) -> tuple[GroupTable, GroupTable]:
        ships_a, ships_b = self._ships
        return (group_table(self.config, ships_a, self.row_tile),
                group_table(self.config, ships_b, self.col_tile))

    def _evidence(self, obs: Observations, answers: AnswerModel) -> _Evidence:
        n_q = obs.question_bits.shape[0]
        j = jnp.arange(n_q, dtype=jnp.uint32)
        asked = jnp.arange(n_q) < obs.n_questions
        log_ratio = (answers.log_mismatch - answers.log_match).astype(jnp.float32)
        return _Evidence(
            hit=obs.hit_bits,
            answers=jnp.sum(jnp.where(asked & obs.answers, jnp.uint32(1) << j, jnp.uint32(0))),
            asked=jnp.sum(jnp.where(asked, jnp.uint32(1) << j, jnp.uint32(0))),
            ratio=jnp.exp(jnp.arange(n_q + 1, dtype=jnp.float32) * log_ratio))

    def _pattern(self, bits: chex.Array, obs: Observations) -> chex.Array:
        """`[N]` uint32 bit j set iff board `[N, W]` meets asked region j."""
        n_q = obs.question_bits.shape[0]
        asked = jnp.arange(n_q) < obs.n_questions
        meets = bitboard.intersects(bits[:, None, :], obs.question_bits[None]) & asked[None]
        return jnp.sum(jnp.where(meets, jnp.uint32(1) << jnp.arange(n_q, dtype=jnp.uint32),
                                 jnp.uint32(0)), axis=1)

    def _group(self, table: GroupTable, ships: tuple[int, ...], obs: Observations,
               tile: int) -> _Group:
        """The group's rows that fit the single-ship evidence, sorted first (stable), then by the
        hit cells they cover, so that a tile's rows cover much the same hits."""
        bits = jnp.asarray(table.bits)
        ok = jnp.asarray(table.real) & ~bitboard.intersects(bits, obs.miss_bits[None])
        if self.config.reveal_colour or self.config.sunk_feedback:
            for i, k in enumerate(ships):  # static and small (the group's ships)
                ship_bits = spans_lib.spans_bits(self.config, jnp.asarray(table.spans[:, i]))
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
        return _Group(order, sorted_bits, self._pattern(sorted_bits, obs),
                      jnp.sum(ok, dtype=jnp.int32), reach)

    @staticmethod
    def _weights(a_bits, a_pattern, b_bits, b_pattern, evidence: _Evidence) -> chex.Array:
        """`[m, n]` float32 relative weights of the pairs of `[m]` A rows and `[n]` B rows
        (0 where the boards overlap or leave a hit uncovered; validity is the caller's)."""
        overlap = bitboard.intersects(a_bits[:, None, :], b_bits[None, :, :])
        need = evidence.hit[None, :] & ~a_bits                                    # [m, W]
        uncovered = bitboard.any_set(need[:, None, :] & ~b_bits[None, :, :])
        wrong = ((a_pattern[:, None] | b_pattern[None, :]) ^ evidence.answers) & evidence.asked
        ratio = evidence.ratio[jnp.bitwise_count(wrong).astype(jnp.int32)]
        return jnp.where(overlap | uncovered, 0.0, ratio)

    def _masses(self, obs: Observations, answers: AnswerModel):
        """(`[N_A]` row masses, `[N_B]` column masses), both in table order."""
        table_a, table_b = self._tables()
        ships_a, ships_b = self._ships
        ta, tb = self.row_tile, self.col_tile
        a = self._group(table_a, ships_a, obs, ta)
        b = self._group(table_b, ships_b, obs, tb)
        evidence = self._evidence(obs, answers)
        # The tile pairs worth scoring: inside the valid rows and columns, and able to cover
        # every hit between them; listed first, in row-major order.
        live_a = jnp.arange(a.reach.shape[0]) * ta < a.count
        live_b = jnp.arange(b.reach.shape[0]) * tb < b.count
        covers = ~bitboard.any_set(evidence.hit[None, None, :]
                                   & ~(a.reach[:, None, :] | b.reach[None, :, :]))
        needed = (live_a[:, None] & live_b[None, :] & covers).reshape(-1)
        pairs = jnp.argsort(~needed, stable=True).astype(jnp.int32)
        steps = jnp.sum(needed, dtype=jnp.int32)
        rows, cols = _accumulate(_Work(a, b, evidence, pairs, steps), ta, tb, self._weights)
        return (jnp.zeros_like(rows).at[a.order].set(rows),
                jnp.zeros_like(cols).at[b.order].set(cols))

    def _span_marginal(self, table: GroupTable, mass: chex.Array) -> chex.Array:
        """`[C]` Σ_rows mass · occupancy of the group's boards (through its ships' spans)."""
        span_table = spans_lib.table_for(self.config)
        span_mass = jnp.zeros(span_table.n_spans, jnp.float32)
        for i in range(table.spans.shape[1]):  # static and small (the group's ships)
            span_mass = span_mass.at[jnp.asarray(table.spans[:, i])].add(mass)
        return jnp.dot(span_mass, jnp.asarray(span_table.cells, jnp.float32),
                       precision=lax.Precision.HIGHEST)

    def _posterior(self, key: jax.Array, obs: Observations, answers: AnswerModel) -> ExactState:
        table_a, table_b = self._tables()
        row_mass, col_mass = self._masses(obs, answers)
        total = jnp.sum(row_mass)
        marginal = (self._span_marginal(table_a, row_mass)
                    + self._span_marginal(table_b, col_mass))
        marginal = jnp.where(total > 0, marginal / jnp.where(total > 0, total, 1.0), 0.0)
        chex.assert_shape(marginal, (self.config.n_cells,))
        return ExactState(row_mass=row_mass, marginal=jnp.clip(marginal, 0.0, 1.0), obs=obs,
                          key=_key_words(key), answers=answers)

    def _samples(self, state: ExactState) -> chex.Array:
        """`[P, S]` int32 placements drawn from the posterior of `state`: a group-A row by its
        mass, then one of the row's column tiles by its mass (one pass over the valid columns),
        then a column of that tile by its weight."""
        table_a, table_b = self._tables()
        _, ships_b = self._ships
        obs, tile = state.obs, self.col_tile
        b = self._group(table_b, ships_b, obs, tile)
        evidence = self._evidence(obs, state.answers)
        k_row, k_tile, k_col = jax.random.split(jax.random.wrap_key_data(state.key), 3)
        shape = (self.n_particles,)
        row = jax.vmap(lambda u: _pick(state.row_mass, u))(jax.random.uniform(k_row, shape))
        a_bits = jnp.asarray(table_a.bits)[row]
        a_pattern = self._pattern(a_bits, obs)

        def tile_weights(start):                                                  # [P, tile]
            w = self._weights(a_bits, a_pattern, lax.dynamic_slice_in_dim(b.bits, start, tile),
                              lax.dynamic_slice_in_dim(b.pattern, start, tile), evidence)
            return jnp.where((start + jnp.arange(tile) < b.count)[None, :], w, 0.0)

        def body(carry):
            j, masses = carry
            masses = lax.dynamic_update_slice_in_dim(
                masses, jnp.sum(tile_weights(j * tile), axis=1)[:, None], j, 1)
            return j + 1, masses

        n_tiles = (b.count + tile - 1) // tile
        masses = jnp.zeros((self.n_particles, b.reach.shape[0]), jnp.float32)
        _, masses = lax.while_loop(lambda c: c[0] < n_tiles, body, (jnp.int32(0), masses))
        chosen = jax.vmap(_pick)(masses, jax.random.uniform(k_tile, shape))      # [P]
        w = jax.vmap(lambda ab, ap, t: self._weights(
            ab[None], ap[None], lax.dynamic_slice_in_dim(b.bits, t * tile, tile),
            lax.dynamic_slice_in_dim(b.pattern, t * tile, tile), evidence)[0])(
                a_bits, a_pattern, chosen)
        w = jnp.where(chosen[:, None] * tile + jnp.arange(tile)[None, :] < b.count, w, 0.0)
        column = chosen * tile + jax.vmap(_pick)(w, jax.random.uniform(k_col, shape))
        spans = jnp.concatenate([jnp.asarray(table_a.spans)[row],
                                 jnp.asarray(table_b.spans)[b.order[column]]], axis=1)
        chex.assert_shape(spans, (self.n_particles, self.config.n_ships))
        return spans


class _Work(NamedTuple):
    """One game's tile loop: the sorted groups, the evidence, `[T]` int32 the tile pairs (row
    tile · column tiles + column tile, the needed ones first) and `[]` int32 how many are
    needed."""

    a: _Group
    b: _Group
    evidence: _Evidence
    pairs: chex.Array
    steps: chex.Array


def _tile_step(work: _Work, k, rows, cols, ta: int, tb: int, weights):
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


def _accumulate(work: _Work, ta: int, tb: int, weights) -> tuple[chex.Array, chex.Array]:
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
            return (k + 1, *_tile_step(work, k, rows, cols, ta, tb, weights))
        return lax.while_loop(lambda c: c[0] < work.steps, body, (jnp.int32(0), *zeros))[1:]

    @run.def_vmap
    def _batched(axis_size, in_batched, work):
        work = jax.tree.map(lambda x, batched: x if batched else jnp.broadcast_to(
            x, (axis_size,) + x.shape), work, in_batched[0])
        step = jax.vmap(lambda w, k, r, c: _tile_step(w, k, r, c, ta, tb, weights),
                        in_axes=(0, None, 0, 0))

        def body(carry):
            k, rows, cols = carry
            return (k + 1, *step(work, k, rows, cols))

        init = (jnp.int32(0), *(jnp.broadcast_to(z, (axis_size,) + z.shape) for z in zeros))
        out = lax.while_loop(lambda c: c[0] < jnp.max(work.steps), body, init)[1:]
        return out, (True, True)

    return run(work)


def _pick(weights: chex.Array, u: chex.Array, block: int = 32) -> chex.Array:
    """`[]` int32 the index i of `[n]` non-negative weights with cumulative weight first past
    `u · Σ weights` (inverse CDF; `u` `[]` uniform in [0, 1)), never a zero weight while any is
    positive. Two levels (blocks of `block`, then one block) keep every cumulative sum short."""
    n = weights.shape[0]
    size = -(-n // block) * block
    padded = jnp.pad(weights, (0, size - n)).reshape(-1, block)
    totals = jnp.sum(padded, axis=1)

    def first_past(w, target):
        cumulative = jnp.cumsum(w)
        i = jnp.minimum(jnp.sum(cumulative <= target), w.shape[0] - 1)
        # Rounding can put the target at the total: the last positive weight then.
        last = w.shape[0] - 1 - jnp.argmax(w[::-1] > 0)
        return jnp.where(w[i] > 0, i, last), cumulative

    k, cumulative = first_past(totals, u * jnp.sum(totals))
    i, _ = first_past(padded[k], u * jnp.sum(totals) - (cumulative[k] - totals[k]))
    return jnp.minimum(k * block + i, n - 1).astype(jnp.int32)


__all__ = ["ExactSampler", "ExactState", "GroupTable", "group_table", "unsupported"]
