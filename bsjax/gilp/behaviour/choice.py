"""The simulated agent's action choice and imagined delta (docs/gilp/spec.md §5.2 events 2-3).

Everything here is agent-side: it reads only the agent's *view*, `observe(G̃)` (the true graph
with `status ← belief` and `hidden` zeroed), and the Phase-1 outputs, which the backbone computed
on `observe(G_t)`. The expectation model is the benchmark's own rules applied to that view (for
RepairFlow the rules then run on `infer_hidden`'s estimate; spec §2.5), with `oracle_obs_action`
and `d*_obs`. Functions are written for one episode; the caller vmaps.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bsjax.gilp import config
from bsjax.gilp.behaviour.hallucinate import EVENT_DRAWS, hallucinate_u, p_halluc
from bsjax.gilp.envs import common
from bsjax.gilp.envs.common import Bench
from bsjax.gilp.methods import MethodFlags
from bsjax.gilp.planners.skeleton import Phase1
from bsjax.gilp.types import Graph


def belief_view(g: Graph, belief: jax.Array) -> Graph:
    """The agent's view `observe(G̃)`: the true graph with statuses replaced by the belief and the
    hidden fields zeroed."""
    return common.observe(g.replace(status=belief.astype(jnp.int8)))


def competence(bench: Bench, params) -> jax.Array:
    """`c_b`: c_TG on TaskGraph, 0.90·c_TG (the `c_scale` parameter) on the other benchmarks."""
    return params.c_tg if bench.name == "taskgraph" else params.c_scale * params.c_tg


def belief_values(bench: Bench, view: Graph, acts: jax.Array, amask: jax.Array,
                  cfg: config.GilpConfig) -> jax.Array:
    """`[A]` float32 J̃(a): J_K of every candidate on the view (expectation model); -inf on padding."""
    return common.candidate_values(bench, view, acts, amask, cfg.value_horizon, cfg.gamma)


def best(scores: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`(index, any)`: the highest-scoring slot in `mask` (ties to the lower index)."""
    return jnp.argmax(jnp.where(mask, scores, -jnp.inf)).astype(jnp.int32), jnp.any(mask)


def index_of(acts: jax.Array, amask: jax.Array, action: jax.Array) -> jax.Array:
    """`[]` int32 the candidate slot holding `action` (0 if none does)."""
    hit = jnp.all(acts == action[None, :], axis=-1) & amask
    return jnp.argmax(hit).astype(jnp.int32)


def choose(key: jax.Array, bench: Bench, view: Graph, acts: jax.Array, amask: jax.Array,
           j_tilde: jax.Array, ph1: Phase1 | None, method: MethodFlags, params
           ) -> tuple[jax.Array, jax.Array]:
    """Event 2: semantic choice, slip and skeleton effects. The key is consumed.

    1. `a_sem = oracle_obs_action(G̃)`; kept w.p. c_b, else a slip sampled from
       `softmax(J̃/T_slip)` over the candidates.
    2. Skeleton effects in order (pull whenever a skeleton is shown, the others with their field):
       in-skeleton pull (η_in), value (η_value, slips only), validity (η_val), risk (η_risk).

    Returns:
      `(index [] int32 candidate slot, slip [] bool)`.
    """
    n_acts = acts.shape[0]
    # Always A_MAX draws (sliced to the candidate slots in use), so a slot cut never changes
    # the random stream.
    u = jax.random.uniform(key, (5 + config.A_MAX,), minval=1e-12)[:5 + n_acts]   # one PRNG call site
    semantic = index_of(acts, amask, common.oracle_obs_action(bench, view))
    slip = u[0] >= competence(bench, params)
    gumbel = -jnp.log(-jnp.log(u[5:]))                          # Gumbel-max = categorical
    slipped = jnp.argmax(jnp.where(amask, j_tilde / params.t_slip + gumbel, -jnp.inf))
    index = jnp.where(slip, slipped, semantic).astype(jnp.int32)
    if ph1 is None:
        return index, slip
    # Every effect is computed and masked by its (possibly traced) flag, so one compile serves
    # every method; the uniforms are the same draws whichever effects apply.
    skel = ph1.in_skeleton
    # In-skeleton pull (whenever a skeleton is shown).
    to, ok = best(j_tilde, skel)
    pull = method.skeleton & ~skel[index] & ok & (u[1] < params.eta_in)
    index = jnp.where(pull, to, index)
    top = ph1.rows[0]
    swap = method.value & slip & (top >= 0) & (u[2] < params.eta_value)
    index = jnp.where(swap, jnp.maximum(top, 0), index)
    to, ok = best(j_tilde, skel & (ph1.p_valid >= 0.5))
    swap = method.validity & (ph1.p_valid[index] < 0.5) & ok & (u[3] < params.eta_val)
    index = jnp.where(swap, to, index)
    to, ok = best(j_tilde, skel & (ph1.risk <= method.rho_th))
    swap = method.risk & (ph1.risk[index] > method.rho_th) & ok & (u[4] < params.eta_risk)
    index = jnp.where(swap, to, index)
    return index.astype(jnp.int32), slip


def claims_of(next_status: jax.Array, belief: jax.Array, nmask: jax.Array) -> jax.Array:
    """`[N]` int8 atoms as claims: `next_status` where it differs from the belief, else -1."""
    return jnp.where(nmask & (next_status != belief), next_status, -1).astype(jnp.int8)


def imagine(key: jax.Array, bench: Bench, view: Graph, action: jax.Array, in_skeleton: jax.Array,
            grounded: jax.Array, k: jax.Array, live_count: jax.Array, method: MethodFlags,
            params) -> tuple[jax.Array, jax.Array]:
    """Event 3: the imagined delta of one reply for `action`. The key is consumed.

    1. Base atoms: the changes of `modal(G̃, a)` relative to the belief (expectation model).
    2. Delta grounding: with the delta field and `a ∈ B_t`, w.p. η_ground the backbone's decoded
       atoms for `a` (`grounded`, already relative to the belief) replace them.
    3. A hallucination event with probability `p_h` (`hallucinate`).

    Args:
      action: `[3]` the action of the reply.
      in_skeleton: `[]` bool `a ∈ B_t`.
      grounded: `[N]` int8 the backbone's claims for `a` (ignored without the delta field).
      k: `[]` 1-based step index. live_count: `[]` |F_t|.
    Returns:
      `(claim [N] int8, halluc_event [] bool)`.
    """
    u = jax.random.uniform(key, (1 + EVENT_DRAWS,))   # one PRNG call site
    belief = view.status
    claim = claims_of(common.modal(bench, view, action).status, belief, view.nmask)
    ground = method.delta & in_skeleton & (u[0] < params.eta_ground)
    claim = jnp.where(ground, grounded, claim).astype(jnp.int8)
    p_h = p_halluc(k, live_count, method.delta, params)
    return hallucinate_u(u[1:], claim, belief, view, action, p_h, params)
