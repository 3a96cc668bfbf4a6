"""Where bayes's misses and questions go on Grand et al.'s protocol.

    python experiments/battleship/lookahead/grand_misses.py

Bayes on Grand's boards (colour and sunk feedback), importance belief with P = 1,000, training
seed indices 0-2 (54 games). Each miss is classed by the true board at the time it was fired:
next to a hit cell of a ship not yet sunk (finding that ship's extent), elsewhere while such a
ship exists, or a search miss (every ship hit so far is sunk). Each question is classed the same
way (asked while a ship is wounded, or not), and by the information its answer carries under
bayes's belief, H_b(p_yes) bits (at most 1 for a yes/no question; the agent records p_yes in
place of a shot's p, and plays bayes's games). Writes `grand-misses.md` beside this file.
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib

import jax.numpy as jnp
import numpy as np

from bsjax.battleship.agents import bayes
from bsjax.battleship.config import GRAND
from bsjax.battleship.game import suites
from bsjax.battleship.harness import api
from bsjax.battleship.planning import scoring, sim
from bsjax.battleship.types import ASK

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


@dataclasses.dataclass(frozen=True)
class QuestionSplitAgent(bayes.BayesAgent):
    """bayes, recording for a question the belief's p_yes of its region where a shot records
    its cell's p."""

    name = "bayes-question-split"

    def decide(self, key, params, view, sampler, belief, state):
        del key
        turn = scoring.summarize_turn(self.config, view, sampler, belief)
        action, p_cell = self.act(params, view, turn)
        answers = sim.answers(action.question_bits[None], turn.parts).astype(jnp.float32)
        p_yes = answers[0] @ turn.parts.weights
        return action, jnp.where(action.kind == ASK, p_yes, p_cell), state


def question_bits(turns) -> np.ndarray:
    """H_b(p_yes) in bits of every question of `turns`."""
    p = turns[turns.kind == 1].hit_probability.to_numpy(float).clip(1e-9, 1 - 1e-9)
    return -(p * np.log2(p) + (1 - p) * np.log2(1 - p))


def main() -> None:
    results = api.play(QuestionSplitAgent(GRAND), protocol="grand", sampler="importance",
                       particles=1000, boards="all", seeds=3, first_seed=0, batch_size=54,
                       progress=False)
    games, turns = results.to_pandas(), results.turns_frame()
    counts = classify(turns, {b.board_id: b for b in suites.grand_suite()})
    bits = question_bits(turns)
    n = len(games)
    lines = [f"bayes, Grand protocol, importance belief P = 1000, training seeds 0-2, {n} games: "
             f"F1 {games.f1.mean():.4f}, {games.shots.mean():.2f} shots and "
             f"{games.hits.mean():.2f} hits a game", "", "| per game | mean |", "|---|---|"]
    lines += [f"| {name} | {counts[name] / n:.2f} |" for name in CLASSES]
    lines += [f"| bits of the questions' answers under the belief, Σ H_b(p_yes) "
              f"| {bits.sum() / n:.2f} |",
              "", f"Each question's answer carries {bits.mean():.4f} bits on average under "
              f"bayes's belief (of 1 for a yes/no question); 90% of them carry more than "
              f"{np.percentile(bits, 10):.4f}, the least {bits.min():.4f}."]
    OUT.write_text("\n".join(lines) + "\n")
    print(OUT.read_text(), end="")


if __name__ == "__main__":
    main()
