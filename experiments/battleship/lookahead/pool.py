"""The held-out games of seed indices 100-399 pooled: 5,400 paired games, lookahead vs bayes.

    python experiments/battleship/lookahead/pool.py

Reads `heldout-games.csv.gz` (seeds 100-199), `heldout-200-games.csv.gz` (200-299) and
`heldout-300-games.csv.gz` (300-399), keeps the default captain (gamma 0.85, margin 0.2) and
bayes (gamma 0.95, no shot search) and writes `heldout-5400-table.md`: F1, completion, ΔF1 with
a 95% percentile bootstrap CI over games and McNemar's exact test on the completions
(`bsjax.core.stats`: 10,000 resamples, seed 0).
"""

from __future__ import annotations

import pathlib

import pandas as pd

from bsjax.core.stats import mcnemar_exact, paired_bootstrap

HERE = pathlib.Path(__file__).parent
FILES = ("heldout-games.csv.gz", "heldout-200-games.csv.gz", "heldout-300-games.csv.gz")


def main() -> None:
    games = pd.concat([pd.read_csv(HERE / f) for f in FILES])
    look = games[(games.gamma.round(2) == 0.85) & (games.margin.round(2) == 0.2)]
    bayes = games[(games.gamma.round(2) == 0.95) & (games.margin > 1)]
    look, bayes = (g.set_index(["board", "seed"]).sort_index() for g in (look, bayes))
    assert look.index.equals(bayes.index) and look.index.is_unique
    delta = paired_bootstrap(look.f1.to_numpy(), bayes.f1.to_numpy())
    completion = mcnemar_exact(look.won.to_numpy(), bayes.won.to_numpy())
    seeds = look.index.get_level_values("seed")
    lines = [f"Seed indices {seeds.min()}-{seeds.max()}, 18 boards, {len(look)} paired games "
             "(the three held-out files pooled)", "",
             "| captain | F1 | completion | shots | shots, won games | questions "
             "| ΔF1 vs bayes [95% CI] |",
             "|---|---|---|---|---|---|---|",
             f"| bayes | {bayes.f1.mean():.4f} | {bayes.won.mean():.1%} | {bayes.shots.mean():.2f} "
             f"| {bayes.shots[bayes.won].mean():.2f} | {bayes.questions.mean():.2f} | – |",
             f"| lookahead (default) | {look.f1.mean():.4f} | {look.won.mean():.1%} | "
             f"{look.shots.mean():.2f} | {look.shots[look.won].mean():.2f} | "
             f"{look.questions.mean():.2f} | {delta.mean:+.4f} [{delta.low:+.4f}, {delta.high:+.4f}] |", "",
             f"Completed by lookahead only: {completion.only_a}; by bayes only: "
             f"{completion.only_b} (McNemar exact p = {completion.p_value:.2g})."]
    (HERE / "heldout-5400-table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
