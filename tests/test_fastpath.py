"""`bsjax.core.fastpath` returns exactly what the JAX operations it replaces return."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsjax.core import fastpath

SETTINGS = settings(max_examples=30, deadline=None)


@pytest.mark.parametrize("shape", [(1,), (7,), (16, 500, 4), (3, 5, 2, 2)])
def test_bits_equal_jax_random_bits(shape):
    keys = jax.random.split(jax.random.key(11), 3)
    want = jax.vmap(lambda k: jax.random.bits(k, shape, jnp.uint32))(keys)
    got = jax.jit(jax.vmap(lambda k: fastpath.bits(k, shape)))(keys)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_bits_row_is_one_row_of_bits():
    key, shape = jax.random.key(5), (6, 9, 4)
    everything = np.asarray(jax.random.bits(key, shape, jnp.uint32))
    row = jax.jit(lambda i: fastpath.bits_row(key, shape, i))
    for i in range(shape[0]):
        np.testing.assert_array_equal(np.asarray(row(jnp.int32(i))), everything[i])


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1))
def test_unit_float_of_the_first_word_is_jax_random_uniform(seed):
    """What the MH kernel draws a resampling's offset with: bit for bit `uniform(key)`."""
    key = jax.random.key(seed)
    data = jax.random.key_data(key).astype(jnp.uint32)
    got = fastpath.unit_float(fastpath.hash_words(data[0], data[1], jnp.uint32(0)))
    assert np.asarray(got).tobytes() == np.asarray(jax.random.uniform(key)).tobytes()


def test_other_generators_fall_back_to_jax():
    """A raw uint32 key or another generator (rbg) gets JAX's own words."""
    raw = jax.random.PRNGKey(3)
    np.testing.assert_array_equal(np.asarray(fastpath.bits(raw, (4, 3))),
                                  np.asarray(jax.random.bits(raw, (4, 3), jnp.uint32)))
    rbg = jax.random.key(3, impl="rbg")
    np.testing.assert_array_equal(np.asarray(fastpath.bits_row(rbg, (4, 3), 2)),
                                  np.asarray(jax.random.bits(rbg, (4, 3), jnp.uint32))[2])


@SETTINGS
@given(values=st.lists(st.sampled_from([-1.0, 0.0, 0.25, 0.5, 0.75, 1.0, -np.inf, np.inf,
                                        np.nan]), min_size=1, max_size=70))
def test_first_argmax_equals_argmax_with_ties(values):
    values = jnp.asarray(values, jnp.float32)
    assert int(fastpath.first_argmax(values)) == int(jnp.argmax(values))


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), allowed=st.lists(st.booleans(), min_size=1, max_size=40))
def test_categorical_equals_jax_random_categorical(seed, allowed):
    allowed = np.asarray(allowed)
    allowed[seed % len(allowed)] = True  # at least one finite logit
    logits = jnp.where(jnp.asarray(allowed), 0.0, -jnp.inf)
    key = jax.random.key(seed)
    assert int(fastpath.categorical(key, logits)) == int(jax.random.categorical(key, logits))


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 20), width=st.integers(0, 3), index=st.data(),
       seed=st.integers(0, 2**16))
def test_set_at_and_add_at_equal_the_scatters(rows, width, index, seed):
    i = index.draw(st.integers(0, rows - 1))
    rng = np.random.default_rng(seed)
    shape = (rows,) + ((width,) if width else ())
    ints = jnp.asarray(rng.integers(-9, 9, shape), jnp.int32)
    value = jnp.asarray(rng.integers(-9, 9, shape[1:]), jnp.int32)
    np.testing.assert_array_equal(fastpath.set_at(ints, jnp.int32(i), value),
                                  ints.at[i].set(value))
    np.testing.assert_array_equal(fastpath.add_at(ints, jnp.int32(i), value),
                                  ints.at[i].add(value))
    bools = ints > 0
    np.testing.assert_array_equal(fastpath.set_at(bools, jnp.int32(i), True),
                                  bools.at[i].set(True))


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 40), width=st.integers(0, 3), index=st.data(),
       seed=st.integers(0, 2**16))
def test_row_at_equals_the_gather(rows, width, index, seed):
    i = index.draw(st.integers(0, rows - 1))
    shape = (rows,) + ((width,) if width else ())
    words = jnp.asarray(np.random.default_rng(seed).integers(0, 2**32, shape, np.uint64),
                        jnp.uint32)
    np.testing.assert_array_equal(jax.jit(fastpath.row_at)(words, jnp.int32(i)), words[i])
    # The TPU's form, run here.
    np.testing.assert_array_equal(jax.jit(fastpath._row_by_mask)(words, jnp.int32(i)), words[i])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 130), zeros=st.floats(0.0, 0.9), seed=st.integers(0, 2**16),
       where=st.sampled_from(["inside", "below", "above", "on an entry"]))
def test_count_at_most_counts_the_entries_at_most_the_target(n, zeros, seed, where):
    # Nondecreasing float32 sums of non-negative weights with runs of ties (zero weights), as
    # the exact sampler's inverse-CDF draws search them.
    rng = np.random.default_rng(seed)
    weights = np.where(rng.random(n) < zeros, 0.0, rng.random(n)).astype(np.float32)
    values = jnp.cumsum(jnp.asarray(weights))
    target = {"inside": float(rng.random()) * float(values[-1]), "below": -1.0,
              "above": float(values[-1]) + 1.0,
              "on an entry": float(values[rng.integers(0, n)])}[where]
    expected = int(np.sum(np.asarray(values) <= np.float32(target)))
    target = jnp.float32(target)
    assert int(jax.jit(fastpath.count_at_most)(values, target)) == expected
    # The GPU's form (a binary search), run here.
    assert int(jax.jit(fastpath._count_by_search)(values, target)) == expected
