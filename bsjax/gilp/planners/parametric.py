"""The parametric world-model planners (spec/gilp.md §4.3, §4.4): `imagine`, Parametric-WM-MPC and
Parametric-WM-MCTS (`mctx.muzero_policy`).

Both planners read only the observed graph (`envs.common.observe`) and the backbone. Everything
is pure, written for ONE state, and has static shapes, so the episode runner
(`planners.parametric_episodes`) vmaps a planner over episodes inside one `lax.scan`.

**imagine** (spec §4.3): the backbone's predicted successor. Statuses come from the argmax delta
decoded by the benchmark's `decode` tables; the state is kept unchanged when the backbone predicts
the action invalid (`sigmoid(valid_logit) < 0.5`). For ResourceAlloc the deterministic edge
rewiring of the rules is applied on top (`resourcealloc_rewire`); it reads only observable fields.
The step counter `t` is not advanced (no backbone reads it).

**MPC** (bsjax choices of spec §4.3): score every candidate once at the root; for the top
`M = 8` by Ĵ_K (real candidates only; ties to the lower slot), roll out `K = 3` imagined steps
whose continuation is greedy, `a_i = argmax Ĵ_K` over the candidates predicted valid
(`p_valid ≥ 0.5`), or `argmax p_valid` when none is (the spec's `[p_valid ≥ 0.5]·Ĵ_K` read as a
restriction, so that a valid action with negative value still beats an invalid one). Score

    score(a_0) = Σ_{i<K} γ^i r̂_i Π_{l<i}(1 − p̂_done,l) + γ^K Π_{l<K}(1 − p̂_done,l) max_a Ĵ_K(Ĝ_K, a)

with γ = `GilpConfig.gamma` = 0.9, and execute the argmax, ties to the lower canonical index.
Cost per step: `|A| · (1 + M·K)` backbone evaluations, all vmapped. `ParametricConfig.
mpc_root_valid_only` (on by default, a bsjax choice) also restricts the root candidates to those
predicted valid; see its note.

**MCTS** (bsjax choices of spec §4.4): `mctx.muzero_policy` with 32 simulations, `pb_c_init`
1.25, the padding slots as `invalid_actions`, priors `Ĵ_K / 0.1` masked (logit −1e9) to the
candidates predicted valid (no mask if none), value `max_a Ĵ_K` over the real candidates,
reward r̂ and discount `γ·(1 − p̂_done)` of the expanded action. Embeddings are the imagined
graphs, carried together with the backbone's outputs on their candidates (computed once, when the
node is expanded, for its prior and value), so a simulation costs `|A|` evaluations, not `|A| + 1`.
- `max_depth = min(6, B − t)`: mctx takes `max_depth` as a plain argument used only in the
  comparison `depth < max_depth` of its per-tree traversal, so the planner calls `muzero_policy`
  on a batch of ONE tree and passes the per-episode budget as a (vmapped) traced scalar. This is
  exactly mctx's own depth cut (the leaf at the last affordable step still bootstraps its value),
  not an emulation inside the recurrent function.
- No Dirichlet noise at the root (`dirichlet_fraction = 0`, evaluation-time search). mctx's
  1e-7 tie-break noise draws from the agent key, so a search is deterministic given its key.
- The executed action is the most-visited root action (ties to the lower slot), not mctx's
  sampled `action`.
- A padding slot expanded in the tree (it never is: its prior is 0 and real priors are not)
  behaves like an invalid no-op: graph unchanged, reward −0.05.

**Slot cuts** (`sizes`, `planning_sizes`): planners may run the backbone on only the node slots
and candidate slots a task set uses (static, rounded up). Backbones are padding-invariant, so the
decisions are those of the full-size computation up to float rounding, at a fraction of the cost
(MPNN work grows with N²·A). The environment functions always see full N_MAX graphs.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import mctx
import numpy as np

from bsjax.gilp import config as C
from bsjax.gilp.backbones.layers import BackboneOut
from bsjax.gilp.envs import common
from bsjax.gilp.envs.common import Bench
from bsjax.gilp.features import graph_inputs
from bsjax.gilp.types import Graph, graph_from_np

MPC = "Parametric-WM-MPC"
MCTS = "Parametric-WM-MCTS"
METHODS = (MPC, MCTS)
_ALIASES = {"mpc": MPC, "mcts": MCTS, MPC.lower(): MPC, MCTS.lower(): MCTS}

# A masked prior logit (softmax gives exactly 0 next to any real logit).
MASKED_LOGIT = -1e9
# Reward of an invalid (no-op) step, spec §2.6.
INVALID_REWARD = -0.05


@dataclasses.dataclass(frozen=True)
class ParametricConfig:
    """Static settings of the parametric planners (spec §4.3, §4.4; bsjax choices).

    Attributes:
      mpc_candidates: M, root candidates rolled out by MPC (top Ĵ_K).
      mpc_horizon: K, imagined steps per MPC rollout.
      mpc_root_valid_only: restrict MPC's root candidates to those predicted valid
        (`p_valid ≥ 0.5`; all real ones if none is), as the greedy continuation and the MCTS
        priors are. On by default (bsjax choice; spec §4.3 ranks all candidates): with an
        imperfect backbone a predicted-invalid root action scores as "wait one step", and
        replanning from the unchanged state repeats it until the budget runs out (TaskGraph,
        a 10-epoch MPNN: SR 0.10 with the literal rule, 0.70 with this one).
      mcts_simulations: simulations per MCTS search.
      mcts_max_depth: depth cap; the effective cap is `min(mcts_max_depth, B − t)`.
      mcts_pb_c_init: PUCT constant c_1.
      mcts_prior_temperature: priors are `Ĵ_K / temperature`.
      mcts_dirichlet_fraction: root exploration noise (0 = none).
      episode_chunk: episodes per jitted call of the runner (memory bound).
    """

    mpc_candidates: int = 8
    mpc_horizon: int = 3
    mpc_root_valid_only: bool = True
    mcts_simulations: int = 32
    mcts_max_depth: int = 6
    mcts_pb_c_init: float = 1.25
    mcts_prior_temperature: float = 0.1
    mcts_dirichlet_fraction: float = 0.0
    episode_chunk: int = 256


# Optional static (n_nodes, n_actions) slot cuts, see `planning_sizes`.
Sizes = Optional[tuple[int, int]]


class PlanOut(NamedTuple):
    """What a planner returns for one state.

    Attributes:
      slot: `[]` int32 candidate slot of the chosen action (index into `bench.candidates(g)`).
      root: `BackboneOut` with a leading `[A]` axis: the backbone on every root candidate.
      score: `[A]` float32 the planner's score per slot (MPC score, or MCTS visit count); −inf /
        0 on slots it did not consider.
    """

    slot: jax.Array
    root: BackboneOut
    score: jax.Array


def canonical_method(method: str) -> str:
    """`Parametric-WM-MPC` / `Parametric-WM-MCTS` from the name or an alias (`mpc`, `mcts`)."""
    name = _ALIASES.get(method.lower())
    if name is None:
        raise ValueError(f"unknown parametric method {method!r} (choose from {', '.join(METHODS)})")
    return name


# ---------------------------------------------------------------------------------------------
# The backbone on candidates, and imagined successors
# ---------------------------------------------------------------------------------------------

def score_candidates(model: Callable, g: Graph, acts: jax.Array,
                     n_nodes: int | None = None) -> BackboneOut:
    """The backbone on every candidate of one graph: one vmapped call (spec §8).

    Args:
      model: a backbone, `model(graph_inputs(g), action) -> BackboneOut`.
      g: one observed graph with `N` node slots.
      acts: `[A, 3]` candidate actions.
      n_nodes: optional static count `n <= N` of leading node slots that hold every real node.
        The backbone then runs on the first n slots only (backbones are size-agnostic and
        padding-invariant, so real-node outputs agree up to float rounding) and the delta logits
        of the cut-off padding slots are filled with "no change".
    Returns:
      `BackboneOut` with a leading `[A]` axis (`delta_logits` `[A, N, 3]`).
    """
    n = g.status.shape[0]
    if n_nodes is None or n_nodes >= n:
        return jax.vmap(model, in_axes=(None, 0))(graph_inputs(g), acts)
    cut = g.replace(status=g.status[:n_nodes], ntype=g.ntype[:n_nodes], goal=g.goal[:n_nodes],
                    attr=g.attr[:n_nodes], etype=g.etype[:n_nodes, :n_nodes],
                    anc=g.anc[:n_nodes, :n_nodes], hidden=g.hidden[:n_nodes],
                    nmask=g.nmask[:n_nodes])
    outs = jax.vmap(model, in_axes=(None, 0))(graph_inputs(cut), acts)
    no_change = jnp.broadcast_to(jnp.asarray([0.0, 1.0, 0.0], outs.delta_logits.dtype),
                                 (acts.shape[0], n - n_nodes, 3))
    return outs._replace(delta_logits=jnp.concatenate([outs.delta_logits, no_change], axis=1))


def planning_candidates(bench: Bench, g: Graph, n_actions: int | None = None
                        ) -> tuple[jax.Array, jax.Array]:
    """`bench.candidates(g)` cut to the first `n_actions` slots (static; must cover every real
    candidate: candidate lists are packed to the front). Slot indices are unchanged."""
    acts, amask = bench.candidates(g)
    if n_actions is None:
        return acts, amask
    return acts[:n_actions], amask[:n_actions]


def take(outs: BackboneOut, slot: jax.Array) -> BackboneOut:
    """The outputs of one candidate slot."""
    return jax.tree_util.tree_map(lambda x: x[slot], outs)


def predicted_valid(out: BackboneOut) -> jax.Array:
    """`sigmoid(valid_logit) ≥ 0.5`, i.e. `valid_logit ≥ 0` (any leading shape)."""
    return out.valid_logit >= 0.0


def predicted_directions(out: BackboneOut) -> jax.Array:
    """`[N]` int8 argmax delta direction in {−1, 0, +1}."""
    return (jnp.argmax(out.delta_logits, axis=-1) - 1).astype(jnp.int8)


def resourcealloc_rewire(g: Graph, action: jax.Array) -> Graph:
    """ResourceAlloc's deterministic structural update of an action assumed to take effect
    (spec §2.4, §4.3); reads only observable fields, statuses untouched.

    - `assign(r, j)`: a `can_serve` edge r → j becomes `assigned`;
    - `release(r)`: every `assigned` edge out of r reverts to `can_serve`;
    - `escalate(j)`: j's home edge moves to the escalation resource e* (`attr[2] = 1`):
      column j becomes a single `can_serve` edge from e*;
    then the load `attr[:, 1] = #assigned out-edges / 3` is recomputed on every resource.

    Args:
      g: one observed ResourceAlloc graph.
      action: `[3]` int (kind, i, j) with kinds assign 0, release 1, escalate 2.
    """
    n = g.status.shape[0]
    ids = jnp.arange(n)
    kind, i, j = action[0], action[1], action[2]
    first, second = jnp.clip(i, 0, n - 1), jnp.clip(j, 0, n - 1)
    is_res = g.nmask & (g.ntype == C.RESOURCE)
    is_job = g.nmask & (g.ntype == C.JOB)
    in_range = (i >= 0) & (i < n)
    rows = (ids == first)[:, None]
    etype = g.etype
    assign = ((kind == 0) & in_range & (j >= 0) & (j < n) & is_res[first] & is_job[second]
              & rows & (ids == second)[None, :] & (etype == C.CAN_SERVE))
    etype = jnp.where(assign, jnp.int8(C.ASSIGNED), etype)
    release = (kind == 1) & in_range & is_res[first] & rows & (etype == C.ASSIGNED)
    etype = jnp.where(release, jnp.int8(C.CAN_SERVE), etype)
    estar = jnp.argmax(is_res & (g.attr[:, 2] > 0.5))
    home = jnp.where(ids == estar, C.CAN_SERVE, C.NO_EDGE).astype(jnp.int8)
    escalate = (kind == 2) & in_range & is_job[first] & (ids == first)[None, :]
    etype = jnp.where(escalate, home[:, None], etype)
    load = jnp.sum(etype == C.ASSIGNED, axis=1).astype(jnp.float32)
    attr = g.attr.at[:, 1].set(jnp.where(is_res, load / 3.0, g.attr[:, 1]))
    return g.replace(etype=etype, attr=attr)


def imagine(bench: Bench, g_obs: Graph, action: jax.Array, out: BackboneOut) -> Graph:
    """The backbone's imagined successor `Ĝ' = imagine(Ĝ, a)` (spec §4.3).

    Args:
      bench: the benchmark (its `decode` tables; `resourcealloc` adds the edge rewiring).
      g_obs: one observed graph (hidden zeroed).
      action: `[3]` the action.
      out: the backbone's outputs for `(g_obs, action)` (no leading axis).
    Returns:
      The imagined graph: statuses decoded from argmax ΔĜ on real nodes, or `g_obs` unchanged
      when `sigmoid(valid_logit) < 0.5`; for ResourceAlloc also `resourcealloc_rewire`.
    """
    dirs = jnp.where(g_obs.nmask, predicted_directions(out), 0).astype(jnp.int8)
    status = bench.decode(g_obs, action, dirs).astype(jnp.int8)
    moved = g_obs.replace(status=jnp.where(g_obs.nmask, status, g_obs.status))
    if bench.name == "resourcealloc":
        moved = resourcealloc_rewire(moved, action)
    return common.select_graph(predicted_valid(out), moved, g_obs)


def max_value(outs: BackboneOut, amask: jax.Array) -> jax.Array:
    """`[]` max_a Ĵ_K over the real candidates."""
    return jnp.max(jnp.where(amask, outs.value, -jnp.inf))


def greedy_slot(outs: BackboneOut, amask: jax.Array) -> jax.Array:
    """`[]` int32 argmax Ĵ_K over candidates predicted valid, else argmax p_valid (lower slot on
    ties)."""
    allowed = amask & predicted_valid(outs)
    by_value = jnp.argmax(jnp.where(allowed, outs.value, -jnp.inf))
    by_validity = jnp.argmax(jnp.where(amask, outs.valid_logit, -jnp.inf))
    return jnp.where(jnp.any(allowed), by_value, by_validity).astype(jnp.int32)


def lowest_argmax(scores: jax.Array, slots: jax.Array) -> jax.Array:
    """The lowest slot among those whose score equals the maximum (scores `[M]`, slots `[M]`)."""
    best = jnp.max(scores)
    return jnp.min(jnp.where(scores == best, slots, jnp.iinfo(jnp.int32).max)).astype(jnp.int32)


# ---------------------------------------------------------------------------------------------
# Parametric-WM-MPC
# ---------------------------------------------------------------------------------------------

def mpc_plan(model: Callable, bench: Bench, g_obs: Graph, cfg: C.GilpConfig = C.GilpConfig(),
             params: ParametricConfig = ParametricConfig(), sizes: Sizes = None) -> PlanOut:
    """Receding-horizon MPC inside the backbone for one observed state (spec §4.3).

    Args:
      model, bench, g_obs: the backbone, the benchmark and one observed graph.
      cfg, params: static settings (γ; M, K).
      sizes: optional static `(n_nodes, n_actions)` cut of node and candidate slots that still
        covers every real node and candidate (`planning_sizes`); None = full N_MAX / A_MAX.
    Returns:
      `PlanOut`; `score` holds the MPC score on the M rolled-out slots and −inf elsewhere.
    """
    gamma = cfg.gamma
    n_nodes, n_actions = sizes or (None, None)
    score = lambda graph, acts: score_candidates(model, graph, acts, n_nodes)  # noqa: E731
    acts, amask = planning_candidates(bench, g_obs, n_actions)
    root = score(g_obs, acts)
    top_m = min(params.mpc_candidates, acts.shape[0])
    allowed = amask
    if params.mpc_root_valid_only:
        valid = amask & predicted_valid(root)
        allowed = jnp.where(jnp.any(valid), valid, amask)
    _, top = jax.lax.top_k(jnp.where(allowed, root.value, -jnp.inf), top_m)

    def rollout(slot):
        first = take(root, slot)
        graph = imagine(bench, g_obs, acts[slot], first)
        alive = 1.0 - jax.nn.sigmoid(first.done_logit)

        def body(carry, i):
            # Step i = 1..K on Ĝ_i: the greedy continuation while i < K, the tail at i = K.
            graph, total, alive, discount, _ = carry
            outs = score(graph, acts)
            chosen = greedy_slot(outs, amask)
            out = take(outs, chosen)
            total = total + jnp.where(i < params.mpc_horizon, discount * out.reward * alive, 0.0)
            tail = discount * alive * max_value(outs, amask)
            alive = alive * (1.0 - jax.nn.sigmoid(out.done_logit))
            return (imagine(bench, graph, acts[chosen], out), total, alive, discount * gamma,
                    tail), None

        init = (graph, first.reward, alive, jnp.float32(gamma), jnp.float32(0.0))
        (_, total, _, _, tail), _ = jax.lax.scan(body, init,
                                                 jnp.arange(1, params.mpc_horizon + 1))
        return total + tail

    scores = jax.vmap(rollout)(top)
    scores = jnp.where(allowed[top], scores, -jnp.inf)
    slot = lowest_argmax(scores, top)
    per_slot = jnp.full(acts.shape[0], -jnp.inf).at[top].set(scores)
    return PlanOut(slot=slot, root=root, score=per_slot)


# ---------------------------------------------------------------------------------------------
# Parametric-WM-MCTS
# ---------------------------------------------------------------------------------------------

def mcts_prior_and_value(outs: BackboneOut, amask: jax.Array,
                         params: ParametricConfig) -> tuple[jax.Array, jax.Array]:
    """`([A] prior logits, [] value)` of a node: `Ĵ_K / T` masked to the candidates predicted valid
    (to the real ones if none is), and `max_a Ĵ_K` over the real candidates."""
    valid = amask & predicted_valid(outs)
    allowed = jnp.where(jnp.any(valid), valid, amask)
    logits = jnp.where(allowed, outs.value / params.mcts_prior_temperature, MASKED_LOGIT)
    return logits.astype(jnp.float32), max_value(outs, amask)


def mcts_search(model: Callable, bench: Bench, key: jax.Array, g_obs: Graph,
                max_depth: jax.Array, cfg: C.GilpConfig = C.GilpConfig(),
                params: ParametricConfig = ParametricConfig(), sizes: Sizes = None
                ) -> tuple[PlanOut, mctx.Tree]:
    """`mcts_plan` that also returns mctx's search tree (batch of one)."""
    gamma = cfg.gamma
    n_nodes, n_actions = sizes or (None, None)
    score = lambda graph, acts: score_candidates(model, graph, acts, n_nodes)  # noqa: E731
    acts, amask = planning_candidates(bench, g_obs, n_actions)
    root_outs = score(g_obs, acts)
    prior, value = mcts_prior_and_value(root_outs, amask, params)
    batch = lambda x: x[None]  # noqa: E731  mctx is batch-first: a batch of one tree
    root = mctx.RootFnOutput(prior_logits=batch(prior), value=batch(value),
                             embedding=jax.tree_util.tree_map(batch, (g_obs, root_outs)))

    def expand_one(slot, node):
        # The embedding carries the node's graph and the backbone on all of its candidates
        # (computed once when the node was expanded, for its prior and value).
        graph, outs = node
        acts_g, amask_g = planning_candidates(bench, graph, n_actions)
        out = take(outs, slot)
        real = amask_g[slot]
        child = common.select_graph(real, imagine(bench, graph, acts_g[slot], out), graph)
        reward = jnp.where(real, out.reward, INVALID_REWARD)
        discount = gamma * (1.0 - jax.nn.sigmoid(out.done_logit))
        child_outs = score(child, acts_g)
        child_prior, child_value = mcts_prior_and_value(child_outs, amask_g, params)
        return (reward.astype(jnp.float32), discount.astype(jnp.float32), child_prior,
                child_value.astype(jnp.float32)), (child, child_outs)

    def recurrent_fn(_params, _key, action, embedding):
        (reward, discount, child_prior, child_value), child = jax.vmap(expand_one)(action,
                                                                                  embedding)
        return mctx.RecurrentFnOutput(reward=reward, discount=discount, prior_logits=child_prior,
                                      value=child_value), child

    depth = jnp.clip(max_depth, 1, params.mcts_max_depth)
    policy = mctx.muzero_policy(
        params=(), rng_key=key, root=root, recurrent_fn=recurrent_fn,
        num_simulations=params.mcts_simulations, invalid_actions=batch(~amask),
        max_depth=depth, pb_c_init=params.mcts_pb_c_init,
        dirichlet_fraction=params.mcts_dirichlet_fraction)
    visits = policy.search_tree.summary().visit_counts[0]
    slot = jnp.argmax(jnp.where(amask, visits, -1)).astype(jnp.int32)
    return PlanOut(slot=slot, root=root_outs, score=visits.astype(jnp.float32)), policy.search_tree


def mcts_plan(model: Callable, bench: Bench, key: jax.Array, g_obs: Graph, max_depth: jax.Array,
              cfg: C.GilpConfig = C.GilpConfig(),
              params: ParametricConfig = ParametricConfig(), sizes: Sizes = None) -> PlanOut:
    """MuZero-style search over backbone transitions for one observed state (spec §4.4).

    Args:
      model: the backbone.
      bench: the benchmark.
      key: agent-side PRNG key, consumed by the search (tie-break noise).
      g_obs: one observed graph (the root embedding).
      max_depth: `[]` int depth cap of this search, `min(6, B − t)` (clipped to >= 1 here).
      cfg, params, sizes: as in `mpc_plan`.
    Returns:
      `PlanOut`; `slot` is the most-visited root slot and `score` the root visit counts.
    """
    return mcts_search(model, bench, key, g_obs, max_depth, cfg, params, sizes)[0]


def make_planner(method: str, bench: Bench, cfg: C.GilpConfig = C.GilpConfig(),
                 params: ParametricConfig = ParametricConfig(), sizes: Sizes = None) -> Callable:
    """`plan(model, key, g_obs, remaining) -> PlanOut` for one state, either method.

    `key` is the agent key (MPC ignores it) and `remaining = B − t` the steps left in the budget
    (MCTS caps its depth with it).
    """
    method = canonical_method(method)
    if method == MPC:
        return lambda model, key, g_obs, remaining: mpc_plan(model, bench, g_obs, cfg, params,
                                                             sizes)
    return lambda model, key, g_obs, remaining: mcts_plan(model, bench, key, g_obs, remaining,
                                                          cfg, params, sizes)


GRAPH_FIELDS = ("status", "ntype", "goal", "attr", "etype", "anc", "hidden", "nmask", "t", "budget",
                "horizon")


@functools.lru_cache(maxsize=None)
def _candidates_batch(bench: Bench) -> Callable:
    return jax.jit(jax.vmap(bench.candidates))


def _round_up(value: int, multiple: int, cap: int) -> int:
    return min(cap, max(multiple, -(-value // multiple) * multiple))


def planning_sizes(bench: Bench, tasks: dict) -> tuple[int, int]:
    """Static `(n_nodes, n_actions)` slot cuts that cover every real node and candidate of the
    given tasks (host-side; `tasks` are stacked arrays `[T, ...]`), rounded up to multiples of 4
    and 8 so that similar task sets share a compiled planner."""
    nmask = np.asarray(tasks["nmask"], bool)
    last_node = int(np.max(np.nonzero(nmask.any(0))[0], initial=0)) + 1
    graphs = {name: np.asarray(tasks[name]) for name in GRAPH_FIELDS}
    _, amask = _candidates_batch(bench)(graph_from_np(graphs))
    amask = np.asarray(amask, bool)
    last_action = int(np.max(np.nonzero(amask.any(0))[0], initial=0)) + 1
    return _round_up(last_node, 4, C.N_MAX), _round_up(last_action, 8, C.A_MAX)


__all__ = ["INVALID_REWARD", "MCTS", "METHODS", "MPC", "ParametricConfig", "PlanOut",
           "canonical_method", "greedy_slot", "imagine", "make_planner", "max_value",
           "mcts_plan", "mcts_prior_and_value", "mcts_search", "mpc_plan", "planning_candidates",
           "planning_sizes", "predicted_valid",
           "resourcealloc_rewire", "score_candidates", "take"]
