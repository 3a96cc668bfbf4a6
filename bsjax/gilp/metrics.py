"""GILP metrics (docs/gilp/spec.md §6.2), computed on the host from event rows alone.

Input is a list of event rows as read from `events.jsonl` (schema: `bsjax.gilp.events`), or the
same rows already grouped into episodes (`events.group_episodes`). Every metric function takes
either. Pooling is by episode over benchmarks and seeds (§5). Undefined values (no episodes, no
atoms, no successes, no belief) are None, so summaries are JSON-serialisable as they are.

Definitions in brief (k = t + 1):
- SR: fraction of episodes whose last row has `success`; 95% Wilson CI (bsjax.core.stats).
- HSR: per episode #hallucinated committed atoms / #committed atoms, averaged over episodes with
  >= 1 atom (the rest are counted in `excluded`); CI mean ± 1.96·sd/√n with the sample sd
  (ddof = 1; no CI for n < 2), kept within [0, 1]. HSR_micro pools atoms; HSR_draft is HSR on
  `draft_atoms`; HSR_all uses every atom of every call (`halluc_calls`, else the draft plus, on a corrected or
  risk-gated step, the committed output).
- PD: for each committed hallucinated atom (v, s) of step t, the number of later steps t' whose
  `live_atoms` hold [v, s], counted until the first step where it is not live; a later committed
  atom on v ends the count after that step (the new claim takes over). Mean over atoms.
- EES: m_k = mean over episodes that executed step k of (hallucinated committed atoms at k +
  `live_false_atoms` at k, or len(live_atoms), or 0 without belief); OLS slope of ln(m_k + 0.01)
  on k = 1..8 (ks no episode reached are left out).
- IAR: rows with valid = false / rows. RWF: mean_e 1[failed] · max_t rho_star·bad_outcome.
- Tok/Task: mean_e Σ(tok_in + tok_out); Tok/Succ: Σ tokens / #successes. Calls/step, correction
  rate (`corrected`), risk-gate rate (`risk_fired`) per executed step. $/1k tasks at a price row.
- p_err(k): E_k = committed atoms of step k hold a hallucinated atom or the action is invalid;
  #episodes with E_k / #episodes that executed step k, flagged when < 30 episodes reach k.
  p_err_draft(k) is the same with the draft atoms (equal to p_err for gateless methods).
- ExpectedErrors@K = Σ p_err(k); IndepBound@K = 1 − Π(1 − p_err(k)); P_any(H) among episodes
  with >= H steps, the fraction with some E_k, k <= H.
- α̂ = P(cons < τ_low | draft hallucinated, cons logged); β̂ = P(no hallucinated committed atom |
  corrected ∧ draft hallucinated); Prop. 1 predictions (1 − α̂β̂)·HSR_draft and ·p_err_draft(10).
- SR by bucket over config.HORIZON_BUCKETS; OOD gap SR_id − SR_ood.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from bsjax.core.stats import wilson_interval
from bsjax.gilp import config
from bsjax.gilp.events import group_episodes

Episode = list[dict]
GPT4O_MINI_PRICE = (0.15, 0.60)  # USD per million tokens in / out (§5.1)
P_ERR_MIN_EPISODES = 30


def _episodes(data) -> list[Episode]:
    data = list(data)
    if data and isinstance(data[0], dict):
        return group_episodes(data)
    return data


def _rows(eps: list[Episode]):
    return (row for ep in eps for row in ep)


def _mean(values) -> float | None:
    values = list(values)
    return float(sum(values) / len(values)) if values else None


def _succeeded(ep: Episode) -> bool:
    return bool(ep[-1]["success"])


# --- atoms -------------------------------------------------------------------------------------

def hallucinated(atoms, support, status_before) -> list[int]:
    """0/1 flag per atom [v, status]: 1 iff the claimed status is outside `support[v]`, the set of
    statuses v can have after the true transition (`support`: [N, 5] bool from env.support). An
    "unknown" atom is hallucinated iff v cannot change (its support is only `status_before[v]`)."""
    support = np.asarray(support, bool)
    status_before = np.asarray(status_before)
    flags = []
    for v, s in atoms:
        if s == "unknown":
            can_change = bool(np.any(np.delete(support[v], int(status_before[v]))))
            flags.append(int(not can_change))
        else:
            code = s if isinstance(s, (int, np.integer)) else config.STATUS_NAMES.index(s)
            flags.append(int(not support[v, code]))
    return flags


# --- success -----------------------------------------------------------------------------------

def success_rate(data) -> dict:
    """{"sr", "ci": [lo, hi], "successes", "n"} (Wilson 95%)."""
    eps = _episodes(data)
    wins = sum(_succeeded(ep) for ep in eps)
    return {"sr": wins / len(eps) if eps else None, "ci": list(wilson_interval(wins, len(eps))),
            "successes": wins, "n": len(eps)}


def sr_by_bucket(data) -> dict[str, dict]:
    """success_rate per oracle-horizon bucket (H <= 3, 4-6, 7-10, > 10)."""
    eps = _episodes(data)
    return {name: success_rate([ep for ep in eps if lo <= ep[0]["H"] <= hi])
            for name, (lo, hi) in zip(config.HORIZON_BUCKET_NAMES, config.HORIZON_BUCKETS)}


def ood_gap(data) -> float | None:
    """SR_id − SR_ood (None unless both splits are present)."""
    eps = _episodes(data)
    sr = {s: success_rate([ep for ep in eps if ep[0]["split"] == s])["sr"] for s in ("id", "ood")}
    return None if None in sr.values() else sr["id"] - sr["ood"]


# --- hallucination -----------------------------------------------------------------------------

def _call_flags(row: dict) -> list[int]:
    if "halluc_calls" in row:
        return [f for call in row["halluc_calls"] for f in call]
    extra = row["halluc_committed"] if (row["corrected"] or row["risk_fired"]) else []
    return list(row["halluc_draft"]) + list(extra)


_FLAGS: dict[str, Callable[[dict], list[int]]] = {
    "committed": lambda r: r["halluc_committed"],
    "draft": lambda r: r["halluc_draft"],
    "all": _call_flags,
}


def hsr(data, level: str = "committed") -> dict:
    """Per-episode HSR at `level` (committed / draft / all): {"hsr", "ci", "sd", "n",
    "excluded"}; `excluded` counts episodes without atoms."""
    flags_of = _FLAGS[level]
    per_episode, excluded = [], 0
    for ep in _episodes(data):
        flags = [f for row in ep for f in flags_of(row)]
        if flags:
            per_episode.append(sum(flags) / len(flags))
        else:
            excluded += 1
    n = len(per_episode)
    mean = _mean(per_episode)
    sd = float(np.std(per_episode, ddof=1)) if n >= 2 else None
    # Normal interval of the per-episode mean, kept inside [0, 1] (HSR is a proportion).
    ci = [max(0.0, mean - 1.96 * sd / math.sqrt(n)), min(1.0, mean + 1.96 * sd / math.sqrt(n))] \
        if n >= 2 else None
    return {"hsr": mean, "ci": ci, "sd": sd, "n": n, "excluded": excluded}


def hsr_micro(data, level: str = "committed") -> float | None:
    """Pooled hallucinated atoms / pooled atoms."""
    flags = [f for row in _rows(_episodes(data)) for f in _FLAGS[level](row)]
    return sum(flags) / len(flags) if flags else None


def hsr_draft(data) -> float | None:
    return hsr(data, "draft")["hsr"]


def hsr_all(data) -> float | None:
    return hsr(data, "all")["hsr"]


def propagation_depth(data) -> dict:
    """{"pd": mean persistence in steps, "atoms": n}; pd None without belief or atoms."""
    depths = []
    for ep in _episodes(data):
        if any(row.get("live_atoms") is None for row in ep):
            continue
        live = [{tuple(a) for a in row["live_atoms"]} for row in ep]
        claimed = [{a[0] for a in row["committed_atoms"]} for row in ep]
        for t, row in enumerate(ep):
            for (v, s), flag in zip(row["committed_atoms"], row["halluc_committed"]):
                if not flag:
                    continue
                count = 0
                for later in range(t + 1, len(ep)):
                    if (v, s) not in live[later]:
                        break
                    count += 1
                    if v in claimed[later]:
                        break
                depths.append(count)
    return {"pd": _mean(depths), "atoms": len(depths)}


def _carried(row: dict) -> int:
    if row["live_false_atoms"] is not None:
        return row["live_false_atoms"]
    return len(row["live_atoms"]) if row.get("live_atoms") is not None else 0


def error_mass(data, k_max: int = 8) -> list[float | None]:
    """m_k for k = 1..k_max (None where no episode executed step k)."""
    eps = _episodes(data)
    return [_mean(sum(ep[k - 1]["halluc_committed"]) + _carried(ep[k - 1])
                  for ep in eps if len(ep) >= k) for k in range(1, k_max + 1)]


def ees(data, k_max: int = 8) -> float | None:
    """Error-escalation slope: OLS slope of ln(m_k + 0.01) on k = 1..k_max."""
    m = error_mass(data, k_max)
    ks = [k for k, mk in enumerate(m, 1) if mk is not None]
    if len(ks) < 2:
        return None
    y = [math.log(m[k - 1] + 0.01) for k in ks]
    return float(np.polyfit(np.asarray(ks, float), np.asarray(y), 1)[0])


# --- actions, risk, cost -----------------------------------------------------------------------

def invalid_action_rate(data) -> float | None:
    rows = list(_rows(_episodes(data)))
    return sum(not r["valid"] for r in rows) / len(rows) if rows else None


def risk_weighted_failure(data) -> float | None:
    """mean_e 1[failed] · max_t rho_star·bad_outcome; lies in [0, 1 − SR]."""
    eps = _episodes(data)
    return _mean(0.0 if _succeeded(ep) else max(r["rho_star"] * r["bad_outcome"] for r in ep)
                 for ep in eps)


def _tokens(ep: Episode) -> int:
    return sum(r["tok_in"] + r["tok_out"] for r in ep)


def tokens_per_task(data) -> float | None:
    return _mean(_tokens(ep) for ep in _episodes(data))


def tokens_per_success(data) -> float | None:
    eps = _episodes(data)
    wins = sum(_succeeded(ep) for ep in eps)
    return sum(_tokens(ep) for ep in eps) / wins if wins else None


def call_rates(data) -> dict:
    """{"calls_step", "corr_rate", "risk_rate", "parse_fail_rate"} per executed step."""
    rows = list(_rows(_episodes(data)))
    if not rows:
        return dict.fromkeys(("calls_step", "corr_rate", "risk_rate", "parse_fail_rate"))
    n = len(rows)
    return {"calls_step": sum(r["calls"] for r in rows) / n,
            "corr_rate": sum(r["corrected"] for r in rows) / n,
            "risk_rate": sum(r["risk_fired"] for r in rows) / n,
            "parse_fail_rate": sum(r["parse_fail"] for r in rows) / n}


def cost_per_1k(data, price: tuple[float, float] = GPT4O_MINI_PRICE) -> float | None:
    """1000 · mean_e Σ(tok_in·p_in + tok_out·p_out)·1e-6 USD, prices per million tokens."""
    p_in, p_out = price
    return _mean(1e-3 * sum(r["tok_in"] * p_in + r["tok_out"] * p_out for r in ep)
                 for ep in _episodes(data))


def wall_per_task(data) -> float | None:
    """Mean per-episode Σ wall_s (None unless every row logs it)."""
    eps = _episodes(data)
    if not eps or any("wall_s" not in r for r in _rows(eps)):
        return None
    return _mean(sum(r["wall_s"] for r in ep) for ep in eps)


# --- per-step error proxies --------------------------------------------------------------------

def _err(row: dict, level: str = "committed") -> bool:
    return (not row["valid"]) or any(_FLAGS[level](row))


def p_err(data, k_max: int = 10, level: str = "committed",
          min_episodes: int = P_ERR_MIN_EPISODES) -> list[dict]:
    """[{"k", "p", "errors", "n", "flagged"}] for k = 1..k_max; p None where n = 0."""
    eps = _episodes(data)
    out = []
    for k in range(1, k_max + 1):
        reached = [ep[k - 1] for ep in eps if len(ep) >= k]
        errors = sum(_err(row, level) for row in reached)
        out.append({"k": k, "p": errors / len(reached) if reached else None, "errors": errors,
                    "n": len(reached), "flagged": len(reached) < min_episodes})
    return out


def _profile(p) -> list[float | None]:
    return [x["p"] if isinstance(x, dict) else x for x in p]


def expected_errors(p) -> float | None:
    """Σ_k p_err(k) over a profile (floats or p_err's dicts); None if any k is undefined."""
    ps = _profile(p)
    return None if any(x is None for x in ps) else float(sum(ps))


def indep_bound(p) -> float | None:
    """1 − Π_k (1 − p_err(k)); a lower bound on P(any error) under positive correlation."""
    ps = _profile(p)
    return None if any(x is None for x in ps) else float(1.0 - np.prod([1.0 - x for x in ps]))


def p_any(data, h_max: int = 15) -> list[dict]:
    """[{"H", "p", "n"}]: among episodes with >= H steps, the fraction with an E_k, k <= H."""
    eps = _episodes(data)
    # (length, 1-based step of the first error or inf) per episode.
    firsts = [(len(ep), next((k for k, row in enumerate(ep, 1) if _err(row)), math.inf))
              for ep in eps]
    out = []
    for h in range(1, h_max + 1):
        long = [first for length, first in firsts if length >= h]
        hits = sum(first <= h for first in long)
        out.append({"H": h, "p": hits / len(long) if long else None, "n": len(long)})
    return out


def gate_alpha_beta(data, tau_low: float = 0.30) -> dict:
    """α̂, β̂ with their counts, and per-k versions {"alpha_k": {k: α̂_k}, "beta_k": ...}."""
    alpha_hits, beta_hits = {}, {}
    for row in _rows(_episodes(data)):
        if not any(row["halluc_draft"]):
            continue
        k = row["t"] + 1
        if row["cons"] is not None:
            alpha_hits.setdefault(k, []).append(row["cons"] < tau_low)
        if row["corrected"]:
            beta_hits.setdefault(k, []).append(not any(row["halluc_committed"]))
    pooled = lambda d: _mean(x for v in d.values() for x in v)  # noqa: E731
    return {"alpha": pooled(alpha_hits), "n_alpha": sum(map(len, alpha_hits.values())),
            "beta": pooled(beta_hits), "n_beta": sum(map(len, beta_hits.values())),
            "alpha_k": {k: _mean(v) for k, v in sorted(alpha_hits.items())},
            "beta_k": {k: _mean(v) for k, v in sorted(beta_hits.items())}}


# --- summaries ---------------------------------------------------------------------------------

def summarise_method(data, price: tuple[float, float] = GPT4O_MINI_PRICE, tau_low: float = 0.30,
                     k_max: int = 10) -> dict:
    """Every §6.2 metric of one group of episodes, as a flat JSON-serialisable dict."""
    eps = _episodes(data)
    sr = success_rate(eps)
    buckets = {name: [ep for ep in eps if lo <= ep[0]["H"] <= hi]
               for name, (lo, hi) in zip(config.HORIZON_BUCKET_NAMES, config.HORIZON_BUCKETS)}
    h, hd = hsr(eps), hsr(eps, "draft")
    pe, pe_draft = p_err(eps, k_max), p_err(eps, k_max, level="draft")
    gate = gate_alpha_beta(eps, tau_low)
    pd = propagation_depth(eps)
    out = {
        "episodes": len(eps), "steps": sum(len(ep) for ep in eps),
        "sr": sr["sr"], "sr_ci": sr["ci"], "successes": sr["successes"],
        "sr_buckets": {b: success_rate(e) for b, e in buckets.items()},
        "hsr_buckets": {b: hsr(e)["hsr"] for b, e in buckets.items()},
        "hsr": h["hsr"], "hsr_ci": h["ci"], "hsr_n": h["n"], "hsr_excluded": h["excluded"],
        "hsr_micro": hsr_micro(eps), "hsr_draft": hd["hsr"], "hsr_all": hsr_all(eps),
        "pd": pd["pd"], "pd_atoms": pd["atoms"], "m_k": error_mass(eps), "ees": ees(eps),
        "iar": invalid_action_rate(eps), "rwf": risk_weighted_failure(eps),
        "tok_task": tokens_per_task(eps), "tok_succ": tokens_per_success(eps),
        **call_rates(eps),
        "usd_1k": cost_per_1k(eps, price), "wall_task": wall_per_task(eps),
        "p_err": pe, "p_err_draft": pe_draft,
        "expected_errors": expected_errors(pe), "indep_bound": indep_bound(pe),
        "p_any": p_any(eps),
        "alpha": gate["alpha"], "n_alpha": gate["n_alpha"], "beta": gate["beta"],
        "n_beta": gate["n_beta"], "alpha_k": gate["alpha_k"], "beta_k": gate["beta_k"],
        "ood_gap": ood_gap(eps),
        "fallbacks": sum(r["fallback"] for r in _rows(eps)),
        "timeouts": sum(bool(ep[-1].get("timeout", False)) for ep in eps),
        "dead_ends": sum(bool(ep[-1]["dead_end"]) for ep in eps),
    }
    out["sr_h10"] = out["sr_buckets"][config.HORIZON_BUCKET_NAMES[-1]]["sr"]
    out["hsr_h10"] = out["hsr_buckets"][config.HORIZON_BUCKET_NAMES[-1]]
    ab = None if None in (gate["alpha"], gate["beta"]) else 1.0 - gate["alpha"] * gate["beta"]
    out["prop1_hsr"] = None if ab is None or hd["hsr"] is None else ab * hd["hsr"]
    last = pe_draft[-1]["p"]
    out["prop1_perr"] = None if ab is None or last is None else ab * last
    return out


def _group(data, key: Callable[[Episode], object]) -> dict:
    groups: dict = {}
    for ep in _episodes(data):
        groups.setdefault(key(ep), []).append(ep)
    return groups


def summarise(rows, **kw) -> dict[str, dict]:
    """{method: summarise_method(its episodes)} in first-appearance order."""
    return {m: summarise_method(eps, **kw)
            for m, eps in _group(rows, lambda ep: ep[0]["method"]).items()}


def _breakdown(rows, key, order: Sequence, **kw) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for method, eps in _group(rows, lambda ep: ep[0]["method"]).items():
        parts = _group(eps, key)
        out[method] = {name: summarise_method(parts[name], **kw) for name in order
                       if name in parts}
    return out


def _bucket(ep: Episode) -> str:
    h = ep[0]["H"]
    return next(name for name, (lo, hi) in zip(config.HORIZON_BUCKET_NAMES, config.HORIZON_BUCKETS)
                if lo <= h <= hi)


def by_bucket(rows, **kw) -> dict[str, dict[str, dict]]:
    """{method: {bucket: summary}} over the oracle-horizon buckets."""
    return _breakdown(rows, _bucket, config.HORIZON_BUCKET_NAMES, **kw)


def by_benchmark(rows, **kw) -> dict[str, dict[str, dict]]:
    """{method: {bench: summary}} (appendix tables)."""
    return _breakdown(rows, lambda ep: ep[0]["bench"], config.BENCHMARKS, **kw)


def by_split(rows, **kw) -> dict[str, dict[str, dict]]:
    """{method: {"id" | "ood": summary}}."""
    return _breakdown(rows, lambda ep: ep[0]["split"], ("id", "ood"), **kw)
