"""Where bayes's misses and questions go on Grand et al.'s protocol.

    python experiments/battleship/lookahead/grand_misses.py

Bayes on Grand's boards (colour and sunk feedback), importance belief with P = 1,000, training
seed indices 0-2 (54 games). Each miss is classed by the true board at the time it was fired:
next to a hit cell of a ship not yet sunk (finding that ship's extent), elsewhere while such a
ship exists, or a search miss (every ship hit so far is sunk). Each question is classed the same
way (asked while a ship is wounded, or not). Writes `grand-misses.md` beside this file.
"""

from __future__ import annotations

import collections
import pathlib

import numpy as np

from bsjax.battleship.game import suites
from bsjax.battleship.harness import api

HERE = pathlib.Path(__file__).parent
OUT = HERE / "grand-misses.md"
CLASSES = ("miss next to a wounded ship", "miss elsewhere while a ship is wounded", "search miss",
           "question while a ship is wounded", "question while none is")


def neighbours(cell: int, rows: int = 8, cols: int = 8) -> list[int]:
    row, col = divmod(cell, cols)
    return [(row + dr) * cols + col + dc for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1))
            if 0 <= row + dr < rows and 0 <= col + dc < cols]


def classify(turns, boards: dict) -> collections.Counter:
    """Counts per class over the games of `turns` (`Results.turns_frame()`)."""
    counts = collections.Counter()
    for (board, _), game in turns.groupby(["board", "seed"]):
        grid = boards[board].grid.reshape(-1)
        ships = {k: set(np.flatnonzero(grid == k).tolist()) for k in range(1, grid.max() + 1)}
        hit: set[int] = set()
        for turn in game.sort_values("turn").itertuples():
            wounded = [k for k, cells in ships.items() if cells & hit and not cells <= hit]
            if turn.kind == 1:
                counts[CLASSES[3] if wounded else CLASSES[4]] += 1
                continue
            cell = int(turn.cell)
            if grid[cell]:
                hit.add(cell)
            elif any(grid[n] in wounded and n in hit for n in neighbours(cell)):
                counts[CLASSES[0]] += 1
            else:
                counts[CLASSES[1] if wounded else CLASSES[2]] += 1
    return counts


def main() -> None:
    results = api.play("bayes", protocol="grand", sampler="importance", particles=1000,
                       boards="all", seeds=3, first_seed=0, batch_size=54, progress=False)
    games = results.to_pandas()
    counts = classify(results.turns_frame(), {b.board_id: b for b in suites.grand_suite()})
    n = len(games)
    lines = [f"bayes, Grand protocol, importance belief P = 1000, training seeds 0-2, {n} games: "
             f"F1 {games.f1.mean():.4f}, {games.shots.mean():.2f} shots and "
             f"{games.hits.mean():.2f} hits a game", "", "| per game | mean |", "|---|---|"]
    lines += [f"| {name} | {counts[name] / n:.2f} |" for name in CLASSES]
    OUT.write_text("\n".join(lines) + "\n")
    print(OUT.read_text(), end="")


if __name__ == "__main__":
    main()
