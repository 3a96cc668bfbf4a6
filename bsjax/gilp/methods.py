"""The GILP method registry (docs/gilp/spec.md §4.8): 13 methods plus the Oracle reference row.

Every method is a frozen, hashable `MethodConfig`; planners differ only in configuration, never
in code paths. The simulator (`bsjax.gilp.behaviour`), the real-LLM loop and the parametric planners read
the same configs:

- `uses_backbone`: Phase 1 runs (the backbone scores every candidate);
- `llm`: the agent is an LLM (simulated or real); parametric planners and the Oracle have none;
- `fields`: the skeleton fields shown in the prompt, a subset of `SKELETON_FIELDS` in that order
  (empty: no skeleton block);
- `correct`, `double_rho`, `risk_gate`: the Phase-3/4 gates of GILP and its ablations (the
  correction rule is None for gateless methods);
- `parametric`: "mpc" / "mcts" for the parametric planners, else None;
- `oracle`: the privileged reference policy (not a paper method);
- thresholds `tau_low`, `tau_high`, `rho_th`, `max_corrections`, `skeleton_k` (spec defaults; a
  τ_low sweep point is `with_tau_low(get_method("GILP"), 0.25)`, the same config as the name
  `GILP[tau_low=0.25]`: any registry method with other thresholds is a name too).
"""

from __future__ import annotations

import dataclasses
import re

import chex
import jax
import numpy as np

from bsjax.gilp import config

SKELETON_FIELDS = ("validity", "delta", "risk", "value")
# The consistency gate's correction rules; `MethodFlags.correct_mode` indexes this.
CORRECT_MODES = ("band", "always", "never")
# The prompt renderer's variant names (bsjax.gilp.llm.prompts.VARIANT_FIELDS).
_VARIANT_OF_FIELDS = {("validity",): "validity", ("delta",): "delta", ("risk",): "risk",
                      ("value",): "value", SKELETON_FIELDS: "full"}
_DEFAULTS = config.GilpConfig()


@dataclasses.dataclass(frozen=True)
class MethodConfig:
    """One planner's static configuration (hashable; closed over by `jit`).

    Attributes:
      name: method name as printed in tables and written to events.
      uses_backbone: Phase 1 runs.
      llm: the agent is an LLM (1+ calls per step).
      fields: skeleton fields shown, ordered as `SKELETON_FIELDS`; () without a skeleton.
      correct: the consistency gate's correction rule of GILP and its ablations (§4.7, §1.3 #7):
        `band` (cons < τ_low), `always` (every step, GILP-tau0) or `never`; None for gateless
        methods (no Phases 3-4).
      double_rho: a draft kept uncorrected with cons < τ_high doubles ρ̂, and so does
        cons_after < τ_high after a correction (gated methods only).
      risk_gate: Phase 4 runs (gated methods only).
      parametric: "mpc" or "mcts" for the parametric planners; None otherwise.
      oracle: the Oracle reference row.
      tau_low, tau_high: consistency-gate bands.
      rho_th: risk threshold (risk gate and [HIGH RISK] tag).
      max_corrections: correction calls per step (a parse re-prompt spends it).
      skeleton_k: rows per ranking in B_t.
    """

    name: str
    uses_backbone: bool
    llm: bool
    fields: tuple[str, ...] = ()
    correct: str | None = None
    double_rho: bool = False
    risk_gate: bool = False
    parametric: str | None = None
    oracle: bool = False
    tau_low: float = _DEFAULTS.tau_low
    tau_high: float = _DEFAULTS.tau_high
    rho_th: float = _DEFAULTS.rho_th
    max_corrections: int = _DEFAULTS.max_corrections
    skeleton_k: int = _DEFAULTS.skeleton_k

    def __post_init__(self):
        unknown = [f for f in self.fields if f not in SKELETON_FIELDS]
        if unknown:
            raise ValueError(f"{self.name}: unknown skeleton field(s) {unknown}")
        if tuple(f for f in SKELETON_FIELDS if f in self.fields) != tuple(self.fields):
            raise ValueError(f"{self.name}: fields must follow the order {SKELETON_FIELDS}")
        if self.parametric not in (None, "mpc", "mcts"):
            raise ValueError(f"{self.name}: unknown parametric planner {self.parametric!r}")
        if self.correct not in (None, *CORRECT_MODES):
            raise ValueError(f"{self.name}: unknown correction rule {self.correct!r}")
        if self.correct is None and (self.double_rho or self.risk_gate):
            raise ValueError(f"{self.name}: double_rho and risk_gate need a gate (correct=...)")
        if (self.fields or self.gated or self.parametric) and not self.uses_backbone:
            raise ValueError(f"{self.name}: a skeleton, gate or parametric planner needs the "
                             "backbone")
        if self.gated and self.fields != SKELETON_FIELDS:
            raise ValueError(f"{self.name}: gated methods show every skeleton field")

    # -- derived flags -------------------------------------------------------------------------

    @property
    def skeleton(self) -> bool:
        """A skeleton block is shown (some field present)."""
        return bool(self.fields)

    @property
    def has_validity(self) -> bool:
        return "validity" in self.fields

    @property
    def has_delta(self) -> bool:
        """The predicted delta and the affected entities are shown."""
        return "delta" in self.fields

    @property
    def has_risk(self) -> bool:
        return "risk" in self.fields

    @property
    def has_value(self) -> bool:
        return "value" in self.fields

    @property
    def gated(self) -> bool:
        """GILP or one of its ablations (Phases 3-4 exist)."""
        return self.correct is not None

    @property
    def variant(self) -> str | None:
        """The prompt renderer's skeleton variant ("full", "validity", ...), None without one."""
        return _VARIANT_OF_FIELDS.get(tuple(self.fields)) if self.fields else None

    @property
    def kind(self) -> str:
        """"llm", "mpc", "mcts" or "oracle"."""
        return "oracle" if self.oracle else (self.parametric or "llm")


def _hybrid(name: str, *fields: str) -> MethodConfig:
    return MethodConfig(name, uses_backbone=True, llm=True, fields=tuple(fields))


def _gilp(name: str, correct: str = "band", double_rho: bool = True,
          risk_gate: bool = True) -> MethodConfig:
    return MethodConfig(name, uses_backbone=True, llm=True, fields=SKELETON_FIELDS,
                        correct=correct, double_rho=double_rho, risk_gate=risk_gate)


_METHODS = (
    MethodConfig("Agent-Replan", uses_backbone=False, llm=True),
    MethodConfig("Parametric-WM-MPC", uses_backbone=True, llm=False, parametric="mpc"),
    MethodConfig("Parametric-WM-MCTS", uses_backbone=True, llm=False, parametric="mcts"),
    _hybrid("Hybrid-ValidityOnly", "validity"),
    _hybrid("Hybrid-DeltaOnly", "delta"),
    _hybrid("Hybrid-RiskOnly", "risk"),
    _hybrid("Hybrid-ValueOnly", "value"),
    _hybrid("Hybrid-Full", *SKELETON_FIELDS),
    _gilp("GILP"),
    _gilp("GILP-NoCorrGate", correct="never", double_rho=False),
    _gilp("GILP-NoRiskGate", risk_gate=False),
    _gilp("GILP-tau0", correct="always"),
    _gilp("GILP-tau1", correct="never"),
)
ORACLE = MethodConfig("Oracle", uses_backbone=False, llm=False, oracle=True)

METHODS: dict[str, MethodConfig] = {m.name: m for m in _METHODS}
METHOD_NAMES: tuple[str, ...] = tuple(METHODS)          # the 13 methods, §4.8 order
REFERENCE: dict[str, MethodConfig] = {ORACLE.name: ORACLE}
# [rev]'s "NoBackbone" ablation is the Agent-Replan configuration (§4.8).
ALIASES = {"NoBackbone": "Agent-Replan"}


# The thresholds a name `METHOD[key=value,...]` may set (in this order in canonical names).
THRESHOLD_KEYS = {"tau_low": float, "tau_high": float, "max_corrections": int, "rho_th": float,
                "skeleton_k": int}
_GATE_KEYS = ("tau_low", "tau_high", "max_corrections")
_THRESHOLD_NAME = re.compile(r"^(?P<base>[^\[\]]+)\[(?P<body>[^\[\]]*)\]$")


def get_method(name: str) -> MethodConfig:
    """The config of a method: one of `METHOD_NAMES`, "Oracle", an alias, or a variant
    `NAME[key=value,...]` of one with other thresholds (`THRESHOLD_KEYS`, e.g.
    `GILP[tau_low=0.5,rho_th=0.4]`); ValueError if unknown or malformed."""
    name = ALIASES.get(name.strip(), name.strip())
    if name in METHODS:
        return METHODS[name]
    if name in REFERENCE:
        return REFERENCE[name]
    match = _THRESHOLD_NAME.match(name)
    if match:
        return _with_thresholds(get_method(match["base"]), match["body"])
    raise ValueError(f"unknown GILP method {name!r} (choose from "
                     f"{', '.join((*METHOD_NAMES, *REFERENCE))}, or NAME[key=value,...])")


def _with_thresholds(base: MethodConfig, body: str) -> MethodConfig:
    """`base` with the thresholds of `body` ("key=value,..."), named `BASE[key=value,...]`."""
    values: dict[str, float | int] = {}
    for part in body.split(","):
        key, sep, text = (x.strip() for x in part.partition("="))
        if key in values:
            raise ValueError(f"bad method variant {base.name}[{body}]: {key} given twice")
        if not sep or key not in THRESHOLD_KEYS:
            raise ValueError(f"bad method variant {base.name}[{body}]: expected key=value with "
                             f"keys from {', '.join(THRESHOLD_KEYS)}")
        try:
            values[key] = THRESHOLD_KEYS[key](text)
        except ValueError:
            raise ValueError(f"bad method variant {base.name}[{body}]: {key}={text!r} is not "
                             f"a{'n integer' if THRESHOLD_KEYS[key] is int else ' number'}") from None
    if not base.llm or not base.uses_backbone:
        raise ValueError(f"{base.name} has no thresholds to vary (no skeleton, no gates)")
    if not base.gated and any(k in values for k in _GATE_KEYS):
        raise ValueError(f"{base.name} has no consistency gate: "
                         f"{', '.join(k for k in values if k in _GATE_KEYS)} would do nothing")
    new = dataclasses.replace(base, name=threshold_name(base.name, values), **values)
    if not 0.0 <= new.tau_low <= new.tau_high <= 1.0 or not 0.0 <= new.rho_th <= 1.0 \
            or new.max_corrections < 0 or not 1 <= new.skeleton_k <= config.A_MAX:
        raise ValueError(f"bad method variant {new.name}: need 0 <= tau_low <= tau_high <= 1, "
                         f"0 <= rho_th <= 1, max_corrections >= 0, 1 <= skeleton_k <= {config.A_MAX}")
    return new


def threshold_name(base: str, values: dict[str, float | int]) -> str:
    """The canonical name of `base` with other thresholds: keys in `THRESHOLD_KEYS` order,
    numbers written so that they read back exactly (`GILP[tau_low=0.5,rho_th=0.4]`)."""
    return f"{base}[" + ",".join(f"{k}={values[k]!r}" for k in THRESHOLD_KEYS if k in values) + "]"


def split_methods(text: str) -> list[str]:
    """A comma list of method names, commas inside a variant's brackets kept."""
    names, depth, start = [], 0, 0
    for i, ch in enumerate(text + ","):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            names.append(text[start:i].strip())
            start = i + 1
    return [n for n in names if n]


def with_tau_low(method: MethodConfig, tau_low: float, name: str | None = None) -> MethodConfig:
    """A τ_low sweep point of a gated method (named e.g. "GILP[tau_low=0.25]")."""
    if not method.gated:
        raise ValueError(f"{method.name} has no consistency gate")
    return dataclasses.replace(method, tau_low=float(tau_low),
                               name=name or threshold_name(method.name,
                                                           {"tau_low": float(tau_low)}))


# ---------------------------------------------------------------------------------------------
# Traced method flags: one compiled simulator for every LLM method
# ---------------------------------------------------------------------------------------------

@chex.dataclass(frozen=True)
class MethodFlags:
    """A method's behaviour as array leaves, so the simulator can take it as a traced argument:
    one compile covers every LLM method of a benchmark, and methods can be
    stacked on a leading axis and vmapped. `method_flags` builds it from a `MethodConfig`.

    Attributes (`[]` each, or `[M]` when stacked):
      backbone, skeleton, validity, delta, risk, value: bool, as the `MethodConfig` properties.
      gated: bool, Phases 3-4 exist.
      correct_mode: int32 index into `CORRECT_MODES` (band / always / never).
      double_rho, risk_gate: bool, as the `MethodConfig` fields.
      tau_low, tau_high, rho_th: float32 thresholds.
      max_corrections: int32 correction calls per step.
    """

    backbone: chex.Array
    skeleton: chex.Array
    validity: chex.Array
    delta: chex.Array
    risk: chex.Array
    value: chex.Array
    gated: chex.Array
    correct_mode: chex.Array
    double_rho: chex.Array
    risk_gate: chex.Array
    tau_low: chex.Array
    tau_high: chex.Array
    rho_th: chex.Array
    max_corrections: chex.Array


def method_flags(method: MethodConfig) -> MethodFlags:
    """The traced form of an LLM method's configuration (the Oracle and the parametric planners
    have none: they run their own compiled paths)."""
    if not method.llm:
        raise ValueError(f"{method.name} is not an LLM method; it has no simulator flags")
    return MethodFlags(
        backbone=np.bool_(method.uses_backbone), skeleton=np.bool_(method.skeleton),
        validity=np.bool_(method.has_validity), delta=np.bool_(method.has_delta),
        risk=np.bool_(method.has_risk), value=np.bool_(method.has_value),
        gated=np.bool_(method.gated),
        correct_mode=np.int32(CORRECT_MODES.index(method.correct or "never")),
        double_rho=np.bool_(method.double_rho), risk_gate=np.bool_(method.risk_gate),
        tau_low=np.float32(method.tau_low), tau_high=np.float32(method.tau_high),
        rho_th=np.float32(method.rho_th), max_corrections=np.int32(method.max_corrections))


def stack_flags(methods: list[MethodConfig]) -> MethodFlags:
    """`MethodFlags` of several methods stacked on a leading `[M]` axis."""
    flags = [method_flags(m) for m in methods]
    return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *flags)
