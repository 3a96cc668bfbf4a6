"""`sim.next` look-ahead as closed forms over the particle set (docs/battleship/protocol.md §7), for ONE game.

The reference reads `boardValue = hits / 14` after hypothetical actions; every look-ahead it does
reduces to the reductions below, so no interpreter is needed. All K candidate questions of a turn
are scored in one call: answers `[K, P]`, reweighted marginals `[K, 2, C]`, values `[K]`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax import lax

from bsjax.battleship.belief.base import AnswerModel
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard, questions, state_regions
from bsjax.battleship.game import spans as spans_lib

COARSE_WEIGHTS = (0.015, 0.005, 0.0)     # split, regionMass, clusterRelevance
SALVAGE_WEIGHTS = (0.03, 0.035, 0.025)


class Particles(NamedTuple):
    """A weighted particle set in the form the look-ahead needs.

    Attributes:
      occupancy: `[P, C]` float32 0/1 ship cells of each particle.
      bits: `[P, W]` uint32 the same as bitboards.
      weights: `[P]` float32 normalised weights.
    """

    occupancy: jnp.ndarray
    bits: jnp.ndarray
    weights: jnp.ndarray


def particles(config: GameConfig, spans: jnp.ndarray, weights: jnp.ndarray,
              by_platform: bool = False) -> Particles:
    """From `[P, S]` span ids and `[P]` weights.

    `by_platform`: chosen when the program is lowered: on a TPU the occupancy and bitboards are
    built particles-last (`spans.cells_particles_last`) and transposed, which lets XLA keep
    the particles as their minor axis (the same values); elsewhere the span tables' rows."""
    if not by_platform:
        return _particles(config, spans, weights)
    return lax.platform_dependent(spans, weights,
                                  tpu=functools.partial(_particles_last, config),
                                  default=functools.partial(_particles, config))


def _particles(config: GameConfig, spans: jnp.ndarray, weights: jnp.ndarray) -> Particles:
    return Particles(spans_lib.board_cells(config, spans).astype(jnp.float32),
                     spans_lib.board_bits(config, spans), weights)


def _particles_last(config: GameConfig, spans: jnp.ndarray, weights: jnp.ndarray) -> Particles:
    cells = spans_lib.cells_particles_last(config, spans)                         # [C, P]
    return Particles(cells.T.astype(jnp.float32),
                     spans_lib.bits_particles_last(config, cells).T, weights)


def hit_probability(parts: Particles) -> jnp.ndarray:
    """`[C]` weighted occupancy."""
    return parts.weights @ parts.occupancy


def shot_values(hit_probability: jnp.ndarray, hits: jnp.ndarray, total_cells) -> jnp.ndarray:
    """`[C]` V_shot(c) = p_c (h+1)/T + (1 - p_c) h/T = (h + p_c)/T."""
    return (hits + hit_probability) / total_cells


def answers(region_bits: jnp.ndarray, parts: Particles) -> jnp.ndarray:
    """`[K, P]` bool: does particle p have a ship in region k.

    On a TPU word by word: no `[K, P, W]` intermediate, which a TPU materialises with its W = 2
    padded to a 128-wide tile (a GPU fuses the one reduction better than the word chain)."""
    return lax.platform_dependent(region_bits, parts.bits, tpu=_answers_by_word,
                                  default=_answers_whole)


def _answers_whole(region_bits: jnp.ndarray, bits: jnp.ndarray) -> jnp.ndarray:
    return bitboard.intersects(region_bits[:, None, :], bits[None, :, :])


def _answers_by_word(region_bits: jnp.ndarray, bits: jnp.ndarray) -> jnp.ndarray:
    words = [(region_bits[:, None, w] & bits[None, :, w]) != 0
             for w in range(region_bits.shape[-1])]
    return functools.reduce(jnp.logical_or, words)


class Lookahead(NamedTuple):
    """Per candidate question: `p_yes` `[K]` raw belief that the answer is yes, and `best_after`
    `[K, 2]` the best unknown-cell hit probability after a yes (0) / no (1) answer."""

    p_yes: jnp.ndarray
    best_after: jnp.ndarray


def lookahead(config: GameConfig, parts: Particles, answer_matrix: jnp.ndarray,
              unknown: jnp.ndarray, tempered: bool = True,
              rows: np.ndarray | None = None, model: AnswerModel | None = None) -> Lookahead:
    """Reweight the particles by each answer of each candidate and read the best marginal.

    Both answers come from one reweighting: with L(yes | particle) = mismatch + gap · truth and
    L(no | particle) = match − gap · truth (gap = match − mismatch), the post-answer masses are
    mismatch · m + gap · Y and match · m − gap · Y, where m `[C]` is the belief's occupancy mass
    and Y `[K, C]` the mass of the particles that answer yes. One `[K, P] @ [P, C]` product serves
    every candidate and both answers (half the work of reweighting each answer apart).

    Args:
      answer_matrix: `[K, P]` bool predicate of each candidate on each particle.
      unknown: `[C]` bool unshot cells.
      tempered: reweight with the captain's likelihood L(match)/L(mismatch) (the reference's
        §7.3); False splits by the noise-free answer (Grand et al.'s Bayes-D partition).
      model: the captain's answer model (`AnswerModel`: its match, mismatch and gap); the
        protocol's by default.
      rows: static indices of the candidates the caller may choose (all by default): only
        they are reweighted, the others get `best_after` 0. p_yes is still summed for all K,
        since the summation order of XLA's matrix-vector product depends on the row count
        (the `[K, C]` product's does not): every value equals that of a call without `rows`.
    Returns:
      Lookahead with `[K]` p_yes and `[K, 2]` best post-answer hit probability.
    """
    if not tempered:
        match, mismatch, gap = 1.0, 0.0, 1.0
    elif model is None:
        match, mismatch = config.answer_likelihood()
        gap = match - mismatch
    else:
        match, mismatch, gap = model.match, model.mismatch, model.gap
    # Two [K, P] arrays, the weights split by the answer, serve all three products: each
    # `x @ ones` is the same dot as `truth @ weights` term by term (w·1 = 1·w exactly), so the
    # values are those of the 0/1 float matrix, with one [K, P] array fewer to write and read.
    # The ones are computed (w >= 0) so that XLA cannot fold the dot into a differently
    # ordered sum.
    yes_weights = jnp.where(answer_matrix, parts.weights, 0.0)                   # [K, P]
    no_weights = jnp.where(answer_matrix, 0.0, parts.weights)                    # [K, P]
    ones = (parts.weights >= 0.0).astype(jnp.float32)                           # [P]
    mass = parts.weights @ parts.occupancy                                       # [C]
    p_yes = yes_weights @ ones                                                   # [K]
    p_no = no_weights @ ones  # not 1 - p_yes: an answer no particle gives stays 0
    all_p_yes = p_yes
    if rows is not None:
        yes_weights, p_yes, p_no = yes_weights[rows], p_yes[rows], p_no[rows]
    yes_mass = yes_weights @ parts.occupancy                                     # [R, C]
    marginals = jnp.stack([mismatch * mass + gap * yes_mass,
                           match * mass - gap * yes_mass], axis=1)               # [K, 2, C]
    total = jnp.stack([match * p_yes + mismatch * p_no,
                       mismatch * p_yes + match * p_no], axis=1)                 # [K, 2]
    marginals = marginals / jnp.where(total > 0, total, 1.0)[..., None]
    best = jnp.max(jnp.where(unknown, marginals, -1.0), axis=-1)
    best = jnp.where((total > 0) & jnp.any(unknown), best, 0.0)
    if rows is not None:
        # Back to K rows by a gather with static indices (row R is a zero row): it fuses into
        # its consumers, where a scatter would be a kernel of its own on a GPU.
        source = np.full(answer_matrix.shape[0], len(rows))
        source[rows] = np.arange(len(rows))
        best = jnp.concatenate([best, jnp.zeros((1, 2), best.dtype)])[source]
    return Lookahead(all_p_yes, best)


def raw_question_values(look: Lookahead, hits: jnp.ndarray, total_cells) -> jnp.ndarray:
    """`[K]` raw(q) = pYes V_yes + (1 - pYes) V_no with V_a = (h + p*_a)/T (§7.3).

    Uses the raw pYes as the answer probability, as the reference does (quirk 7)."""
    values = (hits + look.best_after) / total_cells
    return look.p_yes * values[:, 0] + (1.0 - look.p_yes) * values[:, 1]


def split(p_yes: jnp.ndarray) -> jnp.ndarray:
    return 1.0 - jnp.abs(2.0 * p_yes - 1.0)


@functools.cache
def _template_tables():
    """Static tables of the 83 templates: cells `[83, 64]`, mass divisor `[83]`, block index
    `[83]` (-1 if not a block)."""
    cells = questions.catalog_cells()
    families = [t.family for t in questions.CATALOG]
    divisor = np.array([8.0 if f in ("row", "column") else 16.0 for f in families], np.float32)
    block = np.array([t.index - 34 if t.family == "block-2x2" else -1 for t in questions.CATALOG],
                     np.int32)
    return cells, divisor, block


@functools.cache
def _block_cells() -> np.ndarray:
    """`[83, 4]` int32 for each block-2x2 template, the cells binned into it (§7.4, quirk 13: a
    cell goes to the block anchored at (min(r, 6), min(c, 6))) in increasing order, padded with
    64 (a cell of mass 0); all 64 for the other templates."""
    _, _, block = _template_tables()
    rows, cols = np.divmod(np.arange(64), 8)
    anchor = np.minimum(rows, 6) * 7 + np.minimum(cols, 6)                      # [C] block id
    table = np.full((len(block), 4), 64, np.int32)
    for k in np.flatnonzero(block >= 0):
        members = np.flatnonzero(anchor == block[k])
        table[k, :len(members)] = members
    return table


def region_mass(hit_probability: jnp.ndarray, unknown: jnp.ndarray) -> jnp.ndarray:
    """`[83]` clip(M(R)/d(R), 0, 1) with the reference's block-2x2 binning (§7.4, quirk 13):
    each unknown cell's mass goes to the one block anchored at (min(r, 6), min(c, 6)), and a
    block's binned mass is divided by 4."""
    cells, divisor, block = _template_tables()
    mass = jnp.where(unknown, hit_probability, 0.0)                             # [C]
    plain = jnp.asarray(cells, jnp.float32) @ mass / jnp.asarray(divisor)
    # A block's binned mass, summed in cell order as a scatter-add would (the same float), but
    # as gathers that fuse with their consumer: no scatter kernel on a GPU.
    padded = jnp.concatenate([mass, jnp.zeros(1, mass.dtype)])
    binned = jnp.zeros(len(block), jnp.float32)
    for column in _block_cells().T:
        binned = binned + padded[column]
    blocks = binned / 4.0
    return jnp.clip(jnp.where(jnp.asarray(block) >= 0, blocks, plain), 0.0, 1.0)


# [C] int32 the bit of each cell's row, and of its column.
_ROW_BIT = (1 << (np.arange(64) // 8)).astype(np.int32)
_COLUMN_BIT = (1 << (np.arange(64) % 8)).astype(np.int32)


def _line_masks(cells) -> tuple:
    """`[..., 64]` bool cells -> the rows and the columns they touch, as `[...]` int32 8-bit
    masks (numpy in, numpy out: the catalog's are constants)."""
    if isinstance(cells, np.ndarray):
        return (np.bitwise_or.reduce(np.where(cells, _ROW_BIT, 0), axis=-1),
                np.bitwise_or.reduce(np.where(cells, _COLUMN_BIT, 0), axis=-1))
    zero, last = jnp.int32(0), cells.ndim - 1
    return tuple(lax.reduce(jnp.where(cells, bit, zero), zero, lax.bitwise_or, (last,))
                 for bit in (_ROW_BIT, _COLUMN_BIT))


def cluster_relevance(hit_cells: jnp.ndarray, labels: jnp.ndarray | None = None,
                      regions: jnp.ndarray | None = None) -> jnp.ndarray:
    """`[K]` max over 4-connected hit clusters K of
    max(|rows(R) ∩ rows(K)|, |cols(R) ∩ cols(K)|) / max(|rows(K)|, |cols(K)|, 1); 0 without hits.

    `labels` (`[C]` from `state_regions.hit_clusters`) may be passed by a caller that already has
    them: the labelling is a while loop, which under vmap waits for the slowest game. `regions`
    (`[K, C]` bool cells) are the 83 catalog templates by default. Rows and columns are 8-bit
    masks and the intersections popcounts: small exact integers, as a 0/1 matrix product
    gives, without a `[K, L]` product per game (or a kernel launch each on a GPU)."""
    region_rows, region_cols = _line_masks(questions.catalog_cells() if regions is None
                                           else regions)                        # [K]
    if labels is None:
        labels = state_regions.hit_clusters(hit_cells, 8, 8)                        # [C]
    member = labels[None, :] == jnp.arange(64)[:, None]                         # [L, C]
    k_rows, k_cols = _line_masks(member)                                        # [L]
    shared_rows = jnp.bitwise_count(jnp.asarray(region_rows)[:, None] & k_rows[None, :])
    shared_cols = jnp.bitwise_count(jnp.asarray(region_cols)[:, None] & k_cols[None, :])
    extent = jnp.maximum(jnp.maximum(jnp.bitwise_count(k_rows), jnp.bitwise_count(k_cols)), 1)
    overlap = (jnp.maximum(shared_rows, shared_cols).astype(jnp.float32)        # [K, L]
               / extent.astype(jnp.float32))
    # A cluster exists where it has a cell, so a row.
    return jnp.max(jnp.where(k_rows[None, :] != 0, overlap, 0.0), axis=1)


def adjusted_values(raw: jnp.ndarray, p_yes: jnp.ndarray, mass: jnp.ndarray,
                    relevance: jnp.ndarray,
                    weights: jnp.ndarray | tuple[float, float, float]) -> jnp.ndarray:
    """adj = raw + w_split split + w_mass regionMass + w_cluster clusterRelevance, `[K]` each;
    `weights` `[3]` (w_split, w_mass, w_cluster), an array or a sequence.

    The weights scale the three features as one `[K, 3]` product, not one by one: a scalar
    sliced from a game's weights was a GPU kernel of its own at large batches (MRA: 6 a turn
    at 65,536 games). The same products and sums in the same order, so the same values."""
    terms = (jnp.stack([split(p_yes), mass, relevance], axis=-1)
             * jnp.asarray(weights).astype(raw.dtype))                              # [K, 3]
    return raw + terms[:, 0] + terms[:, 1] + terms[:, 2]


def template_bits() -> jnp.ndarray:
    """`[83, W]` uint32 regions of the catalog."""
    return jnp.asarray(questions.catalog_bits())
