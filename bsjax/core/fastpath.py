"""Faster formulations of three JAX operations, returning exactly what JAX returns.

- `bits` is `jax.random.bits(key, shape, uint32)`. Under JAX's default generator (threefry2x32,
  partitionable) each word hashes its flat index with the key. On a CPU, JAX lowers the hash as
  a loop over its five rounds, each reading and writing whole arrays; for the particle sampler's
  `[steps, P, 4]` words that loop was a fifth of an update. Here the rounds are unrolled into one
  elementwise expression that XLA fuses into one pass (about 4x faster on a 2-core CPU). With
  any other generator or setting it calls `jax.random.bits` itself. `bits_row(key, shape, i)`
  is `bits(key, shape)[i]`, for a loop that hashes each step's words in the step.
- `first_argmax` is `jnp.argmax` of a vector, and `categorical` is
  `jax.random.categorical` over one axis: XLA's CPU argmax is a two-operand reduce, to which a
  CPU profile attributed ~3 ms of a greedy turn at 54 games and 10% of a batch in the particles'
  initial draw (concurrent kernels may inflate such attributions); a max and a min give the same
  index.
- `set_at` and `add_at` are `x.at[i].set(v)` and `x.at[i].add(v)` for an in-range index, as a
  select over the first axis: elementwise, so on a GPU the update fuses with its neighbours
  instead of being a scatter kernel of its own (a turn's small records: one launch each).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA  # threefry's key-schedule constant


def _rotate_left(x: jnp.ndarray, r: int) -> jnp.ndarray:
    return (x << jnp.uint32(r)) | (x >> jnp.uint32(32 - r))


def threefry2x32(key1: jnp.ndarray, key2: jnp.ndarray, count_hi: jnp.ndarray,
                 count_lo: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The threefry2x32 hash (20 rounds) of counters under a key; uint32 arrays broadcast."""
    keys = (key1, key2, key1 ^ key2 ^ jnp.uint32(_PARITY))
    x0, x1 = count_hi + keys[0], count_lo + keys[1]
    for block in range(5):
        for r in _ROTATIONS[block % 2]:
            x0 = x0 + x1
            x1 = _rotate_left(x1, r) ^ x0
        x0 = x0 + keys[(block + 1) % 3]
        x1 = x1 + keys[(block + 2) % 3] + jnp.uint32(block + 1)
    return x0, x1


def _is_default_threefry(key: jax.Array) -> bool:
    return (jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
            and "threefry2x32" in str(jax.random.key_impl(key))
            and bool(jax.config.jax_threefry_partitionable))


def hash_words(key_hi: jnp.ndarray, key_lo: jnp.ndarray, counters: jnp.ndarray) -> jnp.ndarray:
    """The word `jax.random.bits` draws at flat index `counters` under the key words
    (`key_data(key)`): the two halves of its threefry hash, xor-ed. Kernels call it directly."""
    high, low = threefry2x32(key_hi, key_lo, jnp.zeros_like(counters), counters)
    return high ^ low


def unit_float(word: jnp.ndarray) -> jnp.ndarray:
    """The float32 in [0, 1) `jax.random.uniform` makes of a uint32 word (its mantissa bits
    under the exponent of 1.0, less 1.0, and its clip at 0). Kernels call it directly."""
    floats = lax.bitcast_convert_type((word >> jnp.uint32(9)) | jnp.uint32(0x3F800000),
                                      jnp.float32) - jnp.float32(1.0)
    return lax.max(jnp.float32(0.0), floats * jnp.float32(1.0) + jnp.float32(0.0))


def _hashed(key: jax.Array, counters: jnp.ndarray) -> jnp.ndarray:
    data = jax.random.key_data(key)
    return hash_words(data[0], data[1], counters)


def hash_applies(key: jax.Array, shape: tuple[int, ...]) -> bool:
    """Whether words of `shape` under `key` are the hash of their flat index (else JAX draws)."""
    return _is_default_threefry(key) and 0 < math.prod(shape) < 2**32


def bits(key: jax.Array, shape: tuple[int, ...]) -> jnp.ndarray:
    """`jax.random.bits(key, shape, jnp.uint32)`, word for word; the key is consumed."""
    if not hash_applies(key, shape):
        return jax.random.bits(key, shape, jnp.uint32)
    return _hashed(key, lax.iota(jnp.uint32, math.prod(shape)).reshape(shape))  # flat index


def bits_row(key: jax.Array, shape: tuple[int, ...], row: jnp.ndarray) -> jnp.ndarray:
    """`bits(key, shape)[row]` (`[]` int row of the first axis) without drawing the other rows:
    a loop can hash each step's words in the step."""
    if not hash_applies(key, shape):
        return jax.random.bits(key, shape, jnp.uint32)[row]
    row_size = math.prod(shape[1:])
    counters = lax.iota(jnp.uint32, row_size).reshape(shape[1:])
    return _hashed(key, jnp.asarray(row, jnp.uint32) * jnp.uint32(row_size) + counters)


def set_at(array: jnp.ndarray, index: jnp.ndarray, value: jnp.ndarray) -> jnp.ndarray:
    """`array.at[index].set(value)` for a `[]` index in `[0, len(array))`; `value` broadcasts
    against one row."""
    row = lax.broadcasted_iota(jnp.int32, array.shape, 0) == index
    return jnp.where(row, jnp.asarray(value, array.dtype), array)


def add_at(array: jnp.ndarray, index: jnp.ndarray, amount: jnp.ndarray) -> jnp.ndarray:
    """`array.at[index].add(amount)` of an integer array, for a `[]` index in range."""
    row = lax.broadcasted_iota(jnp.int32, array.shape, 0) == index
    return array + jnp.where(row, jnp.asarray(amount, array.dtype), jnp.zeros((), array.dtype))


def row_at(array: jnp.ndarray, index: jnp.ndarray) -> jnp.ndarray:
    """`array[index]` of an unsigned integer array for a `[]` index in `[0, len(array))`.

    On a TPU a masked OR over the rows: a gather's operand is laid out row-major there, so a
    `[K, 2]` array of bitboards would be copied padded 64-fold to its 128-lane tiles. Elsewhere
    the gather, which fuses with its readers (the OR would be a kernel of its own on a GPU)."""
    return lax.platform_dependent(array, index, tpu=_row_by_mask, default=_row_by_gather)


def _row_by_gather(array: jnp.ndarray, index: jnp.ndarray) -> jnp.ndarray:
    return array[index]


def _row_by_mask(array: jnp.ndarray, index: jnp.ndarray) -> jnp.ndarray:
    row = lax.broadcasted_iota(jnp.int32, array.shape, 0) == index
    return lax.reduce(jnp.where(row, array, jnp.zeros((), array.dtype)),
                      jnp.zeros((), array.dtype), lax.bitwise_or, (0,))


def count_at_most(values: jnp.ndarray, target: jnp.ndarray) -> jnp.ndarray:
    """`[]` int32 the number of entries of a nondecreasing `[n]` vector that are <= `target`
    (`jnp.searchsorted(values, target, side="right")`).

    On a GPU a binary search, unrolled. Elsewhere a compare with every entry and a sum, which
    fuses with its readers: on a GPU that reduction, vmapped to `[4096, 500, 125]` in the exact
    sampler's draws, became a kernel whose code the GPU compiler did not finish generating."""
    return lax.platform_dependent(values, target, cuda=_count_by_search, rocm=_count_by_search,
                                  default=_count_by_compare)


def _count_by_compare(values: jnp.ndarray, target: jnp.ndarray) -> jnp.ndarray:
    return jnp.sum(values <= target, dtype=jnp.int32)


def _count_by_search(values: jnp.ndarray, target: jnp.ndarray) -> jnp.ndarray:
    return jnp.searchsorted(values, target, side="right", method="scan_unrolled").astype(
        jnp.int32)


def first_argmax(values: jnp.ndarray) -> jnp.ndarray:
    """`[]` int32 `jnp.argmax` of a `[K]` vector: the first maximum (the first NaN if any)."""
    is_max = (values == jnp.max(values)) | jnp.isnan(values)
    index = jnp.arange(values.shape[0], dtype=jnp.int32)
    return jnp.min(jnp.where(is_max, index, values.shape[0] - 1))


def categorical(key: jax.Array, logits: jnp.ndarray) -> jnp.ndarray:
    """`jax.random.categorical(key, logits)` of `[K]` logits (at least one finite), as JAX draws
    it: the first argmax of Gumbel noise plus the logits. The key is consumed."""
    return first_argmax(jax.random.gumbel(key, logits.shape, logits.dtype) + logits)
