"""A random search over the look-ahead captain's question score and γ on the paper protocol.

    python experiments/battleship/lookahead/paper_search.py

The captain at P = 4,000 particles scores F1 0.8001 on the held-out seeds, at the line of the
0.80 aimed at. This asks whether its question choice, bayes's EIG, gains from terms the paper's
own planners use: its questions are scored by EIG + w_gain (the next shot's expected gain)
+ w_mass (the region's unknown mass per cell) + w_cluster (its overlap with the hit clusters'
rows and columns) (`lever_agents.information_and_features`), and γ is drawn too. Point 0 is
the captain itself (γ 0.85, every weight 0). The stages are `grand_search.Search`'s: 12 points
on training seeds 0-11 (216 games each), the best 3 on seeds 12-41 (540 games each), the best
of those on held-out seeds 100-129 (540 games).

Writes `paper-search-games.csv.gz` and `paper-search-table.md` beside this file;
`--table-only` rebuilds the table.
"""

from __future__ import annotations

import pathlib

from grand_levers import table_cli  # the script beside this one
from grand_search import Search
from lever_agents import information_and_features

from bsjax.battleship.agents.lookahead import LookaheadAgent
from bsjax.battleship.config import PAPER

HERE = pathlib.Path(__file__).parent
TABLE = HERE / "paper-search-table.md"

SEARCH = Search(
    agent=LookaheadAgent(PAPER, rule=information_and_features),
    setup=dict(protocol="paper", sampler="particles", particles=4000, boards="all",
               batch_size=54, progress=False),
    base={"gain": 0.0, "mass": 0.0, "cluster": 0.0, "gamma": 0.85},
    ranges=(("gain", -0.02, 0.02), ("mass", -0.02, 0.02), ("cluster", -0.02, 0.02),
            ("gamma", 0.8, 0.9)),
    stages={"search": (0, 12), "confirm": (12, 30), "held out": (100, 30)},
    games_path=HERE / "paper-search-games.csv.gz",
    title="Paper protocol, particle belief P = 4000; the look-ahead captain with "
          "`lever_agents.information_and_features`, point 0 is the captain (γ 0.85)",
    n_points=12, n_confirm=3, seed=1)


def main() -> None:
    table_cli(__doc__, SEARCH.play, SEARCH.table, TABLE)


if __name__ == "__main__":
    main()
