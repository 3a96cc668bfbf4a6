import os
import sys

# Tests import helpers from tests/support.py.
sys.path.insert(0, os.path.dirname(__file__))

# XLA's persistent compilation cache: many tests play the same agent on the same shapes, each
# through a fresh `jax.jit`, so each would compile the same program again. The cache reuses the
# binary (keyed by the program, the JAX version and the flags; behaviour is unchanged), between
# the xdist workers and the tests' own subprocesses too (set before JAX is imported, so they
# inherit it). It lives in .pytest_cache/ (git-ignored) and keeps the next run warm.
_XLA_CACHE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          ".pytest_cache", "xla")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _XLA_CACHE)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")

import chex  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_trace_counter():
    """chex counts traces per function *name* across the whole process, so two test files with a
    same-named jitted helper in one xdist worker would share a count; every test starts at 0."""
    chex.clear_trace_counter()
    yield
