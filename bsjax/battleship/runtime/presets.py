"""Revision presets as data (docs/battleship/protocol.md §9.4): a new preset is one entry of a tuple.

A preset has an eligibility predicate over the record (post-action counters, decision-time
summary), a candidate rule on its preview Δ, and a patch of the policy. Selection: the first
candidate, in table order, whose Δ is at least that of every later candidate — for the paper's
three presets exactly the reference's order (coarse collapse, late re-probe, closeout).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.battleship.runtime.record import NO_REVISION, Policy, ReflectiveRecord

MIN_DELTA = 0.01     # δ_min, `minRevisionDelta`
COOLDOWN = 3         # `revisionCooldownTurns`


@dataclasses.dataclass(frozen=True)
class GateContext:
    """Post-action counters the eligibility predicates read (`[]` arrays)."""

    turn: jnp.ndarray
    hits: jnp.ndarray


@dataclasses.dataclass(frozen=True)
class Preset:
    """One revision kind.

    Attributes:
      kind: the revision kind (`revisionKind` of the LLM schema).
      mode: the `policyMode` it writes; mode_index its index in POLICY_MODE_NAMES.
      eligible: (record, context) -> `[]` bool.
      loose: candidate iff Δ >= -δ_min (the coarse collapse under MRA); else Δ > δ_min.
      patch: Policy -> Policy.
    """

    kind: str
    mode: str
    mode_index: int
    eligible: Callable[[ReflectiveRecord, GateContext], jnp.ndarray]
    loose: bool
    patch: Callable[[Policy], Policy]


def _add(budgets, coarse=0, local=0, late=0):
    return budgets + jnp.asarray([coarse, local, late], jnp.int32)


PAPER_PRESETS = (
    Preset(
        kind="coarse_roi_collapse", mode="coarse-reduced", mode_index=1,
        eligible=lambda r, c: ((c.turn <= 10) & (c.hits == 0) & (r.used[0] >= 2)
                               & (r.policy.budgets[0] > 2)),
        loose=True,
        patch=lambda p: p.replace(budgets=_add(p.budgets, coarse=-1, local=1), mode=jnp.int32(1)),
    ),
    Preset(
        kind="late_diffuse_reprobe", mode="late-reprobe", mode_index=2,
        eligible=lambda r, c: ((c.turn >= r.policy.salvage_start_turn) & (r.frontier_count == 0)
                               & (r.largest_cluster > 0) & (r.policy.budgets[2] < 6)),
        loose=False,
        patch=lambda p: p.replace(
            budgets=jnp.stack([p.budgets[0], jnp.maximum(0, p.budgets[1] - 1), p.budgets[2] + 1]),
            salvage_start_turn=jnp.maximum(12, p.salvage_start_turn - 1), mode=jnp.int32(2)),
    ),
    Preset(
        kind="cluster_closeout_bias", mode="closeout", mode_index=3,
        eligible=lambda r, c: (r.largest_cluster >= 2) & (r.policy.exploit_threshold > 0.4),
        loose=False,
        patch=lambda p: p.replace(
            salvage_start_turn=jnp.maximum(12, p.salvage_start_turn - 1),
            exploit_threshold=jnp.maximum(jnp.float32(0.4), p.exploit_threshold - 0.05),
            mode=jnp.int32(3)),
    ),
)

KINDS = tuple(p.kind for p in PAPER_PRESETS)


def mask(spec: str, presets=PAPER_PRESETS) -> np.ndarray:
    """`[K]` bool: which presets of the table `presets` the spec of `choose` names."""
    chosen = {p.kind for p in choose(spec)}
    return np.asarray([p.kind in chosen for p in presets], bool)


def choose(spec: str) -> tuple[Preset, ...]:
    """The paper presets named in `spec` ("all", or kinds separated by commas), in table order.

    Table order keeps selection's tie-break. Raises ValueError.
    """
    if spec == "all":
        return PAPER_PRESETS
    wanted = [k.strip() for k in spec.split(",") if k.strip()]
    unknown = [k for k in wanted if k not in KINDS]
    if unknown or not wanted:
        raise ValueError(f"unknown preset(s) {', '.join(unknown) or repr(spec)} "
                         f"(choose all or from {', '.join(KINDS)})")
    if len(set(wanted)) != len(wanted):
        raise ValueError(f"a preset is named twice in {spec!r}")
    return tuple(p for p in PAPER_PRESETS if p.kind in wanted)


def candidates(presets, record: ReflectiveRecord, context: GateContext,
               min_delta: float = MIN_DELTA, enabled: jnp.ndarray | None = None) -> jnp.ndarray:
    """`[K]` bool: enabled (`[K]` bool, all by default), eligible and passing the Δ rule (Δ from
    the decision-time preview)."""
    out = []
    for i, preset in enumerate(presets):  # static: the preset table
        delta = record.preview_delta[i]
        rule = delta >= -min_delta if preset.loose else delta > min_delta
        on = True if enabled is None else enabled[i]
        out.append(preset.eligible(record, context) & rule & on)
    return jnp.stack(out)


def select(presets, record: ReflectiveRecord, context: GateContext,
           min_delta: float = MIN_DELTA, enabled: jnp.ndarray | None = None):
    """(next kind index or NO_REVISION, its Δ, `[K]` candidate flags); `enabled` (`[K]` bool)
    masks the table (a params mask: every subset of the table in one compiled program)."""
    flags = candidates(presets, record, context, min_delta, enabled)
    delta = record.preview_delta
    chosen = jnp.int32(NO_REVISION)
    # Walk backwards so the earliest qualifying preset wins.
    for i in reversed(range(len(presets))):
        later = jnp.arange(len(presets)) > i
        best_later = jnp.max(jnp.where(later & flags, delta, -jnp.inf))
        chosen = jnp.where(flags[i] & (delta[i] >= best_later), jnp.int32(i), chosen)
    chosen_delta = jnp.where(chosen >= 0, delta[jnp.maximum(chosen, 0)], 0.0)
    return chosen, chosen_delta, flags


def apply(presets, policy: Policy, kind: jnp.ndarray) -> Policy:
    """The policy after preset `kind` (unchanged for NO_REVISION)."""
    out = policy
    for i, preset in enumerate(presets):
        patched = preset.patch(policy)
        out = jax.tree.map(lambda x, y: jnp.where(kind == i, x, y), patched, out)
    return out
