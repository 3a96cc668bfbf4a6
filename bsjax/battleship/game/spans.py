"""Span tables: every straight ship placement of every allowed length, as bitboards.

Spans are grouped by length (ascending); within a length, horizontal spans come first, then
vertical, each ordered by start row then start column — the reference MCMC enumeration order
(docs/battleship/protocol.md §5.1), so "the k-th allowed span of length L" is the reference's k-th placement.
A ship placement is stored as an int32 index into this table, never as a board.
"""

from __future__ import annotations

import dataclasses
import functools

import jax.numpy as jnp
import numpy as np

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard


@dataclasses.dataclass(frozen=True)
class SpanTable:
    """Host (numpy) span table of one board shape and set of lengths.

    Attributes:
      cells: `[N, C]` bool occupancy of each span.
      bits: `[N, W]` uint32 bitboards of each span.
      length: `[N]` int32 span length.
      offset: `[L_max + 1]` int32 first span index of each length (or -1 if absent).
      count: `[L_max + 1]` int32 number of spans of each length (0 if absent).
      max_count: the largest `count` (the width of a padded per-ship candidate table).
      neighbours: `[N, 4]` int32 the span shifted by one cell (along its axis -1/+1, across it
        -1/+1), or -1 where that leaves the board. The relation is symmetric, so a proposal that
        picks one of the four at random is a symmetric MH proposal.
    """

    cells: np.ndarray
    bits: np.ndarray
    length: np.ndarray
    offset: np.ndarray
    count: np.ndarray
    max_count: int
    neighbours: np.ndarray

    @property
    def n_spans(self) -> int:
        return int(self.length.shape[0])


def enumerate_spans(rows: int, cols: int, length: int) -> list[tuple[int, int, bool]]:
    """(row, col, horizontal) for every legal span of `length`, in reference order."""
    out = []
    for r in range(rows):
        for c in range(cols - length + 1):
            out.append((r, c, True))
    for r in range(rows - length + 1):
        for c in range(cols):
            out.append((r, c, False))
    return out


def span_index(rows: int, cols: int, lengths: tuple[int, ...], length: int, row: int, col: int,
               horizontal: bool) -> int:
    """Global index of a span (inverse of the table order)."""
    table = span_table(rows, cols, lengths)
    base = int(table.offset[length])
    if horizontal:
        return base + row * (cols - length + 1) + col
    return base + rows * (cols - length + 1) + row * cols + col


@functools.cache
def span_table(rows: int, cols: int, lengths: tuple[int, ...]) -> SpanTable:
    n_cells = rows * cols
    cells, length_of = [], []
    max_len = max(lengths)
    offset = np.full(max_len + 1, -1, np.int32)
    count = np.zeros(max_len + 1, np.int32)
    for length in sorted(lengths):
        spans = enumerate_spans(rows, cols, length)
        offset[length] = len(cells)
        count[length] = len(spans)
        for r, c, horizontal in spans:
            occ = np.zeros(n_cells, bool)
            for i in range(length):
                rr, cc = (r, c + i) if horizontal else (r + i, c)
                occ[rr * cols + cc] = True
            cells.append(occ)
            length_of.append(length)
    cells_arr = np.array(cells, bool)
    index = {}
    for length in sorted(lengths):
        for k, (r, c, horizontal) in enumerate(enumerate_spans(rows, cols, length)):
            index[(length, r, c, horizontal)] = offset[length] + k
    neighbours = np.full((len(cells), 4), -1, np.int32)
    for (length, r, c, horizontal), i in index.items():
        along = [(r, c - 1), (r, c + 1)] if horizontal else [(r - 1, c), (r + 1, c)]
        across = [(r - 1, c), (r + 1, c)] if horizontal else [(r, c - 1), (r, c + 1)]
        for j, (rr, cc) in enumerate(along + across):
            neighbours[i, j] = index.get((length, rr, cc, horizontal), -1)
    return SpanTable(
        cells=cells_arr,
        bits=bitboard.pack_np(cells_arr),
        length=np.array(length_of, np.int32),
        offset=offset,
        count=count,
        max_count=int(count.max()),
        neighbours=neighbours,
    )


def table_for(config: GameConfig) -> SpanTable:
    return span_table(config.rows, config.cols, tuple(sorted(config.ship_lengths)))


def candidate_spans(config: GameConfig, length: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Padded candidate spans of a ship of `length` (traced `[]` int32).

    Returns:
      `[K]` int32 global span indices (padding clipped to a valid index) and `[K]` bool validity,
      K = the largest per-length span count. Order is the reference enumeration order.
    """
    table = table_for(config)
    offset = jnp.asarray(table.offset)[length]
    count = jnp.asarray(table.count)[length]
    k = jnp.arange(table.max_count, dtype=jnp.int32)
    valid = k < count
    return jnp.where(valid, offset + k, offset), valid


@functools.cache
def _padded_by_length(rows: int, cols: int, lengths: tuple[int, ...]):
    """Host `[L_max + 1, K, W]` bitboards and `[L_max + 1, K]` span ids, one padded row per length."""
    table = span_table(rows, cols, lengths)
    k = table.max_count
    bits = np.zeros((len(table.count), k, table.bits.shape[1]), np.uint32)
    ids = np.zeros((len(table.count), k), np.int32)
    for length in lengths:
        start, n = int(table.offset[length]), int(table.count[length])
        bits[length, :n] = table.bits[start:start + n]
        ids[length, :n] = np.arange(start, start + n)
        ids[length, n:] = start
    return bits, ids


def candidate_bits(config: GameConfig, length: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray,
                                                                    jnp.ndarray]:
    """Like `candidate_spans`, plus their `[K, W]` bitboards, read as one contiguous block
    (a block gather is much cheaper on CPU than gathering K spans one by one)."""
    bits, ids = _padded_by_length(config.rows, config.cols, tuple(sorted(config.ship_lengths)))
    table = table_for(config)
    valid = jnp.arange(table.max_count, dtype=jnp.int32) < jnp.asarray(table.count)[length]
    return jnp.asarray(ids)[length], valid, jnp.asarray(bits)[length]


def spans_bits(config: GameConfig, spans: jnp.ndarray) -> jnp.ndarray:
    """Bitboards of span indices: `[..., S]` -> `[..., S, W]` uint32."""
    return jnp.asarray(table_for(config).bits)[spans]


def board_bits(config: GameConfig, spans: jnp.ndarray) -> jnp.ndarray:
    """Union bitboard of a placement: `[..., S]` span ids -> `[..., W]` uint32."""
    return bitboard.union(spans_bits(config, spans), axis=-2)


def board_cells(config: GameConfig, spans: jnp.ndarray) -> jnp.ndarray:
    """Occupancy of a placement: `[..., S]` span ids -> `[..., C]` bool."""
    return jnp.any(jnp.asarray(table_for(config).cells)[spans], axis=-2)


@functools.cache
def _span_boxes(rows: int, cols: int, lengths: tuple[int, ...]) -> np.ndarray:
    """`[N]` int32 each span's first and last row and column, one byte each (a span is a
    straight line: its box is its cells)."""
    cells = span_table(rows, cols, lengths).cells.reshape(-1, rows, cols)
    on_rows, on_cols = np.any(cells, axis=2), np.any(cells, axis=1)
    first = lambda lines: np.argmax(lines, axis=1)                                # noqa: E731
    last = lambda lines: lines.shape[1] - 1 - np.argmax(lines[:, ::-1], axis=1)  # noqa: E731
    return (first(on_rows) | last(on_rows) << 8 | first(on_cols) << 16
            | last(on_cols) << 24).astype(np.int32)


def cells_particles_last(config: GameConfig, spans: jnp.ndarray) -> jnp.ndarray:
    """`board_cells` of `[P, S]` placements laid out `[C, P]`, particles the minor axis (what a
    TPU wants: `[P, C]` pads C = 64 to its 128-wide tiles). Computed from each span's box, not
    gathered from the `[N, C]` table (whose rows would make `[P, C]` again); the same cells."""
    box = jnp.asarray(_span_boxes(config.rows, config.cols,
                                  tuple(sorted(config.ship_lengths))))[spans.T]       # [S, P]
    row, col = (jnp.asarray(x, jnp.int32)[:, None, None]
                for x in np.divmod(np.arange(config.n_cells), config.cols))
    byte = lambda i: (box >> (8 * i)) & 0xFF                                        # noqa: E731
    inside = (byte(0) <= row) & (row <= byte(1)) & (byte(2) <= col) & (col <= byte(3))
    return jnp.any(inside, axis=1)                                                  # [C, P]


def spans_bits_lanes(config: GameConfig, spans: jnp.ndarray) -> jnp.ndarray:
    """`spans_bits` of N placements laid out `[S, N]` -> `[S, W, N]` uint32, placements the
    minor axis (`[N, S, W]` has W = 2 minor, which a TPU's tiles pad 64-fold). One gather per
    word from the table's columns; the same bits."""
    columns = table_for(config).bits.T                                              # [W, K]
    return jnp.stack([jnp.asarray(word)[spans] for word in columns], axis=1)


def bits_particles_last(config: GameConfig, cells: jnp.ndarray) -> jnp.ndarray:
    """`[C, P]` bool cells -> `[W, P]` uint32 bitboards (`board_bits`, particles last). Not
    `bitboard.pack` along axis 0: its pad-and-shift form doubles WMA's memory per game on a TPU
    (182 → 372 KiB at 16,384 games), where this select-and-sum form keeps P the minor axis."""
    n_particles = cells.shape[1]
    padded = jnp.concatenate([cells, jnp.zeros((config.n_words * 32 - config.n_cells,
                                                n_particles), bool)])
    shifts = jnp.arange(32, dtype=jnp.uint32)[None, :, None]
    return jnp.sum(jnp.where(padded.reshape(config.n_words, 32, n_particles),
                             jnp.left_shift(jnp.uint32(1), shifts), jnp.uint32(0)),
                   axis=1, dtype=jnp.uint32)


def span_lengths(config: GameConfig, spans: jnp.ndarray) -> jnp.ndarray:
    return jnp.asarray(table_for(config).length)[spans]
