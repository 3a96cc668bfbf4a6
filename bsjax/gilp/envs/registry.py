"""Benchmark name -> `Bench` (the rules of one benchmark)."""

from __future__ import annotations

from bsjax.gilp import config
from bsjax.gilp.envs.common import Bench


def get(name: str) -> Bench:
    """The `Bench` of a benchmark; raises ValueError for an unknown name."""
    if name == "taskgraph":
        from bsjax.gilp.envs.taskgraph import BENCH
    elif name == "toolchain":
        from bsjax.gilp.envs.toolchain import BENCH
    elif name == "resourcealloc":
        from bsjax.gilp.envs.resourcealloc import BENCH
    elif name == "repairflow":
        from bsjax.gilp.envs.repairflow import BENCH
    else:
        raise ValueError(f"unknown benchmark {name!r} (choose from {', '.join(config.BENCHMARKS)})")
    return BENCH
