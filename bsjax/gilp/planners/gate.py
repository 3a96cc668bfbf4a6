"""GILP's pure gate functions (docs/gilp/spec.md §2.6, §4.5–§4.7).

Phase 1 picks the skeleton rows `B_t` and the affected entities `Û`; Phase 3 compares change-sets
with a Jaccard index and sorts it into three bands; Phase 4 builds the low-risk subset `L_t`. The
numeric functions are written with `jnp`, work for one step (vmap them over episodes) and accept
numpy inputs; `discrepancies` is host-side (it returns prompt lines).

Ties in every ranking go to the lower canonical candidate index.
"""

from __future__ import annotations

import functools
import types
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config

ACCEPT, MIDDLE, CORRECT = 0, 1, 2
# Jaccard values are ratios of integers <= N_MAX, so a tolerance this small only absorbs
# rounding and never merges two distinct values: cons = 0.30 and 0.70 sit exactly on a boundary.
_EPS = 1e-6


@jax.jit
def jaccard(s_mask, s_hat_mask) -> jax.Array:
    """Consistency `|S ∩ Ŝ| / |S ∪ Ŝ|` over the last axis; 1 when both sets are empty.

    Args:
      s_mask: `[..., N]` bool, the agent's change-set S.
      s_hat_mask: `[..., N]` bool, the backbone's change-set Ŝ.
    Returns:
      `[...]` float32 in [0, 1].
    """
    s, s_hat = jnp.asarray(s_mask, bool), jnp.asarray(s_hat_mask, bool)
    inter = jnp.sum(s & s_hat, axis=-1).astype(jnp.float32)
    union = jnp.sum(s | s_hat, axis=-1).astype(jnp.float32)
    return jnp.where(union == 0, 1.0, inter / jnp.maximum(union, 1.0))


def band(cons, tau_low: float = 0.30, tau_high: float = 0.70) -> jax.Array:
    """The gate band: 0 accept (cons ≥ τ_high), 1 middle (τ_low ≤ cons < τ_high), 2 correct.

    Boundaries are inclusive from above: cons = τ_low is MIDDLE and cons = τ_high is ACCEPT.
    """
    cons = jnp.asarray(cons, jnp.float32)
    return jnp.where(cons >= tau_high - _EPS, ACCEPT,
                     jnp.where(cons >= tau_low - _EPS, MIDDLE, CORRECT)).astype(jnp.int32)


def rho_eff(rho_hat, double) -> jax.Array:
    """ρ_eff = min(1, 2ρ̂) where `double` holds, else ρ̂ (shapes broadcast)."""
    rho_hat = jnp.asarray(rho_hat, jnp.float32)
    return jnp.where(jnp.asarray(double, bool), jnp.minimum(1.0, 2.0 * rho_hat), rho_hat)


def _rank(keys, eligible) -> jax.Array:
    """Rank of each slot when eligible slots are sorted by descending key, ties to the lower index;
    ineligible slots rank after all eligible ones. `[A] -> [A]` int32."""
    keys = jnp.asarray(keys, jnp.float32)
    eligible = jnp.asarray(eligible, bool)
    idx = jnp.arange(keys.shape[-1])
    before = (keys[None, :] > keys[:, None]) | ((keys[None, :] == keys[:, None])
                                                & (idx[None, :] < idx[:, None]))
    rank = jnp.sum(before & eligible[None, :], axis=-1)
    return jnp.where(eligible, rank, keys.shape[-1] + rank).astype(jnp.int32)


def _top_k(keys, eligible, k: int) -> jax.Array:
    """`[k]` int32 indices of the top-k eligible slots (descending key, ties to the lower index),
    padded with -1."""
    eligible = jnp.asarray(eligible, bool)
    order = jnp.argsort(_rank(keys, eligible), stable=True)
    n = order.shape[0]
    if n < k:
        order = jnp.concatenate([order, jnp.zeros(k - n, order.dtype)])
    order = order[:k]
    ok = (jnp.arange(k) < n) & eligible[jnp.clip(order, 0, n - 1)]
    return jnp.where(ok, order, -1).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("k",))
def low_risk_subset(values, risks, p_valid, amask, chosen, rho_th: float = 0.65,
                    k: int = 4) -> jax.Array:
    """`L_t`: the top-k by Ĵ_K of `{a ∈ A_t \\ {â} : ρ̂(a) ≤ ρ_th, p_valid(a) ≥ 0.5}` (§4.6).

    Args:
      values, risks, p_valid: `[A]` float backbone outputs per candidate.
      amask: `[A]` bool real candidates.
      chosen: `[]` int index of the selected action â (-1 for none).
      rho_th: risk threshold.
      k: subset size.
    Returns:
      `[A]` bool mask of L_t (possibly empty).
    """
    risks = jnp.asarray(risks, jnp.float32)
    idx = jnp.arange(risks.shape[-1])
    eligible = (jnp.asarray(amask, bool) & (idx != jnp.asarray(chosen))
                & (risks <= rho_th + _EPS) & (jnp.asarray(p_valid, jnp.float32) >= 0.5))
    return eligible & (_rank(values, eligible) < k)


@functools.partial(jax.jit, static_argnames=("k",))
def skeleton_rows(values, risks, amask, k: int = 4) -> jax.Array:
    """The skeleton `B_t = top-k by Ĵ_K ∪ top-k by ρ̂` as ordered candidate indices (§4.5).

    Row order: the value top-k (descending Ĵ_K), then the risk top-k rows not already listed
    (descending ρ̂). Ties go to the lower canonical index.

    Args:
      values, risks: `[A]` float backbone outputs per candidate.
      amask: `[A]` bool real candidates.
      k: rows per ranking.
    Returns:
      `[2k]` int32 candidate indices, padded at the end with -1.
    """
    amask = jnp.asarray(amask, bool)
    by_value = _top_k(values, amask, k)
    by_risk = _top_k(risks, amask, k)
    dup = jnp.any((by_risk[:, None] == by_value[None, :]) & (by_value[None, :] >= 0), axis=-1)
    rows = jnp.concatenate([by_value, jnp.where(dup, -1, by_risk)])
    order = jnp.argsort(rows < 0, stable=True)  # compact: real rows first, in order
    return rows[order]


def skeleton_mask(rows, n_actions: int) -> jax.Array:
    """`[A]` bool membership of `B_t` from the `[2k]` row indices of `skeleton_rows`."""
    rows = jnp.asarray(rows)
    return jnp.any((rows[:, None] == jnp.arange(n_actions)[None, :]) & (rows[:, None] >= 0), axis=0)


@jax.jit
def affected_entities(pred_dirs, etype, goal, anc, nmask) -> tuple[jax.Array, jax.Array]:
    """Affected entities `Û(a) = Ŝ ∪ out-neighbours(Ŝ) ∪ {GOAL if Ŝ holds a goal or an ancestor of
    one}`, with `Ŝ = {v : argmax ΔĜ[v] ≠ 0}` (§2.6). Out-neighbours follow every edge type.

    Args:
      pred_dirs: `[..., N]` int predicted directions (argmax ΔĜ − 1), one row per action.
      etype: `[N, N]` int edge types (-1 none).
      goal: `[N]` bool goal mask.
      anc: `[N, N]` bool ancestor-or-self closure.
      nmask: `[N]` bool real nodes.
    Returns:
      `(nodes [..., N] bool, goal_flag [...] bool)`.
    """
    nmask = jnp.asarray(nmask, bool)
    s_hat = (jnp.asarray(pred_dirs) != 0) & nmask
    adj = (jnp.asarray(etype) >= 0) & nmask[:, None] & nmask[None, :]
    out = jnp.einsum("...u,uv->...v", s_hat.astype(jnp.int32), adj.astype(jnp.int32)) > 0
    goal = jnp.asarray(goal, bool) & nmask
    feeds_goal = goal | jnp.any(jnp.asarray(anc, bool) & goal[None, :], axis=-1)
    return s_hat | out, jnp.any(s_hat & feeds_goal, axis=-1)


def status_name(code: int) -> str:
    """Lower-case status name; code 5 (or anything outside 0..4) is `unknown`."""
    return config.STATUS_NAMES[code] if 0 <= code < config.N_STATUS else "unknown"


def discrepancies(imagined_status, backbone_status, s_mask, s_hat_mask) -> list[str]:
    """Host-side correction lines, one per node `v ∈ S ∪ Ŝ` whose imagined status differs from
    the backbone's decoded status, in id order: "Node 3: backbone predicts pending but you
    imagined completed." (§4.6; spec §5.1 prompt A.4).

    Args:
      imagined_status: `[N]` the statuses the draft claims (current status where it claims
        nothing, 5 for an `unknown` claim).
      backbone_status: `[N]` the backbone's decoded next statuses for the drafted action.
      s_mask, s_hat_mask: `[N]` bool change-sets S and Ŝ.
    """
    imagined = np.asarray(imagined_status).astype(int)
    backbone = np.asarray(backbone_status).astype(int)
    either = np.asarray(s_mask, bool) | np.asarray(s_hat_mask, bool)
    return [f"Node {v}: backbone predicts {status_name(backbone[v])} but you imagined "
            f"{status_name(imagined[v])}." for v in np.flatnonzero(either)
            if imagined[v] != backbone[v]]


class Consistency(NamedTuple):
    """Phase 3's decision on a draft (`[]` bools)."""

    issue: jax.Array   # a correction call is issued
    double: jax.Array  # ρ̂ is doubled if the draft is kept uncorrected


class RiskCheck(NamedTuple):
    """Phase 4 on the action kept after Phase 3.

    Attributes:
      double: `[]` bool ρ̂ doubled (Phase 3's, or after a correction `after_correction`'s).
      rho_eff: `[]` float32 the effective risk.
      high: `[]` bool the risk gate is on and ρ_eff > ρ_th.
      subset: `[A]` bool the low-risk subset L_t (`low_risk_subset`).
      fired: `[]` bool an escalation call is made (high, with L_t not empty).
    """

    double: jax.Array
    rho_eff: jax.Array
    high: jax.Array
    subset: jax.Array
    fired: jax.Array


def consistency_gate(flags, cons, corrections_used) -> Consistency:
    """Phase 3 on a parsed draft, the one gate of the simulator and of the real-LLM loop.

    Args:
      flags: a method's gate flags (`methods.MethodFlags`, array leaves, possibly traced):
        `correct_mode` (0 band, 1 always, 2 never), `double_rho`, `max_corrections`, `tau_low`,
        `tau_high`.
      cons: `[]` the draft's consistency (`jaccard`).
      corrections_used: `[]` correction calls spent this step (a parse re-prompt spends one).

    - band (GILP, NoRiskGate): correct iff cons < τ_low and budget is left; otherwise double ρ̂
      iff cons < τ_high (the middle band, or the low band with the budget spent).
    - always (tau0): correct whenever budget is left; kept uncorrected, double iff cons < τ_high.
    - never (tau1, NoCorrGate): never correct; double iff cons < τ_high and `double_rho`.
    """
    cons = jnp.asarray(cons, jnp.float32)
    budget = jnp.asarray(corrections_used) < flags.max_corrections
    mode = jnp.asarray(flags.correct_mode)
    in_band = band(cons, flags.tau_low, flags.tau_high)
    issue = jnp.where(mode == 0, budget & (in_band == CORRECT), budget & (mode == 1))
    double = jnp.asarray(flags.double_rho, bool) & ~issue & (in_band != ACCEPT)
    return Consistency(jnp.asarray(issue, bool), jnp.asarray(double, bool))


def risk_gate(flags, consistency: Consistency, cons_after, rho_hat, values, risks, p_valid,
              amask, chosen, k: int = 4) -> RiskCheck:
    """Phase 4 after Phase 3, the one gate of the simulator and of the real-LLM loop.

    Args:
      flags: as `consistency_gate`'s, with `risk_gate` and `rho_th`.
      consistency: Phase 3's decision (`issue` as it went: the caller masks it by whatever
        else stops a correction, e.g. an unparsed draft).
      cons_after: `[]` the corrected reply's consistency (read only where `issue`).
      rho_hat: `[]` the backbone's risk of the action kept.
      values, risks, p_valid, amask, chosen, k: as `low_risk_subset`'s.
    """
    double = jnp.where(consistency.issue, after_correction(flags, cons_after, flags.tau_high),
                       consistency.double)
    rho = rho_eff(rho_hat, double)
    high = jnp.asarray(flags.risk_gate, bool) & (rho > flags.rho_th)
    subset = low_risk_subset(values, risks, p_valid, amask, chosen, flags.rho_th, k=k)
    return RiskCheck(double, rho, high, subset, high & jnp.any(subset))


def gate_decision(method, cons, corrections_used, max_corrections: int = 1,
                  tau_low: float = 0.30, tau_high: float = 0.70) -> tuple[jax.Array, jax.Array]:
    """`consistency_gate` of a gated method's rule (`methods.MethodConfig`: `correct`,
    `double_rho`) and explicit thresholds (for tables and sweeps): `(issue_correction, double_rho)`."""
    traced = types.SimpleNamespace(
        correct_mode=("band", "always", "never").index(method.correct),
        double_rho=method.double_rho, max_corrections=max_corrections, tau_low=tau_low,
        tau_high=tau_high)
    return tuple(consistency_gate(traced, cons, corrections_used))


def after_correction(flags, cons_after, tau_high: float = 0.70) -> jax.Array:
    """After a correction call: double ρ̂ iff cons_after < τ_high (§4.6 step 3; off for NoCorrGate).
    `flags` may be a `methods.MethodConfig` or anything with a (traced) `double_rho`."""
    cons_after = jnp.asarray(cons_after, jnp.float32)
    return jnp.asarray(flags.double_rho, bool) & (cons_after < tau_high - _EPS)
