"""Hallucination events of the simulated agent (docs/gilp/spec.md §5.2 event 3.3).

An imagined delta is a claim vector `claim [N] int8`: the status the agent claims for each node
after the action, or -1 for no claim (one atom per claimed node). A hallucination event adds
`n_h ∈ {1, 2}` atoms, each of one type drawn from `π = (π_fc, π_we, π_dep, π_val)`:

- fc, false completion: a non-target node adjacent to the target (else any real non-target node)
  whose imagined status is not COMPLETED is claimed COMPLETED;
- we, wrong entity: the target's atom moves to a neighbour (else to id ±1) and the target's own
  atom is removed;
- dep, false dependency cascade: 1-3 (uniform) out-neighbours of the target (else any
  neighbours, else any real non-target nodes) are claimed ACTIVE or COMPLETED;
- val, wrong value: the target's claimed status is replaced by another status.

bsjax choices: the *target* is the action's second argument when it has one (the job of
`assign(r, j)`), else its first; "adjacent" follows edges of every type in either direction;
a claim never equals the agent's current belief (such an atom would be a no-op claim, dropped by
the parser), so a type with nothing to act on (we/val without a target atom, or no eligible node)
adds no atom. Every function is written for one episode and reads only the agent's view.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bsjax.gilp import config
from bsjax.gilp.types import Graph

FC, WE, DEP, VAL = 0, 1, 2, 3
TYPE_NAMES = ("fc", "we", "dep", "val")


def p_halluc(k: jax.Array, live_count: jax.Array, has_delta, params) -> jax.Array:
    """`p_h = clip((h0 + h1·min(k−1, 9)/9 + h2·|F_t|)·(1 − κ_δ·[delta field]), 0, 0.95)`.

    Args:
      k: `[]` 1-based step index.
      live_count: `[]` number of live false atoms |F_t| at the step's start.
      has_delta: `[]` bool the skeleton shows the predicted delta (may be traced).
      params: `SimParams`.
    """
    ramp = jnp.minimum(jnp.asarray(k, jnp.float32) - 1.0, 9.0) / 9.0
    base = params.h0 + params.h1 * ramp + params.h2 * jnp.asarray(live_count, jnp.float32)
    scale = jnp.where(jnp.asarray(has_delta, bool), 1.0 - params.kappa_delta, 1.0)
    return jnp.clip(base * scale, 0.0, 0.95)


def target_node(action: jax.Array) -> jax.Array:
    """`[]` int32 the action's target: arg2 when present, else arg1."""
    return jnp.where(action[2] >= 0, action[2], action[1]).astype(jnp.int32)


# Uniform draws one atom consumes (one `jax.random.uniform` block per event keeps the compiled
# step small: every PRNG call site inlines a threefry hash).
N = config.N_MAX
_FC = slice(0, N)                          # fc: pick a node
_WE = slice(N, 2 * N)                      # we: pick a neighbour
_WE_SIGN = 2 * N                           # we: try id + 1 or id − 1 first
_DEP_ORDER = slice(2 * N + 1, 3 * N + 1)   # dep: which out-neighbours
_DEP_STATUS = slice(3 * N + 1, 4 * N + 1)  # dep: ACTIVE or COMPLETED per node
_DEP_COUNT = 4 * N + 1                     # dep: 1-3 nodes
_VAL = slice(4 * N + 2, 4 * N + 2 + config.N_STATUS)  # val: the new status
ATOM_DRAWS = 4 * N + 2 + config.N_STATUS
EVENT_DRAWS = 4 + 2 * ATOM_DRAWS           # event, two-atom, 2 types, then two atoms' draws


def _pick(u: jax.Array, eligible: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A uniformly random eligible slot (argmax of iid uniforms) and whether any is eligible."""
    index = jnp.argmax(jnp.where(eligible, u, -1.0)).astype(jnp.int32)
    return index, jnp.any(eligible)


def _neighbours(view: Graph, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`(any-direction neighbours [N], out-neighbours [N])` of node v, real nodes other than v."""
    ids = jnp.arange(view.status.shape[0])
    other = view.nmask & (ids != v)
    out = (view.etype[v, :] >= 0) & other
    into = (view.etype[:, v] >= 0) & other
    return out | into, out


def _set(claim: jax.Array, v: jax.Array, status, belief: jax.Array, ok) -> jax.Array:
    """`claim` with node v claimed `status` where `ok` and the status differs from belief[v]."""
    ids = jnp.arange(claim.shape[0])
    write = ok & (ids == v) & (status != belief[v])
    return jnp.where(write, jnp.asarray(status, jnp.int8), claim).astype(jnp.int8)


def false_completion(u, claim, belief, view, target) -> jax.Array:
    """fc: a neighbour of the target (else any real non-target node) not imagined COMPLETED is
    claimed COMPLETED. `u`: the atom's `[ATOM_DRAWS]` uniforms."""
    ids = jnp.arange(claim.shape[0])
    imagined = jnp.where(claim >= 0, claim, belief)
    near, _ = _neighbours(view, target)
    open_ = view.nmask & (ids != target) & (imagined != config.COMPLETED)
    eligible = jnp.where(jnp.any(near & open_), near & open_, open_)
    v, ok = _pick(u[_FC], eligible)
    return _set(claim, v, config.COMPLETED, belief, ok)


def wrong_entity(u, claim, belief, view, target) -> jax.Array:
    """we: the target's atom moves to a neighbour (else to id ±1) whose belief differs from the
    moved status; the target's own atom is removed."""
    n = claim.shape[0]
    ids = jnp.arange(n)
    moved = claim[target]
    has_atom = moved >= 0
    near, _ = _neighbours(view, target)
    takes = view.nmask & (ids != target) & (belief != moved)
    v_near, ok_near = _pick(u[_WE], near & takes)
    first = jnp.where(u[_WE_SIGN] < 0.5, 1, -1)
    plus, minus = target + first, target - first
    real = lambda v: (v >= 0) & (v < n) & takes[jnp.clip(v, 0, n - 1)]  # noqa: E731
    v_id = jnp.where(real(plus), plus, minus)
    dest = jnp.where(ok_near, v_near, jnp.clip(v_id, 0, n - 1))
    ok = has_atom & (ok_near | real(plus) | real(minus))
    out = jnp.where(ok & (ids == target), -1, claim).astype(jnp.int8)
    return _set(out, dest, moved, belief, ok)


def dependency_cascade(u, claim, belief, view, target) -> jax.Array:
    """dep: 1-3 out-neighbours of the target (fallbacks: neighbours, any real non-target node)
    are each claimed ACTIVE or COMPLETED (uniform, never their current imagined status)."""
    n = claim.shape[0]
    ids = jnp.arange(n)
    near, out = _neighbours(view, target)
    anyone = view.nmask & (ids != target)
    eligible = jnp.where(jnp.any(out), out, jnp.where(jnp.any(near), near, anyone))
    count = 1 + jnp.minimum(jnp.floor(u[_DEP_COUNT] * 3.0), 2.0).astype(jnp.int32)
    order = u[_DEP_ORDER]
    # Rank among eligible nodes by their uniform: the `count` lowest are chosen.
    rank = jnp.sum(eligible[None, :] & ((order[None, :] < order[:, None])
                                        | ((order[None, :] == order[:, None])
                                           & (ids[None, :] < ids[:, None]))), axis=1)
    chosen = eligible & (rank < count)
    imagined = jnp.where(claim >= 0, claim, belief)
    draw = jnp.where(u[_DEP_STATUS] < 0.5, config.COMPLETED, config.ACTIVE)
    other = jnp.where(draw == config.COMPLETED, config.ACTIVE, config.COMPLETED)
    status = jnp.where(draw == imagined, other, draw)
    write = chosen & (status != belief)
    return jnp.where(write, status, claim).astype(jnp.int8)


def wrong_value(u, claim, belief, view, target) -> jax.Array:
    """val: the target's claimed status becomes another status (uniform over the statuses that
    are neither the claim nor the belief); no-op without a target atom."""
    del view
    current = claim[target]
    statuses = jnp.arange(config.N_STATUS)
    status, _ = _pick(u[_VAL], (statuses != current) & (statuses != belief[target]))
    return _set(claim, target, status, belief, current >= 0)


def add_atom(u: jax.Array, kind: jax.Array, claim: jax.Array, belief: jax.Array, view: Graph,
             target: jax.Array) -> jax.Array:
    """One hallucinated atom of type `kind` (FC, WE, DEP or VAL) added to `claim [N]`.

    Args:
      u: `[ATOM_DRAWS]` float32 iid uniforms (the atom's randomness).
    """
    options = jnp.stack([fn(u, claim, belief, view, target) for fn in
                         (false_completion, wrong_entity, dependency_cascade, wrong_value)])
    return options[kind]


def hallucinate(key: jax.Array, claim: jax.Array, belief: jax.Array, view: Graph,
                action: jax.Array, p_h: jax.Array, params) -> tuple[jax.Array, jax.Array]:
    """The hallucination event of one imagined delta. The key is consumed.

    Args:
      claim: `[N]` int8 imagined statuses (-1 = no claim) before the event.
      belief: `[N]` the agent's current belief.
      view: the agent's view (observed belief graph).
      action: `[3]` the action the delta is imagined for.
      p_h: `[]` event probability (`p_halluc`).
      params: `SimParams` (`p_two` and the type mix π).
    Returns:
      `(claim [N] int8, event [] bool)`.
    """
    return hallucinate_u(jax.random.uniform(key, (EVENT_DRAWS,)), claim, belief, view, action,
                         p_h, params)


def hallucinate_u(u: jax.Array, claim: jax.Array, belief: jax.Array, view: Graph,
                  action: jax.Array, p_h: jax.Array, params) -> tuple[jax.Array, jax.Array]:
    """`hallucinate` on pre-drawn uniforms `u [EVENT_DRAWS]`."""
    event = u[0] < p_h
    n_atoms = jnp.where(u[1] < params.p_two, 2, 1)
    pi = jnp.stack([params.pi_fc, params.pi_we, params.pi_dep, params.pi_val])
    cdf = jnp.cumsum(pi) / jnp.maximum(jnp.sum(pi), 1e-12)
    kinds = jnp.minimum(jnp.sum(u[2:4, None] >= cdf[None, :-1], axis=1), 3)   # inverse CDF
    per_atom = u[4:].reshape(2, ATOM_DRAWS)
    target = target_node(action)

    def one_atom(current, xs):  # a scan keeps one traced copy of the four types
        i, kind, u_atom = xs
        added = add_atom(u_atom, kind, current, belief, view, target)
        return jnp.where(event & (i < n_atoms), added, current).astype(jnp.int8), None

    out, _ = jax.lax.scan(one_atom, claim.astype(jnp.int8), (jnp.arange(2), kinds, per_atom))
    return out, event
