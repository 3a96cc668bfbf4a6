"""The committed headline results are what the code plays now.

Every row of the paper's table that the README quotes (`experiments/llm/paper/`, what `make run`
plays) is replayed from its committed config, through the same study runner, and compared game
by game with its committed `games.jsonl` (B1 and B6 in the default tier, all eight under `-m
slow`): the LLM-free rows by playing them, B6 (the embedded model) from its committed call
cache, with a backend that can only replay (a call not in the cache fails, falls back and
changes the game). A change that moves a game fails here until the committed results are
regenerated (`bsjax paper --out experiments/llm/paper` after removing the row's run directory,
then `bsjax report`). Rows B1–B5 must also keep the published numbers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bsjax.battleship.harness import llm_setup
from bsjax.battleship.harness import study as study_lib
from bsjax.battleship.report.tables import PUBLISHED
from bsjax.core.llm.backends import NoBackend
from bsjax.core.llm.call_cache import CallCache
from bsjax.core.llm.structured import LLMClient

COMMITTED = Path(__file__).resolve().parent.parent / "experiments" / "llm" / "paper"
GAME_FIELDS = ("board", "seed", "game_seed", "agent", "sampler", "protocol", "shots", "hits",
               "questions", "f1", "won", "turns", "ship_cells", "llm_calls", "fallbacks")


def _rows(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted(({k: r.get(k) for k in GAME_FIELDS} for r in rows),
                  key=lambda r: (r["board"], r["seed"]))


# Every row of the committed study. The default suite replays two of them: B1 (L1, the belief
# and the greedy shooting every other row builds on) and B6 (L4: MRA's runtime, its gate and the
# local model's committed replies); every row runs under `-m slow`. Each row is replayed alone:
# a game does not depend on the other games of its batch (test_cli's batch-size test), and every
# row, replayed alone, plays its committed games.
ROWS = ("B1", "B2", "B3", "B4", "B5", "B6", "B6-uniform", "bayes")
DEFAULT_ROWS = ("B1", "B6")


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    """`replay(row_id)`: the committed study's row, played now into a temporary study directory
    of its own; returns the study directory."""
    committed = json.loads((COMMITTED / "study.json").read_text())
    rows = {r["id"]: study_lib.Row(r["id"], r["label"], r.get("layer", ""),
                                   tuple(r["overrides"].items()), r.get("needs_llm", False))
            for r in committed["rows"]}
    base = study_lib.RunConfig(**committed["base"])

    def replay_only(cfg, caller, cache_path=None, concurrent=False):
        """The local model's client, answering from the committed call cache only."""
        row = cache_path.parent.name
        copy = tmp_path_factory.mktemp(f"calls-{row}") / "calls.jsonl"
        committed_calls = COMMITTED / "runs" / row / "calls.jsonl"
        if committed_calls.is_file():  # B5's gate never opens: it made no call
            shutil.copy(committed_calls, copy)
        options = llm_setup.LLM_OPTIONS[caller] if cfg.llm_format == "schema" else None
        return LLMClient(NoBackend(name="local", model="gemma-3-270m-q4_k_m"), CallCache(copy),
                         options)

    def play(row_id: str) -> Path:
        out = tmp_path_factory.mktemp(f"paper-{row_id}")
        study = study_lib.Study(committed["kind"], base, (rows[row_id],),
                                committed.get("title", ""), committed.get("param"))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(llm_setup, "make_llm_client",
                          lambda cfg, caller, cache_path=None, concurrent=False: (
                              replay_only(cfg, caller, cache_path) if cfg.llm == "local"
                              else _real_client(cfg, caller, cache_path, concurrent)))
            study_lib.run(study, out / "study")
        return out / "study"
    return play


_real_client = llm_setup.make_llm_client


def test_every_committed_row_has_a_replay_case():
    committed_runs = sorted(p.name for p in (COMMITTED / "runs").iterdir() if p.is_dir())
    committed_rows = [r["id"] for r in json.loads((COMMITTED / "study.json").read_text())["rows"]]
    assert sorted(ROWS) == committed_runs == sorted(committed_rows)


@pytest.mark.parametrize("row", [r if r in DEFAULT_ROWS else pytest.param(r, marks=pytest.mark.slow)
                                 for r in ROWS])
def test_the_code_plays_the_committed_games(replay, row):
    now = _rows(replay(row) / "runs" / row / "games.jsonl")
    assert len(now) == 54
    assert now == _rows(COMMITTED / "runs" / row / "games.jsonl"), (
        f"row {row} no longer plays its committed games: regenerate experiments/llm/paper")


@pytest.mark.parametrize("row", ["B1", "B2", "B3", "B4", "B5"])
def test_the_committed_rows_keep_the_published_numbers(row):
    f1, wins, games, _, _ = PUBLISHED["paper"][row]
    summary = json.loads((COMMITTED / "runs" / row / "summary.json").read_text())
    assert (round(summary["avg_f1"], 3), summary["wins"], summary["games"]) == (f1, wins, games)
