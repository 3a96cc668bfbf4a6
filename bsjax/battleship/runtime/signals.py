"""Computed signals of the reflective record (docs/battleship/protocol.md §9.2): pure, recomputed on read."""

from __future__ import annotations

import jax.numpy as jnp

from bsjax.battleship.runtime.presets import MIN_DELTA
from bsjax.battleship.runtime.record import NO_REVISION, ReflectiveRecord

COARSE_KIND = 0   # index of coarse_roi_collapse in the paper preset table


def model_confidence(record: ReflectiveRecord) -> jnp.ndarray:
    """max(0, 1 - (predErrEMA + calErrEMA) / 2)."""
    return jnp.maximum(0.0, 1.0 - (record.pred_error_ema + record.calibration_error_ema) / 2.0)


def need_revision(record: ReflectiveRecord, tau: float) -> jnp.ndarray:
    return model_confidence(record) < tau


def positive_preview(record: ReflectiveRecord, min_delta: float = MIN_DELTA) -> jnp.ndarray:
    """bestΔ > δ_min, or the coarse collapse was chosen as a (loose) candidate."""
    return (record.next_delta > min_delta) | ((record.next_kind == COARSE_KIND)
                                              & record.coarse_candidate)


def should_revise(record: ReflectiveRecord, tau: float, enabled: bool,
                  min_delta: float = MIN_DELTA) -> jnp.ndarray:
    """The gate: enabled, low confidence, no cooldown, streak >= 2, positive preview, a kind."""
    return (jnp.asarray(enabled, bool) & need_revision(record, tau) & (record.cooldown == 0)
            & (record.low_confidence_streak >= 2) & positive_preview(record, min_delta)
            & (record.next_kind != NO_REVISION))
