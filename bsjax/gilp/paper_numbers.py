"""The paper's published values (docs/gilp/spec.md §1.2) as data, for the "paper" columns of the GILP
tables and for calibration residuals.

Each value is a `Paper(value, rev, note)`. `rev=True` marks a value known only from the later
revision through a third-party summary ([rev]): a secondary target, for shape checks only. Where
the arXiv text and [rev] both give a value, the arXiv value is kept and the [rev] one is in `note`.
Keys are metric names of `bsjax.gilp.metrics.summarise_method` (`sr`, `hsr`, `tok_succ`, ...);
bucket SRs use config.HORIZON_BUCKET_NAMES. Token counts are absolute.
"""

from __future__ import annotations

from typing import NamedTuple


class Paper(NamedTuple):
    value: float
    rev: bool = False
    note: str = ""


def R(value: float, note: str = "") -> Paper:
    """A [rev] (secondary) value."""
    return Paper(value, True, note)


P = Paper

# Method names in table order (§4.8), plus the Oracle reference row.
METHODS = ("Agent-Replan", "Parametric-WM-MPC", "Parametric-WM-MCTS", "Hybrid-ValidityOnly",
           "Hybrid-DeltaOnly", "Hybrid-RiskOnly", "Hybrid-ValueOnly", "Hybrid-Full", "GILP",
           "GILP-NoCorrGate", "GILP-NoRiskGate", "GILP-tau0", "GILP-tau1")
ORACLE = "Oracle"
PARAMETRIC = ("Parametric-WM-MPC", "Parametric-WM-MCTS")
LLM_METHODS = tuple(m for m in METHODS if m not in PARAMETRIC)

# Headline (abstract, §1, §5.x). The real-path HSR pair is Table 7's pooled row.
HEADLINE = {
    "hsr_real": {"Agent-Replan": P(0.176), "GILP": P(0.035)},
    "sr": {"Agent-Replan": P(0.668), "GILP": P(0.838)},
    "sr_h10": {"Agent-Replan": P(0.471), "GILP": P(0.758)},
    "hsr": {"Agent-Replan": P(0.205), "GILP": P(0.079)},
    "iar": {"Agent-Replan": P(0.169), "GILP": P(0.065)},
    "pd": {"Agent-Replan": P(2.45), "GILP": P(1.51)},
    "calls_step": {"GILP": P(1.30, note="1 + 0.22 + 0.08 (§4.7)")},
}

# Table 1 (sim, pooled over 4 benchmarks).
TABLE1 = {
    "Agent-Replan": {"sr": P(0.668), "sr_h10": P(0.471), "iar": P(0.169), "hsr": P(0.205),
                     "pd": P(2.45), "tok_succ": R(16389)},
    "Parametric-WM-MPC": {"sr": P(0.565)},
    "Parametric-WM-MCTS": {"sr": P(0.625), "sr_h10": R(0.559), "iar": R(0.080), "hsr": R(0.060),
                           "pd": R(1.10), "tok_succ": R(262)},
    "Hybrid-Full": {"sr": P(0.750, note="§5.6"), "sr_h10": R(0.636), "iar": R(0.091),
                    "hsr": P(0.111, note="§7"), "pd": R(1.65),
                    "tok_succ": P(13500, note="§5.3: 13.5k; [rev] 13,503")},
    "GILP": {"sr": P(0.838), "sr_h10": P(0.758), "iar": P(0.065), "hsr": P(0.079), "pd": P(1.51),
             "tok_succ": P(15000, note="§5.3: 15.0k; [rev] 15,021")},
}

# Table 2: SR by oracle-horizon bucket, and HSR at H > 10.
TABLE2 = {
    "Agent-Replan": {"H<=3": P(0.957), "4-6": R(0.899), "7-10": R(0.762), ">10": P(0.471),
                     "hsr_h10": R(0.222)},
    "Parametric-WM-MPC": {"H<=3": R(0.639), "4-6": R(0.628), "7-10": R(0.607), ">10": P(0.502),
                          "hsr_h10": R(0.074)},
    "GILP": {"H<=3": R(0.976), "4-6": R(0.933), "7-10": R(0.872), ">10": P(0.758),
             "hsr_h10": R(0.085)},
}

# Table 3: cost (§4.7, §5.3). Wall time: no value given.
TABLE3 = {
    "Agent-Replan": {"tok_succ": R(16389)},
    "Hybrid-Full": {"tok_succ": P(13500, note="§5.3: 13.5k")},
    "GILP": {"calls_step": P(1.30), "corr_rate": P(0.22), "risk_rate": P(0.08),
             "tok_succ": P(15000, note="§5.3: 15.0k"),
             "usd_1k": R(1.06, "GPT-4o-mini GILP, §5.10")},
}

# Table 4: backbones (§5.5). No values for GCN, ActionNode, ErrorAware.
TABLE4 = {
    "MLP": {"trans_acc": P(0.843), "standalone_sr": P(0.509), "hybrid_sr": P(0.768),
            "hybrid_hsr": R(0.064)},
    "MPNN": {"trans_acc": P(0.992), "standalone_sr": R(0.560), "hybrid_sr": P(0.771),
             "hybrid_hsr": R(0.063, "text: HSR cut by 69.1%, 0.205 -> 0.063")},
    "GPS": {"trans_acc": R(0.981), "standalone_sr": R(0.571), "hybrid_sr": R(0.765),
            "hybrid_hsr": R(0.061)},
}

# Table 5: ablations (§5.6, §4.4). Text values are primary; SR/HSR otherwise from [rev].
TABLE5 = {
    "Agent-Replan": {"sr": P(0.668, note="Table 1; [rev] NoBackbone 0.649"), "hsr": P(0.205)},
    "Hybrid-ValidityOnly": {"sr": R(0.660), "hsr": R(0.192), "iar": P(0.087)},
    "Hybrid-DeltaOnly": {"sr": R(0.703), "hsr": P(0.121)},
    "Hybrid-RiskOnly": {"sr": R(0.657), "hsr": R(0.183), "rwf": P(0.159)},
    "Hybrid-ValueOnly": {"sr": R(0.678), "hsr": R(0.167)},
    "Hybrid-Full": {"sr": P(0.750), "hsr": P(0.111, note="§7")},
    "GILP-NoCorrGate": {"sr": R(0.772), "hsr": R(0.108)},
    "GILP-NoRiskGate": {"sr": R(0.782), "hsr": R(0.081)},
    "GILP-tau0": {"sr": R(0.823), "hsr": R(0.067)},
    "GILP-tau1": {"sr": R(0.759), "hsr": R(0.113)},
    "GILP": {"sr": P(0.838), "hsr": P(0.079), "iar": P(0.065)},
}
# Qualitative Table 5 statements, checked as relations rather than printed as numbers.
TABLE5_RELATIONS = {
    "GILP-NoRiskGate": "preserves SR but doubles risk-weighted failure (RWF ≈ 2 × GILP)",
    "GILP-tau0": "spends more tokens for little gain",
    "GILP-tau1": "falls back toward Hybrid-Full",
    "tau_low": "robust over [0.25, 0.40]; over-triggers below 0.25, misses hallucinations above 0.40",
}

# OOD (§5.7).
OOD = {"sr_ood": {"GILP": P(0.618), "Agent-Replan": P(0.450)},
       "max_gap": P(0.108, note="parametric planner, the largest ID->OOD gap")}

# Table 6: error proxies at H = 10 (§4.7, §5.8). p_err1 is the bsjax derivation assuming a linear
# profile; it is printed rounded to 3 decimals in the spec, but only the 4-decimal value
# p1 = ExpectedErrors/5 − p10 reproduces both published columns to 3 decimals.
TABLE6 = {
    "Agent-Replan": {"p_err10": P(0.393), "expected_errors": P(3.148), "indep_bound": P(0.978),
                     "p_err1": P(0.2366, note="implied by a linear profile; 0.237 to 3 d.p.")},
    "Hybrid-Full": {"p_err10": P(0.213), "expected_errors": P(1.808), "indep_bound": P(0.864),
                    "p_err1": P(0.1486, note="implied; 0.149 to 3 d.p.")},
    "GILP": {"p_err10": P(0.164), "expected_errors": P(1.303), "indep_bound": P(0.753),
             "p_err1": P(0.0966, note="implied; 0.097 to 3 d.p."),
             "alpha": P(0.83, note="§4.7"), "beta": P(0.93, note="§4.7")},
}
PD_PERSIST_STEPS = P(2.45, note="§1: a hallucinated atom persists 2.45 steps on average")


def linear_p_err(p1: float, p10: float, k_max: int = 10) -> list[float]:
    """The linear calibration profile p_err(k) = p1 + (p10 − p1)(k − 1)/9, k = 1..k_max."""
    return [p1 + (p10 - p1) * (k - 1) / 9 for k in range(1, k_max + 1)]


# Table 7: real GPT-4o-mini validation (§5.9): n agent/GILP, HSR [95% CI] per arm, Δ%, Tok/Task.
TABLE7 = {
    "taskgraph": {"n": (20, 20), "hsr_agent": (0.142, 0.111, 0.172),
                  "hsr_gilp": (0.040, 0.024, 0.055), "delta_pct": -72, "tok": (2320, 2904)},
    "toolchain": {"n": (20, 20), "hsr_agent": (0.193, 0.148, 0.238),
                  "hsr_gilp": (0.024, 0.011, 0.036), "delta_pct": -88, "tok": (2054, 2624)},
    "resourcealloc": {"n": (20, 20), "hsr_agent": (0.170, 0.136, 0.204),
                      "hsr_gilp": (0.046, 0.024, 0.069), "delta_pct": -73, "tok": (2460, 3126)},
    "repairflow": {"n": (20, 16), "hsr_agent": (0.200, 0.171, 0.229),
                   "hsr_gilp": (0.029, 0.010, 0.049), "delta_pct": -86, "tok": (2649, 2721)},
    "pooled": {"n": (80, 76), "hsr_agent": (0.176, 0.158, 0.194),
               "hsr_gilp": (0.035, 0.026, 0.044), "delta_pct": -80, "tok": (2371, 2850)},
}
TABLE7_SR = 1.000  # both arms, all four benchmarks
TABLE7_CALIBRATION_SUBSET = {"n": 5, "bench": "taskgraph", "hsr_agent": 0.172, "hsr_gilp": 0.016}

# Table 8: multi-API (§5.10; only GPT-4o-mini on TaskGraph is real).
TABLE8 = {
    "GPT-4o-mini": {"sr_agent": R(0.755), "hsr_agent": P(0.171), "sr_gilp": R(0.795),
                    "hsr_gilp": R(0.014), "corr_rate": P(0.20)},
    "Claude-3-Haiku": {"sr_agent": R(0.620), "hsr_agent": P(0.204), "sr_gilp": R(0.790),
                       "hsr_gilp": R(0.074), "corr_rate": P(0.25)},
    "Gemini-1.5-Flash": {"sr_agent": R(0.600), "hsr_agent": P(0.231), "sr_gilp": R(0.780),
                         "hsr_gilp": R(0.088), "corr_rate": P(0.27)},
    "Llama-3-8B": {"sr_agent": R(0.470), "hsr_agent": P(0.318), "sr_gilp": R(0.730),
                   "hsr_gilp": R(0.109), "corr_rate": P(0.32)},
}
JSON_FAIL_RATE = {"Llama-3-8B": P(0.092), "GPT-4o-mini": P(0.004)}

# Prices per million tokens (in, out), USD (§5.10).
PRICES = {"GPT-4o-mini": (0.15, 0.60), "Claude-3-Haiku": (0.25, 1.25),
          "Gemini-1.5-Flash": (0.075, 0.30), "local": (0.0, 0.0)}


def lookup(table: dict, method: str, key: str) -> Paper | None:
    """The paper value of `key` for `method` in `table`, or None."""
    return table.get(method, {}).get(key)
