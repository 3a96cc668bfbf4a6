"""The held-out games of seed indices 100-399 pooled: 5,400 paired games, lookahead vs bayes.

    python experiments/battleship/lookahead/pool.py

Reads `heldout-games.csv.gz` (seeds 100-199), `heldout-200-games.csv.gz` (200-299) and
`heldout-300-games.csv.gz` (300-399), keeps the default captain (gamma 0.85, margin 0.2) and
bayes (gamma 0.95, no shot search) and writes `heldout-5400-table.md`: F1, completion, ΔF1 with
a 95% percentile bootstrap CI over games, and McNemar's exact test on the completions.
"""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pandas as pd

HERE = pathlib.Path(__file__).parent
FILES = ("heldout-games.csv.gz", "heldout-200-games.csv.gz", "heldout-300-games.csv.gz")


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact p of b games won only by one captain and c only by the other."""
    n, k = b + c, min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def main() -> None:
    games = pd.concat([pd.read_csv(HERE / f) for f in FILES])
    look = games[(games.gamma.round(2) == 0.85) & (games.margin.round(2) == 0.2)]
    bayes = games[(games.gamma.round(2) == 0.95) & (games.margin > 1)]
    look, bayes = (g.set_index(["board", "seed"]).sort_index() for g in (look, bayes))
    assert look.index.equals(bayes.index) and look.index.is_unique
    d = (look.f1 - bayes.f1).to_numpy()
    rng = np.random.default_rng(0)
    boot = d[rng.integers(0, len(d), (4000, len(d)))].mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    only_look = int((look.won & ~bayes.won).sum())
    only_bayes = int((~look.won & bayes.won).sum())
    seeds = look.index.get_level_values("seed")
    lines = [f"Seed indices {seeds.min()}-{seeds.max()}, 18 boards, {len(d)} paired games "
             "(the three held-out files pooled)", "",
             "| captain | F1 | completion | shots | shots, won games | questions "
             "| ΔF1 vs bayes [95% CI] |",
             "|---|---|---|---|---|---|---|",
             f"| bayes | {bayes.f1.mean():.4f} | {bayes.won.mean():.1%} | {bayes.shots.mean():.2f} "
             f"| {bayes.shots[bayes.won].mean():.2f} | {bayes.questions.mean():.2f} | – |",
             f"| lookahead (default) | {look.f1.mean():.4f} | {look.won.mean():.1%} | "
             f"{look.shots.mean():.2f} | {look.shots[look.won].mean():.2f} | "
             f"{look.questions.mean():.2f} | {d.mean():+.4f} [{lo:+.4f}, {hi:+.4f}] |", "",
             f"Completed by lookahead only: {only_look}; by bayes only: {only_bayes} "
             f"(McNemar exact p = {mcnemar_exact(only_look, only_bayes):.2g})."]
    (HERE / "heldout-5400-table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
