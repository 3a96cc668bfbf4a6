"""The parametric world-model planners (docs/gilp/spec.md §4.3, §4.4): Parametric-WM-MPC and
Parametric-WM-MCTS (`mctx.muzero_policy`), planning on the backbone's imagined successors
(`planners.imagination`).

Both planners read only the observed graph (`envs.common.observe`) and the backbone. Everything
is pure, written for ONE state, and has static shapes, so the episode runner
(`planners.parametric_episodes`) vmaps a planner over episodes inside one `lax.scan`.

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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import mctx

from bsjax.gilp import config
from bsjax.gilp.backbones.layers import BackboneOut
from bsjax.gilp.config import ParametricConfig
from bsjax.gilp.envs import common
from bsjax.gilp.envs.common import Bench
from bsjax.gilp.planners.imagination import (
    Sizes,
    greedy_slot,
    imagine,
    lowest_argmax,
    max_value,
    planning_candidates,
    predicted_valid,
    score_candidates,
    take,
)
from bsjax.gilp.types import Graph

MPC = "Parametric-WM-MPC"
MCTS = "Parametric-WM-MCTS"
METHODS = (MPC, MCTS)
_ALIASES = {"mpc": MPC, "mcts": MCTS, MPC.lower(): MPC, MCTS.lower(): MCTS}

# A masked prior logit (softmax gives exactly 0 next to any real logit).
MASKED_LOGIT = -1e9
# Reward of an invalid (no-op) step, spec §2.6.
INVALID_REWARD = -0.05


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
# Parametric-WM-MPC
# ---------------------------------------------------------------------------------------------

def mpc_plan(model: Callable, bench: Bench, g_obs: Graph, cfg: config.GilpConfig = config.GilpConfig(),
             params: ParametricConfig = ParametricConfig(), sizes: Sizes = None) -> PlanOut:
    """Receding-horizon MPC inside the backbone for one observed state (spec §4.3).

    Args:
      model, bench, g_obs: the backbone, the benchmark and one observed graph.
      cfg, params: static settings (γ; M, K).
      sizes: optional static `(n_nodes, n_actions)` cut of node and candidate slots that still
        covers every real node and candidate (`imagination.planning_sizes`); None = full N_MAX / A_MAX.
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
                max_depth: jax.Array, cfg: config.GilpConfig = config.GilpConfig(),
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
              cfg: config.GilpConfig = config.GilpConfig(),
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


def make_planner(method: str, bench: Bench, cfg: config.GilpConfig = config.GilpConfig(),
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


__all__ = ["INVALID_REWARD", "MASKED_LOGIT", "MCTS", "METHODS", "MPC",
           "PlanOut", "canonical_method", "make_planner", "mcts_plan", "mcts_prior_and_value",
           "mcts_search", "mpc_plan"]
