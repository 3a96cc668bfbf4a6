"""The default look-ahead captain on Grand et al.'s protocol, paired with bayes.

    python experiments/battleship/lookahead/grand.py

Grand's boards (colour and sunk feedback), importance belief with P = 1,000, held-out seed
indices 100-129 (540 games), one batch of 54 games at a time. Writes `grand-540-games.csv.gz`
and `grand-540-table.md` beside this file.
"""

from __future__ import annotations

import pathlib
import time

import numpy as np
import pandas as pd

from bsjax.battleship.harness import api

HERE = pathlib.Path(__file__).parent


def main() -> None:
    games, lines = {}, []
    for agent in ("bayes", "lookahead"):
        start = time.time()
        frame = api.play(agent, protocol="grand", sampler="importance", particles=1000,
                         boards="all", seeds=30, first_seed=100, batch_size=54,
                         progress=False).to_pandas()
        games[agent] = frame.set_index(["board", "seed"]).sort_index()
        lines.append((agent, time.time() - start))
    bayes, look = games["bayes"], games["lookahead"]
    d = (look.f1 - bayes.f1).to_numpy()
    rng = np.random.default_rng(0)
    lo, hi = np.percentile(d[rng.integers(0, len(d), (4000, len(d)))].mean(axis=1), [2.5, 97.5])
    table = [f"Grand protocol, importance belief P = 1000, seeds 100-129, {len(d)} paired games", "",
             "| captain | F1 | completion | shots | questions | ΔF1 vs bayes [95% CI] | wall s |",
             "|---|---|---|---|---|---|---|"]
    for (agent, wall), g in zip(lines, (bayes, look)):
        delta = "–" if agent == "bayes" else f"{d.mean():+.4f} [{lo:+.4f}, {hi:+.4f}]"
        table.append(f"| {agent} | {g.f1.mean():.4f} | {g.won.mean():.1%} | {g.shots.mean():.2f} "
                     f"| {g.questions.mean():.2f} | {delta} | {wall:.0f} |")
    pd.concat([bayes.assign(agent="bayes"), look.assign(agent="lookahead")]).to_csv(
        HERE / "grand-540-games.csv.gz")
    (HERE / "grand-540-table.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    main()
