import os
import subprocess
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
# The embedded model on one thread: two workers on two cores, each running llama.cpp on two
# spinning threads, made every reply many times slower (replies do not depend on the count).
os.environ.setdefault("BSJAX_LLM_THREADS", "1")

# XLA's classic CPU emitters instead of its fusion emitters: the same programs and games (the
# committed games, made without it, are replayed here game for game) in 19-25% less compile
# time and the same run time (docs/throughput.md). Only where this jaxlib knows the flag (XLA
# aborts on an unknown one), asked once: the xdist workers and subprocesses inherit it.
_CLASSIC_EMITTERS = "--xla_cpu_use_fusion_emitters=false"


def _with_classic_emitters(flags: str) -> str:
    probe = subprocess.run([sys.executable, "-c", "import jax; jax.devices('cpu')"],
                           env={**os.environ, "XLA_FLAGS": f"{flags} {_CLASSIC_EMITTERS}"},
                           capture_output=True)
    return f"{flags} {_CLASSIC_EMITTERS}".strip() if probe.returncode == 0 else flags


if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = _with_classic_emitters(os.environ.get("XLA_FLAGS", ""))

import chex  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_trace_counter():
    """chex counts traces per function *name* across the whole process, so two test files with a
    same-named jitted helper in one xdist worker would share a count; every test starts at 0."""
    chex.clear_trace_counter()
    yield


# The longest test files, longest first (worker-seconds of one cold run: three workers on a
# 2-core CPU, cold XLA cache). `make test` hands whole files to the workers in collection order
# (--dist loadfile --no-loadscope-reorder); starting with the longest keeps one long file from
# running alone at the end while the other workers idle.
LONGEST_FIRST = (
    "gilp/test_sim.py",          # 298
    "test_freshness.py",         # 243
    "test_mh_kernel.py",         # 357, about 200 since its examples were cut
    "test_llm.py",               # 210
    "test_env.py",               # 198
    "gilp/test_paper.py",        # 184
    "test_sharding.py",          # 168
    "test_play.py",              # 172
    "gilp/test_parametric.py",   # 145
    "test_structured.py",        # 129
    "test_lookahead.py",         # 113
    "gilp/test_calibrate.py",    # 112
    "test_samplers.py",          # 168, about 110 since its convergence cases share programs
    "test_api.py",               # 92
    "gilp/test_train.py",        # 89
    "gilp/test_masked_oracle.py",  # 86
    "gilp/test_real.py",         # 85
    "test_lens.py",              # 78
)


def pytest_collection_modifyitems(config, items):
    tests_dir = os.path.dirname(os.path.abspath(__file__))

    def rank(item):
        path = os.path.relpath(str(item.path), tests_dir)
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within a file, and of the other files, is kept
