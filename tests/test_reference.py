"""Conformance: with the reference's own PRNG streams, bsjax reproduces the paper's main-table
rows exactly (docs/battleship/protocol.md §13.1): B1 greedy, B2 WMA, B3/B4 MRA revision off/on, B5 MRA-LLM
at τ = 0 (which must equal B3 game for game).

Every game of a row is checked against `data/reference_games.json` (hits, shots and questions
of each of the 54 games of each row), and the row's aggregates against the published table,
under `-m slow`; by default `tests/test_freshness.py` plays the same rows through the study
runner and compares them with the committed run files, whose aggregates are the published ones.
`python tests/test_reference.py` rewrites the file from a full run (only after a change that is
meant to move the games).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from bsjax.battleship.agents import make_agent
from bsjax.battleship.belief.chain import ChainSampler
from bsjax.battleship.config import PAPER
from bsjax.battleship.game import suites
from bsjax.battleship.harness.experiment import game_list
from bsjax.battleship.harness.loop import BatchRunner
from bsjax.battleship.harness.player import Player

GOLDEN = Path(__file__).parent / "data" / "reference_games.json"
ROWS = {
    # row: (agent, options, avg F1 to 4 d.p., wins, avg questions to 1 d.p.)
    "B1": ("greedy", {}, 0.5219, 27, 0.0),
    "B2": ("wma", {}, 0.5388, 40, 11.9),
    "B3": ("mra", {"revision": np.bool_(False)}, 0.5523, 31, 8.0),
    "B4": ("mra", {"revision": np.bool_(True)}, 0.5510, 30, 8.0),
    "B5": ("mra-llm", {"tau": np.float32(0.0)}, 0.5523, 31, 8.0),
}
SHIP_CELLS = 14


def _play(agent_name, params, seeds: int):
    """The row's games (the agent's params replaced by `params`), boards outer and seed indices
    inner; `(games, BatchResult)`."""
    with jax.enable_x64(True):
        agent = make_agent(agent_name, PAPER)
        player = Player(PAPER, agent, ChainSampler(PAPER, reference_rng=True), reference_rng=True)
        defaults = jax.device_get(player.default_params())
        games = game_list(suites.synthetic_suite(), seeds,
                          params=defaults.replace(agent=defaults.agent.replace(**params))
                          if params else defaults)
        return games, BatchRunner(player, len(games)).play(games, run_seed=0)


def _per_game(games, result) -> dict[str, list[int]]:
    """`{"BOARD/seed": [hits, shots, questions]}`."""
    return {f"{g.board_id}/{g.seed_index}": [int(h), int(s), int(q)]
            for g, h, s, q in zip(games, result.hits, result.shots, result.questions)}


def _golden() -> dict[str, dict[str, list[int]]]:
    return json.loads(GOLDEN.read_text())


def _row_numbers(games: dict[str, list[int]]) -> tuple[float, int, float]:
    """(avg F1 to 4 d.p., wins, avg questions to 1 d.p.) of a row's per-game triples."""
    hits, shots, questions = (np.array(v, float) for v in zip(*games.values()))
    f1 = round(float((2 * hits / (shots + SHIP_CELLS)).mean()), 4)
    return f1, int((hits == SHIP_CELLS).sum()), round(float(questions.mean()), 1)


@pytest.mark.slow
@pytest.mark.parametrize("row", sorted(ROWS))
def test_reference_streams_reproduce_the_paper_row(row):
    agent, options, f1, wins, questions = ROWS[row]
    games, result = _play(agent, options, seeds=3)
    assert _per_game(games, result) == _golden()[row]
    assert round(float((2 * result.hits / (result.shots + SHIP_CELLS)).mean()), 4) == f1
    assert int(result.won.sum()) == wins
    assert round(float(result.questions.mean()), 1) == questions


def _dump(table: dict[str, dict[str, list[int]]]) -> str:
    """The per-game file's text: one game per line, so a diff shows which games moved."""
    rows = []
    for row, games in sorted(table.items()):
        lines = ",\n".join(f'    "{game}": {json.dumps(v)}' for game, v in sorted(games.items()))
        rows.append(f'  "{row}": {{\n{lines}\n  }}')
    return "{\n" + ",\n".join(rows) + "\n}\n"


if __name__ == "__main__":
    # Rewrite the per-game file from full runs of every row.
    table = {row: _per_game(*_play(agent, options, seeds=3))
             for row, (agent, options, *_) in ROWS.items()}
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(_dump(table))
    print(f"wrote {GOLDEN}", file=sys.stderr)
