"""GILP figures F1, F2, F4, F5, F6 (docs/gilp/spec.md §7) as PNGs (matplotlib, Agg backend).

Inputs are the pooled metrics of `bsjax.gilp.metrics.summarise` ({method: summarise_method(...)}),
a run's whole `summary.json` dict (its "pooled" part is used) or a run directory holding one.
Methods absent from the summary are left out of every figure; a figure with nothing to draw is not
written. Optional event rows (`rows`) add what the summary lacks: the HSR CI per horizon bucket
(F1) and IndepBound(H) beyond the summary's k ≤ 10 (F6).

Backbone table (F4, and `gilp_tables.table4`): `{scope: {backbone: {"standalone_sr": float|None,
"hybrid_sr": float|None, ...}}}` with scope a benchmark or "pooled" (F4 draws "pooled"), or the
flat `{backbone: {...}}` of one scope. None = not measured: the bar is absent and a note says so.
"""

from __future__ import annotations

import glob
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bsjax.gilp import config, metrics, paper_numbers
from bsjax.gilp.events import group_episodes, read_events  # noqa: E402

F1_METHODS = ("Agent-Replan", "Parametric-WM-MPC", "Parametric-WM-MCTS", "Hybrid-Full", "GILP")
F5_METHODS = ("GILP", "GILP-NoCorrGate", "GILP-NoRiskGate", "GILP-tau0", "GILP-tau1")
F5_REFERENCE = "Hybrid-Full"
F6_METHODS = ("Agent-Replan", "Hybrid-Full", "GILP")
BACKBONE_ORDER = ("MLP", "GCN", "MPNN", "GPS", "ActionNode", "ErrorAware")
ZERO_TOKEN_X = 10.0  # parametric planners use no tokens; a log axis cannot show 0
H_MAX = 15
FILES = {"f1": "f1_horizons.png", "f2": "f2_pareto.png", "f4": "f4_backbones.png",
         "f5": "f5_ablations.png", "f6": "f6_error_proxies.png"}

COLOURS = {"Agent-Replan": "#e76f51", "Parametric-WM-MPC": "#8d99ae",
           "Parametric-WM-MCTS": "#6d597a", "Hybrid-Full": "#2a9d8f", "GILP": "#264653"}
PAPER_STYLE = dict(marker="D", color="#e9c46a", edgecolor="black", zorder=4, s=28)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def _colour(method: str, i: int) -> str:
    return COLOURS.get(method, plt.get_cmap("tab20")(i % 20))


def _nan(x) -> float:
    return math.nan if x is None else float(x)


def pooled_summary(inputs) -> dict:
    """{method: metrics} from a pooled summary, a summary.json dict or a run directory."""
    if isinstance(inputs, (str, Path)):
        inputs = json.loads((Path(inputs) / "summary.json").read_text())
    if "pooled" in inputs and isinstance(inputs["pooled"], Mapping):
        return dict(inputs["pooled"])
    return dict(inputs)


def run_rows(run_dir: str | Path, methods: Sequence[str]) -> list[dict]:
    """Event rows of `methods` from a harness run dir (`events/METHOD__BENCH__SPLIT.jsonl`)."""
    rows = []
    for method in methods:
        # Variant names (`GILP[tau_low=0.5]`) hold brackets: match them literally.
        for path in sorted((Path(run_dir) / "events").glob(f"{glob.escape(method)}__*.jsonl")):
            rows.extend(read_events(path))
    return rows


def _episodes_by_method(rows) -> dict[str, list[list[dict]]]:
    out: dict[str, list] = {}
    for ep in group_episodes(list(rows or [])):
        out.setdefault(ep[0]["method"], []).append(ep)
    return out


def _present(summary: dict, methods: Sequence[str], key: str) -> list[str]:
    return [m for m in methods if m in summary and summary[m].get(key) is not None]


# --- F1 ------------------------------------------------------------------------------------------

def f1_horizons(summary: dict, path: Path, rows=None, methods=F1_METHODS) -> Path | None:
    """SR (Wilson 95% bars) and HSR per oracle-horizon bucket, one line per method. With `rows`,
    the HSR points get their per-episode CI (mean ± 1.96·sd/√n, within [0, 1])."""
    methods = _present(summary, methods, "sr_buckets")
    if not methods:
        return None
    eps = _episodes_by_method(rows)
    names = config.HORIZON_BUCKET_NAMES
    xs = list(range(len(names)))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for i, m in enumerate(methods):
        s, colour = summary[m], _colour(m, i)
        shift = [x + 0.04 * (i - (len(methods) - 1) / 2) for x in xs]  # keep CI bars apart
        buckets = [s["sr_buckets"].get(b, {}) for b in names]
        sr = [_nan(b.get("sr")) for b in buckets]
        lo = [0.0 if b.get("sr") is None else b["sr"] - b["ci"][0] for b in buckets]
        hi = [0.0 if b.get("sr") is None else b["ci"][1] - b["sr"] for b in buckets]
        left.errorbar(shift, sr, yerr=[lo, hi], marker="o", capsize=3, color=colour, label=m)
        hsr_err = None
        if m in eps:
            per = [metrics.hsr([ep for ep in eps[m] if lo_h <= ep[0]["H"] <= hi_h])
                   for lo_h, hi_h in config.HORIZON_BUCKETS]
            hsr = [_nan(h["hsr"]) for h in per]
            hsr_err = [[0.0 if h["ci"] is None else h["hsr"] - h["ci"][0] for h in per],
                       [0.0 if h["ci"] is None else h["ci"][1] - h["hsr"] for h in per]]
        else:
            hsr = [_nan(s.get("hsr_buckets", {}).get(b)) for b in names]
        right.errorbar(shift, hsr, yerr=hsr_err, marker="o", capsize=3, color=colour, label=m)
    labels = [b.replace("H<=", "H ≤ ").replace(">10", "H > 10").replace("-", "–") for b in names]
    for ax, ylabel in ((left, "SR (Wilson 95% CI)"), (right, "HSR (committed atoms)")):
        ax.set_xticks(xs, labels)
        ax.set_xlabel("oracle horizon")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    left.set_ylim(0, 1.05)
    right.set_ylim(bottom=0)
    left.legend(fontsize=8, loc="lower left")
    fig.suptitle("F1 — success and hallucination by horizon bucket", fontsize=10)
    return _save(fig, path)


# --- F2 ------------------------------------------------------------------------------------------

def pareto_front(points: Sequence[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    """(name, tokens, sr) points no other point beats (≤ tokens and ≥ SR, one strictly), sorted
    by tokens."""
    front = [p for p in points
             if not any(q[1] <= p[1] and q[2] >= p[2] and (q[1] < p[1] or q[2] > p[2])
                        for q in points)]
    return sorted(front, key=lambda p: (p[1], -p[2]))


def f2_pareto(summary: dict, path: Path) -> Path | None:
    """SR vs Tok/Task (log x) for every method with both; 0-token methods drawn at x = 10."""
    points = [(m, s["tok_task"], s["sr"]) for m, s in summary.items()
              if m != paper_numbers.ORACLE and s.get("sr") is not None and s.get("tok_task") is not None]
    if not points:
        return None
    shown = [(m, tok if tok > 0 else ZERO_TOKEN_X, sr) for m, tok, sr in points]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (m, x, sr) in enumerate(shown):
        zero = summary[m]["tok_task"] <= 0
        ax.scatter([x], [sr], marker="^" if zero else "o", s=40, color=_colour(m, i), zorder=3)
        ax.annotate(m, (x, sr), textcoords="offset points", xytext=(4, 3), fontsize=7)
    front = pareto_front(shown)
    ax.step([p[1] for p in front], [p[2] for p in front], where="post", color="black",
            linestyle="--", linewidth=1, label="Pareto frontier")
    oracle = summary.get(paper_numbers.ORACLE, {}).get("sr")
    if oracle is not None:
        ax.axhline(oracle, color="grey", linestyle=":", linewidth=1, label="Oracle SR")
    if any(summary[m]["tok_task"] <= 0 for m, *_ in shown):
        ax.scatter([], [], marker="^", color="grey", label=f"0 tokens (drawn at x = {ZERO_TOKEN_X:g})")
    ax.set_xscale("log")
    ax.set_xlabel("Tok/Task (log scale)")
    ax.set_ylabel("SR")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("F2 — success vs token cost", fontsize=10)
    return _save(fig, path)


# --- F4 ------------------------------------------------------------------------------------------

def backbone_scope(backbones: dict, scope: str = "pooled") -> dict[str, dict]:
    """{backbone: values} of one scope from a per-scope backbone table, or the flat table as is."""
    if scope in backbones or any(b in backbones for b in config.BENCHMARKS):
        return dict(backbones.get(scope, {}))
    return dict(backbones)


def _backbone_order(names) -> list[str]:
    return [b for b in BACKBONE_ORDER if b in names] + [b for b in names if b not in BACKBONE_ORDER]


def f4_backbones(backbones: dict, path: Path, scope: str = "pooled") -> Path | None:
    """Grouped bars per backbone: standalone SR (Parametric-WM-MPC) vs hybrid SR (Hybrid-Full);
    paper values as diamonds; unmeasured values are absent bars listed in a note."""
    table = backbone_scope(backbones, scope)
    names = _backbone_order([b for b, v in table.items()
                             if v.get("standalone_sr") is not None or v.get("hybrid_sr") is not None])
    if not names:
        return None
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(names) + 2), 4))
    width = 0.38
    missing = []
    for offset, key, label, colour in ((-width / 2, "standalone_sr", "standalone (MPC)", "#8d99ae"),
                                       (width / 2, "hybrid_sr", "hybrid (Hybrid-Full)", "#2a9d8f")):
        xs = [i + offset for i, b in enumerate(names) if table[b].get(key) is not None]
        ys = [table[b][key] for b in names if table[b].get(key) is not None]
        ax.bar(xs, ys, width, color=colour, label=label)
        missing += [f"{b} {label.split()[0]}" for b in names if table[b].get(key) is None]
        paper = [
            (i + offset, paper_numbers.lookup(paper_numbers.TABLE4, b, key).value)
            for i, b in enumerate(names)
            if paper_numbers.lookup(paper_numbers.TABLE4, b, key) is not None
        ]
        if paper:
            ax.scatter(*zip(*paper), **PAPER_STYLE)
    ax.scatter([], [], label="paper (§5.5)", **PAPER_STYLE)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("SR")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    title = f"F4 — backbones ({scope}): standalone vs hybrid SR"
    if missing:
        title += "\nnot measured: " + ", ".join(missing)
    ax.set_title(title, fontsize=9)
    return _save(fig, path)


# --- F5 ------------------------------------------------------------------------------------------


def f5_ablations(summary: dict, path: Path, methods=F5_METHODS, reference: str = F5_REFERENCE) -> Path | None:
    """SR (Wilson bars) and HSR (CI) of the GILP variants, Hybrid-Full as a reference line."""
    methods = [m for m in methods if m in summary]
    if not methods:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    xs = range(len(methods))
    for ax, key, ci_key, colour in (
        (axes[0], "sr", "sr_ci", "#264653"),
        (axes[1], "hsr", "hsr_ci", "#e76f51"),
    ):
        values = [summary[m].get(key) for m in methods]
        cis = [summary[m].get(ci_key) for m in methods]
        errors = [
            [0.0 if v is None or c is None else v - c[0] for v, c in zip(values, cis)],
            [0.0 if v is None or c is None else c[1] - v for v, c in zip(values, cis)],
        ]
        ax.bar(xs, [_nan(v) for v in values], yerr=errors, capsize=4, color=colour, alpha=0.9)
        ref = summary.get(reference, {}).get(key)
        if ref is not None:
            ax.axhline(ref, color="black", linestyle="--", linewidth=1, label=reference)
        paper = [
            (i, paper_numbers.lookup(paper_numbers.TABLE5, m, key).value)
            for i, m in enumerate(methods)
            if paper_numbers.lookup(paper_numbers.TABLE5, m, key) is not None
        ]
        if paper:
            ax.scatter(*zip(*paper), label="paper", **PAPER_STYLE)
        ax.set_xticks(list(xs), [m.replace("GILP-", "") for m in methods], fontsize=8)
        ax.set_ylabel(key.upper())
        ax.grid(axis="y", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    axes[0].set_ylim(0, 1.05)
    fig.suptitle("F5 — GILP ablations (SR: Wilson 95% CI; HSR: per-episode CI)", fontsize=10)
    return _save(fig, path)


# --- F6 ------------------------------------------------------------------------------------------


def indep_curve(p_err: Sequence) -> list[float | None]:
    """IndepBound(H) = 1 − Π_{k ≤ H}(1 − p_err(k)) for H = 1..len(p_err); None from the first
    undefined p_err(k) on."""
    out, survive = [], 1.0
    for p in (x["p"] if isinstance(x, dict) else x for x in p_err):
        if p is None or survive is None:
            survive = None
        else:
            survive *= 1.0 - p
        out.append(None if survive is None else 1.0 - survive)
    return out


def f6_error_proxies(
    summary: dict, path: Path, rows=None, methods=F6_METHODS, h_max: int = H_MAX
) -> Path | None:
    """P̂_any(H) (solid) and IndepBound(H) (dashed) for H = 1..h_max. Without `rows` the bound
    stops at the summary's k_max (10); paper IndepBound@10 as diamonds."""
    eps = _episodes_by_method(rows)
    methods = [m for m in methods if m in summary or m in eps]
    if not methods:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    hs = list(range(1, h_max + 1))
    for i, m in enumerate(methods):
        colour = _colour(m, i)
        if m in eps:
            any_h, pe = metrics.p_any(eps[m], h_max), metrics.p_err(eps[m], h_max)
        else:
            any_h, pe = summary[m].get("p_any", []), summary[m].get("p_err", [])
        p_any = {x["H"]: x["p"] for x in any_h}
        ax.plot(
            hs, [_nan(p_any.get(h)) for h in hs], color=colour, marker="o", markersize=3, label=f"{m} P̂_any"
        )
        bound = indep_curve(pe)[:h_max]
        ax.plot(
            range(1, len(bound) + 1),
            [_nan(b) for b in bound],
            color=colour,
            linestyle="--",
            label=f"{m} IndepBound",
        )
        paper = paper_numbers.lookup(paper_numbers.TABLE6, m, "indep_bound")
        if paper is not None:
            ax.scatter([10], [paper.value], **{**PAPER_STYLE, "color": colour})
    ax.scatter([], [], label="paper IndepBound@10", **{**PAPER_STYLE, "color": "white"})
    ax.set_xlabel("H (steps)")
    ax.set_ylabel("P(some error by step H)")
    ax.set_ylim(0, 1.05)
    ax.set_xticks(hs)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    ax.set_title("F6 — P̂_any(H) (solid) vs IndepBound(H) (dashed)", fontsize=10)
    return _save(fig, path)


# --- all -----------------------------------------------------------------------------------------


def write_figures(
    summary_or_run, out_dir: str | Path, backbones: dict | None = None, rows=None
) -> list[Path]:
    """Writes F1, F2, F5, F6 (and F4 when a backbone table is given) into `out_dir`.

    Args:
      summary_or_run: pooled {method: metrics}, a summary.json dict, or a run directory (then the
        F1/F6 methods' event rows are read from its `events/` unless `rows` is given).
      out_dir: destination folder (created).
      backbones: the backbone table (module docstring), or None to skip F4.
      rows: optional event rows (any methods) for F1's HSR CIs and F6 up to H = 15.
    Returns:
      The PNG paths written, in figure order; figures with nothing to draw are skipped.
    """
    summary = pooled_summary(summary_or_run)
    if rows is None and isinstance(summary_or_run, (str, Path)):
        rows = run_rows(summary_or_run, sorted(set(F1_METHODS) | set(F6_METHODS)))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    drawn = [
        f1_horizons(summary, out / FILES["f1"], rows),
        f2_pareto(summary, out / FILES["f2"]),
        f4_backbones(backbones, out / FILES["f4"]) if backbones else None,
        f5_ablations(summary, out / FILES["f5"]),
        f6_error_proxies(summary, out / FILES["f6"], rows),
    ]
    return [p for p in drawn if p is not None]
