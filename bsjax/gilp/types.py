"""The pytrees of the graph-planning domain. Shapes are for ONE task; N = N_MAX, A = A_MAX."""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config


@chex.dataclass(frozen=True)
class Graph:
    """One task's state graph `G_t = (V, E, X, Z)` and its static facts (docs/gilp/spec.md §2.1).

    Padded nodes have `nmask = False`, status PENDING, no edges and `goal = False`; every function
    is invariant to padding.

    Attributes:
      status: `[N]` int8 current status (PENDING..SKIPPED).
      ntype: `[N]` int8 node type.
      goal: `[N]` bool goal mask Z.
      attr: `[N, 8]` float32 observable attributes (per-benchmark meaning).
      etype: `[N, N]` int8 edge type of u -> v, or -1.
      anc: `[N, N]` bool static ancestor-or-self closure over the structural edges:
        `anc[u, v]` is True when u is an ancestor of v or u == v (real nodes only).
      hidden: `[N, 5]` int8 non-observable fields (RepairFlow; zeros elsewhere).
      nmask: `[N]` bool real nodes.
      t: `[]` int32 step counter.
      budget: `[]` int32 step budget B.
      horizon: `[]` int32 oracle horizon H = d*(G_0).
    """

    status: chex.Array
    ntype: chex.Array
    goal: chex.Array
    attr: chex.Array
    etype: chex.Array
    anc: chex.Array
    hidden: chex.Array
    nmask: chex.Array
    t: chex.Array
    budget: chex.Array
    horizon: chex.Array


class StepInfo(NamedTuple):
    """What one environment step reports (all `[]` except `delta`).

    Attributes:
      valid: the action was valid (an invalid action is a no-op).
      failed: the failure branch was realised (some stochastic component failed).
      reward: the step's reward for the realised outcome.
      done: every goal node is COMPLETED after the step.
      dstar_before, dstar_after: oracle distance before and after.
      delta: `[N]` int8 direction of each node's change in {-1, 0, +1}.
    """

    valid: chex.Array
    failed: chex.Array
    reward: chex.Array
    done: chex.Array
    dstar_before: chex.Array
    dstar_after: chex.Array
    delta: chex.Array


def empty_graph_np(n_max: int = config.N_MAX) -> dict[str, np.ndarray]:
    """Host-side padded arrays of an empty task, for generators to fill in."""
    return {
        "status": np.zeros(n_max, np.int8),
        "ntype": np.zeros(n_max, np.int8),
        "goal": np.zeros(n_max, bool),
        "attr": np.zeros((n_max, config.N_ATTR), np.float32),
        "etype": np.full((n_max, n_max), config.NO_EDGE, np.int8),
        "anc": np.zeros((n_max, n_max), bool),
        "hidden": np.zeros((n_max, config.N_HIDDEN), np.int8),
        "nmask": np.zeros(n_max, bool),
        "t": np.int32(0),
        "budget": np.int32(0),
        "horizon": np.int32(0),
    }


def graph_from_np(arrays: dict[str, np.ndarray]) -> Graph:
    """A device `Graph` from host arrays (with the dtypes of the spec)."""
    return Graph(
        status=jnp.asarray(arrays["status"], jnp.int8),
        ntype=jnp.asarray(arrays["ntype"], jnp.int8),
        goal=jnp.asarray(arrays["goal"], bool),
        attr=jnp.asarray(arrays["attr"], jnp.float32),
        etype=jnp.asarray(arrays["etype"], jnp.int8),
        anc=jnp.asarray(arrays["anc"], bool),
        hidden=jnp.asarray(arrays["hidden"], jnp.int8),
        nmask=jnp.asarray(arrays["nmask"], bool),
        t=jnp.asarray(arrays["t"], jnp.int32),
        budget=jnp.asarray(arrays["budget"], jnp.int32),
        horizon=jnp.asarray(arrays["horizon"], jnp.int32),
    )


def graph_to_np(graph: Graph) -> dict[str, np.ndarray]:
    """Host copies of a `Graph`'s arrays (inverse of `graph_from_np`)."""
    return {name: np.asarray(getattr(graph, name)) for name in
            ("status", "ntype", "goal", "attr", "etype", "anc", "hidden", "nmask", "t", "budget",
             "horizon")}


def ancestor_closure_np(etype: np.ndarray, nmask: np.ndarray,
                        edge_types: tuple[int, ...] = config.STRUCTURAL_EDGE_TYPES) -> np.ndarray:
    """`anc[u, v]`: u reaches v over the given edge types, or u == v (real nodes only). Host-side.

    N boolean matrix products, as the generator precomputes it (spec §8).
    """
    n = etype.shape[0]
    adj = np.isin(etype, edge_types) & nmask[:, None] & nmask[None, :]
    reach = adj | np.diag(nmask)
    for _ in range(n):
        nxt = reach | ((reach.astype(np.int32) @ adj.astype(np.int32)) > 0)
        if (nxt == reach).all():
            break
        reach = nxt
    return reach
