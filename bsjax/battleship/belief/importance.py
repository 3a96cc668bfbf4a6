"""Likelihood-weighted importance sampler as in `FastSampler` (docs/battleship/grand-protocol.md §5.2).

Every update draws a FRESH set of particles (nothing is carried between turns). Each particle is
built constructively: ships are placed one at a time, most constrained first, each taking a
uniformly random compatible span drawn with `jax.random.categorical` over masked logits (no
per-particle rejection loop, docs/conventions.md §4.1, §4.2). Shots are hard constraints of the proposal;
answers are soft, as likelihood weights. By default (`prior="proposal"`) the proposal is treated as
the prior with no importance correction (it is NOT uniform over configurations), as in the
reference; `prior="uniform"` corrects the weights to the uniform prior over labelled
configurations, the target of `belief.exact` (below).

Proposal of one particle, for ONE game:
  * ship k's candidate spans: not covering a miss, containing every cell revealed as k
    (`obs.colour_bits[k]`), equal to those cells when `obs.sunk[k]`, and of an allowed length:
    `obs.ship_lengths[k]` for a fixed fleet (`config.fleet` set), or, for the ship tracker
    (`config.fleet is None`), any length still left in the multiset `obs.ship_lengths` (the
    multiset is consumed as ships are placed, so the length assignment is sampled along with the
    spans);
  * at each of the S steps the unplaced ship with the fewest candidates that do not overlap the
    ships placed so far is placed next (ties to the lower ship index); with `reorder=False` the
    order is fixed once per game by the initial candidate counts (stable sort), as the
    reference's `populate_board` does;
  * the ship takes a uniformly random candidate; none left is a dead end: the particle is invalid.
  * finally a particle whose board leaves a hit uncovered is invalid (anonymous hits of the paper
    protocol; under the grand protocol every hit has a colour, so this never fires there).

Weights: `log w = Σ_j ln L(answer_j == any(board ∩ region_j))` with `config.answer_likelihood()`
(`constraints.answer_log_likelihood`), and weight 0 (log -inf) for an invalid particle. With
`prior="uniform"` each valid particle's weight also carries `Σ_steps ln n_step`, n_step the
candidates its ship had at that step: the proposal drew the particle with probability
`Π 1 / n_step` (the order of the ships is a function of the spans placed before, so each
configuration has one path), and dividing by it leaves the uniform prior. The weights then vary
more (a smaller ESS for the same P), and the hit probabilities are calibrated against boards
drawn uniformly (docs/battleship/suites-and-samplers.md).
"""

from __future__ import annotations

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np

from bsjax.battleship.belief import constraints, mh_kernel, moves
from bsjax.battleship.belief.base import (
    AnswerModel,
    BeliefInfo,
    Sampler,
    answer_model,
    kish_ess,
)
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard, refrng
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations


@chex.dataclass(frozen=True)
class ImportanceState:
    """One game's particle set.

    Attributes:
      spans: `[P, S]` int32 global span id of each ship (arbitrary for ships an invalid particle
        did not place).
      log_weights: `[P]` float32 unnormalised log-weights (answer log-likelihood); -inf if invalid.
      valid: `[P]` bool False for dead-end or hit-uncovering particles (weight 0).
      answers: the `AnswerModel` of the weights.
    """

    spans: chex.Array
    log_weights: chex.Array
    valid: chex.Array
    answers: AnswerModel


def normalised_weights(log_weights: chex.Array, valid: chex.Array) -> chex.Array:
    """`[P]` float32 self-normalised weights; all zeros (no NaN) when no particle is valid."""
    lw = jnp.where(valid, log_weights, -jnp.inf)
    top = jnp.max(lw)
    any_valid = jnp.isfinite(top)
    w = jnp.where(valid & any_valid, jnp.exp(lw - jnp.where(any_valid, top, 0.0)), 0.0)
    total = jnp.sum(w)
    return jnp.where(total > 0, w / jnp.where(total > 0, total, 1.0), 0.0).astype(jnp.float32)


PRIORS = ("proposal", "uniform")


@functools.cache
def _span_words_for(rows: int, cols: int, lengths: tuple[int, ...]):
    """Host tables of the spans packed 32 to a uint32 word (Nw = ⌈N/32⌉): `[N, Nw]` the spans
    each span overlaps (itself included), `[L_max + 1, Nw]` the spans of each length, `[Nw]`
    every span."""
    table = spans_lib.span_table(rows, cols, lengths)
    cells = table.cells.astype(np.int32)                                           # [N, C]
    by_length = table.length[None, :] == np.arange(len(table.count))[:, None]
    return (bitboard.pack_np(cells @ cells.T > 0), bitboard.pack_np(by_length),
            bitboard.pack_np(np.ones(table.n_spans, bool)))


def span_words(config: GameConfig):
    """The config's span tables packed 32 spans to a word (host numpy): (`[N, Nw]` the spans
    each span overlaps, itself included; `[L_max + 1, Nw]` the spans of each length; `[Nw]`
    every span). The proposal's sets of spans are words of these."""
    return _span_words_for(config.rows, config.cols, tuple(sorted(config.ship_lengths)))


def weighted_occupancy(config: GameConfig, spans: chex.Array, weights: chex.Array,
                       particles_last: bool = False) -> chex.Array:
    """`[C]` float32 Σ_p w_p·occ_p of `[P, S]` placements with `[P]` weights, summed at full
    float32 precision. `particles_last` (what a TPU runs): the occupancy laid out `[C, P]`
    (`spans.cells_particles_last`; `[P, C]` pads C = 64 to its 128-wide tiles). The same sum, up
    to its order."""
    highest = jax.lax.Precision.HIGHEST
    if particles_last:
        cells = spans_lib.cells_particles_last(config, spans).astype(jnp.float32)  # [C, P]
        return jnp.einsum("cp,p->c", cells, weights, precision=highest)
    cells = spans_lib.board_cells(config, spans).astype(jnp.float32)               # [P, C]
    return jnp.einsum("p,pc->c", weights, cells, precision=highest)


@dataclasses.dataclass(frozen=True)
class ImportanceSampler(Sampler):
    """Static configuration (hashable; closed over by jit).

    Attributes:
      config: the game rules.
      n_particles: P, particles drawn per update.
      reorder: True re-picks the most constrained ship after every placement (fewest candidates
        given the ships placed so far); False orders the ships once by their initial candidate
        counts.
      layout: how the particles are laid out for the hit probability and the planners (the
        particle sampler's `mh_kernel` modes, `mh_kernel.MODES`): "xla" particles first;
        "lowering" chosen when the program is lowered, particles last on a TPU (its tiles pad
        the small minor axes of `[P, ...]` arrays); "auto" "xla" on a CPU host, else "lowering"
        (how `harness.aot` compiles for a TPU that is not there). The same values either way.
      prior: the prior the weights target (`PRIORS`): "proposal" the sequential proposal itself
        (Grand et al.'s `FastSampler`), "uniform" every labelled configuration alike (the
        weights divided by the proposal's probability of each particle).
    """

    config: GameConfig
    n_particles: int = 1000
    reorder: bool = True
    layout: str = "auto"
    prior: str = "proposal"

    def __post_init__(self):
        if self.layout not in ("auto", "lowering", "xla"):
            raise ValueError(f"unknown layout {self.layout!r} (choose from auto, lowering, xla)")
        if self.prior not in PRIORS:
            raise ValueError(f"unknown prior {self.prior!r} (choose from {', '.join(PRIORS)})")

    name = "importance"
    # A TPU plays a chip's games in steps of this many (`play.games_per_step`): at 16,384 games
    # the fresh draw of every update compiled in 34-36 s in steps of 256 (with its proposal's
    # masks unpacked), 16-27 s in steps of 128 (docs/throughput.md).
    tpu_games_per_step = 128

    # ----- public interface -----

    def init(self, key: jax.Array, obs: Observations, game_seed: chex.Array,
             answers: AnswerModel | None = None) -> ImportanceState:
        """A fresh particle set for `obs` weighted by `answers` (the protocol's answer model by
        default). The key is consumed; `game_seed` is unused."""
        del game_seed
        return self._draw(key, obs, answer_model(self.config) if answers is None else answers)

    def update(self, key: jax.Array, state: ImportanceState, obs: Observations
               ) -> tuple[ImportanceState, BeliefInfo]:
        """A FRESH particle set for `obs` (only the state's answer model is kept). The key is
        consumed. Info: the ESS of the new weights, the fraction of valid draws (as
        `acceptance`)."""
        fresh = self._draw(key, obs, state.answers)
        return fresh, BeliefInfo(
            ess=kish_ess(normalised_weights(fresh.log_weights, fresh.valid)),
            acceptance=jnp.mean(fresh.valid.astype(jnp.float32)))

    def answer_model(self, state: ImportanceState) -> AnswerModel:
        return state.answers

    def weighted_particles(self, state: ImportanceState) -> tuple[chex.Array, chex.Array]:
        """`[P, S]` int32 spans and `[P]` float32 normalised weights (zeros if none is valid)."""
        return state.spans, normalised_weights(state.log_weights, state.valid)

    def hit_probability(self, state: ImportanceState) -> chex.Array:
        """`[C]` float32 weighted marginal Σ w·occ / Σ w (zeros if no particle is valid)."""
        w = normalised_weights(state.log_weights, state.valid)
        if mh_kernel.resolve(self.layout) == "xla":
            p = weighted_occupancy(self.config, state.spans, w)
        else:
            p = jax.lax.platform_dependent(
                state.spans, w, default=functools.partial(weighted_occupancy, self.config),
                tpu=functools.partial(weighted_occupancy, self.config, particles_last=True))
        return jnp.clip(p, 0.0, 1.0)

    # ----- internals -----

    @property
    def _tracker(self) -> bool:
        return self.config.fleet is None

    def _length_histogram(self, obs: Observations) -> chex.Array:
        """`[L_max + 1]` int32 count of each length in `obs.ship_lengths`."""
        n_len = spans_lib.table_for(self.config).offset.shape[0]
        lengths = jnp.asarray(obs.ship_lengths, jnp.int32)
        return jnp.sum(lengths[:, None] == jnp.arange(n_len, dtype=jnp.int32)[None, :], axis=0,
                       dtype=jnp.int32)

    def _base_masks(self, obs: Observations) -> chex.Array:
        """`[S, N]` bool spans ship k may take given the shots alone (no overlap terms)."""
        table = spans_lib.table_for(self.config)
        bits = jnp.asarray(table.bits)                                            # [N, W]
        length = jnp.asarray(table.length)                                        # [N]
        colour = obs.colour_bits                                                  # [S, W]
        no_miss = ~bitboard.intersects(bits, obs.miss_bits[None, :])              # [N]
        covers = bitboard.contains(bits[None, :, :], colour[:, None, :])          # [S, N]
        exact = ~bitboard.any_set(bits[None, :, :] ^ colour[:, None, :])          # [S, N]
        ok = no_miss[None, :] & covers & (~obs.sunk[:, None] | exact)
        if self._tracker:
            in_fleet = self._length_histogram(obs)[length] > 0                    # [N]
            ok = ok & in_fleet[None, :]
        else:
            ok = ok & (length[None, :] == jnp.asarray(obs.ship_lengths, jnp.int32)[:, None])
        return ok

    def _propose(self, words: chex.Array, base: chex.Array, order: chex.Array, hist: chex.Array,
                 obs: Observations) -> tuple[chex.Array, chex.Array, chex.Array, chex.Array]:
        """One particle by sequential placement. Returns (`[S]` int32 spans, `[]` bool valid,
        `[W]` uint32 its board's bitboard, built as the ships are placed, `[]` float32
        `Σ ln n_step` the log of 1 / its proposal probability, 0 unless `prior="uniform"`).

        `words` is `[S]` uint32 randomness: each ship takes the k-th allowed span for a uniform
        k, one random word per ship instead of a Gumbel draw per span. `base` is `[S, Nw]`
        uint32, each ship's allowed spans packed 32 to a word (`_base_masks`): the sets of spans
        are word operations on `[Nw]` (Nw = ⌈N/32⌉), not `[N]` masks, with the same draws.
        """
        table = spans_lib.table_for(self.config)
        bits = jnp.asarray(table.bits)                                            # [N, W]
        length = jnp.asarray(table.length)                                        # [N]
        overlap, by_length, every = (jnp.asarray(t) for t in span_words(self.config))
        n_ships = base.shape[0]
        blocked = jnp.zeros(base.shape[1], jnp.uint32)   # spans overlapping a placed ship
        occ = jnp.zeros(bits.shape[1], jnp.uint32)
        placed = jnp.zeros(n_ships, bool)
        spans = jnp.zeros(n_ships, jnp.int32)
        remaining = hist
        alive = jnp.bool_(True)
        log_candidates = jnp.float32(0.0)
        for step in range(n_ships):  # static and tiny (4 ships)
            free = ~blocked                                                       # [Nw]
            if self._tracker:
                lengths_left = jnp.where((remaining > 0)[:, None], by_length, jnp.uint32(0))
                free = free & bitboard.union(lengths_left, axis=0)
            if self.reorder:
                counts = jnp.sum(jnp.bitwise_count(base & free[None, :]), axis=1,
                                 dtype=jnp.int32)                                  # [S]
                counts = jnp.where(placed, jnp.iinfo(jnp.int32).max, counts)
                ship = jnp.argmin(counts)                                         # first minimum
            else:
                ship = order[step]
            allowed = base[ship] & free                                           # [Nw]
            any_allowed = bitboard.any_set(allowed)
            allowed = jnp.where(any_allowed, allowed, every)  # dead end: any span, invalid
            n_allowed = jnp.sum(jnp.bitwise_count(allowed), dtype=jnp.int32)
            if self.prior == "uniform":
                log_candidates = log_candidates + jnp.log(n_allowed.astype(jnp.float32))
            pick = refrng.u32_times_int_high(words[step], n_allowed)
            choice = moves.nth_set_bit(allowed, pick).astype(jnp.int32)
            alive = alive & any_allowed
            blocked = blocked | overlap[choice]
            occ = occ | bits[choice]
            placed = placed.at[ship].set(True)
            spans = spans.at[ship].set(choice)
            if self._tracker:
                remaining = remaining.at[length[choice]].add(-1)
        valid = alive & bitboard.contains(occ, obs.hit_bits)
        return spans, valid, occ, log_candidates

    def _draw(self, key: jax.Array, obs: Observations, answers: AnswerModel) -> ImportanceState:
        cfg = self.config
        base = self._base_masks(obs)                                              # [S, N]
        hist = self._length_histogram(obs)
        order = jnp.argsort(jnp.sum(base, axis=1, dtype=jnp.int32), stable=True).astype(jnp.int32)
        words = jax.random.bits(key, (self.n_particles, cfg.n_ships), jnp.uint32)
        packed = bitboard.pack(base)                                              # [S, Nw]
        spans, valid, boards, log_candidates = jax.vmap(
            lambda w: self._propose(w, packed, order, hist, obs))(words)          # boards [P, W]
        log_lik = jax.vmap(lambda b: constraints.answer_log_likelihood(
            cfg, b, obs, likelihood=answers.log_likelihood))(boards)
        if self.prior == "uniform":
            log_lik = log_lik + log_candidates
        log_weights = jnp.where(valid, log_lik, -jnp.inf).astype(jnp.float32)
        chex.assert_shape(spans, (self.n_particles, cfg.n_ships))
        return ImportanceState(spans=spans, log_weights=log_weights, valid=valid,
                               answers=answers)


__all__ = ["PRIORS", "ImportanceSampler", "ImportanceState", "normalised_weights", "span_words"]
