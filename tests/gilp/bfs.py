"""BFS verifier of the oracle distance (docs/gilp/spec.md §2.6): breadth-first search over modal
transitions from a graph, over all candidates. Test-only; meant for instances with N <= 8."""

from __future__ import annotations

import functools

import jax
import numpy as np

from bsjax.gilp import config
from bsjax.gilp.envs import common
from bsjax.gilp.types import Graph

_STATE_FIELDS = ("status", "etype", "hidden", "attr")


@functools.cache
def _successors_fn(bench: common.Bench):
    def successors(g: Graph):
        acts, amask = bench.candidates(g)
        nexts = jax.vmap(lambda a: common.modal(bench, g, a))(acts)
        return nexts, amask, common.goals_done(g)
    return jax.jit(successors)


def _state_key(g: Graph) -> bytes:
    return b"".join(np.asarray(getattr(g, name)).tobytes() for name in _STATE_FIELDS)


def bfs_distance(bench: common.Bench, g: Graph, limit: int = 40) -> int:
    """Fewest modal steps from `g` to a state with every goal COMPLETED; `C.UNSOLV` if none is
    found within `limit` steps."""
    successors = _successors_fn(bench)
    frontier, seen = [g], {_state_key(g)}
    for depth in range(limit + 1):
        next_frontier = []
        for graph in frontier:
            # One host transfer per expanded state: slicing device arrays per child is ~25x slower.
            nexts, amask, done = jax.device_get(successors(graph))
            if bool(done):
                return depth
            for index in np.flatnonzero(amask):
                child = jax.tree_util.tree_map(lambda x: x[index], nexts)
                key = _state_key(child)
                if key not in seen:
                    seen.add(key)
                    next_frontier.append(child)
        if not next_frontier:
            break
        frontier = next_frontier
    return config.UNSOLV
