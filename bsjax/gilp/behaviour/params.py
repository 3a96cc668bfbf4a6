"""Parameters of the behavioural LLM simulator (docs/gilp/spec.md §5.2 parameter table).

`SimParams` is a frozen chex dataclass, so it is a pytree: it is passed to the jitted episode
function as an argument (calibration changes values without recompiling, and parameter sets can
be vmapped). Values are plain floats on the host; `gilp_sim_params.json` stores them together
with optional fit residuals and metadata.

Token-model coefficients (`tok_*`) are placeholders until the calibration stage fits them on
rendered prompts (spec §5.2 item 6).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.resources
import json
from pathlib import Path

import chex

PARAMS_FILE = "gilp_sim_params.json"
LOCAL_PARAMS_FILE = "gilp_sim_params.local.json"
FORMAT = 1
# Parameter files shipped with bsjax (package data `bsjax/data/gilp/`), loadable by name wherever
# a parameter file is accepted (`--params calibrated`); each file's `meta.provenance` says how it
# was fitted. A parameter file on disk wins over a preset of the same name.
PRESETS = {"calibrated": "gilp_sim_params_calibrated.json"}


@chex.dataclass(frozen=True)
class SimParams:
    """Agent-side event probabilities and the token model (spec §5.2). All scalar floats.

    Attributes (initial values of the spec table):
      p_parse: unparseable reply per call (0.004, fixed).
      c_tg: competence on TaskGraph, P(belief-optimal action) (0.90).
      c_scale: competence of the other three benchmarks relative to TaskGraph (0.90, derived).
      t_slip: slip temperature over J̃ (0.25).
      h0, h1, h2: base hallucination probability, ramp by k = 10, increment per live false atom
        (0.14, 0.10, 0.03).
      p_two: P(n_h = 2) of a hallucination event (0.3, fixed).
      pi_fc, pi_we, pi_dep, pi_val: hallucination type mix (0.35, 0.30, 0.20, 0.15).
      q_fb: feedback absorbed for the action's own nodes (0.6).
      q_rec: spontaneous recovery per step (0.25).
      kappa_delta: hallucination reduction with the delta field (0.35).
      eta_ground: copy the backbone delta for the chosen action (0.40).
      kappa_rec: extra recovery with the delta field (0.20).
      eta_val, eta_risk, eta_value, eta_in: skeleton effects (0.50, 0.50, 0.50, 0.30).
      beta: a correction succeeds (0.93, fixed, §4.4).
      beta_risk: follow the risk-gate advice with the best alternative (0.90, fixed).
      tok_a0_draft, tok_a0_reparse, tok_a0_correct, tok_a0_risk: intercept a0[call_type].
      tok_a_n, tok_a_a, tok_a_b, tok_a_w: tokens per real node, per candidate, per skeleton row,
        per history line.
      tok_out_base, tok_out_atom, tok_out_sd: `T_out = max(20, round(60 + 12·n_atoms + N(0, 10²)))`.
      conf_base, conf_halluc, conf_sd: `ẑ = clip(0.9 − 0.3·[event] + N(0, 0.05²), 0, 1)`.
    """

    p_parse: float = 0.004
    c_tg: float = 0.90
    c_scale: float = 0.90
    t_slip: float = 0.25
    h0: float = 0.14
    h1: float = 0.10
    h2: float = 0.03
    p_two: float = 0.3
    pi_fc: float = 0.35
    pi_we: float = 0.30
    pi_dep: float = 0.20
    pi_val: float = 0.15
    q_fb: float = 0.6
    q_rec: float = 0.25
    kappa_delta: float = 0.35
    eta_ground: float = 0.40
    kappa_rec: float = 0.20
    eta_val: float = 0.50
    eta_risk: float = 0.50
    eta_value: float = 0.50
    eta_in: float = 0.30
    beta: float = 0.93
    beta_risk: float = 0.90
    # Token model (placeholders; fitted later by least squares on rendered prompts).
    tok_a0_draft: float = 250.0
    tok_a0_reparse: float = 280.0
    tok_a0_correct: float = 380.0
    tok_a0_risk: float = 330.0
    tok_a_n: float = 14.0
    tok_a_a: float = 5.0
    tok_a_b: float = 30.0
    tok_a_w: float = 16.0
    tok_out_base: float = 60.0
    tok_out_atom: float = 12.0
    tok_out_sd: float = 10.0
    conf_base: float = 0.9
    conf_halluc: float = 0.3
    conf_sd: float = 0.05


PARAM_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SimParams))


def default_params(**overrides: float) -> SimParams:
    """The spec's initial values, with optional overrides (unknown names raise ValueError)."""
    unknown = [k for k in overrides if k not in PARAM_NAMES]
    if unknown:
        raise ValueError(f"unknown simulator parameter(s) {unknown}")
    return SimParams(**{k: float(v) for k, v in overrides.items()})


def to_dict(params: SimParams) -> dict[str, float]:
    """Host floats by name, in field order."""
    return {name: float(getattr(params, name)) for name in PARAM_NAMES}


def from_dict(values: dict) -> SimParams:
    """A `SimParams` from a name -> value map; missing names take their initial value."""
    return default_params(**values)


def _path(path: str | Path) -> Path:
    path = Path(path)
    return path / PARAMS_FILE if path.is_dir() else path


def preset_path(name: str) -> Path:
    """The package-data file of a named parameter preset (`PRESETS`); ValueError if unknown."""
    if name not in PRESETS:
        raise ValueError(f"unknown simulator parameter preset {name!r} "
                         f"(choose from {', '.join(PRESETS)})")
    return Path(str(importlib.resources.files("bsjax") / "data" / "gilp" / PRESETS[name]))


def _source(path: str | Path) -> Path:
    """The file to read for `path`: a parameter file on disk (or a directory holding one), else
    a preset's file."""
    resolved = _path(path)
    if not resolved.is_file() and str(path) in PRESETS:
        return preset_path(str(path))
    return resolved


def save_params(path: str | Path, params: SimParams, residuals: dict | None = None,
                meta: dict | None = None) -> Path:
    """Write `{"format", "params", "residuals", "meta"}` as JSON (a directory gets
    `gilp_sim_params.json`); returns the file path."""
    path = _path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"format": FORMAT, "params": to_dict(params), "residuals": residuals or {},
           "meta": meta or {}}
    path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    return path


def load_params(path: str | Path, bench: str | None = None) -> SimParams:
    """Read the parameters of a file written by `save_params` (or a bare name -> value map), of
    a run directory holding one, or of a shipped preset by name (`PRESETS`, e.g. `calibrated`).

    With `bench`, that benchmark's own token-model coefficients replace the pooled ones when the
    file holds them (`residuals.token_model.coefs_per_bench`, written by calibration)."""
    path = _source(path)
    if not path.is_file():
        raise FileNotFoundError(f"simulator parameter file not found: {path} (shipped presets: "
                                f"{', '.join(PRESETS)})")
    doc = json.loads(path.read_text())
    values = doc.get("params", doc) if isinstance(doc, dict) else None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a JSON object of parameters")
    values = {k: v for k, v in values.items() if k != "format"}
    if bench is not None and isinstance(doc, dict):
        token_model = (doc.get("residuals") or {}).get("token_model") or {}
        values.update((token_model.get("coefs_per_bench") or {}).get(bench, {}))
    return from_dict(values)


def params_digest(params) -> str | None:
    """A short stable hash of a `SimParams` or `{bench: SimParams}` (None stays None), for run
    configurations: a resumed run must not mix two parameter sets."""
    if params is None:
        return None
    per_bench = params if isinstance(params, dict) else {"*": params}
    doc = {bench: to_dict(p) for bench, p in sorted(per_bench.items())}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def params_for(params, bench: str):
    """The `SimParams` of a benchmark from a single set or a `{bench: SimParams}` map (None
    stays None: the initial values)."""
    return params.get(bench) if isinstance(params, dict) else params
