"""The reference implementation's int32 xorshift PRNG (`SeededRandom`), on the host and in JAX.

The step is x ^= x << 13; x ^= x >> 17 (arithmetic shift); x ^= x << 5, in int32. It is not
textbook xorshift32 (which shifts right logically); see docs/battleship/protocol.md §4.1.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

_MASK = 0xFFFFFFFF


def _to_int32(x: int) -> int:
    x &= _MASK
    return x - (1 << 32) if x & 0x80000000 else x


def seed_state(seed: int) -> int:
    """Initial int32 state of `SeededRandom(seed)`: seed truncated to int32, zero replaced by 1."""
    state = _to_int32(int(seed))
    return 1 if state == 0 else state


class SeededRandom:
    """Host (pure Python) port, used to generate the synthetic suite and as a test oracle."""

    def __init__(self, seed: int):
        self.state = seed_state(seed)

    def next_u32(self) -> int:
        x = self.state
        x = _to_int32(x ^ (x << 13))
        x = _to_int32(x ^ (x >> 17))  # Python >> on a negative int is arithmetic
        x = _to_int32(x ^ (x << 5))
        self.state = x
        return x & _MASK

    def next(self) -> float:
        return self.next_u32() / 2**32

    def next_int(self, m: int) -> int:
        # floor(u32 / 2^32 * m) is the high word of u32 * m, exactly.
        return (self.next_u32() * m) >> 32


# ----- JAX port (works with or without x64) -----

def jax_seed_state(seed: jnp.ndarray) -> jnp.ndarray:
    """`[]` int32 state for an int32 (already wrapped) seed."""
    seed = jnp.asarray(seed, jnp.int32)
    return jnp.where(seed == 0, jnp.int32(1), seed)


def jax_next(state: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Advance a `[]` int32 state. Returns (new state, output as uint32)."""
    x = jnp.asarray(state, jnp.int32)
    x = x ^ lax.shift_left(x, jnp.int32(13))
    x = x ^ lax.shift_right_arithmetic(x, jnp.int32(17))
    x = x ^ lax.shift_left(x, jnp.int32(5))
    return x, lax.bitcast_convert_type(x, jnp.uint32)


def u32_times_int_high(u32: jnp.ndarray, m: jnp.ndarray) -> jnp.ndarray:
    """floor(u32 * m / 2^32) for 0 <= m < 2^16, exact in uint32 arithmetic."""
    m = jnp.asarray(m, jnp.uint32)
    hi = lax.shift_right_logical(u32, jnp.uint32(16))
    lo = u32 & jnp.uint32(0xFFFF)
    return lax.shift_right_logical(hi * m + lax.shift_right_logical(lo * m, jnp.uint32(16)),
                                   jnp.uint32(16)).astype(jnp.int32)


def jax_next_int(state: jnp.ndarray, m: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """`nextInt(m)`: (new state, `[]` int32 in [0, m))."""
    state, u32 = jax_next(state)
    return state, u32_times_int_high(u32, m)


def jax_is_below_half(state_after: jnp.ndarray) -> jnp.ndarray:
    """`next() < 0.5` given the new state: the new int32 state is >= 0."""
    return state_after >= 0


def u32_to_unit_float(u32: jnp.ndarray, dtype=jnp.float64) -> jnp.ndarray:
    """u32 / 2^32 as a float (exact in float64: scaling by a power of two)."""
    return u32.astype(dtype) * jnp.asarray(2.0**-32, dtype)
