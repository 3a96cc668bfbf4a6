"""The behavioural LLM simulator's state and step (docs/gilp/spec.md §5.2, §4.6, §6.1, §8).

`sim_step(keys, state, method, params, model, bench, cfg) -> (state, StepRecord)` is one pure
step of one episode: agent-side events 1-4 (parse, choice, imagined delta, Phases 3-4 for GILP
variants), then the environment step with the common-random-number key, the belief update,
tokens and confidence (events 5-7). The run loop vmaps it over episodes and scans it over B_MAX
steps; a finished episode's step is a no-op (state unchanged, `active = False`).

Information flow (no leak): the agent's choice and expectation model read only the agent's view
`observe(G̃)` (`behaviour.choice`); Phase 1 reads `observe(G_t)`. Only the environment step and the
logged ground truth (support, ρ*, outcome flags) read the true graph.

Imagined deltas are `[N]` int8 claim vectors: claim[v] is the status the reply claims for node v,
-1 for no claim; each claimed node is one atom (at most one atom per node), so a fixed `[N]` array
holds any atom set without a separate count.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from bsjax.gilp import config
from bsjax.gilp.behaviour import choice
from bsjax.gilp.behaviour.records import AgentOutcome, StepRecord
from bsjax.gilp.envs import common
from bsjax.gilp.envs.common import Bench
from bsjax.gilp.methods import MethodConfig, MethodFlags, method_flags
from bsjax.gilp.planners import gate
from bsjax.gilp.planners.imagination import planning_candidates
from bsjax.gilp.planners.skeleton import Phase1, backbone_claims, score_candidates
from bsjax.gilp.types import Graph

HISTORY_WINDOW = 3  # W: lines in the prompt's "Recent Steps" block (spec §5.1)
NOOP = (-1, -1, -1)
CALL_DRAFT, CALL_REPARSE, CALL_CORRECT, CALL_RISK = range(4)


class StepKeys(NamedTuple):
    """The two keys of one step: `env` (common random numbers, `keys.env_key`) and `agent`
    (`keys.agent_key`). Both are consumed."""

    env: jax.Array
    agent: jax.Array


@chex.dataclass(frozen=True)
class SimState:
    """One simulated episode between steps.

    Attributes:
      g: the true graph `G_t` (its `t` counts executed steps; `budget` is B).
      belief: `[N]` int8 statuses the agent believes (padded nodes PENDING).
      alive: `[]` bool the episode has not ended.
      history: `[]` int32 lines in the prompt's Recent Steps block (≤ W = 3).
      success, dead_end: `[]` bool how the episode ended.
      calls, tokens, corrections, risk_calls: `[]` int32 running totals.
    """

    g: Graph
    belief: chex.Array
    alive: chex.Array
    history: chex.Array
    success: chex.Array
    dead_end: chex.Array
    calls: chex.Array
    tokens: chex.Array
    corrections: chex.Array
    risk_calls: chex.Array


def init_state(bench: Bench, g0: Graph) -> SimState:
    """The state before step 0: belief = the true initial statuses."""
    zero = jnp.int32(0)
    alive = ~common.goals_done(g0) & (bench.dstar(g0) < config.UNSOLV)
    return SimState(g=g0, belief=g0.status.astype(jnp.int8), alive=alive, history=zero,
                    success=common.goals_done(g0), dead_end=jnp.bool_(False), calls=zero,
                    tokens=zero, corrections=zero, risk_calls=zero)


_U_SCALARS = 10  # agent_phase's scalar uniforms: 0-1 parse, 2-3 confidence, 5-7 gates, 9 risk


def _normal(u1: jax.Array, u2: jax.Array) -> jax.Array:
    """A standard normal from two uniforms in (0, 1] (Box-Muller)."""
    return jnp.sqrt(-2.0 * jnp.log(u1)) * jnp.cos(2.0 * jnp.pi * u2)


def hallucinated(claim: jax.Array, supp: jax.Array) -> jax.Array:
    """`[N]` bool: claimed statuses outside the true support `supp [N, 5]`."""
    code = jnp.clip(claim.astype(jnp.int32), 0, config.N_STATUS - 1)
    inside = jnp.take_along_axis(supp, code[:, None], axis=1)[:, 0]
    return (claim >= 0) & ~inside


def _n_atoms(claim: jax.Array) -> jax.Array:
    return jnp.sum(claim >= 0).astype(jnp.int32)


def _nan() -> jax.Array:
    return jnp.float32(jnp.nan)


def as_flags(method: MethodConfig | MethodFlags) -> MethodFlags:
    """A method's traced flags (a `MethodConfig` is converted; flags pass through)."""
    return method_flags(method) if isinstance(method, MethodConfig) else method


def agent_phase(key: jax.Array, g: Graph, belief: jax.Array, method: MethodConfig | MethodFlags,
                params, model, bench: Bench, cfg: config.GilpConfig,
                sizes: tuple[int, int] | None = None) -> AgentOutcome:
    """Events 1-4 and 7 on the agent side (`AgentOutcome`). Reads only `observe(G̃)` and
    Phase 1 on `observe(G)`.

    With a model, Phase 1 and every gate are computed and masked by the method's flags, so the
    flags may be traced (one compile for all methods); without one (`model=None`) only the
    gateless, skeleton-free path is traced. `sizes` is an optional static slot cut
    (`imagination.planning_sizes`): candidates beyond its n_actions slots (all padding) are
    dropped and the backbone runs on its n_nodes node slots.
    """
    method = as_flags(method)
    k_choose, k_draft, k_fresh, k_u = jax.random.split(key, 4)
    g_obs = common.observe(g)
    view = choice.belief_view(g, belief)
    acts, amask = planning_candidates(bench, g_obs, sizes[1] if sizes else None)
    ph1: Phase1 | None = (score_candidates(model, bench, g_obs, cfg.skeleton_k, sizes)
                          if model is not None else None)
    j_tilde = choice.belief_values(bench, view, acts, amask, cfg)
    k = g.t + 1
    live_count = jnp.sum((belief != g.status) & g.nmask)
    if ph1 is not None:
        grounded_all = backbone_claims(ph1, g.status)
        grounded_all = jnp.where(grounded_all == belief[None, :], -1, grounded_all).astype(jnp.int8)
    else:
        grounded_all = jnp.full((acts.shape[0], g.status.shape[0]), -1, jnp.int8)
    in_skel = ph1.in_skeleton if ph1 is not None else jnp.zeros(acts.shape[0], bool)

    def imagine(k_im, index):
        return choice.imagine(k_im, bench, view, acts[index], in_skel[index], grounded_all[index],
                              k, live_count, method, params)

    # One block of uniforms for every scalar decision (each PRNG call site inlines a hash).
    # Always A_MAX candidate draws (sliced), so a slot cut never changes the random stream.
    u = jax.random.uniform(k_u, (_U_SCALARS + config.A_MAX,), minval=1e-12)
    u = u[:_U_SCALARS + acts.shape[0]]
    unif = lambda i: u[i]  # noqa: E731
    # Event 1: parse of the draft call (and GILP's re-prompt).
    fail1 = unif(0) < params.p_parse
    gated = jnp.asarray(method.gated, bool) & (ph1 is not None)
    reprompt = fail1 & gated
    fail2 = reprompt & (unif(1) < params.p_parse)
    parsed = ~fail1 | (reprompt & ~fail2)
    # Events 2-3: the draft.
    index, slip = choice.choose(k_choose, bench, view, acts, amask, j_tilde, ph1, method, params)
    draft, event = imagine(k_draft, index)
    out = dict(acts=acts, amask=amask, index=index, draft_index=index, draft=draft,
               revised=draft, committed=draft, event=event, slip=slip, parsed=parsed,
               parse_fail=fail1, reprompt=reprompt, fail2=fail2,
               corrected=jnp.bool_(False), corr_fail=jnp.bool_(False),
               risk_fired=jnp.bool_(False), risk_empty=jnp.bool_(False),
               risk_fail=jnp.bool_(False), cons=_nan(), cons_after=_nan(), rho_hat=_nan(),
               rho_eff=_nan(), n_rows=jnp.int32(0), live_count=live_count.astype(jnp.int32))
    out["confidence"] = jnp.clip(params.conf_base - params.conf_halluc * event
                                 + params.conf_sd * _normal(u[2], u[3]), 0.0, 1.0)
    if ph1 is None:
        return AgentOutcome(**out)
    out["n_rows"] = jnp.where(method.skeleton, jnp.sum(ph1.in_skeleton), 0).astype(jnp.int32)
    cons = gate.jaccard(draft >= 0, ph1.changed[index])
    with_backbone = jnp.asarray(method.backbone, bool)
    out["cons"] = jnp.where(with_backbone, cons, jnp.nan)
    out["rho_hat"] = out["rho_eff"] = jnp.where(with_backbone, ph1.risk[index], jnp.nan)
    # Phase 3: consistency gate (`planners.gate`, as the real-LLM loop) and at most one
    # correction call.
    phase3 = gate.consistency_gate(method, cons, reprompt.astype(jnp.int32))
    issue = phase3.issue & parsed & gated
    corr_fail = issue & (unif(5) < params.p_parse)
    align = issue & ~corr_fail & (unif(6) < params.beta)
    alt, alt_ok = choice.best(j_tilde, ph1.in_skeleton & (ph1.p_valid >= 0.5))
    revised = jnp.where((ph1.p_valid[index] >= 0.5) | ~alt_ok, index, alt)
    index1 = jnp.where(align, revised, index)
    claim1 = jnp.where(align, grounded_all[revised], draft).astype(jnp.int8)
    cons_after = gate.jaccard(claim1 >= 0, ph1.changed[index1])
    rho_hat = ph1.risk[index1]
    # Phase 4: risk gate (the method's k: `run` sets it, as the real-LLM loop passes its own).
    phase4 = gate.risk_gate(method, phase3._replace(issue=issue), cons_after, rho_hat,
                            ph1.value, ph1.risk, ph1.p_valid, amask, index1, k=cfg.skeleton_k)
    rho_eff, low = phase4.rho_eff, phase4.subset
    high = gated & parsed & phase4.high
    fired = high & jnp.any(low)
    risk_fail = fired & (unif(7) < params.p_parse)
    best_low, _ = choice.best(j_tilde, low)
    uniform_low, _ = choice.best(u[_U_SCALARS:], low)          # a uniform member of L_t
    pick = jnp.where(unif(9) < params.beta_risk, best_low, uniform_low)
    fallback, _ = choice.best(ph1.value, low)
    index2 = jnp.where(risk_fail, fallback, pick).astype(jnp.int32)
    fresh, _ = imagine(k_fresh, index2)
    fresh = jnp.where(risk_fail, -1, fresh).astype(jnp.int8)
    committed = jnp.where(fired, fresh, claim1).astype(jnp.int8)
    keep = lambda gated_value, plain: jnp.where(gated, gated_value, plain)  # noqa: E731
    out.update(index=keep(jnp.where(fired, index2, index1), index).astype(jnp.int32),
               revised=keep(claim1, draft).astype(jnp.int8),
               committed=keep(committed, draft).astype(jnp.int8), corrected=issue,
               corr_fail=corr_fail, cons_after=jnp.where(issue, cons_after, jnp.nan),
               rho_hat=keep(rho_hat, out["rho_hat"]), rho_eff=keep(rho_eff, out["rho_eff"]),
               risk_fired=fired, risk_empty=high & ~jnp.any(low), risk_fail=risk_fail)
    return AgentOutcome(**out)


def _tokens(key: jax.Array, g: Graph, state: SimState, agent: AgentOutcome,
            params) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Event 6: `(calls, tok_in, tok_out)` summed over the step's calls."""
    made = jnp.stack([jnp.bool_(True), agent.reprompt, agent.corrected, agent.risk_fired])
    a0 = jnp.stack([params.tok_a0_draft, params.tok_a0_reparse, params.tok_a0_correct,
                    params.tok_a0_risk])
    n_real = jnp.sum(g.nmask).astype(jnp.float32)
    n_cands = jnp.sum(agent.amask).astype(jnp.float32)
    t_in = (a0 + params.tok_a_n * n_real + params.tok_a_a * n_cands
            + params.tok_a_b * agent.n_rows.astype(jnp.float32)
            + params.tok_a_w * state.history.astype(jnp.float32))
    draft_atoms = _n_atoms(agent.draft)
    atoms = jnp.stack([
        jnp.where(agent.parse_fail, 0, draft_atoms),
        jnp.where(agent.fail2, 0, draft_atoms),
        jnp.where(agent.corr_fail, 0, _n_atoms(agent.revised)),
        _n_atoms(agent.committed),
    ]).astype(jnp.float32)
    noise = params.tok_out_sd * jax.random.normal(key, (4,))
    t_out = jnp.maximum(20.0, jnp.round(params.tok_out_base + params.tok_out_atom * atoms + noise))
    t_in = jnp.round(t_in)
    return (jnp.sum(made).astype(jnp.int32), jnp.sum(jnp.where(made, t_in, 0)).astype(jnp.int32),
            jnp.sum(jnp.where(made, t_out, 0)).astype(jnp.int32))


def sim_step(keys: StepKeys, state: SimState, method: MethodConfig | MethodFlags, params, model,
             bench: Bench, cfg: config.GilpConfig = config.GilpConfig(),
             sizes: tuple[int, int] | None = None) -> tuple[SimState, StepRecord]:
    """One simulated step of one episode (spec §5.2 events 1-7, §4.6). Both keys are consumed.

    Args:
      keys: `StepKeys(env, agent)` of this step (`bsjax.gilp.keys.env_key` / `agent_key`).
      state: the episode's `SimState`.
      method: an LLM method or the Oracle reference as a static `MethodConfig`, or an LLM
        method's `MethodFlags` (traced: one compile serves every LLM method).
      params: `SimParams` (a pytree; traced).
      model: the backbone (`eqx.Module`), or None for methods without one.
      bench: the benchmark's rules (static).
      cfg: value horizon, discount and skeleton size (static).
      sizes: optional static slot cut of the agent's candidates and the backbone
        (`agent_phase`); decisions equal the uncut ones up to float rounding.
    Returns:
      `(next state, StepRecord)`; a finished episode's state is returned unchanged with
      `record.active = False`.
    """
    oracle = isinstance(method, MethodConfig) and method.oracle
    if isinstance(method, MethodConfig) and method.parametric is not None:
        raise ValueError(f"{method.name} is a parametric planner (bsjax.gilp.planners.parametric)")
    g, belief = state.g, state.belief
    n = g.status.shape[0]
    k_agent, k_tok, k_belief = jax.random.split(keys.agent, 3)
    none = jnp.full((n,), -1, jnp.int8)
    if oracle:
        action = common.oracle_action(bench, g)
        agent = AgentOutcome.oracle(n)
        calls = tok_in = tok_out = jnp.int32(0)
        has_delta = False
    else:
        flags = as_flags(method)
        agent = agent_phase(k_agent, g, belief, flags, params, model, bench, cfg, sizes)
        action = jnp.where(agent.parsed, agent.acts[agent.index], jnp.asarray(NOOP))
        calls, tok_in, tok_out = _tokens(k_tok, g, state, agent, params)
        has_delta = flags.delta
    action = action.astype(jnp.int32)
    parsed = agent.parsed
    draft = jnp.where(parsed, agent.draft, -1).astype(jnp.int8)
    committed = jnp.where(parsed, agent.committed, -1).astype(jnp.int8)

    # Event 5: the true environment step and the ground truth for the log.
    live_before = (belief != g.status) & g.nmask
    g_next, info = common.step(bench, keys.env, g, action)
    supp = common.support(bench, g, action)
    g_succ, _, _ = bench.branches(g, action)
    miss = ((committed >= 0) & (committed == g_succ.status) & info.failed
            & (committed != g_next.status))
    bad = ~info.valid | info.failed | (info.dstar_after > info.dstar_before)

    # Belief update: committed atoms overwrite; stale (live false) beliefs persist; every other
    # node takes its true new status. Then feedback on the action's own nodes and recovery.
    truth = g_next.status
    new_belief = jnp.where(committed >= 0, committed, jnp.where(live_before, belief, truth))
    ids = jnp.arange(n)
    is_arg = ((ids == action[1]) | ((ids == action[2]) & (action[2] >= 0))) & parsed
    u_belief = jax.random.uniform(k_belief, (1 + n,))
    feedback = u_belief[0] < params.q_fb
    new_belief = jnp.where(feedback & is_arg, truth, new_belief)
    q_rec = jnp.minimum(1.0, params.q_rec + jnp.where(has_delta, params.kappa_rec, 0.0))
    recover = u_belief[1:] < q_rec
    new_belief = jnp.where(recover | ~g.nmask, truth, new_belief).astype(jnp.int8)
    if oracle:
        new_belief = truth.astype(jnp.int8)

    success = info.done
    dead_end = (info.dstar_after >= config.UNSOLV) & ~success
    done = success | dead_end | (g_next.t >= g.budget)
    stepped = SimState(
        g=g_next, belief=new_belief, alive=~done,
        history=jnp.minimum(state.history + 1, HISTORY_WINDOW).astype(jnp.int32),
        success=success, dead_end=dead_end, calls=state.calls + calls,
        tokens=state.tokens + tok_in + tok_out,
        corrections=state.corrections + agent.corrected.astype(jnp.int32),
        risk_calls=state.risk_calls + agent.risk_fired.astype(jnp.int32))
    alive = state.alive
    new_state = jax.tree_util.tree_map(lambda a, b: jnp.where(alive, a, b), stepped, state)
    no_belief = oracle
    gated_float = lambda value: jnp.where(parsed, jnp.asarray(value, jnp.float32), jnp.nan)  # noqa: E731
    record = StepRecord(
        active=alive, t=g.t.astype(jnp.int32), action=action, noop=~parsed, valid=info.valid,
        calls=calls, tok_in=tok_in, tok_out=tok_out, draft=draft, committed=committed,
        halluc_draft=hallucinated(draft, supp), halluc_committed=hallucinated(committed, supp),
        stochastic_miss=miss, cons=gated_float(agent.cons),
        cons_after=gated_float(agent.cons_after), corrected=agent.corrected,
        rho_hat=gated_float(agent.rho_hat),
        rho_eff=gated_float(agent.rho_eff), risk_fired=agent.risk_fired,
        risk_gate_empty=agent.risk_empty,
        rho_star=common.rho_star(bench, g, action).astype(jnp.float32), bad_outcome=bad,
        live_false=jnp.int32(-1) if no_belief else jnp.sum(live_before).astype(jnp.int32),
        live=none if no_belief else jnp.where(live_before, belief, -1).astype(jnp.int8),
        parse_fail=agent.parse_fail | agent.fail2 | agent.corr_fail | agent.risk_fail,
        done=done, success=success, dead_end=dead_end, halluc_event=agent.event,
        slip=agent.slip, confidence=jnp.asarray(agent.confidence, jnp.float32))
    return new_state, record
