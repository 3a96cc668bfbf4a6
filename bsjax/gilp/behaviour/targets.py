"""Calibration targets, residual rows and acceptance bands of the simulator (docs/gilp/spec.md §5.2
"Calibration procedure", "Acceptance bands"; values from `bsjax.gilp.paper_numbers`).

A `Target` names a metric of `bsjax.gilp.metrics.summarise_method` for one method. Metric names
are summary keys (`sr`, `hsr`, `iar`, `pd`, `rwf`, `sr_h10`, `alpha`, `corr_rate`, ...) plus
`sr@BUCKET` (SR of a horizon bucket) and `p_err@K` (p_err(K) of the committed outputs).
"""

from __future__ import annotations

from typing import NamedTuple

from bsjax.gilp import config, paper_numbers

MISSING_PENALTY = 1.0  # squared residual (in the metric's units) charged when it is undefined
# Residuals enter the objective in units of their acceptance band's half-width (bsjax choice,
# README "Calibration"): the spec's weights were written for rates, and an unscaled PD residual
# (steps, not a probability) outweighed every rate ~100:1, so the fit traded SR and IAR for PD.
# Rows without a band use the half-width of their kind.
RATE_SCALE = 0.04
PD_SCALE = 0.4


class Target(NamedTuple):
    """One calibration / check row.

    Attributes:
      stage: 1, 2 (fitted) or 3 (predicted: weight 0, reported only).
      method: method name (a key of `metrics.summarise`).
      metric: summary key, `sr@BUCKET` or `p_err@K`.
      target: the paper (or measured real-path) value.
      weight: weight in the stage's squared error ([rev] values already halved).
      rev: the value is [rev] (secondary).
      band: `(lo, hi)` acceptance band on the measured value, or None.
      note: where the value comes from.
    """

    stage: int
    method: str
    metric: str
    target: float
    weight: float
    rev: bool = False
    band: tuple[float, float] | None = None
    note: str = ""


def residual_scale(target: Target) -> float:
    """The unit a row's residual is measured in: its band's half-width, else 0.4 steps for PD
    and 0.04 for every rate."""
    if target.band is not None:
        return (target.band[1] - target.band[0]) / 2.0
    return PD_SCALE if target.metric == "pd" else RATE_SCALE


def metric_value(summary: dict | None, metric: str) -> float | None:
    """The value of a `Target.metric` in one method's summary (None if undefined)."""
    if summary is None:
        return None
    if metric.startswith("sr@"):
        bucket = summary["sr_buckets"].get(metric[3:])
        return None if bucket is None else bucket["sr"]
    if metric.startswith("p_err@"):
        k = int(metric[6:])
        return summary["p_err"][k - 1]["p"] if k <= len(summary["p_err"]) else None
    value = summary.get(metric)
    return None if value is None else float(value)


def _row(stage, method, metric, paper: paper_numbers.Paper, weight, band_halfwidth=None, band=None,
         note=""):
    w = weight * (0.5 if paper.rev else 1.0)
    if band is None and band_halfwidth is not None:
        band = (paper.value - band_halfwidth, paper.value + band_halfwidth)
    return Target(stage, method, metric, float(paper.value), w, paper.rev, band,
                  note or paper.note)


def _p_err_rows(stage: int, method: str, p1: float, p10: float, band10: float | None = None):
    profile = paper_numbers.linear_p_err(p1, p10)
    return [Target(stage, method, f"p_err@{k}", p, 1.0, False,
                   (p - band10, p + band10) if band10 is not None and k == 10 else None,
                   "linear profile (Table 6)") for k, p in enumerate(profile, 1)]


def agent_targets(summary: dict | None = None) -> list[Target]:
    """Stage-1 targets on Agent-Replan: the paper's (default), or a measured real-path summary
    (`--from-real`: the same metrics at full weight, bands around the measured values)."""
    m = "Agent-Replan"
    if summary is not None:
        rows = []
        for metric, weight, half in (("sr", 4, 0.04), ("hsr", 4, 0.02), ("iar", 2, 0.03),
                                     ("pd", 2, 0.4)):
            value = metric_value(summary, metric)
            if value is not None:
                rows.append(_row(1, m, metric, paper_numbers.Paper(value, note="measured"), weight, half))
        for name in config.HORIZON_BUCKET_NAMES:
            value = metric_value(summary, f"sr@{name}")
            if value is not None:
                rows.append(_row(1, m, f"sr@{name}", paper_numbers.Paper(value, note="measured"), 1))
        for k in range(1, 11):
            value = metric_value(summary, f"p_err@{k}")
            if value is not None:
                rows.append(Target(1, m, f"p_err@{k}", value, 1.0,
                                   band=(value - 0.04, value + 0.04) if k == 10 else None,
                                   note="measured"))
        return rows
    t1, t2, t6 = paper_numbers.TABLE1[m], paper_numbers.TABLE2[m], paper_numbers.TABLE6[m]
    rows = [_row(1, m, "sr", t1["sr"], 4, 0.04), _row(1, m, "hsr", t1["hsr"], 4, 0.02),
            _row(1, m, "iar", t1["iar"], 2, 0.03), _row(1, m, "pd", t1["pd"], 2, 0.4)]
    rows += [_row(1, m, f"sr@{b}", t2[b], 1) for b in config.HORIZON_BUCKET_NAMES]
    return rows + _p_err_rows(1, m, t6["p_err1"].value, t6["p_err10"].value, 0.04)


HYBRIDS = ("Hybrid-ValidityOnly", "Hybrid-DeltaOnly", "Hybrid-RiskOnly", "Hybrid-ValueOnly",
           "Hybrid-Full")
GILPS = ("GILP", "GILP-NoCorrGate", "GILP-NoRiskGate", "GILP-tau0", "GILP-tau1")
# Weights of stage 2 (the spec gives stage 1's; stage 2 reuses them per metric).
_WEIGHT = {"sr": 4, "hsr": 4, "iar": 2, "pd": 2, "rwf": 2, "sr_h10": 1}


def hybrid_targets() -> list[Target]:
    """Stage-2 targets: the Hybrid rows of Tables 1 and 5, the Hybrid-Full p_err profile and α
    measured passively on Hybrid-Full drafts."""
    rows = []
    for m in HYBRIDS:
        merged = {**paper_numbers.TABLE5.get(m, {}), **paper_numbers.TABLE1.get(m, {})}
        for metric, paper in merged.items():
            if metric not in _WEIGHT:
                continue
            half = {"sr": 0.04, "hsr": 0.02}.get(metric) if m == "Hybrid-Full" else None
            rows.append(_row(2, m, metric, paper, _WEIGHT[metric], half))
    t6 = paper_numbers.TABLE6["Hybrid-Full"]
    rows += _p_err_rows(2, "Hybrid-Full", t6["p_err1"].value, t6["p_err10"].value)
    rows.append(_row(2, "Hybrid-Full", "alpha", paper_numbers.TABLE6["GILP"]["alpha"], 2,
                     note="α of the Phase-3 gate run passively on Hybrid-Full drafts"))
    return rows


def gilp_checks(with_ood: bool) -> list[Target]:
    """Stage-3 rows (weight 0): GILP's headline numbers with the predicted bands, the gate
    rates, OOD SR (when evaluated) and the ablations' Table-5 values."""
    m, t1 = "GILP", paper_numbers.TABLE1["GILP"]
    rows = [_row(3, m, "sr", t1["sr"], 0, 0.06), _row(3, m, "hsr", t1["hsr"], 0, band=(0.02, 0.10)),
            _row(3, m, "iar", t1["iar"], 0), _row(3, m, "pd", t1["pd"], 0),
            _row(3, m, "p_err@10", paper_numbers.TABLE6[m]["p_err10"], 0),
            _row(3, m, "corr_rate", paper_numbers.TABLE3[m]["corr_rate"], 0),
            _row(3, m, "risk_rate", paper_numbers.TABLE3[m]["risk_rate"], 0),
            _row(3, m, "calls_step", paper_numbers.TABLE3[m]["calls_step"], 0, band=(1.15, 1.45)),
            _row(3, m, "beta", paper_numbers.TABLE6[m]["beta"], 0)]
    if with_ood:  # OOD episodes are summarised apart, as "METHOD (ood)"
        rows.append(_row(3, f"{m} (ood)", "sr_h10", t1["sr_h10"], 0))
        for method in ("GILP", "Agent-Replan"):
            rows.append(_row(3, f"{method} (ood)", "sr", paper_numbers.OOD["sr_ood"][method], 0))
    for method in GILPS[1:]:
        for metric, paper in paper_numbers.TABLE5[method].items():
            rows.append(_row(3, method, metric, paper, 0))
    return rows


def evaluate(targets: list[Target], summaries: dict[str, dict]) -> tuple[float, list[dict]]:
    """`(Σ weight·(residual / scale)², rows)` with `scale = residual_scale(target)`. A row:
    target fields plus `value`, `residual` (value − target), `z` (residual / scale) and `pass`
    (band check, None without a band). An undefined value of a weighted row costs
    `MISSING_PENALTY`·weight / scale²."""
    total, rows = 0.0, []
    for t in targets:
        value = metric_value(summaries.get(t.method), t.metric)
        residual = None if value is None else value - t.target
        scale = residual_scale(t)
        if t.weight > 0:
            total += t.weight * (MISSING_PENALTY if residual is None else residual ** 2) / scale ** 2
        ok = None if t.band is None or value is None else bool(t.band[0] <= value <= t.band[1])
        rows.append({**t._asdict(), "band": list(t.band) if t.band else None, "value": value,
                     "residual": residual, "z": None if residual is None else residual / scale,
                     "pass": ok})
    return total, rows


def relation_checks(s: dict[str, dict]) -> list[dict]:
    """The predicted orderings and gaps (spec "Acceptance bands"), as pass/fail rows."""
    def get(method, metric):
        return metric_value(s.get(method), metric)

    def check(name, values, rule):
        ok = None if any(v is None for v in values) else bool(rule(*values))
        return {"stage": 3, "method": "GILP", "metric": name, "target": None,
                "value": [None if v is None else round(v, 4) for v in values], "residual": None,
                "weight": 0.0, "rev": False, "band": None, "note": "predicted ordering",
                "pass": ok}

    order = ("GILP", "Hybrid-Full", "Agent-Replan")
    rows = [check("SR: GILP > Hybrid-Full > Agent-Replan", [get(m, "sr") for m in order],
                  lambda a, b, c: a > b > c),
            check("HSR: GILP < Hybrid-Full < Agent-Replan", [get(m, "hsr") for m in order],
                  lambda a, b, c: a < b < c),
            check("SR(H>10): GILP - Agent-Replan >= 0.15",
                  [get("GILP", "sr_h10") if get("GILP", "sr_h10") is not None
                   else get("GILP (ood)", "sr_h10"),
                   get("Agent-Replan", "sr_h10") if get("Agent-Replan", "sr_h10") is not None
                   else get("Agent-Replan (ood)", "sr_h10")],
                  lambda a, b: a - b >= 0.15)]
    prop = get("GILP", "prop1_hsr")
    hsr = get("GILP", "hsr")
    rows.append({"stage": 3, "method": "GILP", "metric": "Prop. 1: (1 - a*b)*HSR_draft vs HSR",
                 "target": prop, "value": hsr,
                 "residual": None if None in (prop, hsr) else hsr - prop, "weight": 0.0,
                 "rev": False, "band": None, "note": "§1.3 #9", "pass": None})
    return rows


__all__ = ["GILPS", "HYBRIDS", "Target", "agent_targets", "evaluate", "gilp_checks",
           "hybrid_targets", "metric_value", "relation_checks", "residual_scale"]
