"""Boards as bitboards: `[W]` uint32 words, cell c is bit (c % 32) of word c // 32.

A bitboard makes the inner loop of the MCMC chain (overlap and shot checks against 100-odd
candidate spans) a few word-wise ANDs instead of `[K, 64]` boolean reductions.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def n_words(n_cells: int) -> int:
    return max(1, -(-n_cells // 32))


def pack_np(cells: np.ndarray) -> np.ndarray:
    """Host packing: `[..., C]` bool -> `[..., W]` uint32."""
    cells = np.asarray(cells, bool)
    n_cells = cells.shape[-1]
    words = n_words(n_cells)
    padded = np.zeros(cells.shape[:-1] + (words * 32,), bool)
    padded[..., :n_cells] = cells
    weights = (np.uint64(1) << np.arange(32, dtype=np.uint64)).astype(np.uint64)
    grouped = padded.reshape(cells.shape[:-1] + (words, 32)).astype(np.uint64)
    return (grouped * weights).sum(-1).astype(np.uint32)


def unpack_np(bits: np.ndarray, n_cells: int) -> np.ndarray:
    bits = np.asarray(bits, np.uint32)
    shifts = np.arange(32, dtype=np.uint32)
    cells = ((bits[..., :, None] >> shifts) & 1).astype(bool)
    return cells.reshape(bits.shape[:-1] + (-1,))[..., :n_cells]


def pack(cells: jnp.ndarray) -> jnp.ndarray:
    """`[..., C]` bool -> `[..., W]` uint32 (in graph)."""
    n_cells = cells.shape[-1]
    words = n_words(n_cells)
    pad = words * 32 - n_cells
    cells = jnp.pad(cells.astype(jnp.uint32), [(0, 0)] * (cells.ndim - 1) + [(0, pad)])
    grouped = cells.reshape(cells.shape[:-1] + (words, 32))
    shifts = jnp.arange(32, dtype=jnp.uint32)
    # Distinct bits, so the sum is an OR.
    return jnp.sum(grouped << shifts, axis=-1, dtype=jnp.uint32)


def unpack(bits: jnp.ndarray, n_cells: int) -> jnp.ndarray:
    """`[..., W]` uint32 -> `[..., C]` bool (in graph)."""
    shifts = jnp.arange(32, dtype=jnp.uint32)
    cells = ((bits[..., :, None] >> shifts) & jnp.uint32(1)).astype(bool)
    return cells.reshape(bits.shape[:-1] + (-1,))[..., :n_cells]


def union(bits: jnp.ndarray, axis: int) -> jnp.ndarray:
    """Bitwise OR over an axis."""
    bits = jnp.moveaxis(bits, axis, 0)
    folded = bits[0]
    for i in range(1, bits.shape[0]):  # static and small (ships, words)
        folded = folded | bits[i]
    return folded


def any_set(bits: jnp.ndarray) -> jnp.ndarray:
    """Whether any bit is set: `[..., W]` -> `[...]` bool."""
    # An explicit OR over the (static, tiny) word axis fuses better than a reduction.
    folded = bits[..., 0]
    for word in range(1, bits.shape[-1]):
        folded = folded | bits[..., word]
    return folded != 0


def intersects(a: jnp.ndarray, b: jnp.ndarray) -> jnp.ndarray:
    return any_set(a & b)


def contains(a: jnp.ndarray, b: jnp.ndarray) -> jnp.ndarray:
    """Whether every bit of `b` is set in `a`."""
    return ~any_set(b & ~a)


def popcount(bits: jnp.ndarray) -> jnp.ndarray:
    return jnp.sum(jnp.bitwise_count(bits).astype(jnp.int32), axis=-1)


def single(cell: jnp.ndarray, words: int) -> jnp.ndarray:
    """The bitboard of one cell index: `[]` -> `[W]` uint32."""
    word = jnp.arange(words, dtype=jnp.int32)
    bit = jnp.left_shift(jnp.uint32(1), (cell % 32).astype(jnp.uint32))
    return jnp.where(word == cell // 32, bit, jnp.uint32(0))
