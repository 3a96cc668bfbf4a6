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

Most tiles need no scoring. A group row that covers a miss (or contradicts its ships' colour or
sunk evidence) has weight 0 with every partner, so each group's rows are sorted valid-first, and
then by the hit cells they cover; a pair of tiles whose rows and columns cannot together cover
every hit is skipped. The work per turn is about `N_A(valid) × N_B(valid)` times the share of
tile pairs that can cover the hits: misses and the first hits shrink it fast; questions, which
are soft evidence, do not. The loop over the needed tile pairs has a data-dependent count;
vmapped over games it has its own batching rule (`pair_tiles.accumulate`): one loop to the
batch's largest count, so a batch costs what its least-informed game costs.

Weights are relative, in float32: `r^m` with `m` the number of answers the placement
contradicts and `r = L(mismatch) / L(match)` (the tempered paper model: r ≈ 0.17, so 15
contradictions are ≈ 3e-12; a noiseless model's r = 1e-10 underflows at 4 contradictions, which
a truthful spotter never produces).

Samples. `weighted_particles` draws P placements from the exact posterior (equal weights 1/P)
for the planners that score questions on particles (bayes, WMA, MRA): a row a ∝ R_a, then the
column tile of that row by its mass (one pass over the valid columns, `[P, col_tile]` at a
time), then a column b of that tile ∝ w(a, b), each by an inverse CDF of short cumulative sums
(`pair_tiles.pick`). The draw is a pure function of the state (its key is the update's), so an agent
that only reads `hit_probability` (greedy) never pays for it.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
from jax import lax

from bsjax.battleship.belief import pair_tiles as tiles
from bsjax.battleship.belief.base import AnswerModel, BeliefInfo, Sampler, answer_model
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations


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

    def _tables(self) -> tuple[tiles.GroupTable, tiles.GroupTable]:
        ships_a, ships_b = self._ships
        return (tiles.group_table(self.config, ships_a, self.row_tile),
                tiles.group_table(self.config, ships_b, self.col_tile))

    def _masses(self, obs: Observations, answers: AnswerModel):
        """(`[N_A]` row masses, `[N_B]` column masses), both in table order."""
        table_a, table_b = self._tables()
        ships_a, ships_b = self._ships
        ta, tb = self.row_tile, self.col_tile
        a = tiles.group(self.config, table_a, ships_a, obs, ta)
        b = tiles.group(self.config, table_b, ships_b, obs, tb)
        evidence = tiles.evidence_of(obs, answers)
        # The tile pairs worth scoring: inside the valid rows and columns, and able to cover
        # every hit between them; listed first, in row-major order.
        live_a = jnp.arange(a.reach.shape[0]) * ta < a.count
        live_b = jnp.arange(b.reach.shape[0]) * tb < b.count
        covers = ~bitboard.any_set(evidence.hit[None, None, :]
                                   & ~(a.reach[:, None, :] | b.reach[None, :, :]))
        needed = (live_a[:, None] & live_b[None, :] & covers).reshape(-1)
        pairs = jnp.argsort(~needed, stable=True).astype(jnp.int32)
        steps = jnp.sum(needed, dtype=jnp.int32)
        rows, cols = tiles.accumulate(tiles.Work(a, b, evidence, pairs, steps), ta, tb)
        return (jnp.zeros_like(rows).at[a.order].set(rows),
                jnp.zeros_like(cols).at[b.order].set(cols))

    def _span_marginal(self, table: tiles.GroupTable, mass: chex.Array) -> chex.Array:
        """`[C]` Σ_rows mass · occupancy of the group's boards (through its ships' spans)."""
        span_table = spans_lib.table_for(self.config)
        span_mass = jnp.zeros(span_table.n_spans, jnp.float32)
        for i in range(table.spans.shape[1]):  # static and small (the group's ships)
            span_mass = span_mass.at[jnp.asarray(table.spans[:, i])].add(mass)
        return jnp.dot(span_mass, jnp.asarray(span_table.cells, jnp.float32),
                       precision=lax.Precision.HIGHEST)

    def _posterior(self, key: jax.Array, obs: Observations, answers: AnswerModel) -> ExactState:
        """The state for `obs`: masses, the exact marginal, and `key`'s words for the samples."""
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
        b = tiles.group(self.config, table_b, ships_b, obs, tile)
        evidence = tiles.evidence_of(obs, state.answers)
        k_row, k_tile, k_col = jax.random.split(jax.random.wrap_key_data(state.key), 3)
        shape = (self.n_particles,)
        row = jax.vmap(lambda u: tiles.pick(state.row_mass, u))(jax.random.uniform(k_row, shape))
        a_bits = jnp.asarray(table_a.bits)[row]
        a_pattern = tiles.pattern(a_bits, obs)

        def tile_weights(start):                                                  # [P, tile]
            w = tiles.weights(a_bits, a_pattern, lax.dynamic_slice_in_dim(b.bits, start, tile),
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
        chosen = jax.vmap(tiles.pick)(masses, jax.random.uniform(k_tile, shape))      # [P]
        w = jax.vmap(lambda ab, ap, t: tiles.weights(
            ab[None], ap[None], lax.dynamic_slice_in_dim(b.bits, t * tile, tile),
            lax.dynamic_slice_in_dim(b.pattern, t * tile, tile), evidence)[0])(
                a_bits, a_pattern, chosen)
        w = jnp.where(chosen[:, None] * tile + jnp.arange(tile)[None, :] < b.count, w, 0.0)
        column = chosen * tile + jax.vmap(tiles.pick)(w, jax.random.uniform(k_col, shape))
        spans = jnp.concatenate([jnp.asarray(table_a.spans)[row],
                                 jnp.asarray(table_b.spans)[b.order[column]]], axis=1)
        chex.assert_shape(spans, (self.n_particles, self.config.n_ships))
        return spans


__all__ = ["ExactSampler", "ExactState", "unsupported"]
