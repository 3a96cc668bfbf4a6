"""The default look-ahead captain on Grand et al.'s protocol, paired with bayes.

    python experiments/battleship/lookahead/grand.py

Grand's boards (colour and sunk feedback), importance belief with P = 1,000, held-out seed
indices 100-129 (540 games), one batch of 54 games at a time. Three captains: bayes; the
default look-ahead captain, whose γ on Grand's protocol is bayes's 0.95 (chosen on Grand's
training seeds); and the same captain with the paper protocol's γ = 0.85, its default before
the threshold was chosen per protocol. Writes `grand-540-games.csv.gz`
and, from it, `grand-540-table.md` beside this file (ΔF1 by `bsjax.core.stats.paired_bootstrap`);
`--table-only` rebuilds the table from the committed games.
"""

from __future__ import annotations

import pathlib
import time

import pandas as pd
from grand_levers import table_cli  # the script beside this one

from bsjax.battleship.harness import api
from bsjax.core.stats import paired_bootstrap

HERE = pathlib.Path(__file__).parent


GAMES, TABLE = HERE / "grand-540-games.csv.gz", HERE / "grand-540-table.md"
# (agent, its name in the table, params)
CAPTAINS = (("bayes", "bayes", None), ("lookahead", "lookahead", None),
            ("lookahead", "lookahead, γ 0.85 (the paper's)", {"gamma": 0.85}))


def play() -> None:
    """Play both captains on the same games; their rows (and wall seconds) to GAMES."""
    frames = []
    for agent, name, params in CAPTAINS:
        start = time.time()
        frame = api.play(agent, params=params, protocol="grand", sampler="importance",
                         particles=1000, boards="all", seeds=30, first_seed=100, batch_size=54,
                         progress=False).to_pandas()
        frame = frame.drop(columns=[c for c in (params or {}) if c in frame])
        frames.append(frame.assign(agent=name, wall_s=round(time.time() - start)))
    pd.concat(frames).to_csv(GAMES, index=False)


def table() -> str:
    """The paired table of GAMES."""
    games = pd.read_csv(GAMES)
    rows = [(name, games[games.agent == name].set_index(["board", "seed"]).sort_index())
            for _, name, _ in CAPTAINS]
    bayes = rows[0][1]
    lines = [f"Grand protocol, importance belief P = 1000, seeds 100-129, {len(bayes)} paired "
             "games", "", "| captain | F1 | completion | shots | questions "
             "| ΔF1 vs bayes [95% CI] | wall s |", "|---|---|---|---|---|---|---|"]
    for agent, g in rows:
        assert g.index.equals(bayes.index)
        delta = paired_bootstrap(g.f1.to_numpy(), bayes.f1.to_numpy())
        change = ("–" if agent == "bayes"
                  else f"{delta.mean:+.4f} [{delta.low:+.4f}, {delta.high:+.4f}]")
        lines.append(f"| {agent} | {g.f1.mean():.4f} | {g.won.mean():.1%} | {g.shots.mean():.2f} "
                     f"| {g.questions.mean():.2f} | {change} | {g.wall_s.iloc[0]} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    table_cli(__doc__, play, table, TABLE)


if __name__ == "__main__":
    main()
