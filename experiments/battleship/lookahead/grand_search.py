"""A random search over five of bayes's levers at once on Grand et al.'s protocol.

    python experiments/battleship/lookahead/grand_search.py

The single levers of `grand_levers.py` each leave bayes where it is or lose; this asks whether
some combination of them gains. `lever_agents.CombinedAgent` scores questions by
EIG + w_gain (the next shot's expected gain) + w_drop (the drop of the cells' occupancy
entropy) + w_size (the region's share of the board), and asks by Bayes-D with one γ while no
ship is wounded and another while one is. Grand's boards, importance belief with P = 1,000.

1. **search**: 63 random points and bayes (all weights 0, both γ 0.95) on training seeds 0-11
   (216 games each), one compiled program; each weight is 0 with probability 1/2, so points
   near bayes are drawn too;
2. **confirm**: the five best points by paired ΔF1, and bayes, on fresh training seeds 12-41
   (540 games each);
3. **held out**: the best point of step 2 and bayes on seeds 100-129 (540 games each).

Writes `grand-search-games.csv.gz` and `grand-search-table.md` beside this file (ΔF1 by
`bsjax.core.stats.paired_bootstrap`); `--table-only` rebuilds the table.
"""

from __future__ import annotations

import dataclasses
import pathlib
import time

import numpy as np
import pandas as pd
from grand_levers import table_cli  # the script beside this one
from lever_agents import CombinedAgent  # the module beside this script

from bsjax.battleship.config import GRAND
from bsjax.battleship.harness import api
from bsjax.core.stats import paired_bootstrap

HERE = pathlib.Path(__file__).parent
TABLE = HERE / "grand-search-table.md"
SETUP = dict(protocol="grand", sampler="importance", particles=1000, boards="all",
             batch_size=54, progress=False)
@dataclasses.dataclass(frozen=True)
class Search:
    """A random search in three stages (search, confirm, held out) of `agent`'s params around
    `base` (point 0): `ranges` are (name, low, high), each drawn uniform or left at its base
    value with probability 1/2; `stages` map a stage to its (first seed, seeds)."""

    agent: object
    setup: dict
    base: dict
    ranges: tuple
    stages: dict
    games_path: pathlib.Path
    title: str
    n_points: int = 64
    n_confirm: int = 5
    seed: int = 0

    def draw_points(self) -> list[dict]:
        """The base and `n_points - 1` random points of `ranges`."""
        rng = np.random.default_rng(self.seed)
        points = [dict(self.base)]
        while len(points) < self.n_points:
            point = dict(self.base)
            for name, low, high in self.ranges:
                if rng.random() < 0.5:
                    point[name] = round(float(rng.uniform(low, high)), 5)
            if point not in points:  # the base, drawn again, is no new point
                points.append(point)
        return points

    def play_points(self, stage: str, points: list[dict]) -> pd.DataFrame:
        first, seeds = self.stages[stage]
        start = time.time()
        result = api.play(self.agent, params=points, seeds=seeds, first_seed=first,
                          **self.setup)
        frame = result.to_pandas()
        frame["point"] = np.repeat(np.arange(len(points)), result.f1.shape[1])  # point-major
        return frame.assign(stage=stage, wall_s=round(time.time() - start))

    def play(self) -> None:
        points = self.draw_points()
        search = self.play_points("search", points)
        search["point_id"] = search.point
        gains = sorted(range(1, self.n_points),
                       key=lambda p: -paired(search, p).mean)[:self.n_confirm]
        confirm = self.play_points("confirm", [points[0]] + [points[p] for p in gains])
        confirm["point_id"] = confirm.point.map(dict(enumerate([0] + gains)))
        best = max(range(1, self.n_confirm + 1), key=lambda p: paired(confirm, p).mean)
        held = self.play_points("held out", [points[0], points[gains[best - 1]]])
        held["point_id"] = held.point.map({0: 0, 1: gains[best - 1]})
        pd.concat([search, confirm, held]).drop(columns="point").to_csv(self.games_path,
                                                                        index=False)

    def table(self) -> str:
        games = pd.read_csv(self.games_path).rename(columns={"point_id": "point"})
        names = list(self.base)
        lines = [self.title, "", "| stage | seeds | point | " + " | ".join(names)
                 + " | games | F1 | questions | ΔF1 vs point 0 [95% CI] |",
                 "|---" * (len(names) + 7) + "|"]
        for stage, (first, seeds) in self.stages.items():
            frame = games[games.stage == stage]
            order = sorted(frame.point.unique(), key=lambda p: (p != 0, -paired(frame, p).mean))
            shown = order if stage != "search" else order[:1 + 10]
            for point in shown:
                g = frame[frame.point == point]
                delta = paired(frame, point)
                values = " | ".join(f"{g[k].iloc[0]:g}" for k in names)
                change = ("–" if point == 0
                          else f"{delta.mean:+.4f} [{delta.low:+.4f}, {delta.high:+.4f}]")
                lines.append(f"| {stage} | {first}-{first + seeds - 1} | {point} | {values} "
                             f"| {len(g)} | {g.f1.mean():.4f} | {g.questions.mean():.2f} "
                             f"| {change} |")
            rest = order[len(shown):]
            if stage == "search" and rest:
                deltas = sorted(paired(frame, p).mean for p in rest)
                span = (f"{deltas[0]:+.4f}" if len(deltas) == 1
                        else f"{deltas[0]:+.4f} … {deltas[-1]:+.4f}")
                lines.append(f"| search | {first}-{first + seeds - 1} | the other "
                             f"{len(rest)} point{'s' if len(rest) > 1 else ''} | "
                             + " | ".join("…" for _ in names)
                             + f" | {len(frame) // len(order)} each | | | {span} |")
        return "\n".join(lines) + "\n"


def paired(frame: pd.DataFrame, point: int, base: int = 0):
    games = [frame[frame.point == p].sort_values(["board", "seed"]) for p in (point, base)]
    assert (games[0][["board", "seed"]].to_numpy() == games[1][["board", "seed"]].to_numpy()).all()
    return paired_bootstrap(games[0].f1.to_numpy(), games[1].f1.to_numpy())


# Five levers of `CombinedAgent`; bayes is point 0.
SEARCH = Search(
    agent=CombinedAgent(GRAND), setup=SETUP,
    base={"gamma": 0.95, "gamma_wounded": 0.95, "gain": 0.0, "drop": 0.0, "size": 0.0},
    ranges=(("gamma", 0.9, 1.0), ("gamma_wounded", 0.85, 1.0), ("gain", -0.02, 0.02),
            ("drop", -0.005, 0.005), ("size", -0.02, 0.02)),
    stages={"search": (0, 12), "confirm": (12, 30), "held out": (100, 30)},
    games_path=HERE / "grand-search-games.csv.gz",
    title="Grand protocol, importance belief P = 1000; `lever_agents.CombinedAgent`, point 0 "
          "is bayes")


def main() -> None:
    table_cli(__doc__, SEARCH.play, SEARCH.table, TABLE)


if __name__ == "__main__":
    main()
