import os
import sys

# Tests import helpers from tests/support.py.
sys.path.insert(0, os.path.dirname(__file__))

import chex  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_trace_counter():
    """chex counts traces per function *name* across the whole process, so two test files with a
    same-named jitted helper in one xdist worker would share a count; every test starts at 0."""
    chex.clear_trace_counter()
    yield
