"""PNG figures of studies (matplotlib, no display needed): win rate per layer, per-board ΔF1 of
revision on − off, sweep curves and the head-to-head matrix."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RECOVERY, OVER_REVISION, NEUTRAL = "#2a9d8f", "#e76f51", "#8d99ae"


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return str(path)


def win_rate(data: dict, rows: list[dict], path: Path) -> str:
    """Completion win rate per row with Wilson 95% CI bars (published values as diamonds)."""
    played = [r for r in rows if r["games"]]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(played) + 2), 4))
    xs = range(len(played))
    rates = [100 * r["win_rate"] for r in played]
    errors = [[100 * (r["win_rate"] - r["ci_low"]) for r in played],
              [100 * (r["ci_high"] - r["win_rate"]) for r in played]]
    colours = ["#264653" if r["layer"] != "ref" else NEUTRAL for r in played]
    ax.bar(xs, rates, yerr=errors, capsize=4, color=colours, alpha=0.9)
    published = [(i, 100 * r["published_wins"] / r["published_games"])
                 for i, r in enumerate(played) if r["published_f1"] is not None]
    if published:
        ax.scatter(*zip(*published), marker="D", color="#e9c46a", edgecolor="black", zorder=3,
                   label="published (54 games)")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xticks(list(xs), [f"{r['id']}\n{r['layer']}" if r["layer"] else r["id"]
                             for r in played], fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("win rate (completion, %)")
    n = played[0]["games"] if played else 0
    ax.set_title(f"{data['title']}: {n} games per row, Wilson 95% CI", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def board_delta(delta: dict[str, float], path: Path) -> str:
    """Per-board ΔF1 (revision on − off), sorted: recovery above zero, over-revision below."""
    items = sorted(delta.items(), key=lambda kv: kv[1], reverse=True)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.35 * len(items) + 2), 3.8))
    values = [v for _, v in items]
    colours = [RECOVERY if v > 0 else OVER_REVISION if v < 0 else NEUTRAL for v in values]
    ax.bar(range(len(items)), values, color=colours)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(items)), [b for b, _ in items], rotation=90, fontsize=7)
    ax.set_ylabel("ΔF1 (revision on − off)")
    gained = sum(v > 0 for v in values)
    lost = sum(v < 0 for v in values)
    ax.set_title(f"per-board ΔF1: {gained} boards recover, {lost} over-revise, "
                 f"mean {sum(values) / len(values):+.4f}", fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=RECOVERY),
               plt.Rectangle((0, 0), 1, 1, color=OVER_REVISION)]
    ax.legend(handles, ["recovery", "over-revision"], fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def sweep(data: dict, rows: list[dict], path: Path) -> str:
    """LLM rate (where any row called an LLM), avg F1 and win rate (with its CI band) against
    the swept parameter."""
    param = data["param"]
    played = [r for r in rows if r["games"]]
    xs = [r[param] for r in played]
    numeric = all(isinstance(x, (int, float)) for x in xs)
    positions = xs if numeric else list(range(len(xs)))
    series = [("LLM rate (%)", [100 * r["llm_rate"] for r in played]),
              ("avg F1", [r["avg_f1"] for r in played]),
              ("win rate (%)", [100 * r["win_rate"] for r in played])]
    if not any(series[0][1]):  # no LLM calls anywhere: a panel of zeros says nothing
        series = series[1:]
    fig, axes = plt.subplots(1, len(series), figsize=(4 * len(series), 3.6))
    for ax, (label, values) in zip(axes, series):
        ax.plot(positions, values, marker="o", color="#264653")
        if label.startswith("win"):
            ax.fill_between(positions, [100 * r["ci_low"] for r in played],
                            [100 * r["ci_high"] for r in played], alpha=0.2, color="#264653",
                            label="Wilson 95% CI")
            ax.legend(fontsize=8)
        ax.set_xlabel(param)
        ax.set_ylabel(label)
        if not numeric:
            ax.set_xticks(positions, [str(x) for x in xs], rotation=45, fontsize=8)
        ax.grid(alpha=0.3)
    n = played[0]["games"] if played else 0
    fig.suptitle(f"{data['title']} ({n} games per value)", fontsize=10)
    return _save(fig, path)


def h2h(ids: list[str], matrix: list[list[float]], path: Path) -> str:
    """Head-to-head F1 win rate, row over column."""
    size = len(ids)
    fig, ax = plt.subplots(figsize=(0.7 * size + 2.5, 0.7 * size + 1.5))
    image = ax.imshow([[0.5 if math.isnan(v) else v for v in line] for line in matrix],
                      cmap="RdBu_r", vmin=0, vmax=1)
    for i in range(size):
        for j in range(size):
            if i != j:
                ax.text(j, i, f"{matrix[i][j]:.2f}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(size), ids, rotation=45, fontsize=8)
    ax.set_yticks(range(size), ids, fontsize=8)
    ax.set_title("head-to-head F1 win rate (row over column)", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046)
    return _save(fig, path)
